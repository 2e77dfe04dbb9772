"""float32 Conv by im2col on the AVX-512 GEMM (onnxjit.kernels.conv_packed), through the backend.

Oracle: onnxruntime on the same one-graph model Conv [-> Add(res)] [-> Relu] (weights as
initializers), 1 thread; errors are measured relative to |W| * |X| summed over the window
(the rounding scale of the float32 dot products), so the tolerance does not depend on luck.
Every geometry the lowering sends there is covered: the streamed path (tiles of output rows,
im2col from x, from a banded phase-split copy, or from a whole-image split for 3-D), strided and
padded 1x1 kernels, groups, and the small-image transposed path; on 1 and 2 Numba threads.
"""
import numba
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxjit.backend as backend
from onnxjit.kernels.sgemm import has_avx512

pytestmark = pytest.mark.skipif(not has_avx512(), reason="conv_packed runs on AVX-512 CPUs only")


def _model(x_shape, w, b, attrs, res, relu):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    last = "c"
    if res is not None:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(res.shape)))
        last = "s"
    nodes.append(helper.make_node("Relu" if relu else "Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def check_conv_matches_ort(x_shape, w_shape, attrs, res, relu, threads, kernel_call):
    """Conv [-> Add(res)] [-> Relu] with random float32 data, prepared on `threads` Numba
    threads: its source calls `kernel_call`, and its output matches ORT's to 2e-6 of the
    rounding scale (the same graph over |x|, |w|, |b|, |res|)."""
    rng = np.random.default_rng(sum(x_shape[2:]) + w_shape[0])
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    b = rng.standard_normal(w_shape[0], dtype=np.float32)
    plain = _model(x.shape, w, b, attrs, None, False)
    out_shape = _ort(plain, {"x": x}).shape
    r = rng.standard_normal(out_shape, dtype=np.float32) if res else None
    model = _model(x.shape, w, b, attrs, r, relu)
    feeds = {"x": x} if r is None else {"x": x, "r": r}

    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        rep = backend.prepare(model)
        got = rep.run(list(feeds.values()))[0]
    finally:
        numba.set_num_threads(old)
    assert kernel_call in rep.source()
    want = _ort(model, feeds)
    # rounding scale: the same conv on |x| and |w| (plus the bias and residual magnitudes)
    absm = _model(x.shape, np.abs(w), np.abs(b), attrs, None if r is None else np.abs(r), False)
    scale = _ort(absm, {"x": np.abs(x)} if r is None else {"x": np.abs(x), "r": np.abs(r)})
    assert got.shape == want.shape and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want) / (scale + 1.0)
    assert err.max() < 2e-6, err.max()


CASES = [
    # (N, C, spatial, M, kernel, strides, pads, dilations, group)
    (1, 5, (64, 64), 16, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),      # stem: banded split
    (1, 32, (30, 30), 40, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),    # im2col from x
    (2, 16, (21, 19), 24, (3, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),    # direct (no pads)
    (1, 24, (28, 28), 36, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),    # wide: banded split
    (1, 16, (25, 25), 70, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),    # dilated
    (1, 40, (28, 28), 64, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),    # 1x1 stride 2
    (1, 12, (20, 20), 16, (1, 1), (1, 1), (1, 1, 1, 1), (1, 1), 1),    # 1x1 padded
    (2, 48, (14, 14), 48, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),    # groups
    (1, 24, (30, 30), 48, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),    # grouped 1x1 direct
    (1, 64, (7, 7), 100, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),     # small: transposed
    (1, 96, (7, 7), 40, (2, 2), (1, 1), (1, 1, 1, 1), (1, 1), 1),      # small, M <= kk
    (2, 8, (9, 9), 90, (2, 2), (1, 1), (1, 1, 1, 1), (1, 1), 1),       # small, M > kk
    (2, 37, (14, 14), 64, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),    # small, channel runs
    (1, 8, (300,), 20, (5,), (2,), (2, 2), (1,), 1),                   # 1-D
    (1, 4, (9, 10, 11), 12, (3, 3, 3), (2, 1, 1), (1, 1, 1, 1, 1, 1), (1, 1, 1), 1),  # 3-D
    (1, 6, (8, 24, 24), 8, (1, 1, 1), (2, 2, 2), (0, 0, 0, 0, 0, 0), (1, 1, 1), 1),  # 3-D 1x1
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}x{c[2]}k{c[4]}s{c[5]}g{c[8]}")
@pytest.mark.parametrize("res,relu", [(False, False), (True, True)])
def test_conv_packed_matches_ort(case, res, relu, threads):
    n, c, spatial, m, kernel, strides, pads, dil, group = case
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads),
                 dilations=list(dil), group=group)
    check_conv_matches_ort((n, c) + spatial, (m, c // group) + kernel, attrs, res, relu,
                           threads, "__k_conv_packed.conv_packed(")


@pytest.mark.parametrize("trans_b,c_shape,beta,relu", [
    (1, (7,), 1.0, True), (0, (1, 7), 0.5, False), (1, None, 1.0, False), (0, (1,), 2.0, True),
    (1, (3, 7), 1.0, False)])    # a full (M, N) C: not a bias, the BLAS path
@pytest.mark.parametrize("rows", [1, 3])
def test_gemm_with_constant_weights(trans_b, c_shape, beta, relu, rows):
    """Fully connected layers (Gemm with constant B): packed MatMul with beta * C as the bias and
    the Relu fused, at 1 row (GEMV) and a few; checked against onnx's ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(rows + len(c_shape or ()))
    k, n = 40, 7
    b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32)
    inits = [numpy_helper.from_array(b, "b")]
    inputs = ["x", "b"]
    if c_shape is not None:
        c_shape = (rows, n) if c_shape == (3, 7) else c_shape
        inits.append(numpy_helper.from_array(rng.standard_normal(c_shape, dtype=np.float32), "c"))
        inputs.append("c")
    nodes = [helper.make_node("Gemm", inputs, ["g"], transB=trans_b, beta=beta),
             helper.make_node("Relu" if relu else "Identity", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "fc", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [rows, k])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    x = rng.standard_normal((rows, k), dtype=np.float32)
    rep = backend.prepare(model)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    bias_like = c_shape is None or len(c_shape) == 1 or c_shape[0] == 1
    assert ("__k_sgemm.sgemm_packed(" in rep.source()) == bias_like
    assert ("__k_matmul.gemm(" in rep.source()) == (not bias_like)
