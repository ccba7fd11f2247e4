/* SPDX-License-Identifier: MIT */
/*
 * Block cache internals, shared by the files of cache/ and the unit tests.
 *
 * Concurrency model (every field below says who may write it):
 *
 * - A line is found through a hash of chains.  Chains are changed only
 *   under the bucket's lock stripe; readers may walk them without the lock
 *   (lines are never freed, so a walk is memory-safe; a walk that strays
 *   onto a line moved to another chain simply misses and the caller takes
 *   the locked path, which is authoritative).
 *
 * - ref counts pins.  A pin is taken with fetch_add; REF_EVICT "freezes" a
 *   line: only a thread that moved ref from its own count to REF_EVICT with
 *   a CAS (no other pin existed) may change the line's tag, chain or state
 *   of ownership.  A pin taken while REF_EVICT is set is backed out.  So a
 *   thread holding a pin (REF_EVICT clear) sees a stable tag, and the
 *   clock never evicts a pinned line.  Hashed lines are frozen only under
 *   their bucket lock, and never stay frozen after it is dropped.
 *
 * - state is the fill state and the futex word BUSY waiters sleep on.
 *   The thread that inserted a BUSY line (or the read-ahead completion)
 *   is its only writer until it leaves BUSY.
 *
 * - ds packs the dirty flag, the write-back flag and a generation that
 *   gs_cache_dirty() bumps, so "clear DIRTY only if nobody re-dirtied the
 *   line while it was being written" is one CAS.
 *
 * - dmask (c->dmask[line index], apart from the lines so that a lookup's
 *   footprint stays 128 bytes a line) says which blocks (units of
 *   c->unit_shift) of the line are dirty.
 *   A writer sets its bits after copying its bytes and before it bumps ds; a
 *   write-back takes the bits with an exchange once it owns DS_WB and writes
 *   only those blocks, so bits set after the exchange stay for the next
 *   write-back, and a failed write-back puts its bits back.  Writing clean
 *   blocks too would be wrong, not just slow: their bytes are what the line
 *   read, and the device may have changed under them since (direct I/O of a
 *   lease to blocks that share the line with cached metadata).
 */
#ifndef GS_CACHE_INTERNAL_H
#define GS_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gstore_cache.h"
#include "gstore_q.h"

/*
 * What the cache needs from the layer below.  gs_cache_create() binds it
 * to gs_q_* (cache/qops.c); unit tests bind it to a memory device.
 * pread/pwrite return len or -errno; submit follows gs_q_submit().
 */
struct cache_io_ops {
	int (*geometry)(void *dev, struct gs_q_geom *g);
	int (*register_buffer)(void *dev, void *addr, size_t len);	/* optional */
	int (*unregister_buffer)(void *dev, void *addr);		/* optional */
	ssize_t (*pread)(void *dev, void *buf, size_t len, uint64_t off);
	ssize_t (*pwrite)(void *dev, const void *buf, size_t len, uint64_t off);
	int (*flush)(void *dev);
	int (*submit)(void *dev, struct gs_q_io **ios, unsigned n);	/* optional */
};

int cache_create_ops(struct gs_cache **cp, const struct cache_io_ops *ops, void *dev,
		     const struct gs_cache_params *p);

#define LINE_NONE	UINT64_MAX
#define MASK_WORDS	4	/* dirty bits per line: up to 256 blocks */

/* gs_line.state: low byte the state, LS_WAITERS set by a sleeping waiter */
enum {
	LS_INVALID = 0,
	LS_BUSY = 1,
	LS_VALID = 2,
	LS_MASK = 0xff,
	LS_WAITERS = 1u << 8,
};

#define REF_EVICT	(1u << 31)
#define REF_MASK	(REF_EVICT - 1)

/* gs_line.ds: flags in the low half, generation in the high half */
enum {
	DS_DIRTY = 1u << 0,
	DS_WB = 1u << 1,	/* a write-back of this line is in flight */
	DS_WBWAIT = 1u << 2,	/* someone sleeps on wbseq for DS_WB to clear */
};
#define DS_GEN1		(1ull << 32)
#define DS_GEN(ds)	((uint32_t)((ds) >> 32))

struct gs_line {
	/* read-mostly: lookups read these; written on fill, eviction, failure */
	uint64_t tag;		/* line number or LINE_NONE; changed only while frozen */
	struct gs_line *hnext;	/* chain; written under the bucket lock */
	void *data;		/* line_size bytes inside gs_cache.mem (constant) */
	uint32_t state;		/* LS_* (atomic, futex word) */
	uint8_t refbit;		/* clock: used since the hand last passed */
	int32_t err;		/* failed read's result, for the waiters */

	/* written on every pin: a cache line of its own, so a lookup that
	 * only reads the fields above does not pull them from the core that
	 * pinned the line last (a hit then costs one transfer, not two) */
	uint32_t ref __attribute__((aligned(64)));	/* pins | REF_EVICT (atomic) */
	uint32_t wbseq;		/* futex word: bumped whenever a write-back ends */
	uint64_t ds;		/* DS_* | generation << 32 (atomic) */
	struct gs_q_io io;	/* read-ahead request */
} __attribute__((aligned(64)));

struct cache_lock {
	pthread_mutex_t m;
} __attribute__((aligned(64)));

/* Statistics are sharded per thread so that the hit path does not bounce
 * one counter's cache line between cores. */
struct cache_shard {
	uint64_t hits, misses, coalesced;
	uint64_t reads, writebacks, evictions;
	uint64_t readahead, errors;
} __attribute__((aligned(64)));
#define CACHE_SHARDS	16

/* Write-back errors not yet reported by a flush (the lines stay dirty). */
#define CACHE_ERRS	64
struct cache_err {
	uint64_t line;
	int err;
};

struct gs_cache {
	/* constant after create */
	const struct cache_io_ops *ops;
	void *dev;
	uint32_t line_size;
	uint32_t line_shift;
	uint32_t unit_shift;	/* log2 of the dirty-tracking block */
	uint32_t units;		/* blocks per line (<= 64 * MASK_WORDS) */
	uint32_t nlines;
	uint32_t readahead;
	uint32_t lba;
	uint32_t max_io;
	uint64_t capacity;	/* bytes, 0: unknown */
	unsigned int bshift;	/* 64 - log2(number of buckets) */
	uint32_t lmask;		/* lock stripes - 1 */
	bool registered;	/* mem registered with the queue */
	size_t mem_len;
	void *mem;
	struct gs_line *lines;
	uint64_t (*dmask)[MASK_WORDS];	/* per line: dirty blocks (atomic) */
	struct gs_line **buckets;
	struct cache_lock *locks;

	uint64_t hand __attribute__((aligned(64)));	/* clock hand (atomic) */
	uint64_t seq_last __attribute__((aligned(64)));	/* last line of the last read */
	uint32_t ra_inflight;	/* read-ahead I/Os not completed (atomic) */

	pthread_mutex_t err_lock;
	unsigned int nerrs;
	int err_lost;		/* an error that did not fit in errs[] */
	struct cache_err errs[CACHE_ERRS];

	struct cache_shard st[CACHE_SHARDS];
};

/* cache.c */
struct cache_shard *cache_shard(struct gs_cache *c);
#define CACHE_STAT(c, f)	__atomic_fetch_add(&cache_shard(c)->f, 1, __ATOMIC_RELAXED)

static inline uint64_t *line_dmask(struct gs_cache *c, const struct gs_line *l)
{
	return c->dmask[l - c->lines];
}

static inline uint64_t line_off(const struct gs_cache *c, uint64_t n)
{
	return n << c->line_shift;
}

uint32_t cache_io_len(const struct gs_cache *c, uint64_t n);
pthread_mutex_t *cache_bucket_lock(struct gs_cache *c, uint64_t n);
struct gs_line *cache_find_locked(struct gs_cache *c, uint64_t n);
bool cache_unhash_locked(struct gs_cache *c, struct gs_line *l, uint64_t n);
struct gs_line *cache_peek(struct gs_cache *c, uint64_t n);
bool cache_pin(struct gs_line *l);
void cache_unpin(struct gs_line *l);
/* Evict a line (clean ones only with @clean_only); returns it frozen and
 * unhashed in *out, or -ENOMEM / a write-back error. */
int cache_evict(struct gs_cache *c, bool clean_only, struct gs_line **out);
void cache_release_frozen(struct gs_line *l);
/* Insert frozen @v as line @n in state BUSY, pinned once, unless @n is
 * present: then pin and return the present line, and release @v. */
struct gs_line *cache_insert(struct gs_cache *c, struct gs_line *v, uint64_t n, bool *inserted);
/* End a BUSY fill: 0 makes the line valid, <0 drops it with that error for
 * the waiters, FILL_DROP drops it and sends the waiters to look again. */
#define FILL_DROP	1
void cache_fill_done(struct gs_cache *c, struct gs_line *l, int err);
void cache_futex_wait(uint32_t *w, uint32_t val);
void cache_futex_wake(uint32_t *w);

/* cache.c */
void cache_wait_fill(struct gs_line *l);

/* flush.c */
int cache_writeback(struct gs_cache *c, struct gs_line *l);
void cache_record_error(struct gs_cache *c, uint64_t line, int err);

/* rw.c */
void cache_ra_wait(struct gs_cache *c);

#endif /* GS_CACHE_INTERNAL_H */
