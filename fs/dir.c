// SPDX-License-Identifier: MIT
/*
 * Directories: blocks of variable-length records (as in ext2) reached
 * through the directory's extent map, and an in-memory hash of the entries
 * built at first use.  Every byte of a block belongs to one record; a
 * record's rec_len covers its name and any slack; ino 0 marks free space.
 * Inserting splits the slack of an existing record, removing merges a
 * record into its predecessor, so records never move and a readdir cookie
 * (the record's byte position in the directory + 1) stays valid.
 *
 * All functions run under fs->ns except gs_fs_readdir(), which takes it.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "fs_internal.h"

static bool type_ok(uint16_t t)
{
	return fs_type(t) != NULL;
}

void dir_index_free(struct dindex *d)
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

struct dirent_m *dindex_find(struct dindex *d, const char *name)
{
	struct dirent_m **pp = dindex_slot(d, name);

	return pp ? *pp : NULL;
}

/* Parse one directory block; with @d, index its entries.  Returns the
 * largest usable gap or -EUCLEAN. */
int dir_parse(struct gs_fs *fs, const uint8_t *blk, uint64_t pblk, uint32_t bidx,
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
			if (d && dindex_add(d, de->name, de->name_len, ino, de->type, bidx,
					    off) < 0)
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

int dir_load(struct gs_fs *fs, struct gs_inode *ip)
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

int dir_add(struct gs_fs *fs, struct gs_inode *dp, const char *name, uint64_t ino,
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

int dir_del(struct gs_fs *fs, struct gs_inode *dp, const char *name)
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
int dir_retarget(struct gs_fs *fs, struct gs_inode *dp, struct dirent_m *e,
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
