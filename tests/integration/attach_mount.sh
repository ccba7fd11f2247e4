#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The attach socket of a live gstorefs (uapi/gstore_attach.h), as CUDA programs use
# it, with CPU clients (tests/helpers/attach_client): two clients read an
# array through rings served by the daemon's pollers while `cat` reads the
# same file through the mount; a client writes blocks, FLUSHes and SYNCs, and
# the mount (page cache included) shows the new data; the socket goes away
# with the mount.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
ATT=$GS_BUILD/tests/helpers/attach_client
[[ -x $ATT ]] || skip "build first (no $ATT)"
gs_init 1G
cp "$ATT" "$T/bin/" && ATT=$T/bin/attach_client
gs_mount
A=$MNT/arrays
SOCK=$(dirname "$MNT")/.$(basename "$MNT").gstore.sock
[[ -S $SOCK ]] || fail "no attach socket $SOCK"
ok "socket $SOCK"

# ---- reads: 24 MiB + 1000 bytes (a partial last block), written through the mount
head -c $((24 * 1048576 + 1000)) /dev/urandom >"$T/src"
cp "$T/src" "$A/a" || fail "copy into the mount"
# read it once so that cat runs from the page cache too, then drop nothing:
# the ring readers must see the device copy the daemon wrote at OPEN
cmp "$T/src" "$A/a" || fail "mount copy differs"
for round in 1 2; do
	"$ATT" read "$A/a" "$T/r1" >"$T/c1.log" 2>&1 &
	p1=$!
	"$ATT" read "$A/a" "$T/r2" >"$T/c2.log" 2>&1 &
	p2=$!
	for i in 1 2 3; do cat "$A/a" >"$T/cat$i" || fail "cat $i"; done
	wait $p1 || { cat "$T/c1.log" >&2; fail "client 1 (round $round)"; }
	wait $p2 || { cat "$T/c2.log" >&2; fail "client 2 (round $round)"; }
	cmp "$T/src" "$T/r1" || fail "client 1 read differs (round $round)"
	cmp "$T/src" "$T/r2" || fail "client 2 read differs (round $round)"
	for i in 1 2 3; do cmp "$T/src" "$T/cat$i" || fail "cat $i differs (round $round)"; done
done
ok "two ring clients and cat read the same $(stat -c %s "$A/a") bytes"

# ---- a file written by an earlier mount's cache: still dirty in the daemon
# until OPEN writes it out (gs_fs_fsync in do_open)
head -c 1048576 /dev/urandom >"$T/src2"
dd if="$T/src2" of="$A/b" bs=64k status=none || fail "write b"
"$ATT" read "$A/b" "$T/rb" >/dev/null || fail "read b through a ring"
cmp "$T/src2" "$T/rb" || fail "ring read of a just-written file differs"
ok "ring read sees data still in the daemon's cache"

# ---- write + FLUSH + SYNC through a ring, read back through the mount
head -c $((40 * 4096)) /dev/urandom >"$T/w"
"$ATT" write "$A/a" "$T/w" 100 >"$T/cw.log" 2>&1 || { cat "$T/cw.log" >&2; fail "ring write"; }
cp "$T/src" "$T/want"
dd if="$T/w" of="$T/want" bs=4096 seek=100 conv=notrunc status=none
# the same open-once file (page cache kept across opens) and a fresh O_DIRECT read
cmp "$T/want" "$A/a" || fail "mount shows stale data after a ring write + SYNC"
dd if="$A/a" of="$T/direct" bs=1M iflag=direct status=none || fail "O_DIRECT read"
cmp "$T/want" "$T/direct" || fail "O_DIRECT read differs after a ring write"
"$ATT" read "$A/a" "$T/r3" >/dev/null || fail "ring read after write"
cmp "$T/want" "$T/r3" || fail "ring read after the write differs"
ok "ring write + SYNC visible through the mount"

# ---- and on the device after a remount (the write was flushed, not cached)
gs_umount
[[ -e $SOCK ]] && fail "socket left behind after unmount"
gs_mount
cmp "$T/want" "$A/a" || fail "ring write lost across a remount"
"$ATT" read "$MNT/graph" "$T/x" 2>/dev/null && fail "OPEN of a directory succeeded"
gs_umount
ok "persists across a remount; socket removed with the mount"
