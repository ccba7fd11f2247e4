// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gstore_nvme.ko: the file half.  Each open file of /dev/gstore-nvmeN owns
 * DMA regions (coherent memory, pinned user pages, GPU pages) and I/O queue
 * pairs placed in them; ioctls create and destroy them, mmap() reaches the
 * coherent memory and the queues' doorbell page.
 *
 * Teardown order, on release and on device removal alike: zap user
 * mappings (removal only), delete every SQ then its CQ (the controller
 * finishes or aborts their commands first, so nothing DMAs afterwards),
 * then unmap and unpin / free every region.  While a file has queue pairs
 * its regions cannot be unmapped (-EBUSY): a command in flight may name them.
 */
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/nospec.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/version.h>

#include "gstore_nvme.h"

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define set_vm_flags(vma, f)	vm_flags_set(vma, f)
#else
#define set_vm_flags(vma, f)	((vma)->vm_flags |= (f))
#endif

/* ---- regions ---- */

static void region_free_mem(struct gstore_region *r)
{
	struct device *dev = &r->gd->pdev->dev;
	enum dma_data_direction dir;
	unsigned long i;

	if (r->mem_freed)
		return;
	r->mem_freed = true;
	switch (r->type) {
	case GSTORE_REG_DMA:
		dma_free_coherent(dev, r->size, r->cpu, r->dma);
		break;
	case GSTORE_REG_USER:
		dir = r->flags & GSTORE_MAP_DEV_READ ? DMA_TO_DEVICE : DMA_BIDIRECTIONAL;
		for (i = 0; i < r->nmapped; i++)
			dma_unmap_page(dev, r->addrs[i], PAGE_SIZE, dir);
		if (r->pages)
			unpin_user_pages_dirty_lock(r->pages, r->npages,
						    !(r->flags & GSTORE_MAP_DEV_READ));
		kvfree(r->pages);
		kvfree(r->addrs);
		break;
	case GSTORE_REG_GPU:
		gstore_p2p_unmap(r);
		break;
	}
}

static void region_release(struct kref *ref)
{
	struct gstore_region *r = container_of(ref, struct gstore_region, ref);

	region_free_mem(r);
	kfree(r);
}

static struct gstore_region *region_alloc(struct gstore_file *f, enum gstore_region_type type,
					  u64 size, u32 flags)
{
	struct gstore_region *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (!r)
		return NULL;
	kref_init(&r->ref);
	r->gd = f->gd;
	r->type = type;
	r->size = size;
	r->flags = flags;
	r->mem_freed = true;	/* nothing to free until the caller fills it in */
	return r;
}

/* Give a region its handle (file lock held). */
static int region_insert(struct gstore_file *f, struct gstore_region *r)
{
	int id = idr_alloc(&f->regions, r, 1, GSTORE_MAX_REGIONS, GFP_KERNEL);

	if (id < 0)
		return id == -ENOSPC ? -ENOMEM : id;
	r->handle = id;
	return 0;
}

static struct gstore_region *region_new(struct gstore_file *f, enum gstore_region_type type,
					u64 size, u32 flags)
{
	struct gstore_region *r = region_alloc(f, type, size, flags);
	int ret;

	if (!r)
		return ERR_PTR(-ENOMEM);
	ret = region_insert(f, r);
	if (ret) {
		kfree(r);
		return ERR_PTR(ret);
	}
	return r;
}

/* Drop a region's handle; its memory goes when the last mapping of it does. */
static void region_drop(struct gstore_file *f, struct gstore_region *r)
{
	idr_remove(&f->regions, r->handle);
	kref_put(&r->ref, region_release);
}

/* Bus address of [off, off + len) of a region if it is bus-contiguous there. */
static int region_bus(struct gstore_region *r, u64 off, u64 len, dma_addr_t *bus)
{
	u64 i, first, last;

	if (off & ~PAGE_MASK || len > r->size || off > r->size - len || !len)
		return -EINVAL;
	switch (r->type) {
	case GSTORE_REG_DMA:
		*bus = r->dma + off;
		return 0;
	case GSTORE_REG_USER:
		first = off >> PAGE_SHIFT;
		last = (off + len - 1) >> PAGE_SHIFT;
		for (i = first; i < last; i++)
			if (r->addrs[i + 1] != r->addrs[i] + PAGE_SIZE)
				return -EINVAL;
		*bus = r->addrs[first];
		return 0;
	default:
		return -EINVAL;	/* GPU-resident queues: not yet */
	}
}

/* ---- queue pairs ---- */

static void qp_db_span(struct gstore_dev *gd, u16 qid, u64 *first, u32 *len, u32 *sq_db)
{
	u64 db = NVME_REG_DBS + 2ull * qid * gd->db_stride;
	u64 end = db + gd->db_stride + 4;	/* CQ head doorbell, inclusive */

	*first = db & PAGE_MASK;
	*len = PAGE_ALIGN(end) - *first;
	*sq_db = db - *first;
}

static void qp_destroy(struct gstore_file *f, struct gstore_qp *qp)
{
	gstore_qp_hw_delete(f->gd, qp->qid);	/* failure disables the controller */
	gstore_qid_put(f->gd, qp->qid);
	qp->sq->qp_users--;
	qp->cq->qp_users--;
	list_del(&qp->node);
	kfree(qp);
}

/* Everything the file created, in order.  Caller holds f->lock. */
static void file_teardown(struct gstore_file *f)
{
	struct gstore_qp *qp, *tmp;
	struct gstore_region *r;
	int id;

	list_for_each_entry_safe(qp, tmp, &f->qps, node)
		qp_destroy(f, qp);
	idr_for_each_entry(&f->regions, r, id) {
		/* no queue is left to DMA: free even if a (zapped) vma still refers to it */
		region_free_mem(r);
		region_drop(f, r);
	}
}

/* ---- ioctls ---- */

static long ioc_info(struct gstore_file *f, void *arg)
{
	struct gstore_dev *gd = f->gd;
	struct gstore_info *in = arg;

	memset(in, 0, sizeof(*in));
	in->version = GSTORE_UAPI_VERSION;
	in->flags = (gstore_p2p_supported() ? GSTORE_INFO_P2P : 0) |
		    (gd->iommu ? GSTORE_INFO_IOMMU : 0);
	in->vid = gd->vid;
	in->ssvid = gd->ssvid;
	in->max_qps = gd->max_qps;
	in->qps_in_use = READ_ONCE(gd->qps_in_use);
	in->max_qd = gd->max_qd;
	in->db_stride = gd->db_stride;
	in->max_xfer = gd->max_xfer;
	in->ctrl_page = PAGE_SIZE;
	in->nr_ns = gd->nr_ns;
	in->vs = gd->vs;
	in->cap = gd->cap;
	memcpy(in->sn, gd->sn, sizeof(in->sn));
	memcpy(in->mn, gd->mn, sizeof(in->mn));
	memcpy(in->fr, gd->fr, sizeof(in->fr));
	memcpy(in->ns, gd->ns, sizeof(in->ns));
	return 0;
}

static long ioc_dma_alloc(struct gstore_file *f, void *arg)
{
	struct gstore_dma_alloc *a = arg;
	struct gstore_region *r;

	if (a->flags || !a->size || a->size & ~PAGE_MASK || a->size > GSTORE_DMA_ALLOC_MAX)
		return -EINVAL;
	r = region_new(f, GSTORE_REG_DMA, a->size, 0);
	if (IS_ERR(r))
		return PTR_ERR(r);
	r->cpu = dma_alloc_coherent(&f->gd->pdev->dev, a->size, &r->dma, GFP_KERNEL);
	if (!r->cpu) {
		region_drop(f, r);
		return -ENOMEM;
	}
	r->mem_freed = false;
	a->handle = r->handle;
	a->mmap_off = (u64)r->handle << GSTORE_MMAP_REGION_SHIFT;
	a->bus_addr = r->dma;
	return 0;
}

/*
 * Pinning and put_user() may take mmap_lock, and mmap() calls us with
 * mmap_lock held and then takes the file lock: so MAP_USER pins and maps
 * without the file lock and takes it only to publish the region.
 */
static long ioc_map_user(struct gstore_file *f, void *arg)
{
	struct gstore_map_user *m = arg;
	u64 __user *bus = u64_to_user_ptr(m->bus_addrs);
	struct device *dev = &f->gd->pdev->dev;
	enum dma_data_direction dir;
	struct gstore_region *r;
	unsigned long i, n;
	long pinned;
	int ret;

	if (m->flags & ~GSTORE_MAP_DEV_READ || !m->len || (m->addr | m->len) & ~PAGE_MASK ||
	    m->len > GSTORE_MAP_MAX || m->addr + m->len < m->addr)
		return -EINVAL;
	n = m->len >> PAGE_SHIFT;
	if (!access_ok(bus, n * sizeof(u64)))
		return -EFAULT;
	r = region_alloc(f, GSTORE_REG_USER, m->len, m->flags);
	if (!r)
		return -ENOMEM;
	ret = -ENOMEM;
	r->pages = kvcalloc(n, sizeof(*r->pages), GFP_KERNEL);
	r->addrs = kvcalloc(n, sizeof(*r->addrs), GFP_KERNEL);
	if (!r->pages || !r->addrs)
		goto free_arrays;
	pinned = pin_user_pages_fast(m->addr, n, FOLL_LONGTERM |
				     (m->flags & GSTORE_MAP_DEV_READ ? 0 : FOLL_WRITE), r->pages);
	if (pinned != n) {
		if (pinned > 0)
			unpin_user_pages(r->pages, pinned);
		ret = pinned < 0 ? pinned : -EFAULT;
		goto free_arrays;
	}
	r->npages = n;
	r->mem_freed = false;	/* from here region_free_mem() undoes what was done */
	dir = m->flags & GSTORE_MAP_DEV_READ ? DMA_TO_DEVICE : DMA_BIDIRECTIONAL;
	for (i = 0; i < n; i++) {
		r->addrs[i] = dma_map_page(dev, r->pages[i], 0, PAGE_SIZE, dir);
		if (dma_mapping_error(dev, r->addrs[i]))
			goto put;
		r->nmapped++;
		if (put_user((u64)r->addrs[i], &bus[i])) {
			ret = -EFAULT;
			goto put;
		}
		cond_resched();
	}
	mutex_lock(&f->lock);
	ret = f->dead ? -ENODEV : region_insert(f, r);
	mutex_unlock(&f->lock);
	if (ret)
		goto put;
	m->handle = r->handle;
	return 0;

free_arrays:
	kvfree(r->pages);
	kvfree(r->addrs);
	r->pages = NULL;
	r->addrs = NULL;
put:
	kref_put(&r->ref, region_release);
	return ret;
}

/* Like MAP_USER, without the file lock while pages are taken and bus
 * addresses copied out. */
static long ioc_map_gpu(struct gstore_file *f, void *arg)
{
	struct gstore_map_gpu *m = arg;
	struct gstore_region *r;
	int ret;

	if (m->flags || m->rsvd || !m->len || (m->vaddr | m->len) & (GSTORE_GPU_PAGE - 1) ||
	    m->len > GSTORE_MAP_MAX || m->vaddr + m->len < m->vaddr)
		return -EINVAL;
	if (!gstore_p2p_supported())
		return -EOPNOTSUPP;
	r = region_alloc(f, GSTORE_REG_GPU, m->len, 0);
	if (!r)
		return -ENOMEM;
	ret = gstore_p2p_map(r, m->vaddr, m->len, u64_to_user_ptr(m->bus_addrs));
	if (!ret) {
		mutex_lock(&f->lock);
		ret = f->dead ? -ENODEV : region_insert(f, r);
		mutex_unlock(&f->lock);
	}
	if (ret) {
		kref_put(&r->ref, region_release);
		return ret;
	}
	m->handle = r->handle;
	m->page_size = GSTORE_GPU_PAGE;
	return 0;
}

static long ioc_unmap(struct gstore_file *f, void *arg)
{
	struct gstore_unmap *u = arg;
	struct gstore_region *r;

	if (u->flags)
		return -EINVAL;
	r = idr_find(&f->regions, u->handle);
	if (!r)
		return -EINVAL;
	if (r->qp_users || !list_empty(&f->qps))
		return -EBUSY;	/* queues may still DMA to it: delete them first */
	region_drop(f, r);
	return 0;
}

static long ioc_create_qp(struct gstore_file *f, void *arg)
{
	struct gstore_create_qp *c = arg;
	struct gstore_dev *gd = f->gd;
	struct gstore_region *sq, *cq;
	dma_addr_t sq_bus, cq_bus;
	struct gstore_qp *qp;
	u64 first;
	int ret, qid;

	if (c->flags || c->depth < 2 || c->depth > gd->max_qd)
		return -EINVAL;
	sq = idr_find(&f->regions, c->sq_handle);
	cq = idr_find(&f->regions, c->cq_handle);
	if (!sq || !cq)
		return -EINVAL;
	ret = region_bus(sq, c->sq_off, (u64)c->depth * sizeof(struct nvme_command), &sq_bus);
	if (ret)
		return ret;
	ret = region_bus(cq, c->cq_off, (u64)c->depth * sizeof(struct nvme_completion), &cq_bus);
	if (ret)
		return ret;
	if (sq == cq && c->sq_off < c->cq_off + (u64)c->depth * sizeof(struct nvme_completion) &&
	    c->cq_off < c->sq_off + (u64)c->depth * sizeof(struct nvme_command))
		return -EINVAL;	/* overlapping queues */
	qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	qid = gstore_qid_get(gd);
	if (qid < 0) {
		ret = qid;
		goto free_qp;
	}
	ret = gstore_qp_hw_create(gd, qid, c->depth, sq_bus, cq_bus);
	if (ret)
		goto put_qid;
	qp->qid = qid;
	qp->depth = c->depth;
	qp->sq = sq;
	qp->cq = cq;
	sq->qp_users++;
	cq->qp_users++;
	list_add_tail(&qp->node, &f->qps);

	c->qid = qid;
	qp_db_span(gd, qid, &first, &c->db_mmap_len, &c->sq_db);
	c->cq_db = c->sq_db + gd->db_stride;
	c->db_mmap_off = GSTORE_MMAP_DB + first;
	return 0;

put_qid:
	gstore_qid_put(gd, qid);
free_qp:
	kfree(qp);
	return ret;
}

static struct gstore_qp *qp_find(struct gstore_file *f, u32 qid)
{
	struct gstore_qp *qp;

	list_for_each_entry(qp, &f->qps, node)
		if (qp->qid == qid)
			return qp;
	return NULL;
}

static long ioc_delete_qp(struct gstore_file *f, void *arg)
{
	struct gstore_delete_qp *d = arg;
	struct gstore_qp *qp;

	if (d->flags)
		return -EINVAL;
	qp = qp_find(f, d->qid);
	if (!qp)
		return -EINVAL;
	qp_destroy(f, qp);
	return f->gd->failed ? -EIO : 0;
}

/* Undo a successful create whose result could not be copied to the user. */
static void undo_region(struct gstore_file *f, void *arg, unsigned int off)
{
	struct gstore_region *r = idr_find(&f->regions, *(u32 *)((char *)arg + off));

	if (r && !r->qp_users)
		region_drop(f, r);
}

static void undo_dma_alloc(struct gstore_file *f, void *arg)
{
	undo_region(f, arg, offsetof(struct gstore_dma_alloc, handle));
}

static void undo_map_user(struct gstore_file *f, void *arg)
{
	undo_region(f, arg, offsetof(struct gstore_map_user, handle));
}

static void undo_map_gpu(struct gstore_file *f, void *arg)
{
	undo_region(f, arg, offsetof(struct gstore_map_gpu, handle));
}

static void undo_create_qp(struct gstore_file *f, void *arg)
{
	struct gstore_qp *qp = qp_find(f, ((struct gstore_create_qp *)arg)->qid);

	if (qp)
		qp_destroy(f, qp);
}

struct gstore_ioctl_desc {
	unsigned int cmd;
	long (*fn)(struct gstore_file *f, void *arg);
	void (*undo)(struct gstore_file *f, void *arg);
	bool unlocked;		/* fn takes the file lock itself */
};

#define IOC(c, f, u) [_IOC_NR(c)] = { .cmd = (c), .fn = (f), .undo = (u) }
#define IOC_UNLOCKED(c, f, u) \
	[_IOC_NR(c)] = { .cmd = (c), .fn = (f), .undo = (u), .unlocked = true }
static const struct gstore_ioctl_desc gstore_ioctls[] = {
	IOC(GSTORE_IOC_INFO, ioc_info, NULL),
	IOC(GSTORE_IOC_DMA_ALLOC, ioc_dma_alloc, undo_dma_alloc),
	IOC_UNLOCKED(GSTORE_IOC_MAP_USER, ioc_map_user, undo_map_user),
	IOC(GSTORE_IOC_UNMAP, ioc_unmap, NULL),
	IOC_UNLOCKED(GSTORE_IOC_MAP_GPU, ioc_map_gpu, undo_map_gpu),
	IOC(GSTORE_IOC_CREATE_QP, ioc_create_qp, undo_create_qp),
	IOC(GSTORE_IOC_DELETE_QP, ioc_delete_qp, NULL),
};
static_assert(ARRAY_SIZE(gstore_ioctls) == GSTORE_IOC_NR, "every ioctl has a handler");

union gstore_ioctl_arg {
	struct gstore_info info;
	struct gstore_dma_alloc dma_alloc;
	struct gstore_map_user map_user;
	struct gstore_map_gpu map_gpu;
	struct gstore_unmap unmap;
	struct gstore_create_qp create_qp;
	struct gstore_delete_qp delete_qp;
};

static long gstore_ioctl(struct file *file, unsigned int cmd, unsigned long uarg)
{
	struct gstore_file *f = file->private_data;
	void __user *up = (void __user *)uarg;
	const struct gstore_ioctl_desc *d;
	union gstore_ioctl_arg arg;
	unsigned int nr = _IOC_NR(cmd);
	size_t size = _IOC_SIZE(cmd);
	long ret;

	if (_IOC_TYPE(cmd) != GSTORE_IOC_MAGIC || nr >= ARRAY_SIZE(gstore_ioctls))
		return -ENOTTY;
	d = &gstore_ioctls[array_index_nospec(nr, ARRAY_SIZE(gstore_ioctls))];
	if (d->cmd != cmd || size > sizeof(arg))
		return -ENOTTY;
	memset(&arg, 0, sizeof(arg));
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&arg, up, size))
		return -EFAULT;

	if (d->unlocked) {
		ret = d->fn(f, &arg);
	} else {
		mutex_lock(&f->lock);
		ret = f->dead ? -ENODEV : d->fn(f, &arg);
		mutex_unlock(&f->lock);
	}
	/* copy out unlocked: a fault takes mmap_lock, which mmap() holds
	 * while it waits for the file lock */
	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(up, &arg, size)) {
		mutex_lock(&f->lock);
		if (d->undo && !f->dead)
			d->undo(f, &arg);
		mutex_unlock(&f->lock);
		ret = -EFAULT;
	}
	return ret;
}

/* ---- mmap ---- */

/*
 * Both kinds of mapping are VM_PFNMAP and filled by their fault handler
 * (vmf_insert_pfn), never by remap_pfn_range() at mmap time: a remapped vma
 * carries VM_PAT, and zapping one with unmap_mapping_range() (device
 * removal) leaves VM_PAT behind on this kernel, so the process's later
 * munmap or exit WARNs in untrack_pfn().  The handlers check under the file
 * lock that the file is alive, so nothing is mapped again after removal.
 */
static vm_fault_t region_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gstore_file *f = vma->vm_file->private_data;
	struct gstore_region *r = vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;	/* from the region's start */
	vm_fault_t ret = VM_FAULT_SIGBUS;
	unsigned long pfn;
	void *cpu;

	mutex_lock(&f->lock);
	if (!f->dead && !r->mem_freed && off < r->size) {
		cpu = (char *)r->cpu + off;
		pfn = is_vmalloc_addr(cpu) ? vmalloc_to_pfn(cpu) : PHYS_PFN(virt_to_phys(cpu));
		ret = vmf_insert_pfn(vma, vmf->address, pfn);
	}
	mutex_unlock(&f->lock);
	return ret;
}

static void region_vm_open(struct vm_area_struct *vma)
{
	struct gstore_region *r = vma->vm_private_data;

	kref_get(&r->ref);
}

static void region_vm_close(struct vm_area_struct *vma)
{
	struct gstore_region *r = vma->vm_private_data;

	kref_put(&r->ref, region_release);
}

static const struct vm_operations_struct region_vm_ops = {
	.open = region_vm_open,
	.close = region_vm_close,
	.fault = region_vm_fault,
};

static vm_fault_t db_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct gstore_file *f = vma->vm_file->private_data;
	u64 off = ((u64)vmf->pgoff << PAGE_SHIFT) - GSTORE_MMAP_DB;	/* in BAR0 */
	vm_fault_t ret = VM_FAULT_SIGBUS;

	mutex_lock(&f->lock);
	if (!f->dead && off < f->gd->bar_len)
		ret = vmf_insert_pfn(vma, vmf->address, (f->gd->bar_phys + off) >> PAGE_SHIFT);
	mutex_unlock(&f->lock);
	return ret;
}

static const struct vm_operations_struct db_vm_ops = {
	.fault = db_vm_fault,
};

static int mmap_db(struct gstore_file *f, struct vm_area_struct *vma, u64 off, u64 len)
{
	struct gstore_dev *gd = f->gd;
	struct gstore_qp *qp;
	u64 first;
	u32 qlen, sq_db;

	list_for_each_entry(qp, &f->qps, node) {
		qp_db_span(gd, qp->qid, &first, &qlen, &sq_db);
		if (off == first && len <= qlen && off + len <= gd->bar_len)
			goto found;
	}
	return -EINVAL;	/* only doorbell pages of this file's queues */
found:
	vma->vm_page_prot = pgprot_noncached(vma->vm_page_prot);
	set_vm_flags(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_ops = &db_vm_ops;
	return 0;
}

static int mmap_dma(struct gstore_file *f, struct vm_area_struct *vma, u64 off, u64 len)
{
	u32 handle = off >> GSTORE_MMAP_REGION_SHIFT;
	u64 roff = off & ((1ull << GSTORE_MMAP_REGION_SHIFT) - 1);
	struct gstore_region *r = idr_find(&f->regions, handle);

	if (!r || r->type != GSTORE_REG_DMA || roff >= r->size || len > r->size - roff)
		return -EINVAL;
	/* from here vm_pgoff counts pages from the region's start */
	vma->vm_pgoff = roff >> PAGE_SHIFT;
	set_vm_flags(vma, VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	kref_get(&r->ref);
	vma->vm_private_data = r;
	vma->vm_ops = &region_vm_ops;
	return 0;
}

static int gstore_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct gstore_file *f = file->private_data;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	u64 len = vma->vm_end - vma->vm_start;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	mutex_lock(&f->lock);
	if (f->dead)
		ret = -ENODEV;
	else if (off >= GSTORE_MMAP_DB)
		ret = mmap_db(f, vma, off - GSTORE_MMAP_DB, len);
	else
		ret = mmap_dma(f, vma, off, len);
	mutex_unlock(&f->lock);
	return ret;
}

/* ---- open / release / removal ---- */

static void file_release_ref(struct kref *ref)
{
	struct gstore_file *f = container_of(ref, struct gstore_file, ref);

	idr_destroy(&f->regions);
	gstore_dev_put(f->gd);
	kfree(f);
}

static int gstore_open(struct inode *inode, struct file *file)
{
	struct gstore_dev *gd;
	struct gstore_file *f;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	gd = gstore_dev_lookup(iminor(inode));
	if (!gd)
		return -ENODEV;
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f) {
		gstore_dev_put(gd);
		return -ENOMEM;
	}
	kref_init(&f->ref);
	mutex_init(&f->lock);
	idr_init(&f->regions);
	INIT_LIST_HEAD(&f->qps);
	f->gd = gd;
	f->mapping = file->f_mapping;

	mutex_lock(&gd->lock);
	if (gd->removing) {
		mutex_unlock(&gd->lock);
		kref_put(&f->ref, file_release_ref);
		return -ENODEV;
	}
	list_add_tail(&f->node, &gd->files);
	mutex_unlock(&gd->lock);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

static int gstore_release(struct inode *inode, struct file *file)
{
	struct gstore_file *f = file->private_data;
	struct gstore_dev *gd = f->gd;

	mutex_lock(&f->lock);
	if (!f->dead) {
		f->dead = true;
		file_teardown(f);
	}
	mutex_unlock(&f->lock);
	mutex_lock(&gd->lock);
	list_del_init(&f->node);
	mutex_unlock(&gd->lock);
	kref_put(&f->ref, file_release_ref);
	return 0;
}

/* Device removal: take everything away from every open file. */
void gstore_files_revoke(struct gstore_dev *gd)
{
	struct gstore_file *f;

	for (;;) {
		mutex_lock(&gd->lock);
		f = list_first_entry_or_null(&gd->files, struct gstore_file, node);
		if (f) {
			list_del_init(&f->node);
			kref_get(&f->ref);
		}
		mutex_unlock(&gd->lock);
		if (!f)
			break;
		mutex_lock(&f->lock);
		if (!f->dead) {
			f->dead = true;
			/* user accesses fault (SIGBUS) from here on */
			unmap_mapping_range(f->mapping, 0, 0, 1);
			file_teardown(f);
		}
		mutex_unlock(&f->lock);
		kref_put(&f->ref, file_release_ref);
	}
}

const struct file_operations gstore_fops = {
	.owner = THIS_MODULE,
	.open = gstore_open,
	.release = gstore_release,
	.unlocked_ioctl = gstore_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = gstore_mmap,
	.llseek = no_llseek,
};
