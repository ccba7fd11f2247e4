#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs on a full device: writes fail with ENOSPC, the daemon lives,
# nothing written before is lost (also after a remount), space comes back.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 64M
gs_mount
A=$MNT/arrays

$FSOPS pwrite "$A/keep" 0 4194304 21 && sync "$A/keep" || fail "write keep"
mkdir "$A/dir"
echo small >"$A/dir/small"
sync "$A/dir/small"
out=$($FSOPS fill "$A/fill")
echo "$out"
[[ $out == *errno=ENOSPC* ]] || fail "fill ended with '$out', not ENOSPC"
gs_alive || fail "daemon died at ENOSPC"
echo more >"$A/more" 2>/dev/null	# may fail too: just must not crash
mkdir "$A/d2" 2>/dev/null
$FSOPS verify "$A/keep" 0 4194304 21 || fail "keep changed at ENOSPC"
[[ $(cat "$A/dir/small") == small ]] || fail "small changed"
df -B1 --output=avail "$MNT" | tail -1 | grep -qx '[0-9]*' || fail "df"
gs_umount
gs_mount
$FSOPS verify "$A/keep" 0 4194304 21 || fail "keep changed after remount"
[[ $(cat "$A/dir/small") == small ]] || fail "small changed after remount"
filled=$(stat -c %s "$A/fill")
rm "$A/fill"
$FSOPS pwrite "$A/again" 0 $((filled / 2)) 22 && sync "$A/again" ||
	fail "space not reclaimed after rm ($filled bytes)"
$FSOPS verify "$A/again" 0 $((filled / 2)) 22 || fail "again"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck"; }
ok "ENOSPC with nothing lost"
