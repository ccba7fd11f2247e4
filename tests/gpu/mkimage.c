// SPDX-License-Identifier: MIT
/*
 * mkimage PATH GIB: the GPU tests' image, every 8-byte word at byte offset
 * o holding pattern(o) (common.cuh), written by 8 threads, then fsynced.
 * Skips the work when PATH already has that size and a correct first and
 * last word.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK	(8u << 20)
#define NTH	8

static uint64_t pattern(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static int fd;
static uint64_t size;

static void *writer(void *arg)
{
	uint64_t id = (uintptr_t)arg, *buf = malloc(CHUNK);

	for (uint64_t off = id * CHUNK; off < size; off += NTH * (uint64_t)CHUNK) {
		uint64_t n = size - off < CHUNK ? size - off : CHUNK;

		for (uint64_t i = 0; i < n / 8; i++)
			buf[i] = pattern(off + i * 8);
		if (pwrite(fd, buf, n, off) != (ssize_t)n) {
			perror("pwrite");
			exit(1);
		}
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[NTH];
	struct stat st;
	uint64_t w[2];

	if (argc != 3) {
		fprintf(stderr, "usage: mkimage PATH GIB\n");
		return 2;
	}
	size = (uint64_t)(atof(argv[2]) * (1 << 30)) & ~(uint64_t)(CHUNK - 1);
	fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	if ((uint64_t)st.st_size == size && pread(fd, &w[0], 8, 8) == 8 &&
	    pread(fd, &w[1], 8, size - 8) == 8 && w[0] == pattern(8) &&
	    w[1] == pattern(size - 8)) {
		printf("mkimage: %s already there\n", argv[1]);
		return 0;
	}
	if (ftruncate(fd, size) < 0) {
		perror("ftruncate");
		return 1;
	}
	for (uintptr_t i = 0; i < NTH; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < NTH; i++)
		pthread_join(t[i], NULL);
	if (fsync(fd) < 0) {
		perror("fsync");
		return 1;
	}
	/* the tests read with O_DIRECT: keep the page cache out of the numbers */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	printf("mkimage: %s: %.1f GiB written\n", argv[1], size / 1073741824.0);
	return 0;
}
