// SPDX-License-Identifier: MIT
/*
 * The GNN pipeline's sampler (bench/gnn-pipeline.sh): NB mini-batches of
 * SEEDS random seed vertices sampled with gs_graph_sample(3) (k-hop, FANOUTS
 * such as 10,5) over graph/NAME of a gstore image, written as the batch file
 * of tests/gpu/gnn.cu (u64 nbatch, then per batch u64 n and the n node
 * indices: seeds first, then the sampled nodes, deduplicated).  The node
 * index is the feature table's row.
 *
 *   gnn_sample IMAGE NAME OUT NB SEEDS FANOUTS RNG
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gstore_fs.h"
#include "gstore_graph.h"

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct gs_fs_opts o = { 0 };
	struct gs_graph_info gi;
	struct gs_fs *fs;
	struct gs_graph *g;
	uint32_t fan[GS_GRAPH_SAMPLE_MAX_HOPS], nh = 0;
	uint64_t nb, nseeds, rng, *seeds, rows = 0;
	double t0;
	FILE *f;
	int ret;

	if (argc != 8) {
		fprintf(stderr, "usage: gnn_sample IMAGE NAME OUT NB SEEDS FANOUTS RNG\n");
		return 2;
	}
	nb = strtoull(argv[4], NULL, 0);
	nseeds = strtoull(argv[5], NULL, 0);
	rng = strtoull(argv[7], NULL, 0);
	for (char *p = argv[6]; *p && nh < GS_GRAPH_SAMPLE_MAX_HOPS;) {
		char *e;

		fan[nh++] = (uint32_t)strtoul(p, &e, 10);
		p = *e ? e + 1 : e;
	}
	o.path = argv[1];
	o.flags = GS_FS_RDONLY;
	o.cache_bytes = 256u << 20;
	ret = gs_fs_mount(&fs, &o);
	if (!ret)
		ret = gs_graph_open(fs, argv[2], GS_GRAPH_RDONLY, &g);
	if (!ret)
		ret = gs_graph_info(g, &gi);
	if (ret) {
		fprintf(stderr, "gnn_sample: %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	seeds = malloc(nseeds * 8);
	f = fopen(argv[3], "wb");
	if (!seeds || !f)
		return 1;
	fwrite(&nb, 8, 1, f);
	t0 = now_s();
	for (uint64_t b = 0; b < nb; b++) {
		struct gs_graph_sample s;

		memset(&s, 0, sizeof(s));
		for (uint64_t i = 0; i < nseeds; i++)
			seeds[i] = mix(rng * 0x9e3779b97f4a7c15ull + b * nseeds + i) % gi.nv;
		ret = gs_graph_sample(g, seeds, (uint32_t)nseeds, fan, nh, rng + b, &s);
		if (ret) {
			fprintf(stderr, "gnn_sample: gs_graph_sample: %s\n", strerror(-ret));
			return 1;
		}
		fwrite(&s.nnodes, 8, 1, f);
		fwrite(s.nodes, 8, s.nnodes, f);
		rows += s.nnodes;
		gs_graph_sample_free(&s);
	}
	if (fclose(f))
		return 1;
	printf("RESULT %-28s %12.1f %-10s %llu batches, %.0f rows/batch, gs_graph_sample(3) "
	       "over graph/%s (%llu vertices, %llu edges), CPU\n", "gnn_sample_ms_per_batch",
	       (now_s() - t0) * 1e3 / nb, "ms", (unsigned long long)nb, (double)rows / nb, argv[2],
	       (unsigned long long)gi.nv, (unsigned long long)gi.ne);
	free(seeds);
	gs_graph_close(g);
	return gs_fs_unmount(fs) ? 1 : 0;
}
