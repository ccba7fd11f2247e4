// SPDX-License-Identifier: MIT
/*
 * The plain way, no gstore library in the kernel: mmap() an array file of a
 * mounted gstore, cudaHostRegister() the mapping, read it from a kernel
 * (gstore_cuda(3)).  Every GPU load of the mapping is a load of the host's
 * page cache, which the FUSE daemon filled.
 *
 *   t_plain FILE [SKIP_TAIL_BYTES]
 *
 * FILE holds pattern(o) at every byte offset o (a copy of mkimage's output);
 * the last SKIP_TAIL_BYTES (default 2 MiB: t_attach writes there) are not
 * checked.  Exit 0 when every sampled word matches.
 */
#include <sys/mman.h>

#include "common.cuh"

static __global__ void sample_kernel(const uint64_t *w, uint64_t nwords, uint32_t per,
				     uint64_t seed, unsigned long long *bad,
				     unsigned long long *count)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long b = 0;

	for (uint32_t k = 0; k < per; k++) {
		uint64_t i = mix(seed ^ (tid << 20) ^ k) % nwords;

		b += w[i] != pattern(i * 8);
	}
	atomicAdd(bad, b);
	atomicAdd(count, per);
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	if (argc < 2) {
		fprintf(stderr, "usage: t_plain FILE [SKIP_TAIL_BYTES]\n");
		return 2;
	}
	uint64_t skip = argc > 2 ? strtoull(argv[2], NULL, 0) : 2u << 20;
	int fd = open(argv[1], O_RDONLY);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) || (uint64_t)st.st_size <= skip + BS) {
		fprintf(stderr, "t_plain: %s: %s\n", argv[1], fd < 0 ? strerror(errno) : "too small");
		return 1;
	}
	size_t len = (size_t)st.st_size;
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

	if (map == MAP_FAILED) {
		fprintf(stderr, "t_plain: mmap: %s\n", strerror(errno));
		return 1;
	}
	double t0 = now_s();
	/* read-only: the mapping is PROT_READ; registering pins the page cache */
	CK(cudaHostRegister(map, len, cudaHostRegisterMapped | cudaHostRegisterReadOnly));
	double t1 = now_s();
	uint64_t *dw;
	unsigned long long *bad, *count;

	CK(cudaHostGetDevicePointer((void **)&dw, map, 0));
	CK(cudaMallocManaged(&bad, 2 * sizeof(*bad)));
	count = bad + 1;
	*bad = *count = 0;
	sample_kernel<<<132, 256>>>(dw, (len - skip) / 8, 64, (uint64_t)(t0 * 1e9), bad, count);
	KCK();
	double t2 = now_s();

	printf("t_plain: %s, %.0f MiB mmap()ed and cudaHostRegister()ed in %.2f s; "
	       "%llu random u64 reads by 132 x 256 threads in %.3f s: %llu bad\n", argv[1],
	       len / 1048576.0, t1 - t0, *count, t2 - t1, *bad);
	int fail = *bad != 0 || *count != 132ull * 256 * 64;

	CK(cudaHostUnregister(map));
	munmap(map, len);
	close(fd);
	CK(cudaFree(bad));
	printf("t_plain: %s\n", fail ? "FAIL" : "PASS");
	return fail;
}
