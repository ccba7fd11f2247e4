// SPDX-License-Identifier: MIT
/*
 * FUSE over io_uring under libfuse 3.14 (see fs/fuse/uring.h).
 *
 * How a mount switches:
 *   1. gs_fuse_uring_attach() hooks the session's read/writev
 *      (fuse_session_custom_io).  The read hook notes FUSE_INIT's unique and
 *      the flags the kernel offers; everything else passes through.
 *   2. libfuse answers FUSE_INIT.  The writev hook sees that reply; when the
 *      kernel offered FUSE_OVER_IO_URING (and -o uring is not off) it starts
 *      the ring threads, waits until each has its io_uring and buffers, and
 *      only then sets FUSE_OVER_IO_URING in the reply (flags2) and writes it:
 *      once the kernel has that flag it holds every new request until all
 *      queues have an entry registered, so nothing may fail after it.
 *   3. The threads register their entries (FUSE_IO_URING_CMD_REGISTER; the
 *      kernel accepts them once the INIT reply is processed, which the
 *      write above did before returning).  When every queue (one per
 *      possible CPU) has one, the kernel sends requests over the rings:
 *      a request from a task on CPU n goes to an idle entry of queue n.
 *   4. Each completion is a request in an entry: header and first argument
 *      in the entry's header buffer, the rest in its payload buffer.  The
 *      thread lays them out as /dev/fuse would have delivered them (the
 *      payload buffer has a page in front for that: at most 168 bytes move)
 *      and calls fuse_session_process_buf(), so the same lowlevel handlers
 *      run.  Their fuse_reply_*() ends in the writev hook, which recognises
 *      the thread's current request by its unique and copies the reply into
 *      the entry instead of writing /dev/fuse; a READ's data was already
 *      read into the payload buffer (gs_fuse_uring_read_buf()), so it is not
 *      copied at all.  Then one COMMIT_AND_FETCH hands the reply back and
 *      re-arms the entry: one io_uring_enter per request, where /dev/fuse
 *      costs a read and a writev.
 *
 * Handlers block (a pread on a cache miss), so a queue has several threads,
 * each with its own ring and one entry: like libfuse's worker pool, one
 * request per thread at a time, and no lock between threads.  FORGET,
 * INTERRUPT and notifications stay on /dev/fuse (the kernel sends the first
 * two there; the writev hook passes unique-0 messages through).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fuse_internal.h"
#include "gs_log.h"
#include "uring.h"

#define PAGE		4096u
#define WAIT_SEC	1	/* a thread looks at the stop flag this often when idle */
#define PARAM_PATH	"/sys/module/fuse/parameters/enable_uring"

/* A registered entry: one request at a time. */
struct uent {
	struct gs_fuse_uring_req_header *hdr;	/* iov[0] */
	char *buf;		/* PAGE of room for the request headers, then the payload */
	char *payload;		/* iov[1]: buf + PAGE, page aligned (O_DIRECT reads land here) */
	struct iovec iov[2];
	uint64_t unique;	/* the request being served */
	int is_read;
	int replied;
};

struct uthr {
	struct gs_fuse_uring *u;
	pthread_t tid;
	unsigned qid;
	int started;
	struct io_uring ring;
	int fixed;		/* /dev/fuse is registered file 0 */
	struct uent ent;
};

struct gs_fuse_uring {
	struct fuse_session *se;
	int fd;				/* /dev/fuse of the session */
	int mode;
	unsigned nq, per_q, nthr;
	size_t payload_sz;
	struct uthr *thr;

	/* start-up handshake: threads report ready/failed, then wait for go */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned ready, failed;
	int go;				/* 1: register, -1: exit */
	int stop;

	/* FUSE_INIT as the read hook saw it */
	int saw_init, init_done;
	uint64_t init_unique, kflags;

	int active;			/* FUSE_OVER_IO_URING was sent */
	int reg_err;			/* a REGISTER failed: the kernel went back to /dev/fuse */
	char why[96];			/* why /dev/fuse, when it is */
	uint64_t requests;		/* served over the rings (relaxed atomic) */
};

/* The entry this thread is serving, for the writev hook and the read buffer. */
static __thread struct uent *cur_ent;

static struct gs_fuse_uring *uring_of(void *userdata)
{
	return gs_fuse_get_uring(userdata);
}

/* ---------------- the request and its reply ---------------- */

/* Copy a reply that libfuse hands to writev into @e. */
static ssize_t capture_reply(struct gs_fuse_uring *u, struct uent *e, const struct iovec *iov,
			     int count)
{
	struct fuse_out_header oh;
	size_t total = 0;

	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	for (int i = 1; i < count && !oh.error; i++) {
		size_t len = iov[i].iov_len;

		if (total + len > u->payload_sz) {
			oh.error = -EIO;	/* cannot happen within max_write/max_pages */
			total = 0;
			break;
		}
		/* a READ's data is there already (gs_fuse_uring_read_buf) */
		if (iov[i].iov_base != e->payload + total)
			memmove(e->payload + total, iov[i].iov_base, len);
		total += len;
	}
	if (oh.error)
		total = 0;
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)total;
	e->replied = 1;
	return (ssize_t)(sizeof(oh) + total);
}

/* Reply @err to the request in @e without libfuse (a malformed entry). */
static void reply_raw(struct uent *e, int err)
{
	struct fuse_out_header oh = { .len = sizeof(oh), .error = -err, .unique = e->unique };

	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ring_ent_in_out.payload_sz = 0;
	e->replied = 1;
}

static void serve(struct gs_fuse_uring *u, struct uent *e)
{
	struct fuse_in_header in;
	uint32_t psz = e->hdr->ring_ent_in_out.payload_sz;
	size_t oplen;
	char *start;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	e->unique = e->hdr->ring_ent_in_out.commit_id;
	e->replied = 0;
	/* in.len counts all of it, as /dev/fuse delivers it: what is not in the
	 * payload is the first argument, in op_in */
	if (psz > u->payload_sz || in.len < sizeof(in) + psz ||
	    (oplen = in.len - sizeof(in) - psz) > GS_FUSE_URING_OP_IN_OUT_SZ) {
		reply_raw(e, EIO);
		return;
	}
	start = e->payload - oplen - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), e->hdr->op_in, oplen);
	e->is_read = in.opcode == FUSE_READ;
	cur_ent = e;
	fuse_session_process_buf(u->se, &(struct fuse_buf){ .mem = start, .size = in.len });
	cur_ent = NULL;
	/* FORGET-like requests, which want no reply, come over /dev/fuse; should
	 * one come here, the entry still has to go back */
	if (!e->replied)
		reply_raw(e, ENOSYS);
	__atomic_fetch_add(&u->requests, 1, __ATOMIC_RELAXED);
}

char *gs_fuse_uring_read_buf(size_t size)
{
	struct uent *e = cur_ent;

	/* the payload buffer holds max_write and max_pages pages, which bound
	 * a READ's size; @size is checked all the same */
	return e && e->is_read && size <= e->iov[1].iov_len ? e->payload : NULL;
}

/* ---------------- the ring threads ---------------- */

static void prep_cmd(struct uthr *t, struct uent *e, unsigned op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct gs_fuse_uring_cmd_req *req;

	if (!sqe)
		return;		/* cannot be: one command per ring at a time */
	memset(sqe, 0, 2 * sizeof(*sqe));	/* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->fixed ? 0 : t->u->fd;
	if (t->fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	sqe->cmd_op = op;
	if (op == GS_FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	req = (struct gs_fuse_uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)t->qid;
	req->commit_id = op == GS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->unique : 0;
	io_uring_sqe_set_data(sqe, e);
}

/* The ring with the cheapest completion path this kernel has: task work
 * (the kernel copies a request into our buffers in our context) only when
 * we wait for it. */
static int ring_init(struct io_uring *ring)
{
	static const unsigned flags[] = {
		IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_SQE128,
	};
	int ret = -EINVAL;

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		ret = io_uring_queue_init(4, ring, flags[i]);
		if (ret != -EINVAL)
			break;
	}
	return ret;
}

static int ent_alloc(struct gs_fuse_uring *u, struct uent *e)
{
	void *p;

	if (posix_memalign(&p, 64, sizeof(*e->hdr)))
		return -ENOMEM;
	e->hdr = p;
	memset(e->hdr, 0, sizeof(*e->hdr));
	if (posix_memalign(&p, PAGE, PAGE + u->payload_sz)) {
		free(e->hdr);
		e->hdr = NULL;
		return -ENOMEM;
	}
	e->buf = p;
	e->payload = e->buf + PAGE;
	e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
	e->iov[1] = (struct iovec){ e->payload, u->payload_sz };
	return 0;
}

static void ent_free(struct uent *e)
{
	free(e->hdr);
	free(e->buf);
	e->hdr = NULL;
	e->buf = NULL;
}

/* Set up this thread's ring and entry, report, wait for the verdict. */
static int thread_setup(struct uthr *t)
{
	struct gs_fuse_uring *u = t->u;
	int ret, go;

	ret = ring_init(&t->ring);
	if (!ret) {
		t->fixed = io_uring_register_files(&t->ring, &u->fd, 1) == 0;
		ret = ent_alloc(u, &t->ent);
		if (ret)
			io_uring_queue_exit(&t->ring);
	}
	pthread_mutex_lock(&u->lock);
	if (ret)
		u->failed++;
	else
		u->ready++;
	pthread_cond_broadcast(&u->cond);
	while (!u->go)
		pthread_cond_wait(&u->cond, &u->lock);
	go = u->go;
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	if (go < 0) {
		ent_free(&t->ent);
		io_uring_queue_exit(&t->ring);
		return -ECANCELED;
	}
	return 0;
}

static void *ring_thread(void *arg)
{
	struct uthr *t = arg;
	struct gs_fuse_uring *u = t->u;
	struct uent *e = &t->ent;
	struct __kernel_timespec ts = { .tv_sec = WAIT_SEC };
	struct io_uring_cqe *cqe;
	cpu_set_t cpus;
	int live = 1, ret;

	if (thread_setup(t))
		return NULL;
	prep_cmd(t, e, GS_FUSE_IO_URING_CMD_REGISTER);
	/* Every request waits until each queue has an entry: register first,
	 * on whatever CPU is free, then move to the CPU whose tasks' requests
	 * come to this queue (a hint; cpusets may refuse). */
	io_uring_submit(&t->ring);
	CPU_ZERO(&cpus);
	CPU_SET(t->qid, &cpus);
	(void)sched_setaffinity(0, sizeof(cpus), &cpus);
	while (live) {
		cqe = NULL;
		ret = io_uring_submit_and_wait_timeout(&t->ring, &cqe, 1, &ts, NULL);
		/* liburing 2.3 may return having submitted, with no completion */
		if (ret >= 0 && !cqe && io_uring_peek_cqe(&t->ring, &cqe))
			ret = -EINTR;
		if (ret == -ETIME || ret == -EINTR) {
			if (__atomic_load_n(&u->stop, __ATOMIC_ACQUIRE))
				break;
			continue;
		}
		if (ret < 0)
			break;
		ret = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (ret == -EAGAIN) {
			/* INIT not processed yet (cannot happen: the reply was written
			 * before go); try again */
			usleep(1000);
			prep_cmd(t, e, GS_FUSE_IO_URING_CMD_REGISTER);
			continue;
		}
		if (ret < 0) {
			/* -ENOTCONN: unmounted or aborted; anything else at
			 * registration sent the kernel back to /dev/fuse */
			if (ret != -ENOTCONN && ret != -ECANCELED && !e->unique)
				__atomic_store_n(&u->reg_err, ret, __ATOMIC_RELAXED);
			live = 0;
			break;
		}
		serve(u, e);
		prep_cmd(t, e, GS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	}
	io_uring_queue_exit(&t->ring);	/* cancels what is still armed */
	ent_free(e);
	return NULL;
}

/* Possible CPUs as the kernel counts its queues (num_possible_cpus()). */
static unsigned possible_cpus(void)
{
	char line[256];
	unsigned n = 0;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");

	if (f) {
		if (fgets(line, sizeof(line), f)) {
			/* "0-N" or "0": the highest id + 1 */
			char *p = strrchr(line, '-');
			char *q = strrchr(line, ',');

			n = (unsigned)strtoul(p && (!q || p > q) ? p + 1 : (q ? q + 1 : line),
					      NULL, 10) + 1;
		}
		fclose(f);
	}
	if (!n) {
		int c = get_nprocs_conf();

		n = c > 0 ? (unsigned)c : 1;
	}
	return n;
}

/* Start every thread; 0 when all have their ring and entry (waiting for go). */
static int start_threads(struct gs_fuse_uring *u)
{
	sigset_t all, old;
	unsigned started = 0;
	int ret = 0;

	u->thr = calloc(u->nthr, sizeof(*u->thr));
	if (!u->thr)
		return -ENOMEM;
	/* termination signals belong to the loop thread (bin/gstorefs.c) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < u->nthr; i++) {
		struct uthr *t = &u->thr[i];

		t->u = u;
		t->qid = i % u->nq;
		ret = -pthread_create(&t->tid, NULL, ring_thread, t);
		if (ret)
			break;
		t->started = 1;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&u->lock);
	while (u->ready + u->failed < started)
		pthread_cond_wait(&u->cond, &u->lock);
	if (!ret && u->failed)
		ret = -ENOMEM;
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static void release_threads(struct gs_fuse_uring *u, int go)
{
	pthread_mutex_lock(&u->lock);
	u->go = go;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
}

static void join_threads(struct gs_fuse_uring *u)
{
	if (!u->thr)
		return;
	__atomic_store_n(&u->stop, 1, __ATOMIC_RELEASE);
	release_threads(u, u->go ? u->go : -1);
	for (unsigned i = 0; i < u->nthr; i++)
		if (u->thr[i].started)
			pthread_join(u->thr[i].tid, NULL);
	free(u->thr);
	u->thr = NULL;
}

/* ---------------- FUSE_INIT ---------------- */

/* The payload buffer the kernel insists on: max(8 KiB, max_write, max_pages pages). */
static size_t payload_size(const struct fuse_init_out *o)
{
	size_t pages = (o->flags & FUSE_MAX_PAGES) ? (o->max_pages ? o->max_pages : 1) : 32;
	size_t sz = 8192;

	if (o->max_write > sz)
		sz = o->max_write;
	if (pages * PAGE > sz)
		sz = pages * PAGE;
	return (sz + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static ssize_t init_reply(struct gs_fuse_uring *u, int fd, const struct iovec *iov, int count)
{
	char msg[512];
	size_t len = 0;
	struct fuse_out_header *oh = (void *)msg;
	struct fuse_init_out *o = (void *)(msg + sizeof(*oh));
	int use = 0;
	ssize_t n;

	for (int i = 0; i < count; i++) {
		if (len + iov[i].iov_len > sizeof(msg))
			return writev(fd, iov, count);	/* not an INIT reply we know */
		memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (u->mode == GS_FUSE_URING_OFF) {
		snprintf(u->why, sizeof(u->why), "-o uring=off");
	} else if (!(u->kflags & GS_FUSE_OVER_IO_URING)) {
		snprintf(u->why, sizeof(u->why), "the kernel does not offer it (%s)",
			 access(PARAM_PATH, F_OK) ? "no CONFIG_FUSE_IO_URING" :
			 "fuse.enable_uring=0");
	} else if (oh->error || len < sizeof(*oh) + offsetof(struct fuse_init_out, flags2) + 4) {
		snprintf(u->why, sizeof(u->why), "FUSE_INIT failed");
	} else {
		int ret;

		u->payload_sz = payload_size(o);
		ret = start_threads(u);
		if (ret) {
			snprintf(u->why, sizeof(u->why), "cannot start its threads: %s",
				 strerror(-ret));
			join_threads(u);
		} else {
			o->flags |= FUSE_INIT_EXT;
			o->flags2 |= (uint32_t)(GS_FUSE_OVER_IO_URING >> 32);
			use = 1;
		}
	}
	n = write(fd, msg, len);
	if (use) {
		u->active = n == (ssize_t)len;
		release_threads(u, u->active ? 1 : -1);
	}
	__atomic_store_n(&u->init_done, 1, __ATOMIC_RELEASE);
	if (!u->active && u->mode != GS_FUSE_URING_OFF) {
		gs_log(u->mode == GS_FUSE_URING_ON ? GS_LOG_ERR : GS_LOG_INFO,
		       "FUSE over io_uring not used: %s", u->why);
		if (u->mode == GS_FUSE_URING_ON)
			fuse_session_exit(u->se);	/* required: unmount */
	}
	return n;
}

/* ---------------- the session's I/O hooks ---------------- */

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct gs_fuse_uring *u = uring_of(userdata);
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) + 4) &&
	    in->opcode == FUSE_INIT && !__atomic_load_n(&u->init_done, __ATOMIC_ACQUIRE)) {
		const struct fuse_init_in *ii = (const void *)(in + 1);

		u->kflags = ii->flags;
		if (ii->flags & FUSE_INIT_EXT)
			u->kflags |= (uint64_t)ii->flags2 << 32;
		u->init_unique = in->unique;
		u->saw_init = 1;
	}
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct gs_fuse_uring *u = uring_of(userdata);
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct uent *e = cur_ent;

	/* notifications (unique 0) from a handler on a ring thread: /dev/fuse */
	if (e && oh->unique == e->unique)
		return capture_reply(u, e, iov, count);
	if (u->saw_init && oh->unique == u->init_unique &&
	    !__atomic_load_n(&u->init_done, __ATOMIC_ACQUIRE))
		return init_reply(u, fd, iov, count);
	return writev(fd, iov, count);
}

static const struct fuse_custom_io hooks = {
	.read = io_read,
	.writev = io_writev,
};

/* Can this kernel do it at all?  (For -o uring=on: fail the mount early.) */
static int probe(void)
{
	struct io_uring ring;
	char c = 0;
	int fd = open(PARAM_PATH, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -EOPNOTSUPP;	/* no CONFIG_FUSE_IO_URING */
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	if (c != 'Y' && c != '1')
		return -EOPNOTSUPP;	/* fuse.enable_uring=0 */
	if (ring_init(&ring))
		return -EOPNOTSUPP;	/* io_uring disabled or too old for SQE128 */
	io_uring_queue_exit(&ring);
	return 0;
}

int gs_fuse_uring_attach(struct gs_fuse_uring **up, struct fuse_session *se, int mode,
			 unsigned threads)
{
	struct gs_fuse_uring *u;
	int ret;

	*up = NULL;
	if (mode == GS_FUSE_URING_ON && probe())
		return -EOPNOTSUPP;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->fd = fuse_session_fd(se);
	u->mode = mode;
	u->nq = possible_cpus();
	if (!threads)
		threads = 64;
	u->per_q = (threads + u->nq - 1) / u->nq;
	u->nthr = u->per_q * u->nq;
	snprintf(u->why, sizeof(u->why), "no FUSE_INIT seen");
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	if (fuse_session_custom_io(se, &hooks, u->fd)) {
		ret = -EINVAL;
		goto free_u;
	}
	*up = u;
	return 0;

free_u:
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
	return ret;
}

void gs_fuse_uring_stop(struct gs_fuse_uring *u)
{
	if (!u)
		return;
	join_threads(u);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

int gs_fuse_uring_info(struct gs_fuse_uring *u, char *buf, size_t size)
{
	int err = u ? __atomic_load_n(&u->reg_err, __ATOMIC_RELAXED) : 0;

	if (u && u->active && !err)
		return snprintf(buf, size, "transport: io_uring (%u queues x %u threads, %zu KiB "
				"buffers)\n", u->nq, u->per_q, u->payload_sz >> 10);
	if (u && u->active)
		return snprintf(buf, size, "transport: /dev/fuse (io_uring registration failed: "
				"%s)\n", strerror(-err));
	return snprintf(buf, size, "transport: /dev/fuse (io_uring: %s)\n",
			u ? u->why : "not attached");
}

uint64_t gs_fuse_uring_requests(struct gs_fuse_uring *u)
{
	return u ? __atomic_load_n(&u->requests, __ATOMIC_RELAXED) : 0;
}
