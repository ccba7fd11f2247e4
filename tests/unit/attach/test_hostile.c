// SPDX-License-Identifier: MIT
/*
 * A hostile attach client against the daemon side (the attach server over
 * an in-process gs_fs; tests/integration/attach_hostile.sh runs this under
 * ASan).  The hostile process, after a legitimate attach:
 *   - rewrites its ring's geometry fields, then its head/tail counters and
 *     slot words, with garbage;
 *   - sends reads at device offsets outside its object (the neighbouring
 *     object's extents, the superblock, the device's end and beyond), with
 *     lengths that straddle its object's end or overflow, buffer offsets
 *     outside its region and raw addresses;
 *   - writes through a ring it opened read-only;
 *   - tries to shrink its ring memfd, pokes the kick eventfd, sends
 *     malformed messages and half a message;
 *   - floods a ring it never drains, and a second one disconnects with its
 *     requests in flight.
 * Meanwhile and afterwards a well-behaved client reads and writes its own
 * file and checks the data.  Then: the daemon is alive, the neighbour's and
 * the read-only object's bytes on the device are unchanged, no refused read
 * put device bytes into the region, and the refusals were counted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "../fs/fs_test.h"
#include "gstore_attach.h"
#include "fs/fuse/attach_srv.h"

#define BS	4096u
#define NBLK	64u
#define SLOTS	64u
#define REGION	(16u * BS)

enum { VICTIM, NEIGHBOUR, SCRATCH, GOOD, NFILES };
static const char *const names[NFILES] = { "victim", "neighbour", "scratch", "good" };

static char *img;
static struct gs_fs *fs;
static uint64_t arrays, ino[NFILES], capacity;
static struct gs_att_ext next_ext[64];	/* the neighbour's extents */
static int nnext;
static char sock[64];

static uint64_t pattern(int file, uint64_t off)
{
	uint64_t x = (off + ((uint64_t)file << 40)) * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static int fill(int file, uint64_t blk, void *buf)
{
	for (uint64_t i = 0; i < BS / 8; i++)
		((uint64_t *)buf)[i] = pattern(file, blk * BS + i * 8);
	return 0;
}

static int check(int file, uint64_t blk, const void *buf)
{
	for (uint64_t i = 0; i < BS / 8; i++)
		if (((const uint64_t *)buf)[i] != pattern(file, blk * BS + i * 8))
			return 0;
	return 1;
}

/* Every block of @file as it is on the device (a lease reads around the cache). */
static int device_intact(int file)
{
	struct gs_lease *l;
	char *buf = aligned_alloc(BS, BS);
	int ok = 1;

	assert_int_equal(gs_fs_lease_begin(fs, ino[file], 0, NBLK * BS, GS_LEASE_READ, &l), 0);
	for (uint64_t b = 0; b < NBLK && ok; b++) {
		assert_int_equal(gs_fs_lease_pread(l, buf, BS, b * BS), BS);
		ok = check(file, b, buf);
	}
	assert_int_equal(gs_fs_lease_end(l), 0);
	free(buf);
	return ok;
}

static int setup(void **state)
{
	struct gs_fs_statfs sf;
	struct gs_lease *l;
	char *buf = malloc(BS);

	if (test_scratch("hostile", 64u << 20, &img, &fs, &arrays) || gs_fs_statfs(fs, &sf))
		return -1;
	capacity = sf.blocks * sf.block_size;
	for (int f = 0; f < NFILES; f++) {
		struct gs_stat st;

		if (gs_fs_create(fs, arrays, names[f], GS_T_ARRAY, S_IFREG | 0644, getuid(),
				 getgid(), &st))
			return -1;
		ino[f] = st.ino;
		for (uint64_t b = 0; b < NBLK; b++)
			if (fill(f, b, buf) || gs_fs_write(fs, st.ino, buf, BS, b * BS) != BS)
				return -1;
		if (gs_fs_fsync(fs, st.ino, 0))
			return -1;
	}
	/* where the neighbour lives, as a test may learn it: a lease's export */
	if (gs_fs_lease_begin(fs, ino[NEIGHBOUR], 0, NBLK * BS, GS_LEASE_READ, &l))
		return -1;
	nnext = gs_fs_lease_export(l, BS, next_ext, 64);
	gs_fs_lease_end(l);
	free(buf);
	snprintf(sock, sizeof(sock), "/tmp/gs-hostile-%d.sock", getpid());
	return nnext > 0 && nnext <= 64 ? 0 : -1;
}

static int teardown(void **state)
{
	return test_scratch_end(img, fs);
}

/* ---- the clients' side ---- */

#define FAIL(code) do { fprintf(stderr, "client: check %d failed (line %d)\n", code, \
				__LINE__); return code; } while (0)

/* A producer that keeps its own copy of the geometry (the header is garbage). */
struct prod {
	struct gs_attach_ring ar;
	struct gs_sq_slot *sq;
	struct gs_cword *cw;
	uint32_t sq_mask;
	uint64_t refused;	/* requests we expect the daemon to refuse and count */
};

static void kick(struct prod *p)
{
	uint64_t one = 1;

	if (write(p->ar.kick_fd, &one, 8) != 8)
		abort();
}

static int prod_ring(struct gs_attach *a, struct prod *p, uint32_t sq, uint32_t cq)
{
	memset(p, 0, sizeof(*p));
	if (gs_attach_ring(a, sq, cq, SLOTS, REGION, 0, &p->ar))
		return -1;
	p->sq = gs_ring_sq(p->ar.ring);
	p->cw = gs_ring_cw(p->ar.ring);
	p->sq_mask = sq - 1;
	return 0;
}

/* Push at the ring's tail with our geometry; wait for word @cw if asked. */
static int64_t io(struct prod *p, uint8_t op, uint8_t flags, uint64_t off, uint32_t len,
		  uint64_t buf, uint32_t cw, int wait)
{
	struct gs_sqe e = { .op = op, .flags = flags | (wait ? GS_SQE_CW : 0), .len = len,
			    .off = off, .buf = buf, .cw = cw };
	uint64_t t = __atomic_fetch_add(&p->ar.ring->sq_tail, 1, __ATOMIC_RELAXED);
	struct gs_sq_slot *s = &p->sq[t & p->sq_mask];
	unsigned spins = 0;

	if (wait)
		p->cw[cw].state = 0;
	while (gs_load_acq64(&s->seq) != t && ++spins < 100000000)
		gs_cpu_relax();
	gs_sq_fill(s, t, &e);
	kick(p);
	if (!wait)
		return 0;
	for (spins = 0; !gs_load_acq32(&p->cw[cw].state); spins++)
		if (spins > 2000000)
			return -ETIMEDOUT;	/* 20 s: the daemon is stuck */
		else
			usleep(10);
	return p->cw[cw].res;
}

static int64_t rd(struct prod *p, uint64_t off, uint32_t len, uint64_t buf)
{
	return io(p, GS_OP_READ, GS_SQE_BUF_OFF, off, len, buf, 1, 1);
}

static int region_untouched(struct prod *p)
{
	const unsigned char *b = p->ar.buf;

	for (size_t i = 0; i < REGION; i++)
		if (b[i] != 0xa5)
			return 0;
	return 1;
}

/* A refused read: -EACCES/-EFAULT, and nothing landed in the region. */
static int refused(struct prod *p, uint8_t flags, uint64_t off, uint32_t len, uint64_t buf,
		   int64_t want)
{
	memset(p->ar.buf, 0xa5, REGION);
	if (io(p, GS_OP_READ, flags, off, len, buf, 1, 1) != want || !region_untouched(p))
		return 0;
	p->refused++;
	return 1;
}

static int connect_sock(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int64_t dev_of(const struct gs_attach_obj *o, uint64_t b)
{
	for (uint32_t i = 0; i < o->next; i++)
		if (b >= o->ext[i].blk && b < o->ext[i].blk + o->ext[i].nblk)
			return (int64_t)(o->ext[i].dev_off + (b - o->ext[i].blk) * BS);
	return -1;
}

/* Malformed messages and half a message, each on a connection of its own. */
static int bad_messages(void)
{
	struct gs_att_msg m = { .h = { .magic = GS_ATT_MAGIC, .version = GS_ATT_VERSION,
				       .op = GS_ATT_OPEN, .len = GS_ATT_PATH_MAX + 1 } };
	char junk[64];
	int fd;

	memset(junk, 0x5a, sizeof(junk));
	fd = connect_sock();	/* a payload over the limit: the server hangs up */
	if (fd < 0 || write(fd, &m, sizeof(m)) != sizeof(m))
		return -1;
	if (read(fd, junk, sizeof(junk)) > 0)
		return -1;
	close(fd);
	fd = connect_sock();	/* garbage */
	if (fd < 0 || write(fd, junk, sizeof(junk)) != sizeof(junk))
		return -1;
	if (read(fd, junk, sizeof(junk)) > 0)
		return -1;
	close(fd);
	fd = connect_sock();	/* half a header, then gone */
	if (fd < 0 || write(fd, &m, 10) != 10)
		return -1;
	close(fd);
	return 0;
}

/* The hostile client.  Writes how many refusals it caused to @out. */
static int hostile(int out)
{
	struct gs_attach_obj vic, scr;
	struct gs_attach *a;
	struct prod p, f;
	struct gs_ring *r;
	int64_t last;

	if (gs_attach_connect(&a, sock) || gs_attach_open(a, "arrays/victim", BS, 0, &vic) ||
	    gs_attach_open(a, "arrays/scratch", BS, GS_ATT_OPEN_WRITE, &scr) ||
	    prod_ring(a, &p, SLOTS, SLOTS))
		FAIL(1);
	r = p.ar.ring;
	/* the geometry, rewritten after the daemon has read it */
	r->sq_off = 1ull << 46;
	r->cq_off = ~0ull - 63;
	r->cw_off = 1ull << 40;
	r->sq_entries = 1u << 31;
	r->cq_entries = 3;
	r->ncw = ~0u;
	r->bytes = 64;
	r->flags = ~0u;
	r->magic = 0xdeadbeef;
	r->version = 99;
	for (uint64_t b = 0; b < NBLK; b += 7) {
		if (rd(&p, (uint64_t)dev_of(&vic, b), BS, 0) != BS || !check(VICTIM, b, p.ar.buf))
			FAIL(2);
	}
	/* outside the object: the neighbour, metadata, the device's end, beyond */
	last = dev_of(&vic, NBLK - 1);
	for (int i = 0; i < nnext; i++) {
		uint64_t d = next_ext[i].dev_off, n = next_ext[i].nblk;

		if (!refused(&p, GS_SQE_BUF_OFF, d, BS, 0, -EACCES) ||
		    !refused(&p, GS_SQE_BUF_OFF, d + (n - 1) * BS, BS, 0, -EACCES) ||
		    !refused(&p, GS_SQE_BUF_OFF, d, (uint32_t)(n * BS), 0, -EACCES))
			FAIL(3);
	}
	if (!refused(&p, GS_SQE_BUF_OFF, 0, BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, capacity - BS, BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, capacity, BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, ~0ull & ~(uint64_t)(BS - 1), BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)last, 2 * BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)last + BS, BS, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 0), ~0u, 0, -EACCES) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 0) - BS, 2 * BS, 0, -EACCES))
		FAIL(4);
	/* buffers outside the region, and addresses instead of offsets */
	if (!refused(&p, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 0), BS, REGION, -EFAULT) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 0), BS, REGION - BS / 2,
		     -EFAULT) ||
	    !refused(&p, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 0), BS, ~0ull - 100, -EFAULT) ||
	    !refused(&p, 0, (uint64_t)dev_of(&vic, 0), BS, (uintptr_t)&p, -EFAULT) ||
	    !refused(&p, 0, (uint64_t)dev_of(&vic, 0), BS, 0x1000, -EFAULT))
		FAIL(5);
	/* writes where it may only read, or nothing at all */
	memset(p.ar.buf, 0x66, REGION);
	if (io(&p, GS_OP_WRITE, GS_SQE_BUF_OFF, (uint64_t)dev_of(&vic, 3), BS, 0, 1, 1) != -EACCES ||
	    io(&p, GS_OP_WRITE, GS_SQE_BUF_OFF, next_ext[0].dev_off, BS, 0, 1, 1) != -EACCES ||
	    io(&p, GS_OP_WRITE, GS_SQE_BUF_OFF, 0, BS, 0, 1, 1) != -EACCES)
		FAIL(6);
	p.refused += 3;
	/* where it may write, it can */
	fill(SCRATCH, 5, p.ar.buf);
	if (io(&p, GS_OP_WRITE, GS_SQE_BUF_OFF, (uint64_t)dev_of(&scr, 5), BS, 0, 1, 1) != BS)
		FAIL(7);
	/* completion words and flags beyond the ring: no completion, no crash */
	io(&p, GS_OP_READ, GS_SQE_BUF_OFF | GS_SQE_CW, (uint64_t)dev_of(&vic, 1), BS, 0,
	   SLOTS + 5, 0);
	io(&p, GS_OP_READ, GS_SQE_BUF_OFF | GS_SQE_CW | 0xf0, (uint64_t)dev_of(&vic, 1), BS, 0,
	   ~0u, 0);
	io(&p, GS_OP_READ, GS_SQE_BUF_OFF | GS_SQE_CB, (uint64_t)dev_of(&vic, 1), BS, 0, 0, 0);
	io(&p, 77, GS_SQE_BUF_OFF, 0, BS, 0, 0, 0);
	/* the counters and slot words: garbage */
	r->sq_head = 0xfedcba9876543210ull;
	r->sq_tail = 17;
	r->cq_tail = ~0ull;
	r->cq_head = 5;
	for (uint32_t i = 0; i < SLOTS; i++) {
		p.sq[i].seq = r->sq_head + 1 + i * 977;
		p.sq[i].sqe = (struct gs_sqe){ .op = GS_OP_READ, .flags = 0xff, .len = ~0u,
					       .off = ~0ull, .buf = ~0ull, .cw = ~0u };
	}
	for (uint32_t i = 0; i < SLOTS; i++)
		((struct gs_cq_slot *)((char *)r + sizeof(*r) + SLOTS * sizeof(struct gs_sq_slot)))[i]
			.seq = ~0ull - i;
	kick(&p);
	/* the kick eventfd, saturated (or refused: EAGAIN when it would overflow) */
	uint64_t big = 0xfffffffffffffffeull;

	if (write(p.ar.kick_fd, &big, 8) != 8 && errno != EAGAIN)
		FAIL(8);
	if (bad_messages())
		FAIL(9);
	/* a flood: a ring never drained, its cq full after a lap, refused and
	 * allowed requests mixed; the daemon drops the cqes it cannot post */
	if (prod_ring(a, &f, 256, 4))
		FAIL(10);
	for (uint32_t k = 0; k < 20000; k++) {
		uint64_t off = k % 3 ? (uint64_t)dev_of(&vic, k % NBLK) : next_ext[0].dev_off;

		io(&f, GS_OP_READ, GS_SQE_BUF_OFF | GS_SQE_CQE, off, BS, (k % 15) * BS, 0, 0);
		f.refused += !(k % 3);
	}
	/* the ring still answers after all that (into the one block the flood
	 * left alone: its reads may still land in the others) */
	memset((char *)f.ar.buf + 15 * BS, 0, BS);
	if (rd(&f, (uint64_t)dev_of(&vic, 9), BS, 15 * BS) != BS ||
	    !check(VICTIM, 9, (char *)f.ar.buf + 15 * BS))
		FAIL(11);
	p.refused += f.refused;
	if (write(out, &p.refused, 8) != 8)
		FAIL(12);
	/* and gone, without unmapping or closing anything */
	return 0;
}

/* Pushes a ring full of writes and reads, and exits before they complete. */
static int vanisher(void)
{
	struct gs_attach_obj scr;
	struct gs_attach *a;
	struct prod p;

	if (gs_attach_connect(&a, sock) ||
	    gs_attach_open(a, "arrays/scratch", BS, GS_ATT_OPEN_WRITE, &scr) ||
	    prod_ring(a, &p, SLOTS, SLOTS))
		FAIL(20);
	for (uint32_t k = 0; k < 4 * SLOTS; k++) {
		uint8_t op = k & 1 ? GS_OP_WRITE : GS_OP_READ;

		/* block 5: what the hostile client wrote there, written again */
		if (op == GS_OP_WRITE)
			fill(SCRATCH, 5, (char *)p.ar.buf + (k % 16) * BS);
		io(&p, op, GS_SQE_BUF_OFF | GS_SQE_CQE, (uint64_t)dev_of(&scr, k & 1 ? 5 : k % NBLK),
		   BS, (k % 16) * BS, 0, 0);
	}
	_exit(0);
}

/* The well-behaved client: reads and writes its own file, reads the victim. */
static int good(void)
{
	struct gs_attach_obj obj, vic;
	struct gs_attach *a;
	struct prod p;

	if (gs_attach_connect(&a, sock) ||
	    gs_attach_open(a, "arrays/good", BS, GS_ATT_OPEN_WRITE, &obj) ||
	    gs_attach_open(a, "arrays/victim", BS, 0, &vic) || prod_ring(a, &p, SLOTS, SLOTS))
		FAIL(30);
	for (uint64_t k = 0; k < 4 * NBLK; k++) {
		uint64_t b = (k * 29) % NBLK;

		if (rd(&p, (uint64_t)dev_of(&obj, b), BS, 0) != BS || !check(GOOD, b, p.ar.buf))
			FAIL(31);
		if (rd(&p, (uint64_t)dev_of(&vic, b), BS, BS) != BS ||
		    !check(VICTIM, b, (char *)p.ar.buf + BS))
			FAIL(32);
	}
	/* block 7 rewritten with its own pattern (the check below reads it back) */
	fill(GOOD, 7, p.ar.buf);
	if (io(&p, GS_OP_WRITE, GS_SQE_BUF_OFF, (uint64_t)dev_of(&obj, 7), BS, 0, 1, 1) != BS ||
	    io(&p, GS_OP_FLUSH, 0, 0, 0, 0, 2, 1) != 0 || gs_attach_sync(a, obj.ino))
		FAIL(33);
	gs_attach_ring_unmap(&p.ar);
	gs_attach_close(a);
	return 0;
}

static void wait_ok(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static uint64_t stat_of(const char *key)
{
	char buf[4096], *p;
	int n = gs_fs_stats_text(fs, buf, sizeof(buf));

	assert_true(n > 0);
	p = strstr(buf, key);
	assert_non_null(p);
	return strtoull(p + strlen(key) + 2, NULL, 10);
}

static void test_hostile(void **state)
{
	struct gs_attach_srv_params sp = { .sock_path = sock, .fs = fs, .allow_other = 1 };
	struct gs_attach_srv *s;
	uint64_t expect = 0, denied0 = stat_of("q_ring_denied");
	int pfd[2], half;
	pid_t h, v, g;

	assert_int_equal(gs_attach_start(&s, &sp), 0);
	assert_int_equal(pipe(pfd), 0);
	/* a client that sent half a message and waits: it holds up nobody */
	half = connect_sock();
	assert_true(half >= 0);
	assert_int_equal(write(half, "GSAT", 4), 4);
	h = fork();
	if (!h)
		_exit(hostile(pfd[1]));
	g = fork();	/* the good client runs while the hostile one does its worst */
	if (!g)
		_exit(good());
	wait_ok(h);
	wait_ok(g);
	v = fork();
	if (!v)
		vanisher();
	wait_ok(v);
	g = fork();	/* and after */
	if (!g)
		_exit(good());
	wait_ok(g);
	assert_int_equal(read(pfd[0], &expect, 8), 8);
	close(pfd[0]);
	close(pfd[1]);
	close(half);
	gs_attach_stop(s);
	/* refused and counted: every refusal the hostile client knows of */
	assert_true(stat_of("q_ring_denied") - denied0 >= expect);
	assert_true(stat_of("q_ring_cq_dropped") > 0);
	/* nothing outside what the clients opened for writing changed */
	assert_true(device_intact(NEIGHBOUR));
	assert_true(device_intact(VICTIM));
	assert_true(device_intact(GOOD));
	assert_true(device_intact(SCRATCH));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
