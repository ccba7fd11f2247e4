/* SPDX-License-Identifier: MIT */
/*
 * gstore on-disk format, version 1.  gstore(5) is the prose contract; this
 * header is the byte layout.  Everything is little-endian; block numbers are
 * in fs blocks (block_size bytes) from the start of the device.
 *
 *   block 0            superblock (struct gs_dsuper, crc32c over its 512 bytes)
 *   block 1            superblock copy (identical, written after block 0)
 *   bbitmap_start ..   block allocation bitmap   (1 bit per block, 1 = in use)
 *   ibitmap_start ..   inode allocation bitmap   (1 bit per inode, 1 = in use)
 *   itable_start ..    inode table (inodes_per_block gs_dinode per block)
 *   journal_start ..   journal ring (1 MiB aligned start and length)
 *   everything else    data, directory, extent-node and xattr blocks
 *
 * Every metadata block other than the superblock starts with struct
 * gs_dblk: a magic, the block's type, its own block number, its owner inode
 * and a crc32c of the whole block (computed with the crc field zero).
 *
 * Extend by adding, never by editing.  New layouts need a new incompat bit.
 */
#ifndef GSTORE_FORMAT_H
#define GSTORE_FORMAT_H

#include <linux/types.h>

#define GS_SB_MAGIC		0x534665726f747367ULL	/* "gstoreFS" read as le64 */
#define GS_FORMAT_VERSION	1u
#define GS_SB_SIZE		512u			/* bytes covered by the sb crc */
#define GS_MIN_BLOCK		4096u
#define GS_MAX_BLOCK		65536u
#define GS_JOURNAL_ALIGN	(1u << 20)		/* journal start/length alignment, bytes */
#define GS_INODE_SIZE		256u
#define GS_ROOT_INODE		1u			/* inode 0 is never used */

/* feature words: an unknown incompat bit refuses the mount, an unknown
 * ro_compat bit allows read-only mounts only, compat bits may be ignored */
#define GS_FEAT_INCOMPAT_EXTENTS	(1u << 0)	/* extent trees (always set in v1) */
#define GS_FEAT_INCOMPAT_JOURNAL	(1u << 1)	/* physical redo journal (always set) */
/* Symlinks (GS_T_SYMLINK), special files (GS_T_SPECIAL) and non-directories
 * with more than one name (nlink > 1).  Set in the superblock, durably,
 * before the first such object is committed, so an image without them
 * still mounts with older code. */
#define GS_FEAT_INCOMPAT_NSEXT		(1u << 2)
/* Objects whose xattrs outgrew one block keep them in an internal object
 * (GS_IFL_XATTR_OBJ); set before the first such object is committed. */
#define GS_FEAT_INCOMPAT_XATTR_OBJ	(1u << 3)
#define GS_FEAT_INCOMPAT_SUPP		(GS_FEAT_INCOMPAT_EXTENTS | GS_FEAT_INCOMPAT_JOURNAL | \
					 GS_FEAT_INCOMPAT_NSEXT | GS_FEAT_INCOMPAT_XATTR_OBJ)
#define GS_FEAT_RO_COMPAT_SUPP		0u
#define GS_FEAT_COMPAT_SUPP		0u

/* gs_dsuper.state */
#define GS_STATE_CLEAN		(1u << 0)	/* unmounted cleanly: journal empty */
#define GS_STATE_ERRORS		(1u << 1)	/* errors were detected: run fsck */

struct gs_dsuper {
	__le64 magic;
	__le32 crc;			/* crc32c of these 512 bytes with crc = 0 */
	__le32 version;
	__le32 block_size;
	__le32 inode_size;
	__le32 feature_compat;
	__le32 feature_incompat;
	__le32 feature_ro_compat;
	__le32 state;			/* GS_STATE_* */
	__le64 nblocks;			/* size of the filesystem in blocks */
	__le64 ninodes;			/* inode numbers 0 .. ninodes-1 (0 unused) */
	__le64 bbitmap_start, bbitmap_blocks;
	__le64 ibitmap_start, ibitmap_blocks;
	__le64 itable_start, itable_blocks;
	__le64 journal_start, journal_blocks;
	__le64 root_ino;
	__le64 j_tail;			/* ring index of the oldest transaction to replay */
	__le64 j_seq;			/* sequence number expected at j_tail */
	__le64 rsvd1;			/* 0 (the orphan list starts at the root inode) */
	__le64 mkfs_time, mount_time, write_time;	/* seconds since the epoch */
	__le32 mount_count;
	__le32 rsvd0;
	__u8 uuid[16];
	char label[64];			/* NUL padded */
	__le64 rsvd[31];
};
_Static_assert(sizeof(struct gs_dsuper) == GS_SB_SIZE, "gs_dsuper is 512 bytes");

/* gs_dblk.type */
enum {
	GS_BT_BBITMAP = 1,
	GS_BT_IBITMAP = 2,
	GS_BT_ITABLE = 3,
	GS_BT_XNODE = 4,	/* extent tree node */
	GS_BT_DIR = 5,		/* directory entries */
	GS_BT_XATTR = 6,	/* extended attributes */
	GS_BT_JDESC = 7,	/* journal descriptor */
	GS_BT_JCOMMIT = 8,	/* journal commit */
};

#define GS_BLK_MAGIC	0x4b4c4247u	/* "GBLK" */

/* Header of every metadata block but the superblock. */
struct gs_dblk {
	__le32 magic;
	__le32 crc;		/* crc32c of the whole block with crc = 0 */
	__le64 blkno;		/* where this block lives (journal blocks: ring position) */
	__le64 owner;		/* inode owning it; journal blocks: transaction sequence */
	__le16 type;		/* GS_BT_* */
	__le16 rsvd0;
	__le32 rsvd1;
};
_Static_assert(sizeof(struct gs_dblk) == 32, "gs_dblk is 32 bytes");

/* Bitmap blocks: the header, then (block_size - 32) * 8 bits, LSB first. */
#define GS_BITMAP_OFF	32u

/* ---- inodes ---- */

/* One extent: @len blocks of file block @lblk.. at device block @pblk.. */
struct gs_dextent {
	__le64 lblk;
	__le64 pblk;
	__le32 len;		/* 1 .. 2^31 */
	__le32 flags;		/* GS_EXT_* */
};
_Static_assert(sizeof(struct gs_dextent) == 24, "gs_dextent is 24 bytes");

#define GS_EXT_UNWRITTEN	(1u << 0)	/* allocated, reads as zeros */
#define GS_EXT_MAX_LEN		(1u << 31)

/* Index entry: the subtree at @child holds file blocks >= @lblk. */
struct gs_dxidx {
	__le64 lblk;
	__le64 child;
};
_Static_assert(sizeof(struct gs_dxidx) == 16, "gs_dxidx is 16 bytes");

/* Node header: depth 0 = leaf (gs_dextent entries), > 0 = index (gs_dxidx). */
struct gs_dxhdr {
	__le16 depth;
	__le16 nr;
	__le32 rsvd;
};
_Static_assert(sizeof(struct gs_dxhdr) == 8, "gs_dxhdr is 8 bytes");

#define GS_XROOT_BYTES		96u
#define GS_XROOT_NEXT		(GS_XROOT_BYTES / sizeof(struct gs_dextent))	/* 4 */
#define GS_XROOT_NIDX		(GS_XROOT_BYTES / sizeof(struct gs_dxidx))	/* 6 */
/* Extent node blocks: gs_dblk, gs_dxhdr, then entries to the end of the block. */
#define GS_XNODE_OFF		40u

/* Extent tree root, inside the inode. */
struct gs_dxroot {
	struct gs_dxhdr h;
	__u8 e[GS_XROOT_BYTES];	/* GS_XROOT_NEXT extents or GS_XROOT_NIDX index entries */
};
_Static_assert(sizeof(struct gs_dxroot) == 104, "gs_dxroot is 104 bytes");

struct gs_dtime {
	__le64 sec;
	__le32 nsec;
	__le32 rsvd;
};

struct gs_dinode {
	__le16 type;		/* enum gs_obj_type; 0 = free */
	__le16 flags;		/* GS_IFL_* */
	__le32 mode;		/* S_IFMT | permissions */
	__le32 uid, gid;
	__le32 nlink;
	__le32 generation;	/* bumped each time the inode number is reused */
	__le64 size;		/* bytes */
	__le64 blocks;		/* blocks allocated (data, extent nodes, xattr) */
	__le64 parent;		/* directory holding it; internal objects: 0 */
	__le64 owner;		/* GS_T_INTERNAL: the owning object */
	__le64 child_head;	/* first internal object owned by this one */
	__le64 next_sib;	/* next internal object of the same owner */
	__le64 next_orphan;	/* orphan list link; in the root inode: the list head */
	__le64 xattr_blk;	/* block of extended attributes, 0: none */
	__le64 roots[2];	/* type-specific roots (graph, nd) */
	struct gs_dtime atime, mtime, ctime;
	struct gs_dxroot xroot;	/* extent tree root */
};
_Static_assert(sizeof(struct gs_dinode) == GS_INODE_SIZE, "gs_dinode is 256 bytes");

#define GS_IFL_ORPHAN	(1u << 0)	/* on the orphan list */
/* GS_T_SYMLINK: the target's size bytes live in xroot.e, after an xroot.h
 * of zeros (an empty extent tree); without it the target is the data of the
 * link's one internal object (child_head). */
#define GS_IFL_INLINE	(1u << 1)
/* xattr_blk is the inode number of an internal object (owned by this one)
 * holding the attributes as a gs_dxattr_shdr stream, not a block number. */
#define GS_IFL_XATTR_OBJ (1u << 2)
/* The object's data is metadata (a graph's translation table, an xattr
 * object): on a pool its blocks come from the mirrored zone, as metadata
 * blocks do.  Placement only: readers that do not know it lose nothing. */
#define GS_IFL_META	(1u << 3)
#define GS_INLINE_MAX	GS_XROOT_BYTES	/* inline bytes: xroot.e, behind an empty xroot.h */
#define GS_SYMLINK_MAX	4096u		/* symlink targets are shorter (PATH_MAX) */

/*
 * Object types (gs_dinode.type; enum gs_obj_type in gstore_fs.h):
 *   1 directory, 2 array (regular file), 3 graph, 4 N-D space, 5 internal,
 *   6 symlink (GS_FEAT_INCOMPAT_NSEXT): mode S_IFLNK | 0777, size = target
 *     length (1 .. 4095 bytes, no NUL); inline (GS_IFL_INLINE, at most
 *     GS_INLINE_MAX bytes) or in an internal object,
 *   7 special file (GS_FEAT_INCOMPAT_NSEXT): S_IFIFO, S_IFCHR, S_IFBLK or
 *     S_IFSOCK in mode, no data, roots[0] = the device number (dev_t as
 *     makedev(3) encodes it; 0 for fifos and sockets).
 * Arrays, symlinks and special files may have nlink > 1 (hard links);
 * their parent field names the directory of one of their names.
 */

/* Inode table blocks: gs_dblk, then inodes at GS_ITABLE_OFF + i * 256. */
#define GS_ITABLE_OFF	32u

/* ---- directories ---- */

/*
 * Directory blocks: gs_dblk, then records to the end of the block.  Every
 * byte belongs to exactly one record; a record's rec_len (a multiple of 8,
 * >= 16 + name_len rounded up) covers its name and any slack after it; a
 * record with ino 0 is free space.  Names are not NUL terminated.
 */
struct gs_ddirent {
	__le64 ino;
	__le16 rec_len;
	__u8 name_len;
	__u8 type;		/* enum gs_obj_type of the target */
	__le32 rsvd;
	char name[];
};
_Static_assert(sizeof(struct gs_ddirent) == 16, "gs_ddirent is 16 bytes");
#define GS_DIR_OFF	32u

/* ---- extended attributes ---- */

/*
 * Xattr block: gs_dblk, gs_dxattr_hdr, then entries packed back to back:
 * gs_dxattr, name (name_len bytes), value (value_len bytes), padded to 4.
 */
struct gs_dxattr_hdr {
	__le32 count;
	__le32 used;		/* bytes of entries after this header */
};
struct gs_dxattr {
	__u8 name_len;
	__u8 rsvd;
	__le16 value_len;
};
_Static_assert(sizeof(struct gs_dxattr) == 4, "gs_dxattr is 4 bytes");
#define GS_XATTR_OFF	40u

/*
 * Xattr object (GS_IFL_XATTR_OBJ, GS_FEAT_INCOMPAT_XATTR_OBJ): the data of an
 * internal object is a gs_dxattr_shdr, then @count entries back to back:
 * gs_dxattr2, name (name_len bytes), value (value_len bytes), padded to 4.
 * A change writes a whole new object and swaps it in with one transaction,
 * so a crash leaves the old set or the new one.  Values up to 65536 bytes.
 */
#define GS_XATTR_SMAGIC	0x52545841u	/* "AXTR" */
struct gs_dxattr_shdr {
	__le32 magic;
	__le32 count;
	__le64 used;		/* bytes of entries after this header */
};
_Static_assert(sizeof(struct gs_dxattr_shdr) == 16, "gs_dxattr_shdr is 16 bytes");
struct gs_dxattr2 {
	__u8 name_len;
	__u8 rsvd0;
	__le16 rsvd1;
	__le32 value_len;
};
_Static_assert(sizeof(struct gs_dxattr2) == 8, "gs_dxattr2 is 8 bytes");
#define GS_XATTR_VALUE_MAX	65536u

/* ---- journal ---- */

/*
 * A transaction is: one or more descriptor blocks, each followed by the block
 * images it lists, then a commit block.  It is complete when every
 * descriptor and the commit carry its sequence number and the fs uuid, all
 * their crcs match, and every image matches the crc its descriptor lists.
 * Positions wrap at the end of the ring.  Replay starts at j_tail with
 * j_seq and applies complete transactions in order; the first incomplete
 * one ends the journal.
 */
struct gs_djdesc {
	struct gs_dblk h;	/* type GS_BT_JDESC, owner = sequence */
	__u8 uuid[16];
	__le32 nr;		/* entries in this descriptor */
	__le32 rsvd;
	/* struct gs_djtag tags[nr] */
};
struct gs_djtag {
	__le64 blkno;		/* home of the image */
	__le32 crc;		/* crc32c of the image */
	__le32 flags;
};
_Static_assert(sizeof(struct gs_djdesc) == 56, "gs_djdesc is 56 bytes");
_Static_assert(sizeof(struct gs_djtag) == 16, "gs_djtag is 16 bytes");

struct gs_djcommit {
	struct gs_dblk h;	/* type GS_BT_JCOMMIT, owner = sequence */
	__u8 uuid[16];
	__le32 nr_blocks;	/* images in the transaction */
	__le32 nr_desc;		/* descriptor blocks in the transaction */
	__le64 time;		/* seconds since the epoch */
};
_Static_assert(sizeof(struct gs_djcommit) == 64, "gs_djcommit is 64 bytes");


/* ---- pools: one store over several member devices ---- */

/*
 * A pool member (image file, block device, NVMe namespace) starts with a
 * member superblock at byte 0 and an identical copy at byte 4096 (written
 * after the primary is durable).  The store the fs core sees is the pool's
 * logical device: a mirrored zone at logical 0 (the fs superblocks, bitmaps,
 * inode table and journal live there: zone_bytes covers them), then the data
 * area.  Both are cut into stripe units; logical chunk c of an area with
 * `copies` copies is stored in slots c * copies + k (k < copies), slot s on
 * member s % nmembers, row s / nmembers, at member byte
 * area_off + row * stripe_unit.  The zone starts at data_off on every
 * member, the data area right after the zone's rows.  A single-device store
 * has no member superblock and is read as before (its first block is the
 * fs superblock, whose magic differs).
 */
#define GS_POOL_MAGIC		0x626d6c6f6f707367ULL	/* "gspoolmb" read as le64 */
#define GS_POOL_VERSION		1u
#define GS_POOL_SB_SIZE		4096u			/* bytes covered by the crc */
#define GS_POOL_SB_COPY		4096u			/* byte offset of the copy */
#define GS_POOL_DATA_OFF	(1u << 20)		/* default data_off */
#define GS_POOL_MAX_MEMBERS	24u
#define GS_POOL_PATH_MAX	152u			/* bytes per path hint, NUL padded */
/* The dirty-region log: a bit per region of logical bytes (region 1 MiB or
 * more, a power of two, so the bits fit), set on every healthy member before a
 * write made while a member is failed is acknowledged; a member that comes
 * back is resynced only where bits are set (gstore pool replace M M). */
#define GS_POOL_WIB_OFF		(64u << 10)		/* member byte of the bitmap */
#define GS_POOL_WIB_SIZE	(64u << 10)		/* its bytes (bit i: region i) */

/* gs_dpool_member.layout */
enum {
	GS_POOL_STRIPE = 1,		/* data: one copy; the zone: two (n >= 2) */
	GS_POOL_MIRROR = 2,		/* everything on every member */
	GS_POOL_STRIPE_MIRROR = 3,	/* everything in two copies, striped */
};

/* gs_dpool_member.state */
#define GS_POOL_ST_OPEN		(1u << 0)	/* open for writing (not closed: a crash) */
#define GS_POOL_ST_RESYNC	(1u << 1)	/* opened after a crash: copies of chunks
						 * written then may differ until a resync */

/* gs_dpool_member.feature_incompat: an unknown bit refuses the pool */
#define GS_POOL_FEAT_INCOMPAT_ZONE	(1u << 0)	/* mirrored zone (always set) */
/* A member is being added (gstore pool add): logical bytes below reshape_pos
 * are laid out over nmembers, the rest still over reshape_from members with
 * the reshape_* copies.  Set on every member before the first byte moves,
 * cleared when the last has; older code must not read such a pool. */
#define GS_POOL_FEAT_INCOMPAT_RESHAPE	(1u << 1)
#define GS_POOL_FEAT_INCOMPAT_SUPP	(GS_POOL_FEAT_INCOMPAT_ZONE | GS_POOL_FEAT_INCOMPAT_RESHAPE)

struct gs_dpool_member {
	__le64 magic;
	__le32 crc;			/* crc32c of the 4096 bytes with crc = 0 */
	__le32 version;
	__le32 feature_incompat;
	__le32 layout;			/* GS_POOL_* */
	__le32 nmembers;		/* 1 .. GS_POOL_MAX_MEMBERS */
	__le32 index;			/* this member's slot number */
	__le32 stripe_unit;		/* bytes, power of two, >= 4096 */
	__le32 copies;			/* data area copies */
	__le32 zone_copies;		/* mirrored zone copies */
	__le32 state;			/* GS_POOL_ST_* */
	__le64 zone_bytes;		/* logical bytes of the zone (stripe units) */
	__le64 data_bytes;		/* logical bytes of the data area */
	__le64 data_off;		/* member byte where the zone's rows start */
	__le64 member_bytes;		/* bytes used on each member */
	__le64 events;			/* bumped whenever `failed` changes */
	__le64 failed;			/* bit per member known failed (stale) */
	__le64 ctime;			/* seconds since the epoch */
	__u8 pool_uuid[16];		/* the same on every member */
	__u8 member_uuid[16];		/* this member's own */
	/* an add in progress (GS_POOL_FEAT_INCOMPAT_RESHAPE), else 0 */
	__le32 reshape_from;		/* members before the add */
	__le32 reshape_copies;		/* data area copies before the add */
	__le32 reshape_zone_copies;	/* zone copies before the add */
	__le32 rsvd0;
	__le64 reshape_pos;		/* logical bytes already in the new layout */
	/* the dirty-region log (GS_POOL_WIB_OFF): regions written while a member was failed */
	__le64 wib_since;		/* events when it started (0: not in use) */
	__le32 wib_shift;		/* log2 of the region size, bytes */
	__le32 rsvd1;
	__le64 rsvd[34];
	/* where each member was at mkfs/replace (hints; devices= overrides) */
	char paths[GS_POOL_MAX_MEMBERS][GS_POOL_PATH_MAX];
};
_Static_assert(sizeof(struct gs_dpool_member) == GS_POOL_SB_SIZE, "member sb is 4096 bytes");

#endif /* GSTORE_FORMAT_H */
