// SPDX-License-Identifier: MIT
/*
 * gstore nd: N-D spaces from the command line.
 *
 *   gstore nd create NAME --shape 16384x16384 --dtype f64 [--bb 256x256]
 *   gstore nd info NAME
 *   gstore nd import NAME FILE [--shape S --dtype T] [--bb B] [--raw]
 *   gstore nd export NAME OUT [--npy] [--slice a:b,c:d] [--as SHAPE]
 *
 * each with --image IMG (in-process, unmounted) or --mount MNT (through
 * gstorefs: nd/NAME/ files and xattrs).  FILE is a .npy (type and shape from
 * its header) or raw (--shape and --dtype); OUT - is stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_nd.h"
#include "cmd.h"

#define CHUNK		(8u << 20)
#define NPY_HDR_MAX	4096

struct nd_args {
	const char *verb, *name, *file, *image, *mnt, *shape, *dtype, *bb, *slice, *as;
	int npy, raw, force;
};

/* Where spaces live: an image opened here, or a gstorefs mount. */
struct where {
	struct gs_fs *fs;
	char *mnt;
};

static int where_open(struct where *w, const struct nd_args *a, int rdonly)
{
	struct gs_fs_opts o = { .path = a->image, .flags = rdonly ? GS_FS_RDONLY : 0 };
	const char *mnt = a->mnt;
	int ret;

	memset(w, 0, sizeof(*w));
	if (a->image && (w->mnt = gs_find_mount(a->image))) {
		fprintf(stderr, "gstore: %s is mounted at %s; using the mount\n", a->image, w->mnt);
		return 0;
	}
	if (!a->image && !mnt) {
		mnt = getenv("GSTORE_MOUNT");
		if (!mnt)
			return gs_fail(-1, "no target: give --image IMG or --mount MNT");
	}
	if (mnt) {
		if (!gs_is_mount(mnt))
			return gs_fail(-1, "%s is not a gstore mount point", mnt);
		w->mnt = strdup(mnt);
		return w->mnt ? 0 : -1;
	}
	ret = gs_fs_mount(&w->fs, &o);
	if (ret < 0)
		return gs_fail(-1, "cannot open %s: %s%s", a->image, strerror(-ret),
			       ret == -EBUSY ? " (mounted? use --mount)" : "");
	return 0;
}

static int where_close(struct where *w)
{
	int ret = 0;

	if (w->fs && (ret = gs_fs_unmount(w->fs)) < 0)
		gs_fail(0, "unmount: %s", strerror(-ret));
	free(w->mnt);
	return ret;
}

static void path_of(const struct where *w, const char *name, const char *file, char *buf,
		    size_t size)
{
	snprintf(buf, size, "%s/nd/%s%s%s", w->mnt, name, file ? "/" : "", file ? file : "");
}

static int parse_params(const struct nd_args *a, struct gs_nd_params *p)
{
	uint64_t bb[GS_ND_MAX_DIMS];
	int n;

	n = gs_nd_parse_shape(a->shape, p->shape, GS_ND_MAX_DIMS);
	if (n < 0)
		return gs_fail(-1, "bad --shape '%s' (e.g. 16384x16384, each 1..2^40)", a->shape);
	p->ndims = n;
	if (gs_nd_parse_dtype(a->dtype, &p->dtype, &p->elem_size))
		return gs_fail(-1, "unknown --dtype '%s' (i8..i64, u8..u64, f16, f32, f64, "
			       "numpy codes like <f8, or rawN)", a->dtype);
	if (a->bb) {
		if (gs_nd_parse_shape(a->bb, bb, GS_ND_MAX_DIMS) != n)
			return gs_fail(-1, "--bb '%s' needs %d dimensions", a->bb, n);
		memcpy(p->bb, bb, n * sizeof(bb[0]));
	}
	return 0;
}

/* Make nd/NAME with @p, through the mount (mkdir + xattrs) or the library. */
static int space_create(struct where *w, const char *name, const struct nd_args *a,
			const struct gs_nd_params *p)
{
	int ret;

	if (w->mnt) {
		char path[4096], v[256];
		int k = 0;

		path_of(w, name, NULL, path, sizeof(path));
		if (mkdir(path, 0755) < 0)
			return gs_fail(-1, "%s: %s", path, strerror(errno));
		for (uint32_t i = 0; i < p->ndims && p->bb[0]; i++)
			k += snprintf(v + k, sizeof(v) - k, "%s%" PRIu64, i ? "x" : "", p->bb[i]);
		if (k && setxattr(path, "user.gstore.bb", v, k, 0) < 0)
			goto undo;
		k = 0;
		for (uint32_t i = 0; i < p->ndims; i++)
			k += snprintf(v + k, sizeof(v) - k, "%s%" PRIu64, i ? "x" : "",
				      p->shape[i]);
		if (setxattr(path, "user.gstore.shape", v, k, 0) < 0)
			goto undo;
		if (p->dtype == GS_ND_RAW)
			k = snprintf(v, sizeof(v), "raw%u", p->elem_size);
		else
			k = snprintf(v, sizeof(v), "%s", gs_nd_dtype_name(p->dtype));
		if (setxattr(path, "user.gstore.dtype", v, k, 0) < 0)
			goto undo;
		return 0;
undo:
		ret = errno;
		rmdir(path);
		return gs_fail(-1, "nd/%s: %s", name, strerror(ret));
	}
	ret = gs_nd_create(w->fs, 0, name, p, 0755, NULL);
	if (ret < 0)
		return gs_fail(-1, "nd/%s: %s", name, strerror(-ret));
	return 0;
}

static int space_open(struct where *w, const char *name, struct gs_nd **nd)
{
	uint64_t ino;
	int ret = gs_nd_lookup(w->fs, name, &ino);

	if (!ret)
		ret = gs_nd_open(w->fs, ino, nd);
	return ret < 0 ? gs_fail(-1, "nd/%s: %s", name, strerror(-ret)) : 0;
}

static int nd_create(const struct nd_args *a)
{
	struct gs_nd_params p = { 0 };
	struct where w;
	int ret;

	if (!a->shape || !a->dtype)
		return gs_fail(2, "nd create needs --shape and --dtype");
	if (parse_params(a, &p) || where_open(&w, a, 0))
		return 1;
	ret = space_create(&w, a->name, a, &p);
	return where_close(&w) || ret ? 1 : 0;
}

static int print_info(struct gs_nd *nd, const char *name)
{
	struct gs_nd_info in;
	char h[32];

	gs_nd_get_info(nd, &in);
	printf("name %s\nshape ", name);
	for (uint32_t i = 0; i < in.p.ndims; i++)
		printf("%s%" PRIu64, i ? "x" : "", in.p.shape[i]);
	printf("\ndtype %s\nelem_size %u\nbytes %" PRIu64 " (%s)\nblock_shape ",
	       in.p.dtype == GS_ND_RAW ? "raw" : gs_nd_dtype_name(in.p.dtype), in.p.elem_size,
	       in.bytes, gs_human(in.bytes, h, sizeof(h)));
	for (uint32_t i = 0; i < in.p.ndims; i++)
		printf("%s%" PRIu64, i ? "x" : "", in.p.bb[i]);
	printf("\nblock_bytes %" PRIu64 "\nblocks_total %" PRIu64 "\nblocks_written %" PRIu64
	       "\nallocated %s\n", in.block_bytes, in.blocks_total, in.blocks_written,
	       gs_human(in.blocks_written * in.block_stride, h, sizeof(h)));
	return 0;
}

static int cat_file(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return gs_fail(1, "%s: %s", path, strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stdout);
	close(fd);
	return n < 0 ? 1 : 0;
}

static int nd_info(const struct nd_args *a)
{
	struct gs_nd *nd;
	struct where w;
	int ret;

	if (where_open(&w, a, 1))
		return 1;
	if (w.mnt) {
		char path[4096];

		path_of(&w, a->name, "info", path, sizeof(path));
		ret = cat_file(path);
	} else {
		ret = space_open(&w, a->name, &nd);
		if (!ret) {
			print_info(nd, a->name);
			gs_nd_close(nd);
		}
	}
	return where_close(&w) || ret ? 1 : 0;
}

/* The input's type and shape: a .npy header or --shape/--dtype; *hdr: payload offset. */
static int describe(const struct nd_args *a, int fd, uint64_t fsize, struct gs_nd_params *p,
		    uint64_t *hdr)
{
	char head[NPY_HDR_MAX];
	uint64_t want = 1;
	ssize_t got;
	int ret;

	*hdr = 0;
	got = pread(fd, head, sizeof(head), 0);
	if (got < 0)
		return gs_fail(-1, "%s: %s", a->file, strerror(errno));
	if (!a->raw && got >= 6 && !memcmp(head, "\x93NUMPY", 6)) {
		if (a->shape || a->dtype)
			return gs_fail(-1, "--shape/--dtype are for raw files; %s is .npy",
				       a->file);
		ret = gs_nd_npy_parse(head, got, &p->dtype, &p->elem_size, &p->ndims, p->shape);
		if (ret == -EOPNOTSUPP)
			return gs_fail(-1, "%s: unsupported .npy (Fortran order, big-endian, or a "
				       "type gstore does not store)", a->file);
		if (ret < 0)
			return gs_fail(-1, "%s: malformed .npy header", a->file);
		*hdr = ret;
		if (a->bb && gs_nd_parse_shape(a->bb, p->bb, GS_ND_MAX_DIMS) != (int)p->ndims)
			return gs_fail(-1, "--bb '%s' needs %u dimensions", a->bb, p->ndims);
	} else {
		if (!a->shape || !a->dtype)
			return gs_fail(-1, "%s is raw: give --shape and --dtype", a->file);
		if (parse_params(a, p))
			return -1;
	}
	want = p->elem_size;
	for (uint32_t i = 0; i < p->ndims; i++)
		if (__builtin_mul_overflow(want, p->shape[i], &want))
			return gs_fail(-1, "shape too large");
	if (fsize - *hdr != want)
		return gs_fail(-1, "%s: %" PRIu64 " bytes of data, the shape needs %" PRIu64,
			       a->file, fsize - *hdr, want);
	return 0;
}

static int nd_import(const struct nd_args *a)
{
	struct gs_nd_params p = { 0 };
	struct gs_progress pr;
	struct gs_nd *nd = NULL;
	uint64_t hdr, off;
	struct where w;
	struct stat st;
	int fd, out = -1, ret = 1;
	char *buf;

	fd = open(a->file, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0)
		return gs_fail(1, "%s: %s", a->file, strerror(errno));
	buf = malloc(CHUNK);
	if (!buf || describe(a, fd, st.st_size, &p, &hdr) || where_open(&w, a, 0)) {
		free(buf);
		close(fd);
		return 1;
	}
	if (space_create(&w, a->name, a, &p))
		goto close_where;
	if (w.mnt) {
		char path[4096];

		path_of(&w, a->name, "data", path, sizeof(path));
		out = open(path, O_WRONLY);
		if (out < 0) {
			gs_fail(0, "%s: %s", path, strerror(errno));
			goto close_where;
		}
	} else if (space_open(&w, a->name, &nd)) {
		goto close_where;
	}
	gs_progress_start(&pr, "import", st.st_size - hdr);
	for (off = 0; off < (uint64_t)st.st_size - hdr;) {
		ssize_t n = pread(fd, buf, CHUNK, hdr + off), m;

		if (n <= 0) {
			gs_fail(0, "%s: %s", a->file, n ? strerror(errno) : "short file");
			goto close_space;
		}
		m = nd ? gs_nd_pwrite_sel(nd, NULL, buf, n, off) : pwrite(out, buf, n, off);
		if (m != n) {
			gs_fail(0, "nd/%s: %s", a->name, strerror(m < 0 ? (nd ? -m : errno) : EIO));
			goto close_space;
		}
		off += n;
		gs_progress_add(&pr, n);
	}
	gs_progress_end(&pr);
	ret = 0;
close_space:
	if (nd && gs_nd_close(nd) < 0)
		ret = 1;
	if (out >= 0 && (fsync(out) < 0 || close(out) < 0))
		ret = 1;
close_where:
	if (where_close(&w))
		ret = 1;
	free(buf);
	close(fd);
	return ret;
}

/* The file under nd/NAME/ that holds what export wants. */
static void export_file(const struct nd_args *a, char *buf, size_t size)
{
	int k = 0;

	if (a->as)
		k = snprintf(buf, size, "as/%s/", a->as);
	snprintf(buf + k, size - k, "%s%s%s", a->slice ? "slice/" : "data",
		 a->slice ? a->slice : "", a->npy ? ".npy" : "");
}

/* Export from an image: the selection streamed through gs_nd_pread_sel. */
static int export_image(struct where *w, const struct nd_args *a, char *buf, int out)
{
	uint64_t vshape[GS_ND_MAX_DIMS], start[GS_ND_MAX_DIMS], count[GS_ND_MAX_DIMS];
	uint64_t stride[GS_ND_MAX_DIMS], nshape[GS_ND_MAX_DIMS], off = 0;
	struct gs_nd_sel sel = { .shape = vshape, .start = start, .count = count,
				 .stride = stride };
	uint32_t vn, dropped = 0, nn = 0;
	struct gs_nd_info in;
	struct gs_nd *nd;
	ssize_t total;
	int ret = 1, n;

	if (space_open(w, a->name, &nd))
		return 1;
	gs_nd_get_info(nd, &in);
	vn = in.p.ndims;
	memcpy(vshape, in.p.shape, sizeof(vshape));
	if (a->as) {
		n = gs_nd_parse_shape(a->as, vshape, GS_ND_MAX_DIMS);
		if (n < 0) {
			gs_fail(0, "bad --as '%s'", a->as);
			goto close;
		}
		vn = sel.ndims = n;
	}
	n = 0;
	if (a->slice)
		n = gs_nd_parse_slice(a->slice, vn, vshape, start, count, stride, &dropped);
	else
		for (uint32_t i = 0; i < vn; i++)
			start[i] = 0, count[i] = vshape[i], stride[i] = 1;
	total = n < 0 ? n : gs_nd_sel_bytes(nd, &sel);
	if (total < 0) {
		gs_fail(0, "nd/%s: %s%s%s: %s", a->name, a->as ? "as " : "", a->as ? a->as : "",
			a->slice ? a->slice : "", strerror(-total));
		goto close;
	}
	if (a->npy) {
		char hdr[256];
		int h;

		for (uint32_t i = 0; i < vn; i++)
			if (!(dropped & (1u << i)))
				nshape[nn++] = count[i];
		/* every dimension a bare index: numpy's a[i, j], a 0-d array */
		h = gs_nd_npy_header(hdr, sizeof(hdr), in.p.dtype, in.p.elem_size, nn, nshape);
		if (h < 0 || write(out, hdr, h) != h) {
			gs_fail(0, "%s: %s", a->file, strerror(errno));
			goto close;
		}
	}
	while (off < (uint64_t)total) {
		ssize_t k = gs_nd_pread_sel(nd, &sel, buf, CHUNK, off);

		if (k <= 0 || write(out, buf, k) != k) {
			int err = k < 0 ? -k : errno ? errno : EIO;

			gs_fail(0, "nd/%s: %s", a->name, strerror(err));
			goto close;
		}
		off += k;
	}
	ret = 0;
close:
	gs_nd_close(nd);
	return ret;
}

static int nd_export(const struct nd_args *a)
{
	char rel[1024], path[4096], *buf;
	int in = -1, out, ret = 1;
	struct where w;

	export_file(a, rel, sizeof(rel));
	out = strcmp(a->file, "-") ? open(a->file, O_WRONLY | O_CREAT | O_TRUNC, 0644) : 1;
	if (out < 0)
		return gs_fail(1, "%s: %s", a->file, strerror(errno));
	buf = malloc(CHUNK);
	if (!buf || where_open(&w, a, 1)) {
		free(buf);
		return 1;
	}
	if (w.mnt) {
		ssize_t n;

		path_of(&w, a->name, rel, path, sizeof(path));
		in = open(path, O_RDONLY);
		if (in < 0) {
			gs_fail(0, "%s: %s", path, strerror(errno));
			goto close_where;
		}
		while ((n = read(in, buf, CHUNK)) > 0)
			if (write(out, buf, n) != n)
				break;
		ret = n == 0 ? 0 : gs_fail(1, "%s: %s", path, strerror(errno));
		close(in);
	} else {
		ret = export_image(&w, a, buf, out);
	}
close_where:
	where_close(&w);
	free(buf);
	if (out != 1 && close(out) < 0)
		ret = 1;
	return ret;
}

int cmd_nd(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "mount", required_argument, NULL, 'm' },
		{ "shape", required_argument, NULL, 's' },
		{ "dtype", required_argument, NULL, 't' },
		{ "bb", required_argument, NULL, 'b' },
		{ "slice", required_argument, NULL, 'l' },
		{ "as", required_argument, NULL, 'a' },
		{ "npy", no_argument, NULL, 'n' },
		{ "raw", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct nd_args a = { 0 };
	int c, need;

	while ((c = getopt_long(argc, argv, "i:m:s:t:b:l:a:nrh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': a.image = optarg; break;
		case 'm': a.mnt = optarg; break;
		case 's': a.shape = optarg; break;
		case 't': a.dtype = optarg; break;
		case 'b': a.bb = optarg; break;
		case 'l': a.slice = optarg; break;
		case 'a': a.as = optarg; break;
		case 'n': a.npy = 1; break;
		case 'r': a.raw = 1; break;
		default: return gs_usage("nd");
		}
	}
	if (optind >= argc)
		return gs_usage("nd");
	a.verb = argv[optind++];
	need = !strcmp(a.verb, "import") || !strcmp(a.verb, "export") ? 2 : 1;
	if (argc - optind != need)
		return gs_usage("nd");
	a.name = argv[optind];
	a.file = need == 2 ? argv[optind + 1] : NULL;
	if (!*a.name || strchr(a.name, '/') || !strcmp(a.name, ".") || !strcmp(a.name, ".."))
		return gs_fail(2, "bad space name '%s'", a.name);
	if (!strcmp(a.verb, "create"))
		return nd_create(&a);
	if (!strcmp(a.verb, "info"))
		return nd_info(&a);
	if (!strcmp(a.verb, "import"))
		return nd_import(&a);
	if (!strcmp(a.verb, "export"))
		return nd_export(&a);
	return gs_usage("nd");
}
