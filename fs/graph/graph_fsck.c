// SPDX-License-Identifier: MIT
/*
 * Graphs as an fs object type: graph's entry in the fs core's type table
 * (fs/fs_type.h) and its fsck check.
 *
 * The fs core has already checked the graph object and its internal
 * objects as objects (inodes, extents, the owner's list).  What only the
 * graph knows is its root: one of the two root slots must be valid once
 * the object holds anything, and every object the root names must be an
 * internal object.  A graph failing that cannot be opened; repair lets the
 * core remove it (CLEAR).  Pages and delta records carry their own crcs and
 * are checked when read (gs_graph_open and the queries report them).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "../fs_type.h"
#include "graph_internal.h"

static bool internal_obj(const struct fs_fsck_env *env, uint64_t ino)
{
	return !ino || (ino < env->ninodes && env->itype[ino] == GS_T_INTERNAL);
}

/* The first object @r names that is not an internal object, 0 if none. */
static uint64_t bad_object(const struct fs_fsck_env *env, const struct gs_graph_root *r)
{
	uint64_t v[4 + 2 * 5];
	unsigned n = 0;

	v[n++] = le64toh(r->delta_obj);
	v[n++] = le64toh(r->redo_obj);
	v[n++] = le64toh(r->vdel_obj);
	v[n++] = le64toh(r->vdel_alt);
	for (unsigned d = 0; d < 2; d++) {
		v[n++] = le64toh(r->dir[d].pages_obj);
		v[n++] = le64toh(r->dir[d].gtt_obj);
		v[n++] = le64toh(r->dir[d].gtt_alt);
		v[n++] = le64toh(r->dir[d].vmap_obj);
		v[n++] = le64toh(r->dir[d].vmap_alt);
	}
	for (unsigned i = 0; i < n; i++)
		if (!internal_obj(env, v[i]))
			return v[i];
	return 0;
}

static int graph_check(struct gs_fs *fs, uint64_t ino, const struct fs_fsck_env *env)
{
	struct gs_graph_root r;
	struct gr_store *st;
	struct gs_stat s;
	char msg[160];
	uint64_t bad;
	int ret = gs_fs_getattr(fs, ino, &s);

	if (ret < 0)
		return ret;
	if (!s.size)
		return FS_FSCK_OBJ_OK;	/* made, nothing built yet */
	ret = gr_fs_store_new(&st, fs, ino);
	if (ret < 0)
		return ret;
	ret = gr_root_read(st, &r);
	st->ops->destroy(st);
	if (ret == -ENODATA) {
		snprintf(msg, sizeof(msg), "graph %" PRIu64 ": neither root slot is valid%s", ino,
			 env->repair ? ": graph removed" : "");
		env->problem(env, env->repair, msg);
		return FS_FSCK_OBJ_CLEAR;
	}
	if (ret < 0)
		return ret;
	bad = bad_object(env, &r);
	if (bad) {
		snprintf(msg, sizeof(msg), "graph %" PRIu64 ": its root names object %" PRIu64
			 ", which is not an internal object%s", ino, bad,
			 env->repair ? ": graph removed" : "");
		env->problem(env, env->repair, msg);
		return FS_FSCK_OBJ_CLEAR;
	}
	return FS_FSCK_OBJ_OK;
}

const struct fs_type_ops graph_type_ops = {
	.name = "graph",
	.ifmt = S_IFDIR,
	.check = graph_check,	/* its internal objects go with it: nothing to destroy */
};
