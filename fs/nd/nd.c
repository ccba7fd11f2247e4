// SPDX-License-Identifier: MIT
/*
 * N-D spaces: the public API (include/gstore_nd.h).
 *
 * A space is a GS_T_ND object: its own data holds the superblock and the
 * index, an internal object holds the building blocks (nd_store.c).  One
 * struct gs_nd per space per process: it owns the space's block cache.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_q.h"
#include "nd_internal.h"

/* ---- spaces over any store ---- */

int nd_space_format(struct nd_store *st, const struct gs_nd_params *p, uint64_t data_ino)
{
	struct gs_nd_disk_super d;
	struct gs_nd nd = { .st = st, .index_end = GS_ND_SB_SIZE, .data_ino = data_ino };
	ssize_t r;
	int ret;

	ret = nd_layout_init(&nd.L, p);
	if (ret)
		return ret;
	nd_store_set_stride(st, nd.L.block_bytes);
	nd_sb_encode(&nd, &d);
	r = st->ops->meta_write(st, &d, sizeof(d), 0);
	if (r < 0)
		return r;
	if (r != sizeof(d))
		return -EIO;
	return st->ops->sync(st);
}

static int read_super(struct nd_store *st, struct gs_nd_disk_super *d)
{
	ssize_t r = st->ops->meta_read(st, d, sizeof(*d), 0);

	if (r < 0)
		return r;
	if (r < (ssize_t)sizeof(*d))
		return -ENODATA;	/* never formatted */
	return 0;
}

int nd_space_open(struct nd_store *st, size_t cache_bytes, struct gs_nd **ndp)
{
	struct gs_nd_disk_super d;
	struct gs_nd_params p;
	struct gs_nd *nd;
	struct nd_sbx x;
	int ret;

	ret = read_super(st, &d);
	if (ret)
		return ret;
	nd = calloc(1, sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	ret = nd_sb_decode(&d, &p, &x);
	if (ret)
		goto free_nd;
	ret = nd_layout_init(&nd->L, &p);
	if (ret || x.stride < nd->L.block_bytes || x.stride % st->align) {
		ret = -EIO;
		goto free_nd;
	}
	nd->root = x.root;
	nd->index_end = x.index_end;
	nd->nslots = x.nslots;
	nd->data_ino = x.data_ino;
	/* blocks stay where and how they were laid out, whatever the mount says now */
	st->stride = x.stride;
	st->slot_bytes = x.slot_bytes;
	nd->st = st;
	ret = nd_cache_init(nd, cache_bytes ? cache_bytes : ND_CACHE_BYTES);
	if (ret)
		goto free_nd;
	pthread_mutex_init(&nd->imu, NULL);
	pthread_mutex_init(&nd->rmu, NULL);
	pthread_mutex_init(&nd->amu, NULL);
	pthread_cond_init(&nd->acv, NULL);
	*ndp = nd;
	return 0;
free_nd:
	free(nd);
	return ret;
}

/* ---- spaces on a gstore filesystem ---- */

int gs_nd_format(struct gs_fs *fs, uint64_t ino, const struct gs_nd_params *in)
{
	struct gs_nd_params p = *in;
	struct gs_nd_disk_super d;
	struct nd_layout L;
	struct gs_q_geom g;
	struct nd_store *st;
	struct gs_stat sst;
	uint64_t data_ino;
	int ret;

	ret = gs_fs_getattr(fs, ino, &sst);
	if (ret)
		return ret;
	if (sst.type != GS_T_ND)
		return -EINVAL;
	ret = gs_fs_read(fs, ino, &d, sizeof(d), 0);
	if (ret < 0)
		return ret;
	if (ret >= 4 && d.magic)
		return -EEXIST;
	ret = gs_fs_geometry(fs, &g);
	if (ret)
		return ret;
	ret = gs_nd_block_shape(&p, &g, p.bb);
	if (ret)
		return ret;
	if (p.dtype != GS_ND_RAW)
		p.elem_size = gs_nd_dtype_size(p.dtype);
	ret = nd_layout_init(&L, &p);
	if (ret)
		return ret;
	ret = gs_fs_create_internal(fs, ino, &data_ino);
	if (ret)
		return ret;
	ret = nd_store_fs(&st, fs, ino, data_ino);
	if (ret)
		return ret;
	ret = nd_space_format(st, &p, data_ino);
	st->ops->close(st);
	if (ret)
		return ret;
	/* mirror the parameters in xattrs for getfattr/listxattr (canonical names) */
	{
		static const char *const xa[3] = { "user.gstore.shape", "user.gstore.dtype",
						   "user.gstore.bb" };
		char v[3][8 * 21 + 16];
		int k[3] = { 0, 0, 0 };

		for (uint32_t i = 0; i < p.ndims; i++) {
			k[0] += snprintf(v[0] + k[0], sizeof(v[0]) - k[0], "%s%llu", i ? "x" : "",
					 (unsigned long long)p.shape[i]);
			k[2] += snprintf(v[2] + k[2], sizeof(v[2]) - k[2], "%s%llu", i ? "x" : "",
					 (unsigned long long)p.bb[i]);
		}
		if (p.dtype == GS_ND_RAW)
			k[1] = snprintf(v[1], sizeof(v[1]), "raw%u", p.elem_size);
		else
			k[1] = snprintf(v[1], sizeof(v[1]), "%s", gs_nd_dtype_name(p.dtype));
		for (int i = 0; i < 3 && !ret; i++)
			ret = gs_fs_setxattr(fs, ino, xa[i], v[i], k[i], 0);
	}
	return ret;
}

int nd_fs_super(struct gs_fs *fs, uint64_t ino, struct gs_nd_params *p, struct nd_sbx *x)
{
	struct gs_nd_disk_super d;
	ssize_t r;

	r = gs_fs_read(fs, ino, &d, sizeof(d), 0);
	if (r < 0)
		return r;
	if (r < (ssize_t)sizeof(d))
		return -ENODATA;	/* not formatted */
	return nd_sb_decode(&d, p, x);
}

int gs_nd_stat(struct gs_fs *fs, uint64_t ino, struct gs_nd_params *p)
{
	struct nd_layout L;
	struct nd_sbx x;
	int ret = nd_fs_super(fs, ino, p, &x);

	if (ret)
		return ret;
	/* what the caller computes with must be what an open would accept */
	if (nd_layout_init(&L, p))
		return -EIO;
	p->elem_size = L.esize;
	return 0;
}

/* A space's block cache gets the mount's cache budget (-o cache=), at least ND_MIN_CACHE. */
static size_t nd_cache_budget(struct gs_fs *fs)
{
	struct gs_fs_statfs sf;
	uint64_t b = 0;

	if (!gs_fs_statfs(fs, &sf))
		b = sf.cache_bytes;
	return b < ND_MIN_CACHE ? ND_MIN_CACHE : (size_t)b;
}

int gs_nd_open(struct gs_fs *fs, uint64_t ino, struct gs_nd **ndp)
{
	struct gs_nd_params p;
	struct nd_store *st;
	struct nd_sbx x;
	int ret;

	ret = nd_fs_super(fs, ino, &p, &x);
	if (ret)
		return ret;
	ret = nd_store_fs(&st, fs, ino, x.data_ino);
	if (ret)
		return ret;
	ret = nd_space_open(st, nd_cache_budget(fs), ndp);
	if (ret) {
		st->ops->close(st);
		return ret;
	}
	(*ndp)->fs = fs;
	(*ndp)->ino = ino;
	return 0;
}

static int nd_dir(struct gs_fs *fs, uint64_t *dir)
{
	struct gs_stat st;
	int ret = gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st);

	if (ret)
		return ret;
	if (st.type != GS_T_DIR)
		return -ENOTDIR;
	*dir = st.ino;
	return 0;
}

int gs_nd_lookup(struct gs_fs *fs, const char *name, uint64_t *ino)
{
	struct gs_stat st;
	uint64_t dir;
	int ret;

	ret = nd_dir(fs, &dir);
	if (!ret)
		ret = gs_fs_lookup(fs, dir, name, &st);
	if (ret)
		return ret;
	if (st.type != GS_T_ND)
		return -ENOTDIR;
	*ino = st.ino;
	return 0;
}

int gs_nd_create(struct gs_fs *fs, uint64_t parent, const char *name,
		 const struct gs_nd_params *p, uint32_t mode, struct gs_nd **ndp)
{
	struct gs_stat st;
	int ret;

	if (!parent) {
		ret = nd_dir(fs, &parent);
		if (ret)
			return ret;
	}
	ret = gs_fs_create(fs, parent, name, GS_T_ND, S_IFDIR | (mode & 07777), getuid(),
			   getgid(), &st);
	if (ret)
		return ret;
	ret = gs_nd_format(fs, st.ino, p);
	if (!ret && ndp)
		ret = gs_nd_open(fs, st.ino, ndp);
	if (ret && gs_fs_rmdir(fs, parent, name))
		gs_fs_unlink(fs, parent, name);
	return ret;
}

static void aio_stop(struct gs_nd *nd);

int gs_nd_sync(struct gs_nd *nd)
{
	int ret, err;

	ret = nd_cache_writeback(nd);
	if (!ret)
		ret = nd_index_flush(nd);
	if (!ret)
		ret = nd_sb_write_if_dirty(nd);
	if (!ret)
		ret = nd->st->ops->sync(nd->st);
	/* report an earlier failed write-back once, like fsync */
	pthread_mutex_lock(&nd->c.mu);
	err = nd->wb_err;
	nd->wb_err = 0;
	pthread_mutex_unlock(&nd->c.mu);
	return ret ? ret : err;
}

int gs_nd_close(struct gs_nd *nd)
{
	int ret;

	if (!nd)
		return 0;
	aio_stop(nd);
	ret = gs_nd_sync(nd);
	nd_cache_fini(nd);
	nd_index_fini(nd);
	nd->st->ops->close(nd->st);
	pthread_mutex_destroy(&nd->imu);
	pthread_mutex_destroy(&nd->rmu);
	pthread_mutex_destroy(&nd->amu);
	pthread_cond_destroy(&nd->acv);
	free(nd);
	return ret;
}

int gs_nd_get_info(struct gs_nd *nd, struct gs_nd_info *in)
{
	const struct nd_layout *L = &nd->L;

	memset(in, 0, sizeof(*in));
	in->p.dtype = L->dtype;
	in->p.elem_size = L->esize;
	in->p.ndims = L->ndims;
	for (uint32_t i = 0; i < L->ndims; i++) {
		in->p.shape[i] = L->shape[i];
		in->p.bb[i] = L->bb[i];
		in->nblocks[i] = L->nb[i];
	}
	in->elems = L->elems;
	in->bytes = L->bytes;
	in->block_bytes = L->block_bytes;
	in->block_stride = nd->st->stride;
	in->blocks_total = L->nblocks;
	pthread_mutex_lock(&nd->imu);
	in->blocks_written = nd->nslots;
	in->index_bytes = nd->index_end;
	pthread_mutex_unlock(&nd->imu);
	return 0;
}

void gs_nd_drop_cache(struct gs_nd *nd)
{
	nd_cache_drop(nd);
}

/* ---- access ---- */

static ssize_t rw_block(struct gs_nd *nd, int op, const uint64_t *coord, const uint64_t *subdim,
			void *buf, size_t len)
{
	struct nd_xsel x;
	int ret;

	if (!coord)
		return -EINVAL;
	memset(&x, 0, sizeof(x));
	ret = nd_block_slab(nd->L.ndims, nd->L.shape, subdim ? subdim : nd->L.bb, coord, &x.s);
	if (ret)
		return ret;
	x.elems = 1;
	for (uint32_t i = 0; i < x.s.ndims; i++)
		x.elems *= x.s.count[i];	/* <= the space's elems: no overflow */
	x.bytes = x.elems * nd->L.esize;
	if (len < x.bytes)
		return -EINVAL;
	return nd_rw_sel(nd, op, &x, buf, x.bytes, 0);
}

ssize_t gs_nd_read(struct gs_nd *nd, const uint64_t *coord, const uint64_t *subdim, void *buf,
		   size_t len)
{
	return rw_block(nd, GS_ND_OP_READ, coord, subdim, buf, len);
}

ssize_t gs_nd_write(struct gs_nd *nd, const uint64_t *coord, const uint64_t *subdim,
		    const void *buf, size_t len)
{
	return rw_block(nd, GS_ND_OP_WRITE, coord, subdim, (void *)buf, len);
}

ssize_t gs_nd_sel_bytes(struct gs_nd *nd, const struct gs_nd_sel *sel)
{
	struct nd_xsel x;
	int ret = nd_sel_prep(&nd->L, sel, &x);

	return ret ? ret : (ssize_t)x.bytes;
}

static ssize_t rw_sel(struct gs_nd *nd, int op, const struct gs_nd_sel *sel, void *buf,
		      size_t len)
{
	struct nd_xsel x;
	int ret = nd_sel_prep(&nd->L, sel, &x);

	if (ret)
		return ret;
	if (len < x.bytes)
		return -EINVAL;
	return nd_rw_sel(nd, op, &x, buf, x.bytes, 0);
}

ssize_t gs_nd_read_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, void *buf, size_t len)
{
	return rw_sel(nd, GS_ND_OP_READ, sel, buf, len);
}

ssize_t gs_nd_write_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, const void *buf,
			size_t len)
{
	return rw_sel(nd, GS_ND_OP_WRITE, sel, (void *)buf, len);
}

ssize_t gs_nd_read_slab(struct gs_nd *nd, const uint64_t *start, const uint64_t *count,
			const uint64_t *stride, void *buf, size_t len)
{
	struct gs_nd_sel sel = { .start = start, .count = count, .stride = stride };

	return rw_sel(nd, GS_ND_OP_READ, &sel, buf, len);
}

ssize_t gs_nd_write_slab(struct gs_nd *nd, const uint64_t *start, const uint64_t *count,
			 const uint64_t *stride, const void *buf, size_t len)
{
	struct gs_nd_sel sel = { .start = start, .count = count, .stride = stride };

	return rw_sel(nd, GS_ND_OP_WRITE, &sel, (void *)buf, len);
}

static ssize_t prw_sel(struct gs_nd *nd, int op, const struct gs_nd_sel *sel, void *buf,
		       size_t len, uint64_t off)
{
	struct nd_xsel x;
	int ret;

	if (sel)
		ret = nd_sel_prep(&nd->L, sel, &x);
	else
		nd_sel_whole(&nd->L, &x), ret = 0;
	if (ret)
		return ret;
	return nd_rw_sel(nd, op, &x, buf, len, off);
}

ssize_t gs_nd_pread_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, void *buf, size_t len,
			uint64_t off)
{
	return prw_sel(nd, GS_ND_OP_READ, sel, buf, len, off);
}

ssize_t gs_nd_pwrite_sel(struct gs_nd *nd, const struct gs_nd_sel *sel, const void *buf,
			 size_t len, uint64_t off)
{
	return prw_sel(nd, GS_ND_OP_WRITE, sel, (void *)buf, len, off);
}

/* ---- asynchronous requests: a small worker pool per space ---- */

enum { AIO_QUEUED = 1, AIO_DONE = 2 };

static void *aio_worker(void *arg)
{
	struct gs_nd *nd = arg;

	pthread_mutex_lock(&nd->amu);
	for (;;) {
		struct gs_nd_aio *a = nd->aq_head;
		gs_nd_aio_cb cb;
		ssize_t res;

		if (!a) {
			if (nd->stopping)
				break;
			pthread_cond_wait(&nd->acv, &nd->amu);
			continue;
		}
		nd->aq_head = a->next_;
		if (!nd->aq_head)
			nd->aq_tail = NULL;
		pthread_mutex_unlock(&nd->amu);
		res = rw_sel(nd, a->op, &a->sel, a->buf, a->len);
		cb = a->done;
		if (cb) {
			/* the callback owns @a from here (it may free it) */
			cb(a, res);
			pthread_mutex_lock(&nd->amu);
			continue;
		}
		pthread_mutex_lock(&nd->amu);
		a->res_ = res;
		a->state_ = AIO_DONE;
		pthread_cond_broadcast(&nd->acv);
	}
	pthread_mutex_unlock(&nd->amu);
	return NULL;
}

int gs_nd_aio_submit(struct gs_nd *nd, struct gs_nd_aio *a)
{
	int ret = 0;

	if (a->op != GS_ND_OP_READ && a->op != GS_ND_OP_WRITE)
		return -EINVAL;
	pthread_mutex_lock(&nd->amu);
	while (nd->nworkers < 2 && !ret) {
		ret = -pthread_create(&nd->workers[nd->nworkers], NULL, aio_worker, nd);
		if (!ret)
			nd->nworkers++;
	}
	if (nd->nworkers)
		ret = 0;
	if (!ret) {
		a->state_ = AIO_QUEUED;
		a->res_ = 0;
		a->next_ = NULL;
		if (nd->aq_tail)
			nd->aq_tail->next_ = a;
		else
			nd->aq_head = a;
		nd->aq_tail = a;
		pthread_cond_broadcast(&nd->acv);
	}
	pthread_mutex_unlock(&nd->amu);
	return ret;
}

ssize_t gs_nd_aio_wait(struct gs_nd *nd, struct gs_nd_aio *a)
{
	ssize_t res;

	pthread_mutex_lock(&nd->amu);
	while (a->state_ != AIO_DONE)
		pthread_cond_wait(&nd->acv, &nd->amu);
	res = a->res_;
	pthread_mutex_unlock(&nd->amu);
	return res;
}

/* Let the workers finish the queue, then join them. */
static void aio_stop(struct gs_nd *nd)
{
	pthread_mutex_lock(&nd->amu);
	nd->stopping = true;
	pthread_cond_broadcast(&nd->acv);
	pthread_mutex_unlock(&nd->amu);
	for (unsigned i = 0; i < nd->nworkers; i++)
		pthread_join(nd->workers[i], NULL);
	nd->nworkers = 0;
}
