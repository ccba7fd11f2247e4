// SPDX-License-Identifier: MIT
/* Miss coalescing: many threads missing one line cause one device read and
 * all get its data, or all get its error; a later get retries. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache_stub.h"

#define LINE	4096u
#define DEV	(1u << 20)
#define NTHR	64

struct miss {
	struct gs_cache *c;
	pthread_barrier_t *bar;
	uint64_t off;
	int ret;
	uint8_t copy[LINE];
};

static void *miss_thread(void *arg)
{
	struct miss *m = arg;
	struct gs_line *l;
	void *d;

	pthread_barrier_wait(m->bar);
	m->ret = gs_cache_get(m->c, m->off, 0, &l, &d);
	if (!m->ret) {
		memcpy(m->copy, d, LINE);
		gs_cache_put(m->c, l);
	}
	return NULL;
}

/* Hold the read at the gate until @waiters threads wait for it (all but the
 * one reading, or all of them when the read is a read-ahead), so the test
 * does not depend on timing; give up after a while (the asserts then say
 * what went wrong). */
static void run_misses(struct stub *s, struct gs_cache *c, struct miss *m, uint64_t off,
		       unsigned int waiters)
{
	struct gs_cache_stats base = stub_stats(c);
	pthread_t t[NTHR];
	pthread_barrier_t bar;

	pthread_barrier_init(&bar, NULL, NTHR);
	__atomic_store_n(&s->gate_closed, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NTHR; i++) {
		m[i] = (struct miss){ .c = c, .bar = &bar, .off = off + (uint64_t)i * 8 };
		assert_int_equal(pthread_create(&t[i], NULL, miss_thread, &m[i]), 0);
	}
	for (int i = 0; i < 200000; i++) {
		struct gs_cache_stats st = stub_stats(c);

		if (st.coalesced + st.hits - base.coalesced - base.hits >= waiters)
			break;
		usleep(100);
	}
	__atomic_store_n(&s->gate_closed, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NTHR; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

static void test_one_read(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 32 * LINE, LINE, 0);
	struct miss *m = calloc(NTHR, sizeof(*m));
	struct gs_cache_stats st;

	run_misses(s, c, m, 7 * LINE, NTHR - 1);
	for (int i = 0; i < NTHR; i++) {
		assert_int_equal(m[i].ret, 0);
		assert_memory_equal(m[i].copy, s->mem + 7 * LINE, LINE);
	}
	assert_int_equal(s->reads, 1);
	st = stub_stats(c);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.coalesced, NTHR - 1);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(m);
	stub_free(s);
}

static void test_eio_to_all(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 32 * LINE, LINE, 0);
	struct miss *m = calloc(NTHR, sizeof(*m));
	struct gs_line *l;
	void *d;

	s->fail_reads = 1;
	run_misses(s, c, m, 3 * LINE, NTHR - 1);
	for (int i = 0; i < NTHR; i++)
		assert_int_equal(m[i].ret, -EIO);
	assert_int_equal(s->reads, 1);
	assert_int_equal(stub_stats(c).errors, 1);
	assert_int_equal(stub_stats(c).pinned, 0);
	/* the line stayed invalid: the next get reads again, and succeeds */
	assert_int_equal(gs_cache_get(c, 3 * LINE, 0, &l, &d), 0);
	assert_int_equal(s->reads, 2);
	assert_memory_equal(d, s->mem + 3 * LINE, LINE);
	gs_cache_put(c, l);

	/* other errors travel as they are, to every waiter again */
	s->fail_reads = 1;
	s->read_err = -ENOSPC;
	run_misses(s, c, m, 9 * LINE, NTHR - 1);
	for (int i = 0; i < NTHR; i++)
		assert_int_equal(m[i].ret, -ENOSPC);
	assert_int_equal(s->reads, 3);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(m);
	stub_free(s);
}

struct mix {
	struct gs_cache *c;
	uint64_t seed;
	int bad;
};

static void *mix_thread(void *arg)
{
	struct mix *m = arg;

	for (int i = 0; i < 3000; i++) {
		uint64_t off = (stub_rand(&m->seed) % (32 * LINE)) & ~7ull;
		struct gs_line *l;
		uint8_t *d;

		if (gs_cache_get(m->c, off, 0, &l, (void **)&d)) {
			m->bad++;
			continue;
		}
		if (d[off % LINE] != stub_pattern(off))
			m->bad++;
		gs_cache_put(m->c, l);
	}
	return NULL;
}

static void test_many_lines(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 64 * LINE, LINE, 0);
	struct mix m[16];
	pthread_t t[16];
	uint64_t total = 0;

	for (int i = 0; i < 16; i++) {
		m[i] = (struct mix){ .c = c, .seed = 1000 + (uint64_t)i };
		assert_int_equal(pthread_create(&t[i], NULL, mix_thread, &m[i]), 0);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(m[i].bad, 0);
	}
	/* the cache holds all 32 lines: each was read once */
	for (int i = 0; i < 32; i++) {
		assert_true(s->line_reads[i] <= 1);
		total += s->line_reads[i];
	}
	assert_int_equal(total, stub_stats(c).misses);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_wait_for_readahead(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 32 * LINE, LINE, 0);
	struct miss *m = calloc(NTHR, sizeof(*m));

	/* the read in flight is a read-ahead: the getters wait for it */
	s->gate_closed = 1;
	gs_cache_readahead(c, 5 * LINE, LINE);
	run_misses(s, c, m, 5 * LINE, NTHR);
	for (int i = 0; i < NTHR; i++) {
		assert_int_equal(m[i].ret, 0);
		assert_memory_equal(m[i].copy, s->mem + 5 * LINE, LINE);
	}
	assert_int_equal(s->reads, 1);
	assert_int_equal(stub_stats(c).misses, 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(m);
	stub_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_read),
		cmocka_unit_test(test_eio_to_all),
		cmocka_unit_test(test_many_lines),
		cmocka_unit_test(test_wait_for_readahead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
