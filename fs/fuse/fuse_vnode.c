// SPDX-License-Identifier: MIT
/*
 * gstorefs virtual nodes: the registry that gives virtual files and
 * directories their inode numbers, and the built-in /.gstore type.
 *
 * A node is created by the first lookup of its name, found again by later
 * lookups of the same (parent, name), and freed when the kernel has
 * forgotten every lookup of it.  One mutex guards both hash tables: virtual
 * lookups are rare next to reads and writes, which never take it (they find
 * the node by ino under the same lock, but only for the few virtual files).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse_internal.h"
#include "gstore_q.h"
#include "stream.h"
#include "uring.h"

#define VHASH_BITS	10
#define VHASH_SIZE	(1u << VHASH_BITS)
/*
 * Dynamic nodes: GS_VINO_BIT | VINO_DYN | hash(parent ino, name), probing
 * upwards on a collision, so readdir can tell a name's ino before any lookup
 * (gs_vreg_ino_hint) and repeated mounts give the same numbers.  Fixed nodes
 * (GS_VINO_META ...) lie below VINO_DYN.
 */
#define VINO_DYN	(GS_VINO_BIT | (1ULL << 62))

struct gs_vreg {
	pthread_mutex_t lock;
	unsigned ncached;	/* nodes with ->cached: most mounts have none */
	struct gs_vnode *by_ino[VHASH_SIZE];
	struct gs_vnode *by_name[VHASH_SIZE];
};

static uint32_t hash_ino(uint64_t ino)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ULL) >> (64 - VHASH_BITS));
}

static uint64_t hash64_name(uint64_t parent, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ parent;	/* FNV-1a */

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ULL;
	return h;
}

static uint32_t hash_name(uint64_t parent, const char *name)
{
	return hash_ino(hash64_name(parent, name));
}

void gs_vreg_set_cached(struct gs_vreg *r, struct gs_vnode *vn)
{
	pthread_mutex_lock(&r->lock);
	if (!vn->cached) {
		vn->cached = 1;
		r->ncached++;
	}
	pthread_mutex_unlock(&r->lock);
}

unsigned gs_vreg_cached(struct gs_vreg *r, uint64_t obj, uint64_t except, uint64_t *inos,
			unsigned max)
{
	unsigned n = 0;

	if (!__atomic_load_n(&r->ncached, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&r->lock);
	for (uint32_t i = 0; i < VHASH_SIZE && n < max; i++)
		for (struct gs_vnode *vn = r->by_ino[i]; vn && n < max; vn = vn->ino_next)
			if (vn->cached && vn->obj == obj && vn->ino != except)
				inos[n++] = vn->ino;
	pthread_mutex_unlock(&r->lock);
	return n;
}

uint64_t gs_vreg_ino_hint(uint64_t parent, const char *name)
{
	return VINO_DYN | (hash64_name(parent, name) & (VINO_DYN - 1));
}

struct gs_vreg *gs_vreg_new(void)
{
	struct gs_vreg *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	return r;
}

static void vnode_free(struct gs_fuse *gf, struct gs_vnode *vn)
{
	if (vn->ops && vn->ops->forget)
		vn->ops->forget(gf, vn);
	free(vn);
}

void gs_vreg_free(struct gs_fuse *gf, struct gs_vreg *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < VHASH_SIZE; i++) {
		struct gs_vnode *vn = r->by_ino[i], *next;

		for (; vn; vn = next) {
			next = vn->ino_next;
			vnode_free(gf, vn);
		}
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static struct gs_vnode *vnode_alloc(const char *name)
{
	size_t len = strlen(name);
	struct gs_vnode *vn = calloc(1, sizeof(*vn) + len + 1);

	if (vn)
		memcpy(vn->name, name, len + 1);
	return vn;
}

static void insert_locked(struct gs_vreg *r, struct gs_vnode *vn)
{
	uint32_t hi = hash_ino(vn->ino), hn = hash_name(vn->parent, vn->name);

	vn->ino_next = r->by_ino[hi];
	r->by_ino[hi] = vn;
	vn->name_next = r->by_name[hn];
	r->by_name[hn] = vn;
}

static void remove_locked(struct gs_vreg *r, struct gs_vnode *vn)
{
	struct gs_vnode **pp;

	for (pp = &r->by_ino[hash_ino(vn->ino)]; *pp; pp = &(*pp)->ino_next) {
		if (*pp == vn) {
			*pp = vn->ino_next;
			break;
		}
	}
	for (pp = &r->by_name[hash_name(vn->parent, vn->name)]; *pp; pp = &(*pp)->name_next) {
		if (*pp == vn) {
			*pp = vn->name_next;
			break;
		}
	}
}

static struct gs_vnode *find_name_locked(struct gs_vreg *r, uint64_t parent, const char *name)
{
	struct gs_vnode *vn = r->by_name[hash_name(parent, name)];

	for (; vn; vn = vn->name_next)
		if (vn->parent == parent && !strcmp(vn->name, name))
			return vn;
	return NULL;
}

int gs_vreg_add_fixed(struct gs_vreg *r, uint64_t ino, uint64_t parent, const char *name,
		      const struct gs_vops *ops, uint32_t mode)
{
	struct gs_vnode *vn = vnode_alloc(name);

	if (!vn)
		return -ENOMEM;
	vn->ino = ino;
	vn->parent = parent;
	vn->ops = ops;
	vn->mode = mode;
	vn->nlookup = 1;	/* the mount's own reference: never freed by forget */
	pthread_mutex_lock(&r->lock);
	insert_locked(r, vn);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static struct gs_vnode *find_ino_locked(struct gs_vreg *r, uint64_t ino)
{
	struct gs_vnode *vn;

	for (vn = r->by_ino[hash_ino(ino)]; vn; vn = vn->ino_next)
		if (vn->ino == ino)
			break;
	return vn;
}

struct gs_vnode *gs_vreg_get(struct gs_vreg *r, uint64_t ino)
{
	struct gs_vnode *vn;

	pthread_mutex_lock(&r->lock);
	vn = find_ino_locked(r, ino);
	pthread_mutex_unlock(&r->lock);
	return vn;
}

int gs_vreg_lookup(struct gs_fuse *gf, struct gs_vreg *r, uint64_t parent,
		   const struct gs_vdir *dir, const struct gs_vops *ops, const char *name,
		   struct gs_vnode **vnp)
{
	struct gs_vnode *vn, *old;
	int ret;

	pthread_mutex_lock(&r->lock);
	vn = find_name_locked(r, parent, name);
	if (vn) {
		vn->nlookup++;
		pthread_mutex_unlock(&r->lock);
		*vnp = vn;
		return 0;
	}
	pthread_mutex_unlock(&r->lock);

	/* The type's lookup may do I/O: run it unlocked, then insert unless a
	 * concurrent lookup of the same name won. */
	vn = vnode_alloc(name);
	if (!vn)
		return -ENOMEM;
	vn->parent = parent;
	vn->obj = dir->obj;
	vn->ops = ops;
	ret = ops->lookup(gf, dir, name, vn);
	if (ret < 0 || !(S_ISDIR(vn->mode) || S_ISREG(vn->mode))) {
		vnode_free(gf, vn);
		return ret < 0 ? ret : -EIO;
	}
	pthread_mutex_lock(&r->lock);
	old = find_name_locked(r, parent, name);
	if (old) {
		old->nlookup++;
		pthread_mutex_unlock(&r->lock);
		vnode_free(gf, vn);
		*vnp = old;
		return 0;
	}
	vn->ino = gs_vreg_ino_hint(parent, name);
	while (find_ino_locked(r, vn->ino))
		vn->ino = VINO_DYN | ((vn->ino + 1) & (VINO_DYN - 1));
	vn->nlookup = 1;
	insert_locked(r, vn);
	pthread_mutex_unlock(&r->lock);
	*vnp = vn;
	return 0;
}

void gs_vreg_forget(struct gs_fuse *gf, struct gs_vreg *r, uint64_t ino, uint64_t nlookup)
{
	struct gs_vnode *vn;

	pthread_mutex_lock(&r->lock);
	vn = find_ino_locked(r, ino);
	if (!vn || ino < VINO_DYN) {	/* unknown, or fixed: keep */
		pthread_mutex_unlock(&r->lock);
		return;
	}
	vn->nlookup = nlookup >= vn->nlookup ? 0 : vn->nlookup - nlookup;
	if (vn->nlookup) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	remove_locked(r, vn);
	if (vn->cached)
		r->ncached--;
	pthread_mutex_unlock(&r->lock);
	vnode_free(gf, vn);
}

int gs_vfile_text(struct gs_vfile *f, gs_text_gen gen, void *ctx)
{
	size_t cap = 4096;

	for (;;) {
		char *buf = malloc(cap);
		int n;

		if (!buf)
			return -ENOMEM;
		n = gen(ctx, buf, cap);
		if (n < 0) {
			free(buf);
			return n;
		}
		/* snprintf-like: n >= cap means truncated; also retry when the
		 * text filled the buffer exactly, in case the generator clips. */
		if ((size_t)n < cap - 1) {
			f->buf = buf;
			f->len = (size_t)n;
			return 0;
		}
		free(buf);
		if (cap >= (16u << 20))
			return -EFBIG;
		cap = (size_t)n + 2 > cap * 2 ? (size_t)n + 2 : cap * 2;
	}
}

/* ---------------- /.gstore ---------------- */

/*
 * .gstore/pool (pools only): reading gives the pool's state (as in info);
 * writing a command administers the running pool: "replace OLD NEW" (rebuild
 * member OLD onto device NEW in the background, OLD a member path or index)
 * and "rate BYTES_PER_S" (the rebuild throttle, 0: none).  Paths are
 * absolute and without white space.  The file is the daemon user's, mode
 * 0600: NEW is opened and overwritten with the daemon's rights, so only that
 * user (and root) may name it.
 */
enum { META_INFO = 1, META_STATS = 2, META_POOL = 3 };

static const struct {
	const char *name;
	uint32_t kind;
	uint32_t mode;
} meta_files[] = {
	{ "info", META_INFO, S_IFREG | 0444 },
	{ "stats", META_STATS, S_IFREG | 0444 },
	{ "pool", META_POOL, S_IFREG | 0600 },
};

static int is_pool(struct gs_fuse *gf)
{
	char c;

	return gs_q_pool_info(gs_fs_queue(gs_fuse_fs(gf)), &c, 1) > 0;
}

static int meta_lookup(struct gs_fuse *gf, const struct gs_vdir *dir, const char *name,
		       struct gs_vnode *vn)
{
	if (dir->vn && dir->vn->ino != GS_VINO_META)
		return -ENOENT;
	for (size_t i = 0; i < sizeof(meta_files) / sizeof(meta_files[0]); i++) {
		if (!strcmp(name, meta_files[i].name)) {
			if (meta_files[i].kind == META_POOL && !is_pool(gf))
				return -ENOENT;
			vn->kind = meta_files[i].kind;
			vn->mode = meta_files[i].mode;
			return 0;
		}
	}
	return -ENOENT;
}

static int meta_readdir(struct gs_fuse *gf, const struct gs_vdir *dir, uint64_t off,
			gs_vfill fill, void *arg)
{
	for (size_t i = off; i < sizeof(meta_files) / sizeof(meta_files[0]); i++) {
		if (meta_files[i].kind == META_POOL && !is_pool(gf))
			continue;
		if (fill(arg, meta_files[i].name, meta_files[i].mode, i + 1))
			break;
	}
	return 0;
}

static int pool_gen(void *ctx, char *buf, size_t size)
{
	return gs_q_pool_info(gs_fs_queue(gs_fuse_fs(ctx)), buf, size);
}

/* One command per write (gs_pool(3) does the work). */
static ssize_t pool_write(struct gs_fuse *gf, struct gs_vfile *f, const char *buf, size_t size,
			  uint64_t off)
{
	struct gs_q *q = gs_fs_queue(gs_fuse_fs(gf));
	char cmd[2 * 4096], *w[4], *save = NULL, *end;
	unsigned nw = 0;
	int ret;

	if (f->vn->kind != META_POOL)
		return -EACCES;
	if (size >= sizeof(cmd))
		return -EINVAL;
	memcpy(cmd, buf, size);
	cmd[size] = 0;
	for (char *t = strtok_r(cmd, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
		if (nw == 4)
			return -EINVAL;
		w[nw++] = t;
	}
	if (nw == 3 && !strcmp(w[0], "replace")) {
		if (w[2][0] != '/')
			return -EINVAL;	/* the daemon's cwd is not the writer's */
		ret = gs_q_pool_member(q, w[1]);
		if (ret >= 0)
			ret = gs_q_pool_replace_start(q, (unsigned)ret, w[2]);
	} else if (nw == 2 && !strcmp(w[0], "rate")) {
		unsigned long long r;

		errno = 0;
		r = strtoull(w[1], &end, 10);
		ret = errno || *end || w[1][0] == '-' ? -EINVAL : gs_q_pool_throttle(q, r);
	} else {
		ret = -EINVAL;
	}
	return ret < 0 ? ret : (ssize_t)size;
}

static int info_gen(void *ctx, char *buf, size_t size)
{
	int n = gs_fs_info_text(gs_fuse_fs(ctx), buf, size);
	int m;

	if (n < 0)
		return n;
	/* the FUSE transport in use (fs/fuse/uring.c) */
	m = gs_fuse_uring_info(gs_fuse_get_uring(ctx), buf + ((size_t)n < size ? (size_t)n : size),
			       (size_t)n < size ? size - (size_t)n : 0);
	if (m < 0)
		return -EIO;
	n += m;
	/* the daemon's read-ahead window as in effect (fs/fuse/stream.h) */
	m = snprintf(buf + ((size_t)n < size ? (size_t)n : size),
		     (size_t)n < size ? size - (size_t)n : 0, "stream_ra_kib: %llu\n",
		     (unsigned long long)(gs_streams_window(gs_fuse_get_streams(ctx)) >> 10));
	return m < 0 ? -EIO : n + m;
}

static int stats_gen(void *ctx, char *buf, size_t size)
{
	struct gs_fuse_counters c;
	int n = gs_fs_stats_text(gs_fuse_fs(ctx), buf, size);
	int m;

	if (n < 0)
		return n;
	gs_fuse_get_counters(ctx, &c);
	m = snprintf(buf + ((size_t)n < size ? (size_t)n : size),
		     (size_t)n < size ? size - (size_t)n : 0,
		     "fuse_reads %llu\nfuse_read_bytes %llu\nfuse_writes %llu\n"
		     "fuse_write_bytes %llu\nfuse_lookups %llu\nfuse_creates %llu\n"
		     "fuse_fsyncs %llu\nfuse_other %llu\nfuse_errors %llu\n"
		     "fuse_uring_requests %llu\nfuse_stream_reads %llu\n"
		     "fuse_stream_ra_bytes %llu\n",
		     (unsigned long long)c.reads, (unsigned long long)c.read_bytes,
		     (unsigned long long)c.writes, (unsigned long long)c.write_bytes,
		     (unsigned long long)c.lookups, (unsigned long long)c.creates,
		     (unsigned long long)c.fsyncs, (unsigned long long)c.other,
		     (unsigned long long)c.errors, (unsigned long long)c.uring_requests,
		     (unsigned long long)c.stream_reads, (unsigned long long)c.stream_ra_bytes);
	return m < 0 ? -EIO : n + m;
}

static int meta_open(struct gs_fuse *gf, struct gs_vfile *f)
{
	if ((f->flags & O_ACCMODE) != O_RDONLY && f->vn->kind != META_POOL)
		return -EACCES;
	switch (f->vn->kind) {
	case META_INFO:
		return gs_vfile_text(f, info_gen, gf);
	case META_STATS:
		return gs_vfile_text(f, stats_gen, gf);
	case META_POOL:
		/* a command is written, not read: no text to make */
		if ((f->flags & O_ACCMODE) == O_WRONLY)
			return 0;
		return gs_vfile_text(f, pool_gen, gf);
	}
	return -EISDIR;
}

static int meta_getattr(struct gs_fuse *gf, const struct gs_vnode *vn, struct stat *st)
{
	struct gs_vfile f = { .vn = (struct gs_vnode *)vn };

	if (vn->kind == META_POOL) {
		/* the daemon user's (see pool_write) */
		st->st_uid = geteuid();
		st->st_gid = getegid();
	}
	/* ls -l shows the current length; reads are direct_io and not bound by it. */
	if (S_ISREG(vn->mode) && meta_open(gf, &f) == 0) {
		st->st_size = (off_t)f.len;
		free(f.buf);
	}
	return 0;
}

const struct gs_vops gs_fuse_meta_ops = {
	.name = "meta",
	.lookup = meta_lookup,
	.readdir = meta_readdir,
	.getattr = meta_getattr,
	.open = meta_open,
	.write = pool_write,
};
