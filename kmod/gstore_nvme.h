/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * gstore_nvme.ko internals, shared by the PCI/controller half (gstore_main.c),
 * the file half (gstore_file.c) and the GPU peer-to-peer half (gstore_p2p.c).
 *
 * Lifetimes: a gstore_dev lives from probe until the last open file drops it
 * (kref).  An open file (gstore_file) owns its regions and queue pairs; a
 * region is also referenced by each vma that maps it, so memory a process
 * still has mapped is freed at munmap, not at UNMAP.  Device removal tears
 * every file's objects down at once and zaps their mappings.
 *
 * Lock order: gstore_file.lock, then gstore_dev.lock (admin queue).
 */
#ifndef GSTORE_NVME_H
#define GSTORE_NVME_H

#include <linux/cdev.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/nvme.h>
#include <linux/pci.h>

#include "gstore_ioctl.h"

#define GSTORE_NAME		"gstore_nvme"
#define GSTORE_AQ_DEPTH		32		/* admin queue entries */
#define GSTORE_MAX_DEVS		64		/* minors */
#define GSTORE_WANT_QPS		64		/* I/O queue pairs asked for */
#define GSTORE_ADMIN_TIMEOUT	(30 * HZ)	/* TCG guests are slow */
#define GSTORE_MAX_REGIONS	4096		/* per open file */

/* mmap offsets: region h at h << 32; doorbell pages from GSTORE_MMAP_DB on */
#define GSTORE_MMAP_REGION_SHIFT 32
#define GSTORE_MMAP_DB		(1ull << 46)

struct gstore_dev {
	struct pci_dev *pdev;
	void __iomem *bar;
	resource_size_t bar_phys, bar_len;
	struct device *cdev;		/* /dev/gstore-nvmeN */
	int minor;
	struct kref ref;		/* probe + each open file */

	struct mutex lock;		/* everything below */
	bool removing;			/* remove() started: no new opens or queues */
	bool failed;			/* admin command timed out: controller disabled */
	struct list_head files;
	unsigned long *qids;		/* bit q: I/O queue id q in use */
	u32 qps_in_use;

	/* admin queue, polled (the module asks for no interrupt at all) */
	struct nvme_command *asq;
	struct nvme_completion *acq;
	dma_addr_t asq_dma, acq_dma;
	u16 asq_tail, acq_head, cmd_id;
	u8 acq_phase;
	void *idbuf;			/* one page for identify data */
	dma_addr_t idbuf_dma;

	/* what INFO reports; set at probe, read-only afterwards */
	u64 cap;
	u32 vs, db_stride, max_qd, max_xfer, max_qps, nr_ns;
	u16 vid, ssvid;
	bool iommu;
	char sn[20], mn[40], fr[8];
	struct gstore_ns_info ns[GSTORE_MAX_NS];
};

enum gstore_region_type {
	GSTORE_REG_DMA,		/* dma_alloc_coherent */
	GSTORE_REG_USER,	/* pinned user pages */
	GSTORE_REG_GPU,		/* nvidia_p2p pages */
};

struct gstore_p2p;

struct gstore_region {
	struct kref ref;		/* the handle + each vma */
	struct gstore_dev *gd;
	enum gstore_region_type type;
	u32 handle;
	u32 flags;
	u64 size;
	unsigned int qp_users;		/* queue pairs living in it (file lock) */
	bool mem_freed;
	/* GSTORE_REG_DMA */
	void *cpu;
	dma_addr_t dma;
	/* GSTORE_REG_USER */
	struct page **pages;
	dma_addr_t *addrs;
	unsigned long npages, nmapped;
	/* GSTORE_REG_GPU */
	struct gstore_p2p *p2p;
};

struct gstore_qp {
	struct list_head node;
	u16 qid;
	u32 depth;
	struct gstore_region *sq, *cq;
};

struct gstore_file {
	struct kref ref;		/* the open file + remove() while it works on it */
	struct gstore_dev *gd;
	struct address_space *mapping;	/* to zap user mappings on removal */
	struct list_head node;		/* in gd->files */

	struct mutex lock;		/* everything below */
	bool dead;			/* torn down: every ioctl and mmap fails */
	struct idr regions;
	struct list_head qps;
};

/* gstore_main.c */
int gstore_admin(struct gstore_dev *gd, struct nvme_command *c, u32 *result);
int gstore_qp_hw_create(struct gstore_dev *gd, u16 qid, u32 depth, dma_addr_t sq, dma_addr_t cq);
int gstore_qp_hw_delete(struct gstore_dev *gd, u16 qid);
int gstore_qid_get(struct gstore_dev *gd);
void gstore_qid_put(struct gstore_dev *gd, u16 qid);
void gstore_dev_put(struct gstore_dev *gd);

/* gstore_file.c */
extern const struct file_operations gstore_fops;
struct gstore_dev *gstore_dev_lookup(int minor);
void gstore_files_revoke(struct gstore_dev *gd);

/* gstore_p2p.c */
int gstore_p2p_map(struct gstore_region *r, u64 vaddr, u64 len, u64 __user *bus);
void gstore_p2p_unmap(struct gstore_region *r);
bool gstore_p2p_supported(void);

#endif /* GSTORE_NVME_H */
