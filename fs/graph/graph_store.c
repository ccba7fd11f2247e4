// SPDX-License-Identifier: MIT
/*
 * Page stores under a graph: the objects a graph keeps its pages, GTTs,
 * deltas and redo log in.  On a mounted fs these are hidden internal
 * objects of the GS_T_GRAPH object (graph_fs.c); the memory store here
 * serves unit tests and simulates power cuts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

int gr_store_read_full(struct gr_store *s, uint64_t obj, void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t r = s->ops->pread(s, obj, buf, len, off);

		if (r < 0)
			return (int)r;
		if (!r)
			return -EIO;	/* short: the object ends before what we expect */
		buf = (char *)buf + r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int gr_store_write_full(struct gr_store *s, uint64_t obj, const void *buf, size_t len,
			uint64_t off)
{
	while (len) {
		ssize_t r = s->ops->pwrite(s, obj, buf, len, off);

		if (r < 0)
			return (int)r;
		if (!r)
			return -EIO;
		buf = (const char *)buf + r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* ---- memory ---- */

struct mem_obj {
	uint8_t *cur, *dur;	/* what readers see, what survived the last sync */
	size_t len, cap, dlen;
	uint64_t *dirty;	/* page numbers written since the last sync */
	size_t ndirty, dcap;
};

struct mem_store {
	struct gr_store s;
	pthread_mutex_t lock;
	struct mem_obj *o;
	size_t n;
	uint64_t writes, fail_at;	/* fail_at: 0 never */
};

static struct mem_store *memof(struct gr_store *s)
{
	return (struct mem_store *)s;
}

static struct mem_obj *mobj(struct mem_store *m, uint64_t obj)
{
	return obj && obj <= m->n ? &m->o[obj - 1] : NULL;
}

static int mem_create(struct gr_store *s, uint64_t *obj)
{
	struct mem_store *m = memof(s);
	struct mem_obj *o;

	pthread_mutex_lock(&m->lock);
	o = realloc(m->o, (m->n + 1) * sizeof(*o));
	if (!o) {
		pthread_mutex_unlock(&m->lock);
		return -ENOMEM;
	}
	m->o = o;
	memset(&o[m->n], 0, sizeof(*o));
	*obj = ++m->n;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static ssize_t mem_pread(struct gr_store *s, uint64_t obj, void *buf, size_t len, uint64_t off)
{
	struct mem_store *m = memof(s);
	struct mem_obj *o;
	size_t n = 0;

	pthread_mutex_lock(&m->lock);
	o = mobj(m, obj);
	if (!o) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (off < o->len) {
		n = o->len - off < len ? o->len - off : len;
		memcpy(buf, o->cur + off, n);
	}
	pthread_mutex_unlock(&m->lock);
	return (ssize_t)n;
}

static int mem_grow(uint8_t **p, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 4096;
	uint8_t *n;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*p, c);
	if (!n)
		return -ENOMEM;
	memset(n + *cap, 0, c - *cap);
	*p = n;
	*cap = c;
	return 0;
}

static int mark_dirty(struct mem_obj *o, uint64_t pg)
{
	for (size_t i = 0; i < o->ndirty; i++)
		if (o->dirty[i] == pg)
			return 0;
	if (o->ndirty == o->dcap) {
		size_t c = o->dcap ? o->dcap * 2 : 16;
		uint64_t *d = realloc(o->dirty, c * sizeof(*d));

		if (!d)
			return -ENOMEM;
		o->dirty = d;
		o->dcap = c;
	}
	o->dirty[o->ndirty++] = pg;
	return 0;
}

static ssize_t mem_pwrite(struct gr_store *s, uint64_t obj, const void *buf, size_t len,
			  uint64_t off)
{
	struct mem_store *m = memof(s);
	struct mem_obj *o;
	uint32_t ps = s->page_size;
	ssize_t ret = (ssize_t)len;

	pthread_mutex_lock(&m->lock);
	o = mobj(m, obj);
	if (!o) {
		ret = -ENOENT;
		goto unlock;
	}
	if (m->fail_at && ++m->writes >= m->fail_at) {
		ret = -EIO;
		goto unlock;
	}
	if (mem_grow(&o->cur, &o->cap, off + len)) {
		ret = -ENOMEM;
		goto unlock;
	}
	memcpy(o->cur + off, buf, len);
	if (off + len > o->len)
		o->len = off + len;
	for (uint64_t pg = off / ps; pg <= (off + len - 1) / ps && len; pg++)
		if (mark_dirty(o, pg)) {
			ret = -ENOMEM;
			goto unlock;
		}
unlock:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static int mem_sync(struct gr_store *s, uint64_t obj)
{
	struct mem_store *m = memof(s);
	struct mem_obj *o;
	uint8_t *d;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	o = mobj(m, obj);
	if (!o) {
		ret = -ENOENT;
		goto unlock;
	}
	if (m->fail_at && m->writes >= m->fail_at) {
		ret = -EIO;
		goto unlock;
	}
	d = malloc(o->len ? o->len : 1);
	if (!d) {
		ret = -ENOMEM;
		goto unlock;
	}
	if (o->len)
		memcpy(d, o->cur, o->len);
	free(o->dur);
	o->dur = d;
	o->dlen = o->len;
	o->ndirty = 0;
unlock:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static int mem_size(struct gr_store *s, uint64_t obj, uint64_t *bytes)
{
	struct mem_store *m = memof(s);
	struct mem_obj *o;

	pthread_mutex_lock(&m->lock);
	o = mobj(m, obj);
	if (o)
		*bytes = o->len;
	pthread_mutex_unlock(&m->lock);
	return o ? 0 : -ENOENT;
}

static void mem_destroy(struct gr_store *s)
{
	struct mem_store *m = memof(s);

	for (size_t i = 0; i < m->n; i++) {
		free(m->o[i].cur);
		free(m->o[i].dur);
		free(m->o[i].dirty);
	}
	free(m->o);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const struct gr_store_ops mem_store_ops = {
	.create = mem_create,
	.pread = mem_pread,
	.pwrite = mem_pwrite,
	.sync = mem_sync,
	.size = mem_size,
	.destroy = mem_destroy,
};

int gr_mem_store_new(struct gr_store **sp, uint32_t page_size)
{
	struct mem_store *m = calloc(1, sizeof(*m));
	int ret;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->s.ops = &mem_store_ops;
	m->s.page_size = page_size;
	ret = mem_create(&m->s, &m->s.root);
	if (ret) {
		mem_destroy(&m->s);
		return ret;
	}
	*sp = &m->s;
	return 0;
}

void gr_mem_fail_after(struct gr_store *s, uint64_t n)
{
	struct mem_store *m = memof(s);

	pthread_mutex_lock(&m->lock);
	m->writes = 0;
	m->fail_at = n;
	pthread_mutex_unlock(&m->lock);
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Every page written since its object's last sync independently either
 * reached the medium or not; the rest is what the last sync left.
 */
void gr_mem_crash(struct gr_store *s, uint64_t seed)
{
	struct mem_store *m = memof(s);
	uint32_t ps = s->page_size;
	uint64_t x = seed * 2654435761u + 1;

	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n; i++) {
		struct mem_obj *o = &m->o[i];
		size_t len = o->dlen;

		for (size_t k = 0; k < o->ndirty; k++) {
			uint64_t pg = o->dirty[k], a = pg * ps, b = a + ps;

			if (b > o->len)
				b = o->len;
			if (xorshift(&x) & 1) {
				if (b > len)
					len = b;
				continue;	/* the new bytes made it */
			}
			/* back to the old bytes (zeros past the old end) */
			for (uint64_t off = a; off < b; off++)
				o->cur[off] = off < o->dlen ? o->dur[off] : 0;
		}
		if (len < o->len)
			memset(o->cur + len, 0, o->len - len);
		o->len = len;
		o->ndirty = 0;
		free(o->dur);
		o->dur = malloc(len ? len : 1);
		if (o->dur && len)
			memcpy(o->dur, o->cur, len);
		o->dlen = o->dur ? len : 0;
	}
	m->fail_at = 0;
	m->writes = 0;
	pthread_mutex_unlock(&m->lock);
}
