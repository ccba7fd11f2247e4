// SPDX-License-Identifier: MIT
/*
 * Test program run inside the QEMU guest (static binary) against
 * /dev/gstore-nvmeN.  One subcommand per check; each prints "ok NAME ..."
 * or "FAIL NAME: why" and exits 0 or 1.
 *
 *   gsnvme info DEV
 *   gsnvme basic DEV                      ioctls, queues, one I/O
 *   gsnvme shared DEV THREADS QPS IOS     BaM mode: THREADS share QPS queue pairs
 *   gsnvme backend DEV THREADS IOS        through the "nvme" backend ops
 *   gsnvme gsq DEV THREADS POLLERS IOS    through the I/O core (gs_q_*, pollers), when
 *                                         built with libgstore.a (-DGS_WITH_GSQ)
 *   gsnvme hold DEV                       I/O until killed (prints "hold: running")
 *   gsnvme pwrite DEV KIB SEED            pattern into the first KIB through the module
 *   gsnvme pcheck BLKDEV KIB SEED         check it through the kernel driver
 *   gsnvme ptcheck NGDEV KIB SEED         check it through the "uring-passthru" backend
 *   gsnvme fuzz DEV ITERS                 bad ioctls and mmaps
 *   gsnvme stress DEV THREADS SECS        valid-ish ioctls, mmaps and munmaps from many
 *                                         threads on one file, racing each other
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuq/backend.h"
#include "gpuq/nvme_kmod.h"
#include "gstore_q.h"

#define REGION		(1u << 20)	/* bytes of LBA space per thread */
#define MAXIO		(64u << 10)

static int fails;

#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __func__, __LINE__); \
	printf(__VA_ARGS__); printf("\n"); fflush(stdout); fails++; return -1; } } while (0)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void pattern(void *buf, size_t len, uint64_t off, uint64_t seed)
{
	uint64_t *p = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		p[i] = mix(seed ^ (off + i * 8));
}

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* aligned_alloc() wants a size that is a multiple of the alignment */
static void *xalign(size_t align, size_t n)
{
	void *p;

	return posix_memalign(&p, align, n) ? NULL : p;
}

static int open_dev(const char *path)
{
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		printf("FAIL open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	return fd;
}

static int cmd_info(const char *dev)
{
	struct gstore_info in;
	int fd = open_dev(dev), i;

	CHECK(!gs_kmod_info(fd, &in), "INFO");
	printf("info: version %u model '%.40s' serial '%.20s' qps %u/%u max_qd %u stride %u "
	       "mdts %u flags %#x\n", in.version, in.mn, in.sn, in.qps_in_use, in.max_qps,
	       in.max_qd, in.db_stride, in.max_xfer, in.flags);
	for (i = 0; i < (int)in.nr_ns; i++)
		printf("info: ns %u lba %u blocks %" PRIu64 "\n", in.ns[i].nsid,
		       1u << in.ns[i].lba_shift, (uint64_t)in.ns[i].nlba);
	CHECK(in.version == GSTORE_UAPI_VERSION && in.nr_ns >= 1 && in.max_qps >= 1, "info");
	close(fd);
	printf("ok info\n");
	return 0;
}

/* One synchronous read or write through a kq, buffer in a kmap. */
static int kq_io(struct gs_kq *kq, const struct gs_kmap *m, uint8_t opc, uint32_t nsid,
		 uint32_t lba_shift, uint64_t off, void *buf, uint32_t len, uint64_t *list,
		 uint64_t list_bus)
{
	struct gs_nvme_cmd c;
	struct gs_nvme_cqe e;
	uint64_t prp1, prp2, t;
	int ret = gs_kmap_prp(m, buf, len, list, list_bus, &prp1, &prp2);

	if (ret)
		return ret;
	gs_nvme_rw(&c, opc, nsid, off >> lba_shift, len >> lba_shift, prp1, prp2);
	t = gs_nvmeq_submit(&kq->q, &c);
	return gs_nvme_status_errno(gs_nvmeq_wait(&kq->q, t, &e));
}

static int cmd_basic(const char *dev)
{
	int fd = open_dev(dev);
	struct gstore_info in;
	struct gstore_dma_alloc a = { .size = 8192 };
	struct gstore_unmap u = { 0 };
	struct gs_kq kq, kq2;
	struct gs_kmap m;
	char *buf, *list;
	uint32_t shift;
	int ret;

	CHECK(!gs_kmod_info(fd, &in), "INFO");
	shift = in.ns[0].lba_shift;
	CHECK(!ioctl(fd, GSTORE_IOC_DMA_ALLOC, &a), "DMA_ALLOC: %s", strerror(errno));
	CHECK(a.handle && a.bus_addr && !(a.bus_addr & 4095), "DMA_ALLOC result");
	buf = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.mmap_off);
	CHECK(buf != MAP_FAILED, "mmap dma: %s", strerror(errno));
	memset(buf, 0x5a, 8192);
	CHECK(!gs_kq_create(fd, 8, &kq), "CREATE_QP");
	CHECK(kq.qid >= 1, "qid");
	CHECK(!gs_kmod_info(fd, &in) && in.qps_in_use >= 1, "qps_in_use");

	/* user memory for data: MAP_USER */
	list = xalign(4096, 4096 * 8);
	CHECK(list, "alloc");
	CHECK(!gs_kmap_user(fd, list, 4096 * 8, 0, &m), "MAP_USER: %s", strerror(errno));
	pattern(list + 4096, 8192, 0, 42);
	ret = kq_io(&kq, &m, GS_NVME_CMD_WRITE, in.ns[0].nsid, shift, 0, list + 4096, 8192,
		    (uint64_t *)list, m.bus[0]);
	CHECK(!ret, "write: %d", ret);
	memset(list + 4096, 0, 8192);
	ret = kq_io(&kq, &m, GS_NVME_CMD_READ, in.ns[0].nsid, shift, 0, list + 4096, 8192,
		    (uint64_t *)list, m.bus[0]);
	CHECK(!ret, "read: %d", ret);
	pattern(list + 16384, 8192, 0, 42);
	CHECK(!memcmp(list + 4096, list + 16384, 8192), "data mismatch");
	/* 3 pages: PRP list */
	pattern(list + 4096, 12288, 4096, 43);
	CHECK(!kq_io(&kq, &m, GS_NVME_CMD_WRITE, in.ns[0].nsid, shift, 4096, list + 4096, 12288,
		     (uint64_t *)list, m.bus[0]), "write3");
	memset(list + 4096, 0, 12288);
	CHECK(!kq_io(&kq, &m, GS_NVME_CMD_READ, in.ns[0].nsid, shift, 4096, list + 4096, 12288,
		     (uint64_t *)list, m.bus[0]), "read3");
	pattern(list + 16384, 12288, 4096, 43);
	CHECK(!memcmp(list + 4096, list + 16384, 12288), "data mismatch (PRP list)");

	/* a second queue pair, then delete both; unmap refused while queues exist */
	CHECK(!gs_kq_create(fd, 16, &kq2), "CREATE_QP 2");
	CHECK(kq2.qid != kq.qid, "distinct qids");
	u.handle = a.handle;
	CHECK(ioctl(fd, GSTORE_IOC_UNMAP, &u) && errno == EBUSY, "UNMAP while queues: EBUSY");
	CHECK(!gs_kq_destroy(&kq2, 0), "DELETE_QP 2");
	CHECK(!gs_kq_destroy(&kq, 1), "DELETE_QP");
	CHECK(!gs_kmap_unmap(fd, &m), "UNMAP user");
	CHECK(!ioctl(fd, GSTORE_IOC_UNMAP, &u), "UNMAP dma (still mmapped)");
	CHECK(buf[100] == 0x5a, "dma memory stays while mapped");
	munmap(buf, 8192);
	CHECK(ioctl(fd, GSTORE_IOC_UNMAP, &u) && errno == EINVAL, "double UNMAP: EINVAL");
	close(fd);
	free(list);
	printf("ok basic\n");
	return 0;
}

/* ---- BaM mode: many threads on shared queue pairs ---- */

struct shared_ctx {
	struct gs_kq *kqs;
	int nqps;
	struct gs_kmap *m;
	char *mem;		/* per thread: 2 * MAXIO data + 2 pages of PRP lists */
	uint32_t nsid, shift, ios;
	uint64_t base;		/* LBA space offset, bytes */
};

struct thr {
	struct shared_ctx *s;
	int id;
	int err;
	pthread_t th;
	uint64_t seed;
};

/* per thread: [PRP list page for writes][one for reads][wbuf][rbuf] */
static int thr_io(struct thr *t, struct gs_kq *kq, uint8_t opc, uint64_t off, char *buf,
		  uint32_t len)
{
	struct shared_ctx *s = t->s;
	size_t lo = (size_t)t->id * (2 * MAXIO + 8192) + (opc == GS_NVME_CMD_READ ? 4096 : 0);

	return kq_io(kq, s->m, opc, s->nsid, s->shift, off, buf, len,
		     (uint64_t *)(s->mem + lo), s->m->bus[lo / 4096]);
}

static void *shared_thread(void *arg)
{
	struct thr *t = arg;
	struct shared_ctx *s = t->s;
	char *base = s->mem + (size_t)t->id * (2 * MAXIO + 8192);
	char *wbuf = base + 8192, *rbuf = wbuf + MAXIO, *shadow = malloc(REGION);
	uint64_t region = s->base + (uint64_t)t->id * REGION, seed = t->seed;
	uint32_t i, lb = 1u << s->shift;

	/* earlier runs left data behind: start from what is there */
	for (i = 0; i < REGION / MAXIO && !t->err; i++) {
		if (thr_io(t, &s->kqs[i % s->nqps], GS_NVME_CMD_READ, region + (uint64_t)i * MAXIO,
			   rbuf, MAXIO)) {
			printf("FAIL shared: thread %d initial read\n", t->id);
			t->err = 1;
		}
		memcpy(shadow + (size_t)i * MAXIO, rbuf, MAXIO);
	}
	for (i = 0; i < s->ios && !t->err; i++) {
		struct gs_kq *kq = &s->kqs[(t->id + i) % s->nqps];
		uint32_t len = (1 + rnd(&seed) % (MAXIO / 4096)) * 4096;
		uint64_t off = (rnd(&seed) % ((REGION - len) / lb)) * lb;
		int ret;

		pattern(wbuf, len, region + off, seed);
		memcpy(shadow + off, wbuf, len);
		ret = thr_io(t, kq, GS_NVME_CMD_WRITE, region + off, wbuf, len);
		if (!ret)
			ret = thr_io(t, kq, GS_NVME_CMD_READ, region + off, rbuf, len);
		if (ret || memcmp(rbuf, wbuf, len)) {
			printf("FAIL shared: thread %d io %u off %" PRIu64 " len %u: %s\n", t->id,
			       i, region + off, len, ret ? strerror(-ret) : "data mismatch");
			t->err = 1;
			break;
		}
	}
	/* the whole region again: nobody else's write landed in it */
	for (i = 0; !t->err && i < REGION / MAXIO; i++) {
		struct gs_kq *kq = &s->kqs[i % s->nqps];

		int ret = thr_io(t, kq, GS_NVME_CMD_READ, region + (uint64_t)i * MAXIO, rbuf,
				 MAXIO);

		if (ret || memcmp(rbuf, shadow + (size_t)i * MAXIO, MAXIO)) {
			printf("FAIL shared: thread %d final check chunk %u: %s\n", t->id, i,
			       ret ? strerror(-ret) : "data mismatch");
			t->err = 1;
		}
	}
	free(shadow);
	return NULL;
}

static int cmd_shared(const char *dev, int nthr, int nqps, uint32_t ios)
{
	int fd = open_dev(dev), i, err = 0;
	struct shared_ctx s = { .nqps = nqps, .ios = ios };
	struct gstore_info in;
	struct gs_kmap m;
	struct thr *t = calloc(nthr, sizeof(*t));
	size_t memlen = (size_t)nthr * (2 * MAXIO + 8192);

	CHECK(!gs_kmod_info(fd, &in), "INFO");
	s.nsid = in.ns[0].nsid;
	s.shift = in.ns[0].lba_shift;
	CHECK((uint64_t)nthr * REGION * 2 <= in.ns[0].nlba << s.shift, "namespace too small");
	s.base = (in.ns[0].nlba << s.shift) / 2;	/* upper half: pwrite uses the lower */
	s.kqs = xalign(GS_CACHELINE, nqps * sizeof(*s.kqs));
	for (i = 0; i < nqps; i++)
		CHECK(!gs_kq_create(fd, 32, &s.kqs[i]), "CREATE_QP %d", i);
	s.mem = xalign(4096, memlen);
	CHECK(!gs_kmap_user(fd, s.mem, memlen, 0, &m), "MAP_USER");
	s.m = &m;
	for (i = 0; i < nthr; i++) {
		t[i] = (struct thr){ .s = &s, .id = i, .seed = 0x1234 + i * 77 };
		pthread_create(&t[i].th, NULL, shared_thread, &t[i]);
	}
	for (i = 0; i < nthr; i++) {
		pthread_join(t[i].th, NULL);
		err |= t[i].err;
	}
	for (i = 0; i < nqps; i++)
		CHECK(!gs_kq_destroy(&s.kqs[i], 0), "DELETE_QP");
	CHECK(!gs_kmap_unmap(fd, &m), "UNMAP");
	close(fd);
	CHECK(!err, "threads failed");
	printf("ok shared threads=%d qps=%d ios=%u\n", nthr, nqps, ios);
	return 0;
}

/* ---- through the backend ops ---- */

struct bthr {
	struct gs_bdev *bd;
	const struct gs_backend_ops *ops;
	int id, err, nthr;
	uint32_t ios;
	char *regbuf;		/* inside a registered region, or NULL */
	pthread_t th;
};

static int backend_rw(struct bthr *b, struct gs_bq *q, struct gs_bio **ios, int n)
{
	struct gs_bio *done[16];
	int64_t res[16];
	int sub = 0, got = 0;

	while (got < n) {
		if (sub < n) {
			int r = b->ops->submit(q, ios + sub, n - sub);

			if (r < 0)
				return r;
			sub += r;
		}
		int r = b->ops->reap(q, done, res, 16);

		if (r < 0)
			return r;
		for (int k = 0; k < r; k++)
			if (res[k] != done[k]->len)
				return res[k] < 0 ? (int)res[k] : -EIO;
		got += r;
		if (!r && got < n)
			b->ops->wait(q, 1000);
	}
	return 0;
}

static void *backend_thread(void *arg)
{
	struct bthr *b = arg;
	struct gs_bq *q;
	enum { K = 8 };
	struct gs_bio bio[K], *ios[K];
	char *own = xalign(4096, 2 * K * 16384 + 64);
	char *mem = b->regbuf ? b->regbuf : own + 4;	/* unregistered: unaligned, bounced */
	uint64_t seed = 99 + b->id, region = (uint64_t)b->id * REGION;
	uint32_t i;
	int k, ret;

	ret = b->ops->queue_create(b->bd, 64, -1, &q);
	if (ret) {
		printf("FAIL backend: queue_create: %s\n", strerror(-ret));
		b->err = 1;
		return NULL;
	}
	for (i = 0; i < b->ios && !b->err; i += K) {
		/* K writes to distinct 16 KiB slots, then read them all back */
		uint32_t slotbase = rnd(&seed) % (REGION / 16384 / K);

		for (k = 0; k < K; k++) {
			uint64_t off = region + (uint64_t)(slotbase * K + k) * 16384;
			uint32_t len = 4096 * (1 + rnd(&seed) % 4);

			pattern(mem + k * 16384, len, off, seed);
			bio[k] = (struct gs_bio){ .op = GS_OP_WRITE, .len = len, .off = off,
						  .buf = mem + k * 16384, .buf_index = -1 };
			ios[k] = &bio[k];
		}
		ret = backend_rw(b, q, ios, K);
		for (k = 0; !ret && k < K; k++) {
			bio[k].op = GS_OP_READ;
			bio[k].buf = mem + (K + k) * 16384;
		}
		if (!ret)
			ret = backend_rw(b, q, ios, K);
		for (k = 0; !ret && k < K; k++)
			if (memcmp(mem + k * 16384, mem + (K + k) * 16384, bio[k].len))
				ret = -EILSEQ;
		if (ret) {
			printf("FAIL backend: thread %d: %s\n", b->id, strerror(-ret));
			b->err = 1;
		}
	}
	b->ops->queue_destroy(q);
	free(own);
	return NULL;
}

static int cmd_backend(const char *dev, int nthr, uint32_t ios)
{
	const struct gs_backend_ops *ops = &gs_backend_nvme;
	struct gs_q_params p = { .backend = "nvme", .path = dev };
	struct gs_q_geom g;
	struct gs_bdev *bd;
	struct bthr *b = calloc(nthr, sizeof(*b));
	size_t reglen = (size_t)nthr * 2 * 8 * 16384;
	char *reg = xalign(4096, reglen);
	int i, err = 0, ret;

	ret = ops->open(&bd, &p);
	CHECK(!ret, "open: %s", strerror(-ret));
	CHECK(!ops->geometry(bd, &g) && g.lba_size && g.capacity, "geometry");
	ret = ops->register_buffer(bd, reg, reglen);
	CHECK(ret >= 0, "register_buffer: %s", strerror(-ret));
	for (i = 0; i < nthr; i++) {
		b[i] = (struct bthr){ .bd = bd, .ops = ops, .id = i, .ios = ios, .nthr = nthr,
				      .regbuf = i % 2 ? NULL : reg + (size_t)i * 2 * 8 * 16384 };
		pthread_create(&b[i].th, NULL, backend_thread, &b[i]);
	}
	printf("backend: running\n");
	for (i = 0; i < nthr; i++) {
		pthread_join(b[i].th, NULL);
		err |= b[i].err;
	}
	ops->close(bd);
	CHECK(!err, "threads failed");
	printf("ok backend threads=%d ios=%u\n", nthr, ios);
	return 0;
}

/* ---- through the I/O core: rings, pollers, the backend table ---- */

#ifdef GS_WITH_GSQ
struct qthr {
	struct gs_q *q;
	int id, err;
	uint32_t ios;
	char *reg;		/* registered with the queue, or NULL */
	pthread_t th;
};

static void *gsq_thread(void *arg)
{
	struct qthr *t = arg;
	char *own = xalign(4096, 2 * MAXIO + 64);
	char *wb = t->reg ? t->reg : own + 8, *rb = wb + MAXIO;
	uint64_t seed = 500 + t->id, region = (uint64_t)t->id * REGION;
	uint32_t i;

	for (i = 0; i < t->ios && !t->err; i++) {
		uint32_t len = (1 + rnd(&seed) % (MAXIO / 4096)) * 4096;
		uint64_t off = region + (rnd(&seed) % ((REGION - len) / 512)) * 512;
		ssize_t w, r;

		pattern(wb, len, off, seed);
		w = gs_q_pwrite(t->q, wb, len, off);
		r = w == len ? gs_q_pread(t->q, rb, len, off) : -1;
		if (w != len || r != len || memcmp(wb, rb, len)) {
			printf("FAIL gsq: thread %d io %u: write %zd read %zd%s\n", t->id, i, w, r,
			       r == len ? " data mismatch" : "");
			t->err = 1;
		}
	}
	free(own);
	return NULL;
}

static int cmd_gsq(const char *dev, int nthr, int pollers, uint32_t ios)
{
	struct gs_q_params p = { .backend = "nvme", .path = dev, .queue_depth = 32,
				 .min_pollers = pollers, .max_pollers = pollers };
	size_t reglen = (size_t)nthr * 2 * MAXIO;
	char *reg = xalign(4096, reglen);
	struct qthr *t = calloc(nthr, sizeof(*t));
	struct gs_q_stats st;
	struct gs_q *q;
	int i, err = 0, ret;

	ret = gs_q_open(&q, &p);
	CHECK(!ret, "gs_q_open(nvme): %s", strerror(-ret));
	CHECK(!gs_q_register_buffer(q, reg, reglen), "gs_q_register_buffer");
	for (i = 0; i < nthr; i++) {
		t[i] = (struct qthr){ .q = q, .id = i, .ios = ios,
				      .reg = i % 2 ? NULL : reg + (size_t)i * 2 * MAXIO };
		pthread_create(&t[i].th, NULL, gsq_thread, &t[i]);
	}
	for (i = 0; i < nthr; i++) {
		pthread_join(t[i].th, NULL);
		err |= t[i].err;
	}
	CHECK(gs_q_flush(q) == 0, "flush");
	gs_q_get_stats(q, &st);
	gs_q_close(q);
	CHECK(!err, "threads failed");
	printf("ok gsq threads=%d pollers=%d ios=%u reqs=%llu errors=%llu\n", nthr, pollers, ios,
	       (unsigned long long)st.reqs, (unsigned long long)st.errors);
	return 0;
}
#endif

/* ---- I/O until killed ---- */

static int cmd_hold(const char *dev)
{
	int fd = open_dev(dev), i;
	struct shared_ctx s = { .nqps = 2, .ios = 1u << 30 };
	struct gstore_info in;
	struct gs_kmap m;
	struct thr t[2];
	size_t memlen = 2 * (2 * MAXIO + 8192);

	CHECK(!gs_kmod_info(fd, &in), "INFO");
	s.nsid = in.ns[0].nsid;
	s.shift = in.ns[0].lba_shift;
	s.base = (in.ns[0].nlba << s.shift) / 2;
	s.kqs = xalign(GS_CACHELINE, 2 * sizeof(*s.kqs));
	for (i = 0; i < 2; i++)
		CHECK(!gs_kq_create(fd, 32, &s.kqs[i]), "CREATE_QP");
	s.mem = xalign(4096, memlen);
	CHECK(!gs_kmap_user(fd, s.mem, memlen, 0, &m), "MAP_USER");
	s.m = &m;
	for (i = 0; i < 2; i++) {
		t[i] = (struct thr){ .s = &s, .id = i, .seed = 7 + i };
		pthread_create(&t[i].th, NULL, shared_thread, &t[i]);
	}
	printf("hold: running\n");
	fflush(stdout);
	for (i = 0; i < 2; i++)
		pthread_join(t[i].th, NULL);
	return 1;
}

/* ---- data written here, read by the kernel driver ---- */

static int cmd_pwrite(const char *dev, uint32_t kib, uint64_t seed)
{
	int fd = open_dev(dev);
	struct gstore_info in;
	struct gs_kq kq;
	struct gs_kmap m;
	char *mem = xalign(4096, 4096 + 65536);
	uint64_t off;

	CHECK(!gs_kmod_info(fd, &in), "INFO");
	CHECK(!gs_kq_create(fd, 4, &kq), "CREATE_QP");
	CHECK(!gs_kmap_user(fd, mem, 4096 + 65536, 0, &m), "MAP_USER");
	for (off = 0; off < (uint64_t)kib << 10; off += 65536) {
		pattern(mem + 4096, 65536, off, seed);
		CHECK(!kq_io(&kq, &m, GS_NVME_CMD_WRITE, in.ns[0].nsid, in.ns[0].lba_shift,
			     off, mem + 4096, 65536, (uint64_t *)mem, m.bus[0]), "write");
	}
	close(fd);	/* release tears down queue and mapping */
	printf("ok pwrite\n");
	return 0;
}

static int cmd_pcheck(const char *blk, uint32_t kib, uint64_t seed)
{
	int fd = open(blk, O_RDONLY | O_DIRECT);
	char *buf = xalign(4096, 65536), *want = malloc(65536);
	uint64_t off;

	CHECK(fd >= 0, "open %s: %s", blk, strerror(errno));
	for (off = 0; off < (uint64_t)kib << 10; off += 65536) {
		CHECK(pread(fd, buf, 65536, off) == 65536, "pread: %s", strerror(errno));
		pattern(want, 65536, off, seed);
		CHECK(!memcmp(buf, want, 65536), "mismatch at %" PRIu64, off);
	}
	close(fd);
	printf("ok pcheck\n");
	return 0;
}

/* the same pattern through the uring-passthru backend, plus a write + read */
static int cmd_ptcheck(const char *ng, uint32_t kib, uint64_t seed)
{
	const struct gs_backend_ops *ops = &gs_backend_uring_passthru;
	struct gs_q_params p = { .backend = "uring-passthru", .path = ng };
	char *buf = xalign(4096, 65536), *want = malloc(65536);
	struct gs_bio bio, *io = &bio, *done;
	struct gs_q_geom g;
	struct gs_bdev *bd;
	struct gs_bq *q;
	uint64_t off;
	int64_t res;
	int ret;

	ret = ops->open(&bd, &p);
	CHECK(!ret, "open %s: %s", ng, strerror(-ret));
	CHECK(!ops->geometry(bd, &g) && g.lba_size == 512 && g.capacity, "geometry");
	CHECK(!ops->queue_create(bd, 8, -1, &q), "queue_create");
	for (off = 0; off <= (uint64_t)kib << 10; off += 65536) {
		int last = off == (uint64_t)kib << 10;

		bio = (struct gs_bio){ .op = last ? GS_OP_WRITE : GS_OP_READ, .len = 65536,
				       .off = off, .buf = buf, .buf_index = -1 };
		if (last)
			pattern(buf, 65536, off, seed + 1);
		CHECK(ops->submit(q, &io, 1) == 1, "submit");
		while ((ret = ops->reap(q, &done, &res, 1)) == 0)
			ops->wait(q, 1000);
		CHECK(ret == 1 && res == 65536, "passthru I/O at %" PRIu64 ": %" PRId64, off, res);
		if (last) {
			bio.op = GS_OP_READ;
			memset(buf, 0, 65536);
			CHECK(ops->submit(q, &io, 1) == 1, "submit");
			while ((ret = ops->reap(q, &done, &res, 1)) == 0)
				ops->wait(q, 1000);
			CHECK(ret == 1 && res == 65536, "passthru read back");
			pattern(want, 65536, off, seed + 1);
		} else {
			pattern(want, 65536, off, seed);
		}
		CHECK(!memcmp(buf, want, 65536), "mismatch at %" PRIu64, off);
	}
	ops->queue_destroy(q);
	ops->close(bd);
	printf("ok ptcheck\n");
	return 0;
}

/* ---- bad arguments ---- */

static int cmd_fuzz(const char *dev, uint32_t iters)
{
	int fd = open_dev(dev);
	uint64_t seed = 5;
	uint32_t i;
	char *page = xalign(4096, 8192);
	union {
		struct gstore_dma_alloc a;
		struct gstore_map_user mu;
		struct gstore_map_gpu mg;
		struct gstore_unmap u;
		struct gstore_create_qp c;
		struct gstore_delete_qp d;
		uint64_t raw[64];
	} arg;
	static const unsigned long cmds[] = {
		GSTORE_IOC_INFO, GSTORE_IOC_DMA_ALLOC, GSTORE_IOC_MAP_USER, GSTORE_IOC_UNMAP,
		GSTORE_IOC_MAP_GPU, GSTORE_IOC_CREATE_QP, GSTORE_IOC_DELETE_QP,
	};
	static const uint64_t vals[] = {
		0, 1, 2, 3, 4095, 4096, 4097, 8192, 1u << 20, 4u << 20, (4u << 20) + 4096,
		1ull << 30, 1ull << 31, 1ull << 40, ~0ull, ~0ull - 4095, 0x7fffffff, 0x80000000,
	};
	struct gstore_info in;
	struct gstore_dma_alloc a;
	struct gstore_map_gpu mg = { .vaddr = 1 << 16, .len = 1 << 16 };

	/* specific cases first */
	CHECK(ioctl(fd, _IO('G', 0x40)) && errno == ENOTTY, "unknown nr: ENOTTY");
	CHECK(ioctl(fd, _IOR('G', 0x00, int), &i) && errno == ENOTTY, "wrong size: ENOTTY");
	CHECK(ioctl(fd, GSTORE_IOC_INFO, (void *)8) && errno == EFAULT, "bad pointer: EFAULT");
	a = (struct gstore_dma_alloc){ .size = 5000 };
	CHECK(ioctl(fd, GSTORE_IOC_DMA_ALLOC, &a) && errno == EINVAL, "odd size: EINVAL");
	a = (struct gstore_dma_alloc){ .size = 4096, .flags = 2 };
	CHECK(ioctl(fd, GSTORE_IOC_DMA_ALLOC, &a) && errno == EINVAL, "flags: EINVAL");
	a = (struct gstore_dma_alloc){ .size = 64u << 20 };
	CHECK(ioctl(fd, GSTORE_IOC_DMA_ALLOC, &a) && errno == EINVAL, "huge: EINVAL");
	arg.mu = (struct gstore_map_user){ .addr = (uintptr_t)page + 8, .len = 4096,
					   .bus_addrs = (uintptr_t)(page + 4096) };
	CHECK(ioctl(fd, GSTORE_IOC_MAP_USER, &arg) && errno == EINVAL, "unaligned: EINVAL");
	arg.mu = (struct gstore_map_user){ .addr = 1ull << 46, .len = 4096,
					   .bus_addrs = (uintptr_t)(page + 4096) };
	CHECK(ioctl(fd, GSTORE_IOC_MAP_USER, &arg) && errno == EFAULT, "unmapped: EFAULT");
	arg.mu = (struct gstore_map_user){ .addr = (uintptr_t)page, .len = 4096, .bus_addrs = 8 };
	CHECK(ioctl(fd, GSTORE_IOC_MAP_USER, &arg) && errno == EFAULT, "bad bus ptr: EFAULT");
	CHECK(!gs_kmod_info(fd, &in), "INFO");
	CHECK(ioctl(fd, GSTORE_IOC_MAP_GPU, &mg) &&
	      errno == ((in.flags & GSTORE_INFO_P2P) ? EINVAL : EOPNOTSUPP), "MAP_GPU");
	arg.u = (struct gstore_unmap){ .handle = 12345 };
	CHECK(ioctl(fd, GSTORE_IOC_UNMAP, &arg) && errno == EINVAL, "unknown handle: EINVAL");
	arg.d = (struct gstore_delete_qp){ .qid = 1 };
	CHECK(ioctl(fd, GSTORE_IOC_DELETE_QP, &arg) && errno == EINVAL, "foreign qid: EINVAL");
	CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED, "mmap offset 0");
	CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)(1ull << 46)) == MAP_FAILED,
	      "mmap of the controller registers");

	/* then random garbage, with real handles mixed in */
	for (i = 0; i < iters; i++) {
		unsigned long cmd = cmds[rnd(&seed) % 7];
		int k, ret;

		for (k = 0; k < 64; k++)
			arg.raw[k] = rnd(&seed) % 3 ? vals[rnd(&seed) % 18] : rnd(&seed) % 8;
		if (rnd(&seed) % 4 == 0)
			arg.mu.addr = (uintptr_t)page + (rnd(&seed) % 2) * 4096;
		if (rnd(&seed) % 4 == 0)
			arg.mu.bus_addrs = (uintptr_t)page;
		ret = ioctl(fd, cmd, &arg);
		if (!ret && cmd == GSTORE_IOC_CREATE_QP) {
			struct gstore_delete_qp d = { .qid = arg.c.qid };

			ioctl(fd, GSTORE_IOC_DELETE_QP, &d);
		}
		if (rnd(&seed) % 8 == 0) {
			void *p = mmap(NULL, 4096 << (rnd(&seed) % 3), PROT_READ | PROT_WRITE,
				       MAP_SHARED, fd, (off_t)(vals[rnd(&seed) % 18] & ~4095ull));

			if (p != MAP_FAILED)
				munmap(p, 4096);
		}
	}
	close(fd);	/* whatever got created is torn down here */
	printf("ok fuzz iters=%u\n", iters);
	return 0;
}

/* ---- many threads on one file: allocate, map, create, delete, unmap ---- */

struct stress {
	int fd;
	volatile int stop;
	volatile uint32_t handles[64];	/* shared pool: any thread may unmap any of them */
	volatile uint32_t qids[16];
	uint64_t ops, oks;
};

struct sthr {
	struct stress *s;
	int id;
	pthread_t th;
};

static void *stress_thread(void *arg)
{
	struct sthr *t = arg;
	struct stress *s = t->s;
	uint64_t seed = 77 + t->id, ops = 0, oks = 0;
	size_t ulen = 16 * 4096;
	char *umem = NULL;
	uint64_t *bus = calloc(ulen / 4096, 8);

	while (!s->stop) {
		uint32_t k = rnd(&seed) % 8, h = s->handles[rnd(&seed) % 64];
		int ret = -1;

		if (k == 0) {
			struct gstore_dma_alloc a = { .size = 4096 << (rnd(&seed) % 5) };

			ret = ioctl(s->fd, GSTORE_IOC_DMA_ALLOC, &a);
			if (!ret) {
				char *p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED,
					       s->fd, a.mmap_off);

				if (p != MAP_FAILED) {
					memset(p, t->id, a.size);
					if (rnd(&seed) % 2)
						munmap(p, a.size);	/* else: kept until exit */
				}
				s->handles[rnd(&seed) % 64] = a.handle;
			}
		} else if (k == 1) {
			struct gstore_map_user m = { .len = ulen, .bus_addrs = (uintptr_t)bus };

			if (!umem)
				umem = mmap(NULL, ulen, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			m.addr = (uintptr_t)umem;
			ret = ioctl(s->fd, GSTORE_IOC_MAP_USER, &m);
			if (!ret)
				s->handles[rnd(&seed) % 64] = m.handle;
			if (rnd(&seed) % 3 == 0) {	/* pinned memory goes away under us */
				munmap(umem, ulen);
				umem = NULL;
			}
		} else if (k == 2) {
			struct gstore_unmap u = { .handle = h };

			ret = ioctl(s->fd, GSTORE_IOC_UNMAP, &u);
		} else if (k == 3 || k == 4) {
			struct gstore_create_qp c = { .sq_handle = h, .cq_handle = h,
						      .sq_off = 0, .cq_off = 4096 * (rnd(&seed) % 4),
						      .depth = 2 + rnd(&seed) % 63 };

			ret = ioctl(s->fd, GSTORE_IOC_CREATE_QP, &c);
			if (!ret) {
				void *db = mmap(NULL, c.db_mmap_len, PROT_READ | PROT_WRITE,
						MAP_SHARED, s->fd, c.db_mmap_off);

				if (db != MAP_FAILED)
					munmap(db, c.db_mmap_len);
				s->qids[rnd(&seed) % 16] = c.qid;
			}
		} else if (k == 5) {
			struct gstore_delete_qp d = { .qid = s->qids[rnd(&seed) % 16] };

			ret = ioctl(s->fd, GSTORE_IOC_DELETE_QP, &d);
		} else if (k == 6) {
			struct gstore_info in;

			ret = ioctl(s->fd, GSTORE_IOC_INFO, &in);
		} else {
			void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, s->fd, (off_t)h << 32);

			ret = p == MAP_FAILED;
			if (!ret)
				munmap(p, 4096);
		}
		ops++;
		oks += !ret;
	}
	__atomic_fetch_add(&s->ops, ops, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->oks, oks, __ATOMIC_RELAXED);
	free(bus);
	return NULL;
}

static int cmd_stress(const char *dev, int nthr, int secs)
{
	struct stress s = { .fd = open_dev(dev) };
	struct sthr *t = calloc(nthr, sizeof(*t));
	int i;

	for (i = 0; i < nthr; i++) {
		t[i] = (struct sthr){ .s = &s, .id = i };
		pthread_create(&t[i].th, NULL, stress_thread, &t[i]);
	}
	printf("stress: running\n");
	sleep(secs);
	s.stop = 1;
	for (i = 0; i < nthr; i++)
		pthread_join(t[i].th, NULL);
	close(s.fd);
	printf("ok stress threads=%d ops=%llu succeeded=%llu\n", nthr,
	       (unsigned long long)s.ops, (unsigned long long)s.oks);
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	const char *dev = argc > 2 ? argv[2] : "/dev/gstore-nvme0";
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(c, "features")) {
#ifdef GS_WITH_GSQ
		printf("features: gsq\n");
#else
		printf("features:\n");
#endif
		return 0;
	}
	if (!strcmp(c, "info"))
		ret = cmd_info(dev);
	else if (!strcmp(c, "basic"))
		ret = cmd_basic(dev);
	else if (!strcmp(c, "shared") && argc == 6)
		ret = cmd_shared(dev, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	else if (!strcmp(c, "backend") && argc == 5)
		ret = cmd_backend(dev, atoi(argv[3]), atoi(argv[4]));
#ifdef GS_WITH_GSQ
	else if (!strcmp(c, "gsq") && argc == 6)
		ret = cmd_gsq(dev, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
#endif
	else if (!strcmp(c, "hold"))
		ret = cmd_hold(dev);
	else if (!strcmp(c, "pwrite") && argc == 5)
		ret = cmd_pwrite(dev, atoi(argv[3]), strtoull(argv[4], NULL, 0));
	else if (!strcmp(c, "pcheck") && argc == 5)
		ret = cmd_pcheck(dev, atoi(argv[3]), strtoull(argv[4], NULL, 0));
	else if (!strcmp(c, "ptcheck") && argc == 5)
		ret = cmd_ptcheck(dev, atoi(argv[3]), strtoull(argv[4], NULL, 0));
	else if (!strcmp(c, "stress") && argc == 5)
		ret = cmd_stress(dev, atoi(argv[3]), atoi(argv[4]));
	else if (!strcmp(c, "fuzz") && argc == 4)
		ret = cmd_fuzz(dev, atoi(argv[3]));
	else {
		fprintf(stderr, "usage: see the comment at the top of gsnvme.c\n");
		return 2;
	}
	return ret || fails ? 1 : 0;
}
