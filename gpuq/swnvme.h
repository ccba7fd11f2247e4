/* SPDX-License-Identifier: MIT */
/*
 * A software NVMe controller: a CPU thread that serves real NVMe I/O queues
 * (64-byte SQEs, 16-byte CQEs with phase bits, tail/head doorbell words)
 * from ordinary memory, backed by a file through io_uring.
 *
 * It exists so that the BaM queue code (gstore_nvmeq.h), which fills SQs and
 * rings doorbells from CPU threads or CUDA kernels, runs and is tested on
 * machines without an NVMe device: CI (CPU threads) and the GPU machine
 * (queues and doorbells in pinned host memory mapped into the GPU).
 *
 * What it emulates:
 *   - a BAR: CAP/VS at 0x0/0x8, doorbells from 0x1000 with DSTRD = 0
 *     (SQyTDBL at 0x1000 + 8y, CQyHDBL at 0x1000 + 8y + 4), in memory the
 *     caller may place (pinned and GPU-mapped);
 *   - I/O commands Read (0x02), Write (0x01), Flush (0x00) on namespace 1,
 *     PRP1/PRP2 and PRP lists, 4 KiB memory pages, MDTS 256 KiB;
 *   - status codes: Invalid Opcode, Invalid Field, Data Transfer Error,
 *     Invalid Namespace, LBA Out of Range;
 *   - completions out of order, each CQE carrying the SQ head.
 * What it does not: the admin queue (qpairs are created by a call, the
 * "Create I/O SQ/CQ" commands done out of band), interrupts, SGLs.
 *
 * Addresses in PRPs are "bus addresses": the controller translates them
 * through windows registered with gs_swnvme_map() (identity maps are fine)
 * and fails a command touching anything else with Data Transfer Error.
 */
#ifndef GS_SWNVME_H
#define GS_SWNVME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* the CUDA library (libgstore_cuda.a) drives the controller through libgstore.so */
#pragma GCC visibility push(default)

struct gs_swnvme;

#define GS_SWNVME_DB_BASE	0x1000u
#define GS_SWNVME_PAGE		4096u
#define GS_SWNVME_MDTS		(256u * 1024)

enum {
	GS_SWNVME_BUFFERED = 1u << 0,	/* no O_DIRECT (tmpfs files, unit tests) */
	GS_SWNVME_CREATE = 1u << 1,	/* create/extend the file to .size */
};

struct gs_swnvme_params {
	const char *path;	/* backing file or block device */
	uint64_t size;		/* with GS_SWNVME_CREATE: bytes */
	uint32_t flags;		/* GS_SWNVME_* */
	uint32_t lba_shift;	/* 9 or 12 (0: 12) */
	uint32_t max_qpairs;	/* I/O queue pairs 1..max (0: 64) */
	uint32_t depth;		/* io_uring depth: commands in flight to the file (0: 256) */
	uint32_t spin_us;	/* poll this long after the last command before napping (0: 200) */
	void *bar;		/* doorbell memory of gs_swnvme_bar_bytes(); NULL: allocated */
};

/* Bytes of BAR memory for @max_qpairs queue pairs. */
size_t gs_swnvme_bar_bytes(uint32_t max_qpairs);

int gs_swnvme_start(struct gs_swnvme **cp, const struct gs_swnvme_params *p);
/* Stops the thread after the commands in flight finish. */
void gs_swnvme_stop(struct gs_swnvme *c);

/* The BAR (CAP, VS, doorbells): hand it to the queue code. */
void *gs_swnvme_bar(struct gs_swnvme *c);
uint32_t gs_swnvme_lba_shift(struct gs_swnvme *c);
uint64_t gs_swnvme_nlba(struct gs_swnvme *c);

/* Make [iova, iova + len) reachable by PRPs, backed by @addr. */
int gs_swnvme_map(struct gs_swnvme *c, uint64_t iova, void *addr, size_t len);

/*
 * Create I/O queue pair @qid (1..max_qpairs): @depth entries (2..65536) of
 * SQ at @sq_iova and CQ at @cq_iova (mapped windows, zeroed by the caller).
 * The controller starts with SQ head 0, CQ tail 0 and phase 1.
 */
int gs_swnvme_create_qpair(struct gs_swnvme *c, uint16_t qid, uint64_t sq_iova,
			   uint64_t cq_iova, uint32_t depth);
/* Stop serving @qid; returns once the thread no longer touches its memory
 * (commands of it still in flight complete into the void). */
int gs_swnvme_delete_qpair(struct gs_swnvme *c, uint16_t qid);

struct gs_swnvme_stats {
	uint64_t cmds;		/* commands completed */
	uint64_t errors;	/* completed with a non-zero status */
	uint64_t read_bytes, write_bytes;
	uint64_t db_reads;	/* doorbell polls that found new work */
	uint64_t cq_full;	/* times a completion waited for CQ space */
};
void gs_swnvme_get_stats(struct gs_swnvme *c, struct gs_swnvme_stats *st);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GS_SWNVME_H */
