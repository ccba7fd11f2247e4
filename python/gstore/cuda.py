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


class CudaArray(Closable):
    """An array of a mounted gstore, attached for GPU reads (gs_cuda_attach).

    @array: a gstore.Array or a path (then dtype/shape/row_bytes as for Array).
    buf_bytes: the CAM staging region (0: the library's 64 MiB): a batch of
    rows larger than it is read in several rounds.  block_size: the CAM block
    (0: 4096).  device: the CUDA device.
    """

    def __init__(self, array, buf_bytes=0, block_size=0, device=0, **array_kw):
        self._lib = _lib.libgstore_cuda()
        self._c = None
        self.array = array if isinstance(array, Array) else Array(array, **array_kw)
        self.path = self.array.path
        self.device = device
        p = _lib.CudaParams()
        p.buf_bytes = buf_bytes
        p.block_size = block_size
        p.device = device
        c = ctypes.c_void_p()
        check(self._lib.gs_cuda_attach(ctypes.byref(c), self.path.encode(), ctypes.byref(p)),
              "gs_cuda_attach", self.path)
        self._c = c

    def close(self):
        if getattr(self, "_c", None):
            self._lib.gs_cuda_close(self._c)
            self._c = None

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

    def gather(self, rows, out=None, stream=None):
        """Rows rows[i] of the array, in that order, in GPU memory: a DeviceBuffer of shape
        (n, *row_shape), or @out (a C-contiguous CUDA tensor/array, filled and returned).
        @stream: a cudaStream_t as an int (None: the legacy default stream); the call
        returns when the rows are there."""
        if not self._c:
            raise GstoreError(errno.EBADF, "gather on a closed CudaArray", self.path)
        a = self.array
        if np is not None:
            idx = np.ascontiguousarray(np.asarray(rows).reshape(-1), dtype=np.int64)
            n = int(idx.size)
            if n and (int(idx.min()) < 0 or int(idx.max()) >= a.nrows):
                bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
                raise GstoreRangeError("row %d out of range (%d rows)" % (bad, a.nrows),
                                       self.path)
            idx = idx.view(np.uint64)
            rows_ptr = idx.ctypes.data
        else:
            rows = [int(r) for r in rows]
            n = len(rows)
            for r in rows:
                if r < 0 or r >= a.nrows:
                    raise GstoreRangeError("row %d out of range (%d rows)" % (r, a.nrows),
                                           self.path)
            idx = (ctypes.c_uint64 * max(1, n))(*rows)
            rows_ptr = ctypes.addressof(idx)
        nbytes = n * a.row_bytes
        if out is None:
            out = DeviceBuffer(nbytes, (n,) + a.row_shape, a.typestr, self.device)
            dst = out.ptr
        else:
            dst = _cai_ptr(out, nbytes)
        check(self._lib.gs_cuda_read_rows(self._c, a.row_bytes, rows_ptr, n, dst, stream),
              "gather %d rows into GPU memory" % n, self.path)
        return out
