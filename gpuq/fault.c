// SPDX-License-Identifier: MIT
/*
 * The "fault" backend: wraps another backend ("uring" unless the queue was
 * opened with backend "fault:NAME") and injects failures for tests.  The
 * spec language is in gstore_q.h and gs_q_fault(3).
 *
 * Every bio handed to the inner backend is a proxy, so a torn write can be
 * submitted shorter than it is reported, and reads can be patched with the
 * simulated write cache.  Bios the wrapper answers itself (injected errors,
 * dropped or cached writes) wait in a per-queue stash until the next reap.
 *
 * The device model (model=IOPS:MBPS:LATUS) makes the device no faster than
 * a given one: each request takes max(1/IOPS, len/bandwidth) of the
 * device's time (one server, requests in arrival order: busy_until), and
 * completes LATUS after its service ends.  The inner backend does the real
 * I/O at once; its completion waits in the queue's `later` list until the
 * model's time, so a pool of N modelled members scales as N such devices.
 *
 * Power-cut mode keeps a volatile write cache of lba-sized blocks (shared
 * by all queues, under bd->lock): writes land there, reads see them, a
 * flush writes them to the device (synchronously, on the poller that got
 * the flush) before the device flush.  At the cut the cache is discarded
 * and the device keeps exactly what earlier flushes put there.  Queues
 * opened with the same power=ID (a pool's members: gpuq/pool.c) share a
 * power domain: one write count for powercut=N and one cut, so they lose
 * their caches together as the devices of one machine do.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpuq_internal.h"

#define WB_RUN_MAX	(1u << 20)	/* largest write-back I/O */

struct fspec {
	uint64_t fail_n, every_n;
	int fail_err, every_err;
	unsigned opmask;		/* bit per GS_OP_*: counted ops */
	uint64_t at;			/* crash point (writes) for tear/drop */
	uint32_t tear;			/* bytes a torn write keeps */
	int drop;
	uint64_t powercut;		/* 0: no write cache */
	uint64_t power_id;		/* power domain (0: its own) */
	int dead_err;			/* after the cut: fail writes/flushes (0: drop) */
	uint64_t m_iops, m_bps, m_lat_ns;	/* device model; 0: none */
};

/* A power domain: the queues with one power=ID (shared: atomics; list: power_lock). */
struct power {
	uint64_t id;
	unsigned refs;			/* power_lock */
	uint64_t nwrites;
	int dead;
	struct power *next;
};

static pthread_mutex_t power_lock = PTHREAD_MUTEX_INITIALIZER;
static struct power *powers;

/* The domain @id, created (count 0, power on) if no queue holds it; NULL: ENOMEM. */
static struct power *power_get(uint64_t id)
{
	struct power *pw;

	pthread_mutex_lock(&power_lock);
	for (pw = powers; pw && pw->id != id; pw = pw->next)
		;
	if (!pw) {
		pw = calloc(1, sizeof(*pw));
		if (pw) {
			pw->id = id;
			pw->next = powers;
			powers = pw;
		}
	}
	if (pw)
		pw->refs++;
	pthread_mutex_unlock(&power_lock);
	return pw;
}

static void power_put(struct power *pw)
{
	struct power **pp;

	if (!pw)
		return;
	pthread_mutex_lock(&power_lock);
	if (!--pw->refs) {
		for (pp = &powers; *pp != pw; pp = &(*pp)->next)
			;
		*pp = pw->next;
		free(pw);
	}
	pthread_mutex_unlock(&power_lock);
}

struct cblock {
	uint64_t blk;
	uint64_t gen;
	struct cblock *next;
	char data[];
};

struct gs_bdev {
	const struct gs_backend_ops *in;
	struct gs_bdev *ibd;
	struct gs_q_geom geom;
	pthread_mutex_t lock;
	struct fspec spec;
	uint64_t nio, nwrites;		/* counted I/Os, writes since the spec was set */
	int dead;			/* power was cut */
	struct power *pw;		/* its power domain, NULL: none */
	uint64_t busy_until;		/* model: when the device is free again (ns) */
	/* the volatile write cache: hash of lba blocks */
	struct cblock **hash;
	size_t nhash, nblocks;
	uint64_t gen;
	uint64_t dropped;		/* write-backs that dropped blocks (written under
					 * lock, read without: cache_dropped) */
};

struct proxy {
	struct gs_bio b;		/* first: the inner backend sees this */
	struct gs_bio *orig;		/* NULL: a write-back bio */
	uint32_t report;		/* bytes to report on success (torn writes) */
	uint64_t ready;			/* model: complete no earlier (ns; 0: at once) */
	uint64_t dropped;		/* a read: bd->dropped when it was issued */
	int err;			/* report this instead (torn write at a cut) */
};

struct stashed {
	struct gs_bio *b;
	int64_t res;
};

struct gs_bq {
	struct gs_bdev *bd;
	struct stashed *later;		/* model: done by the device, not yet by the model */
	uint64_t *later_at;
	unsigned nlater;
	struct gs_bq *iq;
	struct stashed *stash;
	unsigned nstash, cap;
	struct gs_bio **pend;		/* proxies the inner queue did not take yet */
	unsigned npend;
	struct gs_bio **idone;
	int64_t *ires;
	uint32_t depth;
	unsigned wb_left;		/* write-back bios still in flight */
	int wb_err;
};

/* ---- spec ---- */

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EROFS", EROFS }, { "ENOMEM", ENOMEM },
	{ "EINVAL", EINVAL }, { "EAGAIN", EAGAIN }, { "ETIMEDOUT", ETIMEDOUT },
	{ "ENODEV", ENODEV }, { "EBUSY", EBUSY },
};

static int parse_u64(const char *s, uint64_t *v, char **end)
{
	char *e;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	*v = strtoull(s, &e, 0);
	*end = e;
	return 0;
}

static int parse_err(const char *s, int *err)
{
	size_t i;
	char *e;
	long v;

	/* case-blind: "eio" reads better in a mount option */
	for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (!strcasecmp(s, errnames[i].name)) {
			*err = errnames[i].err;
			return 0;
		}
	v = strtol(s, &e, 10);
	if (*e || v <= 0 || v > 4095)
		return -EINVAL;
	*err = (int)v;
	return 0;
}

/* "N[:err]" */
static int parse_nerr(const char *v, uint64_t *n, int *err)
{
	char *e;

	if (parse_u64(v, n, &e) || !*n)
		return -EINVAL;
	*err = EIO;
	if (*e == ':')
		return parse_err(e + 1, err);
	return *e ? -EINVAL : 0;
}

static int parse_num(const char *v, uint64_t *n)
{
	char *e;

	if (parse_u64(v, n, &e) || *e)
		return -EINVAL;
	return 0;
}

static int parse_token(struct fspec *s, char *tok, uint32_t lba)
{
	char *v = strchr(tok, '=');
	uint64_t n;

	if (v)
		*v++ = 0;
	if (!strcmp(tok, "drop") && !v) {
		s->drop = 1;
		return 0;
	}
	if (!v)
		return -EINVAL;
	if (!strcmp(tok, "fail"))
		return parse_nerr(v, &s->fail_n, &s->fail_err);
	if (!strcmp(tok, "every"))
		return parse_nerr(v, &s->every_n, &s->every_err);
	if (!strcmp(tok, "op")) {
		if (!strcmp(v, "read"))
			s->opmask |= 1u << GS_OP_READ;
		else if (!strcmp(v, "write"))
			s->opmask |= 1u << GS_OP_WRITE;
		else if (!strcmp(v, "flush"))
			s->opmask |= 1u << GS_OP_FLUSH;
		else if (!strcmp(v, "all"))
			s->opmask |= (1u << GS_OP_NR) - 1;
		else
			return -EINVAL;
		return 0;
	}
	if (!strcmp(tok, "dead")) {
		s->dead_err = 0;
		return strcmp(v, "drop") ? parse_err(v, &s->dead_err) : 0;
	}
	if (!strcmp(tok, "at"))
		return parse_num(v, &s->at);
	if (!strcmp(tok, "model")) {
		/* IOPS:MBPS:LATUS (MB = 10^6 bytes) */
		unsigned long long iops, mbps, lat;
		char tail;

		if (sscanf(v, "%llu:%llu:%llu%c", &iops, &mbps, &lat, &tail) != 3 || !iops || !mbps)
			return -EINVAL;
		s->m_iops = iops;
		s->m_bps = mbps * 1000000ull;
		s->m_lat_ns = lat * 1000ull;
		return 0;
	}
	if (!strcmp(tok, "powercut"))
		return parse_num(v, &s->powercut) || !s->powercut ? -EINVAL : 0;
	if (!strcmp(tok, "power"))
		return parse_num(v, &s->power_id) || !s->power_id ? -EINVAL : 0;
	if (!strcmp(tok, "tear")) {
		if (parse_num(v, &n) || n % lba || n > UINT32_MAX)
			return -EINVAL;
		s->tear = (uint32_t)n;
		/* tear=0 keeps nothing: that is drop */
		if (!n)
			s->drop = 1;
		return 0;
	}
	return -EINVAL;
}

static int parse_spec(struct fspec *s, const char *spec, uint32_t lba)
{
	char *buf = strdup(spec), *save = NULL, *tok;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	for (tok = strtok_r(buf, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save))
		ret = parse_token(s, tok, lba);
	if (!s->opmask)
		s->opmask = (1u << GS_OP_NR) - 1;
	free(buf);
	return ret;
}

int gs_fault_set(struct gs_bdev *bd, const char *spec)
{
	struct power *pw = NULL, *old;
	struct fspec s;
	int ret = parse_spec(&s, spec, bd->geom.lba_size);

	if (ret)
		return ret;
	if (s.power_id && !(pw = power_get(s.power_id)))
		return -ENOMEM;
	pthread_mutex_lock(&bd->lock);
	bd->spec = s;
	bd->nio = 0;
	bd->nwrites = 0;
	bd->dead = 0;
	old = bd->pw;
	bd->pw = pw;
	pthread_mutex_unlock(&bd->lock);
	power_put(old);
	return 0;
}

/* ---- the volatile write cache (bd->lock held) ---- */

static struct cblock **cache_slot(struct gs_bdev *bd, uint64_t blk)
{
	struct cblock **pp = &bd->hash[(blk * 0x9e3779b97f4a7c15ull) >> 40 & (bd->nhash - 1)];

	while (*pp && (*pp)->blk != blk)
		pp = &(*pp)->next;
	return pp;
}

static int cache_grow(struct gs_bdev *bd)
{
	size_t n = bd->nhash ? bd->nhash * 2 : 1024, i;
	struct cblock **old = bd->hash, **nh = calloc(n, sizeof(*nh));
	size_t on = bd->nhash;

	if (!nh)
		return -ENOMEM;
	bd->hash = nh;
	bd->nhash = n;
	for (i = 0; i < on; i++) {
		struct cblock *c = old[i], *next;

		for (; c; c = next) {
			struct cblock **pp = cache_slot(bd, c->blk);

			next = c->next;
			c->next = NULL;
			*pp = c;
		}
	}
	free(old);
	return 0;
}

static int cache_put(struct gs_bdev *bd, const struct gs_bio *b)
{
	uint32_t lba = bd->geom.lba_size, i;

	if (b->off % lba || b->len % lba)
		return -EINVAL;
	bd->gen++;
	for (i = 0; i < b->len / lba; i++) {
		uint64_t blk = b->off / lba + i;
		struct cblock **pp, *c;

		if (bd->nblocks >= bd->nhash && cache_grow(bd))
			return -ENOMEM;
		pp = cache_slot(bd, blk);
		c = *pp;
		if (!c) {
			c = malloc(sizeof(*c) + lba);
			if (!c)
				return -ENOMEM;
			c->blk = blk;
			c->next = NULL;
			*pp = c;
			bd->nblocks++;
		}
		c->gen = bd->gen;
		memcpy(c->data, (char *)b->buf + (size_t)i * lba, lba);
	}
	return 0;
}

static void cache_discard(struct gs_bdev *bd)
{
	size_t i;

	for (i = 0; i < bd->nhash; i++)
		while (bd->hash[i]) {
			struct cblock *c = bd->hash[i];

			bd->hash[i] = c->next;
			free(c);
		}
	bd->nblocks = 0;
}

/* A snapshot for cache_overlay(), which compares it under the lock: no lock
 * on every read's way in. */
static uint64_t cache_dropped(struct gs_bdev *bd)
{
	return __atomic_load_n(&bd->dropped, __ATOMIC_ACQUIRE);
}

/*
 * Patch a completed read with cached blocks.  -EAGAIN (nothing patched): a
 * write-back dropped blocks since the read was issued (@dropped, from
 * cache_dropped() before it): the device read may have come before the
 * write-back's writes and the blocks are no longer here to patch it, so a
 * device with a coherent cache would have returned newer data.  Read again.
 */
static int cache_overlay(struct gs_bdev *bd, struct gs_bio *b, uint64_t bytes, uint64_t dropped)
{
	uint32_t lba = bd->geom.lba_size;
	uint64_t first = b->off / lba, last = (b->off + bytes + lba - 1) / lba, blk;

	pthread_mutex_lock(&bd->lock);
	if (bd->dropped != dropped) {
		pthread_mutex_unlock(&bd->lock);
		return -EAGAIN;
	}
	for (blk = first; bd->nblocks && blk < last; blk++) {
		struct cblock *c = *cache_slot(bd, blk);
		uint64_t s = blk * lba, e = s + lba;

		if (!c)
			continue;
		if (s < b->off)
			s = b->off;
		if (e > b->off + bytes)
			e = b->off + bytes;
		memcpy((char *)b->buf + (s - b->off), c->data + (s - blk * lba), e - s);
	}
	pthread_mutex_unlock(&bd->lock);
	return 0;
}

/*
 * A read of the device, then the cache over it, coherent with write-backs
 * (cache_overlay()): @res is the device read's result, issued when
 * bd->dropped was @dropped; re-read on the caller's thread until no
 * write-back dropped blocks in between.  Returns the read's result.
 */
static int64_t read_coherent(struct gs_bdev *bd, struct gs_bio *b, int64_t res, uint64_t dropped)
{
	while (res > 0 && cache_overlay(bd, b, (uint64_t)res, dropped) == -EAGAIN) {
		if (!bd->in->read_sync)
			return -EIO;	/* no way to read again: never stale data */
		dropped = cache_dropped(bd);
		res = bd->in->read_sync(bd->ibd, b->buf, b->len, b->off);
	}
	return res;
}

static int cmp_cblock(const void *a, const void *b)
{
	uint64_t x = (*(struct cblock *const *)a)->blk, y = (*(struct cblock *const *)b)->blk;

	return x < y ? -1 : x > y;
}

/* ---- stash and pending ---- */

static void stash(struct gs_bq *q, struct gs_bio *b, int64_t res)
{
	q->stash[q->nstash].b = b;
	q->stash[q->nstash].res = res;
	q->nstash++;
}

static void absorb(struct gs_bq *q, struct gs_bio *ib, int64_t res)
{
	struct proxy *px = (struct proxy *)ib;
	struct gs_bio *b = px->orig;

	if (!b) {
		if (res < 0 && !q->wb_err)
			q->wb_err = (int)res;
		q->wb_left--;
		return;
	}
	if (res > 0 && b->op == GS_OP_READ)
		res = read_coherent(q->bd, b, res, px->dropped);
	if (res >= 0 && b->op == GS_OP_WRITE)
		res = px->err ? (int64_t)px->err : (int64_t)px->report;
	if (px->ready && px->ready > gs_now_ns()) {
		q->later[q->nlater].b = b;
		q->later[q->nlater].res = res;
		q->later_at[q->nlater++] = px->ready;
		free(px);
		return;
	}
	free(px);
	stash(q, b, res);
}

/* Move what the model says is done to the stash; returns the next deadline (0: none). */
static uint64_t later_reap(struct gs_bq *q)
{
	uint64_t now = q->nlater ? gs_now_ns() : 0, next = 0;
	unsigned i = 0;

	while (i < q->nlater) {
		if (q->later_at[i] <= now) {
			stash(q, q->later[i].b, q->later[i].res);
			q->nlater--;
			q->later[i] = q->later[q->nlater];
			q->later_at[i] = q->later_at[q->nlater];
			continue;
		}
		if (!next || q->later_at[i] < next)
			next = q->later_at[i];
		i++;
	}
	return next;
}

/* Model: when a request of @len bytes issued now completes (bd->lock held). */
static uint64_t model_ready(struct gs_bdev *bd, uint64_t len)
{
	struct fspec *s = &bd->spec;
	uint64_t now = gs_now_ns(), svc = 1000000000ull / s->m_iops;
	uint64_t bw = len * 1000000000ull / s->m_bps;

	if (bw > svc)
		svc = bw;
	if (bd->busy_until < now)
		bd->busy_until = now;
	bd->busy_until += svc;
	return bd->busy_until + s->m_lat_ns;
}

static void push_pending(struct gs_bq *q)
{
	int k;

	if (!q->npend)
		return;
	k = q->bd->in->submit(q->iq, q->pend, q->npend);
	if (k < 0) {
		unsigned i;

		for (i = 0; i < q->npend; i++)
			absorb(q, q->pend[i], k);
		q->npend = 0;
		return;
	}
	memmove(q->pend, q->pend + k, (q->npend - k) * sizeof(q->pend[0]));
	q->npend -= k;
}

static void inner_reap(struct gs_bq *q)
{
	int k = q->bd->in->reap(q->iq, q->idone, q->ires, q->depth), i;

	for (i = 0; i < k; i++)
		absorb(q, q->idone[i], q->ires[i]);
}

/* Write the cache to the device; waits here, on the poller.  0 or -errno. */
static int writeback(struct gs_bq *q)
{
	struct gs_bdev *bd = q->bd;
	uint32_t lba = bd->geom.lba_size;
	struct cblock **v = NULL;
	struct proxy *px = NULL;
	uint64_t *gens = NULL;
	size_t n = 0, i, j, nrun = 0;
	int ret = 0;

	pthread_mutex_lock(&bd->lock);
	if (bd->nblocks) {
		v = malloc(bd->nblocks * sizeof(*v));
		gens = malloc(bd->nblocks * sizeof(*gens));
		px = calloc(bd->nblocks, sizeof(*px));
	}
	if (bd->nblocks && (!v || !gens || !px)) {
		ret = -ENOMEM;
		goto unlock;
	}
	for (i = 0; i < bd->nhash; i++) {
		struct cblock *c;

		for (c = bd->hash[i]; c; c = c->next)
			v[n++] = c;
	}
	qsort(v, n, sizeof(*v), cmp_cblock);
	/* coalesce contiguous blocks into runs; copy under the lock */
	for (i = 0; i < n; i = j) {
		struct proxy *r = &px[nrun];
		char *buf;

		for (j = i + 1; j < n && v[j]->blk == v[j - 1]->blk + 1 &&
		     (j - i + 1) * lba <= WB_RUN_MAX; j++)
			;
		buf = aligned_alloc(4096, ((j - i) * lba + 4095) & ~(size_t)4095);
		if (!buf) {
			ret = -ENOMEM;
			break;
		}
		r->b.op = GS_OP_WRITE;
		r->b.off = v[i]->blk * lba;
		r->b.len = (uint32_t)((j - i) * lba);
		r->b.buf = buf;
		r->b.buf_index = -1;
		for (; i < j; i++) {
			memcpy(buf + (size_t)(r->b.len - (j - i) * lba), v[i]->data, lba);
			gens[i] = v[i]->gen;
		}
		nrun++;
	}
unlock:
	pthread_mutex_unlock(&bd->lock);

	/* write the runs through the inner queue, a depth's worth at a time */
	q->wb_err = 0;
	for (i = 0; !ret && i < nrun;) {
		struct gs_bio *bs[64];
		unsigned k = 0;
		int acc;

		while (k < 64 && i + k < nrun && q->wb_left + k < q->depth / 2 + 1) {
			bs[k] = &px[i + k].b;
			k++;
		}
		if (k) {
			acc = bd->in->submit(q->iq, bs, k);
			if (acc < 0) {
				ret = acc;
				break;
			}
			q->wb_left += acc;
			i += acc;
		}
		inner_reap(q);
		if (q->wb_left >= q->depth / 2 + 1)
			bd->in->wait(q->iq, 1000);
	}
	while (q->wb_left) {
		inner_reap(q);
		if (q->wb_left)
			bd->in->wait(q->iq, 1000);
	}
	if (!ret)
		ret = q->wb_err;

	/* drop what was written, unless rewritten meanwhile; reads issued before
	 * this look again (cache_overlay) */
	pthread_mutex_lock(&bd->lock);
	if (!ret && n)
		__atomic_store_n(&bd->dropped, bd->dropped + 1, __ATOMIC_RELEASE);
	for (i = 0; !ret && i < n; i++) {
		struct cblock **pp = cache_slot(bd, v[i]->blk), *c = *pp;

		if (c && c == v[i] && c->gen == gens[i]) {
			*pp = c->next;
			free(c);
			bd->nblocks--;
		}
	}
	pthread_mutex_unlock(&bd->lock);
	for (i = 0; i < nrun; i++)
		free(px[i].b.buf);
	free(px);
	free(gens);
	free(v);
	return ret;
}

/* ---- ops ---- */

static int fault_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	const char *name = gs_backend_name(p);
	struct gs_q_params ip = *p;
	struct gs_bdev *bd;
	int ret;

	if (!strncmp(name, "fault", 5))
		name = name[5] == ':' && name[6] ? name + 6 : "uring";
	bd = calloc(1, sizeof(*bd));
	if (!bd)
		return -ENOMEM;
	bd->in = gs_backend_find(name);
	if (!bd->in || bd->in == &gs_backend_fault) {
		ret = -ENODEV;
		goto free_bd;
	}
	ip.backend = name;
	ret = bd->in->open(&bd->ibd, &ip);
	if (ret)
		goto free_bd;
	ret = bd->in->geometry(bd->ibd, &bd->geom);
	if (ret)
		goto close_in;
	pthread_mutex_init(&bd->lock, NULL);
	ret = gs_fault_set(bd, p->fault ? p->fault : "");
	if (ret)
		goto destroy_lock;
	*bdp = bd;
	return 0;
destroy_lock:
	pthread_mutex_destroy(&bd->lock);
close_in:
	bd->in->close(bd->ibd);
free_bd:
	free(bd);
	return ret;
}

static void fault_close(struct gs_bdev *bd)
{
	power_put(bd->pw);
	cache_discard(bd);
	free(bd->hash);
	pthread_mutex_destroy(&bd->lock);
	bd->in->close(bd->ibd);
	free(bd);
}

static int fault_geometry(struct gs_bdev *bd, struct gs_q_geom *g)
{
	*g = bd->geom;
	return 0;
}

static int fault_register_buffer(struct gs_bdev *bd, void *addr, size_t len)
{
	return bd->in->register_buffer ? bd->in->register_buffer(bd->ibd, addr, len) : -1;
}

static void fault_unregister_buffer(struct gs_bdev *bd, int index)
{
	if (bd->in->unregister_buffer)
		bd->in->unregister_buffer(bd->ibd, index);
}

static int fault_queue_create(struct gs_bdev *bd, uint32_t depth, int wake_fd,
			      struct gs_bq **qp)
{
	struct gs_bq *q = calloc(1, sizeof(*q));
	int ret = -ENOMEM;

	if (!q)
		return -ENOMEM;
	q->bd = bd;
	q->depth = depth;
	q->cap = depth + 1;
	q->stash = calloc(q->cap, sizeof(*q->stash));
	q->later = calloc(q->cap, sizeof(*q->later));
	q->later_at = calloc(q->cap, sizeof(*q->later_at));
	q->pend = calloc(depth, sizeof(*q->pend));
	q->idone = calloc(depth, sizeof(*q->idone));
	q->ires = calloc(depth, sizeof(*q->ires));
	if (!q->stash || !q->pend || !q->idone || !q->ires || !q->later || !q->later_at)
		goto free_q;
	ret = bd->in->queue_create(bd->ibd, depth, wake_fd, &q->iq);
	if (ret)
		goto free_q;
	*qp = q;
	return 0;
free_q:
	free(q->later);
	free(q->later_at);
	free(q->stash);
	free(q->pend);
	free(q->idone);
	free(q->ires);
	free(q);
	return ret;
}

static void fault_queue_destroy(struct gs_bq *q)
{
	q->bd->in->queue_destroy(q->iq);
	free(q->later);
	free(q->later_at);
	free(q->stash);
	free(q->pend);
	free(q->idone);
	free(q->ires);
	free(q);
}

enum { F_PASS, F_DONE, F_TEAR };

/* Decide what happens to @b; sets *res for F_DONE. */
static int decide(struct gs_bdev *bd, struct gs_bio *b, int64_t *res, int *wb,
		  uint64_t *ready)
{
	struct fspec *s = &bd->spec;
	int ret = F_PASS;
	uint64_t w = 0;

	pthread_mutex_lock(&bd->lock);
	if (s->opmask & (1u << b->op)) {
		uint64_t k = ++bd->nio;

		if (s->fail_n && k == s->fail_n) {
			*res = -s->fail_err;
			ret = F_DONE;
			goto out;
		}
		if (s->every_n && k % s->every_n == 0) {
			*res = -s->every_err;
			ret = F_DONE;
			goto out;
		}
	}
	if (b->op == GS_OP_WRITE)
		w = ++bd->nwrites;
	if (bd->pw) {
		/* the domain counts the writes; another queue's cut is this one's too */
		if (b->op == GS_OP_WRITE)
			w = __atomic_add_fetch(&bd->pw->nwrites, 1, __ATOMIC_RELAXED);
		if (!bd->dead && __atomic_load_n(&bd->pw->dead, __ATOMIC_ACQUIRE)) {
			cache_discard(bd);
			bd->dead = 1;
		}
	}
	if (bd->dead && b->op != GS_OP_READ) {
		/* after the power cut nothing reaches the device */
		*res = s->dead_err ? -(int64_t)s->dead_err : b->op == GS_OP_WRITE ? (int64_t)b->len : 0;
		ret = F_DONE;
		goto out;
	}
	if (b->op == GS_OP_WRITE && s->powercut) {
		if (w >= s->powercut) {
			cache_discard(bd);
			bd->dead = 1;
			if (bd->pw)
				__atomic_store_n(&bd->pw->dead, 1, __ATOMIC_RELEASE);
			/* the write in flight at the cut is never acknowledged with dead=ERR */
			*res = s->dead_err ? -(int64_t)s->dead_err : (int64_t)b->len;
			ret = s->tear ? F_TEAR : F_DONE;
			goto out;
		}
		*res = cache_put(bd, b);
		if (!*res)
			*res = b->len;
		ret = F_DONE;
		goto out;
	}
	if (b->op == GS_OP_WRITE && w > s->at && (s->drop || s->tear)) {
		*res = b->len;
		ret = s->drop ? F_DONE : F_TEAR;
		goto out;
	}
	if (b->op == GS_OP_FLUSH && bd->nblocks)
		*wb = 1;
	if (s->m_iops && b->op != GS_OP_FLUSH)
		*ready = model_ready(bd, b->len);
out:
	pthread_mutex_unlock(&bd->lock);
	return ret;
}

static int fault_submit(struct gs_bq *q, struct gs_bio **ios, unsigned n)
{
	struct gs_bdev *bd = q->bd;
	unsigned i;

	for (i = 0; i < n; i++) {
		struct gs_bio *b = ios[i];
		struct proxy *px;
		int64_t res = 0;
		uint64_t ready = 0;
		int wb = 0, d = decide(bd, b, &res, &wb, &ready);

		if (d == F_DONE) {
			stash(q, b, res);
			continue;
		}
		if (wb) {
			int ret = writeback(q);

			if (ret) {
				stash(q, b, ret);
				continue;
			}
		}
		px = calloc(1, sizeof(*px));
		if (!px) {
			stash(q, b, -ENOMEM);
			continue;
		}
		px->b = *b;
		px->b.done = 0;
		px->b.priv = NULL;
		px->orig = b;
		px->report = b->len;
		px->ready = ready;
		if (b->op == GS_OP_READ)
			px->dropped = cache_dropped(bd);
		/* a tear longer than the write keeps all of it */
		if (d == F_TEAR && bd->spec.tear < b->len)
			px->b.len = bd->spec.tear;
		if (d == F_TEAR && res < 0)
			px->err = (int)res;
		q->pend[q->npend++] = &px->b;
	}
	push_pending(q);
	return (int)n;
}

static int fault_reap(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned max)
{
	unsigned n = 0;

	push_pending(q);
	if (q->nstash < max)
		inner_reap(q);
	later_reap(q);
	while (n < max && q->nstash) {
		q->nstash--;
		done[n] = q->stash[q->nstash].b;
		res[n] = q->stash[q->nstash].res;
		n++;
	}
	return (int)n;
}

static int fault_wait_nr(struct gs_bq *q, unsigned nr, int64_t timeout_us)
{
	const struct gs_backend_ops *in = q->bd->in;

	uint64_t next;

	push_pending(q);
	next = later_reap(q);
	if (q->nstash)
		return 0;
	if (q->npend)
		timeout_us = 50;
	if (next) {
		/* wake for the model's next completion */
		uint64_t now = gs_now_ns();
		int64_t us = next > now ? (int64_t)((next - now) / 1000) + 1 : 0;

		if (!us)
			return 0;
		if (timeout_us < 0 || us < timeout_us)
			timeout_us = us;
	}
	return in->wait_nr ? in->wait_nr(q->iq, nr, timeout_us) : in->wait(q->iq, timeout_us);
}

static int fault_wait(struct gs_bq *q, int64_t timeout_us)
{
	return fault_wait_nr(q, 1, timeout_us);
}

/*
 * A read on the caller's thread, as the inner backend would do it (the fs's
 * direct reads: gs_q_pread_sync): the same decision as a queued read
 * (counted faults, the power-cut cache, the model), the inner read_sync, then
 * the model's completion time slept on this thread.  Through the queue the
 * model's wait costs a poller hand-off, a timed poller wake-up and a wake of
 * the caller per read, which the device it models (uring's read_sync: one
 * pread) does not have.
 */
static int64_t fault_read_sync(struct gs_bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct gs_bio b = { .op = GS_OP_READ, .len = (uint32_t)len, .off = off, .buf = buf,
			    .buf_index = -1 };
	uint64_t ready = 0, dropped;
	int64_t res = 0;
	int wb = 0;

	if (!bd->in->read_sync)
		return -EOPNOTSUPP;
	if (decide(bd, &b, &res, &wb, &ready) == F_DONE)
		return res;
	dropped = cache_dropped(bd);
	res = read_coherent(bd, &b, bd->in->read_sync(bd->ibd, buf, len, off), dropped);
	if (ready) {
		struct timespec ts = { .tv_sec = (time_t)(ready / 1000000000ull),
				       .tv_nsec = (long)(ready % 1000000000ull) };

		/* gs_now_ns's clock; EINTR: sleep the rest */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return res;
}

const struct gs_backend_ops gs_backend_fault = {
	.name = "fault",
	.open = fault_open,
	.close = fault_close,
	.geometry = fault_geometry,
	.register_buffer = fault_register_buffer,
	.unregister_buffer = fault_unregister_buffer,
	.queue_create = fault_queue_create,
	.queue_destroy = fault_queue_destroy,
	.submit = fault_submit,
	.reap = fault_reap,
	.wait = fault_wait,
	.wait_nr = fault_wait_nr,
	.read_sync = fault_read_sync,
};
