// SPDX-License-Identifier: MIT
/*
 * Dirtiness per block ("ND 5"): a line that shares device space with bytes
 * written around the cache (a direct lease's run next to cached fs
 * metadata) must, when written back, write only the blocks that were
 * modified through the cache, never its stale copy of the others -- on a
 * flush, on eviction and on gs_cache_drop_range().  Also: a block dirtied
 * again while its write-back is in flight stays dirty; a failed write-back
 * keeps its blocks dirty.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache_stub.h"

#define LINE	(64u << 10)
#define BLK	4096u
#define DEV	(4u << 20)

static struct gs_cache *cache_blk(struct stub *s, size_t mem)
{
	struct gs_cache_params p = { .mem_bytes = mem, .line_size = LINE, .block_size = BLK };
	struct gs_cache *c = NULL;

	assert_int_equal(cache_create_ops(&c, &stub_ops, s, &p), 0);
	return c;
}

/* The device bytes of block @b of line @n are all @v. */
static void assert_dev(struct stub *s, uint64_t n, uint32_t b, uint8_t v)
{
	for (uint32_t i = 0; i < BLK; i++)
		if (s->mem[n * LINE + b * BLK + i] != v)
			fail_msg("line %llu block %u byte %u: %#x, want %#x", (unsigned long long)n,
				 b, i, s->mem[n * LINE + b * BLK + i], v);
}

/* Metadata in block 0 of line 2 (through the cache, which reads the line);
 * then a direct run over blocks 3..6 of the same line, around the cache. */
static void nd5_setup(struct stub *s, struct gs_cache *c)
{
	uint8_t meta[100];

	memset(meta, 0xaa, sizeof(meta));
	assert_int_equal(gs_cache_write(c, meta, sizeof(meta), 2 * LINE + 8), sizeof(meta));
	memset(s->mem + 2 * LINE + 3 * BLK, 0xd1, 4 * BLK);
}

static void test_nd5_flush(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 16 * LINE);

	nd5_setup(s, c);
	assert_int_equal(gs_cache_flush(c), 0);
	for (uint32_t b = 3; b < 7; b++)
		assert_dev(s, 2, b, 0xd1);
	assert_int_equal(s->mem[2 * LINE + 8], 0xaa);
	/* one block written, not the line */
	assert_int_equal(s->writes, 1);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_nd5_evict(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 4 * LINE);
	uint8_t r[16];

	nd5_setup(s, c);
	/* read enough other lines that line 2 is evicted (written back alone) */
	for (int i = 0; i < 3; i++)
		for (uint64_t n = 10; n < 20; n++)
			assert_int_equal(gs_cache_read(c, r, sizeof(r), n * LINE), sizeof(r));
	assert_int_equal(stub_stats(c).dirty, 0);
	for (uint32_t b = 3; b < 7; b++)
		assert_dev(s, 2, b, 0xd1);
	assert_int_equal(s->mem[2 * LINE + 8], 0xaa);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_nd5_drop(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 16 * LINE);
	uint8_t r[BLK];

	nd5_setup(s, c);
	/* a lease's begin/end: write back the line's dirty block, drop the line */
	assert_int_equal(gs_cache_drop_range(c, 2 * LINE + 3 * BLK, 4 * BLK), 0);
	for (uint32_t b = 3; b < 7; b++)
		assert_dev(s, 2, b, 0xd1);
	assert_int_equal(s->mem[2 * LINE + 8], 0xaa);
	/* the next read sees the direct data, not the copy the line had */
	assert_int_equal(gs_cache_read(c, r, BLK, 2 * LINE + 4 * BLK), BLK);
	for (uint32_t i = 0; i < BLK; i++)
		assert_int_equal(r[i], 0xd1);
	assert_int_equal(stub_stats(c).lines - stub_stats(c).pinned, 16);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

/* Runs: blocks 1, 2 and 9 dirty give two requests, at the right places. */
static void test_runs(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 16 * LINE);
	uint8_t b[2 * BLK];
	unsigned int w = 0;

	memset(b, 0x5c, sizeof(b));
	assert_int_equal(gs_cache_write(c, b, 2 * BLK - 10, LINE + BLK + 5), 2 * BLK - 10);
	assert_int_equal(gs_cache_write(c, b, 1, LINE + 9 * BLK + 100), 1);
	s->nlog = 0;
	assert_int_equal(gs_cache_flush(c), 0);
	for (unsigned int i = 0; i < s->nlog; i++) {
		if (s->log[i].op != 'W')
			continue;
		assert_true(s->log[i].off == LINE + BLK || s->log[i].off == LINE + 9 * BLK);
		w++;
	}
	assert_int_equal(w, 2);
	assert_int_equal(s->mem[LINE + BLK + 5], 0x5c);
	assert_int_equal(s->mem[LINE + 9 * BLK + 100], 0x5c);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

/* A failed write-back keeps its blocks dirty; the retry writes them. */
static void test_error_keeps_blocks(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 16 * LINE);
	uint8_t b[10];

	memset(b, 0x33, sizeof(b));
	assert_int_equal(gs_cache_write(c, b, sizeof(b), 3 * LINE + 7 * BLK), sizeof(b));
	s->fail_writes = 1;
	assert_int_equal(gs_cache_flush(c), -EIO);
	assert_int_equal(stub_stats(c).dirty, 1);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_memory_equal(s->mem + 3 * LINE + 7 * BLK, b, sizeof(b));
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

/* A block dirtied while its line is being written back stays dirty. */
static struct gs_cache *hook_cache;
static void redirty(struct stub *s, uint64_t off)
{
	static const uint8_t v = 0x99;

	s->write_hook = NULL;
	assert_int_equal(gs_cache_write(hook_cache, &v, 1, 5 * LINE + 12 * BLK), 1);
}

static void test_redirty(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = cache_blk(s, 16 * LINE);
	uint8_t b = 0x11;

	hook_cache = c;
	assert_int_equal(gs_cache_write(c, &b, 1, 5 * LINE), 1);
	s->write_hook = redirty;
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(stub_stats(c).dirty, 1);
	assert_int_equal(gs_cache_flush(c), 0);
	assert_int_equal(stub_stats(c).dirty, 0);
	assert_int_equal(s->mem[5 * LINE + 12 * BLK], 0x99);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nd5_flush),
		cmocka_unit_test(test_nd5_evict),
		cmocka_unit_test(test_nd5_drop),
		cmocka_unit_test(test_runs),
		cmocka_unit_test(test_error_keeps_blocks),
		cmocka_unit_test(test_redirty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
