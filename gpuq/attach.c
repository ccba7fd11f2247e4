// SPDX-License-Identifier: MIT
/*
 * The attach client (gstore_q.h) and the protocol's message I/O, which the
 * daemon's server (fs/fuse/attach_srv.c) shares.  It needs the I/O core's
 * public header and the wire format (uapi/gstore_attach.h), nothing else:
 * a CUDA program links it without the filesystem.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gstore_q.h"
#include "gstore_attach.h"

GS_STATIC_ASSERT(GS_ATT_RING_POLLED == GS_RING_POLLED, "ring flags travel as they are");

struct gs_attach {
	int fd;
};

int gs_attach_sock_path(const char *mnt, char *buf, size_t size)
{
	char tmp[PATH_MAX];
	size_t n;
	const char *base;

	if (!mnt || !*mnt)
		return -EINVAL;
	n = strlen(mnt);
	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, mnt, n + 1);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = 0;
	base = strrchr(tmp, '/');
	if (!base) {
		n = snprintf(buf, size, ".%s.gstore.sock", tmp);
	} else {
		tmp[base - tmp] = 0;
		n = snprintf(buf, size, "%s/.%s.gstore.sock", tmp, base + 1);
	}
	return n < size ? 0 : -ENAMETOOLONG;
}

/* The mount point holding @path (the topmost directory on its device) and
 * the path below it, in @full (realpath'd; *rel points into it): see gstore_q.h. */
int gs_attach_split(const char *path, char *full, char *mnt, size_t size, const char **rel)
{
	struct stat st, up;
	size_t m;

	if (!realpath(path, full))
		return -errno;
	if (stat(full, &st) < 0)
		return -errno;
	if (strlen(full) >= size)
		return -ENAMETOOLONG;
	strcpy(mnt, full);
	for (;;) {
		char *slash = strrchr(mnt, '/');

		if (!slash || slash == mnt)
			break;
		*slash = 0;
		if (stat(mnt, &up) < 0 || up.st_dev != st.st_dev) {
			*slash = '/';
			break;
		}
	}
	m = strlen(mnt);
	*rel = full + m + (full[m] == '/' ? 1 : 0);
	return 0;
}

int gs_attach_find(const char *path, char *full, char *sock, size_t size, const char **rel)
{
	char mnt[PATH_MAX];
	int ret = gs_attach_split(path, full, mnt, sizeof(mnt), rel);

	return ret ? ret : gs_attach_sock_path(mnt, sock, size);
}

/* ---- message I/O ---- */

int gs_attach_send(int fd, const struct gs_att_msg *m, const void *payload, const int *fds,
		   int nfds)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)m, .iov_len = sizeof(*m) },
		{ .iov_base = (void *)payload, .iov_len = m->h.len },
	};
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = m->h.len ? 2 : 1 };
	ssize_t n;

	if (nfds < 0 || nfds > 2)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(*m) + m->h.len) ? 0 : -EIO;
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += n;
	}
	return 0;
}

int gs_attach_recv(int fd, struct gs_att_msg *m, void **payload, size_t max, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n;
	int ret;

	if (nfds)
		*nfds = 0;
	*payload = NULL;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (int i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fds && nfds && *nfds < 2)
				fds[(*nfds)++] = f;
			else
				close(f);
		}
	}
	if (n != sizeof(*m) || m->h.magic != GS_ATT_MAGIC || m->h.version != GS_ATT_VERSION)
		return -EPROTO;
	if (!m->h.len)
		return 0;
	if (m->h.len > max)
		return -EMSGSIZE;
	*payload = malloc(m->h.len + 1);
	if (!*payload)
		return -ENOMEM;
	ret = read_full(fd, *payload, m->h.len);
	if (ret) {
		free(*payload);
		*payload = NULL;
		return ret;
	}
	((char *)*payload)[m->h.len] = 0;
	return 0;
}

/* ---- client ---- */

int gs_attach_connect(struct gs_attach **ap, const char *sock_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct gs_attach *a;
	int ret;

	if (!sock_path || strlen(sock_path) >= sizeof(sa.sun_path))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		ret = -errno;
		goto free_a;
	}
	strcpy(sa.sun_path, sock_path);
	if (connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto close_fd;
	}
	*ap = a;
	return 0;
close_fd:
	close(a->fd);
free_a:
	free(a);
	return ret;
}

void gs_attach_close(struct gs_attach *a)
{
	if (!a)
		return;
	close(a->fd);
	free(a);
}

/* Send a request, receive its reply (payload malloc'd into *payload). */
static int call(struct gs_attach *a, struct gs_att_msg *m, const void *payload,
		void **reply_payload, size_t max, int *fds, int *nfds)
{
	uint16_t op = m->h.op;
	void *rp = NULL;
	int ret;

	m->h.magic = GS_ATT_MAGIC;
	m->h.version = GS_ATT_VERSION;
	ret = gs_attach_send(a->fd, m, payload, NULL, 0);
	if (ret)
		return ret;
	ret = gs_attach_recv(a->fd, m, &rp, max, fds, nfds);
	if (ret)
		return ret;
	if (m->h.op != op) {
		free(rp);
		return -EPROTO;
	}
	if (reply_payload)
		*reply_payload = rp;
	else
		free(rp);
	return m->h.status;
}

int gs_attach_hello(struct gs_attach *a, uint32_t *block_size)
{
	struct gs_att_msg m = { .h.op = GS_ATT_HELLO };
	int ret = call(a, &m, NULL, NULL, 0, NULL, NULL);

	if (!ret)
		*block_size = m.u.hello.block_size;
	return ret;
}

int gs_attach_open(struct gs_attach *a, const char *path, uint32_t block_size, uint32_t flags,
		   struct gs_attach_obj *obj)
{
	struct gs_att_msg m = { .h.op = GS_ATT_OPEN, .h.len = (uint32_t)strlen(path) };
	void *ext = NULL;
	int ret;

	if (m.h.len == 0 || m.h.len > GS_ATT_PATH_MAX)
		return -EINVAL;
	m.u.open.block_size = block_size;
	m.u.open.flags = flags;
	ret = call(a, &m, path, &ext, GS_ATT_MAX_EXT * sizeof(struct gs_att_ext), NULL, NULL);
	if (ret) {
		free(ext);
		return ret;
	}
	if (m.h.len != (uint64_t)m.u.open.next * sizeof(struct gs_att_ext)) {
		free(ext);
		return -EPROTO;
	}
	obj->ino = m.u.open.ino;
	obj->size = m.u.open.size;
	obj->nblocks = m.u.open.nblocks;
	obj->next = m.u.open.next;
	obj->ext = ext;
	return 0;
}

int gs_attach_open_blocks(struct gs_attach *a, const char *path, uint32_t block_size,
			  uint32_t flags, struct gs_attach_obj *obj, uint32_t *ext_shift)
{
	uint32_t fsbs = 0, unit, per;
	int ret, aligned = 1;

	if (block_size < 512 || (block_size & (block_size - 1)) || !ext_shift)
		return -EINVAL;
	ret = gs_attach_hello(a, &fsbs);
	if (ret)
		return ret;
	if (!fsbs || (fsbs & (fsbs - 1)))
		return -EPROTO;
	unit = block_size < fsbs ? block_size : fsbs;
	ret = gs_attach_open(a, path, unit, flags, obj);
	if (ret)
		return ret;
	*ext_shift = (uint32_t)__builtin_ctz(unit);
	per = block_size / unit;
	if (per > 1) {
		for (uint32_t i = 0; i < obj->next && aligned; i++)
			aligned = !((obj->ext[i].blk | obj->ext[i].nblk) & (per - 1));
		if (aligned) {
			for (uint32_t i = 0; i < obj->next; i++) {
				obj->ext[i].blk /= per;
				obj->ext[i].nblk /= per;
			}
			*ext_shift = (uint32_t)__builtin_ctz(block_size);
		}
	}
	obj->nblocks = (obj->size + block_size - 1) / block_size;
	return 0;
}

int gs_attach_ring(struct gs_attach *a, uint32_t sq, uint32_t cq, uint32_t ncw,
		   size_t buf_bytes, uint32_t flags, struct gs_attach_ring *r)
{
	struct gs_att_msg m = { .h.op = GS_ATT_RING };
	int fds[2], nfds = 0, ret;

	m.u.ring.sq_entries = sq;
	m.u.ring.cq_entries = cq;
	m.u.ring.ncw = ncw;
	m.u.ring.flags = flags;
	m.u.ring.buf_bytes = buf_bytes;
	ret = call(a, &m, NULL, NULL, 0, fds, &nfds);
	if (ret || nfds != 2 || m.u.ring.buf_off > m.u.ring.map_bytes) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return ret ? ret : -EPROTO;
	}
	memset(r, 0, sizeof(*r));
	r->map_len = m.u.ring.map_bytes;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (r->map == MAP_FAILED) {
		ret = -errno;
		close(fds[1]);
		return ret;
	}
	r->ring = (struct gs_ring *)r->map;
	r->buf = (char *)r->map + m.u.ring.buf_off;
	r->buf_len = r->map_len - m.u.ring.buf_off;
	r->kick_fd = fds[1];
	r->id = m.u.ring.id;
	return 0;
}

void gs_attach_ring_unmap(struct gs_attach_ring *r)
{
	if (r->map && r->map != MAP_FAILED)
		munmap(r->map, r->map_len);
	if (r->kick_fd > 0)
		close(r->kick_fd);
	memset(r, 0, sizeof(*r));
}

int gs_attach_sync(struct gs_attach *a, uint64_t ino)
{
	struct gs_att_msg m = { .h.op = GS_ATT_SYNC };

	m.u.sync.ino = ino;
	return call(a, &m, NULL, NULL, 0, NULL, NULL);
}

/* ---- GRAPH ---- */

/* [off, off + n * size) lies in a map of @len bytes, 8-byte aligned. */
static int in_map(uint64_t off, uint64_t n, uint64_t size, size_t len)
{
	if (off & 7 || off > len || (size && n > (len - off) / size))
		return 0;
	return 1;
}

/* Every array the header names lies inside the map: a reader may trust the
 * offsets and counts (the daemon wrote them; a bug there must not become a
 * wild read here). */
static int graph_map_ok(const struct gs_att_graph_map *h, size_t len)
{
	uint32_t ps;

	if (len < sizeof(*h) || h->magic != GS_ATT_GRAPH_MAGIC || h->ndirs < 1 || h->ndirs > 2)
		return 0;
	ps = h->page_size;
	if (ps < 512 || (ps & (ps - 1)) || (h->id_bytes != 4 && h->id_bytes != 8))
		return 0;
	for (uint32_t d = 0; d < h->ndirs; d++) {
		const struct gs_att_graph_dir *hd = &h->dir[d];

		if (!in_map(hd->key_off, hd->ngtt, 8, len) ||
		    !in_map(hd->last_off, hd->ngtt, 8, len) ||
		    !in_map(hd->page_off, hd->ngtt, 8, len))
			return 0;
		if (hd->vmap_off && (hd->vmap_bits > UINT64_MAX - 7 ||
				     !in_map(hd->vmap_off, (hd->vmap_bits + 7) / 8, 1, len)))
			return 0;
	}
	if (h->removed_off && !in_map(h->removed_off, h->nv / 8 + 1, 1, len))
		return 0;
	return in_map(h->ext_off, h->next, sizeof(struct gs_att_ext), len);
}

int gs_attach_graph(struct gs_attach *a, const char *path, struct gs_attach_graph *g)
{
	struct gs_att_msg m = { .h.op = GS_ATT_GRAPH, .h.len = (uint32_t)strlen(path) };
	int fds[2], nfds = 0, ret;
	void *map;

	if (m.h.len == 0 || m.h.len > GS_ATT_PATH_MAX)
		return -EINVAL;
	ret = call(a, &m, path, NULL, 0, fds, &nfds);
	if (ret || nfds != 1 || !m.u.graph.map_bytes || m.u.graph.map_bytes > SIZE_MAX) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return ret ? ret : -EPROTO;
	}
	map = mmap(NULL, m.u.graph.map_bytes, PROT_READ, MAP_SHARED, fds[0], 0);
	ret = map == MAP_FAILED ? -errno : 0;
	close(fds[0]);
	if (ret)
		return ret;
	if (!graph_map_ok(map, m.u.graph.map_bytes)) {
		munmap(map, m.u.graph.map_bytes);
		return -EPROTO;
	}
	memset(g, 0, sizeof(*g));
	g->ino = m.u.graph.ino;
	g->gen = m.u.graph.gen;
	g->max_io = m.u.graph.max_io;
	g->map = map;
	g->map_len = m.u.graph.map_bytes;
	return 0;
}

void gs_attach_graph_unmap(struct gs_attach_graph *g)
{
	if (g->map)
		munmap((void *)g->map, g->map_len);
	memset(g, 0, sizeof(*g));
}
