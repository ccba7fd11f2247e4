/* SPDX-License-Identifier: MIT */
/*
 * Backend interface of the I/O core.  A backend drives one device; each
 * poller thread owns one backend queue (an io_uring, an NVMe queue pair, ...)
 * and is the only thread that touches it, so queue ops need no locking.
 *
 * Callers above gpuq never see this interface: they see gs_q_* only.  New
 * backends (nvme through gstore_nvme.ko, uring-passthru on /dev/ngXnY)
 * register a struct gs_backend_ops in backends[] (gpuq/backends.c).
 */
#ifndef GS_GPUQ_BACKEND_H
#define GS_GPUQ_BACKEND_H

#include <stdint.h>
#include <stddef.h>

#include "gstore_q.h"

struct gs_bdev;		/* backend's device state */
struct gs_bq;		/* backend's per-poller queue */

/* One I/O in flight through a backend.  Owned by the poller. */
struct gs_bio {
	uint8_t op;		/* GS_OP_* */
	uint32_t len;
	uint64_t off;
	void *buf;		/* poller-space address */
	uint32_t done;		/* bytes completed so far (short I/O resubmits the rest) */
	int buf_index;		/* registered buffer index or -1 */
	void *priv;		/* poller's bookkeeping (the sqe and its ring) */
};

struct gs_backend_ops {
	const char *name;
	int (*open)(struct gs_bdev **bd, const struct gs_q_params *p);
	void (*close)(struct gs_bdev *bd);
	int (*geometry)(struct gs_bdev *bd, struct gs_q_geom *g);
	/* Register a buffer region; returns its index (>= 0) or -errno.
	 * Optional: NULL means buffers are used as they are. */
	int (*register_buffer)(struct gs_bdev *bd, void *addr, size_t len);
	/* Optional: forget region @index; no I/O into it is in flight and the
	 * queues stop using it before their next submission. */
	void (*unregister_buffer)(struct gs_bdev *bd, int index);

	/* Per-poller queue.  @wake_fd: eventfd the queue's wait must also
	 * return on (the kick), or -1. */
	int (*queue_create)(struct gs_bdev *bd, uint32_t depth, int wake_fd, struct gs_bq **qp);
	void (*queue_destroy)(struct gs_bq *q);
	/* Queue up to @n ios and submit them with as few syscalls as possible;
	 * returns how many were accepted (>= 0) or -errno. */
	int (*submit)(struct gs_bq *q, struct gs_bio **ios, unsigned n);
	/* Reap completions without blocking.  res: bytes or -errno for the
	 * whole bio (the backend retries short I/O and -EAGAIN itself). */
	int (*reap)(struct gs_bq *q, struct gs_bio **done, int64_t *res, unsigned max);
	/* Block until a completion, a kick on wake_fd, or @timeout_us
	 * (-1: no timeout).  Returns 0 or -errno (-ETIME on timeout). */
	int (*wait)(struct gs_bq *q, int64_t timeout_us);
	/* Optional: like wait(), but return only once @nr completions are ready
	 * (a kick counts as one) or @timeout_us passed, so a busy poller takes
	 * completions in batches.  NULL: wait() is used. */
	int (*wait_nr)(struct gs_bq *q, unsigned nr, int64_t timeout_us);
	/* Optional: read on the calling thread, outside every queue (one system
	 * call where the device allows it); returns len or -errno.  Arguments
	 * are checked by the caller.  NULL, or -EOPNOTSUPP from it (a wrapper
	 * over a backend without one): gs_q_pread_sync() uses the ring. */
	int64_t (*read_sync)(struct gs_bdev *bd, void *buf, size_t len, uint64_t off);
};

extern const struct gs_backend_ops gs_backend_uring;
extern const struct gs_backend_ops gs_backend_fault;	/* wraps another backend */
extern const struct gs_backend_ops gs_backend_pool;	/* member devices, gpuq/pool.c */

/* Look a backend up by name; NULL if unknown. */
const struct gs_backend_ops *gs_backend_find(const char *name);
/* The backend named by @p, or chosen by its path when it names none. */
const char *gs_backend_name(const struct gs_q_params *p);

#endif /* GS_GPUQ_BACKEND_H */
