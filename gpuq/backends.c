// SPDX-License-Identifier: MIT
/* The backend table: one line per backend, looked up by name. */
#include <string.h>

#include "backend.h"
#include "nvme_kmod.h"

static const struct gs_backend_ops *const backends[] = {
	&gs_backend_uring,
	&gs_backend_fault,
	&gs_backend_nvme,
	&gs_backend_uring_passthru,
	&gs_backend_pool,
};

/*
 * The backend @p names, or the one its path asks for when it names none:
 * the kernel module's queues for /dev/gstore-nvmeN, NVMe passthrough for the
 * generic char device /dev/ngXnY, io_uring on the file or block device.
 */
const char *gs_backend_name(const struct gs_q_params *p)
{
	const char *path = p->path;

	if (p->backend && *p->backend)
		return p->backend;
	if (path && !strncmp(path, "/dev/gstore-nvme", 16))
		return "nvme";
	if (path && !strncmp(path, "/dev/ng", 7))
		return "uring-passthru";
	return "uring";
}

const struct gs_backend_ops *gs_backend_find(const char *name)
{
	size_t i;

	/* "NAME:ARGS" (pool:DEV1:DEV2...) finds NAME */
	for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		size_t l = strlen(backends[i]->name);

		if (!strncmp(backends[i]->name, name, l) && (!name[l] || name[l] == ':'))
			return backends[i];
	}
	return NULL;
}
