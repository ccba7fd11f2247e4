#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Graph objects (GraphSSD layout) against the CSR baseline, same graph, same
# image, same block cache budget (O_DIRECT underneath), same worker threads,
# alternating in one process (bin/gstore-graphbench.c): random-vertex
# neighbour queries (queries/s, device pages/query), BFS, CC, on-disk size.
# Also the big import: an R-MAT graph of >= 50 M edges (time, peak memory).
#
#   bench/graph-vs-csr.sh [DIR]
#
# Env: SCALE (22: 4 M vertices, 67 M edges) for the import and the queries;
# APP_SCALE (20) for BFS/CC; EF (16) edge factor; CACHE (64M) for queries,
# APP_CACHE (16M) for the apps; THREADS (16); QUERIES (200000); RUNS (3);
# BFS (2 sources); PHASES ("import queries apps"); KEEP=1 reuses DIR's image
# and edge lists; SLACK (10, the import's default: % of each page kept free for
# delta merges; 0 packs a graph that will not be updated).  Output: DIR/graph-vs-csr.txt (and stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
DIR=${1:-${DIR:-/var/tmp/gstore-graphbench}}
SCALE=${SCALE:-22}
APP_SCALE=${APP_SCALE:-20}
EF=${EF:-16}
CACHE=${CACHE:-64M}
APP_CACHE=${APP_CACHE:-16M}
THREADS=${THREADS:-16}
QUERIES=${QUERIES:-200000}
RUNS=${RUNS:-3}
BFS=${BFS:-2}
SLACK=${SLACK:-10}
PHASES=${PHASES:-import queries apps}
GSTORE=$B/bin/gstore
BENCH=$B/bin/gstore-graphbench
[[ -x $GSTORE && -x $BENCH ]] || { echo "graph-vs-csr: build first (make)"; exit 1; }
mkdir -p "$DIR"
IMG=$DIR/graph.img
OUT=$DIR/graph-vs-csr.txt
exec > >(tee -a "$OUT") 2>&1
echo "== graph-vs-csr $(date -u +%FT%TZ) on $(uname -n): $(nproc) cpus, $(free -g | awk '/Mem/ {print $2}') GiB"
echo "   SCALE=$SCALE APP_SCALE=$APP_SCALE EF=$EF SLACK=$SLACK CACHE=$CACHE APP_CACHE=$APP_CACHE THREADS=$THREADS RUNS=$RUNS"

gen() {	# gen SCALE FILE
	[[ ${KEEP:-0} == 1 && -s $2 ]] && return 0
	/usr/bin/time -f "gen: %e s" "$BENCH" gen --scale "$1" --edge-factor "$EF" "$2"
}

import() {	# import NAME FILE
	echo "+ $GSTORE import graph $1 $2 --image $IMG --undirected --cache 64M --slack $SLACK"
	/usr/bin/time -f "import: %e s wall, %U s user, peak RSS %M KiB" \
		"$GSTORE" import graph "$1" "$2" --image "$IMG" --undirected --cache 64M \
		--slack "$SLACK" --force
	echo "+ $GSTORE graph export-csr $1 --image $IMG"
	"$GSTORE" graph export-csr "$1" --image "$IMG" --cache 64M
}

if [[ ${KEEP:-0} != 1 || ! -f $IMG ]]; then
	rm -f "$IMG"
	"$GSTORE" mkfs --size "$(((EF * 40 + 64) << SCALE))" "$IMG" >/dev/null
fi

for phase in $PHASES; do
	case $phase in
	import)
		gen "$SCALE" "$DIR/rmat$SCALE.txt"
		ls -l "$DIR/rmat$SCALE.txt"
		import "rmat$SCALE" "$DIR/rmat$SCALE.txt"
		"$GSTORE" graph info "rmat$SCALE" --image "$IMG" --cache 16M
		;;
	queries)
		echo "+ $BENCH run $IMG rmat$SCALE --cache $CACHE --line-size 4096 --threads $THREADS --queries $QUERIES --runs $RUNS --bfs 0 --no-cc"
		"$BENCH" run "$IMG" "rmat$SCALE" --cache "$CACHE" --line-size 4096 --threads "$THREADS" \
			--queries "$QUERIES" --runs "$RUNS" --bfs 0 --no-cc
		;;
	apps)
		gen "$APP_SCALE" "$DIR/rmat$APP_SCALE.txt"
		import "rmat$APP_SCALE" "$DIR/rmat$APP_SCALE.txt" >/dev/null
		echo "+ $BENCH run $IMG rmat$APP_SCALE --cache $APP_CACHE --line-size 4096 --threads $THREADS --queries $QUERIES --runs $RUNS --bfs $BFS"
		"$BENCH" run "$IMG" "rmat$APP_SCALE" --cache "$APP_CACHE" --line-size 4096 \
			--threads "$THREADS" --queries "$QUERIES" --runs "$RUNS" --bfs "$BFS"
		;;
	*)
		echo "unknown phase $phase"; exit 2 ;;
	esac
done
