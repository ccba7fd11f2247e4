#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstore's I/O core against fio on the same file, in the same run.
#
#   bench/io-vs-fio.sh [FILE]
#
# Random 4 KiB O_DIRECT reads at queue depth 64: `gstore-bench io` (poller ->
# io_uring) and `fio --ioengine=io_uring` (the peer), alternating, RUNS times
# each; prints every run, the medians and the ratios gstore/fio of IOPS and
# of CPU time per I/O, for each gstore-bench mode in MODES:
#   cb    completion callbacks resubmit from the poller (gs_q_submit(3)): the
#         way an in-process application drives the I/O core, one thread in
#         the I/O loop as in fio (the headline figure)
#   ring  a producer thread with its own ring (gs_ring_cq_wait(3)): the path
#         of other processes, each request crosses producer <-> poller twice
#
# CPU per I/O: gstore-bench measures the whole process (producer threads,
# pollers, kernel time) with getrusage over its measured window; for fio the
# job thread's usr_cpu + sys_cpu over its runtime (fio's own accounting,
# which leaves out fio's mostly idle main thread).
#
# Env: SIZE (2G) file size when it has to be created (filled with random
# data), RUNS (5), RUNTIME (10 s), WARMUP (2 s), QD (64), THREADS (1: fio
# --numjobs matches), POLLERS (1), MODES ("cb ring"), B (build dir),
# GSTORE_BENCH_ARGS (extra
# options for gstore-bench io), CPUS (a taskset CPU list both programs are
# confined to, e.g. CPUS=1; default: unconfined).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
FILE=${1:-${FILE:-/tmp/gstore-bench.img}}
SIZE=${SIZE:-2G}
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-10}
WARMUP=${WARMUP:-2}
QD=${QD:-64}
THREADS=${THREADS:-1}
POLLERS=${POLLERS:-1}
MODES=${MODES:-cb ring}
BENCH=$B/bin/gstore-bench

command -v fio >/dev/null || { echo "io-vs-fio: skip: fio not installed"; exit 77; }
command -v python3 >/dev/null || { echo "io-vs-fio: skip: python3 not installed"; exit 77; }
[[ -x $BENCH ]] || { echo "io-vs-fio: $BENCH missing (make first)"; exit 1; }

if [[ ! -f $FILE ]]; then
	echo "creating $FILE ($SIZE of random data)"
	fio --name=fill --filename="$FILE" --size="$SIZE" --rw=write --bs=1M --direct=1 \
		--ioengine=psync --refill_buffers=1 --output=/dev/null
fi

gs_base=("$BENCH" io --file "$FILE" --qd "$QD" --threads "$THREADS" --bs 4096
	--runtime "$RUNTIME" --warmup "$WARMUP" --pollers "$POLLERS" ${GSTORE_BENCH_ARGS:-})
fio_cmd=(fio --name=randread --filename="$FILE" --ioengine=io_uring --direct=1 --rw=randread
	 --bs=4k --iodepth="$QD" --numjobs="$THREADS" --runtime="$RUNTIME" --time_based
	 --ramp_time="$WARMUP" --norandommap --randrepeat=0 --output-format=json)

if [[ -n ${CPUS:-} ]]; then
	gs_base=(taskset -c "$CPUS" "${gs_base[@]}")
	fio_cmd=(taskset -c "$CPUS" "${fio_cmd[@]}")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for mode in $MODES; do
gs_cmd=("${gs_base[@]}" --mode "$mode")
echo
echo "== mode $mode"
echo "gstore: ${gs_cmd[*]}"
echo "fio:    ${fio_cmd[*]}"
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
rm -f "$tmp"/*

for ((r = 1; r <= RUNS; r++)); do
	"${gs_cmd[@]}" >"$tmp/gs.$r" 2>&1 || { cat "$tmp/gs.$r"; exit 1; }
	sed -n 's/^RESULT //p' "$tmp/gs.$r" >"$tmp/gs.res.$r"
	"${fio_cmd[@]}" >"$tmp/fio.$r" 2>/dev/null
	python3 - "$tmp/fio.$r" >"$tmp/fio.res.$r" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
iops = ios = cpu = 0.0
p50 = p99 = p999 = 0.0
for job in j["jobs"]:
	r = job["read"]
	iops += r["iops"]
	ios += r["total_ios"]
	cpu += (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1000.0
	pc = r["clat_ns"]["percentile"]
	p50 = max(p50, pc["50.000000"] / 1000.0)
	p99 = max(p99, pc["99.000000"] / 1000.0)
	p999 = max(p999, pc["99.900000"] / 1000.0)
print("iops=%.0f lat_p50_us=%.1f lat_p99_us=%.1f lat_p999_us=%.1f cpu_us_per_io=%.3f"
      % (iops, p50, p99, p999, cpu / ios * 1e6 if ios else 0))
EOF
	printf 'run %d  gstore: %s\n       fio:    %s\n' "$r" "$(cat "$tmp/gs.res.$r")" \
		"$(cat "$tmp/fio.res.$r")"
done

python3 - "$tmp" "$RUNS" "$((QD * THREADS))" "$mode" <<'EOF'
import statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
def load(kind):
	out = []
	for r in range(1, runs + 1):
		kv = dict(x.split("=") for x in open("%s/%s.res.%d" % (d, kind, r)).read().split())
		out.append({k: float(v) for k, v in kv.items()})
	return out
gs, fio = load("gs"), load("fio")
med = lambda rows, k: statistics.median(x[k] for x in rows)
print("median of %d runs:" % runs)
for name, rows in (("gstore", gs), ("fio", fio)):
	print("  %-6s %8.0f IOPS  p50 %7.1f us  p99 %8.1f us  p99.9 %8.1f us  CPU %.2f us/IO"
	      % (name, med(rows, "iops"), med(rows, "lat_p50_us"), med(rows, "lat_p99_us"),
		 med(rows, "lat_p999_us"), med(rows, "cpu_us_per_io")))
print("  gstore kept %.1f of %s requests in the device on average" % (med(gs, "inflight"), sys.argv[3]))
ri = med(gs, "iops") / med(fio, "iops")
rc = med(gs, "cpu_us_per_io") / med(fio, "cpu_us_per_io")
print("ratio gstore/fio (mode %s): IOPS %.2fx (target >= 0.90)  CPU per I/O %.2fx "
      "(target <= 1.00)" % (sys.argv[4], ri, rc))
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
