"""One-node models and the checker the CUDA tests share: the CUDA rep against onnx's
ReferenceEvaluator and against onnxjit's CPU rep, with per-dtype tolerances."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend

OPSET = 21
TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1e-5, 1e-5),
              np.dtype(np.float64): (1e-12, 1e-12)}


def node_model(op, inputs, n_outputs=1, opset=OPSET, initializers=None, **attrs):
    """A model of one `op` node over graph inputs {name: array} (and constant initializers)."""
    initializers = initializers or {}
    names = list(inputs) + list(initializers)
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, names, outs, name="node", **attrs)
    graph = helper.make_graph(
        [node], "cuda_test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs],
        initializer=[onnx.numpy_helper.from_array(a, n) for n, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def assert_close(got, want, label=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=label)
    else:
        rtol, atol = TOLERANCES.get(want.dtype, (1e-5, 1e-5))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=label)


def check(model, feeds, cpu=True, reference=True):
    """Run `model` on CUDA with numpy `feeds` {name: array}; compare with the reference
    evaluator and (cpu=True) onnxjit's CPU rep (ONNXJIT_TEST_CPU_ORACLE=0 leaves that out:
    tools/gpu_check.sh, where the CPU kernels are not compiled yet). Returns the CUDA outputs."""
    rep = backend.prepare(model, "CUDA")
    got = rep.run(dict(feeds))
    assert all(isinstance(g, np.ndarray) for g in got), "numpy inputs must give numpy outputs"
    want = ReferenceEvaluator(model).run(None, dict(feeds)) if reference else []
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"output {i} vs reference")
    if cpu and os.environ.get("ONNXJIT_TEST_CPU_ORACLE", "1") != "0":
        for i, (g, c) in enumerate(zip(got, backend.prepare(model, "CPU").run(dict(feeds)))):
            assert_close(g, c, f"output {i} vs CPU")
    return got


def rand(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -5
        return rng.integers(lo, 6, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
