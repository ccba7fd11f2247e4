/* SPDX-License-Identifier: MIT */
/*
 * Graphs for the GPU graph tests (t_graph, t_graph_attach): R-MAT edge lists
 * written as text and imported by gstore, and the comparison of a GPU
 * sample with gs_graph_sample's.  Define GT_TAG (the program's name, the
 * prefix of its lines) before including.
 */
#ifndef GS_TESTS_GPU_GRAPH_GEN_CUH
#define GS_TESTS_GPU_GRAPH_GEN_CUH

#include <vector>

#include "common.cuh"
#include "gstore_cuda_graph.h"

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct gen {
	unsigned scale;
	uint64_t edges;
	unsigned hubs, hubdeg;	/* vertices with hubdeg more neighbours */
	int weighted;
	uint64_t (*id)(uint64_t v);	/* sparse ids; NULL: v */
	uint64_t seed;
};

static inline uint64_t sparse_id(uint64_t v)
{
	return (1ULL << 40) + v * 1000003ULL;
}

static void write_graph(const char *path, const struct gen *gp)
{
	FILE *f = fopen(path, "w");
	uint64_t x = gp->seed * 0x9e3779b97f4a7c15ULL + 1, nv = 1ULL << gp->scale;

	if (!f) {
		perror(path);
		exit(1);
	}
	for (uint64_t e = 0; e < gp->edges + (uint64_t)gp->hubs * gp->hubdeg; e++) {
		uint64_t u = 0, v = 0;

		if (e < gp->edges) {
			for (unsigned b = 0; b < gp->scale; b++) {	/* R-MAT 0.57/0.19/0.19/0.05 */
				uint64_t r = xs(&x) % 100;

				u = u << 1 | (r >= 76);
				v = v << 1 | ((r >= 57 && r < 76) || r >= 95);
			}
		} else {
			u = ((e - gp->edges) / gp->hubdeg) * 7919 % nv;
			v = xs(&x) % nv;
		}
		if (gp->id)
			fprintf(f, "%llu %llu", (unsigned long long)gp->id(u),
				(unsigned long long)gp->id(v));
		else
			fprintf(f, "%llu %llu", (unsigned long long)u, (unsigned long long)v);
		if (gp->weighted)
			fprintf(f, " %.3f", (double)(xs(&x) % 10000) / 100.0);
		fputc('\n', f);
	}
	if (gp->id)	/* every vertex named: indices are 0 .. nv-1 */
		for (uint64_t v = 0; v < nv; v++)
			fprintf(f, "%llu %llu%s\n", (unsigned long long)gp->id(v),
				(unsigned long long)gp->id((v * 31 + 7) % nv),
				gp->weighted ? " 1.0" : "");
	fclose(f);
}

static struct gs_graph *graph_import(struct gs_fs *fs, const char *dir, const char *name,
				     const struct gen *gp, uint32_t flags)
{
	char path[4200], err[256] = "";
	struct gs_graph_import_opts o = {};
	struct gs_graph *g;
	double t0 = now_s();

	snprintf(path, sizeof(path), "%s/" GT_TAG "-%s.txt", dir, name);
	write_graph(path, gp);
	o.flags = flags | GS_GRAPH_IMPORT_REPLACE |
		  (gp->weighted ? GS_GRAPH_IMPORT_WEIGHTED : GS_GRAPH_IMPORT_UNWEIGHTED);
	if (!gp->id)
		o.nv = 1ULL << gp->scale;
	o.tmpdir = dir;
	o.err = err;
	o.errlen = sizeof(err);
	int ret = gs_graph_import(fs, name, path, &o);

	if (ret) {
		printf(GT_TAG ": import %s: %s (%s)\n", name, strerror(-ret), err);
		exit(1);
	}
	unlink(path);
	OK(gs_graph_open(fs, name, 0, &g));
	struct gs_graph_info gi;

	gs_graph_info(g, &gi);
	printf(GT_TAG ": %s: %llu vertices, %llu edges, %s, %s, %u-byte ids%s, imported in %.1f s\n",
	       name, (unsigned long long)gi.nv, (unsigned long long)gi.ne,
	       gi.directed ? "directed" : "undirected", gi.weighted ? "weighted" : "unweighted",
	       gi.id_bytes, gi.id_map ? ", sparse ids" : "", now_s() - t0);
	return g;
}

template <typename T>
static std::vector<T> fetch(const T *d, uint64_t n)
{
	std::vector<T> h(n + 1);

	CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
	return h;
}

/* @ds: a GPU sample, @s: the CPU's; 0 when equal. */
static inline int same_sample(const struct gs_cuda_graph_sample *ds,
			      const struct gs_graph_sample *s)
{
	if (ds->nnodes != s->nnodes || ds->nedges != s->nedges)
		return 1;
	if (memcmp(ds->hop_nodes, s->hop_nodes, (s->nhops + 2) * 8) ||
	    memcmp(ds->hop_edges, s->hop_edges, (s->nhops + 1) * 8))
		return 2;
	if (memcmp(fetch(ds->nodes, s->nnodes).data(), s->nodes, s->nnodes * 8))
		return 3;
	if (memcmp(fetch(ds->src, s->nedges).data(), s->src, s->nedges * 8) ||
	    memcmp(fetch(ds->dst, s->nedges).data(), s->dst, s->nedges * 8))
		return 4;
	if (memcmp(fetch(ds->src_pos, s->nedges).data(), s->src_pos, s->nedges * 4) ||
	    memcmp(fetch(ds->dst_pos, s->nedges).data(), s->dst_pos, s->nedges * 4))
		return 5;
	return 0;
}

#endif /* GS_TESTS_GPU_GRAPH_GEN_CUH */
