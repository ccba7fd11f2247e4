# SPDX-License-Identifier: MIT
"""N-D spaces through a gstorefs mount, checked against numpy.

    nd_check.py MNT STATE create SEED   make spaces, random I/O, save references
    nd_check.py MNT STATE verify        compare every space with its reference
    nd_check.py MNT STATE views         3-D producer, 2-D tile and 1-D row consumers
    nd_check.py MNT STATE sparse        a 1 TiB space with one block written
    nd_check.py MNT STATE errors        EINVAL / ERANGE / EFBIG, nothing written
    nd_check.py MNT STATE tree          find / ls -R of a space, every file against numpy

STATE is a directory for the references (an .npz per space).  Exit 0 = pass,
1 = fail (with the reason on stderr).  Used by tests/integration/nd_fuse.sh.
"""
import errno
import os
import random
import sys

import numpy as np

# gstore type name -> numpy dtype (raw N -> void N)
TYPES = {"u8": "|u1", "i8": "|i1", "i16": "<i2", "u16": "<u2", "f16": "<f2",
         "i32": "<i4", "u32": "<u4", "f32": "<f4", "i64": "<i8", "u64": "<u8",
         "f64": "<f8", "raw3": "|V3", "raw5": "|V5", "raw6": "|V6", "raw7": "|V7"}


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)


def shape_str(shape, sep="x"):
    return sep.join(str(d) for d in shape)


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n)) if n < 64 else \
        np.random.default_rng(rng.getrandbits(32)).integers(0, 256, n, dtype=np.uint8).tobytes()


def rand_array(rng, dtype, shape):
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    return np.frombuffer(rand_bytes(rng, n), dtype=dt).reshape(shape).copy()


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data, off=0):
    fd = os.open(path, os.O_WRONLY)
    try:
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], off + done)
    finally:
        os.close(fd)


def mkspace(mnt, name, shape, tname, bb=None):
    d = os.path.join(mnt, "nd", name)
    os.mkdir(d)
    if bb:
        os.setxattr(d, "user.gstore.bb", shape_str(bb).encode())
    os.setxattr(d, "user.gstore.shape", shape_str(shape).encode())
    os.setxattr(d, "user.gstore.dtype", tname.encode())
    got = os.getxattr(d, "user.gstore.shape").decode()
    if got != shape_str(shape):
        fail("%s: shape xattr %s" % (name, got))
    return d


def rand_slice(rng, shape, strided=True):
    """A random numpy index (tuple of slices / ints) and its file name."""
    idx, parts = [], []
    for d in shape:
        r = rng.random()
        if r < 0.15:
            i = rng.randrange(d)
            idx.append(i)
            parts.append(str(i))
        elif r < 0.25:
            idx.append(slice(None))
            parts.append(":")
        else:
            a = rng.randrange(d)
            b = rng.randrange(a + 1, d + 1)
            s = rng.choice([1, 1, 1, 2, 3]) if strided else 1
            idx.append(slice(a, b, s))
            parts.append("%d:%d" % (a, b) + (":%d" % s if s != 1 else ""))
    return tuple(idx), ",".join(parts)


def rand_block(rng, shape):
    # sides past the dimension too: such a block is partial, like an edge block
    sub = [rng.randint(1, d + d // 4 + 1) if rng.random() < 0.8 else 1 for d in shape]
    coord = [rng.randrange((d + s - 1) // s) for d, s in zip(shape, sub)]
    idx = tuple(slice(c * s, min((c + 1) * s, d)) for c, s, d in zip(coord, sub, shape))
    return idx, "%s/%s" % (shape_str(sub), shape_str(coord, ","))


def rand_view(rng, n):
    """A shape of volume n with 1..5 dims."""
    dims, left = [], n
    for _ in range(rng.randint(0, 4)):
        divs = [k for k in range(2, 13) if left % k == 0]
        if not divs:
            break
        k = rng.choice(divs)
        dims.append(k)
        left //= k
    dims.append(left)
    rng.shuffle(dims)
    return tuple(dims)


def check_read(path, want, npy, what):
    if npy:
        got = np.load(path)
        if got.dtype != want.dtype:
            fail("%s: dtype %s, want %s" % (what, got.dtype, want.dtype))
        if got.shape != want.shape:
            fail("%s: shape %s, want %s" % (what, got.shape, want.shape))
    else:
        got = np.frombuffer(read_file(path), dtype=want.dtype)
        want = want.reshape(-1)
    if got.tobytes() != want.tobytes():
        fail("%s: data differs" % what)


def ops(rng, d, ref, nops):
    """Random reads and writes on space directory d with reference ref."""
    for _ in range(nops):
        op = rng.randrange(8)
        npy = rng.random() < 0.5
        sfx = ".npy" if npy else ""
        if op == 0:          # read a slice
            idx, name = rand_slice(rng, ref.shape)
            want = np.asarray(ref[idx])     # all bare indices: 0-d, shape ()
            check_read(os.path.join(d, "slice", name + sfx), want, npy, "slice/" + name)
        elif op == 1:        # read an NDS block
            idx, name = rand_block(rng, ref.shape)
            check_read(os.path.join(d, "block", name + sfx), ref[idx], npy, "block/" + name)
        elif op == 2:        # read through a view
            vs = rand_view(rng, ref.size)
            view = ref.reshape(vs)
            base = os.path.join(d, "as", shape_str(vs))
            k = rng.randrange(3)
            if k == 0:
                check_read(os.path.join(base, "data" + sfx), view, npy, "as/%s/data" % (vs,))
            elif k == 1:
                idx, name = rand_slice(rng, vs)
                want = np.asarray(view[idx])
                check_read(os.path.join(base, "slice", name + sfx), want, npy,
                           "as/%s/slice/%s" % (vs, name))
            else:
                idx, name = rand_block(rng, vs)
                check_read(os.path.join(base, "block", name + sfx), view[idx], npy,
                           "as/%s/block/%s" % (vs, name))
        elif op == 3:        # write a slice (raw)
            idx, name = rand_slice(rng, ref.shape)
            cur = np.asarray(ref[idx])
            new = rand_array(rng, ref.dtype, cur.shape)
            write_file(os.path.join(d, "slice", name), new.tobytes())
            ref[idx] = new
        elif op == 4:        # write an NDS block, as .npy (np.save)
            idx, name = rand_block(rng, ref.shape)
            new = rand_array(rng, ref.dtype, ref[idx].shape)
            np.save(os.path.join(d, "block", name + ".npy"), new)
            ref[idx] = new
        elif op == 5:        # write through a view
            vs = rand_view(rng, ref.size)
            view = ref.reshape(vs)
            idx, name = rand_slice(rng, vs, strided=rng.random() < 0.3)
            cur = np.asarray(view[idx])
            new = rand_array(rng, ref.dtype, cur.shape)
            write_file(os.path.join(d, "as", shape_str(vs), "slice", name), new.tobytes())
            view[idx] = new
        elif op == 6:        # unaligned bytes of data
            raw = ref.reshape(-1).view(np.uint8)
            off = rng.randrange(raw.size)
            n = rng.randint(1, min(raw.size - off, 5000))
            if rng.random() < 0.5:
                with open(os.path.join(d, "data"), "rb") as f:
                    f.seek(off)
                    got = f.read(n)
                if got != raw[off:off + n].tobytes():
                    fail("data bytes %d+%d differ" % (off, n))
            else:
                new = rand_bytes(rng, n)
                write_file(os.path.join(d, "data"), new, off)
                raw[off:off + n] = np.frombuffer(new, dtype=np.uint8)
        else:                # the whole space
            check_read(os.path.join(d, "data.npy"), ref, True, "data.npy")


def cmd_create(mnt, state, seed):
    rng = random.Random(seed)
    np.random.seed(seed)
    for k in range(8):
        ndims = 1 + k % 5
        tname = rng.choice(list(TYPES))
        budget, shape = 40000, []
        for i in range(ndims):
            hi = max(1, min(budget, 3000 if ndims <= 2 else 40))
            dim = rng.randint(1, hi)
            shape.append(dim)
            budget = max(1, budget // dim)
        shape = tuple(shape)
        # small blocks with partial edges, or the device's choice
        bb = [rng.randint(1, d + 2) for d in shape] if rng.random() < 0.7 else None
        name = "s%d" % k
        sys.stdout.write("space %s %s %s bb=%s\n" % (name, tname, shape_str(shape), bb))
        sys.stdout.flush()
        d = mkspace(mnt, name, shape, tname, bb)
        ref = np.zeros(shape, dtype=TYPES[tname])
        check_read(os.path.join(d, "data.npy"), ref, True, name + " fresh")
        if rng.random() < 0.5:   # fill it whole, streaming, or leave it sparse
            ref = rand_array(rng, TYPES[tname], shape)
            write_file(os.path.join(d, "data"), ref.tobytes())
        ops(rng, d, ref, 40)
        np.save(os.path.join(state, name + ".npy"), ref)
        sys.stdout.write("ok: %s\n" % name)


def cmd_verify(mnt, state):
    n = 0
    for f in sorted(os.listdir(state)):
        if not f.startswith("s") or not f.endswith(".npy"):
            continue
        ref = np.load(os.path.join(state, f))
        d = os.path.join(mnt, "nd", f[:-4])
        check_read(os.path.join(d, "data.npy"), ref, True, f[:-4] + " after remount")
        info = dict(l.split(" ", 1) for l in read_file(os.path.join(d, "info")).decode().split("\n") if l)
        if info["shape"] != shape_str(ref.shape):
            fail("info shape %s" % info["shape"])
        n += 1
    if n == 0:
        fail("no references in %s" % state)
    sys.stdout.write("ok: %d spaces equal after remount\n" % n)


def cmd_views(mnt, state):
    """NDS: a producer writes 3-D blocks; consumers read 2-D tiles and 1-D rows."""
    rng = random.Random(7)
    Z, Y, X = 6, 90, 130
    d = mkspace(mnt, "cube", (Z, Y, X), "f32", (2, 32, 32))
    ref = rand_array(rng, "<f4", (Z, Y, X))
    for z in range(0, Z, 2):
        for y in range(0, Y, 32):
            for x in range(0, X, 32):
                blk = ref[z:z + 2, y:y + 32, x:x + 32]
                write_file(os.path.join(d, "block", "2x32x32", "%d,%d,%d" % (z // 2, y // 32, x // 32)),
                           blk.tobytes())
    flat = ref.tobytes()
    # 2-D consumer: the (Z*Y) x X plane in 40 x 50 tiles
    tiles = np.zeros((Z * Y, X), dtype="<f4")
    for i in range(0, Z * Y, 40):
        for j in range(0, X, 50):
            t = np.load(os.path.join(d, "as", "%dx%d" % (Z * Y, X), "block", "40x50",
                                     "%d,%d.npy" % (i // 40, j // 50)))
            tiles[i:i + t.shape[0], j:j + t.shape[1]] = t
    if tiles.tobytes() != flat:
        fail("2-D tile consumer differs from the 3-D producer")
    # 1-D consumer: rows of X
    rows = b"".join(read_file(os.path.join(d, "as", str(Z * Y * X), "slice",
                                           "%d:%d" % (r * X, (r + 1) * X)))
                    for r in range(Z * Y))
    if rows != flat:
        fail("1-D row consumer differs from the 3-D producer")
    sys.stdout.write("ok: 3-D producer, 2-D tile and 1-D row consumers agree\n")


def statfs_used(mnt):
    s = os.statvfs(mnt)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def cmd_sparse(mnt, state):
    used0 = statfs_used(mnt)
    d = mkspace(mnt, "sparse", (1 << 20, 1 << 20), "u8")
    st = os.stat(os.path.join(d, "data"))
    if st.st_size != 1 << 40:
        fail("sparse data size %d" % st.st_size)
    with open(os.path.join(d, "data"), "r+b") as f:
        f.seek((1 << 39) + 12345)
        f.write(b"\x07" * 100)
        f.seek((1 << 39) + 12345 - 10)
        got = f.read(120)
        f.seek(1 << 30)
        zeros = f.read(1 << 16)
        # FUSE sends RELEASE in the background: the info opened below may
        # be served before the close is; fsync settles the block's index
        os.fsync(f.fileno())
    if got != b"\0" * 10 + b"\x07" * 100 + b"\0" * 10 or zeros != b"\0" * (1 << 16):
        fail("sparse read back")
    info = read_file(os.path.join(d, "info")).decode()
    if "blocks_written 1\n" not in info:
        fail("sparse: %s" % info)
    used = statfs_used(mnt) - used0
    if used > 32 << 20:
        fail("a 1 TiB space with one block uses %d bytes" % used)
    sys.stdout.write("ok: sparse 1 TiB space uses %d KiB\n" % (used >> 10))


def expect_err(fn, code, what):
    try:
        fn()
    except OSError as e:
        if e.errno != code:
            fail("%s: errno %d, want %d" % (what, e.errno, code))
        return
    fail("%s: no error, want errno %d" % (what, code))


def cmd_errors(mnt, state):
    d = mkspace(mnt, "err", (10, 20), "i16", (4, 4))
    ref = np.arange(200, dtype="<i2").reshape(10, 20)
    write_file(os.path.join(d, "data"), ref.tobytes())
    bad = ["slice/0:11", "slice/10", "slice/5:5", "slice/1,2,3", "slice/a:b", "slice/-1",
           "block/4x4/3,0", "block/4x4/0", "block/11x4/1,0", "block/4x4x4/0,0,0",
           "block/0x4/0,0", "as/3x7/data", "as/0/data", "slice/0:99999999999999999999999",
           "nope"]
    codes = {"slice/0:11": errno.ERANGE, "slice/10": errno.ERANGE, "block/4x4/3,0": errno.ERANGE,
             "block/11x4/1,0": errno.ERANGE, "slice/0:99999999999999999999999": errno.ERANGE,
             "nope": errno.ENOENT}
    # a block side past the space's is a partial block, not an error (HDF5, Zarr)
    check_read(os.path.join(d, "block/11x4/0,0.npy"), ref[0:10, 0:4], True, "block/11x4/0,0")
    for b in bad:
        expect_err(lambda: read_file(os.path.join(d, b)), codes.get(b, errno.EINVAL), b)
    # writes past a file's end and .npy headers that differ: nothing written
    f = os.path.join(d, "slice", "2:4,0:5")
    expect_err(lambda: write_file(f, b"\1" * 21), errno.EFBIG, "write past the end")
    other = np.zeros((3, 5), dtype="<i2")
    expect_err(lambda: np.save(f + ".npy", other), errno.EINVAL, "npy of another shape")
    expect_err(lambda: np.save(f + ".npy", np.zeros((2, 5), dtype="<i4")), errno.EINVAL,
               "npy of another type")
    check_read(os.path.join(d, "data.npy"), ref, True, "after rejected writes")
    # shape/dtype are fixed once formatted
    expect_err(lambda: os.setxattr(d, "user.gstore.shape", b"20x10"), errno.EBUSY, "reshape")
    os.mkdir(os.path.join(mnt, "nd", "bad"))
    expect_err(lambda: os.setxattr(os.path.join(mnt, "nd", "bad"), "user.gstore.shape", b"4x0"),
               errno.EINVAL, "shape 4x0")
    expect_err(lambda: os.setxattr(os.path.join(mnt, "nd", "bad"), "user.gstore.dtype", b"c16"),
               errno.EINVAL, "dtype c16")
    sys.stdout.write("ok: malformed names and writes fail cleanly\n")


def block_ref(ref, sub, coord):
    return ref[tuple(slice(c * s, min((c + 1) * s, d))
                     for c, s, d in zip(coord, sub, ref.shape))]


def cmd_tree(mnt, state):
    """Everything find / ls -R list under a space opens and holds numpy's bytes."""
    import subprocess
    rng = random.Random(7)
    d = mkspace(mnt, "tree", (60, 70, 80), "f32")
    ref = rand_array(rng, "<f4", (60, 70, 80))
    write_file(os.path.join(d, "data"), ref.tobytes())
    for tool in (["find", d], ["ls", "-R", d]):
        r = subprocess.run(tool, capture_output=True)
        if r.returncode != 0:
            fail("%s: exit %d: %s" % (" ".join(tool), r.returncode, r.stderr.decode()[:300]))
    shapes, files = os.listdir(os.path.join(d, "block")), 0
    if not shapes:
        fail("block/ lists no block shape")
    for top, dirs, names in os.walk(d):
        rel = os.path.relpath(top, d).split(os.sep)
        for n in names:
            p, npy = os.path.join(top, n), n.endswith(".npy")
            base = n[:-4] if npy else n
            if rel == ["."]:
                if base == "info":
                    read_file(p)
                    continue
                want = ref
            elif rel[0] == "block" and len(rel) == 2:
                sub = [int(x) for x in rel[1].split("x")]
                want = block_ref(ref, sub, [int(x) for x in base.split(",")])
            else:
                fail("unexpected file %s" % p)
            check_read(p, want, npy, os.path.relpath(p, d))
            files += 1
    # the listed block shape is the building block: its edge blocks are partial
    sub = [int(x) for x in shapes[0].split("x")]
    nblocks = np.prod([(n + s - 1) // s for n, s in zip(ref.shape, sub)])
    if files != 2 + 2 * nblocks:
        fail("%d files, want %d" % (files, 2 + 2 * nblocks))
    # numpy's a[991, 198] is a 0-d array: slice/991,198.npy has shape ()
    d2 = mkspace(mnt, "scalar", (1000, 200), "f32")
    ref2 = rand_array(rng, "<f4", (1000, 200))
    write_file(os.path.join(d2, "data"), ref2.tobytes())
    got = np.load(os.path.join(d2, "slice", "991,198.npy"))
    if got.shape != () or got.tobytes() != ref2[991, 198].tobytes():
        fail("slice/991,198.npy: shape %s value %r, want () %r" % (got.shape, got, ref2[991, 198]))
    np.save(os.path.join(d2, "slice", "991,198.npy"), np.float32(2.5))
    if np.load(os.path.join(d2, "data.npy"))[991, 198] != np.float32(2.5):
        fail("np.save of a 0-d array into slice/991,198.npy")
    sys.stdout.write("ok: find / ls -R of a space: %d files, each as numpy reads it\n" % files)


def main():
    mnt, state, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
    if cmd == "create":
        cmd_create(mnt, state, int(sys.argv[4]))
    elif cmd == "verify":
        cmd_verify(mnt, state)
    elif cmd == "views":
        cmd_views(mnt, state)
    elif cmd == "sparse":
        cmd_sparse(mnt, state)
    elif cmd == "errors":
        cmd_errors(mnt, state)
    elif cmd == "tree":
        cmd_tree(mnt, state)
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
