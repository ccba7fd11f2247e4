// SPDX-License-Identifier: MIT
/*
 * Merge: fold the delta records into the pages, rewriting only the page
 * groups that have updates.  A group whose lists outgrow its page splits
 * into more pages (new GTT entries; a vertex grown past one page becomes a
 * large vertex with EXT entries); emptied pages go back to the free list.
 *
 * Crash safety, in this order:
 *   1. the new GTTs (and removed-vertex list) go to the A/B "alt" objects,
 *      the new page images to the redo log; all synced;
 *   2. root commit R1 names the new GTTs and the redo log (redo_len != 0);
 *   3. the images are written in place and synced;
 *   4. root commit R2 empties the delta log and the redo log.
 * A crash before R1 leaves the old graph untouched (nothing it uses was
 * written); after R1, opening replays the redo log (idempotent) and does R2.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "gs_log.h"
#include "graph_internal.h"

struct img {
	uint64_t page;
	unsigned d;
	uint8_t *data;
};

struct mctx {
	struct gs_graph *g;
	unsigned d;
	struct gr_gtt ngtt;	/* the direction's new GTT */
	struct img *imgs;
	size_t nimg, imgcap;
	uint64_t *reuse;	/* the job's old pages, used first */
	size_t nreuse, reuse_at;
	uint64_t npages;	/* the direction's page count as it grows */
	struct gr_scratch sc;
	struct gr_list old, cur;
	uint64_t *overts, *ooff;	/* old group's vertices and list starts */
	size_t nold, oldcap;
	uint8_t *vmap;		/* the new vertex filter (NULL: none kept) */
};

static int free_push(struct gs_graph *g, unsigned d, uint64_t page)
{
	if (g->nfree[d] == g->freecap[d]) {
		uint64_t c = g->freecap[d] ? g->freecap[d] * 2 : 64;
		uint64_t *n = realloc(g->freepg[d], c * sizeof(*n));

		if (!n)
			return -ENOMEM;
		g->freepg[d] = n;
		g->freecap[d] = c;
	}
	g->freepg[d][g->nfree[d]++] = page;
	return 0;
}

static uint64_t alloc_page(struct mctx *m)
{
	struct gs_graph *g = m->g;

	if (m->reuse_at < m->nreuse)
		return m->reuse[m->reuse_at++];
	if (g->nfree[m->d])
		return g->freepg[m->d][--g->nfree[m->d]];
	return m->npages++;
}

/* Packer sink: number the page, keep its image and its GTT entry. */
static int sink(void *arg, void *page, uint64_t key, uint64_t last, uint32_t flags)
{
	struct mctx *m = arg;
	struct gr_gent e = { .key = key, .last = last, .flags = flags };
	struct img *im;

	if (m->nimg == m->imgcap) {
		size_t c = m->imgcap ? m->imgcap * 2 : 64;
		struct img *n = realloc(m->imgs, c * sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->imgs = n;
		m->imgcap = c;
	}
	im = &m->imgs[m->nimg];
	im->data = malloc(m->g->gm.page_size);
	if (!im->data)
		return -ENOMEM;
	memcpy(im->data, page, m->g->gm.page_size);
	im->d = m->d;
	im->page = e.page = alloc_page(m);
	m->nimg++;
	return gr_gtt_push(&m->ngtt, &e);
}

static int old_push(struct mctx *m, uint64_t v, uint64_t off)
{
	if (m->nold == m->oldcap) {
		size_t c = m->oldcap ? m->oldcap * 2 : 256;
		uint64_t *a = realloc(m->overts, c * sizeof(*a));
		uint64_t *b;

		if (!a)
			return -ENOMEM;
		m->overts = a;
		b = realloc(m->ooff, (c + 1) * sizeof(*b));
		if (!b)
			return -ENOMEM;
		m->ooff = b;
		m->oldcap = c;
	}
	m->overts[m->nold] = v;
	m->ooff[m->nold++] = off;
	return 0;
}

/* Read every list of the group at @gi into m->old / m->overts. */
static int read_group(struct mctx *m, uint64_t gi)
{
	struct gs_graph *g = m->g;
	const struct gr_gtt *t = &g->dir[m->d].gtt;
	uint64_t glen = gr_gtt_group_len(t, gi);
	int ret;

	m->old.n = 0;
	m->nold = 0;
	for (uint64_t k = 0; k < glen; k++) {
		unsigned cnt;

		ret = gr_read_page(g, m->d, t->e[gi + k].page, m->sc.page);
		if (ret)
			return ret;
		cnt = gr_page_count(&g->gm, m->sc.page);
		for (unsigned i = 0; i < cnt; i++) {
			uint64_t v = gr_ldid(gr_page_tuple(&g->gm, m->sc.page, i), g->gm.idw);

			if (!m->nold || m->overts[m->nold - 1] != v) {
				ret = old_push(m, v, m->old.n);
				if (ret)
					return ret;
			}
			ret = gr_page_append(&g->gm, m->sc.page, i, &m->old);
			if (ret)
				return ret;
		}
		/* the group's own pages are reused first, in order */
		m->reuse[m->nreuse++] = t->e[gi + k].page;
	}
	m->ooff[m->nold] = m->old.n;	/* old_push keeps room for this one */
	return 0;
}

/* Rewrite one group (gi >= 0) or make a new one (gi < 0) holding the
 * pending vertices @pv[0..npv). */
static int merge_job(struct mctx *m, int64_t gi, const uint64_t *pv, size_t npv)
{
	struct gs_graph *g = m->g;
	struct gr_packer pk;
	size_t i = 0, j = 0;
	int ret;

	m->nold = 0;
	m->nreuse = m->reuse_at = 0;
	if (gi >= 0) {
		uint64_t glen = gr_gtt_group_len(&g->dir[m->d].gtt, (uint64_t)gi);
		uint64_t *r = realloc(m->reuse, glen * sizeof(*r));

		if (!r)
			return -ENOMEM;
		m->reuse = r;
		ret = read_group(m, (uint64_t)gi);
		if (ret)
			return ret;
	}
	ret = gr_pack_init(&pk, &g->gm, le32toh(g->root.slack_pct),
			   (uint32_t)le64toh(g->root.merges) + 1, sink, m);
	if (ret)
		return ret;
	while (!ret && (i < m->nold || j < npv)) {
		uint64_t v;
		bool has_old, pending;

		if (j == npv || (i < m->nold && m->overts[i] < pv[j]))
			v = m->overts[i];
		else
			v = pv[j];
		has_old = i < m->nold && m->overts[i] == v;
		pending = j < npv && pv[j] == v;
		m->cur.n = 0;
		if (has_old) {
			size_t a = m->ooff[i], b = m->ooff[i + 1];

			ret = gr_list_reserve(&m->cur, b - a);
			if (ret)
				break;
			memcpy(m->cur.ids, m->old.ids + a, (b - a) * sizeof(uint64_t));
			memcpy(m->cur.w, m->old.w + a, (b - a) * sizeof(float));
			m->cur.n = b - a;
			i++;
		}
		if (pending) {
			ret = gr_apply_pending(g, m->d, v, &m->cur, &m->sc);
			j++;
		}
		if (!ret)
			ret = gr_pack_vertex(&pk, v, m->cur.ids, m->cur.w, m->cur.n);
		if (m->vmap)
			gr_vmap_set(m->vmap, v, m->cur.n != 0);
	}
	if (!ret)
		ret = gr_pack_finish(&pk);
	gr_pack_free(&pk);
	/* old pages the new lists did not need are free now */
	while (!ret && m->reuse_at < m->nreuse)
		ret = free_push(g, m->d, m->reuse[m->reuse_at++]);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Build the new GTT and page images of direction @d. */
static int merge_dir(struct mctx *m)
{
	struct gs_graph *g = m->g;
	struct gr_dir *dr = &g->dir[m->d];
	const struct gr_gtt *t = &dr->gtt;
	uint64_t *pv, npv = 0, gi = 0, j = 0;
	int ret = 0;

	pv = malloc((dr->npend + 1) * sizeof(*pv));
	m->oldcap = 256;
	m->overts = malloc(m->oldcap * sizeof(*m->overts));
	m->ooff = malloc((m->oldcap + 1) * sizeof(*m->ooff));
	if (!pv || !m->overts || !m->ooff) {
		free(pv);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < dr->npend; i++)
		if (dr->pend[i].head != GS_GRAPH_NONE || dr->pend[i].nops)
			pv[npv++] = dr->pend[i].v;
	qsort(pv, npv, sizeof(*pv), cmp_u64);
	m->npages = dr->npages;

	/* walk old groups and pending vertices together, in vertex order */
	while (!ret && (gi < t->n || j < npv)) {
		uint64_t ins = 0, k = j;
		int64_t tg = -2;

		if (j < npv)
			tg = gr_gtt_target(t, pv[j], &ins);
		if (j < npv && tg >= 0 && (uint64_t)tg < gi) {
			ret = -EIO;	/* targets must ascend with the vertices */
			break;
		}
		if (j < npv && ((tg < 0 && ins <= gi) || (tg >= 0 && (uint64_t)tg == gi))) {
			/* all pending vertices with the same target form one job */
			while (k + 1 < npv) {
				uint64_t ins2 = 0;
				int64_t tg2 = gr_gtt_target(t, pv[k + 1], &ins2);

				if (tg2 != tg || (tg < 0 && ins2 != ins))
					break;
				k++;
			}
			ret = merge_job(m, tg, pv + j, k + 1 - j);
			__atomic_add_fetch(&g->stats.merged_pages,
					   tg >= 0 ? gr_gtt_group_len(t, (uint64_t)tg) : 0,
					   __ATOMIC_RELAXED);
			j = k + 1;
			if (tg >= 0)
				gi += gr_gtt_group_len(t, gi);
			continue;
		}
		/* an untouched group keeps its pages and entries */
		for (uint64_t n = gr_gtt_group_len(t, gi), e = 0; e < n && !ret; e++) {
			struct gr_gent x = t->e[gi + e];

			x.flags &= ~(uint32_t)GS_GRAPH_GTT_DIRTY;
			ret = gr_gtt_push(&m->ngtt, &x);
		}
		gi += gr_gtt_group_len(t, gi);
	}
	free(pv);
	return ret;
}

static int write_gtt(struct gs_graph *g, uint64_t obj, const struct gr_gtt *t)
{
	size_t chunk = 4096;
	struct gs_graph_gtt_ent *buf = malloc(chunk * sizeof(*buf));
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->n && !ret; i += chunk) {
		uint64_t k = t->n - i < chunk ? t->n - i : chunk;

		for (uint64_t j = 0; j < k; j++)
			gr_gtt_to_disk(&t->e[i + j], &buf[j]);
		ret = gr_store_write_full(g->st, obj, buf, k * sizeof(*buf), i * sizeof(*buf));
	}
	free(buf);
	return ret ? ret : g->st->ops->sync(g->st, obj);
}

static int write_vdel(struct gs_graph *g, uint64_t obj)
{
	uint64_t *ids = malloc((g->vdel.n + 1) * sizeof(*ids)), n = 0;
	int ret;

	if (!ids)
		return -ENOMEM;
	for (uint64_t i = 0; g->vdel.keys && i <= g->vdel.mask; i++)
		if (g->vdel.keys[i] != GS_GRAPH_NONE)
			ids[n++] = g->vdel.keys[i];
	qsort(ids, n, sizeof(*ids), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		ids[i] = htole64(ids[i]);
	ret = n ? gr_store_write_full(g->st, obj, ids, n * sizeof(*ids), 0) : 0;
	free(ids);
	return ret ? ret : g->st->ops->sync(g->st, obj);
}

static uint64_t redo_desc_bytes(uint32_t ps, uint64_t nimg)
{
	uint64_t b = sizeof(struct gs_graph_redo_hdr) + nimg * 8;

	return (b + ps - 1) / ps * ps;
}

static int write_redo(struct gs_graph *g, struct img *imgs, size_t nimg, uint64_t seq,
		      uint64_t *len)
{
	uint32_t ps = g->gm.page_size;
	uint64_t hb = redo_desc_bytes(ps, nimg), obj = le64toh(g->root.redo_obj);
	uint8_t *head = calloc(1, hb);
	struct gs_graph_redo_hdr *h = (void *)head;
	uint64_t *desc = (void *)(h + 1);
	uint32_t crc;
	int ret;

	if (!head)
		return -ENOMEM;
	for (size_t i = 0; i < nimg; i++)
		desc[i] = htole64(imgs[i].page | (uint64_t)imgs[i].d << 63);
	crc = gs_crc32c(0, desc, nimg * 8);
	for (size_t i = 0; i < nimg; i++)
		crc = gs_crc32c(crc, imgs[i].data, ps);
	h->magic = htole32(GS_GRAPH_REDO_MAGIC);
	h->page_size = htole32(ps);
	h->seq = htole64(seq);
	h->nimg = htole64(nimg);
	h->crc = htole32(crc);
	ret = gr_store_write_full(g->st, obj, head, hb, 0);
	for (size_t i = 0; i < nimg && !ret; i++)
		ret = gr_store_write_full(g->st, obj, imgs[i].data, ps, hb + i * ps);
	free(head);
	if (!ret)
		ret = g->st->ops->sync(g->st, obj);
	*len = hb + nimg * ps;
	return ret;
}

static int apply_imgs(struct gs_graph *g, struct img *imgs, size_t nimg)
{
	uint32_t ps = g->gm.page_size;
	int ret = 0;

	for (size_t i = 0; i < nimg && !ret; i++)
		ret = gr_store_write_full(g->st, g->dir[imgs[i].d].pages_obj, imgs[i].data, ps,
					  imgs[i].page * ps);
	for (unsigned d = 0; d < g->ndirs && !ret; d++)
		ret = g->st->ops->sync(g->st, g->dir[d].pages_obj);
	return ret;
}

/* R2: the merge is complete; the delta and redo logs are empty. */
static int commit_done(struct gs_graph *g)
{
	g->root.redo_len = 0;
	g->root.delta_len = 0;
	g->root.delta_gen = htole64(le64toh(g->root.delta_gen) + 1);
	return gr_root_commit(g);
}

int gr_merge_locked(struct gs_graph *g)
{
	struct gs_graph_root saved;
	struct mctx m[2];
	bool any = false, vchg;
	size_t nimg = 0;
	struct img *all = NULL;
	uint64_t redo_len = 0;
	int ret;

	if (g->eng != &gr_engine_pages)
		return -EOPNOTSUPP;
	if (g->oflags & GS_GRAPH_RDONLY)
		return -EROFS;
	ret = gr_sync_locked(g);
	if (ret)
		return ret;
	for (unsigned d = 0; d < g->ndirs; d++)
		any |= g->dir[d].npend != 0;
	vchg = g->vdel.n != le64toh(g->root.nvdel) || g->root.delta_len;
	if (!any && !vchg)
		return 0;

	memset(m, 0, sizeof(m));
	for (unsigned d = 0; d < g->ndirs; d++) {
		m[d].g = g;
		m[d].d = d;
		if (g->dir[d].vmap) {
			/* the filter grows with nv; ids it did not cover had no list */
			m[d].vmap = calloc((g->nv + 7) / 8 + 1, 1);
			if (!m[d].vmap) {
				ret = -ENOMEM;
				goto free_m;
			}
			memcpy(m[d].vmap, g->dir[d].vmap, (g->dir[d].vmap_bits + 7) / 8);
		}
		ret = gr_scratch_init(&m[d].sc, g->gm.page_size);
		if (!ret)
			ret = merge_dir(&m[d]);
		if (ret)
			goto free_m;
		nimg += m[d].nimg;
	}
	all = malloc((nimg + 1) * sizeof(*all));
	if (!all) {
		ret = -ENOMEM;
		goto free_m;
	}
	nimg = 0;
	for (unsigned d = 0; d < g->ndirs; d++) {
		memcpy(all + nimg, m[d].imgs, m[d].nimg * sizeof(*all));
		nimg += m[d].nimg;
	}

	gs_info("graph %" PRIu64 ": merge %" PRIu64 ": %zu page images", g->ino,
		le64toh(g->root.merges) + 1, nimg);
	/* 1: new GTTs, removed list and images where the old graph does not look */
	for (unsigned d = 0; d < g->ndirs && !ret; d++) {
		ret = write_gtt(g, g->dir[d].gtt_alt, &m[d].ngtt);
		if (!ret && m[d].vmap && g->nv)
			ret = gr_store_write_full(g->st, g->dir[d].vmap_alt, m[d].vmap,
						  (g->nv + 7) / 8, 0);
		if (!ret && m[d].vmap)
			ret = g->st->ops->sync(g->st, g->dir[d].vmap_alt);
	}
	if (!ret && vchg)
		ret = write_vdel(g, le64toh(g->root.vdel_alt));
	if (!ret)
		ret = write_redo(g, all, nimg, le64toh(g->root.merges) + 1, &redo_len);
	if (ret)
		goto free_m;

	/* 2: R1 */
	saved = g->root;
	for (unsigned d = 0; d < g->ndirs; d++) {
		struct gs_graph_dir_root *r = &g->root.dir[d];
		uint64_t cur = r->gtt_obj;

		r->gtt_obj = r->gtt_alt;
		r->gtt_alt = cur;
		if (m[d].vmap) {
			cur = r->vmap_obj;
			r->vmap_obj = r->vmap_alt;
			r->vmap_alt = cur;
			r->vmap_bits = htole64(g->nv);
		}
		r->ngtt = htole64(m[d].ngtt.n);
		r->npages = htole64(m[d].npages);
	}
	if (vchg) {
		uint64_t cur = g->root.vdel_obj;

		g->root.vdel_obj = g->root.vdel_alt;
		g->root.vdel_alt = cur;
		g->root.nvdel = htole64(g->vdel.n);
	}
	g->root.redo_len = htole64(redo_len);
	g->root.merges = htole64(le64toh(g->root.merges) + 1);
	ret = gr_root_commit(g);
	if (ret) {
		g->root = saved;
		goto free_m;
	}
	gs_info("graph %" PRIu64 ": merge %" PRIu64 " committed", g->ino, le64toh(g->root.merges));
	/* from here the disk says "new graph": in memory it must be too */
	for (unsigned d = 0; d < g->ndirs; d++) {
		struct gr_dir *dr = &g->dir[d];

		gr_gtt_free(&dr->gtt);
		dr->gtt = m[d].ngtt;
		memset(&m[d].ngtt, 0, sizeof(m[d].ngtt));
		dr->gtt_obj = le64toh(g->root.dir[d].gtt_obj);
		dr->gtt_alt = le64toh(g->root.dir[d].gtt_alt);
		dr->npages = m[d].npages;
		if (m[d].vmap) {
			free(dr->vmap);
			dr->vmap = m[d].vmap;
			m[d].vmap = NULL;
			dr->vmap_bits = g->nv;
			dr->vmap_obj = le64toh(g->root.dir[d].vmap_obj);
			dr->vmap_alt = le64toh(g->root.dir[d].vmap_alt);
		}
	}
	gr_pend_clear(g);

	/* 3, 4 */
	ret = apply_imgs(g, all, nimg);
	if (!ret)
		ret = commit_done(g);
	if (ret) {
		gs_err("graph %" PRIu64 ": merge failed after its commit point (%d); reopen "
		       "to finish it", g->ino, ret);
		g->broken = ret;
	}
	__atomic_add_fetch(&g->stats.merges, 1, __ATOMIC_RELAXED);
free_m:
	for (unsigned d = 0; d < 2; d++) {
		for (size_t i = 0; i < m[d].nimg; i++)
			free(m[d].imgs[i].data);
		free(m[d].imgs);
		gr_gtt_free(&m[d].ngtt);
		gr_scratch_free(&m[d].sc);
		gr_list_free(&m[d].old);
		gr_list_free(&m[d].cur);
		free(m[d].overts);
		free(m[d].ooff);
		free(m[d].reuse);
		free(m[d].vmap);
	}
	free(all);
	if (ret && !g->broken) {
		/* the free list may hold the aborted merge's choices: rebuild it */
		gr_free_pages_init(g);
	}
	return ret;
}

int gs_graph_merge(struct gs_graph *g)
{
	int ret;

	pthread_rwlock_wrlock(&g->lock);
	ret = g->broken ? g->broken : gr_merge_locked(g);
	pthread_rwlock_unlock(&g->lock);
	return ret;
}

int gr_redo_replay(struct gs_graph *g)
{
	uint32_t ps = g->gm.page_size;
	uint64_t obj = le64toh(g->root.redo_obj), len = le64toh(g->root.redo_len), hb, nimg;
	struct gs_graph_redo_hdr h;
	uint8_t *buf = NULL;
	uint64_t *desc;
	uint32_t crc;
	int ret;

	ret = gr_store_read_full(g->st, obj, &h, sizeof(h), 0);
	if (ret)
		return ret;
	nimg = le64toh(h.nimg);
	hb = redo_desc_bytes(ps, nimg);
	if (le32toh(h.magic) != GS_GRAPH_REDO_MAGIC || le32toh(h.page_size) != ps ||
	    le64toh(h.seq) != le64toh(g->root.merges) || hb + nimg * ps != len)
		goto corrupt;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ret = gr_store_read_full(g->st, obj, buf, len, 0);
	if (ret)
		goto free_buf;
	desc = (uint64_t *)(buf + sizeof(h));
	crc = gs_crc32c(0, desc, nimg * 8);
	crc = gs_crc32c(crc, buf + hb, nimg * ps);
	if (crc != le32toh(h.crc))
		goto corrupt;
	for (uint64_t i = 0; i < nimg && !ret; i++) {
		uint64_t x = le64toh(desc[i]);
		unsigned d = (unsigned)(x >> 63);

		if (d >= g->ndirs) {
			free(buf);
			goto corrupt;
		}
		ret = gr_store_write_full(g->st, g->dir[d].pages_obj, buf + hb + i * ps, ps,
					  (x & GS_GRAPH_GTT_PAGE_MASK) * ps);
	}
	for (unsigned d = 0; d < g->ndirs && !ret; d++)
		ret = g->st->ops->sync(g->st, g->dir[d].pages_obj);
	if (!ret)
		ret = commit_done(g);
	if (!ret)
		gs_info("graph %" PRIu64 ": replayed the redo log of merge %" PRIu64 " (%" PRIu64
			" pages)", g->ino, le64toh(g->root.merges), nimg);
free_buf:
	free(buf);
	return ret;
corrupt:
	gs_err("graph %" PRIu64 ": the redo log of merge %" PRIu64 " is corrupt", g->ino,
	       le64toh(g->root.merges));
	return -EIO;
}

int gr_free_pages_init(struct gs_graph *g)
{
	for (unsigned d = 0; d < g->ndirs; d++) {
		uint64_t np = g->dir[d].npages;
		uint8_t *used = calloc(np / 8 + 1, 1);
		int ret = 0;

		if (!used)
			return -ENOMEM;
		for (uint64_t i = 0; i < g->dir[d].gtt.n; i++) {
			uint64_t p = g->dir[d].gtt.e[i].page;

			used[p / 8] |= (uint8_t)(1u << (p % 8));
		}
		g->nfree[d] = 0;
		for (uint64_t p = np; p-- > 0 && !ret;)
			if (!(used[p / 8] & (1u << (p % 8))))
				ret = free_push(g, d, p);
		free(used);
		if (ret)
			return ret;
	}
	return 0;
}
