// SPDX-License-Identifier: MIT
/*
 * Sequential stream detection for the daemon's read-ahead (see stream.h).
 *
 * A small table, one slot per stream, replaced least recently used: a
 * reader that starts elsewhere in a file takes a new slot, so two readers
 * of one file at different places are two streams.  One mutex: a note is a
 * few compares, far below the cost of the request it comes with.
 */
#include <pthread.h>
#include <stdlib.h>

#include "stream.h"

#define NSLOTS		32
#define TOL_REQS	4	/* the kernel's read-ahead has about this many in flight */
#define MIN_SEQ		4	/* adjacent reads before a slot is a stream: more than
				 * the requests of one mmap fault's read-around */
#define MAX_MISS	16	/* reads of its file elsewhere before a stream ends */

struct slot {
	uint64_t ino;		/* 0: free */
	uint64_t next;		/* furthest end read */
	uint64_t ra_end;	/* read ahead up to here */
	uint64_t used;		/* LRU stamp */
	unsigned seq;		/* reads that continued it */
	unsigned miss;		/* reads of the same file elsewhere since then */
	uint64_t win;		/* its read-ahead window now: grows to the table's */
};

struct gs_streams {
	pthread_mutex_t lock;
	uint64_t window, clock;
	struct slot slot[NSLOTS];
};

struct gs_streams *gs_streams_new(uint64_t window)
{
	struct gs_streams *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->window = window;
	return s;
}

void gs_streams_free(struct gs_streams *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

uint64_t gs_streams_window(const struct gs_streams *s)
{
	return s ? s->window : 0;
}

/*
 * Does a read of @len at @off continue @sl?  Until a slot is a stream, only
 * a read that starts exactly where its furthest read ended does: random
 * readers (even of 1 MiB at aligned offsets) seldom hit that twice in a
 * row.  A stream then also takes reads a few requests behind or ahead of
 * its furthest end: the kernel's read-ahead requests arrive out of order,
 * and several readers of one file move together.
 */
static int continues(const struct slot *sl, uint64_t ino, uint64_t off, uint64_t len)
{
	uint64_t tol = sl->seq >= MIN_SEQ ? len * TOL_REQS : 0;

	if (sl->ino != ino)
		return 0;
	if (off >= sl->next)
		return off - sl->next <= tol;
	return sl->next - off <= tol;
}

int gs_streams_note(struct gs_streams *s, uint64_t ino, uint64_t off, uint64_t len,
		    uint64_t *ra_off, uint64_t *ra_len)
{
	struct slot *sl = NULL, *old = NULL;
	uint64_t end = off + len, want;

	*ra_off = *ra_len = 0;
	if (!s || !s->window || !len || end < off || !ino)
		return 0;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < NSLOTS; i++) {
		struct slot *c = &s->slot[i];

		if (!sl && continues(c, ino, off, len)) {
			sl = c;
			continue;
		}
		/* a random reader's reads sometimes land next to a slot; a
		 * stream is continued far more often than its file is read
		 * elsewhere, so one that is not stops being one */
		if (c->ino == ino && ++c->miss > MAX_MISS)
			c->seq = 0;
		if (!old || c->used < old->used)
			old = c;
	}
	if (!sl) {
		*old = (struct slot){ .ino = ino, .next = end, .ra_end = 0 };
		old->used = ++s->clock;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	sl->used = ++s->clock;
	sl->miss = 0;
	if (end > sl->next)
		sl->next = end;
	if (sl->seq < ~0u)
		sl->seq++;
	if (sl->seq < MIN_SEQ) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	/* the window starts at a few requests and doubles with each read that
	 * continues the stream (what a mistaken stream costs stays small) */
	if (sl->seq == MIN_SEQ || !sl->win)
		sl->win = len * TOL_REQS;
	else
		sl->win *= 2;
	if (sl->win > s->window)
		sl->win = s->window;
	/* keep a window ahead of the furthest end; refill when half of it is
	 * used, so the cache gets large batches, not one line per request */
	want = sl->next + sl->win;
	if (sl->ra_end < off)
		sl->ra_end = off;	/* fell behind (or just started): from here */
	if (want <= sl->ra_end)
		goto out;
	if (want - sl->ra_end >= sl->win / 2 || sl->ra_end < end) {
		*ra_off = sl->ra_end;
		*ra_len = want - sl->ra_end;
		sl->ra_end = want;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return 1;
}
