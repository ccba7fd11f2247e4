// SPDX-License-Identifier: MIT
/*
 * Fuzz target for the image parsers of the gstore filesystem.
 *
 * The first input byte picks a mode:
 *   0      superblock: gs_sb_parse() on the bytes (crc fixed up when the
 *          second byte is odd, so the checks behind the crc are reached)
 *   1      directory block: the bytes as a block's payload, header and crc
 *          made valid, then dir_parse() with indexing
 *   2      xattr block: likewise, xattr_parse_block()
 *   3..7   whole image: the bytes are patches (u32 offset, u8 xor) applied
 *          to the metadata of a small golden image that holds directories,
 *          files, xattrs, an extent tree, an internal object, an orphan and
 *          unreplayed journal transactions; then mount (replay), walk every
 *          name and read every file, unmount, fsck with repair, fsck again
 *          and, if that says clean, mount and write.
 *
 * Builds as a libFuzzer target (clang -fsanitize=fuzzer) or, with
 * -DGS_FUZZ_STANDALONE, as a plain program: `fuzz_image FILE...` runs the
 * files, `fuzz_image -t SECONDS [-s SEED]` runs random mutations.
 * tests/integration/fuzz.sh builds and runs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_internal.h"
#include "gstore.h"

#define IMG_BYTES	(8u << 20)
#define BS		4096u

static char img_path[256];
static uint8_t *golden;		/* the whole golden image */
static uint64_t patch_span;	/* patches land in [0, patch_span) */
static int buffered;

static void quiet(int level, const char *msg, void *arg)
{
	if (getenv("GS_FUZZ_VERBOSE"))
		fprintf(stderr, "log[%d]: %s\n", level, msg);
}

static int mount_img(struct gs_fs **fs)
{
	struct gs_fs_opts o = { .path = img_path, .cache_bytes = 4u << 20,
				.flags = buffered ? GS_FS_BUFFERED : 0 };

	return gs_fs_mount(fs, &o);
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_image: setup failed: %s\n", what);
	exit(1);
}

/* The golden image, built once: then the child "crashes" with fsync'd
 * work in the journal. */
static void build_golden(void)
{
	struct gs_mkfs_opts mo = { .size = IMG_BYTES, .force = 1 };
	struct gs_fs *fs;
	struct gs_stat arr, st;
	char name[32];
	uint64_t in;
	pid_t pid;
	int fd, status;

	if (gs_fs_mkfs(img_path, &mo))
		die("mkfs");
	if (mount_img(&fs)) {
		buffered = 1;
		if (mount_img(&fs))
			die("mount");
	}
	if (gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr))
		die("lookup");
	for (int i = 0; i < 20; i++) {
		sprintf(name, "f%d", i);
		if (gs_fs_create(fs, arr.ino, name, GS_T_ARRAY, 0644, 0, 0, &st) ||
		    gs_fs_write(fs, st.ino, name, strlen(name), 0) < 0 ||
		    gs_fs_setxattr(fs, st.ino, "user.gstore.dtype", "u8", 2, 0))
			die("files");
	}
	/* an extent tree with leaf blocks: many separate extents */
	if (gs_fs_create(fs, arr.ino, "tree", GS_T_ARRAY, 0644, 0, 0, &st))
		die("tree");
	for (int i = 0; i < 200; i++)
		if (gs_fs_write(fs, st.ino, "x", 1, (uint64_t)i * 2 * BS) < 0)
			die("tree write");
	if (gs_fs_create(fs, GS_ROOT_INO, "sub", GS_T_DIR, 0755, 0, 0, &st) ||
	    gs_fs_create(fs, st.ino, "deeper", GS_T_DIR, 0755, 0, 0, NULL))
		die("dirs");
	if (gs_fs_create(fs, GS_ROOT_INO, "space", GS_T_ND, 0755, 0, 0, &st) ||
	    gs_fs_create_internal(fs, st.ino, &in) || gs_fs_write(fs, in, "nd", 2, 0) < 0)
		die("internal");
	if (gs_fs_unmount(fs))
		die("unmount");
	pid = fork();
	if (pid == 0) {
		if (mount_img(&fs) || gs_fs_create(fs, arr.ino, "open", GS_T_ARRAY, 0644, 0, 0,
						   &st) ||
		    gs_fs_open(fs, st.ino, O_RDWR) || gs_fs_unlink(fs, arr.ino, "open"))
			_exit(2);
		for (int i = 0; i < 4; i++) {
			sprintf(name, "j%d", i);
			if (gs_fs_create(fs, GS_ROOT_INO, name, GS_T_ARRAY, 0644, 0, 0, &st) ||
			    gs_fs_write(fs, st.ino, name, strlen(name), 0) < 0 ||
			    gs_fs_fsync(fs, st.ino, 0))
				_exit(3);
		}
		_exit(0);	/* no unmount: the journal holds the last transactions */
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		die("crash child");
	golden = malloc(IMG_BYTES);
	fd = open(img_path, O_RDONLY);
	if (!golden || fd < 0 || pread(fd, golden, IMG_BYTES, 0) != IMG_BYTES)
		die("read golden");
	close(fd);
	{
		const struct gs_dsuper *sb = (const void *)golden;

		patch_span = (le64toh(sb->journal_start) + le64toh(sb->journal_blocks)) * BS;
		in = patch_span;	/* plus the first data blocks (dir, tree, xattr blocks) */
		patch_span = in + 64 * BS < IMG_BYTES ? in + 64 * BS : IMG_BYTES;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("TMPDIR");

	gs_set_log_func(quiet, NULL);
	snprintf(img_path, sizeof(img_path), "%s/gs-fuzz-%d.img", dir && *dir ? dir : "/tmp",
		 (int)getpid());
	build_golden();
	return 0;
}

static void fuzz_sb(const uint8_t *data, size_t size)
{
	struct gs_dsuper sb;
	struct gs_layout l;
	bool ro;

	memset(&sb, 0, sizeof(sb));
	if (size > 2)
		memcpy(&sb, data + 2, size - 2 < sizeof(sb) ? size - 2 : sizeof(sb));
	if (size > 1 && data[1] & 1)
		gs_sb_set_crc(&sb);
	gs_sb_parse(&sb, size > 1 && data[1] & 2 ? 0 : IMG_BYTES, &l, &ro);
}

static void fuzz_block(const uint8_t *data, size_t size, uint16_t type)
{
	struct gs_fs fs;
	uint8_t *blk = calloc(1, BS);
	size_t off = type == GS_BT_DIR ? GS_DIR_OFF : sizeof(struct gs_dblk);

	memset(&fs, 0, sizeof(fs));
	fs.bs = BS;
	fs.bshift = 12;
	fs.l.ninodes = 1024;
	fs.l.nblocks = IMG_BYTES / BS;
	gs_blk_init(blk, BS, 77, 5, type);
	if (size > 1)
		memcpy(blk + off, data + 1, size - 1 < BS - off ? size - 1 : BS - off);
	gs_blk_seal(blk, BS);
	if (gs_blk_verify(blk, BS, 77, type) == 0) {
		if (type == GS_BT_DIR) {
			struct dindex *d = calloc(1, sizeof(*d));

			dir_parse(&fs, blk, 77, 0, d);
			dir_index_free(d);
		} else {
			xattr_parse_block(&fs, blk);
		}
	}
	free(blk);
}

static int walk_fill(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	struct gs_fs *fs = arg;
	char buf[4096];

	if (st->type == GS_T_DIR && st->ino != GS_ROOT_INO)
		gs_fs_readdir(fs, st->ino, 0, walk_fill, fs);
	else if (st->ino)
		gs_fs_read(fs, st->ino, buf, sizeof(buf), 0);
	gs_fs_listxattr(fs, st->ino, buf, sizeof(buf));
	return 0;
}

static void fuzz_image(const uint8_t *data, size_t size)
{
	struct gs_fs *fs;
	int fd = open(img_path, O_RDWR);
	int res;

	if (fd < 0 || pwrite(fd, golden, IMG_BYTES, 0) != IMG_BYTES)
		die("restore image");
	for (size_t i = 1; i + 5 <= size; i += 5) {
		uint32_t off;
		uint8_t b;

		memcpy(&off, data + i, 4);
		off %= patch_span;
		if (pread(fd, &b, 1, off) != 1)
			die("pread");
		b ^= data[i + 4] ? data[i + 4] : 1;
		if (pwrite(fd, &b, 1, off) != 1)
			die("pwrite");
	}
	close(fd);
	if (mount_img(&fs) == 0) {
		gs_fs_readdir(fs, GS_ROOT_INO, 0, walk_fill, fs);
		gs_fs_unmount(fs);
	}
	res = gs_fs_fsck(img_path, GS_FSCK_REPAIR | GS_FSCK_FORCE, NULL, NULL);
	if (res & GS_FSCK_ERROR)
		return;
	res = gs_fs_fsck(img_path, GS_FSCK_FORCE, NULL, NULL);
	if (res == GS_FSCK_OK && mount_img(&fs) == 0) {
		struct gs_stat st;

		if (gs_fs_create(fs, GS_ROOT_INO, "after-fuzz", GS_T_ARRAY, 0644, 0, 0, &st) == 0)
			gs_fs_write(fs, st.ino, "ok", 2, 0);
		gs_fs_readdir(fs, GS_ROOT_INO, 0, walk_fill, fs);
		gs_fs_unmount(fs);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] & 7) {
	case 0:
		fuzz_sb(data, size);
		break;
	case 1:
		fuzz_block(data, size, GS_BT_DIR);
		break;
	case 2:
		fuzz_block(data, size, GS_BT_XATTR);
		break;
	default:
		fuzz_image(data, size);
		break;
	}
	return 0;
}

#ifdef GS_FUZZ_STANDALONE
/* Without libFuzzer: run files, or random inputs for a while. */
int main(int argc, char **argv)
{
	double secs = 0;
	unsigned seed = (unsigned)time(NULL);
	uint64_t runs = 0;
	int opt;

	while ((opt = getopt(argc, argv, "t:s:")) != -1) {
		if (opt == 't')
			secs = atof(optarg);
		else if (opt == 's')
			seed = (unsigned)atoi(optarg);
	}
	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = optind; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t buf[65536];
		size_t n;

		if (!f)
			continue;
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
		runs++;
	}
	if (secs > 0) {
		time_t end = time(NULL) + (time_t)secs;
		uint8_t buf[4200];

		srand(seed);
		printf("fuzz_image: standalone, seed %u, %.0f s\n", seed, secs);
		while (time(NULL) < end) {
			size_t n = 1 + rand() % sizeof(buf);

			for (size_t k = 0; k < n; k++)
				buf[k] = (uint8_t)rand();
			/* keep whole-image patches few so mounts get somewhere */
			if ((buf[0] & 7) >= 3 && n > 41)
				n = 1 + 5 * (1 + rand() % 8);
			LLVMFuzzerTestOneInput(buf, n);
			runs++;
		}
	}
	printf("fuzz_image: %" PRIu64 " inputs, no crash\n", runs);
	unlink(img_path);
	return 0;
}
#endif
