// SPDX-License-Identifier: MIT
/*
 * Metadata buffers, transactions, the journal, group commit, checkpoint and
 * replay.
 *
 * Journal: physical redo logging of whole metadata blocks (like jbd2).  An
 * operation changes metadata buffers under fs->ns; the changed buffers form
 * the running transaction.  A commit, under fs->ns, seals each buffer (its
 * crc) and copies it into a staging buffer, starting a new transaction;
 * then, without fs->ns:
 *
 *   1. gs_cache_flush()      data written so far reaches the device
 *                            (data=ordered: no committed metadata may point
 *                            at blocks whose data is not on the device)
 *   2. journal write         descriptors + images + commit block, straight to
 *                            gs_q (the ring is never cached: it is 1 MiB
 *                            aligned and cache lines are <= 1 MiB)
 *   3. gs_q_flush()          the transaction is durable: fsync may return
 *   4. install               the images go into the cache, dirty; the cache
 *                            writes them home whenever it likes
 *
 * Checkpoint (when the ring is short of space, and at unmount): flush the
 * cache (every installed image reaches home), then move the tail in both
 * superblocks.  Blocks freed by committed transactions become allocatable
 * only then, so neither a replay nor committed metadata can ever touch a
 * block that was reused.
 *
 * Group commit: every fsync takes a ticket; one thread commits at a time
 * and each commit covers every ticket issued before it started, so
 * concurrent fsyncs share one journal write and one flush.
 *
 * Replay (mount, fsck): from the tail, read transactions whose descriptors
 * and commit block carry the expected sequence and the fs uuid and whose
 * crcs all match; write their images home through the cache; stop at the
 * first incomplete one.  Replay is idempotent.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "fs_internal.h"

/* ---- metadata buffers (all under fs->ns) ---- */

static uint32_t mhash(const struct gs_fs *fs, uint64_t blk)
{
	return (uint32_t)((blk * 0x9e3779b97f4a7c15ULL) >> 32) & (fs->mhash_n - 1);
}

static struct mbuf *mb_find(struct gs_fs *fs, uint64_t blk)
{
	for (struct mbuf *m = fs->mhash[mhash(fs, blk)]; m; m = m->hnext)
		if (m->blk == blk)
			return m;
	return NULL;
}

static void lru_del(struct mbuf *m)
{
	if (m->lnext) {
		m->lnext->lprev = m->lprev;
		m->lprev->lnext = m->lnext;
		m->lnext = m->lprev = NULL;
	}
}

static void lru_add(struct gs_fs *fs, struct mbuf *m)
{
	m->lnext = fs->lru.lnext;
	m->lprev = &fs->lru;
	fs->lru.lnext->lprev = m;
	fs->lru.lnext = m;
}

static void hash_del(struct gs_fs *fs, struct mbuf *m)
{
	struct mbuf **pp = &fs->mhash[mhash(fs, m->blk)];

	while (*pp && *pp != m)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = m->hnext;
	m->hnext = NULL;
}

static void mb_free(struct gs_fs *fs, struct mbuf *m)
{
	free(m->data);
	free(m);
	fs->mcount--;
}

/* Drop clean buffers whose latest image is already in the cache. */
static void mb_shrink(struct gs_fs *fs)
{
	struct mbuf *m = fs->lru.lprev;

	while (fs->mcount > fs->mmax && m != &fs->lru) {
		struct mbuf *prev = m->lprev;

		if (!m->dirty_tid && m->commit_tid <= fs->j.installed) {
			lru_del(m);
			hash_del(fs, m);
			mb_free(fs, m);
		}
		m = prev;
	}
}

static struct mbuf *mb_alloc(struct gs_fs *fs, uint64_t blk)
{
	struct mbuf *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->data = malloc(fs->bs);
	if (!m->data) {
		free(m);
		return NULL;
	}
	m->blk = blk;
	fs->mcount++;
	return m;
}

static void mb_insert(struct gs_fs *fs, struct mbuf *m)
{
	uint32_t h = mhash(fs, m->blk);

	m->hnext = fs->mhash[h];
	fs->mhash[h] = m;
	lru_add(fs, m);
}

int mb_get(struct gs_fs *fs, uint64_t blk, uint16_t type, struct mbuf **mp)
{
	struct mbuf *m = mb_find(fs, blk);
	ssize_t n;
	int ret;

	if (m) {
		if (type && ld16(((struct gs_dblk *)m->data)->type) != type) {
			gs_err("gstore: block %" PRIu64 " is not of the expected type", blk);
			return -EUCLEAN;
		}
		lru_del(m);
		lru_add(fs, m);
		*mp = m;
		return 0;
	}
	if (blk < 2 || blk >= fs->l.nblocks) {
		gs_err("gstore: metadata block number %" PRIu64 " out of range", blk);
		return -EUCLEAN;
	}
	if (fs->mcount >= fs->mmax)
		mb_shrink(fs);
	m = mb_alloc(fs, blk);
	if (!m)
		return -ENOMEM;
	n = gs_cache_read(fs->c, m->data, fs->bs, blk2off(fs, blk));
	ret = n < 0 ? (int)n : (n != fs->bs ? -EIO : 0);
	if (!ret && type)
		ret = gs_blk_verify(m->data, fs->bs, blk, type);
	if (ret < 0) {
		mb_free(fs, m);
		return ret;
	}
	mb_insert(fs, m);
	*mp = m;
	return 0;
}

int mb_new(struct gs_fs *fs, uint64_t blk, uint64_t owner, uint16_t type, struct mbuf **mp)
{
	struct mbuf *m = mb_find(fs, blk);

	if (!m) {
		if (fs->mcount >= fs->mmax)
			mb_shrink(fs);
		m = mb_alloc(fs, blk);
		if (!m)
			return -ENOMEM;
		mb_insert(fs, m);
	}
	gs_blk_init(m->data, fs->bs, blk, owner, type);
	mb_dirty(fs, m);
	*mp = m;
	return 0;
}

void mb_dirty(struct gs_fs *fs, struct mbuf *m)
{
	if (m->dirty_tid == fs->j.seq)
		return;
	m->dirty_tid = fs->j.seq;
	m->txnext = fs->j.tx;
	fs->j.tx = m;
	__atomic_store_n(&fs->j.tx_n, fs->j.tx_n + 1, __ATOMIC_RELAXED);
}

/* A metadata block was freed: its contents no longer matter. */
void mb_forget(struct gs_fs *fs, uint64_t blk)
{
	struct mbuf *m = mb_find(fs, blk);

	if (!m)
		return;
	hash_del(fs, m);
	lru_del(m);
	if (m->dirty_tid) {
		m->blk = UINT64_MAX;	/* dead: the commit skips and frees it */
		return;
	}
	mb_free(fs, m);
}

void mb_destroy_all(struct gs_fs *fs)
{
	struct mbuf *m, *next;

	for (m = fs->j.tx; m; m = next) {
		next = m->txnext;
		if (m->blk == UINT64_MAX)
			mb_free(fs, m);
		else
			m->dirty_tid = 0;
	}
	fs->j.tx = NULL;
	for (uint32_t h = 0; fs->mhash && h < fs->mhash_n; h++) {
		for (m = fs->mhash[h]; m; m = next) {
			next = m->hnext;
			mb_free(fs, m);
		}
		fs->mhash[h] = NULL;
	}
	fs->lru.lnext = fs->lru.lprev = &fs->lru;
}

int fext_add(struct fextlist *l, uint64_t blk, uint64_t len)
{
	if (l->n && l->e[l->n - 1].blk + l->e[l->n - 1].len == blk) {
		l->e[l->n - 1].len += len;
		return 0;
	}
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 64;
		struct fext *e = realloc(l->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		l->e = e;
		l->cap = cap;
	}
	l->e[l->n++] = (struct fext){ blk, len };
	return 0;
}

static int fext_merge(struct fextlist *dst, struct fextlist *src)
{
	for (uint32_t i = 0; i < src->n; i++) {
		int ret = fext_add(dst, src->e[i].blk, src->e[i].len);

		if (ret < 0)
			return ret;
	}
	src->n = 0;
	return 0;
}

int fs_flush_all(struct gs_fs *fs)
{
	uint64_t n = __atomic_add_fetch(&fs->flush_seq, 1, __ATOMIC_ACQ_REL);
	int ret = gs_cache_flush(fs->c);

	if (!ret) {
		uint64_t d = __atomic_load_n(&fs->flush_done, __ATOMIC_ACQUIRE);

		while (d < n && !__atomic_compare_exchange_n(&fs->flush_done, &d, n, false,
							     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			;
	}
	return ret;
}

/* ---- journal geometry ---- */

static uint32_t tags_per_desc(const struct gs_fs *fs)
{
	return (fs->bs - sizeof(struct gs_djdesc)) / sizeof(struct gs_djtag);
}

static uint64_t tx_blocks(const struct gs_fs *fs, uint64_t n)
{
	return n + (n + tags_per_desc(fs) - 1) / tags_per_desc(fs) + 1;
}

int jnl_init(struct gs_fs *fs)
{
	struct journal *j = &fs->j;

	j->start = fs->l.journal_start;
	j->nblocks = fs->l.journal_blocks;
	j->tail = j->head = ld64(fs->sb.j_tail);
	j->seq = j->tail_seq = ld64(fs->sb.j_seq);
	if (!j->seq)
		j->seq = j->tail_seq = 1;
	j->wseq = j->seq;
	j->used = 0;
	/* An op may add up to all bitmap blocks; keep room for that. */
	j->tx_max = j->nblocks / 4;
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	pthread_cond_init(&j->tcv, NULL);
	pthread_mutex_init(&j->cmu, NULL);
	return 0;
}

void jnl_destroy(struct gs_fs *fs)
{
	struct journal *j = &fs->j;

	free(j->buf);
	free(j->tx_frees.e);
	free(j->ck_frees.e);
	j->buf = NULL;
	j->tx_frees.e = j->ck_frees.e = NULL;
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->cv);
	pthread_cond_destroy(&j->tcv);
	pthread_mutex_destroy(&j->cmu);
}

static int jbuf_reserve(struct gs_fs *fs, size_t blocks)
{
	struct journal *j = &fs->j;
	void *p;

	if (blocks <= j->buf_blocks)
		return 0;
	if (posix_memalign(&p, 4096, blocks * fs->bs))
		return -ENOMEM;
	free(j->buf);
	j->buf = p;
	j->buf_blocks = blocks;
	return 0;
}

/* Write @n staged blocks at ring position @pos (wrapping). */
static int ring_write(struct gs_fs *fs, const uint8_t *buf, uint64_t n, uint64_t pos)
{
	struct journal *j = &fs->j;

	while (n) {
		uint64_t k = j->nblocks - pos < n ? j->nblocks - pos : n;
		ssize_t r = gs_q_pwrite(fs->q, buf, k << fs->bshift, blk2off(fs, j->start + pos));

		if (r < 0)
			return (int)r;
		buf += k << fs->bshift;
		n -= k;
		pos = (pos + k) % j->nblocks;
	}
	return 0;
}

static int ring_read(struct gs_fs *fs, uint8_t *buf, uint64_t pos)
{
	ssize_t r = gs_q_pread(fs->q, buf, fs->bs, blk2off(fs, fs->j.start + pos));

	return r < 0 ? (int)r : 0;
}

/* Caller holds j.cmu.  Every committed image is installed already. */
static int checkpoint_locked(struct gs_fs *fs)
{
	struct journal *j = &fs->j;
	struct fextlist rel = {0};
	int ret;

	ret = fs_flush_all(fs);
	if (ret < 0)
		return fs_fail(fs, ret, "checkpoint flush");
	pthread_mutex_lock(&fs->ns);
	/* from do_commit the staged transaction (wseq) is not in the ring yet:
	 * it will be the first one after the new tail */
	j->tail = j->head;
	j->tail_seq = j->wseq;
	j->used = 0;
	fs->sb.j_tail = st64(j->tail);
	fs->sb.j_seq = st64(j->tail_seq);
	rel = j->ck_frees;
	memset(&j->ck_frees, 0, sizeof(j->ck_frees));
	pthread_mutex_unlock(&fs->ns);
	ret = sb_write(fs);
	pthread_mutex_lock(&fs->ns);
	if (ret == 0)
		alloc_release_pending(fs, &rel);
	else
		fext_merge(&j->ck_frees, &rel);
	pthread_mutex_unlock(&fs->ns);
	free(rel.e);
	j->checkpoints++;
	return ret < 0 ? fs_fail(fs, ret, "superblock write") : 0;
}

int jnl_checkpoint(struct gs_fs *fs)
{
	int ret;

	if (fs->rdonly)
		return 0;
	pthread_mutex_lock(&fs->j.cmu);
	ret = fs->error ? fs->error : checkpoint_locked(fs);
	pthread_mutex_unlock(&fs->j.cmu);
	return ret;
}

/* Stage the running transaction (under ns).  Returns images staged. */
static int stage(struct gs_fs *fs, uint64_t *tidp, struct fextlist *frees)
{
	struct journal *j = &fs->j;
	uint32_t per = tags_per_desc(fs), n = 0, d = 0;
	struct mbuf *m, *next;
	uint8_t *p;
	int ret;

	for (m = j->tx; m; m = m->txnext)
		n += m->blk != UINT64_MAX;
	if (!n) {
		for (m = j->tx; m; m = next) {
			next = m->txnext;
			mb_free(fs, m);	/* only dead buffers */
		}
		j->tx = NULL;
		__atomic_store_n(&j->tx_n, 0, __ATOMIC_RELAXED);
		return fext_merge(frees, &j->tx_frees) < 0 ? -ENOMEM : 0;
	}
	ret = jbuf_reserve(fs, tx_blocks(fs, n));
	if (ret < 0)
		return ret;
	*tidp = j->seq;
	p = j->buf;
	for (m = j->tx; m; m = next) {
		struct gs_djdesc *desc;
		struct gs_djtag *tag;

		next = m->txnext;
		m->txnext = NULL;
		if (m->blk == UINT64_MAX) {
			mb_free(fs, m);
			continue;
		}
		if (d % per == 0) {	/* a new descriptor before the next images */
			desc = (void *)p;
			gs_blk_init(desc, fs->bs, 0, j->seq, GS_BT_JDESC);
			memcpy(desc->uuid, fs->sb.uuid, 16);
			p += fs->bs;
		}
		desc = (void *)(p - (size_t)(d % per + 1) * fs->bs);
		tag = (struct gs_djtag *)(desc + 1) + d % per;
		desc->nr = st32(d % per + 1);
		gs_blk_seal(m->data, fs->bs);
		memcpy(p, m->data, fs->bs);
		tag->blkno = st64(m->blk);
		tag->crc = st32(gs_crc32c(0, p, fs->bs));
		p += fs->bs;
		m->dirty_tid = 0;
		m->commit_tid = j->seq;
		d++;
	}
	j->tx = NULL;
	__atomic_store_n(&j->tx_n, 0, __ATOMIC_RELAXED);
	j->seq++;
	ret = fext_merge(frees, &j->tx_frees);
	return ret < 0 ? ret : (int)n;
}

/* Fill in ring positions, seal descriptors and the commit block. */
static uint64_t finish_staging(struct gs_fs *fs, uint32_t n, uint64_t tid, uint64_t pos)
{
	uint32_t per = tags_per_desc(fs), ndesc = (n + per - 1) / per;
	uint64_t total = (uint64_t)n + ndesc + 1;
	uint8_t *p = fs->j.buf;
	struct gs_djcommit *c;

	for (uint32_t dsc = 0; dsc < ndesc; dsc++) {
		struct gs_dblk *h = (void *)p;
		uint32_t cnt = ld32(((struct gs_djdesc *)p)->nr);

		h->blkno = st64(pos);
		gs_blk_seal(p, fs->bs);
		p += (size_t)(cnt + 1) * fs->bs;
		pos = (pos + cnt + 1) % fs->j.nblocks;
	}
	c = (void *)p;
	gs_blk_init(c, fs->bs, pos, tid, GS_BT_JCOMMIT);
	memcpy(c->uuid, fs->sb.uuid, 16);
	c->nr_blocks = st32(n);
	c->nr_desc = st32(ndesc);
	c->time = st64(now_sec());
	gs_blk_seal(c, fs->bs);
	return total;
}

/* Install committed images into the cache, from the staging buffer. */
static int install(struct gs_fs *fs, uint32_t n)
{
	uint32_t per = tags_per_desc(fs);
	uint8_t *p = fs->j.buf;

	for (uint32_t left = n; left;) {
		struct gs_djdesc *desc = (void *)p;
		struct gs_djtag *tag = (void *)(desc + 1);
		uint32_t cnt = left < per ? left : per;

		p += fs->bs;
		for (uint32_t i = 0; i < cnt; i++, p += fs->bs) {
			uint64_t home = blk2off(fs, ld64(tag[i].blkno));
			ssize_t r = gs_cache_write(fs->c, p, fs->bs, home);

			if (r < 0)
				return (int)r;
		}
		left -= cnt;
	}
	return 0;
}

/* Commit the running transaction.  Caller holds j.cmu. */
static int do_commit(struct gs_fs *fs, bool flush_data)
{
	struct journal *j = &fs->j;
	struct fextlist frees = {0};
	uint64_t tid = 0, total;
	int n, ret;

	if (fs->error)
		return fs->error;
	pthread_mutex_lock(&fs->ns);
	n = stage(fs, &tid, &frees);
	pthread_mutex_unlock(&fs->ns);
	if (n < 0) {
		ret = fs_fail(fs, n, "journal staging");
		goto out;
	}
	if (n == 0) {
		ret = flush_data ? fs_flush_all(fs) : 0;
		pthread_mutex_lock(&fs->ns);
		fext_merge(&j->ck_frees, &frees);
		pthread_mutex_unlock(&fs->ns);
		j->flushes++;
		goto out;
	}
	/* 1. data (and earlier installs) before the metadata that points at it */
	ret = fs_flush_all(fs);
	if (ret < 0) {
		ret = fs_fail(fs, ret, "data flush before commit");
		goto out;
	}
	total = tx_blocks(fs, n);
	if (total > j->nblocks) {
		ret = fs_fail(fs, -ENOSPC, "transaction larger than the journal");
		goto out;
	}
	if (j->used + total > j->nblocks) {
		ret = checkpoint_locked(fs);
		if (ret < 0)
			goto out;
	}
	finish_staging(fs, n, tid, j->head);
	/* 2. + 3. the transaction, then the flush that makes it durable */
	ret = ring_write(fs, j->buf, total, j->head);
	if (!ret)
		ret = gs_q_flush(fs->q);
	if (ret < 0) {
		ret = fs_fail(fs, ret, "journal write");
		goto out;
	}
	j->head = (j->head + total) % j->nblocks;
	j->wseq = tid + 1;
	j->used += total;
	j->logged += n;
	j->commits++;
	/* 4. home locations, through the cache, from now on */
	ret = install(fs, n);
	if (ret < 0) {
		ret = fs_fail(fs, ret, "journal install");
		goto out;
	}
	pthread_mutex_lock(&fs->ns);
	j->installed = tid;
	ret = fext_merge(&j->ck_frees, &frees);
	pthread_mutex_unlock(&fs->ns);
out:
	free(frees.e);
	return ret;
}

/* Commit what was done before this call and wait for it (also while rdonly:
 * the last commit of a filesystem going read-only, gs_fs_remount()). */
static int commit_wait(struct gs_fs *fs, bool data)
{
	struct journal *j = &fs->j;
	uint64_t ticket;
	int ret = 0;

	pthread_mutex_lock(&j->mu);
	ticket = ++j->req;
	while (j->done < ticket) {
		if (!j->committing) {
			uint64_t cover = j->req;

			j->committing = true;
			pthread_mutex_unlock(&j->mu);
			pthread_mutex_lock(&j->cmu);
			ret = do_commit(fs, data);
			pthread_mutex_unlock(&j->cmu);
			pthread_mutex_lock(&j->mu);
			j->committing = false;
			j->done = cover;
			if (ret < 0 && !j->err)
				j->err = ret;
			pthread_cond_broadcast(&j->cv);
		} else {
			pthread_cond_wait(&j->cv, &j->mu);
		}
	}
	ret = j->err;
	pthread_mutex_unlock(&j->mu);
	if (!ret && fs->error)
		ret = fs->error;
	return ret;
}

int jnl_sync(struct gs_fs *fs, bool data)
{
	if (fs->rdonly)
		return 0;
	return commit_wait(fs, data);
}

int jnl_write_clean(struct gs_fs *fs)
{
	int ret = commit_wait(fs, true);

	if (ret < 0)
		return ret;
	/* the checkpoint empties the journal and writes both superblocks after
	 * its flush: they carry the clean flag */
	pthread_mutex_lock(&fs->ns);
	fs->sb.state = st32(ld32(fs->sb.state) | GS_STATE_CLEAN);
	pthread_mutex_unlock(&fs->ns);
	pthread_mutex_lock(&fs->j.cmu);
	ret = fs->error ? fs->error : checkpoint_locked(fs);
	pthread_mutex_unlock(&fs->j.cmu);
	return ret;
}

/*
 * Out of space while freed blocks wait for a checkpoint: commit, checkpoint
 * and tell the caller to try again (1).  Not under fs->ns.
 */
int fs_reclaim(struct gs_fs *fs)
{
	uint64_t pending;
	int ret;

	pthread_mutex_lock(&fs->ns);
	pending = fs->al.pending;
	pthread_mutex_unlock(&fs->ns);
	if (!pending || fs->rdonly || fs->error)
		return 0;
	ret = jnl_sync(fs, false);
	if (!ret)
		ret = jnl_checkpoint(fs);
	return ret < 0 ? ret : 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Dirty cache bytes, as counted at most fs->dirty_every ns ago (one caller
 * counts, the others take its number: counting walks every line). */
static uint64_t dirty_bytes(struct gs_fs *fs)
{
	uint64_t now = mono_ns(), at = __atomic_load_n(&fs->dirty_at, __ATOMIC_RELAXED);
	struct gs_cache_stats st;

	if (now - at >= fs->dirty_every &&
	    __atomic_compare_exchange_n(&fs->dirty_at, &at, now, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		gs_cache_get_stats(fs->c, &st);
		__atomic_store_n(&fs->dirty_seen, (uint64_t)st.dirty * fs->line, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&fs->dirty_seen, __ATOMIC_RELAXED);
}

/*
 * Called before an operation takes fs->ns: keep transactions bounded, and
 * dirty data under fs->dirty_max.  Past the limit the operation first writes
 * the cache back (as balance_dirty_pages() makes writers do): the writers
 * wait for the device instead of filling the cache faster than it drains,
 * and the write-back left for the unmount stays within the limit.
 */
void jnl_op_begin(struct gs_fs *fs)
{
	int ret;

	if (__atomic_load_n(&fs->j.tx_n, __ATOMIC_RELAXED) > fs->j.tx_max)
		jnl_sync(fs, false);
	if (fs->rdonly || fs->error || !fs->dirty_max || dirty_bytes(fs) <= fs->dirty_max)
		return;
	ret = fs_flush_all(fs);
	/* a failed write-back stops writes, as it does before a commit: nobody
	 * else would hear of it, the cache reports an error once */
	if (ret < 0)
		fs_fail(fs, ret, "write-back of dirty data");
	/* count again on the next call: the number seen is stale now */
	__atomic_store_n(&fs->dirty_at, 0, __ATOMIC_RELAXED);
}

static void *commit_thread(void *arg)
{
	struct gs_fs *fs = arg;
	struct journal *j = &fs->j;

	pthread_mutex_lock(&j->mu);
	while (!j->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += GS_COMMIT_INTERVAL_MS / 1000;
		pthread_cond_timedwait(&j->tcv, &j->mu, &ts);
		if (j->stop)
			break;
		if (__atomic_load_n(&j->tx_n, __ATOMIC_RELAXED) && !fs->error) {
			pthread_mutex_unlock(&j->mu);
			jnl_sync(fs, false);
			pthread_mutex_lock(&j->mu);
		}
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

int jnl_start_thread(struct gs_fs *fs)
{
	int ret;

	fs->j.stop = false;	/* stopped before: a remount read-write */
	ret = pthread_create(&fs->j.thread, NULL, commit_thread, fs);

	if (ret)
		return -ret;
	fs->j.thread_on = true;
	return 0;
}

void jnl_stop_thread(struct gs_fs *fs)
{
	struct journal *j = &fs->j;

	if (!j->thread_on)
		return;
	pthread_mutex_lock(&j->mu);
	j->stop = true;
	pthread_cond_broadcast(&j->tcv);
	pthread_mutex_unlock(&j->mu);
	pthread_join(j->thread, NULL);
	j->thread_on = false;
}

/* ---- replay ---- */

struct scan {
	uint64_t pos, seq;
	uint64_t nblocks;	/* blocks the transaction occupies */
	uint32_t nimages;
};

static int check_jblk(struct gs_fs *fs, const uint8_t *b, uint64_t pos, uint64_t seq,
		      uint16_t type)
{
	const struct gs_dblk *h = (const void *)b;

	if (ld32(h->magic) != GS_BLK_MAGIC || ld16(h->type) != type || ld64(h->blkno) != pos ||
	    ld64(h->owner) != seq || ld32(h->crc) != gs_blk_crc(b, fs->bs))
		return -1;
	if (memcmp(b + sizeof(struct gs_dblk), fs->sb.uuid, 16))
		return -1;
	return 0;
}

static bool home_ok(const struct gs_fs *fs, uint64_t blk)
{
	const struct gs_layout *l = &fs->l;

	return blk >= 2 && blk < l->nblocks &&
	       !(blk >= l->journal_start && blk < l->journal_start + l->journal_blocks);
}

/*
 * Walk one transaction at s->pos.  With @apply, write its images home
 * (only call with apply after a verifying pass).  Returns 1 if complete,
 * 0 if not (end of journal), -errno on I/O errors.
 */
static int walk_tx(struct gs_fs *fs, struct scan *s, uint8_t *blk, uint8_t *img, bool apply)
{
	struct journal *j = &fs->j;
	uint32_t per = tags_per_desc(fs), ndesc = 0, nimg = 0;
	uint64_t pos = s->pos, used = 0;
	int ret;

	for (;;) {
		const struct gs_djdesc *d = (const void *)blk;
		const struct gs_djtag *tag = (const void *)(d + 1);
		uint32_t cnt;

		if (used >= j->nblocks)
			return 0;
		ret = ring_read(fs, blk, pos);
		if (ret < 0)
			return ret;
		if (!check_jblk(fs, blk, pos, s->seq, GS_BT_JCOMMIT)) {
			const struct gs_djcommit *c = (const void *)blk;

			if (ld32(c->nr_blocks) != nimg || ld32(c->nr_desc) != ndesc || !nimg)
				return 0;
			s->nblocks = used + 1;
			s->nimages = nimg;
			return 1;
		}
		if (check_jblk(fs, blk, pos, s->seq, GS_BT_JDESC))
			return 0;
		cnt = ld32(d->nr);
		if (!cnt || cnt > per || used + 1 + cnt + 1 > j->nblocks)
			return 0;
		ndesc++;
		pos = (pos + 1) % j->nblocks;
		used++;
		for (uint32_t i = 0; i < cnt; i++) {
			uint64_t home = ld64(tag[i].blkno);

			ret = ring_read(fs, img, pos);
			if (ret < 0)
				return ret;
			if (!home_ok(fs, home) || gs_crc32c(0, img, fs->bs) != ld32(tag[i].crc))
				return 0;
			if (apply) {
				ssize_t r = gs_cache_write(fs->c, img, fs->bs, blk2off(fs, home));

				if (r < 0)
					return (int)r;
			}
			pos = (pos + 1) % j->nblocks;
			used++;
			nimg++;
		}
	}
}

/* Does the block at ring @pos look like ours for @seq (magic, type, seq)
 * even though it failed verification?  Then it was damaged, not torn off. */
static bool looks_ours(const uint8_t *b, uint64_t seq)
{
	const struct gs_dblk *h = (const void *)b;
	uint16_t t = ld16(h->type);

	return ld32(h->magic) == GS_BLK_MAGIC && ld64(h->owner) == seq &&
	       (t == GS_BT_JDESC || t == GS_BT_JCOMMIT);
}

/*
 * The transaction at @pos with @seq is incomplete.  Normally it was the
 * last one, torn by the crash.  But if transaction seq + 1 exists, @seq
 * was damaged later (media errors): since every commit first flushes the
 * cache, all transactions before seq + 1 are home already and replay must
 * go on from seq + 1.  Look where it would start, and if the damaged
 * transaction's own blocks do not tell, search the whole ring.
 */
static int find_next(struct gs_fs *fs, uint64_t pos, uint64_t seq, uint8_t *blk,
		     uint64_t *next)
{
	struct journal *j = &fs->j;
	uint32_t per = tags_per_desc(fs);
	uint64_t p = pos, walked = 0;
	bool suspicious = false;
	int ret;

	for (;;) {	/* skip the descriptors and images we can read */
		const struct gs_djdesc *d = (const void *)blk;
		uint32_t cnt;

		ret = ring_read(fs, blk, p);
		if (ret < 0)
			return ret;
		if (check_jblk(fs, blk, p, seq, GS_BT_JDESC)) {
			suspicious |= looks_ours(blk, seq);
			break;
		}
		cnt = ld32(d->nr);
		if (!cnt || cnt > per || walked + cnt + 1 >= j->nblocks)
			return 0;
		walked += cnt + 1;
		p = (p + cnt + 1) % j->nblocks;
	}
	/* p: where the commit (or the damaged descriptor) is */
	for (int k = 0; k < 2; k++) {
		uint64_t q = (p + k) % j->nblocks;

		ret = ring_read(fs, blk, q);
		if (ret < 0)
			return ret;
		if (!check_jblk(fs, blk, q, seq + 1, GS_BT_JDESC)) {
			*next = q;
			return 1;
		}
	}
	if (!suspicious)
		return 0;
	for (uint64_t q = 0; q < j->nblocks; q++) {
		ret = ring_read(fs, blk, q);
		if (ret < 0)
			return ret;
		if (!check_jblk(fs, blk, q, seq + 1, GS_BT_JDESC)) {
			*next = q;
			return 1;
		}
	}
	return 0;
}

/* Walk complete transactions from (@pos, @seq); with @apply write them home.
 * @ntx: how many; @end, @end_seq: the first incomplete one. */
static int walk_chain(struct gs_fs *fs, uint64_t pos, uint64_t seq, bool apply, uint8_t *blk,
		      uint8_t *img, uint64_t *ntx, uint64_t *nblk, uint64_t *end,
		      uint64_t *end_seq)
{
	struct journal *j = &fs->j;
	struct scan s = { .pos = pos, .seq = seq };
	uint64_t total = 0;
	int ret = 0;

	*ntx = *nblk = 0;
	while (total < j->nblocks) {
		struct scan t = s;

		ret = walk_tx(fs, &t, blk, img, false);
		if (ret <= 0)
			break;
		if (total + t.nblocks > j->nblocks) {
			ret = 0;
			break;
		}
		if (apply) {
			t = s;
			ret = walk_tx(fs, &t, blk, img, true);
			if (ret < 0)
				break;
		}
		total += t.nblocks;
		(*ntx)++;
		*nblk += t.nimages;
		s.pos = (s.pos + t.nblocks) % j->nblocks;
		s.seq++;
	}
	*end = s.pos;
	*end_seq = s.seq;
	return ret < 0 ? ret : 0;
}

/*
 * Find the transactions replay must apply: from the tail, or from just
 * after the last damaged transaction.  Out: @start, @start_seq: the first
 * to apply; @ntx of them; @end, @end_seq: where the journal ends.
 */
static int plan_replay(struct gs_fs *fs, uint8_t *blk, uint8_t *img, uint64_t *start,
		       uint64_t *start_seq, uint64_t *ntx, uint64_t *nblk, uint64_t *end,
		       uint64_t *end_seq)
{
	struct journal *j = &fs->j;
	uint64_t pos = j->tail, seq = j->tail_seq;
	int ret;

	for (uint64_t round = 0; round < j->nblocks; round++) {
		uint64_t next;

		ret = walk_chain(fs, pos, seq, false, blk, img, ntx, nblk, end, end_seq);
		if (ret < 0)
			return ret;
		*start = pos;
		*start_seq = seq;
		ret = find_next(fs, *end, *end_seq, blk, &next);
		if (ret <= 0)
			return ret;
		gs_warn("gstore: %s: journal transaction %" PRIu64 " is damaged; the ones "
			"before it are home, replaying from %" PRIu64, fs->path, *end_seq,
			*end_seq + 1);
		pos = next;
		seq = *end_seq + 1;
	}
	return -EUCLEAN;
}

static int jbufs(struct gs_fs *fs, uint8_t **blk, uint8_t **img)
{
	if (posix_memalign((void **)blk, 4096, fs->bs))
		return -ENOMEM;
	if (posix_memalign((void **)img, 4096, fs->bs)) {
		free(*blk);
		return -ENOMEM;
	}
	return 0;
}

int jnl_scan(struct gs_fs *fs, uint64_t *ntx, uint64_t *nblocks)
{
	uint64_t start, sseq, end, eseq;
	uint8_t *blk, *img;
	int ret = jbufs(fs, &blk, &img);

	if (ret < 0)
		return ret;
	ret = plan_replay(fs, blk, img, &start, &sseq, ntx, nblocks, &end, &eseq);
	free(blk);
	free(img);
	return ret;
}

int jnl_replay(struct gs_fs *fs, uint64_t *replayed)
{
	struct journal *j = &fs->j;
	uint64_t start, sseq, ntx, nblk, end, seq;
	uint8_t *blk, *img;
	int ret = jbufs(fs, &blk, &img);

	if (ret < 0)
		return ret;
	*replayed = 0;
	ret = plan_replay(fs, blk, img, &start, &sseq, &ntx, &nblk, &end, &seq);
	if (ret < 0 || (!ntx && start == j->tail))
		goto out;
	if (fs->rdonly) {
		gs_err("gstore: %s needs journal recovery: mount read-write or run fsck",
		       fs->path);
		ret = -EROFS;
		goto out;
	}
	ret = walk_chain(fs, start, sseq, true, blk, img, &ntx, &nblk, &end, &seq);
	if (ret < 0)
		goto out;
	*replayed = ntx;
	ret = fs_flush_all(fs);
	if (ret < 0)
		goto out;
	j->tail = j->head = end;
	j->tail_seq = j->seq = j->wseq = seq;
	j->used = 0;
	fs->sb.j_tail = st64(end);
	fs->sb.j_seq = st64(seq);
	ret = sb_write(fs);
out:
	free(blk);
	free(img);
	return ret;
}
