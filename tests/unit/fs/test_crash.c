// SPDX-License-Identifier: MIT
/*
 * Crash cycles at the library level: a child mounts the image and runs two
 * threads of fsync'd creates+writes, renames and unlinks, telling the parent
 * through a pipe before it starts each operation and after its fsync
 * returned.  The parent SIGKILLs it at a random moment, runs fsck (which
 * replays the journal), remounts and checks: every acknowledged operation
 * is there, the one operation in flight per thread is fully there or fully
 * absent, no other names exist, file contents are exact, fsck is clean.
 *
 * GS_CRASH_CYCLES (default 24) and GS_CRASH_SEED override the defaults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "fs_test.h"

#define NTHREADS	2
#define MAXFILES	4096
#define PER_CYCLE	80	/* files per thread and cycle */

enum { R_BEGIN = 1, R_ACK = 2 };
enum { OP_CREATE = 1, OP_RENAME = 2, OP_UNLINK = 3 };

struct rec {
	uint8_t kind, op;
	uint16_t thread;
	uint32_t i;		/* file index the op is about */
	uint64_t size;
};
_Static_assert(sizeof(struct rec) == 16, "rec");

static char *img;
static int pipe_w;
static struct gs_fs *cfs;
static uint64_t cdir;
static int cycle_no;

static uint64_t file_seed(int cycle, int t, uint32_t i)
{
	return ((uint64_t)cycle << 40) | ((uint64_t)t << 32) | i;
}

static uint64_t file_size(int cycle, int t, uint32_t i)
{
	uint64_t x = file_seed(cycle, t, i) * 0x2545f4914f6cdd1dULL;

	return (x >> 20) % (64u << 10) + 1;
}

static void name_of(char *buf, int t, uint32_t i, bool renamed)
{
	sprintf(buf, "t%d-%u%s", t, i, renamed ? "-r" : "");
}

static void send_rec(uint8_t kind, uint8_t op, int t, uint32_t i, uint64_t size)
{
	struct rec r = { kind, op, (uint16_t)t, i, size };

	if (write(pipe_w, &r, sizeof(r)) != sizeof(r))
		_exit(3);
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	bool renamed[MAXFILES] = { false };
	bool gone[MAXFILES] = { false };
	char name[64], name2[64];
	uint8_t *buf = malloc(64u << 10);

	/* bounded, so that cycles never fill the image: then wait for the kill */
	for (uint32_t i = 0; i < MAXFILES; i++) {
		struct gs_stat st;
		uint64_t size = file_size(cycle_no, t, i);

		if (i == PER_CYCLE)
			for (;;)
				pause();

		test_fill(buf, size, file_seed(cycle_no, t, i));
		name_of(name, t, i, false);
		send_rec(R_BEGIN, OP_CREATE, t, i, size);
		int r = gs_fs_create(cfs, cdir, name, GS_T_ARRAY, 0644, 0, 0, &st);
		ssize_t w = r ? 0 : gs_fs_write(cfs, st.ino, buf, size, 0);

		if (!r && w != (ssize_t)size)
			r = w < 0 ? (int)w : -EIO;
		if (!r)
			r = gs_fs_fsync(cfs, st.ino, 0);
		if (r) {
			fprintf(stderr, "child: %s: %s\n", name, strerror(-r));
			_exit(4);
		}
		send_rec(R_ACK, OP_CREATE, t, i, size);

		if (i % 5 == 4 && !gone[i - 1]) {
			name_of(name, t, i - 1, renamed[i - 1]);
			name_of(name2, t, i - 1, true);
			send_rec(R_BEGIN, OP_RENAME, t, i - 1, 0);
			if (gs_fs_rename(cfs, cdir, name, cdir, name2, 0) ||
			    gs_fs_fsync(cfs, cdir, 0))
				_exit(5);
			renamed[i - 1] = true;
			send_rec(R_ACK, OP_RENAME, t, i - 1, 0);
		}
		if (i % 7 == 6 && !gone[i - 2]) {
			name_of(name, t, i - 2, renamed[i - 2]);
			send_rec(R_BEGIN, OP_UNLINK, t, i - 2, 0);
			if (gs_fs_unlink(cfs, cdir, name) || gs_fs_fsync(cfs, cdir, 0))
				_exit(6);
			gone[i - 2] = true;
			send_rec(R_ACK, OP_UNLINK, t, i - 2, 0);
		}
	}
	free(buf);
	return NULL;
}

static void child(int cycle, int fd)
{
	pthread_t th[NTHREADS];
	struct gs_stat st;
	char dname[32];

	pipe_w = fd;
	cycle_no = cycle;
	if (test_mount(&cfs, img))
		_exit(2);
	sprintf(dname, "c%d", cycle);
	if (gs_fs_create(cfs, GS_ROOT_INO, dname, GS_T_DIR, 0755, 0, 0, &st) ||
	    gs_fs_fsync(cfs, GS_ROOT_INO, 0))
		_exit(2);
	cdir = st.ino;
	send_rec(R_ACK, 0, 0, 0, 0);	/* the directory exists */
	for (int t = 0; t < NTHREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	_exit(0);
}

/* What the parent knows about one file. */
struct fstate {
	bool created;		/* create acked */
	bool renamed, gone;	/* acked */
	int inflight;		/* op begun, not acked (0: none) */
	uint64_t size;
};

static struct fstate files[NTHREADS][MAXFILES];

static void fsck_report(void *arg, const char *line)
{
	fprintf(stderr, "fsck: %s\n", line);
}

/* Is the file with this name, if it exists, of the expected content? */
static int check_one(struct gs_fs *fs, uint64_t dir, int cycle, int t, uint32_t i,
		     const char *name, bool *exists, uint64_t *size)
{
	struct gs_stat st;
	uint64_t want = file_size(cycle, t, i);
	uint8_t *a, *b;
	int ret = gs_fs_lookup(fs, dir, name, &st);

	*exists = ret == 0;
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	*size = st.size;
	if (st.size == 0)
		return 0;
	if (st.size != want) {
		fprintf(stderr, "%s: size %llu, expected %llu\n", name,
			(unsigned long long)st.size, (unsigned long long)want);
		return -EIO;
	}
	a = malloc(want);
	b = malloc(want);
	test_fill(a, want, file_seed(cycle, t, i));
	ret = gs_fs_read(fs, st.ino, b, want, 0) == (ssize_t)want && !memcmp(a, b, want) ? 0 : -EIO;
	if (ret)
		fprintf(stderr, "%s: content differs\n", name);
	free(a);
	free(b);
	return ret;
}

struct cnt {
	int n;
};

static int count_fill(void *arg, const char *name, const struct gs_stat *st, uint64_t next)
{
	((struct cnt *)arg)->n++;
	return 0;
}

static void verify(int cycle, bool dir_acked)
{
	struct gs_fs *fs;
	struct gs_stat dst;
	char dname[32], name[64];
	int expected_names = 0;
	struct cnt c = {0};

	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE | GS_FSCK_REPAIR, fsck_report, NULL),
			 GS_FSCK_OK);
	assert_int_equal(test_mount(&fs, img), 0);
	{
		struct gs_fs_statfs sf;

		gs_fs_statfs(fs, &sf);
		printf("cycle %d: %llu of %llu blocks free\n", cycle, (unsigned long long)sf.bfree,
		       (unsigned long long)sf.blocks);
	}
	sprintf(dname, "c%d", cycle);
	if (gs_fs_lookup(fs, GS_ROOT_INO, dname, &dst)) {
		assert_false(dir_acked);
		assert_int_equal(gs_fs_unmount(fs), 0);
		return;
	}
	for (int t = 0; t < NTHREADS; t++) {
		for (uint32_t i = 0; i < MAXFILES; i++) {
			struct fstate *f = &files[t][i];
			bool e1 = false, e2 = false;
			uint64_t s1 = 0, s2 = 0;

			if (!f->created && f->inflight != OP_CREATE)
				continue;
			name_of(name, t, i, false);
			assert_int_equal(check_one(fs, dst.ino, cycle, t, i, name, &e1, &s1), 0);
			name_of(name, t, i, true);
			assert_int_equal(check_one(fs, dst.ino, cycle, t, i, name, &e2, &s2), 0);
			assert_false(e1 && e2);
			expected_names += e1 || e2;
			if (f->inflight == OP_CREATE) {
				/* create and write+fsync: absent, empty or whole */
				assert_false(e2);
				continue;
			}
			if (f->gone) {
				assert_false(e1 || e2);
				continue;
			}
			if (e1 || e2)
				assert_int_not_equal(s1 + s2, 0);	/* acked: data is there */
			if (f->inflight == OP_UNLINK) {
				/* either way */
			} else if (f->renamed) {
				assert_true(e2);
			} else if (f->inflight == OP_RENAME) {
				assert_true(e1 || e2);
			} else {
				assert_true(e1);
			}
		}
	}
	/* nothing else exists */
	assert_int_equal(gs_fs_readdir(fs, dst.ino, 0, count_fill, &c), 0);
	assert_int_equal(c.n, expected_names);
	assert_int_equal(gs_fs_unmount(fs), 0);
	assert_int_equal(gs_fs_fsck(img, GS_FSCK_FORCE, fsck_report, NULL), GS_FSCK_OK);
}

static void test_crash_cycles(void **state)
{
	const char *e = getenv("GS_CRASH_CYCLES");
	int cycles = e ? atoi(e) : 24;
	unsigned seed = getenv("GS_CRASH_SEED") ? (unsigned)atoi(getenv("GS_CRASH_SEED")) :
						   (unsigned)time(NULL);
	uint64_t total_acks = 0;

	printf("crash: %d cycles, seed %u\n", cycles, seed);
	srand(seed);
	for (int cycle = 0; cycle < cycles; cycle++) {
		int p[2];
		pid_t pid;
		struct rec r;
		bool dir_acked = false;
		int status;

		memset(files, 0, sizeof(files));
		assert_int_equal(pipe(p), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			child(cycle, p[1]);
		}
		close(p[1]);
		usleep(20000 + rand() % 250000);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
			fprintf(stderr, "child exited with %d before the kill\n",
				WIFEXITED(status) ? WEXITSTATUS(status) : -1);
			fail();
		}
		while (read(p[0], &r, sizeof(r)) == sizeof(r)) {
			struct fstate *f;

			if (r.op == 0) {
				dir_acked = true;
				continue;
			}
			assert_true(r.thread < NTHREADS && r.i < MAXFILES);
			f = &files[r.thread][r.i];
			if (r.kind == R_BEGIN) {
				f->inflight = r.op;
				continue;
			}
			total_acks++;
			f->inflight = 0;
			if (r.op == OP_CREATE) {
				f->created = true;
				f->size = r.size;
			} else if (r.op == OP_RENAME) {
				f->renamed = true;
			} else {
				f->gone = true;
			}
		}
		close(p[0]);
		verify(cycle, dir_acked);
	}
	printf("crash: %llu acknowledged operations verified\n", (unsigned long long)total_acks);
}

static int setup(void **state)
{
	struct gs_mkfs_opts o = { .size = 256u << 20, .force = 1, .inodes = 16384 };

	gs_set_log_func(test_log, NULL);
	img = test_image_path("crash");
	return gs_fs_mkfs(img, &o) == 0 ? 0 : -1;	/* inodes for 24 cycles of files */
}

static int teardown(void **state)
{
	unlink(img);
	free(img);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_cycles),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
