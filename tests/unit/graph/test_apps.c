// SPDX-License-Identifier: MIT
/*
 * Graph apps against sequential reference implementations on the same
 * graphs: bfs depths, component labels, pagerank (within 1e-6), random
 * walks, MIS (equal to sequential Luby, and independent + maximal); on
 * pages, after updates (folded from the log and the delta), after a merge.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../../fs/graph/graph_internal.h"
#include "graph_ref.h"

/* ---- references ---- */

static const struct ref_adj *nb(const struct ref *r, unsigned d, uint64_t v)
{
	return &r->a[r->directed ? d : 0][v];
}

static void ref_bfs(const struct ref *r, uint64_t src, int64_t *depth)
{
	uint64_t *q = malloc(r->nv * sizeof(*q)), h = 0, t = 0;

	for (uint64_t v = 0; v < r->nv; v++)
		depth[v] = -1;
	depth[src] = 0;
	q[t++] = src;
	while (h < t) {
		uint64_t v = q[h++];
		const struct ref_adj *a = nb(r, 0, v);

		for (size_t i = 0; i < a->n; i++)
			if (depth[a->ids[i]] < 0) {
				depth[a->ids[i]] = depth[v] + 1;
				q[t++] = a->ids[i];
			}
	}
	free(q);
}

static uint64_t find(uint64_t *p, uint64_t x)
{
	while (p[x] != x)
		x = p[x] = p[p[x]];
	return x;
}

static void ref_cc(const struct ref *r, uint64_t *label)
{
	uint64_t *p = malloc(r->nv * sizeof(*p));

	for (uint64_t v = 0; v < r->nv; v++)
		p[v] = v;
	for (uint64_t v = 0; v < r->nv; v++)
		for (size_t i = 0; i < r->a[0][v].n; i++) {
			uint64_t a = find(p, v), b = find(p, r->a[0][v].ids[i]);

			if (a != b)
				p[a > b ? a : b] = a < b ? a : b;	/* smaller id: root */
		}
	for (uint64_t v = 0; v < r->nv; v++)
		label[v] = find(p, v);
	free(p);
}

static void ref_pagerank(const struct ref *r, double d, unsigned iters, double *rank)
{
	uint64_t n = r->nv;
	double *next = malloc(n * sizeof(*next));

	for (uint64_t v = 0; v < n; v++)
		rank[v] = 1.0 / (double)n;
	for (unsigned it = 0; it < iters; it++) {
		double dangling = 0, base;

		for (uint64_t v = 0; v < n; v++)
			if (!nb(r, 0, v)->n)
				dangling += rank[v];
		base = (1.0 - d) / (double)n + d * dangling / (double)n;
		for (uint64_t v = 0; v < n; v++) {
			const struct ref_adj *in = nb(r, 1, v);
			double s = 0;

			for (size_t i = 0; i < in->n; i++)
				s += rank[in->ids[i]] / (double)nb(r, 0, in->ids[i])->n;
			next[v] = base + d * s;
		}
		memcpy(rank, next, n * sizeof(*rank));
	}
	free(next);
}

/* The library's hash, for the walk and MIS references. */
static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ULL ^
		     (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
		     (c + 1) * 0x94d049bb133111ebULL;

	x ^= x >> 31;
	x *= 0xd6e8feb86659fd93ULL;
	return x ^ (x >> 32);
}

static bool adjacent_any(const struct ref *r, uint64_t v, const uint8_t *set, uint8_t val)
{
	for (unsigned d = 0; d < 1u + r->directed; d++) {
		const struct ref_adj *a = nb(r, d, v);

		for (size_t i = 0; i < a->n; i++)
			if (a->ids[i] != v && set[a->ids[i]] == val)
				return true;
	}
	return false;
}

static void ref_mis(const struct ref *r, uint64_t seed, uint8_t *state)
{
	bool left = true;

	for (uint64_t v = 0; v < r->nv; v++)
		state[v] = r->removed[v] ? 2 : 0;	/* 0 undecided, 1 in, 2 out */
	while (left) {
		uint8_t *win = calloc(r->nv, 1);

		left = false;
		for (uint64_t v = 0; v < r->nv; v++) {
			bool lose = false;

			if (state[v])
				continue;
			for (unsigned d = 0; d < 1u + r->directed && !lose; d++) {
				const struct ref_adj *a = nb(r, d, v);

				for (size_t i = 0; i < a->n && !lose; i++) {
					uint64_t u = a->ids[i];
					uint64_t pu = mix(seed, u, 0), pv = mix(seed, v, 0);

					lose = u != v && !state[u] &&
					       (pu < pv || (pu == pv && u < v));
				}
			}
			win[v] = !lose;
		}
		for (uint64_t v = 0; v < r->nv; v++)
			if (win[v])
				state[v] = 1;
		for (uint64_t v = 0; v < r->nv; v++)
			if (!state[v] && adjacent_any(r, v, state, 1))
				state[v] = 2;
		for (uint64_t v = 0; v < r->nv; v++)
			left |= !state[v];
		free(win);
	}
}

/* ---- the graph ---- */

static char tmpdir[] = "/tmp/gstore-apps-test-XXXXXX";

static uint64_t sparse_base;

/* Sparse ids (graph_ref.h's ref_id): the import's spread far apart, the
 * updates' below them; indices stay the model's vertices. */
static uint64_t sparse_id(uint64_t v)
{
	return v < sparse_base ? (5ULL << 32) + v * 999983 : 100 + v - sparse_base;
}

static struct gs_graph *make(bool directed, uint64_t nv, uint64_t seed, struct gr_store **stp,
			     struct ref **rp)
{
	struct ref_in in = ref_random_input(nv, nv * 3, 2, 600, false, seed);
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .nv = ref_id ? 0 : nv,
		.flags = directed ? GS_GRAPH_IMPORT_DIRECTED : GS_GRAPH_IMPORT_UNDIRECTED,
	};
	struct gr_store *st;
	struct gs_graph *g;
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/g.txt", tmpdir);
	if (ref_id)
		ref_cover_all(&in, nv, seed);
	write_text(path, &in, directed, false);
	*rp = ref_from_input(&in, nv, directed, false);
	assert_int_equal(gr_mem_store_new(&st, 1024), 0);
	st->borrowed = true;
	fd = open(path, O_RDONLY);
	assert_int_equal(gr_build(st, fd, &o), 0);
	close(fd);
	assert_int_equal(gr_graph_open_store(st, NULL, 0, 0, &g), 0);
	assert_int_equal(gs_graph_set_workers(g, 3), 0);
	struct gs_graph_info gi;

	gs_graph_info(g, &gi);
	assert_int_equal(gi.id_map, ref_id != NULL);
	ref_in_free(&in);
	*stp = st;
	return g;
}

static void check_apps(struct gs_graph *g, const struct ref *r)
{
	struct gs_graph_app_opts o = { .batch = 100 };
	uint64_t nv = r->nv, *l1 = malloc(nv * 8), *l2 = malloc(nv * 8);
	int64_t *d1 = malloc(nv * 8), *d2 = malloc(nv * 8);
	double *p1 = malloc(nv * 8), *p2 = malloc(nv * 8);
	uint8_t *m1 = malloc(nv), *m2 = malloc(nv);
	uint64_t starts[50], paths[50 * 11];

	for (uint64_t src = 0; src < 3; src++) {
		if (r->removed[src * 37])
			continue;
		assert_int_equal(gs_graph_bfs(g, rid(src * 37), d1, &o), 0);
		ref_bfs(r, src * 37, d2);
		assert_memory_equal(d1, d2, nv * 8);
	}
	assert_true(gs_graph_cc(g, l1, &o) > 0);
	ref_cc(r, l2);
	assert_memory_equal(l1, l2, nv * 8);
	assert_int_equal(gs_graph_pagerank(g, 0.85, 12, p1, &o), 0);
	ref_pagerank(r, 0.85, 12, p2);
	for (uint64_t v = 0; v < nv; v++)
		if (fabs(p1[v] - p2[v]) > 1e-6)
			fail_msg("pagerank[%llu] %g vs %g", (unsigned long long)v, p1[v], p2[v]);
	for (int i = 0; i < 50; i++)
		starts[i] = rid((uint64_t)i * 13 % nv);
	assert_int_equal(gs_graph_randomwalk(g, starts, 50, 10, 7, paths, &o), 0);
	for (int i = 0; i < 50; i++)
		for (unsigned s = 0; s < 10; s++) {
			uint64_t v = paths[i * 11 + s], w = paths[i * 11 + s + 1];
			const struct ref_adj *a;

			/* paths are ids; the walk picks by index order (the model's) */
			if (v == GS_GRAPH_NO_VERTEX || gs_graph_vertex_index(g, v, &v)) {
				assert_true(w == GS_GRAPH_NO_VERTEX);
				continue;
			}
			a = nb(r, 0, v);
			if (!a->n)
				assert_true(w == GS_GRAPH_NO_VERTEX);
			else
				assert_true(w == rid(a->ids[mix(7, (uint64_t)i, s) % a->n]));
		}
	int64_t size = gs_graph_mis(g, 3, m1, &o);

	assert_true(size > 0);
	ref_mis(r, 3, m2);
	for (uint64_t v = 0; v < nv; v++) {
		assert_int_equal(m1[v], m2[v] == 1);
		/* independent and maximal, checked directly */
		if (r->removed[v])
			assert_int_equal(m1[v], 0);
		else if (m1[v])
			assert_false(adjacent_any(r, v, m1, 1));
		else
			assert_true(adjacent_any(r, v, m1, 1));
	}
	free(l1);
	free(l2);
	free(d1);
	free(d2);
	free(p1);
	free(p2);
	free(m1);
	free(m2);
}

static void apps_on(bool directed)
{
	struct gr_store *st;
	struct ref *r;
	struct gs_graph *g = make(directed, 1500, 21 + directed, &st, &r);
	uint64_t x = 77;
	char *buf = malloc(1 << 20);

	check_apps(g, r);
	/* updates in the log, then in the delta, then merged */
	ref_random_updates(r, &x, buf, 1 << 20, 400);
	assert_true(gs_graph_update(g, buf, strlen(buf), NULL) >= 0);
	check_apps(g, r);
	assert_int_equal(gs_graph_sync(g), 0);
	check_apps(g, r);
	assert_int_equal(gs_graph_merge(g), 0);
	check_apps(g, r);
	gs_graph_close(g);
	st->ops->destroy(st);
	ref_free(r);
	free(buf);
}

static void test_apps_undirected(void **state)
{
	apps_on(false);
}

static void test_apps_directed(void **state)
{
	apps_on(true);
}

/* The same on graphs with sparse ids: arrays by index, vertices by id. */
static void test_apps_sparse(void **state)
{
	sparse_base = 1500;
	ref_id = sparse_id;
	apps_on(false);
	apps_on(true);
	ref_id = NULL;
}

static int setup(void **state)
{
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apps_undirected),
		cmocka_unit_test(test_apps_directed),
		cmocka_unit_test(test_apps_sparse),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
