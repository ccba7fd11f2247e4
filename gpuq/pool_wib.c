// SPDX-License-Identifier: MIT
/*
 * The pool's dirty-region log (a write-intent bitmap, as md's, kept only
 * while degraded): a bit per region of logical bytes, stored at member byte
 * GS_POOL_WIB_OFF of every healthy member.  From the moment a member fails
 * (or is missing at open) every write sets its regions' bits, durably on the
 * healthy members, before the write is acknowledged; so is every write piece
 * that failed on the member as it went.  When the member comes back,
 * `gstore pool replace M M` copies only the regions whose bits are set
 * (rebuild_run), provided the member's own superblock is no older than the
 * log (wib_since: the events count when it started, the count a member that
 * failed then still carries); else the whole member is rebuilt.  The log is
 * cleared once no member is failed.
 *
 * Bits are only ever set while degraded, so a write costs the log nothing
 * after its region's first write, and nothing at all on a healthy pool.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "gs_log.h"

#define WIB_BLOCK	4096u
#define WIB_BITS	(GS_POOL_WIB_SIZE * 8ull)
#define WIB_MIN_SHIFT	20u	/* regions of 1 MiB at least */

static int usable(const struct gs_bdev *bd)
{
	return le64toh(bd->sb.data_off) >= GS_POOL_WIB_OFF + GS_POOL_WIB_SIZE;
}

static uint32_t shift_for(const struct gs_bdev *bd)
{
	uint32_t s = WIB_MIN_SHIFT;

	while (s < 63 && (bd->geo.capacity >> s) >= WIB_BITS)
		s++;
	return s;
}

/* Write bitmap blocks [@b0, @b1) to every healthy member, then flush them (bd->lock held). */
static int wib_write(struct gs_bdev *bd, uint32_t b0, uint32_t b1)
{
	int ret = 0;

	for (uint32_t i = 0; i < bd->geo.n; i++) {
		ssize_t r;
		int f;

		if (!bd->m[i].q || !pool_member_ok(bd, i))
			continue;
		r = gs_q_pwrite(bd->m[i].q, bd->wib + (size_t)b0 * WIB_BLOCK,
				(size_t)(b1 - b0) * WIB_BLOCK,
				GS_POOL_WIB_OFF + (uint64_t)b0 * WIB_BLOCK);
		f = r < 0 ? (int)r : gs_q_flush(bd->m[i].q);
		if (f && !ret)
			ret = f;
	}
	return ret;
}

int pool_wib_load(struct gs_bdev *bd)
{
	if (!le64toh(bd->sb.wib_since) || !usable(bd))
		return 0;
	bd->wib_shift = le32toh(bd->sb.wib_shift);
	if (bd->wib_shift < WIB_MIN_SHIFT || bd->wib_shift > 62 ||
	    (bd->geo.capacity >> bd->wib_shift) >= WIB_BITS)
		return -EUCLEAN;
	bd->wib = aligned_alloc(WIB_BLOCK, GS_POOL_WIB_SIZE);
	if (!bd->wib)
		return -ENOMEM;
	/* every healthy member got every bitmap write: the first that reads will do */
	for (uint32_t i = 0; i < bd->geo.n; i++)
		if (bd->m[i].q && pool_member_ok(bd, i) &&
		    gs_q_pread_sync(bd->m[i].q, bd->wib, GS_POOL_WIB_SIZE, GS_POOL_WIB_OFF) ==
		    (ssize_t)GS_POOL_WIB_SIZE)
			return 0;
	return -EIO;
}

void pool_wib_start(struct gs_bdev *bd, uint64_t since)
{
	if (le64toh(bd->sb.wib_since) || bd->rdonly || !usable(bd))
		return;
	if (!bd->wib) {
		bd->wib = aligned_alloc(WIB_BLOCK, GS_POOL_WIB_SIZE);
		if (!bd->wib) {
			gs_err("pool: no memory for the dirty-region log: a member that comes "
			       "back will be rebuilt whole");
			return;
		}
	}
	memset(bd->wib, 0, GS_POOL_WIB_SIZE);
	bd->wib_shift = shift_for(bd);
	bd->sb.wib_since = htole64(since);
	bd->sb.wib_shift = htole32(bd->wib_shift);
	/* the zeroed log first: an old one's bits are no help and no harm, but stale */
	if (wib_write(bd, 0, GS_POOL_WIB_SIZE / WIB_BLOCK))
		gs_warn("pool: cannot clear the dirty-region log on every member");
}

int pool_wib_mark(struct gs_bdev *bd, uint64_t off, uint64_t len)
{
	uint64_t r0, r1, r;
	uint32_t b0 = UINT32_MAX, b1 = 0;
	int ret = 0;

	if (!len || bd->rdonly || !usable(bd))
		return 0;
	pthread_mutex_lock(&bd->lock);
	if (!le64toh(bd->sb.wib_since)) {
		/* a member failed before the log could start: it may be older, rebuilt whole */
		pool_wib_start(bd, le64toh(bd->sb.events) + 1);
		pool_sb_update(bd);
	}
	if (!bd->wib || !le64toh(bd->sb.wib_since))
		goto unlock;
	r0 = off >> bd->wib_shift;
	r1 = (off + len - 1) >> bd->wib_shift;
	for (r = r0; r <= r1 && r < WIB_BITS; r++) {
		if (bd->wib[r / 8] >> (r % 8) & 1)
			continue;
		bd->wib[r / 8] |= (uint8_t)(1u << (r % 8));
		if (r / 8 / WIB_BLOCK < b0)
			b0 = (uint32_t)(r / 8 / WIB_BLOCK);
		b1 = (uint32_t)(r / 8 / WIB_BLOCK) + 1;
	}
	if (b1)
		ret = wib_write(bd, b0, b1);
unlock:
	pthread_mutex_unlock(&bd->lock);
	return ret;
}

int pool_wib_dirty(const struct gs_bdev *bd, uint64_t off, uint64_t len)
{
	if (!bd->wib || !len)
		return 1;
	for (uint64_t r = off >> bd->wib_shift; r <= (off + len - 1) >> bd->wib_shift; r++)
		if (r >= WIB_BITS || (bd->wib[r / 8] >> (r % 8) & 1))
			return 1;
	return 0;
}

uint64_t pool_wib_count(const struct gs_bdev *bd)
{
	uint64_t n = 0;

	if (!bd->wib || !le64toh(bd->sb.wib_since))
		return 0;
	for (uint32_t i = 0; i < GS_POOL_WIB_SIZE; i++)
		n += (unsigned)__builtin_popcount(bd->wib[i]);
	return n;
}

void pool_wib_clear(struct gs_bdev *bd)
{
	if (!le64toh(bd->sb.wib_since))
		return;
	bd->sb.wib_since = 0;
	if (bd->wib) {
		memset(bd->wib, 0, GS_POOL_WIB_SIZE);
		if (wib_write(bd, 0, GS_POOL_WIB_SIZE / WIB_BLOCK))
			gs_warn("pool: cannot clear the dirty-region log on every member");
	}
}
