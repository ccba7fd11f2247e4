/* SPDX-License-Identifier: MIT */
/*
 * CAM (GPU-initiated, CPU-managed I/O): the queue logic under gs_prefetch()
 * and gs_write_back() of gstore_cuda.h, over one gs_ring.  GPU threads (or
 * CPU threads in the unit tests: everything here is static inline and
 * __host__ __device__) turn block ids into ring requests; the I/O core's
 * pollers serve the ring; data moves between the device and the ring's
 * buffer region (pinned host memory mapped into the kernel's address space
 * on the GPU).  Tickets, the completion collector, retire and the memory
 * each part lives in: docs/ARCHITECTURE.md, "GPU path".
 *
 * Shards.  A gs_cuda may have several rings, each with its own gs_cam
 * (tickets, collector, sink slots): the gs_cam of ring 0 is the one callers
 * hold, and shards[] (in every shard) lists them all.  A caller that issues
 * takes the shard of its SM (gs_cam_self()), so that the lanes of one SM
 * contend for one ring's counters and one collector, not all of the GPU's;
 * a ticket handed out by the warp calls names its shard.  Anything that
 * waits for "everything issued before" visits every shard.
 */
#ifndef GSTORE_CUDA_CAM_H
#define GSTORE_CUDA_CAM_H

#include <stdint.h>

#include "gstore_ring.h"	/* gs_ring, GS_HD, the atomics */

#define GS_ERANGE	34
#define GS_EINVAL	22

/* Block run [blk, blk + nblk) lives at device byte offset dev_off. */
struct gs_cam_ext {
	uint64_t blk;
	uint64_t nblk;
	uint64_t dev_off;
};

#define GS_CAM_SINK	(1ull << 63)	/* cqe tag bit: a sink (BaM) request */
#define GS_CAM_BATCH	16		/* cqes the collector reads per round trip */

/*
 * A ticket as gs_prefetch_warp() hands it out: the shard's own ticket (low
 * GS_CAM_TKT_BITS, widened again from the shard's tail when waited for), the
 * number of requests the block took less one (a block over two extents
 * takes two), and the shard.  UINT64_MAX (no request) never decodes as one:
 * shards stay below GS_CAM_MAX_SHARDS.
 */
#define GS_CAM_TKT_BITS		46
#define GS_CAM_TKT_MASK		((1ull << GS_CAM_TKT_BITS) - 1)
#define GS_CAM_PIECE_BITS	10
#define GS_CAM_MAX_PIECES	(1u << GS_CAM_PIECE_BITS)	/* requests per block */
#define GS_CAM_SHARD_SHIFT	(GS_CAM_TKT_BITS + GS_CAM_PIECE_BITS)
#define GS_CAM_MAX_SHARDS	64

struct gs_cam {
	/* hot counters, each on its own line */
	uint64_t sq_ticket;	/* producers' sq ticket when sq_ctr points here */
	uint64_t sq_hint;	/* highest tail published as ring->sq_tail */
	uint8_t pad0[GS_CACHELINE - 16];
	uint64_t tail;		/* CAM tickets taken */
	uint8_t pad1[GS_CACHELINE - 8];
	uint64_t retire;	/* tickets below are complete and their words free */
	uint8_t pad2[GS_CACHELINE - 8];
	uint64_t col_lock;	/* the collector's */
	uint64_t cq_head;	/* next cqe to pop (collector only) */
	uint64_t col_owner;	/* diagnostics: the collector (GPU: global thread id + 1) */
	uint8_t pad3[GS_CACHELINE - 24];
	int64_t err;		/* first failure (-errno), sticky */
	uint64_t nerr;		/* failed requests */
	uint8_t pad4[GS_CACHELINE - 16];
	uint64_t sink_ticket;	/* sharded BaM: this shard's bounce-slot tickets */
	uint8_t pad5[GS_CACHELINE - 8];

	/* read-mostly */
	struct gs_ring *ring;	/* as the producers address it */
	uint64_t *sq_ctr;	/* &ring->sq_tail, or &sq_ticket (see gs_cam_push) */
	uint64_t *done;		/* [ncw]: ticket that completed in each word */
	int64_t *dres;		/* [ncw]: its result */
	uint64_t *sink_done;	/* [sink_mask + 1]: tag & ~GS_CAM_SINK completed there */
	int64_t *sink_res;
	char *buf;		/* buffer region, producers' view */
	uint64_t buf_len;
	uint32_t ncw;		/* power of two: tickets in flight at most */
	uint32_t sink_mask;
	uint32_t sq_mask;	/* ring geometry, copied: no PCIe read to learn it */
	uint32_t cq_mask;
	uint32_t block_shift;	/* block = 1 << block_shift bytes */
	uint32_t next;		/* extents; 0: identity from dev_base */
	const struct gs_cam_ext *ext;	/* sorted by blk, producers' view */
	uint64_t dev_base;	/* next == 0: block b at dev_base + (b << block_shift) */
	uint64_t nblocks;	/* addressable blocks */
	/* the extents' unit, at most a block (0: a block): with a finer unit a
	 * block may span extents and then takes one request per device run */
	uint32_t ext_shift;
	uint32_t sink_shift;	/* sharded BaM: sink_mask + 1 == 1 << sink_shift */
	struct gs_cam *shards;	/* [nshard], shard 0 first; NULL: not sharded */
	uint32_t nshard;	/* 0 or 1: not sharded */
	uint32_t shard_id;	/* this one's index in shards[] */
};

/*
 * Default ring counts: one ring per GS_CAM_SMS_PER_RING SMs for a handle's
 * CAM lanes (gs_cuda_open(), gs_cuda_default_nrings()), one per
 * GS_BAM_SMS_PER_RING for a BaM array's misses when the handle's count was
 * left to the default (its lanes hold a bounce slot each while they wait, so
 * they contend harder; docs/PERF.md, "Scaling to the whole GPU").
 */
#define GS_CAM_SMS_PER_RING	16
#define GS_BAM_SMS_PER_RING	16

/* One ring per @per of @nsm SMs, rounded down to a power of two, 1 to 16. */
GS_HD uint32_t gs_cam_rings_for(uint32_t nsm, uint32_t per)
{
	uint32_t n = 1;

	while (per && n * 2 <= nsm / per && n < 16)
		n *= 2;
	return n;
}

#if !defined(__CUDA_ARCH__)
/* A CPU thread's shard key: threads numbered in the order they first ask. */
static inline uint32_t gs_cam_host_key(void)
{
	static __thread uint32_t key;
	static uint32_t next;

	if (!key)
		key = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
	return key - 1;
}
#endif

/* The caller's shard key: its SM on the GPU (all lanes of a warp share it). */
GS_HD uint32_t gs_cam_key(void)
{
#if defined(__CUDA_ARCH__)
	uint32_t id;

	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	return id;
#else
	return gs_cam_host_key();
#endif
}

/* Shard @i of @c's set (c itself when not sharded). */
GS_HD struct gs_cam *gs_cam_nth(struct gs_cam *c, uint32_t i)
{
	return c->nshard > 1 ? &c->shards[i] : c;
}

GS_HD uint32_t gs_cam_nshards(const struct gs_cam *c)
{
	return c->nshard > 1 ? c->nshard : 1;
}

/* The shard that key @key issues on. */
GS_HD struct gs_cam *gs_cam_shard(struct gs_cam *c, uint32_t key)
{
	return c->nshard > 1 ? &c->shards[key % c->nshard] : c;
}

/* The caller's own shard. */
GS_HD struct gs_cam *gs_cam_self(struct gs_cam *c)
{
	return gs_cam_shard(c, gs_cam_key());
}

/* Encode shard @s's ticket @t of a block that took @np requests. */
GS_HD uint64_t gs_cam_ticket(const struct gs_cam *s, uint64_t t, uint32_t np)
{
	return (t & GS_CAM_TKT_MASK) | ((uint64_t)(np - 1) << GS_CAM_TKT_BITS) |
	       ((uint64_t)s->shard_id << GS_CAM_SHARD_SHIFT);
}

/* Decode: the shard (of @c's set), its full ticket and the request count. */
GS_HD struct gs_cam *gs_cam_ticket_decode(struct gs_cam *c, uint64_t ticket, uint64_t *t,
					  uint32_t *np)
{
	struct gs_cam *s = gs_cam_nth(c, (uint32_t)(ticket >> GS_CAM_SHARD_SHIFT) %
				      gs_cam_nshards(c));
	uint64_t lo = ticket & GS_CAM_TKT_MASK;
	/* relaxed: the ticket was taken before, so tail is past it already; the
	 * ticket is the value below tail with these low bits */
	uint64_t tail = gs_d_load_rlx(&s->tail);

	*t = tail - ((tail - lo) & GS_CAM_TKT_MASK);
	*np = (uint32_t)((ticket >> GS_CAM_TKT_BITS) & (GS_CAM_MAX_PIECES - 1)) + 1;
	return s;
}

/*
 * Publish the sq tail hint after raising cam->sq_hint to @v.  Plain stores
 * of two producers can land out of order (an older, smaller value last),
 * and a hint stuck below the real tail makes a poller doze (up to 2 ms)
 * over requests it would pop: after each store, a system fence and a
 * re-read of sq_hint; whoever sees it higher than what it stored stores
 * again, so the store that lands last carries the maximum.
 */
GS_HD void gs_cam_publish_hint(struct gs_cam *c, uint64_t v)
{
	uint64_t h;

	if (gs_d_max(&c->sq_hint, v) >= v)
		return;		/* a higher value was raised: its raiser publishes */
	for (;;) {
		gs_store_rel64(&c->ring->sq_tail, v);
		/* seq_cst system fence: the store above before the re-read below */
		gs_fence();
		h = gs_d_load_acq(&c->sq_hint);
		if (h <= v)
			break;
		v = h;
	}
}

GS_HD uint32_t gs_cam_ext_shift(const struct gs_cam *c)
{
	return c->ext_shift ? c->ext_shift : c->block_shift;
}

/*
 * Piece @k of block @blk: the k-th run, in block order, of the block's bytes
 * that the extents map (one piece, the whole block, unless the extent unit
 * is finer than a block).  1 with *dev (device byte offset), *boff (offset
 * in the block) and *len; 0 when there is no such piece.
 */
GS_HD int gs_cam_piece(const struct gs_cam *c, uint64_t blk, uint32_t k, uint64_t *dev,
		       uint32_t *boff, uint32_t *len)
{
	uint32_t es = gs_cam_ext_shift(c), lo = 0, hi = c->next, i;
	uint64_t u0, u1;

	if (blk >= c->nblocks)
		return 0;
	if (!c->next) {
		*dev = c->dev_base + (blk << c->block_shift);
		*boff = 0;
		*len = 1u << c->block_shift;
		return !k;
	}
	u0 = blk << (c->block_shift - es);	/* the block in extent units */
	u1 = u0 + (1ull << (c->block_shift - es));
	while (lo < hi) {	/* extents with ext.blk <= u0 */
		uint32_t mid = (lo + hi) / 2;

		if (c->ext[mid].blk <= u0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo ? lo - 1 : 0; i < c->next && c->ext[i].blk < u1; i++) {
		const struct gs_cam_ext *e = &c->ext[i];
		uint64_t s = e->blk > u0 ? e->blk : u0;
		uint64_t end = e->blk + e->nblk < u1 ? e->blk + e->nblk : u1;

		if (s >= end)
			continue;
		if (k) {
			k--;
			continue;
		}
		*dev = e->dev_off + ((s - e->blk) << es);
		*boff = (uint32_t)((s - u0) << es);
		*len = (uint32_t)((end - s) << es);
		return 1;
	}
	return 0;
}

/* Requests block @blk takes (0: all of it in a hole); *covered: bytes mapped. */
GS_HD uint32_t gs_cam_npieces(const struct gs_cam *c, uint64_t blk, uint32_t *covered)
{
	uint64_t dev;
	uint32_t n = 0, boff, len;

	*covered = 0;
	while (gs_cam_piece(c, blk, n, &dev, &boff, &len)) {
		*covered += len;
		n++;
	}
	return n;
}

/*
 * The most requests one block of 1 << @block_shift bytes takes over the
 * table @ext[0, next) in units of 1 << @ext_shift (host side, at open).
 * Extents are sorted and disjoint, so the ones that share a block are
 * consecutive and the first of them either is the only one or ends in that
 * block: the most is 1 + the extents after some i that start in i's last
 * block.
 */
GS_HD uint32_t gs_cam_max_pieces(const struct gs_cam_ext *ext, uint32_t next,
				 uint32_t block_shift, uint32_t ext_shift)
{
	uint32_t sh = block_shift - ext_shift, max = next ? 1 : 0;

	for (uint32_t i = 0; i < next; i++) {
		uint64_t last = (ext[i].blk + ext[i].nblk - 1) >> sh;
		uint32_t n = 1;

		for (uint32_t j = i + 1; j < next && (ext[j].blk >> sh) == last; j++)
			n++;
		if (n > max)
			max = n;
	}
	return max;
}

/* Device byte offset of block @blk, or -ERANGE (a hole, or a block that is
 * not one device run: see gs_cam_piece()). */
GS_HD int64_t gs_cam_dev_off(const struct gs_cam *c, uint64_t blk)
{
	uint64_t dev;
	uint32_t boff, len;

	if (!gs_cam_piece(c, blk, 0, &dev, &boff, &len) || boff ||
	    len != (1u << c->block_shift))
		return -GS_ERANGE;
	return (int64_t)dev;
}

/* Zero @bytes at @p (a multiple of 16, 16-byte aligned on the GPU). */
GS_HD void gs_cam_zero(char *p, uint32_t bytes)
{
#if defined(__CUDA_ARCH__)
	uint4 z = make_uint4(0, 0, 0, 0);

	for (uint32_t i = 0; i < bytes / 16; i++)
		((uint4 *)p)[i] = z;
#else
	__builtin_memset(p, 0, bytes);
#endif
}

GS_HD void gs_cam_fail(struct gs_cam *c, int64_t res)
{
	gs_d_cas_i64(&c->err, 0, res);
	gs_d_faa(&c->nerr, 1);
}

/* Record a cqe of the ring: a CAM ticket's word, or a sink slot. */
GS_HD void gs_cam_dispatch(struct gs_cam *c, uint64_t tag, int64_t res)
{
	if (tag & GS_CAM_SINK) {
		uint32_t i = (uint32_t)(tag & c->sink_mask);

		c->sink_res[i] = res;
		/* release: res before the word that says done */
		gs_d_store_rel(&c->sink_done[i], tag & ~GS_CAM_SINK);
	} else {
		uint32_t i = (uint32_t)(tag & (c->ncw - 1));

		c->dres[i] = res;
		gs_d_store_rel(&c->done[i], tag);
	}
}

/*
 * Be the collector if nobody is: pop the cqes posted so far (batches of
 * GS_CAM_BATCH, their seq words loaded together), dispatch them, advance
 * retire.  Returns the cqes popped, or -1 if another thread collects.
 */
GS_HD int gs_cam_collect(struct gs_cam *c)
{
	struct gs_cq_slot *cq = gs_ring_cq(c->ring);
	uint64_t h, r, tail;
	int got = 0;

	if (!gs_d_trylock(&c->col_lock))
		return -1;
#if defined(__CUDA_ARCH__)
	c->col_owner = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x + 1;
#else
	c->col_owner = 1;
#endif
	h = c->cq_head;
	for (int round = 0; round < 16; round++) {
		uint64_t seq[GS_CAM_BATCH], tag[GS_CAM_BATCH];
		int64_t res[GS_CAM_BATCH];
		int k = 0, i;

		for (i = 0; i < GS_CAM_BATCH; i++)	/* all in flight at once */
			seq[i] = gs_load_fenced64(&cq[(h + i) & c->cq_mask].seq);
		while (k < GS_CAM_BATCH && seq[k] == h + k + 1)
			k++;
		if (!k)
			break;
		/* acquire: the cqe bodies are read after their seq said posted */
		gs_fence_acq();
		for (i = 0; i < k; i++) {
			struct gs_cq_slot *sl = &cq[(h + i) & c->cq_mask];

			tag[i] = *(volatile uint64_t *)&sl->cqe.tag;
			res[i] = *(volatile int64_t *)&sl->cqe.res;
		}
		/* one system fence: our copies are done before the poller may reuse
		 * any of these slots (cheaper than a release store per slot) */
		gs_fence();
		for (i = 0; i < k; i++) {
			*(volatile uint64_t *)&cq[(h + i) & c->cq_mask].seq = h + i + c->cq_mask + 1;
			gs_cam_dispatch(c, tag[i], res[i]);
		}
		h += k;
		got += k;
		if (k < GS_CAM_BATCH)
			break;
	}
	if (got) {
		c->cq_head = h;
		gs_store_rel64(&c->ring->cq_head, h);	/* for observers; seq is the protocol */
	}
	r = gs_d_load_rlx(&c->retire);
	tail = gs_d_load_acq(&c->tail);
	while (r < tail && gs_d_load_acq(&c->done[r & (c->ncw - 1)]) == r) {
		int64_t res = c->dres[r & (c->ncw - 1)];

		if (res < 0)
			gs_cam_fail(c, res);
		r++;
	}
	/* release: a waiter that sees retire sees the data of those requests */
	gs_d_store_rel(&c->retire, r);
	gs_d_store_rel(&c->col_lock, 0);
	return got;
}

/* Collect, or back off when someone else does or nothing came. */
GS_HD void gs_cam_wait_step(struct gs_cam *c, uint32_t *ns)
{
	if (gs_cam_collect(c) > 0)
		*ns = 64;
	else
		gs_d_backoff(ns);
}

/*
 * A warp's worth of requests at once (gs_prefetch() on the GPU): reserve @n
 * CAM tickets with one fetch-add and wait until the words of all of them
 * are free; returns the first.  The caller then takes @n sq tickets with
 * gs_cam_sq_reserve() and fills them (gs_cam_push_at()), so that the two
 * hot counters see one atomic per warp instead of one per thread.
 */
GS_HD uint64_t gs_cam_reserve(struct gs_cam *c, uint32_t n)
{
	uint64_t t = gs_d_faa(&c->tail, n);
	uint32_t ns = 64;

	/* the last word's previous owner (ticket t + n - 1 - ncw) must have retired */
	while (t + n > c->ncw && gs_d_load_acq(&c->retire) <= t + n - 1 - c->ncw)
		gs_cam_wait_step(c, &ns);
	return t;
}

/* @n consecutive sq tickets (see gs_cam_push()); returns the first. */
GS_HD uint64_t gs_cam_sq_reserve(struct gs_cam *c, uint32_t n)
{
	struct gs_ring *r = c->ring;

	return c->sq_ctr != &r->sq_tail ? gs_d_faa(c->sq_ctr, n) : gs_faa64(&r->sq_tail, n);
}

/* Fill sq ticket @t (reserved) with @e; @last: t is the highest of its batch. */
GS_HD void gs_cam_push_at(struct gs_cam *c, uint64_t t, const struct gs_sqe *e, int last)
{
	struct gs_ring *r = c->ring;
	struct gs_sq_slot *s = &gs_ring_sq(r)[t & c->sq_mask];
	uint32_t ns = 32;

	/* acquire: the previous lap's consumer finished reading the slot (with
	 * ncw + sinks <= sq_entries, as gs_cuda_open() checks, it has: no wait) */
	while (gs_load_acq64(&s->seq) != t)
		gs_d_backoff(&ns);
	gs_sq_fill(s, t, e);
	/* hint only (gs_sq_pending, poller scaling): may lag, never our protocol */
	if (last && c->sq_ctr != &r->sq_tail)
		gs_cam_publish_hint(c, t + 1);
}

/*
 * Push one request.  With sq_ctr == &ring->sq_tail this is gs_sq_push().
 * With sq_ctr == &cam->sq_ticket the ticket comes from producer-local memory
 * (no read-modify-write on the ring's memory, which a GPU may not be able
 * to do atomically over PCIe) and ring->sq_tail is kept as a hint for
 * gs_sq_pending() with a plain store; only this cam may produce into the
 * ring then.
 */
GS_HD void gs_cam_push(struct gs_cam *c, const struct gs_sqe *e)
{
	gs_cam_push_at(c, gs_cam_sq_reserve(c, 1), e, 1);
}

/*
 * Issue one request (GS_OP_*) for @len bytes at device offset @dev_off,
 * data at region offset @buf_off.  Waits while ncw requests are in flight.
 * Returns the ticket.
 */
GS_HD uint64_t gs_cam_issue(struct gs_cam *c, uint8_t op, uint64_t dev_off, uint32_t len,
			    uint64_t buf_off)
{
	uint64_t t = gs_cam_reserve(c, 1);
	struct gs_sqe e = GS_ZERO;

	e.op = op;
	e.flags = GS_SQE_CQE | (op == GS_OP_FLUSH ? 0 : GS_SQE_BUF_OFF);
	e.len = len;
	e.off = dev_off;
	e.buf = buf_off;
	e.tag = t;
	gs_cam_push(c, &e);
	return t;
}

/*
 * Look once whether ticket @t is complete: its word says so, or retire has
 * passed it (the word may already belong to ticket t + ncw).  1 with *res
 * (bytes or -errno; 0 when only retire tells, its error then in c->err).
 */
GS_HD int gs_cam_ticket_done(struct gs_cam *c, uint64_t t, int64_t *res)
{
	uint32_t i = (uint32_t)(t & (c->ncw - 1));

	/* acquire: pairs with the collector's release of the word */
	if (gs_d_load_acq(&c->done[i]) == t) {
		*res = c->dres[i];
		/* re-check: the word was still ours when res was read */
		if (gs_d_load_acq(&c->done[i]) == t)
			return 1;
	}
	/* acquire: pairs with the collector's release of retire */
	if (gs_d_load_acq(&c->retire) > t) {
		*res = 0;
		return 1;
	}
	return 0;
}

/*
 * Wait for ticket @t alone (not for every earlier one, as gs_cam_sync()
 * does: one slow request then holds up only its own waiter).  Returns its
 * result (bytes or -errno).  Per thread: CPU threads, or one GPU lane whose
 * warp-mates do not spin meanwhile (gs_prefetch_wait() is the warp's way).
 */
GS_HD int64_t gs_cam_wait_ticket(struct gs_cam *c, uint64_t t)
{
	uint32_t ns = 64;
	int64_t res;

	while (!gs_cam_ticket_done(c, t, &res))
		gs_cam_wait_step(c, &ns);
	/* system fence: data the pollers wrote is visible to our later loads */
	gs_fence();
	return res;
}

/* Wait until every request issued before the call has completed; returns
 * the sticky first error (0 or -errno). */
GS_HD int gs_cam_sync(struct gs_cam *c)
{
	uint64_t want = gs_d_load_acq(&c->tail);
	uint32_t ns = 64;

	while (gs_d_load_acq(&c->retire) < want)
		gs_cam_wait_step(c, &ns);
	/* system fence: data the pollers wrote is visible to our later loads */
	gs_fence();
	return (int)gs_d_load_acq((uint64_t *)&c->err);
}

/*
 * Read (op GS_OP_READ) or write (GS_OP_WRITE) blocks ids[0..n) to/from
 * @data + i * block size, which must lie in the buffer region.  A block
 * that spans extents goes out as one request per device run; the bytes of
 * a block that no extent maps (a partial last block, a hole inside it) are
 * not written, and read as zeros.  Returns 0, or -EINVAL / -ERANGE (nothing
 * issued for the offending block, wholly in a hole or past the end; the
 * error is also recorded in c->err).
 */
GS_HD int gs_cam_blocks(struct gs_cam *c, uint8_t op, const uint64_t *ids, uint32_t n,
			const void *data)
{
	uint64_t bs = 1ull << c->block_shift;
	uint64_t off = (uint64_t)((const char *)data - c->buf);
	int ret = 0;

	if ((const char *)data < c->buf || off > c->buf_len || n * bs > c->buf_len - off) {
		gs_cam_fail(c, -GS_EINVAL);
		return -GS_EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t covered, np = gs_cam_npieces(c, ids[i], &covered), boff, len;
		uint64_t dev;

		if (!np) {
			gs_cam_fail(c, -GS_ERANGE);
			ret = -GS_ERANGE;
			continue;
		}
		if (op == GS_OP_READ && covered < bs) {
			gs_cam_zero(c->buf + off + i * bs, (uint32_t)bs);
			/* system fence: the zeros land before the reads' data */
			gs_fence();
		}
		for (uint32_t k = 0; gs_cam_piece(c, ids[i], k, &dev, &boff, &len); k++)
			gs_cam_issue(c, op, dev, len, off + i * bs + boff);
	}
	return ret;
}

/* Flush the device after every write issued before the call; returns the
 * sticky first error. */
GS_HD int gs_cam_flush(struct gs_cam *c)
{
	int ret = gs_cam_sync(c);

	if (ret)
		return ret;
	gs_cam_issue(c, GS_OP_FLUSH, 0, 0, 0);
	return gs_cam_sync(c);
}

/* The sticky first error of any shard of @c's set (0 or -errno). */
GS_HD int gs_cam_err_all(struct gs_cam *c)
{
	for (uint32_t i = 0; i < gs_cam_nshards(c); i++) {
		int64_t e = (int64_t)gs_d_load_acq((uint64_t *)&gs_cam_nth(c, i)->err);

		if (e)
			return (int)e;
	}
	return 0;
}

/* gs_cam_sync() on every shard: everything issued before the call, on any
 * shard, has completed; returns the first sticky error of any shard. */
GS_HD int gs_cam_sync_all(struct gs_cam *c)
{
	for (uint32_t i = 0; i < gs_cam_nshards(c); i++)
		gs_cam_sync(gs_cam_nth(c, i));
	return gs_cam_err_all(c);
}

/*
 * Flush the device after every write issued before the call on any shard:
 * those complete first, then one flush (through shard 0) covers them all,
 * as a flush on any ring follows every write the pollers took before it.
 */
GS_HD int gs_cam_flush_all(struct gs_cam *c)
{
	int ret = gs_cam_sync_all(c);

	if (ret)
		return ret;
	ret = gs_cam_flush(gs_cam_nth(c, 0));
	return ret ? ret : gs_cam_err_all(c);
}

#endif /* GSTORE_CUDA_CAM_H */
