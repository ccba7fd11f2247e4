#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pool scaling: 4 KiB random reads (IOPS) and 1 MiB sequential reads
# (bandwidth) over pools of 1, 2, 4 and 8 members (stripe layout), measured
#   gsq:   through gs_q (`gstore-bench io`, callbacks) on the pool device;
#   mount: through the mount, fio (O_DIRECT, libaio) on a file written first;
# each under the device model (every member limited by the fault backend's
# model=IOPS:MBPS:LATUS: one server per member, so a member is no faster than
# that device whatever the disk under it does) and on the real disk (members
# are files of one file system, so they share its disk: no model; through the
# mount only, since gs_q would read the members' unwritten holes).
# A benchmark, not a test: run it on a quiet machine.
#
#   bench/pool-scale.sh [DIR]
#
# Env: MODEL (5000:200:200), SU (64K), SIZE (1G sparse per member),
# RUNTIME (5), WARMUP (1), QD4K (64), QD1M (16), MEMBERS ("1 2 4 8"),
# POLLERS (2: the pool's pollers; each member has its own), B (build dir),
# VIA ("gsq mount"), DISKS ("model real"), FSIZE (256M: the file fio reads),
# FQD4K (32) and FQD1M (8): fio's iodepth, GSOPTS (extra gstorefs -o options).
# Mount rows are followed by the daemon's CPU per 4 KiB read (a "#" line).
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
VIA=${VIA:-gsq mount}
DISKS=${DISKS:-model real}
FSIZE=${FSIZE:-256M}
FQD4K=${FQD4K:-32}
FQD1M=${FQD1M:-8}
GSOPTS=${GSOPTS:-}
mkdir -p "$DIR/mnt"
DIR=$(cd "$DIR" && pwd)
MNT=$DIR/mnt
gpid=
cleanup() {
	mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT"
	[[ -n $gpid ]] && wait "$gpid" 2>/dev/null
	rm -f "$DIR"/m*[0-9] "$DIR/gstorefs.log"
	rmdir "$MNT" "$DIR" 2>/dev/null || true
}
trap cleanup EXIT
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }	# PID: utime + stime

mkpool() {	# N
	local i
	rm -f "$DIR"/m*[0-9]
	devs=()
	for ((i = 0; i < $1; i++)); do devs+=("$DIR/m$i"); done
	"$B/bin/gstore" mkfs --size "$SIZE" --layout stripe --stripe-unit "$SU" "${devs[@]}" \
		>/dev/null
}

mount_pool() {	# [OPTS]
	local opts=cache=64M${GSOPTS:+,$GSOPTS}${1:+,$1} i
	"$B/bin/gstorefs" -f "$DIR/m0" "$MNT" -o "$opts" 2>>"$DIR/gstorefs.log" &
	gpid=$!
	for ((i = 0; i < 100; i++)); do
		[[ -f $MNT/.gstore/info ]] && return 0
		sleep 0.1
	done
	cat "$DIR/gstorefs.log" >&2
	exit 1
}

umount_pool() {	# the last reader's release may still be on its way: retry a while
	local i
	for ((i = 0; i < 50; i++)); do
		fusermount3 -u "$MNT" 2>/dev/null && break
		sleep 0.1
	done
	((i < 50)) || fusermount3 -u "$MNT"
	wait "$gpid"
	gpid=
}

# fio ARGS...: prints read IOPS and read KiB/s of the terse line
fio_read() {
	fio --name=r --filename="$MNT/arrays/f" --size="$FSIZE" --direct=1 --ioengine=libaio \
		--time_based --runtime="$RUNTIME" --ramp_time="$WARMUP" --group_reporting \
		--output-format=terse "$@" | awk -F';' '{ print $8, $7 }'
}

row() {	# N IOPS MB/s
	base_iops=${base_iops:-$2}
	base_bw=${base_bw:-$3}
	printf "%-8s %12.0f %7.2fx %14.0f %7.2fx\n" "$1" "$2" \
		"$(awk -v a="$2" -v b="$base_iops" 'BEGIN { print a / b }')" "$3" \
		"$(awk -v a="$3" -v b="$base_bw" 'BEGIN { print a / b }')"
}

header() {
	echo
	echo "== $1"
	printf "%-8s %12s %8s %14s %8s\n" members "4K IOPS" x "1M MB/s" x
	base_iops= base_bw=
}

for disk in $DISKS; do
	for via in $VIA; do
		[[ $disk == real && $via == gsq ]] && continue
		if [[ $via == gsq ]]; then
			header "gs_q, model=$MODEL per member (gstore-bench io, qd $QD4K / $QD1M)"
		else
			what="real disk"
			[[ $disk == model ]] && what="model=$MODEL per member"
			header "mount, $what (fio libaio O_DIRECT, iodepth $FQD4K / $FQD1M, file $FSIZE)"
		fi
		for n in $MEMBERS; do
			mkpool "$n"
			if [[ $via == gsq ]]; then
				common=(--file "$DIR/m0" --fault "model=$MODEL" --runtime "$RUNTIME"
					--warmup "$WARMUP" --pollers "$POLLERS")
				iops=$("$B/bin/gstore-bench" io "${common[@]}" --bs 4096 --qd "$QD4K" |
				       grep ^RESULT | field iops)
				r=$("$B/bin/gstore-bench" io "${common[@]}" --bs 1M --qd "$QD1M" --seq |
				    grep ^RESULT)
				bw=$(awk -v i="$(echo "$r" | field iops)" \
					 'BEGIN { printf "%.0f", i * 1.048576 }')
			else
				# the file, written at full speed, then read under the model
				mount_pool
				fio --name=w --filename="$MNT/arrays/f" --size="$FSIZE" --rw=write \
					--bs=1M --end_fsync=1 --output=/dev/null
				umount_pool
				opts=
				[[ $disk == model ]] && opts=fault=model=$MODEL
				mount_pool "$opts"
				t0=$(cpu_ticks "$gpid")
				read -r iops _ < <(fio_read --rw=randread --bs=4k --iodepth="$FQD4K")
				t1=$(cpu_ticks "$gpid")
				read -r _ kib < <(fio_read --rw=read --bs=1M --iodepth="$FQD1M")
				bw=$(awk -v k="$kib" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }')
				umount_pool
			fi
			row "$n" "$iops" "$bw"
			# the daemon's CPU (utime + stime) per 4 KiB read, over warm-up and run
			[[ $via == mount ]] && awk -v t=$((t1 - t0)) -v i="$iops" -v r=$((RUNTIME + WARMUP)) \
				-v hz="$(getconf CLK_TCK)" \
				'BEGIN { printf "#        daemon CPU per 4K read: %.1f us\n", t * 1e6 / hz / (i * r) }'
		done
	done
done
