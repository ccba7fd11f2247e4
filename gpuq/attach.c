// SPDX-License-Identifier: MIT
/*
 * The attach protocol (see attach.h): a server thread that hands rings in
 * memfds to client processes and adds them to the daemon's pollers, and the
 * client calls.  One thread polls the listening socket and every client;
 * requests are small and served in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "attach.h"
#include "gstore_fs.h"
#include "gstore_cache.h"
#include "gs_log.h"

#define MAX_RINGS_PER_CLIENT	16

struct srv_ring {
	struct gs_ring *ring;
	void *map;
	size_t map_len;
};

struct client {
	int fd;
	uid_t uid;
	struct srv_ring rings[MAX_RINGS_PER_CLIENT];
	unsigned nrings;
};

struct gs_attach_srv {
	struct gs_attach_srv_params p;
	char *path;
	int lfd;
	int stop_fd[2];		/* a byte on [1] stops the thread */
	pthread_t th;
	struct client *cl;	/* [max_clients], fd -1 when free */
	uint64_t next_ring_id;
};

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
 * the path below it, in @full (realpath'd; *rel points into it): see attach.h. */
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

/* ---- message I/O ---- */

static int send_msg(int fd, const struct gs_att_msg *m, const void *payload, const int *fds,
		    int nfds)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)m, .iov_len = sizeof(*m) },
		{ .iov_base = (void *)payload, .iov_len = m->len },
	};
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = m->len ? 2 : 1 };
	ssize_t n;

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
	n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(*m) + m->len) ? 0 : -EIO;
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

/* Receive a header (and up to 2 fds with it), then @max payload bytes at most. */
static int recv_msg(int fd, struct gs_att_msg *m, void **payload, size_t max, int *fds, int *nfds)
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
	if (n != sizeof(*m) || m->magic != GS_ATT_MAGIC || m->version != GS_ATT_VERSION)
		return -EPROTO;
	if (!m->len)
		return 0;
	if (m->len > max)
		return -EMSGSIZE;
	*payload = malloc(m->len + 1);
	if (!*payload)
		return -ENOMEM;
	ret = read_full(fd, *payload, m->len);
	if (ret) {
		free(*payload);
		*payload = NULL;
		return ret;
	}
	((char *)*payload)[m->len] = 0;
	return 0;
}

/* ---- server ---- */

static void client_drop(struct gs_attach_srv *s, struct client *c)
{
	for (unsigned i = 0; i < c->nrings; i++) {
		gs_q_ring_del(s->p.q, c->rings[i].ring);
		munmap(c->rings[i].map, c->rings[i].map_len);
	}
	c->nrings = 0;
	close(c->fd);
	c->fd = -1;
}

/* Walk @path (relative to the mount, '/'-separated) from the root. */
static int resolve(struct gs_fs *fs, const char *path, struct gs_stat *st)
{
	char comp[GS_NAME_MAX + 1];
	uint64_t ino = GS_ROOT_INO;
	int ret = gs_fs_getattr(fs, ino, st);

	while (!ret && *path) {
		const char *e = strchr(path, '/');
		size_t n = e ? (size_t)(e - path) : strlen(path);

		if (n > GS_NAME_MAX)
			return -ENAMETOOLONG;
		if (n) {
			memcpy(comp, path, n);
			comp[n] = 0;
			ret = gs_fs_lookup(fs, ino, comp, st);
			ino = st->ino;
		}
		path += n + (e ? 1 : 0);
	}
	return ret;
}

/* OPEN: the object's extents in units of @bs (holes end an extent). */
static int do_open(struct gs_attach_srv *s, const char *path, uint32_t bs, struct gs_att_msg *r,
		   struct gs_att_ext **extp)
{
	struct gs_att_ext *ext = NULL;
	uint32_t next = 0, cap = 0;
	struct gs_q_geom g;
	struct gs_stat st;
	int ret;

	if (!bs || (bs & (bs - 1)))
		return -EINVAL;
	if (!s->p.fs) {	/* raw: the whole device */
		ret = gs_q_geometry(s->p.q, &g);
		if (ret)
			return ret;
		ext = malloc(sizeof(*ext));
		if (!ext)
			return -ENOMEM;
		*ext = (struct gs_att_ext){ .blk = 0, .nblk = g.capacity / bs, .dev_off = 0 };
		r->arg[0] = 0;
		r->arg[1] = g.capacity;
		r->arg[2] = ext->nblk;
		r->arg[3] = 1;
		*extp = ext;
		return 0;
	}
	ret = resolve(s->p.fs, path, &st);
	if (ret)
		return ret;
	if (st.type != GS_T_ARRAY)
		return -EISDIR;
	/* the daemon's cache may hold newer data than the device: write it out */
	ret = gs_fs_fsync(s->p.fs, st.ino, 1);
	if (ret)
		return ret;
	for (uint64_t off = 0; off < st.size;) {
		uint64_t dev, len;

		ret = gs_fs_bmap(s->p.fs, st.ino, off, &dev, &len);
		if (ret == -ENODATA) {	/* a hole: no extent; GPU reads of it fail -ERANGE */
			off += bs;
			continue;
		}
		if (ret)
			goto free_ext;
		if ((off | dev) & (bs - 1)) {
			ret = -EINVAL;	/* extents not aligned to the block size asked for */
			goto free_ext;
		}
		len &= ~(uint64_t)(bs - 1);
		if (!len) {
			ret = -EINVAL;
			goto free_ext;
		}
		if (next == cap) {
			struct gs_att_ext *n;

			cap = cap ? 2 * cap : 16;
			if (cap > GS_ATT_MAX_EXT) {
				ret = -E2BIG;
				goto free_ext;
			}
			n = realloc(ext, cap * sizeof(*ext));
			if (!n) {
				ret = -ENOMEM;
				goto free_ext;
			}
			ext = n;
		}
		ext[next++] = (struct gs_att_ext){ .blk = off / bs, .nblk = len / bs, .dev_off = dev };
		off += len;
	}
	r->arg[0] = st.ino;
	r->arg[1] = st.size;
	r->arg[2] = (st.size + bs - 1) / bs;
	r->arg[3] = next;
	*extp = ext;
	return 0;
free_ext:
	free(ext);
	return ret;
}

static int do_ring(struct gs_attach_srv *s, struct client *c, const struct gs_att_msg *m,
		   struct gs_att_msg *r, int *memfd)
{
	uint32_t sq = m->arg[0], cq = m->arg[1], ncw = m->arg[2], flags = m->arg[4];
	size_t rb, buf = m->arg[3], total;
	struct srv_ring *sr;
	void *map;
	int fd, ret;

	if (c->nrings == MAX_RINGS_PER_CLIENT)
		return -ENOSPC;
	if (sq > (1u << 20) || cq > (1u << 20) || ncw > (1u << 22) || buf > (64ull << 30))
		return -EINVAL;
	rb = (gs_ring_bytes(sq, cq, ncw) + 4095) & ~(size_t)4095;
	buf = (buf + 4095) & ~(size_t)4095;
	total = rb + buf;
	fd = memfd_create("gstore-ring", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, total) < 0) {
		ret = -errno;
		goto close_fd;
	}
	map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto close_fd;
	}
	ret = gs_ring_init(map, rb, sq, cq, ncw, flags);
	if (ret)
		goto unmap;
	/* no gs_q_register_buffer(): it would outlive this client's mapping */
	ret = gs_q_ring_add(s->p.q, map, buf ? (char *)map + rb : NULL, buf);
	if (ret)
		goto unmap;
	sr = &c->rings[c->nrings++];
	sr->ring = map;
	sr->map = map;
	sr->map_len = total;
	r->arg[0] = total;
	r->arg[1] = 0;
	r->arg[2] = rb;
	r->arg[3] = ++s->next_ring_id;
	*memfd = fd;
	return 0;
unmap:
	munmap(map, total);
close_fd:
	close(fd);
	return ret;
}

static int do_sync(struct gs_attach_srv *s, uint64_t ino)
{
	struct gs_cache *cache;
	struct gs_stat st;
	int ret;

	if (!s->p.fs)
		return 0;
	cache = gs_fs_cache(s->p.fs);
	ret = gs_fs_getattr(s->p.fs, ino, &st);
	if (ret || !cache)
		return ret;
	for (uint64_t off = 0; off < st.size;) {
		uint64_t dev, len;

		ret = gs_fs_bmap(s->p.fs, ino, off, &dev, &len);
		if (ret == -ENODATA) {
			off += 4096;
			continue;
		}
		if (ret)
			return ret;
		gs_cache_invalidate(cache, dev, len);
		off += len;
	}
	return 0;
}

/* One request from client @c; returns < 0 to drop the client. */
static int serve_one(struct gs_attach_srv *s, struct client *c)
{
	struct gs_att_msg m, r;
	struct gs_att_ext *ext = NULL;
	void *payload;
	int fds[2] = { -1, -1 }, nfds = 0, ret;

	ret = recv_msg(c->fd, &m, &payload, GS_ATT_PATH_MAX, NULL, NULL);
	if (ret)
		return ret;
	memset(&r, 0, sizeof(r));
	r.magic = GS_ATT_MAGIC;
	r.version = GS_ATT_VERSION;
	r.op = m.op;
	if (c->uid != 0 && c->uid != geteuid()) {
		r.status = -EPERM;
	} else if (m.op == GS_ATT_HELLO) {
		struct gs_q_geom g;

		r.status = gs_q_geometry(s->p.q, &g);
		r.arg[0] = g.lba_size;
		r.arg[1] = g.capacity;
	} else if (m.op == GS_ATT_OPEN) {
		r.status = payload ? do_open(s, payload, (uint32_t)m.arg[0], &r, &ext) : -EINVAL;
		if (!r.status)
			r.len = (uint32_t)(r.arg[3] * sizeof(*ext));
	} else if (m.op == GS_ATT_RING) {
		r.status = do_ring(s, c, &m, &r, &fds[0]);
		if (!r.status) {
			fds[1] = gs_q_kick_fd(s->p.q);
			nfds = 2;
		}
	} else if (m.op == GS_ATT_SYNC) {
		r.status = do_sync(s, m.arg[0]);
		if (!r.status && s->p.synced)
			s->p.synced(s->p.arg, m.arg[0]);
	} else {
		r.status = -EOPNOTSUPP;
	}
	free(payload);
	ret = send_msg(c->fd, &r, ext, fds, nfds);
	if (nfds)
		close(fds[0]);	/* the client has its own now; our mapping stays */
	free(ext);
	return ret;
}

static void *srv_thread(void *arg)
{
	struct gs_attach_srv *s = arg;
	uint32_t n = s->p.max_clients;
	struct pollfd *pf = calloc(n + 2, sizeof(*pf));

	if (!pf)
		return NULL;
	for (;;) {
		uint32_t k = 2;

		pf[0] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = s->stop_fd[0], .events = POLLIN };
		for (uint32_t i = 0; i < n; i++)
			if (s->cl[i].fd >= 0)
				pf[k++] = (struct pollfd){ .fd = s->cl[i].fd, .events = POLLIN };
		if (poll(pf, k, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		for (uint32_t j = 2; j < k; j++) {
			if (!pf[j].revents)
				continue;
			for (uint32_t i = 0; i < n; i++)
				if (s->cl[i].fd == pf[j].fd) {
					if (serve_one(s, &s->cl[i]) < 0)
						client_drop(s, &s->cl[i]);
					break;
				}
		}
		if (pf[0].revents & POLLIN) {
			int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
			struct ucred cr;
			socklen_t cl = sizeof(cr);
			uint32_t i;

			if (fd < 0)
				continue;
			for (i = 0; i < n && s->cl[i].fd >= 0; i++)
				;
			if (i == n || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
				gs_warn("attach: refusing a client (%s)", i == n ? "too many" :
					strerror(errno));
				close(fd);
				continue;
			}
			s->cl[i] = (struct client){ .fd = fd, .uid = cr.uid };
		}
	}
	free(pf);
	return NULL;
}

int gs_attach_start(struct gs_attach_srv **sp, const struct gs_attach_srv_params *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct gs_attach_srv *s;
	int ret;

	if (!p || !p->sock_path || !p->q || strlen(p->sock_path) >= sizeof(sa.sun_path))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	if (!s->p.max_clients)
		s->p.max_clients = 64;
	s->path = strdup(p->sock_path);
	s->cl = calloc(s->p.max_clients, sizeof(*s->cl));
	if (!s->path || !s->cl) {
		ret = -ENOMEM;
		goto free_s;
	}
	for (uint32_t i = 0; i < s->p.max_clients; i++)
		s->cl[i].fd = -1;
	if (pipe2(s->stop_fd, O_CLOEXEC) < 0) {
		ret = -errno;
		goto free_s;
	}
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		ret = -errno;
		goto close_pipe;
	}
	strcpy(sa.sun_path, p->sock_path);
	unlink(p->sock_path);	/* a stale socket of an earlier daemon */
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s->lfd, 16) < 0) {
		ret = -errno;
		gs_err("attach: %s: %s", p->sock_path, strerror(errno));
		goto close_sock;
	}
	ret = -pthread_create(&s->th, NULL, srv_thread, s);
	if (ret)
		goto unlink_sock;
	*sp = s;
	return 0;
unlink_sock:
	unlink(p->sock_path);
close_sock:
	close(s->lfd);
close_pipe:
	close(s->stop_fd[0]);
	close(s->stop_fd[1]);
free_s:
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
	for (uint32_t i = 0; i < s->p.max_clients; i++)
		if (s->cl[i].fd >= 0)
			client_drop(s, &s->cl[i]);
	unlink(s->path);
	close(s->lfd);
	close(s->stop_fd[0]);
	close(s->stop_fd[1]);
	free(s->cl);
	free(s->path);
	free(s);
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
	uint16_t op = m->op;
	void *rp = NULL;
	int ret;

	m->magic = GS_ATT_MAGIC;
	m->version = GS_ATT_VERSION;
	ret = send_msg(a->fd, m, payload, NULL, 0);
	if (ret)
		return ret;
	ret = recv_msg(a->fd, m, &rp, max, fds, nfds);
	if (ret)
		return ret;
	if (m->op != op) {
		free(rp);
		return -EPROTO;
	}
	if (reply_payload)
		*reply_payload = rp;
	else
		free(rp);
	return m->status;
}

int gs_attach_hello(struct gs_attach *a, uint32_t *lba, uint64_t *capacity)
{
	struct gs_att_msg m = { .op = GS_ATT_HELLO };
	int ret = call(a, &m, NULL, NULL, 0, NULL, NULL);

	if (!ret) {
		*lba = (uint32_t)m.arg[0];
		*capacity = m.arg[1];
	}
	return ret;
}

int gs_attach_open(struct gs_attach *a, const char *path, uint32_t block_size,
		   struct gs_attach_obj *obj)
{
	struct gs_att_msg m = { .op = GS_ATT_OPEN, .len = (uint32_t)strlen(path) };
	void *ext = NULL;
	int ret;

	if (m.len == 0 || m.len > GS_ATT_PATH_MAX)
		return -EINVAL;
	m.arg[0] = block_size;
	ret = call(a, &m, path, &ext, GS_ATT_MAX_EXT * sizeof(struct gs_att_ext), NULL, NULL);
	if (ret) {
		free(ext);
		return ret;
	}
	if (m.len != m.arg[3] * sizeof(struct gs_att_ext)) {
		free(ext);
		return -EPROTO;
	}
	obj->ino = m.arg[0];
	obj->size = m.arg[1];
	obj->nblocks = m.arg[2];
	obj->next = (uint32_t)m.arg[3];
	obj->ext = ext;
	return 0;
}

int gs_attach_ring(struct gs_attach *a, uint32_t sq, uint32_t cq, uint32_t ncw,
		   size_t buf_bytes, uint32_t flags, struct gs_attach_ring *r)
{
	struct gs_att_msg m = { .op = GS_ATT_RING };
	int fds[2], nfds = 0, ret;

	m.arg[0] = sq;
	m.arg[1] = cq;
	m.arg[2] = ncw;
	m.arg[3] = buf_bytes;
	m.arg[4] = flags;
	ret = call(a, &m, NULL, NULL, 0, fds, &nfds);
	if (ret || nfds != 2) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return ret ? ret : -EPROTO;
	}
	memset(r, 0, sizeof(*r));
	r->map_len = m.arg[0];
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (r->map == MAP_FAILED) {
		ret = -errno;
		close(fds[1]);
		return ret;
	}
	r->ring = (struct gs_ring *)((char *)r->map + m.arg[1]);
	r->buf = (char *)r->map + m.arg[2];
	r->buf_len = r->map_len - m.arg[2];
	r->kick_fd = fds[1];
	r->id = m.arg[3];
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
	struct gs_att_msg m = { .op = GS_ATT_SYNC };

	m.arg[0] = ino;
	return call(a, &m, NULL, NULL, 0, NULL, NULL);
}
