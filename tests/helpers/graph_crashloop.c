// SPDX-License-Identifier: MIT
/*
 * Helper of tests/integration/graph_crash.sh: a process that updates and
 * merges a graph in a loop until it is killed, and the checks after.
 *
 *   graph_crashloop IMG init   import a random graph "c" (hubs, loops)
 *   graph_crashloop IMG run    forever: a random update batch, sync, note
 *                              the batch as durable, merge
 *   graph_crashloop IMG verify the graph equals the reference after the
 *                              durable batches (or one more: the kill may
 *                              fall between the sync and the note)
 *
 * Batches are deterministic (seeded by their number), so the reference is
 * rebuilt from the base graph and the count in IMG.batches.  Log lines on
 * stderr ("merge N", "graph ...: merge N committed") tell the script where
 * a kill landed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "gstore_graph.h"
#include "../unit/graph/graph_ref.h"

#define NV	6000
#define BATCH	1500

static void log_line(int level, const char *msg, void *arg)
{
	fprintf(stderr, "%s\n", msg);
}

static int mount_img(const char *img, struct gs_fs **fs)
{
	struct gs_fs_opts o = { .path = img, .cache_bytes = 16u << 20 };
	int ret;

	/* the dead predecessor's lock goes with its last io_uring reference */
	for (int i = 0; i < 100; i++) {
		ret = gs_fs_mount(fs, &o);
		if (ret == -EINVAL && !(o.flags & GS_FS_BUFFERED)) {
			o.flags |= GS_FS_BUFFERED;
			ret = gs_fs_mount(fs, &o);
		}
		if (ret != -EBUSY)
			break;
		usleep(100000);
	}
	if (ret)
		fprintf(stderr, "mount %s: %s\n", img, strerror(-ret));
	return ret;
}

static struct ref *base_ref(struct ref_in *in)
{
	*in = ref_random_input(NV, NV * 5, 3, 2500, false, 1);
	return ref_from_input(in, NV, true, true);
}

/* The reference after batches 1..k; each batch's text into *text. */
static struct ref *ref_after(uint64_t k, char *buf, size_t size)
{
	struct ref_in in;
	struct ref *r = base_ref(&in);

	for (uint64_t b = 1; b <= k; b++) {
		uint64_t x = b * 7919 + 1;

		ref_random_updates(r, &x, buf, size, BATCH);
	}
	ref_in_free(&in);
	return r;
}

static uint64_t batches(const char *img)
{
	char path[4096], s[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s.batches", img);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(s, sizeof(s), f))
			s[0] = 0;
		fclose(f);
	}
	return strtoull(s, NULL, 10);
}

static int note_batches(const char *img, uint64_t k)
{
	char path[4096], tmp[4200], s[32];
	int fd, n = snprintf(s, sizeof(s), "%llu\n", (unsigned long long)k);

	snprintf(path, sizeof(path), "%s.batches", img);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, s, (size_t)n) != n || fsync(fd) || close(fd))
		return -1;
	return rename(tmp, path);
}

static int do_init(struct gs_fs *fs, const char *img)
{
	struct gs_graph_import_opts o = {
		.nv = NV, .chain_max = 1000,
		.flags = GS_GRAPH_IMPORT_DIRECTED | GS_GRAPH_IMPORT_WEIGHTED |
			 GS_GRAPH_IMPORT_SLACK,
	};
	char path[4096];
	struct ref_in in;
	struct ref *r = base_ref(&in);
	int ret;

	snprintf(path, sizeof(path), "%s.txt", img);
	write_text(path, &in, true, true);
	ret = gs_graph_import(fs, "c", path, &o);
	unlink(path);
	ref_in_free(&in);
	ref_free(r);
	return ret || note_batches(img, 0) ? 1 : 0;
}

static int do_run(struct gs_fs *fs, const char *img, char *buf, size_t size)
{
	uint64_t k = batches(img);
	struct ref *r = ref_after(k, buf, size);
	struct gs_graph *g;
	int ret = gs_graph_open(fs, "c", 0, &g);

	if (ret)
		return fprintf(stderr, "open: %s\n", strerror(-ret)), 1;
	for (;;) {
		uint64_t x = (k + 1) * 7919 + 1, line;
		size_t len = ref_random_updates(r, &x, buf, size, BATCH);

		ret = gs_graph_update(g, buf, len, &line);
		if (ret < 0)
			return fprintf(stderr, "batch %llu line %llu: %s\n",
				       (unsigned long long)k + 1, (unsigned long long)line,
				       strerror(-ret)), 1;
		ret = gs_graph_sync(g);
		if (ret || note_batches(img, ++k))
			return fprintf(stderr, "sync: %s\n", strerror(-ret)), 1;
		fprintf(stderr, "merge %llu\n", (unsigned long long)k);
		ret = gs_graph_merge(g);
		if (ret)
			return fprintf(stderr, "merge: %s\n", strerror(-ret)), 1;
		fprintf(stderr, "merged %llu\n", (unsigned long long)k);
	}
}

static int do_verify(struct gs_fs *fs, const char *img, char *buf, size_t size)
{
	uint64_t k = batches(img);
	struct ref *r = ref_after(k, buf, size);
	struct gs_graph *g;
	int ret = gs_graph_open(fs, "c", 0, &g);

	if (ret)
		return fprintf(stderr, "open: %s\n", strerror(-ret)), 1;
	if (ref_compare(r, g)) {
		uint64_t x = (k + 1) * 7919 + 1;

		/* the batch after the last noted one may have been synced */
		ref_random_updates(r, &x, buf, size, BATCH);
		if (ref_compare(r, g))
			return fprintf(stderr, "graph differs after %llu batches\n",
				       (unsigned long long)k), 1;
		note_batches(img, k + 1);
	}
	ref_free(r);
	return gs_graph_close(g) ? 1 : 0;
}

int main(int argc, char **argv)
{
	size_t size = 4u << 20;
	char *buf = malloc(size);
	struct gs_fs *fs;
	int status;

	if (argc != 3 || !buf) {
		fprintf(stderr, "usage: graph_crashloop IMG init|run|verify\n");
		return 2;
	}
	gs_set_log_func(log_line, NULL);
	if (mount_img(argv[1], &fs))
		return 1;
	if (!strcmp(argv[2], "init"))
		status = do_init(fs, argv[1]);
	else if (!strcmp(argv[2], "run"))
		status = do_run(fs, argv[1], buf, size);
	else
		status = do_verify(fs, argv[1], buf, size);
	if (gs_fs_unmount(fs))
		status = 1;
	free(buf);
	return status;
}
