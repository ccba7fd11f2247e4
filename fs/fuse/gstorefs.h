/* SPDX-License-Identifier: MIT */
/*
 * The FUSE front end as the daemon's main (bin/gstorefs.c) sees it: build a
 * session over a mounted gs_fs, run it, destroy it.  The only header of
 * fs/fuse/ that the build lets bin/gstorefs.c include (-Ifs/fuse for it alone);
 * the handlers and the virtual-node layer stay in fuse_internal.h.
 */
#ifndef GS_FS_FUSE_GSTOREFS_H
#define GS_FS_FUSE_GSTOREFS_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#include "gstore_fs.h"
/* the attach server, which serves the same mount to other processes */
#include "attach_srv.h"

struct gs_fuse;

/* -o uring=: the transport (fs/fuse/uring.h) */
enum gs_fuse_uring_mode {
	GS_FUSE_URING_AUTO = 0,	/* FUSE over io_uring when the kernel offers it at FUSE_INIT */
	GS_FUSE_URING_ON,	/* required: the mount fails without it */
	GS_FUSE_URING_OFF,	/* classic /dev/fuse only */
};

struct gs_fuse_conf {
	unsigned rdonly;	/* mounted -o ro */
	double timeout;		/* attr/entry cache timeout, seconds (< 0: default 1.0) */
	unsigned readahead_kib;	/* kernel read-ahead window, KiB (0: the kernel's) */
	int uring;		/* enum gs_fuse_uring_mode */
	unsigned threads;	/* worker threads at most (0: 64); the ring's too */
	unsigned stream_ra_kib;	/* the daemon's read-ahead for sequential readers, KiB (0: off) */
	uint64_t kdirty_bytes;	/* the kernel's dirty pages of the mount at most (0: its 1 %) */
};

/* Build the session (fuse_session_new with our ops) over a mounted @fs.
 * @args: the FUSE options (libfuse consumes what it knows). */
int gs_fuse_new(struct gs_fuse **gfp, struct gs_fs *fs, const struct gs_fuse_conf *conf,
		struct fuse_args *args);
struct fuse_session *gs_fuse_session(struct gs_fuse *gf);
/* Destroys the session; the caller unmounts @fs afterwards. */
void gs_fuse_destroy(struct gs_fuse *gf);
/* After fuse_session_mount(), before the loop: widen the kernel's read-ahead
 * for the mount at @mnt to conf->readahead_kib (the bdi's read_ahead_kb;
 * needs root).  0, or -errno (nothing changed). */
int gs_fuse_set_readahead(struct gs_fuse *gf, const char *mnt);
/* Likewise: let the kernel hold up to conf->kdirty_bytes of the mount's dirty
 * pages (mmap writes, before their write-back) under the global dirty limits,
 * instead of FUSE's strict 1 % share: the bdi's max_bytes, strict_limit 0
 * (Linux 6.2+; root).  0, or -errno. */
int gs_fuse_set_dirty(struct gs_fuse *gf, const char *mnt);
/* After fuse_session_mount(), before the loop: hook the session so that
 * FUSE_INIT can switch it to FUSE over io_uring (conf->uring).  0, or
 * -EOPNOTSUPP when uring=on and this kernel cannot. */
int gs_fuse_start_transport(struct gs_fuse *gf);

/* The device layout of graph object @ino (@gf: the struct gs_fuse) from the
 * handle the mount serves it with: the attach server's graph_layout hook. */
int gs_fuse_graph_layout(void *gf, uint64_t ino, struct gs_graph_layout **lp);

/* Read-only (@ro) or read-write: gs_fs_remount() and the session's own
 * refusals (EROFS).  0, or -errno (nothing changed). */
int gs_fuse_remount(struct gs_fuse *gf, int ro);

/*
 * Remounts (mount -o remount,ro|rw by any tool: the kernel changes the
 * superblock's flags and tells no FUSE daemon) are followed by a thread that
 * watches /proc/self/mountinfo and calls gs_fuse_remount() when the mount's
 * ro/rw changes (fs/fuse/remount.c).  Start after fuse_session_mount(), with
 * the termination signals blocked; stop before gs_fuse_destroy().
 */
struct gs_fuse_watch;
int gs_fuse_watch_start(struct gs_fuse_watch **wp, struct gs_fuse *gf, const char *mnt);
void gs_fuse_watch_stop(struct gs_fuse_watch *w);

#endif /* GS_FS_FUSE_GSTOREFS_H */
