#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gstore Python module (python/gstore) on a mounted store, no GPU:
#  - create_array sets dtype/shape xattrs; rows read by the module (random,
#    repeated, runs, slices, rows straddling blocks) equal numpy's and the
#    file's own bytes; row_bytes / dtype overrides;
#  - errors carry the errno and say what failed: a missing path (ENOENT), a
#    row size that does not divide the file or a shape that does not match
#    it (EINVAL), rows out of range (ERANGE, also an IndexError), a directory;
#  - the same reads without numpy (bytes);
#  - a mounted graph: info, degree and neighbours against the edge list,
#    missing vertices ENOENT, sample() reproducible, with the documented
#    structure (seeds first, fanouts respected, edges real), and equal to
#    gs_graph_sample(3)'s on the unmounted image (gstore.open_image, in-process);
#  - the GPU path's Python side over a stand-in library (no GPU needed);
#  - the shared libraries load through ctypes (libgstore.so, and
#    libgstore_cuda.so where it was built), libgstore_cuda exporting gs_* only.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
$PY -c 'import numpy' 2>/dev/null || skip "python3 with numpy is missing ($PY)"
gs_init 256M
gs_mount -o cache=16M
export PYTHONPATH=$GS_ROOT/python GSTORE_LIBDIR=$GS_BUILD MNT T
# a sanitizer build's libgstore.so needs its runtime loaded first (python3 is not built
# with it): the parts that load the real libraries run on the plain build only
LIBS=1
if [[ $(basename "$GS_BUILD") != build ]]; then
	LIBS=0
	echo "note: $GS_BUILD is not the plain build: the ctypes parts (libraries, image) are left out"
fi

$PY - <<'PY' || fail "arrays through the module"
import errno, os, random
import numpy as np
import gstore

mnt = os.environ["MNT"]
p = os.path.join(mnt, "arrays", "feat")
rng = np.random.default_rng(7)
data = rng.standard_normal((1000, 33), dtype=np.float32)	# 132-byte rows straddle blocks
a = gstore.create_array(p, data)
assert os.getxattr(p, "user.gstore.dtype") == b"float32", os.getxattr(p, "user.gstore.dtype")
assert os.getxattr(p, "user.gstore.shape") == b"1000,33"
a.close()

a = gstore.open_array(p)
assert (a.shape, a.row_bytes, len(a), a.dtype) == ((1000, 33), 132, 1000, np.float32), a
rows = [int(x) for x in rng.integers(0, 1000, 300)] + [5, 5, 999, 0, 1, 2, 3]
got = a.read_rows(rows)
assert got.shape == (len(rows), 33) and np.array_equal(got, data[rows])
assert np.array_equal(a.read_rows(np.array(rows, dtype=np.int64)), data[rows])
assert np.array_equal(a[10:40], data[10:40]) and np.array_equal(a[::97], data[::97])
assert np.array_equal(a[-1], data[-1]) and np.array_equal(a[[7, 3]], data[[7, 3]])
assert a.read_rows([]).shape == (0, 33)
raw = open(p, "rb").read()
assert raw == data.tobytes()
assert a.read_bytes(4000, 300) == raw[4000:4300]
out = np.empty((3, 33), np.float32)
assert a.read_rows([9, 8, 7], out=out) is out and np.array_equal(out, data[[9, 8, 7]])

# overrides: raw rows of 264 bytes (two float32 rows each), and another dtype
b = gstore.Array(p, row_bytes=264)
assert b.shape == (500, 264) and b.read_rows([3])[0].tobytes() == raw[3 * 264:4 * 264]
c = gstore.Array(p, dtype="<u4", shape=(1000, 33))
assert np.array_equal(c[17], data[17].view(np.uint32))

def fails(want, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except gstore.GstoreError as e:
        assert e.errno == want, (fn, args, e)
        assert str(e), e
        return e
    raise AssertionError("%s%r did not fail" % (fn.__name__, args))

e = fails(errno.ENOENT, gstore.open_array, os.path.join(mnt, "arrays", "nope"))
assert "nope" in str(e) and "open array" in str(e), str(e)
e = fails(errno.EINVAL, gstore.Array, p, row_bytes=128)
assert "does not divide" in str(e), str(e)
# 6-byte rows are not whole float32 elements
fails(errno.EINVAL, gstore.Array, p, dtype="float32", shape=None, row_bytes=6)
e = fails(errno.EINVAL, gstore.Array, p, shape=(999, 33))
assert "the file has 132000" in str(e), str(e)
fails(errno.EINVAL, gstore.Array, os.path.join(mnt, "arrays"))
fails(errno.EINVAL, gstore.Array, p, dtype="no-such-type")
for bad in ([1000], [-1], [0, 5000]):
    e = fails(errno.ERANGE, a.read_rows, bad)
    assert isinstance(e, IndexError) and "out of range (1000 rows)" in str(e), str(e)
try:
    a[1000]
    raise AssertionError("a[1000] did not fail")
except IndexError:
    pass
fails(errno.ERANGE, a.read_bytes, 131990, 20)
fails(errno.EEXIST, gstore.create_array, p, data)
fails(errno.EINVAL, a.read_rows, [1, 2], out=np.empty((1, 33), np.float32))
# a shape xattr that no longer matches the file (someone truncated it)
q = os.path.join(mnt, "arrays", "short")
gstore.create_array(q, data[:10]).close()
os.truncate(q, 100)
e = fails(errno.EINVAL, gstore.open_array, q)
assert "shape (10, 33)" in str(e), str(e)
print("arrays: %d random rows equal numpy and the file; errors carry their errno" % len(rows))
PY
ok "arrays: rows and slices equal numpy and the file bytes, errors with errno"

# without numpy: bytes, the same values
$PY - <<'PY' || fail "arrays without numpy"
import os, struct, sys
sys.modules["numpy"] = None	# import numpy now raises ImportError
import gstore
p = os.path.join(os.environ["MNT"], "arrays", "feat")
raw = open(p, "rb").read()
a = gstore.open_array(p)
assert a.shape == (1000, 33) and a.typestr == "<f4"
got = a.read_rows([4, 999, 4])
assert bytes(got) == raw[4 * 132:5 * 132] + raw[999 * 132:] + raw[4 * 132:5 * 132]
assert a[2] == raw[264:396]
try:
    a.read_rows([1000])
    raise AssertionError("no range error")
except IndexError as e:
    assert e.errno == 34
print("arrays without numpy: bytes equal the file")
PY
ok "arrays without numpy"

# a graph: mkdir, edges, then the module against the edge list
G=$MNT/graph/g
mkdir "$G" || fail "mkdir graph/g"
$PY - "$T/edges.txt" <<'PY' || fail "make an edge list"
import random, sys
r = random.Random(3)
n = 400
edges = set()
while len(edges) < 3000:
    u, v = r.randrange(n), r.randrange(n)
    if u != v:
        edges.add((u, v))
for u in range(0, 5):		# hubs: lists over a page
    for v in range(n):
        if v != u:
            edges.add((u, v))
with open(sys.argv[1], "w") as f:
    for u, v in sorted(edges):
        f.write("%d %d\n" % (u, v))
    f.write("%d %d\n" % (n - 1, 0))
PY
printf 'directed\n' >"$G/ctl" || fail "ctl"
cp "$T/edges.txt" "$G/edges" || fail "write edges"
$PY - "$T/edges.txt" <<'PY' || fail "graphs through the module"
import errno, os, sys
import numpy as np
import gstore

adj = {}
for l in open(sys.argv[1]):
    u, v = map(int, l.split())
    adj.setdefault(u, set()).add(v)
nv = max(max(adj), max(max(s) for s in adj.values())) + 1
g = gstore.open_graph(os.path.join(os.environ["MNT"], "graph", "g"))
assert g.num_vertices == nv and g.num_edges == sum(len(s) for s in adj.values()), g.info
assert g.directed and g.dense_ids
for v in [0, 1, 4, 7, 100, nv - 1]:
    want = sorted(adj.get(v, ()))
    assert g.degree(v) == len(want), v
    nb = g.neighbors(v)
    assert nb.dtype == np.dtype("<u%d" % g.id_bytes) and nb.tolist() == want, v
try:
    g.degree(nv + 5)
    raise AssertionError("no error for a missing vertex")
except gstore.GstoreError as e:
    assert e.errno == errno.ENOENT and "no such vertex" in str(e), e
try:
    gstore.open_graph(os.path.join(os.environ["MNT"], "graph", "nope"))
    raise AssertionError("no error for a missing graph")
except gstore.GstoreError as e:
    assert e.errno == errno.ENOENT, e

seeds = [7, 100, 7, 0, 399]
s = g.sample(seeds, [5, 3], rng_seed=11)
assert s.nodes[:4].tolist() == [7, 100, 0, 399], s.nodes[:5]
assert len(s.hop_nodes) == 4 and len(s.hop_edges) == 3
for h, f in enumerate([5, 3]):
    src, dst = s.hop(h)
    front = s.nodes[s.hop_nodes[h]:s.hop_nodes[h + 1]].tolist()
    for v in front:
        mine = dst[src == v].tolist()
        assert len(mine) == min(f, len(adj.get(v, ()))), (h, v, mine)
        assert mine == sorted(set(mine)) and set(mine) <= adj.get(v, set()), (h, v, mine)
    assert set(src.tolist()) <= set(front)
assert (s.nodes[s.src_pos] == s.src).all() and (s.nodes[s.dst_pos] == s.dst).all()
assert len(set(s.nodes.tolist())) == len(s.nodes)
t = g.sample(seeds, [5, 3], rng_seed=11)
assert s.nodes.tolist() == t.nodes.tolist() and s.dst.tolist() == t.dst.tolist()
u = g.sample(seeds, [5, 3], rng_seed=12)
assert u.dst.tolist() != s.dst.tolist(), "another rng seed, the same sample"
for bad in (([nv], [2]), ([1], []), ([1], [0]), ([1], [2000]), ([1], [1] * 9)):
    try:
        g.sample(*bad)
        raise AssertionError("sample%r did not fail" % (bad,))
    except gstore.GstoreError as e:
        assert e.errno == errno.EINVAL, (bad, e)
print("graph: degree/neighbors equal the edge list; sample %r" % s)
# samples for the in-process comparison below (gs_graph_sample on the unmounted image)
import json
r = np.random.default_rng(9)
cases = []
for k, fan in enumerate(([5, 3], [25, 10], [2], [3, 3, 3], [1000])):
    sd = [int(x) for x in r.integers(0, nv, 1 + 7 * k)] + [0, 1, 2, 3, 4]
    t = g.sample(sd, fan, rng_seed=100 + k)
    cases.append([sd, fan, 100 + k, t.nodes.tolist(), t.src.tolist(), t.dst.tolist(),
                  t.src_pos.tolist(), t.dst_pos.tolist(), list(t.hop_nodes), list(t.hop_edges)])
json.dump(cases, open(os.environ["T"] + "/samples.json", "w"))
PY
ok "graphs: degree, neighbours and samples through the module"

# DLPack export (what torch.from_dlpack takes on the GPU), consumed here by numpy over
# host memory: no copy, the owner kept alive until the consumer lets go, then released
$PY - <<'PY' || fail "DLPack capsules"
import gc
import numpy as np
from gstore import cuda

class Host:
    def __init__(self, a):
        self.a = a
    def __dlpack_device__(self):
        return (1, 0)	# kDLCPU
    def __dlpack__(self, stream=None):
        return cuda.dlpack_capsule(self.a.ctypes.data, self.a.shape, self.a.dtype.str, (1, 0),
                                   self.a)

a = np.arange(12, dtype=np.float32).reshape(3, 4)
ptr = a.ctypes.data
b = np.from_dlpack(Host(a))
del a
gc.collect()
assert b.ctypes.data == ptr and b.tolist() == np.arange(12.0).reshape(3, 4).tolist()
assert len(cuda._alive) == 1, "the owner is not held while the consumer lives"
del b
gc.collect()
assert not cuda._alive, "the consumer's deleter did not release the owner"
cap = Host(np.zeros(3, np.int64)).__dlpack__()
del cap		# never consumed: the capsule's destructor releases it
gc.collect()
assert not cuda._alive
print("DLPack: consumed without a copy, released by the deleter and by an unused capsule")
PY
ok "DLPack capsules"

# the GPU path's Python side (CudaArray, DeviceBuffer, both engines, out=, rows in "GPU"
# memory, the range checks) over a stand-in for libgstore_cuda that keeps "GPU memory" in
# host memory and reads rows from the file: what the module hands the C calls is checked
# here; tests/gpu/t_python.py runs the real library on a GPU
$PY - <<'PY' || fail "the GPU path over a stand-in library"
import ctypes, errno, os
import numpy as np
import gstore
from gstore import _lib, cuda

_lib._cache["libgstore.so.0"] = object()	# none of it is called: never load the real one

class Fake:
    def __init__(self, gather):
        self.mem, self.files, self.next = {}, {}, 1
        if gather:
            # plain functions: the module sets restype/argtypes on them
            self.gs_cuda_gather_open = lambda *a: self._gopen(*a)
            self.gs_cuda_gather = lambda *a: self._gather(*a)
            self.gs_cuda_gather_sync = lambda g: 0
            self.gs_cuda_gather_close = lambda g: None
    def gs_cuda_attach(self, pc, path, pp):
        try:
            f = open(path.decode(), "rb")
        except OSError as e:
            return -e.errno
        self.files[self.next] = f
        pc._obj.value = self.next
        self.next += 1
        return 0
    def gs_cuda_close(self, c):
        self.files.pop(c.value).close()
    def gs_cuda_mem_alloc(self, pp, n):
        b = ctypes.create_string_buffer(max(n, 1))
        self.mem[ctypes.addressof(b)] = b
        pp._obj.value = ctypes.addressof(b)
        return 0
    def gs_cuda_mem_free(self, p):
        self.mem.pop(p)
        return 0
    def gs_cuda_mem_copy(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return 0
    def gs_cuda_read_rows(self, c, rb, rows, n, dst, stream):
        f = self.files[c.value]
        idx = (ctypes.c_uint64 * n).from_address(rows)
        for i in range(n):
            f.seek(idx[i] * rb)
            ctypes.memmove(dst + i * rb, f.read(rb), rb)
        return 0
    def _gopen(self, pg, c, pp):
        self.grb, self.gc = pp._obj.row_bytes, c
        pg._obj.value = 99
        return 0
    def _gather(self, g, rows, n, dst, stream):
        return self.gs_cuda_read_rows(self.gc, self.grb, rows, n, dst, stream)

class Cai:	# a "CUDA array" over host memory
    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (a.ctypes.data, False), "version": 3,
                                         "strides": None if a.flags.c_contiguous
                                         else a.strides}

mnt = os.environ["MNT"]
p = os.path.join(mnt, "arrays", "feat")
data = np.fromfile(p, dtype=np.float32).reshape(1000, 33)
rng = np.random.default_rng(5)
for gather in (False, True):
    _lib._cache["libgstore_cuda.so.0"] = Fake(gather)
    _lib.libgstore_cuda()
    assert gstore.CudaArray.has_gather() == gather
    with gstore.open_array(p).cuda() as g:
        assert g.engine == ("gather" if gather else "rows")
        rows = rng.integers(0, 1000, 500)
        buf = g.gather(rows)
        cai = buf.__cuda_array_interface__
        assert cai["shape"] == (500, 33) and cai["typestr"] == "<f4" and cai["data"][0] == buf.ptr
        assert np.array_equal(buf.copy_to_host(), data[rows])
        assert np.array_equal(g.gather(rows.tolist()).copy_to_host(), data[rows])
        out = np.zeros((600, 33), np.float32)
        assert g.gather(rows[::-1], out=Cai(out)).a is out
        assert np.array_equal(out[:500], data[rows[::-1]]) and not out[500:].any()
        r64 = rng.integers(0, 1000, 77)
        assert np.array_equal(g.gather(Cai(r64)).copy_to_host(), data[r64])
        assert g.gather([]).copy_to_host().shape == (0, 33)
        for bad in ([1000], [-1]):
            try:
                g.gather(bad)
                raise AssertionError("no range error")
            except gstore.GstoreRangeError as e:
                assert e.errno == errno.ERANGE and isinstance(e, IndexError)
        for bad_out in (np.zeros((2, 33), np.float32), np.zeros((40, 33), np.float32).T):
            try:
                g.gather(rows[:3], out=Cai(bad_out))
                raise AssertionError("a bad out did not fail")
            except gstore.GstoreError as e:
                assert e.errno == errno.EINVAL
    # a CudaArray closes the Array it opened (an open file keeps the mount busy), not
    # one it was given
    mine = gstore.CudaArray(p)
    mine.close()
    given = gstore.open_array(p)
    gstore.CudaArray(given).close()
    assert mine.array.fileno() == -1 and given.fileno() >= 0
    given.close()
    try:
        gstore.CudaArray(p, engine="gather" if not gather else "bogus")
        raise AssertionError("no engine error")
    except gstore.GstoreError as e:
        assert e.errno in (errno.EOPNOTSUPP, errno.EINVAL), e
print("GPU path's Python side: both engines, out=, device rows, range and out checks")
PY
ok "the GPU path's Python side over a stand-in library"

# the shared libraries through ctypes
[[ $LIBS == 1 ]] && { $PY - <<'PY' || fail "libraries"; }
import gstore, subprocess
print("libgstore:", gstore.library_path())
if gstore.cuda_available():
    so = gstore.library_path(cuda=True)
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True)
    names = [l.split()[-1].split("@")[0] for l in out.stdout.splitlines() if " A " not in l]
    bad = [n for n in names if not n.startswith("gs_")]
    assert names and not bad, bad
    assert "gs_cuda_read_rows" in names and "gs_cuda_err" not in names, names
    print("libgstore_cuda: %s, %d exports, all gs_*" % (so, len(names)))
else:
    print("libgstore_cuda.so not built (no nvcc): the GPU path is not loaded")
PY
[[ $LIBS == 1 ]] && ok "libraries load"
gs_umount

# the unmounted image in-process (libgstore): the mount's samples equal gs_graph_sample's
[[ $LIBS == 1 ]] && { $PY - "$IMG" <<'PY' || fail "in-process image: gs_graph_sample"; }
import errno, json, os, sys
import gstore
with gstore.open_image(sys.argv[1]) as im:
    g = im.graph("g")
    assert g.degree(0) == 399 and g.neighbors(7) == sorted(g.neighbors(7)), g.degree(0)
    cases = json.load(open(os.environ["T"] + "/samples.json"))
    for sd, fan, rs, nodes, src, dst, spos, dpos, hn, he in cases:
        s = g.sample(sd, fan, rng_seed=rs)
        got = [s.nodes.tolist(), s.src.tolist(), s.dst.tolist(), s.src_pos.tolist(),
               s.dst_pos.tolist(), list(s.hop_nodes), list(s.hop_edges)]
        assert got == [nodes, src, dst, spos, dpos, hn, he], (fan, rs, got[0][:20], nodes[:20])
    try:
        g.sample([10 ** 6], [2])
        raise AssertionError("no error")
    except gstore.GstoreError as e:
        assert e.errno == errno.EINVAL, e
    try:
        im.graph("nope")
        raise AssertionError("no error")
    except gstore.GstoreError as e:
        assert e.errno == errno.ENOENT, e
print("in-process: %d samples over the mount equal gs_graph_sample's" % len(cases))
PY
[[ $LIBS == 1 ]] && ok "samples over the mount equal gs_graph_sample(3) on the image"
echo PASS
