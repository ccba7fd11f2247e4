// SPDX-License-Identifier: MIT
/*
 * The software NVMe controller from CPU threads: a minimal host driver in
 * this file fills real SQEs and reaps CQEs by phase bit, so CI exercises
 * the wire format, PRP lists, status codes, CQ back-pressure and many
 * concurrent queue pairs without a GPU.
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

#include "gpuq/swnvme.h"

#define FILE_BYTES	(64ull << 20)
#define LBA		4096u

static char path[] = "/tmp/gs-swnvme-XXXXXX";

/* the file's content: each 8-byte word holds a function of its offset */
static uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

struct hq {
	uint8_t *sq, *cq;
	uint32_t depth, sq_tail, cq_head, phase;
	uint32_t *sqdb, *cqdb;
	uint16_t qid;
};

static void hq_create(struct gs_swnvme *c, struct hq *q, uint16_t qid, uint32_t depth)
{
	q->sq = aligned_alloc(4096, (depth * 64 + 4095) & ~4095u);
	q->cq = aligned_alloc(4096, (depth * 16 + 4095) & ~4095u);
	assert_non_null(q->sq);
	assert_non_null(q->cq);
	memset(q->sq, 0, depth * 64);
	memset(q->cq, 0, depth * 16);
	q->depth = depth;
	q->sq_tail = q->cq_head = 0;
	q->phase = 1;
	q->qid = qid;
	uint8_t *bar = gs_swnvme_bar(c);

	q->sqdb = (uint32_t *)(bar + GS_SWNVME_DB_BASE + 8 * qid);
	q->cqdb = q->sqdb + 1;
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)q->sq, q->sq, depth * 64), 0);
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)q->cq, q->cq, depth * 16), 0);
	assert_int_equal(gs_swnvme_create_qpair(c, qid, (uintptr_t)q->sq, (uintptr_t)q->cq,
						depth), 0);
}

static void hq_destroy(struct gs_swnvme *c, struct hq *q)
{
	assert_int_equal(gs_swnvme_delete_qpair(c, q->qid), 0);
	free(q->sq);
	free(q->cq);
}

static void sqe_rw(uint8_t *e, uint8_t opc, uint16_t cid, uint32_t nsid, uint64_t slba,
		   uint32_t nlb, uint64_t prp1, uint64_t prp2)
{
	uint32_t cdw12 = nlb - 1;

	memset(e, 0, 64);
	e[0] = opc;
	memcpy(e + 2, &cid, 2);
	memcpy(e + 4, &nsid, 4);
	memcpy(e + 24, &prp1, 8);
	memcpy(e + 32, &prp2, 8);
	memcpy(e + 40, &slba, 8);
	memcpy(e + 48, &cdw12, 4);
}

static void hq_submit(struct hq *q, const uint8_t *e, int ring)
{
	memcpy(q->sq + (size_t)q->sq_tail * 64, e, 64);
	q->sq_tail = (q->sq_tail + 1) % q->depth;
	if (ring)	/* release: the SQE is written before the controller sees the tail */
		__atomic_store_n(q->sqdb, q->sq_tail, __ATOMIC_RELEASE);
}

static void hq_ring(struct hq *q)
{
	__atomic_store_n(q->sqdb, q->sq_tail, __ATOMIC_RELEASE);
}

/* 1 and cid/status when a CQE is there, else 0. */
static int hq_poll(struct hq *q, uint16_t *cid, uint16_t *status, int ring_db)
{
	uint32_t *dw3 = (uint32_t *)(q->cq + (size_t)q->cq_head * 16 + 12);
	/* acquire: pairs with the controller's release of dw3 */
	uint32_t v = __atomic_load_n(dw3, __ATOMIC_ACQUIRE);

	if (((v >> 16) & 1) != q->phase)
		return 0;
	*cid = v & 0xffff;
	*status = v >> 17;
	if (++q->cq_head == q->depth) {
		q->cq_head = 0;
		q->phase ^= 1;
	}
	if (ring_db)
		__atomic_store_n(q->cqdb, q->cq_head, __ATOMIC_RELEASE);
	return 1;
}

static uint16_t hq_wait(struct hq *q, uint16_t *cid)
{
	uint16_t st, c;

	for (long i = 0; !hq_poll(q, &c, &st, 1); i++) {
		if (i > 2000000000L)
			fail_msg("no completion");
		if (i > 1000)
			usleep(10);
	}
	if (cid)
		*cid = c;
	return st;
}

static struct gs_swnvme *start(void)
{
	struct gs_swnvme_params p = {
		.path = path, .flags = GS_SWNVME_BUFFERED, .max_qpairs = 16, .depth = 64,
		.spin_us = 50,
	};
	struct gs_swnvme *c;

	assert_int_equal(gs_swnvme_start(&c, &p), 0);
	assert_int_equal(gs_swnvme_nlba(c), FILE_BYTES / LBA);
	assert_int_equal(gs_swnvme_lba_shift(c), 12);
	return c;
}

static int setup(void **state)
{
	int fd = mkstemp(path);
	uint64_t *buf = malloc(1 << 20);

	if (fd < 0 || !buf)
		return -1;
	for (uint64_t off = 0; off < FILE_BYTES; off += 1 << 20) {
		for (uint64_t i = 0; i < (1 << 20) / 8; i++)
			buf[i] = pattern(off + i * 8);
		if (pwrite(fd, buf, 1 << 20, off) != 1 << 20)
			return -1;
	}
	free(buf);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	return 0;
}

static void check_pattern(const void *buf, uint64_t off, size_t len)
{
	const uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != pattern(off + i * 8))
			fail_msg("word at %llu: %llx != %llx", (unsigned long long)(off + i * 8),
				 (unsigned long long)w[i], (unsigned long long)pattern(off + i * 8));
}

static void test_bar(void **state)
{
	struct gs_swnvme *c = start();
	uint8_t *bar = gs_swnvme_bar(c);
	uint64_t cap;
	uint32_t vs;

	memcpy(&cap, bar, 8);
	memcpy(&vs, bar + 8, 4);
	assert_int_equal(cap & 0xffff, 0xffff);
	assert_int_equal((cap >> 32) & 0xf, 0);	/* DSTRD 0: 4-byte doorbells */
	assert_int_equal(vs, 0x00010400);
	assert_true(gs_swnvme_bar_bytes(16) >= GS_SWNVME_DB_BASE + 17 * 8);
	gs_swnvme_stop(c);
}

/* 1, 2 pages (PRP2 direct) and 16 / 64 pages (PRP list, chained) reads. */
static void test_read_prps(void **state)
{
	struct gs_swnvme *c = start();
	size_t big = 64 * 4096;
	uint8_t *buf = aligned_alloc(4096, big);
	uint64_t *list = aligned_alloc(4096, 2 * 4096);
	uint8_t e[64];
	struct hq q;

	hq_create(c, &q, 1, 8);
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)buf, buf, big), 0);
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)list, list, 2 * 4096), 0);
	uint32_t sizes[] = { 1, 2, 16, 64 };

	for (unsigned s = 0; s < 4; s++) {
		uint32_t n = sizes[s];
		uint64_t slba = 1000 + 77 * s, prp2 = 0;

		memset(buf, 0xa5, big);
		if (n == 2) {
			prp2 = (uintptr_t)buf + 4096;
		} else if (n > 2) {
			/* a list page that chains to a second list page: place the
			 * first list 8 entries before the page end */
			uint64_t *l = list + 512 - 8;
			uint32_t k = 0;

			for (uint32_t pg = 1; pg < n; pg++) {
				if (n > 9 && l == list + 511) {
					*l = (uintptr_t)(list + 512);
					l = list + 512;
				}
				*l++ = (uintptr_t)buf + 4096ull * pg;
				k++;
			}
			prp2 = (uintptr_t)(list + 512 - 8);
		}
		sqe_rw(e, 0x02, 5 + s, 1, slba, n, (uintptr_t)buf, prp2);
		hq_submit(&q, e, 1);
		uint16_t cid;

		assert_int_equal(hq_wait(&q, &cid), 0);
		assert_int_equal(cid, 5 + s);
		check_pattern(buf, slba * 4096, n * 4096ull);
	}
	hq_destroy(c, &q);
	gs_swnvme_stop(c);
	free(buf);
	free(list);
}

/* Write, flush, read back through the queue and through the file. */
static void test_write_flush_read(void **state)
{
	struct gs_swnvme *c = start();
	uint64_t *buf = aligned_alloc(4096, 8192);
	uint8_t e[64];
	struct hq q;

	hq_create(c, &q, 2, 4);
	assert_int_equal(gs_swnvme_map(c, 1ull << 40, buf, 8192), 0);	/* non-identity */
	for (int i = 0; i < 1024; i++)
		buf[i] = 0x1234000000000000ull + i;
	sqe_rw(e, 0x01, 1, 1, 3000, 2, 1ull << 40, (1ull << 40) + 4096);
	hq_submit(&q, e, 1);
	assert_int_equal(hq_wait(&q, NULL), 0);
	sqe_rw(e, 0x00, 2, 1, 0, 1, 0, 0);
	hq_submit(&q, e, 1);
	assert_int_equal(hq_wait(&q, NULL), 0);
	memset(buf, 0, 8192);
	sqe_rw(e, 0x02, 3, 1, 3000, 2, 1ull << 40, (1ull << 40) + 4096);
	hq_submit(&q, e, 1);
	assert_int_equal(hq_wait(&q, NULL), 0);
	for (int i = 0; i < 1024; i++)
		assert_int_equal(buf[i], 0x1234000000000000ull + i);

	FILE *f = fopen(path, "rb");
	uint64_t w;

	assert_non_null(f);
	assert_int_equal(fseek(f, 3000 * 4096 + 8 * 1000, SEEK_SET), 0);
	assert_int_equal(fread(&w, 8, 1, f), 1);
	fclose(f);
	assert_int_equal(w, 0x1234000000000000ull + 1000);

	/* restore the pattern for the other tests */
	for (int i = 0; i < 1024; i++)
		buf[i] = pattern(3000 * 4096ull + i * 8);
	sqe_rw(e, 0x01, 4, 1, 3000, 2, 1ull << 40, (1ull << 40) + 4096);
	hq_submit(&q, e, 1);
	assert_int_equal(hq_wait(&q, NULL), 0);

	struct gs_swnvme_stats st;

	gs_swnvme_get_stats(c, &st);
	assert_int_equal(st.cmds, 4);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.write_bytes, 16384);
	assert_int_equal(st.read_bytes, 8192);
	hq_destroy(c, &q);
	gs_swnvme_stop(c);
	free(buf);
}

static void test_errors(void **state)
{
	struct gs_swnvme *c = start();
	uint8_t *buf = aligned_alloc(4096, 4096), e[64];
	uint64_t nlba = gs_swnvme_nlba(c);
	struct hq q;

	hq_create(c, &q, 3, 16);
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)buf, buf, 4096), 0);
	struct {
		uint8_t opc;
		uint32_t nsid;
		uint64_t slba;
		uint32_t nlb;
		uint64_t prp1;
		uint16_t sc;
	} cases[] = {
		{ 0x7f, 1, 0, 1, (uintptr_t)buf, 0x01 },		/* invalid opcode */
		{ 0x02, 2, 0, 1, (uintptr_t)buf, 0x0b },		/* invalid namespace */
		{ 0x02, 1, nlba, 1, (uintptr_t)buf, 0x80 },	/* LBA out of range */
		{ 0x02, 1, nlba - 1, 2, (uintptr_t)buf, 0x80 },	/* runs past the end */
		{ 0x02, 1, 0, 1, 4096, 0x04 },			/* unmapped PRP */
		{ 0x02, 1, 0, 2, (uintptr_t)buf, 0x04 },		/* PRP2 = 0, unmapped */
		{ 0x02, 1, 0, 128, (uintptr_t)buf, 0x02 },	/* over MDTS */
		{ 0x02, 1, 0, 1, (uintptr_t)buf + 2, 0x02 },	/* PRP1 not dword aligned */
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint16_t cid;

		sqe_rw(e, cases[i].opc, 100 + i, cases[i].nsid, cases[i].slba, cases[i].nlb,
		       cases[i].prp1, 0);
		hq_submit(&q, e, 1);
		uint16_t st = hq_wait(&q, &cid);

		assert_int_equal(cid, 100 + i);
		assert_int_equal(st & 0xff, cases[i].sc);	/* SC; SCT 0 (generic) */
		assert_int_equal(st >> 8, 0);
	}
	/* a good command still works after the errors */
	sqe_rw(e, 0x02, 7, 1, 9, 1, (uintptr_t)buf, 0);
	hq_submit(&q, e, 1);
	assert_int_equal(hq_wait(&q, NULL), 0);
	check_pattern(buf, 9 * 4096, 4096);
	hq_destroy(c, &q);
	gs_swnvme_stop(c);
	free(buf);
}

/*
 * CQ back-pressure: the host posts a full SQ and reads the CQEs without
 * ringing the CQ head doorbell; the controller must stop at depth - 1
 * completions and deliver the rest once the doorbell moves.  Each CQE's
 * SQ head must also be consistent.
 */
static void test_cq_full(void **state)
{
	struct gs_swnvme *c = start();
	uint32_t depth = 8;
	uint8_t *buf = aligned_alloc(4096, 4096ull * depth), e[64];
	struct hq q;
	uint16_t cid, st;

	hq_create(c, &q, 4, depth);
	assert_int_equal(gs_swnvme_map(c, (uintptr_t)buf, buf, 4096ull * depth), 0);
	for (int round = 0; round < 3; round++) {
		int seen = 0, mask = 0;

		for (uint32_t i = 0; i < depth - 1; i++) {
			sqe_rw(e, 0x02, i, 1, 50 + i + round, 1, (uintptr_t)buf + 4096 * i, 0);
			hq_submit(&q, e, 0);
		}
		hq_ring(&q);
		/* read all without moving the head doorbell */
		while (seen < (int)depth - 1) {
			if (hq_poll(&q, &cid, &st, 0)) {
				assert_int_equal(st, 0);
				assert_true(cid < depth - 1);
				mask |= 1 << cid;
				seen++;
			} else {
				usleep(10);
			}
		}
		assert_int_equal(mask, (1 << (depth - 1)) - 1);
		__atomic_store_n(q.cqdb, q.cq_head, __ATOMIC_RELEASE);
		for (uint32_t i = 0; i < depth - 1; i++)
			check_pattern(buf + 4096 * i, (50 + i + round) * 4096ull, 4096);
	}
	hq_destroy(c, &q);
	gs_swnvme_stop(c);
	free(buf);
}

/* Many threads, a queue pair each, random reads of 1..4 LBAs, all verified. */
#define NTHREADS	8
#define NCMDS		3000
#define QDEPTH		32

struct worker {
	struct gs_swnvme *c;
	uint16_t qid;
	int errors;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	struct hq q;
	uint8_t *buf = aligned_alloc(4096, 4 * 4096ull * QDEPTH), e[64];
	uint64_t slba[QDEPTH];
	uint32_t nlb[QDEPTH], seed = w->qid * 7919, busy = 0;
	int sent = 0, done = 0;

	/* one PRP list page per command slot */
	uint64_t (*lists)[512] = aligned_alloc(4096, QDEPTH * 4096);

	hq_create(w->c, &q, w->qid, QDEPTH);
	if (gs_swnvme_map(w->c, (uintptr_t)buf, buf, 4 * 4096ull * QDEPTH) ||
	    gs_swnvme_map(w->c, (uintptr_t)lists, lists, QDEPTH * 4096))
		w->errors++;
	while (done < NCMDS) {
		while (sent < NCMDS && busy != (1u << (QDEPTH - 1)) - 1) {
			uint16_t cid = __builtin_ctz(~busy);
			uint64_t *p = (uint64_t *)(buf + 4 * 4096ull * cid);

			seed = seed * 1103515245 + 12345;
			nlb[cid] = 1 + (seed >> 16) % 4;
			slba[cid] = (seed >> 4) % (FILE_BYTES / LBA - 4);
			p[0] = 0;
			sqe_rw(e, 0x02, cid, 1, slba[cid], nlb[cid], (uintptr_t)p,
			       nlb[cid] == 1 ? 0 : nlb[cid] == 2 ? (uintptr_t)p + 4096 : 0);
			if (nlb[cid] > 2) {
				/* PRP list: one list page per command slot */
				for (uint32_t k = 1; k < nlb[cid]; k++)
					lists[cid][k - 1] = (uintptr_t)p + 4096ull * k;
				uint64_t l = (uintptr_t)lists[cid];

				memcpy(e + 32, &l, 8);
			}
			hq_submit(&q, e, 0);
			busy |= 1u << cid;
			sent++;
		}
		hq_ring(&q);
		uint16_t cid, st;

		while (hq_poll(&q, &cid, &st, 1)) {
			const uint64_t *p = (const uint64_t *)(buf + 4 * 4096ull * cid);

			if (st || cid >= QDEPTH || !(busy & (1u << cid)))
				w->errors++;
			for (uint32_t k = 0; k < nlb[cid] * 512; k++)
				if (p[k] != pattern(slba[cid] * 4096 + k * 8)) {
					w->errors++;
					break;
				}
			busy &= ~(1u << cid);
			done++;
		}
	}
	hq_destroy(w->c, &q);
	free(buf);
	free(lists);
	return NULL;
}

static void test_many_threads(void **state)
{
	struct gs_swnvme *c = start();
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct gs_swnvme_stats st;

	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .c = c, .qid = 5 + i };
		assert_int_equal(pthread_create(&t[i], NULL, worker_fn, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	gs_swnvme_get_stats(c, &st);
	assert_int_equal(st.cmds, NTHREADS * NCMDS);
	assert_int_equal(st.errors, 0);
	gs_swnvme_stop(c);
}

static void test_bad_params(void **state)
{
	struct gs_swnvme_params p = { .path = "/nonexistent/x" };
	struct gs_swnvme *c;

	assert_int_equal(gs_swnvme_start(&c, &p), -ENOENT);
	p.path = path;
	p.lba_shift = 10;
	assert_int_equal(gs_swnvme_start(&c, &p), -EINVAL);
	c = start();
	assert_int_equal(gs_swnvme_create_qpair(c, 0, 0, 0, 8), -EINVAL);
	assert_int_equal(gs_swnvme_create_qpair(c, 1, 4096, 8192, 8), -EFAULT);
	assert_int_equal(gs_swnvme_delete_qpair(c, 1), -ENOENT);
	gs_swnvme_stop(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bar),
		cmocka_unit_test(test_read_prps),
		cmocka_unit_test(test_write_flush_read),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_cq_full),
		cmocka_unit_test(test_many_threads),
		cmocka_unit_test(test_bad_params),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
