// SPDX-License-Identifier: MIT
/*
 * gstore import graph / gstore graph: graph objects from the command line.
 *
 * Imports run in-process on an unmounted image (--image), or through a
 * mount (--mount: the edge list is written into graph/NAME/edges).  The
 * other subcommands (info, neighbors, update, merge, the apps, export-csr)
 * open the image in-process, except update and merge, which also go through
 * a mount (graph/NAME/updates and ctl: the daemon's handle applies them); the apps run multithreaded over the graph's
 * request queues and can run on the CSR baseline (--csr) for comparison.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "gstore_graph.h"
#include "cmd.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end);
	uint64_t m = 1;

	switch (*end) {
	case 'k': case 'K': m = 1ULL << 10; end++; break;
	case 'm': case 'M': m = 1ULL << 20; end++; break;
	case 'g': case 'G': m = 1ULL << 30; end++; break;
	case 't': case 'T': m = 1ULL << 40; end++; break;
	}
	if (end == s || *end || v < 0)
		return -1;
	*out = (uint64_t)(v * (double)m);
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return end == s || *end || errno || *s == '-' ? -1 : 0;
}

static uint64_t peak_rss(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss * 1024;
}

/* ---- opening the image ---- */

struct img_opts {
	const char *image, *mnt;
	uint64_t cache;
	uint32_t line;
	int buffered;
};

static int img_mount(const struct img_opts *io, struct gs_fs **fs)
{
	struct gs_fs_opts o = { .path = io->image, .cache_bytes = io->cache,
				.line_size = io->line };
	int ret;

	if (io->buffered)
		o.flags |= GS_FS_BUFFERED;
	ret = gs_fs_mount(fs, &o);
	if (ret == -EINVAL && !io->buffered) {
		o.flags |= GS_FS_BUFFERED;	/* no O_DIRECT where the image lives */
		ret = gs_fs_mount(fs, &o);
	}
	if (ret)
		gs_fail(0, "cannot open %s: %s%s", io->image, strerror(-ret),
			ret == -EBUSY ? " (mounted? use --mount, or unmount it)" : "");
	return ret;
}

/* --image/--mount/--cache/--line-size/--buffered, shared by the commands */
enum { O_IMAGE = 0x100, O_MOUNT, O_CACHE, O_LINE, O_BUFFERED };
#define IMG_LONGOPTS								\
	{ "image", required_argument, NULL, O_IMAGE },				\
	{ "mount", required_argument, NULL, O_MOUNT },				\
	{ "cache", required_argument, NULL, O_CACHE },				\
	{ "line-size", required_argument, NULL, O_LINE },			\
	{ "buffered", no_argument, NULL, O_BUFFERED }

static int img_opt(int c, struct img_opts *io)
{
	uint64_t x;

	switch (c) {
	case O_IMAGE: io->image = optarg; return 1;
	case O_MOUNT: io->mnt = optarg; return 1;
	case O_BUFFERED: io->buffered = 1; return 1;
	case O_CACHE:
		if (parse_size(optarg, &x))
			return -1;
		io->cache = x;
		return 1;
	case O_LINE:
		if (parse_size(optarg, &x) || x > (1u << 30))
			return -1;
		io->line = (uint32_t)x;
		return 1;
	}
	return 0;
}

/* No --image: a mounted gstorefs ($GSTORE_MOUNT or /mnt/gstore) if any. */
static int img_resolve(struct img_opts *io)
{
	if (io->image && io->mnt)
		return gs_fail(-1, "give --image or --mount, not both");
	if (io->image) {
		char *where = gs_find_mount(io->image);

		if (where) {
			io->mnt = where;	/* the daemon owns it: go through the mount */
			io->image = NULL;
		}
		return 0;
	}
	if (!io->mnt) {
		io->mnt = getenv("GSTORE_MOUNT");
		if (!io->mnt && gs_is_mount("/mnt/gstore"))
			io->mnt = "/mnt/gstore";
	}
	return io->mnt ? 0 : gs_fail(-1, "no target: give --image IMG or --mount MNT");
}

/* ---- import ---- */

struct prog {
	struct gs_progress p;
	const char *phase;
	uint64_t last;
};

static void on_progress(void *arg, const char *phase, uint64_t done, uint64_t total)
{
	struct prog *pr = arg;

	if (pr->phase != phase) {
		if (pr->phase)
			gs_progress_end(&pr->p);
		pr->phase = phase;
		pr->last = 0;
		/* bytes while reading, edges while building (shown as a count) */
		gs_progress_start(&pr->p, !strcmp(phase, "read") ? "reading " : "building",
				  total);
	}
	if (done > pr->last) {
		gs_progress_add(&pr->p, done - pr->last);
		pr->last = done;
	}
}

static const char *const fmt_names[] = {
	[GS_GRAPH_FMT_TEXT] = "text", [GS_GRAPH_FMT_MTX] = "mtx", [GS_GRAPH_FMT_SG] = "sg",
	[GS_GRAPH_FMT_WSG] = "wsg",
};

/* The value of "key: " in graph/NAME/info (text), or "" if absent. */
static void info_value(const char *dir, const char *key, char *out, size_t size)
{
	char path[4200], line[512];
	size_t kl = strlen(key);
	FILE *f;

	out[0] = 0;
	snprintf(path, sizeof(path), "%s/info", dir);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':' && line[kl + 1] == ' ') {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, size, "%s", line + kl + 2);
			break;
		}
	fclose(f);
}

/* ctl lines for the settings of @o (graph/NAME/ctl, see fs/fuse/fuse_graph.c). */
static int ctl_text(const struct gs_graph_import_opts *o, char *buf, size_t size)
{
	static const struct { uint32_t flag; const char *word; } words[] = {
		{ GS_GRAPH_IMPORT_DIRECTED, "directed" }, { GS_GRAPH_IMPORT_UNDIRECTED, "undirected" },
		{ GS_GRAPH_IMPORT_WEIGHTED, "weighted" }, { GS_GRAPH_IMPORT_UNWEIGHTED, "unweighted" },
		{ GS_GRAPH_IMPORT_ID64, "id64" }, { GS_GRAPH_IMPORT_FIXED, "fixed" },
		{ GS_GRAPH_IMPORT_SPARSE_IDS, "ids=sparse" }, { GS_GRAPH_IMPORT_DENSE_IDS, "ids=dense" },
	};
	/* built at our fsync: an interrupted copy is discarded at its close */
	int n = snprintf(buf, size, "auto\ncommit=fsync\nformat=%s\n",
			 o->format ? fmt_names[o->format] : "auto");

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (o->flags & words[i].flag)
			n += snprintf(buf + n, size - n, "%s\n", words[i].word);
	if (o->flags & GS_GRAPH_IMPORT_SLACK)
		n += snprintf(buf + n, size - n, "slack=%u\n", o->slack_pct);
	if (o->chain_max)
		n += snprintf(buf + n, size - n, "chain_max=%u\n", o->chain_max);
	if (o->nv)
		n += snprintf(buf + n, size - n, "vertices=%" PRIu64 "\n", o->nv);
	return n;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

/* SIGINT, SIGTERM, SIGHUP end the copy (no SA_RESTART: a blocked read returns). */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static int copy_fd(int in, int out)
{
	char buf[1 << 16];
	ssize_t n = 0;

	while (!interrupted && (n = read(in, buf, sizeof(buf))) > 0)
		for (ssize_t done = 0, k; done < n; done += k) {
			k = write(out, buf + done, (size_t)(n - done));
			if (k < 0)
				return interrupted ? -EINTR : -errno;
		}
	return interrupted ? -EINTR : n < 0 ? -errno : 0;
}

/*
 * Through a mount: graph/NAME made (mkdir) unless replacing, the settings
 * written to its ctl, the file copied into its edges; the daemon builds
 * at close, and a failed close means nothing changed: its message is
 * info's build_error line.  A graph this command made is removed again.
 */
static int import_mounted(const char *mnt, const char *name, const char *file,
			  const struct gs_graph_import_opts *o, double t0)
{
	char dir[4096], path[4200], ctl[256], msg[512], h[32];
	bool made = false;
	int in, out, ret = 0;
	ssize_t n;

	in = open(file, O_RDONLY);
	if (in < 0)
		return gs_fail(-1, "%s: %s", file, strerror(errno));
	snprintf(dir, sizeof(dir), "%s/graph/%s", mnt, name);
	if (mkdir(dir, 0755) == 0) {
		made = true;
	} else if (errno != EEXIST) {
		ret = gs_fail(-1, "%s: %s", dir, strerror(errno));
		goto close_in;
	} else if (!(o->flags & GS_GRAPH_IMPORT_REPLACE)) {
		ret = gs_fail(-1, "import %s: graph exists: use --force to replace it", file);
		goto close_in;
	}
	snprintf(path, sizeof(path), "%s/ctl", dir);
	out = open(path, O_WRONLY);
	n = ctl_text(o, ctl, sizeof(ctl));
	if (out < 0 || write(out, ctl, (size_t)n) != n) {
		ret = gs_fail(-1, "%s: %s", path, strerror(errno));
		if (out >= 0)
			close(out);
		goto undo;
	}
	close(out);
	snprintf(path, sizeof(path), "%s/edges", dir);
	out = open(path, O_WRONLY | O_TRUNC);
	if (out < 0) {
		ret = gs_fail(-1, "%s: %s", path, strerror(errno));
		goto undo;
	}
	catch_signals();
	ret = copy_fd(in, out);
	/* fsync builds the graph (commit=fsync): the build's error is fsync's; a
	 * copy cut short is closed without it, and the daemon drops it */
	if (!ret && fsync(out))
		ret = -errno;
	close(out);
	if (ret == -EINTR) {
		ret = gs_fail(-1, "import %s: interrupted; nothing imported", file);
		goto undo;
	}
	if (ret) {
		info_value(dir, "build_error", msg, sizeof(msg));
		ret = gs_fail(-1, "import %s: %s", file, msg[0] ? msg : strerror(-ret));
		goto undo;
	}
	info_value(dir, "vertices", msg, sizeof(msg));
	printf("graph/%s: %s vertices, ", name, msg);
	info_value(dir, "edges", msg, sizeof(msg));
	printf("%s edges, ", msg);
	info_value(dir, "directed", msg, sizeof(msg));
	printf("%s, ", strcmp(msg, "yes") ? "undirected" : "directed");
	info_value(dir, "weighted", msg, sizeof(msg));
	printf("%s, ", strcmp(msg, "yes") ? "unweighted" : "weighted");
	info_value(dir, "disk_bytes", msg, sizeof(msg));
	printf("%s on disk; %.2f s (built by the daemon)\n",
	       gs_human(strtoull(msg, NULL, 10), h, sizeof(h)), now() - t0);
	goto close_in;
undo:
	if (made && rmdir(dir))
		gs_fail(0, "removing the graph/%s this import made: %s", name, strerror(errno));
close_in:
	close(in);
	return ret;
}

int cmd_import_graph(int argc, char **argv)
{
	static const struct option lo[] = {
		IMG_LONGOPTS,
		{ "directed", no_argument, NULL, 'd' },
		{ "undirected", no_argument, NULL, 'u' },
		{ "weighted", no_argument, NULL, 'w' },
		{ "unweighted", no_argument, NULL, 'W' },
		{ "format", required_argument, NULL, 'F' },
		{ "vertices", required_argument, NULL, 'n' },
		{ "slack", required_argument, NULL, 's' },
		{ "chain-max", required_argument, NULL, 'c' },
		{ "mem", required_argument, NULL, 'M' },
		{ "tmpdir", required_argument, NULL, 't' },
		{ "id64", no_argument, NULL, '8' },
		{ "fixed-lists", no_argument, NULL, 'L' },
		{ "force", no_argument, NULL, 'f' },
		{ "ids", required_argument, NULL, 'i' },
		{ 0 }
	};
	struct gs_graph_import_opts o = { 0 };
	struct img_opts io = { 0 };
	struct prog pr = { 0 };
	char err[512] = "";
	struct gs_fs *fs;
	uint64_t x;
	double t0;
	int c, ret, status = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		int r = img_opt(c, &io);

		if (r > 0)
			continue;
		if (r < 0)
			return gs_usage("import");
		switch (c) {
		case 'd': o.flags |= GS_GRAPH_IMPORT_DIRECTED; break;
		case 'u': o.flags |= GS_GRAPH_IMPORT_UNDIRECTED; break;
		case 'w': o.flags |= GS_GRAPH_IMPORT_WEIGHTED; break;
		case 'W': o.flags |= GS_GRAPH_IMPORT_UNWEIGHTED; break;
		case '8': o.flags |= GS_GRAPH_IMPORT_ID64; break;
		case 'L': o.flags |= GS_GRAPH_IMPORT_FIXED; break;
		case 'f': o.flags |= GS_GRAPH_IMPORT_REPLACE; break;
		case 't': o.tmpdir = optarg; break;
		case 'i':
			if (!strcmp(optarg, "sparse"))
				o.flags |= GS_GRAPH_IMPORT_SPARSE_IDS;
			else if (!strcmp(optarg, "dense"))
				o.flags |= GS_GRAPH_IMPORT_DENSE_IDS;
			else if (strcmp(optarg, "auto"))
				return gs_fail(2, "--ids takes sparse, dense or auto");
			break;
		case 'F':
			for (x = 1; x < 5 && strcmp(optarg, fmt_names[x]); x++)
				;
			if (x == 5)
				return gs_fail(2, "unknown format '%s' (text, mtx, sg, wsg)",
					       optarg);
			o.format = (uint32_t)x;
			break;
		case 'n':
			if (parse_u64(optarg, &o.nv))
				return gs_usage("import");
			break;
		case 's':
			if (parse_u64(optarg, &x) || x > 90)
				return gs_fail(2, "--slack takes a percentage 0..90");
			o.slack_pct = (uint32_t)x;
			o.flags |= GS_GRAPH_IMPORT_SLACK;
			break;
		case 'c':
			if (parse_u64(optarg, &x) || !x || x > 1u << 20)
				return gs_usage("import");
			o.chain_max = (uint32_t)x;
			break;
		case 'M':
			if (parse_size(optarg, &x) || x < (1u << 20))
				return gs_fail(2, "--mem takes a size of at least 1M");
			o.mem_bytes = x;
			break;
		default:
			return gs_usage("import");
		}
	}
	if (argc - optind != 2)
		return gs_usage("import");
	if ((o.flags & GS_GRAPH_IMPORT_DIRECTED) && (o.flags & GS_GRAPH_IMPORT_UNDIRECTED))
		return gs_fail(2, "--directed or --undirected, not both");
	if ((o.flags & GS_GRAPH_IMPORT_WEIGHTED) && (o.flags & GS_GRAPH_IMPORT_UNWEIGHTED))
		return gs_fail(2, "--weighted or --unweighted, not both");
	if (img_resolve(&io))
		return 1;
	const char *name = argv[optind], *file = argv[optind + 1];

	if (!o.format) {
		const char *dot = strrchr(file, '.');

		/* by suffix; text or Matrix Market are told apart by content */
		for (x = GS_GRAPH_FMT_MTX; dot && x <= GS_GRAPH_FMT_WSG; x++)
			if (!strcasecmp(dot + 1, fmt_names[x]))
				o.format = (uint32_t)x;
	}
	t0 = now();
	if (io.mnt) {
		if (o.mem_bytes || o.tmpdir)
			return gs_fail(2, "--mem and --tmpdir are for --image imports (through a "
				       "mount the daemon sorts within its own budget)");
		return import_mounted(io.mnt, name, file, &o, t0) ? 1 : 0;
	}
	if (img_mount(&io, &fs))
		return 1;
	o.progress = on_progress;
	o.progress_arg = &pr;
	o.err = err;
	o.errlen = sizeof(err);
	ret = gs_graph_import(fs, name, file, &o);
	if (pr.phase)
		gs_progress_end(&pr.p);
	if (ret) {
		gs_fail(0, "import %s: %s%s%s", file, err[0] ? err : strerror(-ret),
			ret == -EEXIST ? " (graph exists: use --force to replace it)" : "",
			err[0] ? "" : "");
	} else {
		struct gs_graph *g;
		struct gs_graph_info gi;
		char h[32];

		ret = gs_graph_open(fs, name, GS_GRAPH_RDONLY, &g);
		if (!ret) {
			gs_graph_info(g, &gi);
			printf("graph/%s: %" PRIu64 " vertices, %" PRIu64 " edges, %s, %s, "
			       "%" PRIu64 " pages, %s on disk; %.2f s, peak memory %s\n", name,
			       gi.nv, gi.ne, gi.directed ? "directed" : "undirected",
			       gi.weighted ? "weighted" : "unweighted", gi.pages[0] + gi.pages[1],
			       gs_human(gi.disk_bytes, h, sizeof(h)), now() - t0,
			       gs_human(peak_rss(), err, sizeof(err)));
			gs_graph_close(g);
			status = 0;
		}
	}
	if (gs_fs_unmount(fs) && !status)
		status = gs_fail(1, "unmount failed");
	return status;
}

/* ---- gstore graph SUBCOMMAND NAME ... ---- */

struct gctx {
	struct img_opts io;
	struct gs_fs *fs;
	struct gs_graph *g;
	struct gs_graph_app_opts ao;
	const char *name, *out;
	int csr, in;
	uint64_t source, iters, walks, len, seed, top;
	double damping;
	uint32_t fanouts[GS_GRAPH_SAMPLE_MAX_HOPS], nhops;
};

static int open_graph(struct gctx *c, int rdonly)
{
	char prefix[GS_NAME_MAX + 1];
	int ret;

	if (c->io.mnt)
		return gs_fail(-1, "graph %s needs the image unmounted (--image IMG); through "
			       "the mount use MNT/graph/%s/", c->name, c->name);
	if (img_mount(&c->io, &c->fs))
		return -1;
	if (c->csr) {
		snprintf(prefix, sizeof(prefix), "%s.csr", c->name);
		ret = gs_graph_open_csr(c->fs, prefix, &c->g);
	} else {
		ret = gs_graph_open(c->fs, c->name, rdonly ? GS_GRAPH_RDONLY : 0, &c->g);
	}
	if (ret) {
		gs_fail(0, "%s graph/%s: %s%s", c->csr ? "CSR of" : "open", c->name, strerror(-ret),
			c->csr && ret == -ENOENT ? " (run gstore graph export-csr first)" : "");
		gs_fs_unmount(c->fs);
		return -1;
	}
	if (c->ao.threads)
		gs_graph_set_workers(c->g, c->ao.threads);
	return 0;
}

static int close_graph(struct gctx *c, int status)
{
	int ret = gs_graph_close(c->g);

	if (ret && !status)
		status = gs_fail(1, "closing graph/%s: %s", c->name, strerror(-ret));
	if (gs_fs_unmount(c->fs) && !status)
		status = gs_fail(1, "unmount failed");
	return status;
}

static FILE *out_file(struct gctx *c)
{
	FILE *f;

	if (!c->out)
		return NULL;
	f = strcmp(c->out, "-") ? fopen(c->out, "w") : stdout;
	if (!f)
		gs_fail(0, "%s: %s", c->out, strerror(errno));
	return f;
}

static void out_close(struct gctx *c, FILE *f)
{
	if (f && f != stdout)
		fclose(f);
}

static int g_info(struct gctx *c, int argc, char **argv)
{
	char buf[4096];

	if (open_graph(c, 1))
		return 1;
	gs_graph_info_text(c->g, buf, sizeof(buf));
	fputs(buf, stdout);
	return close_graph(c, 0);
}

static int g_neighbors(struct gctx *c, int argc, char **argv)
{
	uint64_t v, *ids;
	float *w;
	int64_t n;
	int status = 0;

	if (argc != 1 || parse_u64(argv[0], &v))
		return gs_usage("graph");
	if (open_graph(c, 1))
		return 1;
	n = gs_graph_degree(c->g, v, c->in ? GS_GRAPH_IN : GS_GRAPH_OUT);
	if (n < 0) {
		status = gs_fail(1, "vertex %" PRIu64 ": %s", v, strerror((int)-n));
		return close_graph(c, status);
	}
	ids = malloc(((size_t)n + 1) * sizeof(*ids));
	w = malloc(((size_t)n + 1) * sizeof(*w));
	n = gs_graph_neighbors(c->g, v, c->in ? GS_GRAPH_IN : GS_GRAPH_OUT, ids, w, (size_t)n);
	struct gs_graph_info gi;

	gs_graph_info(c->g, &gi);
	for (int64_t i = 0; i < n; i++) {
		if (gi.weighted)
			printf("%" PRIu64 " %.9g\n", ids[i], (double)w[i]);
		else
			printf("%" PRIu64 "\n", ids[i]);
	}
	free(ids);
	free(w);
	return close_graph(c, status);
}

/*
 * Through the mount: @len bytes of @text written into MNT/graph/NAME/@file
 * (updates, or ctl) and made durable (fsync), as a shell's echo would.  The
 * daemon applies them on the handle that serves the mount, so a GPU that
 * attached to the graph sees them after its sync point
 * (gs_cuda_graph_sync(3)).
 */
static int mounted_write(struct gctx *c, const char *file, const char *text, size_t len)
{
	char path[PATH_MAX];
	size_t done = 0;
	int fd, err = 0;

	if (snprintf(path, sizeof(path), "%s/graph/%s/%s", c->io.mnt, c->name, file) >=
	    (int)sizeof(path))
		return gs_fail(1, "graph/%s: path too long", c->name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return gs_fail(1, "%s: %s", path, strerror(errno));
	while (done < len && !err) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno != EINTR)
			err = errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (!err && fsync(fd) < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	if (err)
		return gs_fail(1, "%s: %s%s", path, strerror(err),
			       done ? " (the writes before it were applied)" : "; nothing applied");
	return 0;
}

static int g_update(struct gctx *c, int argc, char **argv)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	uint64_t line = 0;
	int fd = 0, ret, status = 0;
	ssize_t n;

	if (argc > 1)
		return gs_usage("graph");
	if (argc == 1 && strcmp(argv[0], "-")) {
		fd = open(argv[0], O_RDONLY);
		if (fd < 0)
			return gs_fail(1, "%s: %s", argv[0], strerror(errno));
	}
	while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap)
			buf = realloc(buf, cap *= 2);
	}
	if (fd)
		close(fd);
	if (!buf)
		return gs_fail(1, "out of memory");
	if (c->io.mnt) {
		status = mounted_write(c, "updates", buf, len);
		if (!status)
			printf("%zu bytes of updates applied through %s/graph/%s/updates\n", len,
			       c->io.mnt, c->name);
		free(buf);
		return status;
	}
	if (open_graph(c, 0)) {
		free(buf);
		return 1;
	}
	n = gs_graph_update(c->g, buf, len, &line);
	if (n < 0)
		status = gs_fail(1, "line %" PRIu64 ": %s; nothing applied", line,
				 strerror((int)-n));
	else if ((ret = gs_graph_sync(c->g)))
		status = gs_fail(1, "sync: %s", strerror(-ret));
	else
		printf("%zd updates applied\n", n);
	free(buf);
	return close_graph(c, status);
}

static int g_edges(struct gctx *c, int argc, char **argv)
{
	struct gs_graph_cursor cur = { 0 };
	char *buf = malloc(1 << 20);
	ssize_t n = 0;
	FILE *f;

	if (argc || !buf) {
		free(buf);
		return argc ? gs_usage("graph") : 1;
	}
	if (open_graph(c, 1)) {
		free(buf);
		return 1;
	}
	f = c->out ? out_file(c) : stdout;
	while (f && (n = gs_graph_edges_text(c->g, &cur, buf, 1 << 20)) > 0)
		fwrite(buf, 1, (size_t)n, f);
	if (c->out)
		out_close(c, f);
	free(buf);
	return close_graph(c, n < 0 ? gs_fail(1, "edges: %s", strerror((int)-n)) : !f);
}

static int g_merge(struct gctx *c, int argc, char **argv)
{
	double t0 = now();
	int ret, status = 0;

	if (c->io.mnt) {
		status = mounted_write(c, "ctl", "merge\n", 6);
		if (!status)
			printf("merged in %.3f s (through %s/graph/%s/ctl)\n", now() - t0, c->io.mnt,
			       c->name);
		return status;
	}
	if (open_graph(c, 0))
		return 1;
	ret = gs_graph_merge(c->g);
	if (ret)
		status = gs_fail(1, "merge: %s", strerror(-ret));
	else
		printf("merged in %.3f s\n", now() - t0);
	return close_graph(c, status);
}

static int g_export_csr(struct gctx *c, int argc, char **argv)
{
	char prefix[GS_NAME_MAX + 1];
	double t0 = now();
	int ret, status = 0;

	if (argc || c->csr)
		return gs_usage("graph");
	if (open_graph(c, 0))
		return 1;
	snprintf(prefix, sizeof(prefix), "%s.csr", c->name);
	ret = gs_graph_export_csr(c->g, prefix);
	if (ret)
		status = gs_fail(1, "export-csr: %s", strerror(-ret));
	else
		printf("arrays/%s.{rowptr,colidx%s}: %.2f s\n", prefix, "...", now() - t0);
	return close_graph(c, status);
}

static uint64_t nvertices(struct gs_graph *g)
{
	struct gs_graph_info gi;

	gs_graph_info(g, &gi);
	return gi.nv;
}

/* The id of every vertex index (results are arrays by index, output is by id). */
static uint64_t *vertex_ids(struct gs_graph *g, uint64_t nv)
{
	uint64_t *ids = malloc((nv ? nv : 1) * sizeof(*ids));

	if (ids && gs_graph_vertex_ids(g, 0, nv, ids)) {
		free(ids);
		ids = NULL;
	}
	if (!ids)
		gs_fail(0, "vertex ids: out of memory");
	return ids;
}

static int g_bfs(struct gctx *c, int argc, char **argv)
{
	uint64_t nv, reached = 0, *ids;
	int64_t *depth, maxd = 0;
	double t0;
	FILE *f;
	int ret;

	if (argc || open_graph(c, 1))
		return argc ? gs_usage("graph") : 1;
	nv = nvertices(c->g);
	depth = malloc((nv ? nv : 1) * sizeof(*depth));
	t0 = now();
	ret = depth ? gs_graph_bfs(c->g, c->source, depth, &c->ao) : -ENOMEM;
	ids = ret ? NULL : vertex_ids(c->g, nv);
	if (ret || !ids) {
		free(depth);
		return close_graph(c, ret ? gs_fail(1, "bfs: %s", strerror(-ret)) : 1);
	}
	for (uint64_t v = 0; v < nv; v++)
		if (depth[v] >= 0) {
			reached++;
			maxd = depth[v] > maxd ? depth[v] : maxd;
		}
	printf("bfs from %" PRIu64 ": %" PRIu64 " reached, depth %" PRId64 ", %.3f s\n",
	       c->source, reached, maxd, now() - t0);
	f = out_file(c);
	for (uint64_t v = 0; f && v < nv; v++)
		fprintf(f, "%" PRIu64 " %" PRId64 "\n", ids[v], depth[v]);
	out_close(c, f);
	free(depth);
	free(ids);
	return close_graph(c, 0);
}

static int g_cc(struct gctx *c, int argc, char **argv)
{
	uint64_t nv, *label, *ids;
	int64_t n;
	double t0;
	FILE *f;

	if (argc || open_graph(c, 1))
		return argc ? gs_usage("graph") : 1;
	nv = nvertices(c->g);
	label = malloc((nv ? nv : 1) * sizeof(*label));
	t0 = now();
	n = label ? gs_graph_cc(c->g, label, &c->ao) : -ENOMEM;
	ids = n < 0 ? NULL : vertex_ids(c->g, nv);
	if (n < 0 || !ids) {
		free(label);
		return close_graph(c, n < 0 ? gs_fail(1, "cc: %s", strerror((int)-n)) : 1);
	}
	printf("cc: %" PRId64 " components, %.3f s\n", n, now() - t0);
	f = out_file(c);
	/* labels are indices too: the component's smallest vertex */
	for (uint64_t v = 0; f && v < nv; v++)
		fprintf(f, "%" PRIu64 " %" PRIu64 "\n", ids[v], ids[label[v]]);
	out_close(c, f);
	free(label);
	free(ids);
	return close_graph(c, 0);
}

static int g_pagerank(struct gctx *c, int argc, char **argv)
{
	uint64_t nv, *ids;
	double *rank, t0, sum = 0;
	FILE *f;
	int ret;

	if (argc || open_graph(c, 1))
		return argc ? gs_usage("graph") : 1;
	nv = nvertices(c->g);
	rank = malloc((nv ? nv : 1) * sizeof(*rank));
	t0 = now();
	ret = rank ? gs_graph_pagerank(c->g, c->damping, (unsigned)c->iters, rank, &c->ao) :
		     -ENOMEM;
	ids = ret ? NULL : vertex_ids(c->g, nv);
	if (ret || !ids) {
		free(rank);
		return close_graph(c, ret ? gs_fail(1, "pagerank: %s", strerror(-ret)) : 1);
	}
	for (uint64_t v = 0; v < nv; v++)
		sum += rank[v];
	printf("pagerank: %" PRIu64 " iterations, sum %.6f, %.3f s\n", c->iters, sum,
	       now() - t0);
	for (uint64_t k = 0; k < c->top && k < nv; k++) {
		uint64_t best = 0;

		for (uint64_t v = 1; v < nv; v++)
			if (rank[v] > rank[best])
				best = v;
		printf("  %" PRIu64 " %.9g\n", ids[best], rank[best]);
		rank[best] = -1 - rank[best];	/* taken; restored below */
	}
	for (uint64_t v = 0; v < nv; v++)
		if (rank[v] < 0)
			rank[v] = -1 - rank[v];
	f = out_file(c);
	for (uint64_t v = 0; f && v < nv; v++)
		fprintf(f, "%" PRIu64 " %.12g\n", ids[v], rank[v]);
	out_close(c, f);
	free(rank);
	free(ids);
	return close_graph(c, 0);
}

static int g_randomwalk(struct gctx *c, int argc, char **argv)
{
	uint64_t nv, *starts, *paths, steps = 0;
	unsigned len = (unsigned)c->len;
	double t0;
	FILE *f;
	int ret;

	if (argc || open_graph(c, 1))
		return argc ? gs_usage("graph") : 1;
	nv = nvertices(c->g);
	starts = malloc(c->walks * sizeof(*starts));
	paths = malloc(c->walks * (len + 1) * sizeof(*paths));
	if (!starts || !paths || !nv) {
		free(starts);
		free(paths);
		return close_graph(c, gs_fail(1, "randomwalk: %s", nv ? "out of memory" :
					      "no vertices"));
	}
	/* spread over the vertex indices, walked from their ids */
	for (uint64_t i = 0; i < c->walks; i++)
		if (gs_graph_vertex_ids(c->g, (i * 0x9e3779b97f4a7c15ULL ^ c->seed) % nv, 1,
					&starts[i]))
			starts[i] = GS_GRAPH_NO_VERTEX;
	t0 = now();
	ret = gs_graph_randomwalk(c->g, starts, c->walks, len, c->seed, paths, &c->ao);
	if (!ret) {
		for (uint64_t i = 0; i < c->walks * (len + 1); i++)
			steps += i % (len + 1) && paths[i] != GS_GRAPH_NO_VERTEX;
		printf("randomwalk: %" PRIu64 " walks, %" PRIu64 " steps, %.3f s\n", c->walks,
		       steps, now() - t0);
		f = out_file(c);
		for (uint64_t i = 0; f && i < c->walks; i++) {
			for (unsigned s = 0; s <= len && paths[i * (len + 1) + s] !=
			     GS_GRAPH_NO_VERTEX; s++)
				fprintf(f, s ? " %" PRIu64 : "%" PRIu64, paths[i * (len + 1) + s]);
			fputc('\n', f);
		}
		out_close(c, f);
	}
	free(starts);
	free(paths);
	return close_graph(c, ret ? gs_fail(1, "randomwalk: %s", strerror(-ret)) : 0);
}

static int g_mis(struct gctx *c, int argc, char **argv)
{
	uint64_t nv, *ids;
	uint8_t *in;
	int64_t n;
	double t0;
	FILE *f;

	if (argc || open_graph(c, 1))
		return argc ? gs_usage("graph") : 1;
	nv = nvertices(c->g);
	in = malloc(nv ? nv : 1);
	t0 = now();
	n = in ? gs_graph_mis(c->g, c->seed, in, &c->ao) : -ENOMEM;
	ids = n < 0 ? NULL : vertex_ids(c->g, nv);
	if (n < 0 || !ids) {
		free(in);
		return close_graph(c, n < 0 ? gs_fail(1, "mis: %s", strerror((int)-n)) : 1);
	}
	printf("mis: %" PRId64 " vertices, %.3f s\n", n, now() - t0);
	f = out_file(c);
	for (uint64_t v = 0; f && v < nv; v++)
		if (in[v])
			fprintf(f, "%" PRIu64 "\n", ids[v]);
	out_close(c, f);
	free(in);
	free(ids);
	return close_graph(c, 0);
}

/* gstore graph sample NAME V...: gs_graph_sample from the seed vertices (ids) */
static int g_sample(struct gctx *c, int argc, char **argv)
{
	struct gs_graph_sample s;
	uint64_t *seeds, *ids = NULL;
	double t0;
	FILE *f;
	int ret = 0;

	if (!argc || open_graph(c, 1))
		return !argc ? gs_usage("graph") : 1;
	seeds = malloc((size_t)argc * sizeof(*seeds));
	for (int i = 0; seeds && i < argc && !ret; i++) {
		uint64_t id;

		if (parse_u64(argv[i], &id))
			ret = -EINVAL;
		else
			ret = gs_graph_vertex_index(c->g, id, &seeds[i]);
	}
	if (!seeds || ret) {
		free(seeds);
		return close_graph(c, gs_fail(1, "sample: %s", seeds ? "a seed is not a vertex" :
					      "out of memory"));
	}
	t0 = now();
	ret = gs_graph_sample(c->g, seeds, (uint32_t)argc, c->fanouts, c->nhops, c->seed, &s);
	free(seeds);
	if (ret)
		return close_graph(c, gs_fail(1, "sample: %s", strerror(-ret)));
	printf("sample: %" PRIu64 " nodes, %" PRIu64 " edges, %.3f s\n", s.nnodes, s.nedges,
	       now() - t0);
	for (uint32_t h = 0; h < s.nhops; h++)
		printf("  hop %u: %" PRIu64 " edges, %" PRIu64 " new nodes\n", h,
		       s.hop_edges[h + 1] - s.hop_edges[h], s.hop_nodes[h + 2] - s.hop_nodes[h + 1]);
	/* "hop src dst" lines, as ids */
	ids = vertex_ids(c->g, nvertices(c->g));
	f = ids ? out_file(c) : NULL;
	for (uint32_t h = 0; f && h < s.nhops; h++)
		for (uint64_t e = s.hop_edges[h]; e < s.hop_edges[h + 1]; e++)
			fprintf(f, "%u %" PRIu64 " %" PRIu64 "\n", h, ids[s.src[e]], ids[s.dst[e]]);
	out_close(c, f);
	free(ids);
	gs_graph_sample_free(&s);
	return close_graph(c, ids ? 0 : 1);
}

static const struct {
	const char *name;
	int (*run)(struct gctx *c, int argc, char **argv);
} subs[] = {
	{ "info", g_info }, { "neighbors", g_neighbors }, { "edges", g_edges },
	{ "update", g_update },
	{ "merge", g_merge }, { "export-csr", g_export_csr }, { "bfs", g_bfs }, { "cc", g_cc },
	{ "pagerank", g_pagerank }, { "randomwalk", g_randomwalk }, { "mis", g_mis },
	{ "sample", g_sample },
};

int cmd_graph(int argc, char **argv)
{
	static const struct option lo[] = {
		IMG_LONGOPTS,
		{ "threads", required_argument, NULL, 'T' },
		{ "batch", required_argument, NULL, 'B' },
		{ "csr", no_argument, NULL, 'C' },
		{ "in", no_argument, NULL, 'I' },
		{ "source", required_argument, NULL, 'S' },
		{ "iters", required_argument, NULL, 'i' },
		{ "damping", required_argument, NULL, 'D' },
		{ "walks", required_argument, NULL, 'k' },
		{ "length", required_argument, NULL, 'L' },
		{ "seed", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ "fanouts", required_argument, NULL, 'F' },
		{ 0 }
	};
	struct gctx c = { .iters = 20, .damping = 0.85, .walks = 1000, .len = 10, .seed = 1,
			  .top = 5, .fanouts = { 25, 10 }, .nhops = 2 };
	uint64_t x;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		int r = img_opt(ch, &c.io);
		char *end;

		if (r > 0)
			continue;
		if (r < 0)
			return gs_usage("graph");
		if (ch != 'C' && ch != 'I' && ch != 'o' && ch != 'D' && ch != 'F' &&
		    parse_u64(optarg, &x))
			return gs_usage("graph");
		switch (ch) {
		case 'T': c.ao.threads = (unsigned)x; break;
		case 'B': c.ao.batch = (unsigned)x; break;
		case 'C': c.csr = 1; break;
		case 'I': c.in = 1; break;
		case 'S': c.source = x; break;
		case 'i': c.iters = x; break;
		case 'k': c.walks = x ? x : 1; break;
		case 'L': c.len = x; break;
		case 's': c.seed = x; break;
		case 't': c.top = x; break;
		case 'o': c.out = optarg; break;
		case 'F':	/* 25,10 */
			c.nhops = 0;
			for (char *p = optarg; *p && c.nhops < GS_GRAPH_SAMPLE_MAX_HOPS; ) {
				unsigned long v = strtoul(p, &end, 10);

				if (end == p || !v || v > GS_GRAPH_SAMPLE_MAX_FANOUT ||
				    (*end && *end != ','))
					return gs_fail(2, "--fanouts takes numbers 1..%u, like 25,10",
						       GS_GRAPH_SAMPLE_MAX_FANOUT);
				c.fanouts[c.nhops++] = (uint32_t)v;
				p = *end ? end + 1 : end;
			}
			if (!c.nhops)
				return gs_fail(2, "--fanouts takes numbers like 25,10");
			break;
		case 'D':
			c.damping = strtod(optarg, &end);
			if (*end || !(c.damping > 0 && c.damping < 1))
				return gs_fail(2, "--damping takes a number in (0, 1)");
			break;
		default:
			return gs_usage("graph");
		}
	}
	if (argc - optind < 2)
		return gs_usage("graph");
	if (img_resolve(&c.io))
		return 1;
	c.name = argv[optind + 1];
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(subs[i].name, argv[optind]))
			return subs[i].run(&c, argc - optind - 2, argv + optind + 2);
	gs_fail(0, "unknown graph command '%s'", argv[optind]);
	return gs_usage("graph");
}
