#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# O_DIRECT reads through the mount against buffered writes: right after a
# write with no fsync (the data is only in gstore's cache: the read must not
# go to the stale device), after an fsync (the read goes around the cache on
# the FUSE worker), at page-aligned and at odd offsets and lengths, and for
# pieces overwritten after the fsync.  fs_direct_reads in .gstore/stats must
# move once the file is clean.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 256M
gs_mount
F=$MNT/arrays/d

direct_reads() { awk '/^fs_direct_reads:/ { print $2 }' "$MNT/.gstore/stats"; }

$PY - "$F" "$MNT/.gstore/stats" <<'PYEOF' || fail "O_DIRECT reads"
import mmap, os, random, sys

path, stats = sys.argv[1], sys.argv[2]
size = 3 << 20
rng = random.Random(7)
ref = bytearray(rng.randbytes(size))
buf = mmap.mmap(-1, size + 8192)	# page-aligned

def direct_reads():
    for line in open(stats):
        if line.startswith("fs_direct_reads:"):
            return int(line.split()[1])
    raise SystemExit("no fs_direct_reads in stats")

def check(fd, off, n, what):
    view = memoryview(buf)[:n]
    got = os.preadv(fd, [view], off)
    if got != n or bytes(view) != bytes(ref[off:off + n]):
        raise SystemExit(f"{what}: O_DIRECT read of {n} at {off} differs (got {got})")

ranges = [(0, 4096), (8192, 4096), (4096 * 37, 4096 * 3), (65536, 1 << 20), (0, size),
          (1, 1), (4095, 2), (12345, 777), (65536 - 100, 300), (100, 65536 * 3 + 5)]

def check_all(fd, what):
    for off, n in ranges:
        check(fd, off, n, what)

w = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(w, ref, 0)			# buffered, no fsync
d = os.open(path, os.O_RDONLY | os.O_DIRECT)
check_all(d, "unflushed")

os.fsync(w)				# now clean: reads go around the cache
before = direct_reads()
check_all(d, "after fsync")
if direct_reads() <= before:
    raise SystemExit("no read went around the cache after fsync")

for k in range(8):			# small overwrites, read back at once
    off = rng.randrange(0, size - 10000)
    n = rng.choice([1, 100, 4096, 5000, 9999])
    ref[off:off + n] = rng.randbytes(n)
    os.pwrite(w, ref[off:off + n], off)
    check(d, off, n, "overwrite")
    check(d, off & ~4095, 8192, "overwrite, its pages")
os.fsync(w)
check_all(d, "after the second fsync")
os.close(d)
os.close(w)
PYEOF
ok "O_DIRECT reads after buffered writes, with and without fsync"

# and from the device alone, after a remount
cp --sparse=never "$F" "$T/ref" || fail "copy"
gs_umount
gs_mount
$PY - "$F" "$T/ref" <<'PYEOF' || fail "O_DIRECT after remount"
import mmap, os, sys
ref = open(sys.argv[2], "rb").read()
buf = mmap.mmap(-1, len(ref))
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
for off, n in [(0, len(ref)), (4097, 3), (65535, 70000)]:
    view = memoryview(buf)[:n]
    if os.preadv(fd, [view], off) != n or bytes(view) != ref[off:off + n]:
        raise SystemExit(f"read of {n} at {off} differs after remount")
os.close(fd)
PYEOF
[[ $(direct_reads) -gt 0 ]] || fail "no direct reads counted after remount"
ok "O_DIRECT reads after remount"
gs_umount
