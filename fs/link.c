// SPDX-License-Identifier: MIT
/*
 * Symbolic links, hard links and special files: the namespace kinds beyond
 * directories and arrays (gs_fs_symlink(3)).  Each sets the incompat feature
 * bit NSEXT in the superblock, durably, before its first transaction.
 *
 * A symlink keeps a target of up to GS_INLINE_MAX bytes in the inode (the
 * extent root's entry area, behind an empty header, so the object still has
 * a valid, empty extent tree); a longer one lives in an internal object the
 * link owns, written before the link is named.
 */
#include <sys/stat.h>

#include "fs_internal.h"

int gs_fs_mknod(struct gs_fs *fs, uint64_t parent, const char *name, uint32_t mode,
		uint64_t rdev, uint32_t uid, uint32_t gid, struct gs_stat *st)
{
	struct newobj o = { .type = GS_T_SPECIAL, .mode = mode, .uid = uid, .gid = gid };
	int ret;

	switch (mode & S_IFMT) {
	case 0:
	case S_IFREG:
		return gs_fs_create(fs, parent, name, GS_T_ARRAY, mode & 07777, uid, gid, st);
	case S_IFCHR:
	case S_IFBLK:
		o.rdev = rdev;
		break;
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		return -EINVAL;
	}
	ret = fs_check_rw(fs);
	if (!ret)
		ret = fs_feature_enable(fs, GS_FEAT_INCOMPAT_NSEXT);
	return ret < 0 ? ret : create_retry(fs, parent, name, &o, st);
}

int gs_fs_link(struct gs_fs *fs, uint64_t ino, uint64_t newparent, const char *newname,
	       struct gs_stat *st)
{
	int ret = fs_check_rw(fs);

	if (!ret)
		ret = fs_feature_enable(fs, GS_FEAT_INCOMPAT_NSEXT);
	return ret < 0 ? ret : link_retry(fs, ino, newparent, newname, st, false);
}

/*
 * A target too long for the inode: an unnamed, pinned link (on the orphan
 * list, so a crash before it has its name frees it), the target written to
 * an internal object it owns, then its name.  Three transactions, and
 * nobody sees the link before its target is complete.
 */
static int symlink_long(struct gs_fs *fs, uint64_t parent, const char *name,
			const char *target, size_t tlen, const struct newobj *o,
			struct gs_stat *st)
{
	struct newobj u = *o;
	struct gs_stat us;
	uint64_t child;
	ssize_t n;
	int ret, r;

	u.target = NULL;
	u.unnamed = true;
	ret = create_retry(fs, parent, name, &u, &us);
	if (ret < 0)
		return ret;
	ret = gs_fs_create_internal(fs, us.ino, &child);
	if (!ret) {
		n = gs_fs_write(fs, child, target, tlen, 0);
		ret = n < 0 ? (int)n : (size_t)n == tlen ? 0 : -EIO;
	}
	if (!ret)
		ret = link_retry(fs, us.ino, parent, name, st, true);
	r = gs_fs_release(fs, us.ino);	/* frees it if it got no name */
	return ret < 0 ? ret : r;
}

int gs_fs_symlink(struct gs_fs *fs, uint64_t parent, const char *name, const char *target,
		  uint32_t uid, uint32_t gid, struct gs_stat *st)
{
	struct newobj o = { .type = GS_T_SYMLINK, .mode = 0777, .uid = uid, .gid = gid };
	size_t tlen = target ? strlen(target) : 0;
	int ret;

	if (!tlen)
		return -ENOENT;	/* as symlink(2) */
	if (tlen >= GS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	ret = fs_check_rw(fs);
	if (!ret)
		ret = fs_feature_enable(fs, GS_FEAT_INCOMPAT_NSEXT);
	if (ret < 0)
		return ret;
	o.tlen = tlen;
	if (tlen > GS_INLINE_MAX)
		return symlink_long(fs, parent, name, target, tlen, &o, st);
	o.target = target;
	return create_retry(fs, parent, name, &o, st);
}

ssize_t gs_fs_readlink(struct gs_fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct gs_inode *ip;
	uint64_t child = 0;
	size_t len = 0, want;
	ssize_t n;
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	len = ip->m.size;
	want = len < size ? len : size;
	if (ip->m.type != GS_T_SYMLINK) {
		ret = -EINVAL;
	} else if (ip->m.flags & GS_IFL_INLINE) {
		memcpy(buf, ip->m.xroot.e, want);
	} else {
		/* pin the target object like an open file: an unlink racing
		 * with us frees it only at our release */
		child = ip->m.child_head;
		ret = child ? ipin(fs, child) : -EUCLEAN;
	}
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0)
		return ret == -ENOENT && child ? -EUCLEAN : ret;
	if (child) {
		n = gs_fs_read(fs, child, buf, want, 0);
		gs_fs_release(fs, child);
		if (n < 0)
			return n;
		if ((size_t)n != want)
			return -EUCLEAN;
	}
	return (ssize_t)len;
}
