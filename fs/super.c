// SPDX-License-Identifier: MIT
/*
 * Superblock, mount and unmount, statfs, the text of .gstore/info and stats.
 *
 * The superblock is read once at mount straight from gs_q (the cache is
 * sized from it, so it cannot exist yet); afterwards both copies are
 * written through the cache and flushed with gs_cache_flush_range(), the
 * primary first.  Both live in blocks 0 and 1, so a torn write of one
 * leaves the other intact.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_internal.h"

/* ---- block checks ---- */

uint32_t gs_blk_crc(const void *blk, uint32_t bs)
{
	static const uint8_t zero[4];
	uint32_t crc;

	crc = gs_crc32c(0, blk, offsetof(struct gs_dblk, crc));
	crc = gs_crc32c(crc, zero, 4);
	return gs_crc32c(crc, (const uint8_t *)blk + offsetof(struct gs_dblk, blkno),
			 bs - offsetof(struct gs_dblk, blkno));
}

void gs_blk_seal(void *blk, uint32_t bs)
{
	struct gs_dblk *h = blk;

	h->crc = st32(gs_blk_crc(blk, bs));
}

void gs_blk_init(void *blk, uint32_t bs, uint64_t blkno, uint64_t owner, uint16_t type)
{
	struct gs_dblk *h = blk;

	memset(blk, 0, bs);
	h->magic = st32(GS_BLK_MAGIC);
	h->blkno = st64(blkno);
	h->owner = st64(owner);
	h->type = st16(type);
}

static const char *const btype_name[] = {
	[GS_BT_BBITMAP] = "block bitmap", [GS_BT_IBITMAP] = "inode bitmap",
	[GS_BT_ITABLE] = "inode table", [GS_BT_XNODE] = "extent node",
	[GS_BT_DIR] = "directory", [GS_BT_XATTR] = "xattr",
	[GS_BT_JDESC] = "journal descriptor", [GS_BT_JCOMMIT] = "journal commit",
};

int gs_blk_verify(const void *blk, uint32_t bs, uint64_t blkno, uint16_t type)
{
	const struct gs_dblk *h = blk;
	const char *what = type < sizeof(btype_name) / sizeof(btype_name[0]) &&
			   btype_name[type] ? btype_name[type] : "metadata";

	if (ld32(h->magic) != GS_BLK_MAGIC || ld16(h->type) != type) {
		gs_err("gstore: %s block %" PRIu64 ": bad magic or type", what, blkno);
		return -EUCLEAN;
	}
	if (ld64(h->blkno) != blkno) {
		gs_err("gstore: %s block %" PRIu64 ": claims to be block %" PRIu64, what, blkno,
		       (uint64_t)ld64(h->blkno));
		return -EUCLEAN;
	}
	if (ld32(h->crc) != gs_blk_crc(blk, bs)) {
		gs_err("gstore: %s block %" PRIu64 ": checksum mismatch", what, blkno);
		return -EUCLEAN;
	}
	return 0;
}

/* ---- superblock ---- */

void gs_sb_set_crc(struct gs_dsuper *sb)
{
	sb->crc = 0;
	sb->crc = st32(gs_crc32c(0, sb, GS_SB_SIZE));
}

static bool region_ok(uint64_t start, uint64_t len, uint64_t nblocks)
{
	uint64_t end;

	return len && !add_ovf(start, len, &end) && end <= nblocks && start >= 2;
}

static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

int gs_sb_parse(const struct gs_dsuper *sb, uint64_t dev_bytes, struct gs_layout *l,
		bool *ro_only)
{
	struct gs_dsuper tmp = *sb;
	uint32_t bs, incompat, ro;
	uint64_t bpb, ipb, need, bytes;

	if (ld64(sb->magic) != GS_SB_MAGIC) {
		gs_err("gstore: not a gstore filesystem (bad superblock magic)");
		return -EINVAL;
	}
	tmp.crc = 0;
	if (gs_crc32c(0, &tmp, GS_SB_SIZE) != ld32(sb->crc)) {
		gs_err("gstore: superblock checksum mismatch");
		return -EUCLEAN;
	}
	if (ld32(sb->version) != GS_FORMAT_VERSION) {
		gs_err("gstore: unsupported format version %u", ld32(sb->version));
		return -EINVAL;
	}
	incompat = ld32(sb->feature_incompat);
	if (incompat & ~GS_FEAT_INCOMPAT_SUPP) {
		gs_err("gstore: unknown incompatible features 0x%x",
		       incompat & ~GS_FEAT_INCOMPAT_SUPP);
		return -EINVAL;
	}
	ro = ld32(sb->feature_ro_compat);
	if (ro_only)
		*ro_only = (ro & ~GS_FEAT_RO_COMPAT_SUPP) != 0;
	bs = ld32(sb->block_size);
	if (bs < GS_MIN_BLOCK || bs > GS_MAX_BLOCK || (bs & (bs - 1))) {
		gs_err("gstore: superblock: bad block size %u", bs);
		return -EUCLEAN;
	}
	if (ld32(sb->inode_size) != GS_INODE_SIZE) {
		gs_err("gstore: superblock: bad inode size %u", ld32(sb->inode_size));
		return -EUCLEAN;
	}
	memset(l, 0, sizeof(*l));
	l->bs = bs;
	l->nblocks = ld64(sb->nblocks);
	l->ninodes = ld64(sb->ninodes);
	l->bbitmap_start = ld64(sb->bbitmap_start);
	l->bbitmap_blocks = ld64(sb->bbitmap_blocks);
	l->ibitmap_start = ld64(sb->ibitmap_start);
	l->ibitmap_blocks = ld64(sb->ibitmap_blocks);
	l->itable_start = ld64(sb->itable_start);
	l->itable_blocks = ld64(sb->itable_blocks);
	l->journal_start = ld64(sb->journal_start);
	l->journal_blocks = ld64(sb->journal_blocks);

	if (l->nblocks < GS_MIN_FS_BLOCKS || mul_ovf(l->nblocks, bs, &bytes) ||
	    (dev_bytes && bytes > dev_bytes)) {
		gs_err("gstore: superblock: %" PRIu64 " blocks do not fit the device (%" PRIu64
		       " bytes)", l->nblocks, dev_bytes);
		return -EUCLEAN;
	}
	bpb = (uint64_t)(bs - GS_BITMAP_OFF) * 8;
	ipb = (bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	if (l->ninodes < 8 || l->ninodes > (1ULL << 40) ||
	    !region_ok(l->bbitmap_start, l->bbitmap_blocks, l->nblocks) ||
	    !region_ok(l->ibitmap_start, l->ibitmap_blocks, l->nblocks) ||
	    !region_ok(l->itable_start, l->itable_blocks, l->nblocks) ||
	    !region_ok(l->journal_start, l->journal_blocks, l->nblocks)) {
		gs_err("gstore: superblock: metadata regions out of range");
		return -EUCLEAN;
	}
	need = (l->nblocks + bpb - 1) / bpb;
	if (l->bbitmap_blocks != need ||
	    l->ibitmap_blocks != (l->ninodes + bpb - 1) / bpb ||
	    l->itable_blocks != (l->ninodes + ipb - 1) / ipb) {
		gs_err("gstore: superblock: region sizes inconsistent with geometry");
		return -EUCLEAN;
	}
	if (overlap(l->bbitmap_start, l->bbitmap_blocks, l->ibitmap_start, l->ibitmap_blocks) ||
	    overlap(l->bbitmap_start, l->bbitmap_blocks, l->itable_start, l->itable_blocks) ||
	    overlap(l->ibitmap_start, l->ibitmap_blocks, l->itable_start, l->itable_blocks) ||
	    overlap(l->journal_start, l->journal_blocks, l->bbitmap_start, l->bbitmap_blocks) ||
	    overlap(l->journal_start, l->journal_blocks, l->ibitmap_start, l->ibitmap_blocks) ||
	    overlap(l->journal_start, l->journal_blocks, l->itable_start, l->itable_blocks)) {
		gs_err("gstore: superblock: metadata regions overlap");
		return -EUCLEAN;
	}
	if ((l->journal_start * bs) % GS_JOURNAL_ALIGN ||
	    (l->journal_blocks * bs) % GS_JOURNAL_ALIGN || l->journal_blocks < 16) {
		gs_err("gstore: superblock: journal not aligned");
		return -EUCLEAN;
	}
	if (ld64(sb->root_ino) != GS_ROOT_INODE || ld64(sb->j_tail) >= l->journal_blocks) {
		gs_err("gstore: superblock: bad root inode or journal position");
		return -EUCLEAN;
	}
	return 0;
}

/* Write both superblock copies, each durable before the next.  Caller
 * holds j.cmu (or is single-threaded: mount, unmount). */
int sb_write(struct gs_fs *fs)
{
	uint8_t *blk = calloc(1, fs->bs);
	int ret;

	if (!blk)
		return -ENOMEM;
	pthread_mutex_lock(&fs->ns);
	fs->sb.write_time = st64(now_sec());
	gs_sb_set_crc(&fs->sb);
	memcpy(blk, &fs->sb, sizeof(fs->sb));
	pthread_mutex_unlock(&fs->ns);
	for (int copy = 0; copy < 2; copy++) {
		ssize_t n = gs_cache_write(fs->c, blk, fs->bs, blk2off(fs, copy));

		ret = n < 0 ? (int)n : gs_cache_flush_range(fs->c, blk2off(fs, copy), fs->bs);
		if (ret < 0)
			break;
	}
	free(blk);
	if (ret < 0)
		gs_err("gstore: superblock write failed: %d", ret);
	return ret;
}

int fs_fail(struct gs_fs *fs, int err, const char *what)
{
	if (!__atomic_exchange_n(&fs->error, err ? err : -EIO, __ATOMIC_ACQ_REL))
		gs_err("gstore: %s failed (%s): the filesystem is now read-only; run fsck",
		       what, strerror(-err));
	return err;
}

/* Read the superblock straight from the queue: primary, else the copy in
 * block 1 of any legal block size. */
static int sb_load(struct gs_fs *fs, uint64_t dev_bytes, bool *used_copy)
{
	uint8_t *buf;
	int ret = -EINVAL;
	bool ro_only = false;

	if (posix_memalign((void **)&buf, 4096, 4096))
		return -ENOMEM;
	*used_copy = false;
	for (uint32_t off = 0; off <= GS_MAX_BLOCK; off = off ? off * 2 : GS_MIN_BLOCK) {
		ssize_t n = gs_q_pread(fs->q, buf, 4096, off);
		int r;

		if (n < 0) {
			ret = (int)n;
			break;
		}
		r = gs_sb_parse((struct gs_dsuper *)buf, dev_bytes, &fs->l, &ro_only);
		if (r == 0 && off && fs->l.bs != off)
			r = -EUCLEAN;	/* a copy must sit in block 1 */
		if (r == 0) {
			memcpy(&fs->sb, buf, sizeof(fs->sb));
			*used_copy = off != 0;
			ret = 0;
			break;
		}
		if (!off)
			ret = r;	/* report the primary's problem */
	}
	free(buf);
	if (!ret && ro_only && !fs->rdonly) {
		gs_err("gstore: unknown ro_compat features: mount read-only");
		ret = -EROFS;
	}
	return ret;
}

static uint32_t ilog2_32(uint32_t v)
{
	return 31 - __builtin_clz(v);
}

int fs_open_common(struct gs_fs **fsp, const struct gs_fs_opts *o, bool for_fsck)
{
	struct gs_q_params qp = {0};
	struct gs_cache_params cp = {0};
	struct gs_q_geom g;
	struct gs_fs *fs;
	bool used_copy;
	int ret;

	if (!o || !o->path)
		return -EINVAL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->rdonly = o->flags & GS_FS_RDONLY;
	fs->ro_fixed = fs->rdonly;
	fs->path = strdup(o->path);
	pthread_mutex_init(&fs->ns, NULL);
	pthread_mutex_init(&fs->lease_mu, NULL);
	pthread_cond_init(&fs->lease_cv, NULL);
	fs->lock_fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fs->lock_fd < 0) {
		ret = -errno;
		gs_err("gstore: %s: %s", o->path, strerror(errno));
		goto free_fs;
	}
	/* Only a lock: all I/O goes through gs_q. */
	ret = fs_lock_image(fs->lock_fd, o->path, fs->rdonly, o->flags & GS_FS_WAIT);
	if (ret < 0)
		goto close_lock;

	qp.backend = o->backend;
	qp.path = o->path;
	qp.flags = (fs->rdonly ? GS_Q_RDONLY : 0) | (o->flags & GS_FS_BUFFERED ? GS_Q_BUFFERED : 0);
	qp.queue_depth = o->queue_depth;
	qp.min_pollers = 1;
	qp.max_pollers = o->pollers ? o->pollers : 2;
	qp.fault = o->fault;
	ret = gs_q_open(&fs->q, &qp);
	if (ret < 0) {
		gs_err("gstore: %s: cannot open the device: %s", o->path, strerror(-ret));
		goto close_lock;
	}
	ret = gs_q_geometry(fs->q, &g);
	if (ret < 0)
		goto close_q;
	fs->lba = g.lba_size ? g.lba_size : 512;
	ret = sb_load(fs, g.capacity, &used_copy);
	if (ret < 0)
		goto close_q;
	fs->sb_from_copy = used_copy;
	if (used_copy)
		gs_warn("gstore: %s: primary superblock bad, using the copy in block 1", o->path);
	fs->bs = fs->l.bs;
	fs->bshift = ilog2_32(fs->bs);
	if (fs->lba > fs->bs) {
		gs_err("gstore: device block size %u exceeds the fs block size %u", fs->lba,
		       fs->bs);
		ret = -EINVAL;
		goto close_q;
	}

	cp.mem_bytes = o->cache_bytes ? o->cache_bytes : (for_fsck ? 64ULL << 20 : GS_DEF_CACHE);
	cp.line_size = o->line_size ? o->line_size : GS_DEF_LINE;
	if (cp.line_size < fs->bs)
		cp.line_size = fs->bs;
	/* dirty per fs block: a line written back never carries a clean block
	 * over data that a lease wrote around the cache */
	cp.block_size = fs->bs;
	/* The journal is written around the cache: no line may straddle it. */
	if ((cp.line_size & (cp.line_size - 1)) || cp.line_size > GS_JOURNAL_ALIGN) {
		gs_err("gstore: cache line size %u: must be a power of two <= 1 MiB", cp.line_size);
		ret = -EINVAL;
		goto close_q;
	}
	ret = gs_cache_create(&fs->c, fs->q, &cp);
	if (ret < 0)
		goto close_q;
	fs->line = gs_cache_line_size(fs->c);
	{
		struct gs_cache_stats cs;

		gs_cache_get_stats(fs->c, &cs);
		fs->cache_bytes = (uint64_t)cs.lines * fs->line;
	}
	fs->dirty_max = o->dirty_bytes ? o->dirty_bytes : fs->cache_bytes / 4;
	if (!o->dirty_bytes && fs->dirty_max > GS_DEF_DIRTY_MAX)
		fs->dirty_max = GS_DEF_DIRTY_MAX;
	fs->dirty_every = fs->cache_bytes / fs->line * GS_DIRTY_SAMPLE_NS;

	fs->icache_max = GS_ICACHE_MAX;
	fs->ihash_n = 4096;
	fs->ihash = calloc(fs->ihash_n, sizeof(*fs->ihash));
	fs->mhash_n = 8192;
	fs->mhash = calloc(fs->mhash_n, sizeof(*fs->mhash));
	fs->lru.lnext = fs->lru.lprev = &fs->lru;
	fs->mmax = (16ULL << 20) / fs->bs + 64;	/* clean metadata buffers kept: ~16 MiB */
	if (!fs->ihash || !fs->mhash) {
		ret = -ENOMEM;
		goto destroy_cache;
	}
	ret = jnl_init(fs);
	if (ret < 0)
		goto destroy_cache;
	*fsp = fs;
	return 0;

destroy_cache:
	free(fs->ihash);
	free(fs->mhash);
	gs_cache_destroy(fs->c);
close_q:
	gs_q_close(fs->q);
close_lock:
	close(fs->lock_fd);
free_fs:
	free(fs->path);
	free(fs);
	return ret;
}

void fs_close_common(struct gs_fs *fs)
{
	jnl_destroy(fs);
	icache_destroy(fs);
	mb_destroy_all(fs);
	alloc_destroy(fs);
	free(fs->ihash);
	free(fs->mhash);
	gs_q_close(fs->q);
	close(fs->lock_fd);
	free(fs->path);
	pthread_mutex_destroy(&fs->ns);
	pthread_mutex_destroy(&fs->lease_mu);
	pthread_cond_destroy(&fs->lease_cv);
	free(fs);
}

int gs_fs_mount(struct gs_fs **fsp, const struct gs_fs_opts *o)
{
	struct gs_fs *fs;
	uint64_t replayed = 0;
	int ret;

	ret = fs_open_common(&fs, o, false);
	if (ret < 0)
		return ret;
	ret = jnl_replay(fs, &replayed);
	if (ret < 0)
		goto close;
	if (replayed)
		gs_info("gstore: %s: replayed %" PRIu64 " journal transactions", fs->path,
			replayed);
	ret = alloc_init(fs);
	if (ret < 0)
		goto close;
	if (ld32(fs->sb.state) & GS_STATE_ERRORS)
		gs_warn("gstore: %s: errors were recorded on this filesystem: run fsck", fs->path);
	ret = alloc_verify(fs);
	if (ret == -EUCLEAN) {
		/* writing would overwrite other objects' data: read-only until fsck */
		if (!fs->rdonly) {
			fs->sb.state = st32(ld32(fs->sb.state) | GS_STATE_ERRORS);
			ret = sb_write(fs);
			if (ret < 0)
				goto close;
			fs->rdonly = true;
		}
		fs->ro_fixed = true;
		gs_err("gstore: %s: mounted read-only: run fsck -y", fs->path);
		ret = 0;
	}
	if (ret < 0)
		goto close;
	if (!fs->rdonly) {
		fs->sb.state = st32(ld32(fs->sb.state) & ~GS_STATE_CLEAN);
		fs->sb.mount_time = st64(now_sec());
		fs->sb.mount_count = st32(ld32(fs->sb.mount_count) + 1);
		ret = sb_write(fs);
		if (ret < 0)
			goto close;
		ret = orphans_cleanup(fs);
		if (ret < 0)
			goto close;
		ret = jnl_start_thread(fs);
		if (ret < 0)
			goto close;
	}
	*fsp = fs;
	return 0;

close:
	gs_cache_destroy(fs->c);
	fs_close_common(fs);
	return ret;
}

int gs_fs_unmount(struct gs_fs *fs)
{
	int ret = 0, r;

	if (!fs)
		return 0;
	jnl_stop_thread(fs);
	if (!fs->rdonly && !fs->error) {
		ret = jnl_write_clean(fs);
	} else if (!fs->rdonly && fs->error) {
		ret = fs->error;
	}
	r = gs_cache_destroy(fs->c);
	if (!ret)
		ret = r;
	fs_close_common(fs);
	return ret;
}

int gs_fs_remount(struct gs_fs *fs, unsigned flags)
{
	bool ro = flags & GS_FS_RDONLY;
	int ret;

	if (ro == __atomic_load_n(&fs->rdonly, __ATOMIC_ACQUIRE))
		return 0;
	if (ro) {
		/* Writers are refused first, then what they did is written back
		 * (the kernel has flushed and stopped its writers already; an
		 * attach client's write that passed its check just before can
		 * still land after the checkpoint, as it could after a crash). */
		__atomic_store_n(&fs->rdonly, true, __ATOMIC_RELEASE);
		jnl_stop_thread(fs);
		if (fs->error)
			return 0;	/* nothing can be written anyway */
		ret = jnl_write_clean(fs);
		if (ret < 0)
			gs_err("gstore: %s: write-back for the read-only remount failed: %s",
			       fs->path, strerror(-ret));
		return ret;
	}
	if (fs->ro_fixed)
		return -EROFS;
	if (fs->error)
		return fs->error;
	pthread_mutex_lock(&fs->ns);
	fs->sb.state = st32(ld32(fs->sb.state) & ~GS_STATE_CLEAN);
	pthread_mutex_unlock(&fs->ns);
	ret = sb_write(fs);
	if (!ret)
		ret = jnl_start_thread(fs);
	if (ret < 0)
		return ret;
	__atomic_store_n(&fs->rdonly, false, __ATOMIC_RELEASE);
	return 0;
}

int gs_fs_sync(struct gs_fs *fs)
{
	if (fs->rdonly)
		return 0;
	return jnl_sync(fs, true);
}

int gs_fs_statfs(struct gs_fs *fs, struct gs_fs_statfs *sf)
{
	struct gs_cache_stats cs;

	gs_cache_get_stats(fs->c, &cs);	/* walks the lines: not under ns */
	pthread_mutex_lock(&fs->ns);
	sf->cache_dirty = (uint64_t)cs.dirty * fs->line;
	sf->block_size = fs->bs;
	sf->blocks = fs->l.nblocks;
	sf->bfree = fs->al.nfree + fs->al.pending;
	sf->bavail = sf->bfree > fs->al.reserve ? sf->bfree - fs->al.reserve : 0;
	sf->files = fs->l.ninodes - 1;
	sf->ffree = fs->al.ifree;
	sf->name_max = GS_NAME_MAX;
	sf->line_size = fs->line;
	sf->cache_bytes = fs->cache_bytes;
	pthread_mutex_unlock(&fs->ns);
	return 0;
}

int gs_fs_geometry(struct gs_fs *fs, struct gs_q_geom *g)
{
	return gs_q_geometry(fs->q, g);
}

struct gs_q *gs_fs_queue(struct gs_fs *fs)
{
	return fs->q;
}

int gs_fs_drop_caches(struct gs_fs *fs)
{
	int ret = fs_flush_all(fs);

	gs_cache_invalidate(fs->c, 0, 0);
	return ret;
}

static void uuid_str(const uint8_t *u, char *s)
{
	for (int i = 0, k = 0; i < 16; i++) {
		k += sprintf(s + k, "%02x", u[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			s[k++] = '-';
	}
}

int gs_fs_info_text(struct gs_fs *fs, char *buf, size_t size)
{
	struct gs_fs_statfs sf;
	char uuid[40], label[65];
	uint32_t state;
	int n;

	gs_fs_statfs(fs, &sf);
	pthread_mutex_lock(&fs->ns);
	uuid_str(fs->sb.uuid, uuid);
	memcpy(label, fs->sb.label, 64);
	label[64] = 0;
	state = ld32(fs->sb.state);
	pthread_mutex_unlock(&fs->ns);
	n = snprintf(buf, size,
		     "format_version: %u\n"
		     "uuid: %s\n"
		     "label: %s\n"
		     "device: %s\n"
		     "block_size: %u\n"
		     "blocks: %" PRIu64 "\n"
		     "blocks_free: %" PRIu64 "\n"
		     "inodes: %" PRIu64 "\n"
		     "inodes_free: %" PRIu64 "\n"
		     "journal_blocks: %" PRIu64 "\n"
		     "read_only: %d\n"
		     "rw_allowed: %d\n"
		     "errors: %d\n"
		     "mount_count: %u\n",
		     GS_FORMAT_VERSION, uuid, label, fs->path, fs->bs, sf.blocks, sf.bfree,
		     sf.files, sf.ffree, fs->l.journal_blocks, fs->rdonly, !fs->ro_fixed,
		     (state & GS_STATE_ERRORS) || fs->error ? 1 : 0, ld32(fs->sb.mount_count));
	/* a pool's layout, stripe unit and members (nothing for one device) */
	if (n >= 0 && (size_t)n < size) {
		int p = gs_q_pool_info(fs->q, buf + n, size - (size_t)n);

		n = p < 0 ? p : n + p;
	}
	return n < 0 ? -EINVAL : n;
}

int gs_fs_stats_text(struct gs_fs *fs, char *buf, size_t size)
{
	struct gs_q_stats qs;
	struct gs_cache_stats cs;
	struct gs_q_geom g = {0};
	int n;

	gs_q_geometry(fs->q, &g);
	gs_q_get_stats(fs->q, &qs);
	gs_cache_get_stats(fs->c, &cs);
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
	n = snprintf(buf, size,
		     "q_requests: %" PRIu64 "\n"
		     "q_read_bytes: %" PRIu64 "\n"
		     "q_write_bytes: %" PRIu64 "\n"
		     "q_errors: %" PRIu64 "\n"
		     "q_submits: %" PRIu64 "\n"
		     "q_inflight: %u\n"
		     "q_queue_depth: %u\n"
		     "q_pollers_active: %u\n"
		     "q_pollers_max: %u\n"
		     "q_rings: %u\n"
		     "q_ring_denied: %" PRIu64 "\n"
		     "q_ring_cq_dropped: %" PRIu64 "\n"
		     "cache_hits: %" PRIu64 "\n"
		     "cache_misses: %" PRIu64 "\n"
		     "cache_coalesced: %" PRIu64 "\n"
		     "cache_reads: %" PRIu64 "\n"
		     "cache_writebacks: %" PRIu64 "\n"
		     "cache_evictions: %" PRIu64 "\n"
		     "cache_readahead: %" PRIu64 "\n"
		     "cache_errors: %" PRIu64 "\n"
		     "cache_lines: %u\n"
		     "cache_dirty: %u\n"
		     "cache_pinned: %u\n"
		     "fs_reads: %" PRIu64 "\n"
		     "fs_read_bytes: %" PRIu64 "\n"
		     "fs_direct_reads: %" PRIu64 "\n"
		     "fs_writes: %" PRIu64 "\n"
		     "fs_write_bytes: %" PRIu64 "\n"
		     "fs_fsyncs: %" PRIu64 "\n"
		     "journal_commits: %" PRIu64 "\n"
		     "journal_blocks_logged: %" PRIu64 "\n"
		     "journal_checkpoints: %" PRIu64 "\n",
		     qs.reqs, qs.read_bytes, qs.write_bytes, qs.errors, qs.submits, qs.inflight, g.queue_depth,
		     qs.active_pollers, qs.max_pollers, qs.rings, qs.denied, qs.cq_dropped,
		     cs.hits, cs.misses, cs.coalesced,
		     cs.reads, cs.writebacks, cs.evictions, cs.readahead, cs.errors, cs.lines,
		     cs.dirty, cs.pinned, LD(fs->n_reads), LD(fs->n_read_bytes),
		     LD(fs->n_direct_reads), LD(fs->n_writes), LD(fs->n_write_bytes),
		     LD(fs->n_fsyncs), LD(fs->j.commits), LD(fs->j.logged), LD(fs->j.checkpoints));
#undef LD
	return n < 0 ? -EINVAL : n;
}
