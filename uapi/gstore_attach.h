/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * gstore attach protocol: how another process (a CUDA program, a CLI tool)
 * gets rings served by a running gstorefs.
 *
 * Transport: a SOCK_STREAM Unix socket next to the mount point,
 * "<dir>/.<base>.gstore.sock" for mount point "<dir>/<base>".  Every message
 * is one struct gs_att_msg, host byte order (both ends are on one machine),
 * followed by h.len payload bytes; every request gets exactly one reply
 * with the same op, h.status 0 or -errno.  A RING reply carries two file
 * descriptors (SCM_RIGHTS): the ring memfd and the queue's kick eventfd.
 *
 *   HELLO  reply: the filesystem's block size (device offsets and lengths
 *          aligned to it are always valid) and the server's limits.
 *   OPEN   payload: a path relative to the mount point (no NUL).  The
 *          server checks the client's credentials (SO_PEERCRED) against the
 *          path's directories (search) and the object (read; and write with
 *          GS_ATT_OPEN_WRITE) as open(2) would, takes a direct lease on the
 *          object and binds it to the connection's rings, present and
 *          future.  Reply: the object's size and its extents in
 *          open.block_size units (payload: struct gs_att_ext[open.next];
 *          holes have none).  The lease lasts until the connection closes.
 *   RING   a request ring and a buffer region in one sealed memfd (ring at
 *          offset 0, region at ring.buf_off), served by the daemon's
 *          pollers.  Requests carry device byte offsets inside the extents
 *          of the connection's OPENs and name buffers as GS_SQE_BUF_OFF
 *          offsets into the region; anything else completes with -EACCES
 *          (outside the extents, or a write without GS_ATT_OPEN_WRITE) or
 *          -EFAULT (buffer), never executed.
 *   SYNC   "I wrote object sync.ino through a ring": the daemon drops its
 *          cached copies of it (and the kernel's page cache of the file).
 *   GRAPH  payload: the path of a graph object (graph/NAME).  Read access
 *          as OPEN checks it; the daemon merges the graph's pending updates
 *          (the layout is of the packed pages), takes read leases on its
 *          pages objects and binds them like OPEN's.  Reply: one file
 *          descriptor, a sealed memfd holding struct gs_att_graph_map and
 *          the arrays it points to (the device layout of gstore_graph_dev.h:
 *          the GTT of each direction, the vertex maps, the removed vertices,
 *          the extents of the pages in one block space of page_size
 *          blocks).  The layout is a snapshot: after updates, GRAPH again
 *          on a new connection (one GRAPH per connection, -EBUSY for a
 *          second; the old connection's leases end with it).
 *
 * Rules: only <linux/types.h> types, explicit reserved fields (must be
 * zero), sizes checked at build time, unknown ops and flags rejected with
 * -EINVAL.  Extend by adding, never by editing.
 */
#ifndef _UAPI_GSTORE_ATTACH_H
#define _UAPI_GSTORE_ATTACH_H

#include <linux/types.h>

#define GS_ATT_MAGIC		0x54415347u	/* "GSAT" */
#define GS_ATT_VERSION		2u
#define GS_ATT_PATH_MAX		4096		/* OPEN payload bytes at most */
#define GS_ATT_MAX_EXT		65536		/* extents one OPEN reply carries at most */
#define GS_ATT_MAX_RINGS	16		/* rings per connection */
#define GS_ATT_MAX_OPENS	64		/* OPENs (leases) per connection */
#define GS_ATT_MAX_ENTRIES	(1u << 20)	/* ring.sq_entries, ring.cq_entries */
#define GS_ATT_MAX_NCW		(1u << 22)	/* ring.ncw */
#define GS_ATT_MAX_BUF		(64ull << 30)	/* ring.buf_bytes */

enum gs_att_op {
	GS_ATT_HELLO = 1,
	GS_ATT_OPEN = 2,
	GS_ATT_RING = 3,
	GS_ATT_SYNC = 4,
	GS_ATT_GRAPH = 5,
	GS_ATT_OP_NR,
};

/* open.flags */
#define GS_ATT_OPEN_WRITE	(1u << 0)	/* rings may write the object */
#define GS_ATT_OPEN_FLAGS	GS_ATT_OPEN_WRITE

/* ring.flags: the ring's GS_RING_* flags (gstore_ring.h) */
#define GS_ATT_RING_POLLED	(1u << 0)	/* GS_RING_POLLED: producers cannot kick */
#define GS_ATT_RING_FLAGS	GS_ATT_RING_POLLED

struct gs_att_hdr {
	__u32 magic;		/* GS_ATT_MAGIC */
	__u16 version;		/* GS_ATT_VERSION */
	__u16 op;		/* enum gs_att_op */
	__s32 status;		/* replies: 0 or -errno; requests: 0 */
	__u32 len;		/* payload bytes that follow */
};

/* HELLO: the request's fields are zero. */
struct gs_att_hello {
	__u32 block_size;	/* reply: the filesystem's block size, bytes */
	__u32 max_rings;	/* reply: GS_ATT_MAX_RINGS */
	__u32 max_opens;	/* reply: GS_ATT_MAX_OPENS */
	__u32 rsvd0;
	__u64 rsvd[4];
};

struct gs_att_open {
	__u32 block_size;	/* extent unit, a power of two, >= 512 */
	__u32 flags;		/* GS_ATT_OPEN_* */
	__u64 ino;		/* reply: the object's inode number (for SYNC) */
	__u64 size;		/* reply: bytes */
	__u64 nblocks;		/* reply: size in block_size units, rounded up */
	__u32 next;		/* reply: struct gs_att_ext entries in the payload */
	__u32 rsvd0;
	__u64 rsvd1;
};

struct gs_att_ring {
	__u32 sq_entries;	/* powers of two, <= GS_ATT_MAX_ENTRIES */
	__u32 cq_entries;
	__u32 ncw;		/* completion words, <= GS_ATT_MAX_NCW */
	__u32 flags;		/* GS_ATT_RING_* */
	__u64 buf_bytes;	/* region, <= GS_ATT_MAX_BUF (rounded up to 4 KiB) */
	__u64 map_bytes;	/* reply: the memfd's size (map it whole) */
	__u64 buf_off;		/* reply: the region's offset in the memfd */
	__u64 id;		/* reply: the ring's number on this daemon */
};

struct gs_att_sync {
	__u64 ino;
	__u64 rsvd[5];
};

/* GRAPH: the request's fields are zero. */
struct gs_att_graph {
	__u32 flags;		/* none yet */
	__u32 max_io;		/* reply: the largest request the device takes, bytes */
	__u64 ino;		/* reply: the graph object */
	__u64 gen;		/* reply: the graph's root generation the layout is of */
	__u64 map_bytes;	/* reply: the memfd's size (map it whole, read-only) */
	__u64 rsvd[2];
};

struct gs_att_msg {
	struct gs_att_hdr h;
	union {
		struct gs_att_hello hello;
		struct gs_att_open open;
		struct gs_att_ring ring;
		struct gs_att_sync sync;
		struct gs_att_graph graph;
		__u64 raw[6];
	} u;
};

/* The GRAPH memfd: this header, then the arrays at the byte offsets it names
 * (each 8-byte aligned, inside map_bytes; an offset 0: no such array). */
#define GS_ATT_GRAPH_MAGIC	0x48505247u	/* "GRPH" */

struct gs_att_graph_dir {
	__u64 pages_ino;	/* the pages object */
	__u64 npages;		/* its pages, live and free */
	__u64 first_block;	/* its page p is block first_block + p */
	__u64 ngtt;		/* GTT entries */
	__u64 vmap_bits;	/* vertices the vertex map covers */
	__u64 key_off;		/* __u64[ngtt]: first vertex index of each page */
	__u64 last_off;		/* __u64[ngtt]: last */
	__u64 page_off;		/* __u64[ngtt]: page number | flags << 48 */
	__u64 vmap_off;		/* __u8[(vmap_bits + 7) / 8]: bit v, v has a list */
};

struct gs_att_graph_map {
	__u32 magic;		/* GS_ATT_GRAPH_MAGIC */
	__u32 ndirs;		/* 1 (undirected) or 2 (out, in) */
	__u64 nv, ne, gen;
	__u32 flags;		/* the graph's GS_GRAPH_F_* */
	__u32 page_size;	/* bytes: the block of the block space */
	__u32 id_bytes;		/* 4 or 8 */
	__u32 next;		/* extents */
	__u64 nremoved;
	__u64 nblocks;		/* the block space: every direction's pages */
	__u64 bytes;		/* bytes of live pages */
	__u64 removed_off;	/* __u8[nv / 8 + 1]: bit v, v removed */
	__u64 ext_off;		/* struct gs_att_ext[next], sorted by blk */
	struct gs_att_graph_dir dir[2];
};

/* An extent: blocks [blk, blk + nblk) of the object at device byte offset
 * dev_off (the layout of struct gs_cam_ext). */
struct gs_att_ext {
	__u64 blk;
	__u64 nblk;
	__u64 dev_off;
};

#ifdef __cplusplus
#define GS_ATT_STATIC_ASSERT static_assert
#else
#define GS_ATT_STATIC_ASSERT _Static_assert
#endif
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_hdr) == 16, "gs_att_hdr is 16 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_hello) == 48, "gs_att_hello is 48 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_open) == 48, "gs_att_open is 48 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_ring) == 48, "gs_att_ring is 48 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_sync) == 48, "gs_att_sync is 48 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_graph) == 48, "gs_att_graph is 48 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_msg) == 64, "gs_att_msg is 64 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_graph_dir) == 72, "gs_att_graph_dir is 72 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_graph_map) == 232, "gs_att_graph_map is 232 bytes");
GS_ATT_STATIC_ASSERT(sizeof(struct gs_att_ext) == 24, "gs_att_ext is 24 bytes");

#endif /* _UAPI_GSTORE_ATTACH_H */
