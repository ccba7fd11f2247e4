/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring for gstorefs (fs/fuse/uring.c): the kernel's second
 * transport (Linux 6.14+, CONFIG_FUSE_IO_URING, module parameter
 * fuse.enable_uring), driven under libfuse 3.14, which has no io_uring code.
 *
 * libfuse keeps the mount, FUSE_INIT, the /dev/fuse loop (which still
 * carries FORGET, INTERRUPT and our notifications) and the lowlevel ops
 * table; this file hooks the session's I/O (fuse_session_custom_io) to
 * answer FUSE_INIT with FUSE_OVER_IO_URING, then serves the ring entries the
 * kernel fills by feeding each request through fuse_session_process_buf()
 * and catching the reply in the writev hook.  Decision and reasons:
 * docs/ARCHITECTURE.md, "FUSE over io_uring".
 *
 * The wire structures below are the kernel's (include/uapi/linux/fuse.h,
 * protocol 7.42); Debian 12's <linux/fuse.h> (7.38) predates them.
 */
#ifndef GS_FS_FUSE_URING_H
#define GS_FS_FUSE_URING_H

#include <stddef.h>
#include <stdint.h>

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

/* ---- kernel ABI (uapi fuse.h 7.42) ---- */

#define GS_FUSE_OVER_IO_URING		(1ULL << 41)	/* FUSE_INIT flag (flags2 bit 9) */
#define GS_FUSE_URING_IN_OUT_HEADER_SZ	128
#define GS_FUSE_URING_OP_IN_OUT_SZ	128

enum {
	GS_FUSE_IO_URING_CMD_REGISTER = 1,		/* register an entry, fetch a request */
	GS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,	/* reply, fetch the next one */
};

struct gs_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique: echoed in the commit */
	uint32_t payload_sz;	/* bytes in the payload buffer, either direction */
	uint32_t padding;
	uint64_t reserved;
};

/* iov[0] of a registered entry */
struct gs_fuse_uring_req_header {
	char in_out[GS_FUSE_URING_IN_OUT_HEADER_SZ];	/* fuse_in_header / fuse_out_header */
	char op_in[GS_FUSE_URING_OP_IN_OUT_SZ];		/* the request's first argument */
	struct gs_fuse_uring_ent_in_out ring_ent_in_out;
};

/* the 80-byte command area of an SQE128 */
struct gs_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;		/* the queue: a CPU number */
	uint8_t padding[6];
};

_Static_assert(sizeof(struct gs_fuse_uring_ent_in_out) == 32, "uapi size");
_Static_assert(sizeof(struct gs_fuse_uring_req_header) == 288, "uapi size");
_Static_assert(sizeof(struct gs_fuse_uring_cmd_req) == 24, "uapi size");

/* ---- gstorefs side (the modes are in gstorefs.h) ---- */

struct gs_fuse_uring;

/* After fuse_session_mount(): hook @se's I/O so that FUSE_INIT may switch
 * to the ring.  @threads: serving threads in all (spread over one queue per
 * possible CPU, at least one each).  With GS_FUSE_URING_ON, -EOPNOTSUPP
 * when this kernel cannot (module parameter off, no io_uring). */
int gs_fuse_uring_attach(struct gs_fuse_uring **up, struct fuse_session *se, int mode,
			 unsigned threads);
/* After the session ended (unmounted): stop and join the ring threads. */
void gs_fuse_uring_stop(struct gs_fuse_uring *u);
/* The ring entry payload buffer a READ served by this thread may be read
 * into (the reply then goes out without a copy), or NULL. */
char *gs_fuse_uring_read_buf(size_t size);
/* "transport: ..." line(s) for .gstore/info; snprintf-like. */
int gs_fuse_uring_info(struct gs_fuse_uring *u, char *buf, size_t size);
/* Requests served over the ring so far. */
uint64_t gs_fuse_uring_requests(struct gs_fuse_uring *u);

#endif /* GS_FS_FUSE_URING_H */
