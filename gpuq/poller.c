// SPDX-License-Identifier: MIT
/*
 * Poller threads: pop requests from every ring of the set, batch them into
 * the poller's own backend queue, deliver completions, and sleep when idle.
 *
 * Sleeping.  A poller spins after its last piece of work, then blocks in
 * the backend's wait(), which returns on a completion, on a write
 * to the poller's eventfd, or on a timeout.  Poller 0's eventfd is the kick
 * fd: before it blocks it sets ring->sleepers on every ring whose producers
 * can kick, issues a seq_cst fence and re-checks the rings; a producer
 * pushes, fences, and kicks only if it then sees sleepers != 0 (Dekker: one
 * of the two sees the other).  Rings flagged GS_RING_POLLED (GPU producers)
 * cannot kick, so while one is attached poller 0 sleeps at most 50 us,
 * doubling up to 2 ms while nothing arrives, and up to 10 ms once nothing
 * came for 100 ms (a timed wait costs 10-50 us of CPU in a VM, more under
 * load: 2 ms kept an idle queue at 0.5-2.2% of a core, 10 ms keeps it at a
 * fifth of that; the first request after a long pause waits up to 10 ms).
 *
 * The spin window adapts (up to spin_us): it doubles when work arrives
 * while spinning or soon after dozing off, and halves after a window that
 * found nothing, so a poller whose work comes slower than spin_us (a slow
 * disk, a sparse producer) stops burning CPU on spinning.
 *
 * Busy.  With BATCH_MIN or more requests in flight a poller does not spin
 * (completions will wake it anyway) and sleeps until a fraction of them
 * (1/BATCH_DIV) is ready: one wake-up, one round of deliveries and one
 * futex wake per cq for several requests.  No timeout (arming a timer costs
 * more than the batching saves in a VM): the requests in flight bound the
 * wait.  It leaves sleepers clear then, so producers do not kick; their
 * requests wait for that fraction of completions.  Right after
 * waking a producer blocked on its cq, though, the poller spins (within its
 * adaptive window) and then sleeps kickable until the refill arrives: it
 * comes within microseconds, and made to wait for the next batch it would
 * leave the device with fewer requests in flight.
 *
 * Scaling (CAM's dynamic core adjustment).  Pollers [0, min_pollers) never
 * park.  A poller that finds its queue full while rings still hold requests
 * is saturated: it wakes a sleeping poller or unparks a parked one (at most
 * one per GROW_NS).  A poller above min_pollers that had nothing to do for
 * idle_ms parks: it stops serving rings and blocks on its eventfd.
 *
 * Flush barrier.  A flush must follow every write popped before it, on any
 * poller.  Each poller counts its writes in flight in one of two parities.
 * Popping a flush takes a ticket from q->bar_req; every poller, at the top
 * of its loop, sees the new ticket, flips the parity new writes go to, and
 * once the old parity drains publishes bar_done = ticket.  The flush is
 * issued (IORING_OP_FSYNC/DATASYNC, NVMe FLUSH) when all pollers' bar_done
 * reached its ticket.  Pollers that sleep are woken for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "gpuq_internal.h"
#include "gs_log.h"

#define GROW_NS		1000000ull	/* at most one grow per ms */
#define POLL_MIN_US	50		/* sleep bound with a GPU ring attached */
#define POLL_MAX_US	2000
#define POLL_IDLE_US	10000		/* ... once idle for LONG_IDLE_NS */
#define LONG_IDLE_NS	100000000ull
#define RECHECK_US	50		/* sleep bound while a flush or cq post waits */
/* busy: sleep until inflight / BATCH_DIV completions (<= BATCH_MAX) */
#ifndef BATCH_MIN	/* -D overrides: for experiments with gstore-bench */
#define BATCH_MIN	16
#endif
#ifndef BATCH_DIV
#define BATCH_DIV	16
#endif
#define BATCH_MAX	32
/* a bounded ring's pops and cq pushes give up after this many lost races:
 * its producer can rewrite the counters and seq words they race on */
#define RING_TRIES	64

#define STAT_ADD(p, f, v) \
	__atomic_store_n(&(p)->st.f, __atomic_load_n(&(p)->st.f, __ATOMIC_RELAXED) + (v), \
			 __ATOMIC_RELAXED)

static void set_inflight(struct poller *p, uint32_t v)
{
	__atomic_store_n(&p->inflight, v, __ATOMIC_RELAXED);
}

void gs_poller_wake(struct poller *p)
{
	uint64_t one = 1;

	if (write(p->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: counter saturated, a wake is pending anyway */
	}
}

void gs_pollers_wake_all(struct gs_q *q)
{
	unsigned i;

	for (i = 0; i < q->npollers; i++)
		gs_poller_wake(&q->pollers[i]);
}

/* ---- completion delivery ---- */

static void rq_free(struct poller *p, struct preq *rq)
{
	rq->next = p->free;
	p->free = rq;
}

/* Tell CPU waiters on @r's cq that cqes arrived; 1 if someone was woken. */
static int cq_notify(struct gs_ring *r)
{
	/*
	 * seq_cst fence: our cqe pushes are ordered before the cq_waiters load;
	 * a waiter increments cq_waiters (seq_cst) before re-checking the cq.
	 */
	gs_fence();
	if (!__atomic_load_n(&r->cq_waiters, __ATOMIC_RELAXED))
		return 0;
	__atomic_fetch_add(&r->cq_futex, 1, __ATOMIC_RELEASE);
	gs_futex_wake(&r->cq_futex, 1);
	return 1;
}

/*
 * Remember that @qr's cq got a cqe: waiters are woken once per round.  The
 * request's hold on the ring (qr->inflight) is dropped after the wake, so
 * gs_q_ring_del() cannot free the ring under cq_notify().
 */
static void cq_note(struct poller *p, struct qring *qr)
{
	unsigned i;

	for (i = 0; i < p->ncqn; i++)
		if (p->cqn[i].qr == qr) {
			p->cqn[i].n++;
			return;
		}
	if (p->ncqn == GS_POLLER_CQN) {
		p->refill |= cq_notify(qr->r);
		/* release: our writes into the ring before gs_q_ring_del() frees it */
		__atomic_fetch_sub(&qr->inflight, 1, __ATOMIC_RELEASE);
		return;
	}
	p->cqn[p->ncqn].qr = qr;
	p->cqn[p->ncqn].n = 1;
	p->ncqn++;
}

static void cq_notify_all(struct poller *p)
{
	unsigned i;

	for (i = 0; i < p->ncqn; i++) {
		p->refill |= cq_notify(p->cqn[i].qr->r);
		/* release: as in cq_note() */
		__atomic_fetch_sub(&p->cqn[i].qr->inflight, p->cqn[i].n, __ATOMIC_RELEASE);
	}
	p->ncqn = 0;
}

/*
 * Returns 0 when delivered, -EAGAIN when the cq is full (retry later).  A
 * bounded ring's cqe that finds its cq full is dropped and counted instead,
 * and so is any cqe of a ring being deleted: neither may hold the request.
 */
static int deliver(struct poller *p, struct preq *rq, int64_t res)
{
	struct qring *qr = rq->qr;
	uint8_t fl = rq->sqe.flags;
	int posted = 0;

	if (fl & GS_SQE_CQE) {
		struct gs_cqe c = { .tag = rq->sqe.tag, .res = res };

		posted = !gs_cq_try_push_at(qr->cq, qr->cq_mask, &qr->r->cq_tail, &c,
					    qr->bounded ? RING_TRIES : 0);
		/* acquire: pairs with gs_q_ring_del()'s release of dead */
		if (!posted && !qr->bounded && !__atomic_load_n(&qr->dead, __ATOMIC_ACQUIRE))
			return -EAGAIN;
		if (!posted)
			STAT_ADD(p, cq_dropped, 1);
	}
	if ((fl & GS_SQE_CW) && rq->sqe.cw < qr->ncw) {
		struct gs_cword *w = &qr->cw[rq->sqe.cw];

		gs_cw_complete(w, res);
		/*
		 * seq_cst fence: state = done is ordered before the waiters load;
		 * gs_ring_cw_wait() increments waiters (seq_cst) before re-loading
		 * state.
		 */
		gs_fence();
		if (__atomic_load_n(&w->waiters, __ATOMIC_RELAXED))
			gs_futex_wake(&w->state, 1);
	}
	if ((fl & GS_SQE_CB) && qr->internal) {
		struct gs_q_io *io = (struct gs_q_io *)(uintptr_t)rq->sqe.tag;

		io->done(io, res);
	}
	if (posted)
		cq_note(p, qr);
	else
		/* release: our writes into the ring before gs_q_ring_del() frees it */
		__atomic_fetch_sub(&qr->inflight, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Keep each cq in order: once a cqe of a ring waits, later ones queue behind. */
static int ovf_waits(struct poller *p, struct preq *rq)
{
	struct preq *o;

	if (!(rq->sqe.flags & GS_SQE_CQE))
		return 0;
	for (o = p->cqovf; o; o = o->next)
		if (o->qr == rq->qr)
			return 1;
	return 0;
}

static void complete(struct poller *p, struct preq *rq, int64_t res)
{
	if (rq->bpar >= 0) {
		/* release: its I/O is over before gs_q_ring_set_bounds() sees 0 */
		__atomic_fetch_sub(&rq->qr->admitted[rq->bpar], 1, __ATOMIC_RELEASE);
		rq->bpar = -1;
	}
	STAT_ADD(p, reqs, 1);
	if (res < 0)
		STAT_ADD(p, errors, 1);
	else if (rq->sqe.op == GS_OP_READ)
		STAT_ADD(p, read_bytes, res);
	else if (rq->sqe.op == GS_OP_WRITE)
		STAT_ADD(p, write_bytes, res);

	if (ovf_waits(p, rq) || deliver(p, rq, res)) {
		struct preq **tail = &p->cqovf;

		rq->res = res;
		rq->next = NULL;
		while (*tail)
			tail = &(*tail)->next;
		*tail = rq;
		return;
	}
	rq_free(p, rq);
}

static int retry_overflow(struct poller *p)
{
	struct preq **pp = &p->cqovf, *rq;
	int n = 0;

	while ((rq = *pp)) {
		struct preq *o;
		int blocked = 0;

		/* an earlier cqe of the same ring still waits: keep the order */
		for (o = p->cqovf; o != rq && !blocked; o = o->next)
			blocked = o->qr == rq->qr;
		if (!blocked && deliver(p, rq, rq->res)) {
			if (!__atomic_load_n(&p->q->stopping, __ATOMIC_RELAXED)) {
				blocked = 1;
			} else {
				/* shutting down and nobody drains the cq: drop the cqe */
				rq->sqe.flags &= ~GS_SQE_CQE;
				continue;
			}
		}
		if (blocked) {
			pp = &rq->next;
			continue;
		}
		*pp = rq->next;
		rq_free(p, rq);
		n++;
	}
	return n;
}

static int reap(struct poller *p)
{
	struct gs_q *q = p->q;
	int n, i;

	/* even with nothing in flight: this also consumes the wake-up (kick) */
	n = q->ops->reap(p->bq, p->done, p->res, p->depth);
	if (n <= 0)
		return 0;
	set_inflight(p, p->inflight - n);
	for (i = 0; i < n; i++) {
		struct preq *rq = p->done[i]->priv;

		if (rq->sqe.op == GS_OP_WRITE)
			p->wcnt[rq->wpar]--;
		complete(p, rq, p->res[i]);
	}
	return n;
}

/* ---- flush barrier ---- */

static void barrier_step(struct poller *p)
{
	/* seq_cst: pairs with the flush popper's bar_req RMW and state load */
	uint64_t b = __atomic_load_n(&p->q->bar_req, __ATOMIC_SEQ_CST);

	if (b != p->bar_seen && !p->wcnt[p->wpar ^ 1]) {
		/* writes popped so far are in the current parity: it becomes old */
		p->wpar ^= 1;
		p->bar_seen = b;
		p->bar_target = b;
	}
	/* release: our writes' completions happen before the flush is issued */
	if (!p->wcnt[p->wpar ^ 1] && p->bar_done < p->bar_target)
		__atomic_store_n(&p->bar_done, p->bar_target, __ATOMIC_RELEASE);
}

/* A barrier step would make progress now (completions wake us otherwise). */
static int barrier_pending(struct poller *p)
{
	/* seq_cst: pairs with the flush popper's bar_req RMW and state load */
	uint64_t b = __atomic_load_n(&p->q->bar_req, __ATOMIC_SEQ_CST);

	if (p->wcnt[p->wpar ^ 1])
		return 0;
	return b != p->bar_seen || p->bar_done < p->bar_target;
}

static int barrier_reached(struct gs_q *q, uint64_t ticket)
{
	unsigned i;

	for (i = 0; i < q->npollers; i++)
		/* acquire: pairs with barrier_step's release */
		if (__atomic_load_n(&q->pollers[i].bar_done, __ATOMIC_ACQUIRE) < ticket)
			return 0;
	return 1;
}

static void flush_ticket(struct poller *p, struct preq *rq)
{
	struct gs_q *q = p->q;
	unsigned i;

	/* seq_cst RMW: ordered before the state loads below (Dekker with sleep) */
	rq->bar = __atomic_add_fetch(&q->bar_req, 1, __ATOMIC_SEQ_CST);
	rq->next = p->flushq;
	p->flushq = rq;
	for (i = 0; i < q->npollers; i++) {
		struct poller *o = &q->pollers[i];

		if (o != p && __atomic_load_n(&o->state, __ATOMIC_SEQ_CST) != PS_RUN)
			gs_poller_wake(o);
	}
}

static int issue_flushes(struct poller *p)
{
	struct preq **pp = &p->flushq;
	int stopping = __atomic_load_n(&p->q->stopping, __ATOMIC_RELAXED);
	int n = 0;

	while (*pp) {
		struct preq *rq = *pp;

		if (!stopping && !barrier_reached(p->q, rq->bar)) {
			pp = &rq->next;
			continue;
		}
		*pp = rq->next;
		p->sub[p->nsub++] = &rq->bio;
		n++;
	}
	return n;
}

/* ---- popping ---- */

static int region_index(struct gs_q *q, char *buf, uint32_t len)
{
	/* acquire: entries below the published count are initialised */
	uint32_t n = __atomic_load_n(&q->nregions, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++) {
		struct region *rg = &q->regions[i];
		/* acquire: pairs with gs_q_register_buffer()'s release of index;
		 * an entry is not reused before every poller passed a loop top */
		int idx = __atomic_load_n(&rg->index, __ATOMIC_ACQUIRE);
		char *a = __atomic_load_n(&rg->addr, __ATOMIC_RELAXED);
		size_t l = __atomic_load_n(&rg->len, __ATOMIC_RELAXED);

		if (idx >= 0 && buf >= a && buf + len <= a + l)
			return idx;
	}
	return -1;
}

/*
 * A bounded ring's request: inside the ring's bounds with the permission
 * its op needs (a flush needs write permission somewhere), its buffer an
 * offset into the ring's region.  0, or the -errno it completes with; the
 * refusal is counted.  An admitted request is counted in the table's parity
 * until it completes, so that replacing the table can wait for it.
 */
static int prep_bounded(struct poller *p, struct qring *qr, struct preq *rq)
{
	const struct gs_sqe *e = &rq->sqe;
	/* acquire: pairs with gs_q_ring_set_bounds()'s release of the table */
	const struct qbounds *qb = __atomic_load_n(&qr->bounds, __ATOMIC_ACQUIRE);
	uint32_t need = e->op == GS_OP_READ ? GS_Q_BOUND_READ : GS_Q_BOUND_WRITE;
	int ret = -EACCES;

	if (e->op == GS_OP_FLUSH) {
		if (qb && (qb->perms & GS_Q_BOUND_WRITE))
			ret = 0;
	} else if (!(e->flags & GS_SQE_BUF_OFF)) {
		ret = -EFAULT;	/* an address in our space: never from another process */
	} else {
		ret = gs_bounds_check(qb, e->off, e->len, need);
	}
	if (ret) {
		STAT_ADD(p, denied, 1);
		return ret;
	}
	/* relaxed: published to gs_q_ring_set_bounds() by our next seen_gen store */
	rq->bpar = (int8_t)qb->par;
	__atomic_fetch_add(&qr->admitted[qb->par], 1, __ATOMIC_RELAXED);
	return 0;
}

/* Validate a request; fills the bio.  0 or -errno. */
static int prep(struct poller *p, struct preq *rq)
{
	struct gs_q *q = p->q;
	struct gs_sqe *e = &rq->sqe;
	struct qring *qr = rq->qr;
	struct gs_bio *b = &rq->bio;
	char *buf = (char *)(uintptr_t)e->buf;

	if (e->op >= GS_OP_NR)
		return -EINVAL;
	if ((e->flags & GS_SQE_CB) && !qr->internal)
		return -EINVAL;
	if ((e->flags & GS_SQE_CW) && e->cw >= qr->ncw)
		return -EINVAL;
	memset(b, 0, sizeof(*b));
	b->op = e->op;
	b->buf_index = -1;
	b->priv = rq;
	if (qr->bounded) {
		int ret = prep_bounded(p, qr, rq);

		if (ret)
			return ret;
	}
	if (e->op == GS_OP_FLUSH)
		return 0;
	if (e->len > q->geom.max_io || e->off > q->geom.capacity ||
	    e->len > q->geom.capacity - e->off)
		return -EINVAL;
	if (e->op == GS_OP_WRITE && (q->flags & GS_Q_RDONLY))
		return -EBADF;
	if (e->flags & GS_SQE_BUF_OFF) {
		if (!qr->buf_base || e->buf > qr->buf_len || e->len > qr->buf_len - e->buf) {
			if (qr->bounded)
				STAT_ADD(p, denied, 1);
			return -EFAULT;
		}
		buf = qr->buf_base + e->buf;
	} else if (!buf) {
		return -EFAULT;
	}
	b->len = e->len;
	b->off = e->off;
	b->buf = buf;
	b->buf_index = region_index(q, buf, e->len);
	return 0;
}

static void take(struct poller *p, struct qring *qr, const struct gs_sqe *e)
{
	struct preq *rq = p->free;
	int ret;

	p->free = rq->next;
	rq->sqe = *e;
	rq->qr = qr;
	rq->bpar = -1;
	/* relaxed: published to gs_q_ring_del() by our next seen_gen release */
	__atomic_fetch_add(&qr->inflight, 1, __ATOMIC_RELAXED);
	ret = prep(p, rq);
	if (ret) {
		complete(p, rq, ret);
		return;
	}
	switch (e->op) {
	case GS_OP_FLUSH:
		flush_ticket(p, rq);
		return;
	case GS_OP_WRITE:
		rq->wpar = p->wpar;
		p->wcnt[p->wpar]++;
		break;
	}
	if (!e->len) {
		if (e->op == GS_OP_WRITE)
			p->wcnt[rq->wpar]--;
		complete(p, rq, 0);
		return;
	}
	p->sub[p->nsub++] = &rq->bio;
}

static void maybe_grow(struct poller *p)
{
	struct gs_q *q = p->q;
	uint64_t now = gs_now_ns();
	uint64_t last = __atomic_load_n(&q->last_grow_ns, __ATOMIC_RELAXED);
	unsigned i;

	if (q->max_pollers < 2 || now - last < GROW_NS ||
	    !__atomic_compare_exchange_n(&q->last_grow_ns, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	/* an active poller that dozed off is the cheapest help */
	for (i = 0; i < q->npollers; i++) {
		struct poller *o = &q->pollers[i];

		if (o != p && __atomic_load_n(&o->state, __ATOMIC_ACQUIRE) == PS_SLEEP) {
			gs_poller_wake(o);
			return;
		}
	}
	for (i = q->min_pollers; i < q->npollers; i++) {
		struct poller *o = &q->pollers[i];
		uint32_t st = PS_PARKED;

		if (__atomic_compare_exchange_n(&o->state, &st, PS_RUN, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED)) {
			__atomic_fetch_add(&q->nactive, 1, __ATOMIC_RELAXED);
			gs_poller_wake(o);
			return;
		}
	}
}

/* Requests wait in @qr (a hint).  A bounded ring's counters could claim
 * work forever: for it, only a filled slot at the head counts. */
static int ring_waiting(struct qring *qr)
{
	if (qr->bounded)
		return gs_sq_ready_at(qr->sq, qr->sq_mask, &qr->r->sq_head);
	return gs_sq_pending(qr->r) != 0;
}

/*
 * Each poller serves every ring, a queue's worth per ring and round, from a
 * start that moves by one each round and that the pollers spread over the
 * set (poller i of N from ring i * n / N): with several rings of one
 * producer (a gs_cuda's shards) two pollers then pop from different rings
 * rather than race for the same head.
 */
static int pop_round(struct poller *p, struct ringset *rs)
{
	unsigned n = rs->n, k, start = p->rr++ + (n ? p->idx * n / p->q->npollers : 0);
	int popped = 0, backlog = 0;

	for (k = 0; k < n; k++) {
		struct qring *qr = rs->r[(start + k) % n];
		unsigned tries = qr->bounded ? RING_TRIES : 0, budget = p->depth;
		struct gs_sqe e;

		/* at most a queue's worth per ring and round: requests refused at
		 * once free their slot, and a producer refilling as fast as we pop
		 * must not keep us from the other rings */
		while (p->free && budget-- &&
		       gs_sq_try_pop_at(qr->sq, qr->sq_mask, &qr->r->sq_head, &e, tries)) {
			take(p, qr, &e);
			popped++;
		}
		if (!p->free) {
			backlog = ring_waiting(qr);
			for (k++; !backlog && k < n; k++)
				backlog = ring_waiting(rs->r[(start + k) % n]);
			break;
		}
	}
	if (backlog)
		maybe_grow(p);
	return popped;
}

static int submit(struct poller *p)
{
	struct gs_q *q = p->q;
	int n, i;

	if (!p->nsub)
		return 0;
	n = q->ops->submit(p->bq, p->sub, p->nsub);
	STAT_ADD(p, submits, 1);
	if (n < 0) {
		/* the backend refused the batch: fail it rather than spin on it */
		for (i = 0; i < (int)p->nsub; i++) {
			struct preq *rq = p->sub[i]->priv;

			if (rq->sqe.op == GS_OP_WRITE)
				p->wcnt[rq->wpar]--;
			complete(p, rq, n);
		}
		p->nsub = 0;
		return 0;
	}
	set_inflight(p, p->inflight + n);
	if ((unsigned)n < p->nsub)
		memmove(p->sub, p->sub + n, (p->nsub - n) * sizeof(p->sub[0]));
	p->nsub -= n;
	return n;
}

/* ---- sleeping and parking ---- */

static void set_sleepers(struct ringset *rs, uint32_t v)
{
	unsigned i;

	for (i = 0; i < rs->n; i++)
		if (!(rs->r[i]->flags & GS_RING_POLLED))
			__atomic_store_n(&rs->r[i]->r->sleepers, v, __ATOMIC_RELAXED);
}

static int rings_pending(struct ringset *rs)
{
	unsigned i;

	for (i = 0; i < rs->n; i++)
		if (ring_waiting(rs->r[i]))
			return 1;
	return 0;
}

/*
 * Block in the backend.  Returns 1 if it slept, 0 if a last look found work.
 * The caller reloads the ring set afterwards: rings may have gone meanwhile.
 */
static int doze(struct poller *p, struct ringset *rs, unsigned nr, int64_t timeout_us)
{
	struct gs_q *q = p->q;
	/* batch waits end by themselves soon: producers need not kick */
	int kicked = p->idx == 0 && nr <= 1;

	/* seq_cst: a flush popper that then loads state sees we may sleep */
	__atomic_store_n(&p->state, PS_SLEEP, __ATOMIC_SEQ_CST);
	if (kicked)
		set_sleepers(rs, 1);
	/*
	 * seq_cst fence: sleepers (and state) are stored before we re-check the
	 * rings and bar_req; producers push, fence, load sleepers.
	 */
	gs_fence();
	if ((p->free && !__atomic_load_n(&q->stopping, __ATOMIC_RELAXED) && rings_pending(rs)) ||
	    barrier_pending(p)) {
		if (kicked)
			set_sleepers(rs, 0);
		__atomic_store_n(&p->state, PS_RUN, __ATOMIC_RELAXED);
		return 0;
	}
	/* release: we hold no ring-set pointer while asleep */
	__atomic_store_n(&p->seen_gen, GEN_OFFLINE, __ATOMIC_RELEASE);
	STAT_ADD(p, sleeps, 1);
	if (nr > 1 && q->ops->wait_nr)
		q->ops->wait_nr(p->bq, nr, timeout_us);
	else
		q->ops->wait(p->bq, timeout_us);
	__atomic_store_n(&p->state, PS_RUN, __ATOMIC_RELAXED);
	return 1 + kicked;
}

/* Parked: wait until a saturated poller unparks us or the queue stops. */
static void parked_wait(struct poller *p)
{
	struct gs_q *q = p->q;
	uint32_t st = PS_PARKED;

	/* release: we hold no ring-set pointer while parked */
	__atomic_store_n(&p->seen_gen, GEN_OFFLINE, __ATOMIC_RELEASE);
	for (;;) {
		/* consume the wake (a flush barrier's, an unpark's): nothing else
		 * is in flight, and an unreaped cqe would make wait() return at once */
		reap(p);
		/* nothing in flight: a barrier is drained as soon as we see it */
		barrier_step(p);
		/* seq_cst: pairs with the unparker's CAS and the flush popper's loads */
		if (__atomic_load_n(&p->state, __ATOMIC_SEQ_CST) != PS_PARKED ||
		    __atomic_load_n(&q->stopping, __ATOMIC_SEQ_CST))
			break;
		STAT_ADD(p, sleeps, 1);
		q->ops->wait(p->bq, -1);
	}
	/* stopping while parked: count ourselves active again for the books */
	if (__atomic_compare_exchange_n(&p->state, &st, PS_RUN, 0, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED))
		__atomic_fetch_add(&q->nactive, 1, __ATOMIC_RELAXED);
}

static void park(struct poller *p)
{
	uint32_t st = PS_RUN;

	if (!__atomic_compare_exchange_n(&p->state, &st, PS_PARKED, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return;
	__atomic_fetch_sub(&p->q->nactive, 1, __ATOMIC_RELAXED);
	parked_wait(p);
}

static int quiet(struct poller *p)
{
	return !p->inflight && !p->nsub && !p->flushq && !p->cqovf;
}

static void poller_loop(struct poller *p)
{
	struct gs_q *q = p->q;
	uint64_t idle_since = gs_now_ns(), now, doze_start = 0;
	uint64_t spin = q->spin_ns;	/* current spin window, <= spin_us */
	uint32_t poll_us = POLL_MIN_US;
	int clear_sleepers = 0, spinning = 0;

	for (;;) {
		struct ringset *rs;
		uint64_t gen;
		int64_t timeout;
		int work, stopping;
		unsigned nr;

		/* acquire: a new generation implies the new set (rings_publish) */
		gen = __atomic_load_n(&q->ring_gen, __ATOMIC_ACQUIRE);
		/* seq_cst: the writer's quiesce loop must not see us past an old set */
		__atomic_store_n(&p->seen_gen, gen, __ATOMIC_SEQ_CST);
		rs = __atomic_load_n(&q->rings, __ATOMIC_ACQUIRE);
		if (clear_sleepers) {
			set_sleepers(rs, 0);
			clear_sleepers = 0;
		}
		stopping = __atomic_load_n(&q->stopping, __ATOMIC_ACQUIRE);

		barrier_step(p);
		work = reap(p);
		work += retry_overflow(p);
		if (!stopping) {
			int popped = pop_round(p, rs);

			/* the refill came (or someone else's work): batch again */
			if (popped)
				p->refill = 0;
			work += popped;
		}
		work += issue_flushes(p);
		work += submit(p);
		cq_notify_all(p);
		barrier_step(p);

		now = gs_now_ns();
		if (work) {
			/* work while spinning, or soon after dozing off: spinning pays */
			if (spinning || (doze_start && now - doze_start < q->spin_ns))
				spin = spin_adapt(spin, 1, q->spin_ns);
			spinning = 0;
			doze_start = 0;
			idle_since = now;
			poll_us = POLL_MIN_US;
			continue;
		}
		doze_start = 0;
		if (stopping && quiet(p))
			break;
		/* busy pollers spin only while a refill is due (see "Busy" above) */
		if (now - idle_since < spin && (p->inflight < BATCH_MIN || p->refill)) {
			spinning = 1;
			gs_cpu_relax();
			continue;
		}
		if (spinning) {
			/* a whole window for nothing: spin less next time */
			spin = spin_adapt(spin, 0, q->spin_ns);
			spinning = 0;
		}
		if (p->idx >= q->min_pollers && quiet(p) && !stopping &&
		    now - idle_since >= q->idle_ns) {
			park(p);
			idle_since = gs_now_ns();
			continue;
		}

		timeout = -1;
		if (p->idx == 0 && rs->npolled) {
			uint32_t cap = now - idle_since > LONG_IDLE_NS ? POLL_IDLE_US : POLL_MAX_US;

			timeout = poll_us;
			poll_us = poll_us * 2 > cap ? cap : poll_us * 2;
		}
		if (p->flushq || p->cqovf || p->nsub || stopping)
			timeout = RECHECK_US;
		/* an extra poller with nothing in flight wakes up to park in time */
		if (p->idx >= q->min_pollers && timeout < 0 && quiet(p) &&
		    now - idle_since < q->idle_ns)
			timeout = (int64_t)(q->idle_ns - (now - idle_since)) / 1000 + 1;
		/*
		 * A producer we just woke will refill its slots within microseconds:
		 * sleep so that its kick wakes us, or the refill would wait a whole
		 * batch and the device would run with fewer requests in flight.
		 */
		nr = 1;
		if (p->inflight >= BATCH_MIN && timeout != RECHECK_US && !p->refill) {
			nr = p->inflight / BATCH_DIV;
			if (nr > BATCH_MAX)
				nr = BATCH_MAX;
		}
		if (nr == 1)
			doze_start = now;
		if (doze(p, rs, nr, timeout) == 2)
			clear_sleepers = 1;
	}
	__atomic_store_n(&p->seen_gen, GEN_OFFLINE, __ATOMIC_RELEASE);
	__atomic_store_n(&p->state, PS_EXIT, __ATOMIC_RELEASE);
}

/* ---- thread setup ---- */

static int poller_init(struct poller *p)
{
	struct gs_q *q = p->q;
	uint32_t i;

	p->depth = q->depth;
	p->reqs = calloc(p->depth, sizeof(*p->reqs));
	p->sub = calloc(p->depth, sizeof(*p->sub));
	p->done = calloc(p->depth, sizeof(*p->done));
	p->res = calloc(p->depth, sizeof(*p->res));
	if (!p->reqs || !p->sub || !p->done || !p->res)
		return -ENOMEM;
	for (i = 0; i < p->depth; i++)
		rq_free(p, &p->reqs[p->depth - 1 - i]);
	/* in the poller thread: backends may tie the queue to its creator */
	return q->ops->queue_create(q->bd, p->depth, p->efd, &p->bq);
}

static void *poller_main(void *arg)
{
	struct poller *p = arg;

	p->init_ret = poller_init(p);
	/* release: init_ret before ready; gs_pollers_start() waits for it */
	__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
	gs_futex_wake(&p->ready, 0);
	if (!p->init_ret && !__atomic_load_n(&p->q->stopping, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&p->state, __ATOMIC_SEQ_CST) == PS_PARKED)
			parked_wait(p);
		poller_loop(p);
	}
	__atomic_store_n(&p->seen_gen, GEN_OFFLINE, __ATOMIC_RELEASE);
	/* the queue is tied to this thread (SINGLE_ISSUER): tear it down here */
	if (p->bq) {
		p->q->ops->queue_destroy(p->bq);
		p->bq = NULL;
	}
	return NULL;
}

static void poller_free(struct poller *p)
{
	if (p->bq)
		p->q->ops->queue_destroy(p->bq);
	free(p->reqs);
	free(p->sub);
	free(p->done);
	free(p->res);
	if (p->efd >= 0)
		close(p->efd);
}

/*
 * Join a poller that was told to stop, waking it again every 50 ms: a wake
 * that its backend wait missed (seen twice under load, a uring poller asleep
 * in io_uring_enter after the stop's eventfd write; cause not found yet) must
 * not hang the close.  On a loaded machine a poller that was woken can simply
 * not have run for 50 ms, so the re-wakes are silent and one warning comes
 * only after JOIN_WARN_MS.
 */
#define JOIN_WARN_MS	2000

static void poller_join(struct poller *p)
{
	unsigned waited_ms = 0;

	for (;;) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(p->th, NULL, &ts) != ETIMEDOUT)
			return;
		waited_ms += 50;
		/* a backstop: a poller that slept through its stop is a lost wake */
		if (waited_ms == JOIN_WARN_MS)
			gs_warn("poller %u: not stopped after %u ms, still waking it",
				p->idx, waited_ms);
		gs_poller_wake(p);
	}
}

int gs_pollers_start(struct gs_q *q)
{
	struct poller *ps;
	unsigned i, n = q->max_pollers, started = 0;
	int ret = 0;

	ps = aligned_alloc(64, n * sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	memset(ps, 0, n * sizeof(*ps));
	for (i = 0; i < n; i++) {
		ps[i].q = q;
		ps[i].idx = i;
		ps[i].efd = -1;
		ps[i].state = i < q->min_pollers ? PS_RUN : PS_PARKED;
		ps[i].seen_gen = GEN_OFFLINE;
	}
	for (i = 0; i < n; i++) {
		ps[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (ps[i].efd < 0) {
			ret = -errno;
			goto free_fds;
		}
	}
	q->kick_fd = ps[0].efd;
	q->nactive = q->min_pollers;
	q->pollers = ps;
	q->npollers = n;

	for (i = 0; i < n; i++) {
		ret = -pthread_create(&ps[i].th, NULL, poller_main, &ps[i]);
		if (ret)
			break;
		started++;
		/* acquire: pairs with poller_main's release of ready */
		while (!__atomic_load_n(&ps[i].ready, __ATOMIC_ACQUIRE))
			gs_futex_wait(&ps[i].ready, 0, 0, -1);
		if (ps[i].init_ret) {
			ret = ps[i].init_ret;
			break;
		}
	}
	if (!ret)
		return 0;

	gs_err("gpuq: starting poller %u: %s", i, strerror(-ret));
	__atomic_store_n(&q->stopping, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < started; i++) {
		gs_poller_wake(&ps[i]);
		poller_join(&ps[i]);
	}
	q->npollers = 0;
	q->pollers = NULL;
free_fds:
	for (i = 0; i < n; i++)
		poller_free(&ps[i]);
	q->kick_fd = -1;
	free(ps);
	return ret;
}

void gs_pollers_stop(struct gs_q *q)
{
	unsigned i;

	__atomic_store_n(&q->stopping, 1, __ATOMIC_SEQ_CST);
	gs_pollers_wake_all(q);
	for (i = 0; i < q->npollers; i++)
		poller_join(&q->pollers[i]);
	for (i = 0; i < q->npollers; i++)
		poller_free(&q->pollers[i]);
	free(q->pollers);
	q->pollers = NULL;
	q->npollers = 0;
}
