// SPDX-License-Identifier: MIT
/*
 * numpy .npy headers (format 1.0/2.0/3.0): written for the *.npy files and
 * exports, parsed for imports and for .npy writes into a space.
 *
 *   "\x93NUMPY" major minor HEADER_LEN(le16, le32 from 2.0) dict ' '* '\n'
 *
 * The whole header is padded to a multiple of 64 bytes, like numpy does, so
 * the data that follows is aligned.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nd_internal.h"

#define NPY_MAGIC	"\x93NUMPY"
#define NPY_ALIGN	64

int gs_nd_npy_header(char *buf, size_t size, uint32_t dtype, uint32_t esize, uint32_t ndims,
		     const uint64_t *shape)
{
	char dict[320], descr[16];
	int n, total;

	if (ndims > ND_MAXD)
		return -EINVAL;
	nd_dtype_descr(dtype, esize, descr);
	n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
		     descr);
	for (uint32_t i = 0; i < ndims; i++)
		n += snprintf(dict + n, sizeof(dict) - n, "%llu,%s",
			      (unsigned long long)shape[i], i + 1 < ndims ? " " : "");
	/* numpy writes "(3, 4)" and "(5,)": drop the trailing comma for ndims > 1 */
	if (ndims > 1)
		n--;
	n += snprintf(dict + n, sizeof(dict) - n, "), }");
	/* numpy leaves room for the first axis to grow to 21 digits (a 0-d
	 * array, shape (), has none), then pads (always, by 1..64 bytes) to the
	 * alignment; do the same, byte for byte */
	if (ndims)
		n += snprintf(dict + n, sizeof(dict) - n, "%*s",
			      21 - snprintf(NULL, 0, "%llu", (unsigned long long)shape[0]), "");
	total = 10 + n + 1;
	total += NPY_ALIGN - total % NPY_ALIGN;
	if ((size_t)total > size)
		return -ENOSPC;
	memcpy(buf, NPY_MAGIC, 6);
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (total - 10) & 0xff;
	buf[9] = (total - 10) >> 8;
	memcpy(buf + 10, dict, n);
	memset(buf + 10 + n, ' ', total - 10 - n - 1);
	buf[total - 1] = '\n';
	return total;
}

struct scan {
	const char *p, *end;
};

static void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n'))
		s->p++;
}

static bool eat(struct scan *s, char c)
{
	skip_ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return true;
	}
	return false;
}

/* A quoted Python string into @out (size @n). */
static int str_lit(struct scan *s, char *out, size_t n)
{
	char q;
	size_t i = 0;

	skip_ws(s);
	if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
		return -EINVAL;
	q = *s->p++;
	while (s->p < s->end && *s->p != q) {
		if (i + 1 >= n)
			return -EINVAL;
		out[i++] = *s->p++;
	}
	if (s->p >= s->end)
		return -EINVAL;
	s->p++;
	out[i] = 0;
	return 0;
}

static int shape_lit(struct scan *s, uint32_t *ndims, uint64_t *shape)
{
	uint32_t n = 0;

	if (!eat(s, '('))
		return -EINVAL;
	for (;;) {
		char tmp[24];
		const char *q;
		size_t k = 0;
		uint64_t v;

		if (eat(s, ')'))
			break;
		skip_ws(s);
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9' && k + 1 < sizeof(tmp))
			tmp[k++] = *s->p++;
		tmp[k] = 0;
		q = tmp;
		if (nd_parse_u64(&q, UINT64_MAX, &v) || *q)
			return -EINVAL;
		if (s->p < s->end && *s->p == 'L')	/* Python 2 longs */
			s->p++;
		if (n == ND_MAXD)
			return -EOPNOTSUPP;
		if (v == 0 || v > GS_ND_DIM_MAX)
			return v ? -EOPNOTSUPP : -EINVAL;
		shape[n++] = v;
		if (eat(s, ')'))
			break;
		if (!eat(s, ','))
			return -EINVAL;
	}
	*ndims = n;
	return n ? 0 : -EOPNOTSUPP;
}

int gs_nd_npy_parse(const void *buf, size_t len, uint32_t *dtype, uint32_t *esize,
		    uint32_t *ndims, uint64_t *shape)
{
	const unsigned char *b = buf;
	char key[32], descr[32] = "";
	bool have_shape = false, fortran = false, have_fortran = false;
	size_t hlen, pre;
	struct scan s;
	int ret;

	if (len < 10)
		return memcmp(b, NPY_MAGIC, len < 6 ? len : 6) ? -EINVAL : -EAGAIN;
	if (memcmp(b, NPY_MAGIC, 6))
		return -EINVAL;
	if (b[6] == 1) {
		pre = 10;
		hlen = b[8] | b[9] << 8;
	} else if (b[6] == 2 || b[6] == 3) {
		if (len < 12)
			return -EAGAIN;
		pre = 12;
		hlen = b[8] | b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
		if (hlen > (1u << 20))
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	if (len < pre + hlen)
		return -EAGAIN;
	s.p = (const char *)b + pre;
	s.end = s.p + hlen;
	if (!eat(&s, '{'))
		return -EINVAL;
	while (!eat(&s, '}')) {
		if (str_lit(&s, key, sizeof(key)) || !eat(&s, ':'))
			return -EINVAL;
		if (!strcmp(key, "descr")) {
			if (str_lit(&s, descr, sizeof(descr)))
				return -EINVAL;
		} else if (!strcmp(key, "fortran_order")) {
			skip_ws(&s);
			if (s.end - s.p >= 4 && !memcmp(s.p, "True", 4)) {
				fortran = true;
				s.p += 4;
			} else if (s.end - s.p >= 5 && !memcmp(s.p, "False", 5)) {
				s.p += 5;
			} else {
				return -EINVAL;
			}
			have_fortran = true;
		} else if (!strcmp(key, "shape")) {
			ret = shape_lit(&s, ndims, shape);
			if (ret)
				return ret;
			have_shape = true;
		} else {
			return -EINVAL;
		}
		if (!eat(&s, ',')) {
			if (!eat(&s, '}'))
				return -EINVAL;
			break;
		}
	}
	if (!descr[0] || !have_shape || !have_fortran)
		return -EINVAL;
	if (fortran)
		return -EOPNOTSUPP;
	if (gs_nd_parse_dtype(descr, dtype, esize))
		return -EOPNOTSUPP;
	if (descr[0] != '<' && descr[0] != '|' && descr[0] != '=' && *esize > 1)
		return -EOPNOTSUPP;
	return pre + hlen;
}
