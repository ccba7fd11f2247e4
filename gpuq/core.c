// SPDX-License-Identifier: MIT
/*
 * The I/O core's public face: open/close a queue, the ring set, registered
 * buffers, the in-process helpers (sync and callback I/O over an internal
 * ring), kicks, statistics and fault control.  The poller threads that do
 * the work live in poller.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gpuq_internal.h"
#include "gs_log.h"

#define DEF_DEPTH	128
#define MIN_AUTO_DEPTH	16	/* an auto cap never leaves a poller fewer slots */
#define DEF_SPIN_US	50
#define DEF_ENTRIES	1024
#define DEF_IDLE_MS	100
#define SYNC_SPIN_NS	20000	/* sync helpers spin this long before futex-waiting */

static int is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

/* ---- ring set (copy-on-write, see gpuq_internal.h) ---- */

/* Wait until no poller can still hold a ring set older than @gen. */
static void rings_quiesce(struct gs_q *q, uint64_t gen)
{
	unsigned i;

	for (i = 0; i < q->npollers; i++) {
		struct poller *p = &q->pollers[i];

		/* acquire: pairs with the poller's release of seen_gen */
		while (__atomic_load_n(&p->seen_gen, __ATOMIC_ACQUIRE) < gen)
			usleep(50);
	}
}

/* Publish @ns in place of the current set; called with q->lock held. */
static void rings_publish(struct gs_q *q, struct ringset *ns)
{
	struct ringset *old = q->rings;
	uint64_t gen;

	/* release: the new set's contents before its pointer */
	__atomic_store_n(&q->rings, ns, __ATOMIC_RELEASE);
	/*
	 * release: a poller that reads the new generation also reads the new
	 * set (it loads ring_gen, then q->rings).
	 */
	gen = __atomic_add_fetch(&q->ring_gen, 1, __ATOMIC_SEQ_CST);
	if (q->pollers)
		rings_quiesce(q, gen);
	free(old);
}

static int rings_add(struct gs_q *q, struct qring *qr)
{
	struct ringset *os = q->rings, *ns;
	unsigned n = os ? os->n : 0, i;

	for (i = 0; i < n; i++)
		if (os->r[i]->r == qr->r)
			return -EEXIST;
	ns = malloc(sizeof(*ns) + (n + 1) * sizeof(ns->r[0]));
	if (!ns)
		return -ENOMEM;
	ns->n = n + 1;
	ns->npolled = os ? os->npolled : 0;
	if (n)
		memcpy(ns->r, os->r, n * sizeof(ns->r[0]));
	ns->r[n] = qr;
	if (qr->flags & GS_RING_POLLED)
		ns->npolled++;
	rings_publish(q, ns);
	return 0;
}

static struct qring *rings_del(struct gs_q *q, struct gs_ring *r)
{
	struct ringset *os = q->rings, *ns;
	struct qring *qr = NULL;
	unsigned i, j = 0;

	if (!os)
		return NULL;
	ns = malloc(sizeof(*ns) + os->n * sizeof(ns->r[0]));
	if (!ns)
		return NULL;
	ns->npolled = 0;
	for (i = 0; i < os->n; i++) {
		if (os->r[i]->r == r) {
			qr = os->r[i];
			continue;
		}
		ns->r[j++] = os->r[i];
		if (os->r[i]->flags & GS_RING_POLLED)
			ns->npolled++;
	}
	ns->n = j;
	if (!qr) {
		free(ns);
		return NULL;
	}
	rings_publish(q, ns);
	return qr;
}

/* The poller's private copy of the ring's geometry, from the snapshot @h. */
static void qring_geom(struct qring *qr, struct gs_ring *ring, const struct gs_ring *h)
{
	qr->r = ring;
	qr->sq = (struct gs_sq_slot *)((char *)ring + h->sq_off);
	qr->cq = (struct gs_cq_slot *)((char *)ring + h->cq_off);
	qr->cw = (struct gs_cword *)((char *)ring + h->cw_off);
	qr->sq_mask = h->sq_entries - 1;
	qr->cq_mask = h->cq_entries - 1;
	qr->ncw = h->ncw;
	qr->flags = h->flags;
}

static int ring_add(struct gs_q *q, struct gs_ring *ring, size_t ring_bytes, void *buf_base,
		    size_t buf_len, int bounded)
{
	struct gs_ring h;
	struct qring *qr;
	int ret;

	if (!q || !ring || (!buf_base && buf_len))
		return -EINVAL;
	ret = gs_ring_snapshot(ring, ring_bytes, &h);
	if (ret)
		return ret;
	qr = calloc(1, sizeof(*qr));
	if (!qr)
		return -ENOMEM;
	qring_geom(qr, ring, &h);
	qr->buf_base = buf_base;
	qr->buf_len = buf_len;
	qr->bounded = bounded;
	pthread_mutex_lock(&q->lock);
	ret = rings_add(q, qr);
	pthread_mutex_unlock(&q->lock);
	if (ret) {
		free(qr);
		return ret;
	}
	/* poller 0 may sleep without having set sleepers on the new ring */
	gs_q_kick(q);
	return 0;
}

int gs_q_ring_add(struct gs_q *q, struct gs_ring *ring, void *buf_base, size_t buf_len)
{
	return ring_add(q, ring, 0, buf_base, buf_len, 0);
}

int gs_q_ring_add_bounded(struct gs_q *q, struct gs_ring *ring, size_t ring_bytes,
			  void *buf_base, size_t buf_len)
{
	if (ring_bytes < sizeof(*ring))
		return -EINVAL;
	return ring_add(q, ring, ring_bytes, buf_base, buf_len, 1);
}

int gs_q_ring_set_bounds(struct gs_q *q, struct gs_ring *ring, const struct gs_q_bound *b,
			 unsigned n)
{
	struct qbounds *nb, *old = NULL;
	struct ringset *rs;
	int ret;

	if (!q || !ring)
		return -EINVAL;
	ret = gs_bounds_build(b, n, &nb);
	if (ret)
		return ret;
	ret = -ENOENT;
	pthread_mutex_lock(&q->lock);
	rs = q->rings;
	for (unsigned i = 0; rs && i < rs->n; i++) {
		struct qring *qr = rs->r[i];

		if (qr->r != ring)
			continue;
		if (!qr->bounded) {
			ret = -EINVAL;
			break;
		}
		old = qr->bounds;
		nb->par = old ? old->par ^ 1 : 0;
		/* release: the table's contents before the pointer pollers load */
		__atomic_store_n(&qr->bounds, nb, __ATOMIC_RELEASE);
		nb = NULL;
		/* a poller may still check a request against @old: wait until every
		 * poller has passed a loop top (as for a replaced ring set) */
		if (q->pollers)
			rings_quiesce(q, __atomic_add_fetch(&q->ring_gen, 1, __ATOMIC_SEQ_CST));
		/* then for the requests @old let through: after we return, the
		 * ranges it had and the new one lacks are touched by nobody (an fs
		 * may end the lease behind them); acquire: pairs with complete() */
		while (old && __atomic_load_n(&qr->admitted[old->par], __ATOMIC_ACQUIRE))
			usleep(50);
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&q->lock);
	free(old);
	free(nb);
	return ret;
}

int gs_q_ring_del(struct gs_q *q, struct gs_ring *ring)
{
	struct qring *qr;

	if (!q || !ring || ring == q->iring)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	qr = rings_del(q, ring);
	pthread_mutex_unlock(&q->lock);
	if (!qr)
		return -ENOENT;
	/* release: pollers holding its completions for a full cq drop them now
	 * (nobody may be left to drain it) instead of waiting for space */
	__atomic_store_n(&qr->dead, 1, __ATOMIC_RELEASE);
	gs_pollers_wake_all(q);
	/* acquire: the pollers' last completions into the ring are done */
	while (__atomic_load_n(&qr->inflight, __ATOMIC_ACQUIRE))
		usleep(100);
	free(qr->bounds);
	free(qr);
	return 0;
}

/* ---- open / close ---- */

static const struct gs_backend_ops *pick_backend(const struct gs_q_params *p, int *is_fault)
{
	const char *name = gs_backend_name(p);

	/* a pool wraps each member in the fault backend itself (gs_pool_fault) */
	if (!strncmp(name, "pool", 4) || (!p->backend && gs_pool_is_member(p->path))) {
		*is_fault = p->fault != NULL;
		return &gs_backend_pool;
	}
	*is_fault = p->fault || !strncmp(name, "fault", 5);
	if (*is_fault)
		return &gs_backend_fault;
	return gs_backend_find(name);
}

static int iring_create(struct gs_q *q, uint32_t entries)
{
	size_t bytes = gs_ring_bytes(entries, 1, 0);
	struct gs_ring h;
	int ret;

	q->iring = aligned_alloc(GS_CACHELINE, (bytes + GS_CACHELINE - 1) & ~(size_t)63);
	if (!q->iring)
		return -ENOMEM;
	gs_ring_init(q->iring, bytes, entries, 1, 0, 0);
	q->iqr = calloc(1, sizeof(*q->iqr));
	if (!q->iqr) {
		ret = -ENOMEM;
		goto free_ring;
	}
	ret = gs_ring_snapshot(q->iring, 0, &h);
	if (ret)
		goto free_qr;
	qring_geom(q->iqr, q->iring, &h);
	q->iqr->internal = 1;
	ret = rings_add(q, q->iqr);
	if (ret)
		goto free_qr;
	return 0;
free_qr:
	free(q->iqr);
free_ring:
	free(q->iring);
	return ret;
}

/* Per poller depth under the in-flight cap (see gs_q_params.max_inflight). */
static uint32_t capped_depth(struct gs_q *q, uint32_t max_inflight)
{
	uint32_t per;

	if (!max_inflight) {
		if (!q->geom.dev_depth)
			return q->depth;
		/* auto: half the device's slots, never below MIN_AUTO_DEPTH a poller */
		per = q->geom.dev_depth / 2 / q->max_pollers;
		if (per < MIN_AUTO_DEPTH)
			per = MIN_AUTO_DEPTH;
	} else {
		per = max_inflight / q->max_pollers;
		if (!per)
			per = 1;
	}
	return per < q->depth ? per : q->depth;
}

int gs_q_open(struct gs_q **qp, const struct gs_q_params *p)
{
	struct gs_q *q;
	uint32_t entries;
	int ret;

	if (!qp || !p || !p->path)
		return -EINVAL;
	*qp = NULL;
	entries = p->ring_entries ? p->ring_entries : DEF_ENTRIES;
	if (!is_pow2(entries) || p->max_pollers > GS_Q_MAX_POLLERS ||
	    p->min_pollers > GS_Q_MAX_POLLERS || (p->queue_depth && p->queue_depth > 32768))
		return -EINVAL;
	if (p->flags & ~(uint32_t)(GS_Q_RDONLY | GS_Q_BUFFERED | GS_Q_CREATE))
		return -EINVAL;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->flags = p->flags;
	q->depth = p->queue_depth ? p->queue_depth : DEF_DEPTH;
	q->min_pollers = p->min_pollers ? p->min_pollers : 1;
	q->max_pollers = p->max_pollers ? p->max_pollers : q->min_pollers;
	if (q->max_pollers < q->min_pollers)
		q->max_pollers = q->min_pollers;
	q->spin_ns = (p->spin_us ? p->spin_us : DEF_SPIN_US) * 1000u;
	q->sync_spin_ns = SYNC_SPIN_NS;
	q->idle_ns = (uint64_t)(p->idle_ms ? p->idle_ms : DEF_IDLE_MS) * 1000000u;
	q->kick_fd = -1;
	pthread_mutex_init(&q->lock, NULL);

	q->ops = pick_backend(p, &q->is_fault);
	if (!q->ops) {
		gs_err("gpuq: unknown backend '%s'", p->backend);
		ret = -ENODEV;
		goto free_q;
	}
	ret = q->ops->open(&q->bd, p);
	if (ret)
		goto free_q;
	ret = q->ops->geometry(q->bd, &q->geom);
	if (ret)
		goto close_bd;
	q->depth = capped_depth(q, p->max_inflight);
	q->geom.queue_depth = q->depth;
	q->geom.nr_queues = q->max_pollers;
	if (!q->geom.nr_devices)
		q->geom.nr_devices = 1;

	ret = iring_create(q, entries);
	if (ret)
		goto close_bd;
	ret = gs_pollers_start(q);
	if (ret)
		goto free_iring;
	*qp = q;
	return 0;

free_iring:
	free(q->rings);
	free(q->iqr);
	free(q->iring);
close_bd:
	q->ops->close(q->bd);
free_q:
	pthread_mutex_destroy(&q->lock);
	free(q);
	return ret;
}

void gs_q_close(struct gs_q *q)
{
	struct ringset *rs;
	unsigned i;

	if (!q)
		return;
	gs_pollers_stop(q);
	rs = q->rings;
	for (i = 0; rs && i < rs->n; i++) {
		free(rs->r[i]->bounds);
		free(rs->r[i]);
	}
	free(rs);
	free(q->iring);
	q->ops->close(q->bd);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

int gs_q_geometry(struct gs_q *q, struct gs_q_geom *g)
{
	if (!q || !g)
		return -EINVAL;
	*g = q->geom;
	return 0;
}

int gs_q_register_buffer(struct gs_q *q, void *addr, size_t len)
{
	struct region *rg = NULL;
	int idx = -1, ret = 0;
	uint32_t i;

	if (!q || !addr || !len)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	for (i = 0; i < q->nregions && !rg; i++)
		if (!q->regions[i].addr)
			rg = &q->regions[i];
	if (!rg && q->nregions < GS_Q_MAX_REGIONS)
		rg = &q->regions[q->nregions];
	if (!rg) {
		ret = -ENOSPC;
		goto unlock;
	}
	if (q->ops->register_buffer) {
		idx = q->ops->register_buffer(q->bd, addr, len);
		/* no fixed slot left (or pinning refused): plain I/O still works */
		if (idx < 0)
			idx = -1;
	}
	__atomic_store_n(&rg->addr, (char *)addr, __ATOMIC_RELAXED);
	__atomic_store_n(&rg->len, len, __ATOMIC_RELAXED);
	/* release: addr and len before the index that makes pollers use them */
	__atomic_store_n(&rg->index, idx, __ATOMIC_RELEASE);
	if (rg == &q->regions[q->nregions])
		/* release: the entry before the count that exposes it */
		__atomic_store_n(&q->nregions, q->nregions + 1, __ATOMIC_RELEASE);
unlock:
	pthread_mutex_unlock(&q->lock);
	return ret;
}

int gs_q_unregister_buffer(struct gs_q *q, void *addr)
{
	struct region *rg = NULL;
	uint64_t gen;
	uint32_t i;
	int idx;

	if (!q || !addr)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	for (i = 0; i < q->nregions && !rg; i++)
		if (q->regions[i].addr == addr)
			rg = &q->regions[i];
	if (!rg) {
		pthread_mutex_unlock(&q->lock);
		return -ENOENT;
	}
	idx = rg->index;
	/* release: pollers that see -1 no longer pick the fixed slot */
	__atomic_store_n(&rg->index, -1, __ATOMIC_RELEASE);
	/* wait until no poller can be in the middle of a lookup that saw it */
	gen = __atomic_add_fetch(&q->ring_gen, 1, __ATOMIC_SEQ_CST);
	rings_quiesce(q, gen);
	if (idx >= 0 && q->ops->unregister_buffer)
		q->ops->unregister_buffer(q->bd, idx);
	__atomic_store_n(&rg->len, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&rg->addr, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* ---- kicks ---- */

void gs_q_kick(struct gs_q *q)
{
	uint64_t one = 1;

	if (write(q->kick_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the poller is awake anyway */
	}
}

int gs_q_kick_fd(struct gs_q *q)
{
	return q ? q->kick_fd : -EINVAL;
}

/* ---- in-process helpers ---- */

static int check_io(struct gs_q *q, uint8_t op, uint64_t len, uint64_t off, const void *buf)
{
	if (op >= GS_OP_NR)
		return -EINVAL;
	if (op == GS_OP_FLUSH)
		return 0;
	if (!buf && len)
		return -EFAULT;
	if (len > q->geom.max_io)
		return -EINVAL;
	if (off > q->geom.capacity || len > q->geom.capacity - off)
		return -EINVAL;
	if (op == GS_OP_WRITE && (q->flags & GS_Q_RDONLY))
		return -EBADF;
	return 0;
}

/* Push onto the internal ring; waits (kicking) while it is full. */
static void ipush(struct gs_q *q, const struct gs_sqe *e)
{
	unsigned spins = 0;

	while (gs_sq_try_push(q->iring, e)) {
		gs_q_kick(q);
		if (++spins > 64)
			usleep(20);
		else
			gs_cpu_relax();
	}
}

static void ikick(struct gs_q *q)
{
	if (gs_sq_need_kick(q->iring))
		gs_q_kick(q);
}

/*
 * A synchronous request: a callback io whose completion word has three
 * states, so the completer can tell whether anyone sleeps on it with one
 * exchange and never touches the (stack) object after releasing it.
 */
enum { SW_PENDING, SW_SLEEPING, SW_DONE };
struct sync_io {
	struct gs_q_io io;
	uint32_t state;
	int64_t res;
};

static void sync_done(struct gs_q_io *io, int64_t res)
{
	struct sync_io *s = (struct sync_io *)io;

	s->res = res;
	/* acq_rel: res before DONE; and learn whether the submitter sleeps */
	if (__atomic_exchange_n(&s->state, SW_DONE, __ATOMIC_ACQ_REL) == SW_SLEEPING)
		gs_futex_wake(&s->state, 0);	/* a stale address at worst: harmless */
}

/*
 * Spin for the queue's current sync window, then sleep.  The window adapts
 * like the pollers' (spin_adapt()): it doubles when the result came while
 * spinning and halves when it did not, so waits on a slow device do not
 * burn a CPU each.
 */
static int64_t sync_wait(struct gs_q *q, struct sync_io *s)
{
	uint64_t spin = __atomic_load_n(&q->sync_spin_ns, __ATOMIC_RELAXED);
	uint64_t end = gs_now_ns() + spin;
	unsigned n = 0;
	uint32_t st;
	int slept = 0;

	/* acquire: pairs with sync_done's exchange; res is visible after DONE */
	while ((st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) != SW_DONE) {
		/* the clock only every 32 turns: it costs more than a pause */
		if (!slept && (++n % 32 || gs_now_ns() < end)) {
			gs_cpu_relax();
			continue;
		}
		slept = 1;
		if (st == SW_PENDING &&
		    !__atomic_compare_exchange_n(&s->state, &st, SW_SLEEPING, 0,
						 __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			continue;
		gs_futex_wait(&s->state, SW_SLEEPING, 0, -1);
	}
	/* relaxed: a hint shared by all waiters; lost updates do not matter */
	__atomic_store_n(&q->sync_spin_ns, spin_adapt(spin, !slept, SYNC_SPIN_NS),
			 __ATOMIC_RELAXED);
	return s->res;
}

static int64_t sync_io(struct gs_q *q, uint8_t op, void *buf, size_t len, uint64_t off)
{
	struct sync_io s = {
		.io = { .op = op, .len = (uint32_t)len, .off = off, .buf = buf,
			.done = sync_done },
		.state = SW_PENDING,
	};
	struct gs_sqe e = {
		.op = op, .flags = GS_SQE_CB, .len = (uint32_t)len, .off = off,
		.buf = (uintptr_t)buf, .tag = (uintptr_t)&s.io,
	};
	int ret;

	if (!q)
		return -EINVAL;
	if (len > UINT32_MAX)
		return -EINVAL;
	ret = check_io(q, op, len, off, buf);
	if (ret)
		return ret;
	if (op != GS_OP_FLUSH && !len)
		return 0;
	ipush(q, &e);
	ikick(q);
	return sync_wait(q, &s);
}

ssize_t gs_q_pread(struct gs_q *q, void *buf, size_t len, uint64_t off)
{
	return sync_io(q, GS_OP_READ, buf, len, off);
}

ssize_t gs_q_pwrite(struct gs_q *q, const void *buf, size_t len, uint64_t off)
{
	return sync_io(q, GS_OP_WRITE, (void *)buf, len, off);
}

int gs_q_flush(struct gs_q *q)
{
	int64_t r = sync_io(q, GS_OP_FLUSH, NULL, 0, 0);

	return r < 0 ? (int)r : 0;
}

int gs_q_submit(struct gs_q *q, struct gs_q_io **ios, unsigned n)
{
	unsigned i;
	int ret;

	if (!q || (!ios && n) || n > INT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!ios[i] || !ios[i]->done)
			return -EINVAL;
		ret = check_io(q, ios[i]->op, ios[i]->len, ios[i]->off, ios[i]->buf);
		if (ret)
			return ret;
	}
	for (i = 0; i < n; i++) {
		struct gs_sqe e = {
			.op = ios[i]->op, .flags = GS_SQE_CB, .len = ios[i]->len,
			.off = ios[i]->off, .buf = (uintptr_t)ios[i]->buf,
			.tag = (uintptr_t)ios[i],
		};

		ipush(q, &e);
	}
	ikick(q);
	return (int)n;
}

/* ---- statistics and faults ---- */

void gs_q_get_stats(struct gs_q *q, struct gs_q_stats *st)
{
	struct ringset *rs;
	unsigned i;

	memset(st, 0, sizeof(*st));
	if (!q)
		return;
	for (i = 0; i < q->npollers; i++) {
		struct poller *p = &q->pollers[i];

		st->reqs += __atomic_load_n(&p->st.reqs, __ATOMIC_RELAXED);
		st->read_bytes += __atomic_load_n(&p->st.read_bytes, __ATOMIC_RELAXED);
		st->write_bytes += __atomic_load_n(&p->st.write_bytes, __ATOMIC_RELAXED);
		st->errors += __atomic_load_n(&p->st.errors, __ATOMIC_RELAXED);
		st->submits += __atomic_load_n(&p->st.submits, __ATOMIC_RELAXED);
		st->sleeps += __atomic_load_n(&p->st.sleeps, __ATOMIC_RELAXED);
		st->denied += __atomic_load_n(&p->st.denied, __ATOMIC_RELAXED);
		st->cq_dropped += __atomic_load_n(&p->st.cq_dropped, __ATOMIC_RELAXED);
		st->inflight += __atomic_load_n(&p->inflight, __ATOMIC_RELAXED);
	}
	st->reqs += __atomic_load_n(&q->sync_st.reqs, __ATOMIC_RELAXED);
	st->read_bytes += __atomic_load_n(&q->sync_st.read_bytes, __ATOMIC_RELAXED);
	st->errors += __atomic_load_n(&q->sync_st.errors, __ATOMIC_RELAXED);
	st->active_pollers = __atomic_load_n(&q->nactive, __ATOMIC_RELAXED);
	st->max_pollers = q->max_pollers;
	pthread_mutex_lock(&q->lock);
	rs = q->rings;
	/* the internal ring is not counted: rings are the external ones */
	st->rings = rs ? rs->n - 1 : 0;
	pthread_mutex_unlock(&q->lock);
}

int gs_q_fault(struct gs_q *q, const char *spec)
{
	if (!q || !spec)
		return -EINVAL;
	if (!q->is_fault)
		return -EOPNOTSUPP;
	if (q->ops == &gs_backend_pool)
		return gs_pool_fault(q->bd, spec);
	return gs_fault_set(q->bd, spec);
}

/*
 * A read the calling thread does itself when the backend can (no ring, no
 * poller, no wake-up); the others fall back to gs_q_pread().  Reads only:
 * writes stay on the pollers, which count them for the flush barrier.
 */
ssize_t gs_q_pread_sync(struct gs_q *q, void *buf, size_t len, uint64_t off)
{
	ssize_t r;
	int ret;

	if (!q || !q->ops->read_sync)
		return gs_q_pread(q, buf, len, off);
	if (len > UINT32_MAX)
		return -EINVAL;
	ret = check_io(q, GS_OP_READ, len, off, buf);
	if (ret)
		return ret;
	if (!len)
		return 0;
	r = q->ops->read_sync(q->bd, buf, len, off);
	if (r == -EOPNOTSUPP)
		return gs_q_pread(q, buf, len, off);
	__atomic_add_fetch(&q->sync_st.reqs, 1, __ATOMIC_RELAXED);
	if (r < 0)
		__atomic_add_fetch(&q->sync_st.errors, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&q->sync_st.read_bytes, (uint64_t)r, __ATOMIC_RELAXED);
	return r;
}
