// SPDX-License-Identifier: MIT
/*
 * The graph translation table: one entry per adjacency page, sorted by the
 * smallest vertex in the page, binary-searched.  A page group is one shared
 * page, or the pages of one large vertex (the head entry, then EXT entries
 * with the same key).  Also the small hash map the update log indexes by.
 */
#include <errno.h>
#include <stdlib.h>

#include "graph_internal.h"

int gr_gtt_push(struct gr_gtt *t, const struct gr_gent *e)
{
	if (t->n == t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 256;
		struct gr_gent *n = realloc(t->e, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->e = n;
		t->cap = cap;
	}
	t->e[t->n++] = *e;
	return 0;
}

void gr_gtt_free(struct gr_gtt *t)
{
	free(t->e);
	t->e = NULL;
	t->n = t->cap = 0;
}

uint64_t gr_gtt_lower(const struct gr_gtt *t, uint64_t v)
{
	uint64_t lo = 0, hi = t->n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (t->e[mid].key < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int64_t gr_gtt_locate(const struct gr_gtt *t, uint64_t v)
{
	uint64_t lb = gr_gtt_lower(t, v);
	const struct gr_gent *e;

	if (lb < t->n && t->e[lb].key == v)
		return (int64_t)lb;
	if (!lb)
		return -1;
	e = &t->e[lb - 1];
	/* a large vertex's pages hold nobody else; past ->last nothing is stored */
	if ((e->flags & GS_GRAPH_GTT_LARGE) || v > e->last)
		return -1;
	return (int64_t)(lb - 1);
}

uint64_t gr_gtt_group_len(const struct gr_gtt *t, uint64_t i)
{
	uint64_t n = 1;

	if (!(t->e[i].flags & GS_GRAPH_GTT_LARGE))
		return 1;
	while (i + n < t->n && (t->e[i + n].flags & GS_GRAPH_GTT_EXT))
		n++;
	return n;
}

/* The head of the group containing entry @i. */
static uint64_t group_head(const struct gr_gtt *t, uint64_t i)
{
	while (i && (t->e[i].flags & GS_GRAPH_GTT_EXT))
		i--;
	return i;
}

int64_t gr_gtt_target(const struct gr_gtt *t, uint64_t v, uint64_t *ins)
{
	uint64_t lb = gr_gtt_lower(t, v);

	if (lb < t->n && t->e[lb].key == v)
		return (int64_t)lb;
	if (lb && !(t->e[lb - 1].flags & GS_GRAPH_GTT_LARGE))
		return (int64_t)group_head(t, lb - 1);
	if (lb < t->n && !(t->e[lb].flags & GS_GRAPH_GTT_LARGE))
		return (int64_t)lb;
	*ins = lb;
	return -1;
}

void gr_gtt_to_disk(const struct gr_gent *e, struct gs_graph_gtt_ent *d)
{
	/* DIRTY is a property of the delta log, rebuilt at open */
	uint64_t fl = e->flags & ~(uint64_t)GS_GRAPH_GTT_DIRTY;

	d->key = htole64(e->key);
	d->last = htole64(e->last);
	d->page = htole64((e->page & GS_GRAPH_GTT_PAGE_MASK) | fl << GS_GRAPH_GTT_SHIFT);
}

void gr_gtt_from_disk(const struct gs_graph_gtt_ent *d, struct gr_gent *e)
{
	uint64_t p = le64toh(d->page);

	e->key = le64toh(d->key);
	e->last = le64toh(d->last);
	e->page = p & GS_GRAPH_GTT_PAGE_MASK;
	e->flags = (uint32_t)(p >> GS_GRAPH_GTT_SHIFT) & ~(uint32_t)GS_GRAPH_GTT_DIRTY;
	e->rsvd = 0;
}

/* ---- u64 -> u32 map, linear probing ---- */

static uint64_t hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	return k ^ (k >> 33);
}

uint32_t *gr_map_get(const struct gr_map *m, uint64_t k)
{
	if (!m->keys)
		return NULL;
	for (uint64_t i = hash64(k) & m->mask;; i = (i + 1) & m->mask) {
		if (m->keys[i] == k)
			return &m->vals[i];
		if (m->keys[i] == GS_GRAPH_NONE)
			return NULL;
	}
}

static int map_grow(struct gr_map *m)
{
	uint64_t slots = m->keys ? (m->mask + 1) * 2 : 64;
	uint64_t *keys = malloc(slots * sizeof(*keys));
	uint32_t *vals = malloc(slots * sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	memset(keys, 0xff, slots * sizeof(*keys));
	for (uint64_t i = 0; m->keys && i <= m->mask; i++) {
		uint64_t j;

		if (m->keys[i] == GS_GRAPH_NONE)
			continue;
		for (j = hash64(m->keys[i]) & (slots - 1); keys[j] != GS_GRAPH_NONE;
		     j = (j + 1) & (slots - 1))
			;
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->mask = slots - 1;
	return 0;
}

uint32_t *gr_map_put(struct gr_map *m, uint64_t k, uint32_t v0, bool *added)
{
	uint64_t i;

	*added = false;
	if ((!m->keys || (m->n + 1) * 4 > (m->mask + 1) * 3) && map_grow(m))
		return NULL;
	for (i = hash64(k) & m->mask; m->keys[i] != GS_GRAPH_NONE; i = (i + 1) & m->mask)
		if (m->keys[i] == k)
			return &m->vals[i];
	m->keys[i] = k;
	m->vals[i] = v0;
	m->n++;
	*added = true;
	return &m->vals[i];
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
int gr_map_del(struct gr_map *m, uint64_t k)
{
	uint64_t i, j;

	if (!m->keys)
		return -ENOENT;
	for (i = hash64(k) & m->mask; m->keys[i] != k; i = (i + 1) & m->mask)
		if (m->keys[i] == GS_GRAPH_NONE)
			return -ENOENT;
	for (j = (i + 1) & m->mask; m->keys[j] != GS_GRAPH_NONE; j = (j + 1) & m->mask) {
		uint64_t h = hash64(m->keys[j]) & m->mask;

		/* move j back to i unless its home lies cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = GS_GRAPH_NONE;
	m->n--;
	return 0;
}

void gr_map_clear(struct gr_map *m)
{
	if (m->keys)
		memset(m->keys, 0xff, (m->mask + 1) * sizeof(*m->keys));
	m->n = 0;
}

void gr_map_free(struct gr_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
