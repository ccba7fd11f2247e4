// SPDX-License-Identifier: MIT
/*
 * Request and completion rings (include/gstore_ring.h) under contention:
 * many producers, several consumers, blocking and non-blocking pushes, many
 * laps around small rings.  Every tag must come out exactly once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq_test.h"

/* TSan runs ~20x slower: it checks the same interleavings on fewer requests */
#ifdef __SANITIZE_THREAD__
#define SCALE	5
#else
#define SCALE	1
#endif

struct run {
	struct gs_ring *r;
	unsigned producers, consumers;
	uint64_t per_producer;
	int use_cq;		/* exercise the completion queue instead */
	uint64_t *seen;		/* bitmap of tags */
	uint64_t consumed;	/* atomic */
	uint64_t dups;		/* atomic */
	uint64_t bad;		/* atomic: malformed entries */
	uint64_t full;		/* atomic: try_push said full */
	unsigned next_id;	/* atomic */
};

static uint64_t tag_of(unsigned p, uint64_t i, uint64_t per)
{
	return p * per + i;
}

static void *producer(void *arg)
{
	struct run *run = arg;
	unsigned id = __atomic_fetch_add(&run->next_id, 1, __ATOMIC_RELAXED);
	uint64_t i, full = 0;

	for (i = 0; i < run->per_producer; i++) {
		uint64_t tag = tag_of(id, i, run->per_producer);

		if (run->use_cq) {
			struct gs_cqe c = { .tag = tag, .res = (int64_t)~tag };

			while (gs_cq_try_push(run->r, &c) == -EAGAIN) {
				full++;
				sched_yield();
			}
			continue;
		}
		struct gs_sqe e = {
			.op = (uint8_t)(tag % GS_OP_NR), .len = (uint32_t)tag,
			.off = ~tag, .buf = tag * 3, .tag = tag, .cw = (uint32_t)(tag >> 7),
		};
		/* odd producers block (GPU style), even ones retry on full */
		if (id & 1) {
			gs_sq_push(run->r, &e);
		} else {
			while (gs_sq_try_push(run->r, &e) == -EAGAIN) {
				full++;
				sched_yield();
			}
		}
	}
	__atomic_fetch_add(&run->full, full, __ATOMIC_RELAXED);
	return NULL;
}

static void mark(struct run *run, uint64_t tag)
{
	uint64_t bit = 1ull << (tag & 63);

	if (tag >= run->producers * run->per_producer) {
		__atomic_fetch_add(&run->bad, 1, __ATOMIC_RELAXED);
		return;
	}
	if (__atomic_fetch_or(&run->seen[tag >> 6], bit, __ATOMIC_RELAXED) & bit)
		__atomic_fetch_add(&run->dups, 1, __ATOMIC_RELAXED);
}

static void *consumer(void *arg)
{
	struct run *run = arg;
	uint64_t total = run->producers * run->per_producer;
	unsigned idle = 0;

	while (__atomic_load_n(&run->consumed, __ATOMIC_RELAXED) < total) {
		uint64_t tag;
		int got;

		if (run->use_cq) {
			struct gs_cqe c;

			got = gs_cq_try_pop(run->r, &c);
			tag = c.tag;
			if (got && c.res != (int64_t)~tag)
				__atomic_fetch_add(&run->bad, 1, __ATOMIC_RELAXED);
		} else {
			struct gs_sqe e;

			got = gs_sq_try_pop(run->r, &e);
			tag = e.tag;
			if (got && (e.op != tag % GS_OP_NR || e.len != (uint32_t)tag ||
				    e.off != ~tag || e.buf != tag * 3 || e.cw != (uint32_t)(tag >> 7)))
				__atomic_fetch_add(&run->bad, 1, __ATOMIC_RELAXED);
		}
		if (!got) {
			if (++idle > 16)
				sched_yield();
			continue;
		}
		idle = 0;
		mark(run, tag);
		__atomic_fetch_add(&run->consumed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void run_ring(uint32_t entries, unsigned np, unsigned nc, uint64_t per, int use_cq)
{
	size_t bytes = gs_ring_bytes(entries, entries, 4);
	struct run run = { .producers = np, .consumers = nc, .per_producer = per / SCALE,
			   .use_cq = use_cq };
	pthread_t th[64];
	uint64_t total = np * run.per_producer, i;
	unsigned t;

	run.r = aligned_alloc(64, bytes);
	assert_non_null(run.r);
	assert_int_equal(gs_ring_init(run.r, bytes, entries, entries, 4, 0), 0);
	run.seen = calloc((total + 63) / 64, sizeof(uint64_t));
	assert_non_null(run.seen);

	for (t = 0; t < nc; t++)
		assert_int_equal(pthread_create(&th[t], NULL, consumer, &run), 0);
	for (t = 0; t < np; t++)
		assert_int_equal(pthread_create(&th[nc + t], NULL, producer, &run), 0);
	for (t = 0; t < np + nc; t++)
		pthread_join(th[t], NULL);

	assert_int_equal(run.consumed, total);
	assert_int_equal(run.dups, 0);
	assert_int_equal(run.bad, 0);
	for (i = 0; i < total; i++)
		if (!(run.seen[i >> 6] >> (i & 63) & 1))
			fail_msg("tag %llu lost", (unsigned long long)i);
	/* empty again, and the counters agree */
	if (use_cq) {
		struct gs_cqe c;

		assert_int_equal(gs_cq_try_pop(run.r, &c), 0);
		assert_int_equal(run.r->cq_head, total);
		assert_int_equal(run.r->cq_tail, total);
	} else {
		struct gs_sqe e;

		assert_int_equal(gs_sq_try_pop(run.r, &e), 0);
		assert_int_equal(gs_sq_pending(run.r), 0);
		assert_int_equal(run.r->sq_tail, total);
	}
	free(run.seen);
	free(run.r);
}

/* 8 producers (4 blocking, 4 try_push) x 250k, 2 consumers: 2M requests
 * (400k under TSan). */
static void test_sq_mpmc(void **state)
{
	run_ring(4096, 8, 2, 250000, 0);
}

/* A tiny ring: thousands of laps, full and empty all the time. */
static void test_sq_wrap(void **state)
{
	run_ring(8, 8, 3, 5000, 0);
}

static void test_cq_mpmc(void **state)
{
	run_ring(4096, 8, 2, 125000, 1);
}

static void test_cq_wrap(void **state)
{
	run_ring(4, 8, 2, 5000, 1);
}

/* Single-threaded edges: full, empty, FIFO order, wraparound of seq. */
static void test_sq_edges(void **state)
{
	size_t bytes = gs_ring_bytes(4, 2, 0);
	struct gs_ring *r = aligned_alloc(64, bytes);
	struct gs_sqe e = { 0 }, o = { 0 };
	struct gs_cqe c = { 0 }, co = { 0 };
	uint64_t i;

	assert_int_equal(gs_ring_init(r, bytes, 4, 2, 0, 0), 0);
	for (i = 0; i < 1000; i++) {
		unsigned k;

		for (k = 0; k < 4; k++) {
			e.tag = i * 4 + k;
			assert_int_equal(gs_sq_try_push(r, &e), 0);
		}
		assert_int_equal(gs_sq_try_push(r, &e), -EAGAIN);
		assert_int_equal(gs_sq_pending(r), 4);
		for (k = 0; k < 4; k++) {
			assert_int_equal(gs_sq_try_pop(r, &o), 1);
			assert_int_equal(o.tag, i * 4 + k);
		}
		assert_int_equal(gs_sq_try_pop(r, &o), 0);
		c.tag = i;
		assert_int_equal(gs_cq_try_push(r, &c), 0);
		assert_int_equal(gs_cq_try_push(r, &c), 0);
		assert_int_equal(gs_cq_try_push(r, &c), -EAGAIN);
		assert_int_equal(gs_cq_try_pop(r, &co), 1);
		assert_int_equal(gs_cq_try_pop(r, &co), 1);
		assert_int_equal(co.tag, i);
		assert_int_equal(gs_cq_try_pop(r, &co), 0);
	}
	free(r);
}

static void test_init_checks(void **state)
{
	size_t bytes = gs_ring_bytes(16, 16, 8);
	char *mem = aligned_alloc(64, bytes + 64);
	struct gs_ring *r = (struct gs_ring *)mem;

	assert_int_equal(bytes % 64, 0);
	assert_int_equal(gs_ring_init(mem + 8, bytes, 16, 16, 8, 0), -EINVAL);
	assert_int_equal(gs_ring_init(mem, bytes, 12, 16, 8, 0), -EINVAL);
	assert_int_equal(gs_ring_init(mem, bytes, 16, 0, 8, 0), -EINVAL);
	assert_int_equal(gs_ring_init(mem, bytes - 1, 16, 16, 8, 0), -ENOSPC);
	assert_int_equal(gs_ring_init(mem, bytes, 16, 16, 8, 0x80), -EINVAL);
	assert_int_equal(gs_ring_init(mem, bytes, 16, 16, 8, GS_RING_POLLED), 0);
	assert_int_equal(r->magic, GS_RING_MAGIC);
	assert_int_equal(r->flags, GS_RING_POLLED);
	assert_true(r->cw_off + 8 * sizeof(struct gs_cword) <= r->bytes);
	assert_true(r->cq_off % 64 == 0 && r->cw_off % 64 == 0);
	/* completion words: armed, completed, polled */
	gs_cw_arm(r, 3);
	{
		int64_t res = 0;

		assert_int_equal(gs_cw_poll(r, 3, &res), 0);
		gs_cw_complete(&gs_ring_cw(r)[3], -5);
		assert_int_equal(gs_cw_poll(r, 3, &res), 1);
		assert_int_equal(res, -5);
		assert_int_equal(gs_ring_cw_wait(r, 3, 0), -5);
	}
	free(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_checks),
		cmocka_unit_test(test_sq_edges),
		cmocka_unit_test(test_sq_mpmc),
		cmocka_unit_test(test_sq_wrap),
		cmocka_unit_test(test_cq_mpmc),
		cmocka_unit_test(test_cq_wrap),
	};

	return tq_run(tests, 0);
}
