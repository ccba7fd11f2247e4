# SPDX-License-Identifier: MIT
"""Gathered rows as GPU memory: attach to the mount, read rows through CAM into a buffer.

CudaArray attaches to the gstorefs that serves the array (gs_cuda_attach(3):
the daemon's rings and pollers in shared memory) and gathers rows with
gs_cuda_read_rows() (include/gstore_cuda_rows.h): GPU threads issue the
block reads, the rows land in one GPU buffer.  The result is a DeviceBuffer
exposing __cuda_array_interface__ (torch.as_tensor, cupy.asarray, numba)
and DLPack (torch.from_dlpack), neither copying; or the rows go into a
CUDA tensor/array the caller passes as `out`.
"""
import ctypes
import errno
import os
import sys

from . import _lib
from ._lib import Closable, GstoreError, GstoreRangeError, check
from .array import Array

try:
    import numpy as np
except ImportError:
    np = None

__all__ = ["CudaArray", "DeviceBuffer", "cuda_available"]


def cuda_available():
    """True if libgstore_cuda.so loads (built where nvcc exists); says nothing of a GPU."""
    try:
        _lib.libgstore_cuda()
        return True
    except GstoreError:
        return False


# ---- DLPack (dlpack.h v0.8 layout: DLManagedTensor, the unversioned capsule "dltensor")
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]
_KDLCUDA = 2
_DL_CODES = {"i": 0, "u": 1, "f": 2}	# kDLInt, kDLUInt, kDLFloat
_CAPSULE_NAME = b"dltensor"
_alive = {}	# manager_ctx -> what the consumer holds (released by the deleter)
_next_ctx = [1]


@_DELETER
def _dl_deleter(mt):
    _alive.pop(mt.contents.manager_ctx, None)


_CAPSULE_DTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DTOR
def _capsule_dtor(cap):
    # never consumed (a consumer renames it "used_dltensor" and owns the tensor then)
    api = ctypes.pythonapi
    if api.PyCapsule_IsValid(ctypes.c_void_p(cap), _CAPSULE_NAME):
        p = api.PyCapsule_GetPointer(ctypes.c_void_p(cap), _CAPSULE_NAME)
        _dl_deleter(ctypes.cast(p, ctypes.POINTER(_DLManagedTensor)))


def _capsule_api():
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DTOR]
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return api


def dlpack_capsule(ptr, shape, typestr, device, owner):
    """A "dltensor" capsule (DLManagedTensor) describing C-contiguous memory at @ptr on
    @device ((DLDeviceType, id)); @owner stays alive until the consumer's deleter runs
    (or the capsule dies unconsumed)."""
    kind, bits = typestr[1], int(typestr[2:]) * 8
    if kind not in _DL_CODES:
        raise GstoreError(errno.EINVAL, "DLPack: no type for %r" % typestr)
    api = _capsule_api()
    mt = _DLManagedTensor()
    dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    mt.dl_tensor.data = ptr
    mt.dl_tensor.device = _DLDevice(*device)
    mt.dl_tensor.ndim = len(shape)
    mt.dl_tensor.dtype = _DLDataType(_DL_CODES[kind], bits, 1)
    mt.dl_tensor.shape = dims
    mt.dl_tensor.strides = None
    mt.dl_tensor.byte_offset = 0
    ctx = _next_ctx[0]
    _next_ctx[0] += 1
    mt.manager_ctx = ctx
    mt.deleter = _dl_deleter
    _alive[ctx] = (mt, dims, owner)
    return api.PyCapsule_New(ctypes.addressof(mt), _CAPSULE_NAME, _capsule_dtor)


class DeviceBuffer:
    """GPU memory from gs_cuda_mem_alloc(), freed when the last user (this object, or a
    tensor made from it without a copy) lets go."""

    def __init__(self, nbytes, shape, typestr, device=0):
        self._lib = _lib.libgstore_cuda()
        self.ptr = None
        p = ctypes.c_void_p()
        check(self._lib.gs_cuda_mem_alloc(ctypes.byref(p), nbytes),
              "allocate %d bytes of GPU memory" % nbytes)
        self.ptr = p.value
        self.nbytes = nbytes
        self.shape = tuple(shape)
        self.typestr = typestr
        self.device = device

    def __del__(self):
        if getattr(self, "ptr", None):
            self._lib.gs_cuda_mem_free(self.ptr)
            self.ptr = None

    @property
    def __cuda_array_interface__(self):
        # stream None: the data is complete (gs_cuda_read_rows returned after it landed)
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr or 0, False),
                "strides": None, "version": 3, "stream": None}

    def __dlpack_device__(self):
        return (_KDLCUDA, self.device)

    def __dlpack__(self, stream=None):
        """A DLPack capsule over this memory (no copy); @stream is not waited on: the data
        is complete already."""
        return dlpack_capsule(self.ptr, self.shape, self.typestr, (_KDLCUDA, self.device), self)

    def copy_to_host(self):
        """The contents as a numpy array (bytes without numpy)."""
        out = np.empty(self.shape, dtype=np.dtype(self.typestr)) if np is not None else \
            bytearray(self.nbytes)
        dst = out.ctypes.data if np is not None else \
            ctypes.addressof((ctypes.c_char * self.nbytes).from_buffer(out))
        check(self._lib.gs_cuda_mem_copy(dst, self.ptr, self.nbytes), "copy GPU -> host")
        return out


def _cai_ptr(out, nbytes):
    """The device pointer of a C-contiguous CUDA array (torch tensor, cupy array, ...)."""
    cai = getattr(out, "__cuda_array_interface__", None)
    if cai is None:
        raise GstoreError(errno.EINVAL, "out has no __cuda_array_interface__ (not GPU memory)")
    shape, ts, strides = cai["shape"], cai["typestr"], cai.get("strides")
    n = int(ts[2:])
    for x in shape:
        n *= x
    if strides is not None:
        want, step = [], int(ts[2:])
        for x in reversed(shape):
            want.insert(0, step)
            step *= x
        if tuple(strides) != tuple(want):
            raise GstoreError(errno.EINVAL, "out is not C-contiguous")
    if n < nbytes:
        raise GstoreError(errno.EINVAL, "out holds %d bytes, the rows need %d" % (n, nbytes))
    return cai["data"][0]


def _current_stream(device):
    """torch's current stream on @device where torch has initialised CUDA (None: the
    legacy default stream): the gather then runs after what torch queued there (the
    kernels that last used an `out` tensor, say)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_stream(device).cuda_stream or None
    except Exception:		# a torch without CUDA, or an odd build: the default stream
        pass
    return None


class GatherParams(ctypes.Structure):
    """struct gs_cuda_gather_params (include/gstore_cuda_gather.h), zero-padded at the end."""
    _fields_ = [("row_bytes", ctypes.c_uint64), ("base", ctypes.c_uint64),
                ("nrows", ctypes.c_uint64), ("max_run", ctypes.c_uint32),
                ("threads", ctypes.c_uint32), ("tier_bytes", ctypes.c_uint64),
                ("tier_fd", ctypes.c_int), ("tier_file_off", ctypes.c_uint64),
                ("tier_chunk", ctypes.c_uint32), ("tier_depth", ctypes.c_uint32),
                ("_pad", ctypes.c_uint8 * 256)]


def _gather_lib(lib):
    """gs_cuda_gather's prototypes, if this libgstore_cuda has it (gstore_cuda_gather.h)."""
    if not hasattr(lib, "gs_cuda_gather_open"):
        return False
    if not getattr(lib, "_gstore_gather", False):
        vp = ctypes.c_void_p
        for name, res, args in (
                ("gs_cuda_gather_open", ctypes.c_int,
                 (ctypes.POINTER(vp), vp, ctypes.POINTER(GatherParams))),
                ("gs_cuda_gather_close", None, (vp,)),
                ("gs_cuda_gather", ctypes.c_int, (vp, vp, ctypes.c_uint64, vp, vp)),
                ("gs_cuda_gather_sync", ctypes.c_int, (vp,))):
            f = getattr(lib, name)
            f.restype, f.argtypes = res, list(args)
        lib._gstore_gather = True
    return True


def _gpu_rows(rows):
    """(device pointer, n) of a C-contiguous 1-D int64/uint64 CUDA array, else None."""
    cai = getattr(rows, "__cuda_array_interface__", None)
    if cai is None:
        return None
    if cai["typestr"] not in ("<i8", "<u8") or len(cai["shape"]) != 1 or \
            cai.get("strides") not in (None, (8,)):
        raise GstoreError(errno.EINVAL, "rows in GPU memory must be one contiguous run of "
                          "int64 or uint64 (got %s %r)" % (cai["typestr"], cai["shape"]))
    return cai["data"][0], int(cai["shape"][0])


class CudaArray(Closable):
    """An array of a mounted gstore, attached for GPU reads (gs_cuda_attach).

    @array: a gstore.Array or a path (then dtype/shape/row_bytes as for Array).
    buf_bytes: the CAM staging region (0: the library's 64 MiB): a batch of
    rows larger than it is read in several rounds.  block_size: the CAM block
    (0: 4096).  device: the CUDA device.  engine: "gather" (gs_cuda_gather(3):
    blocks read once per batch, runs of blocks per request, reads overlapped
    with copies), "rows" (gs_cuda_read_rows(3)), or "auto": gather where the
    library has it.  tier_bytes (engine gather): a host-memory tier of the
    array's first tier_bytes, filled in the background (0: none).
    """

    def __init__(self, array, buf_bytes=0, block_size=0, device=0, engine="auto",
                 tier_bytes=0, **array_kw):
        self._lib = _lib.libgstore_cuda()
        self._c = self._g = None
        self._rows_dev = None
        self._tier_fd = -1
        self._own_array = not isinstance(array, Array)	# ours to close, then
        self.array = array if not self._own_array else Array(array, **array_kw)
        self.path = self.array.path
        self.device = device
        if engine not in ("auto", "gather", "rows"):
            raise GstoreError(errno.EINVAL, "engine %r (auto, gather, rows)" % (engine,))
        have = _gather_lib(self._lib)
        if engine == "gather" and not have:
            raise GstoreError(errno.EOPNOTSUPP, "this libgstore_cuda has no gs_cuda_gather")
        self.engine = "gather" if have and engine != "rows" else "rows"
        p = _lib.CudaParams()
        p.buf_bytes = buf_bytes
        p.block_size = block_size
        p.device = device
        c = ctypes.c_void_p()
        check(self._lib.gs_cuda_attach(ctypes.byref(c), self.path.encode(), ctypes.byref(p)),
              "gs_cuda_attach", self.path)
        self._c = c
        if self.engine == "gather":
            try:
                self._open_gather(tier_bytes)
            except BaseException:
                self.close()
                raise

    def _open_gather(self, tier_bytes):
        gp = GatherParams()
        gp.row_bytes = self.array.row_bytes
        gp.nrows = self.array.nrows
        gp.tier_fd = -1
        if tier_bytes:
            self._tier_fd = os.open(self.path, os.O_RDONLY)
            gp.tier_fd = self._tier_fd
            gp.tier_bytes = tier_bytes
        g = ctypes.c_void_p()
        check(self._lib.gs_cuda_gather_open(ctypes.byref(g), self._c, ctypes.byref(gp)),
              "gs_cuda_gather_open", self.path)
        self._g = g

    def close(self):
        if getattr(self, "_g", None):
            self._lib.gs_cuda_gather_close(self._g)
            self._g = None
        if getattr(self, "_c", None):
            self._lib.gs_cuda_close(self._c)
            self._c = None
        if getattr(self, "_tier_fd", -1) >= 0:
            os.close(self._tier_fd)
            self._tier_fd = -1
        self._rows_dev = None
        if getattr(self, "_own_array", False):
            self.array.close()	# an open file would keep the mount busy

    @staticmethod
    def has_gather():
        """True if libgstore_cuda has gs_cuda_gather (engine "gather" possible)."""
        return _gather_lib(_lib.libgstore_cuda())

    @property
    def block_size(self):
        return self._lib.gs_cuda_block_size(self._c)

    def debug(self):
        """gs_cuda_debug(3): the ring's counters in one line (safe while a gather runs)."""
        if not self._c:
            return "closed"
        b = ctypes.create_string_buffer(1024)
        self._lib.gs_cuda_debug(self._c, b, len(b))
        return b.value.decode(errors="replace")

    def _host_rows(self, rows):
        """Row indices as contiguous host uint64, range-checked: (keep-alive, pointer, n)."""
        a = self.array
        if np is not None:
            idx = np.ascontiguousarray(np.asarray(rows).reshape(-1), dtype=np.int64)
            n = int(idx.size)
            if n and (int(idx.min()) < 0 or int(idx.max()) >= a.nrows):
                bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
                raise GstoreRangeError("row %d out of range (%d rows)" % (bad, a.nrows),
                                       self.path)
            idx = idx.view(np.uint64)
            return idx, idx.ctypes.data, n
        rows = [int(r) for r in rows]
        for r in rows:
            if r < 0 or r >= a.nrows:
                raise GstoreRangeError("row %d out of range (%d rows)" % (r, a.nrows), self.path)
        idx = (ctypes.c_uint64 * max(1, len(rows)))(*rows)
        return idx, ctypes.addressof(idx), len(rows)

    def _rows_to_gpu(self, ptr, n):
        """Host row indices into a device buffer of ours (kept, grown as needed)."""
        if self._rows_dev is None or self._rows_dev.nbytes < 8 * n:
            self._rows_dev = DeviceBuffer(max(8 * n, 1 << 16), (max(n, 8192),), "<u8",
                                          self.device)
        check(self._lib.gs_cuda_mem_copy(self._rows_dev.ptr, ptr, 8 * n),
              "copy %d row indices to the GPU" % n, self.path)
        return self._rows_dev.ptr

    def gather(self, rows, out=None, stream=None):
        """Rows rows[i] of the array, in that order, in GPU memory: a DeviceBuffer of shape
        (n, *row_shape), or @out (a C-contiguous CUDA tensor/array, filled and returned).

        @rows: host integers (list, numpy array, CPU tensor; checked against the rows
        here), or a 1-D int64/uint64 CUDA tensor (engine gather: used in place; a row out
        of range fails the call with ERANGE, and the context stays failed).  @stream: a
        cudaStream_t as an int (None: torch's current stream where torch uses CUDA, else
        the legacy default stream).  Returns when the rows are there."""
        if not self._c:
            raise GstoreError(errno.EBADF, "gather on a closed CudaArray", self.path)
        a = self.array
        gpu = _gpu_rows(rows)
        keep = None
        if gpu is not None and self.engine == "rows":
            host = np.empty(gpu[1], dtype=np.uint64) if np is not None else None
            if host is None:
                raise GstoreError(errno.EINVAL, "rows in GPU memory need numpy (engine rows)")
            check(self._lib.gs_cuda_mem_copy(host.ctypes.data, gpu[0], 8 * gpu[1]),
                  "copy row indices from the GPU", self.path)
            gpu = None
            rows = host
        if gpu is None:
            keep, rows_ptr, n = self._host_rows(rows)
        else:
            rows_ptr, n = gpu
        nbytes = n * a.row_bytes
        if out is None:
            out = DeviceBuffer(nbytes, (n,) + a.row_shape, a.typestr, self.device)
            dst = out.ptr
        else:
            dst = _cai_ptr(out, nbytes)
        what = "gather %d rows into GPU memory" % n
        if stream is None:
            stream = _current_stream(self.device)
        if self.engine == "rows":
            check(self._lib.gs_cuda_read_rows(self._c, a.row_bytes, rows_ptr, n, dst, stream),
                  what, self.path)
        elif n:
            if gpu is None:
                rows_ptr = self._rows_to_gpu(rows_ptr, n)
            check(self._lib.gs_cuda_gather(self._g, rows_ptr, n, dst, stream), what, self.path)
            check(self._lib.gs_cuda_gather_sync(self._g), what, self.path)
        del keep
        return out
