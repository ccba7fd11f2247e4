// SPDX-License-Identifier: MIT
/*
 * Ring memory: layout, formatting, and the CPU-side blocking waits on
 * completion words and completion queues (the fast paths themselves are in
 * include/gstore_ring.h).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuq_internal.h"

#define RING_MAX_ENTRIES	(1u << 24)

static size_t align64(size_t x)
{
	return (x + GS_CACHELINE - 1) & ~(size_t)(GS_CACHELINE - 1);
}

static int is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

size_t gs_ring_bytes(uint32_t sq_entries, uint32_t cq_entries, uint32_t ncw)
{
	size_t b = sizeof(struct gs_ring);

	b += (size_t)sq_entries * sizeof(struct gs_sq_slot);
	b += align64((size_t)cq_entries * sizeof(struct gs_cq_slot));
	b += align64((size_t)ncw * sizeof(struct gs_cword));
	return b;
}

int gs_ring_init(void *mem, size_t bytes, uint32_t sq_entries, uint32_t cq_entries,
		 uint32_t ncw, uint32_t flags)
{
	struct gs_ring *r = mem;
	struct gs_sq_slot *sq;
	struct gs_cq_slot *cq;
	uint32_t i;

	if (!mem || ((uintptr_t)mem & (GS_CACHELINE - 1)))
		return -EINVAL;
	if (!is_pow2(sq_entries) || !is_pow2(cq_entries) || sq_entries > RING_MAX_ENTRIES ||
	    cq_entries > RING_MAX_ENTRIES || ncw > RING_MAX_ENTRIES)
		return -EINVAL;
	if (flags & ~(uint32_t)GS_RING_POLLED)
		return -EINVAL;
	if (bytes < gs_ring_bytes(sq_entries, cq_entries, ncw))
		return -ENOSPC;

	memset(r, 0, sizeof(*r));
	r->version = GS_RING_VERSION;
	r->sq_entries = sq_entries;
	r->cq_entries = cq_entries;
	r->ncw = ncw;
	r->flags = flags;
	r->sq_off = sizeof(*r);
	r->cq_off = r->sq_off + (uint64_t)sq_entries * sizeof(struct gs_sq_slot);
	r->cw_off = r->cq_off + align64((size_t)cq_entries * sizeof(struct gs_cq_slot));
	r->bytes = gs_ring_bytes(sq_entries, cq_entries, ncw);

	/* slot i starts free for the producer holding ticket i */
	sq = gs_ring_sq(r);
	for (i = 0; i < sq_entries; i++) {
		memset(&sq[i], 0, sizeof(sq[i]));
		sq[i].seq = i;
	}
	cq = gs_ring_cq(r);
	for (i = 0; i < cq_entries; i++) {
		memset(&cq[i], 0, sizeof(cq[i]));
		cq[i].seq = i;
	}
	memset(gs_ring_cw(r), 0, (size_t)ncw * sizeof(struct gs_cword));
	/* release: the formatted ring is visible before anyone sees the magic */
	__atomic_store_n(&r->magic, GS_RING_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Copy the header of a ring someone else formatted (another process may
 * have, and may still write it) into *h, reading it once, and check the
 * copy: the caller uses only the copy from then on.  @bytes: the memory
 * the ring lives in; 0 when the caller formatted it itself.
 */
int gs_ring_snapshot(struct gs_ring *r, size_t bytes, struct gs_ring *h)
{
	if ((uintptr_t)r & (GS_CACHELINE - 1))
		return -EINVAL;
	/* acquire: the formatting before the magic that says it is done */
	h->magic = __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE);
	/* one read of each field: later changes to *r do not reach the copy */
	h->version = __atomic_load_n(&r->version, __ATOMIC_RELAXED);
	h->sq_entries = __atomic_load_n(&r->sq_entries, __ATOMIC_RELAXED);
	h->cq_entries = __atomic_load_n(&r->cq_entries, __ATOMIC_RELAXED);
	h->ncw = __atomic_load_n(&r->ncw, __ATOMIC_RELAXED);
	h->flags = __atomic_load_n(&r->flags, __ATOMIC_RELAXED);
	h->sq_off = __atomic_load_n(&r->sq_off, __ATOMIC_RELAXED);
	h->cq_off = __atomic_load_n(&r->cq_off, __ATOMIC_RELAXED);
	h->cw_off = __atomic_load_n(&r->cw_off, __ATOMIC_RELAXED);
	h->bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
	if (h->magic != GS_RING_MAGIC || h->version != GS_RING_VERSION)
		return -EINVAL;
	if (!is_pow2(h->sq_entries) || !is_pow2(h->cq_entries) ||
	    h->sq_entries > RING_MAX_ENTRIES || h->cq_entries > RING_MAX_ENTRIES ||
	    h->ncw > RING_MAX_ENTRIES || (h->flags & ~(uint32_t)GS_RING_POLLED) ||
	    h->bytes < gs_ring_bytes(h->sq_entries, h->cq_entries, h->ncw) ||
	    (bytes && h->bytes > bytes) ||
	    h->sq_off != sizeof(*r) ||
	    h->cq_off != h->sq_off + (uint64_t)h->sq_entries * sizeof(struct gs_sq_slot) ||
	    h->cw_off != h->cq_off + align64((size_t)h->cq_entries * sizeof(struct gs_cq_slot)))
		return -EINVAL;
	return 0;
}

void gs_futex_wake(uint32_t *word, int shared)
{
	syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* 0 when woken (or the word changed), -ETIMEDOUT, -EINTR. */
int gs_futex_wait(uint32_t *word, uint32_t val, int shared, int64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tp = &ts;
	}
	if (syscall(SYS_futex, word, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, val, tp,
		    NULL, 0) < 0) {
		if (errno == ETIMEDOUT || errno == EINTR)
			return -errno;
	}
	return 0;
}

int64_t gs_ring_cw_wait(struct gs_ring *r, uint32_t i, uint32_t spin_us)
{
	struct gs_cword *w = &gs_ring_cw(r)[i];
	uint64_t end = 0;
	int64_t res;

	while (!gs_cw_poll(r, i, &res)) {
		uint64_t now = gs_now_ns();

		if (!end)
			end = now + (uint64_t)spin_us * 1000;
		if (now < end) {
			gs_cpu_relax();
			continue;
		}
		/*
		 * seq_cst RMW: our waiters increment is ordered before the state
		 * re-load; the poller stores state, fences, then loads waiters.
		 */
		__atomic_fetch_add(&w->waiters, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&w->state, __ATOMIC_SEQ_CST))
			gs_futex_wait(&w->state, 0, 1, -1);
		__atomic_fetch_sub(&w->waiters, 1, __ATOMIC_RELAXED);
	}
	return res;
}

int gs_ring_cq_wait(struct gs_ring *r, struct gs_cqe *c, uint32_t spin_us, int64_t timeout_us)
{
	uint64_t start = gs_now_ns(), now;
	uint64_t spin_end = start + (uint64_t)spin_us * 1000;
	uint64_t end = timeout_us < 0 ? UINT64_MAX : start + (uint64_t)timeout_us * 1000;

	for (;;) {
		uint32_t seq;
		int ret;

		if (gs_cq_try_pop(r, c))
			return 1;
		now = gs_now_ns();
		if (now >= end)
			return 0;
		if (now < spin_end) {
			gs_cpu_relax();
			continue;
		}
		/* the futex value before the check: a post after the check changes it */
		seq = __atomic_load_n(&r->cq_futex, __ATOMIC_ACQUIRE);
		/*
		 * seq_cst RMW: cq_waiters is visible before our cq re-check; the
		 * poller pushes cqes, fences, then loads cq_waiters (Dekker).
		 */
		__atomic_fetch_add(&r->cq_waiters, 1, __ATOMIC_SEQ_CST);
		ret = gs_cq_try_pop(r, c);
		if (!ret)
			gs_futex_wait(&r->cq_futex, seq, 1,
				      end == UINT64_MAX ? -1 : (int64_t)(end - now));
		__atomic_fetch_sub(&r->cq_waiters, 1, __ATOMIC_RELAXED);
		if (ret)
			return 1;
	}
}
