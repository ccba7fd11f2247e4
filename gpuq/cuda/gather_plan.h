/* SPDX-License-Identifier: MIT */
/*
 * The planning of gs_cuda_gather() (include/gstore_cuda_gather.h) as plain
 * __host__ __device__ C: rows to blocks, the sorted unique blocks' layout in
 * the region, runs of blocks merged into one request, the host tier's
 * chunks.  The kernels in gather.cu call these; tests/unit/gather runs them
 * on the CPU (CI has no GPU).
 */
#ifndef GS_GATHER_PLAN_H
#define GS_GATHER_PLAN_H

#include <stdint.h>

#include "gstore_cuda_cam.h"	/* gs_cam_dev_off(), GS_HD */

struct gs_gather_geom {
	uint64_t row_bytes;
	uint64_t base;		/* array byte of row 0 */
	uint64_t nrows;
	uint64_t nblocks;	/* the array's blocks; also the sentinel key */
	uint32_t block_shift;
	uint32_t maxb;		/* blocks one row touches at most */
	uint32_t key_bits;	/* sort key bits: every block id and the sentinel fit */
};

/*
 * Rows [0, nrows) at base + r * row_bytes within @nblocks blocks of
 * 1 << @block_shift bytes; nrows 0: as many as fit.  0, -EINVAL or -ERANGE
 * (a row past the array's end).
 */
GS_HD int gs_gather_geom_init(struct gs_gather_geom *g, uint64_t row_bytes, uint64_t base,
			      uint64_t nrows, uint32_t block_shift, uint64_t nblocks)
{
	uint64_t bs = 1ull << block_shift, end = nblocks << block_shift, fit;
	uint32_t bits = 0;

	if (!row_bytes || block_shift < 9 || block_shift > 30 || !nblocks || base >= end)
		return -GS_EINVAL;
	fit = (end - base) / row_bytes;
	if (!nrows)
		nrows = fit;
	if (!nrows || nrows > fit)
		return -GS_ERANGE;
	g->row_bytes = row_bytes;
	g->base = base;
	g->nrows = nrows;
	g->nblocks = nblocks;
	g->block_shift = block_shift;
	/* aligned rows of whole blocks touch exactly row_bytes / bs; any other
	 * row at most one block more than its bytes need */
	if (!(row_bytes & (bs - 1)) && !(base & (bs - 1)))
		g->maxb = (uint32_t)(row_bytes >> block_shift);
	else if (!(bs % row_bytes) && !(base % row_bytes))
		g->maxb = 1;	/* rows tile the blocks: none spans two */
	else
		g->maxb = (uint32_t)((row_bytes + bs - 1) >> block_shift) + 1;
	while (bits < 64 && (nblocks >> bits))
		bits++;		/* 2^bits > nblocks: the sentinel nblocks fits too */
	g->key_bits = bits;
	return 0;
}

GS_HD uint64_t gs_gather_row_off(const struct gs_gather_geom *g, uint64_t r)
{
	return g->base + r * g->row_bytes;
}

GS_HD uint64_t gs_gather_first_blk(const struct gs_gather_geom *g, uint64_t r)
{
	return gs_gather_row_off(g, r) >> g->block_shift;
}

GS_HD uint32_t gs_gather_row_nblk(const struct gs_gather_geom *g, uint64_t r)
{
	uint64_t off = gs_gather_row_off(g, r);

	return (uint32_t)(((off + g->row_bytes - 1) >> g->block_shift) - (off >> g->block_shift) + 1);
}

/*
 * The sort keys of row @r: keys[0 .. maxb), its blocks then the sentinel
 * (nblocks); all sentinels when @skip (the tier has it, or it is out of
 * range).
 */
GS_HD void gs_gather_row_keys(const struct gs_gather_geom *g, uint64_t r, int skip,
			      uint64_t *keys)
{
	uint32_t n = skip ? 0 : gs_gather_row_nblk(g, r), k;
	uint64_t b = skip ? 0 : gs_gather_first_blk(g, r);

	for (k = 0; k < g->maxb; k++)
		keys[k] = k < n ? b + k : g->nblocks;
}

/* Index of @key in the sorted @u[0, n) (n if absent: the caller's bug). */
GS_HD uint64_t gs_gather_find(const uint64_t *u, uint64_t n, uint64_t key)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;

		if (u[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && u[lo] == key ? lo : n;
}

/*
 * Region byte offset (from the piece's half) of row @r's first byte: the
 * unique blocks sit in sorted order, block u[i] at i * bs, so a row's
 * blocks b, b + 1, ... (all present, adjacent in u) are adjacent there too
 * and the row is one contiguous range.
 */
GS_HD uint64_t gs_gather_row_src(const struct gs_gather_geom *g, const uint64_t *u, uint64_t n,
				 uint64_t r)
{
	uint64_t off = gs_gather_row_off(g, r);
	uint64_t i = gs_gather_find(u, n, off >> g->block_shift);

	return (i << g->block_shift) + (off & ((1ull << g->block_shift) - 1));
}

/* Blocks b and b + 1 are one device run (no request may cross extents). */
GS_HD int gs_gather_dev_next(const struct gs_cam *c, uint64_t b)
{
	int64_t d0 = gs_cam_dev_off(c, b), d1 = gs_cam_dev_off(c, b + 1);

	return d0 >= 0 && d1 >= 0 && d1 == d0 + (1ll << c->block_shift);
}

/* Unique block @i is read from the device: a block, not in the GPU cache. */
GS_HD int gs_gather_want(const uint64_t *u, const uint32_t *hit, uint64_t i, uint64_t sentinel)
{
	return u[i] < sentinel && !(hit && hit[i]);
}

/*
 * The request starting at unique index @i, if any: 0 when u[i] continues
 * the run of u[i - 1] (its head reads it), else the blocks of the run that
 * starts here (consecutive ids, one device run, at most @maxrun, and never
 * across an index that is a multiple of @maxrun: every index decides alone,
 * without looking back further than one).  u[i] == sentinel, or a block the
 * GPU cache holds (@hit[i] != 0; @hit may be NULL): 0, and no run crosses it.
 */
GS_HD uint32_t gs_gather_run(const struct gs_cam *c, const uint64_t *u, const uint32_t *hit,
			     uint64_t n, uint64_t i, uint32_t maxrun, uint64_t sentinel)
{
	uint32_t len = 1;

	if (i >= n || !gs_gather_want(u, hit, i, sentinel))
		return 0;
	if (i % maxrun && gs_gather_want(u, hit, i - 1, sentinel) && u[i - 1] + 1 == u[i] &&
	    gs_gather_dev_next(c, u[i - 1]))
		return 0;
	while (i + len < n && (i + len) % maxrun && gs_gather_want(u, hit, i + len, sentinel) &&
	       u[i + len] == u[i + len - 1] + 1 && gs_gather_dev_next(c, u[i + len - 1]))
		len++;
	return len;
}

/*
 * The request of a run (gs_gather_run()): @nblk blocks at device byte @dev
 * (gs_cam_dev_off() of its first block: one device run) read into region
 * offset @buf_off through shard @sh, the issuer's (gs_cam_self(): its SM's
 * ring on a GPU; a gs_cuda's rings share one region, so the offset means the
 * same on every ring), with CAM ticket @t and sq ticket @sq reserved
 * beforehand (gs_cam_reserve(), gs_cam_sq_reserve(): a warp's at once);
 * @last: @sq is the highest of that reservation.  Returns the ticket to wait
 * for (gs_cam_ticket(): it names the shard).
 */
GS_HD uint64_t gs_gather_push(struct gs_cam *sh, uint64_t t, uint64_t sq, uint64_t dev,
			      uint32_t nblk, uint64_t buf_off, int last)
{
	struct gs_sqe e = GS_ZERO;

	e.op = GS_OP_READ;
	e.flags = GS_SQE_CQE | GS_SQE_BUF_OFF;
	e.len = nblk << sh->block_shift;
	e.off = dev;
	e.buf = buf_off;
	e.tag = t;
	gs_cam_push_at(sh, sq, &e, last);
	return gs_cam_ticket(sh, t, 1);
}

/* ---- the GPU cache: direct-mapped block lines, one cache per region half ---- */

/* The line block @b maps to among @nlines. */
GS_HD uint32_t gs_gather_cache_line(uint64_t b, uint32_t nlines)
{
	uint64_t x = b * 0x9e3779b97f4a7c15ull;

	return (uint32_t)((x ^ (x >> 31)) % nlines);
}

/*
 * The part of row bytes [off, off + len) in block @b: [*lo, *hi) as array
 * bytes; 0 when the row does not touch @b.
 */
GS_HD int gs_gather_seg(uint64_t off, uint64_t len, uint64_t b, uint32_t shift, uint64_t *lo,
			uint64_t *hi)
{
	uint64_t bl = b << shift, bh = (b + 1) << shift;

	*lo = off > bl ? off : bl;
	*hi = off + len < bh ? off + len : bh;
	return *lo < *hi;
}

/* ---- the host tier: the array's bytes [0, len) in chunks of 1 << shift ---- */
struct gs_gather_tier_geom {
	uint64_t len;		/* bytes held (a multiple of nothing in particular) */
	uint32_t chunk_shift;
	uint32_t nchunks;
};

/* The tier over @want bytes (at most the table's end @table_end). */
GS_HD int gs_gather_tier_init(struct gs_gather_tier_geom *t, uint64_t want, uint64_t table_end,
			      uint32_t chunk_shift)
{
	uint64_t n;

	if (chunk_shift < 12 || chunk_shift > 30)
		return -GS_EINVAL;
	t->len = want < table_end ? want : table_end;
	n = (t->len + (1ull << chunk_shift) - 1) >> chunk_shift;
	if (n > 0xffffffffull)
		return -GS_EINVAL;
	t->chunk_shift = chunk_shift;
	t->nchunks = (uint32_t)n;
	return 0;
}

/* Chunk @k's bytes in the tier (the last may be short). */
GS_HD uint64_t gs_gather_tier_chunk_len(const struct gs_gather_tier_geom *t, uint32_t k)
{
	uint64_t off = (uint64_t)k << t->chunk_shift, cl = 1ull << t->chunk_shift;

	return t->len - off < cl ? t->len - off : cl;
}

/*
 * Array bytes [off, off + len) are in the tier: inside it, and every chunk
 * they touch marked ready (the fill sets ready[k] after the chunk's data).
 */
GS_HD int gs_gather_tier_has(const struct gs_gather_tier_geom *t, const uint32_t *ready,
			     uint64_t off, uint64_t len)
{
	uint64_t k;

	if (!t->nchunks || off + len > t->len)
		return 0;
	for (k = off >> t->chunk_shift; k <= (off + len - 1) >> t->chunk_shift; k++)
		if (!*(const volatile uint32_t *)&ready[k])
			return 0;
	return 1;
}

#endif /* GS_GATHER_PLAN_H */
