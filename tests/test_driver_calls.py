"""The Python driver runs data movement (Concat, Split, Reshape ...) as shared kernels generic over
their sizes, so a long graph of library calls, movement and fused kernels needs no njit segment."""
import re

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from helpers import concat_split_model


def test_driver_runs_movement_as_shared_kernels():
    model = concat_split_model()
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    rep = backend.prepare(model)
    (got,) = rep.run([x])
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-6)
    compiled = rep.compiled()
    with open(compiled.path) as f:
        module = f.read()
    assert "def run_graph(" in module and "@__njit" not in module and "segment_" not in module
    assert re.search(r"= call_\d+_concat\(t\d+, \(1, 72\), in_x, \(1, 72\), \(1, 4, 6, 6\)\)  "
                     r"# __k_movement\.concat\(\("
                     r"__np\.ascontiguousarray\(t\d+\)\.reshape\(\(1, 72\)\), "
                     r"__np\.ascontiguousarray\(in_x\)\.reshape\(\(1, 72\)\),\)\)"
                     r"\.reshape\(\(1, 4, 6, 6\)\)",
                     module)                               # numbers as arguments; the original
    concat = [k.name for k in compiled.kernels if k.name.endswith("_concat")]
    assert len(concat) == 12
    shared = {getattr(compiled.module, name) for name in concat}
    assert len(shared) == 1                                   # one kernel for every Concat
    (kernel,) = shared
    # ... compiled once for this model's rank (other tests' models may share it, other ranks)
    assert len([s for s in kernel.signatures if s[-1].count == 4]) == 1
    assert ("__k_movement.concat((__np.ascontiguousarray(a0).reshape(p0), "
            "__np.ascontiguousarray(a1).reshape(p1))).reshape(p2)") in rep.source()


def test_small_graphs_keep_movement_inline(njit_entry):
    """In an njit entry movement stays an expression: no call, no shared kernel."""
    model = concat_split_model(blocks=1)
    rep = backend.prepare(model)
    source = rep.source()
    assert "__k_movement.concat((" in source and "__load_kernel(__file__" in source
    assert "_concat = __load_kernel" not in source
    x = np.ones((1, 2, 6, 6), np.float32)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_shared_kernels_hold_no_sizes():
    model = concat_split_model(blocks=12, dims=(1, 3, 5, 7))
    kernels = backend.prepare(model).source().split("# The shared kernels bound above", 1)[1]
    kernels = re.sub(r"\.shape\[\d\]|float32|f_[0-9a-f]+", "", kernels)
    assert not re.search(r"\b(3|5|7|6|35|105|210)\b", kernels)


def pools(dims, n=5):
    """n same-size MaxPools in a row: a short graph of library calls."""
    nodes = [helper.make_node("MaxPool", [f"p{i}" if i else "x"], [f"p{i + 1}"],
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]) for i in range(n)]
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, dims)], [helper.make_tensor_value_info(f"p{n}", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("dims,driver", [((1, 1, 512, 512), True), ((1, 2, 6, 6), False)])
def test_short_heavy_graphs_take_the_driver(dims, driver, njit_entry):
    """Writing 2^20 elements or more, a short graph of library calls is driven from Python
    (nothing to compile), a light one keeps its njit entry (no per-call overhead)."""
    from onnxjit.plan import DRIVER_MIN_ELEMENTS
    assert (5 * np.prod(dims) >= DRIVER_MIN_ELEMENTS) == driver
    model = pools(dims)
    rep = backend.prepare(model)
    with open(rep.compiled().path) as f:
        module = f.read()
    assert ("@__njit" not in module) == driver
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    # onnxruntime as the oracle: onnx's evaluator pools 5 x 512 x 512 in Python (~8 s)
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(rep.run([x])[0], sess.run(None, {"x": x})[0])
