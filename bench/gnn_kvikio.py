#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""KvikIO peer of tests/gpu/gnn.cu: the same batches gathered into GPU memory
with KvikIO's batched pread (compat mode: its POSIX thread pool, no GDS).

    gnn_kvikio.py FILE BATCHES ROWB SECS|epoch NAME

Per batch: the row ids deduplicated and sorted (numpy), runs of consecutive
rows merged, one CuFile.pread per run (futures, all of the batch in flight
at once) into a pinned host buffer, one copy of it to the GPU, then a cupy
gather into the batch buffer.  Batch i + 1's reads are submitted before
batch i is waited for (double buffering).  Host, not device, destinations:
a compat-mode pread into GPU memory copies each task from a bounce buffer
with a cudaMemcpy of its own, and 4 KiB tasks then ran at 10 K rows/s (the
first GPU run, 2026-11-25); into pinned host memory the preads are plain
O_DIRECT reads and the batch crosses PCIe once.  GNN_KVIKIO_DEVICE=1: the
device destinations again.
Prints RESULT lines in gnn.cu's format and PASS/FAIL for the last batch.
"""
import os
import resource
import sys
import time


def io_read_bytes():
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def cpu_now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_batches(path, np):
    raw = np.fromfile(path, dtype=np.uint64)
    nb, pos, out = int(raw[0]), 1, []
    for _ in range(nb):
        n = int(raw[pos])
        out.append(raw[pos + 1:pos + 1 + n])
        pos += 1 + n
    return out


def expected_words(rows, rb, np):
    # the mkimage pattern: the word at byte o is x ^ (x >> 29), x = o * K mod 2^64
    k = np.uint64(0x9E3779B97F4A7C15)
    offs = (rows.astype(np.uint64)[:, None] * np.uint64(rb) +
            np.arange(rb // 8, dtype=np.uint64)[None, :] * np.uint64(8))
    with np.errstate(over="ignore"):
        x = offs * k
    return x ^ (x >> np.uint64(29))


def main():
    if len(sys.argv) < 6:
        print(__doc__)
        return 2
    path, bfile, rb, mode, name = sys.argv[1:6]
    rb = int(rb)
    try:
        import numpy as np
        import cupy as cp
        import kvikio
        import kvikio.defaults
    except Exception as e:  # noqa: BLE001 - report any import failure as n/a
        print(f"RESULT {name:<28} {'n/a':>12} {'':<10} kvikio/cupy not importable: {e}")
        return 0
    nth = os.environ.get("KVIKIO_NTHREADS", "?")
    try:
        nth = kvikio.defaults.get("num_threads")
    except Exception:  # noqa: BLE001 - older API
        try:
            nth = kvikio.defaults.get_num_threads()
        except Exception:  # noqa: BLE001
            pass
    for key, val in (("auto_direct_io_read", True), ("bounce_buffer_size", 1 << 20)):
        try:
            kvikio.defaults.set(key, val)
        except Exception:  # noqa: BLE001 - an older KvikIO: its defaults
            pass
    conf = []
    for key in ("compat_mode", "auto_direct_io_read", "bounce_buffer_size", "task_size"):
        try:
            conf.append(f"{key}={kvikio.defaults.get(key)}")
        except Exception:  # noqa: BLE001
            pass
    compat = " ".join(conf)
    batches = load_batches(bfile, np)
    epoch = mode == "epoch"
    secs = 1e18 if epoch else float(mode)
    maxn = max(len(b) for b in batches)
    bufs = [cp.empty(maxn * rb, dtype=cp.uint8) for _ in range(2)]
    on_dev = os.environ.get("GNN_KVIKIO_DEVICE") == "1"
    if on_dev:
        hbufs = bufs
    else:
        import cupyx
        hbufs = [cupyx.empty_pinned((maxn * rb,), dtype=np.uint8) for _ in range(2)]
    acc = cp.zeros(1, dtype=cp.uint64)
    # cupy compiles its kernels at first use: the gather and the sum, before the clock
    warm = bufs[0][:2 * rb].reshape(2, rb)[cp.asarray(np.array([1, 0]))]
    acc += warm.view(cp.uint64).sum(dtype=cp.uint64)
    cp.cuda.Device().synchronize()

    t0, c0, io0 = time.monotonic(), cpu_now(), io_read_bytes()
    f = kvikio.CuFile(path, "r")

    def submit(i):
        rows = batches[i % len(batches)]
        uniq, inv = np.unique(rows, return_inverse=True)
        # runs of consecutive rows: one read each
        brk = np.flatnonzero(np.diff(uniq) != 1) + 1
        starts = np.concatenate(([0], brk))
        ends = np.concatenate((brk, [len(uniq)]))
        buf = hbufs[i & 1]
        futs = [f.pread(buf[s * rb:e * rb], (e - s) * rb, int(uniq[s]) * rb)
                for s, e in zip(starts.tolist(), ends.tolist())]
        return futs, inv, len(uniq)

    nb, done, i, last, last_out = len(batches), 0, 0, -1, None
    pending = submit(0)
    # steady state: the batches again and again until the window closes
    while (i < nb) if epoch else (time.monotonic() < t0 + secs):
        nxt = submit(i + 1) if (i + 1 < nb or not epoch) else None
        futs, inv, nu = pending
        for fu in futs:
            fu.get()
        if not on_dev:  # the batch's rows cross PCIe in one copy
            bufs[i & 1][:nu * rb].set(hbufs[i & 1][:nu * rb])
        rowsbuf = bufs[i & 1][:nu * rb].reshape(nu, rb)
        out = rowsbuf[cp.asarray(inv.reshape(-1))]      # the batch, in sampled order
        acc += out.view(cp.uint64).sum(dtype=cp.uint64)  # the consumer reads every byte
        cp.cuda.Device().synchronize()
        done += len(batches[i % nb])
        last, last_out = i % nb, out
        pending = nxt
        i += 1
    if pending is not None:
        for fu in pending[0]:
            fu.get()
    dt, cpu, io = time.monotonic() - t0, cpu_now() - c0, io_read_bytes() - io0
    f.close()
    nbd = max(i, 1)
    print(f"RESULT {name:<28} {i / dt:12.3f} {'batches/s':<10} {'epoch' if epoch else 'steady'}: "
          f"{done / dt:.0f} rows/s, {done / nbd * rb / 1048576:.2f} MiB gathered/batch, "
          f"{io / nbd / 1048576:.2f} MiB read/batch, {cpu / dt:.2f} CPU cores busy, "
          f"{nth} CPU threads, {i} batches in {dt:.2f} s; KvikIO {kvikio.__version__} "
          f"{compat}, one pread per run of rows into "
          f"{'GPU memory' if on_dev else 'pinned host memory, one copy per batch'}")
    if last < 0:
        print(f"PASS {name}: no whole batch (nothing to check)")
        return 0
    got = cp.asnumpy(last_out).view(np.uint64).reshape(len(batches[last]), rb // 8)
    bad = int((got != expected_words(batches[last], rb, np)).sum())
    print(f"{'FAIL' if bad else 'PASS'} {name}: last batch ({len(batches[last])} rows) "
          f"{'differs from' if bad else 'equals'} the file ({bad} bad words)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
