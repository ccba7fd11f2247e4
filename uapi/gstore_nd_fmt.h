/* SPDX-License-Identifier: MIT */
/*
 * gstore N-D space on-disk format (fs/nd*.c; gstore(5) "N-D SPACES").
 *
 * A GS_T_ND object's own data holds this superblock at byte 0 and the
 * N-level index nodes after GS_ND_SB_SIZE.  Building blocks live in one
 * internal object (data_ino): slot k occupies bytes [k * slot_bytes,
 * (k + 1) * slot_bytes) and holds the block (slot_bytes == block_stride,
 * dev_align 0).  Spaces made before direct leases may have padded slots
 * (slot_bytes > block_stride, the block at the first dev_align boundary of
 * the slot's device extent); they are refused.
 *
 * Index: a node of level i (0 = outermost dimension) is an array of
 * nblocks[i] __le64 entries.  For i < ndims - 1 an entry is the byte offset
 * of the level-(i+1) node below it; at the last level it is slot + 1.  Zero
 * means "nothing written below": such blocks read as zeros.  Nodes are
 * created on the first write below them and never freed.
 */
#ifndef GSTORE_ND_FMT_H
#define GSTORE_ND_FMT_H

#include <linux/types.h>

#define GS_ND_MAGIC	0x444e5347u	/* "GSND" */
#define GS_ND_VERSION	1u
#define GS_ND_SB_SIZE	4096u		/* first index node starts here */
#define GS_ND_DISK_DIMS	8

struct gs_nd_disk_super {
	__le32 magic;
	__le32 version;
	__le32 dtype;		/* enum gs_nd_dtype */
	__le32 elem_size;
	__le32 ndims;
	__le32 flags;		/* 0 */
	__le64 shape[GS_ND_DISK_DIMS];
	__le64 bb[GS_ND_DISK_DIMS];	/* building-block shape */
	__le64 block_stride;	/* bytes of a block in the data object */
	__le64 data_ino;	/* internal object holding the blocks */
	__le64 root;		/* byte offset of the level-0 node; 0: none */
	__le64 index_end;	/* next free byte for index nodes */
	__le64 nslots;		/* slots handed out */
	__le64 slot_bytes;	/* data-object bytes per slot (>= block_stride) */
	__le64 rsvd[7];
	__le32 dev_align;	/* device alignment of a block within its slot, 0: none */
	__le32 crc;		/* crc32c of the struct with crc = 0 */
};

_Static_assert(sizeof(struct gs_nd_disk_super) == 264, "gs_nd_disk_super layout");

#endif /* GSTORE_ND_FMT_H */
