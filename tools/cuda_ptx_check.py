"""Compile every CUDA kernel a model needs to PTX, without a GPU (a development check).

The simulator runs kernels as Python, so it cannot tell whether numba.cuda compiles them for a
real device. This builds the launch schedule of the built-in suite's models (or the given
.onnx files) for a notional sm_90 device and compiles each distinct (kernel, argument types)
with `numba.cuda.compile_ptx`. Needs numba-cuda and NVVM/NVRTC (pip install
"cuda-toolkit[nvvm,nvrtc]==13.*"), not a driver; run it WITHOUT NUMBA_ENABLE_CUDASIM.

    python tools/cuda_ptx_check.py [MODEL.onnx ...]
"""
from __future__ import annotations

import sys

import numpy as np


def arg_type(a, launch_mod):
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype
    from onnxjit.ir import compute_dtype
    if isinstance(a, launch_mod.Buf):
        return types.Array(from_dtype(compute_dtype(a.value.dtype)), 1, "C")
    if isinstance(a, launch_mod.Const):
        return types.Array(from_dtype(a.array.dtype), 1, "C")
    if a is launch_mod.ERROR_FLAG:
        return types.Array(types.int32, 1, "C")
    if isinstance(a, (bool, np.bool_)):
        return types.boolean
    if isinstance(a, np.generic):
        return from_dtype(a.dtype)
    if isinstance(a, int):
        return types.int64
    if isinstance(a, float):
        return types.float64
    raise TypeError(f"no numba type for {a!r}")


def check(model, label, feeds=None):
    from numba import cuda
    import onnxjit.cuda.launch as launch_mod
    from onnxjit.cuda.lower import specialize_cuda
    from onnxjit.cuda.target import CudaTarget
    from onnxjit.ir import Value, input_specs
    from onnxjit.plan import plan
    inits = {t.name for t in model.graph.initializer}
    specs = input_specs(model.graph, inits)
    feeds = feeds or {}

    def value(s):
        a = feeds.get(s.name)
        if a is not None:     # small integer inputs: the rep would specialize on their contents
            small = a.dtype.kind in "iu" and a.size <= 64
            return Value(a.shape, a.dtype, const=a if small else None, name=s.name)
        return Value(tuple(s.dims), np.dtype(s.dtype), name=s.name)
    values = [value(s) for s in specs]
    kernels = plan(specialize_cuda(model, values))
    launches = launch_mod.build(kernels, CudaTarget())[0] + \
        launch_mod.build(kernels, CudaTarget(cublas=True))[0]   # + the cuBLAS epilogues
    seen, failures = set(), 0
    for ln in launches:
        if ln.host:
            continue
        sig = tuple(arg_type(a, launch_mod) for a in ln.args)
        key = (ln.kernel_name, sig)
        if key in seen:
            continue
        seen.add(key)
        try:
            cuda.compile_ptx(ln.kernel.py_func, sig, cc=(9, 0))
        except Exception as exc:     # report every kernel, then fail
            failures += 1
            print(f"FAIL {label}: {ln.name} ({ln.kernel_name}): {str(exc).splitlines()[0]}")
    print(f"{label}: {len(seen)} kernel signatures, {failures} failed")
    return failures


class _NoDevice:
    """Stands in for the current device when device functions compile (sm_90, no driver)."""
    compute_capability = (9, 0)


def main(argv):
    import onnx
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = _NoDevice
    from onnxjit.tools import models
    if argv == ["--slice"]:        # the backend-suite slice of tests/cuda
        sys.path.insert(0, "tests/cuda")
        from test_cuda_backend_slice import slice_names
        from onnx.backend.test.loader import load_model_tests
        names = {n[:-len("_cuda")] for n in slice_names()}
        failed = 0
        for case in load_model_tests(kind="node"):
            if case.name in names:
                inputs = case.data_sets[0][0]
                feeds = {i.name: np.asarray(a) for i, a in zip(case.model.graph.input, inputs)}
                try:
                    failed += check(case.model, case.name, feeds)
                except Exception as exc:
                    print(f"SKIP {case.name}: {type(exc).__name__}: {str(exc)[:100]}")
        return 1 if failed else 0
    if argv:
        suite = [(p, onnx.load(p)) for p in argv]
    else:
        suite = [(name, build()) for name, build in models.BUILDERS.items()]
        suite += [("small_shapes", models.transformer_block(seq=8, d_model=16, heads=2))]
    return 1 if sum(check(m, name) for name, m in suite) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
