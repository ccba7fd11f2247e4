// SPDX-License-Identifier: MIT
/*
 * The read paths of gs_fs_pread(): through the cache, and around it on the
 * calling thread (GS_FS_READ_DIRECT, or pieces of a line or more of a clean
 * object).  Every read is compared with a shadow copy: right after writes
 * that are still dirty in the cache (a direct read must not see the stale
 * device), after a flush (the device copy is read, and no line is filled),
 * at unaligned offsets and lengths (bounce buffer), over holes and
 * unwritten extents, and while a writer and a flusher run concurrently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/falloc.h>
#include <pthread.h>

#include "fs_test.h"
#include "fs/fs_internal.h"
#include "gstore_cache.h"

#define FSZ	(1u << 20)

static char *img;
static struct gs_fs *fs;
static uint64_t arrays;

static int setup(void **state)
{
	return test_scratch("read", 64u << 20, &img, &fs, &arrays);
}

static int teardown(void **state)
{
	return test_scratch_end(img, fs);
}

static uint64_t mk(const char *name)
{
	struct gs_stat st;

	assert_int_equal(gs_fs_create(fs, arrays, name, GS_T_ARRAY, 0644, 0, 0, &st), 0);
	return st.ino;
}

static uint64_t direct_reads(void)
{
	return __atomic_load_n(&fs->n_direct_reads, __ATOMIC_RELAXED);
}

static uint64_t cache_reads(void)
{
	struct gs_cache_stats cs;

	gs_cache_get_stats(fs->c, &cs);
	return cs.reads;
}

/* Read [off, off + len) both ways into an aligned and a misaligned buffer. */
static void check_range(uint64_t ino, const uint8_t *shadow, uint64_t off, size_t len)
{
	uint8_t *b = NULL;

	assert_int_equal(posix_memalign((void **)&b, 4096, len + 4096 + 1), 0);
	for (int mis = 0; mis < 2; mis++) {
		uint8_t *p = b + mis;

		memset(p, 0xa5, len);
		assert_int_equal(gs_fs_pread(fs, ino, p, len, off, GS_FS_READ_DIRECT), len);
		assert_memory_equal(p, shadow + off, len);
		memset(p, 0x5a, len);
		assert_int_equal(gs_fs_pread(fs, ino, p, len, off, 0), len);
		assert_memory_equal(p, shadow + off, len);
	}
	free(b);
}

static const struct {
	uint64_t off;
	size_t len;
} ranges[] = {
	{ 0, 4096 }, { 8192, 4096 }, { 4096 * 37, 4096 * 3 }, { 1, 1 }, { 4095, 2 },
	{ 12345, 777 }, { 65536 - 100, 300 }, { 100, 65536 }, { 0, 65536 }, { 131072, 262144 },
	{ 3, FSZ - 3 },
};

/* Written, not flushed: O_DIRECT reads must see the cache's dirty lines. */
static void test_dirty_then_clean(void **state)
{
	uint64_t ino = mk("dc");
	uint8_t *shadow = malloc(FSZ);
	uint64_t d0, c0;

	test_fill(shadow, FSZ, 1);
	assert_int_equal(gs_fs_write(fs, ino, shadow, FSZ, 0), FSZ);
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		check_range(ino, shadow, ranges[i].off, ranges[i].len);

	/* flushed: the object is clean, direct reads go to the device */
	assert_int_equal(gs_fs_sync(fs), 0);
	d0 = direct_reads();
	c0 = cache_reads();
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		uint8_t *b = NULL;
		size_t len = ranges[i].len;

		assert_int_equal(posix_memalign((void **)&b, 4096, len + 1), 0);
		assert_int_equal(gs_fs_pread(fs, ino, b + 1, len, ranges[i].off,
					     GS_FS_READ_DIRECT), len);
		assert_memory_equal(b + 1, shadow + ranges[i].off, len);
		assert_int_equal(gs_fs_pread(fs, ino, b, len, ranges[i].off,
					     GS_FS_READ_DIRECT), len);
		assert_memory_equal(b, shadow + ranges[i].off, len);
		free(b);
	}
	assert_true(direct_reads() >= d0 + 2 * sizeof(ranges) / sizeof(ranges[0]));
	assert_int_equal(cache_reads(), c0);	/* no line was filled for them */

	/* overwrite pieces (sub-block and whole blocks) without a flush */
	for (int k = 0; k < 6; k++) {
		uint64_t off = (uint64_t)k * 150001 % (FSZ - 9000);
		size_t len = k % 2 ? 4096 : 1 + k * 1111;

		test_fill(shadow + off, len, 100 + k);
		assert_int_equal(gs_fs_write(fs, ino, shadow + off, len, off), len);
		check_range(ino, shadow, off & ~4095ull, 8192);
		check_range(ino, shadow, off, len);
	}
	check_range(ino, shadow, 0, FSZ);

	/* and after a remount, from the device only */
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(test_mount(&fs, img), 0);
	check_range(ino, shadow, 0, FSZ);
	check_range(ino, shadow, 4096 * 5 + 17, 5000);
	free(shadow);
}

/* Holes, unwritten extents and EOF read the same on the direct path. */
static void test_holes_eof(void **state)
{
	uint64_t ino = mk("holes");
	uint8_t *shadow = calloc(1, 3 * 65536);
	uint8_t buf[8192];

	test_fill(shadow + 65536 + 100, 5000, 7);
	assert_int_equal(gs_fs_write(fs, ino, shadow + 65536 + 100, 5000, 65536 + 100), 5000);
	assert_int_equal(gs_fs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 2 * 65536, 65536), 0);
	assert_int_equal(gs_fs_sync(fs), 0);
	check_range(ino, shadow, 0, 65536 + 5100);
	check_range(ino, shadow, 4096, 4096);
	/* size is 65536 + 5100: reads stop there; the unwritten tail is past EOF */
	assert_int_equal(gs_fs_pread(fs, ino, buf, sizeof(buf), 65536 + 4096,
				     GS_FS_READ_DIRECT), 5100 - 4096);
	assert_memory_equal(buf, shadow + 65536 + 4096, 5100 - 4096);
	assert_int_equal(gs_fs_pread(fs, ino, buf, sizeof(buf), 3 * 65536, GS_FS_READ_DIRECT), 0);
	assert_int_equal(gs_fs_pread(fs, ino, buf, 1, 0, 1u << 7), -EINVAL);
	free(shadow);
}

/*
 * A writer stamps block b with increasing versions and publishes each one
 * after its write returned; readers must never see a version older than
 * the one published before their read began, while a flusher keeps turning
 * the object clean (direct reads from the device) and the writer dirty.
 */
#define NBLK	16
static uint64_t cino;
static uint64_t published[NBLK];
static int stop, bad;

static void *writer(void *arg)
{
	uint8_t blk[4096];

	for (uint64_t v = 1; v <= 600; v++) {
		int b = (int)(v % NBLK);

		for (size_t i = 0; i < sizeof(blk); i += 8)
			memcpy(blk + i, &v, 8);
		if (gs_fs_write(fs, cino, blk, sizeof(blk), (uint64_t)b * 4096) != sizeof(blk))
			__atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&published[b], v, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *flusher(void *arg)
{
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		if (gs_fs_sync(fs))
			__atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
		usleep(500);
	}
	return NULL;
}

static void *reader(void *arg)
{
	uint8_t *blk;
	unsigned s = (unsigned)(uintptr_t)arg;

	if (posix_memalign((void **)&blk, 4096, 4096))
		abort();
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		int b = (int)(rand_r(&s) % NBLK);
		uint64_t want = __atomic_load_n(&published[b], __ATOMIC_ACQUIRE), got;

		if (gs_fs_pread(fs, cino, blk, 4096, (uint64_t)b * 4096, GS_FS_READ_DIRECT) != 4096)
			__atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
		memcpy(&got, blk + 8 * (rand_r(&s) % 512), 8);
		if (got < want) {
			fprintf(stderr, "block %d: read version %llu after %llu was written\n", b,
				(unsigned long long)got, (unsigned long long)want);
			__atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
		}
	}
	free(blk);
	return NULL;
}

static void test_concurrent_coherence(void **state)
{
	uint8_t *zero = calloc(1, NBLK * 4096);
	pthread_t w, f, r[2];

	cino = mk("coh");
	assert_int_equal(gs_fs_write(fs, cino, zero, NBLK * 4096, 0), NBLK * 4096);
	assert_int_equal(gs_fs_sync(fs), 0);
	assert_int_equal(pthread_create(&r[0], NULL, reader, (void *)1), 0);
	assert_int_equal(pthread_create(&r[1], NULL, reader, (void *)2), 0);
	assert_int_equal(pthread_create(&f, NULL, flusher, NULL), 0);
	assert_int_equal(pthread_create(&w, NULL, writer, NULL), 0);
	pthread_join(w, NULL);
	pthread_join(f, NULL);
	pthread_join(r[0], NULL);
	pthread_join(r[1], NULL);
	assert_int_equal(bad, 0);
	free(zero);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dirty_then_clean),
		cmocka_unit_test(test_holes_eof),
		cmocka_unit_test(test_concurrent_coherence),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
