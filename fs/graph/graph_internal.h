/* SPDX-License-Identifier: MIT */
/*
 * Graph objects, private to fs/graph*.c.
 *
 *   graph_page.c    page packing (lists + trailer tuples), crc32c
 *   graph_gtt.c     the in-memory GTT: lookup, (de)serialisation
 *   graph_store.c   the page-store interface: gs_fs internal objects, memory
 *   graph_parse.c   SNAP text / Matrix Market / GAP .sg/.wsg readers
 *   graph_sort.c    edge sorting, external (runs in temp files) when large
 *   graph_build.c   import: parse -> sort -> [id map] -> pages + GTT -> publish
 *   graph_ids.c     vertex ids <-> vertex indices (sparse ids: the id map)
 *   graph.c         open/close, root slots, queries
 *   graph_update.c  update log, delta records, sync
 *   graph_merge.c   merge under a redo log, recovery
 *   graph_async.c   worker pool, queues, batches
 *   graph_apps.c    bfs, cc, pagerank, random walk, mis
 *   graph_csr.c     the CSR baseline engine
 *
 * Locking: g->lock (rwlock, writers preferred).  Queries hold it shared for
 * a whole batch chunk; updates, sync and merge hold it exclusive.  The GTT,
 * the pending-update maps and the root copy change only under it.
 */
#ifndef GS_FS_GRAPH_INTERNAL_H
#define GS_FS_GRAPH_INTERNAL_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "crc32c.h"
#include "gstore_graph.h"
#include "gstore_graph_fmt.h"

#define GR_DEF_SLACK		10
#define GR_DEF_CHAIN_MAX	16
#define GR_DEF_WORKERS		8
#define GR_DEF_LOG_OPS		(1u << 20)	/* sync the log past this many ops */
#define GR_DENSE_GROW		65536	/* +v past nv + this (and nv) on dense ids: ERANGE */
#define GR_MAX_PAGE		65536
#define GR_FOOT			((uint32_t)sizeof(struct gs_graph_page_foot))

/* ---- little-endian access to unaligned bytes ---- */

static inline uint64_t gr_ld64(const void *p)
{
	uint64_t x;

	memcpy(&x, p, 8);
	return le64toh(x);
}

static inline uint32_t gr_ld32(const void *p)
{
	uint32_t x;

	memcpy(&x, p, 4);
	return le32toh(x);
}

static inline void gr_st64(void *p, uint64_t x)
{
	x = htole64(x);
	memcpy(p, &x, 8);
}

static inline void gr_st32(void *p, uint32_t x)
{
	x = htole32(x);
	memcpy(p, &x, 4);
}

static inline uint64_t gr_ldid(const void *p, unsigned idw)
{
	return idw == 4 ? gr_ld32(p) : gr_ld64(p);
}

static inline void gr_stid(void *p, unsigned idw, uint64_t v)
{
	if (idw == 4)
		gr_st32(p, (uint32_t)v);
	else
		gr_st64(p, v);
}

static inline uint32_t gr_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float gr_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}


/* Page-aligned memory (O_DIRECT-friendly) of at least @size bytes. */
static inline void *gr_page_alloc(size_t size)
{
	void *p;

	return posix_memalign(&p, 4096, size ? size : 1) ? NULL : p;
}

/* ---- a growable neighbour list ---- */

struct gr_list {
	uint64_t *ids;
	float *w;
	size_t n, cap;
};
int gr_list_reserve(struct gr_list *l, size_t n);
int gr_list_push(struct gr_list *l, uint64_t id, float w);
void gr_list_free(struct gr_list *l);

/* ---- page format (graph_page.c) ---- */

/* Geometry every page of one graph shares. */
struct gr_geom {
	uint32_t page_size;
	uint32_t idw;		/* 4 or 8 */
	uint32_t ent;		/* bytes per list entry: idw (+ 4 weighted) */
	uint32_t tup;		/* bytes per trailer tuple: idw + 4 */
	bool weighted;
	bool varint;		/* GS_GRAPH_F_VARINT: lists delta/varint coded */
};
void gr_geom_init(struct gr_geom *gm, uint32_t page_size, unsigned idw, bool weighted,
		  bool varint);
/* List bytes a page of one vertex can hold (one tuple, the end marker). */
static inline uint32_t gr_large_room(const struct gr_geom *gm)
{
	return gm->page_size - GR_FOOT - 2 * gm->tup;
}

/* Check magic, crc and trailer bounds of a page read from disk. */
int gr_page_check(const struct gr_geom *gm, const void *page);
static inline unsigned gr_page_count(const struct gr_geom *gm, const void *page)
{
	const struct gs_graph_page_foot *f =
		(const void *)((const char *)page + gm->page_size - GR_FOOT);

	return le16toh(f->count);
}
/* Tuple @i of a page (i == count: the end marker). */
static inline const uint8_t *gr_page_tuple(const struct gr_geom *gm, const void *page,
					   unsigned i)
{
	return (const uint8_t *)page + gm->page_size - GR_FOOT - (size_t)(i + 1) * gm->tup;
}
/* Find @v in a page: its index, or -1. */
int gr_page_find(const struct gr_geom *gm, const void *page, uint64_t v);
/* Entries in the list of tuple @i, or -EIO (a varint list that is malformed). */
int64_t gr_page_degree(const struct gr_geom *gm, const void *page, unsigned i);
/* Append tuple @i's list (ids, weights) to @l; -EIO if it does not decode
 * to exactly its bytes, -ENOMEM. */
int gr_page_append(const struct gr_geom *gm, const void *page, unsigned i, struct gr_list *l);

/* Packs vertex lists (ascending vertices) into pages. */
struct gr_packer;
/* A finished page and its GTT entry (page field unset: the sink numbers it). */
typedef int (*gr_page_sink)(void *arg, void *page, uint64_t key, uint64_t last,
			    uint32_t gtt_flags);
struct gr_packer {
	struct gr_geom gm;
	uint32_t limit;		/* fill shared pages only up to here (slack) */
	uint32_t seq;		/* stamped into footers */
	uint8_t *page;
	uint32_t used, count;
	uint64_t key, last;
	gr_page_sink sink;
	void *arg;
	uint64_t pages;		/* pages emitted */
	bool lopen;		/* large vertex lv is being packed in parts */
	uint64_t lv;
	uint32_t lflags;	/* GTT flags of its next page */
};
int gr_pack_init(struct gr_packer *pk, const struct gr_geom *gm, uint32_t slack_pct,
		 uint32_t seq, gr_page_sink sink, void *arg);
int gr_pack_vertex(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		   uint64_t deg);
/* A list too long to hold whole comes in parts: this packs whole pages of
 * the front of ids[0..n) as chunks of large vertex @v (always leaving some)
 * and says how many it took; gr_pack_vertex(@v, the rest) ends it. */
int gr_pack_part(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		 uint64_t n, uint64_t *took);
int gr_pack_finish(struct gr_packer *pk);
void gr_pack_free(struct gr_packer *pk);

/* ---- the GTT (graph_gtt.c) ---- */

struct gr_gent {
	uint64_t key, last;
	uint64_t page;
	uint32_t flags;		/* GS_GRAPH_GTT_* */
	uint32_t rsvd;
};

struct gr_gtt {
	struct gr_gent *e;
	uint64_t n, cap;
};
int gr_gtt_push(struct gr_gtt *t, const struct gr_gent *e);
void gr_gtt_free(struct gr_gtt *t);
/* First entry with key >= v. */
uint64_t gr_gtt_lower(const struct gr_gtt *t, uint64_t v);
/* The first entry of the page group that holds @v, or -1 when @v has no
 * list in the pages (no read needed). */
int64_t gr_gtt_locate(const struct gr_gtt *t, uint64_t v);
/* Entries of the group starting at @i (1, or a large vertex's pages). */
uint64_t gr_gtt_group_len(const struct gr_gtt *t, uint64_t i);
/* The group an update of @v merges into: its index, or -1 for a new group
 * to be inserted at *ins. */
int64_t gr_gtt_target(const struct gr_gtt *t, uint64_t v, uint64_t *ins);
void gr_gtt_to_disk(const struct gr_gent *e, struct gs_graph_gtt_ent *d);
void gr_gtt_from_disk(const struct gs_graph_gtt_ent *d, struct gr_gent *e);

/* ---- open-addressing u64 -> u32 map (graph_gtt.c) ---- */

struct gr_map {
	uint64_t *keys;		/* GS_GRAPH_NONE: empty */
	uint32_t *vals;
	uint64_t n, mask;	/* mask + 1 slots, power of two */
};
/* Slot of @k or NULL. */
uint32_t *gr_map_get(const struct gr_map *m, uint64_t k);
/* Slot of @k, inserted with value @v0 if missing (*added set), or NULL (ENOMEM). */
uint32_t *gr_map_put(struct gr_map *m, uint64_t k, uint32_t v0, bool *added);
int gr_map_del(struct gr_map *m, uint64_t k);
void gr_map_clear(struct gr_map *m);
void gr_map_free(struct gr_map *m);

/* ---- vertex ids <-> vertex indices (graph_ids.c) ---- */

/* Pages of a graph's sorted ids: a direct-mapped set of @n pages (1: a memo). */
struct gr_idcache {
	uint64_t *tag;		/* page number + 1 held in each slot, 0: none */
	uint8_t *pages;
	uint64_t n;
	uint32_t ps;
};
int gr_idcache_init(struct gr_idcache *c, uint64_t n, uint32_t page_size);
void gr_idcache_free(struct gr_idcache *c);

/* A graph's id map (GS_GRAPH_F_IDMAP); !on: a vertex's id is its index. */
struct gr_ids {
	bool on;
	struct gr_store *st;	/* the sorted ids are read from obj ... */
	uint64_t obj, idx_obj;
	const uint64_t *all;	/* ... or, if set, all lie here (the CSR baseline) */
	uint64_t nsorted;	/* indices 0 .. nsorted-1 have ascending ids */
	uint64_t *first;	/* first id of each page of sorted ids */
	uint64_t npages;
	uint32_t per;		/* ids per page */
	uint64_t *tail;		/* id of index nsorted + k: vertices added by updates */
	uint64_t ntail, tailcap, tsynced;	/* tsynced: tail ids written to obj */
	struct gr_map tmap;	/* tail id -> k */
};
/* Load the map a root names (nothing to load without GS_GRAPH_F_IDMAP). */
int gr_ids_open(struct gr_ids *m, struct gr_store *st, const struct gs_graph_root *r, uint64_t nv);
/* A map held in memory: @ids (n ids by index, the first nsorted ascending;
 * freed with the map). */
int gr_ids_from_array(struct gr_ids *m, uint64_t *ids, uint64_t n, uint64_t nsorted);
void gr_ids_free(struct gr_ids *m);
/* Index of vertex id @id: 0 or -ENOENT (unmapped graphs: the id itself,
 * which the caller checks against nv), -EIO. */
int gr_ids_index(const struct gr_ids *m, struct gr_idcache *c, uint64_t id, uint64_t *idx);
/* Id of index @idx (< nv). */
int gr_ids_id(const struct gr_ids *m, struct gr_idcache *c, uint64_t idx, uint64_t *id);
/* Indices ids[0..n) (ascending) to ids in place, still ascending: added
 * vertices may move, their weights @w (may be NULL) with them. */
int gr_ids_list(const struct gr_ids *m, struct gr_idcache *c, uint64_t *ids, float *w, size_t n);
/* A vertex added by an update: index nsorted + ntail; pop undoes the last
 * one not yet synced. */
int gr_ids_add(struct gr_ids *m, uint64_t id);
void gr_ids_pop(struct gr_ids *m);
/* Write the added ids not yet in obj (before the root commit naming them). */
int gr_ids_sync(struct gr_ids *m);

/* ---- page stores (graph_store.c) ---- */

struct gr_store;
struct gr_store_ops {
	/* A new empty object owned by the graph; remove drops one (optional). */
	int (*create)(struct gr_store *s, uint64_t *obj);
	/* Optional: the same for metadata (translation tables), kept where the
	 * fs keeps its own (a pool's mirrored zone); NULL: create. */
	int (*create_meta)(struct gr_store *s, uint64_t *obj);
	int (*remove)(struct gr_store *s, uint64_t obj);
	ssize_t (*pread)(struct gr_store *s, uint64_t obj, void *buf, size_t len, uint64_t off);
	ssize_t (*pwrite)(struct gr_store *s, uint64_t obj, const void *buf, size_t len,
			  uint64_t off);
	int (*sync)(struct gr_store *s, uint64_t obj);
	int (*size)(struct gr_store *s, uint64_t obj, uint64_t *bytes);
	/* Optional hint: [off, off+len) of @obj will be read soon. */
	void (*prefetch)(struct gr_store *s, uint64_t obj, uint64_t off, uint64_t len);
	void (*destroy)(struct gr_store *s);
};
struct gr_store {
	const struct gr_store_ops *ops;
	uint64_t root;		/* object holding the root slots */
	uint32_t page_size;
	bool borrowed;		/* the graph handle does not destroy it (tests) */
};
int gr_store_read_full(struct gr_store *s, uint64_t obj, void *buf, size_t len, uint64_t off);
int gr_store_write_full(struct gr_store *s, uint64_t obj, const void *buf, size_t len,
			uint64_t off);

/* In-memory store for tests; gr_mem_crash() keeps what was synced plus a
 * random subset of the pages written since (a simulated power cut). */
int gr_mem_store_new(struct gr_store **sp, uint32_t page_size);
void gr_mem_crash(struct gr_store *s, uint64_t seed);
/* Fail the @n-th write from now on (0: never), like a crash at that point. */
void gr_mem_fail_after(struct gr_store *s, uint64_t n);
/* Store over a gs_fs graph object @ino (its internal objects); graph_fs.c. */
int gr_fs_store_new(struct gr_store **sp, struct gs_fs *fs, uint64_t ino);
/* ino of graph/ */
int gr_graph_dir(struct gs_fs *fs, uint64_t *dir);
/* Build from @fd into the existing GS_T_GRAPH object @ino (one root commit),
 * no handle may be open on it. */
int gr_rebuild_ino(struct gs_fs *fs, uint64_t ino, int fd, const struct gs_graph_import_opts *o);

/* ---- engines: gstore pages, or the CSR baseline ---- */

struct gr_scratch;
struct gr_engine {
	/* Batch order key of (dir, v); called with the read lock held. */
	uint64_t (*order)(struct gs_graph *g, unsigned dir, uint64_t v);
	/* The list of (dir, v) into @l (replacing it); returns the degree or
	 * -errno; with @degree_only @l may stay empty.  Read lock held. */
	int64_t (*get)(struct gs_graph *g, unsigned dir, uint64_t v, struct gr_list *l,
		       struct gr_scratch *sc, bool degree_only);
	/* Optional, before a chunk's gets (read lock held): when what the
	 * chunk needs lies close together on the device, start reading it all
	 * into the block cache at once (a read-ahead hint; the gets then find
	 * it there).  @key: the chunk's order keys (or vertices). */
	void (*prepare)(struct gs_graph *g, struct gs_graph_req *const *r, const uint64_t *key,
			unsigned n);
	void (*close)(struct gs_graph *g);
};
/* gs_graph_req.flags of the apps' own requests: vertex and the returned
 * list are vertex indices, not ids. */
#define GR_REQ_INDEX	(1u << 31)
/* At most this many bytes of a chunk are hinted at once. */
#define GR_WIN_BYTES	(64u << 10)
extern const struct gr_engine gr_engine_pages;
extern const struct gr_engine gr_engine_csr;

/* Per-thread buffers of a query. */
struct gr_scratch {
	uint8_t *page;		/* one page */
	int mdir;		/* memo: page in ->page (dir, page no), -1 none */
	uint64_t mpage;
	uint8_t *dpage;		/* a delta page */
	uint64_t dmemo;		/* its offset, GS_GRAPH_NONE none */
	uint64_t dgen;		/* its delta generation: a merge reuses the offsets */
	struct gr_list l, tmp;
	struct gr_op *ops;	/* gathered pending ops */
	size_t nops, opscap;
	uint8_t *buf;		/* engine bytes (CSR ranges) */
	size_t bufcap;
	struct gr_idcache ic;	/* a page of the id map */
};
int gr_scratch_init(struct gr_scratch *sc, uint32_t page_size);
void gr_scratch_free(struct gr_scratch *sc);


/* ---- pending updates ---- */

struct gr_op {
	uint64_t nbr;
	float w;
	uint32_t op;		/* GS_GRAPH_OP_* */
};

struct gr_pend {
	uint64_t v;
	uint64_t head;		/* newest delta record, GS_GRAPH_NONE */
	uint32_t chain;		/* delta records of v */
	uint32_t nops, cap;	/* in-memory log */
	struct gr_op *ops;
};

struct gr_dir {
	uint64_t pages_obj, gtt_obj, gtt_alt, vmap_obj, vmap_alt;
	uint64_t npages;
	uint8_t *vmap;		/* bit v: v has a list in the pages; NULL: unknown */
	uint64_t vmap_bits;	/* vertices it covers (ids past it: unknown) */
	struct gr_gtt gtt;
	struct gr_map pmap;	/* vertex -> index in pend */
	struct gr_pend *pend;
	uint64_t npend, pendcap;
};

struct gr_pool;

struct gs_graph {
	const struct gr_engine *eng;
	struct gs_fs *fs;
	uint64_t ino;
	struct gr_store *st;	/* owned */
	unsigned oflags;	/* GS_GRAPH_RDONLY */
	int broken;		/* -errno: a merge failed past its commit point */
	bool fs_ref;		/* holds a gs_fs_open() reference on ino */
	pthread_rwlock_t lock;

	struct gs_graph_root root;	/* last committed */
	struct gr_geom gm;
	bool directed, weighted;
	unsigned ndirs;		/* 1 undirected, 2 directed */
	uint64_t nv, ne;	/* live, including the update log */
	struct gr_dir dir[2];
	struct gr_map vdel;	/* removed vertices */
	struct gr_op *vops;	/* vertex ops not yet in the delta */
	size_t nvops, vopscap;
	uint64_t delta_recs;
	uint64_t log_ops;
	uint32_t max_chain;
	uint64_t *freepg[2];	/* free page numbers per direction */
	uint64_t nfree[2], freecap[2];

	struct gr_pool *pool;
	unsigned workers;
	pthread_key_t sckey;	/* per-thread scratch of synchronous queries */
	bool sckey_ok;
	pthread_mutex_t sclock;	/* guards scall */
	struct gr_tscratch *scall; /* every thread's scratch: freed at close */

	void *eng_priv;		/* CSR engine state */
	struct gr_ids ids;	/* vertex ids (GS_GRAPH_F_IDMAP) */

	struct {
		uint64_t queries, page_reads, delta_reads, batches;
		uint64_t updates, syncs, merges, merged_pages;
	} stats;		/* atomics */
};

/* The vertex filter: false means "no list in the pages", no read needed. */
static inline bool gr_vmap_maybe(const struct gr_dir *d, uint64_t v)
{
	return !d->vmap || v >= d->vmap_bits || (d->vmap[v >> 3] >> (v & 7) & 1);
}
static inline void gr_vmap_set(uint8_t *map, uint64_t v, bool on)
{
	if (on)
		map[v >> 3] |= (uint8_t)(1u << (v & 7));
	else
		map[v >> 3] &= (uint8_t)~(1u << (v & 7));
}

/* graph.c */
int gr_root_read(struct gr_store *st, struct gs_graph_root *r);
int gr_root_write(struct gr_store *st, struct gs_graph_root *r);
int gr_root_commit(struct gs_graph *g);
/* The internal objects a root names (at most GR_ROOT_OBJS). */
#define GR_ROOT_OBJS	16
unsigned gr_root_objects(const struct gs_graph_root *r, uint64_t *objs);
int gr_graph_open_store(struct gr_store *st, struct gs_fs *fs, uint64_t ino, unsigned flags,
			struct gs_graph **gp);
int gr_graph_new(struct gs_graph **gp);
int gr_graph_keys(struct gs_graph *g);
void gr_graph_free(struct gs_graph *g);
int gr_load_gtt(struct gs_graph *g, unsigned d);
int gr_read_page(struct gs_graph *g, unsigned d, uint64_t page, void *buf);
int gr_base_list(struct gs_graph *g, unsigned d, uint64_t v, struct gr_list *l,
		 struct gr_scratch *sc);
bool gr_vertex_ok(struct gs_graph *g, uint64_t v);
struct gr_scratch *gr_thread_scratch(struct gs_graph *g);
static inline unsigned gr_sdir(const struct gs_graph *g, unsigned dir)
{
	return g->directed ? dir : 0;
}

/* graph_update.c */
struct gr_pend *gr_pend_get(struct gs_graph *g, unsigned d, uint64_t v);
int gr_apply_pending(struct gs_graph *g, unsigned d, uint64_t v, struct gr_list *l,
		     struct gr_scratch *sc);
int gr_delta_load(struct gs_graph *g);
int gr_sync_locked(struct gs_graph *g);
void gr_pend_clear(struct gs_graph *g);
void gr_ops_merge(struct gr_list *l, struct gr_op *ops, size_t n, struct gr_list *tmp);

/* graph_merge.c */
int gr_merge_locked(struct gs_graph *g);
int gr_redo_replay(struct gs_graph *g);
int gr_free_pages_init(struct gs_graph *g);

/* graph_build.c: build a graph into a fresh store (objects created there). */
struct gr_edge {
	uint64_t u, v;
	float w;
};
int gr_build(struct gr_store *st, int fd, const struct gs_graph_import_opts *o);

/* graph_parse.c */
struct gr_parse_info {
	int directed;		/* -1 unknown */
	int weighted;		/* -1 unknown */
	uint64_t nv;		/* 0 unknown */
	uint64_t expect;	/* edges the header announces, 0 unknown */
};
typedef int (*gr_edge_fn)(void *arg, uint64_t u, uint64_t v, float w);
int gr_detect_format(int fd, const char *path);
/* Stream the edges of @fd to @fn.  @hdr is called once the header (if
 * any) is read, before the first edge; it may settle pi->weighted (0/1),
 * which decides whether weights are read. */
int gr_parse(int fd, int format, gr_edge_fn fn,
	     int (*hdr)(void *arg, struct gr_parse_info *pi), void *arg,
	     void (*progress)(void *arg, uint64_t done, uint64_t total), void *parg,
	     char *err, size_t errlen);

/* graph_sort.c: sorts edges by (u, v) within a memory budget. */
struct gr_sorter;
int gr_sorter_new(struct gr_sorter **sp, size_t mem_bytes, const char *tmpdir);
int gr_sorter_add(struct gr_sorter *s, uint64_t u, uint64_t v, float w);
/* End of input; then gr_sorter_next() returns 1 per edge, 0 at the end. */
int gr_sorter_finish(struct gr_sorter *s);
int gr_sorter_next(struct gr_sorter *s, struct gr_edge *e);
/* After finish: start the sorted sequence over (a second pass). */
int gr_sorter_rewind(struct gr_sorter *s);
uint64_t gr_sorter_count(const struct gr_sorter *s);
void gr_sorter_free(struct gr_sorter *s);

/* graph_async.c */
int gr_pool_start(struct gs_graph *g);
void gr_pool_stop(struct gs_graph *g);

/* graph_csr.c */
uint64_t gr_csr_disk_bytes(struct gs_graph *g);

#endif /* GS_FS_GRAPH_INTERNAL_H */
