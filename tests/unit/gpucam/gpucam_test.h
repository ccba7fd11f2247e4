/* SPDX-License-Identifier: MIT */
/*
 * Shared bits of the gpucam tests: a temporary file of a known pattern
 * (setup/teardown for cmocka), block and BaM element checks, and the BaM
 * worker both test programs run.  The including file defines BS, NBLOCKS,
 * NOPS and `static char path[]` (a mkstemp template) first.
 */
#ifndef GPUCAM_TEST_H
#define GPUCAM_TEST_H

static uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int setup(void **state)
{
	int fd = mkstemp(path);
	uint64_t *buf = malloc(BS);

	if (fd < 0 || !buf)
		return -1;
	for (uint64_t b = 0; b < NBLOCKS; b++) {
		for (uint64_t i = 0; i < BS / 8; i++)
			buf[i] = pattern(b * BS + i * 8);
		if (pwrite(fd, buf, BS, b * BS) != BS)
			return -1;
	}
	free(buf);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	return 0;
}

/* 1 if block @id's copy at @dst differs from the pattern */
static int block_bad(const char *dst, uint64_t id)
{
	const uint64_t *w = (const uint64_t *)dst;

	for (uint32_t i = 0; i < BS / 8; i++)
		if (w[i] != pattern(id * BS + i * 8))
			return 1;
	return 0;
}

struct bam_run {
	struct gs_bam *b;
	int id;
	long bad;
};

static uint64_t bam_get(struct gs_bam *b, uint64_t i)
{
	uint64_t page = i * 8 >> b->line_shift, v;
	uint32_t s = gs_bam_get(b, page, 0);

	if (s == GS_BAM_NOSLOT)
		return 0;
	v = *(uint64_t *)(gs_bam_line(b, s) + (i * 8 & ((1u << b->line_shift) - 1)));
	gs_bam_put(b, page);
	return v;
}

static void bam_set(struct gs_bam *b, uint64_t i, uint64_t v)
{
	uint64_t page = i * 8 >> b->line_shift;
	uint32_t s = gs_bam_get(b, page, 1);

	assert_true(s != GS_BAM_NOSLOT);
	*(uint64_t *)(gs_bam_line(b, s) + (i * 8 & ((1u << b->line_shift) - 1))) = v;
	gs_bam_put(b, page);
}

/* Readers check the pattern on pages no one writes; writers own pages
 * [NBLOCKS - 64 + 8 * id, +8) and check their own values. */
static void *bam_worker(void *arg)
{
	struct bam_run *r = arg;
	struct gs_bam *b = r->b;
	uint64_t per_page = BS / 8, wfirst = (NBLOCKS - 64 + 8 * r->id) * per_page;

	for (uint64_t k = 0; k < NOPS; k++) {
		uint64_t x = mix(r->id * 7777ull + k);

		if (k % 3 == 0) {
			uint64_t i = wfirst + x % (8 * per_page);

			bam_set(b, i, i * 3 + 1);
			if (bam_get(b, i) != i * 3 + 1)
				r->bad++;
		} else {
			uint64_t i = x % ((NBLOCKS - 64) * per_page);

			if (bam_get(b, i) != pattern(i * 8))
				r->bad++;
		}
	}
	return NULL;
}

#endif /* GPUCAM_TEST_H */
