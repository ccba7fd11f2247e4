#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# N-D spaces through gstorefs, checked against numpy (tests/helpers/nd_check.py):
# random spaces 1-D..5-D with element sizes 1..8 and partial edge blocks,
# random slices / NDS blocks / views read and written (raw and .npy), .npy
# files loaded by numpy with the right dtype and shape, everything again after
# a remount, a 3-D producer read by 2-D tile and 1-D row consumers, a sparse
# 1 TiB space, malformed requests failing with nothing written, and find /
# ls -R of a space whose listed building blocks are partial at the edges
# (every listed file opens and reads numpy's bytes; numpy's 0-d slices).
# timeout: 300
. "$(dirname "$0")/../helpers/gsmount.sh"
"$PY" -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed"
gs_init 1G
CHECK="$PY $GS_ROOT/tests/helpers/nd_check.py"
STATE=$T/state
mkdir -p "$STATE"

gs_mount -o cache=64M
$CHECK "$MNT" "$STATE" create "${ND_SEED:-1}" || fail "random spaces (ND_SEED=${ND_SEED:-1})"
$CHECK "$MNT" "$STATE" views || fail "producer/consumer views"
$CHECK "$MNT" "$STATE" sparse || fail "sparse space"
$CHECK "$MNT" "$STATE" errors || fail "errors"
$CHECK "$MNT" "$STATE" tree || fail "find / ls -R of a space"
gs_umount

gs_mount -o cache=64M
$CHECK "$MNT" "$STATE" verify || fail "after remount"
# a space removed gives its blocks back
rmdir "$MNT/nd/cube" || fail "rmdir nd/cube"
[[ ! -e $MNT/nd/cube ]] || fail "nd/cube still there"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck after nd I/O"; }
ok "N-D spaces through FUSE"
