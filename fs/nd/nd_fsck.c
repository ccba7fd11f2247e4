// SPDX-License-Identifier: MIT
/*
 * N-D spaces: the fsck pass over one space's index (called by fs/fsck.c
 * after the inodes, bitmaps and objects are checked).
 *
 * The fs part of fsck already knows that the blocks of the data object are
 * owned and marked in the bitmap; what only nd knows is which slots the
 * index points at.  So: the superblock decodes and names an internal object
 * as its data; every node lies inside the index area and is pointed at once,
 * no two nodes overlap; every leaf entry is a slot below nslots, pointed at
 * by one block only, whose bytes are written data of the data object (no
 * hole, no unwritten block).  Findings are reported,
 * not repaired (like double ownership in the fs pass): the index is the only
 * record of which block is where, and guessing would hide the damage.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "nd_internal.h"

#define MAX_REPORTS	20

struct nck {
	struct gs_fs *fs;
	uint64_t ino;
	struct nd_layout L;
	struct nd_sbx x;
	const struct nd_fsck_env *env;
	uint64_t *slot_seen;		/* bitmap over nslots */
	struct { uint64_t off, len; } *nodes;
	uint64_t nnodes, capnodes;
	uint64_t problems, slots;
};

static void report(struct nck *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(struct nck *k, const char *fmt, ...)
{
	char msg[256];
	int n;
	va_list ap;

	if (k->problems++ >= MAX_REPORTS) {
		if (k->problems == MAX_REPORTS + 1)
			k->env->problem(k->env->arg, "nd space: more problems, not listed");
		return;
	}
	n = snprintf(msg, sizeof(msg), "nd space %" PRIu64 ": ", k->ino);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
	va_end(ap);
	k->env->problem(k->env->arg, msg);
}

/* Leaf entry -> slot: in range, once, all of its bytes written data of the
 * data object (whose blocks the fs pass has checked are its own). */
static int check_slot(struct nck *k, const uint64_t *bc, uint64_t v)
{
	uint64_t slot = v - 1;
	int64_t hole;

	if (v > k->x.nslots) {
		report(k, "block %" PRIu64 " points at slot %" PRIu64 ", beyond the %" PRIu64
		       " allocated", nd_bid(&k->L, bc), slot, k->x.nslots);
		return 0;
	}
	if (k->slot_seen[slot >> 6] >> (slot & 63) & 1) {
		report(k, "slot %" PRIu64 " is referenced twice (again by block %" PRIu64 ")",
		       slot, nd_bid(&k->L, bc));
		return 0;
	}
	k->slot_seen[slot >> 6] |= 1ULL << (slot & 63);
	k->slots++;
	hole = gs_fs_lseek(k->fs, k->x.data_ino, slot * k->x.slot_bytes, SEEK_HOLE);
	if (hole == -ENXIO || (hole >= 0 && (uint64_t)hole < slot * k->x.slot_bytes + k->x.stride)) {
		report(k, "slot %" PRIu64 " is referenced but not allocated", slot);
		return 0;
	}
	return hole < 0 ? (int)hole : 0;
}

static int node_add(struct nck *k, uint64_t off, uint64_t len)
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
	k->nodes[k->nnodes++].len = len;
	return 0;
}

/* Depth-first over the nodes; @bc holds the coordinates so far. */
static int walk(struct nck *k, uint64_t node, uint32_t level, uint64_t *bc)
{
	uint64_t n = k->L.nb[level], *e;
	ssize_t r;
	int ret = 0;

	if (node < GS_ND_SB_SIZE || node > k->x.index_end ||
	    n * 8 > k->x.index_end - node) {
		report(k, "level-%u node at %" PRIu64 " is outside the index area (end %" PRIu64
		       ")", level, node, k->x.index_end);
		return 0;
	}
	ret = node_add(k, node, n * 8);
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
			ret = check_slot(k, bc, v);
		else
			ret = walk(k, v, level + 1, bc);
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

int nd_fsck_space(struct gs_fs *fs, uint64_t ino, const struct nd_fsck_env *env)
{
	struct nck k = { .fs = fs, .ino = ino, .env = env };
	struct gs_nd_params p;
	uint64_t bc[ND_MAXD] = { 0 }, maxslots;
	struct gs_stat dst;
	int ret;

	ret = nd_fs_super(fs, ino, &p, &k.x);
	if (ret == -ENODATA)
		return 0;	/* made, not formatted yet */
	if (ret == -EOPNOTSUPP) {
		report(&k, "slots padded for device alignment (made before leases): unsupported");
		return 1;
	}
	if (ret == -EIO || (!ret && nd_layout_init(&k.L, &p))) {
		report(&k, "superblock is corrupt");
		return 1;
	}
	if (ret)
		return ret;
	if (k.x.data_ino >= env->ninodes || env->itype[k.x.data_ino] != GS_T_INTERNAL ||
	    gs_fs_getattr(fs, k.x.data_ino, &dst)) {
		report(&k, "data object %" PRIu64 " is not an internal object", k.x.data_ino);
		return 1;
	}
	/* nslots may run ahead of the data object, never by more than the space's blocks */
	maxslots = k.L.nblocks + dst.size / (k.x.slot_bytes ? k.x.slot_bytes : 1);
	if (!k.x.slot_bytes || k.x.stride < k.L.block_bytes || k.x.nslots > maxslots) {
		report(&k, "superblock: slot size %" PRIu64 ", stride %" PRIu64 ", %" PRIu64
		       " slots do not fit the space", k.x.slot_bytes, k.x.stride, k.x.nslots);
		return 1;
	}
	k.slot_seen = calloc(k.x.nslots / 64 + 1, 8);
	if (!k.slot_seen)
		return -ENOMEM;
	if (k.x.root)
		ret = walk(&k, k.x.root, 0, bc);
	if (!ret && k.nnodes > 1) {
		qsort(k.nodes, k.nnodes, sizeof(*k.nodes), cmp_node);
		for (uint64_t i = 1; i < k.nnodes; i++)
			if (k.nodes[i - 1].off + k.nodes[i - 1].len > k.nodes[i].off) {
				report(&k, "index nodes at %" PRIu64 " and %" PRIu64 " overlap%s",
				       k.nodes[i - 1].off, k.nodes[i].off,
				       k.nodes[i - 1].off == k.nodes[i].off ? " (one node, two "
				       "parents)" : "");
			}
	}
	free(k.slot_seen);
	free(k.nodes);
	if (ret < 0)
		return ret;
	return k.problems ? 1 : 0;
}
