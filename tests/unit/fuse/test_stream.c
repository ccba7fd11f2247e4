// SPDX-License-Identifier: MIT
/*
 * The daemon's sequential stream detection (fs/fuse/stream.c): which reads
 * count as a stream (and are read through the cache) and what read-ahead
 * each one asks for.  A plain sequential reader becomes a stream after
 * MIN_SEQ adjacent reads and keeps a growing window read ahead, never
 * asking twice for the same bytes; the requests of one mmap fault's
 * read-around, random reads (4 KiB and 1 MiB at aligned offsets) and a
 * reader that starts over elsewhere do not; out-of-order arrivals and
 * readers moving together continue one stream; a stream that its file's
 * other reads outnumber stops; the window is 0: off.  The mounted side
 * (counters in .gstore/stats, data through it) is tests/integration/fs_stream.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fs/fuse/stream.c"

#define MiB (1ull << 20)

static int note(struct gs_streams *s, uint64_t ino, uint64_t off, uint64_t len,
		uint64_t *ra_off, uint64_t *ra_len)
{
	uint64_t a, b;

	return gs_streams_note(s, ino, off, len, ra_off ? ra_off : &a, ra_len ? ra_len : &b);
}

/* Read [0, @end) of @ino in 1 MiB steps; returns how many reads were the stream's. */
static int read_to(struct gs_streams *s, uint64_t ino, uint64_t end)
{
	int n = 0;

	for (uint64_t off = 0; off < end; off += MiB)
		n += note(s, ino, off, MiB, NULL, NULL);
	return n;
}

static void test_sequential(void **state)
{
	struct gs_streams *s = gs_streams_new(16 * MiB);
	uint64_t ra_off, ra_len, ra_end = 0, off = 0;
	int i;

	assert_non_null(s);
	/* the first MIN_SEQ reads only start it: nothing read ahead */
	for (i = 0; i < MIN_SEQ; i++, off += MiB) {
		assert_int_equal(note(s, 5, off, MiB, &ra_off, &ra_len), 0);
		assert_int_equal(ra_len, 0);
	}
	/* then every read is the stream's; the read-ahead covers this read
	 * and runs ahead, contiguous, growing to the window */
	for (i = 0; i < 64; i++, off += MiB) {
		assert_int_equal(note(s, 5, off, MiB, &ra_off, &ra_len), 1);
		if (ra_len) {
			if (ra_end)
				assert_int_equal(ra_off, ra_end);	/* never twice */
			else
				assert_true(ra_off <= off);
			ra_end = ra_off + ra_len;
		}
		assert_true(ra_end >= off + MiB);
		assert_true(ra_end <= off + MiB + 16 * MiB);
	}
	assert_true(ra_end >= off + 8 * MiB);	/* the window grew */
	/* another object is another stream */
	assert_int_equal(note(s, 6, off, MiB, NULL, NULL), 0);
	gs_streams_free(s);
}

static void test_read_around(void **state)
{
	struct gs_streams *s = gs_streams_new(16 * MiB);
	uint64_t ra_len;

	/* an mmap fault reads around the page: four adjacent 1 MiB requests,
	 * then the next fault elsewhere */
	for (int f = 0; f < 50; f++) {
		uint64_t base = (uint64_t)((f * 37) % 200) * 4 * MiB;

		for (int r = 0; r < 4; r++) {
			assert_int_equal(note(s, 3, base + r * MiB, MiB, NULL, &ra_len), 0);
			assert_int_equal(ra_len, 0);
		}
	}
	gs_streams_free(s);
}

static void test_random(void **state)
{
	struct gs_streams *s = gs_streams_new(16 * MiB);
	unsigned seed = 1, streams = 0;
	uint64_t ra_total = 0, ra_off, ra_len;

	for (int i = 0; i < 20000; i++) {
		uint64_t off = (uint64_t)(rand_r(&seed) % 262144) * 4096;

		streams += note(s, 9, off, 4096, &ra_off, &ra_len);
		ra_total += ra_len;
	}
	assert_int_equal(streams, 0);
	/* 1 MiB reads at aligned offsets of a 1 GiB file: a read lands next to
	 * a slot now and then; what that costs stays small */
	for (int i = 0; i < 20000; i++) {
		uint64_t off = (uint64_t)(rand_r(&seed) % 1024) * MiB;

		streams += note(s, 9, off, MiB, &ra_off, &ra_len);
		ra_total += ra_len;
	}
	assert_true(streams < 200);
	assert_true(ra_total < 20000 * MiB / 20);
	gs_streams_free(s);
}

static void test_out_of_order(void **state)
{
	struct gs_streams *s = gs_streams_new(16 * MiB);
	uint64_t off;
	int n = 0;

	read_to(s, 4, 8 * MiB);
	/* the kernel's read-ahead: requests of a window in any order */
	for (off = 8 * MiB; off < 64 * MiB; off += 4 * MiB) {
		static const int order[] = { 2, 0, 3, 1 };

		for (int k = 0; k < 4; k++)
			n += note(s, 4, off + order[k] * MiB, MiB, NULL, NULL);
	}
	assert_int_equal(n, 56);
	/* four readers of one file, one behind the other */
	n = 0;
	for (off = 0; off < 32 * MiB; off += MiB)
		for (int j = 0; j < 4; j++)
			n += note(s, 8, off, MiB, NULL, NULL);
	assert_true(n >= 4 * 32 - 4 * (MIN_SEQ + 1));
	gs_streams_free(s);
}

static void test_stops(void **state)
{
	struct gs_streams *s = gs_streams_new(16 * MiB);
	uint64_t off = 16 * MiB;
	unsigned seed = 7;

	read_to(s, 2, off);
	assert_int_equal(note(s, 2, off, MiB, NULL, NULL), 1);
	off += MiB;
	/* its file read elsewhere, more than MAX_MISS times */
	for (int i = 0; i <= MAX_MISS; i++)
		note(s, 2, (1000 + (uint64_t)(rand_r(&seed) % 1000)) * MiB, 4096, NULL, NULL);
	/* a read a little behind no longer continues it; an adjacent one
	 * counts again, from the start */
	assert_int_equal(note(s, 2, off - 2 * MiB, MiB, NULL, NULL), 0);
	assert_int_equal(note(s, 2, off, MiB, NULL, NULL), 0);
	gs_streams_free(s);
}

static void test_off(void **state)
{
	struct gs_streams *s = gs_streams_new(0);
	uint64_t ra_len;

	for (uint64_t off = 0; off < 64 * MiB; off += MiB) {
		assert_int_equal(note(s, 1, off, MiB, NULL, &ra_len), 0);
		assert_int_equal(ra_len, 0);
	}
	gs_streams_free(s);
	assert_int_equal(note(NULL, 1, 0, MiB, NULL, &ra_len), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sequential),
		cmocka_unit_test(test_read_around),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_stops),
		cmocka_unit_test(test_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
