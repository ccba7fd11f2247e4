// SPDX-License-Identifier: MIT
/*
 * N-D spaces against a dense reference, on the plain-file store: random
 * shapes (1-D..5-D), element sizes 1..8, block shapes with partial edge
 * blocks, hyperslabs with strides, NDS coordinate access, views of other
 * dimensionalities, unaligned byte ranges, a cache small enough to evict,
 * sparse (unwritten) blocks, and persistence across close/open.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "fs/nd/nd_internal.h"
#include "nd_ref.h"

struct sp {
	int mfd, dfd;
	size_t cache;
	struct gs_nd *nd;
	struct gs_nd_params p;
	uint32_t es;
	uint64_t elems;
	char *ref;
};

static void sp_open(struct sp *s)
{
	struct nd_store *st;

	assert_int_equal(nd_store_file(&st, dup(s->mfd), dup(s->dfd), 64), 0);
	assert_int_equal(nd_space_open(st, s->cache, &s->nd), 0);
}

static void sp_create(struct sp *s, const struct gs_nd_params *p, size_t cache)
{
	struct nd_store *st;

	memset(s, 0, sizeof(*s));
	s->p = *p;
	s->cache = cache;
	s->mfd = memfd_create("nd-meta", 0);
	s->dfd = memfd_create("nd-data", 0);
	assert_true(s->mfd >= 0 && s->dfd >= 0);
	assert_int_equal(nd_store_file(&st, dup(s->mfd), dup(s->dfd), 64), 0);
	assert_int_equal(nd_space_format(st, p, 0), 0);
	st->ops->close(st);
	sp_open(s);
	s->es = s->nd->L.esize;
	s->elems = s->nd->L.elems;
	/* sparse giants get no reference */
	if (s->elems <= (1u << 24)) {
		s->ref = calloc(s->elems, s->es);
		assert_non_null(s->ref);
	}
}

static void sp_reopen(struct sp *s)
{
	assert_int_equal(gs_nd_close(s->nd), 0);
	sp_open(s);
}

static void sp_destroy(struct sp *s)
{
	assert_int_equal(gs_nd_close(s->nd), 0);
	close(s->mfd);
	close(s->dfd);
	free(s->ref);
}

/* Whole-space compare through the row-major byte image. */
static void sp_check_all(struct sp *s)
{
	char *buf = malloc(s->elems * s->es);

	assert_int_equal(gs_nd_pread_sel(s->nd, NULL, buf, s->elems * s->es, 0),
			 (ssize_t)(s->elems * s->es));
	assert_memory_equal(buf, s->ref, s->elems * s->es);
	free(buf);
}

static void rnd_slab(uint32_t n, const uint64_t *shape, uint64_t *start, uint64_t *count,
		     uint64_t *stride, bool strided)
{
	for (uint32_t i = 0; i < n; i++) {
		start[i] = rnd_in(0, shape[i] - 1);
		stride[i] = strided && rnd() % 3 == 0 ? rnd_in(1, 5) : 1;
		count[i] = rnd_in(1, (shape[i] - 1 - start[i]) / stride[i] + 1);
	}
}

static uint64_t vol(uint32_t n, const uint64_t *c)
{
	uint64_t v = 1;

	for (uint32_t i = 0; i < n; i++)
		v *= c[i];
	return v;
}

/* A random shape of @n dims and volume @elems (factor by factor). */
static uint32_t rnd_view(uint64_t elems, uint64_t *vs)
{
	uint32_t n = 0, want = rnd_in(1, 5), tries = 0;
	uint64_t left = elems;

	while (n + 1 < want && left > 1 && tries++ < 100) {
		uint64_t d = rnd_in(2, 12);

		if (left % d)
			continue;	/* try another factor */
		vs[n++] = d;
		left /= d;
		if (rnd() % 4 == 0)
			break;
	}
	vs[n++] = left;
	return n;
}

static void one_op(struct sp *s, uint32_t op)
{
	const struct nd_layout *L = &s->nd->L;
	uint64_t start[8], count[8], stride[8], vs[8], cnt;
	struct gs_nd_sel sel = { 0 };
	char *buf, *want;
	uint32_t vn = L->ndims;
	bool view = op >= 4 && op < 6;

	memcpy(vs, L->shape, sizeof(vs));
	if (view) {
		vn = rnd_view(s->elems, vs);
		sel.ndims = vn;
		sel.shape = vs;
	}
	rnd_slab(vn, vs, start, count, stride, true);
	sel.start = start;
	sel.count = count;
	sel.stride = stride;
	cnt = vol(vn, count);
	buf = malloc(cnt * s->es + 1);
	want = malloc(cnt * s->es + 1);
	switch (op) {
	case 0: case 4:	/* write a slab (of the space or a view) */
		rnd_fill(buf, cnt * s->es);
		assert_int_equal(gs_nd_write_sel(s->nd, &sel, buf, cnt * s->es),
				 (ssize_t)(cnt * s->es));
		ref_slab(s->ref, vn, vs, start, count, stride, s->es, buf, 0);
		break;
	case 1: case 5:	/* read a slab */
		assert_int_equal(gs_nd_read_sel(s->nd, &sel, buf, cnt * s->es),
				 (ssize_t)(cnt * s->es));
		ref_slab(s->ref, vn, vs, start, count, stride, s->es, want, 1);
		assert_memory_equal(buf, want, cnt * s->es);
		break;
	case 2: {	/* NDS coordinate + sub-dimensionality */
		uint64_t sub[8], c[8];
		struct nd_slab sl;
		uint64_t n;

		for (uint32_t i = 0; i < L->ndims; i++) {
			sub[i] = rnd() % 3 == 0 ? 1 : rnd_in(1, L->shape[i]);
			c[i] = rnd_in(0, (L->shape[i] - 1) / sub[i]);
		}
		assert_int_equal(nd_block_slab(L->ndims, L->shape, sub, c, &sl), 0);
		n = vol(L->ndims, sl.count);
		free(buf);
		free(want);
		buf = malloc(n * s->es);
		want = malloc(n * s->es);
		if (rnd() % 2) {
			assert_int_equal(gs_nd_read(s->nd, c, sub, buf, n * s->es),
					 (ssize_t)(n * s->es));
			ref_slab(s->ref, L->ndims, L->shape, sl.start, sl.count, NULL, s->es,
				 want, 1);
			assert_memory_equal(buf, want, n * s->es);
		} else {
			rnd_fill(buf, n * s->es);
			assert_int_equal(gs_nd_write(s->nd, c, sub, buf, n * s->es),
					 (ssize_t)(n * s->es));
			ref_slab(s->ref, L->ndims, L->shape, sl.start, sl.count, NULL, s->es,
				 buf, 0);
		}
		break;
	}
	case 3: {	/* unaligned byte range of a selection's image */
		uint64_t total = cnt * s->es, off = rnd_in(0, total - 1);
		uint64_t len = rnd_in(1, total - off);

		ref_slab(s->ref, vn, vs, start, count, stride, s->es, want, 1);
		if (rnd() % 2) {
			assert_int_equal(gs_nd_pread_sel(s->nd, &sel, buf, len, off), (ssize_t)len);
			assert_memory_equal(buf, want + off, len);
			/* reads past the end are short, then empty */
			assert_int_equal(gs_nd_pread_sel(s->nd, &sel, buf, total + 5, off),
					 (ssize_t)(total - off));
			assert_int_equal(gs_nd_pread_sel(s->nd, &sel, buf, 5, total), 0);
		} else {
			rnd_fill(buf, len);
			assert_int_equal(gs_nd_pwrite_sel(s->nd, &sel, buf, len, off),
					 (ssize_t)len);
			memcpy(want + off, buf, len);
			ref_slab(s->ref, vn, vs, start, count, stride, s->es, want, 0);
			assert_int_equal(gs_nd_pwrite_sel(s->nd, &sel, buf, 2, total - 1), -EFBIG);
		}
		break;
	}
	}
	free(buf);
	free(want);
}

static void rnd_space(struct gs_nd_params *p)
{
	static const uint32_t es[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint64_t budget = 30000;

	memset(p, 0, sizeof(*p));
	p->ndims = rnd_in(1, 5);
	p->elem_size = es[rnd() % 8];
	switch (p->elem_size) {
	case 1: p->dtype = GS_ND_U8; break;
	case 2: p->dtype = GS_ND_F16; break;
	case 4: p->dtype = GS_ND_I32; break;
	case 8: p->dtype = GS_ND_F64; break;
	default: p->dtype = GS_ND_RAW;
	}
	for (uint32_t i = 0; i < p->ndims; i++) {
		uint64_t hi = budget > 40 ? 40 : budget;

		if (p->ndims <= 2)
			hi = budget;
		if (hi > 3000)
			hi = 3000;
		p->shape[i] = rnd_in(1, hi < 1 ? 1 : hi);
		budget /= p->shape[i];
		if (budget < 1)
			budget = 1;
		p->bb[i] = rnd_in(1, p->shape[i] + 2);
	}
}

static void test_random(void **state)
{
	for (int round = 0; round < 40; round++) {
		struct gs_nd_params p;
		struct sp s;
		size_t cache;

		rnd_space(&p);
		/* a handful of blocks: evictions and write-backs happen */
		cache = rnd() % 2 ? 0 : 4096 * rnd_in(4, 16);
		sp_create(&s, &p, cache);
		sp_check_all(&s);	/* a fresh space reads zeros */
		for (int i = 0; i < 60; i++) {
			one_op(&s, rnd() % 6);
			if (rnd() % 25 == 0)
				sp_reopen(&s);
			if (rnd() % 25 == 0)
				gs_nd_drop_cache(s.nd);
			if (rnd() % 25 == 0)
				assert_int_equal(gs_nd_sync(s.nd), 0);
		}
		sp_check_all(&s);
		sp_reopen(&s);
		sp_check_all(&s);
		sp_destroy(&s);
	}
}

static void test_sparse(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_U8, .ndims = 3,
				  .shape = { 1 << 20, 1 << 20, 1 << 20 },
				  .bb = { 16, 16, 16 } };
	uint64_t c[3] = { 12345, 999999, 54321 }, one[3] = { 1, 1, 1 }, x[3];
	struct gs_nd_info in;
	unsigned char v = 0xab, buf[4096];
	struct sp s;

	sp_create(&s, &p, 1 << 20);
	gs_nd_get_info(s.nd, &in);
	assert_int_equal(in.blocks_total, 1ULL << 48);
	assert_int_equal(in.blocks_written, 0);
	/* reads anywhere: zeros, nothing allocated */
	x[0] = 77777, x[1] = 3, x[2] = (1 << 20) - 4096;
	assert_int_equal(gs_nd_read_slab(s.nd, x, (uint64_t[]){ 1, 1, 4096 }, NULL, buf,
					 sizeof(buf)), 4096);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(gs_nd_write_slab(s.nd, c, one, NULL, &v, 1), 1);
	assert_int_equal(gs_nd_sync(s.nd), 0);
	gs_nd_get_info(s.nd, &in);
	assert_int_equal(in.blocks_written, 1);
	/* the index has one node per level: 3 x 2^16 entries, most never touched */
	assert_int_equal(in.index_bytes, GS_ND_SB_SIZE + 3 * (1 << 16) * 8);
	sp_reopen(&s);
	v = 0;
	assert_int_equal(gs_nd_read_slab(s.nd, c, one, NULL, &v, 1), 1);
	assert_int_equal(v, 0xab);
	/* the element next to it, same block, and one in another block */
	c[2]++;
	assert_int_equal(gs_nd_read_slab(s.nd, c, one, NULL, &v, 1), 1);
	assert_int_equal(v, 0);
	gs_nd_close(s.nd);
	close(s.mfd);
	close(s.dfd);
	free(s.ref);
}

static void test_errors(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_I16, .ndims = 2, .shape = { 10, 20 },
				  .bb = { 4, 4 } };
	uint64_t st[2] = { 0, 0 }, cn[2] = { 10, 20 }, sd[2] = { 1, 1 }, vs[3] = { 2, 5, 20 };
	uint64_t st3[3] = { 0, 0, 0 }, cn3[3] = { 1, 1, 1 };
	struct gs_nd_sel sel = { .start = st, .count = cn };
	char buf[400];
	struct sp s;

	sp_create(&s, &p, 0);
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 399), -EINVAL);
	cn[0] = 11;
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), -ERANGE);
	cn[0] = 0;
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), -EINVAL);
	cn[0] = 4;
	sel.stride = sd;
	sd[0] = 3;	/* 0, 3, 6, 9: fits */
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), 160);
	sd[0] = 4;	/* 0, 4, 8, 12: does not */
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), -ERANGE);
	sd[0] = 0;
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), -EINVAL);
	sd[0] = UINT64_MAX / 2;
	assert_int_equal(gs_nd_write_sel(s.nd, &sel, buf, 400), -ERANGE);
	sel.stride = NULL;
	/* a view must keep the volume */
	sel.ndims = 3;
	sel.shape = vs;
	sel.start = st3;
	sel.count = cn3;
	assert_int_equal(gs_nd_sel_bytes(s.nd, &sel), 2);
	vs[2] = 21;
	assert_int_equal(gs_nd_sel_bytes(s.nd, &sel), -EINVAL);
	vs[2] = 0;
	assert_int_equal(gs_nd_sel_bytes(s.nd, &sel), -EINVAL);
	sel.ndims = 9;
	assert_int_equal(gs_nd_sel_bytes(s.nd, &sel), -EINVAL);
	/* coordinates */
	st[0] = 3;
	st[1] = 0;
	assert_int_equal(gs_nd_read(s.nd, st, NULL, buf, sizeof(buf)), -ERANGE);
	st[0] = 2;
	assert_int_equal(gs_nd_read(s.nd, st, NULL, buf, sizeof(buf)), 2 * 4 * 2);
	/* only the strided write above reached the space */
	sp_reopen(&s);
	for (int r = 0; r < 10; r++) {
		for (int c = 0; c < 20; c++) {
			uint64_t a[2] = { r, c }, one[2] = { 1, 1 };
			int16_t v;

			assert_int_equal(gs_nd_read_slab(s.nd, a, one, NULL, &v, 2), 2);
			assert_int_equal(v, r % 3 == 0 ? 0x5555 : 0);
		}
	}
	sp_destroy(&s);
}

/* NDS decoupling: a 3-D producer, a 2-D tile consumer and a 1-D row consumer. */
static void test_views(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_F32, .ndims = 3, .shape = { 6, 40, 50 },
				  .bb = { 2, 16, 16 } };
	uint64_t n = 6 * 40 * 50, vs2[2] = { 240, 50 }, vs1[1] = { n };
	float *all = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
	struct sp s;

	sp_create(&s, &p, 0);
	for (uint64_t i = 0; i < n; i++)
		all[i] = i * 0.5f;
	/* the producer writes 3-D blocks (NDS coordinates) */
	for (uint64_t z = 0; z < 3; z++)
		for (uint64_t y = 0; y < 3; y++)
			for (uint64_t x = 0; x < 4; x++) {
				uint64_t c[3] = { z, y, x }, sub[3] = { 2, 16, 16 };
				struct nd_slab sl;
				float t[2 * 16 * 16];

				assert_int_equal(nd_block_slab(3, p.shape, sub, c, &sl), 0);
				ref_slab((char *)all, 3, p.shape, sl.start, sl.count, NULL, 4,
					 (char *)t, 1);
				assert_true(gs_nd_write(s.nd, c, NULL, t, sizeof(t)) > 0);
			}
	assert_int_equal(gs_nd_sync(s.nd), 0);
	gs_nd_drop_cache(s.nd);
	/* 2-D consumer: 30 x 25 tiles of the 240 x 50 view */
	for (uint64_t ty = 0; ty < 8; ty++)
		for (uint64_t tx = 0; tx < 2; tx++) {
			uint64_t st[2] = { ty * 30, tx * 25 }, cn[2] = { 30, 25 };
			struct gs_nd_sel sel = { .ndims = 2, .shape = vs2, .start = st, .count = cn };
			float t[30 * 25];

			assert_int_equal(gs_nd_read_sel(s.nd, &sel, t, sizeof(t)), sizeof(t));
			for (int r = 0; r < 30; r++)
				memcpy(a + (st[0] + r) * 50 + st[1], t + r * 25, 25 * 4);
		}
	/* 1-D consumer: rows of 50 */
	for (uint64_t r = 0; r < 240; r++) {
		uint64_t st[1] = { r * 50 }, cn[1] = { 50 };
		struct gs_nd_sel sel = { .ndims = 1, .shape = vs1, .start = st, .count = cn };

		assert_int_equal(gs_nd_read_sel(s.nd, &sel, b + r * 50, 200), 200);
	}
	assert_memory_equal(a, all, n * 4);
	assert_memory_equal(b, all, n * 4);
	sp_destroy(&s);
	free(all);
	free(a);
	free(b);
}

static void aio_cb(struct gs_nd_aio *a, ssize_t res)
{
	__atomic_store_n((ssize_t *)a->priv, res, __ATOMIC_RELEASE);
}

static void test_aio(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_U32, .ndims = 2, .shape = { 100, 100 },
				  .bb = { 8, 8 } };
	uint64_t st[4][2], cn[2] = { 25, 100 };
	struct gs_nd_aio a[4];
	uint32_t *buf = malloc(100 * 100 * 4), *back = calloc(100 * 100, 4);
	ssize_t cbres = 0;
	struct sp s;

	sp_create(&s, &p, 0);
	for (int i = 0; i < 100 * 100; i++)
		buf[i] = i * 2654435761u;
	for (int i = 0; i < 4; i++) {
		st[i][0] = i * 25;
		st[i][1] = 0;
		a[i] = (struct gs_nd_aio){ .op = GS_ND_OP_WRITE, .buf = buf + i * 2500,
					   .len = 10000 };
		a[i].sel.start = st[i];
		a[i].sel.count = cn;
		assert_int_equal(gs_nd_aio_submit(s.nd, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(gs_nd_aio_wait(s.nd, &a[i]), 10000);
	for (int i = 0; i < 4; i++) {
		a[i].op = GS_ND_OP_READ;
		a[i].buf = back + i * 2500;
		if (i == 3) {
			a[i].done = aio_cb;
			a[i].priv = &cbres;
		}
		assert_int_equal(gs_nd_aio_submit(s.nd, &a[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(gs_nd_aio_wait(s.nd, &a[i]), 10000);
	while (!__atomic_load_n(&cbres, __ATOMIC_ACQUIRE))
		usleep(100);
	assert_int_equal(cbres, 10000);
	assert_memory_equal(buf, back, 100 * 100 * 4);
	a[0].op = 7;
	assert_int_equal(gs_nd_aio_submit(s.nd, &a[0]), -EINVAL);
	sp_destroy(&s);
	free(buf);
	free(back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_sparse),
		cmocka_unit_test(test_aio),
		cmocka_unit_test(test_random),
	};
	const char *seed = getenv("ND_SEED");

	if (seed)
		rng_state = strtoull(seed, NULL, 0);
	printf("ND_SEED=%llu\n", (unsigned long long)rng_state);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
