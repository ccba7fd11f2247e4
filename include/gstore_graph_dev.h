/* SPDX-License-Identifier: MIT */
/*
 * Graph objects off the CPU: the device layout of a graph, and the code
 * that the CPU reference and the GPU kernels share (host/device inline).
 *
 * A layout (struct gs_graph_layout, from gs_graph_layout_get() in
 * gstore_graph.h) is what a reader that addresses the device itself needs
 * to answer neighbour queries from the packed pages alone: per direction
 * the graph translation table as three arrays (the first and last vertex
 * index of each page, its page number and GS_GRAPH_GTT_* flags; sorted by
 * first vertex, binary-searched), and the extents of the pages objects in
 * one block space (page p of direction d is block dir[d].first_block + p;
 * a block is one page), as the direct leases of the fs give them.  A GPU
 * keeps the tables in its memory (a few bytes per page: 24 per 4 KiB page)
 * and reads pages through a GPU cache (line = page) or in batches; the
 * vertex -> page map costs nothing per vertex.
 *
 * The inline functions below read one page in the format of gstore(5)
 * (uapi/gstore_graph_fmt.h): find a vertex's tuple, its degree (the tuple
 * offsets, or the count in front of a varint list: not the list), its
 * entries (fixed-width ids, or the delta/varint code), its weights.  And
 * the sampling of gs_graph_sample(): a counter-based RNG and Floyd's choice
 * of fanout positions, so that a kernel picks exactly what the CPU does.
 */
#ifndef GSTORE_GRAPH_DEV_H
#define GSTORE_GRAPH_DEV_H

#include <stdint.h>
#include <string.h>

#include "gstore_atomic.h"	/* GS_HD */

#ifdef __cplusplus
extern "C" {
#endif

/* One run of the block space: blocks [blk, blk + nblk) at device byte dev_off
 * (the layout of struct gs_cam_ext and struct gs_att_ext). */
struct gs_graph_layout_ext {
	uint64_t blk;
	uint64_t nblk;
	uint64_t dev_off;
};

struct gs_graph_layout_dir {
	uint64_t pages_ino;	/* the pages object (internal object of the graph) */
	uint64_t npages;	/* its pages, live and free */
	uint64_t first_block;	/* its page p is block first_block + p */
	uint64_t ngtt;		/* GTT entries (live pages) */
	uint64_t *gtt_key;	/* [ngtt] smallest vertex index in the page */
	uint64_t *gtt_last;	/* [ngtt] largest */
	uint64_t *gtt_page;	/* [ngtt] page number | GS_GRAPH_GTT_* << GS_GRAPH_GTT_SHIFT */
	uint8_t *vmap;		/* bit v: v has a list here (NULL: not known) */
	uint64_t vmap_bits;	/* vertices vmap covers (past it: not known) */
};

struct gs_graph_layout {
	uint64_t nv, ne;	/* vertices (indices 0 .. nv-1), edges */
	uint64_t gen;		/* root generation the layout was built from */
	uint32_t flags;		/* GS_GRAPH_F_* of the graph */
	uint32_t page_size;	/* bytes, the fs block size */
	uint32_t id_bytes;	/* 4 or 8 */
	uint32_t ndirs;		/* 1 (undirected: one list), 2 (out, in) */
	struct gs_graph_layout_dir dir[2];
	uint8_t *removed;	/* nv bits, set: a removed vertex; NULL: none removed */
	uint64_t nremoved;
	uint64_t nblocks;	/* the block space: every direction's pages */
	uint64_t bytes;		/* bytes of live pages (what a sweep reads) */
	uint32_t next;		/* extents of the block space (0: not on a gs_fs) */
	uint32_t rsvd;
	struct gs_graph_layout_ext *ext;	/* [next], sorted by blk */
	void *priv;		/* libgstore's (the leases that pin the extents) */
};

/* ---- reading a page (any page of the graph, from its first byte) ---- */

/* Geometry every page of a graph shares (gs_gp_init from the layout). */
struct gs_gp_geom {
	uint32_t ps;		/* page size */
	uint32_t idw;		/* id bytes: 4 or 8 */
	uint32_t ent;		/* fixed-width entry: idw (+ 4 weighted) */
	uint32_t tup;		/* trailer tuple: idw + 4 */
	uint32_t weighted, varint;
};

#define GS_GP_FOOT	16u	/* sizeof(struct gs_graph_page_foot) */
#define GS_GP_F_WEIGHTED	(1u << 1)	/* GS_GRAPH_F_WEIGHTED */
#define GS_GP_F_VARINT		(1u << 3)	/* GS_GRAPH_F_VARINT */
#define GS_GP_GTT_LARGE		(1ull << (48 + 3))	/* GS_GRAPH_GTT_LARGE in gtt_page */
#define GS_GP_GTT_EXT		(1ull << (48 + 2))	/* GS_GRAPH_GTT_EXT */
#define GS_GP_PAGE_MASK		((1ull << 48) - 1)

GS_HD void gs_gp_init(struct gs_gp_geom *gm, uint32_t page_size, uint32_t id_bytes,
		      uint32_t flags)
{
	gm->ps = page_size;
	gm->idw = id_bytes;
	gm->weighted = (flags & GS_GP_F_WEIGHTED) != 0;
	gm->varint = (flags & GS_GP_F_VARINT) != 0;
	gm->ent = id_bytes + (gm->weighted ? 4 : 0);
	gm->tup = id_bytes + 4;
}

/* Little-endian words at 4-byte aligned offsets of a page (every fixed-width
 * field is: tuples and entries are multiples of 4 bytes from aligned ends). */
GS_HD uint32_t gs_gp_ld32(const uint8_t *p)
{
#if defined(__CUDA_ARCH__)
	return *(const uint32_t *)p;
#else
	uint32_t x;

	memcpy(&x, p, 4);
	return x;
#endif
}

GS_HD uint64_t gs_gp_ldid(const uint8_t *p, uint32_t idw)
{
	return idw == 4 ? gs_gp_ld32(p) : gs_gp_ld32(p) | (uint64_t)gs_gp_ld32(p + 4) << 32;
}

GS_HD uint32_t gs_gp_count(const struct gs_gp_geom *gm, const uint8_t *page)
{
	/* footer: magic (4), count (2), flags (2), seq, crc */
	return gs_gp_ld32(page + gm->ps - GS_GP_FOOT + 4) & 0xffffu;
}

/* The tuple count, or 0 when the tuples it claims would not fit the page
 * (a garbage footer: nothing in the page is read by index then). */
GS_HD uint32_t gs_gp_count_bounded(const struct gs_gp_geom *gm, const uint8_t *page)
{
	uint32_t cnt = gs_gp_count(gm, page);

	return (uint64_t)(cnt + 1) * gm->tup + GS_GP_FOOT > gm->ps ? 0 : cnt;
}

GS_HD const uint8_t *gs_gp_tuple(const struct gs_gp_geom *gm, const uint8_t *page, uint32_t i)
{
	return page + gm->ps - GS_GP_FOOT - (uint64_t)(i + 1) * gm->tup;
}

GS_HD uint64_t gs_gp_vertex(const struct gs_gp_geom *gm, const uint8_t *page, uint32_t i)
{
	return gs_gp_ldid(gs_gp_tuple(gm, page, i), gm->idw);
}

GS_HD uint32_t gs_gp_off(const struct gs_gp_geom *gm, const uint8_t *page, uint32_t i)
{
	return gs_gp_ld32(gs_gp_tuple(gm, page, i) + gm->idw);
}

/* Tuple index of vertex @v in the page, or -1.  The count is bounded by the
 * page (a garbage footer cannot make a search leave it). */
GS_HD int gs_gp_find(const struct gs_gp_geom *gm, const uint8_t *page, uint64_t v)
{
	uint32_t lo = 0, hi = gs_gp_count_bounded(gm, page);

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint64_t x = gs_gp_vertex(gm, page, mid);

		if (x == v)
			return (int)mid;
		if (x < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* One unsigned LEB128 varint of [*p, end): 1, or 0 when it runs past end. */
GS_HD int gs_gp_uv(const uint8_t **p, const uint8_t *end, uint64_t *x)
{
	uint64_t r = 0;

	for (unsigned sh = 0; *p < end && sh < 64; sh += 7) {
		uint8_t b = *(*p)++;

		r |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80)) {
			*x = r;
			return 1;
		}
	}
	return 0;
}

/*
 * The list of tuple @i: *deg entries; ids start at *ids (fixed: entries of
 * idw bytes; varint: the first coded id, after the count), weights (f32,
 * weighted graphs) at *w.  Returns 0, or -1 for a list whose bounds or
 * count do not fit its bytes.
 */
GS_HD int gs_gp_list(const struct gs_gp_geom *gm, const uint8_t *page, uint32_t i, uint64_t *deg,
		     const uint8_t **ids, const uint8_t **w)
{
	uint32_t a = gs_gp_off(gm, page, i), b = gs_gp_off(gm, page, i + 1);
	uint32_t room = gm->ps - GS_GP_FOOT - (i + 2) * gm->tup;
	const uint8_t *p = page + a;
	uint64_t n;

	if (a > b || b > room)
		return -1;
	if (!gm->varint) {
		n = (b - a) / gm->ent;
		*deg = n;
		*ids = p;
		*w = p + n * gm->idw;
		return 0;
	}
	*deg = 0;
	*ids = *w = p;
	if (a == b)
		return 0;
	if (!gs_gp_uv(&p, page + b, &n) || n > (uint64_t)(page + b - p))
		return -1;
	*deg = n;
	*ids = p;
	*w = page + b - (gm->weighted ? 4 * n : 0);
	return 0;
}

/* Entry @k of a fixed-width list (not for varint lists). */
GS_HD uint64_t gs_gp_fixed_id(const struct gs_gp_geom *gm, const uint8_t *ids, uint64_t k)
{
	return gs_gp_ldid(ids + k * gm->idw, gm->idw);
}

/* Weight @k (1.0 unweighted); weights of varint lists may be unaligned. */
GS_HD float gs_gp_weight(const struct gs_gp_geom *gm, const uint8_t *w, uint64_t k)
{
	uint32_t u;
	float f;

	if (!gm->weighted)
		return 1.0f;
	if (gm->varint)
		u = (uint32_t)w[4 * k] | (uint32_t)w[4 * k + 1] << 8 |
		    (uint32_t)w[4 * k + 2] << 16 | (uint32_t)w[4 * k + 3] << 24;
	else
		u = gs_gp_ld32(w + 4 * k);
	memcpy(&f, &u, 4);
	return f;
}

/*
 * The GTT entry of the page group that holds vertex @v (a shared page, or
 * the first chunk of a large vertex), or -1 when @v has no list in the
 * pages: gr_gtt_locate() of fs/graph over the layout's arrays.
 */
GS_HD int64_t gs_gp_locate(const uint64_t *key, const uint64_t *last, const uint64_t *page,
			   uint64_t n, uint64_t v)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (key[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && key[lo] == v)
		return (int64_t)lo;
	if (!lo || (page[lo - 1] & GS_GP_GTT_LARGE) || v > last[lo - 1])
		return -1;
	return (int64_t)(lo - 1);
}

/* Pages in the group starting at entry @i (1, or a large vertex's chunks). */
GS_HD uint64_t gs_gp_group_len(const uint64_t *page, uint64_t n, uint64_t i)
{
	uint64_t k = 1;

	if (!(page[i] & GS_GP_GTT_LARGE))
		return 1;
	while (i + k < n && (page[i + k] & GS_GP_GTT_EXT))
		k++;
	return k;
}

/* ---- sampling (gs_graph_sample and its GPU twin) ---- */

#define GS_GRAPH_SAMPLE_MAX_HOPS	8
#define GS_GRAPH_SAMPLE_MAX_FANOUT	1024

GS_HD uint64_t gs_graph_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The random word number @j of vertex @v at hop @hop: splitmix64 of a
 * counter, no state: every thread computes any word on its own. */
GS_HD uint64_t gs_graph_rng(uint64_t seed, uint32_t hop, uint64_t v, uint64_t j)
{
	uint64_t x = gs_graph_mix64(seed + 0x9e3779b97f4a7c15ull * ((uint64_t)hop + 1));

	x = gs_graph_mix64(x ^ (v * 0xd1b54a32d192ed03ull));
	return gs_graph_mix64(x + 0x9e3779b97f4a7c15ull * (j + 1));
}

/*
 * The @f positions (0 .. deg-1) that vertex @v keeps of its @deg > @f
 * neighbours at hop @hop, ascending in pos[0..f): Floyd's sampling without
 * replacement (for j = deg-f .. deg-1: t = rng % (j + 1), t if new, else j),
 * then sorted.  O(f^2) and independent of deg.
 */
GS_HD void gs_graph_sample_pick(uint64_t seed, uint32_t hop, uint64_t v, uint64_t deg, uint32_t f,
				uint64_t *pos)
{
	uint32_t n = 0;

	for (uint64_t j = deg - f; j < deg; j++) {
		uint64_t t = gs_graph_rng(seed, hop, v, j) % (j + 1);
		int dup = 0;

		for (uint32_t k = 0; k < n && !dup; k++)
			dup = pos[k] == t;
		pos[n++] = dup ? j : t;
	}
	for (uint32_t i = 1; i < f; i++) {	/* insertion sort: f is small */
		uint64_t x = pos[i];
		uint32_t k = i;

		for (; k && pos[k - 1] > x; k--)
			pos[k] = pos[k - 1];
		pos[k] = x;
	}
}

#ifdef __cplusplus
}
#endif
#endif /* GSTORE_GRAPH_DEV_H */
