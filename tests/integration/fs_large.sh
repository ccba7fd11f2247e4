#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs: shared read-write mmap, O_DIRECT, and a sparse file past 4 GiB.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 8G
gs_mount
A=$MNT/arrays

$FSOPS mmap "$A/m" 8M || fail "mmap round trip"
$PY - "$A/m" <<'PYEOF' || fail "python mmap"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
m[100:105] = b"hello"
m.flush()
m.close()
os.close(fd)
assert open(sys.argv[1], "rb").read()[100:105] == b"hello"
PYEOF
ok mmap

$FSOPS direct "$A/d" 16M || fail "O_DIRECT"
ok O_DIRECT

off=$((5 << 30))
$FSOPS pwrite "$A/big" $off 1048576 9 || fail "write at 5 GiB"
[[ $(stat -c %s "$A/big") == $((off + 1048576)) ]] || fail "size $(stat -c %s "$A/big")"
$FSOPS verify "$A/big" $off 1048576 9 || fail "read back at 5 GiB"
$FSOPS zero "$A/big" 0 1048576 || fail "hole at 0"
$FSOPS zero "$A/big" $(((4 << 30) - 524288)) 1048576 || fail "hole across 4 GiB"
$FSOPS pwrite "$A/big" $(((4 << 30) - 100)) 200 10 || fail "write across 4 GiB"
$FSOPS verify "$A/big" $(((4 << 30) - 100)) 200 10 || fail "read across 4 GiB"
used=$(($(stat -c %b "$A/big") * 512))
[[ $used -lt $((256 << 20)) ]] || fail "a sparse 5 GiB file uses $used bytes"
truncate -s $((6 << 30)) "$A/big" && $FSOPS zero "$A/big" $((off + 1048576)) 4096 ||
	fail "grow to 6 GiB"
ok "sparse file past 4 GiB ($used bytes allocated)"
gs_umount
gs_mount
$FSOPS verify "$A/big" $off 1048576 9 || fail "5 GiB data after remount"
gs_umount
