// SPDX-License-Identifier: MIT
/* Block cache basics over a memory device: parameters, hits and misses,
 * byte ranges, NOREAD, invalidation, the device's end, read-ahead, -ENOMEM. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache_stub.h"

#define LINE	4096u
#define DEV	(1u << 20)

static void check_pattern(const uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != stub_pattern(off + i))
			fail_msg("byte %llu: %u != %u", (unsigned long long)(off + i), p[i],
				 stub_pattern(off + i));
}

static void test_params(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache_params p = { .mem_bytes = 1 << 20 };
	struct gs_cache *c = NULL;

	p.line_size = 3000;	/* not a power of two */
	assert_int_equal(cache_create_ops(&c, &stub_ops, s, &p), -EINVAL);
	p.line_size = 256;	/* below the device block */
	assert_int_equal(cache_create_ops(&c, &stub_ops, s, &p), -EINVAL);
	p.line_size = 2u << 20;	/* above max_io, and above the budget */
	assert_int_equal(cache_create_ops(&c, &stub_ops, s, &p), -EINVAL);
	p.line_size = 8192;
	p.mem_bytes = 4096;	/* not one line */
	assert_int_equal(cache_create_ops(&c, &stub_ops, s, &p), -EINVAL);
	assert_int_equal(cache_create_ops(&c, &stub_ops, s, NULL), 0);	/* defaults */
	assert_int_equal(gs_cache_line_size(c), 64 << 10);
	assert_int_equal(stub_stats(c).lines, 1024);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_hit_miss(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 64 * LINE, LINE, 0);
	struct gs_cache_stats st;
	struct gs_line *l, *l2;
	void *d, *d2;

	assert_int_equal(gs_cache_get(c, 5 * LINE + 100, 0, &l, &d), 0);
	assert_true((uintptr_t)d % 4096 == 0);
	check_pattern(d, 5 * LINE, LINE);
	assert_int_equal(gs_cache_get(c, 5 * LINE, 0, &l2, &d2), 0);
	assert_ptr_equal(l, l2);
	assert_ptr_equal(d, d2);
	st = stub_stats(c);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.pinned, 1);
	gs_cache_put(c, l);
	gs_cache_put(c, l2);
	assert_int_equal(stub_stats(c).pinned, 0);
	assert_int_equal(gs_cache_get(c, 0, 0x80, &l, &d), -EINVAL);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_ranges(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t *ref = malloc(DEV), *buf = malloc(3 * LINE + 1000);
	uint64_t x = 42;

	for (uint64_t i = 0; i < DEV; i++)
		ref[i] = stub_pattern(i);
	for (int it = 0; it < 2000; it++) {
		uint64_t off = stub_rand(&x) % (DEV - 3 * LINE - 1000);
		size_t len = 1 + stub_rand(&x) % (3 * LINE + 999);

		if (it & 1) {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)stub_rand(&x);
			assert_int_equal(gs_cache_write(c, buf, len, off), len);
			memcpy(ref + off, buf, len);
		} else {
			assert_int_equal(gs_cache_read(c, buf, len, off), len);
			assert_memory_equal(buf, ref + off, len);
		}
	}
	assert_int_equal(gs_cache_flush(c), 0);
	assert_memory_equal(s->mem, ref, DEV);
	assert_int_equal(stub_stats(c).dirty, 0);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(ref);
	free(buf);
	stub_free(s);
}

static void test_noread(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t *buf = malloc(2 * LINE);
	struct gs_line *l;
	void *d;

	/* whole lines: no device read */
	memset(buf, 0xab, 2 * LINE);
	assert_int_equal(gs_cache_write(c, buf, 2 * LINE, 4 * LINE), 2 * LINE);
	assert_int_equal(s->reads, 0);
	/* a partial line: read first */
	assert_int_equal(gs_cache_write(c, buf, 10, 8 * LINE + 5), 10);
	assert_int_equal(s->reads, 1);
	assert_int_equal(gs_cache_read(c, buf, LINE, 8 * LINE), LINE);
	check_pattern(buf, 8 * LINE, 5);
	assert_int_equal(buf[5], 0xab);
	check_pattern(buf + 15, 8 * LINE + 15, LINE - 15);

	/* a NOREAD owner that puts without writing: the line is dropped */
	assert_int_equal(gs_cache_get(c, 20 * LINE, GS_CACHE_NOREAD, &l, &d), 0);
	gs_cache_put(c, l);
	assert_int_equal(s->reads, 1);
	assert_int_equal(gs_cache_get(c, 20 * LINE, 0, &l, &d), 0);
	assert_int_equal(s->reads, 2);
	check_pattern(d, 20 * LINE, LINE);
	gs_cache_put(c, l);

	assert_int_equal(gs_cache_flush(c), 0);
	for (unsigned int i = 0; i < 2 * LINE; i++)
		assert_int_equal(s->mem[4 * LINE + i], 0xab);
	assert_int_equal(gs_cache_destroy(c), 0);
	free(buf);
	stub_free(s);
}

static void test_invalidate(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 16 * LINE, LINE, 0);
	uint8_t b[4] = { 1, 2, 3, 4 }, r[4];

	assert_int_equal(gs_cache_read(c, r, 4, 0), 4);
	assert_int_equal(gs_cache_write(c, b, 4, LINE), 4);
	/* the device changes under the cache */
	memset(s->mem, 0x11, 2 * LINE);
	gs_cache_invalidate(c, 0, 2 * LINE);
	assert_int_equal(gs_cache_read(c, r, 4, 0), 4);
	assert_int_equal(r[0], 0x11);			/* clean line dropped, re-read */
	assert_int_equal(gs_cache_read(c, r, 4, LINE), 4);
	assert_memory_equal(r, b, 4);			/* dirty line kept */
	gs_cache_invalidate(c, 0, 0);			/* everything */
	assert_int_equal(stub_stats(c).dirty, 1);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_device_end(void **state)
{
	/* capacity is not a multiple of the line: the last line is short */
	uint64_t size = 10 * LINE + 1536;
	struct stub *s = stub_new(size, 512, LINE);
	struct gs_cache *c = stub_cache(s, 8 * LINE, LINE, 0);
	uint8_t buf[4096], z[4096];
	struct gs_line *l;
	void *d;

	memset(z, 0, sizeof(z));
	assert_int_equal(gs_cache_read(c, buf, 4096, size - 100), 100);
	check_pattern(buf, size - 100, 100);
	assert_int_equal(gs_cache_read(c, buf, 10, size), 0);
	assert_int_equal(gs_cache_get(c, size, 0, &l, &d), -EINVAL);
	assert_int_equal(gs_cache_get(c, size - 1, 0, &l, &d), 0);
	assert_memory_equal((char *)d + 1536, z, LINE - 1536);	/* past the end: zeros */
	gs_cache_put(c, l);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(gs_cache_write(c, buf, 4096, size - 1536), 1536);
	assert_int_equal(gs_cache_write(c, buf, 1, size), -ENOSPC);
	assert_int_equal(gs_cache_flush(c), 0);
	for (int i = 0; i < 1536; i++)
		assert_int_equal(s->mem[size - 1536 + i], 0x5a);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_readahead_hint(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 64 * LINE, LINE, 0);
	struct gs_cache_stats st;
	struct gs_line *l;
	void *d;

	/* reads held at the gate: the hint must not wait for them */
	s->gate_closed = 1;
	gs_cache_readahead(c, 10 * LINE, 8 * LINE);
	assert_int_equal(gs_cache_get(c, 12 * LINE, GS_CACHE_NOWAIT, &l, &d), -EAGAIN);
	__atomic_store_n(&s->gate_closed, 0, __ATOMIC_RELEASE);
	for (int i = 10; i < 18; i++) {
		assert_int_equal(gs_cache_get(c, (uint64_t)i * LINE, 0, &l, &d), 0);
		check_pattern(d, (uint64_t)i * LINE, LINE);
		gs_cache_put(c, l);
	}
	st = stub_stats(c);
	assert_int_equal(st.reads, 8);
	assert_int_equal(st.misses, 0);
	assert_int_equal(st.readahead, 8);
	/* resident lines are not read again */
	gs_cache_readahead(c, 10 * LINE, 8 * LINE);
	assert_int_equal(stub_stats(c).reads, 8);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_readahead_seq(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 64 * LINE, LINE, 4);
	uint8_t buf[1000];
	struct gs_cache_stats st;

	for (uint64_t off = 0; off < 32 * LINE; off += sizeof(buf)) {
		size_t n = sizeof(buf);

		if (off + n > 32 * LINE)
			n = 32 * LINE - off;
		assert_int_equal(gs_cache_read(c, buf, n, off), n);
		check_pattern(buf, off, n);
	}
	cache_ra_wait(c);
	st = stub_stats(c);
	/* every line read exactly once, most of them ahead of the reader */
	for (int i = 0; i < 32 + 4; i++)
		assert_true(s->line_reads[i] <= 1);
	assert_true(st.readahead > 16);
	assert_int_equal(st.reads, st.misses + st.readahead);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

static void test_all_pinned(void **state)
{
	struct stub *s = stub_new(DEV, 512, LINE);
	struct gs_cache *c = stub_cache(s, 4 * LINE, LINE, 0);
	struct gs_line *l[4], *x;
	void *d;

	for (int i = 0; i < 4; i++)
		assert_int_equal(gs_cache_get(c, (uint64_t)i * LINE, 0, &l[i], &d), 0);
	assert_int_equal(gs_cache_get(c, 9 * LINE, 0, &x, &d), -ENOMEM);
	gs_cache_put(c, l[2]);
	assert_int_equal(gs_cache_get(c, 9 * LINE, 0, &x, &d), 0);
	check_pattern(d, 9 * LINE, LINE);
	assert_int_equal(stub_stats(c).evictions, 1);
	gs_cache_put(c, x);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			gs_cache_put(c, l[i]);
	assert_int_equal(gs_cache_destroy(c), 0);
	stub_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_hit_miss),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_noread),
		cmocka_unit_test(test_invalidate),
		cmocka_unit_test(test_device_end),
		cmocka_unit_test(test_readahead_hint),
		cmocka_unit_test(test_readahead_seq),
		cmocka_unit_test(test_all_pinned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
