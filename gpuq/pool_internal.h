/* SPDX-License-Identifier: MIT */
/*
 * The pool backend's state, shared by its files: gpuq/pool.c (I/O, faults,
 * status, replace, verify) and gpuq/pool_add.c (adding a member: restripe).
 */
#ifndef GS_GPUQ_POOL_INTERNAL_H
#define GS_GPUQ_POOL_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "gpuq_internal.h"
#include "pool.h"
#include "gstore_format.h"

#define POOL_MAX_IO	(64u << 20)
#define LOG_LIMIT	16	/* "no copy left" messages per member */

struct member {
	struct gs_q *q;		/* NULL: missing */
	char path[GS_POOL_PATH_MAX + 1];
	int found;		/* its device holds the pool's member superblock */
	uint64_t errors;	/* shared: relaxed */
	uint32_t logged;	/* shared: relaxed */
	/* writes it completed, and how many of them its last good flush covers
	 * (shared: atomics): a failed member with more of the first holds
	 * acknowledged writes in its volatile cache that it can no longer make
	 * durable */
	uint64_t wdone, wflushed;
};

struct gs_bdev {
	struct gs_pool_geo geo;
	struct gs_dpool_member sb;	/* the newest member superblock (bd->lock) */
	uint32_t layout;
	uint32_t rdonly;
	uint64_t failed;		/* shared: bit per failed member */
	struct gs_q_geom geom;
	pthread_mutex_t lock;		/* superblock updates, replace */
	uint64_t rebuild_done, rebuild_total;	/* shared: progress of a replace */
	/*
	 * Member queues are swapped (replace) under qlock held for writing;
	 * everything that sends to them holds it for reading.  Pieces count
	 * themselves in cnt[epoch parity]: after a swap (epoch + 1) the old
	 * queue is closed once the old parity's count is 0.
	 */
	pthread_rwlock_t qlock;
	uint32_t epoch;
	uint64_t cnt[2];		/* shared: pieces in flight per epoch parity */
	int rebuilding;			/* shared: member being rebuilt, -1: none */
	struct gs_q *rq;		/* its new device while it is */
	int rb_err;			/* shared: a write to rq failed */
	uint64_t rate;			/* shared: rebuild throttle, bytes/s (0: none) */
	int cancel;			/* shared: close stops a rebuild */
	/* a rebuild in the background (gs_q_pool_replace_start); lock */
	int bg;				/* bg_thread is joinable */
	pthread_t bg_thread;
	char last[GS_POOL_PATH_MAX + 128];	/* how the last rebuild ended ("": none) */
	/*
	 * An add in progress (gpuq/pool_add.c): geo is the new layout, rs_old
	 * the old; logical bytes from rs_pos on are still in the old one.  Both
	 * change only under qlock held for writing.
	 */
	int rs_active;
	uint64_t rs_pos;
	struct gs_pool_geo rs_old;
	char *fault;			/* the members' fault spec at open (tests), or NULL */
	/* the dirty-region log (gpuq/pool_wib.c; lock): a bit per 1 << wib_shift bytes */
	uint8_t *wib;
	uint32_t wib_shift;
	int wib_bad;			/* a bit may be missing: no partial resync */
	struct member m[GS_POOL_MAX_MEMBERS];
};

/* member superblocks */
int pool_sb_write(struct gs_q *q, const struct gs_dpool_member *tmpl, uint32_t index);
void pool_sb_update(struct gs_bdev *bd);		/* bd->lock held */

/* member state */
int pool_dev_error(int64_t res);
int pool_member_ok(struct gs_bdev *bd, uint32_t m);
void pool_member_fail(struct gs_bdev *bd, uint32_t m, int64_t res);
const char *pool_layout_name(uint32_t layout);

/* administration */
struct gs_bdev *pool_bd_of(struct gs_q *q);
int pool_same_file(const char *a, const char *b);
void pool_uuid_gen(uint8_t u[16]);
int pool_open_plain(const char *path, uint32_t flags, struct gs_q **q);
void pool_progress_add(struct gs_bdev *bd, uint64_t n, gs_pool_progress fn, void *arg);
int pool_throttle(struct gs_bdev *bd, int64_t t0, uint64_t bytes);
void pool_quiesce(struct gs_bdev *bd);			/* qlock held for writing */
int64_t pool_now_ns(void);

/* the dirty-region log (gpuq/pool_wib.c) */
int pool_wib_load(struct gs_bdev *bd);			/* at open, when in use */
/* A member failed (bd->lock held): log from now on; @since: the events count it holds. */
void pool_wib_start(struct gs_bdev *bd, uint64_t since);
int pool_wib_mark(struct gs_bdev *bd, uint64_t off, uint64_t len);	/* durable */
int pool_wib_dirty(const struct gs_bdev *bd, uint64_t off, uint64_t len);
uint64_t pool_wib_count(const struct gs_bdev *bd);
void pool_wib_clear(struct gs_bdev *bd);		/* bd->lock held */

/* adding a member (gpuq/pool_add.c): resume one in progress at open (not read-only) */
int pool_reshape_resume(struct gs_bdev *bd);

/* The layout that holds logical @off now (qlock held): the old one past an add's cursor. */
static inline const struct gs_pool_geo *pool_geo_at(const struct gs_bdev *bd, uint64_t off)
{
	return bd->rs_active && off >= bd->rs_pos ? &bd->rs_old : &bd->geo;
}

#endif /* GS_GPUQ_POOL_INTERNAL_H */
