// SPDX-License-Identifier: MIT
/* Eviction: pinned lines are never evicted under pressure; dirty data
 * survives eviction, flush, and destroy + create over the same device. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache_stub.h"

#define LINE	4096u
#define DEV	(4u << 20)
#define NLINES	(DEV / LINE)

struct hammer {
	struct gs_cache *c;
	uint64_t seed;
	int tid, nthr;
	uint8_t *ref;		/* shared reference; a thread writes only its own lines */
	int write;
	int iters;
	int bad, enomem;
};

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;
	uint8_t buf[3 * LINE];

	for (int i = 0; i < h->iters; i++) {
		/* lines 16.. only; a writer picks lines n % nthr == tid */
		uint64_t n = 16 + stub_rand(&h->seed) % (NLINES - 16);
		uint64_t off, len;
		ssize_t r;

		if (h->write)
			n = n - n % h->nthr + h->tid;
		if (n >= NLINES)
			continue;
		off = n * LINE + stub_rand(&h->seed) % LINE;
		len = 1 + stub_rand(&h->seed) % (n * LINE + LINE - off);
		if (h->write && stub_rand(&h->seed) % 2) {
			for (uint64_t k = 0; k < len; k++)
				buf[k] = (uint8_t)stub_rand(&h->seed);
			r = gs_cache_write(h->c, buf, len, off);
			if (r == (ssize_t)len)
				memcpy(h->ref + off, buf, len);
		} else {
			r = gs_cache_read(h->c, buf, len, off);
			if (r == (ssize_t)len && memcmp(buf, h->ref + off, len))
				h->bad++;
		}
		if (r == -ENOMEM)
			h->enomem++;
		else if (r != (ssize_t)len)
			h->bad++;
	}
	return NULL;
}

static void run_hammer(struct gs_cache *c, uint8_t *ref, int nthr, int write, int iters)
{
	struct hammer h[16];
	pthread_t t[16];

	for (int i = 0; i < nthr; i++) {
		h[i] = (struct hammer){ .c = c, .seed = 77 + (uint64_t)i * 1001, .tid = i,
					.nthr = nthr, .ref = ref, .write = write, .iters = iters };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
	}
	for (int i = 0; i < nthr; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(h[i].bad, 0);
		assert_int_equal(h[i].enomem, 0);
	}
}

static uint8_t *pattern_ref(void)
{
	uint8_t *ref = malloc(DEV);

	for (uint64_t i = 0; i < DEV; i++)
		ref[i] = stub_pattern(i);
	return ref;
}

static void test_pinned_survive(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 48 * LINE, LINE, 0);
	uint8_t *ref = pattern_ref();
	struct gs_line *l[8], *l2;
	void *d[8], *d2;
	uint8_t mark[8];

	/* pin 8 lines and scribble on them (not dirtied: only memory knows) */
	for (int i = 0; i < 8; i++) {
		assert_int_equal(gs_cache_get(c, (uint64_t)i * LINE, 0, &l[i], &d[i]), 0);
		mark[i] = (uint8_t)(0xc0 + i);
		memset(d[i], mark[i], LINE);
	}
	run_hammer(c, ref, 8, 1, 4000);
	assert_true(stub_stats(c).evictions > 1000);
	for (int i = 0; i < 8; i++) {
		/* still the same line, bytes untouched, found by lookup */
		assert_int_equal(l[i]->tag, (uint64_t)i);
		for (unsigned int k = 0; k < LINE; k++)
			assert_int_equal(((uint8_t *)d[i])[k], mark[i]);
		assert_int_equal(gs_cache_get(c, (uint64_t)i * LINE, 0, &l2, &d2), 0);
		assert_ptr_equal(l2, l[i]);
		gs_cache_put(c, l2);
		gs_cache_put(c, l[i]);
	}
	/* each pinned line was read once */
	for (int i = 0; i < 8; i++)
		assert_int_equal(s->line_reads[i], 1);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	assert_memory_equal(s->mem + 16 * LINE, ref + 16 * LINE, DEV - 16 * LINE);
	free(ref);
	stub_free(s);
}

static void test_dirty_survive(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 8 * LINE, LINE, 0);
	uint8_t *ref = pattern_ref(), *buf = malloc(DEV);
	uint64_t x = 9;

	/* one thread, random writes and reads through 8 lines */
	for (int it = 0; it < 5000; it++) {
		uint64_t off = stub_rand(&x) % (DEV - 4 * LINE);
		size_t len = 1 + stub_rand(&x) % (3 * LINE);

		if (stub_rand(&x) % 3) {
			for (size_t k = 0; k < len; k++)
				buf[k] = (uint8_t)stub_rand(&x);
			assert_int_equal(gs_cache_write(c, buf, len, off), len);
			memcpy(ref + off, buf, len);
		} else {
			assert_int_equal(gs_cache_read(c, buf, len, off), len);
			assert_memory_equal(buf, ref + off, len);
		}
		if (it % 1000 == 999)
			assert_int_equal(gs_cache_flush(c), 0);
	}
	assert_true(stub_stats(c).writebacks > 1000);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(stub_stats(c).dirty, 0);
	assert_memory_equal(s->mem, ref, DEV);

	/* dirty again, then destroy (writes back) and read through a new cache */
	memset(buf, 0x3c, 5 * LINE);
	assert_int_equal(gs_cache_write(c, buf, 5 * LINE, 100), 5 * LINE);
	memcpy(ref + 100, buf, 5 * LINE);
	assert_int_equal(gs_cache_destroy(c), 0);
	c = stub_cache(s, 8 * LINE, LINE, 0);
	assert_int_equal(gs_cache_read(c, buf, DEV, 0), DEV);
	assert_memory_equal(buf, ref, DEV);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(buf);
	free(ref);
	stub_free(s);
}

struct flusher {
	struct gs_cache *c;
	int stop;
	int err;
};

static void *flush_thread(void *arg)
{
	struct flusher *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		if (gs_cache_flush(f->c))
			f->err++;
		if (gs_cache_flush_range(f->c, 100 * LINE, 300 * LINE))
			f->err++;
		usleep(200);
	}
	return NULL;
}

static void test_dirty_survive_threads(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 32 * LINE, LINE, 0);
	uint8_t *ref = pattern_ref(), *buf = malloc(DEV);
	struct flusher f = { .c = c };
	pthread_t ft;

	/* 8 writers on their own lines, through 32 lines, while a flusher runs */
	assert_int_equal(pthread_create(&ft, NULL, flush_thread, &f), 0);
	run_hammer(c, ref, 8, 1, 3000);
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(ft, NULL);
	assert_int_equal(f.err, 0);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_memory_equal(s->mem, ref, DEV);
	assert_int_equal(gs_cache_destroy(c), 0);
	c = stub_cache(s, 8 * LINE, LINE, 0);
	assert_int_equal(gs_cache_read(c, buf, DEV, 0), DEV);
	assert_memory_equal(buf, ref, DEV);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(buf);
	free(ref);
	stub_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pinned_survive),
		cmocka_unit_test(test_dirty_survive),
		cmocka_unit_test(test_dirty_survive_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
