#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The gstore Python module on the GPU machine (run by run-all.sh, part "python").

    python3 tests/gpu/t_python.py [BUILD [WORKDIR]]

Makes a store (gstore mkfs) in WORKDIR (default build/gpu: on the disk, for
O_DIRECT), mounts it with gstorefs, writes feature arrays through the mount
(float32 rows of 1 KiB, and 132-byte rows that straddle blocks), a graph,
then through the module: attaches (gs_cuda_attach), gathers random rows into
GPU memory and compares them with torch on the CPU copy, taking the buffer
via __cuda_array_interface__ (torch.as_tensor, cupy.asarray) and DLPack
(torch.from_dlpack), into a caller's tensor (out=), in several rounds of a
small staging region; checks the errors; runs a few training steps
(sample a batch on the graph, gather its features, forward/backward).
Prints one PASS/FAIL line per check and the timings; exits 0, 1 (a check
failed) or 77 (skip: no GPU, no torch, no libgstore_cuda.so).
"""
import errno
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "gpu"))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("GSTORE_LIBDIR", BUILD)

try:
    import numpy as np
    import torch
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("skip: torch sees no GPU")
    sys.exit(77)
import gstore
if not gstore.cuda_available():
    print("skip: libgstore_cuda.so not built (make build/libgstore_cuda.so)")
    sys.exit(77)

fails = 0
LIMIT = float(os.environ.get("GS_PY_LIMIT", "240"))	# run-all.sh's timeout is 300 s
current = []	# the CudaArray in use, for the watchdog


def watchdog(mnt):
    """Past LIMIT seconds (a gather stuck in a kernel: the main thread waits in C),
    print the ring's counters, detach the mount and exit: the timeout of run-all.sh
    would kill us without either."""
    time.sleep(LIMIT)
    print("FAIL  python watchdog: still running after %.0f s; ring: %s" %
          (LIMIT, current[-1].debug() if current else "none"), flush=True)
    subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    os._exit(1)


def check(name, cond, detail=""):
    global fails
    print("%s  python %s%s" % ("PASS" if cond else "FAIL", name, ": " + detail if detail else ""),
          flush=True)
    if not cond:
        fails += 1


def mount(img, mnt):
    gs = os.path.join(BUILD, "bin")
    subprocess.run([os.path.join(gs, "gstore"), "mkfs", "--size", "2G", img], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(gs, "gstorefs"), img, mnt], check=True)
    for _ in range(200):
        if os.path.exists(os.path.join(mnt, ".gstore", "info")):
            return
        time.sleep(0.05)
    raise RuntimeError("gstorefs did not mount %s" % img)


def umount(mnt):
    """Unmount; True if it was not busy (else detached lazily: the daemon lives on while
    files stay open, holding the image)."""
    for cmd in (["fusermount3", "-u", mnt], ["umount", mnt]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
            return True
    subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    return False


def main():
    os.makedirs(WORK, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="t_python.", dir=WORK)
    img, mnt = os.path.join(tmp, "fs.img"), os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    mount(img, mnt)
    threading.Thread(target=watchdog, args=(mnt,), daemon=True).start()
    try:
        try:
            run(mnt)
        finally:
            current.clear()	# closed CudaArrays: nothing of ours holds the mount now
            gc.collect()
            clean = umount(mnt)
        check("umount", clean, "the mount was not busy (every file the module opened closed)")
        run_image(img)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_image(img):
    """The unmounted image in-process: gs_cuda_graph_sample equals gs_graph_sample."""
    if not gstore.image._lib_cuda_graph():
        print("(libgstore_cuda has no gs_cuda_graph_sample: the GPU sampler is not checked)")
        return
    rng = np.random.default_rng(3)
    for _ in range(100):	# the daemon lets go of the image once it has exited
        try:
            im = gstore.open_image(img)
            break
        except gstore.GstoreError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.2)
    else:
        im = gstore.open_image(img)
    with im:
        g = im.graph("g")
        cg = g.cuda()
        same = True
        for k, fan in enumerate(([10, 5], [25, 10], [3, 3, 3])):
            seeds = rng.integers(0, 32768, 64 * (k + 1))
            want = g.sample(seeds, fan, rng_seed=k)
            t0 = time.time()
            got = cg.sample(seeds, fan, rng_seed=k)
            dt = time.time() - t0
            for name in ("nodes", "src", "dst", "src_pos", "dst_pos"):
                same &= np.array_equal(getattr(got, name).copy_to_host(),
                                       np.asarray(getattr(want, name)))
            same &= list(got.hop_nodes) == list(want.hop_nodes)
            print("gpu sample %r: %d nodes, %.4f s, %s" % (fan, len(want.nodes), dt, got.stats))
        check("gpu_sample", same, "gs_cuda_graph_sample == gs_graph_sample (3 cases)")


def run(mnt):
    dev = torch.device("cuda")
    rng = np.random.default_rng(1)
    N, F = 32768, 256					# 32 MiB of 1 KiB rows
    feat = rng.standard_normal((N, F), dtype=np.float32)
    t0 = time.time()
    gstore.create_array(os.path.join(mnt, "arrays", "feat"), feat).close()
    print("wrote arrays/feat: %d x %d float32 in %.2f s" % (N, F, time.time() - t0))
    odd = rng.standard_normal((5000, 33), dtype=np.float32)	# 132-byte rows
    gstore.create_array(os.path.join(mnt, "arrays", "odd"), odd).close()
    cpu = torch.from_numpy(feat)

    a = gstore.open_array(os.path.join(mnt, "arrays", "feat"))
    with a.cuda() as g:
        current.append(g)
        rows = rng.integers(0, N, 4096)
        t0 = time.time()
        buf = g.gather(rows)
        dt = time.time() - t0
        x = torch.as_tensor(buf, device=dev)
        want = cpu[torch.from_numpy(rows)]
        print("engine: %s" % g.engine)
        check("cai", x.data_ptr() == buf.ptr and x.shape == (4096, F) and
              x.dtype == torch.float32 and torch.equal(x.cpu(), want),
              "4096 random 1 KiB rows via __cuda_array_interface__, no copy (%.3f s, %.0f rows/s)"
              % (dt, 4096 / dt))
        y = torch.from_dlpack(buf)
        check("dlpack", y.data_ptr() == buf.ptr and torch.equal(y.cpu(), want),
              "torch.from_dlpack, no copy")
        del y
        out = torch.empty((1000, F), dtype=torch.float32, device=dev)
        rows2 = rng.integers(0, N, 1000)
        r = g.gather(rows2, out=out)
        check("out", r is out and torch.equal(out.cpu(), cpu[torch.from_numpy(rows2)]),
              "into a caller's tensor")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):	# torch's current stream: the gather runs on it
            out2 = torch.full((1000, F), 7.0, device=dev)
            g.gather(rows2, out=out2)
            ok2 = torch.equal(out2.cpu(), cpu[torch.from_numpy(rows2)])
        check("side_stream", ok2, "out= on a side stream torch made current")
        rows3 = torch.arange(N - 10, N).tolist() + [0, 0, 5]
        check("edges_repeats", torch.equal(torch.as_tensor(g.gather(rows3), device=dev).cpu(),
                                           cpu[rows3]), "last rows, repeated rows")
        check("host_copy", np.array_equal(g.gather([7, 3]).copy_to_host(), feat[[7, 3]]),
              "DeviceBuffer.copy_to_host")
        try:
            import cupy
        except Exception as e:		# absent, or built for another CUDA
            print("(no cupy: %r)" % e)
            cupy = None
        if cupy is not None:
            c = cupy.asarray(g.gather(rows2[:64]))
            check("cupy", np.array_equal(cupy.asnumpy(c), feat[rows2[:64]]), "cupy.asarray")
        for bad, want_errno in (([N], errno.ERANGE), ([-1], errno.ERANGE)):
            try:
                g.gather(bad)
                check("range", False, "row %r did not fail" % bad)
            except gstore.GstoreError as e:
                check("range", e.errno == want_errno and isinstance(e, IndexError), str(e))
        try:
            g.gather([1, 2, 3], out=torch.empty((2, F), device=dev))
            check("out_small", False, "a too small out did not fail")
        except gstore.GstoreError as e:
            check("out_small", e.errno == errno.EINVAL, str(e))

        # the CPU path for comparison: read_rows, then a host-to-device copy
        t0 = time.time()
        xc = torch.from_numpy(a.read_rows(rows)).to(dev)
        torch.cuda.synchronize()
        dc = time.time() - t0
        check("cpu_path", torch.equal(xc, x), "read_rows + .to(cuda) %.3f s (%.0f rows/s)" %
              (dc, 4096 / dc))

        rg = torch.as_tensor(rows2, device=dev)
        check("gpu_rows", torch.equal(torch.as_tensor(g.gather(rg), device=dev).cpu(),
                                      cpu[torch.from_numpy(rows2)]),
              "row indices in a CUDA tensor (engine %s)" % g.engine)
    a.close()

    # several rounds through a 1 MiB staging region; rows straddling blocks; each engine
    engines = ["rows"] + (["gather"] if gstore.CudaArray.has_gather() else [])
    print("engines: %s (auto: %s)" % (engines, engines[-1]))
    for eng in engines:
        with gstore.CudaArray(os.path.join(mnt, "arrays", "odd"), buf_bytes=1 << 20,
                              engine=eng) as g:
            current.append(g)
            rows = rng.integers(0, 5000, 20000)
            t0 = time.time()
            x = torch.as_tensor(g.gather(rows), device=dev)
            check("rounds_odd_" + eng,
                  torch.equal(x.cpu(), torch.from_numpy(odd)[torch.from_numpy(rows)]),
                  "20000 132-byte rows through a 1 MiB region (%.3f s)" % (time.time() - t0))
            rows = rng.integers(0, 5000, 3000)
            x = torch.as_tensor(g.gather(torch.as_tensor(rows, device=dev)), device=dev)
            check("gpu_rows_" + eng,
                  torch.equal(x.cpu(), torch.from_numpy(odd)[torch.from_numpy(rows)]),
                  "row indices in a CUDA tensor")
    # the two engines on the same 4096 random 1 KiB rows (timings only: the second of two)
    rows = rng.integers(0, N, 4096)
    for eng in engines:
        with gstore.CudaArray(os.path.join(mnt, "arrays", "feat"), engine=eng) as g:
            current.append(g)
            g.gather(rows)
            t0 = time.time()
            x = torch.as_tensor(g.gather(rows), device=dev)
            dt = time.time() - t0
            check("engine_" + eng, torch.equal(x.cpu(), cpu[torch.from_numpy(rows)]),
                  "4096 x 1 KiB rows, second gather %.4f s (%.0f rows/s)" % (dt, 4096 / dt))
    try:
        gstore.CudaArray(os.path.join(mnt, "arrays", "nope"))
        check("attach_missing", False, "no error")
    except gstore.GstoreError as e:
        check("attach_missing", e.errno == errno.ENOENT, str(e))

    # a training loop's batches: sample on a mounted graph, gather the nodes' features
    gdir = os.path.join(mnt, "graph", "g")
    os.mkdir(gdir)
    src = rng.integers(0, N, 6 * N)
    dst = rng.integers(0, N, 6 * N)
    with open(os.path.join(gdir, "ctl"), "w") as f:
        f.write("directed\nvertices=%d\n" % N)
    with open(os.path.join(gdir, "edges"), "w") as f:
        f.write("".join("%d %d\n" % (u, v) for u, v in zip(src.tolist(), dst.tolist()) if u != v))
    gr = gstore.open_graph(gdir)
    model = torch.nn.Sequential(torch.nn.Linear(F, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ok, steps, t0 = True, 3, time.time()
    with gstore.CudaArray(os.path.join(mnt, "arrays", "feat")) as g:
        current.append(g)
        for step in range(steps):
            seeds = rng.integers(0, N, 256)
            s = gr.sample(seeds, [10, 5], rng_seed=step)
            xb = torch.as_tensor(g.gather(s.nodes), device=dev)
            ok &= torch.equal(xb.cpu(), cpu[torch.from_numpy(s.nodes.astype(np.int64))])
            loss = model(xb).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    check("train", ok and bool(torch.isfinite(loss)),
          "%d steps: sample [10,5] of 256 seeds, gather ~%d rows, forward/backward "
          "(%.2f s/step)" % (steps, len(s.nodes), (time.time() - t0) / steps))

    # the same mounted graph on the GPU through attach (Graph.cuda(): gs_cuda_graph_attach),
    # against the module's own sampler over the mount's files; then updates through the
    # mount, the sync point, again
    if not hasattr(gstore.image._lib_cuda_graph() or object(), "gs_cuda_graph_attach"):
        print("(libgstore_cuda has no gs_cuda_graph_attach: not checked)")
        return

    def same_sample(got, want):
        r = all(np.array_equal(getattr(got, k).copy_to_host(), np.asarray(getattr(want, k)))
                for k in ("nodes", "src", "dst", "src_pos", "dst_pos"))
        return r and list(got.hop_nodes) == list(want.hop_nodes)

    with gr.cuda() as cg:
        seeds = rng.integers(0, N, 128)
        ok = same_sample(cg.sample(seeds, [10, 5], rng_seed=9), gr.sample(seeds, [10, 5], 9))
        have = set(gr.neighbors(1).tolist())
        new = [v for v in range(N - 1, 0, -1) if v not in have][:5]
        with open(os.path.join(gdir, "updates"), "w") as f:
            f.write("".join("+ 1 %d\n" % v for v in new))
        cg.sync()
        gr.refresh()
        seeds[0] = 1
        after = gr.sample(seeds, [10, 5], 10)
        ok2 = same_sample(cg.sample(seeds, [10, 5], rng_seed=10), after)
    check("gpu_sample_attached", ok and ok2,
          "Graph.cuda() (gs_cuda_graph_attach) == Graph.sample, before and after updates "
          "through the mount and sync()")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:		# a crash is a failed check, with its traceback
        import traceback
        traceback.print_exc()
        check("run", False, repr(e))
    print("t_python: %s" % ("FAIL" if fails else "PASS"))
    sys.exit(1 if fails else 0)
