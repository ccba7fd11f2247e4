// SPDX-License-Identifier: MIT
/*
 * gstore-cachebench: the block cache's hit path.
 *
 * Every line of an image is made resident first; then, for 1..N threads:
 *   get+put        gs_cache_get() + gs_cache_put() of random lines
 *   read 4k        gs_cache_read() of 4 KiB at random 4 KiB-aligned offsets
 *   pread 4k peer  pread(2) of the same offsets from the OS page cache
 *                  (a buffered fd on the same file, pages made resident first)
 * Each figure is the median of several timed runs after a warm-up run.
 * Misses during the timed runs are counted and reported (they should be 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"

enum { T_GETPUT, T_READ, T_PREAD, T_NR };
static const char *const tname[T_NR] = {
	"get+put (random line)", "gs_cache_read 4 KiB", "pread 4 KiB, page cache (peer)",
};

struct opts {
	const char *path;
	uint64_t size;
	uint32_t line;
	int max_threads;
	double secs;
	int runs;
	unsigned int tests;	/* bit per T_* */
};

struct thr {
	pthread_t t;
	int test;
	struct gs_cache *c;
	int fd;
	uint64_t lines, blocks;
	uint64_t seed;
	uint64_t ops;
	int err;
	const int *stop;
	pthread_barrier_t *bar;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *run_thread(void *arg)
{
	struct thr *t = arg;
	char buf[4096] __attribute__((aligned(4096)));
	/* the loop touches only locals: thr structs of different threads
	 * share cache lines */
	struct gs_cache *c = t->c;
	uint64_t ops = 0, seed = t->seed, lines = t->lines, blocks = t->blocks;
	uint32_t ls = c ? gs_cache_line_size(c) : 0;
	int err = 0, fd = t->fd, test = t->test;

	pthread_barrier_wait(t->bar);
	while (!__atomic_load_n(t->stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 256; i++) {
			uint64_t r = rnd(&seed);
			struct gs_line *l;
			void *d;

			switch (test) {
			case T_GETPUT:
				if (gs_cache_get(c, (r % lines) * ls, 0, &l, &d)) {
					err++;
					break;
				}
				gs_cache_put(c, l);
				break;
			case T_READ:
				if (gs_cache_read(c, buf, 4096, (r % blocks) * 4096) != 4096)
					err++;
				break;
			case T_PREAD:
				if (pread(fd, buf, 4096, (off_t)((r % blocks) * 4096)) != 4096)
					err++;
				break;
			}
		}
		ops += 256;
	}
	t->ops = ops;
	t->err = err;
	return NULL;
}

/* One timed run: total ops/s over @n threads. */
static double run(int test, int n, struct gs_cache *c, int fd, const struct opts *o,
		  uint64_t seed, int *errs)
{
	struct thr t[64];
	pthread_barrier_t bar;
	int stop = 0;
	uint64_t ops = 0;
	double t0, t1;

	pthread_barrier_init(&bar, NULL, (unsigned int)n + 1);
	for (int i = 0; i < n; i++) {
		t[i] = (struct thr){
			.test = test, .c = c, .fd = fd, .lines = o->size / o->line,
			.blocks = o->size / 4096, .seed = seed * 64 + (uint64_t)i + 1,
			.stop = &stop, .bar = &bar,
		};
		if (pthread_create(&t[i].t, NULL, run_thread, &t[i])) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&bar);
	t0 = now();
	usleep((useconds_t)(o->secs * 1e6));
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		pthread_join(t[i].t, NULL);
		ops += t[i].ops;
		*errs += t[i].err;
	}
	t1 = now();
	pthread_barrier_destroy(&bar);
	return (double)ops / (t1 - t0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static unsigned int parse_tests(char *list)
{
	static const char *const key[T_NR] = { "getput", "read", "pread" };
	unsigned int m = 0;

	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
		for (int i = 0; i < T_NR; i++)
			if (!strcmp(tok, key[i]))
				m |= 1u << i;
	return m;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: gstore-cachebench [-f IMAGE] [-s SIZE_MiB] [-l LINE] [-t THREADS]\n"
		"                         [-d SECONDS] [-r RUNS] [-o getput,read,pread]\n"
		"  -f  image file (default: a temporary file in $TMPDIR or /tmp)\n"
		"  -s  image size and cache budget, MiB (default 64)\n"
		"  -l  cache line size, bytes (default 65536)\n"
		"  -t  threads: runs 1..THREADS (default 2)\n"
		"  -d  seconds per timed run (default 0.5)\n"
		"  -r  timed runs per figure, median reported (default 5)\n"
		"  -o  tests to run (default all)\n");
	exit(2);
}

static int make_image(const char *path, uint64_t size)
{
	char *b = malloc(1 << 20);
	int fd = open(path, O_RDWR | O_CREAT, 0600);

	if (fd < 0 || !b) {
		free(b);
		return -1;
	}
	for (uint64_t off = 0; off < size; off += 1 << 20) {
		for (int i = 0; i < 1 << 20; i++)
			b[i] = (char)(off + (uint64_t)i * 7);
		if (pwrite(fd, b, 1 << 20, (off_t)off) != 1 << 20) {
			close(fd);
			free(b);
			return -1;
		}
	}
	free(b);
	return fd;
}

int main(int argc, char **argv)
{
	struct opts o = { .size = 64ull << 20, .line = 65536, .max_threads = 2, .secs = 0.5,
			  .runs = 5, .tests = (1u << T_NR) - 1 };
	char tmp[256] = "";
	struct gs_q_params qp = { 0 };
	struct gs_cache_params cp = { 0 };
	struct gs_cache_stats st0, st1;
	struct gs_q *q = NULL;
	struct gs_cache *c = NULL;
	double res[T_NR][65];
	int opt, fd, r, errs = 0;
	char buf[4096];

	while ((opt = getopt(argc, argv, "f:s:l:t:d:r:o:h")) != -1) {
		switch (opt) {
		case 'f': o.path = optarg; break;
		case 's': o.size = strtoull(optarg, NULL, 0) << 20; break;
		case 'l': o.line = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': o.max_threads = atoi(optarg); break;
		case 'd': o.secs = atof(optarg); break;
		case 'r': o.runs = atoi(optarg); break;
		case 'o':
			o.tests = parse_tests(optarg);
			break;
		default: usage();
		}
	}
	if (!o.size || o.max_threads < 1 || o.max_threads > 64 || o.runs < 1 || o.runs > 99 ||
	    o.secs <= 0 || !o.tests || o.line < 4096 || o.size % o.line)
		usage();
	if (!o.path) {
		const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

		snprintf(tmp, sizeof(tmp), "%s/gstore-cachebench-XXXXXX", dir);
		fd = mkstemp(tmp);
		if (fd < 0) {
			perror("mkstemp");
			return 1;
		}
		close(fd);
		o.path = tmp;
	}
	fd = make_image(o.path, o.size);
	if (fd < 0) {
		perror(o.path);
		goto unlink;
	}

	qp.path = o.path;
	r = gs_q_open(&q, &qp);
	if (r) {
		qp.flags = GS_Q_BUFFERED;
		r = gs_q_open(&q, &qp);
	}
	if (r) {
		fprintf(stderr, "gs_q_open %s: %s\n", o.path, strerror(-r));
		goto close_fd;
	}
	cp.mem_bytes = o.size;
	cp.line_size = o.line;
	r = gs_cache_create(&c, q, &cp);
	if (r) {
		fprintf(stderr, "gs_cache_create: %s\n", strerror(-r));
		goto close_q;
	}
	/* make everything resident: the cache's lines and the page cache's pages */
	for (uint64_t off = 0; off < o.size; off += 4096) {
		if (gs_cache_read(c, buf, 4096, off) != 4096 ||
		    pread(fd, buf, 4096, (off_t)off) != 4096) {
			fprintf(stderr, "warm-up read failed at %llu\n", (unsigned long long)off);
			goto destroy;
		}
	}

	printf("gstore-cachebench: %s, %llu MiB, %s, line %u B, %llu lines, all resident\n",
	       o.path, (unsigned long long)(o.size >> 20),
	       qp.flags & GS_Q_BUFFERED ? "buffered" : "O_DIRECT", o.line,
	       (unsigned long long)(o.size / o.line));
	printf("median of %d runs of %.2f s after a warm-up run; %ld online CPUs\n\n", o.runs,
	       o.secs, sysconf(_SC_NPROCESSORS_ONLN));
	printf("%-32s %7s %12s %12s %18s\n", "test", "threads", "Mops/s", "ns/op/thr",
	       "min..max Mops/s");
	gs_cache_get_stats(c, &st0);
	for (int test = 0; test < T_NR; test++) {
		if (!(o.tests & (1u << test)))
			continue;
		for (int n = 1; n <= o.max_threads; n++) {
			double v[100];

			run(test, n, c, fd, &o, 999, &errs);	/* warm-up */
			for (int i = 0; i < o.runs; i++)
				v[i] = run(test, n, c, fd, &o, (uint64_t)i, &errs);
			qsort(v, (size_t)o.runs, sizeof(v[0]), cmp_double);
			res[test][n] = v[o.runs / 2];
			printf("%-32s %7d %12.2f %12.1f %8.2f..%-8.2f\n", tname[test], n,
			       res[test][n] / 1e6, 1e9 * n / res[test][n], v[0] / 1e6,
			       v[o.runs - 1] / 1e6);
		}
	}
	gs_cache_get_stats(c, &st1);
	printf("\n");
	for (int n = 1; n <= o.max_threads && (o.tests >> T_READ & o.tests >> T_PREAD & 1); n++)
		printf("gs_cache_read 4 KiB / pread 4 KiB (page cache), %d thread%s: %.2fx\n", n,
		       n > 1 ? "s" : "", res[T_READ][n] / res[T_PREAD][n]);
	for (int n = 2; n <= o.max_threads && (o.tests & 1u << T_GETPUT); n++)
		printf("get+put scaling, %d threads / 1 thread: %.2fx\n", n,
		       res[T_GETPUT][n] / res[T_GETPUT][1]);
	printf("misses during the timed runs: %llu, errors: %d\n",
	       (unsigned long long)(st1.misses - st0.misses), errs);

destroy:
	gs_cache_destroy(c);
close_q:
	gs_q_close(q);
close_fd:
	close(fd);
unlink:
	if (tmp[0])
		unlink(tmp);
	return errs ? 1 : 0;
}
