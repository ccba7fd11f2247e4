/* SPDX-License-Identifier: MIT */
/*
 * Pool geometry: where a pool-logical byte lives on the members.  Pure
 * arithmetic, shared by the pool backend (gpuq/pool.c) and its unit tests;
 * the on-disk rules are in uapi/gstore_format.h (struct gs_dpool_member).
 *
 * The logical device is two areas, each cut into stripe units: the mirrored
 * zone [0, zone_bytes) and the data area after it.  Chunk c of an area with
 * `copies` copies lives in slots c * copies + k; slot s is on member s % n,
 * row s / n.  Consecutive slots are on different members, so the copies of
 * one chunk are too, and consecutive chunks rotate over all members (RAID10
 * "near" copies for any n, RAID0 with copies 1, RAID1 with copies n).
 */
#ifndef GS_GPUQ_POOL_H
#define GS_GPUQ_POOL_H

#include <stdint.h>

struct gs_pool_area {
	uint64_t lstart, lbytes;	/* logical range */
	uint64_t pbase;			/* member byte of row 0 */
	uint64_t rows;			/* rows used on each member */
	uint32_t copies;
};

struct gs_pool_geo {
	uint32_t n;			/* members */
	uint32_t su;			/* stripe unit, bytes */
	struct gs_pool_area zone, data;
	uint64_t capacity;		/* logical bytes */
	uint64_t member_bytes;		/* bytes used on each member */
};

/*
 * Lay a pool out: @layout GS_POOL_*, @n members of at least @member_bytes
 * each, zone of @zone_bytes logical bytes (rounded up to stripe units).
 * 0 or -EINVAL (bad arguments, or no room for any data).
 */
int gs_pool_geo_init(struct gs_pool_geo *g, uint32_t layout, uint32_t n, uint32_t su,
		     uint64_t zone_bytes, uint64_t data_off, uint64_t member_bytes);
/* Zone and data copies of @layout (GS_POOL_*) over @n members; 0 or -EINVAL. */
int gs_pool_layout_copies(uint32_t layout, uint32_t n, uint32_t *zone_copies,
			  uint32_t *copies);
/* Same from the member superblock's numbers (data_bytes as recorded). */
int gs_pool_geo_load(struct gs_pool_geo *g, uint32_t n, uint32_t su, uint32_t zone_copies,
		     uint32_t copies, uint64_t zone_bytes, uint64_t data_bytes, uint64_t data_off);

/* Copies of the chunk holding logical @off (0 past the end). */
uint32_t gs_pool_copies(const struct gs_pool_geo *g, uint64_t off);
/* The copy reads of @off try first: spreads reads over all members. */
uint32_t gs_pool_pref(const struct gs_pool_geo *g, uint64_t off);
/* Bytes from @off to the next stripe-unit boundary, at most @len. */
uint32_t gs_pool_seg_len(const struct gs_pool_geo *g, uint64_t off, uint64_t len);
/* Member and member byte of copy @k of logical @off. */
void gs_pool_locate(const struct gs_pool_geo *g, uint64_t off, uint32_t k, uint32_t *member,
		    uint64_t *phys);
/* The logical byte stored at member @m byte @phys, or -1 (ENOENT) if unused. */
int gs_pool_reverse(const struct gs_pool_geo *g, uint32_t m, uint64_t phys, uint64_t *off);
/*
 * Adding a member: the logical chunk (stripe-unit index over zone and data)
 * whose copy under @old sits where copy @k of chunk @c goes under @new (same
 * stripe unit, zone and data bytes; @new has the members of @old plus at least
 * one), or -1 when that place holds nothing under @old (a new member's, an
 * unused slot).  Never more than @c: so a restripe in increasing chunk order
 * only overwrites chunks it has already moved (gpuq/pool_add.c).
 */
int64_t gs_pool_add_occupant(const struct gs_pool_geo *old, const struct gs_pool_geo *new,
			     uint64_t c, uint32_t k);
/* 1 if every chunk keeps a copy on a member not in @failed (bit per member). */
int gs_pool_redundant(const struct gs_pool_geo *g, uint64_t failed);

#endif /* GS_GPUQ_POOL_H */
