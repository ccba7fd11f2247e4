/* SPDX-License-Identifier: MIT */
/*
 * Rows of an array into GPU memory, for callers without kernels of their own
 * (the Python module, python/gstore): a host call that reads rows of a
 * fixed row size through a gs_cuda's CAM ring (the GPU issues the block
 * reads, the pollers serve them) and gathers them into a GPU buffer, and the
 * three GPU memory calls such a caller needs when it has no CUDA runtime at
 * hand.  Link with libgstore_cuda (shared: libgstore_cuda.so).
 */
#ifndef GSTORE_CUDA_ROWS_H
#define GSTORE_CUDA_ROWS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore_cuda.so exports these */

struct gs_cuda;

/*
 * Read rows rows[0..n) (host memory; row r is the bytes [r * row_bytes,
 * (r + 1) * row_bytes) of @c's array) into @dst (GPU memory, n * row_bytes
 * bytes, row i at dst + i * row_bytes), in batches as large as the ring's
 * buffer region.  @stream: a cudaStream_t (NULL: the legacy default
 * stream); the call returns when the rows are in @dst.  Returns 0, -EINVAL
 * (no @dst, row_bytes 0, or a row larger than the region), -ERANGE (a row
 * past the array's last block), -ENOMEM, -EIO (a CUDA error, logged), or
 * the first failed read's -errno.
 */
int gs_cuda_read_rows(struct gs_cuda *c, uint64_t row_bytes, const uint64_t *rows, uint64_t n,
		      void *dst, void *stream);

/* GPU memory (cudaMalloc / cudaFree / cudaMemcpy with cudaMemcpyDefault): 0 or -errno. */
int gs_cuda_mem_alloc(void **p, size_t bytes);
int gs_cuda_mem_free(void *p);
int gs_cuda_mem_copy(void *dst, const void *src, size_t bytes);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_CUDA_ROWS_H */
