// SPDX-License-Identifier: MIT
/*
 * gs_cuda_attach(): a CUDA program on a running gstorefs.  The array file's
 * extents come from the daemon (OPEN, checked against the caller's
 * credentials), the rings and regions are the daemon's memfds (RING),
 * registered with cudaHostRegister so that kernels address them; the
 * daemon's pollers serve them, inside the file's extents only.  The client
 * side needs gstore_q.h and uapi/gstore_attach.h, nothing of the daemon's.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gstore_cuda.h"
#include "gstore_attach.h"
#include "cuda_internal.cuh"

struct att_conn {
	struct gs_attach *a;
	uint64_t ino;
};

static void ring_detach(struct gs_cring *r)
{
	struct gs_attach_ring *ar = (struct gs_attach_ring *)r->priv;

	if (!ar)
		return;
	cudaHostUnregister(ar->map);
	gs_attach_ring_unmap(ar);
	free(ar);
	r->priv = NULL;
}

static int attach_ring(struct gs_cuda *c, struct gs_cring *r, const struct gs_cuda_params *p,
		       uint32_t sq, uint32_t cam_ncw, uint32_t sink_n, size_t buf_bytes)
{
	struct att_conn *ac = (struct att_conn *)c->conn;
	struct gs_attach_ring *ar = (struct gs_attach_ring *)calloc(1, sizeof(*ar));
	uint32_t cq = roundup_pow2(cam_ncw + sink_n);
	int ret;

	if (!ar)
		return -ENOMEM;
	ret = gs_attach_ring(ac->a, sq, cq, 0, buf_bytes, GS_RING_POLLED, ar);
	if (ret) {
		free(ar);
		return ret;
	}
	c->att_rings++;		/* the daemon's, until the connection closes */
	r->priv = ar;
	r->detach = ring_detach;
	ret = gs_cuda_err(cudaHostRegister(ar->map, ar->map_len, cudaHostRegisterMapped |
					   cudaHostRegisterPortable), "cudaHostRegister ring");
	if (ret) {
		gs_attach_ring_unmap(ar);
		free(ar);
		r->priv = NULL;
		return ret;
	}
	r->ring = ar->ring;
	r->ring_bytes = ar->map_len - ar->buf_len;
	r->buf = (char *)ar->buf;
	r->buf_len = ar->buf_len;
	/* on failure the set's gs_cset_free() unregisters and unmaps it */
	return gs_cring_setup_dev(r, p, cam_ncw, sink_n, c->p.nblocks);
}

static void conn_detach(struct gs_cuda *c)
{
	struct att_conn *ac = (struct att_conn *)c->conn;

	if (!ac)
		return;
	if (ac->ino)	/* our writes: the daemon drops stale lines */
		gs_attach_sync(ac->a, ac->ino);
	gs_attach_close(ac->a);
	free(ac);
	c->conn = NULL;
}

/* Kernels may write back: ask for writing, settle for reading (their writes
 * then complete with -EACCES) when the caller may only read. */
static int open_ext(struct gs_attach *a, const char *rel, uint32_t bs,
		    struct gs_attach_obj *obj, uint32_t *ext_shift)
{
	int ret = gs_attach_open_blocks(a, rel, bs, GS_ATT_OPEN_WRITE, obj, ext_shift);

	if (ret == -EACCES || ret == -EROFS)
		ret = gs_attach_open_blocks(a, rel, bs, 0, obj, ext_shift);
	return ret;
}

/*
 * The handle over connection @ac and the extents @ext[@next] (in units of
 * 1 << @ext_shift, @nblocks blocks of p.block_size): both are the handle's
 * from here, even on failure.
 */
static int attach_setup(struct gs_cuda **cp, struct att_conn *ac, struct gs_cuda_params p,
			struct gs_cam_ext *ext, uint32_t next, uint64_t nblocks, uint32_t ext_shift)
{
	struct gs_cuda *c = (struct gs_cuda *)calloc(1, sizeof(*c));
	int ret, auto_rings;

	if (!c) {
		gs_attach_close(ac->a);
		free(ac);
		free(ext);
		return -ENOMEM;
	}
	c->ext = ext;		/* ours now */
	c->conn = ac;
	c->detach = conn_detach;
	c->attach_ring = attach_ring;
	if (!next) {	/* empty, or all holes: nothing to address */
		ret = -ENODATA;
		goto close_c;
	}
	p.ext = ext;
	p.next = next;
	p.nblocks = nblocks;
	ret = gs_cuda_err(cudaSetDevice(p.device), "cudaSetDevice");
	if (ret)
		goto close_c;
	auto_rings = !p.nrings;	/* before params_fix() fills it in */
	ret = gs_cuda_params_fix(&p, 0);
	if (ret)
		goto close_c;
	c->p = p;
	c->nrings_auto = auto_rings;
	c->ext_shift = ext_shift;
	c->p.ext = NULL;
	ret = gs_cuda_check_pieces(c);
	if (ret)
		goto close_c;
	/* one CAM ring: each attach ring has a region of its own, and the CAM
	 * rings of a handle must share theirs; p.nrings stays what BaM arrays
	 * over this handle get */
	ret = gs_cset_alloc(&c->cs, 1, &p, ext_shift);
	if (ret)
		goto close_c;
	gs_cset_prep(&c->cs, 0, ext_shift);
	ret = attach_ring(c, &c->cs.cr[0], &p, p.sq_entries, p.ncw, 0, p.buf_bytes);
	if (ret)
		goto close_c;
	*cp = c;
	return 0;
close_c:
	gs_cuda_close(c);	/* frees the set, the connection and the extents */
	return ret;
}

int gs_cuda_attach(struct gs_cuda **cp, const char *path, const struct gs_cuda_params *params)
{
	struct gs_cuda_params p = params ? *params : gs_cuda_params{};
	char full[PATH_MAX], sock[PATH_MAX];
	struct gs_attach_obj obj;
	struct att_conn *ac;
	const char *rel = NULL;
	uint32_t ext_shift = 0;
	int ret;

	if (!cp || !path || p.ext)
		return -EINVAL;
	if (p.block_size && (p.block_size < 512 || (p.block_size & (p.block_size - 1))))
		return -EINVAL;
	ret = gs_attach_find(path, full, sock, sizeof(sock), &rel);
	if (ret)
		return ret;
	ac = (struct att_conn *)calloc(1, sizeof(*ac));
	if (!ac)
		return -ENOMEM;
	ret = gs_attach_connect(&ac->a, sock);
	if (ret)
		goto free_ac;
	if (!p.block_size)
		p.block_size = 4096;
	ret = open_ext(ac->a, rel, p.block_size, &obj, &ext_shift);
	if (ret)
		goto close_conn;
	ac->ino = obj.ino;
	/* struct gs_att_ext and struct gs_cam_ext have one layout */
	return attach_setup(cp, ac, p, (struct gs_cam_ext *)obj.ext, obj.next, obj.nblocks,
			    ext_shift);
close_conn:
	gs_attach_close(ac->a);
free_ac:
	free(ac);
	return ret;
}

int gs_cuda_attach_conn(struct gs_cuda **cp, struct gs_attach *a, const struct gs_cuda_params *p)
{
	struct att_conn *ac = (struct att_conn *)calloc(1, sizeof(*ac));
	struct gs_cam_ext *ext = NULL;

	if (!ac || !cp || !p || !p->ext || !p->block_size ||
	    (p->block_size & (p->block_size - 1)) || p->block_size < 512) {
		free(ac);
		gs_attach_close(a);
		return !ac ? -ENOMEM : -EINVAL;
	}
	ac->a = a;	/* ino 0: nothing of ours to SYNC at close */
	ext = (struct gs_cam_ext *)malloc((p->next ? p->next : 1) * sizeof(*ext));
	if (ext)
		memcpy(ext, p->ext, p->next * sizeof(*ext));
	if (!ext) {
		gs_attach_close(a);
		free(ac);
		return -ENOMEM;
	}
	return attach_setup(cp, ac, *p, ext, p->next, p->nblocks,
			    (uint32_t)__builtin_ctz(p->block_size));
}
