// SPDX-License-Identifier: MIT
/*
 * N-D spaces: where blocks and the index live.
 *
 * fs store: the index in the GS_T_ND object's own data (gs_fs_read/write,
 * through the fs cache: small, hot), building blocks in one internal object
 * whose slots are each one contiguous device extent (gs_fs_alloc_extent).
 * Block I/O goes straight to gs_q on the extent: one request per block (or
 * max_io pieces of it), all of a batch in one gs_q_submit.  nd never reads
 * blocks through gs_cache, so the fs cache holds no copies of them.
 *
 * file store: plain files (unit tests, tools); synchronous pread/pwrite,
 * completions run inside submit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gstore_cache.h"
#include "gstore_fs.h"
#include "gstore_q.h"
#include "nd_internal.h"

void nd_store_set_stride(struct nd_store *s, uint64_t block_bytes)
{
	uint64_t g = s->gran;

	if (s->dev_align > g)
		g = s->dev_align;
	s->stride = (block_bytes + g - 1) / g * g;
	/* slots come from line-aligned runs (GS_ALLOC_LINE_ALIGNED): no padding;
	 * spaces formatted with padded slots keep theirs from the superblock */
	s->slot_bytes = s->stride;
}

static uint64_t align_up(uint64_t v, uint32_t a)
{
	return a ? (v + a - 1) / a * a : v;
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

static int f_slot_alloc(struct nd_store *s, uint64_t first, uint64_t n)
{
	return 0;	/* files grow on write */
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
	.slot_alloc = f_slot_alloc,
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
	f->s.dev_align = 0;
	f->mfd = meta_fd;
	f->dfd = data_fd;
	*sp = &f->s;
	return 0;
}

/* ---- a gstore filesystem ---- */

struct fsstore {
	struct nd_store s;
	struct gs_fs *fs;
	struct gs_q *q;
	struct gs_cache *cache;
	uint64_t ino, data_ino;
	uint32_t max_io;
	pthread_mutex_t mu;
	uint64_t *dev;		/* slot -> device offset + 1 (0: not looked up yet) */
	uint64_t ndev;
};

/* One block transfer in max_io pieces. */
struct fs_bio {
	struct nd_bio *b;
	int pending;
	int err;
	struct gs_q_io io[];
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

static int dev_remember(struct fsstore *g, uint64_t slot, uint64_t dev)
{
	if (slot >= g->ndev) {
		uint64_t n = g->ndev ? g->ndev : 64;
		uint64_t *p;

		while (n <= slot)
			n *= 2;
		p = realloc(g->dev, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + g->ndev, 0, (n - g->ndev) * sizeof(*p));
		g->dev = p;
		g->ndev = n;
	}
	g->dev[slot] = dev + 1;
	return 0;
}

static int dev_of(struct fsstore *g, uint64_t slot, uint64_t *dev);

/*
 * One run for all @n slots (one journal operation, one cache flush), halved
 * on -ENOSPC until single slots; the fs drops any cache line of a previous
 * owner over a run.
 */
static int g_slot_alloc(struct nd_store *s, uint64_t first, uint64_t n)
{
	struct fsstore *g = (struct fsstore *)s;
	unsigned flags = GS_ALLOC_CONTIG;
	uint64_t dev;
	int ret;

	/*
	 * Slots of whole lines (spaces made since line-aligned runs): each run starts
	 * on a line and every slot in it does too.  That needs the line the space was
	 * made with (a mount with another -o line cannot add blocks to it).  Older
	 * spaces keep their padding and plain runs.
	 */
	if (s->dev_align && s->slot_bytes % s->dev_align == 0) {
		if (s->dev_align != gs_cache_line_size(g->cache))
			return -EINVAL;
		flags |= GS_ALLOC_LINE_ALIGNED;
	}
	ret = gs_fs_alloc_extent(g->fs, g->data_ino, first * s->slot_bytes, n * s->slot_bytes,
				 flags, &dev);
	if ((ret == -ENOSPC || ret == -EFBIG || ret == -EEXIST) && n > 1) {
		ret = g_slot_alloc(s, first, n / 2);
		return ret ? ret : g_slot_alloc(s, first + n / 2, n - n / 2);
	}
	if (ret == -EEXIST)	/* mapped by an earlier attempt that failed later */
		return dev_of(g, first, &dev);
	if (ret)
		return ret;
	pthread_mutex_lock(&g->mu);
	for (uint64_t i = 0; i < n && !ret; i++)
		ret = dev_remember(g, first + i, align_up(dev + i * s->slot_bytes, s->dev_align));
	pthread_mutex_unlock(&g->mu);
	return ret;
}

static int dev_of(struct fsstore *g, uint64_t slot, uint64_t *dev)
{
	uint64_t len;
	int ret;

	pthread_mutex_lock(&g->mu);
	if (slot < g->ndev && g->dev[slot]) {
		*dev = g->dev[slot] - 1;
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	pthread_mutex_unlock(&g->mu);
	ret = gs_fs_bmap(g->fs, g->data_ino, slot * g->s.slot_bytes, dev, &len);
	if (ret)
		return ret == -ENODATA ? -EIO : ret;
	if (len < g->s.slot_bytes)
		return -EIO;	/* every slot was allocated as one run */
	*dev = align_up(*dev, g->s.dev_align);
	pthread_mutex_lock(&g->mu);
	ret = dev_remember(g, slot, *dev);
	pthread_mutex_unlock(&g->mu);
	return ret;
}

static void g_io_done(struct gs_q_io *io, int64_t res)
{
	struct fs_bio *fb = io->priv;
	int left, err;

	if (res < 0)
		__atomic_store_n(&fb->err, (int)res, __ATOMIC_RELAXED);
	else if ((uint64_t)res != io->len)
		__atomic_store_n(&fb->err, -EIO, __ATOMIC_RELAXED);
	/* the last piece to finish completes the block (acq_rel: sees every piece's err) */
	left = __atomic_sub_fetch(&fb->pending, 1, __ATOMIC_ACQ_REL);
	if (left)
		return;
	err = __atomic_load_n(&fb->err, __ATOMIC_RELAXED);
	fb->b->done(fb->b, err);
	free(fb);
}

#define SUBMIT_CHUNK 256

static int g_submit(struct nd_store *s, struct nd_bio **b, unsigned n)
{
	struct fsstore *g = (struct fsstore *)s;
	unsigned pieces = (s->stride + g->max_io - 1) / g->max_io, nio = 0, done = 0;
	struct gs_q_io **ios;
	int ret = 0;

	ios = malloc((size_t)n * pieces * sizeof(*ios));
	if (!ios)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct fs_bio *fb;
		uint64_t dev;

		ret = dev_of(g, b[i]->slot, &dev);
		if (ret)
			goto unwind;
		fb = calloc(1, sizeof(*fb) + pieces * sizeof(fb->io[0]));
		if (!fb) {
			ret = -ENOMEM;
			goto unwind;
		}
		fb->b = b[i];
		fb->pending = pieces;
		for (unsigned p = 0; p < pieces; p++) {
			uint64_t o = (uint64_t)p * g->max_io;
			struct gs_q_io *io = &fb->io[p];

			io->op = b[i]->op == GS_ND_OP_READ ? GS_OP_READ : GS_OP_WRITE;
			io->len = s->stride - o < g->max_io ? s->stride - o : g->max_io;
			io->off = dev + o;
			io->buf = (char *)b[i]->buf + o;
			io->done = g_io_done;
			io->priv = fb;
			ios[nio++] = io;
		}
	}
	/* all of them now; the ring takes them in chunks */
	while (done < nio) {
		unsigned k = nio - done < SUBMIT_CHUNK ? nio - done : SUBMIT_CHUNK;

		ret = gs_q_submit(g->q, ios + done, k);
		if (ret < 0)
			break;
		done += k;
	}
	if (done < nio) {
		/* fail what was not queued, piece by piece, through the normal path */
		for (unsigned i = done; i < nio; i++)
			g_io_done(ios[i], ret);
	}
	free(ios);
	return 0;
unwind:
	/* nothing submitted yet: free the pieces built so far */
	for (unsigned i = 0; i < nio; i += pieces)
		free(ios[i]->priv);
	free(ios);
	return ret;
}

/*
 * Blocks written so far reach the media (flush), then the journal commits
 * the slots' extents and the metadata object: gs_fs_fsync commits the
 * whole running transaction, for every object, and flushes again after the
 * commit block.
 */
static int g_sync(struct nd_store *s)
{
	struct fsstore *g = (struct fsstore *)s;
	int ret = gs_q_flush(g->q);

	return ret ? ret : gs_fs_fsync(g->fs, g->data_ino, 0);
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
	struct fsstore *g = (struct fsstore *)s;

	pthread_mutex_destroy(&g->mu);
	free(g->dev);
	free(g);
}

static const struct nd_store_ops fs_ops = {
	.meta_read = g_meta_read,
	.meta_write = g_meta_write,
	.slot_alloc = g_slot_alloc,
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
	if (ret)
		return ret;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->fs = fs;
	g->q = gs_fs_queue(fs);
	g->cache = gs_fs_cache(fs);
	ret = gs_q_geometry(g->q, &geom);
	if (ret) {
		free(g);
		return ret;
	}
	g->ino = ino;
	g->data_ino = data_ino;
	g->max_io = geom.max_io >= sf.block_size ? geom.max_io / sf.block_size * sf.block_size
						  : sf.block_size;
	g->s.ops = &fs_ops;
	g->s.align = geom.lba_size > 64 ? geom.lba_size : 4096;
	g->s.gran = sf.block_size;
	/* blocks must not share a cache line with anything cached (gstore_fs.h REQUEST 5) */
	g->s.dev_align = gs_cache_line_size(g->cache);
	pthread_mutex_init(&g->mu, NULL);
	*sp = &g->s;
	return 0;
}
