// SPDX-License-Identifier: MIT
/*
 * Sharded CAM and BaM on CPU threads (CI has no GPU): several rings, each
 * with its own gs_cam (tickets, collector, sink slots) in one shards[]
 * table over one queue, as gs_cuda_open() builds them; a thread issues on
 * its own shard (gs_cam_self(): a thread-numbered key here, the SM on a
 * GPU), tickets name their shard, syncs and flushes visit every shard.
 * And blocks larger than the extent unit (an attached file whose extents
 * are aligned to the filesystem's blocks only): a block over two extents
 * goes out as one request per device run, holes read as zeros.
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
#include "gpuq/cuda/gather_plan.h"

#define BS		4096u
#define NBLOCKS		4096u		/* 16 MiB file of 4 KiB units */
#define NTH		8
#define MAXS		8
#define NOPS		1500

static char path[] = "/tmp/gs-shard-XXXXXX";

#include "gpucam_test.h"

/* @n rings over one queue, their gs_cams in one table (cam[0] is the handle). */
struct senv {
	struct gs_q *q;
	uint32_t n;
	struct gs_ring *ring[MAXS];
	char *buf[MAXS];	/* own_bufs: one region per ring, else buf[0] for all */
	size_t buf_len;
	struct gs_cam cam[MAXS];
};

static void senv_open(struct senv *e, uint32_t n, uint32_t sq, uint32_t ncw, uint32_t sink_n,
		      size_t buf_len, int own_bufs, uint32_t block_shift)
{
	struct gs_q_params qp = {
		.path = path, .flags = GS_Q_BUFFERED, .min_pollers = 2, .max_pollers = 2,
	};
	uint32_t cq = 1, words = ncw + sink_n;

	while (cq < words)
		cq <<= 1;
	size_t rb = gs_ring_bytes(sq, cq, 0);

	memset(e, 0, sizeof(*e));
	e->n = n;
	e->buf_len = buf_len;
	assert_int_equal(gs_q_open(&e->q, &qp), 0);
	for (uint32_t k = 0; k < n; k++) {
		struct gs_cam *c = &e->cam[k];

		e->ring[k] = aligned_alloc(64, (rb + 63) & ~(size_t)63);
		assert_non_null(e->ring[k]);
		if (own_bufs || !k)
			e->buf[k] = aligned_alloc(4096, buf_len);
		else
			e->buf[k] = e->buf[0];
		assert_non_null(e->buf[k]);
		assert_int_equal(gs_ring_init(e->ring[k], rb, sq, cq, 0, GS_RING_POLLED), 0);
		assert_int_equal(gs_q_ring_add(e->q, e->ring[k], e->buf[k], buf_len), 0);
		c->ring = e->ring[k];
		c->sq_ctr = &c->sq_ticket;
		c->done = malloc(words * 16);
		assert_non_null(c->done);
		memset(c->done, 0xff, words * 8);
		c->sink_done = c->done + ncw;
		c->dres = (int64_t *)(c->done + words);
		c->sink_res = c->dres + ncw;
		c->sink_mask = sink_n ? sink_n - 1 : 0;
		c->sink_shift = sink_n ? (uint32_t)__builtin_ctz(sink_n) : 0;
		c->buf = e->buf[k];
		c->buf_len = buf_len;
		c->ncw = ncw;
		c->sq_mask = sq - 1;
		c->cq_mask = cq - 1;
		c->block_shift = block_shift;
		c->nblocks = ((uint64_t)NBLOCKS * BS) >> block_shift;
		c->shards = n > 1 ? e->cam : NULL;
		c->nshard = n;
		c->shard_id = k;
	}
}

static void senv_ext(struct senv *e, const struct gs_cam_ext *ext, uint32_t next,
		     uint32_t ext_shift, uint64_t nblocks)
{
	for (uint32_t k = 0; k < e->n; k++) {
		e->cam[k].ext = ext;
		e->cam[k].next = next;
		e->cam[k].ext_shift = ext_shift;
		e->cam[k].nblocks = nblocks;
	}
}

static void senv_close(struct senv *e)
{
	for (uint32_t k = 0; k < e->n; k++)
		assert_int_equal(gs_q_ring_del(e->q, e->ring[k]), 0);
	gs_q_close(e->q);
	for (uint32_t k = 0; k < e->n; k++) {
		free(e->cam[k].done);
		free(e->ring[k]);
		if (!k || e->buf[k] != e->buf[0])
			free(e->buf[k]);
	}
}

/* ---- tickets and shard choice ---- */

static void test_ticket_codec(void **state)
{
	struct gs_cam cam[4];
	uint64_t t;
	uint32_t np;

	memset(cam, 0, sizeof(cam));
	for (uint32_t k = 0; k < 4; k++) {
		cam[k].shards = cam;
		cam[k].nshard = 4;
		cam[k].shard_id = k;
	}
	/* a ticket names its shard, its request count, and its full value back
	 * from the shard's tail, past the 46 bits it keeps */
	cam[3].tail = (1ull << GS_CAM_TKT_BITS) + 9;
	uint64_t tk = gs_cam_ticket(&cam[3], (1ull << GS_CAM_TKT_BITS) + 2, 3);

	assert_ptr_equal(gs_cam_ticket_decode(&cam[0], tk, &t, &np), &cam[3]);
	assert_int_equal(t, (1ull << GS_CAM_TKT_BITS) + 2);
	assert_int_equal(np, 3);
	cam[1].tail = 100;
	tk = gs_cam_ticket(&cam[1], 99, 1);
	assert_ptr_equal(gs_cam_ticket_decode(&cam[2], tk, &t, &np), &cam[1]);
	assert_int_equal(t, 99);
	assert_int_equal(np, 1);
	/* no shard, request count or ticket makes the "none" value */
	tk = gs_cam_ticket(&cam[3], GS_CAM_TKT_MASK, GS_CAM_MAX_PIECES);
	assert_true(tk != UINT64_MAX);

	/* the key picks the shard, modulo the count; a set of one is itself */
	for (uint32_t key = 0; key < 16; key++)
		assert_ptr_equal(gs_cam_shard(&cam[2], key), &cam[key % 4]);
	assert_int_equal(gs_cam_nshards(&cam[0]), 4);
	cam[0].nshard = 1;
	assert_ptr_equal(gs_cam_shard(&cam[0], 7), &cam[0]);
	assert_ptr_equal(gs_cam_nth(&cam[0], 0), &cam[0]);
	assert_int_equal(gs_cam_nshards(&cam[0]), 1);

	/* CPU threads: distinct, stable keys */
	uint32_t k0 = gs_cam_key();

	assert_int_equal(gs_cam_key(), k0);
}

/* The default ring counts: a power of two per so many SMs, 1 to 16. */
static void test_default_rings(void **state)
{
	/* one per 16 SMs: an H100 or H200 (132 SMs) gets 8, an A100 (108) 4 */
	assert_int_equal(gs_cam_rings_for(132, 16), 8);
	assert_int_equal(gs_cam_rings_for(108, 16), 4);
	assert_int_equal(gs_cam_rings_for(132, 32), 4);
	assert_int_equal(gs_cam_rings_for(31, 16), 1);
	assert_int_equal(gs_cam_rings_for(32, 16), 2);
	assert_int_equal(gs_cam_rings_for(1, 16), 1);
	assert_int_equal(gs_cam_rings_for(0, 16), 1);	/* no device answer */
	assert_int_equal(gs_cam_rings_for(1000, 16), 16);
	assert_int_equal(gs_cam_rings_for(132, 0), 1);
	/* what gs_cuda_open() and gs_cuda_array_open() default to on 132 SMs */
	assert_int_equal(gs_cam_rings_for(132, GS_CAM_SMS_PER_RING), 8);
	assert_int_equal(gs_cam_rings_for(132, GS_BAM_SMS_PER_RING), 8);
}

/* ---- CAM over shards ---- */

struct run {
	struct senv *e;
	int id;
	long bad;
	uint32_t shard;
};

/*
 * Even threads play warps (gs_prefetch_warp + gs_prefetch_wait): tickets
 * from their own shard, encoded, decoded again to wait; odd ones issue
 * with gs_cam_blocks on their shard and wait with gs_cam_sync_all.
 */
static void *shard_reader(void *arg)
{
	struct run *r = arg;
	struct gs_cam *root = &r->e->cam[0], *s = gs_cam_self(root);
	char *dst = r->e->buf[0] + (size_t)r->id * 4 * BS;

	r->shard = s->shard_id;
	for (uint64_t k = 0; k < 300; k++) {
		uint64_t ids[4], tk[4];
		uint32_t n = 1 + k % 4;

		for (uint32_t j = 0; j < n; j++)
			ids[j] = mix(r->id * 1000003ull + k * 7 + j) % (NBLOCKS - 64);
		if (r->id & 1) {
			if (gs_cam_blocks(s, GS_OP_READ, ids, n, dst))
				r->bad++;
			if (gs_cam_sync_all(root))
				r->bad++;
		} else {
			uint64_t t = gs_cam_reserve(s, n), sq = gs_cam_sq_reserve(s, n);

			for (uint32_t j = 0; j < n; j++) {
				struct gs_sqe e = { .op = GS_OP_READ,
						    .flags = GS_SQE_CQE | GS_SQE_BUF_OFF,
						    .len = BS, .tag = t + j,
						    .buf = (uint64_t)(dst - s->buf) + j * BS };

				e.off = (uint64_t)gs_cam_dev_off(s, ids[j]);
				gs_cam_push_at(s, sq + j, &e, j == n - 1);
				tk[j] = gs_cam_ticket(s, t + j, 1);
			}
			for (uint32_t j = 0; j < n; j++) {
				uint64_t tt;
				uint32_t np;
				struct gs_cam *w = gs_cam_ticket_decode(root, tk[j], &tt, &np);

				if (w != s || tt != t + j || np != 1 || gs_cam_wait_ticket(w, tt) < 0)
					r->bad++;
			}
		}
		for (uint32_t j = 0; j < n; j++)
			r->bad += block_bad(dst + j * BS, ids[j]);
	}
	return NULL;
}

/* NTH threads of @fn over @e's four shards: no bad reads, every shard used */
static void run_readers(struct senv *e, void *(*fn)(void *))
{
	pthread_t t[NTH];
	struct run r[NTH];
	uint32_t used = 0;

	for (int i = 0; i < NTH; i++) {
		r[i] = (struct run){ .e = e, .id = i };
		pthread_create(&t[i], NULL, fn, &r[i]);
	}
	for (int i = 0; i < NTH; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
		used |= 1u << r[i].shard;
	}
	/* eight threads with consecutive keys cover all four shards */
	assert_int_equal(used, 0xf);
}

static void test_cam_shards(void **state)
{
	struct senv e;

	/* small rings and few words per shard: many laps on each */
	senv_open(&e, 4, 16, 16, 0, NTH * 4 * BS, 0, 12);
	run_readers(&e, shard_reader);
	assert_int_equal(gs_cam_sync_all(&e.cam[0]), 0);
	for (uint32_t k = 0; k < e.n; k++) {
		assert_true(e.cam[k].tail > 0);
		while (gs_cam_collect(&e.cam[k]) != 0)
			;
		assert_int_equal(e.cam[k].retire, e.cam[k].tail);
		assert_int_equal(e.ring[k]->sq_tail, e.cam[k].sq_ticket);
	}
	/* an error on one shard is every caller's sticky error */
	uint64_t bad = NBLOCKS;

	assert_int_equal(gs_cam_blocks(&e.cam[2], GS_OP_READ, &bad, 1, e.buf[0]), -34);
	assert_int_equal(gs_cam_err_all(&e.cam[0]), -34);
	assert_int_equal(gs_cam_sync_all(&e.cam[1]), -34);
	senv_close(&e);
}

/* Writes on every shard, one flush for all: all of them on the file. */
static void test_cam_shards_flush(void **state)
{
	struct senv e;
	uint64_t ids[16], w;
	int fd;

	senv_open(&e, 4, 64, 64, 0, 32 * BS, 0, 12);
	for (uint32_t j = 0; j < 16; j++) {
		uint64_t *p = (uint64_t *)(e.buf[0] + j * BS);

		ids[j] = NBLOCKS - 32 + j;
		for (uint32_t i = 0; i < BS / 8; i++)
			p[i] = ~pattern(ids[j] * BS + i * 8);
		assert_int_equal(gs_cam_blocks(&e.cam[j % 4], GS_OP_WRITE, &ids[j], 1,
					       e.buf[0] + j * BS), 0);
	}
	assert_int_equal(gs_cam_flush_all(&e.cam[0]), 0);
	fd = open(path, O_RDONLY);
	for (uint32_t j = 0; j < 16; j++) {
		assert_int_equal(pread(fd, &w, 8, ids[j] * BS + 16), 8);
		assert_int_equal(w, ~pattern(ids[j] * BS + 16));
	}
	close(fd);
	for (uint32_t j = 0; j < 16; j++)
		for (uint32_t i = 0; i < BS / 8; i++)
			((uint64_t *)(e.buf[0] + j * BS))[i] = pattern(ids[j] * BS + i * 8);
	assert_int_equal(gs_cam_blocks(&e.cam[1], GS_OP_WRITE, ids, 16, e.buf[0]), 0);
	assert_int_equal(gs_cam_flush_all(&e.cam[3]), 0);
	senv_close(&e);
}

/* ---- the gather's reads over shards ---- */

/*
 * As gs_cuda_gather()'s issue kernel: a "warp" (a thread here) reserves two
 * runs' tickets at once on its own shard, fills them with gs_gather_push()
 * (runs of 1..4 blocks into the region all shards share), and waits for each
 * by its ticket, decoded from the set's first shard as gs_prefetch_wait()
 * does.  Before, every gather read went through the first ring.
 */
static void *gather_reader(void *arg)
{
	struct run *r = arg;
	struct gs_cam *root = &r->e->cam[0], *s = gs_cam_self(root);
	uint64_t base = (uint64_t)r->id * 8 * BS;

	r->shard = s->shard_id;
	for (uint64_t k = 0; k < 200; k++) {
		uint32_t len[2] = { 1 + k % 4, 1 + (k + 1) % 4 };
		uint64_t blk[2], tk[2], t = gs_cam_reserve(s, 2), sq = gs_cam_sq_reserve(s, 2);

		for (uint32_t j = 0; j < 2; j++) {
			blk[j] = mix(r->id * 1000003ull + k * 7 + j) % (NBLOCKS - 64);
			tk[j] = gs_gather_push(s, t + j, sq + j, (uint64_t)gs_cam_dev_off(s, blk[j]),
					       len[j], base + j * 4 * BS, j == 1);
		}
		for (uint32_t j = 0; j < 2; j++) {
			uint64_t tt;
			uint32_t np;
			struct gs_cam *w = gs_cam_ticket_decode(root, tk[j], &tt, &np);

			/* the result: its bytes, or 0 when retire passed it and
			 * its word went to a later ticket (gs_cam_ticket_done()) */
			int64_t res = w == s ? gs_cam_wait_ticket(w, tt) : -1;

			if (w != s || tt != t + j || np != 1 || (res && res != (int64_t)len[j] * BS))
				r->bad++;
			for (uint32_t b = 0; b < len[j]; b++)
				r->bad += block_bad(r->e->buf[0] + base + (j * 4 + b) * BS, blk[j] + b);
		}
	}
	return NULL;
}

static void test_gather_shards(void **state)
{
	struct senv e;

	senv_open(&e, 4, 16, 16, 0, NTH * 8 * BS, 0, 12);
	run_readers(&e, gather_reader);
	/* every ring carried its issuers' reads, all retired, no error */
	assert_int_equal(gs_cam_sync_all(&e.cam[0]), 0);
	for (uint32_t k = 0; k < e.n; k++)
		assert_int_equal(e.cam[k].tail, 2 * 200 * (NTH / 4));
	senv_close(&e);
}

/* ---- blocks over extents ---- */

/*
 * 16 KiB blocks over a table in 4 KiB units: units 0-5 at 100.., 6-15 at
 * 10.., a hole at 16, 17-18 at 50.., 19-31 at 200..; nothing past 31.
 */
static const struct gs_cam_ext frag[] = {
	{ 0, 6, 100 * BS }, { 6, 10, 10 * BS }, { 17, 2, 50 * BS }, { 19, 13, 200 * BS },
};
#define NFRAG	(sizeof(frag) / sizeof(frag[0]))

/* Device byte of array byte @a under frag (or -1 in the hole). */
static int64_t frag_dev(uint64_t a)
{
	uint64_t u = a / BS;

	for (uint32_t i = 0; i < NFRAG; i++)
		if (u >= frag[i].blk && u < frag[i].blk + frag[i].nblk)
			return (int64_t)(frag[i].dev_off + (u - frag[i].blk) * BS + a % BS);
	return -1;
}

static void test_pieces(void **state)
{
	struct senv e;
	uint64_t dev, ids[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	uint32_t boff, len, cov;

	senv_open(&e, 2, 64, 64, 0, 8 * 4 * BS, 0, 14);
	senv_ext(&e, frag, NFRAG, 12, 8);
	struct gs_cam *c = &e.cam[0];

	/* block 1 = units 4-7: 2 units at 104, 2 at 10 */
	assert_int_equal(gs_cam_npieces(c, 1, &cov), 2);
	assert_int_equal(cov, 4 * BS);
	assert_true(gs_cam_piece(c, 1, 0, &dev, &boff, &len));
	assert_int_equal(dev, 104 * BS);
	assert_int_equal(boff, 0);
	assert_int_equal(len, 2 * BS);
	assert_true(gs_cam_piece(c, 1, 1, &dev, &boff, &len));
	assert_int_equal(dev, 10 * BS);
	assert_int_equal(boff, 2 * BS);
	assert_int_equal(len, 2 * BS);
	assert_false(gs_cam_piece(c, 1, 2, &dev, &boff, &len));
	/* block 4 = units 16-19: the hole, 2 at 50, 1 at 200 */
	assert_int_equal(gs_cam_npieces(c, 4, &cov), 2);
	assert_int_equal(cov, 3 * BS);
	assert_true(gs_cam_piece(c, 4, 0, &dev, &boff, &len));
	assert_int_equal(boff, BS);
	/* one device run: an offset; over two, or past the end: -ERANGE */
	assert_int_equal(gs_cam_dev_off(c, 2), 12 * BS);
	assert_int_equal(gs_cam_dev_off(c, 1), -34);
	assert_int_equal(gs_cam_dev_off(c, 8), -34);
	assert_int_equal(gs_cam_npieces(c, 8, &cov), 0);
	assert_int_equal(gs_cam_max_pieces(frag, NFRAG, 14, 12), 2);
	assert_int_equal(gs_cam_max_pieces(frag, NFRAG, 12, 12), 1);
	assert_int_equal(gs_cam_max_pieces(frag, NFRAG, 20, 12), 4);

	/* read all eight blocks (garbage first: the hole must come back zero) */
	memset(e.buf[0], 0xa5, 8 * 4 * BS);
	assert_int_equal(gs_cam_blocks(&e.cam[1], GS_OP_READ, ids, 8, e.buf[0]), 0);
	assert_int_equal(gs_cam_sync_all(c), 0);
	for (uint64_t a = 0; a < 8 * 4 * BS; a += 8) {
		int64_t d = frag_dev(a);
		uint64_t want = d < 0 ? 0 : pattern((uint64_t)d);

		assert_int_equal(*(uint64_t *)(e.buf[0] + a), want);
	}

	/* a write over two extents lands in both; then put the pattern back */
	uint64_t one = 1;

	for (uint32_t i = 0; i < 4 * BS / 8; i++)
		((uint64_t *)e.buf[0])[i] = ~pattern((uint64_t)frag_dev(4 * BS + i * 8));
	assert_int_equal(gs_cam_blocks(c, GS_OP_WRITE, &one, 1, e.buf[0]), 0);
	assert_int_equal(gs_cam_flush_all(c), 0);
	int fd = open(path, O_RDWR);
	uint64_t w;

	assert_int_equal(pread(fd, &w, 8, 104 * BS), 8);
	assert_int_equal(w, ~pattern(104 * BS));
	assert_int_equal(pread(fd, &w, 8, 11 * BS + 8), 8);
	assert_int_equal(w, ~pattern(11 * BS + 8));
	for (uint64_t u = 0; u < 32; u++) {
		uint64_t blk[BS / 8];
		int64_t d = frag_dev(u * BS);

		if (d < 0)
			continue;
		for (uint32_t i = 0; i < BS / 8; i++)
			blk[i] = pattern((uint64_t)d + i * 8);
		assert_int_equal(pwrite(fd, blk, BS, d), BS);
	}
	close(fd);
	senv_close(&e);
}

/* ---- BaM over shards, 16 KiB lines over split extents ---- */

static void test_bam_shards(void **state)
{
	struct senv e;
	struct gs_bam b;
	uint32_t nio = 8, per = 4, nr = 2, nunits = NBLOCKS, next = 0;
	pthread_t t[NTH];
	struct bam_run r[NTH];
	/* the identity mapping, cut every 3 units: most lines over 2 extents */
	struct gs_cam_ext *ext = calloc(nunits / 3 + 1, sizeof(*ext));

	for (uint32_t u = 0; u < nunits; u += 3, next++)
		ext[next] = (struct gs_cam_ext){ u, u + 3 <= nunits ? 3 : nunits - u,
						 (uint64_t)u * BS };
	senv_open(&e, nr, 8, 2, per, per * 4 * BS, 1, 14);
	senv_ext(&e, ext, next, 12, (uint64_t)NBLOCKS * BS >> 14);
	memset(&b, 0, sizeof(b));
	b.line_shift = 14;
	b.nslots = 12;		/* tiny: constant eviction, dirty write-backs */
	b.nio = nio;
	b.nio_shift = 3;
	b.npages = (uint64_t)NBLOCKS * BS >> 14;
	b.pst = calloc(b.npages, 4);
	b.pslot = calloc(b.npages, 4);
	b.slot_page = malloc(b.nslots * 8);
	memset(b.slot_page, 0xff, b.nslots * 8);
	b.slot_ref = calloc(b.nslots, 4);
	b.data = aligned_alloc(4096, (size_t)b.nslots << 14);
	b.turn = calloc(nio, 8);
	b.cam = &e.cam[0];
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
	/* both shards' slots saw misses; the unsharded counter none */
	assert_true(e.cam[0].sink_ticket > 0);
	assert_true(e.cam[1].sink_ticket > 0);
	assert_int_equal(b.io_ticket, 0);
	assert_int_equal(gs_bam_flush_slots(&b, 0, 1), 0);
	assert_int_equal(gs_cam_flush_all(&e.cam[0]), 0);
	assert_int_equal(b.err, 0);

	/* every written word is on the file; untouched words kept the pattern */
	int fd = open(path, O_RDWR);
	uint64_t *w = malloc(64 * BS), bad = 0, base = (NBLOCKS - 64) * (BS / 8);
	uint8_t *seen = calloc(64 * BS / 8, 1);

	assert_int_equal(pread(fd, w, 64 * BS, (NBLOCKS - 64) * (uint64_t)BS), 64 * BS);
	for (int id = 0; id < NTH; id++)
		for (uint64_t k = 0; k < NOPS; k += 3)
			seen[(NBLOCKS - 64 + 8 * id) * (BS / 8) - base +
			     mix(id * 7777ull + k) % (8 * (BS / 8))] = 1;
	for (uint64_t j = 0; j < 64 * BS / 8; j++)
		bad += w[j] != (seen[j] ? (base + j) * 3 + 1 : pattern((base + j) * 8));
	assert_int_equal(bad, 0);
	for (uint64_t j = 0; j < 64 * BS / 8; j++)
		w[j] = pattern((base + j) * 8);
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
	senv_close(&e);
	free(ext);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticket_codec),
		cmocka_unit_test(test_default_rings),
		cmocka_unit_test(test_cam_shards),
		cmocka_unit_test(test_cam_shards_flush),
		cmocka_unit_test(test_gather_shards),
		cmocka_unit_test(test_pieces),
		cmocka_unit_test(test_bam_shards),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
