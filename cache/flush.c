// SPDX-License-Identifier: MIT
/*
 * Write-back: writing one dirty line, flushing ranges (write the dirty
 * lines, wait, then flush the device), remembering write-back errors until
 * a flush reports them, and invalidation.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "cache_internal.h"

/* Sleep until the write-back in flight on @l ends (or return at once if
 * it already did; the caller looks again either way). */
static void wait_wb(struct gs_line *l)
{
	/* sample the sequence before the flag: a write-back ending in between
	 * bumps it and the futex wait returns at once */
	uint32_t seq = __atomic_load_n(&l->wbseq, __ATOMIC_ACQUIRE);
	uint64_t ds = __atomic_load_n(&l->ds, __ATOMIC_ACQUIRE);

	if (!(ds & DS_WB))
		return;
	if (!(ds & DS_WBWAIT) &&
	    !__atomic_compare_exchange_n(&l->ds, &ds, ds | DS_WBWAIT, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	cache_futex_wait(&l->wbseq, seq);
}

/*
 * Write @l (pinned by the caller) if it is dirty.  One write-back per line
 * at a time, so two writers never race on the device with different
 * versions.  DIRTY is cleared only if no gs_cache_dirty() ran since the
 * generation was sampled: a writer that modified the line while it was
 * being written leaves it dirty, and the newer bytes go out next time.
 */
int cache_writeback(struct gs_cache *c, struct gs_line *l)
{
	uint64_t ds = __atomic_load_n(&l->ds, __ATOMIC_ACQUIRE), cur, nv;
	uint64_t n = __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
	uint32_t len;
	ssize_t r;
	int err;

	for (;;) {
		if (!(ds & DS_DIRTY))
			return 0;
		if (ds & DS_WB) {
			wait_wb(l);
			ds = __atomic_load_n(&l->ds, __ATOMIC_ACQUIRE);
			continue;
		}
		/* acquire: pairs with gs_cache_dirty(), the bytes we write are
		 * at least those of the generation we sample */
		if (__atomic_compare_exchange_n(&l->ds, &ds, ds | DS_WB, false, __ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE))
			break;
	}

	len = cache_io_len(c, n);
	r = c->ops->pwrite(c->dev, l->data, len, line_off(c, n));
	err = r == (ssize_t)len ? 0 : r < 0 ? (int)r : -EIO;
	if (err)
		CACHE_STAT(c, errors);
	else
		CACHE_STAT(c, writebacks);

	cur = __atomic_load_n(&l->ds, __ATOMIC_RELAXED);
	do {
		nv = cur & ~(uint64_t)(DS_WB | DS_WBWAIT);
		if (!err && DS_GEN(cur) == DS_GEN(ds))
			nv &= ~(uint64_t)DS_DIRTY;
	} while (!__atomic_compare_exchange_n(&l->ds, &cur, nv, false, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
	/* release: the cleared flags before the sequence waiters compare */
	__atomic_fetch_add(&l->wbseq, 1, __ATOMIC_RELEASE);
	if (cur & DS_WBWAIT)
		cache_futex_wake(&l->wbseq);
	return err;
}

/* ---- errors of write-backs nobody was waiting for (eviction) ---- */

void cache_record_error(struct gs_cache *c, uint64_t line, int err)
{
	pthread_mutex_lock(&c->err_lock);
	for (unsigned int i = 0; i < c->nerrs; i++) {
		if (c->errs[i].line == line) {
			c->errs[i].err = err;
			goto unlock;
		}
	}
	if (c->nerrs < CACHE_ERRS)
		c->errs[c->nerrs++] = (struct cache_err){ .line = line, .err = err };
	else
		c->err_lost = err;	/* no room to say where: the next flush reports it */
unlock:
	pthread_mutex_unlock(&c->err_lock);
}

/* Take (report once) the recorded errors of lines [first, last]. */
static int take_errors(struct gs_cache *c, uint64_t first, uint64_t last)
{
	int err = 0;

	pthread_mutex_lock(&c->err_lock);
	for (unsigned int i = 0; i < c->nerrs;) {
		if (c->errs[i].line >= first && c->errs[i].line <= last) {
			if (!err)
				err = c->errs[i].err;
			c->errs[i] = c->errs[--c->nerrs];
		} else {
			i++;
		}
	}
	if (c->err_lost) {
		if (!err)
			err = c->err_lost;
		c->err_lost = 0;
	}
	pthread_mutex_unlock(&c->err_lock);
	return err;
}

/* ---- flush ---- */

/* Lines [*first, *last] covering [off, off + len); len 0 or past the end of
 * the address space: through the last line. */
static void line_range(const struct gs_cache *c, uint64_t off, uint64_t len, uint64_t *first,
		       uint64_t *last)
{
	*first = off >> c->line_shift;
	if (!len || len - 1 > UINT64_MAX - off)
		*last = UINT64_MAX >> c->line_shift;
	else
		*last = (off + len - 1) >> c->line_shift;
}

static int flush_lines(struct gs_cache *c, uint64_t first, uint64_t last)
{
	int err = 0, r;

	if (last - first < c->nlines) {
		/* a short range: look its lines up */
		for (uint64_t n = first;; n++) {
			struct gs_line *l;
			bool inserted;

			l = cache_insert(c, NULL, n, &inserted);
			if (l) {
				r = cache_writeback(c, l);
				cache_unpin(l);
				if (r && !err)
					err = r;
			}
			if (n == last)
				break;
		}
		return err;
	}
	/* a long range: walk the lines instead */
	for (uint32_t i = 0; i < c->nlines; i++) {
		struct gs_line *l = &c->lines[i];
		uint64_t t;

		while (__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY) {
			/* frozen for a moment: an evictor that finds the line
			 * dirty unfreezes it at once */
			if (!cache_pin(l)) {
				sched_yield();
				continue;
			}
			t = __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
			r = t >= first && t <= last ? cache_writeback(c, l) : 0;
			cache_unpin(l);
			if (r && !err)
				err = r;
			break;
		}
	}
	return err;
}

int gs_cache_flush_range(struct gs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t first, last;
	int err, r;

	line_range(c, off, len, &first, &last);
	err = flush_lines(c, first, last);
	r = take_errors(c, first, last);
	if (r && !err)
		err = r;
	/* ordered: every write above has completed before the device flush */
	r = c->ops->flush(c->dev);
	if (r < 0 && !err)
		err = r;
	return err;
}

int gs_cache_flush(struct gs_cache *c)
{
	return gs_cache_flush_range(c, 0, 0);
}

/* ---- invalidate ---- */

/* Drop @l (hashed as line @n, bucket lock held) if it is clean, valid and
 * unpinned. */
static void drop_locked(struct gs_cache *c, struct gs_line *l, uint64_t n)
{
	uint32_t zero = 0;

	if (!__atomic_compare_exchange_n(&l->ref, &zero, REF_EVICT, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	if ((__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY) ||
	    (__atomic_load_n(&l->state, __ATOMIC_RELAXED) & LS_MASK) != LS_VALID) {
		cache_release_frozen(l);
		return;
	}
	cache_unhash_locked(c, l, n);
	__atomic_store_n(&l->tag, LINE_NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&l->state, LS_INVALID, __ATOMIC_RELAXED);
	__atomic_store_n(&l->refbit, 0, __ATOMIC_RELAXED);
	cache_release_frozen(l);
}

void gs_cache_invalidate(struct gs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t first, last;

	line_range(c, off, len, &first, &last);
	if (last - first < c->nlines) {
		for (uint64_t n = first;; n++) {
			pthread_mutex_t *m = cache_bucket_lock(c, n);
			struct gs_line *l;

			pthread_mutex_lock(m);
			l = cache_find_locked(c, n);
			if (l)
				drop_locked(c, l, n);
			pthread_mutex_unlock(m);
			if (n == last)
				break;
		}
		return;
	}
	for (uint32_t i = 0; i < c->nlines; i++) {
		struct gs_line *l = &c->lines[i];
		uint64_t t = __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
		pthread_mutex_t *m;

		if (t == LINE_NONE || t < first || t > last)
			continue;
		m = cache_bucket_lock(c, t);
		pthread_mutex_lock(m);
		if (cache_find_locked(c, t) == l)
			drop_locked(c, l, t);
		pthread_mutex_unlock(m);
	}
}
