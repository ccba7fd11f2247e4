// SPDX-License-Identifier: MIT
/*
 * gs_cuda_read_rows() (include/gstore_cuda_rows.h): rows of an array into a
 * GPU buffer for callers without kernels (the Python module).  Each batch
 * gives every row its own run of blocks in the ring's region (a row that
 * straddles blocks gets all of them, consecutive, so its bytes lie in one
 * piece there); one kernel thread per block issues its read with
 * gs_prefetch_warp() and waits for its own ticket, then a copy kernel moves
 * each row from the region into the caller's buffer.  Rows read twice in a
 * batch are read twice: random batches repeat rows rarely, and the region
 * is reused batch after batch, so nothing is kept between calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gstore_cuda.h"
#include "gstore_cuda_rows.h"
#include "cuda_internal.cuh"

#define FETCH_THREADS	128u
#define COPY_THREADS	256u

/* Thread k reads block blk[k] into region + k * block size. */
static __global__ void fetch_kernel(struct gs_cam *q, char *region, uint64_t bs,
				    const uint64_t *blk, uint32_t n, int *err)
{
	uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t t;

	if (k >= n)
		return;		/* the warp's other lanes go on alone: warp calls use the active mask */
	int r = gs_prefetch_warp(q, blk[k], region + k * bs, &t);
	int w = gs_prefetch_wait(q, t);

	if (r || w)
		atomicCAS(err, 0, r ? r : w);
}

/* Block j (and every gridDim.x-th after it) copies row j from region + off[j]. */
static __global__ void copy_kernel(const char *region, const uint64_t *off, uint32_t nrows,
				   uint64_t row_bytes, char *dst)
{
	for (uint32_t j = blockIdx.x; j < nrows; j += gridDim.x) {
		const char *s = region + off[j];
		char *d = dst + (uint64_t)j * row_bytes;

		if (!(((uintptr_t)s | (uintptr_t)d | row_bytes) & 15)) {
			const uint4 *s4 = (const uint4 *)s;
			uint4 *d4 = (uint4 *)d;

			for (uint64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
				d4[i] = s4[i];
		} else {
			for (uint64_t i = threadIdx.x; i < row_bytes; i += blockDim.x)
				d[i] = s[i];
		}
	}
}

/* One batch's plan: rows [j0, j1) use blocks blk[0..nblk); row j at region + off[j - j0]. */
struct plan {
	uint64_t *blk, *off;
	uint32_t nblk, nrows;
};

/*
 * Plan rows from @j0 on until the region's @slots blocks are used; returns
 * the rows taken (at least one), or -EINVAL / -ERANGE for row @j0's faults.
 */
static int64_t plan_batch(struct plan *pl, const uint64_t *rows, uint64_t j0, uint64_t n,
			  uint64_t row_bytes, uint64_t bs, uint64_t slots, uint64_t nblocks)
{
	uint64_t j;

	pl->nblk = 0;
	pl->nrows = 0;
	for (j = j0; j < n; j++) {
		uint64_t r = rows[j], first, last, b;

		if (r > (UINT64_MAX - row_bytes) / row_bytes)
			return -ERANGE;
		first = r * row_bytes / bs;
		last = (r * row_bytes + row_bytes - 1) / bs;
		if (last >= nblocks)
			return -ERANGE;
		if (last - first + 1 > slots)
			return -EINVAL;		/* the row alone does not fit the region */
		if (pl->nblk + (last - first + 1) > slots)
			break;
		pl->off[pl->nrows++] = pl->nblk * bs + r * row_bytes % bs;
		for (b = first; b <= last; b++)
			pl->blk[pl->nblk++] = b;
	}
	return (int64_t)(j - j0);
}

int gs_cuda_read_rows(struct gs_cuda *c, uint64_t row_bytes, const uint64_t *rows, uint64_t n,
		      void *dst, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	uint64_t bs, slots, j = 0;
	struct plan pl = {};
	uint64_t *dblk = NULL, *doff;
	int *derr, kerr = 0, ret, err0;
	size_t len;
	char *region;

	if (!c || !row_bytes || (n && (!rows || !dst)))
		return -EINVAL;
	if (!n)
		return 0;
	bs = gs_cuda_block_size(c);
	region = (char *)gs_cuda_buf(c, &len);
	slots = len / bs;
	if (slots > UINT32_MAX / 2)
		slots = UINT32_MAX / 2;
	err0 = gs_cuda_error(c);
	pl.blk = (uint64_t *)malloc(2 * slots * sizeof(uint64_t));
	if (!pl.blk)
		return -ENOMEM;
	pl.off = pl.blk + slots;
	/* blk, off, then the error word; stream-ordered (cudaFree would wait for the device) */
	ret = gs_cuda_err(cudaMallocAsync((void **)&dblk, 2 * slots * sizeof(uint64_t) + sizeof(int),
					  s), "rows: scratch");
	if (ret)
		goto free_plan;
	doff = dblk + slots;
	derr = (int *)(doff + slots);
	while (j < n) {
		int64_t got = plan_batch(&pl, rows, j, n, row_bytes, bs, slots, gs_cuda_nblocks(c));

		if (got < 0) {
			ret = (int)got;
			break;
		}
		ret = gs_cuda_err(cudaMemcpyAsync(dblk, pl.blk, pl.nblk * sizeof(uint64_t),
						  cudaMemcpyHostToDevice, s), "rows: ids");
		if (!ret)
			ret = gs_cuda_err(cudaMemcpyAsync(doff, pl.off, pl.nrows * sizeof(uint64_t),
							  cudaMemcpyHostToDevice, s), "rows: offsets");
		if (!ret)
			ret = gs_cuda_err(cudaMemsetAsync(derr, 0, sizeof(int), s), "rows: error word");
		if (ret)
			break;
		fetch_kernel<<<(pl.nblk + FETCH_THREADS - 1) / FETCH_THREADS, FETCH_THREADS, 0, s>>>(
			gs_cuda_cam(c), region, bs, dblk, pl.nblk, derr);
		copy_kernel<<<pl.nrows < 65535 ? pl.nrows : 65535, COPY_THREADS, 0, s>>>(
			region, doff, pl.nrows, row_bytes, (char *)dst + j * row_bytes);
		ret = gs_cuda_err(cudaGetLastError(), "rows: launch");
		if (!ret)	/* the region is reused by the next batch: wait for this one */
			ret = gs_cuda_err(cudaMemcpyAsync(&kerr, derr, sizeof(int),
							  cudaMemcpyDeviceToHost, s), "rows: read error");
		if (!ret)
			ret = gs_cuda_err(cudaStreamSynchronize(s), "rows: kernels");
		if (!ret && kerr)
			ret = kerr;
		if (ret)
			break;
		j += (uint64_t)got;
	}
	/* a read that failed after its ticket was retired shows only in the sticky error */
	if (!ret && !err0)
		ret = gs_cuda_error(c);
	cudaFreeAsync(dblk, s);
	cudaStreamSynchronize(s);
free_plan:
	free(pl.blk);
	return ret;
}

int gs_cuda_mem_alloc(void **p, size_t bytes)
{
	if (!p)
		return -EINVAL;
	*p = NULL;
	return gs_cuda_err(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc");
}

int gs_cuda_mem_free(void *p)
{
	return gs_cuda_err(cudaFree(p), "cudaFree");
}

int gs_cuda_mem_copy(void *dst, const void *src, size_t bytes)
{
	return gs_cuda_err(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}
