/* SPDX-License-Identifier: MIT */
/*
 * gstore N-dimensional spaces (after NDS, MICRO'21).
 *
 * A space has an element type, 1..GS_ND_MAX_DIMS dimensions of up to
 * GS_ND_DIM_MAX elements each, and is stored as building blocks: sub-arrays
 * whose shape is chosen from the device (NDS equation 1: parallel requests x
 * basic access size; equal-sided powers of two in 2-D and 3-D) and which
 * each occupy one contiguous device extent, read or written with one I/O.
 * An N-level index (level i has one entry per block along dimension i) maps
 * block coordinates to extents; it is built lazily, so blocks never written
 * read as zeros and occupy no space.
 *
 * Access is by NDS coordinate + sub-dimensionality, by any hyperslab (start,
 * count, stride) of the space, or through a view: the space's row-major
 * element order reshaped to another shape of the same volume, so a producer
 * and a consumer may disagree about dimensionality.  Data always arrives in
 * (and is taken from) the caller's buffer in row-major order of the
 * requested shape; a read issues the I/O for all blocks it needs at once.
 *
 * Writes go to a per-space block cache and reach the device at gs_nd_sync(),
 * gs_nd_close() or eviction; a space is durable once gs_nd_sync() returned 0.
 *
 * All functions return 0 (or a byte count) on success and -errno on failure:
 * EINVAL (malformed request), ERANGE (coordinates outside the space),
 * EOVERFLOW (sizes that do not fit), ENOMEM, ENOSPC, EIO.
 */
#ifndef GSTORE_ND_H
#define GSTORE_ND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_fs;
struct gs_q_geom;
struct gs_nd;

#define GS_ND_MAX_DIMS	8
#define GS_ND_DIM_MAX	(1ULL << 40)
#define GS_ND_ELEM_MAX	4096		/* largest raw element, bytes */
#define GS_ND_BLOCK_MAX	(256u << 20)	/* largest building block, bytes */

enum gs_nd_dtype {
	GS_ND_RAW = 0,		/* opaque elements of elem_size bytes */
	GS_ND_I8, GS_ND_I16, GS_ND_I32, GS_ND_I64,
	GS_ND_U8, GS_ND_U16, GS_ND_U32, GS_ND_U64,
	GS_ND_F16, GS_ND_F32, GS_ND_F64,
	GS_ND_NR_DTYPES
};

struct gs_nd_params {
	uint32_t dtype;		/* enum gs_nd_dtype */
	uint32_t elem_size;	/* bytes; GS_ND_RAW: 1..GS_ND_ELEM_MAX, others 0 or theirs */
	uint32_t ndims;		/* 1..GS_ND_MAX_DIMS */
	uint32_t flags;		/* 0 */
	uint64_t shape[GS_ND_MAX_DIMS];	/* 1..GS_ND_DIM_MAX each */
	uint64_t bb[GS_ND_MAX_DIMS];	/* block shape override; all 0: from the device */
};

struct gs_nd_info {
	struct gs_nd_params p;	/* as stored: elem_size and bb filled in */
	uint64_t nblocks[GS_ND_MAX_DIMS];	/* blocks along each dimension */
	uint64_t elems;		/* elements in the space */
	uint64_t bytes;		/* elems * elem_size: the row-major size */
	uint64_t block_bytes;	/* one building block */
	uint64_t block_stride;	/* device bytes per block (block_bytes rounded up) */
	uint64_t blocks_total;
	uint64_t blocks_written;	/* blocks with an extent */
	uint64_t index_bytes;	/* superblock + index nodes (may be sparse) */
};

/* ---- types and shapes ---- */

/* Size in bytes of @dtype (0 for GS_ND_RAW). */
uint32_t gs_nd_dtype_size(uint32_t dtype);
/* Canonical name: "i8".."i64", "u8".."u64", "f16", "f32", "f64", "raw". */
const char *gs_nd_dtype_name(uint32_t dtype);
/*
 * Parse a type: the names above (bits), numpy codes with an explicit byte
 * order or an unambiguous size ("<f8", "|u1", "f4", "i2", "float64", "uint8"),
 * or "rawN" / "VN" for N-byte raw elements.  Plain "i8"/"u8" are the 8-bit
 * types; "f8" is float64 (there is no 8-bit float).  Returns 0 or -EINVAL.
 */
int gs_nd_parse_dtype(const char *s, uint32_t *dtype, uint32_t *elem_size);
/* "16384x16384" or "16384,16384" -> shape; returns ndims or -EINVAL/-ERANGE. */
int gs_nd_parse_shape(const char *s, uint64_t *shape, unsigned max);

/* "x1,x2,..." -> exactly @ndims block coordinates; 0, -EINVAL or -ERANGE. */
int gs_nd_parse_coords(const char *s, uint32_t ndims, uint64_t *coord);
/*
 * The hyperslab of the NDS block request (@subdim, @coord) on @shape:
 * start = coord * subdim, count = subdim clipped at the space's edge (edge
 * blocks, and blocks larger than the space, are partial, as HDF5 and Zarr
 * chunks are).  0, -EINVAL (a zero side) or -ERANGE (starts outside).
 */
int gs_nd_block_slab(uint32_t ndims, const uint64_t *shape, const uint64_t *subdim,
		     const uint64_t *coord, uint64_t *start, uint64_t *count);

/*
 * Slice "a:b[:s],i,:,..." of a @ndims-dim @shape (missing trailing entries:
 * whole).  A bare index i sets bit i of *dropped (numpy drops that axis).
 * Returns 0, -EINVAL (syntax, empty range) or -ERANGE (outside the shape).
 */
int gs_nd_parse_slice(const char *s, uint32_t ndims, const uint64_t *shape, uint64_t *start,
		      uint64_t *count, uint64_t *stride, uint32_t *dropped);

/*
 * Building-block shape for @p on a device with geometry @g (NULL: a default
 * device): minimum bytes = queue_depth x nr_devices x page (lba_size rounded
 * up to 4 KiB), at least opt_io, clamped to [64 KiB, 8 MiB]; equal-sided
 * powers of two over the innermost min(ndims, 3) dimensions, 1 for the
 * others, no side larger than its dimension needs.  Honors p->bb when set.
 * Returns 0, -EINVAL or -EOVERFLOW.
 */
int gs_nd_block_shape(const struct gs_nd_params *p, const struct gs_q_geom *g, uint64_t *bb);

/* ---- spaces on a gstore filesystem ---- */

/* The ino of space nd/@name (-ENOENT, -ENOTDIR if not a space). */
int gs_nd_lookup(struct gs_fs *fs, const char *name, uint64_t *ino);
/* Create object @name in directory @parent (0: the root's nd/) and format it
 * as a space; *ndp (may be NULL) gets it open. */
int gs_nd_create(struct gs_fs *fs, uint64_t parent, const char *name,
		 const struct gs_nd_params *p, uint32_t mode, struct gs_nd **ndp);
/* Format an existing, empty GS_T_ND object @ino (mkdir + setxattr path). */
int gs_nd_format(struct gs_fs *fs, uint64_t ino, const struct gs_nd_params *p);
/* The stored parameters of space @ino (elem_size and bb filled in), read
 * from its superblock without opening it.  -ENODATA: not formatted yet. */
int gs_nd_stat(struct gs_fs *fs, uint64_t ino, struct gs_nd_params *p);
/* Open the space @ino (GS_T_ND).  -ENODATA: not formatted yet. */
int gs_nd_open(struct gs_fs *fs, uint64_t ino, struct gs_nd **ndp);
/* Write back, sync and free.  Returns the write-back's result. */
int gs_nd_close(struct gs_nd *nd);
/* Write back dirty blocks and the index; durable when it returns 0. */
int gs_nd_sync(struct gs_nd *nd);
int gs_nd_get_info(struct gs_nd *nd, struct gs_nd_info *info);
/* Drop clean cached blocks (benchmarks: start cold). */
void gs_nd_drop_cache(struct gs_nd *nd);

/* ---- access ---- */

/*
 * NDS coordinate access: the sub-array of shape @subdim (NULL: the building
 * block shape) at block coordinate @coord, i.e. elements
 * [coord[i] * subdim[i], min((coord[i] + 1) * subdim[i], shape[i])) of each
 * dimension.  Sub-dimensionality: subdim[i] == 1 drops dimension i, so a 3-D
 * space serves 2-D tiles (1 x h x w) or 1-D rows (1 x 1 x w).  The buffer
 * holds the (edge-clipped) sub-array row-major.  Returns the bytes moved;
 * -ERANGE for a coordinate outside the space, -EINVAL if @len is too small.
 */
ssize_t gs_nd_read(struct gs_nd *nd, const uint64_t *coord, const uint64_t *subdim, void *buf,
		   size_t len);
ssize_t gs_nd_write(struct gs_nd *nd, const uint64_t *coord, const uint64_t *subdim,
		    const void *buf, size_t len);

/*
 * A selection: the hyperslab start[i] + k * stride[i], 0 <= k < count[i] of
 * the space, or of a view of it when @ndims != 0: the space's row-major
 * element sequence seen with shape @shape[0..ndims) (same volume).
 */
struct gs_nd_sel {
	uint32_t ndims;		/* 0: the space itself; else the view's ndims */
	const uint64_t *shape;	/* the view's shape (ndims != 0) */
	const uint64_t *start;	/* one per dimension (space's or view's) */
	const uint64_t *count;	/* >= 1 each */
	const uint64_t *stride;	/* NULL: all 1 */
};
/* Bytes a selection moves, or -EINVAL/-ERANGE/-EOVERFLOW (validation only). */
ssize_t gs_nd_sel_bytes(struct gs_nd *nd, const struct gs_nd_sel *sel);
ssize_t gs_nd_read_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, void *buf, size_t len);
ssize_t gs_nd_write_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, const void *buf,
			size_t len);
/* Hyperslab of the space (stride NULL: 1). */
ssize_t gs_nd_read_slab(struct gs_nd *nd, const uint64_t *start, const uint64_t *count,
			const uint64_t *stride, void *buf, size_t len);
ssize_t gs_nd_write_slab(struct gs_nd *nd, const uint64_t *start, const uint64_t *count,
			 const uint64_t *stride, const void *buf, size_t len);
/* Bytes [off, off + len) of the selection's row-major image (files use this). */
ssize_t gs_nd_pread_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, void *buf, size_t len,
			uint64_t off);
ssize_t gs_nd_pwrite_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, const void *buf,
			 size_t len, uint64_t off);

/* ---- asynchronous access ---- */

enum { GS_ND_OP_READ = 0, GS_ND_OP_WRITE = 1 };

struct gs_nd_aio;
typedef void (*gs_nd_aio_cb)(struct gs_nd_aio *aio, ssize_t res);
/*
 * Fill op, sel, buf, len (and done/priv); the selection's arrays and the
 * buffer stay the caller's and must live until completion.  @done (may be
 * NULL) runs on an nd worker thread; gs_nd_aio_wait() works either way.
 */
struct gs_nd_aio {
	int op;			/* GS_ND_OP_* */
	struct gs_nd_sel sel;
	void *buf;
	size_t len;
	gs_nd_aio_cb done;
	void *priv;
	/* private to nd */
	ssize_t res_;
	int state_;
	struct gs_nd_aio *next_;
};
/* Queue @aio; returns 0 or -errno (then nothing was queued). */
int gs_nd_aio_submit(struct gs_nd *nd, struct gs_nd_aio *aio);
/* Wait for @aio; returns its result. */
ssize_t gs_nd_aio_wait(struct gs_nd *nd, struct gs_nd_aio *aio);

/* ---- numpy .npy headers ---- */

/* Write the .npy header for @dtype/@elem_size and @shape into @buf (ndims 0:
 * a 0-d array, numpy shape ()); returns its length (a multiple of 64) or
 * -ENOSPC if @size is too small (256 always does for <= 8 dimensions). */
int gs_nd_npy_header(char *buf, size_t size, uint32_t dtype, uint32_t elem_size,
		     uint32_t ndims, const uint64_t *shape);
/* Parse a .npy header from @buf (@len bytes available); returns the header
 * length, -EAGAIN if more bytes are needed, -EINVAL if malformed, -EOPNOTSUPP
 * for Fortran order, big-endian or types gstore does not store. */
int gs_nd_npy_parse(const void *buf, size_t len, uint32_t *dtype, uint32_t *elem_size,
		    uint32_t *ndims, uint64_t *shape);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_ND_H */
