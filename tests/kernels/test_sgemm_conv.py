"""1x1 convolution with a pre-packed constant weight (onnxjit.kernels.sgemm.conv1x1_packed)
vs onnxruntime.

The oracle is a one-graph ONNX model Conv(x, W[, B]) (kernel 1x1, stride 1, no pads)
[-> Add(res)] [-> Relu] with W and B as initializers, run by onnxruntime.  Errors are measured
relative to |W| @ |X| (the rounding scale of a float32 dot product), per element.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper

from onnxjit.kernels.sgemm import conv1x1_packed, pack_a, pack_b

from helpers import numba_cache_runs


def _ort(x, w, bias, act, res):
    """act(Conv1x1(x, w, bias) (+ res)) by onnxruntime (w, bias as initializers); act 0 none,
    1 Relu, 2 Clip(0, 6), 3 HardSwish."""
    m, c = w.shape
    inputs = ["x", "w"] + (["b"] if bias is not None else [])
    nodes = [oh.make_node("Conv", inputs, ["cv"], kernel_shape=[1, 1])]
    inits = [numpy_helper.from_array(w.reshape(m, c, 1, 1), "w")]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
    feeds = {"x": x}
    graph_inputs = [oh.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    last = "cv"
    if res is not None:
        nodes.append(oh.make_node("Add", ["cv", "res"], ["sum"]))
        graph_inputs.append(oh.make_tensor_value_info("res", TensorProto.FLOAT, list(res.shape)))
        feeds["res"] = res
        last = "sum"
    if act == 2:
        inits += [numpy_helper.from_array(np.float32(0.0), "lo"),
                  numpy_helper.from_array(np.float32(6.0), "hi")]
        nodes.append(oh.make_node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(oh.make_node({0: "Identity", 1: "Relu", 3: "HardSwish"}[act], [last],
                                  ["y"]))
    graph = oh.make_graph(nodes, "g", graph_inputs,
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _check(x, w, bias, act, res, tol=2e-6):
    m = w.shape[0]
    bounds = {2: (0.0, 6.0), 3: (1.0 / 6.0, 0.5)}.get(act, (0.0, 0.0))
    got = conv1x1_packed(x, pack_a(w), m, bias, act, res, bounds)
    want = _ort(x, w, bias, act, res)
    assert got.shape == want.shape == (x.shape[0], m) + x.shape[2:]
    assert got.dtype == np.float32
    if got.size:
        n, c, h, wd = x.shape
        xa = np.abs(x.astype(np.float64)).reshape(n, c, h * wd)
        scale = np.einsum("mc,ncp->nmp", np.abs(w.astype(np.float64)), xa).reshape(got.shape)
        scale += 1.0 + (np.abs(res) if res is not None else 0.0)
        assert (np.abs(got.astype(np.float64) - want) / scale).max() < tol
    return got


# (N, C, M, H, W): the transposed path (H*W <= 64: 7x7, 8x8, 3x3, with M > C through
# sgemm_packed, else the _ck kernels; H*W <= 256 with M <= C: 10x10, 12x12, 14x14, 1x65, 9x9,
# or with C >= 64: 14x14 96 -> 200)
# and the streaming path (ragged 32-column tiles: 10x10 / 17x17 / 13x15 with M > C, 31x37),
# odd M (10, 33, 45, 47: 12/8/4/1-row kernels, partial 32-row panels), several K blocks
# (C > 128 / 256), C = 1, M = 1, and some ResNet shapes.
SHAPES = [(2, 37, 10, 7, 7), (1, 64, 64, 7, 7), (2, 16, 70, 8, 8), (1, 513, 33, 3, 3),
          (2, 70, 45, 10, 10), (2, 40, 45, 10, 10), (1, 200, 237, 17, 17),
          (1, 300, 20, 31, 37), (2, 1, 5, 13, 15), (1, 9, 1, 9, 9),
          (1, 130, 100, 1, 65), (2, 129, 47, 12, 12), (1, 256, 64, 14, 14),
          (1, 512, 128, 28, 28), (1, 64, 256, 56, 56), (1, 512, 96, 7, 7),
          (1, 96, 200, 14, 14)]


@pytest.mark.parametrize("n,c,m,h,w", SHAPES)
@pytest.mark.parametrize("with_bias,act,with_res", [(True, 1, False), (True, 0, True),
                                                    (True, 1, True), (False, 0, False)])
def test_matches_onnxruntime(n, c, m, h, w, with_bias, act, with_res):
    rng = np.random.default_rng(n * 7 + c * 1009 + m * 100003 + h * 31 + w)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((m, c), dtype=np.float32)
    bias = rng.standard_normal(m, dtype=np.float32) if with_bias else None
    res = rng.standard_normal((n, m, h, w), dtype=np.float32) if with_res else None
    _check(x, wt, bias, act, res)


def test_res_not_modified_and_output_fresh():
    rng = np.random.default_rng(3)
    for h in (7, 20):  # both paths
        x = rng.standard_normal((2, 40, h, h), dtype=np.float32)
        wt = rng.standard_normal((30, 40), dtype=np.float32)
        res = rng.standard_normal((2, 30, h, h), dtype=np.float32)
        keep = res.copy()
        y = conv1x1_packed(x, pack_a(wt), 30, np.zeros(30, np.float32), 1, res)
        np.testing.assert_array_equal(res, keep)
        assert not np.shares_memory(y, res) and not np.shares_memory(y, x)


@pytest.mark.parametrize("h", [7, 20])   # the transposed and the streamed product
def test_empty_res_is_no_residual(h):
    """The lowering passes an empty array for "no residual", so that convs with and without
    one share a compiled kernel: it must compute the conv without a residual (the kernel's
    None path is its own specialization, which no model compiles)."""
    from onnxjit.kernels import sgemm
    rng = np.random.default_rng(h)
    x = rng.standard_normal((2, 40, h, h), dtype=np.float32)
    wt = rng.standard_normal((30, 40), dtype=np.float32)
    bias = rng.standard_normal(30, dtype=np.float32)
    entry = sgemm.conv1x1_packed_small if sgemm.conv1x1_small(h * h, 30, 40) \
        else sgemm.conv1x1_packed_cols
    got = entry(x, pack_a(wt), 30, bias, 1, np.empty((0, 0, 0, 0), np.float32), (0.0, 0.0))
    np.testing.assert_allclose(got, _ort(x, wt, bias, 1, None), rtol=1e-5, atol=1e-4)


def test_non_contiguous_input():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 9, 24), dtype=np.float32).transpose(0, 3, 1, 2)  # (2,24,9,9)
    wt = rng.standard_normal((13, 24), dtype=np.float32)
    _check(x, wt, None, 0, None)


def test_degenerate_and_mismatch():
    bias = np.array([1, -2, 3], np.float32)
    x = np.zeros((2, 0, 4, 5), np.float32)
    y = conv1x1_packed(x, pack_a(np.zeros((3, 0), np.float32)), 3, bias, 1, None)
    np.testing.assert_array_equal(y, np.maximum(np.broadcast_to(bias[:, None, None],
                                                                (2, 3, 4, 5)), 0))
    wp = pack_a(np.ones((3, 4), np.float32))
    with pytest.raises(ValueError):
        conv1x1_packed(np.zeros((1, 5, 2, 2), np.float32), wp, 3, None, 0, None)
    with pytest.raises(ValueError):
        conv1x1_packed(np.zeros((1, 4, 2, 2), np.float32), wp, 40, None, 0, None)


@pytest.mark.parametrize("h", [7, 20])
def test_nan_propagates_through_relu(h):
    x = np.ones((1, 2, h, h), np.float32)
    x[0, 0, 0, 0] = np.nan
    y = conv1x1_packed(x, pack_a(np.ones((3, 2), np.float32)), 3, None, 1, None)
    assert np.isnan(y[0, :, 0, 0]).all()
    assert (y.reshape(3, -1)[:, 1:] == 2.0).all()


def test_pack_a_layout():
    w = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    wp = pack_a(w)
    assert wp.shape == (2, 3, 32) and wp.dtype == np.float32
    np.testing.assert_array_equal(wp, pack_b(w.T))
    np.testing.assert_array_equal(wp[1, :, :8], w[32:].T)
    assert not wp[1, :, 8:].any()


CHILD = r"""
import numpy as np
from numba import njit
from onnxjit.kernels import simd
V = simd.w16

@njit(cache=True)
def masked_double(a, out, n):
    for i in range(0, n, 16):
        v = V.loadm(a, i, min(16, n - i))
        simd.vstorem(out, i, simd.vadd(v, v), min(16, n - i))

a = np.arange(21, dtype=np.float32)
out = np.full(24, -1.0, np.float32)
masked_double(a, out, 21)
assert (out[:21] == 2 * a).all() and (out[21:] == -1).all()
"""


def test_second_process_loads_from_disk_cache(tmp_path):
    """cache=True works with the masked-load / masked-store intrinsics (a kernel of its own:
    conv1x1_packed_small compiled ~19 s in the child)."""
    first, second = numba_cache_runs(CHILD, "masked_double", tmp_path / "numba")
    assert first["misses"] >= 1 and first["hits"] == 0
    assert second["hits"] >= 1 and second["misses"] == 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n,c,m,h,w", [(2, 64, 256, 28, 28), (1, 300, 70, 17, 19),
                                       (2, 512, 200, 7, 7), (1, 100, 300, 7, 7),
                                       (2, 256, 64, 14, 14), (1, 512, 64, 13, 13),
                                       (2, 384, 48, 13, 13), (2, 90, 96, 8, 8)])
def test_thread_counts(threads, n, c, m, h, w):
    """Serial and parallel paths: streamed (columns split), transposed product (panels and
    output rows split; M > C through the sgemm kernels; with fewer than 2 panels per thread,
    pixels split instead: the 13x13 and 8x8 shapes), with residual + Relu."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        rng = np.random.default_rng(n + c + m + h)
        x = rng.standard_normal((n, c, h, w), dtype=np.float32)
        wt = rng.standard_normal((m, c), dtype=np.float32)
        res = rng.standard_normal((n, m, h, w), dtype=np.float32)
        _check(x, wt, rng.standard_normal(m, dtype=np.float32), 1, res)
    finally:
        numba.set_num_threads(old)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("act", [1, 2, 3])
@pytest.mark.parametrize("n,c,m,h,w", [(1, 24, 100, 30, 30), (2, 32, 192, 28, 28),
                                       (1, 144, 24, 56, 56), (1, 16, 96, 112, 112)])
def test_thread_splits_with_activation(threads, act, n, c, m, h, w):
    """The streamed path's two splits over threads, runs of output rows (many rows against X:
    the first two shapes, 100 rows cut at a multiple of 12 inside a 32-row panel) and runs of
    columns (the last two), with the residual each thread copies into its own part and Relu,
    Clip or HardSwish (the per-block activation pass), with and without a residual."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        rng = np.random.default_rng(n + c + m + h + act)
        x = rng.standard_normal((n, c, h, w), dtype=np.float32)
        wt = (rng.standard_normal((m, c)) / np.sqrt(c)).astype(np.float32)
        bias = rng.standard_normal(m, dtype=np.float32)
        res = rng.standard_normal((n, m, h, w), dtype=np.float32)
        _check(x, wt, bias, act, res)
        _check(x, wt, bias, act, None)
    finally:
        numba.set_num_threads(old)
