#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pool scaling under a device model: 4 KiB random reads (IOPS) and 1 MiB
# sequential reads (bandwidth) through gs_q (`gstore-bench io`, callbacks)
# over pools of 1, 2, 4 and 8 members (stripe layout), every member limited
# by the fault backend's model (model=IOPS:MBPS:LATUS: one server per member,
# so a member is no faster than that device whatever the disk under it does).
#
#   bench/pool-scale.sh [DIR]
#
# Env: MODEL (5000:200:200), SU (64K), SIZE (1G sparse per member),
# RUNTIME (5), WARMUP (1), QD4K (64), QD1M (16), MEMBERS ("1 2 4 8"),
# POLLERS (2: the pool's pollers; each member has its own), B (build dir).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
DIR=${1:-$(mktemp -d /tmp/pool-scale.XXXXXX)}
MODEL=${MODEL:-5000:200:200}
SU=${SU:-64K}
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-5}
WARMUP=${WARMUP:-1}
QD4K=${QD4K:-64}
QD1M=${QD1M:-16}
MEMBERS=${MEMBERS:-1 2 4 8}
POLLERS=${POLLERS:-2}
mkdir -p "$DIR"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
printf "%-8s %12s %8s %14s %8s\n" members "4K IOPS" x "1M MB/s" x
base_iops= base_bw=
for n in $MEMBERS; do
	rm -f "$DIR"/m*
	devs=()
	for ((i = 0; i < n; i++)); do devs+=("$DIR/m$i"); done
	"$B/bin/gstore" mkfs --size "$SIZE" --layout stripe --stripe-unit "$SU" "${devs[@]}" \
		>/dev/null
	common=(--file "$DIR/m0" --fault "model=$MODEL" --runtime "$RUNTIME" --warmup "$WARMUP"
		--pollers "$POLLERS")
	iops=$("$B/bin/gstore-bench" io "${common[@]}" --bs 4096 --qd "$QD4K" | grep ^RESULT |
	       field iops)
	r=$("$B/bin/gstore-bench" io "${common[@]}" --bs 1M --qd "$QD1M" --seq | grep ^RESULT)
	bw=$(awk -v i="$(echo "$r" | field iops)" 'BEGIN { printf "%.0f", i * 1.048576 }')
	base_iops=${base_iops:-$iops}
	base_bw=${base_bw:-$bw}
	printf "%-8s %12.0f %7.2fx %14.0f %7.2fx\n" "$n" "$iops" \
		"$(awk -v a="$iops" -v b="$base_iops" 'BEGIN { print a / b }')" "$bw" \
		"$(awk -v a="$bw" -v b="$base_bw" 'BEGIN { print a / b }')"
done
rm -f "$DIR"/m*
rmdir "$DIR" 2>/dev/null || true
