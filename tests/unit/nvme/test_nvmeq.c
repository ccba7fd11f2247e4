// SPDX-License-Identifier: MIT
/*
 * gstore_nvmeq.h (BaM queues) from CPU threads against the software NVMe
 * controller (gpuq/swnvme.h): many threads sharing queue pairs,
 * write-then-read-verify, the single-consumer reap mode and batching, command ids
 * wrapping past 65536, tiny queues (every submitter waits for a slot); the
 * same workloads with collected completions (one waiter collects for all).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gstore_nvmeq.h"
#include "gpuq/swnvme.h"

#define FILE_BYTES	(32ull << 20)
#define LBA		4096u
#define REGION		(1u << 20)	/* per thread */

static char path[] = "/tmp/gs-nvmeq-XXXXXX";
/* waits: gs_nvmeq_wait (each waiter scans the CQ), or collected completions */
static int collected;

struct tq {
	struct gs_nvmeq q;
	void *sq, *cq, *state;
};

struct env {
	struct gs_swnvme *c;
	struct tq *qs;
	int nqps;
};

static void *zalloc(size_t n)
{
	void *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);

	assert_non_null(p);
	memset(p, 0, n);
	return p;
}

static void env_start(struct env *e, int nqps, uint32_t nslots)
{
	struct gs_swnvme_params p = {
		.path = path, .flags = GS_SWNVME_BUFFERED, .max_qpairs = 16, .depth = 64,
		.spin_us = 50,
	};
	uint8_t *bar;
	int i;

	assert_int_equal(gs_swnvme_start(&e->c, &p), 0);
	bar = gs_swnvme_bar(e->c);
	e->nqps = nqps;
	assert_int_equal(posix_memalign((void **)&e->qs, GS_CACHELINE, nqps * sizeof(*e->qs)), 0);
	for (i = 0; i < nqps; i++) {
		struct tq *t = &e->qs[i];
		uint32_t qsize = gs_nvmeq_qsize(nslots);
		uint16_t qid = i + 1;

		t->sq = zalloc(qsize * 64);
		t->cq = zalloc(qsize * 16);
		t->state = zalloc(gs_nvmeq_state_bytes(nslots));
		assert_int_equal(gs_swnvme_map(e->c, (uintptr_t)t->sq, t->sq, qsize * 64), 0);
		assert_int_equal(gs_swnvme_map(e->c, (uintptr_t)t->cq, t->cq, qsize * 16), 0);
		assert_int_equal(gs_swnvme_create_qpair(e->c, qid, (uintptr_t)t->sq,
							(uintptr_t)t->cq, qsize), 0);
		assert_int_equal(gs_nvmeq_init(&t->q, nslots, t->sq, t->cq,
					       (uint32_t *)(bar + GS_SWNVME_DB_BASE + 8 * qid),
					       (uint32_t *)(bar + GS_SWNVME_DB_BASE + 8 * qid + 4),
					       t->state), 0);
	}
}

static void env_stop(struct env *e)
{
	int i;

	for (i = 0; i < e->nqps; i++) {
		assert_int_equal(gs_swnvme_delete_qpair(e->c, i + 1), 0);
		free(e->qs[i].sq);
		free(e->qs[i].cq);
		free(e->qs[i].state);
	}
	free(e->qs);
	gs_swnvme_stop(e->c);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static void fill(void *buf, size_t len, uint64_t off, uint64_t seed)
{
	uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = mix(seed ^ (off + i * 8));
}

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* one synchronous command on a shared queue; buffers are identity-mapped */
static int io(struct gs_nvmeq *q, uint8_t opc, uint64_t off, void *buf, uint32_t len,
	      uint64_t *list)
{
	struct gs_nvme_cmd c;
	struct gs_nvme_cqe e;
	uint64_t prp2 = 0, t;
	uint32_t n = len / 4096, i;

	if (n == 2)
		prp2 = (uintptr_t)buf + 4096;
	if (n > 2) {
		for (i = 1; i < n; i++)
			list[i - 1] = (uintptr_t)buf + i * 4096ull;
		prp2 = (uintptr_t)list;
	}
	gs_nvme_rw(&c, opc, 1, off / LBA, len / LBA, (uintptr_t)buf, prp2);
	t = gs_nvmeq_submit(q, &c);
	if (collected)
		return gs_nvme_status_errno(gs_nvmeq_wait_collected(q, t));
	return gs_nvme_status_errno(gs_nvmeq_wait(q, t, &e));
}

struct worker {
	struct env *e;
	int id, ios, err;
	pthread_t th;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 11 + w->id, region = (uint64_t)w->id * REGION;
	char *wb = zalloc(65536), *rb = zalloc(65536);
	uint64_t *list = zalloc(8192);
	int i;

	if (gs_swnvme_map(w->e->c, (uintptr_t)wb, wb, 65536) ||
	    gs_swnvme_map(w->e->c, (uintptr_t)rb, rb, 65536) ||
	    gs_swnvme_map(w->e->c, (uintptr_t)list, list, 8192)) {
		w->err = 1;
		return NULL;
	}
	for (i = 0; i < w->ios && !w->err; i++) {
		struct gs_nvmeq *q = &w->e->qs[(w->id + i) % w->e->nqps].q;
		uint32_t len = (1 + rnd(&seed) % 16) * 4096;
		uint64_t off = (rnd(&seed) % ((REGION - len) / LBA)) * LBA;

		fill(wb, len, region + off, seed);
		if (io(q, GS_NVME_CMD_WRITE, region + off, wb, len, list) ||
		    io(q, GS_NVME_CMD_READ, region + off, rb, len, list + 512) ||
		    memcmp(wb, rb, len))
			w->err = 1;
	}
	free(wb);
	free(rb);
	free(list);
	return NULL;
}

static void run_threads(int nthr, int nqps, uint32_t nslots, int ios)
{
	struct worker w[16];
	struct env e;
	int i;

	env_start(&e, nqps, nslots);
	for (i = 0; i < nthr; i++) {
		w[i] = (struct worker){ .e = &e, .id = i, .ios = ios };
		assert_int_equal(pthread_create(&w[i].th, NULL, worker, &w[i]), 0);
	}
	for (i = 0; i < nthr; i++) {
		pthread_join(w[i].th, NULL);
		assert_int_equal(w[i].err, 0);
	}
	env_stop(&e);
}

static void test_init_args(void **state)
{
	struct gs_nvmeq q;
	uint64_t st[64];

	assert_int_equal(gs_nvmeq_init(&q, 3, NULL, NULL, NULL, NULL, st), -22);
	assert_int_equal(gs_nvmeq_init(&q, 1, NULL, NULL, NULL, NULL, st), -22);
	assert_int_equal(gs_nvmeq_init(&q, 65536, NULL, NULL, NULL, NULL, st), -22);
	assert_int_equal(gs_nvmeq_qsize(32), 33);
	assert_int_equal(gs_nvme_status_errno(0), 0);
	assert_int_equal(gs_nvme_status_errno(0x80), -ERANGE);
	assert_int_equal(gs_nvme_status_errno(0x281), -EIO);
}

static void test_one_thread(void **state)
{
	run_threads(1, 1, 8, 200);
}

static void test_4_threads_1_qp(void **state)
{
	run_threads(4, 1, 16, 100);
}

static void test_16_threads_4_qps(void **state)
{
	run_threads(16, 4, 32, 40);
}

/* more threads than slots: submitters queue for their turn */
static void test_tiny_queue(void **state)
{
	run_threads(8, 1, 2, 40);
}

/*
 * Command ids are 16 bits of the ticket: run well past 65536 tickets; the
 * heads (and with @coll the completion words) stay in step, and an error
 * status reaches its waiter.
 */
static void cid_wrap(int coll)
{
	struct env e;
	char *buf = zalloc(4096);
	struct gs_nvmeq *q;
	int i;

	collected = coll;
	env_start(&e, 1, 4);
	q = &e.qs[0].q;
	assert_int_equal(gs_swnvme_map(e.c, (uintptr_t)buf, buf, 4096), 0);
	for (i = 0; i < 70000; i++)
		assert_int_equal(io(q, GS_NVME_CMD_READ, (uint64_t)(i % 64) * LBA, buf, 4096, NULL),
				 0);
	assert_true(q->ticket == 70000 && q->cq_head == 70000 && q->sq_tail == 70000);
	assert_int_equal(q->sq_head % q->qsize, 70000 % q->qsize);
	if (coll)
		assert_true(q->done[69999 % 4] == 69999);
	/* past the namespace: the status reaches the waiter as -ERANGE */
	assert_int_equal(io(q, GS_NVME_CMD_READ, FILE_BYTES, buf, 4096, NULL), -ERANGE);
	assert_int_equal(io(q, GS_NVME_CMD_READ, 0, buf, 4096, NULL), 0);
	env_stop(&e);
	free(buf);
	collected = 0;
}

static void test_cid_wrap(void **state)
{
	cid_wrap(0);
}

/* collected completions: the same loads, every waiter may become the collector */
static void test_collected_threads(void **state)
{
	collected = 1;
	run_threads(16, 4, 32, 40);
	run_threads(4, 1, 16, 100);
	collected = 0;
}

static void test_collected_tiny_queue(void **state)
{
	collected = 1;
	run_threads(8, 1, 2, 40);
	collected = 0;
}

static void test_collected_cid_wrap(void **state)
{
	cid_wrap(1);
}

/* single consumer: keep nslots in flight, reap in CQ order */
static void test_reap(void **state)
{
	enum { N = 16 };
	struct env e;
	char *buf = zalloc(N * 4096);
	struct gs_nvme_cqe cqe;
	uint64_t t, done = 0, sub = 0;
	uint32_t slot, seen[N] = { 0 };
	struct gs_nvmeq *q;
	struct gs_nvme_cmd c;

	env_start(&e, 1, N);
	q = &e.qs[0].q;
	assert_int_equal(gs_swnvme_map(e.c, (uintptr_t)buf, buf, N * 4096), 0);
	while (done < 5000) {
		while (sub < 5000) {
			uint32_t s = sub % N;

			gs_nvme_rw(&c, GS_NVME_CMD_READ, 1, s, 1, (uintptr_t)buf + s * 4096ull, 0);
			if (gs_nvmeq_try_submit(q, &c, &t))
				break;
			assert_int_equal(t % N, s);
			sub++;
		}
		while (gs_nvmeq_reap(q, &cqe, &slot)) {
			assert_int_equal(cqe.status >> 1, 0);
			seen[slot]++;
			done++;
		}
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], 5000 / N + (i < 5000 % N));
	assert_int_equal(gs_nvmeq_try_submit(q, &c, &t), 0);	/* a slot is free again */
	while (!gs_nvmeq_reap(q, &cqe, &slot))
		;
	env_stop(&e);
	free(buf);
}

/* single submitter batching: queue several, one doorbell, reap in batches */
static void test_batch(void **state)
{
	enum { N = 32, DEPTH = 12, TOTAL = 4000 };
	struct env e;
	char *buf = zalloc(N * 4096);
	struct gs_nvme_cqe cqe[N];
	uint32_t slot[N], seen[N] = { 0 }, inflight = 0;
	uint64_t t, sub = 0, done = 0;
	struct gs_nvme_cmd c;
	struct gs_nvmeq *q;

	env_start(&e, 1, N);
	q = &e.qs[0].q;
	assert_int_equal(gs_swnvme_map(e.c, (uintptr_t)buf, buf, N * 4096), 0);
	while (done < TOTAL) {
		int got;

		while (sub < TOTAL && inflight < DEPTH) {
			uint32_t s = sub % N;

			gs_nvme_rw(&c, GS_NVME_CMD_READ, 1, s, 1, (uintptr_t)buf + s * 4096ull, 0);
			if (gs_nvmeq_try_queue(q, &c, &t))
				break;	/* the next ticket's slot is still busy */
			assert_int_equal(t, sub);
			sub++;
			inflight++;
		}
		gs_nvmeq_publish(q);
		assert_int_equal(q->sq_tail, sub);
		got = gs_nvmeq_reap_many(q, cqe, slot, N);
		for (int i = 0; i < got; i++) {
			assert_int_equal(cqe[i].status >> 1, 0);
			seen[slot[i]]++;
		}
		done += got;
		inflight -= got;
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], TOTAL / N + (i < TOTAL % N));
	assert_int_equal(q->cq_head, TOTAL);
	env_stop(&e);
	free(buf);
}

static int setup(void **state)
{
	int fd = mkstemp(path);

	if (fd < 0 || ftruncate(fd, FILE_BYTES))
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_args),
		cmocka_unit_test(test_one_thread),
		cmocka_unit_test(test_4_threads_1_qp),
		cmocka_unit_test(test_16_threads_4_qps),
		cmocka_unit_test(test_tiny_queue),
		cmocka_unit_test(test_cid_wrap),
		cmocka_unit_test(test_reap),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_collected_threads),
		cmocka_unit_test(test_collected_tiny_queue),
		cmocka_unit_test(test_collected_cid_wrap),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
