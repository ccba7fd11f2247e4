// SPDX-License-Identifier: MIT
/*
 * The fault-injecting backend: the Nth I/O fails with the asked errno and
 * the error reaches the submitter (sync and callback), every-Nth, per-op
 * counting, torn and dropped writes, and the power-cut write cache.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <time.h>
#include <cmocka.h>

#include "gpuq_test.h"

#define BS	4096u
#define IMG	(8u << 20)

static struct gs_q *open_fault(const char *spec, uint32_t pollers)
{
	/* buffered: lba 512 whatever the filesystem, for the sub-block cases */
	struct gs_q_params p = { .fault = spec, .min_pollers = pollers,
				 .max_pollers = pollers, .queue_depth = 16,
				 .flags = GS_Q_BUFFERED };
	struct gs_q *q = NULL;

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	return q;
}

static void test_fail_nth(void **state)
{
	struct gs_q *q = open_fault("fail=3", 1);
	char *b = tq_alloc(BS);

	assert_int_equal(gs_q_pread(q, b, BS, 0), BS);
	assert_int_equal(gs_q_pwrite(q, b, BS, 0), BS);
	assert_int_equal(gs_q_pread(q, b, BS, 0), -EIO);
	assert_int_equal(gs_q_pread(q, b, BS, 0), BS);

	/* writes only, ENOSPC; reads do not count */
	assert_int_equal(gs_q_fault(q, "fail=2:ENOSPC,op=write"), 0);
	assert_int_equal(gs_q_pread(q, b, BS, 0), BS);
	assert_int_equal(gs_q_pwrite(q, b, BS, 0), BS);
	assert_int_equal(gs_q_pread(q, b, BS, 0), BS);
	assert_int_equal(gs_q_pwrite(q, b, BS, BS), -ENOSPC);
	assert_int_equal(gs_q_pwrite(q, b, BS, BS), BS);

	/* flushes can fail too; numeric errno */
	assert_int_equal(gs_q_fault(q, "fail=1:5,op=flush"), 0);
	assert_int_equal(gs_q_flush(q), -EIO);
	assert_int_equal(gs_q_flush(q), 0);

	assert_int_equal(gs_q_fault(q, "every=2:EROFS"), 0);
	for (int i = 1; i <= 6; i++)
		assert_int_equal(gs_q_pread(q, b, BS, 0), i % 2 ? (int)BS : -EROFS);

	/* bad specs change nothing */
	assert_int_equal(gs_q_fault(q, "fail=0"), -EINVAL);
	assert_int_equal(gs_q_fault(q, "bogus=1"), -EINVAL);
	assert_int_equal(gs_q_fault(q, "fail=1:ENOTANERR"), -EINVAL);
	assert_int_equal(gs_q_fault(q, "tear=100"), -EINVAL);	/* not lba aligned */
	assert_int_equal(gs_q_pread(q, b, BS, 0), BS);		/* 7th: odd, passes */
	assert_int_equal(gs_q_pread(q, b, BS, 0), -EROFS);

	assert_int_equal(gs_q_fault(q, ""), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(gs_q_pread(q, b, BS, 0), BS);
	free(b);
	gs_q_close(q);
}

static void cb(struct gs_q_io *io, int64_t res)
{
	int64_t *out = io->priv;

	__atomic_store_n(out, res, __ATOMIC_RELEASE);
}

/* The error reaches callback submitters, with several pollers. */
static void test_fail_callback(void **state)
{
	struct gs_q *q = open_fault("fail=5", 2);
	struct gs_q_io io[8], *ios[8];
	int64_t res[8];
	char *b = tq_alloc(8 * BS);
	int i, nerr = 0;

	for (i = 0; i < 8; i++) {
		res[i] = 1;
		io[i] = (struct gs_q_io){ .op = GS_OP_READ, .len = BS, .off = i * BS,
					  .buf = b + i * BS, .done = cb, .priv = &res[i] };
		ios[i] = &io[i];
	}
	assert_int_equal(gs_q_submit(q, ios, 8), 8);
	for (i = 0; i < 8; i++) {
		while (__atomic_load_n(&res[i], __ATOMIC_ACQUIRE) == 1)
			usleep(100);
		if (res[i] == -EIO)
			nerr++;
		else
			assert_int_equal(res[i], BS);
	}
	assert_int_equal(nerr, 1);
	{
		struct gs_q_stats st;

		gs_q_get_stats(q, &st);
		assert_int_equal(st.errors, 1);
	}
	free(b);
	gs_q_close(q);
}

static void fill(char *b, int c)
{
	memset(b, c, BS);
}

static int all(const char *b, size_t from, size_t to, int c)
{
	for (size_t i = from; i < to; i++)
		if ((unsigned char)b[i] != c)
			return 0;
	return 1;
}

static void test_tear_drop(void **state)
{
	struct gs_q *q = open_fault("", 1);
	char *w = tq_alloc(BS), *r = tq_alloc(BS);

	fill(w, 0x11);
	assert_int_equal(gs_q_pwrite(q, w, BS, 0), BS);
	assert_int_equal(gs_q_pwrite(q, w, BS, BS), BS);
	assert_int_equal(gs_q_pwrite(q, w, BS, 2 * BS), BS);

	/* first write after the crash point (at=1) is fine, later ones torn */
	assert_int_equal(gs_q_fault(q, "at=1,tear=1024"), 0);
	fill(w, 0x22);
	assert_int_equal(gs_q_pwrite(q, w, BS, 0), BS);
	assert_int_equal(gs_q_pwrite(q, w, BS, BS), BS);	/* reported whole */
	assert_int_equal(gs_q_pread(q, r, BS, 0), BS);
	assert_true(all(r, 0, BS, 0x22));
	assert_int_equal(gs_q_pread(q, r, BS, BS), BS);
	assert_true(all(r, 0, 1024, 0x22));
	assert_true(all(r, 1024, BS, 0x11));			/* partial data */

	assert_int_equal(gs_q_fault(q, "drop"), 0);
	fill(w, 0x33);
	assert_int_equal(gs_q_pwrite(q, w, BS, 2 * BS), BS);
	assert_int_equal(gs_q_pread(q, r, BS, 2 * BS), BS);
	assert_true(all(r, 0, BS, 0x11));			/* never arrived */
	free(w);
	free(r);
	gs_q_close(q);
}

/*
 * Power cut after the 4th write: what a flush covered survives, the rest
 * (cached, unflushed) is lost, and nothing after the cut reaches the device.
 */
static void test_powercut(void **state)
{
	struct gs_q *q = open_fault("powercut=4", 2);
	char *w = tq_alloc(2 * BS), *r = tq_alloc(2 * BS);

	fill(w, 0xa1);
	assert_int_equal(gs_q_pwrite(q, w, BS, 0), BS);		/* 1 */
	assert_int_equal(gs_q_flush(q), 0);			/* 1 is durable */
	fill(w, 0xa2);
	assert_int_equal(gs_q_pwrite(q, w, BS, BS), BS);	/* 2: cached */
	fill(w, 0xa3);
	assert_int_equal(gs_q_pwrite(q, w, 512, 512), 512);	/* 3: overlaps 1 */
	/* before the cut, reads see the cache (sub-block overlay too) */
	assert_int_equal(gs_q_pread(q, r, 2 * BS, 0), 2 * BS);
	assert_true(all(r, 0, 512, 0xa1));
	assert_true(all(r, 512, 1024, 0xa3));
	assert_true(all(r, 1024, BS, 0xa1));
	assert_true(all(r, BS, 2 * BS, 0xa2));
	fill(w, 0xa4);
	assert_int_equal(gs_q_pwrite(q, w, BS, 2 * BS), BS);	/* 4: the cut */
	fill(w, 0xa5);
	assert_int_equal(gs_q_pwrite(q, w, BS, 3 * BS), BS);	/* after: dropped */
	assert_int_equal(gs_q_flush(q), 0);			/* dropped too */

	/* "reboot": clear the spec; the device shows the post-crash state */
	assert_int_equal(gs_q_fault(q, ""), 0);
	assert_int_equal(gs_q_pread(q, r, 2 * BS, 0), 2 * BS);
	assert_true(all(r, 0, BS, 0xa1));
	assert_true(all(r, BS, 2 * BS, 0));
	assert_int_equal(gs_q_pread(q, r, 2 * BS, 2 * BS), 2 * BS);
	assert_true(all(r, 0, 2 * BS, 0));

	/* flushed data written through the cache reaches the device intact */
	assert_int_equal(gs_q_fault(q, "powercut=1000"), 0);
	for (int i = 0; i < 64; i++) {
		memset(w, i, BS);
		assert_int_equal(gs_q_pwrite(q, w, BS, (uint64_t)(i % 40) * BS), BS);
	}
	assert_int_equal(gs_q_flush(q), 0);
	assert_int_equal(gs_q_fault(q, ""), 0);
	for (int i = 24; i < 64; i++) {
		assert_int_equal(gs_q_pread(q, r, BS, (uint64_t)(i % 40) * BS), BS);
		assert_true(all(r, 0, BS, i));
	}

	/* dead=eio: the write at the cut and everything after it fail */
	assert_int_equal(gs_q_fault(q, "powercut=2,dead=eio"), 0);
	fill(w, 0xc1);
	assert_int_equal(gs_q_pwrite(q, w, BS, 60 * BS), BS);	/* cached */
	assert_int_equal(gs_q_pwrite(q, w, BS, 61 * BS), -EIO);	/* the cut */
	assert_int_equal(gs_q_pwrite(q, w, BS, 62 * BS), -EIO);
	assert_int_equal(gs_q_flush(q), -EIO);
	assert_int_equal(gs_q_pread(q, r, BS, 60 * BS), BS);	/* reads still work */
	assert_true(all(r, 0, BS, 0));				/* cache lost */
	assert_int_equal(gs_q_fault(q, "powercut=1,dead=EROFS,tear=512"), 0);
	assert_int_equal(gs_q_pwrite(q, w, BS, 63 * BS), -EROFS);	/* torn, not acked */
	assert_int_equal(gs_q_pread(q, r, BS, 63 * BS), BS);
	assert_true(all(r, 0, 512, 0xc1));
	assert_true(all(r, 512, BS, 0));
	assert_int_equal(gs_q_fault(q, "dead=bogus"), -EINVAL);

	/* powercut with tear: the write at the cut lands partly */
	assert_int_equal(gs_q_fault(q, "powercut=1,tear=512"), 0);
	fill(w, 0xb1);
	assert_int_equal(gs_q_pwrite(q, w, BS, 50 * BS), BS);
	assert_int_equal(gs_q_fault(q, ""), 0);
	assert_int_equal(gs_q_pread(q, r, BS, 50 * BS), BS);
	assert_true(all(r, 0, 512, 0xb1));
	assert_true(all(r, 512, BS, 0));
	free(w);
	free(r);
	gs_q_close(q);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * gs_q_pread_sync on a fault queue reads on the caller's thread, as the
 * backend it wraps does: no poller sees the read (submits stay 0), while the
 * spec still applies to it: counted failures, the power-cut cache, and the
 * device model's time (a lower bound only: load can only add to it).
 */
static void test_read_sync(void **state)
{
	struct gs_q *q = open_fault("model=1000:1:20000", 1);
	char *w = tq_alloc(BS), *r = tq_alloc(BS);
	struct gs_q_stats st;
	uint64_t t0;

	fill(w, 0x5a);
	assert_int_equal(gs_q_pwrite(q, w, BS, 0), BS);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.submits, 1);
	t0 = mono_ns();
	assert_int_equal(gs_q_pread_sync(q, r, BS, 0), BS);
	/* 1 ms of service (1000 IOPS; 4 KiB at 1 MB/s: 4.096 ms) + 20 ms latency */
	assert_true(mono_ns() - t0 >= 24000000ull);
	assert_true(all(r, 0, BS, 0x5a));
	gs_q_get_stats(q, &st);
	assert_int_equal(st.submits, 1);	/* the read never went through a poller */
	assert_int_equal(st.reqs, 2);

	assert_int_equal(gs_q_fault(q, "fail=2,op=read"), 0);
	assert_int_equal(gs_q_pread_sync(q, r, BS, 0), BS);
	assert_int_equal(gs_q_pread_sync(q, r, BS, 0), -EIO);
	assert_int_equal(gs_q_pread_sync(q, r, BS, 0), BS);

	/* a write still in the volatile cache is what a direct read sees */
	assert_int_equal(gs_q_fault(q, "powercut=100"), 0);
	fill(w, 0x6b);
	assert_int_equal(gs_q_pwrite(q, w, BS, 0), BS);
	assert_int_equal(gs_q_pread_sync(q, r, BS, 0), BS);
	assert_true(all(r, 0, BS, 0x6b));
	gs_q_get_stats(q, &st);
	assert_int_equal(st.errors, 1);
	free(w);
	free(r);
	gs_q_close(q);
}

/* backend "fault:uring" selects the wrapper explicitly */
static void test_named(void **state)
{
	struct gs_q_params p = { .backend = "fault:uring", .queue_depth = 4 };
	struct gs_q *q = NULL;
	char *b = tq_alloc(BS);

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	assert_int_equal(gs_q_fault(q, "fail=1:ENOMEM"), 0);
	assert_int_equal(gs_q_pread(q, b, BS, 0), -ENOMEM);
	gs_q_close(q);
	p = (struct gs_q_params){ .backend = "fault:nosuch" };
	assert_int_equal(tq_open(&q, &p, IMG), -ENODEV);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fail_nth),
		cmocka_unit_test(test_fail_callback),
		cmocka_unit_test(test_tear_drop),
		cmocka_unit_test(test_powercut),
		cmocka_unit_test(test_named),
		cmocka_unit_test(test_read_sync),
	};

	return tq_run(tests, 1);
}
