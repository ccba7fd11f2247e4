#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 420
# gstorefs on /dev/gstore-nvme0 inside the QEMU guest: mkfs, mount (FUSE),
# fio write + verify (crc32c) on an array, unmount, fsck.
#
# Needs a filesystem that can open its device through the "nvme" backend;
# until then this skips.  GS_FS_IMAGE=1 runs the same steps on an image file
# in the guest's tmpfs instead (checks the guest side: fuse.ko, gstorefs,
# fio), whatever the filesystem supports.
set -u
. "$(dirname "$0")/lib.bash"
BIN=${GS_BUILD:-build}/bin
[[ -x $BIN/gstorefs && -x $BIN/gstore ]] || qemu_skip "gstorefs/gstore not built"
command -v fio >/dev/null || qemu_skip "fio not installed"
if [[ ${GS_FS_IMAGE:-0} != 1 ]] && ! "$BIN/gstorefs" --help 2>&1 | grep -q 'backend='; then
	qemu_skip "gstorefs cannot open /dev/gstore-nvme0 yet (no backend option: the filesystem opens its device with backend=uring)"
fi
qemu_setup
qemu_add_dyn "$(cd "$BIN" && pwd)/gstorefs" "$(cd "$BIN" && pwd)/gstore" "$(command -v fio)"
cp "/lib/modules/$KVER/kernel/fs/fuse/fuse.ko" "$W/root/mod/"
G=$(cd "$BIN" && pwd)
{
	echo "G=$G"
	echo "IMAGE_MODE=${GS_FS_IMAGE:-0}"
	cat <<'GUEST'
insmod /mod/fuse.ko || fail "insmod fuse"
mkdir -p /mnt/gs
if [ "$IMAGE_MODE" = 1 ]; then
	DEV=/tmp/gs.img
	$G/gstore mkfs $DEV --size 96M || fail "mkfs"
	MOUNT_OPTS="-o buffered"
else
	B=$(nvme_bdf) || fail "no NVMe controller"
	$G/gstore nvme bind "$B" || fail "bind"
	DEV=/dev/gstore-nvme0
	$G/gstore mkfs $DEV --backend nvme || fail "mkfs"
	MOUNT_OPTS="-o backend=nvme"
fi
$G/gstorefs $DEV /mnt/gs $MOUNT_OPTS || fail "mount"
n=0
while [ ! -d /mnt/gs/arrays ]; do
	n=$((n + 1)); [ $n -gt 100 ] && fail "mount did not come up"; usleep 100000
done
fio --name=verify --filename=/mnt/gs/arrays/fio --size=24M --bs=4k --rw=randwrite \
	--ioengine=psync --iodepth=1 --numjobs=1 --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --randrepeat=1 --output=/tmp/fio.out
rc=$?
grep -E 'err=|verify|WRITE|READ' /tmp/fio.out | head -8
[ $rc = 0 ] || { cat /tmp/fio.out; fail "fio verify"; }
echo "ok fio verify (crc32c)"
umount /mnt/gs || fail "umount"
sleep 1
$G/gstore fsck -n $DEV || fail "fsck after unmount"
echo "ok fsck"
GUEST
} >"$W/guest.sh"
qemu_boot gstorefs "$W/guest.sh" -m 2G || exit 1
echo "pass"
