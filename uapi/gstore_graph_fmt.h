/* SPDX-License-Identifier: MIT */
/*
 * gstore graph objects: the on-disk format (gstore(5), GRAPH OBJECTS).
 *
 * A graph is a GS_T_GRAPH object whose own data holds two root slots (at
 * byte 0 and byte GS_GRAPH_SLOT_SIZE); the valid slot with the higher
 * generation is the graph.  The root names hidden internal objects:
 *
 *   per direction (out; in for directed graphs):
 *     pages   packed adjacency pages, page size = the fs block size
 *     gtt[2]  graph translation table, one entry per page (A/B: a merge
 *             writes the other one and the root commit switches)
 *     vmap[2]   one bit per vertex: it has a list in the pages (A/B)
 *   delta     delta pages: update records chained per vertex
 *   redo      the page images of a merge in progress
 *   vdel[2]   sorted indices of removed vertices (A/B like gtt)
 *   ids       GS_GRAPH_F_IDMAP only: the vertex id of each vertex index
 *   ids_idx   GS_GRAPH_F_IDMAP only: the first id of each page of ids
 *
 * Vertices are numbered by index 0 .. nv-1; pages, GTTs, delta records and
 * vdel hold indices.  Without GS_GRAPH_F_IDMAP a vertex's id is its index.
 * With it (graphs whose ids are sparse), ids holds the id of index i at
 * byte 8 * i: indices below nids_sorted have ascending ids (the import's),
 * those from nids_sorted to nv the ids of vertices added since, in order.
 *
 * Everything is little-endian.  Every page and slot carries a crc32c.
 */
#ifndef _UAPI_GSTORE_GRAPH_FMT_H
#define _UAPI_GSTORE_GRAPH_FMT_H

#include <linux/types.h>

#define GS_GRAPH_ROOT_MAGIC	0x52475347u	/* "GSGR" */
#define GS_GRAPH_PAGE_MAGIC	0x50475347u	/* "GSGP" */
#define GS_GRAPH_DELTA_MAGIC	0x44475347u	/* "GSGD" */
#define GS_GRAPH_REDO_MAGIC	0x4f475347u	/* "GSGO" */
#define GS_GRAPH_VERSION	1
#define GS_GRAPH_SLOT_SIZE	4096

/* gs_graph_root.flags */
#define GS_GRAPH_F_DIRECTED	(1u << 0)
#define GS_GRAPH_F_WEIGHTED	(1u << 1)
#define GS_GRAPH_F_ID64		(1u << 2)	/* vertex ids 8 bytes (else 4) */
#define GS_GRAPH_F_VARINT	(1u << 3)	/* lists delta/varint coded (below) */
#define GS_GRAPH_F_IDMAP	(1u << 4)	/* ids kept in ids_obj (sparse ids) */
#define GS_GRAPH_F_KNOWN	0x1fu

/* Vertex id that is never a vertex: end marker tuples, "no record". */
#define GS_GRAPH_NONE		(~0ULL)

struct gs_graph_dir_root {
	__le64 pages_obj;	/* ino of the pages object */
	__le64 gtt_obj;		/* ino of the current GTT */
	__le64 gtt_alt;		/* ino of the other GTT (next merge writes it) */
	__le64 npages;		/* pages in pages_obj, live and free */
	__le64 ngtt;		/* entries in gtt_obj */
	__le64 vmap_obj;	/* bitmap of vertices with a list (0: none kept) */
	__le64 vmap_alt;
	__le64 vmap_bits;	/* vertices vmap_obj covers (ids past it: unknown) */
};

struct gs_graph_root {
	__le32 magic;
	__le32 version;
	__le64 gen;		/* commit generation */
	__le32 flags;		/* GS_GRAPH_F_* */
	__le32 page_size;	/* bytes */
	__le64 nv;		/* vertex ids are 0 .. nv-1 */
	__le64 ne;		/* edges (undirected: each counted once) */
	struct gs_graph_dir_root dir[2];	/* [0] out (or both), [1] in */
	__le64 delta_obj;
	__le64 delta_len;	/* committed bytes of delta pages */
	__le64 delta_gen;	/* delta pages of another generation are stale */
	__le64 redo_obj;
	__le64 redo_len;	/* != 0: a merge's redo log is to be applied */
	__le64 vdel_obj;	/* current removed-vertex list */
	__le64 vdel_alt;
	__le64 nvdel;		/* ids in vdel_obj */
	__le64 merges;		/* merges done (also the redo sequence) */
	__le32 slack_pct;	/* free space left in each page at build */
	__le32 chain_max;	/* merge automatically past this delta chain length */
	__le64 ids_obj;		/* GS_GRAPH_F_IDMAP: __le64 id per vertex index */
	__le64 ids_idx_obj;	/* GS_GRAPH_F_IDMAP: __le64 first id per page of ids */
	__le64 nids_sorted;	/* GS_GRAPH_F_IDMAP: indices with ascending ids */
	__le64 rsvd[5];
	__le32 rsvd2;
	__le32 crc;		/* crc32c of this struct with crc = 0 */
};

/*
 * Adjacency page (page_size bytes):
 *
 *   [lists ...........][free][tuple n-1 .. tuple 0][end marker][footer]
 *
 * Lists start at byte 0: for each vertex its neighbour ids (4 or 8 bytes
 * each, ascending), then (weighted graphs) as many f32 weights.  Tuples
 * <vertex id, __le32 byte offset of its list> grow down from the footer in
 * ascending vertex order; the end marker is the tuple <GS_GRAPH_NONE, end of
 * the last list>, so degree(i) = (off(i+1) - off(i)) / entry size.  A page
 * with GS_GRAPH_PF_LARGE holds one chunk of a vertex whose list does not
 * fit one page (one tuple, offset 0); its chunks fill whole pages.
 *
 * With GS_GRAPH_F_VARINT in the root (every graph built since it exists) a
 * list is coded instead: the entry count n, the first id, then the n - 1
 * gaps to the previous id, each an unsigned LEB128 varint (7 bits a byte,
 * low bits first, high bit set on all but the last byte); then (weighted)
 * n f32 weights, unaligned.  The list must end exactly at the next tuple's
 * offset.  Each page (each chunk of a large vertex) codes its lists on its
 * own, starting from an absolute id.  Readers that predate the flag refuse
 * such a graph ("unsupported flags").
 */
struct gs_graph_page_foot {
	__le32 magic;
	__le16 count;		/* tuples before the end marker */
	__le16 flags;		/* GS_GRAPH_PF_* */
	__le32 seq;		/* merge sequence that wrote the page (low bits) */
	__le32 crc;		/* crc32c of the page up to this field */
};
#define GS_GRAPH_PF_LARGE	(1u << 0)

/* GTT entry: one per page, sorted by (key, extension order). */
struct gs_graph_gtt_ent {
	__le64 key;		/* smallest vertex in the page */
	__le64 last;		/* largest vertex in the page */
	__le64 page;		/* bits 0..47 page number, 48..63 GS_GRAPH_GTT_* */
};
#define GS_GRAPH_GTT_PAGE_MASK	((1ULL << 48) - 1)
#define GS_GRAPH_GTT_VALID	(1u << 0)
#define GS_GRAPH_GTT_DIRTY	(1u << 1)	/* in memory: the page has delta records */
#define GS_GRAPH_GTT_EXT	(1u << 2)	/* continues the previous entry's vertex */
#define GS_GRAPH_GTT_LARGE	(1u << 3)	/* one chunk of a vertex larger than a page */
#define GS_GRAPH_GTT_SHIFT	48

/*
 * Delta page (page_size bytes): a header, then records; a record is a
 * gs_graph_delta_rec and nops gs_graph_delta_op.  prev links the records of
 * one (dir, vertex) newest first: the byte offset of the previous record
 * in the delta object, or GS_GRAPH_NONE.
 */
struct gs_graph_delta_hdr {
	__le32 magic;
	__le32 nrec;
	__le64 gen;		/* must equal the root's delta_gen */
	__le64 seq;		/* page index in the delta object */
	__le32 used;		/* bytes used, header included */
	__le32 crc;		/* crc32c of the page with crc = 0 */
};

#define GS_GRAPH_DIR_OUT	0
#define GS_GRAPH_DIR_IN		1
#define GS_GRAPH_DIR_VERTEX	2	/* vertex ops: GS_GRAPH_OP_VADD/VDEL */

struct gs_graph_delta_rec {
	__le64 vertex;
	__le64 prev;
	__le16 nops;
	__u8 dir;		/* GS_GRAPH_DIR_* */
	__u8 rsvd[5];
};

enum {
	GS_GRAPH_OP_ADD = 1,	/* add edge to nbr with weight w */
	GS_GRAPH_OP_DEL = 2,
	GS_GRAPH_OP_SETW = 3,
	GS_GRAPH_OP_VADD = 4,	/* vertex (re)created; nbr unused */
	GS_GRAPH_OP_VDEL = 5,
};

struct gs_graph_delta_op {
	__le64 nbr;
	__le32 w;		/* f32 bits */
	__u8 op;		/* GS_GRAPH_OP_* */
	__u8 rsvd[3];
};

/*
 * Redo log (redo_obj, redo_len bytes): the header, nimg __le64 descriptors
 * (bit 63: direction, bits 0..47: page number), then nimg page images.  crc
 * covers descriptors and images.
 */
struct gs_graph_redo_hdr {
	__le32 magic;
	__le32 page_size;
	__le64 seq;		/* == root.merges of the merge that wrote it */
	__le64 nimg;
	__le32 rsvd;
	__le32 crc;
};

#ifndef __cplusplus
_Static_assert(sizeof(struct gs_graph_dir_root) == 64, "dir root size");
_Static_assert(sizeof(struct gs_graph_root) == 320, "graph root size");
_Static_assert(sizeof(struct gs_graph_page_foot) == 16, "page footer size");
_Static_assert(sizeof(struct gs_graph_gtt_ent) == 24, "gtt entry size");
_Static_assert(sizeof(struct gs_graph_delta_hdr) == 32, "delta header size");
_Static_assert(sizeof(struct gs_graph_delta_rec) == 24, "delta record size");
_Static_assert(sizeof(struct gs_graph_delta_op) == 16, "delta op size");
_Static_assert(sizeof(struct gs_graph_redo_hdr) == 32, "redo header size");
#endif

#endif /* _UAPI_GSTORE_GRAPH_FMT_H */
