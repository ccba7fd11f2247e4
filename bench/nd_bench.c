// SPDX-License-Identifier: MIT
/*
 * nd_bench: a 2-D f64 space as a gstore N-D space, as a row-major plain file
 * read with pread (one request per row segment), and as an HDF5 chunked
 * dataset whose chunk is gstore's building block; same data, same run.
 *
 *   nd_bench DIR [--rows R] [--cols C] [--runs N] [--keep] [--bb AxB] [--seed S]
 *
 * Writes DIR/nd.img (gstore image), DIR/plain.f64, DIR/data.h5 (write
 * bandwidth of each, data made durable: gs_nd_sync / fsync), then for each
 * access pattern and run, per peer: drop caches, time the reads, check the
 * values.  Patterns: whole rows (a scan of ROWS_N consecutive rows from a
 * random row, one request per row), whole columns (one column per request),
 * square tiles of 256, 1024 and 4096 (random tile-grid positions).
 *
 * Cold: gstore and the plain file use O_DIRECT, and gstore's block cache is
 * dropped; Debian's libhdf5 has no direct VFD, so HDF5 reads through the page
 * cache after posix_fadvise(DONTNEED) on its file and a reopened dataset
 * (empty chunk cache).  gstore's block cache and HDF5's chunk cache get the
 * same budget (256 MiB).  Output: one line per measurement and a table of
 * medians (MB/s of useful data) with ratios gstore/plain and gstore/hdf5.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "gstore_nd.h"

#define ALIGN		4096
#define CACHE_BYTES	(256u << 20)
#define MAXRUNS		15

static uint64_t NR = 32768, NC = 16384;	/* the space: NR x NC f64 */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, long err)
{
	fprintf(stderr, "nd_bench: %s: %s\n", what,
		err ? strerror(err < 0 ? -err : err) : "failed");
	exit(1);
}

static double val(uint64_t r, uint64_t c)
{
	return (double)(r * NC + c);
}

/* Rows [r0, r0 + n) of the space. */
static void fill_rows(double *buf, uint64_t r0, uint64_t n)
{
	for (uint64_t r = 0; r < n; r++)
		for (uint64_t c = 0; c < NC; c++)
			buf[r * NC + c] = val(r0 + r, c);
}

static void check(const double *buf, uint64_t r0, uint64_t c0, uint64_t nr, uint64_t nc,
		  const char *who)
{
	uint64_t probe[3][2] = { { 0, 0 }, { nr - 1, nc - 1 }, { nr / 2, nc / 3 } };

	for (int i = 0; i < 3; i++) {
		uint64_t r = probe[i][0], c = probe[i][1];

		if (buf[r * nc + c] != val(r0 + r, c0 + c)) {
			fprintf(stderr, "nd_bench: %s: wrong value at (%" PRIu64 ", %" PRIu64 ")\n",
				who, r0 + r, c0 + c);
			exit(1);
		}
	}
}

/* ---- peers ---- */

struct peer {
	const char *name;
	void (*cold)(void);
	void (*read)(uint64_t r0, uint64_t c0, uint64_t nr, uint64_t nc, double *buf);
};

/* gstore */
static struct gs_fs *gfs;
static struct gs_nd *gnd;
static uint64_t gbb[2];

static void g_cold(void)
{
	gs_nd_drop_cache(gnd);
}

static void g_read(uint64_t r0, uint64_t c0, uint64_t nr, uint64_t nc, double *buf)
{
	uint64_t st[2] = { r0, c0 }, cn[2] = { nr, nc };
	ssize_t n = gs_nd_read_slab(gnd, st, cn, NULL, buf, nr * nc * 8);

	if (n != (ssize_t)(nr * nc * 8))
		die("gs_nd_read_slab", n);
}

/* plain row-major file, O_DIRECT */
static int pfd = -1;
static char *bounce;

static void p_cold(void)
{
}

static void p_read(uint64_t r0, uint64_t c0, uint64_t nr, uint64_t nc, double *buf)
{
	for (uint64_t r = 0; r < nr; r++) {
		uint64_t off = ((r0 + r) * NC + c0) * 8, len = nc * 8;
		uint64_t a = off & ~(uint64_t)(ALIGN - 1);
		uint64_t e = (off + len + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);

		/* one request per row segment */
		if (pread(pfd, bounce, e - a, a) != (ssize_t)(e - a))
			die("pread", errno);
		memcpy(buf + r * nc, bounce + (off - a), len);
	}
}

/* HDF5 chunked, chunk = gstore's block */
static hid_t hfile = -1, hset = -1, hdapl = -1;

static void h_open_dset(void)
{
	hset = H5Dopen2(hfile, "space", hdapl);
	if (hset < 0)
		die("H5Dopen2", 0);
}

static void h_cold(void)
{
	void *h;

	H5Dclose(hset);
	if (H5Fget_vfd_handle(hfile, H5P_DEFAULT, &h) < 0)
		die("H5Fget_vfd_handle", 0);
	posix_fadvise(*(int *)h, 0, 0, POSIX_FADV_DONTNEED);
	h_open_dset();
}

static void h_read(uint64_t r0, uint64_t c0, uint64_t nr, uint64_t nc, double *buf)
{
	hsize_t st[2] = { r0, c0 }, cn[2] = { nr, nc };
	hid_t fsp = H5Dget_space(hset), msp = H5Screate_simple(2, cn, NULL);

	H5Sselect_hyperslab(fsp, H5S_SELECT_SET, st, NULL, cn, NULL);
	if (H5Dread(hset, H5T_NATIVE_DOUBLE, msp, fsp, H5P_DEFAULT, buf) < 0)
		die("H5Dread", 0);
	H5Sclose(msp);
	H5Sclose(fsp);
}

static struct peer peers[] = {
	{ "gstore", g_cold, g_read },
	{ "plain", p_cold, p_read },
	{ "hdf5", h_cold, h_read },
};
#define NPEERS 3

/* ---- setup: write the three copies ---- */

static char img[4096], plainf[4096], h5f[4096];

static double write_gstore(const uint64_t *bb_opt, double *band, uint64_t band_rows)
{
	struct gs_mkfs_opts mo = { .size = NR * NC * 8 + NR * NC * 8 / 16 + (1ULL << 30),
				   .force = 1 };
	struct gs_fs_opts fo = { .path = img, .cache_bytes = 64u << 20 };
	struct gs_nd_params p = { .dtype = GS_ND_F64, .ndims = 2, .shape = { NR, NC } };
	struct gs_nd_info in;
	double t0, t;
	int ret;

	if (bb_opt[0])
		memcpy(p.bb, bb_opt, 2 * sizeof(p.bb[0]));
	ret = gs_fs_mkfs(img, &mo);
	if (ret)
		die("gs_fs_mkfs", ret);
	ret = gs_fs_mount(&gfs, &fo);
	if (ret)
		die("gs_fs_mount", ret);
	ret = gs_nd_create(gfs, 0, "bench", &p, 0755, &gnd);
	if (ret)
		die("gs_nd_create", ret);
	gs_nd_get_info(gnd, &in);
	if (band_rows % in.p.bb[0])
		die("band not a multiple of the block rows", EINVAL);
	t0 = now();
	for (uint64_t r = 0; r < NR; r += band_rows) {
		uint64_t st[2] = { r, 0 }, cn[2] = { band_rows, NC };

		fill_rows(band, r, band_rows);
		ret = gs_nd_write_slab(gnd, st, cn, NULL, band, band_rows * NC * 8);
		if (ret < 0)
			die("gs_nd_write_slab", ret);
	}
	ret = gs_nd_sync(gnd);
	if (ret)
		die("gs_nd_sync", ret);
	t = now() - t0;
	gs_nd_close(gnd);
	gs_fs_unmount(gfs);
	return t;
}

static double write_plain(double *band, uint64_t band_rows)
{
	double t0, t;
	int fd = open(plainf, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);

	if (fd < 0)
		die(plainf, errno);
	t0 = now();
	for (uint64_t r = 0; r < NR; r += band_rows) {
		fill_rows(band, r, band_rows);
		ssize_t n = band_rows * NC * 8;

		if (pwrite(fd, band, n, r * NC * 8) != n)
			die("pwrite", errno);
	}
	if (fsync(fd))
		die("fsync", errno);
	t = now() - t0;
	close(fd);
	return t;
}

static double write_hdf5(const uint64_t *bb, double *band, uint64_t band_rows)
{
	hsize_t dims[2] = { NR, NC }, chunk[2] = { bb[0], bb[1] };
	hid_t f, sp, dcpl, dapl, ds;
	double t0, t;
	void *h;

	f = H5Fcreate(h5f, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	sp = H5Screate_simple(2, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	dapl = H5Pcreate(H5P_DATASET_ACCESS);
	H5Pset_chunk(dcpl, 2, chunk);
	H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR);
	H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
	H5Pset_chunk_cache(dapl, 100003, CACHE_BYTES, 1.0);
	ds = H5Dcreate2(f, "space", H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl, dapl);
	if (f < 0 || ds < 0)
		die("H5Dcreate2", 0);
	t0 = now();
	for (uint64_t r = 0; r < NR; r += band_rows) {
		hsize_t st[2] = { r, 0 }, cn[2] = { band_rows, NC };
		hid_t msp = H5Screate_simple(2, cn, NULL), fsp = H5Dget_space(ds);

		fill_rows(band, r, band_rows);
		H5Sselect_hyperslab(fsp, H5S_SELECT_SET, st, NULL, cn, NULL);
		if (H5Dwrite(ds, H5T_NATIVE_DOUBLE, msp, fsp, H5P_DEFAULT, band) < 0)
			die("H5Dwrite", 0);
		H5Sclose(msp);
		H5Sclose(fsp);
	}
	H5Dclose(ds);
	H5Fflush(f, H5F_SCOPE_GLOBAL);
	H5Fget_vfd_handle(f, H5P_DEFAULT, &h);
	if (fsync(*(int *)h))
		die("fsync h5", errno);
	t = now() - t0;
	H5Pclose(dcpl);
	H5Pclose(dapl);
	H5Sclose(sp);
	H5Fclose(f);
	return t;
}

/* ---- reads ---- */

struct pattern {
	char name[32];
	uint64_t nr, nc;	/* one request */
	unsigned reqs;		/* requests per measurement */
	int scan;		/* consecutive rows from a random start */
	double mbs[NPEERS][MAXRUNS];
};

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double measure(struct peer *pe, struct pattern *pt, uint64_t seed, double *buf)
{
	uint64_t bytes = 0, save = rng;
	double t0, t;

	rng = seed;
	pe->cold();
	t0 = now();
	if (pt->scan) {
		uint64_t r0 = rnd() % (NR - pt->reqs + 1);

		for (unsigned i = 0; i < pt->reqs; i++) {
			pe->read(r0 + i, 0, 1, NC, buf);
			check(buf, r0 + i, 0, 1, NC, pe->name);
			bytes += NC * 8;
		}
	} else {
		for (unsigned i = 0; i < pt->reqs; i++) {
			uint64_t r0 = rnd() % (NR / pt->nr) * pt->nr;
			uint64_t c0 = rnd() % (NC / pt->nc) * pt->nc;

			pe->read(r0, c0, pt->nr, pt->nc, buf);
			check(buf, r0, c0, pt->nr, pt->nc, pe->name);
			bytes += pt->nr * pt->nc * 8;
		}
	}
	t = now() - t0;
	rng = save;
	return bytes / t / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double t[MAXRUNS];

	memcpy(t, v, n * sizeof(*v));
	qsort(t, n, sizeof(*t), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rows", required_argument, NULL, 'r' }, { "cols", required_argument, NULL, 'c' },
		{ "runs", required_argument, NULL, 'n' }, { "keep", no_argument, NULL, 'k' },
		{ "bb", required_argument, NULL, 'b' }, { "seed", required_argument, NULL, 's' },
		{ "scan", required_argument, NULL, 'S' }, { NULL, 0, NULL, 0 },
	};
	uint64_t bb_opt[2] = { 0, 0 }, scan = 2048;
	int runs = 3, keep = 0, c, ret;
	struct gs_fs_opts fo = { .cache_bytes = 64u << 20 };
	struct gs_nd_info in;
	const char *dir;
	double *buf;
	uint64_t ino;

	while ((c = getopt_long(argc, argv, "r:c:n:kb:s:S:", opts, NULL)) != -1) {
		switch (c) {
		case 'r': NR = strtoull(optarg, NULL, 0); break;
		case 'c': NC = strtoull(optarg, NULL, 0); break;
		case 'n': runs = atoi(optarg); break;
		case 'k': keep = 1; break;
		case 'b': sscanf(optarg, "%" SCNu64 "x%" SCNu64, &bb_opt[0], &bb_opt[1]); break;
		case 's': rng = strtoull(optarg, NULL, 0); break;
		case 'S': scan = strtoull(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	if (optind != argc - 1 || runs < 1 || runs > MAXRUNS || NR < 4096 || NC < 4096) {
		fprintf(stderr, "usage: nd_bench DIR [--rows R>=4096] [--cols C>=4096] [--runs N] "
			"[--keep] [--bb AxB] [--scan ROWS] [--seed S]\n");
		return 2;
	}
	dir = argv[optind];
	snprintf(img, sizeof(img), "%s/nd.img", dir);
	snprintf(plainf, sizeof(plainf), "%s/plain.f64", dir);
	snprintf(h5f, sizeof(h5f), "%s/data.h5", dir);
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	printf("space %" PRIu64 " x %" PRIu64 " f64 (%.2f GiB), %d runs, %ld CPUs, load %s",
	       NR, NC, NR * NC * 8 / 1073741824.0, runs, sysconf(_SC_NPROCESSORS_ONLN), "");
	fflush(stdout);
	system("cut -d' ' -f1-3 /proc/loadavg");

	/* buffers: a band of block rows for writing, the largest request for reading */
	if (posix_memalign((void **)&buf, ALIGN, (4096 * 4096 > NR ? 4096 * 4096 : NR) * 8) ||
	    posix_memalign((void **)&bounce, ALIGN, NC * 8 + 2 * ALIGN))
		die("memory", ENOMEM);

	if (!keep) {
		double *band;
		uint64_t band_rows, bb[2];
		double tg, tp, th, gib = NR * NC * 8 / 1e6;
		struct gs_nd_params p = { .dtype = GS_ND_F64, .ndims = 2, .shape = { NR, NC },
					  .bb = { bb_opt[0], bb_opt[1] } };
		struct gs_q_geom g;
		struct gs_fs *tfs;
		struct gs_mkfs_opts mo = { .size = 64u << 20, .force = 1 };
		struct gs_fs_opts to = { .path = img };

		/* the block shape gstore will pick on this device, for HDF5's chunk */
		if (gs_fs_mkfs(img, &mo) || gs_fs_mount(&tfs, &to))
			die("probe image", 0);
		gs_fs_geometry(tfs, &g);
		gs_nd_block_shape(&p, &g, bb);
		gs_fs_unmount(tfs);
		band_rows = bb[0];
		while (band_rows * NC * 8 < (64u << 20) && NR % (band_rows * 2) == 0)
			band_rows *= 2;
		if (posix_memalign((void **)&band, ALIGN, band_rows * NC * 8))
			die("memory", ENOMEM);
		printf("block shape %" PRIu64 "x%" PRIu64 " (%.1f MiB), write band %" PRIu64
		       " rows\n", bb[0], bb[1], bb[0] * bb[1] * 8 / 1048576.0, band_rows);
		tg = write_gstore(bb_opt, band, band_rows);
		printf("write gstore %.0f MB/s (%.2f s)\n", gib / tg, tg);
		tp = write_plain(band, band_rows);
		printf("write plain  %.0f MB/s (%.2f s)\n", gib / tp, tp);
		th = write_hdf5(bb, band, band_rows);
		printf("write hdf5   %.0f MB/s (%.2f s)\n", gib / th, th);
		printf("write ratio gstore/plain %.2f gstore/hdf5 %.2f\n", tp / tg, th / tg);
		free(band);
	}

	/* open the three for reading */
	fo.path = img;
	ret = gs_fs_mount(&gfs, &fo);
	if (!ret)
		ret = gs_nd_lookup(gfs, "bench", &ino);
	if (!ret)
		ret = gs_nd_open(gfs, ino, &gnd);
	if (ret)
		die("open gstore space", ret);
	gs_nd_get_info(gnd, &in);
	gbb[0] = in.p.bb[0];
	gbb[1] = in.p.bb[1];
	if (in.p.shape[0] != NR || in.p.shape[1] != NC)
		die("the image holds another shape (drop --keep)", EINVAL);
	pfd = open(plainf, O_RDONLY | O_DIRECT);
	if (pfd < 0)
		die(plainf, errno);
	hfile = H5Fopen(h5f, H5F_ACC_RDONLY, H5P_DEFAULT);
	hdapl = H5Pcreate(H5P_DATASET_ACCESS);
	H5Pset_chunk_cache(hdapl, 100003, CACHE_BYTES, 1.0);
	if (hfile < 0)
		die(h5f, 0);
	h_open_dset();
	printf("block shape %" PRIu64 "x%" PRIu64 " = HDF5 chunk; caches %u MiB\n", gbb[0],
	       gbb[1], CACHE_BYTES >> 20);

	struct pattern pats[] = {
		{ .nr = 1, .nc = NC, .reqs = scan, .scan = 1 },
		{ .nr = NR, .nc = 1, .reqs = 1 },
		{ .nr = 256, .nc = 256, .reqs = 32 },
		{ .nr = 1024, .nc = 1024, .reqs = 8 },
		{ .nr = 4096, .nc = 4096, .reqs = 2 },
	};
	int npat = sizeof(pats) / sizeof(pats[0]);

	snprintf(pats[0].name, 32, "rows(scan %u)", (unsigned)scan);
	snprintf(pats[1].name, 32, "column");
	for (int i = 2; i < npat; i++)
		snprintf(pats[i].name, 32, "tile %" PRIu64 "x%" PRIu64, pats[i].nr, pats[i].nc);

	/* warm-up: one small request per peer (page tables, libraries) */
	for (int p = 0; p < NPEERS; p++)
		peers[p].read(0, 0, 16, 16, buf);
	for (int r = 0; r < runs; r++) {
		for (int i = 0; i < npat; i++) {
			uint64_t seed = rnd() | 1;

			for (int p = 0; p < NPEERS; p++) {
				pats[i].mbs[p][r] = measure(&peers[p], &pats[i], seed, buf);
				printf("run %d %-16s %-7s %9.1f MB/s\n", r + 1, pats[i].name,
				       peers[p].name, pats[i].mbs[p][r]);
				fflush(stdout);
			}
		}
	}
	printf("\nmedians of %d runs, MB/s of requested data (cold caches)\n", runs);
	printf("%-16s %9s %9s %9s %12s %12s\n", "pattern", "gstore", "plain", "hdf5",
	       "gstore/plain", "gstore/hdf5");
	for (int i = 0; i < npat; i++) {
		double g = median(pats[i].mbs[0], runs), pl = median(pats[i].mbs[1], runs);
		double h = median(pats[i].mbs[2], runs);

		printf("%-16s %9.1f %9.1f %9.1f %12.2f %12.2f\n", pats[i].name, g, pl, h, g / pl,
		       g / h);
	}
	H5Dclose(hset);
	H5Pclose(hdapl);
	H5Fclose(hfile);
	close(pfd);
	gs_nd_close(gnd);
	gs_fs_unmount(gfs);
	free(buf);
	free(bounce);
	return 0;
}
