/* SPDX-License-Identifier: MIT */
/*
 * Graph objects on the GPU: a gs_graph (gstore_graph.h) read by CUDA
 * kernels from its packed pages, and host-launched apps over it (BFS,
 * connected components, k-hop neighbour sampling) whose results equal the
 * CPU engine's (gs_graph_bfs, gs_graph_cc, gs_graph_sample).
 *
 * A gs_cuda_graph holds the graph's device layout (gs_graph_layout_get():
 * the GTT as arrays in GPU memory, 24 bytes per page, binary-searched by
 * the kernels; the pages objects' extents under read leases) and reads
 * pages in one of two ways:
 *
 *  GS_CUDA_GRAPH_BAM  through a GPU cache whose line is one page
 *                     (gs_cuda_array_open(): misses go through a ring to the
 *                     I/O core): one read per neighbour list, however
 *                     long (CSR needs a rowPtr and a colIdx read);
 *  GS_CUDA_GRAPH_CAM  by pass: the pages a pass needs (a BFS level's
 *                     frontier, all pages for CC) are collected on the GPU,
 *                     sorted and deduplicated, coalesced into requests of up
 *                     to max_io bytes along the extents, read by GPU-issued
 *                     CAM requests into one half of a pinned staging region
 *                     while the GPU works on the other half, and processed
 *                     page by page: each byte is read once per pass, in
 *                     large requests, instead of 4 KiB misses.  A BFS level
 *                     goes bottom-up (the unvisited vertices' lists, in-lists
 *                     of a directed graph) when that reads fewer pages.
 *
 * Pages are decoded on the GPU (gstore_graph_dev.h): fixed-width and
 * delta/varint lists, weights, large vertices split over several pages.
 *
 * Two ways in, one device view and the same results:
 *
 *  gs_cuda_graph_open()    in-process: @q is a gs_q over the device (or
 *                          image file) that the graph's gs_fs is on, e.g.
 *                          gs_q_open() of the same image with GS_Q_RDONLY;
 *  gs_cuda_graph_attach()  a process that only has the mount: "MNT/graph/NAME"
 *                          of a running gstorefs.  The daemon sends the
 *                          layout (attach op GRAPH, uapi/gstore_attach.h) and
 *                          binds the read leases on the pages to the
 *                          connection's rings, which its pollers serve: the
 *                          same CAM and BaM reads, checked against the
 *                          graph's extents.  Read access to the graph is
 *                          what the caller needs, as for reading its files.
 *
 * The sync point.  The GPU sees the merged pages of one layout generation
 * (gs_cuda_graph_layout()->gen).  Updates made on the CPU side (in-process
 * gs_graph_update()/add_edge/del_vertex ... with or without gs_graph_merge();
 * attached, lines written to MNT/graph/NAME/updates, "merge" to its ctl, or
 * `gstore graph` on the mount) are not seen by kernels until
 * gs_cuda_graph_sync(): it merges what is pending (attached: the daemon
 * does, on the handle that serves the mount), takes the new layout and
 * drops the cached pages; the calls after it read the new graph, equal to
 * the CPU engine's answers at that moment.  No merge may run while kernels
 * read (their pages would change under them), and after a merge on the CPU
 * side the next call must come after a sync: the old layout's pages may
 * have been rewritten (wrong answers) or taken back from an attached handle
 * (reads fail: -EIO).  Updates without a merge leave the old layout good.  A sync that fails leaves the handle on
 * its old layout when getting the new one failed, else only good for
 * gs_cuda_graph_close().
 *
 * Host functions return 0 (or a count) or -errno; arrays named "GPU
 * memory" are device pointers of the caller's.  Calls are synchronous.
 */
#ifndef GSTORE_CUDA_GRAPH_H
#define GSTORE_CUDA_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "gstore_cuda.h"
#include "gstore_graph.h"
#include "gstore_graph_dev.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

struct gs_cuda_graph;

enum {
	GS_CUDA_GRAPH_BAM = 0,	/* lists through the GPU page cache */
	GS_CUDA_GRAPH_CAM = 1,	/* pages by pass: sorted, coalesced, staged */
	/* BFS by pass, one direction only (CAM chooses per level) */
	GS_CUDA_GRAPH_CAM_TOPDOWN = 2,
	GS_CUDA_GRAPH_CAM_BOTTOMUP = 3,	/* where allowed: not with removed vertices */
};

struct gs_cuda_graph_params {
	size_t cache_bytes;	/* GPU page cache (BaM mode, sampling) (0: 64 MiB) */
	size_t stage_bytes;	/* CAM staging: pinned region of two halves, and a GPU
				 * buffer of one half (0: 32 MiB) */
	uint32_t max_io;	/* bytes per CAM request at most (0: 512 KiB, the device's
				 * limit if lower) */
	uint32_t nio;		/* cache misses in flight, power of two (0: 1024) */
	int device;		/* CUDA device */
};

int gs_cuda_graph_open(struct gs_cuda_graph **gp, struct gs_graph *g, struct gs_q *q,
		       const struct gs_cuda_graph_params *p);
/* The graph object at @path ("MNT/graph/NAME") of a running gstorefs,
 * through its attach socket (gs_cuda_attach(3)).  -EOPNOTSUPP: an empty
 * graph (no pages). */
int gs_cuda_graph_attach(struct gs_cuda_graph **gp, const char *path,
			 const struct gs_cuda_graph_params *p);
/* The sync point (above): merge what the CPU side has pending, take the new
 * layout, drop cached pages (new rings when the merge moved or added pages,
 * and always when attached: those of a new connection, the old one's leases
 * end with it). */
int gs_cuda_graph_sync(struct gs_cuda_graph *cg);
void gs_cuda_graph_close(struct gs_cuda_graph *cg);
/* The layout in use (host memory). */
const struct gs_graph_layout *gs_cuda_graph_layout(struct gs_cuda_graph *cg);

/* What one call cost. */
struct gs_cuda_graph_stats {
	double seconds;		/* wall time of the call */
	uint64_t bytes_read;	/* device bytes read (CAM requests, cache misses) */
	uint64_t requests;	/* device requests */
	uint32_t passes;	/* BFS levels, CC sweeps or rounds, sampling hops */
	uint32_t bottom_up;	/* BFS levels done bottom-up (CAM mode) */
};

/* depth (GPU memory, nv int32): hops from vertex index @src, -1 unreached;
 * gs_graph_bfs()'s depths.  Returns the number of levels. */
int gs_cuda_graph_bfs(struct gs_cuda_graph *cg, uint64_t src, int32_t *depth, unsigned mode,
		      struct gs_cuda_graph_stats *st);
/* label (GPU memory, nv uint64): the smallest vertex index of each vertex's
 * weakly connected component, gs_graph_cc()'s labels (CAM mode: one sweep of
 * every page with a GPU union-find; BaM mode: the same, lists through the
 * cache).  Returns the number of components (removed vertices not counted). */
int64_t gs_cuda_graph_cc(struct gs_cuda_graph *cg, uint64_t *label, unsigned mode,
			 struct gs_cuda_graph_stats *st);

/*
 * gs_graph_sample() on the GPU, lists through the page cache: the same
 * nodes, edges and order.  @seeds: vertex indices, host or GPU memory.
 * Results stay in GPU memory (the arrays below, the counts in host memory);
 * a zeroed @out is allocated to fit and reused by later calls while large
 * enough; gs_cuda_graph_sample_free() frees it.
 */
struct gs_cuda_graph_sample {
	uint64_t nnodes, nedges;
	uint32_t nhops, rsvd;
	uint64_t hop_nodes[GS_GRAPH_SAMPLE_MAX_HOPS + 2];
	uint64_t hop_edges[GS_GRAPH_SAMPLE_MAX_HOPS + 1];
	uint64_t *nodes;		/* GPU memory */
	uint64_t *src, *dst;
	uint32_t *src_pos, *dst_pos;
	uint64_t cap_nodes, cap_edges;	/* what the arrays hold */
};
int gs_cuda_graph_sample(struct gs_cuda_graph *cg, const uint64_t *seeds, uint32_t nseeds,
			 const uint32_t *fanouts, uint32_t nhops, uint64_t rng_seed,
			 struct gs_cuda_graph_sample *out, struct gs_cuda_graph_stats *st);
void gs_cuda_graph_sample_free(struct gs_cuda_graph_sample *s);

/* The device view, for kernels of the caller's (gs_cgraph_* below). */
struct gs_cgraph;
const struct gs_cgraph *gs_cuda_graph_dev(struct gs_cuda_graph *cg);
/* Counters and state in one line (diagnosing a stuck kernel). */
int gs_cuda_graph_debug(struct gs_cuda_graph *cg, char *buf, size_t len);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

/* The device view: GTT arrays in GPU memory, the page cache. */
struct gs_cgraph {
	struct gs_gp_geom gm;
	uint64_t nv;
	uint32_t ndirs, rsvd;
	const uint64_t *key[2], *last[2], *page[2];	/* GTT of each direction */
	uint64_t ngtt[2];
	uint64_t first_block[2];
	const uint8_t *removed;		/* nv bits, or NULL */
	struct gs_bam *bam;		/* line = page = block of the layout */
	const uint8_t *vmap[2];		/* bit v: v has a list (NULL: not known) */
	uint64_t vmap_bits[2];
};

#if defined(__CUDACC__)

/* 0 when @v surely has no list in direction @d (no page to read). */
static inline __device__ int gs_cgraph_has_list(const struct gs_cgraph *g, unsigned d, uint64_t v)
{
	return !g->vmap[d] || v >= g->vmap_bits[d] || (g->vmap[d][v >> 3] >> (v & 7) & 1);
}

static inline __device__ int gs_cgraph_removed(const struct gs_cgraph *g, uint64_t v)
{
	return g->removed && (g->removed[v >> 3] >> (v & 7) & 1);
}

/*
 * The entries of tuple @t of a page in memory (GPU memory or a cache line),
 * warp-cooperative: every lane of the calling warp (all 32 active) calls it
 * with the same arguments; fn(k, id, w) runs once per entry k (base + its
 * index in this page), on some lane, lanes at once (fn must not use warp
 * intrinsics).  Fixed-width lists: the lanes stride over the entries.
 * Varint lists: the lanes take 32 bytes at a time; a lane whose byte ends a
 * varint (high bit clear) decodes it (back to the byte after the previous
 * end, at most 10 bytes), its index is the ends before it, and its id the
 * warp's inclusive prefix sum of the values (the first is absolute, the
 * rest are gaps).  Returns the entries (-1: a list that does not decode).
 */
template <typename F>
static inline __device__ int64_t gs_cgraph_page_list(const struct gs_gp_geom *gm,
						      const uint8_t *page, uint32_t t, uint64_t base,
						      F fn)
{
	const uint8_t *ids, *w;
	uint64_t deg;
	int lane = threadIdx.x & 31;

	if (gs_gp_list(gm, page, t, &deg, &ids, &w))
		return -1;
	if (!gm->varint) {
		for (uint64_t k = lane; k < deg; k += 32)
			fn(base + k, gs_gp_fixed_id(gm, ids, k), gs_gp_weight(gm, w, k));
		return (int64_t)deg;
	}
	uint64_t nb = (uint64_t)(w - ids), id0 = 0, k0 = 0;
	int bad = 0;

	for (uint64_t at = 0; at < nb; at += 32) {	/* the same trips on every lane */
		uint64_t i = at + lane, val = 0, x;
		int end = i < nb && !(ids[i] & 0x80);
		unsigned ends = __ballot_sync(0xffffffffu, end);

		if (end) {
			uint64_t st = i;
			unsigned sh = 0;

			while (st > 0 && (ids[st - 1] & 0x80) && i - st < 10)
				st--;
			bad |= i - st >= 10 || (st > 0 && (ids[st - 1] & 0x80));
			for (uint64_t q = st; q <= i && sh < 64; q++, sh += 7)
				val |= (uint64_t)(ids[q] & 0x7f) << sh;
		}
		x = val;
		for (int o = 1; o < 32; o <<= 1) {	/* inclusive prefix sum */
			uint64_t y = __shfl_up_sync(0xffffffffu, x, o);

			if (lane >= o)
				x += y;
		}
		uint64_t k = k0 + __popc(ends & ((1u << lane) - 1));

		if (end && k < deg)
			fn(base + k, id0 + x, gs_gp_weight(gm, w, k));
		id0 += __shfl_sync(0xffffffffu, x, 31);
		k0 += __popc(ends);
	}
	/* every byte belongs to a varint, and there are exactly deg of them */
	bad = __any_sync(0xffffffffu, bad) || k0 != deg || (nb && (ids[nb - 1] & 0x80));
	return bad ? -1 : (int64_t)deg;
}

/*
 * The pages of vertex index @v's list in direction @dir through the page
 * cache, warp-cooperative (all 32 lanes, the same @v): per(page, t, n) with
 * the page, @v's tuple in it and the entries of the pages before, returning
 * this page's entries or -1; one line reference per page.  Returns the sum
 * (0: no list, or removed), or -1.
 */
template <typename P>
static inline __device__ int64_t gs_cgraph_pages(const struct gs_cgraph *g, unsigned dir,
						 uint64_t v, P per)
{
	unsigned d = g->ndirs > 1 ? dir : 0;
	int64_t gi, n = 0;
	uint64_t glen;

	if (v >= g->nv || gs_cgraph_removed(g, v) || !gs_cgraph_has_list(g, d, v))
		return 0;
	gi = gs_gp_locate(g->key[d], g->last[d], g->page[d], g->ngtt[d], v);
	if (gi < 0)
		return 0;
	glen = gs_gp_group_len(g->page[d], g->ngtt[d], (uint64_t)gi);
	for (uint64_t k = 0; k < glen && n >= 0; k++) {
		uint64_t blk = g->first_block[d] + (g->page[d][gi + k] & GS_GP_PAGE_MASK);
		int64_t got = 0;

		gs_array_line(g->bam, blk, 0, [&](char *line) {
			const uint8_t *page = (const uint8_t *)line;
			int t = gs_gp_find(&g->gm, page, v);

			got = t < 0 ? (glen > 1 ? -1 : 0) : per(page, (uint32_t)t, (uint64_t)n);
		});
		n = got < 0 ? -1 : n + got;
	}
	return n;
}

/* The neighbour list: fn(k, id, w) per entry (k counting over the chunks of
 * a large vertex), on some lane.  Returns the degree, or -1 on a read or
 * decode error (the cache keeps a read error: gs_cuda_array_error()). */
template <typename F>
static inline __device__ int64_t gs_cgraph_list(const struct gs_cgraph *g, unsigned dir,
						uint64_t v, F fn)
{
	return gs_cgraph_pages(g, dir, v, [&](const uint8_t *page, uint32_t t, uint64_t n) {
		return gs_cgraph_page_list(&g->gm, page, t, n, fn);
	});
}

/* Degree of @v: the pages' trailers and, varint, the count in front of the
 * list; not the list. */
static inline __device__ int64_t gs_cgraph_degree(const struct gs_cgraph *g, unsigned dir,
						  uint64_t v)
{
	return gs_cgraph_pages(g, dir, v, [&](const uint8_t *page, uint32_t t, uint64_t n) {
		const uint8_t *ids, *w;
		uint64_t deg = 0;

		return gs_gp_list(&g->gm, page, t, &deg, &ids, &w) ? (int64_t)-1 : (int64_t)deg;
	});
}

#endif /* __CUDACC__ */
#endif /* GSTORE_CUDA_GRAPH_H */
