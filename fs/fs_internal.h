/* SPDX-License-Identifier: MIT */
/*
 * Filesystem core internals, shared by fs/{super,mkfs,alloc,journal,catalog,
 * array,fsck}.c and the unit tests.
 *
 * Locking (outermost first):
 *   inode->rw      per object: read for reads of its data, write for anything
 *                  that changes its mapping or size (write, truncate, ...)
 *   fs->ns         one mutex for every metadata change: namespace, catalog,
 *                  allocator, extent maps, metadata buffers and the running
 *                  transaction.  An operation does all its metadata changes
 *                  in one hold of fs->ns, so it lands in one transaction.
 *   fs->j.mu       group commit bookkeeping (never held while taking ns)
 * The data path (copying file bytes to or from the cache) runs under
 * inode->rw only, so reads and overwrites of different objects proceed in
 * parallel.
 *
 * Metadata life cycle: a metadata block is read through the cache into a
 * struct mbuf; changes are made to the mbuf under fs->ns and join the
 * running transaction.  A commit copies the transaction's images into the
 * journal (straight to gs_q), flushes, and only then writes the images into
 * the cache, from where they reach their home location whenever the cache
 * writes them back.  The cache therefore never holds uncommitted metadata.
 * A checkpoint flushes the cache and moves the journal tail.
 */
#ifndef GS_FS_INTERNAL_H
#define GS_FS_INTERNAL_H

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "gstore_cache.h"
#include "gstore_format.h"
#include "gstore_fs.h"
#include "gstore_q.h"
#include "crc32c.h"
#include "fs_type.h"
#include "gs_log.h"

/* ---- little-endian helpers ---- */
static inline uint16_t ld16(__le16 v) { return le16toh(v); }
static inline uint32_t ld32(__le32 v) { return le32toh(v); }
static inline uint64_t ld64(__le64 v) { return le64toh(v); }
static inline __le16 st16(uint16_t v) { return htole16(v); }
static inline __le32 st32(uint32_t v) { return htole32(v); }
static inline __le64 st64(uint64_t v) { return htole64(v); }

#define GS_MAX_FILE_SIZE	(1ULL << 62)	/* keeps every byte offset far from overflow */
#define GS_MIN_FS_BLOCKS	64u
#define GS_DEF_CACHE		(256ULL << 20)
#define GS_DEF_LINE		(64u << 10)
#define GS_DEF_DIRTY_MAX	(1ULL << 30)	/* default dirty limit: cache / 4, at most this */
#define GS_COMMIT_INTERVAL_MS	5000	/* background commit of un-fsynced changes */
#define GS_DIRTY_SAMPLE_NS	250	/* dirty data is counted at most every this * lines ns */
#define GS_ICACHE_MAX		65536	/* in-memory inodes kept beyond current use */

/* ---- superblock and layout (super.c, mkfs.c) ---- */

struct gs_layout {
	uint32_t bs;
	uint64_t nblocks, ninodes;
	uint64_t bbitmap_start, bbitmap_blocks;
	uint64_t ibitmap_start, ibitmap_blocks;
	uint64_t itable_start, itable_blocks;
	uint64_t journal_start, journal_blocks;
};

/* Compute the layout of a new fs of @bytes with block size @bs; @ninodes and
 * @jblocks 0 pick defaults.  Pure; -EINVAL/-ENOSPC if it does not fit. */
int gs_layout_compute(struct gs_layout *l, uint64_t bytes, uint32_t bs, uint64_t ninodes,
		      uint64_t jblocks);
/* Validate a superblock image (crc, magic, version, features, geometry).
 * @dev_bytes: device size (0: unknown).  Fills @l.  -EUCLEAN/-EINVAL. */
int gs_sb_parse(const struct gs_dsuper *sb, uint64_t dev_bytes, struct gs_layout *l,
		bool *ro_only);
void gs_sb_set_crc(struct gs_dsuper *sb);
/* Metadata block checks. */
uint32_t gs_blk_crc(const void *blk, uint32_t bs);
void gs_blk_seal(void *blk, uint32_t bs);
int gs_blk_verify(const void *blk, uint32_t bs, uint64_t blkno, uint16_t type);
void gs_blk_init(void *blk, uint32_t bs, uint64_t blkno, uint64_t owner, uint16_t type);

/* ---- in-memory objects ---- */

struct gs_ext {
	uint64_t lblk, pblk;
	uint32_t len, flags;	/* GS_EXT_* */
};

/* One leaf of an extent tree, mirrored in memory (all of them once loaded). */
struct xleaf {
	uint64_t blk;		/* device block; 0: not allocated yet */
	uint32_t n, cap;	/* entries, on-disk capacity */
	uint32_t asz;		/* entries allocated in ex */
	bool dirty;
	struct gs_ext *ex;	/* sorted by lblk, non-overlapping */
};

/*
 * An object's extent map: the whole leaf level in memory (so a lookup is two
 * binary searches and no I/O), plus the index blocks above it.  Changes are
 * made here and written back by xmap_sync(): dirty leaves are rewritten in
 * place, and when the set of leaves changed, the index levels are rebuilt.
 */
struct xmap {
	bool loaded;
	bool shape_dirty;	/* leaf set changed: rebuild the index */
	uint16_t depth;		/* on-disk depth of the root */
	uint32_t nleaves, aleaves;
	struct xleaf *leaves;	/* depth 0: one leaf living in the inode (blk 0) */
	uint32_t nidx, aidx;
	uint64_t *idx;		/* index blocks currently in use */
	uint64_t mapped;	/* blocks covered by extents */
};

struct dirent_m {
	struct dirent_m *hnext;
	uint64_t ino;
	uint32_t bidx;		/* directory block index */
	uint32_t off;		/* record offset in the block */
	uint8_t type, name_len;
	char name[];
};

/* A directory's entries, hashed by name; loaded at first use. */
struct dindex {
	uint32_t nbuckets, count;
	struct dirent_m **b;
	uint32_t nblocks;
	uint16_t *maxfree;	/* per block: largest usable gap (bytes) */
};

struct inode_m {
	uint16_t type, flags;
	uint32_t mode, uid, gid, nlink, generation;
	uint64_t size, blocks, parent, owner, child_head, next_sib, next_orphan, xattr_blk;
	uint64_t roots[2];
	struct timespec atime, mtime, ctime;
	struct gs_dxroot xroot;
};

struct gs_inode {
	uint64_t ino;
	struct gs_inode *hnext;
	uint32_t refs;		/* iget()s outstanding (under ns) */
	uint32_t opens;		/* gs_fs_open()s outstanding (under ns) */
	bool freed;		/* unlinked and gone: refuse new users */
	pthread_rwlock_t rw;
	struct inode_m m;	/* fields: under ns (size also needs rw for write) */
	struct xmap map;	/* under rw (write) + ns to change; rw (read) to look up */
	struct dindex *dir;	/* under ns */
	uint64_t data_dirty;	/* 0, or the flush number that makes its data durable (atomic) */
	struct gs_lease *leases;	/* direct leases on it (under fs->lease_mu) */
};

/* ---- metadata buffers and transactions (journal.c) ---- */

struct mbuf {
	uint64_t blk;
	struct mbuf *hnext;
	struct mbuf *lprev, *lnext;	/* LRU of clean buffers */
	struct mbuf *txnext;
	uint64_t dirty_tid;	/* running transaction it is dirty in, 0 = clean */
	uint64_t commit_tid;	/* last transaction it was committed in */
	uint8_t *data;
};

struct fext {
	uint64_t blk, len;
};

struct fextlist {
	uint32_t n, cap;
	struct fext *e;
};

struct journal {
	uint64_t start, nblocks;	/* ring location on the device */
	uint64_t head, tail;		/* ring indexes: next write, oldest live */
	uint64_t seq;			/* sequence of the running transaction */
	uint64_t wseq;			/* sequence of the next transaction written to the ring */
	uint64_t tail_seq;
	uint64_t used;			/* blocks between tail and head */

	/* running transaction, under fs->ns */
	struct mbuf *tx;
	uint32_t tx_n;
	uint32_t tx_max;		/* force a commit before an op beyond this */
	struct fextlist tx_frees;	/* freed in the running transaction */
	struct fextlist ck_frees;	/* freed by committed transactions: reusable after
					 * the next checkpoint */
	uint64_t installed;		/* highest tid whose images are in the cache */

	/* group commit, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t req, done;		/* sync tickets issued / covered */
	bool committing;
	int err;			/* sticky commit error */

	pthread_mutex_t cmu;		/* one committer at a time (commit + checkpoint) */
	void *buf;			/* commit staging buffer, aligned */
	size_t buf_blocks;

	pthread_t thread;
	bool thread_on, stop;
	pthread_cond_t tcv;

	uint64_t commits, checkpoints, logged, flushes;
};

/* ---- allocator (alloc.c) ---- */

struct alloc {
	uint64_t nbits;
	uint64_t *map;		/* 1: in use, reserved, or freed but not yet reusable */
	uint64_t nfree;		/* zero bits */
	uint64_t pending;	/* freed, reusable after the next checkpoint */
	uint64_t cursor;	/* next-fit start for goal-less allocations */
	uint32_t ngroups;
	uint32_t *gfree;	/* zero bits per group of GS_AGROUP blocks */
	uint64_t ninodes;
	uint64_t *imap;		/* inodes: 1 in use */
	uint64_t ifree;
	uint64_t icursor;
	uint64_t reserve;	/* blocks kept for metadata: data allocations stop above it */
	uint64_t mzone;		/* a pool's mirrored zone [0, mzone): metadata blocks go
				 * there first, data only when the rest is full */
	bool zone_full;		/* metadata went past the zone (warned once) */
};
#define GS_AGROUP_SHIFT	15
#define GS_AGROUP	(1u << GS_AGROUP_SHIFT)

struct gs_fs {
	struct gs_q *q;
	struct gs_cache *c;
	uint32_t bs, bshift;
	uint32_t lba;
	uint32_t line;		/* cache line size, bytes */
	uint64_t cache_bytes;	/* the cache's line memory */
	struct gs_layout l;
	struct gs_dsuper sb;	/* current superblock image (under ns) */
	bool rdonly;
	bool ro_fixed;		/* no remount read-write: opened read-only, or until fsck */
	bool sb_from_copy;	/* the primary superblock was bad */
	int lock_fd;
	char *path;

	pthread_mutex_t ns;
	uint32_t ihash_n;
	struct gs_inode **ihash;
	uint64_t icount;
	uint64_t evicted_dirty;	/* highest data_dirty of an inode dropped from memory */
	uint64_t icache_max;	/* GS_ICACHE_MAX; tests lower it */

	uint32_t mhash_n;
	struct mbuf **mhash;
	struct mbuf lru;	/* list head of clean mbufs */
	uint64_t mcount, mmax;

	struct alloc al;
	struct journal j;
	int error;		/* set after a fatal metadata error: writes fail */

	/* full cache flushes: numbered when started, highest completed */
	uint64_t flush_seq, flush_done;
	/* Dirty cache data is kept under dirty_max bytes (it bounds the write-back
	 * at unmount).  Counting walks every line: it is done at most every
	 * dirty_every ns (dirty_at: when, CLOCK_MONOTONIC), the count in dirty_seen */
	uint64_t dirty_max, dirty_every, dirty_at, dirty_seen;

	/* direct leases: every inode's list, and the wait for an end (lease.c) */
	pthread_mutex_t lease_mu;
	pthread_cond_t lease_cv;

	/* counters (atomic) */
	uint64_t n_reads, n_writes, n_read_bytes, n_write_bytes, n_direct_reads;
	uint64_t n_fsyncs;
};

/* journal.c */
int mb_get(struct gs_fs *fs, uint64_t blk, uint16_t type, struct mbuf **mp);
int mb_new(struct gs_fs *fs, uint64_t blk, uint64_t owner, uint16_t type, struct mbuf **mp);
void mb_dirty(struct gs_fs *fs, struct mbuf *m);
void mb_forget(struct gs_fs *fs, uint64_t blk);
void mb_destroy_all(struct gs_fs *fs);
int jnl_init(struct gs_fs *fs);
void jnl_destroy(struct gs_fs *fs);
int jnl_replay(struct gs_fs *fs, uint64_t *replayed);
int jnl_sync(struct gs_fs *fs, bool data);
int jnl_checkpoint(struct gs_fs *fs);
/* Commit everything, mark the superblock clean and checkpoint, even while
 * rdonly: the last writes of an unmount or of a remount read-only. */
int jnl_write_clean(struct gs_fs *fs);
/* gs_cache_flush() that keeps flush_seq/flush_done (see can_bypass()). */
int fs_flush_all(struct gs_fs *fs);
void jnl_op_begin(struct gs_fs *fs);
int fs_reclaim(struct gs_fs *fs);
int jnl_start_thread(struct gs_fs *fs);
void jnl_stop_thread(struct gs_fs *fs);
int fext_add(struct fextlist *l, uint64_t blk, uint64_t len);
/* Scan a journal ring for fsck: count of complete transactions from @tail. */
int jnl_scan(struct gs_fs *fs, uint64_t *ntx, uint64_t *nblocks);

/* super.c */
int sb_write(struct gs_fs *fs);
int fs_fail(struct gs_fs *fs, int err, const char *what);
int fs_open_common(struct gs_fs **fsp, const struct gs_fs_opts *o, bool for_fsck);
/* flock the image; with @wait, wait for a holder that is finishing (lockwait.c) */
int fs_lock_image(int fd, const char *path, bool shared, bool wait);
void fs_close_common(struct gs_fs *fs);
static inline uint64_t blk2off(const struct gs_fs *fs, uint64_t blk)
{
	return blk << fs->bshift;
}

/* alloc.c */
int alloc_init(struct gs_fs *fs);
/* fsck: adopt computed maps (ownership passes) instead of the on-disk bitmaps. */
int alloc_adopt(struct gs_fs *fs, uint64_t *map, uint64_t *imap);
/* Mount: do the bitmaps agree with the inode table?  0, or -EUCLEAN (logged). */
int alloc_verify(struct gs_fs *fs);
void alloc_destroy(struct gs_fs *fs);
/* Reserve up to @len blocks near @goal (in memory only).  Returns blocks in
 * *got at *blk; -ENOSPC if none.  @how: ALLOC_META (metadata: may use the
 * metadata reserve, from a pool's mirrored zone first), ALLOC_ZONE (data
 * that is metadata to its object: from the mirrored zone first, not the
 * reserve), 0 (data: past the zone). */
enum { ALLOC_META = 1, ALLOC_ZONE = 2 };
int alloc_reserve(struct gs_fs *fs, uint64_t goal, uint64_t len, unsigned how, bool contig,
		  uint64_t *blk, uint64_t *got);
void alloc_unreserve(struct gs_fs *fs, uint64_t blk, uint64_t len);
/* Record reserved blocks as allocated in the on-disk bitmap (transaction). */
int alloc_commit(struct gs_fs *fs, uint64_t blk, uint64_t len);
/* Free allocated blocks: bitmap now, reusable after the next checkpoint. */
int alloc_free(struct gs_fs *fs, uint64_t blk, uint64_t len);
/* One metadata block: reserve + commit. */
int alloc_meta_block(struct gs_fs *fs, uint64_t goal, uint64_t *blk);
int alloc_soft_meta_block(struct gs_fs *fs, uint64_t goal, uint64_t *blk);
/* Enough free blocks for the worst extent-map update (leaf split + index)? */
bool alloc_map_room(const struct gs_fs *fs);
#define GS_MAP_HEADROOM	(2 * 8 + 2)	/* depth 8: a leaf and a node per level */
void alloc_release_pending(struct gs_fs *fs, struct fextlist *l);
int alloc_inode(struct gs_fs *fs, uint64_t *ino);
int free_inode_bit(struct gs_fs *fs, uint64_t ino);
bool bit_test(const uint64_t *map, uint64_t i);

/* catalog.c */
int iget(struct gs_fs *fs, uint64_t ino, struct gs_inode **ipp);
void iput(struct gs_fs *fs, struct gs_inode *ip);
int iwrite(struct gs_fs *fs, struct gs_inode *ip);
void itouch(struct gs_inode *ip, bool mtime, bool ctime);
void istat(const struct gs_fs *fs, const struct gs_inode *ip, struct gs_stat *st);
void icache_destroy(struct gs_fs *fs);
/* Set incompat feature @bit in the superblock, durably, if it is not yet. */
int fs_feature_enable(struct gs_fs *fs, uint32_t bit);
int orphans_cleanup(struct gs_fs *fs);
int ifree_object(struct gs_fs *fs, struct gs_inode *ip);
void inode_decode(struct inode_m *m, const struct gs_dinode *d);
void inode_encode(struct gs_dinode *d, const struct inode_m *m);
uint64_t itable_blk(const struct gs_fs *fs, uint64_t ino, uint32_t *off);

/* xattr.c, for fsck */
int xattr_check(struct gs_fs *fs, uint64_t blk, uint64_t ino);
int xattr_parse_block(struct gs_fs *fs, const uint8_t *blk);

/* catalog.c, for fsck */
int orphan_unlist(struct gs_fs *fs, struct gs_inode *ip);

/* catalog.c, for link.c: make a name for a new object or an old one */
/* What create_once() makes. */
struct newobj {
	uint32_t type, mode, uid, gid;
	uint64_t rdev;		/* GS_T_SPECIAL */
	const char *target;	/* GS_T_SYMLINK: inline target of tlen bytes, or NULL */
	size_t tlen;
	bool unnamed;		/* make it but add no name: see symlink_long() */
};
int create_retry(struct gs_fs *fs, uint64_t parent, const char *name,
		 const struct newobj *o, struct gs_stat *st);
int link_retry(struct gs_fs *fs, uint64_t ino, uint64_t parent, const char *name,
	       struct gs_stat *st, bool adopt);

/* catalog.c, internal objects for the fs core's own use (xattrs, symlinks) */
/* @how: CI_ANY (directories may own it too), CI_META (GS_IFL_META: its data is metadata) */
enum { CI_ANY = 1, CI_META = 2 };
int internal_create(struct gs_fs *fs, uint64_t owner, uint64_t *ino, unsigned how);
int unlink_internal_locked(struct gs_fs *fs, uint64_t ino);
int ipin(struct gs_fs *fs, uint64_t ino);

/* dir.c */
void dir_index_free(struct dindex *d);
int dir_parse(struct gs_fs *fs, const uint8_t *blk, uint64_t pblk, uint32_t bidx,
	      struct dindex *d);
int dir_load(struct gs_fs *fs, struct gs_inode *ip);
int dir_add(struct gs_fs *fs, struct gs_inode *dp, const char *name, uint64_t ino,
	    uint8_t type);
int dir_del(struct gs_fs *fs, struct gs_inode *dp, const char *name);
int dir_retarget(struct gs_fs *fs, struct gs_inode *dp, struct dirent_m *e, uint64_t ino,
		 uint8_t type);
struct dirent_m *dindex_find(struct dindex *d, const char *name);

static inline int fs_check_rw(const struct gs_fs *fs)
{
	if (fs->rdonly)
		return -EROFS;
	if (fs->error)
		return -EIO;
	return 0;
}

/* array.c */
int xmap_load(struct gs_fs *fs, struct gs_inode *ip);
void xmap_free(struct xmap *m);
/* Find the extent containing @lblk, or the first one after it; NULL: none. */
const struct gs_ext *xmap_lookup(const struct xmap *m, uint64_t lblk, bool *inside);
int xmap_insert(struct gs_fs *fs, struct gs_inode *ip, const struct gs_ext *e);
int xmap_remove(struct gs_fs *fs, struct gs_inode *ip, uint64_t lblk, uint64_t count,
		bool free_blocks);
int xmap_sync(struct gs_fs *fs, struct gs_inode *ip);
/* Free every block an object owns (data, extent nodes). */
int xmap_free_all(struct gs_fs *fs, struct gs_inode *ip);
int array_truncate(struct gs_fs *fs, struct gs_inode *ip, uint64_t size);
/* Read/write of directory blocks (metadata) through the extent map. */
int dir_block_pblk(struct gs_fs *fs, struct gs_inode *ip, uint32_t bidx, uint64_t *pblk);
int dir_block_add(struct gs_fs *fs, struct gs_inode *ip, uint64_t *pblk);

/* Extent maps, for lease.c: under ip->rw (write) and fs->ns. */
/* Back the holes in blocks [b0, b1) with unwritten extents, each hole with one
 * contiguous run where the allocator has one. */
int array_alloc_holes(struct gs_fs *fs, struct gs_inode *ip, uint64_t b0, uint64_t b1);
/* Make unwritten blocks [b0, b1) written (their data is on the device). */
int xmap_convert(struct gs_fs *fs, struct gs_inode *ip, uint64_t b0, uint64_t b1);
/* iget + xmap_load of an object with data (array, nd, graph, internal). */
int data_get(struct gs_fs *fs, uint64_t ino, struct gs_inode **ipp);
void data_put(struct gs_fs *fs, struct gs_inode *ip);

/* ---- direct leases (lease.c) ----
 *
 * A lease pins the mapping of [off, end) of one object: while it exists,
 * truncate and hole punching of an overlapping range wait (lease_wrlock()),
 * and the object is not freed (the lease holds an open).  Its mapping is a
 * snapshot taken at begin, so lease I/O needs no inode lock.  Extents are
 * in object bytes; the attach server reads them through lease_extents() to
 * bound and translate a ring's requests, and reports I/O it did on its own
 * with lease_io_start() / lease_io_done() / lease_written().
 */
enum lease_kind {
	LEASE_HOLE = 0,		/* no blocks: reads zeros, writes -ENODATA */
	LEASE_MAPPED = 1,	/* written blocks at dev */
	LEASE_UNWRITTEN = 2,	/* allocated, reads zeros; written ones convert at end */
};

struct lease_ext {
	uint64_t off, len;	/* object bytes (fs-block aligned, clipped to the lease) */
	uint64_t dev;		/* device byte offset of off (not for holes) */
	uint32_t kind;		/* enum lease_kind */
};

struct gs_lease {
	struct gs_fs *fs;
	struct gs_inode *ip;		/* data_get reference, and one open */
	uint64_t ino;
	uint64_t off, end;		/* the range, object bytes */
	unsigned flags;			/* GS_LEASE_* */
	struct gs_lease *inext;		/* ip->leases, under fs->lease_mu */
	uint32_t next;
	struct lease_ext *ext;		/* sorted by off, covering the range's blocks */

	pthread_mutex_t mu;		/* the fields below */
	pthread_cond_t cv;
	uint32_t inflight;		/* requests (or pieces) in flight */
	int err;			/* first I/O error */
	struct fextlist conv;		/* unwritten blocks written (lblk, count) */
	uint64_t wend;			/* end of the highest byte written, 0: none */
	void *owner;			/* free for the lease's user (attach server) */
	/* gs_fs_lease_set_recall(); under fs->lease_mu */
	void (*recall)(void *arg);
	void *recall_arg;
	bool recalled;			/* asked once already */
};

/* The mapping; stable for the lease's life. */
static inline const struct lease_ext *lease_extents(const struct gs_lease *l, uint32_t *n)
{
	*n = l->next;
	return l->ext;
}
/* The extent holding object byte @off (NULL: outside the lease). */
const struct lease_ext *lease_find(const struct gs_lease *l, uint64_t off);
static inline struct gs_q *lease_queue(const struct gs_lease *l)
{
	return l->fs->q;
}
/* I/O done outside gs_fs_lease_*(): gs_fs_lease_end() waits for it. */
void lease_io_start(struct gs_lease *l, uint32_t n);
void lease_io_done(struct gs_lease *l, int err);
/* [off, off + len) was written successfully (whole blocks of unwritten
 * extents become written at gs_fs_lease_end()). */
void lease_written(struct gs_lease *l, uint64_t off, uint64_t len);
/* Take ip->rw for writing once no lease overlaps [from, to): truncate and
 * hole punching, which change the mapping of that range. */
void lease_wrlock(struct gs_fs *fs, struct gs_inode *ip, uint64_t from, uint64_t to);

/* Overflow-checked helpers for values read from disk. */
static inline bool add_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_add_overflow(a, b, r);
}
static inline bool mul_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_mul_overflow(a, b, r);
}

static inline uint64_t now_sec(void)
{
	return (uint64_t)time(NULL);
}

static inline struct timespec now_ts(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

#endif /* GS_FS_INTERNAL_H */
