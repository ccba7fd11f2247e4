/* SPDX-License-Identifier: MIT */
/*
 * Graph tests' reference: an in-memory adjacency model with the semantics
 * gstore promises (duplicates collapse to the smallest weight, undirected
 * edges in both lists, sorted lists), random graphs with hubs larger than a
 * page and isolated vertices, writers for every import format, and a
 * comparison of a gs_graph with the model.
 */
#ifndef GRAPH_REF_H
#define GRAPH_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gstore_graph.h"

struct ref_adj {
	uint64_t *ids;
	float *w;
	size_t n, cap;
};

struct ref {
	uint64_t nv, ne;
	bool directed, weighted;
	struct ref_adj *a[2];	/* out, in (directed) */
	bool *removed;
	uint64_t vcap;
};

/*
 * Tests of sparse ids set this: the id model vertex v has in the files
 * written and in gstore (unset: v itself).  Every model vertex must then
 * appear in the input (ref_cover_all), and "+v" adds exactly the next one,
 * so gstore's vertex indices are the model's vertices.
 */
static uint64_t (*ref_id)(uint64_t v);

static inline uint64_t rid(uint64_t v)
{
	return ref_id ? ref_id(v) : v;
}

static inline uint64_t ref_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static inline void ref_grow(struct ref *r, uint64_t nv)
{
	if (nv <= r->vcap) {
		if (nv > r->nv)
			r->nv = nv;
		return;
	}
	uint64_t c = r->vcap ? r->vcap : 16;

	while (c < nv)
		c *= 2;
	for (int d = 0; d < 2; d++) {
		r->a[d] = realloc(r->a[d], c * sizeof(*r->a[d]));
		memset(r->a[d] + r->vcap, 0, (c - r->vcap) * sizeof(*r->a[d]));
	}
	r->removed = realloc(r->removed, c);
	memset(r->removed + r->vcap, 0, c - r->vcap);
	r->vcap = c;
	if (nv > r->nv)
		r->nv = nv;
}

static struct ref *ref_new(uint64_t nv, bool directed, bool weighted)
{
	struct ref *r = calloc(1, sizeof(*r));

	r->directed = directed;
	r->weighted = weighted;
	ref_grow(r, nv);
	return r;
}

static inline void ref_free(struct ref *r)
{
	for (int d = 0; d < 2; d++) {
		for (uint64_t v = 0; v < r->vcap; v++) {
			free(r->a[d][v].ids);
			free(r->a[d][v].w);
		}
		free(r->a[d]);
	}
	free(r->removed);
	free(r);
}

static inline int64_t ref_find(const struct ref_adj *a, uint64_t v)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t m = (lo + hi) / 2;

		if (a->ids[m] == v)
			return (int64_t)m;
		if (a->ids[m] < v)
			lo = m + 1;
		else
			hi = m;
	}
	return -(int64_t)lo - 1;
}

/* Insert or lower the weight (import semantics) / set (update semantics). */
static inline void adj_put(struct ref_adj *a, uint64_t v, float w, bool keep_min)
{
	int64_t i = ref_find(a, v);

	if (i >= 0) {
		if (!keep_min || w < a->w[i])
			a->w[i] = w;
		return;
	}
	size_t at = (size_t)(-i - 1);

	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 4;
		a->ids = realloc(a->ids, a->cap * sizeof(*a->ids));
		a->w = realloc(a->w, a->cap * sizeof(*a->w));
	}
	memmove(a->ids + at + 1, a->ids + at, (a->n - at) * sizeof(*a->ids));
	memmove(a->w + at + 1, a->w + at, (a->n - at) * sizeof(*a->w));
	a->ids[at] = v;
	a->w[at] = w;
	a->n++;
}

static inline void adj_del(struct ref_adj *a, uint64_t v)
{
	int64_t i = ref_find(a, v);

	if (i < 0)
		return;
	memmove(a->ids + i, a->ids + i + 1, (a->n - (size_t)i - 1) * sizeof(*a->ids));
	memmove(a->w + i, a->w + i + 1, (a->n - (size_t)i - 1) * sizeof(*a->w));
	a->n--;
}

static inline bool ref_has(const struct ref *r, uint64_t u, uint64_t v)
{
	return u < r->nv && ref_find(&r->a[0][u], v) >= 0;
}

static inline void ref_edge(struct ref *r, uint64_t u, uint64_t v, float w, bool keep_min)
{
	uint64_t m = u > v ? u : v;

	if (m >= r->nv)
		ref_grow(r, m + 1);
	if (!r->weighted)
		w = 1.0f;
	if (!ref_has(r, u, v))
		r->ne++;
	adj_put(&r->a[0][u], v, w, keep_min);
	if (r->directed)
		adj_put(&r->a[1][v], u, w, keep_min);
	else
		adj_put(&r->a[0][v], u, w, keep_min);
}

static inline void ref_unedge(struct ref *r, uint64_t u, uint64_t v)
{
	if (!ref_has(r, u, v))
		return;
	r->ne--;
	adj_del(&r->a[0][u], v);
	if (r->directed)
		adj_del(&r->a[1][v], u);
	else
		adj_del(&r->a[0][v], u);
}

static inline void ref_del_vertex(struct ref *r, uint64_t v)
{
	while (r->a[0][v].n)
		ref_unedge(r, v, r->a[0][v].ids[0]);
	if (r->directed)
		while (r->a[1][v].n)
			ref_unedge(r, r->a[1][v].ids[0], v);
	r->removed[v] = true;
}

/*
 * A random input edge list: skewed (a few hubs with more neighbours than a
 * page holds), duplicates and self loops, and the top ids left isolated.
 */
struct ref_in {
	uint64_t *u, *v;
	float *w;
	size_t n;
};

static inline struct ref_in ref_random_input(uint64_t nv, size_t ne, unsigned hubs, unsigned hubdeg,
				      bool int_weights, uint64_t seed)
{
	struct ref_in in;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 7;
	size_t k = 0, cap = ne + ne / 90 + (size_t)hubs * hubdeg + 16;
	uint64_t live = nv - nv / 10;	/* the last tenth stays isolated */

	in.u = malloc(cap * sizeof(*in.u));
	in.v = malloc(cap * sizeof(*in.v));
	in.w = malloc(cap * sizeof(*in.w));
	for (unsigned h = 0; h < hubs; h++) {
		uint64_t hub = ref_rand(&x) % live;

		for (unsigned i = 0; i < hubdeg; i++, k++) {
			in.u[k] = hub;
			in.v[k] = ref_rand(&x) % live;
			in.w[k] = int_weights ? (float)(ref_rand(&x) % 100) :
				  (float)(ref_rand(&x) % 100000) / 997.0f;
		}
	}
	for (size_t i = 0; i < ne; i++, k++) {
		in.u[k] = ref_rand(&x) % live;
		in.v[k] = i % 50 == 0 ? in.u[k] : ref_rand(&x) % live;	/* some loops */
		in.w[k] = int_weights ? (float)(ref_rand(&x) % 100) :
			  (float)(ref_rand(&x) % 100000) / 997.0f;
		if (i % 97 == 0 && k) {	/* a duplicate with another weight */
			k++;
			in.u[k] = in.u[k - 1];
			in.v[k] = in.v[k - 1];
			in.w[k] = in.w[k - 1] + 1;
		}
	}
	in.n = k;
	return in;
}

/* Give every vertex below @nv an edge (to a random one) if none has it. */
static inline void ref_cover_all(struct ref_in *in, uint64_t nv, uint64_t seed)
{
	uint8_t *seen = calloc(nv, 1);
	size_t k = in->n;

	for (size_t i = 0; i < in->n; i++)
		seen[in->u[i]] = seen[in->v[i]] = 1;
	in->u = realloc(in->u, (in->n + nv) * sizeof(*in->u));
	in->v = realloc(in->v, (in->n + nv) * sizeof(*in->v));
	in->w = realloc(in->w, (in->n + nv) * sizeof(*in->w));
	for (uint64_t v = 0; v < nv; v++)
		if (!seen[v]) {
			in->u[k] = v;
			in->v[k] = ref_rand(&seed) % nv;
			in->w[k++] = 1.0f;
		}
	in->n = k;
	free(seen);
}

static inline void ref_in_free(struct ref_in *in)
{
	free(in->u);
	free(in->v);
	free(in->w);
}

static struct ref *ref_from_input(const struct ref_in *in, uint64_t nv, bool directed,
				  bool weighted)
{
	struct ref *r = ref_new(nv, directed, weighted);

	for (size_t i = 0; i < in->n; i++)
		ref_edge(r, in->u[i], in->v[i], in->w[i], true);
	return r;
}

/* ---- writers ---- */

static inline void write_text(const char *path, const struct ref_in *in, bool directed,
			      bool weighted)
{
	FILE *f = fopen(path, "w");

	fprintf(f, "# %s graph for gstore tests\n%% another comment style\n",
		directed ? "Directed" : "Undirected");
	for (size_t i = 0; i < in->n; i++) {
		if (weighted)
			fprintf(f, i % 3 ? "%llu\t%llu\t%.9g\n" : "  %llu %llu %.9g\r\n",
				(unsigned long long)rid(in->u[i]), (unsigned long long)rid(in->v[i]),
				(double)in->w[i]);
		else
			fprintf(f, i % 3 ? "%llu\t%llu\n" : "%llu  %llu\n",
				(unsigned long long)rid(in->u[i]), (unsigned long long)rid(in->v[i]));
		if (i % 1000 == 0)
			fprintf(f, "\n# a comment in the middle\n");
	}
	fclose(f);
}

static inline void write_mtx(const char *path, const struct ref_in *in, uint64_t nv, bool directed,
		      bool weighted)
{
	FILE *f = fopen(path, "w");

	fprintf(f, "%%%%MatrixMarket matrix coordinate %s %s\n%% comment\n",
		weighted ? "real" : "pattern", directed ? "general" : "symmetric");
	fprintf(f, "%llu %llu %zu\n", (unsigned long long)nv, (unsigned long long)nv, in->n);
	for (size_t i = 0; i < in->n; i++) {
		if (weighted)
			fprintf(f, "%llu %llu %.9g\n", (unsigned long long)in->u[i] + 1,
				(unsigned long long)in->v[i] + 1, (double)in->w[i]);
		else
			fprintf(f, "%llu %llu\n", (unsigned long long)in->u[i] + 1,
				(unsigned long long)in->v[i] + 1);
	}
	fclose(f);
}

/* GAP .sg/.wsg from the reference's out lists (undirected: both directions,
 * directed: then the inverse lists); weights must be integers. */
static inline void write_sg(const char *path, const struct ref *r, bool weighted)
{
	FILE *f = fopen(path, "wb");
	uint8_t directed = r->directed;
	int64_t ne = 0, nv = (int64_t)r->nv;

	for (uint64_t v = 0; v < r->nv; v++)
		ne += (int64_t)r->a[0][v].n;
	fwrite(&directed, 1, 1, f);
	fwrite(&ne, 8, 1, f);
	fwrite(&nv, 8, 1, f);
	for (int d = 0; d < 1 + r->directed; d++) {
		int64_t off = 0;

		fwrite(&off, 8, 1, f);
		for (uint64_t v = 0; v < r->nv; v++) {
			off += (int64_t)r->a[d][v].n;
			fwrite(&off, 8, 1, f);
		}
		for (uint64_t v = 0; v < r->nv; v++)
			for (size_t i = 0; i < r->a[d][v].n; i++) {
				int32_t x[2] = { (int32_t)r->a[d][v].ids[i],
						 (int32_t)r->a[d][v].w[i] };

				fwrite(x, 4, weighted ? 2 : 1, f);
			}
	}
	fclose(f);
}

/* ---- comparison ---- */

struct ref_idw {
	uint64_t id;
	float w;
};

static inline int ref_cmp_idw(const void *a, const void *b)
{
	const struct ref_idw *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* 0 if every vertex's lists (and weights) equal the model's; prints the
 * first difference. */
static inline int ref_compare(const struct ref *r, struct gs_graph *g)
{
	struct gs_graph_info gi;
	uint64_t *ids = NULL;
	float *w = NULL;
	struct ref_idw *want = NULL;
	size_t cap = 0;

	gs_graph_info(g, &gi);
	if (gi.nv != r->nv || gi.ne != r->ne || gi.directed != r->directed ||
	    gi.weighted != r->weighted) {
		printf("info: nv %llu/%llu ne %llu/%llu directed %u/%d weighted %u/%d\n",
		       (unsigned long long)gi.nv, (unsigned long long)r->nv,
		       (unsigned long long)gi.ne, (unsigned long long)r->ne, gi.directed,
		       r->directed, gi.weighted, r->weighted);
		return -1;
	}
	for (uint64_t v = 0; v < r->nv; v++) {
		for (unsigned d = 0; d < 2; d++) {
			const struct ref_adj *a = &r->a[r->directed ? d : 0][v];
			int64_t deg = gs_graph_degree(g, rid(v), d), n;

			if (r->removed[v]) {
				if (deg != -ENOENT) {
					printf("removed vertex %llu: degree %lld\n",
					       (unsigned long long)v, (long long)deg);
					return -1;
				}
				continue;
			}
			if (deg != (int64_t)a->n) {
				printf("vertex %llu dir %u: degree %lld, expected %zu\n",
				       (unsigned long long)v, d, (long long)deg, a->n);
				return -1;
			}
			if ((size_t)deg > cap) {
				cap = (size_t)deg * 2;
				ids = realloc(ids, cap * sizeof(*ids));
				w = realloc(w, cap * sizeof(*w));
				want = realloc(want, cap * sizeof(*want));
			}
			/* by id, as gstore answers */
			for (size_t i = 0; i < a->n; i++)
				want[i] = (struct ref_idw){ rid(a->ids[i]), a->w[i] };
			qsort(want, a->n, sizeof(*want), ref_cmp_idw);
			n = gs_graph_neighbors(g, rid(v), d, ids, w, cap);
			if (n != deg) {
				printf("vertex %llu: %lld neighbours, degree %lld\n",
				       (unsigned long long)v, (long long)n, (long long)deg);
				return -1;
			}
			for (int64_t i = 0; i < n; i++)
				if (ids[i] != want[i].id || w[i] != want[i].w) {
					printf("vertex %llu dir %u [%lld]: %llu/%g, want %llu/%g\n",
					       (unsigned long long)v, d, (long long)i,
					       (unsigned long long)ids[i], (double)w[i],
					       (unsigned long long)want[i].id, (double)want[i].w);
					return -1;
				}
		}
	}
	if (gs_graph_degree(g, rid(r->nv), 0) != -ENOENT) {
		printf("vertex nv answered\n");
		return -1;
	}
	free(ids);
	free(w);
	free(want);
	return 0;
}

/* A random valid update batch (text) applied to the model as well. */
static inline size_t ref_random_updates(struct ref *r, uint64_t *x, char *buf, size_t size,
				 unsigned count)
{
	size_t len = 0;

	for (unsigned i = 0; i < count && len + 128 < size; i++) {
		unsigned what = (unsigned)(ref_rand(x) % 100);
		uint64_t u = ref_rand(x) % r->nv, v = ref_rand(x) % r->nv;
		float w = (float)(ref_rand(x) % 1000) / 8.0f;

		if (r->removed[u] || r->removed[v])
			continue;
		if (what < 55) {
			if (ref_has(r, u, v))
				continue;
			ref_edge(r, u, v, w, false);
			len += (size_t)(r->weighted ?
				snprintf(buf + len, size - len, "+ %llu %llu %.9g\n",
					 (unsigned long long)rid(u), (unsigned long long)rid(v),
					 (double)w) :
				snprintf(buf + len, size - len, "+ %llu %llu\n",
					 (unsigned long long)rid(u), (unsigned long long)rid(v)));
		} else if (what < 85) {
			const struct ref_adj *a = &r->a[0][u];

			if (!a->n)
				continue;
			v = a->ids[ref_rand(x) % a->n];
			ref_unedge(r, u, v);
			len += (size_t)snprintf(buf + len, size - len, "- %llu %llu\n",
						(unsigned long long)rid(u), (unsigned long long)rid(v));
		} else if (what < 95 && r->weighted) {
			const struct ref_adj *a = &r->a[0][u];

			if (!a->n)
				continue;
			v = a->ids[ref_rand(x) % a->n];
			ref_edge(r, u, v, w, false);
			len += (size_t)snprintf(buf + len, size - len, "= %llu %llu %.9g\n",
						(unsigned long long)rid(u), (unsigned long long)rid(v),
						(double)w);
		} else if (what < 98) {
			/* sparse ids: a new id is one vertex, nothing below it */
			uint64_t nv = r->nv + 1 + (ref_id ? 0 : ref_rand(x) % 3);

			ref_grow(r, nv);
			len += (size_t)snprintf(buf + len, size - len, "+v %llu\n",
						(unsigned long long)rid(nv - 1));
		} else {
			ref_del_vertex(r, u);
			len += (size_t)snprintf(buf + len, size - len, "-v %llu\n",
						(unsigned long long)rid(u));
		}
	}
	return len;
}

#endif /* GRAPH_REF_H */
