// SPDX-License-Identifier: MIT
/*
 * graph/NAME/ under the mount: the virtual files of a graph object.
 *
 *   info            text: gs_graph_info_text()
 *   edges           read: the canonical edge list; write + close (or fsync):
 *                   rebuild the graph from an edge list; after ctl
 *                   "commit=fsync" the next writer's fsync builds and its
 *                   close without one (interrupted) discards what it wrote
 *   updates         append "+ u v [w]" ... lines; a write fails as a whole
 *                   with the line's errno; fsync makes them durable
 *   ctl             "merge", "sync"; "directed", "undirected", "weighted",
 *                   "unweighted", "format=text|mtx|sg|wsg|auto", "slack=N",
 *                   "chain_max=N", "vertices=N", "ids=sparse|dense|auto",
 *                   "id64", "fixed", "commit=fsync|close" set how the
 *                   next edges build reads (gs_graph_import_opts); "auto"
 *                   clears them
 *   v<ID>/          looked up, never listed (ids, sparse or dense); ENOENT for
 *                   an id that is no vertex:
 *     neighbors     ids, little-endian at the graph's id width
 *     neighbors.txt one id per line
 *     weights       f32 little-endian, in neighbour order
 *     degree        text
 *     in_neighbors  ids of the in-list (undirected: the same list)
 *
 * One gs_graph handle per graph object, shared by every open file and kept
 * until the mount goes; an edges rebuild takes it exclusively, closes it,
 * builds in place and lets the next use reopen it.  Generated files are
 * filled at open (direct_io), so each open sees the current graph.
 *
 * A failed build fails close(2) of edges with the library's errno and
 * changes nothing; its message (the parser's "line N: ...") is the
 * "build_error:" line of info until the next build succeeds, which is how
 * `gstore import graph --mount` reports it.  Only gstore_graph.h is used.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse_internal.h"
#include "gs_log.h"
#include "gstore_graph.h"

enum kind {
	K_INFO = 1, K_EDGES, K_UPDATES, K_CTL, K_VDIR,
	K_NEIGHBORS, K_NEIGHBORS_TXT, K_WEIGHTS, K_DEGREE, K_IN_NEIGHBORS,
};

struct vfile_desc {
	const char *name;
	enum kind kind;
	uint32_t mode;
};

static const struct vfile_desc top_files[] = {
	{ "info", K_INFO, S_IFREG | 0444 },
	{ "edges", K_EDGES, S_IFREG | 0644 },
	{ "updates", K_UPDATES, S_IFREG | 0644 },
	{ "ctl", K_CTL, S_IFREG | 0644 },
};

static const struct vfile_desc vertex_files[] = {
	{ "neighbors", K_NEIGHBORS, S_IFREG | 0444 },
	{ "neighbors.txt", K_NEIGHBORS_TXT, S_IFREG | 0444 },
	{ "weights", K_WEIGHTS, S_IFREG | 0444 },
	{ "degree", K_DEGREE, S_IFREG | 0444 },
	{ "in_neighbors", K_IN_NEIGHBORS, S_IFREG | 0444 },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- one handle per graph object ---- */

/* How the next edges build reads its input (ctl settings). */
struct build_opts {
	uint32_t flags;		/* GS_GRAPH_IMPORT_* */
	uint32_t format;	/* enum gs_graph_format */
	uint32_t slack_pct, chain_max;
	uint64_t nv;
	bool on_fsync;		/* "commit=fsync": the next open of edges for writing
				 * builds at fsync only, its close discards */
};

struct gh {
	struct gh *next;
	struct gs_fs *fs;
	uint64_t ino;
	uint64_t gen;		/* the object's generation: a reused ino is another graph */
	pthread_rwlock_t rw;	/* shared by every use, exclusive for a rebuild */
	struct gs_graph *g;	/* NULL: an empty graph object (no edges yet) */
	int err;		/* opening failed with this (other than empty) */
	bool loaded;
	struct build_opts bo;	/* for the next edges build */
	char build_err[256];	/* why the last build failed ("" if it did not) */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gh *reg;

static struct gh *gh_find(struct gs_fs *fs, uint64_t ino)
{
	struct gh *h;

	pthread_mutex_lock(&reg_lock);
	for (h = reg; h && (h->fs != fs || h->ino != ino); h = h->next)
		;
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (h) {
			h->fs = fs;
			h->ino = ino;
			pthread_rwlock_init(&h->rw, NULL);
			h->next = reg;
			reg = h;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return h;
}

/*
 * An empty or unopenable handle holds no reference on its object, so the
 * object may have been removed and its ino reused by another graph since:
 * the generation tells.
 */
static bool gh_stale(struct gh *h)
{
	struct gs_stat st;

	return !h->g && h->loaded && (gs_fs_getattr(h->fs, h->ino, &st) || st.gen != h->gen);
}

/* Open on first use (under the exclusive lock, so once). */
static void gh_load(struct gh *h)
{
	struct gs_stat st;
	int ret;

	if (h->loaded && !gh_stale(h))
		return;
	if (h->loaded) {
		/* another object under the same ino: nothing of the old one applies */
		h->err = 0;
		h->build_err[0] = 0;
		memset(&h->bo, 0, sizeof(h->bo));
	}
	h->gen = gs_fs_getattr(h->fs, h->ino, &st) ? 0 : st.gen;
	ret = gs_graph_open_ino(h->fs, h->ino, 0, &h->g);
	if (ret == -EROFS)
		ret = gs_graph_open_ino(h->fs, h->ino, GS_GRAPH_RDONLY, &h->g);
	if (ret) {
		h->g = NULL;
		h->err = ret == -ENODATA ? 0 : ret;	/* no root yet: empty */
	}
	h->loaded = true;
}

/* The handle of graph object @ino, held shared until gh_put(). */
static int gh_get(struct gs_fuse *gf, uint64_t ino, struct gh **hp)
{
	struct gh *h = gh_find(gs_fuse_fs(gf), ino);

	if (!h)
		return -ENOMEM;
	pthread_rwlock_rdlock(&h->rw);
	if (!h->loaded || gh_stale(h)) {
		pthread_rwlock_unlock(&h->rw);
		pthread_rwlock_wrlock(&h->rw);
		gh_load(h);
		pthread_rwlock_unlock(&h->rw);
		pthread_rwlock_rdlock(&h->rw);
	}
	if (h->err) {
		int err = h->err;

		pthread_rwlock_unlock(&h->rw);
		return err;
	}
	*hp = h;
	return 0;
}

static void gh_put(struct gh *h)
{
	pthread_rwlock_unlock(&h->rw);
}

/* ---- lookup, readdir ---- */

/* "v<decimal>": 1 with the id, 0 if not a vertex name, -errno if malformed. */
static int parse_vname(const char *name, uint64_t *id)
{
	const char *p = name + 1;
	uint64_t x = 0;

	if (name[0] != 'v' || *p < '0' || *p > '9')
		return 0;
	if (p[0] == '0' && p[1])
		return -EINVAL;		/* one spelling per vertex */
	for (; *p; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (d > 9)
			return -EINVAL;
		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*id = x;
	return 1;
}

static int vertex_live(struct gh *h, uint64_t v)
{
	int64_t d;

	if (!h->g)
		return -ENOENT;
	d = gs_graph_degree(h->g, v, GS_GRAPH_OUT);
	return d < 0 ? (int)d : 0;
}

static int graph_lookup(struct gs_fuse *gf, const struct gs_vdir *dir, const char *name,
			struct gs_vnode *vn)
{
	const struct vfile_desc *tab = dir->vn ? vertex_files : top_files;
	size_t n = dir->vn ? NELEM(vertex_files) : NELEM(top_files);
	struct gh *h;
	uint64_t v;
	int ret;

	if (dir->vn && dir->vn->kind != K_VDIR)
		return -ENOTDIR;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(tab[i].name, name)) {
			vn->kind = tab[i].kind;
			vn->mode = tab[i].mode;
			vn->arg[0] = dir->vn ? dir->vn->arg[0] : 0;
			return 0;
		}
	if (dir->vn)
		return -ENOENT;
	ret = parse_vname(name, &v);
	if (ret <= 0)
		return ret ? ret : -ENOENT;
	ret = gh_get(gf, dir->obj, &h);
	if (ret)
		return ret;
	ret = vertex_live(h, v);
	gh_put(h);
	if (ret)
		return ret == -EINVAL ? -ENOENT : ret;
	vn->kind = K_VDIR;
	vn->mode = S_IFDIR | 0555;
	vn->arg[0] = v;
	return 0;
}

static int graph_readdir(struct gs_fuse *gf, const struct gs_vdir *dir, uint64_t off,
			 gs_vfill fill, void *arg)
{
	const struct vfile_desc *tab = dir->vn ? vertex_files : top_files;
	size_t n = dir->vn ? NELEM(vertex_files) : NELEM(top_files);

	/* v<ID>/ directories are found by lookup only */
	for (size_t i = off; i < n; i++)
		if (fill(arg, tab[i].name, tab[i].mode, i + 1))
			break;
	return 0;
}

/* ---- generated contents ---- */

static int gen_info(void *ctx, char *buf, size_t size)
{
	struct gh *h = ctx;
	int n;

	if (!h->g)
		n = snprintf(buf, size, "vertices: 0\nedges: 0\n"
			     "state: empty (write an edge list to edges)\n");
	else
		n = gs_graph_info_text(h->g, buf, size);
	if (n >= 0 && h->build_err[0])
		n += snprintf(buf + n, (size_t)n < size ? size - n : 0, "build_error: %s\n",
			      h->build_err);
	return n;
}

struct vctx {
	struct gh *h;
	uint64_t v;
	unsigned dir;
};

static int gen_degree(void *ctx, char *buf, size_t size)
{
	struct vctx *c = ctx;
	int64_t d = gs_graph_degree(c->h->g, c->v, GS_GRAPH_OUT);

	return d < 0 ? (int)d : snprintf(buf, size, "%" PRId64 "\n", d);
}

/* A vertex's list into f->buf: binary ids, text ids, or weights. */
static int fill_list(struct gs_vfile *f, struct gh *h, uint64_t v, unsigned dir, enum kind k)
{
	struct gs_graph_info gi;
	uint64_t *ids = NULL;
	float *w = NULL;
	int64_t n, m;
	size_t cap = 0, len = 0;
	char *out;
	int ret = 0;

	gs_graph_info(h->g, &gi);
	n = gs_graph_degree(h->g, v, dir);
	for (;;) {
		if (n < 0)
			return (int)n;
		ids = malloc(((size_t)n + 1) * sizeof(*ids));
		w = malloc(((size_t)n + 1) * sizeof(*w));
		if (!ids || !w) {
			ret = -ENOMEM;
			goto free_lists;
		}
		m = gs_graph_neighbors(h->g, v, dir, ids, w, (size_t)n);
		if (m <= n)
			break;
		free(ids);	/* grew between the calls: again */
		free(w);
		n = m;
	}
	n = m;
	if (n < 0) {
		ret = (int)n;
		goto free_lists;
	}
	cap = k == K_NEIGHBORS_TXT ? (size_t)n * 21 + 1 : (size_t)n * 8 + 1;
	out = malloc(cap);
	if (!out) {
		ret = -ENOMEM;
		goto free_lists;
	}
	for (int64_t i = 0; i < n; i++) {
		if (k == K_NEIGHBORS_TXT) {
			len += (size_t)snprintf(out + len, cap - len, "%" PRIu64 "\n", ids[i]);
		} else if (k == K_WEIGHTS) {
			uint32_t u;

			memcpy(&u, &w[i], 4);
			u = htole32(u);
			memcpy(out + len, &u, 4);
			len += 4;
		} else if (gi.id_bytes == 4) {
			uint32_t u = htole32((uint32_t)ids[i]);

			memcpy(out + len, &u, 4);
			len += 4;
		} else {
			uint64_t u = htole64(ids[i]);

			memcpy(out + len, &u, 8);
			len += 8;
		}
	}
	f->buf = out;
	f->len = len;
free_lists:
	free(ids);
	free(w);
	return ret;
}

/* ---- per-open state of the writable files ---- */

struct wstate {
	char *pend;		/* updates: the unfinished last line */
	size_t npend;
	int fd;			/* edges: the incoming list, a temp file */
	bool written;
	bool on_fsync;		/* edges: built by fsync only (ctl commit=fsync at open) */
	struct gs_graph_cursor cur;	/* edges reads: where the text resumes */
	char *win;		/* the text [win_off, win_off + win_len) */
	uint64_t win_off;
	size_t win_len;
};

static int tmp_file(void)
{
	const char *d = getenv("TMPDIR");
	int fd = open(d && *d ? d : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	return fd < 0 ? -errno : fd;
}

static int graph_open(struct gs_fuse *gf, struct gs_vfile *f)
{
	struct gs_vnode *vn = f->vn;
	int wr = (f->flags & O_ACCMODE) != O_RDONLY;
	struct vctx c;
	struct wstate *ws;
	struct gh *h;
	int ret;

	ret = gh_get(gf, vn->obj, &h);
	if (ret)
		return ret;
	c.h = h;
	c.v = vn->arg[0];
	switch (vn->kind) {
	case K_INFO:
		ret = gs_vfile_text(f, gen_info, h);
		break;
	case K_DEGREE:
		ret = h->g ? gs_vfile_text(f, gen_degree, &c) : -ENOENT;
		break;
	case K_NEIGHBORS:
	case K_NEIGHBORS_TXT:
	case K_WEIGHTS:
	case K_IN_NEIGHBORS:
		ret = h->g ? fill_list(f, h, c.v, vn->kind == K_IN_NEIGHBORS ? GS_GRAPH_IN :
				       GS_GRAPH_OUT, vn->kind) : -ENOENT;
		break;
	case K_CTL:
		if (!wr)
			ret = gs_vfile_text(f, gen_info, h);
		break;
	case K_UPDATES:
	case K_EDGES:
		ws = calloc(1, sizeof(*ws));
		if (!ws) {
			ret = -ENOMEM;
			break;
		}
		ws->fd = -1;
		if (vn->kind == K_EDGES && wr) {
			/* one open's: a later cp into edges builds at close again */
			ws->on_fsync = h->bo.on_fsync;
			h->bo.on_fsync = false;
			ws->fd = tmp_file();
			if (ws->fd < 0) {
				ret = ws->fd;
				free(ws);
				break;
			}
		}
		if (vn->kind == K_UPDATES && wr && !h->g)
			ret = -ENODATA;		/* nothing to update: build it first */
		f->priv = ws;
		break;
	default:
		ret = -EISDIR;
	}
	gh_put(h);
	return ret;
}

#define WIN	(64u << 10)

/* The edge list text through a window of it, produced in order: reads of
 * any size and offset; a read behind the window starts over. */
static ssize_t read_edges(struct gs_graph *g, struct wstate *ws, char *buf, size_t size,
			  uint64_t off)
{
	size_t done = 0;

	if (!ws->win && !(ws->win = malloc(WIN)))
		return -ENOMEM;
	if (off < ws->win_off) {
		memset(&ws->cur, 0, sizeof(ws->cur));
		ws->win_off = ws->win_len = 0;
	}
	while (done < size) {
		uint64_t at = off + done;
		size_t k;

		if (at >= ws->win_off + ws->win_len) {
			ssize_t n = gs_graph_edges_text(g, &ws->cur, ws->win, WIN);

			if (n < 0)
				return done ? (ssize_t)done : n;
			if (!n)
				break;	/* the end */
			ws->win_off += ws->win_len;
			ws->win_len = (size_t)n;
			continue;
		}
		k = ws->win_off + ws->win_len - at;
		if (k > size - done)
			k = size - done;
		memcpy(buf + done, ws->win + (at - ws->win_off), k);
		done += k;
	}
	return (ssize_t)done;
}

static ssize_t graph_read(struct gs_fuse *gf, struct gs_vfile *f, char *buf, size_t size,
			  uint64_t off)
{
	struct gh *h;
	ssize_t n = 0;
	int ret;

	if (f->vn->kind != K_EDGES) {
		size_t o = off < f->len ? (size_t)off : f->len;

		n = (ssize_t)(size < f->len - o ? size : f->len - o);
		if (n)
			memcpy(buf, f->buf + o, (size_t)n);
		return n;
	}
	ret = gh_get(gf, f->vn->obj, &h);
	if (ret)
		return ret;
	if (h->g)
		n = read_edges(h->g, f->priv, buf, size, off);
	gh_put(h);
	return n;
}

/* Apply the complete lines of @buf (after the carried partial line). */
static ssize_t write_updates(struct gs_fuse *gf, struct gs_vfile *f, const char *buf,
			     size_t size)
{
	struct wstate *ws = f->priv;
	const char *nl = NULL;
	size_t tail, whole;
	char *text;
	struct gh *h;
	int ret;

	for (size_t i = size; i-- > 0;)
		if (buf[i] == '\n') {
			nl = buf + i;
			break;
		}
	whole = nl ? (size_t)(nl - buf) + 1 : 0;
	tail = size - whole;
	if (whole) {
		text = malloc(ws->npend + whole);
		if (!text)
			return -ENOMEM;
		if (ws->npend)
			memcpy(text, ws->pend, ws->npend);
		memcpy(text + ws->npend, buf, whole);
		ret = gh_get(gf, f->vn->obj, &h);
		if (!ret) {
			ret = h->g ? gs_graph_update(h->g, text, ws->npend + whole, NULL) :
				     -ENODATA;
			gh_put(h);
		}
		free(text);
		if (ret < 0)
			return ret;	/* nothing of this write was applied */
		ws->npend = 0;
	}
	if (tail) {
		char *p = realloc(ws->pend, ws->npend + tail);

		if (!p)
			return -ENOMEM;
		memcpy(p + ws->npend, buf + whole, tail);
		ws->pend = p;
		ws->npend += tail;
	}
	return (ssize_t)size;
}

static int parse_num(const char *s, uint64_t max, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return *end || errno || *v > max ? -EINVAL : 0;
}

/* "key=value" settings of the next build. */
static int ctl_setting(struct build_opts *bo, const char *cmd)
{
	static const char *const formats[] = {
		[GS_GRAPH_FMT_AUTO] = "auto", [GS_GRAPH_FMT_TEXT] = "text",
		[GS_GRAPH_FMT_MTX] = "mtx", [GS_GRAPH_FMT_SG] = "sg", [GS_GRAPH_FMT_WSG] = "wsg",
	};
	const char *eq = strchr(cmd, '='), *val = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - cmd) : 0;
	uint64_t v;

	if (!eq)
		return -EINVAL;
	if (klen == 6 && !strncmp(cmd, "format", 6)) {
		for (uint32_t i = 0; i < NELEM(formats); i++)
			if (!strcmp(val, formats[i])) {
				bo->format = i;
				return 0;
			}
		return -EINVAL;
	}
	if (klen == 5 && !strncmp(cmd, "slack", 5)) {
		if (parse_num(val, 90, &v))
			return -EINVAL;
		bo->slack_pct = (uint32_t)v;
		bo->flags |= GS_GRAPH_IMPORT_SLACK;
		return 0;
	}
	if (klen == 9 && !strncmp(cmd, "chain_max", 9)) {
		if (parse_num(val, 1u << 20, &v) || !v)
			return -EINVAL;
		bo->chain_max = (uint32_t)v;
		return 0;
	}
	if (klen == 8 && !strncmp(cmd, "vertices", 8))
		return parse_num(val, UINT64_MAX - 1, &bo->nv);
	if (klen == 6 && !strncmp(cmd, "commit", 6)) {
		if (strcmp(val, "fsync") && strcmp(val, "close"))
			return -EINVAL;
		bo->on_fsync = !strcmp(val, "fsync");
		return 0;
	}
	if (klen == 3 && !strncmp(cmd, "ids", 3)) {
		bo->flags &= ~(GS_GRAPH_IMPORT_SPARSE_IDS | GS_GRAPH_IMPORT_DENSE_IDS);
		if (!strcmp(val, "sparse"))
			bo->flags |= GS_GRAPH_IMPORT_SPARSE_IDS;
		else if (!strcmp(val, "dense"))
			bo->flags |= GS_GRAPH_IMPORT_DENSE_IDS;
		else if (strcmp(val, "auto"))
			return -EINVAL;
		return 0;
	}
	return -EINVAL;
}

static int ctl_command(struct gh *h, const char *cmd)
{
	static const struct {
		const char *word;
		uint32_t set, clear;
	} settings[] = {
		{ "directed", GS_GRAPH_IMPORT_DIRECTED, GS_GRAPH_IMPORT_UNDIRECTED },
		{ "undirected", GS_GRAPH_IMPORT_UNDIRECTED, GS_GRAPH_IMPORT_DIRECTED },
		{ "weighted", GS_GRAPH_IMPORT_WEIGHTED, GS_GRAPH_IMPORT_UNWEIGHTED },
		{ "unweighted", GS_GRAPH_IMPORT_UNWEIGHTED, GS_GRAPH_IMPORT_WEIGHTED },
		{ "id64", GS_GRAPH_IMPORT_ID64, 0 },
		{ "fixed", GS_GRAPH_IMPORT_FIXED, 0 },
	};

	if (!strcmp(cmd, "merge"))
		return h->g ? gs_graph_merge(h->g) : 0;
	if (!strcmp(cmd, "sync"))
		return h->g ? gs_graph_sync(h->g) : 0;
	if (!strcmp(cmd, "auto")) {
		memset(&h->bo, 0, sizeof(h->bo));
		return 0;
	}
	for (size_t i = 0; i < NELEM(settings); i++)
		if (!strcmp(cmd, settings[i].word)) {
			h->bo.flags = (h->bo.flags & ~settings[i].clear) | settings[i].set;
			return 0;
		}
	return ctl_setting(&h->bo, cmd);
}

static ssize_t write_ctl(struct gs_fuse *gf, struct gs_vfile *f, const char *buf, size_t size)
{
	char line[64];
	size_t i = 0;
	struct gh *h;
	int ret;

	ret = gh_get(gf, f->vn->obj, &h);
	if (ret)
		return ret;
	while (i < size && !ret) {
		size_t n = 0;

		while (i < size && (buf[i] == '\n' || buf[i] == ' ' || buf[i] == '\t'))
			i++;
		while (i < size && buf[i] != '\n' && buf[i] != ' ' && buf[i] != '\t') {
			if (n + 1 < sizeof(line))
				line[n] = buf[i];
			n++;
			i++;
		}
		if (!n)
			break;
		if (n >= sizeof(line)) {
			ret = -EINVAL;
			break;
		}
		line[n] = 0;
		ret = ctl_command(h, line);
	}
	gh_put(h);
	return ret ? ret : (ssize_t)size;
}

static ssize_t graph_write(struct gs_fuse *gf, struct gs_vfile *f, const char *buf, size_t size,
			   uint64_t off)
{
	struct wstate *ws = f->priv;
	ssize_t n;

	switch (f->vn->kind) {
	case K_UPDATES:
		return write_updates(gf, f, buf, size);
	case K_CTL:
		return write_ctl(gf, f, buf, size);
	case K_EDGES:
		if (ws->fd < 0)
			return -EBADF;
		n = pwrite(ws->fd, buf, size, (off_t)off);
		if (n < 0)
			return -errno;
		ws->written = true;
		return n;
	default:
		return -EACCES;
	}
}

/* The edges written through this open become the graph (at close). */
static int rebuild(struct gs_fuse *gf, struct gs_vfile *f)
{
	struct wstate *ws = f->priv;
	struct gs_graph_import_opts o = { 0 };
	struct gh *h = gh_find(gs_fuse_fs(gf), f->vn->obj);
	char err[sizeof(h->build_err)] = "";
	int ret;

	if (!h)
		return -ENOMEM;
	ws->written = false;
	pthread_rwlock_wrlock(&h->rw);
	gh_load(h);
	o.flags = h->bo.flags;
	o.format = h->bo.format;	/* AUTO: text or Matrix Market, by content */
	o.slack_pct = h->bo.slack_pct;
	o.chain_max = h->bo.chain_max;
	o.nv = h->bo.nv;
	o.err = err;
	o.errlen = sizeof(err);
	if (h->g) {
		gs_graph_close(h->g);
		h->g = NULL;
	}
	ret = lseek(ws->fd, 0, SEEK_SET) < 0 ? -errno : 0;
	if (!ret)
		ret = gs_graph_rebuild(h->fs, h->ino, ws->fd, &o);
	if (ret) {
		/* kept for info: the writer's close(2) has only the errno */
		snprintf(h->build_err, sizeof(h->build_err), "%s", err[0] ? err : strerror(-ret));
		gs_warn("graph ino %" PRIu64 ": build from edges failed: %s", h->ino,
			h->build_err);
	} else {
		h->build_err[0] = 0;
	}
	h->loaded = false;	/* the next use opens whatever is there now */
	h->err = 0;
	gh_load(h);
	pthread_rwlock_unlock(&h->rw);
	return ret;
}

static int graph_flush(struct gs_fuse *gf, struct gs_vfile *f)
{
	struct wstate *ws = f->priv;

	if (f->vn->kind == K_EDGES && ws && ws->written && !ws->on_fsync)
		return rebuild(gf, f);
	return 0;
}

static int graph_fsync(struct gs_fuse *gf, struct gs_vfile *f, int datasync)
{
	struct wstate *ws = f->priv;
	struct gh *h;
	int ret;

	/* edges: build now (its error is fsync's); the close then has nothing to do */
	if (f->vn->kind == K_EDGES)
		return ws && ws->written ? rebuild(gf, f) : 0;
	if (f->vn->kind != K_UPDATES && f->vn->kind != K_CTL)
		return 0;
	ret = gh_get(gf, f->vn->obj, &h);
	if (ret)
		return ret;
	ret = h->g ? gs_graph_sync(h->g) : 0;
	gh_put(h);
	return ret;
}

static int graph_release(struct gs_fuse *gf, struct gs_vfile *f)
{
	struct wstate *ws = f->priv;
	struct gh *h;
	int ret = 0;

	if (!ws)
		return 0;
	if (f->vn->kind == K_EDGES && ws->written && !ws->on_fsync)
		ret = rebuild(gf, f);	/* no flush came (a crashed writer) */
	if (f->vn->kind == K_UPDATES && (f->flags & O_ACCMODE) != O_RDONLY &&
	    !gh_get(gf, f->vn->obj, &h)) {
		/* a last line without its newline still counts */
		if (ws->npend && h->g)
			ret = gs_graph_update(h->g, ws->pend, ws->npend, NULL);
		if (h->g)
			gs_graph_sync(h->g);
		gh_put(h);
	}
	if (ws->fd >= 0)
		close(ws->fd);
	free(ws->pend);
	free(ws->win);
	free(ws);
	f->priv = NULL;
	return ret < 0 ? ret : 0;
}

static int graph_getattr(struct gs_fuse *gf, const struct gs_vnode *vn, struct stat *st)
{
	struct gs_vfile f = { .vn = (struct gs_vnode *)vn, .flags = O_RDONLY };

	if (!S_ISREG(vn->mode) || vn->kind == K_EDGES || vn->kind == K_UPDATES ||
	    vn->kind == K_CTL)
		return 0;
	/* the current length; reads are direct_io and do not depend on it */
	if (graph_open(gf, &f) == 0) {
		st->st_size = (off_t)f.len;
		free(f.buf);
	}
	return 0;
}

/* The attach server's GRAPH (gstorefs.h): the device layout from the handle
 * every file of the graph uses, so updates written through the mount and
 * not merged yet are merged into it first. */
int gs_fuse_graph_layout(void *arg, uint64_t ino, struct gs_graph_layout **lp)
{
	struct gs_fuse *gf = arg;
	struct gh *h;
	int ret = gh_get(gf, ino, &h);

	if (ret)
		return ret;
	ret = h->g ? gs_graph_layout_get(h->g, 0, lp) : -ENODATA;	/* no edges yet */
	gh_put(h);
	return ret;
}

/* Before the fs goes away: close every graph handle of this mount. */
static void graph_destroy(struct gs_fuse *gf)
{
	struct gs_fs *fs = gs_fuse_fs(gf);
	struct gh **pp;

	pthread_mutex_lock(&reg_lock);
	for (pp = &reg; *pp;) {
		struct gh *h = *pp;

		if (h->fs != fs) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		if (h->g)
			gs_graph_close(h->g);
		pthread_rwlock_destroy(&h->rw);
		free(h);
	}
	pthread_mutex_unlock(&reg_lock);
}

const struct gs_vops gs_fuse_graph_ops = {
	.name = "graph",
	.lookup = graph_lookup,
	.readdir = graph_readdir,
	.getattr = graph_getattr,
	.open = graph_open,
	.read = graph_read,
	.write = graph_write,
	.flush = graph_flush,
	.fsync = graph_fsync,
	.release = graph_release,
	.destroy = graph_destroy,
};
