// SPDX-License-Identifier: MIT
/*
 * Graph apps over the request queues: each pass submits the neighbour
 * requests of a vertex set in batches (sorted by page inside the engine)
 * and does its work in the completion callback, on the graph's worker
 * threads, over the workers' own buffers.  Shared state is updated with
 * atomics; every app's result is deterministic (bfs depths, min-id
 * component labels, pull pagerank summed in list order, walks and MIS
 * from hashed priorities), so it can be checked against a reference.
 */
#include <errno.h>
#include <stdlib.h>

#include "../graph_internal.h"

#define DEF_BATCH	8192

typedef void (*pass_fn)(struct gs_graph_req *r, void *arg);

struct vkey {
	uint64_t key, v;
};

static int cmp_vkey(const void *a, const void *b)
{
	const struct vkey *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->v < y->v ? -1 : x->v > y->v;
}

/*
 * The whole vertex set of a pass in the engine's device order (gstore: by
 * page; CSR: by id, so rowPtr and colIdx are read front to back), not only
 * each submitted batch: a page or line then leaves the cache once per pass
 * instead of once per batch that touches it.  Same for both engines: the
 * algorithm visits a set, the order is the engine's.
 */
static int pass_order(struct gs_graph *g, const uint64_t *vs, size_t n, unsigned dir,
		      struct gs_graph_req *req)
{
	struct vkey *k;
	bool sorted = true;

	if (!g->eng->order) {
		for (size_t i = 1; i < n && sorted; i++)
			sorted = vs[i - 1] <= vs[i];
		if (sorted) {
			for (size_t i = 0; i < n; i++)
				req[i].vertex = vs[i];
			return 0;
		}
	}
	k = malloc(n * sizeof(*k));
	if (!k)
		return -ENOMEM;
	pthread_rwlock_rdlock(&g->lock);
	for (size_t i = 0; i < n; i++) {
		k[i].v = vs[i];
		k[i].key = g->eng->order && dir <= GS_GRAPH_IN ? g->eng->order(g, dir, vs[i]) : vs[i];
	}
	pthread_rwlock_unlock(&g->lock);
	qsort(k, n, sizeof(*k), cmp_vkey);
	for (size_t i = 0; i < n; i++)
		req[i].vertex = k[i].v;
	free(k);
	return 0;
}

/* Neighbour requests for vs[0..n) in direction @dir, @fn on each reply. */
static int pass(struct gs_graph *g, const uint64_t *vs, size_t n, unsigned dir, unsigned flags,
		pass_fn fn, void *arg, const struct gs_graph_app_opts *o)
{
	size_t batch = o && o->batch ? o->batch : DEF_BATCH;
	struct gs_graph_queue_params p = { .depth = (uint32_t)(4 * batch), .cb = fn,
					   .cb_arg = arg };
	struct gs_graph_req *req, **ptr;
	struct gs_graph_queue *q;
	int ret;

	if (!n)
		return 0;
	if (batch > n)
		batch = n;
	ret = gs_graph_queue_create(g, &p, &q);
	if (ret)
		return ret;
	req = calloc(n, sizeof(*req));
	ptr = malloc(n * sizeof(*ptr));
	if (!req || !ptr) {
		ret = -ENOMEM;
		goto free_q;
	}
	ret = pass_order(g, vs, n, dir, req);
	if (ret)
		goto free_q;
	for (size_t i = 0; i < n; i++) {
		req[i].dir = dir;
		req[i].flags = flags | GR_REQ_INDEX;	/* the arrays are by index */
		ptr[i] = &req[i];
	}
	for (size_t i = 0; i < n && ret >= 0; i += batch)
		ret = gs_graph_submit(q, ptr + i, (unsigned)(n - i < batch ? n - i : batch));
	gs_graph_drain(q);
free_q:
	gs_graph_queue_destroy(q);
	free(req);
	free(ptr);
	return ret < 0 ? ret : 0;
}

static int workers_for(struct gs_graph *g, const struct gs_graph_app_opts *o)
{
	if (o && o->threads && !g->pool)
		return gs_graph_set_workers(g, o->threads);
	return 0;
}

static uint64_t *iota(uint64_t n)
{
	uint64_t *v = malloc((n ? n : 1) * sizeof(*v));

	for (uint64_t i = 0; v && i < n; i++)
		v[i] = i;
	return v;
}

/* ---- BFS ---- */

struct bfs {
	int64_t *depth;
	int64_t level;
	uint64_t *next;
	uint64_t nnext;
};

static void bfs_cb(struct gs_graph_req *r, void *arg)
{
	struct bfs *b = arg;

	for (int64_t i = 0; i < r->res; i++) {
		uint64_t u = r->ids[i];
		int64_t un = -1;

		if (__atomic_load_n(&b->depth[u], __ATOMIC_RELAXED) != -1)
			continue;
		if (__atomic_compare_exchange_n(&b->depth[u], &un, b->level, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			b->next[__atomic_fetch_add(&b->nnext, 1, __ATOMIC_RELAXED)] = u;
	}
}

int gs_graph_bfs(struct gs_graph *g, uint64_t src_id, int64_t *depth,
		 const struct gs_graph_app_opts *o)
{
	uint64_t nv = g->nv, *front, nfront = 1, src;
	struct bfs b = { .depth = depth };
	int ret = workers_for(g, o);

	if (!ret)
		ret = gs_graph_vertex_index(g, src_id, &src);
	if (ret)
		return ret;
	for (uint64_t v = 0; v < nv; v++)
		depth[v] = -1;
	front = malloc(nv * sizeof(*front));
	b.next = malloc(nv * sizeof(*b.next));
	if (!front || !b.next) {
		ret = -ENOMEM;
		goto free_all;
	}
	depth[src] = 0;
	front[0] = src;
	/* each vertex enters a frontier once: next never exceeds nv */
	while (nfront && !ret) {
		uint64_t *t;

		b.level++;
		b.nnext = 0;
		ret = pass(g, front, nfront, GS_GRAPH_OUT, 0, bfs_cb, &b, o);
		t = front;
		front = b.next;
		b.next = t;
		nfront = b.nnext;
	}
free_all:
	free(front);
	free(b.next);
	return ret;
}

/* ---- connected components (weak): min-label propagation ---- */

struct cc {
	uint64_t *label;
	uint8_t *active;	/* in the next round */
	uint64_t *next;
	uint64_t nnext;
};

static void cc_activate(struct cc *c, uint64_t v)
{
	if (!__atomic_exchange_n(&c->active[v], 1, __ATOMIC_RELAXED))
		c->next[__atomic_fetch_add(&c->nnext, 1, __ATOMIC_RELAXED)] = v;
}

/* Lower *p to x; true if it changed. */
static bool atomic_min_u64(uint64_t *p, uint64_t x)
{
	uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (x < cur)
		if (__atomic_compare_exchange_n(p, &cur, x, true, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return true;
	return false;
}

static void cc_cb(struct gs_graph_req *r, void *arg)
{
	struct cc *c = arg;
	uint64_t v = r->vertex;

	for (int64_t i = 0; i < r->res; i++) {
		uint64_t u = r->ids[i];
		uint64_t lv = __atomic_load_n(&c->label[v], __ATOMIC_RELAXED);
		uint64_t lu = __atomic_load_n(&c->label[u], __ATOMIC_RELAXED);

		if (lv < lu && atomic_min_u64(&c->label[u], lv))
			cc_activate(c, u);
		else if (lu < lv && atomic_min_u64(&c->label[v], lu))
			cc_activate(c, v);
	}
}

int64_t gs_graph_cc(struct gs_graph *g, uint64_t *label, const struct gs_graph_app_opts *o)
{
	uint64_t nv = g->nv, *front, nfront = nv;
	struct cc c = { .label = label };
	int64_t comps = 0;
	int ret = workers_for(g, o);

	if (ret)
		return ret;
	front = iota(nv);
	c.next = malloc((nv ? nv : 1) * sizeof(*c.next));
	c.active = calloc(nv ? nv : 1, 1);
	if (!front || !c.next || !c.active) {
		ret = -ENOMEM;
		goto free_all;
	}
	for (uint64_t v = 0; v < nv; v++)
		label[v] = v;
	while (nfront && !ret) {
		uint64_t *t;

		c.nnext = 0;
		memset(c.active, 0, nv);
		ret = pass(g, front, nfront, GS_GRAPH_OUT, 0, cc_cb, &c, o);
		/* directed: an edge is seen from both ends only through the in-lists */
		if (!ret && g->directed)
			ret = pass(g, front, nfront, GS_GRAPH_IN, 0, cc_cb, &c, o);
		t = front;
		front = c.next;
		c.next = t;
		nfront = c.nnext;
	}
	for (uint64_t v = 0; v < nv && !ret; v++)
		comps += label[v] == v && gr_vertex_ok(g, v);
free_all:
	free(front);
	free(c.next);
	free(c.active);
	return ret ? ret : comps;
}

/* ---- pagerank (pull) ---- */

struct pr {
	uint64_t *outdeg;
	const double *rank;
	double *next;
	double base, damping;
};

static void deg_cb(struct gs_graph_req *r, void *arg)
{
	struct pr *p = arg;

	p->outdeg[r->vertex] = r->res > 0 ? (uint64_t)r->res : 0;
}

static void pr_cb(struct gs_graph_req *r, void *arg)
{
	struct pr *p = arg;
	double s = 0;

	for (int64_t i = 0; i < r->res; i++) {
		uint64_t u = r->ids[i];

		s += p->rank[u] / (double)p->outdeg[u];
	}
	p->next[r->vertex] = p->base + p->damping * s;
}

int gs_graph_pagerank(struct gs_graph *g, double damping, unsigned iters, double *rank,
		      const struct gs_graph_app_opts *o)
{
	uint64_t nv = g->nv, *all;
	struct pr p = { .damping = damping };
	double *next;
	int ret = workers_for(g, o);

	if (ret)
		return ret;
	if (!nv)
		return 0;
	all = iota(nv);
	p.outdeg = calloc(nv, sizeof(*p.outdeg));
	next = malloc(nv * sizeof(*next));
	if (!all || !p.outdeg || !next) {
		ret = -ENOMEM;
		goto free_all;
	}
	ret = pass(g, all, nv, GS_GRAPH_OUT, GS_GRAPH_REQ_DEGREE, deg_cb, &p, o);
	for (uint64_t v = 0; v < nv; v++)
		rank[v] = 1.0 / (double)nv;
	for (unsigned it = 0; it < iters && !ret; it++) {
		double dangling = 0;

		for (uint64_t v = 0; v < nv; v++)
			if (!p.outdeg[v])
				dangling += rank[v];
		p.base = (1.0 - damping) / (double)nv + damping * dangling / (double)nv;
		p.rank = rank;
		p.next = next;
		for (uint64_t v = 0; v < nv; v++)
			next[v] = p.base;	/* removed vertices answer no list */
		ret = pass(g, all, nv, GS_GRAPH_IN, 0, pr_cb, &p, o);
		memcpy(rank, next, nv * sizeof(*rank));
	}
free_all:
	free(all);
	free(p.outdeg);
	free(next);
	return ret;
}

/* ---- random walks ---- */

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ULL ^
		     (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
		     (c + 1) * 0x94d049bb133111ebULL;

	x ^= x >> 31;
	x *= 0xd6e8feb86659fd93ULL;
	return x ^ (x >> 32);
}

struct walk {
	uint64_t *paths;
	unsigned len, step;
	uint64_t seed;		/* a request's priv is its walk's index */
};

static void walk_cb(struct gs_graph_req *r, void *arg)
{
	struct walk *w = arg;
	uint64_t i = (uint64_t)(uintptr_t)r->priv, *p = w->paths + i * (w->len + 1);

	p[w->step + 1] = r->res > 0 ? r->ids[mix(w->seed, i, w->step) % (uint64_t)r->res] :
		GS_GRAPH_NO_VERTEX;
}

int gs_graph_randomwalk(struct gs_graph *g, const uint64_t *starts, size_t n, unsigned len,
			uint64_t seed, uint64_t *paths, const struct gs_graph_app_opts *o)
{
	struct walk w = { .paths = paths, .len = len, .seed = seed };
	size_t batch = o && o->batch ? o->batch : DEF_BATCH;
	struct gs_graph_queue_params p = { .depth = (uint32_t)(4 * batch), .cb = walk_cb,
					   .cb_arg = &w };
	struct gs_graph_req *req = NULL, **ptr = NULL;
	struct gs_graph_queue *q;
	int ret = workers_for(g, o);

	if (ret)
		return ret;
	/* walked by index; a start that is no vertex ends its walk at once */
	for (size_t i = 0; i < n; i++) {
		uint64_t *pi = paths + i * (len + 1);

		if (gs_graph_vertex_index(g, starts[i], &pi[0]))
			pi[0] = GS_GRAPH_NO_VERTEX;
		for (unsigned s = 1; s <= len; s++)
			pi[s] = GS_GRAPH_NO_VERTEX;
	}
	ret = gs_graph_queue_create(g, &p, &q);
	if (ret)
		return ret;
	req = calloc(n ? n : 1, sizeof(*req));
	ptr = malloc((n ? n : 1) * sizeof(*ptr));
	if (!req || !ptr) {
		ret = -ENOMEM;
		goto free_q;
	}
	for (w.step = 0; w.step < len && !ret; w.step++) {
		size_t k = 0;

		/* the walks still going, one request each */
		for (size_t i = 0; i < n; i++) {
			uint64_t v = paths[i * (len + 1) + w.step];

			if (v == GS_GRAPH_NO_VERTEX)
				continue;
			memset(&req[k], 0, sizeof(req[k]));
			req[k].vertex = v;
			req[k].flags = GR_REQ_INDEX;
			req[k].priv = (void *)(uintptr_t)i;
			ptr[k] = &req[k];
			k++;
		}
		for (size_t i = 0; i < k && ret >= 0; i += batch) {
			size_t m = k - i < batch ? k - i : batch;

			ret = gs_graph_submit(q, ptr + i, (unsigned)m);
		}
		gs_graph_drain(q);
		ret = ret < 0 ? ret : 0;
	}
	/* back to ids (the start as given) */
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t *pi = paths + i * (len + 1);

		for (unsigned s = 1; s <= len && pi[s] != GS_GRAPH_NO_VERTEX && !ret; s++)
			ret = gs_graph_vertex_ids(g, pi[s], 1, &pi[s]);
		pi[0] = starts[i];
	}
free_q:
	gs_graph_queue_destroy(q);
	free(req);
	free(ptr);
	return ret;
}

/* ---- maximal independent set (Luby, fixed priorities) ---- */

enum { MIS_UNDECIDED, MIS_IN, MIS_OUT };

struct mis {
	uint8_t *state;
	uint8_t *cand;		/* 1: candidate, 2: lost this round */
	uint64_t seed;
};

static bool beats(const struct mis *m, uint64_t a, uint64_t b)
{
	uint64_t pa = mix(m->seed, a, 0), pb = mix(m->seed, b, 0);

	return pa < pb || (pa == pb && a < b);
}

/* Phase 1: a vertex loses if an undecided neighbour has a better priority. */
static void mis_cand_cb(struct gs_graph_req *r, void *arg)
{
	struct mis *m = arg;
	uint64_t v = r->vertex;

	for (int64_t i = 0; i < r->res; i++) {
		uint64_t u = r->ids[i];

		if (u != v && m->state[u] == MIS_UNDECIDED && beats(m, u, v)) {
			__atomic_store_n(&m->cand[v], 2, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* Phase 2: the winners' neighbours are out. */
static void mis_out_cb(struct gs_graph_req *r, void *arg)
{
	struct mis *m = arg;

	for (int64_t i = 0; i < r->res; i++)
		if (r->ids[i] != r->vertex)
			__atomic_store_n(&m->state[r->ids[i]], MIS_OUT, __ATOMIC_RELAXED);
}

int64_t gs_graph_mis(struct gs_graph *g, uint64_t seed, uint8_t *in,
		     const struct gs_graph_app_opts *o)
{
	uint64_t nv = g->nv, *und, nund = 0, *win;
	struct mis m = { .seed = seed };
	int64_t size = 0;
	int ret = workers_for(g, o);

	if (ret)
		return ret;
	m.state = calloc(nv ? nv : 1, 1);
	m.cand = calloc(nv ? nv : 1, 1);
	und = malloc((nv ? nv : 1) * sizeof(*und));
	win = malloc((nv ? nv : 1) * sizeof(*win));
	if (!m.state || !m.cand || !und || !win) {
		ret = -ENOMEM;
		goto free_all;
	}
	for (uint64_t v = 0; v < nv; v++) {
		if (gr_vertex_ok(g, v))
			und[nund++] = v;
		else
			m.state[v] = MIS_OUT;
	}
	while (nund && !ret) {
		uint64_t nwin = 0, k = 0;

		for (uint64_t i = 0; i < nund; i++)
			m.cand[und[i]] = 1;
		ret = pass(g, und, nund, GS_GRAPH_OUT, 0, mis_cand_cb, &m, o);
		if (!ret && g->directed)
			ret = pass(g, und, nund, GS_GRAPH_IN, 0, mis_cand_cb, &m, o);
		for (uint64_t i = 0; i < nund; i++)
			if (m.cand[und[i]] == 1) {
				m.state[und[i]] = MIS_IN;
				win[nwin++] = und[i];
			}
		if (!ret)
			ret = pass(g, win, nwin, GS_GRAPH_OUT, 0, mis_out_cb, &m, o);
		if (!ret && g->directed)
			ret = pass(g, win, nwin, GS_GRAPH_IN, 0, mis_out_cb, &m, o);
		for (uint64_t i = 0; i < nund; i++)
			if (m.state[und[i]] == MIS_UNDECIDED)
				und[k++] = und[i];
		nund = k;
	}
	for (uint64_t v = 0; v < nv && !ret; v++) {
		in[v] = m.state[v] == MIS_IN;
		size += in[v];
	}
free_all:
	free(m.state);
	free(m.cand);
	free(und);
	free(win);
	return ret ? ret : size;
}
