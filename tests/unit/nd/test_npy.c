// SPDX-License-Identifier: MIT
/* N-D spaces: numpy .npy headers (fs/nd/nd_npy.c), checked against numpy 1.24's bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fs/nd/nd_internal.h"

/* np.save() output of np.zeros((3, 4), '<f8') etc.: the dict part */
static const struct {
	uint32_t dtype, esize, ndims;
	uint64_t shape[5];
	const char *dict;
} want[] = {
	{ GS_ND_F64, 8, 2, { 3, 4 }, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }" },
	{ GS_ND_U8, 1, 1, { 5 }, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }" },
	{ GS_ND_I16, 2, 5, { 2, 3, 4, 5, 6 },
	  "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3, 4, 5, 6), }" },
	{ GS_ND_RAW, 3, 1, { 7 }, "{'descr': '|V3', 'fortran_order': False, 'shape': (7,), }" },
};

static void test_write(void **state)
{
	char h[256];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int n = gs_nd_npy_header(h, sizeof(h), want[i].dtype, want[i].esize, want[i].ndims,
					 want[i].shape);
		size_t dl = strlen(want[i].dict);

		assert_int_equal(n, 128);	/* what numpy 1.24 writes for these */
		assert_memory_equal(h, "\x93NUMPY\x01\x00", 8);
		assert_int_equal((unsigned char)h[8] | (unsigned char)h[9] << 8, n - 10);
		assert_memory_equal(h + 10, want[i].dict, dl);
		for (int j = 10 + dl; j < n - 1; j++)
			assert_int_equal(h[j], ' ');
		assert_int_equal(h[n - 1], '\n');
	}
	assert_int_equal(gs_nd_npy_header(h, 100, GS_ND_F64, 8, 2, want[0].shape), -ENOSPC);
	assert_int_equal(gs_nd_npy_header(h, 256, GS_ND_F64, 8, 9, want[0].shape), -EINVAL);
}

/* A 0-d array (numpy's a[i, j] of a 2-d a): np.save(f, np.float32(3.5)) */
static void test_write_scalar(void **state)
{
	static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
	char h[256];
	int n = gs_nd_npy_header(h, sizeof(h), GS_ND_F32, 4, 0, NULL);

	assert_int_equal(n, 128);
	assert_memory_equal(h, "\x93NUMPY\x01\x00v\x00", 10);
	assert_memory_equal(h + 10, dict, sizeof(dict) - 1);
	for (int j = 10 + sizeof(dict) - 1; j < n - 1; j++)
		assert_int_equal(h[j], ' ');
	assert_int_equal(h[n - 1], '\n');
}

static void test_roundtrip(void **state)
{
	uint64_t shape[8] = { 1ULL << 40, 3, 1, 7, 9, 1099511627776ULL, 2, 5 }, got[8];
	uint32_t t, es, nd;
	char h[256];

	for (uint32_t dt = 0; dt < GS_ND_NR_DTYPES; dt++) {
		for (uint32_t n = 1; n <= 8; n++) {
			uint32_t esz = dt == GS_ND_RAW ? 4096 : gs_nd_dtype_size(dt);
			int len = gs_nd_npy_header(h, sizeof(h), dt, esz, n, shape);

			assert_true(len > 0 && len % 64 == 0);
			assert_int_equal(gs_nd_npy_parse(h, len, &t, &es, &nd, got), len);
			assert_int_equal(t, dt);
			assert_int_equal(es, esz);
			assert_int_equal(nd, n);
			assert_memory_equal(got, shape, n * sizeof(*got));
			/* every shorter prefix asks for more */
			for (int k = 0; k < len; k += 7)
				assert_int_equal(gs_nd_npy_parse(h, k, &t, &es, &nd, got), -EAGAIN);
		}
	}
}

static int hdr(char *buf, int version, const char *dict)
{
	int pre = version == 1 ? 10 : 12, n = strlen(dict);

	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = version;
	buf[7] = 0;
	if (version == 1) {
		buf[8] = n & 0xff;
		buf[9] = n >> 8;
	} else {
		buf[8] = n & 0xff;
		buf[9] = n >> 8;
		buf[10] = buf[11] = 0;
	}
	memcpy(buf + pre, dict, n);
	return pre + n;
}

static void test_parse(void **state)
{
	uint32_t t, es, nd;
	uint64_t s[8];
	char b[512];
	int n;

	/* other key order, double quotes, v2, Python 2 longs */
	n = hdr(b, 2, "{\"shape\": (10L, 2), \"fortran_order\": False, \"descr\": \"<u4\"}\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), n);
	assert_true(t == GS_ND_U32 && nd == 2 && s[0] == 10 && s[1] == 2);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EOPNOTSUPP);
	n = hdr(b, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (3, 4), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EOPNOTSUPP);
	n = hdr(b, 1, "{'descr': '<c16', 'fortran_order': False, 'shape': (3, 4), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EOPNOTSUPP);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EOPNOTSUPP);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EOPNOTSUPP);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 0), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	n = hdr(b, 1, "{'descr': '<f8', 'shape': (3, 4), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'x': 1}\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, -4), }\n");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	n = hdr(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	n = hdr(b, 4, "{}");
	assert_int_equal(gs_nd_npy_parse(b, n, &t, &es, &nd, s), -EINVAL);
	assert_int_equal(gs_nd_npy_parse("PK\3\4zipfile", 12, &t, &es, &nd, s), -EINVAL);
	assert_int_equal(gs_nd_npy_parse("\x93NU", 3, &t, &es, &nd, s), -EAGAIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write),
		cmocka_unit_test(test_write_scalar),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
