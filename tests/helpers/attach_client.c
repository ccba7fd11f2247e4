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
 *   attach_client graph GRAPH OUT     GRAPH (MNT/graph/NAME): the device layout,
 *                                     every live page read through a ring, each
 *                                     vertex's list decoded as gs_cuda_graph's
 *                                     kernels decode it, "D V: ids" lines to OUT
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
#include "gstore_graph_dev.h"

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

/* A connection to the daemon of the mount holding @path; *rel: the path below
 * the mount point (into @full, PATH_MAX bytes). */
static struct gs_attach *connect_path(const char *path, char *full, const char **rel)
{
	char sock[PATH_MAX];
	struct gs_attach *a;
	int ret = gs_attach_find(path, full, sock, sizeof(sock), rel);

	if (!ret)
		ret = gs_attach_connect(&a, sock);
	if (ret)
		die(path, ret);
	return a;
}

/* read FILE OUT BS: blocks of @bs in a shuffled order, piece by piece. */
static int cmd_read_bs(const char *path, const char *out, uint32_t bs)
{
	char full[PATH_MAX];
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

	a = connect_path(path, full, &rel);
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

/* Device byte offset of block @b of a graph's block space, or -1. */
static int64_t graph_dev_off(const struct gs_att_graph_map *h, uint64_t b)
{
	const struct gs_att_ext *e = (const void *)((const char *)h + h->ext_off);

	for (uint32_t i = 0; i < h->next; i++)
		if (b >= e[i].blk && b < e[i].blk + e[i].nblk)
			return (int64_t)(e[i].dev_off + (b - e[i].blk) * h->page_size);
	return -1;
}

/* Vertex @v's list in direction @d as a GPU lane finds it (gstore_graph_dev.h:
 * the GTT lookup, the page group, the tuple, fixed or varint entries) into
 * @f as " id" words; the entries, or -1 for a page that does not decode. */
static int64_t graph_list(const struct gs_att_graph_map *h, const struct gs_gp_geom *gm,
			  const uint8_t *data, unsigned d, uint64_t v, FILE *f)
{
	const struct gs_att_graph_dir *hd = &h->dir[d];
	const char *base = (const char *)h;
	const uint64_t *key = (const void *)(base + hd->key_off);
	const uint64_t *last = (const void *)(base + hd->last_off);
	const uint64_t *pg = (const void *)(base + hd->page_off);
	int64_t gi = gs_gp_locate(key, last, pg, hd->ngtt, v), n = 0;
	uint64_t glen;

	if (gi < 0)
		return 0;
	glen = gs_gp_group_len(pg, hd->ngtt, (uint64_t)gi);
	for (uint64_t k = 0; k < glen; k++) {
		uint64_t blk = hd->first_block + (pg[gi + k] & GS_GP_PAGE_MASK), deg, id = 0;
		const uint8_t *page = data + blk * h->page_size, *ids, *w;
		int t = gs_gp_find(gm, page, v);

		if (t < 0) {
			if (glen > 1)
				return -1;
			continue;
		}
		if (gs_gp_list(gm, page, (uint32_t)t, &deg, &ids, &w))
			return -1;
		for (uint64_t i = 0; i < deg; i++) {
			uint64_t x;

			if (!gm->varint)
				id = gs_gp_fixed_id(gm, ids, i);
			else if (gs_gp_uv(&ids, w, &x))
				id = i ? id + x : x;	/* the first absolute, then gaps */
			else
				return -1;
			fprintf(f, " %llu", (unsigned long long)id);
		}
		n += (int64_t)deg;
	}
	return n;
}

/*
 * graph GRAPH OUT: GRAPH on a new connection (the daemon merges pending
 * updates), every live page read through a ring at the layout's device
 * offsets, and each vertex's list decoded as the GPU kernels decode it,
 * written as "D V: ids" (D 0: out-lists or the undirected list, 1: in-lists;
 * "0 V removed" for a removed vertex).
 */
static int cmd_graph(const char *path, const char *out)
{
	char full[PATH_MAX];
	const struct gs_att_graph_map *h;
	struct gs_attach_graph ag;
	struct gs_attach_ring r;
	struct gs_attach *a;
	struct gs_gp_geom gm;
	uint64_t *order, nlive = 0, inflight[SLOTS];
	const uint8_t *removed;
	const char *rel;
	uint8_t *data;
	FILE *f;
	int ret;

	a = connect_path(path, full, &rel);
	ret = gs_attach_graph(a, rel, &ag);
	if (ret)
		die(path, ret);
	h = ag.map;
	if (h->page_size != BS)
		die("page size", EINVAL);
	/* a ring made after GRAPH: the leases are bound to rings made later too */
	ret = gs_attach_ring(a, SLOTS, SLOTS, SLOTS, (size_t)SLOTS * BS, 0, &r);
	if (ret)
		die("ring", ret);
	gs_gp_init(&gm, h->page_size, h->id_bytes, h->flags);
	data = calloc(h->nblocks + 1, BS);
	order = malloc((h->nblocks + 1) * sizeof(*order));
	if (!data || !order)
		die("malloc", ENOMEM);
	for (unsigned d = 0; d < h->ndirs; d++) {
		const struct gs_att_graph_dir *hd = &h->dir[d];
		const uint64_t *pg = (const void *)((const char *)h + hd->page_off);

		for (uint64_t i = 0; i < hd->ngtt; i++)
			order[nlive++] = hd->first_block + (pg[i] & GS_GP_PAGE_MASK);
	}
	for (uint64_t k = 0; k < nlive + SLOTS; k++) {
		uint32_t slot = k % SLOTS;

		if (k >= SLOTS) {
			wait_slot(&r, slot, BS);
			memcpy(data + inflight[slot] * BS, (char *)r.buf + (size_t)slot * BS, BS);
		}
		if (k >= nlive)
			continue;
		int64_t off = graph_dev_off(h, order[k]);

		if (off < 0 || order[k] >= h->nblocks)
			die("a live page outside the extents", ERANGE);
		inflight[slot] = order[k];
		submit(&r, GS_OP_READ, (uint64_t)off, slot);
	}
	f = fopen(out, "w");
	if (!f)
		die(out, errno);
	removed = h->removed_off ? (const uint8_t *)h + h->removed_off : NULL;
	for (unsigned d = 0; d < h->ndirs; d++)
		for (uint64_t v = 0; v < h->nv; v++) {
			if (removed && (removed[v >> 3] >> (v & 7) & 1)) {
				if (!d)
					fprintf(f, "0 %llu removed\n", (unsigned long long)v);
				continue;
			}
			fprintf(f, "%u %llu:", d, (unsigned long long)v);
			if (graph_list(h, &gm, data, d, v, f) < 0)
				die("a page that does not decode", EIO);
			fputc('\n', f);
		}
	if (fclose(f))
		die(out, errno);
	printf("graph gen %llu: %llu vertices, %llu pages through ring %llu, %u extents, "
	       "max_io %u\n", (unsigned long long)ag.gen, (unsigned long long)h->nv,
	       (unsigned long long)nlive, (unsigned long long)r.id, h->next, ag.max_io);
	free(data);
	free(order);
	gs_attach_graph_unmap(&ag);
	gs_attach_ring_unmap(&r);
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
	if (argc == 4 && !strcmp(argv[1], "graph"))
		return cmd_graph(argv[2], argv[3]);
	fprintf(stderr, "usage: attach_client read FILE OUT [BS] | write FILE SRC BLK | open FILE r|w |"
		" openat MNT REL r|w | graph GRAPH OUT\n");
	return 1;
}
