# SPDX-License-Identifier: MIT
# The host side of the NVMe-oF pool tests (sourced in the guest after
# nvmeof.sh; POSIX sh, busybox): a 3-member stripe+mirror pool on the
# fabric-attached namespaces of subsystems gs0..gs2, fio write + verify
# through the mount, one target port removed while fio writes and written
# after (degraded, nothing acknowledged lost), the port back, the member rebuilt with
# `gstore pool replace`, fsck (mirrors compared), verify again.
# The caller defines: $G (gstore's bin dir), connect I (prints /dev/nvmeXnY of
# gs$I), port_down I and port_up I (take the port of gs$I away and back).
# shellcheck shell=sh
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
# take member 1's port down while fio writes
vfio b write &
fp=$!
usleep 1500000
port_down 1 || fail "port down"
echo "info port of gs1 removed"
wait $fp || { cat /tmp/b.out; fail "fio while a port went away"; }
# and after it is gone: on a quiet host b can end before the port goes, and then
# nothing would have met the missing member
vfio c write || { cat /tmp/c.out; fail "fio with a port gone"; }
grep -q "^pool_state: degraded" /mnt/gs/.gstore/info || { cat /mnt/gs/.gstore/info; fail "not degraded"; }
grep "^member" /mnt/gs/.gstore/info
vfio a verify || { cat /tmp/a.out; fail "verify a (degraded)"; }
vfio b verify || { cat /tmp/b.out; fail "verify b (degraded)"; }
vfio c verify || { cat /tmp/c.out; fail "verify c (degraded)"; }
echo "ok degraded: fio completed, every acknowledged byte reads back"
umount /mnt/gs || fail "umount"
sleep 1
# the port comes back: reconnect (the old controller may be gone) and rebuild
port_up 1 || fail "port up"
sleep 4
if [ -e $D1 ] && dd if=$D1 of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
	N1=$D1
else
	N1=$(connect 1) || fail "reconnect gs1"
fi
echo "info member 1 back as $N1"
$G/gstore pool replace $D1 $N1 $D0 >/tmp/rep.out 2>&1 || { cat /tmp/rep.out; fail "replace"; }
# the member came back: its missed writes are in the dirty-region log (or all, rebuilt whole)
echo "info $(grep 'replaced by' /tmp/rep.out)"
$G/gstore pool status $D0 | grep -q "^pool_state: ok" || fail "not healthy after rebuild"
$G/gstore fsck -n $D0 >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; fail "fsck after rebuild"; }
echo "ok rebuilt: fsck (mirrors compared) clean"
mnt
vfio a verify || { cat /tmp/a.out; fail "verify a after rebuild"; }
vfio b verify || { cat /tmp/b.out; fail "verify b after rebuild"; }
vfio c verify || { cat /tmp/c.out; fail "verify c after rebuild"; }
umount /mnt/gs
echo "ok verify after rebuild"
