// SPDX-License-Identifier: MIT
/*
 * Direct leases (fs/lease.c): coherence with buffered reads and writes of
 * the same object, allocation of holes as contiguous unwritten runs that
 * become written at the end, the checks on lease I/O, asynchronous
 * submission, truncate and punch waiting for an overlapping lease, an
 * unlinked object kept until the lease ends, and durability of leased
 * writes across a power cut after gs_fs_fsync().
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

#define MiB	(1u << 20)

static uint8_t *abuf(size_t n)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, 4096, n), 0);
	return p;
}

static uint64_t mkobj(struct gs_fs *fs, uint64_t dir, const char *name)
{
	struct gs_stat st;

	assert_int_equal(gs_fs_create(fs, dir, name, GS_T_ARRAY, 0644, 0, 0, &st), 0);
	return st.ino;
}

/* Buffered writes are seen by a lease; leased writes by buffered reads,
 * even where a buffered read cached the old bytes before the lease. */
static void test_coherence(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino;
	char *img;
	uint8_t *a = abuf(MiB), *b = abuf(MiB), *r = abuf(MiB);
	struct gs_lease *l;

	assert_int_equal(test_scratch("lease-coh", 64 * MiB, &img, &fs, &dir), 0);
	ino = mkobj(fs, dir, "f");
	test_fill(a, MiB, 1);
	test_fill(b, MiB, 2);
	/* dirty in the cache only: the lease's begin writes it back */
	assert_int_equal(gs_fs_write(fs, ino, a, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, MiB, GS_LEASE_READ, &l), 0);
	memset(r, 0, MiB);
	assert_int_equal(gs_fs_lease_pread(l, r, MiB, 0), MiB);
	assert_memory_equal(r, a, MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);

	/* a small buffered read caches a line; a leased write changes the
	 * device under it; after the end the buffered read sees the new bytes */
	assert_int_equal(gs_fs_read(fs, ino, r, 100, 4096), 100);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, MiB, GS_LEASE_WRITE, &l), 0);
	assert_int_equal(gs_fs_read(fs, ino, r, 100, 4096), 100);	/* cached meanwhile */
	assert_int_equal(gs_fs_lease_pwrite(l, b, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(gs_fs_read(fs, ino, r, MiB, 0), MiB);
	assert_memory_equal(r, b, MiB);
	assert_int_equal(gs_fs_read(fs, ino, r, 100, 4096), 100);
	assert_memory_equal(r, b + 4096, 100);

	/* a buffered write of part of a block after the lease keeps the rest */
	assert_int_equal(gs_fs_write(fs, ino, a, 10, 8192 + 5), 10);
	assert_int_equal(gs_fs_fsync(fs, ino, 0), 0);
	assert_int_equal(gs_fs_read(fs, ino, r, 4096, 8192), 4096);
	assert_memory_equal(r, b + 8192, 5);
	assert_memory_equal(r + 5, a, 10);
	assert_memory_equal(r + 15, b + 8192 + 15, 4096 - 15);
	test_scratch_end(img, fs);
	free(a);
	free(b);
	free(r);
}

/* GS_LEASE_ALLOC: holes become one unwritten run, zeros until written and
 * the lease ended; then written, with the size at the last byte written. */
static void test_alloc(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino;
	char *img;
	uint8_t *a = abuf(4 * MiB), *r = abuf(4 * MiB), *z = calloc(1, 4 * MiB);
	struct gs_lease *l;
	struct gs_stat st;
	const struct lease_ext *e;
	uint32_t n;

	assert_int_equal(test_scratch("lease-alloc", 64 * MiB, &img, &fs, &dir), 0);
	ino = mkobj(fs, dir, "f");
	test_fill(a, 4 * MiB, 3);
	/* a write lease does not allocate */
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 4 * MiB, GS_LEASE_WRITE, &l), 0);
	assert_int_equal(gs_fs_lease_pwrite(l, a, 4096, 0), -ENODATA);
	assert_int_equal(gs_fs_lease_end(l), 0);

	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 4 * MiB, GS_LEASE_ALLOC, &l), 0);
	e = lease_extents(l, &n);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].kind, LEASE_UNWRITTEN);
	assert_int_equal(e[0].len, 4 * MiB);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
	assert_true(st.blocks >= 4 * MiB / 512);
	assert_int_equal(st.size, 0);
	/* unwritten: zeros through the lease and through the cache */
	assert_int_equal(gs_fs_lease_pread(l, r, 4 * MiB, 0), 4 * MiB);
	assert_memory_equal(r, z, 4 * MiB);
	assert_int_equal(gs_fs_lease_pwrite(l, a, 3 * MiB, 0), 3 * MiB);
	/* not a whole block of an unwritten extent */
	assert_int_equal(gs_fs_lease_pwrite(l, a, 512, 3 * MiB), -EINVAL);
	assert_int_equal(gs_fs_read(fs, ino, r, 4096, 0), 0);	/* size still 0 */
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
	assert_int_equal(st.size, 3 * MiB);
	assert_int_equal(gs_fs_read(fs, ino, r, 3 * MiB, 0), 3 * MiB);
	assert_memory_equal(r, a, 3 * MiB);
	/* the last MiB stays unwritten past EOF; a buffered write there reads back */
	assert_int_equal(gs_fs_write(fs, ino, a, 100, 3 * MiB + 10), 100);
	assert_int_equal(gs_fs_read(fs, ino, r, 110, 3 * MiB), 110);
	assert_memory_equal(r, z, 10);
	assert_memory_equal(r + 10, a, 100);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_read(fs, ino, r, 3 * MiB, 0), 3 * MiB);
	assert_memory_equal(r, a, 3 * MiB);
	test_scratch_end(img, fs);
	free(a);
	free(r);
	free(z);
}

/* What lease I/O refuses, before doing anything. */
static void test_checks(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino;
	char *img;
	uint8_t *a = abuf(2 * MiB);
	struct gs_lease *l;

	assert_int_equal(test_scratch("lease-chk", 64 * MiB, &img, &fs, &dir), 0);
	ino = mkobj(fs, dir, "f");
	test_fill(a, MiB, 4);
	assert_int_equal(gs_fs_write(fs, ino, a, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 0, GS_LEASE_READ, &l), -EINVAL);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 4096, 0, &l), -EINVAL);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 4096, 0x80, &l), -EINVAL);
	assert_int_equal(gs_fs_lease_begin(fs, 999999, 0, 4096, GS_LEASE_READ, &l), -ENOENT);
	assert_int_equal(gs_fs_lease_begin(fs, dir, 0, 4096, GS_LEASE_READ, &l), -EISDIR);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 4096, 8192, GS_LEASE_READ, &l), 0);
	assert_int_equal(gs_fs_lease_pwrite(l, a, 4096, 4096), -EBADF);	/* read lease */
	assert_int_equal(gs_fs_lease_pread(l, a, 4096, 0), -EINVAL);	/* before it */
	assert_int_equal(gs_fs_lease_pread(l, a, 8192, 8192), -EINVAL);	/* past it */
	assert_int_equal(gs_fs_lease_pread(l, a + 1, 4096, 4096), -EINVAL);	/* buffer */
	assert_int_equal(gs_fs_lease_pread(l, a, 100, 4096), -EINVAL);	/* length */
	assert_int_equal(gs_fs_lease_pread(l, a, 4096, 4096), 4096);
	assert_int_equal(gs_fs_lease_end(l), 0);
	test_scratch_end(img, fs);
	free(a);
}

/* Asynchronous I/O: many ios over several extents and a hole, each done
 * once with its length; the end waits for all of them. */
struct acount {
	int calls;
	int64_t bad;
};

static void adone(struct gs_obj_io *io, int64_t res)
{
	struct acount *c = io->priv;

	if (res != io->len)
		__atomic_store_n(&c->bad, res, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
}

static void test_submit(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino;
	char *img;
	enum { N = 64, SZ = 64 << 10 };
	uint8_t *a = abuf(N * SZ), *r = abuf(N * SZ), *z = calloc(1, SZ);
	struct gs_obj_io io[N], *iop[N];
	struct acount cnt = { 0 };
	struct gs_lease *l;

	assert_int_equal(test_scratch("lease-aio", 64 * MiB, &img, &fs, &dir), 0);
	ino = mkobj(fs, dir, "f");
	test_fill(a, N * SZ, 5);
	/* three extents apart (the other object's blocks in between), a hole after */
	for (int k = 0; k < 3; k++) {
		uint64_t other = mkobj(fs, dir, k ? (k == 1 ? "o1" : "o2") : "o0");

		assert_int_equal(gs_fs_write(fs, ino, a + k * (N / 4) * SZ, (N / 4) * SZ,
					     (uint64_t)k * (N / 4) * SZ), (N / 4) * SZ);
		assert_int_equal(gs_fs_write(fs, other, a, 8192, 0), 8192);
		assert_int_equal(gs_fs_fsync(fs, other, 0), 0);
	}
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, N * SZ, GS_LEASE_READ, &l), 0);
	for (int i = 0; i < N; i++) {
		io[i] = (struct gs_obj_io){ .op = GS_OP_READ, .len = SZ, .off = (uint64_t)i * SZ,
					    .buf = r + (size_t)i * SZ, .done = adone, .priv = &cnt };
		iop[i] = &io[i];
	}
	memset(r, 0xee, N * SZ);
	assert_int_equal(gs_fs_lease_submit(l, iop, N), N);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(cnt.calls, N);
	assert_int_equal(cnt.bad, 0);
	assert_memory_equal(r, a, 3 * (N / 4) * SZ);
	for (int i = 3 * (N / 4); i < N; i++)
		assert_memory_equal(r + (size_t)i * SZ, z, SZ);

	/* writes: one bad io refuses the whole batch, nothing queued */
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, N * SZ, GS_LEASE_ALLOC, &l), 0);
	test_fill(a, N * SZ, 6);
	for (int i = 0; i < N; i++) {
		io[i].op = GS_OP_WRITE;
		io[i].buf = a + (size_t)i * SZ;
	}
	io[5].off = N * SZ;
	cnt.calls = 0;
	assert_int_equal(gs_fs_lease_submit(l, iop, N), -EINVAL);
	assert_int_equal(cnt.calls, 0);
	io[5].off = 5 * SZ;
	assert_int_equal(gs_fs_lease_submit(l, iop, N), N);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(cnt.calls, N);
	assert_int_equal(cnt.bad, 0);
	assert_int_equal(gs_fs_read(fs, ino, r, N * SZ, 0), N * SZ);
	assert_memory_equal(r, a, N * SZ);
	test_scratch_end(img, fs);
	free(a);
	free(r);
	free(z);
}

/* Truncate and punch wait while a lease overlaps; unlink does not free. */
struct trunc_arg {
	struct gs_fs *fs;
	uint64_t ino;
	int mode;		/* 0: truncate to 0, 1: punch [0, 1 MiB) */
	int done;
	int ret;
};

static void *trunc_thread(void *p)
{
	struct trunc_arg *t = p;
	struct gs_stat in = { .size = 0 };

	if (t->mode == 0)
		t->ret = gs_fs_setattr(t->fs, t->ino, &in, GS_SET_SIZE, NULL);
	else
		t->ret = gs_fs_fallocate(t->fs, t->ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					 0, MiB);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_truncate_waits(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino;
	char *img;
	uint8_t *a = abuf(MiB), *r = abuf(MiB);
	struct gs_lease *l;
	struct gs_stat st;

	assert_int_equal(test_scratch("lease-trunc", 64 * MiB, &img, &fs, &dir), 0);
	ino = mkobj(fs, dir, "f");
	test_fill(a, MiB, 7);
	for (int mode = 0; mode < 2; mode++) {
		struct trunc_arg t = { .fs = fs, .ino = ino, .mode = mode };
		pthread_t th;

		assert_int_equal(gs_fs_write(fs, ino, a, MiB, 0), MiB);
		assert_int_equal(gs_fs_lease_begin(fs, ino, 0, MiB, GS_LEASE_READ, &l), 0);
		assert_int_equal(pthread_create(&th, NULL, trunc_thread, &t), 0);
		/* the blocks under the lease stay while it lasts */
		for (int i = 0; i < 20; i++) {
			assert_int_equal(gs_fs_lease_pread(l, r, MiB, 0), MiB);
			assert_memory_equal(r, a, MiB);
			assert_int_equal(__atomic_load_n(&t.done, __ATOMIC_ACQUIRE), 0);
			usleep(5000);
		}
		assert_int_equal(gs_fs_lease_end(l), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(t.ret, 0);
		assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
		assert_int_equal(st.size, mode ? MiB : 0);
		assert_int_equal(st.blocks, 0);
	}

	/* a lease outside the truncated range does not hold truncate up */
	assert_int_equal(gs_fs_write(fs, ino, a, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 4096, GS_LEASE_READ, &l), 0);
	st.size = 8192;
	assert_int_equal(gs_fs_setattr(fs, ino, &st, GS_SET_SIZE, NULL), 0);
	assert_int_equal(gs_fs_lease_end(l), 0);

	/* unlinked under a lease: readable until its end, then gone */
	assert_int_equal(gs_fs_write(fs, ino, a, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, MiB, GS_LEASE_READ, &l), 0);
	assert_int_equal(gs_fs_unlink(fs, dir, "f"), 0);
	assert_int_equal(gs_fs_lease_pread(l, r, MiB, 0), MiB);
	assert_memory_equal(r, a, MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), -ENOENT);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE, NULL, NULL), GS_FSCK_OK);
	unlink(img);
	free(img);
	free(a);
	free(r);
}

/*
 * Durability: leased writes (new blocks and overwrites) made durable by
 * gs_fs_fsync() survive a power cut that loses everything not flushed;
 * a leased write without fsync may be lost but never leaves a mapping to
 * blocks that did not get its data.
 */
static void test_powercut(void **state)
{
	struct gs_fs *fs;
	uint64_t dir = 0, ino, ino2;
	char *img;
	uint8_t *a = abuf(2 * MiB), *b = abuf(MiB), *c = abuf(MiB), *r = abuf(2 * MiB);
	struct gs_lease *l;
	struct gs_stat st;

	gs_set_log_func(test_log, NULL);
	img = test_image_path("lease-cut");
	assert_int_equal(test_mkfs(img, 64 * MiB, 4096), 0);
	assert_int_equal(test_mount_fault(&fs, img, ""), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &st), 0);
	dir = st.ino;
	ino = mkobj(fs, dir, "f");
	ino2 = mkobj(fs, dir, "g");
	assert_int_equal(gs_fs_fsync(fs, ino, 0), 0);
	test_fill(a, 2 * MiB, 8);
	test_fill(b, MiB, 9);
	test_fill(c, MiB, 10);
	/* from here the device has a volatile write cache: only flushes keep data */
	assert_int_equal(gs_q_fault(fs->q, "powercut=1000000"), 0);
	assert_int_equal(gs_fs_lease_begin(fs, ino, 0, 2 * MiB, GS_LEASE_ALLOC, &l), 0);
	assert_int_equal(gs_fs_lease_pwrite(l, a, 2 * MiB, 0), 2 * MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(gs_fs_fsync(fs, ino, 0), 0);
	/* an overwrite under a lease, fsync'd */
	assert_int_equal(gs_fs_lease_begin(fs, ino, MiB, MiB, GS_LEASE_WRITE, &l), 0);
	assert_int_equal(gs_fs_lease_pwrite(l, b, MiB, MiB), MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);
	assert_int_equal(gs_fs_fsync(fs, ino, 1), 0);
	/* not fsync'd: may go, but consistently */
	assert_int_equal(gs_fs_lease_begin(fs, ino2, 0, MiB, GS_LEASE_ALLOC, &l), 0);
	assert_int_equal(gs_fs_lease_pwrite(l, c, MiB, 0), MiB);
	assert_int_equal(gs_fs_lease_end(l), 0);
	/* the cut: the next write and the device's volatile cache are lost */
	assert_int_equal(gs_q_fault(fs->q, "powercut=1"), 0);
	gs_fs_unmount(fs);

	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE | GS_FSCK_REPAIR, NULL, NULL) &
			 ~GS_FSCK_FIXED, GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
	assert_int_equal(st.size, 2 * MiB);
	assert_int_equal(gs_fs_read(fs, ino, r, 2 * MiB, 0), 2 * MiB);
	assert_memory_equal(r, a, MiB);
	assert_memory_equal(r + MiB, b, MiB);
	/* g: either nothing (size 0) or all of c */
	assert_int_equal(gs_fs_getattr(fs, ino2, &st), 0);
	if (st.size) {
		assert_int_equal(gs_fs_read(fs, ino2, r, MiB, 0), MiB);
		assert_memory_equal(r, c, MiB);
	}
	test_scratch_end(img, fs);
	free(a);
	free(b);
	free(c);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coherence),
		cmocka_unit_test(test_alloc),
		cmocka_unit_test(test_checks),
		cmocka_unit_test(test_submit),
		cmocka_unit_test(test_truncate_waits),
		cmocka_unit_test(test_powercut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
