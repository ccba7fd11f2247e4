// SPDX-License-Identifier: MIT
/*
 * Power cuts at every write of an nd write + sync sequence: a space is made
 * on a clean mount; then, mounted with the gs_q fault spec
 * "powercut=N,dead=eio" (a volatile write cache lost at the Nth write, later
 * writes and flushes fail), blocks written for the first time are synced one
 * by one until the cut makes a sync fail.  Remounted without faults: every
 * acknowledged block holds its data, every other block reads as zeros or
 * its data (never EIO, never foreign bytes), fsck (which checks nd indexes)
 * is clean.  N runs over every write of the sequence, so the cut lands
 * once between the superblock / index write-back and the journal commit of
 * each block's slot allocation - where an index entry written before its
 * allocation was committed would be found pointing at nothing.
 *
 * GS_ND_POWERCUT_MAX (default 50: past the end of the sequence) is the last N tried.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "../fs/fs_test.h"
#include "gstore_nd.h"

#define NBLK	6		/* blocks of 256x256 u8 along the space's one block row */
#define BSZ	(256 * 256)

static char *img;

static void fill(uint8_t *b, int cycle, int k)
{
	for (int i = 0; i < BSZ; i++)
		b[i] = (uint8_t)(cycle * 31 + k * 7 + i / 256 + 1);
}

static void fsck_print(void *arg, const char *line)
{
	if (getenv("GS_TEST_VERBOSE"))
		fprintf(stderr, "fsck: %s\n", line);
}

static const struct gs_nd_params P = { .dtype = GS_ND_U8, .ndims = 2, .shape = { 256, 256 * NBLK },
				       .bb = { 256, 256 } };

/* One cycle with the cut at write @n; returns the blocks acknowledged. */
static int cycle(int n)
{
	static uint8_t buf[BSZ], got[BSZ];
	uint64_t ino, one[2] = { 256, 256 };
	char name[16], spec[64];
	struct gs_stat st;
	struct gs_fs *fs;
	struct gs_nd *nd;
	int acked = 0, ret;

	snprintf(name, sizeof(name), "p%d", n);
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_nd_create(fs, 0, name, &P, 0755, NULL), 0);
	assert_int_equal(gs_nd_lookup(fs, name, &ino), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);

	snprintf(spec, sizeof(spec), "powercut=%d,dead=eio", n);
	if (test_mount_fault(&fs, img, spec))
		goto check;	/* cut inside the mount itself */
	ret = gs_nd_open(fs, ino, &nd);
	for (int k = 0; !ret && k < NBLK; k++) {
		uint64_t at[2] = { 0, (uint64_t)k * 256 };

		fill(buf, n, k);
		if (gs_nd_write_slab(nd, at, one, NULL, buf, BSZ) != BSZ || gs_nd_sync(nd))
			break;
		acked++;
	}
	if (!ret)
		gs_nd_close(nd);	/* fails after the cut */
	gs_fs_unmount(fs);		/* likewise: the device is "off" */
check:
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_nd_open(fs, ino, &nd), 0);
	for (int k = 0; k < NBLK; k++) {
		uint64_t at[2] = { 0, (uint64_t)k * 256 };
		bool zero = true;

		fill(buf, n, k);
		assert_int_equal(gs_nd_read_slab(nd, at, one, NULL, got, BSZ), BSZ);
		for (int i = 0; i < BSZ && zero; i++)
			zero = !got[i];
		if (k < acked || !zero) {
			if (memcmp(got, buf, BSZ))
				fail_msg("cut at write %d: block %d (of %d acknowledged) is wrong", n, k,
					 acked);
		}
	}
	assert_int_equal(gs_nd_close(nd), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	ret = gs_fs_fsck(img, GS_FSCK_FORCE, fsck_print, NULL);
	if (ret != GS_FSCK_OK)
		fail_msg("cut at write %d: fsck returned %d (GS_TEST_VERBOSE=1 shows why)", n, ret);
	/* the next cycle gets the space back */
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st), 0);
	assert_int_equal(gs_fs_rmdir(fs, st.ino, name), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	return acked;
}

static void test_cut_everywhere(void **state)
{
	const char *e = getenv("GS_ND_POWERCUT_MAX");
	int max = e ? atoi(e) : 50, full = 0, partial = 0;

	for (int n = 1; n <= max; n++) {
		int a = cycle(n);

		if (a == NBLK)
			full++;
		else if (a > 0)
			partial++;
	}
	print_message("%d cut points: %d cut between acknowledged blocks, %d after all\n", max,
		      partial, full);
	assert_true(partial > 0);	/* the sweep did reach into the sequence */
}

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("ndcut");
	return test_mkfs(img, 64u << 20, 4096);
}

static int teardown(void **state)
{
	unlink(img);
	free(img);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cut_everywhere),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
