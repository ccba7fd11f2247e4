/* SPDX-License-Identifier: MIT */
/*
 * Attaching other processes to a running daemon's I/O core.
 *
 * The daemon (gstorefs, or any program holding a gs_q) listens on a Unix
 * socket next to its mount point (gs_attach_sock_path()).  A client — a
 * CUDA program, a CLI command — connects and asks for:
 *   OPEN  a path under the mount: the object's size and its extents
 *         (device byte offsets), so it can address blocks directly;
 *   RING  a request ring plus a buffer region in one memfd, passed with
 *         SCM_RIGHTS together with the queue's kick eventfd; the daemon
 *         maps the same memfd and adds the ring to its pollers (with
 *         GS_SQE_BUF_OFF offsets into the region);
 *   SYNC  "I wrote to this object behind your cache": the daemon drops
 *         its cached lines of it.
 * Many clients share the daemon's pollers and its one device.  When a
 * client goes away its rings are removed and unmapped.
 *
 * Wire format: struct gs_att_msg, host byte order (both ends are on one
 * machine), optionally followed by @len payload bytes; every request gets
 * exactly one reply with the same op.
 *
 * Who may attach: a ring reaches the whole device (requests carry device
 * offsets), so only root and the daemon's own user may; the others get
 * -EPERM.  Per-ring bounds checking in the pollers would lift this.
 */
#ifndef GS_GPUQ_ATTACH_H
#define GS_GPUQ_ATTACH_H

#include <stddef.h>
#include <stdint.h>

#include "gstore_q.h"

#ifdef __cplusplus
extern "C" {
#endif
/* the CUDA library (libgstore_cuda.a) is a client of these in libgstore.so */
#pragma GCC visibility push(default)

struct gs_fs;
struct gs_attach_srv;
struct gs_attach;

#define GS_ATT_MAGIC	0x54415347u	/* "GSAT" */
#define GS_ATT_VERSION	1u
#define GS_ATT_PATH_MAX	4096
#define GS_ATT_MAX_EXT	65536

enum gs_att_op {
	GS_ATT_HELLO = 1,	/* reply: arg0 lba size, arg1 capacity */
	GS_ATT_OPEN = 2,	/* payload path; arg0 block size; reply: arg0 ino, arg1 size,
				 * arg2 nblocks, arg3 next, payload struct gs_att_ext[next] */
	GS_ATT_RING = 3,	/* arg0 sq, arg1 cq, arg2 ncw entries, arg3 buf bytes, arg4
				 * GS_RING_* flags; reply: fds memfd + kick eventfd, arg0 map
				 * bytes, arg1 ring offset, arg2 buf offset, arg3 ring id */
	GS_ATT_SYNC = 4,	/* arg0 ino: drop the daemon's cached lines of it */
	GS_ATT_OP_NR,
};

struct gs_att_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t op;		/* enum gs_att_op */
	int32_t status;		/* replies: 0 or -errno */
	uint32_t len;		/* payload bytes that follow */
	uint64_t arg[6];
};

/* An extent: blocks [blk, blk + nblk) at device byte offset dev_off
 * (same layout as struct gs_cam_ext). */
struct gs_att_ext {
	uint64_t blk;
	uint64_t nblk;
	uint64_t dev_off;
};

/* "<dir>/.<base>.gstore.sock" for mount point "<dir>/<base>". */
int gs_attach_sock_path(const char *mnt, char *buf, size_t size);

/*
 * Split @path into the mount point holding it (the topmost directory on its
 * device), in @mnt, and the path below it: *rel, pointing into @full (the
 * realpath of @path: PATH_MAX bytes).  @mnt has @size bytes.  For clients that
 * are given a file under a mount: connect to gs_attach_sock_path(mnt) and
 * OPEN *rel.
 */
int gs_attach_split(const char *path, char *full, char *mnt, size_t size, const char **rel);

/* ---- server (the daemon) ---- */

struct gs_attach_srv_params {
	const char *sock_path;
	struct gs_q *q;		/* rings go to these pollers */
	struct gs_fs *fs;	/* resolves OPEN paths; NULL: the whole device is one
				 * object, whatever the path (raw images, tests) */
	uint32_t max_clients;	/* 0: 64 */
	/* After SYNC has dropped the daemon's cached lines of @ino: caches
	 * above it (the kernel's page cache of a FUSE mount) drop theirs. */
	void (*synced)(void *arg, uint64_t ino);
	void *arg;
};
/* Listen and serve from a thread of its own until gs_attach_stop(). */
int gs_attach_start(struct gs_attach_srv **sp, const struct gs_attach_srv_params *p);
void gs_attach_stop(struct gs_attach_srv *s);

/* ---- client ---- */

int gs_attach_connect(struct gs_attach **ap, const char *sock_path);
void gs_attach_close(struct gs_attach *a);
/* Lba size and capacity of the daemon's device. */
int gs_attach_hello(struct gs_attach *a, uint32_t *lba, uint64_t *capacity);

struct gs_attach_obj {
	uint64_t ino;
	uint64_t size;		/* bytes */
	uint64_t nblocks;	/* of block_size */
	uint32_t next;
	struct gs_att_ext *ext;	/* malloc'd: free() it */
};
int gs_attach_open(struct gs_attach *a, const char *path, uint32_t block_size,
		   struct gs_attach_obj *obj);

struct gs_attach_ring {
	void *map;		/* the whole memfd mapping */
	size_t map_len;
	struct gs_ring *ring;
	void *buf;
	size_t buf_len;
	int kick_fd;		/* write 8 bytes to wake the pollers (CPU producers) */
	uint64_t id;
};
int gs_attach_ring(struct gs_attach *a, uint32_t sq, uint32_t cq, uint32_t ncw,
		   size_t buf_bytes, uint32_t flags, struct gs_attach_ring *r);
void gs_attach_ring_unmap(struct gs_attach_ring *r);
int gs_attach_sync(struct gs_attach *a, uint64_t ino);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GS_GPUQ_ATTACH_H */
