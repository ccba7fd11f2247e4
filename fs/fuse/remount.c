// SPDX-License-Identifier: MIT
/*
 * Following remounts.  `mount -o remount,ro DIR` changes the superblock's
 * flags in the kernel (fuse's reconfigure only syncs) and sends no request
 * to the daemon: the kernel then refuses writes through the mount, but the
 * daemon would go on as read-write, with its cache not written back and
 * attach clients still writing.  So the daemon watches the mount table
 * (/proc/self/mountinfo polls POLLPRI on every change in the namespace) and
 * makes the filesystem read-only or read-write as the superblock is.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fuse_internal.h"
#include "gs_log.h"

struct gs_fuse_watch {
	struct gs_fuse *gf;
	unsigned maj, min;	/* the mount's device: its superblock */
	int mfd, efd;		/* mountinfo (polled), the stop eventfd */
	int ro;			/* what the daemon follows now */
	pthread_t thread;
};

/* 1 if the superblock of maj:min is read-only, 0 if not, -ENOENT if gone. */
static int sb_rdonly(unsigned maj, unsigned min)
{
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - ");
		char opts[8];
		unsigned a, b;

		/* ID PARENT MAJ:MIN ROOT DIR OPTS [TAGS] - TYPE SOURCE SUPER_OPTS */
		if (!sep || sscanf(line, "%*u %*u %u:%u", &a, &b) != 2 || a != maj || b != min ||
		    sscanf(sep, " - %*s %*s %7[^,\n]", opts) != 1)
			continue;
		ret = !strcmp(opts, "ro");
		break;
	}
	free(line);
	fclose(f);
	return ret;
}

static void follow(struct gs_fuse_watch *w)
{
	int ro = sb_rdonly(w->maj, w->min), ret;

	if (ro < 0 || ro == w->ro)
		return;		/* unmounted (the session ends), or unchanged */
	ret = gs_fuse_remount(w->gf, ro);
	if (ret < 0) {
		gs_err("remount %s: %s%s", ro ? "read-only" : "read-write",
		       strerror(-ret), ret == -EROFS ? " (mounted read-only, or so until "
		       "fsck: writes stay refused)" : "");
	} else {
		gs_info("remounted %s", ro ? "read-only (written back)" : "read-write");
	}
	w->ro = ro;
}

static void *watch_main(void *arg)
{
	struct gs_fuse_watch *w = arg;
	struct pollfd p[2] = {
		{ .fd = w->mfd, .events = POLLPRI },
		{ .fd = w->efd, .events = POLLIN },
	};

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			gs_err("poll of the mount table: %s: remounts not followed",
			       strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		if (p[0].revents & (POLLPRI | POLLERR))
			follow(w);
	}
	return NULL;
}

int gs_fuse_watch_start(struct gs_fuse_watch **wp, struct gs_fuse *gf, const char *mnt)
{
	struct gs_fuse_watch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->gf = gf;
	w->mfd = w->efd = -1;
	ret = gs_fuse_mount_dev(mnt, &w->maj, &w->min);
	if (ret < 0)
		goto fail;
	w->ro = sb_rdonly(w->maj, w->min);
	if (w->ro < 0) {
		ret = w->ro;
		goto fail;
	}
	w->mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	w->efd = eventfd(0, EFD_CLOEXEC);
	if (w->mfd < 0 || w->efd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&w->thread, NULL, watch_main, w);
	if (ret)
		goto fail;
	*wp = w;
	return 0;
fail:
	if (w->mfd >= 0)
		close(w->mfd);
	if (w->efd >= 0)
		close(w->efd);
	free(w);
	return ret;
}

void gs_fuse_watch_stop(struct gs_fuse_watch *w)
{
	uint64_t one = 1;

	if (!w)
		return;
	if (write(w->efd, &one, sizeof(one)) != sizeof(one)) {
		/* an eventfd write of 1 cannot fail short of overflow */
	}
	pthread_join(w->thread, NULL);
	close(w->mfd);
	close(w->efd);
	free(w);
}
