// SPDX-License-Identifier: MIT
/*
 * Byte ranges through the cache (gs_cache_read/write) and read-ahead:
 * explicit hints and sequential detection, both asynchronous through the
 * queue's callback interface so the caller never waits for them.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "cache_internal.h"

#define RA_BATCH	32	/* read-ahead ios per submit */

ssize_t gs_cache_read(struct gs_cache *c, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	if (len > SSIZE_MAX)
		return -EINVAL;
	if (c->capacity) {
		if (off >= c->capacity)
			return 0;
		if (len > c->capacity - off)
			len = c->capacity - off;
	}
	if (!len)
		return 0;
	if (c->readahead) {
		uint64_t first = off >> c->line_shift, last = (off + len - 1) >> c->line_shift;
		uint64_t prev = __atomic_exchange_n(&c->seq_last, last, __ATOMIC_RELAXED);

		/* sequential: this read starts where the last one ended and
		 * enters a new line; the window slides one line at a time */
		if (last != prev && (first == prev || first == prev + 1))
			gs_cache_readahead(c, line_off(c, last + 1),
					   (uint64_t)c->readahead << c->line_shift);
	}
	while (done < len) {
		uint64_t pos = off + done;
		size_t lo = pos & (c->line_size - 1);
		size_t chunk = c->line_size - lo;
		struct gs_line *l;
		void *data;
		int r;

		if (chunk > len - done)
			chunk = len - done;
		r = gs_cache_get(c, pos, 0, &l, &data);
		if (r < 0)
			return r;
		memcpy((char *)buf + done, (char *)data + lo, chunk);
		gs_cache_put(c, l);
		done += chunk;
	}
	return (ssize_t)done;
}

ssize_t gs_cache_write(struct gs_cache *c, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	if (len > SSIZE_MAX)
		return -EINVAL;
	if (c->capacity) {
		if (off >= c->capacity)
			return len ? -ENOSPC : 0;
		if (len > c->capacity - off)
			len = c->capacity - off;
	}
	while (done < len) {
		uint64_t pos = off + done;
		size_t lo = pos & (c->line_size - 1);
		size_t chunk = c->line_size - lo;
		unsigned int flags = 0;
		struct gs_line *l;
		void *data;
		int r;

		if (chunk > len - done)
			chunk = len - done;
		/* the whole line (as far as the device goes) is overwritten */
		if (!lo && chunk >= cache_io_len(c, pos >> c->line_shift))
			flags = GS_CACHE_NOREAD;
		r = gs_cache_get(c, pos, flags, &l, &data);
		if (r < 0)
			return r;
		memcpy((char *)data + lo, (const char *)buf + done, chunk);
		gs_cache_dirty_range(c, l, (uint32_t)lo, (uint32_t)chunk);
		gs_cache_put(c, l);
		done += chunk;
	}
	return (ssize_t)done;
}

/* ---- read-ahead ---- */

/* A read-ahead line's fill ended; drops the pin the I/O held. */
static void ra_end(struct gs_cache *c, struct gs_line *l, int err)
{
	CACHE_STAT(c, reads);
	if (err)
		CACHE_STAT(c, errors);
	else
		CACHE_STAT(c, readahead);
	cache_fill_done(c, l, err);
	cache_unpin(l);
	/* release: last touch of c; gs_cache_destroy() waits for zero */
	__atomic_fetch_sub(&c->ra_inflight, 1, __ATOMIC_RELEASE);
}

/* Completion callback, on a poller thread. */
static void ra_done(struct gs_q_io *io, int64_t res)
{
	struct gs_line *l = (struct gs_line *)((char *)io - offsetof(struct gs_line, io));
	int err = res == (int64_t)io->len ? 0 : res < 0 ? (int)res : -EIO;

	ra_end(io->priv, l, err);
}

static void ra_submit(struct gs_cache *c, struct gs_q_io **ios, unsigned int n)
{
	int r = c->ops->submit(c->dev, ios, n);

	if (r >= 0)
		return;
	/* nothing was queued: fail the lines so their waiters do not hang */
	for (unsigned int i = 0; i < n; i++)
		ra_end(c, (struct gs_line *)((char *)ios[i] - offsetof(struct gs_line, io)), r);
}

void gs_cache_readahead(struct gs_cache *c, uint64_t off, uint64_t len)
{
	uint64_t first, last, max = c->nlines / 4 ? c->nlines / 4 : 1;
	struct gs_q_io *ios[RA_BATCH];
	unsigned int k = 0;

	if (!c->ops->submit || !len)
		return;
	if (c->capacity) {
		if (off >= c->capacity)
			return;
		if (len > c->capacity - off)
			len = c->capacity - off;
	}
	first = off >> c->line_shift;
	last = (off + len - 1) >> c->line_shift;
	/* never let read-ahead take over the cache */
	if (last - first >= max)
		last = first + max - 1;
	for (uint64_t n = first; n <= last; n++) {
		struct gs_line *l, *v;
		bool inserted;
		uint32_t ilen;

		l = cache_peek(c, n);
		if (!l)
			l = cache_insert(c, NULL, n, &inserted);
		if (l) {
			cache_unpin(l);
			continue;
		}
		/* clean victims only: the caller must not wait for a write-back */
		if (cache_evict(c, true, &v))
			break;
		l = cache_insert(c, v, n, &inserted);
		if (!inserted) {
			cache_unpin(l);
			continue;
		}
		/* l is BUSY and pinned once: that pin belongs to the I/O */
		ilen = cache_io_len(c, n);
		if (ilen < c->line_size)
			memset((char *)l->data + ilen, 0, c->line_size - ilen);
		l->io = (struct gs_q_io){
			.op = GS_OP_READ, .len = ilen, .off = line_off(c, n), .buf = l->data,
			.done = ra_done, .priv = c,
		};
		__atomic_fetch_add(&c->ra_inflight, 1, __ATOMIC_RELAXED);
		ios[k++] = &l->io;
		if (k == RA_BATCH) {
			ra_submit(c, ios, k);
			k = 0;
		}
	}
	if (k)
		ra_submit(c, ios, k);
}

void cache_ra_wait(struct gs_cache *c)
{
	/* acquire: pairs with ra_end()'s release, the callbacks are done with c */
	while (__atomic_load_n(&c->ra_inflight, __ATOMIC_ACQUIRE))
		usleep(100);
}
