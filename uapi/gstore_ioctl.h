/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * gstore_nvme.ko user ABI: /dev/gstore-nvmeN.
 *
 * The module owns an NVMe controller (bound by hand through driver_override),
 * runs its admin queue and hands userspace what it needs to drive I/O queues
 * itself: DMA-able memory with bus addresses, I/O queue pairs created in that
 * memory, and an mmap of the doorbell page.  Everything an open file created
 * is torn down when it is released.  See gstore_nvme(4).
 *
 * Rules: only <linux/types.h> types, user pointers as __u64, explicit
 * reserved fields (must be zero), sizes checked at build time, unknown flags
 * rejected with -EINVAL.  Extend by adding, never by editing.
 */
#ifndef _UAPI_GSTORE_IOCTL_H
#define _UAPI_GSTORE_IOCTL_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define GSTORE_UAPI_VERSION	1
#define GSTORE_MAX_NS		16	/* namespaces reported by INFO */
#define GSTORE_DMA_ALLOC_MAX	(4u << 20)	/* largest DMA_ALLOC, bytes */
#define GSTORE_MAP_MAX		(1ull << 30)	/* largest MAP_USER / MAP_GPU, bytes */
#define GSTORE_GPU_PAGE		(64u << 10)	/* GPU pages of MAP_GPU */

struct gstore_ns_info {
	__u32 nsid;
	__u32 lba_shift;	/* log2 of the LBA size */
	__u64 nlba;		/* namespace size in LBAs */
};

/* gstore_info.flags */
#define GSTORE_INFO_P2P		(1u << 0)	/* MAP_GPU is built in */
#define GSTORE_INFO_IOMMU	(1u << 1)	/* DMA goes through an IOMMU (remapped) */

/* GSTORE_IOC_INFO: what userspace needs to size and place its queues. */
struct gstore_info {
	__u32 version;		/* GSTORE_UAPI_VERSION */
	__u32 flags;		/* GSTORE_INFO_* */
	__u16 vid;		/* PCI vendor id */
	__u16 ssvid;		/* PCI subsystem vendor id */
	__u16 max_qps;		/* I/O queue pairs the controller granted */
	__u16 qps_in_use;	/* of those, created by any open file */
	__u32 max_qd;		/* largest queue size (CAP.MQES + 1) */
	__u32 db_stride;	/* bytes between doorbell registers */
	__u32 max_xfer;		/* largest transfer (MDTS) in bytes; 0: no limit */
	__u32 ctrl_page;	/* controller memory page size (CC.MPS), bytes */
	__u32 nr_ns;		/* entries used in ns[] */
	__u32 vs;		/* NVMe version register */
	__u64 cap;		/* controller capabilities register */
	char sn[20];		/* serial, model, firmware: space padded, no NUL */
	char mn[40];
	char fr[8];
	__u32 rsvd0;
	struct gstore_ns_info ns[GSTORE_MAX_NS];
	__u64 rsvd[8];
};

/*
 * GSTORE_IOC_DMA_ALLOC: coherent DMA memory, bus-contiguous.  mmap() the
 * file at mmap_off (MAP_SHARED) to reach it.  Freed by UNMAP (once every
 * mapping of it is gone) or on release.
 */
struct gstore_dma_alloc {
	__u64 size;		/* in: bytes, page multiple, <= GSTORE_DMA_ALLOC_MAX */
	__u32 flags;		/* in: 0 */
	__u32 handle;		/* out: region handle */
	__u64 mmap_off;		/* out: offset to mmap() */
	__u64 bus_addr;		/* out: bus address of byte 0 */
};

/* gstore_map_user.flags */
#define GSTORE_MAP_DEV_READ	(1u << 0)	/* the device only reads it */

/*
 * GSTORE_IOC_MAP_USER: pin user memory long-term and map it for DMA.  The
 * bus address of every page is written to the __u64 array at bus_addrs
 * (len / page size entries).
 */
struct gstore_map_user {
	__u64 addr;		/* in: page aligned */
	__u64 len;		/* in: page multiple, <= GSTORE_MAP_MAX */
	__u64 bus_addrs;	/* in: user pointer to __u64[len / page size] */
	__u32 flags;		/* in: GSTORE_MAP_* */
	__u32 handle;		/* out: region handle */
};

/* GSTORE_IOC_MAP_GPU: GPU memory through nvidia_p2p_get_pages (-EOPNOTSUPP
 * when the module was built without the NVIDIA headers). */
struct gstore_map_gpu {
	__u64 vaddr;		/* in: GPU virtual address, GSTORE_GPU_PAGE aligned */
	__u64 len;		/* in: GSTORE_GPU_PAGE multiple, <= GSTORE_MAP_MAX */
	__u64 bus_addrs;	/* in: user pointer to __u64[len / GSTORE_GPU_PAGE] */
	__u32 flags;		/* in: 0 */
	__u32 handle;		/* out */
	__u32 page_size;	/* out: GSTORE_GPU_PAGE */
	__u32 rsvd;
};

/* GSTORE_IOC_UNMAP: drop a region (any kind).  -EBUSY while a queue uses it. */
struct gstore_unmap {
	__u32 handle;
	__u32 flags;		/* 0 */
};

/*
 * GSTORE_IOC_CREATE_QP: an I/O completion queue and submission queue of
 * @depth entries each (64-byte SQEs, 16-byte CQEs), interrupts off, in
 * regions of this file (bus-contiguous over the queue).  mmap() the file at
 * db_mmap_off for db_mmap_len bytes to reach the doorbells: the SQ tail
 * doorbell is at byte sq_db of that mapping, the CQ head doorbell at cq_db.
 * With a doorbell stride below the page size the page also holds the other
 * queues' doorbells (controller registers are never mapped).
 */
struct gstore_create_qp {
	__u32 sq_handle;	/* in: region holding the SQ */
	__u32 cq_handle;	/* in: region holding the CQ */
	__u64 sq_off;		/* in: byte offset of the SQ in its region, page aligned */
	__u64 cq_off;		/* in: same for the CQ */
	__u32 depth;		/* in: 2 .. max_qd */
	__u32 flags;		/* in: 0 */
	__u32 qid;		/* out: queue id of both SQ and CQ */
	__u32 sq_db;		/* out: byte offset of the SQ tail doorbell in the mapping */
	__u32 cq_db;		/* out: byte offset of the CQ head doorbell */
	__u32 db_mmap_len;	/* out: bytes to mmap */
	__u64 db_mmap_off;	/* out: offset to mmap() */
};

/* GSTORE_IOC_DELETE_QP: delete SQ then CQ of a queue pair of this file. */
struct gstore_delete_qp {
	__u32 qid;
	__u32 flags;		/* 0 */
};

#define GSTORE_IOC_MAGIC	'G'
#define GSTORE_IOC_INFO		_IOR(GSTORE_IOC_MAGIC, 0x00, struct gstore_info)
#define GSTORE_IOC_DMA_ALLOC	_IOWR(GSTORE_IOC_MAGIC, 0x01, struct gstore_dma_alloc)
#define GSTORE_IOC_MAP_USER	_IOWR(GSTORE_IOC_MAGIC, 0x02, struct gstore_map_user)
#define GSTORE_IOC_UNMAP	_IOW(GSTORE_IOC_MAGIC, 0x03, struct gstore_unmap)
#define GSTORE_IOC_MAP_GPU	_IOWR(GSTORE_IOC_MAGIC, 0x04, struct gstore_map_gpu)
#define GSTORE_IOC_CREATE_QP	_IOWR(GSTORE_IOC_MAGIC, 0x05, struct gstore_create_qp)
#define GSTORE_IOC_DELETE_QP	_IOW(GSTORE_IOC_MAGIC, 0x06, struct gstore_delete_qp)
#define GSTORE_IOC_NR		0x07	/* ioctls defined; the next one is this number */

#ifdef __KERNEL__
#define GSTORE_UAPI_ASSERT(c, m) static_assert(c, m)
#elif defined(__cplusplus)
#define GSTORE_UAPI_ASSERT(c, m) static_assert(c, m)
#else
#define GSTORE_UAPI_ASSERT(c, m) _Static_assert(c, m)
#endif
GSTORE_UAPI_ASSERT(sizeof(struct gstore_ns_info) == 16, "gstore_ns_info size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_info) == 440, "gstore_info size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_dma_alloc) == 32, "gstore_dma_alloc size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_map_user) == 32, "gstore_map_user size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_map_gpu) == 40, "gstore_map_gpu size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_unmap) == 8, "gstore_unmap size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_create_qp) == 56, "gstore_create_qp size");
GSTORE_UAPI_ASSERT(sizeof(struct gstore_delete_qp) == 8, "gstore_delete_qp size");

#endif /* _UAPI_GSTORE_IOCTL_H */
