/* SPDX-License-Identifier: MIT */
/* CRC-32C (Castagnoli), as used by iSCSI, ext4 and NVMe: SSE4.2 when the CPU has it. */
#ifndef GS_CRC32C_H
#define GS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a crc over @len bytes.  Start with crc = 0; the result is the
 * standard CRC-32C (init and final xor with ~0 are done inside). */
uint32_t gs_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
