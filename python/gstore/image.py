# SPDX-License-Identifier: MIT
"""An unmounted gstore image opened in-process through libgstore (ctypes).

A process may open an image that no gstorefs serves, exclusively
(gs_fs_mount(3)); its graphs then answer through the library itself:
gs_graph_degree(3), gs_graph_neighbors(3) and gs_graph_sample(3), the C
k-hop sampler that the GPU's gs_cuda_graph_sample repeats exactly.  For a
mounted store use gstore.Graph on graph/NAME (the same sampling, computed
over the mount's files).
"""
import ctypes
import errno
import os

from . import _lib
from ._lib import Closable, GstoreError, check
from .graph import MAX_HOPS, Sample

__all__ = ["Image", "ImageGraph", "CudaGraph", "open_image"]

GS_FS_RDONLY = 1 << 0
GS_FS_BUFFERED = 1 << 1
GS_FS_WAIT = 1 << 2
GS_GRAPH_OUT, GS_GRAPH_IN = 0, 1
GS_GRAPH_RDONLY = 1 << 0


class _FsOpts(ctypes.Structure):
    """struct gs_fs_opts (include/gstore_fs.h), zero-padded at the end."""
    _fields_ = [("path", ctypes.c_char_p), ("flags", ctypes.c_uint32),
                ("cache_bytes", ctypes.c_size_t), ("line_size", ctypes.c_uint32),
                ("pollers", ctypes.c_uint32), ("queue_depth", ctypes.c_uint32),
                ("fault", ctypes.c_char_p), ("backend", ctypes.c_char_p),
                ("dirty_bytes", ctypes.c_uint64), ("_pad", ctypes.c_uint8 * 256)]


class _Sample(ctypes.Structure):
    """struct gs_graph_sample (include/gstore_graph.h)."""
    _fields_ = [("nnodes", ctypes.c_uint64), ("nedges", ctypes.c_uint64),
                ("nhops", ctypes.c_uint32), ("rsvd", ctypes.c_uint32),
                ("hop_nodes", ctypes.c_uint64 * (MAX_HOPS + 2)),
                ("hop_edges", ctypes.c_uint64 * (MAX_HOPS + 1)),
                ("nodes", ctypes.POINTER(ctypes.c_uint64)),
                ("src", ctypes.POINTER(ctypes.c_uint64)),
                ("dst", ctypes.POINTER(ctypes.c_uint64)),
                ("src_pos", ctypes.POINTER(ctypes.c_uint32)),
                ("dst_pos", ctypes.POINTER(ctypes.c_uint32))]


def _lib_graph():
    lib = _lib.libgstore()
    if not getattr(lib, "_gstore_image", False):
        vp, u64, u32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32
        for name, res, args in (
                ("gs_fs_mount", ctypes.c_int, (ctypes.POINTER(vp), ctypes.POINTER(_FsOpts))),
                ("gs_fs_unmount", ctypes.c_int, (vp,)),
                ("gs_graph_open", ctypes.c_int,
                 (vp, ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(vp))),
                ("gs_graph_close", ctypes.c_int, (vp,)),
                ("gs_graph_degree", ctypes.c_int64, (vp, u64, ctypes.c_uint)),
                ("gs_graph_neighbors", ctypes.c_int64,
                 (vp, u64, ctypes.c_uint, vp, vp, ctypes.c_size_t)),
                ("gs_graph_sample", ctypes.c_int,
                 (vp, vp, u32, vp, u32, u64, ctypes.POINTER(_Sample))),
                ("gs_graph_sample_free", None, (ctypes.POINTER(_Sample),))):
            if not hasattr(lib, name):
                raise GstoreError(errno.EOPNOTSUPP, "libgstore has no %s" % name)
            f = getattr(lib, name)
            f.restype, f.argtypes = res, list(args)
        lib._gstore_image = True
    return lib


class Image(Closable):
    """An image file (or pool's first member) opened in-process, read-only unless
    @writable; no gstorefs may have it mounted (EBUSY).  A daemon just unmounted that
    still writes back is waited for (GS_FS_WAIT)."""

    def __init__(self, path, writable=False, cache_bytes=64 << 20):
        self._lib = _lib_graph()
        self._fs = None
        self.path = os.fspath(path)
        self._graphs = []
        o = _FsOpts()
        o.path = self.path.encode()
        o.flags = (0 if writable else GS_FS_RDONLY) | GS_FS_WAIT
        o.cache_bytes = cache_bytes
        fs = ctypes.c_void_p()
        ret = self._lib.gs_fs_mount(ctypes.byref(fs), ctypes.byref(o))
        if ret == -errno.EINVAL:	# no O_DIRECT where the image lies (tmpfs)
            o.flags |= GS_FS_BUFFERED
            ret = self._lib.gs_fs_mount(ctypes.byref(fs), ctypes.byref(o))
        check(ret, "open image", self.path)
        self._fs = fs

    def graph(self, name):
        """graph NAME of the image: an ImageGraph (closed with the image at the latest)."""
        g = ImageGraph(self, name)
        self._graphs.append(g)
        return g

    def close(self):
        for g in getattr(self, "_graphs", []):
            g.close()
        if getattr(self, "_fs", None):
            check(self._lib.gs_fs_unmount(self._fs), "close image", self.path)
            self._fs = None


class ImageGraph(Closable):
    """A graph of an Image, through libgstore: vertex ids are indices where the graph has
    no id map (dense ids), as in gs_graph_sample(3)."""

    def __init__(self, image, name):
        self._lib = image._lib
        self._g = None
        self.image = image
        self._cuda = []
        self.path = "%s:graph/%s" % (image.path, name)
        g = ctypes.c_void_p()
        check(self._lib.gs_graph_open(image._fs, name.encode(), GS_GRAPH_RDONLY,
                                      ctypes.byref(g)), "open graph", self.path)
        self._g = g

    def close(self):
        for c in getattr(self, "_cuda", []):
            c.close()		# before the graph they read
        if getattr(self, "_g", None):
            self._lib.gs_graph_close(self._g)
            self._g = None

    def cuda(self, **kw):
        """This graph on the GPU: a CudaGraph (cache_bytes=, device=)."""
        c = CudaGraph(self, **kw)
        self._cuda.append(c)
        return c

    def degree(self, v, direction="out"):
        return check(self._lib.gs_graph_degree(self._g, int(v), GS_GRAPH_IN if direction == "in"
                                               else GS_GRAPH_OUT), "degree of %d" % v, self.path)

    def neighbors(self, v, direction="out"):
        """Vertex @v's neighbour ids as a list."""
        d = GS_GRAPH_IN if direction == "in" else GS_GRAPH_OUT
        cap = 64
        while True:
            ids = (ctypes.c_uint64 * cap)()
            n = check(self._lib.gs_graph_neighbors(self._g, int(v), d, ids, None, cap),
                      "neighbours of %d" % v, self.path)
            if n <= cap:
                return list(ids[:n])
            cap = n

    def sample(self, seeds, fanouts, rng_seed=0):
        """gs_graph_sample(3): the same Sample as gstore.Graph.sample()."""
        seeds = [int(s) for s in (seeds.tolist() if hasattr(seeds, "tolist") else seeds)]
        fanouts = [int(f) for f in fanouts]
        cs = (ctypes.c_uint64 * max(1, len(seeds)))(*seeds)
        cf = (ctypes.c_uint32 * max(1, len(fanouts)))(*fanouts)
        s = _Sample()
        check(self._lib.gs_graph_sample(self._g, cs, len(seeds), cf, len(fanouts),
                                        int(rng_seed) & ((1 << 64) - 1), ctypes.byref(s)),
              "gs_graph_sample", self.path)
        try:
            nn, ne, h = s.nnodes, s.nedges, s.nhops

            def arr(p, n):
                return p[:n] if n else []	# (an empty array may be NULL)
            return Sample(arr(s.nodes, nn), arr(s.src, ne), arr(s.dst, ne), arr(s.src_pos, ne),
                          arr(s.dst_pos, ne), list(s.hop_nodes[:h + 2]),
                          list(s.hop_edges[:h + 1]))
        finally:
            self._lib.gs_graph_sample_free(ctypes.byref(s))


def open_image(path, **kw):
    """gstore.Image(path, ...): see Image."""
    return Image(path, **kw)


# ---- the graph on the GPU (gstore_cuda_graph.h), for an image opened in-process

class _CgParams(ctypes.Structure):
    """struct gs_cuda_graph_params, zero-padded at the end."""
    _fields_ = [("cache_bytes", ctypes.c_size_t), ("stage_bytes", ctypes.c_size_t),
                ("max_io", ctypes.c_uint32), ("nio", ctypes.c_uint32),
                ("device", ctypes.c_int), ("_pad", ctypes.c_uint8 * 256)]


class _CgSample(ctypes.Structure):
    """struct gs_cuda_graph_sample: the arrays are GPU memory."""
    _fields_ = [("nnodes", ctypes.c_uint64), ("nedges", ctypes.c_uint64),
                ("nhops", ctypes.c_uint32), ("rsvd", ctypes.c_uint32),
                ("hop_nodes", ctypes.c_uint64 * (MAX_HOPS + 2)),
                ("hop_edges", ctypes.c_uint64 * (MAX_HOPS + 1)),
                ("nodes", ctypes.c_void_p), ("src", ctypes.c_void_p),
                ("dst", ctypes.c_void_p), ("src_pos", ctypes.c_void_p),
                ("dst_pos", ctypes.c_void_p),
                ("cap_nodes", ctypes.c_uint64), ("cap_edges", ctypes.c_uint64)]


class _CgStats(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_double), ("bytes_read", ctypes.c_uint64),
                ("requests", ctypes.c_uint64), ("passes", ctypes.c_uint32),
                ("rsvd", ctypes.c_uint32)]


class _QParams(ctypes.Structure):
    """struct gs_q_params (include/gstore_q.h), zero-padded at the end."""
    _fields_ = [("backend", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("size", ctypes.c_uint64), ("flags", ctypes.c_uint32),
                ("queue_depth", ctypes.c_uint32), ("min_pollers", ctypes.c_uint32),
                ("max_pollers", ctypes.c_uint32), ("spin_us", ctypes.c_uint32),
                ("ring_entries", ctypes.c_uint32), ("fault", ctypes.c_char_p),
                ("idle_ms", ctypes.c_uint32), ("max_inflight", ctypes.c_uint32),
                ("_pad", ctypes.c_uint8 * 256)]


GS_Q_RDONLY, GS_Q_BUFFERED = 1 << 0, 1 << 1


def _lib_cuda_graph():
    """libgstore_cuda with gs_cuda_graph_* prototyped, or None where it has none."""
    try:
        lib = _lib.libgstore_cuda()
    except GstoreError:
        return None
    if not hasattr(lib, "gs_cuda_graph_sample"):
        return None
    if not getattr(lib, "_gstore_cgraph", False):
        vp = ctypes.c_void_p
        g = _lib.libgstore()
        for f, res, args in (
                (g.gs_q_open, ctypes.c_int, (ctypes.POINTER(vp), ctypes.POINTER(_QParams))),
                (g.gs_q_close, None, (vp,)),
                (lib.gs_cuda_graph_open, ctypes.c_int,
                 (ctypes.POINTER(vp), vp, vp, ctypes.POINTER(_CgParams))),
                (lib.gs_cuda_graph_close, None, (vp,)),
                (lib.gs_cuda_graph_sync, ctypes.c_int, (vp,)),
                (lib.gs_cuda_graph_sample, ctypes.c_int,
                 (vp, vp, ctypes.c_uint32, vp, ctypes.c_uint32, ctypes.c_uint64,
                  ctypes.POINTER(_CgSample), ctypes.POINTER(_CgStats))),
                (lib.gs_cuda_graph_sample_free, None, (ctypes.POINTER(_CgSample),))):
            f.restype, f.argtypes = res, list(args)
        if hasattr(lib, "gs_cuda_graph_attach"):
            lib.gs_cuda_graph_attach.restype = ctypes.c_int
            lib.gs_cuda_graph_attach.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p,
                                                 ctypes.POINTER(_CgParams)]
        lib._gstore_cgraph = True
    return lib


class CudaGraph(Closable):
    """A graph on the GPU: an ImageGraph (gs_cuda_graph_open over a read-only gs_q of
    the same image) or a mounted gstore.Graph (gs_cuda_graph_attach through the
    daemon's attach socket).  sample() is gs_cuda_graph_sample(), the same nodes and
    edges as gs_graph_sample(3), left in GPU memory; sync() is the sync point after
    updates made on the CPU side (gs_cuda_graph_sync(3))."""

    def __init__(self, graph, cache_bytes=0, device=0):
        self._lib = _lib_cuda_graph()
        if self._lib is None:
            raise GstoreError(errno.EOPNOTSUPP, "libgstore_cuda has no gs_cuda_graph_sample")
        self._glib = _lib.libgstore()
        self._q = self._cg = None
        self.graph, self.device, self.path = graph, device, graph.path
        self._s = _CgSample()
        self._have_s = False
        p = _CgParams()
        p.cache_bytes = cache_bytes
        p.device = device
        if not hasattr(graph, "image"):		# a mounted graph: attach
            if not hasattr(self._lib, "gs_cuda_graph_attach"):
                raise GstoreError(errno.EOPNOTSUPP, "libgstore_cuda has no gs_cuda_graph_attach")
            cg = ctypes.c_void_p()
            check(self._lib.gs_cuda_graph_attach(ctypes.byref(cg), os.fsencode(self.path),
                                                 ctypes.byref(p)),
                  "gs_cuda_graph_attach", self.path)
            self._cg = cg
            return
        qp = _QParams()
        qp.path = graph.image.path.encode()
        qp.flags = GS_Q_RDONLY
        q = ctypes.c_void_p()
        ret = self._glib.gs_q_open(ctypes.byref(q), ctypes.byref(qp))
        if ret == -errno.EINVAL:	# no O_DIRECT where the image lies
            qp.flags |= GS_Q_BUFFERED
            ret = self._glib.gs_q_open(ctypes.byref(q), ctypes.byref(qp))
        check(ret, "gs_q_open", graph.image.path)
        self._q = q
        cg = ctypes.c_void_p()
        try:
            check(self._lib.gs_cuda_graph_open(ctypes.byref(cg), graph._g, q, ctypes.byref(p)),
                  "gs_cuda_graph_open", self.path)
        except BaseException:
            self.close()
            raise
        self._cg = cg

    def close(self):
        if getattr(self, "_have_s", False):
            self._lib.gs_cuda_graph_sample_free(ctypes.byref(self._s))
            self._have_s = False
        if getattr(self, "_cg", None):
            self._lib.gs_cuda_graph_close(self._cg)
            self._cg = None
        if getattr(self, "_q", None):
            self._glib.gs_q_close(self._q)
            self._q = None

    def sync(self):
        """The sync point: updates made on the CPU side since (through the mount, or
        in-process) are merged and seen by the next sample()."""
        check(self._lib.gs_cuda_graph_sync(self._cg), "gs_cuda_graph_sync", self.path)

    def sample(self, seeds, fanouts, rng_seed=0):
        """A Sample whose nodes, src, dst (uint64) and src_pos, dst_pos (uint32) are
        DeviceBuffers of their own (copies: the library reuses its arrays next call)."""
        from .cuda import DeviceBuffer
        seeds = [int(s) for s in (seeds.tolist() if hasattr(seeds, "tolist") else seeds)]
        fanouts = [int(f) for f in fanouts]
        cs = (ctypes.c_uint64 * max(1, len(seeds)))(*seeds)
        cf = (ctypes.c_uint32 * max(1, len(fanouts)))(*fanouts)
        st = _CgStats()
        self._have_s = True
        check(self._lib.gs_cuda_graph_sample(self._cg, cs, len(seeds), cf, len(fanouts),
                                             int(rng_seed) & ((1 << 64) - 1),
                                             ctypes.byref(self._s), ctypes.byref(st)),
              "gs_cuda_graph_sample", self.path)
        s, cl = self._s, _lib.libgstore_cuda()
        out = []
        for ptr, n, ts in ((s.nodes, s.nnodes, "<u8"), (s.src, s.nedges, "<u8"),
                           (s.dst, s.nedges, "<u8"), (s.src_pos, s.nedges, "<u4"),
                           (s.dst_pos, s.nedges, "<u4")):
            b = DeviceBuffer(n * int(ts[2:]), (n,), ts, self.device)
            if n:
                check(cl.gs_cuda_mem_copy(b.ptr, ptr, b.nbytes), "copy the sample",
                      self.path)
            out.append(b)
        h = s.nhops
        r = Sample.__new__(Sample)
        r.nodes, r.src, r.dst, r.src_pos, r.dst_pos = out
        r.hop_nodes, r.hop_edges = list(s.hop_nodes[:h + 2]), list(s.hop_edges[:h + 1])
        r.stats = {"seconds": st.seconds, "bytes_read": st.bytes_read,
                   "requests": st.requests, "passes": st.passes}
        return r
