#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash consistency of N-D spaces through gstorefs.  Each cycle makes a space
# and three writers write whole blocks into it (NDS block files and hyperslab
# slice files, fsync after each; tests/helpers/nd_crash.py logs what was
# acknowledged outside the mount), most of them blocks written for the first
# time, while a fourth streams a second space through its data file without
# syncing (its new blocks get slots and index entries from background
# write-back while the writers' fsyncs commit), so slot allocation and index
# updates are in flight when it ends:
#  - kill -9 of the daemon at a random moment (GS_CRASH_CYCLES, 20), and
#  - a power cut (gs_q fault spec powercut=N,dead=eio: unflushed writes are
#    lost or torn, nothing is acknowledged after the cut; GS_POWERCUT_CYCLES, 10).
# Then: remount, every acknowledged block reads back as its acknowledged
# version (or a later one that was in flight), this and the previous cycle's
# space both, clean unmount, fsck -n -f clean (it checks the nd indexes
# against the allocator).
# timeout: 400
. "$(dirname "$0")/../helpers/gsmount.sh"
cycles=${GS_CRASH_CYCLES:-20}
pcycles=${GS_POWERCUT_CYCLES:-10}
W=3
gs_init 1G
ND="$PY $GS_ROOT/tests/helpers/nd_crash.py"

# cycle N MODE [MOUNT OPTS]: one crash; returns 1 when the space could not be made
cycle() {
	local c=$1 mode=$2 wp sp acks
	if [[ $mode == kill ]]; then
		gs_mount
	else
		gs_mount -o "$3"
	fi
	$ND make "$MNT/nd/c$c" 2>/dev/null || { gs_kill9; echo "cycle $c: cut before the space was made"; return 1; }
	$ND write "$MNT/nd/c$c" "$T/log.$c" $W $((RANDOM * 32768 + RANDOM)) &
	wp=$!
	$ND stream "$MNT/nd/s$c" 2>/dev/null &
	sp=$!
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.3 + (r % 120) / 100 }')"
	gs_kill9
	wait $wp || fail "cycle $c: a writer failed"
	wait $sp
	acks=$(cat "$T/log.$c".* | grep -c '^A')
	gs_mount
	$ND check "$MNT/nd/c$c" "$T/log.$c" $W >"$T/check.$c" ||
		{ cat "$T/check.$c"; fail "cycle $c ($mode): acknowledged nd writes missing or wrong"; }
	if [[ -d $MNT/nd/s$c ]]; then
		$ND checkstream "$MNT/nd/s$c" >"$T/stream.$c" 2>&1 ||
			{ cat "$T/stream.$c"; fail "cycle $c ($mode): the streamed space is damaged"; }
		rmdir "$MNT/nd/s$c" || fail "rmdir nd/s$c"
	fi
	if [[ -n ${prev:-} ]]; then
		$ND check "$MNT/nd/c$prev" "$T/log.$prev" $W >/dev/null ||
			fail "cycle $c ($mode): cycle $prev's space damaged"
		rmdir "$MNT/nd/c$prev" || fail "rmdir nd/c$prev"
	fi
	gs_umount
	"$GSTORE" fsck -n -f "$IMG" >"$T/fsck.$c" || { cat "$T/fsck.$c"; fail "cycle $c ($mode): fsck"; }
	echo "cycle $c ($mode${3:+ $3}): $acks acks, $(tail -1 "$T/check.$c"), fsck clean"
	prev=$c
}

for ((c = 1; c <= cycles; c++)); do
	cycle $c kill
done

dead='\,dead=eio'
if ! gs_try_mount -o "fault=powercut=1000000$dead"; then
	grep -q "Invalid argument" "$T/gstorefs.log" || { cat "$T/gstorefs.log"; fail "mount"; }
	skip "the gs_q fault spec has no dead=eio: power cuts not checked ($cycles kill -9 cycles passed)"
fi
gs_umount
for ((c = cycles + 1; c <= cycles + pcycles; c++)); do
	cycle $c powercut "fault=powercut=$((200 + RANDOM % 4000))$dead" || true
done
ok "$cycles kill -9 and $pcycles power-cut cycles: acknowledged nd writes present, fsck clean"
