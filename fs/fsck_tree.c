// SPDX-License-Identifier: MIT
/*
 * fsck, the namespace tree: dead directories (the root among them) rebuilt
 * from their blocks, the type directories, lost+found.
 *
 * Names live only in directory blocks, and every directory block carries
 * its owner's inode number in its header.  So when a directory's inode is
 * gone (its inode-table block destroyed, its extent tree corrupt) its
 * blocks are still on the device, marked used in the bitmap but claimed by
 * nobody: repair reads those blocks (only those, and only when some
 * object's parent or the root is dead), and a block that verifies as a
 * directory block of a dead inode gives that inode back as a directory
 * holding it.  The ordinary directory pass then keeps the entries that still
 * point at live objects, so every name that survived on the device comes
 * back.  A dead root with no blocks left is recreated empty.
 *
 * When the root lost entries, arrays/, graph/ and nd/ are put back: an
 * unnamed directory that mkfs made for the name (inodes 2, 3, 4) gets it
 * again, else an empty one is made.  Whatever still has no name goes into
 * /lost+found as "#INO" (e2fsck's rule).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fsck_internal.h"

#define SCAN_CHUNK	(1u << 20)	/* bytes read per look at unclaimed blocks */

/* Is some directory dead that an object or the tree still needs? */
static bool dirs_lost(const struct fck *c)
{
	uint64_t n = c->fs->l.ninodes;

	if (c->itype[GS_ROOT_INO] != GS_T_DIR)
		return true;
	for (uint64_t ino = 2; ino < n; ino++) {
		uint64_t p = c->iparent[ino];

		if (c->itype[ino] && c->itype[ino] != GS_T_INTERNAL && p &&
		    (p >= n || c->itype[p] != GS_T_DIR))
			return true;
	}
	return false;
}

static struct lost_dir *lost_get(struct fck *c, uint64_t ino)
{
	struct lost_dir *v;

	for (uint32_t i = 0; i < c->nlost; i++)
		if (c->lost[i].ino == ino)
			return &c->lost[i];
	v = realloc(c->lost, (c->nlost + 1) * sizeof(*v));
	if (!v)
		return NULL;
	c->lost = v;
	v = &c->lost[c->nlost++];
	memset(v, 0, sizeof(*v));
	v->ino = ino;
	return v;
}

/* Block @b (its bytes in @buf): a directory block of a dead inode? */
static int look_at(struct fck *c, const uint8_t *buf, uint64_t b)
{
	const struct gs_dblk *h = (const void *)buf;
	uint64_t owner = ld64(h->owner);
	struct lost_dir *ld;

	if (ld32(h->magic) != GS_BLK_MAGIC || ld16(h->type) != GS_BT_DIR || ld64(h->blkno) != b ||
	    !owner || owner >= c->fs->l.ninodes || c->itype[owner] ||
	    ld32(h->crc) != gs_blk_crc(buf, c->fs->bs))
		return 0;
	ld = lost_get(c, owner);
	if (!ld)
		return -ENOMEM;
	if (ld->n == ld->cap) {
		uint32_t n = ld->cap ? 2 * ld->cap : 8;
		uint64_t *v = realloc(ld->blk, n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ld->blk = v;
		ld->cap = n;
	}
	ld->blk[ld->n++] = b;
	return 0;
}

/* Read the run [b, b + n) of unclaimed blocks and look at each. */
static int scan_run(struct fck *c, uint8_t *buf, uint64_t b, uint64_t n)
{
	struct gs_fs *fs = c->fs;
	size_t bytes = n << fs->bshift;
	ssize_t r = gs_cache_read(fs->c, buf, bytes, blk2off(fs, b));
	int ret = 0;

	if (r < 0)
		return (int)r;
	for (uint64_t k = 0; k < n && (k + 1) << fs->bshift <= (uint64_t)r && !ret; k++)
		ret = look_at(c, buf + (k << fs->bshift), b + k);
	return ret;
}

int fsck_find_lost_dirs(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	uint64_t per = (uint64_t)(fs->bs - GS_BITMAP_OFF) * 8, max = SCAN_CHUNK >> fs->bshift;
	uint64_t run = 0, first = 0;
	uint8_t *bits, *buf = NULL;
	int ret = 0;

	if (!dirs_lost(c))
		return 0;
	bits = malloc(fs->bs);
	if (!bits || posix_memalign((void **)&buf, 4096, SCAN_CHUNK)) {
		ret = -ENOMEM;
		goto out;
	}
	/* the bitmap's "used" is all we have to go on here; a block the
	 * bitmap lost is not looked at */
	for (uint64_t bb = 0; bb < fs->l.bbitmap_blocks && !ret; bb++) {
		struct mbuf *m;

		ret = mb_get(fs, fs->l.bbitmap_start + bb, GS_BT_BBITMAP, &m);
		if (ret == -EUCLEAN) {
			ret = 0;
			continue;
		}
		if (ret < 0)
			break;
		memcpy(bits, m->data + GS_BITMAP_OFF, fs->bs - GS_BITMAP_OFF);
		for (uint64_t i = 0; i < per && !ret; i++) {
			uint64_t b = bb * per + i;
			bool cand = b < fs->l.nblocks && (bits[i >> 3] >> (i & 7) & 1) &&
				    !fck_test(c->used, b);

			if (cand && run && first + run == b && run < max) {
				run++;
				continue;
			}
			if (run)
				ret = scan_run(c, buf, first, run);
			run = cand;
			first = b;
		}
	}
	if (!ret && run)
		ret = scan_run(c, buf, first, run);
	if (!ret && c->itype[GS_ROOT_INO] != GS_T_DIR && !lost_get(c, GS_ROOT_INO))
		ret = -ENOMEM;
	for (uint32_t i = 0; i < c->nlost && !ret; i++) {
		struct lost_dir *ld = &c->lost[i];

		for (uint32_t k = 0; k < ld->n; k++) {
			fck_set(c->used, ld->blk[k]);
			c->blocks++;
		}
		fck_set(c->iuse, ld->ino);
		c->itype[ld->ino] = GS_T_DIR;
		c->dirs++;
	}
out:
	free(buf);
	free(bits);
	return ret;
}

/* Directory inode @ld->ino again, holding @ld's blocks (or a new empty one). */
static int make_dir(struct fck *c, const struct lost_dir *ld)
{
	struct gs_fs *fs = c->fs;
	struct inode_m m = { .type = GS_T_DIR, .mode = S_IFDIR | 0755, .nlink = 2 };
	struct gs_inode *ip;
	struct mbuf *mb;
	uint32_t off;
	int ret = mb_get(fs, itable_blk(fs, ld->ino, &off), GS_BT_ITABLE, &mb);

	if (ret < 0)
		return ret;
	m.generation = ld32(((struct gs_dinode *)(mb->data + off))->generation) + 1;
	m.parent = ld->ino == GS_ROOT_INO ? GS_ROOT_INO : 0;	/* the dir pass finds it */
	m.size = (uint64_t)(ld->n ? ld->n : 1) << fs->bshift;
	m.atime = m.mtime = m.ctime = now_ts();
	ret = fck_put_dinode(c, ld->ino, &m);
	if (!ret)
		ret = iget(fs, ld->ino, &ip);
	if (ret < 0)
		return ret;
	ret = xmap_load(fs, ip);
	for (uint32_t k = 0; k < ld->n && !ret; k++) {
		struct gs_ext e = { k, ld->blk[k], 1, 0 };

		ret = xmap_insert(fs, ip, &e);
	}
	if (!ret && !ld->n) {
		struct gs_ext e = { 0, 0, 1, 0 };

		ret = alloc_meta_block(fs, fs->l.itable_start + fs->l.itable_blocks, &e.pblk);
		if (!ret)
			ret = mb_new(fs, e.pblk, ld->ino, GS_BT_DIR, &mb);
		if (!ret) {
			((struct gs_ddirent *)(mb->data + GS_DIR_OFF))->rec_len =
				st16(fs->bs - GS_DIR_OFF);
			ret = xmap_insert(fs, ip, &e);
		}
	}
	if (!ret)
		ret = xmap_sync(fs, ip);
	if (!ret)
		ret = iwrite(fs, ip);
	iput(fs, ip);
	return ret;
}

int fsck_rebuild_dirs(struct fck *c)
{
	int ret = 0;

	for (uint32_t i = 0; i < c->nlost && !ret; i++) {
		const struct lost_dir *ld = &c->lost[i];

		ret = make_dir(c, ld);
		if (ret < 0)
			break;
		if (ld->ino == GS_ROOT_INO) {
			c->root_damaged = true;
			fck_problem(c, true, "the root directory was gone: recreated (%u blocks of "
				    "its entries found)", ld->n);
		} else {
			fck_problem(c, true, "directory %" PRIu64 " was gone: rebuilt from %u of "
				    "its blocks", ld->ino, ld->n);
		}
	}
	return ret;
}

int fsck_type_dirs(struct fck *c)
{
	static const struct { const char *name; uint64_t mkfs_ino; } tdir[] = {
		{ "arrays", 2 }, { "graph", 3 }, { "nd", 4 },
	};
	struct gs_fs *fs = c->fs;
	struct gs_inode *root;
	int ret = iget(fs, GS_ROOT_INO, &root);

	if (ret < 0)
		return ret;
	ret = dir_load(fs, root);
	for (size_t i = 0; i < sizeof(tdir) / sizeof(tdir[0]) && !ret; i++) {
		uint64_t ino = tdir[i].mkfs_ino;

		if (dindex_find(root->dir, tdir[i].name))
			continue;
		if (ino < fs->l.ninodes && c->itype[ino] == GS_T_DIR && !c->links[ino] &&
		    c->iparent[ino] == GS_ROOT_INO) {
			ret = dir_add(fs, root, tdir[i].name, ino, GS_T_DIR);
			if (ret < 0)
				break;
			c->links[ino] = 1;
			c->dparent[ino] = GS_ROOT_INO;
			c->subdirs[GS_ROOT_INO]++;
			root->m.nlink++;
			ret = iwrite(fs, root);
			fck_problem(c, true, "/%s had lost its name: directory %" PRIu64 " named "
				    "again", tdir[i].name, ino);
		} else {
			ret = fck_mkdir(c, GS_ROOT_INO, tdir[i].name, 0755, &ino);
			if (!ret)
				fck_problem(c, true, "/%s was missing: recreated (directory %" PRIu64
					    ")", tdir[i].name, ino);
		}
	}
	iput(fs, root);
	return ret;
}

/* /lost+found (or lost+found.N where that name is taken by something else). */
static int lost_found(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *root;
	char name[32] = "lost+found";
	int ret;

	if (c->lf)
		return 0;
	ret = iget(fs, GS_ROOT_INO, &root);
	if (ret < 0)
		return ret;
	ret = dir_load(fs, root);
	for (int k = 1; !ret && k < 100; k++) {
		const struct dirent_m *e = dindex_find(root->dir, name);

		if (!e)
			break;
		if (e->type == GS_T_DIR && e->ino < fs->l.ninodes &&
		    c->itype[e->ino] == GS_T_DIR) {
			c->lf = e->ino;
			break;
		}
		snprintf(name, sizeof(name), "lost+found.%d", k);
	}
	iput(fs, root);
	if (!ret && !c->lf)
		ret = fck_mkdir(c, GS_ROOT_INO, name, 0700, &c->lf);
	return ret;
}

int fsck_reconnect(struct fck *c, struct gs_inode *ip)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *dp;
	char name[48];
	int ret = lost_found(c);

	if (!ret)
		ret = iget(fs, c->lf, &dp);
	if (ret < 0)
		return ret;
	ret = dir_load(fs, dp);
	snprintf(name, sizeof(name), "#%" PRIu64, ip->ino);
	for (int k = 1; !ret && k < 100 && dindex_find(dp->dir, name); k++)
		snprintf(name, sizeof(name), "#%" PRIu64 ".%d", ip->ino, k);
	if (!ret)
		ret = dir_add(fs, dp, name, ip->ino, ip->m.type);
	if (!ret) {
		c->links[ip->ino] = 1;
		c->dparent[ip->ino] = c->lf;
		if (ip->m.type == GS_T_DIR) {
			ip->m.parent = c->lf;
			dp->m.nlink++;
			c->subdirs[c->lf]++;
		}
		itouch(dp, true, true);
		ret = iwrite(fs, dp);
	}
	iput(fs, dp);
	return ret;
}
