// SPDX-License-Identifier: MIT
/*
 * gstore pool ...: pools of member devices (gs_pool(3)).  Also the pool side
 * of `gstore mkfs DEV DEV...` and of `gstore fsck` (mirror comparison).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_q.h"
#include "gstore_format.h"
#include "cmd.h"
#include "../opts.h"

/* "pool:D1:D2:..." for gs_q_params.backend / gs_fs_opts.backend */
static char *pool_backend(const char *const *devs, unsigned n)
{
	size_t len = 5;
	char *s;

	for (unsigned i = 0; i < n; i++)
		len += strlen(devs[i]) + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	strcpy(s, "pool");
	for (unsigned i = 0; i < n; i++) {
		strcat(s, ":");
		strcat(s, devs[i]);
	}
	return s;
}

static int open_pool(const char *dev, const char *devices, uint32_t flags, struct gs_q **q)
{
	char *be = NULL;
	struct gs_q_params p = { .path = dev, .flags = flags };
	int ret;

	if (devices) {
		be = malloc(strlen(devices) + 6);
		if (!be)
			return -ENOMEM;
		sprintf(be, "pool:%s", devices);
		p.backend = be;
	} else if (!gs_pool_is_member(dev)) {
		return -ENOTBLK;
	} else {
		p.backend = "pool";
	}
	ret = gs_q_open(q, &p);
	if (ret == -EINVAL) {
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(q, &p);
	}
	free(be);
	return ret;
}

/*
 * The room the mirrored zone needs, in bytes, read from the fs superblock
 * through the pool: the fs's fixed metadata (up to the journal's end) plus
 * 1/128 of the store, at least 4 MiB, for the extent-tree, directory and xattr
 * blocks the allocator puts there (fs/alloc.c: mzone).
 */
static int fs_meta_end(const char *backend, const char *dev, uint64_t *end)
{
	struct gs_q_params p = { .backend = backend, .path = dev, .flags = GS_Q_RDONLY };
	struct gs_dsuper *sb = aligned_alloc(4096, 4096);
	struct gs_q *q;
	int ret;

	if (!sb)
		return -ENOMEM;
	ret = gs_q_open(&q, &p);
	if (ret == -EINVAL) {
		p.flags |= GS_Q_BUFFERED;
		ret = gs_q_open(&q, &p);
	}
	if (!ret) {
		ssize_t r = gs_q_pread(q, sb, 4096, 0);

		ret = r == 4096 ? 0 : r < 0 ? (int)r : -EIO;
		gs_q_close(q);
	}
	if (!ret) {
		uint64_t bs = le32toh(sb->block_size), extra = le64toh(sb->nblocks) * bs / 128;

		*end = (le64toh(sb->journal_start) + le64toh(sb->journal_blocks)) * bs +
		       (extra > (4u << 20) ? extra : 4u << 20);
	}
	free(sb);
	return ret;
}

static uint64_t zone_of(const char *dev)
{
	struct gs_dpool_member sb;
	FILE *f = fopen(dev, "rb");
	uint64_t z = 0;

	if (f && fread(&sb, sizeof(sb), 1, f) == 1)
		z = le64toh(sb.zone_bytes);
	if (f)
		fclose(f);
	return z;
}

int pool_mkfs(const char *const *devs, unsigned n, struct gs_pool_opts *po, struct gs_mkfs_opts *o)
{
	char *be = pool_backend(devs, n);
	uint64_t end = 0, zone;
	int ret = -ENOMEM, tries;

	if (!be)
		return gs_fail(1, "out of memory");
	for (unsigned i = 0; i < n && !o->force; i++) {
		FILE *f = fopen(devs[i], "rb");
		uint64_t magic = 0;

		if (f && fread(&magic, sizeof(magic), 1, f) != 1)
			magic = 0;
		if (f)
			fclose(f);
		if (gs_pool_is_member(devs[i]) || le64toh(magic) == GS_SB_MAGIC) {
			free(be);
			return gs_fail(1, "%s holds a gstore %s already; use --force to overwrite",
				       devs[i], le64toh(magic) == GS_SB_MAGIC ? "filesystem" :
				       "pool member");
		}
	}
	o->backend = be;
	o->force = 1;
	/* the zone must hold the fs's metadata: grow it until it does */
	for (tries = 0; tries < 8; tries++) {
		ret = gs_pool_create(devs, n, po);
		if (ret)
			break;
		ret = gs_fs_mkfs(devs[0], o);
		if (ret)
			break;
		ret = fs_meta_end(be, devs[0], &end);
		zone = zone_of(devs[0]);
		if (ret || end <= zone)
			break;
		po->zone_bytes = end + end / 4;
	}
	free(be);
	if (!ret && end > zone_of(devs[0]))
		ret = -ENOSPC;
	if (ret)
		return gs_fail(1, "mkfs of the pool: %s", strerror(-ret));
	{
		struct gs_q *q;
		char info[8192];

		if (open_pool(devs[0], NULL, GS_Q_RDONLY, &q) == 0) {
			gs_q_pool_info(q, info, sizeof(info));
			gs_q_close(q);
			printf("%s: gstore pool of %u members, block size %u\n%s", devs[0], n,
			       o->block_size ? o->block_size : 4096, info);
		}
	}
	return 0;
}

/* Progress of a rebuild or a comparison: a bar on a terminal, else a line per 10 %. */
struct prog {
	struct gs_progress pr;
	const char *what;
	unsigned tenth;		/* last tenth printed (no terminal) */
};

static void prog_start(struct prog *p, const char *what)
{
	memset(p, 0, sizeof(*p));
	p->what = what;
	gs_progress_start(&p->pr, what, 0);
}

static void show_progress(void *arg, uint64_t done, uint64_t total)
{
	struct prog *p = arg;
	unsigned t;

	if (!p->pr.total && total) {
		/* the total is known only now: draw a bar if there is a terminal */
		p->pr.total = total;
		p->pr.tty = isatty(STDERR_FILENO);
	}
	if (done > p->pr.done)
		gs_progress_add(&p->pr, done - p->pr.done);
	if (p->pr.tty || !total)
		return;
	t = (unsigned)(done * 10 / total);
	if (t > p->tenth) {
		p->tenth = t;
		fprintf(stderr, "%s: %u%% (%llu of %llu bytes)\n", p->what, t * 10,
			(unsigned long long)done, (unsigned long long)total);
	}
}

/*
 * fsck of a pool: compare the copies of every mirrored stripe unit byte for
 * byte (data has no checksums; metadata's were checked by the fs fsck).
 * Returns an e2fsck exit bit: 0, GS_FSCK_FIXED or GS_FSCK_UNCORRECTED.  After
 * a crash (pool_resync: needed) differing copies are expected where writes
 * were in flight: -n reports them as such, -y (repair) resyncs them.
 */
int pool_check_mirrors(const char *path, int repair, unsigned *lines)
{
	struct prog pr;
	char info[8192];
	struct gs_q *q;
	int64_t bad;
	int ret, resync;

	ret = open_pool(path, NULL, repair ? 0 : GS_Q_RDONLY, &q);
	if (ret) {
		gs_fail(1, "%s: cannot open the pool: %s", path, strerror(-ret));
		return GS_FSCK_UNCORRECTED;
	}
	gs_q_pool_info(q, info, sizeof(info));
	if (strstr(info, "pool_add: ")) {
		/* only a read-only open gets here mid-add (a read-write one finished it) */
		gs_q_close(q);
		(*lines)++;
		printf("pool: adding a member stopped half-way; fsck -y, a mount or gstore pool "
		       "add finishes it (mirrors not compared)\n");
		return 0;
	}
	resync = !!strstr(info, "pool_resync: needed");
	prog_start(&pr, "mirrors");
	pr.tenth = 10;	/* fsck: a bar on a terminal only */
	bad = gs_q_pool_verify(q, repair ? GS_POOL_REPAIR : 0, show_progress, &pr);
	gs_progress_end(&pr.pr);
	gs_q_close(q);
	if (bad < 0) {
		gs_fail(1, "%s: comparing mirrors: %s", path, strerror((int)-bad));
		return GS_FSCK_UNCORRECTED;
	}
	if (!bad)
		return 0;
	(*lines)++;
	if (repair) {
		printf("pool: %lld stripe units differed between their copies: resynced\n",
		       (long long)bad);
		return GS_FSCK_FIXED;
	}
	if (resync) {
		printf("pool: %lld stripe units differ between their copies, written when the "
		       "pool crashed (fsck -y resyncs them)\n", (long long)bad);
		return 0;
	}
	printf("pool: %lld stripe units differ between their copies\n", (long long)bad);
	return GS_FSCK_UNCORRECTED;
}

static int status(const char *what, const char *devices)
{
	char *mnt = NULL, info[8192], p[4096];
	struct stat st;
	struct gs_q *q;
	int ret;

	if (stat(what, &st) == 0 && S_ISDIR(st.st_mode))
		mnt = strdup(what);
	else
		mnt = gs_find_mount(what);
	if (mnt) {
		/* mounted: the daemon's view, from .gstore/info */
		FILE *f;

		snprintf(p, sizeof(p), "%s/.gstore/info", mnt);
		free(mnt);
		f = fopen(p, "r");
		if (!f)
			return gs_fail(1, "cannot read %s: %s", p, strerror(errno));
		while (fgets(info, sizeof(info), f))
			if (!strncmp(info, "pool", 4) || !strncmp(info, "member", 6))
				fputs(info, stdout);
		fclose(f);
		return 0;
	}
	ret = open_pool(what, devices, GS_Q_RDONLY, &q);
	if (ret == -ENOTBLK)
		return gs_fail(1, "%s is not a pool member", what);
	if (ret)
		return gs_fail(1, "%s: cannot open the pool: %s", what, strerror(-ret));
	gs_q_pool_info(q, info, sizeof(info));
	gs_q_close(q);
	fputs(info, stdout);
	return 0;
}

/* The text of @path (a .gstore file) in @buf; 0 or -errno. */
static int read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* One command to the daemon's .gstore/pool (gstorefs(8)); 0 or -errno. */
static int pool_cmd(const char *ctl, const char *fmt, ...)
{
	char cmd[3 * PATH_MAX];
	va_list ap;
	int fd, len, ret = 0;

	va_start(ap, fmt);
	len = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(cmd))
		return -ENAMETOOLONG;
	fd = open(ctl, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, cmd, (size_t)len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * Replace through the mounted daemon: the rebuild runs in gstorefs, with the
 * pool in use; this only starts it and follows .gstore/pool until it ends
 * (interrupting this command does not stop the rebuild).
 */
static int replace_online(const char *mnt, const char *old, const char *new, uint64_t rate,
			  int set_rate)
{
	char ctl[PATH_MAX], oldp[PATH_MAX], newp[PATH_MAX], info[16384], want[2 * PATH_MAX];
	struct prog pr;
	int ret, seen = 0;

	snprintf(ctl, sizeof(ctl), "%s/.gstore/pool", mnt);
	if (access(ctl, F_OK))
		return gs_fail(1, "%s is not a mounted pool", mnt);
	if (!realpath(new, newp))
		return gs_fail(1, "%s: %s", new, strerror(errno));
	/* a member that is gone is named as recorded (or by its index) */
	if (!realpath(old, oldp))
		snprintf(oldp, sizeof(oldp), "%s", old);
	if (set_rate && (ret = pool_cmd(ctl, "rate %llu\n", (unsigned long long)rate)))
		return gs_fail(1, "setting the rebuild rate: %s", strerror(-ret));
	ret = pool_cmd(ctl, "replace %s %s\n", oldp, newp);
	if (ret)
		return gs_fail(1, "replacing %s by %s through %s: %s", old, new, mnt,
			       ret == -ENOENT ? "not a member of this pool" :
			       ret == -EBUSY ? "a rebuild is running already" : strerror(-ret));
	printf("rebuilding onto %s in the mounted pool at %s\n", newp, mnt);
	fflush(stdout);
	prog_start(&pr, "rebuild");
	for (;;) {
		unsigned long long done, total;
		const char *l;
		int m;

		ret = read_text(ctl, info, sizeof(info));
		if (ret) {
			gs_progress_end(&pr.pr);
			return gs_fail(1, "%s: %s", ctl, strerror(-ret));
		}
		l = strstr(info, "pool_rebuild: member ");
		if (l && sscanf(l, "pool_rebuild: member %d %llu/%llu", &m, &done, &total) == 3) {
			seen = 1;
			show_progress(&pr, done, total);
			usleep(200000);
			continue;
		}
		break;
	}
	gs_progress_end(&pr.pr);
	/* the daemon's outcome line: "member I -> NEW: ok" or ": <error>" */
	{
		char *l = strstr(info, "pool_rebuild_last: "), *e;

		if (!l)
			return gs_fail(1, "the rebuild left no outcome in %s", ctl);
		l += strlen("pool_rebuild_last: ");
		e = strchr(l, '\n');
		if (e)
			*e = 0;
		snprintf(want, sizeof(want), "-> %s: ok", newp);
		if (!strstr(l, want))
			return gs_fail(1, "rebuild: %s", l);
		printf("%s replaced by %s, rebuilt%s (%s)\n", old, newp, seen ? "" : " at once", l);
	}
	return 0;
}

static int replace(const char *old, const char *new, const char *dev, const char *devices,
		   uint64_t rate, int set_rate)
{
	char info[8192];
	struct prog pr;
	struct stat st;
	struct gs_q *q;
	int ret, idx, dir = stat(dev, &st) == 0 && S_ISDIR(st.st_mode);
	char *mnt;

	if (dir)
		mnt = gs_is_mount(dev) ? strdup(dev) : NULL;
	else
		mnt = gs_find_mount(dev);
	if (mnt) {
		ret = replace_online(mnt, old, new, rate, set_rate);
		free(mnt);
		return ret;
	}
	if (dir)
		return gs_fail(1, "%s is not a gstore mount", dev);
	ret = open_pool(dev, devices, 0, &q);
	if (ret == -ENOTBLK)
		return gs_fail(1, "%s is not a pool member; name a member with DEV or --devices",
			       dev);
	if (ret)
		return gs_fail(1, "%s: cannot open the pool: %s", dev, strerror(-ret));
	idx = gs_q_pool_member(q, old);
	if (idx < 0) {
		gs_q_close(q);
		return gs_fail(1, "%s is not a member of this pool", old);
	}
	if (set_rate)
		gs_q_pool_throttle(q, rate);
	prog_start(&pr, "rebuild");
	ret = gs_q_pool_replace(q, (unsigned)idx, new, show_progress, &pr);
	gs_progress_end(&pr.pr);
	info[0] = 0;
	if (!ret)
		gs_q_pool_info(q, info, sizeof(info));
	gs_q_close(q);
	if (ret)
		return gs_fail(1, "replacing member %d (%s) by %s: %s", idx, old, new,
			       strerror(-ret));
	/* a member come back gets only what the dirty-region log says it missed */
	printf("member %d: %s replaced by %s, rebuilt%s\n", idx, old, new,
	       strstr(info, "(logged regions only)") ? " (logged regions only)" : "");
	return 0;
}

/*
 * Add @new to the pool of @dev (a member, or --devices): the restripe runs
 * here, on the unmounted pool (gs_q_pool_add).  An add that stops (kill,
 * crash, an error) is finished by the next read-write open: this command,
 * a mount or fsck -y.
 */
static int add(const char *dev, const char *new, const char *devices, uint64_t rate,
	       int set_rate)
{
	char info[8192], *mnt;
	struct stat st;
	struct prog pr;
	struct gs_q *q;
	int ret;

	mnt = stat(dev, &st) == 0 && S_ISDIR(st.st_mode) ? strdup(dev) : gs_find_mount(dev);
	if (mnt) {
		ret = gs_fail(1, "%s is mounted (%s): unmount it first; adding a member "
			      "restripes the whole pool offline", dev, mnt);
		free(mnt);
		return ret;
	}
	ret = open_pool(dev, devices, 0, &q);
	if (ret == -ENOTBLK)
		return gs_fail(1, "%s is not a pool member; name a member with POOL or --devices",
			       dev);
	if (ret)
		return gs_fail(1, "%s: cannot open the pool: %s", dev, strerror(-ret));
	if (set_rate)
		gs_q_pool_throttle(q, rate);
	prog_start(&pr, "restripe");
	ret = gs_q_pool_add(q, new, show_progress, &pr);
	gs_progress_end(&pr.pr);
	if (!ret)
		gs_q_pool_info(q, info, sizeof(info));
	gs_q_close(q);
	if (ret)
		return gs_fail(1, "adding %s: %s", new,
			       ret == -EBUSY ? "the pool is degraded, rebuilding or mid-add "
			       "(gstore pool status)" : strerror(-ret));
	printf("%s added; the pool is restriped over all its members\n", new);
	fputs(info, stdout);
	return 0;
}

int cmd_pool(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "rate", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *devices = NULL;
	uint64_t rate = 0;
	int c, set_rate = 0;

	while ((c = getopt_long(argc, argv, "d:r:h", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			devices = optarg;
			break;
		case 'r':
			if (gs_parse_size(optarg, &rate))
				return gs_fail(2, "--rate: bad size %s", optarg);
			set_rate = 1;
			break;
		case 'h':
			gs_usage("pool");
			return 0;
		default:
			return gs_usage("pool");
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 2 && !strcmp(argv[0], "status"))
		return status(argv[1], devices);
	if (argc == 3 && !strcmp(argv[0], "add"))
		return add(argv[1], argv[2], devices, rate, set_rate);
	if ((argc == 3 || argc == 4) && !strcmp(argv[0], "replace"))
		return replace(argv[1], argv[2], argc == 4 ? argv[3] : argv[1], devices, rate,
			       set_rate);
	return gs_usage("pool");
}
