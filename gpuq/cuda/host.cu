// SPDX-License-Identifier: MIT
/*
 * Host side of the CUDA API (include/gstore_cuda.h): pinned GPU-mapped
 * rings and buffer regions handed to the I/O core's pollers, the device
 * copies of struct gs_cam / struct gs_bam, and the array flush kernels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gstore_cuda.h"
#include "gstore_attach.h"	/* GS_ATT_MAX_RINGS */
#include "cuda_internal.cuh"
#include "../swnvme.h"

extern "C" {
#include "gs_log.h"
}

#define DEF_BLOCK	4096u
#define DEF_SQ		4096u
#define DEF_BUF		(64ull << 20)
#define DEF_CACHE	(256ull << 20)
#define DEF_NIO		4096u

static int is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static uint32_t ilog2(uint64_t x)
{
	return 63 - __builtin_clzll(x);
}

int gs_cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	gs_err("cuda: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* ---- one ring + region, device copy of its gs_cam ---- */

/* Page-aligned pinned host memory mapped into the GPU (cudaHostAlloc may
 * hand out small blocks unaligned; O_DIRECT and PRPs need pages). */
void *gs_cuda_pinned_alloc(size_t bytes)
{
	size_t len = (bytes + 4095) & ~(size_t)4095;
	void *p;

	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	if (gs_cuda_err(cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable),
			"cudaHostRegister")) {
		free(p);
		return NULL;
	}
	return p;
}

void gs_cuda_pinned_free(void *p)
{
	if (!p)
		return;
	cudaHostUnregister(p);
	free(p);
}

void gs_cring_destroy(struct gs_cring *r)
{
	if (r->added && r->q)
		gs_q_ring_del(r->q, r->ring);
	if (r->detach)
		r->detach(r);
	cudaFree(r->ddone);
	if (r->host_alloc) {
		gs_cuda_pinned_free(r->ring);
		if (!r->buf_shared)
			gs_cuda_pinned_free(r->buf);
	}
	memset(r, 0, sizeof(*r));
}

/* ---- sets of rings ---- */

static uint32_t device_sms(int device)
{
	int nsm = 0;

	if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
		return 0;
	return (uint32_t)nsm;
}

uint32_t gs_cuda_default_nrings(int device)
{
	/* a ring per 16 SMs or so (16 SMs of 128 threads keep one ring's
	 * collector busy, docs/PERF.md), a power of two, at most 16 */
	return gs_cam_rings_for(device_sms(device), GS_CAM_SMS_PER_RING);
}

/* BaM's miss rings over a handle whose ring count was the default. */
static uint32_t default_bam_nrings(int device)
{
	return gs_cam_rings_for(device_sms(device), GS_BAM_SMS_PER_RING);
}

int gs_cset_alloc(struct gs_cset *cs, uint32_t n, const struct gs_cuda_params *p,
		  uint32_t ext_shift)
{
	int ret;

	memset(cs, 0, sizeof(*cs));
	if (!n || n > GS_CAM_MAX_SHARDS)
		return -EINVAL;
	cs->cr = (struct gs_cring *)calloc(n, sizeof(*cs->cr));
	if (!cs->cr)
		return -ENOMEM;
	cs->n = n;
	ret = gs_cuda_err(cudaMalloc(&cs->dcams, n * sizeof(struct gs_cam)), "cudaMalloc cams");
	if (!ret)
		ret = gs_cuda_err(cudaMemset(cs->dcams, 0, n * sizeof(struct gs_cam)), "cams");
	if (!ret && p->next) {
		size_t eb = p->next * sizeof(struct gs_cam_ext);

		ret = gs_cuda_err(cudaMalloc(&cs->dext, eb), "cudaMalloc ext");
		if (!ret)
			ret = gs_cuda_err(cudaMemcpy(cs->dext, p->ext, eb, cudaMemcpyHostToDevice),
					  "copy ext");
	}
	if (ret)
		gs_cset_free(cs);
	return ret;
}

void gs_cset_prep(struct gs_cset *cs, uint32_t k, uint32_t ext_shift)
{
	struct gs_cring *r = &cs->cr[k];

	memset(r, 0, sizeof(*r));
	r->dcam = &cs->dcams[k];
	r->dext = cs->dext;
	r->shards = cs->n > 1 ? cs->dcams : NULL;
	r->nshard = cs->n;
	r->shard_id = k;
	r->ext_shift = ext_shift;
}

void gs_cset_free(struct gs_cset *cs)
{
	/* the others share ring 0's region: it goes last */
	for (uint32_t k = cs->n; cs->cr && k-- > 0;)
		if (cs->cr[k].dcam)
			gs_cring_destroy(&cs->cr[k]);
	cudaFree(cs->dcams);
	cudaFree(cs->dext);
	free(cs->cr);
	memset(cs, 0, sizeof(*cs));
}

/*
 * Make the ring and region GPU-visible, build the device gs_cam (in the
 * set's table at r->dcam).  The ring and region are either ours
 * (host_alloc) or shared memory the caller mapped and registered (attach).
 */
int gs_cring_setup_dev(struct gs_cring *r, const struct gs_cuda_params *p, uint32_t cam_ncw,
		       uint32_t sink_n, uint64_t nblocks)
{
	struct gs_cam h;
	void *dring, *dbuf;
	size_t words = (size_t)cam_ncw + sink_n;
	int ret;

	/*
	 * Every request that can be outstanding has a ring slot of its own: a
	 * GPU lane then never holds an sq ticket whose slot is still in use.
	 * Such a lane spins until a poller pops the slot's previous request,
	 * which may wait behind a slot that a lane of the same warp has taken
	 * but not yet filled; the GPU need not schedule that lane while its
	 * mate spins, and the ring stops (seen with 4 x sq_entries tickets).
	 */
	if (words > r->ring->sq_entries) {
		gs_err("cuda: %zu requests in flight need as many ring slots (%u)", words,
		       r->ring->sq_entries);
		return -EINVAL;
	}
	if (!r->dcam)
		return -EINVAL;

	ret = gs_cuda_err(cudaHostGetDevicePointer(&dring, r->ring, 0), "device pointer (ring)");
	if (ret)
		return ret;
	ret = gs_cuda_err(cudaHostGetDevicePointer(&dbuf, r->buf, 0), "device pointer (buf)");
	if (ret)
		return ret;
	/* done[] and sink_done[] then dres[] and sink_res[] */
	ret = gs_cuda_err(cudaMalloc(&r->ddone, words * 16), "cudaMalloc done words");
	if (ret)
		return ret;
	/* no ticket equals UINT64_MAX: every word starts "not done" */
	ret = gs_cuda_err(cudaMemset(r->ddone, 0xff, words * 8), "memset done words");
	if (ret)
		return ret;
	memset(&h, 0, sizeof(h));
	h.ring = (struct gs_ring *)dring;
	h.sq_ctr = (p->flags & GS_CUDA_RING_TICKETS) ? &h.ring->sq_tail : &r->dcam->sq_ticket;
	h.done = r->ddone;
	h.sink_done = r->ddone + cam_ncw;
	h.dres = (int64_t *)(r->ddone + words);
	h.sink_res = h.dres + cam_ncw;
	h.sink_mask = sink_n ? sink_n - 1 : 0;
	h.sink_shift = sink_n ? ilog2(sink_n) : 0;
	h.buf = (char *)dbuf;
	h.buf_len = r->buf_len;
	h.ncw = cam_ncw;
	h.sq_mask = r->ring->sq_entries - 1;
	h.cq_mask = r->ring->cq_entries - 1;
	h.block_shift = ilog2(p->block_size);
	h.ext_shift = r->ext_shift;
	h.next = p->next;
	h.ext = r->dext;
	h.dev_base = p->dev_off;
	h.nblocks = nblocks;
	h.shards = r->shards;
	h.nshard = r->nshard;
	h.shard_id = r->shard_id;
	return gs_cuda_err(cudaMemcpy(r->dcam, &h, sizeof(h), cudaMemcpyHostToDevice), "copy cam");
}

/*
 * A ring of our own in pinned host memory, served by @q, and a region of
 * @buf_bytes (or, with @share, @share's region: the CAM rings of a gs_cuda
 * all address the one region its callers see).  r: gs_cset_prep()'d.
 */
static int cring_create(struct gs_cring *r, struct gs_q *q, const struct gs_cuda_params *p,
			uint32_t sq, uint32_t cam_ncw, uint32_t sink_n, size_t buf_bytes,
			uint64_t nblocks, const struct gs_cring *share)
{
	/* room for every cqe that can be in flight: the pollers never wait */
	uint32_t cq = roundup_pow2(cam_ncw + sink_n);
	size_t rb = gs_ring_bytes(sq, cq, 0);
	int ret;

	r->q = q;
	r->host_alloc = 1;
	r->ring_bytes = rb;
	r->ring = (struct gs_ring *)gs_cuda_pinned_alloc(rb);
	if (share) {
		r->buf = share->buf;
		r->buf_len = share->buf_len;
		r->buf_shared = 1;
	} else {
		r->buf_len = buf_bytes;
		r->buf = (char *)gs_cuda_pinned_alloc(buf_bytes);
	}
	if (!r->ring || !r->buf)
		return -ENOMEM;
	ret = gs_ring_init(r->ring, rb, sq, cq, 0, GS_RING_POLLED);
	if (ret)
		return ret;
	ret = gs_cring_setup_dev(r, p, cam_ncw, sink_n, nblocks);
	if (ret || !q)
		return ret;
	/*
	 * No gs_q_register_buffer(): a registered region stays registered (its
	 * pages pinned by io_uring) until gs_q_close(), and ours is freed with
	 * the ring; a later region at the same address would get reads landing
	 * in the old pages.
	 */
	ret = gs_q_ring_add(q, r->ring, r->buf, r->buf_len);
	if (ret)
		return ret;
	r->added = 1;
	return 0;
}

/* Fill in defaults and check; @cap: device bytes (for nblocks). */
int gs_cuda_params_fix(struct gs_cuda_params *p, uint64_t cap)
{
	if (!p->block_size)
		p->block_size = DEF_BLOCK;
	if (!p->sq_entries)
		p->sq_entries = DEF_SQ;
	if (!p->ncw)
		p->ncw = p->sq_entries;
	if (!p->buf_bytes)
		p->buf_bytes = DEF_BUF;
	if (!p->nrings)
		p->nrings = gs_cuda_default_nrings(p->device);
	if (!is_pow2(p->block_size) || p->block_size < 512 || !is_pow2(p->sq_entries) ||
	    !is_pow2(p->ncw) || (p->ext && !p->next) || (p->next && !p->ext) ||
	    p->buf_bytes % p->block_size || p->nrings > GS_CUDA_MAX_RINGS)
		return -EINVAL;
	if (!p->nblocks) {
		if (p->next) {
			const struct gs_cam_ext *e = &p->ext[p->next - 1];

			p->nblocks = e->blk + e->nblk;
		} else {
			if (cap <= p->dev_off)
				return -EINVAL;
			p->nblocks = (cap - p->dev_off) / p->block_size;
		}
	}
	return 0;
}

/*
 * A block over several extents takes a ticket per device run, and a warp
 * reserves its lanes' tickets at once: 32 blocks' worth must fit in the
 * words (gs_cam_reserve() waits for the oldest of them to retire).
 */
int gs_cuda_check_pieces(struct gs_cuda *c)
{
	c->max_pieces = gs_cam_max_pieces(c->ext, c->p.next, ilog2(c->p.block_size),
					   c->ext_shift);
	if (c->max_pieces > GS_CAM_MAX_PIECES || 32ull * c->max_pieces > c->p.ncw) {
		gs_err("cuda: a block spans %u extents: too many for %u requests in flight",
		       c->max_pieces, c->p.ncw);
		return -EINVAL;
	}
	return 0;
}

int gs_cuda_open(struct gs_cuda **cp, struct gs_q *q, const struct gs_cuda_params *params)
{
	struct gs_cuda_params p = params ? *params : gs_cuda_params{};
	struct gs_q_geom g;
	struct gs_cuda *c;
	int ret;

	if (!cp || !q)
		return -EINVAL;
	ret = gs_q_geometry(q, &g);
	if (ret)
		return ret;
	ret = gs_cuda_err(cudaSetDevice(p.device), "cudaSetDevice");
	if (ret)
		return ret;
	ret = gs_cuda_params_fix(&p, g.capacity);
	if (ret)
		return ret;
	if (p.block_size < g.lba_size)
		return -EINVAL;
	c = (struct gs_cuda *)calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->q = q;
	c->p = p;
	c->p.ext = NULL;	/* not ours to keep: ours is c->ext */
	c->nrings_auto = !params || !params->nrings;
	c->ext_shift = ilog2(p.block_size);
	if (p.next) {
		c->ext = (struct gs_cam_ext *)malloc(p.next * sizeof(*c->ext));
		if (!c->ext) {
			ret = -ENOMEM;
			goto free_c;
		}
		memcpy(c->ext, p.ext, p.next * sizeof(*c->ext));
	}
	ret = gs_cuda_check_pieces(c);
	if (ret)
		goto free_c;
	ret = gs_cset_alloc(&c->cs, p.nrings, &p, c->ext_shift);
	if (ret)
		goto free_c;
	/* every ring its own tickets and words, all over the one region */
	for (uint32_t k = 0; k < p.nrings && !ret; k++) {
		gs_cset_prep(&c->cs, k, c->ext_shift);
		ret = cring_create(&c->cs.cr[k], q, &p, p.sq_entries, p.ncw, 0, p.buf_bytes,
				   p.nblocks, k ? &c->cs.cr[0] : NULL);
	}
	if (ret)
		goto free_set;
	*cp = c;
	return 0;
free_set:
	gs_cset_free(&c->cs);
free_c:
	free(c->ext);
	free(c);
	return ret;
}

void gs_cuda_close(struct gs_cuda *c)
{
	if (!c)
		return;
	gs_cset_free(&c->cs);
	if (c->detach)
		c->detach(c);
	free(c->ext);
	free(c);
}

struct gs_cam *gs_cuda_cam(struct gs_cuda *c)
{
	return c->cs.cr[0].dcam;
}

void *gs_cuda_buf(struct gs_cuda *c, size_t *len)
{
	if (len)
		*len = c->cs.cr[0].buf_len;
	return c->cs.cr[0].buf;
}

uint32_t gs_cuda_block_size(struct gs_cuda *c)
{
	return c->p.block_size;
}

uint64_t gs_cuda_nblocks(struct gs_cuda *c)
{
	return c->p.nblocks;
}

uint32_t gs_cuda_nrings(struct gs_cuda *c)
{
	return c->cs.n;
}

/* The first sticky error among the set's shards (0 or -errno). */
static int cset_error(struct gs_cset *cs)
{
	for (uint32_t k = 0; k < cs->n; k++) {
		int64_t err = 0;
		int ret = gs_cuda_err(cudaMemcpy(&err, &cs->dcams[k].err, sizeof(err),
						 cudaMemcpyDeviceToHost), "read error");

		if (ret)
			return ret;
		if (err)
			return (int)err;
	}
	return 0;
}

int gs_cuda_error(struct gs_cuda *c)
{
	return cset_error(&c->cs);
}

/* ---- BaM arrays ---- */

struct gs_cuda_array {
	struct gs_cuda *c;
	/* the misses' own rings, each with its bounce slots (its share of nio)
	 * in a region of its own; NVMe mode: one, for the bounce region */
	struct gs_cset cs;
	struct gs_bam h;	/* host copy: device pointers */
	struct gs_bam *d;
	/* NVMe mode */
	struct gs_swnvme *sw;
	uint32_t nq;
	void *nvq_mem[2 * 64];	/* pinned SQ, CQ per queue */
	void *nvq_state[64];
};

static __global__ void nvmeq_init_kernel(struct gs_nvmeq *q, uint32_t nslots, void *sq, void *cq,
					 uint32_t *sq_db, uint32_t *cq_db, void *state)
{
	gs_nvmeq_init(q, nslots, sq, cq, sq_db, cq_db, state);
}

/* Queue pairs on the software controller, their gs_nvmeq in GPU memory. */
static int nvme_setup(struct gs_cuda_array *a, const struct gs_cuda_array_params *p)
{
	uint32_t ns = p->nvme_slots ? p->nvme_slots : 1024, qsize = gs_nvmeq_qsize(ns);
	char *bar = (char *)gs_swnvme_bar(a->sw), *dbar;
	int ret;

	a->nq = p->nvme_queues ? p->nvme_queues : 4;
	if (a->nq > 64 || !is_pow2(ns) || ns > GS_NVMEQ_MAX_SLOTS)
		return -EINVAL;
	ret = gs_cuda_err(cudaHostGetDevicePointer((void **)&dbar, bar, 0),
			  "swnvme BAR is not GPU-mapped");
	if (ret)
		return ret;
	ret = gs_cuda_err(cudaMalloc((void **)&a->h.nvmeq, a->nq * sizeof(struct gs_nvmeq)),
			  "cudaMalloc nvmeq");
	if (ret)
		return ret;
	for (uint32_t i = 0; i < a->nq; i++) {
		size_t sb = (size_t)qsize * 64, cb = (size_t)qsize * 16;
		void *sq, *cq, *dsq, *dcq;
		uint16_t qid = (uint16_t)(i + 1);

		sq = a->nvq_mem[2 * i] = gs_cuda_pinned_alloc(sb);
		cq = a->nvq_mem[2 * i + 1] = gs_cuda_pinned_alloc(cb);
		if (!sq || !cq)
			return -ENOMEM;
		cudaHostGetDevicePointer(&dsq, sq, 0);
		cudaHostGetDevicePointer(&dcq, cq, 0);
		if ((ret = gs_swnvme_map(a->sw, (uintptr_t)sq, sq, sb)) ||
		    (ret = gs_swnvme_map(a->sw, (uintptr_t)cq, cq, cb)) ||
		    (ret = gs_swnvme_create_qpair(a->sw, qid, (uintptr_t)sq, (uintptr_t)cq, qsize)))
			return ret;
		ret = gs_cuda_err(cudaMalloc(&a->nvq_state[i], gs_nvmeq_state_bytes(ns)),
				  "cudaMalloc nvmeq state");
		if (ret)
			return ret;
		nvmeq_init_kernel<<<1, 1>>>(&a->h.nvmeq[i], ns, dsq, dcq,
					    (uint32_t *)(dbar + GS_SWNVME_DB_BASE + 8 * qid),
					    (uint32_t *)(dbar + GS_SWNVME_DB_BASE + 8 * qid + 4),
					    a->nvq_state[i]);
		ret = gs_cuda_err(cudaDeviceSynchronize(), "nvmeq init");
		if (ret)
			return ret;
	}
	/* bounce slots: the controller sees them at their host addresses */
	ret = gs_swnvme_map(a->sw, (uintptr_t)a->cs.cr[0].buf, a->cs.cr[0].buf,
			    a->cs.cr[0].buf_len);
	if (ret)
		return ret;
	a->h.nvme_nq = a->nq;
	a->h.prp_base = (uintptr_t)a->cs.cr[0].buf;
	a->h.lba_shift = gs_swnvme_lba_shift(a->sw);
	a->h.nsid = 1;
	return 0;
}

static __global__ void flush_kernel(struct gs_bam *b)
{
	gs_array_flush(b);
}

static __global__ void flush_device_kernel(struct gs_bam *b)
{
	gs_array_flush_device(b);
}

static void array_free(struct gs_cuda_array *a)
{
	cudaFree(a->h.pst);
	cudaFree(a->h.pslot);
	cudaFree(a->h.slot_page);
	cudaFree(a->h.slot_ref);
	cudaFree(a->h.data);
	cudaFree(a->h.turn);
	cudaFree(a->d);
	for (uint32_t i = 0; i < a->nq; i++)
		gs_swnvme_delete_qpair(a->sw, (uint16_t)(i + 1));
	for (uint32_t i = 0; i < 2 * a->nq; i++)
		gs_cuda_pinned_free(a->nvq_mem[i]);
	for (uint32_t i = 0; i < a->nq; i++)
		cudaFree(a->nvq_state[i]);
	cudaFree(a->h.nvmeq);
	gs_cset_free(&a->cs);
	free(a);
}

static int array_alloc(void **p, size_t bytes, int fill, const char *what)
{
	int ret = gs_cuda_err(cudaMalloc(p, bytes), what);

	return ret ? ret : gs_cuda_err(cudaMemset(*p, fill, bytes), what);
}

int gs_cuda_array_open(struct gs_cuda_array **ap, struct gs_cuda *c,
		       const struct gs_cuda_array_params *params)
{
	struct gs_cuda_array_params p = params ? *params : gs_cuda_array_params{};
	struct gs_cuda_array *a;
	struct gs_cuda_params rp = c ? c->p : gs_cuda_params{};
	uint64_t line, nblocks;
	uint32_t nr, per, sq, ext_shift;
	int ret;

	if (!p.cache_bytes)
		p.cache_bytes = DEF_CACHE;
	if (!p.nio)
		p.nio = DEF_NIO;
	if (p.backend == GS_BAM_NVME) {
		if (!p.swnvme)
			return -EINVAL;	/* kmod queues: not wired yet */
		rp.block_size = 4096;
		rp.nblocks = (gs_swnvme_nlba(p.swnvme) << gs_swnvme_lba_shift(p.swnvme)) / 4096;
		if (c && c->p.block_size != 4096)
			return -EINVAL;
		if (c)
			rp.nblocks = c->p.nblocks;
	} else if (p.backend != GS_BAM_RING || !c) {
		return -EINVAL;
	}
	line = rp.block_size;
	nblocks = rp.nblocks;
	if (!is_pow2(p.nio) || p.cache_bytes < 64 * line || p.nrings > GS_CUDA_MAX_RINGS ||
	    (p.nrings && !is_pow2(p.nrings)))
		return -EINVAL;
	/*
	 * Rings: NVMe mode needs only the bounce region (misses are NVMe
	 * commands); the ring mode takes the gs_cuda's count (its nrings, also
	 * in attach mode where its CAM has one ring, there at most a quarter of
	 * the connection's rings left; a power of two:
	 * the slots split evenly), each ring at least 32 slots, and in attach
	 * mode no more than the connection has left.
	 */
	nr = p.backend == GS_BAM_NVME ? 1 : p.nrings ? p.nrings :
	     c->nrings_auto ? default_bam_nrings(c->p.device) : roundup_pow2(c->p.nrings);
	while (nr > 1 && p.nio / nr < 32)
		nr /= 2;
	if (c && !c->q && p.backend == GS_BAM_RING) {
		/* the connection's rings are never given back: by default take at
		 * most a quarter of what is left, so that later arrays get some */
		uint32_t left = c->att_rings < GS_ATT_MAX_RINGS ? GS_ATT_MAX_RINGS - c->att_rings : 0;
		uint32_t cap = p.nrings ? left : left / 4;

		while (nr > 1 && nr > cap)
			nr /= 2;
	}
	per = p.nio / nr;
	a = (struct gs_cuda_array *)calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->c = c;
	a->sw = p.swnvme;
	rp.ext = c ? c->ext : NULL;
	rp.next = c ? c->p.next : 0;
	ext_shift = c ? c->ext_shift : ilog2(line);
	/* a slot for every request in flight: the bounce slots' and 2 of the cam's */
	sq = roundup_pow2(per + 2);
	ret = gs_cset_alloc(&a->cs, nr, &rp, ext_shift);
	if (ret) {
		free(a);
		return ret;
	}
	/* the cam's own tickets (device flushes): 2 words; the bounce slots: sinks */
	for (uint32_t k = 0; k < nr && !ret; k++) {
		gs_cset_prep(&a->cs, k, ext_shift);
		if (p.backend == GS_BAM_NVME || c->q)
			ret = cring_create(&a->cs.cr[k], p.backend == GS_BAM_NVME ? NULL : c->q,
					   &rp, sq, 2, per, (size_t)per * line, nblocks, NULL);
		else
			ret = c->attach_ring ? c->attach_ring(c, &a->cs.cr[k], &rp, sq, 2, per,
							      (size_t)per * line) : -EOPNOTSUPP;
	}
	if (ret) {
		gs_cset_free(&a->cs);
		free(a);
		return ret;
	}
	struct gs_bam *h = &a->h;

	h->line_shift = ilog2(line);
	h->nslots = (uint32_t)(p.cache_bytes / line);
	h->nio = p.nio;
	h->nio_shift = ilog2(p.nio);
	h->npages = nblocks;
	h->bounce_off = 0;
	h->cam = a->cs.cr[0].dcam;
	if ((ret = array_alloc((void **)&h->pst, h->npages * 4, 0, "cache page states")) ||
	    (ret = array_alloc((void **)&h->pslot, h->npages * 4, 0, "cache page slots")) ||
	    (ret = array_alloc((void **)&h->slot_page, (size_t)h->nslots * 8, 0xff,
			       "cache slots")) ||
	    (ret = array_alloc((void **)&h->slot_ref, (size_t)h->nslots * 4, 0, "cache clock")) ||
	    (ret = array_alloc((void **)&h->data, (size_t)h->nslots * line, 0, "cache lines")) ||
	    (ret = array_alloc((void **)&h->turn, (size_t)h->nio * 8, 0, "cache turns")) ||
	    (ret = array_alloc((void **)&a->d, sizeof(*h), 0, "cache")))
		goto free_a;
	if (p.backend == GS_BAM_NVME && (ret = nvme_setup(a, &p)))
		goto free_a;
	ret = gs_cuda_err(cudaMemcpy(a->d, h, sizeof(*h), cudaMemcpyHostToDevice), "copy cache");
	if (ret)
		goto free_a;
	*ap = a;
	return 0;
free_a:
	array_free(a);
	return ret;
}

int gs_cuda_array_flush(struct gs_cuda_array *a)
{
	uint32_t threads = 256, blocks = (a->h.nslots + threads - 1) / threads;
	int ret;

	flush_kernel<<<blocks, threads>>>(a->d);
	ret = gs_cuda_err(cudaGetLastError(), "flush kernel launch");
	if (!ret)
		ret = gs_cuda_err(cudaDeviceSynchronize(), "flush kernel");
	if (ret)
		return ret;
	flush_device_kernel<<<1, 1>>>(a->d);
	ret = gs_cuda_err(cudaGetLastError(), "device flush launch");
	if (!ret)
		ret = gs_cuda_err(cudaDeviceSynchronize(), "device flush");
	return ret ? ret : gs_cuda_array_error(a);
}

int gs_cuda_array_invalidate(struct gs_cuda_array *a)
{
	int ret = gs_cuda_array_flush(a);

	if (ret)
		return ret;
	ret = gs_cuda_err(cudaMemset(a->h.pst, 0, a->h.npages * 4), "invalidate");
	if (!ret)
		ret = gs_cuda_err(cudaMemset(a->h.slot_page, 0xff, (size_t)a->h.nslots * 8),
				  "invalidate");
	return ret;
}

void gs_cuda_array_close(struct gs_cuda_array *a)
{
	if (a)
		array_free(a);
}

struct gs_bam *gs_cuda_array_dev(struct gs_cuda_array *a)
{
	return a->d;
}

int gs_cuda_array_stats(struct gs_cuda_array *a, struct gs_cuda_array_stats *st)
{
	struct gs_bam h;
	int ret = gs_cuda_err(cudaMemcpy(&h, a->d, sizeof(h), cudaMemcpyDeviceToHost), "stats");

	if (ret)
		return ret;
	st->misses = h.misses;
	st->evictions = h.evictions;
	st->writebacks = h.writebacks;
	st->busy_waits = h.busy_waits;
	return 0;
}

int gs_cuda_array_error(struct gs_cuda_array *a)
{
	int64_t e1 = 0, e2 = 0;
	int ret = gs_cuda_err(cudaMemcpy(&e1, &a->d->err, sizeof(e1), cudaMemcpyDeviceToHost),
			      "read error");

	if (!ret)
		e2 = cset_error(&a->cs);
	return ret ? ret : (int)(e1 ? e1 : e2);
}

/* ---- diagnostics ---- */

static int cring_debug(struct gs_cring *r, char *buf, size_t len)
{
	struct gs_cam h;
	cudaStream_t s;
	struct gs_ring *g = r->ring;
	int n;

	/* a stream that does not wait for the (maybe stuck) default stream */
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		return snprintf(buf, len, "no stream");
	memset(&h, 0, sizeof(h));
	cudaMemcpyAsync(&h, r->dcam, sizeof(h), cudaMemcpyDeviceToHost, s);
	cudaStreamSynchronize(s);
	cudaStreamDestroy(s);
	n = snprintf(buf, len,
		     "ring sq %llu..%llu cq %llu..%llu | cam tail %llu retire %llu sq_ticket %llu "
		     "col_lock %llu (thread %lld) cq_head %llu err %lld nerr %llu sink_ticket %llu",
		     (unsigned long long)g->sq_head, (unsigned long long)g->sq_tail,
		     (unsigned long long)g->cq_head, (unsigned long long)g->cq_tail,
		     (unsigned long long)h.tail, (unsigned long long)h.retire,
		     (unsigned long long)h.sq_ticket, (unsigned long long)h.col_lock,
		     (long long)h.col_owner - 1, (unsigned long long)h.cq_head, (long long)h.err,
		     (unsigned long long)h.nerr, (unsigned long long)h.sink_ticket);
	/* the pending sq slots' turn words, as ticket offsets: 1 = filled, 0 = free */
	for (uint64_t t = g->sq_head, k = 0; k < 4 && t < h.sq_ticket && n > 0 && (size_t)n < len;
	     t++, k++) {
		struct gs_sq_slot *sl = &gs_ring_sq(g)[t & (g->sq_entries - 1)];

		n += snprintf(buf + n, len - n, "%s%lld", k ? " " : " | slot seq-ticket ",
			      (long long)(sl->seq - t));
	}
	return n;
}

/* Every ring of the set, " || " between them. */
static int cset_debug(struct gs_cset *cs, char *buf, size_t len)
{
	int n = 0;

	for (uint32_t k = 0; k < cs->n && n >= 0 && (size_t)n < len; k++) {
		if (k)
			n += snprintf(buf + n, len - n, " || ring %u: ", k);
		if (n >= 0 && (size_t)n < len)
			n += cring_debug(&cs->cr[k], buf + n, len - n);
	}
	return n;
}

int gs_cuda_debug(struct gs_cuda *c, char *buf, size_t len)
{
	return cset_debug(&c->cs, buf, len);
}

int gs_cuda_array_debug(struct gs_cuda_array *a, char *buf, size_t len)
{
	struct gs_bam h;
	uint64_t turn[4] = { 0 };
	cudaStream_t s;
	int n;

	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		return snprintf(buf, len, "no stream");
	memset(&h, 0, sizeof(h));
	cudaMemcpyAsync(&h, a->d, sizeof(h), cudaMemcpyDeviceToHost, s);
	cudaMemcpyAsync(turn, a->h.turn, sizeof(turn), cudaMemcpyDeviceToHost, s);
	cudaStreamSynchronize(s);
	cudaStreamDestroy(s);
	n = snprintf(buf, len, "bam misses %llu evictions %llu writebacks %llu busy_waits %llu "
		     "io_ticket %llu clock %llu err %lld turn0..3 %llu %llu %llu %llu | ",
		     (unsigned long long)h.misses, (unsigned long long)h.evictions,
		     (unsigned long long)h.writebacks, (unsigned long long)h.busy_waits,
		     (unsigned long long)h.io_ticket, (unsigned long long)h.clock,
		     (long long)h.err, (unsigned long long)turn[0], (unsigned long long)turn[1],
		     (unsigned long long)turn[2], (unsigned long long)turn[3]);
	if (n > 0 && (size_t)n < len)
		n += cset_debug(&a->cs, buf + n, len - n);
	return n;
}
