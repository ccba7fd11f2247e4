// SPDX-License-Identifier: MIT
/*
 * Graph objects on the GPU over a mounted store (gs_cuda_graph_attach) and
 * the sync point for CPU-side updates:
 *
 *  1. in-process: graphs imported by gstore into an image of our own; the
 *     CPU engine's BFS depths, CC labels and samples (the references);
 *     the image unmounted;
 *  2. gstorefs mounts it; this process attaches to MNT/graph/NAME (only the
 *     mount: the layout and the page reads come from the daemon) and runs
 *     BFS (BaM, CAM and both one-direction CAM modes), CC (BaM, CAM) and
 *     sampling (25,10 and 10,5): each must equal its reference;
 *  3. updates through the mount (lines to graph/NAME/updates; for the
 *     second graph "merge" to its ctl too), gs_cuda_graph_sync(), the GPU
 *     runs again: the layout generation moved and the results changed;
 *  4. unmounted; the CPU engine over the updated image gives the new
 *     references, which the GPU's post-sync results must equal.
 *
 *   t_graph_attach GSTOREFS [small]
 *
 * Env: GS_GRAPH_DIR (image, mount point and temp files; default build/gpu).
 * Exits 77 without a GPU or /dev/fuse.
 */
#include <sys/mount.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "common.cuh"
#define GT_TAG "t_graph_attach"
#include "graph_gen.cuh"
extern "C" {
#include "gstore_fs.h"
}

static const char *dir_ = "build/gpu";
static char img_[4096], mnt_[4096];
static int fails_;

#define CHECK(cond, ...)                                                             \
	do {                                                                         \
		if (!(cond)) {                                                       \
			printf("t_graph_attach: FAIL: " __VA_ARGS__);                \
			printf("\n");                                                \
			fails_++;                                                    \
		}                                                                    \
	} while (0)

/* What one graph's runs give: depths, labels, two samples (host copies). */
struct answers {
	std::vector<int32_t> depth;
	std::vector<uint64_t> label;
	int64_t comps = 0;
	std::vector<uint64_t> nodes[2], src[2], dst[2];
	std::vector<uint32_t> src_pos[2], dst_pos[2];
	uint64_t hop_nodes[2][GS_GRAPH_SAMPLE_MAX_HOPS + 2] = {};
	uint64_t hop_edges[2][GS_GRAPH_SAMPLE_MAX_HOPS + 1] = {};
};

struct tgraph {
	const char *name;
	struct gen gen;
	uint32_t flags;
	std::string updates;	/* lines written to graph/NAME/updates */
	int merge;		/* then "merge" to its ctl */
	uint64_t src;		/* BFS source (vertex index) */
	std::vector<uint64_t> seeds;
	struct answers before, after;	/* the CPU engine's */
};

static const uint32_t fan_[2][2] = { { 25, 10 }, { 10, 5 } };

static void cpu_answers(struct gs_graph *g, struct tgraph *t, struct answers *a)
{
	struct gs_graph_info gi;
	std::vector<int64_t> d;
	uint64_t id;

	gs_graph_info(g, &gi);
	d.resize(gi.nv);
	a->label.resize(gi.nv);
	OK(gs_graph_vertex_ids(g, t->src, 1, &id));
	OK(gs_graph_bfs(g, id, d.data(), NULL));
	a->depth.assign(d.begin(), d.end());
	a->comps = gs_graph_cc(g, a->label.data(), NULL);
	OK(a->comps);
	for (int k = 0; k < 2; k++) {
		struct gs_graph_sample s;

		OK(gs_graph_sample(g, t->seeds.data(), (uint32_t)t->seeds.size(), fan_[k], 2,
				   1234 + k, &s));
		a->nodes[k].assign(s.nodes, s.nodes + s.nnodes);
		a->src[k].assign(s.src, s.src + s.nedges);
		a->dst[k].assign(s.dst, s.dst + s.nedges);
		a->src_pos[k].assign(s.src_pos, s.src_pos + s.nedges);
		a->dst_pos[k].assign(s.dst_pos, s.dst_pos + s.nedges);
		memcpy(a->hop_nodes[k], s.hop_nodes, sizeof(a->hop_nodes[k]));
		memcpy(a->hop_edges[k], s.hop_edges, sizeof(a->hop_edges[k]));
		gs_graph_sample_free(&s);
	}
}

/* "+ u v [w]" lines for the pairs (vertex indices, dense ids) the graph
 * lacks (an existing edge would fail the whole write with EEXIST). */
static std::string new_edges(struct gs_graph *g, const uint64_t (*pairs)[2], int n, int weighted)
{
	std::string s;
	char line[96];
	float w;

	for (int i = 0; i < n; i++) {
		if (gs_graph_edge_weight(g, pairs[i][0], pairs[i][1], &w) != -ENOENT)
			continue;
		snprintf(line, sizeof(line), "+ %llu %llu%s\n", (unsigned long long)pairs[i][0],
			 (unsigned long long)pairs[i][1], weighted ? " 2.5" : "");
		s += line;
	}
	return s;
}

static int same(const std::vector<uint64_t> &v, const uint64_t *d, uint64_t n)
{
	return v.size() == n && (n == 0 || !memcmp(fetch(d, n).data(), v.data(), n * 8));
}

static int same32(const std::vector<uint32_t> &v, const uint32_t *d, uint64_t n)
{
	return v.size() == n && (n == 0 || !memcmp(fetch(d, n).data(), v.data(), n * 4));
}

/*
 * Every GPU app on @cg against @want; returns the differences found (0:
 * all equal).  @quiet: differences are expected (before the sync point),
 * only counted.
 */
static int gpu_vs(struct gs_cuda_graph *cg, struct tgraph *t, const struct answers *want,
		  const char *when, int quiet)
{
	static const char *bname[] = { "bam", "cam", "cam-topdown", "cam-bottomup" };
	uint64_t nv = gs_cuda_graph_layout(cg)->nv;
	struct gs_cuda_graph_sample ds = {};
	int32_t *dd;
	uint64_t *dl;
	int diffs = 0;

	if (nv != want->depth.size()) {
		CHECK(quiet, "%s %s: %llu vertices, the CPU has %zu", t->name, when,
		      (unsigned long long)nv, want->depth.size());
		return 1;
	}
	CK(cudaMalloc(&dd, nv * 4));
	CK(cudaMalloc(&dl, nv * 8));
	for (unsigned mode = 0; mode < 4; mode++) {
		struct gs_cuda_graph_stats st = {};
		int lv = gs_cuda_graph_bfs(cg, t->src, dd, mode, &st);
		std::vector<int32_t> got = fetch(dd, nv);
		long bad = 0;

		for (uint64_t v = 0; v < nv; v++)
			bad += got[v] != want->depth[v];
		diffs += lv < 0 || bad;
		CHECK(quiet || (lv >= 0 && !bad), "%s %s: bfs %s: %d, %ld of %llu depths differ",
		      t->name, when, bname[mode], lv, bad, (unsigned long long)nv);
		printf("t_graph_attach: %s %s: bfs %s: %d levels, %ld depths differ, %.1f KiB read, "
		       "%.3f s\n", t->name, when, bname[mode], lv, bad, st.bytes_read / 1024.0,
		       st.seconds);
	}
	for (unsigned mode = 0; mode < 2; mode++) {
		struct gs_cuda_graph_stats st = {};
		int64_t c = gs_cuda_graph_cc(cg, dl, mode, &st);
		std::vector<uint64_t> got = fetch(dl, nv);
		long bad = 0;

		for (uint64_t v = 0; v < nv; v++)
			bad += got[v] != want->label[v];
		diffs += c != want->comps || bad;
		CHECK(quiet || (c == want->comps && !bad),
		      "%s %s: cc %s: %lld components (cpu %lld), %ld labels differ", t->name, when,
		      mode ? "cam" : "bam", (long long)c, (long long)want->comps, bad);
		printf("t_graph_attach: %s %s: cc %s: %lld components (cpu %lld), %ld labels "
		       "differ\n", t->name, when, mode ? "cam" : "bam", (long long)c,
		       (long long)want->comps, bad);
	}
	for (int k = 0; k < 2; k++) {
		struct gs_cuda_graph_stats st = {};
		int r = gs_cuda_graph_sample(cg, t->seeds.data(), (uint32_t)t->seeds.size(),
					     fan_[k], 2, 1234 + k, &ds, &st);
		int eq = !r && ds.nnodes == want->nodes[k].size() &&
			 ds.nedges == want->src[k].size() &&
			 !memcmp(ds.hop_nodes, want->hop_nodes[k], 4 * 8) &&
			 !memcmp(ds.hop_edges, want->hop_edges[k], 3 * 8) &&
			 same(want->nodes[k], ds.nodes, ds.nnodes) &&
			 same(want->src[k], ds.src, ds.nedges) &&
			 same(want->dst[k], ds.dst, ds.nedges) &&
			 same32(want->src_pos[k], ds.src_pos, ds.nedges) &&
			 same32(want->dst_pos[k], ds.dst_pos, ds.nedges);

		diffs += !eq;
		CHECK(quiet || eq, "%s %s: sample %u,%u: %s", t->name, when, fan_[k][0], fan_[k][1],
		      r ? strerror(-r) : "differs from gs_graph_sample");
		printf("t_graph_attach: %s %s: sample %u,%u: %llu nodes, %llu edges (cpu %zu, %zu), "
		       "%s, %.3f s\n", t->name, when, fan_[k][0], fan_[k][1],
		       (unsigned long long)ds.nnodes, (unsigned long long)ds.nedges,
		       want->nodes[k].size(), want->src[k].size(), eq ? "equal" : "DIFFER",
		       st.seconds);
	}
	gs_cuda_graph_sample_free(&ds);
	CK(cudaFree(dd));
	CK(cudaFree(dl));
	return diffs;
}

/* The GPU's answers (host copies), to compare after the unmount. */
static void gpu_answers(struct gs_cuda_graph *cg, struct tgraph *t, struct answers *a)
{
	uint64_t nv = gs_cuda_graph_layout(cg)->nv;
	struct gs_cuda_graph_sample ds = {};
	int32_t *dd;
	uint64_t *dl;

	CK(cudaMalloc(&dd, nv * 4));
	CK(cudaMalloc(&dl, nv * 8));
	OK(gs_cuda_graph_bfs(cg, t->src, dd, GS_CUDA_GRAPH_CAM, NULL));
	a->depth = fetch(dd, nv);
	a->depth.resize(nv);
	a->comps = gs_cuda_graph_cc(cg, dl, GS_CUDA_GRAPH_CAM, NULL);
	a->label = fetch(dl, nv);
	a->label.resize(nv);
	for (int k = 0; k < 2; k++) {
		OK(gs_cuda_graph_sample(cg, t->seeds.data(), (uint32_t)t->seeds.size(), fan_[k], 2,
					1234 + k, &ds, NULL));
		a->nodes[k] = fetch(ds.nodes, ds.nnodes);
		a->nodes[k].resize(ds.nnodes);
		a->src[k] = fetch(ds.src, ds.nedges);
		a->src[k].resize(ds.nedges);
		a->dst[k] = fetch(ds.dst, ds.nedges);
		a->dst[k].resize(ds.nedges);
		a->src_pos[k] = fetch(ds.src_pos, ds.nedges);
		a->src_pos[k].resize(ds.nedges);
		a->dst_pos[k] = fetch(ds.dst_pos, ds.nedges);
		a->dst_pos[k].resize(ds.nedges);
		memcpy(a->hop_nodes[k], ds.hop_nodes, sizeof(a->hop_nodes[k]));
		memcpy(a->hop_edges[k], ds.hop_edges, sizeof(a->hop_edges[k]));
	}
	gs_cuda_graph_sample_free(&ds);
	CK(cudaFree(dd));
	CK(cudaFree(dl));
}

static int answers_equal(const struct answers *a, const struct answers *b)
{
	if (a->depth != b->depth || a->label != b->label || a->comps != b->comps)
		return 0;
	for (int k = 0; k < 2; k++)
		if (a->nodes[k] != b->nodes[k] || a->src[k] != b->src[k] ||
		    a->dst[k] != b->dst[k] || a->src_pos[k] != b->src_pos[k] ||
		    a->dst_pos[k] != b->dst_pos[k] ||
		    memcmp(a->hop_nodes[k], b->hop_nodes[k], sizeof(a->hop_nodes[k])) ||
		    memcmp(a->hop_edges[k], b->hop_edges[k], sizeof(a->hop_edges[k])))
			return 0;
	return 1;
}

static struct gs_fs *fs_mount(void)
{
	struct gs_fs_opts fo = {};
	struct gs_fs *fs;
	int ret;

	fo.path = img_;
	fo.cache_bytes = 256u << 20;
	fo.flags = GS_FS_WAIT;	/* the daemon of the last mount may still be writing back */
	ret = gs_fs_mount(&fs, &fo);
	if (ret == -EINVAL) {
		fo.flags |= GS_FS_BUFFERED;
		ret = gs_fs_mount(&fs, &fo);
	}
	OK(ret);
	return fs;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ret = 0;
	size_t n = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		ret = -errno;
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	return ret;
}

static void unmount_daemon(void)
{
	char cmd[8300];

	snprintf(cmd, sizeof(cmd), "umount '%s' 2>/dev/null || fusermount3 -u '%s'", mnt_, mnt_);
	if (system(cmd) != 0)
		printf("t_graph_attach: unmount of %s failed\n", mnt_);
}

int main(int argc, char **argv)
{
	struct gen gu = { 13, 60000, 3, 3000, 0, NULL, 11 };	/* hubs: large vertices */
	struct gen gd = { 13, 60000, 2, 2000, 1, NULL, 12 };
	struct gen g1 = { 10, 6000, 1, 1500, 0, NULL, 13 };
	struct gen g2 = { 11, 12000, 1, 1500, 1, NULL, 14 };
	int small = argc > 2 && !strcmp(argv[2], "small");
	struct tgraph tg[2] = {};
	struct gs_mkfs_opts mo = {};
	struct gs_fs *fs;
	char cmd[12000];

	skip_without_gpu();
	if (argc < 2) {
		fprintf(stderr, "usage: t_graph_attach GSTOREFS [small]\n");
		return 2;
	}
	if (access("/dev/fuse", R_OK | W_OK)) {
		printf("t_graph_attach: skip: no /dev/fuse\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	gs_set_log_func(log_to_stderr, NULL);
	if (getenv("GS_GRAPH_DIR"))
		dir_ = getenv("GS_GRAPH_DIR");
	mkdir(dir_, 0755);
	snprintf(img_, sizeof(img_), "%s/t_graph_attach.img", dir_);
	snprintf(mnt_, sizeof(mnt_), "%s/t_graph_attach.mnt", dir_);
	mkdir(mnt_, 0755);
	unlink(img_);
	mo.size = 1ull << 30;
	mo.force = 1;
	OK(gs_fs_mkfs(img_, &mo));

	/* undirected, varint, large vertices; updates applied by the sync's merge.
	 * The new edges join far vertices to the source: depths change */
	tg[0].name = "u";
	tg[0].gen = small ? g1 : gu;
	tg[0].flags = GS_GRAPH_IMPORT_UNDIRECTED;
	/* directed, weighted, fixed-width; merged through ctl before the sync */
	tg[1].name = "dw";
	tg[1].gen = small ? g2 : gd;
	tg[1].flags = GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_FIXED;
	tg[1].merge = 1;

	/* 1. the CPU engine's answers before the updates */
	fs = fs_mount();
	for (auto &t : tg) {
		struct gs_graph *g = graph_import(fs, dir_, t.name, &t.gen, t.flags);
		struct gs_graph_info gi;
		uint64_t x = 99;

		gs_graph_info(g, &gi);
		t.src = 1;
		t.seeds.resize(small ? 40 : 300);
		for (auto &s : t.seeds)
			s = xs(&x) % gi.nv;
		t.seeds[0] = 1;
		t.seeds[1] = 2;
		cpu_answers(g, &t, &t.before);
		/* new edges joining far vertices to the source (depths change) and,
		 * undirected, a vertex removed (components change) */
		uint64_t nv = gi.nv, pairs[5][2] = { { 1, nv - 3 }, { 1, nv - 5 }, { 2, nv / 2 + 1 },
						       { nv - 3, nv - 1 }, { 3, nv - 2 } };

		t.updates = new_edges(g, pairs, 5, t.gen.weighted);
		if (!t.merge)
			t.updates += "-v 5\n";
		OK(gs_graph_close(g));
	}
	OK(gs_fs_unmount(fs));

	/* 2. the mount, the GPU through attach */
	snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s'", argv[1], img_, mnt_);
	if (system(cmd) != 0) {	/* /dev/fuse is there: a failure, not a skip */
		printf("t_graph_attach: FAIL: %s did not mount %s\n", argv[1], mnt_);
		return 1;
	}
	struct answers got[2];
	struct gs_cuda_graph *cg[2] = {};
	int synced[2] = {};
	uint64_t gen0[2] = {};

	for (int i = 0; i < 2; i++) {
		struct tgraph *t = &tg[i];
		struct gs_cuda_graph_params p = {};
		std::string path = std::string(mnt_) + "/graph/" + t->name;

		p.cache_bytes = 1u << 20;	/* small: misses, evictions */
		p.stage_bytes = 256u << 10;	/* several CAM chunks */
		int r = gs_cuda_graph_attach(&cg[i], path.c_str(), &p);

		CHECK(r == 0, "%s: gs_cuda_graph_attach: %s", path.c_str(), strerror(-r));
		if (r)
			continue;
		const struct gs_graph_layout *l = gs_cuda_graph_layout(cg[i]);

		gen0[i] = l->gen;
		printf("t_graph_attach: %s: attached: %llu vertices, %llu pages, %u extents, gen "
		       "%llu\n", t->name, (unsigned long long)l->nv,
		       (unsigned long long)l->dir[0].ngtt, l->next, (unsigned long long)l->gen);
		gpu_vs(cg[i], t, &t->before, "attached", 0);
	}

	/* 3. updates through the mount; the GPU sees them after the sync point */
	for (int i = 0; i < 2; i++) {
		struct tgraph *t = &tg[i];
		std::string gd = std::string(mnt_) + "/graph/" + t->name;
		int r = write_file((gd + "/updates").c_str(), t->updates.c_str());

		CHECK(r == 0, "%s: updates: %s", t->name, strerror(-r));
		if (t->merge) {
			r = write_file((gd + "/ctl").c_str(), "merge\n");
			CHECK(r == 0, "%s: ctl merge: %s", t->name, strerror(-r));
		}
		if (!cg[i])
			continue;
		r = gs_cuda_graph_sync(cg[i]);
		CHECK(r == 0, "%s: gs_cuda_graph_sync: %s", t->name, strerror(-r));
		if (r)
			continue;
		const struct gs_graph_layout *l = gs_cuda_graph_layout(cg[i]);

		printf("t_graph_attach: %s: synced: gen %llu -> %llu, %llu vertices\n", t->name,
		       (unsigned long long)gen0[i], (unsigned long long)l->gen,
		       (unsigned long long)l->nv);
		CHECK(l->gen != gen0[i], "%s: the layout generation did not move", t->name);
		/* the results moved with the graph (the old answers no longer hold) */
		int d = gpu_vs(cg[i], t, &t->before, "synced-vs-old", 1);

		CHECK(d > 0, "%s: after the updates every GPU result is still the old graph's",
		      t->name);
		gpu_answers(cg[i], t, &got[i]);
		synced[i] = 1;
	}
	for (auto c : cg)
		gs_cuda_graph_close(c);
	unmount_daemon();

	/* 4. the CPU engine over the updated image: the GPU's synced answers */
	fs = fs_mount();
	for (int i = 0; i < 2; i++) {
		struct tgraph *t = &tg[i];
		struct gs_graph *g;

		if (!synced[i])
			continue;
		OK(gs_graph_open(fs, t->name, 0, &g));
		cpu_answers(g, t, &t->after);
		int eq = answers_equal(&got[i], &t->after);

		CHECK(eq, "%s: the GPU after the sync differs from the CPU engine on the updated "
		      "graph", t->name);
		printf("t_graph_attach: %s: after the sync, GPU vs CPU engine: %s\n", t->name,
		       eq ? "equal" : "DIFFER");
		OK(gs_graph_close(g));
	}
	OK(gs_fs_unmount(fs));
	unlink(img_);
	printf("t_graph_attach: %s\n", fails_ ? "FAIL" : "PASS");
	return fails_ ? 1 : 0;
}
