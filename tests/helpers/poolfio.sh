# SPDX-License-Identifier: MIT
# Sourced by tests/integration/pool_*.sh after gsmount.sh: fio write + verify
# of one file through the mount, and a later verify-only pass of the same file.
#
#   vfio NAME write|verify     8 MiB, random 4-64 KiB writes, crc32c (seed VFIO_SEED)
command -v fio >/dev/null || skip "no fio"

vfio() {
	local extra=(--do_verify=1)
	[[ $2 == verify ]] && extra=(--verify_only=1)
	fio --name="$1" --directory="$MNT/arrays" --filename="$1" --size=8M \
		--rw=randwrite --bsrange=4k-64k --verify=crc32c --verify_fatal=1 \
		--randseed="${VFIO_SEED:-7}" "${extra[@]}" --output="$T/$1.out" ||
		{ cat "$T/$1.out"; return 1; }
}
