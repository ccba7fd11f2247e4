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
	int host_alloc;			/* ring (and buf, unless buf_shared) ours */
	int buf_shared;			/* buf is ring 0's of the set: not ours */
	int added;			/* gs_q_ring_add() done */
	struct gs_cam *dcam;		/* device memory: the set's shards[shard_id] */
	uint64_t *ddone;		/* done + sink words, then results */
	/* the set (gs_cset) this ring belongs to, as setup_dev needs it */
	struct gs_cam *shards;		/* NULL: a set of one */
	uint32_t nshard, shard_id;
	uint32_t ext_shift;		/* extent unit of the table (0: a block) */
	struct gs_cam_ext *dext;	/* the set's device copy of the extents */
	void (*detach)(struct gs_cring *r);	/* attach: unregister + unmap */
	void *priv;			/* attach: connection state */
};

/*
 * Several rings that share one table of device gs_cams (shards[], so that
 * kernels holding shard 0 reach the others) and one device copy of the
 * extents: a gs_cuda's CAM rings, or a BaM array's miss rings.
 */
struct gs_cset {
	struct gs_cring *cr;		/* [n] */
	uint32_t n;
	struct gs_cam *dcams;		/* device [n] */
	struct gs_cam_ext *dext;
};

struct gs_cuda {
	struct gs_q *q;			/* in-process mode, else NULL */
	struct gs_cuda_params p;	/* fixed-up parameters (ext: see below) */
	struct gs_cam_ext *ext;		/* host copy of the extents */
	uint32_t ext_shift;		/* their unit (block_shift unless attach split them) */
	uint32_t max_pieces;		/* requests one block takes at most */
	struct gs_cset cs;		/* the CAM rings */
	int nrings_auto;		/* the caller left nrings 0: BaM arrays take their own default */
	/* attach mode */
	void *conn;
	uint32_t att_rings;		/* rings this connection has (GS_ATT_MAX_RINGS) */
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
/* The device gs_cams and extents of a set of @n rings (rings not made yet). */
int gs_cset_alloc(struct gs_cset *cs, uint32_t n, const struct gs_cuda_params *p,
		  uint32_t ext_shift);
/* Ring @k's place in the set, before it is made (cring_create / attach_ring). */
void gs_cset_prep(struct gs_cset *cs, uint32_t k, uint32_t ext_shift);
void gs_cset_free(struct gs_cset *cs);
/* c->max_pieces from its extents; -EINVAL when a warp's blocks could need
 * more requests than the ring's words (gs_cam_reserve() would wait forever). */
int gs_cuda_check_pieces(struct gs_cuda *c);

/* Completion queues hold a power of two entries. */
static inline uint32_t roundup_pow2(uint32_t x)
{
	uint32_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

#endif /* GS_CUDA_INTERNAL_CUH */
