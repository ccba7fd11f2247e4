// SPDX-License-Identifier: MIT
/*
 * Rings of untrusted producers (gs_q_ring_add_bounded()): the bounds table
 * (normalisation and lookup), requests refused outside it or beyond its
 * permission, buffers only in the ring's region, and a producer that
 * rewrites the ring's geometry, counters and slots after the ring was
 * added: the poller keeps its own copy of the geometry, never hangs on the
 * counters, drops cqes it cannot post, and keeps serving the other rings
 * while one ring floods it.  Also: gs_q_ring_del() of a ring whose cq
 * nobody drains returns.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "gpuq_test.h"
#include "gpuq/gpuq_internal.h"

#define BS	4096u
#define IMG	(4u << 20)
#define NCW	16u
/* a hostile producer's store (atomic only so that TSan runs see no race) */
#define SET(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ---- the table ---- */

static void test_table(void **state)
{
	const struct gs_q_bound b[] = {
		{ .off = 8192, .len = 4096, .perm = GS_Q_BOUND_READ },	/* gap before it */
		{ .off = 0, .len = 100, .perm = GS_Q_BOUND_READ },
		{ .off = 50, .len = 100, .perm = GS_Q_BOUND_READ | GS_Q_BOUND_WRITE },
		{ .off = 150, .len = 50, .perm = GS_Q_BOUND_READ | GS_Q_BOUND_WRITE },
		{ .off = 300, .len = 0, .perm = GS_Q_BOUND_READ },	/* empty: ignored */
	};
	const struct gs_q_bound bad[] = {
		{ .off = UINT64_MAX - 1, .len = 4, .perm = GS_Q_BOUND_READ },
		{ .off = 0, .len = 4, .perm = 0 },
		{ .off = 0, .len = 4, .perm = 4 },
		{ .off = 0, .len = 4, .perm = GS_Q_BOUND_READ, .rsvd = 1 },
	};
	struct qbounds *qb;

	assert_int_equal(gs_bounds_build(b, 5, &qb), 0);
	/* [0,50) r, [50,200) rw (two adjacent rw pieces merged), [8192,12288) r */
	assert_int_equal(qb->n, 3);
	assert_int_equal(qb->b[0].end, 50);
	assert_int_equal(qb->b[1].start, 50);
	assert_int_equal(qb->b[1].end, 200);
	assert_int_equal(qb->perms, GS_Q_BOUND_READ | GS_Q_BOUND_WRITE);
	assert_int_equal(gs_bounds_check(qb, 0, 200, GS_Q_BOUND_READ), 0);
	assert_int_equal(gs_bounds_check(qb, 0, 200, GS_Q_BOUND_WRITE), -EACCES);
	assert_int_equal(gs_bounds_check(qb, 50, 150, GS_Q_BOUND_WRITE), 0);
	assert_int_equal(gs_bounds_check(qb, 199, 2, GS_Q_BOUND_READ), -EACCES);
	assert_int_equal(gs_bounds_check(qb, 200, 1, GS_Q_BOUND_READ), -EACCES);
	assert_int_equal(gs_bounds_check(qb, 8191, 2, GS_Q_BOUND_READ), -EACCES);
	assert_int_equal(gs_bounds_check(qb, 8192, 4096, GS_Q_BOUND_READ), 0);
	assert_int_equal(gs_bounds_check(qb, 8192, 4097, GS_Q_BOUND_READ), -EACCES);
	assert_int_equal(gs_bounds_check(qb, 12288, 4096, GS_Q_BOUND_READ), -EACCES);
	assert_int_equal(gs_bounds_check(qb, UINT64_MAX - 10, 4096, GS_Q_BOUND_READ), -EACCES);
	free(qb);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(gs_bounds_build(&bad[i], 1, &qb), -EINVAL);
	/* no ranges: everything refused */
	assert_int_equal(gs_bounds_build(NULL, 0, &qb), 0);
	assert_int_equal(gs_bounds_check(qb, 0, 1, GS_Q_BOUND_READ), -EACCES);
	free(qb);
}

/* ---- a bounded ring on a queue ---- */

struct bring {
	size_t bytes;
	struct gs_ring *r;
	char *buf;
	/* the producer's own copy of the geometry: the header may be garbage */
	struct gs_sq_slot *sq;
	struct gs_cword *cw;
	uint32_t sq_mask;
};

static void bring_init(struct bring *b, uint32_t sq, uint32_t cq)
{
	b->bytes = (gs_ring_bytes(sq, cq, NCW) + 4095) & ~(size_t)4095;
	b->r = tq_alloc(b->bytes);
	b->buf = tq_alloc(16 * BS);
	assert_non_null(b->r);
	assert_non_null(b->buf);
	assert_int_equal(gs_ring_init(b->r, b->bytes, sq, cq, NCW, 0), 0);
	b->sq = gs_ring_sq(b->r);
	b->cw = gs_ring_cw(b->r);
	b->sq_mask = sq - 1;
}

static void bring_free(struct bring *b)
{
	free(b->r);
	free(b->buf);
}

/* Push with the producer's geometry (a ticket, as gs_sq_push takes one). */
static void bpush(struct gs_q *q, struct bring *b, const struct gs_sqe *e)
{
	uint64_t t = __atomic_fetch_add(&b->r->sq_tail, 1, __ATOMIC_RELAXED);

	gs_sq_fill(&b->sq[t & b->sq_mask], t, e);
	gs_q_kick(q);
}

/* One request on word @cw and its result. */
static int64_t bio(struct gs_q *q, struct bring *b, uint8_t op, uint8_t flags, uint64_t off,
		   uint32_t len, uint64_t buf, uint32_t cw)
{
	struct gs_sqe e = { .op = op, .flags = flags | GS_SQE_CW, .len = len, .off = off,
			    .buf = buf, .cw = cw };
	int64_t res;

	b->cw[cw].state = 0;
	bpush(q, b, &e);
	while (!gs_load_acq32(&b->cw[cw].state))
		usleep(20);
	res = b->cw[cw].res;
	return res;
}

static int64_t bread(struct gs_q *q, struct bring *b, uint64_t off, uint32_t len, uint64_t buf)
{
	return bio(q, b, GS_OP_READ, GS_SQE_BUF_OFF, off, len, buf, 1);
}

static void fill_image(struct gs_q *q)
{
	char *p = tq_alloc(BS);

	for (uint64_t blk = 0; blk < IMG / BS; blk++) {
		tq_fill(p, BS, blk, 1);
		assert_int_equal(gs_q_pwrite(q, p, BS, blk * BS), BS);
	}
	free(p);
}

static void test_refused(void **state)
{
	struct gs_q_params qp = { .max_pollers = 2 };
	struct gs_q_bound rd = { .off = 8 * BS, .len = 4 * BS, .perm = GS_Q_BOUND_READ };
	struct gs_q_bound rw = { .off = 8 * BS, .len = 4 * BS,
				 .perm = GS_Q_BOUND_READ | GS_Q_BOUND_WRITE };
	struct gs_q_stats st;
	struct bring b;
	struct gs_q *q;

	assert_int_equal(tq_open(&q, &qp, IMG), 0);
	fill_image(q);
	bring_init(&b, 16, 16);
	assert_int_equal(gs_q_ring_add_bounded(q, b.r, 64, b.buf, 16 * BS), -EINVAL);
	assert_int_equal(gs_q_ring_add_bounded(q, b.r, b.bytes, b.buf, 16 * BS), 0);
	assert_int_equal(gs_q_ring_set_bounds(q, q->iring, &rd, 1), -EINVAL);	/* trusted */

	/* no bounds yet: everything refused */
	assert_int_equal(bread(q, &b, 8 * BS, BS, 0), -EACCES);
	assert_int_equal(gs_q_ring_set_bounds(q, b.r, &rd, 1), 0);
	assert_int_equal(bread(q, &b, 9 * BS, 2 * BS, 0), 2 * BS);
	assert_true(tq_check(b.buf, BS, 9, 1) && tq_check(b.buf + BS, BS, 10, 1));
	memset(b.buf, 0xee, 16 * BS);
	assert_int_equal(bread(q, &b, 7 * BS, BS, 0), -EACCES);		/* before */
	assert_int_equal(bread(q, &b, 12 * BS, BS, 0), -EACCES);		/* after */
	assert_int_equal(bread(q, &b, 11 * BS, 2 * BS, 0), -EACCES);	/* straddles */
	assert_int_equal(bread(q, &b, 0, IMG, 0), -EACCES);
	assert_int_equal(bread(q, &b, 8 * BS, BS, 16 * BS), -EFAULT);	/* buffer past region */
	assert_int_equal(bread(q, &b, 8 * BS, 2 * BS, 15 * BS), -EFAULT);
	assert_int_equal(bio(q, &b, GS_OP_READ, 0, 8 * BS, BS, (uintptr_t)b.buf, 1), -EFAULT);
	assert_int_equal(bio(q, &b, GS_OP_WRITE, GS_SQE_BUF_OFF, 8 * BS, BS, 0, 2), -EACCES);
	assert_int_equal(bio(q, &b, GS_OP_FLUSH, 0, 0, 0, 0, 3), -EACCES);
	/* nothing refused touched the buffer */
	for (size_t i = 0; i < 16 * BS; i++)
		if ((unsigned char)b.buf[i] != 0xee)
			fail_msg("refused request wrote buffer byte %zu", i);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.denied, 10);

	/* with write permission: write, flush, read back; outside still refused */
	assert_int_equal(gs_q_ring_set_bounds(q, b.r, &rw, 1), 0);
	tq_fill(b.buf, BS, 8, 2);
	assert_int_equal(bio(q, &b, GS_OP_WRITE, GS_SQE_BUF_OFF, 8 * BS, BS, 0, 2), BS);
	assert_int_equal(bio(q, &b, GS_OP_FLUSH, 0, 0, 0, 0, 3), 0);
	assert_int_equal(bio(q, &b, GS_OP_WRITE, GS_SQE_BUF_OFF, 12 * BS, BS, 0, 2), -EACCES);
	memset(b.buf, 0, BS);
	assert_int_equal(bread(q, &b, 8 * BS, BS, 0), BS);
	assert_true(tq_check(b.buf, BS, 8, 2));
	assert_int_equal(gs_q_pread(q, b.buf, BS, 12 * BS), BS);
	assert_true(tq_check(b.buf, BS, 12, 1));	/* the neighbour is untouched */
	gs_q_get_stats(q, &st);
	assert_int_equal(st.denied, 11);

	assert_int_equal(gs_q_ring_del(q, b.r), 0);
	gs_q_close(q);
	bring_free(&b);
}

/*
 * After the ring is added its producer rewrites the geometry fields with
 * garbage: the pollers keep serving it with the geometry they copied (the
 * old code read sq_off & co. on every pop and went off into the weeds).
 * Then it corrupts its cq: completions that cannot be posted are dropped
 * and counted, the completion word still arrives.
 */
static void test_geometry_rewritten(void **state)
{
	struct gs_q_params qp = { 0 };
	struct gs_q_bound all = { .off = 0, .len = IMG, .perm = GS_Q_BOUND_READ };
	struct gs_q_stats st;
	struct gs_cq_slot *cq;
	struct bring b;
	struct gs_q *q;

	assert_int_equal(tq_open(&q, &qp, IMG), 0);
	fill_image(q);
	bring_init(&b, 16, 4);
	cq = gs_ring_cq(b.r);
	assert_int_equal(gs_q_ring_add_bounded(q, b.r, b.bytes, b.buf, 16 * BS), 0);
	assert_int_equal(gs_q_ring_set_bounds(q, b.r, &all, 1), 0);
	SET(b.r->sq_off, 1ull << 46);
	SET(b.r->cq_off, ~0ull);
	SET(b.r->cw_off, 1ull << 40);
	SET(b.r->sq_entries, 1u << 31);
	SET(b.r->cq_entries, 3);
	SET(b.r->ncw, ~0u);
	SET(b.r->bytes, 1);
	SET(b.r->magic, 0);
	for (int k = 0; k < 50; k++) {
		uint64_t blk = (k * 37) % (IMG / BS);

		assert_int_equal(bread(q, &b, blk * BS, BS, 0), BS);
		assert_true(tq_check(b.buf, BS, blk, 1));
	}
	/* cq slots claim a consumer far ahead: no cqe fits, none is waited for */
	for (unsigned i = 0; i < 4; i++)
		SET(cq[i].seq, 1ull << 60);
	SET(b.r->cq_tail, 12345);
	for (int k = 0; k < 20; k++)
		assert_int_equal(bio(q, &b, GS_OP_READ, GS_SQE_BUF_OFF | GS_SQE_CQE, 0, BS, 0, 2),
				 BS);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.cq_dropped, 20);
	/* the sq head jumps: requests at the new head are served (position only) */
	SET(b.r->sq_head, b.r->sq_head + 1000003);
	SET(b.r->sq_tail, b.r->sq_head);
	assert_int_equal(bread(q, &b, 3 * BS, BS, 0), BS);
	assert_true(tq_check(b.buf, BS, 3, 1));
	assert_int_equal(gs_q_ring_del(q, b.r), 0);
	gs_q_close(q);
	bring_free(&b);
}

/* ---- a flooding ring does not starve the others ---- */

struct flood {
	struct gs_q *q;
	struct bring *b;
	unsigned stop;		/* atomic */
	uint64_t pushed;
};

static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	/* refused at once (no bounds): each completes without the device */
	struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF, .len = BS };

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		uint64_t t = __atomic_fetch_add(&f->b->r->sq_tail, 1, __ATOMIC_RELAXED);
		struct gs_sq_slot *s = &f->b->sq[t & f->b->sq_mask];

		/* our turn at the slot, as gs_sq_push() waits for it */
		while (gs_load_acq64(&s->seq) != t)
			if (__atomic_load_n(&f->stop, __ATOMIC_RELAXED))
				return NULL;
		gs_sq_fill(s, t, &e);
		f->pushed++;
		if (!(f->pushed & 255))
			gs_q_kick(f->q);
	}
	return NULL;
}

static void test_flood(void **state)
{
	struct gs_q_params qp = { 0 };	/* one poller: the flood and the good ring share it */
	struct gs_q_bound all = { .off = 0, .len = IMG, .perm = GS_Q_BOUND_READ };
	struct bring bad, good;
	struct flood f = { 0 };
	struct gs_q_stats st;
	pthread_t th;
	struct gs_q *q;

	assert_int_equal(tq_open(&q, &qp, IMG), 0);
	fill_image(q);
	bring_init(&bad, 64, 64);
	bring_init(&good, 16, 16);
	assert_int_equal(gs_q_ring_add_bounded(q, bad.r, bad.bytes, bad.buf, 16 * BS), 0);
	assert_int_equal(gs_q_ring_add_bounded(q, good.r, good.bytes, good.buf, 16 * BS), 0);
	assert_int_equal(gs_q_ring_set_bounds(q, good.r, &all, 1), 0);
	f.q = q;
	f.b = &bad;
	assert_int_equal(pthread_create(&th, NULL, flood_thread, &f), 0);
	for (int k = 0; k < 200; k++) {
		uint64_t blk = (k * 13) % (IMG / BS);

		assert_int_equal(bread(q, &good, blk * BS, BS, 0), BS);
		assert_true(tq_check(good.buf, BS, blk, 1));
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	gs_q_get_stats(q, &st);
	assert_true(st.denied > 0);
	assert_int_equal(gs_q_ring_del(q, bad.r), 0);
	assert_int_equal(gs_q_ring_del(q, good.r), 0);
	gs_q_close(q);
	bring_free(&bad);
	bring_free(&good);
}

/*
 * Replacing a ring's bounds returns only once the requests the old table let
 * through have completed: then whatever the old ranges were (a lease's
 * blocks) may change owner.  A device model makes the read take 300 ms.
 */
static void test_rebound_waits(void **state)
{
	struct gs_q_params qp = { .fault = "model=1000000:10000:300000" };
	struct gs_q_bound rd = { .off = 0, .len = IMG, .perm = GS_Q_BOUND_READ };
	struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CW, .len = BS,
			    .off = 5 * BS, .cw = 4 };
	struct gs_q_stats st;
	struct bring b;
	struct gs_q *q;

	assert_int_equal(tq_open(&q, &qp, IMG), 0);
	bring_init(&b, 16, 16);
	assert_int_equal(gs_q_ring_add_bounded(q, b.r, b.bytes, b.buf, 16 * BS), 0);
	assert_int_equal(gs_q_ring_set_bounds(q, b.r, &rd, 1), 0);
	b.cw[4].state = 0;
	bpush(q, &b, &e);
	do {	/* admitted and in the device */
		usleep(1000);
		gs_q_get_stats(q, &st);
	} while (!st.inflight && !gs_load_acq32(&b.cw[4].state));
	assert_int_equal(gs_q_ring_set_bounds(q, b.r, NULL, 0), 0);
	assert_int_equal(gs_load_acq32(&b.cw[4].state), 1);	/* done before the return */
	assert_int_equal(b.cw[4].res, BS);
	assert_int_equal(bread(q, &b, 5 * BS, BS, 0), -EACCES);
	assert_int_equal(gs_q_ring_del(q, b.r), 0);
	gs_q_close(q);
	bring_free(&b);
}

/* A trusted ring whose cq nobody drains: deleting it does not wait forever
 * for cq space (completions of a ring being deleted are dropped). */
static void test_del_undrained(void **state)
{
	struct gs_q_params qp = { 0 };
	struct bring b;
	struct gs_q *q;

	assert_int_equal(tq_open(&q, &qp, IMG), 0);
	bring_init(&b, 16, 2);
	assert_int_equal(gs_q_ring_add(q, b.r, b.buf, 16 * BS), 0);
	for (int k = 0; k < 8; k++) {
		struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE,
				    .len = BS, .off = (uint64_t)k * BS, .buf = (uint64_t)k * BS };

		bpush(q, &b, &e);
	}
	while (gs_sq_pending(b.r))
		usleep(100);
	assert_int_equal(gs_q_ring_del(q, b.r), 0);
	gs_q_close(q);
	bring_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_geometry_rewritten),
		cmocka_unit_test(test_flood),
		cmocka_unit_test(test_rebound_waits),
		cmocka_unit_test(test_del_undrained),
	};

	return tq_run(tests, 1);
}
