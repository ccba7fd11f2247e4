// SPDX-License-Identifier: MIT
/* Write-back errors and ordering: a failed write-back keeps the line dirty
 * and is reported once by the next flush; the device flush comes after the
 * writes; a line modified while being written stays dirty. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache_stub.h"

#define LINE	4096u
#define DEV	(1u << 20)

static void test_flush_error(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t b[100];

	memset(b, 0x77, sizeof(b));
	assert_int_equal(gs_cache_write(c, b, sizeof(b), 3 * LINE + 10), sizeof(b));
	s->fail_writes = 1;
	assert_int_equal(gs_cache_flush(c), -EIO);
	assert_int_equal(stub_stats(c).dirty, 1);
	assert_int_not_equal(s->mem[3 * LINE + 10], 0x77);
	/* the fault is gone: the retry succeeds and the data is on the device */
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(stub_stats(c).dirty, 0);
	assert_memory_equal(s->mem + 3 * LINE + 10, b, sizeof(b));

	/* ENOSPC travels as it is; a range flush elsewhere does not see it */
	assert_int_equal(gs_cache_write(c, b, sizeof(b), 5 * LINE), sizeof(b));
	s->fail_writes = 1;
	s->write_err = -ENOSPC;
	assert_int_equal(gs_cache_flush_range(c, 5 * LINE + 99, 1), -ENOSPC);
	assert_int_equal(gs_cache_flush_range(c, 0, 5 * LINE), 0);
	assert_int_equal(stub_stats(c).dirty, 1);
	assert_int_equal(gs_cache_destroy(c), 0);
	assert_memory_equal(s->mem + 5 * LINE, b, sizeof(b));
	stub_free(s);
}

static void test_evict_error(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 4 * LINE, LINE, 0);
	uint8_t b[LINE], r[LINE];

	/* fill the cache with dirty lines; every write fails */
	memset(b, 0x42, sizeof(b));
	for (int i = 0; i < 4; i++)
		assert_int_equal(gs_cache_write(c, b, 10, (uint64_t)i * LINE), 10);
	s->fail_writes = -1;
	assert_int_equal(gs_cache_read(c, r, 10, 10 * LINE), -EIO);
	assert_int_equal(stub_stats(c).dirty, 4);
	s->fail_writes = 0;
	/* eviction now writes them back; the lost errors wait for a flush */
	for (int i = 10; i < 20; i++)
		assert_int_equal(gs_cache_read(c, r, 10, (uint64_t)i * LINE), 10);
	assert_int_equal(stub_stats(c).dirty, 0);
	for (int i = 0; i < 4; i++)
		assert_memory_equal(s->mem + (uint64_t)i * LINE, b, 10);
	/* reported once, by the flush covering them */
	assert_int_equal(gs_cache_flush_range(c, 8 * LINE, LINE), 0);
	assert_int_equal(gs_cache_flush_range(c, 0, 2 * LINE), -EIO);
	assert_int_equal(gs_cache_flush_range(c, 0, 2 * LINE), 0);
	assert_int_equal(gs_cache_flush(c), -EIO);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_flush_order(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t b[8] = { 1 };
	unsigned int w = 0;

	for (int i = 0; i < 6; i++)
		assert_int_equal(gs_cache_write(c, b, 8, (uint64_t)i * 2 * LINE), 8);
	s->nlog = 0;
	assert_int_equal(gs_cache_flush_range(c, 0, 6 * LINE), 0);
	/* lines 0, 2, 4 written, then the device flush, nothing else */
	assert_int_equal(s->nlog, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(s->log[i].op, 'W');
	assert_int_equal(s->log[3].op, 'F');
	s->nlog = 0;
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(s->nlog, 4);
	for (unsigned int i = 0; i < 3; i++) {
		assert_int_equal(s->log[i].op, 'W');
		w |= 1u << (s->log[i].off / LINE);
	}
	assert_int_equal(w, (1u << 6) | (1u << 8) | (1u << 10));
	assert_int_equal(s->log[3].op, 'F');
	/* nothing dirty: still a device flush */
	s->nlog = 0;
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(s->nlog, 1);
	assert_int_equal(s->log[0].op, 'F');
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

/* ---- a writer changes the line while its write-back is in flight ---- */

static struct gs_cache *hook_cache;
static int hook_armed;

static void redirty_hook(struct stub *s, uint64_t off)
{
	struct gs_line *l;
	uint8_t *d;

	if (!hook_armed)
		return;
	hook_armed = 0;
	/* the device already has the old bytes; the line changes now */
	assert_int_equal(gs_cache_get(hook_cache, off, 0, &l, (void **)&d), 0);
	memset(d, 0xee, 64);
	gs_cache_dirty(hook_cache, l);
	gs_cache_put(hook_cache, l);
}

static void test_redirty_during_writeback(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t b[64];

	memset(b, 0xdd, sizeof(b));
	assert_int_equal(gs_cache_write(c, b, sizeof(b), 2 * LINE), sizeof(b));
	hook_cache = c;
	hook_armed = 1;
	s->write_hook = redirty_hook;
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(s->mem[2 * LINE], 0xdd);
	assert_int_equal(stub_stats(c).dirty, 1);	/* not lost: still dirty */
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(s->mem[2 * LINE], 0xee);
	assert_int_equal(stub_stats(c).dirty, 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

/* ---- concurrent flushes of the same lines while they change ---- */

#define WR_ITERS	400
#define WR_LINES	96	/* more than one write-back batch */

struct wr {
	struct gs_cache *c;
	int id;
	int stop;
	uint32_t last;		/* last value written to the thread's word */
	int err;
};

static void *word_writer(void *arg)
{
	struct wr *w = arg;

	/* every line gets one word per thread: lines are shared, words are not */
	for (uint32_t v = 1; v <= WR_ITERS; v++) {
		for (int n = 0; n < WR_LINES; n++) {
			if (gs_cache_write(w->c, &v, 4, (uint64_t)n * LINE + (uint64_t)w->id * 8) != 4)
				w->err++;
		}
		w->last = v;
	}
	return NULL;
}

static void *flusher(void *arg)
{
	struct wr *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
		if (gs_cache_flush(w->c))
			w->err++;
	return NULL;
}

static void test_concurrent_flush(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 128 * LINE, LINE, 0);
	struct wr w[4], f[2];
	pthread_t tw[4], tf[2];

	for (int i = 0; i < 2; i++) {
		f[i] = (struct wr){ .c = c };
		assert_int_equal(pthread_create(&tf[i], NULL, flusher, &f[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		w[i] = (struct wr){ .c = c, .id = i };
		assert_int_equal(pthread_create(&tw[i], NULL, word_writer, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(tw[i], NULL);
	for (int i = 0; i < 2; i++) {
		__atomic_store_n(&f[i].stop, 1, __ATOMIC_RELEASE);
		pthread_join(tf[i], NULL);
		assert_int_equal(f[i].err, 0);
	}
	assert_int_equal(gs_cache_flush(c), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(w[i].err, 0);
		for (int n = 0; n < WR_LINES; n++) {
			uint32_t v;

			memcpy(&v, s->mem + (uint64_t)n * LINE + (uint64_t)i * 8, 4);
			assert_int_equal(v, WR_ITERS);
		}
	}
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flush_error),
		cmocka_unit_test(test_evict_error),
		cmocka_unit_test(test_flush_order),
		cmocka_unit_test(test_redirty_during_writeback),
		cmocka_unit_test(test_concurrent_flush),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
