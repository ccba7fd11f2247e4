// SPDX-License-Identifier: MIT
/*
 * Import: parse the input, sort the edges of each direction (externally
 * when they exceed the memory budget), for sparse ids write the id map
 * (the distinct ids, ascending) and translate every edge to indices, pack
 * the sorted lists into pages, write the GTTs, commit the root.
 *
 * Memory is bounded whatever the input: the sort budget (mem_bytes), a
 * quarter of it more for pages of the id map, the first id of each of
 * its pages (8 bytes per 512 vertices at 4 KiB pages), and a few MiB of
 * buffers (read, page writer, GTT and filter windows, LIST_PART entries
 * of a hub's list); the GTT, the filter and hub lists go out as they grow.  Duplicate edges collapse into one
 * (the smallest weight wins); an undirected edge goes into both lists.
 * The store is fresh and unnamed: it becomes a graph only when the caller
 * publishes it (graph_fs.c renames it into place).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph_internal.h"

#define DEF_SORT_MEM	(256u << 20)
#define WBUF_PAGES	256		/* pages (and ids) written at once */
#define LIST_PART	(1u << 16)	/* a longer list is packed in parts */
#define GTT_CHUNK	4096		/* GTT entries written at once */
#define VMAP_WIN	(64u << 10)	/* bytes of the vertex filter held */
#define DENSE_SLACK	65536		/* ids a dense graph may waste for free */

struct build {
	const struct gs_graph_import_opts *o;
	struct gr_store *st;
	int directed, weighted;
	bool hdr_done, any;
	uint64_t nv_hdr, maxid, nedges;
	struct gr_sorter *s[2];
	/* page writer of the direction being built */
	uint64_t obj, npages;
	uint8_t *wbuf;
	unsigned nw;
	/* its GTT, written as it grows */
	uint64_t gtt_obj, ngtt;
	struct gs_graph_gtt_ent *gbuf;
	unsigned ng;
	/* its vertex filter, written as it grows (bit v: v has a list) */
	bool keep_vmap;
	uint64_t vmap_obj, vbase;	/* vbase: the window's first byte */
	uint8_t *vwin;
	uint64_t done, total;
	uint64_t made[24];	/* objects created, dropped again on failure */
	unsigned nmade;
	uint64_t nv;
	/* sparse ids: the map, and the pages of it the translation keeps */
	struct gr_ids ids;
	struct gr_idcache ic;
};

/* @meta: a translation table or index (gr_store_ops.create_meta), not pages of lists. */
static int new_obj_as(struct build *b, uint64_t *obj, bool meta)
{
	int ret = meta && b->st->ops->create_meta ? b->st->ops->create_meta(b->st, obj) :
		  b->st->ops->create(b->st, obj);

	if (!ret && b->nmade < sizeof(b->made) / sizeof(b->made[0]))
		b->made[b->nmade++] = *obj;
	return ret;
}

static int new_obj(struct build *b, uint64_t *obj)
{
	return new_obj_as(b, obj, false);
}

static void progress(struct build *b, const char *phase, uint64_t done, uint64_t total)
{
	if (b->o->progress)
		b->o->progress(b->o->progress_arg, phase, done, total);
}

static void read_progress(void *arg, uint64_t done, uint64_t total)
{
	progress(arg, "read", done, total);
}

static size_t sort_mem(const struct gs_graph_import_opts *o)
{
	return o->mem_bytes ? o->mem_bytes : DEF_SORT_MEM;
}

static int on_header(void *arg, struct gr_parse_info *pi)
{
	struct build *b = arg;
	uint32_t fl = b->o->flags;
	size_t mem = sort_mem(b->o);
	int ret;

	if (fl & GS_GRAPH_IMPORT_DIRECTED)
		b->directed = 1;
	else if (fl & GS_GRAPH_IMPORT_UNDIRECTED)
		b->directed = 0;
	else
		b->directed = pi->directed != 0;
	if (fl & GS_GRAPH_IMPORT_WEIGHTED)
		b->weighted = 1;
	else if (fl & GS_GRAPH_IMPORT_UNWEIGHTED)
		b->weighted = 0;
	else
		b->weighted = pi->weighted > 0;
	pi->weighted = b->weighted;
	b->nv_hdr = pi->nv;
	b->hdr_done = true;
	for (int d = 0; d < 1 + b->directed; d++) {
		ret = gr_sorter_new(&b->s[d], b->directed ? mem / 2 : mem, b->o->tmpdir);
		if (ret)
			return ret;
	}
	return 0;
}

static int on_edge(void *arg, uint64_t u, uint64_t v, float w)
{
	struct build *b = arg;
	uint64_t m = u > v ? u : v;
	int ret;

	if (!b->any || m > b->maxid)
		b->maxid = m;
	b->any = true;
	b->nedges++;
	ret = gr_sorter_add(b->s[0], u, v, w);
	if (ret)
		return ret;
	if (b->directed)
		return gr_sorter_add(b->s[1], v, u, w);
	return u == v ? 0 : gr_sorter_add(b->s[0], v, u, w);
}

/* ---- the sparse id map: the distinct ids, ascending ---- */

struct idwriter {
	struct build *b;
	uint64_t *buf, *first;
	uint64_t n, nfirst, cap;	/* ids so far; first ids of pages */
	size_t bn, bcap;		/* ids in buf */
};

static int ids_flush(struct idwriter *w)
{
	int ret = w->bn ? gr_store_write_full(w->b->st, w->b->ids.obj, w->buf, w->bn * 8,
					      (w->n - w->bn) * 8) : 0;

	w->bn = 0;
	return ret;
}

static int ids_put(struct idwriter *w, uint64_t id)
{
	if (w->n % w->b->ids.per == 0) {
		if (w->nfirst == w->cap) {
			uint64_t c = w->cap ? w->cap * 2 : 64, *f = realloc(w->first, c * 8);

			if (!f)
				return -ENOMEM;
			w->first = f;
			w->cap = c;
		}
		w->first[w->nfirst++] = id;
	}
	w->buf[w->bn++] = htole64(id);
	w->n++;
	return w->bn == w->bcap ? ids_flush(w) : 0;
}

/*
 * The vertices are the sources of the sorted edges (an undirected edge is
 * in the sorter both ways; a directed graph's in-sorter has the targets
 * first): merged, they give every id once, ascending.  The sorters are
 * rewound for the build, which then looks each id up in what this wrote.
 */
static int build_ids(struct build *b)
{
	struct idwriter w = { .b = b, .buf = (uint64_t *)b->wbuf };
	struct gr_edge e[2];
	int r[2] = { 0, 0 }, ret;
	uint64_t last = 0, cached;
	bool any = false;

	b->ids.on = true;
	b->ids.st = b->st;
	b->ids.per = b->st->page_size / 8;
	w.bcap = (size_t)WBUF_PAGES * b->st->page_size / 8;
	ret = new_obj(b, &b->ids.obj);
	if (!ret)
		ret = new_obj_as(b, &b->ids.idx_obj, true);
	for (int d = 0; d <= b->directed && !ret; d++) {
		r[d] = gr_sorter_next(b->s[d], &e[d]);
		ret = r[d] < 0 ? r[d] : 0;
	}
	while (!ret && (r[0] > 0 || r[1] > 0)) {
		int d = r[1] > 0 && (r[0] <= 0 || e[1].u < e[0].u);
		uint64_t x = e[d].u;

		if (!any || x != last)
			ret = ids_put(&w, x);
		any = true;
		last = x;
		r[d] = gr_sorter_next(b->s[d], &e[d]);
		if (r[d] < 0)
			ret = r[d];
	}
	if (!ret)
		ret = ids_flush(&w);
	for (uint64_t i = 0; i < w.nfirst; i++)
		w.first[i] = htole64(w.first[i]);
	if (!ret && w.nfirst)
		ret = gr_store_write_full(b->st, b->ids.idx_obj, w.first, w.nfirst * 8, 0);
	for (uint64_t i = 0; i < w.nfirst; i++)
		w.first[i] = le64toh(w.first[i]);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->ids.obj);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->ids.idx_obj);
	for (int d = 0; d <= b->directed && !ret; d++)
		ret = gr_sorter_rewind(b->s[d]);
	b->ids.first = w.first;
	b->ids.npages = w.nfirst;
	b->ids.nsorted = w.n;
	b->nv = w.n;
	if (ret)
		return ret;
	/* a quarter of the sort budget keeps pages of the map for the lookups */
	cached = sort_mem(b->o) / 4 / b->st->page_size;
	return gr_idcache_init(&b->ic, cached < w.nfirst ? cached : w.nfirst, b->st->page_size);
}

/* ---- pages, GTT and filter of one direction ---- */

static int wflush(struct build *b)
{
	uint32_t ps = b->st->page_size;
	int ret;

	if (!b->nw)
		return 0;
	ret = gr_store_write_full(b->st, b->obj, b->wbuf, (size_t)b->nw * ps,
				  (b->npages - b->nw) * ps);
	b->nw = 0;
	return ret;
}

static int gtt_flush(struct build *b)
{
	int ret = b->ng ? gr_store_write_full(b->st, b->gtt_obj, b->gbuf, b->ng * sizeof(*b->gbuf),
					      (b->ngtt - b->ng) * sizeof(*b->gbuf)) : 0;

	b->ng = 0;
	return ret;
}

static int build_sink(void *arg, void *page, uint64_t key, uint64_t last, uint32_t flags)
{
	struct build *b = arg;
	struct gr_gent e = { .key = key, .last = last, .page = b->npages, .flags = flags };
	uint32_t ps = b->st->page_size;
	int ret = 0;

	memcpy(b->wbuf + (size_t)b->nw * ps, page, ps);
	b->nw++;
	b->npages++;
	if (b->nw == WBUF_PAGES)
		ret = wflush(b);
	gr_gtt_to_disk(&e, &b->gbuf[b->ng++]);
	b->ngtt++;
	if (!ret && b->ng == GTT_CHUNK)
		ret = gtt_flush(b);
	return ret;
}

/* Write the filter's window up to the byte @upto (exclusive), zeros included. */
static int vmap_advance(struct build *b, uint64_t upto)
{
	while (b->vbase < upto) {
		uint64_t len = upto - b->vbase < VMAP_WIN ? upto - b->vbase : VMAP_WIN;
		int ret = gr_store_write_full(b->st, b->vmap_obj, b->vwin, len, b->vbase);

		if (ret)
			return ret;
		memset(b->vwin, 0, VMAP_WIN);
		b->vbase += len;
	}
	return 0;
}

/* Vertices come in ascending order: the window only moves forward. */
static int vmap_set(struct build *b, uint64_t v)
{
	int ret = 0;

	if (!b->keep_vmap)
		return 0;
	if (v / 8 >= b->vbase + VMAP_WIN)
		ret = vmap_advance(b, v / 8 / VMAP_WIN * VMAP_WIN);
	if (!ret)
		gr_vmap_set(b->vwin, v - b->vbase * 8, true);
	return ret;
}

/* An edge's ends as vertex indices. */
static int edge_index(struct build *b, struct gr_edge *e, uint64_t *umemo, uint64_t *uidx)
{
	int ret;

	if (!b->ids.on)
		return 0;
	/* the source repeats for a whole list */
	if (e->u != *umemo) {
		ret = gr_ids_index(&b->ids, &b->ic, e->u, uidx);
		if (ret)
			return ret == -ENOENT ? -EIO : ret;
		*umemo = e->u;
	}
	e->u = *uidx;
	ret = gr_ids_index(&b->ids, &b->ic, e->v, &e->v);
	return ret == -ENOENT ? -EIO : ret;
}

/* Pack direction @d's sorted edges; returns the list entries stored. */
static int build_dir(struct build *b, unsigned d, const struct gr_geom *gm, uint32_t slack,
		     struct gs_graph_dir_root *dr, uint64_t *entries, uint64_t *loops)
{
	struct gr_list l = { 0 };
	struct gr_packer pk;
	struct gr_edge e;
	uint64_t cur = GS_GRAPH_NONE, lastv = GS_GRAPH_NONE, umemo = GS_GRAPH_NONE, uidx = 0;
	uint64_t took;
	int ret, r;

	b->npages = b->ngtt = 0;
	b->vbase = 0;
	memset(b->vwin, 0, VMAP_WIN);
	ret = new_obj(b, &b->obj);
	if (!ret)
		ret = new_obj_as(b, &b->gtt_obj, true);
	if (!ret && b->keep_vmap)
		ret = new_obj_as(b, &b->vmap_obj, true);
	if (ret)
		return ret;
	ret = gr_pack_init(&pk, gm, slack, 0, build_sink, b);
	if (ret)
		return ret;
	*entries = *loops = 0;
	while ((r = gr_sorter_next(b->s[d], &e)) > 0) {
		ret = edge_index(b, &e, &umemo, &uidx);
		if (ret)
			goto free_pk;
		if (e.u == cur && e.v == lastv) {
			/* duplicate edge: keep the smallest weight */
			if (e.w < l.w[l.n - 1])
				l.w[l.n - 1] = e.w;
			continue;
		}
		if (e.u != cur) {
			ret = gr_pack_vertex(&pk, cur, l.ids, l.w, l.n);
			if (!ret && l.n)
				ret = vmap_set(b, cur);
			if (ret)
				goto free_pk;
			l.n = 0;
			cur = e.u;
		} else if (l.n >= LIST_PART) {
			/* a hub: its whole pages go now, memory stays bounded */
			ret = gr_pack_part(&pk, cur, l.ids, l.w, l.n, &took);
			if (ret)
				goto free_pk;
			memmove(l.ids, l.ids + took, (l.n - took) * sizeof(*l.ids));
			memmove(l.w, l.w + took, (l.n - took) * sizeof(*l.w));
			l.n -= took;
		}
		ret = gr_list_push(&l, e.v, b->weighted ? e.w : 1.0f);
		if (ret)
			goto free_pk;
		lastv = e.v;
		(*entries)++;
		*loops += e.u == e.v;
		if (!(++b->done & 0xfffff))
			progress(b, "build", b->done, b->total);
	}
	ret = r;
	if (!ret && l.n) {
		ret = gr_pack_vertex(&pk, cur, l.ids, l.w, l.n);
		if (!ret)
			ret = vmap_set(b, cur);
	}
	if (!ret)
		ret = gr_pack_finish(&pk);
	if (!ret)
		ret = wflush(b);
	if (!ret)
		ret = gtt_flush(b);
	if (!ret && b->keep_vmap)
		ret = vmap_advance(b, (b->nv + 7) / 8);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->obj);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->gtt_obj);
	if (!ret && b->keep_vmap)
		ret = b->st->ops->sync(b->st, b->vmap_obj);
	if (ret)
		goto free_pk;
	dr->pages_obj = htole64(b->obj);
	dr->npages = htole64(b->npages);
	dr->ngtt = htole64(b->ngtt);
	dr->gtt_obj = htole64(b->gtt_obj);
	ret = new_obj_as(b, &b->obj, true);
	dr->gtt_alt = htole64(b->obj);
	if (!ret && b->keep_vmap) {
		dr->vmap_obj = htole64(b->vmap_obj);
		dr->vmap_bits = htole64(b->nv);
		ret = new_obj_as(b, &b->obj, true);
		dr->vmap_alt = htole64(b->obj);
	}
free_pk:
	gr_pack_free(&pk);
	gr_list_free(&l);
	gr_sorter_free(b->s[d]);
	b->s[d] = NULL;
	return ret;
}

static void set_err(const struct gs_graph_import_opts *o, const char *msg, uint64_t a,
		    uint64_t c)
{
	if (o->err && o->errlen)
		snprintf(o->err, o->errlen, msg, (unsigned long long)a, (unsigned long long)c);
}

/*
 * Dense ids (the id is the vertex index) unless they would cost more than
 * the input: a vertex range past 4 x the edges read (+ DENSE_SLACK) gets
 * the id map, so memory and disk follow the vertices that exist, never the
 * largest id.  GAP files and a given vertex count name the vertices: dense.
 */
static bool want_map(const struct build *b, const struct gs_graph_import_opts *o, int fmt,
		     uint64_t span)
{
	if (o->flags & GS_GRAPH_IMPORT_SPARSE_IDS)
		return b->any;
	if ((o->flags & GS_GRAPH_IMPORT_DENSE_IDS) || o->nv || !b->any ||
	    fmt == GS_GRAPH_FMT_SG || fmt == GS_GRAPH_FMT_WSG)
		return false;
	return span / 4 > b->nedges + DENSE_SLACK / 4;
}

int gr_build(struct gr_store *st, int fd, const struct gs_graph_import_opts *o)
{
	struct build b = { .o = o, .st = st };
	struct gs_graph_root r, old;
	struct gr_geom gm;
	uint64_t nv, entries[2] = { 0, 0 }, loops = 0, l1, objs[4];
	uint32_t slack = o->flags & GS_GRAPH_IMPORT_SLACK ? o->slack_pct : GR_DEF_SLACK;
	unsigned idw;
	bool map;
	int fmt, ret;

	if (slack > 90 || ((o->flags & GS_GRAPH_IMPORT_SPARSE_IDS) &&
			   ((o->flags & GS_GRAPH_IMPORT_DENSE_IDS) || o->nv)))
		return -EINVAL;
	fmt = o->format ? (int)o->format : gr_detect_format(fd, NULL);
	ret = gr_parse(fd, fmt, on_edge, on_header, &b, read_progress, &b, o->err, o->errlen);
	if (ret)
		goto free_sorters;
	if (!b.hdr_done) {
		ret = -EINVAL;
		goto free_sorters;
	}
	nv = b.nv_hdr;
	if (b.any && b.maxid + 1 > nv)
		nv = b.maxid + 1;
	if (o->nv) {
		if (b.any && b.maxid >= o->nv) {
			set_err(o, "vertex id %llu is not below the vertex count %llu", b.maxid,
				o->nv);
			ret = -EINVAL;
			goto free_sorters;
		}
		nv = o->nv;
	}
	map = want_map(&b, o, fmt, nv);
	/* ids are stored at the width the largest id needs (pages hold indices,
	 * which are never larger) */
	idw = !(o->flags & GS_GRAPH_IMPORT_ID64) &&
	      (map ? b.maxid < UINT32_MAX : nv <= UINT32_MAX) ? 4 : 8;
	gr_geom_init(&gm, st->page_size, idw, b.weighted, !(o->flags & GS_GRAPH_IMPORT_FIXED));
	b.wbuf = gr_page_alloc((size_t)WBUF_PAGES * st->page_size);
	b.gbuf = malloc(GTT_CHUNK * sizeof(*b.gbuf));
	b.vwin = malloc(VMAP_WIN);
	b.nv = nv;
	if (!b.wbuf || !b.gbuf || !b.vwin) {
		ret = -ENOMEM;
		goto free_bufs;
	}
	for (int d = 0; d <= b.directed && !ret; d++) {
		b.total += gr_sorter_count(b.s[d]);
		ret = gr_sorter_finish(b.s[d]);
	}
	if (!ret && map)
		ret = build_ids(&b);
	if (ret)
		goto free_bufs;
	nv = b.nv;
	/* the filter costs a bit per vertex: only where that is small next to the lists */
	b.keep_vmap = nv / 16 <= b.total + (1u << 16);
	memset(&r, 0, sizeof(r));
	for (int d = 0; d <= b.directed && !ret; d++)
		ret = build_dir(&b, (unsigned)d, &gm, slack, &r.dir[d], &entries[d],
				d ? &l1 : &loops);
	for (int i = 0; i < 4 && !ret; i++)
		ret = new_obj(&b, &objs[i]);
	if (ret)
		goto free_bufs;
	progress(&b, "build", b.total, b.total);
	r.magic = htole32(GS_GRAPH_ROOT_MAGIC);
	r.version = htole32(GS_GRAPH_VERSION);
	r.flags = htole32((b.directed ? GS_GRAPH_F_DIRECTED : 0) |
			  (b.weighted ? GS_GRAPH_F_WEIGHTED : 0) |
			  (idw == 8 ? GS_GRAPH_F_ID64 : 0) |
			  (gm.varint ? GS_GRAPH_F_VARINT : 0) |
			  (map ? GS_GRAPH_F_IDMAP : 0));
	r.page_size = htole32(st->page_size);
	r.nv = htole64(nv);
	r.ne = htole64(b.directed ? entries[0] : (entries[0] + loops) / 2);
	r.delta_obj = htole64(objs[0]);
	r.redo_obj = htole64(objs[1]);
	r.vdel_obj = htole64(objs[2]);
	r.vdel_alt = htole64(objs[3]);
	r.delta_gen = htole64(1);
	r.slack_pct = htole32(slack);
	r.chain_max = htole32(o->chain_max ? o->chain_max : GR_DEF_CHAIN_MAX);
	if (map) {
		r.ids_obj = htole64(b.ids.obj);
		r.ids_idx_obj = htole64(b.ids.idx_obj);
		r.nids_sorted = htole64(b.ids.nsorted);
	}
	/* a rebuild in place commits over the old root's generation */
	if (!gr_root_read(st, &old))
		r.gen = old.gen;
	ret = gr_root_write(st, &r);
free_bufs:
	for (unsigned i = 0; ret && st->ops->remove && i < b.nmade; i++)
		st->ops->remove(st, b.made[i]);
	free(b.wbuf);
	free(b.gbuf);
	free(b.vwin);
	gr_idcache_free(&b.ic);
	gr_ids_free(&b.ids);
free_sorters:
	gr_sorter_free(b.s[0]);
	gr_sorter_free(b.s[1]);
	return ret;
}

int gs_graph_rebuild(struct gs_fs *fs, uint64_t ino, int fd, const struct gs_graph_import_opts *o)
{
	return gr_rebuild_ino(fs, ino, fd, o);
}
