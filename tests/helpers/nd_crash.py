# SPDX-License-Identifier: MIT
"""Writers and checker for tests/integration/nd_crash.sh.

  nd_crash.py make  SPACE                      a 2048x2048 u8 space, 256x256 blocks
  nd_crash.py write SPACE LOGPREFIX WRITERS SEED
        WRITERS processes, each owning the blocks b with b % WRITERS == w, write
        whole blocks (as block/256x256/X,Y or as the hyperslab slice/a:b,c:d),
        fsync each, and log "S bx by ver" before and "A bx by ver" after the
        fsync returned, in LOGPREFIX.<w> outside the mount.  They stop at the
        first error (the daemon was killed, or the power was cut).
  nd_crash.py stream SPACE
        a 4096x4096 u8 space (256x256 blocks) written front to back through
        its data file, 1 MiB at a time, over and over, never synced: blocks
        allocated and indexed by background write-back while the writers'
        fsyncs commit
  nd_crash.py checkstream SPACE
        the streamed space reads without error; every 16-byte record is zeros
        or that row's pattern
  nd_crash.py check SPACE LOGPREFIX WRITERS
        every block reads back as a version between its last acknowledged one
        and its last started one (4 KiB pieces may mix those versions: an
        unacknowledged overwrite can be torn, as for files); a block whose last
        start was acknowledged is exactly that version; never-written blocks
        and blocks never acknowledged may read as zeros.
"""
import os
import random
import struct
import sys

N, BB = 2048, 256
NB = N // BB
BLOCK = BB * BB
PIECE = 4096


def content(bx, by, ver):
    return struct.pack("<IIII", bx, by, ver, 0xA5C3) * (BLOCK // 16)


def path(space, bx, by, slice_view):
    if slice_view:
        return os.path.join(space, "slice", "%d:%d,%d:%d" % (
            bx * BB, (bx + 1) * BB, by * BB, (by + 1) * BB))
    return os.path.join(space, "block", "%dx%d" % (BB, BB), "%d,%d" % (bx, by))


def make(space, n=N):
    os.mkdir(space)
    os.setxattr(space, "user.gstore.bb", b"%dx%d" % (BB, BB))
    os.setxattr(space, "user.gstore.shape", b"%dx%d" % (n, n))
    os.setxattr(space, "user.gstore.dtype", b"u8")


SN = 4096


def row(r, rep):
    return struct.pack("<IIII", r, rep, 0x5EA3, 0) * (SN // 16)


def stream(space):
    make(space, SN)
    rows = (1 << 20) // SN
    rep = 0
    try:
        fd = os.open(os.path.join(space, "data"), os.O_WRONLY)
        while True:
            rep += 1
            for r0 in range(0, SN, rows):
                buf = b"".join(row(r, rep) for r in range(r0, r0 + rows))
                os.pwrite(fd, buf, r0 * SN)
    except OSError:
        return 0


def checkstream(space):
    """Records (16 bytes) are zeros or row r's (any pass): a write-back may catch
    a block while a write is copied into it, so an unsynced block can mix
    passes, or zeros and a pass, record by record - but never hold bytes that
    are not the stream's."""
    import numpy as np
    with open(os.path.join(space, "data"), "rb") as f:
        data = f.read()
    if len(data) != SN * SN:
        print("stream: %d bytes" % len(data))
        return 1
    rec = np.frombuffer(data, dtype="<u4").reshape(SN, SN // 16, 4)
    rows = np.arange(SN, dtype=np.uint32)[:, None]
    zero = (rec == 0).all(axis=2)
    good = (rec[:, :, 0] == rows) & (rec[:, :, 2] == 0x5EA3) & (rec[:, :, 3] == 0)
    bad = np.argwhere(~(zero | good))
    for r, k in bad[:5]:
        print("stream: row %d, bytes %d..: foreign %s" % (r, k * 16, rec[r, k]))
    return 1 if len(bad) else 0


def writer(space, log, w, nw, seed):
    rnd = random.Random(seed * 1000 + w)
    mine = [b for b in range(NB * NB) if b % nw == w]
    ver = {}
    with open(log, "w", buffering=1) as lf:
        while True:
            b = rnd.choice(mine)
            bx, by = divmod(b, NB)
            v = ver.get(b, 0) + 1
            ver[b] = v
            lf.write("S %d %d %d\n" % (bx, by, v))
            try:
                fd = os.open(path(space, bx, by, rnd.random() < 0.4), os.O_WRONLY)
                try:
                    if os.write(fd, content(bx, by, v)) != BLOCK:
                        return 1
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                return 0
            lf.write("A %d %d %d\n" % (bx, by, v))


def write(space, prefix, nw, seed):
    pids = []
    for w in range(nw):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = writer(space, "%s.%d" % (prefix, w), w, nw, seed)
            finally:
                os._exit(code)
        pids.append(pid)
    bad = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        bad |= os.waitstatus_to_exitcode(st) != 0
    return bad


def check(space, prefix, nw):
    acked, started = {}, {}
    for w in range(nw):
        try:
            lines = open("%s.%d" % (prefix, w)).read().splitlines()
        except FileNotFoundError:
            continue
        for ln in lines:
            f = ln.split()
            if len(f) != 4:
                continue	# the writer died in the middle of a line
            key, v = (int(f[1]), int(f[2])), int(f[3])
            if f[0] == "S":
                started[key] = max(started.get(key, 0), v)
            else:
                acked[key] = max(acked.get(key, 0), v)
    errors, nacked = 0, 0
    for bx in range(NB):
        for by in range(NB):
            a, s = acked.get((bx, by), 0), started.get((bx, by), 0)
            nacked += a > 0
            with open(path(space, bx, by, False), "rb") as f:
                data = f.read()
            if len(data) != BLOCK:
                print("block %d,%d: %d bytes" % (bx, by, len(data)))
                errors += 1
                continue
            ok = True
            for off in range(0, BLOCK, PIECE):
                piece = data[off:off + PIECE]
                if piece == bytes(PIECE):
                    ok &= a == 0
                    continue
                hx, hy, v, magic = struct.unpack_from("<IIII", piece)
                ok &= (hx, hy, magic) == (bx, by, 0xA5C3) and a <= v <= s \
                    and piece == content(hx, hy, v)[:PIECE]
            if not ok:
                errors += 1
                if errors <= 5:
                    vs = sorted({struct.unpack_from("<IIII", data, o)[2]
                                 for o in range(0, BLOCK, PIECE)})
                    print("block %d,%d: versions %s on disk, acknowledged %d, "
                          "last started %d" % (bx, by, vs, a, s))
    print("%d blocks acknowledged, %d wrong" % (nacked, errors))
    return 1 if errors else 0


def main():
    cmd, space = sys.argv[1], sys.argv[2]
    if cmd == "make":
        make(space)
        return 0
    if cmd == "write":
        return write(space, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    if cmd == "stream":
        return stream(space)
    if cmd == "checkstream":
        return checkstream(space)
    if cmd == "check":
        return check(space, sys.argv[3], int(sys.argv[4]))
    print("usage: nd_crash.py make|write|check SPACE ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
