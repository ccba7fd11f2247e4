#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# FUSE over io_uring (fs/fuse/uring.c): -o uring=on puts the mount on the
# rings (.gstore/info says so, and fuse_uring_requests in .gstore/stats
# counts what they served), data and metadata come through intact from
# threads on every CPU (one kernel queue each), a notification sent from a
# ring thread (O_DIRECT write) still reaches the kernel, -o uring=off stays
# on /dev/fuse, a bad mode is refused; and the daemon killed, or the mount
# detached, while reads are in flight leaves no reader hanging and the
# synced data readable at the next mount.  The rest of the mounted tests run
# over both transports through tests/run.sh's matrix.
# timeout: 180
# matrix: no (it picks its transports itself)
. "$(dirname "$0")/../helpers/gsmount.sh"
GS_TRANSPORT=uring
gs_init 512M
P=/sys/module/fuse/parameters/enable_uring

transport() { sed -n 's/^transport: //p' "$MNT/.gstore/info"; }
ring_reqs() { awk '$1 == "fuse_uring_requests" { print $2 }' "$MNT/.gstore/stats"; }

gs_mount -o uring=on
[[ $(transport) == io_uring* ]] || fail "uring=on: transport '$(transport)'"
ok "transport: $(transport)"

$PY - "$MNT" <<'PYEOF' || fail "I/O over the rings"
import mmap, os, random, sys, threading

mnt = sys.argv[1]
f = mnt + "/arrays/u"
size = 8 << 20
rng = random.Random(17)
ref = rng.randbytes(size)
fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
for off in range(0, size, 1 << 20):		# 1 MiB writes: a full payload buffer
    os.pwrite(fd, ref[off:off + (1 << 20)], off)
os.fsync(fd)
if os.pread(fd, size, 0) != ref:
    raise SystemExit("buffered read back differs")

errors = []
def reader(cpu, seed):
    try:
        os.sched_setaffinity(0, {cpu})		# this thread: its CPU's queue
        r = random.Random(seed)
        d = os.open(f, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 1 << 20)
        for _ in range(200):
            n = r.choice([4096, 8192, 65536, 1 << 20])
            off = r.randrange(0, size - n + 1) & ~4095
            got = os.preadv(d, [memoryview(buf)[:n]], off)
            if got != n or buf[:n] != ref[off:off + n]:
                errors.append(f"cpu {cpu}: O_DIRECT {n} at {off} differs")
                return
        os.close(d)
    except Exception as e:
        errors.append(f"cpu {cpu}: {e}")
cpus = sorted(os.sched_getaffinity(0))
ts = [threading.Thread(target=reader, args=(c, i)) for i, c in enumerate(cpus * 2)]
for t in ts: t.start()
for t in ts: t.join()
if errors:
    raise SystemExit("; ".join(errors))

# an O_DIRECT write makes the handler send FUSE_NOTIFY_INVAL_INODE from a
# ring thread: it must reach /dev/fuse, so a buffered reader sees the new bytes
os.pread(fd, 4096, 4096)				# pages in the kernel's cache
d = os.open(f, os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"\x5a" * 4096)
if os.pwrite(d, buf, 4096) != 4096:
    raise SystemExit("O_DIRECT write")
os.close(d)
if os.pread(fd, 4096, 4096) != b"\x5a" * 4096:
    raise SystemExit("buffered read after an O_DIRECT write: stale pages")

# metadata: names, attributes, links, xattrs, statfs
dd = mnt + "/arrays/dir"
os.mkdir(dd)
for i in range(300):
    with open(f"{dd}/n{i:04d}", "w") as g:
        g.write(str(i))
names = sorted(os.listdir(dd))
if names != [f"n{i:04d}" for i in range(300)]:
    raise SystemExit("readdir")
for i in range(0, 300, 2):
    os.rename(f"{dd}/n{i:04d}", f"{dd}/r{i:04d}")
for i in range(1, 300, 2):
    os.unlink(f"{dd}/n{i:04d}")
if len(os.listdir(dd)) != 150 or open(f"{dd}/r0042").read() != "42":
    raise SystemExit("rename/unlink")
os.symlink("r0042", dd + "/l")
if os.readlink(dd + "/l") != "r0042" or os.stat(dd + "/l").st_size != 2:
    raise SystemExit("symlink")
os.setxattr(f, "user.k", b"v" * 3000)
if os.getxattr(f, "user.k") != b"v" * 3000 or "user.k" not in os.listxattr(f):
    raise SystemExit("xattr")
os.chmod(f, 0o600)
if os.stat(f).st_mode & 0o777 != 0o600 or os.statvfs(mnt).f_bsize == 0:
    raise SystemExit("chmod/statfs")
PYEOF
ok "data and metadata over the rings"
n=$(ring_reqs)
[[ ${n:-0} -gt 1000 ]] || fail "fuse_uring_requests is '${n:-}' after the I/O"
ok "$n requests over the rings"
gs_umount

# off: /dev/fuse, nothing on the rings; a bad mode: refused
gs_mount -o uring=off
[[ $(transport) == /dev/fuse* ]] || fail "uring=off: transport '$(transport)'"
[[ $(wc -c <"$MNT/arrays/u") == $((8 << 20)) ]] || fail "read with uring=off"
[[ $(ring_reqs) == 0 ]] || fail "uring=off served $(ring_reqs) requests over rings"
gs_umount
ok "uring=off: /dev/fuse"
gs_try_mount -o uring=sometimes && fail "-o uring=sometimes mounted"
grep -q "bad uring mode" "$T/gstorefs.log" || fail "no word on the bad mode"
ok "a bad mode is refused"

# the daemon killed while reads are in flight: every reader ends (ENOTCONN)
# reader N: O_DIRECT reads in a loop (exec: a kill reaches python itself);
# $T/ready.N once the first one is done
reader() {
	exec $PY - "$MNT/arrays/u" "$T/ready.$1" <<'PYEOF'
import mmap, os, sys
buf = mmap.mmap(-1, 1 << 20)
try:
    d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
    os.preadv(d, [buf], 0)
    open(sys.argv[2], "w").close()
    while True:
        for off in range(0, 8 << 20, 1 << 20):
            os.preadv(d, [buf], off)
except OSError:
    pass
PYEOF
}
# wait_readers N: until N readers have read once
wait_readers() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ $(ls "$T"/ready.* 2>/dev/null | wc -l) -ge $1 ]] && break
		sleep 0.1
	done
	rm -f "$T"/ready.*
}
gs_mount -o uring=on
pids=()
for i in 1 2 3 4; do
	reader $i &
	pids+=($!)
done
wait_readers 4
gs_kill9
for p in "${pids[@]}"; do
	for ((i = 0; i < 100; i++)); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$p" 2>/dev/null && fail "a reader still waits 10 s after kill -9 of the daemon"
	wait "$p"
done
ok "kill -9 with reads in flight: all readers ended"

# detached while reads are in flight: readers finish, the daemon exits 0
gs_mount -o uring=on
pids=()
for i in 1 2; do
	reader $i &
	pids+=($!)
done
wait_readers 2
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" || fail "lazy unmount"
GS_MOUNTED=0
sleep 0.5
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
for ((i = 0; i < 150; i++)); do
	kill -0 "$GS_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$GS_PID" 2>/dev/null && fail "the daemon still runs 15 s after a lazy unmount"
wait "$GS_PID" || { cat "$T/gstorefs.log" >&2; fail "the daemon exited $? after a lazy unmount"; }
GS_PID=
ok "lazy unmount with reads in flight: the daemon exited 0"

# what was synced before the kill is there
gs_mount -o uring=on
$PY - "$MNT/arrays/u" <<'PYEOF' || fail "data after the kill"
import random, sys
ref = bytearray(random.Random(17).randbytes(8 << 20))
ref[4096:8192] = b"\x5a" * 4096
if open(sys.argv[1], "rb").read() != ref:
    raise SystemExit("contents differ after kill -9 and remount")
PYEOF
gs_umount
ok "synced data intact after kill -9"
[[ $(cat $P) == Y ]] || fail "enable_uring changed under the test"
