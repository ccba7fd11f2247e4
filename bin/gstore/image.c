// SPDX-License-Identifier: MIT
/* gstore mkfs / fsck / stat: whole-filesystem commands. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "gstore_fs.h"
#include "gstore_q.h"
#include "cmd.h"
#include "../opts.h"

#define DEFAULT_IMAGE_SIZE	(4ULL << 30)

/* Create or resize a regular image file to @size (0: keep / default). */
static int prepare_image(const char *path, uint64_t size, int force)
{
	struct stat st;
	int fd, ret = 0;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return 0;	/* a device: its size is its size */
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		return gs_fail(-1, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = gs_fail(-1, "cannot stat %s: %s", path, strerror(errno));
		goto close_fd;
	}
	if (!size)
		size = st.st_size ? (uint64_t)st.st_size : DEFAULT_IMAGE_SIZE;
	if ((uint64_t)st.st_size > size && !force) {
		ret = gs_fail(-1, "%s is larger than --size; use --force to shrink it", path);
		goto close_fd;
	}
	/* A sparse file: blocks are allocated as gstore writes them. */
	if ((uint64_t)st.st_size != size && ftruncate(fd, (off_t)size) < 0)
		ret = gs_fail(-1, "cannot size %s: %s", path, strerror(errno));
close_fd:
	close(fd);
	return ret;
}

int cmd_mkfs(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "label", required_argument, NULL, 'L' },
		{ "journal-blocks", required_argument, NULL, 'J' },
		{ "force", no_argument, NULL, 'f' },
		{ "backend", required_argument, NULL, 'B' },
		{ "layout", required_argument, NULL, 'y' },
		{ "stripe-unit", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct gs_pool_opts po = { 0 };
	int pool = 0;
	struct gs_mkfs_opts o = { 0 };
	uint64_t v, size = 0;
	const char *path;
	char *mnt, hs[32];
	int c, ret;

	while ((c = getopt_long(argc, argv, "s:b:L:J:fFqhB:", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			if (gs_parse_size(optarg, &size) || !size)
				return gs_fail(2, "bad size '%s' (e.g. 4G, 512M)", optarg);
			break;
		case 'b':
			if (gs_parse_size(optarg, &v) || v < 4096 || v > 65536 || (v & (v - 1)))
				return gs_fail(2, "bad block size '%s' (4096..65536, a power of two)",
					       optarg);
			o.block_size = (uint32_t)v;
			break;
		case 'L':
			o.label = optarg;
			break;
		case 'J':
			if (gs_parse_size(optarg, &v) || v > UINT32_MAX)
				return gs_fail(2, "bad journal size '%s'", optarg);
			o.journal_blocks = (uint32_t)v;
			break;
		case 'f':
		case 'F':
			o.force = 1;
			break;
		case 'q':
			break;
		case 'B':
			o.backend = optarg;
			break;
		case 'y':
			po.layout = optarg;
			pool = 1;
			break;
		case 'u':
			if (gs_parse_size(optarg, &v) || v < 4096 || v > (16u << 20) || (v & (v - 1)))
				return gs_fail(2, "bad stripe unit '%s' (4K..16M, a power of two)",
					       optarg);
			po.stripe_unit = (uint32_t)v;
			pool = 1;
			break;
		case 'h':
			gs_usage("mkfs");
			return 0;
		default:
			return gs_usage("mkfs");
		}
	}
	if (optind < argc - 1 || (pool && optind == argc - 1)) {
		for (c = optind; c < argc; c++)
			if (prepare_image(argv[c], size, o.force) < 0)
				return 1;
		return pool_mkfs((const char *const *)argv + optind, (unsigned)(argc - optind),
				 &po, &o);
	}
	if (optind != argc - 1)
		return gs_usage("mkfs");
	path = argv[optind];
	mnt = gs_find_mount(path);
	if (mnt) {
		gs_fail(1, "%s is mounted at %s; unmount it first", path, mnt);
		free(mnt);
		return 1;
	}
	if (prepare_image(path, size, o.force) < 0)
		return 1;
	ret = gs_fs_mkfs(path, &o);
	if (ret == -EEXIST)
		return gs_fail(1, "%s already holds a gstore filesystem; use --force to overwrite",
			       path);
	if (ret < 0)
		return gs_fail(1, "mkfs %s: %s", path, strerror(-ret));
	{
		struct stat st;

		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			printf("%s: gstore filesystem, %s, block size %u\n", path,
			       gs_human((uint64_t)st.st_size, hs, sizeof(hs)),
			       o.block_size ? o.block_size : 4096);
		else
			printf("%s: gstore filesystem created\n", path);
	}
	return 0;
}

static void fsck_line(void *arg, const char *line)
{
	(*(unsigned *)arg)++;
	printf("%s\n", line);
}

int cmd_fsck(int argc, char **argv)
{
	unsigned flags = 0, lines = 0;
	int c, ret, no = 0, yes = 0;
	const char *path;
	char *mnt;

	/* e2fsck's letters: -n no changes, -y/-p/-a repair, -f force; -v, -C accepted */
	while ((c = getopt(argc, argv, "nypafvC:h")) != -1) {
		switch (c) {
		case 'n':
			no = 1;
			break;
		case 'y':
		case 'p':
		case 'a':
			yes = 1;
			break;
		case 'f':
			flags |= GS_FSCK_FORCE;
			break;
		case 'v':
		case 'C':
			break;
		case 'h':
			gs_usage("fsck");
			return 0;
		default:
			gs_usage("fsck");
			return 16;	/* e2fsck: usage or syntax error */
		}
	}
	if (optind != argc - 1 || (no && yes)) {
		gs_usage("fsck");
		return 16;	/* e2fsck: usage or syntax error */
	}
	path = argv[optind];
	mnt = gs_find_mount(path);
	if (mnt) {
		gs_fail(0, "%s is mounted at %s; unmount it first", path, mnt);
		free(mnt);
		return GS_FSCK_ERROR;
	}
	if (yes)
		flags |= GS_FSCK_REPAIR;
	/* locked but not mounted: a daemon still writing back after its unmount */
	flags |= GS_FSCK_WAIT;
	ret = gs_fs_fsck(path, flags, fsck_line, &lines);
	if (ret < 0) {
		gs_fail(0, "fsck %s: %s", path, strerror(-ret));
		return GS_FSCK_ERROR;
	}
	/* a pool: also every mirrored chunk's copies against each other */
	if (!(ret & GS_FSCK_ERROR) && gs_pool_is_member(path))
		ret |= pool_check_mirrors(path, yes, &lines);
	if (ret == GS_FSCK_OK && !lines)
		printf("%s: clean\n", path);
	else if (ret & GS_FSCK_UNCORRECTED)
		printf("%s: errors left uncorrected%s\n", path, yes ? "" : " (run with -y to repair)");
	else if (ret & GS_FSCK_FIXED)
		printf("%s: errors corrected\n", path);
	return ret;
}

static int print_file(const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	close(fd);
	return n < 0 ? -errno : 0;
}

static int stat_mount(const char *dir)
{
	char p[4096], a[32], b[32], t[32];
	struct statvfs sv;
	int ret;

	snprintf(p, sizeof(p), "%s/.gstore/info", dir);
	printf("mount:       %s\n", dir);
	ret = print_file(p);
	if (ret < 0)
		return gs_fail(1, "cannot read %s: %s", p, strerror(-ret));
	if (statvfs(dir, &sv) == 0) {
		uint64_t bs = sv.f_frsize, total = sv.f_blocks * bs, fr = sv.f_bfree * bs;

		printf("space:       %s total, %s used, %s free\n",
		       gs_human(total, t, sizeof(t)), gs_human(total - fr, a, sizeof(a)),
		       gs_human(fr, b, sizeof(b)));
		printf("objects:     %llu used, %llu free\n",
		       (unsigned long long)(sv.f_files - sv.f_ffree),
		       (unsigned long long)sv.f_ffree);
	}
	return 0;
}

static int stat_image(const char *path)
{
	struct gs_fs_opts o = { .path = path, .flags = GS_FS_RDONLY, .cache_bytes = 16u << 20 };
	struct gs_fs_statfs sf;
	char a[32], b[32], t[32];
	struct gs_fs *fs;
	char *text = NULL;
	int ret, n;

	ret = gs_fs_mount(&fs, &o);
	if (ret < 0)
		return gs_fail(1, "cannot open %s: %s", path, strerror(-ret));
	printf("image:       %s\n", path);
	for (size_t cap = 4096; cap <= (1u << 20); cap *= 4) {
		free(text);
		text = malloc(cap);
		if (!text)
			break;
		n = gs_fs_info_text(fs, text, cap);
		if (n >= 0 && (size_t)n < cap - 1) {
			fwrite(text, 1, (size_t)n, stdout);
			break;
		}
	}
	free(text);
	ret = gs_fs_statfs(fs, &sf);
	if (ret == 0) {
		uint64_t total = sf.blocks * sf.block_size, fr = sf.bfree * sf.block_size;

		printf("space:       %s total, %s used, %s free\n",
		       gs_human(total, t, sizeof(t)), gs_human(total - fr, a, sizeof(a)),
		       gs_human(fr, b, sizeof(b)));
		printf("objects:     %llu used, %llu free\n",
		       (unsigned long long)(sf.files - sf.ffree), (unsigned long long)sf.ffree);
	}
	gs_fs_unmount(fs);
	return ret < 0 ? gs_fail(1, "statfs %s: %s", path, strerror(-ret)) : 0;
}

int cmd_stat(int argc, char **argv)
{
	struct stat st;
	char *mnt;
	int ret;

	if (argc != 2 || argv[1][0] == '-')
		return gs_usage("stat");
	if (stat(argv[1], &st) < 0)
		return gs_fail(1, "%s: %s", argv[1], strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if (!gs_is_mount(argv[1]))
			return gs_fail(1, "%s is not a gstore mount point", argv[1]);
		return stat_mount(argv[1]);
	}
	/* A mounted image is read through its mount: the daemon owns it. */
	mnt = gs_find_mount(argv[1]);
	if (mnt) {
		ret = stat_mount(mnt);
		free(mnt);
		return ret;
	}
	return stat_image(argv[1]);
}
