// SPDX-License-Identifier: MIT
/*
 * Graph handles: the root slots, opening (redo replay, GTT and delta
 * load), and neighbour queries over pages + delta records + update log.
 *
 * Root commits alternate between two slots; a slot is written only after
 * everything it names is durable, and the valid slot with the higher
 * generation wins at open, so a torn slot write falls back one commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "gs_log.h"
#include "gstore_fs.h"
#include "graph_internal.h"

static uint32_t root_crc(const struct gs_graph_root *r)
{
	struct gs_graph_root c = *r;

	c.crc = 0;
	return gs_crc32c(0, &c, sizeof(c));
}

static bool root_valid(const struct gs_graph_root *r)
{
	return le32toh(r->magic) == GS_GRAPH_ROOT_MAGIC &&
	       le32toh(r->version) == GS_GRAPH_VERSION && root_crc(r) == le32toh(r->crc);
}

int gr_root_read(struct gr_store *st, struct gs_graph_root *r)
{
	struct gs_graph_root s[2];
	bool ok[2];

	for (int i = 0; i < 2; i++) {
		ssize_t n = st->ops->pread(st, st->root, &s[i], sizeof(s[i]),
					   (uint64_t)i * GS_GRAPH_SLOT_SIZE);

		if (n < 0)
			return (int)n;
		ok[i] = n == (ssize_t)sizeof(s[i]) && root_valid(&s[i]);
	}
	if (!ok[0] && !ok[1])
		return -ENODATA;
	if (ok[0] && ok[1])
		*r = le64toh(s[1].gen) > le64toh(s[0].gen) ? s[1] : s[0];
	else
		*r = ok[0] ? s[0] : s[1];
	return 0;
}

/* Write *r as the next generation into the other slot; *r follows on success. */
int gr_root_write(struct gr_store *st, struct gs_graph_root *r)
{
	struct gs_graph_root n = *r;
	uint64_t gen = le64toh(n.gen) + 1;
	int ret;

	n.gen = htole64(gen);
	n.crc = 0;
	n.crc = htole32(root_crc(&n));
	ret = gr_store_write_full(st, st->root, &n, sizeof(n), (gen & 1) * GS_GRAPH_SLOT_SIZE);
	if (!ret)
		ret = st->ops->sync(st, st->root);
	if (!ret)
		*r = n;
	return ret;
}

/* Commit g->root (already updated by the caller) as the next generation. */
int gr_root_commit(struct gs_graph *g)
{
	return gr_root_write(g->st, &g->root);
}

unsigned gr_root_objects(const struct gs_graph_root *r, uint64_t *objs)
{
	const __le64 all[GR_ROOT_OBJS] = {
		r->dir[0].pages_obj, r->dir[0].gtt_obj, r->dir[0].gtt_alt,
		r->dir[0].vmap_obj, r->dir[0].vmap_alt,
		r->dir[1].pages_obj, r->dir[1].gtt_obj, r->dir[1].gtt_alt,
		r->dir[1].vmap_obj, r->dir[1].vmap_alt,
		r->delta_obj, r->redo_obj, r->vdel_obj, r->vdel_alt,
		r->ids_obj, r->ids_idx_obj,
	};
	unsigned n = 0;

	for (unsigned i = 0; i < GR_ROOT_OBJS; i++)
		if (all[i])
			objs[n++] = le64toh(all[i]);
	return n;
}

/* ---- handles ---- */

int gr_graph_new(struct gs_graph **gp)
{
	pthread_rwlockattr_t a;
	struct gs_graph *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	pthread_rwlockattr_init(&a);
	/* updates and merges must not starve behind a stream of queries */
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&g->lock, &a);
	pthread_rwlockattr_destroy(&a);
	g->workers = GR_DEF_WORKERS;
	g->eng = &gr_engine_pages;
	*gp = g;
	return 0;
}

/*
 * A thread's scratch, also on the graph's list: threads that outlive the
 * graph (FUSE workers) never run the key's destructor after
 * pthread_key_delete(), so close frees what is left on the list.
 */
struct gr_tscratch {
	struct gr_scratch sc;	/* first: the key holds &ts->sc */
	struct gs_graph *g;
	struct gr_tscratch *prev, *next;
};

static void tscratch_unlink(struct gr_tscratch *ts)
{
	if (ts->prev)
		ts->prev->next = ts->next;
	else
		ts->g->scall = ts->next;
	if (ts->next)
		ts->next->prev = ts->prev;
}

/* Key destructor: the thread exits while the graph is open. */
static void scratch_destroy(void *p)
{
	struct gr_tscratch *ts = p;
	struct gs_graph *g = ts->g;

	pthread_mutex_lock(&g->sclock);
	tscratch_unlink(ts);
	pthread_mutex_unlock(&g->sclock);
	gr_scratch_free(&ts->sc);
	free(ts);
}

/* The per-thread scratch key of synchronous queries. */
int gr_graph_keys(struct gs_graph *g)
{
	int ret = pthread_key_create(&g->sckey, scratch_destroy);

	if (ret)
		return -ret;
	pthread_mutex_init(&g->sclock, NULL);
	g->scall = NULL;
	g->sckey_ok = true;
	return 0;
}

void gr_graph_free(struct gs_graph *g)
{
	gr_pool_stop(g);
	if (g->eng && g->eng->close)
		g->eng->close(g);
	for (unsigned d = 0; d < 2; d++) {
		gr_gtt_free(&g->dir[d].gtt);
		free(g->dir[d].vmap);
		free(g->freepg[d]);
	}
	gr_pend_clear(g);
	for (unsigned d = 0; d < 2; d++) {
		gr_map_free(&g->dir[d].pmap);
		free(g->dir[d].pend);
	}
	gr_map_free(&g->vdel);
	gr_ids_free(&g->ids);
	free(g->vops);
	if (g->sckey_ok) {
		/* delete first: no destructor can run on a scratch freed below */
		pthread_key_delete(g->sckey);
		while (g->scall) {
			struct gr_tscratch *ts = g->scall;

			tscratch_unlink(ts);
			gr_scratch_free(&ts->sc);
			free(ts);
		}
		pthread_mutex_destroy(&g->sclock);
	}
	if (g->st && !g->st->borrowed)
		g->st->ops->destroy(g->st);
	if (g->fs_ref)
		gs_fs_release(g->fs, g->ino);
	pthread_rwlock_destroy(&g->lock);
	free(g);
}

int gr_scratch_init(struct gr_scratch *sc, uint32_t page_size)
{
	memset(sc, 0, sizeof(*sc));
	sc->page = gr_page_alloc(page_size);
	sc->dpage = gr_page_alloc(page_size);
	sc->mdir = -1;
	sc->dmemo = GS_GRAPH_NONE;
	if (!sc->page || !sc->dpage || gr_idcache_init(&sc->ic, 1, page_size)) {
		gr_scratch_free(sc);
		return -ENOMEM;
	}
	return 0;
}

void gr_scratch_free(struct gr_scratch *sc)
{
	free(sc->page);
	free(sc->dpage);
	gr_list_free(&sc->l);
	gr_list_free(&sc->tmp);
	free(sc->ops);
	free(sc->buf);
	gr_idcache_free(&sc->ic);
	memset(sc, 0, sizeof(*sc));
}

/* Scratch of the calling thread for synchronous queries on @g. */
struct gr_scratch *gr_thread_scratch(struct gs_graph *g)
{
	struct gr_scratch *sc = pthread_getspecific(g->sckey);
	struct gr_tscratch *ts;

	if (sc)
		return sc;
	ts = malloc(sizeof(*ts));
	if (!ts)
		return NULL;
	if (gr_scratch_init(&ts->sc, g->gm.page_size)) {
		free(ts);
		return NULL;
	}
	ts->g = g;
	ts->prev = NULL;
	pthread_mutex_lock(&g->sclock);
	ts->next = g->scall;
	if (ts->next)
		ts->next->prev = ts;
	g->scall = ts;
	pthread_mutex_unlock(&g->sclock);
	pthread_setspecific(g->sckey, &ts->sc);
	return &ts->sc;
}

int gr_load_gtt(struct gs_graph *g, unsigned d)
{
	struct gr_dir *dr = &g->dir[d];
	uint64_t n = le64toh(g->root.dir[d].ngtt), chunk = 4096;
	struct gs_graph_gtt_ent *buf;
	int ret = 0;

	gr_gtt_free(&dr->gtt);
	buf = malloc(chunk * sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < n && !ret; i += chunk) {
		uint64_t k = n - i < chunk ? n - i : chunk;

		ret = gr_store_read_full(g->st, dr->gtt_obj, buf, k * sizeof(*buf),
					 i * sizeof(*buf));
		for (uint64_t j = 0; j < k && !ret; j++) {
			struct gr_gent e;

			gr_gtt_from_disk(&buf[j], &e);
			if (!(e.flags & GS_GRAPH_GTT_VALID) || e.page >= dr->npages ||
			    (dr->gtt.n && e.key < dr->gtt.e[dr->gtt.n - 1].key)) {
				gs_err("graph %" PRIu64 ": GTT entry %" PRIu64 " is corrupt",
				       g->ino, i + j);
				ret = -EIO;
				break;
			}
			ret = gr_gtt_push(&dr->gtt, &e);
		}
	}
	free(buf);
	return ret;
}

static int load_vmap(struct gs_graph *g, unsigned d)
{
	struct gr_dir *dr = &g->dir[d];
	uint64_t nv = le64toh(g->root.dir[d].vmap_bits), bytes = (nv + 7) / 8;
	int ret;

	if (!dr->vmap_obj)
		return 0;	/* no filter: every lookup reads its page */
	free(dr->vmap);
	dr->vmap = calloc(bytes + 1, 1);
	if (!dr->vmap)
		return -ENOMEM;
	ret = bytes ? gr_store_read_full(g->st, dr->vmap_obj, dr->vmap, bytes, 0) : 0;
	if (ret) {
		free(dr->vmap);
		dr->vmap = NULL;
		return ret;
	}
	dr->vmap_bits = nv;
	return 0;
}

static int load_vdel(struct gs_graph *g)
{
	uint64_t n = le64toh(g->root.nvdel);
	uint64_t *ids;
	int ret;

	if (!n)
		return 0;
	ids = malloc(n * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	ret = gr_store_read_full(g->st, le64toh(g->root.vdel_obj), ids, n * sizeof(*ids), 0);
	for (uint64_t i = 0; i < n && !ret; i++) {
		bool added;

		if (!gr_map_put(&g->vdel, le64toh(ids[i]), 0, &added))
			ret = -ENOMEM;
	}
	free(ids);
	return ret;
}

static int check_root(struct gs_graph *g)
{
	const struct gs_graph_root *r = &g->root;
	uint32_t ps = le32toh(r->page_size), fl = le32toh(r->flags);

	if ((fl & ~GS_GRAPH_F_KNOWN) || ps < 512 || ps > GR_MAX_PAGE || (ps & (ps - 1))) {
		gs_err("graph %" PRIu64 ": unsupported flags %#x or page size %u", g->ino, fl, ps);
		return -EINVAL;
	}
	return 0;
}

int gr_graph_open_store(struct gr_store *st, struct gs_fs *fs, uint64_t ino, unsigned flags,
			struct gs_graph **gp)
{
	struct gs_graph *g;
	uint32_t fl;
	int ret;

	ret = gr_graph_new(&g);
	if (ret) {
		if (!st->borrowed)
			st->ops->destroy(st);
		return ret;
	}
	g->st = st;
	g->fs = fs;
	g->ino = ino;
	g->oflags = flags;
	ret = gr_graph_keys(g);
	if (ret)
		goto free_g;
	ret = gr_root_read(st, &g->root);
	if (ret)
		goto free_g;
	ret = check_root(g);
	if (ret)
		goto free_g;
	fl = le32toh(g->root.flags);
	g->directed = fl & GS_GRAPH_F_DIRECTED;
	g->weighted = fl & GS_GRAPH_F_WEIGHTED;
	g->ndirs = g->directed ? 2 : 1;
	gr_geom_init(&g->gm, le32toh(g->root.page_size), fl & GS_GRAPH_F_ID64 ? 8 : 4,
		     g->weighted, fl & GS_GRAPH_F_VARINT);
	for (unsigned d = 0; d < g->ndirs; d++) {
		g->dir[d].pages_obj = le64toh(g->root.dir[d].pages_obj);
		g->dir[d].gtt_obj = le64toh(g->root.dir[d].gtt_obj);
		g->dir[d].gtt_alt = le64toh(g->root.dir[d].gtt_alt);
		g->dir[d].npages = le64toh(g->root.dir[d].npages);
		g->dir[d].vmap_obj = le64toh(g->root.dir[d].vmap_obj);
		g->dir[d].vmap_alt = le64toh(g->root.dir[d].vmap_alt);
	}
	if (g->root.redo_len) {
		/* recovery writes even for a read-only handle, as a journal does */
		ret = gr_redo_replay(g);
		if (ret == -EROFS)
			gs_err("graph %" PRIu64 ": an interrupted merge needs a writable mount",
			       ino);
		if (ret)
			goto free_g;
	}
	g->nv = le64toh(g->root.nv);
	g->ne = le64toh(g->root.ne);
	ret = gr_ids_open(&g->ids, st, &g->root, g->nv);
	if (ret)
		gs_err("graph %" PRIu64 ": its id map is corrupt", ino);
	for (unsigned d = 0; d < g->ndirs && !ret; d++) {
		ret = gr_load_gtt(g, d);
		if (!ret)
			ret = load_vmap(g, d);
	}
	if (!ret)
		ret = load_vdel(g);
	if (!ret)
		ret = gr_delta_load(g);
	if (!ret)
		ret = gr_free_pages_init(g);
	if (ret)
		goto free_g;
	*gp = g;
	return 0;
free_g:
	gr_graph_free(g);
	return ret;
}

int gs_graph_close(struct gs_graph *g)
{
	int ret = 0;

	if (!g)
		return 0;
	gr_pool_stop(g);
	if (g->eng == &gr_engine_pages && !(g->oflags & GS_GRAPH_RDONLY)) {
		pthread_rwlock_wrlock(&g->lock);
		ret = gr_sync_locked(g);
		pthread_rwlock_unlock(&g->lock);
	}
	gr_graph_free(g);
	return ret;
}

int gs_graph_set_workers(struct gs_graph *g, unsigned n)
{
	if (!n || n > 1024)
		return -EINVAL;
	if (g->pool)
		return -EBUSY;
	g->workers = n;
	return 0;
}

/* ---- queries ---- */

bool gr_vertex_ok(struct gs_graph *g, uint64_t v)
{
	return v < g->nv && (!g->vdel.n || !gr_map_get(&g->vdel, v));
}

int gr_read_page(struct gs_graph *g, unsigned d, uint64_t page, void *buf)
{
	uint32_t ps = g->gm.page_size;
	int ret;

	ret = gr_store_read_full(g->st, g->dir[d].pages_obj, buf, ps, page * ps);
	__atomic_add_fetch(&g->stats.page_reads, 1, __ATOMIC_RELAXED);
	if (ret)
		return ret;
	ret = gr_page_check(&g->gm, buf);
	if (ret)
		gs_err("graph %" PRIu64 ": page %" PRIu64 " (dir %u) is corrupt", g->ino, page, d);
	return ret;
}

/* Read a page of the group through the scratch's one-page memo. */
static int scratch_page(struct gs_graph *g, unsigned d, uint64_t page, struct gr_scratch *sc)
{
	int ret;

	if (sc->mdir == (int)d && sc->mpage == page)
		return 0;
	sc->mdir = -1;
	ret = gr_read_page(g, d, page, sc->page);
	if (ret)
		return ret;
	sc->mdir = (int)d;
	sc->mpage = page;
	return 0;
}

/* The stored list of @v, or only its degree when @l is NULL. */
static int64_t base_read(struct gs_graph *g, unsigned d, uint64_t v, struct gr_list *l,
			 struct gr_scratch *sc)
{
	const struct gr_gtt *t = &g->dir[d].gtt;
	int64_t i, deg = 0;
	uint64_t glen;

	if (l)
		l->n = 0;
	if (!gr_vmap_maybe(&g->dir[d], v))
		return 0;	/* the filter knows: no list, no read */
	i = gr_gtt_locate(t, v);
	if (i < 0)
		return 0;
	glen = gr_gtt_group_len(t, (uint64_t)i);
	for (uint64_t k = 0; k < glen; k++) {
		int ret = scratch_page(g, d, t->e[i + k].page, sc);
		int idx;

		if (ret)
			return ret;
		idx = gr_page_find(&g->gm, sc->page, v);
		if (idx < 0) {
			if (glen > 1) {
				gs_err("graph %" PRIu64 ": vertex %" PRIu64
				       " missing from its page", g->ino, v);
				return -EIO;
			}
			return 0;
		}
		if (l) {
			ret = gr_page_append(&g->gm, sc->page, (unsigned)idx, l);
			if (ret)
				return ret;
		} else {
			int64_t n = gr_page_degree(&g->gm, sc->page, (unsigned)idx);

			if (n < 0)
				return n;
			deg += n;
		}
	}
	return l ? (int64_t)l->n : deg;
}

int gr_base_list(struct gs_graph *g, unsigned d, uint64_t v, struct gr_list *l,
		 struct gr_scratch *sc)
{
	int64_t r = base_read(g, d, v, l, sc);

	return r < 0 ? (int)r : 0;
}

static uint64_t pages_order(struct gs_graph *g, unsigned dir, uint64_t v)
{
	unsigned d = gr_sdir(g, dir);
	int64_t i = gr_vmap_maybe(&g->dir[d], v) ? gr_gtt_locate(&g->dir[d].gtt, v) : -1;

	/* requests without a page sort first; then by direction and page */
	if (i < 0)
		return 0;
	return ((uint64_t)d << 62) | (g->dir[d].gtt.e[i].page + 1);
}

static int64_t pages_get(struct gs_graph *g, unsigned dir, uint64_t v, struct gr_list *l,
			 struct gr_scratch *sc, bool degree_only)
{
	unsigned d = gr_sdir(g, dir);
	int ret;

	if (g->broken)
		return g->broken;
	if (!gr_vertex_ok(g, v))
		return -ENOENT;
	if (degree_only && !gr_pend_get(g, d, v))
		return base_read(g, d, v, NULL, sc);
	ret = gr_base_list(g, d, v, l, sc);
	if (!ret && gr_pend_get(g, d, v))
		ret = gr_apply_pending(g, d, v, l, sc);
	return ret ? ret : (int64_t)l->n;
}

/*
 * The pages a chunk's requests start on (order keys: direction, page + 1),
 * hinted to the cache before the gets: as one range when they lie within
 * GR_WIN_BYTES and at least half of it is wanted (a sweep), else page by
 * page; either way the chunk's misses are in flight together instead of
 * one synchronous miss after the other.
 */
static void pages_prepare(struct gs_graph *g, struct gs_graph_req *const *r, const uint64_t *key,
			  unsigned n)
{
	uint32_t ps = g->gm.page_size;
	uint64_t first = 0, last = 0, dkey = 0, distinct = 0, span;
	unsigned d;

	if (!g->st->ops->prefetch)
		return;
	for (unsigned i = 0; i < n; i++) {
		uint64_t k = key[i];

		if (!k)
			continue;	/* no page to read */
		if (!distinct) {
			dkey = k >> 62;
			first = k;
		} else if (k >> 62 != dkey || k < last) {
			return;		/* not one sorted direction */
		}
		distinct += !distinct || k != last;
		last = k;
	}
	span = last - first + 1;
	if (distinct < 2)
		return;
	d = (unsigned)dkey;
	if (span * ps <= GR_WIN_BYTES && 2 * distinct >= span) {
		first = (first & ~(3ULL << 62)) - 1;
		if (first + span <= g->dir[d].npages)
			g->st->ops->prefetch(g->st, g->dir[d].pages_obj, first * ps, span * ps);
		return;
	}
	/* scattered (random queries): every page on its own, all in flight
	 * before the first get waits for one */
	for (unsigned i = 0; i < n; i++) {
		uint64_t p = (key[i] & ~(3ULL << 62)) - 1;

		if (key[i] && (!i || key[i] != key[i - 1]) && p < g->dir[d].npages)
			g->st->ops->prefetch(g->st, g->dir[d].pages_obj, p * ps, ps);
	}
}

const struct gr_engine gr_engine_pages = {
	.order = pages_order,
	.get = pages_get,
	.prepare = pages_prepare,
};

/*
 * A query by vertex id: the index first (sparse ids: a look in the map),
 * then the engine; with @want_ids the list comes back as ids, still
 * sorted (an index list is an id list when ids are not mapped).
 */
static int64_t query(struct gs_graph *g, unsigned dir, uint64_t id, bool degree_only,
		     bool want_ids, struct gr_scratch **scp)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	uint64_t v;
	int64_t r;
	int ret;

	*scp = sc;
	if (!sc)
		return -ENOMEM;
	if (dir > GS_GRAPH_IN)
		return -EINVAL;
	ret = gr_ids_index(&g->ids, &sc->ic, id, &v);
	if (ret)
		return ret;
	sc->mdir = -1;
	__atomic_add_fetch(&g->stats.queries, 1, __ATOMIC_RELAXED);
	r = g->eng->get(g, dir, v, &sc->l, sc, degree_only);
	if (r > 0 && want_ids) {
		ret = gr_ids_list(&g->ids, &sc->ic, sc->l.ids, sc->l.w, (size_t)r);
		if (ret)
			return ret;
	}
	return r;
}

int64_t gs_graph_degree(struct gs_graph *g, uint64_t v, unsigned dir)
{
	struct gr_scratch *sc;
	int64_t r;

	pthread_rwlock_rdlock(&g->lock);
	r = query(g, dir, v, true, false, &sc);
	pthread_rwlock_unlock(&g->lock);
	return r;
}

int64_t gs_graph_neighbors(struct gs_graph *g, uint64_t v, unsigned dir, uint64_t *ids,
			   float *weights, size_t cap)
{
	struct gr_scratch *sc;
	int64_t r;

	pthread_rwlock_rdlock(&g->lock);
	r = query(g, dir, v, !ids && !weights, (ids || weights) && cap, &sc);
	if (r > 0) {
		size_t n = (size_t)r < cap ? (size_t)r : cap;

		if (ids)
			memcpy(ids, sc->l.ids, n * sizeof(*ids));
		if (weights)
			memcpy(weights, sc->l.w, n * sizeof(*weights));
	}
	pthread_rwlock_unlock(&g->lock);
	return r;
}

static int64_t find_id(const struct gr_list *l, uint64_t v)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->ids[mid] == v)
			return (int64_t)mid;
		if (l->ids[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int gs_graph_edge_weight(struct gs_graph *g, uint64_t u, uint64_t v, float *w)
{
	struct gr_scratch *sc;
	uint64_t vi;
	int64_t r, i;

	pthread_rwlock_rdlock(&g->lock);
	r = query(g, GS_GRAPH_OUT, u, false, false, &sc);
	if (r >= 0)
		r = gr_ids_index(&g->ids, &sc->ic, v, &vi);
	if (r >= 0 && !gr_vertex_ok(g, vi))
		r = -ENOENT;
	if (r >= 0) {
		i = find_id(&sc->l, vi);
		if (i < 0)
			r = -ENOENT;
		else if (w)
			*w = sc->l.w[i];
	}
	pthread_rwlock_unlock(&g->lock);
	return r < 0 ? (int)r : 0;
}

static int edge_line(struct gs_graph *g, char *buf, size_t size, uint64_t u, uint64_t v,
		     float w)
{
	if (g->weighted)
		return snprintf(buf, size, "%" PRIu64 " %" PRIu64 " %.9g\n", u, v, (double)w);
	return snprintf(buf, size, "%" PRIu64 " %" PRIu64 "\n", u, v);
}

/*
 * After a vertex without a list, go on at the next one that has a list:
 * the next page's first vertex when this one lies past its page's last
 * (a dense graph with far more ids than lists, --vertices 2^40, is then
 * read in the time its pages take).  Pending updates may give any vertex
 * a list: then every one is asked.
 */
static void edges_skip(struct gs_graph *g, struct gs_graph_cursor *c, struct gr_scratch *sc)
{
	const struct gr_gtt *t = &g->dir[0].gtt;
	uint64_t i, next;

	if (g->eng != &gr_engine_pages || g->dir[0].npend || c->v == GS_GRAPH_NONE - 1)
		return;
	i = gr_gtt_lower(t, c->v + 1);
	next = i < t->n ? t->e[i].key : g->nv;
	if (i && c->v < t->e[i - 1].last) {
		/* in its page: the next tuple's vertex */
		unsigned lo = 0, hi;

		if (scratch_page(g, 0, t->e[i - 1].page, sc))
			return;
		hi = gr_page_count(&g->gm, sc->page);
		while (lo < hi) {
			unsigned mid = (lo + hi) / 2;

			if (gr_ldid(gr_page_tuple(&g->gm, sc->page, mid), g->gm.idw) <= c->v)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == gr_page_count(&g->gm, sc->page))
			return;
		next = gr_ldid(gr_page_tuple(&g->gm, sc->page, lo), g->gm.idw);
	}
	if (next > c->v + 1)
		c->v = next - 1;	/* the loop's increment takes it there */
}

/* Vertices in index order (ascending ids, then those added by updates),
 * each list by ascending id; the cursor counts indices and list entries. */
ssize_t gs_graph_edges_text(struct gs_graph *g, struct gs_graph_cursor *c, char *buf,
			    size_t size)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	size_t len = 0;
	int64_t n = 0;

	if (!sc)
		return -ENOMEM;
	if (size < 80)
		return -EINVAL;
	pthread_rwlock_rdlock(&g->lock);
	sc->mdir = -1;
	for (; c->v < g->nv; c->v++, c->i = 0) {
		uint64_t u;

		n = g->eng->get(g, GS_GRAPH_OUT, c->v, &sc->l, sc, false);
		if (n == 0)
			edges_skip(g, c, sc);
		if (n == -ENOENT || n == 0)
			continue;
		if (n >= 0)
			n = gr_ids_id(&g->ids, &sc->ic, c->v, &u);
		if (n >= 0)
			n = gr_ids_list(&g->ids, &sc->ic, sc->l.ids, sc->l.w, sc->l.n);
		if (n < 0)
			break;
		n = (int64_t)sc->l.n;
		for (; c->i < (uint64_t)n; c->i++) {
			uint64_t v = sc->l.ids[c->i];
			int k;

			if (!g->directed && v < u)
				continue;	/* an undirected edge once, from its smaller end */
			k = edge_line(g, buf + len, size - len, u, v, sc->l.w[c->i]);
			if ((size_t)k >= size - len)
				goto out;
			len += (size_t)k;
		}
	}
out:
	pthread_rwlock_unlock(&g->lock);
	return n < 0 && n != -ENOENT && !len ? (ssize_t)n : (ssize_t)len;
}

/* ---- vertex ids and indices ---- */

int gs_graph_vertex_index(struct gs_graph *g, uint64_t id, uint64_t *idx)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	int ret;

	if (!sc)
		return -ENOMEM;
	pthread_rwlock_rdlock(&g->lock);
	ret = gr_ids_index(&g->ids, &sc->ic, id, idx);
	if (!ret && !gr_vertex_ok(g, *idx))
		ret = -ENOENT;
	pthread_rwlock_unlock(&g->lock);
	return ret;
}

int gs_graph_vertex_ids(struct gs_graph *g, uint64_t first, uint64_t n, uint64_t *ids)
{
	struct gr_scratch *sc = gr_thread_scratch(g);
	int ret = 0;

	if (!sc)
		return -ENOMEM;
	pthread_rwlock_rdlock(&g->lock);
	if (first > g->nv || n > g->nv - first)
		ret = -ENOENT;
	for (uint64_t i = 0; i < n && !ret; i++)
		ret = gr_ids_id(&g->ids, &sc->ic, first + i, &ids[i]);
	pthread_rwlock_unlock(&g->lock);
	return ret;
}

/* ---- info ---- */

static uint64_t obj_bytes(struct gs_graph *g, uint64_t obj)
{
	uint64_t b = 0;

	if (obj && g->st && g->st->ops->size)
		g->st->ops->size(g->st, obj, &b);
	return b;
}

int gs_graph_info(struct gs_graph *g, struct gs_graph_info *gi)
{
	memset(gi, 0, sizeof(*gi));
	pthread_rwlock_rdlock(&g->lock);
	gi->nv = g->nv;
	gi->id_map = g->ids.on;
	gi->ne = g->ne;
	gi->directed = g->directed;
	gi->weighted = g->weighted;
	gi->id_bytes = g->gm.idw;
	gi->page_size = g->gm.page_size;
	for (unsigned d = 0; d < g->ndirs; d++) {
		gi->pages[d] = g->dir[d].gtt.n;
		gi->gtt_entries[d] = g->dir[d].gtt.n;
	}
	if (g->eng == &gr_engine_pages) {
		const struct gs_graph_root *r = &g->root;
		uint64_t objs[GR_ROOT_OBJS];
		unsigned n = gr_root_objects(r, objs);

		for (unsigned i = 0; i < n; i++)
			gi->disk_bytes += obj_bytes(g, objs[i]);
		gi->disk_bytes += obj_bytes(g, g->st->root);
		gi->delta_bytes = le64toh(r->delta_len);
		gi->merges = le64toh(r->merges);
		gi->slack_pct = le32toh(r->slack_pct);
		gi->chain_max = le32toh(r->chain_max);
	}
	if (g->eng == &gr_engine_csr)
		gi->disk_bytes = gr_csr_disk_bytes(g);
	gi->removed = g->vdel.n;
	gi->delta_records = g->delta_recs;
	gi->log_ops = g->log_ops;
	gi->max_chain = g->max_chain;
	pthread_rwlock_unlock(&g->lock);
	return 0;
}

int gs_graph_info_text(struct gs_graph *g, char *buf, size_t size)
{
	struct gs_graph_info i;

	gs_graph_info(g, &i);
	return snprintf(buf, size,
			"vertices: %" PRIu64 "\n"
			"edges: %" PRIu64 "\n"
			"directed: %s\n"
			"weighted: %s\n"
			"id_bytes: %u\n"
			"page_size: %u\n"
			"pages: %" PRIu64 "\n"
			"in_pages: %" PRIu64 "\n"
			"disk_bytes: %" PRIu64 "\n"
			"removed_vertices: %" PRIu64 "\n"
			"delta_bytes: %" PRIu64 "\n"
			"delta_records: %" PRIu64 "\n"
			"log_updates: %" PRIu64 "\n"
			"max_chain: %u\n"
			"chain_max: %u\n"
			"slack_pct: %u\n"
			"merges: %" PRIu64 "\n"
			"id_map: %s\n",
			i.nv, i.ne, i.directed ? "yes" : "no", i.weighted ? "yes" : "no",
			i.id_bytes, i.page_size, i.pages[0], i.pages[1], i.disk_bytes, i.removed,
			i.delta_bytes, i.delta_records, i.log_ops, i.max_chain, i.chain_max,
			i.slack_pct, i.merges, i.id_map ? "yes" : "no");
}

void gs_graph_get_stats(struct gs_graph *g, struct gs_graph_stats *st)
{
	st->queries = __atomic_load_n(&g->stats.queries, __ATOMIC_RELAXED);
	st->page_reads = __atomic_load_n(&g->stats.page_reads, __ATOMIC_RELAXED);
	st->delta_reads = __atomic_load_n(&g->stats.delta_reads, __ATOMIC_RELAXED);
	st->batches = __atomic_load_n(&g->stats.batches, __ATOMIC_RELAXED);
	st->updates = __atomic_load_n(&g->stats.updates, __ATOMIC_RELAXED);
	st->syncs = __atomic_load_n(&g->stats.syncs, __ATOMIC_RELAXED);
	st->merges = __atomic_load_n(&g->stats.merges, __ATOMIC_RELAXED);
	st->merged_pages = __atomic_load_n(&g->stats.merged_pages, __ATOMIC_RELAXED);
}
