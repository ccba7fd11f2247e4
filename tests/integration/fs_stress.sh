#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stress-ng's filesystem class on a gstorefs mount, one stressor at a time,
# briefly: whatever the stressors do, the daemon stays up, unmounts cleanly
# and leaves a clean file system.  (Stressors may report failures for
# operations gstore does not offer, e.g. symlinks; that is not a daemon bug.)
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
command -v stress-ng >/dev/null || skip "no stress-ng"
gs_init 2G
gs_mount
A=$MNT/arrays
mkdir "$A/stress"
chmod 777 "$A/stress"
cd "$A/stress"	# some stressors create files in the working directory
# not about this mount: bind-mount/binderfs (namespaces), procfs (/proc)
timeout -k 5 150 stress-ng --class filesystem --seq 1 --timeout 2 --temp-path "$A/stress" \
	--exclude bind-mount,binderfs,procfs --metrics-brief >"$T/stress.out" 2>&1
rc=$?
tail -15 "$T/stress.out"
echo "stress-ng exit $rc"
[[ $rc == 124 || $rc == 137 ]] && fail "stress-ng hung"
gs_alive || { tail -20 "$T/gstorefs.log"; fail "daemon died under stress-ng"; }
ls "$A" >/dev/null || fail "mount unusable"
echo after >"$A/after" && [[ $(cat "$A/after") == after ]] || fail "I/O after stress"
cd "$T"
rm -rf "$A/stress"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck after stress"; }
ok "daemon survived stress-ng --class filesystem"
