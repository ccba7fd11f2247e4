// SPDX-License-Identifier: MIT
/*
 * Vertex ids and vertex indices.  Inside a graph, vertices are indices
 * 0 .. nv-1 (pages, GTT, delta, vdel, the apps' arrays).  A graph whose
 * file had dense ids uses the id as the index.  One whose ids are sparse
 * (GS_GRAPH_F_IDMAP) keeps the map in its ids object: the imported ids in
 * ascending order (so a list sorted by index is sorted by id, and index
 * order is id order), then the ids of vertices added by updates.
 *
 * Memory: the first id of each page of ids (8 bytes per page_size / 8
 * vertices) and the added ids (with a hash of them); the sorted ids
 * themselves are read a page at a time through the store (the fs cache),
 * into the caller's gr_idcache: a one-page memo for queries, a larger
 * direct-mapped set for an import that translates every edge.
 */
#include <errno.h>
#include <stdlib.h>

#include "graph_internal.h"

int gr_idcache_init(struct gr_idcache *c, uint64_t n, uint32_t page_size)
{
	memset(c, 0, sizeof(*c));
	c->n = n ? n : 1;
	c->ps = page_size;
	c->tag = calloc(c->n, sizeof(*c->tag));
	c->pages = malloc(c->n * page_size);
	if (!c->tag || !c->pages) {
		gr_idcache_free(c);
		return -ENOMEM;
	}
	return 0;
}

void gr_idcache_free(struct gr_idcache *c)
{
	free(c->tag);
	free(c->pages);
	memset(c, 0, sizeof(*c));
}

/* ---- the map ---- */

void gr_ids_free(struct gr_ids *m)
{
	free((void *)m->all);
	free(m->first);
	free(m->tail);
	gr_map_free(&m->tmap);
	memset(m, 0, sizeof(*m));
}

static int tail_push(struct gr_ids *m, uint64_t id)
{
	bool added;

	if (m->ntail == m->tailcap) {
		uint64_t c = m->tailcap ? m->tailcap * 2 : 64;
		uint64_t *t = realloc(m->tail, c * sizeof(*t));

		if (!t)
			return -ENOMEM;
		m->tail = t;
		m->tailcap = c;
	}
	if (m->ntail >= UINT32_MAX || !gr_map_put(&m->tmap, id, (uint32_t)m->ntail, &added))
		return -ENOMEM;
	m->tail[m->ntail++] = id;
	return 0;
}

int gr_ids_open(struct gr_ids *m, struct gr_store *st, const struct gs_graph_root *r,
		uint64_t nv)
{
	uint64_t n = le64toh(r->nids_sorted), *buf = NULL;
	int ret = 0;

	memset(m, 0, sizeof(*m));
	if (!(le32toh(r->flags) & GS_GRAPH_F_IDMAP))
		return 0;
	m->on = true;
	m->st = st;
	m->obj = le64toh(r->ids_obj);
	m->idx_obj = le64toh(r->ids_idx_obj);
	m->nsorted = n;
	m->per = st->page_size / 8;
	m->npages = (n + m->per - 1) / m->per;
	if (n > nv || !m->obj || !m->idx_obj)
		return -EIO;
	m->first = malloc((m->npages ? m->npages : 1) * sizeof(*m->first));
	if (!m->first)
		return -ENOMEM;
	if (m->npages)
		ret = gr_store_read_full(st, m->idx_obj, m->first, m->npages * 8, 0);
	for (uint64_t p = 0; p < m->npages && !ret; p++) {
		m->first[p] = le64toh(m->first[p]);
		if (p && m->first[p] <= m->first[p - 1])
			ret = -EIO;
	}
	/* the ids of vertices added since the import, in index order */
	if (!ret && nv > n) {
		buf = malloc((nv - n) * sizeof(*buf));
		ret = buf ? gr_store_read_full(st, m->obj, buf, (nv - n) * 8, n * 8) : -ENOMEM;
		for (uint64_t k = 0; k < nv - n && !ret; k++)
			ret = tail_push(m, le64toh(buf[k]));
		free(buf);
	}
	m->tsynced = m->ntail;
	if (ret)
		gr_ids_free(m);
	return ret;
}

int gr_ids_from_array(struct gr_ids *m, uint64_t *ids, uint64_t n, uint64_t nsorted)
{
	int ret = 0;

	memset(m, 0, sizeof(*m));
	m->on = true;
	m->all = ids;
	m->nsorted = nsorted;
	m->per = 512;
	m->npages = (nsorted + m->per - 1) / m->per;
	m->first = malloc((m->npages ? m->npages : 1) * sizeof(*m->first));
	if (!m->first)
		ret = -ENOMEM;
	for (uint64_t p = 0; p < m->npages && !ret; p++) {
		m->first[p] = ids[p * m->per];
		if (p && m->first[p] <= m->first[p - 1])
			ret = -EIO;
	}
	for (uint64_t k = nsorted; k < n && !ret; k++)
		ret = tail_push(m, ids[k]);
	m->tsynced = m->ntail;
	if (ret)
		gr_ids_free(m);
	return ret;
}

/* Page @p of the sorted ids (its entries, @cnt of them), through @c. */
static const uint64_t *sorted_page(const struct gr_ids *m, struct gr_idcache *c, uint64_t p,
				   uint64_t *cnt, int *err)
{
	uint64_t slot = p % c->n, n = m->nsorted - p * m->per;
	uint64_t *pg = (uint64_t *)(c->pages + slot * c->ps);

	*cnt = n < m->per ? n : m->per;
	if (m->all)
		return m->all + p * m->per;
	if (c->tag[slot] != p + 1) {
		c->tag[slot] = 0;
		*err = gr_store_read_full(m->st, m->obj, pg, *cnt * 8, p * m->per * 8);
		if (*err)
			return NULL;
		for (uint64_t i = 0; i < *cnt; i++)
			pg[i] = le64toh(pg[i]);
		c->tag[slot] = p + 1;
	}
	return pg;
}

int gr_ids_index(const struct gr_ids *m, struct gr_idcache *c, uint64_t id, uint64_t *idx)
{
	uint64_t lo = 0, hi = m->npages, cnt;
	const uint64_t *pg;
	uint32_t *t;
	int err = 0;

	if (!m->on) {
		*idx = id;
		return 0;
	}
	/* the last page whose first id is <= id */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (m->first[mid] <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo) {
		pg = sorted_page(m, c, lo - 1, &cnt, &err);
		if (!pg)
			return err;
		for (uint64_t a = 0, b = cnt; a < b;) {
			uint64_t mid = a + (b - a) / 2;

			if (pg[mid] == id) {
				*idx = (lo - 1) * m->per + mid;
				return 0;
			}
			if (pg[mid] < id)
				a = mid + 1;
			else
				b = mid;
		}
	}
	t = m->tmap.n ? gr_map_get(&m->tmap, id) : NULL;
	if (!t)
		return -ENOENT;
	*idx = m->nsorted + *t;
	return 0;
}

int gr_ids_id(const struct gr_ids *m, struct gr_idcache *c, uint64_t idx, uint64_t *id)
{
	const uint64_t *pg;
	uint64_t cnt;
	int err = 0;

	if (!m->on) {
		*id = idx;
		return 0;
	}
	if (idx >= m->nsorted) {
		if (idx - m->nsorted >= m->ntail)
			return -ENOENT;
		*id = m->tail[idx - m->nsorted];
		return 0;
	}
	pg = sorted_page(m, c, idx / m->per, &cnt, &err);
	if (!pg)
		return err;
	*id = pg[idx % m->per];
	return 0;
}

struct idw {
	uint64_t id;
	float w;
};

static int cmp_idw(const void *a, const void *b)
{
	const struct idw *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int gr_ids_list(const struct gr_ids *m, struct gr_idcache *c, uint64_t *ids, float *w, size_t n)
{
	size_t first_added = n;
	struct idw *t;
	int ret;

	if (!m->on)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] >= m->nsorted && first_added == n)
			first_added = i;
		ret = gr_ids_id(m, c, ids[i], &ids[i]);
		if (ret)
			return ret;
	}
	if (first_added == n)
		return 0;	/* indices ascending, their ids too */
	/* vertices added by updates sit past the imported ones: sort by id */
	t = malloc(n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		t[i] = (struct idw){ ids[i], w ? w[i] : 0 };
	qsort(t, n, sizeof(*t), cmp_idw);
	for (size_t i = 0; i < n; i++) {
		ids[i] = t[i].id;
		if (w)
			w[i] = t[i].w;
	}
	free(t);
	return 0;
}

int gr_ids_add(struct gr_ids *m, uint64_t id)
{
	return tail_push(m, id);
}

void gr_ids_pop(struct gr_ids *m)
{
	if (m->ntail > m->tsynced)
		gr_map_del(&m->tmap, m->tail[--m->ntail]);
}

int gr_ids_sync(struct gr_ids *m)
{
	uint64_t n = m->ntail - m->tsynced, *buf;
	int ret;

	if (!m->on || !n)
		return 0;
	buf = malloc(n * sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++)
		buf[k] = htole64(m->tail[m->tsynced + k]);
	ret = gr_store_write_full(m->st, m->obj, buf, n * 8, (m->nsorted + m->tsynced) * 8);
	free(buf);
	if (!ret)
		ret = m->st->ops->sync(m->st, m->obj);
	if (!ret)
		m->tsynced = m->ntail;
	return ret;
}
