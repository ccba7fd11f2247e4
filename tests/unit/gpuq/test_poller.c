// SPDX-License-Identifier: MIT
/*
 * Poller behaviour: more pollers become active under load and park again
 * when idle; idle pollers (with a GPU-style polled ring attached) cost
 * almost no CPU; rings come and go while requests flow.
 *
 * serial: the idle check measures CPU use, which other tests running beside it would skew
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include "gpuq_test.h"

#define BS	4096u
#define IMG	(16u << 20)

struct load {
	struct gs_q *q;
	unsigned stop;		/* atomic */
	uint64_t done;		/* atomic */
	uint64_t errors;	/* atomic */
};

struct load_t {
	struct load *l;
	uint64_t done;		/* atomic: this thread's completions */
};

static void load_cb(struct gs_q_io *io, int64_t res)
{
	struct load_t *t = io->priv;

	if (res != BS)
		__atomic_fetch_add(&t->l->errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&t->l->done, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&t->done, 1, __ATOMIC_RELEASE);
}

/* Batches of 32 reads, back to back, until told to stop. */
static void *load_thread(void *arg)
{
	struct load_t t = { .l = arg };
	struct gs_q_io io[32], *ios[32];
	char *buf = tq_alloc(32 * BS);
	unsigned seed = (unsigned)(uintptr_t)&io, i;
	uint64_t mine = 0;

	for (i = 0; i < 32; i++) {
		io[i] = (struct gs_q_io){ .op = GS_OP_READ, .len = BS, .buf = buf + i * BS,
					  .done = load_cb, .priv = &t };
		ios[i] = &io[i];
	}
	while (!__atomic_load_n(&t.l->stop, __ATOMIC_RELAXED)) {
		for (i = 0; i < 32; i++)
			io[i].off = (uint64_t)(rand_r(&seed) % (IMG / BS)) * BS;
		if (gs_q_submit(t.l->q, ios, 32) != 32) {
			__atomic_fetch_add(&t.l->errors, 1, __ATOMIC_RELAXED);
			break;
		}
		mine += 32;
		/* io[] is reused: the whole batch must be done first */
		while (__atomic_load_n(&t.done, __ATOMIC_ACQUIRE) < mine)
			usleep(20);
	}
	free(buf);
	return NULL;
}

static void test_scaling(void **state)
{
	struct gs_q_params p = { .min_pollers = 1, .max_pollers = 4, .queue_depth = 4,
				 .idle_ms = 50 };
	struct load l = { 0 };
	struct gs_q_stats st;
	pthread_t th[6];
	unsigned i, peak = 0, ms;

	assert_int_equal(tq_open(&l.q, &p, IMG), 0);
	gs_q_get_stats(l.q, &st);
	assert_int_equal(st.active_pollers, 1);
	assert_int_equal(st.max_pollers, 4);

	for (i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&th[i], NULL, load_thread, &l), 0);
	/* under load (queue depth 4 per poller) more pollers join */
	for (ms = 0; ms < 5000 && peak < 2; ms++) {
		usleep(1000);
		gs_q_get_stats(l.q, &st);
		if (st.active_pollers > peak)
			peak = st.active_pollers;
	}
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	fprintf(stderr, "peak active pollers %u after %u ms, %llu reads\n", peak, ms,
		(unsigned long long)l.done);
	assert_true(peak >= 2);
	assert_true(peak <= 4);
	assert_int_equal(l.errors, 0);

	/* idle: back down to min_pollers (idle_ms 50) */
	for (ms = 0; ms < 5000; ms += 10) {
		gs_q_get_stats(l.q, &st);
		if (st.active_pollers == 1)
			break;
		usleep(10000);
	}
	fprintf(stderr, "back to %u active after %u ms idle\n", st.active_pollers, ms);
	assert_int_equal(st.active_pollers, 1);
	assert_int_equal(st.inflight, 0);

	/* and up again when load returns, then I/O still works after all that */
	{
		char *b = tq_alloc(BS);

		tq_fill(b, BS, 9, 9);
		assert_int_equal(gs_q_pwrite(l.q, b, BS, 9 * BS), BS);
		assert_int_equal(gs_q_flush(l.q), 0);	/* barrier with parked pollers */
		memset(b, 0, BS);
		assert_int_equal(gs_q_pread(l.q, b, BS, 9 * BS), BS);
		assert_true(tq_check(b, BS, 9, 9));
		free(b);
	}
	gs_q_close(l.q);
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Idle pollers sleep: < 2% of a CPU over 2 s, with a polled (GPU) ring too. */
static void test_idle_cpu(void **state)
{
	struct gs_q_params p = { .min_pollers = 2, .max_pollers = 4, .idle_ms = 50 };
	size_t bytes = gs_ring_bytes(64, 64, 64);
	struct gs_ring *gpu = aligned_alloc(64, bytes), *cpu = aligned_alloc(64, bytes);
	char *b = tq_alloc(BS);
	struct gs_q_stats st0, st1;
	struct gs_q *q;
	double c0, c1, w0, w1, pct;
	struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_CW, .len = BS,
			    .buf = (uintptr_t)b, .cw = 0 };

	assert_int_equal(tq_open(&q, &p, IMG), 0);
	assert_int_equal(gs_ring_init(gpu, bytes, 64, 64, 64, GS_RING_POLLED), 0);
	assert_int_equal(gs_ring_init(cpu, bytes, 64, 64, 64, 0), 0);
	assert_int_equal(gs_q_ring_add(q, gpu, NULL, 0), 0);
	assert_int_equal(gs_q_ring_add(q, cpu, NULL, 0), 0);

	/* some work first, so every path has run */
	for (int i = 0; i < 100; i++)
		assert_int_equal(gs_q_pread(q, b, BS, (uint64_t)i * BS), BS);
	/* a polled ring is served without kicks */
	gs_cw_arm(gpu, 0);
	gs_sq_push(gpu, &e);
	assert_int_equal(gs_ring_cw_wait(gpu, 0, 0), BS);
	/* a flush barrier wakes the parked pollers too: they must park again */
	assert_int_equal(gs_q_flush(q), 0);
	gs_q_kick(q);		/* and a kick with no work behind it */
	usleep(300000);		/* spinning ends, back-off reaches its ceiling */

	gs_q_get_stats(q, &st0);
	c0 = cpu_s();
	w0 = wall_s();
	usleep(2000000);
	c1 = cpu_s();
	w1 = wall_s();
	gs_q_get_stats(q, &st1);
	pct = 100.0 * (c1 - c0) / (w1 - w0);
	fprintf(stderr, "idle: %.2f%% CPU over %.2f s, %llu sleeps, %u active pollers\n", pct,
		w1 - w0, (unsigned long long)(st1.sleeps - st0.sleeps), st1.active_pollers);
	assert_true(pct < 2.0);
	assert_int_equal(st1.active_pollers, 2);

	/* still responsive on both kinds of ring */
	e.cw = 1;
	gs_cw_arm(gpu, 1);
	gs_sq_push(gpu, &e);
	assert_int_equal(gs_ring_cw_wait(gpu, 1, 0), BS);
	gs_cw_arm(cpu, 0);
	e.cw = 0;
	gs_sq_push(cpu, &e);
	if (gs_sq_need_kick(cpu))
		gs_q_kick(q);
	assert_int_equal(gs_ring_cw_wait(cpu, 0, 0), BS);

	assert_int_equal(gs_q_ring_del(q, gpu), 0);
	assert_int_equal(gs_q_ring_del(q, cpu), 0);
	gs_q_close(q);
	free(gpu);
	free(cpu);
	free(b);
}

/* Rings added and removed while other threads keep I/O going. */
struct churn {
	struct gs_q *q;
	unsigned stop;
	int bad;
};

static void *churn_io(void *arg)
{
	struct churn *c = arg;
	char *b = tq_alloc(BS);
	uint64_t i = 0;

	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED))
		if (gs_q_pread(c->q, b, BS, (i++ % 64) * BS) != BS)
			c->bad = 1;
	free(b);
	return NULL;
}

static void test_ring_churn(void **state)
{
	struct gs_q_params p = { .min_pollers = 2, .max_pollers = 2, .queue_depth = 8 };
	struct churn c = { 0 };
	size_t bytes = gs_ring_bytes(8, 8, 8);
	char *region = tq_alloc(8 * BS);
	pthread_t th[2];
	int i, k;

	assert_int_equal(tq_open(&c.q, &p, IMG), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, churn_io, &c), 0);
	for (i = 0; i < 200; i++) {
		struct gs_ring *r = aligned_alloc(64, bytes);

		assert_int_equal(gs_ring_init(r, bytes, 8, 8, 8, i % 3 ? 0 : GS_RING_POLLED), 0);
		assert_int_equal(gs_q_ring_add(c.q, r, region, 8 * BS), 0);
		for (k = 0; k < 4; k++) {
			struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CW,
					    .len = BS, .off = (uint64_t)k * BS,
					    .buf = (uint64_t)k * BS, .cw = (uint32_t)k };

			gs_cw_arm(r, k);
			gs_sq_push(r, &e);
		}
		if (gs_sq_need_kick(r))
			gs_q_kick(c.q);
		for (k = 0; k < 4; k++)
			assert_int_equal(gs_ring_cw_wait(r, k, 10), BS);
		assert_int_equal(gs_q_ring_del(c.q, r), 0);
		/* the pollers are done with it: scribble over it before freeing */
		memset(r, 0xee, bytes);
		free(r);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(c.bad, 0);
	gs_q_close(c.q);
	free(region);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scaling),
		cmocka_unit_test(test_idle_cpu),
		cmocka_unit_test(test_ring_churn),
	};

	return tq_run(tests, 1);
}
