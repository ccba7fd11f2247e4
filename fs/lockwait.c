// SPDX-License-Identifier: MIT
/*
 * The image lock (one flock per image: exclusive for a read-write mount or
 * repair, shared for read-only ones) and waiting for its holder to finish.
 *
 * umount(2) of a FUSE mount returns before the daemon has written its cache
 * back and checkpointed its journal; until it exits it holds the lock.  A
 * new mount or an fsck that finds the image locked and not mounted anywhere
 * waits for that, as long as the holder keeps doing I/O: /proc/locks names
 * the holder, /proc/PID/io shows its progress.  A mounted image (the mount
 * table has it) is refused at once: its daemon is not going away.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fs_internal.h"
#include "mountinfo.h"

#define WAIT_STALL_S	60	/* the holder did no I/O this long: it is not finishing */
#define WAIT_BLIND_S	60	/* holder or its counters unknown: wait this long at most */
#define WAIT_SAY_S	5	/* a line on progress this often */
#define WAIT_QUIET_S	5	/* a wait shorter than this says nothing: scripts compare
				 * output, and a just-unmounted daemon writing back its
				 * dirty limit under load takes seconds (xfstests'
				 * generic/128 saw 2.1 s on a loaded machine) */
#define WAIT_POLL_MS	100	/* how soon a release is noticed */

char *gs_fs_find_mount(const char *image)
{
	char path[PATH_MAX], line[3 * PATH_MAX];
	char *found = NULL;
	FILE *f;

	if (!realpath(image, path))
		return NULL;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char *mnt, *sep, *type, *src, *save;

		/* id parent maj:min root MOUNT opts [optional...] - TYPE SOURCE superopts */
		strtok_r(line, " ", &save);
		for (int i = 0; i < 3; i++)
			strtok_r(NULL, " ", &save);
		mnt = strtok_r(NULL, " ", &save);
		sep = strstr(save, " - ");
		if (!mnt || !sep)
			continue;
		type = strtok_r(sep + 3, " ", &save);
		src = strtok_r(NULL, " ", &save);
		if (!type || !src || strcmp(type, "fuse.gstorefs"))
			continue;
		gs_mountinfo_unescape(src);
		gs_mountinfo_unescape(mnt);
		if (!strcmp(src, path))
			found = strdup(mnt);
	}
	fclose(f);
	return found;
}

struct holder {
	int pid;		/* 0: not known */
	char comm[32];
	bool io_known;
	uint64_t io;		/* every counter of /proc/PID/io summed: moves with any I/O */
	uint64_t written;	/* write_bytes: what reached the block layer */
};

/* The process holding a lock on @st's file, from /proc/locks (not us). */
static int holder_pid(const struct stat *st)
{
	char line[256], kind[16];
	int pid, found = 0, ino_only = 0;
	unsigned int maj, min;
	unsigned long ino;
	FILE *f = fopen("/proc/locks", "re");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:00:56789 0 EOF"; "->" lines wait */
		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", kind, &pid, &maj, &min,
			   &ino) != 5 || strcmp(kind, "FLOCK") || ino != st->st_ino ||
		    pid == getpid())
			continue;
		if (maj == major(st->st_dev) && min == minor(st->st_dev))
			found = pid;
		else if (!ino_only)
			ino_only = pid;	/* btrfs and overlayfs report other devices */
	}
	fclose(f);
	return found ? found : ino_only;
}

static void holder_read(struct holder *h, const struct stat *st)
{
	char p[64], line[128];
	FILE *f;
	int pid = holder_pid(st);

	if (pid != h->pid) {
		memset(h, 0, sizeof(*h));
		h->pid = pid;
		snprintf(h->comm, sizeof(h->comm), "pid %d", pid);
		snprintf(p, sizeof(p), "/proc/%d/comm", pid);
		f = pid ? fopen(p, "re") : NULL;
		if (f) {
			if (fgets(line, sizeof(line), f)) {
				line[strcspn(line, "\n")] = 0;
				snprintf(h->comm, sizeof(h->comm), "%.20s", line);
			}
			fclose(f);
		}
	}
	h->io_known = false;
	if (!pid)
		return;
	/* readable by the holder's user and root (ptrace rules) */
	snprintf(p, sizeof(p), "/proc/%d/io", pid);
	f = fopen(p, "re");
	if (!f)
		return;
	h->io = 0;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		uint64_t v;

		if (!colon)
			continue;
		v = strtoull(colon + 1, NULL, 10);
		h->io += v;
		if (!strncmp(line, "write_bytes:", 12))
			h->written = v;
		h->io_known = true;
	}
	fclose(f);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait for the holder of @fd's image to let go; 0 once we hold the lock. */
static int lock_wait(int fd, const char *path, int how)
{
	struct holder h = {0};
	struct stat st;
	double t0 = mono_s(), said, moved, now;
	uint64_t last_io, w0;
	char *mnt;

	mnt = gs_fs_find_mount(path);
	if (mnt) {
		gs_err("%s is mounted at %s", path, mnt);
		free(mnt);
		return -EBUSY;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	holder_read(&h, &st);
	said = 0;
	moved = t0;
	last_io = h.io;
	w0 = h.written;
	for (;;) {
		struct timespec ts = { 0, WAIT_POLL_MS * 1000000L };
		int pid = h.pid;

		nanosleep(&ts, NULL);
		if (!flock(fd, how | LOCK_NB))
			break;
		if (errno != EWOULDBLOCK)
			return -errno;
		now = mono_s();
		holder_read(&h, &st);
		if (h.pid != pid || !h.io_known || h.io != last_io) {
			if (h.pid != pid)
				w0 = h.written;
			moved = now;
			last_io = h.io;
		}
		if ((mnt = gs_fs_find_mount(path))) {
			gs_err("%s was mounted at %s meanwhile", path, mnt);
			free(mnt);
			return -EBUSY;
		}
		if (h.io_known ? now - moved >= WAIT_STALL_S : now - t0 >= WAIT_BLIND_S) {
			gs_err("%s: %s (pid %d) still holds it after %.0f s (%s): giving up",
			       path, h.comm, h.pid, now - t0,
			       h.io_known ? "no I/O lately" : "its progress cannot be seen");
			return -EBUSY;
		}
		if (!said && now - t0 >= WAIT_QUIET_S) {
			gs_warn("%s is in use by %s (pid %d), not mounted: waiting for it to "
				"finish (%s)", path, h.pid ? h.comm : "another process", h.pid,
				h.io_known ? "while it does I/O" : "a minute at most");
			said = now;
		} else if (said && now - said >= WAIT_SAY_S) {
			gs_warn("still waiting for %s (pid %d) to release %s: %.0f s, %"
				PRIu64 " MiB written meanwhile", h.comm, h.pid, path, now - t0,
				(h.written - w0) >> 20);
			said = now;
		}
	}
	if (said)
		gs_warn("%s released after %.1f s", path, mono_s() - t0);
	return 0;
}

int fs_lock_image(int fd, const char *path, bool shared, bool wait)
{
	int how = shared ? LOCK_SH : LOCK_EX;

	if (!flock(fd, how | LOCK_NB))
		return 0;
	if (errno != EWOULDBLOCK)
		return -errno;
	if (wait)
		return lock_wait(fd, path, how);
	gs_err("gstore: %s is in use (mounted or being checked)", path);
	return -EBUSY;
}
