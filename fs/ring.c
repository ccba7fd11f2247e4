// SPDX-License-Identifier: MIT
/*
 * Rings of other processes bound to direct leases (gstore_fs.h).
 *
 * The attach server hands clients rings whose requests carry device
 * offsets.  The fs core stays the only owner of those offsets: it adds the
 * ring to its own I/O core as a bounded ring (gs_q_ring_add_bounded(): the
 * geometry copied once, every request checked), and a ring's bounds are
 * exactly the written extents of the leases bound to it, readable, and
 * writable for write leases.  Holes and unwritten extents are in no bounds:
 * an unwritten block still holds a previous owner's bytes.  A lease pins
 * its mapping, so the bounds stay true until it is unbound, and unbinding
 * returns once the requests its extents let through have completed
 * (gs_q_ring_set_bounds() waits for them): then the lease may end.  Ending
 * a lease that a ring still holds is the caller's bug (unbind or delete
 * the ring first).
 *
 * Bindings are few and change rarely (an OPEN, a RING, a SYNC): one list
 * and one lock for all filesystems, held while a ring's new table is built
 * and installed so that two changes to one ring install in order.
 */
#include <pthread.h>
#include <stdlib.h>

#include "fs_internal.h"
#include "gstore_attach.h"

struct fs_ring {
	struct gs_fs *fs;
	struct gs_ring *ring;
	uint32_t n, cap;
	struct gs_lease **l;
	struct fs_ring *next;
};

static pthread_mutex_t rings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fs_ring *rings;	/* under rings_mu */

static struct fs_ring **find(struct gs_fs *fs, struct gs_ring *ring)
{
	struct fs_ring **pp;

	for (pp = &rings; *pp; pp = &(*pp)->next)
		if ((*pp)->fs == fs && (*pp)->ring == ring)
			break;
	return pp;
}

/* Install the bounds of @fr's leases in the I/O core; under rings_mu. */
static int install(struct fs_ring *fr)
{
	struct gs_q_bound *b = NULL;
	uint32_t nb = 0, cap = 0;
	int ret;

	for (uint32_t i = 0; i < fr->n; i++) {
		const struct gs_lease *l = fr->l[i];
		uint32_t perm = GS_Q_BOUND_READ | (l->flags & GS_LEASE_WRITE ? GS_Q_BOUND_WRITE : 0);
		uint32_t ne;
		const struct lease_ext *e = lease_extents(l, &ne);

		for (uint32_t k = 0; k < ne; k++) {
			if (e[k].kind != LEASE_MAPPED)
				continue;
			if (nb == cap) {
				struct gs_q_bound *v;

				cap = cap ? 2 * cap : 16;
				v = realloc(b, cap * sizeof(*b));
				if (!v) {
					free(b);
					return -ENOMEM;
				}
				b = v;
			}
			b[nb++] = (struct gs_q_bound){ .off = e[k].dev, .len = e[k].len,
						       .perm = perm };
		}
	}
	ret = gs_q_ring_set_bounds(fr->fs->q, fr->ring, b, nb);
	free(b);
	return ret;
}

int gs_fs_ring_add(struct gs_fs *fs, struct gs_ring *ring, size_t ring_bytes, void *buf_base,
		   size_t buf_len)
{
	struct fs_ring *fr;
	int ret;

	if (!fs || !ring)
		return -EINVAL;
	fr = calloc(1, sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	fr->fs = fs;
	fr->ring = ring;
	pthread_mutex_lock(&rings_mu);
	ret = *find(fs, ring) ? -EEXIST : 0;
	/* bounded from the start: it refuses everything until a bind */
	if (!ret)
		ret = gs_q_ring_add_bounded(fs->q, ring, ring_bytes, buf_base, buf_len);
	if (!ret) {
		fr->next = rings;
		rings = fr;
	}
	pthread_mutex_unlock(&rings_mu);
	if (ret)
		free(fr);
	return ret;
}

int gs_fs_ring_bind(struct gs_fs *fs, struct gs_ring *ring, struct gs_lease *l)
{
	struct fs_ring *fr;
	int ret = 0;

	if (!fs || !ring || !l || l->fs != fs)
		return -EINVAL;
	pthread_mutex_lock(&rings_mu);
	fr = *find(fs, ring);
	if (!fr) {
		ret = -ENOENT;
		goto unlock;
	}
	for (uint32_t i = 0; i < fr->n; i++)
		if (fr->l[i] == l)
			goto unlock;	/* bound already */
	if (fr->n == fr->cap) {
		uint32_t cap = fr->cap ? 2 * fr->cap : 4;
		struct gs_lease **v = realloc(fr->l, cap * sizeof(*v));

		if (!v) {
			ret = -ENOMEM;
			goto unlock;
		}
		fr->l = v;
		fr->cap = cap;
	}
	fr->l[fr->n++] = l;
	ret = install(fr);
	if (ret)
		fr->n--;	/* the old table stays in force */
unlock:
	pthread_mutex_unlock(&rings_mu);
	return ret;
}

int gs_fs_ring_unbind(struct gs_fs *fs, struct gs_ring *ring, struct gs_lease *l)
{
	struct fs_ring *fr;
	int ret = -ENOENT;

	if (!fs || !ring || !l)
		return -EINVAL;
	pthread_mutex_lock(&rings_mu);
	fr = *find(fs, ring);
	for (uint32_t i = 0; fr && i < fr->n; i++) {
		if (fr->l[i] != l)
			continue;
		fr->l[i] = fr->l[--fr->n];
		ret = install(fr);
		if (ret) {
			/*
			 * No memory for the smaller table: refuse everything rather
			 * than leave the ring the extents of a lease about to end.
			 */
			int r = gs_q_ring_set_bounds(fs->q, ring, NULL, 0);

			ret = r ? r : ret;
		}
		break;
	}
	pthread_mutex_unlock(&rings_mu);
	return ret;
}

int gs_fs_ring_del(struct gs_fs *fs, struct gs_ring *ring)
{
	struct fs_ring **pp, *fr;
	int ret;

	if (!fs || !ring)
		return -EINVAL;
	pthread_mutex_lock(&rings_mu);
	pp = find(fs, ring);
	fr = *pp;
	if (fr)
		*pp = fr->next;
	pthread_mutex_unlock(&rings_mu);
	if (!fr)
		return -ENOENT;
	/* waits for the ring's requests in flight: after it, its leases may end */
	ret = gs_q_ring_del(fs->q, ring);
	free(fr->l);
	free(fr);
	return ret;
}

int gs_fs_lease_set_recall(struct gs_lease *l, void (*fn)(void *arg), void *arg)
{
	if (!l)
		return -EINVAL;
	pthread_mutex_lock(&l->fs->lease_mu);
	l->recall = fn;
	l->recall_arg = arg;
	l->recalled = false;
	/* a truncate already waiting for this lease looks again, and asks */
	pthread_cond_broadcast(&l->fs->lease_cv);
	pthread_mutex_unlock(&l->fs->lease_mu);
	return 0;
}

int gs_fs_ring_kick_fd(struct gs_fs *fs)
{
	return fs ? gs_q_kick_fd(fs->q) : -EINVAL;
}

/*
 * The lease's written extents in @bs units: an object block b of extent x
 * is at device byte x.dev_off + (b - x.blk) * bs.  Holes and unwritten
 * extents are left out (the client reads them as zeros).  Extents must be
 * aligned to @bs: a client addressing @bs blocks could not use the rest.
 */
int gs_fs_lease_export(struct gs_lease *l, uint32_t block_size, void *ext, unsigned max)
{
	struct gs_att_ext *out = ext;
	uint64_t bs = block_size;
	const struct lease_ext *e;
	uint32_t ne;
	unsigned n = 0;

	if (!l || !bs || (bs & (bs - 1)) || (!ext && max))
		return -EINVAL;
	e = lease_extents(l, &ne);
	for (uint32_t i = 0; i < ne; i++) {
		uint64_t len = e[i].len & ~(bs - 1);

		if (e[i].kind != LEASE_MAPPED)
			continue;
		if (((e[i].off | e[i].dev) & (bs - 1)) || !len)
			return -EINVAL;
		if (n < max)
			out[n] = (struct gs_att_ext){ .blk = e[i].off / bs, .nblk = len / bs,
						      .dev_off = e[i].dev };
		if (n == INT32_MAX)
			return -E2BIG;
		n++;
	}
	return (int)n;
}
