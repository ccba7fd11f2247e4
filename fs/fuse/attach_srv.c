// SPDX-License-Identifier: MIT
/*
 * The attach server (attach_srv.h, protocol in uapi/gstore_attach.h).
 *
 * One listener thread accepts connections; each client is served by a
 * thread of its own, so a client that sends half a message, or never reads
 * its replies, holds up nobody but itself.  A client's state (its rings,
 * its leases) is changed by its thread, and by the recall thread, each
 * under the slot's mutex (s->cmu[]); the listener and gs_attach_stop()
 * touch only the slot's state word and descriptor, under s->lock.
 *
 * Leases are recalled: a truncate or hole punch of a range a client holds
 * asks for it back (gs_fs_lease_set_recall()), and the recall thread
 * unbinds the lease from the client's rings and ends it, whatever the
 * client is doing; its requests on that object then fail with EACCES, and
 * it may OPEN the object again.  A client that may only read a file cannot
 * hold up its owner's truncate.
 *
 * What a client may do is decided here with its credentials, taken from
 * the socket when it connected (SO_PEERCRED, SO_PEERGROUPS), and enforced
 * below by the fs core: OPEN checks them against the path like open(2)
 * and takes a direct lease on the object; the leases are bound to the
 * client's rings, and the pollers refuse any request outside them.  A
 * client therefore reaches exactly the objects it opened, with the access
 * it opened them for, however it rewrites its rings.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "attach_srv.h"
#include "gstore_q.h"
#include "gstore_attach.h"
#include "gstore_graph.h"
#include "gstore_graph_dev.h"
#include "gs_log.h"

#define DEF_CLIENTS	64
#define DEF_PER_USER	16
#define EXT_FIRST	64	/* extents asked for before knowing how many */

enum { CL_FREE, CL_RUN, CL_DONE };

/* The peer's credentials when it connected. */
struct peer {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t *groups;		/* supplementary groups, malloc'd */
};

struct srv_ring {
	struct gs_ring *ring;
	void *map;
	size_t map_len;
};

struct srv_open {
	struct client *c;
	struct gs_lease *l;	/* NULL: empty object, or recalled */
	uint64_t ino, size;
	unsigned lflags;	/* GS_LEASE_* it was taken with */
	uint32_t recalled;	/* atomic: the fs asked for the lease back */
};

struct client {
	struct gs_attach_srv *s;
	int fd;
	int state;		/* CL_*, under s->lock */
	pthread_t th;
	struct peer cred;
	int allowed;		/* the mount would let this peer in at all */
	uint32_t recall_pending;	/* atomic: an open of ours was recalled */
	struct srv_ring rings[GS_ATT_MAX_RINGS];
	unsigned nrings;
	struct srv_open opens[GS_ATT_MAX_OPENS];
	unsigned nopens;
	int graph;		/* a GRAPH succeeded: no other on this connection */
};

struct gs_attach_srv {
	struct gs_attach_srv_params p;
	char *path;
	int lfd;
	int stop_fd[2];		/* a byte on [1] stops the listener */
	pthread_t th;
	pthread_mutex_t lock;	/* client slots' state and fd */
	struct client *cl;	/* [max_clients] */
	pthread_mutex_t *cmu;	/* [max_clients]: a client's rings and opens */
	int recall_fd[2];	/* a byte on [1] wakes the recall thread ('q': stop) */
	pthread_t recall_th;
	uint64_t next_ring_id;	/* atomic */
};

/* A reply being built: the message, its payload and descriptors. */
struct reply {
	struct gs_att_msg m;
	void *payload;		/* malloc'd */
	int fds[2];
	int nfds;
	int close_fd0;		/* fds[0] is ours to close after sending */
};

/* ---- credentials and permissions ---- */

/* Supplementary groups from /proc (kernels without SO_PEERGROUPS). */
static int proc_groups(pid_t pid, uid_t uid, struct peer *p)
{
	char path[64], line[4096];
	int ok = 0, n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long u;

		/* the pid could have been reused since connect(): same real uid */
		if (sscanf(line, "Uid: %lu", &u) == 1)
			ok = u == uid;
		if (strncmp(line, "Groups:", 7))
			continue;
		p->groups = calloc(sizeof(line) / 2, sizeof(gid_t));
		for (char *t = strtok(line + 7, " \t\n"); p->groups && t; t = strtok(NULL, " \t\n"))
			p->groups[n++] = (gid_t)strtoul(t, NULL, 10);
	}
	fclose(f);
	p->ngroups = n;
	return ok ? 0 : -EACCES;
}

/*
 * SO_PEERCRED is the peer's identity at connect(); SO_PEERGROUPS its
 * supplementary groups at the same moment (no race with the pid being
 * reused, unlike a later look at /proc, kept as the fallback).
 */
static int peer_creds(int fd, struct peer *p)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int ret;

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	p->uid = cr.uid;
	p->gid = cr.gid;
	len = 64 * sizeof(gid_t);
	for (;;) {
		gid_t *g = realloc(p->groups, len ? len : sizeof(gid_t));

		if (!g)
			return -ENOMEM;
		p->groups = g;
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len)) {
			p->ngroups = (int)(len / sizeof(gid_t));
			return 0;
		}
		if (errno != ERANGE)
			break;
	}
	ret = errno;
	free(p->groups);
	p->groups = NULL;
	if (ret != ENOPROTOOPT)
		return -ret;
	return proc_groups(cr.pid, cr.uid, p);
}

static int in_group(const struct peer *p, gid_t gid)
{
	if (p->gid == gid)
		return 1;
	for (int i = 0; i < p->ngroups; i++)
		if (p->groups[i] == gid)
			return 1;
	return 0;
}

/*
 * May @p access @st for @mask (R_OK | W_OK | X_OK), as the kernel decides
 * for a default_permissions mount: the owner's bits if the peer owns it,
 * else the group's if it is in the group, else the others'.  Root passes
 * read and write always and search on directories (CAP_DAC_OVERRIDE).
 */
static int may(const struct peer *p, const struct gs_stat *st, int mask)
{
	unsigned perm;

	if (p->uid == 0) {
		if (!(mask & X_OK) || S_ISDIR(st->mode) || (st->mode & 0111))
			return 0;
		return -EACCES;
	}
	if (p->uid == st->uid)
		perm = (st->mode >> 6) & 7;
	else if (in_group(p, st->gid))
		perm = (st->mode >> 3) & 7;
	else
		perm = st->mode & 7;
	return ((unsigned)mask & perm) == (unsigned)mask ? 0 : -EACCES;
}

/* Walk @path (relative to the mount, '/'-separated) from the root, with
 * search permission on every directory passed, as path resolution needs. */
static int resolve(struct gs_fs *fs, const struct peer *p, const char *path, struct gs_stat *st)
{
	char comp[GS_NAME_MAX + 1];
	int ret = gs_fs_getattr(fs, GS_ROOT_INO, st);

	while (!ret && *path) {
		const char *e = strchr(path, '/');
		size_t n = e ? (size_t)(e - path) : strlen(path);

		if (n > GS_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, path, n);
		comp[n] = 0;
		path += n + (e ? 1 : 0);
		if (!n || !strcmp(comp, "."))
			continue;
		/* clients send realpath()s: a ".." would leave what they were given */
		if (!strcmp(comp, ".."))
			return -EINVAL;
		if (st->type != GS_T_DIR)
			return -ENOTDIR;
		ret = may(p, st, X_OK);
		if (!ret)
			ret = gs_fs_lookup(fs, st->ino, comp, st);
	}
	return ret;
}

/* ---- ops ---- */

static int all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static int op_hello(struct client *c, const char *path, struct reply *r)
{
	struct gs_att_hello *h = &r->m.u.hello;
	struct gs_fs_statfs sf;
	int ret;

	if (!all_zero(h, sizeof(*h)))
		return -EINVAL;
	ret = gs_fs_statfs(c->s->p.fs, &sf);
	if (ret)
		return ret;
	h->block_size = sf.block_size;
	h->max_rings = GS_ATT_MAX_RINGS;
	h->max_opens = GS_ATT_MAX_OPENS;
	return 0;
}

/* The lease's extents in @bs units, into the reply's payload. */
static int export_ext(struct gs_lease *l, uint32_t bs, struct reply *r)
{
	unsigned max = EXT_FIRST;
	int n;

	for (;;) {
		void *ext = realloc(r->payload, (size_t)max * sizeof(struct gs_att_ext));

		if (!ext)
			return -ENOMEM;
		r->payload = ext;
		n = gs_fs_lease_export(l, bs, ext, max);
		if (n < 0)
			return n;
		if ((unsigned)n <= max)
			break;
		if ((unsigned)n > GS_ATT_MAX_EXT)
			return -E2BIG;
		max = (unsigned)n;
	}
	r->m.u.open.next = (uint32_t)n;
	r->m.h.len = (uint32_t)(n * sizeof(struct gs_att_ext));
	return 0;
}

/* Bind @l to every ring of @c; on failure unbind what was bound. */
static int bind_all(struct client *c, struct gs_lease *l)
{
	for (unsigned i = 0; i < c->nrings; i++) {
		int ret = gs_fs_ring_bind(c->s->p.fs, c->rings[i].ring, l);

		if (ret) {
			while (i--)
				gs_fs_ring_unbind(c->s->p.fs, c->rings[i].ring, l);
			return ret;
		}
	}
	return 0;
}

static void unbind_all(struct client *c, struct gs_lease *l)
{
	for (unsigned i = 0; i < c->nrings; i++)
		gs_fs_ring_unbind(c->s->p.fs, c->rings[i].ring, l);
}

/*
 * The fs wants an open's lease back (gs_fs_lease_set_recall()).  Called
 * under the fs's lease lock: only note it and wake the recall thread.
 */
static void recall(void *arg)
{
	struct srv_open *so = arg;

	/* release: the notes before the wake-up the recall thread acts on */
	__atomic_store_n(&so->recalled, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&so->c->recall_pending, 1, __ATOMIC_RELEASE);
	if (write(so->c->s->recall_fd[1], "r", 1) < 0) {
		/* EAGAIN: the pipe is full of wake-ups already */
	}
}

static int op_open(struct client *c, const char *path, struct reply *r)
{
	struct gs_att_open *o = &r->m.u.open;
	struct gs_fs *fs = c->s->p.fs;
	uint32_t bs = o->block_size;
	struct srv_open *so;
	struct gs_stat st;
	int ret;

	if (!path || bs < 512 || (bs & (bs - 1)) || (o->flags & ~GS_ATT_OPEN_FLAGS) ||
	    o->rsvd0 || o->rsvd1)
		return -EINVAL;
	if (c->nopens == GS_ATT_MAX_OPENS)
		return -EMFILE;
	ret = resolve(fs, &c->cred, path, &st);
	if (ret)
		return ret;
	if (st.type != GS_T_ARRAY)
		return st.type == GS_T_DIR ? -EISDIR : -EINVAL;
	ret = may(&c->cred, &st, R_OK | (o->flags & GS_ATT_OPEN_WRITE ? W_OK : 0));
	if (ret)
		return ret;
	so = &c->opens[c->nopens];
	*so = (struct srv_open){ .c = c, .ino = st.ino, .size = st.size,
				 .lflags = o->flags & GS_ATT_OPEN_WRITE ? GS_LEASE_WRITE :
									  GS_LEASE_READ };
	o->ino = st.ino;
	o->size = st.size;
	o->nblocks = (st.size + bs - 1) / bs;
	o->next = 0;
	if (!st.size) {	/* nothing to lease or address */
		c->nopens++;
		return 0;
	}
	ret = gs_fs_lease_begin(fs, st.ino, 0, st.size, so->lflags, &so->l);
	if (ret)
		return ret;
	gs_fs_lease_set_recall(so->l, recall, so);
	ret = export_ext(so->l, bs, r);
	if (!ret)
		ret = bind_all(c, so->l);
	if (ret) {
		gs_fs_lease_end(so->l);
		return ret;
	}
	c->nopens++;
	return 0;
}

static int op_ring(struct client *c, const char *path, struct reply *r)
{
	struct gs_att_ring *q = &r->m.u.ring;
	struct gs_fs *fs = c->s->p.fs;
	size_t rb, buf, total;
	struct srv_ring *sr;
	void *map;
	int fd, ret;

	if (q->flags & ~GS_ATT_RING_FLAGS)
		return -EINVAL;
	if (q->sq_entries > GS_ATT_MAX_ENTRIES || q->cq_entries > GS_ATT_MAX_ENTRIES ||
	    q->ncw > GS_ATT_MAX_NCW || q->buf_bytes > GS_ATT_MAX_BUF)
		return -EINVAL;
	if (c->nrings == GS_ATT_MAX_RINGS)
		return -EMFILE;
	rb = (gs_ring_bytes(q->sq_entries, q->cq_entries, q->ncw) + 4095) & ~(size_t)4095;
	buf = (q->buf_bytes + 4095) & ~(size_t)4095;
	total = rb + buf;
	fd = memfd_create("gstore-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/*
	 * Sealed at its size before the client gets it: a client that could
	 * shrink the memfd would turn our next touch of the ring or region
	 * into a SIGBUS.
	 */
	if (ftruncate(fd, total) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		goto close_fd;
	}
	map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto close_fd;
	}
	ret = gs_ring_init(map, rb, q->sq_entries, q->cq_entries, q->ncw, q->flags);
	if (ret)
		goto unmap;
	/* no registered buffer: it would outlive this client's mapping */
	ret = gs_fs_ring_add(fs, map, rb, buf ? (char *)map + rb : NULL, buf);
	if (ret)
		goto unmap;
	for (unsigned i = 0; i < c->nopens && !ret; i++)
		if (c->opens[i].l)
			ret = gs_fs_ring_bind(fs, map, c->opens[i].l);
	if (ret)
		goto del_ring;
	sr = &c->rings[c->nrings++];
	sr->ring = map;
	sr->map = map;
	sr->map_len = total;
	q->map_bytes = total;
	q->buf_off = rb;
	q->id = __atomic_add_fetch(&c->s->next_ring_id, 1, __ATOMIC_RELAXED);
	r->fds[0] = fd;
	r->close_fd0 = 1;
	r->fds[1] = gs_fs_ring_kick_fd(fs);
	r->nfds = 2;
	return 0;
del_ring:
	gs_fs_ring_del(fs, map);
unmap:
	munmap(map, total);
close_fd:
	close(fd);
	return ret;
}

/*
 * SYNC: the client wrote the object through its rings.  A fresh lease on
 * the same range writes back and drops the daemon's cached copies (what
 * gs_fs_lease_begin() does); it is bound before the old one ends, so the
 * client's rings never lose their bounds meanwhile.
 */
static int op_sync(struct client *c, const char *path, struct reply *r)
{
	struct gs_att_sync *sy = &r->m.u.sync;
	struct gs_fs *fs = c->s->p.fs;
	int found = 0, ret = 0;

	if (!all_zero(sy->rsvd, sizeof(sy->rsvd)))
		return -EINVAL;
	for (unsigned i = 0; i < c->nopens && !ret; i++) {
		struct srv_open *so = &c->opens[i];
		struct gs_lease *nl;

		if (so->ino != sy->ino)
			continue;
		found = 1;
		if (!so->l)
			continue;
		ret = gs_fs_lease_begin(fs, so->ino, 0, so->size, so->lflags, &nl);
		if (ret)
			break;
		gs_fs_lease_set_recall(nl, recall, so);
		ret = bind_all(c, nl);
		if (ret) {
			gs_fs_lease_end(nl);
			break;
		}
		unbind_all(c, so->l);
		ret = gs_fs_lease_end(so->l);
		so->l = nl;
	}
	if (!found)
		return -EBADF;	/* not an object this connection opened */
	if (!ret && c->s->p.synced)
		c->s->p.synced(c->s->p.arg, sy->ino);
	return ret;
}

/* ---- GRAPH: a graph object's device layout ---- */

/* The layout of graph @ino: from the mount's handle, or one of our own. */
static int graph_layout(struct gs_attach_srv *s, uint64_t ino, struct gs_graph_layout **lp)
{
	struct gs_graph *g;
	int ret;

	if (s->p.graph_layout)
		return s->p.graph_layout(s->p.garg, ino, lp);
	ret = gs_graph_open_ino(s->p.fs, ino, 0, &g);
	if (ret == -EROFS)
		ret = gs_graph_open_ino(s->p.fs, ino, GS_GRAPH_RDONLY, &g);
	if (ret)
		return ret;
	ret = gs_graph_layout_get(g, 0, lp);
	gs_graph_close(g);	/* the layout is a copy; its leases are the fs's */
	return ret;
}

static size_t al8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* @l as struct gs_att_graph_map and the arrays it names, in a sealed memfd. */
static int graph_memfd(const struct gs_graph_layout *l, int *fdp, uint64_t *bytes)
{
	struct gs_att_graph_map h = {
		.magic = GS_ATT_GRAPH_MAGIC, .ndirs = l->ndirs, .nv = l->nv, .ne = l->ne,
		.gen = l->gen, .flags = l->flags, .page_size = l->page_size,
		.id_bytes = l->id_bytes, .next = l->next, .nremoved = l->nremoved,
		.nblocks = l->nblocks, .bytes = l->bytes,
	};
	size_t at = al8(sizeof(h)), rb = l->nv / 8 + 1;
	char *map;
	int fd, ret;

	if (l->ndirs < 1 || l->ndirs > 2)
		return -EINVAL;
	for (unsigned d = 0; d < l->ndirs; d++) {
		const struct gs_graph_layout_dir *ld = &l->dir[d];
		struct gs_att_graph_dir *hd = &h.dir[d];
		size_t tb = al8(ld->ngtt * 8);

		*hd = (struct gs_att_graph_dir){ .pages_ino = ld->pages_ino, .npages = ld->npages,
						 .first_block = ld->first_block, .ngtt = ld->ngtt };
		hd->key_off = at;
		hd->last_off = at + tb;
		hd->page_off = at + 2 * tb;
		at += 3 * tb;
		if (ld->vmap) {
			hd->vmap_bits = ld->vmap_bits;
			hd->vmap_off = at;
			at += al8((ld->vmap_bits + 7) / 8);
		}
	}
	if (l->removed) {
		h.removed_off = at;
		at += al8(rb);
	}
	h.ext_off = at;
	at += (size_t)l->next * sizeof(struct gs_att_ext);
	fd = memfd_create("gstore-graph", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, at) < 0) {
		ret = -errno;
		goto close_fd;
	}
	map = mmap(NULL, at, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto close_fd;
	}
	memcpy(map, &h, sizeof(h));
	for (unsigned d = 0; d < l->ndirs; d++) {
		const struct gs_graph_layout_dir *ld = &l->dir[d];

		memcpy(map + h.dir[d].key_off, ld->gtt_key, ld->ngtt * 8);
		memcpy(map + h.dir[d].last_off, ld->gtt_last, ld->ngtt * 8);
		memcpy(map + h.dir[d].page_off, ld->gtt_page, ld->ngtt * 8);
		if (ld->vmap)
			memcpy(map + h.dir[d].vmap_off, ld->vmap, (ld->vmap_bits + 7) / 8);
	}
	if (l->removed)
		memcpy(map + h.removed_off, l->removed, rb);
	/* struct gs_graph_layout_ext is struct gs_att_ext, field for field */
	memcpy(map + h.ext_off, l->ext, (size_t)l->next * sizeof(struct gs_att_ext));
	munmap(map, at);
	/* the client maps what we wrote: nobody may change it now */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		ret = -errno;
		goto close_fd;
	}
	*fdp = fd;
	*bytes = at;
	return 0;
close_fd:
	close(fd);
	return ret;
}

/*
 * GRAPH: the layout (its pending updates merged first), in a memfd; the
 * read leases that pin its extents become this client's opens, bound to its
 * rings and recalled like OPEN's.
 */
static int op_graph(struct client *c, const char *path, struct reply *r)
{
	struct gs_att_graph *q = &r->m.u.graph;
	struct gs_fs *fs = c->s->p.fs;
	struct gs_graph_layout *l = NULL;
	unsigned n0 = c->nopens;
	struct gs_q_geom geom;
	struct gs_stat st;
	uint64_t bytes = 0;
	int fd = -1, ret;

	if (!path || !all_zero(q, sizeof(*q)))
		return -EINVAL;
	/*
	 * One per connection: the merge a GRAPH runs may need back the leases
	 * of an earlier GRAPH's pages, and their recall waits for this
	 * client's mutex, which this op holds: a second GRAPH would deadlock
	 * the merge.  A later layout comes on a new connection.
	 */
	if (c->graph)
		return -EBUSY;
	if (c->nopens + 2 > GS_ATT_MAX_OPENS)
		return -EMFILE;
	ret = resolve(fs, &c->cred, path, &st);
	if (ret)
		return ret;
	if (st.type != GS_T_GRAPH)
		return st.type == GS_T_DIR ? -EISDIR : -EINVAL;
	ret = may(&c->cred, &st, R_OK);
	if (!ret)
		ret = gs_fs_geometry(fs, &geom);
	if (!ret)
		ret = graph_layout(c->s, st.ino, &l);
	if (ret)
		return ret;
	ret = graph_memfd(l, &fd, &bytes);
	for (unsigned d = 0; !ret && d < l->ndirs; d++) {
		struct gs_lease *ls = gs_graph_layout_take_lease(l, d);
		struct srv_open *so = &c->opens[c->nopens];

		if (!ls)
			continue;	/* no pages in this direction */
		*so = (struct srv_open){ .c = c, .l = ls, .ino = l->dir[d].pages_ino,
					 .size = l->dir[d].npages * l->page_size,
					 .lflags = GS_LEASE_READ };
		gs_fs_lease_set_recall(ls, recall, so);
		ret = bind_all(c, ls);
		if (ret) {
			gs_fs_lease_end(ls);
			break;
		}
		c->nopens++;
	}
	q->max_io = geom.max_io;
	q->ino = st.ino;
	q->gen = l->gen;
	q->map_bytes = bytes;
	gs_graph_layout_put(l);
	if (ret) {
		while (c->nopens > n0) {
			struct srv_open *so = &c->opens[--c->nopens];

			unbind_all(c, so->l);
			gs_fs_lease_end(so->l);
		}
		if (fd >= 0)
			close(fd);
		return ret;
	}
	c->graph = 1;
	r->fds[0] = fd;
	r->close_fd0 = 1;
	r->nfds = 1;
	return 0;
}

typedef int (*op_fn)(struct client *c, const char *path, struct reply *r);
static const op_fn ops[] = {
	[GS_ATT_HELLO] = op_hello,
	[GS_ATT_OPEN] = op_open,
	[GS_ATT_RING] = op_ring,
	[GS_ATT_SYNC] = op_sync,
	[GS_ATT_GRAPH] = op_graph,
};
_Static_assert(sizeof(ops) / sizeof(ops[0]) == GS_ATT_OP_NR, "an op without a handler");

/* ---- clients ---- */

/* One request; < 0 drops the client (it broke the protocol or left). */
static int serve_one(struct client *c)
{
	struct reply r = { .fds = { -1, -1 } };
	void *payload;
	int ret;

	ret = gs_attach_recv(c->fd, &r.m, &payload, GS_ATT_PATH_MAX, NULL, NULL);
	if (ret)
		return ret;
	r.m.h.len = 0;
	if (!c->allowed)
		r.m.h.status = -EACCES;
	else if (r.m.h.status || !r.m.h.op || r.m.h.op >= GS_ATT_OP_NR ||
		 (payload && r.m.h.op != GS_ATT_OPEN && r.m.h.op != GS_ATT_GRAPH))
		r.m.h.status = -EINVAL;
	else {
		pthread_mutex_t *mu = &c->s->cmu[c - c->s->cl];

		pthread_mutex_lock(mu);
		r.m.h.status = ops[r.m.h.op](c, payload, &r);
		pthread_mutex_unlock(mu);
	}
	free(payload);
	if (r.m.h.status) {
		r.m.h.len = 0;
		r.nfds = 0;
	}
	ret = gs_attach_send(c->fd, &r.m, r.payload, r.fds, r.nfds);
	if (r.close_fd0)
		close(r.fds[0]);	/* the client has its own now; our mapping stays */
	free(r.payload);
	return ret;
}

/* Undo what the client set up: rings first (their I/O uses the leases). */
static void client_release(struct client *c)
{
	for (unsigned i = 0; i < c->nrings; i++) {
		gs_fs_ring_del(c->s->p.fs, c->rings[i].ring);
		munmap(c->rings[i].map, c->rings[i].map_len);
	}
	c->nrings = 0;
	for (unsigned i = 0; i < c->nopens; i++)
		if (c->opens[i].l)
			gs_fs_lease_end(c->opens[i].l);
	c->nopens = 0;
	free(c->cred.groups);
	c->cred.groups = NULL;
}

static void *client_thread(void *arg)
{
	struct client *c = arg;
	pthread_mutex_t *mu = &c->s->cmu[c - c->s->cl];

	while (serve_one(c) >= 0)
		;
	pthread_mutex_lock(mu);
	client_release(c);
	pthread_mutex_unlock(mu);
	/* the peer sees the end now; the descriptor stays ours until the join
	 * (gs_attach_stop() may still shutdown() it: it must not be reused) */
	shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_lock(&c->s->lock);
	c->state = CL_DONE;	/* the listener or gs_attach_stop() joins us */
	pthread_mutex_unlock(&c->s->lock);
	return NULL;
}

/* Join finished clients' threads and free their slots; under s->lock. */
static void reap(struct gs_attach_srv *s)
{
	for (uint32_t i = 0; i < s->p.max_clients; i++) {
		struct client *c = &s->cl[i];

		if (c->state != CL_DONE)
			continue;
		pthread_join(c->th, NULL);
		close(c->fd);
		c->fd = -1;
		c->state = CL_FREE;
	}
}

/* Connections of @uid being served; under s->lock. */
static uint32_t user_conns(struct gs_attach_srv *s, uid_t uid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->p.max_clients; i++)
		n += s->cl[i].state == CL_RUN && s->cl[i].cred.uid == uid;
	return n;
}

static void accept_one(struct gs_attach_srv *s)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	struct client *c = NULL;
	int ret;

	if (fd < 0)
		return;
	pthread_mutex_lock(&s->lock);
	reap(s);
	for (uint32_t i = 0; i < s->p.max_clients && !c; i++)
		if (s->cl[i].state == CL_FREE)
			c = &s->cl[i];
	if (!c) {
		ret = -EAGAIN;
		goto refuse;
	}
	memset(c, 0, sizeof(*c));
	c->s = s;
	c->fd = fd;
	ret = peer_creds(fd, &c->cred);
	if (ret)
		goto refuse;
	/* one user cannot take every slot from the others */
	if (user_conns(s, c->cred.uid) >= s->p.max_per_user) {
		ret = -EUSERS;
		goto refuse;
	}
	c->allowed = s->p.allow_other || c->cred.uid == geteuid();
	c->state = CL_RUN;
	ret = -pthread_create(&c->th, NULL, client_thread, c);
	if (ret) {
		c->state = CL_FREE;
		goto refuse;
	}
	pthread_mutex_unlock(&s->lock);
	return;
refuse:
	if (c) {
		free(c->cred.groups);
		c->cred.groups = NULL;
		c->fd = -1;
	}
	pthread_mutex_unlock(&s->lock);
	gs_warn("attach: refusing a client: %s", strerror(-ret));
	close(fd);
}

/* End the recalled leases: unbind them from the client's rings (which waits
 * for their requests in flight), then end them. */
static void *recall_thread(void *arg)
{
	struct gs_attach_srv *s = arg;
	char b[64];

	for (;;) {
		ssize_t n = read(s->recall_fd[0], b, sizeof(b));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || memchr(b, 'q', (size_t)n))
			break;
		for (uint32_t i = 0; i < s->p.max_clients; i++) {
			struct client *c = &s->cl[i];

			/* acquire: pairs with recall()'s release */
			if (!__atomic_exchange_n(&c->recall_pending, 0, __ATOMIC_ACQUIRE))
				continue;
			pthread_mutex_lock(&s->cmu[i]);
			for (unsigned k = 0; k < c->nopens; k++) {
				struct srv_open *so = &c->opens[k];

				if (!__atomic_exchange_n(&so->recalled, 0, __ATOMIC_ACQUIRE) || !so->l)
					continue;
				unbind_all(c, so->l);
				gs_fs_lease_end(so->l);
				so->l = NULL;
			}
			pthread_mutex_unlock(&s->cmu[i]);
		}
	}
	return NULL;
}

static void *listen_thread(void *arg)
{
	struct gs_attach_srv *s = arg;

	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = s->lfd, .events = POLLIN },
			{ .fd = s->stop_fd[0], .events = POLLIN },
		};

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (pf[0].revents & POLLIN)
			accept_one(s);
	}
	return NULL;
}

int gs_attach_start(struct gs_attach_srv **sp, const struct gs_attach_srv_params *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct gs_attach_srv *s;
	int ret;

	if (!p || !p->sock_path || !p->fs || strlen(p->sock_path) >= sizeof(sa.sun_path))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	if (!s->p.max_clients)
		s->p.max_clients = DEF_CLIENTS;
	if (!s->p.max_per_user)
		s->p.max_per_user = DEF_PER_USER;
	s->path = strdup(p->sock_path);
	s->cl = calloc(s->p.max_clients, sizeof(*s->cl));
	s->cmu = calloc(s->p.max_clients, sizeof(*s->cmu));
	if (!s->path || !s->cl || !s->cmu) {
		ret = -ENOMEM;
		goto free_s;
	}
	for (uint32_t i = 0; i < s->p.max_clients; i++) {
		s->cl[i].fd = -1;
		pthread_mutex_init(&s->cmu[i], NULL);
	}
	pthread_mutex_init(&s->lock, NULL);
	if (pipe2(s->recall_fd, O_CLOEXEC) < 0) {
		ret = -errno;
		goto free_lock;
	}
	/* recall() runs under an fs lock: its write must never block */
	fcntl(s->recall_fd[1], F_SETFL, O_NONBLOCK);
	if (pipe2(s->stop_fd, O_CLOEXEC) < 0) {
		ret = -errno;
		goto close_recall;
	}
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		ret = -errno;
		goto close_pipe;
	}
	strcpy(sa.sun_path, p->sock_path);
	unlink(p->sock_path);	/* a stale socket of an earlier daemon */
	/* connectable by anyone: each OPEN decides, with the peer's credentials */
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(p->sock_path, 0666) < 0 || listen(s->lfd, 16) < 0) {
		ret = -errno;
		gs_err("attach: %s: %s", p->sock_path, strerror(errno));
		goto unlink_sock;
	}
	ret = -pthread_create(&s->recall_th, NULL, recall_thread, s);
	if (ret)
		goto unlink_sock;
	ret = -pthread_create(&s->th, NULL, listen_thread, s);
	if (ret)
		goto stop_recall;
	*sp = s;
	return 0;
stop_recall:
	if (write(s->recall_fd[1], "q", 1) == 1)
		pthread_join(s->recall_th, NULL);
unlink_sock:
	unlink(p->sock_path);
	close(s->lfd);
close_pipe:
	close(s->stop_fd[0]);
	close(s->stop_fd[1]);
close_recall:
	close(s->recall_fd[0]);
	close(s->recall_fd[1]);
free_lock:
	pthread_mutex_destroy(&s->lock);
	for (uint32_t i = 0; i < s->p.max_clients; i++)
		pthread_mutex_destroy(&s->cmu[i]);
free_s:
	free(s->cmu);
	free(s->cl);
	free(s->path);
	free(s);
	return ret;
}

void gs_attach_stop(struct gs_attach_srv *s)
{
	if (!s)
		return;
	if (write(s->stop_fd[1], "x", 1) != 1)
		gs_warn("attach: stop: %s", strerror(errno));
	pthread_join(s->th, NULL);
	/* wake every client thread out of its recv/send; each then cleans up */
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->p.max_clients; i++)
		if (s->cl[i].state != CL_FREE)
			shutdown(s->cl[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
	for (uint32_t i = 0; i < s->p.max_clients; i++) {
		struct client *c = &s->cl[i];
		int st;

		pthread_mutex_lock(&s->lock);
		st = c->state;
		pthread_mutex_unlock(&s->lock);
		if (st == CL_FREE)
			continue;
		pthread_join(c->th, NULL);
		close(c->fd);
	}
	/* every lease has ended with its client: nothing is left to recall */
	while (write(s->recall_fd[1], "q", 1) < 0 && errno == EAGAIN)
		usleep(1000);
	pthread_join(s->recall_th, NULL);
	unlink(s->path);
	close(s->lfd);
	close(s->stop_fd[0]);
	close(s->stop_fd[1]);
	close(s->recall_fd[0]);
	close(s->recall_fd[1]);
	pthread_mutex_destroy(&s->lock);
	for (uint32_t i = 0; i < s->p.max_clients; i++)
		pthread_mutex_destroy(&s->cmu[i]);
	free(s->cmu);
	free(s->cl);
	free(s->path);
	free(s);
}
