#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The dirty-region log: a mirror member fails (fault backend) while the
# pool is mounted and written; the pool logs the regions it misses
# (pool_dirty in .gstore/pool); the member comes back (`gstore pool replace
# M M` through the mount) and only those regions are copied ("logged regions
# only", a fraction of a member); then the pool is healthy, the log is
# empty, every byte verifies, fsck finds the mirrors equal, and the member
# alone carries the data at the next mount.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
. "$(dirname "$0")/../helpers/poolfio.sh"
VFIO_SEED=31

GS_POOL="2 mirror 16K" gs_init 128M
cd "$T"
gs_mount
vfio a write || fail "writes while healthy"
grep -q "^pool_dirty:" "$MNT/.gstore/pool" && fail "a healthy pool logs"
gs_umount
# member 1 fails every I/O from the mount on: degraded, writes logged
gs_mount -o fault=m1:every=1
vfio b write || fail "degraded writes"
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "not degraded"
read -r _ dirty _ _ rsz _ < <(grep "^pool_dirty:" "$MNT/.gstore/pool") ||
	fail "no dirty-region log while degraded"
((dirty > 0 && dirty * rsz < 64 * 1024 * 1024)) || fail "log: $dirty regions of $rsz bytes"
"$GSTORE" pool replace "$T/m1" "$T/m1" "$MNT" >"$T/replace.out" 2>&1 ||
	{ cat "$T/replace.out"; fail "the member's return"; }
grep -q "logged regions only" "$MNT/.gstore/pool" ||
	{ cat "$T/replace.out"; grep pool_ "$MNT/.gstore/pool"; fail "a full rebuild"; }
grep -q "^pool_state: ok" "$MNT/.gstore/info" || fail "still degraded"
grep -q "^pool_dirty:" "$MNT/.gstore/pool" && fail "the log outlived the resync"
vfio a verify || fail "verify a after the resync"
vfio b verify || fail "verify b after the resync"
gs_umount
ok "member back: $dirty regions of $rsz bytes resynced"
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck"; }
grep -q "differ" "$T/fsck.out" && { cat "$T/fsck.out"; fail "copies differ"; }
# member 1 alone: member 0 missing
mv "$T/m0" "$T/m0.away"
IMG=$T/m1 gs_mount
vfio a verify || fail "verify a from member 1 alone"
vfio b verify || fail "verify b from member 1 alone"
gs_umount
ok "the returned member holds every byte"
