// SPDX-License-Identifier: MIT
/*
 * Graphs on a real gs_fs image: import under graph/NAME (atomic publish,
 * nothing visible on a bad input, -EEXIST / replace), queries against the
 * reference, updates + merge across unmount/mount, the CSR baseline
 * answering the same, apps equal on both engines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "../fs/fs_test.h"
#include "../../../fs/graph/graph_internal.h"
#include "graph_ref.h"

static char *img;
static char txt[256];

static struct gs_fs *mount_img(void)
{
	struct gs_fs *fs = NULL;

	assert_int_equal(test_mount(&fs, img), 0);
	return fs;
}

static int setup(void **state)
{
	gs_set_log_func(test_log, NULL);
	img = test_image_path("graph");
	snprintf(txt, sizeof(txt), "%s.txt", img);
	return test_mkfs(img, 64u << 20, 4096);
}

static int teardown(void **state)
{
	unlink(img);
	unlink(txt);
	free(img);
	return 0;
}

static void test_import_query_update(void **state)
{
	struct ref_in in = ref_random_input(1200, 6000, 2, 1500, false, 42);
	struct ref *r = ref_from_input(&in, 1200, false, true);
	struct gs_graph_import_opts o = { .nv = 1200, .flags = GS_GRAPH_IMPORT_UNDIRECTED |
							     GS_GRAPH_IMPORT_WEIGHTED };
	struct gs_fs *fs = mount_img();
	struct gs_graph *g;
	struct gs_stat st;
	uint64_t dir, x = 9;
	char *buf = malloc(1 << 20), err[200];

	write_text(txt, &in, false, true);
	assert_int_equal(gs_graph_import(fs, "g1", txt, &o), 0);
	assert_int_equal(gs_graph_import(fs, "g1", txt, &o), -EEXIST);
	assert_int_equal(gs_graph_import(fs, ".hidden", txt, &o), -EINVAL);
	assert_int_equal(gs_graph_open(fs, "g1", 0, &g), 0);
	assert_int_equal(ref_compare(r, g), 0);
	for (int round = 0; round < 4; round++) {
		ref_random_updates(r, &x, buf, 1 << 20, 300);
		assert_true(gs_graph_update(g, buf, strlen(buf), NULL) >= 0);
		if (round % 2)
			assert_int_equal(gs_graph_merge(g), 0);
		assert_int_equal(gs_graph_close(g), 0);
		assert_int_equal(gs_fs_unmount(fs), 0);
		fs = mount_img();
		assert_int_equal(gs_graph_open(fs, "g1", 0, &g), 0);
		assert_int_equal(ref_compare(r, g), 0);
	}
	assert_int_equal(gs_graph_close(g), 0);

	/* a bad input publishes nothing and keeps the old graph */
	FILE *f = fopen(txt, "w");

	fprintf(f, "0 1 1\n1 2 x\n");
	fclose(f);
	o.err = err;
	o.errlen = sizeof(err);
	o.flags |= GS_GRAPH_IMPORT_REPLACE;
	assert_int_equal(gs_graph_import(fs, "g1", txt, &o), -EINVAL);
	assert_non_null(strstr(err, "line 2"));
	assert_int_equal(gs_graph_import(fs, "g2", txt, &o), -EINVAL);
	assert_int_equal(gr_graph_dir(fs, &dir), 0);
	assert_int_equal(gs_fs_lookup(fs, dir, "g2", &st), -ENOENT);
	assert_int_equal(gs_fs_lookup(fs, dir, ".g2~import", &st), -ENOENT);
	assert_int_equal(gs_graph_open(fs, "g1", 0, &g), 0);
	assert_int_equal(ref_compare(r, g), 0);
	gs_graph_close(g);
	/* replace */
	f = fopen(txt, "w");
	fprintf(f, "0 1 1\n1 2 3\n");
	fclose(f);
	assert_int_equal(gs_graph_import(fs, "g1", txt, &o), 0);
	assert_int_equal(gs_graph_open(fs, "g1", 0, &g), 0);
	assert_int_equal(gs_graph_degree(g, 1, GS_GRAPH_OUT), 2);
	gs_graph_close(g);
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(buf);
	ref_free(r);
	ref_in_free(&in);
}

static void test_csr_baseline(void **state)
{
	struct ref_in in = ref_random_input(1000, 4000, 2, 1500, false, 7);
	struct ref *r = ref_from_input(&in, 1000, true, true);
	struct gs_graph_import_opts o = { .nv = 1000, .flags = GS_GRAPH_IMPORT_DIRECTED |
							     GS_GRAPH_IMPORT_WEIGHTED };
	struct gs_fs *fs = mount_img();
	struct gs_graph *g, *c;
	int64_t *d1 = malloc(1000 * 8), *d2 = malloc(1000 * 8);
	uint64_t *l1 = malloc(1000 * 8), *l2 = malloc(1000 * 8);
	struct gs_graph_info gi, ci;

	write_text(txt, &in, true, true);
	assert_int_equal(gs_graph_import(fs, "d1", txt, &o), 0);
	assert_int_equal(gs_graph_open(fs, "d1", 0, &g), 0);
	assert_int_equal(gs_graph_export_csr(g, "d1csr"), 0);
	assert_int_equal(gs_graph_open_csr(fs, "d1csr", &c), 0);
	assert_int_equal(ref_compare(r, c), 0);
	assert_int_equal(gs_graph_update(c, "+ 0 1", 5, NULL), -EOPNOTSUPP);
	assert_int_equal(gs_graph_bfs(g, 5, d1, NULL), 0);
	assert_int_equal(gs_graph_bfs(c, 5, d2, NULL), 0);
	assert_memory_equal(d1, d2, 1000 * 8);
	assert_int_equal(gs_graph_cc(g, l1, NULL), gs_graph_cc(c, l2, NULL));
	assert_memory_equal(l1, l2, 1000 * 8);
	gs_graph_info(g, &gi);
	gs_graph_info(c, &ci);
	assert_int_equal(gi.nv, ci.nv);
	assert_int_equal(gi.ne, ci.ne);
	assert_true(gi.disk_bytes > 0 && ci.disk_bytes > 0);
	gs_graph_close(c);
	gs_graph_close(g);
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(d1);
	free(d2);
	free(l1);
	free(l2);
	ref_free(r);
	ref_in_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_import_query_update),
		cmocka_unit_test(test_csr_baseline),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
