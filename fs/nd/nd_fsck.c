// SPDX-License-Identifier: MIT
/*
 * N-D spaces as an fs object type: nd's entry in the fs core's type table
 * (fs/fs_type.h), and its fsck check of one space's index.
 *
 * The fs core has already checked the space as an object: its blocks and
 * those of its data object are owned and marked, its data object is on its
 * internal-object list.  What only nd knows is which slots the index points
 * at.  So: the superblock decodes and names an internal object as its data;
 * every node lies inside the index area and is pointed at once, no two nodes
 * overlap; every leaf entry is a slot below nslots, pointed at by one block
 * only, whose bytes are written data of the data object (no hole, no
 * unwritten block).
 *
 * Repair: a bad entry (leaf or node pointer) is zeroed, so the blocks below
 * it read as zeros ("never written") and no two blocks share a slot; the
 * slot it pointed at is leaked inside the data object, as after a crash.  A
 * space whose superblock is unusable is removed by the core (verdict
 * CLEAR): without its shape and index nothing of it can be read.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fs_type.h"
#include "nd_internal.h"

#define MAX_REPORTS	20

struct nck {
	struct gs_fs *fs;
	uint64_t ino;
	struct nd_layout L;
	struct nd_sbx x;
	const struct fs_fsck_env *env;
	uint64_t *slot_seen;		/* bitmap over nslots */
	struct { uint64_t off, len, ref; } *nodes;	/* ref: where its pointer is, 0: root */
	uint64_t nnodes, capnodes;
	uint64_t problems, slots;
};

static void report(struct nck *k, bool fixed, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(struct nck *k, bool fixed, const char *fmt, ...)
{
	char msg[256];
	int n;
	va_list ap;

	if (k->problems++ >= MAX_REPORTS) {
		if (k->problems == MAX_REPORTS + 1)
			k->env->problem(k->env, fixed, "nd space: more problems, not listed");
		return;
	}
	n = snprintf(msg, sizeof(msg), "nd space %" PRIu64 ": ", k->ino);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
	va_end(ap);
	k->env->problem(k->env, fixed, msg);
}

/* Repair: zero the index entry at byte @off of the space. */
static int drop(struct nck *k, uint64_t off)
{
	uint64_t zero = 0;
	ssize_t r;

	if (!k->env->repair)
		return 0;
	r = gs_fs_write(k->fs, k->ino, &zero, sizeof(zero), off);
	return r < 0 ? (int)r : 0;
}

/* Leaf entry @v at byte @at -> slot: in range, once, all of its bytes written
 * data of the data object (whose blocks the fs pass has checked are its own). */
static int check_slot(struct nck *k, const uint64_t *bc, uint64_t v, uint64_t at)
{
	bool fix = k->env->repair;
	uint64_t slot = v - 1;
	int64_t hole;

	if (v > k->x.nslots) {
		report(k, fix, "block %" PRIu64 " points at slot %" PRIu64 ", beyond the %" PRIu64
		       " allocated%s", nd_bid(&k->L, bc), slot, k->x.nslots, fix ? ": dropped" : "");
		return drop(k, at);
	}
	if (k->slot_seen[slot >> 6] >> (slot & 63) & 1) {
		report(k, fix, "slot %" PRIu64 " is referenced twice (again by block %" PRIu64
		       ")%s", slot, nd_bid(&k->L, bc), fix ? ": second reference dropped" : "");
		return drop(k, at);
	}
	hole = gs_fs_lseek(k->fs, k->x.data_ino, slot * k->x.slot_bytes, SEEK_HOLE);
	if (hole == -ENXIO || (hole >= 0 && (uint64_t)hole < slot * k->x.slot_bytes + k->x.stride)) {
		report(k, fix, "slot %" PRIu64 " is referenced but not allocated%s", slot,
		       fix ? ": dropped" : "");
		return drop(k, at);
	}
	if (hole < 0)
		return (int)hole;
	k->slot_seen[slot >> 6] |= 1ULL << (slot & 63);
	k->slots++;
	return 0;
}

static int node_add(struct nck *k, uint64_t off, uint64_t len, uint64_t ref)
{
	if (k->nnodes == k->capnodes) {
		uint64_t n = k->capnodes ? 2 * k->capnodes : 64;
		void *p = realloc(k->nodes, n * sizeof(*k->nodes));

		if (!p)
			return -ENOMEM;
		k->nodes = p;
		k->capnodes = n;
	}
	k->nodes[k->nnodes].off = off;
	k->nodes[k->nnodes].len = len;
	k->nodes[k->nnodes++].ref = ref;
	return 0;
}

/* Depth-first over the nodes; @bc holds the coordinates so far, @ref is
 * where the pointer to @node lives (0: the superblock's root).  Returns 1
 * when the root itself is unusable. */
static int walk(struct nck *k, uint64_t node, uint32_t level, uint64_t *bc, uint64_t ref)
{
	uint64_t n = k->L.nb[level], *e;
	ssize_t r;
	int ret = 0;

	if (node < GS_ND_SB_SIZE || node > k->x.index_end ||
	    n * 8 > k->x.index_end - node) {
		report(k, k->env->repair, "level-%u node at %" PRIu64 " is outside the index "
		       "area (end %" PRIu64 ")%s", level, node, k->x.index_end,
		       k->env->repair && ref ? ": dropped" : "");
		return ref ? drop(k, ref) : 1;
	}
	ret = node_add(k, node, n * 8, ref);
	if (ret)
		return ret;
	e = calloc(n, 8);
	if (!e)
		return -ENOMEM;
	r = gs_fs_read(k->fs, k->ino, e, n * 8, node);	/* short: never written, zeros */
	if (r < 0) {
		ret = r;
		goto out;
	}
	for (uint64_t i = 0; i < n && !ret; i++) {
		uint64_t v = le64toh(e[i]);

		if (!v)
			continue;
		bc[level] = i;
		if (level + 1 == k->L.ndims)
			ret = check_slot(k, bc, v, node + i * 8);
		else
			ret = walk(k, v, level + 1, bc, node + i * 8);
	}
out:
	free(e);
	return ret;
}

static int cmp_node(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* Two nodes overlap: the one that is not the root loses its pointer. */
static int check_overlaps(struct nck *k)
{
	int ret = 0;

	qsort(k->nodes, k->nnodes, sizeof(*k->nodes), cmp_node);
	for (uint64_t i = 1; i < k->nnodes && !ret; i++) {
		uint64_t ref = k->nodes[i].ref ? k->nodes[i].ref : k->nodes[i - 1].ref;

		if (k->nodes[i - 1].off + k->nodes[i - 1].len <= k->nodes[i].off)
			continue;
		report(k, k->env->repair, "index nodes at %" PRIu64 " and %" PRIu64 " overlap%s%s",
		       k->nodes[i - 1].off, k->nodes[i].off,
		       k->nodes[i - 1].off == k->nodes[i].off ? " (one node, two parents)" : "",
		       k->env->repair ? ": one pointer dropped" : "");
		ret = drop(k, ref);
	}
	return ret;
}

/* The space cannot be used at all: the core removes it (repair). */
static int unusable(struct nck *k, const char *why)
{
	report(k, k->env->repair, "%s%s", why, k->env->repair ? ": space removed" : "");
	return FS_FSCK_OBJ_CLEAR;
}

static int nd_check(struct gs_fs *fs, uint64_t ino, const struct fs_fsck_env *env)
{
	struct nck k = { .fs = fs, .ino = ino, .env = env };
	struct gs_nd_params p;
	uint64_t bc[ND_MAXD] = { 0 }, maxslots;
	struct gs_stat dst;
	int ret;

	ret = nd_fs_super(fs, ino, &p, &k.x);
	if (ret == -ENODATA)
		return FS_FSCK_OBJ_OK;	/* made, not formatted yet */
	if (ret == -EOPNOTSUPP) {	/* not damage: an older layout, left alone */
		report(&k, false, "slots padded for device alignment (made before leases): "
		       "unsupported");
		return FS_FSCK_OBJ_BAD;
	}
	if (ret == -EIO || (!ret && nd_layout_init(&k.L, &p)))
		return unusable(&k, "superblock is corrupt");
	if (ret)
		return ret;
	if (k.x.data_ino >= env->ninodes || env->itype[k.x.data_ino] != GS_T_INTERNAL ||
	    gs_fs_getattr(fs, k.x.data_ino, &dst))
		return unusable(&k, "its data object is not an internal object");
	/* nslots may run ahead of the data object, never by more than the space's blocks */
	maxslots = k.L.nblocks + dst.size / (k.x.slot_bytes ? k.x.slot_bytes : 1);
	if (!k.x.slot_bytes || k.x.stride < k.L.block_bytes || k.x.nslots > maxslots)
		return unusable(&k, "superblock: slot size, stride or slot count do not fit");
	k.slot_seen = calloc(k.x.nslots / 64 + 1, 8);
	if (!k.slot_seen)
		return -ENOMEM;
	if (k.x.root)
		ret = walk(&k, k.x.root, 0, bc, 0);
	if (ret == 1)
		ret = unusable(&k, "the index root is unusable");
	else if (!ret && k.nnodes > 1)
		ret = check_overlaps(&k);
	free(k.slot_seen);
	free(k.nodes);
	if (ret)
		return ret;
	return k.problems && !env->repair ? FS_FSCK_OBJ_BAD : FS_FSCK_OBJ_OK;
}

const struct fs_type_ops nd_type_ops = {
	.name = "N-D space",
	.ifmt = S_IFDIR,
	.check = nd_check,	/* its data object goes with it: nothing to destroy */
};
