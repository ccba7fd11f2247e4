#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `gstore pool add`: a member joins a 2-member stripe pool and everything is
# restriped over the three.  The add is killed (kill -9) half-way: the pool
# says so (status), a read-only look reads it as it is, and the next mount
# finishes the add before serving; data written before verifies, new data
# verifies across a remount, fsck is clean, and the new member holds data.
# Refused: a mounted pool, a member already in, a device too small.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
. "$(dirname "$0")/../helpers/poolfio.sh"
VFIO_SEED=21

GS_POOL="2 stripe 16K" gs_init 64M
cd "$T"
gs_mount
vfio a write || fail "writes before the add"
truncate -s 64M "$T/m2"
truncate -s 1M "$T/small"
"$GSTORE" pool add "$MNT" "$T/m2" >"$T/out" 2>&1 && fail "added to a mounted pool"
grep -q "unmount it first" "$T/out" || { cat "$T/out"; fail "mounted msg"; }
gs_umount
"$GSTORE" pool add "$T/m0" "$T/m1" >"$T/out" 2>&1 && fail "a member added twice"
grep -q "File exists" "$T/out" || { cat "$T/out"; fail "member twice msg"; }
"$GSTORE" pool add "$T/m0" "$T/small" >"$T/out" 2>&1 && fail "a small device added"
grep -q "No space left" "$T/out" || { cat "$T/out"; fail "small device msg"; }
"$GSTORE" pool status "$T/m0" | grep -q "^pool_members: 2$" || fail "a refused add changed the pool"
ok "refused: mounted, a member, too small"

# throttled to 4 MiB/s (the pool is ~120 MiB), killed once a tenth has moved
"$GSTORE" pool add --rate 4M "$T/m0" "$T/m2" >"$T/add.out" 2>&1 &
ap=$!
for ((i = 0; i < 300; i++)); do
	grep -q "restripe: [1-9]0%" "$T/add.out" && break
	kill -0 $ap 2>/dev/null || break
	sleep 0.1
done
kill -9 $ap 2>/dev/null
wait $ap 2>/dev/null
grep -q "restripe: [1-9]0%" "$T/add.out" || { cat "$T/add.out"; fail "no progress seen"; }
"$GSTORE" pool status "$T/m0" >"$T/st" 2>&1 || { cat "$T/st"; fail "status mid-add"; }
grep -q "^pool_add: member 2 [0-9]*/[0-9]* (stopped half-way" "$T/st" ||
	{ cat "$T/st"; fail "status does not show the add half-way"; }
grep -q "^pool_members: 3$" "$T/st" || { cat "$T/st"; fail "members mid-add"; }
# fsck -n reads it as it is: the fs is clean, the add is reported, not an error
"$GSTORE" fsck -n "$IMG" >"$T/fsck0.out" 2>&1 || { cat "$T/fsck0.out"; fail "fsck -n mid-add"; }
grep -q "stopped half-way" "$T/fsck0.out" || { cat "$T/fsck0.out"; fail "fsck -n: no word of the add"; }
ok "killed half-way: $(grep '^pool_add' "$T/st")"

# the mount finishes the add first
gs_mount
grep -q "^pool_members: 3$" "$MNT/.gstore/info" || fail "not 3 members after the mount"
grep -q "^pool_add:" "$MNT/.gstore/info" && fail "still mid-add after the mount"
grep -q "^member2: $T/m2 ok" "$MNT/.gstore/info" || fail "member 2 is not the new device"
grep -q "finishing it before the pool is used" "$T/gstorefs.log" || fail "no resume logged"
vfio a verify || fail "verify after the add"
vfio b write || fail "writes after the add"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; fail "fsck after the add"; }
gs_mount
vfio a verify || fail "verify a, remounted"
vfio b verify || fail "verify b, remounted"
gs_umount
# the new member carries a third of the stripe units: most of its rows hold data
used=$(du -k "$T/m2" | cut -f1)
((used > 16384)) || fail "the new member holds only $used KiB"
ok "the add finished at mount: 3 members, data verifies, fsck clean"
