#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Summarise the last xfstests run of bench/xfstests.sh as docs/XFSTESTS.md
# shows it: how many tests ran, passed, failed and were not run, the
# failures, and every "not run" reason with its tests (xfstests' own words,
# the run's paths written as TEST_DEV / SCRATCH_DEV / SCRATCH_MNT).
#
#   XFSTESTS_DIR=/path/to/xfstests bench/xfstests-summary.sh [RESULTS_DIR]
#
# RESULTS_DIR defaults to $XFSTESTS_DIR/results; its check.log's last section
# is the run.
set -eu
RES=${1:-${XFSTESTS_DIR:?set XFSTESTS_DIR or give the results directory}/results}
WORK=${XFSTESTS_WORK:-/tmp/gstore-xfstests}
log=$RES/check.log
[[ -f $log ]] || { echo "no $log" >&2; exit 1; }

# the last run's section of check.log: from its last "Ran:" line on
sect=$(awk '/^Ran:/ { s = "" } { s = s $0 "\n" } END { printf "%s", s }' "$log")
list() { sed -n "s/^$1: //p" <<<"$sect" | tr ' ' '\n' | grep -v '^$' || true; }
mapfile -t all < <(list Ran)
mapfile -t notrun < <(list "Not run")
mapfile -t failed < <(list Failures)
total=${#all[@]}
nr=${#notrun[@]}
nf=${#failed[@]}
ran=$((total - nr))
echo "$total tests: $ran ran ($((ran - nf)) passed, $nf failed), $nr not run."
echo
echo "Failed: ${failed[*]:-none}"
echo
echo "| count | reason (xfstests) | tests |"
echo "|---|---|---|"
for t in "${notrun[@]}"; do
	f=$RES/$t.notrun
	r=$( [[ -f $f ]] && head -1 "$f" || echo "(no reason recorded)")
	r=${r//$WORK\/scratch.img/SCRATCH_DEV}
	r=${r//$WORK\/test.img/TEST_DEV}
	r=${r//$WORK\/scratch/SCRATCH_MNT}
	r=${r//$WORK\/test/TEST_DIR}
	r=${r//|/\\|}
	printf '%s\t%s\n' "$r" "${t#*/}"
done | sort -t $'\t' -k1,1 -k2,2n | awk -F'\t' '
	$1 != r { if (n) out(); r = $1; n = 0; ts = "" }
	{ n++; ts = ts (ts ? " " : "") $2 }
	END { if (n) out() }
	function out() { printf "%d\t| %d | %s | %s |\n", n, n, r, ts }' |
	sort -t $'\t' -k1,1nr -s | cut -f2-
