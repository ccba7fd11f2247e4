# SPDX-License-Identifier: MIT
"""arrays/NAME of a mounted gstore: rows and slices into numpy (the CPU path).

An array file is a flat run of bytes; its element type and shape are the
xattrs user.gstore.dtype (a numpy name or code) and user.gstore.shape
("rows,cols,..."), as `gstore import array` and gstore(5) set them.  A row is
one index of the first dimension: shape[1:] elements.  Reads go through the
file (pread on the mount: the page cache and gstorefs's cache serve them).
"""
import errno
import os

from ._lib import Closable, GstoreError, GstoreRangeError, from_oserror

try:
    import numpy as np
except ImportError:		# numpy is optional: reads then give bytes
    np = None

__all__ = ["Array", "open_array", "create_array", "parse_dtype"]

XA_DTYPE = "user.gstore.dtype"
XA_SHAPE = "user.gstore.shape"

# numpy name -> array-interface type string, for use without numpy
_TYPESTR = {
    "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
}
_CODES = {"i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8",
          "u2": "uint16", "u4": "uint32", "u8": "uint64", "f2": "float16", "f4": "float32",
          "f8": "float64", "b": "int8", "B": "uint8", "h": "int16", "H": "uint16",
          "i": "int32", "I": "uint32", "q": "int64", "Q": "uint64", "e": "float16",
          "f": "float32", "d": "float64"}


def parse_dtype(s):
    """(typestr, itemsize) of a numpy dtype, name or code ('float32', '<f4', 'V16')."""
    if np is not None and not isinstance(s, str):
        d = np.dtype(s)
        return d.str, d.itemsize
    s = str(s).strip()
    if np is not None:
        try:
            d = np.dtype(s)
        except TypeError as e:
            raise GstoreError(errno.EINVAL, "dtype %r: %s" % (s, e)) from None
        if d.byteorder == ">":
            raise GstoreError(errno.EINVAL, "dtype %r: big-endian (gstore is little-endian)" % s)
        return d.newbyteorder("<").str, d.itemsize
    body = s.lstrip("<|=")
    if body[:1] == "V" and body[1:].isdigit() and int(body[1:]) > 0:
        return "|" + body, int(body[1:])
    name = _CODES.get(body, body)
    if name not in _TYPESTR:
        raise GstoreError(errno.EINVAL, "dtype %r: not a little-endian integer or float type" % s)
    ts = _TYPESTR[name]
    return ts, int(ts[2:])


def _getxattr(path, name):
    try:
        return os.getxattr(path, name).decode().strip("\0 \n")
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOTSUP):
            return None
        raise from_oserror(e, "getxattr %s" % name, path) from None


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


class Array(Closable):
    """A mounted array file, seen as shape[0] rows of shape[1:] elements of dtype.

    dtype / shape / row_bytes, when given, override the xattrs: with only
    row_bytes, rows are raw bytes (dtype uint8, shape (nrows, row_bytes)).
    """

    def __init__(self, path, dtype=None, shape=None, row_bytes=None, writable=False):
        self.path = os.fspath(path)
        try:
            self._fd = os.open(self.path, os.O_RDWR if writable else os.O_RDONLY)
        except OSError as e:
            raise from_oserror(e, "open array", self.path) from None
        try:
            self._setup(dtype, shape, row_bytes)
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    def _setup(self, dtype, shape, row_bytes):
        import stat
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):
            raise GstoreError(errno.EINVAL, "not an array file (arrays/NAME)", self.path)
        self.nbytes = st.st_size
        if row_bytes is not None and dtype is None and shape is None:
            dtype = "uint8"
        if dtype is None:
            dtype = _getxattr(self.path, XA_DTYPE) or "uint8"
        self.typestr, self.itemsize = parse_dtype(dtype)
        self.dtype = np.dtype(self.typestr) if np is not None else self.typestr
        if row_bytes is not None:
            row_bytes = int(row_bytes)
            if row_bytes <= 0 or row_bytes % self.itemsize:
                raise GstoreError(errno.EINVAL, "row size %d bytes is not a positive multiple "
                                  "of the %d-byte element" % (row_bytes, self.itemsize), self.path)
            if self.nbytes % row_bytes:
                raise GstoreError(errno.EINVAL, "row size %d bytes does not divide the file's "
                                  "%d bytes" % (row_bytes, self.nbytes), self.path)
            shape = (self.nbytes // row_bytes, row_bytes // self.itemsize)
        if shape is None:
            xs = _getxattr(self.path, XA_SHAPE)
            if xs:
                try:
                    shape = tuple(int(x) for x in xs.split(","))
                except ValueError:
                    raise GstoreError(errno.EINVAL, "bad %s %r" % (XA_SHAPE, xs),
                                      self.path) from None
            else:
                if self.nbytes % self.itemsize:
                    raise GstoreError(errno.EINVAL, "%d bytes are not whole %d-byte elements" %
                                      (self.nbytes, self.itemsize), self.path)
                shape = (self.nbytes // self.itemsize,)
        self.shape = tuple(int(x) for x in shape)
        if not self.shape or any(x < 0 for x in self.shape):
            raise GstoreError(errno.EINVAL, "bad shape %r" % (self.shape,), self.path)
        want = _prod(self.shape) * self.itemsize
        if want != self.nbytes:
            raise GstoreError(errno.EINVAL, "shape %r of %d-byte elements is %d bytes, the file "
                              "has %d" % (self.shape, self.itemsize, want, self.nbytes),
                              self.path)
        self.nrows = self.shape[0]
        self.row_shape = self.shape[1:]
        self.row_bytes = _prod(self.row_shape) * self.itemsize

    # ---- housekeeping
    def close(self):
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1

    def __len__(self):
        return self.nrows

    def __repr__(self):
        return "gstore.Array(%r, dtype=%s, shape=%r)" % (self.path, self.typestr, self.shape)

    def fileno(self):
        return self._fd

    # ---- reads
    def _out(self, n):
        if np is not None:
            return np.empty((n,) + self.row_shape, dtype=self.dtype)
        return bytearray(n * self.row_bytes)

    def _pread_into(self, mv, off):
        done = 0
        while done < len(mv):
            try:
                got = os.preadv(self._fd, [mv[done:]], off + done)
            except OSError as e:
                raise from_oserror(e, "read at byte %d" % (off + done), self.path) from None
            if got == 0:
                raise GstoreError(errno.EIO, "short read at byte %d (the file shrank?)" %
                                  (off + done), self.path)
            done += got

    def _check_row(self, r):
        if r < 0 or r >= self.nrows:
            raise GstoreRangeError("row %d out of range (%d rows)" % (r, self.nrows), self.path)

    def read_rows(self, rows, out=None):
        """Rows rows[i] (any order, repeats allowed) as one (n, *row_shape) array.

        Runs of consecutive rows are read with one pread each.  @out: a
        C-contiguous array of that shape and dtype (or a bytearray) to fill.
        """
        rows = [int(r) for r in (rows.tolist() if hasattr(rows, "tolist") else rows)]
        for r in rows:
            self._check_row(r)
        n = len(rows)
        if out is None:
            out = self._out(n)
        if n == 0 or self.row_bytes == 0:
            return out
        mv = memoryview(out).cast("B")
        if len(mv) < n * self.row_bytes:
            raise GstoreError(errno.EINVAL, "out holds %d bytes, %d rows need %d" %
                              (len(mv), n, n * self.row_bytes), self.path)
        rb = self.row_bytes
        i = 0
        while i < n:
            j = i + 1
            while j < n and rows[j] == rows[j - 1] + 1:
                j += 1
            self._pread_into(mv[i * rb:j * rb], rows[i] * rb)
            i = j
        return out

    def read_slice(self, start, stop):
        """Rows [start, stop) with one read."""
        start, stop, _ = slice(start, stop).indices(self.nrows)
        stop = max(start, stop)
        out = self._out(stop - start)
        if stop == start or self.row_bytes == 0:
            return out
        self._pread_into(memoryview(out).cast("B"), start * self.row_bytes)
        return out

    def read_bytes(self, offset, nbytes):
        """@nbytes bytes at byte @offset (must lie inside the file)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise GstoreRangeError("bytes [%d, %d) outside the file's %d" %
                                   (offset, offset + nbytes, self.nbytes), self.path)
        b = bytearray(nbytes)
        self._pread_into(memoryview(b), offset)
        return bytes(b)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            start, stop, step = idx.indices(self.nrows)
            if step == 1:
                return self.read_slice(start, stop)
            return self.read_rows(range(start, stop, step))
        if isinstance(idx, int) or (np is not None and isinstance(idx, np.integer)):
            r = int(idx)
            if r < 0:
                r += self.nrows
            self._check_row(r)
            out = self.read_rows([r])
            return out[0] if np is not None else bytes(out)
        return self.read_rows(idx)

    # ---- writes (a file opened writable=True)
    def write_rows(self, start, data):
        """Write rows from @start (an array of row_shape rows, or bytes of whole rows)."""
        mv = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
        if len(mv) % self.row_bytes:
            raise GstoreError(errno.EINVAL, "%d bytes are not whole %d-byte rows" %
                              (len(mv), self.row_bytes), self.path)
        if start < 0 or start + len(mv) // self.row_bytes > self.nrows:
            raise GstoreRangeError("rows [%d, %d) out of range (%d rows)" %
                                   (start, start + len(mv) // self.row_bytes, self.nrows),
                                   self.path)
        off, done = start * self.row_bytes, 0
        while done < len(mv):
            try:
                done += os.pwrite(self._fd, mv[done:], off + done)
            except OSError as e:
                raise from_oserror(e, "write at byte %d" % (off + done), self.path) from None

    def sync(self):
        try:
            os.fsync(self._fd)
        except OSError as e:
            raise from_oserror(e, "fsync", self.path) from None

    # ---- the GPU path
    def cuda(self, **kw):
        """This array on the GPU: gstore.cuda.CudaArray over the same file (attach)."""
        from .cuda import CudaArray
        return CudaArray(self, **kw)


def open_array(path, **kw):
    """gstore.Array(path, ...): see Array."""
    return Array(path, **kw)


def create_array(path, data=None, dtype=None, shape=None, exist_ok=False):
    """Make arrays/NAME holding @data (a numpy array, written in C order), or of @shape
    and @dtype (zeros, sparse), and set its dtype and shape xattrs.  Returns an Array."""
    path = os.fspath(path)
    if data is not None:
        if np is None:
            raise GstoreError(errno.EINVAL, "create_array with data needs numpy")
        data = np.ascontiguousarray(data)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        dtype, shape = data.dtype, data.shape
    if dtype is None or shape is None:
        raise GstoreError(errno.EINVAL, "create_array needs data, or dtype and shape")
    typestr, itemsize = parse_dtype(dtype)
    shape = tuple(int(x) for x in shape)
    flags = os.O_RDWR | os.O_CREAT | (0 if exist_ok else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        raise from_oserror(e, "create array", path) from None
    try:
        os.ftruncate(fd, _prod(shape) * itemsize)
        name = np.dtype(typestr).name if np is not None else typestr
        if name.startswith("void"):
            name = "V%d" % itemsize
        os.setxattr(path, XA_DTYPE, name.encode())
        os.setxattr(path, XA_SHAPE, ",".join(str(x) for x in shape).encode())
    except OSError as e:
        raise from_oserror(e, "create array", path) from None
    finally:
        os.close(fd)
    a = Array(path, writable=True)
    if data is not None and data.size:
        a.write_rows(0, data.reshape((shape[0], -1)) if len(shape) > 1 else data)
        a.sync()
    return a
