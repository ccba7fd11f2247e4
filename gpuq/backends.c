// SPDX-License-Identifier: MIT
/* The backend table: one line per backend, looked up by name. */
#include <string.h>

#include "gpuq/backend.h"
#include "gpuq/nvme_kmod.h"

static const struct gs_backend_ops *const backends[] = {
	&gs_backend_uring,
	&gs_backend_fault,
	&gs_backend_nvme,
	&gs_backend_uring_passthru,
};

const struct gs_backend_ops *gs_backend_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}
