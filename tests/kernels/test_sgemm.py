"""AVX-512 packed-B SGEMM (onnxjit.kernels.sgemm) vs onnxruntime.

The oracle is a one-graph ONNX model MatMul(a, B) [-> Add(bias)] [-> Relu] with B (and bias)
as initializers, run by onnxruntime.  Errors are measured relative to |a| @ |b| (the rounding
scale of a float32 dot product), per element.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper

from onnxjit.kernels.sgemm import has_avx512, pack_b, sgemm_packed

from helpers import numba_cache_runs


def _ort(a, b, bias, act):
    """act(a @ b + bias) by onnxruntime (b, bias as initializers)."""
    m, k = a.shape
    n = b.shape[1]
    nodes = [oh.make_node("MatMul", ["a", "b"], ["mm"])]
    inits = [numpy_helper.from_array(b, "b")]
    last = "mm"
    if bias is not None:
        nodes.append(oh.make_node("Add", ["mm", "bias"], ["ab"]))
        inits.append(numpy_helper.from_array(bias, "bias"))
        last = "ab"
    nodes.append(oh.make_node("Relu" if act else "Identity", [last], ["y"]))
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"a": a})[0]


def _check(a, b, bias, act, tol=2e-6):
    got = sgemm_packed(a, pack_b(b), b.shape[1], bias, act)
    want = _ort(np.ascontiguousarray(a), b, bias, act)
    assert got.shape == want.shape and got.dtype == np.float32
    if got.size:
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1.0
        assert (np.abs(got.astype(np.float64) - want) / scale).max() < tol
    return got


# (M, K, N): every row tail (12/8/4/1-row kernels), N not a multiple of 32, several K blocks
# (K > 512) and several N blocks (packed B > 768 KiB), plus the inference shapes it targets.
SHAPES = [(1, 1, 1), (3, 5, 7), (12, 16, 32), (13, 17, 33), (25, 100, 100), (31, 64, 65),
          (7, 1500, 40), (30, 600, 700), (64, 784, 512), (128, 256, 1024), (128, 1024, 256),
          (2, 3, 1000), (40, 2100, 31)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("with_bias,act", [(False, 0), (True, 0), (True, 1)])
def test_matches_onnxruntime(m, k, n, with_bias, act):
    rng = np.random.default_rng(m * 1000003 + k * 1009 + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32) if with_bias else None
    _check(a, b, bias, act)


def test_non_contiguous_activation():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 70), dtype=np.float32).T  # (70, 40), Fortran order
    b = rng.standard_normal((40, 50), dtype=np.float32)
    _check(a, b, None, 0)


def test_empty_and_degenerate():
    b = np.ones((3, 5), np.float32)
    assert sgemm_packed(np.zeros((0, 3), np.float32), pack_b(b), 5, None, 0).shape == (0, 5)
    bias = np.array([1, -2, 3, -4, 5], np.float32)
    y = sgemm_packed(np.zeros((2, 0), np.float32), pack_b(np.zeros((0, 5), np.float32)), 5, bias, 1)
    np.testing.assert_array_equal(y, np.maximum(np.broadcast_to(bias, (2, 5)), 0))
    with pytest.raises(ValueError):
        sgemm_packed(np.zeros((2, 4), np.float32), pack_b(b), 5, None, 0)


def test_nan_propagates_through_relu():
    a = np.array([[np.nan, 1.0], [1.0, 1.0]], np.float32)
    y = sgemm_packed(a, pack_b(np.ones((2, 3), np.float32)), 3, None, 1)
    assert np.isnan(y[0]).all() and (y[1] == 2.0).all()


def test_has_avx512_is_a_bool():
    assert has_avx512() in (True, False)


def test_pack_b_layout():
    b = np.arange(3 * 40, dtype=np.float32).reshape(3, 40)
    bp = pack_b(b)
    assert bp.shape == (2, 3, 32) and bp.dtype == np.float32
    np.testing.assert_array_equal(bp[0], b[:, :32])
    np.testing.assert_array_equal(bp[1, :, :8], b[:, 32:])
    assert not bp[1, :, 8:].any()


CHILD = r"""
import numpy as np
from numba import njit
from onnxjit.kernels import simd
V = simd.w16

@njit(cache=True)
def dot_rows(a, b):
    acc = V.zero()
    for i in range(0, a.shape[0], 16):
        acc = simd.vfma(V.load(a, i), V.bcast(b, i), acc)
    out = np.empty(16, np.float32)
    simd.vstore(out, 0, acc)
    return simd.vhsum(acc), out

s, out = dot_rows(np.ones(64, np.float32), np.full(64, 2.0, np.float32))
assert s == 128 and (out == 8).all()
"""


def test_second_process_loads_from_disk_cache(tmp_path):
    """cache=True works with the custom vector type / intrinsics (no pickling failure): a
    kernel of its own (sgemm_packed compiled ~10 s in the child)."""
    first, second = numba_cache_runs(CHILD, "dot_rows", tmp_path / "numba")
    assert first["misses"] >= 1 and first["hits"] == 0
    assert second["hits"] >= 1 and second["misses"] == 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,k,n", [(64, 784, 512), (64, 512, 10), (100, 300, 40), (7, 1000, 700),
                                   (130, 600, 33)])
def test_thread_counts(threads, m, k, n):
    """Serial and parallel paths (split by panels, or by rows of 12 when there are few)."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        rng = np.random.default_rng(m + k + n)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        _check(a, b, rng.standard_normal(n, dtype=np.float32), 1)
    finally:
        numba.set_num_threads(old)
