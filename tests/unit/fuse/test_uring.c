// SPDX-License-Identifier: MIT
/*
 * FUSE over io_uring (fs/fuse/uring.c, included to reach its statics): the
 * payload buffer size the kernel insists on, and how a reply libfuse hands
 * to writev lands in a ring entry (header, payload, its size; a READ's data
 * already in place is not copied; an error reply carries no payload; one
 * that does not fit becomes EIO).  The transport itself runs in
 * tests/integration/fs_uring.sh and the io_uring leg of the mounted tests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fs/fuse/uring.c"

static void test_payload_size(void **state)
{
	struct fuse_init_out o = { .flags = FUSE_MAX_PAGES, .max_write = 1u << 20,
				   .max_pages = 256 };

	assert_int_equal(payload_size(&o), 1u << 20);
	o.max_pages = 512;		/* max_pages above max_write: the larger */
	assert_int_equal(payload_size(&o), 2u << 20);
	o.flags = 0;			/* no FUSE_MAX_PAGES: the kernel's 32 pages */
	o.max_write = 4096;
	assert_int_equal(payload_size(&o), 32 * 4096);
	o.flags = FUSE_MAX_PAGES;
	o.max_pages = 1;
	assert_int_equal(payload_size(&o), 8192);	/* FUSE_MIN_READ_BUFFER */
	o.max_write = 100000;		/* rounded up to pages */
	assert_int_equal(payload_size(&o), 102400);
}

static void test_capture(void **state)
{
	struct gs_fuse_uring u = { .payload_sz = 16384 };
	struct uent e = { 0 };
	struct fuse_out_header oh = { .unique = 7, .len = 0 };
	char a[100], b[3000];
	struct iovec iov[3] = { { &oh, sizeof(oh) }, { a, sizeof(a) }, { b, sizeof(b) } };
	struct fuse_out_header got;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	assert_int_equal(ent_alloc(&u, &e), 0);
	assert_int_equal(capture_reply(&u, &e, iov, 3), sizeof(oh) + sizeof(a) + sizeof(b));
	memcpy(&got, e.hdr->in_out, sizeof(got));
	assert_int_equal(got.unique, 7);
	assert_int_equal(got.error, 0);
	assert_int_equal(e.hdr->ring_ent_in_out.payload_sz, sizeof(a) + sizeof(b));
	assert_memory_equal(e.payload, a, sizeof(a));
	assert_memory_equal(e.payload + sizeof(a), b, sizeof(b));
	assert_true(e.replied);

	/* a READ read into the payload buffer: same bytes, nothing moved */
	memset(e.payload, 'r', 4096);
	iov[1] = (struct iovec){ e.payload, 4096 };
	assert_int_equal(capture_reply(&u, &e, iov, 2), sizeof(oh) + 4096);
	assert_int_equal(e.hdr->ring_ent_in_out.payload_sz, 4096);
	assert_int_equal(e.payload[0], 'r');
	assert_int_equal(e.payload[4095], 'r');

	/* an error: no payload */
	oh.error = -ENOENT;
	iov[1] = (struct iovec){ a, sizeof(a) };
	assert_int_equal(capture_reply(&u, &e, iov, 2), sizeof(oh));
	memcpy(&got, e.hdr->in_out, sizeof(got));
	assert_int_equal(got.error, -ENOENT);
	assert_int_equal(e.hdr->ring_ent_in_out.payload_sz, 0);

	/* more than the buffer holds: EIO, not an overrun */
	oh.error = 0;
	iov[1] = (struct iovec){ b, sizeof(b) };
	iov[2] = (struct iovec){ b, u.payload_sz };
	assert_int_equal(capture_reply(&u, &e, iov, 3), sizeof(oh));
	memcpy(&got, e.hdr->in_out, sizeof(got));
	assert_int_equal(got.error, -EIO);
	assert_int_equal(e.hdr->ring_ent_in_out.payload_sz, 0);
	ent_free(&e);
}

/* Outside a ring thread there is no entry buffer to read into. */
static void test_read_buf(void **state)
{
	struct gs_fuse_uring u = { .payload_sz = 8192 };
	struct uent e = { 0 };

	assert_null(gs_fuse_uring_read_buf(4096));
	assert_int_equal(ent_alloc(&u, &e), 0);
	cur_ent = &e;
	assert_null(gs_fuse_uring_read_buf(4096));	/* not a READ */
	e.is_read = 1;
	assert_ptr_equal(gs_fuse_uring_read_buf(4096), e.payload);
	assert_null(gs_fuse_uring_read_buf(8193));	/* larger than the buffer */
	assert_int_equal((uintptr_t)e.payload % 4096, 0);	/* O_DIRECT reads land there */
	cur_ent = NULL;
	ent_free(&e);
}

static void test_possible_cpus(void **state)
{
	unsigned n = possible_cpus();

	assert_true(n >= 1);
	assert_true(n >= (unsigned)get_nprocs());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_payload_size),
		cmocka_unit_test(test_capture),
		cmocka_unit_test(test_read_buf),
		cmocka_unit_test(test_possible_cpus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
