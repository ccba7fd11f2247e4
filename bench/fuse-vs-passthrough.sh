#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs vs libfuse's passthrough_ll example, in the same run, on the same disk:
# an array file in a gstore image against a plain file of the same size that
# passthrough_ll exposes.  fio: 4 KiB random reads (O_DIRECT) and 1 MiB
# sequential reads (O_DIRECT, and buffered).  Runs alternate between the two
# mounts; each case is the median of $RUNS runs after a warm-up.  Prints the
# exact commands and the ratios (gstore / passthrough_ll; > 1 is faster): of
# the medians, and the median of the ratios of runs done back to back.
#
#   bench/fuse-vs-passthrough.sh  (env: SIZE RUNTIME RUNS JOBS QD BENCH_DIR GSOPTS PT_RA_KB)
#   CASES="0 2" runs only those cases (0: random 4 KiB direct, 1: 1 MiB direct, 2: buffered)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
SIZE=${SIZE:-2G}		# file size on both sides
RUNTIME=${RUNTIME:-8}		# seconds per measured run
RUNS=${RUNS:-3}
JOBS=${JOBS:-4}			# fio jobs (psync: one request in flight each)
WORK=${BENCH_DIR:-$PWD/$B/bench/work}
GSOPTS=${GSOPTS:-}		# extra gstorefs -o options, e.g. cache=4G
PT_RA_KB=${PT_RA_KB:-}		# set passthrough_ll's mount read-ahead too (KiB; root)
EX=/usr/share/doc/libfuse3-dev/examples
OUT=bench/out
mkdir -p "$OUT" "$WORK"
WORK=$(cd "$WORK" && pwd)

die() { echo "fuse-vs-passthrough: $*" >&2; exit 1; }
command -v fio >/dev/null || die "fio missing (make deps)"
[[ -x $B/bin/gstorefs && -x $B/bin/gstore ]] || die "build first (make)"
[[ -f $EX/passthrough_ll.c ]] || die "$EX/passthrough_ll.c missing (libfuse3-dev)"
PT=$B/bench/passthrough_ll
if [[ ! -x $PT || $EX/passthrough_ll.c -nt $PT ]]; then
	mkdir -p "$(dirname "$PT")"
	# shellcheck disable=SC2046
	cc -O2 -o "$PT" "$EX/passthrough_ll.c" $(pkg-config --cflags --libs fuse3)
fi

IMG=$WORK/gstore.img
GMNT=$WORK/gs
PMNT=$WORK/pt
SRC=$WORK/src
gpid= ppid=
cleanup() {
	for m in "$GMNT" "$PMNT"; do
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m"
	done
	[[ -n $gpid ]] && wait "$gpid" 2>/dev/null
	[[ -n $ppid ]] && wait "$ppid" 2>/dev/null
	true
}
trap cleanup EXIT
mkdir -p "$GMNT" "$PMNT" "$SRC"

wait_mount() {
	for _ in $(seq 100); do
		mountpoint -q "$1" && return 0
		sleep 0.1
	done
	die "$1 did not mount"
}

bytes=$(numfmt --from=iec "$SIZE")
"$B/bin/gstore" mkfs --force --size $((bytes + bytes / 4 + (256 << 20))) "$IMG" >/dev/null
"$B/bin/gstorefs" -f "$IMG" "$GMNT" ${GSOPTS:+-o "$GSOPTS"} &
gpid=$!
wait_mount "$GMNT"
"$PT" -f -o source="$SRC" "$PMNT" &
ppid=$!
wait_mount "$PMNT"
if [[ -n $PT_RA_KB ]]; then
	echo "$PT_RA_KB" >"/sys/class/bdi/$(mountpoint -d "$PMNT")/read_ahead_kb" ||
		die "cannot set passthrough_ll's read-ahead"
fi

GFILE=$GMNT/arrays/data
PFILE=$PMNT/data
# Same bytes on both sides, written sequentially through each mount (buffered:
# passthrough_ll cannot do O_DIRECT writes, its buffers are not aligned).
for f in "$GFILE" "$PFILE"; do
	fio --name=fill --filename="$f" --rw=write --bs=1M --size="$SIZE" --direct=0 \
		--ioengine=psync --end_fsync=1 --output=/dev/null
done

drop_caches() {
	sync
	[[ $(id -u) -eq 0 ]] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

# fio_run FILE RW BS DIRECT SECONDS -> prints "iops kib_per_s"
fio_cmd() {
	echo fio --name=b --filename="$1" --rw="$2" --bs="$3" --direct="$4" --size="$SIZE" \
		--ioengine=psync --numjobs="$JOBS" --group_reporting --time_based \
		--runtime="$5" --output-format=terse --terse-version=3
}
fio_run() {
	drop_caches
	# terse v3: field 7 read bandwidth (KiB/s), field 8 read IOPS
	$(fio_cmd "$@") | awk -F';' '{ print $8, $7 }'
}

ra_kb() { cat "/sys/class/bdi/$(mountpoint -d "$1")/read_ahead_kb" 2>/dev/null || echo "?"; }

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

host=$(uname -n)
{
echo "# gstorefs vs passthrough_ll  $(date -u '+%Y-%m-%d %H:%M UTC')  host $host"
echo "# $(nproc) CPUs, kernel $(uname -r), libfuse $(pkg-config --modversion fuse3), $(fio --version)"
echo "# disk: $(df --output=source "$WORK" | tail -1) ($(findmnt -n -o FSTYPE --target "$WORK")), file $SIZE,"\
     "runs $RUNS x ${RUNTIME}s, jobs $JOBS, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gstorefs -f $IMG $GMNT ${GSOPTS:+-o $GSOPTS}"
echo "# kernel read-ahead (bdi read_ahead_kb): gstorefs $(ra_kb "$GMNT"), passthrough_ll $(ra_kb "$PMNT")"
echo "# $PT -f -o source=$SRC $PMNT"
echo "# each run: $(fio_cmd FILE RW BS DIRECT "$RUNTIME")"
printf '%-26s %14s %14s %8s %8s\n' case gstorefs passthrough_ll ratio pairs
} | tee "$OUT/fuse-vs-passthrough.txt"

cases=("randread 4k 1 iops" "read 1M 1 MiB/s" "read 1M 0 MiB/s")
if [[ -n ${CASES:-} ]]; then	# a subset, by index
	sel=()
	for i in $CASES; do
		sel+=("${cases[i]}")
	done
	cases=("${sel[@]}")
fi
for c in "${cases[@]}"; do
	read -r rw bs direct unit <<<"$c"
	# warm-up (not counted)
	fio_run "$GFILE" "$rw" "$bs" "$direct" 2 >/dev/null
	fio_run "$PFILE" "$rw" "$bs" "$direct" 2 >/dev/null
	g=() p=()
	for ((r = 0; r < RUNS; r++)); do
		g+=("$(fio_run "$GFILE" "$rw" "$bs" "$direct" "$RUNTIME")")
		p+=("$(fio_run "$PFILE" "$rw" "$bs" "$direct" "$RUNTIME")")
	done
	if [[ $unit == iops ]]; then
		gm=$(printf '%s\n' "${g[@]}" | awk '{ print $1 }' | median)
		pm=$(printf '%s\n' "${p[@]}" | awk '{ print $1 }' | median)
	else
		gm=$(printf '%s\n' "${g[@]}" | awk '{ printf "%.0f\n", $2 / 1024 }' | median)
		pm=$(printf '%s\n' "${p[@]}" | awk '{ printf "%.0f\n", $2 / 1024 }' | median)
	fi
	# each gstorefs run with the passthrough_ll run right after it: on a shared
	# disk whose speed drifts, the median of these pairs is the steadier figure
	pr=$(for ((r = 0; r < RUNS; r++)); do
		echo "${g[r]} ${p[r]}"
	done | awk -v f=$([[ $unit == iops ]] && echo 1 || echo 2) '{ print $(f + 2) ? $f / $(f + 2) : 0 }' |
		median)
	printf '%-26s %14s %14s %7.2fx %7.2fx\n' "$rw bs=$bs direct=$direct ($unit)" "$gm" "$pm" \
		"$(awk -v a="$gm" -v b="$pm" 'BEGIN { print b ? a / b : 0 }')" "$pr" |
		tee -a "$OUT/fuse-vs-passthrough.txt"
	echo "  runs gstorefs: ${g[*]} | passthrough_ll: ${p[*]}  (iops KiB/s)" >>"$OUT/fuse-vs-passthrough.txt"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/fuse-vs-passthrough.txt"
