// SPDX-License-Identifier: MIT
/*
 * fsck: check (and repair) an unmounted filesystem.
 *
 *   0. superblock: the primary, else the copy (repair rewrites the primary)
 *   1. journal: replay it (repair) or report that it needs recovery
 *   2. inodes: every in-use inode is sane, its extent tree loads; the blocks
 *      each one owns are claimed, a block claimed twice is marked; bad inodes
 *      are cleared (repair).  Repair then looks, in blocks the bitmap marks
 *      used but nothing claims, for the directory blocks of directories that
 *      are gone (fsck_tree.c)
 *   3. bitmaps: the allocator adopts what the inodes own; the on-disk block
 *      and inode bitmaps are compared with it and rewritten (repair): they
 *      are never trusted
 *   4. blocks claimed twice: every owner but one gets its own copy
 *      (fsck_dup.c, e2fsck's passes 1B-1D)
 *   5. directories: dead directories and a dead root get inodes again
 *      (fsck_tree.c); blocks parse, entries point at live inodes of the right
 *      type, every directory has exactly one name; bad entries go (repair);
 *      a damaged root gets arrays/, graph/ and nd/ back
 *   6. objects: link counts, parents, internal-object lists, orphans (freed:
 *      they are normal after a crash and not counted as errors), objects in
 *      no directory (repair links them into /lost+found as "#INO")
 *   7. types: each object's type checks what only it knows, through the
 *      type's ops (fs_types[], fs/types.c); an object its type calls
 *      unusable is removed (repair)
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

#include "fsck_internal.h"

#define MAX_DUP_REPORTS	10

static void say(struct fck *c, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (c->report)
		c->report(c->arg, line);
}

void fck_note(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(c, fmt, ap);
	va_end(ap);
}

void fck_problem(struct fck *c, bool fixed, const char *fmt, ...)
{
	char buf[480];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fck_note(c, "%s%s", buf, fixed ? " (fixed)" : "");
	c->result |= fixed ? GS_FSCK_FIXED : GS_FSCK_UNCORRECTED;
}

/* The S_IFMT an inode of @type (known) must have, given its own @fmt. */
static uint32_t type_fmt(uint16_t type, uint32_t fmt)
{
	const struct fs_type_ops *o = fs_type(type);

	if (o->ifmt)
		return o->ifmt;
	/* special files: a fifo, socket or device, as their mode says */
	return fmt == S_IFIFO || fmt == S_IFSOCK || fmt == S_IFCHR || fmt == S_IFBLK ? fmt : ~0u;
}
/* ---- pass 2: inodes ---- */

int fck_put_dinode(struct fck *c, uint64_t ino, const struct inode_m *m)
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

	return c->repair ? fck_put_dinode(c, ino, &z) : 0;
}

/* Blocks claimed again are marked for fsck_dups(), which finds every owner. */
static int claim(struct fck *c, uint64_t ino, uint64_t blk, uint64_t len)
{
	for (uint64_t b = blk; b < blk + len; b++) {
		if (fck_test(c->used, b)) {
			if (!c->dup) {
				c->dup = calloc((c->fs->l.nblocks + 63) / 64, 8);
				if (!c->dup)
					return -ENOMEM;
			}
			if (c->dups++ < MAX_DUP_REPORTS)
				fck_problem(c, c->repair, "block %" PRIu64 " of inode %" PRIu64
					    " is also used elsewhere", b, ino);
			fck_set(c->dup, b);
			continue;
		}
		fck_set(c->used, b);
		c->blocks++;
	}
	return 0;
}

/* What iget() refuses beyond the type and mode, so later passes can load it. */
static bool bad_shape(const struct gs_fs *fs, const struct inode_m *m)
{
	bool inl = m->flags & GS_IFL_INLINE;

	if (m->type == GS_T_DIR)
		return m->size % fs->bs || m->size / fs->bs > UINT32_MAX;
	if (m->type != GS_T_SYMLINK)
		return inl;
	/* an inline target sits behind an empty extent-tree header */
	return !m->size || m->size >= GS_SYMLINK_MAX ||
	       (inl && (m->size > GS_INLINE_MAX || m->xroot.h.depth || m->xroot.h.nr));
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
	if (ino == 0 || !fs_type(ip->m.type) || fmt != type_fmt(ip->m.type, fmt) ||
	    ip->m.size > GS_MAX_FILE_SIZE || bad_shape(fs, &ip->m) ||
	    (ino == GS_ROOT_INO && ip->m.type != GS_T_DIR)) {
		fck_problem(c, c->repair, "inode %" PRIu64 ": bad type, mode or size: cleared", ino);
		ret = clear_inode(c, ino, &ip->m);
		goto out_ret;
	}
	ret = xmap_load(fs, ip);
	if (ret == -EUCLEAN) {
		fck_problem(c, c->repair, "inode %" PRIu64 ": extent tree is corrupt: cleared", ino);
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
				fck_problem(c, c->repair, "directory %" PRIu64 ": block %" PRIu64
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
			fck_problem(c, c->repair, "inode %" PRIu64 ": xattr block is corrupt: dropped",
				ino);
			ip->m.xattr_blk = 0;
			if (c->repair && (ret = fck_put_dinode(c, ino, &ip->m)) < 0)
				goto out_ret;
		} else if (ret < 0) {
			goto out_ret;
		} else {
			nmeta++;
			ret = claim(c, ino, ip->m.xattr_blk, 1);
			if (ret < 0)
				goto out_ret;
		}
	}
	for (uint32_t i = 0; i < x->nleaves && !ret; i++) {
		for (uint32_t j = 0; j < x->leaves[i].n && !ret; j++)
			ret = claim(c, ino, x->leaves[i].ex[j].pblk, x->leaves[i].ex[j].len);
		if (x->leaves[i].blk && !ret) {
			ret = claim(c, ino, x->leaves[i].blk, 1);
			nmeta++;
		}
	}
	for (uint32_t i = 0; i < x->nidx && !ret; i++)
		ret = claim(c, ino, x->idx[i], 1);
	if (ret < 0)
		goto out_ret;
	nmeta += x->nidx;
	if (ip->m.blocks != x->mapped + nmeta) {
		fck_problem(c, c->repair, "inode %" PRIu64 ": block count %" PRIu64 ", should be %"
			PRIu64, ino, ip->m.blocks, x->mapped + nmeta);
		ip->m.blocks = x->mapped + nmeta;
		if (c->repair && (ret = fck_put_dinode(c, ino, &ip->m)) < 0)
			goto out_ret;
	}
	fck_set(c->iuse, ino);
	c->itype[ino] = ip->m.type;
	c->iparent[ino] = ip->m.parent;
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
			fck_problem(c, c->repair, "inode table block %" PRIu64 " is corrupt: inodes %"
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

/* ---- pass 5: directories ---- */

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
		fck_problem(c, c->repair, "directory %" PRIu64 ": block %u is corrupt: its entries "
			"are lost", ip->ino, b);
		if (ip->ino == GS_ROOT_INO)
			c->root_damaged = true;
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
			fck_problem(c, c->repair, "directory %" PRIu64 ": entry '%s' points at free or "
				"invalid inode %" PRIu64 ": removed", ino, v[i].name, t);
			if (ino == GS_ROOT_INO)
				c->root_damaged = true;
			if (c->repair)
				ret = dir_del(fs, dp, v[i].name);
			continue;
		}
		if (v[i].type != c->itype[t]) {
			fck_problem(c, c->repair, "directory %" PRIu64 ": entry '%s' has the wrong "
				"type", ino, v[i].name);
			if (c->repair)
				ret = dir_retarget(fs, dp, dindex_find(dp->dir, v[i].name), t,
						   c->itype[t]);
		}
		if (c->itype[t] == GS_T_DIR) {
			if (c->dparent[t]) {
				fck_problem(c, c->repair, "directory %" PRIu64 " has a second name "
					"'%s' in %" PRIu64 ": removed", t, v[i].name, ino);
				if (c->repair)
					ret = dir_del(fs, dp, v[i].name);
				continue;
			}
			c->subdirs[ino]++;
		}
		if (!c->dparent[t])
			c->dparent[t] = ino;
		c->links[t]++;
	}
put:
	free(v);
	iput(fs, dp);
	return ret < 0 ? ret : 0;
}

/* ---- pass 3: bitmaps ---- */

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
			fck_problem(c, c->repair, "%s block %" PRIu64 " is corrupt: rebuilt", what,
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
		fck_problem(c, c->repair, "%s: %" PRIu64 " in use but marked free", what, set_free);
	if (leaked)
		fck_problem(c, c->repair, "%s: %" PRIu64 " marked in use but owned by nothing", what,
			leaked);
	return ret;
}

/* ---- pass 6: objects ---- */

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
				fck_problem(c, c->repair, "object %" PRIu64 ": internal object list is "
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
			fck_set(c->listed, cur);
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

static int check_object(struct fck *c, uint64_t ino)
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
			fck_note(c, "internal object %" PRIu64 " was orphaned: %s", ino,
			     c->repair ? "freed" : "left for the next mount");
			ret = c->repair ? ifree_object(fs, ip) : 0;
		} else if (!listed) {
			fck_problem(c, c->repair, "internal object %" PRIu64 " has no owner: freed",
				ino);
			ret = c->repair ? ifree_object(fs, ip) : 0;
		} else if (ip->m.nlink != 1) {
			fck_problem(c, c->repair, "internal object %" PRIu64 ": link count %u, "
				"should be 1", ino, ip->m.nlink);
			ip->m.nlink = 1;
			ret = c->repair ? iwrite(fs, ip) : 0;
		}
		goto put;
	}
	if (ino != GS_ROOT_INO && !c->links[ino]) {
		if ((ip->m.flags & GS_IFL_ORPHAN) && !ip->m.nlink) {
			/* unlinked while open when the system went down: normal */
			fck_note(c, "orphan inode %" PRIu64 ": %s", ino,
			     c->repair ? "freed" : "left for the next mount");
			ret = c->repair ? ifree_object(fs, ip) : 0;
			goto put;
		}
		fck_problem(c, c->repair, "inode %" PRIu64 " (%s, %" PRIu64 " bytes) is in no "
			    "directory%s", ino, fs_type(ip->m.type)->name, ip->m.size,
			    c->repair ? ": linked into /lost+found" : "");
		if (c->repair && (ret = fsck_reconnect(c, ip)) < 0)
			goto put;
	}
	if ((ip->m.flags & GS_IFL_ORPHAN) && c->links[ino]) {
		fck_problem(c, c->repair, "inode %" PRIu64 " is on the orphan list but has names", ino);
		if (c->repair && (ret = orphan_unlist(fs, ip)) < 0)
			goto put;
	}
	want = ip->m.type == GS_T_DIR ? 2 + c->subdirs[ino] : c->links[ino];
	if (ip->m.nlink != want) {
		fck_problem(c, c->repair, "inode %" PRIu64 ": link count %u, should be %u", ino,
			ip->m.nlink, want);
		ip->m.nlink = want;
	}
	if (ip->m.type == GS_T_DIR) {
		uint64_t p = ino == GS_ROOT_INO ? GS_ROOT_INO : c->dparent[ino];

		if (p && ip->m.parent != p) {
			fck_problem(c, c->repair, "directory %" PRIu64 ": parent is %" PRIu64
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
			fck_problem(c, c->repair, "orphan list is broken at inode %" PRIu64 ": cut",
				cur);
			if (c->repair) {
				struct gs_inode *fix = prev ? prev : root;

				fix->m.next_orphan = 0;
				ret = iwrite(fs, fix);
			}
			break;
		}
		if (!(ip->m.flags & GS_IFL_ORPHAN)) {
			fck_problem(c, c->repair, "inode %" PRIu64 " is on the orphan list unflagged",
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
	iput(fs, root);
	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++)
		if (c->itype[ino])
			ret = check_object(c, ino);
	return ret;
}

int fck_mkdir(struct fck *c, uint64_t parent, const char *name, uint32_t mode, uint64_t *ino)
{
	struct gs_stat st;
	int ret = gs_fs_create(c->fs, parent, name, GS_T_DIR, mode, 0, 0, &st);

	if (ret < 0)
		return ret;
	*ino = st.ino;
	fck_set(c->iuse, st.ino);
	c->itype[st.ino] = GS_T_DIR;
	c->iparent[st.ino] = parent;
	c->dparent[st.ino] = parent;
	c->links[st.ino] = 1;
	c->subdirs[parent]++;
	c->dirs++;
	return 0;
}

/* ---- pass 7: what each object's type knows ---- */

static void env_problem(const struct fs_fsck_env *env, bool fixed, const char *msg)
{
	fck_problem(env->priv, fixed, "%s", msg);
}

/* A name of @ino in loaded directory @dp, into @name; false if none. */
static bool name_of(const struct gs_inode *dp, uint64_t ino, char *name)
{
	for (uint32_t h = 0; h < dp->dir->nbuckets; h++)
		for (const struct dirent_m *e = dp->dir->b[h]; e; e = e->hnext)
			if (e->ino == ino) {
				memcpy(name, e->name, e->name_len + 1);
				return true;
			}
	return false;
}

/* Drop every name of @ino in directory @d. */
static int unname(struct fck *c, uint64_t d, uint64_t ino, bool dir)
{
	struct gs_fs *fs = c->fs;
	char name[GS_NAME_MAX + 1];
	struct gs_inode *dp;
	int ret = iget(fs, d, &dp);

	if (ret < 0)
		return ret == -ENOENT ? 0 : ret;
	ret = dir_load(fs, dp);
	while (!ret && name_of(dp, ino, name)) {
		ret = dir_del(fs, dp, name);
		if (!ret && dir) {
			dp->m.nlink--;
			c->subdirs[d]--;
		}
		itouch(dp, true, true);
	}
	if (!ret)
		ret = iwrite(fs, dp);
	iput(fs, dp);
	return ret;
}

/* Remove object @ino with its names (its type found it unusable). */
static int remove_object(struct fck *c, uint64_t ino)
{
	struct gs_fs *fs = c->fs;
	struct gs_inode *ip;
	bool dir;
	int ret = iget(fs, ino, &ip);

	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	dir = ip->m.type == GS_T_DIR;
	/* one name: where the directory pass saw it; hard links: look everywhere */
	for (uint64_t d = 1; d < fs->l.ninodes && !ret && c->links[ino]; d++)
		if (c->itype[d] == GS_T_DIR && (c->links[ino] > 1 || d == c->dparent[ino]))
			ret = unname(c, d, ino, dir);
	if (!ret)
		ret = ifree_object(fs, ip);
	iput(fs, ip);
	c->itype[ino] = 0;
	c->links[ino] = 0;
	return ret;
}

static int pass_types(struct fck *c)
{
	struct fs_fsck_env env = { .repair = c->repair, .ninodes = c->fs->l.ninodes,
				   .itype = c->itype, .problem = env_problem, .priv = c };
	int ret = 0;

	for (uint64_t ino = 1; ino < c->fs->l.ninodes && ret >= 0; ino++) {
		const struct fs_type_ops *t = fs_type(c->itype[ino]);

		if (!c->itype[ino] || !t->check)
			continue;
		ret = t->check(c->fs, ino, &env);
		if (ret == FS_FSCK_OBJ_CLEAR && c->repair)
			ret = remove_object(c, ino);
		else if (ret == FS_FSCK_OBJ_CLEAR || ret == FS_FSCK_OBJ_BAD)
			c->result |= GS_FSCK_UNCORRECTED;
		if (!ret)
			jnl_op_begin(c->fs);	/* keep the repair's transactions bounded */
	}
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
	c->iparent = calloc(l->ninodes, 8);
	if (!c->used || !c->iuse || !c->listed || !c->itype || !c->links || !c->subdirs ||
	    !c->dparent || !c->iparent)
		return -ENOMEM;
	for (uint64_t b = 0; b < l->itable_start + l->itable_blocks; b++)
		fck_set(c->used, b);
	for (uint64_t b = l->journal_start; b < l->journal_start + l->journal_blocks; b++)
		fck_set(c->used, b);
	fck_set(c->iuse, 0);
	return 0;
}

static void fck_free(struct fck *c)
{
	free(c->used);
	free(c->dup);
	free(c->iuse);
	free(c->listed);
	free(c->itype);
	free(c->links);
	free(c->subdirs);
	free(c->dparent);
	free(c->iparent);
	for (uint32_t i = 0; i < c->nlost; i++)
		free(c->lost[i].blk);
	free(c->lost);
}

/* From here on the allocator works from what the inodes own, and the
 * on-disk bitmaps are made to say the same before anything allocates. */
static int adopt_maps(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	size_t bw = (fs->l.nblocks + 63) / 64 * 8, iw = (fs->l.ninodes + 63) / 64 * 8;
	uint64_t *map = malloc(bw), *imap = malloc(iw);
	int ret;

	if (!map || !imap) {
		free(map);
		free(imap);
		return -ENOMEM;
	}
	memcpy(map, c->used, bw);
	memcpy(imap, c->iuse, iw);
	ret = alloc_adopt(fs, map, imap);
	if (!ret)
		ret = check_bitmap(c, fs->l.bbitmap_start, fs->l.bbitmap_blocks, GS_BT_BBITMAP,
				   fs->al.map, fs->l.nblocks, "block bitmap");
	if (!ret)
		ret = check_bitmap(c, fs->l.ibitmap_start, fs->l.ibitmap_blocks, GS_BT_IBITMAP,
				   fs->al.imap, fs->l.ninodes, "inode bitmap");
	return ret;
}

static int check_all(struct fck *c)
{
	struct gs_fs *fs = c->fs;
	int ret;

	ret = fck_alloc(c);
	if (!ret)
		ret = pass_inodes(c);
	if (!ret && c->repair)
		ret = fsck_find_lost_dirs(c);
	if (ret < 0)
		return ret;
	if (c->itype[GS_ROOT_INO] != GS_T_DIR) {	/* repair rebuilds it */
		fck_problem(c, false, "the root directory is gone");
		return 0;
	}
	ret = adopt_maps(c);
	if (!ret && c->dup && c->repair)
		ret = fsck_dups(c);
	if (!ret && c->repair)
		ret = fsck_rebuild_dirs(c);
	for (uint64_t ino = 1; ino < fs->l.ninodes && !ret; ino++)
		if (c->itype[ino] == GS_T_DIR)
			ret = check_dir(c, ino);
	if (!ret && c->repair && c->root_damaged)
		ret = fsck_type_dirs(c);
	if (!ret)
		ret = pass_objects(c);
	if (!ret)
		ret = pass_types(c);
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
		fck_note(&c, "%s: cannot check: %s", path, ret == -EBUSY ? "in use (mounted?)" :
		     ret == -EUCLEAN ? "superblock is corrupt" : ret == -EINVAL ?
		     "not a gstore filesystem (or unsupported version)" : strerror(-ret));
		return GS_FSCK_ERROR;
	}
	c.fs = fs;
	if (fs->sb_from_copy) {
		fck_problem(&c, c.repair, "primary superblock is corrupt: %s",
			c.repair ? "rewritten from the copy" : "using the copy");
	}
	ret = jnl_scan(fs, &ntx, &nblk);
	if (ret < 0)
		goto fail;
	if (ntx && !c.repair) {
		fck_problem(&c, false, "journal holds %" PRIu64 " transactions: needs recovery "
			"(repair replays it)", ntx);
		goto done;
	}
	if (ntx) {
		ret = jnl_replay(fs, &ntx);
		if (ret < 0)
			goto fail;
		fck_note(&c, "journal: replayed %" PRIu64 " transactions (%" PRIu64 " blocks)", ntx,
		     nblk);
	}
	state = ld32(fs->sb.state);
	if (!(flags & GS_FSCK_FORCE) && (state & GS_STATE_CLEAN) && !(state & GS_STATE_ERRORS) &&
	    !ntx && !fs->sb_from_copy) {
		fck_note(&c, "%s: clean", path);
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
	fck_note(&c, "%s: %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 "/%" PRIu64
	     " blocks%s", path, c.files, c.dirs, c.blocks, fs->l.nblocks,
	     c.result & GS_FSCK_UNCORRECTED ? ", errors remain" : "");
	goto done;
fail:
	fck_note(&c, "%s: check failed: %s", path, strerror(-ret));
	c.result |= GS_FSCK_ERROR;
done:
	fck_free(&c);
	gs_cache_destroy(fs->c);
	fs_close_common(fs);
	return c.result;
}
