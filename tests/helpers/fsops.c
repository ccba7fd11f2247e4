// SPDX-License-Identifier: MIT
/*
 * fsops: file-system operations the mounted integration tests need and the
 * shell lacks (renameat2 flags, fallocate modes, mmap, O_DIRECT, patterned
 * data, fill-to-ENOSPC), plus the crash-test writers and their checker.
 *
 *   fsops pwrite FILE OFF LEN KEY      write pattern KEY at OFF
 *   fsops verify FILE OFF LEN KEY      check pattern KEY at OFF (exit 1 on mismatch)
 *   fsops zero FILE OFF LEN            check zeros
 *   fsops rename2 OLD NEW none|noreplace|exchange   prints ok or the errno name
 *   fsops falloc FILE MODE OFF LEN     MODE: 0 keep punch zero collapse insert
 *   fsops mmap FILE LEN                shared read-write mmap round trip
 *   fsops direct FILE LEN              O_DIRECT writes/reads, coherency with buffered I/O
 *   fsops fill FILE                    write until an error; prints bytes and errno
 *   fsops crash DIR LOG SECONDS SEED   concurrent writers + metadata changes;
 *                                      what fsync acknowledged goes to LOG
 *   fsops crashcheck DIR LOG|-         every acknowledged byte/name present, nothing foreign?
 *
 * Pattern: byte i of a file under key K is a hash of (K, i / 8) - any range
 * can be checked without knowing how it was written.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void pattern(unsigned char *buf, size_t len, uint64_t off, uint64_t key)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;

		buf[i] = (unsigned char)(mix(key * 0x100000001b3ULL ^ (o >> 3)) >> ((o & 7) * 8));
	}
}

/* Offset of the first byte that differs from the pattern, or -1. */
static int64_t check_pattern(const unsigned char *buf, size_t len, uint64_t off, uint64_t key)
{
	unsigned char want[4096];

	for (size_t i = 0; i < len; i += sizeof(want)) {
		size_t n = len - i < sizeof(want) ? len - i : sizeof(want);

		pattern(want, n, off + i, key);
		if (memcmp(want, buf + i, n))
			for (size_t j = 0; j < n; j++)
				if (want[j] != buf[i + j])
					return (int64_t)(i + j);
	}
	return -1;
}

static const char *ename(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "E?";
}

static uint64_t num(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'K': v <<= 10; break;
	case 'M': v <<= 20; break;
	case 'G': v <<= 30; break;
	}
	return v;
}

static int die(const char *what)
{
	fprintf(stderr, "fsops: %s: %s\n", what, strerror(errno));
	return 1;
}

static int full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf = (const char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static ssize_t full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int cmd_pwrite(char **av)
{
	uint64_t off = num(av[1]), len = num(av[2]), key = num(av[3]);
	int fd = open(av[0], O_WRONLY | O_CREAT, 0644);
	unsigned char *buf;
	int ret;

	if (fd < 0)
		return die(av[0]);
	buf = malloc(len ? len : 1);
	pattern(buf, len, off, key);
	ret = full_pwrite(fd, buf, len, off);
	free(buf);
	if (ret < 0) {
		fprintf(stderr, "fsops: pwrite: %s\n", strerror(-ret));
		return 1;
	}
	return close(fd) ? die("close") : 0;
}

static int cmd_verify(char **av, int zero)
{
	uint64_t off = num(av[1]), len = num(av[2]), key = zero ? 0 : num(av[3]);
	int fd = open(av[0], O_RDONLY);
	unsigned char *buf;
	ssize_t n;
	int64_t bad = -1;

	if (fd < 0)
		return die(av[0]);
	buf = malloc(len ? len : 1);
	n = full_pread(fd, buf, len, off);
	close(fd);
	if (n == (ssize_t)len && zero) {
		for (uint64_t i = 0; i < len && bad < 0; i++)
			if (buf[i])
				bad = (int64_t)i;
	} else if (n == (ssize_t)len) {
		bad = check_pattern(buf, len, off, key);
	}
	free(buf);
	if (n != (ssize_t)len) {
		fprintf(stderr, "fsops: short read at %" PRIu64 ": %zd of %" PRIu64 "\n", off, n,
			len);
		return 1;
	}
	if (bad >= 0) {
		fprintf(stderr, "fsops: %s: mismatch at offset %" PRIu64 "\n", av[0],
			off + (uint64_t)bad);
		return 1;
	}
	return 0;
}

static int cmd_rename2(char **av)
{
	unsigned flags = !strcmp(av[2], "noreplace") ? RENAME_NOREPLACE :
			 !strcmp(av[2], "exchange") ? RENAME_EXCHANGE : 0;

	if (renameat2(AT_FDCWD, av[0], AT_FDCWD, av[1], flags) < 0)
		printf("%s\n", ename(errno));
	else
		printf("ok\n");
	return 0;
}

static int cmd_falloc(char **av)
{
	static const struct { const char *n; int mode; } modes[] = {
		{ "0", 0 }, { "keep", FALLOC_FL_KEEP_SIZE },
		{ "punch", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE },
		{ "zero", FALLOC_FL_ZERO_RANGE }, { "collapse", FALLOC_FL_COLLAPSE_RANGE },
		{ "insert", FALLOC_FL_INSERT_RANGE },
	};
	int fd = open(av[0], O_RDWR), mode = -1;

	if (fd < 0)
		return die(av[0]);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(av[1], modes[i].n))
			mode = modes[i].mode;
	if (mode < 0)
		return fprintf(stderr, "fsops: bad mode %s\n", av[1]), 2;
	if (fallocate(fd, mode, (off_t)num(av[2]), (off_t)num(av[3])) < 0)
		printf("%s\n", ename(errno));
	else
		printf("ok\n");
	close(fd);
	return 0;
}

static int cmd_mmap(char **av)
{
	size_t len = num(av[1]), mid = len / 2;
	int fd = open(av[0], O_RDWR | O_CREAT | O_TRUNC, 0644);
	unsigned char *m, *buf;

	if (fd < 0)
		return die(av[0]);
	if (ftruncate(fd, (off_t)len) < 0)
		return die("ftruncate");
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return die("mmap");
	pattern(m, len, 0, 7);
	if (msync(m, len, MS_SYNC) < 0)
		return die("msync");
	if (munmap(m, len) < 0 || close(fd) < 0)
		return die("munmap");
	/* The stores reached the file: read them back through read(2). */
	fd = open(av[0], O_RDWR);
	buf = malloc(len);
	if (fd < 0 || full_pread(fd, buf, len, 0) != (ssize_t)len)
		return die("read back");
	if (check_pattern(buf, len, 0, 7) >= 0)
		return fprintf(stderr, "fsops: mmap stores not in the file\n"), 1;
	/* And write(2) is seen through a new mapping. */
	pattern(buf, len - mid, mid, 8);
	if (full_pwrite(fd, buf, len - mid, mid) < 0)
		return die("pwrite");
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return die("mmap 2");
	if (check_pattern(m, mid, 0, 7) >= 0 || check_pattern(m + mid, len - mid, mid, 8) >= 0)
		return fprintf(stderr, "fsops: pwrite not seen through mmap\n"), 1;
	munmap(m, len);
	close(fd);
	free(buf);
	return 0;
}

static int cmd_direct(char **av)
{
	size_t len = num(av[1]);
	unsigned char *a, *b;
	int fd, bfd;

	if (posix_memalign((void **)&a, 4096, len) || posix_memalign((void **)&b, 4096, len))
		return die("memalign");
	/* Buffered data first, read back so the page cache holds it. */
	bfd = open(av[0], O_RDWR | O_CREAT | O_TRUNC, 0644);
	pattern(a, len, 0, 10);
	if (bfd < 0 || full_pwrite(bfd, a, len, 0) < 0 || full_pread(bfd, b, len, 0) < 0)
		return die("buffered write");
	close(bfd);
	fd = open(av[0], O_RDWR | O_DIRECT);
	if (fd < 0)
		return die("open O_DIRECT");
	pattern(a, len, 0, 11);
	if (full_pwrite(fd, a, len, 0) < 0)
		return die("O_DIRECT write");
	memset(b, 0, len);
	if (full_pread(fd, b, len, 0) != (ssize_t)len || check_pattern(b, len, 0, 11) >= 0)
		return fprintf(stderr, "fsops: O_DIRECT read back differs\n"), 1;
	/* 4 KiB random O_DIRECT reads */
	for (int i = 0; i < 256; i++) {
		uint64_t off = (mix((uint64_t)i) % (len / 4096)) * 4096;

		if (full_pread(fd, b, 4096, off) != 4096 || check_pattern(b, 4096, off, 11) >= 0)
			return fprintf(stderr, "fsops: O_DIRECT 4K read at %" PRIu64 "\n", off), 1;
	}
	close(fd);
	/* A new buffered open must not see the pages cached before the O_DIRECT write. */
	bfd = open(av[0], O_RDONLY);
	memset(b, 0, len);
	if (bfd < 0 || full_pread(bfd, b, len, 0) != (ssize_t)len ||
	    check_pattern(b, len, 0, 11) >= 0)
		return fprintf(stderr, "fsops: buffered read after O_DIRECT write differs\n"), 1;
	close(bfd);
	free(a);
	free(b);
	return 0;
}

static int cmd_fill(char **av)
{
	int fd = open(av[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t chunk = 1 << 20;
	unsigned char *buf = malloc(chunk);
	uint64_t off = 0;
	int err = 0;

	if (fd < 0)
		return die(av[0]);
	for (;;) {
		ssize_t n;

		pattern(buf, chunk, off, 5);
		n = pwrite(fd, buf, chunk, (off_t)off);
		if (n < 0) {
			err = errno;
			break;
		}
		off += (uint64_t)n;
		if ((size_t)n < chunk) {	/* partial: the next one says why */
			chunk = 4096;
		}
	}
	if (fsync(fd) < 0 && !err)
		err = errno;
	printf("bytes=%" PRIu64 " errno=%s\n", off, ename(err));
	close(fd);
	free(buf);
	return 0;
}

/* ---------------- crash test ---------------- */

/*
 * Writers: W threads, each appending patterned chunks to its own files
 * (byte i of file f is pattern(key f) at i, whoever wrote it), fsync'ing
 * now and then and logging "A f LEN" once fsync returned 0.  A metadata
 * thread creates, renames and unlinks names in DIR/meta, logging "M op"
 * before and "K" after each op's fsyncdir returned 0.  All until an error
 * (the daemon was killed) or SECONDS.
 */
#define WRITERS		3
#define FILES_PER	2
#define META_NAMES	16

struct crash {
	const char *dir;
	FILE *log;
	pthread_mutex_t log_lock;
	double end;
	uint64_t seed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void logf_locked(struct crash *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logf_locked(struct crash *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->log_lock);
	va_start(ap, fmt);
	vfprintf(c->log, fmt, ap);
	va_end(ap);
	fflush(c->log);	/* the test kills the daemon, not us: the page cache keeps it */
	pthread_mutex_unlock(&c->log_lock);
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

struct writer {
	struct crash *c;
	int id;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct crash *c = w->c;
	uint64_t rng = mix(c->seed ^ (uint64_t)w->id), len[FILES_PER] = { 0 };
	unsigned char *buf = malloc(1 << 20);
	int fds[FILES_PER];
	char p[4096];

	for (int f = 0; f < FILES_PER; f++) {
		snprintf(p, sizeof(p), "%s/w%d.%d", c->dir, w->id, f);
		fds[f] = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fds[f] < 0)
			return NULL;
	}
	if (sync_dir(c->dir) < 0)	/* the names: acked appends must be reachable */
		return NULL;
	while (now() < c->end) {
		int f = (int)((rng = mix(rng)) % FILES_PER);
		size_t n = 1 + (size_t)((rng = mix(rng)) % (1 << 18));
		uint64_t key = (uint64_t)(w->id * FILES_PER + f) + 1;

		if ((rng = mix(rng)) % 4 == 0)	/* some block-aligned, most not */
			n = (n + 4095) & ~(size_t)4095;
		pattern(buf, n, len[f], key);
		if (full_pwrite(fds[f], buf, n, len[f]) < 0)
			break;
		len[f] += n;
		if ((rng = mix(rng)) % 3 == 0) {
			if ((rng % 2 ? fdatasync(fds[f]) : fsync(fds[f])) < 0)
				break;
			logf_locked(c, "A %d %d %" PRIu64 "\n", w->id, f, len[f]);
		}
	}
	for (int f = 0; f < FILES_PER; f++)
		close(fds[f]);
	free(buf);
	return NULL;
}

static int meta_op(struct crash *c, int dfd, uint64_t r, char *desc, size_t dsz)
{
	int a = (int)(r % META_NAMES), b = (int)((r >> 8) % META_NAMES);
	char na[16], nb[16];
	int fd, ret = 0;

	snprintf(na, sizeof(na), "m%d", a);
	snprintf(nb, sizeof(nb), "m%d", b);
	switch ((r >> 16) % 3) {
	case 0:
		snprintf(desc, dsz, "C %d", a);
		logf_locked(c, "M %s\n", desc);
		fd = openat(dfd, na, O_WRONLY | O_CREAT, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
		break;
	case 1:
		snprintf(desc, dsz, "U %d", a);
		logf_locked(c, "M %s\n", desc);
		if (unlinkat(dfd, na, 0) < 0 && errno != ENOENT)
			return -errno;
		break;
	default:
		snprintf(desc, dsz, "R %d %d", a, b);
		logf_locked(c, "M %s\n", desc);
		if (renameat(dfd, na, dfd, nb) < 0 && errno != ENOENT)
			return -errno;
		break;
	}
	if (fsync(dfd) < 0)	/* fsyncdir */
		ret = -errno;
	return ret;
}

static void *meta_main(void *arg)
{
	struct crash *c = arg;
	uint64_t rng = mix(c->seed ^ 0xabcdef);
	char p[4096], desc[64];
	int dfd;

	snprintf(p, sizeof(p), "%s/meta", c->dir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return NULL;
	dfd = open(p, O_RDONLY | O_DIRECTORY);
	if (dfd < 0 || sync_dir(c->dir) < 0)	/* meta/ itself durable */
		return NULL;
	logf_locked(c, "D\n");
	while (now() < c->end) {
		if (meta_op(c, dfd, rng = mix(rng), desc, sizeof(desc)) < 0)
			break;
		logf_locked(c, "K\n");
	}
	close(dfd);
	return NULL;
}

static int cmd_crash(char **av)
{
	struct crash c = { .dir = av[0], .end = now() + (double)num(av[2]), .seed = num(av[3]) };
	struct writer w[WRITERS];
	pthread_t t[WRITERS + 1];

	char parent[4096];

	c.log = fopen(av[1], "w");
	if (!c.log)
		return die(av[1]);
	/* DIR (made by the caller) durable in its parent before anything is acked */
	snprintf(parent, sizeof(parent), "%s/..", c.dir);
	if (sync_dir(c.dir) < 0 || sync_dir(parent) < 0)
		return die("fsync DIR");
	pthread_mutex_init(&c.log_lock, NULL);
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ .c = &c, .id = i };
		pthread_create(&t[i], NULL, writer_main, &w[i]);
	}
	pthread_create(&t[WRITERS], NULL, meta_main, &c);
	for (int i = 0; i <= WRITERS; i++)
		pthread_join(t[i], NULL);
	fclose(c.log);
	return 0;
}

/* Apply one metadata op to the model (bit i: name m<i> exists). */
static uint32_t meta_apply(uint32_t s, const char *op)
{
	int a, b;

	if (sscanf(op, "C %d", &a) == 1)
		return s | 1u << a;
	if (sscanf(op, "U %d", &a) == 1)
		return s & ~(1u << a);
	if (sscanf(op, "R %d %d", &a, &b) == 2 && (s >> a & 1) && a != b)
		return (s & ~(1u << a)) | 1u << b;
	return s;
}

static int check_file(const char *dir, int w, int f, uint64_t acked)
{
	uint64_t key = (uint64_t)(w * FILES_PER + f) + 1;
	unsigned char *buf = malloc(1 << 20);
	char p[4096];
	struct stat st;
	uint64_t off;
	int fd, bad = 0;

	snprintf(p, sizeof(p), "%s/w%d.%d", dir, w, f);
	fd = open(p, O_RDONLY);
	if (fd < 0 && errno == ENOENT && !acked) {	/* never made durable: fine */
		free(buf);
		return 0;
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "crashcheck: %s: %s (acked %" PRIu64 " bytes)\n", p,
			strerror(errno), acked);
		free(buf);
		return 1;
	}
	if ((uint64_t)st.st_size < acked) {
		fprintf(stderr, "crashcheck: %s: size %" PRIu64 " < acked %" PRIu64 "\n", p,
			(uint64_t)st.st_size, acked);
		bad = 1;
	}
	/* Acked bytes must match; later ones may be the pattern or zeros (size
	 * logged before data), never other data. */
	for (off = 0; off < (uint64_t)st.st_size && !bad; off += 1 << 20) {
		size_t n = (uint64_t)st.st_size - off < (1 << 20) ? (size_t)(st.st_size - off)
								   : 1 << 20;
		ssize_t got = full_pread(fd, buf, n, off);
		int64_t at;

		if (got != (ssize_t)n) {
			fprintf(stderr, "crashcheck: %s: read at %" PRIu64 " failed\n", p, off);
			bad = 1;
			break;
		}
		for (size_t i = 0; i < n && !bad; i += 4096) {
			size_t m = n - i < 4096 ? n - i : 4096;
			uint64_t o = off + i;

			at = check_pattern(buf + i, m, o, key);
			if (at < 0)
				continue;
			if (o + (uint64_t)at < acked) {
				fprintf(stderr, "crashcheck: %s: acked byte %" PRIu64
					" differs\n", p, o + (uint64_t)at);
				bad = 1;
			} else {
				for (size_t j = (size_t)at; j < m && !bad; j++)
					if (buf[i + j]) {
						/* the pattern may resume after zeros */
						unsigned char e;

						pattern(&e, 1, o + j, key);
						if (buf[i + j] != e) {
							fprintf(stderr, "crashcheck: %s: garbage at "
								"%" PRIu64 " (past acked %" PRIu64
								")\n", p, o + j, acked);
							bad = 1;
						}
					}
			}
		}
	}
	close(fd);
	free(buf);
	return bad;
}

static int cmd_crashcheck(char **av)
{
	uint64_t acked[WRITERS][FILES_PER] = { { 0 } };
	uint32_t state = 0, next = 0;
	int pending = 0, meta = 0, bad = 0, w, f;
	char line[256], p[4096];
	unsigned long long len;
	/* LOG "-": acknowledgements unknown (no dead=eio): check only that the
	 * files hold nothing but their own data.  No log file: killed before
	 * the writers started. */
	FILE *log = strcmp(av[1], "-") ? fopen(av[1], "r") : fopen("/dev/null", "r");

	if (!log && errno != ENOENT)
		return die(av[1]);
	while (log && fgets(line, sizeof(line), log)) {
		if (sscanf(line, "A %d %d %llu", &w, &f, &len) == 3 && w >= 0 && w < WRITERS &&
		    f >= 0 && f < FILES_PER) {
			if (len > acked[w][f])
				acked[w][f] = len;
		} else if (line[0] == 'D') {
			meta = 1;
		} else if (line[0] == 'M') {
			next = meta_apply(state, line + 2);
			pending = 1;
		} else if (line[0] == 'K') {
			state = next;
			pending = 0;
		}
	}
	if (log)
		fclose(log);
	/* Unacknowledged files too: whatever of them exists must be theirs. */
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER; f++)
			bad |= check_file(av[0], w, f, acked[w][f]);
	if (meta) {
		uint32_t seen = 0;

		for (int i = 0; i < META_NAMES; i++) {
			snprintf(p, sizeof(p), "%s/meta/m%d", av[0], i);
			if (access(p, F_OK) == 0)
				seen |= 1u << i;
		}
		if (seen != state && !(pending && seen == next)) {
			fprintf(stderr, "crashcheck: meta/ holds %#x, acknowledged %#x%s\n",
				seen, state, pending ? " (or the op in flight)" : "");
			bad = 1;
		}
	}
	printf("crashcheck: %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int cmd_verify_pattern(char **av)
{
	return cmd_verify(av, 0);
}

static int cmd_zero(char **av)
{
	return cmd_verify(av, 1);
}

static const struct {
	const char *name;
	int args;
	int (*fn)(char **av);
} cmds[] = {
	{ "pwrite", 4, cmd_pwrite },	{ "verify", 4, cmd_verify_pattern },
	{ "zero", 3, cmd_zero },	{ "rename2", 3, cmd_rename2 },
	{ "falloc", 4, cmd_falloc },	{ "mmap", 2, cmd_mmap },
	{ "direct", 2, cmd_direct },	{ "fill", 1, cmd_fill },
	{ "crash", 4, cmd_crash },	{ "crashcheck", 2, cmd_crashcheck },
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name) && argc - 2 == cmds[i].args)
			return cmds[i].fn(argv + 2);
	fprintf(stderr, "usage: fsops pwrite|verify|zero|rename2|falloc|mmap|direct|fill|crash|"
		"crashcheck ARGS (see the source)\n");
	return 2;
}
