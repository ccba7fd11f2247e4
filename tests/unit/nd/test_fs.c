// SPDX-License-Identifier: MIT
/*
 * N-D spaces on a real gs_fs image: automatic block shape from the device,
 * blocks as single contiguous extents, random writes and reads against a
 * dense reference, persistence across unmount/mount, sparse allocation
 * (st_blocks), and space returned when the space is removed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../fs/fs_test.h"
#include "gstore_nd.h"
#include "gstore_q.h"
#include "nd_ref.h"

static char *img;

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("nd");
	return test_mkfs(img, 128u << 20, 4096);
}

static int teardown(void **state)
{
	unlink(img);
	free(img);
	return 0;
}

static struct gs_fs *mount_img(void)
{
	struct gs_fs *fs = NULL;

	assert_int_equal(test_mount(&fs, img), 0);
	return fs;
}

static void test_roundtrip(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_F64, .ndims = 2, .shape = { 1000, 700 } };
	const uint64_t n = 1000 * 700;
	struct gs_fs *fs = mount_img();
	struct gs_fs_statfs sf0, sf1;
	struct gs_nd_info in;
	struct gs_q_geom g;
	uint64_t bb[8], ino;
	struct gs_nd *nd;
	struct gs_stat st;
	double *ref = calloc(n, 8), *buf = malloc(n * 8);

	assert_int_equal(gs_fs_statfs(fs, &sf0), 0);
	assert_int_equal(gs_nd_create(fs, 0, "m", &p, 0755, &nd), 0);
	assert_int_equal(gs_nd_create(fs, 0, "m", &p, 0755, NULL), -EEXIST);
	assert_int_equal(gs_nd_lookup(fs, "m", &ino), 0);
	assert_int_equal(gs_nd_lookup(fs, "nope", &ino), -ENOENT);
	/* the block shape is what the device geometry gives */
	assert_int_equal(gs_fs_geometry(fs, &g), 0);
	assert_int_equal(gs_nd_block_shape(&p, &g, bb), 0);
	assert_int_equal(gs_nd_get_info(nd, &in), 0);
	assert_true(in.p.bb[0] == bb[0] && in.p.bb[1] == bb[1]);
	assert_true(in.blocks_written == 0);

	for (int i = 0; i < 40; i++) {
		uint64_t s[2], c[2], k = 0;

		s[0] = rnd_in(0, 999);
		s[1] = rnd_in(0, 699);
		c[0] = rnd_in(1, 1000 - s[0]);
		c[1] = rnd_in(1, 700 - s[1]);
		if (i < 5)	/* keep the last column of blocks unwritten */
			c[1] = s[1] + c[1] > 400 ? 1 : c[1];
		if (rnd() % 2) {
			for (uint64_t j = 0; j < c[0] * c[1]; j++)
				buf[j] = (double)rnd();
			assert_int_equal(gs_nd_write_slab(nd, s, c, NULL, buf, c[0] * c[1] * 8),
					 (ssize_t)(c[0] * c[1] * 8));
			for (uint64_t r = 0; r < c[0]; r++)
				for (uint64_t q = 0; q < c[1]; q++)
					ref[(s[0] + r) * 700 + s[1] + q] = buf[k++];
		} else {
			assert_int_equal(gs_nd_read_slab(nd, s, c, NULL, buf, c[0] * c[1] * 8),
					 (ssize_t)(c[0] * c[1] * 8));
			for (uint64_t r = 0; r < c[0]; r++)
				for (uint64_t q = 0; q < c[1]; q++)
					assert_true(buf[k++] == ref[(s[0] + r) * 700 + s[1] + q]);
		}
	}
	assert_int_equal(gs_nd_close(nd), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);

	fs = mount_img();
	assert_int_equal(gs_nd_lookup(fs, "m", &ino), 0);
	assert_int_equal(gs_nd_open(fs, ino, &nd), 0);
	assert_int_equal(gs_nd_pread_sel(nd, NULL, buf, n * 8, 0), (ssize_t)(n * 8));
	assert_memory_equal(buf, ref, n * 8);
	/* sparse: only written blocks hold extents */
	assert_int_equal(gs_nd_get_info(nd, &in), 0);
	assert_true(in.blocks_written > 0 && in.blocks_written <= in.blocks_total);
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_true((sf0.bfree - sf1.bfree) * sf1.block_size >=
		    in.blocks_written * in.block_stride);
	assert_true((sf0.bfree - sf1.bfree) * sf1.block_size <=
		    in.blocks_written * in.block_stride + (4u << 20));
	assert_int_equal(gs_fs_getattr(fs, ino, &st), 0);
	assert_int_equal(st.type, GS_T_ND);
	assert_int_equal(gs_nd_close(nd), 0);
	/* format refuses a formatted space */
	assert_int_equal(gs_nd_format(fs, ino, &p), -EEXIST);
	/* removing the space gives its blocks back */
	uint64_t nddir;

	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st), 0);
	nddir = st.ino;
	assert_int_equal(gs_fs_rmdir(fs, nddir, "m"), 0);
	assert_int_equal(gs_fs_statfs(fs, &sf1), 0);
	assert_true(sf1.bfree + 8 >= sf0.bfree);
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(ref);
	free(buf);
}

/* Unformatted objects, bad parameters, a space larger than the device (sparse). */
static void test_params(void **state)
{
	struct gs_nd_params p = { .dtype = GS_ND_U8, .ndims = 3,
				  .shape = { 1 << 20, 1 << 20, 1 << 20 } };
	struct gs_fs *fs = mount_img();
	struct gs_nd *nd;
	struct gs_stat st;
	uint64_t c[3] = { 5, 6, 7 }, one[3] = { 1, 1, 1 }, ino;
	unsigned char v = 7;

	assert_int_equal(gs_nd_create(fs, 0, "huge", &p, 0755, &nd), 0);
	assert_int_equal(gs_nd_write_slab(nd, c, one, NULL, &v, 1), 1);
	assert_int_equal(gs_nd_close(nd), 0);
	assert_int_equal(gs_nd_lookup(fs, "huge", &ino), 0);
	assert_int_equal(gs_nd_open(fs, ino, &nd), 0);
	v = 0;
	assert_int_equal(gs_nd_read_slab(nd, c, one, NULL, &v, 1), 1);
	assert_int_equal(v, 7);
	assert_int_equal(gs_nd_close(nd), 0);

	p.ndims = 0;
	assert_int_equal(gs_nd_create(fs, 0, "bad", &p, 0755, NULL), -EINVAL);
	assert_int_equal(gs_nd_lookup(fs, "bad", &ino), -ENOENT);
	/* a GS_T_ND object nobody formatted yet */
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st), 0);
	assert_int_equal(gs_fs_create(fs, st.ino, "raw", GS_T_ND, 0755, 0, 0, &st), 0);
	assert_int_equal(gs_nd_open(fs, st.ino, &nd), -ENODATA);
	p.ndims = 1;
	p.shape[0] = 10;
	assert_int_equal(gs_nd_format(fs, st.ino, &p), 0);
	assert_int_equal(gs_nd_open(fs, st.ino, &nd), 0);
	assert_int_equal(gs_nd_close(nd), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_params),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
