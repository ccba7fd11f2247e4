// SPDX-License-Identifier: MIT
/*
 * Extent maps and the data path of arrays (and of every object with data:
 * directories use the map for their blocks, nd and internal objects for
 * theirs).
 *
 * On disk an object's blocks are described by a B+tree of extents whose
 * root sits in the inode (up to 4 extents inline, or up to 6 index entries);
 * nodes are whole metadata blocks.  In memory the whole leaf level is kept
 * (struct xmap) once an object is used, so mapping a file offset costs two
 * binary searches and no I/O.  Changes edit the in-memory leaves; xmap_sync()
 * then rewrites the dirty leaves and, if the set of leaves changed, rebuilds
 * the few index blocks above them, all inside the running transaction.
 *
 * Writes: blocks for holes are reserved first (in memory), the data is
 * copied into the cache, and only then are the bitmap, the map and the size
 * changed, in one hold of fs->ns.  A commit flushes the cache before it
 * writes the journal, so the metadata that makes new blocks visible is never
 * durable before their data (ext4's data=ordered).  A write that cannot get
 * space fails with ENOSPC before anything changes.  New and unwritten blocks
 * are written whole (zero-filled around the caller's bytes), which keeps
 * the invariant that bytes past EOF in an allocated block read as zeros.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <unistd.h>

#include "fs_internal.h"

#define MAX_DEPTH	8
#define BYPASS_MAX	(64u << 20)	/* largest piece read around the cache at once */

static uint32_t leaf_cap(const struct gs_fs *fs)
{
	return (fs->bs - GS_XNODE_OFF) / sizeof(struct gs_dextent);
}

static uint32_t idx_cap(const struct gs_fs *fs)
{
	return (fs->bs - GS_XNODE_OFF) / sizeof(struct gs_dxidx);
}

static uint64_t max_lblk(const struct gs_fs *fs)
{
	return GS_MAX_FILE_SIZE >> fs->bshift;
}

/* Metadata allocations cluster after the inode table, away from data runs. */
static uint64_t meta_goal(const struct gs_fs *fs)
{
	return fs->l.itable_start + fs->l.itable_blocks;
}

/* ---- in-memory leaves ---- */

static int leaf_reserve(struct xleaf *l, uint32_t n)
{
	uint32_t a;
	struct gs_ext *ex;

	if (n <= l->asz)
		return 0;
	a = l->asz ? l->asz * 2 : 4;
	while (a < n)
		a *= 2;
	if (a > l->cap)
		a = l->cap;
	ex = realloc(l->ex, a * sizeof(*ex));
	if (!ex)
		return -ENOMEM;
	l->ex = ex;
	l->asz = a;
	return 0;
}

/* Insert an empty leaf at index @at. */
static int leaf_new(struct gs_fs *fs, struct xmap *m, uint32_t at, struct xleaf **lp)
{
	if (m->nleaves == m->aleaves) {
		uint32_t a = m->aleaves ? m->aleaves * 2 : 2;
		struct xleaf *v = realloc(m->leaves, a * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->leaves = v;
		m->aleaves = a;
	}
	memmove(&m->leaves[at + 1], &m->leaves[at], (m->nleaves - at) * sizeof(*m->leaves));
	memset(&m->leaves[at], 0, sizeof(*m->leaves));
	m->leaves[at].cap = leaf_cap(fs);
	m->leaves[at].dirty = true;
	m->nleaves++;
	m->shape_dirty = true;
	*lp = &m->leaves[at];
	return 0;
}

static int leaf_drop(struct gs_fs *fs, struct xmap *m, uint32_t at)
{
	struct xleaf *l = &m->leaves[at];
	int ret = 0;

	if (l->blk) {
		mb_forget(fs, l->blk);
		ret = alloc_free(fs, l->blk, 1);
	}
	free(l->ex);
	memmove(&m->leaves[at], &m->leaves[at + 1], (m->nleaves - at - 1) * sizeof(*l));
	m->nleaves--;
	m->shape_dirty = true;
	return ret;
}

void xmap_free(struct xmap *m)
{
	for (uint32_t i = 0; i < m->nleaves; i++)
		free(m->leaves[i].ex);
	free(m->leaves);
	free(m->idx);
	memset(m, 0, sizeof(*m));
}

static uint64_t ext_end(const struct gs_ext *e)
{
	return e->lblk + e->len;
}

/* Last leaf whose first extent starts at or before @lblk (or leaf 0). */
static uint32_t leaf_for(const struct xmap *m, uint64_t lblk)
{
	uint32_t lo = 0, hi = m->nleaves;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->leaves[mid].ex[0].lblk <= lblk)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* First extent in @l that ends after @lblk. */
static uint32_t ext_after(const struct xleaf *l, uint64_t lblk)
{
	uint32_t lo = 0, hi = l->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ext_end(&l->ex[mid]) <= lblk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Position of the first extent ending after @lblk; false if none. */
static bool xpos(const struct xmap *m, uint64_t lblk, uint32_t *li, uint32_t *ei)
{
	uint32_t l;

	if (!m->nleaves)
		return false;
	l = leaf_for(m, lblk);
	*ei = ext_after(&m->leaves[l], lblk);
	if (*ei == m->leaves[l].n) {
		if (l + 1 >= m->nleaves)
			return false;
		l++;
		*ei = 0;
	}
	*li = l;
	return true;
}

const struct gs_ext *xmap_lookup(const struct xmap *m, uint64_t lblk, bool *inside)
{
	uint32_t li, ei;
	const struct gs_ext *e;

	if (!xpos(m, lblk, &li, &ei))
		return NULL;
	e = &m->leaves[li].ex[ei];
	*inside = e->lblk <= lblk;
	return e;
}

/* The extent ending at or before @lblk, if any. */
static const struct gs_ext *xmap_prev(const struct xmap *m, uint64_t lblk)
{
	uint32_t li, ei;

	if (!m->nleaves)
		return NULL;
	if (!xpos(m, lblk, &li, &ei)) {
		const struct xleaf *l = &m->leaves[m->nleaves - 1];

		return l->n ? &l->ex[l->n - 1] : NULL;
	}
	if (ei)
		return &m->leaves[li].ex[ei - 1];
	if (li)
		return &m->leaves[li - 1].ex[m->leaves[li - 1].n - 1];
	return NULL;
}

static bool mergeable(const struct gs_ext *a, const struct gs_ext *b)
{
	return ext_end(a) == b->lblk && a->pblk + a->len == b->pblk && a->flags == b->flags &&
	       (uint64_t)a->len + b->len <= GS_EXT_MAX_LEN;
}

static int ext_delete(struct gs_fs *fs, struct xmap *m, uint32_t li, uint32_t ei)
{
	struct xleaf *l = &m->leaves[li];

	memmove(&l->ex[ei], &l->ex[ei + 1], (l->n - ei - 1) * sizeof(*l->ex));
	l->n--;
	l->dirty = true;
	if (ei == 0)
		m->shape_dirty = true;	/* the leaf's key changed */
	return l->n ? 0 : leaf_drop(fs, m, li);
}

int xmap_insert(struct gs_fs *fs, struct gs_inode *ip, const struct gs_ext *e)
{
	struct xmap *m = &ip->map;
	struct gs_ext *prev = NULL, *next = NULL;
	uint32_t li, ei, nli = 0, nei = 0;
	struct xleaf *l;
	int ret;

	if (!m->nleaves) {
		ret = leaf_new(fs, m, 0, &l);
		if (!ret)
			ret = leaf_reserve(l, 1);
		if (ret < 0)
			return ret;
		l->ex[l->n++] = *e;
		m->mapped += e->len;
		return 0;
	}
	li = leaf_for(m, e->lblk);
	l = &m->leaves[li];
	ei = ext_after(l, e->lblk);
	if (ei)
		prev = &l->ex[ei - 1];
	else if (li)
		prev = &m->leaves[li - 1].ex[m->leaves[li - 1].n - 1];
	if (ei < l->n) {
		next = &l->ex[ei];
		nli = li;
		nei = ei;
	} else if (li + 1 < m->nleaves) {
		next = &m->leaves[li + 1].ex[0];
		nli = li + 1;
		nei = 0;
	}
	m->mapped += e->len;
	if (prev && mergeable(prev, e)) {
		prev->len += e->len;
		m->leaves[ei ? li : li - 1].dirty = true;
		if (next && mergeable(prev, next)) {
			prev->len += next->len;
			return ext_delete(fs, m, nli, nei);
		}
		return 0;
	}
	if (next && mergeable(e, next)) {
		next->lblk = e->lblk;
		next->pblk = e->pblk;
		next->len += e->len;
		m->leaves[nli].dirty = true;
		if (nei == 0)
			m->shape_dirty = true;
		return 0;
	}
	if (l->n == l->cap) {	/* split: the upper half moves to a new leaf */
		struct xleaf *nl;
		uint32_t half = l->n / 2;

		ret = leaf_new(fs, m, li + 1, &nl);
		if (ret < 0)
			return ret;
		l = &m->leaves[li];	/* leaves may have moved */
		ret = leaf_reserve(nl, l->n - half);
		if (ret < 0)
			return ret;
		memcpy(nl->ex, &l->ex[half], (l->n - half) * sizeof(*l->ex));
		nl->n = l->n - half;
		l->n = half;
		l->dirty = true;
		if (ei > half) {
			l = nl;
			ei -= half;
		}
	}
	ret = leaf_reserve(l, l->n + 1);
	if (ret < 0)
		return ret;
	memmove(&l->ex[ei + 1], &l->ex[ei], (l->n - ei) * sizeof(*l->ex));
	l->ex[ei] = *e;
	l->n++;
	l->dirty = true;
	if (ei == 0)
		m->shape_dirty = true;
	return 0;
}

int xmap_remove(struct gs_fs *fs, struct gs_inode *ip, uint64_t lblk, uint64_t count,
		bool free_blocks)
{
	struct xmap *m = &ip->map;
	uint64_t end;
	int ret;

	if (add_ovf(lblk, count, &end))
		end = UINT64_MAX;
	for (;;) {
		uint32_t li, ei;
		struct gs_ext *x, c;
		uint64_t head, tail, rm;

		if (!xpos(m, lblk, &li, &ei))
			return 0;
		x = &m->leaves[li].ex[ei];
		if (x->lblk >= end)
			return 0;
		c = *x;
		head = c.lblk < lblk ? lblk - c.lblk : 0;
		tail = ext_end(&c) > end ? ext_end(&c) - end : 0;
		rm = c.len - head - tail;
		if (free_blocks) {
			ret = alloc_free(fs, c.pblk + head, rm);
			if (ret < 0)
				return ret;
		}
		m->mapped -= rm;
		m->leaves[li].dirty = true;
		if (head && tail) {
			struct gs_ext t = { end, c.pblk + (end - c.lblk), (uint32_t)tail, c.flags };

			x->len = head;
			m->mapped -= tail;	/* xmap_insert adds it back */
			return xmap_insert(fs, ip, &t);
		} else if (head) {
			x->len = head;
		} else if (tail) {
			x->pblk += end - c.lblk;
			x->lblk = end;
			x->len = tail;
			if (ei == 0)
				m->shape_dirty = true;
			return 0;
		} else {
			ret = ext_delete(fs, m, li, ei);
			if (ret < 0)
				return ret;
		}
	}
}

/* ---- loading ---- */

static int ext_check(const struct gs_fs *fs, struct gs_inode *ip, const struct gs_ext *e,
		     uint64_t *last_end)
{
	uint64_t pend, lend;
	const struct gs_layout *l = &fs->l;

	if (!e->len || e->len > GS_EXT_MAX_LEN || e->flags & ~GS_EXT_UNWRITTEN ||
	    add_ovf(e->pblk, e->len, &pend) || pend > l->nblocks ||
	    e->pblk < l->itable_start + l->itable_blocks ||
	    (e->pblk < l->journal_start + l->journal_blocks && pend > l->journal_start) ||
	    add_ovf(e->lblk, e->len, &lend) || lend > max_lblk(fs) || e->lblk < *last_end) {
		gs_err("gstore: inode %" PRIu64 ": bad extent %" PRIu64 "+%u -> %" PRIu64, ip->ino,
		       e->lblk, e->len, e->pblk);
		return -EUCLEAN;
	}
	*last_end = lend;
	return 0;
}

struct loadctx {
	uint64_t last_end;
	uint64_t nodes;
};

static int load_entries_leaf(struct gs_fs *fs, struct gs_inode *ip, uint64_t blk,
			     const struct gs_dextent *de, uint32_t nr, struct loadctx *lc)
{
	struct xmap *m = &ip->map;
	struct xleaf *l;
	int ret = leaf_new(fs, m, m->nleaves, &l);

	if (!ret)
		ret = leaf_reserve(l, nr);
	if (ret < 0)
		return ret;
	l->blk = blk;
	l->dirty = false;
	for (uint32_t i = 0; i < nr; i++) {
		struct gs_ext e = { ld64(de[i].lblk), ld64(de[i].pblk), ld32(de[i].len),
				    ld32(de[i].flags) };

		ret = ext_check(fs, ip, &e, &lc->last_end);
		if (ret < 0)
			return ret;
		l->ex[l->n++] = e;
		m->mapped += e.len;
	}
	return 0;
}

static int idx_push(struct xmap *m, uint64_t blk)
{
	if (m->nidx == m->aidx) {
		uint32_t a = m->aidx ? m->aidx * 2 : 4;
		uint64_t *v = realloc(m->idx, a * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->idx = v;
		m->aidx = a;
	}
	m->idx[m->nidx++] = blk;
	return 0;
}

static int load_node(struct gs_fs *fs, struct gs_inode *ip, uint64_t blk, uint16_t depth,
		     struct loadctx *lc)
{
	struct mbuf *mb;
	const struct gs_dxhdr *h;
	uint32_t nr;
	uint8_t *copy;
	int ret;

	if (++lc->nodes > fs->l.nblocks)
		return -EUCLEAN;
	ret = mb_get(fs, blk, GS_BT_XNODE, &mb);
	if (ret < 0)
		return ret;
	h = (const void *)(mb->data + sizeof(struct gs_dblk));
	nr = ld16(h->nr);
	if (ld64(((struct gs_dblk *)mb->data)->owner) != ip->ino || ld16(h->depth) != depth ||
	    !nr || nr > (depth ? idx_cap(fs) : leaf_cap(fs))) {
		gs_err("gstore: inode %" PRIu64 ": extent node %" PRIu64 " is corrupt", ip->ino,
		       blk);
		return -EUCLEAN;
	}
	if (!depth)
		return load_entries_leaf(fs, ip, blk, (const void *)(mb->data + GS_XNODE_OFF), nr,
					 lc);
	ret = idx_push(&ip->map, blk);
	if (ret < 0)
		return ret;
	/* the buffer may be evicted while we recurse: copy the entries */
	copy = malloc((size_t)nr * sizeof(struct gs_dxidx));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, mb->data + GS_XNODE_OFF, (size_t)nr * sizeof(struct gs_dxidx));
	for (uint32_t i = 0; i < nr && !ret; i++)
		ret = load_node(fs, ip, ld64(((struct gs_dxidx *)copy)[i].child), depth - 1, lc);
	free(copy);
	return ret;
}

/* Under fs->ns. */
int xmap_load(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	const struct gs_dxroot *r = &ip->m.xroot;
	uint16_t depth = ld16(r->h.depth), nr = ld16(r->h.nr);
	struct loadctx lc = {0};
	int ret = 0;

	if (m->loaded)
		return 0;
	xmap_free(m);
	if (depth > MAX_DEPTH || (!depth && nr > GS_XROOT_NEXT) ||
	    (depth && (!nr || nr > GS_XROOT_NIDX))) {
		gs_err("gstore: inode %" PRIu64 ": bad extent root", ip->ino);
		return -EUCLEAN;
	}
	m->depth = depth;
	if (!depth) {
		if (nr)
			ret = load_entries_leaf(fs, ip, 0, (const void *)r->e, nr, &lc);
	} else {
		const struct gs_dxidx *ix = (const void *)r->e;

		for (uint32_t i = 0; i < nr && !ret; i++)
			ret = load_node(fs, ip, ld64(ix[i].child), depth - 1, &lc);
	}
	if (ret < 0) {
		xmap_free(m);
		return ret;
	}
	m->shape_dirty = false;
	for (uint32_t i = 0; i < m->nleaves; i++)
		m->leaves[i].dirty = false;
	m->loaded = true;
	return 0;
}

/* ---- writing the map back ---- */

static void encode_ext(struct gs_dextent *d, const struct gs_ext *e)
{
	d->lblk = st64(e->lblk);
	d->pblk = st64(e->pblk);
	d->len = st32(e->len);
	d->flags = st32(e->flags);
}

static int write_leaf(struct gs_fs *fs, struct gs_inode *ip, struct xleaf *l)
{
	struct mbuf *mb;
	struct gs_dxhdr *h;
	struct gs_dextent *d;
	int ret = mb_new(fs, l->blk, ip->ino, GS_BT_XNODE, &mb);

	if (ret < 0)
		return ret;
	h = (void *)(mb->data + sizeof(struct gs_dblk));
	h->depth = 0;
	h->nr = st16(l->n);
	d = (void *)(mb->data + GS_XNODE_OFF);
	for (uint32_t i = 0; i < l->n; i++)
		encode_ext(&d[i], &l->ex[i]);
	l->dirty = false;
	return 0;
}

struct ient {
	uint64_t key, blk;
};

static int rebuild_index(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	uint32_t cnt = m->nleaves, icap = idx_cap(fs), pool_i = 0, oldn = m->nidx;
	uint64_t *pool = m->idx;
	struct ient *v = malloc(cnt * sizeof(*v));
	uint16_t level = 1;
	int ret = 0;

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < cnt; i++)
		v[i] = (struct ient){ m->leaves[i].ex[0].lblk, m->leaves[i].blk };
	m->idx = NULL;
	m->nidx = m->aidx = 0;
	while (cnt > GS_XROOT_NIDX && !ret) {
		uint32_t groups = (cnt + icap - 1) / icap, out = 0;

		if (level >= MAX_DEPTH) {
			ret = -EFBIG;
			break;
		}
		for (uint32_t g = 0; g < groups && !ret; g++) {
			uint32_t first = g * icap, n = cnt - first < icap ? cnt - first : icap;
			struct mbuf *mb;
			struct gs_dxhdr *h;
			struct gs_dxidx *d;
			uint64_t blk;

			if (pool_i < oldn)
				blk = pool[pool_i++];
			else if ((ret = alloc_meta_block(fs, meta_goal(fs), &blk)) < 0)
				break;
			ret = idx_push(m, blk);
			if (!ret)
				ret = mb_new(fs, blk, ip->ino, GS_BT_XNODE, &mb);
			if (ret < 0)
				break;
			h = (void *)(mb->data + sizeof(struct gs_dblk));
			h->depth = st16(level);
			h->nr = st16(n);
			d = (void *)(mb->data + GS_XNODE_OFF);
			for (uint32_t i = 0; i < n; i++) {
				d[i].lblk = st64(v[first + i].key);
				d[i].child = st64(v[first + i].blk);
			}
			v[out++] = (struct ient){ v[first].key, blk };
		}
		cnt = out;
		level++;
	}
	if (!ret) {
		struct gs_dxidx *d = (void *)ip->m.xroot.e;

		memset(&ip->m.xroot, 0, sizeof(ip->m.xroot));
		ip->m.xroot.h.depth = st16(level);
		ip->m.xroot.h.nr = st16(cnt);
		for (uint32_t i = 0; i < cnt; i++) {
			d[i].lblk = st64(v[i].key);
			d[i].child = st64(v[i].blk);
		}
		m->depth = level;
	}
	for (; pool_i < oldn && !ret; pool_i++) {
		mb_forget(fs, pool[pool_i]);
		ret = alloc_free(fs, pool[pool_i], 1);
	}
	free(pool);
	free(v);
	return ret;
}

static void recount(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	/* an xattr block counts; an xattr object is a child with its own count */
	uint64_t n = m->mapped + m->nidx +
		     (ip->m.xattr_blk && !(ip->m.flags & GS_IFL_XATTR_OBJ) ? 1 : 0);

	for (uint32_t i = 0; i < m->nleaves; i++)
		n += m->leaves[i].blk != 0;
	ip->m.blocks = n;
}

/* Under fs->ns; the caller writes the inode afterwards. */
int xmap_sync(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	uint64_t total = 0;
	int ret = 0;

	for (uint32_t i = 0; i < m->nleaves; i++)
		total += m->leaves[i].n;
	if (total <= GS_XROOT_NEXT) {
		struct gs_dextent *d = (void *)ip->m.xroot.e;
		uint32_t k = 0;

		for (uint32_t i = 0; i < m->nleaves && !ret; i++) {
			if (m->leaves[i].blk) {
				mb_forget(fs, m->leaves[i].blk);
				ret = alloc_free(fs, m->leaves[i].blk, 1);
				m->leaves[i].blk = 0;
			}
		}
		for (uint32_t i = 0; i < m->nidx && !ret; i++) {
			mb_forget(fs, m->idx[i]);
			ret = alloc_free(fs, m->idx[i], 1);
		}
		m->nidx = 0;
		memset(&ip->m.xroot, 0, sizeof(ip->m.xroot));
		ip->m.xroot.h.nr = st16(total);
		for (uint32_t i = 0; i < m->nleaves; i++)
			for (uint32_t j = 0; j < m->leaves[i].n; j++)
				encode_ext(&d[k++], &m->leaves[i].ex[j]);
		for (uint32_t i = 0; i < m->nleaves; i++)
			m->leaves[i].dirty = false;
		m->depth = 0;
		m->shape_dirty = false;
		recount(fs, ip);
		return ret;
	}
	for (uint32_t i = 0; i < m->nleaves && !ret; i++) {
		struct xleaf *l = &m->leaves[i];

		if (!l->blk) {
			ret = alloc_meta_block(fs, meta_goal(fs), &l->blk);
			if (ret < 0)
				break;
			l->dirty = true;
			m->shape_dirty = true;
		}
		if (l->dirty)
			ret = write_leaf(fs, ip, l);
	}
	if (!ret && (m->shape_dirty || m->depth == 0))
		ret = rebuild_index(fs, ip);
	if (!ret)
		m->shape_dirty = false;
	recount(fs, ip);
	return ret;
}

int xmap_free_all(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	int ret = xmap_load(fs, ip);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < m->nleaves && !ret; i++) {
		struct xleaf *l = &m->leaves[i];

		for (uint32_t j = 0; j < l->n && !ret; j++)
			ret = alloc_free(fs, l->ex[j].pblk, l->ex[j].len);
		if (l->blk && !ret) {
			mb_forget(fs, l->blk);
			ret = alloc_free(fs, l->blk, 1);
		}
	}
	for (uint32_t i = 0; i < m->nidx && !ret; i++) {
		mb_forget(fs, m->idx[i]);
		ret = alloc_free(fs, m->idx[i], 1);
	}
	xmap_free(m);
	m->loaded = true;
	memset(&ip->m.xroot, 0, sizeof(ip->m.xroot));
	ip->m.blocks = 0;
	return ret;
}

/* ---- directory blocks ---- */

int dir_block_pblk(struct gs_fs *fs, struct gs_inode *ip, uint32_t bidx, uint64_t *pblk)
{
	const struct gs_ext *e;
	bool inside = false;
	int ret = xmap_load(fs, ip);

	if (ret < 0)
		return ret;
	e = xmap_lookup(&ip->map, bidx, &inside);
	if (!e || !inside || e->flags) {
		gs_err("gstore: directory %" PRIu64 ": block %u is not mapped", ip->ino, bidx);
		return -EUCLEAN;
	}
	*pblk = e->pblk + (bidx - e->lblk);
	return 0;
}

int dir_block_add(struct gs_fs *fs, struct gs_inode *ip, uint64_t *pblk)
{
	uint64_t bidx = ip->m.size >> fs->bshift;
	const struct gs_ext *prev;
	uint64_t goal = meta_goal(fs);
	struct gs_ext e;
	int ret = xmap_load(fs, ip);

	if (ret < 0)
		return ret;
	if (bidx >= UINT32_MAX)
		return -ENOSPC;
	prev = xmap_prev(&ip->map, bidx);
	if (prev)
		goal = prev->pblk + prev->len;
	ret = alloc_soft_meta_block(fs, goal, pblk);
	if (ret < 0)
		return ret;
	e = (struct gs_ext){ bidx, *pblk, 1, 0 };
	ret = xmap_insert(fs, ip, &e);
	if (!ret)
		ret = xmap_sync(fs, ip);
	return ret;
}

/* ---- the data path ---- */

static bool has_data(uint16_t type)
{
	return type == GS_T_ARRAY || type == GS_T_ND || type == GS_T_INTERNAL ||
	       type == GS_T_GRAPH;
}

/* Look the object up and load its map.  *ipp holds a reference. */
int data_get(struct gs_fs *fs, uint64_t ino, struct gs_inode **ipp)
{
	struct gs_inode *ip;
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (ret < 0)
		goto unlock;
	if (!has_data(ip->m.type))
		ret = ip->m.type == GS_T_DIR ? -EISDIR : -EINVAL;
	if (!ret)
		ret = xmap_load(fs, ip);
	if (ret < 0)
		iput(fs, ip);
	else
		*ipp = ip;
unlock:
	pthread_mutex_unlock(&fs->ns);
	return ret;
}

void data_put(struct gs_fs *fs, struct gs_inode *ip)
{
	pthread_mutex_lock(&fs->ns);
	iput(fs, ip);
	pthread_mutex_unlock(&fs->ns);
}

/*
 * Nothing of this object can be dirty in the cache when every write to it
 * finished before a completed full flush began: the device then holds its
 * data, and a read may go around the cache.
 */
static bool data_clean(struct gs_fs *fs, struct gs_inode *ip)
{
	uint64_t w = __atomic_load_n(&ip->data_dirty, __ATOMIC_ACQUIRE);

	return !w || __atomic_load_n(&fs->flush_done, __ATOMIC_ACQUIRE) >= w;
}

static uint32_t dio_align(const struct gs_fs *fs)
{
	return fs->lba < 4096 ? 4096 : fs->lba;
}

/*
 * Read policy for a mapped, written piece of a clean object.  Reads of a
 * cache line or more, and every read of an O_DIRECT opener, go around the
 * cache on the calling thread (gs_q_pread_sync: one system call, no poller
 * hand-off), so a 4 KiB O_DIRECT read moves 4 KiB, not a 64 KiB line fill.
 * Smaller cached reads go through the cache: a hit is far cheaper than a
 * device trip, and the line brought in serves its neighbours; so do large
 * misaligned ones (only O_DIRECT readers pay for a bounce buffer).
 */
static bool can_bypass(struct gs_fs *fs, struct gs_inode *ip, const void *buf, uint64_t dev,
		       uint64_t len, unsigned flags)
{
	uint32_t a = dio_align(fs);

	if (flags & GS_FS_READ_CACHED)
		return false;
	if (!(flags & GS_FS_READ_DIRECT) &&
	    (len < fs->line || (uintptr_t)buf % a || dev % a || len % a))
		return false;
	return len <= BYPASS_MAX && data_clean(fs, ip);
}

/*
 * Read [dev, dev + len) around the cache.  Aligned pieces land in @buf
 * directly; others read the covering aligned blocks into a bounce buffer.
 */
static ssize_t read_around(struct gs_fs *fs, uint8_t *buf, uint64_t len, uint64_t dev)
{
	uint32_t a = dio_align(fs);
	uint64_t lo, hi;
	ssize_t r;
	void *b;

	if (!((uintptr_t)buf % a) && !(dev % a) && !(len % a))
		return gs_q_pread_sync(fs->q, buf, len, dev);
	lo = dev - dev % a;
	hi = (dev + len + a - 1) / a * a;
	if (posix_memalign(&b, a, hi - lo))
		return -ENOMEM;
	r = gs_q_pread_sync(fs->q, b, hi - lo, lo);
	if (r >= 0 && (uint64_t)r < dev + len - lo)
		r = -EIO;
	if (r >= 0) {
		memcpy(buf, (uint8_t *)b + (dev - lo), len);
		r = (ssize_t)len;
	}
	free(b);
	return r;
}

ssize_t gs_fs_pread(struct gs_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off,
		    unsigned flags)
{
	struct gs_inode *ip;
	uint8_t *p = buf;
	uint64_t size, n, done = 0;
	int ret;

	if (flags & ~(unsigned)(GS_FS_READ_DIRECT | GS_FS_READ_CACHED) ||
	    (flags & GS_FS_READ_DIRECT && flags & GS_FS_READ_CACHED))
		return -EINVAL;
	if (len > (1ULL << 31))
		len = 1ULL << 31;
	ret = data_get(fs, ino, &ip);
	if (ret < 0)
		return ret;
	pthread_rwlock_rdlock(&ip->rw);
	size = ip->m.size;
	n = off >= size ? 0 : (size - off < len ? size - off : len);
	while (done < n) {
		uint64_t pos = off + done, lblk = pos >> fs->bshift, chunk;
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, lblk, &inside);

		if (!e || !inside) {
			uint64_t until = e ? e->lblk << fs->bshift : UINT64_MAX;

			chunk = until - pos < n - done ? until - pos : n - done;
			memset(p + done, 0, chunk);
		} else {
			uint64_t rend = ext_end(e) << fs->bshift;
			uint64_t dev = ((e->pblk + (lblk - e->lblk)) << fs->bshift) +
				       (pos & (fs->bs - 1));
			ssize_t r;

			chunk = rend - pos < n - done ? rend - pos : n - done;
			if (e->flags & GS_EXT_UNWRITTEN) {
				memset(p + done, 0, chunk);
				r = 0;
			} else if (can_bypass(fs, ip, p + done, dev, chunk, flags)) {
				r = read_around(fs, p + done, chunk, dev);
				__atomic_add_fetch(&fs->n_direct_reads, 1, __ATOMIC_RELAXED);
			} else {
				r = gs_cache_read(fs->c, p + done, chunk, dev);
			}
			if (r < 0) {
				ret = (int)r;
				break;
			}
		}
		done += chunk;
	}
	pthread_rwlock_unlock(&ip->rw);
	data_put(fs, ip);
	if (ret < 0 && !done)
		return ret;
	__atomic_add_fetch(&fs->n_reads, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->n_read_bytes, done, __ATOMIC_RELAXED);
	return (ssize_t)done;
}

int64_t gs_fs_lseek(struct gs_fs *fs, uint64_t ino, uint64_t off, int whence)
{
	struct gs_inode *ip;
	uint64_t lb = off >> fs->bshift, pos;
	int64_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = data_get(fs, ino, &ip);
	if (ret < 0)
		return ret;
	pthread_rwlock_rdlock(&ip->rw);
	for (;;) {
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, lb, &inside);
		bool data = e && inside && !(e->flags & GS_EXT_UNWRITTEN);

		if (data == (whence == SEEK_DATA) || (!e && whence == SEEK_HOLE)) {
			pos = lb << fs->bshift > off ? lb << fs->bshift : off;
			break;
		}
		if (!e) {
			pos = UINT64_MAX;	/* SEEK_DATA: none */
			break;
		}
		lb = inside ? ext_end(e) : e->lblk;
	}
	if (off >= ip->m.size || (whence == SEEK_DATA && pos >= ip->m.size))
		ret = -ENXIO;
	else
		ret = (int64_t)(pos < ip->m.size ? pos : ip->m.size);
	pthread_rwlock_unlock(&ip->rw);
	data_put(fs, ip);
	return ret;
}

ssize_t gs_fs_read(struct gs_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off)
{
	return gs_fs_pread(fs, ino, buf, len, off, 0);
}

enum { SEG_MAPPED, SEG_NEW, SEG_UNWRITTEN };

struct seg {
	uint64_t lblk, n, pblk;
	int kind;
};

struct segv {
	uint32_t n, cap;
	struct seg *v;
};

static int seg_push(struct segv *s, struct seg g)
{
	if (s->n == s->cap) {
		uint32_t c = s->cap ? s->cap * 2 : 8;
		struct seg *v = realloc(s->v, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = c;
	}
	s->v[s->n++] = g;
	return 0;
}

static void unreserve_new(struct gs_fs *fs, struct segv *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->v[i].kind == SEG_NEW)
			alloc_unreserve(fs, s->v[i].pblk, s->v[i].n);
}

/*
 * Split [b0, b1) into mapped, unwritten and new segments, reserving blocks
 * for the holes (with @contig, each hole in one run if the allocator has
 * one).  Under fs->ns.  On failure nothing stays reserved.
 */
static int plan(struct gs_fs *fs, struct gs_inode *ip, uint64_t b0, uint64_t b1,
		struct segv *s, bool contig)
{
	uint64_t lb = b0, goal;
	const struct gs_ext *prev = xmap_prev(&ip->map, b0);
	/* an object whose data is metadata (an N-D index, a graph's root slots,
	 * GS_IFL_META objects): on a pool, from the mirrored zone */
	unsigned how = (ip->m.flags & GS_IFL_META) || ip->m.type == GS_T_ND ||
		       ip->m.type == GS_T_GRAPH ? ALLOC_ZONE : 0;
	int ret = 0;

	goal = prev ? prev->pblk + prev->len + (b0 - ext_end(prev)) : fs->al.cursor;
	while (lb < b1 && !ret) {
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, lb, &inside);

		if (e && inside) {
			uint64_t n = (ext_end(e) < b1 ? ext_end(e) : b1) - lb;

			ret = seg_push(s, (struct seg){ lb, n, e->pblk + (lb - e->lblk),
				      e->flags & GS_EXT_UNWRITTEN ? SEG_UNWRITTEN : SEG_MAPPED });
			goal = e->pblk + (lb - e->lblk) + n;
			lb += n;
			continue;
		}
		uint64_t hend = e && e->lblk < b1 ? e->lblk : b1;

		while (lb < hend && !ret) {
			uint64_t blk, got;

			ret = -ENOSPC;
			if (contig)
				ret = alloc_reserve(fs, goal, hend - lb, how, true, &blk, &got);
			if (ret == -ENOSPC)
				ret = alloc_reserve(fs, goal, hend - lb, how, false, &blk, &got);
			if (ret < 0)
				break;
			ret = seg_push(s, (struct seg){ lb, got, blk, SEG_NEW });
			if (ret < 0) {
				alloc_unreserve(fs, blk, got);
				break;
			}
			goal = blk + got;
			lb += got;
		}
	}
	if (ret < 0) {
		unreserve_new(fs, s);
		s->n = 0;
	}
	return ret;
}

/* Copy user bytes [off, end) that fall into segment @g into the cache. */
static int write_seg(struct gs_fs *fs, const struct seg *g, const uint8_t *buf, uint64_t off,
		     uint64_t end, uint8_t *tmp)
{
	uint64_t sstart = g->lblk << fs->bshift, send = (g->lblk + g->n) << fs->bshift;
	uint64_t a = off > sstart ? off : sstart, b = end < send ? end : send;
	uint64_t dev = (g->pblk << fs->bshift) + (a - sstart);
	ssize_t r;

	if (g->kind == SEG_MAPPED) {
		r = gs_cache_write(fs->c, buf + (a - off), b - a, dev);
		return r < 0 ? (int)r : 0;
	}
	/* whole blocks: zero around the caller's bytes */
	while (a < b) {
		uint64_t bstart = a & ~(uint64_t)(fs->bs - 1), bend = bstart + fs->bs;
		uint64_t bdev = dev - (a - bstart);

		if (a == bstart && b >= bend) {	/* a run of full blocks */
			uint64_t full = (b - a) & ~(uint64_t)(fs->bs - 1);

			r = gs_cache_write(fs->c, buf + (a - off), full, bdev);
			if (r < 0)
				return (int)r;
			a += full;
			dev += full;
			continue;
		}
		uint64_t e = b < bend ? b : bend;

		memset(tmp, 0, fs->bs);
		memcpy(tmp + (a - bstart), buf + (a - off), e - a);
		r = gs_cache_write(fs->c, tmp, fs->bs, bdev);
		if (r < 0)
			return (int)r;
		dev += e - a;
		a = e;
	}
	return 0;
}

/* Make the planned segments part of the object.  Under fs->ns. */
static int apply_segs(struct gs_fs *fs, struct gs_inode *ip, struct segv *s, uint32_t flags)
{
	int ret = 0;

	for (uint32_t i = 0; i < s->n && !ret; i++) {
		struct seg *g = &s->v[i];
		struct gs_ext e = { g->lblk, g->pblk, (uint32_t)g->n, flags };

		if (g->kind == SEG_NEW) {
			ret = alloc_commit(fs, g->pblk, g->n);
			if (!ret)
				ret = xmap_insert(fs, ip, &e);
		} else if (g->kind == SEG_UNWRITTEN && !flags) {
			ret = xmap_remove(fs, ip, g->lblk, g->n, false);
			if (!ret)
				ret = xmap_insert(fs, ip, &e);
		}
	}
	return ret;
}

static void mark_data_dirty(struct gs_fs *fs, struct gs_inode *ip)
{
	uint64_t w = __atomic_load_n(&fs->flush_seq, __ATOMIC_ACQUIRE) + 1;

	__atomic_store_n(&ip->data_dirty, w, __ATOMIC_RELEASE);
}

static ssize_t write_once(struct gs_fs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off)
{
	struct gs_inode *ip;
	struct segv s = {0};
	uint64_t end, b0, b1;
	uint8_t *tmp = NULL;
	bool meta;
	int ret;

	if (!len)
		return 0;
	if (fs->rdonly)
		return -EROFS;
	if (fs->error)
		return -EIO;
	if (len > (1ULL << 31))
		len = 1ULL << 31;
	if (add_ovf(off, len, &end) || end > GS_MAX_FILE_SIZE)
		return -EFBIG;
	jnl_op_begin(fs);
	ret = data_get(fs, ino, &ip);
	if (ret < 0)
		return ret;
	pthread_rwlock_wrlock(&ip->rw);
	b0 = off >> fs->bshift;
	b1 = (end + fs->bs - 1) >> fs->bshift;
	pthread_mutex_lock(&fs->ns);
	ret = ip->freed ? -ENOENT : plan(fs, ip, b0, b1, &s, false);
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0)
		goto unlock;
	meta = end > ip->m.size;
	for (uint32_t i = 0; i < s.n; i++)
		meta |= s.v[i].kind != SEG_MAPPED;
	if (meta && !(tmp = malloc(fs->bs)))
		ret = -ENOMEM;
	for (uint32_t i = 0; i < s.n && !ret; i++)
		ret = write_seg(fs, &s.v[i], buf, off, end, tmp);
	mark_data_dirty(fs, ip);
	pthread_mutex_lock(&fs->ns);
	if (!ret && meta && !alloc_map_room(fs))
		ret = -ENOSPC;	/* the map update could not finish: change nothing */
	if (ret < 0) {
		unreserve_new(fs, &s);
		pthread_mutex_unlock(&fs->ns);
		goto unlock;
	}
	ret = apply_segs(fs, ip, &s, 0);
	if (!ret && meta)
		ret = xmap_sync(fs, ip);
	if (!ret) {
		if (end > ip->m.size)
			ip->m.size = end;
		itouch(ip, true, true);
		ret = iwrite(fs, ip);
	}
	if (ret < 0)
		fs_fail(fs, ret, "write");
	pthread_mutex_unlock(&fs->ns);
unlock:
	pthread_rwlock_unlock(&ip->rw);
	data_put(fs, ip);
	free(tmp);
	free(s.v);
	if (ret < 0)
		return ret;
	__atomic_add_fetch(&fs->n_writes, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->n_write_bytes, len, __ATOMIC_RELAXED);
	return (ssize_t)len;
}

int array_alloc_holes(struct gs_fs *fs, struct gs_inode *ip, uint64_t b0, uint64_t b1)
{
	struct segv s = {0};
	bool any = false;
	int ret = plan(fs, ip, b0, b1, &s, true);

	if (!ret && !alloc_map_room(fs)) {
		unreserve_new(fs, &s);
		ret = -ENOSPC;
	}
	for (uint32_t i = 0; i < s.n; i++)
		any |= s.v[i].kind == SEG_NEW;
	if (ret < 0 || !any)
		goto out;	/* nothing reserved, nothing changed */
	ret = apply_segs(fs, ip, &s, GS_EXT_UNWRITTEN);
	if (!ret)
		ret = xmap_sync(fs, ip);
	if (!ret) {
		itouch(ip, false, true);
		ret = iwrite(fs, ip);
	}
	if (ret < 0)
		fs_fail(fs, ret, "lease allocation");
out:
	free(s.v);
	return ret;
}

int xmap_convert(struct gs_fs *fs, struct gs_inode *ip, uint64_t b0, uint64_t b1)
{
	uint64_t lb = b0;
	int ret = 0;

	while (lb < b1 && !ret) {
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, lb, &inside);
		uint64_t n;

		if (!e || e->lblk >= b1)
			break;
		if (!inside) {
			lb = e->lblk;
			continue;
		}
		n = (ext_end(e) < b1 ? ext_end(e) : b1) - lb;
		if (e->flags & GS_EXT_UNWRITTEN) {
			struct gs_ext x = { lb, e->pblk + (lb - e->lblk), (uint32_t)n, 0 };

			ret = xmap_remove(fs, ip, lb, n, false);
			if (!ret)
				ret = xmap_insert(fs, ip, &x);
		}
		lb += n;
	}
	return ret;
}

/* Zero [from, to) inside one block of the object, if that block holds data. */
static int zero_partial(struct gs_fs *fs, struct gs_inode *ip, uint64_t from, uint64_t to)
{
	bool inside = false;
	const struct gs_ext *e = xmap_lookup(&ip->map, from >> fs->bshift, &inside);
	static const uint8_t zero[GS_MAX_BLOCK];
	uint64_t dev;
	ssize_t r;

	if (from >= to || !e || !inside || e->flags & GS_EXT_UNWRITTEN)
		return 0;
	dev = ((e->pblk + ((from >> fs->bshift) - e->lblk)) << fs->bshift) + (from & (fs->bs - 1));
	r = gs_cache_write(fs->c, zero, to - from, dev);
	mark_data_dirty(fs, ip);
	return r < 0 ? (int)r : 0;
}

/* Under ip->rw (write) and fs->ns.  The caller writes the inode. */
int array_truncate(struct gs_fs *fs, struct gs_inode *ip, uint64_t size)
{
	int ret = xmap_load(fs, ip);

	if (ret < 0)
		return ret;
	if (size < ip->m.size) {
		uint64_t first = (size + fs->bs - 1) >> fs->bshift;

		ret = xmap_remove(fs, ip, first, UINT64_MAX - first, true);
		if (!ret && (size & (fs->bs - 1)))
			ret = zero_partial(fs, ip, size, (size | (fs->bs - 1)) + 1);
		if (!ret)
			ret = xmap_sync(fs, ip);
		if (ret < 0)
			return ret;
	}
	if (size != ip->m.size) {
		ip->m.size = size;
		itouch(ip, true, true);
	}
	return 0;
}

static int fallocate_once(struct gs_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	struct gs_inode *ip;
	struct segv s = {0};
	uint64_t end;
	int ret;

	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE &&
	    mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (!len)
		return -EINVAL;
	if (add_ovf(off, len, &end) || end > GS_MAX_FILE_SIZE)
		return -EFBIG;
	if (fs->rdonly)
		return -EROFS;
	if (fs->error)
		return -EIO;
	jnl_op_begin(fs);
	ret = data_get(fs, ino, &ip);
	if (ret < 0)
		return ret;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		lease_wrlock(fs, ip, off, end);	/* the range's blocks go away */
	else
		pthread_rwlock_wrlock(&ip->rw);
	pthread_mutex_lock(&fs->ns);
	if (ip->freed) {
		ret = -ENOENT;
		goto unlock;
	}
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		uint64_t a = (off + fs->bs - 1) >> fs->bshift, b = end >> fs->bshift;
		uint64_t hb = (off | (fs->bs - 1)) + 1;
		bool inside = false;
		const struct gs_ext *e = xmap_lookup(&ip->map, a, &inside);

		/* only splitting an extent in two can need a new map block */
		if (b > a && e && inside && e->lblk < a && ext_end(e) > b && !alloc_map_room(fs)) {
			ret = -ENOSPC;
			goto unlock;
		}

		if (b > a)
			ret = xmap_remove(fs, ip, a, b - a, true);
		if (!ret && (off >> fs->bshift) == ((end - 1) >> fs->bshift) && b <= a)
			ret = zero_partial(fs, ip, off, end);	/* inside one block */
		else if (!ret) {
			if (off & (fs->bs - 1))
				ret = zero_partial(fs, ip, off, hb);
			if (!ret && (end & (fs->bs - 1)))
				ret = zero_partial(fs, ip, end & ~(uint64_t)(fs->bs - 1), end);
		}
		itouch(ip, true, true);
	} else {
		ret = plan(fs, ip, off >> fs->bshift, (end + fs->bs - 1) >> fs->bshift, &s, false);
		if (!ret && !alloc_map_room(fs)) {
			unreserve_new(fs, &s);
			ret = -ENOSPC;
		}
		if (ret < 0)
			goto unlock;	/* ENOSPC: nothing reserved, nothing changed */
		ret = apply_segs(fs, ip, &s, GS_EXT_UNWRITTEN);
		if (!ret && !(mode & FALLOC_FL_KEEP_SIZE) && end > ip->m.size)
			ip->m.size = end;
		itouch(ip, false, true);
	}
	if (!ret)
		ret = xmap_sync(fs, ip);
	if (!ret)
		ret = iwrite(fs, ip);
	if (ret < 0)
		fs_fail(fs, ret, "fallocate");
unlock:
	pthread_mutex_unlock(&fs->ns);
	pthread_rwlock_unlock(&ip->rw);
	data_put(fs, ip);
	free(s.v);
	return ret;
}

int gs_fs_fsync(struct gs_fs *fs, uint64_t ino, int datasync)
{
	struct gs_stat st;
	int ret = gs_fs_getattr(fs, ino, &st);

	if (ret < 0)
		return ret;
	__atomic_add_fetch(&fs->n_fsyncs, 1, __ATOMIC_RELAXED);
	/* Committing the running transaction covers data and metadata alike;
	 * a data-only sync still needs the allocations of its blocks. */
	(void)datasync;
	return jnl_sync(fs, true);
}

ssize_t gs_fs_write(struct gs_fs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off)
{
	ssize_t ret = write_once(fs, ino, buf, len, off);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = write_once(fs, ino, buf, len, off);
	return ret;
}

int gs_fs_fallocate(struct gs_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	int ret = fallocate_once(fs, ino, mode, off, len);

	/* out of space while freed blocks wait for a checkpoint: take it, retry */
	if (ret == -ENOSPC && fs_reclaim(fs) > 0)
		ret = fallocate_once(fs, ino, mode, off, len);
	return ret;
}
