// SPDX-License-Identifier: MIT
/*
 * Updates: the in-memory update log, delta records on disk chained per
 * (direction, vertex), and how a query folds both into a stored list.
 *
 * An update is validated against the current state (page + delta + log)
 * and then appended to the log of each list it touches (both ends of an
 * undirected edge; the out list of u and the in list of v of a directed
 * one).  gs_graph_sync writes the log as delta pages and commits the root
 * (durable), which also carries nv and ne.  For one list the last op per
 * neighbour decides: ADD/SETW -> present with that weight, DEL -> absent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "gs_log.h"
#include "graph_internal.h"

#define DHDR	((uint32_t)sizeof(struct gs_graph_delta_hdr))
#define DREC	((uint32_t)sizeof(struct gs_graph_delta_rec))
#define DOP	((uint32_t)sizeof(struct gs_graph_delta_op))

struct gr_pend *gr_pend_get(struct gs_graph *g, unsigned d, uint64_t v)
{
	uint32_t *i = g->dir[d].pmap.n ? gr_map_get(&g->dir[d].pmap, v) : NULL;

	return i ? &g->dir[d].pend[*i] : NULL;
}

/* The pending entry of (d, v), created empty if missing.  Pointers into
 * dir->pend are invalidated by the next call. */
static struct gr_pend *pend_add(struct gs_graph *g, unsigned d, uint64_t v)
{
	struct gr_dir *dr = &g->dir[d];
	uint32_t *i;
	bool added;

	if (dr->npend == dr->pendcap) {
		uint64_t c = dr->pendcap ? dr->pendcap * 2 : 64;
		struct gr_pend *n = realloc(dr->pend, c * sizeof(*n));

		if (!n)
			return NULL;
		dr->pend = n;
		dr->pendcap = c;
	}
	i = gr_map_put(&dr->pmap, v, (uint32_t)dr->npend, &added);
	if (!i)
		return NULL;
	if (added) {
		struct gr_pend *p = &dr->pend[dr->npend++];

		memset(p, 0, sizeof(*p));
		p->v = v;
		p->head = GS_GRAPH_NONE;
	}
	return &dr->pend[*i];
}

void gr_pend_clear(struct gs_graph *g)
{
	for (unsigned d = 0; d < 2; d++) {
		struct gr_dir *dr = &g->dir[d];

		for (uint64_t i = 0; i < dr->npend; i++)
			free(dr->pend[i].ops);
		dr->npend = 0;
		gr_map_clear(&dr->pmap);
		for (uint64_t i = 0; i < dr->gtt.n; i++)
			dr->gtt.e[i].flags &= ~(uint32_t)GS_GRAPH_GTT_DIRTY;
	}
	g->delta_recs = 0;
	g->max_chain = 0;
	g->log_ops = 0;
	g->nvops = 0;
}

/* ---- reading: fold delta records and the log into a list ---- */

static int ops_reserve(struct gr_scratch *sc, size_t n)
{
	struct gr_op *o;
	size_t c;

	if (n <= sc->opscap)
		return 0;
	c = sc->opscap ? sc->opscap : 64;
	while (c < n)
		c *= 2;
	/* twice the room: the second half is the merge sort's buffer */
	o = realloc(sc->ops, 2 * c * sizeof(*o));
	if (!o)
		return -ENOMEM;
	sc->ops = o;
	sc->opscap = c;
	return 0;
}

static int delta_page(struct gs_graph *g, uint64_t pg, struct gr_scratch *sc)
{
	uint32_t ps = g->gm.page_size;
	struct gs_graph_delta_hdr *h = (void *)sc->dpage;
	uint32_t crc;
	int ret;

	/* a page of the current delta never changes; a merge empties the delta
	 * and the next generation writes other records at the same offsets */
	if (sc->dmemo == pg && sc->dgen == g->root.delta_gen)
		return 0;
	sc->dmemo = GS_GRAPH_NONE;
	ret = gr_store_read_full(g->st, le64toh(g->root.delta_obj), sc->dpage, ps, pg * ps);
	__atomic_add_fetch(&g->stats.delta_reads, 1, __ATOMIC_RELAXED);
	if (ret)
		return ret;
	crc = le32toh(h->crc);
	h->crc = 0;
	if (le32toh(h->magic) != GS_GRAPH_DELTA_MAGIC || le64toh(h->gen) !=
	    le64toh(g->root.delta_gen) || le64toh(h->seq) != pg ||
	    le32toh(h->used) > ps || le32toh(h->used) < DHDR ||
	    gs_crc32c(0, sc->dpage, ps) != crc) {
		gs_err("graph %" PRIu64 ": delta page %" PRIu64 " is corrupt", g->ino, pg);
		return -EIO;
	}
	h->crc = htole32(crc);
	sc->dmemo = pg;
	sc->dgen = g->root.delta_gen;
	return 0;
}

/* The record at @off: checked header, its ops appended in reverse. */
static int read_rec(struct gs_graph *g, uint64_t off, unsigned d, uint64_t v,
		    struct gr_scratch *sc, uint64_t *prev)
{
	uint32_t ps = g->gm.page_size, in = (uint32_t)(off % ps);
	const struct gs_graph_delta_rec *r;
	const struct gs_graph_delta_op *op;
	unsigned nops;
	int ret;

	ret = delta_page(g, off / ps, sc);
	if (ret)
		return ret;
	r = (const void *)(sc->dpage + in);
	nops = le16toh(r->nops);
	if (in < DHDR || in + DREC + (uint64_t)nops * DOP > ps || le64toh(r->vertex) != v ||
	    r->dir != d) {
		gs_err("graph %" PRIu64 ": bad delta record at %" PRIu64, g->ino, off);
		return -EIO;
	}
	ret = ops_reserve(sc, sc->nops + nops);
	if (ret)
		return ret;
	op = (const void *)(r + 1);
	for (unsigned k = nops; k-- > 0;) {
		struct gr_op *o = &sc->ops[sc->nops++];

		o->nbr = le64toh(op[k].nbr);
		o->w = gr_u2f(le32toh(op[k].w));
		o->op = op[k].op;
	}
	*prev = le64toh(r->prev);
	return 0;
}

static void reverse_ops(struct gr_op *o, size_t n)
{
	for (size_t i = 0; i < n / 2; i++) {
		struct gr_op t = o[i];

		o[i] = o[n - 1 - i];
		o[n - 1 - i] = t;
	}
}

/* Stable sort by neighbour (bottom-up merge sort; @tmp holds n ops). */
static void sort_ops(struct gr_op *a, size_t n, struct gr_op *tmp)
{
	struct gr_op *src = a, *dst = tmp;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = src[j].nbr < src[i].nbr ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct gr_op *t = src;

		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(*a));
}

void gr_ops_merge(struct gr_list *l, struct gr_op *ops, size_t n, struct gr_list *out)
{
	size_t i = 0, j = 0;

	out->n = 0;
	while (i < l->n || j < n) {
		if (j == n || (i < l->n && l->ids[i] < ops[j].nbr)) {
			out->ids[out->n] = l->ids[i];
			out->w[out->n++] = l->w[i++];
			continue;
		}
		size_t e = j;

		while (e + 1 < n && ops[e + 1].nbr == ops[j].nbr)
			e++;
		if (i < l->n && l->ids[i] == ops[j].nbr)
			i++;
		if (ops[e].op != GS_GRAPH_OP_DEL) {
			out->ids[out->n] = ops[e].nbr;
			out->w[out->n++] = ops[e].w;
		}
		j = e + 1;
	}
}

int gr_apply_pending(struct gs_graph *g, unsigned d, uint64_t v, struct gr_list *l,
		     struct gr_scratch *sc)
{
	struct gr_pend *p = gr_pend_get(g, d, v);
	struct gr_list t;
	int ret;

	if (!p)
		return 0;
	sc->nops = 0;
	for (uint64_t off = p->head; off != GS_GRAPH_NONE;) {
		ret = read_rec(g, off, d, v, sc, &off);
		if (ret)
			return ret;
	}
	reverse_ops(sc->ops, sc->nops);
	ret = ops_reserve(sc, sc->nops + p->nops);
	if (ret)
		return ret;
	if (!sc->nops && !p->nops)
		return 0;
	if (p->nops)
		memcpy(sc->ops + sc->nops, p->ops, p->nops * sizeof(*p->ops));
	sc->nops += p->nops;
	sort_ops(sc->ops, sc->nops, sc->ops + sc->opscap);
	if (gr_list_reserve(&sc->tmp, l->n + sc->nops))
		return -ENOMEM;
	gr_ops_merge(l, sc->ops, sc->nops, &sc->tmp);
	t = *l;
	*l = sc->tmp;
	sc->tmp = t;
	return 0;
}

/* ---- applying updates (write lock held) ---- */

enum { U_POP, U_VDEL_ADDED, U_VDEL_REMOVED, U_ID_ADDED };

struct undo {
	uint8_t kind, d;
	uint64_t v;
};

struct ubatch {
	struct undo *u;
	size_t n, cap;
	uint64_t nv, ne, log_ops, nvops;
};

static int journal(struct ubatch *b, unsigned kind, unsigned d, uint64_t v)
{
	if (!b)
		return 0;
	if (b->n == b->cap) {
		size_t c = b->cap ? b->cap * 2 : 64;
		struct undo *n = realloc(b->u, c * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->u = n;
		b->cap = c;
	}
	b->u[b->n++] = (struct undo){ .kind = (uint8_t)kind, .d = (uint8_t)d, .v = v };
	return 0;
}

static void batch_begin(struct gs_graph *g, struct ubatch *b)
{
	memset(b, 0, sizeof(*b));
	b->nv = g->nv;
	b->ne = g->ne;
	b->log_ops = g->log_ops;
	b->nvops = g->nvops;
}

static void batch_undo(struct gs_graph *g, struct ubatch *b)
{
	while (b->n) {
		struct undo *u = &b->u[--b->n];
		bool added;

		if (u->kind == U_POP)
			gr_pend_get(g, u->d, u->v)->nops--;
		else if (u->kind == U_VDEL_ADDED)
			gr_map_del(&g->vdel, u->v);
		else if (u->kind == U_ID_ADDED)
			while (g->ids.ntail > u->v)	/* the map as it was */
				gr_ids_pop(&g->ids);
		else
			gr_map_put(&g->vdel, u->v, 0, &added);	/* had room: it was there */
	}
	g->nv = b->nv;
	g->ne = b->ne;
	g->log_ops = b->log_ops;
	g->nvops = b->nvops;
}

static int log_op(struct gs_graph *g, unsigned d, uint64_t v, unsigned op, uint64_t nbr,
		  float w, struct ubatch *b)
{
	struct gr_pend *p = pend_add(g, d, v);

	if (!p)
		return -ENOMEM;
	if (p->nops == p->cap) {
		uint32_t c = p->cap ? p->cap * 2 : 4;
		struct gr_op *n = realloc(p->ops, c * sizeof(*n));

		if (!n)
			return -ENOMEM;
		p->ops = n;
		p->cap = c;
	}
	if (journal(b, U_POP, d, v))
		return -ENOMEM;
	p->ops[p->nops++] = (struct gr_op){ .nbr = nbr, .w = w, .op = op };
	g->log_ops++;
	return 0;
}

/* Log one op on every list an edge u -> v lives in. */
static int log_edge(struct gs_graph *g, unsigned op, uint64_t u, uint64_t v, float w,
		    struct ubatch *b)
{
	int ret = log_op(g, 0, u, op, v, w, b);

	if (ret)
		return ret;
	if (g->directed)
		return log_op(g, 1, v, op, u, w, b);
	return u == v ? 0 : log_op(g, 0, v, op, u, w, b);
}

/* Is there an edge u -> v?  Its weight in *w. */
static int edge_find(struct gs_graph *g, uint64_t u, uint64_t v, float *w)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	int64_t r;

	if (!sc)
		return -ENOMEM;
	sc->mdir = -1;
	r = g->eng->get(g, GS_GRAPH_OUT, u, &sc->l, sc, false);
	if (r < 0)
		return (int)r;
	for (size_t lo = 0, hi = sc->l.n; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;

		if (sc->l.ids[mid] == v) {
			if (w)
				*w = sc->l.w[mid];
			return 1;
		}
		if (sc->l.ids[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int vop_push(struct gs_graph *g, uint64_t v, unsigned op)
{
	if (g->nvops == g->vopscap) {
		size_t c = g->vopscap ? g->vopscap * 2 : 16;
		struct gr_op *n = realloc(g->vops, c * sizeof(*n));

		if (!n)
			return -ENOMEM;
		g->vops = n;
		g->vopscap = c;
	}
	g->vops[g->nvops++] = (struct gr_op){ .nbr = v, .op = op };
	g->log_ops++;
	return 0;
}

static int do_add_edge(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	int ret;

	if (!gr_vertex_ok(g, u) || !gr_vertex_ok(g, v))
		return -ENOENT;
	ret = edge_find(g, u, v, NULL);
	if (ret)
		return ret < 0 ? ret : -EEXIST;
	ret = log_edge(g, GS_GRAPH_OP_ADD, u, v, g->weighted ? w : 1.0f, b);
	if (!ret)
		g->ne++;
	return ret;
}

static int do_del_edge(struct gs_graph *g, uint64_t u, uint64_t v, struct ubatch *b)
{
	int ret;

	if (!gr_vertex_ok(g, u) || !gr_vertex_ok(g, v))
		return -ENOENT;
	ret = edge_find(g, u, v, NULL);
	if (ret <= 0)
		return ret < 0 ? ret : -ENOENT;
	ret = log_edge(g, GS_GRAPH_OP_DEL, u, v, 0, b);
	if (!ret)
		g->ne--;
	return ret;
}

static int do_set_weight(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	int ret;

	if (!g->weighted)
		return -EINVAL;
	if (!gr_vertex_ok(g, u) || !gr_vertex_ok(g, v))
		return -ENOENT;
	ret = edge_find(g, u, v, NULL);
	if (ret <= 0)
		return ret < 0 ? ret : -ENOENT;
	return log_edge(g, GS_GRAPH_OP_SETW, u, v, w, b);
}

/* The index of vertex id @id (write lock held). */
static int xlate(struct gs_graph *g, uint64_t id, uint64_t *idx)
{
	struct gr_scratch *sc = gr_thread_scratch(g);

	return sc ? gr_ids_index(&g->ids, &sc->ic, id, idx) : -ENOMEM;
}

/* A new id in a graph with an id map: the next index. */
static int add_mapped(struct gs_graph *g, uint64_t id, struct ubatch *b)
{
	int ret = journal(b, U_ID_ADDED, 0, g->ids.ntail);

	if (!ret)
		ret = gr_ids_add(&g->ids, id);
	if (!ret)
		ret = vop_push(g, g->nv++, GS_GRAPH_OP_VADD);
	return ret;
}

static int do_add_vertex(struct gs_graph *g, uint64_t id, struct ubatch *b)
{
	uint64_t max = g->gm.idw == 4 ? UINT32_MAX - 1 : GS_GRAPH_NONE - 1, v = id;
	int ret;

	if (id > max)
		return -ERANGE;
	if (g->ids.on) {
		ret = xlate(g, id, &v);
		if (ret == -ENOENT)
			return add_mapped(g, id, b);
		if (ret)
			return ret;
	} else if (id >= g->nv && id - g->nv > g->nv + GR_DENSE_GROW) {
		/* every id below it would become a vertex: too far for dense ids */
		return -ERANGE;
	}
	if (v < g->nv) {
		if (!gr_map_get(&g->vdel, v))
			return -EEXIST;
		ret = gr_map_del(&g->vdel, v);
		if (!ret)
			ret = journal(b, U_VDEL_REMOVED, 0, v);
	} else {
		g->nv = v + 1;
		ret = 0;
	}
	if (!ret)
		ret = vop_push(g, v, GS_GRAPH_OP_VADD);
	return ret;
}

/* Copy of a list (the scratch list is reused by every edge_find). */
static int list_copy(struct gs_graph *g, unsigned dir, uint64_t v, uint64_t **ids, size_t *n)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	int64_t r;

	if (!sc)
		return -ENOMEM;
	sc->mdir = -1;
	r = g->eng->get(g, dir, v, &sc->l, sc, false);
	if (r < 0)
		return (int)r;
	*ids = malloc((sc->l.n ? sc->l.n : 1) * sizeof(**ids));
	if (!*ids)
		return -ENOMEM;
	memcpy(*ids, sc->l.ids, sc->l.n * sizeof(**ids));
	*n = sc->l.n;
	return 0;
}

static int do_del_vertex(struct gs_graph *g, uint64_t v, struct ubatch *b)
{
	uint64_t *ids = NULL;
	bool added;
	size_t n = 0;
	int ret;

	if (!gr_vertex_ok(g, v))
		return -ENOENT;
	ret = list_copy(g, GS_GRAPH_OUT, v, &ids, &n);
	for (size_t i = 0; i < n && !ret; i++)
		ret = do_del_edge(g, v, ids[i], b);
	free(ids);
	ids = NULL;
	if (!ret && g->directed) {
		ret = list_copy(g, GS_GRAPH_IN, v, &ids, &n);
		for (size_t i = 0; i < n && !ret; i++)
			ret = ids[i] == v ? 0 : do_del_edge(g, ids[i], v, b);
		free(ids);
	}
	if (ret)
		return ret;
	if (!gr_map_put(&g->vdel, v, 0, &added))
		return -ENOMEM;
	ret = journal(b, U_VDEL_ADDED, 0, v);
	if (!ret)
		ret = vop_push(g, v, GS_GRAPH_OP_VDEL);
	return ret;
}

/* After a batch: sync a long log, merge past the chain limit. */
static int after_updates(struct gs_graph *g)
{
	uint32_t cmax = le32toh(g->root.chain_max);
	int ret = 0;

	if (g->log_ops >= GR_DEF_LOG_OPS)
		ret = gr_sync_locked(g);
	if (!ret && cmax && g->max_chain > cmax)
		ret = gr_merge_locked(g);
	return ret;
}

static int writable(struct gs_graph *g)
{
	if (g->eng != &gr_engine_pages)
		return -EOPNOTSUPP;
	if (g->broken)
		return g->broken;
	return g->oflags & GS_GRAPH_RDONLY ? -EROFS : 0;
}

/* ---- the text form ---- */

static const char *skip_ws(const char *s, const char *e)
{
	while (s < e && (*s == ' ' || *s == '\t' || *s == '\r'))
		s++;
	return s;
}

static const char *token(const char *s, const char *e, const char **t, size_t *tl)
{
	s = skip_ws(s, e);
	*t = s;
	while (s < e && *s != ' ' && *s != '\t' && *s != '\r')
		s++;
	*tl = (size_t)(s - *t);
	return s;
}

static int tok_u64(const char *t, size_t tl, uint64_t *v)
{
	uint64_t x = 0;

	if (!tl || tl > 20)
		return -EINVAL;
	for (size_t i = 0; i < tl; i++) {
		unsigned d = (unsigned)(t[i] - '0');

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

static int tok_f32(const char *t, size_t tl, float *w)
{
	char buf[64], *end;

	if (!tl || tl >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, t, tl);
	buf[tl] = 0;
	*w = strtof(buf, &end);
	return end == buf + tl && *w == *w && *w - *w == 0 ? 0 : -EINVAL;
}

/* One update line (without its newline): 1 applied, 0 blank or comment. */
static int apply_line(struct gs_graph *g, const char *s, const char *e, struct ubatch *b)
{
	const char *t[5];
	size_t tl[5];
	uint64_t u, v;
	float w = 1.0f;
	unsigned n = 0;
	int ret;

	s = skip_ws(s, e);
	if (s == e || *s == '#')
		return 0;
	while (n < 5) {
		s = token(s, e, &t[n], &tl[n]);
		if (!tl[n])
			break;
		n++;
	}
	if (skip_ws(s, e) != e)
		return -EINVAL;
	if (tl[0] == 2 && (t[0][0] == '+' || t[0][0] == '-') && t[0][1] == 'v') {
		if (n != 2 || tok_u64(t[1], tl[1], &v))
			return -EINVAL;
		if (t[0][0] == '+')
			ret = do_add_vertex(g, v, b);
		else
			ret = xlate(g, v, &v) ?: do_del_vertex(g, v, b);
		return ret ? ret : 1;
	}
	if (tl[0] != 1 || !strchr("+-=", t[0][0]) || n < 3 || tok_u64(t[1], tl[1], &u) ||
	    tok_u64(t[2], tl[2], &v))
		return -EINVAL;
	/* ids to indices: an id that is no vertex fails as an index past nv would */
	ret = xlate(g, u, &u) ?: xlate(g, v, &v);
	if (ret)
		return ret;
	switch (t[0][0]) {
	case '+':
		if (n > 4 || (n == 4 && (!g->weighted || tok_f32(t[3], tl[3], &w))))
			return -EINVAL;
		ret = do_add_edge(g, u, v, w, b);
		break;
	case '-':
		ret = n == 3 ? do_del_edge(g, u, v, b) : -EINVAL;
		break;
	case '=':
		if (n != 4 || tok_f32(t[3], tl[3], &w))
			return -EINVAL;
		ret = do_set_weight(g, u, v, w, b);
		break;
	default:
		return -EINVAL;
	}
	return ret ? ret : 1;
}

int gs_graph_update(struct gs_graph *g, const char *text, size_t len, uint64_t *bad_line)
{
	const char *s = text, *end = text + len;
	struct ubatch b;
	uint64_t line = 0;
	int ret, count = 0;

	if (bad_line)
		*bad_line = 0;
	ret = writable(g);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&g->lock);
	batch_begin(g, &b);
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end;

		line++;
		ret = apply_line(g, s, le, &b);
		if (ret < 0) {
			if (bad_line)
				*bad_line = line;
			batch_undo(g, &b);
			goto unlock;
		}
		count += ret;
		s = nl ? nl + 1 : end;
	}
	__atomic_add_fetch(&g->stats.updates, (uint64_t)count, __ATOMIC_RELAXED);
	ret = after_updates(g);
unlock:
	pthread_rwlock_unlock(&g->lock);
	free(b.u);
	return ret ? ret : count;
}

/* Single updates: the same checks, nothing to undo on failure. */
typedef int (*single_fn)(struct gs_graph *g, uint64_t u, uint64_t v, float w,
			 struct ubatch *b);

static int single(struct gs_graph *g, single_fn fn, uint64_t u, uint64_t v, float w)
{
	struct ubatch b;
	int ret = writable(g);

	if (ret)
		return ret;
	pthread_rwlock_wrlock(&g->lock);
	batch_begin(g, &b);
	ret = fn(g, u, v, w, &b);
	if (ret)
		batch_undo(g, &b);
	else
		ret = after_updates(g);
	pthread_rwlock_unlock(&g->lock);
	free(b.u);
	if (!ret)
		__atomic_add_fetch(&g->stats.updates, 1, __ATOMIC_RELAXED);
	return ret;
}

static int f_add(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	return xlate(g, u, &u) ?: xlate(g, v, &v) ?: do_add_edge(g, u, v, w, b);
}

static int f_del(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	return xlate(g, u, &u) ?: xlate(g, v, &v) ?: do_del_edge(g, u, v, b);
}

static int f_setw(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	return xlate(g, u, &u) ?: xlate(g, v, &v) ?: do_set_weight(g, u, v, w, b);
}

static int f_vadd(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	return do_add_vertex(g, u, b);
}

static int f_vdel(struct gs_graph *g, uint64_t u, uint64_t v, float w, struct ubatch *b)
{
	return xlate(g, u, &u) ?: do_del_vertex(g, u, b);
}

int gs_graph_add_edge(struct gs_graph *g, uint64_t u, uint64_t v, float w)
{
	return single(g, f_add, u, v, w);
}

int gs_graph_del_edge(struct gs_graph *g, uint64_t u, uint64_t v)
{
	return single(g, f_del, u, v, 0);
}

int gs_graph_set_weight(struct gs_graph *g, uint64_t u, uint64_t v, float w)
{
	return single(g, f_setw, u, v, w);
}

int gs_graph_add_vertex(struct gs_graph *g, uint64_t v)
{
	return single(g, f_vadd, v, 0, 0);
}

int gs_graph_del_vertex(struct gs_graph *g, uint64_t v)
{
	return single(g, f_vdel, v, 0, 0);
}

/* ---- delta pages ---- */

struct dwriter {
	struct gs_graph *g;
	uint8_t *pages;
	size_t npages, cap;	/* pages in the buffer */
	uint32_t used;		/* in the last page */
	uint64_t base;		/* delta_len before this sync */
	uint64_t recs;
};

static void dpage_close(struct dwriter *w)
{
	uint32_t ps = w->g->gm.page_size;
	uint8_t *p = w->pages + (w->npages - 1) * ps;
	struct gs_graph_delta_hdr *h = (void *)p;

	h->used = htole32(w->used);
	h->crc = 0;
	h->crc = htole32(gs_crc32c(0, p, ps));
}

static int dpage_open(struct dwriter *w)
{
	uint32_t ps = w->g->gm.page_size;
	struct gs_graph_delta_hdr *h;

	if (w->npages)
		dpage_close(w);
	if (w->npages == w->cap) {
		size_t c = w->cap ? w->cap * 2 : 8;
		uint8_t *n = realloc(w->pages, c * ps);

		if (!n)
			return -ENOMEM;
		w->pages = n;
		w->cap = c;
	}
	memset(w->pages + w->npages * ps, 0, ps);
	h = (void *)(w->pages + w->npages * ps);
	h->magic = htole32(GS_GRAPH_DELTA_MAGIC);
	h->gen = w->g->root.delta_gen;
	h->seq = htole64((w->base / ps) + w->npages);
	w->npages++;
	w->used = DHDR;
	return 0;
}

/* Append a record of up to what fits; returns its offset via *off and how
 * many ops it took. */
static int put_rec(struct dwriter *w, unsigned d, uint64_t v, uint64_t prev,
		   const struct gr_op *ops, size_t n, uint64_t *off, size_t *took)
{
	uint32_t ps = w->g->gm.page_size;
	struct gs_graph_delta_hdr *h;
	struct gs_graph_delta_rec *r;
	struct gs_graph_delta_op *o;
	size_t fit;
	int ret;

	if (!w->npages || w->used + DREC + DOP > ps) {
		ret = dpage_open(w);
		if (ret)
			return ret;
	}
	h = (void *)(w->pages + (w->npages - 1) * ps);
	fit = (ps - w->used - DREC) / DOP;
	if (fit > n)
		fit = n;
	if (fit > 0xffff)
		fit = 0xffff;
	r = (void *)((uint8_t *)h + w->used);
	r->vertex = htole64(v);
	r->prev = htole64(prev);
	r->nops = htole16((uint16_t)fit);
	r->dir = (uint8_t)d;
	o = (void *)(r + 1);
	for (size_t k = 0; k < fit; k++) {
		o[k].nbr = htole64(ops[k].nbr);
		o[k].w = htole32(gr_f2u(ops[k].w));
		o[k].op = (uint8_t)ops[k].op;
	}
	*off = w->base + (w->npages - 1) * ps + w->used;
	*took = fit;
	w->used += DREC + (uint32_t)(fit * DOP);
	h->nrec = htole32(le32toh(h->nrec) + 1);
	w->recs++;
	return 0;
}

static void mark_dirty(struct gs_graph *g, unsigned d, uint64_t v)
{
	struct gr_gtt *t = &g->dir[d].gtt;
	uint64_t ins;
	int64_t i = gr_gtt_target(t, v, &ins);

	if (i < 0)
		return;
	for (uint64_t k = 0, n = gr_gtt_group_len(t, (uint64_t)i); k < n; k++)
		t->e[i + k].flags |= GS_GRAPH_GTT_DIRTY;
}

int gr_sync_locked(struct gs_graph *g)
{
	struct dwriter w = { .g = g, .base = le64toh(g->root.delta_len) };
	uint64_t *heads[2] = { NULL, NULL };
	uint32_t *nrec[2] = { NULL, NULL };
	uint64_t dobj = le64toh(g->root.delta_obj);
	int ret = 0;

	if (g->eng != &gr_engine_pages || (g->oflags & GS_GRAPH_RDONLY))
		return 0;
	if (!g->log_ops && g->nv == le64toh(g->root.nv))
		return 0;
	for (unsigned d = 0; d < g->ndirs; d++) {
		struct gr_dir *dr = &g->dir[d];

		heads[d] = malloc((dr->npend + 1) * sizeof(uint64_t));
		nrec[d] = calloc(dr->npend + 1, sizeof(uint32_t));
		if (!heads[d] || !nrec[d]) {
			ret = -ENOMEM;
			goto free_tmp;
		}
		for (uint64_t i = 0; i < dr->npend && !ret; i++) {
			struct gr_pend *p = &dr->pend[i];
			size_t done = 0, took;
			uint64_t head = p->head;

			while (done < p->nops && !ret) {
				ret = put_rec(&w, d, p->v, head, p->ops + done, p->nops - done,
					      &head, &took);
				done += took;
				nrec[d][i]++;
			}
			heads[d][i] = head;
		}
	}
	for (size_t i = 0; i < g->nvops && !ret; i++) {
		uint64_t off;
		size_t took;

		ret = put_rec(&w, GS_GRAPH_DIR_VERTEX, g->vops[i].nbr, GS_GRAPH_NONE, &g->vops[i],
			      1, &off, &took);
	}
	if (ret)
		goto free_tmp;
	if (w.npages) {
		dpage_close(&w);
		ret = gr_store_write_full(g->st, dobj, w.pages, w.npages * g->gm.page_size,
					  w.base);
		if (!ret)
			ret = g->st->ops->sync(g->st, dobj);
		if (ret)
			goto free_tmp;
	}
	/* the ids of added vertices are on disk before a root counts them */
	ret = gr_ids_sync(&g->ids);
	if (ret)
		goto free_tmp;
	g->root.delta_len = htole64(w.base + w.npages * g->gm.page_size);
	g->root.nv = htole64(g->nv);
	g->root.ne = htole64(g->ne);
	ret = gr_root_commit(g);
	if (ret) {
		/* the pages past delta_len are ignored; the log stays as it was */
		g->root.delta_len = htole64(w.base);
		goto free_tmp;
	}
	for (unsigned d = 0; d < g->ndirs; d++) {
		struct gr_dir *dr = &g->dir[d];

		for (uint64_t i = 0; i < dr->npend; i++) {
			struct gr_pend *p = &dr->pend[i];

			if (!p->nops)
				continue;
			p->head = heads[d][i];
			p->chain += nrec[d][i];
			p->nops = 0;
			if (p->chain > g->max_chain)
				g->max_chain = p->chain;
			mark_dirty(g, d, p->v);
		}
	}
	g->delta_recs += w.recs;
	g->nvops = 0;
	g->log_ops = 0;
	__atomic_add_fetch(&g->stats.syncs, 1, __ATOMIC_RELAXED);
free_tmp:
	for (unsigned d = 0; d < 2; d++) {
		free(heads[d]);
		free(nrec[d]);
	}
	free(w.pages);
	return ret;
}

int gs_graph_sync(struct gs_graph *g)
{
	int ret = writable(g);

	if (ret)
		return ret == -EOPNOTSUPP || ret == -EROFS ? 0 : ret;
	pthread_rwlock_wrlock(&g->lock);
	ret = gr_sync_locked(g);
	pthread_rwlock_unlock(&g->lock);
	return ret;
}

/* At open: index the delta records (newest per list wins the head) and
 * replay the vertex records on the removed set. */
int gr_delta_load(struct gs_graph *g)
{
	uint32_t ps = g->gm.page_size;
	uint64_t n = le64toh(g->root.delta_len) / ps;
	struct gr_scratch sc;
	int ret;

	if (!n)
		return 0;
	ret = gr_scratch_init(&sc, ps);
	if (ret)
		return ret;
	for (uint64_t pg = 0; pg < n && !ret; pg++) {
		const struct gs_graph_delta_hdr *h = (const void *)sc.dpage;
		uint32_t at = DHDR;

		ret = delta_page(g, pg, &sc);
		for (uint32_t k = 0; !ret && k < le32toh(h->nrec); k++) {
			const struct gs_graph_delta_rec *r = (const void *)(sc.dpage + at);
			const struct gs_graph_delta_op *op = (const void *)(r + 1);
			uint64_t v = le64toh(r->vertex);
			unsigned nops = le16toh(r->nops);
			bool added;

			if (at + DREC + (uint64_t)nops * DOP > le32toh(h->used) ||
			    r->dir > GS_GRAPH_DIR_VERTEX ||
			    (r->dir < GS_GRAPH_DIR_VERTEX && r->dir >= g->ndirs)) {
				ret = -EIO;
				break;
			}
			if (r->dir == GS_GRAPH_DIR_VERTEX) {
				if (op->op == GS_GRAPH_OP_VDEL)
					ret = gr_map_put(&g->vdel, v, 0, &added) ? 0 : -ENOMEM;
				else
					gr_map_del(&g->vdel, v);
			} else {
				struct gr_pend *p = pend_add(g, r->dir, v);

				if (!p) {
					ret = -ENOMEM;
					break;
				}
				p->head = pg * ps + at;
				p->chain++;
				if (p->chain > g->max_chain)
					g->max_chain = p->chain;
				mark_dirty(g, r->dir, v);
			}
			g->delta_recs++;
			at += DREC + nops * DOP;
		}
	}
	if (ret == -EIO)
		gs_err("graph %" PRIu64 ": delta log is corrupt", g->ino);
	gr_scratch_free(&sc);
	return ret;
}
