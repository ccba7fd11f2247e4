// SPDX-License-Identifier: MIT
/*
 * Software NVMe controller (see swnvme.h): one thread polls SQ tail
 * doorbells, fetches 64-byte SQEs, runs them against a file through one
 * io_uring, and posts 16-byte CQEs with the phase bit into the CQ as they
 * finish (in any order), honouring the host's CQ head doorbell.
 *
 * Wire format is the NVMe base specification's, little-endian, read from
 * raw bytes so that this file depends on no queue header.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "gs_log.h"
#include "swnvme.h"

#define SQE_BYTES	64
#define CQE_BYTES	16
#define MAX_WINS	64
#define MAX_IOV		(GS_SWNVME_MDTS / GS_SWNVME_PAGE + 1)
#define PAGE_MASK	((uint64_t)GS_SWNVME_PAGE - 1)

/* opcodes (NVM command set) and status codes (generic command status) */
enum { OPC_FLUSH = 0x00, OPC_WRITE = 0x01, OPC_READ = 0x02 };
enum {
	SC_SUCCESS = 0x00,
	SC_INVALID_OPCODE = 0x01,
	SC_INVALID_FIELD = 0x02,
	SC_DATA_XFER = 0x04,
	SC_INTERNAL = 0x06,
	SC_INVALID_NS = 0x0b,
	SC_LBA_RANGE = 0x80,
};

struct win {
	uint64_t iova;
	char *addr;
	size_t len;
};

struct pend {
	uint16_t cid;
	uint16_t status;
};

struct qpair {
	uint32_t active;		/* atomic: the thread serves it */
	uint32_t gen;			/* bumped on create: stale commands complete into the void */
	uint32_t depth;
	uint16_t qid;
	uint8_t *sq, *cq;
	uint32_t *sq_db, *cq_db;
	uint32_t sq_head, cq_tail;
	uint32_t phase;
	uint32_t outstanding;		/* fetched, completion not yet posted */
	struct pend *pend;		/* completions waiting for CQ space (FIFO, depth slots) */
	uint32_t pend_h, pend_t;
};

struct cmd {
	struct qpair *qp;
	uint32_t gen;
	uint16_t cid;
	uint8_t opc;
	uint64_t off;			/* file byte offset */
	uint32_t len, done;
	int niov;
	struct iovec iov[MAX_IOV];
	struct cmd *next_free;
};

struct gs_swnvme {
	int fd;
	uint32_t lba_shift;
	uint64_t nlba;
	uint32_t max_qpairs;
	uint32_t depth;
	uint32_t spin_us;
	uint8_t *bar;
	int own_bar;

	struct win wins[MAX_WINS];
	uint32_t nwins;			/* atomic: windows [0, nwins) are published */
	pthread_mutex_t lock;		/* map/create/delete against each other */

	struct qpair *qps;		/* [1..max_qpairs] */
	struct io_uring ring;
	struct cmd *cmds, *free_cmds;
	uint32_t inflight;

	pthread_t thread;
	int stop;			/* atomic */
	uint64_t epoch;			/* atomic: loop iterations, for delete */
	struct gs_swnvme_stats st;	/* atomic counters */
};

static inline uint32_t le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);	/* the controller assumes a little-endian host */
	return v;
}

static inline uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline void stat_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

size_t gs_swnvme_bar_bytes(uint32_t max_qpairs)
{
	if (!max_qpairs)
		max_qpairs = 64;
	return GS_SWNVME_DB_BASE + (size_t)(max_qpairs + 1) * 8;
}

static uint32_t *sq_doorbell(struct gs_swnvme *c, uint16_t qid)
{
	return (uint32_t *)(c->bar + GS_SWNVME_DB_BASE + 8u * qid);
}

static uint32_t *cq_doorbell(struct gs_swnvme *c, uint16_t qid)
{
	return (uint32_t *)(c->bar + GS_SWNVME_DB_BASE + 8u * qid + 4);
}

/* Host pointer for [iova, iova + len), or NULL if no window holds all of it. */
static char *xlate(struct gs_swnvme *c, uint64_t iova, size_t len)
{
	/* acquire: window contents are visible once nwins covers them */
	uint32_t n = __atomic_load_n(&c->nwins, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n; i++) {
		struct win *w = &c->wins[i];

		if (iova >= w->iova && iova - w->iova <= w->len && len <= w->len - (iova - w->iova))
			return w->addr + (iova - w->iova);
	}
	return NULL;
}

static int add_iov(struct gs_swnvme *c, struct cmd *k, uint64_t iova, size_t len)
{
	char *p = xlate(c, iova, len);

	if (!p)
		return -EFAULT;
	if (k->niov && (char *)k->iov[k->niov - 1].iov_base + k->iov[k->niov - 1].iov_len == p) {
		k->iov[k->niov - 1].iov_len += len;
		return 0;
	}
	if (k->niov == MAX_IOV)
		return -EINVAL;
	k->iov[k->niov].iov_base = p;
	k->iov[k->niov].iov_len = len;
	k->niov++;
	return 0;
}

/* PRP1/PRP2/PRP list -> iovecs (NVMe base spec, "Physical Region Page Entry and List"). */
static int build_prps(struct gs_swnvme *c, struct cmd *k, uint64_t prp1, uint64_t prp2)
{
	size_t rem = k->len, first = GS_SWNVME_PAGE - (prp1 & PAGE_MASK);

	if (prp1 & 3)
		return -EINVAL;
	if (first > rem)
		first = rem;
	if (add_iov(c, k, prp1, first))
		return -EFAULT;
	rem -= first;
	if (!rem)
		return 0;
	if (rem <= GS_SWNVME_PAGE) {
		if (prp2 & PAGE_MASK)
			return -EINVAL;
		return add_iov(c, k, prp2, rem);
	}
	/* prp2 points at a list; the last entry of a full list page chains to the next */
	uint64_t list = prp2;

	if (list & 7)
		return -EINVAL;
	while (rem) {
		uint64_t *ents = (uint64_t *)xlate(c, list, 8);
		size_t left_in_page = (GS_SWNVME_PAGE - (list & PAGE_MASK)) / 8;

		if (!ents || !xlate(c, list, left_in_page * 8))
			return -EFAULT;
		for (size_t i = 0; i < left_in_page && rem; i++) {
			uint64_t e = le64((uint8_t *)&ents[i]);

			if (i == left_in_page - 1 && rem > GS_SWNVME_PAGE) {
				list = e;	/* chain pointer */
				if (list & 7)
					return -EINVAL;
				break;
			}
			if (e & PAGE_MASK)
				return -EINVAL;
			size_t n = rem < GS_SWNVME_PAGE ? rem : GS_SWNVME_PAGE;

			if (add_iov(c, k, e, n))
				return -EFAULT;
			rem -= n;
		}
	}
	return 0;
}

static void post_cqe(struct gs_swnvme *c, struct qpair *qp, uint16_t cid, uint16_t status)
{
	uint8_t *e = qp->cq + (size_t)qp->cq_tail * CQE_BYTES;
	uint32_t dw2 = qp->sq_head | ((uint32_t)qp->qid << 16);
	uint32_t dw3 = cid | ((uint32_t)((status << 1) | qp->phase) << 16);

	memset(e, 0, 8);
	memcpy(e + 8, &dw2, 4);
	/* release: dw0..dw2 are visible before the phase bit says the entry is new */
	__atomic_store_n((uint32_t *)(e + 12), dw3, __ATOMIC_RELEASE);
	if (++qp->cq_tail == qp->depth) {
		qp->cq_tail = 0;
		qp->phase ^= 1;
	}
	stat_add(&c->st.cmds, 1);
	if (status)
		stat_add(&c->st.errors, 1);
}

static int cq_has_room(struct qpair *qp)
{
	/* acquire: the host read the entries it says it consumed */
	uint32_t head = __atomic_load_n(qp->cq_db, __ATOMIC_ACQUIRE);

	if (head >= qp->depth)
		return 0;	/* bogus doorbell: wait for a sane one */
	return (qp->cq_tail + 1) % qp->depth != head;
}

static void flush_pending(struct gs_swnvme *c, struct qpair *qp)
{
	while (qp->pend_h != qp->pend_t && cq_has_room(qp)) {
		struct pend *p = &qp->pend[qp->pend_h % qp->depth];

		post_cqe(c, qp, p->cid, p->status);
		qp->pend_h++;
		qp->outstanding--;
	}
}

static void complete(struct gs_swnvme *c, struct qpair *qp, uint16_t cid, uint16_t status)
{
	if (qp->pend_h == qp->pend_t && cq_has_room(qp)) {
		post_cqe(c, qp, cid, status);
		qp->outstanding--;
		return;
	}
	stat_add(&c->st.cq_full, 1);
	qp->pend[qp->pend_t % qp->depth] = (struct pend){ .cid = cid, .status = status };
	qp->pend_t++;
}

static void queue_cmd(struct gs_swnvme *c, struct cmd *k)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);

	/* never NULL: commands in flight <= ring depth */
	if (k->opc == OPC_FLUSH)
		io_uring_prep_fsync(sqe, c->fd, IORING_FSYNC_DATASYNC);
	else if (k->opc == OPC_READ)
		io_uring_prep_readv(sqe, c->fd, k->iov, k->niov, k->off + k->done);
	else
		io_uring_prep_writev(sqe, c->fd, k->iov, k->niov, k->off + k->done);
	io_uring_sqe_set_data(sqe, k);
}

static void put_cmd(struct gs_swnvme *c, struct cmd *k)
{
	k->next_free = c->free_cmds;
	c->free_cmds = k;
	c->inflight--;
}

static void finish_cmd(struct gs_swnvme *c, struct cmd *k, uint16_t status)
{
	struct qpair *qp = k->qp;

	/* a queue deleted (or re-created) since the fetch gets nothing */
	if (__atomic_load_n(&qp->active, __ATOMIC_RELAXED) && qp->gen == k->gen)
		complete(c, qp, k->cid, status);
	put_cmd(c, k);
}

/* Parse one SQE.  Returns 1 if it went to io_uring, 0 if it completed at once. */
static int fetch_one(struct gs_swnvme *c, struct qpair *qp, const uint8_t *sqe)
{
	uint8_t opc = sqe[0], psdt = sqe[1] >> 6;
	uint16_t cid = (uint16_t)(sqe[2] | sqe[3] << 8);
	uint32_t nsid = le32(sqe + 4);
	uint64_t slba = le64(sqe + 40);
	uint32_t nlb = (le32(sqe + 48) & 0xffff) + 1;
	struct cmd *k = c->free_cmds;
	uint16_t sc = SC_SUCCESS;

	qp->outstanding++;
	if (opc != OPC_READ && opc != OPC_WRITE && opc != OPC_FLUSH) {
		sc = SC_INVALID_OPCODE;
	} else if (nsid != 1 && !(opc == OPC_FLUSH && nsid == 0xffffffffu)) {
		sc = SC_INVALID_NS;
	} else if (psdt) {
		sc = SC_INVALID_FIELD;	/* SGLs not supported */
	} else if (opc != OPC_FLUSH && (slba >= c->nlba || nlb > c->nlba - slba)) {
		sc = SC_LBA_RANGE;
	} else if (opc != OPC_FLUSH && ((uint64_t)nlb << c->lba_shift) > GS_SWNVME_MDTS) {
		sc = SC_INVALID_FIELD;
	}
	if (sc) {
		complete(c, qp, cid, sc);
		return 0;
	}
	c->free_cmds = k->next_free;
	c->inflight++;
	k->qp = qp;
	k->gen = qp->gen;
	k->cid = cid;
	k->opc = opc;
	k->niov = 0;
	k->done = 0;
	k->len = opc == OPC_FLUSH ? 0 : nlb << c->lba_shift;
	k->off = slba << c->lba_shift;
	if (opc != OPC_FLUSH) {
		int ret = build_prps(c, k, le64(sqe + 24), le64(sqe + 32));

		if (ret) {
			finish_cmd(c, k, ret == -EFAULT ? SC_DATA_XFER : SC_INVALID_FIELD);
			return 0;
		}
	}
	queue_cmd(c, k);
	return 1;
}

/* Drop the first @n bytes of a command's iovecs (after a short transfer). */
static void iov_advance(struct cmd *k, size_t n)
{
	int i = 0;

	while (n && i < k->niov) {
		if (n >= k->iov[i].iov_len) {
			n -= k->iov[i].iov_len;
			i++;
		} else {
			k->iov[i].iov_base = (char *)k->iov[i].iov_base + n;
			k->iov[i].iov_len -= n;
			n = 0;
		}
	}
	memmove(k->iov, k->iov + i, (k->niov - i) * sizeof(k->iov[0]));
	k->niov -= i;
}

static int reap(struct gs_swnvme *c)
{
	struct io_uring_cqe *cqe;
	int n = 0, requeued = 0;

	while (io_uring_peek_cqe(&c->ring, &cqe) == 0) {
		struct cmd *k = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&c->ring, cqe);
		n++;
		if (res == -EAGAIN || res == -EINTR) {
			queue_cmd(c, k);
			requeued++;
			continue;
		}
		if (res < 0) {
			finish_cmd(c, k, res == -EFAULT ? SC_DATA_XFER : SC_INTERNAL);
			continue;
		}
		if (k->opc != OPC_FLUSH) {
			stat_add(k->opc == OPC_READ ? &c->st.read_bytes : &c->st.write_bytes, res);
			k->done += res;
			if (k->done < k->len) {
				if (res == 0) {	/* EOF under a shrunk file */
					finish_cmd(c, k, SC_INTERNAL);
					continue;
				}
				iov_advance(k, res);
				queue_cmd(c, k);
				requeued++;
				continue;
			}
		}
		finish_cmd(c, k, SC_SUCCESS);
	}
	if (requeued)
		io_uring_submit(&c->ring);
	return n;
}

static int poll_queues(struct gs_swnvme *c)
{
	int fetched = 0, queued = 0;

	for (uint32_t q = 1; q <= c->max_qpairs; q++) {
		struct qpair *qp = &c->qps[q];

		/* acquire: the queue's fields are set before it went active */
		if (!__atomic_load_n(&qp->active, __ATOMIC_ACQUIRE))
			continue;
		flush_pending(c, qp);
		/* acquire: the host wrote the SQEs before it moved the tail */
		uint32_t tail = __atomic_load_n(qp->sq_db, __ATOMIC_ACQUIRE);

		if (tail >= qp->depth || tail == qp->sq_head)
			continue;
		stat_add(&c->st.db_reads, 1);
		while (qp->sq_head != tail && c->free_cmds && qp->outstanding < qp->depth - 1) {
			const uint8_t *sqe = qp->sq + (size_t)qp->sq_head * SQE_BYTES;

			if (++qp->sq_head == qp->depth)
				qp->sq_head = 0;
			queued += fetch_one(c, qp, sqe);
			fetched++;
		}
	}
	if (queued)
		io_uring_submit(&c->ring);
	return fetched;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *ctrl_thread(void *arg)
{
	struct gs_swnvme *c = arg;
	uint64_t last_work = now_us();

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) || c->inflight) {
		int n = poll_queues(c) + reap(c);

		__atomic_store_n(&c->epoch, c->epoch + 1, __ATOMIC_RELEASE);
		if (n) {
			last_work = now_us();
			continue;
		}
		if (now_us() - last_work < c->spin_us) {
#if defined(__x86_64__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		/* idle: nap briefly; doorbells are memory, nothing can wake us */
		if (c->inflight) {
			struct __kernel_timespec ts = { .tv_nsec = 20000 };
			struct io_uring_cqe *cqe;

			io_uring_wait_cqe_timeout(&c->ring, &cqe, &ts);
		} else {
			struct timespec ts = { .tv_nsec = 20000 };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int gs_swnvme_start(struct gs_swnvme **cp, const struct gs_swnvme_params *p)
{
	struct gs_swnvme *c;
	struct stat st;
	int flags = O_RDWR | O_CLOEXEC, ret;

	if (!p || !p->path || (p->lba_shift && p->lba_shift != 9 && p->lba_shift != 12))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->lba_shift = p->lba_shift ? p->lba_shift : 12;
	c->max_qpairs = p->max_qpairs ? p->max_qpairs : 64;
	c->depth = p->depth ? p->depth : 256;
	c->spin_us = p->spin_us ? p->spin_us : 200;
	pthread_mutex_init(&c->lock, NULL);

	if (!(p->flags & GS_SWNVME_BUFFERED))
		flags |= O_DIRECT;
	if (p->flags & GS_SWNVME_CREATE)
		flags |= O_CREAT;
	c->fd = open(p->path, flags, 0644);
	if (c->fd < 0) {
		ret = -errno;
		gs_err("swnvme: open %s: %s", p->path, strerror(errno));
		goto free_c;
	}
	if ((p->flags & GS_SWNVME_CREATE) && p->size && ftruncate(c->fd, p->size) < 0) {
		ret = -errno;
		goto close_fd;
	}
	if (fstat(c->fd, &st) < 0) {
		ret = -errno;
		goto close_fd;
	}
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(c->fd, 0, SEEK_END);

		st.st_size = end < 0 ? 0 : end;
	}
	c->nlba = (uint64_t)st.st_size >> c->lba_shift;
	if (!c->nlba) {
		ret = -EINVAL;
		gs_err("swnvme: %s is smaller than one LBA", p->path);
		goto close_fd;
	}

	if (p->bar) {
		c->bar = p->bar;
	} else {
		c->bar = aligned_alloc(4096, (gs_swnvme_bar_bytes(c->max_qpairs) + 4095) & ~4095ul);
		if (!c->bar) {
			ret = -ENOMEM;
			goto close_fd;
		}
		c->own_bar = 1;
	}
	memset(c->bar, 0, gs_swnvme_bar_bytes(c->max_qpairs));
	/* CAP: MQES 65535 (0-based), CQR, DSTRD 0, MPSMIN 4 KiB; VS 1.4 */
	uint64_t cap = 0xffffull | 1ull << 16;
	uint32_t vs = 0x00010400;

	memcpy(c->bar, &cap, 8);
	memcpy(c->bar + 8, &vs, 4);

	c->qps = calloc(c->max_qpairs + 1, sizeof(*c->qps));
	c->cmds = calloc(c->depth, sizeof(*c->cmds));
	if (!c->qps || !c->cmds) {
		ret = -ENOMEM;
		goto free_arrays;
	}
	for (uint32_t i = 0; i < c->depth; i++) {
		c->cmds[i].next_free = c->free_cmds;
		c->free_cmds = &c->cmds[i];
	}
	ret = io_uring_queue_init(c->depth, &c->ring, 0);
	if (ret < 0) {
		gs_err("swnvme: io_uring_queue_init: %s", strerror(-ret));
		goto free_arrays;
	}
	ret = -pthread_create(&c->thread, NULL, ctrl_thread, c);
	if (ret)
		goto exit_ring;
	*cp = c;
	return 0;

exit_ring:
	io_uring_queue_exit(&c->ring);
free_arrays:
	free(c->cmds);
	free(c->qps);
	if (c->own_bar)
		free(c->bar);
close_fd:
	close(c->fd);
free_c:
	pthread_mutex_destroy(&c->lock);
	free(c);
	return ret;
}

void gs_swnvme_stop(struct gs_swnvme *c)
{
	if (!c)
		return;
	/* release: pairs with the thread's acquire; it drains in-flight commands */
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(c->thread, NULL);
	io_uring_queue_exit(&c->ring);
	for (uint32_t q = 1; q <= c->max_qpairs; q++)
		free(c->qps[q].pend);
	free(c->cmds);
	free(c->qps);
	if (c->own_bar)
		free(c->bar);
	close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void *gs_swnvme_bar(struct gs_swnvme *c)
{
	return c->bar;
}

uint32_t gs_swnvme_lba_shift(struct gs_swnvme *c)
{
	return c->lba_shift;
}

uint64_t gs_swnvme_nlba(struct gs_swnvme *c)
{
	return c->nlba;
}

int gs_swnvme_map(struct gs_swnvme *c, uint64_t iova, void *addr, size_t len)
{
	int ret = 0;

	if (!addr || !len || iova + len < iova)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->nwins == MAX_WINS) {
		ret = -ENOSPC;
	} else {
		c->wins[c->nwins] = (struct win){ .iova = iova, .addr = addr, .len = len };
		/* release: the window is complete before the thread may use it */
		__atomic_store_n(&c->nwins, c->nwins + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* Wait until the controller thread has gone round its loop twice. */
static void quiesce(struct gs_swnvme *c)
{
	uint64_t e = __atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE);

	while (__atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE) < e + 2) {
		struct timespec ts = { .tv_nsec = 10000 };

		nanosleep(&ts, NULL);
	}
}

int gs_swnvme_create_qpair(struct gs_swnvme *c, uint16_t qid, uint64_t sq_iova,
			   uint64_t cq_iova, uint32_t depth)
{
	struct qpair *qp;
	uint8_t *sq, *cq;
	int ret = 0;

	if (!qid || qid > c->max_qpairs || depth < 2 || depth > 65536)
		return -EINVAL;
	sq = (uint8_t *)xlate(c, sq_iova, (size_t)depth * SQE_BYTES);
	cq = (uint8_t *)xlate(c, cq_iova, (size_t)depth * CQE_BYTES);
	if (!sq || !cq || (sq_iova & PAGE_MASK) || (cq_iova & PAGE_MASK))
		return -EFAULT;
	pthread_mutex_lock(&c->lock);
	qp = &c->qps[qid];
	if (__atomic_load_n(&qp->active, __ATOMIC_RELAXED)) {
		ret = -EEXIST;
		goto unlock;
	}
	free(qp->pend);
	qp->pend = calloc(depth, sizeof(*qp->pend));
	if (!qp->pend) {
		ret = -ENOMEM;
		goto unlock;
	}
	qp->gen++;
	qp->qid = qid;
	qp->depth = depth;
	qp->sq = sq;
	qp->cq = cq;
	qp->sq_db = sq_doorbell(c, qid);
	qp->cq_db = cq_doorbell(c, qid);
	*qp->sq_db = 0;
	*qp->cq_db = 0;
	qp->sq_head = qp->cq_tail = 0;
	qp->phase = 1;
	qp->outstanding = 0;
	qp->pend_h = qp->pend_t = 0;
	/* release: every field above is set before the thread sees the queue */
	__atomic_store_n(&qp->active, 1, __ATOMIC_RELEASE);
unlock:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int gs_swnvme_delete_qpair(struct gs_swnvme *c, uint16_t qid)
{
	if (!qid || qid > c->max_qpairs)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (!__atomic_load_n(&c->qps[qid].active, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	__atomic_store_n(&c->qps[qid].active, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);
	quiesce(c);
	return 0;
}

void gs_swnvme_get_stats(struct gs_swnvme *c, struct gs_swnvme_stats *st)
{
	st->cmds = __atomic_load_n(&c->st.cmds, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&c->st.errors, __ATOMIC_RELAXED);
	st->read_bytes = __atomic_load_n(&c->st.read_bytes, __ATOMIC_RELAXED);
	st->write_bytes = __atomic_load_n(&c->st.write_bytes, __ATOMIC_RELAXED);
	st->db_reads = __atomic_load_n(&c->st.db_reads, __ATOMIC_RELAXED);
	st->cq_full = __atomic_load_n(&c->st.cq_full, __ATOMIC_RELAXED);
}
