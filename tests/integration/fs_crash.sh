#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash consistency: cycles of kill -9 of gstorefs at a random moment during
# concurrent appends + fsyncs and metadata changes + fsyncdirs (fsops crash;
# what was acknowledged is logged outside the mount).  Each cycle: remount
# (journal replay), every acknowledged byte and name present (fsops
# crashcheck), clean unmount, fsck -n clean.
# timeout: 300
. "$(dirname "$0")/../helpers/gsmount.sh"
cycles=${GS_CRASH_CYCLES:-20}
gs_init 1G
for ((c = 1; c <= cycles; c++)); do
	gs_mount
	mkdir "$MNT/arrays/c$c"
	$FSOPS crash "$MNT/arrays/c$c" "$T/log.$c" 10 $((RANDOM * 32768 + RANDOM)) &
	wp=$!
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + (r % 130) / 100 }')"
	gs_kill9
	wait $wp
	acks=$(grep -c '^[AK]' "$T/log.$c")
	gs_mount
	$FSOPS crashcheck "$MNT/arrays/c$c" "$T/log.$c" ||
		fail "cycle $c: acknowledged data or names missing after kill -9"
	# the previous cycle's data survived this crash too
	if ((c > 1)); then
		$FSOPS crashcheck "$MNT/arrays/c$((c - 1))" "$T/log.$((c - 1))" >/dev/null ||
			fail "cycle $c: cycle $((c - 1))'s data damaged"
		rm -rf "$MNT/arrays/c$((c - 1))"
	fi
	gs_umount
	"$GSTORE" fsck -n "$IMG" >"$T/fsck.$c" || { cat "$T/fsck.$c"; fail "cycle $c: fsck"; }
	echo "cycle $c: $acks acks checked, fsck clean"
done
ok "$cycles kill -9 cycles"
