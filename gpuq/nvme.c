// SPDX-License-Identifier: MIT
/*
 * Backend "nvme": I/O through queue pairs of gstore_nvme.ko
 * (/dev/gstore-nvmeN[:NSID]).  Each poller queue is one NVMe queue pair in
 * coherent memory from the module, driven with gstore_nvmeq.h; no system call
 * on the I/O path (the doorbells are mapped), no interrupts (completions are
 * polled).
 *
 * Data buffers: a buffer inside a region registered with register_buffer()
 * (pinned and mapped through MAP_USER) is used directly; any other buffer
 * goes through one of the queue's bounce buffers (copied); a queue has one
 * per command it may have in flight (its depth).
 *
 * The module refuses to unmap memory while the file has queue pairs (a
 * command in flight could name it), so everything is unmapped at close.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "nvme_kmod.h"
#include "gs_log.h"

#define MAX_REGS	1024	/* registrations over the life of a device (slots not reused) */
#define MAX_IO		(128u << 10)	/* per command, and bounce buffer size */
#define MAX_REQ		(64u << 20)	/* per request: split into MAX_IO commands */
#define NO_BOUNCE	UINT32_MAX
#define MAX_SLOTS	1024u

/* ---- the module, for every user ---- */

int gs_kmod_info(int fd, struct gstore_info *info)
{
	return ioctl(fd, GSTORE_IOC_INFO, info) ? -errno : 0;
}

static size_t page_up(size_t n)
{
	return (n + GS_NVME_PAGE - 1) & ~(size_t)(GS_NVME_PAGE - 1);
}

int gs_kq_create(int fd, uint32_t nslots, struct gs_kq *kq)
{
	uint32_t qsize = gs_nvmeq_qsize(nslots);
	size_t sq_bytes = page_up((size_t)qsize * sizeof(struct gs_nvme_cmd));
	size_t cq_bytes = page_up((size_t)qsize * sizeof(struct gs_nvme_cqe));
	struct gstore_dma_alloc a = { .size = sq_bytes + cq_bytes };
	struct gstore_create_qp c = { 0 };
	struct gstore_unmap u = { 0 };
	int ret;

	memset(kq, 0, sizeof(*kq));
	kq->fd = fd;
	kq->nslots = nslots;
	if (nslots < 2 || (nslots & (nslots - 1)) || nslots > GS_NVMEQ_MAX_SLOTS)
		return -EINVAL;
	if (ioctl(fd, GSTORE_IOC_DMA_ALLOC, &a))
		return -errno;
	kq->qmem_handle = a.handle;
	kq->qmem_len = a.size;
	kq->qmem = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.mmap_off);
	if (kq->qmem == MAP_FAILED) {
		ret = -errno;
		goto unmap_region;
	}
	kq->state = aligned_alloc(GS_CACHELINE, page_up(gs_nvmeq_state_bytes(nslots)));
	if (!kq->state) {
		ret = -ENOMEM;
		goto munmap_qmem;
	}
	c.sq_handle = c.cq_handle = a.handle;
	c.sq_off = 0;
	c.cq_off = sq_bytes;
	c.depth = qsize;
	if (ioctl(fd, GSTORE_IOC_CREATE_QP, &c)) {
		ret = -errno;
		goto free_state;
	}
	kq->qid = c.qid;
	kq->db_len = c.db_mmap_len;
	kq->db = mmap(NULL, c.db_mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, c.db_mmap_off);
	if (kq->db == MAP_FAILED) {
		ret = -errno;
		goto delete_qp;
	}
	ret = gs_nvmeq_init(&kq->q, nslots, kq->qmem, (char *)kq->qmem + sq_bytes,
			    (uint32_t *)((char *)kq->db + c.sq_db),
			    (uint32_t *)((char *)kq->db + c.cq_db), kq->state);
	if (ret)
		goto munmap_db;
	return 0;

munmap_db:
	munmap(kq->db, kq->db_len);
delete_qp:
	ioctl(fd, GSTORE_IOC_DELETE_QP, &(struct gstore_delete_qp){ .qid = c.qid });
free_state:
	free(kq->state);
munmap_qmem:
	munmap(kq->qmem, kq->qmem_len);
unmap_region:
	u.handle = a.handle;
	ioctl(fd, GSTORE_IOC_UNMAP, &u);
	return ret;
}

int gs_kq_destroy(struct gs_kq *kq, int unmap_region)
{
	struct gstore_delete_qp d = { .qid = kq->qid };
	int ret = 0;

	munmap(kq->db, kq->db_len);
	if (ioctl(kq->fd, GSTORE_IOC_DELETE_QP, &d))
		ret = -errno;
	munmap(kq->qmem, kq->qmem_len);
	free(kq->state);
	if (unmap_region) {
		struct gstore_unmap u = { .handle = kq->qmem_handle };

		if (ioctl(kq->fd, GSTORE_IOC_UNMAP, &u) && !ret)
			ret = -errno;
	}
	return ret;
}

int gs_kmap_user(int fd, void *addr, size_t len, uint32_t flags, struct gs_kmap *m)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(GS_NVME_PAGE - 1);
	size_t l = page_up((uintptr_t)addr + len - a);
	struct gstore_map_user mu = { .addr = a, .len = l, .flags = flags };

	m->addr = (char *)a;
	m->len = l;
	m->bus = malloc(l / GS_NVME_PAGE * sizeof(uint64_t));
	if (!m->bus)
		return -ENOMEM;
	mu.bus_addrs = (uintptr_t)m->bus;
	if (ioctl(fd, GSTORE_IOC_MAP_USER, &mu)) {
		int ret = -errno;

		free(m->bus);
		m->bus = NULL;
		return ret;
	}
	m->handle = mu.handle;
	return 0;
}

int gs_kmap_unmap(int fd, struct gs_kmap *m)
{
	struct gstore_unmap u = { .handle = m->handle };
	int ret = ioctl(fd, GSTORE_IOC_UNMAP, &u) ? -errno : 0;

	free(m->bus);
	m->bus = NULL;
	return ret;
}

int gs_kmap_prp(const struct gs_kmap *m, const void *buf, uint32_t len, uint64_t *list,
		uint64_t list_bus, uint64_t *prp1, uint64_t *prp2)
{
	size_t off = (const char *)buf - m->addr;
	size_t pg = off / GS_NVME_PAGE, in = off % GS_NVME_PAGE;
	uint32_t first = GS_NVME_PAGE - in, n, i;

	if ((const char *)buf < m->addr || off + len > m->len || !len || (off & 3))
		return -EINVAL;
	*prp1 = m->bus[pg] + in;
	*prp2 = 0;
	if (len <= first)
		return 0;
	n = (len - first + GS_NVME_PAGE - 1) / GS_NVME_PAGE;	/* pages after the first */
	if (n == 1) {
		*prp2 = m->bus[pg + 1];
		return 0;
	}
	if (n > GS_NVME_PAGE / sizeof(uint64_t))
		return -EINVAL;
	for (i = 0; i < n; i++)
		list[i] = m->bus[pg + 1 + i];
	*prp2 = list_bus;
	return 0;
}

/* ---- the backend ---- */

struct gs_bdev {
	int fd;
	struct gstore_info info;
	uint32_t nsid, lba_shift;
	uint64_t nlba;
	uint32_t max_io;
	pthread_mutex_t lock;			/* regs (writers), queues */
	struct gs_kmap regs[MAX_REGS];
	uint32_t nregs;				/* published with release */
	uint32_t *handles;			/* regions to unmap at close */
	uint32_t nhandles;
};

struct gs_bq {
	struct gs_kq kq;			/* first: aligned */
	struct gs_bdev *bd;
	int wake_fd;
	uint32_t nslots;
	uint32_t depth;				/* in flight at most (<= nslots / 2) */
	uint32_t inflight;
	struct gs_bio **slot_bio;
	uint32_t *slot_bounce;			/* [nslots]: bounce buffer or NO_BOUNCE */
	uint32_t *slot_len;			/* [nslots]: bytes of the bio this command moves */
	uint32_t *bounce_free, nfree;		/* stack of free bounce buffers */
	char *bounce;				/* depth * max_io */
	struct gs_kmap bounce_map;
	uint64_t *prp;				/* nslots PRP list pages */
	struct gs_kmap prp_map;
	struct gs_bio **err;			/* rejected bios, completed by reap */
	int64_t *err_res;
	uint32_t nerr;
};

static int keep_handle(struct gs_bdev *bd, uint32_t h)
{
	uint32_t *n = realloc(bd->handles, (bd->nhandles + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	bd->handles = n;
	bd->handles[bd->nhandles++] = h;
	return 0;
}

static int nvme_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	struct gs_bdev *bd = calloc(1, sizeof(*bd));
	char path[256], *colon;
	uint32_t want = 0, i;
	int ret;

	if (!bd)
		return -ENOMEM;
	pthread_mutex_init(&bd->lock, NULL);
	snprintf(path, sizeof(path), "%s", p->path ? p->path : "/dev/gstore-nvme0");
	colon = strrchr(path, ':');
	if (colon) {
		*colon = 0;
		want = strtoul(colon + 1, NULL, 0);
	}
	bd->fd = open(path, O_RDWR | O_CLOEXEC);
	if (bd->fd < 0) {
		ret = -errno;
		gs_err("nvme: open %s: %s", path, strerror(-ret));
		goto free_bd;
	}
	ret = gs_kmod_info(bd->fd, &bd->info);
	if (ret)
		goto close_fd;
	ret = -ENODEV;
	for (i = 0; i < bd->info.nr_ns && i < GSTORE_MAX_NS; i++) {
		if (!want || bd->info.ns[i].nsid == want) {
			bd->nsid = bd->info.ns[i].nsid;
			bd->lba_shift = bd->info.ns[i].lba_shift;
			bd->nlba = bd->info.ns[i].nlba;
			ret = 0;
			break;
		}
	}
	if (ret) {
		gs_err("nvme: %s has no namespace %u", path, want);
		goto close_fd;
	}
	bd->max_io = MAX_IO;
	if (bd->info.max_xfer && bd->info.max_xfer < bd->max_io)
		bd->max_io = bd->info.max_xfer;
	*bdp = bd;
	return 0;

close_fd:
	close(bd->fd);
free_bd:
	free(bd);
	return ret;
}

static void nvme_close(struct gs_bdev *bd)
{
	uint32_t i;

	for (i = 0; i < bd->nregs; i++) {
		if (bd->regs[i].len)
			gs_kmap_unmap(bd->fd, &bd->regs[i]);
		free(bd->regs[i].bus);
	}
	for (i = 0; i < bd->nhandles; i++) {
		struct gstore_unmap u = { .handle = bd->handles[i] };

		if (ioctl(bd->fd, GSTORE_IOC_UNMAP, &u))
			gs_warn("nvme: unmap region %u: %s", u.handle, strerror(errno));
	}
	free(bd->handles);
	close(bd->fd);
	pthread_mutex_destroy(&bd->lock);
	free(bd);
}

static int nvme_geometry(struct gs_bdev *bd, struct gs_q_geom *g)
{
	uint32_t lba = 1u << bd->lba_shift;

	memset(g, 0, sizeof(*g));
	g->lba_size = lba;
	g->opt_io = lba > 4096 ? lba : 4096;
	/* callers may send more than one command carries: submit_one() splits */
	g->max_io = MAX_REQ;
	g->queue_depth = bd->info.max_qd - 1 < MAX_SLOTS ? bd->info.max_qd - 1 : MAX_SLOTS;
	g->nr_queues = bd->info.max_qps;
	g->nr_devices = 1;
	g->capacity = bd->nlba << bd->lba_shift;
	return 0;
}

static int nvme_register_buffer(struct gs_bdev *bd, void *addr, size_t len)
{
	int ret;

	pthread_mutex_lock(&bd->lock);
	if (bd->nregs == MAX_REGS) {
		ret = -ENOSPC;
	} else {
		ret = gs_kmap_user(bd->fd, addr, len, 0, &bd->regs[bd->nregs]);
		if (!ret) {
			ret = bd->nregs;
			/* release: the region is filled in before pollers can see it */
			__atomic_store_n(&bd->nregs, bd->nregs + 1, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&bd->lock);
	return ret;
}

/* The module unmaps nothing while queue pairs exist: forget the region now,
 * unmap it at close. */
static void nvme_unregister_buffer(struct gs_bdev *bd, int index)
{
	pthread_mutex_lock(&bd->lock);
	if (index >= 0 && (uint32_t)index < bd->nregs && bd->regs[index].len) {
		keep_handle(bd, bd->regs[index].handle);
		/* release: pollers that see len 0 skip the slot */
		__atomic_store_n(&bd->regs[index].len, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&bd->lock);
}

static void bq_free(struct gs_bq *q)
{
	struct gs_bdev *bd = q->bd;

	/* regions stay mapped until close: the module refuses earlier */
	if (q->bounce_map.bus) {
		keep_handle(bd, q->bounce_map.handle);
		free(q->bounce_map.bus);
	}
	if (q->prp_map.bus) {
		keep_handle(bd, q->prp_map.handle);
		free(q->prp_map.bus);
	}
	if (q->bounce)
		munmap(q->bounce, (size_t)q->depth * bd->max_io);
	if (q->prp)
		munmap(q->prp, (size_t)q->nslots * GS_NVME_PAGE);
	free(q->slot_bio);
	free(q->slot_bounce);
	free(q->slot_len);
	free(q->bounce_free);
	free(q->err);
	free(q->err_res);
	free(q);
}

static int nvme_queue_create(struct gs_bdev *bd, uint32_t depth, int wake_fd, struct gs_bq **qp)
{
	struct gs_bq *q;
	uint32_t n = 2, cap;
	int ret;

	/*
	 * Twice the slots of the depth: a slot is reused in ticket order but
	 * completions come in any order, so with nslots == depth one slow
	 * command would hold back the submission of the next ticket.
	 */
	cap = bd->info.max_qd - 1 < MAX_SLOTS ? bd->info.max_qd - 1 : MAX_SLOTS;
	if (!depth)
		depth = 128;
	while (n < 2 * depth && n * 2 <= cap)
		n *= 2;
	if (posix_memalign((void **)&q, GS_CACHELINE, sizeof(*q)))
		return -ENOMEM;
	memset(q, 0, sizeof(*q));
	q->bd = bd;
	q->wake_fd = wake_fd;
	q->nslots = n;
	q->depth = depth < n ? depth : n;
	q->slot_bio = calloc(n, sizeof(*q->slot_bio));
	q->slot_bounce = calloc(n, sizeof(*q->slot_bounce));
	q->slot_len = calloc(n, sizeof(*q->slot_len));
	q->bounce_free = calloc(q->depth, sizeof(*q->bounce_free));
	q->err = calloc(n, sizeof(*q->err));
	q->err_res = calloc(n, sizeof(*q->err_res));
	ret = -ENOMEM;
	if (!q->slot_bio || !q->slot_bounce || !q->slot_len || !q->bounce_free || !q->err || !q->err_res)
		goto free_q;
	for (q->nfree = 0; q->nfree < q->depth; q->nfree++)
		q->bounce_free[q->nfree] = q->nfree;
	q->bounce = mmap(NULL, (size_t)q->depth * bd->max_io, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	q->prp = mmap(NULL, (size_t)n * GS_NVME_PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (q->bounce == MAP_FAILED || q->prp == MAP_FAILED) {
		if (q->bounce == MAP_FAILED)
			q->bounce = NULL;
		if (q->prp == MAP_FAILED)
			q->prp = NULL;
		goto free_q;
	}
	pthread_mutex_lock(&bd->lock);
	ret = gs_kmap_user(bd->fd, q->bounce, (size_t)q->depth * bd->max_io, 0, &q->bounce_map);
	if (!ret)
		ret = gs_kmap_user(bd->fd, q->prp, (size_t)n * GS_NVME_PAGE, GSTORE_MAP_DEV_READ,
				   &q->prp_map);
	if (!ret) {
		ret = gs_kq_create(bd->fd, n, &q->kq);
		if (ret)
			gs_err("nvme: create queue pair: %s", strerror(-ret));
	}
	pthread_mutex_unlock(&bd->lock);
	if (ret)
		goto free_q;
	*qp = q;
	return 0;

free_q:
	pthread_mutex_lock(&bd->lock);
	bq_free(q);
	pthread_mutex_unlock(&bd->lock);
	return ret;
}

static void nvme_queue_destroy(struct gs_bq *q)
{
	struct gs_bdev *bd = q->bd;

	pthread_mutex_lock(&bd->lock);
	gs_kq_destroy(&q->kq, 0);
	keep_handle(bd, q->kq.qmem_handle);
	bq_free(q);
	pthread_mutex_unlock(&bd->lock);
}

static const struct gs_kmap *find_reg(struct gs_bdev *bd, const char *buf, uint32_t len)
{
	/* acquire: pairs with register_buffer's release of nregs */
	uint32_t n = __atomic_load_n(&bd->nregs, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++) {
		/* acquire: pairs with unregister's release of len */
		size_t l = __atomic_load_n(&bd->regs[i].len, __ATOMIC_ACQUIRE);

		if (buf >= bd->regs[i].addr && buf + len <= bd->regs[i].addr + l)
			return &bd->regs[i];
	}
	return NULL;
}

static void reject(struct gs_bq *q, struct gs_bio *io, int64_t res)
{
	q->err[q->nerr] = io;
	q->err_res[q->nerr++] = res;
}

/*
 * Build and submit one command for @io in the free slot of the next ticket.
 * A bio longer than max_io (MDTS, bounce size) moves in max_io pieces, one
 * after the other: reap resubmits the rest, as for a short transfer.
 */
static int submit_one(struct gs_bq *q, struct gs_bio *io)
{
	struct gs_bdev *bd = q->bd;
	uint64_t t = q->kq.q.ticket, prp1 = 0, prp2 = 0, slba;
	uint32_t slot = (uint32_t)(t & (q->nslots - 1)), lmask = (1u << bd->lba_shift) - 1;
	uint32_t len = io->len - io->done < bd->max_io ? io->len - io->done : bd->max_io;
	char *buf = (char *)io->buf + io->done;
	const struct gs_kmap *m;
	struct gs_nvme_cmd c;
	uint64_t *list = q->prp + (size_t)slot * (GS_NVME_PAGE / 8);
	uint64_t list_bus = q->prp_map.bus[(size_t)slot];
	uint64_t tk;
	uint8_t opc;

	if (io->op == GS_OP_FLUSH) {
		memset(&c, 0, sizeof(c));
		c.opc = GS_NVME_CMD_FLUSH;
		c.nsid = bd->nsid;
		q->slot_bounce[slot] = NO_BOUNCE;
		goto submit;
	}
	if (io->op != GS_OP_READ && io->op != GS_OP_WRITE)
		return -EINVAL;
	slba = (io->off + io->done) >> bd->lba_shift;
	if (!len || (len & lmask) || ((io->off + io->done) & lmask))
		return -EINVAL;
	if (slba + (len >> bd->lba_shift) > bd->nlba)
		return -ERANGE;
	opc = io->op == GS_OP_READ ? GS_NVME_CMD_READ : GS_NVME_CMD_WRITE;
	m = find_reg(bd, buf, len);
	if (m && !gs_kmap_prp(m, buf, len, list, list_bus, &prp1, &prp2)) {
		q->slot_bounce[slot] = NO_BOUNCE;
	} else {
		/* inflight < depth, and every bounced command in flight holds one */
		uint32_t bi = q->bounce_free[--q->nfree];
		char *b = q->bounce + (size_t)bi * bd->max_io;

		if (opc == GS_NVME_CMD_WRITE)
			memcpy(b, buf, len);
		gs_kmap_prp(&q->bounce_map, b, len, list, list_bus, &prp1, &prp2);
		q->slot_bounce[slot] = bi;
	}
	gs_nvme_rw(&c, opc, bd->nsid, slba, len >> bd->lba_shift, prp1, prp2);
submit:
	q->slot_bio[slot] = io;
	q->slot_len[slot] = len;
	/* the only submitter: written now, published by nvme_submit() */
	if (gs_nvmeq_try_queue(&q->kq.q, &c, &tk)) {
		if (q->slot_bounce[slot] != NO_BOUNCE)
			q->bounce_free[q->nfree++] = q->slot_bounce[slot];
		q->slot_bio[slot] = NULL;
		return -EAGAIN;
	}
	q->inflight++;
	return 0;
}

static int nvme_submit(struct gs_bq *q, struct gs_bio **ios, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n && q->inflight + q->nerr < q->depth; i++) {
		int ret = submit_one(q, ios[i]);

		if (ret == -EAGAIN)
			break;
		if (ret)
			reject(q, ios[i], ret);
	}
	gs_nvmeq_publish(&q->kq.q);	/* one doorbell write for the batch */
	return i;
}

static int nvme_reap(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned int max)
{
	struct gs_nvme_cqe e[32];
	uint32_t slot[32];
	unsigned int n = 0;
	int resubmitted = 0;
	int got, k;

	while (q->nerr && n < max) {
		q->nerr--;
		done[n] = q->err[q->nerr];
		res[n++] = q->err_res[q->nerr];
	}
	/* a batch at a time: one CQ head doorbell write per batch */
	while (n < max) {
		got = gs_nvmeq_reap_many(&q->kq.q, e, slot, max - n < 32 ? max - n : 32);
		for (k = 0; k < got; k++) {
			struct gs_bio *io = q->slot_bio[slot[k]];
			int err = gs_nvme_status_errno(e[k].status >> 1);
			uint32_t bi = q->slot_bounce[slot[k]];

			q->slot_bio[slot[k]] = NULL;
			q->inflight--;
			if (bi != NO_BOUNCE)
				q->bounce_free[q->nfree++] = bi;	/* copied out below first */
			if (!io)
				continue;	/* cannot happen: a completion for a free slot */
			if (err) {
				res[n] = err;
			} else if (io->op == GS_OP_FLUSH) {
				res[n] = 0;
			} else {
				uint32_t len = q->slot_len[slot[k]];

				if (io->op == GS_OP_READ && bi != NO_BOUNCE)
					memcpy((char *)io->buf + io->done,
					       q->bounce + (size_t)bi * q->bd->max_io, len);
				if (io->done + len < io->len) {
					/* the next piece takes the slot this one freed */
					int ret;

					io->done += len;
					ret = submit_one(q, io);

					if (!ret) {
						resubmitted = 1;
						continue;
					}
					res[n] = ret;
					done[n++] = io;
					continue;
				}
				res[n] = io->len;
			}
			done[n++] = io;
		}
		if (got < 32)
			break;
	}
	if (resubmitted)
		gs_nvmeq_publish(&q->kq.q);	/* one doorbell write for every next piece */
	return n;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ll + ts.tv_nsec / 1000;
}

/* No interrupts: spin briefly on the CQ, then nap in short ppoll()s on the
 * wake eventfd so a kick still wakes us at once. */
static int nvme_wait(struct gs_bq *q, int64_t timeout_us)
{
	int64_t start = now_us(), spin_until = start + 20;

	for (;;) {
		int64_t now;

		if (q->nerr || gs_nvmeq_ready(&q->kq.q))
			return 0;
		now = now_us();
		if (timeout_us >= 0 && now - start >= timeout_us)
			return -ETIME;
		if (now < spin_until) {
			gs_cpu_relax();
			continue;
		}
		if (q->wake_fd >= 0 || !q->inflight) {
			struct pollfd pfd = { .fd = q->wake_fd, .events = POLLIN };
			int64_t nap = q->inflight ? 50 : 1000;
			struct timespec ts;

			if (timeout_us >= 0 && nap > timeout_us - (now - start))
				nap = timeout_us - (now - start);
			ts.tv_sec = 0;
			ts.tv_nsec = nap * 1000;
			if (ppoll(&pfd, q->wake_fd >= 0 ? 1 : 0, &ts, NULL) > 0) {
				uint64_t v;

				if (read(q->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					return -errno;
				return 0;
			}
		} else {
			sched_yield();
		}
	}
}

const struct gs_backend_ops gs_backend_nvme = {
	.name = "nvme",
	.open = nvme_open,
	.close = nvme_close,
	.geometry = nvme_geometry,
	.register_buffer = nvme_register_buffer,
	.unregister_buffer = nvme_unregister_buffer,
	.queue_create = nvme_queue_create,
	.queue_destroy = nvme_queue_destroy,
	.submit = nvme_submit,
	.reap = nvme_reap,
	.wait = nvme_wait,
};
