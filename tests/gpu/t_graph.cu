// SPDX-License-Identifier: MIT
/*
 * Graph objects on the GPU (gstore_cuda_graph.h), in-process over a gstore
 * image: graphs imported by gstore itself, then BFS, CC and k-hop sampling
 * on the GPU, each compared exactly with the CPU engine (gs_graph_bfs,
 * gs_graph_cc) and with gs_graph_sample; and a benchmark on an R-MAT graph
 * several times larger than the GPU cache: the graph object by pass (CAM)
 * and through the page cache (BaM) against load-all-then-run (the exported
 * CSR read whole with O_DIRECT, copied, run in GPU memory) and against the
 * CSR arrays through BaM caches of the same size.
 *
 *   t_graph [check|small|bench|all [SCALE]]     (default: all, SCALE 19)
 *   t_graph sample [SCALE]                      (default SCALE 16)
 *
 * small: two small graphs, every kernel once (for compute-sanitizer).
 * sample: the sampler with the graph in the caches against gs_graph_sample,
 * and beside a kernel that holds every SM (bench runs these rows too).
 *
 * Env: GS_GRAPH_DIR (image and temp files; default build/gpu),
 * GS_GRAPH_CACHE_MIB (GPU cache and staging; default a quarter of the
 * graph object), GS_GRAPH_BATCHES (sampling batches, 20).
 */
#include <sys/stat.h>

#include <vector>

#include <cub/device/device_scan.cuh>
#include <thrust/execution_policy.h>
#include <thrust/scan.h>

#include "common.cuh"
#define GT_TAG "t_graph"
#include "graph_gen.cuh"
extern "C" {
#include "gstore_fs.h"
}

static const char *dir_ = "build/gpu";
static char img_[4096];
static struct gs_fs *fs_;
static struct gs_q *q_;
static int fails_;

#define CHECK(cond, ...)                                                             \
	do {                                                                         \
		if (!(cond)) {                                                       \
			printf("t_graph: FAIL: " __VA_ARGS__);                       \
			printf("\n");                                                \
			fails_++;                                                    \
		}                                                                    \
	} while (0)

static struct gs_graph *import(const char *name, const struct gen *gp, uint32_t flags)
{
	return graph_import(fs_, dir_, name, gp, flags);
}

/* The first vertex index with an out-neighbour. */
static uint64_t some_source(struct gs_graph *g, uint64_t from)
{
	struct gs_graph_info gi;
	uint64_t id;

	gs_graph_info(g, &gi);
	for (uint64_t v = from; v < gi.nv; v++) {
		OK(gs_graph_vertex_ids(g, v, 1, &id));
		if (gs_graph_degree(g, id, GS_GRAPH_OUT) > 0)
			return v;
	}
	return 0;
}

/* ---- the checks: GPU results equal the CPU engine's ---- */

static void check_bfs(struct gs_graph *g, struct gs_cuda_graph *cg, const char *name, uint64_t src)
{
	uint64_t nv = gs_cuda_graph_layout(cg)->nv, id;
	std::vector<int64_t> want(nv);
	std::vector<int32_t> got(nv);
	int32_t *d;

	OK(gs_graph_vertex_ids(g, src, 1, &id));
	OK(gs_graph_bfs(g, id, want.data(), NULL));
	CK(cudaMalloc(&d, nv * 4));
	static const char *mname[] = { "bam", "cam", "cam-topdown", "cam-bottomup" };

	for (unsigned mode = 0; mode < 4; mode++) {
		struct gs_cuda_graph_stats st = {};
		int lv = gs_cuda_graph_bfs(cg, src, d, mode, &st);
		long bad = 0;

		CK(cudaMemcpy(got.data(), d, nv * 4, cudaMemcpyDeviceToHost));
		for (uint64_t v = 0; v < nv; v++)
			bad += want[v] != got[v];
		CHECK(lv >= 0 && !bad, "%s: bfs %s from %llu: %d, %ld of %llu depths differ", name,
		      mname[mode], (unsigned long long)src, lv, bad, (unsigned long long)nv);
		printf("t_graph: %s: bfs %s: %d levels (%u bottom-up), %ld depths differ, %.1f KiB "
		       "read, %llu requests\n", name, mname[mode], lv, st.bottom_up, bad,
		       st.bytes_read / 1024.0, (unsigned long long)st.requests);
	}
	CK(cudaFree(d));
}

static void check_cc(struct gs_graph *g, struct gs_cuda_graph *cg, const char *name)
{
	uint64_t nv = gs_cuda_graph_layout(cg)->nv;
	std::vector<uint64_t> want(nv), got(nv);
	uint64_t *d;
	int64_t wc = gs_graph_cc(g, want.data(), NULL);

	CK(cudaMalloc(&d, nv * 8));
	for (unsigned mode = 0; mode < 2; mode++) {
		struct gs_cuda_graph_stats st = {};
		int64_t c = gs_cuda_graph_cc(cg, d, mode, &st);
		long bad = 0;

		CK(cudaMemcpy(got.data(), d, nv * 8, cudaMemcpyDeviceToHost));
		for (uint64_t v = 0; v < nv; v++)
			bad += want[v] != got[v];
		CHECK(c == wc && !bad, "%s: cc %s: %lld components (cpu %lld), %ld labels differ",
		      name, mode ? "cam" : "bam", (long long)c, (long long)wc, bad);
		printf("t_graph: %s: cc %s: %lld components (cpu %lld), %ld labels differ\n", name,
		       mode ? "cam" : "bam", (long long)c, (long long)wc, bad);
	}
	CK(cudaFree(d));
}

static void check_sample(struct gs_graph *g, struct gs_cuda_graph *cg, const char *name)
{
	uint64_t nv = gs_cuda_graph_layout(cg)->nv, x = 77;
	uint32_t fan[2][2] = { { 25, 10 }, { 10, 5 } };
	std::vector<uint64_t> seeds(300);
	struct gs_cuda_graph_sample ds = {};

	for (auto &s : seeds)
		s = xs(&x) % nv;
	seeds[7] = seeds[3];
	for (int k = 0; k < 2; k++) {
		struct gs_graph_sample s;
		struct gs_cuda_graph_stats st = {};

		OK(gs_graph_sample(g, seeds.data(), (uint32_t)seeds.size(), fan[k], 2, 1234 + k, &s));
		int r = gs_cuda_graph_sample(cg, seeds.data(), (uint32_t)seeds.size(), fan[k], 2,
					     1234 + k, &ds, &st);
		int diff = r ? -1 : same_sample(&ds, &s);

		CHECK(!diff, "%s: sample %u,%u: %s (%d)", name, fan[k][0], fan[k][1],
		      r ? strerror(-r) : "differs from gs_graph_sample", diff);
		printf("t_graph: %s: sample %u,%u: %llu nodes, %llu edges (cpu %llu, %llu), %s\n",
		       name, fan[k][0], fan[k][1], (unsigned long long)ds.nnodes,
		       (unsigned long long)ds.nedges, (unsigned long long)s.nnodes,
		       (unsigned long long)s.nedges, diff ? "DIFFER" : "equal");
		gs_graph_sample_free(&s);
	}
	gs_cuda_graph_sample_free(&ds);
}

static struct gs_cuda_graph *open_cg(struct gs_graph *g, size_t cache, size_t stage)
{
	struct gs_cuda_graph_params p = {};
	struct gs_cuda_graph *cg;

	p.cache_bytes = cache;
	p.stage_bytes = stage;
	OK(gs_cuda_graph_open(&cg, g, q_, &p));
	return cg;
}

static void check_all(struct gs_graph *g, const char *name, size_t stage)
{
	struct gs_cuda_graph *cg = open_cg(g, 4u << 20, stage);
	const struct gs_graph_layout *l = gs_cuda_graph_layout(cg);
	uint64_t large = 0;

	for (uint64_t i = 0; i < l->dir[0].ngtt; i++)
		large += (l->dir[0].gtt_page[i] & GS_GP_GTT_LARGE) != 0;
	printf("t_graph: %s: layout: %llu pages (%llu of large vertices), %u extents, %s lists\n",
	       name, (unsigned long long)l->dir[0].ngtt, (unsigned long long)large, l->next,
	       (l->flags & GS_GP_F_VARINT) ? "varint" : "fixed-width");
	check_bfs(g, cg, name, some_source(g, 0));
	check_cc(g, cg, name);
	check_sample(g, cg, name);
	gs_cuda_graph_close(cg);
}

static void checks(void)
{
	struct gen gu = { 14, 120000, 4, 6000, 0, NULL, 1 };
	struct gen gd = { 14, 120000, 3, 3000, 1, NULL, 2 };
	struct gen gs = { 13, 50000, 2, 4000, 0, sparse_id, 3 };
	struct gs_graph *g;

	/* undirected, varint lists, hubs larger than a page */
	g = import("u", &gu, GS_GRAPH_IMPORT_UNDIRECTED);
	check_all(g, "u", 1u << 20);	/* 512 KiB halves: many chunks */
	/* updates on the CPU side, merged, made visible by the sync point */
	struct gs_cuda_graph *cg = open_cg(g, 4u << 20, 1u << 20);

	for (uint64_t v = 1; v < 300; v++) {	/* new edges (or ones there already) */
		int r = gs_graph_add_edge(g, v, 16383 - v, 1.0f);

		CHECK(r >= 0 || r == -EEXIST, "u: add edge: %s", strerror(-r));
	}
	OK(gs_graph_del_vertex(g, 5));
	int r = gs_cuda_graph_sync(cg);

	CHECK(r == 0, "u: sync: %s", strerror(-r));
	if (r) {
		gs_cuda_graph_close(cg);
		cg = open_cg(g, 4u << 20, 1u << 20);
	}
	printf("t_graph: u after updates: sync %d\n", r);
	check_bfs(g, cg, "u+upd", 1);
	check_cc(g, cg, "u+upd");
	check_sample(g, cg, "u+upd");
	gs_cuda_graph_close(cg);
	gs_graph_close(g);
	/* directed, weighted, fixed-width lists */
	g = import("dw", &gd, GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_FIXED);
	check_all(g, "dw", 2u << 20);
	gs_graph_close(g);
	/* directed, weighted, varint */
	g = import("dwv", &gd, GS_GRAPH_IMPORT_DIRECTED);
	check_all(g, "dwv", 2u << 20);
	gs_graph_close(g);
	/* sparse ids (an id map: the GPU works on indices) */
	g = import("sp", &gs, GS_GRAPH_IMPORT_UNDIRECTED);
	check_all(g, "sp", 2u << 20);
	gs_graph_close(g);
}

/* A small graph for compute-sanitizer: every kernel once (varint and fixed
 * lists, a large vertex, both modes, sampling). */
static void checks_small(void)
{
	struct gen g1 = { 10, 6000, 1, 1500, 0, NULL, 4 };
	struct gen g2 = { 11, 12000, 1, 1500, 1, NULL, 5 };
	struct gs_graph *g;

	g = import("s1", &g1, GS_GRAPH_IMPORT_UNDIRECTED);
	check_all(g, "s1", 64u << 10);
	gs_graph_close(g);
	g = import("s2", &g2, GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_FIXED);
	check_all(g, "s2", 64u << 10);
	gs_graph_close(g);
}

/* ---- the benchmark ---- */

struct csr_dev {	/* CSR in GPU memory (load-all) */
	const uint64_t *rp;
	const uint32_t *ci;
};

struct csr_bam {	/* CSR arrays through BaM caches */
	struct gs_bam *rp, *ci;
};

static __device__ uint64_t rowp(const csr_dev &c, uint64_t v) { return c.rp[v]; }
static __device__ uint64_t colx(const csr_dev &c, uint64_t e) { return c.ci[e]; }
static __device__ uint64_t rowp(const csr_bam &c, uint64_t v) { return gs_array_get_u64(c.rp, v); }
static __device__ uint64_t colx(const csr_bam &c, uint64_t e) { return gs_array_get_u32(c.ci, e); }

template <typename G>
static __global__ void k_csr_bfs(G g, uint64_t nv, int32_t *depth, int32_t level, int *more)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	uint64_t chunk = (nv + nwarps - 1) / nwarps, lo = warp * chunk;
	uint64_t hi = lo + chunk < nv ? lo + chunk : nv;
	int lane = threadIdx.x & 31, found = 0;

	for (uint64_t base = lo; base < hi; base += 32) {
		uint64_t v = base + lane;
		unsigned m = __ballot_sync(0xffffffffu, v < hi && depth[v] == level);

		while (m) {
			uint64_t f = base + __ffs(m) - 1;
			uint64_t s = rowp(g, f), e = rowp(g, f + 1);

			m &= m - 1;
			for (uint64_t k = s + lane; k < e; k += 32) {
				uint64_t u = colx(g, k);

				if (u < nv && depth[u] < 0) {
					depth[u] = level + 1;
					found = 1;
				}
			}
			__syncwarp();
		}
	}
	if (__any_sync(0xffffffffu, found) && lane == 0)
		*more = 1;
}

static __device__ uint64_t uf_find(uint64_t *p, uint64_t x)
{
	for (;;) {
		uint64_t y = *(volatile uint64_t *)&p[x];

		if (y == x)
			return x;
		uint64_t z = *(volatile uint64_t *)&p[y];

		if (z != y)
			*(volatile uint64_t *)&p[x] = z;
		x = z;
	}
}

static __global__ void k_csr_cc(csr_dev g, uint64_t nv, uint64_t *p)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t v = warp; v < nv; v += nwarps)
		for (uint64_t k = g.rp[v] + lane; k < g.rp[v + 1]; k += 32) {
			uint64_t a = v, b = g.ci[k];

			for (;;) {
				a = uf_find(p, a);
				b = uf_find(p, b);
				if (a == b)
					break;
				if (a < b) {
					uint64_t t = a;

					a = b;
					b = t;
				}
				if (atomicCAS((unsigned long long *)&p[a], a, b) == a)
					break;
			}
		}
}

static __global__ void k_csr_cc_final(uint64_t nv, uint64_t *p)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride)
		p[v] = uf_find(p, v);
}

static __global__ void k_iota(uint64_t *p, uint64_t nv)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride)
		p[v] = v;
}

template <typename G>
static int csr_bfs(G g, uint64_t nv, uint64_t src, int32_t *depth, int *more)
{
	int level = 0, zero = 0;

	CK(cudaMemset(depth, 0xff, nv * 4));
	CK(cudaMemcpy(depth + src, &zero, 4, cudaMemcpyHostToDevice));
	for (;; level++) {
		*more = 0;
		k_csr_bfs<<<264, 256>>>(g, nv, depth, level, more);
		KCK();
		if (!*more)
			break;
	}
	return level + 1;
}

/* Sampling over CSR through BaM: per frontier vertex rowPtr (2 entries)
 * and one colIdx read per pick; the same picks as gs_graph_sample. */
static __global__ void k_csr_sample(csr_bam g, const uint64_t *nodes, uint64_t a, uint64_t n,
				    uint32_t f, uint32_t hop, uint64_t seed, uint64_t *pick,
				    uint64_t *slot, uint32_t *count)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t nwarps = (uint64_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x & 31;

	for (uint64_t i = warp; i < n; i += nwarps) {
		uint64_t v = nodes[a + i], *pk = pick + i * f, *sl = slot + i * f;
		uint64_t s = gs_array_get_u64(g.rp, v), e = gs_array_get_u64(g.rp, v + 1);
		uint64_t deg = e - s, take = deg < f ? deg : f;

		if (deg > f && lane == 0)
			gs_graph_sample_pick(seed, hop, v, deg, f, pk);
		__syncwarp();
		for (uint64_t k = lane; k < 32 * ((take + 31) / 32); k += 32) {
			uint64_t pos = k < take ? (deg > f ? pk[k] : k) : 0;
			uint64_t u = gs_array_get_u32(g.ci, s + pos);	/* all lanes take part */

			if (k < take)
				sl[k] = u;
		}
		if (lane == 0)
			count[i] = (uint32_t)take;
		__syncwarp();
	}
}

static __global__ void k_emit(const uint64_t *nodes, uint64_t a, uint64_t n, uint32_t f,
			      const uint64_t *slot, const uint32_t *count, const uint64_t *off,
			      uint64_t ebase, uint64_t *dst)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n * f; t += stride) {
		uint64_t i = t / f, k = t % f;

		if (k < count[i])
			dst[ebase + off[i] + k] = slot[i * f + k];
	}
}

/* New nodes among u[0..n), first-seen order, with a vertex -> position map. */
static __global__ void k_dedup(const uint64_t *u, uint64_t n, uint32_t *pos_of, uint64_t *first,
			       int phase, const uint32_t *flag, const uint32_t *fpos,
			       uint32_t *flag_out, uint64_t base, uint64_t *nodes)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		uint64_t x = u[e];

		if (phase == 0 && pos_of[x] == UINT32_MAX)
			atomicMin((unsigned long long *)&first[x], (unsigned long long)e);
		else if (phase == 1)
			flag_out[e] = pos_of[x] == UINT32_MAX && first[x] == e;
		else if (phase == 2 && flag[e]) {
			nodes[base + fpos[e]] = x;
			pos_of[x] = (uint32_t)(base + fpos[e]);
			first[x] = UINT64_MAX;
		}
	}
}

static __global__ void k_unpos(const uint64_t *nodes, uint64_t n, uint32_t *pos_of)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		pos_of[nodes[i]] = UINT32_MAX;
}

struct csr_sampler {
	uint64_t *nodes, *dst, *pick, *slot, *off, *first;
	uint32_t *count, *flag, *fpos, *pos_of;
	int blocks;	/* of the BaM kernel */
};

static uint64_t csr_add(csr_sampler &c, const uint64_t *u, uint64_t n, uint64_t base)
{
	uint32_t lf = 0, lp = 0;
	int gr = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);

	if (!n)
		return 0;
	k_dedup<<<gr, 256>>>(u, n, c.pos_of, c.first, 0, NULL, NULL, NULL, 0, NULL);
	k_dedup<<<gr, 256>>>(u, n, c.pos_of, c.first, 1, NULL, NULL, c.flag, 0, NULL);
	KCK();
	thrust::exclusive_scan(thrust::device, c.flag, c.flag + n, c.fpos);
	k_dedup<<<gr, 256>>>(u, n, c.pos_of, c.first, 2, c.flag, c.fpos, NULL, base, c.nodes);
	KCK();
	CK(cudaMemcpy(&lf, c.flag + n - 1, 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&lp, c.fpos + n - 1, 4, cudaMemcpyDeviceToHost));
	return (uint64_t)lf + lp;
}

/* One batch over CSR-through-BaM; returns nodes, *nedges. */
static uint64_t csr_sample(csr_sampler &c, csr_bam g, const uint64_t *seeds_h, uint32_t ns,
			   const uint32_t *fan, uint32_t nhops, uint64_t seed, uint64_t *nedges)
{
	uint64_t nn = 0, ne = 0, hop_a = 0, hop_b;

	CK(cudaMemcpy(c.slot, seeds_h, ns * 8, cudaMemcpyHostToDevice));
	nn = csr_add(c, c.slot, ns, 0);
	hop_b = nn;
	for (uint32_t h = 0; h < nhops; h++) {
		uint64_t n = hop_b - hop_a, lo = 0;
		uint32_t lc = 0, f = fan[h];

		if (n) {
			k_csr_sample<<<(int)((n * 32 + 255) / 256 < (uint64_t)c.blocks ?
					     (n * 32 + 255) / 256 : (uint64_t)c.blocks), 256>>>(
				g, c.nodes, hop_a, n, f, h, seed, c.pick, c.slot, c.count);
			KCK();
			thrust::exclusive_scan(thrust::device, c.count, c.count + n, c.off,
					       (uint64_t)0);
			CK(cudaMemcpy(&lc, c.count + n - 1, 4, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(&lo, c.off + n - 1, 8, cudaMemcpyDeviceToHost));
			k_emit<<<(int)((n * f + 255) / 256 < 4096 ? (n * f + 255) / 256 : 4096), 256>>>(
				c.nodes, hop_a, n, f, c.slot, c.count, c.off, ne, c.dst);
			KCK();
			nn += csr_add(c, c.dst + ne, lo + lc, nn);
			ne += lo + lc;
		}
		hop_a = hop_b;
		hop_b = nn;
	}
	k_unpos<<<(int)((nn + 255) / 256), 256>>>(c.nodes, nn, c.pos_of);
	KCK();
	*nedges = ne;
	return nn;
}

/* An array file: its ino, size and extents (under a read lease). */
struct arr {
	uint64_t ino, size;
	struct gs_lease *lease;
	std::vector<gs_cam_ext> ext;
};

static void arr_open(struct arr *a, const char *name)
{
	struct gs_stat st, dst;

	OK(gs_fs_lookup(fs_, GS_ROOT_INO, "arrays", &dst));
	OK(gs_fs_lookup(fs_, dst.ino, name, &st));
	a->ino = st.ino;
	a->size = st.size;
	OK(gs_fs_lease_begin(fs_, st.ino, 0, (st.size + 4095) & ~4095ull, GS_LEASE_READ, &a->lease));
	int n = gs_fs_lease_export(a->lease, 4096, NULL, 0);

	OK(n);
	a->ext.resize(n);
	OK(gs_fs_lease_export(a->lease, 4096, a->ext.data(), n));
}

/* Read array @a whole with O_DIRECT (4 MiB requests, one after the other:
 * a loader's sequential read) into @buf. */
static void arr_read_all(struct arr *a, int fd, char *buf)
{
	for (auto &e : a->ext)
		for (uint64_t o = 0; o < e.nblk * 4096; o += 4u << 20) {
			uint64_t len = e.nblk * 4096 - o < (4u << 20) ? e.nblk * 4096 - o : 4u << 20;
			ssize_t r = pread(fd, buf + e.blk * 4096 + o, len, (off_t)(e.dev_off + o));

			if (r != (ssize_t)len) {
				printf("t_graph: load-all read: %zd of %llu\n", r,
				       (unsigned long long)len);
				exit(1);
			}
		}
}

static void bam_on(struct arr *a, size_t cache, struct gs_cuda **c, struct gs_cuda_array **ar)
{
	struct gs_cuda_params p = {};
	struct gs_cuda_array_params ap = {};

	p.block_size = 4096;
	p.buf_bytes = 1u << 20;
	p.ext = a->ext.data();
	p.next = (uint32_t)a->ext.size();
	OK(gs_cuda_open(c, q_, &p));
	ap.cache_bytes = cache < (256u << 10) ? 256u << 10 : cache;
	ap.nio = 1024;
	OK(gs_cuda_array_open(ar, *c, &ap));
}

static void row(const char *what, double s, double base, uint64_t bytes, uint64_t graph)
{
	printf("RESULT graph_%s %.3f s (%.2f x load-all; %.1f MiB read, %.2f x the graph)\n", what, s,
	       base / s, bytes / 1048576.0, (double)bytes / graph);
}

/* ---- a watchdog over the benchmark's rows: a row past its time says where it is
 * (the rings' and caches' counters) and ends the program, instead of the whole
 * part running into run-all.sh's limit with nothing printed ---- */

static const char *volatile row_name_;
static volatile double row_t0_;
static struct gs_cuda_graph *volatile row_cg_;
static struct gs_cuda *volatile row_c_[2];

static void row_begin(const char *name, struct gs_cuda_graph *cg)
{
	row_cg_ = cg;
	row_t0_ = now_s();
	row_name_ = name;
}

static void *watchdog(void *arg)
{
	double cap = *(double *)arg;

	for (;;) {
		struct timespec ts = { 0, 200000000 };

		nanosleep(&ts, NULL);
		if (!row_name_ || now_s() - row_t0_ < cap)
			continue;
		char dbg[2048] = "";

		if (row_cg_)
			gs_cuda_graph_debug(row_cg_, dbg, sizeof(dbg));
		printf("t_graph: FAIL: row %s still running after %.0f s: %s\n", row_name_, cap, dbg);
		for (int i = 0; i < 2; i++)
			if (row_c_[i] && gs_cuda_debug(row_c_[i], dbg, sizeof(dbg)) > 0)
				printf("t_graph: csr ring %d: %s\n", i, dbg);
		fflush(stdout);
		_exit(1);
	}
	return NULL;
}

/* BaM kernels: a quarter as many warps as cache lines at most (no thrashing) */
static int bam_blocks(size_t cache)
{
	uint64_t w = cache / 4096 / 4;

	w = w < 8 ? 8 : w > 264 * 8 ? 264 * 8 : w;
	return (int)(w / 8);
}

/* csr_bfs through BaM with a time cap: levels or -1 past @cap seconds */
static int csr_bfs_capped(csr_bam g, uint64_t nv, uint64_t src, int32_t *depth, int *more,
			  int blocks, double cap)
{
	int level = 0, zero = 0;
	double t0 = now_s();

	CK(cudaMemset(depth, 0xff, nv * 4));
	CK(cudaMemcpy(depth + src, &zero, 4, cudaMemcpyHostToDevice));
	for (;; level++) {
		*more = 0;
		k_csr_bfs<<<blocks, 256>>>(g, nv, depth, level, more);
		KCK();
		if (!*more)
			break;
		if (now_s() - t0 > cap)
			return -1;
	}
	return level + 1;
}

/* ---- the sampler's own cost ---- */

static __global__ void k_busy(long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
}

/* Work that holds every SM for about @ms (8 waves of 2 blocks of 1024
 * threads per SM, each spinning ms / 8), as a gather's copy kernel does
 * while its reads are in flight, on a non-blocking stream of its own. */
static void busy(cudaStream_t s, double ms)
{
	int sms = 0, khz = 0;

	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
	k_busy<<<sms * 16, 1024, 0, s>>>((long long)(ms / 8 * khz));
	CK(cudaGetLastError());
}

/*
 * The sampler with the graph in the caches (no device reads): the GPU's page
 * cache holding every page (warmed by a BaM CC sweep) against gs_graph_sample
 * over a warm fs cache, the same seeds; then beside other work that holds the
 * SMs (the gnn pipeline samples batch i + 1 while batch i is gathered): a
 * thrust scan (its scratch cudaMalloc'd and cudaFree'd: cudaFree waits for the
 * whole device) and a cub scan on a high-priority stream, and the sampler.
 */
static void sampler_rows(struct gs_graph *g, uint64_t nv, uint64_t obj, int batches)
{
	size_t big = ((obj + obj / 4) + (1u << 20)) & ~(size_t)((1u << 20) - 1);
	uint32_t fans[2][2] = { { 25, 10 }, { 10, 5 } };
	std::vector<uint64_t> seeds(1024), hl(nv);
	struct gs_cuda_graph_sample ds = {};
	struct gs_cuda_graph_stats st;
	struct gs_cuda_graph *cg;
	double alone[2] = {};
	uint64_t x = 77, *lab;

	CK(cudaMalloc(&lab, nv * 8));
	cg = open_cg(g, big, 4u << 20);
	OK(gs_cuda_graph_cc(cg, lab, GS_CUDA_GRAPH_BAM, NULL));
	OK(gs_graph_cc(g, hl.data(), NULL));	/* every page into the fs cache */
	for (int k = 0; k < 2; k++) {
		double t_gpu = 0, t_cpu = 0;
		uint64_t rd = 0, rows = 0;

		for (int b = -1; b < batches; b++) {	/* b -1: warm-up, not counted */
			struct gs_graph_sample s;
			double t1;

			for (auto &sd : seeds)
				sd = xs(&x) % nv;
			row_begin("sample warm", cg);
			OK(gs_cuda_graph_sample(cg, seeds.data(), 1024, fans[k], 2, 300 + b, &ds,
						&st));
			t1 = now_s();
			OK(gs_graph_sample(g, seeds.data(), 1024, fans[k], 2, 300 + b, &s));
			if (b >= 0) {
				t_cpu += now_s() - t1;
				t_gpu += st.seconds;
				rd += st.bytes_read;
				rows += ds.nnodes;
			}
			CHECK(!same_sample(&ds, &s), "sampler: warm sample %u,%u differs", fans[k][0],
			      fans[k][1]);
			gs_graph_sample_free(&s);
		}
		alone[k] = t_gpu * 1e3 / batches;
		printf("RESULT graph_sample_%u_%u_warm_gpu %.2f ms/batch (%.2f x gs_graph_sample's "
		       "%.2f ms on the CPU; %llu rows/batch, %.1f KiB read/batch; GPU cache %zu MiB "
		       "holds the graph)\n", fans[k][0], fans[k][1], alone[k], t_cpu / t_gpu,
		       t_cpu * 1e3 / batches, (unsigned long long)(rows / batches),
		       rd / 1024.0 / batches, big >> 20);
	}

	/* beside work that holds the SMs */
	cudaStream_t sb, shi;
	cudaEvent_t e0, e1;
	int lo = 0, hi = 0;
	uint32_t *din, *dout;
	void *tmp = NULL;
	size_t tb = 0, n = 1u << 20;
	float busy_ms = 0;
	double t1, t_thrust, t_cub;

	CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	CK(cudaStreamCreateWithPriority(&shi, cudaStreamNonBlocking, hi));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaMalloc(&din, n * 4));
	CK(cudaMalloc(&dout, n * 4));
	CK(cudaMemset(din, 1, n * 4));
	CK(cub::DeviceScan::ExclusiveSum(NULL, tb, din, dout, n, shi));
	CK(cudaMalloc(&tmp, tb));
	CK(cudaEventRecord(e0, sb));
	busy(sb, 100);
	CK(cudaEventRecord(e1, sb));
	CK(cudaStreamSynchronize(sb));
	CK(cudaEventElapsedTime(&busy_ms, e0, e1));
	busy(sb, 100);
	t1 = now_s();
	thrust::exclusive_scan(thrust::device, din, din + n, dout);
	t_thrust = (now_s() - t1) * 1e3;
	CK(cudaStreamSynchronize(sb));
	busy(sb, 100);
	t1 = now_s();
	CK(cub::DeviceScan::ExclusiveSum(tmp, tb, din, dout, n, shi));
	CK(cudaStreamSynchronize(shi));
	t_cub = (now_s() - t1) * 1e3;
	CK(cudaStreamSynchronize(sb));
	printf("RESULT graph_scan_beside_busy thrust %.2f ms, cub on a high-priority stream %.2f ms,"
	       " beside a %.1f ms kernel holding every SM (1 Mi items)\n", t_thrust, t_cub,
	       busy_ms);
	for (int k = 0; k < 2; k++) {
		for (auto &sd : seeds)
			sd = xs(&x) % nv;
		busy(sb, 100);
		row_begin("sample beside busy", cg);
		OK(gs_cuda_graph_sample(cg, seeds.data(), 1024, fans[k], 2, 900 + k, &ds, &st));
		CK(cudaStreamSynchronize(sb));
		printf("RESULT graph_sample_%u_%u_beside_busy %.2f ms (alone %.2f ms), beside a "
		       "%.1f ms kernel holding every SM\n", fans[k][0], fans[k][1],
		       st.seconds * 1e3, alone[k], busy_ms);
	}
	CK(cudaFree(tmp));
	CK(cudaFree(din));
	CK(cudaFree(dout));
	CK(cudaStreamDestroy(sb));
	CK(cudaStreamDestroy(shi));
	gs_cuda_graph_sample_free(&ds);
	gs_cuda_graph_close(cg);
	CK(cudaFree(lab));
}

/* t_graph sample [SCALE]: the rows above alone, on an R-MAT graph of its own. */
static void sampler_only(unsigned scale)
{
	struct gen gs = { scale, 16ull << scale, 0, 0, 0, NULL, 19 };
	struct gs_graph *g = import("samp", &gs, GS_GRAPH_IMPORT_UNDIRECTED);
	struct gs_graph_layout *l;
	const char *nb = getenv("GS_GRAPH_BATCHES");
	static double cap = 30;	/* the watchdog thread reads it after we return */
	pthread_t wd;

	pthread_create(&wd, NULL, watchdog, &cap);
	pthread_detach(wd);
	OK(gs_graph_layout_get(g, 0, &l));
	uint64_t nv = l->nv, obj = l->bytes;

	gs_graph_layout_put(l);
	sampler_rows(g, nv, obj, nb ? atoi(nb) : 10);
	gs_graph_close(g);
}

static void bench(unsigned scale)
{
	struct gen gb = { scale, 16ull << scale, 0, 0, 0, NULL, 9 };
	double t_imp = now_s();
	struct gs_graph *g = import("bench", &gb, GS_GRAPH_IMPORT_UNDIRECTED);
	struct gs_graph_layout *l;
	struct arr rp, ci;
	char xa[128] = "";

	OK(gs_graph_export_csr(g, "bench.csr"));
	OK(gs_graph_layout_get(g, 0, &l));
	uint64_t nv = l->nv, obj = l->bytes;

	gs_graph_layout_put(l);
	arr_open(&rp, "bench.csr.rowptr");
	arr_open(&ci, "bench.csr.colidx");
	OK(gs_fs_getxattr(fs_, rp.ino, "user.gstore.csr", xa, sizeof(xa) - 1));
	uint64_t csr = rp.size + ci.size;
	const char *cm = getenv("GS_GRAPH_CACHE_MIB");
	size_t cache = cm ? (size_t)atoi(cm) << 20 : obj / 4;
	const char *cs_ = getenv("GS_GRAPH_ROW_S");
	double row_cap = cs_ ? atof(cs_) : 30;

	cache = (cache + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
	if (cache < (4u << 20))
		cache = 4u << 20;
	printf("t_graph: bench: %llu vertices; graph object %.1f MiB (pages), CSR %.1f MiB (%s); "
	       "GPU cache / staging %zu MiB; setup %.1f s\n", (unsigned long long)nv,
	       obj / 1048576.0, csr / 1048576.0, xa, cache >> 20, now_s() - t_imp);

	pthread_t wd;

	pthread_create(&wd, NULL, watchdog, &row_cap);
	pthread_detach(wd);
	int fd = open(img_, O_RDONLY | O_DIRECT);

	if (fd < 0) {
		perror(img_);
		exit(1);
	}
	char *hrp, *hci;
	uint64_t *drp;
	uint32_t *dci;
	int32_t *depth;
	int *more;

	CK(cudaMallocHost(&hrp, (rp.size + 4095) & ~4095ull));
	CK(cudaMallocHost(&hci, (ci.size + 4095) & ~4095ull));
	CK(cudaMalloc(&drp, rp.size));
	CK(cudaMalloc(&dci, ci.size));
	CK(cudaMalloc(&depth, nv * 4));
	CK(cudaMallocManaged(&more, 4));
	uint64_t src = some_source(g, 0), id;
	std::vector<int64_t> want(nv);
	std::vector<int32_t> got(nv);

	OK(gs_graph_vertex_ids(g, src, 1, &id));
	OK(gs_graph_bfs(g, id, want.data(), NULL));
	auto cmp_depth = [&](const char *what) {
		long bad = 0;

		CK(cudaMemcpy(got.data(), depth, nv * 4, cudaMemcpyDeviceToHost));
		for (uint64_t v = 0; v < nv; v++)
			bad += want[v] != got[v];
		CHECK(!bad, "bench: %s: %ld depths differ", what, bad);
	};
	/* warm-up: module load, the kernels' first launch */
	CK(cudaMemset(drp, 0, 16));
	csr_bfs(csr_dev{ drp, dci }, 1, 0, depth, more);

	/* ---- BFS: load-all, then BFS in GPU memory */
	row_begin("bfs load-all", NULL);
	double t0 = now_s();

	arr_read_all(&rp, fd, hrp);
	arr_read_all(&ci, fd, hci);
	double t_read = now_s() - t0;

	CK(cudaMemcpy(drp, hrp, rp.size, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dci, hci, ci.size, cudaMemcpyHostToDevice));
	double t_load = now_s() - t0;
	int lv = csr_bfs(csr_dev{ drp, dci }, nv, src, depth, more);
	double t_all = now_s() - t0;

	cmp_depth("load-all bfs");
	printf("t_graph: bench: load-all bfs: read %.3f s, copy %.3f s, bfs %.3f s, %d levels\n",
	       t_read, t_load - t_read, t_all - t_load, lv);
	row("bfs_loadall", t_all, t_all, csr, obj);

	/* ---- BFS over the graph object by pass (CAM), a fresh handle each run */
	struct gs_cuda_graph *cg = NULL;
	struct gs_cuda_graph_stats st = {};

	for (int rep = 0; rep < 3; rep++) {
		unsigned mode = rep < 2 ? GS_CUDA_GRAPH_CAM : GS_CUDA_GRAPH_CAM_TOPDOWN;

		cg = open_cg(g, cache, cache);
		row_begin("bfs object cam", cg);
		int r = gs_cuda_graph_bfs(cg, src, depth, mode, &st);

		CHECK(r > 0, "bench: graph bfs cam: %s", strerror(-r));
		cmp_depth("graph cam bfs");
		printf("t_graph: bench: graph bfs cam (run %d): %.3f s, %u levels (%u bottom-up), "
		       "%llu requests\n", rep + 1, st.seconds, st.passes, st.bottom_up,
		       (unsigned long long)st.requests);
		if (rep)
			row(rep == 1 ? "bfs_object_cam" : "bfs_object_cam_topdown", st.seconds, t_all,
			    st.bytes_read, obj);
		gs_cuda_graph_close(cg);
	}

	/* ---- CC: load-all (union-find over the CSR in GPU memory), the object by sweep */
	std::vector<uint64_t> wl(nv), gl(nv);
	uint64_t *label;
	int64_t wc = gs_graph_cc(g, wl.data(), NULL);

	CK(cudaMalloc(&label, nv * 8));
	row_begin("cc load-all", NULL);
	t0 = now_s();
	arr_read_all(&rp, fd, hrp);
	arr_read_all(&ci, fd, hci);
	CK(cudaMemcpy(drp, hrp, rp.size, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dci, hci, ci.size, cudaMemcpyHostToDevice));
	k_iota<<<1024, 256>>>(label, nv);
	k_csr_cc<<<1024, 256>>>(csr_dev{ drp, dci }, nv, label);
	k_csr_cc_final<<<1024, 256>>>(nv, label);
	KCK();
	double t_cca = now_s() - t0;

	CK(cudaMemcpy(gl.data(), label, nv * 8, cudaMemcpyDeviceToHost));
	CHECK(gl == wl, "bench: load-all cc labels differ");
	row("cc_loadall", t_cca, t_cca, csr, obj);
	for (int mode = GS_CUDA_GRAPH_CAM; mode >= GS_CUDA_GRAPH_BAM; mode--) {
		cg = open_cg(g, cache, cache);
		row_begin(mode ? "cc object cam" : "cc object bam", cg);
		int64_t c = gs_cuda_graph_cc(cg, label, (unsigned)mode, &st);

		CK(cudaMemcpy(gl.data(), label, nv * 8, cudaMemcpyDeviceToHost));
		CHECK(c == wc && gl == wl, "bench: graph cc %s: %lld components (cpu %lld)%s",
		      mode ? "cam" : "bam", (long long)c, (long long)wc,
		      gl == wl ? "" : ", labels differ");
		row(mode ? "cc_object_cam" : "cc_object_bam", st.seconds, t_cca, st.bytes_read, obj);
		gs_cuda_graph_close(cg);
	}

	/* ---- sampling: the object through its page cache vs CSR through BaM caches of
	 * the same total size */
	struct gs_cuda *crp, *cci;
	struct gs_cuda_array *arp, *aci;

	bam_on(&rp, cache / 4, &crp, &arp);
	bam_on(&ci, cache - cache / 4, &cci, &aci);
	row_c_[0] = crp;
	row_c_[1] = cci;
	csr_bam cb = { gs_cuda_array_dev(arp), gs_cuda_array_dev(aci) };
	const char *nb = getenv("GS_GRAPH_BATCHES");
	int batches = nb ? atoi(nb) : 10, cblocks = bam_blocks(cache);
	uint32_t fans[2][2] = { { 25, 10 }, { 10, 5 } };
	uint64_t x = 5;
	std::vector<uint64_t> seeds(1024);
	struct gs_cuda_graph_sample ds = {};
	csr_sampler cs;
	uint64_t mn, me;

	OK(gs_graph_sample_bounds(1024, fans[0], 2, &mn, &me));
	CK(cudaMalloc(&cs.nodes, mn * 8));
	CK(cudaMalloc(&cs.dst, me * 8));
	CK(cudaMalloc(&cs.pick, me * 8));
	CK(cudaMalloc(&cs.slot, me * 8));
	CK(cudaMalloc(&cs.off, me * 8));
	CK(cudaMalloc(&cs.count, me * 4));
	CK(cudaMalloc(&cs.flag, me * 4));
	CK(cudaMalloc(&cs.fpos, me * 4));
	CK(cudaMalloc(&cs.pos_of, nv * 4));
	CK(cudaMalloc(&cs.first, nv * 8));
	CK(cudaMemset(cs.pos_of, 0xff, nv * 4));
	CK(cudaMemset(cs.first, 0xff, nv * 8));
	cs.blocks = cblocks;
	for (int k = 0; k < 2; k++) {
		double t_obj = 0, t_csr = 0;
		uint64_t rd_obj = 0, e_obj = 0, e_csr = 0;
		struct gs_cuda_array_stats b1, b2, c1, c2;

		cg = open_cg(g, cache, 4u << 20);
		OK(gs_cuda_array_invalidate(arp));
		OK(gs_cuda_array_invalidate(aci));
		gs_cuda_array_stats(arp, &b1);
		gs_cuda_array_stats(aci, &b2);
		for (int b = 0; b < batches; b++) {
			for (auto &s : seeds)
				s = xs(&x) % nv;
			row_begin("sample object", cg);
			int r = gs_cuda_graph_sample(cg, seeds.data(), 1024, fans[k], 2, 100 + b, &ds,
						     &st);

			CHECK(!r, "bench: sample: %s", strerror(-r));
			t_obj += st.seconds;
			rd_obj += st.bytes_read;
			e_obj += ds.nedges;
			if (b == 0) {	/* at scale too: the CPU's sample */
				struct gs_graph_sample s;

				OK(gs_graph_sample(g, seeds.data(), 1024, fans[k], 2, 100 + b, &s));
				CHECK(!same_sample(&ds, &s), "bench: sample %u,%u differs from the CPU's",
				      fans[k][0], fans[k][1]);
				gs_graph_sample_free(&s);
			}
			uint64_t ne = 0;

			row_begin("sample csr-bam", NULL);
			double t1 = now_s();

			csr_sample(cs, cb, seeds.data(), 1024, fans[k], 2, 100 + b, &ne);
			t_csr += now_s() - t1;
			e_csr += ne;
		}
		CHECK(e_obj == e_csr, "bench: sampled edges: object %llu, csr %llu",
		      (unsigned long long)e_obj, (unsigned long long)e_csr);
		gs_cuda_array_stats(arp, &c1);
		gs_cuda_array_stats(aci, &c2);
		uint64_t rd_csr = (c1.misses - b1.misses + c2.misses - b2.misses) * 4096;

		printf("RESULT graph_sample_%u_%u_object %.3f s for %d batches of 1024 seeds "
		       "(%.2f x CSR-BaM; %.1f MiB read, %.2f x CSR-BaM's)\n", fans[k][0], fans[k][1],
		       t_obj, batches, t_csr / t_obj, rd_obj / 1048576.0,
		       rd_csr ? (double)rd_obj / rd_csr : 0.0);
		printf("RESULT graph_sample_%u_%u_csr_bam %.3f s (%.1f MiB read; %llu edges)\n",
		       fans[k][0], fans[k][1], t_csr, rd_csr / 1048576.0, (unsigned long long)e_csr);
		gs_cuda_graph_close(cg);
	}

	sampler_rows(g, nv, obj, batches);
	gs_cuda_graph_sample_free(&ds);

	/* ---- BFS through page caches, 4 KiB misses: the object's and CSR's (capped) */
	cg = open_cg(g, cache, cache);
	row_begin("bfs object bam", cg);
	int r = gs_cuda_graph_bfs(cg, src, depth, GS_CUDA_GRAPH_BAM, &st);

	CHECK(r > 0, "bench: graph bfs bam: %s", strerror(-r));
	cmp_depth("graph bam bfs");
	printf("t_graph: bench: graph bfs bam: %.3f s, %u levels, %llu requests\n", st.seconds,
	       st.passes, (unsigned long long)st.requests);
	row("bfs_object_bam", st.seconds, t_all, st.bytes_read, obj);
	gs_cuda_graph_close(cg);
	OK(gs_cuda_array_invalidate(arp));
	OK(gs_cuda_array_invalidate(aci));
	struct gs_cuda_array_stats s1, s2, s3, s4;

	gs_cuda_array_stats(arp, &s1);
	gs_cuda_array_stats(aci, &s2);
	row_begin("bfs csr-bam", NULL);
	t0 = now_s();
	lv = csr_bfs_capped(cb, nv, src, depth, more, cblocks, row_cap / 2);
	double t_cb = now_s() - t0;

	gs_cuda_array_stats(arp, &s3);
	gs_cuda_array_stats(aci, &s4);
	if (lv > 0) {
		cmp_depth("csr-bam bfs");
		row("bfs_csr_bam", t_cb, t_all, (s3.misses - s1.misses + s4.misses - s2.misses) * 4096,
		    obj);
	} else {
		printf("RESULT graph_bfs_csr_bam > %.1f s (stopped; %.1f MiB read by then)\n", t_cb,
		       (s3.misses - s1.misses + s4.misses - s2.misses) * 4096 / 1048576.0);
	}
	row_name_ = NULL;
	row_c_[0] = row_c_[1] = NULL;
	gs_cuda_array_close(arp);
	gs_cuda_array_close(aci);
	gs_cuda_close(crp);
	gs_cuda_close(cci);
	gs_fs_lease_end(rp.lease);
	gs_fs_lease_end(ci.lease);
	close(fd);
	gs_graph_close(g);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	unsigned scale = argc > 2 ? (unsigned)atoi(argv[2]) : 19;
	struct gs_mkfs_opts mo = {};
	struct gs_fs_opts fo = {};
	struct gs_q_params qp = {};

	skip_without_gpu();
	setvbuf(stdout, NULL, _IOLBF, 0);	/* each row as it ends, even into a file */
	gs_set_log_func(log_to_stderr, NULL);
	if (getenv("GS_GRAPH_DIR"))
		dir_ = getenv("GS_GRAPH_DIR");
	mkdir(dir_, 0755);
	snprintf(img_, sizeof(img_), "%s/t_graph.img", dir_);
	unlink(img_);
	/* room for the graph, its CSR export, the import's temp files are outside */
	mo.size = (1ull << 30) << (scale > 20 ? scale - 20 : 0);
	mo.force = 1;
	OK(gs_fs_mkfs(img_, &mo));
	fo.path = img_;
	fo.cache_bytes = 256u << 20;
	int ret = gs_fs_mount(&fs_, &fo);

	if (ret == -EINVAL) {
		fo.flags |= GS_FS_BUFFERED;
		ret = gs_fs_mount(&fs_, &fo);
	}
	OK(ret);
	/* the GPU's own queue over the same image: the pages by their extents */
	qp.path = img_;
	qp.flags = GS_Q_RDONLY | ((fo.flags & GS_FS_BUFFERED) ? GS_Q_BUFFERED : 0);
	qp.min_pollers = 2;
	qp.max_pollers = 2;
	OK(gs_q_open(&q_, &qp));
	if (!strcmp(what, "small"))
		checks_small();
	if (!strcmp(what, "check") || !strcmp(what, "all"))
		checks();
	if (!strcmp(what, "bench") || !strcmp(what, "all"))
		bench(scale);
	if (!strcmp(what, "sample"))
		sampler_only(argc > 2 ? scale : 16);
	gs_q_close(q_);
	OK(gs_fs_unmount(fs_));
	unlink(img_);
	printf("t_graph: %s\n", fails_ ? "FAIL" : "PASS");
	return fails_ ? 1 : 0;
}
