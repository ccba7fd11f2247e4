// SPDX-License-Identifier: MIT
/*
 * Free-space and inode allocation.
 *
 * The on-disk bitmaps are the truth after a crash; in memory the whole
 * block bitmap is mirrored as the "allocatable" map, where a bit is set
 * when the block is in use, reserved by a write in progress, or freed by a
 * transaction that has not been checkpointed yet.  The last rule keeps a
 * freed block from being overwritten while the journal may still replay an
 * old image onto it or while the committed metadata still points at it.
 *
 * Allocation: take the goal if it is free (an object growing sequentially
 * gets its next block), else the first run from the goal long enough for
 * the request (or 2048 blocks), else any free block.  A per-group count of
 * free blocks lets the scans skip full groups.
 *
 * All functions run under fs->ns.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "fs_internal.h"

bool bit_test(const uint64_t *map, uint64_t i)
{
	return (map[i >> 6] >> (i & 63)) & 1;
}

static void bits_set(struct alloc *a, uint64_t blk, uint64_t len)
{
	for (uint64_t i = blk; i < blk + len; i++) {
		a->map[i >> 6] |= 1ULL << (i & 63);
		a->gfree[i >> GS_AGROUP_SHIFT]--;
	}
	a->nfree -= len;
}

static void bits_clear(struct alloc *a, uint64_t blk, uint64_t len)
{
	for (uint64_t i = blk; i < blk + len; i++) {
		a->map[i >> 6] &= ~(1ULL << (i & 63));
		a->gfree[i >> GS_AGROUP_SHIFT]++;
	}
	a->nfree += len;
}

static uint64_t bpb(const struct gs_fs *fs)
{
	return (uint64_t)(fs->bs - GS_BITMAP_OFF) * 8;
}

/* Load one on-disk bitmap into @map (nbits bits; padding bits set). */
static int load_bitmap(struct gs_fs *fs, uint64_t start, uint64_t nblk, uint16_t type,
		       uint64_t *map, uint64_t nbits)
{
	uint64_t per = bpb(fs);

	for (uint64_t b = 0; b < nblk; b++) {
		struct mbuf *m;
		const uint8_t *bits;
		int ret = mb_get(fs, start + b, type, &m);

		if (ret < 0)
			return ret;
		bits = m->data + GS_BITMAP_OFF;
		for (uint64_t i = 0; i < per && b * per + i < nbits; i++) {
			uint64_t k = b * per + i;

			if (bits[i >> 3] & (1u << (i & 7)))
				map[k >> 6] |= 1ULL << (k & 63);
		}
	}
	for (uint64_t k = nbits; k < ((nbits + 63) & ~63ULL); k++)
		map[k >> 6] |= 1ULL << (k & 63);
	return 0;
}

static uint64_t count_zero(const uint64_t *map, uint64_t nbits)
{
	uint64_t z = 0;

	for (uint64_t w = 0; w < (nbits + 63) / 64; w++)
		z += 64 - __builtin_popcountll(map[w]);
	return z;
}

static void alloc_finish(struct gs_fs *fs)
{
	struct alloc *a = &fs->al;
	const struct gs_layout *l = &fs->l;

	/* Metadata regions are never allocatable, whatever the bitmap says. */
	for (uint64_t i = 0; i < l->itable_start + l->itable_blocks; i++)
		a->map[i >> 6] |= 1ULL << (i & 63);
	for (uint64_t i = l->journal_start; i < l->journal_start + l->journal_blocks; i++)
		a->map[i >> 6] |= 1ULL << (i & 63);
	for (uint64_t k = l->nblocks; k < ((l->nblocks + 63) & ~63ULL); k++)
		a->map[k >> 6] |= 1ULL << (k & 63);
	for (uint64_t k = l->ninodes; k < ((l->ninodes + 63) & ~63ULL); k++)
		a->imap[k >> 6] |= 1ULL << (k & 63);
	a->imap[0] |= 3;	/* inode 0 never, 1 is the root */
	memset(a->gfree, 0, a->ngroups * sizeof(*a->gfree));
	for (uint64_t i = 0; i < l->nblocks; i++)
		if (!bit_test(a->map, i))
			a->gfree[i >> GS_AGROUP_SHIFT]++;
	a->nfree = count_zero(a->map, l->nblocks);
	a->ifree = count_zero(a->imap, l->ninodes);
	a->reserve = l->nblocks / 100;
	if (a->reserve < 32)
		a->reserve = 32;
	if (a->reserve > 8192)
		a->reserve = 8192;
	a->cursor = l->journal_start + l->journal_blocks;
	{
		struct gs_q_geom g = { 0 };

		a->mzone = 0;
		if (fs->q && !gs_q_geometry(fs->q, &g) && g.meta_bytes / l->bs < l->nblocks)
			a->mzone = g.meta_bytes / l->bs;
	}
	if (a->cursor < a->mzone)
		a->cursor = a->mzone;
	if (a->cursor >= l->nblocks)
		a->cursor = 0;
}

int alloc_adopt(struct gs_fs *fs, uint64_t *map, uint64_t *imap)
{
	struct alloc *a = &fs->al;

	alloc_destroy(fs);
	a->nbits = fs->l.nblocks;
	a->map = map;
	a->imap = imap;
	a->ninodes = fs->l.ninodes;
	a->ngroups = (fs->l.nblocks + GS_AGROUP - 1) >> GS_AGROUP_SHIFT;
	a->gfree = calloc(a->ngroups, sizeof(*a->gfree));
	if (!a->gfree)
		return -ENOMEM;
	alloc_finish(fs);
	return 0;
}

int alloc_init(struct gs_fs *fs)
{
	struct alloc *a = &fs->al;
	const struct gs_layout *l = &fs->l;
	uint64_t words = (l->nblocks + 63) / 64;
	uint64_t iwords = (l->ninodes + 63) / 64;
	int ret;

	a->nbits = l->nblocks;
	a->map = calloc(words, 8);
	a->ngroups = (l->nblocks + GS_AGROUP - 1) >> GS_AGROUP_SHIFT;
	a->gfree = calloc(a->ngroups, sizeof(*a->gfree));
	a->ninodes = l->ninodes;
	a->imap = calloc(iwords, 8);
	if (!a->map || !a->gfree || !a->imap)
		return -ENOMEM;
	pthread_mutex_lock(&fs->ns);
	ret = load_bitmap(fs, l->bbitmap_start, l->bbitmap_blocks, GS_BT_BBITMAP, a->map,
			  l->nblocks);
	if (!ret)
		ret = load_bitmap(fs, l->ibitmap_start, l->ibitmap_blocks, GS_BT_IBITMAP, a->imap,
				  l->ninodes);
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0)
		return ret;
	alloc_finish(fs);
	return 0;
}

void alloc_destroy(struct gs_fs *fs)
{
	free(fs->al.map);
	free(fs->al.gfree);
	free(fs->al.imap);
	memset(&fs->al, 0, sizeof(fs->al));
}

/* First zero bit at or after @from, below @to; @to if none. */
static uint64_t next_zero(const struct alloc *a, uint64_t from, uint64_t to)
{
	uint64_t i = from;

	while (i < to) {
		uint32_t g = i >> GS_AGROUP_SHIFT;
		uint64_t w;

		if (!a->gfree[g]) {
			i = ((uint64_t)g + 1) << GS_AGROUP_SHIFT;
			continue;
		}
		w = ~a->map[i >> 6] & (~0ULL << (i & 63));
		if (w) {
			i = (i & ~63ULL) + __builtin_ctzll(w);
			return i < to ? i : to;
		}
		i = (i & ~63ULL) + 64;
	}
	return to;
}

/* Length of the free run at @i, at most @max. */
static uint64_t run_len(const struct alloc *a, uint64_t i, uint64_t max)
{
	uint64_t n = 0;

	while (n < max && i + n < a->nbits) {
		uint64_t k = i + n;
		uint64_t w = a->map[k >> 6] >> (k & 63);

		if (w & 1)
			break;
		if (!w && (k & 63) == 0 && n + 64 <= max && k + 64 <= a->nbits) {
			n += 64;	/* a whole free word */
			continue;
		}
		n++;
	}
	return n;
}

/* First free run of at least @min blocks from @goal, wrapping once. */
static bool find_run(const struct alloc *a, uint64_t goal, uint64_t min, uint64_t *at,
		     uint64_t *len)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t i = pass ? 0 : goal, end = pass ? goal : a->nbits;

		while (i < end) {
			uint64_t r;

			i = next_zero(a, i, end);
			if (i >= end)
				break;
			r = run_len(a, i, min);
			if (r >= min) {
				*at = i;
				*len = r;
				return true;
			}
			i += r;
		}
	}
	return false;
}

int alloc_reserve(struct gs_fs *fs, uint64_t goal, uint64_t len, unsigned how, bool contig,
		  uint64_t *blk, uint64_t *got)
{
	struct alloc *a = &fs->al;
	uint64_t avail = a->nfree, at, n;
	bool meta = how & ALLOC_META, zone = how & (ALLOC_META | ALLOC_ZONE);

	if (!meta)
		avail = avail > a->reserve ? avail - a->reserve : 0;
	if (!len)
		return -EINVAL;
	if (len > GS_EXT_MAX_LEN)
		len = GS_EXT_MAX_LEN;
	if (!avail || (contig && avail < len))
		return -ENOSPC;
	if (len > avail)
		len = avail;
	if (goal >= a->nbits)
		goal = a->cursor < a->nbits ? a->cursor : 0;
	/* a pool: metadata from its mirrored zone, data past it (wrapping into it when full) */
	if (a->mzone)
		goal = zone ? (goal < a->mzone ? goal : 0) : (goal < a->mzone ? a->mzone : goal);
	if (!contig && !bit_test(a->map, goal)) {
		at = goal;
		n = run_len(a, goal, len);
	} else if (find_run(a, goal, contig ? len : (len < 2048 ? len : 2048), &at, &n)) {
		n = run_len(a, at, len);
	} else if (contig) {
		return -ENOSPC;
	} else if (find_run(a, goal, 1, &at, &n)) {
		n = run_len(a, at, len);
	} else {
		return -ENOSPC;
	}
	if (!n)
		return -ENOSPC;	/* cannot happen: a run found is never empty */
	if (zone && a->mzone && at + n > a->mzone && !a->zone_full) {
		/* the run search went on past the zone: these blocks have one copy on a
		 * stripe pool (said once per mount; gstore(5) POOLS) */
		a->zone_full = true;
		gs_warn("gstore: the pool's mirrored zone is full: metadata from block %" PRIu64
			" on is kept on one member only", at);
	}
	bits_set(a, at, n);
	a->cursor = at + n < a->nbits ? at + n : 0;
	*blk = at;
	*got = n;
	return 0;
}

void alloc_unreserve(struct gs_fs *fs, uint64_t blk, uint64_t len)
{
	bits_clear(&fs->al, blk, len);
}

/* Set or clear bits [blk, blk+len) of an on-disk bitmap in the transaction. */
static int bitmap_update(struct gs_fs *fs, uint64_t start, uint16_t type, uint64_t first,
			 uint64_t len, bool set)
{
	uint64_t per = bpb(fs);

	while (len) {
		uint64_t b = first / per, i = first % per;
		uint64_t n = per - i < len ? per - i : len;
		struct mbuf *m;
		uint8_t *bits;
		int ret = mb_get(fs, start + b, type, &m);

		if (ret < 0)
			return ret;
		bits = m->data + GS_BITMAP_OFF;
		for (uint64_t k = i; k < i + n; k++) {
			if (set)
				bits[k >> 3] |= 1u << (k & 7);
			else
				bits[k >> 3] &= ~(1u << (k & 7));
		}
		mb_dirty(fs, m);
		first += n;
		len -= n;
	}
	return 0;
}

int alloc_commit(struct gs_fs *fs, uint64_t blk, uint64_t len)
{
	return bitmap_update(fs, fs->l.bbitmap_start, GS_BT_BBITMAP, blk, len, true);
}

static bool is_meta_region(const struct gs_fs *fs, uint64_t blk, uint64_t len)
{
	const struct gs_layout *l = &fs->l;

	return blk < l->itable_start + l->itable_blocks ||
	       (blk < l->journal_start + l->journal_blocks && blk + len > l->journal_start);
}

int alloc_free(struct gs_fs *fs, uint64_t blk, uint64_t len)
{
	uint64_t end;
	int ret;

	if (!len)
		return 0;
	if (add_ovf(blk, len, &end) || end > fs->l.nblocks || is_meta_region(fs, blk, len)) {
		gs_err("gstore: freeing blocks %" PRIu64 "+%" PRIu64 " outside the data area",
		       blk, len);
		return -EUCLEAN;
	}
	ret = bitmap_update(fs, fs->l.bbitmap_start, GS_BT_BBITMAP, blk, len, false);
	if (ret < 0)
		return ret;
	fs->al.pending += len;
	return fext_add(&fs->j.tx_frees, blk, len);
}

/*
 * Directory and xattr blocks may use the metadata reserve down to
 * GS_MAP_HEADROOM blocks; those last ones are kept for extent-map updates,
 * which cannot be undone halfway (alloc_map_room() checks before one).
 */
int alloc_soft_meta_block(struct gs_fs *fs, uint64_t goal, uint64_t *blk)
{
	if (fs->al.nfree <= GS_MAP_HEADROOM)
		return -ENOSPC;
	return alloc_meta_block(fs, goal, blk);
}

bool alloc_map_room(const struct gs_fs *fs)
{
	return fs->al.nfree >= GS_MAP_HEADROOM;
}

int alloc_meta_block(struct gs_fs *fs, uint64_t goal, uint64_t *blk)
{
	uint64_t got;
	int ret = alloc_reserve(fs, goal, 1, true, false, blk, &got);

	if (ret < 0)
		return ret;
	ret = alloc_commit(fs, *blk, 1);
	if (ret < 0)
		alloc_unreserve(fs, *blk, 1);
	return ret;
}

void alloc_release_pending(struct gs_fs *fs, struct fextlist *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		bits_clear(&fs->al, l->e[i].blk, l->e[i].len);
		fs->al.pending -= l->e[i].len;
	}
	l->n = 0;
}

int alloc_inode(struct gs_fs *fs, uint64_t *ino)
{
	struct alloc *a = &fs->al;
	uint64_t i;
	int ret;

	if (!a->ifree)
		return -ENOSPC;
	/* next-fit: inode numbers are not reused soon after a free */
	for (int pass = 0; pass < 2; pass++) {
		uint64_t from = pass ? 2 : a->icursor, to = pass ? a->icursor : a->ninodes;

		for (i = from < 2 ? 2 : from; i < to; i++) {
			uint64_t w = a->imap[i >> 6];

			if (w == ~0ULL) {
				i |= 63;
				continue;
			}
			if (!(w >> (i & 63) & 1))
				goto found;
		}
	}
	return -ENOSPC;
found:
	ret = bitmap_update(fs, fs->l.ibitmap_start, GS_BT_IBITMAP, i, 1, true);
	if (ret < 0)
		return ret;
	a->imap[i >> 6] |= 1ULL << (i & 63);
	a->ifree--;
	a->icursor = i + 1;
	*ino = i;
	return 0;
}

int free_inode_bit(struct gs_fs *fs, uint64_t ino)
{
	struct alloc *a = &fs->al;
	int ret;

	if (ino < 2 || ino >= a->ninodes || !bit_test(a->imap, ino))
		return -EUCLEAN;
	ret = bitmap_update(fs, fs->l.ibitmap_start, GS_BT_IBITMAP, ino, 1, false);
	if (ret < 0)
		return ret;
	a->imap[ino >> 6] &= ~(1ULL << (ino & 63));
	a->ifree++;
	return 0;
}

/* Blocks of the fixed metadata regions (superblocks, bitmaps, inode table, journal). */
static uint64_t fixed_blocks(const struct gs_layout *l)
{
	uint64_t meta = l->itable_start + l->itable_blocks;
	uint64_t js = l->journal_start, je = l->journal_start + l->journal_blocks;

	return meta + l->journal_blocks - (js < meta ? (je < meta ? je : meta) - js : 0);
}

/*
 * A bitmap with a valid crc and wrong bits would hand one object's blocks to
 * another at the next allocation.  The cheap cross-check at mount: read the
 * inode-table blocks that hold an inode the inode bitmap marks used (inode
 * records only, no extent trees), then
 *   - every live inode must be marked in the inode bitmap, else alloc_inode()
 *     could give its number to a new object;
 *   - the blocks the live inodes own (their block counts, which fsck keeps
 *     exact: data, extent nodes, xattr blocks) must not exceed the blocks the
 *     block bitmap marks used outside the fixed metadata, else some owned
 *     block is marked free.
 * More blocks marked than owned is a leak: harmless, only logged.  What this
 * cannot see: a block marked free balanced by an unowned one marked used,
 * and live inodes in a table block none of whose inode-bitmap bits is set.
 * Returns -EUCLEAN (logged) when the bitmaps cannot be trusted.
 */
int alloc_verify(struct gs_fs *fs)
{
	const struct gs_layout *l = &fs->l;
	struct alloc *a = &fs->al;
	uint32_t ipb = (fs->bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	uint64_t owned = 0, marked = l->nblocks - a->nfree - fixed_blocks(l);
	uint64_t nbad = 0, first_bad = 0, unread = 0;
	int ret = 0;

	pthread_mutex_lock(&fs->ns);
	for (uint64_t b = 0; b < l->itable_blocks; b++) {
		uint64_t i0 = b * ipb;
		bool any = false;
		struct mbuf *m;

		for (uint64_t i = i0; i < i0 + ipb && i < l->ninodes && !any; i++)
			any = bit_test(a->imap, i);
		if (!any)
			continue;
		ret = mb_get(fs, l->itable_start + b, GS_BT_ITABLE, &m);
		if (ret == -EUCLEAN) {	/* its inodes fail on use; their blocks stay marked */
			unread++;
			ret = 0;
			continue;
		}
		if (ret < 0)
			break;
		for (uint32_t k = 0; k < ipb && i0 + k < l->ninodes; k++) {
			const struct gs_dinode *d = (const void *)(m->data + GS_ITABLE_OFF +
								   k * GS_INODE_SIZE);

			if (!d->type || i0 + k == 0)
				continue;
			if (!bit_test(a->imap, i0 + k) && !nbad++)
				first_bad = i0 + k;
			owned += ld64(d->blocks) < l->nblocks ? ld64(d->blocks) : l->nblocks;
		}
	}
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0)
		return ret;
	if (nbad) {
		gs_err("gstore: %s: the inode bitmap marks %" PRIu64 " live inodes free (inode %"
		       PRIu64 " first): their numbers could be given to new objects", fs->path,
		       nbad, first_bad);
		return -EUCLEAN;
	}
	if (owned > marked) {
		gs_err("gstore: %s: the block bitmap marks %" PRIu64 " data blocks in use but the "
		       "inodes own %" PRIu64 ": blocks of one object could be given to another",
		       fs->path, marked, owned);
		return -EUCLEAN;
	}
	if (owned < marked && !unread)
		gs_warn("gstore: %s: %" PRIu64 " blocks are marked in use but owned by no inode "
			"(leaked; fsck -y frees them)", fs->path, marked - owned);
	return 0;
}
