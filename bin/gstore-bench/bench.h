/* SPDX-License-Identifier: MIT */
/* gstore-bench subcommands. */
#ifndef GSTORE_BENCH_H
#define GSTORE_BENCH_H

int bench_io(int argc, char **argv);

#endif
