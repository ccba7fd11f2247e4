// SPDX-License-Identifier: MIT
/*
 * gstorefs: the files of an N-D space, nd/NAME/ (fs/fuse/fuse_internal.h layer).
 *
 *   info                        text: shape, type, block shape, usage
 *   data, data.npy              the whole space, row-major (writable)
 *   block/<b1>x<b2>.../<x1>,<x2>...[.npy]
 *                               NDS coordinate access: the sub-array of shape
 *                               b at block coordinate x (partial at the edge,
 *                               and where b is larger than the space); block/
 *                               lists the building-block shape, block/<b>/
 *                               every block of b
 *   slice/<a:b[:s]>,<i>,...[.npy]
 *                               any hyperslab; a bare index keeps its
 *                               dimension in the data but not in the .npy
 *                               shape (numpy drops it; all bare: shape ())
 *   as/<shape>/{data,block/...,slice/...}[.npy]
 *                               the same, on a view of another shape with the
 *                               same volume (the row-major sequence reshaped)
 *
 * Every file has a fixed size; writes beyond it fail with EFBIG, a .npy
 * header may only be written with the bytes it already has (a numpy file of
 * the same type and shape), all before anything is written.  Malformed names
 * fail the lookup with EINVAL, out-of-range ones with ERANGE.
 *
 * mkdir nd/NAME makes an unformatted space; setting user.gstore.shape and
 * user.gstore.dtype (and optionally user.gstore.bb first) formats it.
 *
 * Spaces are opened on the first open of one of their files and closed
 * (written back) at the last release; an open space holds a gs_fs_open()
 * reference, so removing it meanwhile is safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_internal.h"
#include "gstore_nd.h"

#define ND_MAXD		GS_ND_MAX_DIMS
#define XA_SHAPE	"user.gstore.shape"
#define XA_DTYPE	"user.gstore.dtype"
#define XA_BB		"user.gstore.bb"
#define NPY_MAX		256

enum kind { K_INFO = 1, K_FILE, K_BLOCKDIR, K_BLOCKSHAPE, K_SLICEDIR, K_ASDIR, K_VIEW };

/* A space's shape and element, from its superblock (gs_nd_stat). */
struct nd_layout {
	uint32_t ndims, dtype, esize;
	uint64_t shape[ND_MAXD], bb[ND_MAXD];
	uint64_t elems;
};

/* A hyperslab of the context: start + k * stride, 0 <= k < count. */
struct nd_slab {
	uint32_t ndims;
	uint64_t start[ND_MAXD], count[ND_MAXD], stride[ND_MAXD];
};

/* vn->priv of every nd node: the context (space or view) and, for files, the selection. */
struct ndv {
	uint32_t vndims;		/* 0: the space itself */
	uint64_t vshape[ND_MAXD];
	uint64_t sub[ND_MAXD];		/* K_BLOCKSHAPE */
	struct nd_slab slab;		/* K_FILE, on the context */
	uint64_t bytes;			/* K_FILE payload */
	uint32_t hdr_len;		/* K_FILE .npy header, 0: none */
	char hdr[NPY_MAX];
};

/* ---- open spaces, shared by all files of a space ---- */

struct open_space {
	struct gs_fs *fs;
	uint64_t ino;
	struct gs_nd *nd;
	unsigned refs;
	struct open_space *next;
};

static pthread_mutex_t spaces_mu = PTHREAD_MUTEX_INITIALIZER;
static struct open_space *spaces;

static int space_get(struct gs_fs *fs, uint64_t ino, struct open_space **osp)
{
	struct open_space *o;
	int ret;

	pthread_mutex_lock(&spaces_mu);
	for (o = spaces; o; o = o->next)
		if (o->fs == fs && o->ino == ino)
			break;
	if (o) {
		o->refs++;
		*osp = o;
		pthread_mutex_unlock(&spaces_mu);
		return 0;
	}
	o = calloc(1, sizeof(*o));
	ret = o ? gs_fs_open(fs, ino, O_RDWR) : -ENOMEM;
	if (ret)
		goto free_o;
	ret = gs_nd_open(fs, ino, &o->nd);
	if (ret)
		goto release;
	o->fs = fs;
	o->ino = ino;
	o->refs = 1;
	o->next = spaces;
	spaces = o;
	*osp = o;
	pthread_mutex_unlock(&spaces_mu);
	return 0;
release:
	gs_fs_release(fs, ino);
free_o:
	free(o);
	pthread_mutex_unlock(&spaces_mu);
	return ret;
}

static int space_put(struct open_space *o)
{
	struct open_space **pp;
	int ret = 0;

	pthread_mutex_lock(&spaces_mu);
	if (--o->refs == 0) {
		for (pp = &spaces; *pp != o; pp = &(*pp)->next)
			;
		*pp = o->next;
		ret = gs_nd_close(o->nd);
		gs_fs_release(o->fs, o->ino);
		free(o);
	}
	pthread_mutex_unlock(&spaces_mu);
	return ret;
}

/* The layout of space @obj from its superblock (no open needed). */
static int space_layout(struct gs_fs *fs, uint64_t obj, struct nd_layout *L)
{
	struct gs_nd_params p;
	int ret = gs_nd_stat(fs, obj, &p);

	if (ret)
		return ret;
	L->ndims = p.ndims;
	L->dtype = p.dtype;
	L->esize = p.elem_size;
	L->elems = 1;
	for (uint32_t i = 0; i < p.ndims; i++) {
		L->shape[i] = p.shape[i];
		L->bb[i] = p.bb[i];
		L->elems *= p.shape[i];		/* checked by gs_nd_stat */
	}
	return 0;
}

/* ---- lookup ---- */

static void ctx_of(const struct gs_vdir *dir, const struct nd_layout *L, struct ndv *v)
{
	const struct ndv *pv = dir->vn ? dir->vn->priv : NULL;

	if (pv && pv->vndims) {
		v->vndims = pv->vndims;
		memcpy(v->vshape, pv->vshape, sizeof(v->vshape));
	} else {
		v->vndims = 0;
		memcpy(v->vshape, L->shape, sizeof(v->vshape));
	}
	if (pv)
		memcpy(v->sub, pv->sub, sizeof(v->sub));
}

static uint32_t ctx_ndims(const struct ndv *v, const struct nd_layout *L)
{
	return v->vndims ? v->vndims : L->ndims;
}

/* Strip ".npy" from @name into @base; returns whether it was there. */
static bool npy_name(const char *name, char *base, size_t size)
{
	size_t n = strlen(name);
	bool npy = n > 4 && !strcmp(name + n - 4, ".npy");

	snprintf(base, size, "%.*s", (int)(npy ? n - 4 : n), name);
	return npy;
}

/* Make @v a file over its slab; the .npy shape leaves out @dropped dims. */
static int make_file(struct gs_vnode *vn, struct ndv *v, const struct nd_layout *L, bool npy,
		     uint32_t dropped)
{
	uint64_t shape[ND_MAXD];
	uint32_t n = 0;
	int len;

	v->bytes = L->esize;
	for (uint32_t i = 0; i < v->slab.ndims; i++) {
		v->bytes *= v->slab.count[i];	/* <= the space's bytes */
		if (!(dropped & (1u << i)))
			shape[n++] = v->slab.count[i];
	}
	if (npy) {
		/* all dimensions dropped (slice/3,4.npy): a 0-d array, numpy's a[3, 4] */
		len = gs_nd_npy_header(v->hdr, sizeof(v->hdr), L->dtype, L->esize, n, shape);
		if (len < 0)
			return len;
		v->hdr_len = len;
	}
	vn->kind = K_FILE;
	vn->mode = S_IFREG | 0644;
	vn->size = v->hdr_len + v->bytes;
	return 0;
}

static int lookup_in(const struct gs_vdir *dir, const struct nd_layout *L, const char *name,
		     struct gs_vnode *vn, struct ndv *v)
{
	uint32_t kind = dir->vn ? dir->vn->kind : 0, n, dropped = 0;
	char base[GS_NAME_MAX + 1];
	bool npy;
	int ret;

	ctx_of(dir, L, v);
	n = ctx_ndims(v, L);
	switch (kind) {
	case 0:
	case K_VIEW:
		if (!strcmp(name, "info") && kind == 0) {
			vn->kind = K_INFO;
			vn->mode = S_IFREG | 0444;
			return 0;
		}
		if (!strcmp(name, "data") || !strcmp(name, "data.npy")) {
			v->slab.ndims = n;
			for (uint32_t i = 0; i < n; i++) {
				v->slab.count[i] = v->vshape[i];
				v->slab.stride[i] = 1;
			}
			return make_file(vn, v, L, name[4] == '.', 0);
		}
		vn->mode = S_IFDIR | 0555;
		if (!strcmp(name, "block"))
			vn->kind = K_BLOCKDIR;
		else if (!strcmp(name, "slice"))
			vn->kind = K_SLICEDIR;
		else if (!strcmp(name, "as") && kind == 0)
			vn->kind = K_ASDIR;
		else
			return -ENOENT;
		return 0;
	case K_ASDIR: {
		uint64_t vol = 1;
		int vn_ = gs_nd_parse_shape(name, v->vshape, ND_MAXD);

		if (vn_ < 0)
			return vn_;
		for (int i = 0; i < vn_; i++)
			if (__builtin_mul_overflow(vol, v->vshape[i], &vol))
				return -EINVAL;
		if (vol != L->elems)
			return -EINVAL;
		v->vndims = vn_;
		vn->kind = K_VIEW;
		vn->mode = S_IFDIR | 0555;
		return 0;
	}
	case K_BLOCKDIR:
		/* any block shape: sides past the space's make partial blocks */
		ret = gs_nd_parse_shape(name, v->sub, ND_MAXD);
		if (ret < 0)
			return ret;
		if ((uint32_t)ret != n)
			return -EINVAL;
		vn->kind = K_BLOCKSHAPE;
		vn->mode = S_IFDIR | 0555;
		return 0;
	case K_BLOCKSHAPE: {
		uint64_t c[ND_MAXD];

		npy = npy_name(name, base, sizeof(base));
		ret = gs_nd_parse_coords(base, n, c);
		if (!ret)
			ret = gs_nd_block_slab(n, v->vshape, v->sub, c, v->slab.start,
					       v->slab.count);
		if (ret)
			return ret;
		v->slab.ndims = n;
		for (uint32_t i = 0; i < n; i++)
			v->slab.stride[i] = 1;
		return make_file(vn, v, L, npy, 0);
	}
	case K_SLICEDIR:
		npy = npy_name(name, base, sizeof(base));
		ret = gs_nd_parse_slice(base, n, v->vshape, v->slab.start, v->slab.count,
					v->slab.stride, &dropped);
		v->slab.ndims = n;
		return ret ? ret : make_file(vn, v, L, npy, dropped);
	}
	return -ENOENT;
}

static int nd_lookup(struct gs_fuse *gf, const struct gs_vdir *dir, const char *name,
		     struct gs_vnode *vn)
{
	struct nd_layout L;
	struct ndv *v;
	int ret;

	ret = space_layout(gs_fuse_fs(gf), dir->obj, &L);
	if (ret)
		return ret == -ENODATA ? -ENOENT : ret;	/* not formatted: empty */
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	ret = lookup_in(dir, &L, name, vn, v);
	if (ret) {
		free(v);
		return ret;
	}
	vn->priv = v;
	return 0;
}

static void nd_forget(struct gs_fuse *gf, struct gs_vnode *vn)
{
	free(vn->priv);
	vn->priv = NULL;
}

/*
 * block/<shape>/ lists every block of that shape (entry 2k: block k in
 * row-major order, 2k + 1: its .npy), so what find and ls -R see is
 * exactly what opens; the edge blocks among them are partial.
 */
static int list_blocks(const struct ndv *dv, const struct nd_layout *L, uint64_t off,
		       gs_vfill fill, void *arg)
{
	struct ndv v;
	uint64_t nb[ND_MAXD], total = 1;
	uint32_t n;
	char name[ND_MAXD * 21 + 8];

	memset(&v, 0, sizeof(v));
	v.vndims = dv->vndims;
	memcpy(v.vshape, dv->vndims ? dv->vshape : L->shape, sizeof(v.vshape));
	n = ctx_ndims(&v, L);
	for (uint32_t i = 0; i < n; i++) {
		nb[i] = (v.vshape[i] + dv->sub[i] - 1) / dv->sub[i];
		total *= nb[i];		/* <= the context's elements */
	}
	for (uint64_t e = off; e < 2 * total; e++) {
		uint64_t id = e / 2, c[ND_MAXD];
		int k = 0;

		for (uint32_t i = n; i-- > 0;) {
			c[i] = id % nb[i];
			id /= nb[i];
		}
		for (uint32_t i = 0; i < n; i++)
			k += snprintf(name + k, sizeof(name) - k, "%s%" PRIu64, i ? "," : "", c[i]);
		if (e & 1)
			snprintf(name + k, sizeof(name) - k, ".npy");
		if (fill(arg, name, S_IFREG | 0644, e + 1))
			break;
	}
	return 0;
}

static int nd_readdir(struct gs_fuse *gf, const struct gs_vdir *dir, uint64_t off, gs_vfill fill,
		      void *arg)
{
	static const struct { const char *name; uint32_t mode; } top[] = {
		{ "info", S_IFREG | 0444 }, { "data", S_IFREG | 0644 },
		{ "data.npy", S_IFREG | 0644 }, { "block", S_IFDIR | 0555 },
		{ "slice", S_IFDIR | 0555 }, { "as", S_IFDIR | 0555 },
	};
	uint32_t kind = dir->vn ? dir->vn->kind : 0;
	struct nd_layout L;
	size_t first = 0, n = 0;

	if (space_layout(gs_fuse_fs(gf), dir->obj, &L))
		return 0;	/* unformatted: nothing yet */
	if (kind == 0) {
		n = 6;
	} else if (kind == K_VIEW) {
		first = 1;	/* data, data.npy, block, slice */
		n = 5;
	} else if (kind == K_BLOCKDIR && off == 0) {
		const struct ndv *v = dir->vn->priv;
		char name[8 * 21 + 8];
		int k = 0;

		/* the building-block shape, as a hint (any shape can be looked up) */
		for (uint32_t i = 0; i < L.ndims && !v->vndims; i++)
			k += snprintf(name + k, sizeof(name) - k, "%s%" PRIu64, i ? "x" : "",
				      L.bb[i]);
		if (k)
			fill(arg, name, S_IFDIR | 0555, 1);
		return 0;
	} else if (kind == K_BLOCKSHAPE) {
		return list_blocks(dir->vn->priv, &L, off, fill, arg);
	}
	for (size_t i = first + off; i < n; i++)
		if (fill(arg, top[i].name, top[i].mode, i - first + 1))
			break;
	return 0;
}

/* ---- files ---- */

struct info_ctx {
	struct gs_nd *nd;
};

static int shape_text(char *buf, size_t size, uint32_t n, const uint64_t *v)
{
	int k = 0;

	for (uint32_t i = 0; i < n; i++)
		k += snprintf(buf + k, size > (size_t)k ? size - k : 0, "%s%" PRIu64,
			      i ? "x" : "", v[i]);
	return k;
}

static int gen_info(void *arg, char *buf, size_t size)
{
	struct info_ctx *c = arg;
	struct gs_nd_info in;
	char s[200], b[200], nb[200];

	gs_nd_get_info(c->nd, &in);
	shape_text(s, sizeof(s), in.p.ndims, in.p.shape);
	shape_text(b, sizeof(b), in.p.ndims, in.p.bb);
	shape_text(nb, sizeof(nb), in.p.ndims, in.nblocks);
	return snprintf(buf, size,
			"shape %s\ndtype %s\nelem_size %u\nbytes %" PRIu64 "\n"
			"block_shape %s\nblock_bytes %" PRIu64 "\nblock_stride %" PRIu64 "\n"
			"blocks %s\nblocks_total %" PRIu64 "\nblocks_written %" PRIu64 "\n"
			"index_bytes %" PRIu64 "\n",
			s, gs_nd_dtype_name(in.p.dtype), in.p.elem_size, in.bytes, b,
			in.block_bytes, in.block_stride, nb, in.blocks_total, in.blocks_written,
			in.index_bytes);
}

static int nd_open(struct gs_fuse *gf, struct gs_vfile *f)
{
	struct open_space *o;
	int ret;

	if (f->vn->kind != K_INFO && f->vn->kind != K_FILE)
		return -EISDIR;
	ret = space_get(gs_fuse_fs(gf), f->vn->obj, &o);
	if (ret)
		return ret;
	if (f->vn->kind == K_INFO) {
		struct info_ctx c = { o->nd };

		ret = gs_vfile_text(f, gen_info, &c);
		space_put(o);
		return ret;
	}
	f->priv = o;
	f->page_cache = 1;	/* mmappable (np.memmap of data); see fuse_internal.h */
	return 0;
}

static void sel_of(const struct ndv *v, struct gs_nd_sel *sel)
{
	sel->ndims = v->vndims;
	sel->shape = v->vshape;
	sel->start = v->slab.start;
	sel->count = v->slab.count;
	sel->stride = v->slab.stride;
}

static ssize_t nd_read(struct gs_fuse *gf, struct gs_vfile *f, char *buf, size_t size,
		       uint64_t off)
{
	const struct ndv *v = f->vn->priv;
	struct open_space *o = f->priv;
	struct gs_nd_sel sel;
	size_t h = 0;
	ssize_t r;

	if (f->vn->kind == K_INFO) {	/* text made at open */
		h = off < f->len ? f->len - off : 0;
		h = h < size ? h : size;
		memcpy(buf, f->buf + off, h);
		return h;
	}
	if (off < v->hdr_len) {
		h = v->hdr_len - off < size ? v->hdr_len - off : size;
		memcpy(buf, v->hdr + off, h);
		if (h == size)
			return h;
	}
	sel_of(v, &sel);
	r = gs_nd_pread_sel(o->nd, &sel, buf + h, size - h, off + h - v->hdr_len);
	return r < 0 ? r : (ssize_t)h + r;
}

static ssize_t nd_write(struct gs_fuse *gf, struct gs_vfile *f, const char *buf, size_t size,
			uint64_t off)
{
	const struct ndv *v = f->vn->priv;
	struct open_space *o = f->priv;
	struct gs_nd_sel sel;
	size_t h = 0;
	ssize_t r;

	if (off > f->vn->size || size > f->vn->size - off)
		return -EFBIG;
	if (off < v->hdr_len) {
		/* a header may be rewritten, not changed: same type, same shape */
		h = v->hdr_len - off < size ? v->hdr_len - off : size;
		if (memcmp(buf, v->hdr + off, h))
			return -EINVAL;
		if (h == size)
			return h;
	}
	sel_of(v, &sel);
	r = gs_nd_pwrite_sel(o->nd, &sel, buf + h, size - h, off + h - v->hdr_len);
	return r < 0 ? r : (ssize_t)h + r;
}

static int nd_release(struct gs_fuse *gf, struct gs_vfile *f)
{
	return f->priv ? space_put(f->priv) : 0;
}

static int nd_fsync(struct gs_fuse *gf, struct gs_vfile *f, int datasync)
{
	struct open_space *o = f->priv;

	return o ? gs_nd_sync(o->nd) : 0;
}

/* ---- nd/NAME's xattrs: formatting by setxattr ---- */

static int xa_get(struct gs_fs *fs, uint64_t obj, const char *name, char *buf, size_t size)
{
	int n = gs_fs_getxattr(fs, obj, name, buf, size - 1);

	if (n >= 0)
		buf[n] = 0;
	return n;
}

/* Format @obj once shape and type are both there (and the optional bb). */
static int try_format(struct gs_fs *fs, uint64_t obj)
{
	struct gs_nd_params p = { 0 };
	uint64_t bb[ND_MAXD];
	char s[256];
	int ret, n;

	if (xa_get(fs, obj, XA_SHAPE, s, sizeof(s)) < 0)
		return 0;
	n = gs_nd_parse_shape(s, p.shape, ND_MAXD);
	if (n < 0)
		return n;
	p.ndims = n;
	if (xa_get(fs, obj, XA_DTYPE, s, sizeof(s)) < 0)
		return 0;
	ret = gs_nd_parse_dtype(s, &p.dtype, &p.elem_size);
	if (ret)
		return ret;
	if (xa_get(fs, obj, XA_BB, s, sizeof(s)) >= 0) {
		if (gs_nd_parse_shape(s, bb, ND_MAXD) != n)
			return -EINVAL;
		memcpy(p.bb, bb, n * sizeof(bb[0]));
	}
	return gs_nd_format(fs, obj, &p);
}

static int nd_obj_setxattr(struct gs_fuse *gf, uint64_t obj, const char *name, const void *val,
			   size_t size, int flags)
{
	struct gs_fs *fs = gs_fuse_fs(gf);
	uint64_t shape[ND_MAXD];
	struct nd_layout L;
	uint32_t t, es;
	char s[256];
	int ret;

	if (strcmp(name, XA_SHAPE) && strcmp(name, XA_DTYPE) && strcmp(name, XA_BB))
		return -ENOSYS;
	if (size >= sizeof(s))
		return -EINVAL;
	memcpy(s, val, size);
	s[size] = 0;
	if (size && s[size - 1] == '\n')	/* echo without -n */
		s[size - 1] = 0;
	if (!strcmp(name, XA_DTYPE) ? gs_nd_parse_dtype(s, &t, &es) < 0
				    : gs_nd_parse_shape(s, shape, ND_MAXD) < 0)
		return -EINVAL;
	if (space_layout(fs, obj, &L) == 0)
		return -EBUSY;	/* formatted: shape, type and blocks are fixed */
	ret = gs_fs_setxattr(fs, obj, name, s, strlen(s), flags);
	if (ret)
		return ret;
	ret = try_format(fs, obj);
	if (ret)
		gs_fs_removexattr(fs, obj, name);	/* nothing changes on failure */
	return ret;
}

static void nd_destroy(struct gs_fuse *gf)
{
	struct gs_fs *fs = gs_fuse_fs(gf);
	struct open_space **pp;

	/* the kernel released everything before unmount; this is the safety net */
	pthread_mutex_lock(&spaces_mu);
	for (pp = &spaces; *pp;) {
		struct open_space *o = *pp;

		if (o->fs != fs) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		gs_nd_close(o->nd);
		gs_fs_release(o->fs, o->ino);
		free(o);
	}
	pthread_mutex_unlock(&spaces_mu);
}

const struct gs_vops gs_fuse_nd_ops = {
	.name = "nd",
	.lookup = nd_lookup,
	.readdir = nd_readdir,
	.open = nd_open,
	.read = nd_read,
	.write = nd_write,
	.release = nd_release,
	.fsync = nd_fsync,
	.forget = nd_forget,
	.obj_setxattr = nd_obj_setxattr,
	.destroy = nd_destroy,
};
