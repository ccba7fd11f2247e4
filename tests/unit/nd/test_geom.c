// SPDX-License-Identifier: MIT
/* N-D spaces: types, shapes, slices, building-block sizing, layouts (fs/nd/nd_geom.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gstore_q.h"
#include "fs/nd/nd_internal.h"

static void test_dtypes(void **state)
{
	static const struct { const char *s; uint32_t t, size; } ok[] = {
		{ "i8", GS_ND_I8, 1 }, { "i16", GS_ND_I16, 2 }, { "i32", GS_ND_I32, 4 },
		{ "i64", GS_ND_I64, 8 }, { "u8", GS_ND_U8, 1 }, { "u64", GS_ND_U64, 8 },
		{ "f16", GS_ND_F16, 2 }, { "f32", GS_ND_F32, 4 }, { "f64", GS_ND_F64, 8 },
		{ "f8", GS_ND_F64, 8 }, { "f4", GS_ND_F32, 4 }, { "f2", GS_ND_F16, 2 },
		{ "<f8", GS_ND_F64, 8 }, { "<i8", GS_ND_I64, 8 }, { "<u8", GS_ND_U64, 8 },
		{ "|u1", GS_ND_U8, 1 }, { "|i1", GS_ND_I8, 1 }, { "i4", GS_ND_I32, 4 },
		{ "float64", GS_ND_F64, 8 }, { "uint16", GS_ND_U16, 2 }, { "int8", GS_ND_I8, 1 },
		{ "raw3", GS_ND_RAW, 3 }, { "|V16", GS_ND_RAW, 16 }, { "V7", GS_ND_RAW, 7 },
	};
	static const char *bad[] = { "", "x", "f1", "i3", ">f8", "<c16", "raw0", "raw4097",
				     "V", "i", "f", "<f", "f8x", "float128", "|b1", "u9" };
	uint32_t t, sz;
	char d[16];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(gs_nd_parse_dtype(ok[i].s, &t, &sz), 0);
		assert_int_equal(t, ok[i].t);
		assert_int_equal(sz, ok[i].size);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(gs_nd_parse_dtype(bad[i], &t, &sz), -EINVAL);
	for (uint32_t i = 1; i < GS_ND_NR_DTYPES; i++) {
		assert_int_equal(gs_nd_parse_dtype(gs_nd_dtype_name(i), &t, &sz), 0);
		assert_int_equal(t, i);
		nd_dtype_descr(i, sz, d);
		assert_int_equal(gs_nd_parse_dtype(d, &t, &sz), 0);
		assert_int_equal(t, i);
	}
	nd_dtype_descr(GS_ND_F64, 8, d);
	assert_string_equal(d, "<f8");
	nd_dtype_descr(GS_ND_U8, 1, d);
	assert_string_equal(d, "|u1");
	nd_dtype_descr(GS_ND_RAW, 12, d);
	assert_string_equal(d, "|V12");
}

static void test_shapes(void **state)
{
	uint64_t s[GS_ND_MAX_DIMS], c[4];

	assert_int_equal(gs_nd_parse_shape("16384x16384", s, 8), 2);
	assert_true(s[0] == 16384 && s[1] == 16384);
	assert_int_equal(gs_nd_parse_shape("3,4,5", s, 8), 3);
	assert_int_equal(s[2], 5);
	assert_int_equal(gs_nd_parse_shape("1099511627776", s, 8), 1);	/* 2^40 */
	assert_int_equal(gs_nd_parse_shape("1099511627777", s, 8), -ERANGE);
	assert_int_equal(gs_nd_parse_shape("99999999999999999999999", s, 8), -ERANGE);
	assert_int_equal(gs_nd_parse_shape("1x1x1x1x1x1x1x1", s, 8), 8);
	assert_int_equal(gs_nd_parse_shape("1x1x1x1x1x1x1x1x1", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("0x4", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("4x", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("x4", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("-4", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("+4", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("4 ", s, 8), -EINVAL);
	assert_int_equal(gs_nd_parse_shape("", s, 8), -EINVAL);

	assert_int_equal(nd_parse_coords("1,2,3", 3, c), 0);
	assert_true(c[0] == 1 && c[1] == 2 && c[2] == 3);
	assert_int_equal(nd_parse_coords("1,2", 3, c), -EINVAL);
	assert_int_equal(nd_parse_coords("1,2,3,4", 3, c), -EINVAL);
	assert_int_equal(nd_parse_coords("1,,3", 3, c), -EINVAL);
	assert_int_equal(nd_parse_coords("1,2,18446744073709551616", 3, c), -ERANGE);
}

static void test_slices(void **state)
{
	uint64_t shape[3] = { 10, 20, 30 };
	struct nd_slab s;
	uint32_t drop;

	assert_int_equal(nd_parse_slice("2:5,0:20:3,7", 3, shape, &s, &drop), 0);
	assert_true(s.start[0] == 2 && s.count[0] == 3 && s.stride[0] == 1);
	assert_true(s.start[1] == 0 && s.count[1] == 7 && s.stride[1] == 3);
	assert_true(s.start[2] == 7 && s.count[2] == 1);
	assert_int_equal(drop, 4);
	assert_int_equal(nd_parse_slice(":,5", 3, shape, &s, &drop), 0);
	assert_true(s.count[0] == 10 && s.start[1] == 5 && s.count[2] == 30);
	assert_int_equal(drop, 2);
	assert_int_equal(nd_parse_slice("::4", 3, shape, &s, &drop), 0);
	assert_true(s.count[0] == 3 && s.stride[0] == 4);
	assert_int_equal(nd_parse_slice("3:", 3, shape, &s, &drop), 0);
	assert_int_equal(s.count[0], 7);
	assert_int_equal(nd_parse_slice(":4", 3, shape, &s, &drop), 0);
	assert_int_equal(s.count[0], 4);

	assert_int_equal(nd_parse_slice("0:11", 3, shape, &s, &drop), -ERANGE);
	assert_int_equal(nd_parse_slice("10", 3, shape, &s, &drop), -ERANGE);
	assert_int_equal(nd_parse_slice("10:", 3, shape, &s, &drop), -ERANGE);
	assert_int_equal(nd_parse_slice("5:5", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("6:5", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("0:5:0", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("1,2,3,4", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("1,", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("a", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("-1", 3, shape, &s, &drop), -EINVAL);
	assert_int_equal(nd_parse_slice("0:99999999999999999999", 3, shape, &s, &drop),
			 -ERANGE);
	assert_int_equal(nd_parse_slice("1 :2", 3, shape, &s, &drop), -EINVAL);
}

static void test_block_slab(void **state)
{
	uint64_t shape[2] = { 100, 70 }, sub[2] = { 32, 32 }, c[2];
	struct nd_slab s;

	c[0] = 3, c[1] = 2;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), 0);
	assert_true(s.start[0] == 96 && s.count[0] == 4 && s.start[1] == 64 && s.count[1] == 6);
	c[0] = 4;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), -ERANGE);
	c[0] = UINT64_MAX / 2;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), -ERANGE);
	sub[0] = 0;
	c[0] = 0;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), -EINVAL);
	/* a block request larger than the space is clipped, as edge blocks are */
	sub[0] = 101;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), 0);
	assert_true(s.start[0] == 0 && s.count[0] == 100);
	c[0] = 1;
	assert_int_equal(nd_block_slab(2, shape, sub, c, &s), -ERANGE);
}

static uint64_t prod(const uint64_t *v, uint32_t n)
{
	uint64_t p = 1;

	for (uint32_t i = 0; i < n; i++)
		p *= v[i];
	return p;
}

static void test_block_sizing(void **state)
{
	struct gs_q_geom g = { .lba_size = 512, .opt_io = 4096, .queue_depth = 128,
			       .nr_devices = 1 };
	struct gs_nd_params p = { .dtype = GS_ND_F64, .ndims = 2,
				  .shape = { 32768, 16384 } };
	uint64_t bb[GS_ND_MAX_DIMS];

	/* eq. 1: 128 x 4 KiB pages = 512 KiB; 2-D f64: 256 x 256 */
	assert_int_equal(nd_min_block_bytes(&g), 512 << 10);
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 256 && bb[1] == 256);
	/* twice the parallelism: sides stay equal, rounding up */
	g.nr_devices = 2;
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 512 && bb[1] == 512);
	g.nr_devices = 1;
	/* 3-D u8: 2^19 elements -> 128^3 (2^21 >= 2^19, equal sides: 2^7 each) */
	p = (struct gs_nd_params){ .dtype = GS_ND_U8, .ndims = 3, .shape = { 1000, 1000, 1000 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 128 && bb[1] == 128 && bb[2] == 128);
	/* 1-D f32: 128 Ki elements */
	p = (struct gs_nd_params){ .dtype = GS_ND_F32, .ndims = 1, .shape = { 1 << 30 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_int_equal(bb[0], 128 << 10);
	/* 5-D: the outer two dimensions get 1 */
	p = (struct gs_nd_params){ .dtype = GS_ND_F64, .ndims = 5,
				   .shape = { 50, 60, 1000, 1000, 1000 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 1 && bb[1] == 1 && bb[2] == 64 && bb[3] == 64 && bb[4] == 64);
	assert_true(prod(bb, 5) * 8 >= 512 << 10);
	/* a thin dimension caps its side; the rest moves to the other side */
	p = (struct gs_nd_params){ .dtype = GS_ND_F64, .ndims = 2, .shape = { 4, 1000000 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 4 && bb[1] == 16384);
	/* small inner dims of a 4-D space: growth moves outward */
	p = (struct gs_nd_params){ .dtype = GS_ND_U8, .ndims = 4, .shape = { 1000, 4, 4, 4 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[1] == 4 && bb[2] == 4 && bb[3] == 4 && bb[0] == 1024);
	/* a tiny space is one block */
	p = (struct gs_nd_params){ .dtype = GS_ND_U8, .ndims = 2, .shape = { 3, 5 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 4 && bb[1] == 8);
	/* the page, not opt_io, is the access unit; a block is at least one opt_io */
	g.opt_io = 128 << 10;
	assert_int_equal(nd_min_block_bytes(&g), 512 << 10);
	g.opt_io = 1 << 20;
	assert_int_equal(nd_min_block_bytes(&g), 1 << 20);
	g.opt_io = 64 << 20;
	assert_int_equal(nd_min_block_bytes(&g), 8 << 20);	/* clamped */
	g.opt_io = 512;
	g.queue_depth = 1;
	assert_int_equal(nd_min_block_bytes(&g), 64 << 10);
	g.lba_size = 4096;
	g.queue_depth = 1024;
	g.nr_devices = 4;
	assert_int_equal(nd_min_block_bytes(&g), 8 << 20);
	assert_int_equal(nd_min_block_bytes(NULL), 512 << 10);
	/* override */
	p = (struct gs_nd_params){ .dtype = GS_ND_F64, .ndims = 2, .shape = { 100, 100 },
				   .bb = { 10, 30 } };
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_true(bb[0] == 10 && bb[1] == 30);
	p.bb[1] = 0;
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), -EINVAL);
	p.bb[0] = p.bb[1] = 1 << 20;
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), -EOVERFLOW);
}

static void test_layout(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_U16, .ndims = 3, .shape = { 10, 20, 30 },
				  .bb = { 4, 8, 16 } };
	struct nd_layout L;
	uint64_t bc[3];

	assert_int_equal(nd_layout_init(&L, &p), 0);
	assert_true(L.nb[0] == 3 && L.nb[1] == 3 && L.nb[2] == 2);
	assert_int_equal(L.nblocks, 18);
	assert_int_equal(L.block_bytes, 4 * 8 * 16 * 2);
	assert_true(L.bstr[0] == 128 && L.bstr[1] == 16 && L.bstr[2] == 1);
	assert_int_equal(L.bytes, 6000 * 2);
	bc[0] = 2, bc[1] = 1, bc[2] = 1;
	assert_int_equal(nd_bid(&L, bc), 2 * 6 + 1 * 2 + 1);
	nd_bcoord(&L, 15, bc);
	assert_true(bc[0] == 2 && bc[1] == 1 && bc[2] == 1);

	/* 2^40 x 2^40 bytes does not fit a row-major size */
	p = (struct gs_nd_params){ .dtype = GS_ND_U8, .ndims = 2,
				   .shape = { 1ULL << 40, 1ULL << 40 }, .bb = { 1, 1 } };
	assert_int_equal(nd_layout_init(&L, &p), -EOVERFLOW);
	/* sparse but representable: 2^20 cubed u8 */
	p = (struct gs_nd_params){ .dtype = GS_ND_U8, .ndims = 3,
				   .shape = { 1 << 20, 1 << 20, 1 << 20 }, .bb = { 64, 64, 64 } };
	assert_int_equal(nd_layout_init(&L, &p), 0);
	assert_int_equal(L.nblocks, 1ULL << 42);
	p.ndims = 0;
	assert_int_equal(nd_layout_init(&L, &p), -EINVAL);
	p.ndims = 9;
	assert_int_equal(nd_layout_init(&L, &p), -EINVAL);
	p = (struct gs_nd_params){ .dtype = GS_ND_F32, .elem_size = 8, .ndims = 1,
				   .shape = { 4 }, .bb = { 4 } };
	assert_int_equal(nd_layout_init(&L, &p), -EINVAL);
	p.dtype = GS_ND_RAW;
	assert_int_equal(nd_layout_init(&L, &p), 0);
	p.elem_size = 0;
	assert_int_equal(nd_layout_init(&L, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_slices),
		cmocka_unit_test(test_block_slab),
		cmocka_unit_test(test_block_sizing),
		cmocka_unit_test(test_layout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
