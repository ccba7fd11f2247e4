/* SPDX-License-Identifier: MIT */
/*
 * gpuq internals: the queue, its pollers and the ring set they serve.
 *
 * Threads and ownership:
 *  - Each poller thread owns one backend queue (struct gs_bq), its request
 *    pool and its counters; nothing else touches them except the fields
 *    marked "shared" below, which are atomics.
 *  - The ring set is copy-on-write: q->lock serialises writers, pollers load
 *    q->rings with acquire and publish the generation they saw in
 *    p->seen_gen; a writer frees an old set only once every poller has moved
 *    past it (or is outside its loop: seen_gen == GEN_OFFLINE).
 *  - Poller 0 listens on the kick eventfd and is the only poller that ever
 *    sets ring->sleepers; the others are woken by a poller that sees backlog
 *    (grow), by their own completions, or by a flush barrier.
 */
#ifndef GS_GPUQ_INTERNAL_H
#define GS_GPUQ_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "gstore_q.h"
#include "backend.h"

#define GS_Q_MAX_REGIONS	64	/* gs_q_register_buffer() regions */
#define GS_Q_MAX_POLLERS	64
#define GEN_OFFLINE		UINT64_MAX
#define GS_POLLER_CQN		8	/* rings whose cq waiters a round wakes at once */	/* poller holds no ring-set pointer */

/* Poller states (p->state). */
enum { PS_RUN, PS_SLEEP, PS_PARKED, PS_EXIT };

/*
 * A bounded ring's allowed device ranges (gs_q_ring_set_bounds()),
 * normalised: sorted, disjoint, adjacent ranges of equal permission merged.
 * Immutable once published; replaced whole (qring.bounds) and freed after
 * every poller has passed a loop top (ring_gen, as the ring set).
 */
struct qbounds {
	uint32_t n;
	uint32_t perms;		/* union of b[].perm: no GS_Q_BOUND_WRITE, no flush */
	uint32_t par;		/* qring.admitted[] slot its requests count in */
	struct qbound {
		uint64_t start, end;	/* device bytes [start, end) */
		uint32_t perm;		/* GS_Q_BOUND_* */
	} b[];
};

/*
 * One ring served by the pollers.  The geometry (slot arrays, masks, ncw)
 * is copied here at gs_q_ring_add() and never read from the ring header
 * again: another process may rewrite that header at any time.  Only the
 * head/tail counters and slot seq words are read from shared memory, and
 * only ever masked into the slot arrays.
 */
struct qring {
	struct gs_ring *r;
	struct gs_sq_slot *sq;
	struct gs_cq_slot *cq;
	struct gs_cword *cw;
	uint32_t sq_mask, cq_mask;
	uint32_t ncw;		/* completion words */
	uint32_t flags;		/* GS_RING_* */
	char *buf_base;		/* GS_SQE_BUF_OFF region */
	size_t buf_len;
	int internal;		/* the in-process ring: GS_SQE_CB allowed */
	/* another process's ring: requests checked against bounds, buffers only
	 * in the region, cqes that find the cq full dropped (and counted) */
	int bounded;
	struct qbounds *bounds;	/* shared: acquire/release; NULL: refuse all */
	/* shared: requests in flight that a table of each parity let through;
	 * a table is replaced only once the other parity's count is back to 0 */
	uint64_t admitted[2];
	uint32_t dead;		/* shared: gs_q_ring_del() under way, cqes dropped */
	uint64_t inflight;	/* shared: popped requests not yet completed */
};

struct ringset {
	unsigned n;
	unsigned npolled;	/* rings flagged GS_RING_POLLED */
	struct qring *r[];
};

/* A popped request while the poller owns it. */
struct preq {
	struct gs_bio bio;
	struct gs_sqe sqe;
	struct qring *qr;
	int64_t res;		/* result while waiting for cq space */
	uint64_t bar;		/* flush: barrier ticket it waits for */
	uint8_t wpar;		/* write: barrier parity it was counted in */
	int8_t bpar;		/* bounded ring: qring.admitted[] slot, -1: none */
	struct preq *next;	/* free list, flush wait list, cq overflow list */
};

struct gs_poller_stats {
	uint64_t reqs, read_bytes, write_bytes, errors, submits, sleeps;
	uint64_t denied, cq_dropped;
};

struct poller {
	struct gs_q *q;
	unsigned idx;
	pthread_t th;
	int efd;		/* wake eventfd (poller 0: the kick fd) */
	struct gs_bq *bq;

	/* owner-only state */
	struct preq *reqs, *free;
	struct gs_bio **sub;	/* popped, not yet accepted by the backend */
	unsigned nsub;
	struct gs_bio **done;
	int64_t *res;
	uint32_t depth;
	struct preq *flushq;	/* flushes waiting for the write barrier */
	struct preq *cqovf;	/* completions waiting for cq space */
	struct {
		struct qring *qr;
		unsigned n;
	} cqn[GS_POLLER_CQN];	/* rings that got cqes this round */
	unsigned ncqn;
	int refill;		/* woke a cq waiter this round: expect new requests */
	uint32_t wcnt[2];	/* writes in flight per barrier parity */
	uint8_t wpar;		/* parity new writes are counted in */
	uint64_t bar_seen;	/* q->bar_req value of the last flip */
	uint64_t bar_target;	/* barrier the old parity stands for */
	unsigned rr;		/* round-robin start in the ring set */
	int init_ret;
	uint32_t ready;		/* set once init_ret is final */

	/* shared, on their own line: read by other threads */
	uint64_t seen_gen __attribute__((aligned(64)));
	uint64_t bar_done;	/* barriers this poller has drained */
	uint32_t state;		/* PS_* */
	uint32_t inflight;	/* in the backend (stats) */
	struct gs_poller_stats st;	/* relaxed atomics, written by owner */
} __attribute__((aligned(64)));

struct region {
	char *addr;
	size_t len;
	int index;		/* backend index or -1 */
};

struct gs_q {
	const struct gs_backend_ops *ops;
	struct gs_bdev *bd;
	struct gs_q_geom geom;
	uint32_t flags;
	uint32_t depth;
	uint32_t min_pollers, max_pollers;
	uint32_t spin_ns;	/* pollers' spin window ceiling */
	uint64_t sync_spin_ns;	/* shared hint: current spin of sync waiters */
	uint64_t idle_ns;
	int kick_fd;		/* == pollers[0].efd */
	int is_fault;

	pthread_mutex_t lock;	/* ring-set writers, regions, fault spec */
	struct ringset *rings;	/* shared: acquire/release */
	uint64_t ring_gen;	/* shared: bumped after each publish */

	struct region regions[GS_Q_MAX_REGIONS];
	uint32_t nregions;	/* shared: release after the entry is written */

	struct gs_ring *iring;	/* internal ring for the in-process helpers */
	struct qring *iqr;

	uint64_t bar_req __attribute__((aligned(64)));	/* shared: flush barriers asked */
	uint32_t nactive;	/* shared: pollers not parked */
	uint32_t stopping;	/* shared */
	uint64_t last_grow_ns;	/* shared: rate limit for waking more pollers */

	uint32_t npollers;
	struct poller *pollers;

	/* shared, relaxed atomics: reads done on the caller's thread (gs_q_pread_sync) */
	struct gs_poller_stats sync_st __attribute__((aligned(64)));
};

static inline uint64_t gs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * Adaptive spin window (pollers and synchronous waiters): double on a hit
 * (from 1 us, up to @max), halve on a miss (to 0 below 2 us).
 */
static inline uint64_t spin_adapt(uint64_t spin, int hit, uint64_t max)
{
	if (!hit)
		return spin < 2000 ? 0 : spin / 2;
	spin = spin ? spin * 2 : 1000;
	return spin > max ? max : spin;
}

/* poller.c */
int gs_pollers_start(struct gs_q *q);
void gs_pollers_stop(struct gs_q *q);
void gs_poller_wake(struct poller *p);
void gs_pollers_wake_all(struct gs_q *q);

/* ring.c */
int gs_ring_snapshot(struct gs_ring *r, size_t bytes, struct gs_ring *h);
void gs_futex_wake(uint32_t *word, int shared);
int gs_futex_wait(uint32_t *word, uint32_t val, int shared, int64_t timeout_ns);

/* bounds.c */
int gs_bounds_build(const struct gs_q_bound *b, unsigned n, struct qbounds **out);
int gs_bounds_check(const struct qbounds *qb, uint64_t off, uint64_t len, uint32_t need);

/* fault.c */
int gs_fault_set(struct gs_bdev *bd, const char *spec);

/* pool.c: gs_q_fault() of a pool ("mK:SPEC" for member K, else all) */
int gs_pool_fault(struct gs_bdev *bd, const char *spec);

#endif /* GS_GPUQ_INTERNAL_H */
