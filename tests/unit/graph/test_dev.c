// SPDX-License-Identifier: MIT
/*
 * Graph objects off the CPU (fs/graph/graph_dev.c, gstore_graph_dev.h): the
 * device layout read the way the GPU reads it (GTT arrays, page decoding of
 * fixed-width and varint lists, weights, large vertices, sparse ids,
 * removed vertices) against the engine's own lists, on the memory store and
 * on a gs_fs image through the layout's extents; and gs_graph_sample(), the
 * sampling reference, against a model sampler written from its documented
 * semantics.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../../fs/graph/graph_internal.h"
#include "gstore_fs.h"
#include "graph_ref.h"

static char tmpdir[] = "/tmp/gstore-graphdev-test-XXXXXX";

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

/* Reads page @blk of the layout's block space into @buf. */
typedef void (*page_fn)(void *arg, const struct gs_graph_layout *l, uint64_t blk, uint8_t *buf);

/*
 * The list of vertex index @v (direction @d) as a kernel finds it: locate
 * the GTT group, read each page of it, find the tuple, decode.  Returns the
 * degree; ids/w get the entries.
 */
static int64_t dev_list(const struct gs_graph_layout *l, unsigned d, uint64_t v, page_fn rd,
			void *arg, uint64_t *ids, float *w, int64_t *deg_only)
{
	const struct gs_graph_layout_dir *ld = &l->dir[d];
	struct gs_gp_geom gm;
	uint8_t *page = malloc(l->page_size);
	int64_t gi, n = 0, dsum = 0;
	uint64_t glen;

	gs_gp_init(&gm, l->page_size, l->id_bytes, l->flags);
	*deg_only = 0;
	if (l->removed && (l->removed[v >> 3] >> (v & 7) & 1)) {
		free(page);
		return 0;
	}
	gi = gs_gp_locate(ld->gtt_key, ld->gtt_last, ld->gtt_page, ld->ngtt, v);
	if (gi < 0) {
		free(page);
		return 0;
	}
	glen = gs_gp_group_len(ld->gtt_page, ld->ngtt, (uint64_t)gi);
	for (uint64_t k = 0; k < glen; k++) {
		uint64_t pg = ld->gtt_page[gi + k] & GS_GP_PAGE_MASK;
		const uint8_t *p, *wp;
		uint64_t deg, id = 0, x = 0;
		int t;

		assert_true(pg < ld->npages);
		rd(arg, l, ld->first_block + pg, page);
		t = gs_gp_find(&gm, page, v);
		if (t < 0) {
			assert_int_equal(glen, 1);
			break;
		}
		assert_int_equal(gs_gp_list(&gm, page, (uint32_t)t, &deg, &p, &wp), 0);
		dsum += (int64_t)deg;
		for (uint64_t e = 0; e < deg; e++, n++) {
			if (gm.varint) {
				assert_true(gs_gp_uv(&p, page + l->page_size, &x));
				id = e ? id + x : x;
			} else {
				id = gs_gp_fixed_id(&gm, p, e);
			}
			ids[n] = id;
			w[n] = gs_gp_weight(&gm, wp, e);
		}
		if (gm.varint && deg)
			assert_ptr_equal(p, wp);	/* the ids end where the weights start */
	}
	*deg_only = dsum;
	free(page);
	return n;
}

/* Every vertex's list (both directions) decoded from the layout equals the
 * engine's (by index, with weights). */
static void check_layout(struct gs_graph *g, const struct gs_graph_layout *l, page_fn rd,
			 void *arg)
{
	uint64_t nv = l->nv, *ids = malloc(1 << 23);
	float *w = malloc(1 << 22);
	struct gs_graph_req *req = calloc(nv, sizeof(*req));

	for (unsigned d = 0; d < l->ndirs; d++) {
		for (uint64_t v = 0; v < nv; v++) {
			req[v].vertex = v;
			req[v].dir = d;
			req[v].flags = GR_REQ_INDEX | GS_GRAPH_REQ_ALLOC | GS_GRAPH_REQ_WEIGHTS;
			req[v].ids = NULL;
		}
		assert_true(gs_graph_neighbors_batch(g, req, nv) >= 0);
		for (uint64_t v = 0; v < nv; v++) {
			int64_t dg, n = dev_list(l, d, v, rd, arg, ids, w, &dg);
			int64_t want = req[v].res == -ENOENT ? 0 : req[v].res;

			assert_true(req[v].res >= 0 || req[v].res == -ENOENT);
			/* the filter: a vertex it says has no list has none */
			if (l->dir[d].vmap && v < l->dir[d].vmap_bits &&
			    !(l->dir[d].vmap[v >> 3] >> (v & 7) & 1))
				assert_int_equal(n, 0);
			if (n != want)
				fail_msg("dir %u vertex %llu: %lld entries, engine %lld", d,
					 (unsigned long long)v, (long long)n, (long long)want);
			assert_int_equal(dg, n);
			for (int64_t k = 0; k < n; k++) {
				assert_int_equal(ids[k], req[v].ids[k]);
				assert_true(w[k] == req[v].weights[k]);
			}
			free(req[v].ids);
			free(req[v].weights);
		}
	}
	free(req);
	free(ids);
	free(w);
}

/* ---- the memory store ---- */

struct mem_rd {
	struct gr_store *st;
};

static void mem_page(void *arg, const struct gs_graph_layout *l, uint64_t blk, uint8_t *buf)
{
	struct mem_rd *m = arg;
	unsigned d = l->ndirs > 1 && blk >= l->dir[1].first_block;
	uint64_t pg = blk - l->dir[d].first_block;

	assert_int_equal(gr_store_read_full(m->st, l->dir[d].pages_ino, buf, l->page_size,
					    pg * l->page_size), 0);
}

static uint64_t sparse_of(uint64_t v)
{
	return (1ULL << 40) + v * 1000003;
}

static struct gs_graph *mem_graph(struct gr_store **stp, bool directed, bool weighted,
				  uint32_t page, uint32_t flags, uint64_t nv, uint64_t seed)
{
	struct ref_in in = ref_random_input(nv, nv * 4, 3, 700, false, seed);
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .tmpdir = tmpdir,
		.flags = flags | (directed ? GS_GRAPH_IMPORT_DIRECTED : GS_GRAPH_IMPORT_UNDIRECTED) |
			 (weighted ? GS_GRAPH_IMPORT_WEIGHTED : GS_GRAPH_IMPORT_UNWEIGHTED),
	};
	struct gs_graph *g = NULL;
	char path[256];
	int fd;

	if (flags & GS_GRAPH_IMPORT_SPARSE_IDS) {
		ref_cover_all(&in, nv, seed);
		ref_id = sparse_of;
	} else {
		o.nv = nv;
	}
	assert_int_equal(gr_mem_store_new(stp, page), 0);
	(*stp)->borrowed = true;
	snprintf(path, sizeof(path), "%s/g.txt", tmpdir);
	write_text(path, &in, directed, weighted);
	ref_id = NULL;
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(gr_build(*stp, fd, &o), 0);
	close(fd);
	ref_in_free(&in);
	assert_int_equal(gr_graph_open_store(*stp, NULL, 0, 0, &g), 0);
	return g;
}

static void one_mem(bool directed, bool weighted, uint32_t page, uint32_t flags)
{
	struct gr_store *st;
	struct gs_graph *g = mem_graph(&st, directed, weighted, page, flags, 2000, page + flags);
	struct gs_graph_layout *l;
	struct mem_rd m = { st };
	bool large = false;

	assert_int_equal(gs_graph_layout_get(g, 0, &l), 0);
	assert_int_equal(l->nv, g->nv);
	assert_int_equal(l->ndirs, directed ? 2 : 1);
	assert_int_equal(l->next, 0);	/* not on a gs_fs: no extents */
	assert_int_equal(!!(l->flags & GS_GRAPH_F_VARINT), !(flags & GS_GRAPH_IMPORT_FIXED));
	for (uint64_t i = 0; i < l->dir[0].ngtt; i++)
		large |= (l->dir[0].gtt_page[i] & GS_GP_GTT_LARGE) != 0;
	if (page == 512)	/* hubs of 700 fill pages of their own */
		assert_true(large);
	check_layout(g, l, mem_page, &m);
	gs_graph_layout_put(l);

	/* updates: the layout is of the pages, so they are merged first */
	if (flags & GS_GRAPH_IMPORT_SPARSE_IDS) {
		uint64_t bad = 0;

		assert_int_equal(gs_graph_update(g, "+v 77\n", 6, &bad), 1);
	} else {
		assert_int_equal(gs_graph_add_edge(g, 3, 1000, 2.0f) >= 0 ||
				 gs_graph_set_weight(g, 3, 1000, 2.0f) >= 0, 1);
		assert_int_equal(gs_graph_del_vertex(g, 5), 0);
	}
	assert_int_equal(gs_graph_layout_get(g, 0, &l), 0);
	if (!(flags & GS_GRAPH_IMPORT_SPARSE_IDS))
		assert_true(l->removed && (l->removed[0] >> 5 & 1) && l->nremoved == 1);
	check_layout(g, l, mem_page, &m);
	gs_graph_layout_put(l);
	gs_graph_close(g);
	st->ops->destroy(st);
}

static void test_layout_mem(void **state)
{
	for (int d = 0; d < 2; d++)
		for (int w = 0; w < 2; w++) {
			one_mem(d, w, 4096, 0);
			one_mem(d, w, 512, 0);
			one_mem(d, w, 512, GS_GRAPH_IMPORT_FIXED);
		}
	one_mem(false, true, 4096, GS_GRAPH_IMPORT_FIXED | GS_GRAPH_IMPORT_ID64);
	one_mem(true, false, 512, GS_GRAPH_IMPORT_SPARSE_IDS);
	one_mem(false, true, 4096, GS_GRAPH_IMPORT_SPARSE_IDS | GS_GRAPH_IMPORT_FIXED);
}

/* ---- a gs_fs image: the pages through the extents, as a GPU reads them ---- */

struct img_rd {
	int fd;
};

static void img_page(void *arg, const struct gs_graph_layout *l, uint64_t blk, uint8_t *buf)
{
	struct img_rd *m = arg;
	uint32_t lo = 0, hi = l->next;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (l->ext[mid].blk <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	assert_true(lo > 0 && blk - l->ext[lo - 1].blk < l->ext[lo - 1].nblk);
	assert_int_equal(pread(m->fd, buf, l->page_size,
			       (off_t)(l->ext[lo - 1].dev_off +
				       (blk - l->ext[lo - 1].blk) * l->page_size)),
			 l->page_size);
}

static void test_layout_fs(void **state)
{
	char img[256], path[256];
	struct gs_mkfs_opts mo = { .size = 256ull << 20 };
	struct gs_fs_opts fo = { .cache_bytes = 16u << 20 };
	struct ref_in in = ref_random_input(6000, 30000, 3, 1500, false, 77);
	struct gs_graph_import_opts o = {
		.format = GS_GRAPH_FMT_TEXT, .nv = 6000, .tmpdir = tmpdir,
		.flags = GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_WEIGHTED,
	};
	struct gs_graph_layout *l;
	struct gs_graph *g;
	struct gs_fs *fs;
	struct img_rd m;
	int ret;

	snprintf(img, sizeof(img), "%s/fs.img", tmpdir);
	snprintf(path, sizeof(path), "%s/g.txt", tmpdir);
	write_text(path, &in, true, true);
	ref_in_free(&in);
	assert_int_equal(gs_fs_mkfs(img, &mo), 0);
	fo.path = img;
	ret = gs_fs_mount(&fs, &fo);
	if (ret == -EINVAL) {	/* no O_DIRECT here (tmpfs) */
		fo.flags |= GS_FS_BUFFERED;
		ret = gs_fs_mount(&fs, &fo);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(gs_graph_import(fs, "g", path, &o), 0);
	assert_int_equal(gs_graph_open(fs, "g", 0, &g), 0);
	gs_graph_add_edge(g, 1, 5999, 3.0f);	/* pending: merged by the layout */
	assert_int_equal(gs_graph_layout_get(g, 0, &l), 0);
	assert_true(l->next > 0);
	assert_int_equal(l->nblocks, l->dir[0].npages + l->dir[1].npages);
	assert_int_equal(l->dir[1].first_block, l->dir[0].npages);
	for (uint32_t i = 1; i < l->next; i++)
		assert_true(l->ext[i].blk >= l->ext[i - 1].blk + l->ext[i - 1].nblk);
	m.fd = open(img, O_RDONLY);
	assert_true(m.fd >= 0);
	check_layout(g, l, img_page, &m);
	/* updates while a layout is held (a GPU reading): the next layout merges them
	 * under the first one's leases, which pin the pages without blocking the merge */
	struct gs_graph_layout *l2;

	for (uint64_t v = 2; v < 400; v++)
		assert_true(gs_graph_add_edge(g, v, 5998 - v, 1.0f) >= 0 ||
			    gs_graph_set_weight(g, v, 5998 - v, 1.0f) >= 0);
	assert_int_equal(gs_graph_del_vertex(g, 7), 0);
	assert_int_equal(gs_graph_layout_get(g, 0, &l2), 0);
	assert_true(l2->removed && (l2->removed[0] >> 7 & 1));
	check_layout(g, l2, img_page, &m);
	gs_graph_layout_put(l2);
	close(m.fd);
	gs_graph_layout_put(l);
	assert_int_equal(gs_graph_close(g), 0);
	assert_int_equal(gs_graph_open(fs, "g", GS_GRAPH_RDONLY, &g), 0);
	assert_int_equal(gs_graph_layout_get(g, 0, &l), 0);
	gs_graph_layout_put(l);
	assert_int_equal(gs_graph_close(g), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* ---- sampling ---- */

/* The documented semantics, written out again over gs_graph_neighbors (the
 * graphs here have dense ids: ids are indices). */
static void model_sample(struct gs_graph *g, const uint64_t *seeds, uint32_t nseeds,
			 const uint32_t *fan, uint32_t nhops, uint64_t seed, struct gs_graph_sample *s)
{
	uint64_t nv = g->nv, *pos = malloc(nv * sizeof(*pos)), *ids = malloc(1 << 20);
	uint64_t pick[GS_GRAPH_SAMPLE_MAX_FANOUT];

	memset(s, 0, sizeof(*s));
	s->nodes = malloc(1 << 22);
	s->src = malloc(1 << 22);
	s->dst = malloc(1 << 22);
	for (uint64_t v = 0; v < nv; v++)
		pos[v] = UINT64_MAX;
	for (uint32_t i = 0; i < nseeds; i++)
		if (pos[seeds[i]] == UINT64_MAX) {
			pos[seeds[i]] = s->nnodes;
			s->nodes[s->nnodes++] = seeds[i];
		}
	s->hop_nodes[1] = s->nnodes;
	for (uint32_t h = 0; h < nhops; h++) {
		s->hop_edges[h] = s->nedges;
		for (uint64_t i = s->hop_nodes[h]; i < s->hop_nodes[h + 1]; i++) {
			uint64_t v = s->nodes[i];
			int64_t d = gs_graph_neighbors(g, v, GS_GRAPH_OUT, ids, NULL, 1 << 17);
			uint64_t take;

			if (d < 0)
				d = 0;
			take = (uint64_t)d < fan[h] ? (uint64_t)d : fan[h];
			if ((uint64_t)d > fan[h])
				gs_graph_sample_pick(seed, h, v, (uint64_t)d, fan[h], pick);
			for (uint64_t k = 0; k < take; k++) {
				uint64_t u = ids[(uint64_t)d > fan[h] ? pick[k] : k];

				s->src[s->nedges] = v;
				s->dst[s->nedges++] = u;
				if (pos[u] == UINT64_MAX) {
					pos[u] = s->nnodes;
					s->nodes[s->nnodes++] = u;
				}
			}
		}
		s->hop_nodes[h + 2] = s->nnodes;
	}
	s->hop_edges[nhops] = s->nedges;
	free(pos);
	free(ids);
}

static void model_free(struct gs_graph_sample *m)
{
	free(m->nodes);
	free(m->src);
	free(m->dst);
}

static void check_sample(struct gs_graph *g, const struct gs_graph_sample *s,
			 const struct gs_graph_sample *m, const uint32_t *fan, uint32_t nhops)
{
	uint64_t ids[1 << 12];

	assert_int_equal(s->nnodes, m->nnodes);
	assert_int_equal(s->nedges, m->nedges);
	assert_int_equal(s->nhops, nhops);
	assert_memory_equal(s->hop_nodes, m->hop_nodes, (nhops + 2) * sizeof(uint64_t));
	assert_memory_equal(s->hop_edges, m->hop_edges, (nhops + 1) * sizeof(uint64_t));
	assert_memory_equal(s->nodes, m->nodes, s->nnodes * 8);
	assert_memory_equal(s->src, m->src, s->nedges * 8);
	assert_memory_equal(s->dst, m->dst, s->nedges * 8);
	for (uint64_t e = 0; e < s->nedges; e++) {
		assert_int_equal(s->nodes[s->src_pos[e]], s->src[e]);
		assert_int_equal(s->nodes[s->dst_pos[e]], s->dst[e]);
	}
	/* picks are distinct neighbours, min(degree, fanout) of them */
	for (uint32_t h = 0; h < nhops; h++) {
		uint64_t e = s->hop_edges[h];

		while (e < s->hop_edges[h + 1]) {
			uint64_t v = s->src[e], n = 0;
			int64_t d = gs_graph_neighbors(g, v, GS_GRAPH_OUT, ids, NULL, 1 << 12);

			for (; e < s->hop_edges[h + 1] && s->src[e] == v; e++, n++) {
				int found = 0;

				for (int64_t k = 0; k < d && k < (1 << 12) && !found; k++)
					found = ids[k] == s->dst[e];
				assert_true(found || d > (1 << 12));
				if (n)
					assert_true(s->dst[e] > s->dst[e - 1]);
			}
			assert_int_equal(n, (uint64_t)d < fan[h] ? (uint64_t)d : fan[h]);
		}
	}
}

static void test_sample(void **state)
{
	struct gr_store *st;
	struct gs_graph *g = mem_graph(&st, false, false, 4096, 0, 3000, 5);
	uint64_t seeds[64];
	uint32_t fan2[] = { 25, 10 }, fan3[] = { 10, 5, 3 }, big[] = { 5000 };
	struct gs_graph_sample s, m, s2;
	uint64_t mn, me;

	for (int i = 0; i < 64; i++)
		seeds[i] = (uint64_t)(i * 37 % 2900);
	seeds[5] = seeds[3];	/* a repeated seed counts once */
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 2, 42, &s), 0);
	model_sample(g, seeds, 64, fan2, 2, 42, &m);
	check_sample(g, &s, &m, fan2, 2);
	assert_int_equal(s.hop_nodes[1], 63);
	/* deterministic for a seed, another seed picks otherwise */
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 2, 42, &s2), 0);
	assert_memory_equal(s.dst, s2.dst, s.nedges * 8);
	gs_graph_sample_free(&s2);
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 2, 43, &s2), 0);
	assert_true(s2.nedges != s.nedges || memcmp(s.dst, s2.dst, s.nedges * 8));
	gs_graph_sample_free(&s2);
	gs_graph_sample_free(&s);
	model_free(&m);

	assert_int_equal(gs_graph_sample(g, seeds, 64, fan3, 3, 7, &s), 0);
	model_sample(g, seeds, 64, fan3, 3, 7, &m);
	check_sample(g, &s, &m, fan3, 3);
	gs_graph_sample_free(&s);
	model_free(&m);

	/* bounds and errors */
	assert_int_equal(gs_graph_sample_bounds(10, fan2, 2, &mn, &me), 0);
	assert_int_equal(mn, 10 + 250 + 2500);
	assert_int_equal(me, 250 + 2500);
	assert_int_equal(gs_graph_sample(g, seeds, 64, big, 1, 1, &s), -EINVAL);
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 0, 1, &s), -EINVAL);
	seeds[0] = 3000;
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 2, 1, &s), -EINVAL);
	gs_graph_close(g);
	st->ops->destroy(st);

	/* a hub larger than a page and a varint-free graph: the same */
	g = mem_graph(&st, true, true, 512, GS_GRAPH_IMPORT_FIXED, 2000, 9);
	for (int i = 0; i < 64; i++)
		seeds[i] = (uint64_t)(i * 31 % 1800);
	assert_int_equal(gs_graph_sample(g, seeds, 64, fan2, 2, 5, &s), 0);
	model_sample(g, seeds, 64, fan2, 2, 5, &m);
	check_sample(g, &s, &m, fan2, 2);
	gs_graph_sample_free(&s);
	model_free(&m);
	gs_graph_close(g);
	st->ops->destroy(st);
}

/* Floyd's picks: distinct, ascending, inside [0, deg), every position
 * reachable, about uniform. */
static void test_pick(void **state)
{
	uint64_t pos[16], hits[100] = { 0 };

	for (uint64_t v = 0; v < 20000; v++) {
		gs_graph_sample_pick(99, 1, v, 100, 16, pos);
		for (int k = 0; k < 16; k++) {
			assert_true(pos[k] < 100);
			if (k)
				assert_true(pos[k] > pos[k - 1]);
			hits[pos[k]]++;
		}
	}
	/* 3200 expected each: a loose band, deterministic inputs */
	for (int i = 0; i < 100; i++)
		assert_true(hits[i] > 2600 && hits[i] < 3800);
}

int main(void)
{
	(void)ref_from_input;	/* graph_ref.h's, used by the other graph tests */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_layout_mem),
		cmocka_unit_test(test_layout_fs),
		cmocka_unit_test(test_sample),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
