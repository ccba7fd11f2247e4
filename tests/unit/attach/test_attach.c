// SPDX-License-Identifier: MIT
/*
 * The attach protocol between processes: the daemon's server
 * (fs/fuse/attach_srv.c, included to reach its permission check) over an
 * in-process gs_fs, clients in forked children that OPEN an array, get a
 * ring + buffer region in a sealed memfd (SCM_RIGHTS), push requests as
 * CPU producers (kicking the daemon's pollers through the passed eventfd),
 * wait on completion words and check the data.  Two clients at once share
 * the pollers; one writes, FLUSHes and SYNCs, and the fs sees its data.
 * Also: the open(2)-like permission check for every class of peer, the
 * protocol's refusals (unknown ops, flags, reserved fields), and the
 * memfd's seals.  GRAPH: a graph's layout, its pages through a ring.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/wait.h>

#include "../fs/fs_test.h"
#include "fs/fuse/attach_srv.c"
#include "gstore_graph.h"
#include "gstore_graph_dev.h"

#define BS	4096u
#define NBLK	512u

static char *img;
static struct gs_fs *fs;
static uint64_t arrays, ino_a;
static char sock[64];

static uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static int mkfile(const char *name, uint32_t mode, uint64_t nblk, uint64_t salt, uint64_t *ino)
{
	uint64_t *buf = malloc(BS);
	struct gs_stat st;
	int ret;

	ret = gs_fs_create(fs, arrays, name, GS_T_ARRAY, S_IFREG | mode, getuid(), getgid(), &st);
	for (uint64_t b = 0; !ret && b < nblk; b++) {
		for (uint64_t i = 0; i < BS / 8; i++)
			buf[i] = pattern(b * BS + i * 8) ^ salt;
		ret = gs_fs_write(fs, st.ino, buf, BS, b * BS) == BS ? 0 : -EIO;
	}
	free(buf);
	if (!ret)
		ret = gs_fs_fsync(fs, st.ino, 0);
	*ino = st.ino;
	return ret;
}

static int setup(void **state)
{
	uint64_t ino;

	if (test_scratch("attach", 64u << 20, &img, &fs, &arrays))
		return -1;
	snprintf(sock, sizeof(sock), "/tmp/gs-attach-%d.sock", getpid());
	if (mkfile("a", 0644, NBLK, 0, &ino_a) || mkfile("empty", 0644, 0, 0, &ino))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	return test_scratch_end(img, fs);
}

static struct gs_attach_srv *start(void)
{
	struct gs_attach_srv_params sp = { .sock_path = sock, .fs = fs, .allow_other = 1 };
	struct gs_attach_srv *s;

	assert_int_equal(gs_attach_start(&s, &sp), 0);
	return s;
}

static void kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, 8) != 8)
		abort();
}

static int64_t dev_off(const struct gs_attach_obj *o, uint64_t b)
{
	for (uint32_t i = 0; i < o->next; i++)
		if (b >= o->ext[i].blk && b < o->ext[i].blk + o->ext[i].nblk)
			return (int64_t)(o->ext[i].dev_off + (b - o->ext[i].blk) * BS);
	return -1;
}

static int64_t ring_io(struct gs_attach_ring *r, uint8_t op, uint64_t off, uint32_t slot)
{
	struct gs_sqe e = { .op = op, .flags = GS_SQE_CW, .len = BS, .off = off,
			    .buf = (uint64_t)slot * BS, .cw = slot };

	if (op != GS_OP_FLUSH)
		e.flags |= GS_SQE_BUF_OFF;
	else
		e.len = 0;
	gs_cw_arm(r->ring, slot);
	gs_sq_push(r->ring, &e);
	if (gs_sq_need_kick(r->ring))
		kick(r->kick_fd);
	return gs_ring_cw_wait(r->ring, slot, 50);
}

/* A client process: 0 if everything it read matched and its write went in. */
static int client(int id, int nreq)
{
	struct gs_attach *a;
	struct gs_attach_obj obj;
	struct gs_attach_ring r;
	uint64_t wblk = NBLK - 1 - id;
	uint32_t bs;
	int bad = 0;

	if (gs_attach_connect(&a, sock) || gs_attach_hello(a, &bs) || bs != BS)
		return 10;
	if (gs_attach_open(a, "arrays/a", BS, GS_ATT_OPEN_WRITE, &obj) || obj.ino != ino_a ||
	    obj.nblocks != NBLK || obj.size != (uint64_t)NBLK * BS || !obj.next)
		return 11;
	if (gs_attach_ring(a, 64, 64, 64, 64 * BS, 0, &r) || r.buf_len != 64 * BS)
		return 12;
	for (int k = 0; k < nreq; k++) {
		uint32_t cw = k % 64;
		/* not the last two blocks: the clients write those meanwhile */
		uint64_t blk = (k * 131 + id * 7) % (NBLK - 2);
		const uint64_t *w = (const uint64_t *)((char *)r.buf + (size_t)cw * BS);

		if (ring_io(&r, GS_OP_READ, (uint64_t)dev_off(&obj, blk), cw) != BS)
			return 13;
		for (uint32_t i = 0; i < BS / 8; i++)
			bad += w[i] != pattern(blk * BS + i * 8);
	}
	/* a write and a flush through the same ring, then SYNC */
	for (uint32_t i = 0; i < BS / 8; i++)
		((uint64_t *)r.buf)[i] = ~pattern(wblk * BS + i * 8);
	if (ring_io(&r, GS_OP_WRITE, (uint64_t)dev_off(&obj, wblk), 0) != BS)
		return 14;
	if (ring_io(&r, GS_OP_FLUSH, 0, 1) < 0)
		return 15;
	if (gs_attach_sync(a, obj.ino))
		return 16;
	free(obj.ext);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return bad ? 1 : 0;
}

static void wait_child(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_two_clients(void **state)
{
	struct gs_attach_srv *s = start();
	uint64_t v;
	pid_t pid[2];

	/* the fs's cache holds the file: the clients must see it on the device */
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			_exit(client(i, 300));
	}
	for (int i = 0; i < 2; i++)
		wait_child(pid[i]);
	/* the clients' writes, through the fs (its cache dropped at SYNC) */
	for (int i = 0; i < 2; i++) {
		uint64_t blk = NBLK - 1 - i;

		assert_int_equal(gs_fs_read(fs, ino_a, &v, 8, blk * BS + 16), 8);
		assert_int_equal(v, ~pattern(blk * BS + 16));
	}
	gs_attach_stop(s);
}

/* Raw requests: the reply's status, or -ECONNRESET when the server hung up. */
static int raw(int fd, struct gs_att_msg *m, const void *payload)
{
	void *rp = NULL;
	int ret;

	m->h.magic = m->h.magic ? m->h.magic : GS_ATT_MAGIC;
	m->h.version = GS_ATT_VERSION;
	ret = gs_attach_send(fd, m, payload, NULL, 0);
	if (!ret)
		ret = gs_attach_recv(fd, m, &rp, 1 << 20, NULL, NULL);
	free(rp);
	return ret ? ret : m->h.status;
}

static int raw_fd(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_errors(void **state)
{
	struct gs_attach_srv *s = start();
	struct gs_attach *a;
	struct gs_attach_obj obj;
	struct gs_attach_ring r[GS_ATT_MAX_RINGS];
	struct gs_att_msg m;
	struct stat st;
	char p[64];
	int fd;

	assert_int_equal(gs_attach_connect(&a, "/nonexistent/sock"), -ENOENT);
	assert_int_equal(gs_attach_sock_path("/mnt/gstore/", p, sizeof(p)), 0);
	assert_string_equal(p, "/mnt/.gstore.gstore.sock");
	assert_int_equal(gs_attach_sock_path("/mnt/gstore/", p, 8), -ENAMETOOLONG);
	/* anyone may connect: OPEN decides */
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0666);

	assert_int_equal(gs_attach_connect(&a, sock), 0);
	assert_int_equal(gs_attach_open(a, "arrays/a", 3000, 0, &obj), -EINVAL);	/* not 2^n */
	assert_int_equal(gs_attach_open(a, "arrays/a", BS, 1u << 7, &obj), -EINVAL);	/* flag */
	assert_int_equal(gs_attach_open(a, "arrays/nope", BS, 0, &obj), -ENOENT);
	assert_int_equal(gs_attach_open(a, "arrays", BS, 0, &obj), -EISDIR);
	assert_int_equal(gs_attach_open(a, "arrays/a/x", BS, 0, &obj), -ENOTDIR);
	assert_int_equal(gs_attach_open(a, "arrays/../arrays/a", BS, 0, &obj), -EINVAL);
	assert_int_equal(gs_attach_open(a, "/arrays//./a", BS, 0, &obj), 0);
	free(obj.ext);
	assert_int_equal(gs_attach_open(a, "arrays/empty", BS, 0, &obj), 0);
	assert_int_equal(obj.next, 0);
	free(obj.ext);
	assert_int_equal(gs_attach_sync(a, ino_a), 0);
	assert_int_equal(gs_attach_sync(a, ino_a + 1000), -EBADF);	/* not opened */
	assert_int_equal(gs_attach_ring(a, 3, 4, 4, 4096, 0, &r[0]), -EINVAL);	/* sq not 2^n */
	assert_int_equal(gs_attach_ring(a, 8, 8, 8, 4096, 1u << 5, &r[0]), -EINVAL);	/* flag */
	assert_int_equal(gs_attach_ring(a, 8, 8, 8, GS_ATT_MAX_BUF + 1, 0, &r[0]), -EINVAL);
	for (int i = 0; i < GS_ATT_MAX_RINGS; i++)
		assert_int_equal(gs_attach_ring(a, 8, 8, 8, 4096, 0, &r[i]), 0);
	assert_int_equal(gs_attach_ring(a, 8, 8, 8, 4096, 0, &r[0]), -EMFILE);
	for (int i = 0; i < GS_ATT_MAX_RINGS; i++)
		gs_attach_ring_unmap(&r[i]);
	gs_attach_close(a);	/* the server drops the client's rings and leases */

	/* the wire format's rules, with raw messages */
	fd = raw_fd();
	m = (struct gs_att_msg){ .h.op = GS_ATT_HELLO };
	assert_int_equal(raw(fd, &m, NULL), 0);
	assert_int_equal(m.u.hello.block_size, BS);
	m = (struct gs_att_msg){ .h.op = GS_ATT_HELLO, .u.hello.rsvd0 = 1 };
	assert_int_equal(raw(fd, &m, NULL), -EINVAL);
	m = (struct gs_att_msg){ .h.op = GS_ATT_OP_NR };
	assert_int_equal(raw(fd, &m, NULL), -EINVAL);
	m = (struct gs_att_msg){ .h.op = 0 };
	assert_int_equal(raw(fd, &m, NULL), -EINVAL);
	m = (struct gs_att_msg){ .h.op = GS_ATT_HELLO, .h.len = 3 };
	assert_int_equal(raw(fd, &m, "abc"), -EINVAL);		/* a payload where none goes */
	m = (struct gs_att_msg){ .h.op = GS_ATT_OPEN, .h.len = 8, .u.open.block_size = BS,
				 .u.open.rsvd1 = 1 };
	assert_int_equal(raw(fd, &m, "arrays/a"), -EINVAL);
	m = (struct gs_att_msg){ .h.op = GS_ATT_SYNC, .u.sync.ino = ino_a, .u.sync.rsvd[4] = 1 };
	assert_int_equal(raw(fd, &m, NULL), -EINVAL);
	m = (struct gs_att_msg){ .h.op = GS_ATT_HELLO, .h.magic = 0x1234 };
	assert_int_equal(raw(fd, &m, NULL), -ECONNRESET);	/* not ours: hung up */
	close(fd);
	gs_attach_stop(s);
}

/* The memfd a client gets cannot be shrunk or grown under the daemon. */
static void test_sealed(void **state)
{
	struct gs_attach_srv *s = start();
	struct gs_att_msg m = { .h.op = GS_ATT_RING, .u.ring = { .sq_entries = 8,
		.cq_entries = 8, .ncw = 8, .buf_bytes = 4096 } };
	int fd = raw_fd(), fds[2], nfds = 0;
	void *rp = NULL;

	m.h.magic = GS_ATT_MAGIC;
	m.h.version = GS_ATT_VERSION;
	assert_int_equal(gs_attach_send(fd, &m, NULL, NULL, 0), 0);
	assert_int_equal(gs_attach_recv(fd, &m, &rp, 0, fds, &nfds), 0);
	assert_int_equal(m.h.status, 0);
	assert_int_equal(nfds, 2);
	assert_int_equal(ftruncate(fds[0], 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fds[0], m.u.ring.map_bytes * 2), -1);
	assert_int_equal(fcntl(fds[0], F_ADD_SEALS, 0), -1);	/* sealed for good */
	close(fds[0]);
	close(fds[1]);
	close(fd);
	gs_attach_stop(s);
}

/* The recall test's client: reads, lets the parent truncate, reads again. */
static int recalled_client(int ready, int go)
{
	struct gs_attach *a;
	struct gs_attach_obj obj, again;
	struct gs_attach_ring r;
	char b;

	if (gs_attach_connect(&a, sock) || gs_attach_open(a, "arrays/r", BS, 0, &obj) ||
	    gs_attach_ring(a, 8, 8, 8, 8 * BS, 0, &r))
		return 10;
	if (ring_io(&r, GS_OP_READ, (uint64_t)dev_off(&obj, 3), 0) != BS ||
	    ((uint64_t *)r.buf)[1] != pattern(3 * BS + 8))
		return 11;
	if (write(ready, "r", 1) != 1 || read(go, &b, 1) != 1)
		return 12;
	/* the lease was recalled: its blocks are no longer ours to read */
	if (ring_io(&r, GS_OP_READ, (uint64_t)dev_off(&obj, 3), 0) != -EACCES)
		return 13;
	if (gs_attach_open(a, "arrays/r", BS, 0, &again) || again.size || again.next)
		return 14;
	free(obj.ext);
	free(again.ext);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return 0;
}

/*
 * Truncating a file a client has open recalls the client's lease: the
 * truncate returns while the client is still connected (it waited for the
 * client to go away before), and the client's rings lose the blocks.
 */
static void test_recall(void **state)
{
	struct gs_attach_srv *s = start();
	struct gs_stat in = { .size = 0 }, out;
	int ready[2], go[2];
	uint64_t ino;
	pid_t pid;
	char b;

	assert_int_equal(mkfile("r", 0644, 16, 0, &ino), 0);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	if (!pid)
		_exit(recalled_client(ready[1], go[0]));
	assert_int_equal(read(ready[0], &b, 1), 1);
	assert_int_equal(gs_fs_setattr(fs, ino, &in, GS_SET_SIZE, &out), 0);
	assert_int_equal(out.size, 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	wait_child(pid);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(go[i]);
	}
	gs_attach_stop(s);
}

/* One user gets max_per_user connections; the next is closed at once. */
static void test_per_user(void **state)
{
	struct gs_attach_srv_params sp = { .sock_path = sock, .fs = fs, .max_per_user = 2 };
	struct gs_attach *a[3];
	struct gs_attach_srv *s;
	uint32_t bs;
	int ret;

	assert_int_equal(gs_attach_start(&s, &sp), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gs_attach_connect(&a[i], sock), 0);
	assert_int_equal(gs_attach_hello(a[0], &bs), 0);
	assert_int_equal(gs_attach_hello(a[1], &bs), 0);
	ret = gs_attach_hello(a[2], &bs);	/* hung up on: the reply or the request fails */
	assert_true(ret == -ECONNRESET || ret == -EPIPE);
	gs_attach_close(a[2]);
	gs_attach_close(a[1]);
	for (int k = 0; k < 200; k++) {	/* until the server has seen it go */
		assert_int_equal(gs_attach_connect(&a[1], sock), 0);
		if (!gs_attach_hello(a[1], &bs))
			break;
		gs_attach_close(a[1]);
		a[1] = NULL;
		usleep(10000);
	}
	assert_non_null(a[1]);
	gs_attach_close(a[1]);
	gs_attach_close(a[0]);
	gs_attach_stop(s);
}

/* open(2)'s rules, for every class of peer. */
static void test_may(void **state)
{
	gid_t g[] = { 30, 40 };
	struct peer user = { .uid = 1000, .gid = 100, .ngroups = 2, .groups = g };
	struct peer root = { .uid = 0, .gid = 0 };
	struct gs_stat f = { .mode = S_IFREG | 0640, .uid = 1000, .gid = 40 };
	struct gs_stat d = { .mode = S_IFDIR | 0710, .uid = 2000, .gid = 30 };

	assert_int_equal(may(&user, &f, R_OK | W_OK), 0);		/* owner */
	f.mode = S_IFREG | 0240;
	assert_int_equal(may(&user, &f, R_OK), -EACCES);		/* owner bits rule */
	f.uid = 2000;
	assert_int_equal(may(&user, &f, R_OK), 0);			/* group (supplementary) */
	assert_int_equal(may(&user, &f, W_OK), -EACCES);
	f.gid = 50;
	assert_int_equal(may(&user, &f, R_OK), -EACCES);		/* others: none */
	f.mode = S_IFREG | 0604;
	assert_int_equal(may(&user, &f, R_OK), 0);			/* others: read */
	assert_int_equal(may(&user, &f, R_OK | W_OK), -EACCES);
	assert_int_equal(may(&user, &d, X_OK), 0);			/* search by group */
	assert_int_equal(may(&user, &d, R_OK), -EACCES);
	user.gid = 30;
	user.ngroups = 0;
	assert_int_equal(may(&user, &d, X_OK), 0);			/* primary group */
	f.mode = S_IFREG | 0000;
	assert_int_equal(may(&root, &f, R_OK | W_OK), 0);		/* CAP_DAC_OVERRIDE */
	assert_int_equal(may(&root, &f, X_OK), -EACCES);		/* no x bit at all */
	d.mode = S_IFDIR | 0000;
	assert_int_equal(may(&root, &d, X_OK), 0);
}

/* A directed graph: 600 vertices, a hub of 1500 out-neighbours (its list over pages). */
static int mkgraph(const char *name)
{
	struct gs_graph_import_opts o = { .flags = GS_GRAPH_IMPORT_DIRECTED, .nv = 600 };
	FILE *f = tmpfile();
	int ret;

	if (!f)
		return -errno;
	for (unsigned i = 0; i < 4000; i++)
		fprintf(f, "%u %u\n", (i * 7919u) % 600, (i * 104729u + 13) % 600);
	for (unsigned i = 0; i < 1500; i++)
		fprintf(f, "42 %u\n", (i * 31u) % 600);
	fflush(f);
	rewind(f);
	ret = gs_graph_import_fd(fs, name, fileno(f), &o);
	fclose(f);
	return ret;
}

/*
 * GRAPH: the layout the daemon hands out is gs_graph_layout_get()'s, its
 * memfd sealed; a ring of the connection reads the pages at its extents
 * (what the fs has there) and nothing else; a later GRAPH on a new
 * connection carries the updates made since; the refusals.
 */
static void test_graph(void **state)
{
	struct gs_attach_srv *s = start();
	struct gs_graph_layout *l;
	struct gs_attach_graph ag, ag2;
	struct gs_attach_ring r;
	struct gs_attach *a, *a2;
	struct gs_graph *g;
	struct gs_att_msg m;
	uint8_t *page = malloc(BS);
	int fd, fds[2], nfds = 0;
	void *rp = NULL;

	assert_non_null(page);
	assert_int_equal(mkgraph("g"), 0);
	assert_int_equal(gs_attach_connect(&a, sock), 0);
	assert_int_equal(gs_attach_graph(a, "graph/g", &ag), 0);
	assert_int_equal(gs_attach_ring(a, 8, 8, 8, 8 * BS, 0, &r), 0);

	/* the same layout as the library's (the server's own handle is closed) */
	const struct gs_att_graph_map *h = ag.map;
	const char *base = (const char *)h;

	assert_int_equal(gs_graph_open(fs, "g", 0, &g), 0);
	assert_int_equal(gs_graph_layout_get(g, 0, &l), 0);
	assert_int_equal(h->magic, GS_ATT_GRAPH_MAGIC);
	assert_int_equal(h->nv, l->nv);
	assert_int_equal(h->ne, l->ne);
	assert_int_equal(h->gen, l->gen);
	assert_int_equal(ag.gen, l->gen);
	assert_int_equal(h->ndirs, 2);
	assert_int_equal(h->page_size, BS);
	assert_int_equal(h->nblocks, l->nblocks);
	assert_int_equal(h->next, l->next);
	assert_true(ag.max_io >= BS);
	assert_memory_equal(base + h->ext_off, l->ext, l->next * sizeof(*l->ext));
	for (unsigned d = 0; d < 2; d++) {
		const struct gs_att_graph_dir *hd = &h->dir[d];

		assert_int_equal(hd->ngtt, l->dir[d].ngtt);
		assert_int_equal(hd->first_block, l->dir[d].first_block);
		assert_memory_equal(base + hd->key_off, l->dir[d].gtt_key, hd->ngtt * 8);
		assert_memory_equal(base + hd->last_off, l->dir[d].gtt_last, hd->ngtt * 8);
		assert_memory_equal(base + hd->page_off, l->dir[d].gtt_page, hd->ngtt * 8);
		/* every live page through the ring equals the pages object's bytes */
		for (uint64_t i = 0; i < hd->ngtt; i++) {
			uint64_t p = l->dir[d].gtt_page[i] & GS_GP_PAGE_MASK, b = hd->first_block + p;
			const struct gs_att_ext *e = (const void *)(base + h->ext_off);
			int64_t off = -1;

			for (uint32_t k = 0; k < h->next; k++)
				if (b >= e[k].blk && b < e[k].blk + e[k].nblk)
					off = (int64_t)(e[k].dev_off + (b - e[k].blk) * BS);
			assert_true(off >= 0);
			assert_int_equal(ring_io(&r, GS_OP_READ, (uint64_t)off, 0), BS);
			assert_int_equal(gs_fs_read(fs, hd->pages_ino, page, BS, p * BS), BS);
			assert_memory_equal(r.buf, page, BS);
		}
	}
	/* the ring reaches the graph's pages only: arrays/a was not opened */
	{
		struct gs_attach_obj o;
		struct gs_attach *b;

		assert_int_equal(gs_attach_connect(&b, sock), 0);
		assert_int_equal(gs_attach_open(b, "arrays/a", BS, 0, &o), 0);
		assert_int_equal(ring_io(&r, GS_OP_READ, (uint64_t)dev_off(&o, 0), 1), -EACCES);
		free(o.ext);
		gs_attach_close(b);
	}
	gs_graph_layout_put(l);

	/* updates since: the next GRAPH (a new connection) carries them */
	assert_int_equal(gs_graph_add_edge(g, 7, 599, 1.0f), 0);
	assert_int_equal(gs_graph_close(g), 0);	/* durable, not merged */
	assert_int_equal(gs_attach_connect(&a2, sock), 0);
	assert_int_equal(gs_attach_graph(a2, "graph/g", &ag2), 0);
	assert_true(ag2.gen > ag.gen);
	assert_int_equal(ag2.map->ne, h->ne + 1);
	gs_attach_graph_unmap(&ag2);
	gs_attach_close(a2);
	gs_attach_ring_unmap(&r);
	gs_attach_graph_unmap(&ag);

	/* refusals: one GRAPH per connection (a merge could wait on our own leases) */
	assert_int_equal(gs_attach_graph(a, "graph/g", &ag), -EBUSY);
	assert_int_equal(gs_attach_graph(a, "arrays/a", &ag), -EBUSY);
	gs_attach_close(a);
	assert_int_equal(gs_attach_connect(&a, sock), 0);
	assert_int_equal(gs_attach_graph(a, "arrays/a", &ag), -EINVAL);
	assert_int_equal(gs_attach_graph(a, "graph", &ag), -EISDIR);
	assert_int_equal(gs_attach_graph(a, "graph/nope", &ag), -ENOENT);
	assert_int_equal(gs_attach_graph(a, "graph/../graph/g", &ag), -EINVAL);
	gs_attach_close(a);
	fd = raw_fd();
	m = (struct gs_att_msg){ .h.op = GS_ATT_GRAPH, .h.len = 7, .u.graph.rsvd[1] = 1 };
	assert_int_equal(raw(fd, &m, "graph/g"), -EINVAL);
	m = (struct gs_att_msg){ .h.op = GS_ATT_GRAPH };
	assert_int_equal(raw(fd, &m, NULL), -EINVAL);		/* no path */

	/* the memfd: sealed against writes, shrinking and growing */
	m = (struct gs_att_msg){ .h.op = GS_ATT_GRAPH, .h.len = 7, .h.magic = GS_ATT_MAGIC,
				 .h.version = GS_ATT_VERSION };
	assert_int_equal(gs_attach_send(fd, &m, "graph/g", NULL, 0), 0);
	assert_int_equal(gs_attach_recv(fd, &m, &rp, 0, fds, &nfds), 0);
	assert_int_equal(m.h.status, 0);
	assert_int_equal(nfds, 1);
	assert_int_equal(fcntl(fds[0], F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW),
			 F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW);
	assert_true(mmap(NULL, m.u.graph.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0],
			 0) == MAP_FAILED);
	assert_int_equal(ftruncate(fds[0], 0), -1);
	close(fds[0]);
	close(fd);
	free(page);
	gs_attach_stop(s);
}

/* A server of our own that answers one GRAPH with @h (and @len bytes of map). */
struct fake_graph {
	int lfd;
	struct gs_att_graph_map h;
	size_t len;
};

static void *fake_graph_srv(void *arg)
{
	struct fake_graph *fg = arg;
	struct gs_att_msg m;
	void *payload = NULL;
	int fd = accept(fg->lfd, NULL, NULL), mfd;

	if (fd < 0)
		return NULL;
	if (gs_attach_recv(fd, &m, &payload, 4096, NULL, NULL) == 0) {
		mfd = memfd_create("fake-graph", MFD_CLOEXEC);
		if (ftruncate(mfd, fg->len) == 0 && pwrite(mfd, &fg->h, sizeof(fg->h), 0) > 0) {
			m.h.status = 0;
			m.h.len = 0;
			m.u.graph.map_bytes = fg->len;
			m.u.graph.max_io = 1 << 20;
			gs_attach_send(fd, &m, NULL, &mfd, 1);
		}
		close(mfd);
	}
	free(payload);
	close(fd);
	return NULL;
}

/* gs_attach_graph() checks what the daemon sends: every array inside the map. */
static void test_graph_map_checked(void **state)
{
	static const struct {
		const char *what;
		size_t off;	/* offsetof the u64 to spoil */
		uint64_t val;
	} bad[] = {
		{ "key past the end", offsetof(struct gs_att_graph_map, dir[0].key_off), 8192 },
		{ "gtt too long", offsetof(struct gs_att_graph_map, dir[0].ngtt), 1ull << 40 },
		{ "unaligned", offsetof(struct gs_att_graph_map, dir[0].page_off), 257 },
		{ "extents past the end", offsetof(struct gs_att_graph_map, next), 1000 },
		{ "removed bits past the end", offsetof(struct gs_att_graph_map, nv), 1ull << 20 },
		{ "vmap past the end", offsetof(struct gs_att_graph_map, dir[0].vmap_bits),
		  UINT64_MAX },
		{ "magic", offsetof(struct gs_att_graph_map, magic), 1 },
	};
	char path[64];

	snprintf(path, sizeof(path), "/tmp/gs-fake-graph-%d.sock", getpid());
	for (int i = -1; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct fake_graph fg = { .len = 4096 };
		struct gs_att_graph_map *h = &fg.h;
		struct gs_attach_graph ag;
		struct gs_attach *a;
		pthread_t th;

		/* a good map: one direction of 16 pages, vmap and removed bits, 2 extents */
		*h = (struct gs_att_graph_map){ .magic = GS_ATT_GRAPH_MAGIC, .ndirs = 1, .nv = 100,
						.page_size = 4096, .id_bytes = 4, .next = 2,
						.removed_off = 1024, .ext_off = 2048 };
		h->dir[0] = (struct gs_att_graph_dir){ .ngtt = 16, .key_off = 256, .last_off = 384,
						       .page_off = 512, .vmap_off = 640,
						       .vmap_bits = 100 };
		if (i >= 0) {
			uint64_t v = bad[i].val;

			if (bad[i].off == offsetof(struct gs_att_graph_map, magic) ||
			    bad[i].off == offsetof(struct gs_att_graph_map, next))
				memcpy((char *)h + bad[i].off, &(uint32_t){ (uint32_t)v }, 4);
			else
				memcpy((char *)h + bad[i].off, &v, 8);
		}
		unlink(path);
		fg.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		strcpy(sa.sun_path, path);
		assert_int_equal(bind(fg.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(listen(fg.lfd, 1), 0);
		assert_int_equal(pthread_create(&th, NULL, fake_graph_srv, &fg), 0);
		assert_int_equal(gs_attach_connect(&a, path), 0);
		int r = gs_attach_graph(a, "graph/g", &ag);

		if (i < 0) {
			assert_int_equal(r, 0);
			assert_int_equal(ag.map->nv, 100);
			assert_int_equal(ag.max_io, 1 << 20);
			gs_attach_graph_unmap(&ag);
		} else if (r != -EPROTO) {
			fail_msg("%s: %d, want -EPROTO", bad[i].what, r);
		}
		gs_attach_close(a);
		pthread_join(th, NULL);
		close(fg.lfd);
	}
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_clients),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_sealed),
		cmocka_unit_test(test_per_user),
		cmocka_unit_test(test_recall),
		cmocka_unit_test(test_may),
		cmocka_unit_test(test_graph),
		cmocka_unit_test(test_graph_map_checked),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
