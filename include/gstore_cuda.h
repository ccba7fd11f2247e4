/* SPDX-License-Identifier: MIT */
/*
 * gstore for CUDA programs: GPU-initiated storage access.
 *
 * Two modes over the same I/O core (gstore_q.h):
 *
 *  CAM (CPU-managed).  Kernels call gs_prefetch() / gs_write_back() with
 *  block ids; requests go into a gs_ring in pinned host memory mapped into
 *  the GPU; the core's poller threads serve it; data lands in (or leaves
 *  from) a pinned buffer region the kernel addresses directly.
 *  gs_prefetch_sync() / gs_write_back_sync() wait for them (the latter also
 *  flushes the device).  The SMs only write requests: the CPU drives the
 *  device.
 *
 *  BaM (GPU-managed).  A software cache in GPU memory (clock replacement,
 *  refcounts, line states, one miss -> one I/O, warp coalescing) behind a
 *  typed accessor: gs_array_get_u64(a, i), gs_array_set_u64(a, i, v),
 *  flushed by gs_cuda_array_flush().  Misses go through a ring to the
 *  pollers (GS_BAM_RING), or as NVMe commands that GPU threads put into
 *  NVMe queues (GS_BAM_NVME: gstore_nvmeq.h, served by gstore_nvme.ko or the
 *  software NVMe controller of the I/O core).
 *
 * Where the blocks are: a gs_cuda opens over a gs_q (in-process: an image
 * file or device opened with gs_q_open()), with block b at dev_off + b *
 * block_size, or with an extent table (an array file of a gstore filesystem:
 * a direct lease's extents, gs_fs_lease_export()); or it attaches to a running
 * gstorefs (gs_cuda_attach()) and gets rings and buffers in
 * shared memory served by the daemon's pollers.
 *
 * The plain way needs none of this: mmap() an array file of a mounted
 * gstore, cudaHostRegister() the mapping, and read it from a kernel (see
 * gstore_cuda(3)).
 *
 * Host functions return 0 or -errno.  Device functions return 0 or -errno
 * too; errors are also kept (sticky) in the queue and read back with
 * gs_cuda_error() / gs_cuda_array_error().
 */
#ifndef GSTORE_CUDA_H
#define GSTORE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "gstore_q.h"
#include "gstore_cuda_cam.h"
#include "gstore_cuda_bam.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_cuda;
struct gs_cuda_array;

enum {
	/*
	 * GPU producers fetch-add the ring's own sq tail in host memory
	 * (gs_sq_push()) instead of taking tickets from GPU memory (the
	 * default).  Without host-native atomics (PCIe) such atomics are
	 * atomic among the GPU's threads only, and compute-sanitizer reports
	 * them as invalid: kept for comparison, not for use.
	 */
	GS_CUDA_RING_TICKETS = 1u << 0,
	GS_CUDA_DEV_TICKETS = 0,	/* the default; kept for old callers */
};

struct gs_cuda_params {
	uint32_t block_size;	/* CAM block / BaM line bytes, power of two (0: 4096) */
	uint32_t sq_entries;	/* ring requests, power of two (0: 4096) */
	uint32_t ncw;		/* CAM requests in flight at most, power of two, at most
				 * sq_entries (0: sq_entries) */
	uint32_t flags;		/* GS_CUDA_* */
	size_t buf_bytes;	/* pinned GPU-mapped data region (0: 64 MiB) */
	uint64_t dev_off;	/* block 0's device byte offset (no extents) */
	uint64_t nblocks;	/* addressable blocks (0: to the device's end) */
	const struct gs_cam_ext *ext;	/* or an extent table (copied) */
	uint32_t next;
	int device;		/* CUDA device (0 default) */
	/*
	 * Rings (shards), each with its own tickets, collector and (in-process)
	 * poller attention; a lane issues on the ring of its SM.  sq_entries and
	 * ncw are per ring; all rings address the one region.  0: one ring per
	 * 16 SMs of the device, a power of two up to 16 (1 below 32 SMs, 8 on a
	 * 132-SM H100); at most GS_CUDA_MAX_RINGS.  gs_cuda_attach() keeps CAM
	 * on one ring (the attach protocol gives each ring its own region).
	 */
	uint32_t nrings;
};

#define GS_CUDA_MAX_RINGS	GS_CAM_MAX_SHARDS

/* Rings + region over @q, served by its pollers (in-process mode). */
int gs_cuda_open(struct gs_cuda **cp, struct gs_q *q, const struct gs_cuda_params *p);
/*
 * Attach to a running gstorefs and open the array file @path on it (a path
 * under the mount point): rings and region come from the daemon in shared
 * memory, the daemon's pollers serve them.
 */
int gs_cuda_attach(struct gs_cuda **cp, const char *path, const struct gs_cuda_params *p);
/*
 * gs_cuda_attach() over connection @a, which the caller made and got its
 * objects' extents on (gs_attach_open(), gs_attach_graph()): @p names the
 * extents (p->ext, p->next, p->nblocks, in p->block_size units; copied) as
 * for gs_cuda_open().  The handle owns @a from here, even on failure, and
 * closes it with itself.
 */
int gs_cuda_attach_conn(struct gs_cuda **cp, struct gs_attach *a, const struct gs_cuda_params *p);
void gs_cuda_close(struct gs_cuda *c);

/* The queue to pass to kernels (a device pointer). */
struct gs_cam *gs_cuda_cam(struct gs_cuda *c);
/* The pinned region: one address for the host and the GPU (UVA). */
void *gs_cuda_buf(struct gs_cuda *c, size_t *len);
uint32_t gs_cuda_block_size(struct gs_cuda *c);
uint64_t gs_cuda_nblocks(struct gs_cuda *c);
/* The CAM rings (shards) the handle has. */
uint32_t gs_cuda_nrings(struct gs_cuda *c);
/* The ring count gs_cuda_open() picks for CUDA device @device (nrings 0). */
uint32_t gs_cuda_default_nrings(int device);
/* The sticky first error of the queue's requests (0 or -errno). */
int gs_cuda_error(struct gs_cuda *c);

/* ---- BaM: a GPU-cached array ---- */
enum { GS_BAM_RING = 0, GS_BAM_NVME = 1 };

struct gs_swnvme;

struct gs_cuda_array_params {
	size_t cache_bytes;	/* GPU memory for lines (0: 256 MiB) */
	uint32_t nio;		/* misses in flight, power of two (0: 4096) */
	int backend;		/* GS_BAM_RING (default) or GS_BAM_NVME */
	/* GS_BAM_NVME over the software controller (its BAR must be pinned,
	 * GPU-mapped memory: cudaHostAlloc(cudaHostAllocMapped)); lines are 4 KiB
	 * and the array spans the namespace.  gstore_nvme.ko queues: not yet. */
	struct gs_swnvme *swnvme;
	uint32_t nvme_queues;	/* queue pairs, qids 1.. (0: 4) */
	uint32_t nvme_slots;	/* commands in flight per queue, power of two (0: 1024) */
	/* GS_BAM_RING: miss rings, a power of two, nio split evenly among them
	 * (0: one per 16 SMs if the gs_cuda's own count was left to its default,
	 * else that count rounded up to a power of two; fewer when
	 * a ring would get under 32 slots, and on an attached handle at most a
	 * quarter of the connection's 16 rings still free).  A missing lane
	 * uses the ring of its SM. */
	uint32_t nrings;
};

/*
 * A cache over @c's blocks (line = block); @c must outlive it.  With
 * GS_BAM_NVME, @c may be NULL (the array is the whole namespace).
 */
int gs_cuda_array_open(struct gs_cuda_array **ap, struct gs_cuda *c,
		       const struct gs_cuda_array_params *p);
/* Write back dirty lines and flush the device; no kernel may write meanwhile. */
int gs_cuda_array_flush(struct gs_cuda_array *a);
/* Drop every clean line (after the storage changed under the cache). */
int gs_cuda_array_invalidate(struct gs_cuda_array *a);
void gs_cuda_array_close(struct gs_cuda_array *a);
struct gs_bam *gs_cuda_array_dev(struct gs_cuda_array *a);
int gs_cuda_array_error(struct gs_cuda_array *a);

struct gs_cuda_array_stats {
	uint64_t misses, evictions, writebacks, busy_waits;
};
int gs_cuda_array_stats(struct gs_cuda_array *a, struct gs_cuda_array_stats *st);

/* One line of counters (ring heads and tails, tickets, cache events) for
 * diagnosing a stuck kernel; safe while kernels run.  Returns its length. */
int gs_cuda_debug(struct gs_cuda *c, char *buf, size_t len);
int gs_cuda_array_debug(struct gs_cuda_array *a, char *buf, size_t len);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

/* ---- device API ---- */
#if defined(__CUDACC__)

/*
 * CAM: read blocks block_ids[0..n) into dst + i * block size (dst in the
 * region of gs_cuda_buf()).  Any thread may call; the requests go out now,
 * on the ring of the caller's SM (gstore_cuda_cam.h, "Shards"), and
 * complete asynchronously.
 */
static inline __device__ int gs_prefetch(struct gs_cam *q, const uint64_t *block_ids,
					  uint32_t n, void *dst)
{
	return gs_cam_blocks(gs_cam_self(q), GS_OP_READ, block_ids, n, dst);
}

/*
 * The same for one block per thread, with the warp's requests issued
 * together: every active lane calls it (each with its own id and dst); one
 * lane takes the warp's tickets with one atomic on each counter of its SM's
 * ring.  Returns this lane's 0 or -errno, as gs_prefetch(); *ticket (if not
 * NULL) gets the request's ticket for gs_prefetch_wait() (UINT64_MAX when
 * none was issued).  A block over two extents takes a request per device
 * run, all under the one ticket.
 */
static inline __device__ int gs_prefetch_warp(struct gs_cam *q, uint64_t block_id, void *dst,
					       uint64_t *ticket)
{
	unsigned am = __activemask();
	uint64_t bs = 1ull << q->block_shift;
	uint64_t off = (uint64_t)((const char *)dst - q->buf);
	int lane = threadIdx.x & 31, ret = 0, first = __ffs(am) - 1;
	uint32_t np = 0, covered = 0, pre = 0, tot;
	/* one shard for the whole warp: the first lane's SM */
	uint32_t key = __shfl_sync(am, gs_cam_key(), first);
	struct gs_cam *s = gs_cam_shard(q, key);

	if ((const char *)dst < q->buf || off > q->buf_len || bs > q->buf_len - off) {
		ret = -GS_EINVAL;
	} else {
		np = gs_cam_npieces(s, block_id, &covered);
		if (!np)
			ret = -GS_ERANGE;
	}
	if (ret)
		gs_cam_fail(s, ret);
	unsigned vm = __ballot_sync(am, np != 0);
	int leader = __ffs(vm) - 1;
	uint64_t t = 0, sq = 0;

	if (ticket)
		*ticket = UINT64_MAX;
	if (!vm)
		return ret;
	if (!__any_sync(am, np > 1)) {	/* one request per lane: ranks by ballot */
		tot = __popc(vm);
		pre = __popc(vm & ((1u << lane) - 1));
	} else {	/* a lane over extents: sum and prefix over the lanes */
		tot = 0;
		for (unsigned m = am; m; m &= m - 1) {
			int j = __ffs(m) - 1;
			uint32_t v = __shfl_sync(am, np, j);

			tot += v;
			if (j < lane)
				pre += v;
		}
	}
	if (lane == leader) {
		t = gs_cam_reserve(s, tot);
		sq = gs_cam_sq_reserve(s, tot);
	}
	t = __shfl_sync(am, t, leader);
	sq = __shfl_sync(am, sq, leader);
	if (np) {
		uint32_t boff, len;
		uint64_t dev;

		if (covered < bs) {
			gs_cam_zero((char *)dst, (uint32_t)bs);
			/* system fence: the zeros land before the reads' data */
			__threadfence_system();
		}
		for (uint32_t k = 0; k < np && gs_cam_piece(s, block_id, k, &dev, &boff, &len);
		     k++) {
			struct gs_sqe e = GS_ZERO;

			e.op = GS_OP_READ;
			e.flags = GS_SQE_CQE | GS_SQE_BUF_OFF;
			e.len = len;
			e.off = dev;
			e.buf = off + boff;
			e.tag = t + pre + k;
			gs_cam_push_at(s, sq + pre + k, &e, pre + k == tot - 1);
		}
		if (ticket)
			*ticket = gs_cam_ticket(s, t + pre, np);
	}
	/* the group's requests are all in the ring before any lane goes on to
	 * wait (no lane may spin on a request a mate has yet to push), and the
	 * group leaves together */
	__syncwarp(am);
	return ret;
}

/*
 * Wait for this thread's own request (a ticket from gs_prefetch_warp()),
 * not for everything issued before, as gs_prefetch_sync() does: a slow
 * request holds up its own warp only.  The lanes that call it together wait
 * together, meeting at a warp barrier each round while the lowest of them
 * collects completions (on the ring of the lowest lane still waiting, so
 * that every lane's ring is served), and leave together: no lane spins on a
 * path of its own while a mate (holding the collector's lock, or a ring
 * slot it has yet to fill) waits to be scheduled; a GPU need not run such a
 * mate, and the kernel hangs.  Returns 0 or -errno.
 */
static inline __device__ int gs_prefetch_wait(struct gs_cam *q, uint64_t ticket)
{
	unsigned am = __activemask();
	int lane = threadIdx.x & 31, leader = __ffs(am) - 1;
	uint32_t ns = 64, np = 0, k = 0, sid = 0;
	int64_t res = 0, r;
	uint64_t t = 0;
	int done = ticket == UINT64_MAX;
	struct gs_cam *s = q;

	if (!done) {
		s = gs_cam_ticket_decode(q, ticket, &t, &np);
		sid = s->shard_id;
	}
	while (!__all_sync(am, done)) {
		/* this lane's requests in order; each one looked at once per round */
		while (!done && gs_cam_ticket_done(s, t + k, &r)) {
			if (r < 0 && !res)
				res = r;
			done = ++k == np;
		}
		unsigned wm = __ballot_sync(am, !done);
		uint32_t w = wm ? __shfl_sync(am, sid, __ffs(wm) - 1) : 0;

		if (lane == leader && wm)
			gs_cam_wait_step(gs_cam_nth(q, w), &ns);
	}
	__syncwarp(am);
	/* system fence: data the pollers wrote is visible to our later loads */
	gs_fence();
	if (ticket == UINT64_MAX)
		return gs_cam_err_all(q);
	return res < 0 ? (int)res : 0;
}

/*
 * Wait until every request issued on @q before the call (by any thread, on
 * any of its rings) has completed.  Threads that read the data must call
 * it too, or be ordered after a caller by __syncthreads() in the same
 * block.  One lane per warp polls; the others wait at the warp barrier.
 */
static inline __device__ int gs_prefetch_sync(struct gs_cam *q)
{
	unsigned am = __activemask();
	int lane = threadIdx.x & 31, leader = __ffs(am) - 1, ret = 0;

	if (lane == leader)
		ret = gs_cam_sync_all(q);
	ret = __shfl_sync(am, ret, leader);
	/* system fence: this lane's later loads see what the leader waited for */
	__threadfence_system();
	return ret;
}

/* CAM: write blocks block_ids[0..n) from src + i * block size. */
static inline __device__ int gs_write_back(struct gs_cam *q, const uint64_t *block_ids,
					    uint32_t n, const void *src)
{
	/* system fence: the data (ours, and the block's after __syncthreads) first */
	__threadfence_system();
	return gs_cam_blocks(gs_cam_self(q), GS_OP_WRITE, block_ids, n, src);
}

/* Wait for every earlier request (any ring), then flush the device: durable on 0. */
static inline __device__ int gs_write_back_sync(struct gs_cam *q)
{
	unsigned am = __activemask();
	int lane = threadIdx.x & 31, leader = __ffs(am) - 1, ret = 0;

	if (lane == leader)
		ret = gs_cam_flush_all(q);
	return __shfl_sync(am, ret, leader);
}

/*
 * BaM element access.  Lanes of a warp that touch the same line share one
 * lookup (and at most one miss): the lowest lane of each group takes the
 * reference and passes the slot on with __shfl_sync.  On a failed miss the
 * value reads as 0 and the error is kept in the array.
 */
/*
 * The warp-level access: group leaders call gs_bam_get_try() round after
 * round, every active lane meeting at __any_sync() each round, until every
 * group is served.  A group whose leader got its line uses it and drops the
 * reference within the same round, so no lane holds a line while it waits
 * for others (a small cache cannot be pinned full by waiting warps), and a
 * lane that fills or evicts a page finishes inside its round even while
 * lanes of its own warp wait for that page: no lane spins on a lane of its
 * warp.  @op(line_bytes) does the access.
 */
template <typename F>
static inline __device__ void gs_array_access(struct gs_bam *a, uint64_t byte, int dirty, F op)
{
	uint64_t page = byte >> a->line_shift;
	uint32_t off = (uint32_t)(byte & ((1u << a->line_shift) - 1)), slot = GS_BAM_RETRY;
	unsigned am = __activemask();
	unsigned grp = __match_any_sync(am, page);
	int lane = threadIdx.x & 31, leader = __ffs(grp) - 1, done = 0;
	uint32_t ns = 32;

	if (page >= a->npages)
		gs_bam_fail(a, -GS_ERANGE);	/* every lane still takes part below */
	for (;;) {
		if (!done && lane == leader)
			slot = page < a->npages ? gs_bam_get_try(a, page, dirty) : GS_BAM_NOSLOT;
		uint32_t s = __shfl_sync(grp, slot, leader);

		if (!done && s != GS_BAM_RETRY) {	/* the whole group is here */
			if (s != GS_BAM_NOSLOT)
				op(gs_bam_line(a, s) + off);
			__syncwarp(grp);
			if (lane == leader && s != GS_BAM_NOSLOT)
				gs_bam_put(a, page);
			done = 1;
		}
		if (!__any_sync(am, !done))
			break;
		if (!done && lane == leader)
			gs_d_backoff(&ns);
	}
	__syncwarp(am);
}

/*
 * Warp-level line access: every active lane passes the same @line (a page
 * index); the warp takes one reference and op(line bytes) runs on every
 * lane, which reads (or, with @dirty, writes) its share of the line: one
 * lookup per line instead of one per element, for sweeps over hot data.
 */
template <typename F>
static inline __device__ void gs_array_line(struct gs_bam *a, uint64_t line, int dirty, F op)
{
	gs_array_access(a, line << a->line_shift, dirty, op);
}

template <typename T>
static inline __device__ T gs_array_get(struct gs_bam *a, uint64_t i)
{
	T v = 0;

	gs_array_access(a, i * sizeof(T), 0, [&](char *p) { v = *(const T *)p; });
	return v;
}

template <typename T>
static inline __device__ void gs_array_set(struct gs_bam *a, uint64_t i, T v)
{
	gs_array_access(a, i * sizeof(T), 1, [&](char *p) { *(T *)p = v; });
}

static inline __device__ uint64_t gs_array_get_u64(struct gs_bam *a, uint64_t i)
{
	return gs_array_get<uint64_t>(a, i);
}

static inline __device__ void gs_array_set_u64(struct gs_bam *a, uint64_t i, uint64_t v)
{
	gs_array_set<uint64_t>(a, i, v);
}

static inline __device__ uint32_t gs_array_get_u32(struct gs_bam *a, uint64_t i)
{
	return gs_array_get<uint32_t>(a, i);
}

static inline __device__ void gs_array_set_u32(struct gs_bam *a, uint64_t i, uint32_t v)
{
	gs_array_set<uint32_t>(a, i, v);
}

/*
 * Write back the dirty lines: every thread of a grid calls it (no writer may
 * run meanwhile); then one thread may call gs_array_flush_device() after a
 * grid-wide barrier, or the host calls gs_cuda_array_flush().
 */
static inline __device__ int gs_array_flush(struct gs_bam *a)
{
	uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;

	return gs_bam_flush_slots(a, tid, nthreads);
}

static inline __device__ int gs_array_flush_device(struct gs_bam *a)
{
	if (a->nvme_nq) {
		int64_t r = gs_bam_nvme_io(a, GS_OP_FLUSH, 0, 0, 0);

		if (r < 0)
			gs_bam_fail(a, r);
		return r < 0 ? (int)r : 0;
	}
	return gs_cam_flush_all(a->cam);
}

#endif /* __CUDACC__ */
#endif /* GSTORE_CUDA_H */
