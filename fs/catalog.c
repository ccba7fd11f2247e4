// SPDX-License-Identifier: MIT
/*
 * The catalog: inodes (objects), directories, xattrs, orphans and internal
 * objects, and the namespace operations of gstore_fs.h.
 *
 * Inodes live in a fixed table; an in-memory struct gs_inode caches each one
 * used since mount (with its extent map and, for directories, a hash of its
 * entries), and every change is encoded back into its table block at once,
 * under fs->ns, so it joins the running transaction.
 *
 * Directories are objects whose data blocks (metadata, journaled) hold
 * variable-length records as in ext2.  A readdir cookie is the byte
 * position of a record plus one, stable while the directory lives.
 *
 * Orphans: an object whose last name goes while it is open stays, with
 * nlink 0, on a list that starts at the root inode's next_orphan; the last
 * gs_fs_release() frees it, and mount frees whatever a crash left there.
 *
 * Arrays, symlinks and special files may have several names (link_once());
 * the kinds themselves are made in link.c.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <linux/fs.h>

#include "fs_internal.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* ---- inode encode / decode ---- */

static struct timespec ld_time(const struct gs_dtime *t)
{
	struct timespec ts = { .tv_sec = (time_t)ld64(t->sec), .tv_nsec = ld32(t->nsec) };

	if (ts.tv_nsec >= 1000000000)
		ts.tv_nsec = 0;
	return ts;
}

static void st_time(struct gs_dtime *t, struct timespec ts)
{
	t->sec = st64((uint64_t)ts.tv_sec);
	t->nsec = st32((uint32_t)ts.tv_nsec);
	t->rsvd = 0;
}

void inode_decode(struct inode_m *m, const struct gs_dinode *d)
{
	m->type = ld16(d->type);
	m->flags = ld16(d->flags);
	m->mode = ld32(d->mode);
	m->uid = ld32(d->uid);
	m->gid = ld32(d->gid);
	m->nlink = ld32(d->nlink);
	m->generation = ld32(d->generation);
	m->size = ld64(d->size);
	m->blocks = ld64(d->blocks);
	m->parent = ld64(d->parent);
	m->owner = ld64(d->owner);
	m->child_head = ld64(d->child_head);
	m->next_sib = ld64(d->next_sib);
	m->next_orphan = ld64(d->next_orphan);
	m->xattr_blk = ld64(d->xattr_blk);
	m->roots[0] = ld64(d->roots[0]);
	m->roots[1] = ld64(d->roots[1]);
	m->atime = ld_time(&d->atime);
	m->mtime = ld_time(&d->mtime);
	m->ctime = ld_time(&d->ctime);
	m->xroot = d->xroot;
}

void inode_encode(struct gs_dinode *d, const struct inode_m *m)
{
	memset(d, 0, sizeof(*d));
	d->type = st16(m->type);
	d->flags = st16(m->flags);
	d->mode = st32(m->mode);
	d->uid = st32(m->uid);
	d->gid = st32(m->gid);
	d->nlink = st32(m->nlink);
	d->generation = st32(m->generation);
	d->size = st64(m->size);
	d->blocks = st64(m->blocks);
	d->parent = st64(m->parent);
	d->owner = st64(m->owner);
	d->child_head = st64(m->child_head);
	d->next_sib = st64(m->next_sib);
	d->next_orphan = st64(m->next_orphan);
	d->xattr_blk = st64(m->xattr_blk);
	d->roots[0] = st64(m->roots[0]);
	d->roots[1] = st64(m->roots[1]);
	st_time(&d->atime, m->atime);
	st_time(&d->mtime, m->mtime);
	st_time(&d->ctime, m->ctime);
	d->xroot = m->xroot;
}

uint64_t itable_blk(const struct gs_fs *fs, uint64_t ino, uint32_t *off)
{
	uint32_t ipb = (fs->bs - GS_ITABLE_OFF) / GS_INODE_SIZE;

	*off = GS_ITABLE_OFF + (uint32_t)(ino % ipb) * GS_INODE_SIZE;
	return fs->l.itable_start + ino / ipb;
}

static int read_dinode(struct gs_fs *fs, uint64_t ino, struct gs_dinode *d)
{
	struct mbuf *m;
	uint32_t off;
	int ret = mb_get(fs, itable_blk(fs, ino, &off), GS_BT_ITABLE, &m);

	if (ret < 0)
		return ret;
	memcpy(d, m->data + off, sizeof(*d));
	return 0;
}

int iwrite(struct gs_fs *fs, struct gs_inode *ip)
{
	struct mbuf *m;
	uint32_t off;
	int ret = mb_get(fs, itable_blk(fs, ip->ino, &off), GS_BT_ITABLE, &m);

	if (ret < 0)
		return ret;
	inode_encode((struct gs_dinode *)(m->data + off), &ip->m);
	mb_dirty(fs, m);
	return 0;
}

void itouch(struct gs_inode *ip, bool mtime, bool ctime)
{
	struct timespec t = now_ts();

	if (mtime)
		ip->m.mtime = t;
	if (ctime)
		ip->m.ctime = t;
}

static bool type_ok(uint16_t t)
{
	return fs_type(t) != NULL;
}

/* S_IFMT of a new object of @type; special files bring theirs in @mode. */
static uint32_t type_fmt(uint32_t type, uint32_t mode)
{
	const struct fs_type_ops *t = fs_type(type);

	return t && t->ifmt ? t->ifmt : mode & S_IFMT;
}

/* Non-directories may have several names, up to this many (ext4's limit). */
#define GS_LINK_MAX	65000u

/*
 * Record in the superblock, durably, that the image now uses @bit, before
 * any transaction that depends on it can commit: feat_mu keeps a second user
 * of the same feature waiting until the first one's superblock write is done.
 */
static pthread_mutex_t feat_mu = PTHREAD_MUTEX_INITIALIZER;

int fs_feature_enable(struct gs_fs *fs, uint32_t bit)
{
	uint32_t have;
	int ret = 0;

	pthread_mutex_lock(&feat_mu);
	pthread_mutex_lock(&fs->ns);
	have = ld32(fs->sb.feature_incompat);
	if (!(have & bit))
		fs->sb.feature_incompat = st32(have | bit);
	pthread_mutex_unlock(&fs->ns);
	if (!(have & bit))
		ret = sb_write(fs);
	pthread_mutex_unlock(&feat_mu);
	return ret;
}

static bool is_dirlike(uint16_t t)
{
	return type_ok(t) && fs_type(t)->ifmt == S_IFDIR;
}

static uint32_t ihash(const struct gs_fs *fs, uint64_t ino)
{
	return (uint32_t)(ino * 0x9e3779b97f4a7c15ULL >> 40) & (fs->ihash_n - 1);
}

/* Look an inode up (loading it), take a reference.  Under fs->ns. */
int iget(struct gs_fs *fs, uint64_t ino, struct gs_inode **ipp)
{
	struct gs_inode *ip;
	struct gs_dinode d;
	uint32_t h;
	int ret;

	if (ino == 0 || ino >= fs->l.ninodes)
		return -ENOENT;
	h = ihash(fs, ino);
	for (ip = fs->ihash[h]; ip; ip = ip->hnext) {
		if (ip->ino == ino) {
			if (ip->freed)
				return -ENOENT;
			ip->refs++;
			*ipp = ip;
			return 0;
		}
	}
	if (!bit_test(fs->al.imap, ino))
		return -ENOENT;
	ret = read_dinode(fs, ino, &d);
	if (ret < 0)
		return ret;
	ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	inode_decode(&ip->m, &d);
	if (!type_ok(ip->m.type) || ip->m.size > GS_MAX_FILE_SIZE ||
	    (ip->m.type == GS_T_DIR && (ip->m.size % fs->bs || ip->m.size / fs->bs > UINT32_MAX)) ||
	    (ip->m.type == GS_T_SYMLINK && (!ip->m.size || ip->m.size >= GS_SYMLINK_MAX ||
	     ((ip->m.flags & GS_IFL_INLINE) && ip->m.size > GS_INLINE_MAX)))) {
		gs_err("gstore: inode %" PRIu64 " is corrupt (type %u, size %" PRIu64 ")", ino,
		       ip->m.type, ip->m.size);
		free(ip);
		return -EUCLEAN;
	}
	ip->ino = ino;
	ip->refs = 1;
	ip->data_dirty = fs->evicted_dirty;
	pthread_rwlock_init(&ip->rw, NULL);
	ip->hnext = fs->ihash[h];
	fs->ihash[h] = ip;
	fs->icount++;
	*ipp = ip;
	return 0;
}

static void inode_free_mem(struct gs_inode *ip)
{
	xmap_free(&ip->map);
	dir_index_free(ip->dir);
	pthread_rwlock_destroy(&ip->rw);
	free(ip);
}

static void ihash_del(struct gs_fs *fs, struct gs_inode *ip)
{
	struct gs_inode **pp = &fs->ihash[ihash(fs, ip->ino)];

	while (*pp && *pp != ip)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = ip->hnext;
	fs->icount--;
}

/* Under fs->ns.  Freed objects leave memory with their last reference;
 * others stay cached (their maps are what makes reads cheap) until more
 * than GS_ICACHE_MAX are: then unused ones go as they are released.  An
 * in-memory inode holds nothing that is not in its table block already. */
void iput(struct gs_fs *fs, struct gs_inode *ip)
{
	if (!ip)
		return;
	if (--ip->refs == 0 && (ip->freed || (fs->icount > fs->icache_max && !ip->opens))) {
		/* its data may still be dirty in the cache: whoever loads it
		 * next must not read around the cache before that is flushed */
		if (ip->data_dirty > fs->evicted_dirty)
			fs->evicted_dirty = ip->data_dirty;
		ihash_del(fs, ip);
		inode_free_mem(ip);
	}
}

void icache_destroy(struct gs_fs *fs)
{
	for (uint32_t h = 0; fs->ihash && h < fs->ihash_n; h++) {
		struct gs_inode *ip, *n;

		for (ip = fs->ihash[h]; ip; ip = n) {
			n = ip->hnext;
			inode_free_mem(ip);
		}
		fs->ihash[h] = NULL;
	}
}

void istat(const struct gs_fs *fs, const struct gs_inode *ip, struct gs_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->ino = ip->ino;
	st->parent = ip->m.parent;
	st->type = ip->m.type;
	st->mode = ip->m.mode;
	st->uid = ip->m.uid;
	st->gid = ip->m.gid;
	st->nlink = ip->m.nlink;
	st->size = ip->m.size;
	st->blocks = ip->m.blocks << (fs->bshift - 9);
	st->atime = ip->m.atime;
	st->mtime = ip->m.mtime;
	st->ctime = ip->m.ctime;
	st->gen = ip->m.generation;
	if (ip->m.type == GS_T_SPECIAL && (S_ISCHR(ip->m.mode) || S_ISBLK(ip->m.mode)))
		st->rdev = ip->m.roots[0];
}

/* ---- operation prologue ---- */

static int name_ok(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strlen(name);
	if (!len)
		return -ENOENT;
	if (len > GS_NAME_MAX)
		return -ENAMETOOLONG;
	if (strchr(name, '/'))
		return -EINVAL;
	return 0;
}

static bool dot_name(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* ---- freeing objects ---- */

static int orphan_del(struct gs_fs *fs, struct gs_inode *ip);
static int orphan_add(struct gs_fs *fs, struct gs_inode *ip);

int ifree_object(struct gs_fs *fs, struct gs_inode *ip)
{
	const struct fs_type_ops *t = fs_type(ip->m.type);
	uint64_t child = ip->m.child_head;
	uint32_t guard = 0;
	int ret;

	if (t && t->destroy) {
		ret = t->destroy(fs, ip);
		if (ret < 0)
			return ret;
	}
	/* internal objects go with their owner */
	while (child && guard++ < fs->l.ninodes) {
		struct gs_inode *cp;

		ret = iget(fs, child, &cp);
		if (ret < 0)
			break;	/* fsck reclaims what we cannot reach */
		child = cp->m.next_sib;
		if (cp->opens) {	/* freed at its last release (or next mount) */
			cp->m.nlink = 0;
			cp->m.owner = 0;
			cp->m.next_sib = 0;
			ret = orphan_add(fs, cp);
			if (!ret)
				ret = iwrite(fs, cp);
		} else {
			ret = ifree_object(fs, cp);
		}
		iput(fs, cp);
		if (ret < 0)
			return ret;
	}
	ip->m.child_head = 0;
	if (ip->m.flags & GS_IFL_ORPHAN) {
		ret = orphan_del(fs, ip);
		if (ret < 0)
			return ret;
	}
	if (ip->m.xattr_blk && !(ip->m.flags & GS_IFL_XATTR_OBJ)) {	/* else a child */
		mb_forget(fs, ip->m.xattr_blk);
		ret = alloc_free(fs, ip->m.xattr_blk, 1);
		if (ret < 0)
			return ret;
		ip->m.xattr_blk = 0;
	}
	ret = xmap_free_all(fs, ip);
	if (ret < 0)
		return ret;
	ret = free_inode_bit(fs, ip->ino);
	if (ret < 0)
		return ret;
	{
		uint32_t gen = ip->m.generation;

		memset(&ip->m, 0, sizeof(ip->m));
		ip->m.generation = gen;	/* the next user of this number gets gen + 1 */
	}
	ip->freed = true;
	return iwrite(fs, ip);
}

/* The orphan list hangs off the root inode's next_orphan. */
static int orphan_add(struct gs_fs *fs, struct gs_inode *ip)
{
	struct gs_inode *root;
	int ret = iget(fs, GS_ROOT_INO, &root);

	if (ret < 0)
		return ret;
	ip->m.next_orphan = root->m.next_orphan;
	ip->m.flags |= GS_IFL_ORPHAN;
	root->m.next_orphan = ip->ino;
	ret = iwrite(fs, root);
	iput(fs, root);
	return ret;
}

static int orphan_del(struct gs_fs *fs, struct gs_inode *ip)
{
	struct gs_inode *prev;
	uint64_t cur;
	uint32_t guard = 0;
	int ret = iget(fs, GS_ROOT_INO, &prev);

	if (ret < 0)
		return ret;
	for (cur = prev->m.next_orphan; cur && guard++ < fs->l.ninodes;) {
		struct gs_inode *cp;

		if (cur == ip->ino) {
			prev->m.next_orphan = ip->m.next_orphan;
			ret = iwrite(fs, prev);
			break;
		}
		ret = iget(fs, cur, &cp);
		if (ret < 0)
			break;
		iput(fs, prev);
		prev = cp;
		cur = cp->m.next_orphan;
	}
	iput(fs, prev);
	ip->m.flags &= ~GS_IFL_ORPHAN;
	ip->m.next_orphan = 0;
	return ret;
}

int orphans_cleanup(struct gs_fs *fs)
{
	struct gs_inode *root = NULL;
	uint32_t n = 0;
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, GS_ROOT_INO, &root);
	while (!ret && root->m.next_orphan && n++ < fs->l.ninodes) {
		struct gs_inode *ip;
		uint64_t ino = root->m.next_orphan;

		ret = iget(fs, ino, &ip);
		if (ret < 0) {	/* a dangling head: drop the list, fsck sorts it out */
			root->m.next_orphan = 0;
			ret = iwrite(fs, root);
			break;
		}
		if (!(ip->m.flags & GS_IFL_ORPHAN)) {
			root->m.next_orphan = 0;
			ret = iwrite(fs, root);
			iput(fs, ip);
			break;
		}
		ret = ifree_object(fs, ip);
		iput(fs, ip);
	}
	if (root)
		iput(fs, root);
	pthread_mutex_unlock(&fs->ns);
	if (!ret && n)
		ret = jnl_sync(fs, false);
	return ret;
}

/* Drop a link; free the object at zero unless it is open. */
static int drop_link(struct gs_fs *fs, struct gs_inode *ip)
{
	if (ip->m.nlink)
		ip->m.nlink--;
	if (ip->m.type == GS_T_DIR && ip->m.nlink)
		ip->m.nlink = 0;	/* a removed directory has no links left */
	itouch(ip, false, true);
	if (ip->m.nlink)
		return iwrite(fs, ip);
	if (ip->opens) {
		int ret = orphan_add(fs, ip);

		return ret < 0 ? ret : iwrite(fs, ip);
	}
	return ifree_object(fs, ip);
}

/* ---- namespace operations ---- */

int gs_fs_lookup(struct gs_fs *fs, uint64_t parent, const char *name, struct gs_stat *st)
{
	struct gs_inode *dp, *ip;
	struct dirent_m *e;
	uint64_t ino;
	int ret = name_ok(name);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, parent, &dp);
	if (ret < 0)
		goto unlock;
	if (!strcmp(name, ".")) {
		ino = parent;
	} else if (!strcmp(name, "..")) {
		ino = dp->m.parent ? dp->m.parent : GS_ROOT_INO;
	} else {
		ret = dir_load(fs, dp);
		if (ret < 0)
			goto put_dir;
		e = dindex_find(dp->dir, name);
		if (!e) {
			ret = -ENOENT;
			goto put_dir;
		}
		ino = e->ino;
	}
	ret = iget(fs, ino, &ip);
	if (ret == -ENOENT)
		ret = -EUCLEAN;	/* an entry pointing at a free inode */
	if (ret < 0) {
		gs_err("gstore: directory %" PRIu64 ": entry '%s' points at a bad inode",
		       parent, name);
		goto put_dir;
	}
	istat(fs, ip, st);
	iput(fs, ip);
put_dir:
	iput(fs, dp);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

int gs_fs_getattr(struct gs_fs *fs, uint64_t ino, struct gs_stat *st)
{
	struct gs_inode *ip;
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (!ret) {
		istat(fs, ip, st);
		iput(fs, ip);
	}
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

static int new_inode(struct gs_fs *fs, uint32_t type, uint32_t mode, uint32_t uid,
		     uint32_t gid, uint64_t parent, struct gs_inode **ipp)
{
	struct gs_dinode old;
	struct gs_inode *ip;
	uint64_t ino;
	int ret = alloc_inode(fs, &ino);

	if (ret < 0)
		return ret;
	ret = read_dinode(fs, ino, &old);
	if (ret < 0)
		goto free_bit;
	ip = calloc(1, sizeof(*ip));
	if (!ip) {
		ret = -ENOMEM;
		goto free_bit;
	}
	ip->ino = ino;
	ip->refs = 1;
	ip->data_dirty = fs->evicted_dirty;
	pthread_rwlock_init(&ip->rw, NULL);
	ip->m.type = type;
	ip->m.mode = (mode & 07777) | type_fmt(type, mode);
	ip->m.uid = uid;
	ip->m.gid = gid;
	ip->m.nlink = type == GS_T_DIR ? 2 : 1;
	ip->m.generation = ld32(old.generation) + 1;
	ip->m.parent = parent;
	ip->m.atime = ip->m.mtime = ip->m.ctime = now_ts();
	ip->map.loaded = true;	/* new: empty map */
	{
		uint32_t h = ihash(fs, ino);

		ip->hnext = fs->ihash[h];
		fs->ihash[h] = ip;
		fs->icount++;
	}
	ret = iwrite(fs, ip);
	if (ret < 0) {
		ip->freed = true;
		iput(fs, ip);
		return ret;
	}
	*ipp = ip;
	return 0;
free_bit:
	free_inode_bit(fs, ino);
	return ret;
}

static bool create_type_ok(uint32_t type)
{
	return type == GS_T_DIR || type == GS_T_ARRAY || type == GS_T_GRAPH ||
	       type == GS_T_ND || type == GS_T_SYMLINK || type == GS_T_SPECIAL;
}

/* Give a new object what its kind keeps in the inode. */
static void init_kind(struct gs_inode *ip, const struct newobj *o)
{
	if (o->type == GS_T_SPECIAL) {
		ip->m.roots[0] = o->rdev;
	} else if (o->type == GS_T_SYMLINK) {
		ip->m.size = o->tlen;
		if (o->target) {	/* xroot.h stays zero: an empty extent tree */
			ip->m.flags |= GS_IFL_INLINE;
			memcpy(ip->m.xroot.e, o->target, o->tlen);
		}
	}
}

/* Prologue of an operation that adds @name, before it takes fs->ns. */
static int add_name_begin(struct gs_fs *fs, const char *name)
{
	int ret = name_ok(name);

	if (ret < 0)
		return ret;
	if (dot_name(name))
		return -EEXIST;
	ret = fs_check_rw(fs);
	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	return 0;
}

/* Under fs->ns: *dpp = live directory @parent, loaded, without @name yet. */
static int add_name_dir(struct gs_fs *fs, uint64_t parent, const char *name,
			struct gs_inode **dpp)
{
	struct gs_inode *dp;
	int ret = iget(fs, parent, &dp);

	if (ret < 0)
		return ret;
	ret = dir_load(fs, dp);
	if (!ret && dp->m.nlink == 0)
		ret = -ENOENT;	/* removed while we looked */
	if (!ret && dindex_find(dp->dir, name))
		ret = -EEXIST;
	if (ret < 0)
		iput(fs, dp);
	else
		*dpp = dp;
	return ret;
}

static int create_once(struct gs_fs *fs, uint64_t parent, const char *name,
		       const struct newobj *o, struct gs_stat *st)
{
	struct gs_inode *dp, *ip;
	uint32_t mode = o->mode, gid = o->gid;
	int ret;

	if (!create_type_ok(o->type))
		return -EINVAL;
	ret = add_name_begin(fs, name);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&fs->ns);
	ret = add_name_dir(fs, parent, name, &dp);
	if (ret < 0)
		goto unlock;
	if (o->type == GS_T_DIR && dp->m.nlink >= UINT32_MAX - 1) {
		ret = -EMLINK;
		goto put_dir;
	}
	/* BSD group semantics in a setgid directory, as every Linux fs does;
	 * the kernel already dropped S_ISGID from a non-member's file mode */
	if (dp->m.mode & S_ISGID) {
		gid = dp->m.gid;
		if (o->type == GS_T_DIR)
			mode |= S_ISGID;
	}
	ret = new_inode(fs, o->type, mode, o->uid, gid, parent, &ip);
	if (ret < 0)
		goto put_dir;
	init_kind(ip, o);
	if (o->unnamed) {
		/* pinned like an open file, freed by its release (or the next
		 * mount) unless link_once() names it first */
		ip->m.nlink = 0;
		ret = orphan_add(fs, ip);
		if (!ret)
			ret = iwrite(fs, ip);
		if (ret < 0) {
			fs_fail(fs, ret, "create");
		} else {
			ip->opens++;
			ip->refs++;
			if (st)
				istat(fs, ip, st);
		}
		iput(fs, ip);
		goto put_dir;
	}
	ret = iwrite(fs, ip);
	if (!ret)
		ret = dir_add(fs, dp, name, ip->ino, o->type);
	if (ret < 0) {
		/* nothing of this op is committed yet, but the transaction now
		 * holds part of it: undo the inode */
		int r = ifree_object(fs, ip);

		iput(fs, ip);
		if (r < 0)
			fs_fail(fs, r, "create rollback");
		goto put_dir;
	}
	if (o->type == GS_T_DIR)
		dp->m.nlink++;
	itouch(dp, true, true);
	ret = iwrite(fs, dp);
	if (ret < 0)
		fs_fail(fs, ret, "create");
	if (!ret && st)
		istat(fs, ip, st);
	iput(fs, ip);
put_dir:
	iput(fs, dp);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* A new name for @ino.  @adopt: @ino is an unnamed object from create_once()
 * (nlink 0, on the orphan list) that gets its first name. */
static int link_once(struct gs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
		     struct gs_stat *st, bool adopt)
{
	struct gs_inode *dp, *ip;
	int ret = add_name_begin(fs, name);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	if (is_dirlike(ip->m.type) || ip->m.type == GS_T_INTERNAL) {
		ret = -EPERM;	/* link(2): directories have one name */
		goto put;
	}
	if (!ip->m.nlink && !adopt) {
		ret = -ENOENT;	/* unlinked while open: no way back */
		goto put;
	}
	if (ip->m.nlink >= GS_LINK_MAX) {
		ret = -EMLINK;
		goto put;
	}
	ret = add_name_dir(fs, parent, name, &dp);
	if (ret < 0)
		goto put;
	ret = dir_add(fs, dp, name, ip->ino, (uint8_t)ip->m.type);
	if (ret < 0)
		goto put_dir;	/* nothing changed yet (ENOSPC and the like) */
	if (ip->m.flags & GS_IFL_ORPHAN)
		ret = orphan_del(fs, ip);
	if (!ip->m.nlink)
		ip->m.parent = parent;
	ip->m.nlink++;
	itouch(ip, false, true);
	itouch(dp, true, true);
	if (!ret)
		ret = iwrite(fs, ip);
	if (!ret)
		ret = iwrite(fs, dp);
	if (ret < 0)
		fs_fail(fs, ret, "link");
	else if (st)
		istat(fs, ip, st);
put_dir:
	iput(fs, dp);
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* Common part of unlink and rmdir. */
static int remove_name(struct gs_fs *fs, uint64_t parent, const char *name, bool dir)
{
	struct gs_inode *dp, *ip;
	struct dirent_m *e;
	int ret = name_ok(name);

	if (ret < 0)
		return ret;
	if (dot_name(name))
		return dir ? -EINVAL : -EISDIR;
	ret = fs_check_rw(fs);
	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, parent, &dp);
	if (ret < 0)
		goto unlock;
	ret = dir_load(fs, dp);
	if (ret < 0)
		goto put_dir;
	e = dindex_find(dp->dir, name);
	if (!e) {
		ret = -ENOENT;
		goto put_dir;
	}
	ret = iget(fs, e->ino, &ip);
	if (ret < 0) {
		if (ret == -ENOENT)
			ret = -EUCLEAN;
		goto put_dir;
	}
	if (dir && !is_dirlike(ip->m.type)) {
		ret = -ENOTDIR;
		goto put;
	}
	if (!dir && ip->m.type == GS_T_DIR) {
		ret = -EISDIR;
		goto put;
	}
	if (ip->m.type == GS_T_DIR) {
		ret = dir_load(fs, ip);
		if (ret < 0)
			goto put;
		if (ip->dir->count) {
			ret = -ENOTEMPTY;
			goto put;
		}
	}
	ret = dir_del(fs, dp, name);
	if (ret < 0)
		goto put;
	if (ip->m.type == GS_T_DIR && dp->m.nlink > 2)
		dp->m.nlink--;
	itouch(dp, true, true);
	ret = iwrite(fs, dp);
	if (!ret)
		ret = drop_link(fs, ip);
	if (ret < 0)
		fs_fail(fs, ret, "unlink");
put:
	iput(fs, ip);
put_dir:
	iput(fs, dp);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

int gs_fs_unlink(struct gs_fs *fs, uint64_t parent, const char *name)
{
	return remove_name(fs, parent, name, false);
}

int gs_fs_rmdir(struct gs_fs *fs, uint64_t parent, const char *name)
{
	return remove_name(fs, parent, name, true);
}

/* Is @anc an ancestor of (or equal to) directory @ino? */
static int is_ancestor(struct gs_fs *fs, uint64_t anc, uint64_t ino)
{
	uint32_t guard = 0;

	while (guard++ < 4096) {
		struct gs_inode *ip;
		uint64_t p;
		int ret;

		if (ino == anc)
			return 1;
		if (ino == GS_ROOT_INO)
			return 0;
		ret = iget(fs, ino, &ip);
		if (ret < 0)
			return ret;
		p = ip->m.parent;
		iput(fs, ip);
		ino = p;
	}
	return -ELOOP;
}

static int do_rename(struct gs_fs *fs, struct gs_inode *sdp, const char *name,
		     struct gs_inode *ddp, const char *newname, unsigned flags)
{
	struct dirent_m *se = dindex_find(sdp->dir, name), *de;
	struct gs_inode *sp = NULL, *tp = NULL;
	int ret;

	if (!se)
		return -ENOENT;
	de = dindex_find(ddp->dir, newname);
	if ((flags & RENAME_NOREPLACE) && de)
		return -EEXIST;
	if ((flags & RENAME_EXCHANGE) && !de)
		return -ENOENT;
	if (se == de || (de && de->ino == se->ino))
		return 0;	/* same object: nothing to do */
	ret = iget(fs, se->ino, &sp);
	if (ret < 0)
		return ret == -ENOENT ? -EUCLEAN : ret;
	if (de) {
		ret = iget(fs, de->ino, &tp);
		if (ret < 0) {
			ret = ret == -ENOENT ? -EUCLEAN : ret;
			goto put;
		}
	}
	/* a directory may not move below itself */
	if (sp->m.type == GS_T_DIR && sdp != ddp) {
		ret = is_ancestor(fs, sp->ino, ddp->ino);
		if (ret) {
			ret = ret > 0 ? -EINVAL : ret;
			goto put;
		}
	}
	if (flags & RENAME_EXCHANGE) {
		if (tp->m.type == GS_T_DIR && sdp != ddp) {
			ret = is_ancestor(fs, tp->ino, sdp->ino);
			if (ret) {
				ret = ret > 0 ? -EINVAL : ret;
				goto put;
			}
		}
		uint8_t st = se->type;

		ret = dir_retarget(fs, sdp, se, tp->ino, de->type);
		if (!ret)
			ret = dir_retarget(fs, ddp, de, sp->ino, st);
		if (ret < 0)
			goto fail;
		sp->m.parent = ddp->ino;
		tp->m.parent = sdp->ino;
		if (sdp != ddp && sp->m.type == GS_T_DIR) {
			sdp->m.nlink--;
			ddp->m.nlink++;
		}
		if (sdp != ddp && tp->m.type == GS_T_DIR) {
			ddp->m.nlink--;
			sdp->m.nlink++;
		}
		itouch(sp, false, true);
		itouch(tp, false, true);
		ret = iwrite(fs, tp);
		goto finish;
	}
	if (tp) {
		if (sp->m.type == GS_T_DIR && tp->m.type != GS_T_DIR) {
			ret = -ENOTDIR;
			goto put;
		}
		if (sp->m.type != GS_T_DIR && tp->m.type == GS_T_DIR) {
			ret = -EISDIR;
			goto put;
		}
		if (tp->m.type == GS_T_DIR) {
			ret = dir_load(fs, tp);
			if (ret < 0)
				goto put;
			if (tp->dir->count) {
				ret = -ENOTEMPTY;
				goto put;
			}
		}
		ret = dir_retarget(fs, ddp, de, sp->ino, se->type);
		if (ret < 0)
			goto fail;
		if (tp->m.type == GS_T_DIR)
			ddp->m.nlink--;
		ret = drop_link(fs, tp);
		if (ret < 0)
			goto fail;
	} else {
		ret = dir_add(fs, ddp, newname, sp->ino, se->type);
		if (ret < 0)
			goto put;	/* nothing changed yet (ENOSPC and the like) */
	}
	ret = dir_del(fs, sdp, name);
	if (ret < 0)
		goto fail;
	if (sp->m.type == GS_T_DIR && sdp != ddp) {
		sdp->m.nlink--;
		ddp->m.nlink++;
	}
	sp->m.parent = ddp->ino;
	itouch(sp, false, true);
finish:
	itouch(sdp, true, true);
	itouch(ddp, true, true);
	if (!ret)
		ret = iwrite(fs, sp);
	if (!ret)
		ret = iwrite(fs, sdp);
	if (!ret && ddp != sdp)
		ret = iwrite(fs, ddp);
fail:
	if (ret < 0)
		fs_fail(fs, ret, "rename");
put:
	if (tp)
		iput(fs, tp);
	iput(fs, sp);
	return ret;
}

static int rename_once(struct gs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
		       const char *newname, unsigned flags)
{
	struct gs_inode *sdp, *ddp;
	int ret = name_ok(name);

	if (!ret)
		ret = name_ok(newname);
	if (ret < 0)
		return ret;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (dot_name(name) || dot_name(newname))
		return -EBUSY;
	ret = fs_check_rw(fs);
	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, parent, &sdp);
	if (ret < 0)
		goto unlock;
	ret = iget(fs, newparent, &ddp);
	if (ret < 0)
		goto put_src;
	ret = dir_load(fs, sdp);
	if (!ret)
		ret = dir_load(fs, ddp);
	if (!ret)
		ret = do_rename(fs, sdp, name, ddp, newname, flags);
	iput(fs, ddp);
put_src:
	iput(fs, sdp);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* ---- open references and internal objects ---- */

int gs_fs_open(struct gs_fs *fs, uint64_t ino, int flags)
{
	struct gs_inode *ip;
	int ret;

	if ((flags & O_ACCMODE) != O_RDONLY && fs->rdonly)
		return -EROFS;
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (!ret) {
		ip->opens++;
		ip->refs++;	/* an open pins the in-memory inode */
		iput(fs, ip);
	}
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

int gs_fs_release(struct gs_fs *fs, uint64_t ino)
{
	struct gs_inode *ip = NULL;
	int ret = 0;

	pthread_mutex_lock(&fs->ns);
	for (ip = fs->ihash[ihash(fs, ino)]; ip && ip->ino != ino; ip = ip->hnext)
		;
	if (!ip || !ip->opens) {
		ret = -EINVAL;
		goto unlock;
	}
	ip->opens--;
	if (!ip->opens && !ip->freed && ip->m.nlink == 0 && !fs->rdonly && !fs->error) {
		pthread_mutex_unlock(&fs->ns);
		/* wait out readers/writers still inside the object */
		pthread_rwlock_wrlock(&ip->rw);
		pthread_mutex_lock(&fs->ns);
		if (!ip->opens && !ip->freed && ip->m.nlink == 0) {
			ret = ifree_object(fs, ip);
			if (ret < 0)
				fs_fail(fs, ret, "release");
		}
		pthread_rwlock_unlock(&ip->rw);
	}
	iput(fs, ip);	/* the open's pin */
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* CI_ANY: directories may own internal objects too (the fs core's own use:
 * their xattrs); object types cannot ask for that.  CI_META: GS_IFL_META. */
static int create_internal_once(struct gs_fs *fs, uint64_t owner, uint64_t *ino, unsigned how)
{
	struct gs_inode *op, *ip;
	int ret = fs_check_rw(fs);

	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, owner, &op);
	if (ret < 0)
		goto unlock;
	if (op->m.type == GS_T_INTERNAL || (op->m.type == GS_T_DIR && !(how & CI_ANY))) {
		ret = -EINVAL;
		goto put_owner;
	}
	ret = new_inode(fs, GS_T_INTERNAL, 0600, 0, 0, 0, &ip);
	if (ret < 0)
		goto put_owner;
	ip->m.owner = owner;
	if (how & CI_META)
		ip->m.flags |= GS_IFL_META;
	ip->m.next_sib = op->m.child_head;
	op->m.child_head = ip->ino;
	ret = iwrite(fs, ip);
	if (!ret)
		ret = iwrite(fs, op);
	if (ret < 0)
		fs_fail(fs, ret, "create_internal");
	*ino = ip->ino;
	iput(fs, ip);
put_owner:
	iput(fs, op);
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* gs_fs_unlink_internal() under fs->ns, as part of a larger operation. */
int unlink_internal_locked(struct gs_fs *fs, uint64_t ino)
{
	struct gs_inode *ip, *op;
	int ret = iget(fs, ino, &ip);

	if (ret < 0)
		return ret;
	if (ip->m.type != GS_T_INTERNAL) {
		ret = -EINVAL;
		goto put;
	}
	if (ip->m.owner && iget(fs, ip->m.owner, &op) == 0) {
		/* unlink from the owner's list */
		if (op->m.child_head == ino) {
			op->m.child_head = ip->m.next_sib;
			ret = iwrite(fs, op);
		} else {
			uint64_t cur = op->m.child_head;
			uint32_t guard = 0;

			while (cur && guard++ < fs->l.ninodes && !ret) {
				struct gs_inode *cp;

				ret = iget(fs, cur, &cp);
				if (ret < 0)
					break;
				cur = cp->m.next_sib;
				if (cur == ino) {
					cp->m.next_sib = ip->m.next_sib;
					ret = iwrite(fs, cp);
					cur = 0;
				}
				iput(fs, cp);
			}
		}
		iput(fs, op);
	}
	ip->m.owner = 0;
	ip->m.next_sib = 0;
	if (!ret)
		ret = drop_link(fs, ip);
	if (ret < 0)
		fs_fail(fs, ret, "unlink_internal");
put:
	iput(fs, ip);
	return ret;
}

int gs_fs_unlink_internal(struct gs_fs *fs, uint64_t ino)
{
	int ret = fs_check_rw(fs);

	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = unlink_internal_locked(fs, ino);
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* Under fs->ns: hold @ino like an open file (gs_fs_release() lets go), so
 * that its data outlives a concurrent removal of its owner until then. */
int ipin(struct gs_fs *fs, uint64_t ino)
{
	struct gs_inode *ip;
	int ret = iget(fs, ino, &ip);

	if (ret < 0)
		return ret;
	ip->opens++;
	ip->refs++;
	iput(fs, ip);
	return 0;
}

/* ---- attributes ---- */

int gs_fs_setattr(struct gs_fs *fs, uint64_t ino, const struct gs_stat *in, unsigned mask,
		  struct gs_stat *out)
{
	struct gs_inode *ip;
	struct timespec now = now_ts();
	int ret = fs_check_rw(fs);

	if (ret < 0)
		return ret;
	if (mask & ~0xffu)
		return -EINVAL;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0)
		return ret;
	if (mask & GS_SET_SIZE) {
		if (ip->m.type == GS_T_DIR || is_dirlike(ip->m.type))
			ret = -EISDIR;
		else if (ip->m.type == GS_T_SYMLINK || ip->m.type == GS_T_SPECIAL)
			ret = -EINVAL;
		else if (in->size > GS_MAX_FILE_SIZE)
			ret = -EFBIG;
		if (ret < 0)
			goto put;
		lease_wrlock(fs, ip, in->size, UINT64_MAX);	/* blocks past it go */
	}
	pthread_mutex_lock(&fs->ns);
	if (mask & GS_SET_SIZE) {
		ret = array_truncate(fs, ip, in->size);
		if (ret < 0)
			goto unlock;
	}
	if (mask & GS_SET_MODE)
		ip->m.mode = (ip->m.mode & S_IFMT) | (in->mode & 07777);
	if (mask & GS_SET_UID)
		ip->m.uid = in->uid;
	if (mask & GS_SET_GID)
		ip->m.gid = in->gid;
	if (mask & GS_SET_ATIME_NOW)
		ip->m.atime = now;
	else if (mask & GS_SET_ATIME)
		ip->m.atime = in->atime;
	if (mask & GS_SET_MTIME_NOW)
		ip->m.mtime = now;
	else if (mask & GS_SET_MTIME)
		ip->m.mtime = in->mtime;
	ip->m.ctime = now;
	ret = iwrite(fs, ip);
	if (ret < 0)
		fs_fail(fs, ret, "setattr");
	if (!ret && out)
		istat(fs, ip, out);
unlock:
	pthread_mutex_unlock(&fs->ns);
	if (mask & GS_SET_SIZE)
		pthread_rwlock_unlock(&ip->rw);
put:
	pthread_mutex_lock(&fs->ns);
	iput(fs, ip);
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* fsck: take an object off the orphan list (it is linked again). */
int orphan_unlist(struct gs_fs *fs, struct gs_inode *ip)
{
	return orphan_del(fs, ip);
}

int create_retry(struct gs_fs *fs, uint64_t parent, const char *name,
		 const struct newobj *o, struct gs_stat *st)
{
	int ret = create_once(fs, parent, name, o, st);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = create_once(fs, parent, name, o, st);
	return ret;
}

int gs_fs_create(struct gs_fs *fs, uint64_t parent, const char *name, uint32_t type,
		 uint32_t mode, uint32_t uid, uint32_t gid, struct gs_stat *st)
{
	struct newobj o = { .type = type, .mode = mode & 07777, .uid = uid, .gid = gid };

	if (type == GS_T_SYMLINK || type == GS_T_SPECIAL)
		return -EINVAL;	/* gs_fs_symlink(), gs_fs_mknod() */
	return create_retry(fs, parent, name, &o, st);
}

int link_retry(struct gs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
	       struct gs_stat *st, bool adopt)
{
	int ret = link_once(fs, ino, parent, name, st, adopt);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = link_once(fs, ino, parent, name, st, adopt);
	return ret;
}

int gs_fs_rename(struct gs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags)
{
	int ret = rename_once(fs, parent, name, newparent, newname, flags);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = rename_once(fs, parent, name, newparent, newname, flags);
	return ret;
}

int internal_create(struct gs_fs *fs, uint64_t owner, uint64_t *ino, unsigned how)
{
	int ret = create_internal_once(fs, owner, ino, how);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = create_internal_once(fs, owner, ino, how);
	return ret;
}

int gs_fs_create_internal(struct gs_fs *fs, uint64_t owner, uint64_t *ino)
{
	return internal_create(fs, owner, ino, 0);
}

int gs_fs_create_internal_meta(struct gs_fs *fs, uint64_t owner, uint64_t *ino)
{
	return internal_create(fs, owner, ino, CI_META);
}
