#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 cycles on a pool: the fs crash harness (fs_crash.sh: concurrent
# appends + fsyncs and metadata changes, kill -9 at a random moment, every
# acknowledged byte and name present after the remount, fsck -n clean) run
# on a 4-member stripe+mirror pool (16 KiB stripe unit, so requests cross
# members) and then on a 2-member stripe pool.  After a crash mirrored copies
# of writes in flight may differ: fsck -n reports that without failing
# (pool_resync: needed), and fsck -y at the end resyncs them.
# timeout: 400
dir=$(dirname "$0")
. "$dir/../helpers/poolrun.sh"
pool_harness fs_crash.sh "kill -9 cycles" "4 stripe+mirror 16K" "2 stripe 16K"
# the resync itself
. "$dir/../helpers/gsmount.sh"
GS_POOL="2 mirror 16K" gs_init 64M
gs_mount
head -c 4M /dev/urandom >"$MNT/arrays/f"
gs_kill9
# a copy that differs, as a crash between the two copies' writes leaves it
printf 'differs!' | dd of="$T/m1" bs=1 seek=$((40 << 20)) conv=notrunc status=none
"$GSTORE" pool status "$IMG" | grep -q "^pool_resync: no" || fail "resync flag before reopen"
gs_mount
gs_umount
"$GSTORE" pool status "$IMG" | grep -q "^pool_resync: needed" || fail "crash not recorded"
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck -n after a crash"; }
grep -q "written when the pool crashed" "$T/fsck.out" || { cat "$T/fsck.out"; fail "no report"; }
"$GSTORE" fsck -y "$IMG" >"$T/fsck.out"
[[ $? -le 1 ]] || { cat "$T/fsck.out"; fail "fsck -y"; }
"$GSTORE" pool status "$IMG" | grep -q "^pool_resync: no" || fail "resync flag not cleared"
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck -n after resync"; }
grep -q "differ" "$T/fsck.out" && { cat "$T/fsck.out"; fail "copies still differ"; }
# a difference without a crash is an error
printf 'differs!' | dd of="$T/m1" bs=1 seek=$((40 << 20)) conv=notrunc status=none
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" && { cat "$T/fsck.out"; fail "difference not reported"; }
ok "resync after a crash"
