/* SPDX-License-Identifier: MIT */
/*
 * The daemon's own read-ahead for sequential readers of arrays (-o stream_ra=).
 *
 * The kernel reads ahead of a buffered reader, but each of its requests is
 * one synchronous device read in the daemon, at most four in flight; an
 * O_DIRECT reader has one request in flight.  A stream table notes where
 * each reader of an object got to: a read that continues a stream (starts
 * within the window of the stream's furthest end: the kernel's read-ahead
 * requests arrive out of order, and several readers of one file move
 * together) is read through the block cache, and the cache is told to read
 * the next window ahead (gs_fs_readahead: asynchronous, batched), so the
 * device works on the next requests while this one is answered.
 *
 * Pure bookkeeping, no I/O: the caller issues the read-ahead it is handed.
 */
#ifndef GS_FS_FUSE_STREAM_H
#define GS_FS_FUSE_STREAM_H

#include <stdint.h>

struct gs_streams;

/* @window: bytes read ahead of a stream (0: off, every call returns 0). */
struct gs_streams *gs_streams_new(uint64_t window);
void gs_streams_free(struct gs_streams *s);
uint64_t gs_streams_window(const struct gs_streams *s);

/*
 * Note a read of [@off, @off + @len) of object @ino.  Returns 1 when it
 * continues a sequential stream (read it through the cache), else 0.  When
 * the stream's read-ahead should go further, *ra_off / *ra_len get the range
 * to read ahead now (*ra_len 0: none).
 */
int gs_streams_note(struct gs_streams *s, uint64_t ino, uint64_t off, uint64_t len,
		    uint64_t *ra_off, uint64_t *ra_len);

#endif /* GS_FS_FUSE_STREAM_H */
