// SPDX-License-Identifier: MIT
/*
 * Block cache core: the line table, the hash, pins, clock replacement and
 * gs_cache_get/put/dirty.  The rules every function here follows are in
 * cache_internal.h; flush.c does write-back, rw.c byte ranges and read-ahead.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache_internal.h"
#include "gs_log.h"

#define DEF_MEM		(64u << 20)
#define DEF_LINE	(64u << 10)
#define MAX_LOCKS	1024u
#define WALK_MAX	32	/* lock-free chain walk gives up (falls back) after this */
#define EVICT_ROUNDS	8	/* clock sweeps before -ENOMEM */

/* ---- small helpers ---- */

static unsigned int shard_next;
static __thread unsigned int shard_id = UINT_MAX;

struct cache_shard *cache_shard(struct gs_cache *c)
{
	if (shard_id == UINT_MAX)
		shard_id = __atomic_fetch_add(&shard_next, 1, __ATOMIC_RELAXED) % CACHE_SHARDS;
	return &c->st[shard_id];
}

void cache_futex_wait(uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void cache_futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline uint64_t bucket_of(const struct gs_cache *c, uint64_t n)
{
	return (n * 0x9e3779b97f4a7c15ull) >> c->bshift;
}

pthread_mutex_t *cache_bucket_lock(struct gs_cache *c, uint64_t n)
{
	return &c->locks[bucket_of(c, n) & c->lmask].m;
}

static inline uint64_t tag_of(const struct gs_line *l)
{
	return __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
}

static inline uint32_t state_of(const struct gs_line *l)
{
	return __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
}

static inline void touch(struct gs_line *l)
{
	/* read before writing: a hot line's refbit stays set without stores */
	if (!__atomic_load_n(&l->refbit, __ATOMIC_RELAXED))
		__atomic_store_n(&l->refbit, 1, __ATOMIC_RELAXED);
}

/* Bytes of line @n that exist on the device (a short last line; 0 past the end). */
uint32_t cache_io_len(const struct gs_cache *c, uint64_t n)
{
	uint64_t off = line_off(c, n);

	if (!c->capacity)
		return c->line_size;
	if (n > (c->capacity >> c->line_shift))
		return 0;
	if (c->capacity - off >= c->line_size)
		return c->line_size;
	return (uint32_t)(c->capacity - off);
}

/* ---- pins ---- */

bool cache_pin(struct gs_line *l)
{
	/* acquire: pairs with the release that published the line's tag and data */
	uint32_t old = __atomic_fetch_add(&l->ref, 1, __ATOMIC_ACQUIRE);

	if (!(old & REF_EVICT))
		return true;
	__atomic_fetch_sub(&l->ref, 1, __ATOMIC_RELAXED);
	return false;
}

void cache_unpin(struct gs_line *l)
{
	/* release: our accesses to the line happen before its eviction */
	__atomic_fetch_sub(&l->ref, 1, __ATOMIC_RELEASE);
}

void cache_release_frozen(struct gs_line *l)
{
	/* release: the reset tag/state are visible to the next pinner */
	__atomic_fetch_sub(&l->ref, REF_EVICT, __ATOMIC_RELEASE);
}

/* Move ref from @pins (our own pins) to REF_EVICT: succeeds only if nobody
 * else holds a pin. */
static bool freeze(struct gs_line *l, uint32_t pins)
{
	return __atomic_compare_exchange_n(&l->ref, &pins, REF_EVICT, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

/* ---- the hash ---- */

struct gs_line *cache_find_locked(struct gs_cache *c, uint64_t n)
{
	struct gs_line *l = c->buckets[bucket_of(c, n)];

	for (; l; l = l->hnext)
		if (tag_of(l) == n)
			return l;
	return NULL;
}

bool cache_unhash_locked(struct gs_cache *c, struct gs_line *l, uint64_t n)
{
	struct gs_line **pp = &c->buckets[bucket_of(c, n)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == l) {
			/* l->hnext stays: a lock-free walker standing on l walks on */
			__atomic_store_n(pp, l->hnext, __ATOMIC_RELEASE);
			return true;
		}
	}
	return false;
}

/* Lock-free lookup of a valid line: returns it pinned, or NULL (absent,
 * busy, or the walk raced with a move: the caller takes the locked path). */
struct gs_line *cache_peek(struct gs_cache *c, uint64_t n)
{
	struct gs_line *l = __atomic_load_n(&c->buckets[bucket_of(c, n)], __ATOMIC_ACQUIRE);

	for (int i = 0; l && i < WALK_MAX; i++) {
		if (tag_of(l) == n) {
			if (!cache_pin(l))
				return NULL;
			/* pinned: the tag cannot change any more, so check it again */
			if (tag_of(l) == n && (state_of(l) & LS_MASK) == LS_VALID)
				return l;
			cache_unpin(l);
			return NULL;
		}
		l = __atomic_load_n(&l->hnext, __ATOMIC_ACQUIRE);
	}
	return NULL;
}

struct gs_line *cache_insert(struct gs_cache *c, struct gs_line *v, uint64_t n, bool *inserted)
{
	pthread_mutex_t *m = cache_bucket_lock(c, n);
	struct gs_line **head = &c->buckets[bucket_of(c, n)];
	struct gs_line *l;

	*inserted = false;
	pthread_mutex_lock(m);
	l = cache_find_locked(c, n);
	if (l) {
		/* hashed lines are never frozen outside their bucket lock */
		__atomic_fetch_add(&l->ref, 1, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(m);
		if (v)
			cache_release_frozen(v);
		return l;
	}
	if (!v) {
		pthread_mutex_unlock(m);
		return NULL;
	}
	v->err = 0;
	__atomic_store_n(&v->refbit, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&v->tag, n, __ATOMIC_RELAXED);
	__atomic_store_n(&v->state, LS_BUSY, __ATOMIC_RELAXED);
	__atomic_store_n(&v->hnext, *head, __ATOMIC_RELAXED);
	/* release: lock-free walkers that find v see its tag and next */
	__atomic_store_n(head, v, __ATOMIC_RELEASE);
	/* unfreeze into one pin (ours); transient walker pins may come and go */
	__atomic_fetch_add(&v->ref, 1u - REF_EVICT, __ATOMIC_RELEASE);
	pthread_mutex_unlock(m);
	*inserted = true;
	return v;
}

/* ---- fill and wait ---- */

void cache_fill_done(struct gs_cache *c, struct gs_line *l, int err)
{
	uint32_t old;

	if (err) {
		uint64_t n = tag_of(l);
		pthread_mutex_t *m = cache_bucket_lock(c, n);

		/* unhash first: later gets miss and retry the read */
		pthread_mutex_lock(m);
		cache_unhash_locked(c, l, n);
		pthread_mutex_unlock(m);
		l->err = err;
		/* release: err (and the data, on success) before the state */
		old = __atomic_exchange_n(&l->state, LS_INVALID, __ATOMIC_RELEASE);
	} else {
		old = __atomic_exchange_n(&l->state, LS_VALID, __ATOMIC_RELEASE);
	}
	if (old & LS_WAITERS)
		cache_futex_wake(&l->state);
}

/* Sleep until @l leaves BUSY; returns the new state. */
static uint32_t wait_fill(struct gs_line *l)
{
	uint32_t st = state_of(l);

	while ((st & LS_MASK) == LS_BUSY) {
		if (!(st & LS_WAITERS) &&
		    !__atomic_compare_exchange_n(&l->state, &st, st | LS_WAITERS, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			continue;
		cache_futex_wait(&l->state, st | LS_WAITERS);
		st = state_of(l);
	}
	return st;
}

static int read_line(struct gs_cache *c, struct gs_line *l, uint64_t n)
{
	uint32_t len = cache_io_len(c, n);
	ssize_t r;

	r = c->ops->pread(c->dev, l->data, len, line_off(c, n));
	CACHE_STAT(c, reads);
	if (r == (ssize_t)len)
		return 0;
	CACHE_STAT(c, errors);
	return r < 0 ? (int)r : -EIO;
}

/* We inserted @l (BUSY, pinned once): read it, unless the caller overwrites it. */
static int fill(struct gs_cache *c, struct gs_line *l, uint64_t n, unsigned int flags)
{
	uint32_t len = cache_io_len(c, n);
	int r;

	CACHE_STAT(c, misses);
	if (len < c->line_size)
		memset((char *)l->data + len, 0, c->line_size - len);
	/* NOREAD: stays BUSY (others wait) until gs_cache_dirty() or put */
	if (flags & GS_CACHE_NOREAD)
		return 0;
	r = read_line(c, l, n);
	cache_fill_done(c, l, r);
	if (r)
		cache_unpin(l);
	return r;
}

void cache_wait_fill(struct gs_line *l)
{
	wait_fill(l);
}

/* ---- clock replacement ---- */

/*
 * Try to take @l for reuse.  Returns 0 with @l frozen, unhashed and reset;
 * -EAGAIN to move on; or the error of a failed write-back.
 */
static int try_evict(struct gs_cache *c, struct gs_line *l, bool clean_only)
{
	uint32_t pins = 0, st;
	pthread_mutex_t *m = NULL;
	uint64_t t;

	if (__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY) {
		uint32_t zero = 0;
		int r;

		if (clean_only)
			return -EAGAIN;
		if (!__atomic_compare_exchange_n(&l->ref, &zero, 1, false, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			return -EAGAIN;
		pins = 1;
		/* the evicting thread writes the line back itself */
		r = cache_writeback(c, l);
		if (r < 0) {
			cache_record_error(c, tag_of(l), r);
			cache_unpin(l);
			return r;
		}
	}
	t = tag_of(l);
	if (t != LINE_NONE) {
		m = cache_bucket_lock(c, t);
		pthread_mutex_lock(m);
	}
	if (!freeze(l, pins))
		goto busy;
	pins = 0;
	st = __atomic_load_n(&l->state, __ATOMIC_RELAXED) & LS_MASK;
	/* t was read unpinned: the line may have been reused since (ABA) */
	if (tag_of(l) != t || st == LS_BUSY ||
	    (__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY)) {
		cache_release_frozen(l);
		goto busy;
	}
	if (m) {
		cache_unhash_locked(c, l, t);
		pthread_mutex_unlock(m);
	}
	__atomic_store_n(&l->tag, LINE_NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&l->state, LS_INVALID, __ATOMIC_RELAXED);
	__atomic_store_n(&l->refbit, 0, __ATOMIC_RELAXED);
	if (st == LS_VALID)
		CACHE_STAT(c, evictions);
	return 0;
busy:
	if (m)
		pthread_mutex_unlock(m);
	if (pins)
		cache_unpin(l);
	return -EAGAIN;
}

int cache_evict(struct gs_cache *c, bool clean_only, struct gs_line **out)
{
	uint64_t scan = 2ull * c->nlines;
	int wberr = 0;

	for (int round = 0; round < EVICT_ROUNDS; round++) {
		for (uint64_t i = 0; i < scan; i++) {
			uint64_t h = __atomic_fetch_add(&c->hand, 1, __ATOMIC_RELAXED);
			struct gs_line *l = &c->lines[h % c->nlines];
			int r;

			if (__atomic_load_n(&l->ref, __ATOMIC_RELAXED))
				continue;	/* pinned (or being evicted by another thread) */
			if (__atomic_load_n(&l->refbit, __ATOMIC_RELAXED)) {
				__atomic_store_n(&l->refbit, 0, __ATOMIC_RELAXED);
				continue;	/* second chance */
			}
			r = try_evict(c, l, clean_only);
			if (!r) {
				*out = l;
				return 0;
			}
			if (r != -EAGAIN)
				wberr = r;
		}
		/* every candidate was dirty and could not be written: say why */
		if (wberr)
			return wberr;
		if (clean_only)
			break;
		sched_yield();
	}
	return -ENOMEM;
}

/* ---- get / put / dirty ---- */

static int get_slow(struct gs_cache *c, uint64_t n, unsigned int flags, struct gs_line **lp)
{
	for (;;) {
		struct gs_line *l, *v;
		bool inserted;
		uint32_t st;
		int r;

		l = cache_insert(c, NULL, n, &inserted);
		if (!l) {
			r = cache_evict(c, false, &v);
			if (r)
				return r;
			l = cache_insert(c, v, n, &inserted);
			if (inserted) {
				r = fill(c, l, n, flags);
				if (!r)
					*lp = l;
				return r;
			}
		}
		/* present, pinned by us */
		st = state_of(l);
		if ((st & LS_MASK) == LS_VALID) {
			touch(l);
			CACHE_STAT(c, hits);
			*lp = l;
			return 0;
		}
		if ((st & LS_MASK) == LS_BUSY) {
			if (flags & GS_CACHE_NOWAIT) {
				cache_unpin(l);
				return -EAGAIN;
			}
			CACHE_STAT(c, coalesced);
			st = wait_fill(l);
		}
		if ((st & LS_MASK) == LS_VALID) {
			touch(l);
			*lp = l;
			return 0;
		}
		r = l->err;
		cache_unpin(l);
		/* the read we waited for failed: every waiter gets its error */
		if (r < 0)
			return r;
		/* a NOREAD owner dropped the line without writing it: look again */
	}
}

int gs_cache_get(struct gs_cache *c, uint64_t off, unsigned int flags, struct gs_line **lp,
		 void **data)
{
	uint64_t n = off >> c->line_shift;
	struct gs_line *l;
	int r;

	if (flags & ~(unsigned int)(GS_CACHE_NOREAD | GS_CACHE_NOWAIT))
		return -EINVAL;
	if (c->capacity && off >= c->capacity)
		return -EINVAL;
	l = cache_peek(c, n);
	if (l) {
		touch(l);
		CACHE_STAT(c, hits);
	} else {
		r = get_slow(c, n, flags, &l);
		if (r)
			return r;
	}
	*lp = l;
	*data = l->data;
	return 0;
}

/* Set the dirty bits of blocks [first, last] of @l, then the line's flag. */
static void mark_dirty(struct gs_cache *c, struct gs_line *l, uint32_t first, uint32_t last)
{
	uint64_t ds = __atomic_load_n(&l->ds, __ATOMIC_RELAXED), *dm = line_dmask(c, l);
	uint32_t old;

	for (uint32_t w = first / 64; w <= last / 64; w++) {
		uint32_t lo = w == first / 64 ? first % 64 : 0;
		uint32_t hi = w == last / 64 ? last % 64 : 63;
		uint64_t bits = (hi == 63 ? ~0ull : (1ull << (hi + 1)) - 1) & ~((1ull << lo) - 1);

		/* release: the caller's bytes before the bits that make a
		 * write-back take them (an RMW even when they are set: one
		 * per line written, and TSan models it where it models no
		 * fence) */
		__atomic_fetch_or(&dm[w], bits, __ATOMIC_RELEASE);
	}
	/* release: the caller's stores to the line before the write-back that
	 * samples this generation */
	while (!__atomic_compare_exchange_n(&l->ds, &ds, (ds + DS_GEN1) | DS_DIRTY, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	/* a NOREAD owner's line becomes valid once written */
	if ((__atomic_load_n(&l->state, __ATOMIC_RELAXED) & LS_MASK) == LS_BUSY) {
		old = __atomic_exchange_n(&l->state, LS_VALID, __ATOMIC_RELEASE);
		if (old & LS_WAITERS)
			cache_futex_wake(&l->state);
	}
}

void gs_cache_dirty(struct gs_cache *c, struct gs_line *l)
{
	mark_dirty(c, l, 0, c->units - 1);
}

void gs_cache_dirty_range(struct gs_cache *c, struct gs_line *l, uint32_t off, uint32_t len)
{
	if (!len || off >= c->line_size)
		return;
	if (len > c->line_size - off)
		len = c->line_size - off;
	mark_dirty(c, l, off >> c->unit_shift, (off + len - 1) >> c->unit_shift);
}

void gs_cache_put(struct gs_cache *c, struct gs_line *l)
{
	/*
	 * Only a NOREAD owner can hold a pin on a BUSY line (waiters return
	 * after BUSY, read-ahead pins are not user pins).  It never dirtied the
	 * line, so its bytes are garbage: drop it; its waiters look again.
	 */
	if ((__atomic_load_n(&l->state, __ATOMIC_RELAXED) & LS_MASK) == LS_BUSY)
		cache_fill_done(c, l, FILL_DROP);
	cache_unpin(l);
}

uint32_t gs_cache_line_size(const struct gs_cache *c)
{
	return c->line_size;
}

void gs_cache_get_stats(struct gs_cache *c, struct gs_cache_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct cache_shard *s = &c->st[i];

		st->hits += __atomic_load_n(&s->hits, __ATOMIC_RELAXED);
		st->misses += __atomic_load_n(&s->misses, __ATOMIC_RELAXED);
		st->coalesced += __atomic_load_n(&s->coalesced, __ATOMIC_RELAXED);
		st->reads += __atomic_load_n(&s->reads, __ATOMIC_RELAXED);
		st->writebacks += __atomic_load_n(&s->writebacks, __ATOMIC_RELAXED);
		st->evictions += __atomic_load_n(&s->evictions, __ATOMIC_RELAXED);
		st->readahead += __atomic_load_n(&s->readahead, __ATOMIC_RELAXED);
		st->errors += __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
	}
	st->lines = c->nlines;
	for (uint32_t i = 0; i < c->nlines; i++) {
		struct gs_line *l = &c->lines[i];

		if (__atomic_load_n(&l->ref, __ATOMIC_RELAXED) & REF_MASK)
			st->pinned++;
		if (__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY)
			st->dirty++;
	}
}

/* ---- create / destroy ---- */

static void free_mem(struct gs_cache *c)
{
	/*
	 * A region the queue still knows must not be unmapped: a later mapping
	 * at the same addresses would be taken for it.  If it cannot be
	 * unregistered, keep the addresses reserved (the memory goes).
	 */
	if (c->registered && (!c->ops->unregister_buffer ||
			      c->ops->unregister_buffer(c->dev, c->mem))) {
		mmap(c->mem, c->mem_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
		     MAP_NORESERVE, -1, 0);
		return;
	}
	munmap(c->mem, c->mem_len);
}

static void free_cache(struct gs_cache *c, uint32_t nlocks)
{
	for (uint32_t i = 0; i < nlocks; i++)
		pthread_mutex_destroy(&c->locks[i].m);
	pthread_mutex_destroy(&c->err_lock);
	free(c->locks);
	free(c->buckets);
	free(c->dmask);
	free(c->lines);
	free(c);
}

int cache_create_ops(struct gs_cache **cp, const struct cache_io_ops *ops, void *dev,
		     const struct gs_cache_params *p)
{
	static const struct gs_cache_params defaults;
	uint64_t nb = 16, nlines;
	uint32_t nlocks, ls, unit;
	struct gs_q_geom g;
	struct gs_cache *c;
	size_t mem;
	long page = sysconf(_SC_PAGESIZE);
	int r;

	if (!cp || !ops || !ops->geometry || !ops->pread || !ops->pwrite || !ops->flush)
		return -EINVAL;
	if (!p)
		p = &defaults;
	mem = p->mem_bytes ? p->mem_bytes : DEF_MEM;
	ls = p->line_size ? p->line_size : DEF_LINE;
	memset(&g, 0, sizeof(g));
	r = ops->geometry(dev, &g);
	if (r < 0)
		return r;
	if (!g.lba_size)
		g.lba_size = 512;
	if ((ls & (ls - 1)) || (g.lba_size & (g.lba_size - 1)) || ls < g.lba_size ||
	    g.lba_size > (uint64_t)page || (g.max_io && ls > g.max_io))
		return -EINVAL;
	unit = p->block_size ? p->block_size : g.lba_size;
	if ((unit & (unit - 1)) || unit < g.lba_size)
		return -EINVAL;
	if (unit > ls)
		unit = ls;
	if (ls / unit > 64 * MASK_WORDS)
		unit = ls / (64 * MASK_WORDS);
	nlines = mem / ls;
	if (!nlines || nlines > (REF_MASK >> 1))
		return -EINVAL;
	while (nb < nlines)
		nb <<= 1;
	nlocks = nb < MAX_LOCKS ? (uint32_t)nb : MAX_LOCKS;

	r = posix_memalign((void **)&c, 64, sizeof(*c));
	if (r)
		return -r;
	memset(c, 0, sizeof(*c));
	c->ops = ops;
	c->dev = dev;
	c->line_size = ls;
	c->line_shift = (uint32_t)__builtin_ctz(ls);
	c->unit_shift = (uint32_t)__builtin_ctz(unit);
	c->units = ls / unit;
	c->nlines = (uint32_t)nlines;
	c->readahead = p->readahead;
	c->lba = g.lba_size;
	c->max_io = g.max_io;
	c->capacity = g.capacity & ~(uint64_t)(g.lba_size - 1);
	c->bshift = 64 - (unsigned int)__builtin_ctzll(nb);
	c->lmask = nlocks - 1;
	c->seq_last = LINE_NONE - 1;
	pthread_mutex_init(&c->err_lock, NULL);

	r = -ENOMEM;
	if (!posix_memalign((void **)&c->lines, 64, nlines * sizeof(*c->lines)))
		memset(c->lines, 0, nlines * sizeof(*c->lines));
	else
		c->lines = NULL;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	c->dmask = calloc(nlines, sizeof(*c->dmask));
	if (posix_memalign((void **)&c->locks, 64, nlocks * sizeof(*c->locks)))
		c->locks = NULL;
	if (!c->lines || !c->buckets || !c->locks || !c->dmask) {
		nlocks = 0;
		goto free_cache;
	}
	for (uint32_t i = 0; i < nlocks; i++)
		pthread_mutex_init(&c->locks[i].m, NULL);

	/* one region for all line data: page aligned, so every line is O_DIRECT-able */
	c->mem_len = (size_t)nlines * ls;
	c->mem = mmap(NULL, c->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (c->mem == MAP_FAILED)
		goto free_cache;
	for (uint64_t i = 0; i < nlines; i++) {
		struct gs_line *l = &c->lines[i];

		l->tag = LINE_NONE;
		l->data = (char *)c->mem + i * ls;
	}
	if (ops->register_buffer) {
		r = ops->register_buffer(dev, c->mem, c->mem_len);
		if (!r)
			c->registered = true;
		else if (r != -EOPNOTSUPP && r != -ENOSYS)
			gs_warn("cache: registering %zu bytes of line memory failed (%d); "
				"using unregistered buffers", c->mem_len, r);
	}
	*cp = c;
	return 0;

free_cache:
	free_cache(c, nlocks);
	return r;
}

int gs_cache_destroy(struct gs_cache *c)
{
	int r;

	if (!c)
		return 0;
	cache_ra_wait(c);
	r = gs_cache_flush(c);
	free_mem(c);
	free_cache(c, c->lmask + 1);
	return r;
}
