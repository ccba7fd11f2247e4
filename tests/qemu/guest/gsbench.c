// SPDX-License-Identifier: MIT
/*
 * 4 KiB random-read benchmark run inside the QEMU guest (static binary):
 *
 *   gsbench nvme /dev/gstore-nvme0 QD SECS RUNS     "nvme" backend (kmod queues)
 *   gsbench uring /dev/nvme0n1 QD SECS RUNS         io_uring, O_DIRECT, kernel driver
 *   gsbench passthru /dev/ng0n1 QD SECS RUNS        "uring-passthru" backend
 *
 * One thread keeps QD reads in flight over the first 64 MiB for SECS seconds
 * after a 0.5 s warm-up, RUNS times; prints the median run as
 *   bench MODE qd=QD iops=N cpu_us_per_io=X
 * CPU time is the process's user + system time (getrusage) per I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gpuq/backend.h"
#include "gpuq/nvme_kmod.h"

#define SPAN	(64ull << 20)
#define BS	4096u
#define MAXQD	256

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rnd_off(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return ((*s >> 20) % (SPAN / BS)) * BS;
}

struct result {
	double iops, cpu_us;
};

/* through backend ops ("nvme", "uring-passthru") */
static int run_backend(const struct gs_backend_ops *ops, const char *path, int qd, double secs,
		       struct result *r)
{
	struct gs_q_params p = { .path = path };
	struct gs_bio bio[MAXQD], *ios[MAXQD], *done[MAXQD];
	int64_t res[MAXQD];
	struct gs_bdev *bd;
	struct gs_bq *q;
	char *buf = aligned_alloc(4096, (size_t)qd * BS);
	uint64_t seed = 1, n = 0;
	double t0, c0, end, warm;
	int i, ret, measuring = 0, npend, inflight = 0;
	unsigned int loops = 0;

	ret = ops->open(&bd, &p);
	if (ret)
		return ret;
	if (ops->register_buffer) {
		ret = ops->register_buffer(bd, buf, (size_t)qd * BS);
		if (ret < 0) {
			fprintf(stderr, "register_buffer: %s\n", strerror(-ret));
			return ret;
		}
	}
	ret = ops->queue_create(bd, qd, -1, &q);
	if (ret) {
		fprintf(stderr, "queue_create: %s\n", strerror(-ret));
		return ret;
	}
	for (i = 0; i < qd; i++) {
		bio[i] = (struct gs_bio){ .op = GS_OP_READ, .len = BS, .off = rnd_off(&seed),
					  .buf = buf + (size_t)i * BS, .buf_index = -1 };
		ios[i] = &bio[i];
	}
	npend = qd;	/* ios[0..npend) wait for submission */
	warm = now_s() + 0.5;
	end = warm + secs;
	t0 = c0 = 0;
	for (;;) {
		int got, k, sub;

		/* the backend may take fewer than offered (queue slots busy) */
		sub = npend ? ops->submit(q, ios, npend) : 0;
		if (sub < 0)
			return sub;
		memmove(ios, ios + sub, (npend - sub) * sizeof(ios[0]));
		npend -= sub;
		inflight += sub;
		got = ops->reap(q, done, res, MAXQD);
		if (got < 0)
			return got;
		inflight -= got;
		for (k = 0; k < got; k++) {
			if (res[k] != BS) {
				fprintf(stderr, "read at %llu: %lld\n",
					(unsigned long long)done[k]->off, (long long)res[k]);
				return res[k] < 0 ? (int)res[k] : -EIO;
			}
			done[k]->off = rnd_off(&seed);
			ios[npend++] = done[k];
		}
		if (measuring)
			n += got;
		if (!got)
			ops->wait(q, 100);
		if ((++loops & 15) == 0) {
			double t = now_s();

			if (!measuring && t >= warm) {
				measuring = 1;
				t0 = t;
				c0 = cpu_s();
			} else if (measuring && t >= end) {
				break;
			}
		}
	}
	r->iops = n / (now_s() - t0);
	r->cpu_us = (cpu_s() - c0) * 1e6 / n;
	/* drain before teardown */
	for (i = 0; inflight > 0 && i < 100000; i++) {
		int got = ops->reap(q, done, res, MAXQD);

		if (got < 0)
			break;
		inflight -= got;
		if (!got)
			ops->wait(q, 1000);
	}
	ops->queue_destroy(q);
	ops->close(bd);
	free(buf);
	return 0;
}

/* plain io_uring reads on the block device (the kernel driver's path) */
static int run_uring(const char *path, int qd, double secs, struct result *r)
{
	int fd = open(path, O_RDONLY | O_DIRECT), i, measuring = 0;
	char *buf = aligned_alloc(4096, (size_t)qd * BS);
	struct io_uring ring;
	uint64_t seed = 1, n = 0;
	double t0 = 0, c0 = 0, end, warm;

	if (fd < 0 || io_uring_queue_init(qd, &ring, 0))
		return -errno;
	for (i = 0; i < qd; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		io_uring_prep_read(sqe, fd, buf + (size_t)i * BS, BS, rnd_off(&seed));
		io_uring_sqe_set_data64(sqe, i);
	}
	io_uring_submit(&ring);
	warm = now_s() + 0.5;
	end = warm + secs;
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned int head, got = 0;
		double t;

		if (io_uring_wait_cqe(&ring, &cqe))
			return -EIO;
		io_uring_for_each_cqe(&ring, head, cqe) {
			uint64_t idx = cqe->user_data;
			struct io_uring_sqe *sqe;

			if (cqe->res != BS)
				return -EIO;
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, fd, buf + idx * BS, BS, rnd_off(&seed));
			io_uring_sqe_set_data64(sqe, idx);
			got++;
		}
		io_uring_cq_advance(&ring, got);
		io_uring_submit(&ring);
		if (measuring)
			n += got;
		t = now_s();
		if (!measuring && t >= warm) {
			measuring = 1;
			t0 = t;
			c0 = cpu_s();
		} else if (measuring && t >= end) {
			break;
		}
	}
	r->iops = n / (now_s() - t0);
	r->cpu_us = (cpu_s() - c0) * 1e6 / n;
	io_uring_queue_exit(&ring);
	close(fd);
	free(buf);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = ((const struct result *)a)->iops, y = ((const struct result *)b)->iops;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct result r[16];
	int qd, runs, i, ret = 0;
	double secs;

	if (argc != 6) {
		fprintf(stderr, "usage: gsbench nvme|uring|passthru DEV QD SECS RUNS\n");
		return 2;
	}
	qd = atoi(argv[3]);
	secs = atof(argv[4]);
	runs = atoi(argv[5]);
	if (qd < 1 || qd > MAXQD || runs < 1 || runs > 16)
		return 2;
	for (i = 0; i < runs && !ret; i++) {
		if (!strcmp(argv[1], "nvme"))
			ret = run_backend(&gs_backend_nvme, argv[2], qd, secs, &r[i]);
		else if (!strcmp(argv[1], "passthru"))
			ret = run_backend(&gs_backend_uring_passthru, argv[2], qd, secs, &r[i]);
		else
			ret = run_uring(argv[2], qd, secs, &r[i]);
	}
	if (ret) {
		printf("FAIL bench %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	qsort(r, runs, sizeof(r[0]), cmp);
	printf("bench %s qd=%d iops=%.0f cpu_us_per_io=%.2f\n", argv[1], qd, r[runs / 2].iops,
	       r[runs / 2].cpu_us);
	return 0;
}
