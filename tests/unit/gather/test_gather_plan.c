// SPDX-License-Identifier: MIT
/*
 * gs_cuda_gather()'s planning on the CPU (gpuq/cuda/gather_plan.h: CI has no
 * GPU): rows to blocks for row sizes that divide, span or exceed a block,
 * the sorted unique blocks' layout (a row is one contiguous range of the
 * region, checked byte for byte against an emulated region), runs of blocks
 * that never cross a device extent, and the host tier's chunks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gpuq/cuda/gather_plan.h"

#define SHIFT	12
#define BS	(1u << SHIFT)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* the emulated array's byte at @off */
static uint8_t abyte(uint64_t off)
{
	return (uint8_t)(mix(off >> 3) >> (8 * (off & 7)));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_geom(void **state)
{
	struct gs_gather_geom g;

	assert_int_equal(gs_gather_geom_init(&g, 4096, 0, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 1);
	assert_int_equal(g.nrows, 1000);
	assert_int_equal(gs_gather_geom_init(&g, 8192, 0, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 2);
	assert_int_equal(gs_gather_geom_init(&g, 1024, 0, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 1);	/* rows tile the blocks */
	assert_int_equal(g.nrows, 4000);
	assert_int_equal(gs_gather_geom_init(&g, 400, 0, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 2);	/* 400 does not divide 4096: rows span */
	assert_int_equal(gs_gather_geom_init(&g, 6000, 0, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 3);
	assert_int_equal(gs_gather_geom_init(&g, 1024, 100, 0, SHIFT, 1000), 0);
	assert_int_equal(g.maxb, 2);	/* the base moves rows across block edges */
	assert_int_equal(g.key_bits, 10);	/* 1000 < 1024: the sentinel fits */
	assert_int_equal(gs_gather_geom_init(&g, 4096, 0, 1001, SHIFT, 1000), -GS_ERANGE);
	assert_int_equal(gs_gather_geom_init(&g, 0, 0, 0, SHIFT, 1000), -GS_EINVAL);
	assert_int_equal(gs_gather_geom_init(&g, 4096, 1000ull * BS, 0, SHIFT, 1000), -GS_EINVAL);
	/* a row never touches more blocks than maxb */
	uint64_t sizes[] = { 400, 512, 1000, 4096, 4097, 6000, 8192, 12345 };

	for (unsigned s = 0; s < sizeof(sizes) / 8; s++)
		for (uint64_t base = 0; base < 2 * BS; base += 700) {
			assert_int_equal(gs_gather_geom_init(&g, sizes[s], base, 0, SHIFT, 4096), 0);
			for (uint64_t r = 0; r < g.nrows; r += 7)
				assert_true(gs_gather_row_nblk(&g, r) <= g.maxb);
		}
}

/*
 * The whole plan as the kernels run it: keys, sort, unique, a region with
 * unique block i at i * BS, each row copied from gs_gather_row_src(): the
 * bytes must be the array's.
 */
static void plan_and_check(uint64_t rb, uint64_t base, uint64_t nblocks, uint64_t n)
{
	struct gs_gather_geom g;
	uint64_t *rows = malloc(n * 8), *keys, nk, nu = 0;
	uint8_t *region;

	assert_int_equal(gs_gather_geom_init(&g, rb, base, 0, SHIFT, nblocks), 0);
	keys = malloc(n * g.maxb * 8);
	for (uint64_t i = 0; i < n; i++) {
		rows[i] = i % 5 == 2 ? rows[i / 3] : mix(i + rb * 77 + base) % g.nrows;
		gs_gather_row_keys(&g, rows[i], i % 11 == 4, keys + i * g.maxb);	/* some skipped */
	}
	nk = n * g.maxb;
	qsort(keys, nk, 8, cmp_u64);
	for (uint64_t i = 0; i < nk; i++)
		if (!nu || keys[nu - 1] != keys[i])
			keys[nu++] = keys[i];
	assert_true(nu >= 1);
	region = malloc(nu * BS);
	for (uint64_t i = 0; i < nu; i++)
		for (uint64_t b = 0; keys[i] < g.nblocks && b < BS; b++)
			region[i * BS + b] = abyte((keys[i] << SHIFT) + b);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = gs_gather_row_off(&g, rows[i]);

		if (i % 11 == 4)
			continue;	/* the tier's */
		uint64_t src = gs_gather_row_src(&g, keys, nu, rows[i]);

		assert_true(src + rb <= nu * BS);
		for (uint64_t b = 0; b < rb; b++)
			if (region[src + b] != abyte(off + b))
				fail_msg("rb %llu base %llu row %llu byte %llu",
					 (unsigned long long)rb, (unsigned long long)base,
					 (unsigned long long)rows[i], (unsigned long long)b);
	}
	/* the sentinel sorts last and is never a block */
	for (uint64_t i = 0; i + 1 < nu; i++)
		assert_true(keys[i] < g.nblocks);
	free(region);
	free(keys);
	free(rows);
}

static void test_plan_rows(void **state)
{
	plan_and_check(4096, 0, 2048, 3000);
	plan_and_check(1024, 0, 2048, 3000);
	plan_and_check(400, 0, 2048, 3000);
	plan_and_check(6000, 0, 2048, 700);
	plan_and_check(512, 100, 2048, 3000);
	plan_and_check(12288, 4096, 4096, 300);
	plan_and_check(4096, 0, 16, 200);	/* a small table: every block, many duplicates */
}

/* runs: each unique block read by exactly one run, none across extents or maxrun */
static void test_runs(void **state)
{
	struct gs_cam_ext ext[3] = {
		{ .blk = 0, .nblk = 10, .dev_off = 0 },
		{ .blk = 10, .nblk = 10, .dev_off = 10 * BS },	/* device-contiguous: merges */
		{ .blk = 20, .nblk = 30, .dev_off = 100 * BS },	/* a jump */
	};
	struct gs_cam c;
	uint64_t u[64], n = 0, sentinel = 50;
	int cover[64] = { 0 };

	memset(&c, 0, sizeof(c));
	c.block_shift = SHIFT;
	c.next = 3;
	c.ext = ext;
	c.nblocks = 50;
	for (uint64_t b = 0; b < 30; b++)	/* 0..29: crosses 9/10 (contiguous) and 19/20 */
		u[n++] = b;
	u[n++] = 33;
	u[n++] = 34;
	u[n++] = 40;
	u[n++] = sentinel;	/* skipped rows' key */
	for (uint64_t i = 0; i < n; i++) {
		uint32_t len = gs_gather_run(&c, u, NULL, n, i, 8, sentinel);

		for (uint32_t k = 0; k < len; k++) {
			cover[i + k]++;
			if (k)
				assert_int_equal(u[i + k], u[i] + k);
			/* one device run: offsets follow */
			assert_int_equal(gs_cam_dev_off(&c, u[i + k]),
					 gs_cam_dev_off(&c, u[i]) + (int64_t)k * BS);
		}
		assert_true(len <= 8);
	}
	for (uint64_t i = 0; i + 1 < n; i++)
		assert_int_equal(cover[i], 1);
	assert_int_equal(cover[n - 1], 0);	/* the sentinel is never read */
	/* 0..7 one run (maxrun 8), 8..15 across the contiguous extents, 16..19 stops at 20 */
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 0, 8, sentinel), 8);
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 8, 8, sentinel), 8);
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 16, 8, sentinel), 4);
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 20, 8, sentinel), 4);	/* 20..23 */
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 30, 8, sentinel), 2);	/* 33, 34 */
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 31, 8, sentinel), 0);
	assert_int_equal(gs_gather_run(&c, u, NULL, n, 32, 8, sentinel), 1);	/* 40 */
}

/* blocks the GPU cache holds are never read and break runs */
static void test_runs_hits(void **state)
{
	struct gs_cam c;
	uint64_t u[16], sentinel = 100;
	uint32_t hit[16] = { 0 };

	memset(&c, 0, sizeof(c));
	c.block_shift = SHIFT;
	c.nblocks = 100;
	for (int i = 0; i < 10; i++)
		u[i] = 10 + i;	/* 10..19: one run without hits */
	hit[3] = 7;	/* block 13 is cached */
	assert_int_equal(gs_gather_run(&c, u, hit, 10, 0, 32, sentinel), 3);	/* 10..12 */
	assert_int_equal(gs_gather_run(&c, u, hit, 10, 3, 32, sentinel), 0);
	assert_int_equal(gs_gather_run(&c, u, hit, 10, 4, 32, sentinel), 6);	/* 14..19 */
	assert_int_equal(gs_gather_run(&c, u, hit, 10, 5, 32, sentinel), 0);
	assert_int_equal(gs_gather_run(&c, u, NULL, 10, 0, 32, sentinel), 10);
	/* segments of a row over blocks */
	uint64_t lo, hi;

	assert_true(gs_gather_seg(4000, 400, 0, SHIFT, &lo, &hi));
	assert_int_equal(lo, 4000);
	assert_int_equal(hi, 4096);
	assert_true(gs_gather_seg(4000, 400, 1, SHIFT, &lo, &hi));
	assert_int_equal(lo, 4096);
	assert_int_equal(hi, 4400);
	assert_false(gs_gather_seg(4000, 400, 2, SHIFT, &lo, &hi));
	for (uint64_t b = 0; b < 100000; b += 7)
		assert_true(gs_gather_cache_line(b, 1000) < 1000);
}

static void test_tier(void **state)
{
	struct gs_gather_tier_geom t;
	uint32_t ready[8] = { 0 };

	assert_int_equal(gs_gather_tier_init(&t, 1ull << 40, 5 * 4096 + 100, 12), 0);
	assert_int_equal(t.len, 5 * 4096 + 100);	/* capped at the table */
	assert_int_equal(t.nchunks, 6);
	assert_int_equal(gs_gather_tier_chunk_len(&t, 0), 4096);
	assert_int_equal(gs_gather_tier_chunk_len(&t, 5), 100);
	assert_int_equal(gs_gather_tier_init(&t, 10000, 1ull << 30, 12), 0);
	assert_int_equal(t.nchunks, 3);
	assert_int_equal(gs_gather_tier_chunk_len(&t, 2), 10000 - 8192);
	assert_int_equal(gs_gather_tier_init(&t, 10000, 1ull << 30, 11), -GS_EINVAL);
	/* a row across chunks 0 and 1 needs both */
	ready[0] = 1;
	assert_true(gs_gather_tier_has(&t, ready, 0, 4096));
	assert_false(gs_gather_tier_has(&t, ready, 4000, 400));
	ready[1] = 1;
	assert_true(gs_gather_tier_has(&t, ready, 4000, 400));
	ready[2] = 1;
	assert_true(gs_gather_tier_has(&t, ready, 9000, 1000));
	assert_false(gs_gather_tier_has(&t, ready, 9000, 1001));	/* past the tier */
	t.nchunks = 0;
	assert_false(gs_gather_tier_has(&t, ready, 0, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geom),
		cmocka_unit_test(test_plan_rows),
		cmocka_unit_test(test_runs),
		cmocka_unit_test(test_runs_hits),
		cmocka_unit_test(test_tier),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
