// SPDX-License-Identifier: MIT
/*
 * Are GPU atomics on pinned, mapped host memory atomic among the GPU's own
 * threads on this machine?  gs_sq_push() fetch-adds the ring's tail there;
 * GS_CUDA_DEV_TICKETS avoids it.  Prints the answer; fails if lost.
 */
#include "common.cuh"

static __global__ void faa_kernel(uint64_t *host_ctr, uint32_t per)
{
	for (uint32_t i = 0; i < per; i++)
		gs_faa64(host_ctr, 1);
}

int main(void)
{
	skip_without_gpu();
	uint64_t *ctr;
	int blocks = 264, threads = 256;
	uint32_t per = 16;
	cudaEvent_t e0, e1;
	float ms;

	CK(cudaHostAlloc((void **)&ctr, 64, cudaHostAllocMapped));
	*ctr = 0;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	faa_kernel<<<blocks, threads>>>(ctr, per);
	CK(cudaEventRecord(e1));
	KCK();
	CK(cudaEventElapsedTime(&ms, e0, e1));
	uint64_t want = (uint64_t)blocks * threads * per;
	int native = 0;

	cudaDeviceGetAttribute(&native, cudaDevAttrHostNativeAtomicSupported, 0);
	printf("t_sysatomic: %llu of %llu increments (%.1f M/s), hostNativeAtomicSupported=%d\n",
	       (unsigned long long)*ctr, (unsigned long long)want, want / (ms * 1e3), native);
	printf("%s\n", *ctr == want ? "t_sysatomic: PASS" : "t_sysatomic: FAIL");
	return *ctr == want ? 0 : 1;
}
