#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Imports in bounded memory.  Sparse vertex ids cost what the vertices
# cost, not what the largest id would: one-edge lists with ids 2^32-1,
# 2^35-1 and 2^40 import with a small peak RSS (the CLI's, and the
# daemon's through a mount) into 2-vertex graphs whose v<ID>/ files
# answer; a random graph with its ids scattered over 2^33..2^63 equals the
# reference in its edge list, bfs and cc (also on the CSR baseline), after
# updates and a merge, and through a mount.  A hub of 2M neighbours
# imports within the sort budget (--mem) plus a few MiB.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 512M
REF="$PY $GS_ROOT/tests/helpers/graphref.py"
G() { "$GSTORE" graph "$@" --image "$IMG" --cache 16M; }
same() { diff -q "$1" "$2" >/dev/null; }	# edges has st_size 0: not cmp
# peak RSS of a command, KiB (GNU time when there, else bash's own rusage)
maxrss() {
	if [[ -x /usr/bin/time ]]; then
		/usr/bin/time -f "%M" -o "$T/rss" "$@" >/dev/null || return 1
		tail -1 "$T/rss"
	else
		"$PY" -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r.returncode)' "$@"
	fi
}
LIMIT=$((100 << 10))	# KiB

for id in 4294967295 34359738367 1099511627776; do
	printf '%s 3\n' $id >"$T/one.el"
	rss=$(maxrss "$GSTORE" import graph g$id "$T/one.el" --image "$IMG" --cache 16M) ||
		fail "import of '$id 3'"
	((rss < LIMIT)) || fail "'$id 3': peak RSS $rss KiB"
	G info g$id >"$T/info" || fail "info g$id"
	grep -qx "vertices: 2" "$T/info" && grep -qx "id_map: yes" "$T/info" ||
		fail "'$id 3' is not a 2-vertex graph: $(cat "$T/info")"
	expect 3 G neighbors g$id $id
	expect "$id" G neighbors g$id 3 --in
	ok "'$id 3': 2 vertices, peak RSS $((rss >> 10)) MiB"
done
G neighbors g1099511627776 2 >/dev/null 2>&1 && fail "vertex 2 of '2^40 3' answered"

# streaming: a list far larger than --mem goes out a page group at a time
"$PY" -c 'import sys
sys.stdout.write("".join("7 %d\n" % v for v in range(1, 2000001)))' >"$T/hub.el"
rss=$(maxrss "$GSTORE" import graph hub "$T/hub.el" --directed --mem 4M --image "$IMG" \
	--cache 16M) || fail "import of the hub"
((rss < 40 << 10)) || fail "a 2M-neighbour hub with --mem 4M: peak RSS $rss KiB"
G info hub | grep -qx "edges: 2000000" || fail "hub: $(G info hub)"
ok "a 2M-neighbour hub (19 MB of text) with --mem 4M: peak RSS $((rss >> 10)) MiB"
rm -f "$T/hub.el"

# dense ids on request (--vertices 2^40): no bit per vertex, and the edge
# list is read in the time its pages take, not 2^40 steps
printf '5 7\n1000000000 3\n1000000001 2\n' >"$T/v.el"
rss=$(maxrss "$GSTORE" import graph v "$T/v.el" --vertices 1099511627776 --image "$IMG" \
	--cache 16M) || fail "import with --vertices 2^40"
((rss < LIMIT)) || fail "--vertices 2^40: peak RSS $rss KiB"
G info v | grep -qx "vertices: 1099511627776" || fail "v: $(G info v)"
G edges v >"$T/got" || fail "edges v"
printf '5 7\n1000000000 3\n1000000001 2\n' | cmp -s - "$T/got" || fail "edges v: $(cat "$T/got")"
ok "2^40 dense vertices: peak RSS $((rss >> 10)) MiB, edge list read page by page"

# a random graph, its ids scattered (order scrambled) far above its size
$REF gen "$T/d.txt" 3000 12000 7 || fail gen
$REF remap "$T/d.txt" "$T/s.txt" || fail remap
"$GSTORE" import graph s "$T/s.txt" --directed --image "$IMG" --cache 16M >/dev/null ||
	fail "import s"
G info s | grep -qx "id_map: yes" || fail "s has no id map"
$REF canon "$T/s.txt" text 1 0 >"$T/cs" || fail canon
G edges s >"$T/got" || fail "edges s"
cmp -s "$T/cs" "$T/got" || fail "sparse graph: edge list differs"
src=$(head -1 "$T/cs" | cut -d' ' -f1)
$REF bfs "$T/cs" 1 "$src" ids >"$T/want" || fail "ref bfs"
G export-csr s >/dev/null || fail "export-csr"
for csr in "" --csr; do
	G bfs s --source "$src" --threads 3 $csr --out "$T/got" >/dev/null || fail "bfs $csr"
	cmp -s "$T/want" "$T/got" || fail "bfs on sparse ids differs $csr"
done
$REF cc "$T/cs" ids >"$T/want" || fail "ref cc"
for csr in "" --csr; do
	G cc s --threads 3 $csr --out "$T/got" >/dev/null || fail "cc $csr"
	cmp -s "$T/want" "$T/got" || fail "cc on sparse ids differs $csr"
done
G pagerank s --iters 3 >/dev/null || fail pagerank
G mis s --out "$T/m" >/dev/null || fail mis
G randomwalk s --walks 20 --out "$T/w" >/dev/null || fail randomwalk
grep -qv '^[0-9]\{1,8\}\( \|$\)' "$T/w" || fail "walks are not on the graph's ids: $(head -2 "$T/w")"
ok "sparse ids: edge list, bfs and cc equal the reference (pages and CSR); apps run"

$REF updates "$T/cs" 1 0 500 3 "$T/up" sparse || fail updates
printf '+v 5\n+ 5 %s\n' "$src" >>"$T/up"	# a new vertex below every imported id
G update s "$T/up" >/dev/null || fail "update s"
$REF canon "$T/s.txt" text 1 0 "$T/up" | sort >"$T/want"
G edges s | sort >"$T/got"
cmp -s "$T/want" "$T/got" || fail "after updates: edge list differs"
G merge s >/dev/null || fail merge
G edges s | sort >"$T/got"
cmp -s "$T/want" "$T/got" || fail "after merge: edge list differs"
expect "$src" G neighbors s 5
ok "sparse ids: updates (a new id among them), merge"

# through a mount: the daemon's memory, the files by id
gs_mount -o cache=32M
hwm() { sed -n 's/^VmHWM: *\([0-9]*\) kB/\1/p' "/proc/$GS_PID/status"; }
before=$(hwm)
printf '1099511627776 3\n' >"$T/one.el"
"$GSTORE" import graph m "$T/one.el" --mount "$MNT" >/dev/null || fail "import through the mount"
after=$(hwm)
((after - before < LIMIT)) || fail "the daemon grew by $((after - before)) KiB"
D=$MNT/graph/m
"$PY" - "$D" <<'PY' || fail "v<ID>/ files of a sparse graph"
import errno, os, struct, sys
d = sys.argv[1]
big = 1099511627776
assert open('%s/v%d/neighbors' % (d, big), 'rb').read() == struct.pack('<Q', 3)
assert open('%s/v%d/neighbors.txt' % (d, big)).read() == '3\n'
assert open('%s/v3/in_neighbors' % d, 'rb').read() == struct.pack('<Q', big)
assert open('%s/v3/degree' % d).read() == '0\n'
for v in (2, 0, big - 1, big + 1):
    try:
        os.stat('%s/v%d' % (d, v))
        raise SystemExit('v%d exists' % v)
    except OSError as e:
        assert e.errno == errno.ENOENT, (v, e.errno)
PY
grep -qx "vertices: 2" "$D/info" || fail "info: $(cat "$D/info")"
"$GSTORE" import graph ms "$T/s.txt" --directed --mount "$MNT" >/dev/null || fail "import ms"
same "$T/cs" "$MNT/graph/ms/edges" || fail "sparse graph through the mount differs"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail fsck
ok "through the mount: daemon grew $(((after - before) >> 10)) MiB, v<ID>/ by id, edges equal"
