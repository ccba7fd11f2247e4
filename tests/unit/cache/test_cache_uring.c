// SPDX-License-Identifier: MIT
/*
 * The cache over the real I/O core: gpuq's uring backend on a temporary
 * image file (O_DIRECT where the filesystem allows it), and its fault
 * backend for read/write errors and a simulated power cut.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gstore.h"

#define LINE	16384u
#define DEV	(8u << 20)

static char path[256];
static uint32_t qflags;

/* A fresh image of DEV bytes: byte i is pat(i). */
static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 31 + (i >> 14));
}

static void make_image(void)
{
	uint8_t *b = malloc(DEV);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0 && b);
	for (uint64_t i = 0; i < DEV; i++)
		b[i] = pat(i);
	assert_int_equal(pwrite(fd, b, DEV, 0), DEV);
	close(fd);
	free(b);
}

static void read_image(uint8_t *b)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, DEV, 0), DEV);
	close(fd);
}

static struct gs_q *open_q(const char *fault)
{
	struct gs_q_params p = { .path = path, .flags = qflags, .fault = fault };
	struct gs_q *q = NULL;

	assert_int_equal(gs_q_open(&q, &p), 0);
	return q;
}

static struct gs_cache *new_cache(struct gs_q *q, size_t mem, uint32_t ra)
{
	struct gs_cache_params p = { .mem_bytes = mem, .line_size = LINE, .readahead = ra };
	struct gs_cache *c = NULL;

	assert_int_equal(gs_cache_create(&c, q, &p), 0);
	return c;
}

static int setup(void **state)
{
	struct gs_q_params p = { .path = path };
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct gs_q *q = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/gs-cache-uring-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	make_image();
	/* O_DIRECT if the filesystem takes it (tmpfs does not) */
	if (gs_q_open(&q, &p)) {
		qflags = GS_Q_BUFFERED;
		p.flags = qflags;
		if (gs_q_open(&q, &p))
			return -1;
	}
	gs_q_close(q);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	return 0;
}

/* ---- data through the real queue ---- */

struct worker {
	struct gs_cache *c;
	uint8_t *ref;
	uint64_t seed;
	int id, bad;
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	uint8_t buf[LINE];

	for (int i = 0; i < 1500; i++) {
		/* own lines: n % 4 == id */
		uint64_t n = rnd(&w->seed) % (DEV / LINE);
		uint64_t off, len;

		n = n - n % 4 + (uint64_t)w->id;
		off = n * LINE + rnd(&w->seed) % LINE;
		len = 1 + rnd(&w->seed) % (n * LINE + LINE - off);
		if (rnd(&w->seed) % 2) {
			for (uint64_t k = 0; k < len; k++)
				buf[k] = (uint8_t)rnd(&w->seed);
			if (gs_cache_write(w->c, buf, len, off) != (ssize_t)len)
				w->bad++;
			memcpy(w->ref + off, buf, len);
		} else if (gs_cache_read(w->c, buf, len, off) != (ssize_t)len ||
			   memcmp(buf, w->ref + off, len)) {
			w->bad++;
		}
	}
	return NULL;
}

static void test_data(void **state)
{
	uint8_t *ref = malloc(DEV), *img = malloc(DEV);
	struct gs_q *q = open_q(NULL);
	struct gs_cache *c = new_cache(q, 32 * LINE, 0);
	struct gs_cache_stats st;
	struct worker w[4];
	pthread_t t[4];

	for (uint64_t i = 0; i < DEV; i++)
		ref[i] = pat(i);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .c = c, .ref = ref, .seed = 1 + (uint64_t)i, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	gs_cache_get_stats(c, &st);
	assert_true(st.evictions > 0 && st.writebacks > 0);
	assert_int_equal(gs_cache_flush(c), 0);
	read_image(img);
	assert_memory_equal(img, ref, DEV);
	assert_int_equal(gs_cache_destroy(c), 0);

	/* a new cache on the same queue reads the same bytes */
	c = new_cache(q, 16 * LINE, 4);
	for (uint64_t off = 0; off < DEV; off += LINE) {
		assert_int_equal(gs_cache_read(c, img, LINE, off), LINE);
		assert_memory_equal(img, ref + off, LINE);
	}
	gs_cache_get_stats(c, &st);
	assert_true(st.readahead > 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	gs_q_close(q);
	free(img);
	free(ref);
}

struct same {
	struct gs_cache *c;
	pthread_barrier_t *bar;
	int ret;
	uint8_t first;
};

static void *same_line(void *arg)
{
	struct same *s = arg;
	struct gs_line *l;
	void *d;

	pthread_barrier_wait(s->bar);
	s->ret = gs_cache_get(s->c, 5 * LINE + 3, 0, &l, &d);
	if (!s->ret) {
		s->first = *((uint8_t *)d + 3);
		gs_cache_put(s->c, l);
	}
	return NULL;
}

static void test_coalesce(void **state)
{
	struct gs_q *q = open_q(NULL);
	struct gs_cache *c = new_cache(q, 32 * LINE, 0);
	struct gs_cache_stats st;
	pthread_barrier_t bar;
	struct same s[32];
	pthread_t t[32];

	pthread_barrier_init(&bar, NULL, 32);
	for (int i = 0; i < 32; i++) {
		s[i] = (struct same){ .c = c, .bar = &bar };
		assert_int_equal(pthread_create(&t[i], NULL, same_line, &s[i]), 0);
	}
	for (int i = 0; i < 32; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(s[i].ret, 0);
		assert_int_equal(s[i].first, pat(5 * LINE + 3));
	}
	pthread_barrier_destroy(&bar);
	gs_cache_get_stats(c, &st);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits + st.coalesced, 31);
	assert_int_equal(gs_cache_destroy(c), 0);
	gs_q_close(q);
}

/* ---- the fault backend ---- */

static void test_fault_read(void **state)
{
	struct gs_q *q = open_q("");
	struct gs_cache *c = new_cache(q, 32 * LINE, 0);
	struct gs_line *l;
	void *d;

	assert_int_equal(gs_q_fault(q, "fail=1:EIO,op=read"), 0);
	assert_int_equal(gs_cache_get(c, 2 * LINE, 0, &l, &d), -EIO);
	assert_int_equal(gs_cache_get(c, 2 * LINE, 0, &l, &d), 0);
	assert_int_equal(*(uint8_t *)d, pat(2 * LINE));
	gs_cache_put(c, l);
	assert_int_equal(gs_cache_destroy(c), 0);
	gs_q_close(q);
}

static void test_fault_write(void **state)
{
	uint8_t *img = malloc(DEV), b[100];
	struct gs_q *q = open_q("");
	struct gs_cache *c = new_cache(q, 32 * LINE, 0);
	struct gs_cache_stats st;

	memset(b, 0x99, sizeof(b));
	assert_int_equal(gs_cache_write(c, b, sizeof(b), 7 * LINE + 50), sizeof(b));
	assert_int_equal(gs_q_fault(q, "every=1:ENOSPC,op=write"), 0);
	assert_int_equal(gs_cache_flush(c), -ENOSPC);
	gs_cache_get_stats(c, &st);
	assert_int_equal(st.dirty, 1);
	assert_int_equal(gs_q_fault(q, ""), 0);
	assert_int_equal(gs_cache_flush(c), 0);
	read_image(img);
	assert_memory_equal(img + 7 * LINE + 50, b, sizeof(b));
	assert_int_equal(gs_cache_destroy(c), 0);
	gs_q_close(q);
	free(img);
}

static void test_powercut(void **state)
{
	uint8_t *img = malloc(DEV), *x = malloc(20 * LINE), *y = malloc(20 * LINE);
	struct gs_q *q = open_q("");
	struct gs_cache *c = new_cache(q, 64 * LINE, 0);

	memset(x, 0x58, 20 * LINE);
	memset(y, 0x59, 20 * LINE);
	/* a volatile write cache in the "device": only flushed data is safe */
	assert_int_equal(gs_q_fault(q, "powercut=1000000"), 0);
	assert_int_equal(gs_cache_write(c, x, 20 * LINE, 0), 20 * LINE);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(gs_cache_write(c, y, 20 * LINE, 0), 20 * LINE);
	assert_int_equal(gs_cache_flush_range(c, 0, 10 * LINE), 0);
	/* cut the power at the next write */
	assert_int_equal(gs_q_fault(q, "powercut=1"), 0);
	assert_int_equal(gs_q_pwrite(q, x, LINE, 40 * LINE), LINE);
	read_image(img);
	assert_memory_equal(img, y, 10 * LINE);
	assert_memory_equal(img + 10 * LINE, x, 10 * LINE);
	gs_cache_destroy(c);
	gs_q_close(q);
	free(img);
	free(x);
	free(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_coalesce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_powercut, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
