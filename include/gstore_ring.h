/* SPDX-License-Identifier: MIT */
/*
 * gstore request rings: the fast path shared by CPU threads and CUDA kernels.
 *
 * A ring lives in one block of memory that may be process-shared (memfd) or
 * pinned host memory mapped into a GPU.  It holds no pointers: only offsets
 * from its own start, so every process and the GPU see the same layout.
 *
 * Layout:  [gs_ring header][sq slots][cq slots][completion words]
 *
 * Both queues are bounded many-producer/many-consumer queues with a ticket
 * per operation (BaM's ticket + turn counter): a producer takes ticket t from
 * tail with fetch-add (or CAS for the non-blocking variant), its slot is
 * t & mask and its turn is t / entries.  A slot's seq word says whose turn it
 * is: seq == t means "free for producer t", seq == t + 1 means "filled by
 * producer t, ready for consumer t"; the consumer releases it with
 * seq = t + entries, the ticket of the producer one lap later.  Producers
 * never overwrite an unconsumed slot and consumers never read a slot twice,
 * without any lock.
 *
 * Everything is static inline and __host__ __device__ under nvcc.
 */
#ifndef GSTORE_RING_H
#define GSTORE_RING_H

#include <stdint.h>

#include "gstore_atomic.h"	/* GS_HD, GS_CACHELINE, the atomics */

#define GS_RING_MAGIC	0x47535152u	/* "GSQR" */
#define GS_RING_VERSION	1u

enum gs_op {
	GS_OP_READ = 0,
	GS_OP_WRITE = 1,
	GS_OP_FLUSH = 2,
	GS_OP_NR,
};

/* gs_sqe.flags */
enum {
	GS_SQE_BUF_OFF = 1u << 0,	/* buf is an offset into the ring's buffer region */
	GS_SQE_CQE = 1u << 1,		/* post a completion to the ring's cq */
	GS_SQE_CW = 1u << 2,		/* write the result to completion word cw */
	GS_SQE_CB = 1u << 3,		/* in-process: tag is a struct gs_q_io * */
};

/* gs_ring.flags */
enum {
	GS_RING_POLLED = 1u << 0,	/* producers cannot kick (GPU): pollers poll it */
};

/* A request: 40 bytes. */
struct gs_sqe {
	uint8_t op;		/* enum gs_op */
	uint8_t flags;		/* GS_SQE_* */
	uint16_t rsvd0;
	uint32_t len;		/* bytes */
	uint64_t off;		/* device byte offset */
	uint64_t buf;		/* address in the poller's space, or region offset */
	uint64_t tag;		/* opaque, echoed in the completion */
	uint32_t cw;		/* completion word index (GS_SQE_CW) */
	uint32_t rsvd1;
};

/* A completion: 16 bytes. */
struct gs_cqe {
	uint64_t tag;
	int64_t res;		/* bytes transferred or -errno */
};

/* Per-request completion word.  state is the futex word (0 pending, 1 done). */
struct gs_cword {
	uint32_t state;
	uint32_t waiters;	/* a CPU submitter sleeps in futex_wait on state */
	int64_t res;
};

struct gs_sq_slot {
	uint64_t seq;
	struct gs_sqe sqe;
	uint8_t pad[GS_CACHELINE - 8 - sizeof(struct gs_sqe)];
};

struct gs_cq_slot {
	uint64_t seq;
	struct gs_cqe cqe;
	uint64_t pad;
};

struct gs_ring {
	/* read-mostly line */
	uint32_t magic;
	uint32_t version;
	uint32_t sq_entries, cq_entries;	/* powers of two */
	uint32_t ncw;
	uint32_t flags;			/* GS_RING_* */
	uint64_t sq_off, cq_off, cw_off;	/* from the start of this struct */
	uint64_t bytes;
	uint8_t pad0[GS_CACHELINE - 56];

	/* each ticket counter on its own line: producers and consumers never share */
	uint64_t sq_tail;
	uint8_t pad1[GS_CACHELINE - 8];
	uint64_t sq_head;
	uint8_t pad2[GS_CACHELINE - 8];
	uint64_t cq_tail;
	uint8_t pad3[GS_CACHELINE - 8];
	uint64_t cq_head;
	uint8_t pad4[GS_CACHELINE - 8];
	/* pollers that may be asleep; a CPU producer kicks when non-zero */
	uint32_t sleepers;
	/* CPU threads blocked in gs_ring_cq_wait(); a poller that posted cqes
	 * bumps cq_futex and futex-wakes it when non-zero */
	uint32_t cq_waiters;
	uint32_t cq_futex;
	uint32_t rsvd;
	uint8_t pad5[GS_CACHELINE - 16];
};

GS_STATIC_ASSERT(sizeof(struct gs_sqe) == 40, "gs_sqe is 40 bytes");
GS_STATIC_ASSERT(sizeof(struct gs_cqe) == 16, "gs_cqe is 16 bytes");
GS_STATIC_ASSERT(sizeof(struct gs_sq_slot) == GS_CACHELINE, "one sq slot per cache line");
GS_STATIC_ASSERT(sizeof(struct gs_cq_slot) == 32, "cq slot is 32 bytes");
GS_STATIC_ASSERT(sizeof(struct gs_ring) == 6 * GS_CACHELINE, "ring header is 6 lines");

GS_HD struct gs_sq_slot *gs_ring_sq(struct gs_ring *r)
{
	return (struct gs_sq_slot *)((char *)r + r->sq_off);
}

GS_HD struct gs_cq_slot *gs_ring_cq(struct gs_ring *r)
{
	return (struct gs_cq_slot *)((char *)r + r->cq_off);
}

GS_HD struct gs_cword *gs_ring_cw(struct gs_ring *r)
{
	return (struct gs_cword *)((char *)r + r->cw_off);
}

/* Write a request into the slot of ticket @t and hand it to consumer t. */
GS_HD void gs_sq_fill(struct gs_sq_slot *s, uint64_t t, const struct gs_sqe *e)
{
	s->sqe = *e;
	/* release: the sqe body is visible before the consumer sees seq == t + 1 */
	gs_store_rel64(&s->seq, t + 1);
}

/*
 * Blocking push (BaM style): take a ticket unconditionally, then wait for
 * our turn at the slot.  Never fails; waits while the ring is full.  This is
 * what GPU threads use: no retry loop on a contended CAS.
 */
GS_HD void gs_sq_push(struct gs_ring *r, const struct gs_sqe *e)
{
	uint64_t t = gs_faa64(&r->sq_tail, 1);
	struct gs_sq_slot *s = &gs_ring_sq(r)[t & (r->sq_entries - 1)];
	unsigned spins = 0;

	/* acquire: the previous lap's consumer finished reading the slot */
	while (gs_load_acq64(&s->seq) != t)
		gs_spin_backoff(&spins);
	gs_sq_fill(s, t, e);
}

/* Non-blocking push: returns 0, or -11 (-EAGAIN) when the ring is full. */
GS_HD int gs_sq_try_push(struct gs_ring *r, const struct gs_sqe *e)
{
	uint64_t t = gs_load_rlx64(&r->sq_tail);

	for (;;) {
		struct gs_sq_slot *s = &gs_ring_sq(r)[t & (r->sq_entries - 1)];
		/* acquire: pairs with the consumer's release of this slot */
		uint64_t seq = gs_load_acq64(&s->seq);

		if (seq == t) {
			if (gs_cas64(&r->sq_tail, &t, t + 1)) {
				gs_sq_fill(s, t, e);
				return 0;
			}
			/* lost the race: t was reloaded by the CAS */
		} else if (seq < t) {
			return -11;	/* slot still holds last lap's request: full */
		} else {
			t = gs_load_rlx64(&r->sq_tail);
		}
	}
}

/*
 * Non-blocking pop from the slots @sq (@mask + 1 of them) with head counter
 * @head: 1 with *e filled, 0 if empty.  The geometry comes from the caller,
 * not from the ring header: a poller serving another process's ring copies
 * it once (gs_q_ring_add()) and trusts only its copy.  @tries > 0 bounds the
 * retries after losing a race (a producer that rewrites seq words or the
 * head could otherwise keep the consumer here); 0 retries until decided.
 */
GS_HD int gs_sq_try_pop_at(struct gs_sq_slot *sq, uint32_t mask, uint64_t *head,
			   struct gs_sqe *e, unsigned tries)
{
	uint64_t t = gs_load_rlx64(head);

	for (;;) {
		struct gs_sq_slot *s = &sq[t & mask];
		/* acquire: pairs with gs_sq_fill's release; the sqe body is complete */
		uint64_t seq = gs_load_acq64(&s->seq);

		if (seq == t + 1) {
			if (gs_cas64(head, &t, t + 1)) {
				*e = s->sqe;
				/* release: our copy is done before a producer reuses the slot */
				gs_store_rel64(&s->seq, t + mask + 1);
				return 1;
			}
		} else if (seq <= t) {
			return 0;	/* producer t has not filled it yet: empty */
		} else {
			t = gs_load_rlx64(head);
		}
		if (tries && !--tries)
			return 0;
	}
}

/* Non-blocking pop for consumers (pollers): 1 with *e filled, 0 if empty. */
GS_HD int gs_sq_try_pop(struct gs_ring *r, struct gs_sqe *e)
{
	return gs_sq_try_pop_at(gs_ring_sq(r), r->sq_entries - 1, &r->sq_head, e, 0);
}

/*
 * After a push (CPU producers): 1 when a poller may be asleep, so the
 * producer must kick it (gs_q_kick() or a write to gs_q_kick_fd()).
 */
GS_HD int gs_sq_need_kick(struct gs_ring *r)
{
	/*
	 * seq_cst fence: orders our slot's seq store (the push) before the
	 * sleepers load.  The poller stores sleepers, fences, then re-checks
	 * the ring, so one of the two sees the other (Dekker).
	 */
	gs_fence();
	return gs_load_rlx32(&r->sleepers) != 0;
}

/* Requests pushed but not yet popped (a hint: racy by nature). */
GS_HD uint64_t gs_sq_pending(struct gs_ring *r)
{
	uint64_t h = gs_load_rlx64(&r->sq_head), t = gs_load_rlx64(&r->sq_tail);

	return t > h ? t - h : 0;
}

/* The slot at the head is filled (geometry as in gs_sq_try_pop_at()): a
 * consumer's "work waiting" test that believes no count a producer keeps. */
GS_HD int gs_sq_ready_at(struct gs_sq_slot *sq, uint32_t mask, uint64_t *head)
{
	uint64_t t = gs_load_rlx64(head);

	return gs_load_rlx64(&sq[t & mask].seq) == t + 1;
}

/* Completion queue: same scheme, cqes instead of sqes; geometry and
 * @tries as in gs_sq_try_pop_at().  0, or -11 (-EAGAIN) when full. */
GS_HD int gs_cq_try_push_at(struct gs_cq_slot *cq, uint32_t mask, uint64_t *tail,
			    const struct gs_cqe *c, unsigned tries)
{
	uint64_t t = gs_load_rlx64(tail);

	for (;;) {
		struct gs_cq_slot *s = &cq[t & mask];
		uint64_t seq = gs_load_acq64(&s->seq);	/* acquire: consumer done with it */

		if (seq == t) {
			if (gs_cas64(tail, &t, t + 1)) {
				s->cqe = *c;
				/* release: the cqe body before the seq that publishes it */
				gs_store_rel64(&s->seq, t + 1);
				return 0;
			}
		} else if (seq < t) {
			return -11;
		} else {
			t = gs_load_rlx64(tail);
		}
		if (tries && !--tries)
			return -11;
	}
}

GS_HD int gs_cq_try_push(struct gs_ring *r, const struct gs_cqe *c)
{
	return gs_cq_try_push_at(gs_ring_cq(r), r->cq_entries - 1, &r->cq_tail, c, 0);
}

GS_HD int gs_cq_try_pop(struct gs_ring *r, struct gs_cqe *c)
{
	uint64_t t = gs_load_rlx64(&r->cq_head);

	for (;;) {
		struct gs_cq_slot *s = &gs_ring_cq(r)[t & (r->cq_entries - 1)];
		uint64_t seq = gs_load_acq64(&s->seq);	/* acquire: pairs with push */

		if (seq == t + 1) {
			if (gs_cas64(&r->cq_head, &t, t + 1)) {
				*c = s->cqe;
				/* release: copy done before a producer refills the slot */
				gs_store_rel64(&s->seq, t + r->cq_entries);
				return 1;
			}
		} else if (seq <= t) {
			return 0;
		} else {
			t = gs_load_rlx64(&r->cq_head);
		}
	}
}

/* Completion words: the submitter arms, the poller completes. */
GS_HD void gs_cw_arm(struct gs_ring *r, uint32_t i)
{
	gs_ring_cw(r)[i].state = 0;
}

GS_HD void gs_cw_complete(struct gs_cword *w, int64_t res)
{
	w->res = res;
	/* release: res is visible before state says done */
	gs_store_rel32(&w->state, 1);
}

/* 1 and *res set when done, 0 while pending. */
GS_HD int gs_cw_poll(struct gs_ring *r, uint32_t i, int64_t *res)
{
	struct gs_cword *w = &gs_ring_cw(r)[i];

	/* acquire: pairs with gs_cw_complete's release of state */
	if (!gs_load_acq32(&w->state))
		return 0;
	*res = w->res;
	return 1;
}

#endif /* GSTORE_RING_H */
