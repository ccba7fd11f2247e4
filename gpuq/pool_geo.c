// SPDX-License-Identifier: MIT
/* Pool geometry: the arithmetic of gpuq/pool.h, nothing else. */
#include <errno.h>
#include <stddef.h>

#include "pool.h"
#include "gstore_format.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static void area_set(struct gs_pool_area *a, uint32_t n, uint32_t su, uint64_t lstart,
		     uint64_t lbytes, uint64_t pbase, uint32_t copies)
{
	a->lstart = lstart;
	a->lbytes = lbytes;
	a->pbase = pbase;
	a->copies = copies;
	a->rows = div_up(lbytes / su * copies, n);
}

int gs_pool_layout_copies(uint32_t layout, uint32_t n, uint32_t *zc, uint32_t *dc)
{
	uint32_t two = n < 2 ? n : 2;

	switch (layout) {
	case GS_POOL_STRIPE:
		*dc = 1;
		*zc = two;
		return 0;
	case GS_POOL_MIRROR:
		*dc = *zc = n;
		return 0;
	case GS_POOL_STRIPE_MIRROR:
		*dc = *zc = two;
		return 0;
	}
	return -EINVAL;
}

int gs_pool_geo_load(struct gs_pool_geo *g, uint32_t n, uint32_t su, uint32_t zone_copies,
		     uint32_t copies, uint64_t zone_bytes, uint64_t data_bytes, uint64_t data_off)
{
	if (!n || n > GS_POOL_MAX_MEMBERS || su < 4096 || (su & (su - 1)) || !zone_copies ||
	    zone_copies > n || !copies || copies > n || zone_bytes % su || data_bytes % su ||
	    data_off % 4096 || zone_bytes > (1ull << 56) || data_bytes > (1ull << 56) ||
	    data_off > (1ull << 40))
		return -EINVAL;
	g->n = n;
	g->su = su;
	area_set(&g->zone, n, su, 0, zone_bytes, data_off, zone_copies);
	area_set(&g->data, n, su, zone_bytes, data_bytes, data_off + g->zone.rows * su, copies);
	g->capacity = zone_bytes + data_bytes;
	g->member_bytes = g->data.pbase + g->data.rows * su;
	return 0;
}

int gs_pool_geo_init(struct gs_pool_geo *g, uint32_t layout, uint32_t n, uint32_t su,
		     uint64_t zone_bytes, uint64_t data_off, uint64_t member_bytes)
{
	uint32_t zc, dc;
	uint64_t zrows, rows, chunks;
	int ret;

	if (!su || gs_pool_layout_copies(layout, n, &zc, &dc))
		return -EINVAL;
	zone_bytes = div_up(zone_bytes, su) * su;
	ret = gs_pool_geo_load(g, n, su, zc, dc, zone_bytes, 0, data_off);
	if (ret)
		return ret;
	zrows = g->zone.rows;
	if (member_bytes < data_off + (zrows + 1) * su)
		return -EINVAL;
	rows = (member_bytes - data_off) / su - zrows;
	chunks = rows * n / dc;
	return gs_pool_geo_load(g, n, su, zc, dc, zone_bytes, chunks * su, data_off);
}

static const struct gs_pool_area *area_of(const struct gs_pool_geo *g, uint64_t off)
{
	if (off < g->zone.lbytes)
		return &g->zone;
	if (off - g->zone.lbytes < g->data.lbytes)
		return &g->data;
	return NULL;
}

uint32_t gs_pool_copies(const struct gs_pool_geo *g, uint64_t off)
{
	const struct gs_pool_area *a = area_of(g, off);

	return a ? a->copies : 0;
}

uint32_t gs_pool_pref(const struct gs_pool_geo *g, uint64_t off)
{
	const struct gs_pool_area *a = area_of(g, off);
	uint64_t c = (off - a->lstart) / g->su;

	/* by row: chunk c's copies sit in row c * copies / n, one member apart */
	return (uint32_t)(c * a->copies / g->n % a->copies);
}

uint32_t gs_pool_seg_len(const struct gs_pool_geo *g, uint64_t off, uint64_t len)
{
	uint64_t left = g->su - off % g->su;

	return (uint32_t)(len < left ? len : left);
}

void gs_pool_locate(const struct gs_pool_geo *g, uint64_t off, uint32_t k, uint32_t *member,
		    uint64_t *phys)
{
	const struct gs_pool_area *a = area_of(g, off);
	uint64_t rel = off - a->lstart, c = rel / g->su;
	uint64_t slot = c * a->copies + k;

	*member = (uint32_t)(slot % g->n);
	*phys = a->pbase + slot / g->n * g->su + rel % g->su;
}

int gs_pool_reverse(const struct gs_pool_geo *g, uint32_t m, uint64_t phys, uint64_t *off)
{
	const struct gs_pool_area *a = NULL;
	uint64_t row, slot, c;

	if (phys >= g->zone.pbase && phys < g->zone.pbase + g->zone.rows * g->su)
		a = &g->zone;
	else if (phys >= g->data.pbase && phys < g->data.pbase + g->data.rows * g->su)
		a = &g->data;
	if (!a || m >= g->n)
		return -ENOENT;
	row = (phys - a->pbase) / g->su;
	slot = row * g->n + m;
	c = slot / a->copies;
	if (c >= a->lbytes / g->su)
		return -ENOENT;
	*off = a->lstart + c * g->su + (phys - a->pbase) % g->su;
	return 0;
}

int64_t gs_pool_add_occupant(const struct gs_pool_geo *old, const struct gs_pool_geo *new,
			     uint64_t c, uint32_t k)
{
	uint64_t off = c * new->su, phys, loff;
	uint32_t m;

	gs_pool_locate(new, off, k, &m, &phys);
	if (m >= old->n || gs_pool_reverse(old, m, phys, &loff))
		return -1;
	return (int64_t)(loff / old->su);
}

static int area_redundant(const struct gs_pool_geo *g, const struct gs_pool_area *a,
			  uint64_t failed)
{
	uint64_t c, chunks = a->lbytes / g->su;
	uint32_t k;

	/* the slot pattern repeats every n chunks */
	for (c = 0; c < chunks && c < g->n; c++) {
		int ok = 0;

		for (k = 0; k < a->copies && !ok; k++)
			ok = !(failed >> ((c * a->copies + k) % g->n) & 1);
		if (!ok)
			return 0;
	}
	return 1;
}

int gs_pool_redundant(const struct gs_pool_geo *g, uint64_t failed)
{
	return area_redundant(g, &g->zone, failed) && area_redundant(g, &g->data, failed);
}
