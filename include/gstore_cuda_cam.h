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
};

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

/* Device byte offset of block @blk, or -ERANGE. */
GS_HD int64_t gs_cam_dev_off(const struct gs_cam *c, uint64_t blk)
{
	uint32_t lo = 0, hi = c->next;

	if (blk >= c->nblocks)
		return -GS_ERANGE;
	if (!c->next)
		return (int64_t)(c->dev_base + (blk << c->block_shift));
	while (lo < hi) {	/* last extent with ext.blk <= blk */
		uint32_t mid = (lo + hi) / 2;

		if (c->ext[mid].blk <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || blk - c->ext[lo - 1].blk >= c->ext[lo - 1].nblk)
		return -GS_ERANGE;	/* a hole */
	return (int64_t)(c->ext[lo - 1].dev_off + ((blk - c->ext[lo - 1].blk) << c->block_shift));
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
 * @data + i * block size, which must lie in the buffer region.  Returns 0,
 * or -EINVAL / -ERANGE (nothing issued for the offending block; the error
 * is also recorded in c->err).
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
		int64_t dev = gs_cam_dev_off(c, ids[i]);

		if (dev < 0) {
			gs_cam_fail(c, dev);
			ret = (int)dev;
			continue;
		}
		gs_cam_issue(c, op, (uint64_t)dev, (uint32_t)bs, off + i * bs);
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

#endif /* GSTORE_CUDA_CAM_H */
