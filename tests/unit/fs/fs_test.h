/* SPDX-License-Identifier: MIT */
/* Helpers shared by the fs unit tests: scratch images and mounts. */
#ifndef GS_FS_TEST_H
#define GS_FS_TEST_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_fs.h"

static inline void test_log(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= GS_LOG_WARN || getenv("GS_TEST_VERBOSE"))
		fprintf(stderr, "log[%d]: %s\n", level, msg);
}

/* fsck's findings, one line each (a gs_fsck_report for gs_fs_fsck()). */
struct test_lines {
	char buf[16384];
	size_t len;
};

static inline void test_lines_add(void *arg, const char *line)
{
	struct test_lines *l = arg;
	int n = snprintf(l->buf + l->len, sizeof(l->buf) - l->len, "%s\n", line);

	if (n > 0 && l->len + n < sizeof(l->buf))
		l->len += n;
	if (getenv("GS_TEST_VERBOSE"))
		fprintf(stderr, "fsck: %s\n", line);
}

/* A fresh path for an image in $TMPDIR (or /tmp). */
static inline char *test_image_path(const char *tag)
{
	const char *dir = getenv("TMPDIR");
	char *p = malloc(512);

	snprintf(p, 512, "%s/gs-%s-%d.img", dir && *dir ? dir : "/tmp", tag, (int)getpid());
	unlink(p);
	return p;
}

static inline int test_mkfs(const char *path, uint64_t size, uint32_t bs)
{
	struct gs_mkfs_opts o = { .size = size, .block_size = bs, .force = 1 };

	return gs_fs_mkfs(path, &o);
}

/* Mount with a small cache; falls back to buffered I/O where O_DIRECT fails. */
static inline int test_mount_fault(struct gs_fs **fs, const char *path, const char *fault)
{
	struct gs_fs_opts o = { .path = path, .cache_bytes = 8u << 20, .fault = fault };
	int ret = gs_fs_mount(fs, &o);

	if (ret == -EINVAL) {
		o.flags |= GS_FS_BUFFERED;
		ret = gs_fs_mount(fs, &o);
	}
	return ret;
}

static inline int test_mount(struct gs_fs **fs, const char *path)
{
	return test_mount_fault(fs, path, NULL);
}

/* A fresh scratch image of @size bytes, mounted; *arrays: the arrays/ dir. */
static inline int test_scratch(const char *tag, uint64_t size, char **img, struct gs_fs **fs,
			       uint64_t *arrays)
{
	struct gs_stat st;

	gs_set_log_func(test_log, NULL);
	*img = test_image_path(tag);
	if (test_mkfs(*img, size, 4096) || test_mount(fs, *img))
		return -1;
	if (arrays && gs_fs_lookup(*fs, GS_ROOT_INO, "arrays", &st))
		return -1;
	if (arrays)
		*arrays = st.ino;
	return 0;
}

static inline int test_scratch_end(char *img, struct gs_fs *fs)
{
	gs_fs_unmount(fs);
	unlink(img);
	free(img);
	return 0;
}

static inline void test_fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

#endif
