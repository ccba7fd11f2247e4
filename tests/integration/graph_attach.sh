#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Graph objects through the attach socket (op GRAPH, what gs_cuda_graph_attach uses):
# the daemon hands out a graph's device layout in a sealed memfd and binds the read
# leases on its pages to the connection's rings; a CPU client (attach_client graph)
# reads every live page through a ring at the layout's device offsets and decodes
# every vertex's list as the GPU kernels do: the same lists as the mount's v<ID>/
# files. Updates written through the mount (and merged through ctl, or not; and with
# `gstore graph update|merge --mount`) show in
# the next GRAPH (the sync point of gs_cuda_graph_sync: a new layout generation),
# equal to the mount again; a directed graph's in-lists too. GRAPH refuses what is
# not a graph, and an empty graph.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
ATT=$GS_BUILD/tests/helpers/attach_client
[[ -x $ATT ]] || skip "build first (no $ATT)"
gs_init 256M
REF="$PY $GS_ROOT/tests/helpers/graphref.py"
gs_mount -o cache=32M

# OUT GRAPHDIR DIRECTED: attach_client's lists equal the mount's, vertex by vertex
same_as_mount() {
	$PY - "$1" "$2" "$3" <<'PY'
import os, struct, sys
out, d, directed = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
lists, removed = {}, set()
for l in open(out):
    head, _, rest = l.partition(':')
    t = head.split()
    if len(t) == 3 and t[2] == 'removed':
        removed.add(int(t[1]))
        continue
    lists[(int(t[0]), int(t[1]))] = [int(x) for x in rest.split()]
nv = max(v for _, v in lists) + 1
nonempty = 0
for v in range(nv):
    p = '%s/v%d/' % (d, v)
    if v in removed:
        try:    # gone (a dentry cached from before may still be found: then no list)
            left = open(p + 'neighbors.txt').read().split()
        except OSError:
            left = []
        assert not left, 'removed vertex %d still has neighbours on the mount' % v
        continue
    want = [int(x) for x in open(p + 'neighbors.txt').read().split()]
    assert lists[(0, v)] == want, (v, lists[(0, v)][:8], want[:8])
    nonempty += len(want) > 0
    if directed:
        raw = open(p + 'in_neighbors', 'rb').read()
        want = list(struct.unpack('<%dI' % (len(raw) // 4), raw))
        assert lists[(1, v)] == want, ('in', v, lists[(1, v)][:8], want[:8])
print('%d vertices (%d with lists, %d removed) equal' % (nv, nonempty, len(removed)))
PY
}
gen_of() { sed -n 's/^graph gen \([0-9]*\):.*/\1/p' "$1"; }

# ---- an undirected graph whose hubs span several pages (varint lists)
D=$MNT/graph/u
mkdir "$D" || fail "mkdir graph/u"
$REF gen "$T/u.txt" 1500 9000 5 --hubs 3 --hubdeg 2500 || fail gen
printf 'undirected\n' >"$D/ctl" && cp "$T/u.txt" "$D/edges" || fail "build graph/u"
"$ATT" graph "$D" "$T/u1" >"$T/u1.log" 2>&1 || { cat "$T/u1.log" >&2; fail "GRAPH u"; }
cat "$T/u1.log"
same_as_mount "$T/u1" "$D" 0 || fail "graph/u through the ring differs from the mount"
ok "GRAPH: every list read through a ring at the layout's offsets equals the mount's"

# ---- updates through the mount, not merged: the next GRAPH merges and shows them
$PY - "$T/u1" >"$T/upd" <<'PY'
import sys
nb = {}
for l in open(sys.argv[1]):
    head, _, rest = l.partition(':')
    t = head.split()
    if len(t) == 2:
        nb[int(t[1])] = set(int(x) for x in rest.split())
nv = max(nb) + 1
n = 0
for v in range(nv - 1, 0, -7):      # far vertices joined to 0 and 1
    for u in (0, 1):
        if v not in nb[u] and v != u and n < 40:
            print('+ %d %d' % (u, v))
            n += 1
print('-v 5')
PY
cat "$T/upd" >"$D/updates" || fail "write updates"
"$ATT" graph "$D" "$T/u2" >"$T/u2.log" 2>&1 || { cat "$T/u2.log" >&2; fail "GRAPH u again"; }
g1=$(gen_of "$T/u1.log") g2=$(gen_of "$T/u2.log")
[[ -n $g1 && -n $g2 && $g2 -gt $g1 ]] || fail "layout generation $g1 -> $g2 after updates"
cmp -s "$T/u1" "$T/u2" && fail "the updates are not in the new layout"
same_as_mount "$T/u2" "$D" 0 || fail "graph/u after updates differs from the mount"
grep -q "^0 5 removed" "$T/u2" || fail "vertex 5 is not removed in the layout"
ok "updates through the mount: generation $g1 -> $g2, the new layout equals the mount"

# ---- a directed, weighted graph, fixed-width lists; updates merged through ctl first
D=$MNT/graph/d
mkdir "$D" || fail "mkdir graph/d"
$REF gen "$T/d.txt" 800 5000 6 --hubs 2 --hubdeg 1500 || fail gen
awk '{ print $1, $2, ($1 + $2) % 7 + 0.5 }' "$T/d.txt" >"$T/dw.txt"
printf 'directed\nweighted\nfixed\n' >"$D/ctl" && cp "$T/dw.txt" "$D/edges" ||
	fail "build graph/d"
"$ATT" graph "$D" "$T/d1" >"$T/d1.log" 2>&1 || { cat "$T/d1.log" >&2; fail "GRAPH d"; }
same_as_mount "$T/d1" "$D" 1 || fail "graph/d (out and in lists) differs from the mount"
# an edge 3 -> V and V -> 4 that the graph lacks, V far from both
V=$($PY - "$T/d1" <<'PY'
import sys
out = {}
for l in open(sys.argv[1]):
    head, _, rest = l.partition(':')
    t = head.split()
    if len(t) == 2 and t[0] == '0':
        out[int(t[1])] = set(int(x) for x in rest.split())
print(next(v for v in range(max(out), 10, -1) if v not in out[3] and 4 not in out[v]))
PY
) || fail "pick an edge"
# through gstore graph on the mount: update (graph/d/updates) and merge (its ctl)
printf '+ 3 %d 1\n+ %d 4 2\n' "$V" "$V" >"$T/dupd"
"$GSTORE" graph update d "$T/dupd" --mount "$MNT" || fail "gstore graph update --mount"
"$GSTORE" graph update d "$T/dupd" --mount "$MNT" 2>"$T/dup.err" &&
	fail "gstore graph update of edges that exist succeeded"
grep -q "File exists" "$T/dup.err" || fail "update of existing edges: $(cat "$T/dup.err")"
"$GSTORE" graph merge d --mount "$MNT" || fail "gstore graph merge --mount"
"$ATT" graph "$D" "$T/d2" >"$T/d2.log" 2>&1 || { cat "$T/d2.log" >&2; fail "GRAPH d again"; }
same_as_mount "$T/d2" "$D" 1 || fail "graph/d after a merge differs from the mount"
grep -qE "^0 3:.* $V( |\$)" "$T/d2" && grep -qE "^1 $V:.* 3( |\$)" "$T/d2" ||
	fail "the merged edge 3 -> $V is not in the new layout's out- and in-lists"
ok "directed graph: out- and in-lists, gstore graph update + merge --mount, equal to the mount"

# ---- refusals
mkdir "$MNT/graph/empty" || fail "mkdir graph/empty"
expect_fail() {	# WANT-ERRNO-TEXT PATH
	"$ATT" graph "$2" "$T/x" >"$T/x.log" 2>&1 && fail "GRAPH $2 succeeded"
	grep -q "$1" "$T/x.log" || fail "GRAPH $2: $(cat "$T/x.log"), want $1"
}
echo data >"$MNT/arrays/f"
expect_fail "Invalid argument" "$MNT/arrays/f"
expect_fail "Is a directory" "$MNT/arrays"
expect_fail "No data available" "$MNT/graph/empty"
ok "GRAPH refuses an array, a directory and an empty graph"
gs_umount
