#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make bench`: every benchmark against its peer, one after the other, each in
# the same run as its peer.  Results go to bench/out/NAME.log; docs/PERF.md
# records the figures and the exact commands.  Run it on a quiet machine:
# the ratios are what we track, and a busy CPU skews them.
#
#   bench/run-all.sh [NAME...]    NAME: io fuse nd graph qemu-nvme (default: all)
#
# The GPU benchmarks need the GPU machine: tests/gpu/run-all.sh (docs/PERF.md).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
all=(io fuse nd graph qemu-nvme)
sel=("$@")
[[ ${#sel[@]} -eq 0 ]] && sel=("${all[@]}")
declare -A script=([io]=io-vs-fio.sh [fuse]=fuse-vs-passthrough.sh [nd]=nd-vs-hdf5.sh
		   [graph]=graph-vs-csr.sh [qemu-nvme]=qemu-nvme.sh)
rc=0
for b in "${sel[@]}"; do
	s=${script[$b]:-}
	[[ -n $s ]] || { echo "unknown benchmark '$b' (one of: ${all[*]})" >&2; exit 2; }
	echo "=== $b: bench/$s (log: bench/out/$b.log)"
	if ! bash "bench/$s" 2>&1 | tee "bench/out/$b.log"; then
		echo "=== $b: failed" >&2
		rc=1
	fi
done
exit $rc
