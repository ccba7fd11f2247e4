/* SPDX-License-Identifier: MIT */
/*
 * gstore filesystem: the object store that gstorefs (FUSE) and the CLI sit on.
 *
 * An image (file or block device) holds a superblock (+ copy), an allocation
 * bitmap, a catalog of named objects and a journal of redo records; objects
 * (arrays today; graphs and N-D spaces later) keep their data in extents.
 * All I/O goes fs -> cache -> gpuq -> backend.
 *
 * Objects are named by inode number.  The namespace is a tree of directories
 * (the root holds arrays/, graph/, nd/ and the virtual .gstore/).  Graph and
 * N-D objects own hidden internal objects (GS_T_INTERNAL) for their data.
 *
 * All functions return 0 (or a count) on success and -errno on failure, with
 * the errno a filesystem user expects (ENOENT, EEXIST, ENOTDIR, EISDIR,
 * ENOTEMPTY, ENOSPC, EROFS, EINVAL, EFBIG, ERANGE, ENODATA, EOPNOTSUPP, EIO).
 */
#ifndef GSTORE_FS_H
#define GSTORE_FS_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

struct gs_fs;
struct gs_q;
struct gs_cache;

#define GS_ROOT_INO	1ULL
#define GS_NAME_MAX	255

enum gs_obj_type {
	GS_T_DIR = 1,
	GS_T_ARRAY = 2,		/* flat byte array: a regular file */
	GS_T_GRAPH = 3,
	GS_T_ND = 4,
	GS_T_INTERNAL = 5,	/* hidden data object owned by another object */
	GS_T_SYMLINK = 6,	/* symbolic link: gs_fs_symlink(), gs_fs_readlink() */
	GS_T_SPECIAL = 7,	/* fifo, socket, char or block device: gs_fs_mknod() */
	GS_T_NTYPES		/* one past the last type */
};

struct gs_mkfs_opts {
	uint64_t size;		/* bytes; 0: the device's/file's size (file: required) */
	uint32_t block_size;	/* 4096 (default) .. 65536, power of two */
	uint32_t journal_blocks; /* 0: automatic */
	const char *label;
	int force;		/* overwrite an existing gstore image */
	const char *backend;	/* gs_q backend; NULL: chosen by path (gs_q_open(3)) */
	uint64_t inodes;	/* 0: one per 128 KiB (at least 1024) */
};
int gs_fs_mkfs(const char *path, const struct gs_mkfs_opts *o);

enum {
	GS_FS_RDONLY = 1u << 0,
	GS_FS_BUFFERED = 1u << 1,	/* no O_DIRECT (tests on tmpfs) */
	GS_FS_WAIT = 1u << 2,		/* image locked, not mounted: wait while its holder
					 * (an unmounted daemon writing back) does I/O */
};

struct gs_fs_opts {
	const char *path;
	uint32_t flags;		/* GS_FS_* */
	size_t cache_bytes;	/* 0: 256 MiB */
	uint32_t line_size;	/* cache line, 0: 64 KiB */
	uint32_t pollers;	/* max pollers, 0: 2 */
	uint32_t queue_depth;	/* 0: 128 */
	const char *fault;	/* gs_q fault-injection spec (tests) */
	const char *backend;	/* gs_q backend; NULL: chosen by path (gs_q_open(3)) */
	uint64_t dirty_bytes;	/* writers write back beyond this much dirty cache; it
				 * bounds the write-back at unmount.  0: a quarter of
				 * the cache, at most 1 GiB */
};
/* Open, check the superblock, replay the journal. */
int gs_fs_mount(struct gs_fs **fsp, const struct gs_fs_opts *o);
/* Flush everything, mark clean, close.  Returns the flush's result. */
int gs_fs_unmount(struct gs_fs *fs);
/*
 * Read-only (@flags has GS_FS_RDONLY) or read-write while mounted, as a
 * remount: going read-only writes everything back and marks the image clean
 * (consistent on the device as after an unmount); writes then give EROFS.
 * Read-write again: -EROFS for a filesystem opened read-only or read-only
 * until fsck.  Not to be called concurrently with itself.
 */
int gs_fs_remount(struct gs_fs *fs, unsigned flags);
/* The mount point of @image's gstorefs mount (malloc'ed), or NULL. */
char *gs_fs_find_mount(const char *image);

struct gs_stat {
	uint64_t ino;
	uint64_t parent;
	uint32_t type;		/* enum gs_obj_type */
	uint32_t mode;		/* S_IFMT (S_IFDIR, S_IFREG, S_IFLNK, ...) | permissions */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;		/* bytes */
	uint64_t blocks;	/* 512-byte units allocated */
	struct timespec atime, mtime, ctime;
	uint64_t gen;		/* generation: bumped each time an ino is reused */
	uint64_t rdev;		/* GS_T_SPECIAL devices: makedev(3) number; else 0 */
};

/* gs_fs_setattr() mask */
enum {
	GS_SET_MODE = 1u << 0,
	GS_SET_UID = 1u << 1,
	GS_SET_GID = 1u << 2,
	GS_SET_SIZE = 1u << 3,
	GS_SET_ATIME = 1u << 4,
	GS_SET_MTIME = 1u << 5,
	GS_SET_ATIME_NOW = 1u << 6,
	GS_SET_MTIME_NOW = 1u << 7,
};

int gs_fs_lookup(struct gs_fs *fs, uint64_t parent, const char *name, struct gs_stat *st);
int gs_fs_getattr(struct gs_fs *fs, uint64_t ino, struct gs_stat *st);
int gs_fs_setattr(struct gs_fs *fs, uint64_t ino, const struct gs_stat *in, unsigned mask,
		  struct gs_stat *out);
/* Create a directory (GS_T_DIR) or an object of @type in @parent. */
int gs_fs_create(struct gs_fs *fs, uint64_t parent, const char *name, uint32_t type,
		 uint32_t mode, uint32_t uid, uint32_t gid, struct gs_stat *st);
/* Create a node of the kind in @mode's S_IFMT: S_IFREG (an array), S_IFIFO,
 * S_IFSOCK, S_IFCHR or S_IFBLK (with device number @rdev); else -EINVAL. */
int gs_fs_mknod(struct gs_fs *fs, uint64_t parent, const char *name, uint32_t mode,
		uint64_t rdev, uint32_t uid, uint32_t gid, struct gs_stat *st);
/* Symbolic link @name in @parent to @target (1 .. 4095 bytes, stored as given). */
int gs_fs_symlink(struct gs_fs *fs, uint64_t parent, const char *name, const char *target,
		  uint32_t uid, uint32_t gid, struct gs_stat *st);
/* The target of symlink @ino into @buf (not NUL terminated): its length, which
 * may exceed @size (then only @size bytes are copied); -EINVAL if no symlink. */
ssize_t gs_fs_readlink(struct gs_fs *fs, uint64_t ino, char *buf, size_t size);
/* A new name @newname in @newparent for non-directory @ino (a hard link). */
int gs_fs_link(struct gs_fs *fs, uint64_t ino, uint64_t newparent, const char *newname,
	       struct gs_stat *st);
int gs_fs_unlink(struct gs_fs *fs, uint64_t parent, const char *name);
int gs_fs_rmdir(struct gs_fs *fs, uint64_t parent, const char *name);
/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE (or -EINVAL) */
int gs_fs_rename(struct gs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags);

/* Calls @fill for entries after @cookie until it returns non-zero.
 * @next is the cookie to resume after this entry. */
typedef int (*gs_fs_filldir)(void *arg, const char *name, const struct gs_stat *st,
			     uint64_t next);
int gs_fs_readdir(struct gs_fs *fs, uint64_t ino, uint64_t cookie, gs_fs_filldir fill,
		  void *arg);

/* Data: any offset and size; reads past EOF return short; holes read zeros. */
ssize_t gs_fs_read(struct gs_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off);
/* gs_fs_pread() flags */
enum {
	GS_FS_READ_DIRECT = 1u << 0,	/* an O_DIRECT reader: fill no cache lines */
	GS_FS_READ_CACHED = 1u << 1,	/* keep what is read: every piece through the cache */
};
/* gs_fs_read() with flags: with GS_FS_READ_DIRECT, pieces of an object with
 * nothing dirty in the cache are read from the device on the calling thread,
 * whatever their size; with GS_FS_READ_CACHED (readers that come back, like
 * graph pages) none is; otherwise only pieces of a cache line or more. */
ssize_t gs_fs_pread(struct gs_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off,
		    unsigned flags);
ssize_t gs_fs_write(struct gs_fs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off);
/* lseek(2)'s SEEK_DATA / SEEK_HOLE: the first offset >= @off that holds data
 * (holes and unwritten blocks do not: they read zeros), or the first that
 * does not (the size counts as a hole); -ENXIO at or past the size, or for
 * SEEK_DATA when no data follows; -EINVAL for another @whence. */
int64_t gs_fs_lseek(struct gs_fs *fs, uint64_t ino, uint64_t off, int whence);
/* mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|KEEP_SIZE; else -EOPNOTSUPP */
int gs_fs_fallocate(struct gs_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len);
/* Durable once this returns 0: data (and metadata unless @datasync). */
int gs_fs_fsync(struct gs_fs *fs, uint64_t ino, int datasync);
int gs_fs_sync(struct gs_fs *fs);

int gs_fs_getxattr(struct gs_fs *fs, uint64_t ino, const char *name, void *val, size_t size);
int gs_fs_setxattr(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
		   size_t size, int flags);
int gs_fs_listxattr(struct gs_fs *fs, uint64_t ino, char *list, size_t size);
int gs_fs_removexattr(struct gs_fs *fs, uint64_t ino, const char *name);

struct gs_fs_statfs {
	uint32_t block_size;
	uint64_t blocks, bfree;
	uint64_t files, ffree;
	uint32_t name_max;
	uint32_t line_size;	/* block cache line, bytes */
	uint64_t cache_bytes;	/* block cache budget (-o cache=), bytes */
	uint64_t bavail;	/* of bfree, what data may take (not the metadata reserve) */
	uint64_t cache_dirty;	/* bytes of dirty block cache lines now */
};
int gs_fs_statfs(struct gs_fs *fs, struct gs_fs_statfs *sf);
/* The device's geometry (gstore_q.h): what lease I/O is aligned to
 * (lba_size) and sized by (opt_io, max_io, queue_depth). */
struct gs_q_geom;
int gs_fs_geometry(struct gs_fs *fs, struct gs_q_geom *g);
/* The queue the fs does its I/O on (a pool's administration: gs_pool(3)); owned by @fs. */
struct gs_q *gs_fs_queue(struct gs_fs *fs);
/* Write back everything the block cache holds, then drop its lines
 * (benchmarks: the next reads are cold).  Returns the write-back's result. */
int gs_fs_drop_caches(struct gs_fs *fs);

/* Text for .gstore/info and .gstore/stats (live counters); returns length. */
int gs_fs_info_text(struct gs_fs *fs, char *buf, size_t size);
int gs_fs_stats_text(struct gs_fs *fs, char *buf, size_t size);

/* Open references: an object unlinked while open keeps its data until the
 * last gs_fs_release().  @flags: open(2) flags (O_ACCMODE). */
int gs_fs_open(struct gs_fs *fs, uint64_t ino, int flags);
int gs_fs_release(struct gs_fs *fs, uint64_t ino);

/* Hidden data objects (GS_T_INTERNAL) owned by object @owner: in no directory,
 * freed with their owner; read and written like arrays. */
int gs_fs_create_internal(struct gs_fs *fs, uint64_t owner, uint64_t *ino);
/* The same for an object whose data is metadata (a graph's translation table):
 * on a pool its blocks are kept on two members at least, like the fs's own. */
int gs_fs_create_internal_meta(struct gs_fs *fs, uint64_t owner, uint64_t *ino);
/* Free internal object @ino now (or at its last gs_fs_release()). */
int gs_fs_unlink_internal(struct gs_fs *fs, uint64_t ino);

/* Start cache read-ahead of [off, off + len) of @ino; never fails. */
void gs_fs_readahead(struct gs_fs *fs, uint64_t ino, uint64_t off, uint64_t len);

/*
 * Direct leases: I/O on [off, off + len) of @ino around the block cache,
 * as the kernel's iomap begin/end brackets direct I/O.
 * gs_fs_lease_begin() writes back and drops the cache's copy of the range
 * and pins the object's mapping of it (truncate and hole punching of the
 * range wait for the lease's end; the object, even unlinked, keeps its
 * blocks); with GS_LEASE_ALLOC it first backs every hole in the range with
 * unwritten blocks, each hole with one contiguous device run where there is
 * one.  I/O under the lease is addressed by object offset, stays inside the
 * range, and is direct: offset, length and buffer aligned to the device's
 * lba_size (gs_fs_geometry()); writes into unwritten blocks cover whole fs
 * blocks.  Reads of holes and unwritten blocks give zeros.
 * gs_fs_lease_end() waits for the lease's I/O, marks the unwritten blocks
 * it wrote as written and extends the size to the last byte written (the
 * next gs_fs_fsync() makes both durable, never before the data), drops any
 * cache copy of the range made meanwhile, and frees the lease.  Leases may
 * overlap; concurrent buffered and leased writes of the same bytes land in
 * either order, and stale cached copies never outlive gs_fs_lease_end().
 */
enum {
	GS_LEASE_READ = 1u << 0,
	GS_LEASE_WRITE = 1u << 1,	/* reads too */
	GS_LEASE_ALLOC = 1u << 2,	/* back holes (implies GS_LEASE_WRITE) */
};
struct gs_lease;
int gs_fs_lease_begin(struct gs_fs *fs, uint64_t ino, uint64_t off, uint64_t len,
		      unsigned flags, struct gs_lease **lp);
/* Returns the first error of the lease's I/O or of settling it (0 if none);
 * frees @l. */
int gs_fs_lease_end(struct gs_lease *l);

/* Synchronous I/O under a lease: bytes transferred or -errno.  Writes to
 * holes -ENODATA; to a read-only lease -EBADF; outside it or misaligned
 * -EINVAL. */
ssize_t gs_fs_lease_pread(struct gs_lease *l, void *buf, size_t len, uint64_t off);
ssize_t gs_fs_lease_pwrite(struct gs_lease *l, const void *buf, size_t len, uint64_t off);

/* Asynchronous I/O under a lease: @done runs once per io, after its last
 * device request, on an I/O thread (keep it short; never end the lease from
 * it), with the bytes transferred or -errno; reads of holes only complete
 * before gs_fs_lease_submit() returns.  One object piece may become several
 * device requests (extents, max_io). */
struct gs_obj_io;
typedef void (*gs_obj_cb)(struct gs_obj_io *io, int64_t res);
struct gs_obj_io {
	uint8_t op;		/* GS_OP_READ / GS_OP_WRITE */
	uint32_t len;
	uint64_t off;		/* object byte offset */
	void *buf;
	gs_obj_cb done;
	void *priv;
	uint64_t rsvd[2];	/* the fs core's */
};
/* Queue @n ios; returns n, or -errno with nothing queued (every io is
 * checked first, as gs_fs_lease_pread/pwrite check theirs). */
int gs_fs_lease_submit(struct gs_lease *l, struct gs_obj_io **ios, unsigned n);

/*
 * Rings of other processes (the attach server): the fs's I/O core serves
 * @ring (@ring_bytes of memory that the caller formatted with
 * gs_ring_init()), whose requests carry device offsets taken from the
 * leases bound to it; a request outside every bound lease's written
 * extents, or a write outside the write leases', completes with -EACCES and
 * is counted, never executed (gs_q_ring_add_bounded() in gstore_q.h).  The
 * ring's geometry is read once, here.  A ring without leases refuses all.
 */
struct gs_ring;
int gs_fs_ring_add(struct gs_fs *fs, struct gs_ring *ring, size_t ring_bytes, void *buf_base,
		   size_t buf_len);
int gs_fs_ring_bind(struct gs_fs *fs, struct gs_ring *ring, struct gs_lease *l);
/* Takes @l's extents from @ring's bounds; returns once the requests they let
 * through have completed.  Unbind (or delete the ring) before
 * gs_fs_lease_end(). */
int gs_fs_ring_unbind(struct gs_fs *fs, struct gs_ring *ring, struct gs_lease *l);
/* Stops serving @ring (waits for its requests in flight); the leases stay. */
int gs_fs_ring_del(struct gs_fs *fs, struct gs_ring *ring);
/* The eventfd that wakes the pollers serving these rings (CPU producers
 * write 8 bytes to it after a push that gs_sq_need_kick() says needs it). */
int gs_fs_ring_kick_fd(struct gs_fs *fs);
/*
 * A lease that its holder gives up on request (a long-lived one, such as an
 * attach client's): when truncate or hole punching needs its range, @fn(@arg)
 * is called, once, and the truncate waits for gs_fs_lease_end().  @fn runs
 * under an fs lock: it may only tell the holder (which then unbinds the
 * lease's rings and ends it), never end the lease itself.
 */
int gs_fs_lease_set_recall(struct gs_lease *l, void (*fn)(void *arg), void *arg);
/* The lease's written extents in @block_size units as struct gs_att_ext
 * entries (uapi/gstore_attach.h) for a client that addresses the device
 * itself (holes and unwritten extents are left out); returns the number of
 * entries (more than @max: call again larger), -EINVAL if an extent is not
 * aligned to @block_size. */
int gs_fs_lease_export(struct gs_lease *l, uint32_t block_size, void *ext, unsigned max);

/* fsck: exit-code bits like e2fsck */
enum {
	GS_FSCK_OK = 0,
	GS_FSCK_FIXED = 1,
	GS_FSCK_UNCORRECTED = 4,
	GS_FSCK_ERROR = 8,	/* operational error (cannot open, not gstore) */
};
enum {
	GS_FSCK_REPAIR = 1u << 0,
	GS_FSCK_FORCE = 1u << 1,	/* check even if marked clean */
	GS_FSCK_WAIT = 1u << 2,		/* wait for an unmounted daemon still finishing */
};
/* Check (and with GS_FSCK_REPAIR fix) an unmounted image.  Findings go
 * to @report (may be NULL), one line each.  Returns GS_FSCK_* bits. */
typedef void (*gs_fsck_report)(void *arg, const char *line);
int gs_fs_fsck(const char *path, unsigned flags, gs_fsck_report report, void *arg);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_FS_H */
