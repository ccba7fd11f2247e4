// SPDX-License-Identifier: MIT
/*
 * Multi-process: a CUDA process on a mounted gstore (gs_cuda_attach(): the
 * daemon's rings in shared memory, its pollers).  run-all.sh starts two of
 * these on one gstorefs while shells `cat` the same file.
 *
 *   t_attach FILE ID [BLOCKS THREADS ROUNDS]
 *
 * FILE is an array on the mount holding pattern(o) at every byte offset o
 * (a copy of mkimage's output).  The process reads random blocks in CAM mode
 * and checks every word on the GPU; reads random u64 elements through a BaM
 * array (a second ring from the daemon) and checks them; then writes its own
 * 64 blocks (ID picks which: 64 * ID from the file's end backwards) with
 * pattern2(o, 100 + ID), write_back_sync, reads them back on the GPU, and
 * closes (SYNC: the daemon and the kernel drop stale copies).  run-all.sh
 * checks those blocks through the mount afterwards (`t_attach check`).
 *
 *   t_attach check FILE NPROC        host check through the mount
 *
 *   t_attach bs FILE BS [ROUNDS]     attach with blocks of BS bytes (4 KiB to
 *                                    1 MiB; the file's extents need not be
 *                                    aligned to them): CAM reads of random
 *                                    blocks both ways (gs_prefetch,
 *                                    gs_prefetch_warp) and BaM gets over
 *                                    lines of BS, every word checked
 */
#include <algorithm>

#include "common.cuh"

#define WBLK	64u

/* Block @id of @bs bytes at @dst against the pattern: bad words into *bad. */
static __device__ void count_bad(const char *dst, uint64_t id, uint64_t bs,
				 unsigned long long *bad, unsigned long long *count)
{
	const volatile uint64_t *w = (const volatile uint64_t *)dst;
	unsigned long long b = 0;

	for (uint64_t i = 0; i < bs / 8; i++)
		b += w[i] != pattern(id * bs + i * 8);
	if (b)
		atomicAdd(bad, b);
	atomicAdd(count, 1);
}

static __global__ void read_kernel(struct gs_cam *q, char *region, uint64_t nread, uint32_t rounds,
				   uint64_t seed, unsigned long long *bad,
				   unsigned long long *count)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	char *dst = region + tid * BS;

	for (uint32_t r = 0; r < rounds; r++) {
		uint64_t id = mix(seed ^ (tid << 20) ^ r) % nread;

		if (gs_prefetch(q, &id, 1, dst))
			atomicAdd(bad, 1ull << 32);
		gs_prefetch_sync(q);
		count_bad(dst, id, BS, bad, count);
	}
}

static __global__ void bam_kernel(struct gs_bam *a, uint64_t nelem, uint32_t rounds,
				  uint64_t seed, unsigned long long *bad)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	for (uint32_t r = 0; r < rounds; r++) {
		uint64_t i = mix(seed ^ (tid << 24) ^ r) % nelem;

		if (gs_array_get_u64(a, i) != pattern(i * 8))
			atomicAdd(bad, 1ull);
	}
}

/* thread t writes block first + t from its own slot */
static __global__ void write_kernel(struct gs_cam *q, char *region, uint64_t first, uint64_t gen,
				    int *err)
{
	uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t id = first + t, *w = (uint64_t *)(region + (uint64_t)t * BS);

	for (uint32_t i = 0; i < BS / 8; i++)
		w[i] = pattern2(id * BS + i * 8, gen);
	int r = gs_write_back(q, &id, 1, w);

	if (r)
		atomicCAS(err, 0, r);
	__syncthreads();
	if (threadIdx.x == 0 && (r = gs_write_back_sync(q)))
		atomicCAS(err, 0, r);
}

static __global__ void readback_kernel(struct gs_cam *q, char *region, uint64_t first, uint64_t gen,
				       unsigned long long *bad)
{
	uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t id = first + t;
	char *dst = region + (uint64_t)t * BS;

	gs_prefetch(q, &id, 1, dst);
	gs_prefetch_sync(q);
	const volatile uint64_t *w = (const volatile uint64_t *)dst;

	for (uint32_t i = 0; i < BS / 8; i++)
		if (w[i] != pattern2(id * BS + i * 8, gen))
			atomicAdd(bad, 1ull);
}

/* Blocks of @bs: lane t reads random blocks into its slot, warp-wise or alone. */
static __global__ void bs_kernel(struct gs_cam *q, char *region, uint64_t bs, uint64_t nblk,
				 uint32_t rounds, uint64_t seed, int warp,
				 unsigned long long *bad, unsigned long long *count)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	char *dst = region + tid * bs;

	for (uint32_t r = 0; r < rounds; r++) {
		uint64_t id = mix(seed ^ (tid << 20) ^ r) % nblk, tk;
		int e;

		if (warp) {
			e = gs_prefetch_warp(q, id, dst, &tk);
			e = e ? e : gs_prefetch_wait(q, tk);
		} else {
			e = gs_prefetch(q, &id, 1, dst);
			e = e ? e : gs_prefetch_sync(q);
		}
		if (e)
			atomicAdd(bad, 1ull << 32);
		count_bad(dst, id, bs, bad, count);
	}
}

/* t_attach bs FILE BS [ROUNDS] */
static int bs_main(const char *file, uint64_t bs, int rounds)
{
	struct gs_cuda_params p = {};
	struct gs_cuda_array_params ap = {};
	struct gs_cuda_array *arr;
	struct gs_cuda *c;
	unsigned long long *bad, *count;
	uint32_t nth = (uint32_t)std::min<uint64_t>(1024, std::max<uint64_t>(64, (64ull << 20) / bs));
	int fails = 0, ret;

	p.block_size = (uint32_t)bs;
	p.buf_bytes = nth * bs;
	ret = gs_cuda_attach(&c, file, &p);
	if (ret) {
		printf("t_attach bs %llu: attach: %s\n", (unsigned long long)bs, strerror(-ret));
		return 1;
	}
	char *region = (char *)gs_cuda_buf(c, NULL);
	/* below the blocks the two-process run rewrites at the file's end */
	uint64_t nblk = gs_cuda_nblocks(c) - (8ull * WBLK * BS + bs - 1) / bs;

	CK(cudaMallocManaged(&bad, 2 * sizeof(*bad)));
	count = bad + 1;
	for (int warp = 0; warp < 2; warp++) {
		*bad = *count = 0;
		bs_kernel<<<nth / 32, 32>>>(gs_cuda_cam(c), region, bs, nblk, rounds,
					    mix(bs + warp), warp, bad, count);
		kernel_wait("attach bs read", 90, [&](char *b, size_t n) {
			return gs_cuda_debug(c, b, n);
		});
		printf("t_attach bs %llu: cam%s: %llu random blocks of %llu: %llu bad words, "
		       "%llu errors\n", (unsigned long long)bs, warp ? " warp" : "", *count,
		       (unsigned long long)nblk, *bad & 0xffffffffull, *bad >> 32);
		fails += *bad != 0 || *count != (unsigned long long)nth * rounds;
	}
	/* BaM with lines of bs: bounce slots bs each, 64 MiB of them */
	ap.cache_bytes = std::max<uint64_t>(64 * bs, 32u << 20);
	ap.nio = (uint32_t)std::max<uint64_t>(32, std::min<uint64_t>(4096, (64ull << 20) / bs));
	OK(gs_cuda_array_open(&arr, c, &ap));
	*bad = 0;
	/* about 64 MiB of misses whatever the line */
	uint32_t bblocks = (uint32_t)std::max<uint64_t>(1, 16 * 4096 / bs);

	bam_kernel<<<bblocks, 256>>>(gs_cuda_array_dev(arr), nblk * (bs / 8), rounds, mix(bs + 7),
				     bad);
	kernel_wait("attach bs bam", 90,
		    [&](char *b, size_t n) { return gs_cuda_array_debug(arr, b, n); });
	printf("t_attach bs %llu: bam: %llu random u64 gets over %llu-byte lines: %llu bad, "
	       "error %d\n", (unsigned long long)bs, 256ull * bblocks * rounds, (unsigned long long)bs,
	       *bad, gs_cuda_array_error(arr));
	fails += *bad != 0 || gs_cuda_array_error(arr) != 0;
	gs_cuda_array_close(arr);
	fails += gs_cuda_error(c) != 0;
	gs_cuda_close(c);
	CK(cudaFree(bad));
	printf("t_attach bs %llu: %s\n", (unsigned long long)bs, fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}

static uint64_t first_wblock(uint64_t nblocks, int id)
{
	return nblocks - WBLK * (uint64_t)(id + 1);
}

/* The written blocks through the mount (page cache and all), the rest spot-checked. */
static int check(const char *file, int nproc)
{
	int fd = open(file, O_RDONLY);
	struct stat st;
	uint64_t *buf = (uint64_t *)malloc(WBLK * BS);
	long bad = 0;

	if (fd < 0 || fstat(fd, &st) < 0 || !buf)
		return 1;
	uint64_t nblocks = st.st_size / BS;

	for (int id = 0; id < nproc; id++) {
		uint64_t first = first_wblock(nblocks, id);

		if (pread(fd, buf, WBLK * BS, first * BS) != (ssize_t)(WBLK * BS))
			return 1;
		for (uint64_t i = 0; i < WBLK * BS / 8; i++)
			bad += buf[i] != pattern2(first * BS + i * 8, 100 + id);
	}
	/* the block before them is untouched */
	uint64_t b = first_wblock(nblocks, nproc - 1) - 1;

	if (pread(fd, buf, BS, b * BS) != BS)
		return 1;
	for (uint64_t i = 0; i < BS / 8; i++)
		bad += buf[i] != pattern(b * BS + i * 8);
	printf("t_attach check: %d x %u written blocks through the mount: %ld bad words\n", nproc,
	       WBLK, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	if (argc == 4 && !strcmp(argv[1], "check"))
		return check(argv[2], atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "bs"))
		return bs_main(argv[2], strtoull(argv[3], NULL, 0), argc > 4 ? atoi(argv[4]) : 4);
	if (argc < 3) {
		fprintf(stderr, "usage: t_attach FILE ID [BLOCKS THREADS ROUNDS] | check FILE N\n");
		return 1;
	}
	const char *file = argv[1];
	int id = atoi(argv[2]);
	int blocks = argc > 3 ? atoi(argv[3]) : 32;
	int threads = argc > 4 ? atoi(argv[4]) : 128;
	int rounds = argc > 5 ? atoi(argv[5]) : 8;
	struct gs_cuda_params p = {};
	struct gs_cuda_array_params ap = {};
	struct gs_cuda_array *arr;
	struct gs_cuda *c;
	unsigned long long *bad, *count;
	int *err, fails = 0;
	size_t len;

	p.buf_bytes = (size_t)blocks * threads * BS;
	OK(gs_cuda_attach(&c, file, &p));
	uint64_t nblocks = gs_cuda_nblocks(c), first = first_wblock(nblocks, id);
	char *region = (char *)gs_cuda_buf(c, &len);
	struct gs_cam *dq = gs_cuda_cam(c);

	CK(cudaMallocManaged(&bad, 2 * sizeof(*bad)));
	CK(cudaMallocManaged(&err, sizeof(int)));
	count = bad + 1;
	*bad = *count = 0;
	printf("t_attach[%d]: %s, %llu blocks, pid %d\n", id, file, (unsigned long long)nblocks,
	       getpid());

	/* CAM reads below the written blocks of every process (up to 8) */
	uint64_t nread = nblocks - 8 * WBLK;
	double t0 = now_s();

	read_kernel<<<blocks, threads>>>(dq, region, nread, rounds, mix(id + 1), bad, count);
	kernel_wait("attach cam read", 90, [&](char *b, size_t n) { return gs_cuda_debug(c, b, n); });
	printf("t_attach[%d]: cam: %llu random 4 KiB reads: %llu bad words, %llu issue errors "
	       "(%.0f IOPS)\n", id, *count, *bad & 0xffffffffull, *bad >> 32,
	       *count / (now_s() - t0));
	fails += *bad != 0 || *count != (unsigned long long)blocks * threads * rounds;

	/* BaM over a second ring of the daemon, a cache smaller than the file */
	ap.cache_bytes = 32u << 20;
	OK(gs_cuda_array_open(&arr, c, &ap));
	*bad = 0;
	bam_kernel<<<blocks, 256>>>(gs_cuda_array_dev(arr), nread * (BS / 8), rounds, mix(id + 9),
				     bad);
	kernel_wait("attach bam read", 90,
		    [&](char *b, size_t n) { return gs_cuda_array_debug(arr, b, n); });
	printf("t_attach[%d]: bam: %llu random u64 gets: %llu bad, error %d\n", id,
	       (unsigned long long)blocks * 256 * rounds, *bad, gs_cuda_array_error(arr));
	fails += *bad != 0 || gs_cuda_array_error(arr) != 0;
	gs_cuda_array_close(arr);

	/* write, flush, read back on the GPU */
	*err = 0;
	write_kernel<<<WBLK / 32, 32>>>(dq, region, first, 100 + id, err);
	KCK();
	memset(region, 0, WBLK * BS);
	*bad = 0;
	readback_kernel<<<WBLK / 32, 32>>>(dq, region, first, 100 + id, bad);
	KCK();
	printf("t_attach[%d]: write_back %u blocks: err %d, GPU read-back %llu bad words\n", id,
	       WBLK, *err, *bad);
	fails += *err != 0 || *bad != 0 || gs_cuda_error(c) != 0;
	gs_cuda_close(c);	/* SYNC */
	CK(cudaFree(bad));
	CK(cudaFree(err));
	printf("t_attach[%d]: %s\n", id, fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
