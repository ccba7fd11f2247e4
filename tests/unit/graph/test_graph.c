// SPDX-License-Identifier: MIT
/*
 * Graph objects over the memory page store: import from every format
 * (directed/undirected, weighted, hubs larger than a page, isolated
 * vertices) against the in-memory reference; random update batches,
 * merges, reopening; all-or-nothing update errors; power cuts during sync
 * and merge; the queues; the page codec (varint lists, fixed-width lists
 * of graphs built before it, malformed lists).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../../fs/graph/graph_internal.h"
#include "graph_ref.h"

static char tmpdir[] = "/tmp/gstore-graph-test-XXXXXX";
static uint32_t extra_flags;	/* ORed into every import: GS_GRAPH_IMPORT_FIXED */

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

static struct gr_store *new_store(uint32_t page)
{
	struct gr_store *st;

	assert_int_equal(gr_mem_store_new(&st, page), 0);
	st->borrowed = true;
	return st;
}

static int build_file(struct gr_store *st, const char *path, struct gs_graph_import_opts *o)
{
	int fd = open(path, O_RDONLY);
	int ret;

	assert_true(fd >= 0);
	if (!o->format)
		o->format = (uint32_t)gr_detect_format(fd, path);
	o->flags |= extra_flags;
	ret = gr_build(st, fd, o);
	close(fd);
	return ret;
}

static struct gs_graph *open_g(struct gr_store *st)
{
	struct gs_graph *g = NULL;

	assert_int_equal(gr_graph_open_store(st, NULL, 0, 0, &g), 0);
	return g;
}

/* Build @text (an edge list) into @st and open it. */
static struct gs_graph *build_text(struct gr_store *st, const char *text,
				   struct gs_graph_import_opts *o)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/text.in", tmpdir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	assert_int_equal(build_file(st, path, o), 0);
	unlink(path);
	return open_g(st);
}

static void check(const struct ref *r, struct gs_graph *g)
{
	assert_int_equal(ref_compare(r, g), 0);
}

/* One format x direction x weights: build, compare. */
static void one_import(int fmt, bool directed, bool weighted, uint32_t page, size_t mem)
{
	uint64_t nv = 3000;
	struct ref_in in = ref_random_input(nv, 12000, 3, 1400, fmt >= GS_GRAPH_FMT_SG,
					    (uint64_t)fmt * 4 + directed * 2 + weighted);
	struct ref *r = ref_from_input(&in, nv, directed, weighted);
	struct gs_graph_import_opts o = {
		.format = (uint32_t)fmt, .nv = nv, .mem_bytes = mem, .tmpdir = tmpdir,
		.flags = (directed ? GS_GRAPH_IMPORT_DIRECTED : GS_GRAPH_IMPORT_UNDIRECTED) |
			 (weighted ? GS_GRAPH_IMPORT_WEIGHTED : GS_GRAPH_IMPORT_UNWEIGHTED),
	};
	struct gr_store *st = new_store(page);
	char path[256], err[256];
	struct gs_graph *g;

	o.err = err;
	o.errlen = sizeof(err);
	snprintf(path, sizeof(path), "%s/in.%d", tmpdir, fmt);
	if (fmt == GS_GRAPH_FMT_TEXT)
		write_text(path, &in, directed, weighted);
	else if (fmt == GS_GRAPH_FMT_MTX)
		write_mtx(path, &in, nv, directed, weighted);
	else
		write_sg(path, r, fmt == GS_GRAPH_FMT_WSG);
	if (build_file(st, path, &o))
		fail_msg("import: %s", err);
	g = open_g(st);
	check(r, g);
	assert_int_equal(!!(le32toh(g->root.flags) & GS_GRAPH_F_VARINT),
			 !(extra_flags & GS_GRAPH_IMPORT_FIXED));
	assert_int_equal(gs_graph_close(g), 0);
	st->ops->destroy(st);
	ref_free(r);
	ref_in_free(&in);
}

static void test_import_formats(void **state)
{
	for (int d = 0; d < 2; d++)
		for (int w = 0; w < 2; w++) {
			one_import(GS_GRAPH_FMT_TEXT, d, w, 4096, 0);
			one_import(GS_GRAPH_FMT_MTX, d, w, 4096, 0);
		}
	one_import(GS_GRAPH_FMT_SG, false, false, 4096, 0);
	one_import(GS_GRAPH_FMT_SG, true, false, 4096, 0);
	one_import(GS_GRAPH_FMT_WSG, false, true, 4096, 0);
	one_import(GS_GRAPH_FMT_WSG, true, true, 4096, 0);
	/* coded hubs of 1400 entries fit a 4 KiB page: small pages make them large */
	one_import(GS_GRAPH_FMT_TEXT, true, true, 512, 0);
	one_import(GS_GRAPH_FMT_MTX, false, false, 512, 0);
}

/* A tiny sort budget: the edges go through many runs and a heap merge. */
static void test_import_external_sort(void **state)
{
	one_import(GS_GRAPH_FMT_TEXT, true, true, 4096, 64 << 10);
	one_import(GS_GRAPH_FMT_TEXT, false, false, 1024, 64 << 10);
}

/* What the file says decides directed/weighted when no flag does. */
static void test_import_auto(void **state)
{
	struct gs_graph_import_opts o = { 0 };
	struct gr_store *st = new_store(4096);
	struct gs_graph *g = build_text(st, "# Undirected graph: test\n0 1 2.5\n1 2 0.5\n7 7 1\n",
					&o);
	struct gs_graph_info gi;

	gs_graph_info(g, &gi);
	assert_int_equal(gi.directed, 0);
	assert_int_equal(gi.weighted, 1);
	assert_int_equal(gi.nv, 8);
	assert_int_equal(gi.ne, 3);
	assert_int_equal(gi.id_bytes, 4);
	assert_int_equal(gs_graph_degree(g, 1, GS_GRAPH_OUT), 2);
	assert_int_equal(gs_graph_degree(g, 1, GS_GRAPH_IN), 2);
	assert_int_equal(gs_graph_degree(g, 5, GS_GRAPH_OUT), 0);
	assert_int_equal(gs_graph_degree(g, 8, GS_GRAPH_OUT), -ENOENT);
	float w;

	assert_int_equal(gs_graph_edge_weight(g, 2, 1, &w), 0);
	assert_true(w == 0.5f);
	assert_int_equal(gs_graph_edge_weight(g, 2, 0, &w), -ENOENT);
	gs_graph_close(g);
	st->ops->destroy(st);
}

static void expect_error(const char *text, int fmt, const char *needle)
{
	const char *p = "/tmp/gstore-graph-bad.in";
	struct gs_graph_import_opts o = { .format = (uint32_t)fmt };
	struct gr_store *st = new_store(4096);
	char err[256] = "";
	FILE *f = fopen(p, "w");

	fputs(text, f);
	fclose(f);
	o.err = err;
	o.errlen = sizeof(err);
	assert_int_equal(build_file(st, p, &o), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("error '%s' does not name '%s'", err, needle);
	/* nothing was published: no root */
	struct gs_graph *g = NULL;

	assert_int_equal(gr_graph_open_store(st, NULL, 0, 0, &g), -ENODATA);
	st->ops->destroy(st);
	unlink(p);
}

static void test_import_errors(void **state)
{
	expect_error("0 1\n1 2\n# fine\n3 x\n", GS_GRAPH_FMT_TEXT, "line 4");
	expect_error("0 1\n5\n", GS_GRAPH_FMT_TEXT, "line 2");
	expect_error("0 1\n-1 2\n", GS_GRAPH_FMT_TEXT, "line 2");
	expect_error("0 1 1.0\n1 2 abc\n", GS_GRAPH_FMT_TEXT, "line 2");
	expect_error("0 99999999999999999999999 1.0\n", GS_GRAPH_FMT_TEXT, "line 1");
	expect_error("%%MatrixMarket matrix array real general\n", GS_GRAPH_FMT_MTX, "line 1");
	expect_error("%%MatrixMarket matrix coordinate complex general\n", GS_GRAPH_FMT_MTX,
		     "line 1");
	expect_error("%%MatrixMarket matrix coordinate pattern general\n% c\n3 3 2\n1 2\n4 1\n",
		     GS_GRAPH_FMT_MTX, "line 5");
	expect_error("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n",
		     GS_GRAPH_FMT_MTX, "line 3");
	expect_error("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 1\n2 3 1\n",
		     GS_GRAPH_FMT_MTX, "line 4");
	expect_error("%%MatrixMarket matrix coordinate real general\n3 3 1\n0 2 1\n",
		     GS_GRAPH_FMT_MTX, "line 3");
	expect_error("\001\002", GS_GRAPH_FMT_SG, "byte 0");
}

/* ---- updates ---- */

static void update_ok(struct gs_graph *g, const char *text)
{
	uint64_t line;
	int ret = gs_graph_update(g, text, strlen(text), &line);

	if (ret < 0)
		fail_msg("update failed: %d at line %llu of:\n%s", ret, (unsigned long long)line,
			 text);
}

static void test_update_errors(void **state)
{
	const char *p = "/tmp/gstore-graph-upd.txt";
	struct gs_graph_import_opts o = { .flags = GS_GRAPH_IMPORT_DIRECTED |
						   GS_GRAPH_IMPORT_WEIGHTED };
	struct gr_store *st = new_store(4096);
	struct gs_graph *g;
	uint64_t line;
	float w;
	FILE *f = fopen(p, "w");

	fprintf(f, "0 1 1\n1 2 2\n2 0 3\n3 4 4\n");
	fclose(f);
	assert_int_equal(build_file(st, p, &o), 0);
	g = open_g(st);
	/* all or nothing: the good lines before a bad one are undone */
	const char *bad = "+ 0 2 5\n- 1 2\n- 0 3\n";

	assert_int_equal(gs_graph_update(g, bad, strlen(bad), &line), -ENOENT);
	assert_int_equal(line, 3);
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_OUT), 1);
	assert_int_equal(gs_graph_degree(g, 1, GS_GRAPH_OUT), 1);
	assert_int_equal(gs_graph_degree(g, 2, GS_GRAPH_IN), 1);
	assert_int_equal(gs_graph_update(g, "+ 0 1", 5, &line), -EEXIST);
	assert_int_equal(gs_graph_update(g, "= 4 3 1", 7, &line), -ENOENT);
	assert_int_equal(gs_graph_update(g, "+ 0 9", 5, &line), -ENOENT);
	assert_int_equal(gs_graph_update(g, "+ 0 x", 5, &line), -EINVAL);
	assert_int_equal(gs_graph_update(g, "* 0 1", 5, &line), -EINVAL);
	assert_int_equal(gs_graph_update(g, "+v 3", 4, &line), -EEXIST);
	assert_int_equal(gs_graph_update(g, "-v 7", 4, &line), -ENOENT);
	assert_int_equal(gs_graph_update(g, "+ 0 3 1 2", 9, &line), -EINVAL);
	/* comments, blanks, then a mix */
	update_ok(g, "# c\n\n+ 0 2 5\n= 0 1 7.5\n- 3 4\n+v 9\n+ 9 0\n");
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_OUT), 2);
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_IN), 2);
	assert_int_equal(gs_graph_edge_weight(g, 0, 1, &w), 0);
	assert_true(w == 7.5f);
	assert_int_equal(gs_graph_edge_weight(g, 9, 0, &w), 0);
	assert_true(w == 1.0f);
	assert_int_equal(gs_graph_degree(g, 8, GS_GRAPH_OUT), 0);
	update_ok(g, "-v 0\n");
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_OUT), -ENOENT);
	assert_int_equal(gs_graph_degree(g, 2, GS_GRAPH_OUT), 0);
	assert_int_equal(gs_graph_degree(g, 1, GS_GRAPH_IN), 0);
	assert_int_equal(gs_graph_update(g, "+ 1 0", 5, &line), -ENOENT);
	update_ok(g, "+v 0\n+ 1 0 2\n");
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_IN), 1);
	assert_int_equal(gs_graph_sync(g), 0);
	assert_int_equal(gs_graph_merge(g), 0);
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_IN), 1);
	assert_int_equal(gs_graph_close(g), 0);
	g = open_g(st);
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_IN), 1);
	assert_int_equal(gs_graph_degree(g, 9, GS_GRAPH_OUT), 0);
	assert_int_equal(gs_graph_degree(g, 10, GS_GRAPH_OUT), -ENOENT);
	assert_int_equal(gs_graph_close(g), 0);
	st->ops->destroy(st);
	unlink(p);
}

static struct ref *ref_clone(const struct ref *r)
{
	struct ref *c = ref_new(r->nv, r->directed, r->weighted);

	for (int d = 0; d < 2; d++)
		for (uint64_t v = 0; v < r->nv; v++)
			for (size_t i = 0; i < r->a[d][v].n; i++)
				adj_put(&c->a[d][v], r->a[d][v].ids[i], r->a[d][v].w[i], false);
	memcpy(c->removed, r->removed, r->nv);
	c->ne = r->ne;
	return c;
}

static struct gr_store *random_graph(bool directed, bool weighted, uint32_t page, uint64_t nv,
				     uint64_t seed, struct ref **rp)
{
	struct ref_in in = ref_random_input(nv, nv * 4, 2, 300, false, seed);
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .nv = nv, .chain_max = 6,
		.flags = (directed ? GS_GRAPH_IMPORT_DIRECTED : GS_GRAPH_IMPORT_UNDIRECTED) |
			 (weighted ? GS_GRAPH_IMPORT_WEIGHTED : GS_GRAPH_IMPORT_UNWEIGHTED),
	};
	struct gr_store *st = new_store(page);
	char path[256];

	snprintf(path, sizeof(path), "%s/rnd.txt", tmpdir);
	write_text(path, &in, directed, weighted);
	*rp = ref_from_input(&in, nv, directed, weighted);
	assert_int_equal(build_file(st, path, &o), 0);
	ref_in_free(&in);
	return st;
}

/* @rounds random batches of base + 20 * round updates with syncs, merges
 * and reopens among them, each checked; returns the graph open again. */
static struct gs_graph *update_rounds(struct gr_store *st, struct gs_graph *g, struct ref *r,
				      uint64_t *x, char *buf, int rounds, unsigned base)
{
	for (int round = 0; round < rounds; round++) {
		ref_random_updates(r, x, buf, 1 << 20, base + (unsigned)round * 20);
		update_ok(g, buf);
		check(r, g);
		if (round % 3 == 1)
			assert_int_equal(gs_graph_sync(g), 0);
		if (round % 5 == 4)
			assert_int_equal(gs_graph_merge(g), 0);
		if (round % 4 == 3) {
			assert_int_equal(gs_graph_close(g), 0);
			g = open_g(st);
		}
		check(r, g);
	}
	return g;
}

/* Random batches, syncs, merges (explicit and by chain length), reopens. */
static void updates_cycle(bool directed, bool weighted, uint32_t page)
{
	struct ref *r;
	struct gr_store *st = random_graph(directed, weighted, page, 800, 11 + directed, &r);
	struct gs_graph *g = open_g(st);
	uint64_t x = 99 + weighted;
	char *buf = malloc(1 << 20);

	check(r, g);
	g = update_rounds(st, g, r, &x, buf, 24, 150);
	struct gs_graph_info gi;

	gs_graph_info(g, &gi);
	assert_true(gi.merges >= 4);
	assert_int_equal(gs_graph_merge(g), 0);
	check(r, g);
	assert_int_equal(gs_graph_close(g), 0);
	g = open_g(st);
	check(r, g);
	gs_graph_close(g);
	free(buf);
	ref_free(r);
	st->ops->destroy(st);
}

static void test_updates_merge(void **state)
{
	updates_cycle(false, true, 4096);
	updates_cycle(true, false, 4096);
	/* small pages: groups split, vertices grow past a page and shrink back */
	updates_cycle(false, false, 512);
	updates_cycle(true, true, 512);
}

/* Power cuts: during a sync the state is the one before or after; during a
 * merge (all updates synced) it is exactly the synced one. */
static void test_power_cut(void **state)
{
	struct ref *r;
	struct gr_store *st = random_graph(true, true, 512, 600, 5, &r);
	struct gs_graph *g = open_g(st);
	uint64_t x = 1234;
	char *buf = malloc(1 << 20);
	unsigned merge_cuts = 0, replays = 0;

	for (int cycle = 0; cycle < 30; cycle++) {
		struct ref *before = ref_clone(r);
		bool in_sync = cycle % 3 == 0;

		ref_random_updates(r, &x, buf, 1 << 20, 200);
		update_ok(g, buf);
		if (!in_sync)
			assert_int_equal(gs_graph_sync(g), 0);
		/* cut the power after a random number of writes */
		gr_mem_fail_after(st, 1 + ref_rand(&x) % (in_sync ? 8 : cycle % 2 ? 40 : 300));
		if (in_sync) {
			gs_graph_sync(g);
		} else if (gs_graph_merge(g) != 0) {
			merge_cuts++;
			replays += g->broken != 0;	/* cut after the commit point */
		}
		gr_graph_free(g);	/* the process dies: no close */
		gr_mem_crash(st, ref_rand(&x));
		g = open_g(st);
		if (in_sync && ref_compare(r, g) != 0) {
			/* the sync did not make it: the state before */
			check(before, g);
			ref_free(r);
			r = before;
		} else {
			check(r, g);
			ref_free(before);
		}
		if (cycle % 7 == 6)
			assert_int_equal(gs_graph_merge(g), 0);
	}
	printf("%u merges cut, %u of them after the commit point\n", merge_cuts, replays);
	assert_true(merge_cuts >= 10);
	assert_true(replays >= 1);
	gs_graph_close(g);
	free(buf);
	ref_free(r);
	st->ops->destroy(st);
}

/* ---- queues ---- */

struct cbctx {
	const struct ref *r;
	int bad;
	uint64_t seen;
};

static void on_done(struct gs_graph_req *q, void *arg)
{
	struct cbctx *c = arg;
	const struct ref_adj *a = &c->r->a[0][q->vertex];

	__atomic_add_fetch(&c->seen, 1, __ATOMIC_RELAXED);
	if (q->res != (int64_t)a->n || (a->n && memcmp(q->ids, a->ids, a->n * sizeof(uint64_t))))
		__atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
}

static void test_queues(void **state)
{
	struct ref *r;
	struct gr_store *st = random_graph(false, true, 4096, 2000, 3, &r);
	struct gs_graph *g = open_g(st);
	size_t n = 5000;
	struct gs_graph_req *req = calloc(n, sizeof(*req));
	struct gs_graph_req **ptr = calloc(n, sizeof(*ptr)), **out = calloc(n, sizeof(*out));
	struct gs_graph_queue *q;
	struct cbctx c = { .r = r };
	struct gs_graph_queue_params p = { .depth = 512, .cb = on_done, .cb_arg = &c };
	uint64_t x = 5;
	size_t got = 0;

	assert_int_equal(gs_graph_set_workers(g, 3), 0);
	/* synchronous batch, library-allocated results */
	for (size_t i = 0; i < n; i++) {
		req[i].vertex = ref_rand(&x) % (r->nv + 3);	/* a few ENOENT */
		req[i].flags = GS_GRAPH_REQ_ALLOC | GS_GRAPH_REQ_WEIGHTS;
	}
	assert_int_equal(gs_graph_neighbors_batch(g, req, n), 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t v = req[i].vertex;

		if (v >= r->nv) {
			assert_int_equal(req[i].res, -ENOENT);
			continue;
		}
		assert_int_equal(req[i].res, r->a[0][v].n);
		assert_memory_equal(req[i].ids, r->a[0][v].ids, r->a[0][v].n * sizeof(uint64_t));
		assert_memory_equal(req[i].weights, r->a[0][v].w, r->a[0][v].n * sizeof(float));
		free(req[i].ids);
		free(req[i].weights);
	}
	/* reap mode with caller buffers (degree only for odd ones) */
	assert_int_equal(gs_graph_queue_create(g, &(struct gs_graph_queue_params){ .depth = 256 },
					       &q), 0);
	uint64_t *bufs = calloc(n * 8, sizeof(uint64_t));

	for (size_t i = 0; i < n; i++) {
		memset(&req[i], 0, sizeof(req[i]));
		req[i].vertex = ref_rand(&x) % r->nv;
		req[i].ids = bufs + i * 8;
		req[i].cap = 8;
		req[i].flags = i % 2 ? GS_GRAPH_REQ_DEGREE : 0;
		ptr[i] = &req[i];
	}
	for (size_t sub = 0; got < n;) {
		if (sub < n) {
			int k = gs_graph_submit(q, ptr + sub, (unsigned)(n - sub));

			if (k > 0)
				sub += (size_t)k;
			else
				assert_int_equal(k, -EAGAIN);
		}
		int k = gs_graph_reap(q, out, (unsigned)n, 1);

		assert_true(k >= 0);
		for (int i = 0; i < k; i++) {
			struct gs_graph_req *rq = out[i];
			const struct ref_adj *a = &r->a[0][rq->vertex];

			assert_int_equal(rq->res, a->n);
			if (!(rq->flags & GS_GRAPH_REQ_DEGREE))
				assert_memory_equal(rq->ids, a->ids,
						    (a->n < 8 ? a->n : 8) * sizeof(uint64_t));
		}
		got += (size_t)k;
	}
	gs_graph_queue_destroy(q);
	/* callback mode on the workers' buffers */
	assert_int_equal(gs_graph_queue_create(g, &p, &q), 0);
	for (size_t i = 0; i < n; i++) {
		memset(&req[i], 0, sizeof(req[i]));
		req[i].vertex = ref_rand(&x) % r->nv;
	}
	assert_int_equal(gs_graph_submit(q, ptr, (unsigned)n), (int)n);
	gs_graph_drain(q);
	assert_int_equal(c.seen, n);
	assert_int_equal(c.bad, 0);
	gs_graph_queue_destroy(q);

	struct gs_graph_stats s;

	gs_graph_get_stats(g, &s);
	/* sorted batches share pages: fewer page reads than queries */
	assert_true(s.page_reads < s.queries);
	gs_graph_close(g);
	free(bufs);
	free(req);
	free(ptr);
	free(out);
	ref_free(r);
	st->ops->destroy(st);
}

/* A merge empties the delta and the next records reuse its offsets: a
 * thread's memo of a delta page from before must not answer after. */
static void test_delta_memo(void **state)
{
	struct gs_graph_import_opts o = { .flags = GS_GRAPH_IMPORT_DIRECTED };
	struct gr_store *st = new_store(4096);
	struct gs_graph *g = build_text(st, "0 1\n1 2\n2 3\n3 4\n4 5\n", &o);

	update_ok(g, "+ 0 2\n+ 3 1\n");
	assert_int_equal(gs_graph_sync(g), 0);
	assert_int_equal(gs_graph_degree(g, 3, GS_GRAPH_OUT), 2);	/* memo: delta page 0 */
	assert_int_equal(gs_graph_merge(g), 0);
	update_ok(g, "+ 4 0\n+ 3 0\n");
	assert_int_equal(gs_graph_sync(g), 0);
	assert_int_equal(gs_graph_degree(g, 3, GS_GRAPH_OUT), 3);
	assert_int_equal(gs_graph_degree(g, 0, GS_GRAPH_IN), 2);
	gs_graph_close(g);
	st->ops->destroy(st);
}

/* ---- sparse ids ---- */

static uint64_t sparse_base;	/* model vertices the import had */

/* Imported ids far above the edge count; ids added later below them all,
 * so a list with an added vertex is no longer in index order. */
static uint64_t sparse_id(uint64_t v)
{
	return v < sparse_base ? (1ULL << 40) + v * 1000003 : 1000 + (v - sparse_base) * 7;
}

static void sparse_cycle(bool directed, bool weighted, uint32_t page, size_t mem)
{
	uint64_t nv = 900, x = 41 + directed, id, idx;
	struct ref_in in = ref_random_input(nv, nv * 4, 2, 300, false, 5 + directed);
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .mem_bytes = mem, .tmpdir = tmpdir, .chain_max = 6,
		.flags = (directed ? GS_GRAPH_IMPORT_DIRECTED : GS_GRAPH_IMPORT_UNDIRECTED) |
			 (weighted ? GS_GRAPH_IMPORT_WEIGHTED : GS_GRAPH_IMPORT_UNWEIGHTED),
	};
	struct gr_store *st = new_store(page);
	char path[256], *buf = malloc(1 << 20);
	struct gs_graph_info gi;
	struct gs_graph *g;
	struct ref *r;

	ref_cover_all(&in, nv, 3);
	sparse_base = nv;
	ref_id = sparse_id;
	snprintf(path, sizeof(path), "%s/sparse.txt", tmpdir);
	write_text(path, &in, directed, weighted);
	r = ref_from_input(&in, nv, directed, weighted);
	assert_int_equal(build_file(st, path, &o), 0);
	g = open_g(st);
	gs_graph_info(g, &gi);
	/* chosen by itself: the id range is 2^40 for 900 vertices */
	assert_int_equal(gi.id_map, 1);
	assert_int_equal(gi.nv, nv);
	assert_int_equal(gi.id_bytes, 8);
	check(r, g);
	for (uint64_t v = 0; v < nv; v += 37) {
		assert_int_equal(gs_graph_vertex_index(g, sparse_id(v), &idx), 0);
		assert_int_equal(idx, v);
		assert_int_equal(gs_graph_vertex_ids(g, v, 1, &id), 0);
		assert_true(id == sparse_id(v));
	}
	assert_int_equal(gs_graph_vertex_index(g, 5, &idx), -ENOENT);
	assert_int_equal(gs_graph_vertex_index(g, sparse_id(1) + 1, &idx), -ENOENT);
	assert_int_equal(gs_graph_vertex_ids(g, nv, 1, &id), -ENOENT);
	assert_int_equal(gs_graph_degree(g, 7, GS_GRAPH_OUT), -ENOENT);
	/* updates (new ids below the imported ones among them), syncs, merges, reopens */
	g = update_rounds(st, g, r, &x, buf, 12, 200);
	/* an update that fails undoes the ids it added */
	for (idx = 0; r->removed[idx]; idx++)
		;
	snprintf(buf, 1 << 20, "+v 77\n+ 77 %llu\n+ 77 5\n", (unsigned long long)sparse_id(idx));
	assert_int_equal(gs_graph_update(g, buf, strlen(buf), &id), -ENOENT);
	assert_int_equal(id, 3);
	assert_int_equal(gs_graph_degree(g, 77, GS_GRAPH_OUT), -ENOENT);
	check(r, g);
	assert_int_equal(gs_graph_close(g), 0);
	g = open_g(st);
	check(r, g);
	gs_graph_close(g);
	ref_id = NULL;
	free(buf);
	ref_free(r);
	ref_in_free(&in);
	st->ops->destroy(st);
}

static void test_sparse_ids(void **state)
{
	sparse_cycle(false, true, 4096, 0);
	sparse_cycle(true, false, 1024, 0);
	/* runs in temp files: the map is written from the merged runs, then
	 * the runs are read again for the pages */
	sparse_cycle(true, true, 4096, 64 << 10);
}

/* What costs memory in proportion to the largest id: nothing. */
static void test_sparse_huge(void **state)
{
	struct gs_graph_import_opts o = { 0 };
	struct gr_store *st = new_store(4096);
	struct gs_graph *g = build_text(st, "1099511627776 3\n18446744073709551614 3\n"
					"4294967295 1\n", &o);
	struct gs_graph_info gi;
	uint64_t ids[4], idx;

	gs_graph_info(g, &gi);
	assert_int_equal(gi.nv, 5);
	assert_int_equal(gi.ne, 3);
	assert_int_equal(gi.id_map, 1);
	assert_int_equal(gs_graph_neighbors(g, 1099511627776ULL, GS_GRAPH_OUT, ids, NULL, 4), 1);
	assert_true(ids[0] == 3);
	assert_int_equal(gs_graph_neighbors(g, 3, GS_GRAPH_IN, ids, NULL, 4), 2);
	assert_true(ids[0] == 1099511627776ULL && ids[1] == 18446744073709551614ULL);
	assert_int_equal(gs_graph_vertex_ids(g, 0, 4, ids), 0);
	assert_true(ids[0] == 1 && ids[1] == 3 && ids[2] == 4294967295ULL &&
		    ids[3] == 1099511627776ULL);
	assert_int_equal(gs_graph_vertex_index(g, 4294967295ULL, &idx), 0);
	assert_int_equal(idx, 2);
	assert_int_equal(gs_graph_degree(g, 2, GS_GRAPH_OUT), -ENOENT);
	gs_graph_close(g);
	st->ops->destroy(st);
	/* dense ids stay dense: what is below the largest id is a vertex */
	st = new_store(4096);
	g = build_text(st, "1 2\n60000 3\n", &o);
	gs_graph_info(g, &gi);
	assert_int_equal(gi.id_map, 0);
	assert_int_equal(gi.nv, 60001);
	assert_int_equal(gs_graph_degree(g, 500, GS_GRAPH_OUT), 0);
	/* and do not grow by a far id: ERANGE instead of 2^40 vertices */
	assert_int_equal(gs_graph_update(g, "+v 1099511627776", 16, &idx), -ERANGE);
	assert_int_equal(gs_graph_update(g, "+v 60005", 8, &idx), 1);
	gs_graph_close(g);
	st->ops->destroy(st);
}

/* A hub with more neighbours than an import holds at once: packed in parts. */
static void test_import_hub(void **state)
{
	uint64_t nv = 90000, x = 9;
	size_t n = 0, cap = 200000;
	struct ref_in in = { .u = malloc(cap * 8), .v = malloc(cap * 8), .w = malloc(cap * 4) };
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .nv = nv, .tmpdir = tmpdir,
		.flags = GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_WEIGHTED,
	};
	struct gr_store *st = new_store(4096);
	struct gs_graph *g;
	struct ref *r;
	char path[256];

	/* ascending, so the model appends; duplicates keep the smaller weight */
	for (uint64_t v = 1; v < nv; v += 1 + (v % 7 == 0)) {
		in.u[n] = 11;
		in.v[n] = v;
		in.w[n++] = (float)(ref_rand(&x) % 1000) / 8.0f;
		if (v % 1000 == 0) {
			in.u[n] = 11;
			in.v[n] = v;
			in.w[n] = in.w[n - 1] + 1;
			n++;
		}
		in.u[n] = v;
		in.v[n] = (v * 31) % nv;
		in.w[n++] = 1.0f;
	}
	in.n = n;
	r = ref_from_input(&in, nv, true, true);
	assert_true(r->a[0][11].n > 65536);	/* more than graph_build.c's LIST_PART */
	snprintf(path, sizeof(path), "%s/hub.txt", tmpdir);
	write_text(path, &in, true, true);
	assert_int_equal(build_file(st, path, &o), 0);
	g = open_g(st);
	check(r, g);
	gs_graph_close(g);
	st->ops->destroy(st);
	ref_free(r);
	ref_in_free(&in);
}

/* Graphs with fixed-width lists (built before varint coding, or with
 * GS_GRAPH_IMPORT_FIXED) read, update and merge as before. */
static void test_fixed_lists(void **state)
{
	extra_flags = GS_GRAPH_IMPORT_FIXED;
	one_import(GS_GRAPH_FMT_TEXT, false, true, 4096, 0);
	one_import(GS_GRAPH_FMT_MTX, true, false, 4096, 0);
	one_import(GS_GRAPH_FMT_SG, false, false, 512, 0);
	updates_cycle(true, true, 512);
	extra_flags = 0;
}

struct sink {
	uint8_t *pages;
	struct gr_gent e[64];
	unsigned n;
	uint32_t ps;
};

static int to_mem(void *arg, void *page, uint64_t key, uint64_t last, uint32_t flags)
{
	struct sink *s = arg;

	assert_true(s->n < 64);
	memcpy(s->pages + (size_t)s->n * s->ps, page, s->ps);
	s->e[s->n] = (struct gr_gent){ .key = key, .last = last, .page = s->n, .flags = flags };
	s->n++;
	return 0;
}

/* Pack lists with extreme gaps and a vertex larger than a page, read every
 * one back; a list that does not decode to exactly its bytes is -EIO. */
static void codec(unsigned idw, bool weighted)
{
	const uint32_t ps = 512;
	uint64_t top = idw == 4 ? UINT32_MAX : UINT64_MAX - 1;
	uint64_t a[] = { 0, 1, 2, 300, 70000, top - 1, top }, big[400], one[] = { top };
	float w[400];
	struct sink s = { .pages = malloc(64 * ps), .ps = ps };
	struct gr_geom gm;
	struct gr_packer pk;
	struct gr_list l = { 0 };
	uint64_t got = 0;

	for (unsigned i = 0; i < 400; i++) {
		big[i] = (uint64_t)i * i * 977 + (i ? top / 2 : 0);
		w[i] = (float)i / 3;
	}
	gr_geom_init(&gm, ps, idw, weighted, true);
	assert_int_equal(gr_pack_init(&pk, &gm, 0, 7, to_mem, &s), 0);
	assert_int_equal(gr_pack_vertex(&pk, 5, a, w, 7), 0);
	assert_int_equal(gr_pack_vertex(&pk, 6, one, w, 1), 0);
	assert_int_equal(gr_pack_vertex(&pk, 9, big, w, 400), 0);	/* large: many pages */
	assert_int_equal(gr_pack_vertex(&pk, 10, a + 1, w, 3), 0);
	/* a list must ascend: gaps are unsigned */
	assert_int_equal(gr_pack_vertex(&pk, 11, (uint64_t[]){ 5, 4 }, w, 2), -EINVAL);
	assert_int_equal(gr_pack_finish(&pk), 0);
	gr_pack_free(&pk);
	assert_true(s.n >= 3);
	for (unsigned p = 0; p < s.n; p++) {
		uint8_t *pg = s.pages + (size_t)p * ps;

		assert_int_equal(gr_page_check(&gm, pg), 0);
		for (unsigned i = 0; i < gr_page_count(&gm, pg); i++) {
			uint64_t v = gr_ldid(gr_page_tuple(&gm, pg, i), idw);
			const uint64_t *want = v == 5 ? a : v == 6 ? one : v == 9 ? big : a + 1;
			uint64_t off = v == 9 ? got : 0;
			int64_t deg = gr_page_degree(&gm, pg, i);

			l.n = 0;
			assert_int_equal(gr_page_append(&gm, pg, i, &l), 0);
			assert_int_equal(deg, (int64_t)l.n);
			for (size_t k = 0; k < l.n; k++) {
				assert_true(l.ids[k] == want[off + k]);
				assert_true(l.w[k] == (weighted ? w[off + k] : 1.0f));
			}
			if (v == 9)
				got += l.n;
		}
	}
	assert_int_equal(got, 400);
	/* vertex 5's list is first in page 0: cut its last byte off the end */
	uint8_t *pg = s.pages;
	uint8_t *t1 = (uint8_t *)gr_page_tuple(&gm, pg, 1) + idw;

	gr_st32(t1, gr_ld32(t1) - 1);
	l.n = 0;
	assert_int_equal(gr_page_append(&gm, pg, 0, &l), -EIO);
	/* and a count larger than the bytes */
	gr_st32(t1, gr_ld32(t1) + 1);
	pg[0] = 0x7f;
	assert_true(gr_page_degree(&gm, pg, 0) == -EIO || gr_page_append(&gm, pg, 0, &l) == -EIO);
	gr_list_free(&l);
	free(s.pages);
}

static void test_page_codec(void **state)
{
	codec(4, false);
	codec(4, true);
	codec(8, false);
	codec(8, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_import_formats),
		cmocka_unit_test(test_import_external_sort),
		cmocka_unit_test(test_import_auto),
		cmocka_unit_test(test_import_errors),
		cmocka_unit_test(test_update_errors),
		cmocka_unit_test(test_updates_merge),
		cmocka_unit_test(test_power_cut),
		cmocka_unit_test(test_queues),
		cmocka_unit_test(test_delta_memo),
		cmocka_unit_test(test_sparse_ids),
		cmocka_unit_test(test_sparse_huge),
		cmocka_unit_test(test_import_hub),
		cmocka_unit_test(test_fixed_lists),
		cmocka_unit_test(test_page_codec),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
