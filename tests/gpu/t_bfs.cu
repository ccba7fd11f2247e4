// SPDX-License-Identifier: MIT
/*
 * The end-to-end app: BFS on the GPU over a graph stored in a mounted
 * gstore, its neighbour lists read through the GPU path, against BaM's
 * baseline (load the whole CSR into GPU memory first, then BFS), with the
 * depths of a CPU BFS as the reference.
 *
 *   t_bfs PREFIX [SOURCE|"" [CACHE_MIB [BLOCKS]]]
 *
 * PREFIX is arrays/NAME.csr on the mount (`gstore graph export-csr NAME`):
 * PREFIX.rowptr (u64, nv + 1) and PREFIX.colidx (ids of the width the xattr
 * user.gstore.csr gives).  The gstore run attaches to the daemon twice
 * (gs_cuda_attach(), one per array) and reads both through BaM arrays whose
 * GPU caches together hold CACHE_MIB (default 32), less than the graph; the
 * misses go through the daemon's rings to the disk.  Both GPU runs use the
 * same level-synchronous kernel: a warp per vertex of the frontier level,
 * its lanes striding over the neighbour list.
 */
#include <sys/xattr.h>

#include "common.cuh"

struct dev_graph {	/* the baseline: CSR in GPU memory */
	const uint64_t *rp;
	const void *ci;
	int idw;

	__device__ uint64_t row(uint64_t v) const { return rp[v]; }
	__device__ uint64_t col(uint64_t e) const
	{
		return idw == 4 ? ((const uint32_t *)ci)[e] : ((const uint64_t *)ci)[e];
	}
};

struct bam_graph {	/* through gstore: BaM arrays over the daemon's rings */
	struct gs_bam *rp, *ci;
	int idw;

	__device__ uint64_t row(uint64_t v) const { return gs_array_get_u64(rp, v); }
	__device__ uint64_t col(uint64_t e) const
	{
		return idw == 4 ? gs_array_get_u32(ci, e) : gs_array_get_u64(ci, e);
	}
};

/*
 * One level: warp w owns vertices [w * chunk, (w + 1) * chunk), so the
 * warps work on different parts of the lists at once (many distinct lines
 * in flight, few warps waiting on one line) and each warp walks its lists
 * in order (its line stays hot).  The lanes load 32 depths at once; the
 * frontier vertices among them are served one after another by the whole
 * warp, its lanes striding over the neighbour list.
 */
template <typename G>
static __global__ void bfs_level(G g, uint64_t nv, int32_t *depth, int32_t level, int *more)
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
			uint64_t s = g.row(f), e = g.row(f + 1);

			m &= m - 1;
			for (uint64_t k = s + lane; k < e; k += 32) {
				uint64_t u = g.col(k);

				/* a benign race: every writer writes level + 1 */
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

/* Run BFS levels until none adds a vertex; returns the number of levels. */
static int grid = 264;	/* blocks of 256 threads: 8 warps each */

template <typename G>
static int gpu_bfs(G g, uint64_t nv, uint64_t src, int32_t *depth, int *more)
{
	int level = 0;

	CK(cudaMemset(depth, 0xff, nv * sizeof(*depth)));
	CK(cudaMemcpy(depth + src, &level, sizeof(level), cudaMemcpyHostToDevice));
	for (;; level++) {
		*more = 0;
		bfs_level<<<grid, 256>>>(g, nv, depth, level, more);
		KCK();
		if (!*more)
			break;
	}
	return level + 1;
}

static void *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	void *buf;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (posix_memalign(&buf, 4096, (st.st_size + (1 << 20)) & ~((size_t)4095)))
		exit(1);
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, (char *)buf + got, 1 << 20, got);

		if (n <= 0) {
			fprintf(stderr, "%s: read: %s\n", path, n ? strerror(errno) : "short");
			exit(1);
		}
		got += n;
	}
	close(fd);
	*len = got;
	return buf;
}

static uint64_t col_h(const void *ci, int idw, uint64_t e)
{
	return idw == 4 ? ((const uint32_t *)ci)[e] : ((const uint64_t *)ci)[e];
}

static int32_t *cpu_bfs(const uint64_t *rp, const void *ci, int idw, uint64_t nv, uint64_t src)
{
	int32_t *d = (int32_t *)malloc(nv * sizeof(*d));
	uint64_t *q = (uint64_t *)malloc(nv * sizeof(*q)), h = 0, t = 0;

	memset(d, 0xff, nv * sizeof(*d));
	d[src] = 0;
	q[t++] = src;
	while (h < t) {
		uint64_t v = q[h++];

		for (uint64_t k = rp[v]; k < rp[v + 1]; k++) {
			uint64_t u = col_h(ci, idw, k);

			if (u < nv && d[u] < 0) {
				d[u] = d[v] + 1;
				q[t++] = u;
			}
		}
	}
	free(q);
	return d;
}

static long compare(const int32_t *want, const int32_t *got, uint64_t nv, uint64_t *reached,
		    int32_t *maxd)
{
	long bad = 0;

	*reached = 0;
	*maxd = 0;
	for (uint64_t v = 0; v < nv; v++) {
		bad += want[v] != got[v];
		if (want[v] >= 0) {
			(*reached)++;
			*maxd = want[v] > *maxd ? want[v] : *maxd;
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	if (argc < 2) {
		fprintf(stderr, "usage: t_bfs PREFIX [SOURCE [CACHE_MIB]]\n");
		return 1;
	}
	char rpath[4096], cpath[4096], xa[128] = "";
	unsigned long long nv_x = 0, ne_x = 0;
	int directed = 0, weighted = 0, idw = 4, fails = 0;
	size_t rlen, clen;

	snprintf(rpath, sizeof(rpath), "%s.rowptr", argv[1]);
	snprintf(cpath, sizeof(cpath), "%s.colidx", argv[1]);
	size_t cache = (argc > 3 ? atoi(argv[3]) : 32) * (size_t)(1 << 20);

	if (argc > 4)
		grid = atoi(argv[4]);
	ssize_t xl = getxattr(rpath, "user.gstore.csr", xa, sizeof(xa) - 1);

	if (xl > 0) {
		xa[xl] = 0;
		sscanf(xa, "%llu %llu %d %d %d", &nv_x, &ne_x, &directed, &weighted, &idw);
	}

	/* ---- the baseline: load the whole CSR (from the mount, O_DIRECT), then BFS */
	double t0 = now_s();
	uint64_t *rp = (uint64_t *)read_file(rpath, &rlen);
	void *ci = read_file(cpath, &clen);
	double t_read = now_s() - t0;
	uint64_t nv = rlen / 8 - 1, ne = rp[nv];
	int auto_src = argc <= 2 || !argv[2][0];	/* "": pick one */
	uint64_t src = auto_src ? 0 : strtoull(argv[2], NULL, 0);

	if (idw != 4 && idw != 8)
		idw = 4;
	if (ne * idw > clen || (nv_x && nv_x != nv)) {
		printf("t_bfs: rowptr/colidx disagree (nv %llu, ne %llu, colidx %zu B, xattr '%s')\n",
		       (unsigned long long)nv, (unsigned long long)ne, clen, xa);
		return 1;
	}
	if (auto_src)	/* the first vertex with neighbours */
		while (src + 1 < nv && rp[src + 1] == rp[src])
			src++;
	printf("t_bfs: %s: %llu vertices, %llu list entries, %d-byte ids, %.1f MiB; source %llu; "
	       "BaM caches %zu MiB; %d x 256 threads\n", argv[1], (unsigned long long)nv, (unsigned long long)ne, idw,
	       (rlen + clen) / 1048576.0, (unsigned long long)src, cache >> 20, grid);

	int32_t *want = cpu_bfs(rp, ci, idw, nv, src), *got, *depth;
	int *more;
	uint64_t reached;
	int32_t maxd;

	CK(cudaMallocManaged(&more, sizeof(*more)));
	CK(cudaMalloc(&depth, nv * sizeof(*depth)));
	got = (int32_t *)malloc(nv * sizeof(*got));

	struct dev_graph dg = { NULL, NULL, idw };
	uint64_t *drp;
	void *dci;

	t0 = now_s();
	CK(cudaMalloc(&drp, rlen));
	CK(cudaMalloc(&dci, clen));
	CK(cudaMemcpy(drp, rp, rlen, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dci, ci, clen, cudaMemcpyHostToDevice));
	double t_copy = now_s() - t0;

	dg.rp = drp;
	dg.ci = dci;
	gpu_bfs(dg, nv, src, depth, more);	/* warm-up: module load */
	t0 = now_s();
	int levels = gpu_bfs(dg, nv, src, depth, more);
	double t_dev = now_s() - t0;

	CK(cudaMemcpy(got, depth, nv * sizeof(*got), cudaMemcpyDeviceToHost));
	long bad = compare(want, got, nv, &reached, &maxd);

	printf("t_bfs: cpu reference: %llu reached, max depth %d\n", (unsigned long long)reached,
	       maxd);
	printf("t_bfs: in-memory: load %.3f s (read %.3f + copy %.3f), bfs %.3f s, %d levels, "
	       "%ld depths differ\n", t_read + t_copy, t_read, t_copy, t_dev, levels, bad);
	fails += bad != 0;
	CK(cudaFree(drp));
	CK(cudaFree(dci));

	/* ---- through gstore: two attachments, BaM arrays smaller than the graph */
	struct gs_cuda_params p = {};
	struct gs_cuda_array_params ap = {};
	struct gs_cuda *crp, *cci;
	struct gs_cuda_array *arp, *aci;

	p.buf_bytes = 4u << 20;
	OK(gs_cuda_attach(&crp, rpath, &p));
	OK(gs_cuda_attach(&cci, cpath, &p));
	ap.cache_bytes = cache / 4 < rlen ? cache / 4 : rlen;
	ap.cache_bytes = (ap.cache_bytes + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
	OK(gs_cuda_array_open(&arp, crp, &ap));
	ap.cache_bytes = cache - ap.cache_bytes;
	OK(gs_cuda_array_open(&aci, cci, &ap));
	struct bam_graph bg = { gs_cuda_array_dev(arp), gs_cuda_array_dev(aci), idw };

	t0 = now_s();
	levels = gpu_bfs(bg, nv, src, depth, more);	/* cold caches: every line from the disk */
	double t_bam = now_s() - t0;

	CK(cudaMemcpy(got, depth, nv * sizeof(*got), cudaMemcpyDeviceToHost));
	bad = compare(want, got, nv, &reached, &maxd);

	struct gs_cuda_array_stats s1, s2;

	gs_cuda_array_stats(arp, &s1);
	gs_cuda_array_stats(aci, &s2);
	printf("t_bfs: gstore (BaM over the daemon's rings): bfs %.3f s, %d levels, %ld depths "
	       "differ, %llu + %llu misses (%.1f MiB read), errors %d %d\n", t_bam, levels, bad,
	       (unsigned long long)s1.misses, (unsigned long long)s2.misses,
	       (s1.misses + s2.misses) * 4096.0 / 1048576, gs_cuda_array_error(arp),
	       gs_cuda_array_error(aci));
	fails += bad != 0 || gs_cuda_array_error(arp) || gs_cuda_array_error(aci);
	printf("RESULT bfs_gstore_s %.3f s (cold GPU cache %zu MiB, graph %.1f MiB)\n", t_bam,
	       cache >> 20, (rlen + clen) / 1048576.0);
	printf("RESULT bfs_inmem_total_s %.3f s (load %.3f + bfs %.3f)\n", t_read + t_copy + t_dev,
	       t_read + t_copy, t_dev);
	printf("RESULT bfs_gstore_vs_inmem %.2f x (in-memory total / gstore)\n",
	       (t_read + t_copy + t_dev) / t_bam);
	gs_cuda_array_close(arp);
	gs_cuda_array_close(aci);
	gs_cuda_close(crp);
	gs_cuda_close(cci);
	free(want);
	free(got);
	free(rp);
	free(ci);
	printf("t_bfs: %s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
