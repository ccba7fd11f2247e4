#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `gstore import graph` through a mount as a user meets it: a malformed file
# fails with the parser's own "line N: ..." (the same words as --image) and
# leaves no graph/NAME behind; a failed --force keeps the old graph; a bad
# list copied into edges fails close(2) and info says why; every format
# (.sg and .wsg included) and every option reach the daemon's build.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 512M
REF="$PY $GS_ROOT/tests/helpers/graphref.py"
IMP() { "$GSTORE" import graph "$@"; }
# edges is generated text with st_size 0 (cmp would stop at the sizes)
same() { diff -q "$1" "$2" >/dev/null; }

# the same errors, with their line numbers, through --image and --mount
printf '1 2\nfoo bar\n' >"$T/l.el"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 1\n' >"$T/bad.mtx"
printf '0 1 1.5\n1 2 x\n' >"$T/w.el"
IMP b "$T/l.el" --image "$IMG" 2>"$T/e.img" && fail "--image accepted a bad edge list"
IMP m "$T/bad.mtx" --image "$IMG" 2>>"$T/e.img" && fail "--image accepted a bad mtx"
IMP w "$T/w.el" --weighted --image "$IMG" 2>>"$T/e.img" && fail "--image accepted a bad weight"
gs_mount
IMP b "$T/l.el" --mount "$MNT" 2>"$T/e.mnt" && fail "--mount accepted a bad edge list"
IMP m "$T/bad.mtx" --mount "$MNT" 2>>"$T/e.mnt" && fail "--mount accepted a bad mtx"
IMP w "$T/w.el" --weighted --mount "$MNT" 2>>"$T/e.mnt" && fail "--mount accepted a bad weight"
grep -q "line 2: bad source vertex id 'foo'" "$T/e.mnt" || fail "no parser message: $(cat "$T/e.mnt")"
grep -q "line 4: entry (4, 1) outside the 3 x 3 matrix" "$T/e.mnt" ||
	fail "no mtx message: $(cat "$T/e.mnt")"
diff "$T/e.img" "$T/e.mnt" || fail "--mount and --image report differently"
[[ -z $(ls "$MNT/graph") ]] || fail "failed imports left $(ls "$MNT/graph") behind"
ok "a failed import through the mount says line and reason, as --image does, and leaves nothing"

# a failed --force keeps the graph it was to replace
$REF gen "$T/in.txt" 500 2000 5 || fail gen
IMP g "$T/in.txt" --mount "$MNT" --undirected >/dev/null || fail "import g"
$REF canon "$T/in.txt" text 0 0 >"$T/want"
same "$T/want" "$MNT/graph/g/edges" || fail "graph g differs from the reference"
IMP g "$T/l.el" --mount "$MNT" --force 2>"$T/e" && fail "a bad --force import succeeded"
grep -q "line 2: bad source" "$T/e" || fail "--force: $(cat "$T/e")"
same "$T/want" "$MNT/graph/g/edges" || fail "a failed --force changed graph g"
IMP g "$T/in.txt" --mount "$MNT" 2>"$T/e" && fail "an existing graph was replaced without --force"
grep -q "exists" "$T/e" || fail "no 'exists': $(cat "$T/e")"
# shell users: close(2) fails, info tells why, the next good build clears it
cp "$T/l.el" "$MNT/graph/g/edges" 2>/dev/null && fail "cp of a bad list into edges succeeded"
grep -q "^build_error: line 2: bad source vertex id 'foo'" "$MNT/graph/g/info" ||
	fail "info has no build_error: $(cat "$MNT/graph/g/info")"
same "$T/want" "$MNT/graph/g/edges" || fail "a failed cp changed graph g"
cp "$T/in.txt" "$MNT/graph/g/edges" || fail "cp of a good list"
grep -q "^build_error" "$MNT/graph/g/info" && fail "build_error stays after a good build"
ok "a failed --force or cp into edges changes nothing; info's build_error says why"

# an import cut short builds nothing of what it sent: Ctrl-C leaves no
# graph/NAME, kill -9 an empty one (the daemon drops what a writer that
# never fsynced wrote)
mkfifo "$T/fifo"
for sig in INT KILL; do
	"$GSTORE" import graph cut$sig "$T/fifo" --format text --mount "$MNT" 2>"$T/e$sig" &
	pid=$!
	exec 3>"$T/fifo"
	head -c 200000 "$T/in.txt" >&3	# whole lines and then some: a plausible graph
	sleep 0.3
	kill -$sig $pid
	wait $pid 2>/dev/null && fail "an import killed by SIG$sig succeeded"
	exec 3>&-
done
grep -q "interrupted; nothing imported" "$T/eINT" || fail "Ctrl-C: $(cat "$T/eINT")"
[[ -e $MNT/graph/cutINT ]] && fail "Ctrl-C left graph/cutINT behind"
grep -q "^vertices: 0" "$MNT/graph/cutKILL/info" ||
	fail "kill -9: the partial list was built: $(cat "$MNT/graph/cutKILL/info")"
rmdir "$MNT/graph/cutKILL" || fail "rmdir the empty graph"
ok "an interrupted import builds nothing (Ctrl-C: no graph/NAME; kill -9: an empty one)"

# every format and option reaches the daemon's build
n=0
for fmt in text mtx sg wsg; do
	for dir in 0 1; do
		n=$((n + 1))
		flags=() gflags=()
		w=0
		[[ $fmt == wsg || $fmt == mtx ]] && { w=1; gflags+=(--weighted); }
		[[ $dir == 1 ]] && gflags+=(--directed)
		$REF gen "$T/in.$fmt" 800 3000 $n --format $fmt "${gflags[@]}" || fail "gen $fmt"
		[[ $dir == 1 ]] && flags+=(--directed) || flags+=(--undirected)
		[[ $w == 1 ]] && flags+=(--weighted) || flags+=(--unweighted)
		IMP f$n "$T/in.$fmt" --mount "$MNT" "${flags[@]}" >"$T/out" ||
			fail "import $fmt dir=$dir through the mount"
		grep -q "^graph/f$n: .* vertices" "$T/out" || fail "no summary: $(cat "$T/out")"
		$REF canon "$T/in.$fmt" $fmt $dir $w >"$T/want" || fail canon
		same "$T/want" "$MNT/graph/f$n/edges" || fail "$fmt dir=$dir: edge list differs"
	done
done
IMP o "$T/in.txt" --mount "$MNT" --slack 30 --chain-max 7 --vertices 900 --id64 \
	--fixed-lists >/dev/null || fail "import with options"
I=$MNT/graph/o/info
grep -qx "slack_pct: 30" "$I" && grep -qx "chain_max: 7" "$I" && grep -qx "vertices: 900" "$I" &&
	grep -qx "id_bytes: 8" "$I" || fail "options did not reach the build: $(cat "$I")"
IMP o2 "$T/in.txt" --mount "$MNT" --mem 64M 2>/dev/null && fail "--mem through a mount"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail fsck
ok "$n imports through the mount (text, mtx, sg, wsg) equal the reference; options reach the daemon"
