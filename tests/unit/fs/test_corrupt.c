// SPDX-License-Identifier: MIT
/*
 * Corrupted and truncated images: mount and fsck give clean errors (never
 * a crash), fsck repairs and a second check is clean; the journal replays
 * only whole, checksummed transactions.  Damage a checksum cannot see: a
 * block bitmap that marks everything free (the mount goes read-only instead
 * of writing over files), a block claimed by two files (fsck gives one a
 * copy), the root's inode-table block destroyed (fsck rebuilds the tree from
 * the directory blocks left).  Ends with random byte flips in the metadata
 * of an image (a quick in-process fuzz).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/wait.h>

#include "fs_test.h"
#include "crc32c.h"
#include "gstore_format.h"
#include "../../../fs/fs_type.h"

static char *img, *gold;
static uint32_t bs = 4096;

static void fsck_print(void *arg, const char *line)
{
	if (getenv("GS_TEST_VERBOSE"))
		fprintf(stderr, "fsck: %s\n", line);
}

static int fsck(unsigned flags)
{
	return gs_fs_fsck(img, flags | GS_FSCK_FORCE, fsck_print, NULL);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

static void sb_read(struct gs_dsuper *sb)
{
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, sb, sizeof(*sb), 0), sizeof(*sb));
	close(fd);
}

static void flip(uint64_t off, uint8_t mask)
{
	int fd = open(img, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= mask;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static int mount_img(struct gs_fs **fs)
{
	return test_mount(fs, img);
}

/* The golden image: some files in arrays/, enough to fill 2 inode blocks. */
static int setup(void **state)
{
	struct gs_fs *fs;
	struct gs_stat arr, st;
	char name[32];

	gs_set_log_func(test_log, NULL);
	img = test_image_path("corrupt");
	gold = test_image_path("corrupt-gold");
	if (test_mkfs(gold, 32u << 20, bs) || test_mount(&fs, gold))
		return -1;
	if (gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr))
		return -1;
	for (int i = 0; i < 40; i++) {
		sprintf(name, "f%d", i);
		if (gs_fs_create(fs, arr.ino, name, GS_T_ARRAY, 0644, 0, 0, &st) ||
		    gs_fs_write(fs, st.ino, name, strlen(name), 0) < 0 ||
		    gs_fs_setxattr(fs, st.ino, "user.x", "1", 1, 0))
			return -1;
	}
	return gs_fs_unmount(fs);
}

static int teardown(void **state)
{
	unlink(img);
	unlink(gold);
	free(img);
	free(gold);
	return 0;
}

static int fresh(void **state)
{
	copy_file(gold, img);
	return 0;
}

static void test_sb_primary(void **state)
{
	struct gs_fs *fs;

	flip(100, 0x10);
	assert_int_equal(mount_img(&fs), 0);	/* falls back to the copy */
	assert_int_equal(gs_fs_unmount(fs), 0);	/* and rewrites both */
	assert_int_equal(fsck(0), GS_FSCK_OK);
	flip(100, 0x10);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

static void test_sb_both(void **state)
{
	struct gs_fs *fs;

	flip(100, 0x10);
	flip(bs + 100, 0x10);
	assert_int_equal(mount_img(&fs), -EUCLEAN);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_ERROR);
	/* not gstore at all */
	flip(0, 0xff);
	flip(bs, 0xff);
	assert_int_equal(mount_img(&fs), -EINVAL);
	assert_int_equal(fsck(0), GS_FSCK_ERROR);
}

static void test_sb_fields(void **state)
{
	struct gs_fs *fs;
	struct gs_dsuper sb;
	int fd;

	/* a well-formed superblock with absurd geometry is refused */
	sb_read(&sb);
	sb.itable_blocks = htole64(le64toh(sb.itable_blocks) + (1ULL << 50));
	sb.crc = 0;
	sb.crc = htole32(gs_crc32c(0, &sb, sizeof(sb)));
	fd = open(img, O_RDWR);
	assert_int_equal(pwrite(fd, &sb, sizeof(sb), 0), sizeof(sb));
	assert_int_equal(pwrite(fd, &sb, sizeof(sb), bs), sizeof(sb));
	close(fd);
	assert_int_equal(mount_img(&fs), -EUCLEAN);
	assert_int_equal(fsck(0), GS_FSCK_ERROR);
}

static void test_truncated(void **state)
{
	struct gs_fs *fs;

	assert_int_equal(truncate(img, 16u << 20), 0);
	assert_int_equal(mount_img(&fs), -EUCLEAN);
	assert_int_equal(fsck(0), GS_FSCK_ERROR);
	assert_int_equal(truncate(img, 100), 0);
	assert_true(mount_img(&fs) < 0);
	assert_int_equal(fsck(0), GS_FSCK_ERROR);
}

static void test_itable(void **state)
{
	struct gs_fs *fs;
	struct gs_dsuper sb;
	struct gs_stat arr, st;
	int bad = 0;
	char name[32];

	sb_read(&sb);
	/* inode table block 1: inodes 15..29 (files f10.. in arrays/) */
	flip((le64toh(sb.itable_start) + 1) * bs + 700, 0x01);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	for (int i = 0; i < 40; i++) {
		sprintf(name, "f%d", i);
		int r = gs_fs_lookup(fs, arr.ino, name, &st);

		assert_true(r == 0 || r == -EUCLEAN);
		bad += r == -EUCLEAN;
	}
	assert_int_equal(bad, 15);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	bad = 0;
	for (int i = 0; i < 40; i++) {
		sprintf(name, "f%d", i);
		bad += gs_fs_lookup(fs, arr.ino, name, &st) == -ENOENT;
	}
	assert_int_equal(bad, 15);
	assert_int_equal(gs_fs_create(fs, arr.ino, "new", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

static uint64_t root_dir_block(void)
{
	struct gs_dsuper sb;
	struct gs_dinode d;
	int fd = open(img, O_RDONLY);

	sb_read(&sb);
	assert_int_equal(pread(fd, &d, sizeof(d), le64toh(sb.itable_start) * bs +
			       GS_ITABLE_OFF + GS_INODE_SIZE), sizeof(d));
	close(fd);
	return le64toh(((struct gs_dextent *)d.xroot.e)->pblk);
}

static void test_dir_block(void **state)
{
	struct gs_fs *fs;
	struct gs_stat st;

	flip(root_dir_block() * bs + 40, 0x04);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &st), -EUCLEAN);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	/* the three type directories get their names back (mkfs made them 2, 3, 4) */
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &st), 0);
	assert_int_equal(st.type, GS_T_DIR);
	assert_int_equal(st.ino, 2);
	assert_int_equal(gs_fs_lookup(fs, st.ino, "f3", &st), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "graph", &st), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

static void test_bitmap(void **state)
{
	struct gs_fs *fs;
	struct gs_dsuper sb;

	sb_read(&sb);
	flip(le64toh(sb.bbitmap_start) * bs + 2000, 0x20);
	assert_int_equal(mount_img(&fs), -EUCLEAN);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* A crash with committed transactions in the journal: the child mounts,
 * does fsync'd work and exits without unmounting. */
static void crash_with_journal(int steps)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct gs_fs *fs;
		struct gs_stat st;
		char name[16];

		if (mount_img(&fs))
			_exit(2);
		for (int i = 0; i < steps; i++) {
			sprintf(name, "j%d", i);
			if (gs_fs_create(fs, GS_ROOT_INO, name, GS_T_ARRAY, 0644, 0, 0, &st) ||
			    gs_fs_write(fs, st.ino, name, strlen(name), 0) < 0 ||
			    gs_fs_fsync(fs, st.ino, 0))
				_exit(3);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Ring position of the journal's tail from the superblock. */
static uint64_t journal_blk(uint64_t i)
{
	struct gs_dsuper sb;

	sb_read(&sb);
	return le64toh(sb.journal_start) + (le64toh(sb.j_tail) + i) % le64toh(sb.journal_blocks);
}

static void test_journal_replay(void **state)
{
	struct gs_fs *fs;
	struct gs_stat st;
	char name[16], buf[16];

	crash_with_journal(3);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);	/* needs recovery */
	assert_int_equal(mount_img(&fs), 0);
	for (int i = 0; i < 3; i++) {
		sprintf(name, "j%d", i);
		assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, name, &st), 0);
		assert_int_equal(gs_fs_read(fs, st.ino, buf, sizeof(buf), 0), strlen(name));
		assert_memory_equal(buf, name, strlen(name));
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

/*
 * Each commit flushes the cache first, so the images of every earlier
 * transaction are home by the time a transaction is written: only the last
 * one depends on its journal copy.  Replay skips a damaged transaction
 * that has a successor; a damaged last one is lost (it was never acked
 * if it was torn, and it is the only copy if the medium lost it).
 */
static int count_j(struct gs_fs *fs)
{
	struct gs_stat st;
	char name[16];
	int found = 0;

	for (int i = 0; i < 4; i++) {
		sprintf(name, "j%d", i);
		found += gs_fs_lookup(fs, GS_ROOT_INO, name, &st) == 0;
	}
	return found;
}

/* ring index of the descriptor of transaction @k (0-based) after a crash */
static uint64_t tx_start(int k)
{
	uint64_t at = 0;
	int fd = open(img, O_RDONLY);

	for (int i = 0; i < k; i++) {
		struct gs_djdesc d;

		assert_int_equal(pread(fd, &d, sizeof(d), journal_blk(at) * bs), sizeof(d));
		at += le32toh(d.nr) + 2;
	}
	close(fd);
	return at;
}

static void test_journal_corrupt(void **state)
{
	struct gs_fs *fs;

	/* an image inside the first transaction: skipped, the rest replays */
	crash_with_journal(4);
	flip(journal_blk(1) * bs + 300, 0x08);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(count_j(fs), 4);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);

	/* the second transaction's descriptor: found by searching the ring */
	copy_file(gold, img);
	crash_with_journal(4);
	flip(journal_blk(tx_start(1)) * bs + 8, 0x01);	/* its blkno field */
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_REPAIR, fsck_print, NULL), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(count_j(fs), 4);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);

	/* the last transaction's commit block: that transaction is lost */
	copy_file(gold, img);
	crash_with_journal(4);
	{
		uint64_t at = tx_start(3);
		int fd = open(img, O_RDONLY);
		struct gs_djdesc d;

		assert_int_equal(pread(fd, &d, sizeof(d), journal_blk(at) * bs), sizeof(d));
		close(fd);
		flip(journal_blk(at + le32toh(d.nr) + 1) * bs + 60, 0x40);
	}
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(count_j(fs), 3);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

/* Walk everything reachable: no crash allowed, errors are fine. */
static int walk_fill(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	struct gs_fs *fs = arg;
	char buf[4096];

	if (st->type == GS_T_ARRAY)
		gs_fs_read(fs, st->ino, buf, sizeof(buf), 0);
	if (st->type == GS_T_DIR && st->ino > GS_ROOT_INO)
		gs_fs_readdir(fs, st->ino, 0, walk_fill, fs);
	return 0;
}

static void test_random_flips(void **state)
{
	const char *e = getenv("GS_FUZZ_ROUNDS");
	int rounds = e ? atoi(e) : 30;
	struct gs_dsuper sb;
	uint64_t meta_end;

	sb_read(&sb);
	meta_end = le64toh(sb.itable_start) + le64toh(sb.itable_blocks);
	srand(getenv("GS_FUZZ_SEED") ? (unsigned)atoi(getenv("GS_FUZZ_SEED")) : 1);
	for (int r = 0; r < rounds; r++) {
		struct gs_fs *fs;
		int n = 1 + rand() % 8, res, res2;

		copy_file(gold, img);
		for (int k = 0; k < n; k++) {
			/* mostly metadata: superblocks, bitmaps, inode table, dir blocks */
			uint64_t blk = rand() % 4 ? (uint64_t)rand() % (meta_end + 4) :
						    (uint64_t)rand() % 8192;

			flip(blk * bs + rand() % bs, 1u << (rand() % 8));
		}
		if (mount_img(&fs) == 0) {
			gs_fs_readdir(fs, GS_ROOT_INO, 0, walk_fill, fs);
			gs_fs_unmount(fs);
		}
		res = fsck(GS_FSCK_REPAIR);
		if (res & GS_FSCK_ERROR)
			continue;
		res2 = fsck(0);
		/* whatever the damage, a repair leaves a clean filesystem */
		if (res2 != GS_FSCK_OK) {
			fprintf(stderr, "round %d: repair left problems (%d then %d)\n", r, res,
				res2);
			fail();
		}
		if (res2 == GS_FSCK_OK && mount_img(&fs) == 0) {
			struct gs_stat st;

			assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "after", GS_T_ARRAY, 0644, 0,
						      0, &st), 0);
			gs_fs_readdir(fs, GS_ROOT_INO, 0, walk_fill, fs);
			assert_int_equal(gs_fs_unmount(fs), 0);
			assert_int_equal(fsck(0), GS_FSCK_OK);
		}
	}
}

/* ---- damage with valid checksums ---- */

static char logbuf[8192];

static void log_collect(int level, const char *msg, void *arg)
{
	size_t n = strlen(logbuf);

	(void)arg;
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
	test_log(level, msg, NULL);
}

static void reseal(uint8_t *blk)
{
	struct gs_dblk *h = (void *)blk;

	h->crc = 0;
	h->crc = htole32(gs_crc32c(0, blk, bs));
}

static void rw_block(uint64_t blk, uint8_t *buf, bool write)
{
	int fd = open(img, O_RDWR);

	assert_true(fd >= 0);
	if (write)
		assert_int_equal(pwrite(fd, buf, bs, (off_t)blk * bs), bs);
	else
		assert_int_equal(pread(fd, buf, bs, (off_t)blk * bs), bs);
	close(fd);
}

/* Inode @ino's record: read into @d, or (@write) write @d back, crc resealed. */
static void dinode_io(uint64_t ino, struct gs_dinode *d, bool write)
{
	uint32_t ipb = (bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	struct gs_dsuper sb;
	uint8_t blk[65536];
	uint64_t b;

	sb_read(&sb);
	b = le64toh(sb.itable_start) + ino / ipb;
	rw_block(b, blk, false);
	if (!write) {
		memcpy(d, blk + GS_ITABLE_OFF + (ino % ipb) * GS_INODE_SIZE, sizeof(*d));
		return;
	}
	memcpy(blk + GS_ITABLE_OFF + (ino % ipb) * GS_INODE_SIZE, d, sizeof(*d));
	reseal(blk);
	rw_block(b, blk, true);
}

static uint64_t ino_of(struct gs_fs *fs, const char *name)
{
	struct gs_stat arr, st;

	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, name, &st), 0);
	return st.ino;
}

/* arrays/@name reads @want (@len bytes) exactly. */
static void expect_data(struct gs_fs *fs, const char *name, const void *want, size_t len)
{
	char *buf = malloc(len + 1);

	assert_non_null(buf);
	assert_int_equal(gs_fs_read(fs, ino_of(fs, name), buf, len + 1, 0), len);
	assert_memory_equal(buf, want, len);
	free(buf);
}

/* The golden image's files, each holding its name. */
static void expect_all(struct gs_fs *fs)
{
	for (int i = 0; i < 40; i++) {
		char name[8];

		sprintf(name, "f%d", i);
		expect_data(fs, name, name, strlen(name));
	}
}

/* Issue 14 item 1: every block marked free, crc valid; mount, write. */
static void test_bitmap_all_free(void **state)
{
	struct gs_dsuper sb;
	struct gs_fs *fs;
	struct gs_stat st;
	uint8_t blk[65536];

	sb_read(&sb);
	for (uint64_t b = 0; b < le64toh(sb.bbitmap_blocks); b++) {
		rw_block(le64toh(sb.bbitmap_start) + b, blk, false);
		memset(blk + GS_BITMAP_OFF, 0, bs - GS_BITMAP_OFF);
		reseal(blk);
		rw_block(le64toh(sb.bbitmap_start) + b, blk, true);
	}
	logbuf[0] = 0;
	gs_set_log_func(log_collect, NULL);
	assert_int_equal(mount_img(&fs), 0);
	gs_set_log_func(test_log, NULL);
	assert_non_null(strstr(logbuf, "block bitmap"));
	assert_non_null(strstr(logbuf, "read-only"));
	/* nothing can be written over the files */
	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "new", GS_T_ARRAY, 0644, 0, 0, &st),
			 -EROFS);
	assert_int_equal(gs_fs_write(fs, ino_of(fs, "f7"), "overwrite", 9, 4096), -EROFS);
	expect_data(fs, "f3", "f3", 2);
	expect_data(fs, "f7", "f7", 2);
	assert_int_equal(gs_fs_unmount(fs), 0);

	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	logbuf[0] = 0;
	gs_set_log_func(log_collect, NULL);
	assert_int_equal(mount_img(&fs), 0);
	gs_set_log_func(test_log, NULL);
	assert_null(strstr(logbuf, "read-only"));
	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "new", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	memset(blk, 'n', sizeof(blk));
	assert_int_equal(gs_fs_write(fs, st.ino, blk, sizeof(blk), 0), sizeof(blk));
	expect_all(fs);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

/* Two arrays of @nblk blocks, 'A' and 'B'; then b's extent points at a's blocks. */
static void cross_link(uint32_t nblk, uint64_t *ia, uint64_t *ib)
{
	struct gs_dinode da, db;
	struct gs_fs *fs;
	struct gs_stat arr, st;
	size_t len = (size_t)nblk * bs;
	char *buf = malloc(len);

	assert_non_null(buf);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	for (int k = 0; k < 2; k++) {
		memset(buf, 'A' + k, len);
		assert_int_equal(gs_fs_create(fs, arr.ino, k ? "b" : "a", GS_T_ARRAY, 0644, 0, 0,
					      &st), 0);
		assert_int_equal(gs_fs_write(fs, st.ino, buf, len, 0), len);
		*(k ? ib : ia) = st.ino;
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(buf);
	dinode_io(*ia, &da, false);
	dinode_io(*ib, &db, false);
	assert_int_equal(le16toh(da.xroot.h.nr), 1);
	assert_int_equal(le16toh(db.xroot.h.nr), 1);
	((struct gs_dextent *)db.xroot.e)->pblk = ((struct gs_dextent *)da.xroot.e)->pblk;
	dinode_io(*ib, &db, true);
}

/* Issue 14 item 1: a block claimed by two inodes; fsck -y gives one a copy. */
static void test_multiply_claimed(void **state)
{
	uint32_t nblk = 5;
	size_t len = (size_t)nblk * bs;
	char *a = malloc(len), *b = malloc(len);
	struct gs_fs *fs;
	uint64_t ia, ib;

	assert_non_null(a);
	assert_non_null(b);
	cross_link(nblk, &ia, &ib);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	/* what each reads through the cross-link is what each keeps */
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_read(fs, ia, a, len, 0), len);
	assert_int_equal(gs_fs_read(fs, ib, b, len, 0), len);
	assert_int_equal(gs_fs_unmount(fs), 0);

	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	expect_data(fs, "a", a, len);
	expect_data(fs, "b", b, len);
	/* and they are two files now: a write to one leaves the other alone */
	memset(b, 'Z', len);
	assert_int_equal(gs_fs_write(fs, ib, b, len, 0), len);
	expect_data(fs, "a", a, len);
	expect_data(fs, "b", b, len);
	expect_all(fs);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	free(a);
	free(b);
}

/* A cross-link with no space for a copy: one owner keeps the blocks, the
 * other has them punched out (reads zeros there). */
static void test_multiply_claimed_full(void **state)
{
	const uint32_t nblk = 200;
	struct gs_dinode da, db;
	struct gs_fs *fs;
	struct gs_stat arr, st;
	struct test_lines l = { .len = 0 };
	uint64_t ia, ib, fill;
	char *buf = malloc(1 << 20), *bb = malloc((size_t)nblk * bs);

	assert_non_null(buf);
	assert_non_null(bb);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_create(fs, arr.ino, "b", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	ib = st.ino;
	assert_int_equal(gs_fs_write(fs, ib, "b", 1, 0), 1);
	assert_int_equal(gs_fs_create(fs, arr.ino, "a", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	ia = st.ino;
	memset(buf, 'F', 1 << 20);
	for (fill = 0; gs_fs_write(fs, ia, buf, 1 << 20, fill) == 1 << 20; fill += 1 << 20)
		;
	while (gs_fs_write(fs, ia, buf, bs, fill) == (ssize_t)bs)
		fill += bs;
	assert_int_equal(gs_fs_unmount(fs), 0);
	/* b (the lower inode: it keeps) takes a's first nblk blocks */
	dinode_io(ia, &da, false);
	dinode_io(ib, &db, false);
	assert_true(le64toh(((struct gs_dextent *)da.xroot.e)->len) >= nblk);
	((struct gs_dextent *)db.xroot.e)->pblk = ((struct gs_dextent *)da.xroot.e)->pblk;
	((struct gs_dextent *)db.xroot.e)->len = htole32(nblk);
	db.size = htole64((uint64_t)nblk * bs);
	db.blocks = htole64(nblk);
	dinode_io(ib, &db, true);

	assert_int_equal(gs_fs_fsck(img, GS_FSCK_REPAIR | GS_FSCK_FORCE, test_lines_add, &l),
			 GS_FSCK_FIXED);
	assert_non_null(strstr(l.buf, "punched"));
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	memset(buf, 'F', (size_t)nblk * bs);
	expect_data(fs, "b", buf, (size_t)nblk * bs);
	assert_int_equal(gs_fs_read(fs, ia, buf, (size_t)nblk * bs, 0), (ssize_t)nblk * bs);
	memset(bb, 0, (size_t)nblk * bs);
	assert_memory_equal(buf, bb, (size_t)nblk * bs);
	assert_int_equal(gs_fs_read(fs, ia, buf, bs, (uint64_t)nblk * bs), bs);
	assert_int_equal(buf[0], 'F');
	assert_int_equal(gs_fs_unmount(fs), 0);
	free(bb);
	free(buf);
}

/* Issue 14 item 2: the inode-table block holding the root (and arrays/,
 * graph/, nd/, f0..f9) destroyed. */
static void test_root_destroyed(void **state)
{
	struct gs_dsuper sb;
	struct gs_fs *fs;
	struct gs_stat st;
	uint8_t blk[65536] = { 0 };
	uint32_t ipb = (bs - GS_ITABLE_OFF) / GS_INODE_SIZE;
	int found = 0;

	sb_read(&sb);
	rw_block(le64toh(sb.itable_start), blk, true);
	assert_true(mount_img(&fs) < 0);
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	/* the root's and arrays/'s directory blocks survived: every file whose
	 * inode survived is back under its name, with its data */
	for (int i = 0; i < 40; i++) {
		char name[8];
		struct gs_stat arr;

		sprintf(name, "f%d", i);
		assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
		if (gs_fs_lookup(fs, arr.ino, name, &st) == 0) {
			assert_true(st.ino >= ipb);
			expect_data(fs, name, name, strlen(name));
			found++;
		}
	}
	assert_int_equal(found, 40 - (int)(ipb - 5));
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "graph", &st), 0);
	assert_int_equal(st.type, GS_T_DIR);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "nd", &st), 0);
	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "after", GS_T_ARRAY, 0644, 0, 0, &st), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);
}

/* The same, and the root's and arrays/'s directory blocks destroyed too:
 * nothing keeps the names, the files go to /lost+found as #INO. */
static void test_root_and_names_destroyed(void **state)
{
	struct gs_dsuper sb;
	struct gs_dinode d;
	struct gs_fs *fs;
	struct gs_stat lf, st;
	uint8_t blk[65536] = { 0 };
	uint64_t ino[40], dirblk;
	char name[16];
	int found = 0;

	assert_int_equal(mount_img(&fs), 0);
	for (int i = 0; i < 40; i++) {
		sprintf(name, "f%d", i);
		ino[i] = ino_of(fs, name);
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
	dinode_io(2, &d, false);		/* arrays/ */
	dirblk = le64toh(((struct gs_dextent *)d.xroot.e)->pblk);
	rw_block(dirblk, blk, true);
	rw_block(root_dir_block(), blk, true);
	sb_read(&sb);
	rw_block(le64toh(sb.itable_start), blk, true);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "lost+found", &lf), 0);
	for (int i = 0; i < 40; i++) {
		char want[8];
		char buf[8];

		sprintf(name, "#%" PRIu64, ino[i]);
		sprintf(want, "f%d", i);
		if (gs_fs_lookup(fs, lf.ino, name, &st))
			continue;
		assert_int_equal(gs_fs_read(fs, st.ino, buf, sizeof(buf), 0), strlen(want));
		assert_memory_equal(buf, want, strlen(want));
		found++;
	}
	assert_int_equal(found, 30);
	for (int i = 0; i < 3; i++) {
		static const char *const tdir[] = { "arrays", "graph", "nd" };

		assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, tdir[i], &st), 0);
		assert_int_equal(st.type, GS_T_DIR);
	}
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* Symlinks (inline and long), hard links, special files: clean as made; a
 * long link whose target object is destroyed goes with all its names; a
 * hard-linked file that loses a name gets its link count put right. */
static void test_posix_kinds(void **state)
{
	char target[300], buf[300];
	struct gs_fs *fs;
	struct gs_stat arr, d2, st, sl, hl;
	struct gs_dinode d;

	memset(target, 't', sizeof(target) - 1);
	target[sizeof(target) - 1] = 0;
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, GS_ROOT_INO, "arrays", &arr), 0);
	assert_int_equal(gs_fs_create(fs, GS_ROOT_INO, "d2", GS_T_DIR, 0755, 0, 0, &d2), 0);
	assert_int_equal(gs_fs_symlink(fs, arr.ino, "short", "f3", 0, 0, &st), 0);
	assert_int_equal(gs_fs_symlink(fs, arr.ino, "long", target, 0, 0, &sl), 0);
	assert_int_equal(gs_fs_link(fs, sl.ino, d2.ino, "long2", &st), 0);
	assert_int_equal(gs_fs_link(fs, ino_of(fs, "f5"), d2.ino, "f5b", &hl), 0);
	assert_int_equal(gs_fs_mknod(fs, arr.ino, "fifo", S_IFIFO | 0644, 0, 0, 0, &st), 0);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(fsck(0), GS_FSCK_OK);

	/* the long link's target object: gone */
	dinode_io(sl.ino, &d, false);
	assert_true(le64toh(d.child_head) != 0);
	{
		uint64_t child = le64toh(d.child_head);

		memset(&d, 0, sizeof(d));
		dinode_io(child, &d, true);
	}
	/* d2's block: gone, so f5 keeps one name of two */
	dinode_io(d2.ino, &d, false);
	{
		uint8_t blk[65536] = { 0 };

		rw_block(le64toh(((struct gs_dextent *)d.xroot.e)->pblk), blk, true);
	}
	assert_int_equal(fsck(0), GS_FSCK_UNCORRECTED);
	assert_int_equal(fsck(GS_FSCK_REPAIR), GS_FSCK_FIXED);
	assert_int_equal(fsck(0), GS_FSCK_OK);
	assert_int_equal(mount_img(&fs), 0);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "long", &st), -ENOENT);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "short", &st), 0);
	assert_int_equal(gs_fs_readlink(fs, st.ino, buf, sizeof(buf)), 2);
	assert_memory_equal(buf, "f3", 2);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "fifo", &st), 0);
	assert_int_equal(st.mode & S_IFMT, S_IFIFO);
	assert_int_equal(gs_fs_lookup(fs, arr.ino, "f5", &st), 0);
	assert_int_equal(st.nlink, 1);
	expect_all(fs);
	assert_int_equal(gs_fs_unmount(fs), 0);
}

/* Every enum gs_obj_type has its ops in fs_types[] (fs/types.c). */
static void test_type_table(void **state)
{
	assert_null(fs_type(0));
	assert_null(fs_type(GS_T_NTYPES));
	for (uint32_t t = 1; t < GS_T_NTYPES; t++) {
		const struct fs_type_ops *o = fs_type(t);

		assert_non_null(o);
		assert_non_null(o->name);
		assert_true(o->ifmt == S_IFDIR || o->ifmt == S_IFREG || o->ifmt == S_IFLNK ||
			    (t == GS_T_SPECIAL && !o->ifmt));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_sb_primary, fresh),
		cmocka_unit_test_setup(test_sb_both, fresh),
		cmocka_unit_test_setup(test_sb_fields, fresh),
		cmocka_unit_test_setup(test_truncated, fresh),
		cmocka_unit_test_setup(test_itable, fresh),
		cmocka_unit_test_setup(test_dir_block, fresh),
		cmocka_unit_test_setup(test_bitmap, fresh),
		cmocka_unit_test_setup(test_bitmap_all_free, fresh),
		cmocka_unit_test_setup(test_multiply_claimed, fresh),
		cmocka_unit_test_setup(test_multiply_claimed_full, fresh),
		cmocka_unit_test_setup(test_root_destroyed, fresh),
		cmocka_unit_test_setup(test_root_and_names_destroyed, fresh),
		cmocka_unit_test_setup(test_posix_kinds, fresh),
		cmocka_unit_test(test_type_table),
		cmocka_unit_test_setup(test_journal_replay, fresh),
		cmocka_unit_test_setup(test_journal_corrupt, fresh),
		cmocka_unit_test(test_random_flips),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
