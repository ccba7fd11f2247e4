/* SPDX-License-Identifier: MIT */
/*
 * BaM (GPU-managed mode): the software cache under gs_array_get()/_set() of
 * gstore_cuda.h.  Lines in producer memory (GPU memory for kernels), a state
 * word per array page, clock replacement over the slots, refcounts, one
 * miss -> one I/O, through the CAM ring (gstore_cuda_cam.h) or NVMe queue
 * pairs (gstore_nvmeq.h).  Everything here is static inline and __host__
 * __device__ so that CPU threads test it in CI; the warp coalescing on top
 * (__match_any_sync / __shfl_sync) is in gstore_cuda.h.  The page state
 * word and the bounce slots: docs/ARCHITECTURE.md, "GPU path".
 */
#ifndef GSTORE_CUDA_BAM_H
#define GSTORE_CUDA_BAM_H

#include <stdint.h>

#include "gstore_cuda_cam.h"
#include "gstore_nvmeq.h"

#define GS_BAM_VALID	0x80000000u
#define GS_BAM_BUSY	0x40000000u
#define GS_BAM_DIRTY	0x20000000u
#define GS_BAM_REFS	0x000fffffu
#define GS_BAM_EMPTY	UINT64_MAX		/* slot_page: free slot */
#define GS_BAM_CLAIMED	(UINT64_MAX - 1)	/* slot_page: being (re)filled */
#define GS_BAM_NOSLOT	UINT32_MAX
#define GS_BAM_RETRY	(UINT32_MAX - 1)	/* gs_bam_get_try(): busy, call again */
#define GS_EIO		5

struct gs_bam {
	uint64_t clock;		/* clock hand (ticket) */
	uint8_t pad0[GS_CACHELINE - 8];
	uint64_t io_ticket;	/* bounce-slot tickets (not sharded: cam->nshard <= 1) */
	uint8_t pad1[GS_CACHELINE - 8];
	/* statistics: rare events only (a hit counter would serialise hits) */
	uint64_t misses, evictions, writebacks, busy_waits;
	int64_t err;		/* first failure, sticky */
	uint8_t pad2[GS_CACHELINE - 40];

	uint32_t line_shift;	/* line = page = cam block */
	uint32_t nslots;
	uint32_t nio;		/* bounce slots, power of two */
	uint32_t nio_shift;
	uint64_t npages;
	uint32_t *pst;		/* [npages] */
	uint32_t *pslot;	/* [npages] */
	uint64_t *slot_page;	/* [nslots] */
	uint32_t *slot_ref;	/* [nslots] clock bits */
	char *data;		/* nslots lines */
	uint64_t *turn;		/* [nio]; sharded: shard k's slots from k * nio / nshard */
	uint64_t bounce_off;	/* region offset of bounce slot 0 */
	uint32_t rsvd;
	uint32_t nvme_nq;	/* NVMe mode: queues (0: ring mode) */
	struct gs_cam *cam;	/* ring, sq ticket, extents, region */
	/* NVMe mode: misses are NVMe commands put into queue pairs by the
	 * missing thread itself (gstore_nvmeq.h); bounce slot s is at bus
	 * address prp_base + s * line, cam->buf + bounce_off + s * line here */
	struct gs_nvmeq *nvmeq;	/* [nvme_nq] */
	uint64_t prp_base;
	uint32_t lba_shift;
	uint32_t nsid;
};

GS_HD void gs_bam_fail(struct gs_bam *b, int64_t res)
{
	gs_d_cas_i64(&b->err, 0, res);
}

/* Copy one line; 16-byte words (lines and bounce slots are 4 KiB aligned). */
GS_HD void gs_bam_copy(char *dst, const char *src, uint32_t bytes)
{
#if defined(__CUDA_ARCH__)
	uint4 *d = (uint4 *)dst;
	const uint4 *s = (const uint4 *)src;
	uint32_t n = bytes / 16, i;

	/* eight 16-byte loads in flight per round; .cv: fetch again, never a
	 * stale L1 copy of a bounce slot's previous use */
	for (i = 0; i + 8 <= n; i += 8) {
		uint4 v[8];

#pragma unroll
		for (int k = 0; k < 8; k++)
			v[k] = __ldcv(s + i + k);
#pragma unroll
		for (int k = 0; k < 8; k++)
			d[i + k] = v[k];
	}
	for (; i < n; i++)
		d[i] = __ldcv(s + i);
#else
	__builtin_memcpy(dst, src, bytes);
#endif
}

/* An NVMe command for one line through bounce slot @s; bytes or -errno. */
GS_HD int64_t gs_bam_nvme_io(struct gs_bam *b, uint8_t op, uint64_t dev, uint32_t len, uint32_t s)
{
	struct gs_nvmeq *q = &b->nvmeq[s % b->nvme_nq];
	uint64_t prp = b->prp_base + ((uint64_t)s << b->line_shift);
	struct gs_nvme_cmd cmd;
	uint64_t t;
	uint16_t sf;

	if (op == GS_OP_FLUSH) {
		struct gs_nvme_cmd z = GS_ZERO;

		cmd = z;
		cmd.opc = GS_NVME_CMD_FLUSH;
		cmd.nsid = b->nsid;
	} else {
		/* a line is at most two memory pages: PRP1 and PRP2, no list */
		gs_nvme_rw(&cmd, op == GS_OP_READ ? GS_NVME_CMD_READ : GS_NVME_CMD_WRITE, b->nsid,
			   dev >> b->lba_shift, len >> b->lba_shift, prp,
			   len > 4096 ? prp + 4096 : 0);
	}
	t = gs_nvmeq_submit(q, &cmd);
	/* collected completions: the CQ is in host memory here, and a scan of it
	 * per waiting thread costs a PCIe round trip per entry; one collector at a
	 * time loads a batch of entries at once and sets words in GPU memory */
	sf = gs_nvmeq_wait_collected(q, t);
	return sf ? gs_nvme_status_errno(sf) : (int64_t)len;
}

/*
 * One line of I/O through a bounce slot: read page @page into slot @slot's
 * line, or write the line out.  The bounce slot comes from the caller's
 * shard of the cam set (its own ring, collector and slots: see
 * gstore_cuda_cam.h); a line over two extents goes out as one request per
 * device run, one after the other through the same slot, and the bytes no
 * extent maps read as zeros.  Returns 0 or -errno.
 */
GS_HD int gs_bam_io(struct gs_bam *b, uint8_t op, uint64_t page, uint32_t slot)
{
	struct gs_cam *c = b->nvme_nq ? b->cam : gs_cam_self(b->cam);
	uint32_t len = 1u << b->line_shift, ns = 64, covered, np, shift, first, plen, poff;
	uint64_t *ctr, t, lap, boff, *turn, dev;
	uint32_t s;
	char *line = b->data + ((uint64_t)slot << b->line_shift);
	int64_t res = 0;

	np = gs_cam_npieces(c, page, &covered);
	if (!np)
		return -GS_ERANGE;
	if (c->nshard > 1) {	/* this shard's slots: [shard_id << shift, +1 << shift) */
		ctr = &c->sink_ticket;
		shift = c->sink_shift;
		first = c->shard_id << shift;
	} else {
		ctr = &b->io_ticket;
		shift = b->nio_shift;
		first = 0;
	}
	t = gs_d_faa(ctr, 1);
	s = (uint32_t)(t & ((1u << shift) - 1));
	lap = t >> shift;
	turn = &b->turn[first + s];
	/* acquire: the slot's previous user is done with bounce and word */
	while (gs_d_load_acq(turn) != 2 * lap)
		gs_d_backoff(&ns);
	boff = b->bounce_off + ((uint64_t)s << b->line_shift);
	if (op == GS_OP_WRITE)
		gs_bam_copy(c->buf + boff, line, len);
	else if (covered < len)
		gs_cam_zero(c->buf + boff, len);
	if (b->nvme_nq) {
		/* 4 KiB lines over 4 KiB extents: one piece, the whole line */
		if (np != 1 || covered != len || !gs_cam_piece(c, page, 0, &dev, &poff, &plen)) {
			res = -GS_ERANGE;
		} else {
			res = gs_bam_nvme_io(b, op, dev, len, s);
			res = res == len ? 0 : res < 0 ? res : -GS_EIO;
		}
		goto done;
	}
	/* system fence: the bounce data (writes, zeros) before the requests */
	gs_fence();
	for (uint32_t k = 0; gs_cam_piece(c, page, k, &dev, &poff, &plen); k++) {
		struct gs_sqe e = GS_ZERO;
		int64_t r;

		if (k)	/* the word said t for the last piece: ours alone now */
			gs_d_store_rlx(&c->sink_done[s], ~t);
		e.op = op;
		e.flags = GS_SQE_BUF_OFF | GS_SQE_CQE;
		e.len = plen;
		e.off = dev;
		e.buf = boff + poff;
		e.tag = GS_CAM_SINK | t;
		gs_cam_push(c, &e);
		ns = 256;
		/* acquire: pairs with the collector's release; the bounce data is in */
		while (gs_d_load_acq(&c->sink_done[s]) != t)
			gs_cam_wait_step(c, &ns);
		r = c->sink_res[s];
		if (r != plen) {
			res = r < 0 ? r : -GS_EIO;
			break;
		}
	}
done:
	if (op == GS_OP_READ && !res)
		gs_bam_copy(line, c->buf + boff, len);
	/* release: bounce and word are free for ticket t + slots */
	gs_d_store_rel(turn, 2 * lap + 2);
	if (!res)
		return 0;
	gs_bam_fail(b, res);
	return (int)res;
}

/*
 * A free slot, by clock: empty slots first, then unreferenced pages whose
 * clock bit is clear (written back first if dirty).  The slot is returned
 * CLAIMED, or GS_BAM_NOSLOT after two sweeps found none (every line
 * referenced): the caller backs off without waiting here, because the
 * references may belong to lanes of its own warp that cannot run their
 * release while this lane spins.
 */
GS_HD uint32_t gs_bam_victim(struct gs_bam *b)
{
	for (uint64_t n = 0; n < 2ull * b->nslots; n++) {
		uint32_t s = (uint32_t)(gs_d_faa(&b->clock, 1) % b->nslots);
		uint64_t p = gs_d_load_acq(&b->slot_page[s]);
		uint32_t st;

		if (p == GS_BAM_EMPTY) {
			if (gs_d_cas(&b->slot_page[s], &p, GS_BAM_CLAIMED))
				return s;
			continue;
		}
		if (p == GS_BAM_CLAIMED)
			continue;
		if (gs_d32_load_rlx(&b->slot_ref[s])) {
			gs_d32_store_rlx(&b->slot_ref[s], 0);	/* second chance */
			continue;
		}
		st = gs_d32_load_rlx(&b->pst[p]);
		if (!(st & GS_BAM_VALID) || (st & GS_BAM_REFS))
			continue;
		if (!gs_d32_cas(&b->pst[p], st, GS_BAM_BUSY))
			continue;
		/* page p may have moved since we read slot_page[s]: check it is ours */
		if (gs_d32_load_rlx(&b->pslot[p]) != s ||
		    gs_d_load_acq(&b->slot_page[s]) != p) {
			gs_d32_faa_rel(&b->pst[p], (st & ~GS_BAM_REFS) - GS_BAM_BUSY);
			continue;
		}
		if (st & GS_BAM_DIRTY) {
			gs_d_faa(&b->writebacks, 1);
			if (gs_bam_io(b, GS_OP_WRITE, p, s)) {
				/* keep the page, still dirty; try another slot */
				gs_d32_faa_rel(&b->pst[p], (st & ~GS_BAM_REFS) - GS_BAM_BUSY);
				continue;
			}
		}
		gs_d_store_rel(&b->slot_page[s], GS_BAM_CLAIMED);
		/* release: page p is invalid (transient refs stay counted) */
		gs_d32_faa_rel(&b->pst[p], (uint32_t)-GS_BAM_BUSY);
		gs_d_faa(&b->evictions, 1);
		return s;
	}
	return GS_BAM_NOSLOT;
}

/*
 * Take a reference on @page and make it valid; returns its slot,
 * GS_BAM_NOSLOT if the read failed (b->err says why), or GS_BAM_RETRY when
 * another thread is filling or evicting the page (or no line is free).  The call itself never
 * waits for another thread of the cache, only for I/O: GPU callers loop
 * over it at warp level (gstore_cuda.h) so that the lanes of a warp that
 * wait on each other still all advance.  @dirty: the caller will write it.
 */
GS_HD uint32_t gs_bam_get_try(struct gs_bam *b, uint64_t page, int dirty)
{
	uint32_t *pw = &b->pst[page];

	for (;;) {
		/* acquire: a VALID seen here orders pslot and the line's bytes */
		uint32_t st = gs_d32_faa_acq(pw, 1);

		if (st & GS_BAM_VALID) {
			uint32_t s = gs_d32_load_rlx(&b->pslot[page]);

			if (dirty && !(st & GS_BAM_DIRTY))
				gs_d32_or(pw, GS_BAM_DIRTY);
			if (!gs_d32_load_rlx(&b->slot_ref[s]))
				gs_d32_store_rlx(&b->slot_ref[s], 1);
			return s;
		}
		gs_d32_faa_rel(pw, (uint32_t)-1);	/* undo the transient reference */
		if (st & GS_BAM_BUSY) {
			gs_d_faa(&b->busy_waits, 1);
			return GS_BAM_RETRY;
		}
		/*
		 * Claim the fill: BUSY and our reference, keeping the transient
		 * references of threads that looked meanwhile (each takes its own
		 * back).  Claiming only from exactly 0 let the lookers of one page
		 * keep each other from ever claiming it, spinning here without a
		 * pause, and a spinning lane can keep a mate of its warp (filling
		 * another page) from being scheduled.
		 */
		st = gs_d32_load_rlx(pw);
		if ((st & (GS_BAM_VALID | GS_BAM_BUSY)) ||
		    !gs_d32_cas(pw, st, st + GS_BAM_BUSY + 1))
			continue;	/* someone else began filling it: look again */
		/* we fill it */
		uint32_t s = gs_bam_victim(b);

		if (s == GS_BAM_NOSLOT) {	/* all lines in use: undo, come back later */
			gs_d32_faa_rel(pw, (uint32_t)-(GS_BAM_BUSY | 1));
			gs_d_faa(&b->busy_waits, 1);
			return GS_BAM_RETRY;
		}
		gs_d_faa(&b->misses, 1);
		gs_d32_store_rlx(&b->pslot[page], s);
		gs_d_store_rel(&b->slot_page[s], page);
		if (gs_bam_io(b, GS_OP_READ, page, s)) {
			gs_d_store_rel(&b->slot_page[s], GS_BAM_EMPTY);
			gs_d32_faa_rel(pw, (uint32_t)-(GS_BAM_BUSY | 1));
			return GS_BAM_NOSLOT;
		}
		gs_d32_store_rlx(&b->slot_ref[s], 1);
		/* release: line bytes and pslot before VALID; BUSY -> VALID in one add */
		gs_d32_faa_rel(pw, GS_BAM_VALID - GS_BAM_BUSY + (dirty ? GS_BAM_DIRTY : 0));
		return s;
	}
}

/* gs_bam_get_try() until it is not busy (CPU threads, single GPU threads). */
GS_HD uint32_t gs_bam_get(struct gs_bam *b, uint64_t page, int dirty)
{
	uint32_t s, ns = 32;

	while ((s = gs_bam_get_try(b, page, dirty)) == GS_BAM_RETRY)
		gs_d_backoff(&ns);
	return s;
}

/* Drop a reference taken by gs_bam_get(); release: our accesses come first. */
GS_HD void gs_bam_put(struct gs_bam *b, uint64_t page)
{
	gs_d32_faa_rel(&b->pst[page], (uint32_t)-1);
}

GS_HD char *gs_bam_line(struct gs_bam *b, uint32_t slot)
{
	return b->data + ((uint64_t)slot << b->line_shift);
}

/*
 * Write back dirty lines among slots first, first + stride, ... (call from
 * every thread with first = its index, stride = the thread count).  No
 * concurrent writers: flush after the kernels that write.  Returns 0 or the
 * first failure of this call (those lines stay dirty).
 */
GS_HD int gs_bam_flush_slots(struct gs_bam *b, uint64_t first, uint64_t stride)
{
	int ret = 0;

	for (uint64_t s = first; s < b->nslots; s += stride) {
		uint64_t p = gs_d_load_acq(&b->slot_page[s]);
		uint32_t st;

		if (p >= b->npages)
			continue;
		st = gs_d32_faa_acq(&b->pst[p], 1);	/* pin it */
		if ((st & GS_BAM_VALID) && (st & GS_BAM_DIRTY) &&
		    gs_d32_load_rlx(&b->pslot[p]) == s) {
			gs_d32_and(&b->pst[p], ~GS_BAM_DIRTY);
			gs_d_faa(&b->writebacks, 1);
			int r = gs_bam_io(b, GS_OP_WRITE, p, (uint32_t)s);

			if (r) {
				gs_d32_or(&b->pst[p], GS_BAM_DIRTY);
				if (!ret)
					ret = r;
			}
		}
		gs_bam_put(b, p);
	}
	return ret;
}

#endif /* GSTORE_CUDA_BAM_H */
