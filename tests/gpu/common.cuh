/* SPDX-License-Identifier: MIT */
/* Shared by the GPU test and benchmark programs (tests/gpu). */
#ifndef GS_TESTS_GPU_COMMON_CUH
#define GS_TESTS_GPU_COMMON_CUH

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gstore_cuda.h"
extern "C" {
#include "gstore.h"
#include "gpuq/swnvme.h"
}

#define BS		4096u
/* the last blocks of the image are for write tests: readers skip them */
#define WR_BLOCKS	8192u
#define CAM_WR_FIRST(n)	((n) - WR_BLOCKS)
#define BAM_WR_FIRST(n)	((n) - WR_BLOCKS / 2)

#define CK(x)                                                                        \
	do {                                                                         \
		cudaError_t e_ = (x);                                                \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,   \
				cudaGetErrorString(e_));                             \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

#define OK(x)                                                                        \
	do {                                                                         \
		long r_ = (long)(x);                                                 \
		if (r_ < 0) {                                                        \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,   \
				strerror((int)-r_));                                 \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

/* Launch check: the launch and the kernel's completion. */
#define KCK()                                                                        \
	do {                                                                         \
		CK(cudaGetLastError());                                              \
		CK(cudaDeviceSynchronize());                                         \
	} while (0)

/* Word at byte offset @off of the image (generation 0), and of a rewrite. */
static __host__ __device__ inline uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static __host__ __device__ inline uint64_t pattern2(uint64_t off, uint64_t gen)
{
	return pattern(off ^ (gen << 48)) + gen;
}

static __host__ __device__ inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Wait for the default stream's kernels with a deadline; past it, print
 * @diag's line (counters read on another stream) and exit 1, so a stuck
 * kernel says where it stands instead of eating the run's time.
 */
template <typename D> static inline void kernel_wait(const char *what, double secs, D diag)
{
	double end = now_s() + secs;
	cudaError_t e;

	CK(cudaGetLastError());
	while ((e = cudaStreamQuery(0)) == cudaErrorNotReady) {
		if (now_s() > end) {
			char buf[4096];

			diag(buf, sizeof(buf));
			printf("%s: STUCK after %.0f s: %s\n", what, secs, buf);
			fflush(stdout);
			_exit(1);
		}
		usleep(200);
	}
	CK(e);
	CK(cudaDeviceSynchronize());
}

/*
 * Progress words for a stuck kernel's report: each thread stores, into
 * host-mapped memory, round << 40 | ticket low bits << 8 | phase (1
 * issuing, 2 waiting, 3 done waiting).  Off unless the program turns it on
 * (the stores change the timing); a NULL device pointer makes trace_mark()
 * a no-op.
 */
struct trace {
	unsigned long long *h, *d;	/* host and device views */
	uint32_t n;			/* threads */
};

static __device__ inline void trace_mark(unsigned long long *tr, uint64_t tid, uint32_t r,
					 uint64_t tk, int ph)
{
	if (tr)
		*(volatile unsigned long long *)&tr[tid] =
			((unsigned long long)r << 40) | ((tk & 0xffffffffull) << 8) | ph;
}

static inline void trace_open(struct trace *t, uint32_t n)
{
	t->n = n;
	CK(cudaHostAlloc(&t->h, n * sizeof(*t->h), cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&t->d, t->h, 0));
	memset(t->h, 0, n * sizeof(*t->h));
}

static inline void trace_close(struct trace *t)
{
	if (t->h)
		cudaFreeHost(t->h);
	memset(t, 0, sizeof(*t));
}

/*
 * Append the threads by phase, the collector's (@cam: its queue, read on a
 * stream of its own) and the laggards of the lowest round to @buf at @k.
 */
static inline int trace_report(const struct trace *t, struct gs_cam *cam, char *buf, size_t len,
			       int k)
{
	int cnt[4] = { 0 }, shown = 0;
	unsigned long long minr = ~0ull;
	struct gs_cam hc;
	cudaStream_t st;

	if (!t->h)
		return k;
	memset(&hc, 0, sizeof(hc));
	if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess) {
		cudaMemcpyAsync(&hc, cam, sizeof(hc), cudaMemcpyDeviceToHost, st);
		cudaStreamSynchronize(st);
		cudaStreamDestroy(st);
	}
	if (hc.col_lock && hc.col_owner && hc.col_owner <= t->n) {
		unsigned long long o = t->h[hc.col_owner - 1];

		k += snprintf(buf + k, len - k, " | collector t%llu: r%llu,tk%llu,ph%llu",
			      (unsigned long long)hc.col_owner - 1, o >> 40,
			      (o >> 8) & 0xffffffffull, o & 3);
	}
	for (uint32_t i = 0; i < t->n; i++) {
		cnt[t->h[i] & 3]++;
		minr = t->h[i] >> 40 < minr ? t->h[i] >> 40 : minr;
	}
	k += snprintf(buf + k, len - k, " | threads idle/issuing/waiting/done %d/%d/%d/%d, "
		      "lowest round %llu:", cnt[0], cnt[1], cnt[2], cnt[3], minr);
	for (unsigned long long ph = 1; ph <= 3; ph++)
		for (uint32_t i = 0; i < t->n && shown < 24 && (size_t)k < len; i++)
			if ((t->h[i] & 3) == ph && (t->h[i] >> 40) == minr) {
				k += snprintf(buf + k, len - k, " t%u:r%llu,tk%llu,ph%llu", i,
					      t->h[i] >> 40, (t->h[i] >> 8) & 0xffffffffull, ph);
				shown++;
			}
	return k;
}

/* A deadline for host calls that wait on kernels (gs_cuda_array_flush()). */
struct watchdog {
	double secs;
	const char *what;
	int (*diag)(void *arg, char *buf, size_t len);
	void *arg;
	volatile int armed;
	pthread_t th;
};

static void *watchdog_fn(void *p)
{
	struct watchdog *w = (struct watchdog *)p;
	double end = now_s() + w->secs;

	while (w->armed) {
		if (now_s() > end) {
			char buf[1024];

			w->diag(w->arg, buf, sizeof(buf));
			printf("%s: STUCK after %.0f s: %s\n", w->what, w->secs, buf);
			fflush(stdout);
			_exit(1);
		}
		usleep(10000);
	}
	return NULL;
}

static inline void watchdog_arm(struct watchdog *w)
{
	w->armed = 1;
	pthread_create(&w->th, NULL, watchdog_fn, w);
}

static inline void watchdog_disarm(struct watchdog *w)
{
	w->armed = 0;
	pthread_join(w->th, NULL);
}

static inline void skip_without_gpu(void)
{
	int n = 0;

	/* line-buffered: a run killed by its timeout still shows how far it got */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("skip: no GPU\n");
		exit(77);
	}
}

static inline void log_to_stderr(int level, const char *msg, void *arg)
{
	fprintf(stderr, "gstore[%d]: %s\n", level, msg);
}

static inline const char *image_path(void)
{
	const char *p = getenv("GS_GPU_IMAGE");

	return p ? p : "/tmp/gs-gpu.img";
}

static inline uint64_t image_blocks(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0 || st.st_size < (off_t)(4 * WR_BLOCKS) * BS) {
		fprintf(stderr, "%s: missing or too small: run mkimage first\n", path);
		exit(1);
	}
	return st.st_size / BS;
}

static inline struct gs_q *open_q(const char *path, unsigned pollers, int buffered)
{
	struct gs_q_params qp = {};
	struct gs_q *q;

	qp.path = path;
	qp.min_pollers = 1;
	qp.max_pollers = pollers;
	/* per poller; GS_Q_DEPTH overrides it for the benchmarks' depth sweeps */
	qp.queue_depth = getenv("GS_Q_DEPTH") ? (uint32_t)atoi(getenv("GS_Q_DEPTH")) : 256;
	/* and GS_Q_MAX_INFLIGHT the cap on all pollers' requests (0: half the disk's queue) */
	qp.max_inflight = getenv("GS_Q_MAX_INFLIGHT") ? (uint32_t)strtoul(getenv("GS_Q_MAX_INFLIGHT"),
									  NULL, 0) : 0;
	qp.flags = buffered ? GS_Q_BUFFERED : 0;
	OK(gs_q_open(&q, &qp));
	return q;
}

/* Host check of blocks [first, first + n) of @path against @want(off). */
static inline long host_check(const char *path, uint64_t first, uint64_t n, uint64_t gen)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	uint64_t *buf;
	long bad = 0;

	if (fd < 0 || posix_memalign((void **)&buf, 4096, 1 << 20))
		return -1;
	for (uint64_t b = first; b < first + n; b += 256) {
		uint64_t nb = first + n - b < 256 ? first + n - b : 256;

		if (pread(fd, buf, nb * BS, b * BS) != (ssize_t)(nb * BS)) {
			bad = -1;
			break;
		}
		for (uint64_t i = 0; i < nb * BS / 8; i++) {
			uint64_t off = b * BS + i * 8;

			if (buf[i] != (gen ? pattern2(off, gen) : pattern(off)))
				bad++;
		}
	}
	free(buf);
	close(fd);
	return bad;
}

#endif
