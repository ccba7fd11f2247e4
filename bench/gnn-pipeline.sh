#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GNN mini-batch feature loading (issue 15 item 3), on the GPU machine, as
# root: gstore's gather (CAM + host tier) against the mmap loader, KvikIO and
# load-all-then-gather, on the same feature file, in two regimes:
#   big: every loader in a cgroup v2 with memory.max = table / 4 (the table
#        is 4x what the loader may use), steady state over GNN_SECS, cold;
#   fit: no limit, an epoch of GNN_EPOCH batches from a cold page cache
#        (gstore with its host tier holding the whole table).
# The page cache is dropped before every peer.  Prints RESULT lines, the
# ratios and PASS/FAIL; a table last.
#
#   bash bench/gnn-pipeline.sh            (B=build/gpu, built by make -C tests/gpu)
#
# Env: GNN_GIB (table, 4: 1 M rows), GNN_ROWB (row bytes, 4096: F = 1024 float32),
# GNN_SEEDS (1024), GNN_FANOUTS (10,5), GNN_SECS (4), GNN_EPOCH (100 batches: a training
# split of 100 x 1024 seeds, about 10 % of the 1 M vertices), GNN_EDGE_FACTOR (8),
# GNN_BATCHES (300: distinct batches for the steady state; it goes round them only past
# 300 in GNN_SECS, which the first run's 100 let the page cache of the mmap loader exploit),
# GNN_SYNTHETIC (set: gnn gen's sampler instead of gs_graph_sample over an imported graph),
# GNN_THREADS (mmap gather threads, 16), GNN_CG_MIB (table / 4), GNN_DISK_ROUNDS (3) and
# GNN_DISK_SECS (1.2: gnn disk's gather and raw windows, taking turns), GNN_DISK_STREAMS
# ("2 1": its gather stream counts), GNN_GATHER_STREAMS (the gstore rows', 2),
# GNN_KVIKIO_THREADS (64), GNN_KV_ROUNDS (3) and GNN_KV_SECS (3: gstore and KvikIO taking
# turns, the target's ratio the median of the rounds'), GNN_FEAT (the table file),
# GNN_SKIP_ATTACH (no check over a mounted store), GNN_SKIP_SANITIZER, GNN_FIT_KVIKIO /
# GNN_FIT_NOTIER (extra fit rows), OUT (logs); for a dry run of the script on a machine
# that is not the GPU's: GNN_NO_DROP, GNN_NO_CGROUP.  The defaults fit run-all's
# GS_GNN_TIMEOUT (480) with room: 81 s on an H200 before the interleaved KvikIO rounds;
# the first run (docs/PERF.md) used GNN_GIB=8 GNN_SECS=10 GNN_EPOCH=200.
set -u
cd "$(dirname "$0")/.."
B=${B:-build/gpu}
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
LOG=$OUT/gnn.log
GIB=${GNN_GIB:-4}
ROWB=${GNN_ROWB:-4096}
SECS=${GNN_SECS:-4}
EPOCH=${GNN_EPOCH:-100}
NTH=${GNN_THREADS:-16}
FEAT=${GNN_FEAT:-$PWD/$B/feat.bin}
fail=0
: >"$LOG"

say() { echo "$*" | tee -a "$LOG"; }
# run NAME TIMEOUT CMD...: one peer, its RESULT/PASS/FAIL lines shown
run() {
	local name=$1 to=$2 rc
	shift 2
	if [[ -z ${GNN_NO_DROP:-} ]]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
	fi
	echo "== $name: $*" >>"$LOG"
	timeout -k 5 "$to" "$@" >>"$LOG" 2>&1
	rc=$?
	grep -E "^(RESULT|PASS|FAIL)" "$LOG" | grep -F " $name" | tail -6
	case $rc in
	0) ;;
	77) say "SKIP $name" ;;
	124|137) say "FAIL $name (timeout ${to}s)"; fail=1 ;;
	*) say "FAIL $name (exit $rc)"; fail=1 ;;
	esac
}

[[ -x $B/gnn ]] || { echo "FAIL gnn: $B/gnn not built"; exit 1; }
if [[ ! -w /proc/sys/vm/drop_caches ]]; then
	say "NOTE: not root: the page cache cannot be dropped (cold-cache figures are not cold)"
fi
T0=$(date +%s)
timeout 300 "$B/mkimage" "$FEAT" "$GIB" >>"$LOG" 2>&1 || { say "FAIL gnn: mkimage"; exit 1; }
TABLE_MIB=$(( ($(stat -c %s "$FEAT") + (1 << 20) - 1) >> 20 ))
NROWS=$(( $(stat -c %s "$FEAT") / ROWB ))
CG_MIB=${GNN_CG_MIB:-$((TABLE_MIB / 4))}
say "gnn: table $FEAT: $NROWS rows x $ROWB bytes ($GIB GiB), made in $(( $(date +%s) - T0 )) s"
# ---- the batches: gs_graph_sample(3) over an R-MAT graph/g of NROWS vertices in a
# gstore image (the node index is the row); gnn gen's synthetic sampler if that fails
SEEDS=${GNN_SEEDS:-1024}
FAN=${GNN_FANOUTS:-10,5}
sampled=0
GIMG=
if [[ -z ${GNN_SYNTHETIC:-} && -x build/bin/gstore && -x build/bin/gstore-graphbench &&
      -f build/libgstore.a ]]; then
	scale=0
	while (( (2 << scale) <= NROWS )); do scale=$((scale + 1)); done
	GIMG=$(realpath -m "$B")/gnn-g.img
	rm -f "$GIMG"
	if {
		cc -O2 -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Iuapi -pthread \
			-o "$B/gnn_sample" bench/gnn_sample.c build/libgstore.a -luring -lm &&
		timeout 120 build/bin/gstore-graphbench gen --scale "$scale" \
			--edge-factor "${GNN_EDGE_FACTOR:-8}" "$B/gnn-g.txt" &&
		build/bin/gstore mkfs --size "${GNN_GRAPH_IMG:-4G}" "$GIMG" &&
		timeout 180 build/bin/gstore import graph g "$B/gnn-g.txt" --image "$GIMG" \
			--undirected --vertices "$NROWS" --ids dense --cache 256M &&
		timeout 120 "$B/gnn_sample" "$GIMG" g "$B/gnn-big.bat" "${GNN_BATCHES:-300}" \
			"$SEEDS" "$FAN" 1 &&
		timeout 120 "$B/gnn_sample" "$GIMG" g "$B/gnn-epoch.bat" "$EPOCH" "$SEEDS" "$FAN" 2
	} >>"$LOG" 2>&1; then
		sampled=1
		say "gnn: batches sampled by gs_graph_sample(3) over R-MAT scale $scale" \
			"(edge factor ${GNN_EDGE_FACTOR:-8}, undirected) in $GIMG"
		grep -E "^graph/g|^RESULT gnn_sample" "$LOG" | tee -a "$OUT/gnn-sample.txt"
	else
		say "NOTE: graph import or gs_graph_sample failed (see $LOG): synthetic sampler"
	fi
	rm -f "$B/gnn-g.txt"
fi
if [[ $sampled == 0 ]]; then
	timeout 120 "$B/gnn" gen "$B/gnn-big.bat" "$NROWS" "$SEEDS" "$FAN" \
		"${GNN_BATCHES:-300}" 1 | tee -a "$LOG"
	timeout 120 "$B/gnn" gen "$B/gnn-epoch.bat" "$NROWS" "$SEEDS" "$FAN" "$EPOCH" 2 >>"$LOG"
fi
say "gnn: sampling and setup took $(( $(date +%s) - T0 )) s"
run check 120 "$B/gnn" check "$FEAT"
# the same cases over gs_cuda_attach: a mounted store's arrays/feat (the table's first 256 MiB)
if [[ -z ${GNN_SKIP_ATTACH:-} && -x build/bin/gstorefs && -x build/bin/gstore ]]; then
	AIMG=$(realpath -m "$B")/gnn-attach.img
	AMNT=$(realpath -m "$B")/gnn-mnt
	umount -l "$AMNT" 2>/dev/null
	rm -f "$AIMG"
	mkdir -p "$AMNT"
	if { build/bin/gstore mkfs --size 1G "$AIMG" && build/bin/gstorefs "$AIMG" "$AMNT" &&
	     head -c 256M "$FEAT" >"$AMNT/arrays/feat"; } >>"$LOG" 2>&1; then
		run check-attach 120 "$B/gnn" check-attach "$AMNT/arrays/feat"
	else
		say "FAIL check-attach: no mounted store (see $LOG)"
		fail=1
	fi
	umount "$AMNT" 2>/dev/null || fusermount3 -u "$AMNT" 2>/dev/null
	rm -f "$AIMG"
fi

# ---- the memory cgroup of the big regime ----
CG=
cg_try() {
	local parent=$1 cg=$1/gstore-gnn
	mkdir -p "$cg" 2>/dev/null || return 1
	if [[ ! -f $cg/memory.max ]]; then
		echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null
	fi
	[[ -f $cg/memory.max ]] || { rmdir "$cg" 2>/dev/null; return 1; }
	echo $((CG_MIB << 20)) >"$cg/memory.max" 2>/dev/null || return 1
	echo 0 >"$cg/memory.swap.max" 2>/dev/null
	CG=$cg
}
if [[ -z ${GNN_NO_CGROUP:-} && -d /sys/fs/cgroup ]] && grep -q cgroup2 /proc/mounts; then
	self=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
	cg_try /sys/fs/cgroup || cg_try "$self" || cg_try "$(dirname "$self")"
fi
if [[ -n $CG ]]; then
	say "gnn: big regime: cgroup $CG memory.max $(cat "$CG/memory.max") bytes" \
		"($CG_MIB MiB; the table, $TABLE_MIB MiB, is $(( TABLE_MIB / CG_MIB ))x that)"
	# a command prefix (timeout runs commands, not functions): the shell joins the
	# cgroup, then becomes the peer
	INCG=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG")
else
	say "NOTE: cgroup v2 memory controller not writable here ($(grep cgroup /proc/mounts |
		head -2 | tr '\n' ' ')): the big regime runs WITHOUT a memory limit (not honest:" \
		"the $GIB GiB table fits in the page cache)"
	INCG=(env)
fi

# ---- the disk's raw limit (no cgroup: O_DIRECT) ----
run gnn_raw_iops 60 "$B/gnn" raw "$FEAT" 1.5 64

# ---- KvikIO from the wheels carried with the tree (.whl/: kvikio-cu13, libkvikio-cu13 and
# rapids-logger, which libkvikio.so links; cupy, cuda-pathfinder and nvidia-cufile are on the
# GPU machine; docs/PERF.md "GNN pipeline" has the pip download line) ----
KV=0
if ls .whl/kvikio*.whl >/dev/null 2>&1; then
	python3 -m pip install -q --no-index --no-deps --target /tmp/gnn-site .whl/*.whl \
		>>"$LOG" 2>&1 && KV=1
fi
# small bounce buffers: 64 threads x the 16 MiB default would pin 1 GiB inside the cgroup
KVIKIO=(env PYTHONPATH=/tmp/gnn-site${PYTHONPATH:+:$PYTHONPATH} KVIKIO_COMPAT_MODE=ON
	KVIKIO_BOUNCE_BUFFER_SIZE=$((1 << 20)) KVIKIO_AUTO_DIRECT_IO_READ=ON
	KVIKIO_NTHREADS=${GNN_KVIKIO_THREADS:-64} python3 bench/gnn_kvikio.py)

# ---- big regime: steady state, in the cgroup ----
BB=$B/gnn-big.bat
# the disk's share, interleaved: gather windows and raw windows taking turns in one process
# (the target's measure: the raw row above was measured once, before, and the disk drifts)
run gnn_disk 60 "${INCG[@]}" "$B/gnn" disk "$FEAT" "$BB" "$ROWB" "${GNN_DISK_ROUNDS:-3}" \
	"${GNN_DISK_SECS:-1.2}" gnn_disk
run gnn_big_gstore 90 "${INCG[@]}" "$B/gnn" gstore "$FEAT" "$BB" "$ROWB" "$SECS" 0 gnn_big_gstore
# with a GPU cache as large as the loaders' host memory (table / 4): the hubs stay on the GPU
run gnn_big_gstore_cache 90 "${INCG[@]}" "$B/gnn" gstore "$FEAT" "$BB" "$ROWB" "$SECS" 0 \
	gnn_big_gstore_cache "$CG_MIB"
run gnn_big_mmap 90 "${INCG[@]}" "$B/gnn" mmap "$FEAT" "$BB" "$ROWB" "$SECS" "$NTH" plain \
	gnn_big_mmap
run gnn_big_mmap_random 90 "${INCG[@]}" "$B/gnn" mmap "$FEAT" "$BB" "$ROWB" "$SECS" "$NTH" random \
	gnn_big_mmap_random
# end to end: sampling on the GPU over the graph object (gs_cuda_graph_sample), then the
# gather from the sample's node list (tests/gpu/gnn_e2e: make -C tests/gpu fs)
if [[ $sampled == 1 && -x $B/gnn_e2e ]]; then
	run gnn_big_e2e 60 "${INCG[@]}" "$B/gnn_e2e" "$FEAT" "$ROWB" "$GIMG" g "$SECS" "$SEEDS" \
		"$FAN" "$CG_MIB" gnn_big_e2e
else
	say "NOTE: no end-to-end row (graph sampled: $sampled; $B/gnn_e2e built by" \
		"make -C tests/gpu fs: $([[ -x $B/gnn_e2e ]] && echo yes || echo no))"
fi
[[ $KV == 1 ]] &&
	run gnn_big_kvikio 120 "${INCG[@]}" "${KVIKIO[@]}" "$FEAT" "$BB" "$ROWB" "$SECS" gnn_big_kvikio
# gstore and KvikIO taking turns (GNN_KV_ROUNDS rounds of GNN_KV_SECS each, the order
# swapped every round): both read at the disk's limit, which drifts by 10 % within a call,
# so the target's ratio is the median of the rounds' ratios, not one row over another
# measured a minute apart
KVR=${GNN_KV_ROUNDS:-3}
# kv_g R, kv_k R: round R's gstore row and KvikIO row
kv_g() { run gnn_kv_gstore_$1 90 "${INCG[@]}" "$B/gnn" gstore "$FEAT" "$BB" "$ROWB" \
	"${GNN_KV_SECS:-3}" 0 gnn_kv_gstore_$1; }
kv_k() { run gnn_kv_kvikio_$1 120 "${INCG[@]}" "${KVIKIO[@]}" "$FEAT" "$BB" "$ROWB" \
	"${GNN_KV_SECS:-3}" gnn_kv_kvikio_$1; }
if [[ $KV == 1 ]] && (( KVR > 0 )); then
	for r in $(seq "$KVR"); do
		if (( r % 2 )); then kv_g $r; kv_k $r; else kv_k $r; kv_g $r; fi
	done
fi

# ---- fits in RAM: an epoch from cold, no limit ----
EB=$B/gnn-epoch.bat
TIER_MIB=$TABLE_MIB
run gnn_fit_gstore 120 "$B/gnn" gstore "$FEAT" "$EB" "$ROWB" epoch "$TIER_MIB" gnn_fit_gstore
# (without the tier: 7.04 batches/s, 5.36x slower, in the first run; GNN_FIT_NOTIER=1 for it)
[[ -n ${GNN_FIT_NOTIER:-} ]] &&
	run gnn_fit_gstore_notier 120 "$B/gnn" gstore "$FEAT" "$EB" "$ROWB" epoch 0 \
		gnn_fit_gstore_notier
run gnn_fit_mmap 120 "$B/gnn" mmap "$FEAT" "$EB" "$ROWB" epoch "$NTH" plain gnn_fit_mmap
run gnn_fit_loadall 120 "$B/gnn" loadall "$FEAT" "$EB" "$ROWB" gnn_fit_loadall
# (KvikIO's epoch: optional, its Python loop takes a while; no target in this regime)
[[ $KV == 1 && -n ${GNN_FIT_KVIKIO:-} ]] &&
	run gnn_fit_kvikio 120 "${KVIKIO[@]}" "$FEAT" "$EB" "$ROWB" epoch gnn_fit_kvikio
[[ -n $CG ]] && rmdir "$CG" 2>/dev/null

# ---- the gather kernels under compute-sanitizer ----
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [[ -x $SAN && -z ${GNN_SKIP_SANITIZER:-} ]]; then
	run memcheck_gather 150 "$SAN" --tool memcheck --error-exitcode 9 "$B/gnn" check "$FEAT" quick
	run racecheck_gather 150 "$SAN" --tool racecheck --error-exitcode 9 "$B/gnn" check "$FEAT" quick
fi

# ---- the table ----
v() { awk -v n="$1" '$1 == "RESULT" && $2 == n { print $3; exit }' "$LOG"; }
ratio() {
	local a b
	a=$(v "$1")
	b=$(v "$2")
	awk -v a="$a" -v b="$b" -v w="$3" -v t="$4" 'BEGIN {
		if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) { printf "  %-50s n/a\n", w; exit }
		r = a / b
		if (t == "-") { printf "  %-50s %6.2fx\n", w, r; exit }
		printf "  %-50s %6.2fx  (target >= %s: %s)\n", w, r, t, (r >= t ? "met" : "MISSED")
	}'
}
{
	echo
	echo "==== GNN pipeline: $(nvidia-smi -L 2>/dev/null | head -1), table $GIB GiB" \
		"($NROWS x $ROWB B), $(( $(date +%s) - T0 )) s"
	grep -hE "^RESULT gnn_" "$LOG" | cut -c8-400
	echo "ratios (batches/s, same run, same file):"
	ratio gnn_big_gstore gnn_big_mmap "big: gstore / mmap loader" 3
	ratio gnn_big_gstore gnn_big_mmap_random "big: gstore / mmap + MADV_RANDOM" -
	ratio gnn_big_gstore gnn_big_kvikio "big: gstore / KvikIO (one row each)" -
	# the target's: the median of the interleaved rounds' ratios
	for r in $(seq "$KVR"); do
		a=$(v gnn_kv_gstore_$r) b=$(v gnn_kv_kvikio_$r)
		[[ $a =~ ^[0-9.]+$ && $b =~ ^[0-9.]+$ ]] && awk -v a="$a" -v b="$b" \
			'BEGIN { if (b + 0 > 0) printf "%.4f\n", a / b }'
	done | sort -n | awk -v w="big: gstore / KvikIO, interleaved (median of rounds)" '
		{ r[NR] = $1 }
		END {
			if (!NR) { printf "  %-50s n/a\n", w; exit }
			m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
			printf "  %-50s %6.2fx  (target >= 1: %s; %d rounds, %.2f..%.2f)\n", w, m,
				(m >= 1 ? "met" : "MISSED"), NR, r[1], r[NR]
		}'
	ratio gnn_big_gstore_cache gnn_big_mmap "big: gstore + GPU cache / mmap loader" 3
	ratio gnn_big_gstore_cache gnn_big_mmap_random "big: gstore + GPU cache / mmap + MADV_RANDOM" -
	ratio gnn_big_gstore_cache gnn_big_kvikio "big: gstore + GPU cache / KvikIO" 1
	ratio gnn_big_e2e gnn_big_gstore_cache "big: GPU sampling + gather / gather alone" -
	ratio gnn_big_e2e gnn_big_mmap "big: GPU sampling + gather / mmap loader" -
	ratio gnn_fit_gstore gnn_fit_mmap "fit (epoch): gstore host tier / mmap loader" 1
	ratio gnn_fit_gstore gnn_fit_kvikio "fit (epoch): gstore host tier / KvikIO" -
	ratio gnn_fit_gstore gnn_fit_loadall "fit (epoch): gstore host tier / load-all" -
	ratio gnn_fit_gstore gnn_fit_gstore_notier "fit (epoch): gstore host tier / no tier" -
	ratio gnn_fit_gstore_2nd_half gnn_fit_mmap_2nd_half "fit, epoch's 2nd half: gstore / mmap" -
	awk -v r="$(v gnn_disk)" -v w="big: the disk's share, interleaved (gnn_disk)" 'BEGIN {
		if (r !~ /^[0-9.]+$/) { printf "  %-50s n/a\n", w; exit }
		printf "  %-50s %6.2fx  (target >= 0.95: %s)\n", w, r, (r >= 0.95 ? "met" : "MISSED")
	}'
	awk -v r="$(v gnn_disk_1s)" -v w="big: the same with one gather stream" 'BEGIN {
		if (r ~ /^[0-9.]+$/) printf "  %-50s %6.2fx\n", w, r
	}'
	# the earlier measure: one raw row before, the window from the open on
	ratio gnn_big_gstore_blocks gnn_raw_iops "big: gstore device blocks/s / raw row before" -
	ratio gnn_big_gstore_cache_blocks gnn_raw_iops "big: the same with the GPU cache (misses only)" -
	grep -hE "^(PASS|FAIL)" "$LOG" | sort | uniq -c | awk '{ $1 = ""; print }' | sed 's/^ //'
	[[ $fail == 0 ]] && echo "PASS gnn pipeline" || echo "FAIL gnn pipeline"
} | tee "$OUT/gnn-summary.txt"
exit $fail
