/* SPDX-License-Identifier: MIT */
/*
 * gstore I/O core (gpuq): request rings, poller threads and device backends.
 *
 * A gs_q owns one device (through a backend) and a set of poller threads.
 * Producers (CPU threads, GPU kernels, other processes) put requests into
 * rings (include/gstore_ring.h); pollers batch them into the backend and
 * deliver completions per request (completion word) and/or through the
 * ring's completion queue.  In-process callers can use the synchronous and
 * callback helpers below, which ride on an internal ring.
 *
 * All functions return 0 (or a count) on success and -errno on failure.
 * Nothing here prints; see gs_set_log_func() in gstore.h.
 */
#ifndef GSTORE_Q_H
#define GSTORE_Q_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gstore_ring.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_q;

/* Geometry the layers above size themselves from. */
struct gs_q_geom {
	uint32_t lba_size;	/* logical block size, bytes (O_DIRECT alignment) */
	uint32_t opt_io;	/* optimal I/O size, bytes (>= lba_size) */
	uint32_t max_io;	/* largest single request, bytes */
	uint32_t queue_depth;	/* per poller queue depth (after the cap below) */
	uint32_t dev_depth;	/* requests the device takes before it pushes back
				 * (a block queue's nr_requests; 0: unknown) */
	uint32_t nr_queues;	/* hardware queues / pollers the device can use */
	uint32_t nr_devices;	/* devices striped behind this queue (1 today) */
	uint64_t capacity;	/* bytes */
	uint64_t meta_bytes;	/* a pool: bytes from offset 0 kept on two members or
				 * more, where metadata belongs (0: no such zone) */
};

enum {
	GS_Q_RDONLY = 1u << 0,	/* open the device read-only */
	GS_Q_BUFFERED = 1u << 1, /* no O_DIRECT (tmpfs images, tests) */
	GS_Q_CREATE = 1u << 2,	/* create/extend an image file to .size */
};

struct gs_q_params {
	const char *backend;	/* "uring", "nvme", "uring-passthru"; NULL: by path
				 * (/dev/gstore-nvmeN: nvme, /dev/ngXnY: uring-passthru) */
	const char *path;	/* image file, block device, /dev/ngXnY, /dev/gstore-nvmeN */
	uint64_t size;		/* with GS_Q_CREATE: image size in bytes */
	uint32_t flags;		/* GS_Q_* */
	uint32_t queue_depth;	/* per poller backend queue depth (0: 128) */
	uint32_t min_pollers;	/* always-active pollers (0: 1) */
	uint32_t max_pollers;	/* upper bound for dynamic scaling (0: min_pollers) */
	uint32_t spin_us;	/* spin at most this long before blocking; adaptive (0: 50) */
	uint32_t ring_entries;	/* internal ring size, power of two (0: 1024) */
	const char *fault;	/* fault-injection spec, see gs_q_fault(3); NULL: none */
	uint32_t idle_ms;	/* park a poller above min_pollers idle this long (0: 100) */
	/*
	 * Requests in the device at most, all pollers together: each poller's
	 * depth becomes min(queue_depth, max_inflight / max_pollers).  0: half
	 * of geom.dev_depth when the backend knows it (a full block queue makes
	 * io_uring hand submissions to worker threads: more CPU, fewer IOPS);
	 * UINT32_MAX: no cap.
	 */
	uint32_t max_inflight;
};

int gs_q_open(struct gs_q **qp, const struct gs_q_params *p);
void gs_q_close(struct gs_q *q);
int gs_q_geometry(struct gs_q *q, struct gs_q_geom *g);

/*
 * Register a buffer region for zero-copy/fixed-buffer I/O (io_uring
 * registered buffers).  Requests whose buffer lies inside a registered
 * region use it automatically.  Regions must be registered before I/O
 * touching them is submitted and stay valid until gs_q_unregister_buffer()
 * or gs_q_close().
 */
int gs_q_register_buffer(struct gs_q *q, void *addr, size_t len);
/* Forget the region that starts at @addr (no I/O into it may be in flight);
 * afterwards its memory may be unmapped or reused. */
int gs_q_unregister_buffer(struct gs_q *q, void *addr);

/* ---- in-process helpers (ride on an internal ring) ---- */

/* Synchronous I/O: returns bytes transferred (== len) or -errno. */
ssize_t gs_q_pread(struct gs_q *q, void *buf, size_t len, uint64_t off);
ssize_t gs_q_pwrite(struct gs_q *q, const void *buf, size_t len, uint64_t off);
/* Device cache flush (NVMe FLUSH / fdatasync). Ordered after every write
 * that completed before the call. */
int gs_q_flush(struct gs_q *q);
/* Like gs_q_pread(), but the calling thread does the read itself where the
 * backend allows it (uring: one pread(2)); not counted in gs_q_get_stats(). */
ssize_t gs_q_pread_sync(struct gs_q *q, void *buf, size_t len, uint64_t off);

/* Asynchronous I/O with a callback, run on a poller thread (keep it short). */
struct gs_q_io;
typedef void (*gs_q_cb)(struct gs_q_io *io, int64_t res);
struct gs_q_io {
	uint8_t op;		/* GS_OP_* */
	uint32_t len;
	uint64_t off;
	void *buf;
	gs_q_cb done;
	void *priv;
};
/* Queue @n ios with one kick; returns n or -errno (nothing queued). */
int gs_q_submit(struct gs_q *q, struct gs_q_io **ios, unsigned n);

/* ---- rings for external producers (GPU, other processes) ---- */

/* Bytes needed for a ring with @sq_entries requests, @cq_entries
 * completions and @ncw completion words (entries: powers of two). */
size_t gs_ring_bytes(uint32_t sq_entries, uint32_t cq_entries, uint32_t ncw);
/* Format ring memory (process-shared, or pinned and GPU-mapped). */
int gs_ring_init(void *mem, size_t bytes, uint32_t sq_entries, uint32_t cq_entries,
		 uint32_t ncw, uint32_t flags);
/* Let the pollers serve @ring.  @buf_base/@buf_len: region that
 * GS_SQE_BUF_OFF offsets are relative to (may be NULL/0). */
int gs_q_ring_add(struct gs_q *q, struct gs_ring *ring, void *buf_base, size_t buf_len);
/* Stop serving @ring; waits until its popped requests have completed.
 * Requests still queued in it are left there, unserved; completions that
 * find its cq full are dropped. */
int gs_q_ring_del(struct gs_q *q, struct gs_ring *ring);

/*
 * Rings another process produces into, which the queue's owner does not
 * trust (the attach server's clients).  The ring's geometry is read once,
 * here, from @ring (@ring_bytes: the memory it lives in) and never again;
 * requests must name their buffer as a GS_SQE_BUF_OFF offset into
 * [@buf_base, @buf_base + @buf_len) (-EFAULT otherwise) and must lie inside
 * the ring's bounds: a request outside every range, a write to a range
 * without GS_Q_BOUND_WRITE, or a flush on a ring without any, completes
 * with -EACCES.  Both refusals count in gs_q_stats.denied and nothing is
 * executed.  A completion that finds the ring's cq full is dropped and
 * counted (cq_dropped), so a client that never drains its cq holds no
 * poller resources.  A ring starts with no bounds: everything is refused
 * until gs_q_ring_set_bounds().
 */
enum {
	GS_Q_BOUND_READ = 1u << 0,
	GS_Q_BOUND_WRITE = 1u << 1,
};
struct gs_q_bound {
	uint64_t off, len;	/* device bytes */
	uint32_t perm;		/* GS_Q_BOUND_* */
	uint32_t rsvd;		/* 0 */
};
int gs_q_ring_add_bounded(struct gs_q *q, struct gs_ring *ring, size_t ring_bytes,
			  void *buf_base, size_t buf_len);
/* Replace the bounds of a bounded ring with @n ranges (any order; they may
 * overlap: permissions add up).  Requests popped afterwards see the new
 * table; returns once every request the old table let through has
 * completed.  -EINVAL for a ring added with gs_q_ring_add(). */
int gs_q_ring_set_bounds(struct gs_q *q, struct gs_ring *ring, const struct gs_q_bound *b,
			 unsigned n);
/* Wake the pollers if they sleep (CPU producers; GPU rings are polled). */
void gs_q_kick(struct gs_q *q);
/* eventfd that gs_q_kick() writes; handed to other processes. */
int gs_q_kick_fd(struct gs_q *q);

/* CPU-side waits on a ring (any process that maps it): spin up to
 * @spin_us, then futex-wait.  gs_ring_cw_wait() returns the result of
 * completion word @i; gs_ring_cq_wait() pops one cqe into *c and returns 1,
 * or 0 after @timeout_us (-1: none). */
int64_t gs_ring_cw_wait(struct gs_ring *ring, uint32_t i, uint32_t spin_us);
int gs_ring_cq_wait(struct gs_ring *ring, struct gs_cqe *c, uint32_t spin_us,
		    int64_t timeout_us);

/* ---- statistics ---- */
struct gs_q_stats {
	uint64_t reqs;		/* requests completed */
	uint64_t read_bytes, write_bytes;
	uint64_t errors;
	uint64_t submits;	/* backend submit calls (syscalls) */
	uint64_t sleeps;	/* times a poller blocked */
	uint32_t inflight;	/* requests in the backend now */
	uint32_t active_pollers;
	uint32_t max_pollers;
	uint32_t rings;
	uint64_t denied;	/* bounded rings' requests refused (bounds, buffer) */
	uint64_t cq_dropped;	/* bounded rings' completions dropped: cq full */
};
void gs_q_get_stats(struct gs_q *q, struct gs_q_stats *st);

/*
 * Fault injection (tests).  Active when the queue was opened with
 * params.fault set (even to "") or backend "fault[:INNER]".  Spec, comma
 * separated (gs_q_fault(3) has the details):
 *   fail=N[:err]	fail the Nth counted I/O (1-based) with err (EIO default;
 *			a number or a name: EIO, ENOSPC, EROFS, ENOMEM, EINVAL)
 *   every=N[:err]	fail every Nth counted I/O
 *   op=read|write|flush|all  which I/Os are counted (default all)
 *   at=N		crash point: the first N writes are not affected (default 0)
 *   tear=B		writes after the crash point persist only their first B
 *			bytes (a multiple of the lba size) but report success
 *   drop		writes after the crash point do not reach the device but
 *			report success
 *   powercut=N		volatile write cache: writes reach the device only at a
 *			flush (reads see them); power fails during the Nth write:
 *			it and the cache are lost (with tear=B its first B bytes
 *			land) and every later write and flush is dropped
 *   dead=drop|ERR	after the cut: drop writes and flushes reporting success
 *			(default), or fail them (and the Nth write) with ERR,
 *			e.g. dead=eio, so a program that keeps running after the
 *			simulated cut gets no acknowledgement for lost data
 *   power=ID		power domain (ID > 0): queues of this process with the
 *			same ID share powercut's write count and its cut (a
 *			pool adds it to a spec for all its members)
 * gs_q_fault() changes the spec of a running queue ("" clears, counters
 * restart; data cached by powercut stays until the next flush).
 */
int gs_q_fault(struct gs_q *q, const char *spec);


/*
 * ---- pools: one queue over several member devices (gs_pool(3)) ----
 *
 * A queue opened on a pool member (found by its member superblock), or with
 * backend "pool" or "pool:DEV1:DEV2:...", serves the pool's logical device:
 * requests keep their (logical) offsets and are split at stripe units and
 * routed to per-member queues, each with its own pollers.  Members that
 * fail are left out (degraded mode) and named in the log and the status.
 */
struct gs_pool_opts {
	const char *layout;	/* "stripe" (default), "mirror", "stripe+mirror" */
	uint32_t stripe_unit;	/* bytes, power of two >= 4096 (0: 64 KiB) */
	uint64_t zone_bytes;	/* mirrored zone at logical 0 (0: automatic) */
	uint64_t member_bytes;	/* bytes used per member (0: the smallest member) */
	uint32_t flags;		/* GS_Q_BUFFERED */
};
/* Write member superblocks on @n devices (any previous content is lost). */
int gs_pool_create(const char *const *paths, unsigned n, const struct gs_pool_opts *o);
/* 1 if @path starts with a pool member superblock (valid or not), else 0. */
int gs_pool_is_member(const char *path);
/* Pool status as "key: value" lines (0 bytes when @q is not a pool); like snprintf. */
int gs_q_pool_info(struct gs_q *q, char *buf, size_t size);
/* Member index of @path in the pool (by path or its hint), or -ENOENT. */
int gs_q_pool_member(struct gs_q *q, const char *path);
typedef void (*gs_pool_progress)(void *arg, uint64_t done, uint64_t total);
/* Put @newpath in member @index's place and rebuild its contents from the
 * other members (or from the old member while it still reads). */
int gs_q_pool_replace(struct gs_q *q, unsigned index, const char *newpath,
		      gs_pool_progress progress, void *arg);
/* The same on a thread of the pool's own (a mounted daemon's replace): returns once the
 * new device is open and registered (-EBUSY while another rebuild runs); progress and
 * the outcome show in gs_q_pool_info(); closing the queue cancels it. */
int gs_q_pool_replace_start(struct gs_q *q, unsigned index, const char *newpath);
/* Limit rebuilds (running or later) to @bytes_per_s copied per second (0: no limit). */
int gs_q_pool_throttle(struct gs_q *q, uint64_t bytes_per_s);
/* Add @newpath as a member: every stripe unit is moved to its place over one member
 * more (a restripe, crash-safe: a read-write open finishes one that stopped), with
 * @progress and the throttle; the logical size stays.  Only with no other I/O on @q:
 * 0 or -errno (-EBUSY: degraded, rebuilding; -ENOSPC: @newpath too small). */
int gs_q_pool_add(struct gs_q *q, const char *newpath, gs_pool_progress progress, void *arg);
/* Compare every copy of every mirrored stripe unit byte for byte; returns
 * the number of units whose copies differ (>= 0) or -errno.  GS_POOL_REPAIR
 * (a queue opened for writing): copy the first healthy copy over the others
 * where they differ, and clear the pool's "resync needed" state. */
enum { GS_POOL_REPAIR = 1u << 0 };
int64_t gs_q_pool_verify(struct gs_q *q, unsigned flags, gs_pool_progress progress, void *arg);

/*
 * ---- attaching to a running daemon (the attach client) ----
 *
 * A process (a CUDA program, a CLI tool, any user who may read the file)
 * gets rings served by a running gstorefs over a file of its mount.  The
 * protocol and its wire format are uapi/gstore_attach.h (struct gs_att_msg,
 * struct gs_att_ext, GS_ATT_*); the daemon's side is gstorefs's.  Typically:
 * gs_attach_split() the file's path, gs_attach_connect() to
 * gs_attach_sock_path() of its mount point, gs_attach_open() the file (its
 * extents: the device offsets this connection's rings accept, nothing
 * else), gs_attach_ring(), then push requests with GS_SQE_BUF_OFF buffers.
 */
struct gs_attach;
struct gs_att_msg;
struct gs_att_ext;

/* "<dir>/.<base>.gstore.sock" for mount point "<dir>/<base>". */
int gs_attach_sock_path(const char *mnt, char *buf, size_t size);
/*
 * Split @path into the mount point holding it (the topmost directory on its
 * device), in @mnt (@size bytes), and the path below it: *rel, pointing into
 * @full (the realpath of @path: PATH_MAX bytes).
 */
int gs_attach_split(const char *path, char *full, char *mnt, size_t size, const char **rel);
/* Both: the socket of the mount holding @path, in @sock (@size bytes), and
 * the path below the mount point, *rel (into @full: PATH_MAX bytes). */
int gs_attach_find(const char *path, char *full, char *sock, size_t size, const char **rel);

int gs_attach_connect(struct gs_attach **ap, const char *sock_path);
void gs_attach_close(struct gs_attach *a);
/* The filesystem's block size: offsets and lengths aligned to it are valid. */
int gs_attach_hello(struct gs_attach *a, uint32_t *block_size);

struct gs_attach_obj {
	uint64_t ino;
	uint64_t size;		/* bytes */
	uint64_t nblocks;	/* of block_size */
	uint32_t next;
	struct gs_att_ext *ext;	/* malloc'd: free() it */
};
/* OPEN @path (relative to the mount point) for reading, or reading and
 * writing with GS_ATT_OPEN_WRITE in @flags; -EACCES when the caller's
 * credentials do not allow it, as open(2) decides on the mount. */
int gs_attach_open(struct gs_attach *a, const char *path, uint32_t block_size, uint32_t flags,
		   struct gs_attach_obj *obj);
/*
 * gs_attach_open() for a client that addresses blocks of @block_size,
 * which may be larger than the filesystem's (whose extents need not be
 * aligned to it): the extents come in the filesystem's block size, and are
 * rewritten in @block_size units when every one is aligned to it.
 * *ext_shift: log2 of the table's unit (log2 @block_size, or smaller: then a
 * block may span extents, one request per device run); obj->nblocks counts
 * blocks of @block_size.
 */
int gs_attach_open_blocks(struct gs_attach *a, const char *path, uint32_t block_size,
			  uint32_t flags, struct gs_attach_obj *obj, uint32_t *ext_shift);

struct gs_attach_ring {
	void *map;		/* the whole memfd mapping */
	size_t map_len;
	struct gs_ring *ring;
	void *buf;
	size_t buf_len;
	int kick_fd;		/* write 8 bytes to wake the pollers (CPU producers) */
	uint64_t id;
};
/* A ring and a @buf_bytes region; @flags: GS_RING_POLLED or 0. */
int gs_attach_ring(struct gs_attach *a, uint32_t sq, uint32_t cq, uint32_t ncw,
		   size_t buf_bytes, uint32_t flags, struct gs_attach_ring *r);
void gs_attach_ring_unmap(struct gs_attach_ring *r);
/* "I wrote object @ino through a ring": the daemon drops its cached copies. */
int gs_attach_sync(struct gs_attach *a, uint64_t ino);

/*
 * GRAPH @path (a graph object, "graph/NAME" below the mount point): its
 * device layout, pending updates merged first, in a read-only mapping whose
 * offsets and sizes have been checked; its pages' extents are bound to this
 * connection's rings, present and future, until the connection closes.
 * The layout is a snapshot: for a later one, GRAPH on a new connection.
 */
struct gs_att_graph_map;
struct gs_attach_graph {
	uint64_t ino;		/* the graph object */
	uint64_t gen;		/* its root generation the layout is of */
	uint32_t max_io;	/* the largest request the device takes, bytes */
	const struct gs_att_graph_map *map;
	size_t map_len;
};
int gs_attach_graph(struct gs_attach *a, const char *path, struct gs_attach_graph *g);
void gs_attach_graph_unmap(struct gs_attach_graph *g);

/*
 * The protocol's message I/O, for both ends: send @m (with its h.len bytes
 * of @payload and @nfds <= 2 descriptors), receive one (at most @max
 * payload bytes, malloc'd into *payload and NUL-terminated; up to 2
 * descriptors into @fds, others closed).  0 or -errno: -EPROTO for a
 * message that is not ours, -EMSGSIZE for a payload over @max,
 * -ECONNRESET when the peer has gone.
 */
int gs_attach_send(int fd, const struct gs_att_msg *m, const void *payload, const int *fds,
		   int nfds);
int gs_attach_recv(int fd, struct gs_att_msg *m, void **payload, size_t max, int *fds,
		   int *nfds);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_Q_H */
