// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gstore_nvme.ko: the PCI half.  Binds to an NVMe controller only when told
 * to (driver_override), resets and enables it, runs the admin queue (polled,
 * no interrupts), identifies the controller and its namespaces and creates
 * /dev/gstore-nvmeN.  I/O queues are created here on behalf of open files
 * (gstore_file.c); userspace drives them.
 */
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/iommu.h>
#include <linux/module.h>
#include <linux/version.h>

#include "gstore_nvme.h"

static DEFINE_MUTEX(gstore_devs_lock);	/* gstore_devs */
static DEFINE_IDR(gstore_devs);		/* minor -> gstore_dev */
static dev_t gstore_devt;
static struct cdev gstore_cdev;
static struct class *gstore_class;

/* ---- admin queue ---- */

static int nvme_status_errno(u16 status)
{
	switch (status & 0x7ff) {	/* status code type + status code */
	case NVME_SC_SUCCESS:
		return 0;
	case NVME_SC_INVALID_FIELD:
	case NVME_SC_INVALID_NS:
	case NVME_SC_QID_INVALID:
	case NVME_SC_QUEUE_SIZE:
	case NVME_SC_INVALID_VECTOR:
	case NVME_SC_INVALID_QUEUE:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* Disable the controller: stops every queue and all DMA.  Used when an
 * admin command fails to complete, so memory can be freed safely. */
static void ctrl_kill(struct gstore_dev *gd)
{
	unsigned long timeout = jiffies + (NVME_CAP_TIMEOUT(gd->cap) + 1) * HZ / 2;
	u32 cc = readl(gd->bar + NVME_REG_CC);

	gd->failed = true;
	writel(cc & ~NVME_CC_ENABLE, gd->bar + NVME_REG_CC);
	while (readl(gd->bar + NVME_REG_CSTS) & NVME_CSTS_RDY) {
		if (time_after(jiffies, timeout) || readl(gd->bar + NVME_REG_CSTS) == ~0u)
			break;
		msleep(1);
	}
	dev_err(&gd->pdev->dev, "controller disabled after an admin failure\n");
}

/*
 * Run one admin command and wait for it (polled).  Returns 0, -errno mapped
 * from the NVMe status, -ETIMEDOUT (the controller is then disabled) or
 * -ENODEV after removal started or a failure.  Caller holds gd->lock.
 */
static int admin_locked(struct gstore_dev *gd, struct nvme_command *c, u32 *result)
{
	unsigned long deadline = jiffies + GSTORE_ADMIN_TIMEOUT;
	u16 id = gd->cmd_id++;

	lockdep_assert_held(&gd->lock);
	if (gd->failed)
		return -EIO;
	c->common.command_id = id;
	memcpy(&gd->asq[gd->asq_tail], c, sizeof(*c));
	gd->asq_tail = (gd->asq_tail + 1) % GSTORE_AQ_DEPTH;
	/* writel orders the SQE stores before the doorbell */
	writel(gd->asq_tail, gd->bar + NVME_REG_DBS);

	for (;;) {
		struct nvme_completion *cqe = &gd->acq[gd->acq_head];
		u16 status = le16_to_cpu(READ_ONCE(cqe->status));

		if ((status & 1) == gd->acq_phase) {
			u16 cid;
			u32 res;

			/* the phase bit was read before the rest of the entry */
			dma_rmb();
			cid = READ_ONCE(cqe->command_id);
			res = le32_to_cpu(READ_ONCE(cqe->result.u32));
			if (++gd->acq_head == GSTORE_AQ_DEPTH) {
				gd->acq_head = 0;
				gd->acq_phase ^= 1;
			}
			writel(gd->acq_head, gd->bar + NVME_REG_DBS + gd->db_stride);
			if (cid != id) {
				/* a stale completion of a timed-out command cannot exist
				 * (timeouts disable the controller): treat as fatal */
				dev_err(&gd->pdev->dev, "admin cid %u, expected %u\n", cid, id);
				ctrl_kill(gd);
				return -EIO;
			}
			if (result)
				*result = res;
			status >>= 1;
			if (status)
				dev_dbg(&gd->pdev->dev, "admin opc %#x status %#x\n",
					c->common.opcode, status);
			return nvme_status_errno(status);
		}
		if (time_after(jiffies, deadline)) {
			dev_err(&gd->pdev->dev, "admin opc %#x timed out\n", c->common.opcode);
			ctrl_kill(gd);
			return -ETIMEDOUT;
		}
		usleep_range(10, 50);
	}
}

int gstore_admin(struct gstore_dev *gd, struct nvme_command *c, u32 *result)
{
	int ret;

	mutex_lock(&gd->lock);
	ret = admin_locked(gd, c, result);
	mutex_unlock(&gd->lock);
	return ret;
}

/* ---- I/O queue pairs (memory and ownership are the file's business) ---- */

int gstore_qid_get(struct gstore_dev *gd)
{
	unsigned long q;
	int ret;

	mutex_lock(&gd->lock);
	q = find_next_zero_bit(gd->qids, gd->max_qps + 1, 1);
	if (gd->removing || gd->failed) {
		ret = -ENODEV;
	} else if (q > gd->max_qps) {
		ret = -EBUSY;
	} else {
		set_bit(q, gd->qids);
		gd->qps_in_use++;
		ret = q;
	}
	mutex_unlock(&gd->lock);
	return ret;
}

void gstore_qid_put(struct gstore_dev *gd, u16 qid)
{
	mutex_lock(&gd->lock);
	if (test_and_clear_bit(qid, gd->qids))
		gd->qps_in_use--;
	mutex_unlock(&gd->lock);
}

int gstore_qp_hw_create(struct gstore_dev *gd, u16 qid, u32 depth, dma_addr_t sq, dma_addr_t cq)
{
	struct nvme_command c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.create_cq.opcode = nvme_admin_create_cq;
	c.create_cq.prp1 = cpu_to_le64(cq);
	c.create_cq.cqid = cpu_to_le16(qid);
	c.create_cq.qsize = cpu_to_le16(depth - 1);
	c.create_cq.cq_flags = cpu_to_le16(NVME_QUEUE_PHYS_CONTIG);	/* interrupts off */
	mutex_lock(&gd->lock);
	ret = admin_locked(gd, &c, NULL);
	if (ret)
		goto unlock;

	memset(&c, 0, sizeof(c));
	c.create_sq.opcode = nvme_admin_create_sq;
	c.create_sq.prp1 = cpu_to_le64(sq);
	c.create_sq.sqid = cpu_to_le16(qid);
	c.create_sq.qsize = cpu_to_le16(depth - 1);
	c.create_sq.sq_flags = cpu_to_le16(NVME_QUEUE_PHYS_CONTIG | NVME_SQ_PRIO_MEDIUM);
	c.create_sq.cqid = cpu_to_le16(qid);
	ret = admin_locked(gd, &c, NULL);
	if (ret)
		goto delete_cq;
	mutex_unlock(&gd->lock);
	return 0;

delete_cq:
	memset(&c, 0, sizeof(c));
	c.delete_queue.opcode = nvme_admin_delete_cq;
	c.delete_queue.qid = cpu_to_le16(qid);
	if (admin_locked(gd, &c, NULL) && !gd->failed)
		ctrl_kill(gd);
unlock:
	mutex_unlock(&gd->lock);
	return ret;
}

/*
 * Delete SQ, then CQ.  Deleting the SQ makes the controller finish or abort
 * every command taken from it before it completes the delete, so once this
 * returns the queue memory and every buffer its commands named are no longer
 * touched.  If either delete fails the controller is disabled, which gives
 * the same guarantee for all queues.
 */
int gstore_qp_hw_delete(struct gstore_dev *gd, u16 qid)
{
	struct nvme_command c;
	int ret, ret2;

	mutex_lock(&gd->lock);
	memset(&c, 0, sizeof(c));
	c.delete_queue.opcode = nvme_admin_delete_sq;
	c.delete_queue.qid = cpu_to_le16(qid);
	ret = admin_locked(gd, &c, NULL);

	memset(&c, 0, sizeof(c));
	c.delete_queue.opcode = nvme_admin_delete_cq;
	c.delete_queue.qid = cpu_to_le16(qid);
	ret2 = admin_locked(gd, &c, NULL);
	if ((ret || ret2) && !gd->failed)
		ctrl_kill(gd);
	mutex_unlock(&gd->lock);
	return ret ? ret : ret2;
}

/* ---- controller bring-up ---- */

static int wait_ready(struct gstore_dev *gd, bool on)
{
	unsigned long timeout = jiffies + (NVME_CAP_TIMEOUT(gd->cap) + 1) * HZ / 2;
	u32 want = on ? NVME_CSTS_RDY : 0;

	for (;;) {
		u32 csts = readl(gd->bar + NVME_REG_CSTS);

		if (csts == ~0u)
			return -ENODEV;
		if ((csts & NVME_CSTS_RDY) == want)
			return 0;
		if (on && (csts & NVME_CSTS_CFS))
			return -EIO;
		if (time_after(jiffies, timeout))
			return -ETIMEDOUT;
		if (fatal_signal_pending(current))
			return -EINTR;
		msleep(1);
	}
}

static int ctrl_enable(struct gstore_dev *gd)
{
	u32 cc;
	int ret;

	gd->cap = lo_hi_readq(gd->bar + NVME_REG_CAP);
	gd->vs = readl(gd->bar + NVME_REG_VS);
	gd->db_stride = 4u << NVME_CAP_STRIDE(gd->cap);
	gd->max_qd = NVME_CAP_MQES(gd->cap) + 1;
	if (NVME_CAP_MPSMIN(gd->cap) + 12 > PAGE_SHIFT) {
		dev_err(&gd->pdev->dev, "controller minimum page size above host page\n");
		return -ENODEV;
	}
	if (!(NVME_CAP_CSS(gd->cap) & NVME_CAP_CSS_NVM)) {
		dev_err(&gd->pdev->dev, "controller lacks the NVM command set\n");
		return -ENODEV;
	}
	if (0x1000 + 2 * (GSTORE_WANT_QPS + 1) * (u64)gd->db_stride > gd->bar_len) {
		dev_err(&gd->pdev->dev, "BAR0 too small for the doorbells\n");
		return -ENODEV;
	}

	cc = readl(gd->bar + NVME_REG_CC);
	if (cc & NVME_CC_ENABLE) {
		writel(cc & ~NVME_CC_ENABLE, gd->bar + NVME_REG_CC);
		ret = wait_ready(gd, false);
		if (ret)
			return ret;
	}
	writel((GSTORE_AQ_DEPTH - 1) << 16 | (GSTORE_AQ_DEPTH - 1), gd->bar + NVME_REG_AQA);
	lo_hi_writeq(gd->asq_dma, gd->bar + NVME_REG_ASQ);
	lo_hi_writeq(gd->acq_dma, gd->bar + NVME_REG_ACQ);
	gd->asq_tail = 0;
	gd->acq_head = 0;
	gd->acq_phase = 1;
	cc = NVME_CC_CSS_NVM | (PAGE_SHIFT - 12) << NVME_CC_MPS_SHIFT | NVME_CC_AMS_RR |
	     NVME_CC_SHN_NONE | NVME_CC_IOSQES | NVME_CC_IOCQES | NVME_CC_ENABLE;
	writel(cc, gd->bar + NVME_REG_CC);
	return wait_ready(gd, true);
}

/* Orderly shutdown (the kernel nvme driver may take the controller next). */
static void ctrl_shutdown(struct gstore_dev *gd)
{
	unsigned long timeout = jiffies + 5 * HZ;
	u32 cc = readl(gd->bar + NVME_REG_CC);

	if (!(cc & NVME_CC_ENABLE) || gd->failed)
		return;
	writel((cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL, gd->bar + NVME_REG_CC);
	while ((readl(gd->bar + NVME_REG_CSTS) & NVME_CSTS_SHST_MASK) != NVME_CSTS_SHST_CMPLT) {
		if (time_after(jiffies, timeout))
			break;
		msleep(1);
	}
	writel(cc & ~(NVME_CC_ENABLE | NVME_CC_SHN_MASK), gd->bar + NVME_REG_CC);
	wait_ready(gd, false);
}

static int identify(struct gstore_dev *gd, u8 cns, u32 nsid)
{
	struct nvme_command c;

	memset(&c, 0, sizeof(c));
	c.identify.opcode = nvme_admin_identify;
	c.identify.nsid = cpu_to_le32(nsid);
	c.identify.cns = cns;
	c.identify.dptr.prp1 = cpu_to_le64(gd->idbuf_dma);
	return gstore_admin(gd, &c, NULL);
}

static int ctrl_identify(struct gstore_dev *gd)
{
	struct nvme_id_ctrl *id = gd->idbuf;
	__le32 nslist[GSTORE_MAX_NS];
	struct nvme_command c;
	u32 nn, i, res, mps;
	int ret, n;

	ret = identify(gd, NVME_ID_CNS_CTRL, 0);
	if (ret)
		return ret;
	gd->vid = le16_to_cpu(id->vid);
	gd->ssvid = le16_to_cpu(id->ssvid);
	memcpy(gd->sn, id->sn, sizeof(gd->sn));
	memcpy(gd->mn, id->mn, sizeof(gd->mn));
	memcpy(gd->fr, id->fr, sizeof(gd->fr));
	mps = 1u << (12 + NVME_CAP_MPSMIN(gd->cap));
	gd->max_xfer = id->mdts ? min_t(u64, (u64)mps << id->mdts, U32_MAX) : 0;
	nn = le32_to_cpu(id->nn);

	/* active namespace list (NVMe 1.1+); fall back to 1..NN */
	n = 0;
	if (gd->vs >= NVME_VS(1, 1, 0) && !identify(gd, NVME_ID_CNS_NS_ACTIVE_LIST, 0)) {
		memcpy(nslist, gd->idbuf, sizeof(nslist));
		for (; n < GSTORE_MAX_NS && nslist[n]; n++)
			;
	} else {
		for (; n < GSTORE_MAX_NS && n < nn; n++)
			nslist[n] = cpu_to_le32(n + 1);
	}
	gd->nr_ns = 0;
	for (i = 0; i < n; i++) {
		struct nvme_id_ns *ns = gd->idbuf;
		u32 nsid = le32_to_cpu(nslist[i]);
		u8 lbaf;

		if (identify(gd, NVME_ID_CNS_NS, nsid) || !ns->nsze)
			continue;
		lbaf = ns->flbas & NVME_NS_FLBAS_LBA_MASK;
		gd->ns[gd->nr_ns].nsid = nsid;
		gd->ns[gd->nr_ns].lba_shift = ns->lbaf[lbaf].ds;
		gd->ns[gd->nr_ns].nlba = le64_to_cpu(ns->nsze);
		gd->nr_ns++;
	}

	memset(&c, 0, sizeof(c));
	c.features.opcode = nvme_admin_set_features;
	c.features.fid = cpu_to_le32(NVME_FEAT_NUM_QUEUES);
	c.features.dword11 = cpu_to_le32((GSTORE_WANT_QPS - 1) | (GSTORE_WANT_QPS - 1) << 16);
	ret = gstore_admin(gd, &c, &res);
	if (ret)
		return ret;
	gd->max_qps = min3((res & 0xffff) + 1, (res >> 16) + 1, (u32)GSTORE_WANT_QPS);
	return 0;
}

/* ---- PCI driver ---- */

static bool dev_iommu_translated(struct device *dev)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);

	return dom && dom->type != IOMMU_DOMAIN_IDENTITY;
}

static int admin_alloc(struct gstore_dev *gd)
{
	struct device *dev = &gd->pdev->dev;

	gd->asq = dma_alloc_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->asq), &gd->asq_dma,
				     GFP_KERNEL);
	if (!gd->asq)
		return -ENOMEM;
	gd->acq = dma_alloc_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->acq), &gd->acq_dma,
				     GFP_KERNEL);
	if (!gd->acq)
		goto free_asq;
	gd->idbuf = dma_alloc_coherent(dev, PAGE_SIZE, &gd->idbuf_dma, GFP_KERNEL);
	if (!gd->idbuf)
		goto free_acq;
	return 0;

free_acq:
	dma_free_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->acq), gd->acq, gd->acq_dma);
free_asq:
	dma_free_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->asq), gd->asq, gd->asq_dma);
	return -ENOMEM;
}

static void admin_free(struct gstore_dev *gd)
{
	struct device *dev = &gd->pdev->dev;

	dma_free_coherent(dev, PAGE_SIZE, gd->idbuf, gd->idbuf_dma);
	dma_free_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->acq), gd->acq, gd->acq_dma);
	dma_free_coherent(dev, GSTORE_AQ_DEPTH * sizeof(*gd->asq), gd->asq, gd->asq_dma);
}

static void gstore_dev_release(struct kref *ref)
{
	struct gstore_dev *gd = container_of(ref, struct gstore_dev, ref);

	bitmap_free(gd->qids);
	pci_dev_put(gd->pdev);
	kfree(gd);
}

void gstore_dev_put(struct gstore_dev *gd)
{
	kref_put(&gd->ref, gstore_dev_release);
}

/* Find the device of a minor and take a reference (open). */
struct gstore_dev *gstore_dev_lookup(int minor)
{
	struct gstore_dev *gd;

	mutex_lock(&gstore_devs_lock);
	gd = idr_find(&gstore_devs, minor);
	if (gd)
		kref_get(&gd->ref);
	mutex_unlock(&gstore_devs_lock);
	return gd;
}

static int gstore_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct gstore_dev *gd;
	int ret;

	/* driver_override matches any device: accept NVMe controllers only */
	if (pdev->class != PCI_CLASS_STORAGE_EXPRESS)
		return -ENODEV;
	gd = kzalloc(sizeof(*gd), GFP_KERNEL);
	if (!gd)
		return -ENOMEM;
	kref_init(&gd->ref);
	mutex_init(&gd->lock);
	INIT_LIST_HEAD(&gd->files);
	gd->pdev = pci_dev_get(pdev);
	gd->minor = -1;

	ret = pci_enable_device_mem(pdev);
	if (ret)
		goto put_gd;
	ret = pci_request_mem_regions(pdev, GSTORE_NAME);
	if (ret)
		goto disable;
	gd->bar_phys = pci_resource_start(pdev, 0);
	gd->bar_len = pci_resource_len(pdev, 0);
	ret = -ENODEV;
	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) || gd->bar_len < 0x2000)
		goto release;
	ret = -ENOMEM;
	gd->bar = pci_iomap(pdev, 0, 0);
	if (!gd->bar)
		goto release;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (ret)
		goto unmap;
	gd->iommu = dev_iommu_translated(&pdev->dev);

	ret = admin_alloc(gd);
	if (ret)
		goto unmap;
	ret = ctrl_enable(gd);
	if (ret) {
		dev_err(&pdev->dev, "enable failed: %d\n", ret);
		goto free_admin;
	}
	ret = ctrl_identify(gd);
	if (ret) {
		dev_err(&pdev->dev, "identify failed: %d\n", ret);
		goto shutdown;
	}
	ret = -ENOMEM;
	gd->qids = bitmap_zalloc(gd->max_qps + 1, GFP_KERNEL);
	if (!gd->qids)
		goto shutdown;

	mutex_lock(&gstore_devs_lock);
	ret = idr_alloc(&gstore_devs, gd, 0, GSTORE_MAX_DEVS, GFP_KERNEL);
	mutex_unlock(&gstore_devs_lock);
	if (ret < 0)
		goto shutdown;
	gd->minor = ret;
	pci_set_drvdata(pdev, gd);
	gd->cdev = device_create(gstore_class, &pdev->dev, MKDEV(MAJOR(gstore_devt), gd->minor),
				 gd, "gstore-nvme%d", gd->minor);
	if (IS_ERR(gd->cdev)) {
		ret = PTR_ERR(gd->cdev);
		goto remove_idr;
	}
	dev_info(&pdev->dev, "gstore-nvme%d: %.40s, %u namespace(s), %u queue pairs, depth %u%s\n",
		 gd->minor, gd->mn, gd->nr_ns, gd->max_qps, gd->max_qd,
		 gd->iommu ? ", IOMMU" : "");
	return 0;

remove_idr:
	mutex_lock(&gstore_devs_lock);
	idr_remove(&gstore_devs, gd->minor);
	mutex_unlock(&gstore_devs_lock);
shutdown:
	ctrl_shutdown(gd);
free_admin:
	admin_free(gd);
unmap:
	pci_clear_master(pdev);
	pci_iounmap(pdev, gd->bar);
release:
	pci_release_mem_regions(pdev);
disable:
	pci_disable_device(pdev);
put_gd:
	gstore_dev_put(gd);
	return ret;
}

static void gstore_remove(struct pci_dev *pdev)
{
	struct gstore_dev *gd = pci_get_drvdata(pdev);

	mutex_lock(&gd->lock);
	gd->removing = true;
	mutex_unlock(&gd->lock);
	mutex_lock(&gstore_devs_lock);
	idr_remove(&gstore_devs, gd->minor);
	mutex_unlock(&gstore_devs_lock);
	device_destroy(gstore_class, MKDEV(MAJOR(gstore_devt), gd->minor));

	/* queues deleted, memory unmapped and unpinned, user mappings zapped */
	gstore_files_revoke(gd);

	ctrl_shutdown(gd);
	admin_free(gd);
	pci_clear_master(pdev);
	pci_iounmap(pdev, gd->bar);
	pci_release_mem_regions(pdev);
	pci_disable_device(pdev);
	pci_set_drvdata(pdev, NULL);
	gstore_dev_put(gd);
}

static void gstore_shutdown(struct pci_dev *pdev)
{
	struct gstore_dev *gd = pci_get_drvdata(pdev);

	if (gd)
		ctrl_shutdown(gd);
}

/* Matches NVMe controllers, but only those whose driver_override names us:
 * the module never takes a controller by itself. */
static const struct pci_device_id gstore_ids[] = {
	{ .vendor = PCI_ANY_ID, .device = PCI_ANY_ID,
	  .subvendor = PCI_ANY_ID, .subdevice = PCI_ANY_ID,
	  .class = PCI_CLASS_STORAGE_EXPRESS, .class_mask = 0xffffff,
	  .override_only = 1 },
	{ 0, }
};

static struct pci_driver gstore_driver = {
	.name = GSTORE_NAME,
	.id_table = gstore_ids,
	.probe = gstore_probe,
	.remove = gstore_remove,
	.shutdown = gstore_shutdown,
};

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
static char *gstore_devnode(const struct device *dev, umode_t *mode)
#else
static char *gstore_devnode(struct device *dev, umode_t *mode)
#endif
{
	if (mode)
		*mode = 0600;	/* root only */
	return NULL;
}

static int __init gstore_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct nvme_command) != 64);
	BUILD_BUG_ON(sizeof(struct nvme_completion) != 16);
	ret = alloc_chrdev_region(&gstore_devt, 0, GSTORE_MAX_DEVS, "gstore-nvme");
	if (ret)
		return ret;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	gstore_class = class_create("gstore-nvme");
#else
	gstore_class = class_create(THIS_MODULE, "gstore-nvme");
#endif
	if (IS_ERR(gstore_class)) {
		ret = PTR_ERR(gstore_class);
		goto unregister_region;
	}
	gstore_class->devnode = gstore_devnode;
	cdev_init(&gstore_cdev, &gstore_fops);
	gstore_cdev.owner = THIS_MODULE;
	ret = cdev_add(&gstore_cdev, gstore_devt, GSTORE_MAX_DEVS);
	if (ret)
		goto destroy_class;
	ret = pci_register_driver(&gstore_driver);
	if (ret)
		goto del_cdev;
	return 0;

del_cdev:
	cdev_del(&gstore_cdev);
destroy_class:
	class_destroy(gstore_class);
unregister_region:
	unregister_chrdev_region(gstore_devt, GSTORE_MAX_DEVS);
	return ret;
}

static void __exit gstore_exit(void)
{
	pci_unregister_driver(&gstore_driver);
	cdev_del(&gstore_cdev);
	class_destroy(gstore_class);
	unregister_chrdev_region(gstore_devt, GSTORE_MAX_DEVS);
	idr_destroy(&gstore_devs);
}

module_init(gstore_init);
module_exit(gstore_exit);
MODULE_DESCRIPTION("gstore: NVMe queues and DMA/P2P mappings for userspace");
MODULE_AUTHOR("gstore developers");
MODULE_LICENSE("Dual MIT/GPL");
