// SPDX-License-Identifier: MIT
/*
 * N-D spaces: the per-space block cache.
 *
 * Entries hold whole building blocks (block_stride bytes, aligned for
 * O_DIRECT) and are found by block id.  Replacement is clock (second chance)
 * over unpinned, idle entries.  A miss claims an entry, marks it E_READING
 * and pins it; nd_cache_pin() claims a whole window of misses under the lock
 * and then, outside it, looks their slots up and submits every read at once.
 * Completions (store threads) take only c.mu, set E_VALID or the error and
 * broadcast c.cv.
 *
 * Writes dirty entries in place (E_DIRTY, dgen++).  Write-back marks a batch
 * E_WRITING (pinned, so never evicted), allocates slots for blocks written
 * the first time, writes all blocks at once, then records the new slots in
 * the index after a store commit (nd_index.c: an entry never reaches the
 * device before its block and slot allocation); only then is an entry clean (if no write dirtied it meanwhile:
 * dgen unchanged) and evictable.  So a block's index entry exists before its
 * cache entry can disappear.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gs_log.h"
#include "nd_internal.h"

#define FREE_BID	UINT64_MAX

static inline uint64_t hslot(const struct nd_cache *c, uint64_t bid)
{
	return (bid * 0x9e3779b97f4a7c15ULL >> 17) & c->hmask;
}

static struct nd_ent *find(struct nd_cache *c, uint64_t bid)
{
	for (struct nd_ent *e = c->hash[hslot(c, bid)]; e; e = e->hnext)
		if (e->bid == bid)
			return e;
	return NULL;
}

static void unhash(struct nd_cache *c, struct nd_ent *e)
{
	struct nd_ent **pp = &c->hash[hslot(c, e->bid)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->hnext = NULL;
	e->bid = FREE_BID;
	e->flags = 0;
}

static void hash_add(struct nd_cache *c, struct nd_ent *e, uint64_t bid)
{
	uint64_t h = hslot(c, bid);

	e->bid = bid;
	e->hnext = c->hash[h];
	c->hash[h] = e;
}

int nd_cache_init(struct gs_nd *nd, size_t bytes)
{
	struct nd_cache *c = &nd->c;
	uint64_t n = bytes / nd->st->stride, h = 1;

	if (n > nd->L.nblocks)
		n = nd->L.nblocks;	/* more entries than blocks help nobody */
	if (n < 4)
		n = 4;
	if (n > (1u << 20))
		n = 1u << 20;
	while (h < 2 * n)
		h <<= 1;
	memset(c, 0, sizeof(*c));
	c->ents = calloc(n, sizeof(*c->ents));
	c->hash = calloc(h, sizeof(*c->hash));
	if (!c->ents || !c->hash) {
		free(c->ents);
		free(c->hash);
		return -ENOMEM;
	}
	c->nents = n;
	c->hmask = h - 1;
	for (uint32_t i = 0; i < n; i++)
		c->ents[i].bid = FREE_BID;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	pthread_cond_init(&c->fcv, NULL);
	return 0;
}

void nd_cache_fini(struct gs_nd *nd)
{
	struct nd_cache *c = &nd->c;

	pthread_mutex_lock(&c->mu);
	c->flusher_stop = true;
	pthread_cond_signal(&c->fcv);
	pthread_mutex_unlock(&c->mu);
	if (c->flusher_on)
		pthread_join(c->flusher, NULL);
	pthread_cond_destroy(&c->fcv);

	for (uint32_t i = 0; i < c->nents; i++)
		free(c->ents[i].buf);
	free(c->ents);
	free(c->hash);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

uint32_t nd_cache_window(struct gs_nd *nd)
{
	return nd->c.nents / 2 ? nd->c.nents / 2 : 1;
}

/* Clock: a free entry, or an idle clean one that was not referenced lately.
 * *dirty tells whether idle dirty entries were passed over. */
static struct nd_ent *victim(struct nd_cache *c, bool *dirty)
{
	*dirty = false;
	for (uint32_t scan = 0; scan < 2 * c->nents; scan++) {
		struct nd_ent *e = &c->ents[c->hand];

		c->hand = c->hand + 1 == c->nents ? 0 : c->hand + 1;
		if (e->bid == FREE_BID)
			return e;
		if (e->pins || (e->flags & (E_READING | E_WRITING)))
			continue;
		if (e->ref) {
			e->ref = false;
			continue;
		}
		if (e->flags & E_DIRTY) {
			*dirty = true;
			continue;
		}
		unhash(c, e);
		return e;
	}
	return NULL;
}

static void read_done(struct nd_bio *b, int res)
{
	struct nd_ent *e = b->priv;
	struct nd_cache *c = &e->nd->c;

	pthread_mutex_lock(&c->mu);
	e->flags &= ~E_READING;
	if (res < 0)
		e->err = res;
	else
		e->flags |= E_VALID;
	c->reads++;
	/* waiters re-check their entry's flags under c->mu */
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* A claimed entry's data is final without I/O (zeros, or failure). */
static void fill_done(struct gs_nd *nd, struct nd_ent *e, int err)
{
	pthread_mutex_lock(&nd->c.mu);
	e->flags &= ~E_READING;
	if (err)
		e->err = err;
	else
		e->flags |= E_VALID;
	pthread_cond_broadcast(&nd->c.cv);
	pthread_mutex_unlock(&nd->c.mu);
}

static int ent_buf(struct gs_nd *nd, struct nd_ent *e)
{
	if (!e->buf && posix_memalign(&e->buf, nd->st->align, nd->st->stride))
		e->buf = NULL;
	return e->buf ? 0 : -ENOMEM;
}

static int wb_some(struct gs_nd *nd, unsigned max, bool idle_only);

/* Does block @bid stick out of the space (padding that must read as zero)? */
static bool edge_block(const struct nd_layout *L, uint64_t bid)
{
	uint64_t bc[ND_MAXD];

	nd_bcoord(L, bid, bc);
	for (uint32_t i = 0; i < L->ndims; i++)
		if ((bc[i] + 1) * L->bb[i] > L->shape[i])
			return true;
	return false;
}

/*
 * Claim or pin the blocks of it[0..n); returns how many (a prefix).  Claimed
 * misses are filled outside the lock: zeroed (never written, or about to be
 * overwritten whole) or read, all reads in one submission.
 */
int nd_cache_pin(struct gs_nd *nd, struct nd_item *it, unsigned n, bool for_write)
{
	struct nd_cache *c = &nd->c;
	struct nd_ent **claimed;
	struct nd_bio **bios;
	bool *full;
	unsigned got = 0, nc = 0, nb = 0;
	int ret;

	claimed = malloc(n * sizeof(*claimed));
	bios = malloc(n * sizeof(*bios));
	full = malloc(n * sizeof(*full));
	if (!claimed || !bios || !full) {
		free(claimed);
		free(bios);
		free(full);
		return -ENOMEM;
	}
	pthread_mutex_lock(&c->mu);
	while (got < n) {
		struct nd_ent *e = find(c, it[got].bid);
		bool dirty;

		if (e) {
			e->pins++;
			e->ref = true;
			c->hits++;
			it[got++].e = e;
			continue;
		}
		e = victim(c, &dirty);
		if (!e) {
			if (got)
				break;	/* use what we have; our pins block others */
			if (dirty) {
				pthread_mutex_unlock(&c->mu);
				ret = wb_some(nd, nd_cache_window(nd), true);
				pthread_mutex_lock(&c->mu);
				if (ret < 0 && ret != -EAGAIN) {
					pthread_mutex_unlock(&c->mu);
					free(claimed);
					free(bios);
					free(full);
					return ret;
				}
				continue;
			}
			/* everything pinned or busy: wait for an unpin or completion */
			pthread_cond_wait(&c->cv, &c->mu);
			continue;
		}
		hash_add(c, e, it[got].bid);
		e->nd = nd;
		e->flags = E_READING;
		e->pins = 1;
		e->ref = true;
		e->err = 0;
		e->dgen = 0;
		e->slot = (for_write && it[got].full) ? 0 : ND_SLOT_UNKNOWN;
		c->misses++;
		claimed[nc++] = e;
		it[got++].e = e;
	}
	pthread_mutex_unlock(&c->mu);

	for (unsigned i = 0; i < nc; i++) {
		struct nd_ent *e = claimed[i];
		uint64_t slot1 = 0;

		ret = ent_buf(nd, e);
		full[i] = e->slot == 0;
		if (!ret && !full[i]) {
			ret = nd_index_lookup(nd, e->bid, &slot1);
			e->slot = slot1;
		} else if (!ret) {
			/* overwritten whole: the slot is looked up at write-back */
			e->slot = ND_SLOT_UNKNOWN;
		}
		if (ret || slot1 == 0) {
			/* a block overwritten whole needs zeros only in an edge's padding */
			if (!ret && (!full[i] || edge_block(&nd->L, e->bid)))
				memset(e->buf, 0, nd->st->stride);
			fill_done(nd, e, ret);
			continue;
		}
		e->bio = (struct nd_bio){ .op = GS_ND_OP_READ, .slot = slot1 - 1, .buf = e->buf,
					  .done = read_done, .priv = e };
		bios[nb++] = &e->bio;
	}
	if (nb) {
		ret = nd->st->ops->submit(nd->st, bios, nb);
		if (ret)
			for (unsigned i = 0; i < nb; i++)
				read_done(bios[i], ret);
	}
	free(claimed);
	free(bios);
	free(full);
	return got;
}

int nd_cache_wait(struct gs_nd *nd, struct nd_ent *e)
{
	struct nd_cache *c = &nd->c;
	int ret;

	pthread_mutex_lock(&c->mu);
	while (e->flags & E_READING)
		pthread_cond_wait(&c->cv, &c->mu);
	ret = (e->flags & E_VALID) ? 0 : (e->err ? e->err : -EIO);
	pthread_mutex_unlock(&c->mu);
	return ret;
}

static void *flusher_main(void *arg);

void nd_cache_unpin(struct gs_nd *nd, struct nd_ent *e, bool dirtied)
{
	struct nd_cache *c = &nd->c;

	pthread_mutex_lock(&c->mu);
	if (dirtied) {
		if (!(e->flags & E_DIRTY)) {
			e->flags |= E_DIRTY;
			c->ndirty++;
		}
		e->dgen++;
		/* a quarter dirty: write back in the background while writers go on */
		if (c->nents >= 16 && c->ndirty >= c->nents / 4 && !c->flush_kick &&
		    !c->flusher_stop) {
			if (!c->flusher_on)
				c->flusher_on = !pthread_create(&c->flusher, NULL, flusher_main,
								nd);
			c->flush_kick = true;
			pthread_cond_signal(&c->fcv);
		}
	}
	if (--e->pins == 0) {
		/* a failed read leaves nothing worth keeping */
		if (!(e->flags & E_VALID))
			unhash(c, e);
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

/* ---- write-back ---- */

struct nd_wb {
	int pending;
	int err;
};

static void write_done(struct nd_bio *b, int res)
{
	struct nd_ent *e = b->priv;
	struct nd_cache *c = &e->nd->c;

	pthread_mutex_lock(&c->mu);
	if (res < 0) {
		e->err = res;
		if (!e->wb->err)
			e->wb->err = res;
	}
	c->writes++;
	e->wb->pending--;
	/* the batch owner waits for pending == 0 under c->mu */
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/*
 * Write back @v[0..n), entries marked E_WRITING and pinned by us, with
 * @gen[i] their dgen when marked.  Slot numbers first, then all writes at
 * once (the store backs new slots), then the new slots go to the index's
 * deferred entries (written after a commit that makes the blocks and their
 * allocation durable: nd_index_flush), then the entries turn clean.
 */
static int wb_batch(struct gs_nd *nd, struct nd_ent **v, const uint64_t *gen, unsigned n)
{
	struct nd_cache *c = &nd->c;
	struct nd_wb wb = { 0 };
	struct nd_bio **bios;
	uint64_t first = 0, *fbid, *fslot;
	bool *fresh;
	unsigned nb = 0, nfresh = 0;
	int ret = 0;

	bios = malloc(n * sizeof(*bios));
	fresh = calloc(n, sizeof(*fresh));
	fbid = malloc(n * sizeof(*fbid));
	fslot = malloc(n * sizeof(*fslot));
	if (!bios || !fresh || !fbid || !fslot) {
		ret = -ENOMEM;
		goto unmark;
	}
	for (unsigned i = 0; i < n; i++) {
		struct nd_ent *e = v[i];

		e->err = 0;
		if (e->slot == ND_SLOT_UNKNOWN || e->slot == 0) {
			ret = nd_index_lookup(nd, e->bid, &e->slot);
			if (ret) {
				e->slot = ND_SLOT_UNKNOWN;
				goto unmark;
			}
		}
		if (e->slot == 0) {
			fresh[i] = true;
			nfresh++;
		}
	}
	/* blocks written the first time: their slots in one allocation */
	if (nfresh)
		first = nd_slots_new(nd, nfresh);
	nfresh = 0;
	for (unsigned i = 0; i < n; i++) {
		struct nd_ent *e = v[i];

		if (fresh[i]) {
			e->slot = ++first;	/* slot + 1 */
			fbid[nfresh] = e->bid;
			fslot[nfresh++] = e->slot - 1;
		}
		e->wb = &wb;
		e->bio = (struct nd_bio){ .op = GS_ND_OP_WRITE, .slot = e->slot - 1, .buf = e->buf,
					  .done = write_done, .priv = e };
		bios[nb++] = &e->bio;
	}
	wb.pending = nb;
	ret = nd->st->ops->submit(nd->st, bios, nb);
	if (ret) {
		wb.pending = 0;
		wb.err = ret;
	}
	pthread_mutex_lock(&c->mu);
	while (wb.pending)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	ret = wb.err;
	if (!ret && nfresh)
		ret = nd_index_defer(nd, fbid, fslot, nfresh);
unmark:
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < n; i++) {
		struct nd_ent *e = v[i];

		e->flags &= ~E_WRITING;
		e->wb = NULL;
		/* a new slot whose entry may not be written: look it up (and maybe
		 * allocate again, leaking this one) next time */
		if (ret && fresh && fresh[i])
			e->slot = ND_SLOT_UNKNOWN;
		if (!ret && e->dgen == gen[i]) {
			e->flags &= ~E_DIRTY;
			c->ndirty--;
		}
		e->pins--;
	}
	if (ret && !nd->wb_err)
		nd->wb_err = ret;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	free(bios);
	free(fresh);
	free(fbid);
	free(fslot);
	return ret;
}

/*
 * Write back up to @max dirty entries not already being written (only unpinned
 * ones with @idle_only: eviction wants entries it can take afterwards).
 * Returns the number written, -EAGAIN if none could be taken, or -errno.
 */
static int wb_some(struct gs_nd *nd, unsigned max, bool idle_only)
{
	struct nd_cache *c = &nd->c;
	struct nd_ent **v;
	uint64_t *gen;
	unsigned n = 0;
	int ret;

	v = malloc(max * sizeof(*v));
	gen = malloc(max * sizeof(*gen));
	if (!v || !gen) {
		free(v);
		free(gen);
		return -ENOMEM;
	}
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->nents && n < max; i++) {
		struct nd_ent *e = &c->ents[(c->hand + i) % c->nents];

		if (!(e->flags & E_DIRTY) || (e->flags & (E_WRITING | E_READING)))
			continue;
		if (idle_only && e->pins)
			continue;
		e->flags |= E_WRITING;
		e->pins++;
		gen[n] = e->dgen;
		v[n++] = e;
	}
	pthread_mutex_unlock(&c->mu);
	ret = n ? wb_batch(nd, v, gen, n) : -EAGAIN;
	free(v);
	free(gen);
	return ret ? ret : (int)n;
}

/* Write back idle dirty blocks, a half window at a time, down to 1/8 dirty. */
static void *flusher_main(void *arg)
{
	struct gs_nd *nd = arg;
	struct nd_cache *c = &nd->c;
	unsigned batch = nd_cache_window(nd) / 2 ? nd_cache_window(nd) / 2 : 1;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->flush_kick && !c->flusher_stop)
			pthread_cond_wait(&c->fcv, &c->mu);
		if (c->flusher_stop)
			break;
		while (c->ndirty > c->nents / 8 && !c->flusher_stop) {
			int ret;

			pthread_mutex_unlock(&c->mu);
			ret = wb_some(nd, batch, true);
			pthread_mutex_lock(&c->mu);
			if (ret < 0)
				break;	/* nothing idle, or an error (kept in wb_err) */
		}
		c->flush_kick = false;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int nd_cache_writeback(struct gs_nd *nd)
{
	struct nd_cache *c = &nd->c;
	int ret;

	for (;;) {
		pthread_mutex_lock(&c->mu);
		if (c->ndirty == 0) {
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
		pthread_mutex_unlock(&c->mu);
		ret = wb_some(nd, nd_cache_window(nd), false);
		if (ret == -EAGAIN) {
			/* the rest is being written by other threads */
			pthread_mutex_lock(&c->mu);
			if (c->ndirty)
				pthread_cond_wait(&c->cv, &c->mu);
			pthread_mutex_unlock(&c->mu);
			continue;
		}
		if (ret < 0)
			return ret;
	}
}

void nd_cache_drop(struct gs_nd *nd)
{
	struct nd_cache *c = &nd->c;

	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->nents; i++) {
		struct nd_ent *e = &c->ents[i];

		if (e->bid != FREE_BID && !e->pins && !(e->flags & (E_DIRTY | E_WRITING)))
			unhash(c, e);
	}
	pthread_mutex_unlock(&c->mu);
}
