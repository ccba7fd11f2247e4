// SPDX-License-Identifier: MIT
/*
 * GNN mini-batch feature loading over storage (issue 15 item 3), one peer
 * per process so that bench/gnn-pipeline.sh can put each in a memory cgroup
 * and drop the page cache between them.  The table is an mkimage file (the
 * word at byte o is pattern(o), common.cuh): N rows of ROWB bytes (F float32
 * features: ROWB = 4 F) from byte 0.  Every peer checks the last batch it
 * gathered against the file's bytes and prints "RESULT name value unit how".
 *
 *   gnn check FILE                       gather correctness (row sizes that span
 *                                        blocks, duplicates, pieces, the tier)
 *   gnn check-attach MNT/arrays/NAME     the same over gs_cuda_attach (an mkimage copy)
 *   gnn check FILE quick                 three small cases (for compute-sanitizer)
 *   gnn gen OUT NROWS SEEDS FANOUTS NB   sample NB batches (FANOUTS "10,5") over a
 *                                        synthetic power-law graph of NROWS vertices
 *   gnn raw FILE SECS THREADS            random 4 KiB O_DIRECT preads: the disk's limit
 *   gnn gstore FILE BATCHES ROWB SECS|epoch TIER_MIB NAME [GPU_CACHE_MIB]
 *   gnn disk FILE BATCHES ROWB ROUNDS SECS NAME   gather windows and raw windows
 *                                        taking turns: the disk's share (cmd_disk);
 *                                        GNN_DISK_STREAMS ("2 1"): gather streams
 *   (GNN_GATHER_STREAMS: the gstore peer's gather streams, 2; see gpipe)
 *   gnn mmap FILE BATCHES ROWB SECS|epoch THREADS random|plain NAME
 *   gnn loadall FILE BATCHES ROWB NAME   read the table into GPU memory, gather there
 *
 * SECS: steady state for that long (batches/s over the whole window, cold
 * start); epoch: every batch of the file once, from open to the last batch.
 */
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_set>
#include <vector>

#include "common.cuh"
#include "gstore_cuda_gather.h"

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

/* bytes this process had read from storage (its threads', page faults included) */
static double io_read_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	double v = 0;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "read_bytes:", 11))
			v = atof(line + 11);
	if (f)
		fclose(f);
	return v;
}

static uint64_t file_size(const char *p)
{
	struct stat st;

	if (stat(p, &st) < 0) {
		perror(p);
		exit(1);
	}
	return st.st_size;
}

static inline uint8_t file_byte(uint64_t x)
{
	return (uint8_t)(pattern(x & ~7ull) >> (8 * (x & 7)));
}

/* Rows @rows[0, n) of @rb bytes from @base as gathered into @got: bad bytes. */
static uint64_t check_rows(const uint64_t *rows, uint64_t n, uint64_t rb, uint64_t base,
			   const uint8_t *got)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = base + rows[i] * rb;

		for (uint64_t b = 0; b < rb; b++)
			if (got[i * rb + b] != file_byte(off + b))
				bad++;
	}
	return bad;
}

/* ---- batches: u64 nbatch, then per batch u64 n and n u64 row ids ---- */
struct batches {
	std::vector<std::vector<uint64_t>> b;
	uint64_t total = 0, maxn = 0;
};

static void load_batches(const char *p, struct batches *bt)
{
	FILE *f = fopen(p, "rb");
	uint64_t nb = 0, n;

	if (!f || fread(&nb, 8, 1, f) != 1) {
		fprintf(stderr, "%s: bad batch file\n", p);
		exit(1);
	}
	bt->b.resize(nb);
	for (uint64_t i = 0; i < nb; i++) {
		if (fread(&n, 8, 1, f) != 1)
			exit(1);
		bt->b[i].resize(n);
		if (fread(bt->b[i].data(), 8, n, f) != n)
			exit(1);
		bt->total += n;
		bt->maxn = std::max(bt->maxn, n);
	}
	fclose(f);
}

/* The implicit graph: vertex v has 4..31 out-neighbours, skewed to low ids (hubs). */
static uint64_t g_deg(uint64_t v)
{
	return 4 + mix(v ^ 0xdeadbeefull) % 28;
}

static uint64_t g_nbr(uint64_t v, uint64_t j, uint64_t nv)
{
	double u = (mix(v * 64 + j) >> 11) * (1.0 / 9007199254740992.0);

	return (uint64_t)(u * u * (double)nv) % nv;
}

static int cmd_gen(int argc, char **argv)
{
	if (argc < 7)
		return 2;
	uint64_t nv = strtoull(argv[3], NULL, 0), seeds = strtoull(argv[4], NULL, 0);
	uint64_t nb = strtoull(argv[6], NULL, 0), rng = argc > 7 ? strtoull(argv[7], NULL, 0) : 1;
	std::vector<uint64_t> fan;
	FILE *f = fopen(argv[2], "wb");
	double t0 = now_s(), rows = 0;

	for (char *p = argv[5]; *p;) {
		char *e;

		fan.push_back(strtoull(p, &e, 10));
		p = *e ? e + 1 : e;
	}
	if (!f)
		return 1;
	fwrite(&nb, 8, 1, f);
	for (uint64_t b = 0; b < nb; b++) {
		std::vector<uint64_t> nodes, front, next;
		std::unordered_set<uint64_t> seen;

		/* seeds: uniform over the vertices; then per hop up to fanout neighbours
		 * (all if the degree is smaller), nodes deduplicated in first-seen order */
		for (uint64_t s = 0; s < seeds; s++) {
			uint64_t v = mix(rng * 0x9e37ull + b * seeds + s) % nv;

			if (seen.insert(v).second) {
				nodes.push_back(v);
				front.push_back(v);
			}
		}
		for (size_t h = 0; h < fan.size(); h++) {
			next.clear();
			for (uint64_t v : front) {
				uint64_t d = g_deg(v);

				for (uint64_t k = 0; k < std::min<uint64_t>(d, fan[h]); k++) {
					uint64_t j = d <= fan[h] ? k :
						mix(rng ^ (h << 56) ^ (v << 8) ^ k) % d;
					uint64_t w = g_nbr(v, j, nv);

					if (seen.insert(w).second) {
						nodes.push_back(w);
						next.push_back(w);
					}
				}
			}
			front.swap(next);
		}
		uint64_t n = nodes.size();

		fwrite(&n, 8, 1, f);
		fwrite(nodes.data(), 8, n, f);
		rows += n;
	}
	fclose(f);
	printf("RESULT %-28s %12.1f %-10s %llu batches, %.0f rows/batch, CPU sampler\n",
	       "gnn_sample_ms_per_batch", (now_s() - t0) * 1e3 / nb, "ms",
	       (unsigned long long)nb, rows / nb);
	return 0;
}

/* ---- the disk's raw limit ---- */
struct raw_arg {
	int fd;
	uint64_t nblk, seed, n;
	double until;
};

static void *raw_worker(void *p)
{
	struct raw_arg *a = (struct raw_arg *)p;
	void *buf;

	if (posix_memalign(&buf, 4096, 4096))
		return NULL;
	while (now_s() < a->until)
		for (int k = 0; k < 32; k++) {
			if (pread(a->fd, buf, 4096, (mix(a->seed++) % a->nblk) * 4096) != 4096)
				exit(1);
			a->n++;
		}
	free(buf);
	return NULL;
}

/* Random 4 KiB O_DIRECT preads of @fd's @nblk blocks from @nth threads for
 * @secs: reads per second. */
static double raw_rate(int fd, uint64_t nblk, int nth, double secs)
{
	std::vector<pthread_t> t(nth);
	std::vector<raw_arg> a(nth);
	double t0 = now_s();
	uint64_t n = 0;

	for (int i = 0; i < nth; i++) {
		a[i] = raw_arg{ fd, nblk, mix(t0 * 1e9 + i), 0, t0 + secs };
		pthread_create(&t[i], NULL, raw_worker, &a[i]);
	}
	for (int i = 0; i < nth; i++) {
		pthread_join(t[i], NULL);
		n += a[i].n;
	}
	return n / (now_s() - t0);
}

static int cmd_raw(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	const char *path = argv[2];
	double secs = atof(argv[3]);
	int nth = atoi(argv[4]), fd = open(path, O_RDONLY | O_DIRECT);
	std::vector<double> v;

	if (fd < 0)
		return 1;
	for (int run = 0; run < 4; run++) {
		double r = raw_rate(fd, file_size(path) / 4096, nth, run ? secs : 0.5);

		if (run)	/* run 0 warms up */
			v.push_back(r);
	}
	std::sort(v.begin(), v.end());
	printf("RESULT %-28s %12.0f %-10s O_DIRECT pread, %d threads, median of 3 x %.1f s\n",
	       "gnn_raw_iops", v[1], "IOPS", nth, secs);
	return 0;
}

/* ---- the consumer: reads every byte of the batch (stands in for the model) ---- */
static __global__ void consume_kernel(const uint4 *p, uint64_t n16, unsigned long long *sum)
{
	unsigned long long s = 0;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
	     i += (uint64_t)gridDim.x * blockDim.x)
		s += p[i].x ^ p[i].y ^ p[i].z ^ p[i].w;
	atomicAdd(sum, s);
}

static void consume(const void *buf, uint64_t bytes, unsigned long long *sum, cudaStream_t s)
{
	consume_kernel<<<264, 256, 0, s>>>((const uint4 *)buf, bytes / 16, sum);
	CK(cudaGetLastError());
}

struct run_out {
	double secs, batches, rows, cpu, io;
	uint64_t last;	/* index of the last batch consumed */
};

/* read/batch: the process's storage reads (/proc/self/io) over the batches */
static void report(const char *name, const char *mode, const run_out &o, uint64_t rb,
		   int threads, const char *how)
{
	printf("RESULT %-28s %12.3f %-10s %s: %.0f rows/s, %.2f MiB gathered/batch, %.2f MiB "
	       "read/batch, %.2f CPU cores busy, %d CPU threads, %.0f batches in %.2f s%s%s\n",
	       name, o.batches / o.secs, "batches/s", mode, o.rows / o.secs,
	       o.rows / o.batches * rb / 1048576.0, o.io / o.batches / 1048576.0,
	       o.cpu / o.secs, threads, o.batches, o.secs, *how ? "; " : "", how);
}

/* Epochs: batches/s over the second half of the batches (the steady part: the
 * table is in the page cache or the host tier by then). */
static void report_half(const char *name, const std::vector<double> &t)
{
	size_t n = t.size(), h = n / 2;

	if (n < 4)
		return;
	printf("RESULT %-28s %12.3f %-10s batches %zu..%zu of the epoch (its second half)\n",
	       (std::string(name) + "_2nd_half").c_str(), (n - 1 - h) / (t[n - 1] - t[h]),
	       "batches/s", h + 1, n - 1);
}

static int verify(const char *what, const std::vector<uint64_t> &rows, uint64_t rb,
		  const void *dbuf)
{
	std::vector<uint8_t> h(rows.size() * rb);

	CK(cudaMemcpy(h.data(), dbuf, h.size(), cudaMemcpyDeviceToHost));
	uint64_t bad = check_rows(rows.data(), rows.size(), rb, 0, h.data());

	printf("%s %s: last batch (%zu rows) %s (%llu bad bytes)\n", bad ? "FAIL" : "PASS", what,
	       rows.size(), bad ? "differs from the file" : "equals the file",
	       (unsigned long long)bad);
	return bad ? 1 : 0;
}

/* batches on the GPU: one array, offsets per batch */
static uint64_t *upload_rows(const batches &bt, std::vector<uint64_t> &first)
{
	uint64_t *d;
	std::vector<uint64_t> all;

	for (auto &b : bt.b) {
		first.push_back(all.size());
		all.insert(all.end(), b.begin(), b.end());
	}
	CK(cudaMalloc(&d, all.size() * 8));
	CK(cudaMemcpy(d, all.data(), all.size() * 8, cudaMemcpyHostToDevice));
	return d;
}

/* The double-buffered pipeline's parts: batch j gathered into buffer j & 1
 * on gather stream sg[j & 1] (or sg[0] alone: one stream) while batch j - 1
 * is consumed from the other buffer on sc.  With two gather streams the
 * reads of batch j + 1 start while batch j is still copied out of the
 * region (its plan and sort too): the disk is not left idle between
 * batches (a call waits for what its stream holds, its predecessor's copy
 * included). */
struct gpipe {
	batches bt;
	std::vector<uint64_t> first;
	uint64_t *drows;
	char *dbuf[2];
	unsigned long long *sum;
	cudaStream_t sg[2], sc;
	cudaEvent_t eg[2], ec[2];
	int nsg;	/* gather streams: 2, or 1 */
};

static void pipe_open(gpipe *p, const char *bat, uint64_t rb)
{
	load_batches(bat, &p->bt);
	CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
	CK(cudaFree(0));
	p->drows = upload_rows(p->bt, p->first);
	for (int i = 0; i < 2; i++) {
		CK(cudaMalloc(&p->dbuf[i], p->bt.maxn * rb));
		CK(cudaEventCreateWithFlags(&p->eg[i], cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&p->ec[i], cudaEventDisableTiming));
		CK(cudaStreamCreateWithFlags(&p->sg[i], cudaStreamNonBlocking));
	}
	CK(cudaMalloc(&p->sum, 8));
	CK(cudaStreamCreateWithFlags(&p->sc, cudaStreamNonBlocking));
	p->nsg = getenv("GNN_GATHER_STREAMS") ? atoi(getenv("GNN_GATHER_STREAMS")) : 2;
}

/* Gather batch @j (of the file's, modulo their count) into its buffer, once
 * the buffer's previous batch (j - 2) is consumed. */
static void pipe_gather(gpipe *p, struct gs_cuda_gather *g, uint64_t j)
{
	uint64_t b = j % p->bt.b.size();
	cudaStream_t s = p->sg[p->nsg > 1 ? j & 1 : 0];

	CK(cudaStreamWaitEvent(s, p->ec[j & 1], 0));
	OK(gs_cuda_gather(g, p->drows + p->first[b], p->bt.b[b].size(), p->dbuf[j & 1], s));
	CK(cudaEventRecord(p->eg[j & 1], s));
}

/* Consume batch @j once gathered, and wait for it: its rows. */
static uint64_t pipe_consume(gpipe *p, uint64_t j, uint64_t rb)
{
	uint64_t n = p->bt.b[j % p->bt.b.size()].size();

	CK(cudaStreamWaitEvent(p->sc, p->eg[j & 1], 0));
	consume(p->dbuf[j & 1], n * rb, p->sum, p->sc);
	CK(cudaEventRecord(p->ec[j & 1], p->sc));
	CK(cudaEventSynchronize(p->ec[j & 1]));
	return n;
}

/* gstore's side: @pollers on @path, a gs_cuda with a 256 MiB region
 * (GNN_REGION_MIB) and rings of 8192 requests over it; *gp: the gather's
 * parameters for rows of @rb bytes over the whole file */
static struct gs_cuda *gstore_open(const char *path, unsigned pollers, uint64_t rb,
				   struct gs_q **q, struct gs_cuda_gather_params *gp)
{
	struct gs_cuda_params p = {};
	struct gs_cuda *c;

	*gp = gs_cuda_gather_params{};
	gp->row_bytes = rb;
	gp->nrows = file_size(path) / rb;
	*q = open_q(path, pollers, 0);
	p.sq_entries = 8192;
	p.buf_bytes = (size_t)(getenv("GNN_REGION_MIB") ? atoi(getenv("GNN_REGION_MIB")) : 256)
		      << 20;
	OK(gs_cuda_open(&c, *q, &p));
	return c;
}

static int cmd_gstore(int argc, char **argv)
{
	if (argc < 8)
		return 2;
	const char *path = argv[2], *name = argv[7];
	uint64_t rb = strtoull(argv[4], NULL, 0), tier = strtoull(argv[6], NULL, 0) << 20;
	uint64_t cache = argc > 8 ? strtoull(argv[8], NULL, 0) << 20 : 0;
	int epoch = !strcmp(argv[5], "epoch");
	double secs = epoch ? 1e9 : atof(argv[5]);
	unsigned pollers = getenv("GNN_POLLERS") ? atoi(getenv("GNN_POLLERS")) : 2;
	int tfd = -1;

	gpipe pp;

	pipe_open(&pp, argv[3], rb);
	batches &bt = pp.bt;
	char **dbuf = pp.dbuf;
	double t0 = now_s(), c0 = cpu_now(), io0 = io_read_bytes();
	struct gs_q *q;
	struct gs_cuda_gather_params gp;
	struct gs_cuda *c = gstore_open(path, pollers, rb, &q, &gp);
	struct gs_cuda_gather *g;

	if (tier) {
		tfd = open(path, O_RDONLY | O_DIRECT);
		if (tfd < 0)
			return 1;
		gp.tier_bytes = tier;
		gp.tier_fd = tfd;
		gp.tier_chunk = (getenv("GNN_TIER_CHUNK_MIB") ? atoi(getenv("GNN_TIER_CHUNK_MIB")) :
				 16) << 20;
	}
	gp.cache_bytes = cache;
	OK(gs_cuda_gather_open(&g, c, &gp));

	/* gather batch i + 1 while batch i is consumed (gpipe) */
	uint64_t nb = bt.b.size(), done = 0, i;
	double until = t0 + secs;
	std::vector<double> tb;

	pipe_gather(&pp, g, 0);
	/* steady state: the batches again and again until the window closes */
	for (i = 0; epoch ? i < nb : now_s() < until; i++) {
		if (!epoch || i + 1 < nb)
			pipe_gather(&pp, g, i + 1);
		done += pipe_consume(&pp, i, rb);
		tb.push_back(now_s());
	}
	run_out o = { now_s() - t0, (double)i, (double)done, cpu_now() - c0,
		      io_read_bytes() - io0, i - 1 };
	int ret = gs_cuda_gather_sync(g);
	struct gs_cuda_gather_stats st;

	OK(gs_cuda_gather_stats(g, &st));
	char how[480];

	snprintf(how, sizeof(how), "gathers read %.1f MiB/batch; %llu requests, %llu blocks, %llu "
		 "GPU cache hits (%llu MiB) for %llu rows (%llu from the host tier, %.0f MiB filled "
		 "in %.2f s)%s; reads on %u of %u rings, %d gather stream%s; the main thread "
		 "sleeps in cudaEventSynchronize",
		 (st.bytes / 1048576.0) / std::max<double>(1, st.calls),
		 (unsigned long long)st.requests, (unsigned long long)st.blocks,
		 (unsigned long long)st.cache_hits, (unsigned long long)(cache >> 20),
		 (unsigned long long)st.rows, (unsigned long long)st.tier_rows,
		 st.tier_filled / 1048576.0, st.tier_fill_s, st.tier_err ? ", TIER FAILED" : "",
		 st.rings_used, st.rings, pp.nsg, pp.nsg > 1 ? "s" : "");
	/* threads: the pollers, the tier's fill and (until it has pinned the tier) pinner */
	report(name, epoch ? "epoch" : "steady", o, rb, (int)pollers + (tier ? 2 : 0), how);
	if (epoch)
		report_half(name, tb);
	/* per consumed batch: the last call (prefetched, not consumed) is left out */
	double per = o.batches / std::max<double>(1, st.calls) / o.secs;

	printf("RESULT %-28s %12.0f %-10s 4 KiB device blocks the gathers read per second (%.0f "
	       "requests/s, runs of up to 32 blocks)\n", (std::string(name) + "_blocks").c_str(),
	       st.blocks * per, "blocks/s", st.requests * per);
	if (ret) {
		printf("FAIL %s: gather error %s\n", name, strerror(-ret));
		return 1;
	}
	ret = verify(name, bt.b[o.last % nb], rb, dbuf[o.last & 1]);
	gs_cuda_gather_close(g);
	gs_cuda_close(c);
	gs_q_close(q);
	if (tfd >= 0)
		close(tfd);
	return ret;
}

/*
 * The disk's share, interleaved: raw windows (64 O_DIRECT pread threads) and
 * gather windows (gs_cuda_gather over the batches, 2 pollers, no GPU cache,
 * the pipeline of cmd_gstore) taking turns in one process, the context open
 * throughout (its open and first batch are not in a window), raw first and
 * last.  Each gather window's device blocks/s against the mean of the raw
 * windows around it; the median ratio and its spread.  The virtio disk moves
 * 10-30 % between minutes (70 K to 100 K raw IOPS in three runs): a raw row
 * measured once, before, decided the target by its drift.
 *
 *   gnn disk FILE BATCHES ROWB ROUNDS SECS NAME
 *
 * Each round has a gather window per stream count of GNN_DISK_STREAMS ("2 1":
 * the pipeline's two gather streams, then one, for the comparison), each
 * followed by a raw window.
 */
static int cmd_disk(int argc, char **argv)
{
	if (argc < 8)
		return 2;
	const char *path = argv[2], *name = argv[7];
	uint64_t rb = strtoull(argv[4], NULL, 0);
	int rounds = atoi(argv[5]);
	double secs = atof(argv[6]);
	unsigned pollers = getenv("GNN_POLLERS") ? atoi(getenv("GNN_POLLERS")) : 2;
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0 || rounds < 1)
		return 2;
	gpipe pp;

	pipe_open(&pp, argv[3], rb);
	batches &bt = pp.bt;
	uint64_t nb = bt.b.size(), nblk = file_size(path) / 4096;
	struct gs_q *q;
	struct gs_cuda_gather_params gp;
	struct gs_cuda *c = gstore_open(path, pollers, rb, &q, &gp);
	struct gs_cuda_gather *g;

	OK(gs_cuda_gather_open(&g, c, &gp));

	uint64_t i = 0, last = 0;
	/* one window of the pipeline with @nsg gather streams, drained at its end
	 * (the batch gathered ahead consumed too): device blocks read per second */
	auto window = [&](double w, int nsg) {
		struct gs_cuda_gather_stats s0, s1;
		double t0, until;

		pp.nsg = nsg;
		OK(gs_cuda_gather_stats(g, &s0));
		t0 = now_s();
		until = t0 + w;
		pipe_gather(&pp, g, i);
		for (; now_s() < until; i++) {
			pipe_gather(&pp, g, i + 1);
			pipe_consume(&pp, i, rb);
		}
		pipe_consume(&pp, i, rb);
		last = i++;
		OK(gs_cuda_gather_stats(g, &s1));
		return (s1.blocks - s0.blocks) / (now_s() - t0);
	};
	/* gather stream counts to compare (GNN_DISK_STREAMS, "2 1"): the first is the
	 * pipeline's default and the target's row */
	std::vector<int> modes;

	for (const char *m = getenv("GNN_DISK_STREAMS") ? getenv("GNN_DISK_STREAMS") : "2 1"; *m;
	     m++)
		if (*m == '1' || *m == '2')
			modes.push_back(*m - '0');
	if (modes.empty())
		modes.push_back(2);
	window(0.5, modes[0]);	/* warm-up: the paths touched once */
	raw_rate(fd, nblk, 64, 0.3);

	std::vector<double> raw;
	std::vector<std::vector<double>> gv(modes.size()), q2(modes.size());

	raw.push_back(raw_rate(fd, nblk, 64, secs));
	for (int r = 0; r < rounds; r++)
		for (size_t m = 0; m < modes.size(); m++) {
			gv[m].push_back(window(secs, modes[m]));
			raw.push_back(raw_rate(fd, nblk, 64, secs));
			q2[m].push_back(gv[m].back() / ((raw[raw.size() - 2] + raw.back()) / 2));
		}
	int ret = gs_cuda_gather_sync(g);
	struct gs_cuda_gather_stats st;

	OK(gs_cuda_gather_stats(g, &st));
	auto med = [](std::vector<double> v) {
		std::sort(v.begin(), v.end());
		return v.size() & 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
	};
	auto lo = [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); };
	auto hi = [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); };

	printf("RESULT %-28s %12.0f %-10s O_DIRECT pread, 64 threads: median of %zu windows of "
	       "%.1f s between the gather windows (%.0f..%.0f)\n",
	       (std::string(name) + "_raw").c_str(), med(raw), "IOPS", raw.size(), secs, lo(raw),
	       hi(raw));
	for (size_t m = 0; m < modes.size(); m++) {
		std::string n = m ? std::string(name) + "_" + std::to_string(modes[m]) + "s" : name;

		printf("RESULT %-28s %12.0f %-10s gs_cuda_gather, 4 KiB device blocks read per "
		       "second: median of %d windows of %.1f s (%.0f..%.0f), %u pollers, %d gather "
		       "stream%s, reads on %u of %u rings, no GPU cache, open and first batch "
		       "outside the windows\n", (n + "_gstore").c_str(), med(gv[m]), "blocks/s",
		       rounds, secs, lo(gv[m]), hi(gv[m]), pollers, modes[m], modes[m] > 1 ? "s" : "",
		       st.rings_used, st.rings);
		printf("RESULT %-28s %12.2f %-10s median of %d ratios, each gather window to the "
		       "mean of the raw windows before and after it (%.2f..%.2f)\n", n.c_str(),
		       med(q2[m]), "x", rounds, lo(q2[m]), hi(q2[m]));
	}
	if (ret) {
		printf("FAIL %s: gather error %s\n", name, strerror(-ret));
		return 1;
	}
	ret = verify(name, bt.b[last % nb], rb, pp.dbuf[last & 1]);
	gs_cuda_gather_close(g);
	gs_cuda_close(c);
	gs_q_close(q);
	close(fd);
	return ret;
}

/* ---- the mmap loader: what DGL / PyG do (np.memmap, CPU gather, copy) ---- */
struct mm_arg {
	const char *map;
	const uint64_t *rows;
	uint64_t lo, hi, rb;
	char *dst;
	double until;
	uint64_t done;
};

static void *mm_worker(void *p)
{
	struct mm_arg *a = (struct mm_arg *)p;

	for (uint64_t i = a->lo; i < a->hi; i++) {
		if ((i & 7) == 0 && now_s() > a->until)
			break;
		memcpy(a->dst + i * a->rb, a->map + a->rows[i] * a->rb, a->rb);
		a->done++;
	}
	return NULL;
}

static int cmd_mmap(int argc, char **argv)
{
	if (argc < 9)
		return 2;
	const char *path = argv[2], *name = argv[8];
	uint64_t rb = strtoull(argv[4], NULL, 0), size = file_size(path);
	int epoch = !strcmp(argv[5], "epoch"), nth = atoi(argv[6]);
	double secs = epoch ? 1e9 : atof(argv[5]);
	batches bt;

	load_batches(argv[3], &bt);
	CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
	CK(cudaFree(0));
	int fd = open(path, O_RDONLY);
	char *map = (char *)mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

	if (fd < 0 || map == MAP_FAILED)
		return 1;
	if (!strcmp(argv[7], "random"))
		madvise(map, size, MADV_RANDOM);
	char *hbuf[2], *dbuf[2];
	unsigned long long *sum;
	cudaStream_t s;
	cudaEvent_t ec[2];

	for (int i = 0; i < 2; i++) {
		CK(cudaHostAlloc(&hbuf[i], bt.maxn * rb, cudaHostAllocDefault));	/* pin_memory */
		CK(cudaMalloc(&dbuf[i], bt.maxn * rb));
		CK(cudaEventCreateWithFlags(&ec[i], cudaEventDisableTiming));
	}
	CK(cudaMalloc(&sum, 8));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	double t0 = now_s(), c0 = cpu_now(), io0 = io_read_bytes(), until = t0 + secs, part = 0;
	std::vector<double> tb;
	uint64_t nb = bt.b.size(), done = 0, i;

	for (i = 0; epoch ? i < nb : now_s() < until; i++) {
		int k = i & 1;
		const std::vector<uint64_t> &r = bt.b[i % nb];
		std::vector<pthread_t> t(nth);
		std::vector<mm_arg> a(nth);
		uint64_t got = 0;

		/* the buffers of batch i - 2 are free once its copy is done */
		CK(cudaEventSynchronize(ec[k]));
		for (int j = 0; j < nth; j++) {
			a[j] = mm_arg{ map, r.data(), r.size() * j / nth, r.size() * (j + 1) / nth,
				       rb, hbuf[k], epoch ? 1e18 : until, 0 };
			pthread_create(&t[j], NULL, mm_worker, &a[j]);
		}
		for (int j = 0; j < nth; j++) {
			pthread_join(t[j], NULL);
			got += a[j].done;
		}
		done += got;
		if (got < r.size()) {	/* the window closed inside this batch */
			part = (double)got / r.size();
			break;
		}
		CK(cudaMemcpyAsync(dbuf[k], hbuf[k], r.size() * rb, cudaMemcpyHostToDevice, s));
		consume(dbuf[k], r.size() * rb, sum, s);
		CK(cudaEventRecord(ec[k], s));
		tb.push_back(now_s());
		if (!epoch && now_s() >= until) {
			i++;
			break;
		}
	}
	CK(cudaStreamSynchronize(s));
	run_out o = { now_s() - t0, i + part, (double)done, cpu_now() - c0, io_read_bytes() - io0,
		      i ? i - 1 : 0 };
	char how[128];

	snprintf(how, sizeof(how), "mmap%s, %d gather threads, pinned copy", !strcmp(argv[7],
		 "random") ? " + MADV_RANDOM" : "", nth);
	report(name, epoch ? "epoch" : "steady", o, rb, nth, how);
	if (epoch)
		report_half(name, tb);
	if (!i) {
		printf("PASS %s: no whole batch in the window (nothing to check)\n", name);
		return 0;
	}
	return verify(name, bt.b[o.last % nb], rb, dbuf[o.last & 1]);
}

/* ---- load everything into GPU memory, then gather there ---- */
static __global__ void gather_kernel(const char *table, const uint64_t *rows, uint64_t n,
				     uint64_t rb, char *dst)
{
	uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	int lane = threadIdx.x & 31;

	for (; w < n; w += (uint64_t)gridDim.x * blockDim.x / 32)
		for (uint64_t o = lane * 4; o < rb; o += 128)
			*(uint32_t *)(dst + w * rb + o) = *(const uint32_t *)(table + rows[w] * rb + o);
}

struct load_arg {
	int fd;
	char *dtab;
	uint64_t size, chunk;
	std::atomic<uint64_t> *next;
	int err;
};

static void *load_worker(void *p)
{
	struct load_arg *a = (struct load_arg *)p;
	void *buf;
	cudaStream_t s;

	if (posix_memalign(&buf, 4096, a->chunk))
		return NULL;
	CK(cudaHostRegister(buf, a->chunk, cudaHostRegisterDefault));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (;;) {
		uint64_t off = a->next->fetch_add(a->chunk);

		if (off >= a->size)
			break;
		uint64_t len = std::min(a->chunk, a->size - off);

		if (pread(a->fd, buf, (len + 4095) & ~4095ull, off) < (ssize_t)len) {
			a->err = 1;
			break;
		}
		CK(cudaMemcpyAsync(a->dtab + off, buf, len, cudaMemcpyHostToDevice, s));
		CK(cudaStreamSynchronize(s));
	}
	cudaHostUnregister(buf);
	cudaStreamDestroy(s);
	free(buf);
	return NULL;
}

static int cmd_loadall(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	const char *path = argv[2], *name = argv[5];
	uint64_t rb = strtoull(argv[4], NULL, 0), size = file_size(path);
	batches bt;
	std::vector<uint64_t> first;
	size_t fr, tot;

	load_batches(argv[3], &bt);
	CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
	CK(cudaFree(0));
	CK(cudaMemGetInfo(&fr, &tot));
	if (size + 2 * bt.maxn * rb + (1ull << 30) > fr) {
		printf("RESULT %-28s %12s %-10s the table (%.1f GiB) does not fit in GPU memory\n",
		       name, "n/a", "", size / 1073741824.0);
		return 0;
	}
	uint64_t *drows = upload_rows(bt, first);
	char *dtab, *dbuf[2];
	unsigned long long *sum;
	cudaStream_t s;

	CK(cudaMalloc(&dtab, size));
	for (int i = 0; i < 2; i++)
		CK(cudaMalloc(&dbuf[i], bt.maxn * rb));
	CK(cudaMalloc(&sum, 8));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	double t0 = now_s(), c0 = cpu_now(), io0 = io_read_bytes();
	int fd = open(path, O_RDONLY | O_DIRECT), nth = 4;
	std::atomic<uint64_t> next(0);
	std::vector<pthread_t> t(nth);
	std::vector<load_arg> a(nth);

	if (fd < 0)
		return 1;
	for (int j = 0; j < nth; j++) {
		a[j] = load_arg{ fd, dtab, size, 64ull << 20, &next, 0 };
		pthread_create(&t[j], NULL, load_worker, &a[j]);
	}
	for (int j = 0; j < nth; j++) {
		pthread_join(t[j], NULL);
		if (a[j].err) {
			printf("FAIL %s: load read failed\n", name);
			return 1;
		}
	}
	double tload = now_s() - t0;
	std::vector<double> tb;

	for (uint64_t i = 0; i < bt.b.size(); i++) {
		uint64_t n = bt.b[i].size();

		gather_kernel<<<1024, 256, 0, s>>>(dtab, drows + first[i], n, rb, dbuf[i & 1]);
		CK(cudaGetLastError());
		consume(dbuf[i & 1], n * rb, sum, s);
		CK(cudaStreamSynchronize(s));
		tb.push_back(now_s());
	}
	CK(cudaStreamSynchronize(s));
	uint64_t nb = bt.b.size();
	run_out o = { now_s() - t0, (double)nb, (double)bt.total, cpu_now() - c0,
		      io_read_bytes() - io0, nb - 1 };
	char how[128];

	snprintf(how, sizeof(how), "load %.2f s (%.2f GB/s, %d threads x 64 MiB O_DIRECT) then "
		 "GPU gathers", tload, size / tload / 1e9, nth);
	report(name, "epoch", o, rb, nth, how);
	report_half(name, tb);
	close(fd);
	return verify(name, bt.b[nb - 1], rb, dbuf[(nb - 1) & 1]);
}

/* ---- correctness ---- */
static int tier_flags = O_DIRECT;	/* a mounted file's tier: buffered reads through FUSE */

static uint64_t check_cache_mib;	/* GPU cache for the next check_case() */
static int check_rings;			/* the next check_case() must use 2 rings or more */

/*
 * The bytes the checks read: an mkimage file that other tests share (run-all.sh's
 * image, where t_cam and t_bam write, and the mounted copy arrays/big, where
 * t_attach writes) without its last WR_BLOCKS blocks, where their write tests
 * leave other data; all of a small table.
 */
static uint64_t check_bytes(const char *path)
{
	uint64_t sz = file_size(path), keep = (uint64_t)WR_BLOCKS * BS;

	return sz > 2 * keep ? sz - keep : sz;
}

static int check_case(const char *path, struct gs_cuda *c, uint64_t rb, uint64_t base,
		      uint64_t tier_mib, uint64_t n, int during_fill, uint64_t nrows)
{
	struct gs_cuda_gather_params gp = {};
	struct gs_cuda_gather *g;
	uint64_t *drows;
	std::vector<uint64_t> rows(n);
	std::vector<uint8_t> h(n * rb);
	char *dst;
	int tfd = -1, ret;

	if (!nrows)
		nrows = (check_bytes(path) - base) / rb;
	gp.row_bytes = rb;
	gp.base = base;
	gp.nrows = nrows;
	gp.cache_bytes = check_cache_mib << 20;
	if (tier_mib) {
		tfd = open(path, O_RDONLY | tier_flags);
		gp.tier_bytes = tier_mib << 20;
		gp.tier_fd = tfd;
		gp.tier_chunk = 1 << 20;
		gp.tier_depth = 4;
	}
	ret = gs_cuda_gather_open(&g, c, &gp);
	if (ret) {
		printf("FAIL check rb %llu: open: %s\n", (unsigned long long)rb, strerror(-ret));
		return 1;
	}
	if (tier_mib && !during_fill)
		OK(gs_cuda_gather_tier_wait(g));
	/* random rows with duplicates, the table's first and last rows, inside the
	 * tier's range and beyond it */
	for (uint64_t i = 0; i < n; i++)
		rows[i] = i % 7 == 3 ? rows[i / 2] : mix(i * 31 + rb) % nrows;
	rows[0] = 0;
	rows[n - 1] = nrows - 1;
	CK(cudaMalloc(&drows, n * 8));
	CK(cudaMalloc(&dst, n * rb));
	CK(cudaMemset(dst, 0xa5, n * rb));
	CK(cudaMemcpy(drows, rows.data(), n * 8, cudaMemcpyHostToDevice));
	uint64_t bad = 0;

	/* with a GPU cache: twice, the second time largely from the cache */
	for (int pass = 0; pass < (check_cache_mib ? 2 : 1) && !ret && !bad; pass++) {
		CK(cudaMemset(dst, 0xa5, n * rb));
		ret = gs_cuda_gather(g, drows, n, dst, NULL);
		if (!ret)
			ret = gs_cuda_gather_sync(g);
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpy(h.data(), dst, n * rb, cudaMemcpyDeviceToHost));
		bad = ret ? 0 : check_rows(rows.data(), n, rb, base, h.data());
	}
	struct gs_cuda_gather_stats st;

	OK(gs_cuda_gather_stats(g, &st));
	/* the reads spread over the rings (each warp's SM's), not all on the first
	 * (check_rings: a case whose one piece issues from 24 blocks of 128
	 * threads, which an idle GPU spreads over SMs; at most 17 of an H100's
	 * 132 SMs share a ring of 8; the small-region cases' pieces issue from 2
	 * blocks, which may share one) */
	int one_ring = check_rings && st.rings > 1 && st.rings_used < 2;

	printf("%s check rb %llu base %llu tier %llu MiB cache %llu MiB%s: %llu rows (%llu pieces "
	       "of <= %llu), %llu blocks, %llu cache hits, %llu requests on %u of %u rings, %llu "
	       "from the tier: %s, %llu bad bytes%s\n",
	       ret || bad || one_ring ? "FAIL" : "PASS", (unsigned long long)rb,
	       (unsigned long long)base,
	       (unsigned long long)tier_mib, (unsigned long long)check_cache_mib,
	       during_fill ? " (during fill)" : "",
	       (unsigned long long)n, (unsigned long long)((n + gs_cuda_gather_max_rows(g) - 1) /
							  gs_cuda_gather_max_rows(g)),
	       (unsigned long long)gs_cuda_gather_max_rows(g), (unsigned long long)st.blocks,
	       (unsigned long long)st.cache_hits, (unsigned long long)st.requests, st.rings_used,
	       st.rings, (unsigned long long)st.tier_rows,
	       ret ? strerror(-ret) : "ok", (unsigned long long)bad, one_ring ? " (ONE RING)" : "");
	int fail = ret || bad || (check_cache_mib && !st.cache_hits) || one_ring;

	/* a row past the end: -ERANGE, and the other rows still right */
	if (!tier_mib && rb == 4096) {
		uint64_t two[2] = { nrows, 5 };

		CK(cudaMemcpy(drows, two, 16, cudaMemcpyHostToDevice));
		ret = gs_cuda_gather(g, drows, 2, dst, NULL);
		if (!ret)
			ret = gs_cuda_gather_sync(g);
		CK(cudaMemcpy(h.data(), dst + rb, rb, cudaMemcpyDeviceToHost));
		bad = check_rows(two + 1, 1, rb, base, h.data());
		printf("%s check out-of-range row: %s (want %s), next row %s\n",
		       ret == -ERANGE && !bad ? "PASS" : "FAIL", strerror(-ret), strerror(ERANGE),
		       bad ? "wrong" : "right");
		fail |= ret != -ERANGE || bad;
	}
	gs_cuda_gather_close(g);
	cudaFree(drows);
	cudaFree(dst);
	if (tfd >= 0)
		close(tfd);
	return fail;
}

/* check: in-process over a gs_q on FILE; check-attach: a mounted arrays/NAME */
static int cmd_check(int argc, char **argv)
{
	const char *path = argv[2];
	int attach = !strcmp(argv[1], "check-attach");
	struct gs_q *q = attach ? NULL : open_q(path, 2, 0);
	struct gs_cuda_params p = {};
	struct gs_cuda *c;
	int fail = 0;

	/* a small region: 1 MiB halves, so big calls go in several pieces */
	p.buf_bytes = 2u << 20;
	if (attach) {
		int ret = gs_cuda_attach(&c, path, &p);

		if (ret) {
			printf("FAIL gnn check-attach: gs_cuda_attach(%s): %s\n", path,
			       strerror(-ret));
			return 1;
		}
		tier_flags = 0;
	} else {
		OK(gs_cuda_open(&c, q, &p));
	}
	if (argc > 3 && !strcmp(argv[3], "quick")) {	/* under compute-sanitizer */
		fail |= check_case(path, c, 400, 0, 0, 300, 0, 0);
		fail |= check_case(path, c, 4096, 0, 1, 300, 0, 4096);
		fail |= check_case(path, c, 1024, 0, 4, 300, 0, 4096);
		check_cache_mib = 1;
		fail |= check_case(path, c, 400, 0, 0, 300, 0, 4096);
		check_cache_mib = 0;
		goto out;
	}
	fail |= check_case(path, c, 4096, 0, 0, 3000, 0, 0);
	fail |= check_case(path, c, 1024, 0, 0, 3000, 0, 0);
	fail |= check_case(path, c, 400, 0, 0, 3000, 0, 0);	/* rows span blocks */
	fail |= check_case(path, c, 6000, 0, 0, 700, 0, 0);	/* > a block, unaligned */
	fail |= check_case(path, c, 512, 100, 0, 3000, 0, 0);	/* base inside a block */
	fail |= check_case(path, c, 4096, 0, 8, 3000, 0, 16384);	/* half the table in the tier */
	fail |= check_case(path, c, 400, 0, 256, 3000, 1, 0);	/* while it fills */
	fail |= check_case(path, c, 1024, 0, 1024, 3000, 0, 65536);	/* all of it */
	/* the GPU cache (small: lines evicted by others, rows spanning blocks in part cached) */
	check_cache_mib = 4;
	fail |= check_case(path, c, 4096, 0, 0, 3000, 0, 8192);
	fail |= check_case(path, c, 400, 0, 0, 3000, 0, 65536);
	fail |= check_case(path, c, 6000, 0, 8, 700, 0, 16384);	/* with a tier too */
	check_cache_mib = 0;
	if (q) {
		/* 3000 rows in one piece (64 MiB region): its reads on several rings */
		struct gs_cuda *c2;

		OK(gs_cuda_open(&c2, q, NULL));
		check_rings = 1;
		fail |= check_case(path, c2, 4096, 0, 0, 3000, 0, 0);
		check_rings = 0;
		OK(gs_cuda_error(c2));
		gs_cuda_close(c2);
	}
out:
	OK(gs_cuda_error(c));
	gs_cuda_close(c);
	if (q)
		gs_q_close(q);
	printf("%s gnn %s\n", fail ? "FAIL" : "PASS", argv[1]);
	return fail;
}

int main(int argc, char **argv)
{
	int ret = 2;

	if (argc < 3) {
		fprintf(stderr, "usage: see the comment at the top of tests/gpu/gnn.cu\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	gs_set_log_func(log_to_stderr, NULL);
	if (!strcmp(argv[1], "gen"))
		ret = cmd_gen(argc, argv);
	else if (!strcmp(argv[1], "raw"))
		ret = cmd_raw(argc, argv);
	else {
		skip_without_gpu();
		if (!strcmp(argv[1], "check") || !strcmp(argv[1], "check-attach"))
			ret = cmd_check(argc, argv);
		else if (!strcmp(argv[1], "gstore"))
			ret = cmd_gstore(argc, argv);
		else if (!strcmp(argv[1], "disk"))
			ret = cmd_disk(argc, argv);
		else if (!strcmp(argv[1], "mmap"))
			ret = cmd_mmap(argc, argv);
		else if (!strcmp(argv[1], "loadall"))
			ret = cmd_loadall(argc, argv);
	}
	if (ret == 2)
		fprintf(stderr, "gnn: bad arguments (see tests/gpu/gnn.cu)\n");
	return ret;
}
