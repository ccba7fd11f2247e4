#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 600
# A gstore pool on NVMe over Fabrics members, inside one QEMU guest: the
# kernel's target (nvmet) exports three file-backed namespaces over TCP on
# loopback, one subsystem and port each; the host (nvme-tcp) connects to them
# and gstore runs a 3-member stripe+mirror pool on the fabric-attached
# /dev/nvmeXnY.  Steps: mkfs, mount (gstorefs), fio write + verify; fio
# writing while one target port is removed (its configfs link unlinked):
# fio completes without errors, the pool is degraded, nothing acknowledged is
# lost (verify); the port comes back, the member is reconnected and rebuilt
# with `gstore pool replace`, fsck finds every copy equal, verify again.
set -u
. "$(dirname "$0")/lib.bash"
BIN=${GS_BUILD:-build}/bin
[[ -x $BIN/gstorefs && -x $BIN/gstore ]] || qemu_skip "gstorefs/gstore not built"
command -v fio >/dev/null || qemu_skip "fio not installed"
qemu_setup
K=/lib/modules/$KVER
for m in nvmet-tcp nvme-tcp; do
	grep -q "/$m.ko:" "$K/modules.dep" || qemu_skip "$m.ko not in this kernel ($KVER)"
done
qemu_add_dyn "$(cd "$BIN" && pwd)/gstorefs" "$(cd "$BIN" && pwd)/gstore" "$(command -v fio)"
# modules in load order (each one's dependencies first), once each
: >"$W/root/mod/nvmeof.order"
add_mod() {	# path below /lib/modules/KVER: its dependencies first
	local b d
	b=$(basename "$1")
	grep -qx "$b" "$W/root/mod/nvmeof.order" && return 0
	for d in $(grep "^$1:" "$K/modules.dep" | cut -d: -f2 | tr ' ' '\n' | tac); do
		add_mod "$d"
	done
	cp "$K/$1" "$W/root/mod/" && echo "$b" >>"$W/root/mod/nvmeof.order"
}
for m in kernel/crypto/crct10dif_generic.ko kernel/crypto/crc64_rocksoft_generic.ko \
	 kernel/fs/fuse/fuse.ko kernel/drivers/nvme/target/nvmet-tcp.ko \
	 kernel/drivers/nvme/host/nvme-tcp.ko; do
	[[ -e $K/$m ]] && add_mod "$m"
done
G=$(cd "$BIN" && pwd)
cp "$(dirname "$0")/guest/nvmeof.sh" "$W/root/nvmeof.sh"
{
	echo "G=$G"
	cat <<'GUEST'
for m in $(cat /mod/nvmeof.order); do
	insmod /mod/$m || fail "insmod $m"
done
mkdir -p /sys/kernel/config
mount -t configfs none /sys/kernel/config || fail "configfs"
ip link set lo up || ifconfig lo 127.0.0.1 up || fail "lo up"
. /nvmeof.sh
# the target: subsystem gs$i with a file-backed namespace, port $i+1 on 127.0.0.1:4420+i
for i in 0 1 2; do
	truncate -s 160M /tmp/t$i || fail "backing file"
	nvmet_export /tmp/t$i gs$i $((i + 1)) 127.0.0.1 $((4420 + i)) || fail "nvmet export gs$i"
done
echo "ok nvmet: 3 subsystems on TCP ports 4420-4422"
connect() { nvme_tcp_connect gs$1 127.0.0.1 $((4420 + $1)); }
D0=$(connect 0) || fail "connect gs0"
D1=$(connect 1) || fail "connect gs1"
D2=$(connect 2) || fail "connect gs2"
echo "ok nvme-tcp: $D0 $D1 $D2"
$G/gstore mkfs --layout stripe+mirror --stripe-unit 16K $D0 $D1 $D2 >/tmp/mkfs.out 2>&1 ||
	{ cat /tmp/mkfs.out; fail "mkfs of the pool"; }
mkdir -p /mnt/gs
mnt() {
	$G/gstorefs $D0 /mnt/gs "$@" || fail "mount"
	n=0
	while [ ! -d /mnt/gs/arrays ]; do
		n=$((n + 1)); [ $n -gt 100 ] && fail "mount did not come up"; usleep 100000
	done
}
vfio() {	# NAME write|verify
	if [ $2 = write ]; then x=--do_verify=1; else x=--verify_only=1; fi
	fio --name=$1 --filename=/mnt/gs/arrays/$1 --size=16M --bsrange=4k-64k --rw=randwrite \
		--ioengine=psync --verify=crc32c --verify_fatal=1 --randseed=3 --eta=never $x \
		--output=/tmp/$1.out
}
mnt
vfio a write || { cat /tmp/a.out; fail "fio verify"; }
echo "ok fio write + verify on the pool"
# take port 2 (member 1) down while fio writes
vfio b write &
fp=$!
usleep 1500000
nvmet_port_down gs1 2 || fail "unlink port"
echo "info port 2 removed"
wait $fp || { cat /tmp/b.out; fail "fio while a port went away"; }
grep -q "^pool_state: degraded" /mnt/gs/.gstore/info || { cat /mnt/gs/.gstore/info; fail "not degraded"; }
grep "^member" /mnt/gs/.gstore/info
vfio a verify || { cat /tmp/a.out; fail "verify a (degraded)"; }
vfio b verify || { cat /tmp/b.out; fail "verify b (degraded)"; }
echo "ok degraded: fio completed, every acknowledged byte reads back"
umount /mnt/gs || fail "umount"
sleep 1
# the port comes back: reconnect (the old controller may be gone) and rebuild
nvmet_port_up gs1 2 || fail "relink port"
sleep 4
if [ -e $D1 ] && dd if=$D1 of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
	N1=$D1
else
	N1=$(connect 1) || fail "reconnect gs1"
fi
echo "info member 1 back as $N1"
$G/gstore pool replace $D1 $N1 $D0 >/tmp/rep.out 2>&1 || { cat /tmp/rep.out; fail "replace"; }
$G/gstore pool status $D0 | grep -q "^pool_state: ok" || fail "not healthy after rebuild"
$G/gstore fsck -n $D0 >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; fail "fsck after rebuild"; }
echo "ok rebuilt: fsck (mirrors compared) clean"
mnt
vfio a verify || { cat /tmp/a.out; fail "verify a after rebuild"; }
vfio b verify || { cat /tmp/b.out; fail "verify b after rebuild"; }
umount /mnt/gs
echo "ok verify after rebuild"
GUEST
} >"$W/guest.sh"
GS_QEMU_TIMEOUT=540 qemu_boot nvmeof "$W/guest.sh" -m 2G || exit 1
echo "pass"
