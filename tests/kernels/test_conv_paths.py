"""Code paths of kernels/conv.py's im2col Conv, each against onnx.reference.ReferenceEvaluator.

Paths: im2col from the phase-split input (kernels >= 5 wide with strides / pads; banded per
tile for 1-D and 2-D, whole for 3-D), straight from x with bounds (narrower kernels), or from
x without bounds (stride 1, no pads); 1x1 kernels with and without the split (strided 1x1
reads the subsampled input as its column matrix); several row tiles and column blocks; the
fused epilogue act(conv + b + res); groups, dilation, asymmetric pads, float64; and gemm_into
on strided blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels.conv import conv, gemm_into
from tests.helpers import conv5, no_residual

RTOL = {np.float32: 1e-4, np.float64: 1e-10}
ATOL = {np.float32: 1e-4, np.float64: 1e-10}


def _rand(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _reference(x, w, b, strides, pads, dilations, group, act, res):
    """ReferenceEvaluator on Conv (+ Add res) (+ Relu)."""
    tp = oh.np_dtype_to_tensor_dtype(x.dtype)
    names, feeds = ["x", "w", "b"], {"x": x, "w": w, "b": b}
    nodes = [oh.make_node("Conv", names, ["c"], strides=list(strides), pads=list(pads),
                          dilations=list(dilations), group=group)]
    last = "c"
    if res is not None:
        nodes.append(oh.make_node("Add", ["c", "r"], ["a"]))
        feeds["r"] = res
        last = "a"
    if act == 1:
        nodes.append(oh.make_node("Relu", [last], ["y"]))
    else:
        nodes.append(oh.make_node("Identity", [last], ["y"]))
    inputs = [oh.make_tensor_value_info(k, tp, v.shape) for k, v in feeds.items()]
    graph = oh.make_graph(nodes, "g", inputs, [oh.make_tensor_value_info("y", tp, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    return ReferenceEvaluator(model).run(None, feeds)[0]


def _out_shape(xs, ws, strides, pads, dilations):
    k = len(xs) - 2
    return tuple((xs[2 + i] + pads[i] + pads[k + i] - (ws[2 + i] - 1) * dilations[i] - 1)
                 // strides[i] + 1 for i in range(k))


def _check(xs, ws, strides, pads, dilations=None, group=1, dtype=np.float32, act=0,
           with_res=False, seed=0):
    k = len(xs) - 2
    dilations = dilations or (1,) * k
    x = _rand(xs, dtype, seed + 1)
    w = _rand(ws, dtype, seed + 2)
    b = _rand((ws[0],), dtype, seed + 3)
    res = None
    if with_res:
        res = _rand((xs[0], ws[0]) + _out_shape(xs, ws, strides, pads, dilations), dtype,
                    seed + 4)
    want = _reference(x, w, b, strides, pads, dilations, group, act, res)
    # as the lowering calls it: canonical 5-D, an empty residual for none (tests/helpers.py)
    got = conv5(conv, x, w, b, strides, pads, dilations, group, act,
                no_residual(dtype) if res is None else res)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=ATOL[dtype] * scale)


DTYPES = [np.float32, np.float64]

CASES = [
    # x shape, w shape, strides, pads (begin..., end...), dilations, group
    # strided 1x1 (downsample): the subsampled input is the column matrix
    ((1, 16, 14, 14), (24, 16, 1, 1), (2, 2), (0, 0, 0, 0), None, 1),
    ((2, 8, 9, 11), (6, 8, 1, 1), (2, 3), (0, 0, 0, 0), None, 1),
    ((1, 8, 9, 10), (6, 8, 1, 1), (2, 2), (1, 0, 2, 1), None, 1),  # padded 1x1
    ((1, 8, 9, 10), (6, 8, 1, 1), (1, 1), (1, 1, 1, 1), None, 1),  # padded stride-1 1x1
    # strided k x k: phase-split input
    ((1, 3, 23, 21), (8, 3, 7, 7), (2, 2), (3, 3, 3, 3), None, 1),  # stem-like
    ((1, 8, 16, 16), (8, 8, 3, 3), (2, 2), (1, 1, 1, 1), None, 1),
    ((1, 8, 17, 15), (8, 8, 3, 3), (2, 2), (0, 0, 0, 0), None, 1),  # valid, odd sizes
    ((1, 4, 10, 12), (5, 4, 2, 2), (3, 3), (0, 1, 2, 0), None, 1),  # stride > kernel
    ((1, 4, 11, 13), (5, 4, 3, 2), (3, 2), (2, 0, 1, 3), None, 1),  # asymmetric everything
    ((1, 2, 5, 5), (3, 2, 5, 5), (3, 3), (4, 4, 4, 4), None, 1),  # mostly padding
    # kernels >= 5 wide (phase split) with strides, dilation, groups, asymmetric pads
    ((1, 4, 19, 23), (5, 4, 5, 5), (2, 2), (2, 1, 0, 3), None, 1),
    ((1, 4, 19, 23), (5, 4, 3, 5), (2, 3), (1, 2, 2, 2), (2, 2), 1),
    ((1, 6, 16, 16), (6, 2, 5, 6), (2, 2), (2, 2, 3, 3), None, 3),
    ((2, 3, 30, 33), (4, 3, 4, 8), (4, 4), (0, 0, 0, 0), None, 1),  # patchify-like, stride > 1
    # stride 1 with pads, and without (x used in place)
    ((1, 4, 12, 12), (6, 4, 5, 5), (1, 1), (2, 2, 2, 2), None, 1),  # Inception 5x5
    ((1, 4, 9, 9), (6, 4, 1, 7), (1, 1), (0, 3, 0, 3), None, 1),  # 1x7
    ((1, 4, 9, 9), (6, 4, 7, 1), (1, 1), (3, 0, 3, 0), None, 1),  # 7x1
    ((1, 4, 9, 10), (6, 4, 3, 4), (1, 1), (0, 0, 0, 0), None, 1),  # valid: no copy
    ((1, 4, 7, 7), (5, 4, 3, 3), (1, 1), (1, 1, 1, 1), None, 1),  # small image
    # dilation
    ((1, 4, 13, 14), (5, 4, 3, 3), (2, 2), (2, 2, 2, 2), (2, 2), 1),
    ((1, 4, 13, 14), (5, 4, 3, 3), (2, 1), (1, 3, 0, 2), (3, 2), 1),
    ((1, 4, 13, 14), (5, 4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    # groups
    ((1, 6, 10, 10), (9, 2, 3, 3), (2, 2), (1, 1, 1, 1), None, 3),
    ((2, 6, 10, 10), (6, 3, 1, 1), (1, 1), (0, 0, 0, 0), None, 2),
    ((1, 6, 10, 10), (4, 3, 1, 1), (2, 2), (0, 0, 0, 0), None, 2),
    ((1, 8, 9, 9), (8, 1, 3, 3), (2, 2), (1, 1, 1, 1), None, 8),  # depthwise
    # 1-D
    ((2, 3, 17), (4, 3, 3), (2,), (1, 2), None, 1),
    ((1, 6, 20), (4, 3, 1), (3,), (0, 0), None, 2),
    ((1, 4, 20), (4, 4, 5), (1,), (2, 2), (3,), 1),
    ((2, 3, 31), (4, 3, 7), (2,), (3, 1), None, 1),
    # 3-D (whole split, not banded)
    ((1, 3, 6, 7, 8), (4, 3, 3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1), None, 1),
    ((1, 4, 5, 6, 7), (3, 4, 1, 1, 1), (2, 1, 2), (0, 0, 0, 0, 0, 0), None, 1),
    ((1, 4, 5, 6, 7), (3, 4, 1, 1, 1), (2, 2, 2), (1, 0, 1, 0, 1, 1), None, 1),
    ((2, 4, 6, 5, 7), (4, 2, 2, 3, 2), (2, 1, 2), (0, 1, 1, 1, 0, 0), (1, 2, 1), 2),
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), (1, 1, 1), (0, 0, 0, 0, 0, 0), None, 1),
    ((1, 3, 6, 7, 11), (4, 3, 2, 3, 5), (2, 1, 2), (1, 1, 2, 0, 1, 2), (1, 1, 2), 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group", CASES)
def test_conv_path(xs, ws, strides, pads, dil, group, dtype):
    _check(xs, ws, strides, pads, dil, group, dtype)


EPILOGUE_CASES = [
    ((1, 8, 16, 16), (8, 8, 3, 3), (2, 2), (1, 1, 1, 1), 1),
    ((1, 16, 14, 14), (24, 16, 1, 1), (2, 2), (0, 0, 0, 0), 1),
    ((2, 8, 9, 9), (6, 8, 1, 1), (1, 1), (0, 0, 0, 0), 1),
    ((1, 6, 10, 10), (6, 2, 3, 3), (1, 1), (0, 1, 2, 1), 3),
    ((1, 3, 6, 7, 8), (4, 3, 3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1), 1),
    ((1, 4, 12, 12), (6, 4, 5, 5), (1, 1), (2, 2, 2, 2), 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,strides,pads,group", EPILOGUE_CASES)
@pytest.mark.parametrize("act,with_res", [(1, False), (0, True), (1, True)])
def test_conv_epilogue(xs, ws, strides, pads, group, act, with_res, dtype):
    _check(xs, ws, strides, pads, None, group, dtype, act, with_res)


# Shapes big enough for several row tiles / column blocks, including a partial last one.
TILED_CASES = [
    ((1, 3, 64, 60), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3)),  # stem-like, 2 bands
    ((1, 64, 64, 64), (32, 64, 3, 3), (2, 2), (1, 1, 1, 1)),  # 3 bands, last partial
    ((1, 32, 40, 40), (16, 32, 5, 5), (1, 1), (2, 2, 2, 2)),  # 5x5, several bands
    ((1, 512, 50, 60), (8, 512, 1, 1), (1, 1), (0, 0, 0, 0)),  # 1x1: 3 column blocks
    ((1, 256, 60, 60), (16, 256, 1, 1), (2, 2), (0, 0, 0, 0)),  # strided 1x1, 2 bands
]


@pytest.mark.parametrize("xs,ws,strides,pads", TILED_CASES)
@pytest.mark.parametrize("act,with_res", [(0, False), (1, True)])
def test_conv_tiled(xs, ws, strides, pads, act, with_res):
    _check(xs, ws, strides, pads, None, 1, np.float32, act, with_res)


def test_nan_propagates_through_relu():
    """The Relu epilogue keeps NaN (Relu(NaN) = NaN), as ReferenceEvaluator does."""
    x = _rand((1, 4, 8, 8), np.float32, 1)
    x[0, 1, 3, 3] = np.nan
    w = _rand((4, 4, 3, 3), np.float32, 2)
    b = _rand((4,), np.float32, 3)
    want = _reference(x, w, b, (2, 2), (1, 1, 1, 1), (1, 1), 1, 1, None)
    got = conv5(conv, x, w, b, (2, 2), (1, 1, 1, 1), (1, 1), 1, 1, no_residual(np.float32))
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_into_strided_blocks(dtype):
    """gemm_into writes a column block of a wider array and leaves the rest untouched."""
    a = _rand((7, 11), dtype, 1)
    b = _rand((11, 30), dtype, 2)
    tp = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = oh.make_graph([oh.make_node("MatMul", ["a", "b"], ["c"])], "g",
                          [oh.make_tensor_value_info("a", tp, a.shape),
                           oh.make_tensor_value_info("b", tp, (11, 13))],
                          [oh.make_tensor_value_info("c", tp, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    want = ReferenceEvaluator(model).run(None, {"a": a, "b": np.ascontiguousarray(b[:, 5:18])})[0]
    big = np.full((7, 40), 7.0, dtype)
    gemm_into(a, b[:, 5:18], big[:, 9:22])
    np.testing.assert_allclose(big[:, 9:22], want, rtol=RTOL[dtype], atol=ATOL[dtype])
    assert (big[:, :9] == 7).all() and (big[:, 22:] == 7).all()


# (x shape, w shape, strides, pads, output_padding): kernel == stride takes the tile path
# (one GEMM, each input pixel its own output tile); the others the general col2im
CONV_TRANSPOSES = [((1, 5, 6, 7), (5, 3, 2, 2), (2, 2), (0, 0, 0, 0), None),
                   ((2, 4, 3, 5), (4, 2, 3, 3), (3, 3), (0, 0, 0, 0), None),
                   ((1, 3, 9), (3, 4, 2), (2,), (0, 0), None),
                   ((1, 4, 5, 5), (4, 2, 2, 2), (2, 2), (1, 0, 0, 1), None),
                   ((1, 4, 5, 5), (4, 2, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
                   ((1, 4, 5, 5), (4, 2, 3, 3), (2, 2), (1, 1, 1, 1), None)]


@pytest.mark.parametrize("xs,ws,strides,pads,outpad", CONV_TRANSPOSES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_transpose_paths(xs, ws, strides, pads, outpad, dtype):
    import onnxjit
    x, w, b = _rand(xs, dtype, 1), _rand(ws, dtype, 2), _rand((ws[1],), dtype, 3)
    attrs = dict(strides=list(strides), pads=list(pads))
    if outpad:
        attrs["output_padding"] = list(outpad)
    tp = oh.np_dtype_to_tensor_dtype(x.dtype)
    node = oh.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, tp, v.shape) for n, v in
                                        (("x", x), ("w", w), ("b", b))],
                          [oh.make_tensor_value_info("y", tp, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    feeds = {"x": x, "w": w, "b": b}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = onnxjit.prepare(model).run(feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=ATOL[dtype])


@pytest.mark.parametrize("xs,ws", [((1, 64, 40, 40), (64, 16, 2, 2)),     # threads (>= 2**17 out)
                                   ((2, 5, 7, 9), (5, 3, 2, 3)),           # KH != KW, 2 images
                                   ((1, 70, 3, 4), (70, 33, 2, 2)),        # M*KH*KW past a panel
                                   ((1, 16, 90, 80), (16, 1, 2, 2))])      # one output channel
def test_conv_transpose_tiles_on_the_packed_gemm(xs, ws):
    """A float32 ConvTranspose with constant weights whose kernel equals its stride runs as the
    1x1 conv by W^T on onnxjit's GEMM (sgemm's packed kernels on AVX-512, conv_avx2 on AVX2)
    and conv.tiles_to_image (elsewhere the BLAS tile path): against the reference, and the
    same on 1 and 2 threads."""
    from tests.helpers import numba_threads
    from onnx import numpy_helper

    import onnxjit
    from onnxjit.target import host
    x, w, b = _rand(xs, np.float32, 1), _rand(ws, np.float32, 2), _rand((ws[1],), np.float32, 3)
    node = oh.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=list(ws[2:]))
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", 1, xs)],
                          [oh.make_tensor_value_info("y", 1, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    rep = onnxjit.prepare(model)
    assert ("tiles_to_image" in rep.source()) == bool(host().f32_gemm)
    assert ("conv_avx2" in rep.source()) == (host().f32_gemm == "avx2")
    (got,) = rep.run([x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with numba_threads(2):
        np.testing.assert_array_equal(rep.run([x])[0], got)
