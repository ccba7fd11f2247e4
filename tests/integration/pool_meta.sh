#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Metadata on two members in every layout: on a 2-member stripe pool (data
# has one copy), the objects' metadata that is stored as data (an N-D
# space's index, a graph's root slots and translation table) is placed in
# the mirrored zone, so with member 0 failing every I/O each space's info
# and each graph's info still read; the data whose only copy was on member
# 0 is EIO (pool_degraded.sh).  Ten of each, with 40 KiB files between them,
# so single-copy placement would have put some on member 0.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
command -v setfattr >/dev/null || skip "no setfattr"
GS_POOL="2 stripe 16K" gs_init 64M
cd "$T"
gs_mount
for ((i = 0; i < 10; i++)); do
	mkdir "$MNT/graph/g$i" "$MNT/nd/n$i" || fail "mkdir $i"
	printf '0 1\n1 2\n2 3\n3 0\n' >"$MNT/graph/g$i/edges" || fail "edges $i"
	setfattr -n user.gstore.shape -v 64x64 "$MNT/nd/n$i" &&
		setfattr -n user.gstore.dtype -v f32 "$MNT/nd/n$i" || fail "nd format $i"
	head -c 40K /dev/urandom >"$MNT/arrays/pad$i"
done
grep -q "^vertices: 4" "$MNT/graph/g9/info" || fail "graph info: $(cat "$MNT/graph/g9/info")"
for ((i = 0; i < 10; i++)); do cp "$MNT/nd/n$i/info" "$T/nd$i.info" || fail "nd info $i"; done
gs_umount

gs_mount -o fault=m0:every=1
for ((i = 0; i < 10; i++)); do
	cat "$MNT/graph/g$i/info" >"$T/g.out" 2>&1 || { cat "$T/g.out"; fail "graph g$i info"; }
	grep -q "^vertices: 4" "$T/g.out" || { cat "$T/g.out"; fail "graph g$i: vertices"; }
	cat "$MNT/nd/n$i/info" >"$T/n.out" 2>&1
	cmp -s "$T/n.out" "$T/nd$i.info" || { cat "$T/n.out"; fail "nd n$i info lost with member 0"; }
done
cat "$MNT"/arrays/pad* >/dev/null 2>&1 && fail "no data on member 0: the test proves nothing"
grep -q "^pool_state: degraded" "$MNT/.gstore/info" || fail "not degraded"
gs_umount
ok "N-D indexes and graph translation tables survive a stripe member"
