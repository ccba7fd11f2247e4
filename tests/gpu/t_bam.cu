// SPDX-License-Identifier: MIT
/*
 * BaM mode correctness: a GPU-cached u64 array over the multi-GiB image,
 * the cache much smaller than the array.  Random and coalesced reads vs
 * the host pattern; sets over more lines than a small cache holds (dirty
 * evictions), flush, host check (O_DIRECT pread), invalidate, GPU
 * read-back.  Misses go through the ring (GS_BAM_RING) or, with "nvme", as
 * NVMe commands from the GPU threads into queue pairs of the software NVMe
 * controller (GS_BAM_NVME, gstore_nvmeq.h + gpuq/swnvme.c).
 *
 *   t_bam [ring|nvme] [BLOCKS THREADS ROUNDS [SET_LINES]]
 */
#include "common.cuh"

static __global__ void get_kernel(struct gs_bam *a, uint64_t nelem, uint32_t rounds, uint64_t seed,
				  unsigned long long *bad, unsigned long long *count)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long b = 0;

	for (uint32_t r = 0; r < rounds; r++) {
		uint64_t i;

		if (r & 1)	/* a warp reads 32 neighbours: one line, one lookup */
			i = (mix(seed ^ (tid / 32) ^ ((uint64_t)r << 40)) % (nelem - 32)) + tid % 32;
		else		/* scattered */
			i = mix(seed ^ tid ^ ((uint64_t)r << 40)) % nelem;
		b += gs_array_get_u64(a, i) != pattern(i * 8);
	}
	atomicAdd(bad, b);
	atomicAdd(count, rounds);
}

static __global__ void set_kernel(struct gs_bam *a, uint64_t first, uint64_t n, uint64_t gen)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	for (uint64_t i = tid; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		gs_array_set_u64(a, first + i, pattern2((first + i) * 8, gen));
}

static __global__ void check_kernel(struct gs_bam *a, uint64_t first, uint64_t n, uint64_t gen,
				    unsigned long long *bad)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long b = 0;

	for (uint64_t i = tid; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		b += gs_array_get_u64(a, first + i) !=
		     (gen ? pattern2((first + i) * 8, gen) : pattern((first + i) * 8));
	if (b)
		atomicAdd(bad, b);
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	int nvme = argc > 1 && !strcmp(argv[1], "nvme");
	int blocks = argc > 2 ? atoi(argv[2]) : 264;
	int threads = argc > 3 ? atoi(argv[3]) : 256;
	int rounds = argc > 4 ? atoi(argv[4]) : 8;
	uint64_t set_lines = argc > 5 ? atoi(argv[5]) : 2048;
	const char *path = image_path(), *mode = nvme ? "bam-nvme" : "bam-ring";
	uint64_t nblocks = image_blocks(path);
	struct gs_q *q = NULL;
	struct gs_cuda *c = NULL;
	struct gs_swnvme *sw = NULL;
	void *bar = NULL;
	int fails = 0;

	if (nvme) {
		struct gs_swnvme_params sp = {};

		CK(cudaHostAlloc(&bar, gs_swnvme_bar_bytes(16), cudaHostAllocMapped));
		sp.path = path;
		sp.max_qpairs = 16;
		sp.depth = 512;
		sp.bar = bar;
		OK(gs_swnvme_start(&sw, &sp));
	} else {
		struct gs_cuda_params p = {};

		q = open_q(path, 2, 0);
		OK(gs_cuda_open(&c, q, &p));
	}

	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: a 256 MiB cache; pass 1: a 4 MiB one (sets evict dirty lines) */
		struct gs_cuda_array_params ap = {};
		struct gs_cuda_array *a;
		unsigned long long *bad, *count;
		uint64_t gen = 3 + pass + 2 * nvme;

		ap.cache_bytes = pass ? 4u << 20 : 256u << 20;
		ap.nio = 4096;
		ap.backend = nvme ? GS_BAM_NVME : GS_BAM_RING;
		ap.swnvme = sw;
		OK(gs_cuda_array_open(&a, c, &ap));
		struct gs_bam *d = gs_cuda_array_dev(a);

		CK(cudaMallocManaged(&bad, 2 * sizeof(*bad)));
		count = bad + 1;
		*bad = *count = 0;
		uint64_t nelem = CAM_WR_FIRST(nblocks) * (BS / 8);
		double t0 = now_s();

		auto diag = [&](char *b, size_t n) { return gs_cuda_array_debug(a, b, n); };

		get_kernel<<<blocks, threads>>>(d, nelem, rounds, 99 + pass, bad, count);
		kernel_wait("get", 45, diag);
		double dt = now_s() - t0;
		struct gs_cuda_array_stats st;

		OK(gs_cuda_array_stats(a, &st));
		printf("%s: cache %zu MiB: %llu random reads by %d x %d threads: %llu bad "
		       "(%llu misses, %llu evictions, %.0f misses/s)\n", mode, ap.cache_bytes >> 20,
		       *count, blocks, threads, *bad, (unsigned long long)st.misses,
		       (unsigned long long)st.evictions, st.misses / dt);
		fails += *bad != 0;

		/* sets: set_lines lines through the cache, flush, host check */
		uint64_t first = BAM_WR_FIRST(nblocks) * (BS / 8), n = set_lines * (BS / 8);

		set_kernel<<<256, 256>>>(d, first, n, gen);
		kernel_wait("set", 30, diag);
		printf("%s: set kernel done\n", mode);
		struct watchdog wd = { 30, "flush", [](void *x, char *b, size_t n) {
			return gs_cuda_array_debug((struct gs_cuda_array *)x, b, n); }, a };

		watchdog_arm(&wd);
		int fr = gs_cuda_array_flush(a);

		watchdog_disarm(&wd);

		OK(gs_cuda_array_stats(a, &st));
		long hb = host_check(path, BAM_WR_FIRST(nblocks), set_lines, gen);

		printf("%s: set %llu elements, flush -> %d (%llu write-backs): host check %ld bad\n",
		       mode, (unsigned long long)n, fr, (unsigned long long)st.writebacks, hb);
		fails += fr != 0 || hb != 0;
		watchdog_arm(&wd);
		OK(gs_cuda_array_invalidate(a));
		watchdog_disarm(&wd);
		*bad = 0;
		check_kernel<<<256, 256>>>(d, first, n, gen, bad);
		kernel_wait("check", 30, diag);
		printf("%s: GPU read-back after invalidate: %llu bad\n", mode, *bad);
		fails += *bad != 0;
		int e = gs_cuda_array_error(a);

		fails += e != 0;
		if (e)
			printf("%s: sticky error %d\n", mode, e);
		gs_cuda_array_close(a);
		CK(cudaFree(bad));
	}
	if (sw) {
		struct gs_swnvme_stats ss;

		gs_swnvme_get_stats(sw, &ss);
		printf("%s: controller: %llu commands, %llu errors, %llu cq-full waits\n", mode,
		       (unsigned long long)ss.cmds, (unsigned long long)ss.errors,
		       (unsigned long long)ss.cq_full);
		fails += ss.errors != 0;
		gs_swnvme_stop(sw);
		CK(cudaFreeHost(bar));
	}
	gs_cuda_close(c);
	if (q)
		gs_q_close(q);
	printf("%s\n", fails ? "t_bam: FAIL" : "t_bam: PASS");
	return fails ? 1 : 0;
}
