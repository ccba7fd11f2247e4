// SPDX-License-Identifier: MIT
/*
 * mkfs: compute a layout and write a fresh filesystem straight through gs_q
 * (nothing is mounted, so there is no cache to keep coherent).  The root
 * directory holds arrays/, graph/ and nd/.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "fs_internal.h"

#define MKFS_CHUNK	(1u << 20)	/* bytes written per request */

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static uint64_t round_up(uint64_t a, uint64_t b)
{
	return div_up(a, b) * b;
}

int gs_layout_compute(struct gs_layout *l, uint64_t bytes, uint32_t bs, uint64_t ninodes,
		      uint64_t jblocks)
{
	uint64_t bpb, ipb, jalign, jmin, end;

	memset(l, 0, sizeof(*l));
	if (bs < GS_MIN_BLOCK || bs > GS_MAX_BLOCK || (bs & (bs - 1)))
		return -EINVAL;
	l->bs = bs;
	l->nblocks = bytes / bs;
	if (l->nblocks < GS_MIN_FS_BLOCKS || bytes < (4u << 20))
		return -ENOSPC;
	if (l->nblocks > (1ULL << 48))
		return -EFBIG;
	bpb = (uint64_t)(bs - GS_BITMAP_OFF) * 8;
	ipb = (bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	if (!ninodes) {
		ninodes = bytes / (128u << 10);	/* one per 128 KiB: arrays are large */
		if (ninodes < 1024)
			ninodes = 1024;
		if (ninodes > (1ULL << 32))
			ninodes = 1ULL << 32;
	}
	if (ninodes < 16 || ninodes > (1ULL << 40))
		return -EINVAL;
	l->itable_blocks = div_up(ninodes, ipb);
	l->ninodes = l->itable_blocks * ipb;	/* fill the table's last block */
	l->bbitmap_blocks = div_up(l->nblocks, bpb);
	l->ibitmap_blocks = div_up(l->ninodes, bpb);
	l->itable_blocks = div_up(l->ninodes, ipb);
	l->bbitmap_start = 2;
	l->ibitmap_start = l->bbitmap_start + l->bbitmap_blocks;
	l->itable_start = l->ibitmap_start + l->ibitmap_blocks;

	/* The journal must hold one operation's worst case (every bitmap
	 * block) four times over: a commit is forced at a quarter. */
	jalign = GS_JOURNAL_ALIGN / bs;
	jmin = round_up(4 * (l->bbitmap_blocks + l->ibitmap_blocks) + 256, jalign);
	if (!jblocks) {
		jblocks = l->nblocks / 64;
		if (jblocks > (256u << 20) / bs)
			jblocks = (256u << 20) / bs;
	}
	jblocks = round_up(jblocks, jalign);
	if (jblocks < jmin)
		jblocks = jmin;
	l->journal_blocks = jblocks;
	l->journal_start = round_up(l->itable_start + l->itable_blocks, jalign);
	end = l->journal_start + l->journal_blocks;
	if (end + 16 > l->nblocks)
		return -ENOSPC;
	return 0;
}

static void bit_set(uint8_t *bits, uint64_t i)
{
	bits[i >> 3] |= 1u << (i & 7);
}

struct mkfs_ctx {
	struct gs_q *q;
	struct gs_layout l;
	uint8_t *buf;		/* MKFS_CHUNK bytes, aligned */
	uint64_t now;
	uint8_t uuid[16];
	uint64_t root_blk;
};

static int put(struct mkfs_ctx *m, const void *buf, size_t len, uint64_t blk)
{
	ssize_t n = gs_q_pwrite(m->q, buf, len, blk * m->l.bs);

	return n < 0 ? (int)n : 0;
}

/* Write a bitmap region: bits [0, used_lo) and @extra ranges set, and every
 * bit past @nbits (padding of the last block) set so it is never handed out. */
static int write_bitmap(struct mkfs_ctx *m, uint64_t start, uint64_t nblk, uint16_t type,
			uint64_t nbits, const uint64_t (*used)[2], int nused)
{
	uint32_t bs = m->l.bs;
	uint64_t bpb = (uint64_t)(bs - GS_BITMAP_OFF) * 8;
	uint32_t per = MKFS_CHUNK / bs;

	for (uint64_t b = 0; b < nblk; b += per) {
		uint32_t cnt = nblk - b < per ? nblk - b : per;

		for (uint32_t k = 0; k < cnt; k++) {
			uint8_t *blk = m->buf + (size_t)k * bs;
			uint8_t *bits = blk + GS_BITMAP_OFF;
			uint64_t first = (b + k) * bpb;

			gs_blk_init(blk, bs, start + b + k, 0, type);
			for (int u = 0; u < nused; u++) {
				uint64_t lo = used[u][0], hi = used[u][1];

				if (lo < first)
					lo = first;
				if (hi > first + bpb)
					hi = first + bpb;
				for (uint64_t i = lo; i < hi; i++)
					bit_set(bits, i - first);
			}
			for (uint64_t i = nbits > first ? nbits - first : 0; i < bpb; i++)
				bit_set(bits, i);
			gs_blk_seal(blk, bs);
		}
		int ret = put(m, m->buf, (size_t)cnt * bs, start + b);

		if (ret < 0)
			return ret;
	}
	return 0;
}

static void mk_inode(struct gs_dinode *d, uint16_t type, uint32_t mode, uint32_t nlink,
		     uint64_t parent, uint64_t size, uint64_t now)
{
	memset(d, 0, sizeof(*d));
	d->type = st16(type);
	d->mode = st32(mode);
	d->nlink = st32(nlink);
	d->generation = st32(1);
	d->parent = st64(parent);
	d->size = st64(size);
	d->atime.sec = d->mtime.sec = d->ctime.sec = st64(now);
}

static int write_itable(struct mkfs_ctx *m)
{
	uint32_t bs = m->l.bs;
	uint32_t per = MKFS_CHUNK / bs;

	for (uint64_t b = 0; b < m->l.itable_blocks; b += per) {
		uint32_t cnt = m->l.itable_blocks - b < per ? m->l.itable_blocks - b : per;

		for (uint32_t k = 0; k < cnt; k++) {
			uint8_t *blk = m->buf + (size_t)k * bs;

			gs_blk_init(blk, bs, m->l.itable_start + b + k, 0, GS_BT_ITABLE);
			if (b + k == 0) {
				/* inodes 1..4: /, arrays, graph, nd (all in block 0) */
				struct gs_dinode *d = (void *)(blk + GS_ITABLE_OFF);
				struct gs_dinode *root = d + 1;

				mk_inode(root, GS_T_DIR, S_IFDIR | 0755, 5, GS_ROOT_INO, bs,
					 m->now);
				root->blocks = st64(1);
				root->xroot.h.nr = st16(1);
				struct gs_dextent *e = (void *)root->xroot.e;

				e->lblk = 0;
				e->pblk = st64(m->root_blk);
				e->len = st32(1);
				for (int i = 2; i <= 4; i++)
					mk_inode(d + i, GS_T_DIR, S_IFDIR | 0755, 2, GS_ROOT_INO, 0,
						 m->now);
			}
			gs_blk_seal(blk, bs);
		}
		int ret = put(m, m->buf, (size_t)cnt * bs, m->l.itable_start + b);

		if (ret < 0)
			return ret;
	}
	return 0;
}

static int write_root_dir(struct mkfs_ctx *m)
{
	static const char *const names[] = { "arrays", "graph", "nd" };
	uint32_t bs = m->l.bs, off = GS_DIR_OFF;
	uint8_t *blk = m->buf;

	gs_blk_init(blk, bs, m->root_blk, GS_ROOT_INO, GS_BT_DIR);
	for (int i = 0; i < 3; i++) {
		struct gs_ddirent *de = (void *)(blk + off);
		uint32_t len = strlen(names[i]);
		uint32_t rec = (sizeof(*de) + len + 7) & ~7u;

		de->ino = st64(2 + i);
		de->name_len = len;
		de->type = GS_T_DIR;
		memcpy(de->name, names[i], len);
		de->rec_len = st16(i == 2 ? bs - off : rec);
		off += rec;
	}
	gs_blk_seal(blk, bs);
	return put(m, blk, bs, m->root_blk);
}

static int write_super(struct mkfs_ctx *m, const struct gs_mkfs_opts *o)
{
	struct gs_dsuper *sb = (void *)m->buf;
	const struct gs_layout *l = &m->l;
	int ret;

	memset(m->buf, 0, m->l.bs);
	sb->magic = st64(GS_SB_MAGIC);
	sb->version = st32(GS_FORMAT_VERSION);
	sb->block_size = st32(l->bs);
	sb->inode_size = st32(GS_INODE_SIZE);
	sb->feature_incompat = st32(GS_FEAT_INCOMPAT_EXTENTS | GS_FEAT_INCOMPAT_JOURNAL);
	sb->state = st32(GS_STATE_CLEAN);
	sb->nblocks = st64(l->nblocks);
	sb->ninodes = st64(l->ninodes);
	sb->bbitmap_start = st64(l->bbitmap_start);
	sb->bbitmap_blocks = st64(l->bbitmap_blocks);
	sb->ibitmap_start = st64(l->ibitmap_start);
	sb->ibitmap_blocks = st64(l->ibitmap_blocks);
	sb->itable_start = st64(l->itable_start);
	sb->itable_blocks = st64(l->itable_blocks);
	sb->journal_start = st64(l->journal_start);
	sb->journal_blocks = st64(l->journal_blocks);
	sb->root_ino = st64(GS_ROOT_INO);
	sb->j_tail = 0;
	sb->j_seq = st64(1);
	sb->mkfs_time = sb->write_time = st64(m->now);
	memcpy(sb->uuid, m->uuid, 16);
	if (o->label)
		memcpy(sb->label, o->label, strnlen(o->label, sizeof(sb->label)));
	gs_sb_set_crc(sb);
	/* copy first: a crash in between leaves no valid primary, so an
	 * interrupted mkfs is never mistaken for a finished one */
	ret = put(m, m->buf, l->bs, 1);
	if (!ret)
		ret = gs_q_flush(m->q);
	if (!ret)
		ret = put(m, m->buf, l->bs, 0);
	if (!ret)
		ret = gs_q_flush(m->q);
	return ret;
}

static int open_dev(const char *path, const char *backend, uint64_t size, struct gs_q **qp)
{
	struct gs_q_params p = { .backend = backend, .path = path, .size = size };
	struct stat st;
	int ret;

	if (size && (stat(path, &st) < 0 || S_ISREG(st.st_mode)))
		p.flags |= GS_Q_CREATE;
	ret = gs_q_open(qp, &p);
	if (ret == -EINVAL) {	/* no O_DIRECT here (tmpfs) */
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(qp, &p);
	}
	return ret;
}

int gs_fs_mkfs(const char *path, const struct gs_mkfs_opts *o)
{
	struct gs_mkfs_opts def = {0};
	struct mkfs_ctx m = {0};
	struct gs_q_geom g;
	uint64_t size;
	int ret;

	if (!path)
		return -EINVAL;
	if (!o)
		o = &def;
	ret = open_dev(path, o->backend, o->size, &m.q);
	if (ret < 0) {
		gs_err("mkfs: %s: %s", path, strerror(-ret));
		return ret;
	}
	ret = gs_q_geometry(m.q, &g);
	if (ret < 0)
		goto close;
	size = o->size ? o->size : g.capacity;
	if (size > g.capacity) {
		gs_err("mkfs: %s: %" PRIu64 " bytes requested, the device has %" PRIu64, path,
		       size, g.capacity);
		ret = -ENOSPC;
		goto close;
	}
	ret = gs_layout_compute(&m.l, size, o->block_size ? o->block_size : 4096, o->inodes,
				o->journal_blocks);
	if (ret < 0) {
		gs_err("mkfs: %s: %s", path, ret == -EINVAL ? "bad block size (4096..65536, a "
		       "power of two)" : "device too small (at least 4 MiB)");
		goto close;
	}
	if (posix_memalign((void **)&m.buf, 4096, MKFS_CHUNK)) {
		ret = -ENOMEM;
		goto close;
	}
	if (!o->force) {
		ssize_t n = gs_q_pread(m.q, m.buf, 4096, 0);
		struct gs_dsuper *sb = (void *)m.buf;

		if (n == 4096 && ld64(sb->magic) == GS_SB_MAGIC) {
			gs_err("mkfs: %s already holds a gstore filesystem (use force)", path);
			ret = -EEXIST;
			goto free_buf;
		}
	}
	m.now = now_sec();
	if (getrandom(m.uuid, sizeof(m.uuid), 0) != sizeof(m.uuid)) {
		for (int i = 0; i < 16; i++)
			m.uuid[i] = (uint8_t)(rand() ^ (m.now >> (i % 8)));
	}
	/* Invalidate an old superblock first, so a failed mkfs never leaves a
	 * mix of old and new metadata that mounts. */
	memset(m.buf, 0, 2 * m.l.bs);
	ret = put(&m, m.buf, 2 * m.l.bs, 0);
	if (ret < 0)
		goto free_buf;
	m.root_blk = m.l.itable_start + m.l.itable_blocks;
	if (m.root_blk >= m.l.journal_start)
		m.root_blk = m.l.journal_start + m.l.journal_blocks;

	{
		uint64_t used[3][2] = {
			{ 0, m.l.itable_start + m.l.itable_blocks },
			{ m.l.journal_start, m.l.journal_start + m.l.journal_blocks },
			{ m.root_blk, m.root_blk + 1 },
		};
		uint64_t iused[1][2] = { { 0, 5 } };

		ret = write_bitmap(&m, m.l.bbitmap_start, m.l.bbitmap_blocks, GS_BT_BBITMAP,
				   m.l.nblocks, used, 3);
		if (!ret)
			ret = write_bitmap(&m, m.l.ibitmap_start, m.l.ibitmap_blocks,
					   GS_BT_IBITMAP, m.l.ninodes, iused, 1);
	}
	if (!ret)
		ret = write_itable(&m);
	if (!ret)
		ret = write_root_dir(&m);
	if (!ret) {	/* an empty first journal block (replay stops there) */
		memset(m.buf, 0, m.l.bs);
		ret = put(&m, m.buf, m.l.bs, m.l.journal_start);
	}
	if (!ret)
		ret = gs_q_flush(m.q);
	if (!ret)
		ret = write_super(&m, o);
	if (ret < 0)
		gs_err("mkfs: %s: write failed: %s", path, strerror(-ret));
free_buf:
	free(m.buf);
close:
	gs_q_close(m.q);
	return ret;
}
