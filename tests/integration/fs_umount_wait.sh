#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 300
# serial: loads the disk on purpose and checks the exit bound of gstorefs(8)
#
# Unmount under disk load (issue 14, item 6).  umount(2) returns before the
# daemon has written its cache back; until it exits it holds the image, and
# a new mount or an fsck right after the umount used to fail "in use".
#   1. With much more written than the dirty limit and a writer loading the
#      same disk, the daemon reports at most the limit to write back and is
#      gone within the bound gstorefs(8) states; fsck right after succeeds.
#   2. A new gstorefs of the image, started while the old daemon still holds
#      it, waits for it (and says so) and mounts; the data is there.
#   3. The same for fsck.
# In 2 and 3 the old daemon is stopped (SIGSTOP) for a moment around the
# umount (which needs nothing from it), so the waiter surely finds it there.
. "$(dirname "$0")/../helpers/gsmount.sh"

gs_init 3G
LOAD=
load_stop() {
	[[ -n $LOAD ]] || return 0
	kill -- -"$LOAD" 2>/dev/null
	wait "$LOAD" 2>/dev/null
	LOAD=
}
trap 'load_stop; gs_cleanup' EXIT

# Another writer on the image's disk, in its own session (killed as a group),
# bounded in time and in space (it rewrites 256 MiB).
load_start() {
	local flags="oflag=direct conv=notrunc"

	[[ -n $GS_MNT_OPTS ]] && flags="conv=notrunc,fsync"	# no O_DIRECT here
	setsid timeout 120 bash -c "while :; do dd if=/dev/zero of='$T/load' bs=1M count=256 \
		$flags status=none || exit; done" &
	LOAD=$!
}

# fill NAME MIB SEED: write MIB MiB of a pattern to arrays/NAME, no fsync
fill() {
	"$PY" - "$MNT/arrays/$1" "$2" "$3" <<'EOF' || fail "write $1"
import sys, numpy as np
path, mib, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "wb") as f:
    for i in range(mib):
        f.write(np.full(1 << 18, seed * 1000 + i, dtype=np.uint32).tobytes())
EOF
}

# check NAME MIB SEED: the pattern reads back
check() {
	"$PY" - "$MNT/arrays/$1" "$2" "$3" <<'EOF' || fail "$1 does not read back"
import sys, numpy as np
path, mib, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = np.fromfile(path, dtype=np.uint32).reshape(mib, 1 << 18)
want = seed * 1000 + np.arange(mib, dtype=np.uint32)
sys.exit(0 if a.shape[0] == mib and (a == want[:, None]).all() else 1)
EOF
}

# umount_only: the umount alone; the daemon goes on exiting as $OLD
umount_only() {
	gs_detach
	OLD=$GS_PID
	GS_PID=
}

# reap_old: the old daemon's exit status must be 0
reap_old() {
	kill -CONT "$OLD" 2>/dev/null
	wait "$OLD" || { cat "$T/gstorefs.log" >&2; fail "the old daemon exited $?"; }
}

DIRTY_MIB=64
CACHE=1G
# gstorefs(8): gone within 10 s + 1 s per 10 MiB of the dirty limit (a disk
# writing 10 MiB/s or more under its load)
BOUND=$((10 + DIRTY_MIB / 10))

# ---- 1. the bound, under load ----
gs_mount -o "cache=$CACHE,dirty=${DIRTY_MIB}M"
fill big 384 1
load_start
t0=$EPOCHREALTIME
umount_only
while kill -0 "$OLD" 2>/dev/null; do
	sleep 0.05
	awk -v s="$t0" -v e="$EPOCHREALTIME" -v b="$BOUND" 'BEGIN { exit !(e - s > b + 30) }' &&
		fail "the daemon still runs $((BOUND + 30)) s after its umount"
done
took=$(awk -v s="$t0" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }')
"$GSTORE" fsck -n "$IMG" >"$T/fsck1.out" 2>&1 || { cat "$T/fsck1.out" >&2; fail "fsck after the umount"; }
reap_old
load_stop
left=$(sed -n 's/.*unmounted; writing back \([0-9]*\) MiB.*/\1/p' "$T/gstorefs.log")
[[ -n $left ]] || { cat "$T/gstorefs.log" >&2; fail "the daemon did not say what it had left to write"; }
grep -q "written back and released after" "$T/gstorefs.log" || fail "no release report"
ok "384 MiB written, $left MiB left at umount (limit $DIRTY_MIB MiB), gone after $took s (bound $BOUND s)"
# counting is sampled: a few MiB past the limit may be seen
[[ $left -le $((DIRTY_MIB + 32)) ]] || fail "$left MiB dirty at umount, limit $DIRTY_MIB MiB"
awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }' || fail "gone after $took s: past the bound, $BOUND s"

# ---- 2. a new mount waits for the old daemon ----
gs_mount -o "cache=$CACHE"
check big 384 1
fill second 64 2
load_start
kill -STOP "$GS_PID"
umount_only
"$GSTOREFS" -f "$IMG" "$MNT" -o "cache=$CACHE${GS_MNT_OPTS:+,$GS_MNT_OPTS}" 2>"$T/mount2.log" &
GS_PID=$!
sleep 6		# past the quiet first seconds of a wait (fs/lockwait.c): it says so
kill -0 "$GS_PID" || { cat "$T/mount2.log" >&2; fail "the new gstorefs gave up"; }
[[ -f $MNT/.gstore/info ]] && fail "mounted while the old daemon held the image"
reap_old
for ((i = 0; i < 600; i++)); do
	[[ -f $MNT/.gstore/info ]] && break
	kill -0 "$GS_PID" 2>/dev/null || break
	sleep 0.1
done
[[ -f $MNT/.gstore/info ]] || { cat "$T/mount2.log" >&2; fail "the new mount did not come"; }
GS_MOUNTED=1
grep -q "waiting for it to finish" "$T/mount2.log" ||
	{ cat "$T/mount2.log" >&2; fail "the new gstorefs did not say it waits"; }
grep -q "released after" "$T/mount2.log" || fail "the new gstorefs did not say when it got the image"
ok "a new mount waited for the exiting daemon: $(grep -m1 'released after' "$T/mount2.log")"
check big 384 1
check second 64 2
load_stop

# ---- 3. fsck waits for the old daemon ----
fill third 64 3
load_start
kill -STOP "$GS_PID"
umount_only
"$GSTORE" fsck -f -n "$IMG" >"$T/fsck3.out" 2>&1 &
fpid=$!
sleep 6
kill -0 "$fpid" 2>/dev/null || { cat "$T/fsck3.out" >&2; fail "fsck did not wait"; }
reap_old
wait "$fpid" || { cat "$T/fsck3.out" >&2; fail "fsck after waiting: exit $?"; }
grep -q "waiting for it to finish" "$T/fsck3.out" ||
	{ cat "$T/fsck3.out" >&2; fail "fsck did not say it waits"; }
ok "fsck waited for the exiting daemon and found the image clean"
load_stop

# a mounted image is still refused at once, not waited for
gs_mount
start=$EPOCHREALTIME
"$GSTORE" fsck -n "$IMG" >"$T/fsck4.out" 2>&1 && fail "fsck of a mounted image"
grep -q "mounted at" "$T/fsck4.out" || { cat "$T/fsck4.out" >&2; fail "fsck: no 'mounted at'"; }
m2=$T/mnt2
mkdir -p "$m2"
"$GSTOREFS" -f "$IMG" "$m2" 2>"$T/mount4.log" && fail "a second mount of a mounted image"
grep -q "is mounted at" "$T/mount4.log" || { cat "$T/mount4.log" >&2; fail "mount: no 'mounted at'"; }
awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { exit !(e - s < 30) }' ||
	fail "refusing a mounted image took 30 s or more"
gs_umount
ok "a mounted image is refused at once"
