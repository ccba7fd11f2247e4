// SPDX-License-Identifier: MIT
/* Every namespace and data operation: rename, xattrs, setattr, statfs,
 * fallocate, large sparse files, ENOSPC, open-unlinked objects, internal
 * objects, bmap/alloc_extent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/xattr.h>

#include "fs_test.h"
#include "gstore_format.h"

static char *img;
static struct gs_fs *fs;
static uint64_t arrays;

static int setup(void **state)
{
	return test_scratch("ops", 64u << 20, &img, &fs, &arrays);
}

static int teardown(void **state)
{
	return test_scratch_end(img, fs);
}

static void remount(void)
{
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(test_mount(&fs, img), 0);
}

static uint64_t mk(uint64_t dir, const char *name, uint32_t type)
{
	struct gs_stat st;

	assert_int_equal(gs_fs_create(fs, dir, name, type, 0644, 0, 0, &st), 0);
	return st.ino;
}

static void test_rename(void **state)
{
	struct gs_stat st, st2;
	uint64_t a = mk(arrays, "ra", GS_T_ARRAY), b = mk(arrays, "rb", GS_T_ARRAY);
	uint64_t d = mk(arrays, "rd", GS_T_DIR), d2 = mk(d, "inner", GS_T_DIR);

	assert_int_equal(gs_fs_write(fs, a, "AAAA", 4, 0), 4);
	assert_int_equal(gs_fs_write(fs, b, "BB", 2, 0), 2);
	/* plain rename */
	assert_int_equal(gs_fs_rename(fs, arrays, "ra", arrays, "ra2", 0), 0);
	assert_int_equal(gs_fs_lookup(fs, arrays, "ra", &st), -ENOENT);
	assert_int_equal(gs_fs_lookup(fs, arrays, "ra2", &st), 0);
	assert_int_equal(st.ino, a);
	/* over an existing file: the target is freed */
	assert_int_equal(gs_fs_rename(fs, arrays, "ra2", arrays, "rb", RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(gs_fs_rename(fs, arrays, "ra2", arrays, "rb", 0), 0);
	assert_int_equal(gs_fs_lookup(fs, arrays, "rb", &st), 0);
	assert_int_equal(st.ino, a);
	assert_int_equal(gs_fs_getattr(fs, b, &st), -ENOENT);
	/* exchange */
	b = mk(arrays, "rc", GS_T_ARRAY);
	assert_int_equal(gs_fs_rename(fs, arrays, "rb", arrays, "rc", RENAME_EXCHANGE), 0);
	assert_int_equal(gs_fs_lookup(fs, arrays, "rb", &st), 0);
	assert_int_equal(st.ino, b);
	assert_int_equal(gs_fs_lookup(fs, arrays, "rc", &st), 0);
	assert_int_equal(st.ino, a);
	assert_int_equal(gs_fs_rename(fs, arrays, "rb", arrays, "zz", RENAME_EXCHANGE), -ENOENT);
	assert_int_equal(gs_fs_rename(fs, arrays, "rb", arrays, "zz", 3), -EINVAL);
	/* directories: into another dir, not below itself, not over a file */
	assert_int_equal(gs_fs_rename(fs, arrays, "rd", d2, "x", 0), -EINVAL);
	assert_int_equal(gs_fs_rename(fs, arrays, "rd", arrays, "rc", 0), -ENOTDIR);
	assert_int_equal(gs_fs_rename(fs, arrays, "rc", arrays, "rd", 0), -EISDIR);
	assert_int_equal(gs_fs_getattr(fs, arrays, &st), 0);
	uint32_t nl = st.nlink;

	assert_int_equal(gs_fs_rename(fs, d, "inner", GS_ROOT_INO, "moved", 0), 0);
	assert_int_equal(gs_fs_getattr(fs, d, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "moved", &st), 0);
	assert_int_equal(st.parent, GS_ROOT_INO);
	assert_int_equal(gs_fs_lookup(fs, d2, "..", &st2), 0);
	assert_int_equal(st2.ino, GS_ROOT_INO);
	/* a dir over an empty dir */
	assert_int_equal(gs_fs_rename(fs, GS_ROOT_INO, "moved", arrays, "rd", 0), 0);
	assert_int_equal(gs_fs_getattr(fs, d, &st), -ENOENT);
	assert_int_equal(gs_fs_getattr(fs, arrays, &st), 0);
	assert_int_equal(st.nlink, nl);
	remount();
	assert_int_equal(gs_fs_lookup(fs, arrays, "rd", &st), 0);
	assert_int_equal(st.ino, d2);
	char buf[8];

	assert_int_equal(gs_fs_lookup(fs, arrays, "rc", &st), 0);
	assert_int_equal(gs_fs_read(fs, st.ino, buf, 8, 0), 4);
	assert_memory_equal(buf, "AAAA", 4);
}

static void test_xattr(void **state)
{
	uint64_t a = mk(arrays, "xa", GS_T_ARRAY);
	char buf[256], list[256];

	assert_int_equal(gs_fs_getxattr(fs, a, "user.gstore.dtype", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(gs_fs_setxattr(fs, a, "user.gstore.dtype", "f32", 3, 0), 0);
	assert_int_equal(gs_fs_setxattr(fs, a, "user.gstore.shape", "10,20", 5, XATTR_CREATE), 0);
	assert_int_equal(gs_fs_setxattr(fs, a, "user.gstore.shape", "1", 1, XATTR_CREATE), -EEXIST);
	assert_int_equal(gs_fs_setxattr(fs, a, "user.nope", "1", 1, XATTR_REPLACE), -ENODATA);
	assert_int_equal(gs_fs_getxattr(fs, a, "user.gstore.dtype", NULL, 0), 3);
	assert_int_equal(gs_fs_getxattr(fs, a, "user.gstore.dtype", buf, 2), -ERANGE);
	assert_int_equal(gs_fs_setxattr(fs, a, "user.gstore.dtype", "float64", 7, XATTR_REPLACE),
			 0);
	remount();
	assert_int_equal(gs_fs_getxattr(fs, a, "user.gstore.dtype", buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "float64", 7);
	int n = gs_fs_listxattr(fs, a, NULL, 0);

	assert_int_equal(n, (int)sizeof("user.gstore.dtype") * 2);
	assert_int_equal(gs_fs_listxattr(fs, a, list, sizeof(list)), n);
	assert_true(!strcmp(list, "user.gstore.dtype") || !strcmp(list, "user.gstore.shape"));
	assert_int_equal(gs_fs_listxattr(fs, a, list, 3), -ERANGE);
	assert_int_equal(gs_fs_removexattr(fs, a, "user.gstore.dtype"), 0);
	assert_int_equal(gs_fs_removexattr(fs, a, "user.gstore.dtype"), -ENODATA);
	assert_int_equal(gs_fs_removexattr(fs, a, "user.gstore.shape"), 0);
	assert_int_equal(gs_fs_listxattr(fs, a, NULL, 0), 0);
	/* over the VFS's 64 KiB (larger ones: tests/unit/fs/test_posix.c) */
	char *big = calloc(1, 65537);

	assert_int_equal(gs_fs_setxattr(fs, a, "user.big", big, 65537, 0), -E2BIG);
	free(big);
	/* directories take xattrs too */
	assert_int_equal(gs_fs_setxattr(fs, arrays, "user.d", "x", 1, 0), 0);
	assert_int_equal(gs_fs_removexattr(fs, arrays, "user.d"), 0);
}

static void test_setattr_statfs(void **state)
{
	uint64_t a = mk(arrays, "sa", GS_T_ARRAY);
	struct gs_stat in = {0}, st;
	struct gs_fs_statfs sf, sf2;

	in.mode = 0600;
	in.uid = 42;
	in.gid = 43;
	in.mtime.tv_sec = 1000;
	in.mtime.tv_nsec = 5;
	in.atime.tv_sec = 2000;
	assert_int_equal(gs_fs_setattr(fs, a, &in, GS_SET_MODE | GS_SET_UID | GS_SET_GID |
				       GS_SET_MTIME | GS_SET_ATIME, &st), 0);
	remount();
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 0600);
	assert_int_equal(st.uid, 42);
	assert_int_equal(st.gid, 43);
	assert_int_equal(st.mtime.tv_sec, 1000);
	assert_int_equal(st.mtime.tv_nsec, 5);
	assert_int_equal(st.atime.tv_sec, 2000);
	assert_int_equal(gs_fs_setattr(fs, arrays, &in, GS_SET_SIZE, &st), -EISDIR);

	assert_int_equal(gs_fs_statfs(fs, &sf), 0);
	assert_int_equal(sf.block_size, 4096);
	assert_int_equal(sf.blocks, (64u << 20) / 4096);
	assert_true(sf.bfree < sf.blocks && sf.ffree < sf.files);
	uint8_t *buf = calloc(1, 1 << 20);

	assert_int_equal(gs_fs_write(fs, a, buf, 1 << 20, 0), 1 << 20);
	assert_int_equal(gs_fs_statfs(fs, &sf2), 0);
	assert_int_equal(sf.bfree - sf2.bfree, 256);
	assert_int_equal(sf.ffree, sf2.ffree);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.blocks, (1 << 20) / 512);
	free(buf);

	char text[4096];

	assert_true(gs_fs_info_text(fs, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "block_size: 4096"));
	assert_true(gs_fs_stats_text(fs, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "cache_hits:"));
	assert_non_null(strstr(text, "q_requests:"));
}

static void test_fallocate(void **state)
{
	uint64_t a = mk(arrays, "fa", GS_T_ARRAY);
	struct gs_stat st;
	uint8_t buf[20000], zero[20000] = {0};

	assert_int_equal(gs_fs_fallocate(fs, a, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(gs_fs_fallocate(fs, a, FALLOC_FL_PUNCH_HOLE, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(gs_fs_fallocate(fs, a, FALLOC_FL_ZERO_RANGE, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(gs_fs_fallocate(fs, a, 0, 0, 100000), 0);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.size, 100000);
	assert_int_equal(st.blocks, 25 * 8);
	assert_int_equal(gs_fs_read(fs, a, buf, sizeof(buf), 5000), sizeof(buf));
	assert_memory_equal(buf, zero, sizeof(buf));
	/* KEEP_SIZE: blocks past EOF, size unchanged */
	assert_int_equal(gs_fs_fallocate(fs, a, FALLOC_FL_KEEP_SIZE, 100000, 100000), 0);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.size, 100000);
	assert_int_equal(st.blocks, 49 * 8);
	/* writes into unwritten blocks: partial, the rest stays zero */
	test_fill(buf, sizeof(buf), 7);
	assert_int_equal(gs_fs_write(fs, a, buf, 1000, 6000), 1000);
	uint8_t out[20000];

	assert_int_equal(gs_fs_read(fs, a, out, 12288, 0), 12288);
	assert_memory_equal(out, zero, 6000);
	assert_memory_equal(out + 6000, buf, 1000);
	assert_memory_equal(out + 7000, zero, 12288 - 7000);
	/* punch: partial blocks zeroed, whole blocks freed */
	assert_int_equal(gs_fs_write(fs, a, buf, 20000, 40000), 20000);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	uint64_t before = st.blocks;

	assert_int_equal(gs_fs_fallocate(fs, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 41000,
					 15000), 0);
	assert_int_equal(gs_fs_read(fs, a, out, 20000, 40000), 20000);
	assert_memory_equal(out, buf, 1000);
	assert_memory_equal(out + 1000, zero, 15000);
	assert_memory_equal(out + 16000, buf + 16000, 4000);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.size, 100000);
	assert_int_equal(st.blocks, before - 2 * 8);	/* blocks 11 and 12 of 41000..56000 */
	remount();
	assert_int_equal(gs_fs_read(fs, a, out, 20000, 40000), 20000);
	assert_memory_equal(out + 1000, zero, 15000);
	assert_memory_equal(out + 16000, buf + 16000, 4000);
}

static void test_sparse_large(void **state)
{
	uint64_t a = mk(arrays, "big", GS_T_ARRAY);
	const uint64_t far = 5ULL << 30;	/* 5 GiB: past 32-bit offsets */
	uint8_t buf[8192], out[8192], zero[8192] = {0};
	struct gs_stat st, in = {0};
	struct gs_fs_statfs sf0, sf1;

	assert_int_equal(gs_fs_statfs(fs, &sf0), 0);
	test_fill(buf, sizeof(buf), 9);
	assert_int_equal(gs_fs_write(fs, a, buf, sizeof(buf), far), sizeof(buf));
	assert_int_equal(gs_fs_write(fs, a, buf, 100, 12345), 100);
	/* many scattered extents: the map needs tree blocks */
	for (int i = 0; i < 400; i++)
		assert_int_equal(gs_fs_write(fs, a, buf + i, 10, (uint64_t)i * (7 << 20) + 1), 10);
	assert_int_equal(gs_fs_getattr(fs, a, &st), 0);
	assert_int_equal(st.size, far + sizeof(buf));
	assert_true(st.blocks < 1000 * 8);
	remount();
	assert_int_equal(gs_fs_read(fs, a, out, sizeof(out), far), sizeof(out));
	assert_memory_equal(out, buf, sizeof(buf));
	assert_int_equal(gs_fs_read(fs, a, out, sizeof(out), far - 8192), sizeof(out));
	assert_memory_equal(out, zero, sizeof(out));
	for (int i = 0; i < 400; i++) {
		assert_int_equal(gs_fs_read(fs, a, out, 10, (uint64_t)i * (7 << 20) + 1), 10);
		assert_memory_equal(out, buf + i, 10);
	}
	assert_int_equal(gs_fs_read(fs, a, out, 100, 12345), 100);
	assert_memory_equal(out, buf, 100);
	/* reads past EOF are short */
	assert_int_equal(gs_fs_read(fs, a, out, sizeof(out), far + 4096), 4096);
	assert_int_equal(gs_fs_read(fs, a, out, sizeof(out), far + sizeof(buf)), 0);
	/* truncate frees */
	in.size = 1 << 20;
	assert_int_equal(gs_fs_setattr(fs, a, &in, GS_SET_SIZE, &st), 0);
	in.size = 0;
	assert_int_equal(gs_fs_setattr(fs, a, &in, GS_SET_SIZE, &st), 0);
	assert_int_equal(st.blocks, 0);
	assert_int_equal(gs_fs_sync(fs), 0);
	remount();	/* frees become reusable after a checkpoint */
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_true(sf1.bfree + 1 >= sf0.bfree);	/* at most a directory block more */
	assert_int_equal(gs_fs_write(fs, a, buf, 1, 1ULL << 62), -EFBIG);
}

static void test_enospc(void **state)
{
	char *small = test_image_path("enospc");
	struct gs_fs *sfs;
	struct gs_stat st;
	uint8_t *buf = malloc(1 << 20), *out = malloc(1 << 20);
	uint64_t ino, written = 0;
	ssize_t r;
	int files = 0;

	assert_int_equal(test_mkfs(small, 8u << 20, 4096), 0);
	assert_int_equal(test_mount(&sfs, small), 0);
	assert_int_equal(gs_fs_create(sfs, GS_ROOT_INO, "f", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	ino = st.ino;
	for (;;) {
		test_fill(buf, 1 << 20, written >> 20);
		r = gs_fs_write(sfs, ino, buf, 1 << 20, written);
		if (r < 0)
			break;
		assert_int_equal(r, 1 << 20);
		written += 1 << 20;
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(written >= (2u << 20));
	/* small writes fill the rest, then fail cleanly too */
	for (;;) {
		test_fill(buf, 4096, written >> 12);
		r = gs_fs_write(sfs, ino, buf, 4096, written);
		if (r < 0)
			break;
		written += 4096;
	}
	assert_int_equal(r, -ENOSPC);
	/* metadata still works from the reserve: names, a few files */
	for (files = 0; files < 5; files++) {
		char name[16];

		sprintf(name, "e%d", files);
		assert_int_equal(gs_fs_create(sfs, GS_ROOT_INO, name, GS_T_ARRAY, 0644, 0, 0, NULL),
				 0);
	}
	/* exhaust the metadata reserve too: names and xattrs fail cleanly, the
	 * filesystem does not stop (no EIO) */
	for (int i = 0; i < 5000; i++) {
		char name[96];
		struct gs_stat xs;

		sprintf(name, "meta-%d-with-a-long-name-to-fill-directory-blocks", i);
		r = gs_fs_create(sfs, GS_ROOT_INO, name, GS_T_ARRAY, 0644, 0, 0, &xs);
		if (!r)
			r = gs_fs_setxattr(sfs, xs.ino, "user.pad", name, strlen(name), 0);
		if (r)
			break;
	}
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(gs_fs_write(sfs, ino, buf, 4096, written + (1 << 20)), -ENOSPC);
	assert_int_equal(gs_fs_fallocate(sfs, ino, 0, written, 1 << 20), -ENOSPC);
	assert_int_equal(gs_fs_fsync(sfs, ino, 0), 0);
	assert_int_equal(gs_fs_unmount(sfs), 0);
	assert_int_equal(test_mount(&sfs, small), 0);
	assert_int_equal(gs_fs_getattr(sfs, ino, &st), 0);
	assert_int_equal(st.size, written);
	for (uint64_t off = 0; off + (1 << 20) <= written; off += 1 << 20) {
		test_fill(buf, 1 << 20, off >> 20);
		assert_int_equal(gs_fs_read(sfs, ino, out, 1 << 20, off), 1 << 20);
		assert_memory_equal(out, buf, 1 << 20);
	}
	/* freeing makes room again (after the checkpoint at remount) */
	assert_int_equal(gs_fs_unlink(sfs, GS_ROOT_INO, "f"), 0);
	assert_int_equal(gs_fs_unmount(sfs), 0);
	assert_int_equal(test_mount(&sfs, small), 0);
	assert_int_equal(gs_fs_create(sfs, GS_ROOT_INO, "g", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	assert_int_equal(gs_fs_write(sfs, st.ino, buf, 1 << 20, 0), 1 << 20);
	assert_int_equal(gs_fs_unmount(sfs), 0);
	assert_int_equal(gs_fs_fsck(small, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
	unlink(small);
	free(small);
	free(buf);
	free(out);
}

static void test_open_unlinked(void **state)
{
	uint64_t a = mk(arrays, "ou", GS_T_ARRAY);
	struct gs_fs_statfs sf0, sf1;
	char buf[16];

	assert_int_equal(gs_fs_write(fs, a, "hello", 5, 0), 5);
	assert_int_equal(gs_fs_open(fs, a, O_RDWR), 0);
	assert_int_equal(gs_fs_statfs(fs, &sf0), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "ou"), 0);
	/* still readable and writable through the open reference */
	assert_int_equal(gs_fs_read(fs, a, buf, 16, 0), 5);
	assert_int_equal(gs_fs_write(fs, a, "J", 1, 0), 1);
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_int_equal(sf0.ffree, sf1.ffree);
	assert_int_equal(gs_fs_release(fs, a), 0);
	assert_int_equal(gs_fs_release(fs, a), -EINVAL);
	assert_int_equal(gs_fs_getattr(fs, a, &(struct gs_stat){0}), -ENOENT);
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_int_equal(sf0.ffree + 1, sf1.ffree);

	/* an orphan left by a "crash" (no release) is freed at the next mount */
	uint64_t b = mk(arrays, "orph", GS_T_ARRAY);

	assert_int_equal(gs_fs_open(fs, b, O_RDONLY), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "orph"), 0);
	assert_int_equal(gs_fs_sync(fs), 0);
	assert_int_equal(gs_fs_release(fs, b), 0);	/* frees it now */
	assert_int_equal(gs_fs_getattr(fs, b, &(struct gs_stat){0}), -ENOENT);
}

static void test_internal(void **state)
{
	uint64_t nd, i1, i2;
	struct gs_fs_statfs sf0, sf1;
	uint8_t buf[8192];

	assert_int_equal(gs_fs_statfs(fs, &sf0), 0);
	nd = mk(GS_ROOT_INO, "ndobj", GS_T_ND);
	assert_int_equal(gs_fs_create_internal(fs, nd, &i1), 0);
	assert_int_equal(gs_fs_create_internal(fs, nd, &i2), 0);
	assert_int_equal(gs_fs_create_internal(fs, arrays, &i2), -EINVAL);
	/* an internal object's blocks through a lease: allocated, written, mapped */
	{
		struct gs_lease *l;
		uint8_t *b = NULL;

		assert_int_equal(posix_memalign((void **)&b, 4096, 1 << 20), 0);
		test_fill(b, 1 << 20, 2);
		assert_int_equal(gs_fs_lease_begin(fs, i1, 0, 1 << 20, GS_LEASE_ALLOC, &l), 0);
		assert_int_equal(gs_fs_lease_pwrite(l, b, 1 << 20, 0), 1 << 20);
		assert_int_equal(gs_fs_lease_end(l), 0);
		assert_int_equal(gs_fs_lseek(fs, i1, 8192, SEEK_DATA), 8192);
		assert_int_equal(gs_fs_lseek(fs, i1, 8192, SEEK_HOLE), 1 << 20);
		assert_int_equal(gs_fs_lseek(fs, i1, 2 << 20, SEEK_HOLE), -ENXIO);
		assert_int_equal(gs_fs_pread(fs, i1, buf, 4096, 8192, 0), 4096);
		assert_memory_equal(buf, b + 8192, 4096);
		free(b);
	}
	/* data on nd and internal objects */
	test_fill(buf, sizeof(buf), 3);
	assert_int_equal(gs_fs_write(fs, nd, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(gs_fs_write(fs, i2, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(gs_fs_fsync(fs, i2, 0), 0);
	remount();
	uint8_t out[8192];

	assert_int_equal(gs_fs_read(fs, i2, out, sizeof(out), 0), sizeof(out));
	assert_memory_equal(out, buf, sizeof(out));
	assert_int_equal(gs_fs_unlink_internal(fs, i2), 0);
	assert_int_equal(gs_fs_getattr(fs, i2, &(struct gs_stat){0}), -ENOENT);
	/* the owner takes its internal objects with it */
	assert_int_equal(gs_fs_rmdir(fs, GS_ROOT_INO, "ndobj"), 0);
	assert_int_equal(gs_fs_getattr(fs, i1, &(struct gs_stat){0}), -ENOENT);
	assert_int_equal(gs_fs_sync(fs), 0);
	remount();
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_int_equal(sf0.ffree, sf1.ffree);
	assert_int_equal(sf0.bfree, sf1.bfree);
}

static void test_errors(void **state)
{
	struct gs_stat st;
	char longname[300];

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_int_equal(gs_fs_create(fs, arrays, longname, GS_T_ARRAY, 0644, 0, 0, &st),
			 -ENAMETOOLONG);
	assert_int_equal(gs_fs_create(fs, arrays, "a/b", GS_T_ARRAY, 0644, 0, 0, &st), -EINVAL);
	assert_int_equal(gs_fs_create(fs, arrays, "x", GS_T_INTERNAL, 0644, 0, 0, &st), -EINVAL);
	assert_int_equal(gs_fs_create(fs, 999999, "x", GS_T_ARRAY, 0644, 0, 0, &st), -ENOENT);
	uint64_t a = mk(arrays, "errf", GS_T_ARRAY);

	assert_int_equal(gs_fs_create(fs, a, "x", GS_T_ARRAY, 0644, 0, 0, &st), -ENOTDIR);
	assert_int_equal(gs_fs_lookup(fs, a, "x", &st), -ENOTDIR);
	assert_int_equal(gs_fs_read(fs, arrays, &st, 1, 0), -EISDIR);
	assert_int_equal(gs_fs_write(fs, arrays, &st, 1, 0), -EISDIR);
	assert_int_equal(gs_fs_getattr(fs, 0, &st), -ENOENT);
	assert_int_equal(gs_fs_getattr(fs, UINT64_MAX, &st), -ENOENT);
	assert_int_equal(gs_fs_rmdir(fs, GS_ROOT_INO, "arrays"), -ENOTEMPTY);
}

static void test_rdonly(void **state)
{
	struct gs_fs *ro;
	struct gs_fs_opts o = { .path = img, .flags = GS_FS_RDONLY, .cache_bytes = 8u << 20 };
	struct gs_stat st;
	uint64_t a = mk(arrays, "rof", GS_T_ARRAY);
	char buf[8];

	assert_int_equal(gs_fs_write(fs, a, "ro", 2, 0), 2);
	/* a second mount of a mounted image is refused */
	assert_int_equal(gs_fs_mount(&ro, &o), -EBUSY);
	assert_int_equal(gs_fs_unmount(fs), 0);
	if (gs_fs_mount(&ro, &o) == -EINVAL) {
		o.flags |= GS_FS_BUFFERED;
		assert_int_equal(gs_fs_mount(&ro, &o), 0);
	}
	assert_int_equal(gs_fs_lookup(ro, arrays, "rof", &st), 0);
	assert_int_equal(gs_fs_read(ro, st.ino, buf, sizeof(buf), 0), 2);
	assert_int_equal(gs_fs_write(ro, st.ino, "x", 1, 0), -EROFS);
	assert_int_equal(gs_fs_create(ro, arrays, "n", GS_T_ARRAY, 0644, 0, 0, &st), -EROFS);
	assert_int_equal(gs_fs_unlink(ro, arrays, "rof"), -EROFS);
	assert_int_equal(gs_fs_setxattr(ro, st.ino, "user.a", "b", 1, 0), -EROFS);
	assert_int_equal(gs_fs_open(ro, st.ino, O_RDWR), -EROFS);
	assert_int_equal(gs_fs_fsync(ro, st.ino, 0), 0);
	assert_int_equal(gs_fs_unmount(ro), 0);
	assert_int_equal(test_mount(&fs, img), 0);
}

/* The superblock's state word as it is on the device now (the image file). */
static uint32_t disk_state(void)
{
	struct gs_dsuper sb;
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &sb, sizeof(sb), 0), sizeof(sb));
	close(fd);
	return le32toh(sb.state);
}

/* gs_fs_remount(): read-only writes everything back and marks the image
 * clean on the device, then refuses writes; read-write again takes writes
 * (and marks it in use); a filesystem opened read-only stays so. */
static void test_remount(void **state)
{
	struct gs_fs *ro;
	struct gs_fs_opts o = { .path = img, .flags = GS_FS_RDONLY, .cache_bytes = 8u << 20 };
	struct gs_stat st;
	uint64_t a = mk(arrays, "rmf", GS_T_ARRAY);
	char buf[8], info[1024];

	assert_int_equal(gs_fs_write(fs, a, "abc", 3, 0), 3);
	assert_false(disk_state() & GS_STATE_CLEAN);
	assert_int_equal(gs_fs_remount(fs, GS_FS_RDONLY), 0);
	assert_true(disk_state() & GS_STATE_CLEAN);
	assert_int_equal(gs_fs_remount(fs, GS_FS_RDONLY), 0);	/* no change */
	assert_int_equal(gs_fs_write(fs, a, "x", 1, 0), -EROFS);
	assert_int_equal(gs_fs_create(fs, arrays, "n", GS_T_ARRAY, 0644, 0, 0, &st), -EROFS);
	assert_int_equal(gs_fs_open(fs, a, O_RDWR), -EROFS);
	assert_int_equal(gs_fs_read(fs, a, buf, sizeof(buf), 0), 3);
	assert_true(gs_fs_info_text(fs, info, sizeof(info)) > 0);
	assert_non_null(strstr(info, "read_only: 1\nrw_allowed: 1\n"));

	assert_int_equal(gs_fs_remount(fs, 0), 0);
	assert_false(disk_state() & GS_STATE_CLEAN);
	assert_int_equal(gs_fs_write(fs, a, "xyz", 3, 3), 3);
	assert_int_equal(gs_fs_remount(fs, GS_FS_RDONLY), 0);
	assert_int_equal(gs_fs_remount(fs, 0), 0);
	remount();
	assert_int_equal(gs_fs_read(fs, a, buf, sizeof(buf), 0), 6);
	assert_memory_equal(buf, "abcxyz", 6);

	/* opened read-only: no way to read-write */
	assert_int_equal(gs_fs_unmount(fs), 0);
	if (gs_fs_mount(&ro, &o) == -EINVAL) {
		o.flags |= GS_FS_BUFFERED;
		assert_int_equal(gs_fs_mount(&ro, &o), 0);
	}
	assert_int_equal(gs_fs_remount(ro, 0), -EROFS);
	assert_int_equal(gs_fs_write(ro, a, "q", 1, 0), -EROFS);
	assert_true(gs_fs_info_text(ro, info, sizeof(info)) > 0);
	assert_non_null(strstr(info, "read_only: 1\nrw_allowed: 0\n"));
	assert_int_equal(gs_fs_unmount(ro), 0);
	assert_int_equal(test_mount(&fs, img), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rename),
		cmocka_unit_test(test_xattr),
		cmocka_unit_test(test_setattr_statfs),
		cmocka_unit_test(test_fallocate),
		cmocka_unit_test(test_sparse_large),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_open_unlinked),
		cmocka_unit_test(test_internal),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_rdonly),
		cmocka_unit_test(test_remount),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
