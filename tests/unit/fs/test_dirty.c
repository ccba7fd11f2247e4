// SPDX-License-Identifier: MIT
/*
 * The dirty limit (gs_fs_opts.dirty_bytes): writers write the cache back
 * once it holds more dirty data than the limit, so what is left to write at
 * unmount stays bounded whatever the cache size; the data stays intact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <inttypes.h>

#include "fs_test.h"

#define MiB		(1u << 20)
#define CACHE		(64u * MiB)
#define LIMIT		(4u * MiB)
#define WRITTEN		(48u * MiB)
/* counting is sampled (fs->dirty_every: 1024 lines * 250 ns here), a write
 * or two may pass the limit before a writer sees it */
#define SLACK		(8u * MiB)

static char *img;

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("dirty");
	return test_mkfs(img, 256u * MiB, 4096) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	unlink(img);
	free(img);
	return 0;
}

static int mount_dirty(struct gs_fs **fs, uint64_t dirty)
{
	struct gs_fs_opts o = { .path = img, .cache_bytes = CACHE, .dirty_bytes = dirty };
	int ret = gs_fs_mount(fs, &o);

	if (ret == -EINVAL) {
		o.flags |= GS_FS_BUFFERED;
		ret = gs_fs_mount(fs, &o);
	}
	return ret;
}

static uint64_t dirty_now(struct gs_fs *fs)
{
	struct gs_fs_statfs sf;

	assert_int_equal(gs_fs_statfs(fs, &sf), 0);
	return sf.cache_dirty;
}

/* Write WRITTEN bytes in 1 MiB pieces; the most dirty data seen between them. */
static uint64_t write_all(struct gs_fs *fs, const char *name, uint8_t seed)
{
	struct gs_stat arr, st;
	uint8_t *buf = malloc(MiB);
	uint64_t most = 0;

	assert_non_null(buf);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_create(fs, arr.ino, name, GS_T_ARRAY, 0644, 0, 0, &st), 0);
	for (uint32_t off = 0; off < WRITTEN; off += MiB) {
		memset(buf, seed + off / MiB, MiB);
		assert_int_equal(gs_fs_write(fs, st.ino, buf, MiB, off), MiB);
		if (dirty_now(fs) > most)
			most = dirty_now(fs);
	}
	free(buf);
	return most;
}

static void check_all(struct gs_fs *fs, const char *name, uint8_t seed)
{
	struct gs_stat arr, st;
	uint8_t *buf = malloc(MiB);

	assert_non_null(buf);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, name, &st), 0);
	assert_int_equal(st.size, WRITTEN);
	for (uint32_t off = 0; off < WRITTEN; off += MiB) {
		assert_int_equal(gs_fs_read(fs, st.ino, buf, MiB, off), MiB);
		for (uint32_t i = 0; i < MiB; i += 4096)
			assert_int_equal(buf[i], (uint8_t)(seed + off / MiB));
	}
	free(buf);
}

static void test_limit_holds(void **state)
{
	struct gs_fs *fs;
	uint64_t most;

	assert_int_equal(mount_dirty(&fs, LIMIT), 0);
	most = write_all(fs, "limited", 1);
	fprintf(stderr, "most dirty: %" PRIu64 " KiB (limit %u KiB)\n", most >> 10, LIMIT >> 10);
	assert_true(most <= LIMIT + SLACK);
	assert_true(dirty_now(fs) <= LIMIT + SLACK);	/* what the unmount has to write */
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(mount_dirty(&fs, 0), 0);
	check_all(fs, "limited", 1);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* The default: a quarter of the cache.  A cache this size holds all of it. */
static void test_default_quarter(void **state)
{
	struct gs_fs *fs;
	uint64_t most;

	assert_int_equal(mount_dirty(&fs, 0), 0);
	most = write_all(fs, "default", 7);
	fprintf(stderr, "most dirty: %" PRIu64 " KiB (cache %u KiB)\n", most >> 10, CACHE >> 10);
	assert_true(most <= CACHE / 4 + SLACK);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(mount_dirty(&fs, 0), 0);
	check_all(fs, "default", 7);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_holds),
		cmocka_unit_test(test_default_quarter),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
