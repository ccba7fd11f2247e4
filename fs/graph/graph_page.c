// SPDX-License-Identifier: MIT
/*
 * Adjacency pages: lists packed from the page start, <vertex, offset>
 * tuples growing down from the footer, an end marker tuple, a count.
 *
 * A page answers a query for any vertex in it on its own: find the tuple
 * by binary search, the list runs from its offset to the next tuple's.
 * Vertices whose list does not fit an empty page are "large": their lists
 * fill whole pages of their own (one tuple each, GS_GRAPH_PF_LARGE), and
 * the GTT has one entry per chunk.  Lists are fixed-width ids (+ weights),
 * or, in graphs with GS_GRAPH_F_VARINT, a count and delta-coded varint ids:
 * sorted neighbour ids of an R-MAT graph take about half the bytes then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

/* ---- lists ---- */

int gr_list_reserve(struct gr_list *l, size_t n)
{
	uint64_t *ids;
	float *w;
	size_t cap;

	if (n <= l->cap)
		return 0;
	cap = l->cap ? l->cap : 64;
	while (cap < n)
		cap *= 2;
	ids = realloc(l->ids, cap * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	l->ids = ids;
	w = realloc(l->w, cap * sizeof(*w));
	if (!w)
		return -ENOMEM;
	l->w = w;
	l->cap = cap;
	return 0;
}

int gr_list_push(struct gr_list *l, uint64_t id, float w)
{
	if (l->n == l->cap && gr_list_reserve(l, l->n + 1))
		return -ENOMEM;
	l->ids[l->n] = id;
	l->w[l->n] = w;
	l->n++;
	return 0;
}

void gr_list_free(struct gr_list *l)
{
	free(l->ids);
	free(l->w);
	memset(l, 0, sizeof(*l));
}

/* ---- reading pages ---- */

void gr_geom_init(struct gr_geom *gm, uint32_t page_size, unsigned idw, bool weighted,
		  bool varint)
{
	gm->page_size = page_size;
	gm->idw = idw;
	gm->weighted = weighted;
	gm->varint = varint;
	gm->ent = idw + (weighted ? 4 : 0);
	gm->tup = idw + 4;
}

/* ---- varints (unsigned LEB128) ---- */

static unsigned uv_len(uint64_t x)
{
	unsigned n = 1;

	while (x >= 0x80) {
		x >>= 7;
		n++;
	}
	return n;
}

static uint8_t *uv_put(uint8_t *p, uint64_t x)
{
	while (x >= 0x80) {
		*p++ = (uint8_t)(x | 0x80);
		x >>= 7;
	}
	*p++ = (uint8_t)x;
	return p;
}

/* One varint from [*p, end); false if it runs past @end or past 64 bits
 * (the decoder the GPU kernels use too, gstore_graph_dev.h). */
static bool uv_get(const uint8_t **p, const uint8_t *end, uint64_t *x)
{
	return gs_gp_uv(p, end, x);
}

static struct gs_graph_page_foot *page_foot(const struct gr_geom *gm, const void *page)
{
	return (struct gs_graph_page_foot *)((char *)page + gm->page_size - GR_FOOT);
}

static uint32_t tuple_off(const struct gr_geom *gm, const void *page, unsigned i)
{
	return gr_ld32(gr_page_tuple(gm, page, i) + gm->idw);
}

int gr_page_check(const struct gr_geom *gm, const void *page)
{
	const struct gs_graph_page_foot *f = page_foot(gm, page);
	uint32_t count = le16toh(f->count), prev = 0, room;

	if (le32toh(f->magic) != GS_GRAPH_PAGE_MAGIC)
		return -EIO;
	if (gs_crc32c(0, page, gm->page_size - 4) != le32toh(f->crc))
		return -EIO;
	if ((uint64_t)(count + 1) * gm->tup + GR_FOOT > gm->page_size)
		return -EIO;
	room = gm->page_size - GR_FOOT - (count + 1) * gm->tup;
	/* offsets ascend and stay below the trailer: reads of lists are safe
	 * (a coded list is checked again as it is decoded) */
	for (unsigned i = 0; i <= count; i++) {
		uint32_t off = tuple_off(gm, page, i);

		if (off < prev || off > room || (!gm->varint && (off - prev) % gm->ent))
			return -EIO;
		prev = off;
	}
	return 0;
}

int gr_page_find(const struct gr_geom *gm, const void *page, uint64_t v)
{
	struct gs_gp_geom g;

	/* the binary search a GPU kernel does too (gstore_graph_dev.h) */
	gs_gp_init(&g, gm->page_size, gm->idw,
		   (gm->weighted ? GS_GRAPH_F_WEIGHTED : 0) | (gm->varint ? GS_GRAPH_F_VARINT : 0));
	return gs_gp_find(&g, page, v);
}

int64_t gr_page_degree(const struct gr_geom *gm, const void *page, unsigned i)
{
	uint32_t a = tuple_off(gm, page, i), b = tuple_off(gm, page, i + 1);
	const uint8_t *p = (const uint8_t *)page + a;
	uint64_t n;

	if (!gm->varint)
		return (b - a) / gm->ent;
	if (a == b)
		return 0;
	/* every entry takes at least one byte */
	if (!uv_get(&p, (const uint8_t *)page + b, &n) || n > b - a)
		return -EIO;
	return (int64_t)n;
}

static int append_varint(const struct gr_geom *gm, const uint8_t *p, const uint8_t *end,
			 struct gr_list *l)
{
	size_t n0 = l->n;
	uint64_t n, x, id = 0;

	if (p == end)
		return 0;
	if (!uv_get(&p, end, &n) || n > (uint64_t)(end - p))
		return -EIO;
	if (gr_list_reserve(l, n0 + n))
		return -ENOMEM;
	for (uint64_t k = 0; k < n; k++) {
		if (!uv_get(&p, end, &x) || (k && id + x < id))
			return -EIO;
		id = k ? id + x : x;
		l->ids[n0 + k] = id;
	}
	if ((uint64_t)(end - p) != (gm->weighted ? 4 * n : 0))
		return -EIO;
	for (uint64_t k = 0; k < n; k++)
		l->w[n0 + k] = gm->weighted ? gr_u2f(gr_ld32(p + 4 * k)) : 1.0f;
	l->n = n0 + n;
	return 0;
}

int gr_page_append(const struct gr_geom *gm, const void *page, unsigned i, struct gr_list *l)
{
	uint32_t a = tuple_off(gm, page, i), b = tuple_off(gm, page, i + 1);
	const uint8_t *p = (const uint8_t *)page + a;
	uint64_t deg = (b - a) / gm->ent;
	size_t n0 = l->n;

	if (gm->varint)
		return append_varint(gm, p, (const uint8_t *)page + b, l);
	if (gr_list_reserve(l, n0 + deg))
		return -ENOMEM;
	if (gm->idw == 4)
		for (uint64_t k = 0; k < deg; k++)
			l->ids[n0 + k] = gr_ld32(p + 4 * k);
	else
		for (uint64_t k = 0; k < deg; k++)
			l->ids[n0 + k] = gr_ld64(p + 8 * k);
	if (gm->weighted) {
		const uint8_t *wp = p + deg * gm->idw;

		for (uint64_t k = 0; k < deg; k++)
			l->w[n0 + k] = gr_u2f(gr_ld32(wp + 4 * k));
	} else {
		for (uint64_t k = 0; k < deg; k++)
			l->w[n0 + k] = 1.0f;
	}
	l->n = n0 + deg;
	return 0;
}

/* ---- packing ---- */

int gr_pack_init(struct gr_packer *pk, const struct gr_geom *gm, uint32_t slack_pct,
		 uint32_t seq, gr_page_sink sink, void *arg)
{
	memset(pk, 0, sizeof(*pk));
	pk->gm = *gm;
	if (slack_pct > 90)
		slack_pct = 90;
	pk->limit = gm->page_size - (uint32_t)((uint64_t)gm->page_size * slack_pct / 100);
	pk->seq = seq;
	pk->sink = sink;
	pk->arg = arg;
	pk->page = gr_page_alloc(gm->page_size);
	if (!pk->page)
		return -ENOMEM;
	memset(pk->page, 0, gm->page_size);
	return 0;
}

void gr_pack_free(struct gr_packer *pk)
{
	free(pk->page);
	pk->page = NULL;
}

static void put_tuple(struct gr_packer *pk, unsigned i, uint64_t v, uint32_t off)
{
	uint8_t *t = (uint8_t *)gr_page_tuple(&pk->gm, pk->page, i);

	gr_stid(t, pk->gm.idw, v);
	gr_st32(t + pk->gm.idw, off);
}

/* Bytes the list ids[0..n) takes in a page. */
static uint64_t list_bytes(const struct gr_geom *gm, const uint64_t *ids, uint64_t n)
{
	uint64_t b;

	if (!gm->varint)
		return n * gm->ent;
	b = uv_len(n) + (gm->weighted ? 4 * n : 0);
	for (uint64_t k = 0; k < n; k++)
		b += uv_len(k ? ids[k] - ids[k - 1] : ids[0]);
	return b;
}

static void put_list(struct gr_packer *pk, const uint64_t *ids, const float *w, uint64_t n)
{
	uint8_t *p = pk->page + pk->used;
	unsigned idw = pk->gm.idw;

	if (pk->gm.varint) {
		p = uv_put(p, n);
		for (uint64_t k = 0; k < n; k++)
			p = uv_put(p, k ? ids[k] - ids[k - 1] : ids[0]);
	} else {
		for (uint64_t k = 0; k < n; k++)
			gr_stid(p + k * idw, idw, ids[k]);
		p += n * idw;
	}
	if (pk->gm.weighted)
		for (uint64_t k = 0; k < n; k++)
			gr_st32(p + 4 * k, gr_f2u(w ? w[k] : 1.0f));
	pk->used = (uint32_t)(p + (pk->gm.weighted ? 4 * n : 0) - pk->page);
}

/* Close the current page: end marker, footer, crc; hand it to the sink. */
static int emit(struct gr_packer *pk, uint32_t pflags, uint32_t gflags)
{
	struct gs_graph_page_foot *f = page_foot(&pk->gm, pk->page);
	int ret;

	put_tuple(pk, pk->count, GS_GRAPH_NONE, pk->used);
	f->magic = htole32(GS_GRAPH_PAGE_MAGIC);
	f->count = htole16((uint16_t)pk->count);
	f->flags = htole16((uint16_t)pflags);
	f->seq = htole32(pk->seq);
	f->crc = htole32(gs_crc32c(0, pk->page, pk->gm.page_size - 4));
	ret = pk->sink(pk->arg, pk->page, pk->key, pk->last, gflags | GS_GRAPH_GTT_VALID);
	memset(pk->page, 0, pk->gm.page_size);
	pk->used = 0;
	pk->count = 0;
	pk->pages++;
	return ret;
}

/* How many entries from ids[k..deg) one page of a large vertex holds. */
static uint64_t chunk_len(const struct gr_geom *gm, const uint64_t *ids, uint64_t k,
			  uint64_t deg)
{
	uint32_t room = gr_large_room(gm);
	uint64_t n = 0, used;

	if (!gm->varint)
		return deg - k < room / gm->ent ? deg - k : room / gm->ent;
	/* the count's varint is at most as long as that of the room in bytes */
	used = uv_len(room);
	while (k + n < deg) {
		uint64_t c = uv_len(n ? ids[k + n] - ids[k + n - 1] : ids[k]) +
			     (gm->weighted ? 4 : 0);

		if (used + c > room)
			break;
		used += c;
		n++;
	}
	return n;
}

/* One page of large vertex @v: the chunk ids[0..n). */
static int large_chunk(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		       uint64_t n)
{
	int ret;

	pk->key = pk->last = v;
	put_tuple(pk, 0, v, 0);
	pk->count = 1;
	put_list(pk, ids, w, n);
	ret = emit(pk, GS_GRAPH_PF_LARGE, pk->lflags);
	pk->lflags |= GS_GRAPH_GTT_EXT;
	return ret;
}

/* Start large vertex @v on pages of its own (the shared page goes first). */
static int large_open(struct gr_packer *pk, uint64_t v)
{
	int ret;

	if (pk->lopen)
		return pk->lv == v ? 0 : -EINVAL;
	if (pk->count) {
		ret = emit(pk, 0, 0);
		if (ret)
			return ret;
	}
	pk->lopen = true;
	pk->lv = v;
	pk->lflags = GS_GRAPH_GTT_LARGE;
	return 0;
}

static int pack_large(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		      uint64_t deg)
{
	int ret = large_open(pk, v);

	for (uint64_t k = 0, n; k < deg && !ret; k += n) {
		n = chunk_len(&pk->gm, ids, k, deg);
		ret = large_chunk(pk, v, ids + k, w ? w + k : NULL, n);
	}
	pk->lopen = false;
	return ret;
}

int gr_pack_part(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		 uint64_t n, uint64_t *took)
{
	uint64_t k = 0, c;
	int ret;

	*took = 0;
	for (uint64_t i = 1; pk->gm.varint && i < n; i++)
		if (ids[i] < ids[i - 1])
			return -EINVAL;
	ret = large_open(pk, v);
	/* whole pages only: a chunk that would take everything may not be full */
	while (!ret && k < n && (c = chunk_len(&pk->gm, ids, k, n)) < n - k) {
		ret = large_chunk(pk, v, ids + k, w ? w + k : NULL, c);
		k += c;
	}
	*took = k;
	return ret;
}

/* Vertices must come in ascending order, each list ascending (coded lists
 * store gaps); empty lists are not stored. */
int gr_pack_vertex(struct gr_packer *pk, uint64_t v, const uint64_t *ids, const float *w,
		   uint64_t deg)
{
	const struct gr_geom *gm = &pk->gm;
	uint64_t need, bytes;
	int ret;

	if (!deg && !pk->lopen)
		return 0;
	if (gm->varint)
		for (uint64_t k = 1; k < deg; k++)
			if (ids[k] < ids[k - 1])
				return -EINVAL;
	if (pk->lopen)
		return pk->lv == v ? pack_large(pk, v, ids, w, deg) : -EINVAL;
	bytes = list_bytes(gm, ids, deg);
	if (bytes > gr_large_room(gm))
		return pack_large(pk, v, ids, w, deg);
	/* data + this tuple + the tuples so far + end marker + footer */
	need = pk->used + bytes + (uint64_t)(pk->count + 2) * gm->tup + GR_FOOT;
	if (pk->count && (need > pk->limit || pk->count >= 0xfffe)) {
		ret = emit(pk, 0, 0);
		if (ret)
			return ret;
	}
	if (!pk->count)
		pk->key = v;
	pk->last = v;
	put_tuple(pk, pk->count, v, pk->used);
	pk->count++;
	put_list(pk, ids, w, deg);
	return 0;
}

int gr_pack_finish(struct gr_packer *pk)
{
	return pk->count ? emit(pk, 0, 0) : 0;
}
