// SPDX-License-Identifier: MIT
/*
 * Graph objects on the GPU (gstore_cuda_graph.h): the layout's GTT arrays
 * in GPU memory, pages read through a BaM page cache or by pass through
 * CAM, and the apps (BFS, CC, k-hop sampling) over them.
 *
 * A CAM pass: a kernel marks the blocks the pass needs (one byte per block
 * of the layout), the marks are compacted into a sorted list of distinct
 * blocks, the host cuts the list into chunks of half the staging region and
 * each chunk into requests (adjacent blocks of one extent, up to max_io),
 * a one-block kernel issues them (gs_cam_issue), a one-thread kernel waits
 * for them (retire), the chunk is copied into GPU memory, and a kernel
 * works on it page by page, a warp per page, while the next chunk's
 * requests are already in flight into the other half.  A page holds its
 * vertices' tuples, so it is processed without knowing which frontier
 * vertex asked for it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>

#include "gstore_cuda_graph.h"
#include "gstore_attach.h"
extern "C" {
#include "gs_log.h"
}

#define DEF_CACHE	(64u << 20)
#define DEF_STAGE	(32u << 20)
#define DEF_MAX_IO	(512u << 10)
#define DEF_NIO		1024u
#define WAIT_S		120.0	/* a pass that waits longer is stuck: say where, fail */
#define U32_NONE	UINT32_MAX

struct run {
	uint64_t dev, len, buf;
};

struct gs_cuda_graph {
	struct gs_graph *g;
	struct gs_q *q;
	struct gs_cuda_graph_params p;
	struct gs_graph_layout *l;
	struct gs_cuda *c;
	struct gs_cuda_array *a;
	struct gs_cam *cam;		/* device pointer */
	char *region;			/* pinned, two halves */
	size_t half;
	uint32_t max_io;
	struct gs_cgraph hv;		/* the device view, host copy */
	struct gs_cgraph *dv;		/* and in GPU memory */
	uint64_t *d_gtt[2][3];
	uint8_t *d_removed;
	uint8_t *d_vmap[2];
	uint8_t *d_stage;		/* one half, in GPU memory */
	uint8_t *d_need;		/* [nblocks] */
	uint8_t *d_need_bu;		/* [nblocks]: a BFS level's bottom-up pages */
	uint64_t *d_list;		/* [nblocks] */
	uint64_t *h_list;		/* pinned [nblocks] */
	uint64_t *cc_list;		/* host: every live block of direction 0, sorted */
	uint64_t ncc;
	struct run *h_runs, *d_runs;	/* two halves of runs_cap each */
	uint32_t runs_cap;
	int64_t *d_err;
	unsigned long long *d_cnt;	/* small counters */
	/* sampling scratch */
	uint32_t *d_pos_of;		/* [nv] node position, U32_NONE */
	uint64_t *d_first;		/* [nv] first edge that saw a vertex */
	uint64_t scap;			/* edges the scratch below holds */
	uint64_t *d_pick, *d_slot, *d_off;
	uint32_t *d_count, *d_flag, *d_fpos;
	void *d_tmp;			/* the scans' and the reduction's scratch */
	size_t tmp_bytes;
	/* the sampler's stream: highest priority, so that its blocks start
	 * ahead of queued blocks of the caller's other work (a gather's copy
	 * kernel waiting on I/O); blocking, so ordered with the legacy stream
	 * like the rest of the calls */
	cudaStream_t ss;
	/* attach mode (gs_cuda_graph_attach): the daemon's socket, the graph's
	 * path below the mount, the connection the next io_open() takes */
	char *sock, *rel;
	struct gs_attach *conn;
	uint32_t dev_max_io;
	/* this call's CAM traffic */
	uint64_t bytes, reqs;
	uint32_t passes, bottom_up;
	const char *phase;
};

static int cu(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	gs_err("cuda graph: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

#define CU(x)                                                                        \
	do {                                                                         \
		ret = cu((x), #x);                                                   \
		if (ret)                                                             \
			goto out;                                                    \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gs_cuda_graph_debug(struct gs_cuda_graph *cg, char *buf, size_t len)
{
	char a[512] = "", b[512] = "";

	if (cg->c)
		gs_cuda_debug(cg->c, a, sizeof(a));
	if (cg->a)
		gs_cuda_array_debug(cg->a, b, sizeof(b));
	return snprintf(buf, len, "phase %s; cam: %s; cache: %s", cg->phase ? cg->phase : "-", a,
			b);
}

/* Wait for the GPU, at most WAIT_S: a stuck kernel is reported with the
 * rings' counters instead of hanging the caller forever. */
static int gpu_wait(struct gs_cuda_graph *cg, const char *phase)
{
	double t0 = now_s();
	cudaError_t e;

	cg->phase = phase;
	for (unsigned spin = 0;; spin++) {
		e = cudaStreamQuery(0);
		if (e == cudaSuccess && cg->ss)
			e = cudaStreamQuery(cg->ss);
		if (e != cudaErrorNotReady)
			break;
		if (now_s() - t0 > WAIT_S) {
			char dbg[1200];

			gs_cuda_graph_debug(cg, dbg, sizeof(dbg));
			gs_err("cuda graph: %s: no progress in %.0f s: %s", phase, WAIT_S, dbg);
			return -ETIMEDOUT;
		}
		if (spin > 64) {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
	}
	return cu(e, phase);
}

static int launched(struct gs_cuda_graph *cg, const char *what)
{
	int ret = cu(cudaGetLastError(), what);

	return ret ? ret : gpu_wait(cg, what);
}

/* ---- kernels: CAM passes ---- */

/* One lane per warp issues (a lane that waits for a free ticket collects
 * completions; no lane spins beside a mate of its own warp that it may
 * need). */
static __global__ void k_issue(struct gs_cam *cam, const struct run *runs, uint32_t n)
{
	uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint32_t nwarps = gridDim.x * blockDim.x / 32;

	if ((threadIdx.x & 31) == 0)
		for (uint32_t r = warp; r < n; r += nwarps)
			gs_cam_issue(cam, GS_OP_READ, runs[r].dev, (uint32_t)runs[r].len,
				     runs[r].buf);
}

/* Everything issued so far completed (the next chunk is issued after this
 * kernel, in stream order); the first error into *err. */
static __global__ void k_wait(struct gs_cam *cam, int64_t *err)
{
	uint64_t w = gs_d_load_acq(&cam->tail);
	uint32_t ns = 64;

	while (gs_d_load_acq(&cam->retire) < w)
		gs_cam_wait_step(cam, &ns);
	gs_fence();
	if (cam->err && !*err)
		*err = cam->err;
}

/*
 * The pages a BFS level needs, both ways: top-down, the lists of the
 * frontier (depth == level) in need_td; bottom-up, the lists of the
 * unvisited vertices (direction @bud: in-lists of a directed graph) in
 * need_bu, when that is not NULL.  cnt[0]: frontier vertices.
 */
static __global__ void k_mark_bfs(const struct gs_cgraph *g, const int32_t *depth, int32_t level,
				  uint8_t *need_td, uint8_t *need_bu, unsigned bud,
				  unsigned long long *nfront)
{
	uint64_t nv = g->nv, stride = (uint64_t)gridDim.x * blockDim.x;
	unsigned long long n = 0;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride) {
		int32_t dv = depth[v];
		unsigned d = dv == level ? 0 : bud;
		uint8_t *need = dv == level ? need_td : need_bu;

		n += dv == level;
		if ((dv != level && (dv >= 0 || !need_bu)) || gs_cgraph_removed(g, v) ||
		    !gs_cgraph_has_list(g, d, v))
			continue;
		int64_t gi = gs_gp_locate(g->key[d], g->last[d], g->page[d], g->ngtt[d], v);

		if (gi < 0)
			continue;
		uint64_t glen = gs_gp_group_len(g->page[d], g->ngtt[d], (uint64_t)gi);

		for (uint64_t k = 0; k < glen; k++)
			need[g->first_block[d] + (g->page[d][gi + k] & GS_GP_PAGE_MASK)] = 1;
	}
	if (n)
		atomicAdd(nfront, n);
}

/* One BFS level bottom-up over staged pages: each unvisited vertex in a page
 * with a neighbour at depth == level is at level + 1 (exact: the frontier is
 * complete, and level + 1 never equals level). */
static __global__ void k_bfs_pages_bu(const struct gs_cgraph *g, const uint8_t *stage, uint64_t n,
				      int32_t *depth, int32_t level, unsigned long long *found,
				      int64_t *err)
{
	const struct gs_gp_geom *gm = &g->gm;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31, any = 0;

	for (uint64_t i = warp; i < n; i += nwarps) {
		const uint8_t *page = stage + i * gm->ps;
		uint32_t cnt = gs_gp_count_bounded(gm, page);

		for (uint32_t t = 0; t < cnt; t++) {
			uint64_t v = gs_gp_vertex(gm, page, t);
			int in = 0, hit = 0;

			if (lane == 0)
				in = v < g->nv && depth[v] < 0 && !gs_cgraph_removed(g, v);
			if (!__shfl_sync(0xffffffffu, in, 0))
				continue;
			int64_t r = gs_cgraph_page_list(gm, page, t, 0,
							[&](uint64_t, uint64_t u, float) {
				hit |= u < g->nv && depth[u] == level;
			});
			if (r < 0 && lane == 0)
				atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
			if (__any_sync(0xffffffffu, hit) && lane == 0) {
				depth[v] = level + 1;
				any = 1;
			}
		}
	}
	if (__any_sync(0xffffffffu, any) && lane == 0)
		atomicAdd(found, 1ull);
}

/* One BFS level over staged pages: a warp per page, the frontier vertices
 * in it expanded. */
static __global__ void k_bfs_pages(const struct gs_cgraph *g, const uint8_t *stage, uint64_t n,
				   int32_t *depth, int32_t level, unsigned long long *found,
				   int64_t *err)
{
	const struct gs_gp_geom *gm = &g->gm;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31, any = 0;

	for (uint64_t i = warp; i < n; i += nwarps) {
		const uint8_t *page = stage + i * gm->ps;
		uint32_t cnt = gs_gp_count_bounded(gm, page);

		for (uint32_t t = 0; t < cnt; t++) {
			uint64_t v = gs_gp_vertex(gm, page, t);
			int in = 0;

			if (lane == 0)
				in = v < g->nv && depth[v] == level && !gs_cgraph_removed(g, v);
			if (!__shfl_sync(0xffffffffu, in, 0))
				continue;
			int64_t r = gs_cgraph_page_list(gm, page, t, 0,
							[&](uint64_t, uint64_t u, float) {
				if (u < g->nv && depth[u] < 0) {
					depth[u] = level + 1;	/* every writer writes this */
					any = 1;
				}
			});
			if (r < 0 && lane == 0)
				atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
		}
	}
	if (__any_sync(0xffffffffu, any) && lane == 0)
		atomicAdd(found, 1ull);
}

/* ---- union-find (CC): parents only ever point lower, so a root is the
 * smallest index of its tree and the final labels are the CPU's ---- */

static __device__ uint64_t uf_find(uint64_t *p, uint64_t x)
{
	for (;;) {
		uint64_t y = *(volatile uint64_t *)&p[x];

		if (y == x)
			return x;
		uint64_t z = *(volatile uint64_t *)&p[y];

		if (z != y)
			*(volatile uint64_t *)&p[x] = z;	/* halving: z < y, still an ancestor */
		x = z;
	}
}

static __device__ void uf_union(uint64_t *p, uint64_t a, uint64_t b)
{
	for (;;) {
		a = uf_find(p, a);
		b = uf_find(p, b);
		if (a == b)
			return;
		if (a < b) {
			uint64_t t = a;

			a = b;
			b = t;
		}
		/* link the higher root under the lower */
		if (atomicCAS((unsigned long long *)&p[a], a, b) == a)
			return;
	}
}

static __global__ void k_cc_pages(const struct gs_cgraph *g, const uint8_t *stage, uint64_t n,
				  uint64_t *label, int64_t *err)
{
	const struct gs_gp_geom *gm = &g->gm;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t i = warp; i < n; i += nwarps) {
		const uint8_t *page = stage + i * gm->ps;
		uint32_t cnt = gs_gp_count_bounded(gm, page);

		for (uint32_t t = 0; t < cnt; t++) {
			uint64_t v = gs_gp_vertex(gm, page, t);

			if (v >= g->nv || gs_cgraph_removed(g, v))
				continue;	/* the same for every lane */
			int64_t r = gs_cgraph_page_list(gm, page, t, 0,
							[&](uint64_t, uint64_t u, float) {
				if (u < g->nv)
					uf_union(label, v, u);
			});
			if (r < 0 && lane == 0)
				atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
		}
	}
}

static __global__ void k_cc_bam(const struct gs_cgraph *g, uint64_t *label, int64_t *err)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t v = warp; v < g->nv; v += nwarps) {
		int64_t r = gs_cgraph_list(g, 0, v, [&](uint64_t, uint64_t u, float) {
			if (u < g->nv)
				uf_union(label, v, u);
		});

		if (r < 0 && lane == 0)
			atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
	}
}

static __global__ void k_iota(uint64_t *label, uint64_t nv)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride)
		label[v] = v;
}

static __global__ void k_cc_final(const struct gs_cgraph *g, uint64_t *label,
				  unsigned long long *comps)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	unsigned long long n = 0;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < g->nv; v += stride) {
		uint64_t r = uf_find(label, v);

		label[v] = r;
		n += r == v && !gs_cgraph_removed(g, v);
	}
	if (n)
		atomicAdd(comps, n);
}

/* The BaM BFS level: warp w owns a run of vertices, the frontier ones
 * among them expanded by the whole warp, lists through the page cache. */
static __global__ void k_bfs_bam(const struct gs_cgraph *g, int32_t *depth, int32_t level,
				 unsigned long long *found, int64_t *err)
{
	uint64_t nv = g->nv;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	uint64_t chunk = (nv + nwarps - 1) / nwarps, lo = warp * chunk;
	uint64_t hi = lo + chunk < nv ? lo + chunk : nv;
	int lane = threadIdx.x & 31, any = 0;

	for (uint64_t base = lo; base < hi; base += 32) {
		uint64_t v = base + lane;
		unsigned m = __ballot_sync(0xffffffffu, v < hi && depth[v] == level);

		while (m) {
			uint64_t f = base + __ffs(m) - 1;

			m &= m - 1;
			int64_t r = gs_cgraph_list(g, 0, f, [&](uint64_t, uint64_t u, float) {
				if (u < nv && depth[u] < 0) {
					depth[u] = level + 1;
					any = 1;
				}
			});
			if (r < 0 && lane == 0)
				atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
		}
	}
	if (__any_sync(0xffffffffu, any) && lane == 0)
		atomicAdd(found, 1ull);
}

static __global__ void k_depth_init(int32_t *depth, uint64_t nv, uint64_t src)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride)
		depth[v] = v == src ? 0 : -1;
}

/* ---- host side ---- */

struct nonzero {
	__host__ __device__ bool operator()(uint8_t x) const { return x != 0; }
};

static int grid_for(uint64_t n, int per)
{
	uint64_t b = (n + per - 1) / per;

	return (int)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/*
 * Blocks of 256 threads for a kernel whose warps each take page cache lines:
 * at most a quarter as many warps as lines (at most 264 blocks), so the
 * warps never hold most of the cache at once; a small cache with more
 * warps than lines thrashes, every miss evicting a line a warp still needs.
 */
static int bam_grid(const struct gs_cuda_graph *cg, uint64_t warps_wanted)
{
	uint64_t lines = cg->p.cache_bytes / cg->l->page_size, w = lines / 4;

	if (w > warps_wanted)
		w = warps_wanted;
	w = w < 8 ? 8 : w > 264 * 8 ? 264 * 8 : w;
	return (int)(w / 8);
}

/* Extent of block @blk, or -1 (a hole). */
static int64_t ext_of(const struct gs_graph_layout *l, uint64_t blk)
{
	uint32_t lo = 0, hi = l->next;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (l->ext[mid].blk <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || blk - l->ext[lo - 1].blk >= l->ext[lo - 1].nblk)
		return -1;
	return lo - 1;
}

/* Requests for blocks list[0..n) into region half @h: adjacent blocks of one
 * extent merge, up to max_io bytes.  Returns the number of runs or -errno. */
static int64_t plan_runs(struct gs_cuda_graph *cg, const uint64_t *list, uint64_t n, unsigned h)
{
	const struct gs_graph_layout *l = cg->l;
	struct run *r = cg->h_runs + (size_t)h * cg->runs_cap;
	uint32_t ps = l->page_size;
	uint64_t nr = 0, prev = 0;
	int64_t pe = -1;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t blk = list[i];
		int64_t e = ext_of(l, blk);

		if (e < 0) {
			gs_err("cuda graph: block %llu is in no extent", (unsigned long long)blk);
			return -EIO;
		}
		if (nr && e == pe && blk == prev + 1 && r[nr - 1].len + ps <= cg->max_io) {
			r[nr - 1].len += ps;
		} else {
			if (nr == cg->runs_cap)
				return -E2BIG;	/* cannot happen: runs_cap >= pages per half */
			r[nr].dev = l->ext[e].dev_off + (blk - l->ext[e].blk) * ps;
			r[nr].len = ps;
			r[nr].buf = h * cg->half + i * ps;
			nr++;
		}
		prev = blk;
		pe = e;
	}
	cg->reqs += nr;
	cg->bytes += n * ps;
	return (int64_t)nr;
}

/* Issue the requests of chunk list[0..n) into half @h (no wait). */
static int issue_chunk(struct gs_cuda_graph *cg, const uint64_t *list, uint64_t n, unsigned h)
{
	int64_t nr = plan_runs(cg, list, n, h);
	struct run *dr = cg->d_runs + (size_t)h * cg->runs_cap;
	int ret;

	if (nr < 0)
		return (int)nr;
	CU(cudaMemcpy(dr, cg->h_runs + (size_t)h * cg->runs_cap, nr * sizeof(*dr),
		      cudaMemcpyHostToDevice));
	k_issue<<<nr > 2048 ? 64 : 16, 128>>>(cg->cam, dr, (uint32_t)nr);
	ret = cu(cudaGetLastError(), "issue");
out:
	return ret;
}

/*
 * A CAM pass over the sorted distinct blocks list[0..n) (host memory):
 * chunk k is read into half k % 2 while chunk k - 1 is processed;
 * work(stage, pages) launches the processing of a staged chunk.
 */
template <typename W>
static int cam_pass(struct gs_cuda_graph *cg, const uint64_t *list, uint64_t n, W work)
{
	uint64_t per = cg->half / cg->l->page_size, nchunks = (n + per - 1) / per;
	int64_t err = 0;
	int ret = 0;

	if (!n)
		return 0;
	ret = issue_chunk(cg, list, n < per ? n : per, 0);
	for (uint64_t k = 0; k < nchunks && !ret; k++) {
		unsigned h = (unsigned)(k & 1);
		uint64_t first = k * per, cnt = n - first < per ? n - first : per;

		k_wait<<<1, 1>>>(cg->cam, cg->d_err);
		ret = launched(cg, "cam wait");
		if (ret)
			break;
		CU(cudaMemcpy(&err, cg->d_err, sizeof(err), cudaMemcpyDeviceToHost));
		if (err) {
			gs_err("cuda graph: a CAM read failed: %lld", (long long)err);
			ret = (int)err;
			break;
		}
		CU(cudaMemcpy(cg->d_stage, cg->region + h * cg->half, cnt * cg->l->page_size,
			      cudaMemcpyDefault));
		if (k + 1 < nchunks) {
			uint64_t f2 = first + per, c2 = n - f2 < per ? n - f2 : per;

			ret = issue_chunk(cg, list + f2, c2, h ^ 1);
			if (ret)
				break;
		}
		work(cg->d_stage, cnt);
		ret = launched(cg, "cam pass work");
	}
out:
	if (ret) {
		/* requests may still be in flight into the region: let them land */
		k_wait<<<1, 1>>>(cg->cam, cg->d_err);
		gpu_wait(cg, "cam drain");
	}
	return ret;
}

static void free_dev(struct gs_cuda_graph *cg)
{
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < 3; k++) {
			cudaFree(cg->d_gtt[d][k]);
			cg->d_gtt[d][k] = NULL;
		}
	cudaFree(cg->d_removed);
	for (int d = 0; d < 2; d++) {
		cudaFree(cg->d_vmap[d]);
		cg->d_vmap[d] = NULL;
	}
	cudaFree(cg->dv);
	cudaFree(cg->d_need);
	cudaFree(cg->d_need_bu);
	cudaFree(cg->d_list);
	cudaFreeHost(cg->h_list);
	free(cg->cc_list);
	cg->d_removed = NULL;
	cg->dv = NULL;
	cg->d_need = NULL;
	cg->d_need_bu = NULL;
	cg->d_list = NULL;
	cg->h_list = NULL;
	cg->cc_list = NULL;
	cudaFree(cg->d_pos_of);
	cudaFree(cg->d_first);
	cg->d_pos_of = NULL;
	cg->d_first = NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- attach mode: the layout from the daemon (GRAPH), in its memfd ---- */

struct att_layout {
	struct gs_graph_layout l;	/* first: pointers into the map below */
	struct gs_attach_graph ag;
};

static void layout_put(struct gs_cuda_graph *cg, struct gs_graph_layout *l)
{
	if (!l)
		return;
	if (!cg->sock) {
		gs_graph_layout_put(l);
		return;
	}
	gs_attach_graph_unmap(&((struct att_layout *)l)->ag);
	free(l);
}

/* A fresh connection, GRAPH on it: the layout (pending updates merged by
 * the daemon) and, in cg->conn, the connection whose rings may read its
 * pages (the leases are bound to them). */
static int att_layout_get(struct gs_cuda_graph *cg, struct gs_graph_layout **lp)
{
	struct att_layout *al = (struct att_layout *)calloc(1, sizeof(*al));
	struct gs_graph_layout *l = &al->l;
	const struct gs_att_graph_map *h;
	struct gs_attach *a = NULL;
	const char *base;
	int ret;

	if (!al)
		return -ENOMEM;
	ret = gs_attach_connect(&a, cg->sock);
	if (!ret)
		ret = gs_attach_graph(a, cg->rel, &al->ag);
	if (ret) {
		gs_attach_close(a);
		free(al);
		return ret;
	}
	h = al->ag.map;
	base = (const char *)h;	/* gs_attach_graph() checked every offset */
	l->nv = h->nv;
	l->ne = h->ne;
	l->gen = h->gen;
	l->flags = h->flags;
	l->page_size = h->page_size;
	l->id_bytes = h->id_bytes;
	l->ndirs = h->ndirs;
	for (unsigned d = 0; d < h->ndirs; d++) {
		const struct gs_att_graph_dir *hd = &h->dir[d];
		struct gs_graph_layout_dir *ld = &l->dir[d];

		ld->pages_ino = hd->pages_ino;
		ld->npages = hd->npages;
		ld->first_block = hd->first_block;
		ld->ngtt = hd->ngtt;
		ld->gtt_key = (uint64_t *)(base + hd->key_off);
		ld->gtt_last = (uint64_t *)(base + hd->last_off);
		ld->gtt_page = (uint64_t *)(base + hd->page_off);
		ld->vmap = hd->vmap_off ? (uint8_t *)(base + hd->vmap_off) : NULL;
		ld->vmap_bits = hd->vmap_off ? hd->vmap_bits : 0;
	}
	l->removed = h->removed_off ? (uint8_t *)(base + h->removed_off) : NULL;
	l->nremoved = h->nremoved;
	l->nblocks = h->nblocks;
	l->bytes = h->bytes;
	l->next = h->next;
	l->ext = (struct gs_graph_layout_ext *)(base + h->ext_off);
	gs_attach_close(cg->conn);	/* one left over by a failed open: not needed */
	cg->conn = a;
	cg->dev_max_io = al->ag.max_io;
	*lp = l;
	return 0;
}

/* Upload the layout's tables; the per-vertex and per-block scratch. */
static int load_layout(struct gs_cuda_graph *cg)
{
	const struct gs_graph_layout *l = cg->l;
	struct gs_cgraph *h = &cg->hv;
	int ret = 0;

	memset(h, 0, sizeof(*h));
	gs_gp_init(&h->gm, l->page_size, l->id_bytes, l->flags);
	h->nv = l->nv;
	h->ndirs = l->ndirs;
	for (unsigned d = 0; d < l->ndirs; d++) {
		const struct gs_graph_layout_dir *ld = &l->dir[d];
		uint64_t *src[3] = { ld->gtt_key, ld->gtt_last, ld->gtt_page };
		size_t sz = (ld->ngtt ? ld->ngtt : 1) * 8;

		for (int k = 0; k < 3; k++) {
			CU(cudaMalloc(&cg->d_gtt[d][k], sz));
			CU(cudaMemcpy(cg->d_gtt[d][k], src[k], ld->ngtt * 8, cudaMemcpyHostToDevice));
		}
		h->key[d] = cg->d_gtt[d][0];
		h->last[d] = cg->d_gtt[d][1];
		h->page[d] = cg->d_gtt[d][2];
		h->ngtt[d] = ld->ngtt;
		h->first_block[d] = ld->first_block;
		if (ld->vmap) {
			size_t vb = (ld->vmap_bits + 7) / 8;

			CU(cudaMalloc(&cg->d_vmap[d], vb + 1));
			CU(cudaMemcpy(cg->d_vmap[d], ld->vmap, vb, cudaMemcpyHostToDevice));
			h->vmap[d] = cg->d_vmap[d];
			h->vmap_bits[d] = ld->vmap_bits;
		}
	}
	if (l->removed) {
		CU(cudaMalloc(&cg->d_removed, l->nv / 8 + 1));
		CU(cudaMemcpy(cg->d_removed, l->removed, l->nv / 8 + 1, cudaMemcpyHostToDevice));
	}
	h->removed = cg->d_removed;
	h->bam = cg->a ? gs_cuda_array_dev(cg->a) : NULL;
	CU(cudaMalloc(&cg->dv, sizeof(*cg->dv)));
	CU(cudaMemcpy(cg->dv, h, sizeof(*h), cudaMemcpyHostToDevice));
	CU(cudaMalloc(&cg->d_need, l->nblocks + 1));
	CU(cudaMemset(cg->d_need, 0, l->nblocks + 1));
	CU(cudaMalloc(&cg->d_need_bu, l->nblocks + 1));
	CU(cudaMemset(cg->d_need_bu, 0, l->nblocks + 1));
	CU(cudaMalloc(&cg->d_list, (l->nblocks + 1) * 8));
	CU(cudaHostAlloc(&cg->h_list, (l->nblocks + 1) * 8, cudaHostAllocDefault));
	CU(cudaMalloc(&cg->d_pos_of, (l->nv + 1) * 4));
	CU(cudaMemset(cg->d_pos_of, 0xff, (l->nv + 1) * 4));
	CU(cudaMalloc(&cg->d_first, (l->nv + 1) * 8));
	CU(cudaMemset(cg->d_first, 0xff, (l->nv + 1) * 8));
	/* CC's sweep: every live page of direction 0, in block order */
	cg->ncc = l->dir[0].ngtt;
	cg->cc_list = (uint64_t *)malloc((cg->ncc + 1) * 8);
	if (!cg->cc_list)
		return -ENOMEM;
	for (uint64_t i = 0; i < cg->ncc; i++)
		cg->cc_list[i] = l->dir[0].first_block + (l->dir[0].gtt_page[i] & GS_GP_PAGE_MASK);
	qsort(cg->cc_list, cg->ncc, 8, cmp_u64);
out:
	return ret;
}

/* The rings over the layout's extents and the page cache over them (again
 * after a sync that moved pages: a gs_cuda copies its extents at open). */
static int io_open(struct gs_cuda_graph *cg)
{
	struct gs_cuda_params cp = {};
	struct gs_cuda_array_params ap = {};
	size_t len;
	int ret;

	cp.block_size = cg->l->page_size;
	cp.buf_bytes = 2 * cg->half;
	cp.ext = (const struct gs_cam_ext *)cg->l->ext;
	cp.next = cg->l->next;
	cp.nblocks = cg->l->nblocks;
	cp.device = cg->p.device;
	if (cg->sock) {
		/* the rings of the connection the layout came on: its leases bind them */
		ret = gs_cuda_attach_conn(&cg->c, cg->conn, &cp);
		cg->conn = NULL;	/* the handle's, even on failure */
	} else {
		ret = gs_cuda_open(&cg->c, cg->q, &cp);
	}
	if (ret)
		return ret;
	cg->cam = gs_cuda_cam(cg->c);
	cg->region = (char *)gs_cuda_buf(cg->c, &len);
	ap.cache_bytes = cg->p.cache_bytes;
	ap.nio = cg->p.nio;
	return gs_cuda_array_open(&cg->a, cg->c, &ap);
}

static void io_close(struct gs_cuda_graph *cg)
{
	if (cg->a)
		gs_cuda_array_close(cg->a);
	if (cg->c)
		gs_cuda_close(cg->c);
	cg->a = NULL;
	cg->c = NULL;
	cg->cam = NULL;
	cg->region = NULL;
}

void gs_cuda_graph_close(struct gs_cuda_graph *cg)
{
	if (!cg)
		return;
	free_dev(cg);
	cudaFree(cg->d_stage);
	cudaFree(cg->d_runs);
	cudaFreeHost(cg->h_runs);
	cudaFree(cg->d_err);
	cudaFree(cg->d_cnt);
	cudaFree(cg->d_pick);
	cudaFree(cg->d_slot);
	cudaFree(cg->d_off);
	cudaFree(cg->d_count);
	cudaFree(cg->d_flag);
	cudaFree(cg->d_fpos);
	cudaFree(cg->d_tmp);
	if (cg->ss)
		cudaStreamDestroy(cg->ss);
	io_close(cg);
	layout_put(cg, cg->l);
	gs_attach_close(cg->conn);
	free(cg->sock);
	free(cg->rel);
	free(cg);
}

static struct gs_cuda_graph *cg_new(const struct gs_cuda_graph_params *params)
{
	struct gs_cuda_graph *cg = (struct gs_cuda_graph *)calloc(1, sizeof(*cg));

	if (!cg)
		return NULL;
	if (params)
		cg->p = *params;
	if (!cg->p.cache_bytes)
		cg->p.cache_bytes = DEF_CACHE;
	if (!cg->p.stage_bytes)
		cg->p.stage_bytes = DEF_STAGE;
	if (!cg->p.max_io)
		cg->p.max_io = DEF_MAX_IO;
	if (!cg->p.nio)
		cg->p.nio = DEF_NIO;
	return cg;
}

/* With cg->l in place: the rings and cache, the staging, the tables. */
static int open_io(struct gs_cuda_graph *cg, uint32_t dev_max_io)
{
	int ret;

	if (!cg->l->next || !cg->l->nblocks)
		return -EOPNOTSUPP;	/* not on a gs_fs, or no pages at all */
	cg->max_io = cg->p.max_io < dev_max_io ? cg->p.max_io : dev_max_io;
	cg->max_io -= cg->max_io % cg->l->page_size;
	if (cg->max_io < cg->l->page_size)
		cg->max_io = cg->l->page_size;
	cg->half = cg->p.stage_bytes / 2;
	cg->half -= cg->half % cg->l->page_size;
	if (cg->half < cg->l->page_size)
		return -EINVAL;
	ret = io_open(cg);
	if (ret)
		return ret;
	cg->runs_cap = (uint32_t)(cg->half / cg->l->page_size) + 1;
	if ((ret = cu(cudaMalloc(&cg->d_stage, cg->half), "stage")) ||
	    (ret = cu(cudaMalloc(&cg->d_runs, 2 * cg->runs_cap * sizeof(struct run)), "runs")) ||
	    (ret = cu(cudaHostAlloc(&cg->h_runs, 2 * cg->runs_cap * sizeof(struct run),
				    cudaHostAllocDefault), "runs")) ||
	    (ret = cu(cudaMalloc(&cg->d_err, 8), "err")) ||
	    (ret = cu(cudaMemset(cg->d_err, 0, 8), "err")) ||
	    (ret = cu(cudaMalloc(&cg->d_cnt, 4 * 8), "counters")))
		return ret;
	if (!cg->ss) {
		int least = 0, greatest = 0;

		if ((ret = cu(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priorities")) ||
		    (ret = cu(cudaStreamCreateWithPriority(&cg->ss, cudaStreamDefault, greatest),
			      "sampler stream")))
			return ret;
	}
	return load_layout(cg);
}

int gs_cuda_graph_open(struct gs_cuda_graph **gp, struct gs_graph *g, struct gs_q *q,
		       const struct gs_cuda_graph_params *params)
{
	struct gs_cuda_graph *cg;
	struct gs_q_geom geom;
	int ret;

	if (!gp || !g || !q)
		return -EINVAL;
	cg = cg_new(params);
	if (!cg)
		return -ENOMEM;
	cg->g = g;
	cg->q = q;
	ret = gs_q_geometry(q, &geom);
	if (!ret)
		ret = gs_graph_layout_get(g, 0, &cg->l);
	if (!ret)
		ret = open_io(cg, geom.max_io);
	if (ret) {
		gs_cuda_graph_close(cg);
		return ret;
	}
	*gp = cg;
	return 0;
}

int gs_cuda_graph_attach(struct gs_cuda_graph **gp, const char *path,
			 const struct gs_cuda_graph_params *params)
{
	char full[PATH_MAX], sock[PATH_MAX];
	struct gs_cuda_graph *cg;
	const char *rel = NULL;
	int ret;

	if (!gp || !path)
		return -EINVAL;
	ret = gs_attach_find(path, full, sock, sizeof(sock), &rel);
	if (ret)
		return ret;
	cg = cg_new(params);
	if (!cg)
		return -ENOMEM;
	cg->sock = strdup(sock);
	cg->rel = strdup(rel);
	ret = cg->sock && cg->rel ? 0 : -ENOMEM;
	if (!ret)
		ret = att_layout_get(cg, &cg->l);
	if (!ret)
		ret = open_io(cg, cg->dev_max_io);
	if (ret) {
		gs_cuda_graph_close(cg);
		return ret;
	}
	*gp = cg;
	return 0;
}

int gs_cuda_graph_sync(struct gs_cuda_graph *cg)
{
	struct gs_graph_layout *l;
	bool moved;
	int ret;

	ret = cg->sock ? att_layout_get(cg, &l) : gs_graph_layout_get(cg->g, 0, &l);
	if (ret)
		return ret;	/* the handle still reads the old layout */
	/* pages moved or added: new rings over the new extents; else the cache
	 * only drops what it holds.  Attached: always new rings, those of the
	 * connection the new layout's leases are bound to (the old connection,
	 * closed with its handle, ends the old leases) */
	moved = cg->sock || !cg->c || l->nblocks != cg->l->nblocks || l->next != cg->l->next ||
		memcmp(l->ext, cg->l->ext, l->next * sizeof(*l->ext));
	free_dev(cg);
	if (moved)
		io_close(cg);
	layout_put(cg, cg->l);	/* after the rings that used its extents */
	cg->l = l;
	ret = moved ? io_open(cg) : gs_cuda_array_invalidate(cg->a);
	if (!ret)
		ret = load_layout(cg);
	return ret;	/* on failure the handle is only good for gs_cuda_graph_close() */
}

const struct gs_graph_layout *gs_cuda_graph_layout(struct gs_cuda_graph *cg)
{
	return cg->l;
}

const struct gs_cgraph *gs_cuda_graph_dev(struct gs_cuda_graph *cg)
{
	return cg->dv;
}

static void stats_begin(struct gs_cuda_graph *cg, struct gs_cuda_array_stats *a0, double *t0)
{
	cg->bytes = cg->reqs = 0;
	cg->passes = cg->bottom_up = 0;
	gs_cuda_array_stats(cg->a, a0);
	*t0 = now_s();
}

static void stats_end(struct gs_cuda_graph *cg, const struct gs_cuda_array_stats *a0, double t0,
		      struct gs_cuda_graph_stats *st)
{
	struct gs_cuda_array_stats a1;

	if (!st)
		return;
	gs_cuda_array_stats(cg->a, &a1);
	st->seconds = now_s() - t0;
	st->bytes_read = cg->bytes + (a1.misses - a0->misses) * cg->l->page_size;
	st->requests = cg->reqs + (a1.misses - a0->misses);
	st->passes = cg->passes;
	st->bottom_up = cg->bottom_up;
}

static int dev_err(struct gs_cuda_graph *cg)
{
	int64_t e = 0;
	int ret = cu(cudaMemcpy(&e, cg->d_err, 8, cudaMemcpyDeviceToHost), "err");

	if (ret)
		return ret;
	if (!e)
		e = gs_cuda_array_error(cg->a);
	if (!e)
		e = gs_cuda_error(cg->c);
	return (int)e;
}

int gs_cuda_graph_bfs(struct gs_cuda_graph *cg, uint64_t src, int32_t *depth, unsigned mode,
		      struct gs_cuda_graph_stats *st)
{
	uint64_t nv = cg->l->nv, nb = cg->l->nblocks;
	unsigned long long cnt[2];
	struct gs_cuda_array_stats a0;
	int32_t level = 0;
	double t0;
	int ret = 0;

	if (src >= nv || !depth || mode > GS_CUDA_GRAPH_CAM_BOTTOMUP)
		return -EINVAL;
	if (!cg->c || !cg->dv)
		return -EIO;	/* a failed sync */
	stats_begin(cg, &a0, &t0);
	CU(cudaMemset(cg->d_err, 0, 8));
	k_depth_init<<<grid_for(nv, 256), 256>>>(depth, nv, src);
	ret = launched(cg, "bfs init");
	for (; !ret; level++) {
		CU(cudaMemset(cg->d_cnt, 0, 2 * 8));
		if (mode == GS_CUDA_GRAPH_BAM) {
			k_bfs_bam<<<bam_grid(cg, 264 * 8), 256>>>(cg->dv, depth, level, cg->d_cnt,
								    cg->d_err);
			ret = launched(cg, "bfs bam level");
			CU(cudaMemcpy(cnt, cg->d_cnt, 8, cudaMemcpyDeviceToHost));
			cg->passes++;
			if (ret || !cnt[0]) {
				level++;	/* this level had vertices, the next has none */
				break;
			}
			continue;
		}
		/* bottom-up where it reads fewer pages (Beamer's direction-optimizing BFS,
		 * by pages): not with removed vertices, whose lists are gone while
		 * others may still name them */
		uint8_t *bu = cg->l->nremoved || mode == GS_CUDA_GRAPH_CAM_TOPDOWN ? NULL :
			      cg->d_need_bu;

		k_mark_bfs<<<grid_for(nv, 256), 256>>>(cg->dv, depth, level, cg->d_need, bu,
							 cg->l->ndirs > 1 ? 1 : 0, cg->d_cnt);
		ret = launched(cg, "bfs mark");
		if (ret)
			break;
		CU(cudaMemcpy(cnt, cg->d_cnt, 8, cudaMemcpyDeviceToHost));
		if (!cnt[0])
			break;
		cg->passes++;
		uint64_t ntd = thrust::count_if(thrust::device, cg->d_need, cg->d_need + nb, nonzero());
		uint64_t nbu = bu ? thrust::count_if(thrust::device, bu, bu + nb, nonzero()) : UINT64_MAX;
		int up = bu && (mode == GS_CUDA_GRAPH_CAM_BOTTOMUP ? level > 0 : nbu < ntd);
		uint64_t *end = thrust::copy_if(thrust::device, thrust::counting_iterator<uint64_t>(0),
						thrust::counting_iterator<uint64_t>(nb),
						up ? bu : cg->d_need, cg->d_list, nonzero());
		uint64_t n = (uint64_t)(end - cg->d_list);

		cg->bottom_up += up;
		CU(cudaMemset(cg->d_need, 0, nb));
		if (bu)
			CU(cudaMemset(bu, 0, nb));
		CU(cudaMemcpy(cg->h_list, cg->d_list, n * 8, cudaMemcpyDeviceToHost));
		ret = cam_pass(cg, cg->h_list, n, [&](const uint8_t *stage, uint64_t cnt_pages) {
			if (up)
				k_bfs_pages_bu<<<grid_for(cnt_pages * 32, 256), 256>>>(
					cg->dv, stage, cnt_pages, depth, level, cg->d_cnt + 1,
					cg->d_err);
			else
				k_bfs_pages<<<grid_for(cnt_pages * 32, 256), 256>>>(
					cg->dv, stage, cnt_pages, depth, level, cg->d_cnt + 1,
					cg->d_err);
		});
	}
	if (!ret)
		ret = dev_err(cg);
out:
	stats_end(cg, &a0, t0, st);
	return ret ? ret : level;
}

int64_t gs_cuda_graph_cc(struct gs_cuda_graph *cg, uint64_t *label, unsigned mode,
			 struct gs_cuda_graph_stats *st)
{
	uint64_t nv = cg->l->nv;
	unsigned long long comps = 0;
	struct gs_cuda_array_stats a0;
	double t0;
	int ret = 0;

	if (!label || mode > GS_CUDA_GRAPH_CAM_BOTTOMUP)
		return -EINVAL;
	if (!cg->c || !cg->dv)
		return -EIO;	/* a failed sync */
	stats_begin(cg, &a0, &t0);
	CU(cudaMemset(cg->d_err, 0, 8));
	CU(cudaMemset(cg->d_cnt, 0, 8));
	k_iota<<<grid_for(nv, 256), 256>>>(label, nv);
	ret = launched(cg, "cc init");
	if (ret)
		goto out;
	cg->passes = 1;
	/* out-lists alone cover every edge once: a directed graph's CC is weak */
	if (mode == GS_CUDA_GRAPH_BAM) {
		k_cc_bam<<<bam_grid(cg, 264 * 8), 256>>>(cg->dv, label, cg->d_err);
		ret = launched(cg, "cc bam");
	} else {
		ret = cam_pass(cg, cg->cc_list, cg->ncc, [&](const uint8_t *stage, uint64_t n) {
			k_cc_pages<<<grid_for(n * 32, 256), 256>>>(cg->dv, stage, n, label,
								   cg->d_err);
		});
	}
	if (ret)
		goto out;
	k_cc_final<<<grid_for(nv, 256), 256>>>(cg->dv, label, cg->d_cnt);
	ret = launched(cg, "cc final");
	if (ret)
		goto out;
	CU(cudaMemcpy(&comps, cg->d_cnt, 8, cudaMemcpyDeviceToHost));
	ret = dev_err(cg);
out:
	stats_end(cg, &a0, t0, st);
	return ret ? ret : (int64_t)comps;
}

/* ---- sampling ---- */

/* Hop @hop for frontier nodes[a .. a+n): warp i picks for node a+i into
 * slot[i*f ..] (count[i] of them): all neighbours when the degree is at
 * most f, else the positions gs_graph_sample_pick() gives (pick[i*f ..]). */
static __global__ void k_sample(const struct gs_cgraph *g, const uint64_t *nodes, uint64_t a,
				uint64_t n, uint32_t f, uint32_t hop, uint64_t seed, uint64_t *pick,
				uint64_t *slot, uint32_t *count, int64_t *err)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t i = warp; i < n; i += nwarps) {
		uint64_t v = nodes[a + i], *pk = pick + i * f, *sl = slot + i * f;
		/* entry k of a list of dg: its slot (the pick at position k when dg > f) */
		auto keep = [&](uint64_t k, uint64_t u, uint64_t dg) {
			if (dg <= f) {
				if (k < f)
					sl[k] = u;
				return;
			}
			uint32_t lo = 0, hi = f;

			while (lo < hi) {	/* pk ascending */
				uint32_t mid = (lo + hi) / 2;

				if (pk[mid] < k)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < f && pk[lo] == k)
				sl[lo] = u;
		};
		int64_t gi = v < g->nv && !gs_cgraph_removed(g, v) && gs_cgraph_has_list(g, 0, v) ?
			     gs_gp_locate(g->key[0], g->last[0], g->page[0], g->ngtt[0], v) : -1;
		int64_t deg, r;

		if (gi >= 0 && gs_gp_group_len(g->page[0], g->ngtt[0], (uint64_t)gi) == 1) {
			/* a list in one page: degree, picks and entries under one reference */
			deg = gs_cgraph_pages(g, 0, v, [&](const uint8_t *page, uint32_t t, uint64_t) {
				const uint8_t *ids, *w;
				uint64_t dg = 0;

				if (gs_gp_list(&g->gm, page, t, &dg, &ids, &w))
					return (int64_t)-1;
				if (dg > f && lane == 0)
					gs_graph_sample_pick(seed, hop, v, dg, f, pk);
				__syncwarp();
				return gs_cgraph_page_list(&g->gm, page, t, 0,
							   [&](uint64_t k, uint64_t u, float) {
					keep(k, u, dg);
				});
			});
			r = deg;
		} else {
			/* a large vertex (or none): the degree over its pages first */
			deg = gs_cgraph_degree(g, 0, v);
			if (deg > 0 && (uint64_t)deg > f && lane == 0)
				gs_graph_sample_pick(seed, hop, v, (uint64_t)deg, f, pk);
			__syncwarp();
			r = deg <= 0 ? deg : gs_cgraph_list(g, 0, v, [&](uint64_t k, uint64_t u, float) {
				keep(k, u, (uint64_t)deg);
			});
		}
		if (lane == 0) {
			if (deg < 0 || r != deg)
				atomicCAS((unsigned long long *)err, 0, (unsigned long long)-EIO);
			count[i] = deg < 0 ? 0 : (uint32_t)((uint64_t)deg < f ? (uint64_t)deg : f);
		}
		__syncwarp();
	}
}

static __global__ void k_emit(const uint64_t *nodes, uint64_t a, uint64_t n, uint32_t f,
			      const uint64_t *slot, const uint32_t *count, const uint64_t *off,
			      uint64_t ebase, uint64_t *src, uint64_t *dst, uint32_t *src_pos)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n * f; t += stride) {
		uint64_t i = t / f, k = t % f;

		if (k >= count[i])
			continue;
		uint64_t e = ebase + off[i] + k;

		src[e] = nodes[a + i];
		dst[e] = slot[i * f + k];
		src_pos[e] = (uint32_t)(a + i);
	}
}

/* New vertices among u[0..n): the first occurrence of each vertex not yet a
 * node, in order (first[] is all ones outside a call). */
static __global__ void k_first(const uint64_t *u, uint64_t n, const uint32_t *pos_of,
			       uint64_t *first)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		if (pos_of[u[e]] == U32_NONE)
			atomicMin((unsigned long long *)&first[u[e]], (unsigned long long)e);
}

static __global__ void k_flag(const uint64_t *u, uint64_t n, const uint32_t *pos_of,
			      const uint64_t *first, uint32_t *flag)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		flag[e] = pos_of[u[e]] == U32_NONE && first[u[e]] == e;
}

static __global__ void k_add(const uint64_t *u, uint64_t n, const uint32_t *flag,
			     const uint32_t *fpos, uint64_t base, uint64_t *nodes, uint32_t *pos_of,
			     uint64_t *first)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		if (flag[e]) {
			uint64_t p = base + fpos[e];

			nodes[p] = u[e];
			pos_of[u[e]] = (uint32_t)p;
			first[u[e]] = UINT64_MAX;
		}
}

static __global__ void k_dst_pos(const uint64_t *dst, uint64_t n, const uint32_t *pos_of,
				 uint32_t *dst_pos)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		dst_pos[e] = pos_of[dst[e]];
}

static __global__ void k_unpos(const uint64_t *nodes, uint64_t n, uint32_t *pos_of)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		pos_of[nodes[i]] = U32_NONE;
}

void gs_cuda_graph_sample_free(struct gs_cuda_graph_sample *s)
{
	if (!s)
		return;
	cudaFree(s->nodes);
	cudaFree(s->src);
	cudaFree(s->dst);
	cudaFree(s->src_pos);
	cudaFree(s->dst_pos);
	memset(s, 0, sizeof(*s));
}

static int sample_alloc(struct gs_cuda_graph *cg, struct gs_cuda_graph_sample *s, uint64_t nodes,
			uint64_t edges)
{
	int ret = 0;

	if (s->cap_nodes < nodes || s->cap_edges < edges) {
		gs_cuda_graph_sample_free(s);
		CU(cudaMalloc(&s->nodes, (nodes + 1) * 8));
		CU(cudaMalloc(&s->src, (edges + 1) * 8));
		CU(cudaMalloc(&s->dst, (edges + 1) * 8));
		CU(cudaMalloc(&s->src_pos, (edges + 1) * 4));
		CU(cudaMalloc(&s->dst_pos, (edges + 1) * 4));
		s->cap_nodes = nodes;
		s->cap_edges = edges;
	}
	if (cg->scap < edges || cg->scap < nodes) {
		uint64_t c = edges > nodes ? edges : nodes;

		cudaFree(cg->d_pick);
		cudaFree(cg->d_slot);
		cudaFree(cg->d_off);
		cudaFree(cg->d_count);
		cudaFree(cg->d_flag);
		cudaFree(cg->d_fpos);
		cudaFree(cg->d_tmp);
		cg->d_pick = cg->d_slot = cg->d_off = NULL;
		cg->d_count = cg->d_flag = cg->d_fpos = NULL;
		cg->d_tmp = NULL;
		cg->scap = 0;
		CU(cudaMalloc(&cg->d_pick, (c + 1) * 8));
		CU(cudaMalloc(&cg->d_slot, (c + 1) * 8));
		CU(cudaMalloc(&cg->d_off, (c + 1) * 8));
		CU(cudaMalloc(&cg->d_count, (c + 1) * 4));
		CU(cudaMalloc(&cg->d_flag, (c + 1) * 4));
		CU(cudaMalloc(&cg->d_fpos, (c + 1) * 4));
		/* cub with our own scratch: thrust's would be cudaMalloc'd and
		 * cudaFree'd per call, and cudaFree waits for the whole device (a
		 * gather running beside the sampler, every hop) */
		size_t b1 = 0, b2 = 0, b3 = 0;

		CU(cub::DeviceScan::ExclusiveScan(NULL, b1, cg->d_count, cg->d_off,
						  cuda::std::plus<uint64_t>(), (uint64_t)0, c + 1,
						  cg->ss));
		CU(cub::DeviceScan::ExclusiveSum(NULL, b2, cg->d_flag, cg->d_fpos, c + 1, cg->ss));
		CU(cub::DeviceReduce::Max(NULL, b3, cg->d_slot, (uint64_t *)cg->d_cnt, c + 1,
					  cg->ss));
		cg->tmp_bytes = b1 > b2 ? b1 : b2;
		cg->tmp_bytes = b3 > cg->tmp_bytes ? b3 : cg->tmp_bytes;
		CU(cudaMalloc(&cg->d_tmp, cg->tmp_bytes + 16));
		cg->scap = c;
	}
out:
	return ret;
}

/* Append the new vertices of u[0..n) to the node list (first-seen order);
 * returns how many or -errno. */
static int64_t add_nodes(struct gs_cuda_graph *cg, struct gs_cuda_graph_sample *s,
			 const uint64_t *u, uint64_t n)
{
	uint32_t lastf = 0, lastp = 0;
	int ret = 0;

	if (!n)
		return 0;
	size_t tb = cg->tmp_bytes;

	k_first<<<grid_for(n, 256), 256, 0, cg->ss>>>(u, n, cg->d_pos_of, cg->d_first);
	k_flag<<<grid_for(n, 256), 256, 0, cg->ss>>>(u, n, cg->d_pos_of, cg->d_first, cg->d_flag);
	CU(cub::DeviceScan::ExclusiveSum(cg->d_tmp, tb, cg->d_flag, cg->d_fpos, n, cg->ss));
	k_add<<<grid_for(n, 256), 256, 0, cg->ss>>>(u, n, cg->d_flag, cg->d_fpos, s->nnodes,
						     s->nodes, cg->d_pos_of, cg->d_first);
	ret = launched(cg, "sample add");
	if (ret)
		return ret;
	CU(cudaMemcpy(&lastf, cg->d_flag + n - 1, 4, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&lastp, cg->d_fpos + n - 1, 4, cudaMemcpyDeviceToHost));
	s->nnodes += (uint64_t)lastf + lastp;
out:
	return ret ? ret : (int64_t)lastf + lastp;
}

int gs_cuda_graph_sample(struct gs_cuda_graph *cg, const uint64_t *seeds, uint32_t nseeds,
			 const uint32_t *fanouts, uint32_t nhops, uint64_t rng_seed,
			 struct gs_cuda_graph_sample *s, struct gs_cuda_graph_stats *st)
{
	uint64_t max_nodes, max_edges;
	struct gs_cuda_array_stats a0;
	double t0;
	int64_t r;
	int ret;

	if (!cg || !s || (nseeds && !seeds))
		return -EINVAL;
	if (!cg->c || !cg->dv)
		return -EIO;	/* a failed sync */
	ret = gs_graph_sample_bounds(nseeds, fanouts, nhops, &max_nodes, &max_edges);
	if (ret)
		return ret;
	stats_begin(cg, &a0, &t0);
	ret = sample_alloc(cg, s, max_nodes, max_edges);
	if (ret)
		goto out;
	CU(cudaMemset(cg->d_err, 0, 8));
	s->nnodes = s->nedges = 0;
	s->nhops = nhops;
	memset(s->hop_nodes, 0, sizeof(s->hop_nodes));
	memset(s->hop_edges, 0, sizeof(s->hop_edges));
	/* the seeds (host or GPU memory), checked, then deduplicated like picks */
	CU(cudaMemcpy(cg->d_slot, seeds, (size_t)nseeds * 8, cudaMemcpyDefault));
	if (nseeds) {
		uint64_t mx = 0;
		size_t tb = cg->tmp_bytes;

		CU(cub::DeviceReduce::Max(cg->d_tmp, tb, cg->d_slot, (uint64_t *)cg->d_cnt, nseeds,
					  cg->ss));
		ret = launched(cg, "sample seeds");
		if (ret)
			goto out;
		CU(cudaMemcpy(&mx, cg->d_cnt, 8, cudaMemcpyDeviceToHost));
		if (mx >= cg->l->nv) {
			ret = -EINVAL;
			goto out;
		}
	}
	r = add_nodes(cg, s, cg->d_slot, nseeds);
	if (r < 0) {
		ret = (int)r;
		goto out;
	}
	s->hop_nodes[1] = s->nnodes;
	for (uint32_t h = 0; h < nhops; h++) {
		uint64_t a = s->hop_nodes[h], n = s->hop_nodes[h + 1] - a, ne = 0;
		uint32_t f = fanouts[h], lastc = 0;
		uint64_t lasto = 0;

		s->hop_edges[h] = s->nedges;
		cg->passes++;
		if (n) {
			size_t tb = cg->tmp_bytes;

			k_sample<<<bam_grid(cg, n), 256, 0, cg->ss>>>(cg->dv, s->nodes, a, n, f, h,
								       rng_seed, cg->d_pick,
								       cg->d_slot, cg->d_count,
								       cg->d_err);
			CU(cub::DeviceScan::ExclusiveScan(cg->d_tmp, tb, cg->d_count, cg->d_off,
							  cuda::std::plus<uint64_t>(), (uint64_t)0,
							  n, cg->ss));
			ret = launched(cg, "sample hop");
			if (ret)
				goto out;
			CU(cudaMemcpy(&lastc, cg->d_count + n - 1, 4, cudaMemcpyDeviceToHost));
			CU(cudaMemcpy(&lasto, cg->d_off + n - 1, 8, cudaMemcpyDeviceToHost));
			ne = lasto + lastc;
			k_emit<<<grid_for(n * f, 256), 256, 0, cg->ss>>>(s->nodes, a, n, f, cg->d_slot,
									  cg->d_count, cg->d_off,
									  s->nedges, s->src, s->dst,
									  s->src_pos);
			r = add_nodes(cg, s, s->dst + s->nedges, ne);
			if (r < 0) {
				ret = (int)r;
				goto out;
			}
			s->nedges += ne;
		}
		s->hop_nodes[h + 2] = s->nnodes;
	}
	s->hop_edges[nhops] = s->nedges;
	if (s->nedges) {
		k_dst_pos<<<grid_for(s->nedges, 256), 256, 0, cg->ss>>>(s->dst, s->nedges,
									 cg->d_pos_of, s->dst_pos);
		ret = launched(cg, "sample positions");
	}
	if (!ret)
		ret = dev_err(cg);
out:
	if (s->nnodes) {	/* the vertex -> position map back to empty */
		k_unpos<<<grid_for(s->nnodes, 256), 256, 0, cg->ss>>>(s->nodes, s->nnodes,
								       cg->d_pos_of);
		int r2 = launched(cg, "sample reset");

		if (!ret)
			ret = r2;
	}
	stats_end(cg, &a0, t0, st);
	return ret;
}
