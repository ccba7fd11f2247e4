// SPDX-License-Identifier: MIT
/*
 * N-D spaces: where blocks and the index live.
 *
 * fs store: the index in the GS_T_ND object's own data (gs_fs_read/write,
 * through the fs cache: small, hot), building blocks in one internal object,
 * slot k at bytes [k * slot_bytes, k * slot_bytes + stride).  Block I/O goes
 * around the fs cache under a direct lease (gstore_fs.h): one lease per
 * batch over its slots' span, one object I/O per block, all of a batch in
 * one gs_fs_lease_submit; a write lease allocates the new slots (one
 * contiguous run for a batch's new slots where the device has one) and its
 * end makes them part of the object.  nd never sees a device address, and
 * the lease keeps the fs cache coherent.
 *
 * file store: plain files (unit tests, tools); synchronous pread/pwrite,
 * completions run inside submit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_q.h"
#include "nd_internal.h"

void nd_store_set_stride(struct nd_store *s, uint64_t block_bytes)
{
	s->stride = (block_bytes + s->gran - 1) / s->gran * s->gran;
	s->slot_bytes = s->stride;
}

/* ---- plain files ---- */

struct fstore {
	struct nd_store s;
	int mfd, dfd;
};

static ssize_t f_meta_read(struct nd_store *s, void *buf, size_t len, uint64_t off)
{
	struct fstore *f = (struct fstore *)s;
	ssize_t r = pread(f->mfd, buf, len, off);

	return r < 0 ? -errno : r;
}

static ssize_t f_meta_write(struct nd_store *s, const void *buf, size_t len, uint64_t off)
{
	struct fstore *f = (struct fstore *)s;
	ssize_t r = pwrite(f->mfd, buf, len, off);

	return r < 0 ? -errno : r;
}

static int f_submit(struct nd_store *s, struct nd_bio **b, unsigned n)
{
	struct fstore *f = (struct fstore *)s;

	for (unsigned i = 0; i < n; i++) {
		uint64_t off = b[i]->slot * s->slot_bytes;
		ssize_t r;

		if (b[i]->op == GS_ND_OP_READ) {
			r = pread(f->dfd, b[i]->buf, s->stride, off);
			if (r >= 0 && (uint64_t)r < s->stride)
				memset((char *)b[i]->buf + r, 0, s->stride - r);
		} else {
			r = pwrite(f->dfd, b[i]->buf, s->stride, off);
			if (r >= 0 && (uint64_t)r < s->stride)
				r = -EIO;
		}
		b[i]->done(b[i], r < 0 ? (r == -1 ? -errno : (int)r) : 0);
	}
	return 0;
}

static int f_sync(struct nd_store *s)
{
	struct fstore *f = (struct fstore *)s;

	if (fdatasync(f->dfd) || fdatasync(f->mfd))
		return errno == EINVAL ? 0 : -errno;	/* memfd, pipes: nothing to sync */
	return 0;
}

static void f_usage(struct nd_store *s, uint64_t *bytes)
{
	struct fstore *f = (struct fstore *)s;
	struct stat a, b;

	*bytes = 0;
	if (!fstat(f->dfd, &a) && !fstat(f->mfd, &b))
		*bytes = (uint64_t)(a.st_blocks + b.st_blocks) * 512;
}

static void f_close(struct nd_store *s)
{
	struct fstore *f = (struct fstore *)s;

	close(f->mfd);
	close(f->dfd);
	free(f);
}

static const struct nd_store_ops file_ops = {
	.meta_read = f_meta_read,
	.meta_write = f_meta_write,
	.submit = f_submit,
	.sync = f_sync,
	.usage = f_usage,
	.close = f_close,
};

int nd_store_file(struct nd_store **sp, int meta_fd, int data_fd, uint32_t align)
{
	struct fstore *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->s.ops = &file_ops;
	f->s.align = align ? align : 64;
	f->s.gran = 4096;
	f->mfd = meta_fd;
	f->dfd = data_fd;
	*sp = &f->s;
	return 0;
}

/* ---- a gstore filesystem ---- */

struct fsstore {
	struct nd_store s;
	struct gs_fs *fs;
	uint64_t ino, data_ino;
};

/* A batch of block transfers under one lease; submit waits for all of it. */
struct fs_batch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left;
};

struct fs_bio {
	struct gs_obj_io io;
	struct nd_bio *b;
	struct fs_batch *batch;
};

static ssize_t g_meta_read(struct nd_store *s, void *buf, size_t len, uint64_t off)
{
	struct fsstore *g = (struct fsstore *)s;

	return gs_fs_read(g->fs, g->ino, buf, len, off);
}

static ssize_t g_meta_write(struct nd_store *s, const void *buf, size_t len, uint64_t off)
{
	struct fsstore *g = (struct fsstore *)s;

	return gs_fs_write(g->fs, g->ino, buf, len, off);
}

/* Completion of one block, on an I/O thread. */
static void g_io_done(struct gs_obj_io *io, int64_t res)
{
	struct fs_bio *fb = (struct fs_bio *)((char *)io - offsetof(struct fs_bio, io));
	struct fs_batch *bt = fb->batch;

	fb->b->done(fb->b, res < 0 ? (int)res : res == io->len ? 0 : -EIO);
	pthread_mutex_lock(&bt->mu);
	if (!--bt->left)
		pthread_cond_signal(&bt->cv);
	pthread_mutex_unlock(&bt->mu);
}

/*
 * All @n transfers (one op) under one lease over the span of their slots:
 * a write lease allocates the slots not backed yet (new slots are at the
 * end: one contiguous run), the lease's end makes them part of the data
 * object.  The blocks' I/O runs in parallel; submit returns after the end,
 * so every transfer is complete (and, for writes, settled in the running
 * transaction) when the batch owner sees its completions.
 */
static int g_submit(struct nd_store *s, struct nd_bio **b, unsigned n)
{
	struct fsstore *g = (struct fsstore *)s;
	struct fs_batch bt = { .left = n };
	uint64_t lo = UINT64_MAX, hi = 0;
	struct gs_obj_io **iov;
	struct fs_bio *fb;
	struct gs_lease *l;
	unsigned flags;
	int ret, r;

	if (!n)
		return 0;
	flags = b[0]->op == GS_ND_OP_READ ? GS_LEASE_READ : GS_LEASE_ALLOC;
	for (unsigned i = 0; i < n; i++) {
		if ((b[i]->op == GS_ND_OP_READ) != (flags == GS_LEASE_READ))
			return -EINVAL;
		if (b[i]->slot < lo)
			lo = b[i]->slot;
		if (b[i]->slot > hi)
			hi = b[i]->slot;
	}
	fb = calloc(n, sizeof(*fb));
	iov = malloc(n * sizeof(*iov));
	if (!fb || !iov) {
		ret = -ENOMEM;
		goto free;
	}
	ret = gs_fs_lease_begin(g->fs, g->data_ino, lo * s->slot_bytes,
				(hi - lo) * s->slot_bytes + s->stride, flags, &l);
	if (ret)
		goto free;
	if (n == 1 && flags == GS_LEASE_READ) {
		/* one block and the caller waits: read it on this thread (one
		 * system call, as a pread(2) reader does), not through a poller
		 * and two thread hand-offs */
		ssize_t r = gs_fs_lease_pread(l, b[0]->buf, s->stride, b[0]->slot * s->slot_bytes);

		ret = gs_fs_lease_end(l);
		b[0]->done(b[0], r < 0 ? (int)r : (uint64_t)r == s->stride ? ret : -EIO);
		ret = 0;
		goto free;
	}
	pthread_mutex_init(&bt.mu, NULL);
	pthread_cond_init(&bt.cv, NULL);
	for (unsigned i = 0; i < n; i++) {
		fb[i].b = b[i];
		fb[i].batch = &bt;
		fb[i].io = (struct gs_obj_io){
			.op = b[i]->op == GS_ND_OP_READ ? GS_OP_READ : GS_OP_WRITE,
			.len = (uint32_t)s->stride, .off = b[i]->slot * s->slot_bytes,
			.buf = b[i]->buf, .done = g_io_done,
		};
		iov[i] = &fb[i].io;
	}
	ret = gs_fs_lease_submit(l, iov, n);
	if (ret >= 0) {
		ret = 0;
		pthread_mutex_lock(&bt.mu);
		while (bt.left)
			pthread_cond_wait(&bt.cv, &bt.mu);
		pthread_mutex_unlock(&bt.mu);
	}
	/* an error here (settling the new slots) fails a batch whose
	 * completions already reported success: say so */
	r = gs_fs_lease_end(l);
	if (ret == 0 && r < 0)
		ret = r;
	pthread_mutex_destroy(&bt.mu);
	pthread_cond_destroy(&bt.cv);
free:
	free(fb);
	free(iov);
	return ret;
}

/*
 * gs_fs_fsync commits the whole running transaction (the slots' extents and
 * the metadata object's changes) after a device flush that covers the
 * blocks written under leases.
 */
static int g_sync(struct nd_store *s)
{
	struct fsstore *g = (struct fsstore *)s;

	return gs_fs_fsync(g->fs, g->data_ino, 0);
}

static void g_usage(struct nd_store *s, uint64_t *bytes)
{
	struct fsstore *g = (struct fsstore *)s;
	struct gs_stat a, b;

	*bytes = 0;
	if (!gs_fs_getattr(g->fs, g->data_ino, &a) && !gs_fs_getattr(g->fs, g->ino, &b))
		*bytes = (a.blocks + b.blocks) * 512;
}

static void g_close(struct nd_store *s)
{
	free(s);
}

static const struct nd_store_ops fs_ops = {
	.meta_read = g_meta_read,
	.meta_write = g_meta_write,
	.submit = g_submit,
	.sync = g_sync,
	.usage = g_usage,
	.close = g_close,
};

int nd_store_fs(struct nd_store **sp, struct gs_fs *fs, uint64_t ino, uint64_t data_ino)
{
	struct gs_fs_statfs sf;
	struct gs_q_geom geom;
	struct fsstore *g;
	int ret;

	ret = gs_fs_statfs(fs, &sf);
	if (!ret)
		ret = gs_fs_geometry(fs, &geom);
	if (ret)
		return ret;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->fs = fs;
	g->ino = ino;
	g->data_ino = data_ino;
	g->s.ops = &fs_ops;
	/* lease I/O is direct: buffers aligned to the device block, at least 4 KiB */
	g->s.align = geom.lba_size > 4096 ? geom.lba_size : 4096;
	/* whole fs blocks: new slots are written whole, unwritten blocks convert whole */
	g->s.gran = sf.block_size;
	*sp = &g->s;
	return 0;
}
