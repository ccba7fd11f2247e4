#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Attach with every block size gs_cuda_attach(3) allows (4 KiB to 1 MiB) on
# files whose extents are aligned to the filesystem's 4 KiB blocks only: a
# fragmented array (two files appended to in turns, 12 KiB at a time) and
# one copied in one go (its extents start anywhere a 4 KiB block may), each
# with a partial last block.  The client opens as gs_cuda_attach() does
# (gs_attach_open_blocks) and reads each block as the GPU lanes would, one
# request per device run (gs_cam_piece); every byte must equal the source.
# Before, OPEN with a 64 KiB unit failed with EINVAL on such files.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
ATT=$GS_BUILD/tests/helpers/attach_client
[[ -x $ATT ]] || skip "build first (no $ATT)"
gs_init 1G
cp "$ATT" "$T/bin/" && ATT=$T/bin/attach_client
gs_mount
A=$MNT/arrays

head -c $((3 * 1048576)) /dev/urandom >"$T/src"
for i in $(seq 0 255); do
	dd if="$T/src" bs=12k skip=$i count=1 status=none >>"$A/frag" || fail "append $i"
	head -c 12288 /dev/zero >>"$A/other" || fail "append other $i"
done
head -c 1000 /dev/urandom >>"$T/src"
tail -c 1000 "$T/src" >>"$A/frag"
head -c $((5 * 1048576 + 1000)) /dev/urandom >"$T/src2"
cp "$T/src2" "$A/one" || fail "copy one"
sync
cmp "$T/src" "$A/frag" || fail "mount copy of frag differs"

for bs in 4096 65536 262144 1048576; do
	"$ATT" read "$A/frag" "$T/r" $bs >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "frag bs $bs"; }
	cmp "$T/src" "$T/r" || fail "frag read in $bs-byte blocks differs"
	read -r _ nb _ _ _ _ _ _ nreq _ _ _ maxp _ < <(head -1 "$T/log")
	# 12 KiB extents: blocks above 4 KiB span two or more of them
	if ((bs > 4096)) && ((nreq <= nb || maxp < 2)); then
		cat "$T/log" >&2
		fail "bs $bs: $nreq requests for $nb blocks: no block was split"
	fi
	"$ATT" read "$A/one" "$T/r2" $bs >"$T/log2" 2>&1 || { cat "$T/log2" >&2; fail "one bs $bs"; }
	cmp "$T/src2" "$T/r2" || fail "one read in $bs-byte blocks differs"
	ok "bs $bs: $(head -1 "$T/log")"
done
# the 4 KiB client of before still reads both
"$ATT" read "$A/frag" "$T/r" >/dev/null || fail "4 KiB read"
cmp "$T/src" "$T/r" || fail "4 KiB read differs"
gs_umount
ok "every block size reads fragmented and copied files"
