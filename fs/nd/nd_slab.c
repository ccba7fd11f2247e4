// SPDX-License-Identifier: MIT
/*
 * N-D spaces: selections and their execution.
 *
 * Every request becomes space slabs (hyperslabs of the space) with a place
 * in the caller's buffer:
 *   - a slab of the space is one already;
 *   - a byte range of a selection's row-major image splits into at most
 *     2n-1 sub-slabs of the selection (lin_split);
 *   - a slab of a view splits into runs of consecutive space elements, and
 *     each run into at most 2n-1 space slabs (lin_split again).
 * A space slab then yields one item per building block it touches (the block
 * iterator below).  Items are collected into a window; the window's blocks are
 * pinned in the cache at once, which issues all of their misses together, and
 * then copied (strided, in row-major order of the request).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nd_internal.h"

/* ---- selections ---- */

static int check_slab(const uint64_t *shape, uint32_t n, const uint64_t *start,
		      const uint64_t *count, const uint64_t *stride, struct nd_slab *s)
{
	s->ndims = n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t st = stride ? stride[i] : 1, last;

		if (count[i] == 0 || st == 0)
			return -EINVAL;
		if (start[i] >= shape[i])
			return -ERANGE;
		if (__builtin_mul_overflow(count[i] - 1, st, &last) ||
		    __builtin_add_overflow(last, start[i], &last) || last >= shape[i])
			return -ERANGE;
		s->start[i] = start[i];
		s->count[i] = count[i];
		s->stride[i] = st;
	}
	return 0;
}

int nd_sel_prep(const struct nd_layout *L, const struct gs_nd_sel *sel, struct nd_xsel *x)
{
	const uint64_t *shape = L->shape;
	uint32_t n = L->ndims;
	int ret;

	memset(x, 0, sizeof(*x));
	if (!sel->start || !sel->count)
		return -EINVAL;
	if (sel->ndims) {
		uint64_t vol = 1;

		if (sel->ndims > ND_MAXD || !sel->shape)
			return -EINVAL;
		for (uint32_t i = 0; i < sel->ndims; i++) {
			if (sel->shape[i] == 0 || sel->shape[i] > GS_ND_DIM_MAX ||
			    __builtin_mul_overflow(vol, sel->shape[i], &vol))
				return -EINVAL;
		}
		if (vol != L->elems)
			return -EINVAL;
		x->view = sel->ndims != n || memcmp(sel->shape, L->shape, n * sizeof(*shape));
		n = sel->ndims;
		shape = sel->shape;
		memcpy(x->vshape, shape, n * sizeof(*shape));
	}
	ret = check_slab(shape, n, sel->start, sel->count, sel->stride, &x->s);
	if (ret)
		return ret;
	x->elems = 1;
	for (uint32_t i = 0; i < n; i++) {
		if (__builtin_mul_overflow(x->elems, x->s.count[i], &x->elems))
			return -EOVERFLOW;
	}
	if (__builtin_mul_overflow(x->elems, (uint64_t)L->esize, &x->bytes) ||
	    x->bytes >= ND_MAX_BYTES)
		return -EOVERFLOW;
	return 0;
}

void nd_sel_whole(const struct nd_layout *L, struct nd_xsel *x)
{
	memset(x, 0, sizeof(*x));
	x->s.ndims = L->ndims;
	for (uint32_t i = 0; i < L->ndims; i++) {
		x->s.count[i] = L->shape[i];
		x->s.stride[i] = 1;
	}
	x->elems = L->elems;
	x->bytes = L->bytes;
}

/* ---- copies ---- */

void nd_copy(char *dst, const int64_t *ds_in, const char *src, const int64_t *ss_in,
	     const uint64_t *cnt_in, uint32_t n_in, uint32_t esize)
{
	int64_t ds[ND_MAXD], ss[ND_MAXD];
	uint64_t cnt[ND_MAXD], k[ND_MAXD] = { 0 }, row;
	uint32_t n = 0;

	/* drop dimensions of count 1, then merge those contiguous in both */
	for (uint32_t i = 0; i < n_in; i++) {
		if (cnt_in[i] == 1)
			continue;
		if (n && ds[n - 1] == ds_in[i] * (int64_t)cnt_in[i] &&
		    ss[n - 1] == ss_in[i] * (int64_t)cnt_in[i]) {
			cnt[n - 1] *= cnt_in[i];
			ds[n - 1] = ds_in[i];
			ss[n - 1] = ss_in[i];
			continue;
		}
		ds[n] = ds_in[i];
		ss[n] = ss_in[i];
		cnt[n++] = cnt_in[i];
	}
	if (n == 0) {
		memcpy(dst, src, esize);
		return;
	}
	row = cnt[n - 1];
	for (;;) {
		if (ds[n - 1] == esize && ss[n - 1] == esize) {
			memcpy(dst, src, row * esize);
		} else {
			char *d = dst;
			const char *s = src;

			for (uint64_t j = 0; j < row; j++, d += ds[n - 1], s += ss[n - 1]) {
				switch (esize) {
				case 1: *d = *s; break;
				case 2: memcpy(d, s, 2); break;
				case 4: memcpy(d, s, 4); break;
				case 8: memcpy(d, s, 8); break;
				default: memcpy(d, s, esize);
				}
			}
		}
		/* odometer over the outer dimensions */
		uint32_t i = n - 1;

		for (;;) {
			if (i == 0)
				return;
			i--;
			dst += ds[i];
			src += ss[i];
			if (++k[i] < cnt[i])
				break;
			dst -= ds[i] * (int64_t)cnt[i];
			src -= ss[i] * (int64_t)cnt[i];
			k[i] = 0;
		}
	}
}

/* ---- executor ---- */

int nd_exec_init(struct nd_exec *ex, struct gs_nd *nd, int op)
{
	memset(ex, 0, sizeof(*ex));
	ex->nd = nd;
	ex->op = op;
	ex->cap = nd_cache_window(nd);
	ex->it = calloc(ex->cap, sizeof(*ex->it));
	return ex->it ? 0 : -ENOMEM;
}

void nd_exec_fini(struct nd_exec *ex)
{
	free(ex->it);
	ex->it = NULL;
}

int nd_exec_run(struct nd_exec *ex)
{
	struct gs_nd *nd = ex->nd;
	bool wr = ex->op == GS_ND_OP_WRITE;
	unsigned i = 0;

	while (i < ex->n) {
		int got = nd_cache_pin(nd, ex->it + i, ex->n - i, wr);

		if (got < 0) {
			ex->err = ex->err ? ex->err : got;
			break;
		}
		for (unsigned j = i; j < i + (unsigned)got; j++) {
			struct nd_item *it = &ex->it[j];
			int ret = nd_cache_wait(nd, it->e);
			char *blk = (char *)it->e->buf + it->boff;

			if (ret) {
				ex->err = ex->err ? ex->err : ret;
			} else if (!ex->err) {
				if (wr)
					nd_copy(blk, it->bs, it->ubuf, it->us, it->cnt, it->n,
						nd->L.esize);
				else
					nd_copy(it->ubuf, it->us, blk, it->bs, it->cnt, it->n,
						nd->L.esize);
			}
			nd_cache_unpin(nd, it->e, wr && !ret && !ex->err);
			it->e = NULL;
		}
		i += got;
	}
	ex->n = 0;
	return ex->err;
}

/*
 * Queue one item per block touched by the space slab @s.  Per dimension, k is
 * the first selected index inside the current block; the block is
 * (start + k * stride) / bb and it holds the selected indices up to khi.
 */
int nd_exec_slab(struct nd_exec *ex, const struct nd_slab *s, char *ubuf)
{
	const struct nd_layout *L = &ex->nd->L;
	uint32_t n = L->ndims, es = L->esize;
	uint64_t k[ND_MAXD] = { 0 }, ustr[ND_MAXD], v = 1;

	for (uint32_t i = n; i-- > 0;) {
		ustr[i] = v;
		v *= s->count[i];
	}
	for (;;) {
		struct nd_item *it;
		uint64_t bc[ND_MAXD], khi[ND_MAXD], uoff = 0;

		if (ex->n == ex->cap && nd_exec_run(ex))
			return ex->err;
		it = &ex->it[ex->n];
		it->n = n;
		it->boff = 0;
		it->full = true;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t idx = s->start[i] + k[i] * s->stride[i];
			uint64_t b = idx / L->bb[i], bend = (b + 1) * L->bb[i];
			uint64_t in = idx - b * L->bb[i], valid;

			khi[i] = (bend - 1 - s->start[i]) / s->stride[i];
			if (khi[i] >= s->count[i])
				khi[i] = s->count[i] - 1;
			bc[i] = b;
			it->cnt[i] = khi[i] - k[i] + 1;
			it->boff += in * L->bstr[i];
			it->bs[i] = (int64_t)(s->stride[i] * L->bstr[i] * es);
			it->us[i] = (int64_t)(ustr[i] * es);
			uoff += k[i] * ustr[i];
			valid = L->shape[i] - b * L->bb[i];
			if (valid > L->bb[i])
				valid = L->bb[i];
			if (in || it->cnt[i] != valid || (it->cnt[i] > 1 && s->stride[i] != 1))
				it->full = false;
		}
		it->bid = nd_bid(L, bc);
		it->boff *= es;
		it->ubuf = ubuf + uoff * es;
		it->e = NULL;
		ex->n++;
		/* next block: innermost dimension first */
		uint32_t i = n;

		for (;;) {
			if (i == 0)
				return 0;
			i--;
			k[i] = khi[i] + 1;
			if (k[i] < s->count[i])
				break;
			k[i] = 0;
			/* khi of inner dims is recomputed next round */
		}
	}
}

typedef int (*slab_fn)(void *arg, const uint64_t *start, const uint64_t *count, uint64_t rel);

/* Split the row-major range [e0, e1) of @shp into at most 2n-1 slabs. */
static int lin_split(uint32_t n, const uint64_t *shp, uint64_t e0, uint64_t e1, slab_fn fn,
		     void *arg)
{
	uint64_t chunk[ND_MAXD], c[ND_MAXD], cnt[ND_MAXD], rem, x = e0, base = e0;
	int ret;

	chunk[n - 1] = 1;
	for (uint32_t i = n - 1; i-- > 0;)
		chunk[i] = chunk[i + 1] * shp[i + 1];
	for (uint32_t i = 0; i < n; i++) {
		c[i] = x / chunk[i];
		x %= chunk[i];
	}
	while (e0 < e1) {
		uint32_t j = n - 1;
		uint64_t m;

		rem = e1 - e0;
		while (j > 0 && c[j] == 0 && rem >= chunk[j - 1])
			j--;
		m = rem / chunk[j];
		if (m > shp[j] - c[j])
			m = shp[j] - c[j];
		for (uint32_t i = 0; i < n; i++)
			cnt[i] = i < j ? 1 : i == j ? m : shp[i];
		ret = fn(arg, c, cnt, e0 - base);
		if (ret)
			return ret;
		e0 += m * chunk[j];
		c[j] += m;
		for (uint32_t i = j; i > 0 && c[i] == shp[i]; i--) {
			c[i] = 0;
			c[i - 1]++;
		}
	}
	return 0;
}

struct range_ctx {
	struct nd_exec *ex;
	const struct nd_xsel *x;
	char *ubuf;
	uint64_t vstr[ND_MAXD];
};

/* A run of space elements (linear order) -> space slabs. */
static int space_slab_cb(void *arg, const uint64_t *start, const uint64_t *count, uint64_t rel)
{
	struct range_ctx *rc = arg;
	const struct nd_layout *L = &rc->ex->nd->L;
	struct nd_slab s = { .ndims = L->ndims };

	for (uint32_t i = 0; i < L->ndims; i++) {
		s.start[i] = start[i];
		s.count[i] = count[i];
		s.stride[i] = 1;
	}
	return nd_exec_slab(rc->ex, &s, rc->ubuf + rel * L->esize);
}

/* A sub-slab (in selection index space k) of a view selection -> runs -> space slabs. */
static int view_slab(struct range_ctx *rc, const struct nd_slab *vs, char *ubuf)
{
	const struct nd_layout *L = &rc->ex->nd->L;
	uint32_t n = vs->ndims, m = n;
	uint64_t run = 1, k[ND_MAXD] = { 0 };
	struct range_ctx sub = *rc;
	int ret;

	/* innermost dims that are whole and unit-stride merge into one run */
	while (m > 0) {
		uint32_t i = m - 1;

		if (vs->stride[i] != 1)
			break;
		run *= vs->count[i];
		m--;
		if (vs->start[i] != 0 || vs->count[i] != rc->x->vshape[i])
			break;
	}
	for (;;) {
		uint64_t lin = 0;

		for (uint32_t i = 0; i < n; i++)
			lin += (vs->start[i] + (i < m ? k[i] * vs->stride[i] : 0)) * rc->vstr[i];
		sub.ubuf = ubuf;
		ret = lin_split(L->ndims, L->shape, lin, lin + run, space_slab_cb, &sub);
		if (ret)
			return ret;
		ubuf += run * L->esize;
		uint32_t i = m;

		for (;;) {
			if (i == 0)
				return 0;
			i--;
			if (++k[i] < vs->count[i])
				break;
			k[i] = 0;
		}
	}
}

/* A sub-slab of the selection's own index space -> slab of the view or the space. */
static int sel_slab_cb(void *arg, const uint64_t *kstart, const uint64_t *kcount, uint64_t rel)
{
	struct range_ctx *rc = arg;
	const struct nd_slab *sl = &rc->x->s;
	struct nd_slab s = { .ndims = sl->ndims };
	char *ubuf = rc->ubuf + rel * rc->ex->nd->L.esize;

	for (uint32_t i = 0; i < sl->ndims; i++) {
		s.start[i] = sl->start[i] + kstart[i] * sl->stride[i];
		s.count[i] = kcount[i];
		s.stride[i] = sl->stride[i];
	}
	if (rc->x->view)
		return view_slab(rc, &s, ubuf);
	return nd_exec_slab(rc->ex, &s, ubuf);
}

int nd_exec_range(struct nd_exec *ex, const struct nd_xsel *x, uint64_t e0, uint64_t e1,
		  char *ubuf)
{
	struct range_ctx rc = { .ex = ex, .x = x, .ubuf = ubuf };
	uint32_t n = x->s.ndims;
	uint64_t v = 1;

	if (x->view) {
		for (uint32_t i = n; i-- > 0;) {
			rc.vstr[i] = v;
			v *= x->vshape[i];
		}
	}
	return lin_split(n, x->s.count, e0, e1, sel_slab_cb, &rc);
}

/* Elements [e0, e1) in @buf: queue and run. */
static int rw_elems(struct gs_nd *nd, int op, const struct nd_xsel *x, uint64_t e0, uint64_t e1,
		    char *buf)
{
	struct nd_exec ex;
	int ret;

	ret = nd_exec_init(&ex, nd, op);
	if (ret)
		return ret;
	ret = nd_exec_range(&ex, x, e0, e1, buf);
	if (!ret)
		ret = nd_exec_run(&ex);
	else
		nd_exec_run(&ex);
	nd_exec_fini(&ex);
	return ret;
}

/* Part [a, b) of element @e through a bounce buffer (read-modify-write for writes). */
static int rw_partial(struct gs_nd *nd, int op, const struct nd_xsel *x, uint64_t e, uint32_t a,
		      uint32_t b, char *buf)
{
	char tmp[GS_ND_ELEM_MAX];
	int ret;

	ret = rw_elems(nd, GS_ND_OP_READ, x, e, e + 1, tmp);
	if (ret)
		return ret;
	if (op == GS_ND_OP_READ) {
		memcpy(buf, tmp + a, b - a);
		return 0;
	}
	memcpy(tmp + a, buf, b - a);
	return rw_elems(nd, GS_ND_OP_WRITE, x, e, e + 1, tmp);
}

ssize_t nd_rw_sel(struct gs_nd *nd, int op, const struct nd_xsel *x, char *buf, size_t len,
		  uint64_t off)
{
	uint32_t es = nd->L.esize;
	uint64_t end, ea, eb;
	int ret;

	if (off >= x->bytes || len == 0) {
		if (op == GS_ND_OP_WRITE && len)
			return -EFBIG;
		return 0;
	}
	if (len > x->bytes - off) {
		if (op == GS_ND_OP_WRITE)
			return -EFBIG;
		len = x->bytes - off;
	}
	end = off + len;
	ea = (off + es - 1) / es;
	eb = end / es;
	if (off % es) {
		uint32_t a = off % es, b = ea * es <= end ? es : (uint32_t)(end % es);

		ret = rw_partial(nd, op, x, off / es, a, b, buf);
		if (ret)
			return ret;
		if (ea * es > end)
			return len;
	}
	if (ea < eb) {
		ret = rw_elems(nd, op, x, ea, eb, buf + (ea * es - off));
		if (ret)
			return ret;
	}
	if (end % es && eb >= ea) {
		ret = rw_partial(nd, op, x, eb, 0, end % es, buf + (eb * es - off));
		if (ret)
			return ret;
	}
	return len;
}
