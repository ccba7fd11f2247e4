// SPDX-License-Identifier: MIT
/*
 * Object I/O around the block cache: direct leases (gstore_fs.h).
 *
 * The model is the kernel's iomap: ->iomap_begin maps a file range (and
 * allocates it for writes), the caller does its I/O against that mapping,
 * ->iomap_end settles what the I/O changed.  Here:
 *
 *   begin  [GS_LEASE_ALLOC: back the holes with unwritten extents, one
 *          contiguous run per hole where possible, in the running
 *          transaction]; snapshot the range's mapping; put the lease on the
 *          inode (truncate and punch of an overlapping range now wait);
 *          write back and drop every cache line over the range's blocks, so
 *          direct reads see buffered writes and no cached copy outlives the
 *          direct I/O.
 *   I/O    by object offset, split over the snapshot's extents and the
 *          device's max_io; holes and unwritten extents read as zeros.
 *   end    wait for the lease's I/O; convert the unwritten blocks it wrote
 *          (and extend the size to the last byte written) in the running
 *          transaction -- after the data is on the device, and every commit
 *          flushes the device before it writes the journal, so a mapping is
 *          never durable before its data; drop the cache's lines over the
 *          range again (a buffered reader may have cached the old bytes
 *          meanwhile); unpin.
 *
 * Durability: a lease's data is durable once the next gs_fs_fsync() of the
 * object (any object: the commit covers the whole running transaction)
 * returns; overwrites need only the device flush every fsync does, new and
 * unwritten blocks the conversion that gs_fs_lease_end() put into the
 * transaction.
 *
 * Unwritten blocks are converted whole, so writes into them must cover whole
 * fs blocks (else -EINVAL): a partly written new block would expose the
 * previous owner's bytes.  All lease I/O is direct: offsets, lengths and
 * buffers aligned to the device's logical block.
 */
#include <fcntl.h>
#include <stdlib.h>

#include "fs_internal.h"

#define SUBMIT_CHUNK	256	/* device requests per gs_q_submit() */

/* ---- the lease list: what truncate and punch wait for ---- */

static bool overlaps(const struct gs_lease *l, uint64_t from, uint64_t to)
{
	return l->off < to && from < l->end;
}

void lease_wrlock(struct gs_fs *fs, struct gs_inode *ip, uint64_t from, uint64_t to)
{
	for (;;) {
		struct gs_lease *l;

		pthread_rwlock_wrlock(&ip->rw);
		pthread_mutex_lock(&fs->lease_mu);
		for (l = ip->leases; l && !overlaps(l, from, to); l = l->inext)
			;
		if (!l) {
			/* no new lease can start: begin takes rw */
			pthread_mutex_unlock(&fs->lease_mu);
			return;
		}
		/* ask the holders that can be asked to end theirs (gs_fs_lease_set_recall) */
		for (; l; l = l->inext)
			if (overlaps(l, from, to) && l->recall && !l->recalled) {
				l->recalled = true;
				l->recall(l->recall_arg);
			}
		/* the lease's end takes rw to convert: wait without it (lease_mu
		 * is held from the check to the wait, so its end cannot slip by) */
		pthread_rwlock_unlock(&ip->rw);
		pthread_cond_wait(&fs->lease_cv, &fs->lease_mu);
		pthread_mutex_unlock(&fs->lease_mu);
	}
}

static void lease_link(struct gs_lease *l)
{
	pthread_mutex_lock(&l->fs->lease_mu);
	l->inext = l->ip->leases;
	l->ip->leases = l;
	pthread_mutex_unlock(&l->fs->lease_mu);
}

static void lease_unlink(struct gs_lease *l)
{
	struct gs_fs *fs = l->fs;

	pthread_mutex_lock(&fs->lease_mu);
	for (struct gs_lease **pp = &l->ip->leases; *pp; pp = &(*pp)->inext)
		if (*pp == l) {
			*pp = l->inext;
			break;
		}
	pthread_cond_broadcast(&fs->lease_cv);
	pthread_mutex_unlock(&fs->lease_mu);
}

/* ---- the mapping snapshot ---- */

static int ext_push(struct gs_lease *l, uint32_t *cap, uint64_t off, uint64_t len, uint64_t dev,
		    uint32_t kind)
{
	struct lease_ext *p = l->next ? &l->ext[l->next - 1] : NULL;

	/* one entry for what the device sees as one run */
	if (p && p->kind == kind && p->off + p->len == off &&
	    (kind == LEASE_HOLE || p->dev + p->len == dev)) {
		p->len += len;
		return 0;
	}
	if (l->next == *cap) {
		uint32_t c = *cap ? *cap * 2 : 8;
		struct lease_ext *v = realloc(l->ext, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->ext = v;
		*cap = c;
	}
	l->ext[l->next++] = (struct lease_ext){ .off = off, .len = len, .dev = dev, .kind = kind };
	return 0;
}

/* The mapping of the range's blocks, under ip->rw. */
static int snapshot(struct gs_lease *l)
{
	struct gs_fs *fs = l->fs;
	uint64_t b1 = (l->end + fs->bs - 1) >> fs->bshift, lb = l->off >> fs->bshift;
	uint32_t cap = 0;
	int ret = 0;

	while (lb < b1 && !ret) {
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&l->ip->map, lb, &inside);
		uint64_t n;

		if (!e || !inside) {
			uint64_t hend = e && e->lblk < b1 ? e->lblk : b1;

			ret = ext_push(l, &cap, lb << fs->bshift, (hend - lb) << fs->bshift, 0,
				       LEASE_HOLE);
			lb = hend;
			continue;
		}
		n = (e->lblk + e->len < b1 ? e->lblk + e->len : b1) - lb;
		ret = ext_push(l, &cap, lb << fs->bshift, n << fs->bshift,
			       (e->pblk + (lb - e->lblk)) << fs->bshift,
			       e->flags & GS_EXT_UNWRITTEN ? LEASE_UNWRITTEN : LEASE_MAPPED);
		lb += n;
	}
	return ret;
}

const struct lease_ext *lease_find(const struct gs_lease *l, uint64_t off)
{
	uint32_t lo = 0, hi = l->next;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct lease_ext *e = &l->ext[mid];

		if (off < e->off)
			hi = mid;
		else if (off >= e->off + e->len)
			lo = mid + 1;
		else
			return e;
	}
	return NULL;
}

/* Write back and drop the cache's lines over the range's blocks. */
static int drop_cached(struct gs_lease *l)
{
	int err = 0;

	for (uint32_t i = 0; i < l->next; i++) {
		const struct lease_ext *e = &l->ext[i];
		int r;

		if (e->kind == LEASE_HOLE)
			continue;
		r = gs_cache_drop_range(l->fs->c, e->dev, e->len);
		if (r && !err)
			err = r;
	}
	return err;
}

/* ---- begin / end ---- */

static int alloc_once(struct gs_lease *l)
{
	struct gs_fs *fs = l->fs;
	struct gs_inode *ip = l->ip;
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = ip->freed ? -ENOENT : fs_check_rw(fs);
	if (!ret)
		ret = array_alloc_holes(fs, ip, l->off >> fs->bshift,
					(l->end + fs->bs - 1) >> fs->bshift);
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

static void lease_free(struct gs_lease *l)
{
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l->conv.e);
	free(l->ext);
	free(l);
}

int gs_fs_lease_begin(struct gs_fs *fs, uint64_t ino, uint64_t off, uint64_t len,
		      unsigned flags, struct gs_lease **lp)
{
	struct gs_lease *l;
	struct gs_inode *ip;
	uint64_t end;
	int ret;

	if (!fs || !lp || !len)
		return -EINVAL;
	if (flags & GS_LEASE_ALLOC)
		flags |= GS_LEASE_WRITE;
	if (!(flags & (GS_LEASE_READ | GS_LEASE_WRITE)) ||
	    (flags & ~(unsigned)(GS_LEASE_READ | GS_LEASE_WRITE | GS_LEASE_ALLOC)))
		return -EINVAL;
	if (add_ovf(off, len, &end) || end > GS_MAX_FILE_SIZE)
		return -EFBIG;
	if (flags & GS_LEASE_WRITE) {
		ret = fs_check_rw(fs);
		if (ret < 0)
			return ret;
	}
	/* an open: an unlinked object keeps its blocks until the lease ends */
	ret = gs_fs_open(fs, ino, flags & GS_LEASE_WRITE ? O_RDWR : O_RDONLY);
	if (ret < 0)
		return ret;
	ret = data_get(fs, ino, &ip);
	if (ret < 0)
		goto release;
	l = calloc(1, sizeof(*l));
	if (!l) {
		ret = -ENOMEM;
		goto put;
	}
	l->fs = fs;
	l->ip = ip;
	l->ino = ino;
	l->off = off;
	l->end = end;
	l->flags = flags;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if (flags & GS_LEASE_ALLOC) {
		jnl_op_begin(fs);
		pthread_rwlock_wrlock(&ip->rw);
		ret = alloc_once(l);
		if (ret == -ENOSPC) {
			/* freed blocks wait for a checkpoint: take it, retry */
			pthread_rwlock_unlock(&ip->rw);
			if (fs_reclaim(fs) > 0) {
				pthread_rwlock_wrlock(&ip->rw);
				ret = alloc_once(l);
			} else {
				pthread_rwlock_rdlock(&ip->rw);
			}
		}
	} else {
		pthread_rwlock_rdlock(&ip->rw);
		ret = ip->freed ? -ENOENT : 0;
	}
	if (!ret)
		ret = snapshot(l);
	if (!ret)
		lease_link(l);	/* before rw goes: truncate checks under rw */
	pthread_rwlock_unlock(&ip->rw);
	if (ret < 0)
		goto free_lease;
	ret = drop_cached(l);
	if (ret < 0) {
		gs_fs_lease_end(l);
		return ret;
	}
	*lp = l;
	return 0;

free_lease:
	lease_free(l);
put:
	data_put(fs, ip);
release:
	gs_fs_release(fs, ino);
	return ret;
}

/* Convert what the lease wrote into unwritten blocks, extend the size. */
static int settle_once(struct gs_lease *l)
{
	struct gs_fs *fs = l->fs;
	struct gs_inode *ip = l->ip;
	int ret = 0;

	pthread_rwlock_wrlock(&ip->rw);
	pthread_mutex_lock(&fs->ns);
	if (fs->error) {
		ret = -EIO;
		goto unlock;
	}
	if (l->conv.n && !alloc_map_room(fs)) {
		ret = -ENOSPC;	/* nothing changed: the caller may reclaim and retry */
		goto unlock;
	}
	for (uint32_t i = 0; i < l->conv.n && !ret; i++)
		ret = xmap_convert(fs, ip, l->conv.e[i].blk, l->conv.e[i].blk + l->conv.e[i].len);
	if (!ret && l->conv.n)
		ret = xmap_sync(fs, ip);
	if (!ret) {
		if (l->wend > ip->m.size)
			ip->m.size = l->wend;
		itouch(ip, true, true);
		ret = iwrite(fs, ip);
	}
	if (ret < 0)
		fs_fail(fs, ret, "lease end");
unlock:
	pthread_mutex_unlock(&fs->ns);
	pthread_rwlock_unlock(&ip->rw);
	return ret;
}

int gs_fs_lease_end(struct gs_lease *l)
{
	struct gs_fs *fs;
	uint64_t ino;
	int ret, r;

	if (!l)
		return -EINVAL;
	fs = l->fs;
	ino = l->ino;
	pthread_mutex_lock(&l->mu);
	while (l->inflight)
		pthread_cond_wait(&l->cv, &l->mu);
	ret = l->err;
	pthread_mutex_unlock(&l->mu);
	if (l->wend) {
		jnl_op_begin(fs);
		r = settle_once(l);
		if (r == -ENOSPC && fs_reclaim(fs) > 0)
			r = settle_once(l);
		if (r && !ret)
			ret = r;
	}
	/* copies a buffered reader cached while the device changed under it */
	r = drop_cached(l);
	if (r && !ret)
		ret = r;
	lease_unlink(l);
	data_put(fs, l->ip);
	lease_free(l);
	gs_fs_release(fs, ino);
	return ret;
}

/* ---- accounting of I/O under a lease ---- */

void lease_io_start(struct gs_lease *l, uint32_t n)
{
	pthread_mutex_lock(&l->mu);
	l->inflight += n;
	pthread_mutex_unlock(&l->mu);
}

void lease_io_done(struct gs_lease *l, int err)
{
	pthread_mutex_lock(&l->mu);
	if (err && !l->err)
		l->err = err;
	if (!--l->inflight)
		pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

/* Record under l->mu. */
static void written_locked(struct gs_lease *l, uint64_t off, uint64_t len)
{
	struct gs_fs *fs = l->fs;
	uint64_t end = off + len, b0 = (off + fs->bs - 1) >> fs->bshift, b1 = end >> fs->bshift;

	if (end > l->wend)
		l->wend = end;
	/* unwritten blocks convert only when written whole */
	for (uint64_t b = b0; b < b1;) {
		const struct lease_ext *e = lease_find(l, b << fs->bshift);
		uint64_t eb;

		if (!e)
			break;
		eb = (e->off + e->len) >> fs->bshift;
		if (eb > b1)
			eb = b1;
		if (e->kind == LEASE_UNWRITTEN) {
			struct fext *last = l->conv.n ? &l->conv.e[l->conv.n - 1] : NULL;

			if (last && last->blk + last->len == b)
				last->len += eb - b;
			else if (fext_add(&l->conv, b, eb - b) < 0 && !l->err)
				l->err = -ENOMEM;
		}
		b = eb;
	}
}

void lease_written(struct gs_lease *l, uint64_t off, uint64_t len)
{
	if (!len)
		return;
	pthread_mutex_lock(&l->mu);
	written_locked(l, off, len);
	pthread_mutex_unlock(&l->mu);
}

/* ---- I/O ---- */

/* Checks before any I/O: inside the lease, aligned, allowed.  Writes may
 * not touch holes, and must cover unwritten blocks whole. */
static int io_check(const struct gs_lease *l, const void *buf, uint64_t len, uint64_t off,
		    bool write)
{
	const struct gs_fs *fs = l->fs;
	uint64_t end, a = fs->lba - 1;

	if (write && !(l->flags & GS_LEASE_WRITE))
		return -EBADF;	/* a write lease reads too */
	if (add_ovf(off, len, &end) || off < l->off || end > l->end)
		return -EINVAL;
	if ((off | len | (uintptr_t)buf) & a)
		return -EINVAL;
	if (!write)
		return 0;
	for (uint64_t pos = off; pos < end;) {
		const struct lease_ext *e = lease_find(l, pos);
		uint64_t n;

		if (!e)
			return -EINVAL;
		n = (e->off + e->len < end ? e->off + e->len : end) - pos;
		if (e->kind == LEASE_HOLE)
			return -ENODATA;
		if (e->kind == LEASE_UNWRITTEN && ((pos | n) & (fs->bs - 1)))
			return -EINVAL;
		pos += n;
	}
	return 0;
}

static uint32_t max_io(const struct gs_fs *fs)
{
	struct gs_q_geom g;
	uint32_t m = 1u << 20;

	if (!gs_q_geometry(fs->q, &g) && g.max_io)
		m = g.max_io;
	return m & ~(fs->lba - 1);
}

static ssize_t lease_rw(struct gs_lease *l, void *buf, size_t len, uint64_t off, bool write)
{
	struct gs_fs *fs = l->fs;
	uint32_t mio = max_io(fs);
	uint8_t *p = buf;
	uint64_t done = 0;
	int ret;

	if (len > (1ULL << 31))
		len = 1ULL << 31;
	ret = io_check(l, buf, len, off, write);
	if (ret < 0)
		return ret;
	while (done < len) {
		uint64_t pos = off + done;
		const struct lease_ext *e = lease_find(l, pos);
		uint64_t n = (e->off + e->len < off + len ? e->off + e->len : off + len) - pos;

		if (e->kind != LEASE_MAPPED && !write) {
			memset(p + done, 0, n);
		} else {
			uint64_t dev = e->dev + (pos - e->off);

			for (uint64_t k = 0; k < n;) {
				uint32_t c = n - k < mio ? (uint32_t)(n - k) : mio;
				ssize_t r = write ? gs_q_pwrite(fs->q, p + done + k, c, dev + k)
						  : gs_q_pread_sync(fs->q, p + done + k, c, dev + k);

				if (r != (ssize_t)c) {
					ret = r < 0 ? (int)r : -EIO;
					break;
				}
				k += c;
			}
			if (ret < 0)
				break;
			if (write)
				lease_written(l, pos, n);
		}
		done += n;
	}
	if (ret < 0) {
		pthread_mutex_lock(&l->mu);
		if (!l->err)
			l->err = ret;
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	return (ssize_t)done;
}

ssize_t gs_fs_lease_pread(struct gs_lease *l, void *buf, size_t len, uint64_t off)
{
	return l ? lease_rw(l, buf, len, off, false) : -EINVAL;
}

ssize_t gs_fs_lease_pwrite(struct gs_lease *l, const void *buf, size_t len, uint64_t off)
{
	return l ? lease_rw(l, (void *)buf, len, off, true) : -EINVAL;
}

/* One gs_obj_io in flight: its device pieces. */
struct oio;

struct piece {
	struct gs_q_io q;
	struct oio *o;
	uint64_t off;		/* object offset of the piece */
};

struct oio {
	struct gs_obj_io *io;
	struct gs_lease *l;
	uint32_t pending;	/* pieces not completed */
	int err;
	uint32_t n;
	struct piece p[];
};

/* The last piece of an io: report it once, then let the lease's end go. */
static void oio_finish(struct oio *o)
{
	struct gs_lease *l = o->l;
	struct gs_obj_io *io = o->io;
	int err = __atomic_load_n(&o->err, __ATOMIC_RELAXED);

	if (!err && io->op == GS_OP_WRITE)
		lease_written(l, io->off, io->len);
	free(o);
	/* the callback may free or reuse io */
	io->done(io, err ? err : (int64_t)io->len);
	lease_io_done(l, err);
}

/* Completion callback of a device piece, on a poller thread. */
static void piece_done(struct gs_q_io *q, int64_t res)
{
	struct piece *p = (struct piece *)((char *)q - offsetof(struct piece, q));
	struct oio *o = p->o;

	if (res != (int64_t)q->len)
		__atomic_store_n(&o->err, res < 0 ? (int)res : -EIO, __ATOMIC_RELAXED);
	/* acq_rel: the last one sees every piece's err */
	if (!__atomic_sub_fetch(&o->pending, 1, __ATOMIC_ACQ_REL))
		oio_finish(o);
}

/* Device pieces of @io (zeroing the parts of reads that have no data). */
static uint32_t count_pieces(const struct gs_lease *l, const struct gs_obj_io *io, uint32_t mio)
{
	uint32_t k = 0;

	for (uint64_t pos = io->off; pos < io->off + io->len;) {
		const struct lease_ext *e = lease_find(l, pos);
		uint64_t n = (e->off + e->len < io->off + io->len ? e->off + e->len
								 : io->off + io->len) - pos;

		if (e->kind == LEASE_MAPPED || io->op == GS_OP_WRITE)
			k += (uint32_t)((n + mio - 1) / mio);
		pos += n;
	}
	return k;
}

static void build_pieces(struct oio *o, uint32_t mio)
{
	const struct gs_lease *l = o->l;
	struct gs_obj_io *io = o->io;
	uint32_t k = 0;

	for (uint64_t pos = io->off; pos < io->off + io->len;) {
		const struct lease_ext *e = lease_find(l, pos);
		uint64_t n = (e->off + e->len < io->off + io->len ? e->off + e->len
								 : io->off + io->len) - pos;
		char *b = (char *)io->buf + (pos - io->off);

		if (e->kind != LEASE_MAPPED && io->op == GS_OP_READ) {
			memset(b, 0, n);
		} else {
			for (uint64_t c = 0; c < n; c += mio) {
				struct piece *p = &o->p[k++];

				p->q = (struct gs_q_io){
					.op = io->op, .len = (uint32_t)(n - c < mio ? n - c : mio),
					.off = e->dev + (pos - e->off) + c, .buf = b + c,
					.done = piece_done,
				};
				p->o = o;
				p->off = pos + c;
			}
		}
		pos += n;
	}
}

int gs_fs_lease_submit(struct gs_lease *l, struct gs_obj_io **ios, unsigned n)
{
	struct gs_q_io **qv = NULL;
	struct oio **ov;
	uint32_t mio, total = 0, nq = 0;
	int ret = 0;

	if (!l || (n && !ios))
		return -EINVAL;
	if (!n)
		return 0;
	mio = max_io(l->fs);
	ov = calloc(n, sizeof(*ov));
	if (!ov)
		return -ENOMEM;
	for (unsigned i = 0; i < n && !ret; i++) {
		struct gs_obj_io *io = ios[i];
		uint32_t k;

		if ((io->op != GS_OP_READ && io->op != GS_OP_WRITE) || !io->done || !io->len) {
			ret = -EINVAL;
			break;
		}
		ret = io_check(l, io->buf, io->len, io->off, io->op == GS_OP_WRITE);
		if (ret < 0)
			break;
		k = count_pieces(l, io, mio);
		ov[i] = malloc(sizeof(*ov[i]) + k * sizeof(ov[i]->p[0]));
		if (!ov[i]) {
			ret = -ENOMEM;
			break;
		}
		*ov[i] = (struct oio){ .io = io, .l = l, .pending = k, .n = k };
		total += k;
	}
	if (!ret && total && !(qv = malloc(total * sizeof(*qv))))
		ret = -ENOMEM;
	if (ret < 0) {
		for (unsigned i = 0; i < n; i++)
			free(ov[i]);
		free(ov);
		return ret;
	}
	lease_io_start(l, n);
	for (unsigned i = 0; i < n; i++) {
		build_pieces(ov[i], mio);
		for (uint32_t k = 0; k < ov[i]->n; k++)
			qv[nq++] = &ov[i]->p[k].q;
	}
	/* reads of nothing but holes are done already */
	for (unsigned i = 0; i < n; i++)
		if (!ov[i]->n)
			oio_finish(ov[i]);
	for (uint32_t done = 0; done < nq;) {
		uint32_t k = nq - done < SUBMIT_CHUNK ? nq - done : SUBMIT_CHUNK;
		int r = gs_q_submit(l->fs->q, qv + done, k);

		if (r < 0) {
			/* not queued: fail them through the normal completion */
			for (uint32_t i = done; i < nq; i++)
				piece_done(qv[i], r);
			break;
		}
		done += k;
	}
	free(qv);
	free(ov);
	return (int)n;
}

/* ---- buffered helpers by object offset ---- */

void gs_fs_readahead(struct gs_fs *fs, uint64_t ino, uint64_t off, uint64_t len)
{
	struct gs_inode *ip;
	uint64_t b0, b1, end;

	if (!fs || !len || add_ovf(off, len, &end) || data_get(fs, ino, &ip) < 0)
		return;
	pthread_rwlock_rdlock(&ip->rw);
	b0 = off >> fs->bshift;
	b1 = (end + fs->bs - 1) >> fs->bshift;
	while (b0 < b1) {
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, b0, &inside);
		uint64_t n;

		if (!e || e->lblk >= b1)
			break;
		if (!inside) {
			b0 = e->lblk;
			continue;
		}
		n = (e->lblk + e->len < b1 ? e->lblk + e->len : b1) - b0;
		if (!(e->flags & GS_EXT_UNWRITTEN))
			gs_cache_readahead(fs->c, (e->pblk + (b0 - e->lblk)) << fs->bshift,
					   n << fs->bshift);
		b0 += n;
	}
	pthread_rwlock_unlock(&ip->rw);
	data_put(fs, ip);
}
