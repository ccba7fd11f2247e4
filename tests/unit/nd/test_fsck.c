// SPDX-License-Identifier: MIT
/*
 * fsck's N-D check (fs/nd/nd_fsck.c, nd's entry in the fs type table): a
 * clean image with written spaces checks clean; then one space each gets its
 * index corrupted on purpose - a slot referenced twice, a slot beyond
 * nslots, a slot whose extent was freed (referenced but free), a node
 * pointer outside the index area - and fsck reports each of them
 * (uncorrected), naming the space, and nothing about the space left intact.
 * fsck -y drops the bad entries (the blocks read as zeros), the rest of each
 * space stays readable, and the next check is clean.  A space whose
 * superblock is corrupt is removed by fsck -y, with its data object.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../fs/fs_test.h"
#include "fs/nd/nd_internal.h"

static char *img;

static int fsck(struct test_lines *l)
{
	memset(l, 0, sizeof(*l));
	return gs_fs_fsck(img, GS_FSCK_FORCE, test_lines_add, l);
}

/* A 2-D space "NAME" with blocks (0,0), (0,1) and (1,0) written; returns its ino. */
static uint64_t make_space(struct gs_fs *fs, const char *name)
{
	struct gs_nd_params p = { .dtype = GS_ND_U8, .ndims = 2, .shape = { 1024, 1024 },
				  .bb = { 256, 256 } };
	uint64_t ino, one[2] = { 1, 1 }, at[3][2] = { { 0, 0 }, { 0, 300 }, { 300, 0 } };
	struct gs_nd *nd;
	uint8_t v = 0x5a;

	assert_int_equal(gs_nd_create(fs, 0, name, &p, 0755, &nd), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gs_nd_write_slab(nd, at[i], one, NULL, &v, 1), 1);
	assert_int_equal(gs_nd_close(nd), 0);
	assert_int_equal(gs_nd_lookup(fs, name, &ino), 0);
	return ino;
}

/* Byte offset of entry @i of the level-1 (leaf) node under root entry @r. */
static uint64_t leaf_entry(struct gs_fs *fs, uint64_t ino, uint64_t r, uint64_t i,
			   struct nd_sbx *x)
{
	struct gs_nd_params p;
	uint64_t le;

	assert_int_equal(nd_fs_super(fs, ino, &p, x), 0);
	assert_int_equal(gs_fs_read(fs, ino, &le, 8, x->root + r * 8), 8);
	assert_true(le64toh(le) != 0);
	return le64toh(le) + i * 8;
}

static void put64(struct gs_fs *fs, uint64_t ino, uint64_t off, uint64_t v)
{
	uint64_t le = htole64(v);

	assert_int_equal(gs_fs_write(fs, ino, &le, 8, off), 8);
}

static uint64_t get64(struct gs_fs *fs, uint64_t ino, uint64_t off)
{
	uint64_t le;

	assert_int_equal(gs_fs_read(fs, ino, &le, 8, off), 8);
	return le64toh(le);
}

static bool has(const struct test_lines *l, uint64_t ino, const char *what)
{
	char tag[64];
	const char *p = l->buf;

	snprintf(tag, sizeof(tag), "nd space %" PRIu64 ": ", ino);
	while ((p = strstr(p, tag))) {
		const char *eol = strchr(p, '\n');

		if (strstr(p, what) && (!eol || strstr(p, what) < eol))
			return true;
		p += strlen(tag);
	}
	return false;
}

static void test_index_corruption(void **state)
{
	struct gs_fs *fs = NULL;
	uint64_t ino[5], off, off2;
	struct test_lines l;
	struct nd_sbx x;
	char name[8];

	assert_int_equal(test_mount(&fs, img), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		ino[i] = make_space(fs, name);
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(&l), GS_FSCK_OK);
	assert_null(strstr(l.buf, "nd space"));

	assert_int_equal(test_mount(&fs, img), 0);
	/* s0: block (0,1) points at block (0,0)'s slot */
	off = leaf_entry(fs, ino[0], 0, 0, &x);
	put64(fs, ino[0], off + 8, get64(fs, ino[0], off));
	/* s1: a slot beyond nslots */
	off = leaf_entry(fs, ino[1], 0, 1, &x);
	put64(fs, ino[1], off, x.nslots + 7);
	/* s2: the extent behind block (1,0)'s slot goes back to the allocator */
	off = leaf_entry(fs, ino[2], 1, 0, &x);
	off2 = get64(fs, ino[2], off) - 1;
	assert_int_equal(gs_fs_fallocate(fs, x.data_ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					 off2 * x.slot_bytes, x.slot_bytes), 0);
	/* s3: root entry 1 points past the index area */
	leaf_entry(fs, ino[3], 0, 0, &x);
	put64(fs, ino[3], x.root + 8, x.index_end + 4096);
	/* s4 stays intact */
	assert_int_equal(gs_fs_unmount(fs), 0);

	assert_int_equal(fsck(&l) & ~GS_FSCK_FIXED, GS_FSCK_UNCORRECTED);
	print_message("%s", l.buf);
	assert_true(has(&l, ino[0], "referenced twice"));
	assert_true(has(&l, ino[1], "beyond"));
	assert_true(has(&l, ino[2], "not allocated"));
	assert_true(has(&l, ino[3], "outside the index area"));
	assert_false(has(&l, ino[4], ""));
	/* a read-only check changes nothing: the same findings again */
	assert_int_equal(fsck(&l) & ~GS_FSCK_FIXED, GS_FSCK_UNCORRECTED);
	assert_true(has(&l, ino[0], "referenced twice"));

	/* repair: the bad entries go, the rest stays */
	memset(&l, 0, sizeof(l));
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE | GS_FSCK_REPAIR, test_lines_add, &l),
			 GS_FSCK_FIXED);
	assert_int_equal(fsck(&l), GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	for (int i = 0; i < 5; i++) {
		uint64_t one[2] = { 1, 1 }, at[3][2] = { { 0, 0 }, { 0, 300 }, { 300, 0 } };
		/* what each space still holds at (0,0), (0,1), (1,0) */
		static const uint8_t want[5][3] = {
			{ 0x5a, 0, 0x5a }, { 0x5a, 0, 0x5a }, { 0x5a, 0x5a, 0 },
			{ 0x5a, 0x5a, 0 }, { 0x5a, 0x5a, 0x5a },
		};
		struct gs_nd *nd;

		snprintf(name, sizeof(name), "s%d", i);
		assert_int_equal(gs_nd_open(fs, ino[i], &nd), 0);
		for (int k = 0; k < 3; k++) {
			uint8_t v = 0xee;

			assert_int_equal(gs_nd_read_slab(nd, at[k], one, NULL, &v, 1), 1);
			assert_int_equal(v, want[i][k]);
		}
		assert_int_equal(gs_nd_close(nd), 0);
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
}

static void test_super_corruption(void **state)
{
	struct gs_fs *fs = NULL;
	struct gs_fs_statfs before, after;
	struct test_lines l;
	uint64_t ino, keep;

	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_statfs(fs, &before), 0);
	ino = make_space(fs, "bad");
	keep = make_space(fs, "good");
	put64(fs, ino, 16, 12345);	/* ndims and flags, under the superblock crc */
	assert_int_equal(gs_fs_unmount(fs), 0);

	assert_int_equal(fsck(&l), GS_FSCK_UNCORRECTED);
	assert_true(has(&l, ino, "superblock is corrupt"));
	assert_false(has(&l, keep, ""));
	memset(&l, 0, sizeof(l));
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE | GS_FSCK_REPAIR, test_lines_add, &l),
			 GS_FSCK_FIXED);
	assert_true(has(&l, ino, "space removed"));
	assert_int_equal(fsck(&l), GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_nd_lookup(fs, "bad", &ino), -ENOENT);
	assert_int_equal(gs_nd_lookup(fs, "good", &ino), 0);
	assert_int_equal(gs_fs_statfs(fs, &after), 0);
	assert_int_equal(after.ffree + 2, before.ffree);	/* "good" and its data object */
	assert_int_equal(gs_fs_unmount(fs), 0);
}

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("ndfsck");
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
		cmocka_unit_test(test_index_corruption),
		cmocka_unit_test(test_super_corruption),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
