#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs vs libfuse's passthrough_ll example vs the raw file, in the same run,
# on the same disk: an array file in a gstore image (mounted twice: the classic
# /dev/fuse transport, -o uring=off, and FUSE over io_uring, -o uring=on, each
# on its own image), a plain file of the same size that passthrough_ll
# exposes, and that plain file read directly.  fio cases (CASES picks by index):
#   0  4 KiB random reads, O_DIRECT, psync, one reader: QD 1 (fio's io_uring engine would
#      hand each read on a FUSE file to an io-wq worker, FUSE files have no NOWAIT)
#   1  4 KiB random reads, O_DIRECT, io_uring engine, QD 32
#   2  4 KiB random reads, O_DIRECT, io_uring engine, 4 jobs x QD 8
#   3  1 MiB sequential reads, O_DIRECT, psync, $JOBS jobs
#   4  1 MiB sequential reads, buffered (page cache dropped), psync, $JOBS jobs
# then (MCASES picks, "m" and/or "d"; seconds, median of $RUNS, page cache dropped first):
#   m  mmap of the file's first $MSIZE: each 4 KiB page touched in order, 20000
#      random pages touched, 20000 random pages written + msync (how CUDA
#      programs map arrays, cudaHostRegister on top)
#   d  metadata: create $NFILES files in a new directory, `ls -l` of it, unlink them
# Runs alternate between the targets; each figure is the median of $RUNS runs
# after a warm-up.  Per target: IOPS or MiB/s, completion latency p50/p99 (us),
# and the daemon's CPU time per I/O (utime+stime from /proc/PID/stat over the
# run; the raw file has no daemon).  Ratios: io_uring / passthrough_ll,
# io_uring / raw, io_uring / classic (> 1: the io_uring mount is faster).
#
#   bench/fuse-vs-passthrough.sh  (env: SIZE RUNTIME RUNS JOBS BENCH_DIR GSOPTS PT_RA_KB CASES)
#   URING=0 leaves the io_uring mount out (kernels without it do so by themselves)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
SIZE=${SIZE:-2G}		# file size on every side
RUNTIME=${RUNTIME:-8}		# seconds per measured run
RUNS=${RUNS:-3}
JOBS=${JOBS:-4}			# fio jobs of the 1 MiB cases (psync: one request in flight each)
WORK=${BENCH_DIR:-$PWD/$B/bench/work}
GSOPTS=${GSOPTS:-}		# extra gstorefs -o options, e.g. cache=4G
PT_RA_KB=${PT_RA_KB:-}		# set passthrough_ll's mount read-ahead too (KiB; root)
URING=${URING:-1}
MCASES=${MCASES-m d}
MSIZE=${MSIZE:-1G}
NFILES=${NFILES:-10000}
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
PARAM=/sys/module/fuse/parameters/enable_uring
if [[ $URING == 1 ]]; then
	if [[ ! -e $PARAM ]]; then
		echo "fuse-vs-passthrough: kernel $(uname -r) has no FUSE over io_uring: left out" >&2
		URING=0
	elif [[ $(cat $PARAM) != Y ]] && ! echo 1 >$PARAM 2>/dev/null; then
		echo "fuse-vs-passthrough: cannot set fuse.enable_uring (root): io_uring left out" >&2
		URING=0
	fi
fi

GMNT=$WORK/gs
UMNT=$WORK/gu
PMNT=$WORK/pt
SRC=$WORK/src
declare -A pid=()
cleanup() {
	for m in "$GMNT" "$UMNT" "$PMNT"; do
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m"
	done
	for p in "${pid[@]}"; do
		wait "$p" 2>/dev/null
	done
	true
}
trap cleanup EXIT
mkdir -p "$GMNT" "$UMNT" "$PMNT" "$SRC"

wait_mount() {
	for _ in $(seq 100); do
		mountpoint -q "$1" && return 0
		sleep 0.1
	done
	die "$1 did not mount"
}

bytes=$(numfmt --from=iec "$SIZE")
# gs_mount NAME MNT TRANSPORT: a fresh image WORK/NAME.img mounted at MNT
gs_mount() {
	"$B/bin/gstore" mkfs --force --size $((bytes + bytes / 4 + (256 << 20))) "$WORK/$1.img" \
		>/dev/null
	"$B/bin/gstorefs" -f "$WORK/$1.img" "$2" -o "uring=$3${GSOPTS:+,$GSOPTS}" &
	pid[$1]=$!
	wait_mount "$2"
}
targets=(gs)
gs_mount gstore "$GMNT" off
if [[ $URING == 1 ]]; then
	gs_mount gstore-uring "$UMNT" on
	grep -q '^transport: io_uring' "$UMNT/.gstore/info" || die "$UMNT: $(grep transport: \
		"$UMNT/.gstore/info")"
	targets+=(gu)
fi
"$PT" -f -o source="$SRC" "$PMNT" &
pid[pt]=$!
wait_mount "$PMNT"
targets+=(pt raw)
if [[ -n $PT_RA_KB ]]; then
	echo "$PT_RA_KB" >"/sys/class/bdi/$(mountpoint -d "$PMNT")/read_ahead_kb" ||
		die "cannot set passthrough_ll's read-ahead"
fi

declare -A file=([gs]=$GMNT/arrays/data [gu]=$UMNT/arrays/data [pt]=$PMNT/data [raw]=$SRC/data)
declare -A daemon=([gs]=${pid[gstore]} [gu]=${pid[gstore-uring]:-} [pt]=${pid[pt]} [raw]=)
declare -A label=([gs]="gstorefs /dev/fuse" [gu]="gstorefs io_uring" [pt]=passthrough_ll
		   [raw]="raw file")
# Same bytes on every side, written sequentially through each mount (buffered:
# passthrough_ll cannot do O_DIRECT writes, its buffers are not aligned); the
# raw file is passthrough_ll's.
for t in gs gu pt; do
	[[ -n ${daemon[$t]} ]] || continue
	fio --name=fill --filename="${file[$t]}" --rw=write --bs=1M --size="$SIZE" --direct=0 \
		--ioengine=psync --end_fsync=1 --output=/dev/null
done

drop_caches() {
	sync
	[[ $(id -u) -eq 0 ]] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

# fio_cmd FILE RW BS DIRECT ENGINE QD JOBS SECONDS
fio_cmd() {
	echo fio --name=b --filename="$1" --rw="$2" --bs="$3" --direct="$4" --size="$SIZE" \
		--ioengine="$5" --iodepth="$6" --numjobs="$7" --group_reporting --time_based \
		--runtime="$8" --output-format=json
}
cpu_ticks() { [[ -n $1 ]] && awk '{ print $14 + $15 }' "/proc/$1/stat" || echo 0; }
# fio_run TARGET ARGS...: "iops KiB/s p50_us p99_us cpu_us_per_io"
fio_run() {
	local t=$1 c0 c1
	shift
	drop_caches
	c0=$(cpu_ticks "${daemon[$t]}")
	$(fio_cmd "${file[$t]}" "$@") >"$WORK/fio.json"
	c1=$(cpu_ticks "${daemon[$t]}")
	python3 - "$WORK/fio.json" "$((c1 - c0))" "$(getconf CLK_TCK)" "${daemon[$t]:-none}" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
p = r["clat_ns"].get("percentile", {})
ios = r["total_ios"] or 1
cpu = int(sys.argv[2]) / int(sys.argv[3]) * 1e6 / ios if sys.argv[4] != "none" else -1
print(f'{r["iops"]:.0f} {r["bw"]} {p.get("50.000000", 0) / 1e3:.1f} '
      f'{p.get("99.000000", 0) / 1e3:.1f} {cpu:.1f}')
EOF
}

ra_kb() { cat "/sys/class/bdi/$(mountpoint -d "$1")/read_ahead_kb" 2>/dev/null || echo "?"; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%8.2fx", b ? a / b : 0 }'; }
col() { printf '%s\n' "$@" | awk -v f="$COL" '{ print $f }' | median; }
# row LABEL BETTER: LABEL, the medians med[] of every target and, with URING=1,
# the io_uring mount against passthrough_ll, the raw file and /dev/fuse as
# "faster by" (BETTER=higher: gu / other, as IOPS; lower: other / gu, as seconds)
row() {
	local t
	printf '%-34s' "$1"
	for t in "${targets[@]}"; do printf ' %18s' "${med[$t]}"; done
	if [[ $URING == 1 ]]; then
		for t in pt raw gs; do
			if [[ $2 == higher ]]; then
				printf ' %s' "$(ratio "${med[gu]}" "${med[$t]}")"
			else
				printf ' %s' "$(ratio "${med[$t]}" "${med[gu]}")"
			fi
		done
	fi
	echo
}

txt=$OUT/fuse-vs-passthrough.txt
{
echo "# gstorefs vs passthrough_ll vs raw  $(date -u '+%Y-%m-%d %H:%M UTC')  host $(uname -n)"
echo "# $(nproc) CPUs, kernel $(uname -r), libfuse $(pkg-config --modversion fuse3), $(fio --version)"
echo "# disk: $(df --output=source "$WORK" | tail -1) ($(findmnt -n -o FSTYPE --target "$WORK")),"\
     "file $SIZE, runs $RUNS x ${RUNTIME}s, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gstorefs -f $WORK/gstore.img $GMNT -o uring=off${GSOPTS:+,$GSOPTS}"
[[ $URING == 1 ]] && echo "# gstorefs -f $WORK/gstore-uring.img $UMNT -o uring=on${GSOPTS:+,$GSOPTS}"\
	"($(sed -n 's/^transport: //p' "$UMNT/.gstore/info"))"
echo "# $PT -f -o source=$SRC $PMNT; raw file $SRC/data"
echo "# kernel read-ahead (read_ahead_kb): gstorefs $(ra_kb "$GMNT"), passthrough_ll $(ra_kb "$PMNT")"
echo "# each run: $(fio_cmd FILE RW BS DIRECT ENGINE QD JOBS "$RUNTIME")"
printf '%-34s' case
for t in "${targets[@]}"; do printf ' %18s' "${label[$t]}"; done
[[ $URING == 1 ]] && printf ' %9s %9s %9s' uring/pt uring/raw uring/dev
echo
} | tee "$txt"

cases=("randread 4k 1 psync 1 1 iops" "randread 4k 1 io_uring 32 1 iops"
       "randread 4k 1 io_uring 8 4 iops" "read 1M 1 psync 1 $JOBS MiB/s"
       "read 1M 0 psync 1 $JOBS MiB/s")
sel=${CASES:-0 1 2 3 4}
for i in $sel; do
	read -r rw bs direct engine qd jobs unit <<<"${cases[i]}"
	for t in "${targets[@]}"; do	# warm-up (not counted)
		fio_run "$t" "$rw" "$bs" "$direct" "$engine" "$qd" "$jobs" 2 >/dev/null
	done
	declare -A res=()
	for ((r = 0; r < RUNS; r++)); do
		for t in "${targets[@]}"; do
			res[$t.$r]=$(fio_run "$t" "$rw" "$bs" "$direct" "$engine" "$qd" "$jobs" \
				"$RUNTIME")
		done
	done
	declare -A med=() p50=() p99=() cpu=()
	for t in "${targets[@]}"; do
		runs=()
		for ((r = 0; r < RUNS; r++)); do runs+=("${res[$t.$r]}"); done
		if [[ $unit == iops ]]; then
			COL=1 med[$t]=$(col "${runs[@]}")
		else
			med[$t]=$(printf '%s\n' "${runs[@]}" | awk '{ printf "%.0f\n", $2 / 1024 }' |
				median)
		fi
		COL=3 p50[$t]=$(col "${runs[@]}")
		COL=4 p99[$t]=$(col "${runs[@]}")
		COL=5 cpu[$t]=$(col "${runs[@]}")
	done
	{
	row "$rw $bs d=$direct $engine qd=$qd j=$jobs ($unit)" higher
	printf '%-34s' "  clat p50 / p99 (us)"
	for t in "${targets[@]}"; do printf ' %18s' "${p50[$t]} / ${p99[$t]}"; done
	echo
	printf '%-34s' "  daemon CPU per I/O (us)"
	for t in "${targets[@]}"; do
		[[ $t == raw ]] && printf ' %18s' - || printf ' %18s' "${cpu[$t]}"
	done
	echo
	} | tee -a "$txt"
	for t in "${targets[@]}"; do
		runs=()
		for ((r = 0; r < RUNS; r++)); do runs+=("${res[$t.$r]// /:}"); done
		echo "  runs ${label[$t]}: ${runs[*]}  (iops:KiB/s:p50:p99:cpu)" >>"$txt"
	done
	unset res med p50 p99 cpu
done

# mmap and metadata: seconds (lower is better); ratios other / io_uring (> 1: faster)
mm_py() {
	python3 - "$@" <<'EOF'
import mmap, os, random, subprocess, sys, time
kind, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
def drop():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass
out = []
if kind == "m":
    fd = os.open(path, os.O_RDWR)
    pages = size // 4096
    rng = random.Random(1)
    for what in ("seq", "rand", "write"):
        drop()
        m = mmap.mmap(fd, size)
        t = time.monotonic()
        if what == "seq":
            s = 0
            for i in range(0, size, 4096):
                s += m[i]
        elif what == "rand":
            for _ in range(20000):
                s = m[rng.randrange(pages) * 4096]
        else:
            for _ in range(20000):
                m[rng.randrange(pages) * 4096] = 7
            m.flush()
        out.append(time.monotonic() - t)
        m.close()
    os.close(fd)
else:
    d, n = path, size
    os.mkdir(d)
    drop()
    t = time.monotonic()
    for i in range(n):
        os.close(os.open(f"{d}/f{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    out.append(time.monotonic() - t)
    drop()
    t = time.monotonic()
    subprocess.run(["ls", "-l", d], stdout=subprocess.DEVNULL, check=True)
    out.append(time.monotonic() - t)
    drop()
    t = time.monotonic()
    for i in range(n):
        os.unlink(f"{d}/f{i:06d}")
    out.append(time.monotonic() - t)
    os.rmdir(d)
print(" ".join(f"{x:.3f}" for x in out))
EOF
}
declare -A dir=([gs]=$GMNT/arrays [gu]=$UMNT/arrays [pt]=$PMNT [raw]=$SRC)
msize=$(numfmt --from=iec "$MSIZE")
[[ $msize -le $bytes ]] || msize=$bytes
for m in $MCASES; do
	declare -A res=()
	for ((r = 0; r < RUNS; r++)); do
		for t in "${targets[@]}"; do
			if [[ $m == m ]]; then
				res[$t.$r]=$(mm_py m "${file[$t]}" "$msize")
			else
				res[$t.$r]=$(mm_py d "${dir[$t]}/meta-$t" "$NFILES")
			fi
		done
	done
	if [[ $m == m ]]; then
		names=("mmap: each page in order (s)" "mmap: 20000 random reads (s)"
		       "mmap: 20000 rand writes+msync (s)")
	else
		names=("create $NFILES files (s)" "ls -l of $NFILES names (s)"
		       "unlink $NFILES files (s)")
	fi
	for k in 0 1 2; do
		declare -A med=()
		for t in "${targets[@]}"; do
			med[$t]=$(for ((r = 0; r < RUNS; r++)); do echo "${res[$t.$r]}"; done |
				awk -v k=$((k + 1)) '{ print $k }' | median)
		done
		{
		row "${names[k]}" lower
		} | tee -a "$txt"
		unset med
	done
	for t in "${targets[@]}"; do
		runs=()
		for ((r = 0; r < RUNS; r++)); do runs+=("${res[$t.$r]// /:}"); done
		echo "  runs ${label[$t]}: ${runs[*]}  (s)" >>"$txt"
	done
	unset res
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$txt"
# an idle mount: the daemons' CPU over 5 s with nothing to do
for t in gs gu; do
	[[ -n ${daemon[$t]:-} ]] || continue
	c0=$(cpu_ticks "${daemon[$t]}")
	sleep 5
	c1=$(cpu_ticks "${daemon[$t]}")
	echo "# idle ${label[$t]}: $(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.2f", d / hz / 5 * 100 }') % of one CPU over 5 s" | tee -a "$txt"
done
