/* SPDX-License-Identifier: MIT */
/*
 * libgstore: public API.  The layers: gpuq (gstore_q.h, gstore_ring.h),
 * cache (gstore_cache.h), the filesystem and its objects.
 */
#ifndef GSTORE_H
#define GSTORE_H

#include "gstore_q.h"
#include "gstore_cache.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)	/* libgstore.so exports these */

enum gs_log_level { GS_LOG_ERR = 3, GS_LOG_WARN = 4, GS_LOG_INFO = 6, GS_LOG_DEBUG = 7 };

typedef void (*gs_log_func)(int level, const char *msg, void *arg);

/*
 * Libraries never print: messages go to this hook (default: dropped).
 * Set it once, before other calls.
 */
void gs_set_log_func(gs_log_func fn, void *arg);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* GSTORE_H */
