#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The kernel's dirty pages of a mount (-o kdirty=SIZE, gs_fuse_set_dirty):
# gstorefs lifts FUSE's strict 1 % share (the bdi's strict_limit 0, max_bytes
# SIZE; root, Linux 6.2+), so that random mmap writes are not written back
# one page at a time while they are made; -o kdirty=0 keeps the kernel's.
# And what msync acknowledged is there after the daemon is killed (-9)
# with those pages written back through it: random pages of a shared
# mapping, written, msync'd, then the daemon killed, read back by a new
# mount.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 256M
gs_mount
F=$MNT/arrays/m
bdi() { cat "/sys/class/bdi/$(mountpoint -d "$MNT")/$1" 2>/dev/null; }

if [[ $(id -u) -eq 0 && -n $(bdi strict_limit) ]]; then
	[[ $(bdi strict_limit) == 0 ]] || fail "strict_limit $(bdi strict_limit), not 0"
	# the kernel keeps max_bytes as a share of its dirty limit, which moves
	# with free memory: what reads back is near 512M, not exactly it
	mb=$(bdi max_bytes)
	((mb >= (480 << 20) && mb <= (544 << 20))) || fail "max_bytes $mb, not about 512M"
	ok "kernel dirty pages: strict_limit 0, max_bytes $mb"
else
	echo "note: not root or no strict_limit in sysfs: the limits are not checked"
fi

$PY - "$F" write <<'PYEOF' || fail "mmap writes + msync"
import mmap, os, random, sys
path = sys.argv[1]
size = 64 << 20
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, size)
os.pwrite(fd, b"\0" * size, 0)
os.fsync(fd)
m = mmap.mmap(fd, size)
rng = random.Random(5)
for i in range(4000):
    p = rng.randrange(size // 4096)
    m[p * 4096:p * 4096 + 8] = (i + 1).to_bytes(8, "little")
m.flush()		# msync(MS_SYNC): acknowledged from here
print("ok: 4000 random pages written and msync'd")
PYEOF
gs_kill9
gs_mount
$PY - "$F" check <<'PYEOF' || fail "msync'd pages after kill -9"
import os, random, sys
path = sys.argv[1]
size = 64 << 20
want = {}
rng = random.Random(5)
for i in range(4000):
    want[rng.randrange(size // 4096)] = i + 1
fd = os.open(path, os.O_RDONLY)
bad = 0
for p, v in want.items():
    got = int.from_bytes(os.pread(fd, 8, p * 4096), "little")
    bad += got != v
if bad:
    raise SystemExit(f"{bad} of {len(want)} msync'd pages lost")
print(f"ok: all {len(want)} msync'd pages there after kill -9")
PYEOF
gs_umount

if [[ $(id -u) -eq 0 ]]; then
	gs_mount -o kdirty=0
	[[ -z $(bdi strict_limit) || $(bdi strict_limit) == 1 ]] ||
		fail "kdirty=0: strict_limit $(bdi strict_limit)"
	ok "kdirty=0: the kernel's strict limit stays"
	gs_umount
fi
