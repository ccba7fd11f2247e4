// SPDX-License-Identifier: MIT
/*
 * Backend "uring-passthru": NVMe Read/Write/Flush commands through io_uring
 * (IORING_OP_URING_CMD, NVME_URING_CMD_IO) on the NVMe generic character
 * device /dev/ngXnY, for controllers that stay with the kernel driver.  No
 * block layer, no page cache; needs Linux >= 5.19 and CAP_SYS_ADMIN (or
 * read/write access to the ng node).
 *
 * Rings use 128-byte SQEs and 32-byte CQEs (the NVMe command rides inside
 * the SQE).  A completion's res is -errno from the kernel or the positive
 * NVMe status field, mapped to -errno once here.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backend.h"
#include "nvme_kmod.h"
#include "gs_log.h"

#define MAX_IO		(128u << 10)
#define WAKE_TAG	(~0ull)

struct gs_bdev {
	int fd;
	uint32_t nsid, lba_shift;
	uint64_t nlba;
};

struct gs_bq {
	struct io_uring ring;
	struct gs_bdev *bd;
	int wake_fd;
	int wake_armed;
	int woken;		/* a wake was reaped since the last wait (uring.c) */
	uint64_t wake_val;
	uint32_t inflight, depth;
};

/* Identify Namespace through the admin passthrough ioctl of the ng node. */
static int identify_ns(struct gs_bdev *bd)
{
	uint8_t *id = aligned_alloc(4096, 4096);
	struct nvme_admin_cmd c;
	int ret;

	if (!id)
		return -ENOMEM;
	memset(&c, 0, sizeof(c));
	c.opcode = 0x06;	/* Identify */
	c.nsid = bd->nsid;
	c.addr = (uintptr_t)id;
	c.data_len = 4096;
	c.cdw10 = 0;		/* CNS 0: namespace */
	ret = ioctl(bd->fd, NVME_IOCTL_ADMIN_CMD, &c);
	if (ret) {
		ret = ret < 0 ? -errno : -EIO;
	} else {
		uint8_t flbas = id[26] & 0xf;

		memcpy(&bd->nlba, id, 8);
		bd->lba_shift = id[128 + 4 * flbas + 2];
		if (!bd->nlba || bd->lba_shift < 9 || bd->lba_shift > 16)
			ret = -ENODEV;
	}
	free(id);
	return ret;
}

static int pt_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	struct gs_bdev *bd = calloc(1, sizeof(*bd));
	int ret;

	if (!bd)
		return -ENOMEM;
	if (!p->path) {
		ret = -EINVAL;
		goto free_bd;
	}
	bd->fd = open(p->path, (p->flags & GS_Q_RDONLY ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (bd->fd < 0) {
		ret = -errno;
		gs_err("uring-passthru: open %s: %s", p->path, strerror(-ret));
		goto free_bd;
	}
	ret = ioctl(bd->fd, NVME_IOCTL_ID);
	if (ret <= 0) {
		ret = ret < 0 ? -errno : -ENODEV;
		gs_err("uring-passthru: %s is not an NVMe namespace: %s", p->path, strerror(-ret));
		goto close_fd;
	}
	bd->nsid = ret;
	ret = identify_ns(bd);
	if (ret) {
		gs_err("uring-passthru: identify %s: %s", p->path, strerror(-ret));
		goto close_fd;
	}
	*bdp = bd;
	return 0;

close_fd:
	close(bd->fd);
free_bd:
	free(bd);
	return ret;
}

static void pt_close(struct gs_bdev *bd)
{
	close(bd->fd);
	free(bd);
}

static int pt_geometry(struct gs_bdev *bd, struct gs_q_geom *g)
{
	memset(g, 0, sizeof(*g));
	g->lba_size = 1u << bd->lba_shift;
	g->opt_io = g->lba_size > 4096 ? g->lba_size : 4096;
	g->max_io = MAX_IO;
	g->queue_depth = 128;
	g->nr_queues = 64;
	g->nr_devices = 1;
	g->capacity = bd->nlba << bd->lba_shift;
	return 0;
}

static int pt_queue_create(struct gs_bdev *bd, uint32_t depth, int wake_fd, struct gs_bq **qp)
{
	struct gs_bq *q = calloc(1, sizeof(*q));
	int ret;

	if (!q)
		return -ENOMEM;
	q->bd = bd;
	q->wake_fd = wake_fd;
	q->depth = depth ? depth : 128;
	ret = io_uring_queue_init(q->depth + 1, &q->ring, IORING_SETUP_SQE128 |
				  IORING_SETUP_CQE32);
	if (ret) {
		gs_err("uring-passthru: io_uring_queue_init: %s", strerror(-ret));
		free(q);
		return ret;
	}
	*qp = q;
	return 0;
}

static void pt_queue_destroy(struct gs_bq *q)
{
	io_uring_queue_exit(&q->ring);
	free(q);
}

static void prep_cmd(struct gs_bq *q, struct io_uring_sqe *sqe, struct gs_bio *io)
{
	struct gs_bdev *bd = q->bd;
	struct nvme_uring_cmd *c = (struct nvme_uring_cmd *)sqe->cmd;
	uint32_t len = io->len - io->done;
	uint64_t slba = (io->off + io->done) >> bd->lba_shift;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = bd->fd;
	sqe->cmd_op = NVME_URING_CMD_IO;
	c->nsid = bd->nsid;
	if (io->op == GS_OP_FLUSH) {
		c->opcode = GS_NVME_CMD_FLUSH;
	} else {
		c->opcode = io->op == GS_OP_READ ? GS_NVME_CMD_READ : GS_NVME_CMD_WRITE;
		c->addr = (uintptr_t)io->buf + io->done;
		c->data_len = len;
		c->cdw10 = (uint32_t)slba;
		c->cdw11 = (uint32_t)(slba >> 32);
		c->cdw12 = (len >> bd->lba_shift) - 1;
	}
	io_uring_sqe_set_data(sqe, io);
}

static int pt_submit(struct gs_bq *q, struct gs_bio **ios, unsigned int n)
{
	uint32_t lmask = (1u << q->bd->lba_shift) - 1;
	unsigned int i;
	int ret;

	for (i = 0; i < n && q->inflight < q->depth; i++) {
		struct gs_bio *io = ios[i];
		struct io_uring_sqe *sqe;

		if (io->op != GS_OP_FLUSH &&
		    (io->op > GS_OP_WRITE || !io->len || io->len - io->done > MAX_IO ||
		     ((io->len - io->done) & lmask) || ((io->off + io->done) & lmask)))
			return i ? (int)i : -EINVAL;
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			break;
		prep_cmd(q, sqe, io);
		q->inflight++;
	}
	do {
		ret = io_uring_submit(&q->ring);
	} while (ret == -EINTR);
	if (ret < 0)
		return ret;
	return i;
}

static int pt_reap(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned int max)
{
	struct io_uring_cqe *cqe;
	unsigned int n = 0;

	while (n < max && !io_uring_peek_cqe(&q->ring, &cqe)) {
		uint64_t tag = cqe->user_data;
		int r = cqe->res;

		io_uring_cqe_seen(&q->ring, cqe);
		if (tag == WAKE_TAG) {
			q->wake_armed = 0;
			q->woken = 1;
			continue;
		}
		done[n] = (struct gs_bio *)(uintptr_t)tag;
		q->inflight--;
		if (r < 0)
			res[n] = r;
		else if (r > 0)
			res[n] = gs_nvme_status_errno((uint16_t)r);
		else
			res[n] = done[n]->op == GS_OP_FLUSH ? 0 : done[n]->len;
		n++;
	}
	return n;
}

static int pt_wait(struct gs_bq *q, int64_t timeout_us)
{
	struct __kernel_timespec ts, *tsp = NULL;
	struct io_uring_cqe *cqe;
	int ret;

	if (q->wake_fd >= 0 && !q->wake_armed) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		if (sqe) {
			memset(sqe, 0, 128);
			io_uring_prep_read(sqe, q->wake_fd, &q->wake_val, sizeof(q->wake_val), 0);
			io_uring_sqe_set_data64(sqe, WAKE_TAG);
			q->wake_armed = 1;
		}
	}
	/* a wake reaped before this wait must not be slept through (uring.c) */
	if (q->woken) {
		q->woken = 0;
		io_uring_submit(&q->ring);
		return 0;
	}
	if (timeout_us >= 0) {
		ts.tv_sec = timeout_us / 1000000;
		ts.tv_nsec = (timeout_us % 1000000) * 1000;
		tsp = &ts;
	}
	ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, tsp, NULL);
	if (ret == -ETIME || ret == -EINTR)
		return ret == -ETIME ? -ETIME : 0;
	return ret < 0 ? ret : 0;
}

const struct gs_backend_ops gs_backend_uring_passthru = {
	.name = "uring-passthru",
	.open = pt_open,
	.close = pt_close,
	.geometry = pt_geometry,
	.queue_create = pt_queue_create,
	.queue_destroy = pt_queue_destroy,
	.submit = pt_submit,
	.reap = pt_reap,
	.wait = pt_wait,
};
