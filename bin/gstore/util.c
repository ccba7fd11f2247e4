// SPDX-License-Identifier: MIT
/* Helpers shared by the gstore subcommands: messages, progress, mounts. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gstore.h"
#include "gstore_fs.h"
#include "cmd.h"

int gs_fail(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("gstore: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return status;
}

static void log_msg(int level, const char *msg, void *arg)
{
	if (level <= GS_LOG_WARN || getenv("GSTORE_DEBUG"))
		fprintf(stderr, "gstore: %s\n", msg);
}

void gs_cli_log_init(void)
{
	gs_set_log_func(log_msg, NULL);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *gs_human(uint64_t bytes, char *buf, size_t size)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

static void progress_draw(struct gs_progress *p)
{
	char a[32], b[32];
	unsigned pct = p->total ? (unsigned)(p->done * 100 / p->total) : 100;
	int fill = (int)(pct * 30 / 100);

	fprintf(stderr, "\r%s [%.*s%*s] %3u%% %s / %s ", p->what, fill,
		"##############################", 30 - fill, "", pct,
		gs_human(p->done, a, sizeof(a)), gs_human(p->total, b, sizeof(b)));
}

void gs_progress_start(struct gs_progress *p, const char *what, uint64_t total)
{
	p->what = what;
	p->total = total;
	p->done = 0;
	p->last = now();
	/* Only worth drawing for a terminal and for something that takes a while. */
	p->tty = isatty(STDERR_FILENO) && total >= (64u << 20);
	if (p->tty)
		progress_draw(p);
}

void gs_progress_add(struct gs_progress *p, uint64_t n)
{
	double t;

	p->done += n;
	if (!p->tty)
		return;
	t = now();
	if (t - p->last >= 0.1) {
		p->last = t;
		progress_draw(p);
	}
}

void gs_progress_end(struct gs_progress *p)
{
	if (!p->tty)
		return;
	progress_draw(p);
	fputc('\n', stderr);
}

char *gs_find_mount(const char *image)
{
	return gs_fs_find_mount(image);
}

int gs_is_mount(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/.gstore/info", dir);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}
