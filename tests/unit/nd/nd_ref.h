/* SPDX-License-Identifier: MIT */
/* Test helpers for N-D spaces: a seeded RNG and a dense row-major reference. */
#ifndef ND_REF_H
#define ND_REF_H

#include <stdint.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ULL;

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* uniform in [lo, hi] */
static inline uint64_t rnd_in(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

static inline void rnd_fill(void *buf, size_t n)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < n; i++)
		p[i] = rnd() >> 24;
}

/* Linear (row-major) index of @c in @shape. */
static inline uint64_t ref_lin(uint32_t n, const uint64_t *shape, const uint64_t *c)
{
	uint64_t l = 0;

	for (uint32_t i = 0; i < n; i++)
		l = l * shape[i] + c[i];
	return l;
}

/*
 * Copy between the reference image @ref (elements in row-major order, seen
 * with @shape) and a dense buffer holding the slab (start, count, stride).
 * @to_buf: ref -> buf, else buf -> ref.
 */
static inline void ref_slab(char *ref, uint32_t n, const uint64_t *shape, const uint64_t *start,
			    const uint64_t *count, const uint64_t *stride, uint32_t esize,
			    char *buf, int to_buf)
{
	uint64_t k[8] = { 0 }, c[8], total = 1;

	for (uint32_t i = 0; i < n; i++)
		total *= count[i];
	for (uint64_t j = 0; j < total; j++) {
		for (uint32_t i = 0; i < n; i++)
			c[i] = start[i] + k[i] * (stride ? stride[i] : 1);
		char *r = ref + ref_lin(n, shape, c) * esize, *b = buf + j * esize;

		if (to_buf)
			memcpy(b, r, esize);
		else
			memcpy(r, b, esize);
		for (uint32_t i = n; i-- > 0;) {
			if (++k[i] < count[i])
				break;
			k[i] = 0;
		}
	}
}

#endif
