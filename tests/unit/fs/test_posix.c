// SPDX-License-Identifier: MIT
/* The POSIX namespace in the fs core: symlinks (inline and long targets),
 * hard links, special files, the feature bits they set, setgid directories,
 * open-unlinked objects, and fsck's view of all of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fs_test.h"
#include "gstore_format.h"

static char *img;
static struct gs_fs *fs;
static uint64_t arrays;

static int setup(void **state)
{
	return test_scratch("posix", 64u << 20, &img, &fs, &arrays);
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

/* The superblock's incompat word, read from the (unmounted) image. */
static uint32_t incompat(void)
{
	struct gs_dsuper sb;
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &sb, sizeof(sb), 0), sizeof(sb));
	close(fd);
	return le32toh(sb.feature_incompat);
}

static void fsck_clean(void)
{
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
}

static void check_link(uint64_t dir, const char *name, const char *want)
{
	struct gs_stat st;
	char buf[4096];
	ssize_t n;

	assert_int_equal(gs_fs_lookup(fs, dir, name, &st), 0);
	assert_int_equal(st.type, GS_T_SYMLINK);
	assert_int_equal(st.mode, S_IFLNK | 0777);
	assert_int_equal(st.size, strlen(want));
	n = gs_fs_readlink(fs, st.ino, buf, sizeof(buf));
	assert_int_equal(n, strlen(want));
	assert_memory_equal(buf, want, n);
	/* a short buffer gets a prefix, and the full length */
	n = gs_fs_readlink(fs, st.ino, buf, 3);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(buf, want, 3);
}

static void test_symlink(void **state)
{
	char longt[4096];
	struct gs_stat st;
	char buf[8];

	/* an image made before symlinks has none of the new feature bits */
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(incompat() & GS_FEAT_INCOMPAT_NSEXT, 0);
	assert_int_equal(test_mount(&fs, img), 0);

	assert_int_equal(gs_fs_symlink(fs, arrays, "s", "target/a", 0, 0, &st), 0);
	assert_int_equal(st.type, GS_T_SYMLINK);
	memset(longt, 'p', sizeof(longt));
	longt[GS_INLINE_MAX] = 0;		/* the longest inline target */
	assert_int_equal(gs_fs_symlink(fs, arrays, "s96", longt, 0, 0, NULL), 0);
	longt[GS_INLINE_MAX] = 'q';
	longt[GS_INLINE_MAX + 1] = 0;		/* the shortest one in an object */
	assert_int_equal(gs_fs_symlink(fs, arrays, "s97", longt, 0, 0, NULL), 0);
	longt[GS_INLINE_MAX + 1] = 'p';
	longt[4095] = 0;			/* PATH_MAX - 1 */
	assert_int_equal(gs_fs_symlink(fs, arrays, "s4095", longt, 0, 0, NULL), 0);
	assert_int_equal(gs_fs_symlink(fs, arrays, "s", "x", 0, 0, NULL), -EEXIST);
	assert_int_equal(gs_fs_symlink(fs, arrays, "e", "", 0, 0, NULL), -ENOENT);
	longt[4095] = 'p';
	{
		char *huge = calloc(1, 5000);

		memset(huge, 'h', 4999);
		assert_int_equal(gs_fs_symlink(fs, arrays, "h", huge, 0, 0, NULL),
				 -ENAMETOOLONG);
		free(huge);
	}
	/* readlink of something else */
	assert_int_equal(gs_fs_readlink(fs, arrays, buf, sizeof(buf)), -EINVAL);

	remount();
	assert_true(incompat() & GS_FEAT_INCOMPAT_NSEXT);
	check_link(arrays, "s", "target/a");
	longt[4095] = 0;
	check_link(arrays, "s4095", longt);
	longt[GS_INLINE_MAX + 1] = 0;
	longt[GS_INLINE_MAX] = 'q';
	check_link(arrays, "s97", longt);
	longt[GS_INLINE_MAX] = 0;
	check_link(arrays, "s96", longt);
	/* not truncatable */
	assert_int_equal(gs_fs_lookup(fs, arrays, "s", &st), 0);
	{
		struct gs_stat in = { .size = 0 };

		assert_int_equal(gs_fs_setattr(fs, st.ino, &in, GS_SET_SIZE, NULL), -EINVAL);
	}
	fsck_clean();
	/* removing them frees their objects: fsck finds nothing left over */
	assert_int_equal(gs_fs_unlink(fs, arrays, "s4095"), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "s97"), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "s96"), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "s"), 0);
	fsck_clean();
}

static void test_hardlink(void **state)
{
	struct gs_stat st, a, d;
	char buf[8];

	assert_int_equal(gs_fs_create(fs, arrays, "l1", GS_T_ARRAY, 0644, 0, 0, &a), 0);
	assert_int_equal(gs_fs_write(fs, a.ino, "data", 4, 0), 4);
	assert_int_equal(gs_fs_create(fs, arrays, "ld", GS_T_DIR, 0755, 0, 0, &d), 0);
	assert_int_equal(gs_fs_link(fs, a.ino, d.ino, "l2", &st), 0);
	assert_int_equal(st.ino, a.ino);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(gs_fs_link(fs, a.ino, arrays, "l3", &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(gs_fs_link(fs, a.ino, arrays, "l3", NULL), -EEXIST);
	assert_int_equal(gs_fs_link(fs, d.ino, arrays, "dl", NULL), -EPERM);
	assert_int_equal(gs_fs_link(fs, arrays, d.ino, "al", NULL), -EPERM);
	/* rename of one name onto another of the same object: nothing happens */
	assert_int_equal(gs_fs_rename(fs, arrays, "l1", arrays, "l3", 0), 0);
	assert_int_equal(gs_fs_lookup(fs, arrays, "l1", &st), 0);
	assert_int_equal(gs_fs_lookup(fs, arrays, "l3", &st), 0);
	assert_int_equal(st.nlink, 3);
	remount();
	fsck_clean();
	/* unlink of one name keeps the others and the data */
	assert_int_equal(gs_fs_unlink(fs, arrays, "l1"), 0);
	assert_int_equal(gs_fs_lookup(fs, d.ino, "l2", &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(gs_fs_read(fs, a.ino, buf, 4, 0), 4);
	assert_memory_equal(buf, "data", 4);
	/* a rename over a name drops only that link */
	assert_int_equal(gs_fs_create(fs, arrays, "other", GS_T_ARRAY, 0644, 0, 0, NULL), 0);
	assert_int_equal(gs_fs_rename(fs, arrays, "other", arrays, "l3", 0), 0);
	assert_int_equal(gs_fs_getattr(fs, a.ino, &st), 0);
	assert_int_equal(st.nlink, 1);
	fsck_clean();
	/* the last one, while open: nlink 0 until release; no new names */
	assert_int_equal(gs_fs_open(fs, a.ino, O_RDONLY), 0);
	assert_int_equal(gs_fs_unlink(fs, d.ino, "l2"), 0);
	assert_int_equal(gs_fs_getattr(fs, a.ino, &st), 0);
	assert_int_equal(st.nlink, 0);
	assert_int_equal(gs_fs_link(fs, a.ino, arrays, "back", NULL), -ENOENT);
	assert_int_equal(gs_fs_release(fs, a.ino), 0);
	assert_int_equal(gs_fs_getattr(fs, a.ino, &st), -ENOENT);
	fsck_clean();
}

static void test_special(void **state)
{
	static const struct { const char *name; uint32_t fmt; uint64_t rdev; } k[] = {
		{ "fifo", S_IFIFO, 0 }, { "sock", S_IFSOCK, 0 },
		{ "chr", S_IFCHR, 0 }, { "blk", S_IFBLK, 0 },
	};
	struct gs_stat st;

	for (unsigned i = 0; i < 4; i++) {
		uint64_t rdev = k[i].fmt == S_IFCHR ? makedev(1, 3) :
				k[i].fmt == S_IFBLK ? makedev(259, 65537) : 0;

		assert_int_equal(gs_fs_mknod(fs, arrays, k[i].name, k[i].fmt | 0640, rdev, 7, 8,
					     &st), 0);
		assert_int_equal(st.type, GS_T_SPECIAL);
		assert_int_equal(st.mode, k[i].fmt | 0640);
		assert_int_equal(st.rdev, rdev);
	}
	assert_int_equal(gs_fs_mknod(fs, arrays, "reg", S_IFREG | 0600, 0, 0, 0, &st), 0);
	assert_int_equal(st.type, GS_T_ARRAY);
	assert_int_equal(gs_fs_mknod(fs, arrays, "bad", S_IFDIR | 0600, 0, 0, 0, &st), -EINVAL);
	assert_int_equal(gs_fs_create(fs, arrays, "bad", GS_T_SPECIAL, 0600, 0, 0, &st), -EINVAL);
	remount();
	assert_int_equal(gs_fs_lookup(fs, arrays, "blk", &st), 0);
	assert_int_equal(st.rdev, makedev(259, 65537));
	assert_int_equal(st.uid, 7);
	assert_int_equal(st.gid, 8);
	assert_int_equal(gs_fs_link(fs, st.ino, arrays, "blk2", &st), 0);
	assert_int_equal(st.nlink, 2);
	fsck_clean();
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(gs_fs_unlink(fs, arrays, k[i].name), 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "blk2"), 0);
	fsck_clean();
}

static void test_setgid(void **state)
{
	struct gs_stat d, st;

	assert_int_equal(gs_fs_create(fs, arrays, "sg", GS_T_DIR, 02775, 0, 0, &d), 0);
	{
		struct gs_stat in = { .gid = 1234 };

		assert_int_equal(gs_fs_setattr(fs, d.ino, &in, GS_SET_GID, &d), 0);
	}
	assert_int_equal(d.mode & 07777, 02775);
	assert_int_equal(gs_fs_create(fs, d.ino, "f", GS_T_ARRAY, 0644, 5, 6, &st), 0);
	assert_int_equal(st.gid, 1234);
	assert_int_equal(st.mode & 07777, 0644);
	assert_int_equal(gs_fs_create(fs, d.ino, "sub", GS_T_DIR, 0755, 5, 6, &st), 0);
	assert_int_equal(st.gid, 1234);
	assert_int_equal(st.mode & 07777, 02755);	/* directories carry it on */
	assert_int_equal(gs_fs_create(fs, st.ino, "deeper", GS_T_ARRAY, 0600, 5, 6, &st), 0);
	assert_int_equal(st.gid, 1234);
	assert_int_equal(gs_fs_symlink(fs, d.ino, "ln", "f", 5, 6, &st), 0);
	assert_int_equal(st.gid, 1234);
	assert_int_equal(gs_fs_mknod(fs, d.ino, "p", S_IFIFO | 0600, 0, 5, 6, &st), 0);
	assert_int_equal(st.gid, 1234);
	/* not in an ordinary directory */
	assert_int_equal(gs_fs_create(fs, arrays, "plain", GS_T_DIR, 0755, 5, 6, &st), 0);
	assert_int_equal(st.gid, 6);
	assert_int_equal(st.mode & 07777, 0755);
}

/* A directory removed (or renamed over) while open stays, with nlink 0. */
static void test_open_dir(void **state)
{
	struct gs_stat a, b, st;

	assert_int_equal(gs_fs_create(fs, arrays, "od1", GS_T_DIR, 0755, 0, 0, &a), 0);
	assert_int_equal(gs_fs_create(fs, arrays, "od2", GS_T_DIR, 0755, 0, 0, &b), 0);
	assert_int_equal(gs_fs_open(fs, b.ino, O_RDONLY), 0);
	assert_int_equal(gs_fs_rename(fs, arrays, "od1", arrays, "od2", 0), 0);
	assert_int_equal(gs_fs_getattr(fs, b.ino, &st), 0);
	assert_int_equal(st.nlink, 0);
	/* nothing can be made in it */
	assert_int_equal(gs_fs_create(fs, b.ino, "x", GS_T_ARRAY, 0644, 0, 0, NULL), -ENOENT);
	assert_int_equal(gs_fs_release(fs, b.ino), 0);
	assert_int_equal(gs_fs_getattr(fs, b.ino, &st), -ENOENT);
	fsck_clean();
}

/* Attributes beyond one block: many small ones after a large one, values up
 * to 64 KiB, on files and directories; back into the block when they shrink. */
static void test_xattr_large(void **state)
{
	uint8_t *v64 = malloc(65536), *got = malloc(65536);
	struct gs_stat f, d;
	char name[64];

	test_fill(v64, 65536, 5);
	assert_int_equal(gs_fs_create(fs, arrays, "xf", GS_T_ARRAY, 0644, 0, 0, &f), 0);
	assert_int_equal(gs_fs_create(fs, arrays, "xd", GS_T_DIR, 0755, 0, 0, &d), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(incompat() & GS_FEAT_INCOMPAT_XATTR_OBJ, 0);
	assert_int_equal(test_mount(&fs, img), 0);
	for (int k = 0; k < 2; k++) {
		uint64_t ino = k ? d.ino : f.ino;

		assert_int_equal(gs_fs_setxattr(fs, ino, "user.big", v64, 4000, 0), 0);
		for (int i = 0; i < 100; i++) {
			snprintf(name, sizeof(name), "user.small%d", i);
			assert_int_equal(gs_fs_setxattr(fs, ino, name, name, strlen(name), 0), 0);
		}
		assert_int_equal(gs_fs_setxattr(fs, ino, "user.max", v64, 65536, 0), 0);
		assert_int_equal(gs_fs_setxattr(fs, ino, "user.max", v64, 65536, XATTR_CREATE),
				 -EEXIST);
	}
	remount();
	assert_true(incompat() & GS_FEAT_INCOMPAT_XATTR_OBJ);
	for (int k = 0; k < 2; k++) {
		uint64_t ino = k ? d.ino : f.ino;

		assert_int_equal(gs_fs_getxattr(fs, ino, "user.max", got, 65536), 65536);
		assert_memory_equal(got, v64, 65536);
		assert_int_equal(gs_fs_getxattr(fs, ino, "user.max", got, 100), -ERANGE);
		assert_int_equal(gs_fs_getxattr(fs, ino, "user.big", got, 65536), 4000);
		assert_memory_equal(got, v64, 4000);
		assert_int_equal(gs_fs_getxattr(fs, ino, "user.small42", got, 65536), 12);
		assert_memory_equal(got, "user.small42", 12);
		/* 102 names with their NULs */
		assert_int_equal(gs_fs_listxattr(fs, ino, NULL, 0), 9 + 9 + 10 * 12 + 90 * 13);
	}
	fsck_clean();
	/* shrinking back into one block, then to nothing: nothing is left over */
	assert_int_equal(gs_fs_removexattr(fs, f.ino, "user.max"), 0);
	assert_int_equal(gs_fs_removexattr(fs, f.ino, "user.big"), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user.small%d", i);
		assert_int_equal(gs_fs_removexattr(fs, f.ino, name), 0);
	}
	assert_int_equal(gs_fs_listxattr(fs, f.ino, NULL, 0), 0);
	assert_int_equal(gs_fs_getattr(fs, f.ino, &f), 0);
	assert_int_equal(f.blocks, 0);
	/* removing a directory with an attribute object frees it too */
	assert_int_equal(gs_fs_rmdir(fs, arrays, "xd"), 0);
	fsck_clean();
	free(v64);
	free(got);
}

/* What statfs calls available, a file can take (xfstests generic/103 fills
 * a fs to 512 KiB short of it with one fallocate). */
static void test_statfs_avail(void **state)
{
	struct gs_fs_statfs sf;
	struct gs_stat st;

	assert_int_equal(gs_fs_create(fs, arrays, "fill", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	assert_int_equal(gs_fs_statfs(fs, &sf), 0);
	assert_true(sf.bavail < sf.bfree);
	assert_int_equal(gs_fs_fallocate(fs, st.ino, 0, 0, sf.bavail * sf.block_size - (512 << 10)),
			 0);
	assert_int_equal(gs_fs_unlink(fs, arrays, "fill"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_hardlink),
		cmocka_unit_test(test_special),
		cmocka_unit_test(test_setgid),
		cmocka_unit_test(test_open_dir),
		cmocka_unit_test(test_xattr_large),
		cmocka_unit_test(test_statfs_avail),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
