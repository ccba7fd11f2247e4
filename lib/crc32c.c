// SPDX-License-Identifier: MIT
/*
 * CRC-32C.  x86-64 with SSE4.2 uses the crc32 instruction (8 bytes per
 * step); everything else a slicing-by-8 table built on first use.  The
 * choice is made once, at the first call.
 */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u	/* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	pthread_once(&table_once, table_init);
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;	/* little-endian: the low byte goes first */
		crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^
		      table[5][(v >> 16) & 0xff] ^ table[4][(v >> 24) & 0xff] ^
		      table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
		      table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

typedef uint32_t (*crc_fn)(uint32_t, const uint8_t *, size_t);
static crc_fn impl;

static crc_fn pick(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		return crc_hw;
#endif
	return crc_sw;
}

uint32_t gs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc_fn f = __atomic_load_n(&impl, __ATOMIC_RELAXED);

	if (!f) {
		f = pick();	/* idempotent: racing first callers pick the same */
		__atomic_store_n(&impl, f, __ATOMIC_RELAXED);
	}
	return ~f(~crc, buf, len);
}

/* For the unit test: both implementations must agree. */
uint32_t gs_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t gs_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_sw(~crc, buf, len);
}
