#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU path's acceptance run, on the GPU machine, in one go: build, the
# correctness tests (CAM, BaM over the ring, BaM over the software NVMe
# controller), compute-sanitizer, the benchmarks; a short table last.
#
#   source .gpudeps/env.sh && bash tests/gpu/run-all.sh
#
# Env: OUT (logs; default build/gpu/out), GS_GPU_IMAGE (default
# build/gpu/gs-gpu.img: on the disk, not tmpfs: O_DIRECT), GS_GPU_GIB (4),
# GS_GPU_SKIP ("tests sanitizer fs python graph graph_attach hot bench gnn camtune" to leave
# parts out; "attach_bs" leaves out the block-size rows of fs), GS_GPU_ONLY
# (the same words: run only those parts), GS_GPU_SWEEP
# (total queue depths for a gstore-bench io sweep, e.g. "64 128 256").
# Exits 77 ("skip: no GPU") without a GPU, 1 if a test failed.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu/out}
B=build/gpu
mkdir -p "$OUT" "$B"
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no GPU"
	exit 77
fi
skip() {
	[[ " ${GS_GPU_SKIP:-} " == *" $1 "* ]] ||
		{ [[ -n ${GS_GPU_ONLY:-} ]] && [[ " $GS_GPU_ONLY " != *" $1 "* ]]; }
}
export GS_GPU_IMAGE=${GS_GPU_IMAGE:-$PWD/$B/gs-gpu.img}
T0=$(date +%s)
{
	nvidia-smi
	echo "cores: $(nproc)"
	free -g
	df -h "$(dirname "$GS_GPU_IMAGE")" /tmp
	uname -a
	command -v compute-sanitizer || ls /usr/local/cuda/bin
	ls /usr/local/cuda/lib64 | grep -i cufile
	cat /etc/cufile.json 2>/dev/null | head -5
	# the disk under the image: its queue (the depth the core should keep)
	findmnt -T "$(dirname "$GS_GPU_IMAGE")"
	for d in /sys/block/*/queue; do
		echo "$d: nr_requests $(cat $d/nr_requests) sched $(cat $d/scheduler)" \
			"rq_affinity $(cat $d/rq_affinity) nomerges $(cat $d/nomerges)"
	done
	ls /sys/block/*/mq 2>/dev/null
	grep -iE "virtio|nvme" /proc/interrupts | head
} >"$OUT/machine.txt" 2>&1

echo "== build"
# the top-level library and tools (gstorefs, gstore, gstore-bench) beside the GPU programs
TOPS="build/libgstore.a build/bin/gstorefs build/bin/gstore build/bin/gstore-graphbench
      build/bin/gstore-bench"
( mkdir -p build/bin && make -j"$(nproc)" $TOPS >"$OUT/build-top.log" 2>&1 ) &
topbuild=$!
if ! make -C tests/gpu -j"$(nproc)" >"$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log"
	echo "build failed"
	exit 1
fi
wait $topbuild
topok=1
if ! make -C tests/gpu -j"$(nproc)" fs >>"$OUT/build.log" 2>&1; then
	tail -20 "$OUT/build-top.log" "$OUT/build.log"
	echo "top-level build or tests/gpu fs failed: no mounted tests"
	topok=0
fi
echo "build: $(( $(date +%s) - T0 )) s"
$B/mkimage "$GS_GPU_IMAGE" "${GS_GPU_GIB:-4}" || exit 1
# cuFile without nvidia-fs: compat mode (POSIX reads inside libcufile)
export CUFILE_ENV_PATH_JSON=$PWD/tests/gpu/cufile.json CUFILE_FORCE_COMPAT_MODE=true
grep -nE "compat|\"logging\"|level" /etc/cufile.json >>"$OUT/machine.txt" 2>&1

rows=()
fail=0
# t NAME TIMEOUT CMD...: a test; its output goes to tests.log
t() {
	local name=$1 to=$2 s rc
	shift 2
	s=$(date +%s.%N)
	echo "== $name: $*" >>"$OUT/tests.log"
	timeout -k 5 "$to" "$@" >>"$OUT/tests.log" 2>&1
	rc=$?
	local secs
	secs=$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
	case $rc in
	0) rows+=("PASS  $name (${secs}s)") ;;
	77) rows+=("SKIP  $name") ;;
	124|137) rows+=("FAIL  $name (timeout ${to}s)"); fail=1 ;;
	*) rows+=("FAIL  $name (exit $rc)"); fail=1 ;;
	esac
	echo "${rows[-1]}"
}

if ! skip tests; then
	echo "== tests"
	t sysatomic 60 $B/t_sysatomic
	t cam 240 $B/t_cam
	t bam_ring 80 $B/t_bam ring
	t bam_nvme 80 $B/t_bam nvme
fi

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if ! skip sanitizer && [[ -x $SAN ]]; then
	echo "== compute-sanitizer"
	t memcheck_cam 60 "$SAN" --tool memcheck --error-exitcode 9 $B/t_cam 4 64 2 256 dev
	t memcheck_bam 60 "$SAN" --tool memcheck --error-exitcode 9 $B/t_bam ring 4 64 2 32
	t racecheck_cam 40 "$SAN" --tool racecheck --error-exitcode 9 $B/t_cam 2 32 1 256 dev
	t memcheck_bam_nvme 60 "$SAN" --tool memcheck --error-exitcode 9 $B/t_bam nvme 4 64 2 32
	t racecheck_bam 60 "$SAN" --tool racecheck --error-exitcode 9 $B/t_bam ring 4 64 2 32
	t racecheck_bam_nvme 60 "$SAN" --tool racecheck --error-exitcode 9 $B/t_bam nvme 4 64 2 32
fi

# ---- on a mounted gstore: two CUDA processes + cat, BFS over a stored graph
MNT=$PWD/$B/mnt
if [[ $topok == 1 ]] && ! skip fs; then
	echo "== mounted (gstorefs)"
	FSIMG=$PWD/$B/fs.img
	umount -l "$MNT" 2>/dev/null
	rm -f "$FSIMG"
	mkdir -p "$MNT"
	SCALE=${GS_BFS_SCALE:-20}
	{
		build/bin/gstore mkfs --size "${GS_FS_SIZE:-12G}" "$FSIMG" &&
		build/bin/gstore-graphbench gen --scale "$SCALE" --edge-factor 16 "$B/g.txt" &&
		/usr/bin/time -f "import: %e s" build/bin/gstore import graph g "$B/g.txt" \
			--image "$FSIMG" --undirected --cache 256M &&
		build/bin/gstore graph export-csr g --image "$FSIMG" --cache 256M &&
		$B/mkimage "$B/src.bin" 1 &&
		build/bin/gstorefs "$FSIMG" "$MNT" &&
		cp "$B/src.bin" "$MNT/arrays/big"
	} >"$OUT/fs.log" 2>&1
	echo "fs setup: exit $? ($(( $(date +%s) - T0 )) s)"
	ls -la "$MNT/arrays" "$(dirname "$MNT")" >>"$OUT/fs.log" 2>&1
	# gnn's check compares every row with mkimage's pattern: before the two t_attach
	# processes rewrite the file's last 128 blocks (run 2: its whole-table cases, whose
	# last row is the file's last, read those blocks' new contents and counted them bad)
	skip gnn || t gnn_attach 120 $B/gnn check-attach "$MNT/arrays/big"
	t attach_2proc_cat 150 bash tests/gpu/attach-multi.sh $B "$MNT/arrays/big" "$B/src.bin" "$OUT"
	t plain_mmap 60 $B/t_plain "$MNT/arrays/big"
	# attach with every block size gs_cuda_attach(3) allows, over an array whose extents
	# are not aligned to them (appends to two files taking turns: 12 KiB extents)
	{
		for i in $(seq 0 511); do
			dd if="$B/src.bin" bs=12k skip=$i count=1 status=none >>"$MNT/arrays/frag"
			head -c 12288 /dev/zero >>"$MNT/arrays/frag_other"
		done
		sync
	} >>"$OUT/fs.log" 2>&1
	for bs in 4096 65536 262144 1048576; do
		[[ " ${GS_GPU_SKIP:-} " == *" attach_bs "* ]] && break
		t attach_bs$((bs / 1024))k 90 $B/t_attach bs "$MNT/arrays/big" $bs
		t attach_frag_bs$((bs / 1024))k 90 $B/t_attach bs "$MNT/arrays/frag" $bs
	done
	t bfs 120 $B/t_bfs "$MNT/arrays/g.csr" "" "${GS_BFS_CACHE_MIB:-32}"
	t bfs_1056blk 120 $B/t_bfs "$MNT/arrays/g.csr" "" "${GS_BFS_CACHE_MIB:-32}" 1056
	grep -E "^q_|^cache" "$MNT/.gstore/stats" >>"$OUT/fs.log" 2>&1
	SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	if ! skip sanitizer && [[ -x $SAN ]]; then
		t memcheck_attach 120 "$SAN" --tool memcheck --error-exitcode 9 \
			$B/t_attach "$MNT/arrays/big" 2 4 64 2
	fi
	umount "$MNT" 2>/dev/null || fusermount3 -u "$MNT"
fi

# ---- the Python module (python/gstore): its own store and mount, ctypes over the .so files
if [[ $topok == 1 ]] && ! skip python; then
	echo "== python"
	if make -j"$(nproc)" build/libgstore.so build/libgstore_cuda.so >>"$OUT/build-top.log" 2>&1
	then
		t python 300 python3 tests/gpu/t_python.py build "$B"
	else
		tail -20 "$OUT/build-top.log"
		rows+=("FAIL  python (libgstore_cuda.so did not build)")
		fail=1
	fi
fi

# ---- graph objects on the GPU (t_graph: in-process over an image of its own): BFS, CC and
# sampling equal to the CPU engine's and gs_graph_sample's, sanitizers, the benchmark rows
if [[ $topok == 1 ]] && ! skip graph; then
	echo "== graph objects on the GPU"
	export GS_GRAPH_DIR=$PWD/$B
	t graph_check 300 $B/t_graph check
	SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	if ! skip sanitizer && [[ -x $SAN ]]; then
		t memcheck_graph 300 "$SAN" --tool memcheck --error-exitcode 9 $B/t_graph small
		t racecheck_graph 300 "$SAN" --tool racecheck --error-exitcode 9 $B/t_graph small
	fi
	t graph_bench "${GS_GRAPH_TIMEOUT:-400}" $B/t_graph bench "${GS_GRAPH_SCALE:-19}"
fi

# ---- graph objects on the GPU over a mounted store (t_graph_attach: gs_cuda_graph_attach through
# gstorefs's attach socket; updates through the mount, the sync point; results equal the CPU
# engine's before and after), the sampler's own cost (t_graph sample: warm caches vs the CPU,
# and beside a kernel holding every SM), the sanitizers over t_graph_attach's small graphs.
# All of it inside GS_GRAPH_ATTACH_TIMEOUT (45 s: each step gets its cap or what is left;
# racecheck last, when 8 s or more remain).
if [[ $topok == 1 ]] && ! skip graph_attach; then
	echo "== graph objects on the GPU, attached to a mount; the sampler"
	export GS_GRAPH_DIR=$PWD/$B
	umount "$GS_GRAPH_DIR/t_graph_attach.mnt" 2>/dev/null	# left by an earlier run
	ga_end=$(( $(date +%s) + ${GS_GRAPH_ATTACH_TIMEOUT:-45} ))
	ga_to() { local l=$(( ga_end - $(date +%s) )); echo $(( l < $1 ? (l > 1 ? l : 1) : $1 )); }
	t graph_attach "$(ga_to 20)" $B/t_graph_attach build/bin/gstorefs
	t graph_sampler "$(ga_to 12)" $B/t_graph sample 16
	SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	if [[ ! -x $SAN ]]; then
		echo "graph_attach: no compute-sanitizer" | tee -a "$OUT/tests.log"
	else
		(( $(ga_to 99) >= 6 )) && t memcheck_graph_attach "$(ga_to 14)" "$SAN" --tool memcheck \
			--error-exitcode 9 $B/t_graph_attach build/bin/gstorefs small
		if (( $(ga_to 99) >= 8 )); then
			t racecheck_graph_attach "$(ga_to 99)" "$SAN" --tool racecheck \
				--error-exitcode 9 $B/t_graph_attach build/bin/gstorefs small
		else
			echo "graph_attach: $(ga_to 99) s left: racecheck not run" | tee -a "$OUT/tests.log"
		fi
	fi
	grep -hE "^t_graph_attach: (FAIL|.*after the sync|.*synced)|^RESULT graph_(sample|scan)" \
		"$OUT/tests.log" | cut -c1-200
	umount "$GS_GRAPH_DIR/t_graph_attach.mnt" 2>/dev/null	# a step killed by its cap
fi

# ---- camtune (issue 15 item 4 and the GNN disk share), short: the gather's reads on every
# ring (gnn check), then raw and gstore interleaved in one process each (gnn disk: gather
# windows vs 64 pread threads, 2 and 1 gather streams; bench: CAM on the default rings and on
# 4, BaM through the rings, at 16/32/132 SMs), each ratio to the raw runs around it.  About
# 40 s of GPU time, all of it inside GS_CAMTUNE_TIMEOUT (45 s: each step gets what is left;
# memcheck on the gather kernels last, if 8 s or more remain);
# GS_CAMTUNE_SECS (0.3 s a bench run), GS_CAMTUNE_BUDGET_S (18: the bench's budget).  Over
# the run-all image (mkimage's pattern, 4 GiB = 1 M rows of 4 KiB), batches from gnn gen's
# synthetic power-law sampler (300 seeds, fanouts 10,5: ~12.5 K rows a batch).
if ! skip camtune; then
	echo "== camtune: gather on every ring; raw vs gstore interleaved"
	CT=$OUT/camtune.log
	ct_end=$(( $(date +%s) + ${GS_CAMTUNE_TIMEOUT:-45} ))
	# ct_to SECS: SECS, or what is left of the part's time if less
	ct_to() { local l=$(( ct_end - $(date +%s) )); echo $(( l < $1 ? (l > 1 ? l : 1) : $1 )); }
	t gnn_check_rings "$(ct_to 12)" $B/gnn check "$GS_GPU_IMAGE"
	# rows stop before the image's last 8192 blocks (WR_BLOCKS), where t_cam and t_bam write
	t gnn_disk_interleaved "$(ct_to 22)" bash -c '"$1" gen "$2" $(($(stat -c %s "$3") / 4096 - 8192)) \
		300 10,5 60 1 && "$1" disk "$3" "$2" 4096 3 0.8 gnn_disk' _ $B/gnn \
		$B/ct-batches.bat "$GS_GPU_IMAGE"
	t bench_interleaved "$(ct_to 24)" env GS_BENCH_BUDGET_S=${GS_CAMTUNE_BUDGET_S:-18} \
		GS_BENCH_ONLY="cpu cam bam" GS_BENCH_RAW_THREADS= GS_BENCH_ROUNDS=3 \
		$B/bench "${GS_CAMTUNE_SECS:-0.3}"
	# memcheck on the gather's kernels (gnn check quick), with what is left of the 45 s
	SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	if [[ ! -x $SAN ]]; then
		echo "camtune: no compute-sanitizer: memcheck_gather not run" | tee -a "$OUT/tests.log"
	elif (( $(ct_to 99) >= 8 )); then
		t memcheck_gather "$(ct_to 99)" "$SAN" --tool memcheck --error-exitcode 9 \
			$B/gnn check "$GS_GPU_IMAGE" quick
	else
		echo "camtune: $(ct_to 99) s left: memcheck_gather not run" | tee -a "$OUT/tests.log"
	fi
	# the part's figures on the console: rings used, the ratios and their spread
	sed -n '/^== gnn_check_rings/,$p' "$OUT/tests.log" >"$CT"
	grep -E -e "^(PASS|FAIL) check rb (4096|400) base 0 tier 0 MiB cache 0 MiB" \
		-e "ERROR SUMMARY" \
		-e "^RESULT (gnn_disk|raw_interleaved|camw|bam_ring)|^bench: [0-9]+ of" "$CT" |
		cut -c1-200
fi

if ! skip hot; then
	echo "== bench: hot cache (its own slot)"
	GS_BENCH_ONLY=hot timeout -k 5 "${GS_HOT_TIMEOUT:-90}" $B/bench "${GS_BENCH_SECS:-1}" \
		>"$OUT/bench-hot.log" 2>&1
	echo "bench hot: exit $?"
fi

if ! skip bench; then
	echo "== bench"
	if [[ -x build/bin/gstore-bench ]]; then
		nread=$(( ($(stat -c %s "$GS_GPU_IMAGE") / 4096 - 8192) * 4096 ))
		timeout -k 5 30 build/bin/gstore-bench io --file "$GS_GPU_IMAGE" --size $nread \
			--qd 64 --threads 4 --runtime 3 --warmup 1 --pollers 2 \
			>"$OUT/gstore-bench.log" 2>&1
		echo "gstore-bench io: exit $?"
	else
		echo "gstore-bench: not built (see build-top.log)" >"$OUT/gstore-bench.log"
	fi
	if [[ -n ${GS_GPU_SWEEP:-} && -x build/bin/gstore-bench ]]; then
		# the core alone over depths and pollers: where does it meet the disk's limit?
		# (u: no in-flight cap, a: the default cap, half the disk's queue)
		for p in 1 2; do
			for qd in $GS_GPU_SWEEP; do
				for cap in u a; do
					mi=0
					[[ $cap == u ]] && mi=4294967295
					r=$(timeout -k 5 20 build/bin/gstore-bench io --file "$GS_GPU_IMAGE" \
						--size $nread --qd $((qd / 4)) --threads 4 --runtime 2 \
						--warmup 0.5 --pollers $p --max-inflight $mi |
						grep RESULT | sed "s/^RESULT //")
					echo "RESULT core_p${p}_qd${qd}$cap $r"
				done
			done
		done | tee "$OUT/sweep.log"
	fi
	# the bench keeps to its own budget (GS_BENCH_BUDGET_S, 20 s under the timeout):
	# time-capped rows, and rows that would not fit skipped with a line saying so
	bto=${GS_BENCH_TIMEOUT:-150}
	GS_BENCH_BUDGET_S=${GS_BENCH_BUDGET_S:-$((bto - 20))} GS_BENCH_ONLY=${GS_BENCH_ONLY:-cpu cam bam} \
		timeout -k 5 "$bto" $B/bench "${GS_BENCH_SECS:-0.7}" >"$OUT/bench.log" 2>&1
	rc=$?
	echo "bench: exit $rc"
	case $rc in
	0) rows+=("PASS  bench (inside ${bto}s)") ;;
	124|137) rows+=("FAIL  bench (timeout ${bto}s)"); fail=1 ;;
	*) rows+=("FAIL  bench (exit $rc)"); fail=1 ;;
	esac
	tail -n 30 /tmp/cufile*.log >>"$OUT/bench.log" 2>/dev/null
fi

if ! skip gnn; then
	# the GNN mini-batch pipeline and its peers (bench/gnn-pipeline.sh: its own table)
	echo "== gnn pipeline"
	s=$(date +%s)
	OUT=$OUT B=$B timeout -k 5 "${GS_GNN_TIMEOUT:-480}" bash bench/gnn-pipeline.sh \
		>"$OUT/gnn-run.log" 2>&1
	rc=$?
	case $rc in
	0) rows+=("PASS  gnn_pipeline ($(( $(date +%s) - s ))s)") ;;
	124|137) rows+=("FAIL  gnn_pipeline (timeout)"); fail=1 ;;
	*) rows+=("FAIL  gnn_pipeline (exit $rc)"); fail=1 ;;
	esac
	echo "${rows[-1]}"
fi

{
	echo
	echo "==== gstore GPU path: $(nvidia-smi -L | head -1), $(( $(date +%s) - T0 )) s"
	grep -hE -e "^(t_sysatomic|cam|bam|get|set|flush|check|t_attach|t_bfs|t_plain|[0-9]+ cats|cat |no cat)" \
		-e "^((PASS|FAIL)  python|t_python)" \
		-e "^t_graph: (FAIL|PASS|bench)" -e "^t_graph_attach: (FAIL|PASS|.*: after the sync)" \
		"$OUT/tests.log" 2>/dev/null | grep -vE "^(cam|bam): core" | cut -c1-400
	printf '%s\n' "${rows[@]}"
	[[ -f $OUT/gstore-bench.log ]] && tail -4 "$OUT/gstore-bench.log" | sed 's/^/gstore-bench io: /'
	grep -hE "^RESULT" "$OUT/tests.log" "$OUT/bench-hot.log" "$OUT/bench.log" \
		"$OUT/sweep.log" 2>/dev/null |
		cut -c8-130
	[[ -f $OUT/gnn-summary.txt ]] && cat "$OUT/gnn-summary.txt"
} | tee "$OUT/summary.txt"
exit $fail
