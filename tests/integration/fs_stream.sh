#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The daemon's read-ahead for sequential readers (fs/fuse/stream.c,
# -o stream_ra=): an O_DIRECT reader going through a file in 1 MiB reads
# becomes a stream (fuse_stream_reads and fuse_stream_ra_bytes in
# .gstore/stats move, the block cache reads ahead: cache_readahead) and
# reads the right bytes, also right after a write ahead of it (the lines
# read ahead must not hide it) and across a truncate and rewrite; random
# 4 KiB reads of the same file do not become one; with -o stream_ra=0 no
# read does.  The buffered reader, which the kernel's read-ahead feeds, gets
# its bytes right too.  .gstore/info shows the window in effect (stream_ra_kib:
# as asked, at most an eighth of the block cache).
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 512M
gs_mount
F=$MNT/arrays/s

run_py() {
	$PY - "$F" "$MNT/.gstore/stats" "$@" <<'PYEOF'
import mmap, os, random, sys

path, stats, mode = sys.argv[1], sys.argv[2], sys.argv[3]
size = 48 << 20
MiB = 1 << 20
rng = random.Random(11)
ref = bytearray(rng.randbytes(size))
buf = mmap.mmap(-1, MiB)		# page-aligned

def st():
    d = {}
    for line in open(stats):
        p = line.replace(":", " ").split()
        if len(p) == 2 and p[1].isdigit():
            d[p[0]] = int(p[1])
    return d

def seq_read(fd, what, start=0, end=size, check=True):
    for off in range(start, end, MiB):
        n = os.preadv(fd, [buf], off)
        if n != MiB or (check and buf[:] != ref[off:off + MiB]):
            raise SystemExit(f"{what}: read at {off} differs (got {n})")

w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
if mode == "write":
    os.pwrite(w, ref, 0)
    os.fsync(w)
    sys.exit(0)
if mode == "off":			# what the "on" run left: its rewrite
    rng.randbytes(MiB)
    ref = bytearray(rng.randbytes(size))
d = os.open(path, os.O_RDONLY | os.O_DIRECT)
s0 = st()
seq_read(d, "sequential O_DIRECT")
s1 = st()
streams = s1["fuse_stream_reads"] - s0["fuse_stream_reads"]
ra = s1["fuse_stream_ra_bytes"] - s0["fuse_stream_ra_bytes"]
lines = s1["cache_readahead"] - s0["cache_readahead"]
if mode == "off":
    if streams or ra:
        raise SystemExit(f"stream_ra=0: {streams} stream reads, {ra} bytes read ahead")
    print("ok: stream_ra=0: no stream")
    sys.exit(0)
# 48 reads: all but the first few continue the stream
if streams < 40 or ra < 32 * MiB or lines < 32 * MiB // s1.get("line_size", 65536):
    raise SystemExit(f"sequential reader: {streams} stream reads, {ra} bytes asked, "
                     f"{lines} lines read ahead")
print(f"ok: sequential O_DIRECT reader: {streams} of 48 reads a stream, "
      f"{ra >> 20} MiB read ahead ({lines} lines)")

# a write ahead of a stream that has read ahead past it
seq_read(d, "stream again", 0, 8 * MiB)
patch = rng.randbytes(MiB)
ref[20 * MiB + 4096:21 * MiB + 4096] = patch
os.pwrite(w, patch, 20 * MiB + 4096)
seq_read(d, "after a write ahead of the stream", 8 * MiB, size)
print("ok: a write ahead of the stream is seen")

# truncate and rewrite with other bytes, then stream again
os.ftruncate(w, 0)
ref = bytearray(rng.randbytes(size))
os.pwrite(w, ref, 0)
seq_read(d, "after truncate and rewrite")
print("ok: truncate + rewrite: new bytes")

# random 4 KiB reads: no stream
s0 = st()
for _ in range(2000):
    off = rng.randrange(size // 4096) * 4096
    n = os.preadv(d, [memoryview(buf)[:4096]], off)
    if n != 4096 or buf[:4096] != ref[off:off + 4096]:
        raise SystemExit(f"random read at {off} differs")
s1 = st()
if s1["fuse_stream_reads"] != s0["fuse_stream_reads"]:
    raise SystemExit(f"random 4 KiB reads: {s1['fuse_stream_reads'] - s0['fuse_stream_reads']}"
                     " stream reads")
print("ok: random 4 KiB reads: no stream")

# buffered sequential reader (the kernel's read-ahead in front)
os.close(d)
try:
    os.posix_fadvise(w, 0, 0, os.POSIX_FADV_DONTNEED)
except OSError:
    pass
b = os.open(path, os.O_RDONLY)
seq_read(b, "buffered sequential")
os.close(b)
print("ok: buffered sequential reader")
PYEOF
}

window() { sed -n 's/^stream_ra_kib: //p' "$MNT/.gstore/info"; }

expect 16384 window
# written, then read by a new daemon: nothing of the file in its cache
run_py write || fail "writing the file"
gs_umount
gs_mount
run_py on || fail "stream read-ahead"
gs_umount
gs_mount -o stream_ra=0
expect 0 window
run_py off || fail "stream_ra=0"
gs_umount
# the window is at most an eighth of the block cache
gs_mount -o cache=32M,stream_ra=65536
expect 4096 window
gs_umount
