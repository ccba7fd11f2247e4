// SPDX-License-Identifier: MIT
/*
 * Edge list readers: SNAP-style text, Matrix Market coordinate, GAP's
 * serialized .sg / .wsg.  Each streams edges to a callback and reports a
 * malformed input as -EINVAL with "line N: what" (or "byte N: what" for the
 * binary formats) in the caller's buffer.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph_internal.h"

#define RDBUF	(1u << 20)

struct parser {
	int fd;
	uint8_t *buf;
	size_t len, pos;	/* bytes in buf, next unread */
	bool eof;
	uint64_t line;		/* current line number, 1-based */
	uint64_t consumed, total;
	char *err;
	size_t errlen;
	gr_edge_fn fn;
	int (*hdr)(void *arg, struct gr_parse_info *pi);
	void *arg;
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *parg;
	uint64_t next_report;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (p->err && p->errlen) {
		n = snprintf(p->err, p->errlen, "line %llu: ", (unsigned long long)p->line);
		if (n < 0 || (size_t)n >= p->errlen)
			n = 0;
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static void report(struct parser *p)
{
	if (p->progress && p->consumed >= p->next_report) {
		p->progress(p->parg, p->consumed, p->total);
		p->next_report = p->consumed + (16u << 20);
	}
}

/* The next line without its newline, or NULL at the end.  Lines longer
 * than the buffer are an error. */
static int next_line(struct parser *p, char **line, size_t *len)
{
	for (;;) {
		uint8_t *nl = memchr(p->buf + p->pos, '\n', p->len - p->pos);
		ssize_t r;

		if (nl || (p->eof && p->pos < p->len)) {
			size_t end = nl ? (size_t)(nl - p->buf) : p->len;

			*line = (char *)p->buf + p->pos;
			*len = end - p->pos;
			p->consumed += end - p->pos + (nl ? 1 : 0);
			p->pos = nl ? end + 1 : end;
			p->line++;
			if (*len && (*line)[*len - 1] == '\r')
				(*len)--;
			report(p);
			return 1;
		}
		if (p->eof)
			return 0;
		if (p->pos) {
			memmove(p->buf, p->buf + p->pos, p->len - p->pos);
			p->len -= p->pos;
			p->pos = 0;
		}
		if (p->len == RDBUF) {
			p->line++;
			return fail(p, "line longer than %u bytes", RDBUF);
		}
		r = read(p->fd, p->buf + p->len, RDBUF - p->len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!r)
			p->eof = true;
		p->len += (size_t)r;
	}
}

static bool is_sep(char c)
{
	return c == ' ' || c == '\t' || c == ',';
}

/* Split a line into up to @max fields; returns the count (max + 1 if more). */
static unsigned split(char *s, size_t len, char **f, size_t *fl, unsigned max)
{
	unsigned n = 0;
	size_t i = 0;

	while (i < len) {
		while (i < len && is_sep(s[i]))
			i++;
		if (i == len)
			break;
		if (n == max)
			return max + 1;
		f[n] = s + i;
		while (i < len && !is_sep(s[i]))
			i++;
		fl[n] = (size_t)(s + i - f[n]);
		n++;
	}
	return n;
}

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t x = 0;

	if (!len || len > 20)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

static int parse_f32(const char *s, size_t len, float *out)
{
	char tmp[64], *end;
	float f;

	if (!len || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = 0;
	errno = 0;
	f = strtof(tmp, &end);
	if (end != tmp + len || !isfinite(f))
		return -1;
	*out = f;
	return 0;
}

static int vertex(struct parser *p, const char *s, size_t len, uint64_t base, uint64_t *v,
		  const char *what)
{
	if (parse_u64(s, len, v) || *v < base || *v - base >= GS_GRAPH_NONE)
		return fail(p, "bad %s vertex id '%.*s'", what, (int)(len > 32 ? 32 : len), s);
	*v -= base;
	return 0;
}

static bool has_word(const char *s, size_t len, const char *w)
{
	size_t wl = strlen(w);

	for (size_t i = 0; i + wl <= len; i++)
		if (!strncasecmp(s + i, w, wl))
			return true;
	return false;
}

/* ---- SNAP text ---- */

static int parse_text(struct parser *p)
{
	struct gr_parse_info pi = { .directed = -1, .weighted = -1 };
	bool started = false, want_weights = false;
	char *line, *f[4];
	size_t len, fl[4];
	int ret;

	while ((ret = next_line(p, &line, &len)) > 0) {
		uint64_t u, v;
		float w = 1.0f;
		unsigned n;

		while (len && is_sep(*line)) {
			line++;
			len--;
		}
		if (!len)
			continue;
		if (*line == '#' || *line == '%') {
			/* SNAP headers say "# Directed graph" / "# Undirected graph" */
			if (!started && has_word(line, len, "undirected"))
				pi.directed = 0;
			else if (!started && pi.directed < 0 && has_word(line, len, "directed"))
				pi.directed = 1;
			continue;
		}
		n = split(line, len, f, fl, 3);
		if (!started) {
			/* a third column on the first edge: weights, unless told */
			started = true;
			pi.weighted = n >= 3;
			if (p->hdr && (ret = p->hdr(p->arg, &pi)))
				return ret;
			want_weights = pi.weighted > 0;
		}
		if (n < 2)
			return fail(p, "expected \"u v [weight]\"");
		if (vertex(p, f[0], fl[0], 0, &u, "source") ||
		    vertex(p, f[1], fl[1], 0, &v, "target"))
			return -EINVAL;
		if (want_weights && n >= 3 && parse_f32(f[2], fl[2], &w))
			return fail(p, "bad weight '%.*s'", (int)(fl[2] > 32 ? 32 : fl[2]), f[2]);
		ret = p->fn(p->arg, u, v, w);
		if (ret)
			return ret;
	}
	if (!ret && !started && p->hdr)
		ret = p->hdr(p->arg, &pi);
	return ret;
}

/* ---- Matrix Market ---- */

static int parse_mtx(struct parser *p)
{
	bool want_weights = false;
	struct gr_parse_info pi = { .directed = -1, .weighted = -1 };
	uint64_t rows = 0, cols = 0, nnz = 0, seen = 0;
	bool sized = false, pattern = false;
	char *line, *f[6];
	size_t len, fl[6];
	int ret;

	ret = next_line(p, &line, &len);
	if (ret <= 0)
		return ret ? ret : fail(p, "empty file");
	if (split(line, len, f, fl, 5) != 5 || fl[0] != 14 ||
	    strncmp(f[0], "%%MatrixMarket", 14) || strncasecmp(f[1], "matrix", fl[1]) ||
	    fl[1] != 6)
		return fail(p, "expected \"%%%%MatrixMarket matrix coordinate TYPE SYMMETRY\"");
	if (fl[2] != 10 || strncasecmp(f[2], "coordinate", 10))
		return fail(p, "only the coordinate format is supported");
	if (fl[3] == 7 && !strncasecmp(f[3], "pattern", 7))
		pattern = true;
	else if (!((fl[3] == 4 && !strncasecmp(f[3], "real", 4)) ||
		   (fl[3] == 7 && !strncasecmp(f[3], "integer", 7))))
		return fail(p, "unsupported field type '%.*s' (pattern, real, integer)",
			    (int)fl[3], f[3]);
	if (fl[4] == 7 && !strncasecmp(f[4], "general", 7))
		pi.directed = 1;
	else if (fl[4] == 9 && !strncasecmp(f[4], "symmetric", 9))
		pi.directed = 0;
	else
		return fail(p, "unsupported symmetry '%.*s' (general, symmetric)", (int)fl[4],
			    f[4]);
	pi.weighted = !pattern;

	while ((ret = next_line(p, &line, &len)) > 0) {
		uint64_t u, v;
		float w = 1.0f;
		unsigned n;

		while (len && is_sep(*line)) {
			line++;
			len--;
		}
		if (!len || *line == '%')
			continue;
		n = split(line, len, f, fl, 3);
		if (!sized) {
			if (n != 3 || parse_u64(f[0], fl[0], &rows) ||
			    parse_u64(f[1], fl[1], &cols) || parse_u64(f[2], fl[2], &nnz))
				return fail(p, "expected the size line \"rows cols entries\"");
			if (rows >= GS_GRAPH_NONE || cols >= GS_GRAPH_NONE)
				return fail(p, "matrix too large");
			sized = true;
			pi.nv = rows > cols ? rows : cols;
			pi.expect = nnz;
			if (p->hdr && (ret = p->hdr(p->arg, &pi)))
				return ret;
			want_weights = pi.weighted > 0;
			continue;
		}
		if (n < 2 || n > 3 || (pattern && n != 2) || (!pattern && n != 3))
			return fail(p, pattern ? "expected \"row col\"" :
				    "expected \"row col value\"");
		if (vertex(p, f[0], fl[0], 1, &u, "row") || vertex(p, f[1], fl[1], 1, &v, "column"))
			return -EINVAL;
		if (u >= rows || v >= cols)
			return fail(p, "entry (%llu, %llu) outside the %llu x %llu matrix",
				    (unsigned long long)u + 1, (unsigned long long)v + 1,
				    (unsigned long long)rows, (unsigned long long)cols);
		if (!pattern && parse_f32(f[2], fl[2], &w))
			return fail(p, "bad value '%.*s'", (int)(fl[2] > 32 ? 32 : fl[2]), f[2]);
		if (++seen > nnz)
			return fail(p, "more entries than the %llu announced",
				    (unsigned long long)nnz);
		ret = p->fn(p->arg, u, v, want_weights ? w : 1.0f);
		if (ret)
			return ret;
	}
	if (ret)
		return ret;
	if (!sized)
		return fail(p, "missing the size line");
	if (seen != nnz)
		return fail(p, "%llu entries, the header announced %llu", (unsigned long long)seen,
			    (unsigned long long)nnz);
	return 0;
}

/* ---- GAP serialized graphs ---- */

struct breader {
	int fd;
	uint64_t off, end;
	uint8_t *b;
	size_t n, pos;
};

static int bread(struct breader *r, void *out, size_t len)
{
	while (len) {
		size_t k;

		if (r->pos == r->n) {
			size_t want = RDBUF / 2;
			ssize_t got;

			if (r->end - r->off < want)
				want = (size_t)(r->end - r->off);
			if (!want)
				return -ENODATA;
			got = pread(r->fd, r->b, want, (off_t)r->off);
			if (got < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			if (!got)
				return -ENODATA;
			r->off += (uint64_t)got;
			r->n = (size_t)got;
			r->pos = 0;
		}
		k = r->n - r->pos < len ? r->n - r->pos : len;
		memcpy(out, r->b + r->pos, k);
		r->pos += k;
		out = (char *)out + k;
		len -= k;
	}
	return 0;
}

static int bfail(struct parser *p, uint64_t byte, const char *what)
{
	if (p->err && p->errlen)
		snprintf(p->err, p->errlen, "byte %llu: %s", (unsigned long long)byte, what);
	return -EINVAL;
}

static int parse_sg(struct parser *p, bool weighted_file)
{
	bool want_weights;
	struct gr_parse_info pi = { .weighted = weighted_file };
	struct breader ro = { .fd = p->fd }, rn = { .fd = p->fd };
	uint8_t hdr[17];
	int64_t m, n, prev;
	size_t es = weighted_file ? 8 : 4;
	struct stat st;
	uint64_t need;
	int ret;

	if (fstat(p->fd, &st) || !S_ISREG(st.st_mode))
		return bfail(p, 0, "GAP serialized graphs must be regular files");
	if (pread(p->fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		return bfail(p, 0, "truncated header");
	if (hdr[0] > 1)
		return bfail(p, 0, "bad 'directed' byte");
	memcpy(&m, hdr + 1, 8);
	memcpy(&n, hdr + 9, 8);
	m = (int64_t)le64toh((uint64_t)m);
	n = (int64_t)le64toh((uint64_t)n);
	if (m < 0 || n < 0 || n >= (int64_t)(UINT32_MAX) + 1LL)
		return bfail(p, 1, "bad edge or vertex count (GAP ids are 32-bit)");
	need = 17 + 8 * ((uint64_t)n + 1) + es * (uint64_t)m;
	if ((uint64_t)st.st_size < need)
		return bfail(p, (uint64_t)st.st_size, "file shorter than its header says");
	pi.directed = hdr[0];
	pi.nv = (uint64_t)n;
	pi.expect = (uint64_t)m;
	if (p->hdr && (ret = p->hdr(p->arg, &pi)))
		return ret;
	want_weights = weighted_file && pi.weighted > 0;
	ro.b = malloc(RDBUF / 2);
	rn.b = malloc(RDBUF / 2);
	ret = -ENOMEM;
	if (!ro.b || !rn.b)
		goto free_bufs;
	ro.off = 17;
	ro.end = 17 + 8 * ((uint64_t)n + 1);
	rn.off = ro.end;
	rn.end = need;
	ret = bread(&ro, &prev, 8);
	if (ret)
		goto free_bufs;
	if (prev) {
		ret = bfail(p, 17, "offsets must start at 0");
		goto free_bufs;
	}
	for (int64_t u = 0; u < n; u++) {
		int64_t o;

		ret = bread(&ro, &o, 8);
		if (ret)
			goto free_bufs;
		o = (int64_t)le64toh((uint64_t)o);
		if (o < prev || o > m) {
			ret = bfail(p, 17 + 8 * (uint64_t)(u + 1), "offsets out of order");
			goto free_bufs;
		}
		for (int64_t k = prev; k < o; k++) {
			int32_t nb[2];

			ret = bread(&rn, nb, es);
			if (ret)
				goto free_bufs;
			nb[0] = (int32_t)le32toh((uint32_t)nb[0]);
			if (nb[0] < 0 || nb[0] >= n) {
				ret = bfail(p, ro.end + es * (uint64_t)k,
					    "neighbour id out of range");
				goto free_bufs;
			}
			ret = p->fn(p->arg, (uint64_t)u, (uint64_t)nb[0],
				    want_weights ?
				    (float)(int32_t)le32toh((uint32_t)nb[1]) : 1.0f);
			if (ret)
				goto free_bufs;
		}
		p->consumed = ro.off + rn.off - 17;
		report(p);
		prev = o;
	}
	ret = prev == m ? 0 : bfail(p, 17 + 8 * (uint64_t)n, "last offset is not the edge count");
	/* a directed file's inverse lists follow: the in-lists are rebuilt */
free_bufs:
	free(ro.b);
	free(rn.b);
	return ret;
}

int gr_detect_format(int fd, const char *path)
{
	const char *dot = path ? strrchr(path, '.') : NULL;
	char head[16];

	if (dot && !strcasecmp(dot, ".mtx"))
		return GS_GRAPH_FMT_MTX;
	if (dot && !strcasecmp(dot, ".sg"))
		return GS_GRAPH_FMT_SG;
	if (dot && !strcasecmp(dot, ".wsg"))
		return GS_GRAPH_FMT_WSG;
	if (pread(fd, head, 14, 0) == 14 && !memcmp(head, "%%MatrixMarket", 14))
		return GS_GRAPH_FMT_MTX;
	return GS_GRAPH_FMT_TEXT;
}

int gr_parse(int fd, int format, gr_edge_fn fn,
	     int (*hdr)(void *arg, struct gr_parse_info *pi), void *arg,
	     void (*progress)(void *arg, uint64_t done, uint64_t total), void *parg,
	     char *err, size_t errlen)
{
	struct parser p = {
		.fd = fd, .err = err, .errlen = errlen, .fn = fn, .hdr = hdr, .arg = arg,
		.progress = progress, .parg = parg,
	};
	struct stat st;
	int ret;

	if (err && errlen)
		err[0] = 0;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode))
		p.total = (uint64_t)st.st_size;
	if (format == GS_GRAPH_FMT_SG || format == GS_GRAPH_FMT_WSG)
		return parse_sg(&p, format == GS_GRAPH_FMT_WSG);
	p.buf = malloc(RDBUF);
	if (!p.buf)
		return -ENOMEM;
	if (format == GS_GRAPH_FMT_MTX)
		ret = parse_mtx(&p);
	else
		ret = parse_text(&p);
	if (!ret && progress)
		progress(parg, p.consumed, p.total);
	free(p.buf);
	return ret;
}
