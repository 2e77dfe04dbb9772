"""Where a CUDA rep's run goes, on a GPU machine: microseconds per run of one_node and
transformer_block with device arrays in and out (the CUDA graph replayed, then the bound
launches one by one), then cProfile's top functions over 200 graph runs.
`PYTHONPATH=. python tools/gpu_profile_run.py`. The first version of this found numba-cuda's
per-launch argument preparation and per-output device arrays to be the time (H200); the
runtime now binds every launch once and replays a CUDA graph."""
import cProfile
import io
import pstats
import time

import numpy as np
from numba import cuda

import onnxjit.backend as backend
from onnxjit.tools import models

for name in ["one_node", "transformer_block"]:
    m = models.BUILDERS[name]()
    feeds = [np.random.default_rng(0).standard_normal(
        [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in m.graph.input]
    dev = [cuda.to_device(a) for a in feeds]
    for graphs in (True, False):
        rep = backend.prepare(m, "CUDA", cuda_graphs=graphs)
        for _ in range(20):
            rep.run(dev)
        rep.synchronize()
        t = time.perf_counter()
        for _ in range(200):
            rep.run(dev)
        rep.synchronize()
        exe = rep.compiled()
        print(f"{name} graphs={graphs} (captured: {exe.graph is not None}, "
              f"{exe.graph_error}, {len(exe.launches)} launches) us/run",
              round((time.perf_counter() - t) / 200 * 1e6, 1), flush=True)
        if graphs:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(200):
                rep.run(dev)
            rep.synchronize()
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
            print(s.getvalue()[:3000])
