/* SPDX-License-Identifier: MIT */
/*
 * A memory "device" for the cache unit tests, bound through
 * cache_create_ops(): counts reads per line, logs every operation in
 * order, injects errors, holds reads at a gate (to force coalescing) and
 * serves gs_q_submit()-style async reads from a worker thread.
 *
 * The copies between device and line memory stand for DMA, which a real
 * device does behind the compiler's back: they are not instrumented by
 * TSan (a write-back may legally read a line a writer is changing; the
 * cache's generation counter is what keeps that correct).
 */
#ifndef CACHE_STUB_H
#define CACHE_STUB_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_internal.h"

#define STUB_LOG_MAX	4096

struct stub_op {
	char op;		/* 'R', 'W', 'F' (async ones too, when they run) */
	uint64_t off;
};

struct stub {
	uint8_t *mem;
	uint64_t size;
	uint32_t lba, max_io, line;
	uint32_t *line_reads;		/* reads per line of @line bytes */
	uint64_t reads, writes, flushes;
	/* injection: the next N reads/writes (-1: all) fail with err */
	int fail_reads, read_err;
	int fail_writes, write_err;
	/* reads wait while gate_closed (and call gate_fn once per read first) */
	int gate_closed;
	void (*read_hook)(struct stub *s, uint64_t off);
	/* called after a write's copy, as if the line changed during DMA */
	void (*write_hook)(struct stub *s, uint64_t off);
	void *arg;
	struct stub_op log[STUB_LOG_MAX];
	unsigned int nlog;
	/* async reads */
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct gs_q_io *queue[1024];
	unsigned int qhead, qtail;
	int stop;
};

__attribute__((no_sanitize("thread"), noinline))
static void stub_dma(void *dst, const void *src, size_t len)
{
	volatile uint64_t *d = dst;
	const volatile uint64_t *s = src;

	for (size_t i = 0; i < len / 8; i++)
		d[i] = s[i];
}

static inline void stub_log(struct stub *s, char op, uint64_t off)
{
	unsigned int i = __atomic_fetch_add(&s->nlog, 1, __ATOMIC_RELAXED);

	if (i < STUB_LOG_MAX)
		s->log[i] = (struct stub_op){ .op = op, .off = off };
}

static inline int stub_fault(int *count, int err)
{
	int n = __atomic_load_n(count, __ATOMIC_RELAXED);

	while (n) {
		if (n < 0)
			return err;
		if (__atomic_compare_exchange_n(count, &n, n - 1, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return err;
	}
	return 0;
}

static inline int stub_check(struct stub *s, const void *buf, size_t len, uint64_t off)
{
	if (off % s->lba || len % s->lba || (uintptr_t)buf % s->lba || !len ||
	    off + len > s->size || len > s->max_io)
		return -EINVAL;
	return 0;
}

static inline ssize_t stub_do_read(struct stub *s, void *buf, size_t len, uint64_t off)
{
	int r = stub_check(s, buf, len, off);

	if (r)
		return r;
	__atomic_fetch_add(&s->line_reads[off / s->line], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->reads, 1, __ATOMIC_RELAXED);
	if (s->read_hook)
		s->read_hook(s, off);
	while (__atomic_load_n(&s->gate_closed, __ATOMIC_ACQUIRE))
		usleep(100);
	r = stub_fault(&s->fail_reads, s->read_err);
	if (r)
		return r;
	stub_dma(buf, s->mem + off, len);
	return (ssize_t)len;
}

static inline ssize_t stub_pread(void *dev, void *buf, size_t len, uint64_t off)
{
	stub_log(dev, 'R', off);
	return stub_do_read(dev, buf, len, off);
}

static inline ssize_t stub_pwrite(void *dev, const void *buf, size_t len, uint64_t off)
{
	struct stub *s = dev;
	int r = stub_check(s, buf, len, off);

	stub_log(s, 'W', off);
	if (r)
		return r;
	__atomic_fetch_add(&s->writes, 1, __ATOMIC_RELAXED);
	r = stub_fault(&s->fail_writes, s->write_err);
	if (r)
		return r;
	stub_dma(s->mem + off, buf, len);
	if (s->write_hook)
		s->write_hook(s, off);
	return (ssize_t)len;
}

static inline int stub_flush(void *dev)
{
	struct stub *s = dev;

	stub_log(s, 'F', 0);
	__atomic_fetch_add(&s->flushes, 1, __ATOMIC_RELAXED);
	return 0;
}

static inline int stub_geometry(void *dev, struct gs_q_geom *g)
{
	struct stub *s = dev;

	memset(g, 0, sizeof(*g));
	g->lba_size = s->lba;
	g->opt_io = s->lba;
	g->max_io = s->max_io;
	g->queue_depth = 64;
	g->nr_queues = 1;
	g->nr_devices = 1;
	g->capacity = s->size;
	return 0;
}

static inline int stub_submit(void *dev, struct gs_q_io **ios, unsigned int n)
{
	struct stub *s = dev;

	pthread_mutex_lock(&s->lock);
	if (s->qtail - s->qhead + n > 1024) {
		pthread_mutex_unlock(&s->lock);
		return -EAGAIN;
	}
	for (unsigned int i = 0; i < n; i++)
		s->queue[s->qtail++ % 1024] = ios[i];
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->lock);
	return (int)n;
}

static void *stub_worker(void *arg)
{
	struct stub *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct gs_q_io *io;
		ssize_t r;

		while (s->qhead == s->qtail && !s->stop)
			pthread_cond_wait(&s->cv, &s->lock);
		if (s->qhead == s->qtail)
			break;
		io = s->queue[s->qhead++ % 1024];
		pthread_mutex_unlock(&s->lock);
		if (io->op == GS_OP_READ)
			r = stub_pread(s, io->buf, io->len, io->off);
		else if (io->op == GS_OP_WRITE)
			r = stub_pwrite(s, io->buf, io->len, io->off);
		else
			r = -EINVAL;
		io->done(io, r);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static const struct cache_io_ops stub_ops = {
	.geometry = stub_geometry,
	.pread = stub_pread,
	.pwrite = stub_pwrite,
	.flush = stub_flush,
	.submit = stub_submit,
};

/* Device of @size bytes filled with stub_pattern(); @line: granule of the
 * per-line read counters (use the cache's line size). */
static inline uint8_t stub_pattern(uint64_t off)
{
	return (uint8_t)((off * 7 + (off >> 12) * 13 + 1) & 0xff);
}

static inline struct stub *stub_new(uint64_t size, uint32_t lba, uint32_t line)
{
	struct stub *s = calloc(1, sizeof(*s));

	if (!s)
		abort();
	s->size = size;
	s->lba = lba;
	s->line = line;
	s->max_io = 1u << 20;
	s->read_err = -EIO;
	s->write_err = -EIO;
	s->mem = malloc(size);
	s->line_reads = calloc(size / line + 1, sizeof(*s->line_reads));
	if (!s->mem || !s->line_reads)
		abort();
	for (uint64_t i = 0; i < size; i++)
		s->mem[i] = stub_pattern(i);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->worker, NULL, stub_worker, s))
		abort();
	return s;
}

static inline void stub_free(struct stub *s)
{
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->worker, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cv);
	free(s->line_reads);
	free(s->mem);
	free(s);
}

static inline struct gs_cache *stub_cache(struct stub *s, size_t mem, uint32_t line, uint32_t ra)
{
	struct gs_cache_params p = { .mem_bytes = mem, .line_size = line, .readahead = ra };
	struct gs_cache *c = NULL;
	int r = cache_create_ops(&c, &stub_ops, s, &p);

	if (r)
		abort();
	return c;
}

static inline struct gs_cache_stats stub_stats(struct gs_cache *c)
{
	struct gs_cache_stats st;

	gs_cache_get_stats(c, &st);
	return st;
}

/* Small deterministic PRNG for tests (xorshift64*). */
static inline uint64_t stub_rand(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

#endif /* CACHE_STUB_H */
