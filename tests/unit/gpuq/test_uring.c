// SPDX-License-Identifier: MIT
/*
 * Pollers + the uring backend on a real image file: sync and callback
 * helpers from many threads, external rings with completion queues and
 * completion words, registered buffers, short transfers and -EAGAIN
 * (forced through the backend's test hooks), flush ordering, bad requests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/eventfd.h>

/* the backend under test, for its test hooks (uring_test_chunk/_eagain) */
#include "gpuq/uring.c"
#include "gpuq_test.h"

#define BS	4096u
#define IMG	(32u << 20)
#define NBLK	(IMG / BS)

static struct gs_q *open_q(uint32_t min, uint32_t max, uint32_t depth)
{
	struct gs_q_params p = { .min_pollers = min, .max_pollers = max, .queue_depth = depth };
	struct gs_q *q = NULL;

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	return q;
}

static void test_geometry(void **state)
{
	struct gs_q_params p = { .min_pollers = 1, .max_pollers = 2, .max_inflight = UINT32_MAX };
	struct gs_q *q = NULL;
	struct gs_q_geom g;
	struct gs_q_stats st;

	assert_int_equal(tq_open(&q, &p, IMG), 0);

	assert_int_equal(gs_q_geometry(q, &g), 0);
	assert_int_equal(g.capacity, IMG);
	assert_true(g.lba_size == 512 || g.lba_size == 4096);
	assert_true(g.opt_io >= g.lba_size);
	assert_true(g.max_io >= (1u << 20));
	assert_int_equal(g.queue_depth, 128);
	assert_int_equal(g.nr_queues, 2);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.active_pollers, 1);
	assert_int_equal(st.max_pollers, 2);
	assert_int_equal(st.rings, 0);
	assert_true(gs_q_kick_fd(q) >= 0);
	gs_q_close(q);
}

/* The block queue under the image, read from sysfs here (0: none, e.g. tmpfs). */
static uint32_t sysfs_nr_requests(void)
{
	struct stat st;
	char path[128];
	unsigned v = 0;
	FILE *f;

	assert_int_equal(stat(tq_img, &st), 0);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/nr_requests", major(st.st_dev),
		 minor(st.st_dev));
	f = fopen(path, "r");
	if (!f) {	/* a partition: its disk's queue */
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/nr_requests",
			 major(st.st_dev), minor(st.st_dev));
		f = fopen(path, "r");
	}
	if (f && fscanf(f, "%u", &v) != 1)
		v = 0;
	if (f)
		fclose(f);
	return v;
}

/* The in-flight cap: explicit, none, and the default (half the device's queue). */
static void test_inflight_cap(void **state)
{
	struct gs_q_params p = { .max_pollers = 2, .queue_depth = 128, .max_inflight = 40 };
	struct gs_q *q = NULL;
	struct gs_q_geom g;
	uint32_t nr;

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	assert_int_equal(gs_q_geometry(q, &g), 0);
	assert_int_equal(g.queue_depth, 20);	/* 40 over 2 pollers */
	gs_q_close(q);

	p = (struct gs_q_params){ .max_pollers = 2, .queue_depth = 128, .max_inflight = 1 };
	assert_int_equal(tq_open(&q, &p, IMG), 0);
	assert_int_equal(gs_q_geometry(q, &g), 0);
	assert_int_equal(g.queue_depth, 1);	/* never 0 */
	gs_q_close(q);

	p = (struct gs_q_params){ .max_pollers = 2, .queue_depth = 128 };
	assert_int_equal(tq_open(&q, &p, IMG), 0);
	assert_int_equal(gs_q_geometry(q, &g), 0);
	nr = tq_buffered ? 0 : sysfs_nr_requests();
	assert_int_equal(g.dev_depth, nr);
	if (!nr) {
		assert_int_equal(g.queue_depth, 128);
	} else {
		uint32_t want = nr / 2 / 2 < 16 ? 16 : nr / 2 / 2;

		assert_int_equal(g.queue_depth, want < 128 ? want : 128);
	}
	gs_q_close(q);
}

static void test_bad_requests(void **state)
{
	struct gs_q *q = open_q(1, 1, 0);
	char *b = tq_alloc(BS);
	struct gs_q_params p = { .path = tq_img, .backend = "nosuch" };
	struct gs_q *q2;

	assert_int_equal(gs_q_pread(q, b, BS, IMG), -EINVAL);	/* past the end */
	assert_int_equal(gs_q_pread(q, b, BS, IMG - 512), -EINVAL);
	assert_int_equal(gs_q_pwrite(q, NULL, BS, 0), -EFAULT);
	assert_int_equal(gs_q_pread(q, b, 0, 0), 0);
	assert_int_equal(gs_q_pread(NULL, b, BS, 0), -EINVAL);
	assert_int_equal(gs_q_open(&q2, &p), -ENODEV);
	p.backend = NULL;
	p.ring_entries = 1000;
	assert_int_equal(gs_q_open(&q2, &p), -EINVAL);
	p.ring_entries = 0;
	p.flags = 0x100;
	assert_int_equal(gs_q_open(&q2, &p), -EINVAL);
	p.flags = GS_Q_CREATE;
	p.path = "/nonexistent-dir/x/img";
	p.size = 1 << 20;
	assert_int_equal(gs_q_open(&q2, &p), -ENOENT);
	assert_int_equal(gs_q_fault(q, ""), -EOPNOTSUPP);
	free(b);
	gs_q_close(q);
}

/* ---- many threads, sync API ---- */

struct rw_arg {
	struct gs_q *q;
	unsigned id, nthreads, rounds;
	int bad;
};

static void *rw_thread(void *arg)
{
	struct rw_arg *a = arg;
	char *buf = tq_alloc(4 * BS), *rd = tq_alloc(4 * BS);
	unsigned seed = a->id * 7919 + 1, r;

	for (r = 0; r < a->rounds && !a->bad; r++) {
		/* blocks owned by this thread: blk % nthreads == id */
		uint64_t blk = (rand_r(&seed) % (NBLK / a->nthreads - 4)) * a->nthreads + a->id;
		unsigned n = 1 + rand_r(&seed) % 4, i;

		/* n blocks, each tagged with its own number; only ours get overwritten
		 * because the run strides by nthreads: write them one by one */
		for (i = 0; i < n; i++) {
			uint64_t b = blk + (uint64_t)i * a->nthreads;

			tq_fill(buf + i * BS, BS, b, r);
			if (gs_q_pwrite(a->q, buf + i * BS, BS, b * BS) != BS)
				a->bad = 1;
		}
		for (i = 0; i < n; i++) {
			uint64_t b = blk + (uint64_t)i * a->nthreads;

			if (gs_q_pread(a->q, rd + i * BS, BS, b * BS) != BS ||
			    !tq_check(rd + i * BS, BS, b, r))
				a->bad = 2;
		}
	}
	free(buf);
	free(rd);
	return NULL;
}

static void test_sync_threads(void **state)
{
	struct gs_q *q = open_q(1, 3, 32);
	struct rw_arg a[8];
	pthread_t th[8];
	struct gs_q_stats st;
	unsigned i;

	for (i = 0; i < 8; i++) {
		a[i] = (struct rw_arg){ .q = q, .id = i, .nthreads = 8, .rounds = 300 };
		assert_int_equal(pthread_create(&th[i], NULL, rw_thread, &a[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	gs_q_get_stats(q, &st);
	assert_true(st.reqs >= 8 * 300 * 2);
	assert_int_equal(st.errors, 0);
	assert_true(st.write_bytes >= 8 * 300 * BS);
	assert_int_equal(st.inflight, 0);
	gs_q_close(q);
}

/* Large transfers, and one that spans many lba. */
static void test_large(void **state)
{
	struct gs_q *q = open_q(1, 1, 0);
	size_t len = 4u << 20;
	char *w = tq_alloc(len), *r = tq_alloc(len);

	tq_fill(w, len, 77, 1);
	assert_int_equal(gs_q_pwrite(q, w, len, 8 * BS), (ssize_t)len);
	assert_int_equal(gs_q_flush(q), 0);
	assert_int_equal(gs_q_pread(q, r, len, 8 * BS), (ssize_t)len);
	assert_memory_equal(w, r, len);
	free(w);
	free(r);
	gs_q_close(q);
}

/* gs_q_pread_sync: the caller's own read sees what the pollers wrote, is
 * checked like any request, and counts in the queue's statistics. */
static void test_pread_sync(void **state)
{
	struct gs_q *q = open_q(1, 1, 0);
	size_t len = 256u << 10;
	char *w = tq_alloc(len), *r = tq_alloc(len);
	struct gs_q_stats a, b;

	tq_fill(w, len, 91, 1);
	assert_int_equal(gs_q_pwrite(q, w, len, 16 * BS), (ssize_t)len);
	assert_int_equal(gs_q_flush(q), 0);
	gs_q_get_stats(q, &a);
	memset(r, 0, len);
	assert_int_equal(gs_q_pread_sync(q, r, len, 16 * BS), (ssize_t)len);
	assert_memory_equal(w, r, len);
	assert_int_equal(gs_q_pread_sync(q, r, BS, 17 * BS), BS);
	assert_memory_equal(w + BS, r, BS);
	gs_q_get_stats(q, &b);
	assert_int_equal(b.reqs - a.reqs, 2);
	assert_int_equal(b.read_bytes - a.read_bytes, len + BS);
	assert_int_equal(b.errors, a.errors);
	/* beyond the device, or no buffer: refused before any I/O, not counted */
	assert_int_equal(gs_q_pread_sync(q, r, BS, IMG), -EINVAL);
	assert_int_equal(gs_q_pread_sync(q, NULL, BS, 0), -EFAULT);
	assert_int_equal(gs_q_pread_sync(q, r, 0, 0), 0);
	gs_q_get_stats(q, &a);
	assert_int_equal(a.reqs, b.reqs);
	free(w);
	free(r);
	gs_q_close(q);
}

/* ---- callback API ---- */

struct cb_state {
	unsigned done;		/* atomic */
	unsigned errors;	/* atomic */
};

static void cb_done(struct gs_q_io *io, int64_t res)
{
	struct cb_state *s = io->priv;

	if (res != (int64_t)io->len)
		__atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->done, 1, __ATOMIC_RELEASE);
}

static void wait_done(struct cb_state *s, unsigned n)
{
	while (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) < n)
		usleep(100);
}

static void test_callback(void **state)
{
	struct gs_q *q = open_q(1, 2, 16);
	struct gs_q_io io[64], *ios[64];
	struct cb_state s = { 0 };
	char *buf = tq_alloc(64 * BS);
	unsigned i;

	for (i = 0; i < 64; i++) {
		tq_fill(buf + i * BS, BS, 1000 + i, 9);
		io[i] = (struct gs_q_io){ .op = GS_OP_WRITE, .len = BS, .off = (1000 + i) * BS,
					  .buf = buf + i * BS, .done = cb_done, .priv = &s };
		ios[i] = &io[i];
	}
	assert_int_equal(gs_q_submit(q, ios, 64), 64);
	wait_done(&s, 64);
	assert_int_equal(s.errors, 0);
	memset(buf, 0, 64 * BS);
	s.done = 0;
	for (i = 0; i < 64; i++)
		io[i].op = GS_OP_READ;
	assert_int_equal(gs_q_submit(q, ios, 64), 64);
	wait_done(&s, 64);
	assert_int_equal(s.errors, 0);
	for (i = 0; i < 64; i++)
		assert_true(tq_check(buf + i * BS, BS, 1000 + i, 9));

	/* invalid ones are refused before anything is queued */
	io[3].off = IMG;
	assert_int_equal(gs_q_submit(q, ios, 64), -EINVAL);
	io[3].off = 0;
	io[5].done = NULL;
	assert_int_equal(gs_q_submit(q, ios, 64), -EINVAL);
	assert_int_equal(gs_q_submit(q, ios, 0), 0);
	free(buf);
	gs_q_close(q);
}

/*
 * ---- callbacks that resubmit: each completion queues the next read from
 * the poller thread itself (gs_q_submit() there kicks nobody: the poller
 * pops it in the same round); chains must all run to the end, with the
 * right data at every hop.
 */

#define CHAINS	24
#define HOPS	40

struct chain {
	struct gs_q_io io;
	struct gs_q *q;
	unsigned id, hop;
	unsigned *bad;		/* atomic */
	unsigned *ended;	/* atomic */
};

static uint64_t chain_blk(unsigned id, unsigned hop)
{
	return (id * 7919u + hop * 104729u) % NBLK;
}

static void chain_done(struct gs_q_io *io, int64_t res)
{
	struct chain *c = (struct chain *)io;
	struct gs_q_io *ios[1] = { io };

	if (res != BS || !tq_check(io->buf, BS, chain_blk(c->id, c->hop), 3))
		__atomic_fetch_add(c->bad, 1, __ATOMIC_RELAXED);
	if (++c->hop == HOPS) {
		__atomic_fetch_add(c->ended, 1, __ATOMIC_RELEASE);
		return;
	}
	memset(io->buf, 0, BS);
	io->off = chain_blk(c->id, c->hop) * BS;
	if (gs_q_submit(c->q, ios, 1) != 1) {
		__atomic_fetch_add(c->bad, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(c->ended, 1, __ATOMIC_RELEASE);
	}
}

static void test_callback_chain(void **state)
{
	static const uint32_t pollers[][2] = { { 1, 1 }, { 2, 2 }, { 1, 3 } };
	char *buf = tq_alloc((size_t)CHAINS * BS);
	struct chain c[CHAINS];
	unsigned i, j, k;

	for (k = 0; k < sizeof(pollers) / sizeof(pollers[0]); k++) {
		struct gs_q *q = open_q(pollers[k][0], pollers[k][1], 16);
		struct gs_q_io *ios[CHAINS];
		unsigned bad = 0, ended = 0;

		/* every block a chain visits holds its pattern (blocks may repeat) */
		for (i = 0; i < CHAINS; i++)
			for (j = 0; j < HOPS; j++) {
				tq_fill(buf, BS, chain_blk(i, j), 3);
				assert_int_equal(gs_q_pwrite(q, buf, BS, chain_blk(i, j) * BS), BS);
			}
		for (i = 0; i < CHAINS; i++) {
			c[i] = (struct chain){
				.io = { .op = GS_OP_READ, .len = BS, .off = chain_blk(i, 0) * BS,
					.buf = buf + (size_t)i * BS, .done = chain_done },
				.q = q, .id = i, .bad = &bad, .ended = &ended,
			};
			ios[i] = &c[i].io;
		}
		assert_int_equal(gs_q_submit(q, ios, CHAINS), CHAINS);
		/* acquire: pairs with the last callback's release */
		while (__atomic_load_n(&ended, __ATOMIC_ACQUIRE) < CHAINS)
			usleep(100);
		assert_int_equal(bad, 0);
		for (i = 0; i < CHAINS; i++)
			assert_int_equal(c[i].hop, HOPS);
		gs_q_close(q);
	}
	free(buf);
}

/* ---- flush ordering: a flush completes after every write queued before it ---- */

struct ord {
	uint64_t seq;		/* atomic */
	uint64_t at[129];
	unsigned done;		/* atomic */
	int64_t res[129];
};

struct ord_io {
	struct gs_q_io io;
	struct ord *o;
	unsigned k;
};

static void ord_done(struct gs_q_io *io, int64_t res)
{
	struct ord_io *x = (struct ord_io *)io;

	x->o->res[x->k] = res;
	x->o->at[x->k] = __atomic_add_fetch(&x->o->seq, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&x->o->done, 1, __ATOMIC_RELEASE);
}

static void test_flush_order(void **state)
{
	/* several pollers, all active: writes and the flush land on different ones */
	struct gs_q *q = open_q(3, 3, 8);
	struct ord_io x[129];
	struct gs_q_io *ios[129];
	char *buf = tq_alloc(128 * BS);
	unsigned round, i;

	for (round = 0; round < 20; round++) {
		struct ord o = { 0 };

		for (i = 0; i < 129; i++) {
			x[i] = (struct ord_io){ .o = &o, .k = i };
			x[i].io = (struct gs_q_io){ .op = i < 128 ? GS_OP_WRITE : GS_OP_FLUSH,
						    .len = i < 128 ? BS : 0,
						    .off = (uint64_t)(i * 37 % NBLK) * BS,
						    .buf = i < 128 ? buf + i * BS : NULL,
						    .done = ord_done };
			ios[i] = &x[i].io;
		}
		assert_int_equal(gs_q_submit(q, ios, 129), 129);
		while (__atomic_load_n(&o.done, __ATOMIC_ACQUIRE) < 129)
			usleep(50);
		assert_int_equal(o.res[128], 0);
		for (i = 0; i < 128; i++) {
			assert_int_equal(o.res[i], BS);
			if (o.at[i] > o.at[128])
				fail_msg("round %u: write %u completed after the flush", round, i);
		}
	}
	assert_int_equal(gs_q_flush(q), 0);
	free(buf);
	gs_q_close(q);
}

/* ---- external ring: cq, completion words, buffer region offsets ---- */

static void test_ext_ring(void **state)
{
	struct gs_q *q = open_q(1, 2, 32);
	uint32_t ent = 64;
	size_t bytes = gs_ring_bytes(ent, ent, ent);
	struct gs_ring *r = aligned_alloc(64, bytes);
	char *region = tq_alloc(ent * BS);
	struct gs_q_stats st;
	unsigned i;

	assert_int_equal(gs_ring_init(r, bytes, ent, ent, ent, 0), 0);
	assert_int_equal(gs_q_ring_add(q, r, region, ent * BS), 0);
	assert_int_equal(gs_q_ring_add(q, r, region, ent * BS), -EEXIST);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.rings, 1);

	/* writes with cqes, from buffer offsets */
	for (i = 0; i < ent; i++) {
		struct gs_sqe e = { .op = GS_OP_WRITE, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE,
				    .len = BS, .off = (2000 + i) * BS, .buf = i * BS, .tag = 500 + i };

		tq_fill(region + i * BS, BS, 2000 + i, 3);
		gs_sq_push(r, &e);
		if (gs_sq_need_kick(r))
			gs_q_kick(q);
	}
	for (i = 0; i < ent; i++) {
		struct gs_cqe c;

		assert_int_equal(gs_ring_cq_wait(r, &c, 10, 5000000), 1);
		assert_true(c.tag >= 500 && c.tag < 500 + ent);
		assert_int_equal(c.res, BS);
	}
	/* reads with completion words */
	memset(region, 0, ent * BS);
	for (i = 0; i < ent; i++) {
		struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CW,
				    .len = BS, .off = (2000 + i) * BS, .buf = i * BS, .cw = i };

		gs_cw_arm(r, i);
		gs_sq_push(r, &e);
		if (gs_sq_need_kick(r))
			gs_q_kick(q);
	}
	for (i = 0; i < ent; i++) {
		assert_int_equal(gs_ring_cw_wait(r, i, 0), BS);
		assert_true(tq_check(region + i * BS, BS, 2000 + i, 3));
	}
	/* bad requests come back as errors, not crashes */
	{
		struct gs_sqe bad[] = {
			{ .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE, .len = BS,
			  .buf = ent * BS, .tag = 1 },	/* outside the region */
			{ .op = 9, .flags = GS_SQE_CQE, .tag = 2 },
			{ .op = GS_OP_READ, .flags = GS_SQE_CB | GS_SQE_CQE, .len = BS,
			  .buf = 64, .tag = 3 },	/* callbacks only in-process */
			{ .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE, .len = BS,
			  .off = IMG, .tag = 4 },	/* past the end */
			{ .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE | GS_SQE_CW,
			  .len = BS, .cw = ent, .tag = 5 },	/* no such completion word */
		};
		int64_t want[] = { -EFAULT, -EINVAL, -EINVAL, -EINVAL, -EINVAL };

		for (i = 0; i < 5; i++) {
			struct gs_cqe c;

			gs_sq_push(r, &bad[i]);
			gs_q_kick(q);
			assert_int_equal(gs_ring_cq_wait(r, &c, 0, 5000000), 1);
			assert_int_equal(c.tag, bad[i].tag);
			assert_int_equal(c.res, want[i]);
		}
	}
	assert_int_equal(gs_q_ring_del(q, r), 0);
	assert_int_equal(gs_q_ring_del(q, r), -ENOENT);
	gs_q_get_stats(q, &st);
	assert_int_equal(st.rings, 0);
	free(r);
	free(region);
	gs_q_close(q);
}

/* A full cq: completions wait in the poller until the consumer makes room. */
static void test_cq_overflow(void **state)
{
	struct gs_q *q = open_q(1, 1, 32);
	size_t bytes = gs_ring_bytes(32, 4, 0);
	struct gs_ring *r = aligned_alloc(64, bytes);
	char *region = tq_alloc(32 * BS);
	unsigned i;

	assert_int_equal(gs_ring_init(r, bytes, 32, 4, 0, 0), 0);
	assert_int_equal(gs_q_ring_add(q, r, region, 32 * BS), 0);
	for (i = 0; i < 32; i++) {
		struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE,
				    .len = BS, .off = i * BS, .buf = i * BS, .tag = i };

		gs_sq_push(r, &e);
	}
	gs_q_kick(q);
	usleep(20000);
	/* other rings' requests do not queue behind the full cq */
	{
		char *b = tq_alloc(BS);

		assert_int_equal(gs_q_pread(q, b, BS, 0), BS);
		free(b);
	}
	for (i = 0; i < 32; i++) {
		struct gs_cqe c;

		assert_int_equal(gs_ring_cq_wait(r, &c, 0, 5000000), 1);
		assert_int_equal(c.tag, i);	/* order kept through the overflow list */
		assert_int_equal(c.res, BS);
	}
	assert_int_equal(gs_q_ring_del(q, r), 0);
	free(r);
	free(region);
	gs_q_close(q);
}

/* ---- registered buffers ---- */

static void test_registered(void **state)
{
	struct gs_q *q = open_q(2, 2, 16);
	size_t len = 1u << 20;
	char *reg = tq_alloc(len), *plain = tq_alloc(BS);
	unsigned i;

	assert_int_equal(gs_q_register_buffer(q, reg, len), 0);
	for (i = 0; i < 64; i++)
		tq_fill(reg + i * BS, BS, 3000 + i, 5);
	for (i = 0; i < 64; i++)
		assert_int_equal(gs_q_pwrite(q, reg + i * BS, BS, (3000 + i) * BS), BS);
	memset(reg, 0, len);
	for (i = 0; i < 64; i++) {
		assert_int_equal(gs_q_pread(q, reg + i * BS, BS, (3000 + i) * BS), BS);
		assert_true(tq_check(reg + i * BS, BS, 3000 + i, 5));
	}
	/* a buffer outside every region takes the plain path */
	assert_int_equal(gs_q_pread(q, plain, BS, 3000 * BS), BS);
	assert_true(tq_check(plain, BS, 3000, 5));
	assert_int_equal(q->regions[0].index, 0);
	assert_int_equal(gs_q_register_buffer(q, NULL, 1), -EINVAL);

	/* unregister, free, and register new memory (likely at the same address):
	 * the pollers must use the new pages, never the stale fixed slot */
	for (i = 0; i < 8; i++) {
		char *again;

		assert_int_equal(gs_q_unregister_buffer(q, reg), 0);
		assert_int_equal(gs_q_unregister_buffer(q, reg), -ENOENT);
		free(reg);
		again = tq_alloc(len);
		assert_int_equal(gs_q_register_buffer(q, again, len), 0);
		assert_int_equal(q->nregions, 1);	/* the entry was reused */
		assert_int_equal(gs_q_pread(q, again + BS, BS, (3000 + i) * BS), BS);
		assert_true(tq_check(again + BS, BS, 3000 + i, 5));
		reg = again;
	}
	/* 64 regions at most; an unregistered entry is free again */
	{
		char *many[GS_Q_MAX_REGIONS];
		unsigned k;

		for (k = 1; k < GS_Q_MAX_REGIONS; k++) {
			many[k] = tq_alloc(BS);
			assert_int_equal(gs_q_register_buffer(q, many[k], BS), 0);
		}
		assert_int_equal(gs_q_register_buffer(q, plain, BS), -ENOSPC);
		assert_int_equal(gs_q_pread(q, many[63], BS, 3001 * BS), BS);
		assert_true(tq_check(many[63], BS, 3001, 5));
		for (k = 1; k < GS_Q_MAX_REGIONS; k++) {
			assert_int_equal(gs_q_unregister_buffer(q, many[k]), 0);
			free(many[k]);
		}
	}
	free(plain);
	gs_q_close(q);
	free(reg);
}

/* ---- short transfers and -EAGAIN are resubmitted ---- */

static void test_short_eagain(void **state)
{
	struct gs_q *q = open_q(1, 1, 8);
	size_t len = 256u << 10;
	char *w = tq_alloc(len), *r = tq_alloc(len);

	uring_test_chunk = 4096;	/* each sqe moves at most 4 KiB */
	tq_fill(w, len, 4000, 1);
	assert_int_equal(gs_q_pwrite(q, w, len, 4000 * BS), (ssize_t)len);
	assert_int_equal(gs_q_pread(q, r, len, 4000 * BS), (ssize_t)len);
	assert_memory_equal(w, r, len);
	uring_test_chunk = 0;

	uring_test_eagain = 3;		/* every third completion says -EAGAIN */
	memset(r, 0, len);
	tq_fill(w, len, 4000, 2);
	assert_int_equal(gs_q_pwrite(q, w, len, 4000 * BS), (ssize_t)len);
	assert_int_equal(gs_q_pread(q, r, len, 4000 * BS), (ssize_t)len);
	assert_memory_equal(w, r, len);
	assert_int_equal(gs_q_flush(q), 0);
	uring_test_eagain = 0;
	free(w);
	free(r);
	gs_q_close(q);
}

/* A file that ends mid-request: the read is short, never an error or a hang. */
static void test_eof_short_read(void **state)
{
	struct gs_q *q = open_q(1, 1, 8);
	char *b = tq_alloc(2 * BS);
	int fd;

	/* shrink the file under the queue: capacity still says IMG */
	fd = open(tq_img, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, IMG - BS), 0);
	close(fd);
	assert_int_equal(gs_q_pread(q, b, 2 * BS, IMG - 2 * BS), BS);
	free(b);
	gs_q_close(q);
}

/*
 * A kick (eventfd write) whose completion is reaped before the poller
 * decides to sleep must not be slept through: the poller loaded its stop
 * flag (or checked its rings) before that reap, so the next wait has to
 * return by itself and let it look again.  Before the fix that wait slept
 * until the next kick (gs_q_close hung in a stopping poller).  The ring is
 * SINGLE_ISSUER: everything runs on one thread, watched from the test's.
 */
struct waiter {
	struct gs_bdev *bd;
	int efd;
	int step;		/* atomic: 1 armed, 2 kicked, 3 about to sleep */
	int ret;
};

static void *wake_thread(void *arg)
{
	struct waiter *w = arg;
	struct gs_bio *done[4];
	int64_t res[4];
	struct gs_bq *bq;
	int i;

	w->ret = uring_queue_create(w->bd, 8, w->efd, &bq);
	if (w->ret)
		goto out;
	uring_wait(bq, 0);	/* arms the wake read: -ETIME, or 0 at once */
	__atomic_store_n(&w->step, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&w->step, __ATOMIC_SEQ_CST) < 2)
		usleep(100);
	for (i = 0; i < 1000 && !io_uring_cq_ready(&bq->ring); i++)
		uring_wait(bq, 1000);
	/* the poller's reap takes the wake along with any completions */
	w->ret = uring_reap(bq, done, res, 4);
	if (!w->ret && (io_uring_cq_ready(&bq->ring) || bq->wake_armed))
		w->ret = -EPROTO;	/* the wake was not reaped: nothing tested */
	__atomic_store_n(&w->step, 3, __ATOMIC_SEQ_CST);
	if (!w->ret)
		w->ret = uring_wait(bq, -1);	/* no timeout */
	uring_queue_destroy(bq);
out:
	__atomic_store_n(&w->step, 4, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_reaped_wake_not_lost(void **state)
{
	struct gs_q_params p = { .max_pollers = 1 };
	struct waiter w = { .ret = 1 };
	struct timespec ts;
	uint64_t one = 1;
	struct gs_q *q;
	pthread_t th;
	int hung;

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	gs_q_close(q);
	p.flags &= ~GS_Q_CREATE;
	assert_int_equal(uring_open(&w.bd, &p), 0);
	w.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(w.efd >= 0);
	assert_int_equal(pthread_create(&th, NULL, wake_thread, &w), 0);
	while (!__atomic_load_n(&w.step, __ATOMIC_SEQ_CST))
		usleep(100);
	assert_int_equal(write(w.efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	__atomic_store_n(&w.step, 2, __ATOMIC_SEQ_CST);

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	hung = pthread_timedjoin_np(th, NULL, &ts) == ETIMEDOUT;
	if (hung) {
		/* asleep after the wake was taken: release it, then fail */
		assert_int_equal(write(w.efd, &one, sizeof(one)), (ssize_t)sizeof(one));
		pthread_join(th, NULL);
	}
	assert_false(hung);
	assert_int_equal(w.ret, 0);
	close(w.efd);
	uring_close(w.bd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_inflight_cap),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_sync_threads),
		cmocka_unit_test(test_large),
		cmocka_unit_test(test_pread_sync),
		cmocka_unit_test(test_callback),
		cmocka_unit_test(test_callback_chain),
		cmocka_unit_test(test_flush_order),
		cmocka_unit_test(test_ext_ring),
		cmocka_unit_test(test_cq_overflow),
		cmocka_unit_test(test_registered),
		cmocka_unit_test(test_short_eagain),
		cmocka_unit_test(test_eof_short_read),
		cmocka_unit_test(test_reaped_wake_not_lost),
	};

	return tq_run(tests, 1);
}
