# SPDX-License-Identifier: MIT
"""POSIX checks of a gstorefs mount that the shell cannot do alone.

    posix_check.py MNT DIR CHECK...

CHECK is one of: handles, handles_save, handles_load, mmap_direct,
fstat_unlinked, xattr_many, nd_mmap (handles_save writes handles to the file
$GS_HANDLES, handles_load opens them after the daemon was restarted).
Prints what it checked; exits non-zero (with the reason) at the first
difference.  Used by tests/integration/fs_posix.sh.
"""
import ctypes
import errno
import mmap
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]


def fail(msg):
    raise SystemExit(f"FAIL: {msg}")


def name_to_handle(path):
    fh = FileHandle()
    fh.handle_bytes = 128
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh),
                              ctypes.byref(mount_id), 0) < 0:
        fail(f"name_to_handle_at({path}): {os.strerror(ctypes.get_errno())}")
    return fh


def open_by_handle(mfd, fh, flags=os.O_RDONLY):
    fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), flags)
    return fd if fd >= 0 else -ctypes.get_errno()


def open_handles(mfd, hf, hd, data, when=""):
    """Open file handle @hf (its first bytes must be @data) and directory
    handle @hd; fail naming which one did not open."""
    fd = open_by_handle(mfd, hf)
    if fd < 0:
        fail(f"open_by_handle_at of a file{when}: {os.strerror(-fd)}")
    if os.read(fd, len(data) + 1) != data:
        fail(f"open_by_handle_at{when} opened something else")
    dfd = open_by_handle(mfd, hd, os.O_RDONLY | os.O_DIRECTORY)
    if dfd < 0:
        fail(f"open_by_handle_at of a directory{when}: {os.strerror(-dfd)}")
    return fd, dfd


def drop_caches():
    """Make the kernel forget unused dentries and inodes: a handle must then
    be resolved by the fs from the node id alone."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def check_handles(mnt, d):
    mfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    with open(f"{d}/hf", "w") as f:
        f.write("hello")
    os.mkdir(f"{d}/hsub")
    os.mkdir(f"{d}/hsub/deeper")
    hf, hd = name_to_handle(f"{d}/hf"), name_to_handle(f"{d}/hsub/deeper")
    drop_caches()
    fd, dfd = open_handles(mfd, hf, hd, b"hello")
    # ".." of a directory found by handle alone
    drop_caches()
    if os.stat("..", dir_fd=dfd).st_ino != os.stat(f"{d}/hsub").st_ino:
        fail("'..' of a directory opened by handle")
    os.close(dfd)
    # unlinked but open: still reachable; once closed: ESTALE
    os.unlink(f"{d}/hf")
    drop_caches()
    fd2 = open_by_handle(mfd, hf)
    if fd2 < 0:
        fail(f"open_by_handle_at of an open, unlinked file: {os.strerror(-fd2)}")
    os.close(fd2)
    os.close(fd)
    drop_caches()
    r = open_by_handle(mfd, hf)
    if r != -errno.ESTALE:
        fail(f"open_by_handle_at of a deleted file gave {r}, want ESTALE")
    # a new file that reuses the inode number has another generation
    print("ok: open_by_handle_at of files and directories, ESTALE once deleted")


def check_handles_save(mnt, d):
    """Handles of a file and a directory, kept in $GS_HANDLES for
    handles_load: an NFS client keeps them across a server restart."""
    os.makedirs(f"{d}/rsub", exist_ok=True)
    with open(f"{d}/rsub/rf", "w") as f:
        f.write("restart")
    hf, hd = name_to_handle(f"{d}/rsub/rf"), name_to_handle(f"{d}/rsub")
    with open(os.environ["GS_HANDLES"], "wb") as f:
        f.write(bytes(hf) + bytes(hd))
    print("ok: handles saved")


def check_handles_load(mnt, d):
    raw = open(os.environ["GS_HANDLES"], "rb").read()
    n = ctypes.sizeof(FileHandle)
    hf, hd = FileHandle.from_buffer_copy(raw[:n]), FileHandle.from_buffer_copy(raw[n:])
    mfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    fd, dfd = open_handles(mfd, hf, hd, b"restart", " after a restart")
    if os.listdir(dfd) != ["rf"]:
        fail(f"the directory opened by handle lists {os.listdir(dfd)}")
    os.close(fd)
    os.close(dfd)
    os.unlink(f"{d}/rsub/rf")
    drop_caches()
    r = open_by_handle(mfd, hf)
    if r != -errno.ESTALE:
        fail(f"open_by_handle_at of a file deleted after a restart gave {r}, want ESTALE")
    print("ok: handles taken before an unmount open the same file and directory after the"
          " next mount (an NFS server restart); ESTALE once deleted")


def check_mmap_direct(mnt, d):
    path = f"{d}/mdirect"
    with open(path, "wb") as f:
        f.write(b"a" * 8192)
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    m = mmap.mmap(fd, 8192)
    if m[:4] != b"aaaa":
        fail("mmap of an O_DIRECT file reads wrong data")
    m[0:4] = b"bbbb"
    m.flush()
    buf = mmap.mmap(-1, 4096)
    os.preadv(fd, [buf], 0)
    if buf[:4] != b"bbbb":
        fail("an O_DIRECT read does not see a store through mmap")
    buf[:4] = b"cccc"
    os.pwritev(fd, [buf], 0)
    if m[:4] != b"cccc":
        fail("the mapping does not see an O_DIRECT write")
    m.close()
    os.close(fd)
    print("ok: mmap of a file opened with O_DIRECT, coherent both ways")


def check_fstat_unlinked(mnt, d):
    fd = os.open(f"{d}/u", os.O_RDWR | os.O_CREAT, 0o644)
    os.unlink(f"{d}/u")
    if os.fstat(fd).st_nlink != 0:
        fail(f"fstat of an open, unlinked file: nlink {os.fstat(fd).st_nlink}")
    os.write(fd, b"still here")
    os.close(fd)
    # rename over open files and directories (xfstests generic/035)
    for kind in ("file", "dir"):
        a, b = f"{d}/ro_{kind}1", f"{d}/ro_{kind}2"
        if kind == "file":
            open(a, "w").close()
            open(b, "w").close()
            fd = os.open(b, os.O_RDONLY)
        else:
            os.mkdir(a)
            os.mkdir(b)
            fd = os.open(b, os.O_RDONLY | os.O_DIRECTORY)
        os.rename(a, b)
        st = os.fstat(fd)
        if st.st_nlink != 0:
            fail(f"fstat of a {kind} renamed over while open: nlink {st.st_nlink}")
        os.close(fd)
    print("ok: nlink 0 in fstat of open files and directories that lost their name")


def check_xattr_many(mnt, d):
    path = f"{d}/xa"
    open(path, "w").close()
    big = bytes(range(256)) * 16
    os.setxattr(path, "user.big", big[:4000])
    for i in range(100):
        os.setxattr(path, f"user.small{i}", f"value {i}".encode())
    v64 = os.urandom(65536)
    os.setxattr(path, "user.max", v64)
    for i in range(1000):
        os.setxattr(path, f"user.attribute_{i}", b"x" * (i % 50))
    names = set(os.listxattr(path))
    if len(names) != 1102:
        fail(f"listxattr: {len(names)} names, want 1102")
    if os.getxattr(path, "user.big") != big[:4000] or os.getxattr(path, "user.max") != v64:
        fail("a large value reads back wrong")
    for i in range(0, 1000, 97):
        if os.getxattr(path, f"user.attribute_{i}") != b"x" * (i % 50):
            fail(f"user.attribute_{i} reads back wrong")
    try:
        os.setxattr(path, "user.toobig", b"y" * 65537)
        fail("a value over 64 KiB was taken")
    except OSError as e:
        if e.errno not in (errno.E2BIG, errno.ERANGE, errno.ENOSPC):
            fail(f"a value over 64 KiB: {e}")
    for i in range(1000):
        os.removexattr(path, f"user.attribute_{i}")
    os.removexattr(path, "user.max")
    if len(os.listxattr(path)) != 101:
        fail(f"after removals: {len(os.listxattr(path))} names, want 101")
    print("ok: 1102 xattrs (one of 64 KiB) on one file, then 1001 removed")


def check_nd_mmap(mnt, d):
    """np.memmap of an N-D space's data file, coherent with writes to its
    blocks and slices (DIR is unused: the space is made in nd/)."""
    import numpy as np
    sp = f"{mnt}/nd/mm"
    os.mkdir(sp)
    os.setxattr(sp, "user.gstore.shape", b"64x64")
    os.setxattr(sp, "user.gstore.dtype", b"float32")
    data = np.memmap(f"{sp}/data", dtype=np.float32, mode="r+", shape=(64, 64))
    data[:] = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    data.flush()
    with open(f"{sp}/slice/2:3,0:64", "rb") as f:
        row = np.frombuffer(f.read(), dtype=np.float32)
    if not np.array_equal(row, np.arange(128, 192, dtype=np.float32)):
        fail("a slice does not see stores through np.memmap of data")
    with open(f"{sp}/slice/5:6,0:64", "r+b") as f:
        f.write(np.full(64, -1, dtype=np.float32).tobytes())
    if not (data[5] == -1).all() or data[6, 0] != 6 * 64:
        fail("np.memmap of data does not see a write to a slice")
    del data
    ro = np.memmap(f"{sp}/data", dtype=np.float32, mode="r", shape=(64, 64))
    if ro[5, 3] != -1 or ro[63, 63] != 64 * 64 - 1:
        fail("a second np.memmap of data reads wrong values")
    print("ok: np.memmap of nd data, coherent with slice reads and writes")


def main():
    mnt, d = sys.argv[1], sys.argv[2]
    for check in sys.argv[3:]:
        globals()[f"check_{check}"](mnt, d)


if __name__ == "__main__":
    main()
