/* SPDX-License-Identifier: MIT */
/*
 * gstore CLI: the table of subcommands and the helpers they share.
 *
 * Adding a subcommand (e.g. `gstore graph ...`): write bin/gstore/graph.c with
 *	int cmd_graph(int argc, char **argv)	(argv[0] is "graph"; return the exit status)
 * and add one line to GS_COMMANDS below.  main.c declares and dispatches it,
 * and `gstore help` lists it.
 */
#ifndef GS_CLI_CMD_H
#define GS_CLI_CMD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*     name    usage (after "gstore ")                                    summary */
#define GS_COMMANDS(X)								\
	X(mkfs, "mkfs IMAGE|DEVICE... [--size SIZE] [--block-size N] [--label L] [--backend B] [--force]\n" \
	  "       [--layout stripe|mirror|stripe+mirror] [--stripe-unit N]",	\
	  "format an image file (created if missing), a device, or a pool of them") \
	X(fsck, "fsck [-n|-y|-p] [-f] [-v] IMAGE|DEVICE",			\
	  "check and repair an unmounted filesystem (exit codes as e2fsck)")	\
	X(stat, "stat IMAGE|DEVICE|MOUNTPOINT",				\
	  "superblock and usage summary")					\
	X(import, "import array NAME FILE [--image IMG | --mount MNT] [--dtype T] [--shape S] [--raw] [--force]\n" \
	  "       gstore import graph NAME FILE [--image IMG | --mount MNT] [--directed|--undirected] [--weighted|--unweighted] [--format text|mtx|sg|wsg] [--vertices N] [--slack PCT] [--chain-max N] [--mem SIZE] [--tmpdir DIR] [--ids sparse|dense|auto] [--id64] [--fixed-lists] [--force]", \
	  "copy a raw or .npy file into arrays/NAME; build graph/NAME from an edge list") \
	X(export, "export array NAME OUT [--npy] [--image IMG | --mount MNT]", \
	  "copy arrays/NAME out (raw, or .npy with --npy); OUT - is stdout") \
	X(graph, "graph info|neighbors V|edges|update [FILE]|merge|export-csr|bfs|cc|pagerank|randomwalk|mis|sample V... NAME --image IMG (update, merge: or --mount MNT) [--threads N] [--batch N] [--csr] [--in] [--source V] [--iters N] [--damping D] [--walks N] [--length L] [--seed S] [--top K] [--fanouts F1,F2] [--out FILE] [--cache SIZE] [--line-size N] [--buffered]", \
	  "query, update, merge graph/NAME; run graph apps (also on the CSR baseline)") \
	X(nd, "nd create|info|import|export NAME [FILE|OUT] [--image IMG | --mount MNT] [--shape S --dtype T] [--bb B] [--raw] [--npy] [--slice A:B,...] [--as SHAPE]", \
	  "N-D spaces nd/NAME: create, show, import/export .npy or raw")	\
	X(pool, "pool status DEV|MOUNTPOINT [--devices D1:D2:...]\n"		\
	  "       gstore pool replace OLD NEW [DEV|MOUNTPOINT] [--rate BYTES/s] [--devices D1:D2:...]\n" \
	  "       gstore pool add POOL NEWDEV [--rate BYTES/s] [--devices D1:D2:...]", \
	  "show a pool's members and state; rebuild a member onto a new device (mounted or not); add a member (restripe, unmounted)") \
	X(nvme, "nvme list | bind PCI | unbind PCI | info /dev/gstore-nvmeN|PCI", \
	  "hand NVMe controllers to gstore_nvme.ko and back; show what it reports")

#define GS_CMD_DECLARE(name, usage, summary) int cmd_##name(int argc, char **argv);
GS_COMMANDS(GS_CMD_DECLARE)
#undef GS_CMD_DECLARE
/* pool.c: `gstore mkfs` of several devices; fsck's mirror comparison (>0: differences) */
struct gs_pool_opts;
struct gs_mkfs_opts;
int pool_mkfs(const char *const *devs, unsigned n, struct gs_pool_opts *po,
	      struct gs_mkfs_opts *o);
int pool_check_mirrors(const char *path, int repair, unsigned *lines);
/* `gstore import graph ...` (graph.c); cmd_import hands it over */
int cmd_import_graph(int argc, char **argv);

/* ---- helpers (util.c) ---- */

/* "gstore: <message>" on stderr; returns @status for `return gs_fail(2, ...)`. */
__attribute__((format(printf, 2, 3))) int gs_fail(int status, const char *fmt, ...);
/* Print "usage: gstore <usage line of @cmd>" to stderr; returns 2. */
int gs_usage(const char *cmd);
/* Route libgstore's log messages (warnings and errors) to stderr. */
void gs_cli_log_init(void);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
struct gs_progress {
	const char *what;
	uint64_t total, done;
	double last;		/* time of the last redraw */
	int tty;
};
void gs_progress_start(struct gs_progress *p, const char *what, uint64_t total);
void gs_progress_add(struct gs_progress *p, uint64_t n);
void gs_progress_end(struct gs_progress *p);

/* The mount point where gstorefs has @image mounted (malloc'ed), or NULL. */
char *gs_find_mount(const char *image);
/* Non-zero if @dir is the root of a gstorefs mount. */
int gs_is_mount(const char *dir);
/* "4.0 GiB" */
const char *gs_human(uint64_t bytes, char *buf, size_t size);

#endif
