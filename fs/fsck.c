// SPDX-License-Identifier: MIT
/*
 * fsck: check (and repair) an unmounted filesystem.
 *
 *   0. superblock: the primary, else the copy (repair rewrites the primary)
 *   1. journal: replay it (repair) or report that it needs recovery
 *   2. inodes: every in-use inode is sane, its extent tree loads, no block
 *      is claimed twice; bad inodes are cleared (repair)
 *   3. directories: blocks parse, entries point at live inodes of the right
 *      type, every directory has exactly one name; bad entries go (repair)
 *   4. bitmaps: the on-disk block and inode bitmaps equal what the inodes
 *      own (repair rewrites them)
 *   5. objects: link counts, parents, internal-object lists, orphans (freed:
 *      they are normal after a crash and not counted as errors), objects in
 *      no directory (repair links them into / as "lost+found-INO")
 *   6. N-D spaces: index entries against the data object and the allocator
 *      (fs/nd/nd_fsck.c; reported, not repaired)
 *
 * Repairs run through the ordinary metadata buffers and the journal, so an
 * interrupted repair is itself crash-safe.  Result: GS_FSCK_* bits as in
 * e2fsck.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "nd/nd_internal.h"

#define MAX_DUP_REPORTS	10

struct fck {
	struct gs_fs *fs;
	bool repair;
	gs_fsck_report report;
	void *arg;
	int result;
	uint64_t *used;		/* blocks owned by live inodes (+ metadata regions) */
	uint64_t *iuse;		/* live inodes */
	uint64_t *listed;	/* internal objects found on their owner's list */
	uint8_t *itype;		/* type of each live inode, 0: free or cleared */
	uint32_t *links;	/* directory entries naming each inode */
	uint32_t *subdirs;	/* subdirectories of each directory */
	uint64_t *dparent;	/* the directory naming a directory */
	uint64_t dups;
	uint64_t files, dirs, blocks;
};

static void say(struct fck *c, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (c->report)
		c->report(c->arg, line);
}

__attribute__((format(printf, 2, 3)))
static void note(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(c, fmt, ap);
	va_end(ap);
}

/* A finding: fixed (when we repair and can) or left uncorrected. */
__attribute__((format(printf, 3, 4)))
static void problem(struct fck *c, bool fixed, const char *fmt, ...)
{
	char buf[480];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	note(c, "%s%s", buf, fixed ? " (fixed)" : "");
	c->result |= fixed ? GS_FSCK_FIXED : GS_FSCK_UNCORRECTED;
}

static void set_bit(uint64_t *map, uint64_t i)
{
	map[i >> 6] |= 1ULL << (i & 63);
}

static bool dirlike(uint16_t t)
{
	return t == GS_T_DIR || t == GS_T_GRAPH || t == GS_T_ND;
}

/* ---- pass 2: inodes ---- */

static int put_dinode(struct fck *c, uint64_t ino, const struct inode_m *m)
{
	struct mbuf *mb;
	uint32_t off;
	int ret = mb_get(c->fs, itable_blk(c->fs, ino, &off), GS_BT_ITABLE, &mb);

	if (ret < 0)
		return ret;
	inode_encode((struct gs_dinode *)(mb->data + off), m);
	mb_dirty(c->fs, mb);
	return 0;
}

static int clear_inode(struct fck *c, uint64_t ino, const struct inode_m *m)
{
	struct inode_m z = { .generation = m->generation };

	return c->repair ? put_dinode(c, ino, &z) : 0;
}

static void claim(struct fck *c, uint64_t ino, uint64_t blk, uint64_t len)
{
	for (uint64_t b = blk; b < blk + len; b++) {
		if (c->used[b >> 6] >> (b & 63) & 1) {
			if (c->dups++ < MAX_DUP_REPORTS)
				problem(c, false, "block %" PRIu64 " of inode %" PRIu64
					" is also used elsewhere", b, ino);
			continue;
		}
		set_bit(c->used, b);
		c->blocks++;
	}
}

static int check_inode(struct fck *c, uint64_t ino, const struct gs_dinode *d)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *ip;
	struct xmap *x;
	uint32_t fmt;
	uint64_t nmeta = 0;
	int ret;

	ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	inode_decode(&ip->m, d);
	ip->ino = ino;
	if (!ip->m.type)
		goto out;
	fmt = ip->m.mode & S_IFMT;
	if (ino == 0 || ip->m.type < GS_T_DIR || ip->m.type >= GS_T_NTYPES ||
	    fmt != (dirlike(ip->m.type) ? S_IFDIR : ip->m.type == GS_T_SYMLINK ? S_IFLNK :
		    ip->m.type != GS_T_SPECIAL ? S_IFREG :
		    fmt == S_IFIFO || fmt == S_IFSOCK || fmt == S_IFCHR || fmt == S_IFBLK ? fmt : ~0u) ||
	    ip->m.size > GS_MAX_FILE_SIZE ||
	    (ip->m.type == GS_T_DIR && ip->m.size % fs->bs) ||
	    (ino == GS_ROOT_INO && ip->m.type != GS_T_DIR)) {
		problem(c, c->repair, "inode %" PRIu64 ": bad type, mode or size: cleared", ino);
		ret = clear_inode(c, ino, &ip->m);
		goto out_ret;
	}
	ret = xmap_load(fs, ip);
	if (ret == -EUCLEAN) {
		problem(c, c->repair, "inode %" PRIu64 ": extent tree is corrupt: cleared", ino);
		ret = clear_inode(c, ino, &ip->m);
		goto out_ret;
	}
	if (ret < 0)
		goto out_ret;
	x = &ip->map;
	if (ip->m.type == GS_T_DIR) {
		for (uint64_t b = 0; b < ip->m.size / fs->bs; b++) {
			bool inside = false;
			const struct gs_ext *e = xmap_lookup(x, b, &inside);

			if (!e || !inside || e->flags) {
				problem(c, c->repair, "directory %" PRIu64 ": block %" PRIu64
					" is not mapped: cleared", ino, b);
				ret = clear_inode(c, ino, &ip->m);
				goto out_ret;
			}
		}
	}
	if (ip->m.xattr_blk && !(ip->m.flags & GS_IFL_XATTR_OBJ)) {	/* else a child */
		ret = ip->m.xattr_blk >= fs->l.nblocks ? -EUCLEAN :
		      xattr_check(fs, ip->m.xattr_blk, ino);
		if (ret == -EUCLEAN) {
			problem(c, c->repair, "inode %" PRIu64 ": xattr block is corrupt: dropped",
				ino);
			ip->m.xattr_blk = 0;
			if (c->repair && (ret = put_dinode(c, ino, &ip->m)) < 0)
				goto out_ret;
		} else if (ret < 0) {
			goto out_ret;
		} else {
			claim(c, ino, ip->m.xattr_blk, 1);
			nmeta++;
		}
	}
	for (uint32_t i = 0; i < x->nleaves; i++) {
		for (uint32_t j = 0; j < x->leaves[i].n; j++)
			claim(c, ino, x->leaves[i].ex[j].pblk, x->leaves[i].ex[j].len);
		if (x->leaves[i].blk) {
			claim(c, ino, x->leaves[i].blk, 1);
			nmeta++;
		}
	}
	for (uint32_t i = 0; i < x->nidx; i++)
		claim(c, ino, x->idx[i], 1);
	nmeta += x->nidx;
	if (ip->m.blocks != x->mapped + nmeta) {
		problem(c, c->repair, "inode %" PRIu64 ": block count %" PRIu64 ", should be %"
			PRIu64, ino, ip->m.blocks, x->mapped + nmeta);
		ip->m.blocks = x->mapped + nmeta;
		if (c->repair && (ret = put_dinode(c, ino, &ip->m)) < 0)
			goto out_ret;
	}
	set_bit(c->iuse, ino);
	c->itype[ino] = ip->m.type;
	if (ip->m.type == GS_T_DIR)
		c->dirs++;
	else
		c->files++;
out:
	ret = 0;
out_ret:
	xmap_free(&ip->map);
	free(ip);
	return ret;
}

static int pass_inodes(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	uint32_t ipb = (fs->bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	uint8_t *copy = malloc(fs->bs);
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (uint64_t b = 0; b < fs->l.itable_blocks && !ret; b++) {
		uint64_t blk = fs->l.itable_start + b;
		struct mbuf *m;

		ret = mb_get(fs, blk, GS_BT_ITABLE, &m);
		if (ret == -EUCLEAN) {
			problem(c, c->repair, "inode table block %" PRIu64 " is corrupt: inodes %"
				PRIu64 "..%" PRIu64 " are lost", blk, b * ipb, b * ipb + ipb - 1);
			ret = c->repair ? mb_new(fs, blk, 0, GS_BT_ITABLE, &m) : 0;
			continue;
		}
		if (ret < 0)
			break;
		/* checking an inode may evict the buffer: work on a copy */
		memcpy(copy, m->data, fs->bs);
		for (uint32_t k = 0; k < ipb && !ret; k++) {
			uint64_t ino = b * ipb + k;

			if (ino >= fs->l.ninodes)
				break;
			ret = check_inode(c, ino, (const void *)(copy + GS_ITABLE_OFF +
								 k * GS_INODE_SIZE));
		}
	}
	free(copy);
	return ret;
}

/* ---- pass 3: directories ---- */

struct ent {
	char name[GS_NAME_MAX + 1];
	uint64_t ino;
	uint8_t type;
};

/* Parse every block of directory @ip; repair replaces a bad one by an
 * empty block.  Returns 1 if the directory can be indexed. */
static int check_dir_blocks(struct fck *c, struct gs_inode *ip)
{
	struct gs_fs *fs = c->fs;
	bool ok = true;
	int ret;

	for (uint32_t b = 0; b < ip->m.size / fs->bs; b++) {
		uint64_t pblk;
		struct mbuf *m;

		ret = dir_block_pblk(fs, ip, b, &pblk);
		if (ret < 0)
			return ret;
		ret = mb_get(fs, pblk, GS_BT_DIR, &m);
		if (!ret && ld64(((struct gs_dblk *)m->data)->owner) != ip->ino)
			ret = -EUCLEAN;
		if (!ret)
			ret = dir_parse(fs, m->data, pblk, b, NULL);
		if (ret >= 0)
			continue;
		if (ret != -EUCLEAN)
			return ret;
		problem(c, c->repair, "directory %" PRIu64 ": block %u is corrupt: its entries "
			"are lost", ip->ino, b);
		if (!c->repair) {
			ok = false;
			continue;
		}
		mb_forget(fs, pblk);
		ret = mb_new(fs, pblk, ip->ino, GS_BT_DIR, &m);
		if (ret < 0)
			return ret;
		((struct gs_ddirent *)(m->data + GS_DIR_OFF))->rec_len = st16(fs->bs - GS_DIR_OFF);
	}
	return ok;
}

static int check_dir(struct fck *c, uint64_t ino)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *dp;
	struct ent *v = NULL;
	uint32_t n = 0;
	int ret;

	ret = iget(fs, ino, &dp);
	if (ret < 0)
		return ret;
	ret = check_dir_blocks(c, dp);
	if (ret <= 0)
		goto put;
	ret = dir_load(fs, dp);
	if (ret < 0)
		goto put;
	v = malloc((dp->dir->count + 1) * sizeof(*v));
	if (!v) {
		ret = -ENOMEM;
		goto put;
	}
	for (uint32_t h = 0; h < dp->dir->nbuckets; h++)
		for (struct dirent_m *e = dp->dir->b[h]; e; e = e->hnext) {
			memcpy(v[n].name, e->name, e->name_len + 1);
			v[n].ino = e->ino;
			v[n].type = e->type;
			n++;
		}
	for (uint32_t i = 0; i < n && !ret; i++) {
		uint64_t t = v[i].ino;

		if (t >= fs->l.ninodes || !c->itype[t] || t == GS_ROOT_INO ||
		    c->itype[t] == GS_T_INTERNAL) {
			problem(c, c->repair, "directory %" PRIu64 ": entry '%s' points at free or "
				"invalid inode %" PRIu64 ": removed", ino, v[i].name, t);
			if (c->repair)
				ret = dir_del(fs, dp, v[i].name);
			continue;
		}
		if (v[i].type != c->itype[t]) {
			problem(c, c->repair, "directory %" PRIu64 ": entry '%s' has the wrong "
				"type", ino, v[i].name);
			if (c->repair)
				ret = dir_retarget(fs, dp, dindex_find(dp->dir, v[i].name), t,
						   c->itype[t]);
		}
		if (c->itype[t] == GS_T_DIR) {
			if (c->dparent[t]) {
				problem(c, c->repair, "directory %" PRIu64 " has a second name "
					"'%s' in %" PRIu64 ": removed", t, v[i].name, ino);
				if (c->repair)
					ret = dir_del(fs, dp, v[i].name);
				continue;
			}
			c->dparent[t] = ino;
			c->subdirs[ino]++;
		}
		c->links[t]++;
	}
put:
	free(v);
	iput(fs, dp);
	return ret < 0 ? ret : 0;
}

/* ---- pass 4: bitmaps ---- */

static int check_bitmap(struct fck *c, uint64_t start, uint64_t nblk, uint16_t type,
			const uint64_t *want, uint64_t nbits, const char *what)
{
	struct gs_fs *fs = c->fs;
	uint64_t per = (uint64_t)(fs->bs - GS_BITMAP_OFF) * 8, set_free = 0, leaked = 0;
	int ret = 0;

	for (uint64_t b = 0; b < nblk && !ret; b++) {
		struct mbuf *m;
		bool rewrite = false;
		uint8_t *bits;

		ret = mb_get(fs, start + b, type, &m);
		if (ret == -EUCLEAN) {
			problem(c, c->repair, "%s block %" PRIu64 " is corrupt: rebuilt", what,
				start + b);
			rewrite = true;
			ret = 0;
		} else if (ret < 0) {
			break;
		} else {
			bits = m->data + GS_BITMAP_OFF;
			for (uint64_t i = 0; i < per; i++) {
				uint64_t k = b * per + i;
				bool disk = bits[i >> 3] >> (i & 7) & 1;
				bool need = k >= nbits || (want[k >> 6] >> (k & 63) & 1);

				if (disk == need)
					continue;
				rewrite = true;
				if (need)
					set_free++;
				else
					leaked++;
			}
		}
		if (!rewrite || !c->repair)
			continue;
		mb_forget(fs, start + b);
		ret = mb_new(fs, start + b, 0, type, &m);
		if (ret < 0)
			break;
		bits = m->data + GS_BITMAP_OFF;
		for (uint64_t i = 0; i < per; i++) {
			uint64_t k = b * per + i;

			if (k >= nbits || (want[k >> 6] >> (k & 63) & 1))
				bits[i >> 3] |= 1u << (i & 7);
		}
	}
	if (set_free)
		problem(c, c->repair, "%s: %" PRIu64 " in use but marked free", what, set_free);
	if (leaked)
		problem(c, c->repair, "%s: %" PRIu64 " marked in use but owned by nothing", what,
			leaked);
	return ret;
}

/* ---- pass 5: objects ---- */

/* Walk the internal-object list of each owner; cut it at a bad link. */
static int check_child_lists(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	int ret = 0;

	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++) {
		struct gs_inode *op, *prev = NULL;
		uint64_t cur;

		if (!c->itype[ino] || c->itype[ino] == GS_T_INTERNAL)
			continue;
		ret = iget(fs, ino, &op);
		if (ret < 0)
			break;
		for (cur = op->m.child_head; cur && !ret;) {
			struct gs_inode *cp = NULL;
			bool bad = cur >= fs->l.ninodes || c->itype[cur] != GS_T_INTERNAL ||
				   (c->listed[cur >> 6] >> (cur & 63) & 1) || iget(fs, cur, &cp);

			if (!bad && cp->m.owner != ino) {
				iput(fs, cp);
				bad = true;
			}
			if (bad) {
				problem(c, c->repair, "object %" PRIu64 ": internal object list is "
					"broken at %" PRIu64 ": cut", ino, cur);
				if (c->repair) {
					struct gs_inode *fix = prev ? prev : op;

					if (prev)
						fix->m.next_sib = 0;
					else
						fix->m.child_head = 0;
					ret = iwrite(fs, fix);
				}
				break;
			}
			set_bit(c->listed, cur);
			cur = cp->m.next_sib;
			if (prev)
				iput(fs, prev);
			prev = cp;
		}
		if (prev)
			iput(fs, prev);
		iput(fs, op);
	}
	return ret;
}

static int check_object(struct fck *c, uint64_t ino, struct gs_inode *root)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *ip;
	uint32_t want;
	int ret = iget(fs, ino, &ip);

	if (ret == -ENOENT)
		return 0;	/* freed with its owner a moment ago */
	if (ret < 0)
		return ret;
	if (ip->m.type == GS_T_INTERNAL) {
		bool listed = c->listed[ino >> 6] >> (ino & 63) & 1;

		if (!listed && (ip->m.flags & GS_IFL_ORPHAN)) {
			note(c, "internal object %" PRIu64 " was orphaned: %s", ino,
			     c->repair ? "freed" : "left for the next mount");
			ret = c->repair ? ifree_object(fs, ip) : 0;
		} else if (!listed) {
			problem(c, c->repair, "internal object %" PRIu64 " has no owner: freed",
				ino);
			ret = c->repair ? ifree_object(fs, ip) : 0;
		} else if (ip->m.nlink != 1) {
			problem(c, c->repair, "internal object %" PRIu64 ": link count %u, "
				"should be 1", ino, ip->m.nlink);
			ip->m.nlink = 1;
			ret = c->repair ? iwrite(fs, ip) : 0;
		}
		goto put;
	}
	if (ino != GS_ROOT_INO && !c->links[ino]) {
		if ((ip->m.flags & GS_IFL_ORPHAN) && !ip->m.nlink) {
			/* unlinked while open when the system went down: normal */
			note(c, "orphan inode %" PRIu64 ": %s", ino,
			     c->repair ? "freed" : "left for the next mount");
			ret = c->repair ? ifree_object(fs, ip) : 0;
			goto put;
		}
		problem(c, c->repair, "inode %" PRIu64 " (type %u, %" PRIu64 " bytes) is in no "
			"directory: linked into / as lost+found-%" PRIu64, ino, ip->m.type,
			ip->m.size, ino);
		if (c->repair) {
			char name[40];

			snprintf(name, sizeof(name), "lost+found-%" PRIu64, ino);
			ret = dir_add(fs, root, name, ino, ip->m.type);
			if (ret < 0)
				goto put;
			c->links[ino] = 1;
			if (ip->m.type == GS_T_DIR) {
				c->dparent[ino] = GS_ROOT_INO;
				root->m.nlink++;
				c->subdirs[GS_ROOT_INO]++;
			}
			ret = iwrite(fs, root);
			if (ret < 0)
				goto put;
		}
	}
	if ((ip->m.flags & GS_IFL_ORPHAN) && c->links[ino]) {
		problem(c, c->repair, "inode %" PRIu64 " is on the orphan list but has names", ino);
		if (c->repair && (ret = orphan_unlist(fs, ip)) < 0)
			goto put;
	}
	want = ip->m.type == GS_T_DIR ? 2 + c->subdirs[ino] : c->links[ino];
	if (ip->m.nlink != want) {
		problem(c, c->repair, "inode %" PRIu64 ": link count %u, should be %u", ino,
			ip->m.nlink, want);
		ip->m.nlink = want;
	}
	if (ip->m.type == GS_T_DIR) {
		uint64_t p = ino == GS_ROOT_INO ? GS_ROOT_INO : c->dparent[ino];

		if (p && ip->m.parent != p) {
			problem(c, c->repair, "directory %" PRIu64 ": parent is %" PRIu64
				", should be %" PRIu64, ino, ip->m.parent, p);
			ip->m.parent = p;
		}
	}
	if (c->repair)
		ret = iwrite(fs, ip);
put:
	iput(fs, ip);
	return ret;
}

/* The orphan list must be a chain of flagged inodes; cut it where not. */
static int check_orphan_list(struct fck *c, struct gs_inode *root)
{
	struct gs_fs *fs = c->fs;
	uint64_t cur = root->m.next_orphan, n = 0;
	struct gs_inode *prev = NULL;
	int ret = 0;

	while (cur && !ret) {
		struct gs_inode *ip;

		if (cur >= fs->l.ninodes || !c->itype[cur] || n++ > fs->l.ninodes ||
		    iget(fs, cur, &ip)) {
			problem(c, c->repair, "orphan list is broken at inode %" PRIu64 ": cut",
				cur);
			if (c->repair) {
				struct gs_inode *fix = prev ? prev : root;

				fix->m.next_orphan = 0;
				ret = iwrite(fs, fix);
			}
			break;
		}
		if (!(ip->m.flags & GS_IFL_ORPHAN)) {
			problem(c, c->repair, "inode %" PRIu64 " is on the orphan list unflagged",
				cur);
			ip->m.flags |= GS_IFL_ORPHAN;
			if (c->repair)
				ret = iwrite(fs, ip);
		}
		cur = ip->m.next_orphan;
		if (prev)
			iput(fs, prev);
		prev = ip;
	}
	if (prev)
		iput(fs, prev);
	return ret;
}

static int pass_objects(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *root;
	int ret = check_child_lists(c);

	if (ret < 0)
		return ret;
	ret = iget(fs, GS_ROOT_INO, &root);
	if (ret < 0)
		return ret;
	ret = check_orphan_list(c, root);
	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++)
		if (c->itype[ino])
			ret = check_object(c, ino, root);
	iput(fs, root);
	return ret;
}

static void nd_problem(void *arg, const char *msg)
{
	problem(arg, false, "%s", msg);
}

static int pass_nd(struct fck *c)
{
	struct nd_fsck_env env = { .used = c->used, .nblocks = c->fs->l.nblocks,
				   .itype = c->itype, .ninodes = c->fs->l.ninodes,
				   .problem = nd_problem, .arg = c };
	int ret = 0;

	for (uint64_t ino = 1; ino < c->fs->l.ninodes && ret >= 0; ino++)
		if (c->itype[ino] == GS_T_ND)
			ret = nd_fsck_space(c->fs, ino, &env);
	return ret < 0 ? ret : 0;
}

/* ---- driver ---- */

static int fck_alloc(struct fck *c)
{
	const struct gs_layout *l = &c->fs->l;
	uint64_t bw = (l->nblocks + 63) / 64, iw = (l->ninodes + 63) / 64;

	c->used = calloc(bw, 8);
	c->iuse = calloc(iw, 8);
	c->listed = calloc(iw, 8);
	c->itype = calloc(l->ninodes, 1);
	c->links = calloc(l->ninodes, 4);
	c->subdirs = calloc(l->ninodes, 4);
	c->dparent = calloc(l->ninodes, 8);
	if (!c->used || !c->iuse || !c->listed || !c->itype || !c->links || !c->subdirs ||
	    !c->dparent)
		return -ENOMEM;
	for (uint64_t b = 0; b < l->itable_start + l->itable_blocks; b++)
		set_bit(c->used, b);
	for (uint64_t b = l->journal_start; b < l->journal_start + l->journal_blocks; b++)
		set_bit(c->used, b);
	set_bit(c->iuse, 0);
	return 0;
}

static void fck_free(struct fck *c)
{
	free(c->used);
	free(c->iuse);
	free(c->listed);
	free(c->itype);
	free(c->links);
	free(c->subdirs);
	free(c->dparent);
}

static int check_all(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	uint64_t *map, *imap;
	size_t bw = (fs->l.nblocks + 63) / 64 * 8, iw = (fs->l.ninodes + 63) / 64 * 8;
	int ret;

	ret = fck_alloc(c);
	if (ret < 0)
		return ret;
	ret = pass_inodes(c);
	if (ret < 0)
		return ret;
	if (c->itype[GS_ROOT_INO] != GS_T_DIR) {
		problem(c, false, "the root directory is gone");
		return 0;
	}
	/* from here on the allocator works from what the inodes own */
	map = malloc(bw);
	imap = malloc(iw);
	if (!map || !imap) {
		free(map);
		free(imap);
		return -ENOMEM;
	}
	memcpy(map, c->used, bw);
	memcpy(imap, c->iuse, iw);
	ret = alloc_adopt(fs, map, imap);
	if (ret < 0)
		return ret;
	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++)
		if (c->itype[ino] == GS_T_DIR)
			ret = check_dir(c, ino);
	if (!ret)
		ret = check_bitmap(c, fs->l.bbitmap_start, fs->l.bbitmap_blocks, GS_BT_BBITMAP,
				   fs->al.map, fs->l.nblocks, "block bitmap");
	if (!ret)
		ret = check_bitmap(c, fs->l.ibitmap_start, fs->l.ibitmap_blocks, GS_BT_IBITMAP,
				   fs->al.imap, fs->l.ninodes, "inode bitmap");
	if (!ret)
		ret = pass_objects(c);
	if (!ret)
		ret = pass_nd(c);
	return ret;
}

int gs_fs_fsck(const char *path, unsigned flags, gs_fsck_report report, void *arg)
{
	struct gs_fs_opts o = { .path = path };
	struct fck c = { .report = report, .arg = arg, .repair = flags & GS_FSCK_REPAIR };
	struct gs_fs *fs;
	uint64_t ntx = 0, nblk = 0;
	uint32_t state;
	int ret;

	if (flags & ~(GS_FSCK_REPAIR | GS_FSCK_FORCE | GS_FSCK_WAIT))
		return GS_FSCK_ERROR;
	if (!c.repair)
		o.flags |= GS_FS_RDONLY;
	if (flags & GS_FSCK_WAIT)
		o.flags |= GS_FS_WAIT;
	ret = fs_open_common(&fs, &o, true);
	if (ret == -EINVAL) {	/* no O_DIRECT here, or not gstore: try buffered */
		o.flags |= GS_FS_BUFFERED;
		ret = fs_open_common(&fs, &o, true);
	}
	if (ret < 0) {
		note(&c, "%s: cannot check: %s", path, ret == -EBUSY ? "in use (mounted?)" :
		     ret == -EUCLEAN ? "superblock is corrupt" : ret == -EINVAL ?
		     "not a gstore filesystem (or unsupported version)" : strerror(-ret));
		return GS_FSCK_ERROR;
	}
	c.fs = fs;
	if (fs->sb_from_copy) {
		problem(&c, c.repair, "primary superblock is corrupt: %s",
			c.repair ? "rewritten from the copy" : "using the copy");
	}
	ret = jnl_scan(fs, &ntx, &nblk);
	if (ret < 0)
		goto fail;
	if (ntx && !c.repair) {
		problem(&c, false, "journal holds %" PRIu64 " transactions: needs recovery "
			"(repair replays it)", ntx);
		goto done;
	}
	if (ntx) {
		ret = jnl_replay(fs, &ntx);
		if (ret < 0)
			goto fail;
		note(&c, "journal: replayed %" PRIu64 " transactions (%" PRIu64 " blocks)", ntx,
		     nblk);
	}
	state = ld32(fs->sb.state);
	if (!(flags & GS_FSCK_FORCE) && (state & GS_STATE_CLEAN) && !(state & GS_STATE_ERRORS) &&
	    !ntx && !fs->sb_from_copy) {
		note(&c, "%s: clean", path);
		goto done;
	}
	ret = check_all(&c);
	if (ret < 0)
		goto fail;
	if (c.repair) {
		ret = jnl_sync(fs, true);
		if (!ret)
			ret = jnl_checkpoint(fs);
		if (ret < 0)
			goto fail;
		fs->sb.state = st32(GS_STATE_CLEAN |
				    (c.result & GS_FSCK_UNCORRECTED ? GS_STATE_ERRORS : 0));
		ret = sb_write(fs);
		if (ret < 0)
			goto fail;
	}
	note(&c, "%s: %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 "/%" PRIu64
	     " blocks%s", path, c.files, c.dirs, c.blocks, fs->l.nblocks,
	     c.result & GS_FSCK_UNCORRECTED ? ", errors remain" : "");
	goto done;
fail:
	note(&c, "%s: check failed: %s", path, strerror(-ret));
	c.result |= GS_FSCK_ERROR;
done:
	fck_free(&c);
	gs_cache_destroy(fs->c);
	fs_close_common(fs);
	return c.result;
}
