/* SPDX-License-Identifier: MIT */
/*
 * NVMe I/O queue pairs driven by many threads at once, CPU threads or CUDA
 * threads with the same code (BaM's scheme; static inline, __host__
 * __device__): the BaM cache's GS_BAM_NVME mode (gstore_cuda_bam.h), the
 * nvme backend's pollers, and their CPU tests.
 *
 * The queue memory (SQ of 64-byte commands, CQ of 16-byte completions) and
 * the two doorbells belong to a controller (gstore_nvme.ko mappings, or the
 * software controller); the bookkeeping lives in memory the caller provides
 * (gs_nvmeq_state_bytes()).  At most nslots commands are in flight: beyond
 * that gs_nvmeq_submit() waits and the try_ variants return -EAGAIN.
 *
 * Three ways to complete, not to be mixed on one queue:
 *  - gs_nvmeq_poll/wait: each submitter looks for its own command;
 *  - gs_nvmeq_collect/wait_collected: one waiter at a time collects for all
 *    (queues far from their waiters: a CQ in host memory, GPU waiters);
 *  - gs_nvmeq_reap/reap_many: one consumer in CQ order (a poller, which may
 *    batch its submissions with gs_nvmeq_try_queue + gs_nvmeq_publish).
 *
 * How it works (tickets, positions, publishing, the collector):
 * docs/ARCHITECTURE.md, "NVMe queue pairs from many threads".
 */
#ifndef GSTORE_NVMEQ_H
#define GSTORE_NVMEQ_H

#include <stddef.h>
#include <stdint.h>

#include "gstore_atomic.h"

/* NVMe submission queue entry (NVM command set fields). */
struct gs_nvme_cmd {
	uint8_t opc;
	uint8_t flags;
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2, cdw3;
	uint64_t mptr;
	uint64_t prp1, prp2;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

/* NVMe completion queue entry. */
struct gs_nvme_cqe {
	uint32_t dw0, dw1;
	uint16_t sq_head, sq_id;
	uint16_t cid;
	uint16_t status;	/* bit 0: phase; bits 1..15: status field */
};

GS_STATIC_ASSERT(sizeof(struct gs_nvme_cmd) == 64, "NVMe SQE is 64 bytes");
GS_STATIC_ASSERT(sizeof(struct gs_nvme_cqe) == 16, "NVMe CQE is 16 bytes");

enum {
	GS_NVME_CMD_FLUSH = 0x00,
	GS_NVME_CMD_WRITE = 0x01,
	GS_NVME_CMD_READ = 0x02,
};

#define GS_NVMEQ_MAX_SLOTS	32768u	/* command ids must tell laps apart */
#define GS_NVMEQ_BATCH		16	/* CQEs a collector loads at once */

struct gs_nvmeq {
	/* read-mostly line */
	struct gs_nvme_cmd *sq;		/* qsize entries */
	struct gs_nvme_cqe *cq;		/* qsize entries */
	uint32_t *sq_db, *cq_db;	/* doorbells (MMIO) */
	uint64_t *turn;			/* [nslots] */
	uint32_t *sq_mark, *cq_mark;	/* [qsize] */
	uint64_t *done;			/* [nslots] collected: ticket completed in slot */
	uint32_t *cst;			/* [nslots] collected: its status field */
	uint32_t nslots;		/* power of two */
	uint32_t qsize;			/* nslots + 1 */
	uint8_t pad0[GS_CACHELINE - 8];

	/* tickets: every submitter */
	uint64_t ticket;
	uint8_t pad1[GS_CACHELINE - 8];
	/* SQ tail and its lock: the publishing thread */
	uint64_t sq_tail;
	uint64_t sq_lock;
	uint8_t pad2[GS_CACHELINE - 16];
	/* CQ head and its lock, SQ head learned from CQEs: the head mover */
	uint64_t cq_head;
	uint64_t cq_lock;
	uint64_t sq_head;
	uint8_t pad3[GS_CACHELINE - 24];
};

/*
 * Back off in a wait loop.  On the CPU, after a short spin, yield: waiters
 * may outnumber cores, and the thread they wait for (the one holding the
 * lock or owning the entry at the head) needs the core.
 */
GS_HD void gs_nvmeq_relax(uint32_t *spins)
{
#if defined(__CUDA_ARCH__)
	(void)spins;
	gs_cpu_relax();
#else
	if (++*spins < 64)
		gs_cpu_relax();
	else
		sched_yield();
#endif
}

/* Back off in a collected wait: nanosleep up to 2 us on the GPU (thousands of
 * waiters), gs_nvmeq_relax() on the CPU. */
GS_HD void gs_nvmeq_backoff(uint32_t *ns)
{
#if defined(__CUDA_ARCH__)
	*ns = *ns < 64 ? 64 : *ns < 2048 ? *ns * 2 : 2048;
	__nanosleep(*ns);
#else
	gs_nvmeq_relax(ns);
#endif
}

/* The CQE's last dword (cid, phase, status); acquire: the entry body is read
 * after the phase bit said it is new. */
GS_HD uint32_t gs_nvmeq_dw3(struct gs_nvme_cqe *e)
{
	return gs_load_acq32((uint32_t *)&e->cid);
}

/* ---- setup ---- */

/* Bytes of bookkeeping (turn counters, completion words, marks) for @nslots. */
GS_HD size_t gs_nvmeq_state_bytes(uint32_t nslots)
{
	return 2 * (size_t)nslots * sizeof(uint64_t) + (size_t)nslots * sizeof(uint32_t) +
	       2 * (size_t)(nslots + 1) * sizeof(uint32_t);
}

/* Entries the controller's SQ and CQ must have for @nslots. */
GS_HD uint32_t gs_nvmeq_qsize(uint32_t nslots)
{
	return nslots + 1;
}

/*
 * Set up @q over queue memory @sq / @cq of gs_nvmeq_qsize(nslots) entries
 * (the CQ zeroed: phase 0), doorbells @sq_db / @cq_db and @state of
 * gs_nvmeq_state_bytes(nslots).  The controller's queues must be fresh
 * (tail, head 0).  Returns 0 or -22 (-EINVAL).
 */
GS_HD int gs_nvmeq_init(struct gs_nvmeq *q, uint32_t nslots, void *sq, void *cq,
			uint32_t *sq_db, uint32_t *cq_db, void *state)
{
	uint32_t i;

	if (nslots < 2 || nslots > GS_NVMEQ_MAX_SLOTS || (nslots & (nslots - 1)))
		return -22;
	q->sq = (struct gs_nvme_cmd *)sq;
	q->cq = (struct gs_nvme_cqe *)cq;
	q->sq_db = sq_db;
	q->cq_db = cq_db;
	q->turn = (uint64_t *)state;
	q->done = q->turn + nslots;
	q->cst = (uint32_t *)(q->done + nslots);
	q->sq_mark = q->cst + nslots;
	q->cq_mark = q->sq_mark + nslots + 1;
	q->nslots = nslots;
	q->qsize = nslots + 1;
	q->ticket = q->sq_tail = q->sq_lock = 0;
	q->cq_head = q->cq_lock = q->sq_head = 0;
	for (i = 0; i < nslots; i++) {
		q->turn[i] = i;
		q->done[i] = UINT64_MAX;	/* no ticket: not done */
		q->cst[i] = 0;
	}
	for (i = 0; i <= nslots; i++)
		q->sq_mark[i] = q->cq_mark[i] = 0;
	return 0;
}

/* ---- submission ---- */

/* Publish every contiguous marked SQ position from the tail (lock held). */
GS_HD void gs_nvmeq_move_tail(struct gs_nvmeq *q)
{
	uint64_t tail = q->sq_tail, head = gs_load_acq64(&q->sq_head), n = tail;

	/* the head bound cannot bind (see the file comment); it guards the device */
	while (n - head < q->nslots && gs_load_acq32(&q->sq_mark[n % q->qsize])) {
		gs_store_rlx32(&q->sq_mark[n % q->qsize], 0);
		n++;
	}
	if (n != tail) {
		gs_store_mmio32(q->sq_db, (uint32_t)(n % q->qsize));
		gs_store_rel64(&q->sq_tail, n);
	}
}

/* Write the command of ticket @t (its turn has come) and mark it ready. */
GS_HD void gs_nvmeq_write(struct gs_nvmeq *q, uint64_t t, const struct gs_nvme_cmd *c)
{
	uint32_t pos = (uint32_t)(t % q->qsize);

	q->sq[pos] = *c;
	q->sq[pos].cid = (uint16_t)t;
	/* release: the command is written before a mover can publish it */
	gs_store_rel32(&q->sq_mark[pos], 1);
}

/* Until ticket @t is published: try to be the thread that moves the tail. */
GS_HD void gs_nvmeq_publish_ticket(struct gs_nvmeq *q, uint64_t t)
{
	uint32_t spins = 0;

	/*
	 * Done when the tail has passed t, not when t's mark is clear: the mark
	 * belongs to a position, and ticket t + qsize may set it again before
	 * this thread looks (it gets its turn once t + qsize - nslots completes,
	 * which may be before t's submitter runs again): that submitter then
	 * spun forever (seen with 2 slots and 8 threads on 2 CPUs).
	 */
	while (gs_load_acq64(&q->sq_tail) <= t) {
		if (gs_trylock64(&q->sq_lock)) {
			gs_nvmeq_move_tail(q);
			/* release: tail and marks are updated before the next holder */
			gs_store_rel64(&q->sq_lock, 0);
		}
		gs_nvmeq_relax(&spins);
	}
}

GS_HD void gs_nvmeq_fill(struct gs_nvmeq *q, uint64_t t, const struct gs_nvme_cmd *c)
{
	gs_nvmeq_write(q, t, c);
	gs_nvmeq_publish_ticket(q, t);
}

/*
 * Submit @c (its cid is set here) and return its ticket.  Blocks while all
 * nslots commands are in flight: someone must be completing them.
 */
GS_HD uint64_t gs_nvmeq_submit(struct gs_nvmeq *q, const struct gs_nvme_cmd *c)
{
	uint64_t t = gs_faa64(&q->ticket, 1);
	uint32_t spins = 0;

	/* acquire: the previous user of the slot is done with it */
	while (gs_load_acq64(&q->turn[t & (q->nslots - 1)]) != t)
		gs_nvmeq_relax(&spins);
	gs_nvmeq_fill(q, t, c);
	return t;
}

/* Non-blocking submit: 0 and *ticket, or -11 (-EAGAIN) when the slot of the
 * next ticket is still busy (nslots in flight). */
GS_HD int gs_nvmeq_try_submit(struct gs_nvmeq *q, const struct gs_nvme_cmd *c, uint64_t *ticket)
{
	uint64_t t = gs_load_rlx64(&q->ticket);

	for (;;) {
		/* acquire: pairs with the completer's release of the slot */
		if (gs_load_acq64(&q->turn[t & (q->nslots - 1)]) != t)
			return -11;
		if (gs_cas64(&q->ticket, &t, t + 1))
			break;
	}
	gs_nvmeq_fill(q, t, c);
	*ticket = t;
	return 0;
}

/*
 * Batching for a single submitter (a poller): gs_nvmeq_try_queue() writes
 * a command without publishing it; gs_nvmeq_publish() then publishes every
 * queued command with one doorbell write.  Not to be mixed with other
 * submitters on the same queue.
 */
GS_HD int gs_nvmeq_try_queue(struct gs_nvmeq *q, const struct gs_nvme_cmd *c, uint64_t *ticket)
{
	uint64_t t = q->ticket;

	/* acquire: pairs with the completer's release of the slot */
	if (gs_load_acq64(&q->turn[t & (q->nslots - 1)]) != t)
		return -11;
	gs_nvmeq_write(q, t, c);
	gs_store_rel64(&q->ticket, t + 1);
	*ticket = t;
	return 0;
}

GS_HD void gs_nvmeq_publish(struct gs_nvmeq *q)
{
	uint64_t t = gs_load_rlx64(&q->ticket);

	if (t != gs_load_acq64(&q->sq_tail))
		gs_nvmeq_publish_ticket(q, t - 1);
}

/* ---- completion ---- */

/* Expected phase of absolute CQ index @i. */
GS_HD uint32_t gs_nvmeq_phase(const struct gs_nvmeq *q, uint64_t i)
{
	return ((i / q->qsize) & 1) ^ 1;
}

/* The SQ head @sqh moved on to position @h, as a CQE reports it (heads never go back). */
GS_HD uint64_t gs_nvmeq_sq_head_at(const struct gs_nvmeq *q, uint64_t sqh, uint32_t h)
{
	if (h >= q->qsize)
		return sqh;	/* a bogus field: keep what we had */
	return sqh + (h + q->qsize - (uint32_t)(sqh % q->qsize)) % q->qsize;
}

/* Consume every contiguous marked CQ entry from the head (lock held). */
GS_HD void gs_nvmeq_move_head(struct gs_nvmeq *q)
{
	uint64_t head = q->cq_head, n = head, sqh = q->sq_head;

	while (n - head < q->qsize && gs_load_acq32(&q->cq_mark[n % q->qsize])) {
		uint32_t pos = (uint32_t)(n % q->qsize);

		/* intact until the doorbell below; CQEs are taken in order */
		sqh = gs_nvmeq_sq_head_at(q, sqh, q->cq[pos].sq_head);
		gs_store_rlx32(&q->cq_mark[pos], 0);
		n++;
	}
	if (n != head) {
		gs_store_rel64(&q->sq_head, sqh);
		gs_store_mmio32(q->cq_db, (uint32_t)(n % q->qsize));
		gs_store_rel64(&q->cq_head, n);
	}
}

/* Entry at absolute index @i was copied: mark it, see the head pass it. */
GS_HD void gs_nvmeq_consume(struct gs_nvmeq *q, uint64_t i)
{
	uint32_t pos = (uint32_t)(i % q->qsize), spins = 0;

	/* release: our copy of the entry is done before the head may pass it */
	gs_store_rel32(&q->cq_mark[pos], 1);
	/* the head, not the mark: entry i + qsize may mark the position again
	 * before we look (see gs_nvmeq_publish_ticket) */
	while (gs_load_acq64(&q->cq_head) <= i) {
		if (gs_trylock64(&q->cq_lock)) {
			gs_nvmeq_move_head(q);
			/* release: head, marks and sq_head before the next holder */
			gs_store_rel64(&q->cq_lock, 0);
		}
		gs_nvmeq_relax(&spins);
	}
}

/*
 * Look once for the completion of ticket @t.  Returns 1 with *out filled
 * (the slot is then free for ticket t + nslots), 0 if not there yet.
 */
GS_HD int gs_nvmeq_poll(struct gs_nvmeq *q, uint64_t t, struct gs_nvme_cqe *out)
{
	uint16_t cid = (uint16_t)t;
	uint64_t head = gs_load_acq64(&q->cq_head), i;

	for (i = head; i - head < q->qsize; i++) {
		struct gs_nvme_cqe *e = &q->cq[i % q->qsize];
		uint32_t dw3 = gs_nvmeq_dw3(e);

		if (((dw3 >> 16) & 1) != gs_nvmeq_phase(q, i))
			return 0;	/* not posted yet (or a stale head: retry later) */
		if ((uint16_t)dw3 == cid) {
			*out = *e;
			out->cid = cid;
			out->status = (uint16_t)(dw3 >> 16);
			gs_nvmeq_consume(q, i);
			/* release: the slot's next user sees a clean queue */
			gs_store_rel64(&q->turn[t & (q->nslots - 1)], t + q->nslots);
			return 1;
		}
	}
	return 0;
}

/* Wait for ticket @t; returns the NVMe status field (0: success). */
GS_HD uint16_t gs_nvmeq_wait(struct gs_nvmeq *q, uint64_t t, struct gs_nvme_cqe *out)
{
	uint32_t spins = 0;

	while (!gs_nvmeq_poll(q, t, out))
		gs_nvmeq_relax(&spins);
	return out->status >> 1;
}

/*
 * Collected completions.  Be the collector if nobody is: load the phase
 * words of the next GS_NVMEQ_BATCH CQ entries at once, take the run that
 * is posted, learn the SQ head from its last entry, move the CQ head (one
 * doorbell write), then hand out the results: cst[p], then done[p] = the
 * ticket that owns slot p (its turn).  Up to @rounds batches.  Returns the
 * entries taken, or -1 when another thread collects.
 */
GS_HD int gs_nvmeq_collect(struct gs_nvmeq *q, int rounds)
{
	uint64_t head, sqh;
	int got = 0;

	if (!gs_trylock64(&q->cq_lock))
		return -1;
	head = q->cq_head;
	sqh = q->sq_head;
	while (rounds-- > 0) {
		uint32_t dw3[GS_NVMEQ_BATCH];
		int k = 0, i;

		/* relaxed: all in flight at once; one acquire fence below for the run */
		for (i = 0; i < GS_NVMEQ_BATCH; i++)
			dw3[i] = gs_load_fenced32((uint32_t *)&q->cq[(head + i) % q->qsize].cid);
		while (k < GS_NVMEQ_BATCH && ((dw3[k] >> 16) & 1) == gs_nvmeq_phase(q, head + k))
			k++;
		if (!k)
			break;
		gs_fence_acq();
		/* the SQ head of the run's last entry: CQEs come in order, heads never go
		 * back (the fence above orders this read after the post) */
		sqh = gs_nvmeq_sq_head_at(q, sqh,
					  *(volatile uint16_t *)&q->cq[(head + k - 1) % q->qsize].sq_head);
		/* the entries are copied (dw3[]): the controller may reuse them */
		gs_store_rel64(&q->sq_head, sqh);
		gs_store_mmio32(q->cq_db, (uint32_t)((head + k) % q->qsize));
		gs_store_rel64(&q->cq_head, head + k);
		for (i = 0; i < k; i++) {
			uint32_t p = (dw3[i] & 0xffff) & (q->nslots - 1);
			/* the slot's owner: it waits, so its turn is still its ticket */
			uint64_t t = gs_load_rlx64(&q->turn[p]);

			gs_store_rlx32(&q->cst[p], dw3[i] >> 17);
			/* release: the status before the word that says done */
			gs_store_rel64(&q->done[p], t);
		}
		head += k;
		got += k;
		if (k < GS_NVMEQ_BATCH)
			break;
	}
	/* release: head and sq_head before the next holder */
	gs_store_rel64(&q->cq_lock, 0);
	return got;
}

/*
 * Wait for ticket @t on a collected queue: collect when nobody does, else
 * back off.
 * Returns the NVMe status field (0: success); the slot is free afterwards.
 */
GS_HD uint16_t gs_nvmeq_wait_collected(struct gs_nvmeq *q, uint64_t t)
{
	uint32_t p = (uint32_t)(t & (q->nslots - 1)), st, ns = 0;

	/* acquire: pairs with the collector's release of done[p] */
	while (gs_load_acq64(&q->done[p]) != t)
		if (gs_nvmeq_collect(q, 4) <= 0)
			gs_nvmeq_backoff(&ns);
	st = gs_load_acq32(&q->cst[p]);
	/* release: the slot's next user (ticket t + nslots) may submit now */
	gs_store_rel64(&q->turn[p], t + q->nslots);
	return (uint16_t)st;
}

/*
 * Single consumer: take the next completion in CQ order.  Returns 1 with
 * *out and *slot (t % nslots of the command) filled, 0 if none is posted.
 */
GS_HD int gs_nvmeq_reap(struct gs_nvmeq *q, struct gs_nvme_cqe *out, uint32_t *slot)
{
	uint64_t i = gs_load_acq64(&q->cq_head);
	struct gs_nvme_cqe *e = &q->cq[i % q->qsize];
	uint32_t dw3 = gs_nvmeq_dw3(e), p;

	if (((dw3 >> 16) & 1) != gs_nvmeq_phase(q, i))
		return 0;
	*out = *e;
	out->cid = (uint16_t)dw3;
	out->status = (uint16_t)(dw3 >> 16);
	gs_nvmeq_consume(q, i);
	p = out->cid & (q->nslots - 1);
	*slot = p;
	/* release: only this consumer moves turns, so a plain add is enough */
	gs_store_rel64(&q->turn[p], gs_load_rlx64(&q->turn[p]) + q->nslots);
	return 1;
}

/*
 * Single consumer, batched: take up to @max completions in CQ order and move
 * the CQ head once for all of them.  Returns how many; out[i] and slot[i]
 * as for gs_nvmeq_reap().
 */
GS_HD int gs_nvmeq_reap_many(struct gs_nvmeq *q, struct gs_nvme_cqe *out, uint32_t *slot,
			     uint32_t max)
{
	uint64_t head = gs_load_acq64(&q->cq_head);
	uint32_t n = 0, k, spins = 0;

	while (n < max && n < q->nslots) {
		struct gs_nvme_cqe *e = &q->cq[(head + n) % q->qsize];
		uint32_t dw3 = gs_nvmeq_dw3(e);

		if (((dw3 >> 16) & 1) != gs_nvmeq_phase(q, head + n))
			break;
		out[n] = *e;
		out[n].cid = (uint16_t)dw3;
		out[n].status = (uint16_t)(dw3 >> 16);
		/* release: our copy is done before the head may pass the entry */
		gs_store_rel32(&q->cq_mark[(head + n) % q->qsize], 1);
		n++;
	}
	if (!n)
		return 0;
	while (!gs_trylock64(&q->cq_lock))
		gs_nvmeq_relax(&spins);
	gs_nvmeq_move_head(q);
	/* release: head, marks and sq_head before the next holder */
	gs_store_rel64(&q->cq_lock, 0);
	for (k = 0; k < n; k++) {
		uint32_t p = out[k].cid & (q->nslots - 1);

		slot[k] = p;
		/* release: only this consumer moves turns */
		gs_store_rel64(&q->turn[p], gs_load_rlx64(&q->turn[p]) + q->nslots);
	}
	return (int)n;
}

/* Is a completion posted at the head (a hint for waiting)? */
GS_HD int gs_nvmeq_ready(struct gs_nvmeq *q)
{
	uint64_t i = gs_load_acq64(&q->cq_head);

	return ((gs_nvmeq_dw3(&q->cq[i % q->qsize]) >> 16) & 1) == gs_nvmeq_phase(q, i);
}

/* ---- commands ---- */

/* NVMe status field (cqe.status >> 1) to -errno. */
GS_HD int gs_nvme_status_errno(uint16_t sf)
{
	uint32_t sct = (sf >> 8) & 7, sc = sf & 0xff;

	if (!sf)
		return 0;
	if (sct == 0) {
		switch (sc) {
		case 0x01: return -95;	/* invalid opcode: -EOPNOTSUPP */
		case 0x02: return -22;	/* invalid field: -EINVAL */
		case 0x0b: return -19;	/* invalid namespace: -ENODEV */
		case 0x80: return -34;	/* LBA out of range: -ERANGE */
		case 0x81: return -28;	/* capacity exceeded: -ENOSPC */
		}
	}
	return -5;	/* -EIO: media, path and everything else */
}

/* Fill a read or write of @nlb blocks at @slba (PRPs set by the caller). */
GS_HD void gs_nvme_rw(struct gs_nvme_cmd *c, uint8_t opc, uint32_t nsid, uint64_t slba,
		      uint32_t nlb, uint64_t prp1, uint64_t prp2)
{
	struct gs_nvme_cmd z = GS_ZERO;

	*c = z;
	c->opc = opc;
	c->nsid = nsid;
	c->prp1 = prp1;
	c->prp2 = prp2;
	c->cdw10 = (uint32_t)slba;
	c->cdw11 = (uint32_t)(slba >> 32);
	c->cdw12 = nlb - 1;
}

#endif /* GSTORE_NVMEQ_H */
