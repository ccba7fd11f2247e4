// SPDX-License-Identifier: MIT
/*
 * CAM mode correctness: kernels read random blocks of the multi-GiB image
 * through gs_prefetch / gs_prefetch_sync and compare every word with the
 * host's pattern; then write blocks with gs_write_back / gs_write_back_sync,
 * check them from the host (O_DIRECT pread) and read them back on the GPU.
 * Run with both sq-ticket modes (ring tail over PCIe, GPU-memory tickets);
 * odd rounds issue through gs_prefetch_warp() and wait with gs_prefetch_wait().
 *
 *   t_cam [BLOCKS THREADS ROUNDS [WRITE_BLOCKS [dev]]]
 */
#include "common.cuh"

static __global__ void read_kernel(struct gs_cam *q, char *region, uint64_t nread, uint32_t rounds,
				   uint64_t seed, unsigned long long *bad,
				   unsigned long long *count, unsigned long long *tr)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	char *dst = region + tid * BS;

	for (uint32_t r = 0; r < rounds; r++) {
		trace_mark(tr, tid, r, 0, 1);
		/* every fourth round the warp asks for the same 4 blocks: shared ids */
		uint64_t key = (r & 3) == 3 ? tid / 8 : tid;
		uint64_t id = mix(seed ^ (key << 20) ^ r) % nread;

		/* odd rounds: the warp's requests issued together, each waited for alone */
		uint64_t tk;

		if ((r & 1) ? gs_prefetch_warp(q, id, dst, &tk) : gs_prefetch(q, &id, 1, dst))
			atomicAdd(bad, 1ull << 32);
		trace_mark(tr, tid, r, (r & 1) ? tk : 0, 2);
		if (r & 1)
			gs_prefetch_wait(q, tk);
		else
			gs_prefetch_sync(q);
		trace_mark(tr, tid, r, (r & 1) ? tk : 0, 3);
		const volatile uint64_t *w = (const volatile uint64_t *)dst;
		unsigned long long b = 0;

		for (uint32_t i = 0; i < BS / 8; i++)
			b += w[i] != pattern(id * BS + i * 8);
		if (b)
			atomicAdd(bad, b);
		atomicAdd(count, 1);
	}
}

/* Thread i writes blocks first + 2i, 2i + 1 with pattern2(gen) from its slots
 * (n = 2 per call); exactly n / 2 threads. */
static __global__ void write_kernel(struct gs_cam *q, char *region, uint64_t first, uint32_t n,
				    uint64_t gen, int *err)
{
	uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t ids[2];

	for (uint32_t k = 0; k < 2; k++) {
		uint64_t *w = (uint64_t *)(region + (2ull * tid + k) * BS);

		ids[k] = first + 2 * tid + k;
		for (uint32_t i = 0; i < BS / 8; i++)
			w[i] = pattern2(ids[k] * BS + i * 8, gen);
	}
	int r = gs_write_back(q, ids, 2, region + 2ull * tid * BS);

	if (r)
		atomicCAS(err, 0, r);
	/* one flush per block (each is an fdatasync), after all its writes */
	__syncthreads();
	if (threadIdx.x == 0 && (r = gs_write_back_sync(q)))
		atomicCAS(err, 0, r);
}

static __global__ void readback_kernel(struct gs_cam *q, char *region, uint64_t first, uint32_t n,
				       uint64_t gen, unsigned long long *bad)
{
	uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t id = first + tid;

	if (tid >= n)
		return;
	gs_prefetch(q, &id, 1, region + (uint64_t)tid * BS);
	gs_prefetch_sync(q);
	const volatile uint64_t *w = (const volatile uint64_t *)(region + (uint64_t)tid * BS);

	for (uint32_t i = 0; i < BS / 8; i++)
		if (w[i] != pattern2(id * BS + i * 8, gen))
			atomicAdd(bad, 1ull);
}

/* Out-of-range ids and a dst outside the region fail cleanly. */
static __global__ void error_kernel(struct gs_cam *q, char *region, uint64_t nblocks, int *ret)
{
	uint64_t id = nblocks + 5;

	ret[0] = gs_prefetch(q, &id, 1, region);
	ret[1] = gs_prefetch(q, &id, 1, region - 4096);
	ret[2] = gs_prefetch_sync(q);
}

static uint32_t nw = 4096;

static int run(const char *path, uint64_t nblocks, unsigned flags, int blocks, int threads,
	       int rounds, uint64_t gen)
{
	struct gs_q *q = open_q(path, 2, 0);
	struct gs_cuda_params p = {};
	struct gs_cuda *c;
	unsigned long long *bad, *count;
	int *err, fails = 0;
	size_t len;

	p.flags = flags;
	p.buf_bytes = (size_t)blocks * threads * BS;
	if (p.buf_bytes < 64u << 20)
		p.buf_bytes = 64u << 20;
	OK(gs_cuda_open(&c, q, &p));
	char *region = (char *)gs_cuda_buf(c, &len);
	struct gs_cam *dq = gs_cuda_cam(c);

	CK(cudaMallocManaged(&bad, 2 * sizeof(*bad)));
	CK(cudaMallocManaged(&err, 4 * sizeof(int)));
	count = bad + 1;
	*bad = *count = 0;

	double t0 = now_s();

	struct trace tr = {};

	if (getenv("GS_TRACE"))		/* the threads' progress, for a stuck kernel's report */
		trace_open(&tr, (uint32_t)blocks * threads);
	read_kernel<<<blocks, threads>>>(dq, region, CAM_WR_FIRST(nblocks), rounds, gen * 77 + flags,
					 bad, count, tr.d);
	kernel_wait("cam read", 90, [&](char *b, size_t n) {
		return trace_report(&tr, dq, b, n, gs_cuda_debug(c, b, n));
	});
	trace_close(&tr);
	double dt = now_s() - t0;

	printf("cam[%s]: %llu random 4 KiB reads by %d x %d threads on %u rings: %llu bad words, "
	       "%llu issue errors (%.0f IOPS)\n", flags ? "ring-tail" : "dev-tickets", *count,
	       blocks, threads, gs_cuda_nrings(c), *bad & 0xffffffffull, *bad >> 32,
	       *count / dt);
	fails += *bad != 0 || *count != (unsigned long long)blocks * threads * rounds;

	/* write, flush, check from the host, read back on the GPU */
	uint64_t first = CAM_WR_FIRST(nblocks);

	*err = 0;
	write_kernel<<<nw / 256, 128>>>(dq, region, first, nw, gen, err);
	KCK();
	long hb = host_check(path, first, nw, gen);

	printf("cam: write_back %u blocks gen %llu: err %d, host check %ld bad words\n", nw,
	       (unsigned long long)gen, *err, hb);
	fails += *err != 0 || hb != 0;
	memset(region, 0, nw * (size_t)BS);
	*bad = 0;
	readback_kernel<<<nw / 128, 128>>>(dq, region, first, nw, gen, bad);
	KCK();
	printf("cam: GPU read-back: %llu bad words\n", *bad);
	fails += *bad != 0;
	fails += gs_cuda_error(c) != 0;

	error_kernel<<<1, 1>>>(dq, region, nblocks, err);
	KCK();
	printf("cam: bad id -> %d, bad dst -> %d, sync -> %d, sticky %d\n", err[0], err[1],
	       err[2], gs_cuda_error(c));
	fails += err[0] != -ERANGE || err[1] != -EINVAL || err[2] != -ERANGE ||
		 gs_cuda_error(c) != -ERANGE;

	struct gs_q_stats st;

	gs_q_get_stats(q, &st);
	printf("cam: core: %llu requests, %llu submits, %llu errors, %u pollers active\n",
	       (unsigned long long)st.reqs, (unsigned long long)st.submits,
	       (unsigned long long)st.errors, st.active_pollers);
	gs_cuda_close(c);
	gs_q_close(q);
	CK(cudaFree(bad));
	CK(cudaFree(err));
	return fails;
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	const char *path = image_path();
	uint64_t nblocks = image_blocks(path);
	int blocks = argc > 1 ? atoi(argv[1]) : 132;
	int threads = argc > 2 ? atoi(argv[2]) : 128;
	int rounds = argc > 3 ? atoi(argv[3]) : 4;
	int fails = 0;

	if (argc > 4)
		nw = (uint32_t)atoi(argv[4]) & ~255u;
	printf("t_cam: %s, %.2f GiB\n", path, nblocks * (double)BS / (1 << 30));
	/* "dev": GPU-memory tickets only (compute-sanitizer flags the ring-tail
	 * mode's system-scope atomics on host memory, by design) */
	if (argc <= 5 || strcmp(argv[5], "dev"))
		fails += run(path, nblocks, GS_CUDA_RING_TICKETS, blocks, threads, rounds, 1);
	fails += run(path, nblocks, 0, blocks, threads, rounds, 2);
	/* leave generation 0 behind for the other tests' readers */
	printf("%s\n", fails ? "t_cam: FAIL" : "t_cam: PASS");
	return fails ? 1 : 0;
}
