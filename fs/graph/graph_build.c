// SPDX-License-Identifier: MIT
/*
 * Import: parse the input, sort the edges of each direction (externally
 * when they exceed the memory budget), pack the sorted lists into pages,
 * write the GTTs, commit the root.  Duplicate edges collapse into one
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
#define WBUF_PAGES	256

struct build {
	const struct gs_graph_import_opts *o;
	struct gr_store *st;
	int directed, weighted;
	bool hdr_done, any;
	uint64_t nv_hdr, maxid;
	struct gr_sorter *s[2];
	/* page writer of the direction being built */
	uint64_t obj, npages;
	uint8_t *wbuf;
	unsigned nw;
	struct gr_gtt gtt;
	uint64_t done, total;
	uint64_t made[24];	/* objects created, dropped again on failure */
	unsigned nmade;
	uint8_t *vmap;		/* the direction's vertex filter */
	uint64_t nv;
};

static int new_obj(struct build *b, uint64_t *obj)
{
	int ret = b->st->ops->create(b->st, obj);

	if (!ret && b->nmade < sizeof(b->made) / sizeof(b->made[0]))
		b->made[b->nmade++] = *obj;
	return ret;
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

static int on_header(void *arg, struct gr_parse_info *pi)
{
	struct build *b = arg;
	uint32_t fl = b->o->flags;
	size_t mem = b->o->mem_bytes ? b->o->mem_bytes : DEF_SORT_MEM;
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
	ret = gr_sorter_add(b->s[0], u, v, w);
	if (ret)
		return ret;
	if (b->directed)
		return gr_sorter_add(b->s[1], v, u, w);
	return u == v ? 0 : gr_sorter_add(b->s[0], v, u, w);
}

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

static int build_sink(void *arg, void *page, uint64_t key, uint64_t last, uint32_t flags)
{
	struct build *b = arg;
	struct gr_gent e = { .key = key, .last = last, .page = b->npages, .flags = flags };
	uint32_t ps = b->st->page_size;

	memcpy(b->wbuf + (size_t)b->nw * ps, page, ps);
	b->nw++;
	b->npages++;
	if (b->nw == WBUF_PAGES) {
		int ret = wflush(b);

		if (ret)
			return ret;
	}
	return gr_gtt_push(&b->gtt, &e);
}

static int write_gtt(struct build *b, uint64_t obj)
{
	size_t n = b->gtt.n;
	struct gs_graph_gtt_ent *d = malloc((n ? n : 1) * sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		gr_gtt_to_disk(&b->gtt.e[i], &d[i]);
	ret = n ? gr_store_write_full(b->st, obj, d, n * sizeof(*d), 0) : 0;
	free(d);
	return ret ? ret : b->st->ops->sync(b->st, obj);
}

/* Pack direction @d's sorted edges; returns the list entries stored. */
static int build_dir(struct build *b, unsigned d, const struct gr_geom *gm, uint32_t slack,
		     struct gs_graph_dir_root *dr, uint64_t *entries, uint64_t *loops)
{
	struct gr_list l = { 0 };
	struct gr_packer pk;
	struct gr_edge e;
	uint64_t cur = GS_GRAPH_NONE, lastv = GS_GRAPH_NONE;
	int ret, r;

	memset(b->vmap, 0, (b->nv + 7) / 8 + 1);
	ret = gr_sorter_finish(b->s[d]);
	if (ret)
		return ret;
	ret = new_obj(b, &b->obj);
	if (ret)
		return ret;
	b->npages = 0;
	b->gtt.n = 0;
	ret = gr_pack_init(&pk, gm, slack, 0, build_sink, b);
	if (ret)
		return ret;
	*entries = *loops = 0;
	while ((r = gr_sorter_next(b->s[d], &e)) > 0) {
		if (e.u == cur && e.v == lastv) {
			/* duplicate edge: keep the smallest weight */
			if (e.w < l.w[l.n - 1])
				l.w[l.n - 1] = e.w;
			continue;
		}
		if (e.u != cur) {
			ret = gr_pack_vertex(&pk, cur, l.ids, l.w, l.n);
			if (ret)
				goto free_pk;
			if (l.n)
				gr_vmap_set(b->vmap, cur, true);
			l.n = 0;
			cur = e.u;
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
		gr_vmap_set(b->vmap, cur, true);
	}
	if (!ret)
		ret = gr_pack_finish(&pk);
	if (!ret)
		ret = wflush(b);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->obj);
	if (ret)
		goto free_pk;
	dr->pages_obj = htole64(b->obj);
	dr->npages = htole64(b->npages);
	dr->ngtt = htole64(b->gtt.n);
	ret = new_obj(b, &b->obj);
	if (!ret)
		ret = write_gtt(b, b->obj);
	dr->gtt_obj = htole64(b->obj);
	if (!ret)
		ret = new_obj(b, &b->obj);
	dr->gtt_alt = htole64(b->obj);
	if (!ret)
		ret = new_obj(b, &b->obj);
	if (!ret && b->nv)
		ret = gr_store_write_full(b->st, b->obj, b->vmap, (b->nv + 7) / 8, 0);
	if (!ret)
		ret = b->st->ops->sync(b->st, b->obj);
	dr->vmap_obj = htole64(b->obj);
	dr->vmap_bits = htole64(b->nv);
	if (!ret)
		ret = new_obj(b, &b->obj);
	dr->vmap_alt = htole64(b->obj);
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

int gr_build(struct gr_store *st, int fd, const struct gs_graph_import_opts *o)
{
	struct build b = { .o = o, .st = st };
	struct gs_graph_root r, old;
	struct gr_geom gm;
	uint64_t nv, entries[2] = { 0, 0 }, loops = 0, l1, objs[4];
	uint32_t slack = o->flags & GS_GRAPH_IMPORT_SLACK ? o->slack_pct : GR_DEF_SLACK;
	unsigned idw;
	int fmt, ret;

	if (slack > 90)
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
	idw = !(o->flags & GS_GRAPH_IMPORT_ID64) && nv <= UINT32_MAX ? 4 : 8;
	gr_geom_init(&gm, st->page_size, idw, b.weighted, !(o->flags & GS_GRAPH_IMPORT_FIXED));
	b.wbuf = gr_page_alloc((size_t)WBUF_PAGES * st->page_size);
	b.nv = nv;
	b.vmap = malloc((nv + 7) / 8 + 1);
	if (!b.wbuf || !b.vmap) {
		ret = -ENOMEM;
		goto free_sorters;
	}
	memset(&r, 0, sizeof(r));
	for (int d = 0; d <= b.directed; d++)
		b.total += gr_sorter_count(b.s[d]);
	for (int d = 0; d <= b.directed && !ret; d++)
		ret = build_dir(&b, (unsigned)d, &gm, slack, &r.dir[d], &entries[d],
				d ? &l1 : &loops);
	for (int i = 0; i < 4 && !ret; i++)
		ret = new_obj(&b, &objs[i]);
	if (ret)
		goto free_wbuf;
	progress(&b, "build", b.total, b.total);
	r.magic = htole32(GS_GRAPH_ROOT_MAGIC);
	r.version = htole32(GS_GRAPH_VERSION);
	r.flags = htole32((b.directed ? GS_GRAPH_F_DIRECTED : 0) |
			  (b.weighted ? GS_GRAPH_F_WEIGHTED : 0) |
			  (idw == 8 ? GS_GRAPH_F_ID64 : 0) |
			  (gm.varint ? GS_GRAPH_F_VARINT : 0));
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
	/* a rebuild in place commits over the old root's generation */
	if (!gr_root_read(st, &old))
		r.gen = old.gen;
	ret = gr_root_write(st, &r);
free_wbuf:
	for (unsigned i = 0; ret && st->ops->remove && i < b.nmade; i++)
		st->ops->remove(st, b.made[i]);
	free(b.wbuf);
	free(b.vmap);
free_sorters:
	gr_gtt_free(&b.gtt);
	gr_sorter_free(b.s[0]);
	gr_sorter_free(b.s[1]);
	return ret;
}

int gs_graph_rebuild(struct gs_fs *fs, uint64_t ino, int fd, const struct gs_graph_import_opts *o)
{
	return gr_rebuild_ino(fs, ino, fd, o);
}
