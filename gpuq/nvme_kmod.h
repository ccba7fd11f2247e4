/* SPDX-License-Identifier: MIT */
/*
 * Userspace side of gstore_nvme.ko (/dev/gstore-nvmeN): queue pairs mapped
 * into this process and user memory mapped for DMA.  Used by the "nvme"
 * backend (gpuq/nvme.c), `gstore nvme` and the QEMU guest tests.
 */
#ifndef GS_NVME_KMOD_H
#define GS_NVME_KMOD_H

#include <stddef.h>
#include <stdint.h>

#include "gstore_ioctl.h"
#include "gstore_nvmeq.h"

struct gs_backend_ops;
extern const struct gs_backend_ops gs_backend_nvme;		/* gpuq/nvme.c */
extern const struct gs_backend_ops gs_backend_uring_passthru;	/* gpuq/passthru.c */

#define GS_NVME_PAGE	4096u	/* controller memory page (CC.MPS = host page) */

/* One I/O queue pair created through the module and mapped here. */
struct gs_kq {
	struct gs_nvmeq q;		/* first: cache-line aligned state */
	int fd;
	uint32_t qid;
	uint32_t nslots;
	uint32_t qmem_handle;		/* DMA_ALLOC region holding SQ, then CQ */
	void *qmem;
	size_t qmem_len;
	void *db;			/* doorbell page(s) */
	size_t db_len;
	void *state;			/* gs_nvmeq bookkeeping */
};

/* User memory pinned and mapped for DMA: bus address per 4 KiB page. */
struct gs_kmap {
	char *addr;
	size_t len;
	uint32_t handle;
	uint64_t *bus;
};

int gs_kmod_info(int fd, struct gstore_info *info);
/* @nslots: power of two; the queues get nslots + 1 entries. */
int gs_kq_create(int fd, uint32_t nslots, struct gs_kq *kq);
/* Deletes the queue pair; its memory region is unmapped only when
 * @unmap_region (the module refuses while the file has queue pairs). */
int gs_kq_destroy(struct gs_kq *kq, int unmap_region);
int gs_kmap_user(int fd, void *addr, size_t len, uint32_t flags, struct gs_kmap *m);
int gs_kmap_unmap(int fd, struct gs_kmap *m);
/* PRPs for [buf, buf + len) inside @m (buf 4-byte aligned).  Uses
 * @list (one 4 KiB page at bus address @list_bus) when more than two pages
 * are touched; len <= 512 pages.  Returns 0 or -EINVAL. */
int gs_kmap_prp(const struct gs_kmap *m, const void *buf, uint32_t len, uint64_t *list,
		uint64_t list_bus, uint64_t *prp1, uint64_t *prp2);

#endif /* GS_NVME_KMOD_H */
