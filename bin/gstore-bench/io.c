// SPDX-License-Identifier: MIT
/*
 * gstore-bench io: random reads on an image file or block device through
 * the whole I/O core: poller thread(s) -> io_uring (O_DIRECT, registered
 * buffers and file), fed by callbacks or by producer threads' rings.
 *
 * Two ways to drive it (--mode), each keeping --qd requests per thread in
 * flight:
 *  - cb (default): asynchronous callbacks (gs_q_submit()).  Each completion
 *    callback, run on the poller, records the latency and resubmits its io
 *    at a new offset, as an SPDK-style application does; the pollers are the
 *    only threads in the I/O loop, so a request's trip is device -> poller
 *    -> device with no thread hand-off (the way fio drives io_uring).
 *  - ring: producer threads, one ring each (what other processes and GPUs
 *    use).  A producer sleeps in gs_ring_cq_wait(), then for every cqe it
 *    pops records the latency and pushes a new read into the same buffer
 *    slot, and kicks the pollers at most once per batch: each request also
 *    crosses producer <-> poller twice.
 * After --warmup seconds the measured window starts: IOPS, latency
 * percentiles (1 us buckets to 10 ms, then 100 us), the average number of
 * requests in the device, and CPU time of the whole process (getrusage:
 * producers + pollers + kernel) per I/O.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"
#include "../opts.h"
#include "bench.h"

/* latency buckets: 1 us up to 10 ms, then 100 us up to 2 s (the last one: more) */
#define HIST_FINE	10000
#define HIST_US		(HIST_FINE + (2000000 - HIST_FINE) / 100)

static uint32_t hist_bucket(uint64_t us)
{
	uint64_t b = us < HIST_FINE ? us : HIST_FINE + (us - HIST_FINE) / 100;

	return b < HIST_US ? (uint32_t)b : HIST_US - 1;
}

static double hist_value(uint32_t b)
{
	return b < HIST_FINE ? b + 0.5 : HIST_FINE + (b - HIST_FINE) * 100.0 + 50;
}

enum { PH_WARMUP, PH_MEASURE, PH_STOP };
enum { MODE_CB, MODE_RING };

struct opts {
	const char *file;
	uint64_t size;		/* span read from: 0 = whole device */
	uint32_t qd, threads, bs, pollers, max_pollers, spin_us, cq_spin_us, max_inflight;
	double runtime, warmup;
	int reg, buffered, mode, seq;
	const char *fault;	/* gs_q fault spec, e.g. a device model: model=IOPS:MBPS:LATUS */
};

struct worker;

/* --mode cb: one in-flight request, resubmitted from its own callback */
struct cbio {
	struct gs_q_io io;
	struct worker *w;
	uint64_t start_ns;
	uint64_t rng;
};

struct worker {
	pthread_t th;
	uint64_t cursor;	/* --seq: next block */
	const struct opts *o;
	struct gs_q *q;
	struct gs_ring *ring;
	char *bufs;
	uint64_t span_blocks;
	uint64_t *start_ns;
	uint64_t *hist;
	uint64_t ios;		/* atomic: completed, all phases */
	uint64_t errors;	/* atomic */
	int64_t first_err;
	uint64_t rng;
	int ret;
	struct cbio *cbs;	/* --mode cb */
	uint32_t outstanding;	/* --mode cb, atomic: ios not yet retired */
};

static uint64_t xorshift(uint64_t *s);

/* The next offset a worker reads: random, or the next block of its sequence. */
static uint64_t next_off(struct worker *w, uint64_t *rng)
{
	uint64_t b = w->o->seq ? __atomic_fetch_add(&w->cursor, 1, __ATOMIC_RELAXED)
			       : xorshift(rng);

	return b % w->span_blocks * w->o->bs;
}


static unsigned phase;	/* atomic */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void issue(struct worker *w, uint32_t slot)
{
	uint32_t bs = w->o->bs;
	struct gs_sqe e = {
		.op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CQE, .len = bs,
		.off = next_off(w, &w->rng),
		.buf = (uint64_t)slot * bs, .tag = slot,
	};

	w->start_ns[slot] = now_ns();
	gs_sq_push(w->ring, &e);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint32_t qd = w->o->qd, i, inflight = qd;

	for (i = 0; i < qd; i++)
		issue(w, i);
	if (gs_sq_need_kick(w->ring))
		gs_q_kick(w->q);

	while (inflight) {
		unsigned ph = __atomic_load_n(&phase, __ATOMIC_RELAXED);
		struct gs_cqe c;
		uint64_t t;
		unsigned n = 0;

		/* a timeout now and then, so a stalled device cannot hang the stop */
		if (!gs_ring_cq_wait(w->ring, &c, w->o->cq_spin_us, 100000))
			continue;
		t = now_ns();
		do {
			uint32_t slot = (uint32_t)c.tag;
			uint64_t us = (t - w->start_ns[slot]) / 1000;

			if (c.res != (int64_t)w->o->bs) {
				if (!__atomic_fetch_add(&w->errors, 1, __ATOMIC_RELAXED))
					w->first_err = c.res;
			}
			if (ph == PH_MEASURE)
				w->hist[hist_bucket(us)]++;
			if (ph == PH_STOP)
				inflight--;
			else
				issue(w, slot);
			n++;
		} while (gs_cq_try_pop(w->ring, &c));
		__atomic_fetch_add(&w->ios, n, __ATOMIC_RELAXED);
		if (ph != PH_STOP && gs_sq_need_kick(w->ring))
			gs_q_kick(w->q);
	}
	return NULL;
}

static void cb_done(struct gs_q_io *io, int64_t res)
{
	struct cbio *c = (struct cbio *)io;
	struct worker *w = c->w;
	unsigned ph = __atomic_load_n(&phase, __ATOMIC_RELAXED);
	uint64_t t = now_ns();

	/* relaxed atomics: with several pollers, callbacks of one worker race */
	if (res != (int64_t)w->o->bs &&
	    !__atomic_fetch_add(&w->errors, 1, __ATOMIC_RELAXED))
		w->first_err = res;
	if (ph == PH_MEASURE)
		__atomic_fetch_add(&w->hist[hist_bucket((t - c->start_ns) / 1000)], 1,
				   __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->ios, 1, __ATOMIC_RELAXED);
	if (ph == PH_STOP) {
		__atomic_fetch_sub(&w->outstanding, 1, __ATOMIC_RELEASE);
		return;
	}
	io->off = next_off(w, &c->rng);
	c->start_ns = t;
	/* from the poller: it pops this in the same round, no kick needed */
	if (gs_q_submit(w->q, &io, 1) != 1)
		__atomic_fetch_sub(&w->outstanding, 1, __ATOMIC_RELEASE);
}

static int cb_start(struct worker *w)
{
	uint32_t qd = w->o->qd, i;

	w->cbs = calloc(qd, sizeof(*w->cbs));
	if (!w->cbs)
		return -ENOMEM;
	for (i = 0; i < qd; i++) {
		struct cbio *c = &w->cbs[i];
		struct gs_q_io *io = &c->io;
		int ret;

		c->w = w;
		c->rng = w->rng + 0x9e3779b97f4a7c15ull * (i + 1);
		io->op = GS_OP_READ;
		io->len = w->o->bs;
		io->off = next_off(w, &c->rng);
		io->buf = w->bufs + (size_t)i * w->o->bs;
		io->done = cb_done;
		c->start_ns = now_ns();
		__atomic_fetch_add(&w->outstanding, 1, __ATOMIC_RELAXED);
		ret = gs_q_submit(w->q, &io, 1);
		if (ret < 0) {
			__atomic_fetch_sub(&w->outstanding, 1, __ATOMIC_RELAXED);
			return ret;
		}
	}
	return 0;
}

static int worker_setup(struct worker *w, const struct opts *o, struct gs_q *q,
			uint64_t span_blocks, unsigned id)
{
	uint32_t ent = 1;
	size_t bytes;
	int ret;

	while (ent < o->qd)
		ent <<= 1;
	w->o = o;
	w->q = q;
	w->span_blocks = span_blocks;
	w->rng = 0x9e3779b97f4a7c15ull * (id + 1);
	bytes = gs_ring_bytes(ent, ent, 0);
	w->ring = aligned_alloc(64, bytes);
	w->bufs = aligned_alloc(4096, ((size_t)o->qd * o->bs + 4095) & ~(size_t)4095);
	w->start_ns = calloc(o->qd, sizeof(*w->start_ns));
	w->hist = calloc(HIST_US, sizeof(*w->hist));
	if (!w->ring || !w->bufs || !w->start_ns || !w->hist)
		return -ENOMEM;
	memset(w->bufs, 0, (size_t)o->qd * o->bs);
	if (o->reg) {
		ret = gs_q_register_buffer(q, w->bufs, (size_t)o->qd * o->bs);
		if (ret)
			return ret;
	}
	if (o->mode == MODE_CB)
		return 0;
	ret = gs_ring_init(w->ring, bytes, ent, ent, 0, 0);
	if (ret)
		return ret;
	return gs_q_ring_add(q, w->ring, w->bufs, (size_t)o->qd * o->bs);
}

static double pct(const uint64_t *h, uint64_t total, double p)
{
	uint64_t want = (uint64_t)(total * p / 100.0), acc = 0;
	uint32_t i;

	for (i = 0; i < HIST_US; i++) {
		acc += h[i];
		if (acc > want)
			return hist_value(i);
	}
	return hist_value(HIST_US - 1);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gstore-bench io --file F [options]\n"
		"  --file F          image file or block device (must exist unless --size)\n"
		"  --size S          read span from offset 0 (default: the whole device);\n"
		"                    a missing file is created this size (sparse)\n"
		"  --mode cb|ring    cb: callbacks resubmit from the poller (default);\n"
		"                    ring: producer threads with a ring each\n"
		"  --qd N            requests in flight per thread (64)\n"
		"  --threads N       producer threads (ring) or sets of --qd ios (cb) (1)\n"
		"  --bs N            block size (4096)\n"
		"  --runtime SEC     measured window (10)\n"
		"  --warmup SEC      not measured, first (2)\n"
		"  --pollers N       pollers always active (1)\n"
		"  --max-pollers N   upper bound for dynamic pollers (= --pollers)\n"
		"  --spin-us N       poller spin before sleeping (gs_q default)\n"
		"  --cq-spin-us N    producer spin before sleeping on its cq (0)\n"
		"  --max-inflight N  requests in the device at most (0: half its queue;\n"
		"                    4294967295: no cap)\n"
		"  --no-register     no registered buffers\n"
		"  --buffered        no O_DIRECT\n"
		"  --seq             sequential reads (each thread from 0, wrapping) instead of random\n"
		"  --fault SPEC      gs_q fault spec, e.g. model=IOPS:MBPS:LATUS per device\n"
		"                    (a pool: every member; gs_q_fault(3))\n");
}

static int parse(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "file", 1, 0, 'f' }, { "size", 1, 0, 's' }, { "qd", 1, 0, 'q' },
		{ "threads", 1, 0, 't' }, { "bs", 1, 0, 'b' }, { "runtime", 1, 0, 'r' },
		{ "warmup", 1, 0, 'w' }, { "pollers", 1, 0, 'p' }, { "max-pollers", 1, 0, 'P' },
		{ "spin-us", 1, 0, 'S' }, { "cq-spin-us", 1, 0, 'C' },
		{ "no-register", 0, 0, 'n' }, { "buffered", 0, 0, 'B' }, { "help", 0, 0, 'h' },
		{ "mode", 1, 0, 'm' }, { "max-inflight", 1, 0, 'I' }, { "seq", 0, 0, 'Q' },
		{ "fault", 1, 0, 'F' },
		{ 0, 0, 0, 0 },
	};
	uint64_t v;
	int c;

	*o = (struct opts){ .qd = 64, .threads = 1, .bs = 4096, .pollers = 1, .runtime = 10,
			    .warmup = 2, .reg = 1 };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'f': o->file = optarg; break;
		case 's':
			if (gs_parse_size(optarg, &o->size))
				return -EINVAL;
			break;
		case 'q': case 't': case 'b': case 'p': case 'P': case 'S': case 'C': case 'I':
			if (gs_parse_size(optarg, &v) || v > UINT32_MAX)
				return -EINVAL;
			if (c == 'q') o->qd = (uint32_t)v;
			if (c == 't') o->threads = (uint32_t)v;
			if (c == 'b') o->bs = (uint32_t)v;
			if (c == 'p') o->pollers = (uint32_t)v;
			if (c == 'P') o->max_pollers = (uint32_t)v;
			if (c == 'S') o->spin_us = (uint32_t)v;
			if (c == 'C') o->cq_spin_us = (uint32_t)v;
			if (c == 'I') o->max_inflight = (uint32_t)v;
			break;
		case 'r': o->runtime = atof(optarg); break;
		case 'w': o->warmup = atof(optarg); break;
		case 'n': o->reg = 0; break;
		case 'm':
			if (!strcmp(optarg, "cb"))
				o->mode = MODE_CB;
			else if (!strcmp(optarg, "ring"))
				o->mode = MODE_RING;
			else
				return -EINVAL;
			break;
		case 'B': o->buffered = 1; break;
		case 'Q': o->seq = 1; break;
		case 'F': o->fault = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: return -EINVAL;
		}
	}
	if (!o->file || !o->qd || !o->threads || !o->bs || o->bs % 512 || o->runtime <= 0 ||
	    o->threads > 256 || !o->pollers)
		return -EINVAL;
	if (!o->max_pollers)
		o->max_pollers = o->pollers;
	return 0;
}

static void log_err(int level, const char *msg, void *arg)
{
	if (level <= GS_LOG_WARN)
		fprintf(stderr, "gstore: %s\n", msg);
}

int bench_io(int argc, char **argv)
{
	struct opts o;
	struct gs_q_params p = { 0 };
	struct gs_q_geom g;
	struct gs_q_stats st0, st1;
	struct worker *w;
	struct gs_q *q;
	uint64_t ios0 = 0, ios1 = 0, errors = 0, total = 0, *hist, depth_sum = 0, nsamples = 0;
	uint64_t sq_sum = 0, cq_sum = 0;
	double t0, t1, c0, c1, secs, iops, cpu_io;
	unsigned i, j;
	int ret;

	if (parse(&o, argc, argv)) {
		usage(stderr);
		return 2;
	}
	gs_set_log_func(log_err, NULL);
	p.path = o.file;
	p.queue_depth = o.qd * o.threads < 128 ? 128 : o.qd * o.threads;
	if (p.queue_depth > 4096)
		p.queue_depth = 4096;
	p.min_pollers = o.pollers;
	p.max_pollers = o.max_pollers;
	p.spin_us = o.spin_us;
	p.max_inflight = o.max_inflight;
	p.flags = o.buffered ? GS_Q_BUFFERED : 0;
	p.fault = o.fault;
	if (o.size && access(o.file, F_OK)) {
		p.flags |= GS_Q_CREATE;
		p.size = o.size;
	}
	ret = gs_q_open(&q, &p);
	if (ret) {
		fprintf(stderr, "gstore-bench: open %s: %s\n", o.file, strerror(-ret));
		return 1;
	}
	gs_q_geometry(q, &g);
	if (!o.size || o.size > g.capacity)
		o.size = g.capacity;
	if (o.size < o.bs || o.bs % g.lba_size) {
		fprintf(stderr, "gstore-bench: span %llu / block size %u / lba %u do not fit\n",
			(unsigned long long)o.size, o.bs, g.lba_size);
		gs_q_close(q);
		return 1;
	}

	w = calloc(o.threads, sizeof(*w));
	for (i = 0; w && i < o.threads; i++) {
		ret = worker_setup(&w[i], &o, q, o.size / o.bs, i);
		if (ret) {
			fprintf(stderr, "gstore-bench: setup: %s\n", strerror(-ret));
			return 1;
		}
	}
	if (!w)
		return 1;
	for (i = 0; i < o.threads; i++) {
		if (o.mode == MODE_RING) {
			pthread_create(&w[i].th, NULL, worker_main, &w[i]);
			continue;
		}
		ret = cb_start(&w[i]);
		if (ret) {
			fprintf(stderr, "gstore-bench: submit: %s\n", strerror(-ret));
			return 1;
		}
	}

	usleep((useconds_t)(o.warmup * 1e6));
	gs_q_get_stats(q, &st0);
	for (i = 0; i < o.threads; i++)
		ios0 += __atomic_load_n(&w[i].ios, __ATOMIC_RELAXED);
	t0 = now_ns() / 1e9;
	c0 = cpu_s();
	__atomic_store_n(&phase, PH_MEASURE, __ATOMIC_RELAXED);

	/* sample the requests in the device: the queue depth it really sees */
	while (now_ns() / 1e9 < t0 + o.runtime) {
		struct gs_q_stats s;

		usleep(1000);
		gs_q_get_stats(q, &s);
		depth_sum += s.inflight;
		for (i = 0; o.mode == MODE_RING && i < o.threads; i++) {
			struct gs_ring *r = w[i].ring;

			sq_sum += gs_sq_pending(r);
			cq_sum += __atomic_load_n(&r->cq_tail, __ATOMIC_RELAXED) -
				  __atomic_load_n(&r->cq_head, __ATOMIC_RELAXED);
		}
		nsamples++;
	}
	for (i = 0; i < o.threads; i++)
		ios1 += __atomic_load_n(&w[i].ios, __ATOMIC_RELAXED);
	t1 = now_ns() / 1e9;
	c1 = cpu_s();
	gs_q_get_stats(q, &st1);
	__atomic_store_n(&phase, PH_STOP, __ATOMIC_RELAXED);
	for (i = 0; i < o.threads; i++) {
		if (o.mode == MODE_RING) {
			pthread_join(w[i].th, NULL);
			continue;
		}
		/* acquire: pairs with the last callback's release */
		while (__atomic_load_n(&w[i].outstanding, __ATOMIC_ACQUIRE))
			usleep(1000);
	}

	hist = calloc(HIST_US, sizeof(*hist));
	for (i = 0; i < o.threads; i++) {
		for (j = 0; hist && j < HIST_US; j++)
			hist[j] += w[i].hist[j];
		errors += w[i].errors;
		if (w[i].errors)
			fprintf(stderr, "thread %u: %llu errors, first %lld\n", i,
				(unsigned long long)w[i].errors, (long long)w[i].first_err);
	}
	for (j = 0; hist && j < HIST_US; j++)
		total += hist[j];
	secs = t1 - t0;
	iops = (ios1 - ios0) / secs;
	cpu_io = (c1 - c0) / (double)(ios1 - ios0) * 1e6;

	printf("gstore-bench io: %s, span %llu MiB, bs %u, mode %s, qd %u x %u %s, pollers %u-%u, "
	       "depth %u a poller (device queue %u), lba %u%s%s\n", o.file,
	       (unsigned long long)(o.size >> 20), o.bs, o.mode == MODE_CB ? "cb" : "ring", o.qd,
	       o.threads, o.mode == MODE_CB ? "sets" : "threads", o.pollers, o.max_pollers,
	       g.queue_depth, g.dev_depth, g.lba_size,
	       o.buffered ? ", buffered" : ", O_DIRECT",
	       o.reg ? ", registered buffers" : "");
	printf("  %.0f IOPS (%.1f MiB/s) over %.1f s\n", iops, iops * o.bs / 1048576.0, secs);
	if (hist && total)
		printf("  latency us: p50 %.1f  p99 %.1f  p99.9 %.1f\n", pct(hist, total, 50),
		       pct(hist, total, 99), pct(hist, total, 99.9));
	if (nsamples && o.mode == MODE_CB)
		printf("  where the %u requests are, on average: %.1f in the backend, the rest "
		       "completed and not yet resubmitted\n", o.qd * o.threads,
		       (double)depth_sum / nsamples);
	else if (nsamples)
		printf("  where the %u requests are, on average: %.1f in the backend, %.1f queued in "
		       "rings, %.1f completed in cqs, the rest with the producers\n",
		       o.qd * o.threads, (double)depth_sum / nsamples, (double)sq_sum / nsamples,
		       (double)cq_sum / nsamples);
	printf("  CPU %.2f us per I/O (%.0f%% of a core), %.2f submit calls and %.3f sleeps per I/O\n",
	       cpu_io, 100.0 * (c1 - c0) / secs,
	       (double)(st1.submits - st0.submits) / (ios1 - ios0),
	       (double)(st1.sleeps - st0.sleeps) / (ios1 - ios0));
	printf("RESULT iops=%.0f lat_p50_us=%.1f lat_p99_us=%.1f lat_p999_us=%.1f cpu_us_per_io=%.3f "
	       "inflight=%.1f errors=%llu\n", iops, pct(hist, total, 50), pct(hist, total, 99),
	       pct(hist, total, 99.9), cpu_io, nsamples ? (double)depth_sum / nsamples : 0.0,
	       (unsigned long long)errors);

	for (i = 0; i < o.threads; i++) {
		if (o.mode == MODE_RING)
			gs_q_ring_del(q, w[i].ring);
		free(w[i].ring);
		free(w[i].start_ns);
		free(w[i].hist);
		free(w[i].cbs);
	}
	gs_q_close(q);
	for (i = 0; i < o.threads; i++)
		free(w[i].bufs);
	free(w);
	free(hist);
	return errors ? 1 : 0;
}
