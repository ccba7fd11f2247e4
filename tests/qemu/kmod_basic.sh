#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 420
# gstore_nvme.ko in a QEMU guest (TCG, emulated NVMe): loads, binds only when
# told to, INFO, queue pairs, write-then-read-verify through nvmeq.h with 1, 4
# and 16 threads sharing 1, 2 and 4 queue pairs, through the "nvme" backend
# and through the I/O core (gs_q, 4 pollers, 16 threads); bad-ioctl fuzz;
# 8 threads racing ioctls/mmaps/munmaps on one file; `gstore nvme` bind, info,
# unbind (when built); no WARNING/BUG in dmesg (panic_on_warn=1).
set -u
. "$(dirname "$0")/lib.bash"
qemu_setup
G=
if [[ -x ${GS_BUILD:-build}/bin/gstore ]]; then
	G=$(cd "${GS_BUILD:-build}/bin" && pwd)/gstore
	qemu_add_dyn "$G"
fi
{
echo "G=$G"
cat <<'GUEST'
B=$(nvme_bdf) || fail "no NVMe controller"
[ -e /sys/bus/pci/devices/$B/driver ] && fail "module bound by itself"
if [ -n "$G" ]; then
	$G nvme list | grep -q "^$B .* - " || fail "gstore nvme list"
	$G nvme bind "$B" || fail "gstore nvme bind $B"
	$G nvme list | grep -q "^$B .*gstore_nvme  */dev/gstore-nvme0" || fail "list after bind"
	$G nvme info "$B" | grep -q "^namespace 1: 524288 blocks of 512 bytes" ||
		fail "gstore nvme info"
	echo "ok gstore nvme bind, list, info"
else
	gs_bind "$B" || fail "bind $B"
fi
[ -c /dev/gstore-nvme0 ] || fail "no /dev/gstore-nvme0"
ls -l /dev/gstore-nvme0 | grep -q '^crw-------' || fail "mode is not 0600"
gsnvme info || exit 1
gsnvme basic || exit 1
gsnvme shared /dev/gstore-nvme0 1 1 300 || exit 1
gsnvme shared /dev/gstore-nvme0 4 2 150 || exit 1
gsnvme shared /dev/gstore-nvme0 16 4 60 || exit 1
gsnvme backend /dev/gstore-nvme0 1 200 || exit 1
gsnvme backend /dev/gstore-nvme0 4 100 || exit 1
if gsnvme features | grep -q gsq; then
	gsnvme gsq /dev/gstore-nvme0 16 4 40 || exit 1
else
	echo "skip: gsq (no libgstore.a when the guest programs were built)"
fi
gsnvme fuzz /dev/gstore-nvme0 3000 || exit 1
gsnvme stress /dev/gstore-nvme0 8 5 || exit 1
gsnvme info | grep -q 'qps 0/' || fail "queue pairs left behind"
if [ -n "$G" ]; then
	$G nvme unbind "$B" || fail "gstore nvme unbind"
	[ -e /dev/gstore-nvme0 ] && fail "node left after unbind"
else
	gs_unbind "$B" || fail "unbind"
fi
echo "ok unbind"
GUEST
} >"$W/guest.sh"
qemu_boot basic "$W/guest.sh" || exit 1
echo "pass"
