#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# N-D spaces against a row-major plain file (pread, one request per row
# segment) and HDF5 chunked (chunk = gstore's building block), same data,
# same run, cold caches, O_DIRECT where the peer can (see bench/nd_bench.c).
#
#   bench/nd-vs-hdf5.sh [DIR]
#
# Env: ROWS (32768) x COLS (16384) f64 = 4 GiB by default; RUNS (3); SCAN
# (2048 rows per row scan); BB (gstore block shape override, e.g. 256x256;
# default: from the device, NDS eq. 1); KEEP=1 reuses the files of an
# earlier run (no write phase); B (build dir).  Needs libhdf5-dev
# (scripts/deps.sh) and about 3.3x the space's size free in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
DIR=${1:-${DIR:-/var/tmp/gstore-ndbench}}
ROWS=${ROWS:-32768}
COLS=${COLS:-16384}
RUNS=${RUNS:-3}
SCAN=${SCAN:-2048}

pkg-config --exists hdf5-serial 2>/dev/null || command -v h5cc >/dev/null ||
	{ echo "nd-vs-hdf5: skip: libhdf5-dev not installed (scripts/deps.sh)"; exit 77; }
[[ -f $B/libgstore.a ]] || { echo "nd-vs-hdf5: $B/libgstore.a missing (make first)"; exit 1; }
mkdir -p "$DIR" "$B/bench"
need=$((ROWS * COLS * 8 * 33 / 10))
free=$(($(df -P -B1 "$DIR" | awk 'NR == 2 { print $4 }')))
if [[ ${KEEP:-0} != 1 && $free -lt $need ]]; then
	echo "nd-vs-hdf5: skip: $DIR has $((free >> 30)) GiB free, needs $((need >> 30)) GiB"
	exit 77
fi

# the HDF5 peer: pkg-config hdf5-serial (Debian), else h5cc's flags
if pkg-config --exists hdf5-serial; then
	H5FLAGS=$(pkg-config --cflags --libs hdf5-serial)
else
	H5FLAGS="$(h5cc -showconfig | sed -n 's/^ *AM_CPPFLAGS: //p') -lhdf5"
fi
CC=${CC:-cc}
cmd=($CC -O2 -g -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Iuapi -Ilib
     bench/nd_bench.c -o "$B/bench/nd_bench" "$B/libgstore.a" $H5FLAGS -luring -lm
     -pthread)
echo "build: ${cmd[*]}"
"${cmd[@]}"

args=("$DIR" --rows "$ROWS" --cols "$COLS" --runs "$RUNS" --scan "$SCAN")
[[ -n ${BB:-} ]] && args+=(--bb "$BB")
[[ ${KEEP:-0} == 1 ]] && args+=(--keep)
echo "run: $B/bench/nd_bench ${args[*]}"
echo "machine: $(nproc) CPUs, $(uname -r), $(df -P "$DIR" | awk 'NR == 2 { print $1 }')"
"$B/bench/nd_bench" "${args[@]}"
