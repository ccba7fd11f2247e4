// SPDX-License-Identifier: MIT
/* The minimal path: mkfs, mount, lookup, create, readdir, getattr, read,
 * write, truncate, unlink, fsync, remount persistence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "fs_test.h"
#include "crc32c.h"

uint32_t gs_crc32c_sw(uint32_t crc, const void *buf, size_t len);

static char *img;

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("basic");
	return test_mkfs(img, 64u << 20, 4096) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	unlink(img);
	free(img);
	return 0;
}

struct names {
	int n;
	char v[64][64];
	uint64_t last;
};

static int collect(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	struct names *nm = arg;

	snprintf(nm->v[nm->n++], 64, "%s", name);
	nm->last = next;
	return nm->n == 64;	/* full: stop, resume from nm->last */
}

static bool has(struct names *nm, const char *s)
{
	for (int i = 0; i < nm->n; i++)
		if (!strcmp(nm->v[i], s))
			return true;
	return false;
}

static void test_mkfs_mount_root(void **state)
{
	struct gs_fs *fs;
	struct gs_stat st;
	struct names nm = {0};

	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_getattr(fs, GS_ROOT_INO, &st), 0);
	assert_int_equal(st.type, GS_T_DIR);
	assert_true(S_ISDIR(st.mode));
	assert_int_equal(st.nlink, 5);
	assert_int_equal(gs_fs_readdir(fs, GS_ROOT_INO, 0, collect, &nm), 0);
	assert_int_equal(nm.n, 3);
	assert_true(has(&nm, "arrays") && has(&nm, "graph") && has(&nm, "nd"));
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &st), 0);
	assert_int_equal(st.type, GS_T_DIR);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nope", &st), -ENOENT);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

static void test_create_rw(void **state)
{
	struct gs_fs *fs;
	struct gs_stat arr, st;
	uint8_t *a = malloc(1 << 20), *b = malloc(1 << 20);

	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_create(fs, arr.ino, "x", GS_T_ARRAY, 0644, 1, 2, &st), 0);
	assert_int_equal(st.type, GS_T_ARRAY);
	assert_true(S_ISREG(st.mode));
	assert_int_equal(st.uid, 1);
	assert_int_equal(gs_fs_create(fs, arr.ino, "x", GS_T_ARRAY, 0644, 0, 0, NULL), -EEXIST);
	uint64_t ino = st.ino;

	test_fill(a, 1 << 20, 1);
	assert_int_equal(gs_fs_write(fs, ino, a, 1 << 20, 0), 1 << 20);
	assert_int_equal(gs_fs_write(fs, ino, a, 100, (1 << 20) + 5000), 100);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
	assert_int_equal(st.size, (1 << 20) + 5100);
	assert_int_equal(gs_fs_read(fs, ino, b, 1 << 20, 0), 1 << 20);
	assert_memory_equal(a, b, 1 << 20);
	/* the gap between the two writes reads as zeros */
	memset(b, 0xff, 8192);
	assert_int_equal(gs_fs_read(fs, ino, b, 8192, 1 << 20), 5100);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(b[i], 0);
	assert_memory_equal(b + 5000, a, 100);
	/* unaligned overwrite inside */
	assert_int_equal(gs_fs_write(fs, ino, a + 7, 10000, 3333), 10000);
	assert_int_equal(gs_fs_read(fs, ino, b, 10000, 3333), 10000);
	assert_memory_equal(b, a + 7, 10000);
	assert_int_equal(gs_fs_fsync(fs, ino, 0), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);

	/* remount: everything is still there */
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "x", &st), 0);
	assert_int_equal(st.ino, ino);
	assert_int_equal(st.size, (1 << 20) + 5100);
	assert_int_equal(gs_fs_read(fs, ino, b, 10000, 3333), 10000);
	assert_memory_equal(b, a + 7, 10000);
	assert_int_equal(gs_fs_read(fs, ino, b, 3333, 0), 3333);
	assert_memory_equal(b, a, 3333);

	/* truncate down then up: the cut bytes come back as zeros */
	struct gs_stat in = { .size = 4000 };

	assert_int_equal(gs_fs_setattr(fs, ino, &in, GS_SET_SIZE, &st), 0);
	assert_int_equal(st.size, 4000);
	in.size = 20000;
	assert_int_equal(gs_fs_setattr(fs, ino, &in, GS_SET_SIZE, &st), 0);
	assert_int_equal(gs_fs_read(fs, ino, b, 20000, 0), 20000);
	assert_memory_equal(b, a, 3333);
	for (int i = 4000; i < 20000; i++)
		assert_int_equal(b[i], 0);

	assert_int_equal(gs_fs_unlink(fs, arr.ino, "x"), 0);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "x", &st), -ENOENT);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), -ENOENT);
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(a);
	free(b);
}

static void test_dirs(void **state)
{
	struct gs_fs *fs;
	struct gs_stat arr, d, st;
	struct names nm = {0};
	char name[64];

	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_create(fs, arr.ino, "sub", GS_T_DIR, 0755, 0, 0, &d), 0);
	assert_int_equal(gs_fs_getattr(fs, arr.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	/* enough entries to need several directory blocks */
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%04d", i);
		assert_int_equal(gs_fs_create(fs, d.ino, name, GS_T_ARRAY, 0600, 0, 0, NULL), 0);
	}
	assert_int_equal(gs_fs_rmdir(fs, arr.ino, "sub"), -ENOTEMPTY);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(test_mount(&fs, img), 0);
	int count = 0;
	uint64_t cookie = 0;

	for (;;) {
		memset(&nm, 0, sizeof(nm));
		assert_int_equal(gs_fs_readdir(fs, d.ino, cookie, collect, &nm), 0);
		if (!nm.n)
			break;
		count += nm.n;
		cookie = nm.last;
		if (nm.n < 64)
			break;
	}
	assert_int_equal(count, 300);
	for (int i = 0; i < 300; i += 2) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%04d", i);
		assert_int_equal(gs_fs_unlink(fs, d.ino, name), 0);
	}
	snprintf(name, sizeof(name), "file-with-a-long-name-%04d", 1);
	assert_int_equal(gs_fs_lookup(fs, d.ino, name, &st), 0);
	assert_int_equal(gs_fs_rmdir(fs, d.ino, name), -ENOTDIR);
	assert_int_equal(gs_fs_unlink(fs, arr.ino, "sub"), -EISDIR);
	for (int i = 1; i < 300; i += 2) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%04d", i);
		assert_int_equal(gs_fs_unlink(fs, d.ino, name), 0);
	}
	assert_int_equal(gs_fs_rmdir(fs, arr.ino, "sub"), 0);
	assert_int_equal(gs_fs_getattr(fs, arr.ino, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* Other block sizes: the same operations, remount, fsck. */
static void test_block_sizes(void **state)
{
	static const uint32_t sizes[] = { 8192, 16384, 65536 };
	uint8_t *a = malloc(300000), *b = malloc(300000);

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		char *path = test_image_path("bs");
		struct gs_fs *fs;
		struct gs_stat st, d;
		char name[32];

		assert_int_equal(test_mkfs(path, 64u << 20, sizes[k]), 0);
		assert_int_equal(test_mount(&fs, path), 0);
		assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "d", GS_T_DIR, 0755, 0, 0, &d), 0);
		for (int i = 0; i < 100; i++) {
			sprintf(name, "file-%d", i);
			assert_int_equal(gs_fs_create(fs, d.ino, name, GS_T_ARRAY, 0644, 0, 0, &st), 0);
			test_fill(a, 3000 + i, i);
			assert_int_equal(gs_fs_write(fs, st.ino, a, 3000 + i, i * 777), 3000 + i);
			assert_int_equal(gs_fs_setxattr(fs, st.ino, "user.x", name, strlen(name), 0), 0);
		}
		test_fill(a, 300000, 42);
		assert_int_equal(gs_fs_write(fs, st.ino, a, 300000, 12345), 300000);
		assert_int_equal(gs_fs_unmount(fs), 0);
		assert_int_equal(gs_fs_fsck(path, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
		assert_int_equal(test_mount(&fs, path), 0);
		assert_int_equal(gs_fs_lookup(fs, d.ino, "file-99", &st), 0);
		assert_int_equal(gs_fs_read(fs, st.ino, b, 300000, 12345), 300000);
		assert_memory_equal(a, b, 300000);
		for (int i = 0; i < 100; i += 2) {
			sprintf(name, "file-%d", i);
			assert_int_equal(gs_fs_unlink(fs, d.ino, name), 0);
		}
		assert_int_equal(gs_fs_unmount(fs), 0);
		assert_int_equal(gs_fs_fsck(path, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
		unlink(path);
		free(path);
	}
	free(a);
	free(b);
}

/* CRC-32C: the standard check value, and the hardware path equals the table. */
static void test_crc32c(void **state)
{
	uint8_t buf[5000];

	assert_int_equal(gs_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(gs_crc32c_sw(0, "123456789", 9), 0xe3069283);
	test_fill(buf, sizeof(buf), 5);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len < 300; len += 7)
			assert_int_equal(gs_crc32c(0, buf + off, len), gs_crc32c_sw(0, buf + off, len));
	/* continuing a crc equals computing it in one go */
	assert_int_equal(gs_crc32c(gs_crc32c(0, buf, 1234), buf + 1234, 3000),
			 gs_crc32c(0, buf, 4234));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mkfs_mount_root),
		cmocka_unit_test(test_create_rw),
		cmocka_unit_test(test_dirs),
		cmocka_unit_test(test_block_sizes),
		cmocka_unit_test(test_crc32c),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
