/* SPDX-License-Identifier: MIT */
/*
 * gstore block cache: a fixed memory budget of fixed-size lines over a gs_q.
 *
 * Lines are found by hash on their device line number, replaced by clock
 * (second chance, as in BaM), never evicted while pinned (refcount > 0).
 * States: invalid, busy (I/O in flight), valid, dirty.  Concurrent misses
 * on one line cause one device read; the other threads wait for it.
 * Dirtiness is kept per block of a line (gs_cache_params.block_size): a
 * write-back writes only the blocks that were modified, never a clean block
 * whose device copy may have changed around the cache since the line was
 * read.  Dirty lines are written back on eviction and on flush; a flush
 * writes the dirty blocks, waits for them, then flushes the device.
 *
 * All functions return 0 (or a count) on success and -errno on failure.
 */
#ifndef GSTORE_CACHE_H
#define GSTORE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_q;
struct gs_cache;
struct gs_line;

struct gs_cache_params {
	size_t mem_bytes;	/* budget for line data (0: 64 MiB) */
	uint32_t line_size;	/* bytes, power of two, >= device lba (0: 64 KiB) */
	uint32_t readahead;	/* max lines read ahead on sequential access (0: off) */
	uint32_t block_size;	/* dirty-tracking unit, power of two (0: the device's lba);
				 * raised to line_size / 256 if smaller */
};

int gs_cache_create(struct gs_cache **cp, struct gs_q *q, const struct gs_cache_params *p);
/* Writes back dirty lines and frees the cache; returns the flush's result. */
int gs_cache_destroy(struct gs_cache *c);
uint32_t gs_cache_line_size(const struct gs_cache *c);

/* gs_cache_get() flags */
enum {
	GS_CACHE_NOREAD = 1u << 0,	/* caller overwrites the whole line: skip the read */
	GS_CACHE_NOWAIT = 1u << 1,	/* return -EAGAIN instead of waiting for busy lines */
};

/*
 * Pin the line holding device byte offset @off (rounded down to a line) and
 * make it valid (reading it on a miss).  *data points at the line's bytes
 * while the pin is held.  Returns 0 or -errno (-EIO if the read failed:
 * every waiter gets it and the line stays invalid).  If every line is
 * pinned it does not wait: -ENOMEM.  With GS_CACHE_NOREAD a missed line
 * stays busy (others wait) until gs_cache_dirty(); putting it undirtied
 * drops it.  The cache does not serialize access to a line's bytes.
 */
int gs_cache_get(struct gs_cache *c, uint64_t off, unsigned flags, struct gs_line **lp,
		 void **data);
/* Mark a pinned line dirty after modifying its bytes: all of it, or the
 * blocks covering bytes [off, off + len) of the line. */
void gs_cache_dirty(struct gs_cache *c, struct gs_line *l);
void gs_cache_dirty_range(struct gs_cache *c, struct gs_line *l, uint32_t off, uint32_t len);
void gs_cache_put(struct gs_cache *c, struct gs_line *l);

/* Byte-range copies through the cache (any offset and length). */
ssize_t gs_cache_read(struct gs_cache *c, void *buf, size_t len, uint64_t off);
ssize_t gs_cache_write(struct gs_cache *c, const void *buf, size_t len, uint64_t off);

/*
 * Write back dirty lines (all of them, or those overlapping [off, off+len)),
 * then issue a device flush ordered after them.  Reports, once, the error
 * of any earlier failed write-back in that range (such lines stay dirty).
 */
int gs_cache_flush(struct gs_cache *c);
int gs_cache_flush_range(struct gs_cache *c, uint64_t off, uint64_t len);
/* Drop clean unpinned lines in the range (after the device changed under us). */
void gs_cache_invalidate(struct gs_cache *c, uint64_t off, uint64_t len);
/*
 * Write back the dirty blocks of every line overlapping [off, off+len) and
 * drop those lines, waiting for pins and fills in flight on them: once it
 * returns, no line holds a copy of the range taken before the call.  Used
 * around I/O that bypasses the cache.  Returns the first write-back error
 * (that line stays, dirty).
 */
int gs_cache_drop_range(struct gs_cache *c, uint64_t off, uint64_t len);
/* Hint: [off, off+len) will be read soon; starts reads without waiting. */
void gs_cache_readahead(struct gs_cache *c, uint64_t off, uint64_t len);

struct gs_cache_stats {
	uint64_t hits, misses, coalesced;	/* coalesced: misses that waited on another's read */
	uint64_t reads, writebacks, evictions;
	uint64_t readahead;
	uint64_t errors;
	uint32_t lines, dirty, pinned;
};
void gs_cache_get_stats(struct gs_cache *c, struct gs_cache_stats *st);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_CACHE_H */
