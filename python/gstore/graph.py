# SPDX-License-Identifier: MIT
"""graph/NAME of a mounted gstore: degree, neighbours, k-hop sampled batches.

Through the mount's files (gstore(5), GRAPH OBJECTS): info (text),
v<ID>/degree and v<ID>/neighbors (little-endian ids of the graph's id
width).  sample() is gs_graph_sample(3)'s algorithm (gstore_graph.h: the
counter-based splitmix64 words of gs_graph_rng(), Floyd's sampling without
replacement of gs_graph_sample_pick()), so for a graph with dense ids (ids
0..|V|-1, info's "id_map: no", where ids are the indices) it gives exactly
the nodes and edges that gs_graph_sample() and the GPU's
gs_cuda_graph_sample() give for the same seeds, fanouts and rng seed.
"""
import errno
import os

from ._lib import GstoreError, GstoreRangeError, from_oserror

try:
    import numpy as np
except ImportError:
    np = None

__all__ = ["Graph", "Sample", "open_graph", "rng", "sample_pick"]

_M64 = (1 << 64) - 1
MAX_HOPS = 8		# GS_GRAPH_SAMPLE_MAX_HOPS
MAX_FANOUT = 1024	# GS_GRAPH_SAMPLE_MAX_FANOUT


def _mix64(x):
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & _M64
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & _M64
    return x ^ (x >> 31)


def rng(seed, hop, v, j):
    """gs_graph_rng(): random word @j of vertex @v at hop @hop."""
    x = _mix64((seed + 0x9e3779b97f4a7c15 * (hop + 1)) & _M64)
    x = _mix64(x ^ ((v * 0xd1b54a32d192ed03) & _M64))
    return _mix64((x + 0x9e3779b97f4a7c15 * (j + 1)) & _M64)


def sample_pick(seed, hop, v, deg, f):
    """gs_graph_sample_pick(): the @f positions (ascending) that @v keeps of @deg > @f."""
    pos = []
    for j in range(deg - f, deg):
        t = rng(seed, hop, v, j) % (j + 1)
        pos.append(j if t in pos else t)
    return sorted(pos)


class Sample:
    """A k-hop sample: nodes (seeds first, then each node as first reached), and per hop
    the edges (src, dst) as vertex ids, with their positions in nodes (src_pos, dst_pos).
    hop_nodes[h]..hop_nodes[h+1] are the nodes hop h - 1 added (h = 0: the seeds);
    hop_edges[h]..hop_edges[h+1] are hop h's edges.  Arrays are numpy uint64 / uint32
    (lists without numpy)."""

    def __init__(self, nodes, src, dst, src_pos, dst_pos, hop_nodes, hop_edges):
        if np is not None:
            nodes, src, dst = (np.asarray(x, dtype=np.uint64) for x in (nodes, src, dst))
            src_pos, dst_pos = (np.asarray(x, dtype=np.uint32) for x in (src_pos, dst_pos))
        self.nodes, self.src, self.dst = nodes, src, dst
        self.src_pos, self.dst_pos = src_pos, dst_pos
        self.hop_nodes, self.hop_edges = hop_nodes, hop_edges

    def hop(self, h):
        """(src, dst) of hop @h."""
        a, b = self.hop_edges[h], self.hop_edges[h + 1]
        return self.src[a:b], self.dst[a:b]

    def __repr__(self):
        return "gstore.Sample(%d nodes, %d edges, %d hops)" % (
            len(self.nodes), len(self.src), len(self.hop_edges) - 1)


class Graph:
    """A mounted graph object (graph/NAME)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.refresh()

    def refresh(self):
        """Re-read info (after updates or a rebuild)."""
        try:
            with open(os.path.join(self.path, "info")) as f:
                text = f.read()
        except OSError as e:
            raise from_oserror(e, "open graph", self.path) from None
        self.info = {}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            self.info[k.strip()] = v.strip()
        try:
            self.num_vertices = int(self.info["vertices"])
            self.num_edges = int(self.info["edges"])
            self.id_bytes = int(self.info.get("id_bytes", "4"))
        except (KeyError, ValueError):
            raise GstoreError(errno.EINVAL, "not a graph's info file", self.path) from None
        self.directed = self.info.get("directed") == "yes"
        self.weighted = self.info.get("weighted") == "yes"
        self.dense_ids = self.info.get("id_map", "no") == "no"

    def __repr__(self):
        return "gstore.Graph(%r, %d vertices, %d edges)" % (self.path, self.num_vertices,
                                                            self.num_edges)

    def cuda(self, **kw):
        """This graph on the GPU through the mount's attach socket
        (gs_cuda_graph_attach(3)): a gstore.CudaGraph (cache_bytes=, device=); close it
        when done.  Updates made through the mount reach it at its sync()."""
        from .image import CudaGraph
        return CudaGraph(self, **kw)

    def __len__(self):
        return self.num_vertices

    def _vfile(self, v, name, binary):
        v = int(v)
        if v < 0:
            raise GstoreRangeError("vertex %d: ids are >= 0" % v, self.path)
        p = os.path.join(self.path, "v%d" % v, name)
        try:
            with open(p, "rb" if binary else "r") as f:
                return f.read()
        except OSError as e:
            if e.errno == errno.ENOENT:
                raise GstoreError(errno.ENOENT, "vertex %d: no such vertex (%d vertices)" %
                                  (v, self.num_vertices), self.path) from None
            if e.errno == errno.ERANGE:
                raise GstoreRangeError("vertex %d: id too large" % v, self.path) from None
            raise from_oserror(e, "vertex %d: read %s" % (v, name), p) from None

    def degree(self, v, direction="out"):
        """Out-degree of vertex id @v (direction "in": the in-list's length)."""
        if direction == "in":
            return len(self._vfile(v, "in_neighbors", True)) // self.id_bytes
        return int(self._vfile(v, "degree", False))

    def neighbors(self, v, direction="out"):
        """Vertex @v's neighbour ids, ascending (numpy uint32 or uint64 by the graph's id
        width; a list without numpy)."""
        raw = self._vfile(v, "in_neighbors" if direction == "in" else "neighbors", True)
        if np is not None:
            return np.frombuffer(raw, dtype="<u%d" % self.id_bytes).copy()
        return [int.from_bytes(raw[i:i + self.id_bytes], "little")
                for i in range(0, len(raw), self.id_bytes)]

    def weights(self, v):
        """Vertex @v's edge weights (float32), in neighbour order."""
        raw = self._vfile(v, "weights", True)
        if np is not None:
            return np.frombuffer(raw, dtype="<f4").copy()
        import struct
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))

    def sample(self, seeds, fanouts, rng_seed=0):
        """k-hop neighbour sampling over out-lists, as gs_graph_sample(3): len(fanouts)
        hops; for each node that the previous hop added (hop 0: the seeds, a repeated
        seed once), fanouts[h] of its neighbours without replacement (all when its
        degree is <= fanouts[h]).  Returns a Sample."""
        seeds = [int(s) for s in (seeds.tolist() if hasattr(seeds, "tolist") else seeds)]
        fanouts = [int(f) for f in fanouts]
        if not fanouts or len(fanouts) > MAX_HOPS:
            raise GstoreError(errno.EINVAL, "%d hops (1 to %d)" % (len(fanouts), MAX_HOPS))
        for f in fanouts:
            if f < 1 or f > MAX_FANOUT:
                raise GstoreError(errno.EINVAL, "fanout %d (1 to %d)" % (f, MAX_FANOUT))
        for s in seeds:
            if s < 0 or s >= self.num_vertices:
                raise GstoreError(errno.EINVAL, "seed %d: not below %d vertices" %
                                  (s, self.num_vertices), self.path)
        pos, nodes = {}, []
        for s in seeds:
            if s not in pos:
                pos[s] = len(nodes)
                nodes.append(s)
        hop_nodes, hop_edges = [0, len(nodes)], [0]
        src, dst, src_pos, dst_pos = [], [], [], []
        rs = int(rng_seed) & _M64
        for h, f in enumerate(fanouts):
            for i in range(hop_nodes[h], hop_nodes[h + 1]):
                v = nodes[i]
                try:
                    nb = self.neighbors(v)
                except GstoreError as e:
                    if e.errno != errno.ENOENT:
                        raise
                    nb = []		# a removed vertex has no neighbours
                deg = len(nb)
                picks = sample_pick(rs, h, v, deg, f) if deg > f else range(deg)
                for k in picks:
                    u = int(nb[k])
                    if u not in pos:
                        pos[u] = len(nodes)
                        nodes.append(u)
                    src.append(v)
                    dst.append(u)
                    src_pos.append(i)
                    dst_pos.append(pos[u])
            hop_nodes.append(len(nodes))
            hop_edges.append(len(src))
        return Sample(nodes, src, dst, src_pos, dst_pos, hop_nodes, hop_edges)


def open_graph(path):
    """gstore.Graph(path): see Graph."""
    return Graph(path)
