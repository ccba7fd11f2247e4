// SPDX-License-Identifier: MIT
/*
 * Extended attributes: all of an object's attributes in one metadata block
 * (gs_dxattr entries packed after a small header), rewritten whole on each
 * change.  Names up to 255 bytes; a value must fit the block (E2BIG).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <sys/xattr.h>

#include "fs_internal.h"

struct xa {
	const uint8_t *name;
	uint32_t name_len, value_len;
	const uint8_t *value;
};

/* Parse an xattr block into @v (at most @max entries); -EUCLEAN if bad. */
static int xa_parse(struct gs_fs *fs, const uint8_t *blk, struct xa *v, uint32_t max)
{
	const struct gs_dxattr_hdr *h = (const void *)(blk + sizeof(struct gs_dblk));
	uint32_t count = ld32(h->count), used = ld32(h->used), off = GS_XATTR_OFF;

	if (count > max || used > fs->bs - GS_XATTR_OFF)
		goto bad;
	for (uint32_t i = 0; i < count; i++) {
		const struct gs_dxattr *e = (const void *)(blk + off);
		uint32_t len;

		if (off + sizeof(*e) > GS_XATTR_OFF + used)
			goto bad;
		len = (sizeof(*e) + e->name_len + ld16(e->value_len) + 3) & ~3u;
		if (!e->name_len || off + len > GS_XATTR_OFF + used)
			goto bad;
		v[i].name = (const uint8_t *)(e + 1);
		v[i].name_len = e->name_len;
		v[i].value = v[i].name + e->name_len;
		v[i].value_len = ld16(e->value_len);
		off += len;
	}
	return (int)count;
bad:
	gs_err("gstore: xattr block is corrupt");
	return -EUCLEAN;
}

static uint32_t xa_max(const struct gs_fs *fs)
{
	return (fs->bs - GS_XATTR_OFF) / 4;
}

static int xa_load(struct gs_fs *fs, struct gs_inode *ip, struct xa *v, struct mbuf **mp)
{
	struct mbuf *m;
	int ret;

	*mp = NULL;
	if (!ip->m.xattr_blk)
		return 0;
	ret = mb_get(fs, ip->m.xattr_blk, GS_BT_XATTR, &m);
	if (ret < 0)
		return ret;
	if (ld64(((struct gs_dblk *)m->data)->owner) != ip->ino) {
		gs_err("gstore: xattr block of inode %" PRIu64 " belongs to another", ip->ino);
		return -EUCLEAN;
	}
	*mp = m;
	return xa_parse(fs, m->data, v, xa_max(fs));
}

static int xa_find(struct xa *v, int n, const char *name)
{
	size_t len = strlen(name);

	for (int i = 0; i < n; i++)
		if (v[i].name_len == len && !memcmp(v[i].name, name, len))
			return i;
	return -1;
}

/* Write entries @v into a fresh image and commit it to the object. */
static int xa_store(struct gs_fs *fs, struct gs_inode *ip, struct xa *v, int n)
{
	uint8_t *img;
	uint32_t off = GS_XATTR_OFF;
	struct mbuf *m;
	uint64_t blk = ip->m.xattr_blk;
	int ret;

	if (n == 0) {
		if (blk) {
			mb_forget(fs, blk);
			ret = alloc_free(fs, blk, 1);
			if (ret < 0)
				return ret;
			ip->m.xattr_blk = 0;
			ip->m.blocks--;
		}
		return 0;
	}
	img = calloc(1, fs->bs);
	if (!img)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct gs_dxattr *e = (void *)(img + off);
		uint32_t len = (sizeof(*e) + v[i].name_len + v[i].value_len + 3) & ~3u;

		if (off + len > fs->bs) {
			free(img);
			return -ENOSPC;
		}
		e->name_len = v[i].name_len;
		e->value_len = st16(v[i].value_len);
		memcpy(e + 1, v[i].name, v[i].name_len);
		memcpy((uint8_t *)(e + 1) + v[i].name_len, v[i].value, v[i].value_len);
		off += len;
	}
	if (!blk) {
		ret = alloc_soft_meta_block(fs, fs->l.itable_start, &blk);
		if (ret < 0) {
			free(img);
			return ret;
		}
		ip->m.xattr_blk = blk;
		ip->m.blocks++;
	}
	ret = mb_new(fs, blk, ip->ino, GS_BT_XATTR, &m);
	if (ret < 0) {
		free(img);
		return ret;
	}
	memcpy(m->data + GS_XATTR_OFF, img + GS_XATTR_OFF, fs->bs - GS_XATTR_OFF);
	((struct gs_dxattr_hdr *)(m->data + sizeof(struct gs_dblk)))->count = st32(n);
	((struct gs_dxattr_hdr *)(m->data + sizeof(struct gs_dblk)))->used =
		st32(off - GS_XATTR_OFF);
	free(img);
	return 0;
}

int gs_fs_getxattr(struct gs_fs *fs, uint64_t ino, const char *name, void *val, size_t size)
{
	struct xa *v = malloc(xa_max(fs) * sizeof(*v));
	struct gs_inode *ip;
	struct mbuf *m;
	int n, i, ret;

	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	n = xa_load(fs, ip, v, &m);
	if (n < 0) {
		ret = n;
		goto put;
	}
	i = xa_find(v, n, name);
	if (i < 0) {
		ret = -ENODATA;
	} else if (size && size < v[i].value_len) {
		ret = -ERANGE;
	} else {
		if (size)
			memcpy(val, v[i].value, v[i].value_len);
		ret = (int)v[i].value_len;
	}
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	free(v);
	return ret;
}

/* Load an object's attributes into @v, pointing into a private copy of the
 * block (*copy), since xa_store() rewrites the block itself. */
static int xa_load_copy(struct gs_fs *fs, struct gs_inode *ip, struct xa *v, uint8_t **copy)
{
	struct mbuf *m;
	int n = xa_load(fs, ip, v, &m);

	*copy = NULL;
	if (n <= 0 || !m)
		return n;
	*copy = malloc(fs->bs);
	if (!*copy)
		return -ENOMEM;
	memcpy(*copy, m->data, fs->bs);
	for (int k = 0; k < n; k++) {
		v[k].name = *copy + (v[k].name - m->data);
		v[k].value = *copy + (v[k].value - m->data);
	}
	return n;
}

/* Set (or with @remove, remove) one attribute. */
static int xattr_change(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
			size_t size, int flags, bool remove)
{
	struct xa *v;
	struct gs_inode *ip;
	uint8_t *copy = NULL;
	int n, i, ret = fs_check_rw(fs);

	if (ret < 0)
		return ret;
	v = malloc((xa_max(fs) + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	n = xa_load_copy(fs, ip, v, &copy);
	if (n < 0) {
		ret = n;
		goto put;
	}
	i = xa_find(v, n, name);
	if (remove) {
		if (i < 0) {
			ret = -ENODATA;
			goto put;
		}
		v[i] = v[--n];
	} else {
		if (i >= 0 && (flags & XATTR_CREATE)) {
			ret = -EEXIST;
			goto put;
		}
		if (i < 0 && (flags & XATTR_REPLACE)) {
			ret = -ENODATA;
			goto put;
		}
		if (i < 0)
			i = n++;
		if ((uint32_t)n > xa_max(fs)) {
			ret = -ENOSPC;
			goto put;
		}
		v[i].name = (const uint8_t *)name;
		v[i].name_len = strlen(name);
		v[i].value = val;
		v[i].value_len = size;
	}
	ret = xa_store(fs, ip, v, n);	/* fails before changing anything */
	if (!ret) {
		itouch(ip, false, true);
		ret = iwrite(fs, ip);
		if (ret < 0)
			fs_fail(fs, ret, "xattr");
	}
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	free(copy);
	free(v);
	return ret;
}

static int setxattr_once(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
			 size_t size, int flags)
{
	size_t nlen = name ? strlen(name) : 0;

	if (!nlen || nlen > 255)
		return nlen ? -ERANGE : -EINVAL;
	if (size > fs->bs - GS_XATTR_OFF - 4 - nlen)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	return xattr_change(fs, ino, name, val, size, flags, false);
}

int gs_fs_listxattr(struct gs_fs *fs, uint64_t ino, char *list, size_t size)
{
	struct xa *v = malloc(xa_max(fs) * sizeof(*v));
	struct gs_inode *ip;
	struct mbuf *m;
	size_t total = 0;
	int n, ret;

	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	n = xa_load(fs, ip, v, &m);
	if (n < 0) {
		ret = n;
		goto put;
	}
	for (int i = 0; i < n; i++)
		total += v[i].name_len + 1;
	if (size && size < total) {
		ret = -ERANGE;
		goto put;
	}
	if (size) {
		char *p = list;

		for (int i = 0; i < n; i++) {
			memcpy(p, v[i].name, v[i].name_len);
			p[v[i].name_len] = 0;
			p += v[i].name_len + 1;
		}
	}
	ret = (int)total;
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	free(v);
	return ret;
}

int gs_fs_removexattr(struct gs_fs *fs, uint64_t ino, const char *name)
{
	if (!name || !*name)
		return -EINVAL;
	return xattr_change(fs, ino, name, NULL, 0, 0, true);
}

/* The parser alone, on a block image (fuzzing): entries or -EUCLEAN. */
int xattr_parse_block(struct gs_fs *fs, const uint8_t *blk)
{
	struct xa *v = malloc(xa_max(fs) * sizeof(*v));
	int ret;

	if (!v)
		return -ENOMEM;
	ret = xa_parse(fs, blk, v, xa_max(fs));
	free(v);
	return ret;
}

/* fsck: is @blk a sound xattr block of @ino? */
int xattr_check(struct gs_fs *fs, uint64_t blk, uint64_t ino)
{
	struct xa *v = malloc(xa_max(fs) * sizeof(*v));
	struct mbuf *m;
	int ret;

	if (!v)
		return -ENOMEM;
	ret = mb_get(fs, blk, GS_BT_XATTR, &m);
	if (!ret && ld64(((struct gs_dblk *)m->data)->owner) != ino)
		ret = -EUCLEAN;
	if (!ret)
		ret = xa_parse(fs, m->data, v, xa_max(fs));
	free(v);
	return ret < 0 ? ret : 0;
}

int gs_fs_setxattr(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
		   size_t size, int flags)
{
	int ret = setxattr_once(fs, ino, name, val, size, flags);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = setxattr_once(fs, ino, name, val, size, flags);
	return ret;
}
