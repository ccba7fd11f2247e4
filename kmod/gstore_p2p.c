// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gstore_nvme.ko: GPU memory as DMA target (MAP_GPU) through the NVIDIA
 * peer-to-peer interface.  Built in only when the NVIDIA driver's nv-p2p.h
 * was found at build time (Kbuild defines GSTORE_HAVE_NV_P2P); otherwise
 * MAP_GPU answers -EOPNOTSUPP.
 *
 * The NVIDIA driver may revoke the pages at any time (cudaFree, process
 * exit) through the free callback; the callback and UNMAP race for the
 * page table under p2p->lock, and whoever comes second does nothing.
 * Not yet run on a GPU: in particular a callback that is still waiting for
 * the lock when UNMAP frees the tracking structure is not handled.
 */
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gstore_nvme.h"

#ifdef GSTORE_HAVE_NV_P2P
#include <nv-p2p.h>

struct gstore_p2p {
	struct mutex lock;
	struct pci_dev *pdev;
	u64 vaddr;
	struct nvidia_p2p_page_table *pt;	/* NULL once released or revoked */
	struct nvidia_p2p_dma_mapping *map;
};

bool gstore_p2p_supported(void)
{
	return true;
}

/* Called by the NVIDIA driver when the GPU memory goes away under us. */
static void p2p_free_cb(void *data)
{
	struct gstore_p2p *p = data;

	mutex_lock(&p->lock);
	if (p->pt) {
		if (p->map)
			nvidia_p2p_free_dma_mapping(p->map);
		nvidia_p2p_free_page_table(p->pt);
		p->map = NULL;
		p->pt = NULL;
	}
	mutex_unlock(&p->lock);
}

int gstore_p2p_map(struct gstore_region *r, u64 vaddr, u64 len, u64 __user *bus)
{
	struct gstore_p2p *p;
	u32 i;
	int ret;

	if (!access_ok(bus, (len / GSTORE_GPU_PAGE) * sizeof(u64)))
		return -EFAULT;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	mutex_init(&p->lock);
	p->pdev = r->gd->pdev;
	p->vaddr = vaddr;
	ret = nvidia_p2p_get_pages(0, 0, vaddr, len, &p->pt, p2p_free_cb, p);
	if (ret)
		goto free_p;
	ret = -EINVAL;
	if (!NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p->pt) ||
	    p->pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB)
		goto put_pages;
	ret = nvidia_p2p_dma_map_pages(p->pdev, p->pt, &p->map);
	if (ret)
		goto put_pages;
	ret = -EINVAL;
	if (!NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p->map) ||
	    p->map->entries != len / GSTORE_GPU_PAGE)
		goto unmap;
	for (i = 0; i < p->map->entries; i++) {
		if (put_user(p->map->dma_addresses[i], &bus[i])) {
			ret = -EFAULT;
			goto unmap;
		}
	}
	r->p2p = p;
	r->mem_freed = false;
	return 0;

unmap:
	nvidia_p2p_dma_unmap_pages(p->pdev, p->pt, p->map);
	p->map = NULL;
put_pages:
	nvidia_p2p_put_pages(0, 0, vaddr, p->pt);
free_p:
	kfree(p);
	return ret;
}

void gstore_p2p_unmap(struct gstore_region *r)
{
	struct gstore_p2p *p = r->p2p;

	if (!p)
		return;
	/* the lock makes UNMAP and a revocation by the free callback exclusive */
	mutex_lock(&p->lock);
	if (p->pt) {
		nvidia_p2p_dma_unmap_pages(p->pdev, p->pt, p->map);
		nvidia_p2p_put_pages(0, 0, p->vaddr, p->pt);
		p->map = NULL;
		p->pt = NULL;
	}
	mutex_unlock(&p->lock);
	r->p2p = NULL;
	kfree(p);
}

#else /* !GSTORE_HAVE_NV_P2P */

bool gstore_p2p_supported(void)
{
	return false;
}

int gstore_p2p_map(struct gstore_region *r, u64 vaddr, u64 len, u64 __user *bus)
{
	return -EOPNOTSUPP;
}

void gstore_p2p_unmap(struct gstore_region *r)
{
}

#endif
