// SPDX-License-Identifier: MIT
/* The one logging hook of libgstore: libraries report, programs print. */
#include <stdarg.h>
#include <stdio.h>

#include "gstore.h"
#include "gs_log.h"

static gs_log_func log_fn;
static void *log_arg;

void gs_set_log_func(gs_log_func fn, void *arg)
{
	log_arg = arg;
	__atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

void gs_log(int level, const char *fmt, ...)
{
	gs_log_func fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
	char msg[512];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(level, msg, log_arg);
}
