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
			char buf[1024];

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
	qp.queue_depth = 256;
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
