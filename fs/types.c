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
#include <inttypes.h>
#include <stdio.h>
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

/* A target too long for the inode is the data of the link's one internal
 * object: it must be there, and hold the whole target. */
static int symlink_check(struct gs_fs *fs, uint64_t ino, const struct fs_fsck_env *env)
{
	uint64_t child = 0, want = 0, have = 0;
	struct gs_inode *ip;
	char msg[160];
	int ret;

	pthread_mutex_lock(&fs->ns);
	ret = iget(fs, ino, &ip);
	if (!ret) {
		if (!(ip->m.flags & GS_IFL_INLINE)) {
			child = ip->m.child_head;
			want = ip->m.size;
		}
		iput(fs, ip);
	}
	if (!ret && child && child < env->ninodes && env->itype[child] == GS_T_INTERNAL &&
	    !iget(fs, child, &ip)) {
		have = ip->m.size;
		iput(fs, ip);
	}
	pthread_mutex_unlock(&fs->ns);
	if (ret < 0 || have >= want)
		return ret < 0 ? ret : FS_FSCK_OBJ_OK;
	snprintf(msg, sizeof(msg), "symlink %" PRIu64 ": its %" PRIu64 "-byte target is %s%s",
		 ino, want, child ? "cut short" : "gone", env->repair ? ": link removed" : "");
	env->problem(env, env->repair, msg);
	return FS_FSCK_OBJ_CLEAR;
}

static const struct fs_type_ops symlink_type_ops = {
	.name = "symlink",
	.ifmt = S_IFLNK,
	.check = symlink_check,
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
