/* SPDX-License-Identifier: MIT */
/*
 * N-D spaces, private to fs/nd*.c (and their unit tests).
 *
 *   nd_geom.c    types, layout (block shape, strides), parsing of shapes,
 *                coordinates and slices
 *   nd_npy.c     numpy .npy headers
 *   nd_slab.c    selections: validation, view -> space decomposition,
 *                block iteration, strided copies, the executor
 *   nd_cache.c   per-space block cache (pin, batch miss, write-back)
 *   nd_index.c   the N-level index and the superblock
 *   nd_store.c   where blocks live: a gstore fs (direct leases on an internal
 *                object) or plain files (tests, tools)
 *   nd_fsck.c    nd as an fs object type: fsck's check of a space's index
 *   nd.c         the public API (gstore_nd.h)
 *
 * Locking: nd->imu guards the index and the in-memory superblock; nd->c.mu
 * guards the cache's entries; nd->rmu (taken before imu) makes write-back
 * batches record their new slots one at a time.  imu is never taken with
 * c.mu held.  Block
 * I/O completions only take c.mu.
 */
#ifndef ND_INTERNAL_H
#define ND_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gstore_nd.h"
#include "gstore_nd_fmt.h"

struct gs_fs;

#define ND_MAXD		GS_ND_MAX_DIMS
#define ND_MAX_BYTES	(1ULL << 62)	/* a space's row-major size must stay below */
#define ND_MIN_BB_BYTES	(64u << 10)
#define ND_MAX_BB_BYTES	(8u << 20)
#define ND_CACHE_BYTES	(256u << 20)	/* per-space cache budget over plain files */
#define ND_MIN_CACHE	(16u << 20)	/* least per-space budget on a gs_fs */
#define ND_SLOT_UNKNOWN	UINT64_MAX

/* ---- geometry (nd_geom.c) ---- */

/* A space's shape and how it is cut into blocks; all derived in nd_layout_init. */
struct nd_layout {
	uint32_t ndims, dtype, esize;
	uint64_t shape[ND_MAXD];
	uint64_t bb[ND_MAXD];		/* block shape */
	uint64_t nb[ND_MAXD];		/* blocks along each dimension */
	uint64_t bstr[ND_MAXD];		/* element strides inside a block (row-major over bb) */
	uint64_t nbstr[ND_MAXD];	/* block-id strides (row-major over nb) */
	uint64_t block_elems, block_bytes;
	uint64_t elems, bytes, nblocks;
};

/* Validate @p (bb must be set) and derive the layout. */
int nd_layout_init(struct nd_layout *L, const struct gs_nd_params *p);
/* Minimum block bytes (NDS eq. 1) for a device geometry (NULL: defaults). */
uint64_t nd_min_block_bytes(const struct gs_q_geom *g);
/* Automatic block shape (NDS eqs. 2-4) for at least @min_bytes per block. */
void nd_auto_bb(uint32_t ndims, const uint64_t *shape, uint32_t esize, uint64_t min_bytes,
		uint64_t *bb);
/* numpy descr ("<f8", "|u1", "|V16") of a type; buf >= 16 bytes. */
void nd_dtype_descr(uint32_t dtype, uint32_t esize, char *buf);

/* Decimal u64 at *s (no sign, no spaces), <= @max; advances *s.  -EINVAL/-ERANGE. */
int nd_parse_u64(const char **s, uint64_t max, uint64_t *v);
/* "x1,x2,..." exactly @n numbers. */
int nd_parse_coords(const char *s, uint32_t n, uint64_t *v);

/* A hyperslab: start + k * stride, 0 <= k < count, per dimension. */
struct nd_slab {
	uint32_t ndims;
	uint64_t start[ND_MAXD], count[ND_MAXD], stride[ND_MAXD];
};

/*
 * "a:b,c:d:s,e,:" against @shape (@n dims): a:b[:s] keeps the dimension, a bare
 * index keeps it in the slab but sets its bit in *dropped (numpy drops it),
 * ":" or a missing trailing entry is the whole dimension.  -EINVAL for bad
 * syntax, -ERANGE for bounds outside the shape.
 */
int nd_parse_slice(const char *s, uint32_t n, const uint64_t *shape, struct nd_slab *sl,
		   uint32_t *dropped);
/* NDS block request "<b1>x<b2>..." + "<x1>,<x2>..." -> clipped slab. */
int nd_block_slab(uint32_t n, const uint64_t *shape, const uint64_t *sub, const uint64_t *coord,
		  struct nd_slab *sl);

/* ---- selections (nd_slab.c) ---- */

/* A validated selection: a slab of the space, or of a view with another shape. */
struct nd_xsel {
	struct nd_slab s;		/* on the view (view) or the space */
	bool view;
	uint64_t vshape[ND_MAXD];
	uint64_t elems, bytes;
};
int nd_sel_prep(const struct nd_layout *L, const struct gs_nd_sel *sel, struct nd_xsel *x);
void nd_sel_whole(const struct nd_layout *L, struct nd_xsel *x);

/* Row-major N-d copy of @cnt elements; strides in bytes (may be negative: never). */
void nd_copy(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
	     const uint64_t *cnt, uint32_t n, uint32_t esize);

/* One block's share of a request: what to copy between block and caller. */
struct nd_item {
	uint64_t bid;
	uint64_t boff;			/* byte offset in the block of the first element */
	char *ubuf;			/* caller's buffer at the first element */
	uint32_t n;			/* dimensions of the copy (collapsed) */
	bool full;			/* covers every in-space element of the block */
	uint64_t cnt[ND_MAXD];
	int64_t bs[ND_MAXD], us[ND_MAXD];	/* byte strides: block, caller */
	struct nd_ent *e;
};

struct gs_nd;
/* Moves a request's data, a window of blocks at a time (all of a window's misses at once). */
struct nd_exec {
	struct gs_nd *nd;
	int op;				/* GS_ND_OP_* */
	struct nd_item *it;
	unsigned n, cap;
	int err;
	uint64_t elem_buf;		/* scratch for unaligned element edges */
};
int nd_exec_init(struct nd_exec *ex, struct gs_nd *nd, int op);
void nd_exec_fini(struct nd_exec *ex);
/* Queue the space slab @s whose data is row-major at @ubuf. */
int nd_exec_slab(struct nd_exec *ex, const struct nd_slab *s, char *ubuf);
/* Elements [e0, e1) of the selection's row-major order, at @ubuf. */
int nd_exec_range(struct nd_exec *ex, const struct nd_xsel *x, uint64_t e0, uint64_t e1,
		  char *ubuf);
int nd_exec_run(struct nd_exec *ex);

/* Whole-request helpers used by nd.c. */
ssize_t nd_rw_sel(struct gs_nd *nd, int op, const struct nd_xsel *x, char *buf, size_t len,
		  uint64_t off);

/* ---- stores (nd_store.c) ---- */

struct nd_store;
struct nd_bio;
typedef void (*nd_bio_done)(struct nd_bio *b, int res);

/* One block transfer: a whole slot, one I/O (or max_io pieces). */
struct nd_bio {
	int op;				/* GS_ND_OP_* */
	uint64_t slot;
	void *buf;			/* block_stride bytes, aligned */
	nd_bio_done done;		/* may run on another thread, or inside submit */
	void *priv;
	/* store private */
	int pending;
	int res;
	void *sp;
};

struct nd_store_ops {
	ssize_t (*meta_read)(struct nd_store *s, void *buf, size_t len, uint64_t off);
	ssize_t (*meta_write)(struct nd_store *s, const void *buf, size_t len, uint64_t off);
	/* All @n transfers (one op); each completes through its done(), maybe
	 * before submit returns (the fs store returns after all of them; writes
	 * back the slots they fill).  Returns 0 or -errno with nothing started. */
	int (*submit)(struct nd_store *s, struct nd_bio **b, unsigned n);
	/* Make written slots, their extents and the metadata durable (the index
	 * write-back calls it before writing entries that point at new slots). */
	int (*sync)(struct nd_store *s);
	/* Bytes allocated to blocks (st_blocks) and metadata. */
	void (*usage)(struct nd_store *s, uint64_t *bytes);
	void (*close)(struct nd_store *s);
};

struct nd_store {
	const struct nd_store_ops *ops;
	uint64_t stride;		/* bytes per block on the device (block_bytes rounded up) */
	uint64_t slot_bytes;		/* bytes per slot in the data object (== stride) */
	uint32_t align;			/* buffer alignment for O_DIRECT */
	uint32_t gran;			/* strides are multiples of this */
};

/* Plain files: metadata in @meta_fd, slot k at k * stride of @data_fd. */
int nd_store_file(struct nd_store **sp, int meta_fd, int data_fd, uint32_t align);
/* A gstore fs: metadata in the GS_T_ND object @ino, blocks in internal @data_ino. */
int nd_store_fs(struct nd_store **sp, struct gs_fs *fs, uint64_t ino, uint64_t data_ino);
void nd_store_set_stride(struct nd_store *s, uint64_t block_bytes);

/* ---- the space ---- */

#define ND_PEND_MAX	1024	/* deferred index entries before a flush */

struct nd_pend {
	uint64_t bid, slot;
};

enum { E_VALID = 1, E_READING = 2, E_DIRTY = 4, E_WRITING = 8 };

struct nd_ent {
	uint64_t bid;			/* UINT64_MAX: free */
	uint32_t flags;			/* E_* */
	uint32_t pins;
	bool ref;
	int err;
	uint64_t slot;			/* slot + 1, 0 none, ND_SLOT_UNKNOWN */
	uint64_t dgen;			/* bumped on every dirtying */
	void *buf;
	struct nd_ent *hnext;
	struct gs_nd *nd;
	struct nd_wb *wb;		/* write-back batch while E_WRITING */
	struct nd_bio bio;
};

struct nd_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct nd_ent *ents;
	uint32_t nents, hand;
	struct nd_ent **hash;
	uint64_t hmask;
	uint32_t ndirty;
	uint64_t hits, misses, reads, writes;
	/* background write-back: started on the first dirtying of a large cache */
	pthread_t flusher;
	pthread_cond_t fcv;
	bool flusher_on, flush_kick, flusher_stop;
};

struct gs_nd {
	struct nd_layout L;
	struct nd_store *st;
	struct gs_fs *fs;
	uint64_t ino;
	/* index + superblock */
	pthread_mutex_t imu;
	pthread_mutex_t rmu;		/* one batch records new slots at a time */
	uint64_t root, index_end, nslots, data_ino;
	bool sb_dirty;
	/* blocks written the first time whose index entries are not written yet
	 * (under imu): found by nd_index_lookup, recorded in one go by
	 * nd_index_flush (one store commit for many write-back batches) */
	struct nd_pend *pend;
	uint32_t npend, cpend;
	uint64_t *phash;		/* open addressing: index into pend + 1, 0 empty */
	uint32_t phmask;
	/* cache */
	struct nd_cache c;
	int wb_err;			/* sticky write-back error, reported by sync */
	/* asynchronous requests */
	pthread_mutex_t amu;
	pthread_cond_t acv;
	struct gs_nd_aio *aq_head, *aq_tail;
	pthread_t workers[2];
	unsigned nworkers;
	bool stopping;
};

/* nd_cache.c */
int nd_cache_init(struct gs_nd *nd, size_t bytes);
void nd_cache_fini(struct gs_nd *nd);
/* Pin the blocks of @it[0..n) (reading misses, all at once; zeroing unwritten or
 * @for_write full ones).  Sets it[i].e.  Returns the number pinned (a prefix,
 * >= 1 unless an error) or -errno. */
int nd_cache_pin(struct gs_nd *nd, struct nd_item *it, unsigned n, bool for_write);
/* Wait until a pinned entry's data is there; returns its error. */
int nd_cache_wait(struct gs_nd *nd, struct nd_ent *e);
void nd_cache_unpin(struct gs_nd *nd, struct nd_ent *e, bool dirtied);
/* Write back every dirty block (all of them at once, in batches). */
int nd_cache_writeback(struct gs_nd *nd);
void nd_cache_drop(struct gs_nd *nd);
uint32_t nd_cache_window(struct gs_nd *nd);

/* nd_index.c */
void nd_sb_encode(const struct gs_nd *nd, struct gs_nd_disk_super *d);
/* What a superblock says besides the parameters. */
struct nd_sbx {
	uint64_t root, index_end, nslots, data_ino, stride, slot_bytes;
	uint32_t dev_align;
};
int nd_sb_decode(const struct gs_nd_disk_super *d, struct gs_nd_params *p, struct nd_sbx *x);
/* The superblock of GS_T_ND object @ino (-ENODATA: not formatted). */
int nd_fs_super(struct gs_fs *fs, uint64_t ino, struct gs_nd_params *p, struct nd_sbx *x);
int nd_sb_write_if_dirty(struct gs_nd *nd);
/* slot + 1 of block @bid, 0 if never written. */
int nd_index_lookup(struct gs_nd *nd, uint64_t bid, uint64_t *slot1);
/* Block bid[k] now lives in slot[k], k < @n: blocks written the first time
 * (their data complete, their slots settled in the store).  Kept in memory;
 * recorded by nd_index_flush, which this calls when many are waiting. */
int nd_index_defer(struct gs_nd *nd, const uint64_t *bid, const uint64_t *slot, unsigned n);
/* Record the deferred entries: nodes, superblock, store commit, then the
 * entries themselves. */
int nd_index_flush(struct gs_nd *nd);
void nd_index_fini(struct gs_nd *nd);
/* @n new consecutive slots; returns the first (backed when first written). */
uint64_t nd_slots_new(struct gs_nd *nd, uint64_t n);

/* nd.c: a space over any store (tests use plain files). */
int nd_space_format(struct nd_store *st, const struct gs_nd_params *p, uint64_t data_ino);
int nd_space_open(struct nd_store *st, size_t cache_bytes, struct gs_nd **ndp);

/* Blocks' ids <-> coordinates. */
static inline uint64_t nd_bid(const struct nd_layout *L, const uint64_t *bc)
{
	uint64_t id = 0;

	for (uint32_t i = 0; i < L->ndims; i++)
		id += bc[i] * L->nbstr[i];
	return id;
}

static inline void nd_bcoord(const struct nd_layout *L, uint64_t bid, uint64_t *bc)
{
	for (uint32_t i = 0; i < L->ndims; i++) {
		bc[i] = bid / L->nbstr[i];
		bid %= L->nbstr[i];
	}
}

#endif /* ND_INTERNAL_H */
