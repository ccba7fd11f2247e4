/* SPDX-License-Identifier: MIT */
/*
 * gstorefs front end: FUSE low-level handlers over gs_fs (fs/fuse/fuse.c) and the
 * virtual-node layer that object types plug their files into.
 *
 * Two audiences:
 *   - bin/gstorefs.c: gs_fuse_new() / gs_fuse_destroy() around a session (gstorefs.h,
 *     the only header of this folder the daemon's main sees);
 *   - object types (fs/fuse/fuse_graph.c, fs/fuse/fuse_nd.c, ...): struct gs_vops.
 *
 * Inode numbers.  Real objects use the fs core's ino (below 2^63).  Virtual
 * nodes have GS_VINO_BIT set, so the two spaces never collide.  Virtual
 * nodes live in a registry (hash by ino and by parent+name) from the
 * lookup that creates them until the kernel forgets them (nlookup == 0).
 *
 * How a path resolves:
 *   /.gstore/...            the built-in "meta" type (info, stats)
 *   /arrays/NAME            a real object: handlers call gs_fs_* directly
 *   /graph/NAME             a real object of type GS_T_GRAPH, shown as a dir;
 *   /graph/NAME/info ...    looking up in it (or in any virtual node under
 *                           it) calls vtypes[GS_T_GRAPH]->lookup(), which fills
 *                           in a gs_vnode; open/read/write/readdir of that node
 *                           call the same type's ops.
 *
 * Adding an object type's files (e.g. graph):
 *   1. fs/fuse/fuse_graph.c defines `const struct gs_vops gs_fuse_graph_ops = {...}`;
 *   2. declare it below next to gs_fuse_meta_ops;
 *   3. add one line to vtypes[] in fs/fuse/fuse.c: `[GS_T_GRAPH] = &gs_fuse_graph_ops,`.
 * Types without an entry show as empty, read-only directories.
 *
 * Every op returns 0 / a count or -errno.  Ops run on many FUSE worker threads
 * at once; a vnode is immutable after lookup except for ->priv, which the
 * type owns (lock it yourself if you change it after lookup).
 */
#ifndef GS_FS_FUSE_INTERNAL_H
#define GS_FS_FUSE_INTERNAL_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/stat.h>

#include "gstore_fs.h"
#include "gstorefs.h"

#define GS_VINO_BIT	(1ULL << 63)
#define GS_VINO_META	(GS_VINO_BIT | 1)	/* /.gstore */
#define GS_META_NAME	".gstore"

static inline int gs_is_vino(uint64_t ino)
{
	return (ino & GS_VINO_BIT) != 0;
}

/* ---------------- the virtual-node layer ---------------- */

/* A virtual file or directory.  Filled in by gs_vops.lookup(). */
struct gs_vnode {
	uint64_t ino;		/* set by the layer (GS_VINO_BIT | serial) */
	uint64_t parent;	/* ino of the directory it was looked up in */
	uint64_t obj;		/* the real object it belongs to (0: none, e.g. .gstore) */
	const struct gs_vops *ops;
	uint32_t mode;		/* S_IFDIR|0555, S_IFREG|0444, S_IFREG|0644 ... (type sets) */
	uint32_t kind;		/* the type's own discriminator (e.g. NEIGHBORS) */
	uint64_t arg[4];	/* the type's own values (vertex id, block coords, ...) */
	void *priv;		/* the type's own allocation, freed by ops->forget */
	uint64_t size;		/* st_size unless ops->getattr says otherwise */
	/* layer-private */
	uint64_t nlookup;
	int cached;		/* opened with page_cache: see gs_vreg_cached() */
	struct gs_vnode *ino_next, *name_next;
	char name[];
};

/* Where a lookup/readdir happens: the object's own directory (vn == NULL)
 * or a virtual directory below it. */
struct gs_vdir {
	uint64_t obj;			/* real object ino (0 for .gstore) */
	const struct gs_vnode *vn;	/* NULL: the object's directory itself */
};

/* An open virtual file.  Text files fill buf/len in ->open and let the layer
 * serve reads (opened with direct_io, so `cat`/`watch` see live text). */
struct gs_vfile {
	struct gs_vnode *vn;
	int flags;		/* open(2) flags */
	char *buf;		/* contents (malloc'ed; freed by the layer) */
	size_t len;
	void *priv;		/* the type's own per-open state, freed by ->release */
	/* Set by ->open: the bytes change only through writes to this object's
	 * virtual files on this mount.  The layer then lets the kernel cache
	 * the file (so it can be mmapped) instead of direct_io, and drops the
	 * cached pages of the object's other such files after each write. */
	int page_cache;
};

/* readdir callback: return non-zero when the reply buffer is full. */
typedef int (*gs_vfill)(void *arg, const char *name, uint32_t mode, uint64_t next);

struct gs_vops {
	const char *name;
	/* Fill vn->mode (required), kind, arg, priv, size for @name in @dir.
	 * -ENOENT: no such name; -EINVAL/-ERANGE: malformed (bad coordinate, ...). */
	int (*lookup)(struct gs_fuse *gf, const struct gs_vdir *dir, const char *name,
		      struct gs_vnode *vn);
	/* List @dir from cookie @off (0: start); call fill with the cookie of the
	 * next entry.  Names that are only looked up (v<ID>/) are not listed. */
	int (*readdir)(struct gs_fuse *gf, const struct gs_vdir *dir, uint64_t off,
		       gs_vfill fill, void *arg);
	/* Optional: adjust st (size, times) beyond mode/size/ino. */
	int (*getattr)(struct gs_fuse *gf, const struct gs_vnode *vn, struct stat *st);
	/* Optional (NULL: -EACCES): set f->buf/len or f->priv. */
	int (*open)(struct gs_fuse *gf, struct gs_vfile *f);
	/* Optional: NULL serves f->buf. */
	ssize_t (*read)(struct gs_fuse *gf, struct gs_vfile *f, char *buf, size_t size,
			uint64_t off);
	/* Optional (NULL: -EACCES). */
	ssize_t (*write)(struct gs_fuse *gf, struct gs_vfile *f, const char *buf, size_t size,
			 uint64_t off);
	/* Optional: end of a write session (apply "edges", "updates", "ctl"). */
	int (*release)(struct gs_fuse *gf, struct gs_vfile *f);
	/* Optional: close(2) of a handle (its error is what close returns), and
	 * fsync(2) (updates durable on 0).  Added for graph files. */
	int (*flush)(struct gs_fuse *gf, struct gs_vfile *f);
	int (*fsync)(struct gs_fuse *gf, struct gs_vfile *f, int datasync);
	/* Optional: free vn->priv. */
	void (*forget)(struct gs_fuse *gf, struct gs_vnode *vn);
	/* Optional, like getxattr(2)/listxattr(2) with size 0 = query. */
	int (*getxattr)(struct gs_fuse *gf, const struct gs_vnode *vn, const char *name,
			void *val, size_t size);
	int (*listxattr)(struct gs_fuse *gf, const struct gs_vnode *vn, char *list, size_t size);

	/*
	 * Hooks added for N-D spaces (fs/fuse/fuse_nd.c; wired in fs/fuse/fuse.c with
	 * minimal edits, like graph's; mkdir nd/NAME makes a GS_T_ND object).
	 * obj_setxattr: setxattr on a real object of this type (nd/NAME itself)
	 *   comes here first; -ENOSYS means "not mine": gs_fs_setxattr follows.
	 *   nd formats the space once user.gstore.shape and .dtype are set.
	 * destroy: once from gs_fuse_destroy(), before the fs is unmounted.
	 */
	int (*obj_setxattr)(struct gs_fuse *gf, uint64_t obj, const char *name, const void *val,
			    size_t size, int flags);
	void (*destroy)(struct gs_fuse *gf);
};

/* The mounted filesystem, for ops that need gs_fs_* (graph/nd lookups). */
struct gs_fs *gs_fuse_fs(struct gs_fuse *gf);

/* Fill f->buf/len from a snprintf-like generator (returns the length it
 * needs or -errno), growing the buffer until the text fits; for ->open of
 * text files. */
typedef int (*gs_text_gen)(void *ctx, char *buf, size_t size);
int gs_vfile_text(struct gs_vfile *f, gs_text_gen gen, void *ctx);

/* Types.  Add yours here and one line in vtypes[] in fs/fuse/fuse.c. */
extern const struct gs_vops gs_fuse_meta_ops;	/* /.gstore (fs/fuse/fuse_vnode.c) */
extern const struct gs_vops gs_fuse_graph_ops;	/* graph/NAME/ (fs/fuse/fuse_graph.c) */
extern const struct gs_vops gs_fuse_nd_ops;	/* nd/NAME/... (fs/fuse/fuse_nd.c) */

/* ---------------- layer-private (fs/fuse/fuse.c, fs/fuse/fuse_vnode.c) ---------------- */

/* Registry of live virtual nodes. */
struct gs_vreg;
struct gs_vreg *gs_vreg_new(void);
void gs_vreg_free(struct gs_fuse *gf, struct gs_vreg *r);
/* Insert a node that lives as long as the mount (.gstore). */
int gs_vreg_add_fixed(struct gs_vreg *r, uint64_t ino, uint64_t parent, const char *name,
		      const struct gs_vops *ops, uint32_t mode);
/* The node of @ino, or NULL.  Valid while the kernel holds the inode, which
 * it does for the whole of any request on it. */
struct gs_vnode *gs_vreg_get(struct gs_vreg *r, uint64_t ino);
/* Find @name in @parent (counting one lookup) or create it through
 * @ops->lookup.  @dir->vn is the parent's node (NULL: a real object). */
int gs_vreg_lookup(struct gs_fuse *gf, struct gs_vreg *r, uint64_t parent,
		   const struct gs_vdir *dir, const struct gs_vops *ops, const char *name,
		   struct gs_vnode **vnp);
void gs_vreg_forget(struct gs_fuse *gf, struct gs_vreg *r, uint64_t ino, uint64_t nlookup);
/* The ino a lookup of @name in @parent will give (barring a hash collision). */
uint64_t gs_vreg_ino_hint(uint64_t parent, const char *name);
/* Mark @vn as held in the kernel's page cache. */
void gs_vreg_set_cached(struct gs_vreg *r, struct gs_vnode *vn);
/* Up to @max inos of cached nodes of object @obj other than @except;
 * returns how many. */
unsigned gs_vreg_cached(struct gs_vreg *r, uint64_t obj, uint64_t except, uint64_t *inos,
			unsigned max);

/* FUSE-level counters appended to .gstore/stats. */
struct gs_fuse_counters {
	uint64_t reads, writes, read_bytes, write_bytes;
	uint64_t lookups, creates, fsyncs, other, errors;
	uint64_t uring_requests;	/* served over FUSE io_uring (fs/fuse/uring.c) */
	uint64_t stream_reads;		/* reads of a sequential stream (fs/fuse/stream.h) */
	uint64_t stream_ra_bytes;	/* bytes the daemon asked the cache to read ahead */
};
void gs_fuse_get_counters(struct gs_fuse *gf, struct gs_fuse_counters *c);

/* The device number (major:minor) of the FUSE mount at @mnt, from
 * /proc/self/mountinfo (no request to this daemon).  0 or -errno. */
int gs_fuse_mount_dev(const char *mnt, unsigned *maj, unsigned *min);

/* The io_uring transport of the mount (fs/fuse/uring.h), or NULL. */
struct gs_fuse_uring *gs_fuse_get_uring(struct gs_fuse *gf);
/* The daemon's read-ahead streams (fs/fuse/stream.h); NULL when -o stream_ra=0. */
struct gs_streams *gs_fuse_get_streams(struct gs_fuse *gf);

#endif /* GS_FS_FUSE_INTERNAL_H */
