// SPDX-License-Identifier: MIT
/*
 * The GPU path's queue logic on CPU threads (CI has no GPU): the CAM
 * ticket/retire scheme (gstore_cuda_cam.h) and the BaM cache (gstore_cuda_bam.h)
 * are __host__ __device__, so the same code runs here against the real I/O
 * core: a GS_RING_POLLED ring, GS_SQE_BUF_OFF buffers, completion words,
 * pollers, the uring backend on a temporary file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_cuda_bam.h"

#define BS		4096u
#define NBLOCKS		4096u		/* 16 MiB file */
#define NTH		8
#define NOPS		2500

static char path[] = "/tmp/gs-gpucam-XXXXXX";

#include "gpucam_test.h"

struct env {
	struct gs_q *q;
	struct gs_ring *ring;
	char *buf;
	size_t buf_len;
	struct gs_cam cam;
};

static void env_open(struct env *e, uint32_t sq, uint32_t cam_ncw, uint32_t sink_n,
		     size_t buf_len, int dev_tickets)
{
	struct gs_q_params qp = {
		.path = path, .flags = GS_Q_BUFFERED, .min_pollers = 1, .max_pollers = 2,
	};
	uint32_t cq = 1, words = cam_ncw + sink_n;

	while (cq < words)
		cq <<= 1;
	size_t rb = gs_ring_bytes(sq, cq, 0);

	memset(e, 0, sizeof(*e));
	assert_int_equal(gs_q_open(&e->q, &qp), 0);
	e->ring = aligned_alloc(64, (rb + 63) & ~(size_t)63);
	e->buf = aligned_alloc(4096, buf_len);
	e->buf_len = buf_len;
	assert_non_null(e->ring);
	assert_non_null(e->buf);
	assert_int_equal(gs_ring_init(e->ring, rb, sq, cq, 0, GS_RING_POLLED), 0);
	assert_int_equal(gs_q_ring_add(e->q, e->ring, e->buf, buf_len), 0);

	struct gs_cam *c = &e->cam;

	c->ring = e->ring;
	c->sq_ctr = dev_tickets ? &c->sq_ticket : &e->ring->sq_tail;
	c->done = malloc(words * 16);
	memset(c->done, 0xff, words * 8);
	c->sink_done = c->done + cam_ncw;
	c->dres = (int64_t *)(c->done + words);
	c->sink_res = c->dres + cam_ncw;
	c->sink_mask = sink_n ? sink_n - 1 : 0;
	c->buf = e->buf;
	c->buf_len = buf_len;
	c->ncw = cam_ncw;
	c->sq_mask = sq - 1;
	c->cq_mask = cq - 1;
	c->block_shift = 12;
	c->nblocks = NBLOCKS;
}

static void env_close(struct env *e)
{
	assert_int_equal(gs_q_ring_del(e->q, e->ring), 0);
	gs_q_close(e->q);
	free(e->cam.done);
	free(e->ring);
	free(e->buf);
}

/* ---- CAM ---- */

struct cam_run {
	struct env *e;
	int id;
	long bad;
};

static void *cam_reader(void *arg)
{
	struct cam_run *r = arg;
	struct gs_cam *c = &r->e->cam;
	char *dst = r->e->buf + (size_t)r->id * 4 * BS;

	for (uint64_t k = 0; k < 300; k++) {
		uint64_t ids[4];
		uint32_t n = 1 + k % 4;

		for (uint32_t j = 0; j < n; j++)
			ids[j] = mix(r->id * 1000003ull + k * 7 + j) % (NBLOCKS - 64);
		if (gs_cam_blocks(c, GS_OP_READ, ids, n, dst))
			r->bad++;
		if (gs_cam_sync(c))
			r->bad++;
		for (uint32_t j = 0; j < n; j++)
			r->bad += block_bad(dst + j * BS, ids[j]);
	}
	return NULL;
}

/*
 * The warp-level path (gs_prefetch_warp + gs_prefetch_wait on the GPU): a
 * thread plays a warp, reserving n CAM tickets and n sq tickets at once,
 * filling the slots, then waiting for each of its tickets alone.
 */
static void *cam_batch_reader(void *arg)
{
	struct cam_run *r = arg;
	struct gs_cam *c = &r->e->cam;
	char *dst = r->e->buf + (size_t)r->id * 4 * BS;

	for (uint64_t k = 0; k < 300; k++) {
		uint64_t ids[4];
		uint32_t n = 1 + k % 4;
		uint64_t t = gs_cam_reserve(c, n), s = gs_cam_sq_reserve(c, n);

		for (uint32_t j = 0; j < n; j++) {
			struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_CQE | GS_SQE_BUF_OFF,
					    .len = BS, .tag = t + j,
					    .buf = (uint64_t)(dst - c->buf) + j * BS };

			ids[j] = mix(r->id * 1000003ull + k * 7 + j) % (NBLOCKS - 64);
			e.off = (uint64_t)gs_cam_dev_off(c, ids[j]);
			gs_cam_push_at(c, s + j, &e, j == n - 1);
		}
		for (uint32_t j = 0; j < n; j++) {
			if (gs_cam_wait_ticket(c, t + j) < 0)
				r->bad++;
			r->bad += block_bad(dst + j * BS, ids[j]);
		}
	}
	return NULL;
}

static void cam_many_threads(int dev_tickets, void *(*fn)(void *))
{
	struct env e;
	pthread_t t[NTH];
	struct cam_run r[NTH];

	/* a small ring and few words: many laps of both */
	env_open(&e, 16, 32, 0, NTH * 4 * BS, dev_tickets);
	for (int i = 0; i < NTH; i++) {
		r[i] = (struct cam_run){ .e = &e, .id = i };
		pthread_create(&t[i], NULL, fn, &r[i]);
	}
	for (int i = 0; i < NTH; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
	assert_int_equal(e.cam.err, 0);
	/* own-ticket waits leave the last tickets unretired until someone collects */
	while (gs_cam_collect(&e.cam) != 0)
		;
	assert_int_equal(e.cam.retire, e.cam.tail);
	/* the hint in the ring caught up with every push */
	if (dev_tickets)
		assert_int_equal(e.ring->sq_tail, e.cam.sq_ticket);
	env_close(&e);
}

static void test_cam_reads(void **state)
{
	cam_many_threads(0, cam_reader);
}

static void test_cam_reads_dev_tickets(void **state)
{
	cam_many_threads(1, cam_reader);
}

static void test_cam_batches(void **state)
{
	cam_many_threads(1, cam_batch_reader);
	cam_many_threads(0, cam_batch_reader);
}

static void test_cam_write_back(void **state)
{
	struct env e;
	uint64_t ids[16];
	int fd;

	env_open(&e, 64, 64, 0, 32 * BS, 0);
	for (uint32_t j = 0; j < 16; j++) {
		uint64_t *w = (uint64_t *)(e.buf + j * BS);

		ids[j] = NBLOCKS - 32 + j;
		for (uint32_t i = 0; i < BS / 8; i++)
			w[i] = ~pattern(ids[j] * BS + i * 8);
	}
	assert_int_equal(gs_cam_blocks(&e.cam, GS_OP_WRITE, ids, 16, e.buf), 0);
	assert_int_equal(gs_cam_flush(&e.cam), 0);

	/* from the file, and back through the ring into other slots */
	fd = open(path, O_RDONLY);
	uint64_t w;

	assert_int_equal(pread(fd, &w, 8, (NBLOCKS - 32 + 5) * BS + 8), 8);
	close(fd);
	assert_int_equal(w, ~pattern((NBLOCKS - 32 + 5) * BS + 8));
	assert_int_equal(gs_cam_blocks(&e.cam, GS_OP_READ, ids, 16, e.buf + 16 * BS), 0);
	assert_int_equal(gs_cam_sync(&e.cam), 0);
	assert_memory_equal(e.buf, e.buf + 16 * BS, 16 * BS);

	/* restore */
	for (uint32_t j = 0; j < 16; j++)
		for (uint32_t i = 0; i < BS / 8; i++)
			((uint64_t *)(e.buf + j * BS))[i] = pattern(ids[j] * BS + i * 8);
	assert_int_equal(gs_cam_blocks(&e.cam, GS_OP_WRITE, ids, 16, e.buf), 0);
	assert_int_equal(gs_cam_flush(&e.cam), 0);
	env_close(&e);
}

static void test_cam_errors(void **state)
{
	struct env e;
	uint64_t id = NBLOCKS;
	struct gs_cam_ext ext[2] = { { 0, 10, 100 * BS }, { 20, 5, 0 } };

	env_open(&e, 16, 16, 0, 4 * BS, 0);
	assert_int_equal(gs_cam_blocks(&e.cam, GS_OP_READ, &id, 1, e.buf), -34);
	assert_int_equal(gs_cam_blocks(&e.cam, GS_OP_READ, &id, 1, e.buf + 4 * BS), -22);
	assert_int_equal(gs_cam_sync(&e.cam), -34);	/* sticky: the first one */
	assert_int_equal(e.cam.nerr, 2);

	/* extents: holes and ranges */
	e.cam.ext = ext;
	e.cam.next = 2;
	assert_int_equal(gs_cam_dev_off(&e.cam, 0), 100 * BS);
	assert_int_equal(gs_cam_dev_off(&e.cam, 9), 109 * BS);
	assert_int_equal(gs_cam_dev_off(&e.cam, 10), -34);
	assert_int_equal(gs_cam_dev_off(&e.cam, 22), 2 * BS);
	assert_int_equal(gs_cam_dev_off(&e.cam, 25), -34);
	env_close(&e);
}

/* ---- BaM ---- */

static void test_bam(void **state)
{
	struct env e;
	struct gs_bam b;
	uint32_t nio = 8;
	pthread_t t[NTH];
	struct bam_run r[NTH];

	env_open(&e, 16, 2, nio, nio * BS, 0);
	memset(&b, 0, sizeof(b));
	b.line_shift = 12;
	b.nslots = 24;		/* tiny: constant eviction, dirty write-backs */
	b.nio = nio;
	b.nio_shift = 3;
	b.npages = NBLOCKS;
	b.pst = calloc(NBLOCKS, 4);
	b.pslot = calloc(NBLOCKS, 4);
	b.slot_page = malloc(b.nslots * 8);
	memset(b.slot_page, 0xff, b.nslots * 8);
	b.slot_ref = calloc(b.nslots, 4);
	b.data = aligned_alloc(4096, (size_t)b.nslots * BS);
	b.turn = calloc(nio, 8);
	b.cam = &e.cam;
	for (int i = 0; i < NTH; i++) {
		r[i] = (struct bam_run){ .b = &b, .id = i };
		pthread_create(&t[i], NULL, bam_worker, &r[i]);
	}
	for (int i = 0; i < NTH; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
	assert_true(b.evictions > 0);
	assert_true(b.writebacks > 0);
	assert_int_equal(gs_bam_flush_slots(&b, 0, 1), 0);
	assert_int_equal(gs_cam_flush(&e.cam), 0);
	assert_int_equal(b.err, 0);
	for (uint32_t s = 0; s < b.nslots; s++)	/* no references left behind */
		if (b.slot_page[s] < NBLOCKS)
			assert_int_equal(b.pst[b.slot_page[s]] & GS_BAM_REFS, 0);

	/* every written word is on the file; untouched words kept the pattern */
	int fd = open(path, O_RDONLY);
	uint64_t *w = malloc(64 * BS), bad = 0;

	assert_int_equal(pread(fd, w, 64 * BS, (NBLOCKS - 64) * (uint64_t)BS), 64 * BS);
	close(fd);
	uint64_t *seen = calloc(64 * BS / 8, 8);

	for (int id = 0; id < NTH; id++)
		for (uint64_t k = 0; k < NOPS; k += 3) {
			uint64_t i = (NBLOCKS - 64 + 8 * id) * (BS / 8) + mix(id * 7777ull + k) %
				     (8 * (BS / 8));

			seen[i - (NBLOCKS - 64) * (BS / 8)] = 1;
		}
	for (uint64_t j = 0; j < 64 * BS / 8; j++) {
		uint64_t i = (NBLOCKS - 64) * (BS / 8) + j;

		bad += w[j] != (seen[j] ? i * 3 + 1 : pattern(i * 8));
	}
	assert_int_equal(bad, 0);

	/* put the pattern back for other runs */
	for (uint64_t j = 0; j < 64 * BS / 8; j++)
		w[j] = pattern(((NBLOCKS - 64) * (BS / 8) + j) * 8);
	fd = open(path, O_WRONLY);
	assert_int_equal(pwrite(fd, w, 64 * BS, (NBLOCKS - 64) * (uint64_t)BS), 64 * BS);
	close(fd);
	free(seen);
	free(w);
	free(b.pst);
	free(b.pslot);
	free(b.slot_page);
	free(b.slot_ref);
	free(b.data);
	free(b.turn);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cam_reads),
		cmocka_unit_test(test_cam_reads_dev_tickets),
		cmocka_unit_test(test_cam_batches),
		cmocka_unit_test(test_cam_write_back),
		cmocka_unit_test(test_cam_errors),
		cmocka_unit_test(test_bam),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
