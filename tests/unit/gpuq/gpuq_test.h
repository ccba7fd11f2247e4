/* SPDX-License-Identifier: MIT */
/* Shared bits of the gpuq tests: a temporary image file and a queue on it. */
#ifndef GPUQ_TEST_H
#define GPUQ_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gstore.h"

#define TQ_UNUSED __attribute__((unused))

static char tq_dir[256], tq_img[300];
static int tq_buffered;	/* the temp filesystem refused O_DIRECT */

static void tq_log(int level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "gstore[%d]: %s\n", level, msg);
}

/* Make a temp dir for the image; returns 0 or -errno. */
TQ_UNUSED static int tq_setup_dir(void)
{
	const char *t = getenv("TMPDIR");

	gs_set_log_func(tq_log, NULL);
	snprintf(tq_dir, sizeof(tq_dir), "%s/gpuq-test-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tq_dir))
		return -errno;
	snprintf(tq_img, sizeof(tq_img), "%s/img", tq_dir);
	return 0;
}

TQ_UNUSED static void tq_cleanup_dir(void)
{
	unlink(tq_img);
	rmdir(tq_dir);
}

TQ_UNUSED static int tq_group_setup(void **state)
{
	(void)state;
	return tq_setup_dir();
}

TQ_UNUSED static int tq_group_teardown(void **state)
{
	(void)state;
	tq_cleanup_dir();
	return 0;
}

/* Run a group (TEST_FILTER=name picks tests); with a temp dir if @dir. */
#define tq_run(tests, dir)							\
	(getenv("TEST_FILTER") ? cmocka_set_test_filter(getenv("TEST_FILTER")) : (void)0, \
	 _cmocka_run_group_tests(#tests, tests, sizeof(tests) / sizeof((tests)[0]),	\
				 (dir) ? tq_group_setup : NULL,			\
				 (dir) ? tq_group_teardown : NULL))

/* Open a queue on a fresh image of @size bytes; O_DIRECT when possible. */
TQ_UNUSED static int tq_open(struct gs_q **q, struct gs_q_params *p, uint64_t size)
{
	int ret;

	unlink(tq_img);
	p->path = tq_img;
	p->size = size;
	p->flags |= GS_Q_CREATE | (tq_buffered ? GS_Q_BUFFERED : 0);
	ret = gs_q_open(q, p);
	if (ret == -EINVAL && !(p->flags & GS_Q_BUFFERED)) {
		fprintf(stderr, "O_DIRECT refused on %s: buffered I/O\n", tq_dir);
		tq_buffered = 1;
		unlink(tq_img);
		p->flags |= GS_Q_BUFFERED;
		ret = gs_q_open(q, p);
	}
	return ret;
}

TQ_UNUSED static void *tq_alloc(size_t len)
{
	void *p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);

	if (p)
		memset(p, 0, len);
	return p;
}

/* A pattern that names its block and a generation. */
TQ_UNUSED static void tq_fill(void *buf, size_t len, uint64_t blk, uint32_t gen)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = (blk << 32 | gen) ^ (i * 0x9e3779b97f4a7c15ull);
}

TQ_UNUSED static int tq_check(const void *buf, size_t len, uint64_t blk, uint32_t gen)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != ((blk << 32 | gen) ^ (i * 0x9e3779b97f4a7c15ull)))
			return 0;
	return 1;
}

#endif
