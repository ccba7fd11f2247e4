#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/pool-scale.sh still runs, in every mode (gs_q and the mount, device
# model and real disk), at the smallest size: every row has numbers.  A smoke
# test of the benchmark, no timing checked (docs/PERF.md has the figures).
# serial: runs fio and the I/O benchmark
# matrix: no (the benchmark mounts by itself)
# timeout: 200
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_fuse
command -v fio >/dev/null || skip "no fio"
T=$(mktemp -d "${TMPDIR:-/tmp}/gstore-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
B=$GS_BUILD MEMBERS="1 2" RUNTIME=1 WARMUP=0 SIZE=256M FSIZE=16M MODEL=20000:200:100 \
	"$GS_ROOT/bench/pool-scale.sh" "$T/b" >"$T/out" 2>&1 || { cat "$T/out"; fail "pool-scale.sh"; }
cat "$T/out"
for what in "gs_q, model" "mount, model" "mount, real disk"; do
	grep -q "^== $what" "$T/out" || fail "no section $what"
done
rows=$(grep -cE '^[12] +[0-9]+ +[0-9.]+x +[0-9]+ +[0-9.]+x$' "$T/out")
[[ $rows -eq 6 ]] || fail "$rows rows with numbers, want 6"
ok "pool-scale.sh: 3 sections x 2 pool sizes"
