// SPDX-License-Identifier: MIT
/*
 * gstorefs: the FUSE low-level front end over gs_fs.
 *
 * Real objects (arrays/, directories) map 1:1 onto gs_fs_* calls with the
 * fs core's ino as the FUSE nodeid.  Virtual nodes (/.gstore, and the files
 * graph and N-D objects expose) go through the gs_vops of their type; see
 * fs/fuse/fuse_internal.h.
 *
 * Caching: every change to an array reaches the fs through this mount (the
 * daemon owns the device), so the kernel's page cache stays valid across
 * opens (keep_cache) and shared writable mmap works through it.  O_DIRECT
 * goes through the kernel's direct I/O path, which keeps the page cache
 * coherent itself (see set_cache_flags()).  The writeback cache stays
 * off: with it the kernel would acknowledge write() before the fs saw the
 * data, and fsync semantics would rest on the kernel flushing first.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fuse_internal.h"
#include "mountinfo.h"
#include "stream.h"
#include "uring.h"

#define MAX_IO		(1u << 20)	/* max_write, and the read buffer size */

struct gs_fuse {
	struct gs_fs *fs;
	struct fuse_session *se;
	struct gs_vreg *vreg;
	double timeout;
	unsigned rdonly;		/* a remount changes it: rd_only() */
	unsigned readahead;		/* bytes, 0: the kernel's default */
	uint64_t kdirty;		/* the kernel's dirty pages of the mount, bytes; 0: its default */
	pthread_key_t buf_key;		/* per worker thread read buffer */
	struct gs_fuse_counters cnt;	/* updated with relaxed atomics */
	int uring_mode;			/* -o uring= */
	unsigned threads;
	struct gs_fuse_uring *uring;	/* the io_uring transport's state (fs/fuse/uring.c) */
	struct gs_streams *streams;	/* the daemon's read-ahead (fs/fuse/stream.h); NULL: off */
};

/* Object types with virtual files.  One line per type; see fuse_internal.h. */
static const struct gs_vops *const vtypes[] = {
	[GS_T_DIR] = NULL,
	[GS_T_ARRAY] = NULL,
	[GS_T_GRAPH] = &gs_fuse_graph_ops,
	[GS_T_ND] = &gs_fuse_nd_ops,
	[GS_T_INTERNAL] = NULL,	/* never shown */
	[GS_T_SYMLINK] = NULL,
	[GS_T_SPECIAL] = NULL,
};
_Static_assert(sizeof(vtypes) / sizeof(vtypes[0]) == GS_T_NTYPES,
	       "vtypes[] needs one slot per enum gs_obj_type");

static unsigned rd_only(struct gs_fuse *gf)
{
	return __atomic_load_n(&gf->rdonly, __ATOMIC_ACQUIRE);
}

static const struct gs_vops *vtype(uint32_t type)
{
	return type < sizeof(vtypes) / sizeof(vtypes[0]) ? vtypes[type] : NULL;
}

#define COUNT(gf, field, n) __atomic_fetch_add(&(gf)->cnt.field, (n), __ATOMIC_RELAXED)

static inline struct gs_fuse *req_gf(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

struct gs_fs *gs_fuse_fs(struct gs_fuse *gf)
{
	return gf->fs;
}

void gs_fuse_get_counters(struct gs_fuse *gf, struct gs_fuse_counters *c)
{
	c->reads = __atomic_load_n(&gf->cnt.reads, __ATOMIC_RELAXED);
	c->writes = __atomic_load_n(&gf->cnt.writes, __ATOMIC_RELAXED);
	c->read_bytes = __atomic_load_n(&gf->cnt.read_bytes, __ATOMIC_RELAXED);
	c->write_bytes = __atomic_load_n(&gf->cnt.write_bytes, __ATOMIC_RELAXED);
	c->lookups = __atomic_load_n(&gf->cnt.lookups, __ATOMIC_RELAXED);
	c->creates = __atomic_load_n(&gf->cnt.creates, __ATOMIC_RELAXED);
	c->fsyncs = __atomic_load_n(&gf->cnt.fsyncs, __ATOMIC_RELAXED);
	c->other = __atomic_load_n(&gf->cnt.other, __ATOMIC_RELAXED);
	c->errors = __atomic_load_n(&gf->cnt.errors, __ATOMIC_RELAXED);
	c->uring_requests = gs_fuse_uring_requests(gf->uring);
	c->stream_reads = __atomic_load_n(&gf->cnt.stream_reads, __ATOMIC_RELAXED);
	c->stream_ra_bytes = __atomic_load_n(&gf->cnt.stream_ra_bytes, __ATOMIC_RELAXED);
}

struct gs_fuse_uring *gs_fuse_get_uring(struct gs_fuse *gf)
{
	return gf->uring;
}

struct gs_streams *gs_fuse_get_streams(struct gs_fuse *gf)
{
	return gf->streams;
}

/* The one place -errno becomes a FUSE reply.  Anything that is not a sane
 * errno (a bug below) is reported as EIO rather than confusing the kernel. */
static void reply_status(fuse_req_t req, int ret)
{
	int err = ret < 0 ? -ret : 0;

	if (ret > 0 || err >= 4096)
		err = EIO;
	if (err && err != ENOENT && err != ENODATA)	/* those are answers, not failures */
		COUNT(req_gf(req), errors, 1);
	fuse_reply_err(req, err);
}

/* ---------------- attributes ---------------- */

/* S_IFMT of an object: graph and N-D objects are shown as directories. */
static mode_t type_bits(const struct gs_stat *gs)
{
	if (gs->type == GS_T_GRAPH || gs->type == GS_T_ND)
		return S_IFDIR;
	return gs->mode & S_IFMT;
}

static void to_stat(const struct gs_stat *gs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = gs->ino;
	st->st_mode = type_bits(gs) | (gs->mode & 07777);
	st->st_nlink = gs->nlink;	/* 0 for an open file that lost its last name */
	st->st_rdev = (dev_t)gs->rdev;
	st->st_uid = gs->uid;
	st->st_gid = gs->gid;
	st->st_size = (off_t)gs->size;
	st->st_blocks = (blkcnt_t)gs->blocks;
	st->st_blksize = 1 << 16;
	st->st_atim = gs->atime;
	st->st_mtim = gs->mtime;
	st->st_ctim = gs->ctime;
}

static void vnode_stat(struct gs_fuse *gf, const struct gs_vnode *vn, struct stat *st)
{
	struct gs_stat obj;

	memset(st, 0, sizeof(*st));
	st->st_ino = vn->ino;
	st->st_mode = vn->mode;
	st->st_nlink = S_ISDIR(vn->mode) ? 2 : 1;
	st->st_size = (off_t)vn->size;
	st->st_blksize = 4096;
	/* Owner and times of the object the node belongs to (root for .gstore). */
	if (gs_fs_getattr(gf->fs, vn->obj ? vn->obj : GS_ROOT_INO, &obj) == 0) {
		st->st_uid = obj.uid;
		st->st_gid = obj.gid;
		st->st_atim = obj.atime;
		st->st_mtim = obj.mtime;
		st->st_ctim = obj.ctime;
	}
	if (vn->ops->getattr)
		vn->ops->getattr(gf, vn, st);
}

static void entry_from(struct gs_fuse *gf, struct fuse_entry_param *e, const struct gs_stat *st)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->ino;
	e->generation = st->gen;
	to_stat(st, &e->attr);
	e->attr_timeout = gf->timeout;
	e->entry_timeout = gf->timeout;
}

static void entry_from_vnode(struct gs_fuse *gf, struct fuse_entry_param *e,
			     const struct gs_vnode *vn)
{
	memset(e, 0, sizeof(*e));
	e->ino = vn->ino;
	vnode_stat(gf, vn, &e->attr);
	/* Contents (sizes) of virtual files change under us: no attr caching. */
	e->attr_timeout = 0;
	e->entry_timeout = gf->timeout;
}

/* ---------------- lookup / forget / getattr / setattr ---------------- */

static int is_meta_name(fuse_ino_t parent, const char *name)
{
	return parent == GS_ROOT_INO && !strcmp(name, GS_META_NAME);
}

/* Look @name up through the type ops of @parent (a virtual node or a real
 * object whose type has virtual files).  *plain: @parent is an ordinary
 * directory, whose misses the kernel may cache. */
static int vlookup(struct gs_fuse *gf, fuse_ino_t parent, const char *name,
		   struct gs_vnode **vnp, int *plain)
{
	struct gs_vdir dir = { 0 };
	const struct gs_vops *ops;
	struct gs_stat st;
	int ret;

	if (gs_is_vino(parent)) {
		struct gs_vnode *pvn = gs_vreg_get(gf->vreg, parent);

		if (!pvn)
			return -ESTALE;
		if (!S_ISDIR(pvn->mode))
			return -ENOTDIR;
		dir.obj = pvn->obj;
		dir.vn = pvn;
		ops = pvn->ops;
	} else {
		ret = gs_fs_getattr(gf->fs, parent, &st);
		if (ret < 0)
			return ret;
		ops = vtype(st.type);
		if (!ops || st.type == GS_T_DIR) {
			*plain = 1;
			return -ENOENT;
		}
		dir.obj = parent;
	}
	if (strlen(name) > GS_NAME_MAX)
		return -ENAMETOOLONG;
	return gs_vreg_lookup(gf, gf->vreg, parent, &dir, ops, name, vnp);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gs_fuse *gf = req_gf(req);
	struct fuse_entry_param e;
	struct gs_vnode *vn;
	struct gs_stat st;
	int ret, plain = 0;

	COUNT(gf, lookups, 1);
	if (is_meta_name(parent, name)) {
		vn = gs_vreg_get(gf->vreg, GS_VINO_META);
		goto reply_vnode;
	}
	if (!gs_is_vino(parent)) {
		ret = gs_fs_lookup(gf->fs, parent, name, &st);
		if (ret == 0 && st.type != GS_T_INTERNAL) {
			entry_from(gf, &e, &st);
			fuse_reply_entry(req, &e);
			return;
		}
		if (ret == 0)
			ret = -ENOENT;
		if (ret != -ENOENT && ret != -ENOTDIR)
			goto reply_err;
	}
	ret = vlookup(gf, parent, name, &vn, &plain);
	if (ret < 0)
		goto reply_err;
reply_vnode:
	entry_from_vnode(gf, &e, vn);
	if (fuse_reply_entry(req, &e) == -ENOENT && vn->ino != GS_VINO_META)
		gs_vreg_forget(gf, gf->vreg, vn->ino, 1);	/* interrupted: undo */
	return;
reply_err:
	if (ret == -ENOENT) {
		/* Cache a miss in a directory: names only appear through this
		 * mount.  Not in objects' virtual dirs (a vertex may be added). */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = plain ? gf->timeout : 0;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_status(req, ret);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct gs_fuse *gf = req_gf(req);

	if (gs_is_vino(ino))
		gs_vreg_forget(gf, gf->vreg, ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct gs_fuse *gf = req_gf(req);

	for (size_t i = 0; i < count; i++)
		if (gs_is_vino(forgets[i].ino))
			gs_vreg_forget(gf, gf->vreg, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	struct stat st;
	int ret;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino)) {
		struct gs_vnode *vn = gs_vreg_get(gf->vreg, ino);

		if (!vn)
			return reply_status(req, -ESTALE);
		vnode_stat(gf, vn, &st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	struct gs_stat gs;

	ret = gs_fs_getattr(gf->fs, ino, &gs);
	if (ret < 0)
		return reply_status(req, ret);
	to_stat(&gs, &st);
	fuse_reply_attr(req, &st, gf->timeout);
}

/*
 * setuid/setgid after a change of a file's contents by @req's caller.  With
 * HANDLE_KILLPRIV off the kernel clears setuid, and setgid with group
 * execute, before a write, truncate or fallocate by a caller without
 * CAP_FSETID; the other filesystems (setattr_should_drop_sgid) also clear a
 * setgid without group execute when the caller is not in the file's group,
 * which FUSE's own recomputation does not: that part is done here, after the
 * change.  @all: the kernel did nothing (open with O_TRUNC, which
 * ATOMIC_O_TRUNC leaves to us): all of it.  FUSE does not pass capabilities:
 * uid 0 stands for CAP_FSETID.
 */
static void kill_priv(fuse_req_t req, fuse_ino_t ino, int all)
{
	struct gs_fuse *gf = req_gf(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct gs_stat st, in = { 0 };
	gid_t groups[64];
	int n, member;

	if (ctx->uid == 0 || gs_fs_getattr(gf->fs, ino, &st) < 0 || !S_ISREG(st.mode))
		return;
	in.mode = st.mode & 07777;
	if (all && (st.mode & S_ISUID))
		in.mode &= ~S_ISUID;
	if (st.mode & S_ISGID) {
		member = ctx->gid == st.gid;
		n = member ? 0 : fuse_req_getgroups(req, 64, groups);
		for (int i = 0; i < n && i < 64; i++)
			member |= groups[i] == st.gid;
		if (!member || (all && (st.mode & S_IXGRP)))
			in.mode &= ~S_ISGID;
	}
	/* the kernel keeps the mode it has cached across a write: drop its
	 * attributes (only those, no pages: safe inside a write of @ino) */
	if (in.mode != (st.mode & 07777) && !gs_fs_setattr(gf->fs, ino, &in, GS_SET_MODE, NULL))
		fuse_lowlevel_notify_inval_inode(gf->se, ino, -1, 0);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	struct gs_stat in = { 0 }, out;
	unsigned mask = 0;
	struct stat st;
	int ret;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino))
		return reply_status(req, -EPERM);
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= GS_SET_MODE;
		in.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= GS_SET_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= GS_SET_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0)
			return reply_status(req, -EINVAL);
		mask |= GS_SET_SIZE;
		in.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		mask |= GS_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		mask |= GS_SET_ATIME;
		in.atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		mask |= GS_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		mask |= GS_SET_MTIME;
		in.mtime = attr->st_mtim;
	}
	if (!mask) {		/* e.g. ctime only: report what is there */
		ret = gs_fs_getattr(gf->fs, ino, &out);
	} else {
		ret = rd_only(gf) ? -EROFS : gs_fs_setattr(gf->fs, ino, &in, mask, &out);
	}
	if (!ret && (mask & GS_SET_SIZE)) {
		kill_priv(req, ino, 0);
		ret = gs_fs_getattr(gf->fs, ino, &out);
	}
	if (ret < 0)
		return reply_status(req, ret);
	to_stat(&out, &st);
	fuse_reply_attr(req, &st, gf->timeout);
}

/* ---------------- namespace changes ---------------- */

/* Names under virtual nodes, and /.gstore itself, cannot be changed. */
static int check_mutable(struct gs_fuse *gf, fuse_ino_t parent, const char *name)
{
	if (gs_is_vino(parent) || is_meta_name(parent, name))
		return -EPERM;
	if (rd_only(gf))
		return -EROFS;
	if (strlen(name) > GS_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

static int do_create(fuse_req_t req, fuse_ino_t parent, const char *name, uint32_t type,
		     mode_t mode, struct gs_stat *st)
{
	struct gs_fuse *gf = req_gf(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int ret = check_mutable(gf, parent, name);

	COUNT(gf, creates, 1);
	if (ret < 0)
		return ret;
	/* The kernel applied the umask already (no FUSE_CAP_DONT_MASK). */
	return gs_fs_create(gf->fs, parent, name, type, mode & 07777, ctx->uid, ctx->gid, st);
}

static void reply_new_entry(fuse_req_t req, int ret, const struct gs_stat *st)
{
	struct fuse_entry_param e;

	if (ret < 0)
		return reply_status(req, ret);
	entry_from(req_gf(req), &e, st);
	fuse_reply_entry(req, &e);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct gs_stat st, g;
	uint32_t type = GS_T_DIR;

	/* mkdir graph/NAME makes an (empty) graph object */
	if (gs_fs_lookup(req_gf(req)->fs, GS_ROOT_INO, "graph", &g) == 0 && g.ino == parent)
		type = GS_T_GRAPH;
	/* mkdir nd/NAME makes an N-D space (formatted by its xattrs) */
	else if (gs_fs_lookup(req_gf(req)->fs, GS_ROOT_INO, "nd", &g) == 0 && g.ino == parent)
		type = GS_T_ND;
	reply_new_entry(req, do_create(req, parent, name, type, mode, &st), &st);
}

/* A symlink to @link, else a node of @mode: regular files (arrays), fifos,
 * sockets and device nodes (inert: the mount is nodev). */
static void new_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev, const char *link)
{
	struct gs_fuse *gf = req_gf(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct gs_stat st;
	int ret = check_mutable(gf, parent, name);

	COUNT(gf, creates, 1);
	if (!ret && link)
		ret = gs_fs_symlink(gf->fs, parent, name, link, ctx->uid, ctx->gid, &st);
	else if (!ret)
		ret = gs_fs_mknod(gf->fs, parent, name, mode, rdev, ctx->uid, ctx->gid, &st);
	reply_new_entry(req, ret, &st);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	new_node(req, parent, name, mode, rdev, NULL);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	new_node(req, parent, name, 0, 0, link);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct gs_fuse *gf = req_gf(req);
	char buf[PATH_MAX];
	ssize_t n;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino))
		return reply_status(req, -EINVAL);
	n = gs_fs_readlink(gf->fs, ino, buf, sizeof(buf) - 1);
	if (n < 0)
		return reply_status(req, (int)n);
	if ((size_t)n >= sizeof(buf))
		return reply_status(req, -EUCLEAN);
	buf[n] = 0;
	fuse_reply_readlink(req, buf);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct gs_fuse *gf = req_gf(req);
	struct gs_stat st;
	int ret = check_mutable(gf, newparent, newname);

	COUNT(gf, other, 1);
	if (!ret && gs_is_vino(ino))
		ret = -EPERM;
	if (!ret)
		ret = gs_fs_link(gf->fs, ino, newparent, newname, &st);
	reply_new_entry(req, ret, &st);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gs_fuse *gf = req_gf(req);
	int ret = check_mutable(gf, parent, name);

	COUNT(gf, other, 1);
	reply_status(req, ret < 0 ? ret : gs_fs_unlink(gf->fs, parent, name));
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gs_fuse *gf = req_gf(req);
	int ret = check_mutable(gf, parent, name);

	COUNT(gf, other, 1);
	reply_status(req, ret < 0 ? ret : gs_fs_rmdir(gf->fs, parent, name));
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct gs_fuse *gf = req_gf(req);
	int ret = check_mutable(gf, parent, name);

	COUNT(gf, other, 1);
	if (!ret)
		ret = check_mutable(gf, newparent, newname);
	if (!ret && (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)))
		ret = -EINVAL;	/* RENAME_WHITEOUT: overlayfs only */
	if (!ret)
		ret = gs_fs_rename(gf->fs, parent, name, newparent, newname, flags);
	reply_status(req, ret);
}

/* ---------------- open files ---------------- */

/*
 * Page-cache policy for a real file being opened; see the top comment.
 * O_DIRECT opens get no direct_io either: the kernel's own O_DIRECT path
 * (->direct_IO) writes back and drops the page cache around each request,
 * so such a file stays coherent with buffered users and can be mmapped
 * (direct_io files cannot, short of FUSE_DIRECT_IO_ALLOW_MMAP, which
 * libfuse 3.14 cannot ask for).
 */
static void set_cache_flags(struct gs_fuse *gf, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fi->keep_cache = 1;
}

static int open_vnode(struct gs_fuse *gf, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_vnode *vn = gs_vreg_get(gf->vreg, ino);
	int wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct gs_vfile *f;
	int ret;

	if (!vn)
		return -ESTALE;
	if (S_ISDIR(vn->mode))
		return -EISDIR;
	if (!vn->ops->open || (wr && !vn->ops->write))
		return -EACCES;
	if (wr && rd_only(gf))
		return -EROFS;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->vn = vn;
	f->flags = fi->flags;
	ret = vn->ops->open(gf, f);
	if (ret < 0) {
		free(f);
		return ret;
	}
	fi->fh = (uintptr_t)f;
	if (f->page_cache) {
		/* mmappable; pages from before this open may be stale */
		gs_vreg_set_cached(gf->vreg, vn);
		fi->keep_cache = 0;
		return 0;
	}
	fi->direct_io = 1;	/* generated contents: no page cache, no size limit */
	return 0;
}

/* After a write to @vn: drop the kernel's pages of the object's other
 * page-cached virtual files (nd: data, after a write to block/ or slice/).
 * Never @vn's own: the kernel updated those, and an invalidation of the
 * inode being written from its own write handler could deadlock. */
static void vnode_written(struct gs_fuse *gf, const struct gs_vnode *vn)
{
	uint64_t inos[64];
	unsigned n = gs_vreg_cached(gf->vreg, vn->obj, vn->ino, inos, 64);

	for (unsigned i = 0; i < n; i++)
		fuse_lowlevel_notify_inval_inode(gf->se, inos[i], 0, 0);
}

static void release_vnode(struct gs_fuse *gf, struct fuse_file_info *fi)
{
	struct gs_vfile *f = (struct gs_vfile *)(uintptr_t)fi->fh;

	if (!f)
		return;
	if (f->vn->ops->release)
		f->vn->ops->release(gf, f);
	free(f->buf);
	free(f);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	int ret;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino)) {
		ret = open_vnode(gf, ino, fi);
		if (ret < 0)
			return reply_status(req, ret);
		if (fuse_reply_open(req, fi) == -ENOENT)
			release_vnode(gf, fi);
		return;
	}
	if (rd_only(gf) && (fi->flags & (O_ACCMODE | O_TRUNC)) != O_RDONLY)
		return reply_status(req, -EROFS);
	ret = gs_fs_open(gf->fs, ino, fi->flags);
	if (ret < 0)
		return reply_status(req, ret);
	if (fi->flags & O_TRUNC) {	/* FUSE_CAP_ATOMIC_O_TRUNC */
		struct gs_stat in = { .size = 0 }, out;

		ret = gs_fs_setattr(gf->fs, ino, &in, GS_SET_SIZE, &out);
		if (ret < 0) {
			gs_fs_release(gf->fs, ino);
			return reply_status(req, ret);
		}
		kill_priv(req, ino, 1);
	}
	fi->fh = 0;
	set_cache_flags(gf, ino, fi);
	if (fuse_reply_open(req, fi) == -ENOENT)
		gs_fs_release(gf->fs, ino);	/* interrupted: no release will come */
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	struct fuse_entry_param e;
	struct gs_stat st;
	int ret;

	ret = do_create(req, parent, name, GS_T_ARRAY, mode, &st);
	if (ret < 0)
		return reply_status(req, ret);
	ret = gs_fs_open(gf->fs, st.ino, fi->flags);
	if (ret < 0)
		return reply_status(req, ret);
	fi->fh = 0;
	set_cache_flags(gf, st.ino, fi);
	entry_from(gf, &e, &st);
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		gs_fs_release(gf->fs, st.ino);
}

/* An open directory holds a reference too, so one removed (or renamed over)
 * while open stays fstat-able, with nlink 0, until its releasedir. */
static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	int ret;

	COUNT(gf, other, 1);
	fi->fh = 0;
	if (!gs_is_vino(ino)) {
		ret = gs_fs_open(gf->fs, ino, O_RDONLY);
		if (ret < 0)
			return reply_status(req, ret);
		fi->fh = 1;
	}
	if (fuse_reply_open(req, fi) == -ENOENT && fi->fh)
		gs_fs_release(gf->fs, ino);	/* interrupted: no releasedir will come */
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fi->fh)
		gs_fs_release(req_gf(req)->fs, ino);
	fuse_reply_err(req, 0);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);

	if (gs_is_vino(ino))
		release_vnode(gf, fi);
	else
		gs_fs_release(gf->fs, ino);
	fuse_reply_err(req, 0);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gs_vfile *f = (struct gs_vfile *)(uintptr_t)fi->fh;

	/* close() promises nothing about durability: fsync does.  A virtual
	 * file may act on close (a graph's edges) and fail it. */
	if (gs_is_vino(ino) && f && f->vn->ops->flush)
		return reply_status(req, f->vn->ops->flush(req_gf(req), f));
	fuse_reply_err(req, 0);
}

static void free_buf(void *p)
{
	free(p);
}

/* A reusable, page-aligned buffer of MAX_IO bytes for this worker thread;
 * on a ring thread serving a READ, the ring entry's own payload buffer, so
 * the data is not copied again for the reply. */
static char *thread_buf(struct gs_fuse *gf)
{
	void *p = gs_fuse_uring_read_buf(MAX_IO);

	if (p)
		return p;
	p = pthread_getspecific(gf->buf_key);

	if (p)
		return p;
	if (posix_memalign(&p, 4096, MAX_IO))
		return NULL;
	if (pthread_setspecific(gf->buf_key, p)) {
		free(p);
		return NULL;
	}
	return p;
}

static void read_vnode(fuse_req_t req, struct gs_fuse *gf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct gs_vfile *f = (struct gs_vfile *)(uintptr_t)fi->fh;
	ssize_t n;
	char *buf;

	if (!f->vn->ops->read) {
		size_t o = (uint64_t)off < f->len ? (size_t)off : f->len;

		fuse_reply_buf(req, f->buf + o, size < f->len - o ? size : f->len - o);
		return;
	}
	buf = thread_buf(gf);
	if (!buf)
		return reply_status(req, -ENOMEM);
	n = f->vn->ops->read(gf, f, buf, size < MAX_IO ? size : MAX_IO, (uint64_t)off);
	if (n < 0)
		return reply_status(req, (int)n);
	fuse_reply_buf(req, buf, (size_t)n);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	unsigned flags = (fi->flags & O_DIRECT) ? GS_FS_READ_DIRECT : 0;
	uint64_t ra_off, ra_len;
	ssize_t n;
	char *buf;

	COUNT(gf, reads, 1);
	if (off < 0)
		return reply_status(req, -EINVAL);
	if (gs_is_vino(ino))
		return read_vnode(req, gf, size, off, fi);
	buf = thread_buf(gf);
	if (!buf)
		return reply_status(req, -ENOMEM);
	if (size > MAX_IO)
		size = MAX_IO;
	/* A sequential reader: what follows is read ahead into the block
	 * cache (batched, asynchronous), and this read takes its part from
	 * there, so the device works ahead of the reader. */
	if (gs_streams_note(gf->streams, ino, (uint64_t)off, size, &ra_off, &ra_len)) {
		flags = GS_FS_READ_CACHED;
		COUNT(gf, stream_reads, 1);
	}
	if (ra_len) {
		gs_fs_readahead(gf->fs, ino, ra_off, ra_len);
		COUNT(gf, stream_ra_bytes, ra_len);
	}
	n = gs_fs_pread(gf->fs, ino, buf, size, (uint64_t)off, flags);
	if (n < 0)
		return reply_status(req, (int)n);
	COUNT(gf, read_bytes, (uint64_t)n);
	fuse_reply_buf(req, buf, (size_t)n);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	ssize_t n;

	COUNT(gf, writes, 1);
	if (off < 0)
		return reply_status(req, -EINVAL);
	if (gs_is_vino(ino)) {
		struct gs_vfile *f = (struct gs_vfile *)(uintptr_t)fi->fh;

		n = f->vn->ops->write ? f->vn->ops->write(gf, f, buf, size, (uint64_t)off)
				      : -EACCES;
		if (n > 0 && f->vn->obj)
			vnode_written(gf, f->vn);
	} else {
		n = gs_fs_write(gf->fs, ino, buf, size, (uint64_t)off);
		if (n > 0 && !fi->writepage)
			kill_priv(req, ino, 0);
		/* The kernel drops the written range's pages after a direct write,
		 * but not after an asynchronous one (its completion does not):
		 * pages a buffered reader filled meanwhile would stay stale
		 * (xfstests generic/451).  An O_DIRECT writer holds no page
		 * locks, so this cannot wait on the request it serves. */
		if (n > 0 && (fi->flags & O_DIRECT) && !fi->writepage)
			fuse_lowlevel_notify_inval_inode(gf->se, ino, off, n);
	}
	if (n < 0)
		return reply_status(req, (int)n);
	COUNT(gf, write_bytes, (uint64_t)n);
	fuse_reply_write(req, (size_t)n);
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);

	COUNT(gf, fsyncs, 1);
	if (gs_is_vino(ino)) {
		struct gs_vfile *f = (struct gs_vfile *)(uintptr_t)fi->fh;

		return reply_status(req, f && f->vn->ops->fsync ?
				    f->vn->ops->fsync(gf, f, datasync) : 0);
	}
	reply_status(req, gs_fs_fsync(gf->fs, ino, datasync));
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);
	int ret;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino))
		ret = -EOPNOTSUPP;
	else if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		ret = -EOPNOTSUPP;	/* collapse/insert/zero range/unshare */
	else if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		ret = -EOPNOTSUPP;	/* as fallocate(2) */
	else if (off < 0 || len <= 0)
		ret = -EINVAL;
	else if (rd_only(gf))
		ret = -EROFS;
	else
		ret = gs_fs_fallocate(gf->fs, ino, mode, (uint64_t)off, (uint64_t)len);
	if (!ret)
		kill_priv(req, ino, 0);
	reply_status(req, ret);
}

/* ---------------- directories ---------------- */

struct dir_fill {
	fuse_req_t req;
	struct gs_fuse *gf;
	int plus;		/* readdirplus: attributes with the names */
	char *buf;
	size_t size, used;
	int full;
};

/* One entry.  With readdirplus, @gs (a real object) comes with attributes,
 * which the kernel counts as a lookup; others go without (entry ino 0). */
static int add_entry(struct dir_fill *d, const char *name, mode_t mode, uint64_t ino,
		     uint64_t next, const struct gs_stat *gs)
{
	struct fuse_entry_param e = { .attr = { .st_ino = ino, .st_mode = mode } };
	size_t need;

	if (!d->plus)
		need = fuse_add_direntry(d->req, NULL, 0, name, NULL, 0);
	else
		need = fuse_add_direntry_plus(d->req, NULL, 0, name, NULL, 0);
	if (d->used + need > d->size) {
		d->full = 1;
		return 1;
	}
	if (!d->plus) {
		fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, name, &e.attr,
				  (off_t)next);
	} else {
		if (gs)
			entry_from(d->gf, &e, gs);
		fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used, name, &e,
				       (off_t)next);
	}
	d->used += need;
	return 0;
}

/* Offsets: 1 ".", 2 "..", 3 "/.gstore", then fs cookie c as c + 3. */
#define DIR_OFF_FS	3

static int fill_real(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	if (st->type == GS_T_INTERNAL)
		return 0;
	return add_entry(arg, name, type_bits(st), st->ino, next + DIR_OFF_FS, st);
}

struct vdir_fill {
	struct dir_fill d;
	uint64_t ino;
};

static int fill_virt(void *arg, const char *name, uint32_t mode, uint64_t next)
{
	struct vdir_fill *v = arg;

	return add_entry(&v->d, name, mode, gs_vreg_ino_hint(v->ino, name), next + DIR_OFF_FS,
			 NULL);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct gs_fuse *gf = req_gf(req);
	struct vdir_fill v = {
		.d = { .req = req, .gf = gf, .plus = plus, .size = size }, .ino = ino
	};
	struct dir_fill *d = &v.d;
	struct gs_vnode *vn = NULL;
	const struct gs_vops *ops = NULL;
	uint64_t parent = GS_ROOT_INO;
	struct gs_stat st;
	int ret = 0;

	COUNT(gf, other, 1);
	if (gs_is_vino(ino)) {
		vn = gs_vreg_get(gf->vreg, ino);
		if (!vn)
			return reply_status(req, -ESTALE);
		if (!S_ISDIR(vn->mode))
			return reply_status(req, -ENOTDIR);
		ops = vn->ops;
		parent = vn->parent;
	} else {
		ret = gs_fs_getattr(gf->fs, ino, &st);
		if (ret < 0)
			return reply_status(req, ret);
		if (!S_ISDIR(type_bits(&st)))
			return reply_status(req, -ENOTDIR);
		if (st.type != GS_T_DIR)
			ops = vtype(st.type);
		parent = st.parent ? st.parent : GS_ROOT_INO;
	}
	d->buf = malloc(size ? size : 1);
	if (!d->buf)
		return reply_status(req, -ENOMEM);
	if (off < 1 && add_entry(d, ".", S_IFDIR, ino, 1, NULL))
		goto reply;
	if (off < 2 && add_entry(d, "..", S_IFDIR, parent, 2, NULL))
		goto reply;
	if (off < 3 && ino == GS_ROOT_INO &&
	    add_entry(d, GS_META_NAME, S_IFDIR, GS_VINO_META, DIR_OFF_FS, NULL))
		goto reply;
	off = off < DIR_OFF_FS ? 0 : off - DIR_OFF_FS;
	if (vn) {
		struct gs_vdir dir = { .obj = vn->obj, .vn = vn };

		ret = ops->readdir ? ops->readdir(gf, &dir, (uint64_t)off, fill_virt, &v) : 0;
	} else if (ops) {
		struct gs_vdir dir = { .obj = ino };

		ret = ops->readdir ? ops->readdir(gf, &dir, (uint64_t)off, fill_virt, &v) : 0;
	} else {
		ret = gs_fs_readdir(gf->fs, ino, (uint64_t)off, fill_real, d);
	}
	/* An error after some entries: return those; the next call repeats it. */
	if (ret < 0 && !d->used) {
		free(d->buf);
		return reply_status(req, ret);
	}
reply:
	fuse_reply_buf(req, d->buf, d->used);
	free(d->buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 0);
}

/* `ls -l` in one round trip per buffer instead of a lookup per name. */
static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 1);
}

static void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct gs_fuse *gf = req_gf(req);

	COUNT(gf, fsyncs, 1);
	if (gs_is_vino(ino))
		return reply_status(req, 0);
	reply_status(req, gs_fs_fsync(gf->fs, ino, datasync));
}

/* ---------------- xattrs, statfs ---------------- */

/* Only user.* lives in the fs.  Everything else (security.capability, which
 * the kernel asks for on writes; ACLs) answers at once without the fs. */
static int xattr_ns_ok(const char *name)
{
	return !strncmp(name, "user.", 5);
}

static void reply_xattr(fuse_req_t req, size_t size, int (*get)(struct gs_fuse *gf,
			fuse_ino_t ino, const char *name, char *val, size_t size),
			fuse_ino_t ino, const char *name)
{
	struct gs_fuse *gf = req_gf(req);
	char *val = NULL;
	int ret;

	if (size) {
		val = malloc(size);
		if (!val)
			return reply_status(req, -ENOMEM);
	}
	ret = get(gf, ino, name, val, size);
	if (ret < 0)
		reply_status(req, ret);
	else if (!size)
		fuse_reply_xattr(req, (size_t)ret);
	else if ((size_t)ret > size)
		reply_status(req, -ERANGE);
	else
		fuse_reply_buf(req, val, (size_t)ret);
	free(val);
}

static int get_xattr(struct gs_fuse *gf, fuse_ino_t ino, const char *name, char *val,
		     size_t size)
{
	if (!xattr_ns_ok(name))
		return -ENODATA;
	if (gs_is_vino(ino)) {
		struct gs_vnode *vn = gs_vreg_get(gf->vreg, ino);

		if (!vn)
			return -ESTALE;
		return vn->ops->getxattr ? vn->ops->getxattr(gf, vn, name, val, size) : -ENODATA;
	}
	return gs_fs_getxattr(gf->fs, ino, name, val, size);
}

static int list_xattr(struct gs_fuse *gf, fuse_ino_t ino, const char *unused, char *list,
		      size_t size)
{
	if (gs_is_vino(ino)) {
		struct gs_vnode *vn = gs_vreg_get(gf->vreg, ino);

		if (!vn)
			return -ESTALE;
		return vn->ops->listxattr ? vn->ops->listxattr(gf, vn, list, size) : 0;
	}
	return gs_fs_listxattr(gf->fs, ino, list, size);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	COUNT(req_gf(req), other, 1);
	reply_xattr(req, size, get_xattr, ino, name);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	COUNT(req_gf(req), other, 1);
	reply_xattr(req, size, list_xattr, ino, NULL);
}

/* An object type may act on its objects' xattrs (nd: format on shape + dtype). */
static int obj_setxattr(struct gs_fuse *gf, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	const struct gs_vops *ops;
	struct gs_stat st;
	int ret;

	if (gs_fs_getattr(gf->fs, ino, &st) == 0 && (ops = vtype(st.type)) && ops->obj_setxattr) {
		ret = ops->obj_setxattr(gf, ino, name, value, size, flags);
		if (ret != -ENOSYS)
			return ret;
	}
	return gs_fs_setxattr(gf->fs, ino, name, value, size, flags);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct gs_fuse *gf = req_gf(req);
	int ret;

	COUNT(gf, other, 1);
	if (!xattr_ns_ok(name))
		ret = -EOPNOTSUPP;
	else if (gs_is_vino(ino))
		ret = -EPERM;
	else if (rd_only(gf))
		ret = -EROFS;
	else if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		ret = -EINVAL;
	else
		ret = obj_setxattr(gf, ino, name, value, size, flags);
	reply_status(req, ret);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct gs_fuse *gf = req_gf(req);
	int ret;

	COUNT(gf, other, 1);
	if (!xattr_ns_ok(name))
		ret = -ENODATA;
	else if (gs_is_vino(ino))
		ret = -EPERM;
	else if (rd_only(gf))
		ret = -EROFS;
	else
		ret = gs_fs_removexattr(gf->fs, ino, name);
	reply_status(req, ret);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct gs_fuse *gf = req_gf(req);
	struct gs_fs_statfs sf;
	struct statvfs sv;
	int ret;

	COUNT(gf, other, 1);
	ret = gs_fs_statfs(gf->fs, &sf);
	if (ret < 0)
		return reply_status(req, ret);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sf.block_size;
	sv.f_frsize = sf.block_size;
	sv.f_blocks = sf.blocks;
	sv.f_bfree = sf.bfree;
	sv.f_bavail = sf.bavail;	/* df's "Avail": what a file can still get */
	sv.f_files = sf.files;
	sv.f_ffree = sf.ffree;
	sv.f_favail = sf.ffree;
	sv.f_namemax = sf.name_max ? sf.name_max : GS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---------------- session ---------------- */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gs_fuse *gf = userdata;

	conn->max_write = MAX_IO;
	/* Let the kernel clear suid/sgid on write and truncate (it sends setattr). */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;	/* see the top comment */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* File handles (name_to_handle_at, NFS export): the kernel looks
	 * nodeids up by LOOKUP of "." and ".." and checks the generation. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* More requests in flight for readahead and async direct I/O. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	/* the kernel takes the smaller of this and its bdi's read_ahead_kb */
	if (gf->readahead)
		conn->max_readahead = gf->readahead;
}

static const struct fuse_lowlevel_ops gs_fuse_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.readlink = fs_readlink,
	.link = fs_link,
	.rename = fs_rename,
	.open = fs_open,
	.create = fs_create,
	.read = fs_read,
	.write = fs_write,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.fallocate = fs_fallocate,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.releasedir = fs_releasedir,
	.readdirplus = fs_readdirplus,
	.fsyncdir = fs_fsyncdir,
	.statfs = fs_statfs,
	.setxattr = fs_setxattr,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.removexattr = fs_removexattr,
};

/* The read-ahead window: as asked, but at most an eighth of the block cache,
 * so that several streams' windows fit and none evicts what another read
 * ahead before its reader got there. */
static uint64_t stream_window(struct gs_fs *fs, unsigned kib)
{
	struct gs_fs_statfs sf;
	uint64_t w = (uint64_t)kib << 10;

	if (!gs_fs_statfs(fs, &sf) && sf.cache_bytes && w > sf.cache_bytes / 8)
		w = sf.cache_bytes / 8;
	return w;
}

int gs_fuse_new(struct gs_fuse **gfp, struct gs_fs *fs, const struct gs_fuse_conf *conf,
		struct fuse_args *args)
{
	struct gs_fuse *gf;
	int ret;

	gf = calloc(1, sizeof(*gf));
	if (!gf)
		return -ENOMEM;
	gf->fs = fs;
	gf->rdonly = conf->rdonly;
	gf->timeout = conf->timeout < 0 ? 1.0 : conf->timeout;
	gf->readahead = conf->readahead_kib > (1u << 21) ? 1u << 31 : conf->readahead_kib << 10;
	gf->kdirty = conf->kdirty_bytes;
	gf->uring_mode = conf->uring;
	gf->threads = conf->threads;
	if (conf->stream_ra_kib) {
		gf->streams = gs_streams_new(stream_window(fs, conf->stream_ra_kib));
		if (!gf->streams) {
			ret = -ENOMEM;
			goto free_gf;
		}
	}
	ret = -pthread_key_create(&gf->buf_key, free_buf);
	if (ret)
		goto free_streams;
	gf->vreg = gs_vreg_new();
	if (!gf->vreg) {
		ret = -ENOMEM;
		goto delete_key;
	}
	ret = gs_vreg_add_fixed(gf->vreg, GS_VINO_META, GS_ROOT_INO, GS_META_NAME,
				&gs_fuse_meta_ops, S_IFDIR | 0555);
	if (ret < 0)
		goto free_vreg;
	gf->se = fuse_session_new(args, &gs_fuse_ops, sizeof(gs_fuse_ops), gf);
	if (!gf->se) {
		ret = -EINVAL;	/* libfuse printed why (bad option) */
		goto free_vreg;
	}
	*gfp = gf;
	return 0;

free_vreg:
	gs_vreg_free(gf, gf->vreg);
delete_key:
	pthread_key_delete(gf->buf_key);
free_streams:
	gs_streams_free(gf->streams);
free_gf:
	free(gf);
	return ret;
}

struct fuse_session *gs_fuse_session(struct gs_fuse *gf)
{
	return gf->se;
}

int gs_fuse_start_transport(struct gs_fuse *gf)
{
	return gs_fuse_uring_attach(&gf->uring, gf->se, gf->uring_mode, gf->threads);
}

void gs_fuse_destroy(struct gs_fuse *gf)
{
	if (!gf)
		return;
	/* the session is over (unmounted): the ring threads have nothing to serve */
	gs_fuse_uring_stop(gf->uring);
	gf->uring = NULL;
	for (size_t i = 0; i < sizeof(vtypes) / sizeof(vtypes[0]); i++)
		if (vtypes[i] && vtypes[i]->destroy)
			vtypes[i]->destroy(gf);
	fuse_session_destroy(gf->se);
	gs_vreg_free(gf, gf->vreg);
	/* Worker threads have exited and freed their buffers by now. */
	pthread_key_delete(gf->buf_key);
	gs_streams_free(gf->streams);
	free(gf);
}

int gs_fuse_remount(struct gs_fuse *gf, int ro)
{
	int ret = gs_fs_remount(gf->fs, ro ? GS_FS_RDONLY : 0);

	if (!ret)
		__atomic_store_n(&gf->rdonly, ro ? 1u : 0u, __ATOMIC_RELEASE);
	return ret;
}

/*
 * The mount's device number from /proc/self/mountinfo: stat(2) on the mount
 * point would wait for FUSE_INIT, which only the session loop answers.  The
 * last matching line is the mount on top.
 */
int gs_fuse_mount_dev(const char *mnt, unsigned *maj, unsigned *min)
{
	char *line = NULL, path[PATH_MAX];
	size_t cap = 0;
	int ret = -ENOENT;
	FILE *f;

	if (!realpath(mnt, path))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char mp[PATH_MAX + 1], *sep = strstr(line, " - ");
		unsigned a, b;

		if (!sep || strncmp(sep, " - fuse", 7) ||
		    sscanf(line, "%*u %*u %u:%u %*s %4096s", &a, &b, mp) != 3)
			continue;
		gs_mountinfo_unescape(mp);
		if (!strcmp(mp, path)) {
			*maj = a;
			*min = b;
			ret = 0;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/* Write @val to /sys/class/bdi/MAJ:MIN/@attr of the mount at @mnt. */
static int bdi_set(const char *mnt, const char *attr, unsigned long long val)
{
	char path[96], buf[32];
	unsigned maj, min;
	int fd, n, ret;

	ret = gs_fuse_mount_dev(mnt, &maj, &min);
	if (ret < 0)
		return ret;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/%s", maj, min, attr);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%llu\n", val);
	ret = write(fd, buf, (size_t)n) == n ? 0 : -errno;
	close(fd);
	return ret;
}

int gs_fuse_set_readahead(struct gs_fuse *gf, const char *mnt)
{
	if (!gf->readahead)
		return 0;
	return bdi_set(mnt, "read_ahead_kb", gf->readahead >> 10);
}

int gs_fuse_set_dirty(struct gs_fuse *gf, const char *mnt)
{
	int ret;

	if (!gf->kdirty)
		return 0;
	/* the cap first: without it, lifting the strict limit would leave the
	 * mount only the global one */
	ret = bdi_set(mnt, "max_bytes", gf->kdirty);
	if (!ret)
		ret = bdi_set(mnt, "strict_limit", 0);
	return ret;
}
