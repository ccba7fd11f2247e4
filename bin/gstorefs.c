// SPDX-License-Identifier: MIT
/*
 * gstorefs: mount a gstore image or device with FUSE.
 *
 *   gstorefs IMAGE|DEVICE MOUNTPOINT [-f] [-d] [-s] [-o opt[,opt...]]
 *
 * Also runs as mount.gstorefs / through mount.fuse3 (`mount -t fuse.gstorefs
 * IMAGE DIR`, fstab), which call it as `gstorefs IMAGE DIR -o OPTS`.
 *
 * The daemon forks before anything starts threads (the fs core's pollers);
 * the parent waits until the child has mounted and exits with its status,
 * so `mount` and scripts see a failure as a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "gstorefs.h"
#include "opts.h"

struct conf {
	char *image;
	char *cache, *line, *dirty, *fault, *backend, *devices, *uring, *kdirty;
	unsigned pollers, qd, threads, readahead, stream_ra;
	double timeout;
	int ro, buffered, nonopts, helper;
	int allow_dev, allow_suid, no_dev, no_suid;
};

enum { KEY_RO, KEY_KEEP, KEY_DROP, KEY_HELP, KEY_VERSION };

#define OPT(t, f, v) { t, offsetof(struct conf, f), v }
static const struct fuse_opt gs_opts[] = {
	OPT("cache=%s", cache, 0),
	OPT("line=%s", line, 0),
	OPT("dirty=%s", dirty, 0),
	OPT("pollers=%u", pollers, 0),
	OPT("qd=%u", qd, 0),
	OPT("threads=%u", threads, 0),
	OPT("readahead=%u", readahead, 0),
	OPT("stream_ra=%u", stream_ra, 0),
	OPT("kdirty=%s", kdirty, 0),
	OPT("timeout=%lf", timeout, 0),
	OPT("fault=%s", fault, 0),
	OPT("backend=%s", backend, 0),
	OPT("devices=%s", devices, 0),
	OPT("uring=%s", uring, 0),
	OPT("buffered", buffered, 1),
	OPT("allow_dev", allow_dev, 1),
	OPT("allow_suid", allow_suid, 1),
	OPT("nodev", no_dev, 1),	/* asked for: wins over allow_dev */
	OPT("nosuid", no_suid, 1),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("rw", KEY_KEEP),
	/* mount(8)/fstab words that mean nothing here (mount.fuse3 adds dev,suid
	 * to every root mount): nosuid,nodev apply unless allow_dev/allow_suid */
	FUSE_OPT_KEY("dev", KEY_DROP),
	FUSE_OPT_KEY("suid", KEY_DROP),
	FUSE_OPT_KEY("exec", KEY_DROP),
	FUSE_OPT_KEY("defaults", KEY_DROP),
	FUSE_OPT_KEY("auto", KEY_DROP),
	FUSE_OPT_KEY("noauto", KEY_DROP),
	FUSE_OPT_KEY("user", KEY_DROP),
	FUSE_OPT_KEY("nouser", KEY_DROP),
	FUSE_OPT_KEY("users", KEY_DROP),
	FUSE_OPT_KEY("_netdev", KEY_DROP),
	FUSE_OPT_KEY("nofail", KEY_DROP),
	FUSE_OPT_KEY("async", KEY_DROP),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gstorefs IMAGE|DEVICE MOUNTPOINT [-f] [-d] [-s] [-o opt[,opt...]]\n"
		"\n"
		"gstore options:\n"
		"  -o cache=SIZE      block cache memory (default 256M)\n"
		"  -o line=SIZE       cache line size (default 64K)\n"
		"  -o dirty=SIZE      dirty cache kept at most; bounds the exit after umount\n"
		"                     (default: a quarter of the cache, at most 1G)\n"
		"  -o pollers=N       I/O poller threads, at most (default 2)\n"
		"  -o qd=N            queue depth per poller (default 128)\n"
		"  -o threads=N       FUSE worker threads, at most (default 64)\n"
		"  -o timeout=SEC     attribute/entry cache timeout (default 1.0)\n"
		"  -o readahead=KIB   kernel read-ahead window (default 4096; 0: kernel's)\n"
		"  -o stream_ra=KIB   the daemon's read-ahead for sequential readers\n"
		"                     (default 16384; 0: off)\n"
		"  -o kdirty=SIZE     the kernel's dirty pages of the mount (mmap writes)\n"
		"                     at most (default 512M; 0: FUSE's strict 1 %%)\n"
		"  -o ro              read-only\n"
		"  -o buffered        no O_DIRECT on the image (images on tmpfs)\n"
		"  -o allow_dev       device nodes open their devices (root; default nodev)\n"
		"  -o allow_suid      setuid/setgid bits take effect (root; default nosuid)\n"
		"  -o fault=SPEC      I/O fault injection for tests (gs_q_fault(3))\n"
		"  -o backend=NAME    uring, nvme or uring-passthru (default: by device path)\n"
		"  -o devices=D1:D2   the members of a pool (default: as recorded on IMAGE)\n"
		"  -o uring=MODE      FUSE over io_uring: auto (when the kernel offers it),\n"
		"                     on (required) or off (default auto)\n"
		"\n"
		"Always: default_permissions (+allow_other when run by root).\n"
		"  -f                 foreground      -d  debug (implies -f)\n"
		"  -s                 single-threaded\n"
		"See gstorefs(8).\n");
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct conf *c = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (c->nonopts++ == 0) {
			c->image = strdup(arg);
			return 0;
		}
		return c->nonopts == 2 ? 1 : (fprintf(stderr, "gstorefs: extra argument '%s'\n",
						      arg), -1);
	case KEY_RO:
		c->ro = 1;
		return 1;	/* libfuse passes it on: MS_RDONLY */
	case KEY_KEEP:
		return 1;
	case KEY_DROP:
		return 0;
	case KEY_HELP:
		usage(stdout);
		exit(0);
	case KEY_VERSION:
		printf("gstorefs (gstore) 0.1, FUSE library %s\n", fuse_pkgversion());
		exit(0);
	}
	return 1;
}

/* argv as mount(8) hands it to mount.TYPE helpers: spec dir [-sfnv] [-o opts]
 * [-t type]; -f and -n mean "fake" and "no mtab" there, not FUSE's -f. */
static int strip_mount_flags(int argc, char **argv)
{
	int n = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "-N")) {
			i++;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1] && strchr("sfnv", argv[i][1]) &&
		    !argv[i][2])
			continue;
		argv[n++] = argv[i];
	}
	argv[n] = NULL;
	return n;
}

/* fsname=IMAGE: commas and backslashes escaped for -o parsing. */
static char *fsname_opt(const char *image)
{
	size_t len = strlen(image);
	char *s = malloc(2 * len + sizeof("fsname="));
	char *p;

	if (!s)
		return NULL;
	p = stpcpy(s, "fsname=");
	for (; *image; image++) {
		if (*image == ',' || *image == '\\')
			*p++ = '\\';
		*p++ = *image;
	}
	*p = 0;
	return s;
}

static int detached;

static void log_msg(int level, const char *msg, void *arg)
{
	if (detached)
		syslog(level, "%s", msg);
	else
		fprintf(stderr, "gstorefs: %s\n", msg);
}

__attribute__((format(printf, 2, 3))) static void say(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(level, msg, NULL);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The session ended (umount, or a signal): what is left to do before the
 * image is free again is writing back the dirty cache (at most the dirty
 * limit) and checkpointing the journal.  Say how much, for whoever waits.
 */
static double say_unmounting(struct gs_fs *fs, const char *image)
{
	struct gs_fs_statfs sf = { 0 };

	gs_fs_statfs(fs, &sf);
	say(GS_LOG_INFO, "%s: unmounted; writing back %llu MiB of dirty cache, then the journal",
	    image, (unsigned long long)sf.cache_dirty >> 20);
	return mono_s();
}

/* Fork; the parent waits for the child's verdict on the pipe and exits with it. */
static int daemon_fork(int *wfd)
{
	int pfd[2];
	pid_t pid;
	char st;

	if (pipe(pfd)) {
		perror("gstorefs: pipe");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("gstorefs: fork");
		return -1;
	}
	if (pid > 0) {
		close(pfd[1]);
		if (read(pfd[0], &st, 1) != 1)
			st = 1;	/* child died before reporting */
		_exit(st);
	}
	close(pfd[0]);
	setsid();
	*wfd = pfd[1];
	return 0;
}

static void daemon_ready(int wfd, char status)
{
	int fd;

	if (wfd < 0)
		return;
	if (!status) {
		openlog("gstorefs", LOG_PID, LOG_DAEMON);
		detached = 1;
		if (chdir("/")) {
			/* nothing holds the old cwd busy either way */
		}
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}
	if (write(wfd, &status, 1) != 1) {
		/* the parent is gone: nothing to tell */
	}
	close(wfd);
}

static int parse_conf(struct conf *c, struct gs_fs_opts *fo)
{
	uint64_t v;

	if (c->cache) {
		if (gs_parse_size(c->cache, &v) || !v) {
			fprintf(stderr, "gstorefs: bad cache size '%s'\n", c->cache);
			return -1;
		}
		fo->cache_bytes = v;
	}
	if (c->line) {
		if (gs_parse_size(c->line, &v) || !v || v > (1u << 30) || (v & (v - 1))) {
			fprintf(stderr, "gstorefs: bad line size '%s' (a power of two)\n",
				c->line);
			return -1;
		}
		fo->line_size = (uint32_t)v;
	}
	if (c->dirty) {
		if (gs_parse_size(c->dirty, &v) || !v) {
			fprintf(stderr, "gstorefs: bad dirty size '%s'\n", c->dirty);
			return -1;
		}
		fo->dirty_bytes = v;
	}
	fo->path = c->image;
	fo->pollers = c->pollers;
	fo->queue_depth = c->qd;
	fo->fault = c->fault;
	if (c->devices) {
		/* a pool's members, in any order (btrfs's device=): backend "pool:D1:D2..." */
		char *b = malloc(strlen(c->devices) + 6);

		if (!b)
			return -1;
		sprintf(b, "pool:%s", c->devices);
		free(c->backend);
		c->backend = b;
	}
	fo->backend = c->backend;
	/* umount(2) returns before the old daemon of this image has written its
	 * cache back and let go: wait for it (while it writes) instead of failing */
	fo->flags = GS_FS_WAIT | (c->ro ? GS_FS_RDONLY : 0) | (c->buffered ? GS_FS_BUFFERED : 0);
	return 0;
}

static int run_loop(struct fuse_session *se, const struct fuse_cmdline_opts *o,
		    const struct conf *c)
{
	struct fuse_loop_config *cfg;
	unsigned threads;
	int ret;

	if (o->singlethread)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -1;
	threads = c->threads ? c->threads : 64;
	fuse_loop_cfg_set_max_threads(cfg, threads);
	/* Keep workers around: creating threads per burst costs more than their
	 * stacks (-o max_idle_threads=N still overrides). */
	fuse_loop_cfg_set_idle_threads(cfg, o->max_idle_threads != UINT_MAX ?
				       o->max_idle_threads : threads);
	fuse_loop_cfg_set_clone_fd(cfg, (unsigned)o->clone_fd);
	ret = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret;
}

/*
 * The attach socket next to the mount point (fs/fuse/attach_srv.h): CUDA
 * programs and other clients get rings served by this daemon's pollers.
 * Other users may attach when they may use the mount (allow_other, which
 * root's mounts have).  A mount whose parent directory is not writable
 * still works, without it.
 */
static void attach_synced(void *se, uint64_t ino)
{
	/* a client wrote the file behind us: drop the kernel's pages of it */
	fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
}

static void start_attach(struct gs_attach_srv **att, struct gs_fs *fs, struct gs_fuse *gf,
			 struct fuse_session *se, const char *mnt)
{
	struct gs_attach_srv_params p = { .fs = fs, .allow_other = geteuid() == 0,
					  .synced = attach_synced, .arg = se,
					  .graph_layout = gs_fuse_graph_layout, .garg = gf };
	char sock[PATH_MAX];
	int ret = gs_attach_sock_path(mnt, sock, sizeof(sock));

	p.sock_path = sock;
	if (!ret)
		ret = gs_attach_start(att, &p);
	if (ret < 0)
		fprintf(stderr, "gstorefs: no attach socket for %s: %s\n", mnt, strerror(-ret));
}

/*
 * `mount -o remount,ro DIR` runs the helper again: mount.fuse3 calls
 * `gstorefs IMAGE DIR -o remount,ro,...` (mount(8)'s merged options).  A new
 * daemon would find the image in use; a remount is the kernel's business:
 * mount(2) with MS_REMOUNT and the flags named.  The daemon serving DIR sees
 * the superblock change and follows it (fs/fuse/remount.c); this waits until
 * it has, so a remount read-only returns with the image written back and clean.
 */
static const struct {
	const char *name;
	unsigned long set, clear;
} mount_words[] = {
	{ "ro", MS_RDONLY, 0 }, { "rw", 0, MS_RDONLY },
	/* nosuid,nodev may be added; dev,suid are mount.fuse3's words for every
	 * root mount, so they keep what the mount has (mnt_sec_flags()) */
	{ "nosuid", MS_NOSUID, 0 }, { "nodev", MS_NODEV, 0 },
	{ "noexec", MS_NOEXEC, 0 }, { "exec", 0, MS_NOEXEC },
	{ "sync", MS_SYNCHRONOUS, 0 }, { "async", 0, MS_SYNCHRONOUS },
	{ "dirsync", MS_DIRSYNC, 0 },
	{ "noatime", MS_NOATIME, 0 }, { "atime", 0, MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME, 0 }, { "diratime", 0, MS_NODIRATIME },
	{ "relatime", MS_RELATIME, 0 }, { "norelatime", 0, MS_RELATIME },
	{ "strictatime", MS_STRICTATIME, 0 },
	{ "lazytime", MS_LAZYTIME, 0 }, { "nolazytime", 0, MS_LAZYTIME },
};

/* nosuid,nodev as the mount at @mnt has them (mount(8)'s words for them
 * cannot be told from those mount.fuse3 adds): a remount keeps them. */
static unsigned long mnt_sec_flags(const char *mnt)
{
	struct statvfs st;

	if (statvfs(mnt, &st))
		return MS_NOSUID | MS_NODEV;
	return (st.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (st.f_flag & ST_NODEV ? MS_NODEV : 0);
}

/* The value of "KEY: " in DIR/.gstore/info, or -1 (no mount of gstorefs there). */
static long info_field(const char *mnt, const char *key)
{
	char path[PATH_MAX], line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/.gstore/info", mnt);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':')
			v = strtol(line + klen + 1, NULL, 10);
	fclose(f);
	return v;
}

/* @opts: every -o word given, comma-separated.  Returns the exit status. */
static int remount(const char *mnt, char *opts)
{
	unsigned long flags = MS_REMOUNT | mnt_sec_flags(mnt);
	long ro;

	for (char *w = strtok(opts, ","); w; w = strtok(NULL, ",")) {
		for (size_t i = 0; i < sizeof(mount_words) / sizeof(mount_words[0]); i++) {
			if (!strcmp(w, mount_words[i].name)) {
				flags = (flags & ~mount_words[i].clear) | mount_words[i].set;
				break;
			}
		}
		/* gstore's own options (cache=, ...) need a new mount: as
		 * mount(8) does with most filesystems, they are not changed */
	}
	ro = info_field(mnt, "read_only");
	if (ro < 0) {
		fprintf(stderr, "gstorefs: %s is not a gstorefs mount\n", mnt);
		return 1;
	}
	if (ro == 1 && !(flags & MS_RDONLY) && info_field(mnt, "rw_allowed") == 0) {
		fprintf(stderr, "gstorefs: %s was mounted read-only (or is until fsck): unmount "
			"it and mount it read-write\n", mnt);
		return 1;
	}
	if (mount(NULL, mnt, NULL, flags, NULL)) {
		fprintf(stderr, "gstorefs: remount %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	/* the daemon writes back what is dirty first: the time an unmount's
	 * exit takes (gstorefs(8), UNMOUNTING), bounded the same way */
	for (double t0 = mono_s(); mono_s() - t0 < 600;) {
		ro = info_field(mnt, "read_only");
		if (ro == !!(flags & MS_RDONLY))
			return 0;
		if (ro < 0)
			break;
		usleep(20000);
	}
	fprintf(stderr, "gstorefs: remounted %s, but its daemon %s\n", mnt,
		ro < 0 ? "is gone" : "has not followed (see its log)");
	return 1;
}

/* The -o words of argv, comma-joined, when one is "remount" (and *mnt, the
 * second argument that is no option); else NULL. */
static char *remount_opts(int argc, char **argv, const char **mnt)
{
	char *all = NULL, *w;
	size_t len = 0;
	int found = 0, nonopts = 0;

	for (int i = 1; i < argc; i++) {
		const char *o = !strcmp(argv[i], "-o") && i + 1 < argc ? argv[++i] :
				!strncmp(argv[i], "-o", 2) ? argv[i] + 2 : NULL;
		char *n;

		if (!o) {
			if (argv[i][0] != '-' && ++nonopts == 2)
				*mnt = argv[i];
			continue;
		}
		n = realloc(all, len + strlen(o) + 2);
		if (!n)
			break;
		all = n;
		len += (size_t)sprintf(all + len, "%s%s", len ? "," : "", o);
	}
	for (char *p = all; p && (w = strstr(p, "remount")); p = w + 7)
		if ((w == all || w[-1] == ',') && (w[7] == ',' || !w[7]))
			found = 1;
	if (!found || !*mnt) {
		free(all);
		return NULL;
	}
	return all;
}

/*
 * A second mount of a mounted image is another view of the same filesystem,
 * as the kernel gives for a block device mounted twice (one superblock): a
 * bind mount of the first, served by its daemon, which exits once both are
 * unmounted.  Root only (mount(2)); with -f, which asks to run a daemon, the
 * image stays refused as in use.  Returns the exit status, or -1: not mounted
 * (or its daemon is gone): mount as usual.
 */
static int mount_again(const char *image, const char *mnt, const struct conf *c)
{
	unsigned long f = MS_BIND | MS_REMOUNT | (c->ro ? MS_RDONLY : 0) |
			  (c->no_suid ? MS_NOSUID : 0) | (c->no_dev ? MS_NODEV : 0);
	char *first = gs_fs_find_mount(image), info[PATH_MAX];
	int ret = -1;

	if (!first)
		return -1;
	snprintf(info, sizeof(info), "%s/.gstore/info", first);
	if (access(info, R_OK))
		goto out;	/* a dead mount: the usual path says so */
	ret = 1;
	if (mount(first, mnt, NULL, MS_BIND, NULL)) {
		fprintf(stderr, "gstorefs: bind %s (%s's mount) on %s: %s\n", first, image, mnt,
			strerror(errno));
		goto out;
	}
	/* the bind's own flags: nosuid,nodev as the first's or if asked, ro if asked */
	if (mount(NULL, mnt, NULL, f | mnt_sec_flags(first), NULL)) {
		fprintf(stderr, "gstorefs: flags of %s: %s\n", mnt, strerror(errno));
		umount2(mnt, MNT_DETACH);
		goto out;
	}
	ret = 0;
out:
	free(first);
	return ret;
}

int main(int argc, char **argv)
{
	struct conf c = { .timeout = -1, .readahead = 4096, .stream_ra = 16384 };
	struct fuse_args args;
	struct fuse_cmdline_opts o = { 0 };
	struct gs_fs_opts fo = { 0 };
	struct gs_fuse_conf fc = { 0 };
	struct gs_fuse *gf = NULL;
	struct gs_fs *fs = NULL;
	struct fuse_session *se;
	struct gs_attach_srv *att = NULL;
	struct gs_fuse_watch *watch = NULL;
	sigset_t sigs, oldsigs;
	char *fsname = NULL, imgpath[PATH_MAX], *rmopts;
	const char *rmnt = NULL;
	int wfd = -1, ret = 1;
	double t_end = 0;

	if (!strncmp(basename(argv[0]), "mount.", 6))
		argc = strip_mount_flags(argc, argv);
	rmopts = remount_opts(argc, argv, &rmnt);
	if (rmopts) {
		ret = remount(rmnt, rmopts);
		free(rmopts);
		return ret;
	}
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	gs_set_log_func(log_msg, NULL);

	if (fuse_opt_parse(&args, &c, gs_opts, opt_proc) == -1)
		goto free_args;
	if (c.nonopts < 2) {
		usage(stderr);
		goto free_args;
	}
	/* fsname is the image's absolute path: `gstore` finds the mount by it. */
	fsname = fsname_opt(realpath(c.image, imgpath) ? imgpath : c.image);
	if (!fsname || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, c.allow_dev && !c.no_dev ? "dev" : "nodev") ||
	    fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, c.allow_suid && !c.no_suid ? "suid" : "nosuid") ||
	    fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, "default_permissions,subtype=gstorefs") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, fsname) ||
	    (geteuid() == 0 &&
	     (fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, "allow_other"))))
		goto free_args;
	if (fuse_parse_cmdline(&args, &o) || !o.mountpoint) {
		usage(stderr);
		goto free_args;
	}
	if (parse_conf(&c, &fo))
		goto free_args;
	if ((c.allow_dev || c.allow_suid) && geteuid() != 0) {
		fprintf(stderr, "gstorefs: allow_dev and allow_suid need root\n");
		goto free_args;
	}
	fc.rdonly = (unsigned)c.ro;
	fc.timeout = c.timeout;
	fc.readahead_kib = c.readahead;
	fc.stream_ra_kib = c.stream_ra;
	fc.kdirty_bytes = 512ull << 20;
	if (c.kdirty && gs_parse_size(c.kdirty, &fc.kdirty_bytes)) {
		fprintf(stderr, "gstorefs: bad kdirty size '%s'\n", c.kdirty);
		goto free_args;
	}
	fc.threads = c.threads;
	if (!c.uring || !strcmp(c.uring, "auto")) {
		fc.uring = GS_FUSE_URING_AUTO;
	} else if (!strcmp(c.uring, "on")) {
		fc.uring = GS_FUSE_URING_ON;
	} else if (!strcmp(c.uring, "off")) {
		fc.uring = GS_FUSE_URING_OFF;
	} else {
		fprintf(stderr, "gstorefs: bad uring mode '%s' (auto, on or off)\n", c.uring);
		goto free_args;
	}
	if (geteuid() == 0 && !o.foreground) {
		ret = mount_again(c.image, o.mountpoint, &c);
		if (ret >= 0)
			goto free_args;
		ret = 1;
	}

	if (!o.foreground && daemon_fork(&wfd))
		goto free_args;
	/* Threads started below (pollers) must not take the termination
	 * signals: libfuse's handlers have to run in the loop's thread. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &oldsigs);
	ret = gs_fs_mount(&fs, &fo);
	if (ret < 0) {
		fprintf(stderr, "gstorefs: cannot mount %s: %s\n", c.image, strerror(-ret));
		ret = 1;
		goto fail;
	}
	ret = 1;
	if (gs_fuse_new(&gf, fs, &fc, &args) < 0)
		goto unmount_fs;
	se = gs_fuse_session(gf);
	if (fuse_set_signal_handlers(se))
		goto destroy;
	if (fuse_session_mount(se, o.mountpoint))
		goto remove_handlers;
	ret = gs_fuse_start_transport(gf);
	if (ret < 0) {
		fprintf(stderr, "gstorefs: FUSE over io_uring: %s%s\n", strerror(-ret),
			ret == -EOPNOTSUPP ? " (kernel >= 6.14 with CONFIG_FUSE_IO_URING and "
			"fuse.enable_uring=1 needed)" : "");
		ret = 1;
		goto session_unmount;
	}
	ret = gs_fuse_set_readahead(gf, o.mountpoint);
	if (ret < 0 && ret != -EACCES && ret != -EPERM && ret != -EROFS)
		fprintf(stderr, "gstorefs: read-ahead stays the kernel's: %s\n", strerror(-ret));
	ret = gs_fuse_set_dirty(gf, o.mountpoint);
	if (ret < 0 && ret != -EACCES && ret != -EPERM && ret != -EROFS)
		fprintf(stderr, "gstorefs: dirty page limit stays the kernel's: %s\n",
			strerror(-ret));
	ret = 1;
	start_attach(&att, fs, gf, se, o.mountpoint);	/* before the unblock: its thread too */
	ret = gs_fuse_watch_start(&watch, gf, o.mountpoint);
	if (ret < 0)
		fprintf(stderr, "gstorefs: remounts of %s not followed: %s\n", o.mountpoint,
			strerror(-ret));
	ret = 1;
	pthread_sigmask(SIG_SETMASK, &oldsigs, NULL);
	daemon_ready(wfd, 0);
	wfd = -1;

	ret = run_loop(se, &o, &c) ? 1 : 0;
	t_end = say_unmounting(fs, c.image);

	gs_fuse_watch_stop(watch);
	gs_attach_stop(att);
session_unmount:
	fuse_session_unmount(se);
remove_handlers:
	fuse_remove_signal_handlers(se);
destroy:
	gs_fuse_destroy(gf);
unmount_fs:
	if (gs_fs_unmount(fs) < 0)
		ret = 1;	/* data not flushed: say so in the exit status */
	if (t_end)
		say(ret ? GS_LOG_ERR : GS_LOG_INFO, "%s: %s after %.1f s", c.image,
		    ret ? "write-back FAILED, released" : "written back and released",
		    mono_s() - t_end);
fail:
	daemon_ready(wfd, 1);	/* only if still attached: a failure before the mount */
free_args:
	free(fsname);
	free(o.mountpoint);
	free(c.image);
	/* fuse_opt_parse strdup()s every "%s" option value */
	free(c.cache);
	free(c.line);
	free(c.dirty);
	free(c.fault);
	free(c.backend);
	free(c.devices);
	free(c.uring);
	free(c.kdirty);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
