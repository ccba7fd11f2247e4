/* SPDX-License-Identifier: MIT */
/*
 * fsck's private state, shared by fs/fsck.c (driver and the passes over
 * inodes, directories, bitmaps and objects), fs/fsck_dup.c (blocks claimed
 * twice) and fs/fsck_tree.c (lost directories, root, type directories,
 * lost+found).
 */
#ifndef GS_FSCK_INTERNAL_H
#define GS_FSCK_INTERNAL_H

#include "fs_internal.h"

/* A directory inode found dead whose blocks still carry its number. */
struct lost_dir {
	uint64_t ino;
	uint32_t n, cap;
	uint64_t *blk;		/* its directory blocks, ascending */
};

struct fck {
	struct gs_fs *fs;
	bool repair;
	gs_fsck_report report;
	void *arg;
	int result;
	uint64_t *used;		/* blocks owned by live inodes (+ metadata regions) */
	uint64_t *dup;		/* blocks claimed more than once (NULL: none yet) */
	uint64_t *iuse;		/* live inodes */
	uint64_t *listed;	/* internal objects found on their owner's list */
	uint8_t *itype;		/* type of each live inode, 0: free or cleared */
	uint32_t *links;	/* directory entries naming each inode */
	uint32_t *subdirs;	/* subdirectories of each directory */
	uint64_t *dparent;	/* the (first) directory naming each inode */
	uint64_t *iparent;	/* each live inode's own parent field */
	struct lost_dir *lost;	/* dead directories to rebuild (repair) */
	uint32_t nlost;
	bool root_damaged;	/* the root lost entries: check the type directories */
	uint64_t lf;		/* lost+found, 0: not made or found yet */
	uint64_t dups;		/* claims of blocks already claimed */
	uint64_t files, dirs, blocks;
};

__attribute__((format(printf, 2, 3)))
void fck_note(struct fck *c, const char *fmt, ...);
/* A finding: fixed (when we repair and can) or left uncorrected. */
__attribute__((format(printf, 3, 4)))
void fck_problem(struct fck *c, bool fixed, const char *fmt, ...);

static inline void fck_set(uint64_t *map, uint64_t i)
{
	map[i >> 6] |= 1ULL << (i & 63);
}

static inline bool fck_test(const uint64_t *map, uint64_t i)
{
	return map[i >> 6] >> (i & 63) & 1;
}

int fck_put_dinode(struct fck *c, uint64_t ino, const struct inode_m *m);
/* Make directory @name in @parent (a new inode) and count it. */
int fck_mkdir(struct fck *c, uint64_t parent, const char *name, uint32_t mode, uint64_t *ino);

/* fsck_dup.c: passes 1B-1D, after alloc_adopt().  Repair only. */
int fsck_dups(struct fck *c);

/* fsck_tree.c */
/* Before alloc_adopt(): find the blocks of dead directories (repair). */
int fsck_find_lost_dirs(struct fck *c);
/* After it: give them (and a lost root) their inodes back. */
int fsck_rebuild_dirs(struct fck *c);
/* After the directory pass: arrays/, graph/, nd/ in the root. */
int fsck_type_dirs(struct fck *c);
/* Link an object that has no name into lost+found as "#INO". */
int fsck_reconnect(struct fck *c, struct gs_inode *ip);

#endif /* GS_FSCK_INTERNAL_H */
