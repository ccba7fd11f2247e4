// SPDX-License-Identifier: MIT
/*
 * The attach protocol (gpuq/attach.c) between processes: a server thread
 * over a gs_q on a temporary image, clients in forked children that get a
 * ring + buffer region in a memfd (SCM_RIGHTS), push requests as CPU
 * producers (kicking the daemon's pollers through the passed eventfd), wait
 * on completion words, and check the data.  Two clients at once share the
 * pollers.  Also: OPEN's extents (raw mode: the whole device), errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gstore.h"
#include "gpuq/attach.h"

#define BS	4096u
#define NBLK	2048u

static char img[] = "/tmp/gs-attach-XXXXXX";
static char sock[64];

static uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static int setup(void **state)
{
	int fd = mkstemp(img);
	uint64_t *buf = malloc(BS);

	if (fd < 0 || !buf)
		return -1;
	for (uint64_t b = 0; b < NBLK; b++) {
		for (uint64_t i = 0; i < BS / 8; i++)
			buf[i] = pattern(b * BS + i * 8);
		if (pwrite(fd, buf, BS, b * BS) != BS)
			return -1;
	}
	close(fd);
	free(buf);
	snprintf(sock, sizeof(sock), "/tmp/gs-attach-%d.sock", getpid());
	return 0;
}

static int teardown(void **state)
{
	unlink(img);
	return 0;
}

static void kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, 8) != 8)
		abort();
}

/* A client process: returns 0 if every block it read matched. */
static int client(int id, int nreq)
{
	struct gs_attach *a;
	struct gs_attach_obj obj;
	struct gs_attach_ring r;
	uint32_t lba;
	uint64_t cap;
	int bad = 0;

	if (gs_attach_connect(&a, sock) || gs_attach_hello(a, &lba, &cap) ||
	    cap != (uint64_t)NBLK * BS)
		return 10;
	if (gs_attach_open(a, "arrays/anything", BS, &obj) || obj.next != 1 ||
	    obj.nblocks != NBLK || obj.ext[0].dev_off != 0)
		return 11;
	free(obj.ext);
	if (gs_attach_ring(a, 64, 64, 64, 64 * BS, 0, &r))
		return 12;
	for (int k = 0; k < nreq; k++) {
		uint32_t cw = k % 64;
		uint64_t blk = (k * 131 + id * 7) % NBLK;
		struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CW,
				    .len = BS, .off = blk * BS, .buf = (uint64_t)cw * BS,
				    .tag = k, .cw = cw };

		gs_cw_arm(r.ring, cw);
		gs_sq_push(r.ring, &e);
		if (gs_sq_need_kick(r.ring))
			kick(r.kick_fd);
		if (gs_ring_cw_wait(r.ring, cw, 50) != BS)
			return 13;
		const uint64_t *w = (const uint64_t *)((char *)r.buf + (size_t)cw * BS);

		for (uint32_t i = 0; i < BS / 8; i++)
			bad += w[i] != pattern(blk * BS + i * 8);
	}
	/* a write and a flush through the same ring, then read it back */
	uint64_t *w = (uint64_t *)r.buf;

	for (uint32_t i = 0; i < BS / 8; i++)
		w[i] = ~pattern((NBLK - 1 - id) * (uint64_t)BS + i * 8);
	struct gs_sqe wr = { .op = GS_OP_WRITE, .flags = GS_SQE_BUF_OFF | GS_SQE_CW, .len = BS,
			     .off = (NBLK - 1 - id) * (uint64_t)BS, .buf = 0, .cw = 0 };
	struct gs_sqe fl = { .op = GS_OP_FLUSH, .flags = GS_SQE_CW, .cw = 1 };

	gs_cw_arm(r.ring, 0);
	gs_sq_push(r.ring, &wr);
	kick(r.kick_fd);
	if (gs_ring_cw_wait(r.ring, 0, 50) != BS)
		return 14;
	gs_cw_arm(r.ring, 1);
	gs_sq_push(r.ring, &fl);
	kick(r.kick_fd);
	if (gs_ring_cw_wait(r.ring, 1, 50) < 0)
		return 15;
	if (gs_attach_sync(a, obj.ino))
		return 16;
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return bad ? 1 : 0;
}

static void test_two_clients(void **state)
{
	struct gs_q_params qp = { .path = img, .flags = GS_Q_BUFFERED, .max_pollers = 2 };
	struct gs_attach_srv_params sp = { .sock_path = sock };
	struct gs_attach_srv *s;
	struct gs_q *q;
	pid_t pid[2];

	assert_int_equal(gs_q_open(&q, &qp), 0);
	sp.q = q;
	assert_int_equal(gs_attach_start(&s, &sp), 0);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			_exit(client(i, 300));
	}
	for (int i = 0; i < 2; i++) {
		int st;

		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	/* the clients' writes reached the image */
	int fd = open(img, O_RDONLY);
	uint64_t v;

	for (int i = 0; i < 2; i++) {
		assert_int_equal(pread(fd, &v, 8, (NBLK - 1 - i) * (uint64_t)BS + 16), 8);
		assert_int_equal(v, ~pattern((NBLK - 1 - i) * (uint64_t)BS + 16));
	}
	close(fd);
	gs_attach_stop(s);
	gs_q_close(q);
}

static void test_errors(void **state)
{
	struct gs_q_params qp = { .path = img, .flags = GS_Q_BUFFERED };
	struct gs_attach_srv_params sp = { .sock_path = sock };
	struct gs_attach_srv *s;
	struct gs_attach *a;
	struct gs_attach_obj obj;
	struct gs_attach_ring r;
	struct gs_q *q;
	char p[64];

	assert_int_equal(gs_attach_connect(&a, "/nonexistent/sock"), -ENOENT);
	assert_int_equal(gs_attach_sock_path("/mnt/gstore/", p, sizeof(p)), 0);
	assert_string_equal(p, "/mnt/.gstore.gstore.sock");
	assert_int_equal(gs_attach_sock_path("/mnt/gstore/", p, 8), -ENAMETOOLONG);
	assert_int_equal(gs_q_open(&q, &qp), 0);
	sp.q = q;
	assert_int_equal(gs_attach_start(&s, &sp), 0);
	assert_int_equal(gs_attach_connect(&a, sock), 0);
	assert_int_equal(gs_attach_open(a, "x", 3000, &obj), -EINVAL);	/* not a power of 2 */
	assert_int_equal(gs_attach_ring(a, 3, 4, 4, 4096, 0, &r), -EINVAL);	/* sq not pow2 */
	assert_int_equal(gs_attach_ring(a, 8, 8, 8, 4096, 0, &r), 0);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);	/* the server drops the client's ring */
	gs_attach_stop(s);
	gs_q_close(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_clients),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
