// SPDX-License-Identifier: MIT
/*
 * Sorting edges by (u, v) within a memory budget.  Edges fill a buffer;
 * a full buffer is sorted and written as a run to an unnamed temp file;
 * at the end the runs are merged through a heap with one read buffer each.
 * An input that fits the buffer never touches a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph_internal.h"

#define MIN_EDGES	4096
#define MIN_RUNBUF	(64u << 10)

struct run {
	int fd;
	uint64_t len;		/* edges in the run */
	uint64_t next;		/* next edge to load from the file */
	struct gr_edge *b;	/* read buffer */
	size_t bn, bpos, bcap;
};

struct gr_sorter {
	struct gr_edge *buf;
	size_t n, alloc, cap;	/* used, allocated, budget (edges) */
	char *tmpdir;
	struct run *runs;
	unsigned nruns, runcap;
	unsigned *heap, nheap;
	uint64_t count;
	size_t mpos;		/* in-memory iteration */
	bool done;
};

static inline bool edge_lt(const struct gr_edge *a, const struct gr_edge *b)
{
	return a->u < b->u || (a->u == b->u && a->v < b->v);
}

static void insertion_sort(struct gr_edge *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct gr_edge x = a[i];
		size_t j = i;

		for (; j && edge_lt(&x, &a[j - 1]); j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

static void swap_edge(struct gr_edge *a, struct gr_edge *b)
{
	struct gr_edge t = *a;

	*a = *b;
	*b = t;
}

/* Quicksort, median of three, Hoare partition (equal keys split evenly);
 * recursion on the smaller side bounds the stack at log n. */
static void sort_edges(struct gr_edge *a, size_t n)
{
	while (n > 24) {
		size_t m = n / 2, i = 0, j = n - 1;
		struct gr_edge p;

		if (edge_lt(&a[m], &a[0]))
			swap_edge(&a[m], &a[0]);
		if (edge_lt(&a[n - 1], &a[0]))
			swap_edge(&a[n - 1], &a[0]);
		if (edge_lt(&a[n - 1], &a[m]))
			swap_edge(&a[n - 1], &a[m]);
		p = a[m];
		for (;;) {
			while (edge_lt(&a[i], &p))
				i++;
			while (edge_lt(&p, &a[j]))
				j--;
			if (i >= j)
				break;
			swap_edge(&a[i], &a[j]);
			i++;
			j--;
		}
		/* [0, j] and [j+1, n) */
		if (j + 1 < n - j - 1) {
			sort_edges(a, j + 1);
			a += j + 1;
			n -= j + 1;
		} else {
			sort_edges(a + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	insertion_sort(a, n);
}

int gr_sorter_new(struct gr_sorter **sp, size_t mem_bytes, const char *tmpdir)
{
	struct gr_sorter *s = calloc(1, sizeof(*s));
	const char *td = tmpdir ? tmpdir : getenv("TMPDIR");

	if (!s)
		return -ENOMEM;
	s->cap = mem_bytes / sizeof(struct gr_edge);
	if (s->cap < MIN_EDGES)
		s->cap = MIN_EDGES;
	s->tmpdir = strdup(td && *td ? td : "/tmp");
	if (!s->tmpdir) {
		free(s);
		return -ENOMEM;
	}
	*sp = s;
	return 0;
}

/* The buffer grows on demand up to its budget, so small imports stay small. */
static int grow_buf(struct gr_sorter *s)
{
	size_t c = s->n ? s->n * 2 : MIN_EDGES;
	struct gr_edge *b;

	if (c > s->cap)
		c = s->cap;
	b = realloc(s->buf, c * sizeof(*b));
	if (!b)
		return -ENOMEM;
	s->buf = b;
	s->alloc = c;
	return 0;
}

static int tmp_fd(const char *dir)
{
	char path[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/gstore-sort-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t r = pwrite(fd, buf, len, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf = (const char *)buf + r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

struct slice {
	struct gr_edge *a;
	size_t n;
	pthread_t th;
};

static void *sort_slice(void *arg)
{
	struct slice *sl = arg;

	sort_edges(sl->a, sl->n);
	return NULL;
}

static int add_run(struct gr_sorter *s, const struct gr_edge *a, size_t n)
{
	struct run *r;
	int fd, ret;

	if (s->nruns == s->runcap) {
		unsigned c = s->runcap ? s->runcap * 2 : 8;
		struct run *nr = realloc(s->runs, c * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		s->runs = nr;
		s->runcap = c;
	}
	fd = tmp_fd(s->tmpdir);
	if (fd < 0)
		return fd;
	ret = write_all(fd, a, n * sizeof(*a), 0);
	if (ret) {
		close(fd);
		return ret;
	}
	r = &s->runs[s->nruns++];
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->len = n;
	return 0;
}

/*
 * A full buffer becomes runs: it is cut into one slice per CPU (up to 8),
 * sorted by that many threads at once, and each slice is written as a run
 * of its own (the final heap merge does not mind a few more runs).
 */
static int spill(struct gr_sorter *s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned k = cpus > 8 ? 8 : cpus < 1 ? 1 : (unsigned)cpus;
	struct slice sl[8];
	int ret = 0;

	if (s->n < 4 * MIN_EDGES)
		k = 1;
	for (unsigned i = 0; i < k; i++) {
		sl[i].a = s->buf + s->n / k * i;
		sl[i].n = i + 1 < k ? s->n / k : s->n - s->n / k * i;
		if (i && pthread_create(&sl[i].th, NULL, sort_slice, &sl[i]))
			sl[i].th = 0, sort_slice(&sl[i]);
	}
	sort_slice(&sl[0]);
	for (unsigned i = 1; i < k; i++)
		if (sl[i].th)
			pthread_join(sl[i].th, NULL);
	for (unsigned i = 0; i < k && !ret; i++)
		ret = add_run(s, sl[i].a, sl[i].n);
	s->n = 0;
	return ret;
}

int gr_sorter_add(struct gr_sorter *s, uint64_t u, uint64_t v, float w)
{
	struct gr_edge *e;
	int ret;

	if (s->n == s->alloc) {
		ret = s->n < s->cap ? grow_buf(s) : spill(s);
		if (ret)
			return ret;
	}
	e = &s->buf[s->n++];
	memset(e, 0, sizeof(*e));	/* no stray padding bytes in run files */
	e->u = u;
	e->v = v;
	e->w = w;
	s->count++;
	return 0;
}

uint64_t gr_sorter_count(const struct gr_sorter *s)
{
	return s->count;
}

static int run_fill(struct run *r)
{
	size_t want = r->len - r->next < r->bcap ? (size_t)(r->len - r->next) : r->bcap;
	size_t got = 0, bytes = want * sizeof(struct gr_edge);

	while (got < bytes) {
		ssize_t n = pread(r->fd, (char *)r->b + got, bytes - got,
				  (off_t)(r->next * sizeof(struct gr_edge) + got));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)
			return -EIO;
		got += (size_t)n;
	}
	r->next += want;
	r->bn = want;
	r->bpos = 0;
	return 0;
}

static bool heap_lt(struct gr_sorter *s, unsigned a, unsigned b)
{
	struct run *x = &s->runs[a], *y = &s->runs[b];

	return edge_lt(&x->b[x->bpos], &y->b[y->bpos]);
}

static void heap_down(struct gr_sorter *s, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, m = i;

		if (l < s->nheap && heap_lt(s, s->heap[l], s->heap[m]))
			m = l;
		if (l + 1 < s->nheap && heap_lt(s, s->heap[l + 1], s->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		unsigned t = s->heap[i];

		s->heap[i] = s->heap[m];
		s->heap[m] = t;
		i = m;
	}
}

/* Every run from its first edge, the heap over their heads. */
static int runs_start(struct gr_sorter *s)
{
	int ret;

	s->nheap = 0;
	for (unsigned i = 0; i < s->nruns; i++) {
		s->runs[i].next = 0;
		ret = run_fill(&s->runs[i]);
		if (ret)
			return ret;
		s->heap[s->nheap++] = i;
	}
	for (unsigned i = s->nheap / 2; i-- > 0;)
		heap_down(s, i);
	return 0;
}

int gr_sorter_finish(struct gr_sorter *s)
{
	size_t per;
	int ret;

	s->done = true;
	s->mpos = 0;
	if (!s->nruns) {
		sort_edges(s->buf, s->n);
		return 0;
	}
	if (s->n) {
		ret = spill(s);
		if (ret)
			return ret;
	}
	/* the sort buffer's memory is now the runs' read buffers */
	free(s->buf);
	s->buf = NULL;
	per = s->cap * sizeof(struct gr_edge) / s->nruns;
	if (per < MIN_RUNBUF)
		per = MIN_RUNBUF;
	s->heap = calloc(s->nruns, sizeof(*s->heap));
	if (!s->heap)
		return -ENOMEM;
	for (unsigned i = 0; i < s->nruns; i++) {
		struct run *r = &s->runs[i];

		r->bcap = per / sizeof(struct gr_edge);
		r->b = malloc(r->bcap * sizeof(struct gr_edge));
		if (!r->b)
			return -ENOMEM;
	}
	return runs_start(s);
}

int gr_sorter_next(struct gr_sorter *s, struct gr_edge *e)
{
	struct run *r;
	int ret;

	if (!s->nruns) {
		if (s->mpos >= s->n)
			return 0;
		*e = s->buf[s->mpos++];
		return 1;
	}
	if (!s->nheap)
		return 0;
	r = &s->runs[s->heap[0]];
	*e = r->b[r->bpos++];
	if (r->bpos == r->bn) {
		if (r->next < r->len) {
			ret = run_fill(r);
			if (ret)
				return ret;
		} else {
			s->heap[0] = s->heap[--s->nheap];
		}
	}
	if (s->nheap)
		heap_down(s, 0);
	return 1;
}

int gr_sorter_rewind(struct gr_sorter *s)
{
	s->mpos = 0;
	return s->nruns ? runs_start(s) : 0;
}

void gr_sorter_free(struct gr_sorter *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nruns; i++) {
		close(s->runs[i].fd);
		free(s->runs[i].b);
	}
	free(s->runs);
	free(s->heap);
	free(s->buf);
	free(s->tmpdir);
	free(s);
}
