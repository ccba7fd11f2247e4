/* SPDX-License-Identifier: MIT */
/*
 * Row gather over storage for GPU programs (GNN mini-batches): rows of a
 * fixed size (a feature table of N x F float32: row_bytes = 4 F) of an
 * array reached through a gs_cuda (in-process over gs_cuda_open(), or a
 * mounted arrays/NAME through gs_cuda_attach()), gathered by row index into
 * one GPU buffer.
 *
 * gs_cuda_gather(g, rows, n, dst, stream) is asynchronous on @stream, as a
 * kernel launch is: the row indices (GPU memory) are read and dst[i] =
 * row rows[i] written by work that runs after what @stream holds, and what
 * is queued on @stream afterwards runs after it.  Inside, per piece of at
 * most gs_cuda_gather_max_rows() rows, on streams of its own:
 *   1. plan: the blocks each row touches (a row may span blocks, its size
 *      need not divide or be a multiple of the block size), rows the host
 *      tier holds left out;
 *   2. dedupe: radix sort + unique of the block ids (a block read once per
 *      piece however many rows share it);
 *   3. read: runs of consecutive blocks (at most 32, one device run) as one
 *      CAM request each, into half of the gs_cuda's pinned region;
 *   4. copy: each row from the region (or the host tier) into dst.
 * With params.cache_bytes, a GPU cache of block lines sits in front of step 3:
 * blocks it holds are copied from there, the others are read and then kept
 * (direct-mapped; a line hit since the last miss for it gets a second chance).
 * Two pieces use the two halves of the region and two streams, so the
 * reads of piece (or batch) i + 1 are in flight while piece i is copied and
 * the caller consumes batch i: issue batch i + 1 on one stream before
 * using batch i on another (double buffering, as AGILE does).
 *
 * The host tier (params.tier_bytes): for tables that fit in host memory, a
 * pinned copy of the array's first tier_bytes, filled in the background by
 * one thread with large sequential reads (tier_chunk bytes, tier_depth in
 * flight, io_uring on tier_fd) and pinned chunk by chunk as it fills;
 * a row whose chunks are in is copied from there by the GPU (over PCIe, no
 * device read), the others are read from the device as above meanwhile.
 * GPU cache (dst) -> host DRAM -> device, as GIDS's CPU buffer.
 *
 * The context uses the whole pinned region of its gs_cuda (nobody else may
 * issue requests into it while the context is open).  Calls on one context
 * come from one host thread at a time.  Host functions return 0 or -errno.
 */
#ifndef GSTORE_CUDA_GATHER_H
#define GSTORE_CUDA_GATHER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

struct gs_cuda;
struct gs_cuda_gather;
struct CUstream_st;	/* cudaStream_t */

struct gs_cuda_gather_params {
	uint64_t row_bytes;	/* bytes per row (> 0) */
	uint64_t base;		/* array byte offset of row 0 */
	uint64_t nrows;		/* rows (0: as many as the array holds after base) */
	uint32_t max_run;	/* blocks per request at most (0: 32) */
	uint32_t threads;	/* GPU threads issuing reads per piece (0: 16384) */
	/* host tier: 0 for none; the array's first tier_bytes (rounded up to
	 * whole rows' chunks, at most the table) */
	uint64_t tier_bytes;
	int tier_fd;		/* the array's bytes to fill it from (O_DIRECT is fine) */
	uint64_t tier_file_off;	/* file offset of array byte 0 in tier_fd */
	uint32_t tier_chunk;	/* fill read size, power of two >= 4096 (0: 4 MiB) */
	uint32_t tier_depth;	/* fill reads in flight (0: 8) */
	/* GPU cache: 0 for none; GPU memory for block lines, direct-mapped, shared
	 * by the context's two streams (a hit pins its line until its copy) */
	uint64_t cache_bytes;
};

int gs_cuda_gather_open(struct gs_cuda_gather **gp, struct gs_cuda *c,
			const struct gs_cuda_gather_params *p);
/* Waits for the context's work, stops the tier's fill, frees everything. */
void gs_cuda_gather_close(struct gs_cuda_gather *g);

/*
 * dst[i * row_bytes ..] = row rows[i] for i < n (@rows, @dst: GPU memory,
 * dst n * row_bytes bytes), asynchronous on @stream (NULL: the legacy
 * default stream).  Row indices >= nrows leave their dst rows untouched
 * and set the sticky error -ERANGE; a failed read sets the read's error.
 */
int gs_cuda_gather(struct gs_cuda_gather *g, const uint64_t *rows, uint64_t n, void *dst,
		   struct CUstream_st *stream);
/* Rows per piece (the region's half over the blocks a row may touch). */
uint64_t gs_cuda_gather_max_rows(struct gs_cuda_gather *g);
/* Wait for all work of the context; then its sticky first error (0 or -errno). */
int gs_cuda_gather_sync(struct gs_cuda_gather *g);

struct gs_cuda_gather_stats {
	uint64_t calls, rows;		/* gathered */
	uint64_t tier_rows;		/* of them copied from the host tier */
	uint64_t blocks;		/* distinct blocks read from the device */
	uint64_t cache_hits;		/* distinct blocks found in the GPU cache */
	uint64_t requests;		/* device reads (runs of blocks) */
	uint64_t bytes;			/* bytes read from the device by gathers */
	uint64_t tier_filled;		/* tier bytes in (pinned, readable) */
	uint64_t tier_len;		/* tier bytes in all */
	uint64_t tier_read_bytes;	/* bytes the fill read (its device bytes) */
	double tier_fill_s;		/* fill time so far (to the last chunk when done) */
	int tier_err;			/* the fill's error, 0 if none */
	uint32_t rings;			/* the gs_cuda's rings */
	uint32_t rings_used;		/* of them, those the reads went through (since open) */
};
/* Counters (waits for the context's work first). */
int gs_cuda_gather_stats(struct gs_cuda_gather *g, struct gs_cuda_gather_stats *st);
/* Wait until the host tier is filled (or failed): 0 or its -errno. */
int gs_cuda_gather_tier_wait(struct gs_cuda_gather *g);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_CUDA_GATHER_H */
