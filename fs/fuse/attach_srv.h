/* SPDX-License-Identifier: MIT */
/*
 * The attach server: the daemon side of uapi/gstore_attach.h.  It lives with
 * the FUSE front end because it serves the same mount, to the same users,
 * under the same rules: a client's credentials (SO_PEERCRED) are checked
 * against each object as open(2) checks them on the mount, and what a
 * client may reach is bounded by the fs core (direct leases bound to its
 * rings, gs_fs_ring_bind()), never by the client's good behaviour.
 */
#ifndef GS_FS_FUSE_ATTACH_SRV_H
#define GS_FS_FUSE_ATTACH_SRV_H

#include <stdint.h>

#include "gstore_fs.h"

struct gs_graph_layout;

struct gs_attach_srv;

struct gs_attach_srv_params {
	const char *sock_path;	/* created mode 0666: who may attach is decided per OPEN */
	struct gs_fs *fs;
	uint32_t max_clients;	/* connections at once (0: 64) */
	uint32_t max_per_user;	/* of them, one uid's (0: 16) */
	/*
	 * Others than the daemon's own user may attach (the mount has
	 * allow_other: FUSE lets them in too); otherwise they get -EACCES
	 * whatever the object's mode, as the kernel refuses them the mount.
	 */
	int allow_other;
	/* After SYNC has dropped the daemon's cached copies of @ino: caches
	 * above it (the kernel's page cache of a FUSE mount) drop theirs. */
	void (*synced)(void *arg, uint64_t ino);
	void *arg;
	/* GRAPH: the device layout of graph object @ino from the handle the
	 * mount serves it with (gs_graph_layout_get(): pending updates merged
	 * first).  NULL: the server opens the graph itself for the call (no
	 * other handle may hold updates of it then: tests, tools). */
	int (*graph_layout)(void *garg, uint64_t ino, struct gs_graph_layout **lp);
	void *garg;
};

/* Listen on p->sock_path and serve each client from a thread of its own
 * until gs_attach_stop(). */
int gs_attach_start(struct gs_attach_srv **sp, const struct gs_attach_srv_params *p);
/* Disconnect every client (their rings and leases go), remove the socket. */
void gs_attach_stop(struct gs_attach_srv *s);

#endif /* GS_FS_FUSE_ATTACH_SRV_H */
