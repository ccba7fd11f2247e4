// SPDX-License-Identifier: MIT
/*
 * gstore-graphbench: the GraphSSD comparison.  The same graph as gstore
 * pages (graph/NAME) and as CSR arrays (arrays/NAME.csr.*, `gstore graph
 * export-csr`), both read through the same gs_fs block cache (one budget,
 * O_DIRECT underneath), both driven by the same request queues and worker
 * threads.  Measured in one process, alternating engines, warm-up first,
 * the median of several runs; the block cache is emptied before each run.
 *
 *   gstore-graphbench gen --scale S [--edge-factor E] [--seed X] OUT
 *       an R-MAT (Graph500 a=.57 b=.19 c=.19) edge list, text
 *   gstore-graphbench run IMAGE NAME [--cache SIZE] [--line-size N]
 *       [--threads T] [--queries N] [--batch B] [--runs R] [--bfs K] [--no-cc]
 *       [--nonzero]
 *       random-vertex neighbour queries (queries/s, device pages/query),
 *       BFS from K sources, CC; one "result" line per measurement and the
 *       ratios gstore/CSR at the end
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "gstore_graph.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint64_t parse_size(const char *s)
{
	char *e;
	double v = strtod(s, &e);

	switch (*e) {
	case 'k': case 'K': v *= 1 << 10; break;
	case 'm': case 'M': v *= 1 << 20; break;
	case 'g': case 'G': v *= 1 << 30; break;
	}
	return (uint64_t)v;
}

/* ---- gen ---- */

static int gen(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "scale", required_argument, NULL, 's' },
		{ "edge-factor", required_argument, NULL, 'e' },
		{ "seed", required_argument, NULL, 'x' },
		{ 0 }
	};
	unsigned scale = 16, ef = 16;
	uint64_t x = 88172645463325252ULL, ne, nv;
	FILE *f;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 's')
			scale = (unsigned)atoi(optarg);
		else if (c == 'e')
			ef = (unsigned)atoi(optarg);
		else if (c == 'x')
			x ^= strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ULL;
		else
			return 2;
	}
	if (optind != argc - 1 || scale < 2 || scale > 40)
		return fprintf(stderr, "usage: gstore-graphbench gen --scale S OUT\n"), 2;
	f = strcmp(argv[optind], "-") ? fopen(argv[optind], "w") : stdout;
	if (!f)
		return perror(argv[optind]), 1;
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	nv = 1ULL << scale;
	ne = nv * ef;
	fprintf(f, "# R-MAT scale %u edge factor %u: %" PRIu64 " edges\n", scale, ef, ne);
	for (uint64_t i = 0; i < ne; i++) {
		uint64_t u = 0, v = 0;

		for (unsigned b = 0; b < scale; b++) {
			uint64_t r = rnd(&x) % 100;

			/* quadrants a=57 b=19 c=19 d=5 (percent) */
			u = u << 1 | (r >= 76);
			v = v << 1 | ((r >= 57 && r < 76) || r >= 95);
		}
		/* scramble ids so that hubs do not all sit at 0 */
		u = (u * 0x9e3779b97f4a7c15ULL >> 7) & (nv - 1);
		v = (v * 0x9e3779b97f4a7c15ULL >> 7) & (nv - 1);
		fprintf(f, "%" PRIu64 " %" PRIu64 "\n", u, v);
	}
	return fclose(f) ? 1 : 0;
}

/* ---- run ---- */

struct engine {
	const char *name;
	struct gs_graph *g;
	double qps[16], pages[16], bfs[16], cc[16];
	double bfs_pg[16], cc_pg[16];	/* device pages read by one BFS, by CC */
};

struct ctx {
	struct gs_fs *fs;
	uint64_t nv, *verts, nq;
	unsigned batch, runs, nbfs;
	uint64_t sink;		/* keeps the callback's work */
};

static void count_cb(struct gs_graph_req *r, void *arg)
{
	struct ctx *c = arg;
	uint64_t s = 0;

	for (int64_t i = 0; i < r->res; i++)
		s += r->ids[i];
	__atomic_add_fetch(&c->sink, s, __ATOMIC_RELAXED);
}

/* Device bytes read so far (the fs's live counters, as .gstore/stats shows them). */
static uint64_t dev_read(struct gs_fs *fs)
{
	char buf[4096];
	const char *p;

	if (gs_fs_stats_text(fs, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "q_read_bytes: ")))
		return 0;
	return strtoull(p + strlen("q_read_bytes: "), NULL, 10);
}

static void drop_cache(struct gs_fs *fs)
{
	gs_fs_drop_caches(fs);
}

static int queries(struct ctx *c, struct engine *e, double *qps, double *ppq)
{
	struct gs_graph_queue_params p = { .depth = 4 * c->batch, .cb = count_cb, .cb_arg = c };
	struct gs_graph_req *req = calloc(c->nq, sizeof(*req));
	struct gs_graph_req **ptr = malloc(c->nq * sizeof(*ptr));
	struct gs_graph_queue *q;
	uint64_t b0;
	double t0;
	int ret;

	if (!req || !ptr)
		return -ENOMEM;
	for (uint64_t i = 0; i < c->nq; i++) {
		req[i].vertex = c->verts[i];
		ptr[i] = &req[i];
	}
	ret = gs_graph_queue_create(e->g, &p, &q);
	if (ret)
		goto out;
	drop_cache(c->fs);
	b0 = dev_read(c->fs);
	t0 = now();
	for (uint64_t i = 0; i < c->nq && ret >= 0; i += c->batch)
		ret = gs_graph_submit(q, ptr + i,
				      (unsigned)(c->nq - i < c->batch ? c->nq - i : c->batch));
	gs_graph_drain(q);
	*qps = (double)c->nq / (now() - t0);
	*ppq = (double)(dev_read(c->fs) - b0) / 4096.0 / (double)c->nq;
	gs_graph_queue_destroy(q);
	for (uint64_t i = 0; i < c->nq && ret >= 0; i++)
		if (req[i].res < 0)
			ret = (int)req[i].res;
out:
	free(req);
	free(ptr);
	return ret < 0 ? ret : 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	double t[16];

	memcpy(t, v, n * sizeof(*v));
	qsort(t, n, sizeof(*t), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static int one_round(struct ctx *c, struct engine *e, unsigned run, int do_cc, uint64_t *srcs)
{
	struct gs_graph_app_opts ao = { .batch = 4096 };
	int64_t *depth = malloc(c->nv * sizeof(*depth));
	uint64_t *label = malloc(c->nv * sizeof(*label));
	uint64_t b0;
	double t0;
	int ret;

	if (!depth || !label)
		return -ENOMEM;
	ret = queries(c, e, &e->qps[run], &e->pages[run]);
	if (!ret && c->nbfs) {
		drop_cache(c->fs);
		b0 = dev_read(c->fs);
		t0 = now();
		for (unsigned k = 0; k < c->nbfs && !ret; k++)
			ret = gs_graph_bfs(e->g, srcs[k], depth, &ao);
		e->bfs[run] = (now() - t0) / c->nbfs;
		e->bfs_pg[run] = (double)(dev_read(c->fs) - b0) / 4096.0 / c->nbfs;
	}
	if (!ret && do_cc) {
		drop_cache(c->fs);
		b0 = dev_read(c->fs);
		t0 = now();
		ret = gs_graph_cc(e->g, label, &ao) < 0 ? -EIO : 0;
		e->cc[run] = now() - t0;
		e->cc_pg[run] = (double)(dev_read(c->fs) - b0) / 4096.0;
	}
	printf("result engine=%s run=%u qps=%.0f pages_per_query=%.3f bfs_s=%.3f cc_s=%.3f "
	       "bfs_pages=%.0f cc_pages=%.0f\n", e->name, run, e->qps[run], e->pages[run],
	       e->bfs[run], e->cc[run], e->bfs_pg[run], e->cc_pg[run]);
	fflush(stdout);
	free(depth);
	free(label);
	return ret;
}

static void log_fn(int level, const char *msg, void *arg)
{
	if (level <= GS_LOG_WARN)
		fprintf(stderr, "gstore: %s\n", msg);
}

static int run(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ "line-size", required_argument, NULL, 'l' },
		{ "threads", required_argument, NULL, 't' },
		{ "queries", required_argument, NULL, 'q' },
		{ "batch", required_argument, NULL, 'b' },
		{ "runs", required_argument, NULL, 'r' },
		{ "bfs", required_argument, NULL, 'B' },
		{ "no-cc", no_argument, NULL, 'n' },
		{ "buffered", no_argument, NULL, 'u' },
		{ "nonzero", no_argument, NULL, 'z' },
		{ 0 }
	};
	struct gs_fs_opts fo = { .cache_bytes = 64u << 20, .line_size = 4096 };
	struct ctx c = { .nq = 200000, .batch = 64, .runs = 3, .nbfs = 2 };
	struct engine e[2] = { { .name = "gstore" }, { .name = "csr" } };
	unsigned threads = 16;
	int do_cc = 1, nonzero = 0, ch, ret;
	char prefix[300];
	struct gs_graph_info gi[2];
	uint64_t x = 12345, srcs[16];

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': fo.cache_bytes = parse_size(optarg); break;
		case 'l': fo.line_size = (uint32_t)parse_size(optarg); break;
		case 't': threads = (unsigned)atoi(optarg); break;
		case 'q': c.nq = strtoull(optarg, NULL, 0); break;
		case 'b': c.batch = (unsigned)atoi(optarg); break;
		case 'r': c.runs = (unsigned)atoi(optarg); break;
		case 'B': c.nbfs = (unsigned)atoi(optarg); break;
		case 'n': do_cc = 0; break;
		case 'u': fo.flags |= GS_FS_BUFFERED; break;
		case 'z': nonzero = 1; break;
		default: return 2;
		}
	}
	if (optind != argc - 2 || !c.runs || c.runs > 15 || c.nbfs > 16 || !c.batch)
		return fprintf(stderr, "usage: gstore-graphbench run IMAGE NAME [...]\n"), 2;
	gs_set_log_func(log_fn, NULL);
	fo.path = argv[optind];
	ret = gs_fs_mount(&c.fs, &fo);
	if (ret)
		return fprintf(stderr, "mount %s: %s\n", fo.path, strerror(-ret)), 1;
	snprintf(prefix, sizeof(prefix), "%s.csr", argv[optind + 1]);
	ret = gs_graph_open(c.fs, argv[optind + 1], GS_GRAPH_RDONLY, &e[0].g);
	if (!ret)
		ret = gs_graph_open_csr(c.fs, prefix, &e[1].g);
	if (ret) {
		fprintf(stderr, "open %s / %s: %s\n", argv[optind + 1], prefix, strerror(-ret));
		gs_fs_unmount(c.fs);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		gs_graph_set_workers(e[i].g, threads);
		gs_graph_info(e[i].g, &gi[i]);
	}
	c.nv = gi[0].nv;
	c.verts = malloc(c.nq * sizeof(*c.verts));
	/* random vertices; --nonzero: only vertices with neighbours (picked
	 * before the measurement, through the CSR degree) */
	for (uint64_t i = 0; i < c.nq;) {
		uint64_t v = rnd(&x) % c.nv;

		if (!nonzero || gs_graph_degree(e[1].g, v, GS_GRAPH_OUT) > 0)
			c.verts[i++] = v;
	}
	/* BFS sources with edges (in the big component of an R-MAT graph) */
	for (unsigned k = 0; k < c.nbfs;) {
		uint64_t v = rnd(&x) % c.nv;

		if (gs_graph_degree(e[0].g, v, GS_GRAPH_OUT) > 0)
			srcs[k++] = v;
	}
	printf("graph %s: %" PRIu64 " vertices, %" PRIu64 " edges, %s; gstore %.1f MiB, CSR %.1f "
	       "MiB on disk; cache %.1f MiB, line %u B, %u threads, %" PRIu64 " queries%s, "
	       "batch %u\n",
	       argv[optind + 1], gi[0].nv, gi[0].ne, gi[0].directed ? "directed" : "undirected",
	       gi[0].disk_bytes / 1048576.0, gi[1].disk_bytes / 1048576.0,
	       fo.cache_bytes / 1048576.0, fo.line_size, threads, c.nq,
	       nonzero ? " (vertices with neighbours)" : "", c.batch);
	/* warm-up (not counted), then alternate the engines */
	for (int i = 0; i < 2 && !ret; i++) {
		double q, p;

		ret = queries(&c, &e[i], &q, &p);
	}
	for (unsigned r = 0; r < c.runs && !ret; r++)
		for (int i = 0; i < 2 && !ret; i++)
			ret = one_round(&c, &e[r % 2 ? 1 - i : i], r, do_cc, srcs);
	if (!ret) {
		double q0 = median(e[0].qps, c.runs), q1 = median(e[1].qps, c.runs);
		double p0 = median(e[0].pages, c.runs), p1 = median(e[1].pages, c.runs);
		double b0 = median(e[0].bfs, c.runs), b1 = median(e[1].bfs, c.runs);
		double c0 = median(e[0].cc, c.runs), c1 = median(e[1].cc, c.runs);

		printf("\n%-8s %12s %14s %10s %10s\n", "engine", "queries/s", "pages/query",
		       "bfs s", "cc s");
		printf("%-8s %12.0f %14.3f %10.3f %10.3f\n", "gstore", q0, p0, b0, c0);
		printf("%-8s %12.0f %14.3f %10.3f %10.3f\n", "csr", q1, p1, b1, c1);
		printf("ratio    %11.2fx %13.2fx %9.2fx %9.2fx   (throughput, pages: gstore/csr; "
		       "bfs, cc: csr/gstore time)\n", q0 / q1, p0 / p1, b0 > 0 ? b1 / b0 : 0,
		       c0 > 0 ? c1 / c0 : 0);
		printf("disk     gstore %.1f MiB, csr %.1f MiB (%.2fx)\n",
		       gi[0].disk_bytes / 1048576.0, gi[1].disk_bytes / 1048576.0,
		       (double)gi[0].disk_bytes / (double)gi[1].disk_bytes);
	} else {
		fprintf(stderr, "run: %s\n", strerror(-ret));
	}
	gs_graph_close(e[0].g);
	gs_graph_close(e[1].g);
	free(c.verts);
	gs_fs_unmount(c.fs);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "gen"))
		return gen(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return run(argc - 1, argv + 1);
	fprintf(stderr, "usage: gstore-graphbench gen|run ...\n");
	return 2;
}
