// SPDX-License-Identifier: MIT
/*
 * Write-back: writing one dirty line, flushing ranges (write the dirty
 * lines, wait, then flush the device), remembering write-back errors until
 * a flush reports them, and invalidation.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
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
 * One write-back per line at a time, so two writers never race on the
 * device with different versions of a line.  wb_try_begin() claims it:
 * returns 1 with DS_WB set by us and the sampled flags/generation in *dsp,
 * 0 if the line is clean, -EBUSY if another write-back of it is in flight.
 */
static int wb_try_begin(struct gs_line *l, uint64_t *dsp)
{
	uint64_t ds = __atomic_load_n(&l->ds, __ATOMIC_ACQUIRE);

	for (;;) {
		if (!(ds & DS_DIRTY))
			return 0;
		if (ds & DS_WB)
			return -EBUSY;
		/* acquire: pairs with gs_cache_dirty(), the bytes we write are
		 * at least those of the generation we sample */
		if (__atomic_compare_exchange_n(&l->ds, &ds, ds | DS_WB, false, __ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE)) {
			*dsp = ds;
			return 1;
		}
	}
}

/*
 * End the write-back claimed with flags/generation @ds.  DIRTY is cleared
 * only if no gs_cache_dirty() ran since the generation was sampled: a
 * writer that modified the line while it was being written leaves it
 * dirty, and the newer bytes go out next time.
 */
static void wb_end(struct gs_cache *c, struct gs_line *l, uint64_t ds, int err)
{
	uint64_t cur = __atomic_load_n(&l->ds, __ATOMIC_RELAXED), nv;

	if (err)
		CACHE_STAT(c, errors);
	else
		CACHE_STAT(c, writebacks);
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
}

/* Take the dirty bits of @l (its write-back is ours: DS_WB). */
static void mask_take(struct gs_cache *c, struct gs_line *l, uint64_t *m)
{
	uint64_t *dm = line_dmask(c, l);

	/* acquire: pairs with mark_dirty(), the bytes of the blocks we take */
	for (int w = 0; w < MASK_WORDS; w++)
		m[w] = __atomic_exchange_n(&dm[w], 0, __ATOMIC_ACQUIRE);
}

/* A failed write-back: its blocks are dirty again. */
static void mask_restore(struct gs_cache *c, struct gs_line *l, const uint64_t *m)
{
	uint64_t *dm = line_dmask(c, l);

	for (int w = 0; w < MASK_WORDS; w++)
		if (m[w])
			__atomic_fetch_or(&dm[w], m[w], __ATOMIC_RELAXED);
}

static bool mask_test(const uint64_t *m, uint32_t i)
{
	return m[i / 64] >> (i % 64) & 1;
}

/*
 * The next run of dirty blocks of line @n from block *pos: byte offset in
 * the line and length (clipped to the device), or false when none is left.
 */
static bool next_run(const struct gs_cache *c, uint64_t n, const uint64_t *m, uint32_t *pos,
		     uint32_t *off, uint32_t *len)
{
	uint32_t i = *pos, j, end = cache_io_len(c, n);

	while (i < c->units && !mask_test(m, i))
		i++;
	if (i == c->units || (i << c->unit_shift) >= end)
		return false;
	for (j = i + 1; j < c->units && mask_test(m, j); j++)
		;
	*pos = j;
	*off = i << c->unit_shift;
	*len = j << c->unit_shift;
	if (*len > end)
		*len = end;
	*len -= *off;
	return true;
}

/* Write the blocks of @m of @l, one request per run, synchronously. */
static int wb_write(struct gs_cache *c, struct gs_line *l, const uint64_t *m)
{
	uint64_t n = __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
	uint32_t pos = 0, off, len;

	while (next_run(c, n, m, &pos, &off, &len)) {
		ssize_t r = c->ops->pwrite(c->dev, (char *)l->data + off, len, line_off(c, n) + off);

		if (r != (ssize_t)len)
			return r < 0 ? (int)r : -EIO;
	}
	return 0;
}

/* Write @l's dirty blocks (the caller pins it), synchronously. */
int cache_writeback(struct gs_cache *c, struct gs_line *l)
{
	uint64_t ds, m[MASK_WORDS];
	int r;

	while ((r = wb_try_begin(l, &ds)) < 0)
		wait_wb(l);
	if (!r)
		return 0;
	mask_take(c, l, m);
	r = wb_write(c, l, m);
	if (r)
		mask_restore(c, l, m);
	wb_end(c, l, ds, r);
	return r;
}

/* ---- batched write-back for flushes: many writes in flight at once ---- */

#define WB_BATCH	64	/* lines */
#define WB_IOS		256	/* requests (runs of dirty blocks) */

struct wb_batch;

struct wb_io {
	struct gs_q_io io;
	struct wb_batch *b;
	unsigned int li;	/* index of its line in the batch */
};

struct wb_batch {
	uint32_t pending;	/* writes not completed (futex word) */
	unsigned int n, nio;
	struct gs_line *l[WB_BATCH];	/* pinned, DS_WB claimed */
	uint64_t ds[WB_BATCH];
	uint64_t m[WB_BATCH][MASK_WORDS];	/* the blocks each line writes */
	int res[WB_BATCH];
	struct wb_io io[WB_IOS];
	struct gs_q_io *ios[WB_IOS];
};

/* Completion callback, on a poller thread. */
static void wb_done(struct gs_q_io *io, int64_t res)
{
	struct wb_io *w = (struct wb_io *)((char *)io - offsetof(struct wb_io, io));
	struct wb_batch *b = w->b;
	int e = res == (int64_t)io->len ? 0 : res < 0 ? (int)res : -EIO;

	if (e)
		__atomic_store_n(&b->res[w->li], e, __ATOMIC_RELAXED);
	/* release: res before the count; the waiter may return (and b go
	 * away) once it reads 0, the wake then hits a stale address: harmless */
	if (!__atomic_sub_fetch(&b->pending, 1, __ATOMIC_RELEASE))
		cache_futex_wake(&b->pending);
}

/* Write the batch's runs, wait for all of them, end their lines' write-backs. */
static int wb_run(struct gs_cache *c, struct wb_batch *b)
{
	uint32_t p;
	int err = 0, r = -EOPNOTSUPP;

	if (!b->n)
		return 0;
	b->pending = b->nio;
	if (b->nio && c->ops->submit)
		r = c->ops->submit(c->dev, b->ios, b->nio);
	if (r < 0) {
		/* nothing queued: write them one by one */
		for (unsigned int i = 0; i < b->n; i++)
			b->res[i] = wb_write(c, b->l[i], b->m[i]);
	} else {
		/* acquire: pairs with wb_done(), every res is visible at 0 */
		while ((p = __atomic_load_n(&b->pending, __ATOMIC_ACQUIRE)))
			cache_futex_wait(&b->pending, p);
	}
	for (unsigned int i = 0; i < b->n; i++) {
		struct gs_line *l = b->l[i];
		int e = b->res[i];

		if (e)
			mask_restore(c, l, b->m[i]);
		wb_end(c, l, b->ds[i], e);
		cache_unpin(l);
		if (e && !err)
			err = e;
	}
	b->n = 0;
	b->nio = 0;
	return err;
}

/* Queue pinned @l for write-back if it is dirty; the batch owns the pin. */
static int wb_add(struct gs_cache *c, struct wb_batch *b, struct gs_line *l)
{
	uint64_t ds, n = __atomic_load_n(&l->tag, __ATOMIC_RELAXED), m[MASK_WORDS];
	uint32_t pos = 0, off, len, runs = 0;
	unsigned int li;
	int err = 0, r;

	/* never wait for another write-back while holding claims of our own:
	 * two flushers would wait for each other's unsubmitted batches */
	while ((r = wb_try_begin(l, &ds)) < 0) {
		r = wb_run(c, b);
		if (r && !err)
			err = r;
		wait_wb(l);
	}
	if (!r) {
		cache_unpin(l);
		return err;
	}
	mask_take(c, l, m);
	while (next_run(c, n, m, &pos, &off, &len))
		runs++;
	if (b->nio + runs > WB_IOS) {
		r = wb_run(c, b);
		if (r && !err)
			err = r;
	}
	li = b->n++;
	b->l[li] = l;
	b->ds[li] = ds;
	b->res[li] = 0;
	memcpy(b->m[li], m, sizeof(m));
	if (runs > WB_IOS) {
		/* more runs than a batch holds: this line goes on its own */
		b->res[li] = wb_write(c, l, m);
		b->n--;
		if (b->res[li])
			mask_restore(c, l, m);
		wb_end(c, l, ds, b->res[li]);
		cache_unpin(l);
		return err ? err : b->res[li];
	}
	for (pos = 0; next_run(c, n, m, &pos, &off, &len);) {
		struct wb_io *w = &b->io[b->nio];

		w->io = (struct gs_q_io){
			.op = GS_OP_WRITE, .len = len, .off = line_off(c, n) + off,
			.buf = (char *)l->data + off, .done = wb_done,
		};
		w->b = b;
		w->li = li;
		b->ios[b->nio++] = &w->io;
	}
	if (b->n == WB_BATCH) {
		r = wb_run(c, b);
		if (r && !err)
			err = r;
	}
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
	struct wb_batch b;	/* about 20 KiB */
	int err = 0, r;

	b.n = 0;
	b.nio = 0;
	if (last - first < c->nlines) {
		/* a short range: look its lines up */
		for (uint64_t n = first;; n++) {
			struct gs_line *l;
			bool inserted;

			l = cache_insert(c, NULL, n, &inserted);
			if (l) {
				r = wb_add(c, &b, l);
				if (r && !err)
					err = r;
			}
			if (n == last)
				break;
		}
	} else {
		/* a long range: walk the lines instead */
		for (uint32_t i = 0; i < c->nlines; i++) {
			struct gs_line *l = &c->lines[i];
			uint64_t t;

			while (__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY) {
				/* frozen for a moment: an evictor that finds the
				 * line dirty unfreezes it at once */
				if (!cache_pin(l)) {
					sched_yield();
					continue;
				}
				t = __atomic_load_n(&l->tag, __ATOMIC_RELAXED);
				r = 0;
				if (t >= first && t <= last)
					r = wb_add(c, &b, l);
				else
					cache_unpin(l);
				if (r && !err)
					err = r;
				break;
			}
		}
	}
	r = wb_run(c, &b);
	return err ? err : r;
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

/*
 * Write back and drop line @n if it is cached.  A pinned line is waited for
 * (pins are short: a copy, a fill); a line dirtied again between our
 * write-back and the drop is written back again.
 */
static int drop_line(struct gs_cache *c, uint64_t n)
{
	for (;;) {
		pthread_mutex_t *m = cache_bucket_lock(c, n);
		struct gs_line *l;
		bool inserted;
		uint32_t zero = 0;
		int r;

		l = cache_insert(c, NULL, n, &inserted);	/* pinned, if present */
		if (!l)
			return 0;
		if ((__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) & LS_MASK) == LS_BUSY)
			cache_wait_fill(l);
		r = cache_writeback(c, l);
		cache_unpin(l);
		if (r < 0) {
			cache_record_error(c, n, r);
			return r;
		}
		pthread_mutex_lock(m);
		if (cache_find_locked(c, n) != l) {
			pthread_mutex_unlock(m);
			continue;	/* gone (failed fill, eviction) or replaced */
		}
		if (!__atomic_compare_exchange_n(&l->ref, &zero, REF_EVICT, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			pthread_mutex_unlock(m);
			sched_yield();	/* someone holds a pin: let them finish */
			continue;
		}
		if ((__atomic_load_n(&l->ds, __ATOMIC_RELAXED) & DS_DIRTY) ||
		    (__atomic_load_n(&l->state, __ATOMIC_RELAXED) & LS_MASK) == LS_BUSY) {
			cache_release_frozen(l);
			pthread_mutex_unlock(m);
			continue;
		}
		cache_unhash_locked(c, l, n);
		__atomic_store_n(&l->tag, LINE_NONE, __ATOMIC_RELAXED);
		__atomic_store_n(&l->state, LS_INVALID, __ATOMIC_RELAXED);
		__atomic_store_n(&l->refbit, 0, __ATOMIC_RELAXED);
		cache_release_frozen(l);
		pthread_mutex_unlock(m);
		return 0;
	}
}

int gs_cache_drop_range(struct gs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t first, last;
	int err = 0, r;

	if (!len)
		return 0;
	line_range(c, off, len, &first, &last);
	if (last - first < c->nlines) {
		for (uint64_t n = first;; n++) {
			r = drop_line(c, n);
			if (r && !err)
				err = r;
			if (n == last)
				break;
		}
		return err;
	}
	for (uint32_t i = 0; i < c->nlines; i++) {
		uint64_t t = __atomic_load_n(&c->lines[i].tag, __ATOMIC_RELAXED);

		/* a line filled after the walk passed it read the device after
		 * the call began: it is no copy from before */
		if (t != LINE_NONE && t >= first && t <= last) {
			r = drop_line(c, t);
			if (r && !err)
				err = r;
		}
	}
	return err;
}
