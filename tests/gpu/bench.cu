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
 * CPU rows and the hot cache: one warm-up, then the median of RUNS runs.
 * The GPU rows (cam, bam-ring, bam-nvme) are interleaved with raw runs in
 * rounds (bench_interleaved(): the virtio disk drifts 10-20 % within a
 * call, so each GPU run is compared with the raw rate around it), each row
 * the median of its rounds and its spread.  Prints lines "RESULT name value
 * unit" for run-all.sh's table, and "RESULT name/raw ratio x".
 *
 * Time.  A GPU run stops issuing at its time cap (the seconds per run;
 * %globaltimer in the kernel, each warp decides at the top of a round) and
 * counts what it completed, so a slow row (BaM through one ring at 132 SMs)
 * costs the same as a fast one.  The rounds that fit the budget
 * (GS_BENCH_BUDGET_S, default 130 s: run-all.sh gives the bench its timeout
 * less 20 s) are run, at most GS_BENCH_ROUNDS (5); the count is printed.
 * Rings: GS_BENCH_RINGS ("0 4": the default count for this GPU, then four,
 * for the comparison), GS_BENCH_BAM_RINGS ("0").  GS_BENCH_ONLY: words cpu,
 * cam, bam, nvme, hot (default: all but nvme and hot).
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

/* diag_q's requests in the backend and active pollers, sampled about every
 * millisecond while gpu_time() waits (sums and count; the caller resets) */
static double samp_inflight, samp_active;
static long samp_n;

static double gpu_time(void (*launch)(void *), void *arg)
{
	cudaEvent_t e0, e1;
	cudaError_t e;
	unsigned polls = 0;
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
		if (diag_q && ++polls % 10 == 0) {
			struct gs_q_stats st;

			gs_q_get_stats(diag_q, &st);
			samp_inflight += st.inflight;
			samp_active += st.active_pollers;
			samp_n++;
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
 * Per-shard counters of a gs_cam set (device): the CAM tickets (tail) or,
 * for BaM's misses, the bounce-slot tickets (sink_ticket) of each ring, to
 * tell which rings a row's lanes issued on (the shard is the lane's SM).
 */
static std::vector<uint64_t> shard_counts(struct gs_cam *dcam, int sink)
{
	struct gs_cam h;
	std::vector<uint64_t> v;

	CK(cudaMemcpy(&h, dcam, sizeof(h), cudaMemcpyDeviceToHost));
	uint32_t n = h.nshard > 1 ? h.nshard : 1;
	std::vector<struct gs_cam> all(n);

	if (n > 1)
		CK(cudaMemcpy(all.data(), h.shards, n * sizeof(h), cudaMemcpyDeviceToHost));
	else
		all[0] = h;
	for (auto &c : all)
		v.push_back(sink ? c.sink_ticket : c.tail);
	return v;
}

/*
 * One kind of GPU row with its handle open for the whole interleaved
 * section: CAM warp rows (gs_prefetch_warp + gs_prefetch_wait) on @nrings
 * rings, or BaM misses through the rings, or BaM misses as NVMe commands to
 * the software controller.  Each (config, SM count) row collects one run
 * per round.
 */
enum { K_CAM, K_BAM, K_NVME };

struct sample {
	double t, v;		/* midpoint (s since start), IOPS */
	uint32_t used;		/* rings that got requests */
};

struct gcfg {
	int kind;
	uint32_t want_rings;	/* 0: the GPU's default */
	uint32_t nr;		/* rings it got */
	struct gs_q *q;
	struct gs_cuda *c;
	struct gs_cuda_array *a;
	struct gs_swnvme *sw;
	void *bar;
	struct gs_cam *dcam;	/* shard 0 (rings used) */
	unsigned long long *sum, *done;
	std::vector<int> sms;
	std::vector<std::vector<sample>> s;	/* per SM count */
	std::vector<double> cpu, reqs;		/* CAM: process CPU s, requests */
	std::vector<double> inflight, active;	/* backend samples' sums (gpu_time()) */
	std::vector<long> nsamp;
	char name[16][48];
};

static void gcfg_open(struct gcfg *g, int kind, uint32_t nrings, const std::vector<int> &sms)
{
	int maxsm = *std::max_element(sms.begin(), sms.end());

	g->kind = kind;
	g->want_rings = nrings;
	g->sms = sms;
	if (g->sms.size() > 16)
		g->sms.resize(16);	/* name[] */
	g->s.resize(g->sms.size());
	g->cpu.assign(g->sms.size(), 0);
	g->reqs.assign(g->sms.size(), 0);
	g->inflight.assign(g->sms.size(), 0);
	g->active.assign(g->sms.size(), 0);
	g->nsamp.assign(g->sms.size(), 0);
	CK(cudaMalloc(&g->sum, sizeof(*g->sum)));
	CK(cudaMalloc(&g->done, sizeof(*g->done)));
	if (kind == K_CAM) {
		struct gs_cuda_params p = {};

		g->q = open_q(path, 2, 0);
		p.buf_bytes = (size_t)maxsm * 128 * BS;
		p.sq_entries = 8192;
		p.nrings = nrings;
		OK(gs_cuda_open(&g->c, g->q, &p));
		g->nr = gs_cuda_nrings(g->c);
		g->dcam = gs_cuda_cam(g->c);
	} else {
		struct gs_cuda_array_params ap = {};
		struct gs_bam h;

		if (kind == K_NVME) {
			struct gs_swnvme_params sp = {};

			CK(cudaHostAlloc(&g->bar, gs_swnvme_bar_bytes(16), cudaHostAllocMapped));
			sp.path = path;
			sp.max_qpairs = 16;
			/* commands in flight to the file: under the disk's queue (gs_q_params) */
			sp.depth = getenv("GS_SWNVME_DEPTH") ? atoi(getenv("GS_SWNVME_DEPTH")) : 128;
			sp.bar = g->bar;
			OK(gs_swnvme_start(&g->sw, &sp));
		} else {
			struct gs_cuda_params p = {};

			g->q = open_q(path, 2, 0);
			p.nrings = nrings;
			OK(gs_cuda_open(&g->c, g->q, &p));
		}
		ap.cache_bytes = 64u << 20;
		ap.nio = 4096;
		ap.backend = kind == K_NVME ? GS_BAM_NVME : GS_BAM_RING;
		ap.swnvme = g->sw;
		ap.nrings = nrings;
		/* queues and slots: the defaults, as t_bam (8 x 256 hung once in the bench) */
		OK(gs_cuda_array_open(&g->a, g->c, &ap));
		CK(cudaMemcpy(&h, gs_cuda_array_dev(g->a), sizeof(h), cudaMemcpyDeviceToHost));
		g->dcam = h.cam;
		g->nr = kind == K_NVME ? 1 : (uint32_t)shard_counts(g->dcam, 1).size();
	}
	for (size_t i = 0; i < g->sms.size(); i++) {
		if (kind == K_CAM)
			snprintf(g->name[i], sizeof(g->name[i]), "camw_p2_sm%d_r%u", sms[i], g->nr);
		else if (kind == K_BAM)
			snprintf(g->name[i], sizeof(g->name[i]), "bam_ring_sm%d_r%u", sms[i], g->nr);
		else
			snprintf(g->name[i], sizeof(g->name[i]), "bam_nvme_sm%d", sms[i]);
	}
}

static void gcfg_close(struct gcfg *g)
{
	if (g->a) {
		OK(gs_cuda_array_error(g->a));
		gs_cuda_array_close(g->a);
	}
	if (g->c) {
		OK(gs_cuda_error(g->c));
		gs_cuda_close(g->c);
	}
	if (g->q)
		gs_q_close(g->q);
	if (g->sw) {
		gs_swnvme_stop(g->sw);
		cudaFreeHost(g->bar);
	}
	cudaFree(g->sum);
	cudaFree(g->done);
}

/*
 * One time-capped run of row @i (@run_s seconds: every lane stops issuing
 * at the cap, so each run takes the same time whatever its rate); IOPS, or
 * misses/s for BaM.  @keep: a measured run (else a warm-up).
 */
static double gcfg_run(struct gcfg *g, size_t i, double run_s, int keep)
{
	int nsm = g->sms[i];
	uint64_t cap_ns = (uint64_t)(run_s * 1e9);
	std::vector<uint64_t> u0 = shard_counts(g->dcam, g->kind != K_CAM), u1;
	double t0 = now_s() - t_start, iops;

	samp_inflight = samp_active = 0;
	samp_n = 0;

	if (g->kind == K_CAM) {
		cam_arg a = { g->dcam, (char *)gs_cuda_buf(g->c, NULL), nsm, 128, UINT32_MAX,
			      g->sum, g->done, cap_ns };
		struct gs_q_stats s0, s1;
		unsigned long long n = 0;
		double c0, c1;

		cam_dev = g->dcam;
		diag_fn = cam_diag;
		diag_arg = g->c;
		diag_q = g->q;
		gs_q_get_stats(g->q, &s0);
		c0 = cpu_s();
		CK(cudaMemset(g->done, 0, sizeof(*g->done)));
		double dt = gpu_time(camw_launch, &a);

		c1 = cpu_s();
		gs_q_get_stats(g->q, &s1);
		CK(cudaMemcpy(&n, g->done, sizeof(n), cudaMemcpyDeviceToHost));
		iops = n / dt;
		if (keep) {
			g->cpu[i] += c1 - c0;
			g->reqs[i] += (double)(s1.reqs - s0.reqs);
		}
	} else {
		bam_arg b = { gs_cuda_array_dev(g->a), nsm, 256, UINT32_MAX,
			      nread * (BS / 8), g->sum, cap_ns };
		struct gs_cuda_array_stats s0, s1;

		diag_fn = (int (*)(void *, char *, size_t))gs_cuda_array_debug;
		diag_arg = g->a;
		diag_q = g->q;
		OK(gs_cuda_array_stats(g->a, &s0));
		double dt = gpu_time(bam_launch, &b);

		OK(gs_cuda_array_stats(g->a, &s1));
		iops = (s1.misses - s0.misses) / dt;
	}
	diag_fn = NULL;
	diag_q = NULL;
	u1 = shard_counts(g->dcam, g->kind != K_CAM);
	if (keep) {
		g->inflight[i] += samp_inflight;
		g->active[i] += samp_active;
		g->nsamp[i] += samp_n;
		uint32_t used = 0;

		for (size_t k = 0; k < u1.size(); k++)
			used += u1[k] != u0[k];
		if (u1.size() == 1)
			used = 1;	/* unsharded BaM counts its slots elsewhere */
		g->s[i].push_back(sample{ (t0 + now_s() - t_start) / 2, iops, used });
	}
	return iops;
}

static double median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v.size() & 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/* The raw rate at time @t: linear between the raw runs around it (the
 * nearest one when @t is outside them). */
static double raw_at(const std::vector<sample> &raw, double t)
{
	if (raw.empty())
		return 0;
	if (t <= raw.front().t)
		return raw.front().v;
	for (size_t k = 1; k < raw.size(); k++)
		if (t <= raw[k].t) {
			double f = (t - raw[k - 1].t) / (raw[k].t - raw[k - 1].t);

			return raw[k - 1].v + f * (raw[k].v - raw[k - 1].v);
		}
	return raw.back().v;
}

/*
 * The GPU rows against the raw disk, interleaved (the virtio disk moves
 * 10-20 % within a call: a raw row measured once before a section decided
 * targets by its drift).  Each round: a raw run, then one run of every row
 * of the CAM configs, a raw run, one run of every BaM row; a last raw run
 * closes.  Each GPU run's ratio is to the raw rate interpolated at its
 * midpoint between the raw runs around it; a row reports the median of its
 * rounds' IOPS and ratios and their spread (min..max).
 */
static void bench_interleaved(std::vector<gcfg> &cfgs, int rounds_want, int do_raw)
{
	std::vector<sample> raw;
	size_t nrow = 0;

	for (auto &g : cfgs)
		nrow += g.sms.size();
	/*
	 * A round's estimate: every GPU run at its time plus launch and drain,
	 * two raw runs; after the first round, the longest round so far (a
	 * 132-SM row drains a round of requests past its cap: 0.2-0.4 s).  A
	 * round starts only if it and the closing raw run fit the budget.
	 */
	double per_run = secs + 0.15, round_s = (nrow + 2) * per_run;
	int rounds = 0;
	auto left = [&] { return budget_s - (now_s() - t_start) - per_run; };

	/* warm-ups (short): every config once at its largest SM count, the raw path */
	if (left() >= round_s + 0.4 * cfgs.size())
		for (auto &g : cfgs)
			gcfg_run(&g, g.sms.size() - 1, 0.2, 0);
	auto raw_run = [&] {
		double t0 = now_s() - t_start, v;

		warming = false;
		v = cpu_run(M_RAW, 64);
		raw.push_back(sample{ (t0 + now_s() - t_start) / 2, v, 0 });
	};
	while (rounds < rounds_want && left() >= round_s) {
		double r0 = now_s();

		if (do_raw)
			raw_run();
		for (int pass = 0; pass < 2; pass++) {
			for (auto &g : cfgs) {
				if ((g.kind == K_CAM) != (pass == 0))
					continue;
				for (size_t i = 0; i < g.sms.size(); i++)
					gcfg_run(&g, i, secs, 1);
			}
			if (pass == 0 && do_raw)
				raw_run();
		}
		rounds++;
		round_s = rounds == 1 ? now_s() - r0 : std::max(round_s, now_s() - r0);
	}
	if (rounds < rounds_want)
		printf("bench: %d of %d interleaved rounds fit the budget (%.0f s left, a round "
		       "takes %.1f s)\n", rounds, rounds_want, left(), round_s);
	if (!rounds) {
		for (auto &g : cfgs)
			for (size_t i = 0; i < g.sms.size(); i++)
				budget_ok(g.name[i], 1, round_s);
		return;
	}
	if (do_raw)
		raw_run();

	std::vector<double> rv;

	for (auto &s : raw)
		rv.push_back(s.v);
	if (do_raw) {
		char how[160];

		snprintf(how, sizeof(how), "O_DIRECT pread, 64 threads: median of the %zu raw runs "
			 "between the GPU rows (%.0f..%.0f)", rv.size(),
			 *std::min_element(rv.begin(), rv.end()), *std::max_element(rv.begin(), rv.end()));
		result("raw_interleaved", median(rv), "IOPS", how);
	}
	for (auto &g : cfgs)
		for (size_t i = 0; i < g.sms.size(); i++) {
			std::vector<double> v, q;
			uint32_t umax = 0;
			char how[320], n[96];
			int nsm = g.sms[i];

			for (auto &s : g.s[i]) {
				v.push_back(s.v);
				if (do_raw)
					q.push_back(s.v / raw_at(raw, s.t));
				umax = std::max(umax, s.used);
			}
			if (v.empty())
				continue;
			char core[96] = "";
			long ns = std::max(1L, g.nsamp[i]);

			if (g.nsamp[i])
				snprintf(core, sizeof(core), "; backend: %.0f in flight, %.2f pollers "
					 "active (means)", g.inflight[i] / ns, g.active[i] / ns);
			if (g.kind == K_CAM)
				snprintf(how, sizeof(how), "%d blocks x 128 threads, 2 pollers, %u rings "
					 "(%u used), warp tickets; median of %zu runs (%.0f..%.0f); "
					 "%.2f CPU us/IO%s", nsm, g.nr, umax, v.size(),
					 *std::min_element(v.begin(), v.end()),
					 *std::max_element(v.begin(), v.end()),
					 g.cpu[i] * 1e6 / std::max(1.0, g.reqs[i]), core);
			else
				snprintf(how, sizeof(how), "%d blocks x 256 threads, misses/s, %s, %u "
					 "rings (%u used); median of %zu runs (%.0f..%.0f)%s", nsm,
					 g.kind == K_NVME ? "4 NVMe queues x 1024" : "2 pollers", g.nr,
					 umax, v.size(), *std::min_element(v.begin(), v.end()),
					 *std::max_element(v.begin(), v.end()), core);
			result(g.name[i], median(v), "IOPS", how);
			if (q.empty())
				continue;
			snprintf(n, sizeof(n), "%s/raw", g.name[i]);
			printf("RESULT %-28s %12.2f %-6s median of %zu ratios to the raw rate around "
			       "each run (%.2f..%.2f)\n", n, median(q), "x", q.size(),
			       *std::min_element(q.begin(), q.end()),
			       *std::max_element(q.begin(), q.end()));
			fflush(stdout);
		}
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

	/*
	 * The GPU rows, interleaved with raw runs (bench_interleaved): CAM on
	 * each ring count of GS_BENCH_RINGS (0: this GPU's default; a count that
	 * repeats it is left out), BaM through the default rings (GS_BENCH_BAM_RINGS),
	 * BaM over the NVMe queues with the word "nvme" in GS_BENCH_ONLY.
	 */
	std::vector<gcfg> cfgs;
	std::vector<int> sms = env_list("GS_BENCH_SMS", "16 32 132");
	uint32_t auto_rings = gs_cuda_default_nrings(0);
	auto add = [&](int kind, int nr) {
		for (auto &g : cfgs)
			if (g.kind == kind && (g.want_rings ? g.want_rings : auto_rings) ==
						      (nr ? (uint32_t)nr : auto_rings))
				return;
		cfgs.emplace_back();
		gcfg_open(&cfgs.back(), kind, (uint32_t)nr, kind == K_CAM ? sms :
			  env_list("GS_BENCH_BAM_SMS", "16 32 132"));
	};

	cfgs.reserve(16);
	if (want("cam"))
		for (int nr : env_list("GS_BENCH_RINGS", "0 4"))
			add(K_CAM, nr);
	if (want("bam"))
		for (int nr : env_list("GS_BENCH_BAM_RINGS", "0"))
			add(K_BAM, nr);
	if (want("nvme"))
		add(K_NVME, 1);
	if (!cfgs.empty()) {
		bench_interleaved(cfgs, getenv("GS_BENCH_ROUNDS") ? atoi(getenv("GS_BENCH_ROUNDS")) : 5,
				  want("cpu"));
		for (auto &g : cfgs)
			gcfg_close(&g);
	}
	if (want("hot"))
		bench_hot();
	printf("bench: done in %.0f s (budget %.0f s)\n", now_s() - t_start, budget_s);
	return 0;
}
