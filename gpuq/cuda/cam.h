/* SPDX-License-Identifier: MIT */
/*
 * CAM batching (GPU-initiated, CPU-managed I/O) over one gs_ring.
 *
 * GPU threads (or CPU threads in the unit tests: everything here is
 * __host__ __device__) turn block ids into ring requests; the I/O core's
 * pollers serve the ring and store each result into a completion word.
 * Data moves between the device and a buffer region registered with the
 * ring (GS_SQE_BUF_OFF offsets), which on the GPU is pinned host memory
 * mapped into the kernel's address space.
 *
 * Completion tracking: each request takes a ticket t from cam->tail and owns
 * completion word (t mod ncw) until it retires.  cam->retire is the first
 * ticket not yet retired; any waiting thread advances it over requests whose
 * word says done, in ticket order, so "everything issued before my call is
 * complete" is retire >= the tail the caller saw.  A word is re-armed by the
 * ticket one lap later only after retire passed its previous owner, and
 * lap[i] names the ticket that armed word i so that a retirer never takes a
 * previous lap's "done" for the current one.
 *
 * Memory: struct gs_cam, lap[] and the ticket counters live where the
 * producers are (GPU memory for kernels); the ring and the buffer region in
 * memory the pollers can reach.  Only producers do read-modify-writes on the
 * counters here; the ring's own words follow gstore_ring.h's rules.
 */
#ifndef GS_CUDA_CAM_H
#define GS_CUDA_CAM_H

#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <sched.h>
#endif

#include "gstore_ring.h"

/* ---- producer-local atomics: device scope on the GPU, GCC builtins on the CPU ---- */
#if defined(__CUDA_ARCH__)
#define GS_DREF(T, p) cuda::atomic_ref<T, cuda::thread_scope_device>(*(p))
GS_HD uint64_t gs_d_load_acq(uint64_t *p) { return GS_DREF(uint64_t, p).load(cuda::memory_order_acquire); }
GS_HD uint64_t gs_d_load_rlx(uint64_t *p) { return GS_DREF(uint64_t, p).load(cuda::memory_order_relaxed); }
GS_HD void gs_d_store_rel(uint64_t *p, uint64_t v) { GS_DREF(uint64_t, p).store(v, cuda::memory_order_release); }
GS_HD uint64_t gs_d_faa(uint64_t *p, uint64_t v) { return GS_DREF(uint64_t, p).fetch_add(v, cuda::memory_order_relaxed); }
GS_HD int gs_d_cas(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return GS_DREF(uint64_t, p).compare_exchange_strong(*exp, des, cuda::memory_order_acq_rel,
							     cuda::memory_order_acquire);
}
GS_HD int gs_d_cas_i64(int64_t *p, int64_t exp, int64_t des)
{
	return GS_DREF(int64_t, p).compare_exchange_strong(exp, des, cuda::memory_order_relaxed);
}
GS_HD uint32_t gs_d32_load_acq(uint32_t *p) { return GS_DREF(uint32_t, p).load(cuda::memory_order_acquire); }
GS_HD uint32_t gs_d32_faa_acq(uint32_t *p, uint32_t v) { return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_acquire); }
GS_HD uint32_t gs_d32_faa_rel(uint32_t *p, uint32_t v) { return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_release); }
GS_HD uint32_t gs_d32_faa_acq_rel(uint32_t *p, uint32_t v) { return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_acq_rel); }
GS_HD uint32_t gs_d32_or(uint32_t *p, uint32_t v) { return GS_DREF(uint32_t, p).fetch_or(v, cuda::memory_order_relaxed); }
GS_HD uint32_t gs_d32_and(uint32_t *p, uint32_t v) { return GS_DREF(uint32_t, p).fetch_and(v, cuda::memory_order_relaxed); }
GS_HD void gs_d32_store_rlx(uint32_t *p, uint32_t v) { GS_DREF(uint32_t, p).store(v, cuda::memory_order_relaxed); }
GS_HD uint32_t gs_d32_load_rlx(uint32_t *p) { return GS_DREF(uint32_t, p).load(cuda::memory_order_relaxed); }
GS_HD int gs_d32_cas(uint32_t *p, uint32_t exp, uint32_t des)
{
	return GS_DREF(uint32_t, p).compare_exchange_strong(exp, des, cuda::memory_order_acq_rel,
							     cuda::memory_order_relaxed);
}
GS_HD void gs_d_store_rlx(uint64_t *p, uint64_t v) { GS_DREF(uint64_t, p).store(v, cuda::memory_order_relaxed); }
GS_HD void gs_d_backoff(uint32_t *ns)
{
	__nanosleep(*ns);
	if (*ns < 2048)
		*ns *= 2;
}
#else
GS_HD uint64_t gs_d_load_acq(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
GS_HD uint64_t gs_d_load_rlx(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
GS_HD void gs_d_store_rel(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
GS_HD uint64_t gs_d_faa(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
GS_HD int gs_d_cas(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return __atomic_compare_exchange_n(p, exp, des, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
GS_HD int gs_d_cas_i64(int64_t *p, int64_t exp, int64_t des)
{
	return __atomic_compare_exchange_n(p, &exp, des, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
GS_HD uint32_t gs_d32_load_acq(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
GS_HD uint32_t gs_d32_faa_acq(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQUIRE); }
GS_HD uint32_t gs_d32_faa_rel(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
GS_HD uint32_t gs_d32_faa_acq_rel(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
GS_HD uint32_t gs_d32_or(uint32_t *p, uint32_t v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
GS_HD uint32_t gs_d32_and(uint32_t *p, uint32_t v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
GS_HD void gs_d32_store_rlx(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
GS_HD uint32_t gs_d32_load_rlx(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
GS_HD int gs_d32_cas(uint32_t *p, uint32_t exp, uint32_t des)
{
	return __atomic_compare_exchange_n(p, &exp, des, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
GS_HD void gs_d_store_rlx(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
/* CPU threads (tests) share few cores with the pollers: yield soon */
GS_HD void gs_d_backoff(uint32_t *ns)
{
	if (*ns < 4096) {
		*ns += 256;
		gs_cpu_relax();
	} else {
		sched_yield();
	}
}
#endif

#define GS_ERANGE	34
#define GS_EINVAL	22

/* Block run [blk, blk + nblk) lives at device byte offset dev_off. */
struct gs_cam_ext {
	uint64_t blk;
	uint64_t nblk;
	uint64_t dev_off;
};

struct gs_cam {
	/* hot counters, each on its own line */
	uint64_t sq_ticket;	/* producers' sq ticket when sq_ctr points here */
	uint8_t pad0[GS_CACHELINE - 8];
	uint64_t tail;		/* CAM tickets taken */
	uint8_t pad1[GS_CACHELINE - 8];
	uint64_t retire;	/* tickets below are complete and their words free */
	uint8_t pad2[GS_CACHELINE - 8];
	int64_t err;		/* first failure (-errno), sticky */
	uint64_t nerr;		/* failed requests */
	uint8_t pad3[GS_CACHELINE - 16];

	/* read-mostly */
	struct gs_ring *ring;	/* as the producers address it */
	uint64_t *sq_ctr;	/* &ring->sq_tail, or &sq_ticket (see gs_cam_push) */
	uint64_t *lap;		/* [ncw]: ticket that armed each word */
	char *buf;		/* buffer region, producers' view */
	uint64_t buf_len;
	uint32_t ncw;		/* power of two, <= ring->ncw - cw_base */
	uint32_t cw_base;	/* first completion word of the ring used */
	uint32_t block_shift;	/* block = 1 << block_shift bytes */
	uint32_t next;		/* extents; 0: identity from dev_base */
	const struct gs_cam_ext *ext;	/* sorted by blk, producers' view */
	uint64_t dev_base;	/* next == 0: block b at dev_base + (b << block_shift) */
	uint64_t nblocks;	/* addressable blocks */
};

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
	struct gs_ring *r = c->ring;
	uint64_t t = c->sq_ctr == &r->sq_tail ? gs_faa64(&r->sq_tail, 1) : gs_d_faa(c->sq_ctr, 1);
	struct gs_sq_slot *s = &gs_ring_sq(r)[t & (r->sq_entries - 1)];
	uint32_t ns = 32;

	/* acquire: the previous lap's consumer finished reading the slot */
	while (gs_load_acq64(&s->seq) != t)
		gs_d_backoff(&ns);
	gs_sq_fill(s, t, e);
	if (c->sq_ctr != &r->sq_tail && gs_load_rlx64(&r->sq_tail) < t + 1)
		gs_store_rel64(&r->sq_tail, t + 1);	/* hint only: may lag or go back */
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

/*
 * Retire completed requests in ticket order; returns the new retire point
 * (every ticket below it is complete).  Any thread may call it.
 */
GS_HD uint64_t gs_cam_advance(struct gs_cam *c)
{
	uint64_t r = gs_d_load_acq(&c->retire);

	while (r < gs_d_load_acq(&c->tail)) {
		uint32_t i = r & (c->ncw - 1);
		struct gs_cword *w = &gs_ring_cw(c->ring)[c->cw_base + i];
		int64_t res;

		/* acquire: the owner armed the word (state = 0) before publishing lap */
		if (gs_d_load_acq(&c->lap[i]) != r)
			break;
		/* acquire: pairs with the poller's gs_cw_complete(); res is valid */
		if (!gs_load_acq32(&w->state))
			break;
		res = *(volatile int64_t *)&w->res;
		if (!gs_d_cas(&c->retire, &r, r + 1))
			continue;	/* another thread retired r; r is reloaded */
		if (res < 0)
			gs_cam_fail(c, res);
		r++;
	}
	return r;
}

/*
 * Issue one request (GS_OP_*) for @len bytes at device offset @dev_off,
 * data at region offset @buf_off.  Waits while all ncw words are in use.
 * Returns the ticket.
 */
GS_HD uint64_t gs_cam_issue(struct gs_cam *c, uint8_t op, uint64_t dev_off, uint32_t len,
			    uint64_t buf_off)
{
	uint64_t t = gs_d_faa(&c->tail, 1);
	uint32_t i = t & (c->ncw - 1), ns = 64;
	struct gs_cword *w = &gs_ring_cw(c->ring)[c->cw_base + i];
	struct gs_sqe e = { 0 };

	/* the word's previous owner (ticket t - ncw) must have retired */
	while (t >= c->ncw && gs_cam_advance(c) <= t - c->ncw)
		gs_d_backoff(&ns);
	w->state = 0;
	/* system fence: the re-armed word is visible before lap[] names us and
	 * before the request (so the poller's "done" lands after our 0) */
	gs_fence();
	gs_d_store_rel(&c->lap[i], t);
	e.op = op;
	e.flags = GS_SQE_CW | (op == GS_OP_FLUSH ? 0 : GS_SQE_BUF_OFF);
	e.len = len;
	e.off = dev_off;
	e.buf = buf_off;
	e.tag = t;
	e.cw = c->cw_base + i;
	gs_cam_push(c, &e);
	return t;
}

/* Wait until every request issued before the call has completed; returns
 * the sticky first error (0 or -errno). */
GS_HD int gs_cam_sync(struct gs_cam *c)
{
	uint64_t want = gs_d_load_acq(&c->tail);
	uint32_t ns = 64;

	while (gs_cam_advance(c) < want)
		gs_d_backoff(&ns);
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

#endif /* GS_CUDA_CAM_H */
