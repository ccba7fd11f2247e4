/* SPDX-License-Identifier: MIT */
/*
 * gstore graph objects (GraphSSD): adjacency lists packed into device pages,
 * found through a graph translation table (GTT), updated through delta
 * records and merged in place under a redo log.
 *
 * A graph lives in the filesystem as graph/NAME (a GS_T_GRAPH object) with
 * hidden internal objects for its pages.  Vertices are named by their ids
 * (the edge list's numbers) everywhere except in the apps' arrays, which
 * are indexed by vertex index 0 .. nv-1.  A graph with dense ids uses the
 * id as the index; one whose ids are sparse (far above the edge count:
 * 4294967295, 2^40, ...) keeps a map, so it costs what its vertices cost,
 * not what its largest id would (info.id_map; gs_graph_vertex_id/index
 * translate).  Neighbour lists come back sorted by id; weights are f32
 * (1.0 when the graph is unweighted).
 *
 * Queries are answered synchronously (gs_graph_neighbors) or through
 * queues (the request/response model of GraphSSD): a caller submits many
 * requests, the graph's worker threads sort them by page, read every page
 * once and complete each request (callback on a worker, or reaped).
 *
 * All functions return 0 (or a count) on success and -errno on failure.
 * Nothing here prints; see gs_set_log_func() in gstore.h.
 */
#ifndef GSTORE_GRAPH_H
#define GSTORE_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gstore_graph_dev.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_fs;
struct gs_graph;
struct gs_graph_queue;

/* Directions of a neighbour request (undirected graphs: both are one list). */
enum { GS_GRAPH_OUT = 0, GS_GRAPH_IN = 1 };

/* ---- import ---- */

enum gs_graph_format {
	GS_GRAPH_FMT_AUTO = 0,	/* by file suffix, then by content */
	GS_GRAPH_FMT_TEXT,	/* SNAP-style edge list: "u v [w]", '#'/'%' comments */
	GS_GRAPH_FMT_MTX,	/* Matrix Market coordinate */
	GS_GRAPH_FMT_SG,	/* GAP serialized graph (.sg) */
	GS_GRAPH_FMT_WSG,	/* GAP weighted serialized graph (.wsg) */
};

/* gs_graph_import_opts.flags; without DIRECTED/UNDIRECTED or WEIGHTED/
 * UNWEIGHTED the file decides (text: directed unless a comment says
 * "Undirected"; mtx: symmetric = undirected, real/integer = weighted). */
enum {
	GS_GRAPH_IMPORT_DIRECTED = 1u << 0,
	GS_GRAPH_IMPORT_UNDIRECTED = 1u << 1,
	GS_GRAPH_IMPORT_WEIGHTED = 1u << 2,
	GS_GRAPH_IMPORT_UNWEIGHTED = 1u << 3,
	GS_GRAPH_IMPORT_ID64 = 1u << 4,		/* 8-byte ids even if 4 would do */
	GS_GRAPH_IMPORT_REPLACE = 1u << 5,	/* replace an existing graph NAME */
	GS_GRAPH_IMPORT_SLACK = 1u << 6,	/* slack_pct is set (may be 0) */
	GS_GRAPH_IMPORT_FIXED = 1u << 7,	/* fixed-width lists, not delta/varint coded */
	GS_GRAPH_IMPORT_SPARSE_IDS = 1u << 8,	/* keep an id map whatever the ids */
	GS_GRAPH_IMPORT_DENSE_IDS = 1u << 9,	/* ids are indices whatever they cost */
};

struct gs_graph_import_opts {
	uint32_t format;	/* enum gs_graph_format */
	uint32_t flags;		/* GS_GRAPH_IMPORT_* */
	uint64_t nv;		/* vertices; 0: from the file (header or max id + 1) */
	uint32_t slack_pct;	/* free space kept per page for updates (default 10) */
	uint32_t chain_max;	/* automatic merge past this chain length (0: 16) */
	size_t mem_bytes;	/* sort memory; larger inputs sort externally (0: 256 MiB) */
	const char *tmpdir;	/* sort runs (NULL: $TMPDIR, else /tmp) */
	/* Called now and then: phase "read", "sort", "build"; done/total in
	 * bytes of input for "read", edges otherwise (total 0: unknown). */
	void (*progress)(void *arg, const char *phase, uint64_t done, uint64_t total);
	void *progress_arg;
	char *err;		/* out: what was wrong, with the line number */
	size_t errlen;
};

/* Build graph/NAME from a file (or an open fd).  The graph appears only
 * when complete: -EEXIST if NAME exists (without REPLACE), -EINVAL for a
 * malformed input (o->err says where). */
int gs_graph_import(struct gs_fs *fs, const char *name, const char *path,
		    const struct gs_graph_import_opts *o);
int gs_graph_import_fd(struct gs_fs *fs, const char *name, int fd,
		       const struct gs_graph_import_opts *o);
/* Build the existing GS_T_GRAPH object @ino (made by mkdir in graph/, or a
 * graph to replace) from @fd: one root commit switches it to the new graph,
 * and nothing changes on failure.  No handle may be open on @ino. */
int gs_graph_rebuild(struct gs_fs *fs, uint64_t ino, int fd,
		     const struct gs_graph_import_opts *o);

/* ---- open, info ---- */

enum {
	GS_GRAPH_RDONLY = 1u << 0,
};
int gs_graph_open(struct gs_fs *fs, const char *name, unsigned flags, struct gs_graph **gp);
int gs_graph_open_ino(struct gs_fs *fs, uint64_t ino, unsigned flags, struct gs_graph **gp);
/* Makes pending updates durable (like gs_graph_sync), then frees @g. */
int gs_graph_close(struct gs_graph *g);
/* Worker threads serving queues (default 8; set before the first queue). */
int gs_graph_set_workers(struct gs_graph *g, unsigned n);

struct gs_graph_info {
	uint64_t nv, ne;
	uint32_t directed, weighted;
	uint32_t id_bytes, page_size;
	uint64_t pages[2];	/* live adjacency pages out, in */
	uint64_t gtt_entries[2];
	uint64_t disk_bytes;	/* all the graph's objects */
	uint64_t removed;	/* removed vertex ids */
	uint64_t delta_bytes, delta_records;	/* on disk, not yet merged */
	uint64_t log_ops;	/* in memory, not yet durable */
	uint32_t max_chain;	/* longest delta chain now */
	uint32_t chain_max, slack_pct;
	uint64_t merges;
	uint32_t id_map;	/* 1: sparse ids, kept in a map (indices != ids) */
};
int gs_graph_info(struct gs_graph *g, struct gs_graph_info *gi);
/* The text of graph/NAME/info; returns its length (or what it needs). */
int gs_graph_info_text(struct gs_graph *g, char *buf, size_t size);

/* ---- vertex ids and indices ---- */

/* The index of vertex @id (-ENOENT: not a vertex, or removed). */
int gs_graph_vertex_index(struct gs_graph *g, uint64_t id, uint64_t *idx);
/* The ids of the vertices with indices first .. first + n - 1 (removed
 * ones included; -ENOENT past nv).  On a graph without an id map, ids[i]
 * is first + i. */
int gs_graph_vertex_ids(struct gs_graph *g, uint64_t first, uint64_t n, uint64_t *ids);

/* ---- queries ---- */

/* Degree of @v (-ENOENT: not a vertex). */
int64_t gs_graph_degree(struct gs_graph *g, uint64_t v, unsigned dir);
/* Neighbours of @v into ids/weights (either may be NULL), at most @cap;
 * returns the degree, which may exceed @cap. */
int64_t gs_graph_neighbors(struct gs_graph *g, uint64_t v, unsigned dir, uint64_t *ids,
			   float *weights, size_t cap);
/* Weight of the edge u -> v (-ENOENT: no such edge). */
int gs_graph_edge_weight(struct gs_graph *g, uint64_t u, uint64_t v, float *w);

/* gs_graph_req.flags */
enum {
	GS_GRAPH_REQ_DEGREE = 1u << 0,	/* only the degree */
	GS_GRAPH_REQ_ALLOC = 1u << 1,	/* library mallocs ids (and weights); caller frees */
	GS_GRAPH_REQ_WEIGHTS = 1u << 2,	/* with ALLOC, or in a callback: weights too */
};

/*
 * One neighbour request.  Results: res = degree or -errno; min(res, cap)
 * entries in ids/weights.  In callback mode a request with ids == NULL and
 * no ALLOC sees the worker's own buffers in ids/weights (all res entries),
 * valid only during the callback.
 */
struct gs_graph_req {
	uint64_t vertex;
	uint32_t dir;		/* GS_GRAPH_OUT / GS_GRAPH_IN */
	uint32_t flags;		/* GS_GRAPH_REQ_* */
	int64_t res;
	uint64_t *ids;
	float *weights;
	size_t cap;
	void *priv;		/* the caller's */
};

typedef void (*gs_graph_cb)(struct gs_graph_req *req, void *arg);

struct gs_graph_queue_params {
	uint32_t depth;		/* requests in flight before submit waits (0: 4096) */
	gs_graph_cb cb;		/* run on a worker per completion; NULL: reap them */
	void *cb_arg;
};
int gs_graph_queue_create(struct gs_graph *g, const struct gs_graph_queue_params *p,
			  struct gs_graph_queue **qp);
/* Waits for the requests in flight, then frees @q. */
void gs_graph_queue_destroy(struct gs_graph_queue *q);
/* Queue @n requests (they stay the caller's memory until completed);
 * returns n or -errno.  Waits while depth requests are in flight. */
int gs_graph_submit(struct gs_graph_queue *q, struct gs_graph_req **reqs, unsigned n);
/* Completed requests, at least @min (waiting), at most @max. */
int gs_graph_reap(struct gs_graph_queue *q, struct gs_graph_req **reqs, unsigned max,
		  unsigned min);
/* Wait until nothing is in flight (callback mode). */
int gs_graph_drain(struct gs_graph_queue *q);
/* Submit, wait, done: @n requests answered by the workers. */
int gs_graph_neighbors_batch(struct gs_graph *g, struct gs_graph_req *reqs, size_t n);

/* ---- updates ---- */

/*
 * Apply text lines "+ u v [w]", "- u v", "= u v w", "+v id", "-v id"
 * ('#' comments and blank lines are skipped).  All or nothing: on error
 * nothing of @text is applied and *bad_line (1-based) names the line
 * (-EINVAL malformed, -ENOENT missing edge or vertex, -EEXIST existing
 * edge or vertex).  Visible to the next query; durable after gs_graph_sync.
 * Returns the number of updates applied.
 */
int gs_graph_update(struct gs_graph *g, const char *text, size_t len, uint64_t *bad_line);
int gs_graph_add_edge(struct gs_graph *g, uint64_t u, uint64_t v, float w);
int gs_graph_del_edge(struct gs_graph *g, uint64_t u, uint64_t v);
int gs_graph_set_weight(struct gs_graph *g, uint64_t u, uint64_t v, float w);
int gs_graph_add_vertex(struct gs_graph *g, uint64_t v);
int gs_graph_del_vertex(struct gs_graph *g, uint64_t v);
/* Write the in-memory update log as delta records; durable on return 0. */
int gs_graph_sync(struct gs_graph *g);
/* Fold all updates into the pages (crash-safe through the redo log). */
int gs_graph_merge(struct gs_graph *g);

/* The canonical edge list as text ("u v" or "u v w" lines, sorted; an
 * undirected edge once, u <= v).  Start with a zeroed cursor; returns the
 * bytes put in @buf (whole lines), 0 at the end. */
struct gs_graph_cursor {
	uint64_t v, i;
};
ssize_t gs_graph_edges_text(struct gs_graph *g, struct gs_graph_cursor *c, char *buf,
			    size_t size);

/* ---- apps (multithreaded over the queues) ----
 *
 * Result arrays have nv entries indexed by vertex index (see
 * gs_graph_vertex_ids); vertices passed in (src, starts) and walked
 * (paths) are ids. */

struct gs_graph_app_opts {
	unsigned threads;	/* worker threads (0: the graph's setting) */
	unsigned batch;		/* requests per submit (0: 256) */
};
/* depth[i] = hops from vertex @src to index i, -1 unreachable. */
int gs_graph_bfs(struct gs_graph *g, uint64_t src, int64_t *depth,
		 const struct gs_graph_app_opts *o);
/* label[i] = the smallest index in i's (weakly) connected component (the
 * smallest id's, unless vertices were added by updates); returns the
 * number of components. */
int64_t gs_graph_cc(struct gs_graph *g, uint64_t *label, const struct gs_graph_app_opts *o);
/* Pull PageRank, @iters iterations (dangling mass spread evenly). */
int gs_graph_pagerank(struct gs_graph *g, double damping, unsigned iters, double *rank,
		      const struct gs_graph_app_opts *o);
/* @n walks of @len steps from starts[i]; path i is paths[i*(len+1) ...]
 * (GS_GRAPH_NO_VERTEX after a dead end).  Deterministic for a seed. */
#define GS_GRAPH_NO_VERTEX UINT64_MAX
int gs_graph_randomwalk(struct gs_graph *g, const uint64_t *starts, size_t n, unsigned len,
			uint64_t seed, uint64_t *paths, const struct gs_graph_app_opts *o);
/* Maximal independent set (Luby, priorities from @seed); in[v] = 1 if in
 * the set.  Returns the set's size. */
int64_t gs_graph_mis(struct gs_graph *g, uint64_t seed, uint8_t *in,
		     const struct gs_graph_app_opts *o);

/* ---- the CSR baseline (benchmarks) ---- */

/* Store @g as arrays/PREFIX.rowptr (u64), PREFIX.colidx (ids at the
 * graph's width), PREFIX.val (f32, weighted graphs) and, directed, the
 * same with PREFIX.in.*. */
int gs_graph_export_csr(struct gs_graph *g, const char *prefix);
/* A read-only graph answered from those arrays with gs_fs_read (the same
 * cache); queries, queues and apps work on it. */
int gs_graph_open_csr(struct gs_fs *fs, const char *prefix, struct gs_graph **gp);

/* ---- k-hop neighbour sampling (GNN mini-batches) ----
 *
 * gs_graph_sample(): out-direction, vertex INDICES in and out.  The node
 * list starts with the seeds (a seed given twice counts once), then hop h
 * = 0 .. nhops-1 samples, for each node that hop h-1 added (hop 0: the
 * seeds) in node-list order, fanouts[h] of its neighbours without
 * replacement (all of them when its degree is <= fanouts[h]; a removed
 * vertex has none): the positions gs_graph_sample_pick() of
 * gstore_graph_dev.h chooses with gs_graph_rng(rng_seed, h, v, .), taken in
 * list order, so in ascending neighbour index.  Each pick is an edge (v,
 * u) of hop h, and u joins the node list when first seen (in edge order).
 * Deterministic for a seed: gs_cuda_graph_sample() gives exactly these.
 * The graph's pending updates are included (the GPU sees them only after
 * a merge and gs_cuda_graph_sync()).
 */
struct gs_graph_sample {
	uint64_t nnodes, nedges;
	uint32_t nhops, rsvd;
	/* nodes[hop_nodes[h] .. hop_nodes[h+1]) joined at hop h - 1 (h = 0: the seeds) */
	uint64_t hop_nodes[GS_GRAPH_SAMPLE_MAX_HOPS + 2];
	/* edges [hop_edges[h], hop_edges[h+1]) are hop h's */
	uint64_t hop_edges[GS_GRAPH_SAMPLE_MAX_HOPS + 1];
	uint64_t *nodes;		/* [nnodes] vertex indices */
	uint64_t *src, *dst;		/* [nedges] vertex indices */
	uint32_t *src_pos, *dst_pos;	/* [nedges] their positions in nodes */
};
/* Fills @out (arrays malloc'ed; gs_graph_sample_free()).  -EINVAL: a seed
 * >= nv, nhops 0 or > GS_GRAPH_SAMPLE_MAX_HOPS, a fanout 0 or >
 * GS_GRAPH_SAMPLE_MAX_FANOUT, or more than 2^32 - 1 nodes possible. */
int gs_graph_sample(struct gs_graph *g, const uint64_t *seeds, uint32_t nseeds,
		    const uint32_t *fanouts, uint32_t nhops, uint64_t rng_seed,
		    struct gs_graph_sample *out);
void gs_graph_sample_free(struct gs_graph_sample *s);
/* The most nodes and edges a sample of these sizes can have. */
int gs_graph_sample_bounds(uint32_t nseeds, const uint32_t *fanouts, uint32_t nhops,
			   uint64_t *max_nodes, uint64_t *max_edges);

/* ---- the device layout (gstore_graph_dev.h) ----
 *
 * What a reader that addresses the device itself needs (the GPU path of
 * gstore_cuda_graph.h): the GTT of each direction as arrays, the removed
 * vertices, and the extents of the pages objects, pinned by read leases
 * until gs_graph_layout_put().  Only the merged pages are in it: pending
 * updates are merged first (-EBUSY on a read-only handle that has some).
 * A graph on another store (a test's memory store, the CSR engine) gets
 * no extents (next 0), or -EOPNOTSUPP for the CSR engine.  No merge may
 * run while a device reads through a layout; after one, get a new layout.
 */
struct gs_graph_layout;
int gs_graph_layout_get(struct gs_graph *g, unsigned flags, struct gs_graph_layout **lp);
void gs_graph_layout_put(struct gs_graph_layout *l);
/* The read lease that pins direction @d's extents, handed to the caller (who
 * ends it with gs_fs_lease_end(), and may bind it to rings: the attach
 * server); gs_graph_layout_put() then leaves it.  NULL: none (no pages). */
struct gs_lease;
struct gs_lease *gs_graph_layout_take_lease(struct gs_graph_layout *l, unsigned d);

/* Counters of a handle (device pages are what the page reads cost). */
struct gs_graph_stats {
	uint64_t queries, page_reads, delta_reads, batches;
	uint64_t updates, syncs, merges, merged_pages;
};
void gs_graph_get_stats(struct gs_graph *g, struct gs_graph_stats *st);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_GRAPH_H */
