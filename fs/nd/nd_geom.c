// SPDX-License-Identifier: MIT
/*
 * N-D spaces: element types, building-block sizing (NDS equations 1-4),
 * layouts, and the parsing of shapes, coordinates and slices.  Pure code:
 * no I/O, every number checked for overflow.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gstore_q.h"
#include "nd_internal.h"

static const struct {
	const char *name;	/* canonical (bits) */
	char kind;		/* numpy kind */
	uint8_t size;
} dtypes[GS_ND_NR_DTYPES] = {
	[GS_ND_RAW] = { "raw", 'V', 0 },
	[GS_ND_I8] = { "i8", 'i', 1 },	[GS_ND_I16] = { "i16", 'i', 2 },
	[GS_ND_I32] = { "i32", 'i', 4 },	[GS_ND_I64] = { "i64", 'i', 8 },
	[GS_ND_U8] = { "u8", 'u', 1 },	[GS_ND_U16] = { "u16", 'u', 2 },
	[GS_ND_U32] = { "u32", 'u', 4 },	[GS_ND_U64] = { "u64", 'u', 8 },
	[GS_ND_F16] = { "f16", 'f', 2 },	[GS_ND_F32] = { "f32", 'f', 4 },
	[GS_ND_F64] = { "f64", 'f', 8 },
};

_Static_assert(GS_ND_NR_DTYPES == 12, "dtype table is complete");

uint32_t gs_nd_dtype_size(uint32_t dtype)
{
	return dtype < GS_ND_NR_DTYPES ? dtypes[dtype].size : 0;
}

const char *gs_nd_dtype_name(uint32_t dtype)
{
	return dtype < GS_ND_NR_DTYPES ? dtypes[dtype].name : "?";
}

static int dtype_by_kind(char kind, uint64_t size, uint32_t *dtype)
{
	for (uint32_t t = 1; t < GS_ND_NR_DTYPES; t++) {
		if (dtypes[t].kind == kind && dtypes[t].size == size) {
			*dtype = t;
			return 0;
		}
	}
	return -EINVAL;
}

static int raw_size(const char *s, uint32_t *dtype, uint32_t *esize)
{
	uint64_t v;

	if (nd_parse_u64(&s, GS_ND_ELEM_MAX, &v) || *s || v == 0)
		return -EINVAL;
	*dtype = GS_ND_RAW;
	*esize = v;
	return 0;
}

int gs_nd_parse_dtype(const char *s, uint32_t *dtype, uint32_t *esize)
{
	static const struct { const char *name; uint32_t t; } words[] = {
		{ "int8", GS_ND_I8 }, { "int16", GS_ND_I16 }, { "int32", GS_ND_I32 },
		{ "int64", GS_ND_I64 }, { "uint8", GS_ND_U8 }, { "uint16", GS_ND_U16 },
		{ "uint32", GS_ND_U32 }, { "uint64", GS_ND_U64 }, { "float16", GS_ND_F16 },
		{ "float32", GS_ND_F32 }, { "float64", GS_ND_F64 }, { "half", GS_ND_F16 },
		{ "float", GS_ND_F32 }, { "double", GS_ND_F64 },
	};
	bool explicit_order = false;
	uint64_t n;
	const char *p;

	if (!s || !*s)
		return -EINVAL;
	for (uint32_t t = 1; t < GS_ND_NR_DTYPES; t++) {
		if (!strcmp(s, dtypes[t].name)) {
			*dtype = t;
			*esize = dtypes[t].size;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (!strcmp(s, words[i].name)) {
			*dtype = words[i].t;
			*esize = dtypes[words[i].t].size;
			return 0;
		}
	}
	if (!strncmp(s, "raw", 3))
		return raw_size(s + 3, dtype, esize);
	if (*s == '<' || *s == '|' || *s == '=') {
		explicit_order = true;
		s++;
	} else if (*s == '>') {
		/* big-endian multi-byte data is not what gstore stores */
		if (s[1] && s[2] == '1' && !s[3])
			s++;
		else
			return -EINVAL;
		explicit_order = true;
	}
	if (*s == 'V')
		return raw_size(s + 1, dtype, esize);
	if (*s != 'i' && *s != 'u' && *s != 'f')
		return -EINVAL;
	p = s + 1;
	if (nd_parse_u64(&p, 8, &n) || *p)
		return -EINVAL;
	/* "i8"/"u8" without a byte order are the 8-bit names matched above;
	 * here sizes are numpy byte counts */
	if (!explicit_order && n == 8 && *s != 'f')
		return -EINVAL;
	if (dtype_by_kind(*s, n, dtype))
		return -EINVAL;
	*esize = n;
	return 0;
}

void nd_dtype_descr(uint32_t dtype, uint32_t esize, char *buf)
{
	if (dtype == GS_ND_RAW || dtype >= GS_ND_NR_DTYPES)
		snprintf(buf, 16, "|V%u", esize);
	else
		snprintf(buf, 16, "%c%c%u", dtypes[dtype].size == 1 ? '|' : '<',
			 dtypes[dtype].kind, dtypes[dtype].size);
}

int nd_parse_u64(const char **sp, uint64_t max, uint64_t *v)
{
	const char *s = *sp;
	uint64_t x = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *s - '0', &x))
			return -ERANGE;
	}
	if (x > max)
		return -ERANGE;
	*v = x;
	*sp = s;
	return 0;
}

int gs_nd_parse_shape(const char *s, uint64_t *shape, unsigned max)
{
	unsigned n = 0;
	int ret;

	if (!s || !*s)
		return -EINVAL;
	for (;;) {
		if (n == max)
			return -EINVAL;
		ret = nd_parse_u64(&s, GS_ND_DIM_MAX, &shape[n]);
		if (ret)
			return ret;
		if (shape[n++] == 0)
			return -EINVAL;
		if (!*s)
			return n;
		if (*s != 'x' && *s != ',')
			return -EINVAL;
		s++;
	}
}

int nd_parse_coords(const char *s, uint32_t n, uint64_t *v)
{
	for (uint32_t i = 0; i < n; i++) {
		int ret = nd_parse_u64(&s, GS_ND_DIM_MAX, &v[i]);

		if (ret)
			return ret;
		if (i + 1 < n && *s++ != ',')
			return -EINVAL;
	}
	return *s ? -EINVAL : 0;
}

int gs_nd_parse_coords(const char *s, uint32_t ndims, uint64_t *coord)
{
	if (!s || ndims < 1 || ndims > ND_MAXD)
		return -EINVAL;
	return nd_parse_coords(s, ndims, coord);
}

/* One slice entry "a", "a:b", "a:b:s", ":", "a:", ":b", "::s" for a dimension of @dim. */
static int parse_range(const char **sp, uint64_t dim, uint64_t *start, uint64_t *count,
		       uint64_t *stride, bool *bare)
{
	const char *s = *sp;
	uint64_t a = 0, b = dim, st = 1;
	int ret;

	*bare = false;
	if (*s >= '0' && *s <= '9') {
		ret = nd_parse_u64(&s, UINT64_MAX, &a);
		if (ret)
			return ret;
	}
	if (*s != ':') {
		if (s == *sp)
			return -EINVAL;
		if (a >= dim)
			return -ERANGE;
		*bare = true;
		*start = a;
		*count = 1;
		*stride = 1;
		*sp = s;
		return 0;
	}
	s++;
	if (*s >= '0' && *s <= '9') {
		ret = nd_parse_u64(&s, UINT64_MAX, &b);
		if (ret)
			return ret;
	}
	if (*s == ':') {
		s++;
		ret = nd_parse_u64(&s, UINT64_MAX, &st);
		if (ret)
			return ret;
		if (st == 0)
			return -EINVAL;
	}
	if (a >= dim || b > dim)
		return -ERANGE;
	if (a >= b)
		return -EINVAL;
	*start = a;
	*count = (b - a + st - 1) / st;
	*stride = st;
	*sp = s;
	return 0;
}

int nd_parse_slice(const char *s, uint32_t n, const uint64_t *shape, struct nd_slab *sl,
		   uint32_t *dropped)
{
	uint32_t i = 0;
	bool bare;
	int ret;

	sl->ndims = n;
	*dropped = 0;
	if (!*s)
		return -EINVAL;
	while (*s) {
		if (i == n)
			return -EINVAL;
		ret = parse_range(&s, shape[i], &sl->start[i], &sl->count[i], &sl->stride[i],
				  &bare);
		if (ret)
			return ret;
		if (bare)
			*dropped |= 1u << i;
		i++;
		if (*s == ',') {
			s++;
			if (!*s)
				return -EINVAL;
		} else if (*s) {
			return -EINVAL;
		}
	}
	for (; i < n; i++) {
		sl->start[i] = 0;
		sl->count[i] = shape[i];
		sl->stride[i] = 1;
	}
	return 0;
}

int gs_nd_parse_slice(const char *s, uint32_t ndims, const uint64_t *shape, uint64_t *start,
		      uint64_t *count, uint64_t *stride, uint32_t *dropped)
{
	struct nd_slab sl;
	int ret;

	if (ndims < 1 || ndims > ND_MAXD)
		return -EINVAL;
	ret = nd_parse_slice(s, ndims, shape, &sl, dropped);
	if (ret)
		return ret;
	memcpy(start, sl.start, ndims * sizeof(*start));
	memcpy(count, sl.count, ndims * sizeof(*count));
	memcpy(stride, sl.stride, ndims * sizeof(*stride));
	return 0;
}

/*
 * A block request larger than the space along a dimension is not an error:
 * like the edge blocks (and like HDF5 and Zarr chunks), it is clipped, so
 * the one block there holds the whole dimension.
 */
int nd_block_slab(uint32_t n, const uint64_t *shape, const uint64_t *sub, const uint64_t *coord,
		  struct nd_slab *sl)
{
	sl->ndims = n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a;

		if (sub[i] == 0)
			return -EINVAL;
		if (__builtin_mul_overflow(coord[i], sub[i], &a) || a >= shape[i])
			return -ERANGE;
		sl->start[i] = a;
		sl->count[i] = shape[i] - a < sub[i] ? shape[i] - a : sub[i];
		sl->stride[i] = 1;
	}
	return 0;
}

int gs_nd_block_slab(uint32_t ndims, const uint64_t *shape, const uint64_t *subdim,
		     const uint64_t *coord, uint64_t *start, uint64_t *count)
{
	struct nd_slab sl;
	int ret;

	if (ndims < 1 || ndims > ND_MAXD)
		return -EINVAL;
	ret = nd_block_slab(ndims, shape, subdim, coord, &sl);
	if (ret)
		return ret;
	memcpy(start, sl.start, ndims * sizeof(*start));
	memcpy(count, sl.count, ndims * sizeof(*count));
	return 0;
}

/* ---- building blocks ---- */

static uint32_t ilog2_up(uint64_t x)
{
	return x <= 1 ? 0 : 64 - __builtin_clzll(x - 1);
}

/*
 * NDS eq. 1: a block is at least parallel units x basic access size, so one
 * block keeps the device's parallel units busy.  Parallel requests: the
 * queue depth per device x devices.  Basic access: the device's page-sized
 * unit, its logical block rounded up to 4 KiB (not opt_io: opt_io x queue
 * depth is the bytes in flight that saturate the device through many
 * requests, 32x too much for one block at opt_io = 128 KiB).  And at least
 * one optimal-sized I/O.
 */
uint64_t nd_min_block_bytes(const struct gs_q_geom *g)
{
	uint64_t io = 4096, qd = 128, ndev = 1, opt = 0, b;

	if (g) {
		if (g->lba_size > io)
			io = g->lba_size;
		if (g->queue_depth)
			qd = g->queue_depth;
		if (g->nr_devices)
			ndev = g->nr_devices;
		opt = g->opt_io;
	}
	if (__builtin_mul_overflow(io, qd, &b) || __builtin_mul_overflow(b, ndev, &b))
		b = ND_MAX_BB_BYTES;
	if (b < opt)
		b = opt;
	if (b < ND_MIN_BB_BYTES)
		b = ND_MIN_BB_BYTES;
	if (b > ND_MAX_BB_BYTES)
		b = ND_MAX_BB_BYTES;
	return b;
}

/*
 * NDS eqs. 2-4: the innermost k = min(ndims, 3) dimensions get equal power-of-
 * two sides, just big enough for @min_bytes; outer dimensions get 1.  A side
 * never exceeds its dimension rounded up to a power of two: what a capped
 * side cannot take moves to the other active sides, then outward.
 */
void nd_auto_bb(uint32_t ndims, const uint64_t *shape, uint32_t esize, uint64_t min_bytes,
		uint64_t *bb)
{
	uint32_t need = ilog2_up((min_bytes + esize - 1) / esize);
	uint32_t k = ndims < 3 ? ndims : 3, e[ND_MAXD] = { 0 }, cap[ND_MAXD];
	uint32_t per = (need + k - 1) / k, got = 0, first = ndims - k;

	for (uint32_t i = 0; i < ndims; i++)
		cap[i] = ilog2_up(shape[i]);
	for (uint32_t i = first; i < ndims; i++) {
		e[i] = per < cap[i] ? per : cap[i];
		got += e[i];
	}
	while (got < need) {
		bool grew = false;

		for (uint32_t i = ndims; i-- > first && got < need;) {
			if (e[i] < cap[i]) {
				e[i]++;
				got++;
				grew = true;
			}
		}
		if (!grew) {
			if (first == 0)
				break;
			first--;
		}
	}
	for (uint32_t i = 0; i < ndims; i++)
		bb[i] = 1ULL << e[i];
}

int gs_nd_block_shape(const struct gs_nd_params *p, const struct gs_q_geom *g, uint64_t *bb)
{
	uint32_t esize = p->dtype == GS_ND_RAW ? p->elem_size : gs_nd_dtype_size(p->dtype);
	bool set = false;

	if (p->ndims < 1 || p->ndims > ND_MAXD || esize == 0 || esize > GS_ND_ELEM_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < p->ndims; i++) {
		if (p->shape[i] == 0 || p->shape[i] > GS_ND_DIM_MAX)
			return -EINVAL;
		if (p->bb[i])
			set = true;
	}
	if (set) {
		uint64_t bytes = esize;

		for (uint32_t i = 0; i < p->ndims; i++) {
			if (p->bb[i] == 0 || p->bb[i] > GS_ND_DIM_MAX)
				return -EINVAL;
			if (__builtin_mul_overflow(bytes, p->bb[i], &bytes))
				return -EOVERFLOW;
			bb[i] = p->bb[i];
		}
		return bytes > GS_ND_BLOCK_MAX ? -EOVERFLOW : 0;
	}
	nd_auto_bb(p->ndims, p->shape, esize, nd_min_block_bytes(g), bb);
	return 0;
}

int nd_layout_init(struct nd_layout *L, const struct gs_nd_params *p)
{
	uint64_t v;
	uint32_t n = p->ndims;

	memset(L, 0, sizeof(*L));
	if (p->dtype >= GS_ND_NR_DTYPES || n < 1 || n > ND_MAXD || p->flags)
		return -EINVAL;
	L->dtype = p->dtype;
	L->esize = p->dtype == GS_ND_RAW ? p->elem_size : dtypes[p->dtype].size;
	if (p->dtype != GS_ND_RAW && p->elem_size && p->elem_size != L->esize)
		return -EINVAL;
	if (L->esize == 0 || L->esize > GS_ND_ELEM_MAX)
		return -EINVAL;
	L->ndims = n;
	L->elems = 1;
	L->block_elems = 1;
	L->nblocks = 1;
	for (uint32_t i = 0; i < n; i++) {
		if (p->shape[i] == 0 || p->shape[i] > GS_ND_DIM_MAX)
			return -EINVAL;
		if (p->bb[i] == 0 || p->bb[i] > GS_ND_DIM_MAX)
			return -EINVAL;
		L->shape[i] = p->shape[i];
		L->bb[i] = p->bb[i];
		L->nb[i] = (p->shape[i] + p->bb[i] - 1) / p->bb[i];
		if (__builtin_mul_overflow(L->elems, L->shape[i], &L->elems) ||
		    __builtin_mul_overflow(L->block_elems, L->bb[i], &L->block_elems) ||
		    __builtin_mul_overflow(L->nblocks, L->nb[i], &L->nblocks))
			return -EOVERFLOW;
	}
	if (__builtin_mul_overflow(L->elems, (uint64_t)L->esize, &L->bytes) ||
	    L->bytes >= ND_MAX_BYTES)
		return -EOVERFLOW;
	L->block_bytes = L->block_elems * L->esize;
	if (L->block_bytes > GS_ND_BLOCK_MAX)
		return -EOVERFLOW;
	v = 1;
	for (uint32_t i = n; i-- > 0;) {
		L->bstr[i] = v;
		v *= L->bb[i];
	}
	v = 1;
	for (uint32_t i = n; i-- > 0;) {
		L->nbstr[i] = v;
		v *= L->nb[i];
	}
	return 0;
}
