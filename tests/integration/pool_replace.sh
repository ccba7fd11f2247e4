#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `gstore pool replace` while the pool is mounted and in use: the rebuild
# runs in the daemon (started through .gstore/pool), throttled by --rate,
# with progress in .gstore/pool; fio keeps writing meanwhile; a second
# replace is refused while one runs; lifting the throttle ("rate 0") lets it
# finish; the pool goes from degraded to healthy, every byte verifies, fsck
# finds the mirrors equal, and the new member alone carries the pool from
# the next mount on.  Bad requests fail with a message and change nothing.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
. "$(dirname "$0")/../helpers/poolfio.sh"
VFIO_SEED=11

GS_POOL="4 stripe+mirror 16K" gs_init 128M
cd "$T"
# member 1 fails every I/O from the start: the pool runs degraded
gs_mount -o fault=m1:every=1
vfio a write || fail "degraded writes"
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "not degraded"
# the control file: the daemon user's, mode 0600
[[ $(stat -c '%a %u' "$MNT/.gstore/pool") == "600 $(id -u)" ]] ||
	fail "control file: $(stat -c '%a %u' "$MNT/.gstore/pool")"
grep -q "^pool_state: degraded" "$MNT/.gstore/pool" || fail ".gstore/pool status"

# bad requests: refused, nothing starts
truncate -s 128M "$T/new1"
truncate -s 1M "$T/small"
"$GSTORE" pool replace "$T/nosuch" "$T/new1" "$MNT" >"$T/out" 2>&1 && fail "non-member replaced"
grep -q "not a member" "$T/out" || { cat "$T/out"; fail "non-member msg"; }
"$GSTORE" pool replace "$T/m1" "$T/small" "$MNT" >"$T/out" 2>&1 && fail "small device taken"
grep -q "No space left" "$T/out" || { cat "$T/out"; fail "small device msg"; }
echo "replace $T/m1 new1" >"$MNT/.gstore/pool" 2>/dev/null && fail "relative path taken"
echo "frobnicate" >"$MNT/.gstore/pool" 2>/dev/null && fail "unknown command taken"
grep -q "^pool_rebuild:" "$MNT/.gstore/pool" && fail "a refused request started a rebuild"

# the replace, throttled to 4 MiB/s (about 30 s for the 128 MiB member), fio writing meanwhile
vfio b write &
fio_pid=$!
"$GSTORE" pool replace --rate 4M "$T/m1" "$T/new1" "$MNT" >"$T/replace.out" 2>&1 &
rp=$!
seen=0
for ((i = 0; i < 200; i++)); do
	if read -r _ _ _ prog < <(grep "^pool_rebuild: member 1 " "$MNT/.gstore/pool"); then
		done_=${prog%/*} total=${prog#*/}
		if ((done_ > 0 && done_ < total)); then
			seen=1
			break
		fi
	fi
	sleep 0.1
done
[[ $seen == 1 ]] || { cat "$T/replace.out"; fail "no rebuild in progress seen"; }
grep -q "^pool_rebuild_rate: 4194304$" "$MNT/.gstore/pool" || fail "rate not shown"
"$GSTORE" pool replace "$T/m2" "$T/new1" "$MNT" >"$T/out" 2>&1 && fail "second replace started"
grep -q "running already" "$T/out" || { cat "$T/out"; fail "second replace msg"; }
wait $fio_pid || fail "fio during the rebuild"
# lift the throttle: the rebuild runs to its end
echo "rate 0" >"$MNT/.gstore/pool" || fail "rate 0"
wait $rp || { cat "$T/replace.out"; fail "replace through the mount"; }
grep -q "replaced by $T/new1, rebuilt" "$T/replace.out" || { cat "$T/replace.out"; fail "msg"; }
grep -q "^pool_state: ok" "$MNT/.gstore/info" || fail "still degraded after the rebuild"
grep -q "^member1: $T/new1 ok" "$MNT/.gstore/info" || fail "member 1 is not the new device"
grep -q "^pool_rebuild_last: member 1 -> $T/new1: ok" "$MNT/.gstore/info" || fail "outcome"
vfio a verify || fail "verify a after the rebuild"
vfio b verify || fail "verify b (written during the rebuild)"
gs_umount
ok "replace while mounted: degraded -> ok, throttled, with progress"

"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck after the rebuild"; }
grep -q "differ" "$T/fsck.out" && { cat "$T/fsck.out"; fail "copies differ"; }
rm -f "$T/m1"
gs_mount
grep -q "^pool_state: ok" "$MNT/.gstore/info" || fail "degraded at the next mount"
vfio a verify || fail "verify a from the new member"
vfio b verify || fail "verify b from the new member"
gs_umount
ok "the new member carries the pool"
