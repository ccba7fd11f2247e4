/* SPDX-License-Identifier: MIT */
/* Internal logging for library code: goes to the gs_set_log_func() hook. */
#ifndef GS_LOG_H
#define GS_LOG_H

#include "gstore.h"

/* default visibility: the CUDA library (libgstore_cuda.a) logs through libgstore.so */
__attribute__((format(printf, 2, 3), visibility("default")))
void gs_log(int level, const char *fmt, ...);

#define gs_err(...)	gs_log(GS_LOG_ERR, __VA_ARGS__)
#define gs_warn(...)	gs_log(GS_LOG_WARN, __VA_ARGS__)
#define gs_info(...)	gs_log(GS_LOG_INFO, __VA_ARGS__)

#endif
