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
	return t >= GS_T_DIR && t <= GS_T_INTERNAL;
}

static bool is_dirlike(uint16_t t)
{
	return t == GS_T_DIR || t == GS_T_GRAPH || t == GS_T_ND;
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
	    (ip->m.type == GS_T_DIR && (ip->m.size % fs->bs || ip->m.size / fs->bs > UINT32_MAX))) {
		gs_err("gstore: inode %" PRIu64 " is corrupt (type %u, size %" PRIu64 ")", ino,
		       ip->m.type, ip->m.size);
		free(ip);
		return -EUCLEAN;
	}
	ip->ino = ino;
	ip->refs = 1;
	pthread_rwlock_init(&ip->rw, NULL);
	ip->hnext = fs->ihash[h];
	fs->ihash[h] = ip;
	fs->icount++;
	*ipp = ip;
	return 0;
}

static void dir_index_free(struct dindex *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->nbuckets; i++) {
		struct dirent_m *e, *n;

		for (e = d->b[i]; e; e = n) {
			n = e->hnext;
			free(e);
		}
	}
	free(d->b);
	free(d->maxfree);
	free(d);
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
 * others stay cached (their maps are what makes reads cheap). */
void iput(struct gs_fs *fs, struct gs_inode *ip)
{
	if (!ip)
		return;
	if (--ip->refs == 0 && ip->freed) {
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
}

/* ---- operation prologue ---- */

static int check_rw(struct gs_fs *fs)
{
	if (fs->rdonly)
		return -EROFS;
	if (fs->error)
		return -EIO;
	return 0;
}

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

/* ---- directories ---- */

static uint32_t rec_need(uint32_t name_len)
{
	return (sizeof(struct gs_ddirent) + name_len + 7) & ~7u;
}

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int dindex_grow(struct dindex *d)
{
	uint32_t nb = d->nbuckets ? d->nbuckets * 2 : 16;
	struct dirent_m **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->nbuckets; i++) {
		struct dirent_m *e, *n;

		for (e = d->b[i]; e; e = n) {
			uint32_t h = name_hash(e->name, e->name_len) & (nb - 1);

			n = e->hnext;
			e->hnext = b[h];
			b[h] = e;
		}
	}
	free(d->b);
	d->b = b;
	d->nbuckets = nb;
	return 0;
}

static int dindex_add(struct dindex *d, const char *name, uint32_t len, uint64_t ino,
		      uint8_t type, uint32_t bidx, uint32_t off)
{
	struct dirent_m *e;
	uint32_t h;

	if (d->count + 1 > d->nbuckets && dindex_grow(d) < 0)
		return -ENOMEM;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	e->ino = ino;
	e->bidx = bidx;
	e->off = off;
	e->type = type;
	e->name_len = len;
	memcpy(e->name, name, len);
	e->name[len] = 0;
	h = name_hash(name, len) & (d->nbuckets - 1);
	e->hnext = d->b[h];
	d->b[h] = e;
	d->count++;
	return 0;
}

static struct dirent_m **dindex_slot(struct dindex *d, const char *name)
{
	size_t len = strlen(name);
	struct dirent_m **pp;

	if (!d->nbuckets)
		return NULL;
	pp = &d->b[name_hash(name, len) & (d->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->hnext)
		if ((*pp)->name_len == len && !memcmp((*pp)->name, name, len))
			return pp;
	return NULL;
}

static struct dirent_m *dindex_find(struct dindex *d, const char *name)
{
	struct dirent_m **pp = dindex_slot(d, name);

	return pp ? *pp : NULL;
}

/* Parse one directory block; with @d, index its entries.  Returns the
 * largest usable gap or -EUCLEAN. */
static int dir_parse(struct gs_fs *fs, const uint8_t *blk, uint64_t pblk, uint32_t bidx,
		     struct dindex *d)
{
	uint32_t off = GS_DIR_OFF, maxfree = 0;

	while (off < fs->bs) {
		const struct gs_ddirent *de = (const void *)(blk + off);
		uint32_t rl, need;
		uint64_t ino;

		if (fs->bs - off < sizeof(*de))
			goto bad;
		rl = ld16(de->rec_len);
		ino = ld64(de->ino);
		need = rec_need(de->name_len);
		if (rl < sizeof(*de) || rl % 8 || rl > fs->bs - off)
			goto bad;
		if (ino) {
			if (rl < need || !de->name_len || ino >= fs->l.ninodes ||
			    memchr(de->name, '/', de->name_len) ||
			    memchr(de->name, 0, de->name_len) || !type_ok(de->type))
				goto bad;
			if (rl - need > maxfree)
				maxfree = rl - need;
			if (d && dindex_add(d, de->name, de->name_len, ino, de->type, bidx, off) < 0)
				return -ENOMEM;
		} else if (rl > maxfree) {
			maxfree = rl;
		}
		off += rl;
	}
	return (int)maxfree;
bad:
	gs_err("gstore: directory block %" PRIu64 ": corrupt entry at offset %u", pblk, off);
	return -EUCLEAN;
}

static int dir_load(struct gs_fs *fs, struct gs_inode *ip)
{
	struct dindex *d;
	uint32_t nb;
	int ret;

	if (ip->dir)
		return 0;
	if (ip->m.type != GS_T_DIR)
		return -ENOTDIR;
	ret = xmap_load(fs, ip);
	if (ret < 0)
		return ret;
	nb = ip->m.size / fs->bs;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->maxfree = calloc(nb + 1, sizeof(*d->maxfree));
	if (!d->maxfree) {
		free(d);
		return -ENOMEM;
	}
	d->nblocks = nb;
	for (uint32_t b = 0; b < nb; b++) {
		uint64_t pblk;
		struct mbuf *m;

		ret = dir_block_pblk(fs, ip, b, &pblk);
		if (!ret)
			ret = mb_get(fs, pblk, GS_BT_DIR, &m);
		if (!ret)
			ret = dir_parse(fs, m->data, pblk, b, d);
		if (ret < 0) {
			dir_index_free(d);
			return ret;
		}
		d->maxfree[b] = ret;
	}
	ip->dir = d;
	return 0;
}

static int dir_add(struct gs_fs *fs, struct gs_inode *dp, const char *name, uint64_t ino,
		   uint8_t type)
{
	struct dindex *d = dp->dir;
	uint32_t len = strlen(name), need = rec_need(len);
	uint32_t b, off;
	uint64_t pblk;
	struct mbuf *m;
	int ret;

	for (b = 0; b < d->nblocks; b++)
		if (d->maxfree[b] >= need)
			break;
	if (b == d->nblocks) {
		uint16_t *mf = realloc(d->maxfree, (d->nblocks + 2) * sizeof(*mf));

		if (!mf)
			return -ENOMEM;
		d->maxfree = mf;
		ret = dir_block_add(fs, dp, &pblk);
		if (ret < 0)
			return ret;
		ret = mb_new(fs, pblk, dp->ino, GS_BT_DIR, &m);
		if (ret < 0)
			return ret;
		((struct gs_ddirent *)(m->data + GS_DIR_OFF))->rec_len = st16(fs->bs - GS_DIR_OFF);
		d->maxfree[b] = fs->bs - GS_DIR_OFF;
		d->nblocks++;
	} else {
		ret = dir_block_pblk(fs, dp, b, &pblk);
		if (!ret)
			ret = mb_get(fs, pblk, GS_BT_DIR, &m);
		if (ret < 0)
			return ret;
	}
	for (off = GS_DIR_OFF; off < fs->bs;) {
		struct gs_ddirent *de = (void *)(m->data + off);
		uint32_t rl = ld16(de->rec_len);
		uint32_t used = de->ino ? rec_need(de->name_len) : 0;

		if (rl - used >= need) {
			if (used) {	/* split the slack off */
				de->rec_len = st16(used);
				off += used;
				de = (void *)(m->data + off);
				de->rec_len = st16(rl - used);
			}
			de->ino = st64(ino);
			de->name_len = len;
			de->type = type;
			de->rsvd = 0;
			memcpy(de->name, name, len);
			break;
		}
		off += rl;
	}
	if (off >= fs->bs)
		return -EUCLEAN;	/* maxfree lied: the block changed under us */
	ret = dindex_add(d, name, len, ino, type, b, off);
	if (ret < 0)
		return ret;
	mb_dirty(fs, m);
	ret = dir_parse(fs, m->data, pblk, b, NULL);
	if (ret < 0)
		return ret;
	d->maxfree[b] = ret;
	dp->m.size = (uint64_t)d->nblocks * fs->bs;
	return 0;
}

static int dir_del(struct gs_fs *fs, struct gs_inode *dp, const char *name)
{
	struct dindex *d = dp->dir;
	struct dirent_m **pp = dindex_slot(d, name), *e;
	uint32_t off, prev = 0;
	uint64_t pblk;
	struct mbuf *m;
	int ret;

	if (!pp)
		return -ENOENT;
	e = *pp;
	ret = dir_block_pblk(fs, dp, e->bidx, &pblk);
	if (!ret)
		ret = mb_get(fs, pblk, GS_BT_DIR, &m);
	if (ret < 0)
		return ret;
	for (off = GS_DIR_OFF; off < e->off;) {
		prev = off;
		off += ld16(((struct gs_ddirent *)(m->data + off))->rec_len);
	}
	if (off != e->off)
		return -EUCLEAN;
	if (prev) {
		struct gs_ddirent *p = (void *)(m->data + prev);
		struct gs_ddirent *de = (void *)(m->data + off);

		p->rec_len = st16(ld16(p->rec_len) + ld16(de->rec_len));
	} else {
		((struct gs_ddirent *)(m->data + off))->ino = 0;
	}
	mb_dirty(fs, m);
	ret = dir_parse(fs, m->data, pblk, e->bidx, NULL);
	if (ret < 0)
		return ret;
	d->maxfree[e->bidx] = ret;
	*pp = e->hnext;
	free(e);
	d->count--;
	return 0;
}

/* Change the inode an entry points at (rename over an existing name). */
static int dir_retarget(struct gs_fs *fs, struct gs_inode *dp, struct dirent_m *e,
			uint64_t ino, uint8_t type)
{
	uint64_t pblk;
	struct mbuf *m;
	struct gs_ddirent *de;
	int ret = dir_block_pblk(fs, dp, e->bidx, &pblk);

	if (!ret)
		ret = mb_get(fs, pblk, GS_BT_DIR, &m);
	if (ret < 0)
		return ret;
	de = (void *)(m->data + e->off);
	de->ino = st64(ino);
	de->type = type;
	mb_dirty(fs, m);
	e->ino = ino;
	e->type = type;
	return 0;
}

/* ---- xattrs (one block per object) ---- */

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
		ret = alloc_meta_block(fs, fs->l.itable_start, &blk);
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

/* ---- freeing objects ---- */

static int orphan_del(struct gs_fs *fs, struct gs_inode *ip);
static int orphan_add(struct gs_fs *fs, struct gs_inode *ip);

int ifree_object(struct gs_fs *fs, struct gs_inode *ip)
{
	uint64_t child = ip->m.child_head;
	uint32_t guard = 0;
	int ret;

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
	if (ip->m.xattr_blk) {
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
	struct gs_inode *root;
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
	pthread_rwlock_init(&ip->rw, NULL);
	ip->m.type = type;
	ip->m.mode = (mode & 07777) | (is_dirlike(type) ? S_IFDIR : S_IFREG);
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

int gs_fs_create(struct gs_fs *fs, uint64_t parent, const char *name, uint32_t type,
		 uint32_t mode, uint32_t uid, uint32_t gid, struct gs_stat *st)
{
	struct gs_inode *dp, *ip;
	int ret = name_ok(name);

	if (ret < 0)
		return ret;
	if (dot_name(name))
		return -EEXIST;
	if (type != GS_T_DIR && type != GS_T_ARRAY && type != GS_T_GRAPH && type != GS_T_ND)
		return -EINVAL;
	ret = check_rw(fs);
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
	if (dp->m.nlink == 0) {
		ret = -ENOENT;	/* removed while we looked */
		goto put_dir;
	}
	if (dindex_find(dp->dir, name)) {
		ret = -EEXIST;
		goto put_dir;
	}
	if (type == GS_T_DIR && dp->m.nlink >= UINT32_MAX - 1) {
		ret = -EMLINK;
		goto put_dir;
	}
	ret = new_inode(fs, type, mode, uid, gid, parent, &ip);
	if (ret < 0)
		goto put_dir;
	ret = dir_add(fs, dp, name, ip->ino, type);
	if (ret < 0) {
		/* nothing of this op is committed yet, but the transaction now
		 * holds part of it: undo the inode */
		int r = ifree_object(fs, ip);

		iput(fs, ip);
		if (r < 0)
			fs_fail(fs, r, "create rollback");
		goto put_dir;
	}
	if (type == GS_T_DIR)
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
	ret = check_rw(fs);
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

int gs_fs_rename(struct gs_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
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
	ret = check_rw(fs);
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

struct rd_ent {
	char name[GS_NAME_MAX + 1];
	struct gs_stat st;
	uint64_t next;
};

#define RD_BATCH 64

int gs_fs_readdir(struct gs_fs *fs, uint64_t ino, uint64_t cookie, gs_fs_filldir fill,
		  void *arg)
{
	struct rd_ent *v = malloc(RD_BATCH * sizeof(*v));
	int ret = 0;

	if (!v)
		return -ENOMEM;
	for (;;) {
		struct gs_inode *dp;
		uint32_t n = 0;
		uint64_t pos = cookie;	/* first byte position to report */

		pthread_mutex_lock(&fs->ns);
		ret = iget(fs, ino, &dp);
		if (ret < 0) {
			pthread_mutex_unlock(&fs->ns);
			break;
		}
		ret = dir_load(fs, dp);
		for (uint32_t b = pos >> fs->bshift; !ret && b < dp->dir->nblocks && n < RD_BATCH;
		     b++) {
			uint64_t pblk;
			struct mbuf *m;
			uint32_t off;

			ret = dir_block_pblk(fs, dp, b, &pblk);
			if (!ret)
				ret = mb_get(fs, pblk, GS_BT_DIR, &m);
			if (ret < 0)
				break;
			for (off = GS_DIR_OFF; off < fs->bs && n < RD_BATCH;) {
				struct gs_ddirent *de = (void *)(m->data + off);
				uint64_t at = ((uint64_t)b << fs->bshift) + off;
				struct gs_inode *ip;

				off += ld16(de->rec_len);
				if (!de->ino || at < pos)
					continue;
				memcpy(v[n].name, de->name, de->name_len);
				v[n].name[de->name_len] = 0;
				v[n].next = at + 1;
				if (iget(fs, ld64(de->ino), &ip) == 0) {
					istat(fs, ip, &v[n].st);
					iput(fs, ip);
				} else {
					memset(&v[n].st, 0, sizeof(v[n].st));
					v[n].st.ino = ld64(de->ino);
					v[n].st.type = de->type;
				}
				n++;
				cookie = at + 1;
			}
		}
		iput(fs, dp);
		pthread_mutex_unlock(&fs->ns);
		if (ret < 0 || !n)
			break;
		for (uint32_t i = 0; i < n; i++) {
			if (fill(arg, v[i].name, &v[i].st, v[i].next)) {
				free(v);
				return 0;
			}
		}
		if (n < RD_BATCH)
			break;
	}
	free(v);
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

int gs_fs_create_internal(struct gs_fs *fs, uint64_t owner, uint64_t *ino)
{
	struct gs_inode *op, *ip;
	int ret = check_rw(fs);

	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, owner, &op);
	if (ret < 0)
		goto unlock;
	if (op->m.type == GS_T_INTERNAL || op->m.type == GS_T_DIR) {
		ret = -EINVAL;
		goto put_owner;
	}
	ret = new_inode(fs, GS_T_INTERNAL, 0600, 0, 0, 0, &ip);
	if (ret < 0)
		goto put_owner;
	ip->m.owner = owner;
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

int gs_fs_unlink_internal(struct gs_fs *fs, uint64_t ino)
{
	struct gs_inode *ip, *op;
	int ret = check_rw(fs);

	if (ret < 0)
		return ret;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
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
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

/* ---- attributes ---- */

int gs_fs_setattr(struct gs_fs *fs, uint64_t ino, const struct gs_stat *in, unsigned mask,
		  struct gs_stat *out)
{
	struct gs_inode *ip;
	struct timespec now = now_ts();
	int ret = check_rw(fs);

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
		else if (in->size > GS_MAX_FILE_SIZE)
			ret = -EFBIG;
		if (ret < 0)
			goto put;
		pthread_rwlock_wrlock(&ip->rw);
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

int gs_fs_setxattr(struct gs_fs *fs, uint64_t ino, const char *name, const void *val,
		   size_t size, int flags)
{
	size_t nlen = name ? strlen(name) : 0;
	struct xa *v;
	struct gs_inode *ip;
	struct mbuf *m;
	uint8_t *copy = NULL;
	int n, i, ret = check_rw(fs);

	if (ret < 0)
		return ret;
	if (!nlen || nlen > 255)
		return nlen ? -ERANGE : -EINVAL;
	if (size > fs->bs - GS_XATTR_OFF - 4 - nlen)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	v = malloc((xa_max(fs) + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	jnl_op_begin(fs);
	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	n = xa_load(fs, ip, v, &m);
	if (n < 0) {
		ret = n;
		goto put;
	}
	/* entries point into the block buffer that xa_store rewrites: copy it */
	if (m) {
		copy = malloc(fs->bs);
		if (!copy) {
			ret = -ENOMEM;
			goto put;
		}
		memcpy(copy, m->data, fs->bs);
		for (int k = 0; k < n; k++) {
			v[k].name = copy + (v[k].name - m->data);
			v[k].value = copy + (v[k].value - m->data);
		}
	}
	i = xa_find(v, n, name);
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
	v[i].name_len = nlen;
	v[i].value = val;
	v[i].value_len = size;
	ret = xa_store(fs, ip, v, n);
	if (!ret) {
		itouch(ip, false, true);
		ret = iwrite(fs, ip);
		if (ret < 0)
			fs_fail(fs, ret, "setxattr");
	}
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	free(copy);
	free(v);
	return ret;
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
	struct xa *v;
	struct gs_inode *ip;
	struct mbuf *m;
	uint8_t *copy = NULL;
	int n, i, ret = check_rw(fs);

	if (ret < 0)
		return ret;
	v = malloc(xa_max(fs) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	jnl_op_begin(fs);
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
		goto put;
	}
	copy = malloc(fs->bs);
	if (!copy) {
		ret = -ENOMEM;
		goto put;
	}
	memcpy(copy, m->data, fs->bs);
	for (int k = 0; k < n; k++) {
		v[k].name = copy + (v[k].name - m->data);
		v[k].value = copy + (v[k].value - m->data);
	}
	v[i] = v[--n];
	ret = xa_store(fs, ip, v, n);
	if (!ret) {
		itouch(ip, false, true);
		ret = iwrite(fs, ip);
	}
	if (ret < 0)
		fs_fail(fs, ret, "removexattr");
put:
	iput(fs, ip);
unlock:
	pthread_mutex_unlock(&fs->ns);
	free(copy);
	free(v);
	return ret;
}
