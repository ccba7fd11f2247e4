// SPDX-License-Identifier: MIT
/*
 * gstore-bench: benchmarks of the I/O core.  One subcommand per benchmark;
 * each prints human-readable figures and one "key=value" summary line that
 * the scripts under bench/ parse.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{ "io", bench_io, "random reads through ring -> poller -> backend (IOPS, latency, CPU/IO)" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: gstore-bench COMMAND [options]   (COMMAND --help for its options)\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-6s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "gstore-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
