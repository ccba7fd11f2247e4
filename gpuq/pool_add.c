// SPDX-License-Identifier: MIT
/*
 * Adding a member to a pool (gs_q_pool_add, `gstore pool add`): a restripe.
 *
 * The placement (gpuq/pool.h) puts chunk c's copies in slots c * copies + k,
 * slot s on member s % n, so a member more moves nearly every chunk.  The
 * pool is restriped in place, chunk after chunk in increasing logical order,
 * from the old layout (n members) to the new one (n + 1): the old members'
 * superblocks and the new one's say so (GS_POOL_FEAT_INCOMPAT_RESHAPE) with
 * the old geometry and a cursor, reshape_pos: bytes below it are in the new
 * layout, the rest still in the old.
 *
 * Why it is crash-safe (kill -9, power): the place where copy k of chunk c
 * goes held, in the old layout, a chunk no later than c
 * (gs_pool_add_occupant; checked for every layout and size by the unit
 * tests), because the new layout packs n + 1 slots in a row where the old
 * packed n.  A batch of chunks is written only when every place it
 * overwrites holds nothing, a new member's nothing, the chunk itself (the
 * same bytes), or a chunk below the *recorded* cursor, whose new copies were
 * flushed before that cursor was written.  When the next chunk's place holds
 * a chunk moved since, the members are flushed and the cursor written to
 * every member first (a checkpoint).  So at any instant, every chunk below
 * the recorded cursor is durable in the new layout and every chunk above it
 * is intact in the old one; the next read-write open resumes from the
 * recorded cursor (pool_reshape_resume), redoing at most the chunks moved
 * since the last checkpoint.  The gap between a chunk's new place and the
 * chunks it overwrites grows with the row, so checkpoints are every chunk at
 * first and then ever rarer (about (n + 1) ln(chunks) of them in all).
 *
 * The pool's logical size does not change (the fs has no grow): each member
 * then uses fewer rows, and every chunk, old data and new, is striped over
 * all members.  No other I/O runs during the add: the queue lock is held for
 * writing throughout, and an open resumes it before it returns.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "gs_log.h"

#define ADD_BATCH	(4u << 20)	/* bytes moved per batch (at least one chunk) */

/* ---- a batch of member I/Os sent at once and joined ---- */

struct fan {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left;
	int err;
};

struct fan_io {
	struct gs_q_io io;	/* first: the member's callback gets this */
	struct fan *f;
};

static void fan_done(struct gs_q_io *io, int64_t res)
{
	struct fan_io *fi = (struct fan_io *)io;
	struct fan *f = fi->f;

	pthread_mutex_lock(&f->mu);
	if (res != (int64_t)io->len && !f->err)
		f->err = res < 0 ? (int)res : -EIO;
	if (!--f->left)
		pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* Send @n prepared I/Os (io.priv: the member queue) and wait for all; 0 or the first error. */
static int fan_run(struct fan_io *fi, unsigned n)
{
	struct fan f = { .left = 1 };
	unsigned i;
	int err;

	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	for (i = 0; i < n; i++) {
		struct gs_q_io *io = &fi[i].io;
		int r;

		fi[i].f = &f;
		io->done = fan_done;
		pthread_mutex_lock(&f.mu);
		f.left++;
		pthread_mutex_unlock(&f.mu);
		r = gs_q_submit(io->priv, &io, 1);
		if (r < 0) {
			pthread_mutex_lock(&f.mu);
			f.left--;
			if (!f.err)
				f.err = r;
			pthread_mutex_unlock(&f.mu);
		}
	}
	pthread_mutex_lock(&f.mu);
	f.left--;
	while (f.left)
		pthread_cond_wait(&f.cv, &f.mu);
	err = f.err;
	pthread_mutex_unlock(&f.mu);
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.mu);
	return err;
}

/* ---- the restripe ---- */

/* 1 if chunk @c may be written now: its new places hold nothing not yet recorded moved. */
static int movable(const struct gs_pool_geo *g0, const struct gs_pool_geo *g1, uint64_t c,
		   uint64_t recorded)
{
	uint32_t copies = gs_pool_copies(g1, c * g1->su);

	for (uint32_t k = 0; k < copies; k++) {
		int64_t o = gs_pool_add_occupant(g0, g1, c, k);

		if (o >= 0 && (uint64_t)o != c && (uint64_t)o >= recorded)
			return 0;
	}
	return 1;
}

/*
 * Make every write so far durable, then record on every member: the cursor at
 * chunk @c, or (@c past the end) the new layout everywhere: the flag off, the
 * reshape fields gone, the members' new size.
 */
static int record(struct gs_bdev *bd, uint64_t c)
{
	struct gs_dpool_member *sb = &bd->sb;
	int ret = 0;

	for (uint32_t i = 0; i < bd->geo.n && !ret; i++)
		ret = gs_q_flush(bd->m[i].q);
	if (ret)
		return ret;
	pthread_mutex_lock(&bd->lock);
	if (c * bd->geo.su < bd->geo.capacity) {
		sb->reshape_pos = htole64(c * bd->geo.su);
	} else {
		sb->feature_incompat = htole32(le32toh(sb->feature_incompat) &
					       ~GS_POOL_FEAT_INCOMPAT_RESHAPE);
		sb->reshape_from = sb->reshape_copies = sb->reshape_zone_copies = 0;
		sb->reshape_pos = 0;
		sb->member_bytes = htole64(bd->geo.member_bytes);
	}
	pool_sb_update(bd);
	pthread_mutex_unlock(&bd->lock);
	/* sb_update fails members it cannot write; an add needs them all */
	return __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE) ? -EIO : 0;
}

/* Read chunk @c (old layout) into @buf: its first copy, the others if that fails. */
static int read_old(struct gs_bdev *bd, uint64_t c, char *buf)
{
	const struct gs_pool_geo *g0 = &bd->rs_old;
	uint64_t off = c * g0->su, phys;
	uint32_t copies = gs_pool_copies(g0, off), pref = gs_pool_pref(g0, off), m, k;
	ssize_t r = -EIO;

	for (k = 0; k < copies && r != (ssize_t)g0->su; k++) {
		gs_pool_locate(g0, off, (pref + k) % copies, &m, &phys);
		r = gs_q_pread_sync(bd->m[m].q, buf, g0->su, phys);
	}
	return r == (ssize_t)g0->su ? 0 : r < 0 ? (int)r : -EIO;
}

/* Move chunks [@c, @c + @nb): read them all (old layout), then write every new copy. */
static int move_batch(struct gs_bdev *bd, uint64_t c, unsigned nb, char *buf,
		      struct fan_io *fi)
{
	const struct gs_pool_geo *g0 = &bd->rs_old, *g1 = &bd->geo;
	unsigned i, n = 0;
	int ret;

	/* reads: one per chunk, to its preferred old copy, all at once */
	for (i = 0; i < nb; i++) {
		uint64_t off = (c + i) * g0->su, phys;
		uint32_t m;

		gs_pool_locate(g0, off, gs_pool_pref(g0, off), &m, &phys);
		fi[n++].io = (struct gs_q_io){ .op = GS_OP_READ, .len = g0->su, .off = phys,
					       .buf = buf + (size_t)i * g0->su,
					       .priv = bd->m[m].q };
	}
	if (fan_run(fi, n)) {
		/* someone failed: each chunk again, copy by copy, to know which */
		for (i = 0; i < nb; i++) {
			ret = read_old(bd, c + i, buf + (size_t)i * g0->su);
			if (ret)
				return ret;
		}
	}
	n = 0;
	for (i = 0; i < nb; i++) {
		uint64_t off = (c + i) * g1->su, phys;
		uint32_t copies = gs_pool_copies(g1, off), k, m;

		for (k = 0; k < copies; k++) {
			gs_pool_locate(g1, off, k, &m, &phys);
			fi[n++].io = (struct gs_q_io){ .op = GS_OP_WRITE, .len = g1->su,
						       .off = phys,
						       .buf = buf + (size_t)i * g1->su,
						       .priv = bd->m[m].q };
		}
	}
	return fan_run(fi, n);
}

/*
 * Move every chunk from the cursor on (qlock held for writing: nothing else
 * runs).  An error leaves the pool mid-add, as recorded: the next read-write
 * open resumes.  Members are not failed for errors here: the add needs each
 * of them, and a failed bit would keep one out for good.
 */
static int reshape_run(struct gs_bdev *bd, gs_pool_progress progress, void *arg)
{
	const struct gs_pool_geo *g0 = &bd->rs_old, *g1 = &bd->geo;
	uint64_t su = g1->su, nchunks = g1->capacity / su, c = bd->rs_pos / su, rec = c;
	unsigned per = ADD_BATCH / su ? ADD_BATCH / su : 1, maxio = per * g1->n;
	struct fan_io *fi = calloc(maxio, sizeof(*fi));
	char *buf = aligned_alloc(4096, (size_t)per * su);
	int ret = 0;

	if (!fi || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	bd->rebuild_total = g1->capacity;
	__atomic_store_n(&bd->rebuild_done, c * su, __ATOMIC_RELAXED);
	while (c < nchunks && !ret) {
		int64_t t0 = pool_now_ns();
		unsigned nb;

		if (__atomic_load_n(&bd->cancel, __ATOMIC_ACQUIRE)) {
			ret = -ECANCELED;
			break;
		}
		if (!movable(g0, g1, c, rec)) {
			ret = record(bd, c);
			if (ret)
				break;
			rec = c;
		}
		for (nb = 1; nb < per && c + nb < nchunks && movable(g0, g1, c + nb, rec); nb++)
			;
		ret = move_batch(bd, c, nb, buf, fi);
		if (ret) {
			gs_err("pool: adding member %u: moving logical bytes %llu..+%llu: %s",
			       g0->n, (unsigned long long)(c * su), (unsigned long long)nb * su,
			       strerror(-ret));
			break;
		}
		c += nb;
		bd->rs_pos = c * su;
		pool_progress_add(bd, (uint64_t)nb * su, progress, arg);
		ret = pool_throttle(bd, t0, (uint64_t)nb * su);
	}
	if (!ret)
		ret = record(bd, nchunks);
	if (!ret) {
		bd->rs_active = 0;
		bd->geom.nr_devices = bd->geo.n;
	}
out:
	free(fi);
	free(buf);
	return ret;
}

int pool_reshape_resume(struct gs_bdev *bd)
{
	int ret;

	gs_warn("pool: an add of member %u was under way (%llu of %llu bytes moved): "
		"finishing it before the pool is used", bd->rs_old.n,
		(unsigned long long)bd->rs_pos, (unsigned long long)bd->geo.capacity);
	pthread_rwlock_wrlock(&bd->qlock);
	ret = reshape_run(bd, NULL, NULL);
	pthread_rwlock_unlock(&bd->qlock);
	if (!ret)
		gs_info("pool: member %u added", bd->rs_old.n);
	return ret;
}

/* Checks of an add of @newpath; the new layout in @g1. */
static int add_check(struct gs_bdev *bd, const char *newpath, struct gs_pool_geo *g1)
{
	uint32_t n = bd->geo.n, zc, dc;

	if (!newpath || !*newpath)
		return -EINVAL;
	if (bd->rdonly)
		return -EROFS;
	if (strlen(newpath) >= GS_POOL_PATH_MAX) {
		gs_err("pool: %s: path longer than %u bytes", newpath, GS_POOL_PATH_MAX - 1);
		return -ENAMETOOLONG;
	}
	if (n + 1 > GS_POOL_MAX_MEMBERS) {
		gs_err("pool: it has %u members already, the most a pool can have", n);
		return -E2BIG;
	}
	if (__atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE) || bd->rs_active ||
	    __atomic_load_n(&bd->rebuilding, __ATOMIC_ACQUIRE) >= 0) {
		gs_err("pool: a member can be added only to a healthy pool with no rebuild or "
		       "add running (gstore pool status)");
		return -EBUSY;
	}
	for (uint32_t i = 0; i < n; i++)
		if (pool_same_file(bd->m[i].path, newpath)) {
			gs_err("pool: %s is member %u already", newpath, i);
			return -EEXIST;
		}
	if (gs_pool_layout_copies(bd->layout, n + 1, &zc, &dc) ||
	    gs_pool_geo_load(g1, n + 1, bd->geo.su, zc, dc, bd->geo.zone.lbytes,
			     bd->geo.data.lbytes, le64toh(bd->sb.data_off)))
		return -EINVAL;
	return 0;
}

/* The new device as a member queue: plain, or with the other members' faults (tests). */
static int open_new(struct gs_bdev *bd, const char *path, uint32_t flags, struct gs_q **nq)
{
	struct gs_q_params plain = { .path = path };
	struct gs_q_params p = { .path = path, .flags = flags, .fault = bd->fault,
				 .min_pollers = 1, .max_pollers = 1 };
	int ret;

	if (!bd->fault)
		return pool_open_plain(path, flags, nq);
	p.backend = gs_backend_name(&plain);
	ret = gs_q_open(nq, &p);
	if (ret == -EINVAL && !(flags & GS_Q_BUFFERED)) {
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(nq, &p);
	}
	return ret;
}

int gs_q_pool_add(struct gs_q *q, const char *newpath, gs_pool_progress progress, void *arg)
{
	struct gs_bdev *bd = pool_bd_of(q);
	struct gs_dpool_member *sb;
	struct gs_pool_geo g1;
	struct gs_q_geom mg;
	struct gs_q *nq = NULL;
	uint32_t n;
	int ret;

	if (!bd)
		return -EINVAL;
	ret = add_check(bd, newpath, &g1);
	if (ret)
		return ret;
	n = bd->geo.n;
	ret = open_new(bd, newpath, q->flags & GS_Q_BUFFERED, &nq);
	if (!ret)
		ret = gs_q_geometry(nq, &mg);
	if (ret) {
		gs_err("pool: %s: %s", newpath, strerror(-ret));
		goto close_nq;
	}
	if (mg.capacity < g1.member_bytes) {
		gs_err("pool: %s is too small for a member (%llu bytes needed)", newpath,
		       (unsigned long long)g1.member_bytes);
		ret = -ENOSPC;
		goto close_nq;
	}
	pthread_rwlock_wrlock(&bd->qlock);
	pool_quiesce(bd);
	pthread_mutex_lock(&bd->lock);
	sb = &bd->sb;
	sb->feature_incompat = htole32(le32toh(sb->feature_incompat) |
				       GS_POOL_FEAT_INCOMPAT_RESHAPE);
	sb->reshape_from = htole32(n);
	sb->reshape_copies = htole32(bd->geo.data.copies);
	sb->reshape_zone_copies = htole32(bd->geo.zone.copies);
	sb->reshape_pos = 0;
	sb->nmembers = htole32(n + 1);
	sb->copies = htole32(g1.data.copies);
	sb->zone_copies = htole32(g1.zone.copies);
	snprintf(sb->paths[n], GS_POOL_PATH_MAX, "%s", newpath);
	sb->events = htole64(le64toh(sb->events) + 1);
	/*
	 * The new member first: until the old members say "add under way" the
	 * pool is the old one (a crash here leaves a stray superblock on the new
	 * device only); from then on, with the cursor at 0, either is read right.
	 */
	pool_uuid_gen(sb->member_uuid);
	ret = pool_sb_write(nq, sb, n);
	if (ret) {
		gs_err("pool: %s: writing the member superblock: %s", newpath, strerror(-ret));
		/* the old members never saw it: back to the old pool */
		sb->feature_incompat = htole32(le32toh(sb->feature_incompat) &
					       ~GS_POOL_FEAT_INCOMPAT_RESHAPE);
		sb->reshape_from = sb->reshape_copies = sb->reshape_zone_copies = 0;
		sb->nmembers = htole32(n);
		sb->copies = htole32(bd->geo.data.copies);
		sb->zone_copies = htole32(bd->geo.zone.copies);
		memset(sb->paths[n], 0, GS_POOL_PATH_MAX);
		pthread_mutex_unlock(&bd->lock);
		pthread_rwlock_unlock(&bd->qlock);
		goto close_nq;
	}
	bd->rs_old = bd->geo;
	bd->rs_pos = 0;
	bd->rs_active = 1;
	bd->geo = g1;
	bd->m[n].q = nq;
	bd->m[n].found = 1;
	snprintf(bd->m[n].path, sizeof(bd->m[n].path), "%s", newpath);
	pool_sb_update(bd);
	pthread_mutex_unlock(&bd->lock);
	ret = __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE) ? -EIO : 0;
	if (!ret)
		ret = reshape_run(bd, progress, arg);
	pthread_rwlock_unlock(&bd->qlock);
	if (!ret)
		q->geom.nr_devices = bd->geo.n;	/* the core's copy of pool_geometry's */
	if (ret)
		gs_err("pool: adding %s stopped: %s; the pool stays mid-add and the next "
		       "read-write open goes on", newpath, strerror(-ret));
	return ret;
close_nq:
	gs_q_close(nq);
	return ret;
}
