// SPDX-License-Identifier: MIT
/*
 * gstore nvme list|bind|unbind|info: hand NVMe controllers to gstore_nvme.ko
 * and back to the kernel's nvme driver, and show what the module reports.
 *
 * Binding goes through sysfs: driver_override names gstore_nvme, the current
 * driver lets go (unbind), gstore_nvme's bind takes it.  Unbinding reverses
 * it and asks the kernel to probe again (drivers_probe), so nvme.ko takes
 * the controller back.  GSTORE_SYSFS overrides /sys (tests).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "gstore_ioctl.h"

#define NVME_CLASS	"0x010802"
#define DRIVER		"gstore_nvme"

int cmd_nvme(int argc, char **argv);

static const char *sysfs(void)
{
	const char *s = getenv("GSTORE_SYSFS");

	return s && *s ? s : "/sys";
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	if (!fgets(buf, len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	if (n < 0)
		return -errno;
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static int is_nvme(const char *bdf)
{
	char p[PATH_MAX], cls[32];

	snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/class", sysfs(), bdf);
	return !read_line(p, cls, sizeof(cls)) && !strcmp(cls, NVME_CLASS);
}

/* Name of the driver bound to @bdf, "" if none. */
static void driver_of(const char *bdf, char *out, size_t len)
{
	char p[PATH_MAX], link[PATH_MAX];
	ssize_t n;

	snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/driver", sysfs(), bdf);
	n = readlink(p, link, sizeof(link) - 1);
	out[0] = 0;
	if (n > 0) {
		const char *base;
		size_t l;

		link[n] = 0;
		base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		l = strnlen(base, len - 1);
		memcpy(out, base, l);
		out[l] = 0;
	}
}

/* The node a controller shows up as: gstore-nvmeN or nvmeN, "" if none. */
static void node_of(const char *bdf, char *out, size_t len)
{
	static const char *const classes[] = { "gstore-nvme", "nvme" };
	char p[PATH_MAX];
	size_t i;

	out[0] = 0;
	for (i = 0; i < 2 && !out[0]; i++) {
		struct dirent *d;
		DIR *dir;

		snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/%s", sysfs(), bdf, classes[i]);
		dir = opendir(p);
		if (!dir)
			continue;
		while ((d = readdir(dir)))
			if (d->d_name[0] != '.') {
				snprintf(out, len, "/dev/%s", d->d_name);
				break;
			}
		closedir(dir);
	}
}

static int nvme_list(void)
{
	char p[PATH_MAX], drv[64], node[300], ven[16], dev[16];
	struct dirent **ents;
	int n, i, found = 0;

	snprintf(p, sizeof(p), "%s/bus/pci/devices", sysfs());
	n = scandir(p, &ents, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "gstore nvme: %s: %s\n", p, strerror(errno));
		return 1;
	}
	printf("%-14s %-11s %-12s %s\n", "PCI", "ID", "DRIVER", "NODE");
	for (i = 0; i < n; i++) {
		const char *b = ents[i]->d_name;

		if (b[0] != '.' && is_nvme(b)) {
			snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/vendor", sysfs(), b);
			if (read_line(p, ven, sizeof(ven)))
				strcpy(ven, "?");
			snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/device", sysfs(), b);
			if (read_line(p, dev, sizeof(dev)))
				strcpy(dev, "?");
			driver_of(b, drv, sizeof(drv));
			node_of(b, node, sizeof(node));
			printf("%-14s %4s:%-6s %-12s %s\n", b, ven + (ven[1] == 'x' ? 2 : 0),
			       dev + (dev[1] == 'x' ? 2 : 0), drv[0] ? drv : "-",
			       node[0] ? node : "-");
			found++;
		}
		free(ents[i]);
	}
	free(ents);
	if (!found)
		printf("(no NVMe controllers)\n");
	return 0;
}

static int nvme_bind(const char *bdf)
{
	char p[PATH_MAX], drv[64], node[300];
	int ret;

	if (!is_nvme(bdf)) {
		fprintf(stderr, "gstore nvme bind: %s is not an NVMe controller\n", bdf);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/bus/pci/drivers/" DRIVER, sysfs());
	if (access(p, F_OK)) {
		fprintf(stderr, "gstore nvme bind: gstore_nvme.ko is not loaded "
			"(insmod kmod/gstore_nvme.ko)\n");
		return 1;
	}
	driver_of(bdf, drv, sizeof(drv));
	if (!strcmp(drv, DRIVER)) {
		printf("%s: already bound to " DRIVER "\n", bdf);
		return 0;
	}
	snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/driver_override", sysfs(), bdf);
	ret = write_str(p, DRIVER);
	if (!ret && drv[0]) {
		snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/driver/unbind", sysfs(), bdf);
		ret = write_str(p, bdf);
	}
	if (!ret) {
		snprintf(p, sizeof(p), "%s/bus/pci/drivers/" DRIVER "/bind", sysfs());
		ret = write_str(p, bdf);
	}
	if (ret) {
		fprintf(stderr, "gstore nvme bind %s: %s (see dmesg)\n", bdf, strerror(-ret));
		return 1;
	}
	node_of(bdf, node, sizeof(node));
	printf("%s: bound to " DRIVER "%s%s\n", bdf, node[0] ? ", " : "", node);
	return 0;
}

static int nvme_unbind(const char *bdf)
{
	char p[PATH_MAX], drv[64];
	int ret = 0;

	driver_of(bdf, drv, sizeof(drv));
	if (!strcmp(drv, DRIVER)) {
		snprintf(p, sizeof(p), "%s/bus/pci/drivers/" DRIVER "/unbind", sysfs());
		ret = write_str(p, bdf);
	}
	if (!ret) {
		snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/driver_override", sysfs(), bdf);
		ret = write_str(p, "\n");
	}
	if (!ret) {
		snprintf(p, sizeof(p), "%s/bus/pci/drivers_probe", sysfs());
		ret = write_str(p, bdf);
	}
	if (ret) {
		fprintf(stderr, "gstore nvme unbind %s: %s\n", bdf, strerror(-ret));
		return 1;
	}
	driver_of(bdf, drv, sizeof(drv));
	printf("%s: released%s%s\n", bdf, drv[0] ? ", now bound to " : "", drv);
	return 0;
}

static int nvme_info(const char *arg)
{
	char path[PATH_MAX];
	struct gstore_info in;
	uint32_t i;
	int fd;

	if (strncmp(arg, "/dev/", 5)) {
		node_of(arg, path, sizeof(path));	/* a PCI address */
		if (!path[0] || strncmp(path, "/dev/gstore-", 12)) {
			fprintf(stderr, "gstore nvme info: %s is not bound to " DRIVER "\n", arg);
			return 1;
		}
	} else {
		snprintf(path, sizeof(path), "%s", arg);
	}
	fd = open(path, O_RDWR);
	if (fd < 0 || ioctl(fd, GSTORE_IOC_INFO, &in)) {
		fprintf(stderr, "gstore nvme info: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	printf("device:      %s\n", path);
	printf("model:       %.40s\n", in.mn);
	printf("serial:      %.20s\n", in.sn);
	printf("firmware:    %.8s\n", in.fr);
	printf("nvme:        %u.%u\n", in.vs >> 16, (in.vs >> 8) & 0xff);
	printf("queue pairs: %u (%u in use), depth up to %u\n", in.max_qps, in.qps_in_use,
	       in.max_qd);
	printf("doorbells:   stride %u bytes\n", in.db_stride);
	if (in.max_xfer)
		printf("max xfer:    %u KiB\n", in.max_xfer >> 10);
	else
		printf("max xfer:    unlimited\n");
	printf("iommu:       %s\n", in.flags & GSTORE_INFO_IOMMU ? "translated" : "no");
	printf("gpu p2p:     %s\n", in.flags & GSTORE_INFO_P2P ? "yes" : "no (built without "
	       "NVIDIA headers)");
	for (i = 0; i < in.nr_ns && i < GSTORE_MAX_NS; i++)
		printf("namespace %u: %" PRIu64 " blocks of %u bytes (%" PRIu64 " MiB)\n",
		       in.ns[i].nsid, (uint64_t)in.ns[i].nlba, 1u << in.ns[i].lba_shift,
		       (uint64_t)(in.ns[i].nlba << in.ns[i].lba_shift) >> 20);
	return 0;
}

int cmd_nvme(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "";

	if (!strcmp(sub, "list") && argc == 2)
		return nvme_list();
	if (!strcmp(sub, "bind") && argc == 3)
		return nvme_bind(argv[2]);
	if (!strcmp(sub, "unbind") && argc == 3)
		return nvme_unbind(argv[2]);
	if (!strcmp(sub, "info") && argc == 3)
		return nvme_info(argv[2]);
	fprintf(stderr, "usage: gstore nvme list | bind PCI | unbind PCI | "
		"info /dev/gstore-nvmeN|PCI\n");
	return 2;
}
