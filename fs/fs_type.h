/* SPDX-License-Identifier: MIT */
/*
 * Object types and the fs core: what a type tells the core about itself
 * (struct fs_type_ops, one per enum gs_obj_type, in fs_types[]) and what the
 * core lends a type's fsck check (struct fs_fsck_env).  The core (catalog,
 * fsck) knows a type only through its entry; a type's registration file
 * (fs/nd/nd_fsck.c, fs/graph/graph_fsck.c) includes this header and nothing
 * else of the core.
 *
 * Adding a type: a value in enum gs_obj_type before GS_T_NTYPES
 * (include/gstore_fs.h), its ops (extern below if outside the core) and one
 * line in fs_types[] (fs/types.c).  The array is declared GS_T_NTYPES long,
 * so an entry past the enum is a build error; tests/unit/fs/test_corrupt.c
 * fails on a hole.
 */
#ifndef GS_FS_TYPE_H
#define GS_FS_TYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "gstore_fs.h"

struct gs_inode;

/* A type's fsck verdict on one object. */
enum {
	FS_FSCK_OBJ_OK = 0,	/* clean, or repaired by the type (findings said so) */
	FS_FSCK_OBJ_BAD = 1,	/* problems reported and left (no repair asked) */
	FS_FSCK_OBJ_CLEAR = 2,	/* unusable: the core removes it with its names, data
				 * and internal objects (repair), or reports it */
};

/* What fsck knows of the fs, lent to a type's check. */
struct fs_fsck_env {
	bool repair;		/* fsck -y: the type may fix what it finds */
	uint64_t ninodes;
	const uint8_t *itype;	/* enum gs_obj_type of each live inode, 0: free */
	/* One finding, one line; @fixed: the type repaired it. */
	void (*problem)(const struct fs_fsck_env *env, bool fixed, const char *msg);
	void *priv;		/* the core's */
};

struct fs_type_ops {
	const char *name;	/* for messages */
	uint32_t ifmt;		/* S_IFDIR, S_IFREG or S_IFLNK: how objects of the type
				 * show; 0: their mode says (special files) */
	/*
	 * fsck: @ino passed the core's checks (inode, extent tree, names, link
	 * counts, internal-object list); check what only the type knows, in
	 * the object's data through gs_fs_read()/gs_fs_write().  Returns
	 * FS_FSCK_OBJ_* or -errno when the check itself failed.  NULL: nothing
	 * beyond the core's checks.
	 */
	int (*check)(struct gs_fs *fs, uint64_t ino, const struct fs_fsck_env *env);
	/*
	 * The object is being freed, under fs->ns (so no gs_fs_* calls): drop
	 * what the core does not free itself.  The core then frees its xattrs,
	 * extents, blocks and the internal objects on its list.  NULL: nothing.
	 */
	int (*destroy)(struct gs_fs *fs, struct gs_inode *ip);
};

/* Indexed by enum gs_obj_type; [0] is NULL (a free inode). */
extern const struct fs_type_ops *const fs_types[GS_T_NTYPES];

/* The object types outside the core. */
extern const struct fs_type_ops graph_type_ops;	/* fs/graph/graph_fsck.c */
extern const struct fs_type_ops nd_type_ops;	/* fs/nd/nd_fsck.c */

/* The ops of @type, NULL for 0 or an unknown type. */
static inline const struct fs_type_ops *fs_type(uint32_t type)
{
	return type < GS_T_NTYPES ? fs_types[type] : NULL;
}

#endif /* GS_FS_TYPE_H */
