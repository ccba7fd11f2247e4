// SPDX-License-Identifier: MIT
/*
 * Graph objects off the CPU: the device layout (the GTT as arrays, the
 * removed vertices, the pages objects' extents under read leases) that a
 * GPU reads the packed pages by, and gs_graph_sample(), the CPU reference
 * of k-hop neighbour sampling whose choices the GPU repeats exactly
 * (gstore_graph_dev.h holds the shared code).
 */
#include <errno.h>
#include <stdlib.h>

#include "graph_internal.h"
#include "gstore_fs.h"

/* ---- the device layout ---- */

struct layout_priv {
	struct gs_graph_layout l;
	struct gs_lease *lease[2];
	struct gs_fs *fs;
};

static bool has_pending(const struct gs_graph *g)
{
	if (g->delta_recs || g->nvops || g->log_ops)
		return true;
	for (unsigned d = 0; d < g->ndirs; d++)
		if (g->dir[d].npend)
			return true;
	return false;
}

void gs_graph_layout_put(struct gs_graph_layout *l)
{
	struct layout_priv *p;

	if (!l)
		return;
	p = l->priv;
	for (unsigned d = 0; d < 2; d++) {
		if (p->lease[d])
			gs_fs_lease_end(p->lease[d]);
		free(l->dir[d].gtt_key);
		free(l->dir[d].gtt_last);
		free(l->dir[d].gtt_page);
		free(l->dir[d].vmap);
	}
	free(l->removed);
	free(l->ext);
	free(p);
}

struct gs_lease *gs_graph_layout_take_lease(struct gs_graph_layout *l, unsigned d)
{
	struct layout_priv *p;
	struct gs_lease *ls;

	if (!l || d >= 2)
		return NULL;
	p = l->priv;
	ls = p->lease[d];
	p->lease[d] = NULL;
	return ls;
}

/* Direction @d's extents, shifted to its place in the block space, appended
 * to l->ext; the read lease that pins them stays in p->lease[d]. */
static int layout_extents(struct layout_priv *p, unsigned d)
{
	struct gs_graph_layout *l = &p->l;
	struct gs_graph_layout_dir *ld = &l->dir[d];
	struct gs_graph_layout_ext *e;
	uint64_t bytes = ld->npages * l->page_size;
	int n, m;

	if (!bytes)
		return 0;
	n = gs_fs_lease_begin(p->fs, ld->pages_ino, 0, bytes, GS_LEASE_READ, &p->lease[d]);
	if (n)
		return n;
	n = gs_fs_lease_export(p->lease[d], l->page_size, NULL, 0);
	if (n <= 0)
		return n;
	e = realloc(l->ext, (l->next + (size_t)n) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	l->ext = e;
	/* struct gs_graph_layout_ext is struct gs_att_ext, field for field */
	m = gs_fs_lease_export(p->lease[d], l->page_size, e + l->next, (unsigned)n);
	if (m < 0)
		return m;
	if (m != n)
		return -EAGAIN;	/* the mapping moved under a lease: cannot happen */
	for (int i = 0; i < n; i++)
		e[l->next + i].blk += ld->first_block;
	l->next += (uint32_t)n;
	return 0;
}

static int layout_fill(struct gs_graph *g, struct layout_priv *p)
{
	struct gs_graph_layout *l = &p->l;
	uint64_t first = 0;

	l->nv = g->nv;
	l->ne = g->ne;
	l->gen = le64toh(g->root.gen);
	l->flags = le32toh(g->root.flags);
	l->page_size = g->gm.page_size;
	l->id_bytes = g->gm.idw;
	l->ndirs = g->ndirs;
	for (unsigned d = 0; d < g->ndirs; d++) {
		const struct gr_gtt *t = &g->dir[d].gtt;
		struct gs_graph_layout_dir *ld = &l->dir[d];
		size_t sz = (t->n ? t->n : 1) * sizeof(uint64_t);

		ld->pages_ino = g->dir[d].pages_obj;
		ld->npages = g->dir[d].npages;
		ld->first_block = first;
		ld->ngtt = t->n;
		ld->gtt_key = malloc(sz);
		ld->gtt_last = malloc(sz);
		ld->gtt_page = malloc(sz);
		if (!ld->gtt_key || !ld->gtt_last || !ld->gtt_page)
			return -ENOMEM;
		for (uint64_t i = 0; i < t->n; i++) {
			uint64_t fl = t->e[i].flags & ~(uint64_t)GS_GRAPH_GTT_DIRTY;

			ld->gtt_key[i] = t->e[i].key;
			ld->gtt_last[i] = t->e[i].last;
			ld->gtt_page[i] = (t->e[i].page & GS_GRAPH_GTT_PAGE_MASK) |
					  fl << GS_GRAPH_GTT_SHIFT;
		}
		if (g->dir[d].vmap) {	/* a vertex without a list needs no page */
			size_t vb = (g->dir[d].vmap_bits + 7) / 8;

			ld->vmap = malloc(vb ? vb : 1);
			if (!ld->vmap)
				return -ENOMEM;
			memcpy(ld->vmap, g->dir[d].vmap, vb);
			ld->vmap_bits = g->dir[d].vmap_bits;
		}
		l->bytes += t->n * (uint64_t)l->page_size;
		first += ld->npages;
	}
	l->nblocks = first;
	if (g->vdel.n) {
		l->removed = calloc((g->nv + 7) / 8 + 1, 1);
		if (!l->removed)
			return -ENOMEM;
		for (uint64_t i = 0; i <= g->vdel.mask; i++) {
			uint64_t v = g->vdel.keys[i];

			if (v != GS_GRAPH_NONE && v < g->nv) {
				gr_vmap_set(l->removed, v, true);
				l->nremoved++;
			}
		}
	}
	return 0;
}

int gs_graph_layout_get(struct gs_graph *g, unsigned flags, struct gs_graph_layout **lp)
{
	struct layout_priv *p;
	int ret;

	if (!g || !lp || flags)
		return -EINVAL;
	if (g->eng != &gr_engine_pages)
		return -EOPNOTSUPP;
	if (g->broken)
		return g->broken;
	pthread_rwlock_rdlock(&g->lock);
	ret = has_pending(g);
	pthread_rwlock_unlock(&g->lock);
	if (ret) {
		/* the layout is of the pages: fold the updates into them first */
		if (g->oflags & GS_GRAPH_RDONLY)
			return -EBUSY;
		ret = gs_graph_merge(g);
		if (ret)
			return ret;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->l.priv = p;
	p->fs = g->fs;
	pthread_rwlock_rdlock(&g->lock);
	ret = has_pending(g) ? -EBUSY : layout_fill(g, p);
	/* the leases write back the cached pages first: the device has them all.
	 * Under the lock: a merge between the GTT copied above and the extents
	 * pinned here would leave a table of pages that moved */
	for (unsigned d = 0; !ret && g->fs && d < p->l.ndirs; d++)
		ret = layout_extents(p, d);
	pthread_rwlock_unlock(&g->lock);
	if (ret) {
		gs_graph_layout_put(&p->l);
		return ret;
	}
	*lp = &p->l;
	return 0;
}

/* ---- k-hop sampling, the CPU reference ---- */

int gs_graph_sample_bounds(uint32_t nseeds, const uint32_t *fanouts, uint32_t nhops,
			   uint64_t *max_nodes, uint64_t *max_edges)
{
	uint64_t layer = nseeds, nodes = nseeds, edges = 0;

	if (!nhops || nhops > GS_GRAPH_SAMPLE_MAX_HOPS || !fanouts)
		return -EINVAL;
	for (uint32_t h = 0; h < nhops; h++) {
		if (!fanouts[h] || fanouts[h] > GS_GRAPH_SAMPLE_MAX_FANOUT)
			return -EINVAL;
		layer *= fanouts[h];	/* < 2^32 * 2^10 per hop, checked below */
		edges += layer;
		nodes += layer;
		if (nodes > UINT32_MAX)
			return -EINVAL;
	}
	if (max_nodes)
		*max_nodes = nodes;
	if (max_edges)
		*max_edges = edges;
	return 0;
}

void gs_graph_sample_free(struct gs_graph_sample *s)
{
	if (!s)
		return;
	free(s->nodes);
	free(s->src);
	free(s->dst);
	free(s->src_pos);
	free(s->dst_pos);
	memset(s, 0, sizeof(*s));
}

/* Position of @u in the node list, adding it when new. */
static int node_pos(struct gs_graph_sample *s, struct gr_map *m, uint64_t u, uint32_t *pos)
{
	bool added;
	uint32_t *slot = gr_map_put(m, u, (uint32_t)s->nnodes, &added);

	if (!slot)
		return -ENOMEM;
	if (added)
		s->nodes[s->nnodes++] = u;
	*pos = *slot;
	return 0;
}

/* Hop @h: the picks of each node that hop h-1 added. */
static int sample_hop(struct gs_graph *g, struct gs_graph_sample *s, struct gr_map *m, uint32_t h,
		      uint32_t f, uint64_t rng_seed, uint64_t *pick)
{
	uint64_t a = s->hop_nodes[h], n = s->hop_nodes[h + 1] - a;
	struct gs_graph_req *req = calloc(n ? n : 1, sizeof(*req));
	int ret = 0;

	if (!req)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		req[i].vertex = s->nodes[a + i];
		req[i].dir = GS_GRAPH_OUT;
		req[i].flags = GR_REQ_INDEX | GS_GRAPH_REQ_ALLOC;
	}
	if (n)
		ret = gs_graph_neighbors_batch(g, req, n);
	for (uint64_t i = 0; i < n && ret >= 0; i++) {
		uint64_t v = req[i].vertex;
		int64_t deg = req[i].res;
		uint32_t vpos = (uint32_t)(a + i), k = 0, take;

		if (deg == -ENOENT)
			deg = 0;	/* a removed vertex: no neighbours */
		if (deg < 0) {
			ret = (int)deg;
			break;
		}
		take = (uint64_t)deg <= f ? (uint32_t)deg : f;
		if ((uint64_t)deg > f)
			gs_graph_sample_pick(rng_seed, h, v, (uint64_t)deg, f, pick);
		for (k = 0; k < take && !ret; k++) {
			uint64_t u = req[i].ids[(uint64_t)deg > f ? pick[k] : k];
			uint64_t e = s->nedges++;

			s->src[e] = v;
			s->dst[e] = u;
			s->src_pos[e] = vpos;
			ret = node_pos(s, m, u, &s->dst_pos[e]);
		}
	}
	for (uint64_t i = 0; i < n; i++)
		free(req[i].ids);
	free(req);
	return ret < 0 ? ret : 0;
}

int gs_graph_sample(struct gs_graph *g, const uint64_t *seeds, uint32_t nseeds,
		    const uint32_t *fanouts, uint32_t nhops, uint64_t rng_seed,
		    struct gs_graph_sample *out)
{
	struct gs_graph_sample s;
	struct gr_map m = { 0 };
	uint64_t max_nodes, max_edges, *pick = NULL;
	uint32_t fmax = 0;
	int ret;

	if (!g || !out || (nseeds && !seeds))
		return -EINVAL;
	ret = gs_graph_sample_bounds(nseeds, fanouts, nhops, &max_nodes, &max_edges);
	if (ret)
		return ret;
	memset(&s, 0, sizeof(s));
	for (uint32_t i = 0; i < nseeds; i++)
		if (seeds[i] >= g->nv)
			return -EINVAL;
	for (uint32_t h = 0; h < nhops; h++)
		fmax = fanouts[h] > fmax ? fanouts[h] : fmax;
	s.nhops = nhops;
	s.nodes = malloc((max_nodes ? max_nodes : 1) * sizeof(*s.nodes));
	s.src = malloc((max_edges ? max_edges : 1) * sizeof(*s.src));
	s.dst = malloc((max_edges ? max_edges : 1) * sizeof(*s.dst));
	s.src_pos = malloc((max_edges ? max_edges : 1) * sizeof(*s.src_pos));
	s.dst_pos = malloc((max_edges ? max_edges : 1) * sizeof(*s.dst_pos));
	pick = malloc(fmax * sizeof(*pick));
	if (!s.nodes || !s.src || !s.dst || !s.src_pos || !s.dst_pos || !pick) {
		ret = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < nseeds && !ret; i++) {
		uint32_t pos;

		ret = node_pos(&s, &m, seeds[i], &pos);
	}
	s.hop_nodes[1] = s.nnodes;
	for (uint32_t h = 0; h < nhops && !ret; h++) {
		s.hop_edges[h] = s.nedges;
		ret = sample_hop(g, &s, &m, h, fanouts[h], rng_seed, pick);
		s.hop_nodes[h + 2] = s.nnodes;
	}
	s.hop_edges[nhops] = s.nedges;
	if (ret)
		goto fail;
	free(pick);
	gr_map_free(&m);
	*out = s;
	return 0;
fail:
	free(pick);
	gr_map_free(&m);
	gs_graph_sample_free(&s);
	return ret;
}
