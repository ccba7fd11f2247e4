# SPDX-License-Identifier: MIT
"""gstore from Python: arrays and graphs of a mounted gstore, and GPU batches for training.

    import gstore
    feat = gstore.open_array("/mnt/gstore/arrays/feat")    # N x F float32
    x = feat.read_rows([3, 17, 5])                          # numpy, (3, F)
    g = gstore.open_graph("/mnt/gstore/graph/g")
    s = g.sample(seeds, fanouts=[10, 5], rng_seed=step)    # gs_graph_sample(3)'s batch
    with feat.cuda() as gpu:                                # gs_cuda_attach(3)
        xb = torch.as_tensor(gpu.gather(s.nodes), device="cuda")   # no copy

An unmounted image opens in-process (gstore.open_image: libgstore's own
gs_graph_sample(3) and queries).  The CPU path needs nothing but the mount (numpy optional); the GPU path loads
libgstore_cuda.so (built where nvcc exists) through ctypes.  Errors raise
GstoreError (an OSError: .errno, and a message saying what failed on which
path); rows or vertices out of range raise GstoreRangeError (also an
IndexError).  See docs/PYTHON.md.
"""
from ._lib import GstoreError, GstoreRangeError, library_path
from .array import Array, create_array, open_array
from .graph import Graph, Sample, open_graph
from .cuda import CudaArray, DeviceBuffer, cuda_available
from .image import CudaGraph, Image, ImageGraph, open_image

__version__ = "0.1.0"
__all__ = ["GstoreError", "GstoreRangeError", "library_path", "Array", "create_array",
           "open_array", "Graph", "Sample", "open_graph", "CudaArray", "DeviceBuffer",
           "cuda_available", "CudaGraph", "Image", "ImageGraph", "open_image"]
