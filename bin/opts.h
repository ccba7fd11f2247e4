/* SPDX-License-Identifier: MIT */
/* Option values shared by gstore and gstorefs (header-only: both link libgstore only). */
#ifndef GS_BIN_OPTS_H
#define GS_BIN_OPTS_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "4096", "64K", "256M", "4G", "1T" (also "4GiB", "4gb"): powers of 1024.
 * Returns 0 or -EINVAL (garbage, negative, overflow). */
static inline int gs_parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	case 'p': case 'P': shift = 50; end++; break;
	}
	if (shift && (!strcasecmp(end, "ib") || !strcasecmp(end, "b")))
		end += strlen(end);
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

#endif
