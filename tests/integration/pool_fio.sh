#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pools of 2, 4 and 8 members in every layout (stripe, mirror, stripe+mirror):
# mkfs, mount, fio verify with unaligned and stripe-crossing I/O (16 KiB
# stripe unit; 1..100 KiB requests at any 512-byte offset, buffered and
# O_DIRECT), unmount, fsck (which also compares every mirrored copy), and
# `gstore stat` / `gstore pool status` showing the layout and stripe unit.
# timeout: 400
. "$(dirname "$0")/../helpers/gsmount.sh"
command -v fio >/dev/null || skip "no fio"

run_fio() {	# NAME ARGS...
	local name=$1
	shift
	fio --name="$name" --directory="$MNT/arrays" --filename="$name" --size=6M \
		--rw=randwrite --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--output="$T/$name.out" "$@" ||
		{ cat "$T/$name.out"; fail "fio $name"; }
	grep -qi "verify.*bad\|crc32c.*mismatch\|bad magic" "$T/$name.out" &&
		{ cat "$T/$name.out"; fail "fio $name: verify mismatch"; }
	true
}

B0=("$GSTORE" "$GSTOREFS" "$FSOPS")
for n in 2 4 8; do
	for layout in stripe mirror stripe+mirror; do
		GSTORE=${B0[0]} GSTOREFS=${B0[1]} FSOPS=${B0[2]}
		GS_POOL="$n $layout 16K" gs_init 96M
		cd "$T"
		gs_mount
		run_fio unal --ioengine=psync --bsrange=1k-100k --bs_unaligned=1
		run_fio cross --ioengine=psync --bs=24k --offset=8k --direct=1
		grep -q "^pool_layout: $layout$" "$MNT/.gstore/info" || fail "$n $layout: info"
		grep -q "^pool_members: $n$" "$MNT/.gstore/info" || fail "$n $layout: members"
		"$GSTORE" pool status "$MNT" | grep -q "^pool_state: ok" ||
			fail "$n $layout: pool status"
		gs_umount
		"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" ||
			{ cat "$T/fsck.out"; fail "$n $layout: fsck"; }
		"$GSTORE" stat "$T/m1" | grep -q "^pool_stripe_unit: 16384$" ||
			fail "$n $layout: stat shows no stripe unit"
		# members named in another order (devices=) mount the same store
		gs_mount -o "devices=$(IFS=:; echo "${POOL_MEMBERS[*]}" | tr ':' '\n' | tac | paste -sd:)"
		fio --name=unal --directory="$MNT/arrays" --filename=unal --size=6M \
			--rw=randwrite --verify=crc32c --verify_only=1 --verify_fatal=1 \
			--bsrange=1k-100k --bs_unaligned=1 --output="$T/vo.out" ||
			{ cat "$T/vo.out"; fail "$n $layout: verify after remount"; }
		gs_umount
		ok "$n members, $layout"
		cd /
		gs_cleanup
		trap - EXIT
	done
done
