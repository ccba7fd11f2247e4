#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 30
# `gstore nvme list|bind|unbind` against a fake sysfs tree (GSTORE_SYSFS):
# the right files get the right words, in the right places.  The real thing
# runs in the QEMU tests (tests/qemu/kmod_*.sh).
set -u
G=${GS_BUILD:-build}/bin/gstore
[[ -x $G ]] || { echo "skip: $G not built"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export GSTORE_SYSFS=$T
b=0000:00:04.0
d=$T/bus/pci/devices/$b
mkdir -p "$d" "$T/bus/pci/drivers/nvme" "$T/bus/pci/drivers/gstore_nvme" "$d/nvme/nvme0" \
	"$T/bus/pci/devices/0000:00:02.0"
echo 0x010802 >"$d/class"
echo 0x1b36 >"$d/vendor"
echo 0x0010 >"$d/device"
echo 0x030000 >"$T/bus/pci/devices/0000:00:02.0/class"	# a VGA card: not listed
: >"$d/driver_override"
: >"$T/bus/pci/drivers/nvme/unbind"
: >"$T/bus/pci/drivers/gstore_nvme/bind"
: >"$T/bus/pci/drivers/gstore_nvme/unbind"
: >"$T/bus/pci/drivers_probe"
ln -s ../../drivers/nvme "$d/driver"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$G" nvme list) || fail "list"
echo "$out"
echo "$out" | grep -q "^$b  *1b36:0010  *nvme  */dev/nvme0$" || fail "list line"
echo "$out" | grep -q 0000:00:02.0 && fail "non-NVMe device listed"

"$G" nvme bind 0000:00:02.0 && fail "bound a VGA card"
"$G" nvme bind $b || fail "bind"
[[ $(cat "$d/driver_override") == gstore_nvme ]] || fail "driver_override"
[[ $(cat "$T/bus/pci/drivers/nvme/unbind") == "$b" ]] || fail "old driver not unbound"
[[ $(cat "$T/bus/pci/drivers/gstore_nvme/bind") == "$b" ]] || fail "not bound"

# now it is ours
rm "$d/driver" && ln -s ../../drivers/gstore_nvme "$d/driver"
rm -r "$d/nvme" && mkdir -p "$d/gstore-nvme/gstore-nvme0"
"$G" nvme list | grep -q "gstore_nvme  */dev/gstore-nvme0$" || fail "list after bind"
"$G" nvme unbind $b || fail "unbind"
[[ $(cat "$T/bus/pci/drivers/gstore_nvme/unbind") == "$b" ]] || fail "not released"
[[ $(cat "$d/driver_override") == "" ]] || fail "override not cleared"
[[ $(cat "$T/bus/pci/drivers_probe") == "$b" ]] || fail "no reprobe"
"$G" nvme info /nonexistent 2>/dev/null && fail "info on a bad path"
"$G" nvme frobnicate 2>/dev/null; [[ $? == 2 ]] || fail "usage exit code"
rmdir "$T/bus/pci/drivers/gstore_nvme" 2>/dev/null || rm -rf "$T/bus/pci/drivers/gstore_nvme"
"$G" nvme bind $b 2>&1 | grep -q "not loaded" || fail "module not loaded message"
echo "pass"
