// SPDX-License-Identifier: MIT
/*
 * fsck, blocks claimed by more than one object (e2fsck's passes 1B-1D).
 *
 * Pass 2 claimed every block an inode owns and marked the ones claimed
 * again (c->dup).  Here, with the allocator working from what the inodes
 * own, every live object is walked again:
 *
 *   1B  who holds which shared block.  Extent-tree nodes and xattr blocks
 *       keep theirs: they name their owner in their header, so only that
 *       owner can use them.  Objects with shared blocks among their data
 *       are listed.
 *   1C  the listed objects, directories first (their blocks are
 *       metadata too), then the rest, each in inode order.  An extent whose
 *       shared blocks nobody holds yet is kept by this object; an extent with
 *       a shared block someone already holds is copied whole to one new run
 *       and repointed; its blocks nobody else claims go back to the allocator.
 *       Without space for the copy the held blocks are punched out of this
 *       object instead (they read as zeros) and it keeps the rest.
 *   1D  shared blocks nobody held in the end (every owner moved off) are
 *       freed.
 *
 * So the first owner keeps the block, every other one gets a copy of what
 * the block holds now: after a cross-link both read what the last writer
 * left there, and neither can change the other's data again.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "fsck_internal.h"

#define COPY_CHUNK	(1u << 20)	/* bytes copied per cache read/write */

struct dctx {
	struct fck *c;
	uint64_t *kept;		/* shared blocks some owner holds now */
	uint64_t *todo;		/* objects with shared blocks among their data */
	uint64_t ntodo, atodo;
	uint8_t *buf;
	uint64_t cloned, punched, objects;
};

static bool shared(const struct fck *c, uint64_t b)
{
	return fck_test(c->dup, b);
}

static bool any_shared(const struct fck *c, uint64_t blk, uint64_t len)
{
	for (uint64_t b = blk; b < blk + len; b++)
		if (shared(c, b))
			return true;
	return false;
}

static void keep_meta(struct dctx *d, uint64_t blk)
{
	if (blk && shared(d->c, blk))
		fck_set(d->kept, blk);
}

/* Object @ino with its extent map loaded; *ipp holds a reference. */
static int get_mapped(struct gs_fs *fs, uint64_t ino, struct gs_inode **ipp)
{
	int ret = iget(fs, ino, ipp);

	if (ret < 0)
		return ret;
	ret = xmap_load(fs, *ipp);
	if (ret < 0)
		iput(fs, *ipp);
	return ret;
}

/* 1B for one object. */
static int survey(struct dctx *d, uint64_t ino)
{
	struct gs_fs *fs = d->c->fs;
	struct gs_inode *ip;
	struct xmap *m;
	bool listed = false;
	int ret = get_mapped(fs, ino, &ip);

	if (ret < 0)
		return ret;
	m = &ip->map;
	if (!(ip->m.flags & GS_IFL_XATTR_OBJ))	/* else an internal object's number */
		keep_meta(d, ip->m.xattr_blk);
	for (uint32_t i = 0; i < m->nidx; i++)
		keep_meta(d, m->idx[i]);
	for (uint32_t i = 0; i < m->nleaves; i++) {
		keep_meta(d, m->leaves[i].blk);
		for (uint32_t j = 0; j < m->leaves[i].n && !listed; j++)
			listed = any_shared(d->c, m->leaves[i].ex[j].pblk, m->leaves[i].ex[j].len);
	}
	if (listed) {
		if (d->ntodo == d->atodo) {
			uint64_t n = d->atodo ? 2 * d->atodo : 64;
			uint64_t *v = realloc(d->todo, n * sizeof(*v));

			if (!v) {
				ret = -ENOMEM;
				goto put;
			}
			d->todo = v;
			d->atodo = n;
		}
		d->todo[d->ntodo++] = ino;
	}
put:
	iput(fs, ip);
	return ret;
}

/* One run of @len blocks near @old; directory blocks (@meta) where metadata
 * goes (a pool's mirrored zone).  One run: the copy keeps the extent's shape. */
static int clone_alloc(struct gs_fs *fs, uint64_t old, uint64_t len, bool meta, uint64_t *blk)
{
	uint64_t at, got;
	int ret = alloc_reserve(fs, old, len, meta, true, &at, &got);

	if (ret < 0)
		return ret;
	ret = alloc_commit(fs, at, len);
	if (ret < 0) {
		alloc_unreserve(fs, at, len);
		return ret;
	}
	*blk = at;
	return 0;
}

/* A directory block copied elsewhere must say where it lives now. */
static void rehome_dir_block(struct gs_fs *fs, uint8_t *b, uint64_t from, uint64_t to)
{
	struct gs_dblk *h = (void *)b;

	if (ld32(h->magic) == GS_BLK_MAGIC && ld16(h->type) == GS_BT_DIR &&
	    ld64(h->blkno) == from && ld32(h->crc) == gs_blk_crc(b, fs->bs)) {
		h->blkno = st64(to);
		gs_blk_seal(b, fs->bs);
	}
}

/* Copy @len blocks (through the cache: data=ordered holds for the copy). */
static int copy_blocks(struct dctx *d, bool dir, uint64_t from, uint64_t to, uint64_t len)
{
	struct gs_fs *fs = d->c->fs;
	uint64_t per = COPY_CHUNK >> fs->bshift;

	for (uint64_t i = 0; i < len; i += per) {
		uint64_t n = len - i < per ? len - i : per;
		size_t bytes = n << fs->bshift;
		ssize_t r = gs_cache_read(fs->c, d->buf, bytes, blk2off(fs, from + i));

		if (r >= 0 && (size_t)r != bytes)
			r = -EIO;
		if (r < 0)
			return (int)r;
		for (uint64_t k = 0; dir && k < n; k++)
			rehome_dir_block(fs, d->buf + (k << fs->bshift), from + i + k, to + i + k);
		r = gs_cache_write(fs->c, d->buf, bytes, blk2off(fs, to + i));
		if (r >= 0 && (size_t)r != bytes)
			r = -EIO;
		if (r < 0)
			return (int)r;
	}
	return 0;
}

/* Free the blocks of @e nobody else claims. */
static int free_own(struct dctx *d, const struct gs_ext *e)
{
	uint64_t b = e->pblk, end = e->pblk + e->len;
	int ret = 0;

	while (b < end && !ret) {
		uint64_t n = 0;

		while (b + n < end && !shared(d->c, b + n))
			n++;
		if (n)
			ret = alloc_free(d->c->fs, b, n);
		b += n + 1;	/* past a shared one (or the end) */
	}
	return ret;
}

static int clone_extent(struct dctx *d, struct gs_inode *ip, const struct gs_ext *e)
{
	struct gs_fs *fs = d->c->fs;
	bool dir = ip->m.type == GS_T_DIR;
	struct gs_ext x = *e;
	int ret = clone_alloc(fs, e->pblk, e->len, dir, &x.pblk);

	if (ret < 0)
		return ret;
	if (!(e->flags & GS_EXT_UNWRITTEN))
		ret = copy_blocks(d, dir, e->pblk, x.pblk, e->len);
	if (!ret)
		ret = xmap_remove(fs, ip, e->lblk, e->len, false);
	if (!ret)
		ret = xmap_insert(fs, ip, &x);
	if (!ret)
		ret = free_own(d, e);
	if (!ret)
		d->cloned += e->len;
	return ret;
}

/* No room for a copy: drop the held blocks from this object, keep the rest. */
static int punch_held(struct dctx *d, struct gs_inode *ip, const struct gs_ext *e)
{
	for (uint64_t i = 0; i < e->len;) {
		uint64_t n = 0;
		int ret;

		while (i + n < e->len && shared(d->c, e->pblk + i + n) &&
		       fck_test(d->kept, e->pblk + i + n))
			n++;
		if (!n) {
			if (shared(d->c, e->pblk + i))
				fck_set(d->kept, e->pblk + i);
			i++;
			continue;
		}
		ret = xmap_remove(d->c->fs, ip, e->lblk + i, n, false);
		if (ret < 0)
			return ret;
		d->punched += n;
		i += n;
	}
	return 0;
}

/* 1C for one object. */
static int resolve(struct dctx *d, uint64_t ino)
{
	struct fck *c = d->c;
	struct gs_fs *fs = c->fs;
	uint64_t cloned = d->cloned, punched = d->punched, n = 0;
	struct gs_ext *v = NULL;
	struct gs_inode *ip;
	int ret = get_mapped(fs, ino, &ip);

	if (ret < 0)
		return ret;
	/* the map changes under us: work from a copy of its extents */
	for (uint32_t i = 0; i < ip->map.nleaves; i++)
		n += ip->map.leaves[i].n;
	v = malloc((n ? n : 1) * sizeof(*v));
	n = 0;
	for (uint32_t i = 0; v && i < ip->map.nleaves; i++)
		for (uint32_t j = 0; j < ip->map.leaves[i].n; j++)
			v[n++] = ip->map.leaves[i].ex[j];
	if (!v) {
		ret = -ENOMEM;
		goto put;
	}
	for (uint64_t k = 0; k < n && !ret; k++) {
		const struct gs_ext *e = &v[k];
		bool held = false;

		for (uint64_t b = e->pblk; b < e->pblk + e->len && !held; b++)
			held = shared(c, b) && fck_test(d->kept, b);
		if (!held) {
			for (uint64_t b = e->pblk; b < e->pblk + e->len; b++)
				if (shared(c, b))
					fck_set(d->kept, b);
			continue;
		}
		ret = clone_extent(d, ip, e);
		if (ret == -ENOSPC)
			ret = punch_held(d, ip, e);
	}
	if (!ret)
		ret = xmap_sync(fs, ip);
	if (!ret)
		ret = iwrite(fs, ip);
	if (!ret && d->cloned > cloned)
		fck_note(c, "inode %" PRIu64 ": %" PRIu64 " blocks shared with another object: "
			 "copied", ino, d->cloned - cloned);
	if (!ret && d->punched > punched)
		fck_note(c, "inode %" PRIu64 ": %" PRIu64 " blocks shared with another object: "
			 "no space for a copy, punched (read as zeros)", ino, d->punched - punched);
	d->objects++;
put:
	free(v);
	iput(fs, ip);
	return ret;
}

int fsck_dups(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	struct dctx d = { .c = c };
	uint64_t freed = 0;
	int ret = 0;

	d.kept = calloc((fs->l.nblocks + 63) / 64, 8);
	if (!d.kept || posix_memalign((void **)&d.buf, 4096, COPY_CHUNK)) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++)
		if (c->itype[ino])
			ret = survey(&d, ino);
	for (int dirs = 1; dirs >= 0; dirs--) {
		for (uint64_t i = 0; i < d.ntodo && !ret; i++) {
			if ((c->itype[d.todo[i]] == GS_T_DIR) != dirs)
				continue;
			ret = resolve(&d, d.todo[i]);
			if (!ret)
				jnl_op_begin(fs);	/* keep the transactions bounded */
		}
	}
	for (uint64_t b = 0; b < fs->l.nblocks && !ret; b++) {
		if (shared(c, b) && !fck_test(d.kept, b)) {
			ret = alloc_free(fs, b, 1);
			freed++;
		}
	}
	if (!ret)
		fck_problem(c, true, "%" PRIu64 " blocks were claimed by more than one object: "
			    "%" PRIu64 " objects resolved, %" PRIu64 " blocks copied, %" PRIu64
			    " punched, %" PRIu64 " freed", c->dups, d.objects, d.cloned, d.punched,
			    freed);
out:
	free(d.buf);
	free(d.todo);
	free(d.kept);
	return ret;
}
