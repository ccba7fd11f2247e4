// SPDX-License-Identifier: MIT
/*
 * The "pool" backend: one logical device over N member devices.
 *
 * Each member is a gs_q of its own (its own pollers and backend queue: uring,
 * passthru, nvme, optionally wrapped by the fault backend), so the members
 * run in parallel and the pool needs no I/O code of its own.  A pool queue
 * (one per poller of the pool's gs_q) splits each bio at stripe units into
 * segments (gpuq/pool.h says where each lives), hands one piece per copy to
 * the members with gs_q_submit(), and joins the completions: the members'
 * callbacks only push the piece onto the pool queue's lock-free list and wake
 * it; everything else (retries on the other copy, joining, failing members)
 * happens on the pool poller that owns the bio.
 *
 * Failure: a member piece that fails with a device error marks the member
 * failed (the pool is degraded from then on): reads go to another copy,
 * writes count as done when one copy landed, a chunk with no copy left gets
 * the error and the log names the member.  The failed set is written to the
 * surviving members' superblocks (events + 1) before the piece completes, so
 * a member that comes back is never read as if it were current; it comes
 * back only through gs_q_pool_replace().
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuq_internal.h"
#include "pool.h"
#include "pool_internal.h"
#include "gs_log.h"
#include "crc32c.h"
#include "gstore_format.h"

struct pbio;

struct seg {
	uint64_t off;		/* logical */
	char *buf;
	uint32_t len;
	uint32_t tried;		/* copies tried (reads) */
	uint32_t ok;		/* copies written (writes) */
	int err;
	uint32_t last_member;
};

struct piece {
	struct gs_q_io io;	/* first: the member's callback gets this */
	struct pbio *pb;
	struct seg *s;		/* NULL: a flush */
	uint32_t k, member;
	int rb;			/* a write or flush to the member being rebuilt */
	uint32_t ep;		/* epoch parity it counts in */
	uint64_t wmark;		/* a flush: the member's wdone when it was sent */
	int64_t res;
	struct piece *next;
};

struct pbio {
	struct gs_bio *b;
	unsigned left;		/* pieces in flight (pool poller only) */
	unsigned nseg;
	int err;
	struct seg segs[];
};

struct gs_bq {
	struct gs_bdev *bd;
	int efd, wake_fd;
	struct piece *ready;	/* shared: pushed by member callbacks */
	uint32_t sleeping;	/* shared */
	uint32_t inside;	/* shared: member callbacks still running piece_done */
	struct gs_bio **done;
	int64_t *dres;
	unsigned ndone, cap;
};

/* ---- member superblocks ---- */

static uint32_t sb_crc(const struct gs_dpool_member *sb)
{
	struct gs_dpool_member c = *sb;

	c.crc = 0;
	return gs_crc32c(0, &c, sizeof(c));
}

static int sb_valid(const struct gs_dpool_member *sb)
{
	return le64toh(sb->magic) == GS_POOL_MAGIC && le32toh(sb->crc) == sb_crc(sb);
}

int gs_pool_is_member(const char *path)
{
	uint64_t magic = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = pread(fd, &magic, sizeof(magic), 0);
	if (n != sizeof(magic) || le64toh(magic) != GS_POOL_MAGIC)
		n = pread(fd, &magic, sizeof(magic), GS_POOL_SB_COPY);
	close(fd);
	return n == sizeof(magic) && le64toh(magic) == GS_POOL_MAGIC;
}

/* Read @path's member superblock (primary, else the copy); names the member on error. */
static int sb_read(const char *path, struct gs_dpool_member *sb)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -EUCLEAN, i;

	if (fd < 0) {
		ret = -errno;
		gs_err("pool: member %s: %s", path, strerror(errno));
		return ret;
	}
	for (i = 0; i < 2; i++) {
		if (pread(fd, sb, sizeof(*sb), i * GS_POOL_SB_COPY) != (ssize_t)sizeof(*sb))
			continue;
		if (sb_valid(sb)) {
			ret = 0;
			break;
		}
	}
	close(fd);
	if (ret)
		gs_err("pool: %s: %s", path, le64toh(sb->magic) == GS_POOL_MAGIC ?
		       "member superblock corrupt (bad checksum in both copies)" :
		       "no pool member superblock (not a member of a gstore pool)");
	return ret;
}

static void sb_seal(struct gs_dpool_member *sb)
{
	sb->crc = 0;
	sb->crc = htole32(sb_crc(sb));
}

/* Write @sb (with @index) to member @i through its queue: copy, flush, primary, flush. */
int pool_sb_write(struct gs_q *q, const struct gs_dpool_member *tmpl, uint32_t index)
{
	struct gs_dpool_member *sb = aligned_alloc(4096, sizeof(*sb));
	int ret, i;

	if (!sb)
		return -ENOMEM;
	*sb = *tmpl;
	sb->index = htole32(index);
	sb_seal(sb);
	ret = 0;
	for (i = 1; i >= 0 && !ret; i--) {
		ssize_t n = gs_q_pwrite(q, sb, sizeof(*sb), (uint64_t)i * GS_POOL_SB_COPY);

		ret = n < 0 ? (int)n : gs_q_flush(q);
	}
	free(sb);
	return ret;
}

/* Write bd->sb (with the failed set) to every healthy member (bd->lock held). */
void pool_sb_update(struct gs_bdev *bd)
{
	uint64_t failed;
	uint32_t i;
	int again;

	if (bd->rdonly)
		return;
	do {
		failed = __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE);
		bd->sb.failed = htole64(failed);
		bd->sb.events = htole64(le64toh(bd->sb.events) + 1);
		again = 0;
		for (i = 0; i < bd->geo.n; i++) {
			int r;

			if (!bd->m[i].q || (failed >> i & 1))
				continue;
			r = pool_sb_write(bd->m[i].q, &bd->sb, i);
			if (!r || !pool_dev_error(r))
				continue;
			/* that member failed too: record it on the others (once per member) */
			gs_err("pool: member %u (%s) failed: cannot write its superblock: %s; the "
			       "pool is degraded", i, bd->m[i].path, strerror(-r));
			__atomic_fetch_or(&bd->failed, 1ull << i, __ATOMIC_ACQ_REL);
			/* its superblock is this update's or the one before: data is the same */
			pool_wib_start(bd, le64toh(bd->sb.events) - 1);
			again = 1;
		}
	} while (again);
}

/* Record the failed set when it changed (bd->lock held). */
static void sb_persist(struct gs_bdev *bd)
{
	if (le64toh(bd->sb.failed) != __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE))
		pool_sb_update(bd);
}

/* ---- member state ---- */

/* Errors that say the request, not the device, was wrong. */
int pool_dev_error(int64_t res)
{
	return res < 0 && res != -EINVAL && res != -EFAULT && res != -ENOMEM && res != -EAGAIN &&
	       res != -EBADF;
}

int pool_member_ok(struct gs_bdev *bd, uint32_t m)
{
	return !(__atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE) >> m & 1);
}

void pool_member_fail(struct gs_bdev *bd, uint32_t m, int64_t res)
{
	uint64_t bit = 1ull << m;

	__atomic_add_fetch(&bd->m[m].errors, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_or(&bd->failed, bit, __ATOMIC_ACQ_REL) & bit)
		return;
	gs_err("pool: member %u (%s) failed: %s; the pool is degraded%s", m, bd->m[m].path,
	       strerror((int)-res), gs_pool_redundant(&bd->geo, bd->failed) ? "" :
	       ", data stored only there is lost");
	pthread_mutex_lock(&bd->lock);
	/* from now on writes are logged: the member may come back and resync them only;
	 * it holds the current superblock (it had every update so far) */
	pool_wib_start(bd, le64toh(bd->sb.events));
	sb_persist(bd);
	pthread_mutex_unlock(&bd->lock);
}

static void log_lost(struct gs_bdev *bd, uint32_t m, uint64_t off)
{
	if (__atomic_fetch_add(&bd->m[m].logged, 1, __ATOMIC_RELAXED) < LOG_LIMIT)
		gs_err("pool: logical byte %llu: its only copy was on failed member %u (%s): EIO",
		       (unsigned long long)off, m, bd->m[m].path);
}

/* ---- open / close ---- */

static int layout_of(const char *s, uint32_t *layout)
{
	if (!s || !*s || !strcmp(s, "stripe"))
		*layout = GS_POOL_STRIPE;
	else if (!strcmp(s, "mirror"))
		*layout = GS_POOL_MIRROR;
	else if (!strcmp(s, "stripe+mirror") || !strcmp(s, "raid10"))
		*layout = GS_POOL_STRIPE_MIRROR;
	else
		return -EINVAL;
	return 0;
}

const char *pool_layout_name(uint32_t layout)
{
	return layout == GS_POOL_MIRROR ? "mirror" : layout == GS_POOL_STRIPE_MIRROR ?
	       "stripe+mirror" : "stripe";
}

/*
 * A fault spec for every member with a power cut in it: the members get one
 * power domain (gs_q_fault(3) power=ID), so they lose power together and
 * powercut=N counts the pool's writes, as for one device.  @buf holds the
 * result when it differs from @spec.
 */
static const char *power_spec(const char *spec, char *buf, size_t size)
{
	static uint64_t seq;
	int n;

	if (!spec || !strstr(spec, "powercut=") || strstr(spec, "power="))
		return spec;
	n = snprintf(buf, size, "%s,power=%llu", spec,
		     (unsigned long long)__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	return n < 0 || (size_t)n >= size ? spec : buf;
}

static int open_member(struct gs_bdev *bd, uint32_t i, const struct gs_q_params *p,
		       const char *fault)
{
	struct gs_q_params mp = {
		.path = bd->m[i].path,
		.flags = p->flags & (GS_Q_RDONLY | GS_Q_BUFFERED),
		.queue_depth = p->queue_depth,
		.min_pollers = 1,
		.max_pollers = p->max_pollers ? p->max_pollers : 1,
		.spin_us = p->spin_us,
		.idle_ms = p->idle_ms,
		.fault = fault,
	};
	struct gs_q_params plain = { .path = bd->m[i].path };
	const char *f = fault;
	int ret;

	/* "mK:SPEC" (gs_pool_fault's form) at open: SPEC for member K, "" for the others */
	if (f && f[0] == 'm' && f[1] >= '0' && f[1] <= '9') {
		char *e;
		unsigned long k = strtoul(f + 1, &e, 10);

		if (*e != ':')
			return -EINVAL;
		mp.fault = k == i ? e + 1 : "";
	}
	/* name the backend: a member must never be taken for a pool again */
	mp.backend = gs_backend_name(&plain);
	ret = gs_q_open(&bd->m[i].q, &mp);
	if (ret)
		gs_err("pool: member %u (%s): cannot open: %s", i, bd->m[i].path,
		       strerror(-ret));
	return ret;
}

/* Split "a:b:c" into @list (strdup'ed in @buf). */
static unsigned split_list(char *buf, char **list, unsigned max)
{
	unsigned n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(buf, ":", &save); t && n < max; t = strtok_r(NULL, ":", &save))
		list[n++] = t;
	return n;
}

/* Find the members: read every named device's superblock, pick the newest. */
static int find_members(struct gs_bdev *bd, char **paths, unsigned np)
{
	struct gs_dpool_member *sbs = calloc(np, sizeof(*sbs));
	int best = -1, ret = 0;
	unsigned i;

	if (!sbs)
		return -ENOMEM;
	for (i = 0; i < np; i++) {
		if (sb_read(paths[i], &sbs[i])) {
			paths[i] = NULL;
			continue;
		}
		if (best < 0 || le64toh(sbs[i].events) > le64toh(sbs[best].events))
			best = (int)i;
	}
	if (best < 0) {
		ret = -EUCLEAN;
		goto out;
	}
	bd->sb = sbs[best];
	for (i = 0; i < np; i++) {
		uint32_t idx = le32toh(sbs[i].index);

		if (!paths[i])
			continue;
		if (memcmp(sbs[i].pool_uuid, bd->sb.pool_uuid, 16)) {
			gs_err("pool: %s belongs to another pool (uuid differs): left out",
			       paths[i]);
			continue;
		}
		if (idx >= le32toh(bd->sb.nmembers)) {
			gs_err("pool: %s: member index %u out of range", paths[i], idx);
			continue;
		}
		if (bd->m[idx].path[0]) {
			gs_err("pool: %s and %s both claim member %u", bd->m[idx].path, paths[i],
			       idx);
			ret = -EUCLEAN;
			goto out;
		}
		snprintf(bd->m[idx].path, sizeof(bd->m[idx].path), "%s", paths[i]);
	}
out:
	free(sbs);
	return ret;
}

static int check_sb(const struct gs_dpool_member *sb)
{
	if (le32toh(sb->version) != GS_POOL_VERSION ||
	    (le32toh(sb->feature_incompat) & ~GS_POOL_FEAT_INCOMPAT_SUPP) ||
	    !le32toh(sb->nmembers) || le32toh(sb->nmembers) > GS_POOL_MAX_MEMBERS ||
	    le32toh(sb->layout) < GS_POOL_STRIPE || le32toh(sb->layout) > GS_POOL_STRIPE_MIRROR)
		return -EUCLEAN;
	return 0;
}

/* The layout before the add under way (the superblock has the one after it). */
static int reshape_load(struct gs_bdev *bd)
{
	const struct gs_dpool_member *sb = &bd->sb;
	uint64_t pos = le64toh(sb->reshape_pos);
	int ret;

	if (!le32toh(sb->reshape_from) || le32toh(sb->reshape_from) >= bd->geo.n)
		return -EUCLEAN;
	ret = gs_pool_geo_load(&bd->rs_old, le32toh(sb->reshape_from), bd->geo.su,
			       le32toh(sb->reshape_zone_copies), le32toh(sb->reshape_copies),
			       bd->geo.zone.lbytes, bd->geo.data.lbytes, le64toh(sb->data_off));
	if (ret || pos % bd->geo.su || pos > bd->geo.capacity)
		return -EUCLEAN;
	bd->rs_pos = pos;
	bd->rs_active = 1;
	return 0;
}

static void pool_free(struct gs_bdev *bd)
{
	uint32_t i;

	for (i = 0; i < GS_POOL_MAX_MEMBERS; i++)
		gs_q_close(bd->m[i].q);
	pthread_rwlock_destroy(&bd->qlock);
	pthread_mutex_destroy(&bd->lock);
	free(bd->fault);
	free(bd->wib);
	free(bd);
}

static int pool_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	const char *name = gs_backend_name(p);
	char *list[GS_POOL_MAX_MEMBERS * 2], *buf, fbuf[512];
	const char *fault = power_spec(p->fault, fbuf, sizeof(fbuf));
	struct gs_dpool_member *sb;
	struct gs_bdev *bd;
	unsigned np, i, n;
	uint64_t missing = 0;
	int ret;

	bd = calloc(1, sizeof(*bd));
	if (!bd)
		return -ENOMEM;
	pthread_mutex_init(&bd->lock, NULL);
	{
		pthread_rwlockattr_t ra;

		/* a replace's swap must not starve behind a stream of readers */
		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&bd->qlock, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	bd->rebuilding = -1;
	bd->rdonly = !!(p->flags & GS_Q_RDONLY);
	/* a member added later gets the same faults (the same power domain) */
	if (fault && *fault && !(fault[0] == 'm' && fault[1] >= '0' && fault[1] <= '9') &&
	    !(bd->fault = strdup(fault))) {
		ret = -ENOMEM;
		goto free_bd;
	}
	/* "pool:A:B:C" names the members; plain "pool" starts from the path's hints */
	buf = strdup(!strncmp(name, "pool:", 5) ? name + 5 : p->path);
	if (!buf) {
		ret = -ENOMEM;
		goto free_bd;
	}
	np = split_list(buf, list, GS_POOL_MAX_MEMBERS * 2);
	ret = find_members(bd, list, np);
	if (ret)
		goto free_buf;
	sb = &bd->sb;
	ret = check_sb(sb);
	if (ret) {
		gs_err("pool: member superblock of an unsupported version or layout");
		goto free_buf;
	}
	n = le32toh(sb->nmembers);
	bd->layout = le32toh(sb->layout);
	ret = gs_pool_geo_load(&bd->geo, n, le32toh(sb->stripe_unit), le32toh(sb->zone_copies),
			       le32toh(sb->copies), le64toh(sb->zone_bytes),
			       le64toh(sb->data_bytes), le64toh(sb->data_off));
	if (!ret && (le32toh(sb->feature_incompat) & GS_POOL_FEAT_INCOMPAT_RESHAPE))
		ret = reshape_load(bd);
	if (ret) {
		gs_err("pool: member superblock geometry is inconsistent");
		goto free_buf;
	}
	/* members not named: their recorded paths, if they hold the same pool */
	for (i = 0; i < n && np == 1; i++) {
		char *hint[1], h[GS_POOL_PATH_MAX + 1];

		if (bd->m[i].path[0] || !sb->paths[i][0])
			continue;
		memcpy(h, sb->paths[i], GS_POOL_PATH_MAX);
		h[GS_POOL_PATH_MAX] = 0;
		hint[0] = h;
		if (gs_pool_is_member(h)) {
			struct gs_dpool_member s2;

			if (!sb_read(h, &s2) && !memcmp(s2.pool_uuid, sb->pool_uuid, 16) &&
			    le32toh(s2.index) == i)
				snprintf(bd->m[i].path, sizeof(bd->m[i].path), "%s", hint[0]);
		}
	}
	bd->failed = le64toh(sb->failed) & ((n < 64 ? 1ull << n : 0) - 1);
	for (i = 0; i < n; i++) {
		bd->m[i].found = !!bd->m[i].path[0];
		if (!bd->m[i].path[0]) {
			gs_err("pool: member %u (%.*s) is missing", i, (int)GS_POOL_PATH_MAX,
			       sb->paths[i]);
			snprintf(bd->m[i].path, sizeof(bd->m[i].path), "%.*s",
				 (int)GS_POOL_PATH_MAX - 1, sb->paths[i]);
			missing |= 1ull << i;
			continue;
		}
		if (bd->failed >> i & 1) {
			gs_warn("pool: member %u (%s) was failed earlier: left out until replaced",
				i, bd->m[i].path);
			continue;
		}
		ret = open_member(bd, i, p, fault);
		if (ret == -EINVAL && !(p->flags & GS_Q_BUFFERED))
			goto free_buf;	/* the caller retries buffered (tmpfs) */
		if (ret)
			missing |= 1ull << i;
	}
	bd->failed |= missing;
	if (!gs_pool_redundant(&bd->geo, bd->failed)) {
		for (i = 0; i < n; i++)
			if (bd->failed >> i & 1)
				gs_err("pool: member %u (%s) is needed: the %s layout has no other "
				       "copy of its data", i, bd->m[i].path,
				       pool_layout_name(bd->layout));
		ret = -ENODEV;
		goto free_buf;
	}
	if (bd->failed)
		gs_warn("pool: running degraded (%u of %u members)",
			n - (unsigned)__builtin_popcountll(bd->failed), n);
	if (pool_wib_load(bd)) {
		gs_warn("pool: the dirty-region log cannot be read: members that come back "
			"will be rebuilt whole");
		bd->sb.wib_since = 0;
	}
	if (!bd->rdonly) {
		uint32_t st = le32toh(sb->state);

		/* still open from last time: a crash; copies written then may differ */
		if (st & GS_POOL_ST_OPEN) {
			gs_warn("pool: not closed cleanly: mirrored copies may differ where writes "
				"were in flight (gstore fsck -y resyncs them)");
			st |= GS_POOL_ST_RESYNC;
		}
		sb->state = htole32(st | GS_POOL_ST_OPEN);
		/* degraded from the start: log the writes a missing member misses */
		if (bd->failed)
			pool_wib_start(bd, le64toh(bd->sb.events));
		pool_sb_update(bd);
	}
	bd->geom.lba_size = 512;
	bd->geom.max_io = POOL_MAX_IO;
	for (i = 0; i < n; i++) {
		struct gs_q_geom mg;

		if (!bd->m[i].q || gs_q_geometry(bd->m[i].q, &mg))
			continue;
		if (mg.lba_size > bd->geom.lba_size)
			bd->geom.lba_size = mg.lba_size;
		if (mg.capacity < le64toh(sb->member_bytes)) {
			gs_err("pool: member %u (%s) is smaller than the pool needs", i,
			       bd->m[i].path);
			ret = -EUCLEAN;
			goto free_buf;
		}
	}
	if (bd->rs_active && !bd->rdonly) {
		/* an add was under way: finish it before anything else reads or writes */
		ret = bd->failed ? -ENODEV : pool_reshape_resume(bd);
		if (ret == -ENODEV)
			gs_err("pool: an add of a member is under way and needs every member "
			       "(a read-only open reads the pool as it is)");
		if (ret)
			goto free_buf;
		n = bd->geo.n;
	}
	bd->geom.opt_io = bd->geo.su;
	bd->geom.nr_devices = n;
	bd->geom.capacity = bd->geo.capacity;
	bd->geom.meta_bytes = n > 1 ? bd->geo.zone.lbytes : 0;
	free(buf);
	*bdp = bd;
	return 0;
free_buf:
	free(buf);
free_bd:
	pool_free(bd);
	return ret;
}

static void bg_join(struct gs_bdev *bd);

static void pool_close(struct gs_bdev *bd)
{
	/* a rebuild in the background stops at its next batch; the member stays as it was */
	__atomic_store_n(&bd->cancel, 1, __ATOMIC_RELEASE);
	bg_join(bd);
	if (!bd->rdonly) {
		pthread_mutex_lock(&bd->lock);
		bd->sb.state = htole32(le32toh(bd->sb.state) & ~GS_POOL_ST_OPEN);
		pool_sb_update(bd);
		pthread_mutex_unlock(&bd->lock);
	}
	pool_free(bd);
}

static int pool_geometry(struct gs_bdev *bd, struct gs_q_geom *g)
{
	*g = bd->geom;
	return 0;
}

/* ---- queues ---- */

static int pool_queue_create(struct gs_bdev *bd, uint32_t depth, int wake_fd, struct gs_bq **qp)
{
	struct gs_bq *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->bd = bd;
	q->wake_fd = wake_fd;
	q->cap = depth + 1;
	q->done = calloc(q->cap, sizeof(*q->done));
	q->dres = calloc(q->cap, sizeof(*q->dres));
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!q->done || !q->dres || q->efd < 0) {
		if (q->efd >= 0)
			close(q->efd);
		free(q->done);
		free(q->dres);
		free(q);
		return -ENOMEM;
	}
	*qp = q;
	return 0;
}

static void pool_queue_destroy(struct gs_bq *q)
{
	/* a callback whose piece was reaped may still be on its way out (efd, sleeping) */
	while (__atomic_load_n(&q->inside, __ATOMIC_ACQUIRE))
		sched_yield();
	close(q->efd);
	free(q->done);
	free(q->dres);
	free(q);
}

/* Member callback (a member's poller): hand the piece to the pool poller. */
static void piece_done(struct gs_q_io *io, int64_t res)
{
	struct piece *pc = (struct piece *)io;
	struct gs_bq *q = (struct gs_bq *)pc->io.priv;
	uint64_t one = 1;

	/* before the piece is seen: the queue outlives this call (pool_queue_destroy) */
	__atomic_add_fetch(&q->inside, 1, __ATOMIC_RELAXED);
	pc->res = res;
	/* release: the member queue is done with the piece (replace waits for this) */
	__atomic_sub_fetch(&q->bd->cnt[pc->ep], 1, __ATOMIC_RELEASE);
	pc->next = __atomic_load_n(&q->ready, __ATOMIC_RELAXED);
	/* release: res before the piece is seen; seq_cst orders it before "sleeping" */
	while (!__atomic_compare_exchange_n(&q->ready, &pc->next, pc, 1, __ATOMIC_SEQ_CST,
					    __ATOMIC_RELAXED))
		;
	if (__atomic_load_n(&q->sleeping, __ATOMIC_SEQ_CST) && write(q->efd, &one, 8) < 0) {
		/* counter saturated: the poller wakes anyway */
	}
	__atomic_sub_fetch(&q->inside, 1, __ATOMIC_RELEASE);
}

static void finish(struct gs_bq *q, struct pbio *pb)
{
	struct gs_bio *b = pb->b;
	int64_t res = b->op == GS_OP_FLUSH ? 0 : (int64_t)b->len;
	unsigned i;

	for (i = 0; i < pb->nseg; i++) {
		struct seg *s = &pb->segs[i];

		if (b->op == GS_OP_WRITE && !s->ok && !s->err)
			s->err = -EIO;
		if (s->err && res >= 0)
			res = s->err;
	}
	if (pb->err && res >= 0)
		res = pb->err;
	q->done[q->ndone] = b;
	q->dres[q->ndone] = res;
	q->ndone++;
	free(pb);
}

static int send(struct gs_bq *q, struct pbio *pb, struct seg *s, uint32_t k, uint32_t m,
		uint64_t phys, uint8_t op, struct gs_q *dst)
{
	struct piece *pc = calloc(1, sizeof(*pc));
	struct gs_q_io *io;
	int ret;

	if (!pc)
		return -ENOMEM;
	pc->io.op = op;
	pc->io.len = s ? s->len : 0;
	pc->io.off = phys;
	pc->io.buf = s ? s->buf : NULL;
	pc->io.done = piece_done;
	pc->io.priv = q;
	pc->pb = pb;
	pc->s = s;
	pc->k = k;
	pc->member = m;
	pc->rb = dst != NULL;
	/* qlock is held for reading: the epoch and the member queues stay put */
	pc->ep = q->bd->epoch & 1;
	if (op == GS_OP_FLUSH && !dst)
		pc->wmark = __atomic_load_n(&q->bd->m[m].wdone, __ATOMIC_ACQUIRE);
	io = &pc->io;
	pb->left++;
	__atomic_add_fetch(&q->bd->cnt[pc->ep], 1, __ATOMIC_RELAXED);
	ret = gs_q_submit(dst ? dst : q->bd->m[m].q, &io, 1);
	if (ret < 0) {
		__atomic_sub_fetch(&q->bd->cnt[pc->ep], 1, __ATOMIC_RELEASE);
		pb->left--;
		free(pc);
		return ret;
	}
	return 0;
}

/* Send a read segment to its next untried healthy copy; 0, or -errno when none is left. */
static int read_next(struct gs_bq *q, struct pbio *pb, struct seg *s)
{
	struct gs_bdev *bd = q->bd;
	const struct gs_pool_geo *g = pool_geo_at(bd, s->off);
	uint32_t copies = gs_pool_copies(g, s->off), j, m;
	uint32_t pref = gs_pool_pref(g, s->off);
	uint64_t phys;

	for (j = 0; j < copies; j++) {
		/* spread reads of mirrored chunks over their copies */
		uint32_t k = (pref + j) % copies;

		if (s->tried >> k & 1)
			continue;
		s->tried |= 1u << k;
		gs_pool_locate(g, s->off, k, &m, &phys);
		s->last_member = m;
		if (!pool_member_ok(bd, m))
			continue;
		if (!send(q, pb, s, k, m, phys, GS_OP_READ, NULL))
			return 0;
	}
	return -EIO;
}

/* Survivors' flushes cannot make durable what a failed member acknowledged
 * and had not flushed when the pool holds no other copy of it. */
static int flush_lost(struct gs_bdev *bd)
{
	uint64_t failed = __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE);
	uint32_t j;

	if (!failed || gs_pool_redundant(&bd->geo, failed))
		return 0;
	for (j = 0; j < bd->geo.n; j++)
		if ((failed >> j & 1) && __atomic_load_n(&bd->m[j].wdone, __ATOMIC_ACQUIRE) !=
					 __atomic_load_n(&bd->m[j].wflushed, __ATOMIC_ACQUIRE))
			return 1;
	return 0;
}

static void start_write(struct gs_bq *q, struct pbio *pb, struct seg *s)
{
	struct gs_bdev *bd = q->bd;
	uint32_t copies = gs_pool_copies(&bd->geo, s->off), k, m;
	uint64_t phys;

	int rb = __atomic_load_n(&bd->rebuilding, __ATOMIC_ACQUIRE), skipped = 0;

	for (k = 0; k < copies; k++) {
		gs_pool_locate(&bd->geo, s->off, k, &m, &phys);
		s->last_member = m;
		if (pool_member_ok(bd, m))
			send(q, pb, s, k, m, phys, GS_OP_WRITE, NULL);
		else
			skipped = 1;
		/* a member being rebuilt gets every write too, so its copy stays current */
		if ((int)m == rb)
			send(q, pb, s, k, m, phys, GS_OP_WRITE, bd->rq);
	}
	/*
	 * A failed member misses this write: logged before it is acknowledged
	 * (pb->left holds the bio until start_write returns), so the member can
	 * come back and resync only what it missed.
	 */
	if (skipped && pool_wib_mark(bd, s->off, s->len))
		__atomic_store_n(&bd->wib_bad, 1, __ATOMIC_RELAXED);
}

static struct pbio *split(struct gs_bdev *bd, struct gs_bio *b)
{
	uint64_t off = b->off, left = b->len;
	unsigned nseg = 0, i;
	struct pbio *pb;

	for (uint64_t o = off, l = left; l;) {
		uint32_t sl = gs_pool_seg_len(&bd->geo, o, l);

		o += sl;
		l -= sl;
		nseg++;
	}
	pb = calloc(1, sizeof(*pb) + nseg * sizeof(pb->segs[0]));
	if (!pb)
		return NULL;
	pb->b = b;
	pb->nseg = nseg;
	for (i = 0; i < nseg; i++) {
		struct seg *s = &pb->segs[i];

		s->off = off;
		s->len = gs_pool_seg_len(&bd->geo, off, left);
		s->buf = (char *)b->buf + (off - b->off);
		off += s->len;
		left -= s->len;
	}
	return pb;
}

static int pool_submit(struct gs_bq *q, struct gs_bio **ios, unsigned n)
{
	struct gs_bdev *bd = q->bd;
	unsigned i, j;

	pthread_rwlock_rdlock(&bd->qlock);
	for (i = 0; i < n; i++) {
		struct gs_bio *b = ios[i];
		struct pbio *pb = b->op == GS_OP_FLUSH ? calloc(1, sizeof(*pb)) : split(bd, b);

		if (!pb || (bd->rs_active && b->op != GS_OP_READ)) {
			/* mid-add (an open read-only, or an add that stopped): reads only */
			free(pb);
			q->done[q->ndone] = b;
			q->dres[q->ndone++] = pb ? -EROFS : -ENOMEM;
			continue;
		}
		pb->b = b;
		pb->left = 1;	/* held until every piece is out */
		if (b->op == GS_OP_FLUSH) {
			int rb = __atomic_load_n(&bd->rebuilding, __ATOMIC_ACQUIRE);

			for (j = 0; j < bd->geo.n; j++)
				if (bd->m[j].q && pool_member_ok(bd, j))
					send(q, pb, NULL, 0, j, 0, GS_OP_FLUSH, NULL);
			if (rb >= 0)
				send(q, pb, NULL, 0, (uint32_t)rb, 0, GS_OP_FLUSH, bd->rq);
			if (flush_lost(bd))
				pb->err = -EIO;
		}
		for (j = 0; j < pb->nseg; j++) {
			struct seg *s = &pb->segs[j];

			if (b->op == GS_OP_WRITE) {
				start_write(q, pb, s);
			} else if (read_next(q, pb, s)) {
				s->err = -EIO;
				log_lost(bd, s->last_member, s->off);
			}
		}
		if (!--pb->left)
			finish(q, pb);
	}
	pthread_rwlock_unlock(&bd->qlock);
	return (int)n;
}

/* A member's write or flush came back good: what its next flush must cover. */
static void note_durability(struct gs_bdev *bd, const struct piece *pc)
{
	struct member *m = &bd->m[pc->member];
	uint64_t cur;

	if (pc->s) {
		if (pc->io.op == GS_OP_WRITE)
			__atomic_add_fetch(&m->wdone, 1, __ATOMIC_RELEASE);
		return;
	}
	cur = __atomic_load_n(&m->wflushed, __ATOMIC_RELAXED);
	while (cur < pc->wmark && !__atomic_compare_exchange_n(&m->wflushed, &cur, pc->wmark, 1,
							       __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static void piece_reaped(struct gs_bq *q, struct piece *pc)
{
	struct gs_bdev *bd = q->bd;
	struct pbio *pb = pc->pb;
	struct seg *s = pc->s;
	int64_t res = pc->res;

	if (res >= 0 && s && (uint64_t)res != s->len)
		res = -EIO;	/* the member backends retry short I/O: a short end is an error */
	if (pc->rb) {
		/* the rebuild target: its errors fail the rebuild, not the pool */
		if (res < 0)
			__atomic_store_n(&bd->rb_err, (int)res, __ATOMIC_RELAXED);
		res = 0;
		goto out;
	}
	if (res >= 0)
		note_durability(bd, pc);
	if (res < 0 && pool_dev_error(res)) {
		pool_member_fail(bd, pc->member, res);
		/* the member missed this write: logged before the write is acknowledged */
		if (s && pc->io.op == GS_OP_WRITE && pool_wib_mark(bd, s->off, s->len))
			__atomic_store_n(&bd->wib_bad, 1, __ATOMIC_RELAXED);
	}
	if (!s) {
		/* flush: an error matters only if data was lost with the member */
		if (res < 0 && !gs_pool_redundant(&bd->geo, bd->failed))
			pb->err = (int)res;
	} else if (pc->io.op == GS_OP_WRITE) {
		if (res >= 0)
			s->ok++;
		else if (res < 0 && !pool_dev_error(res))
			s->err = (int)res;
	} else if (res < 0) {
		if (!pool_dev_error(res))
			s->err = (int)res;
		else if (read_next(q, pb, s)) {
			s->err = (int)res;
			log_lost(bd, pc->member, s->off);
		}
	}
out:
	free(pc);
	if (!--pb->left)
		finish(q, pb);
}

static int pool_reap(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned max)
{
	struct piece *pc = __atomic_exchange_n(&q->ready, NULL, __ATOMIC_ACQUIRE), *next;
	unsigned n = 0;

	if (pc) {
		/* retries send to members */
		pthread_rwlock_rdlock(&q->bd->qlock);
		for (; pc; pc = next) {
			next = pc->next;
			piece_reaped(q, pc);
		}
		pthread_rwlock_unlock(&q->bd->qlock);
	}
	while (n < max && q->ndone) {
		q->ndone--;
		done[n] = q->done[q->ndone];
		res[n] = q->dres[q->ndone];
		n++;
	}
	return (int)n;
}

static int pool_wait(struct gs_bq *q, int64_t timeout_us)
{
	struct pollfd pfd[2] = { { .fd = q->efd, .events = POLLIN },
				 { .fd = q->wake_fd, .events = POLLIN } };
	struct timespec ts, *tsp = NULL;
	uint64_t v;
	int r;

	if (q->ndone)
		return 0;
	__atomic_store_n(&q->sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q->ready, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&q->sleeping, 0, __ATOMIC_RELAXED);
		return 0;
	}
	if (timeout_us >= 0) {
		ts.tv_sec = timeout_us / 1000000;
		ts.tv_nsec = timeout_us % 1000000 * 1000;
		tsp = &ts;
	}
	r = ppoll(pfd, q->wake_fd >= 0 ? 2 : 1, tsp, NULL);
	__atomic_store_n(&q->sleeping, 0, __ATOMIC_RELAXED);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIME;
	if ((pfd[0].revents & POLLIN) && read(q->efd, &v, 8) < 0) {
		/* raced with another read: nothing to clear */
	}
	if (q->wake_fd >= 0 && (pfd[1].revents & POLLIN) && read(q->wake_fd, &v, 8) < 0) {
		/* nonblocking kick fd already drained */
	}
	return 0;
}

/* Reads on the caller's thread: each segment from its first healthy copy. */
static int64_t read_sync_locked(struct gs_bdev *bd, void *buf, size_t len, uint64_t off);

static int64_t pool_read_sync(struct gs_bdev *bd, void *buf, size_t len, uint64_t off)
{
	int64_t r;

	pthread_rwlock_rdlock(&bd->qlock);
	r = read_sync_locked(bd, buf, len, off);
	pthread_rwlock_unlock(&bd->qlock);
	return r;
}

/* One segment (within a stripe unit) from its first healthy copy, on this thread. */
static int64_t read_seg_sync(struct gs_bdev *bd, char *buf, uint32_t sl, uint64_t o)
{
	const struct gs_pool_geo *g = pool_geo_at(bd, o);
	uint32_t copies = gs_pool_copies(g, o), k, m = 0;
	uint32_t pref = gs_pool_pref(g, o);
	uint64_t phys;
	ssize_t r = -EIO;

	for (k = 0; k < copies && r != sl; k++) {
		gs_pool_locate(g, o, (pref + k) % copies, &m, &phys);
		if (!pool_member_ok(bd, m))
			continue;
		r = gs_q_pread_sync(bd->m[m].q, buf, sl, phys);
		if (r >= 0 && r != sl)
			r = -EIO;
		if (r < 0 && !pool_dev_error(r))
			return r;
		if (r < 0)
			pool_member_fail(bd, m, r);
	}
	if (r != sl) {
		log_lost(bd, m, o);
		return r < 0 ? r : -EIO;
	}
	return sl;
}

/* A read of several segments: each sent to its member's queue at once, joined here. */
struct sync_join {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left;
};

struct sync_piece {
	struct gs_q_io io;	/* first: the member's callback gets this */
	struct sync_join *j;
	uint64_t loff;		/* logical */
	uint32_t member;
	int64_t res;		/* 1: not sent */
};

static void sync_piece_done(struct gs_q_io *io, int64_t res)
{
	struct sync_piece *sp = (struct sync_piece *)io;
	struct sync_join *j = sp->j;

	pthread_mutex_lock(&j->mu);
	sp->res = res;
	if (!--j->left)
		pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
}

#define SYNC_FANOUT	64	/* segments sent at once by one read_sync */

/* Aim @sp at the first healthy copy of the segment at logical @loff. */
static void sync_prep(struct gs_bdev *bd, struct sync_piece *sp, uint64_t loff, uint32_t len,
		      void *buf)
{
	const struct gs_pool_geo *g = pool_geo_at(bd, loff);
	uint32_t copies = gs_pool_copies(g, loff), pref = gs_pool_pref(g, loff);
	uint32_t m = 0, k;
	uint64_t phys = 0;

	for (k = 0; k < copies; k++) {
		gs_pool_locate(g, loff, (pref + k) % copies, &m, &phys);
		if (pool_member_ok(bd, m))
			break;
	}
	*sp = (struct sync_piece){
		.io = { .op = GS_OP_READ, .len = len, .off = phys, .buf = buf,
			.done = sync_piece_done, .priv = bd->m[m].q },
		.loff = loff, .member = m, .res = k < copies ? 0 : 1,
	};
}

/*
 * Read the @n prepared segments: all sent to their members' queues at once,
 * joined here; what did not arrive whole is read again by read_seg_sync
 * (other copies, member failure, the EIO that names it).  0 or -errno.
 */
static int sync_fanout(struct gs_bdev *bd, struct sync_piece *sp, unsigned n)
{
	struct sync_join j;
	unsigned i;

	pthread_mutex_init(&j.mu, NULL);
	pthread_cond_init(&j.cv, NULL);
	j.left = 1;	/* held until every piece is out */
	for (i = 0; i < n; i++) {
		struct gs_q_io *io = &sp[i].io;

		sp[i].j = &j;
		if (sp[i].res)
			continue;
		pthread_mutex_lock(&j.mu);
		j.left++;
		pthread_mutex_unlock(&j.mu);
		if (gs_q_submit(io->priv, &io, 1) < 0) {
			pthread_mutex_lock(&j.mu);
			j.left--;
			sp[i].res = 1;
			pthread_mutex_unlock(&j.mu);
		}
	}
	pthread_mutex_lock(&j.mu);
	j.left--;
	while (j.left)
		pthread_cond_wait(&j.cv, &j.mu);
	pthread_mutex_unlock(&j.mu);
	pthread_cond_destroy(&j.cv);
	pthread_mutex_destroy(&j.mu);
	for (i = 0; i < n; i++) {
		int64_t r;

		if (sp[i].res == (int64_t)sp[i].io.len)
			continue;
		if (sp[i].res < 0 && pool_dev_error(sp[i].res))
			pool_member_fail(bd, sp[i].member, sp[i].res);
		r = read_seg_sync(bd, sp[i].io.buf, sp[i].io.len, sp[i].loff);
		if (r < 0)
			return (int)r;
	}
	return 0;
}

/*
 * Reads on the caller's thread (the fs's direct reads).  A read within one
 * stripe unit goes to its member's read_sync; a longer one would visit the
 * members one after the other, so its segments (up to SYNC_FANOUT at a time)
 * go to their members together: a 1 MiB read over four members waits for
 * one member's share, not for all four in turn.
 */
static int64_t read_sync_locked(struct gs_bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct sync_piece sp[SYNC_FANOUT];
	uint64_t o = off, l = len;

	if (gs_pool_seg_len(&bd->geo, off, len) == len) {
		int64_t r = read_seg_sync(bd, buf, (uint32_t)len, off);

		return r < 0 ? r : (int64_t)len;
	}
	while (l) {
		unsigned n = 0;
		int r;

		for (; l && n < SYNC_FANOUT; n++) {
			uint32_t sl = gs_pool_seg_len(&bd->geo, o, l);

			sync_prep(bd, &sp[n], o, sl, (char *)buf + (o - off));
			o += sl;
			l -= sl;
		}
		r = sync_fanout(bd, sp, n);
		if (r < 0)
			return r;
	}
	return (int64_t)len;
}

const struct gs_backend_ops gs_backend_pool = {
	.name = "pool",
	.open = pool_open,
	.close = pool_close,
	.geometry = pool_geometry,
	.queue_create = pool_queue_create,
	.queue_destroy = pool_queue_destroy,
	.submit = pool_submit,
	.reap = pool_reap,
	.wait = pool_wait,
	.read_sync = pool_read_sync,
};

/* ---- faults: "mK:SPEC" for member K, else every member ---- */

int gs_pool_fault(struct gs_bdev *bd, const char *spec)
{
	uint32_t i, only = UINT32_MAX;
	char fbuf[512];
	int ret = 0;

	if (spec[0] == 'm' && spec[1] >= '0' && spec[1] <= '9') {
		char *e;

		only = (uint32_t)strtoul(spec + 1, &e, 10);
		if (*e != ':' || only >= bd->geo.n)
			return -EINVAL;
		spec = e + 1;
	} else {
		spec = power_spec(spec, fbuf, sizeof(fbuf));
	}
	for (i = 0; i < bd->geo.n && !ret; i++)
		if ((only == UINT32_MAX || only == i) && bd->m[i].q)
			ret = gs_q_fault(bd->m[i].q, spec);
	return ret;
}

/* ---- administration ---- */

struct gs_bdev *pool_bd_of(struct gs_q *q)
{
	return q && q->ops == &gs_backend_pool ? q->bd : NULL;
}

int gs_q_pool_info(struct gs_q *q, char *buf, size_t size)
{
	struct gs_bdev *bd = pool_bd_of(q);
	char uuid[40], last[sizeof(bd->last)];
	uint64_t failed, dirty;
	size_t n = 0;
	uint32_t i;
	int r, rbm;

	if (!bd) {
		if (size)
			buf[0] = 0;
		return 0;
	}
	failed = __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE);
	for (i = 0; i < 16; i++)
		sprintf(uuid + 2 * i + (i >= 4) + (i >= 6) + (i >= 8) + (i >= 10), "%02x%s",
			bd->sb.pool_uuid[i], (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
#define OUT(...)							\
	do {								\
		r = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__); \
		if (r < 0)						\
			return -EINVAL;					\
		n += (size_t)r;						\
	} while (0)
	OUT("pool_uuid: %s\npool_layout: %s\npool_members: %u\npool_stripe_unit: %u\n"
	    "pool_state: %s\npool_failed: %u\npool_resync: %s\n", uuid, pool_layout_name(bd->layout),
	    bd->geo.n, bd->geo.su, failed ? "degraded" : "ok",
	    (unsigned)__builtin_popcountll(failed),
	    le32toh(bd->sb.state) & GS_POOL_ST_RESYNC ? "needed" : "no");
	if (bd->rs_active)
		OUT("pool_add: member %u %llu/%llu (stopped half-way: a read-write open "
		    "finishes it)\n", bd->rs_old.n, (unsigned long long)bd->rs_pos,
		    (unsigned long long)bd->geo.capacity);
	rbm = __atomic_load_n(&bd->rebuilding, __ATOMIC_ACQUIRE);
	if (rbm >= 0)
		OUT("pool_rebuild: member %d %llu/%llu\n", rbm,
		    (unsigned long long)__atomic_load_n(&bd->rebuild_done, __ATOMIC_RELAXED),
		    (unsigned long long)bd->rebuild_total);
	OUT("pool_rebuild_rate: %llu\n",
	    (unsigned long long)__atomic_load_n(&bd->rate, __ATOMIC_RELAXED));
	pthread_mutex_lock(&bd->lock);
	memcpy(last, bd->last, sizeof(last));
	dirty = le64toh(bd->sb.wib_since) ? pool_wib_count(bd) : UINT64_MAX;
	pthread_mutex_unlock(&bd->lock);
	if (dirty != UINT64_MAX)
		OUT("pool_dirty: %llu regions of %llu bytes\n", (unsigned long long)dirty,
		    1ull << bd->wib_shift);
	if (last[0])
		OUT("pool_rebuild_last: %s\n", last);
	/* a replace renames its member under the lock */
	pthread_mutex_lock(&bd->lock);
	for (i = 0; i < bd->geo.n; i++) {
		r = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0,
			     "member%u: %s %s errors=%llu\n", i, bd->m[i].path,
			     (failed >> i & 1) ? (bd->m[i].found ? "failed" : "missing") : "ok",
			     (unsigned long long)__atomic_load_n(&bd->m[i].errors,
								 __ATOMIC_RELAXED));
		if (r < 0)
			break;
		n += (size_t)r;
	}
	pthread_mutex_unlock(&bd->lock);
	if (r < 0)
		return -EINVAL;
#undef OUT
	return (int)n;
}

int pool_same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!strcmp(a, b))
		return 1;
	if (stat(a, &sa) || stat(b, &sb))
		return 0;
	if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode))
		return sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int gs_q_pool_member(struct gs_q *q, const char *path)
{
	struct gs_bdev *bd = pool_bd_of(q);
	uint32_t i;

	if (!bd)
		return -EINVAL;
	for (i = 0; i < bd->geo.n; i++)
		if (pool_same_file(bd->m[i].path, path))
			return (int)i;
	if (strspn(path, "0123456789") == strlen(path) && *path && (uint32_t)atoi(path) < bd->geo.n)
		return atoi(path);
	return -ENOENT;
}

void pool_uuid_gen(uint8_t u[16])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	struct timespec ts;

	if (fd < 0 || read(fd, u, 16) != 16) {
		clock_gettime(CLOCK_REALTIME, &ts);
		for (int i = 0; i < 16; i++)
			u[i] = (uint8_t)((ts.tv_nsec >> (i % 8)) ^ (i * 131) ^ getpid());
	}
	if (fd >= 0)
		close(fd);
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
}

static int member_size(const char *path, uint32_t flags, uint64_t *size)
{
	struct gs_q_geom g;
	struct gs_q *q;
	int ret;

	ret = pool_open_plain(path, flags, &q);
	if (ret) {
		gs_err("pool: %s: %s", path, strerror(-ret));
		return ret;
	}
	ret = gs_q_geometry(q, &g);
	*size = g.capacity;
	gs_q_close(q);
	return ret;
}

/* Open @path as a single device, never as a pool (it may hold a member superblock). */
int pool_open_plain(const char *path, uint32_t flags, struct gs_q **q)
{
	struct gs_q_params plain = { .path = path };
	struct gs_q_params p = { .path = path, .flags = flags };
	int ret;

	p.backend = gs_backend_name(&plain);
	ret = gs_q_open(q, &p);
	if (ret == -EINVAL && !(flags & GS_Q_BUFFERED)) {
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(q, &p);
	}
	return ret;
}

int gs_pool_create(const char *const *paths, unsigned n, const struct gs_pool_opts *o)
{
	struct gs_pool_opts def = { 0 };
	struct gs_dpool_member sb;
	struct gs_pool_geo geo;
	uint64_t minsz = UINT64_MAX, sz, zone;
	uint32_t layout, su, zc, i;
	int ret;

	if (!o)
		o = &def;
	if (!paths || !n || n > GS_POOL_MAX_MEMBERS || layout_of(o->layout, &layout))
		return -EINVAL;
	su = o->stripe_unit ? o->stripe_unit : 65536;
	if (su < 4096 || (su & (su - 1)) || su > (16u << 20))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		for (uint32_t j = 0; j < i; j++)
			if (pool_same_file(paths[i], paths[j])) {
				gs_err("pool: %s is named twice", paths[i]);
				return -EINVAL;
			}
		if (strlen(paths[i]) >= GS_POOL_PATH_MAX) {
			gs_err("pool: %s: path longer than %u bytes", paths[i],
			       GS_POOL_PATH_MAX - 1);
			return -ENAMETOOLONG;
		}
		ret = member_size(paths[i], o->flags, &sz);
		if (ret)
			return ret;
		if (sz < minsz)
			minsz = sz;
	}
	if (o->member_bytes && o->member_bytes < minsz)
		minsz = o->member_bytes;
	/* automatic zone: 1/64 of the raw size, at least 8 MiB; mkfs grows it when
	 * the fs's fixed metadata needs more (bin/gstore/pool.c) */
	zone = o->zone_bytes;
	if (!zone) {
		zone = minsz / 64 * n / (layout == GS_POOL_MIRROR ? n : 1);
		if (zone < (8u << 20))
			zone = 8u << 20;
	}
	ret = gs_pool_geo_init(&geo, layout, n, su, zone, GS_POOL_DATA_OFF, minsz);
	if (ret) {
		gs_err("pool: members of %llu bytes are too small for this layout",
		       (unsigned long long)minsz);
		return ret;
	}
	memset(&sb, 0, sizeof(sb));
	sb.magic = htole64(GS_POOL_MAGIC);
	sb.version = htole32(GS_POOL_VERSION);
	sb.feature_incompat = htole32(GS_POOL_FEAT_INCOMPAT_ZONE);
	sb.layout = htole32(layout);
	sb.nmembers = htole32(n);
	sb.stripe_unit = htole32(su);
	sb.copies = htole32(geo.data.copies);
	zc = geo.zone.copies;
	sb.zone_copies = htole32(zc);
	sb.zone_bytes = htole64(geo.zone.lbytes);
	sb.data_bytes = htole64(geo.data.lbytes);
	sb.data_off = htole64(GS_POOL_DATA_OFF);
	sb.member_bytes = htole64(geo.member_bytes);
	sb.events = htole64(1);
	sb.ctime = htole64((uint64_t)time(NULL));
	pool_uuid_gen(sb.pool_uuid);
	for (i = 0; i < n; i++)
		snprintf(sb.paths[i], GS_POOL_PATH_MAX, "%s", paths[i]);
	for (i = 0; i < n && !ret; i++) {
		struct gs_q *q;

		ret = pool_open_plain(paths[i], o->flags, &q);
		if (ret) {
			gs_err("pool: %s: %s", paths[i], strerror(-ret));
			break;
		}
		pool_uuid_gen(sb.member_uuid);
		ret = pool_sb_write(q, &sb, i);
		gs_q_close(q);
		if (ret)
			gs_err("pool: %s: writing the member superblock: %s", paths[i],
			       strerror(-ret));
	}
	return ret;
}

void pool_progress_add(struct gs_bdev *bd, uint64_t n, gs_pool_progress fn, void *arg)
{
	uint64_t d = __atomic_add_fetch(&bd->rebuild_done, n, __ATOMIC_RELAXED);

	if (fn)
		fn(arg, d, bd->rebuild_total);
}

#define REBUILD_BATCH	16	/* stripe units copied per stop of the pool's I/O (at most) */
#define THROTTLE_NAP_NS	50000000ll	/* a throttled rebuild looks at rate and cancel this often */

int64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/*
 * The throttle: a batch of @bytes that started at @t0 may be followed by the
 * next one only at t0 + bytes / rate.  The rate is read again every nap, so
 * a change (gs_q_pool_throttle) takes effect during a long wait too.
 * -ECANCELED once the pool closes.
 */
int pool_throttle(struct gs_bdev *bd, int64_t t0, uint64_t bytes)
{
	for (;;) {
		uint64_t rate = __atomic_load_n(&bd->rate, __ATOMIC_RELAXED);
		int64_t left;
		struct timespec ts;

		if (__atomic_load_n(&bd->cancel, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		if (!rate)
			return 0;
		left = t0 + (int64_t)(bytes * 1000000000.0 / (double)rate) - pool_now_ns();
		if (left <= 0)
			return 0;
		if (left > THROTTLE_NAP_NS)
			left = THROTTLE_NAP_NS;
		ts.tv_sec = 0;
		ts.tv_nsec = left;
		nanosleep(&ts, NULL);
	}
}

/* With qlock held for writing: wait until no piece sent before is in a member queue. */
void pool_quiesce(struct gs_bdev *bd)
{
	uint32_t ep = bd->epoch & 1;

	bd->epoch++;
	/* acquire: pairs with piece_done's release */
	while (__atomic_load_n(&bd->cnt[ep], __ATOMIC_ACQUIRE))
		usleep(20);
}

/*
 * Copy member @index's @nb stripe units from member byte @phys to @nq, the same
 * place (qlock held for writing): read from the old member in one piece while
 * it reads (it may hold the only copy), else each unit's logical bytes from
 * another copy, all at once (sync_fanout); slots past the last unit are
 * unused and get zeros; then one write.
 */
static int rebuild_rows(struct gs_bdev *bd, unsigned index, struct gs_q *nq, char *buf,
			uint64_t phys, unsigned nb)
{
	struct sync_piece sp[REBUILD_BATCH];
	size_t len = (size_t)nb * bd->geo.su;
	uint64_t off = 0;
	ssize_t r = -EIO;
	unsigned n = 0;

	if (pool_member_ok(bd, index) && bd->m[index].q) {
		r = gs_q_pread_sync(bd->m[index].q, buf, len, phys);
		if (r < 0 && pool_dev_error(r))
			pool_member_fail(bd, index, r);
	}
	if (r != (ssize_t)len) {
		for (unsigned b = 0; b < nb; b++) {
			char *ub = buf + (size_t)b * bd->geo.su;

			if (gs_pool_reverse(&bd->geo, index, phys + (uint64_t)b * bd->geo.su,
					    &off))
				memset(ub, 0, bd->geo.su);
			else
				sync_prep(bd, &sp[n++], off, bd->geo.su, ub);
		}
		r = sync_fanout(bd, sp, n);
		if (r == 0)
			r = (ssize_t)len;
	}
	if (r == (ssize_t)len)
		r = gs_q_pwrite(nq, buf, len, phys);
	if (r == (ssize_t)len)
		return 0;
	gs_err("pool: rebuilding member %u at member byte %llu: %s", index,
	       (unsigned long long)phys, strerror(r < 0 ? (int)-r : EIO));
	return r < 0 ? (int)r : -EIO;
}

/* A replace that has passed its checks: the new device open, the rebuild registered. */
struct rebuild {
	struct gs_bdev *bd;
	unsigned index;
	struct gs_q *nq;
	char *buf;		/* per stripe units */
	unsigned per;		/* stripe units per batch */
	int abort;	/* -errno: end at once (the thread could not start) */
	int partial;	/* the member came back: only the logged regions are copied */
	char path[GS_POOL_PATH_MAX];	/* checked: shorter */
};

/*
 * 1 if @path is member @index come back, no older than the dirty-region log:
 * everything it missed is in the log (pool_wib.c), so only that is copied.
 */
static int came_back(struct gs_bdev *bd, unsigned index, const char *path)
{
	struct gs_dpool_member sb;
	int ok;

	if (!bd->wib || !le64toh(bd->sb.wib_since) ||
	    __atomic_load_n(&bd->wib_bad, __ATOMIC_RELAXED) || !gs_pool_is_member(path))
		return 0;
	/* sb_read logs what it cannot read; here that only means a full rebuild */
	ok = !sb_read(path, &sb) && !memcmp(sb.pool_uuid, bd->sb.pool_uuid, 16) &&
	     le32toh(sb.index) == index && le32toh(sb.nmembers) == bd->geo.n &&
	     le64toh(sb.events) >= le64toh(bd->sb.wib_since);
	return ok;
}

/* 1 if any of the @nb stripe units of member @index from member byte @phys is logged. */
static int rows_dirty(struct gs_bdev *bd, unsigned index, uint64_t phys, unsigned nb)
{
	for (unsigned b = 0; b < nb; b++) {
		uint64_t off;

		if (!gs_pool_reverse(&bd->geo, index, phys + (uint64_t)b * bd->geo.su, &off) &&
		    pool_wib_dirty(bd, off, bd->geo.su))
			return 1;
	}
	return 0;
}

/* The bytes a rebuild copies: every row of the member, or the logged ones' batches. */
static uint64_t rebuild_bytes(struct gs_bdev *bd, const struct rebuild *rb)
{
	const struct gs_pool_area *areas[2] = { &bd->geo.zone, &bd->geo.data };
	uint64_t total = 0;

	for (int a = 0; a < 2; a++)
		for (uint64_t row = 0; row < areas[a]->rows; row += rb->per) {
			unsigned nb = row + rb->per <= areas[a]->rows ? rb->per :
				      (unsigned)(areas[a]->rows - row);

			if (!rb->partial || rows_dirty(bd, rb->index,
						       areas[a]->pbase + row * bd->geo.su, nb))
				total += (uint64_t)nb * bd->geo.su;
		}
	return total;
}

/*
 * Check a replace of member @index by @newpath, open the new device and
 * register the rebuild (from then on every pool write also goes there).
 * -EBUSY while another rebuild runs.
 */
static int rebuild_prepare(struct gs_q *q, unsigned index, const char *newpath,
			   struct rebuild **rbp)
{
	struct gs_bdev *bd = pool_bd_of(q);
	struct rebuild *rb;
	struct gs_q_geom g;
	uint64_t failed;
	int ret;

	if (!bd || index >= bd->geo.n || !newpath || strlen(newpath) >= GS_POOL_PATH_MAX)
		return -EINVAL;
	if (bd->rdonly)
		return -EROFS;
	if (bd->rs_active)
		return -EBUSY;	/* an add stopped half-way: a read-write open finishes it */
	failed = __atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE);
	if ((failed >> index & 1) && !gs_pool_redundant(&bd->geo, failed)) {
		gs_err("pool: member %u (%s) held the only copy of data: nothing to rebuild from",
		       index, bd->m[index].path);
		return -ENODATA;
	}
	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->bd = bd;
	rb->index = index;
	snprintf(rb->path, sizeof(rb->path), "%s", newpath);
	rb->partial = (failed >> index & 1) && came_back(bd, index, newpath);
	ret = pool_open_plain(newpath, q->flags & GS_Q_BUFFERED, &rb->nq);
	if (!ret)
		ret = gs_q_geometry(rb->nq, &g);
	if (!ret && g.capacity < bd->geo.member_bytes) {
		gs_err("pool: %s is smaller than a member (%llu bytes needed)", newpath,
		       (unsigned long long)bd->geo.member_bytes);
		ret = -ENOSPC;
	} else if (ret) {
		gs_err("pool: %s: %s", newpath, strerror(-ret));
	}
	/* batches of up to REBUILD_BATCH units, at most 4 MiB unless one unit is more */
	rb->per = REBUILD_BATCH;
	while (rb->per > 1 && (uint64_t)rb->per * bd->geo.su > (4u << 20))
		rb->per /= 2;
	rb->buf = ret ? NULL : aligned_alloc(4096, (size_t)rb->per * bd->geo.su);
	if (!ret && !rb->buf)
		ret = -ENOMEM;
	if (ret)
		goto free_rb;
	pthread_rwlock_wrlock(&bd->qlock);
	if (bd->rebuilding >= 0) {
		pthread_rwlock_unlock(&bd->qlock);
		ret = -EBUSY;
		goto free_rb;
	}
	bd->rq = rb->nq;
	bd->rb_err = 0;
	bd->rebuild_total = rebuild_bytes(bd, rb);
	__atomic_store_n(&bd->rebuild_done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&bd->rebuilding, (int)index, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&bd->qlock);
	*rbp = rb;
	return 0;
free_rb:
	gs_q_close(rb->nq);
	free(rb->buf);
	free(rb);
	return ret;
}

/*
 * Rebuild: copy every used stripe unit of member @index's rows to the new
 * device at the same place: from the old member while it still reads, else
 * the chunk's logical bytes from the pool (another copy).  From the start,
 * every write and flush the pool gets also goes to the new device
 * (start_write), so nothing written during the copy (online) is missed.
 * Then the new device gets the member superblock and the member's place.
 * Frees @rb.
 */
static int rebuild_run(struct rebuild *rb, gs_pool_progress progress, void *arg)
{
	struct gs_bdev *bd = rb->bd;
	const struct gs_pool_area *areas[2] = { &bd->geo.zone, &bd->geo.data };
	unsigned index = rb->index;
	struct gs_q *nq = rb->nq;
	int ret = rb->abort, a;

	for (a = 0; a < 2 && !ret; a++) {
		const struct gs_pool_area *ar = areas[a];

		for (uint64_t row = 0; row < ar->rows && !ret; row += rb->per) {
			unsigned nb = row + rb->per <= ar->rows ? rb->per : (unsigned)(ar->rows - row);
			int64_t t0 = pool_now_ns();

			if (__atomic_load_n(&bd->cancel, __ATOMIC_ACQUIRE)) {
				ret = -ECANCELED;
				break;
			}
			/* a member come back holds all but the logged regions already */
			if (rb->partial && !rows_dirty(bd, index, ar->pbase + row * bd->geo.su, nb))
				continue;
			/*
			 * A batch of rows is copied with every other I/O of the pool
			 * stopped and drained: a write racing the copy could otherwise
			 * land on the new device before the copy's older bytes.
			 */
			pthread_rwlock_wrlock(&bd->qlock);
			pool_quiesce(bd);
			ret = rebuild_rows(bd, index, nq, rb->buf, ar->pbase + row * bd->geo.su, nb);
			pthread_rwlock_unlock(&bd->qlock);
			pool_progress_add(bd, (uint64_t)nb * bd->geo.su, progress, arg);
			if (!ret)
				ret = pool_throttle(bd, t0, (uint64_t)nb * bd->geo.su);
		}
	}
	if (!ret)
		ret = gs_q_flush(nq);
	pthread_rwlock_wrlock(&bd->qlock);
	pool_quiesce(bd);	/* every write to nq has completed: rb_err is final */
	if (!ret)
		ret = __atomic_load_n(&bd->rb_err, __ATOMIC_RELAXED);
	pthread_mutex_lock(&bd->lock);
	if (!ret) {
		struct gs_q *old = bd->m[index].q;

		snprintf(bd->sb.paths[index], GS_POOL_PATH_MAX, "%s", rb->path);
		snprintf(bd->m[index].path, sizeof(bd->m[index].path), "%s", rb->path);
		pool_uuid_gen(bd->sb.member_uuid);
		/* the new device first gets its superblock, then the member's place */
		ret = pool_sb_write(nq, &bd->sb, index);
		if (!ret) {
			bd->m[index].q = nq;
			bd->m[index].found = 1;
			nq = old;
			__atomic_fetch_and(&bd->failed, ~(1ull << index), __ATOMIC_ACQ_REL);
			/* no member misses anything now: the log starts afresh next time */
			if (!__atomic_load_n(&bd->failed, __ATOMIC_ACQUIRE)) {
				pool_wib_clear(bd);
				__atomic_store_n(&bd->wib_bad, 0, __ATOMIC_RELAXED);
			}
			__atomic_store_n(&bd->m[index].errors, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&bd->m[index].logged, 0, __ATOMIC_RELAXED);
			bd->sb.failed = htole64(~0ull);	/* force the write */
			sb_persist(bd);
		}
	}
	snprintf(bd->last, sizeof(bd->last), "member %u -> %s: %s%s", index, rb->path,
		 ret ? strerror(-ret) : "ok", !ret && rb->partial ? " (logged regions only)" : "");
	__atomic_store_n(&bd->rebuilding, -1, __ATOMIC_RELEASE);
	bd->rq = NULL;
	pthread_mutex_unlock(&bd->lock);
	pthread_rwlock_unlock(&bd->qlock);
	/* drained above: no piece refers to the queue closed here (old, or nq on failure) */
	gs_q_close(nq);
	free(rb->buf);
	free(rb);
	return ret;
}

int gs_q_pool_replace(struct gs_q *q, unsigned index, const char *newpath,
		      gs_pool_progress progress, void *arg)
{
	struct rebuild *rb;
	int ret = rebuild_prepare(q, index, newpath, &rb);

	return ret ? ret : rebuild_run(rb, progress, arg);
}

static void *bg_main(void *arg)
{
	struct rebuild *rb = arg;
	struct gs_bdev *bd = rb->bd;
	unsigned index = rb->index;
	int ret = rebuild_run(rb, NULL, NULL);

	if (ret)
		gs_err("pool: rebuild of member %u failed: %s", index, strerror(-ret));
	else
		gs_info("pool: member %u (%s) rebuilt", index, bd->m[index].path);
	return NULL;
}

/* Wait for the last background rebuild's thread (bd->lock not held). */
static void bg_join(struct gs_bdev *bd)
{
	pthread_t t;
	int bg;

	pthread_mutex_lock(&bd->lock);
	bg = bd->bg;
	t = bd->bg_thread;
	bd->bg = 0;
	pthread_mutex_unlock(&bd->lock);
	if (bg)
		pthread_join(t, NULL);
}

int gs_q_pool_replace_start(struct gs_q *q, unsigned index, const char *newpath)
{
	struct gs_bdev *bd = pool_bd_of(q);
	struct rebuild *rb;
	int ret;

	if (!bd)
		return -EINVAL;
	ret = rebuild_prepare(q, index, newpath, &rb);
	if (ret)
		return ret;
	/* registered: no other rebuild can start, so the previous thread has ended */
	bg_join(bd);
	pthread_mutex_lock(&bd->lock);
	ret = -pthread_create(&bd->bg_thread, NULL, bg_main, rb);
	bd->bg = !ret;
	pthread_mutex_unlock(&bd->lock);
	if (ret) {
		/* never started: let rebuild_run unwind the registration at once */
		rb->abort = ret;
		rebuild_run(rb, NULL, NULL);
	}
	return ret;
}

int gs_q_pool_throttle(struct gs_q *q, uint64_t bytes_per_s)
{
	struct gs_bdev *bd = pool_bd_of(q);

	if (!bd)
		return -EINVAL;
	__atomic_store_n(&bd->rate, bytes_per_s, __ATOMIC_RELAXED);
	return 0;
}

int64_t gs_q_pool_verify(struct gs_q *q, unsigned flags, gs_pool_progress progress, void *arg)
{
	struct gs_bdev *bd = pool_bd_of(q);
	const struct gs_pool_area *areas[2];
	char *a0 = NULL, *ak = NULL;
	uint64_t total, done = 0;
	int64_t bad = 0;
	int a;

	if (!bd)
		return -EINVAL;
	if (bd->rs_active)
		return -EBUSY;	/* copies are compared in one layout */
	areas[0] = &bd->geo.zone;
	areas[1] = &bd->geo.data;
	total = bd->geo.capacity;
	a0 = aligned_alloc(4096, bd->geo.su);
	ak = aligned_alloc(4096, bd->geo.su);
	if (!a0 || !ak) {
		bad = -ENOMEM;
		goto out;
	}
	for (a = 0; a < 2 && bad >= 0; a++) {
		const struct gs_pool_area *ar = areas[a];

		for (uint64_t off = ar->lstart; off < ar->lstart + ar->lbytes; off += bd->geo.su) {
			uint32_t m, k, have = 0;
			uint64_t phys;

			/* per unit, so a replace waiting for the lock is not held up long */
			pthread_rwlock_rdlock(&bd->qlock);
			for (k = 0; k < ar->copies; k++) {
				char *dst = have ? ak : a0;
				ssize_t r;

				gs_pool_locate(&bd->geo, off, k, &m, &phys);
				if (!pool_member_ok(bd, m))
					continue;
				r = gs_q_pread_sync(bd->m[m].q, dst, bd->geo.su, phys);
				if (r != (ssize_t)bd->geo.su) {
					pool_member_fail(bd, m, r < 0 ? r : -EIO);
					continue;
				}
				if (have++ && memcmp(a0, ak, bd->geo.su)) {
					if (!(flags & GS_POOL_REPAIR))
						gs_err("pool: logical bytes %llu..+%u differ between "
						       "member copies (member %u)",
						       (unsigned long long)off, bd->geo.su, m);
					bad++;
					if (!(flags & GS_POOL_REPAIR))
						break;
					/* resync: the first healthy copy wins */
					r = gs_q_pwrite(bd->m[m].q, a0, bd->geo.su, phys);
					if (r != (ssize_t)bd->geo.su) {
						pool_member_fail(bd, m, r < 0 ? r : -EIO);
						continue;
					}
				}
			}
			pthread_rwlock_unlock(&bd->qlock);
			done += bd->geo.su;
			if (progress)
				progress(arg, done, total);
		}
	}
	if (bad >= 0 && (flags & GS_POOL_REPAIR) && !bd->rdonly) {
		/* every copy agrees now */
		if (!bad || gs_q_flush(q) == 0) {
			pthread_mutex_lock(&bd->lock);
			bd->sb.state = htole32(le32toh(bd->sb.state) & ~GS_POOL_ST_RESYNC);
			pool_sb_update(bd);
			pthread_mutex_unlock(&bd->lock);
		}
	}
out:
	free(a0);
	free(ak);
	return bad;
}
