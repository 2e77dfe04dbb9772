"""Pooling kernels (all three schemes) and the depthwise Conv kernel vs an oracle.

Each case runs one ONNX node through the oracle and through the kernel called the way the op
lowering calls it (geometry from onnxjit.kernels.shapes, in the canonical 5-D form:
tests/helpers.py conv5, pool.maxpool / avgpool).  The oracle is
onnx.reference.ReferenceEvaluator, except for MaxPool: its stride-1 MaxPool reads the pads in
the wrong order (pads [0, 0, 2, 2] on 9x10 gives 7x12), so MaxPool is checked against
onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper as oh, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels import shapes
from onnxjit.kernels.depthwise import depthwise_conv
from onnxjit.kernels.pool import avgpool, maxpool
from tests.helpers import conv5

RTOL = {np.float32: 1e-4, np.float64: 1e-10}
ATOL = {np.float32: 1e-5, np.float64: 1e-12}
DTYPES = [np.float32, np.float64]


def _t(v):
    return None if v is None else tuple(int(i) for i in v)


def _rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def run_ref(op, inputs, at, opset=21):
    """Output of a one-node model: onnxruntime for MaxPool, else onnx.reference."""
    names = [f"i{k}" for k in range(len(inputs))]
    tp = oh.np_dtype_to_tensor_dtype(inputs[0].dtype)
    graph = oh.make_graph(
        [oh.make_node(op, names, ["o"], **at)], "g",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs)],
        [oh.make_tensor_value_info("o", tp, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    feeds = dict(zip(names, inputs))
    if op == "MaxPool":
        model.ir_version = 10
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]
    return ReferenceEvaluator(model).run(None, feeds)[0]


def pool_geometry(xs, at):
    k = _t(at["kernel_shape"])
    return (k,) + shapes.pool_geometry(at.get("auto_pad", "NOTSET"), xs[2:], k,
                                       _t(at.get("strides")), _t(at.get("dilations")),
                                       _t(at.get("pads")), at.get("ceil_mode", 0))


def run_pool(op, x, at):
    k, s, p, d, o = pool_geometry(x.shape, at)
    if op == "AveragePool":
        return avgpool(x, k, s, p, d, o, at.get("count_include_pad", 0))
    return maxpool(x, k, s, p, d, o)


def check_pool(op, x, at):
    ref = run_ref(op, [x], at)
    got = run_pool(op, x, at)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    dt = x.dtype.type
    np.testing.assert_allclose(got, ref, rtol=RTOL[dt], atol=ATOL[dt])


# --------------------------------------------------------------------------- pools
# Comments name the scheme pool.scheme picks: whole (one window covers each plane), same
# (stride 1, output size == input size: masked axis passes), phase (padded phase buffers).
# float32 windows 2 or 3 columns wide at column stride 2 take the rows scheme on AVX-512
# (vertical pass, deinterleaving horizontal pass); float64 the phase one.
POOL_CASES = [
    # light-model configurations (fewer channels)
    ((1, 5, 28, 28), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # same
    ((1, 7, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # same
    ((1, 3, 7, 7), {"kernel_shape": [7, 7]}),  # whole
    ((1, 4, 6, 6), {"kernel_shape": [7, 7], "pads": [0, 0, 1, 1]}),  # whole, padded
    ((1, 3, 56, 56), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 14, 14), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    ((1, 3, 13, 13), {"kernel_shape": [3, 3], "strides": [2, 2]}),  # odd width, stride 2
    ((1, 3, 27, 27), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 4, 28, 28), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 111, 111), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    # pads, strides, dilations, ceil_mode
    ((2, 3, 9, 10), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 0, 1]}),
    ((1, 2, 8, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                    "ceil_mode": 1}),
    ((1, 2, 10, 11), {"kernel_shape": [2, 3], "strides": [3, 2], "pads": [1, 1, 1, 1],
                      "ceil_mode": 1}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 3], "dilations": [2, 1], "strides": [2, 1],
                    "ceil_mode": 1}),
    ((1, 3, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2], "pads": [2, 2, 2, 2]}),  # same
    ((1, 3, 9, 8), {"kernel_shape": [5, 4], "pads": [1, 2, 3, 1]}),  # same, asymmetric pads
    ((1, 3, 9, 8), {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [2, 0, 2, 2]}),  # same
    ((1, 2, 7, 8), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),  # same, even kernel
    ((1, 2, 7, 8), {"kernel_shape": [4, 2], "auto_pad": "SAME_UPPER"}),  # same, even kernel
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 5, 5), {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [2, 2, 2, 2]}),
    ((1, 2, 6, 6), {"kernel_shape": [1, 1], "strides": [2, 2]}),
    ((1, 2, 6, 6), {"kernel_shape": [1, 3], "pads": [0, 1, 0, 1]}),  # same, one active axis
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "dilations": [3, 3], "strides": [2, 2],
                    "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    # rows scheme edges: exactly 16 and 17 outputs per row, row dilation, left pad only,
    # windows past the input (ceil_mode), a 3-D pool with a depth-1 kernel
    ((1, 2, 5, 33), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 2, 5, 34), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 6, 35), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 2, 9, 12), {"kernel_shape": [3, 3], "strides": [3, 2], "dilations": [2, 1]}),
    ((1, 2, 8, 9), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]}),
    ((1, 2, 8, 10), {"kernel_shape": [2, 3], "strides": [1, 2], "ceil_mode": 1}),
    ((1, 2, 3, 6, 9), {"kernel_shape": [1, 3, 3], "strides": [1, 2, 2],
                       "pads": [0, 1, 1, 0, 1, 1]}),
    # 1-D and 3-D
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((2, 3, 11), {"kernel_shape": [5], "pads": [2, 2]}),  # same
    ((2, 3, 11), {"kernel_shape": [11]}),  # whole
    ((2, 3, 12), {"kernel_shape": [4], "strides": [3], "dilations": [2], "ceil_mode": 1}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2],
                       "pads": [0, 1, 1, 1, 1, 0]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1]}),  # same
    ((1, 2, 5, 6, 7), {"kernel_shape": [3, 1, 3], "dilations": [2, 1, 1],
                       "pads": [2, 0, 1, 2, 0, 1]}),  # same
    ((1, 2, 4, 5, 6), {"kernel_shape": [4, 5, 6]}),  # whole
    ((1, 2, 5, 6, 7), {"kernel_shape": [3, 2, 3], "strides": [2, 2, 2], "ceil_mode": 1}),
    # many planes: several blocks and a partial last block
    ((1, 77, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((3, 37, 9, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((2, 41, 5, 5), {"kernel_shape": [5, 5]}),
]


def test_pool_cases_cover_every_scheme():
    """The lowering picks one scheme entry per pool (pool.scheme); the cases reach all four
    on an AVX-512 target and on AVX2 (the rows scheme in the target's width there,
    ``_rows_planes_n``), and no float32 case takes "rows" on the generic target."""
    from onnxjit.kernels import pool
    from onnxjit.target import Target
    for isa, bits in (("avx512", 512), ("avx2", 256)):
        picked = {pool.scheme(xs, np.float32, *pool_geometry(xs, at), target=Target(isa, bits))
                  for xs, at in POOL_CASES}
        assert picked == set(pool.SCHEMES), isa
    assert "rows" not in {pool.scheme(xs, np.float32, *pool_geometry(xs, at),
                                      target=Target("generic", 128)) for xs, at in POOL_CASES}
    assert "rows" not in {pool.scheme(xs, np.float64, *pool_geometry(xs, at),
                                      target=Target("avx512", 512)) for xs, at in POOL_CASES}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,at", POOL_CASES)
def test_maxpool(xs, at, dtype):
    check_pool("MaxPool", _rand(xs, dtype), at)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,at", POOL_CASES)
@pytest.mark.parametrize("cip", [0, 1])
def test_avgpool(xs, at, dtype, cip):
    check_pool("AveragePool", _rand(xs, dtype), dict(at, count_include_pad=cip))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("xs,at", [
    ((2, 45, 30, 30), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # same
    ((1, 99, 30, 31), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((3, 1111, 7, 7), {"kernel_shape": [7, 7]}),  # whole
])
def test_pools_share_planes_between_threads(threads, op, xs, at):
    """Past POOL_PAR_MIN each Numba thread pools a run of the planes with scratch of its own;
    odd plane counts leave the runs unequal."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        check_pool(op, _rand(xs, np.float32), at)
    finally:
        numba.set_num_threads(old)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference's mean of empty windows
@pytest.mark.parametrize("at", [
    {"kernel_shape": [2, 2], "pads": [2, 2, 0, 0]},  # phase: first row/column of windows empty
    {"kernel_shape": [3, 3], "pads": [3, 3, 0, 0], "strides": [2, 2]},
])
def test_avgpool_empty_window_is_nan(at):
    """A window with no counted tap averages to NaN (0/0), as in the reference."""
    check_pool("AveragePool", _rand((1, 2, 5, 6), np.float32), at)


@pytest.mark.parametrize("xs,at", [
    ((1, 3, 9, 10), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # same
    ((1, 3, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    ((1, 3, 9, 10), {"kernel_shape": [9, 10]}),  # whole
    # rows scheme over several 16-output blocks, some with a NaN and some without
    ((1, 2, 7, 70), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 68), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    # ... rows narrower than a vector, and a ragged end of 7 columns (SqueezeNet's 55)
    ((1, 3, 7, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 55), {"kernel_shape": [3, 3], "strides": [2, 2]}),
])
def test_maxpool_propagates_nan(xs, at):
    """Any NaN in a window gives NaN (np.maximum semantics); the reference's own MaxPool is
    not consistent about NaN, so the oracle is its MaxPool of the NaN indicator."""
    x = _rand(xs, np.float32)
    rng = np.random.default_rng(1)
    x[rng.random(xs) < 0.03] = np.nan
    got = run_pool("MaxPool", x, at)
    has_nan = run_ref("MaxPool", [np.isnan(x).astype(np.float32)], at) > 0
    np.testing.assert_array_equal(np.isnan(got), has_nan)
    clean = np.where(np.isnan(x), -np.inf, x).astype(np.float32)
    ref = run_ref("MaxPool", [clean], at)
    np.testing.assert_array_equal(got[~has_nan], ref[~has_nan])


@pytest.mark.parametrize("at", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
])
def test_maxpool_infinities(at):
    """+inf and -inf inputs, next to the -inf padding too (their sum is NaN: the rows scheme's
    NaN check then takes its exact path), match the reference."""
    x = _rand((1, 2, 6, 70), np.float32)
    rng = np.random.default_rng(2)
    x[rng.random(x.shape) < 0.05] = np.inf
    x[rng.random(x.shape) < 0.05] = -np.inf
    x[:, :, :, 0] = np.inf   # in the first window, with the left pad
    np.testing.assert_array_equal(run_pool("MaxPool", x, at), run_ref("MaxPool", [x], at))


# --------------------------------------------------------------------------- depthwise Conv
DW_CASES = [
    # light_shufflenet configurations (fewer channels): 3x3 pad 1, stride 1 and 2
    ((1, 6, 28, 28), (3, 3), {"pads": [1, 1, 1, 1]}),  # same
    ((1, 6, 7, 7), (3, 3), {"pads": [1, 1, 1, 1]}),  # same
    ((1, 5, 56, 56), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # phase buffers
    ((1, 6, 14, 14), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # parity split
    # stride 2: odd sizes, asymmetric pads, dilation, even kernel
    ((2, 5, 13, 11), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 9, 12), (3, 3), {"pads": [0, 1, 2, 0], "strides": [2, 2]}),
    ((1, 4, 11, 9), (3, 3), {"pads": [2, 2, 2, 2], "strides": [2, 2], "dilations": [2, 2]}),
    ((1, 4, 10, 10), (2, 2), {"strides": [2, 2]}),
    ((1, 3, 45, 40), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # phase buffers
    # stride 1 same: larger kernels, dilation, asymmetric same padding
    ((1, 4, 9, 8), (5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 4, 9, 8), (3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 4, 9, 8), (2, 4), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 7, 7), (7, 7), {"pads": [3, 3, 3, 3]}),
    # everything else: phase buffers
    ((1, 4, 8, 7), (3, 3), {}),
    ((1, 4, 8, 7), (5, 3), {"pads": [0, 1, 2, 1], "strides": [3, 2]}),
    ((1, 4, 9, 9), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((1, 3, 5, 5), (3, 3), {"pads": [2, 2, 2, 2], "strides": [3, 3]}),  # mostly padding
    # 1-D and 3-D
    ((2, 3, 13), (3,), {"pads": [1, 1]}),  # same
    ((2, 3, 13), (4,), {"pads": [0, 2], "strides": [2]}),  # parity split
    ((2, 3, 14), (3,), {"strides": [3], "dilations": [2]}),
    ((1, 3, 5, 6, 7), (3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),  # same
    ((1, 3, 5, 6, 7), (3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [2, 1, 2]}),
    # many planes, batch > 1 (channel = plane % C)
    ((3, 17, 6, 6), (3, 3), {"pads": [1, 1, 1, 1]}),
    ((3, 17, 6, 6), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((2, 40, 20, 20), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ks,at", DW_CASES)
@pytest.mark.parametrize("act", [0, 1])
def test_depthwise_conv(xs, ks, at, dtype, act):
    c = xs[1]
    x, w, b = _rand(xs, dtype, 1), _rand((c, 1) + ks, dtype, 2), _rand((c,), dtype, 3)
    ref = run_ref("Conv", [x, w, b], dict(at, group=c))
    if act == 1:
        ref = np.maximum(ref, 0)
    s, p, d, _ = shapes.conv_geometry(at.get("auto_pad", "NOTSET"), x.shape[2:], ks,
                                      _t(at.get("strides")), _t(at.get("dilations")),
                                      _t(at.get("pads")))
    got = conv5(depthwise_conv, x, w, b, s, p, d, act, (0.0, 0.0))
    assert got.shape == ref.shape and got.dtype == ref.dtype
    dt = x.dtype.type
    np.testing.assert_allclose(got, ref, rtol=RTOL[dt], atol=ATOL[dt])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference's inf * 0 in padding
def test_depthwise_conv_edges_do_not_leak():
    """Masked taps never read a neighbouring row/plane: an inf there must not give NaN/inf."""
    x = _rand((1, 4, 7, 7), np.float32)
    x[0, 1, :, 0] = np.inf  # first column: the left taps of the previous row's last column
    x[0, 2, 6, :] = np.inf  # last row: read by plane 3's first row if masks were wrong
    w, b = _rand((4, 1, 3, 3), np.float32, 2), _rand((4,), np.float32, 3)
    for s in (1, 2):
        ref = run_ref("Conv", [x, w, b], {"group": 4, "pads": [1, 1, 1, 1], "strides": [s, s]})
        got = conv5(depthwise_conv, x, w, b, (s, s), (1, 1, 1, 1), (1, 1), 0, (0.0, 0.0))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("with_relu", [False, True])
def test_depthwise_conv_through_the_backend(stride, with_relu):
    """A Conv with group == C == M lowers to depthwise_conv (BN and Relu still fold into it)."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    import onnxjit.backend as backend
    rng = np.random.default_rng(7)
    c = 6
    inits = [numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.random(c).astype(np.float32) + 0.5, "scale"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "shift"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.random(c).astype(np.float32) + 0.1, "var")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["cv"], group=c, pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("BatchNormalization", ["cv", "scale", "shift", "mean", "var"],
                              ["bn" if with_relu else "y"])]
    if with_relu:
        nodes.append(helper.make_node("Relu", ["bn"], ["y"]))
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, c, 11, 10])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    x = rng.standard_normal((2, c, 11, 10)).astype(np.float32)
    rep = backend.prepare(model)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)
    src = rep.source()     # stride 2: the SIMD 3x3 kernel (kernels/depthwise.use_depthwise3x3)
    assert "__k_depthwise.depthwise_conv(" in src or "__k_depthwise.depthwise3x3_f32(" in src
    # one call (views of the canonical 5-D operands aside: plan.Kernel.plumbing)
    assert [k.kind for k in rep.compiled().kernels if not k.plumbing] == ["call"]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("at", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
])
def test_maxpool_8bit_through_the_backend(dtype, at):
    """int8/uint8 MaxPool (opset 12+) runs in float32, where every 8-bit value is exact; the
    Indices output is unchanged. Oracle: onnxruntime (see the module doc)."""
    import onnxjit.backend
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max + 1, (1, 3, 9, 10)).astype(dtype)
    tp = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = oh.make_graph([oh.make_node("MaxPool", ["x"], ["y", "i"], **at)], "g",
                          [oh.make_tensor_value_info("x", tp, x.shape)],
                          [oh.make_tensor_value_info("y", tp, None),
                           oh.make_tensor_value_info("i", oh.np_dtype_to_tensor_dtype(
                               np.dtype(np.int64)), None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    model.ir_version = 10
    y, idx = onnxjit.backend.prepare(model).run([x])
    ref_y, ref_i = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(idx, ref_i)


def _spatial_model(rank):
    """Every op whose kernel takes the canonical 5-D form, at `rank` (3 to 5)."""
    k = rank - 2
    rng = np.random.default_rng(4)
    x_shape = [1, 4] + [9] * k
    consts = {"w": rng.standard_normal((6, 4) + (5,) * k).astype(np.float32),      # packed/im2col
              "wd": rng.standard_normal((4, 1) + (5,) * k).astype(np.float32),     # depthwise
              "wt": rng.standard_normal((4, 2) + (3,) * k).astype(np.float32)}     # transpose
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[2] * (2 * k)),
             oh.make_node("Relu", ["c"], ["cr"]),
             oh.make_node("Conv", ["x", "wd"], ["d"], group=4, pads=[2] * (2 * k)),
             oh.make_node("Conv", ["x", "wr"], ["g"]),                              # run-time W
             oh.make_node("Add", ["g", "r"], ["gs"]),
             oh.make_node("MaxPool", ["x"], ["m", "mi"], kernel_shape=[3] * k, strides=[2] * k),
             oh.make_node("MaxPool", ["x"], ["m2"], kernel_shape=[3] * k, pads=[1] * (2 * k)),
             oh.make_node("AveragePool", ["x"], ["a"], kernel_shape=[2] * k, strides=[2] * k),
             oh.make_node("LpPool", ["x"], ["lp"], kernel_shape=[2] * k),
             oh.make_node("GlobalAveragePool", ["x"], ["ga"]),
             oh.make_node("GlobalMaxPool", ["x"], ["gm"]),
             oh.make_node("LRN", ["x"], ["l"], size=3),
             oh.make_node("ConvTranspose", ["x", "wt"], ["t"], strides=[2] * k)]
    outs = ["cr", "d", "gs", "m", "mi", "m2", "a", "lp", "ga", "gm", "l", "t"]
    f32 = oh.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    graph = oh.make_graph(
        nodes, "spatial",
        [oh.make_tensor_value_info("x", f32, x_shape),
         oh.make_tensor_value_info("wr", f32, [3, 4] + [1] * k),
         oh.make_tensor_value_info("r", f32, [1, 3] + [9] * k)],
        [oh.make_tensor_value_info(o, 0, None) for o in outs],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_lowerings_pass_the_canonical_form(rank):
    """The pools, Convs (im2col, packed, depthwise, with a residual), ConvTranspose, LRN and the
    global pools of 1-D, 2-D and 3-D images reach their kernels as 5-D arrays with 3-entry
    geometry and 6-entry pads (kernels/shapes.py), every argument given: each kernel compiles
    one signature per dtype whatever the spatial rank.  The AVX2 target's conv_avx2 is for
    2-D images only and takes them as they are (like Winograd and the 1x1 GEMMs)."""
    import onnxjit.ops  # noqa: F401
    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    from onnxjit.steps import LibraryCall
    model = _spatial_model(rank)
    inputs = [Value(tuple(d.dim_value for d in i.type.tensor_type.shape.dim),
                    np.dtype(np.float32), name=i.name) for i in model.graph.input]
    program = specialize(model, inputs)
    calls = [s for s in program.steps if isinstance(s.op, LibraryCall)]
    kernels = {s.op.kernel for s in calls}
    assert {("pool", "maxpool_with_indices"), ("pool", "global_avgpool"), ("pool", "lrn"),
            ("pool", "global_maxpool"), ("conv", "conv_transpose"),
            ("depthwise", "depthwise_conv")} <= kernels
    two_d = {("gemm_avx2", "conv_avx2")}
    assert kernels & ({("conv_packed", "conv_packed"), ("conv", "conv")} | two_d)
    assert sum(k[0] == "pool" and k[1].startswith(("maxpool_", "avgpool_")) for k in kernels) >= 2
    sizes = {"kernel": 3, "strides": 3, "dilations": 3, "output_shape": 3, "pads": 6}
    for step in calls:
        names = step.op.names
        if step.op.kernel in two_d:
            assert rank == 4 and step.value("x").rank == 4 and step.value("w").rank == 2
            assert all(v.rank == 4 for v in step.outs), step.op.kernel
            continue
        for name in ("x", "w", "residual"):
            if name in names and not (name == "w" and step.op.kernel[0] == "conv_packed"):
                assert step.value(name).rank == 5, (step.op.kernel, name)
        for name, size in sizes.items():
            if name in names:
                param = step.op.args[names.index(name)]
                assert len(param.value) == size, (step.op.kernel, name, param.value)
        assert all(v.rank == 5 for v in step.outs), step.op.kernel
    # the 1x1 Conv with the residual ("wr": 3 output channels); the 5x5 Conv goes to
    # conv_packed on AVX-512, to conv_avx2 (2-D) or conv (residual-free) on AVX2
    conv = next(s for s in calls if s.op.kernel in ({("conv", "conv")} | two_d)
                and s.value("w").shape[0] == 3)
    if conv.op.kernel in two_d:
        assert conv.value("residual").shape == (1, 3, 9, 9)
    else:
        assert conv.value("residual").shape == (1, 3) + (1,) * (5 - rank) + (9,) * (rank - 2)
