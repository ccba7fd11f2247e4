// SPDX-License-Identifier: MIT
/*
 * gs_cuda_gather() (include/gstore_cuda_gather.h): rows of a fixed size
 * gathered by index into one GPU buffer, through CAM requests into the
 * gs_cuda's pinned region and a host-memory tier filled in the background.
 * The planning arithmetic is gather_plan.h's (tested on the CPU).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <liburing.h>

#include "gstore_cuda.h"
#include "gstore_cuda_gather.h"
#include "cuda_internal.cuh"
#include "gather_plan.h"

extern "C" {
#include "gs_log.h"
}

#define DEF_RUN		32u
#define DEF_THREADS	16384u
#define DEF_CHUNK	(4u << 20)
#define DEF_DEPTH	8u
#define COPY_WARPS	8	/* warps per block of the copy kernel */

/* device counters */
struct gstat {
	unsigned long long rows, tier_rows, blocks, requests, bytes, hits;
	long long err;
};

/* one of the two pieces in flight: a stream, its scratch, a half of the region */
struct gslot {
	cudaStream_t s;
	cudaEvent_t done;
	uint64_t *keys, *sorted, *uniq;
	unsigned long long *nuniq;
	void *tmp;
	size_t tmp_bytes;
	uint64_t half_off;	/* region byte offset of this slot's half */
	/* the GPU cache (nlines 0: none): the lines are both slots', the
	 * elections and hits each slot's own */
	uint32_t nlines;
	uint32_t *hit;		/* per unique block: its line + 1, 0 on a miss */
	uint32_t *owner;	/* per line: the lowest miss of this piece to fill it, or ~0 */
	uint64_t *ctag;		/* per line: its block, CTAG_EMPTY or CTAG_BUSY */
	uint32_t *cref;		/* per line: hit since the last miss that wanted it */
	uint32_t *pin;		/* per line: pieces between their lookup and their copy */
	char *cdata;
	int cache_owner;	/* slot 0 allocated the shared arrays */
};

#define CTAG_EMPTY	UINT64_MAX
#define CTAG_BUSY	(UINT64_MAX - 1)	/* being filled */

struct gs_cuda_gather {
	struct gs_cuda *c;
	struct gs_gather_geom geom;
	struct gs_cam *dcam;
	char *region;		/* device view of the pinned region */
	uint64_t max_rows;
	uint32_t max_run, threads;
	struct gslot sl[2];
	unsigned next;
	cudaEvent_t fork;
	struct gstat *st;	/* device */
	uint64_t calls;
	uint64_t *tail0;	/* each ring's CAM tickets at open (rings used) */
	/* the host tier */
	struct gs_gather_tier_geom tier;
	char *tier_buf;		/* host = device address (checked per chunk) */
	size_t tier_map;
	uint32_t *ready, *dready;	/* pinned flags, host and device views */
	char *reg[256];		/* the registered stretches (tier_pin()) */
	uint32_t nreg, reg_end;	/* chunks [0, reg_end) are registered */
	pthread_t pin;
	int pin_started, pin_done, pin_err;
	int fd, device;
	uint64_t file_off;
	uint32_t depth;
	pthread_t fill;
	int fill_started;
	volatile int stop, fill_done;
	uint64_t filled, read_bytes;
	double t0, t1;
	int tier_err;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static __device__ void set_err(struct gstat *st, long long e)
{
	atomicCAS((unsigned long long *)&st->err, 0ull, (unsigned long long)e);
}

/* ---- kernels ---- */

static __global__ void plan_kernel(struct gs_gather_geom g, const uint64_t *rows, uint64_t n,
				   struct gs_gather_tier_geom t, const uint32_t *ready, int tier_all,
				   uint64_t *keys, struct gstat *st)
{
	uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long in_tier = 0;

	if (i < n) {
		uint64_t r = rows[i];
		int bad = r >= g.nrows, skip = bad;

		if (bad)
			set_err(st, -ERANGE);
		else if (t.nchunks) {
			uint64_t off = gs_gather_row_off(&g, r);

			skip = tier_all ? off + g.row_bytes <= t.len :
				gs_gather_tier_has(&t, ready, off, g.row_bytes);
			in_tier = skip;
		}
		gs_gather_row_keys(&g, r, skip, keys + i * g.maxb);
	}
	unsigned m = __ballot_sync(0xffffffffu, in_tier);

	if ((threadIdx.x & 31) == 0 && m)
		atomicAdd(&st->tier_rows, (unsigned long long)__popc(m));
}

/*
 * A warp's requests at once (as gs_prefetch_warp(), with a length): lanes
 * with @have read @nblk blocks from @blk into region offset @buf_off, on the
 * ring of the warp's SM (a gs_cuda's rings share its region: the offsets
 * mean the same on each), so that a piece's warps spread over every ring's
 * tickets and collector instead of all contending for the first.  *ticket:
 * gs_prefetch_wait()'s (it names the ring).
 */
static __device__ int issue_warp(struct gs_cam *q, int have, uint64_t blk, uint32_t nblk,
				 uint64_t buf_off, uint64_t *ticket)
{
	unsigned am = __activemask();
	struct gs_cam *sh = gs_cam_shard(q, __shfl_sync(am, gs_cam_key(), __ffs(am) - 1));
	int64_t dev = have ? gs_cam_dev_off(sh, blk) : -1;
	int lane = threadIdx.x & 31, ret = 0;
	uint64_t t = 0, s = 0;

	if (have && dev < 0) {
		gs_cam_fail(sh, dev);
		ret = (int)dev;
	}
	unsigned vm = __ballot_sync(am, have && dev >= 0);
	uint32_t n = __popc(vm), rank = __popc(vm & ((1u << lane) - 1));
	int leader = __ffs(vm) - 1;

	*ticket = UINT64_MAX;
	if (!vm)
		return ret;
	if (lane == leader) {
		t = gs_cam_reserve(sh, n);
		s = gs_cam_sq_reserve(sh, n);
	}
	t = __shfl_sync(am, t, leader);
	s = __shfl_sync(am, s, leader);
	if (have && dev >= 0)
		*ticket = gs_gather_push(sh, t + rank, s + rank, (uint64_t)dev, nblk, buf_off,
					 rank == n - 1);
	/* every request of the warp is in the ring before any lane waits */
	__syncwarp(am);
	return ret;
}

/* The unique blocks' runs: one request per run head, each lane waits for its own. */
static __global__ void issue_kernel(struct gs_cam *q, const uint64_t *u, const uint32_t *hit,
				    const unsigned long long *nuniq, uint64_t half_off,
				    uint32_t maxrun, uint64_t sentinel, struct gstat *st)
{
	uint64_t n = *nuniq;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;
	unsigned long long blocks = 0, reqs = 0, bytes = 0;

	/* whole warps per round: the warp-wide calls below see every lane */
	for (uint64_t base = warp * 32; base < n; base += nwarps * 32) {
		uint64_t i = base + lane, tk;
		uint32_t len = gs_gather_run(q, u, hit, n, i, maxrun, sentinel);
		int ret;

		if (i < n && gs_gather_want(u, hit, i, sentinel))
			blocks++;
		ret = issue_warp(q, len > 0, len ? u[i] : 0, len, half_off + (i << q->block_shift),
				 &tk);
		if (len && !ret) {
			reqs++;
			bytes += (unsigned long long)len << q->block_shift;
		}
		if (ret)
			set_err(st, ret);
		ret = gs_prefetch_wait(q, tk);
		if (ret && tk != UINT64_MAX)
			set_err(st, ret);
	}
	atomicAdd(&st->blocks, blocks);
	atomicAdd(&st->requests, reqs);
	atomicAdd(&st->bytes, bytes);
}

/*
 * The GPU cache, shared by the two slots' pieces, which run concurrently: a
 * hit pins its line (pin, then the tag again: an insert that took the line
 * meanwhile either sees the pin or has changed the tag), so that no insert
 * overwrites it before this piece's copy; the lowest miss of a line in this
 * piece is elected to fill it.
 */
static __global__ void lookup_kernel(const uint64_t *u, const unsigned long long *nuniq,
				     uint64_t sentinel, const uint64_t *ctag, uint32_t *cref,
				     uint32_t *pin, uint32_t nlines, uint32_t *hit, uint32_t *owner,
				     struct gstat *st)
{
	uint64_t n = *nuniq;
	unsigned long long hits = 0;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint32_t h = 0;

		if (u[i] < sentinel) {
			uint32_t l = gs_gather_cache_line(u[i], nlines);

			if (*(volatile const uint64_t *)&ctag[l] == u[i]) {
				atomicAdd(&pin[l], 1u);
				/* the pin before the re-read (an insert: its tag, then the pin) */
				__threadfence();
				if (*(volatile const uint64_t *)&ctag[l] == u[i]) {
					h = l + 1;
					hits++;
					*(volatile uint32_t *)&cref[l] = 1;
				} else {
					atomicSub(&pin[l], 1u);
				}
			}
			if (!h)
				atomicMin(&owner[l], (uint32_t)i);
		}
		hit[i] = h;
	}
	if (hits)
		atomicAdd(&st->hits, hits);
}

/*
 * After the copy: the hits unpin their lines; each elected miss moves its
 * block from the region into its line, unless the line was hit since the
 * last miss that wanted it (second chance, as a clock: one cold row does not
 * push out a hub), another insert holds it, or a piece has it pinned.
 */
static __global__ void insert_kernel(const uint64_t *u, const unsigned long long *nuniq,
				     uint64_t sentinel, const uint32_t *hit, uint64_t *ctag,
				     uint32_t *cref, uint32_t *pin, char *cdata, uint32_t nlines,
				     uint32_t *owner, const char *half, uint32_t shift)
{
	uint64_t n = *nuniq, w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t i = w; i < n; i += nw) {
		if (u[i] >= sentinel)
			continue;
		if (hit[i]) {	/* this piece's copy is done with the line */
			if (!lane)
				atomicSub(&pin[hit[i] - 1], 1u);
			continue;
		}
		uint32_t l = gs_gather_cache_line(u[i], nlines);

		if (owner[l] != (uint32_t)i)
			continue;	/* the same for every lane: the warp stays together */
		__syncwarp();
		int go = 0;

		if (!lane) {
			unsigned long long cur = *(volatile unsigned long long *)&ctag[l];

			owner[l] = UINT32_MAX;	/* for this slot's next piece */
			if (cur != CTAG_EMPTY && cur != CTAG_BUSY && *(volatile uint32_t *)&cref[l]) {
				*(volatile uint32_t *)&cref[l] = 0;	/* its second chance */
			} else if (cur != CTAG_BUSY &&
				   atomicCAS((unsigned long long *)&ctag[l], cur, CTAG_BUSY) == cur) {
				/* the tag before the pin check (a lookup: its pin, then the tag) */
				__threadfence();
				if (*(volatile uint32_t *)&pin[l])
					*(volatile unsigned long long *)&ctag[l] = cur;	/* in use */
				else
					go = 1;
			}
		}
		go = __shfl_sync(0xffffffffu, go, 0);
		if (go) {
			const uint4 *src = (const uint4 *)(half + (i << shift));
			uint4 *dst = (uint4 *)(cdata + ((uint64_t)l << shift));

			for (uint32_t o = lane; o < (1u << shift) / 16; o += 32)
				dst[o] = __ldcv(src + o);
			/* the line's bytes before its tag */
			__threadfence();
			__syncwarp();
			if (!lane) {
				*(volatile uint32_t *)&cref[l] = 0;
				*(volatile unsigned long long *)&ctag[l] = u[i];
			}
		}
		__syncwarp();
	}
}

/* @src: the pinned region (loads that never hit a stale cached line) or the tier */
template <typename T, bool CV>
static __device__ void copy_lanes(char *dst, const char *src, uint64_t bytes, int lane)
{
	for (uint64_t o = (uint64_t)lane * sizeof(T); o < bytes; o += 32 * sizeof(T)) {
		T v;

		if (CV)
			v = __ldcv((const T *)(src + o));
		else
			v = *(const T *)(src + o);
		*(T *)(dst + o) = v;
	}
}

template <bool CV>
static __device__ void copy_row(char *dst, const char *src, uint64_t bytes, int lane)
{
	uint64_t a = (uint64_t)dst | (uint64_t)src | bytes;

	if (!(a & 15))
		copy_lanes<uint4, CV>(dst, src, bytes, lane);
	else if (!(a & 3))
		copy_lanes<unsigned int, CV>(dst, src, bytes, lane);
	else
		for (uint64_t o = lane; o < bytes; o += 32)
			dst[o] = CV ? *(const volatile char *)(src + o) : src[o];
}

/* A warp per row: from the tier if it has the row, else from the region. */
static __global__ void copy_kernel(struct gs_gather_geom g, const uint64_t *rows, uint64_t n,
				   const uint64_t *u, const unsigned long long *nuniq,
				   const char *half, struct gs_gather_tier_geom t,
				   const uint32_t *ready, int tier_all, const char *tier, char *dst,
				   const uint32_t *hit, const char *cdata, struct gstat *st)
{
	uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (uint64_t)gridDim.x * blockDim.x / 32;
	uint64_t nu = u ? *nuniq : 0;
	int lane = threadIdx.x & 31;

	for (uint64_t i = w; i < n; i += nw) {
		uint64_t r = rows[i], off;
		char *d = dst + i * g.row_bytes;

		if (r >= g.nrows) {
			if (!lane)
				set_err(st, -ERANGE);
			continue;
		}
		off = gs_gather_row_off(&g, r);
		/* ready flags only turn on: a row planned from the tier is there still */
		if (t.nchunks && (tier_all ? off + g.row_bytes <= t.len :
				  gs_gather_tier_has(&t, ready, off, g.row_bytes)))
			copy_row<false>(d, tier + off, g.row_bytes, lane);
		else if (u && hit) {
			/* block by block: each from the cache or the region */
			for (uint64_t b = off >> g.block_shift;
			     b <= (off + g.row_bytes - 1) >> g.block_shift; b++) {
				uint64_t lo, hi, k = gs_gather_find(u, nu, b);
				uint64_t in = 0;

				gs_gather_seg(off, g.row_bytes, b, g.block_shift, &lo, &hi);
				in = lo - (b << g.block_shift);
				if (hit[k])	/* written by either slot's inserts */
					copy_row<true>(d + (lo - off), cdata +
							((uint64_t)(hit[k] - 1) << g.block_shift) + in,
							hi - lo, lane);
				else
					copy_row<true>(d + (lo - off), half + (k << g.block_shift) + in,
						       hi - lo, lane);
			}
		} else if (u)
			copy_row<true>(d, half + gs_gather_row_src(&g, u, nu, r), g.row_bytes, lane);
		else if (!lane)
			set_err(st, -EIO);	/* planned from the tier, not there: a bug */
	}
	if (!blockIdx.x && !threadIdx.x)
		atomicAdd(&st->rows, (unsigned long long)n);
}

/* ---- the host tier's fill ---- */

/*
 * Pin the tier's next stretch, ahead of its reads: the GPU addresses it at
 * its host address (UVA).  Stretches double (1, 1, 2, 4 .. chunks, up to
 * 512 MiB): the pinning overlaps the reads in flight, and there are few
 * calls (a cudaHostRegister may wait for the device's work).
 */
static int tier_pin(struct gs_cuda_gather *g)
{
	struct gs_gather_tier_geom *t = &g->tier;
	uint32_t k = g->reg_end, cap = (uint32_t)((512ull << 20) >> t->chunk_shift);
	uint32_t u = k ? k : 1;
	char *p = g->tier_buf + ((uint64_t)k << t->chunk_shift);
	void *dp = NULL;
	int ret;

	u = u < cap ? u : (cap ? cap : 1);
	u = u < t->nchunks - k ? u : t->nchunks - k;
	if (g->nreg == sizeof(g->reg) / sizeof(g->reg[0]))
		return -ENOSPC;	/* not with doubling stretches under 2^32 chunks */
	ret = gs_cuda_err(cudaHostRegister(p, (size_t)u << t->chunk_shift,
					   cudaHostRegisterMapped | cudaHostRegisterPortable),
			  "tier register");
	if (ret)
		return ret;
	g->reg[g->nreg++] = p;
	if (cudaHostGetDevicePointer(&dp, p, 0) != cudaSuccess || dp != p)
		return -EOPNOTSUPP;	/* no UVA for registered memory */
	pthread_mutex_lock(&g->mu);
	g->reg_end = k + u;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

/* The pinner: stretch after stretch ahead of the fill's reads (pinning runs
 * at several GB/s, the reads at the disk's speed: it stays ahead). */
static void *pin_main(void *arg)
{
	struct gs_cuda_gather *g = (struct gs_cuda_gather *)arg;
	int ret = 0;

	cudaSetDevice(g->device);
	while (!ret && !g->stop && g->reg_end < g->tier.nchunks)
		ret = tier_pin(g);
	pthread_mutex_lock(&g->mu);
	g->pin_err = ret;
	g->pin_done = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

/* Wait until chunk @k is pinned: 0, or the pinner's error. */
static int tier_pinned(struct gs_cuda_gather *g, uint32_t k)
{
	int ret = 0;

	pthread_mutex_lock(&g->mu);
	while (k >= g->reg_end && !g->pin_done)
		pthread_cond_wait(&g->cv, &g->mu);
	if (k >= g->reg_end)
		ret = g->pin_err ? g->pin_err : -ECANCELED;
	pthread_mutex_unlock(&g->mu);
	return ret;
}

static void *fill_main(void *arg)
{
	struct gs_cuda_gather *g = (struct gs_cuda_gather *)arg;
	struct gs_gather_tier_geom *t = &g->tier;
	struct io_uring ring;
	uint32_t next = 0, inflight = 0;
	int ret;

	cudaSetDevice(g->device);
	ret = io_uring_queue_init(g->depth, &ring, 0);
	if (ret < 0) {
		g->tier_err = ret;
		goto out;
	}
	/* after a stop, the reads in flight are reaped before the memory goes */
	while (inflight || (next < t->nchunks && !g->stop)) {
		while (inflight < g->depth && next < t->nchunks && !g->stop) {
			uint32_t k = next++;
			uint64_t len = gs_gather_tier_chunk_len(t, k);
			uint64_t rlen = (len + 4095) & ~4095ull;	/* O_DIRECT: whole pages */
			char *p = g->tier_buf + ((uint64_t)k << t->chunk_shift);
			struct io_uring_sqe *sqe;

			ret = tier_pinned(g, k);
			if (ret) {
				g->tier_err = ret;
				g->stop = 1;
				break;
			}
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, g->fd, p, (unsigned)rlen,
					   g->file_off + ((uint64_t)k << t->chunk_shift));
			io_uring_sqe_set_data64(sqe, k);
			inflight++;
		}
		io_uring_submit(&ring);
		if (!inflight)
			break;
		struct io_uring_cqe *cqe;

		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0) {
			g->tier_err = ret;
			break;
		}
		uint32_t k = (uint32_t)io_uring_cqe_get_data64(cqe);
		uint64_t len = gs_gather_tier_chunk_len(t, k);
		int64_t res = cqe->res;

		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		/* a short read (signal, the file's end inside the last page): the rest */
		while (res >= 0 && (uint64_t)res < len) {
			ssize_t r2 = pread(g->fd, g->tier_buf + ((uint64_t)k << t->chunk_shift) + res,
					   len - res, g->file_off + ((uint64_t)k << t->chunk_shift) + res);

			if (r2 <= 0) {
				res = r2 < 0 ? -errno : -EIO;
				break;
			}
			res += r2;
		}
		if (res < 0) {
			g->tier_err = (int)res;
			g->stop = 1;
			continue;	/* reap the others */
		}
		__atomic_add_fetch(&g->read_bytes, (len + 4095) & ~4095ull, __ATOMIC_RELAXED);
		/* release: the chunk's bytes before the flag the GPU reads */
		__atomic_store_n(&g->ready[k], 1u, __ATOMIC_RELEASE);
		__atomic_add_fetch(&g->filled, len, __ATOMIC_RELEASE);
	}
	io_uring_queue_exit(&ring);
out:
	g->t1 = mono_s();
	pthread_mutex_lock(&g->mu);
	g->fill_done = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static int tier_open(struct gs_cuda_gather *g, const struct gs_cuda_gather_params *p)
{
	uint64_t end = g->geom.base + g->geom.nrows * g->geom.row_bytes;
	uint32_t chunk = p->tier_chunk ? p->tier_chunk : DEF_CHUNK;
	int ret;

	if (chunk < 4096 || (chunk & (chunk - 1)) || p->tier_fd < 0)
		return -EINVAL;
	ret = gs_gather_tier_init(&g->tier, p->tier_bytes, end, 31 - __builtin_clz(chunk));
	if (ret)
		return ret;
	g->fd = p->tier_fd;
	g->file_off = p->tier_file_off;
	g->depth = p->tier_depth ? p->tier_depth : DEF_DEPTH;
	g->tier_map = (size_t)g->tier.nchunks << g->tier.chunk_shift;
	g->tier_buf = (char *)mmap(NULL, g->tier_map, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g->tier_buf == MAP_FAILED) {
		g->tier_buf = NULL;
		return -ENOMEM;
	}
	g->ready = (uint32_t *)gs_cuda_pinned_alloc((size_t)g->tier.nchunks * 4);
	if (!g->ready)
		return -ENOMEM;
	ret = gs_cuda_err(cudaHostGetDevicePointer((void **)&g->dready, g->ready, 0), "tier flags");
	if (ret)
		return ret;
	g->t0 = mono_s();
	ret = -pthread_create(&g->pin, NULL, pin_main, g);
	if (ret)
		return ret;
	g->pin_started = 1;
	ret = -pthread_create(&g->fill, NULL, fill_main, g);
	if (!ret)
		g->fill_started = 1;
	return ret;
}

static void tier_close(struct gs_cuda_gather *g)
{
	g->stop = 1;
	if (g->fill_started)
		pthread_join(g->fill, NULL);
	if (g->pin_started)
		pthread_join(g->pin, NULL);
	for (uint32_t i = 0; i < g->nreg; i++)
		cudaHostUnregister(g->reg[i]);
	if (g->tier_buf)
		munmap(g->tier_buf, g->tier_map);
	gs_cuda_pinned_free(g->ready);
}

/* ---- host API ---- */

/* Each ring's CAM tickets taken so far (@out: c->cs.n of them). */
static int ring_tails(struct gs_cuda *c, uint64_t *out)
{
	for (uint32_t k = 0; k < c->cs.n; k++) {
		int ret = gs_cuda_err(cudaMemcpy(&out[k], &c->cs.dcams[k].tail, 8,
						 cudaMemcpyDeviceToHost), "ring tickets");

		if (ret)
			return ret;
	}
	return 0;
}

static void slot_free(struct gslot *s)
{
	if (s->s)
		cudaStreamSynchronize(s->s);
	cudaFree(s->keys);
	cudaFree(s->sorted);
	cudaFree(s->uniq);
	cudaFree(s->nuniq);
	cudaFree(s->tmp);
	cudaFree(s->hit);
	cudaFree(s->owner);
	if (s->cache_owner) {
		cudaFree(s->ctag);
		cudaFree(s->cref);
		cudaFree(s->pin);
		cudaFree(s->cdata);
	}
	if (s->done)
		cudaEventDestroy(s->done);
	if (s->s)
		cudaStreamDestroy(s->s);
}

static int slot_init(struct gslot *s, uint64_t items, uint32_t key_bits)
{
	size_t sb = 0, ub = 0;
	int ret;

	if ((ret = gs_cuda_err(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking),
			       "gather stream")) ||
	    (ret = gs_cuda_err(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming),
			       "gather event")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->keys, items * 8), "gather keys")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->sorted, items * 8), "gather keys")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->uniq, items * 8), "gather keys")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->nuniq, 8), "gather count")))
		return ret;
	if ((ret = gs_cuda_err(cub::DeviceRadixSort::SortKeys(NULL, sb, s->keys, s->sorted,
							       (int)items, 0, (int)key_bits),
			       "sort size")) ||
	    (ret = gs_cuda_err(cub::DeviceSelect::Unique(NULL, ub, s->sorted, s->uniq, s->nuniq,
							  (int)items), "unique size")))
		return ret;
	s->tmp_bytes = sb > ub ? sb : ub;
	return gs_cuda_err(cudaMalloc(&s->tmp, s->tmp_bytes), "gather scratch");
}

/* The GPU cache for slot @s: @nlines lines of @bs bytes, shared with @share if given. */
static int slot_cache(struct gslot *s, uint64_t items, uint32_t nlines, uint32_t bs,
		      const struct gslot *share)
{
	int ret;

	s->nlines = nlines;
	if ((ret = gs_cuda_err(cudaMalloc(&s->hit, items * 4), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->owner, (size_t)nlines * 4), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMemset(s->owner, 0xff, (size_t)nlines * 4), "gather cache")))
		return ret;
	if (share) {
		s->ctag = share->ctag;
		s->cref = share->cref;
		s->pin = share->pin;
		s->cdata = share->cdata;
		return 0;
	}
	s->cache_owner = 1;
	if ((ret = gs_cuda_err(cudaMalloc(&s->ctag, (size_t)nlines * 8), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMemset(s->ctag, 0xff, (size_t)nlines * 8), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->cref, (size_t)nlines * 4), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMemset(s->cref, 0, (size_t)nlines * 4), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMalloc(&s->pin, (size_t)nlines * 4), "gather cache")) ||
	    (ret = gs_cuda_err(cudaMemset(s->pin, 0, (size_t)nlines * 4), "gather cache")))
		return ret;
	return gs_cuda_err(cudaMalloc(&s->cdata, (size_t)nlines * bs), "gather cache lines");
}

int gs_cuda_gather_open(struct gs_cuda_gather **gp, struct gs_cuda *c,
			const struct gs_cuda_gather_params *p)
{
	struct gs_cuda_gather *g;
	size_t blen;
	void *buf;
	uint32_t bs;
	uint64_t half;
	int ret;

	if (!gp || !c || !p)
		return -EINVAL;
	g = (struct gs_cuda_gather *)calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->c = c;
	g->fd = -1;
	g->device = c->p.device;
	bs = gs_cuda_block_size(c);
	ret = gs_gather_geom_init(&g->geom, p->row_bytes, p->base, p->nrows,
				  31 - __builtin_clz(bs), gs_cuda_nblocks(c));
	if (ret)
		goto fail;
	g->max_run = p->max_run ? p->max_run : DEF_RUN;
	g->threads = p->threads ? (p->threads + 127) & ~127u : DEF_THREADS;
	if ((uint64_t)g->max_run * bs > UINT32_MAX) {
		ret = -EINVAL;
		goto fail;
	}
	g->dcam = gs_cuda_cam(c);
	g->tail0 = (uint64_t *)calloc(c->cs.n, 8);
	if (!g->tail0) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = ring_tails(c, g->tail0);
	if (ret)
		goto fail;
	buf = gs_cuda_buf(c, &blen);
	half = (blen / 2) & ~(uint64_t)(bs - 1);
	g->max_rows = (half / bs) / g->geom.maxb;
	if (!g->max_rows) {
		ret = -EINVAL;	/* the region holds no row */
		goto fail;
	}
	if (g->max_rows * g->geom.maxb > INT32_MAX / 2)
		g->max_rows = INT32_MAX / 2 / g->geom.maxb;	/* cub counts in int */
	ret = gs_cuda_err(cudaHostGetDevicePointer((void **)&g->region, buf, 0), "region");
	if (ret)
		goto fail;
	if ((ret = gs_cuda_err(cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming),
			       "gather event")) ||
	    (ret = gs_cuda_err(cudaMalloc(&g->st, sizeof(*g->st)), "gather stats")) ||
	    (ret = gs_cuda_err(cudaMemset(g->st, 0, sizeof(*g->st)), "gather stats")))
		goto fail;
	for (int i = 0; i < 2; i++) {
		ret = slot_init(&g->sl[i], g->max_rows * g->geom.maxb, g->geom.key_bits);
		if (ret)
			goto fail;
		g->sl[i].half_off = i * half;
		if (p->cache_bytes / bs) {
			uint64_t nl = p->cache_bytes / bs;

			ret = slot_cache(&g->sl[i], g->max_rows * g->geom.maxb,
					 (uint32_t)(nl < UINT32_MAX - 1 ? nl : UINT32_MAX - 1), bs,
					 i ? &g->sl[0] : NULL);
			if (ret)
				goto fail;
		}
	}
	if (p->tier_bytes && (ret = tier_open(g, p)))
		goto fail;
	*gp = g;
	return 0;
fail:
	gs_cuda_gather_close(g);
	return ret;
}

void gs_cuda_gather_close(struct gs_cuda_gather *g)
{
	if (!g)
		return;
	tier_close(g);
	/* both slots idle before either frees: they share the GPU cache */
	for (int i = 0; i < 2; i++)
		if (g->sl[i].s)
			cudaStreamSynchronize(g->sl[i].s);
	for (int i = 1; i >= 0; i--)
		slot_free(&g->sl[i]);
	if (g->fork)
		cudaEventDestroy(g->fork);
	cudaFree(g->st);
	free(g->tail0);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
}

uint64_t gs_cuda_gather_max_rows(struct gs_cuda_gather *g)
{
	return g->max_rows;
}

static unsigned blocks_for(uint64_t threads, unsigned per)
{
	uint64_t b = (threads + per - 1) / per;

	return (unsigned)(b ? (b > 65535 ? 65535 : b) : 1);
}

/* One piece of at most max_rows rows on slot @s. */
static int gather_piece(struct gs_cuda_gather *g, struct gslot *s, const uint64_t *rows,
			uint64_t n, char *dst)
{
	struct gs_gather_geom *geo = &g->geom;
	uint64_t items = n * geo->maxb, end = geo->base + geo->nrows * geo->row_bytes;
	int tier_all = g->tier.nchunks && __atomic_load_n(&g->filled, __ATOMIC_ACQUIRE) ==
				g->tier.len;
	size_t tb = s->tmp_bytes;
	int ret;

	if (tier_all && g->tier.len >= end) {
		/* the tier holds the table: no planning, no reads */
		copy_kernel<<<blocks_for(n * 32, 32 * COPY_WARPS), 32 * COPY_WARPS, 0, s->s>>>(
			*geo, rows, n, NULL, NULL, NULL, g->tier, g->dready, 1, g->tier_buf, dst,
			NULL, NULL, g->st);
		return gs_cuda_err(cudaGetLastError(), "gather copy");
	}
	plan_kernel<<<blocks_for(n, 256), 256, 0, s->s>>>(*geo, rows, n, g->tier, g->dready,
							    tier_all, s->keys, g->st);
	if ((ret = gs_cuda_err(cudaGetLastError(), "gather plan")) ||
	    (ret = gs_cuda_err(cub::DeviceRadixSort::SortKeys(s->tmp, tb, s->keys, s->sorted,
							       (int)items, 0, (int)geo->key_bits,
							       s->s), "gather sort")) ||
	    (ret = gs_cuda_err(cub::DeviceSelect::Unique(s->tmp, tb, s->sorted, s->uniq, s->nuniq,
							  (int)items, s->s), "gather unique")))
		return ret;
	uint64_t th = items < g->threads ? (items + 31) & ~31ull : g->threads;
	uint32_t *hit = s->nlines ? s->hit : NULL;

	if (hit) {
		lookup_kernel<<<blocks_for(items, 256), 256, 0, s->s>>>(
			s->uniq, s->nuniq, geo->nblocks, s->ctag, s->cref, s->pin, s->nlines, hit,
			s->owner, g->st);
		if ((ret = gs_cuda_err(cudaGetLastError(), "gather lookup")))
			return ret;
	}
	issue_kernel<<<blocks_for(th, 128), 128, 0, s->s>>>(g->dcam, s->uniq, hit, s->nuniq,
							      s->half_off, g->max_run, geo->nblocks,
							      g->st);
	if ((ret = gs_cuda_err(cudaGetLastError(), "gather issue")))
		return ret;
	copy_kernel<<<blocks_for(n * 32, 32 * COPY_WARPS), 32 * COPY_WARPS, 0, s->s>>>(
		*geo, rows, n, s->uniq, s->nuniq, g->region + s->half_off, g->tier, g->dready,
		tier_all, g->tier_buf, dst, hit, s->cdata, g->st);
	if ((ret = gs_cuda_err(cudaGetLastError(), "gather copy")) || !hit)
		return ret;
	insert_kernel<<<blocks_for(items * 32, 256), 256, 0, s->s>>>(
		s->uniq, s->nuniq, geo->nblocks, hit, s->ctag, s->cref, s->pin, s->cdata,
		s->nlines, s->owner, g->region + s->half_off, geo->block_shift);
	return gs_cuda_err(cudaGetLastError(), "gather insert");
}

int gs_cuda_gather(struct gs_cuda_gather *g, const uint64_t *rows, uint64_t n, void *dst,
		   struct CUstream_st *stream)
{
	cudaStream_t us = (cudaStream_t)stream;
	int ret;

	if (!g || (n && (!rows || !dst)))
		return -EINVAL;
	if (!n)
		return 0;
	g->calls++;
	ret = gs_cuda_err(cudaEventRecord(g->fork, us), "gather fork");
	for (uint64_t off = 0; !ret && off < n; off += g->max_rows) {
		uint64_t m = n - off < g->max_rows ? n - off : g->max_rows;
		struct gslot *s = &g->sl[g->next++ & 1];

		/* the slot's stream runs its pieces in order: its half is free
		 * once the previous piece there is copied */
		if ((ret = gs_cuda_err(cudaStreamWaitEvent(s->s, g->fork, 0), "gather wait")) ||
		    (ret = gather_piece(g, s, rows + off, m, (char *)dst + off * g->geom.row_bytes)) ||
		    (ret = gs_cuda_err(cudaEventRecord(s->done, s->s), "gather done")))
			break;
		ret = gs_cuda_err(cudaStreamWaitEvent(us, s->done, 0), "gather join");
	}
	return ret;
}

int gs_cuda_gather_sync(struct gs_cuda_gather *g)
{
	long long err = 0;
	int ret = 0;

	for (int i = 0; i < 2 && !ret; i++)
		ret = gs_cuda_err(cudaStreamSynchronize(g->sl[i].s), "gather sync");
	if (!ret)
		ret = gs_cuda_err(cudaMemcpy(&err, &g->st->err, sizeof(err), cudaMemcpyDeviceToHost),
				  "gather error");
	if (!ret && err)
		ret = (int)err;
	if (!ret)
		ret = gs_cuda_error(g->c);
	return ret;
}

int gs_cuda_gather_stats(struct gs_cuda_gather *g, struct gs_cuda_gather_stats *st)
{
	struct gstat h;
	int ret = 0;

	for (int i = 0; i < 2 && !ret; i++)
		ret = gs_cuda_err(cudaStreamSynchronize(g->sl[i].s), "gather sync");
	if (!ret)
		ret = gs_cuda_err(cudaMemcpy(&h, g->st, sizeof(h), cudaMemcpyDeviceToHost),
				  "gather stats");
	if (ret)
		return ret;
	memset(st, 0, sizeof(*st));
	st->calls = g->calls;
	st->rows = h.rows;
	st->tier_rows = h.tier_rows;
	st->blocks = h.blocks;
	st->cache_hits = h.hits;
	st->requests = h.requests;
	st->bytes = h.bytes;
	st->tier_len = g->tier.len;
	st->tier_filled = __atomic_load_n(&g->filled, __ATOMIC_ACQUIRE);
	st->tier_read_bytes = __atomic_load_n(&g->read_bytes, __ATOMIC_RELAXED);
	if (g->tier.nchunks)
		st->tier_fill_s = (g->fill_done ? g->t1 : mono_s()) - g->t0;
	st->tier_err = g->tier_err;
	st->rings = g->c->cs.n;
	uint64_t t[GS_CAM_MAX_SHARDS];

	ret = ring_tails(g->c, t);
	for (uint32_t k = 0; !ret && k < g->c->cs.n; k++)
		st->rings_used += t[k] != g->tail0[k];
	return ret;
}

int gs_cuda_gather_tier_wait(struct gs_cuda_gather *g)
{
	if (!g->tier.nchunks)
		return 0;
	pthread_mutex_lock(&g->mu);
	while (!g->fill_done)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	return g->tier_err;
}
