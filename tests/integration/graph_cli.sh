#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Graphs through the CLI on an unmounted image: every import format,
# directed and undirected, weighted and not (hubs larger than a page,
# isolated vertices, duplicates, loops); the canonical edge list against
# the reference model after import, updates, merge and errors; bfs and cc
# against reference implementations, on the pages and on the CSR baseline.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
REF="$PY $GS_ROOT/tests/helpers/graphref.py"
[[ -x $GSTORE ]] || skip "build first (no $GSTORE)"
T=$(mktemp -d "${TMPDIR:-/tmp}/gstore-graph.XXXXXX")
trap 'rm -rf "$T"' EXIT
IMG=$T/img
"$GSTORE" mkfs --size 256M "$IMG" >/dev/null || fail mkfs
G() { "$GSTORE" graph "$@" --image "$IMG" --cache 16M; }

n=0
for fmt in text mtx sg wsg; do
	for dir in 0 1; do
		for w in 0 1; do
			[[ $fmt == sg && $w == 1 ]] && continue
			[[ $fmt == wsg && $w == 0 ]] && continue
			n=$((n + 1))
			name=g$n
			flags=() gflags=()
			[[ $dir == 1 ]] && { flags+=(--directed); gflags+=(--directed); } ||
				flags+=(--undirected)
			[[ $w == 1 ]] && { flags+=(--weighted); gflags+=(--weighted); } ||
				flags+=(--unweighted)
			$REF gen "$T/in.$fmt" 3000 9000 $n --format $fmt "${gflags[@]}" ||
				fail "gen $fmt"
			"$GSTORE" import graph $name "$T/in.$fmt" --image "$IMG" --cache 16M "${flags[@]}" \
				>/dev/null || fail "import $fmt dir=$dir w=$w"
			$REF canon "$T/in.$fmt" $fmt $dir $w >"$T/want" || fail canon
			G edges $name >"$T/got" || fail "edges $name"
			cmp -s "$T/want" "$T/got" || fail "$fmt dir=$dir w=$w: edge list differs"
		done
	done
done
ok "$n imports equal the reference (text, mtx, sg, wsg; directed, undirected, weighted)"

# fixed-width lists (the coding of graphs built before varint lists) read the same
"$GSTORE" import graph fx "$T/in.text" --image "$IMG" --cache 16M --directed --weighted \
	--fixed-lists >/dev/null || fail "import --fixed-lists"
$REF canon "$T/in.text" text 1 1 >"$T/want" || fail canon
G edges fx >"$T/got" || fail "edges fx"
cmp -s "$T/want" "$T/got" || fail "--fixed-lists: edge list differs"
fx=$(G info fx | awk '/^pages:/ {print $2}')
vi=$(G info g4 | awk '/^pages:/ {print $2}')
[[ -n $fx && -n $vi && $vi -lt $fx ]] || fail "coded lists should take fewer pages ($vi vs $fx)"
ok "fixed-width lists equal the reference; coded lists take $vi pages, fixed $fx"

# updates, merge, more updates (in the delta), errors change nothing
cp "$T/in.text" "$T/base" 2>/dev/null || true
$REF gen "$T/base.txt" 2000 8000 77 --weighted || fail gen
"$GSTORE" import graph u "$T/base.txt" --image "$IMG" --undirected --weighted \
	--chain-max 4 >/dev/null || fail "import u"
$REF canon "$T/base.txt" text 0 1 >"$T/c0"
$REF updates "$T/c0" 0 1 400 1 "$T/up1" || fail updates
G update u "$T/up1" >/dev/null || fail "update 1"
$REF canon "$T/base.txt" text 0 1 "$T/up1" >"$T/want"
G edges u >"$T/got"
cmp -s "$T/want" "$T/got" || fail "after updates: edge list differs"
G merge u >/dev/null || fail merge
G edges u >"$T/got"
cmp -s "$T/want" "$T/got" || fail "after merge: edge list differs"
$REF updates "$T/want" 0 1 400 2 "$T/up2" || fail updates
G update u "$T/up2" >/dev/null || fail "update 2"
$REF canon "$T/base.txt" text 0 1 "$T/up1" "$T/up2" >"$T/want"
G edges u >"$T/got"
cmp -s "$T/want" "$T/got" || fail "after more updates: edge list differs"
printf '+ 0 1 1\n- 0 999999\n' >"$T/bad"
G update u "$T/bad" 2>"$T/err" && fail "a bad update batch was accepted"
grep -q "line 2" "$T/err" || fail "no line number: $(cat "$T/err")"
G edges u >"$T/got"
cmp -s "$T/want" "$T/got" || fail "a failed batch changed the graph"
printf '0 1\n1 2 x\n' >"$T/bad.txt"
"$GSTORE" import graph u "$T/bad.txt" --image "$IMG" --force --weighted 2>"$T/err" &&
	fail "bad import"
grep -q "line 2" "$T/err" || fail "no line number: $(cat "$T/err")"
G edges u >"$T/got"
cmp -s "$T/want" "$T/got" || fail "a failed import changed the graph"
ok "updates, merge, errors"

# apps against references, on pages and on the CSR baseline
nv=$(G info g2 | sed -n 's/^vertices: //p')
$REF canon "$T/in.text" text 1 0 >/dev/null 2>&1
"$GSTORE" import graph d "$T/base.txt" --image "$IMG" --directed --unweighted >/dev/null
$REF canon "$T/base.txt" text 1 0 >"$T/cd"
nv=$(G info d | sed -n 's/^vertices: //p')
G export-csr d >/dev/null || fail export-csr
$REF bfs "$T/cd" 1 5 "$nv" >"$T/want"
for csr in "" --csr; do
	G bfs d --source 5 --threads 3 $csr --out "$T/got" >/dev/null || fail "bfs $csr"
	cmp -s "$T/want" "$T/got" || fail "bfs depths differ $csr"
done
$REF cc "$T/cd" "$nv" >"$T/want"
for csr in "" --csr; do
	G cc d --threads 3 $csr --out "$T/got" >/dev/null || fail "cc $csr"
	cmp -s "$T/want" "$T/got" || fail "cc labels differ $csr"
done
G pagerank d --iters 5 --out "$T/p1" >/dev/null || fail pagerank
G pagerank d --iters 5 --csr --out "$T/p2" >/dev/null || fail "pagerank csr"
$PY - "$T/p1" "$T/p2" <<'PY' || fail "pagerank on pages and on CSR differ"
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < 1e-9
PY
G mis d --seed 3 --out "$T/m1" >/dev/null || fail mis
G randomwalk d --walks 50 --length 8 --out "$T/w1" >/dev/null || fail randomwalk
# k-hop sampling (gs_graph_sample): deterministic for a seed, every pick an edge
seeds=$(seq 1 40)
G sample d $seeds --fanouts 5,3 --seed 9 --out "$T/s1" >/dev/null || fail sample
G sample d $seeds --fanouts 5,3 --seed 9 --out "$T/s2" >/dev/null || fail "sample again"
cmp -s "$T/s1" "$T/s2" || fail "sample is not deterministic"
G edges d >"$T/de" || fail "edges d"
awk 'NR == FNR { e[$1 " " $2] = 1; next } !(($2 " " $3) in e) { bad++ }
     END { exit bad > 0 || NR == FNR }' "$T/de" "$T/s1" || fail "a sampled pair is not an edge"
G sample d 1 --fanouts 0 --out "$T/s3" 2>/dev/null && fail "fanout 0 accepted"
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail "fsck after all that"
ok "bfs, cc, pagerank, mis, randomwalk, sample; CSR baseline agrees; fsck clean"
