# SPDX-License-Identifier: MIT
"""Errors, and the shared libraries (libgstore.so, libgstore_cuda.so) through ctypes.

The libraries are looked for in $GSTORE_LIBDIR, then in the build tree this
package sits in (python/gstore -> build/), then where the dynamic linker
looks (an installed gstore: `make install`).  libgstore is loaded with
RTLD_GLOBAL first: libgstore_cuda.so needs it (DT_NEEDED libgstore.so.0),
and a loaded soname satisfies that without a search path.
"""
import ctypes
import errno
import os

__all__ = ["GstoreError", "GstoreRangeError", "Closable", "check", "libgstore",
           "libgstore_cuda", "library_path"]


class GstoreError(OSError):
    """A failed gstore call: .errno is the errno, the message says what was done to what."""

    def __init__(self, err, what, path=None):
        msg = "%s: %s" % (what, os.strerror(err)) if what else os.strerror(err)
        if path is None:
            super().__init__(err, msg)
        else:
            super().__init__(err, msg, str(path))


class GstoreRangeError(GstoreError, IndexError):
    """A row, vertex or element outside the object (errno ERANGE); also an IndexError."""

    def __init__(self, what, path=None):
        super().__init__(errno.ERANGE, what, path)


class Closable:
    """with-statement and garbage-collection support for objects with a close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def check(ret, what, path=None):
    """Raise GstoreError for a negative-errno return, else return @ret."""
    if ret < 0:
        if -ret == errno.ERANGE:
            raise GstoreRangeError(what, path)
        raise GstoreError(-ret, what, path)
    return ret


def from_oserror(e, what, path=None):
    """An OSError of the os module as a GstoreError saying what was being done."""
    return GstoreError(e.errno or errno.EIO, "%s (%s)" % (what, e.strerror or e), path)


_here = os.path.dirname(os.path.abspath(__file__))
_cache = {}


def _candidates(soname):
    env = os.environ.get("GSTORE_LIBDIR")
    if env:
        yield os.path.join(env, soname)
    for build in ("build", "build-asan"):
        yield os.path.normpath(os.path.join(_here, "..", "..", build, soname))
    yield soname		# the dynamic linker's search (ld.so.cache, LD_LIBRARY_PATH)


def _load(soname):
    if soname in _cache:
        return _cache[soname]
    errs = []
    for c in _candidates(soname):
        if os.sep in c and not os.path.exists(c):
            continue
        try:
            lib = ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errs.append("%s: %s" % (c, e))
            continue
        lib._gstore_path = c
        _cache[soname] = lib
        return lib
    raise GstoreError(errno.ENOENT, "cannot load %s (build gstore, or set GSTORE_LIBDIR)%s" %
                      (soname, "; " + "; ".join(errs) if errs else ""))


def _proto(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


def libgstore():
    """libgstore.so.0 with the prototypes this package uses."""
    new = "libgstore.so.0" not in _cache
    lib = _load("libgstore.so.0")
    if new:
        _proto(lib, "gs_attach_split", ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
               ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p))
    return lib


class CudaParams(ctypes.Structure):
    """struct gs_cuda_params (include/gstore_cuda.h), zero-padded at the end: fields
    added there later read as 0, their default."""
    _fields_ = [("block_size", ctypes.c_uint32), ("sq_entries", ctypes.c_uint32),
                ("ncw", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("buf_bytes", ctypes.c_size_t), ("dev_off", ctypes.c_uint64),
                ("nblocks", ctypes.c_uint64), ("ext", ctypes.c_void_p),
                ("next", ctypes.c_uint32), ("device", ctypes.c_int),
                ("_pad", ctypes.c_uint8 * 256)]


def libgstore_cuda():
    """libgstore_cuda.so.0 (needs libgstore.so.0) with the prototypes this package uses."""
    libgstore()
    new = "libgstore_cuda.so.0" not in _cache
    lib = _load("libgstore_cuda.so.0")
    if new:
        vp, u64, sz = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
        _proto(lib, "gs_cuda_attach", ctypes.c_int, ctypes.POINTER(vp), ctypes.c_char_p,
               ctypes.POINTER(CudaParams))
        _proto(lib, "gs_cuda_close", None, vp)
        _proto(lib, "gs_cuda_block_size", ctypes.c_uint32, vp)
        _proto(lib, "gs_cuda_nblocks", u64, vp)
        _proto(lib, "gs_cuda_error", ctypes.c_int, vp)
        _proto(lib, "gs_cuda_debug", ctypes.c_int, vp, ctypes.c_char_p, sz)
        _proto(lib, "gs_cuda_read_rows", ctypes.c_int, vp, u64, vp, u64, vp, vp)
        _proto(lib, "gs_cuda_mem_alloc", ctypes.c_int, ctypes.POINTER(vp), sz)
        _proto(lib, "gs_cuda_mem_free", ctypes.c_int, vp)
        _proto(lib, "gs_cuda_mem_copy", ctypes.c_int, vp, vp, sz)
    return lib


def library_path(cuda=False):
    """Where the library was loaded from (loading it if needed)."""
    return (libgstore_cuda() if cuda else libgstore())._gstore_path
