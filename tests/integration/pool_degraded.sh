#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A pool member that fails (fault backend: every I/O of member 1 fails) or is
# gone: a stripe+mirror pool keeps serving every byte from the survivors and
# says "degraded" in .gstore/info and `gstore pool status`; the failed member
# stays out at the next mount; `gstore pool replace` rebuilds it onto a new
# file and fsck finds the copies equal.  A stripe pool returns EIO for data
# whose only copy was on the failed member, and the log names the member.
# timeout: 200
. "$(dirname "$0")/../helpers/gsmount.sh"
. "$(dirname "$0")/../helpers/poolfio.sh"

GS_POOL="4 stripe+mirror 16K" gs_init 128M
cd "$T"
gs_mount
vfio a write || fail "write"
gs_umount

# member 1 fails every I/O: served from the other copies
gs_mount -o fault=m1:every=1
vfio a verify || fail "degraded reads"
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "info does not say degraded"
"$GSTORE" pool status "$MNT" | grep -q "^member1: .* failed" || fail "pool status"
vfio b write || fail "degraded writes"
gs_umount
grep -q "member 1 (.*m1) failed" "$T/gstorefs.log" || fail "the log does not name member 1"
ok "member fails: degraded reads and writes"

# the failure is recorded: member 1 stays out without the fault
gs_mount
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "member 1 came back by itself"
vfio b verify || fail "verify b"
gs_umount
"$GSTORE" pool status "$IMG" | grep -q "^member1: .* failed" || fail "offline status"

# replace it: rebuilt, mirrors equal, healthy
truncate -s 128M "$T/new1"
"$GSTORE" pool replace "$T/m1" "$T/new1" "$IMG" >"$T/replace.out" 2>&1 ||
	{ cat "$T/replace.out"; fail "replace"; }
"$GSTORE" pool status "$IMG" | grep -q "^pool_state: ok" || fail "still degraded"
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck after rebuild"; }
rm -f "$T/m1"
gs_mount
vfio a verify || fail "verify a after rebuild"
vfio b verify || fail "verify b after rebuild"
gs_umount
ok "replace: rebuilt from the survivors"

# a member that is gone (file removed): mounts degraded, data intact
rm -f "$T/m3"
gs_mount
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "missing member not seen"
grep -q "^member3: .* missing" "$MNT/.gstore/info" || fail "member3 not missing"
vfio a verify || fail "verify with a member missing"
gs_umount
ok "missing member: degraded"
cd /
gs_cleanup
trap - EXIT

# stripe: the only copy is lost -> EIO naming the member, never other bytes
GSTORE=$GS_BUILD/bin/gstore GSTOREFS=$GS_BUILD/bin/gstorefs FSOPS=$GS_BUILD/tests/helpers/fsops
GS_POOL="2 stripe 16K" gs_init 64M
cd "$T"
gs_mount
# 16 MiB: past the mirrored zone at the start of the pool, into the striped data
head -c 16M /dev/urandom >"$T/ref"
cp "$T/ref" "$MNT/arrays/f"
# metadata outside the fixed zone: directory blocks, an extent tree (a file
# of 120 separate extents), all allocated from the mirrored zone
mkdir "$MNT/arrays/d"
for ((i = 0; i < 300; i++)); do : >"$MNT/arrays/d/entry-with-a-long-name-$i"; done
for ((i = 0; i < 240; i += 2)); do
	dd if=/dev/zero of="$MNT/arrays/frag" bs=4k seek=$i count=1 conv=notrunc status=none
done
gs_umount
gs_mount -o fault=m0:every=1
if cat "$MNT/arrays/f" >/dev/null 2>"$T/cat.err"; then
	fail "read of data on a failed stripe member succeeded"
fi
grep -qi "input/output error" "$T/cat.err" || { cat "$T/cat.err"; fail "not EIO"; }
ls "$MNT/arrays" | grep -q "^f$" || fail "metadata (mirrored zone) not readable"
[[ $(ls "$MNT/arrays/d" | wc -l) -eq 300 ]] || fail "directory blocks lost with member 0"
[[ $(stat -c %s "$MNT/arrays/frag") -eq $((239 * 4096)) ]] || fail "extent tree lost"
getfattr -d "$MNT/arrays/frag" >/dev/null 2>&1 || true
gs_umount
grep -q "only copy was on failed member 0 (.*m0)" "$T/gstorefs.log" ||
	{ cat "$T/gstorefs.log"; fail "the EIO does not name member 0"; }
ok "stripe: EIO naming the failed member"
