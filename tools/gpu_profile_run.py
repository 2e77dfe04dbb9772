"""Where a CUDA rep's run goes, on a GPU machine: microseconds per run of one_node and
transformer_block with device arrays in and out, then cProfile's top functions over 200 runs.
`PYTHONPATH=. python tools/gpu_profile_run.py` (it found numba-cuda's per-launch argument
preparation and the per-output device arrays, not the GPU, to be the time on an H200)."""
import cProfile
import io
import pstats
import time

import numpy as np
from numba import cuda
import onnxjit.backend as backend
from onnxjit import models
for name in ["one_node", "transformer_block"]:
    m = models.BUILDERS[name]()
    rep = backend.prepare(m, "CUDA")
    feeds = [np.random.default_rng(0).standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32) for i in m.graph.input]
    dev = [cuda.to_device(a) for a in feeds]
    for _ in range(20): rep.run(dev)
    rep.synchronize()
    t = time.perf_counter()
    for _ in range(200): rep.run(dev)
    rep.synchronize()
    print(name, "us/run", (time.perf_counter() - t) / 200 * 1e6, flush=True)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): rep.run(dev)
    rep.synchronize(); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue()[:6000])
