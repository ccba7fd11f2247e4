// SPDX-License-Identifier: MIT
/*
 * The "uring" backend: an image file or a block device through io_uring.
 *
 * One io_uring per poller, created in the poller thread (SINGLE_ISSUER and
 * DEFER_TASKRUN when the kernel has them: completions are run only when the
 * poller asks, never by interrupting it).  The device fd is a registered
 * file; buffers from gs_q_register_buffer() go into a sparse registered
 * buffer table that each queue updates lazily from its own thread, so
 * every poller's ring gets every region.  Short transfers and -EAGAIN are
 * resubmitted for the remainder; callers only see whole results.
 *
 * The queue's wait arms a read of the wake eventfd inside the ring, so one
 * blocking io_uring_enter() covers both new work (a kick) and completions.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gpuq_internal.h"
#include "gs_log.h"

#define URING_MAX_BUFS	GS_Q_MAX_REGIONS
#define URING_MAX_IO	(1u << 30)
#define DEF_OPT_IO	(128u << 10)
#define WAKE_TAG	1ull	/* user_data of the eventfd read: no bio is at 1 */

/* Test hooks (tests #include this file): cap each transfer at this many
 * bytes to force short I/O; turn every Nth completion into -EAGAIN. */
static uint32_t uring_test_chunk;
static uint32_t uring_test_eagain;

struct gs_bdev {
	int fd;
	int is_blk;
	struct gs_q_geom geom;
	/*
	 * The registered buffer table every queue copies: slot i holds bufs[i]
	 * (iov_base NULL: empty) at generation gen[i].  changes is bumped
	 * (release) after each edit; queues re-sync, under lock, when it moved.
	 */
	pthread_mutex_t lock;
	struct iovec bufs[URING_MAX_BUFS];
	uint64_t gen[URING_MAX_BUFS];
	uint64_t changes;
};

struct gs_bq {
	struct io_uring ring;
	struct gs_bdev *bd;
	int wake_fd;
	int wake_armed;
	int woken;		/* a wake was reaped since the last wait */
	uint64_t wake_val;
	int fixed_file;
	int fixed_bufs;
	uint64_t seen_changes;
	uint64_t sgen[URING_MAX_BUFS];	/* generation of each slot in this ring */
	uint64_t buf_ok;		/* bit i: slot i is registered in this ring */
	uint32_t ncqe;			/* test hook counter */
	struct gs_bio **retry;		/* resubmissions that found no sqe */
	unsigned nretry, retry_cap;
};

/* ---- device ---- */

static uint32_t file_dio_align(int fd)
{
#ifdef STATX_DIOALIGN
	struct statx sx;

	if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align)
		return sx.stx_dio_offset_align;
#endif
	return 512;
}

/*
 * The request slots of the block queue under @st (a block device, or the
 * one holding a file): its sysfs nr_requests, the whole disk's for a
 * partition.  0 when there is none (tmpfs, overlay, a network filesystem).
 */
static uint32_t blk_nr_requests(const struct stat *st)
{
	dev_t d = S_ISBLK(st->st_mode) ? st->st_rdev : st->st_dev;
	const char *fmt[] = { "/sys/dev/block/%u:%u/queue/nr_requests",
			      "/sys/dev/block/%u:%u/../queue/nr_requests" };
	char path[96];
	unsigned v = 0;

	for (unsigned i = 0; i < 2 && !v; i++) {
		FILE *f;

		snprintf(path, sizeof(path), fmt[i], major(d), minor(d));
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static int probe(struct gs_bdev *bd, const struct gs_q_params *p)
{
	struct gs_q_geom *g = &bd->geom;
	struct stat st;

	if (fstat(bd->fd, &st))
		return -errno;
	memset(g, 0, sizeof(*g));
	g->max_io = URING_MAX_IO;
	g->nr_devices = 1;
	if (S_ISBLK(st.st_mode)) {
		unsigned int opt = 0;
		int lba = 0;
		uint64_t size = 0;

		bd->is_blk = 1;
		if (ioctl(bd->fd, BLKSSZGET, &lba) || ioctl(bd->fd, BLKGETSIZE64, &size))
			return -errno;
		if (ioctl(bd->fd, BLKIOOPT, &opt))
			opt = 0;
		g->lba_size = lba > 0 ? (uint32_t)lba : 512;
		g->opt_io = opt ? opt : DEF_OPT_IO;
		g->capacity = size;
	} else if (S_ISREG(st.st_mode)) {
		if ((p->flags & GS_Q_CREATE) && (uint64_t)st.st_size < p->size) {
			if (ftruncate(bd->fd, (off_t)p->size))
				return -errno;
			st.st_size = (off_t)p->size;
		}
		g->lba_size = (p->flags & GS_Q_BUFFERED) ? 512 : file_dio_align(bd->fd);
		g->opt_io = DEF_OPT_IO;
		g->capacity = (uint64_t)st.st_size;
	} else {
		return -ENODEV;
	}
	if (g->opt_io < g->lba_size)
		g->opt_io = g->lba_size;
	/* buffered I/O goes through the page cache, not straight to the queue */
	if (!(p->flags & GS_Q_BUFFERED))
		g->dev_depth = blk_nr_requests(&st);
	g->capacity -= g->capacity % g->lba_size;
	g->max_io -= g->max_io % g->lba_size;
	return 0;
}

static int uring_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	struct gs_bdev *bd;
	int flags = O_CLOEXEC, ret;

	flags |= (p->flags & GS_Q_RDONLY) ? O_RDONLY : O_RDWR;
	if (!(p->flags & GS_Q_BUFFERED))
		flags |= O_DIRECT;
	if (p->flags & GS_Q_CREATE) {
		if (!p->size || (p->flags & GS_Q_RDONLY))
			return -EINVAL;
		flags |= O_CREAT;
	}
	bd = calloc(1, sizeof(*bd));
	if (!bd)
		return -ENOMEM;
	bd->fd = open(p->path, flags, 0644);
	if (bd->fd < 0) {
		ret = -errno;
		gs_err("uring: open %s: %s", p->path, strerror(-ret));
		goto free_bd;
	}
	ret = probe(bd, p);
	if (ret) {
		gs_err("uring: %s: %s", p->path, strerror(-ret));
		goto close_fd;
	}
	pthread_mutex_init(&bd->lock, NULL);
	*bdp = bd;
	return 0;
close_fd:
	close(bd->fd);
free_bd:
	free(bd);
	return ret;
}

static void uring_close(struct gs_bdev *bd)
{
	close(bd->fd);
	pthread_mutex_destroy(&bd->lock);
	free(bd);
}

static int uring_geometry(struct gs_bdev *bd, struct gs_q_geom *g)
{
	*g = bd->geom;
	return 0;
}

static int uring_register_buffer(struct gs_bdev *bd, void *addr, size_t len)
{
	int i;

	pthread_mutex_lock(&bd->lock);
	for (i = 0; i < URING_MAX_BUFS && bd->bufs[i].iov_base; i++)
		;
	if (i == URING_MAX_BUFS) {
		i = -ENOSPC;
	} else {
		bd->bufs[i].iov_base = addr;
		bd->bufs[i].iov_len = len;
		bd->gen[i]++;
		/* release: the slot before the count that makes queues look */
		__atomic_add_fetch(&bd->changes, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&bd->lock);
	return i;
}

/* Empty slot @i; each queue drops it before its next submission. */
static void uring_unregister_buffer(struct gs_bdev *bd, int i)
{
	if (i < 0 || i >= URING_MAX_BUFS)
		return;
	pthread_mutex_lock(&bd->lock);
	bd->bufs[i].iov_base = NULL;
	bd->bufs[i].iov_len = 0;
	bd->gen[i]++;
	__atomic_add_fetch(&bd->changes, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&bd->lock);
}

/* ---- queues ---- */

static int ring_setup(struct gs_bq *q, unsigned entries)
{
	static const unsigned try_flags[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		0,
	};
	unsigned i;
	int ret = -EINVAL;

	for (i = 0; i < sizeof(try_flags) / sizeof(try_flags[0]); i++) {
		struct io_uring_params prm;

		memset(&prm, 0, sizeof(prm));
		prm.flags = try_flags[i] | IORING_SETUP_CQSIZE;
		prm.cq_entries = entries * 2;
		ret = io_uring_queue_init_params(entries, &q->ring, &prm);
		if (ret != -EINVAL)
			return ret;
	}
	return ret;
}

static int uring_queue_create(struct gs_bdev *bd, uint32_t depth, int wake_fd,
			      struct gs_bq **qp)
{
	struct gs_bq *q;
	unsigned entries = 8;
	int ret;

	/* depth requests, the wake read, and room for resubmissions */
	while (entries < depth + 2)
		entries <<= 1;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->retry_cap = depth;
	q->retry = calloc(depth, sizeof(*q->retry));
	if (!q->retry) {
		ret = -ENOMEM;
		goto free_q;
	}
	q->bd = bd;
	q->wake_fd = wake_fd;
	ret = ring_setup(q, entries);
	if (ret) {
		gs_err("uring: io_uring_queue_init: %s", strerror(-ret));
		goto free_retry;
	}
	q->fixed_file = io_uring_register_files(&q->ring, &bd->fd, 1) == 0;
	q->fixed_bufs = io_uring_register_buffers_sparse(&q->ring, URING_MAX_BUFS) == 0;
	/* saves an fd lookup per io_uring_enter; optional */
	io_uring_register_ring_fd(&q->ring);
	*qp = q;
	return 0;
free_retry:
	free(q->retry);
free_q:
	free(q);
	return ret;
}

static void uring_queue_destroy(struct gs_bq *q)
{
	io_uring_queue_exit(&q->ring);
	free(q->retry);
	free(q);
}

/* Bring this ring's registered buffer table up to the device's. */
static void sync_bufs(struct gs_bq *q)
{
	struct gs_bdev *bd = q->bd;
	/* acquire: pairs with the release of an edit of the table */
	uint64_t c = __atomic_load_n(&bd->changes, __ATOMIC_ACQUIRE);
	unsigned i;

	if (c == q->seen_changes)
		return;
	pthread_mutex_lock(&bd->lock);
	for (i = 0; i < URING_MAX_BUFS; i++) {
		struct iovec iov = bd->bufs[i];

		if (q->sgen[i] == bd->gen[i])
			continue;
		q->sgen[i] = bd->gen[i];
		q->buf_ok &= ~(1ull << i);
		if (!q->fixed_bufs)
			continue;
		/* an empty iovec clears the slot; in-flight users keep their pages.
		 * Failure (RLIMIT_MEMLOCK, ...): this region stays unfixed here. */
		if (io_uring_register_buffers_update_tag(&q->ring, i, &iov, NULL, 1) == 1 &&
		    iov.iov_base)
			q->buf_ok |= 1ull << i;
	}
	q->seen_changes = __atomic_load_n(&bd->changes, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&bd->lock);
}

static void prep_bio(struct gs_bq *q, struct io_uring_sqe *sqe, struct gs_bio *b)
{
	int fd = q->fixed_file ? 0 : q->bd->fd;
	char *buf = (char *)b->buf + b->done;
	uint32_t len = b->len - b->done;
	uint64_t off = b->off + b->done;
	int fixed = b->buf_index >= 0 && b->buf_index < URING_MAX_BUFS &&
		    (q->buf_ok >> b->buf_index & 1);

	if (uring_test_chunk && len > uring_test_chunk)
		len = uring_test_chunk;
	switch (b->op) {
	case GS_OP_READ:
		if (fixed)
			io_uring_prep_read_fixed(sqe, fd, buf, len, off, b->buf_index);
		else
			io_uring_prep_read(sqe, fd, buf, len, off);
		break;
	case GS_OP_WRITE:
		if (fixed)
			io_uring_prep_write_fixed(sqe, fd, buf, len, off, b->buf_index);
		else
			io_uring_prep_write(sqe, fd, buf, len, off);
		break;
	default:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	}
	if (q->fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, b);
}

/* Queue the resubmissions that found no sqe earlier; 1 if any went in. */
static int flush_retries(struct gs_bq *q)
{
	unsigned i = 0;

	while (i < q->nretry) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		if (!sqe)
			break;
		prep_bio(q, sqe, q->retry[i++]);
	}
	if (i && i < q->nretry)
		memmove(q->retry, q->retry + i, (q->nretry - i) * sizeof(q->retry[0]));
	q->nretry -= i;
	return i != 0;
}

static int uring_submit(struct gs_bq *q, struct gs_bio **ios, unsigned n)
{
	unsigned i;
	int ret;

	sync_bufs(q);
	flush_retries(q);
	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		if (!sqe)
			break;
		prep_bio(q, sqe, ios[i]);
	}
	/*
	 * Errors here leave the sqes in the ring: the next enter submits them
	 * (the kernel consumes from its head), so they still count as taken.
	 */
	ret = io_uring_submit(&q->ring);
	if (ret < 0 && ret != -EAGAIN && ret != -EBUSY && ret != -EINTR && !i)
		return ret;
	return (int)i;
}

static void resubmit(struct gs_bq *q, struct gs_bio *b, int *queued)
{
	struct io_uring_sqe *sqe = q->nretry ? NULL : io_uring_get_sqe(&q->ring);

	if (sqe) {
		prep_bio(q, sqe, b);
		*queued = 1;
		return;
	}
	/* at most depth bios exist, so the retry list cannot overflow */
	if (q->nretry < q->retry_cap)
		q->retry[q->nretry++] = b;
}

static int uring_reap(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned max)
{
	struct io_uring_cqe *cqes[64];
	unsigned n = 0;
	int queued = 0;

	while (n < max) {
		unsigned want = max - n < 64 ? max - n : 64;
		unsigned got = io_uring_peek_batch_cqe(&q->ring, cqes, want), i;

		for (i = 0; i < got; i++) {
			uint64_t ud = cqes[i]->user_data;
			struct gs_bio *b = (struct gs_bio *)(uintptr_t)ud;
			int r = cqes[i]->res;

			if (ud == WAKE_TAG) {
				q->wake_armed = 0;
				q->woken = 1;
				continue;
			}
			if (uring_test_eagain && ++q->ncqe % uring_test_eagain == 0 &&
			    b->op != GS_OP_FLUSH)
				r = -EAGAIN;
			if (r == -EAGAIN || r == -EINTR) {
				resubmit(q, b, &queued);
				continue;
			}
			if (r > 0 && b->op != GS_OP_FLUSH && b->done + (uint32_t)r < b->len) {
				b->done += r;
				resubmit(q, b, &queued);
				continue;
			}
			done[n] = b;
			if (r < 0)
				res[n] = r;
			else if (b->op == GS_OP_FLUSH)
				res[n] = 0;
			else if (r == 0 && b->op == GS_OP_WRITE)
				res[n] = -EIO;	/* a write that makes no progress */
			else
				res[n] = b->done + r;	/* a read stops at end of file */
			n++;
		}
		io_uring_cq_advance(&q->ring, got);
		if (got < want)
			break;
	}
	if (queued || flush_retries(q))
		io_uring_submit(&q->ring);
	return (int)n;
}

static int uring_wait_nr(struct gs_bq *q, unsigned nr, int64_t timeout_us)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts, *tsp = NULL;
	int ret;

	if (q->wake_fd >= 0 && !q->wake_armed) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		if (sqe) {
			io_uring_prep_read(sqe, q->wake_fd, &q->wake_val, sizeof(q->wake_val), 0);
			io_uring_sqe_set_data64(sqe, WAKE_TAG);
			q->wake_armed = 1;
		}
	}
	/*
	 * A wake reaped since the last wait was meant for a decision the
	 * caller made before reaping it (a stop flag loaded before the reap,
	 * a ring checked before a producer's kick): the eventfd is drained now,
	 * so sleeping would lose it.  Return and let the caller look again.
	 */
	if (q->woken || io_uring_cq_ready(&q->ring)) {
		q->woken = 0;
		io_uring_submit(&q->ring);
		return 0;
	}
	if (timeout_us >= 0) {
		ts.tv_sec = timeout_us / 1000000;
		ts.tv_nsec = (timeout_us % 1000000) * 1000;
		tsp = &ts;
	}
	/* with DEFER_TASKRUN the kernel wakes us once, when nr are ready */
	ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, nr ? nr : 1, tsp, NULL);
	if (ret == -ETIME)
		return -ETIME;
	if (ret < 0 && ret != -EINTR)
		return ret;
	return 0;
}

static int uring_wait(struct gs_bq *q, int64_t timeout_us)
{
	return uring_wait_nr(q, 1, timeout_us);
}

/*
 * Synchronous read on the caller's thread: pread(2) on the device fd (opened
 * O_DIRECT unless GS_Q_BUFFERED), so a small read costs one system call and
 * no thread hand-off.  Short reads continue; at the end of an image file that
 * shrank it returns what it got (as gs_q_pread() does), or -EIO for nothing.
 */
static int64_t uring_read_sync(struct gs_bdev *bd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(bd->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return done ? (int64_t)done : -EIO;
		done += (size_t)r;
	}
	return (int64_t)len;
}

const struct gs_backend_ops gs_backend_uring = {
	.name = "uring",
	.open = uring_open,
	.close = uring_close,
	.geometry = uring_geometry,
	.register_buffer = uring_register_buffer,
	.unregister_buffer = uring_unregister_buffer,
	.queue_create = uring_queue_create,
	.queue_destroy = uring_queue_destroy,
	.submit = uring_submit,
	.reap = uring_reap,
	.wait = uring_wait,
	.wait_nr = uring_wait_nr,
	.read_sync = uring_read_sync,
};
