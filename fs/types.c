// SPDX-License-Identifier: MIT
/*
 * The object types the fs core serves, by enum gs_obj_type (fs/fs_type.h),
 * and the ops of the core's own types (directories, arrays, internal
 * objects, symlinks, special files).
 *
 * A const table, not registration at run time: the set of types is fixed
 * when the library is built, the table is complete or the build (and
 * test_corrupt) says so, and no code runs before main.  Constructor
 * registration would also break in the static library, where an object file
 * nobody references (a type's ops) is never linked in; registration at
 * mount would need the mount to name every type anyway.
 */
#include <sys/stat.h>

#include "fs_internal.h"

/* Cached directory blocks must not outlive the directory: the blocks go
 * back to the allocator and may become another object's data. */
static int dir_destroy(struct gs_fs *fs, struct gs_inode *ip)
{
	struct xmap *m = &ip->map;
	int ret = xmap_load(fs, ip);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < m->nleaves; i++)
		for (uint32_t j = 0; j < m->leaves[i].n; j++)
			for (uint32_t k = 0; k < m->leaves[i].ex[j].len; k++)
				mb_forget(fs, m->leaves[i].ex[j].pblk + k);
	return 0;
}

static const struct fs_type_ops dir_type_ops = {
	.name = "directory",
	.ifmt = S_IFDIR,
	.destroy = dir_destroy,	/* its entries are checked by fsck's own passes */
};

static const struct fs_type_ops array_type_ops = {
	.name = "array",
	.ifmt = S_IFREG,
};

static const struct fs_type_ops internal_type_ops = {
	.name = "internal object",	/* its owner's type checks what it holds */
	.ifmt = S_IFREG,
};

static const struct fs_type_ops symlink_type_ops = {
	.name = "symlink",	/* its target is its data: the core checks it as such */
	.ifmt = S_IFLNK,
};

static const struct fs_type_ops special_type_ops = {
	.name = "special file",	/* fifo, socket, device: no data */
	.ifmt = 0,
};

const struct fs_type_ops *const fs_types[GS_T_NTYPES] = {
	[GS_T_DIR] = &dir_type_ops,
	[GS_T_ARRAY] = &array_type_ops,
	[GS_T_GRAPH] = &graph_type_ops,
	[GS_T_ND] = &nd_type_ops,
	[GS_T_INTERNAL] = &internal_type_ops,
	[GS_T_SYMLINK] = &symlink_type_ops,
	[GS_T_SPECIAL] = &special_type_ops,
};
