// SPDX-License-Identifier: MIT
/*
 * gstore: the command-line tool.  `gstore COMMAND ...`; also answers to
 * mkfs.gstore and fsck.gstore (links to it), as mkfs(8) and fsck(8) call them.
 * The subcommands are listed once, in GS_COMMANDS (cmd.h).
 */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

struct cmd {
	const char *name, *usage, *summary;
	int (*run)(int argc, char **argv);
};

#define GS_CMD_ENTRY(n, u, s) { .name = #n, .usage = u, .summary = s, .run = cmd_##n },
static const struct cmd cmds[] = { GS_COMMANDS(GS_CMD_ENTRY) };
#undef GS_CMD_ENTRY

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

int gs_usage(const char *name)
{
	const struct cmd *c = find_cmd(name);

	fprintf(stderr, "usage: gstore %s\n", c ? c->usage : name);
	return 2;
}

static int help(FILE *f)
{
	fprintf(f, "usage: gstore COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n`gstore help COMMAND` shows a command's usage.  See gstore(1), gstore(7).\n");
	return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
	const char *prog = basename(argv[0]);
	const struct cmd *c;

	gs_cli_log_init();
	/* mkfs.gstore ARGS == gstore mkfs ARGS */
	if (!strcmp(prog, "mkfs.gstore") || !strcmp(prog, "fsck.gstore")) {
		char name[5] = { 0 };

		memcpy(name, prog, 4);
		argv[0] = name;
		return find_cmd(name)->run(argc, argv);
	}
	if (argc < 2)
		return help(stderr);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc > 2 && find_cmd(argv[2])) {
			printf("usage: gstore %s\n", find_cmd(argv[2])->usage);
			return 0;
		}
		return help(stdout);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("gstore 0.1\n");
		return 0;
	}
	c = find_cmd(argv[1]);
	if (!c) {
		fprintf(stderr, "gstore: unknown command '%s'\n", argv[1]);
		return help(stderr);
	}
	return c->run(argc - 1, argv + 1);
}
