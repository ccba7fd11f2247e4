#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fio verify on a gstorefs mount: random writes of several sizes, read back
# and checked (crc32c, verify_fatal), psync and io_uring engines, buffered
# and O_DIRECT.  Zero mismatches.
# timeout: 240
. "$(dirname "$0")/../helpers/gsmount.sh"
command -v fio >/dev/null || skip "no fio"
gs_init 2G
gs_mount
A=$MNT/arrays
cd "$T"	# fio leaves verify state files in the working directory

run_fio() {	# NAME ARGS...
	local name=$1
	shift
	fio --name="$name" --directory="$A" --filename="$name" --size=96M \
		--rw=randwrite --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--output="$T/$name.out" "$@" ||
		{ cat "$T/$name.out"; fail "fio $name"; }
	grep -qi "verify.*bad\|crc32c.*mismatch\|bad magic" "$T/$name.out" &&
		{ cat "$T/$name.out"; fail "fio $name: verify mismatch"; }
	ok "fio $name"
}

run_fio psync-4k --ioengine=psync --bs=4k
run_fio psync-mixed --ioengine=psync --bsrange=4k-256k --bs_unaligned=0 --numjobs=2 --size=48M
run_fio psync-direct --ioengine=psync --bs=64k --direct=1
if fio --enghelp=io_uring >/dev/null 2>&1; then
	run_fio uring-direct --ioengine=io_uring --bs=4k --iodepth=16 --direct=1
	run_fio uring-buffered --ioengine=io_uring --bs=128k --iodepth=8
else
	echo "skip: fio has no io_uring engine (psync only)"
fi
gs_alive || fail "daemon died"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck"; }
