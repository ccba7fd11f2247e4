// SPDX-License-Identifier: MIT
/*
 * gstore import / export: copy arrays in and out, either through a mounted
 * gstorefs (plain file I/O under MNT/arrays) or in-process on an unmounted
 * image (gs_fs_mount).  .npy files: the payload is stored raw and the type
 * and shape go to the xattrs user.gstore.dtype (a numpy type name, e.g.
 * "float32") and user.gstore.shape ("3,4"), which --npy export turns back
 * into a header.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_nd.h"
#include "cmd.h"

#define CHUNK		(4u << 20)
#define XA_DTYPE	"user.gstore.dtype"
#define XA_SHAPE	"user.gstore.shape"
#define NPY_HDR_MAX	4096

/* Where the array lives: an in-process image, or a mount point. */
struct target {
	struct gs_fs *fs;
	char *mnt;
	uint64_t dir;		/* image: ino of arrays/ */
};

/* One array in a target. */
struct obj {
	struct target *t;
	int fd;			/* mount: the open file */
	uint64_t ino;		/* image */
};

static int target_open(struct target *t, const char *image, const char *mnt, int rdonly)
{
	struct gs_fs_opts o = { .path = image, .flags = rdonly ? GS_FS_RDONLY : 0 };
	struct gs_stat st;
	char *where;
	int ret;

	memset(t, 0, sizeof(*t));
	if (!image && !mnt) {
		mnt = getenv("GSTORE_MOUNT");
		if (!mnt && gs_is_mount("/mnt/gstore"))
			mnt = "/mnt/gstore";
		if (!mnt)
			return gs_fail(-1, "no target: give --image IMG or --mount MNT");
	}
	if (image && (where = gs_find_mount(image))) {
		/* The daemon owns a mounted image: go through its mount. */
		fprintf(stderr, "gstore: %s is mounted at %s; using the mount\n", image, where);
		t->mnt = where;
		return 0;
	}
	if (mnt) {
		if (!gs_is_mount(mnt))
			return gs_fail(-1, "%s is not a gstore mount point", mnt);
		t->mnt = strdup(mnt);
		return t->mnt ? 0 : -1;
	}
	ret = gs_fs_mount(&t->fs, &o);
	if (ret < 0)
		return gs_fail(-1, "cannot open %s: %s%s", image, strerror(-ret),
			       ret == -EBUSY ? " (mounted? use --mount)" : "");
	ret = gs_fs_lookup(t->fs, GS_ROOT_INO, "arrays", &st);
	if (ret < 0) {
		gs_fs_unmount(t->fs);
		return gs_fail(-1, "%s: no arrays/ directory: %s", image, strerror(-ret));
	}
	t->dir = st.ino;
	return 0;
}

static int target_close(struct target *t)
{
	int ret = 0;

	if (t->fs) {
		ret = gs_fs_unmount(t->fs);
		if (ret < 0)
			gs_fail(0, "unmount: %s", strerror(-ret));
	}
	free(t->mnt);
	return ret;
}

static void mnt_path(const struct target *t, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/arrays/%s", t->mnt, name);
}

/* Create arrays/NAME empty (replacing an existing one with @force). */
static int obj_create(struct target *t, const char *name, int force, struct obj *o)
{
	int ret;

	o->t = t;
	o->fd = -1;
	if (t->mnt) {
		char p[4096];

		mnt_path(t, name, p, sizeof(p));
		o->fd = open(p, O_WRONLY | O_CREAT | (force ? O_TRUNC : O_EXCL), 0644);
		return o->fd < 0 ? -errno : 0;
	}
	struct gs_stat st;

	ret = gs_fs_create(t->fs, t->dir, name, GS_T_ARRAY, 0644, getuid(), getgid(), &st);
	if (ret == -EEXIST && force) {
		struct gs_stat in = { .size = 0 };

		ret = gs_fs_lookup(t->fs, t->dir, name, &st);
		if (!ret && st.type != GS_T_ARRAY)
			ret = -EISDIR;
		if (!ret)
			ret = gs_fs_setattr(t->fs, st.ino, &in, GS_SET_SIZE, &st);
	}
	o->ino = st.ino;
	return ret;
}

static int obj_open(struct target *t, const char *name, struct obj *o, uint64_t *size)
{
	struct gs_stat st;
	int ret;

	o->t = t;
	o->fd = -1;
	if (t->mnt) {
		struct stat s;
		char p[4096];

		mnt_path(t, name, p, sizeof(p));
		o->fd = open(p, O_RDONLY);
		if (o->fd < 0)
			return -errno;
		if (fstat(o->fd, &s) < 0)
			return -errno;
		if (!S_ISREG(s.st_mode))
			return -EISDIR;
		*size = (uint64_t)s.st_size;
		return 0;
	}
	ret = gs_fs_lookup(t->fs, t->dir, name, &st);
	if (ret < 0)
		return ret;
	if (st.type != GS_T_ARRAY)
		return -EISDIR;
	o->ino = st.ino;
	*size = st.size;
	return 0;
}

static ssize_t obj_pwrite(struct obj *o, const void *buf, size_t len, uint64_t off)
{
	if (o->fd >= 0) {
		ssize_t n = pwrite(o->fd, buf, len, (off_t)off);

		return n < 0 ? -errno : n;
	}
	return gs_fs_write(o->t->fs, o->ino, buf, len, off);
}

static ssize_t obj_pread(struct obj *o, void *buf, size_t len, uint64_t off)
{
	if (o->fd >= 0) {
		ssize_t n = pread(o->fd, buf, len, (off_t)off);

		return n < 0 ? -errno : n;
	}
	return gs_fs_read(o->t->fs, o->ino, buf, len, off);
}

static int obj_truncate(struct obj *o, uint64_t size)
{
	struct gs_stat in = { .size = size }, out;

	if (o->fd >= 0)
		return ftruncate(o->fd, (off_t)size) < 0 ? -errno : 0;
	return gs_fs_setattr(o->t->fs, o->ino, &in, GS_SET_SIZE, &out);
}

static int obj_setxattr(struct obj *o, const char *name, const char *val)
{
	if (o->fd >= 0)
		return fsetxattr(o->fd, name, val, strlen(val), 0) < 0 ? -errno : 0;
	return gs_fs_setxattr(o->t->fs, o->ino, name, val, strlen(val), 0);
}

static int obj_removexattr(struct obj *o, const char *name)
{
	int ret;

	if (o->fd >= 0)
		ret = fremovexattr(o->fd, name) < 0 ? -errno : 0;
	else
		ret = gs_fs_removexattr(o->t->fs, o->ino, name);
	return ret == -ENODATA ? 0 : ret;
}

/* NUL-terminated value into @buf; -ENODATA if absent. */
static int obj_getxattr(struct obj *o, const char *name, char *buf, size_t size)
{
	ssize_t n;

	if (o->fd >= 0) {
		n = fgetxattr(o->fd, name, buf, size - 1);
		if (n < 0)
			n = -errno;
	} else
		n = gs_fs_getxattr(o->t->fs, o->ino, name, buf, size - 1);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	return 0;
}

static int obj_close(struct obj *o, int sync)
{
	int ret = 0;

	if (o->fd >= 0) {
		if (sync && fsync(o->fd) < 0)
			ret = -errno;
		if (close(o->fd) < 0 && !ret)
			ret = -errno;
		o->fd = -1;
		return ret;
	}
	return sync ? gs_fs_fsync(o->t->fs, o->ino, 0) : 0;
}

static int valid_name(const char *name)
{
	return *name && strlen(name) <= GS_NAME_MAX && !strchr(name, '/') &&
	       strcmp(name, ".") && strcmp(name, "..");
}

/* numpy's names for the xattr: unambiguous to np.dtype() (numpy's "i8" is int64). */
static void dtype_numpy_name(uint32_t dtype, uint32_t esize, char *buf, size_t size)
{
	static const char *const names[GS_ND_NR_DTYPES] = {
		[GS_ND_I8] = "int8", [GS_ND_I16] = "int16", [GS_ND_I32] = "int32",
		[GS_ND_I64] = "int64", [GS_ND_U8] = "uint8", [GS_ND_U16] = "uint16",
		[GS_ND_U32] = "uint32", [GS_ND_U64] = "uint64", [GS_ND_F16] = "float16",
		[GS_ND_F32] = "float32", [GS_ND_F64] = "float64",
	};

	if (dtype < GS_ND_NR_DTYPES && names[dtype])
		snprintf(buf, size, "%s", names[dtype]);
	else
		snprintf(buf, size, "V%u", esize);
}

static void shape_text(const uint64_t *shape, uint32_t ndims, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < ndims && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%llu", i ? "," : "",
				      (unsigned long long)shape[i]);
}

/* elements * esize, or 0 on overflow */
static uint64_t shape_bytes(const uint64_t *shape, uint32_t ndims, uint32_t esize)
{
	uint64_t b = esize;

	for (uint32_t i = 0; i < ndims; i++)
		if (__builtin_mul_overflow(b, shape[i], &b))
			return 0;
	return b;
}

struct import_args {
	const char *name, *file, *image, *mnt, *dtype, *shape;
	int force, raw;
};

/* Describe the input: .npy header (sets *hdr) or raw with optional --dtype/--shape. */
static int describe_input(const struct import_args *a, int fd, uint64_t fsize, uint64_t *hdr,
			  char *dtype_s, char *shape_s, size_t n)
{
	uint32_t dtype = 0, esize = 0, ndims = 0;
	uint64_t shape[GS_ND_MAX_DIMS], want;
	char head[NPY_HDR_MAX];
	ssize_t got;
	int ret;

	*hdr = 0;
	dtype_s[0] = shape_s[0] = 0;
	got = pread(fd, head, sizeof(head), 0);
	if (got < 0)
		return gs_fail(-1, "%s: %s", a->file, strerror(errno));
	if (!a->raw && got >= 6 && !memcmp(head, "\x93NUMPY", 6)) {
		ret = gs_nd_npy_parse(head, (size_t)got, &dtype, &esize, &ndims, shape);
		if (ret == -EOPNOTSUPP)
			return gs_fail(-1, "%s: unsupported .npy (Fortran order, big-endian, or a "
				       "type gstore does not store; np.ascontiguousarray(a)."
				       "astype('<f4') helps)", a->file);
		if (ret < 0)
			return gs_fail(-1, "%s: malformed .npy header", a->file);
		if (a->dtype || a->shape)
			return gs_fail(-1, "--dtype/--shape are for raw files; %s is .npy",
				       a->file);
		*hdr = (uint64_t)ret;
		want = shape_bytes(shape, ndims, esize);
		if (!want || fsize - *hdr < want)
			return gs_fail(-1, "%s: truncated .npy: header says %llu bytes of data, "
				       "file has %llu", a->file, (unsigned long long)want,
				       (unsigned long long)(fsize - *hdr));
		if (fsize - *hdr > want)
			fprintf(stderr, "gstore: %s: ignoring %llu bytes after the array data\n",
				a->file, (unsigned long long)(fsize - *hdr - want));
		dtype_numpy_name(dtype, esize, dtype_s, n);
		shape_text(shape, ndims, shape_s, n);
		return 0;
	}
	if (a->dtype) {
		if (gs_nd_parse_dtype(a->dtype, &dtype, &esize))
			return gs_fail(-1, "unknown --dtype '%s' (e.g. float32, int64, uint8)",
				       a->dtype);
		dtype_numpy_name(dtype, esize, dtype_s, n);
	}
	if (a->shape) {
		ret = gs_nd_parse_shape(a->shape, shape, GS_ND_MAX_DIMS);
		if (ret <= 0)
			return gs_fail(-1, "bad --shape '%s' (e.g. 1000,64)", a->shape);
		ndims = (uint32_t)ret;
		shape_text(shape, ndims, shape_s, n);
		want = shape_bytes(shape, ndims, esize ? esize : 1);
		if (want != fsize)
			return gs_fail(-1, "--shape %s%s%s is %llu bytes but %s has %llu",
				       a->shape, a->dtype ? " of " : "", a->dtype ? a->dtype : "",
				       (unsigned long long)want, a->file,
				       (unsigned long long)fsize);
	} else if (esize && fsize % esize) {
		return gs_fail(-1, "%s: %llu bytes is not a whole number of %s elements",
			       a->file, (unsigned long long)fsize, a->dtype);
	}
	return 0;
}

static int all_zero(const char *p, size_t n)
{
	return n && p[0] == 0 && !memcmp(p, p + 1, n - 1);
}

/* Copy fd[off..off+len) into @o; zero chunks are left as holes (the array is new). */
static int copy_in(int fd, uint64_t off, uint64_t len, struct obj *o, const char *file)
{
	struct gs_progress pr;
	char *buf = malloc(CHUNK);
	uint64_t done = 0;
	int ret = 0;

	if (!buf)
		return gs_fail(-1, "out of memory");
	gs_progress_start(&pr, "import", len);
	while (done < len) {
		size_t want = len - done < CHUNK ? (size_t)(len - done) : CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)(off + done));

		if (n <= 0) {
			ret = gs_fail(-1, "read %s: %s", file, n < 0 ? strerror(errno) :
				      "unexpected end of file");
			break;
		}
		if (!all_zero(buf, (size_t)n)) {
			ssize_t w = obj_pwrite(o, buf, (size_t)n, done);

			if (w != n) {
				ret = gs_fail(-1, "write: %s", strerror(w < 0 ? (int)-w : EIO));
				break;
			}
		}
		done += (uint64_t)n;
		gs_progress_add(&pr, (uint64_t)n);
	}
	gs_progress_end(&pr);
	if (!ret && (ret = obj_truncate(o, len)) < 0)
		gs_fail(-1, "set size: %s", strerror(-ret));
	free(buf);
	return ret;
}

static int parse_target_opt(int c, const char **image, const char **mnt)
{
	if (c == 'i')
		*image = optarg;
	else if (c == 'm')
		*mnt = optarg;
	else
		return 0;
	return 1;
}

int cmd_import(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "mount", required_argument, NULL, 'm' },
		{ "dtype", required_argument, NULL, 't' },
		{ "shape", required_argument, NULL, 's' },
		{ "raw", no_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ 0 }
	};
	struct import_args a = { 0 };
	char dtype_s[64], shape_s[256];
	struct target t;
	struct stat st;
	struct obj o;
	uint64_t hdr;
	int c, fd, ret, status = 1;

	if (argc > 1 && !strcmp(argv[1], "graph"))
		return cmd_import_graph(argc - 1, argv + 1);
	while ((c = getopt_long(argc, argv, "i:m:t:s:rf", lo, NULL)) != -1) {
		if (parse_target_opt(c, &a.image, &a.mnt))
			continue;
		switch (c) {
		case 't': a.dtype = optarg; break;
		case 's': a.shape = optarg; break;
		case 'r': a.raw = 1; break;
		case 'f': a.force = 1; break;
		default: return gs_usage("import");
		}
	}
	if (argc - optind != 3 || strcmp(argv[optind], "array") || (a.image && a.mnt))
		return gs_usage("import");
	a.name = argv[optind + 1];
	a.file = argv[optind + 2];
	if (!valid_name(a.name))
		return gs_fail(2, "bad array name '%s'", a.name);
	fd = open(a.file, O_RDONLY);
	if (fd < 0)
		return gs_fail(1, "%s: %s", a.file, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return gs_fail(1, "%s: not a regular file", a.file);
	}
	if (describe_input(&a, fd, (uint64_t)st.st_size, &hdr, dtype_s, shape_s,
			   sizeof(shape_s)) < 0)
		goto close_fd;
	if (target_open(&t, a.image, a.mnt, 0) < 0)
		goto close_fd;
	ret = obj_create(&t, a.name, a.force, &o);
	if (ret < 0) {
		gs_fail(1, "create arrays/%s: %s%s", a.name, strerror(-ret),
			ret == -EEXIST ? " (use --force to replace it)" : "");
		goto close_target;
	}
	/* A replaced array must not keep the old type and shape. */
	if (a.force && ((ret = obj_removexattr(&o, XA_DTYPE)) < 0 ||
			(ret = obj_removexattr(&o, XA_SHAPE)) < 0))
		gs_fail(1, "clear the old xattrs: %s", strerror(-ret));
	else
		ret = copy_in(fd, hdr, (uint64_t)st.st_size - hdr, &o, a.file);
	if (!ret && dtype_s[0] && (ret = obj_setxattr(&o, XA_DTYPE, dtype_s)) < 0)
		gs_fail(1, "set %s: %s", XA_DTYPE, strerror(-ret));
	if (!ret && shape_s[0] && (ret = obj_setxattr(&o, XA_SHAPE, shape_s)) < 0)
		gs_fail(1, "set %s: %s", XA_SHAPE, strerror(-ret));
	if (obj_close(&o, 1) < 0 && !ret)
		ret = gs_fail(-1, "fsync arrays/%s failed", a.name);
	if (!ret) {
		char h[32];

		printf("arrays/%s: %s%s%s%s%s\n", a.name,
		       gs_human((uint64_t)st.st_size - hdr, h, sizeof(h)),
		       dtype_s[0] ? ", dtype " : "", dtype_s, shape_s[0] ? ", shape " : "",
		       shape_s);
		status = 0;
	}
close_target:
	if (target_close(&t) < 0)
		status = 1;
close_fd:
	close(fd);
	return status;
}

/* The .npy header for an array from its xattrs (uint8 vector without them). */
static int npy_header_for(struct obj *o, uint64_t size, char *hdr, size_t hsize)
{
	uint32_t dtype = GS_ND_U8, esize = 1, ndims = 1;
	uint64_t shape[GS_ND_MAX_DIMS] = { size };
	char val[256];
	int ret;

	if (obj_getxattr(o, XA_DTYPE, val, sizeof(val)) == 0 &&
	    gs_nd_parse_dtype(val, &dtype, &esize))
		return gs_fail(-1, "%s '%s' is not a type .npy can carry", XA_DTYPE, val);
	if (obj_getxattr(o, XA_SHAPE, val, sizeof(val)) == 0) {
		ret = gs_nd_parse_shape(val, shape, GS_ND_MAX_DIMS);
		if (ret <= 0)
			return gs_fail(-1, "bad %s '%s'", XA_SHAPE, val);
		ndims = (uint32_t)ret;
	} else {
		if (size % esize)
			return gs_fail(-1, "size %llu is not a multiple of the element size %u",
				       (unsigned long long)size, esize);
		shape[0] = size / esize;
	}
	if (shape_bytes(shape, ndims, esize) != size)
		return gs_fail(-1, "shape and dtype say %llu bytes, the array has %llu",
			       (unsigned long long)shape_bytes(shape, ndims, esize),
			       (unsigned long long)size);
	ret = gs_nd_npy_header(hdr, hsize, dtype, esize, ndims, shape);
	return ret < 0 ? gs_fail(-1, "cannot build the .npy header") : ret;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int copy_out(struct obj *o, uint64_t size, int fd, const char *out)
{
	struct gs_progress pr;
	char *buf = malloc(CHUNK);
	uint64_t done = 0;
	int ret = 0;

	if (!buf)
		return gs_fail(-1, "out of memory");
	gs_progress_start(&pr, "export", size);
	while (done < size) {
		size_t want = size - done < CHUNK ? (size_t)(size - done) : CHUNK;
		ssize_t n = obj_pread(o, buf, want, done);

		if (n <= 0) {
			ret = gs_fail(-1, "read: %s", n < 0 ? strerror((int)-n) : "short array");
			break;
		}
		ret = write_all(fd, buf, (size_t)n);
		if (ret < 0) {
			gs_fail(-1, "write %s: %s", out, strerror(-ret));
			break;
		}
		done += (uint64_t)n;
		gs_progress_add(&pr, (uint64_t)n);
	}
	gs_progress_end(&pr);
	free(buf);
	return ret;
}

int cmd_export(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "mount", required_argument, NULL, 'm' },
		{ "npy", no_argument, NULL, 'n' },
		{ 0 }
	};
	const char *image = NULL, *mnt = NULL, *name, *out;
	char hdr[NPY_HDR_MAX];
	int c, fd, ret, npy = 0, hlen = 0, status = 1;
	struct target t;
	uint64_t size = 0;
	struct obj o;

	while ((c = getopt_long(argc, argv, "i:m:n", lo, NULL)) != -1) {
		if (parse_target_opt(c, &image, &mnt))
			continue;
		if (c != 'n')
			return gs_usage("export");
		npy = 1;
	}
	if (argc - optind != 3 || strcmp(argv[optind], "array") || (image && mnt))
		return gs_usage("export");
	name = argv[optind + 1];
	out = argv[optind + 2];
	if (!valid_name(name))
		return gs_fail(2, "bad array name '%s'", name);
	if (target_open(&t, image, mnt, 1) < 0)
		return 1;
	ret = obj_open(&t, name, &o, &size);
	if (ret < 0) {
		gs_fail(1, "arrays/%s: %s", name, strerror(-ret));
		goto close_target;
	}
	if (npy && (hlen = npy_header_for(&o, size, hdr, sizeof(hdr))) < 0)
		goto close_obj;
	fd = strcmp(out, "-") ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDOUT_FILENO;
	if (fd < 0) {
		gs_fail(1, "%s: %s", out, strerror(errno));
		goto close_obj;
	}
	ret = hlen ? write_all(fd, hdr, (size_t)hlen) : 0;
	if (ret < 0)
		gs_fail(1, "write %s: %s", out, strerror(-ret));
	else if (copy_out(&o, size, fd, out) == 0)
		status = 0;
	if (fd != STDOUT_FILENO && close(fd) < 0 && !status)
		status = gs_fail(1, "close %s: %s", out, strerror(errno));
close_obj:
	obj_close(&o, 0);
close_target:
	if (target_close(&t) < 0)
		status = 1;
	return status;
}
