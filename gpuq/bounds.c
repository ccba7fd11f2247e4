// SPDX-License-Identifier: MIT
/*
 * Per-ring bounds (gs_q_ring_set_bounds()): the device ranges a bounded
 * ring's requests may touch, and how.  The table is normalised once, when
 * it is set (a sweep over the ranges' ends: O(n log n)), into sorted,
 * disjoint ranges, so that the poller's check is a binary search plus a
 * walk over the few ranges one request spans.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq_internal.h"

#define BOUNDS_MAX	(1u << 20)

struct edge {
	uint64_t pos;
	int32_t dr, dw;		/* readers / writers starting (+1) or ending (-1) here */
};

static int edge_cmp(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Append [start, end) with @perm, merging with an adjacent equal range. */
static void emit(struct qbounds *qb, uint64_t start, uint64_t end, uint32_t perm)
{
	struct qbound *last = qb->n ? &qb->b[qb->n - 1] : NULL;

	if (!perm || start == end)
		return;
	qb->perms |= perm;
	if (last && last->end == start && last->perm == perm) {
		last->end = end;
		return;
	}
	qb->b[qb->n++] = (struct qbound){ .start = start, .end = end, .perm = perm };
}

int gs_bounds_build(const struct gs_q_bound *b, unsigned n, struct qbounds **out)
{
	struct qbounds *qb;
	struct edge *e;
	unsigned i, ne = 0;
	int32_t r = 0, w = 0;

	if ((!b && n) || n > BOUNDS_MAX)
		return n > BOUNDS_MAX ? -E2BIG : -EINVAL;
	for (i = 0; i < n; i++)
		if (b[i].rsvd || !b[i].perm ||
		    (b[i].perm & ~(uint32_t)(GS_Q_BOUND_READ | GS_Q_BOUND_WRITE)) ||
		    b[i].off + b[i].len < b[i].off)
			return -EINVAL;
	e = malloc((2 * (size_t)n + 1) * sizeof(*e));
	/* a sweep over 2n edges yields at most 2n - 1 ranges */
	qb = malloc(sizeof(*qb) + (2 * (size_t)n + 1) * sizeof(qb->b[0]));
	if (!e || !qb) {
		free(e);
		free(qb);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		int32_t dr = !!(b[i].perm & GS_Q_BOUND_READ), dw = !!(b[i].perm & GS_Q_BOUND_WRITE);

		if (!b[i].len)
			continue;
		e[ne++] = (struct edge){ .pos = b[i].off, .dr = dr, .dw = dw };
		e[ne++] = (struct edge){ .pos = b[i].off + b[i].len, .dr = -dr, .dw = -dw };
	}
	qsort(e, ne, sizeof(*e), edge_cmp);
	qb->n = 0;
	qb->perms = 0;
	for (i = 0; i < ne; i++) {
		uint32_t perm = (r ? GS_Q_BOUND_READ : 0) | (w ? GS_Q_BOUND_WRITE : 0);

		if (i)
			emit(qb, e[i - 1].pos, e[i].pos, perm);
		r += e[i].dr;
		w += e[i].dw;
	}
	free(e);
	*out = qb;
	return 0;
}

/* 0 when [off, off + len) lies inside ranges that all grant @need, else -EACCES. */
int gs_bounds_check(const struct qbounds *qb, uint64_t off, uint64_t len, uint32_t need)
{
	uint64_t end = off + len;
	uint32_t lo = 0, hi;

	if (!qb || !qb->n || end < off)
		return -EACCES;
	/* the last range starting at or before off */
	hi = qb->n;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (qb->b[mid].start <= off)
			lo = mid;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < qb->n; i++) {
		const struct qbound *x = &qb->b[i];

		/* a gap before this range, or a range without the permission */
		if (x->start > off || x->end <= off || (x->perm & need) != need)
			return -EACCES;
		if (end <= x->end)
			return 0;
		off = x->end;
	}
	return -EACCES;
}
