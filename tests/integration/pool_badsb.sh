#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Member superblocks that are corrupt, missing or foreign: gstorefs, fsck,
# stat and pool status fail with a message that names the member (and exit
# codes, never a crash); a mirrored pool runs degraded instead.  Old
# single-device images keep mounting, and are not taken for pools.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"

crashed() { [[ $1 -ge 128 ]]; }	# killed by a signal (SEGV, ABRT)

GS_POOL="3 stripe 16K" gs_init 64M
cd "$T"
gs_mount
echo hello >"$MNT/arrays/h"
gs_umount

# corrupt both copies of member 1's superblock
cp "$T/m1" "$T/m1.good"
printf 'garbage!' | dd of="$T/m1" bs=1 seek=100 conv=notrunc status=none
printf 'garbage!' | dd of="$T/m1" bs=1 seek=$((4096 + 100)) conv=notrunc status=none
gs_try_mount && fail "mounted with a corrupt member superblock"
grep -q "m1: member superblock corrupt" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "mount msg"; }
grep -q "member 1 .*is needed" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "mount: member 1"; }
"$GSTORE" fsck -n "$IMG" >"$T/out" 2>&1
rc=$?
crashed $rc && fail "fsck crashed ($rc)"
[[ $rc -eq 8 ]] || { cat "$T/out"; fail "fsck exit $rc, want 8"; }
grep -q "m1: member superblock corrupt" "$T/out" || { cat "$T/out"; fail "fsck msg"; }
"$GSTORE" stat "$IMG" >"$T/out" 2>&1 && fail "stat worked"
grep -q "m1" "$T/out" || { cat "$T/out"; fail "stat msg"; }
"$GSTORE" pool status "$IMG" >"$T/out" 2>&1 && fail "pool status worked"
grep -q "member 1" "$T/out" || { cat "$T/out"; fail "status msg"; }
# one copy intact is enough
cp "$T/m1.good" "$T/m1"
printf 'garbage!' | dd of="$T/m1" bs=1 seek=100 conv=notrunc status=none
gs_mount
[[ $(cat "$MNT/arrays/h") == hello ]] || fail "data with the copy superblock"
gs_umount
ok "corrupt member superblock"

# missing member
mv "$T/m2" "$T/m2.away"
gs_try_mount && fail "mounted without member 2"
grep -q "member 2 (.*m2) is missing" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "missing msg"; }
# devices= says where it is now
gs_mount -o "devices=$T/m0:$T/m1:$T/m2.away"
[[ $(cat "$MNT/arrays/h") == hello ]] || fail "data via devices="
gs_umount
mv "$T/m2.away" "$T/m2"
ok "missing member"

# a foreign member: another pool's
"$GSTORE" mkfs --size 64M --layout stripe "$T/x0" "$T/x1" >/dev/null || fail "mkfs x"
gs_try_mount -o "devices=$T/m0:$T/m1:$T/x1" && fail "mounted with a foreign member"
grep -q "x1 belongs to another pool" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "foreign msg"; }
ok "foreign member"

# not a member at all (zeros)
truncate -s 64M "$T/z"
gs_try_mount -o "devices=$T/m0:$T/m1:$T/z" && fail "mounted with a zeroed member"
grep -q "z: no pool member superblock" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "zero msg"; }
ok "zeroed member"

# mkfs refuses members in use without --force
"$GSTORE" mkfs --size 64M --layout mirror "$T/m0" "$T/y" >"$T/out" 2>&1 && fail "mkfs over a member"
grep -q "pool member already" "$T/out" || { cat "$T/out"; fail "mkfs msg"; }

# a mirrored pool with a corrupt member: degraded, data intact
cd /
gs_cleanup
trap - EXIT
GSTORE=$GS_BUILD/bin/gstore GSTOREFS=$GS_BUILD/bin/gstorefs FSOPS=$GS_BUILD/tests/helpers/fsops
GS_POOL="2 mirror 16K" gs_init 64M
gs_mount
echo hello >"$MNT/arrays/h"
gs_umount
printf 'garbage!' | dd of="$T/m0" bs=1 seek=100 conv=notrunc status=none
printf 'garbage!' | dd of="$T/m0" bs=1 seek=$((4096 + 100)) conv=notrunc status=none
IMG=$T/m1
gs_mount
[[ $(cat "$MNT/arrays/h") == hello ]] || fail "mirror: data"
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "mirror: not degraded"
gs_umount
ok "mirror with a corrupt member: degraded"

# an old single-device image is no pool and mounts as before
cd /
gs_cleanup
trap - EXIT
GSTORE=$GS_BUILD/bin/gstore GSTOREFS=$GS_BUILD/bin/gstorefs FSOPS=$GS_BUILD/tests/helpers/fsops
GS_POOL= gs_init 64M
gs_mount
grep -q "^pool" "$MNT/.gstore/info" && fail "a single image shows pool lines"
[[ -e $MNT/.gstore/pool ]] && fail "a single image has .gstore/pool"
ls "$MNT/.gstore" | grep -q "^pool$" && fail "a single image lists .gstore/pool"
gs_umount
"$GSTORE" pool status "$IMG" >/dev/null 2>&1 && fail "pool status on a plain image"
ok "single image unchanged"
