#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# graph/NAME/ through the mount: mkdir makes a graph, an edge list written
# into edges builds it (a bad one fails close() and changes nothing), the
# v<ID>/ files answer like the reference, updates apply or fail whole,
# fsync makes them durable, ctl merges, all of it survives a remount; and
# kill -9 of the daemon during merges leaves a graph equal to the reference.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 256M
REF="$PY $GS_ROOT/tests/helpers/graphref.py"
gs_mount -o cache=32M
D=$MNT/graph/g

mkdir "$D" || fail "mkdir graph/g"
grep -q "vertices: 0" "$D/info" || fail "an empty graph's info: $(cat "$D/info")"
ls "$D" | sort | tr '\n' ' ' | grep -q "^ctl edges info updates $" || fail "listing: $(ls "$D")"
$REF gen "$T/in.txt" 3000 12000 3 --weighted || fail gen
printf 'undirected\nweighted\n' >"$D/ctl" || fail "ctl settings"
cp "$T/in.txt" "$D/edges" || fail "write edges"
$REF canon "$T/in.txt" text 0 1 >"$T/want"
same() {	# edges is generated text with st_size 0 (as in /proc): compare by content
	diff -q "$T/want" "$D/edges" >/dev/null
}
same || fail "edges reads back differently"
grep -q "^directed: no" "$D/info" && grep -q "^weighted: yes" "$D/info" || fail "info"
ok "mkdir + edges build, canonical edge list reads back"

# per-vertex files against the reference (hubs span pages)
nv=$(sed -n 's/^vertices: //p' "$D/info")
$PY - "$T/want" "$D" "$nv" <<'PY' || fail "v<ID>/ files differ from the reference"
import os, struct, sys
adj = {}
for l in open(sys.argv[1]):
    t = l.split()
    u, v, w = int(t[0]), int(t[1]), float(t[2])
    adj.setdefault(u, {})[v] = w
    adj.setdefault(v, {})[u] = w
d = sys.argv[2]
hubs = sorted(adj, key=lambda u: -len(adj[u]))[:3]
for u in hubs + [0, 1, 7, 100, int(sys.argv[3]) - 1]:
    nb = sorted(adj.get(u, {}))
    p = '%s/v%d/' % (d, u)
    assert [int(x) for x in open(p + 'neighbors.txt').read().split()] == nb, u
    raw = open(p + 'neighbors', 'rb').read()
    assert list(struct.unpack('<%dI' % (len(raw) // 4), raw)) == nb, u
    ws = open(p + 'weights', 'rb').read()
    got = struct.unpack('<%df' % len(nb), ws)
    want = [struct.unpack('f', struct.pack('f', adj[u][v]))[0] for v in nb]
    assert list(got) == want, u
    assert int(open(p + 'degree').read()) == len(nb), u
    assert open(p + 'in_neighbors', 'rb').read() == raw, u
    assert os.path.getsize(p + 'neighbors') == 4 * len(nb), u
print('hub degrees', [len(adj[h]) for h in hubs])
PY
[[ -e $D/v$nv ]] && fail "v$nv exists past the vertices"
[[ -e $D/v12x ]] && fail "v12x exists"
ls "$D" | grep -q '^v' && fail "v<ID> directories are listed"
# gstore(5) and gstore(7): no such vertex ENOENT, malformed EINVAL, too large ERANGE
$PY - "$D" "$nv" <<'PY' || fail "v<ID> lookups fail with the documented errno"
import errno, os, sys
d, nv = sys.argv[1], int(sys.argv[2])
for name, want in (("v%d" % nv, errno.ENOENT), ("v%d" % (nv + 1000), errno.ENOENT),
                   ("vx", errno.ENOENT), ("v12x", errno.EINVAL), ("v007", errno.EINVAL),
                   ("v99999999999999999999999", errno.ERANGE)):
    try:
        os.stat(os.path.join(d, name))
    except OSError as e:
        assert e.errno == want, (name, e.errno, want)
        continue
    raise SystemExit("%s exists" % name)
PY
ok "v<ID>/neighbors, neighbors.txt, weights, degree, in_neighbors; ENOENT past |V|"

# updates: all or nothing per write, visible at once
$REF updates "$T/want" 0 1 300 1 "$T/up1" || fail updates
cat "$T/up1" >>"$D/updates" || fail "append updates"
$REF canon "$T/in.txt" text 0 1 "$T/up1" >"$T/want"
same || fail "updates not visible"
# one write(2) is one batch (bash's printf writes line by line: use cat)
printf '+ 0 1 1\n- 0 999999\n' >"$T/bad"
cat "$T/bad" >>"$D/updates" 2>/dev/null && fail "a bad batch was accepted"
same || fail "a failed batch changed something"
$PY - "$D/updates" <<'PY' || fail "fsync on updates"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.fsync(fd)
os.close(fd)
PY
echo merge >"$D/ctl" || fail "ctl merge"
grep -q "^merges: 1" "$D/info" || fail "no merge in info"
same || fail "merge changed the edges"
printf '0 1\n1 x y\n' >"$T/bad.txt"
$PY - "$T/bad.txt" "$D/edges" <<'PY' || fail "a bad edge list did not fail close()"
import os, sys
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_TRUNC)
os.write(fd, open(sys.argv[1], 'rb').read())
try:
    os.close(fd)
except OSError:
    sys.exit(0)
sys.exit(1)
PY
same || fail "a bad edge list changed the graph"
ok "updates (visible, all or nothing, fsync), ctl merge, bad edges fail close"

gs_umount
gs_mount -o cache=32M
same || fail "after remount"
ok "remount"

# kill -9 of the daemon during merges
kills=0
prev=$T/up1
ups=("$T/up1")
for ((c = 2; c <= 12; c++)); do
	$REF updates "$T/want" 0 1 800 $c "$T/up$c" || fail updates
	cat "$T/up$c" >"$D/updates" || fail "updates $c"	# closing syncs
	ups+=("$T/up$c")
	$REF canon "$T/in.txt" text 0 1 "${ups[@]}" >"$T/want"
	(echo merge >"$D/ctl") 2>/dev/null &
	sleep "0.0$((RANDOM % 10))"
	gs_kill9
	wait
	kills=$((kills + 1))
	gs_mount -o cache=32M
	same || fail "kill -9 cycle $c: the graph differs"
done
gs_umount
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail "fsck"
ok "$kills daemon kills during merges: the graph equals the reference each time"
