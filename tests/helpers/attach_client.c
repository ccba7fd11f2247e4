// SPDX-License-Identifier: MIT
/*
 * attach_client: a CPU client of a running gstorefs's attach socket
 * (gstore_q.h, uapi/gstore_attach.h), the same protocol a CUDA program uses, for the mounted
 * integration tests (tests/integration/attach_*.sh).
 *
 *   attach_client read FILE OUT       read FILE (under a gstore mount) block by
 *                                     block in a shuffled order through a ring
 *                                     served by the daemon's pollers; write its
 *                                     bytes to OUT in file order
 *   attach_client read FILE OUT BS    the same in blocks of BS bytes, opened as
 *                                     gs_cuda_attach() opens (extents in the
 *                                     filesystem's unit unless aligned to BS),
 *                                     a block over extents read as one request
 *                                     per device run (gs_cam_piece(), the code
 *                                     GPU lanes run), holes as zeros
 *   attach_client write FILE SRC BLK  write SRC's bytes (whole 4 KiB blocks) to
 *                                     FILE at block BLK through a ring, FLUSH,
 *                                     then SYNC so that the daemon (and the
 *                                     kernel's page cache) drop stale copies
 *   attach_client open FILE r|w       OPEN FILE for reading (r) or writing (w)
 *                                     and print its size and extent count
 *   attach_client openat MNT REL r|w  the same for path REL under mount point MNT,
 *                                     as sent (no realpath on this side)
 *
 * The socket is found as gs_cuda_attach() finds it: the mount point is the
 * topmost directory on FILE's device, the socket gs_attach_sock_path() of it.
 * Exit 0 on success, 1 with a message on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_attach.h"
#include "gstore_cuda_cam.h"

#define BS		4096u
#define SLOTS		64u	/* requests in flight (ring slots, buffer blocks) */

static int die(const char *what, int err)
{
	fprintf(stderr, "attach_client: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* Device byte offset of block @b, or -1 in a hole. */
static int64_t dev_off(const struct gs_attach_obj *o, uint64_t b)
{
	for (uint32_t i = 0; i < o->next; i++)
		if (b >= o->ext[i].blk && b < o->ext[i].blk + o->ext[i].nblk)
			return (int64_t)(o->ext[i].dev_off + (b - o->ext[i].blk) * BS);
	return -1;
}

static void kick(const struct gs_attach_ring *r);

/* A read of @len bytes at device offset @off into region offset @buf, word @slot. */
static void submit_at(struct gs_attach_ring *r, uint64_t off, uint32_t len, uint64_t buf,
		      uint32_t slot)
{
	struct gs_sqe e = { .op = GS_OP_READ, .flags = GS_SQE_BUF_OFF | GS_SQE_CW, .len = len,
			    .off = off, .buf = buf, .tag = slot, .cw = slot };

	gs_cw_arm(r->ring, slot);
	gs_sq_push(r->ring, &e);
	if (gs_sq_need_kick(r->ring))
		kick(r);
}

static void kick(const struct gs_attach_ring *r)
{
	uint64_t one = 1;

	if (write(r->kick_fd, &one, 8) != 8)
		die("kick", errno);
}

static void submit(struct gs_attach_ring *r, uint8_t op, uint64_t off, uint32_t slot)
{
	struct gs_sqe e = { .op = op, .flags = GS_SQE_BUF_OFF | GS_SQE_CW, .len = BS,
			    .off = off, .buf = (uint64_t)slot * BS, .tag = slot, .cw = slot };

	if (op == GS_OP_FLUSH)
		e = (struct gs_sqe){ .op = op, .flags = GS_SQE_CW, .tag = slot, .cw = slot };
	gs_cw_arm(r->ring, slot);
	gs_sq_push(r->ring, &e);
	if (gs_sq_need_kick(r->ring))
		kick(r);
}

static void wait_slot(struct gs_attach_ring *r, uint32_t slot, int64_t want)
{
	int64_t res = gs_ring_cw_wait(r->ring, slot, 5000);

	if (res != want)
		die("request", res < 0 ? (int)res : EIO);
}

/* Connect to @mnt's daemon and OPEN @rel (and a ring unless @r is NULL). */
static void open_rel(const char *mnt, const char *rel, uint32_t flags, struct gs_attach **a,
		     struct gs_attach_obj *o, struct gs_attach_ring *r)
{
	char sock[PATH_MAX];
	int ret;

	ret = gs_attach_sock_path(mnt, sock, sizeof(sock));
	if (!ret)
		ret = gs_attach_connect(a, sock);
	if (ret)
		die(sock, ret);
	ret = gs_attach_open(*a, rel, BS, flags, o);
	if (ret)
		die(rel, ret);
	if (!r)
		return;
	ret = gs_attach_ring(*a, SLOTS, SLOTS, SLOTS, (size_t)SLOTS * BS, 0, r);
	if (ret)
		die("ring", ret);
}

/* order[0..n): 0..n-1 in a random order (Fisher-Yates, seeded by the pid) */
static void shuffled(uint64_t *order, uint64_t n)
{
	srand(getpid());
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = (uint64_t)rand() % i, t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
}

static void open_obj(const char *path, uint32_t flags, struct gs_attach **a,
		     struct gs_attach_obj *o, struct gs_attach_ring *r)
{
	char full[PATH_MAX], mnt[PATH_MAX];
	const char *rel;
	int ret;

	ret = gs_attach_split(path, full, mnt, sizeof(mnt), &rel);
	if (ret)
		die(path, ret);
	open_rel(mnt, rel, flags, a, o, r);
}

static int cmd_read(const char *path, const char *out)
{
	struct gs_attach_obj o;
	struct gs_attach_ring r;
	struct gs_attach *a;
	uint64_t *order, inflight[SLOTS];
	char *data;
	FILE *f;

	open_obj(path, 0, &a, &o, &r);
	data = malloc(o.nblocks * BS + 1);
	order = malloc((o.nblocks + 1) * sizeof(*order));
	if (!data || !order)
		die("malloc", ENOMEM);
	/* requests all over the file, as a GPU kernel makes them */
	shuffled(order, o.nblocks);
	for (uint64_t k = 0; k < o.nblocks + SLOTS; k++) {
		uint32_t slot = k % SLOTS;

		if (k >= SLOTS) {	/* the slot's previous request */
			uint64_t b = inflight[slot];

			wait_slot(&r, slot, BS);
			memcpy(data + b * BS, (char *)r.buf + (size_t)slot * BS, BS);
		}
		if (k >= o.nblocks)
			continue;
		int64_t off = dev_off(&o, order[k]);

		if (off < 0) {	/* a hole reads as zeros; no request */
			memset(data + order[k] * BS, 0, BS);
			gs_cw_arm(r.ring, slot);
			gs_cw_complete(&gs_ring_cw(r.ring)[slot], BS);
			inflight[slot] = order[k];
			continue;
		}
		inflight[slot] = order[k];
		submit(&r, GS_OP_READ, (uint64_t)off, slot);
	}
	f = fopen(out, "w");
	if (!f || fwrite(data, 1, o.size, f) != o.size || fclose(f))
		die(out, errno);
	printf("read %llu blocks through ring %llu\n", (unsigned long long)o.nblocks,
	       (unsigned long long)r.id);
	free(data);
	free(order);
	free(o.ext);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return 0;
}

/* read FILE OUT BS: blocks of @bs in a shuffled order, piece by piece. */
static int cmd_read_bs(const char *path, const char *out, uint32_t bs)
{
	char full[PATH_MAX], mnt[PATH_MAX], sock[PATH_MAX];
	struct gs_attach_obj o;
	struct gs_attach_ring r;
	struct gs_attach *a;
	struct gs_cam c = { 0 };
	uint64_t *order, reqs = 0, maxp = 0;
	uint32_t es;
	const char *rel;
	char *data;
	FILE *f;
	int ret;

	ret = gs_attach_split(path, full, mnt, sizeof(mnt), &rel);
	if (!ret)
		ret = gs_attach_sock_path(mnt, sock, sizeof(sock));
	if (!ret)
		ret = gs_attach_connect(&a, sock);
	if (!ret)
		ret = gs_attach_open_blocks(a, rel, bs, 0, &o, &es);
	if (ret)
		die(path, ret);
	ret = gs_attach_ring(a, SLOTS, SLOTS, SLOTS, bs, 0, &r);
	if (ret)
		die("ring", ret);
	c.ext = (const struct gs_cam_ext *)o.ext;	/* one layout (gstore_cuda.h) */
	c.next = o.next;
	c.ext_shift = es;
	c.block_shift = (uint32_t)__builtin_ctz(bs);
	c.nblocks = o.nblocks;
	data = malloc(o.nblocks * bs + 1);
	order = malloc((o.nblocks + 1) * sizeof(*order));
	if (!data || !order)
		die("malloc", ENOMEM);
	shuffled(order, o.nblocks);
	for (uint64_t i = 0; i < o.nblocks; i++) {
		uint64_t b = order[i], dev, k = 0;
		uint32_t boff, len, np = 0;

		memset(r.buf, 0, bs);	/* what no extent maps reads as zeros */
		for (;;) {	/* the block's pieces, SLOTS at a time */
			uint32_t n = 0, want[SLOTS];

			while (n < SLOTS && gs_cam_piece(&c, b, (uint32_t)k, &dev, &boff, &len)) {
				submit_at(&r, dev, len, boff, n);
				want[n++] = len;
				k++;
			}
			for (uint32_t j = 0; j < n; j++)
				wait_slot(&r, j, want[j]);
			np += n;
			if (n < SLOTS)
				break;
		}
		reqs += np;
		maxp = np > maxp ? np : maxp;
		memcpy(data + b * bs, r.buf, bs);
	}
	f = fopen(out, "w");
	if (!f || fwrite(data, 1, o.size, f) != o.size || fclose(f))
		die(out, errno);
	printf("read %llu blocks of %u through ring %llu: %llu requests, at most %llu a block, "
	       "%u extents of %u bytes\n", (unsigned long long)o.nblocks, bs,
	       (unsigned long long)r.id, (unsigned long long)reqs, (unsigned long long)maxp,
	       o.next, 1u << es);
	free(data);
	free(order);
	free(o.ext);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return 0;
}

static int cmd_write(const char *path, const char *src, uint64_t blk)
{
	struct gs_attach_obj o;
	struct gs_attach_ring r;
	struct gs_attach *a;
	uint64_t n = 0;
	int fd, ret;

	open_obj(path, GS_ATT_OPEN_WRITE, &a, &o, &r);
	fd = open(src, O_RDONLY);
	if (fd < 0)
		die(src, errno);
	for (;; n++) {
		uint32_t slot = n % SLOTS;
		char *b = (char *)r.buf + (size_t)slot * BS;
		ssize_t got;
		int64_t off;

		if (n >= SLOTS)
			wait_slot(&r, slot, BS);
		got = pread(fd, b, BS, n * BS);
		if (got == 0)
			break;
		if (got != BS)
			die("source: not whole 4 KiB blocks", got < 0 ? errno : EINVAL);
		off = dev_off(&o, blk + n);
		if (off < 0)
			die("target block in a hole or past the end", ERANGE);
		submit(&r, GS_OP_WRITE, (uint64_t)off, slot);
	}
	for (uint64_t k = n > SLOTS ? n - SLOTS : 0; k < n; k++)
		wait_slot(&r, k % SLOTS, BS);
	submit(&r, GS_OP_FLUSH, 0, 0);
	ret = (int)gs_ring_cw_wait(r.ring, 0, 5000);
	if (ret < 0)
		die("flush", ret);
	ret = gs_attach_sync(a, o.ino);
	if (ret)
		die("sync", ret);
	printf("wrote %llu blocks at block %llu\n", (unsigned long long)n,
	       (unsigned long long)blk);
	close(fd);
	free(o.ext);
	gs_attach_ring_unmap(&r);
	gs_attach_close(a);
	return 0;
}

static int cmd_open(const char *mnt, const char *path, const char *mode)
{
	uint32_t flags = !strcmp(mode, "w") ? GS_ATT_OPEN_WRITE : 0;
	struct gs_attach_obj o;
	struct gs_attach *a;

	if (mnt)
		open_rel(mnt, path, flags, &a, &o, NULL);
	else
		open_obj(path, flags, &a, &o, NULL);
	printf("opened %s: %llu bytes, %u extents\n", path, (unsigned long long)o.size, o.next);
	free(o.ext);
	gs_attach_close(a);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "read"))
		return cmd_read(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "read"))
		return cmd_read_bs(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "write"))
		return cmd_write(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "open"))
		return cmd_open(NULL, argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "openat"))
		return cmd_open(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: attach_client read FILE OUT [BS] | write FILE SRC BLK | open FILE r|w |"
		" openat MNT REL r|w\n");
	return 1;
}
