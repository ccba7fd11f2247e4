// SPDX-License-Identifier: MIT
/* gstore_nvmeq.h must compile as CUDA device code: instantiate every function
 * in a kernel (compiled by `make` with -arch=sm_90 wherever nvcc exists). */
#include "gstore_nvmeq.h"

__global__ void nvmeq_compile_kernel(struct gs_nvmeq *q, uint64_t slba, uint64_t prp, int *res)
{
	struct gs_nvme_cmd c;
	struct gs_nvme_cqe e;
	uint64_t t;
	uint32_t slot;

	gs_nvme_rw(&c, GS_NVME_CMD_READ, 1, slba + threadIdx.x, 1, prp, 0);
	t = gs_nvmeq_submit(q, &c);
	res[threadIdx.x] = gs_nvme_status_errno(gs_nvmeq_wait(q, t, &e));
	if (!gs_nvmeq_try_submit(q, &c, &t))
		res[threadIdx.x] += gs_nvmeq_poll(q, t, &e);
	t = gs_nvmeq_submit(q, &c);
	res[threadIdx.x] += gs_nvmeq_wait_collected(q, t) + gs_nvmeq_collect(q, 1);
	if (threadIdx.x == 0) {
		struct gs_nvme_cqe many[4];
		uint32_t slots[4];

		res[0] += gs_nvmeq_reap(q, &e, &slot) + gs_nvmeq_ready(q);
		if (!gs_nvmeq_try_queue(q, &c, &t))
			gs_nvmeq_publish(q);
		res[0] += gs_nvmeq_reap_many(q, many, slots, 4);
	}
}

__global__ void nvmeq_init_kernel(struct gs_nvmeq *q, void *sq, void *cq, uint32_t *db, void *st)
{
	gs_nvmeq_init(q, 64, sq, cq, db, db + 1, st);
}
