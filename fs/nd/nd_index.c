// SPDX-License-Identifier: MIT
/*
 * N-D spaces: the superblock and the N-level index (format: uapi/gstore_nd_fmt.h).
 *
 * Level i of the index has one entry per block along dimension i, so a
 * lookup reads ndims entries, one per level.  Nodes come into existence on
 * the first write below them, at the end of the index area, and are never
 * moved or freed; bytes never written read as zero, which is what "no node"
 * and "no block" are.  All of it runs under nd->imu.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "nd_internal.h"

static int meta_read(struct gs_nd *nd, void *buf, size_t len, uint64_t off)
{
	ssize_t r = nd->st->ops->meta_read(nd->st, buf, len, off);

	if (r < 0)
		return r;
	/* past the end of the index area: never written, zero */
	if ((size_t)r < len)
		memset((char *)buf + r, 0, len - r);
	return 0;
}

static int meta_write(struct gs_nd *nd, const void *buf, size_t len, uint64_t off)
{
	ssize_t r = nd->st->ops->meta_write(nd->st, buf, len, off);

	if (r < 0)
		return r;
	return (size_t)r == len ? 0 : -EIO;
}

void nd_sb_encode(const struct gs_nd *nd, struct gs_nd_disk_super *d)
{
	const struct nd_layout *L = &nd->L;

	memset(d, 0, sizeof(*d));
	d->magic = htole32(GS_ND_MAGIC);
	d->version = htole32(GS_ND_VERSION);
	d->dtype = htole32(L->dtype);
	d->elem_size = htole32(L->esize);
	d->ndims = htole32(L->ndims);
	for (uint32_t i = 0; i < L->ndims; i++) {
		d->shape[i] = htole64(L->shape[i]);
		d->bb[i] = htole64(L->bb[i]);
	}
	d->block_stride = htole64(nd->st->stride);
	d->data_ino = htole64(nd->data_ino);
	d->root = htole64(nd->root);
	d->index_end = htole64(nd->index_end);
	d->nslots = htole64(nd->nslots);
	d->slot_bytes = htole64(nd->st->slot_bytes);
	d->crc = htole32(gs_crc32c(0, d, sizeof(*d)));
}

int nd_sb_decode(const struct gs_nd_disk_super *d, struct gs_nd_params *p, struct nd_sbx *x)
{
	struct gs_nd_disk_super t = *d;
	uint32_t crc = le32toh(t.crc);

	if (le32toh(t.magic) != GS_ND_MAGIC)
		return -ENODATA;
	t.crc = 0;
	if (gs_crc32c(0, &t, sizeof(t)) != crc || le32toh(t.version) != GS_ND_VERSION)
		return -EIO;
	memset(p, 0, sizeof(*p));
	p->dtype = le32toh(t.dtype);
	p->elem_size = le32toh(t.elem_size);
	p->ndims = le32toh(t.ndims);
	p->flags = le32toh(t.flags);
	if (p->ndims < 1 || p->ndims > ND_MAXD)
		return -EIO;
	for (uint32_t i = 0; i < p->ndims; i++) {
		p->shape[i] = le64toh(t.shape[i]);
		p->bb[i] = le64toh(t.bb[i]);
	}
	x->root = le64toh(t.root);
	x->index_end = le64toh(t.index_end);
	x->nslots = le64toh(t.nslots);
	x->data_ino = le64toh(t.data_ino);
	x->stride = le64toh(t.block_stride);
	x->slot_bytes = le64toh(t.slot_bytes);
	x->dev_align = le32toh(t.dev_align);
	if (x->index_end < GS_ND_SB_SIZE ||
	    (x->root && (x->root < GS_ND_SB_SIZE || x->root >= x->index_end)) ||
	    x->slot_bytes < x->stride || (x->dev_align & (x->dev_align - 1)))
		return -EIO;
	/* blocks placed by device alignment inside padded slots (spaces made
	 * before leases addressed blocks by object offset): not readable now */
	if (x->slot_bytes != x->stride)
		return -EOPNOTSUPP;
	return 0;
}

static int sb_write_locked(struct gs_nd *nd)
{
	struct gs_nd_disk_super d;
	int ret;

	nd_sb_encode(nd, &d);
	ret = meta_write(nd, &d, sizeof(d), 0);
	if (!ret)
		nd->sb_dirty = false;
	return ret;
}

int nd_sb_write_if_dirty(struct gs_nd *nd)
{
	int ret = 0;

	pthread_mutex_lock(&nd->imu);
	if (nd->sb_dirty)
		ret = sb_write_locked(nd);
	pthread_mutex_unlock(&nd->imu);
	return ret;
}

static int entry_read(struct gs_nd *nd, uint64_t node, uint64_t i, uint64_t *v)
{
	uint64_t le;
	int ret = meta_read(nd, &le, sizeof(le), node + i * sizeof(le));

	*v = le64toh(le);
	return ret;
}

/* A child pointer must land inside the index area; anything else is corruption. */
static bool node_ok(const struct gs_nd *nd, uint64_t node, uint32_t level)
{
	return node >= GS_ND_SB_SIZE && node + nd->L.nb[level] * 8 <= nd->index_end;
}

/* ---- entries waiting in memory (under imu) ---- */

static uint32_t phash_of(const struct gs_nd *nd, uint64_t bid)
{
	return (uint32_t)((bid * 0x9e3779b97f4a7c15ULL) >> 32) & nd->phmask;
}

static const struct nd_pend *pend_find(const struct gs_nd *nd, uint64_t bid)
{
	if (!nd->npend)
		return NULL;
	for (uint32_t h = phash_of(nd, bid);; h = (h + 1) & nd->phmask) {
		uint64_t i = nd->phash[h];

		if (!i)
			return NULL;
		if (nd->pend[i - 1].bid == bid)
			return &nd->pend[i - 1];
	}
}

static void phash_rebuild(struct gs_nd *nd)
{
	memset(nd->phash, 0, (nd->phmask + 1) * sizeof(*nd->phash));
	for (uint32_t i = 0; i < nd->npend; i++) {
		uint32_t h = phash_of(nd, nd->pend[i].bid);

		while (nd->phash[h])
			h = (h + 1) & nd->phmask;
		nd->phash[h] = i + 1;
	}
}

/* Room for @n more (the table stays at most half full). */
static int pend_reserve(struct gs_nd *nd, uint32_t n)
{
	uint32_t c = nd->cpend ? nd->cpend : 64;
	struct nd_pend *p;
	uint64_t *h;

	if (nd->npend + n <= nd->cpend)
		return 0;
	while (c < nd->npend + n)
		c *= 2;
	p = realloc(nd->pend, c * sizeof(*p));
	if (!p)
		return -ENOMEM;
	nd->pend = p;
	h = calloc(2 * (size_t)c, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(nd->phash);
	nd->phash = h;
	nd->phmask = 2 * c - 1;
	nd->cpend = c;
	phash_rebuild(nd);
	return 0;
}

int nd_index_defer(struct gs_nd *nd, const uint64_t *bid, const uint64_t *slot, unsigned n)
{
	bool full;
	int ret;

	pthread_mutex_lock(&nd->imu);
	ret = pend_reserve(nd, n);
	for (unsigned k = 0; k < n && !ret; k++) {
		uint32_t h = phash_of(nd, bid[k]);

		while (nd->phash[h])
			h = (h + 1) & nd->phmask;
		nd->pend[nd->npend] = (struct nd_pend){ bid[k], slot[k] };
		nd->phash[h] = ++nd->npend;
	}
	full = nd->npend >= ND_PEND_MAX;
	pthread_mutex_unlock(&nd->imu);
	return ret ? ret : full ? nd_index_flush(nd) : 0;
}

void nd_index_fini(struct gs_nd *nd)
{
	free(nd->pend);
	free(nd->phash);
}

int nd_index_lookup(struct gs_nd *nd, uint64_t bid, uint64_t *slot1)
{
	uint64_t bc[ND_MAXD], node, v = 0;
	const struct nd_pend *pd;
	int ret = 0;

	nd_bcoord(&nd->L, bid, bc);
	pthread_mutex_lock(&nd->imu);
	pd = pend_find(nd, bid);
	if (pd) {
		*slot1 = pd->slot + 1;
		pthread_mutex_unlock(&nd->imu);
		return 0;
	}
	node = nd->root;
	for (uint32_t i = 0; i < nd->L.ndims && node; i++) {
		if (!node_ok(nd, node, i)) {
			ret = -EIO;
			break;
		}
		ret = entry_read(nd, node, bc[i], &v);
		if (ret)
			break;
		node = v;
	}
	if (!ret && !node)
		v = 0;
	if (!ret && v > nd->nslots)
		ret = -EIO;
	pthread_mutex_unlock(&nd->imu);
	*slot1 = ret ? 0 : v;
	return ret;
}

/* Room for a level-@level node at the end of the index area. */
static uint64_t node_alloc(struct gs_nd *nd, uint32_t level)
{
	uint64_t off = nd->index_end;

	nd->index_end += nd->L.nb[level] * 8;
	nd->sb_dirty = true;
	return off;
}

/* An index entry to write once the commit that covers it is done. */
struct ixw {
	uint64_t off;			/* byte offset in the index area */
	uint64_t v;
};

static bool ixw_find(const struct ixw *w, unsigned nw, uint64_t off, uint64_t *v)
{
	for (unsigned i = nw; i--;)
		if (w[i].off == off) {
			*v = w[i].v;
			return true;
		}
	return false;
}

/*
 * Place block @bid's path: nodes that do not exist yet get room at the end of
 * the index area (in memory: root, index_end), and the entries to write are
 * appended to @w, parents before children.  Entries planned earlier in the
 * same batch are taken from @w.  Under imu.
 */
static int plan_one(struct gs_nd *nd, uint64_t bid, uint64_t slot, struct ixw *w, unsigned *nw)
{
	uint64_t bc[ND_MAXD], node, v;
	uint32_t n = nd->L.ndims;
	int ret;

	nd_bcoord(&nd->L, bid, bc);
	if (!nd->root)
		nd->root = node_alloc(nd, 0);	/* the superblock points at it */
	node = nd->root;
	for (uint32_t i = 0; i + 1 < n; i++) {
		uint64_t at = node + bc[i] * 8;

		if (!ixw_find(w, *nw, at, &v)) {
			ret = entry_read(nd, node, bc[i], &v);
			if (ret)
				return ret;
		}
		if (v && !node_ok(nd, v, i + 1))
			return -EIO;
		if (!v) {
			v = node_alloc(nd, i + 1);
			w[(*nw)++] = (struct ixw){ at, v };
		}
		node = v;
	}
	w[(*nw)++] = (struct ixw){ node + bc[n - 1] * 8, slot + 1 };
	return 0;
}

/*
 * The durability rule (the same as data=ordered for arrays): no index entry
 * may reach the device before what it points at is durable - the slot's
 * blocks in the data object (settled by the write lease's end, committed by
 * the store), the block's data, and the superblock's nslots / index_end /
 * root that make the entry valid.  The fs cache writes the index back
 * whenever it likes, so the entries are not even handed to it before that:
 * plan the nodes, write the superblock, let the store commit (data flushed,
 * allocation journaled), then write the entries.  A crash before the last
 * step loses the deferred blocks (never acknowledged: gs_nd_sync commits
 * again after this) and leaks their slots and any nodes planned; it never
 * leaves an entry pointing at an unwritten or reused slot, or at a node
 * beyond index_end.  Until their entries are written the deferred blocks
 * stay in nd->pend, where lookups find them.  rmu makes flushes take turns,
 * so two never plan the same missing node twice; batches that defer entries
 * meanwhile append behind the ones being recorded.
 */
int nd_index_flush(struct gs_nd *nd)
{
	unsigned nw = 0, n;
	struct ixw *w = NULL;
	int ret = 0;

	pthread_mutex_lock(&nd->rmu);
	pthread_mutex_lock(&nd->imu);
	n = nd->npend;
	if (!n)
		goto unlock;
	w = malloc((size_t)n * nd->L.ndims * sizeof(*w));
	if (!w) {
		ret = -ENOMEM;
		goto unlock;
	}
	for (unsigned k = 0; k < n && !ret; k++)
		ret = plan_one(nd, nd->pend[k].bid, nd->pend[k].slot, w, &nw);
	/* nslots, index_end and root, ahead of (never behind) the entries on disk */
	if (!ret && nd->sb_dirty)
		ret = sb_write_locked(nd);
	pthread_mutex_unlock(&nd->imu);
	if (!ret)
		ret = nd->st->ops->sync(nd->st);
	pthread_mutex_lock(&nd->imu);
	/* children before the pointers to them (tidier on disk; not needed for safety) */
	for (unsigned i = nw; !ret && i--;) {
		uint64_t le = htole64(w[i].v);

		ret = meta_write(nd, &le, sizeof(le), w[i].off);
	}
	if (!ret) {
		/* recorded: lookups find them in the index now */
		memmove(nd->pend, nd->pend + n, (nd->npend - n) * sizeof(*nd->pend));
		nd->npend -= n;
		phash_rebuild(nd);
	}
unlock:
	pthread_mutex_unlock(&nd->imu);
	pthread_mutex_unlock(&nd->rmu);
	free(w);
	return ret;
}

uint64_t nd_slots_new(struct gs_nd *nd, uint64_t n)
{
	uint64_t first;

	pthread_mutex_lock(&nd->imu);
	first = nd->nslots;
	nd->nslots += n;
	nd->sb_dirty = true;
	pthread_mutex_unlock(&nd->imu);
	return first;
}
