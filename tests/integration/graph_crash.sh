#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 during merges: a process updates (durably) and merges a graph in
# a loop; it is killed at random moments, and each time the graph, opened
# again (which replays a redo log left behind), must equal the reference
# after the durable batches.  Runs until 10 kills landed inside a merge.
# timeout: 300
. "$(dirname "$0")/../helpers/gsmount.sh"
LOOP=$GS_BUILD/tests/helpers/graph_crashloop
[[ -x $GSTORE && -x $LOOP ]] || skip "build first (no $LOOP)"
T=$(mktemp -d "${TMPDIR:-/tmp}/gstore-graph.XXXXXX")
trap 'rm -rf "$T"' EXIT
IMG=$T/img
"$GSTORE" mkfs --size 256M "$IMG" >/dev/null || fail mkfs
"$LOOP" "$IMG" init || fail "init"

kills=0 late=0 replays=0
for ((cycle = 1; cycle <= 80 && kills < 10; cycle++)); do
	"$LOOP" "$IMG" run 2>"$T/log" &
	pid=$!
	sleep "$((RANDOM % 2)).$((RANDOM % 10))$((RANDOM % 10))"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	rc=$?
	[[ $rc == 137 ]] || { cat "$T/log"; fail "cycle $cycle: the loop ended by itself ($rc)"; }
	last=$(grep -E '^merge(d)? ' "$T/log" | tail -1)
	if [[ $last == "merge "* ]]; then
		kills=$((kills + 1))	# inside a merge
		sed -n "/^$last\$/,\$p" "$T/log" | grep -q committed && late=$((late + 1))
	fi
	"$LOOP" "$IMG" verify 2>"$T/vlog" || { cat "$T/vlog"; fail "cycle $cycle: verify"; }
	grep -q "replayed the redo log" "$T/vlog" && replays=$((replays + 1))
done
[[ $kills -ge 10 ]] || fail "only $kills of $((cycle - 1)) kills landed in a merge"
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail "fsck"
ok "$kills kills inside a merge ($late after its commit point, $replays redo logs replayed) in $((cycle - 1)) cycles; the graph equals the reference after each"
