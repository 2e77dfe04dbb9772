"""Winograd 3x3 Conv kernel (onnxjit.kernels.winograd) vs onnx.reference / onnxruntime.

The oracle runs an ONNX graph Conv -> (Add residual) -> (Relu); the kernel computes the same
y = act(conv(x) + b (+ res)) from winograd_weights(w, m).  Errors are measured relative to
max |y| (Winograd rounding grows with the transform's dynamic range, not per element).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels.simd import has_avx512
from onnxjit.kernels.winograd import (GEMM_AVX2, GEMM_BLAS, GEMM_CK, avx2_weights, conv3x3,
                                      conv3x3_avx2, conv3x3_blas, point_gemm, use_winograd,
                                      winograd_weights)
from onnxjit.target import host

REL = {np.float32: 1e-4, np.float64: 1e-12}


def _model(x, w, b, pads, act, res):
    """ONNX model computing act(Conv(x, w, b, pads) [+ res])."""
    tp = oh.np_dtype_to_tensor_dtype(x.dtype)
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                          pads=[pads[0], pads[1], pads[2], pads[3]])]
    inputs = [oh.make_tensor_value_info("x", tp, list(x.shape))]
    last = "c"
    if res is not None:
        nodes.append(oh.make_node("Add", ["c", "r"], ["a"]))
        inputs.append(oh.make_tensor_value_info("r", tp, list(res.shape)))
        last = "a"
    nodes.append(oh.make_node("Relu" if act else "Identity", [last], ["y"]))
    graph = oh.make_graph(nodes, "g", inputs, [oh.make_tensor_value_info("y", tp, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _reference(x, w, b, pads, act, res, engine="reference"):
    model = _model(x, w, b, pads, act, res)
    feeds = {"x": x} if res is None else {"x": x, "r": res}
    if engine == "ort":
        import onnxruntime as ort
        model.ir_version = 10
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]
    return ReferenceEvaluator(model).run(None, feeds)[0]


def _inputs(N, C, M, H, W, pads, dtype, with_res, seed=0):
    """N(0,1) input, He-scaled weights, small bias, optional residual."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = (rng.standard_normal((M, C, 3, 3)) * np.sqrt(2.0 / (9 * C))).astype(dtype)
    b = (0.1 * rng.standard_normal(M)).astype(dtype)
    oh_, ow_ = H + pads[0] + pads[2] - 2, W + pads[1] + pads[3] - 2
    res = rng.standard_normal((N, M, oh_, ow_)).astype(dtype) if with_res else None
    return x, w, b, res


def _check(x, w, b, pads, act, res, m, engine="reference"):
    dtype = x.dtype.type
    ref = _reference(x, w, b, pads, act, res, engine)
    # no residual is an empty array, as the lowering passes it (None would be a signature of
    # its own: one more compile of conv3x3, ~9 s, for a call no model makes)
    kres = res if res is not None else _NO_RES(x.dtype)
    for entry, gemm in _entries(dtype):
        got = entry(x, _weights(w, m, gemm), b, pads, act, kres, gemm)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        scale = max(float(np.abs(ref).max()), 1e-30)
        err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
        assert err <= REL[dtype], f"relative error {err:.3g} (m={m}, {dtype.__name__}, {gemm=})"


def _entries(dtype):
    """(entry, gemm) pairs the lowering can pick for x's dtype on this host: conv3x3_blas with
    BLAS point GEMMs everywhere (float64, and float32 on the generic target), and for float32
    on AVX-512 hosts conv3x3 with the register-blocked ck* kernels (an AVX-512 kernel like
    those whose own tests need AVX-512: the AVX2 hosts' models never run it, and testing it
    there cost a 41 s compile), on AVX2 hosts conv3x3_avx2 on the AVX2 GEMM."""
    pairs = [(conv3x3_blas, GEMM_BLAS)]
    if dtype == np.float32 and has_avx512():
        pairs.append((conv3x3, GEMM_CK))
    elif dtype == np.float32 and host().f32_gemm == "avx2":
        pairs.append((conv3x3_avx2, GEMM_AVX2))
    return pairs


def _weights(w, m, gemm):
    """The transformed weights in the layout the entry of `gemm` reads."""
    u = winograd_weights(w, m)
    return avx2_weights(u) if gemm == GEMM_AVX2 else u


def _NO_RES(dtype):
    return np.empty((0, 0, 0, 0), dtype)


PADS = [(0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 1, 0), (2, 0, 1, 3)]


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pads", PADS)
def test_pads_odd_sizes(m, dtype, pads):
    """H=7, W=9: no side a multiple of m; asymmetric and zero pads."""
    x, w, b, _ = _inputs(1, 5, 6, 7, 9, pads, dtype, False)
    _check(x, w, b, pads, 0, None, m)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", [0, 1])
@pytest.mark.parametrize("with_res", [False, True])
def test_batch_act_residual(m, dtype, act, with_res):
    """N=2 (tile rows of both images share GEMMs), fused Relu and residual add."""
    pads = (1, 1, 1, 1)
    x, w, b, res = _inputs(2, 8, 12, 10, 13, pads, dtype, with_res, seed=1)
    _check(x, w, b, pads, act, res, m)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw", [(1, 1), (2, 3), (3, 3), (4, 5)])
def test_tiny_images(m, dtype, hw):
    """Images smaller than one tile; 1x1 input with pads 1 gives a 1x1 output."""
    pads = (1, 1, 1, 1)
    x, w, b, res = _inputs(2, 3, 4, hw[0], hw[1], pads, dtype, True, seed=2)
    _check(x, w, b, pads, 1, res, m)


@pytest.mark.parametrize("m", [2, 4])
def test_many_chunks_across_images(m):
    """Enough tiles for several chunks, with a chunk spanning the two images."""
    pads = (1, 1, 1, 1)
    x, w, b, res = _inputs(2, 64, 64, 110, 120, pads, np.float32, True, seed=3)
    _check(x, w, b, pads, 1, res, m, engine="ort")


@pytest.mark.parametrize("m", [2, 4])
def test_many_chunks_float64(m):
    pads = (0, 1, 2, 1)
    x, w, b, res = _inputs(2, 40, 48, 50, 44, pads, np.float64, True, seed=4)
    _check(x, w, b, pads, 0, res, m)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("C", [256, 512])
def test_wide_channels_accuracy(m, C):
    """float32 error must stay well inside 1e-4 relative even at C=512 with F(4x4)."""
    pads = (1, 1, 1, 1)
    x, w, b, _ = _inputs(1, C, 32, 9, 9, pads, np.float32, False, seed=5)
    _check(x, w, b, pads, 0, None, m, engine="ort")


def test_empty_output():
    x = np.zeros((1, 2, 1, 1), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    for entry, gemm in _entries(np.float32):
        y = entry(x, _weights(w, 2, gemm), np.zeros(3, np.float32), (0, 0, 0, 0), 0,
                  _NO_RES(np.float32), gemm)
        assert y.shape == (1, 3, 0, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_layout(dtype):
    w = np.random.default_rng(6).standard_normal((5, 3, 3, 3)).astype(dtype)
    for m, a in ((2, 4), (4, 6)):
        u = winograd_weights(w, m)
        assert u.shape == (a * a, 3, 5) and u.dtype == dtype and u.flags.c_contiguous
    # point (k, l) = (0, 0) is G[0] g G[0]^T: g[0, 0] for m=2, g[0, 0]/16 for m=4
    np.testing.assert_allclose(winograd_weights(w, 2)[0], w[:, :, 0, 0].T)
    np.testing.assert_allclose(winograd_weights(w, 4)[0], w[:, :, 0, 0].T / 16, rtol=1e-6)
    with pytest.raises(ValueError):
        winograd_weights(w, 3)
    with pytest.raises(ValueError):
        winograd_weights(w[:, :, :2], 2)


def test_use_winograd():
    assert use_winograd(64, 64, 56, 56) == 4
    assert use_winograd(256, 256, 14, 14) == 2
    assert use_winograd(512, 512, 7, 7) == 0  # U streaming dominates with 16 tiles
    assert use_winograd(512, 512, 7, 7, N=4) == 2
    assert use_winograd(64, 64, 0, 5) == 0
    assert use_winograd(64, 64, 8, 4096) == 0  # wider than the scratch buffers


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("C,M", [(64, 40), (256, 37), (3, 16)])
def test_thread_counts(threads, m, dtype, C, M):
    """Serial and parallel paths (input channels / points / output channels split over the
    Numba threads; float32 points on the AVX-512 kernels), several chunks, residual + Relu."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        x, w, b, res = _inputs(2, C, M, 30, 23, (1, 1, 1, 1), dtype, True, seed=C + M)
        _check(x, w, b, (1, 1, 1, 1), 1, res, m, engine="ort" if dtype == np.float32 else
               "reference")
    finally:
        numba.set_num_threads(old)


@pytest.mark.parametrize("C,M,m", [(64, 40, 4), (256, 37, 2), (256, 37, 4)])
def test_repeated_parallel_calls_keep_residual(C, M, m):
    """Whole chunks per thread (U up to 1 MB: 64x40, 256x37 m=2) and phases per thread
    (256x37 m=4), 2 threads, called 20 times: the residual must count every time (an Optional
    residual captured by a prange body was dropped from the 9th call on)."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.fail("needs 2 Numba threads")
    old = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        x, w, b, res = _inputs(2, C, M, 30, 23, (1, 1, 1, 1), np.float32, True,
                              seed=C + M)
        ref = _reference(x, w, b, (1, 1, 1, 1), 1, res, "ort")
        scale = float(np.abs(ref).max())
        for entry, gemm in _entries(np.float32):  # BLAS: the transforms threaded, BLAS not
            u = _weights(w, m, gemm)
            for call in range(20):
                got = entry(x, u, b, (1, 1, 1, 1), 1, res, gemm)
                err = float(np.abs(got - ref).max()) / scale
                assert err <= REL[np.float32], f"{gemm=} call {call}: relative error {err:.3g}"
    finally:
        numba.set_num_threads(old)


def test_point_gemm_comes_from_the_target():
    """The register-blocked point GEMMs for float32 on AVX-512, the AVX2 GEMM for float32 on
    AVX2; BLAS elsewhere (generic, float64), and a Conv lowered for a target carries that
    choice."""
    from onnxjit.target import Target
    assert point_gemm(Target("avx512", 512), np.float32) == GEMM_CK
    assert point_gemm(Target("avx512", 512), np.float64) == GEMM_BLAS
    assert point_gemm(Target("avx2", 256), np.float32) == GEMM_AVX2
    assert point_gemm(Target("avx2", 256), np.float64) == GEMM_BLAS
    assert point_gemm(Target("generic", 128), np.float32) == GEMM_BLAS
