// SPDX-License-Identifier: MIT
/*
 * Extended attributes.  An object's attributes live in one metadata block
 * (gs_dxattr entries packed after a small header) while they fit it; a set
 * that outgrows the block (many attributes, or values up to the VFS limit of
 * 64 KiB) moves to an internal object the object owns (GS_IFL_XATTR_OBJ),
 * as one gs_dxattr_shdr stream.  Either is rewritten whole on each change:
 * the block in one transaction; the stream is written to a new internal
 * object first, which one transaction then swaps in for the old one, so a
 * crash leaves the old set or the new one (and at worst an unreferenced
 * new object, freed with its owner).
 *
 * Changes and reads of one object's attributes are serialized by a striped
 * mutex taken before fs->ns (the stream is read and written with the data
 * path, outside it).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <sys/xattr.h>

#include "fs_internal.h"

#define XA_NAME_MAX	255u
#define XA_LIST_MAX	65536u		/* the VFS's listxattr limit (XATTR_LIST_MAX) */
#define XA_STREAM_MAX	(4u << 20)	/* bytes of one object's attributes */
#define XA_STRIPES	64

static pthread_mutex_t xa_mu[XA_STRIPES] = {
	[0 ... XA_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER
};

static pthread_mutex_t *xa_lock(uint64_t ino)
{
	pthread_mutex_t *mu = &xa_mu[(ino * 0x9e3779b97f4a7c15ULL) >> 58];

	pthread_mutex_lock(mu);
	return mu;
}

struct xa {
	const uint8_t *name;
	uint32_t name_len, value_len;
	const uint8_t *value;
};

/* An object's attributes, pointing into private memory. */
struct xset {
	struct xa *v;
	uint32_t n, cap;
	uint8_t *mem;		/* block copy or stream the entries point into */
	bool obj;		/* kept in an internal object */
	uint64_t where;		/* its block or internal object; 0: none */
};

static void xset_free(struct xset *s)
{
	free(s->v);
	free(s->mem);
}

static int xset_room(struct xset *s, uint32_t n)
{
	struct xa *v;

	if (n <= s->cap)
		return 0;
	v = realloc(s->v, (size_t)n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->v = v;
	s->cap = n;
	return 0;
}

static uint32_t blk_ent(uint32_t name_len, uint32_t value_len)
{
	return (sizeof(struct gs_dxattr) + name_len + value_len + 3) & ~3u;
}

static uint64_t obj_ent(uint32_t name_len, uint32_t value_len)
{
	return (sizeof(struct gs_dxattr2) + name_len + (uint64_t)value_len + 3) & ~3ull;
}

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
		len = blk_ent(e->name_len, ld16(e->value_len));
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

/* Parse a stream of @len bytes (s->mem) into s. */
static int stream_parse(struct xset *s, uint64_t len, uint64_t xino)
{
	const struct gs_dxattr_shdr *h = (const void *)s->mem;
	uint64_t off = sizeof(*h), used;
	uint32_t count;
	int ret;

	if (len < sizeof(*h) || ld32(h->magic) != GS_XATTR_SMAGIC)
		goto bad;
	count = ld32(h->count);
	used = ld64(h->used);
	if (used != len - sizeof(*h) || count > used / sizeof(struct gs_dxattr2))
		goto bad;
	ret = xset_room(s, count + 1);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < count; i++) {
		const struct gs_dxattr2 *e = (const void *)(s->mem + off);
		uint64_t elen;

		if (off + sizeof(*e) > len)
			goto bad;
		elen = obj_ent(e->name_len, ld32(e->value_len));
		if (!e->name_len || ld32(e->value_len) > GS_XATTR_VALUE_MAX || off + elen > len)
			goto bad;
		s->v[i].name = (const uint8_t *)(e + 1);
		s->v[i].name_len = e->name_len;
		s->v[i].value = s->v[i].name + e->name_len;
		s->v[i].value_len = ld32(e->value_len);
		off += elen;
	}
	s->n = count;
	return 0;
bad:
	gs_err("gstore: xattr object %" PRIu64 " is corrupt", xino);
	return -EUCLEAN;
}

static uint32_t xa_max(const struct gs_fs *fs)
{
	return (fs->bs - GS_XATTR_OFF) / 4;
}

/* Under fs->ns: copy the object's block of attributes (or pin its object). */
static int xset_grab(struct gs_fs *fs, struct gs_inode *ip, struct xset *s)
{
	struct mbuf *m;
	int ret;

	s->where = ip->m.xattr_blk;
	s->obj = ip->m.flags & GS_IFL_XATTR_OBJ;
	if (!s->where)
		return 0;
	if (s->obj)
		return ipin(fs, s->where);
	ret = mb_get(fs, s->where, GS_BT_XATTR, &m);
	if (ret < 0)
		return ret;
	if (ld64(((struct gs_dblk *)m->data)->owner) != ip->ino) {
		gs_err("gstore: xattr block of inode %" PRIu64 " belongs to another", ip->ino);
		return -EUCLEAN;
	}
	s->mem = malloc(fs->bs);
	if (!s->mem)
		return -ENOMEM;
	memcpy(s->mem, m->data, fs->bs);
	return 0;
}

/* Load @ino's attributes into @s (caller holds its stripe lock). */
static int xset_load(struct gs_fs *fs, uint64_t ino, struct xset *s)
{
	struct gs_inode *ip;
	struct gs_stat st;
	ssize_t n;
	int ret;

	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (!ret) {
		ret = xset_grab(fs, ip, s);
		iput(fs, ip);
	}
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0 || !s->where)
		return ret;
	if (!s->obj) {
		ret = xset_room(s, xa_max(fs) + 1);
		if (ret < 0)
			return ret;
		ret = xa_parse(fs, s->mem, s->v, xa_max(fs));
		if (ret >= 0)
			s->n = (uint32_t)ret;
		return ret < 0 ? ret : 0;
	}
	ret = gs_fs_getattr(fs, s->where, &st);
	if (!ret && st.size > XA_STREAM_MAX + sizeof(struct gs_dxattr_shdr))
		ret = -EUCLEAN;
	if (!ret) {
		s->mem = malloc(st.size ? st.size : 1);
		ret = s->mem ? 0 : -ENOMEM;
	}
	if (!ret) {
		n = gs_fs_read(fs, s->where, s->mem, st.size, 0);
		ret = n < 0 ? (int)n : (uint64_t)n != st.size ? -EUCLEAN : 0;
	}
	if (!ret)
		ret = stream_parse(s, st.size, s->where);
	gs_fs_release(fs, s->where);	/* xset_grab's pin */
	return ret;
}

static int xa_find(const struct xset *s, const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; i < s->n; i++)
		if (s->v[i].name_len == len && !memcmp(s->v[i].name, name, len))
			return (int)i;
	return -1;
}

/* The block image of @s, or -ENOSPC if it does not fit one block. */
static int block_image(struct gs_fs *fs, const struct xset *s, uint8_t *img)
{
	uint32_t off = GS_XATTR_OFF;

	if (s->n > xa_max(fs))
		return -ENOSPC;
	for (uint32_t i = 0; i < s->n; i++) {
		struct gs_dxattr *e = (void *)(img + off);
		uint32_t len = blk_ent(s->v[i].name_len, s->v[i].value_len);

		if (s->v[i].value_len > UINT16_MAX || len > fs->bs - off)
			return -ENOSPC;
		e->name_len = s->v[i].name_len;
		e->value_len = st16(s->v[i].value_len);
		memcpy(e + 1, s->v[i].name, s->v[i].name_len);
		memcpy((uint8_t *)(e + 1) + s->v[i].name_len, s->v[i].value, s->v[i].value_len);
		off += len;
	}
	((struct gs_dxattr_hdr *)(img + sizeof(struct gs_dblk)))->count = st32(s->n);
	((struct gs_dxattr_hdr *)(img + sizeof(struct gs_dblk)))->used =
		st32(off - GS_XATTR_OFF);
	return 0;
}

/* The stream of @s in a new buffer (*len bytes), or -ENOSPC past the limits. */
static int stream_image(const struct xset *s, uint8_t **bufp, uint64_t *len)
{
	struct gs_dxattr_shdr *h;
	uint64_t off = sizeof(*h), names = 0;
	uint8_t *buf;

	for (uint32_t i = 0; i < s->n; i++) {
		off += obj_ent(s->v[i].name_len, s->v[i].value_len);
		names += s->v[i].name_len + 1;
	}
	if (off - sizeof(*h) > XA_STREAM_MAX || names > XA_LIST_MAX)
		return -ENOSPC;
	buf = calloc(1, off);
	if (!buf)
		return -ENOMEM;
	h = (void *)buf;
	h->magic = st32(GS_XATTR_SMAGIC);
	h->count = st32(s->n);
	h->used = st64(off - sizeof(*h));
	off = sizeof(*h);
	for (uint32_t i = 0; i < s->n; i++) {
		struct gs_dxattr2 *e = (void *)(buf + off);

		e->name_len = s->v[i].name_len;
		e->value_len = st32(s->v[i].value_len);
		memcpy(e + 1, s->v[i].name, s->v[i].name_len);
		memcpy((uint8_t *)(e + 1) + s->v[i].name_len, s->v[i].value, s->v[i].value_len);
		off += obj_ent(s->v[i].name_len, s->v[i].value_len);
	}
	*bufp = buf;
	*len = off;
	return 0;
}

/* Under fs->ns: let go of what held the object's attributes before. */
static int drop_old(struct gs_fs *fs, struct gs_inode *ip, bool obj, uint64_t where)
{
	int ret;

	if (!where)
		return 0;
	if (obj)
		return unlink_internal_locked(fs, where);
	mb_forget(fs, where);
	ret = alloc_free(fs, where, 1);
	if (!ret)
		ip->m.blocks--;
	return ret;
}

/*
 * Make @s the attributes of @ip (under fs->ns, one transaction): in its
 * block when they fit one (@img, the block image), else in internal object
 * @xino, written already.  Fails before changing anything, or stops the fs.
 */
static int xset_commit(struct gs_fs *fs, struct gs_inode *ip, const struct xset *old,
		       const struct xset *s, const uint8_t *img, uint64_t xino)
{
	uint64_t blk = old->obj ? 0 : old->where;
	struct mbuf *m;
	int ret;

	if (ip->m.xattr_blk != old->where) {
		gs_err("gstore: xattrs of inode %" PRIu64 " changed under us", ip->ino);
		return -EIO;
	}
	if (img && s->n && !blk) {
		ret = alloc_soft_meta_block(fs, fs->l.itable_start, &blk);
		if (ret < 0)
			return ret;
		ip->m.blocks++;
	}
	if (img && s->n) {
		ret = mb_new(fs, blk, ip->ino, GS_BT_XATTR, &m);
		if (ret < 0)
			goto fail;
		memcpy(m->data + sizeof(struct gs_dblk), img + sizeof(struct gs_dblk),
		       fs->bs - sizeof(struct gs_dblk));
	}
	/* the old holder goes unless it is the block just rewritten */
	if (old->obj || (old->where && (!img || !s->n)))
		ret = drop_old(fs, ip, old->obj, old->where);
	else
		ret = 0;
	ip->m.flags &= ~GS_IFL_XATTR_OBJ;
	ip->m.xattr_blk = img ? (s->n ? blk : 0) : xino;
	if (!img)
		ip->m.flags |= GS_IFL_XATTR_OBJ;
	itouch(ip, false, true);
	if (!ret)
		ret = iwrite(fs, ip);
fail:
	if (ret < 0)
		fs_fail(fs, ret, "xattr");
	return ret;
}

/* Store @s for @ino, whose attributes were @old (stripe lock held). */
static int xset_store(struct gs_fs *fs, uint64_t ino, const struct xset *old,
		      const struct xset *s)
{
	uint8_t *img = calloc(1, fs->bs), *stream = NULL;
	struct gs_inode *ip;
	uint64_t xino = 0, len;
	ssize_t n;
	int ret;

	if (!img)
		return -ENOMEM;
	ret = block_image(fs, s, img);
	if (ret == -ENOSPC) {
		free(img);
		img = NULL;
		ret = stream_image(s, &stream, &len);
		if (!ret)
			ret = fs_feature_enable(fs, GS_FEAT_INCOMPAT_XATTR_OBJ);
		if (!ret)
			ret = internal_create(fs, ino, &xino, CI_ANY | CI_META);
		if (!ret) {
			n = gs_fs_write(fs, xino, stream, len, 0);
			ret = n < 0 ? (int)n : (uint64_t)n == len ? 0 : -EIO;
		}
		free(stream);
		if (ret < 0)
			goto drop_new;
	} else if (ret < 0) {
		goto out;
	}
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (!ret) {
		ret = xset_commit(fs, ip, old, s, img, xino);
		iput(fs, ip);
	}
	pthread_mutex_unlock(&fs->ns);
drop_new:
	if (ret < 0 && xino)
		gs_fs_unlink_internal(fs, xino);
out:
	free(img);
	return ret;
}

int gs_fs_getxattr(struct gs_fs *fs, uint64_t ino, const char *name, void *val, size_t size)
{
	pthread_mutex_t *mu = xa_lock(ino);
	struct xset s;
	int i, ret = xset_load(fs, ino, &s);

	if (ret < 0)
		goto out;
	i = xa_find(&s, name);
	if (i < 0) {
		ret = -ENODATA;
	} else if (size && size < s.v[i].value_len) {
		ret = -ERANGE;
	} else {
		if (size)
			memcpy(val, s.v[i].value, s.v[i].value_len);
		ret = (int)s.v[i].value_len;
	}
out:
	pthread_mutex_unlock(mu);
	xset_free(&s);
	return ret;
}

/* Set (or with @remove, remove) one attribute. */
static int xattr_change(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
			size_t size, int flags, bool remove)
{
	pthread_mutex_t *mu;
	struct xset s, old;
	int i, ret = fs_check_rw(fs);

	if (ret < 0)
		return ret;
	mu = xa_lock(ino);
	ret = xset_load(fs, ino, &s);
	if (ret < 0)
		goto out;
	old = s;
	i = xa_find(&s, name);
	if (remove) {
		if (i < 0) {
			ret = -ENODATA;
			goto out;
		}
		s.v[i] = s.v[--s.n];
	} else {
		if (i >= 0 && (flags & XATTR_CREATE)) {
			ret = -EEXIST;
			goto out;
		}
		if (i < 0 && (flags & XATTR_REPLACE)) {
			ret = -ENODATA;
			goto out;
		}
		if (i < 0) {
			ret = xset_room(&s, s.n + 1);
			if (ret < 0)
				goto out;
			i = (int)s.n++;
		}
		s.v[i].name = (const uint8_t *)name;
		s.v[i].name_len = strlen(name);
		s.v[i].value = val;
		s.v[i].value_len = size;
	}
	ret = xset_store(fs, ino, &old, &s);
out:
	pthread_mutex_unlock(mu);
	xset_free(&s);
	return ret;
}

static int setxattr_once(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
			 size_t size, int flags)
{
	size_t nlen = name ? strlen(name) : 0;

	if (!nlen || nlen > XA_NAME_MAX)
		return nlen ? -ERANGE : -EINVAL;
	if (size > GS_XATTR_VALUE_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	return xattr_change(fs, ino, name, val, size, flags, false);
}

int gs_fs_listxattr(struct gs_fs *fs, uint64_t ino, char *list, size_t size)
{
	pthread_mutex_t *mu = xa_lock(ino);
	size_t total = 0;
	struct xset s;
	int ret = xset_load(fs, ino, &s);

	if (ret < 0)
		goto out;
	for (uint32_t i = 0; i < s.n; i++)
		total += s.v[i].name_len + 1;
	if (size && size < total) {
		ret = -ERANGE;
		goto out;
	}
	if (size) {
		char *p = list;

		for (uint32_t i = 0; i < s.n; i++) {
			memcpy(p, s.v[i].name, s.v[i].name_len);
			p[s.v[i].name_len] = 0;
			p += s.v[i].name_len + 1;
		}
	}
	ret = (int)total;
out:
	pthread_mutex_unlock(mu);
	xset_free(&s);
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
