// SPDX-License-Identifier: MIT
/*
 * Many threads on one mount: private files written, read back, truncated
 * and fsync'd against an in-memory shadow; disjoint regions of one shared
 * file; creates and unlinks in one directory; readers of the shared file;
 * stat and readdir.  Afterwards a remount must show every shadow exactly
 * and fsck must be clean.  (Also meant for a TSan build.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>

#include "fs_test.h"
#include "fs/fs_internal.h"

#define NT		4
#define FILE_MAX	(512u << 10)
#define SHARED_SLICE	(256u << 10)

static char *img;
static struct gs_fs *fs;
static uint64_t dir, shared;
static int stop;

struct th {
	int id;
	uint64_t ino;
	uint8_t *shadow;
	uint64_t size;
	uint8_t *slice;		/* this thread's part of the shared file */
	int errors;
	pthread_t t;
};

static struct th ths[NT];

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "thread %d: %s failed (line %d)\n", \
				      t->id, #c, __LINE__); t->errors++; return NULL; } } while (0)

static void *worker(void *arg)
{
	struct th *t = arg;
	uint64_t s = 0x1234567ULL * (t->id + 1);
	uint8_t *buf = malloc(FILE_MAX);
	char name[32];

	for (int it = 0; it < 300; it++) {
		int op = rnd(&s) % 10;
		uint64_t off = rnd(&s) % FILE_MAX, len = rnd(&s) % (64u << 10) + 1;

		if (off + len > FILE_MAX)
			len = FILE_MAX - off;
		if (op < 4) {	/* write */
			test_fill(buf, len, rnd(&s));
			CHECK(gs_fs_write(fs, t->ino, buf, len, off) == (ssize_t)len);
			memcpy(t->shadow + off, buf, len);
			if (off + len > t->size)
				t->size = off + len;
		} else if (op < 6) {	/* read and compare */
			ssize_t n = gs_fs_read(fs, t->ino, buf, len, off);
			uint64_t want = off >= t->size ? 0 : (t->size - off < len ? t->size - off : len);

			CHECK(n == (ssize_t)want);
			CHECK(!memcmp(buf, t->shadow + off, want));
		} else if (op == 6) {	/* truncate */
			struct gs_stat in = { .size = off }, st;

			CHECK(gs_fs_setattr(fs, t->ino, &in, GS_SET_SIZE, &st) == 0);
			if (off < t->size)
				memset(t->shadow + off, 0, t->size - off);
			t->size = off;
		} else if (op == 7) {	/* shared file: our slice */
			uint64_t o = off % SHARED_SLICE, l = len;

			if (o + l > SHARED_SLICE)
				l = SHARED_SLICE - o;
			test_fill(buf, l, rnd(&s));
			CHECK(gs_fs_write(fs, shared, buf, l, (uint64_t)t->id * SHARED_SLICE + o) ==
			      (ssize_t)l);
			memcpy(t->slice + o, buf, l);
		} else if (op == 8) {	/* names */
			struct gs_stat st;

			sprintf(name, "t%d-%d", t->id, it);
			CHECK(gs_fs_create(fs, dir, name, GS_T_ARRAY, 0644, 0, 0, &st) == 0);
			CHECK(gs_fs_write(fs, st.ino, name, strlen(name), 0) > 0);
			if (it % 3)
				CHECK(gs_fs_unlink(fs, dir, name) == 0);
		} else {
			CHECK(gs_fs_fsync(fs, t->ino, rnd(&s) & 1) == 0);
		}
	}
	free(buf);
	return NULL;
}

static int count(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	(*(int *)arg)++;
	return 0;
}

static void *reader(void *arg)
{
	uint8_t *buf = malloc(64u << 10);
	uint64_t s = 99;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct gs_stat st;
		int n = 0;

		gs_fs_read(fs, shared, buf, 64u << 10, rnd(&s) % (NT * SHARED_SLICE));
		gs_fs_getattr(fs, shared, &st);
		gs_fs_readdir(fs, dir, 0, count, &n);
	}
	free(buf);
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t r;
	struct gs_stat st;
	uint8_t *buf = malloc(FILE_MAX);

	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "cdir", GS_T_DIR, 0755, 0, 0, &st), 0);
	dir = st.ino;
	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "shared", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	shared = st.ino;
	for (int i = 0; i < NT; i++) {
		char name[16];

		sprintf(name, "own%d", i);
		assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, name, GS_T_ARRAY, 0644, 0, 0, &st),
				 0);
		ths[i].id = i;
		ths[i].ino = st.ino;
		ths[i].shadow = calloc(1, FILE_MAX);
		ths[i].slice = calloc(1, SHARED_SLICE);
	}
	pthread_create(&r, NULL, reader, NULL);
	for (int i = 0; i < NT; i++)
		pthread_create(&ths[i].t, NULL, worker, &ths[i]);
	for (int i = 0; i < NT; i++)
		pthread_join(ths[i].t, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(r, NULL);
	for (int i = 0; i < NT; i++)
		assert_int_equal(ths[i].errors, 0);

	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	fs->icache_max = 4;
	for (int i = 0; i < NT; i++) {
		assert_int_equal(gs_fs_getattr(fs, ths[i].ino, &st), 0);
		assert_int_equal(st.size, ths[i].size);
		assert_int_equal(gs_fs_read(fs, ths[i].ino, buf, FILE_MAX, 0), ths[i].size);
		assert_memory_equal(buf, ths[i].shadow, ths[i].size);
		memset(buf, 0, SHARED_SLICE);
		assert_true(gs_fs_read(fs, shared, buf, SHARED_SLICE, (uint64_t)i * SHARED_SLICE) >= 0);
		/* bytes never written in the slice read as zeros (or lie past EOF) */
		assert_memory_equal(buf, ths[i].slice, SHARED_SLICE);
		free(ths[i].shadow);
		free(ths[i].slice);
	}
	free(buf);
}

static int setup(void **state)
{
	if (test_scratch("conc", 128u << 20, &img, &fs, NULL))
		return -1;
	fs->icache_max = 4;	/* keep evicting and reloading inodes and maps */
	return 0;
}

static int teardown(void **state)
{
	return test_scratch_end(img, fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
