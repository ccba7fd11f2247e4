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
# GS_GPU_SKIP ("bench sanitizer ..." to leave parts out).
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
skip() { [[ " ${GS_GPU_SKIP:-} " == *" $1 "* ]]; }
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
} >"$OUT/machine.txt" 2>&1

echo "== build"
if ! make -C tests/gpu -j"$(nproc)" >"$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log"
	echo "build failed"
	exit 1
fi
echo "build: $(( $(date +%s) - T0 )) s"
# the core's own I/O benchmark (bin/gstore-bench, top-level build) in the background
( mkdir -p build/bin && make -j"$(nproc)" build/bin/gstore-bench >"$OUT/build-top.log" 2>&1 ) &
topbuild=$!
$B/mkimage "$GS_GPU_IMAGE" "${GS_GPU_GIB:-4}" || exit 1

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

echo "== tests"
t sysatomic 60 $B/t_sysatomic
t cam 240 $B/t_cam
t bam_ring 100 $B/t_bam ring
t bam_nvme 100 $B/t_bam nvme

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if ! skip sanitizer && [[ -x $SAN ]]; then
	echo "== compute-sanitizer"
	t memcheck_cam 60 "$SAN" --tool memcheck --error-exitcode 9 $B/t_cam 4 64 2 256 dev
	t memcheck_bam 60 "$SAN" --tool memcheck --error-exitcode 9 $B/t_bam ring 4 64 2 32
	t racecheck_cam 40 "$SAN" --tool racecheck --error-exitcode 9 $B/t_cam 2 32 1 256 dev
fi

if ! skip bench; then
	echo "== bench"
	wait $topbuild
	if [[ -x build/bin/gstore-bench ]]; then
		nread=$(( ($(stat -c %s "$GS_GPU_IMAGE") / 4096 - 8192) * 4096 ))
		timeout -k 5 30 build/bin/gstore-bench io --file "$GS_GPU_IMAGE" --size $nread \
			--qd 64 --threads 4 --runtime 3 --warmup 1 --pollers 2 \
			>"$OUT/gstore-bench.log" 2>&1
		echo "gstore-bench io: exit $?"
	else
		echo "gstore-bench: not built (see build-top.log)" >"$OUT/gstore-bench.log"
	fi
	timeout -k 5 "${GS_BENCH_TIMEOUT:-150}" $B/bench "${GS_BENCH_SECS:-1}" >"$OUT/bench.log" 2>&1
	echo "bench: exit $?"
fi

{
	echo
	echo "==== gstore GPU path: $(nvidia-smi -L | head -1), $(( $(date +%s) - T0 )) s"
	grep -hE "^(t_sysatomic|cam|bam|get|set|flush|check)" "$OUT/tests.log" | grep -vE "^(cam|bam): core" | cut -c1-400
	printf '%s\n' "${rows[@]}"
	[[ -f $OUT/gstore-bench.log ]] && tail -4 "$OUT/gstore-bench.log" | sed 's/^/gstore-bench io: /'
	[[ -f $OUT/bench.log ]] && grep -E "^RESULT" "$OUT/bench.log" | cut -c8-130
} | tee "$OUT/summary.txt"
exit $fail
