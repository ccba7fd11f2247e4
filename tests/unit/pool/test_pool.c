// SPDX-License-Identifier: MIT
/*
 * Pools: the striping arithmetic (every logical byte has its copies on
 * different members, the reverse map inverts the forward one, redundancy),
 * and split/join through gs_q on real member files: stripe-crossing and
 * unaligned requests land where the map says, read back whole, flushes,
 * degraded reads after a member fails (fault backend), EIO when the only
 * copy is gone, replace/rebuild, and corrupt/missing/foreign superblocks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"
#include "gpuq/pool.h"
#include "uapi/gstore_format.h"

#define MB		(1u << 20)
#define MEMBER		(24u * MB)
#define SU		(16u * 1024)

static char dir[256];
static char paths[8][300];

static void quiet(int level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

static int setup(void **state)
{
	const char *t = getenv("TMPDIR");

	(void)state;
	gs_set_log_func(getenv("POOL_TEST_LOG") ? NULL : quiet, NULL);
	snprintf(dir, sizeof(dir), "%s/pool-test-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	for (int i = 0; i < 8; i++)
		snprintf(paths[i], sizeof(paths[i]), "%s/m%d", dir, i);
	return 0;
}

static int teardown(void **state)
{
	char p[320];

	(void)state;
	for (int i = 0; i < 8; i++)
		unlink(paths[i]);
	snprintf(p, sizeof(p), "%s/new", dir);
	unlink(p);
	rmdir(dir);
	return 0;
}

static void make_files(unsigned n, uint64_t size)
{
	for (unsigned i = 0; i < n; i++) {
		int fd = open(paths[i], O_RDWR | O_CREAT | O_TRUNC, 0644);

		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)size), 0);
		close(fd);
	}
}

static void create(unsigned n, const char *layout)
{
	const char *p[8];
	struct gs_pool_opts o = { .layout = layout, .stripe_unit = SU, .zone_bytes = 2 * MB };

	for (unsigned i = 0; i < n; i++)
		p[i] = paths[i];
	make_files(n, MEMBER);
	assert_int_equal(gs_pool_create(p, n, &o), 0);
}

/* A blank member-sized file, dir/new, named in @np. */
static void blank_new(char *np, size_t size)
{
	int fd;

	snprintf(np, size, "%s/new", dir);
	fd = open(np, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, MEMBER), 0);
	close(fd);
}

static struct gs_q *open_pool(const char *fault)
{
	struct gs_q_params p = { .path = paths[0], .fault = fault, .max_pollers = 2 };
	struct gs_q *q = NULL;
	int ret = gs_q_open(&q, &p);

	if (ret == -EINVAL) {
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(&q, &p);
	}
	return ret ? NULL : q;
}

static void fill(char *b, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (char)((seed + i) * 2654435761u >> 13);
}

/* ---- arithmetic ---- */

static void check_geo(uint32_t layout, uint32_t n)
{
	struct gs_pool_geo g;
	uint64_t off, back;
	uint32_t m, m2, k;
	uint64_t phys;

	assert_int_equal(gs_pool_geo_init(&g, layout, n, SU, 3 * SU + 1, MB, MEMBER), 0);
	assert_int_equal(g.zone.lbytes, 4 * SU);	/* rounded up to stripe units */
	assert_true(g.member_bytes <= MEMBER);
	assert_int_equal(g.capacity, g.zone.lbytes + g.data.lbytes);
	assert_true(g.data.lbytes > 0);
	for (off = 0; off < g.capacity; off += SU / 2 + 4096) {
		uint32_t copies = gs_pool_copies(&g, off);

		assert_true(copies >= 1);
		if (n >= 2 && off < g.zone.lbytes)
			assert_true(copies >= 2);	/* metadata zone: two members at least */
		for (k = 0; k < copies; k++) {
			gs_pool_locate(&g, off, k, &m, &phys);
			assert_true(m < n);
			assert_true(phys >= MB && phys < g.member_bytes);
			assert_int_equal(gs_pool_reverse(&g, m, phys, &back), 0);
			assert_int_equal(back, off);
			if (k) {
				gs_pool_locate(&g, off, k - 1, &m2, &phys);
				assert_int_not_equal(m, m2);
			}
		}
	}
	assert_int_equal(gs_pool_copies(&g, g.capacity), 0);
	assert_int_equal(gs_pool_seg_len(&g, SU - 512, 4096), 512);
	assert_int_equal(gs_pool_seg_len(&g, 2 * SU, 100), 100);
	assert_int_equal(gs_pool_redundant(&g, 0), 1);
	assert_int_equal(gs_pool_redundant(&g, 1), layout != GS_POOL_STRIPE || n == 1 ? n > 1 : 0);
}

static void test_geometry(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= 8; n++) {
		check_geo(GS_POOL_STRIPE, n);
		check_geo(GS_POOL_MIRROR, n);
		check_geo(GS_POOL_STRIPE_MIRROR, n);
	}
	/* stripe: data striped round-robin, one member each */
	{
		struct gs_pool_geo g;
		uint32_t m;
		uint64_t phys;

		assert_int_equal(gs_pool_geo_init(&g, GS_POOL_STRIPE, 4, SU, SU * 4, MB, MEMBER),
				 0);
		for (uint32_t c = 0; c < 8; c++) {
			gs_pool_locate(&g, g.zone.lbytes + (uint64_t)c * SU + 5, 0, &m, &phys);
			assert_int_equal(m, c % 4);
			assert_int_equal(phys, g.data.pbase + c / 4 * SU + 5);
		}
		/* capacity: 4 members' data rows */
		assert_int_equal(g.data.lbytes, (MEMBER - MB) / SU * SU * 4 - g.zone.rows * SU * 4);
	}
	/* stripe+mirror with 3 members: two adjacent failures lose data, one does not */
	{
		struct gs_pool_geo g;

		assert_int_equal(gs_pool_geo_init(&g, GS_POOL_STRIPE_MIRROR, 3, SU, SU, MB, MEMBER),
				 0);
		assert_int_equal(gs_pool_redundant(&g, 1u << 1), 1);
		assert_int_equal(gs_pool_redundant(&g, 3), 0);
	}
	/* bad arguments */
	{
		struct gs_pool_geo g;

		assert_int_equal(gs_pool_geo_init(&g, 9, 2, SU, SU, MB, MEMBER), -EINVAL);
		assert_int_equal(gs_pool_geo_init(&g, GS_POOL_STRIPE, 2, 3000, SU, MB, MEMBER),
				 -EINVAL);
		assert_int_equal(gs_pool_geo_init(&g, GS_POOL_STRIPE, 2, SU, SU, MB, MB), -EINVAL);
		assert_int_equal(gs_pool_geo_init(&g, GS_POOL_STRIPE, 0, SU, SU, MB, MEMBER),
				 -EINVAL);
	}
}

/* ---- through gs_q ---- */

/* Read member @m at @phys straight from its file. */
static void member_pread(uint32_t m, void *buf, size_t len, uint64_t phys)
{
	int fd = open(paths[m], O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)phys), (ssize_t)len);
	close(fd);
}

static void load_geo(struct gs_pool_geo *g)
{
	struct gs_dpool_member sb;

	member_pread(0, &sb, sizeof(sb), 0);
	assert_int_equal(gs_pool_geo_load(g, sb.nmembers, sb.stripe_unit, sb.zone_copies,
					  sb.copies, sb.zone_bytes, sb.data_bytes, sb.data_off), 0);
}

/* @len bytes at @off read back as @w, queued and direct (@r: room for them). */
static void read_both(struct gs_q *q, char *r, const char *w, size_t len, uint64_t off)
{
	memset(r, 0, len);
	assert_int_equal(gs_q_pread(q, r, len, off), (ssize_t)len);
	assert_memory_equal(r, w, len);
	memset(r, 0, len);
	assert_int_equal(gs_q_pread_sync(q, r, len, off), (ssize_t)len);
	assert_memory_equal(r, w, len);
}

static void rw_layout(unsigned n, const char *layout)
{
	/* unaligned, stripe-crossing: 3 stripe units + 1 KiB at 1 KiB into a unit */
	size_t len = 3 * SU + 1024;
	uint64_t offs[] = { 1024, 2 * MB - 1024, 2 * MB + 5 * SU + 512, 0 };
	char *w = aligned_alloc(4096, 4 * SU), *r = aligned_alloc(4096, 4 * SU);	/* len, rounded up */
	struct gs_pool_geo g;
	struct gs_q_geom qg;
	struct gs_q *q;

	create(n, layout);
	q = open_pool(NULL);
	assert_non_null(q);
	assert_int_equal(gs_q_geometry(q, &qg), 0);
	assert_int_equal(qg.nr_devices, n);
	assert_int_equal(qg.opt_io, SU);
	load_geo(&g);
	assert_int_equal(qg.capacity, g.capacity);
	offs[3] = g.capacity - len;
	for (unsigned i = 0; i < 4; i++) {
		uint64_t off = offs[i];

		fill(w, len, off + n);
		assert_int_equal(gs_q_pwrite(q, w, len, off), (ssize_t)len);
	}
	assert_int_equal(gs_q_flush(q), 0);
	for (unsigned i = 0; i < 4; i++) {
		uint64_t off = offs[i];

		fill(w, len, off + n);
		read_both(q, r, w, len, off);
		/* every copy of every byte is where the map says */
		for (uint64_t o = off; o < off + len; o += 700) {
			for (uint32_t k = 0; k < gs_pool_copies(&g, o); k++) {
				uint32_t m;
				uint64_t phys;
				char c;

				gs_pool_locate(&g, o, k, &m, &phys);
				member_pread(m, &c, 1, phys);
				assert_int_equal(c, w[o - off]);
			}
		}
	}
	gs_q_close(q);
	free(w);
	free(r);
}

static void test_rw_all_layouts(void **state)
{
	static const char *layouts[] = { "stripe", "mirror", "stripe+mirror" };
	static const unsigned ns[] = { 1, 2, 3, 4, 8 };

	(void)state;
	for (unsigned l = 0; l < 3; l++)
		for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			rw_layout(ns[i], layouts[l]);
}

static int64_t cb_res[8];
static int cb_fin[8];

static void cb(struct gs_q_io *io, int64_t res)
{
	int i = (int)(uintptr_t)io->priv;

	cb_res[i] = res;
	__atomic_store_n(&cb_fin[i], 1, __ATOMIC_RELEASE);
}

static void test_callbacks(void **state)
{
	struct gs_q_io ios[8], *pio[8];
	char *b = aligned_alloc(4096, 8 * 4 * SU), *w = aligned_alloc(4096, 4 * SU);
	struct gs_q *q;

	(void)state;
	create(4, "stripe+mirror");
	q = open_pool(NULL);
	assert_non_null(q);
	fill(w, 4 * SU, 7);
	assert_int_equal(gs_q_pwrite(q, w, 4 * SU, 2 * MB), 4 * SU);
	for (int i = 0; i < 8; i++) {
		ios[i] = (struct gs_q_io){ .op = GS_OP_READ, .len = 2 * SU + 4096,
					   .off = 2 * MB + (uint64_t)i * 1024,
					   .buf = b + (size_t)i * 4 * SU, .done = cb,
					   .priv = (void *)(uintptr_t)i };
		pio[i] = &ios[i];
		cb_fin[i] = 0;
	}
	assert_int_equal(gs_q_submit(q, pio, 8), 8);
	for (int i = 0; i < 8; i++) {
		while (!__atomic_load_n(&cb_fin[i], __ATOMIC_ACQUIRE))
			usleep(100);
		assert_int_equal(cb_res[i], 2 * SU + 4096);
		assert_memory_equal(b + (size_t)i * 4 * SU, w + i * 1024, 2 * SU + 4096);
	}
	gs_q_close(q);
	free(b);
	free(w);
}

/*
 * Mirrored: member 1 fails every I/O; reads and writes go on from the others.
 * @sync: the read that meets the failure is a direct read (read_sync: its
 * segments go to the members at once), else a queued one (the pool poller).
 */
static void degraded_mirror(char *w, char *r, int sync)
{
	char info[4096];
	struct gs_q *q;

	create(4, "stripe+mirror");
	q = open_pool("");
	assert_non_null(q);
	fill(w, 8 * SU, 1);
	assert_int_equal(gs_q_pwrite(q, w, 8 * SU, 2 * MB), 8 * SU);
	assert_int_equal(gs_q_flush(q), 0);
	assert_int_equal(gs_q_fault(q, "m1:every=1"), 0);
	memset(r, 0, 8 * SU);
	assert_int_equal(sync ? gs_q_pread_sync(q, r, 8 * SU, 2 * MB) :
			 gs_q_pread(q, r, 8 * SU, 2 * MB), 8 * SU);
	assert_memory_equal(r, w, 8 * SU);
	assert_true(gs_q_pool_info(q, info, sizeof(info)) > 0);
	assert_non_null(strstr(info, "pool_state: degraded"));
	assert_non_null(strstr(info, "member1: "));
	assert_non_null(strstr(info, " failed "));
	fill(w, 8 * SU, 2);
	assert_int_equal(gs_q_pwrite(q, w, 8 * SU, 2 * MB + 512), 8 * SU);
	assert_int_equal(gs_q_flush(q), 0);
	assert_int_equal(gs_q_pread_sync(q, r, 8 * SU, 2 * MB + 512), 8 * SU);
	assert_memory_equal(r, w, 8 * SU);
	gs_q_close(q);

	/* the failed member stays out at the next open (recorded on the others) */
	q = open_pool(NULL);
	assert_non_null(q);
	assert_true(gs_q_pool_info(q, info, sizeof(info)) > 0);
	assert_non_null(strstr(info, "pool_state: degraded"));
	assert_int_equal(gs_q_pread(q, r, 8 * SU, 2 * MB + 512), 8 * SU);
	assert_memory_equal(r, w, 8 * SU);

	/* replace it: rebuilt, consistent, healthy again */
	{
		char np[320];

		blank_new(np, sizeof(np));
		assert_int_equal(gs_q_pool_member(q, paths[1]), 1);
		assert_int_equal(gs_q_pool_replace(q, 1, np, NULL, NULL), 0);
		assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
		assert_true(gs_q_pool_info(q, info, sizeof(info)) > 0);
		assert_non_null(strstr(info, "pool_state: ok"));
		gs_q_close(q);
		/* the new member is found by its hint; the old one no longer */
		unlink(paths[1]);
		q = open_pool(NULL);
		assert_non_null(q);
		assert_int_equal(gs_q_pread(q, r, 8 * SU, 2 * MB + 512), 8 * SU);
		assert_memory_equal(r, w, 8 * SU);
		gs_q_close(q);
	}
}

static void test_degraded(void **state)
{
	char *w = aligned_alloc(4096, 8 * SU), *r = aligned_alloc(4096, 8 * SU);
	struct gs_q *q;

	(void)state;
	degraded_mirror(w, r, 0);
	degraded_mirror(w, r, 1);

	/* stripe: data only on the failed member is EIO, never other bytes */
	create(2, "stripe");
	q = open_pool("");
	assert_non_null(q);
	fill(w, 8 * SU, 3);
	assert_int_equal(gs_q_pwrite(q, w, 8 * SU, 2 * MB), 8 * SU);
	assert_int_equal(gs_q_fault(q, "m0:every=1"), 0);
	assert_int_equal(gs_q_pread(q, r, 8 * SU, 2 * MB), -EIO);
	assert_int_equal(gs_q_pread_sync(q, r, 8 * SU, 2 * MB), -EIO);
	/* the zone (metadata) still reads from member 1 */
	assert_int_equal(gs_q_pread(q, r, 4096, 0), 4096);
	assert_int_equal(gs_q_pool_replace(q, 0, paths[3], NULL, NULL), -ENODATA);
	gs_q_close(q);
	free(w);
	free(r);
}

static void test_bad_members(void **state)
{
	struct gs_q *q;
	int fd;

	(void)state;
	/* stripe: a missing member refuses the pool */
	create(3, "stripe");
	rename(paths[2], paths[5]);
	assert_null(open_pool(NULL));
	/* ... unless devices= names it where it is now */
	{
		char be[1000];
		struct gs_q_params p = { .path = paths[0], .backend = be };

		snprintf(be, sizeof(be), "pool:%s:%s:%s", paths[5], paths[0], paths[1]);
		assert_int_equal(gs_q_open(&q, &p), 0);
		gs_q_close(q);
	}
	rename(paths[5], paths[2]);
	/* a corrupt member superblock (both copies) refuses a stripe pool */
	fd = open(paths[1], O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "garbage!", 8, 100), 8);
	assert_int_equal(pwrite(fd, "garbage!", 8, 4096 + 100), 8);
	close(fd);
	assert_null(open_pool(NULL));
	/* one copy bad: the other is used */
	create(3, "stripe");
	fd = open(paths[1], O_RDWR);
	assert_int_equal(pwrite(fd, "garbage!", 8, 100), 8);
	close(fd);
	q = open_pool(NULL);
	assert_non_null(q);
	gs_q_close(q);
	/* mirrored: a corrupt or foreign member runs degraded */
	create(3, "mirror");
	fd = open(paths[2], O_RDWR);
	assert_int_equal(pwrite(fd, "garbage!", 8, 100), 8);
	assert_int_equal(pwrite(fd, "garbage!", 8, 4096 + 100), 8);
	close(fd);
	q = open_pool(NULL);
	assert_non_null(q);
	{
		char info[4096];

		gs_q_pool_info(q, info, sizeof(info));
		assert_non_null(strstr(info, "pool_state: degraded"));
	}
	gs_q_close(q);
	/* a foreign member (another pool's) is left out: stripe refuses */
	create(2, "stripe");
	{
		const char *p2[1] = { paths[6] };
		struct gs_pool_opts o = { .layout = "stripe", .stripe_unit = SU,
					  .zone_bytes = 2 * MB };
		char be[1000];
		struct gs_q_params p = { .path = paths[0], .backend = be };

		fd = open(paths[6], O_RDWR | O_CREAT | O_TRUNC, 0644);
		assert_int_equal(ftruncate(fd, MEMBER), 0);
		close(fd);
		assert_int_equal(gs_pool_create(p2, 1, &o), 0);
		snprintf(be, sizeof(be), "pool:%s:%s", paths[0], paths[6]);
		assert_int_not_equal(gs_q_open(&q, &p), 0);
		unlink(paths[6]);
	}
	/* not a member at all: a plain image is not taken for a pool */
	make_files(1, MEMBER);
	assert_int_equal(gs_pool_is_member(paths[0]), 0);
	/* bad create arguments */
	{
		const char *p2[2] = { paths[0], paths[0] };
		struct gs_pool_opts o = { .layout = "raid5" };

		assert_int_equal(gs_pool_create(p2, 1, &o), -EINVAL);
		o.layout = "mirror";
		assert_int_equal(gs_pool_create(p2, 2, &o), -EINVAL);	/* named twice */
	}
}

/* ---- replace while the pool is in use ---- */

#define OBLK	(4u * 1024)
#define ONBLK	512u		/* 2 MiB of the data area, written at random */

struct writer {
	struct gs_q *q;
	uint32_t gen[ONBLK];	/* last generation written to each block */
	int stop, err;
	unsigned long writes;
};

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	char *b = aligned_alloc(4096, OBLK);
	uint64_t x = 88172645463325252ull;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		uint32_t i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (uint32_t)(x % ONBLK);
		fill(b, OBLK, (uint64_t)i * 1000003u + w->gen[i] + 1);
		if (gs_q_pwrite(w->q, b, OBLK, 2 * MB + (uint64_t)i * OBLK) != OBLK) {
			w->err = 1;
			break;
		}
		w->gen[i]++;
		w->writes++;
	}
	free(b);
	return NULL;
}

static void check_writer(struct writer *w)
{
	char *b = aligned_alloc(4096, OBLK), *e = aligned_alloc(4096, OBLK);

	for (uint32_t i = 0; i < ONBLK; i++) {
		if (!w->gen[i])
			continue;
		fill(e, OBLK, (uint64_t)i * 1000003u + w->gen[i]);
		assert_int_equal(gs_q_pread(w->q, b, OBLK, 2 * MB + (uint64_t)i * OBLK), OBLK);
		assert_memory_equal(b, e, OBLK);
	}
	free(b);
	free(e);
}

static void online_replace(const char *layout, unsigned n, int fail_first)
{
	struct writer *w = calloc(1, sizeof(*w));
	char np[320], info[4096];
	pthread_t th;

	create(n, layout);
	w->q = open_pool("");
	assert_non_null(w->q);
	if (fail_first) {
		char *b = aligned_alloc(4096, 64 * 1024);

		assert_int_equal(gs_q_fault(w->q, "m1:every=1"), 0);
		memset(b, 0, 64 * 1024);
		for (int i = 0; i < 8; i++)	/* some unit lands on member 1 */
			assert_int_equal(gs_q_pwrite(w->q, b, 64 * 1024, 2 * MB + i * 64 * 1024),
					 64 * 1024);
		gs_q_pool_info(w->q, info, sizeof(info));
		assert_non_null(strstr(info, "pool_state: degraded"));
		free(b);
	}
	blank_new(np, sizeof(np));
	assert_int_equal(pthread_create(&th, NULL, writer_run, w), 0);
	usleep(20000);
	assert_int_equal(gs_q_pool_replace(w->q, 1, np, NULL, NULL), 0);
	usleep(20000);
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	assert_int_equal(w->err, 0);
	assert_true(w->writes > 0);
	gs_q_pool_info(w->q, info, sizeof(info));
	assert_non_null(strstr(info, "pool_state: ok"));
	/* every copy equal (a write racing the copy would leave the new one stale) */
	assert_int_equal(gs_q_pool_verify(w->q, 0, NULL, NULL), 0);
	check_writer(w);
	gs_q_close(w->q);
	/* and from the new member after a reopen, the old one gone */
	unlink(paths[1]);
	w->q = open_pool(NULL);
	assert_non_null(w->q);
	check_writer(w);
	gs_q_close(w->q);
	free(w);
}

static void test_online_replace(void **state)
{
	(void)state;
	online_replace("stripe+mirror", 3, 1);	/* a failed member, rebuilt from copies */
	online_replace("stripe", 2, 0);		/* a healthy member, copied from itself */
	online_replace("mirror", 2, 0);
}

/* Logical offset of the @j-th data stripe unit that lives on member @m (stripe layout). */
static uint64_t unit_on(const struct gs_pool_geo *g, uint32_t m, unsigned j)
{
	for (uint64_t off = g->data.lstart;; off += g->su) {
		uint32_t mm;
		uint64_t phys;

		gs_pool_locate(g, off, 0, &mm, &phys);
		if (mm == m && !j--)
			return off;
	}
}

/*
 * A power cut on a pool cuts every member at once (one power domain):
 * powercut=N counts the pool's writes, and after the cut no member takes a
 * write, so a member with fewer writes of its own than N loses its cache too.
 */
static void test_powercut_domain(void **state)
{
	char *b = aligned_alloc(4096, SU), *r = aligned_alloc(4096, SU);
	struct gs_pool_geo g;
	uint64_t a, bb, c, d, e, phys;
	struct gs_q *q;
	uint32_t m;

	(void)state;
	create(2, "stripe");
	load_geo(&g);
	a = unit_on(&g, 0, 0);
	bb = unit_on(&g, 1, 0);
	c = unit_on(&g, 0, 1);
	d = unit_on(&g, 1, 1);
	e = unit_on(&g, 0, 2);
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_fault(q, "powercut=4,dead=eio"), 0);
	fill(b, SU, 1);
	assert_int_equal(gs_q_pwrite(q, b, SU, a), SU);		/* pool write 1 (member 0) */
	assert_int_equal(gs_q_pwrite(q, b, SU, bb), SU);	/* 2 (member 1) */
	assert_int_equal(gs_q_flush(q), 0);			/* both durable */
	fill(b, SU, 2);
	assert_int_equal(gs_q_pwrite(q, b, SU, c), SU);		/* 3 (member 0): cached */
	assert_true(gs_q_pwrite(q, b, SU, d) < 0);		/* 4 (member 1): the cut */
	/* member 0 has seen 2 writes of its own, but the power is off for it too */
	assert_true(gs_q_pwrite(q, b, SU, e) < 0);
	gs_q_close(q);
	fill(b, SU, 1);
	gs_pool_locate(&g, a, 0, &m, &phys);
	member_pread(m, r, SU, phys);
	assert_memory_equal(r, b, SU);				/* flushed: kept */
	gs_pool_locate(&g, c, 0, &m, &phys);
	member_pread(m, r, SU, phys);
	fill(b, SU, 2);
	assert_memory_not_equal(r, b, SU);			/* cached at the cut: lost */
	free(b);
	free(r);
}

/* Replace on the pool's own thread: throttled, refused twice, cancelled by close, finished. */
/*
 * A member that acknowledged a write into its volatile cache and then failed
 * took that write with it: on a stripe pool no survivor's flush can make it
 * durable, so the pool's flush fails (it reported success from the survivors'
 * flushes alone, and an fsync after a power cut acknowledged lost data:
 * pool_powercut under load).  A mirror keeps the copy; a failed member
 * whose writes were all flushed lost nothing.
 */
static void test_flush_after_loss(void **state)
{
	char *b = aligned_alloc(4096, SU);
	struct gs_pool_geo g;
	struct gs_q *q;

	(void)state;
	fill(b, SU, 5);
	create(2, "stripe");
	load_geo(&g);
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_fault(q, "m1:powercut=2,dead=eio"), 0);
	assert_int_equal(gs_q_pwrite(q, b, SU, unit_on(&g, 1, 0)), SU);	/* in m1's cache */
	assert_true(gs_q_pwrite(q, b, SU, unit_on(&g, 1, 1)) < 0);	/* m1 loses power */
	assert_int_equal(gs_q_pwrite(q, b, SU, unit_on(&g, 0, 0)), SU);
	assert_int_equal(gs_q_flush(q), -EIO);
	assert_int_equal(gs_q_flush(q), -EIO);	/* and stays lost */
	gs_q_close(q);

	/* everything m1 acknowledged was flushed before it failed: nothing lost */
	create(2, "stripe");
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_pwrite(q, b, SU, unit_on(&g, 1, 0)), SU);
	assert_int_equal(gs_q_flush(q), 0);
	assert_int_equal(gs_q_fault(q, "m1:every=1"), 0);
	assert_int_equal(gs_q_pread(q, b, SU, unit_on(&g, 1, 0)), -EIO);	/* m1 fails */
	assert_int_equal(gs_q_pwrite(q, b, SU, unit_on(&g, 0, 0)), SU);
	assert_int_equal(gs_q_flush(q), 0);
	gs_q_close(q);

	/* mirror: the survivor holds every acknowledged write */
	create(2, "mirror");
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_fault(q, "m1:powercut=2,dead=eio"), 0);
	assert_int_equal(gs_q_pwrite(q, b, SU, 2 * MB), SU);
	assert_int_equal(gs_q_pwrite(q, b, SU, 2 * MB + SU), SU);	/* m1 cut, m0 has it */
	assert_int_equal(gs_q_flush(q), 0);
	gs_q_close(q);
	free(b);
}

static void test_background_replace(void **state)
{
	char np[320], info[4096];
	struct gs_q *q;
	int i;

	(void)state;
	create(2, "mirror");
	blank_new(np, sizeof(np));
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_pool_throttle(q, 256 * 1024), 0);	/* ~90 s for 24 MiB */
	assert_int_equal(gs_q_pool_replace_start(q, 1, np), 0);
	assert_int_equal(gs_q_pool_replace_start(q, 0, np), -EBUSY);
	gs_q_pool_info(q, info, sizeof(info));
	assert_non_null(strstr(info, "pool_rebuild: member 1 "));
	assert_non_null(strstr(info, "pool_rebuild_rate: 262144\n"));
	gs_q_close(q);	/* cancels: member 1 stays the old device */
	q = open_pool(NULL);
	assert_non_null(q);
	gs_q_pool_info(q, info, sizeof(info));
	assert_non_null(strstr(info, paths[1]));
	assert_null(strstr(info, "pool_rebuild: "));
	assert_null(strstr(info, "pool_rebuild_last: "));
	/* unthrottled it runs to its end and takes the member's place */
	assert_int_equal(gs_q_pool_replace_start(q, 1, np), 0);
	for (i = 0; i < 600; i++) {
		gs_q_pool_info(q, info, sizeof(info));
		if (!strstr(info, "pool_rebuild: "))
			break;
		usleep(50000);
	}
	assert_non_null(strstr(info, "pool_rebuild_last: member 1 -> "));
	assert_non_null(strstr(info, "/new: ok\n"));
	assert_non_null(strstr(info, "pool_state: ok"));
	assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
	gs_q_close(q);
	unlink(np);
}

/* The device model holds each completion until the model's time (a lower bound only). */
static void test_model(void **state)
{
	char *b = aligned_alloc(4096, 4096);
	struct timespec t0, t1;
	struct gs_q *q;
	double ms;

	(void)state;
	create(2, "stripe");
	q = open_pool("model=100000:1:0");	/* 1 MB/s: 4 KiB takes 4.096 ms */
	assert_non_null(q);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(gs_q_pread(q, b, 4096, 2 * MB + (uint64_t)i * 4096), 4096);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	assert_true(ms >= 40.0);
	assert_int_equal(gs_q_fault(q, "model=0:1:0"), -EINVAL);
	assert_int_equal(gs_q_fault(q, "model=1:2"), -EINVAL);
	assert_int_equal(gs_q_fault(q, "m1:model=5000:200:100"), 0);
	assert_int_equal(gs_q_fault(q, "m7:every=1"), -EINVAL);	/* no member 7 */
	gs_q_close(q);
	free(b);
}

/* ---- adding a member ---- */

/* The restripe's order is safe: a chunk's new places hold no later chunk's old copy. */
static void test_add_order(void **state)
{
	static const uint32_t layouts[] = { GS_POOL_STRIPE, GS_POOL_MIRROR, GS_POOL_STRIPE_MIRROR };

	(void)state;
	for (unsigned l = 0; l < 3; l++)
		for (uint32_t n = 1; n < 8; n++) {
			struct gs_pool_geo g0, g1;
			uint32_t zc, dc;
			uint64_t c, nch, moved_over = 0;

			assert_int_equal(gs_pool_geo_init(&g0, layouts[l], n, SU, 3 * SU, MB,
							  MEMBER), 0);
			assert_int_equal(gs_pool_layout_copies(layouts[l], n + 1, &zc, &dc), 0);
			assert_true(n + 1 < 2 || zc >= 2);	/* metadata: two copies at least */
			assert_int_equal(gs_pool_geo_load(&g1, n + 1, SU, zc, dc, g0.zone.lbytes,
							  g0.data.lbytes, MB), 0);
			assert_int_equal(g1.capacity, g0.capacity);
			assert_true(g1.member_bytes <= g0.member_bytes);
			nch = g1.capacity / SU;
			for (c = 0; c < nch; c++)
				for (uint32_t k = 0; k < gs_pool_copies(&g1, c * SU); k++) {
					int64_t o = gs_pool_add_occupant(&g0, &g1, c, k);

					assert_true(o < 0 || (uint64_t)o <= c);
					moved_over += o >= 0 && (uint64_t)o < c;
				}
			/* the check has teeth: with the copies kept, places held earlier chunks
			 * (with a copy more, as mirror's, rows stay: each chunk keeps its row) */
			if (dc == g0.data.copies)
				assert_true(moved_over > nch / 4);
		}
}

#define AMEMBER	(6u * MB)

static void create_small(unsigned n, const char *layout)
{
	const char *p[8];
	struct gs_pool_opts o = { .layout = layout, .stripe_unit = SU, .zone_bytes = MB };

	for (unsigned i = 0; i < n; i++)
		p[i] = paths[i];
	make_files(n + 1, AMEMBER);	/* and the one to add */
	assert_int_equal(gs_pool_create(p, n, &o), 0);
}

/* Write (@write) or check the pattern over the pool's whole logical device. */
static void pattern(struct gs_q *q, int write, uint64_t seed)
{
	struct gs_q_geom g;
	char *w = aligned_alloc(4096, MB), *r = aligned_alloc(4096, MB);

	assert_int_equal(gs_q_geometry(q, &g), 0);
	for (uint64_t off = 0; off < g.capacity; off += MB) {
		size_t len = g.capacity - off < MB ? (size_t)(g.capacity - off) : MB;

		fill(w, len, seed + off);
		if (write) {
			assert_int_equal(gs_q_pwrite(q, w, len, off), (ssize_t)len);
			continue;
		}
		read_both(q, r, w, len, off);
	}
	if (write)
		assert_int_equal(gs_q_flush(q), 0);
	free(w);
	free(r);
}

/* Every copy of every chunk is where the superblock's layout says (member files). */
static void check_placement(uint64_t seed)
{
	struct gs_pool_geo g;
	char *w = aligned_alloc(4096, MB), *r = aligned_alloc(4096, SU);

	load_geo(&g);
	for (uint64_t off = 0; off < g.capacity; off += SU) {
		/* pattern() fills each MiB from its own seed */
		if (!(off % MB))
			fill(w, MB, seed + off);
		for (uint32_t k = 0; k < gs_pool_copies(&g, off); k++) {
			uint32_t m;
			uint64_t phys;

			gs_pool_locate(&g, off, k, &m, &phys);
			member_pread(m, r, SU, phys);
			assert_memory_equal(r, w + off % MB, SU);
		}
	}
	free(w);
	free(r);
}

static void add_one(unsigned n, const char *layout)
{
	struct gs_q_geom qg;
	char info[4096], want[64];
	struct gs_q *q;

	create_small(n, layout);
	q = open_pool(NULL);
	assert_non_null(q);
	pattern(q, 1, n * 1000 + 1);
	assert_int_equal(gs_q_pool_add(q, paths[0], NULL, NULL), -EEXIST);
	assert_int_equal(gs_q_pool_add(q, paths[n], NULL, NULL), 0);
	assert_int_equal(gs_q_geometry(q, &qg), 0);
	assert_int_equal(qg.nr_devices, n + 1);
	pattern(q, 0, n * 1000 + 1);
	gs_q_pool_info(q, info, sizeof(info));
	snprintf(want, sizeof(want), "pool_members: %u\npool_stripe_unit", n + 1);
	assert_non_null(strstr(info, want));
	assert_null(strstr(info, "pool_add:"));
	assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
	gs_q_close(q);
	check_placement(n * 1000 + 1);
	q = open_pool(NULL);
	assert_non_null(q);
	pattern(q, 0, n * 1000 + 1);
	/* writes land in the new layout too */
	pattern(q, 1, n * 1000 + 7);
	gs_q_close(q);
	check_placement(n * 1000 + 7);
}

/* Add a member to pools of 1, 2 and 3 in every layout: data intact, striped over all. */
static void test_add(void **state)
{
	static const char *layouts[] = { "stripe", "mirror", "stripe+mirror" };

	(void)state;
	for (unsigned l = 0; l < 3; l++)
		for (unsigned n = 1; n <= 3; n++)
			add_one(n, layouts[l]);
}

/*
 * An add stopped at many points, the next read-write open finishes it and
 * every byte written before the add reads back.  Two kinds of stop, each
 * reaching all members, the new one too (one power domain): a power cut
 * (writes since the last flush lost) and a kill -9 (every write up to the
 * Nth of the pool landed, none after: drop,at=N).  The kill is the harder
 * case: the restripe's writes land without flushes, so it fails when a unit
 * is written over one not recorded moved (no checkpoints).
 */
static void test_add_powercut(void **state)
{
	static const char *layouts[] = { "stripe", "stripe+mirror" };
	static const unsigned cuts[] = { 9, 12, 17, 30, 60, 120, 250, 500 };
	char spec[64], info[4096];
	struct gs_dpool_member sb;
	unsigned mid = 0;

	(void)state;
	for (unsigned l = 0; l < 2; l++)
		for (unsigned i = 0; i < 2 * sizeof(cuts) / sizeof(cuts[0]); i++) {
			unsigned cut = cuts[i % (sizeof(cuts) / sizeof(cuts[0]))];
			struct gs_q *q;
			int ret;

			create_small(2, layouts[l]);
			q = open_pool(NULL);
			assert_non_null(q);
			pattern(q, 1, i + 11);
			gs_q_close(q);
			if (i < sizeof(cuts) / sizeof(cuts[0]))
				snprintf(spec, sizeof(spec), "powercut=%u,dead=eio", cut);
			else
				snprintf(spec, sizeof(spec), "drop,at=%u,power=%u", cut, 900 + i);
			q = open_pool(spec);
			assert_non_null(q);
			ret = gs_q_pool_add(q, paths[2], NULL, NULL);
			gs_q_pool_info(q, info, sizeof(info));
			if (strstr(info, "pool_add: member 2 ")) {
				/* stopped half-way: this queue reads, and refuses writes */
				char *b = aligned_alloc(4096, 4096);

				assert_int_not_equal(ret, 0);
				assert_int_equal(gs_q_pwrite(q, b, 4096, 0), -EROFS);
				free(b);
			}
			gs_q_close(q);
			member_pread(0, &sb, sizeof(sb), 0);
			if (ret || (sb.feature_incompat & GS_POOL_FEAT_INCOMPAT_RESHAPE)) {
				/* stopped: read-only, the pool reads as it is, mid-add or not */
				struct gs_q_params p = { .path = paths[0], .flags = GS_Q_RDONLY };

				mid += !!(sb.feature_incompat & GS_POOL_FEAT_INCOMPAT_RESHAPE);
				if (gs_q_open(&q, &p) == -EINVAL) {
					p.flags |= GS_Q_BUFFERED;
					assert_int_equal(gs_q_open(&q, &p), 0);
				}
				pattern(q, 0, i + 11);
				gs_q_pool_info(q, info, sizeof(info));
				if (sb.feature_incompat & GS_POOL_FEAT_INCOMPAT_RESHAPE)
					assert_non_null(strstr(info, "pool_add: member 2 "));
				gs_q_close(q);
			}
			/* "reboot": a read-write open finishes the add */
			q = open_pool(NULL);
			assert_non_null(q);
			pattern(q, 0, i + 11);
			gs_q_pool_info(q, info, sizeof(info));
			assert_null(strstr(info, "pool_add:"));
			if (sb.feature_incompat & GS_POOL_FEAT_INCOMPAT_RESHAPE)
				assert_non_null(strstr(info, "pool_members: 3\n"));
			assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
			gs_q_close(q);
		}
	/* the stops do leave adds half-way (not only before or after) */
	assert_true(mid >= 4);
}

/* ---- the dirty-region log ---- */

static uint64_t last_total;

static void note_total(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	(void)done;
	last_total = total;
}

/*
 * A mirror member fails, writes go on, the member comes back: the log holds
 * the regions it missed (across a reopen too), and `replace M M` copies only
 * those; afterwards the copies agree and the log is empty.  A device that is
 * not the member come back is rebuilt whole.
 */
static void test_resync(void **state)
{
	static const uint64_t offs[] = { 3 * MB + 4096, 10 * MB - 4096, 18 * MB };
	char *b = aligned_alloc(4096, MB + 8192), info[4096], np[320];
	unsigned long long dirty = 0, rsz = 0, full;
	struct gs_pool_geo g;
	struct gs_q *q;

	(void)state;
	create(2, "mirror");
	load_geo(&g);
	full = (g.zone.rows + g.data.rows) * SU;
	q = open_pool("");
	assert_non_null(q);
	pattern(q, 1, 5);
	gs_q_pool_info(q, info, sizeof(info));
	assert_null(strstr(info, "pool_dirty:"));	/* healthy: no log */
	assert_int_equal(gs_q_fault(q, "m1:every=1"), 0);
	for (unsigned i = 0; i < 3; i++) {
		fill(b, MB + 8192, 77 + i);
		assert_int_equal(gs_q_pwrite(q, b, MB + 8192, offs[i]), MB + 8192);
	}
	assert_int_equal(gs_q_flush(q), 0);
	gs_q_pool_info(q, info, sizeof(info));
	assert_non_null(strstr(info, "pool_state: degraded"));
	assert_int_equal(sscanf(strstr(info, "pool_dirty:"), "pool_dirty: %llu regions of %llu",
				&dirty, &rsz), 2);
	assert_int_equal(rsz, MB);
	assert_int_equal(dirty, 2 + 3 + 2);	/* regions 3-4, 9-11, 18-19 */
	assert_int_equal(gs_q_fault(q, "m1:"), 0);
	gs_q_close(q);

	/* the log survives the close: the member comes back later */
	q = open_pool(NULL);
	assert_non_null(q);
	gs_q_pool_info(q, info, sizeof(info));
	assert_non_null(strstr(info, "pool_dirty:"));
	last_total = 0;
	assert_int_equal(gs_q_pool_replace(q, 1, paths[1], note_total, NULL), 0);
	/* mirror: a logged MiB is a MiB of the member's rows (batches of 16 units align) */
	assert_int_equal(last_total, dirty * rsz);
	assert_true(last_total < full / 3);
	gs_q_pool_info(q, info, sizeof(info));
	assert_non_null(strstr(info, "(logged regions only)"));
	assert_non_null(strstr(info, "pool_state: ok"));
	assert_null(strstr(info, "pool_dirty:"));
	assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
	for (unsigned i = 0; i < 3; i++) {
		char *r = aligned_alloc(4096, MB + 8192);

		fill(b, MB + 8192, 77 + i);
		assert_int_equal(gs_q_pread(q, r, MB + 8192, offs[i]), MB + 8192);
		assert_memory_equal(r, b, MB + 8192);
		free(r);
	}
	gs_q_close(q);

	/* a blank device is not the member come back: a full rebuild */
	blank_new(np, sizeof(np));
	q = open_pool("");
	assert_non_null(q);
	assert_int_equal(gs_q_fault(q, "m1:every=1"), 0);
	assert_int_equal(gs_q_pwrite(q, b, 8192, 5 * MB), 8192);
	assert_int_equal(gs_q_fault(q, "m1:"), 0);
	last_total = 0;
	assert_int_equal(gs_q_pool_replace(q, 1, np, note_total, NULL), 0);
	assert_int_equal(last_total, full);
	assert_int_equal(gs_q_pool_verify(q, 0, NULL, NULL), 0);
	gs_q_close(q);
	unlink(np);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_rw_all_layouts),
		cmocka_unit_test(test_callbacks),
		cmocka_unit_test(test_degraded),
		cmocka_unit_test(test_bad_members),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_online_replace),
		cmocka_unit_test(test_background_replace),
		cmocka_unit_test(test_powercut_domain),
		cmocka_unit_test(test_flush_after_loss),
		cmocka_unit_test(test_add_order),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_add_powercut),
		cmocka_unit_test(test_resync),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
