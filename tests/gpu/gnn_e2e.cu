// SPDX-License-Identifier: MIT
/*
 * The GNN mini-batch pipeline end to end on the GPU (bench/gnn-pipeline.sh,
 * after gnn.cu's loaders): per batch, k-hop sampling over the graph object
 * on the GPU (gs_cuda_graph_sample, include/gstore_cuda_graph.h) from random
 * seeds, then gs_cuda_gather() of the sampled nodes' feature rows straight
 * from the sample's GPU node list into one GPU buffer, a kernel consuming the
 * previous batch meanwhile; batch i + 1 is sampled while batch i's rows are
 * read.  The last batch is checked against the file (mkimage pattern).
 *
 *   gnn_e2e FEAT ROWB GRAPH_IMAGE GRAPH SECS SEEDS FANOUTS GPU_CACHE_MIB NAME
 */
#include <signal.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "common.cuh"
#include "gstore_cuda_gather.h"
#include "gstore_cuda_graph.h"
extern "C" {
#include "gstore_fs.h"
}

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

static inline uint8_t file_byte(uint64_t x)
{
	return (uint8_t)(pattern(x & ~7ull) >> (8 * (x & 7)));
}

static __global__ void consume_kernel(const uint4 *p, uint64_t n16, unsigned long long *sum)
{
	unsigned long long s = 0;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
	     i += (uint64_t)gridDim.x * blockDim.x)
		s += p[i].x ^ p[i].y ^ p[i].z ^ p[i].w;
	atomicAdd(sum, s);
}

static void stuck(int sig)
{
	static const char msg[] = "FAIL gnn_e2e: stuck (no batch finished in time): giving up\n";

	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(3);
}

int main(int argc, char **argv)
{
	if (argc != 10) {
		fprintf(stderr, "usage: gnn_e2e FEAT ROWB GRAPH_IMAGE GRAPH SECS SEEDS FANOUTS "
			"GPU_CACHE_MIB NAME\n");
		return 2;
	}
	skip_without_gpu();
	gs_set_log_func(log_to_stderr, NULL);
	const char *feat = argv[1], *name = argv[9];
	uint64_t rb = strtoull(argv[2], NULL, 0), cache = strtoull(argv[8], NULL, 0) << 20;
	double secs = atof(argv[5]);
	uint32_t nseeds = (uint32_t)atoi(argv[6]), fan[GS_GRAPH_SAMPLE_MAX_HOPS], nh = 0;

	for (char *p = argv[7]; *p && nh < GS_GRAPH_SAMPLE_MAX_HOPS;) {
		char *e;

		fan[nh++] = (uint32_t)strtoul(p, &e, 10);
		p = *e ? e + 1 : e;
	}
	CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
	CK(cudaFree(0));
	/* a sampler or gather that hangs costs the run 30 s, not its whole timeout */
	signal(SIGALRM, stuck);
	alarm(30);

	double t0 = now_s(), c0 = cpu_now();
	/* the graph: its image in-process, read-only; the GPU's own queue over it */
	struct gs_fs_opts fo = {};
	struct gs_q_params qp = {};
	struct gs_fs *fs;
	struct gs_graph *gr;
	struct gs_graph_info gi;
	struct gs_q *gq;
	struct gs_cuda_graph *cg;
	struct gs_cuda_graph_params cgp = {};

	fo.path = argv[3];
	fo.flags = GS_FS_RDONLY;
	fo.cache_bytes = 64u << 20;
	OK(gs_fs_mount(&fs, &fo));
	OK(gs_graph_open(fs, argv[4], GS_GRAPH_RDONLY, &gr));
	OK(gs_graph_info(gr, &gi));
	qp.path = argv[3];
	qp.flags = GS_Q_RDONLY;
	qp.min_pollers = 1;
	qp.max_pollers = 1;
	OK(gs_q_open(&gq, &qp));
	OK(gs_cuda_graph_open(&cg, gr, gq, &cgp));

	/* the features */
	struct gs_q *q = open_q(feat, 2, 0);
	struct gs_cuda_params p = {};
	struct gs_cuda *c;
	struct gs_cuda_gather_params gp = {};
	struct gs_cuda_gather *g;
	struct stat sb;

	if (stat(feat, &sb) < 0)
		return 1;
	p.sq_entries = 8192;
	p.buf_bytes = 256u << 20;
	OK(gs_cuda_open(&c, q, &p));
	gp.row_bytes = rb;
	gp.nrows = sb.st_size / rb;
	gp.cache_bytes = cache;
	if (gi.nv > gp.nrows) {
		printf("FAIL %s: the graph has %llu vertices, the table %llu rows\n", name,
		       (unsigned long long)gi.nv, (unsigned long long)gp.nrows);
		return 1;
	}
	OK(gs_cuda_gather_open(&g, c, &gp));

	uint64_t maxn, maxe;

	OK(gs_graph_sample_bounds(nseeds, fan, nh, &maxn, &maxe));
	char *dbuf[2];
	unsigned long long *sum;
	cudaStream_t sg, sc;
	cudaEvent_t eg[2], ec[2];
	struct gs_cuda_graph_sample ds[2] = {};

	for (int i = 0; i < 2; i++) {
		CK(cudaMalloc(&dbuf[i], maxn * rb));
		CK(cudaEventCreateWithFlags(&eg[i], cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&ec[i], cudaEventDisableTiming));
	}
	CK(cudaMalloc(&sum, 8));
	CK(cudaStreamCreateWithFlags(&sg, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
	double topen = now_s() - t0;

	std::vector<uint64_t> seeds(nseeds);
	uint64_t x = 12345, rows = 0, i;
	double tsample = 0, until = now_s() + secs, t1 = now_s();
	struct gs_cuda_graph_stats st;
	int ret;
	auto sample = [&](uint64_t b, struct gs_cuda_graph_sample *out) {
		for (auto &s : seeds)
			s = mix(x++) % gi.nv;
		int r = gs_cuda_graph_sample(cg, seeds.data(), nseeds, fan, nh, 1000 + b, out, &st);

		if (r) {
			printf("FAIL %s: gs_cuda_graph_sample: %s\n", name, strerror(-r));
			exit(1);
		}
		tsample += st.seconds;
	};

	sample(0, &ds[0]);
	OK(gs_cuda_gather(g, ds[0].nodes, ds[0].nnodes, dbuf[0], sg));
	CK(cudaEventRecord(eg[0], sg));
	for (i = 0; now_s() < until; i++) {
		int k = i & 1;

		/* batch i + 1 sampled while batch i's rows are read: its node list and
		 * buffer were batch i - 1's, gathered and consumed by now */
		CK(cudaEventSynchronize(eg[!k]));
		CK(cudaEventSynchronize(ec[!k]));
		sample(i + 1, &ds[!k]);
		OK(gs_cuda_gather(g, ds[!k].nodes, ds[!k].nnodes, dbuf[!k], sg));
		CK(cudaEventRecord(eg[!k], sg));
		CK(cudaStreamWaitEvent(sc, eg[k], 0));
		consume_kernel<<<264, 256, 0, sc>>>((const uint4 *)dbuf[k], ds[k].nnodes * rb / 16,
						    sum);
		CK(cudaGetLastError());
		CK(cudaEventRecord(ec[k], sc));
		CK(cudaEventSynchronize(ec[k]));
		rows += ds[k].nnodes;
		alarm(30);	/* a batch went through */
	}
	double dt = now_s() - t1, cpu = cpu_now() - c0;

	ret = gs_cuda_gather_sync(g);
	struct gs_cuda_gather_stats gs;

	OK(gs_cuda_gather_stats(g, &gs));
	printf("RESULT %-28s %12.3f %-10s steady: GPU sampling (gs_cuda_graph_sample, %u seeds, "
	       "fanouts %s, %.1f ms/batch) + gs_cuda_gather (%llu MiB GPU cache): %.0f rows/s, "
	       "%.0f rows/batch, %llu blocks %llu cache hits, %.2f CPU cores busy, 3 pollers; "
	       "%llu batches in %.2f s (open %.2f s not counted); graph/%s %llu vertices\n",
	       name, i / dt, "batches/s", nseeds, argv[7], tsample * 1e3 / (i + 1),
	       (unsigned long long)(cache >> 20), rows / dt, rows / (double)(i ? i : 1),
	       (unsigned long long)gs.blocks, (unsigned long long)gs.cache_hits, cpu / (now_s() - t0),
	       (unsigned long long)i, dt, topen, argv[4], (unsigned long long)gi.nv);
	if (ret) {
		printf("FAIL %s: gather error %s\n", name, strerror(-ret));
		return 1;
	}
	/* the last batch consumed: i - 1 in buffer (i - 1) & 1, its nodes in ds[(i - 1) & 1] */
	int k = (int)((i - 1) & 1);
	uint64_t n = ds[k].nnodes, bad = 0;
	std::vector<uint64_t> nodes(n);
	std::vector<uint8_t> h(n * rb);

	CK(cudaMemcpy(nodes.data(), ds[k].nodes, n * 8, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(h.data(), dbuf[k], n * rb, cudaMemcpyDeviceToHost));
	for (uint64_t j = 0; j < n; j++)
		for (uint64_t b = 0; b < rb; b++)
			bad += h[j * rb + b] != file_byte(nodes[j] * rb + b);
	printf("%s %s: last batch (%llu sampled rows) %s (%llu bad bytes)\n", bad ? "FAIL" : "PASS",
	       name, (unsigned long long)n, bad ? "differs from the file" : "equals the file",
	       (unsigned long long)bad);
	for (int j = 0; j < 2; j++)
		gs_cuda_graph_sample_free(&ds[j]);
	gs_cuda_gather_close(g);
	gs_cuda_close(c);
	gs_q_close(q);
	gs_cuda_graph_close(cg);
	gs_q_close(gq);
	gs_graph_close(gr);
	gs_fs_unmount(fs);
	return bad ? 1 : 0;
}
