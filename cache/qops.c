// SPDX-License-Identifier: MIT
/*
 * The cache's binding to the I/O core.  Kept apart from the cache proper so
 * that the unit tests, which bind the cache to a memory device through
 * cache_create_ops(), do not link gpuq.
 */
#include <errno.h>

#include "cache_internal.h"

static int q_geometry(void *dev, struct gs_q_geom *g)
{
	return gs_q_geometry(dev, g);
}

static int q_register_buffer(void *dev, void *addr, size_t len)
{
	return gs_q_register_buffer(dev, addr, len);
}

static int q_unregister_buffer(void *dev, void *addr)
{
	return gs_q_unregister_buffer(dev, addr);
}

static ssize_t q_pread(void *dev, void *buf, size_t len, uint64_t off)
{
	return gs_q_pread(dev, buf, len, off);
}

static ssize_t q_pwrite(void *dev, const void *buf, size_t len, uint64_t off)
{
	return gs_q_pwrite(dev, buf, len, off);
}

static int q_flush(void *dev)
{
	return gs_q_flush(dev);
}

static int q_submit(void *dev, struct gs_q_io **ios, unsigned int n)
{
	return gs_q_submit(dev, ios, n);
}

static const struct cache_io_ops q_ops = {
	.geometry = q_geometry,
	.register_buffer = q_register_buffer,
	.unregister_buffer = q_unregister_buffer,
	.pread = q_pread,
	.pwrite = q_pwrite,
	.flush = q_flush,
	.submit = q_submit,
};

int gs_cache_create(struct gs_cache **cp, struct gs_q *q, const struct gs_cache_params *p)
{
	if (!q)
		return -EINVAL;
	return cache_create_ops(cp, &q_ops, q, p);
}
