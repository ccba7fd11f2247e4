// SPDX-License-Identifier: MIT
/* Fault-injecting wrapper backend (placeholder: pass-through). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/gpuq_internal.h"

struct gs_bdev {
	const struct gs_backend_ops *in;
	struct gs_bdev *ibd;
};

static int fault_open(struct gs_bdev **bdp, const struct gs_q_params *p)
{
	struct gs_q_params ip = *p;
	struct gs_bdev *bd = calloc(1, sizeof(*bd));
	int ret;

	if (!bd)
		return -ENOMEM;
	ip.backend = "uring";
	bd->in = gs_backend_find("uring");
	ret = bd->in->open(&bd->ibd, &ip);
	if (ret) {
		free(bd);
		return ret;
	}
	*bdp = bd;
	return 0;
}

static void fault_close(struct gs_bdev *bd) { bd->in->close(bd->ibd); free(bd); }
static int fault_geometry(struct gs_bdev *bd, struct gs_q_geom *g) { return bd->in->geometry(bd->ibd, g); }
static int fault_register_buffer(struct gs_bdev *bd, void *a, size_t l) { return bd->in->register_buffer(bd->ibd, a, l); }
static int fault_queue_create(struct gs_bdev *bd, uint32_t d, int fd, struct gs_bq **qp) { return bd->in->queue_create(bd->ibd, d, fd, qp); }
static void fault_queue_destroy(struct gs_bq *q) { gs_backend_uring.queue_destroy(q); }
static int fault_submit(struct gs_bq *q, struct gs_bio **ios, unsigned n) { return gs_backend_uring.submit(q, ios, n); }
static int fault_reap(struct gs_bq *q, struct gs_bio **d, int64_t *r, unsigned m) { return gs_backend_uring.reap(q, d, r, m); }
static int fault_wait(struct gs_bq *q, int64_t t) { return gs_backend_uring.wait(q, t); }

int gs_fault_set(struct gs_bdev *bd, const char *spec) { return -EOPNOTSUPP; }

const struct gs_backend_ops gs_backend_fault = {
	.name = "fault",
	.open = fault_open,
	.close = fault_close,
	.geometry = fault_geometry,
	.register_buffer = fault_register_buffer,
	.queue_create = fault_queue_create,
	.queue_destroy = fault_queue_destroy,
	.submit = fault_submit,
	.reap = fault_reap,
	.wait = fault_wait,
};
