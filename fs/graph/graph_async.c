// SPDX-License-Identifier: MIT
/*
 * The request/response queues of GraphSSD, on the host: a caller submits
 * many neighbour requests at once; the submit sorts them by page (the
 * engine's order key) and hands them to the graph's worker threads in
 * chunks; a worker answers a chunk under one read lock, so requests that
 * share a page cost one page read, and completes each request (a callback
 * on the worker, or onto the queue's completion list for gs_graph_reap).
 */
#include <errno.h>
#include <stdlib.h>

#include "graph_internal.h"

#define CHUNK		32	/* requests a worker takes at once ... */
#define CHUNK_DENSE	256	/* ... or more while they lie close together */
#define DEF_DEPTH	4096

struct chunk {
	struct chunk *next;
	struct gs_graph_queue *q;
	unsigned n;
	struct gs_graph_req *r[CHUNK_DENSE];
	uint64_t key[CHUNK_DENSE];	/* order keys (engines without one: vertices) */
	uint64_t v[CHUNK_DENSE];	/* vertex indices, GS_GRAPH_NONE: no such id */
};

struct gr_pool {
	struct gs_graph *g;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct chunk *head, *tail;
	bool stop;
	pthread_t *th;
	unsigned n;
};

struct gs_graph_queue {
	struct gs_graph *g;
	gs_graph_cb cb;
	void *cb_arg;
	uint32_t depth;
	pthread_mutex_t lock;
	pthread_cond_t cv;	/* completions and room */
	unsigned waiters;	/* threads in pthread_cond_wait on cv */
	uint64_t inflight;
	struct gs_graph_req **done;	/* completion ring (reap mode) */
	size_t dhead, dn, dcap;
};

static void qwait(struct gs_graph_queue *q)
{
	q->waiters++;
	pthread_cond_wait(&q->cv, &q->lock);
	q->waiters--;
}

static void complete(struct gs_graph_queue *q, struct gs_graph_req *r, struct gr_list *l,
		     struct gr_scratch *sc)
{
	struct gs_graph *g = q->g;
	size_t n;
	int ret;

	if (r->res < 0 || (r->flags & GS_GRAPH_REQ_DEGREE))
		goto out;
	n = (size_t)r->res;
	/* the caller's requests speak ids; the apps' (GR_REQ_INDEX) indices */
	if (n && g->ids.on && !(r->flags & GR_REQ_INDEX)) {
		ret = gr_ids_list(&g->ids, &sc->ic, l->ids, l->w, n);
		if (ret) {
			r->res = ret;
			goto out;
		}
	}
	if (r->flags & GS_GRAPH_REQ_ALLOC) {
		r->ids = malloc((n ? n : 1) * sizeof(*r->ids));
		r->weights = NULL;
		if (r->flags & GS_GRAPH_REQ_WEIGHTS)
			r->weights = malloc((n ? n : 1) * sizeof(*r->weights));
		if (!r->ids || ((r->flags & GS_GRAPH_REQ_WEIGHTS) && !r->weights)) {
			free(r->ids);
			free(r->weights);
			r->ids = NULL;
			r->weights = NULL;
			r->res = -ENOMEM;
			goto out;
		}
		r->cap = n;
	} else if (!r->ids && q->cb) {
		/* the worker's own list, for the callback only */
		r->ids = l->ids;
		r->weights = l->w;
		r->cap = n;
		q->cb(r, q->cb_arg);
		r->ids = NULL;
		r->weights = NULL;
		r->cap = 0;
		return;
	}
	if (n > r->cap)
		n = r->cap;
	if (r->ids && n)
		memcpy(r->ids, l->ids, n * sizeof(*r->ids));
	if (r->weights && n)
		memcpy(r->weights, l->w, n * sizeof(*r->weights));
out:
	if (q->cb) {
		q->cb(r, q->cb_arg);
		return;
	}
	pthread_mutex_lock(&q->lock);
	q->done[(q->dhead + q->dn++) % q->dcap] = r;
	pthread_mutex_unlock(&q->lock);
}

static void run_chunk(struct gs_graph *g, struct chunk *c, struct gr_scratch *sc)
{
	struct gs_graph_queue *q = c->q;

	pthread_rwlock_rdlock(&g->lock);
	sc->mdir = -1;		/* pages may have moved since the last chunk */
	sc->dmemo = GS_GRAPH_NONE;
	if (g->eng->prepare && !g->broken)
		g->eng->prepare(g, c->r, c->key, c->n);
	for (unsigned i = 0; i < c->n; i++) {
		struct gs_graph_req *r = c->r[i];

		if (r->dir > GS_GRAPH_IN)
			r->res = -EINVAL;
		else if (c->v[i] == GS_GRAPH_NONE)
			r->res = -ENOENT;
		else
			r->res = g->eng->get(g, r->dir, c->v[i], &sc->l, sc,
					     r->flags & GS_GRAPH_REQ_DEGREE);
		complete(q, r, &sc->l, sc);
	}
	pthread_rwlock_unlock(&g->lock);
	__atomic_add_fetch(&g->stats.queries, c->n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&g->stats.batches, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&q->lock);
	q->inflight -= c->n;
	/* only waiters care: a drain, a submitter wanting room, a reaper */
	if (q->waiters)
		pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
}

static void *worker(void *arg)
{
	struct gr_pool *p = arg;
	struct gr_scratch sc;

	if (gr_scratch_init(&sc, p->g->gm.page_size))
		return NULL;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct chunk *c;

		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->lock);
		if (!p->head)
			break;
		c = p->head;
		p->head = c->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		run_chunk(p->g, c, &sc);
		free(c);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	gr_scratch_free(&sc);
	return NULL;
}

int gr_pool_start(struct gs_graph *g)
{
	struct gr_pool *p;
	int ret;

	if (__atomic_load_n(&g->pool, __ATOMIC_ACQUIRE))
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->g = g;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->th = calloc(g->workers, sizeof(*p->th));
	if (!p->th) {
		free(p);
		return -ENOMEM;
	}
	for (p->n = 0; p->n < g->workers; p->n++) {
		ret = pthread_create(&p->th[p->n], NULL, worker, p);
		if (ret) {
			g->pool = p;
			gr_pool_stop(g);
			return -ret;
		}
	}
	/* two queues created at once: the first pool wins, the other goes */
	if (!__atomic_compare_exchange_n(&g->pool, &(struct gr_pool *){ NULL }, p, false,
					 __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
		struct gr_pool *mine = p;

		pthread_mutex_lock(&mine->lock);
		mine->stop = true;
		pthread_cond_broadcast(&mine->cv);
		pthread_mutex_unlock(&mine->lock);
		for (unsigned i = 0; i < mine->n; i++)
			pthread_join(mine->th[i], NULL);
		free(mine->th);
		free(mine);
	}
	return 0;
}

void gr_pool_stop(struct gs_graph *g)
{
	struct gr_pool *p = g->pool;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n; i++)
		pthread_join(p->th[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cv);
	free(p->th);
	free(p);
	g->pool = NULL;
}

int gs_graph_queue_create(struct gs_graph *g, const struct gs_graph_queue_params *p,
			  struct gs_graph_queue **qp)
{
	struct gs_graph_queue *q;
	int ret;

	ret = gr_pool_start(g);
	if (ret)
		return ret;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->g = g;
	q->depth = p && p->depth ? p->depth : DEF_DEPTH;
	q->cb = p ? p->cb : NULL;
	q->cb_arg = p ? p->cb_arg : NULL;
	q->dcap = q->depth;
	if (!q->cb) {
		q->done = malloc(q->dcap * sizeof(*q->done));
		if (!q->done) {
			free(q);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	*qp = q;
	return 0;
}

int gs_graph_drain(struct gs_graph_queue *q)
{
	pthread_mutex_lock(&q->lock);
	while (q->inflight)
		qwait(q);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void gs_graph_queue_destroy(struct gs_graph_queue *q)
{
	if (!q)
		return;
	gs_graph_drain(q);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cv);
	free(q->done);
	free(q);
}

struct keyed {
	uint64_t key, v;	/* order key, vertex index */
	struct gs_graph_req *r;
};

static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->r->vertex < y->r->vertex ? -1 : x->r->vertex > y->r->vertex;
}

static bool keys_sorted(const struct keyed *k, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		if (cmp_keyed(&k[i - 1], &k[i]) > 0)
			return false;
	return true;
}

/*
 * Requests for the next chunk: CHUNK, or up to CHUNK_DENSE while their keys
 * stay within one key step per request (a sweep: many requests per page,
 * or consecutive vertices), so that the engine's prepare can start their
 * reads together while random requests still spread over the workers.
 */
static unsigned chunk_len(const struct keyed *k, unsigned n)
{
	unsigned m = 1;

	while (m < n && m < CHUNK_DENSE) {
		if (m >= CHUNK && (k[m].key < k[0].key || k[m].key - k[0].key > m))
			break;
		m++;
	}
	return m;
}

/* Sort @n requests by page and queue them as chunks. */
static int submit_sorted(struct gs_graph_queue *q, struct gs_graph_req **reqs, unsigned n)
{
	struct gs_graph *g = q->g;
	struct gr_pool *p = g->pool;
	struct chunk *first = NULL, *last = NULL;
	struct keyed *k = malloc(n * sizeof(*k));
	struct gr_scratch *sc = gr_thread_scratch(g);	/* the submitter's id lookups */
	unsigned nchunks = 0;

	if (!k || !sc) {
		free(k);
		return -ENOMEM;
	}
	pthread_rwlock_rdlock(&g->lock);
	for (unsigned i = 0; i < n; i++) {
		uint64_t v = reqs[i]->vertex;

		k[i].r = reqs[i];
		if (!(reqs[i]->flags & GR_REQ_INDEX) &&
		    gr_ids_index(&g->ids, &sc->ic, reqs[i]->vertex, &v))
			v = GS_GRAPH_NONE;	/* completes with -ENOENT */
		k[i].v = v;
		k[i].key = !g->eng->order ? v :
			   reqs[i]->dir <= GS_GRAPH_IN && v != GS_GRAPH_NONE ?
			   g->eng->order(g, reqs[i]->dir, v) : 0;
	}
	pthread_rwlock_unlock(&g->lock);
	if (g->eng->order && !keys_sorted(k, n))
		qsort(k, n, sizeof(*k), cmp_keyed);
	for (unsigned i = 0, m; i < n; i += m) {
		struct chunk *c = malloc(sizeof(*c));

		if (!c) {
			while (first) {
				struct chunk *x = first;

				first = x->next;
				free(x);
			}
			free(k);
			return -ENOMEM;
		}
		c->next = NULL;
		c->q = q;
		nchunks++;
		m = chunk_len(k + i, n - i);
		c->n = m;
		for (unsigned j = 0; j < m; j++) {
			c->r[j] = k[i + j].r;
			c->key[j] = k[i + j].key;
			c->v[j] = k[i + j].v;
		}
		if (last)
			last->next = c;
		else
			first = c;
		last = c;
	}
	free(k);
	pthread_mutex_lock(&q->lock);
	q->inflight += n;
	pthread_mutex_unlock(&q->lock);
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->next = first;
	else
		p->head = first;
	p->tail = last;
	/* as many workers as there are chunks, not all of them for every batch */
	if (nchunks >= p->n)
		pthread_cond_broadcast(&p->cv);
	else
		while (nchunks--)
			pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int gs_graph_submit(struct gs_graph_queue *q, struct gs_graph_req **reqs, unsigned n)
{
	unsigned done = 0;

	while (done < n) {
		unsigned k = n - done;
		uint64_t room;
		int ret;

		/* requests in flight and completions not yet reaped count */
		pthread_mutex_lock(&q->lock);
		while (q->inflight + q->dn >= q->depth) {
			if (!q->inflight) {
				/* full of completions only the caller can reap */
				pthread_mutex_unlock(&q->lock);
				return done ? (int)done : -EAGAIN;
			}
			qwait(q);
		}
		room = q->depth - q->inflight - q->dn;
		pthread_mutex_unlock(&q->lock);
		if (k > room)
			k = (unsigned)room;
		ret = submit_sorted(q, reqs + done, k);
		if (ret)
			return done ? (int)done : ret;
		done += k;
	}
	return (int)n;
}

int gs_graph_reap(struct gs_graph_queue *q, struct gs_graph_req **reqs, unsigned max,
		  unsigned min)
{
	unsigned n = 0;

	if (q->cb)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (q->dn && n < max) {
			reqs[n++] = q->done[q->dhead];
			q->dhead = (q->dhead + 1) % q->dcap;
			q->dn--;
		}
		if (n >= min || n == max || (!q->inflight && !q->dn))
			break;
		qwait(q);
	}
	if (q->waiters)
		pthread_cond_broadcast(&q->cv);	/* room for waiting submitters */
	pthread_mutex_unlock(&q->lock);
	return (int)n;
}

int gs_graph_neighbors_batch(struct gs_graph *g, struct gs_graph_req *reqs, size_t n)
{
	struct gs_graph_queue_params p = { .depth = DEF_DEPTH };
	struct gs_graph_req **ptr, **out;
	struct gs_graph_queue *q;
	size_t sub = 0, got = 0;
	int ret;

	if (!n)
		return 0;
	ret = gs_graph_queue_create(g, &p, &q);
	if (ret)
		return ret;
	ptr = malloc(n * sizeof(*ptr));
	out = malloc(p.depth * sizeof(*out));
	if (!ptr || !out) {
		ret = -ENOMEM;
		goto free_q;
	}
	for (size_t i = 0; i < n; i++)
		ptr[i] = &reqs[i];
	while (got < n) {
		/* sub - got are in flight or waiting to be reaped */
		size_t k = n - sub, room = p.depth - (sub - got);

		if (k > room)
			k = room;
		if (k) {
			ret = gs_graph_submit(q, ptr + sub, (unsigned)k);
			if (ret < 0)
				break;
			sub += (size_t)ret;
		}
		ret = gs_graph_reap(q, out, p.depth, 1);
		if (ret < 0)
			break;
		got += (size_t)ret;
		ret = 0;
	}
free_q:
	gs_graph_queue_destroy(q);
	free(ptr);
	free(out);
	return ret < 0 ? ret : 0;
}
