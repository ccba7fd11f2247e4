// SPDX-License-Identifier: MIT
/*
 * 4 KiB random reads into GPU-visible memory, every path on the same image
 * in the same run (docs/PERF.md "GPU path" explains each line):
 *   raw       O_DIRECT pread from T threads (the disk's limit)
 *   pread+cp  O_DIRECT pread + cudaMemcpy to GPU memory from T threads
 *   cufile    cuFileRead into GPU memory from T threads (libcufile, dlopen)
 *   cam       GPU threads gs_prefetch + gs_prefetch_sync, P pollers, S SMs
 *   bam-ring  GPU cache misses through a ring (all misses: 64 MiB cache)
 *   bam-nvme  GPU cache misses as NVMe commands to the software controller
 *   hot       cached array reads vs a device-to-device copy
 * Each figure: one warm-up, then the median of RUNS runs.  Prints lines
 * "RESULT name value unit" for run-all.sh's table, and "RESULT name/raw
 * ratio x" for the GPU rows against the raw row measured next to them.
 *
 * Time.  A GPU run stops issuing at its time cap (GS_BENCH_CAP_S, default
 * 1.5 x the seconds per run; %globaltimer in the kernel, each warp decides
 * at the top of a round) and counts what it completed, so a slow row (BaM
 * through one ring at 132 SMs) costs the same as a fast one.  A row whose
 * worst case (warm-up + RUNS runs at the cap) would end past the budget
 * (GS_BENCH_BUDGET_S, default 130 s: run-all.sh gives the bench 150) is
 * skipped and says so.  Rings: GS_BENCH_RINGS ("0 1 4": the default count
 * for this GPU, then one ring and four, for the comparison).
 *
 *   bench [SECONDS_PER_RUN]
 */
#include <dlfcn.h>

#include <algorithm>
#include <vector>

#include "common.cuh"

#define RUNS 3

static const char *path;
static uint64_t nblocks, nread;
static double secs = 1.5;
static double t_start, budget_s = 130, cap_s;

static void result(const char *name, double v, const char *unit, const char *how)
{
	printf("RESULT %-28s %12.0f %-6s %s\n", name, v, unit, how);
	fflush(stdout);
}

/* A GPU row against the raw row next to it (0: none measured). */
static void ratio(const char *name, double v, double raw)
{
	char n[96];

	if (raw <= 0)
		return;
	snprintf(n, sizeof(n), "%s/raw", name);
	printf("RESULT %-28s %12.2f %-6s %s / %.0f (raw next to it)\n", n, v / raw, "x", name,
	       raw);
	fflush(stdout);
}

/* Room for a row of @runs runs of at most @each seconds in the budget? */
static bool budget_ok(const char *name, int runs, double each)
{
	double left = budget_s - (now_s() - t_start);

	if (runs * each <= left)
		return true;
	printf("RESULT %-28s %12s %-6s skipped: %.0f s left of the %.0f s budget, the row "
	       "may take %.0f s\n", name, "n/a", "", left, budget_s, runs * each);
	fflush(stdout);
	return false;
}

/* CPU seconds of the whole process (pollers included) */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The warm-up run is short (0.2 s): it only needs the paths touched once. */
static bool warming;

static double run_s(void)
{
	return warming ? 0.2 : secs;
}

template <typename F> static double median_of(F f)
{
	std::vector<double> v;

	warming = true;
	f();	/* warm-up */
	warming = false;
	for (int i = 0; i < RUNS; i++)
		v.push_back(f());
	std::sort(v.begin(), v.end());
	return v[RUNS / 2];
}

/* ---- CPU baselines ---- */

enum { M_RAW, M_COPY, M_CUFILE };

/* the cuFile API, declared here: no cufile.h on the build machines */
typedef struct {
	int err;
	int cu_err;
} cufile_err_t;
typedef struct {
	int type;	/* CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1 */
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
} cufile_descr_t;
static struct {
	cufile_err_t (*driver_open)(void);
	cufile_err_t (*handle_register)(void **fh, cufile_descr_t *d);
	void (*handle_deregister)(void *fh);
	cufile_err_t (*buf_register)(const void *p, size_t len, int flags);
	ssize_t (*read)(void *fh, void *p, size_t size, off_t off, off_t poff);
	void *fh;
	int ok;
	char why[256];
} cf;

struct cpu_arg {
	int mode, fd;
	uint64_t seed, n;
	double until;
};

static void *cpu_worker(void *arg)
{
	struct cpu_arg *a = (struct cpu_arg *)arg;
	void *buf = NULL, *dbuf = NULL;
	cudaStream_t s = NULL;
	uint64_t x = a->seed;

	if (posix_memalign(&buf, 4096, BS))
		return NULL;
	if (a->mode != M_RAW) {
		CK(cudaMalloc(&dbuf, BS));
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		if (a->mode == M_COPY)
			CK(cudaHostRegister(buf, BS, cudaHostRegisterDefault));
		else
			cf.buf_register(dbuf, BS, 0);
	}
	while (now_s() < a->until) {
		for (int k = 0; k < 64; k++) {
			uint64_t off = (mix(x++) % nread) * BS;

			if (a->mode == M_CUFILE) {
				if (cf.read(cf.fh, dbuf, BS, off, 0) != BS)
					return NULL;
			} else {
				if (pread(a->fd, buf, BS, off) != BS)
					return NULL;
				if (a->mode == M_COPY) {
					CK(cudaMemcpyAsync(dbuf, buf, BS, cudaMemcpyHostToDevice, s));
					CK(cudaStreamSynchronize(s));
				}
			}
			a->n++;
		}
	}
	if (a->mode == M_COPY)
		cudaHostUnregister(buf);
	if (dbuf)
		cudaFree(dbuf);
	if (s)
		cudaStreamDestroy(s);
	free(buf);
	return NULL;
}

static double cpu_run(int mode, int nth)
{
	std::vector<pthread_t> t(nth);
	std::vector<cpu_arg> a(nth);
	int fd = open(path, O_RDONLY | O_DIRECT);
	double t0 = now_s();
	uint64_t n = 0;

	for (int i = 0; i < nth; i++) {
		a[i] = cpu_arg{ mode, fd, mix(t0 * 1e9 + i), 0, t0 + run_s() };
		pthread_create(&t[i], NULL, cpu_worker, &a[i]);
	}
	for (int i = 0; i < nth; i++) {
		pthread_join(t[i], NULL);
		n += a[i].n;
	}
	double dt = now_s() - t0;

	close(fd);
	return n / dt;
}

static void cufile_open(void)
{
	const char *libs[] = { "libcufile.so.0", "libcufile.so", "/usr/local/cuda/lib64/libcufile.so.0",
			       "/usr/local/cuda/targets/x86_64-linux/lib/libcufile.so.0" };
	void *h = NULL;

	for (unsigned i = 0; i < 4 && !h; i++)
		h = dlopen(libs[i], RTLD_NOW);
	if (!h) {
		snprintf(cf.why, sizeof(cf.why), "no libcufile: %s", dlerror());
		return;
	}
	cf.driver_open = (cufile_err_t(*)(void))dlsym(h, "cuFileDriverOpen");
	cf.handle_register = (cufile_err_t(*)(void **, cufile_descr_t *))dlsym(h, "cuFileHandleRegister");
	cf.handle_deregister = (void (*)(void *))dlsym(h, "cuFileHandleDeregister");
	cf.buf_register = (cufile_err_t(*)(const void *, size_t, int))dlsym(h, "cuFileBufRegister");
	cf.read = (ssize_t(*)(void *, void *, size_t, off_t, off_t))dlsym(h, "cuFileRead");
	if (!cf.driver_open || !cf.handle_register || !cf.read || !cf.buf_register) {
		snprintf(cf.why, sizeof(cf.why), "libcufile lacks the API");
		return;
	}
	cufile_err_t e = cf.driver_open();

	if (e.err) {
		snprintf(cf.why, sizeof(cf.why), "cuFileDriverOpen: error %d (cuda %d)", e.err,
			 e.cu_err);
		return;
	}
	cufile_descr_t d = {};

	d.type = 1;
	d.handle.fd = open(path, O_RDONLY | O_DIRECT);
	e = cf.handle_register(&cf.fh, &d);
	if (e.err) {
		const char *(*str)(int) = (const char *(*)(int))dlsym(h, "cufileop_status_error");

		snprintf(cf.why, sizeof(cf.why), "cuFileHandleRegister: error %d (%s, cuda %d)",
			 e.err, str ? str(e.err) : "?", e.cu_err);
		return;
	}
	/* one probe read: compat mode may be off, the filesystem unsupported */
	void *dbuf;

	CK(cudaMalloc(&dbuf, BS));
	ssize_t r = cf.read(cf.fh, dbuf, BS, 0, 0);

	cudaFree(dbuf);
	if (r != BS) {
		snprintf(cf.why, sizeof(cf.why), "cuFileRead probe returned %zd", r);
		return;
	}
	cf.ok = 1;
}

/* ---- GPU-initiated ---- */

/* GS_BENCH_TRACE=1: CAM threads report their progress (common.cuh), for a stuck
 * kernel's report */
static struct trace cam_trace;
static struct gs_cam *cam_dev;

static __device__ uint64_t gtimer(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Another round for the whole warp: lane 0's clock against @end (the
 * warp's calls are collective: its lanes stop together). */
static __device__ bool warp_goes(uint64_t end)
{
	return __shfl_sync(0xffffffffu, (int)(gtimer() < end), 0);
}

/* warp 0: gs_prefetch + gs_prefetch_sync per thread; 1: gs_prefetch_warp +
 * gs_prefetch_wait (a warp's tickets at once, each thread waits for its own).
 * At most @rounds, none started after @cap_ns; *done counts the reads. */
static __global__ void cam_kernel(struct gs_cam *q, char *region, uint64_t nread, uint32_t rounds,
				  uint64_t seed, int warp, unsigned long long *sum,
				  unsigned long long *tr, uint64_t cap_ns,
				  unsigned long long *done)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	char *dst = region + tid * BS;
	unsigned long long s = 0, n = 0;
	uint64_t end = __shfl_sync(0xffffffffu, gtimer(), 0) + cap_ns;

	for (uint32_t r = 0; r < rounds && warp_goes(end); r++, n++) {
		uint64_t id = mix(seed ^ (tid << 24) ^ r) % nread, tk = 0;

		trace_mark(tr, tid, r, 0, 1);
		if (warp) {
			gs_prefetch_warp(q, id, dst, &tk);
			trace_mark(tr, tid, r, tk, 2);
			gs_prefetch_wait(q, tk);
		} else {
			gs_prefetch(q, &id, 1, dst);
			trace_mark(tr, tid, r, 0, 2);
			gs_prefetch_sync(q);
		}
		trace_mark(tr, tid, r, tk, 3);
		s += *(volatile uint64_t *)dst;
	}
	atomicAdd(sum, s);
	atomicAdd(done, n);
}

/* A stuck CAM kernel: the ring's line, then the threads' progress. */
static int cam_diag(void *arg, char *buf, size_t len)
{
	return trace_report(&cam_trace, cam_dev, buf, len,
			    gs_cuda_debug((struct gs_cuda *)arg, buf, len));
}

static __global__ void bam_kernel(struct gs_bam *a, uint64_t nelem, uint32_t rounds, uint64_t seed,
				  unsigned long long *sum, uint64_t cap_ns)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long s = 0;
	uint64_t end = __shfl_sync(0xffffffffu, gtimer(), 0) + cap_ns;

	for (uint32_t r = 0; r < rounds && warp_goes(end); r++)
		s += gs_array_get_u64(a, mix(seed ^ (tid << 24) ^ r) % nelem);
	atomicAdd(sum, s);
}

/*
 * Sweep of lines [0, n * 8 / line) of u64 elements, @reps times, a line per
 * group of L lanes: L = 32, a line per warp access (as gs_array_line: one
 * reference per 4 KiB, 16-byte loads); L = 16, each half-warp its own line
 * (two lookups and twice the loads in flight per round).
 */
template <int L>
static __global__ void hot_line_kernel(struct gs_bam *a, uint64_t n, int reps,
				       unsigned long long *sum)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	uint64_t nlines = n * 8 >> a->line_shift, per = 32 / L;
	int lane = threadIdx.x & 31, sub = lane / L;
	unsigned long long s = 0;

	for (int r = 0; r < reps; r++)
		for (uint64_t l = per * warp; l < nlines; l += per * nwarps) {
			uint64_t mine = l + sub < nlines ? l + sub : l;

			gs_array_access(a, mine << a->line_shift, 0, [&](char *p) {
				const uint4 *q = (const uint4 *)p + lane % L;
				uint4 v[BS / 16 / L];

				/* all loads in flight at once (lines are BS here) */
#pragma unroll
				for (uint32_t k = 0; k < BS / 16 / L; k++)
					v[k] = q[L * k];
#pragma unroll
				for (uint32_t k = 0; k < BS / 16 / L; k++)
					s += v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
			});
		}
	atomicAdd(sum, s);
}

/* Coalesced sweep of [0, n) elements, @reps times. */
static __global__ void hot_kernel(struct gs_bam *a, uint64_t n, int reps, unsigned long long *sum)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	unsigned long long s = 0;

	for (int r = 0; r < reps; r++)
		for (uint64_t i = tid; i < n; i += stride)
			s += gs_array_get_u64(a, i);
	atomicAdd(sum, s);
}

/* What a stuck kernel prints before the bench gives up (set per section). */
static int (*diag_fn)(void *arg, char *buf, size_t len);
static void *diag_arg;
static struct gs_q *diag_q;

static double gpu_time(void (*launch)(void *), void *arg)
{
	cudaEvent_t e0, e1;
	cudaError_t e;
	double end = now_s() + (getenv("GS_BENCH_STUCK_S") ? atof(getenv("GS_BENCH_STUCK_S")) : 30);
	float ms;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	launch(arg);
	CK(cudaGetLastError());
	CK(cudaEventRecord(e1));
	while ((e = cudaEventQuery(e1)) == cudaErrorNotReady) {
		if (now_s() > end) {
			char buf[4096] = "";
			struct gs_q_stats st = {};

			if (diag_fn)
				diag_fn(diag_arg, buf, sizeof(buf));
			if (diag_q)
				gs_q_get_stats(diag_q, &st);
			printf("STUCK kernel: %s | q reqs %llu inflight %u pollers %u/%u sleeps %llu\n",
			       buf, (unsigned long long)st.reqs, st.inflight, st.active_pollers,
			       st.max_pollers, (unsigned long long)st.sleeps);
			fflush(stdout);
			_exit(3);
		}
		usleep(100);
	}
	CK(e);
	CK(cudaEventElapsedTime(&ms, e0, e1));
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return ms / 1e3;
}

/* Integers from env @name (space separated), or @def. */
static std::vector<int> env_list(const char *name, const char *def)
{
	const char *v = getenv(name);
	std::vector<int> out;
	char *end;

	for (const char *p = v ? v : def; *p; p = end) {
		long x = strtol(p, &end, 10);

		if (end == p)
			break;
		out.push_back((int)x);
	}
	return out;
}

struct cam_arg {
	struct gs_cam *q;
	char *region;
	int blocks, threads;
	uint32_t rounds;
	unsigned long long *sum;
	unsigned long long *done;	/* reads completed (device counter) */
	uint64_t cap_ns;
};

static void cam_launch(void *p)
{
	cam_arg *a = (cam_arg *)p;

	cam_kernel<<<a->blocks, a->threads>>>(a->q, a->region, nread, a->rounds,
					      mix(now_s() * 1e9), 0, a->sum, cam_trace.d,
					      a->cap_ns, a->done);
}

struct bam_arg {
	struct gs_bam *a;
	int blocks, threads;
	uint32_t rounds;
	uint64_t n;
	unsigned long long *sum;
	uint64_t cap_ns;
};

static void bam_launch(void *p)
{
	bam_arg *b = (bam_arg *)p;

	bam_kernel<<<b->blocks, b->threads>>>(b->a, b->n, b->rounds, mix(now_s() * 1e9), b->sum,
					      b->cap_ns);
}

static void hot_launch(void *p)
{
	bam_arg *b = (bam_arg *)p;

	hot_kernel<<<b->blocks, b->threads>>>(b->a, b->n, b->rounds, b->sum);
}

static void hot_line_launch(void *p)
{
	bam_arg *b = (bam_arg *)p;

	hot_line_kernel<32><<<b->blocks, b->threads>>>(b->a, b->n, b->rounds, b->sum);
}

static void hot_line2_launch(void *p)
{
	bam_arg *b = (bam_arg *)p;

	hot_line_kernel<16><<<b->blocks, b->threads>>>(b->a, b->n, b->rounds, b->sum);
}

static void camw_launch(void *p)
{
	cam_arg *a = (cam_arg *)p;

	cam_kernel<<<a->blocks, a->threads>>>(a->q, a->region, nread, a->rounds,
					      mix(now_s() * 1e9), 1, a->sum, cam_trace.d,
					      a->cap_ns, a->done);
}

/*
 * CAM rows: @nrings rings (0: the default for this GPU), @pollers pollers,
 * the SM counts of GS_BENCH_SMS, both ways (GS_BENCH_CAM_WAYS), each row's
 * ratio to @raw (the raw row measured just before).
 */
static void bench_cam(unsigned pollers, double target_iops, uint32_t nrings, double raw)
{
	struct gs_q *q = open_q(path, pollers, 0);
	struct gs_cuda_params p = {};
	struct gs_cuda *c;
	unsigned long long *sum, *done;
	std::vector<int> sms = env_list("GS_BENCH_SMS", "16 32 132");
	std::vector<int> ways = env_list("GS_BENCH_CAM_WAYS", "1");
	int threads = 128, maxsm = *std::max_element(sms.begin(), sms.end());

	p.buf_bytes = (size_t)maxsm * threads * BS;
	p.sq_entries = 8192;
	p.nrings = nrings;
	OK(gs_cuda_open(&c, q, &p));
	uint32_t nr = gs_cuda_nrings(c);

	CK(cudaMalloc(&sum, sizeof(*sum)));
	CK(cudaMalloc(&done, sizeof(*done)));
	cam_dev = gs_cuda_cam(c);
	if (getenv("GS_BENCH_TRACE"))
		trace_open(&cam_trace, maxsm * threads);
	diag_fn = cam_diag;
	diag_arg = c;
	diag_q = q;

	/* way 1 (default): gs_prefetch_warp + gs_prefetch_wait; 0: gs_prefetch +
	 * gs_prefetch_sync (GS_BENCH_CAM_WAYS="1 0" for both) */
	for (int w : ways)
	for (int nsm : sms) {
		cam_arg a = { gs_cuda_cam(c), (char *)gs_cuda_buf(c, NULL), nsm, threads, 0, sum,
			      done, (uint64_t)(cap_s * 1e9) };
		uint64_t want = (uint64_t)(target_iops * secs);
		struct gs_q_stats s0, s1;
		double c0, c1;
		char name[64], how[192];

		snprintf(name, sizeof(name), "cam%s_p%u_sm%d_r%u", w ? "w" : "", pollers, nsm, nr);
		if (!budget_ok(name, RUNS, cap_s + 0.3))
			continue;
		/* rounds for about secs at the raw rate; the cap ends slower runs */
		a.rounds = (uint32_t)std::max<uint64_t>(2, want / (a.blocks * threads));
		gs_q_get_stats(q, &s0);
		c0 = cpu_s();
		double iops = median_of([&] {
			unsigned long long n = 0;

			if (cam_trace.h) {
				cam_trace.n = nsm * threads;
				memset(cam_trace.h, 0, cam_trace.n * sizeof(*cam_trace.h));
			}
			CK(cudaMemset(done, 0, sizeof(*done)));
			a.cap_ns = (uint64_t)((warming ? 0.2 : cap_s) * 1e9);
			double dt = gpu_time(w ? camw_launch : cam_launch, &a);

			CK(cudaMemcpy(&n, done, sizeof(n), cudaMemcpyDeviceToHost));
			return n / dt;
		});
		c1 = cpu_s();
		gs_q_get_stats(q, &s1);
		snprintf(how, sizeof(how), "%d blocks x %d threads, %u pollers, %u rings%s; "
			 "%.2f CPU us/IO", nsm, threads, pollers, nr,
			 w ? ", warp tickets, own waits" : "",
			 (c1 - c0) * 1e6 / (double)(s1.reqs - s0.reqs));
		result(name, iops, "IOPS", how);
		ratio(name, iops, raw);
	}
	diag_fn = NULL;
	diag_q = NULL;
	trace_close(&cam_trace);
	OK(gs_cuda_error(c));
	gs_cuda_close(c);
	gs_q_close(q);
	cudaFree(sum);
	cudaFree(done);
}

/* BaM rows (misses through @nrings rings, or NVMe commands), as bench_cam. */
static void bench_bam(int nvme, double target_iops, uint32_t nrings, double raw)
{
	struct gs_q *q = NULL;
	struct gs_cuda *c = NULL;
	struct gs_swnvme *sw = NULL;
	void *bar = NULL;
	unsigned long long *sum;

	if (nvme) {
		struct gs_swnvme_params sp = {};

		CK(cudaHostAlloc(&bar, gs_swnvme_bar_bytes(16), cudaHostAllocMapped));
		sp.path = path;
		sp.max_qpairs = 16;
		/* commands in flight to the file: under the disk's queue (see gs_q_params) */
		sp.depth = getenv("GS_SWNVME_DEPTH") ? atoi(getenv("GS_SWNVME_DEPTH")) : 128;
		sp.bar = bar;
		OK(gs_swnvme_start(&sw, &sp));
	} else {
		struct gs_cuda_params p = {};

		q = open_q(path, 2, 0);
		p.nrings = nrings;
		OK(gs_cuda_open(&c, q, &p));
	}
	struct gs_cuda_array_params ap = {};
	struct gs_cuda_array *a;

	ap.cache_bytes = 64u << 20;
	ap.nio = 4096;
	ap.backend = nvme ? GS_BAM_NVME : GS_BAM_RING;
	ap.swnvme = sw;
	ap.nrings = nrings ? nrings : 0;
	/* queues and slots: the defaults, as t_bam (8 x 256 hung once in the bench) */
	OK(gs_cuda_array_open(&a, c, &ap));
	CK(cudaMalloc(&sum, sizeof(*sum)));
	diag_fn = (int (*)(void *, char *, size_t))gs_cuda_array_debug;
	diag_arg = a;
	diag_q = q;
	for (int nsm : env_list("GS_BENCH_BAM_SMS", "16 32 132")) {
		bam_arg b = { gs_cuda_array_dev(a), nsm, 256, 0, nread * (BS / 8), sum,
			      (uint64_t)(cap_s * 1e9) };
		uint64_t want = (uint64_t)(target_iops * secs);
		char name[64], how[128];

		if (nvme)
			snprintf(name, sizeof(name), "bam_nvme_sm%d", nsm);
		else
			snprintf(name, sizeof(name), "bam_ring_sm%d_r%u", nsm, c ? gs_cuda_nrings(c) : 1);
		if (!budget_ok(name, RUNS, cap_s + 0.3))
			continue;
		b.rounds = (uint32_t)std::max<uint64_t>(2, want / (b.blocks * 256));
		double iops = median_of([&] {
			struct gs_cuda_array_stats s0, s1;

			OK(gs_cuda_array_stats(a, &s0));
			b.cap_ns = (uint64_t)((warming ? 0.2 : cap_s) * 1e9);
			double dt = gpu_time(bam_launch, &b);

			OK(gs_cuda_array_stats(a, &s1));
			return (s1.misses - s0.misses) / dt;
		});
		snprintf(how, sizeof(how), "%d blocks x 256 threads, misses/s, %s", nsm,
			 nvme ? "4 NVMe queues x 1024" : "2 pollers");
		result(name, iops, "IOPS", how);
		ratio(name, iops, raw);
	}
	diag_fn = NULL;
	diag_q = NULL;
	OK(gs_cuda_array_error(a));
	gs_cuda_array_close(a);
	gs_cuda_close(c);
	if (q)
		gs_q_close(q);
	if (sw) {
		gs_swnvme_stop(sw);
		cudaFreeHost(bar);
	}
	cudaFree(sum);
}

static void bench_hot(void)
{
	struct gs_q *q = open_q(path, 2, 0);
	struct gs_cuda_params p = {};
	struct gs_cuda *c;
	struct gs_cuda_array_params ap = {};
	struct gs_cuda_array *a;
	unsigned long long *sum;
	size_t bytes = 256u << 20;

	OK(gs_cuda_open(&c, q, &p));
	ap.cache_bytes = 2 * bytes;
	OK(gs_cuda_array_open(&a, c, &ap));
	CK(cudaMalloc(&sum, sizeof(*sum)));
	bam_arg b = { gs_cuda_array_dev(a), 132 * 8, 256, 1, bytes / 8, sum };

	gpu_time(hot_launch, &b);	/* fill the cache */
	b.rounds = 5;
	double gbs = median_of([&] { return 5.0 * bytes / gpu_time(hot_launch, &b) / 1e9; });

	result("hot_array_read", gbs, "GB/s", "256 MiB cached, coalesced get_u64, 5 sweeps");
	double gbl = median_of([&] { return 5.0 * bytes / gpu_time(hot_line_launch, &b) / 1e9; });

	result("hot_line_read", gbl, "GB/s", "256 MiB cached, gs_array_line per warp, 5 sweeps");
	double gbl2 = median_of([&] { return 5.0 * bytes / gpu_time(hot_line2_launch, &b) / 1e9; });

	result("hot_line2_read", gbl2, "GB/s", "256 MiB cached, a line per half-warp, 5 sweeps");
	/* the peer: a device-to-device copy of the same size, read + write bytes */
	void *x, *y;

	CK(cudaMalloc(&x, bytes));
	CK(cudaMalloc(&y, bytes));
	CK(cudaMemset(x, 1, bytes));
	double d2d = median_of([&] {
		cudaEvent_t e0, e1;
		float ms;

		cudaEventCreate(&e0);
		cudaEventCreate(&e1);
		cudaEventRecord(e0);
		for (int i = 0; i < 5; i++)
			cudaMemcpy(y, x, bytes, cudaMemcpyDeviceToDevice);
		cudaEventRecord(e1);
		cudaEventSynchronize(e1);
		cudaEventElapsedTime(&ms, e0, e1);
		return 5.0 * 2 * bytes / (ms / 1e3) / 1e9;
	});

	result("d2d_copy_rw", d2d, "GB/s", "cudaMemcpy D2D 256 MiB, read+write bytes");
	result("hot_vs_d2d_pct", 100 * gbs / d2d, "%", "hot_array_read / d2d_copy_rw");
	result("hot_line_vs_d2d_pct", 100 * gbl / d2d, "%", "hot_line_read / d2d_copy_rw");
	result("hot_line2_vs_d2d_pct", 100 * gbl2 / d2d, "%", "hot_line2_read / d2d_copy_rw");
	cudaFree(x);
	cudaFree(y);
	gs_cuda_array_close(a);
	gs_cuda_close(c);
	gs_q_close(q);
	cudaFree(sum);
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	if (argc > 1)
		secs = atof(argv[1]);
	t_start = now_s();
	cap_s = getenv("GS_BENCH_CAP_S") ? atof(getenv("GS_BENCH_CAP_S")) : 1.5 * secs;
	if (getenv("GS_BENCH_BUDGET_S"))
		budget_s = atof(getenv("GS_BENCH_BUDGET_S"));
	path = image_path();
	nblocks = image_blocks(path);
	nread = CAM_WR_FIRST(nblocks);
	CK(cudaFree(0));
	printf("bench: %s, %.2f GiB, %.1f s per run (cap %.1f s), median of %d, budget %.0f s, "
	       "%u rings by default\n", path, nblocks * (double)BS / (1 << 30), secs, cap_s, RUNS,
	       budget_s, gs_cuda_default_nrings(0));

	const char *only = getenv("GS_BENCH_ONLY");
	auto want = [&](const char *w) { return !only || strstr(only, w); };
	double raw_best = 0;

	if (want("cpu")) {
		std::vector<int> ths = env_list("GS_BENCH_RAW_THREADS", "64");

		for (int th : ths) {
			char name[64], how[64];
			double v = median_of([&] { return cpu_run(M_RAW, th); });

			raw_best = std::max(raw_best, v);
			snprintf(name, sizeof(name), "raw_pread_t%d", th);
			snprintf(how, sizeof(how), "O_DIRECT pread, %d threads", th);
			result(name, v, "IOPS", how);
		}
		result("raw_limit", raw_best, "IOPS", "the best raw_pread row: the disk's limit");
		/* the CPU-initiated peers: GS_BENCH_COPY_THREADS (e.g. "16 64"; none by default,
		 * for the run's time budget) */
		std::vector<int> cths = env_list("GS_BENCH_COPY_THREADS", "");

		for (int th : cths) {
			char name[64], how[64];
			double v = median_of([&] { return cpu_run(M_COPY, th); });

			snprintf(name, sizeof(name), "pread_memcpy_t%d", th);
			snprintf(how, sizeof(how), "O_DIRECT pread + cudaMemcpy, %d threads", th);
			result(name, v, "IOPS", how);
		}
		if (!cths.empty())
			cufile_open();
		else
			snprintf(cf.why, sizeof(cf.why), "not tried (GS_BENCH_COPY_THREADS empty)");
		for (int th : cths) {
			char name[64], how[64];

			if (!cf.ok)
				break;
			double v = median_of([&] { return cpu_run(M_CUFILE, th); });

			snprintf(name, sizeof(name), "cufile_t%d", th);
			snprintf(how, sizeof(how), "cuFileRead to GPU memory, %d threads", th);
			result(name, v, "IOPS", how);
		}
		if (!cf.ok)
			printf("RESULT %-28s %12s %-6s %s\n", "cufile", "n/a", "", cf.why);
	}
	/* the core alone: bin/gstore-bench io, run by run-all.sh */
	double target = raw_best ? raw_best : 200000;

	/*
	 * The virtio disk changes speed within a run (10-20 % over a minute): a
	 * raw row next to each section gives its rows a near reference too.
	 */
	auto raw_near = [&](const char *name) -> double {
		double v;

		if (!want("cpu") || !budget_ok(name, RUNS, secs + 0.2))
			return 0;
		v = median_of([&] { return cpu_run(M_RAW, 64); });
		result(name, v, "IOPS", "O_DIRECT pread, 64 threads, next to the rows below");
		return v;
	};
	/* 0: the default ring count for this GPU; skip a count that repeats it */
	std::vector<int> rings = env_list("GS_BENCH_RINGS", "0 1 4");
	uint32_t auto_rings = gs_cuda_default_nrings(0);
	auto dup_ring = [&](size_t i) {
		return i && (uint32_t)rings[i] == auto_rings && rings[0] == 0;
	};

	/* rows in order of importance, for the budget: each ring count's CAM and BaM
	 * rows (the default count first), then BaM over NVMe queues */
	for (size_t i = 0; i < rings.size(); i++) {
		char rn[64];

		if (dup_ring(i))
			continue;
		if (want("cam"))
			for (int np : env_list("GS_BENCH_POLLERS", "2")) {
				snprintf(rn, sizeof(rn), "raw_near_cam_p%d_r%d", np, rings[i]);
				double raw = raw_near(rn);

				bench_cam((unsigned)np, target, (uint32_t)rings[i], raw);
			}
		if (want("bam")) {
			snprintf(rn, sizeof(rn), "raw_near_bam_r%d", rings[i]);
			double raw = raw_near(rn);

			bench_bam(0, target, (uint32_t)rings[i], raw);
		}
	}
	if (want("bam")) {
		double raw = raw_near("raw_near_bam_nvme");

		bench_bam(1, target, 1, raw);
	}
	if (want("hot"))
		bench_hot();
	printf("bench: done in %.0f s (budget %.0f s)\n", now_s() - t_start, budget_s);
	return 0;
}
