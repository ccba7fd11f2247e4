// SPDX-License-Identifier: MIT
/*
 * The CSR baseline of the GraphSSD comparison: the same graph as three
 * arrays (rowPtr u64, colIdx at the graph's id width, val f32) in arrays/,
 * answered with gs_fs_read through the same cache as the graph pages.  A
 * query reads rowPtr[v..v+1], then its colIdx range (and val range): the
 * conventional "graph in files" a host would keep.  Requests are answered
 * in submission order, one at a time: no page-aware scheduling.
 *
 * arrays/PREFIX.rowptr carries "nv ne directed weighted id_bytes" in the
 * xattr user.gstore.csr.  Directed graphs also get PREFIX.in.* arrays.
 * Rows and colIdx entries are vertex indices; a graph with an id map also
 * gets PREFIX.ids (u64 id per index) and " nsorted" after id_bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "../graph_internal.h"

#define XA_CSR		"user.gstore.csr"
#define WCHUNK		(1u << 20)

struct csr {
	uint64_t rowptr[2], colidx[2], val[2];	/* inos per direction */
};

static const char *const suffix[2][3] = {
	{ ".rowptr", ".colidx", ".val" },
	{ ".in.rowptr", ".in.colidx", ".in.val" },
};
#define IDS_SUFFIX	".ids"


static int arrays_dir(struct gs_fs *fs, uint64_t *dir)
{
	struct gs_stat st;
	int ret = gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &st);

	if (!ret)
		*dir = st.ino;
	return ret;
}

static int array_name(char *buf, size_t size, const char *prefix, unsigned d, unsigned k)
{
	if (!prefix[0] || strchr(prefix, '/') ||
	    (size_t)snprintf(buf, size, "%s%s", prefix, suffix[d][k]) >= size)
		return -EINVAL;
	return 0;
}

/* ---- export ---- */

struct wbuf {
	struct gs_fs *fs;
	uint64_t ino, off;
	uint8_t *b;
	size_t n;
};

static int wput(struct wbuf *w, const void *p, size_t len)
{
	while (len) {
		size_t k = WCHUNK - w->n < len ? WCHUNK - w->n : len;

		memcpy(w->b + w->n, p, k);
		w->n += k;
		p = (const uint8_t *)p + k;
		len -= k;
		if (w->n == WCHUNK) {
			ssize_t r = gs_fs_write(w->fs, w->ino, w->b, w->n, w->off);

			if (r < 0)
				return (int)r;
			w->off += w->n;
			w->n = 0;
		}
	}
	return 0;
}

static int wend(struct wbuf *w)
{
	ssize_t r = w->n ? gs_fs_write(w->fs, w->ino, w->b, w->n, w->off) : 0;

	if (r < 0)
		return (int)r;
	w->off += w->n;
	w->n = 0;
	return gs_fs_fsync(w->fs, w->ino, 0);
}

static int make_array(struct gs_fs *fs, uint64_t dir, const char *name, uint64_t *ino)
{
	struct gs_stat st;
	int ret = gs_fs_unlink(fs, dir, name);

	if (ret && ret != -ENOENT)
		return ret;
	ret = gs_fs_create(fs, dir, name, GS_T_ARRAY, 0644, getuid(), getgid(), &st);
	if (!ret)
		*ino = st.ino;
	return ret;
}

static int export_dir(struct gs_graph *g, uint64_t adir, const char *prefix, unsigned dir)
{
	struct wbuf w[3] = { { 0 } };
	struct gr_scratch sc;
	unsigned nk = g->weighted ? 3 : 2, idw = g->gm.idw;
	uint64_t off = 0, nv = g->nv;
	char name[GS_NAME_MAX + 1];
	int ret;

	ret = gr_scratch_init(&sc, g->gm.page_size);
	if (ret)
		return ret;
	for (unsigned k = 0; k < nk && !ret; k++) {
		w[k].fs = g->fs;
		w[k].b = malloc(WCHUNK);
		ret = w[k].b ? array_name(name, sizeof(name), prefix, dir, k) : -ENOMEM;
		if (!ret)
			ret = make_array(g->fs, adir, name, &w[k].ino);
	}
	if (!ret)
		ret = wput(&w[0], &(uint64_t){ htole64(0) }, 8);
	for (uint64_t v = 0; v < nv && !ret; v++) {
		int64_t n;

		/* shared for a stretch of vertices; the page memo spans them */
		if (!(v & 4095)) {
			if (v)
				pthread_rwlock_unlock(&g->lock);
			pthread_rwlock_rdlock(&g->lock);
			sc.mdir = -1;
		}
		n = g->eng->get(g, dir, v, &sc.l, &sc, false);
		if (n == -ENOENT)
			n = 0;		/* a removed vertex: an empty row */
		if (n < 0) {
			ret = (int)n;
			break;
		}
		for (int64_t i = 0; i < n && !ret; i++) {
			uint8_t id[8];

			gr_stid(id, idw, sc.l.ids[i]);
			ret = wput(&w[1], id, idw);
			if (!ret && g->weighted)
				ret = wput(&w[2], &(uint32_t){ htole32(gr_f2u(sc.l.w[i])) }, 4);
		}
		off += (uint64_t)n;
		if (!ret)
			ret = wput(&w[0], &(uint64_t){ htole64(off) }, 8);
	}
	if (nv)
		pthread_rwlock_unlock(&g->lock);
	for (unsigned k = 0; k < nk && !ret; k++)
		ret = wend(&w[k]);
	for (unsigned k = 0; k < nk; k++)
		free(w[k].b);
	if (!ret && !dir) {
		char x[128];
		int len = snprintf(x, sizeof(x), "%" PRIu64 " %" PRIu64 " %d %d %u", nv, g->ne,
				   g->directed, g->weighted, idw);

		if (g->ids.on)
			len += snprintf(x + len, sizeof(x) - len, " %" PRIu64, g->ids.nsorted);
		ret = gs_fs_setxattr(g->fs, w[0].ino, XA_CSR, x, (size_t)len, 0);
	}
	gr_scratch_free(&sc);
	return ret;
}

/* PREFIX.ids: the id of each vertex index. */
static int export_ids(struct gs_graph *g, uint64_t adir, const char *prefix)
{
	struct wbuf w = { .fs = g->fs, .b = malloc(WCHUNK) };
	char name[GS_NAME_MAX + 1];
	struct gr_idcache ic;
	int ret = w.b ? 0 : -ENOMEM;

	if ((size_t)snprintf(name, sizeof(name), "%s%s", prefix, IDS_SUFFIX) >= sizeof(name))
		ret = -EINVAL;
	if (!ret)
		ret = gr_idcache_init(&ic, 1, g->gm.page_size);
	if (!ret) {
		ret = make_array(g->fs, adir, name, &w.ino);
		pthread_rwlock_rdlock(&g->lock);
		for (uint64_t v = 0; v < g->nv && !ret; v++) {
			uint64_t id;

			ret = gr_ids_id(&g->ids, &ic, v, &id);
			if (!ret)
				ret = wput(&w, &(uint64_t){ htole64(id) }, 8);
		}
		pthread_rwlock_unlock(&g->lock);
		if (!ret)
			ret = wend(&w);
		gr_idcache_free(&ic);
	}
	free(w.b);
	return ret;
}

int gs_graph_export_csr(struct gs_graph *g, const char *prefix)
{
	uint64_t adir;
	int ret;

	if (!g->fs || g->eng != &gr_engine_pages)
		return -EINVAL;
	ret = arrays_dir(g->fs, &adir);
	if (!ret && g->ids.on)
		ret = export_ids(g, adir, prefix);
	for (unsigned d = 0; d < g->ndirs && !ret; d++)
		ret = export_dir(g, adir, prefix, d);
	return ret;
}

/* The id map of a CSR export, held in memory. */
static int load_ids(struct gs_graph *g, uint64_t adir, const char *prefix, uint64_t nsorted)
{
	char name[GS_NAME_MAX + 1];
	struct gs_stat st;
	uint64_t *ids;
	ssize_t r;
	int ret;

	if ((size_t)snprintf(name, sizeof(name), "%s%s", prefix, IDS_SUFFIX) >= sizeof(name))
		return -EINVAL;
	ret = gs_fs_lookup(g->fs, adir, name, &st);
	if (ret)
		return ret == -ENOENT ? -EINVAL : ret;
	if (st.size != g->nv * 8 || nsorted > g->nv)
		return -EINVAL;
	ids = malloc(g->nv ? g->nv * 8 : 8);
	if (!ids)
		return -ENOMEM;
	for (uint64_t off = 0; off < st.size; off += (uint64_t)r) {
		r = gs_fs_read(g->fs, st.ino, (char *)ids + off, st.size - off, off);
		if (r <= 0) {
			free(ids);
			return r < 0 ? (int)r : -EIO;
		}
	}
	for (uint64_t i = 0; i < g->nv; i++)
		ids[i] = le64toh(ids[i]);
	return gr_ids_from_array(&g->ids, ids, g->nv, nsorted);
}

/* ---- the engine ---- */

static int64_t csr_get(struct gs_graph *g, unsigned dir, uint64_t v, struct gr_list *l,
		       struct gr_scratch *sc, bool degree_only)
{
	struct csr *c = g->eng_priv;
	unsigned d = gr_sdir(g, dir), idw = g->gm.idw;
	uint64_t rp[2], a, n;
	size_t need;
	ssize_t r;

	if (v >= g->nv)
		return -ENOENT;
	r = gs_fs_read(g->fs, c->rowptr[d], rp, sizeof(rp), v * 8);
	if (r != (ssize_t)sizeof(rp))
		return r < 0 ? r : -EIO;
	a = le64toh(rp[0]);
	n = le64toh(rp[1]) - a;
	if (le64toh(rp[1]) < a)
		return -EIO;
	if (degree_only)
		return (int64_t)n;
	need = n * (idw + (g->weighted ? 4 : 0));
	if (need > sc->bufcap) {
		uint8_t *b = realloc(sc->buf, need);

		if (!b)
			return -ENOMEM;
		sc->buf = b;
		sc->bufcap = need;
	}
	if (gr_list_reserve(l, n))
		return -ENOMEM;
	if (n) {
		r = gs_fs_read(g->fs, c->colidx[d], sc->buf, n * idw, a * idw);
		if (r != (ssize_t)(n * idw))
			return r < 0 ? r : -EIO;
	}
	for (uint64_t i = 0; i < n; i++)
		l->ids[i] = gr_ldid(sc->buf + i * idw, idw);
	if (g->weighted && n) {
		r = gs_fs_read(g->fs, c->val[d], sc->buf, n * 4, a * 4);
		if (r != (ssize_t)(n * 4))
			return r < 0 ? r : -EIO;
		for (uint64_t i = 0; i < n; i++)
			l->w[i] = gr_u2f(gr_ld32(sc->buf + 4 * i));
	} else {
		for (uint64_t i = 0; i < n; i++)
			l->w[i] = 1.0f;
	}
	l->n = n;
	return (int64_t)n;
}

/*
 * The same hints as the pages engine's: a chunk of requests for nearby
 * vertices (sorted by id, at least every other one wanted) has its rowPtr
 * range and then the colIdx (and weight) range of those vertices, up to
 * GR_WIN_BYTES each, read into the cache at once; scattered vertices are
 * hinted one by one.
 */
/* Scattered vertices: all their rowPtr entries in flight at once, then
 * (as each arrives, unless only degrees are wanted) all their colIdx ranges. */
static void scattered(struct gs_graph *g, unsigned d, const uint64_t *v, unsigned n,
		      bool degree_only)
{
	struct csr *c = g->eng_priv;
	unsigned idw = g->gm.idw;
	uint64_t rp[2];

	for (unsigned i = 0; i < n; i++)
		if (v[i] < g->nv)
			gs_fs_readahead(g->fs, c->rowptr[d], v[i] * 8, 16);
	for (unsigned i = 0; i < n && !degree_only; i++) {
		if (v[i] >= g->nv ||
		    gs_fs_read(g->fs, c->rowptr[d], rp, sizeof(rp), v[i] * 8) != sizeof(rp))
			continue;
		rp[0] = le64toh(rp[0]);
		rp[1] = le64toh(rp[1]);
		if (rp[1] <= rp[0])
			continue;
		gs_fs_readahead(g->fs, c->colidx[d], rp[0] * idw, (rp[1] - rp[0]) * idw);
		if (g->weighted)
			gs_fs_readahead(g->fs, c->val[d], rp[0] * 4, (rp[1] - rp[0]) * 4);
	}
}

static void csr_prepare(struct gs_graph *g, struct gs_graph_req *const *r, const uint64_t *key,
			unsigned n)
{
	struct csr *c = g->eng_priv;
	uint64_t first = key[0], last = key[n - 1], span, rp[2];
	unsigned d, idw = g->gm.idw;
	bool sorted = true, degree_only = r[0]->flags & GS_GRAPH_REQ_DEGREE;

	if (n < 2 || r[0]->dir > GS_GRAPH_IN)
		return;
	for (unsigned i = 1; i < n; i++) {
		if (r[i]->dir != r[0]->dir)
			return;
		sorted &= key[i] >= key[i - 1];
		degree_only &= !!(r[i]->flags & GS_GRAPH_REQ_DEGREE);
	}
	d = gr_sdir(g, r[0]->dir);
	span = last - first + 1;
	if (!sorted || last >= g->nv || span > 2 * (uint64_t)n || (span + 1) * 8 > GR_WIN_BYTES) {
		scattered(g, d, key, n, degree_only);
		return;
	}
	gs_fs_readahead(g->fs, c->rowptr[d], first * 8, (span + 1) * 8);
	/* degrees come from rowPtr alone (csr_get reads nothing else for them) */
	if (degree_only)
		return;
	if (gs_fs_read(g->fs, c->rowptr[d], &rp[0], 8, first * 8) != 8 ||
	    gs_fs_read(g->fs, c->rowptr[d], &rp[1], 8, (last + 1) * 8) != 8)
		return;
	rp[0] = le64toh(rp[0]);
	rp[1] = le64toh(rp[1]);
	if (rp[1] <= rp[0])
		return;
	span = rp[1] - rp[0];
	gs_fs_readahead(g->fs, c->colidx[d], rp[0] * idw,
		       span * idw < GR_WIN_BYTES ? span * idw : GR_WIN_BYTES);
	if (g->weighted)
		gs_fs_readahead(g->fs, c->val[d], rp[0] * 4,
			       span * 4 < GR_WIN_BYTES ? span * 4 : GR_WIN_BYTES);
}

static void csr_close(struct gs_graph *g)
{
	free(g->eng_priv);
	g->eng_priv = NULL;
}

const struct gr_engine gr_engine_csr = {
	.get = csr_get,
	.prepare = csr_prepare,
	.close = csr_close,
};

uint64_t gr_csr_disk_bytes(struct gs_graph *g)
{
	struct csr *c = g->eng_priv;
	uint64_t b = 0;

	for (unsigned d = 0; d < g->ndirs; d++) {
		uint64_t inos[3] = { c->rowptr[d], c->colidx[d], c->val[d] };

		for (unsigned k = 0; k < 3; k++) {
			struct gs_stat st;

			if (inos[k] && !gs_fs_getattr(g->fs, inos[k], &st))
				b += st.blocks * 512;
		}
	}
	return b;
}

int gs_graph_open_csr(struct gs_fs *fs, const char *prefix, struct gs_graph **gp)
{
	char name[GS_NAME_MAX + 1], x[128];
	struct gs_fs_statfs sf;
	struct gs_graph *g;
	struct csr *c;
	uint64_t adir, nv, ne, nsorted = 0;
	int directed, weighted, ret, fields = 0;
	unsigned idw;

	ret = arrays_dir(fs, &adir);
	if (!ret)
		ret = array_name(name, sizeof(name), prefix, 0, 0);
	if (!ret)
		ret = gs_fs_statfs(fs, &sf);
	if (ret)
		return ret;
	ret = gr_graph_new(&g);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c) {
		gr_graph_free(g);
		return -ENOMEM;
	}
	g->eng = &gr_engine_csr;
	g->eng_priv = c;
	g->fs = fs;
	g->oflags = GS_GRAPH_RDONLY;
	for (unsigned d = 0; d < 2 && !ret; d++) {
		for (unsigned k = 0; k < 3 && !ret; k++) {
			struct gs_stat st;
			uint64_t *ino = k == 0 ? &c->rowptr[d] :
					k == 1 ? &c->colidx[d] : &c->val[d];

			ret = array_name(name, sizeof(name), prefix, d, k);
			if (!ret)
				ret = gs_fs_lookup(fs, adir, name, &st);
			if (!ret)
				*ino = st.ino;
			else if (ret == -ENOENT && (d || k == 2))
				ret = 0;	/* optional: in-lists, weights */
		}
	}
	if (!ret) {
		ret = gs_fs_getxattr(fs, c->rowptr[0], XA_CSR, x, sizeof(x) - 1);
		if (ret >= 0) {
			x[ret] = 0;
			fields = sscanf(x, "%" SCNu64 " %" SCNu64 " %d %d %u %" SCNu64, &nv, &ne,
					&directed, &weighted, &idw, &nsorted);
			ret = fields >= 5 && (idw == 4 || idw == 8) ? 0 : -EINVAL;
		}
	}
	if (!ret && ((directed && !c->rowptr[1]) || (weighted && !c->val[0])))
		ret = -EINVAL;
	if (ret) {
		gr_graph_free(g);
		return ret;
	}
	g->nv = nv;
	g->ne = ne;
	g->directed = directed;
	g->weighted = weighted;
	g->ndirs = directed ? 2 : 1;
	gr_geom_init(&g->gm, sf.block_size, idw, weighted, false);
	ret = fields == 6 ? load_ids(g, adir, prefix, nsorted) : 0;
	if (!ret)
		ret = gr_graph_keys(g);
	if (ret) {
		gr_graph_free(g);
		return ret;
	}
	*gp = g;
	return 0;
}
