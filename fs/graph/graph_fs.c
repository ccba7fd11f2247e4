// SPDX-License-Identifier: MIT
/*
 * Graphs on a mounted gs_fs: the page store over the GS_T_GRAPH object's
 * hidden internal objects, names under graph/, and publishing an import.
 *
 * An import builds into a fresh GS_T_GRAPH object named ".NAME~import" and
 * renames it over NAME when complete, so NAME is either the old graph or
 * the whole new one; a crash mid-import leaves only the temp name, which
 * the next import of NAME removes.  A rebuild in place (graph/NAME/edges
 * through the mount) builds new internal objects under the same object and
 * switches to them with one root commit, then drops the old ones (a crash
 * in between leaks them to the graph until it is removed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "graph_internal.h"

#define TMP_SUFFIX	"~import"

/*
 * Page reads go through the block cache by (object, offset), so a page read
 * twice is a cache hit (GS_FS_READ_CACHED: a page-sized aligned read would
 * otherwise go around the cache); hints start the cache's read-ahead of the
 * pages' blocks (gs_fs_readahead).  The fs core maps the offsets.
 */
struct fs_store {
	struct gr_store s;
	struct gs_fs *fs;
};

static struct fs_store *fsst(struct gr_store *s)
{
	return (struct fs_store *)s;
}

static struct gs_fs *fsof(struct gr_store *s)
{
	return fsst(s)->fs;
}

static int fss_create(struct gr_store *s, uint64_t *obj)
{
	return gs_fs_create_internal(fsof(s), s->root, obj);
}

static int fss_create_meta(struct gr_store *s, uint64_t *obj)
{
	return gs_fs_create_internal_meta(fsof(s), s->root, obj);
}

static int fss_remove(struct gr_store *s, uint64_t obj)
{
	return gs_fs_unlink_internal(fsof(s), obj);
}

static ssize_t fss_pread(struct gr_store *s, uint64_t obj, void *buf, size_t len, uint64_t off)
{
	return gs_fs_pread(fsof(s), obj, buf, len, off, GS_FS_READ_CACHED);
}

static void fss_prefetch(struct gr_store *s, uint64_t obj, uint64_t off, uint64_t len)
{
	gs_fs_readahead(fsof(s), obj, off, len);
}

static ssize_t fss_pwrite(struct gr_store *s, uint64_t obj, const void *buf, size_t len,
			  uint64_t off)
{
	return gs_fs_write(fsof(s), obj, buf, len, off);
}

static int fss_sync(struct gr_store *s, uint64_t obj)
{
	return gs_fs_fsync(fsof(s), obj, 0);
}

static int fss_size(struct gr_store *s, uint64_t obj, uint64_t *bytes)
{
	struct gs_stat st;
	int ret = gs_fs_getattr(fsof(s), obj, &st);

	if (!ret)
		*bytes = st.blocks * 512;
	return ret;
}

static void fss_destroy(struct gr_store *s)
{
	free(fsst(s));
}

static const struct gr_store_ops fs_store_ops = {
	.create = fss_create,
	.create_meta = fss_create_meta,
	.remove = fss_remove,
	.pread = fss_pread,
	.pwrite = fss_pwrite,
	.sync = fss_sync,
	.size = fss_size,
	.prefetch = fss_prefetch,
	.destroy = fss_destroy,
};

int gr_fs_store_new(struct gr_store **sp, struct gs_fs *fs, uint64_t ino)
{
	struct gs_fs_statfs sf;
	struct fs_store *f;
	int ret;

	ret = gs_fs_statfs(fs, &sf);
	if (ret)
		return ret;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->s.ops = &fs_store_ops;
	f->s.root = ino;
	f->s.page_size = sf.block_size;
	f->fs = fs;
	*sp = &f->s;
	return 0;
}

/* ---- names ---- */

int gr_graph_dir(struct gs_fs *fs, uint64_t *dir)
{
	struct gs_stat st;
	int ret = gs_fs_lookup(fs, GS_ROOT_INO, "graph", &st);

	if (ret)
		return ret;
	if (st.type != GS_T_DIR)
		return -ENOTDIR;
	*dir = st.ino;
	return 0;
}

static int check_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || name[0] == '.' || strchr(name, '/'))
		return -EINVAL;
	return n + sizeof(TMP_SUFFIX) + 1 > GS_NAME_MAX ? -ENAMETOOLONG : 0;
}

int gs_graph_open_ino(struct gs_fs *fs, uint64_t ino, unsigned flags, struct gs_graph **gp)
{
	struct gr_store *st;
	struct gs_stat s;
	int ret;

	ret = gs_fs_getattr(fs, ino, &s);
	if (ret)
		return ret;
	if (s.type != GS_T_GRAPH)
		return -EINVAL;
	/* an open reference: a rename over the graph does not free it under us */
	ret = gs_fs_open(fs, ino, flags & GS_GRAPH_RDONLY ? O_RDONLY : O_RDWR);
	if (ret)
		return ret;
	ret = gr_fs_store_new(&st, fs, ino);
	if (!ret)
		ret = gr_graph_open_store(st, fs, ino, flags, gp);
	if (ret) {
		gs_fs_release(fs, ino);
		return ret;
	}
	(*gp)->fs_ref = true;
	return 0;
}

int gs_graph_open(struct gs_fs *fs, const char *name, unsigned flags, struct gs_graph **gp)
{
	struct gs_stat st;
	uint64_t dir;
	int ret;

	ret = gr_graph_dir(fs, &dir);
	if (!ret)
		ret = gs_fs_lookup(fs, dir, name, &st);
	if (ret)
		return ret;
	if (st.type != GS_T_GRAPH)
		return -EINVAL;
	return gs_graph_open_ino(fs, st.ino, flags, gp);
}

int gs_graph_import_fd(struct gs_fs *fs, const char *name, int fd,
		       const struct gs_graph_import_opts *o)
{
	struct gs_stat st, old;
	char tmp[GS_NAME_MAX + 1];
	struct gr_store *gst;
	uint32_t mode = 0755, uid = getuid(), gid = getgid();
	uint64_t dir;
	int ret;

	ret = check_name(name);
	if (!ret)
		ret = gr_graph_dir(fs, &dir);
	if (ret)
		return ret;
	ret = gs_fs_lookup(fs, dir, name, &old);
	if (!ret) {
		if (!(o->flags & GS_GRAPH_IMPORT_REPLACE))
			return -EEXIST;
		if (old.type != GS_T_GRAPH)
			return old.type == GS_T_DIR ? -EISDIR : -EINVAL;
		/* the new graph keeps the old one's owner and permissions */
		mode = old.mode & 07777;
		uid = old.uid;
		gid = old.gid;
	} else if (ret != -ENOENT) {
		return ret;
	}
	snprintf(tmp, sizeof(tmp), ".%s" TMP_SUFFIX, name);
	ret = gs_fs_unlink(fs, dir, tmp);	/* left by a crashed import */
	if (ret && ret != -ENOENT)
		return ret;
	ret = gs_fs_create(fs, dir, tmp, GS_T_GRAPH, mode, uid, gid, &st);
	if (ret)
		return ret;
	ret = gr_fs_store_new(&gst, fs, st.ino);
	if (ret)
		goto unlink_tmp;
	ret = gr_build(gst, fd, o);
	gst->ops->destroy(gst);
	if (ret)
		goto unlink_tmp;
	ret = gs_fs_rename(fs, dir, tmp, dir, name,
			   o->flags & GS_GRAPH_IMPORT_REPLACE ? 0 : RENAME_NOREPLACE);
	if (ret)
		goto unlink_tmp;
	return gs_fs_fsync(fs, dir, 0);
unlink_tmp:
	gs_fs_unlink(fs, dir, tmp);
	return ret;
}

int gs_graph_import(struct gs_fs *fs, const char *name, const char *path,
		    const struct gs_graph_import_opts *o)
{
	struct gs_graph_import_opts c = *o;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	if (!c.format)
		c.format = (uint32_t)gr_detect_format(fd, path);
	ret = gs_graph_import_fd(fs, name, fd, &c);
	close(fd);
	return ret;
}

int gr_rebuild_ino(struct gs_fs *fs, uint64_t ino, int fd, const struct gs_graph_import_opts *o)
{
	struct gs_graph_root old;
	struct gr_store *st;
	uint64_t objs[GR_ROOT_OBJS];
	unsigned n = 0;
	int ret;

	ret = gr_fs_store_new(&st, fs, ino);
	if (ret)
		return ret;
	if (!gr_root_read(st, &old))
		n = gr_root_objects(&old, objs);
	ret = gr_build(st, fd, o);
	st->ops->destroy(st);
	if (ret)
		return ret;
	/* the new root is durable: the old objects are garbage now */
	for (unsigned i = 0; i < n; i++)
		gs_fs_unlink_internal(fs, objs[i]);
	return 0;
}
