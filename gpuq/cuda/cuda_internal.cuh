/* SPDX-License-Identifier: MIT */
/* Internals of the CUDA library (the .cu files in gpuq/cuda): rings, the gs_cuda handle. */
#ifndef GS_CUDA_INTERNAL_CUH
#define GS_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>

#include "gstore_cuda.h"

/* One ring + buffer region, GPU-visible, and the device gs_cam over it. */
struct gs_cring {
	struct gs_q *q;			/* in-process: served by these pollers */
	struct gs_ring *ring;		/* host address */
	size_t ring_bytes;
	char *buf;			/* host address of the region */
	size_t buf_len;
	int host_alloc;			/* ring/buf from cudaHostAlloc */
	int added;			/* gs_q_ring_add() done */
	struct gs_cam *dcam;		/* device memory */
	uint64_t *ddone;		/* done + sink words, then results */
	struct gs_cam_ext *dext;
	void (*detach)(struct gs_cring *r);	/* attach: unregister + unmap */
	void *priv;			/* attach: connection state */
};

struct gs_cuda {
	struct gs_q *q;			/* in-process mode, else NULL */
	struct gs_cuda_params p;	/* fixed-up parameters (ext: see below) */
	struct gs_cam_ext *ext;		/* host copy of the extents */
	struct gs_cring cr;		/* the CAM ring */
	/* attach mode */
	void *conn;
	int (*attach_ring)(struct gs_cuda *c, struct gs_cring *r,
			   const struct gs_cuda_params *p, uint32_t sq, uint32_t cam_ncw,
			   uint32_t sink_n, size_t buf_bytes);
	void (*detach)(struct gs_cuda *c);
};

int gs_cuda_err(cudaError_t e, const char *what);
int gs_cuda_params_fix(struct gs_cuda_params *p, uint64_t cap);
int gs_cring_setup_dev(struct gs_cring *r, const struct gs_cuda_params *p, uint32_t cam_ncw,
		       uint32_t sink_n, uint64_t nblocks);
void *gs_cuda_pinned_alloc(size_t bytes);
void gs_cuda_pinned_free(void *p);
void gs_cring_destroy(struct gs_cring *r);

/* Completion queues hold a power of two entries. */
static inline uint32_t roundup_pow2(uint32_t x)
{
	uint32_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

#endif /* GS_CUDA_INTERNAL_CUH */
