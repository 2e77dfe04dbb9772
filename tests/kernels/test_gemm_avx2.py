"""The AVX2 GEMM (kernels/gemm_avx2.py on the 6 x 16 micro-kernels of
kernels/microkernels_avx2.py): packed-weight MatMul / Gemm and the convs (``conv_avx2``: 1x1
in place, im2col for the others).

The kernels run on any x86 target (CI runs this file once more on the AVX2 path,
NUMBA_CPU_NAME=haswell, where the lowering picks them); results are checked against numpy in
float64 and, through a model, against onnx's ReferenceEvaluator.
"""
import re

import numba
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit
from onnxjit import scalar_expr
from onnxjit.kernels import gemm_avx2, microkernels_avx2
from onnxjit.target import Target, host



def _source(step):
    """The source a step renders to (its inputs named a0, a1, ...)."""
    names = [f"a{i}" for i in range(len(step.inputs))]
    if step.op is None:     # an elementwise step: a scalar expression tree
        return scalar_expr.render(step.expr, names)
    return step.op.render(names)

def _gemm_ref(a, b, bias, act):
    y = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        y += bias
    return np.maximum(y, 0) if act == 1 else y


def _close(y, ref, k):
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=2e-6 * scale * max(1, k) ** 0.5)


# rows 1..7 and 12/13 (every row tail: 6 + 4 / 2 / 1), n around the 16-column panels, K 0, 1,
# odd, and over the K block (KC = 256: two blocks from 6 rows; fewer rows take K whole)
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 12, 13])
@pytest.mark.parametrize("k,n", [(0, 16), (1, 17), (5, 1), (33, 15), (300, 33), (1100, 40)])
def test_sgemm16_tails_match_numpy(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    bp = gemm_avx2.pack_b16(b)
    assert bp.shape == (-(-n // 16), k, 16)
    for act in (0, 1):
        y = gemm_avx2.sgemm16(a, bp, n, bias, act)
        assert y.shape == (m, n) and y.dtype == np.float32
        _close(y, _gemm_ref(a, b, bias, act), k)
    _close(gemm_avx2.sgemm16(a, bp, n, None, 0), _gemm_ref(a, b, None, 0), k)


def test_sgemm16_checks_the_packed_operand():
    a = np.ones((3, 8), np.float32)
    with pytest.raises(ValueError):
        gemm_avx2.sgemm16(a, gemm_avx2.pack_b16(np.ones((7, 20), np.float32)), 20, None, 0)
    with pytest.raises(ValueError):   # n does not match the panels
        gemm_avx2.sgemm16(a, gemm_avx2.pack_b16(np.ones((8, 20), np.float32)), 40, None, 0)


def test_bias_and_residual_are_checked():
    """The bias and residual go into place by loops (epilogue.load_bias / load_res, not slice
    stores): a bias of the wrong length or a residual of the wrong shape raises ValueError,
    and a one-value bias broadcasts, as the slice store did (the operands' types are the
    lowering's, so no signature compiles for this test alone)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 8)).astype(np.float32)
    b = rng.standard_normal((8, 20)).astype(np.float32)
    bp = gemm_avx2.pack_b16(b)
    with pytest.raises(ValueError, match="bias length"):
        gemm_avx2.sgemm16(a, bp, 20, np.ones(19, np.float32), 0)
    got = gemm_avx2.sgemm16(a, bp, 20, np.full(1, 0.5, np.float32), 0)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b + 0.5, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal((1, 8, 4, 4)).astype(np.float32)
    w = rng.standard_normal((6, 8)).astype(np.float32)
    empty = np.empty((0, 0, 0, 0), np.float32)    # no residual, as the lowering passes it
    with pytest.raises(ValueError, match="bias length"):
        _conv1x1(x, w, 6, np.ones(4, np.float32), 0, empty, (0.0, 0.0))
    with pytest.raises(ValueError, match="residual shape"):
        _conv1x1(x, w, 6, np.ones(6, np.float32), 0,
                               np.ones((1, 6, 4, 3), np.float32), (0.0, 0.0))
    res = rng.standard_normal((1, 6, 4, 4)).astype(np.float32)
    got = _conv1x1(x, w, 6, np.full(1, 0.25, np.float32), 0, res, (0.0, 0.0))
    _close(got, _conv_ref(x, w, np.full(6, 0.25), 0, res, (0, 0)), 8)


def _conv1x1(x, w, m, bias, act, res, bounds):
    """conv_avx2 as the lowering calls it for a 1x1 stride-1 unpadded Conv."""
    return gemm_avx2.conv_avx2(x, w, m, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, bias, act, res,
                               bounds)


def _conv_ref(x, w, bias, act, res, bounds):
    y = np.einsum("mc,nchw->nmhw", w.astype(np.float64), x.astype(np.float64))
    if bias is not None:
        y += bias[:, None, None]
    return _epilogue_ref(y, act, res, bounds)


def _epilogue_ref(y, act, res, bounds):
    """act(y + res) in float64, the kernels' epilogue codes (kernels/epilogue.py)."""
    if res is not None and res.size:
        y = y + res
    lo, hi = bounds
    if act == 1:
        y = np.maximum(y, 0)
    elif act == 2:
        y = np.minimum(np.maximum(y, lo), hi)
    elif act == 3:
        y = y * np.clip(lo * y + hi, 0, 1)
    return y


# m: every row tail, and over CONV_STREAM_M (X packed); h*w: ragged 16-column tiles, one pixel,
# over CONV_NB (two column blocks; with 700 channels, over CONV_PACK_FLOATS); c: 0, 1 and over
# CONV_KC (two K blocks); ragged tiles of at most CONV_TAIL_DOTS columns (dot products: 7x7
# and 14x14 images, X packed or streamed, one or two K blocks)
@pytest.mark.parametrize("n,c,m,h,w", [
    (1, 8, 1, 3, 5), (2, 3, 5, 4, 4), (1, 1, 7, 1, 1), (1, 16, 13, 17, 17), (2, 24, 33, 5, 5),
    (1, 300, 40, 6, 7), (1, 20, 50, 16, 19), (1, 0, 6, 4, 4), (1, 40, 32, 9, 9),
    (1, 1100, 40, 3, 5), (1, 1100, 8, 3, 3), (1, 700, 34, 15, 15), (2, 1100, 45, 7, 7),
    (1, 50, 45, 14, 14), (1, 37, 13, 14, 14), (1, 1100, 8, 2, 2), (1, 13, 37, 9, 7)])
def test_conv_avx2_1x1_tails_match_numpy(n, c, m, h, w):
    from onnxjit.kernels.gemm_avx2 import CONV_TAIL_DOTS
    assert CONV_TAIL_DOTS >= 4     # the cases above reach the dot products (h*w % 16 <= 4)
    rng = np.random.default_rng(n + c * 7 + m * 31 + h * w)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    res = rng.standard_normal((n, m, h, w)).astype(np.float32)
    empty = np.empty((0, 0, 0, 0), np.float32)
    for act, bounds, r in ((0, (0.0, 0.0), empty), (1, (0.0, 0.0), res), (2, (-0.5, 1.0), res),
                           (3, (float(np.float32(1 / 6)), 0.5), empty)):
        y = _conv1x1(x, wt, m, bias, act, r, bounds)
        assert y.shape == (n, m, h, w) and y.dtype == np.float32
        _close(y, _conv_ref(x, wt, bias, act, r, bounds), c)
    # a Conv without bias, as the lowering passes it: zeros (not None, a specialization of its
    # own that no model compiles)
    _close(_conv1x1(x, wt, m, np.zeros(m, np.float32), 0, empty, (0.0, 0.0)),
           _conv_ref(x, wt, None, 0, None, (0, 0)), c)


def _onnx_conv(x, w, bias, kernel, strides, pads, dilations, group):
    """onnx's ReferenceEvaluator on one Conv node (pads as (top, left, bottom, right))."""
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=list(kernel),
                            strides=list(strides), pads=list(pads), dilations=list(dilations),
                            group=group)
    return ReferenceEvaluator(node).run(None, {"x": x, "w": w, "b": bias})[0].astype(np.float64)


# the im2col path: the 7x7/2 stem (a phase-split band), 3x3/2 with batch and odd sizes, the
# strided 1x1 (ResNet's downsample), dilation with uneven pads and groups, a grouped 1x1
# (ShuffleNet, X read in place per group), 5x5 same, and outputs over one column tile
_IM2COL_CASES = [
    ((1, 3, 30, 30), 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    ((2, 16, 13, 11), 40, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 9, 9), 34, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((1, 8, 12, 12), 12, (3, 3), (1, 1), (0, 1, 2, 1), (2, 2), 2),
    ((1, 24, 20, 20), 48, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),
    ((1, 6, 17, 19), 70, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),
    ((1, 64, 40, 40), 20, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    # tiles of 16-column panels (im2col_span): 7x7 (49 = 3 x 16 + 1, the last column as a dot
    # product) with packed X, 14x14 (a ragged end of 4), and 13x13 with 256 channels (tiles of
    # 64 columns that start and end inside output rows; a ragged end of 9: a padded panel)
    ((1, 40, 7, 7), 70, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 24, 14, 14), 36, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 256, 13, 13), 40, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("shape,m,kernel,strides,pads,dilations,group", _IM2COL_CASES)
def test_conv_avx2_matches_onnx_reference(shape, m, kernel, strides, pads, dilations, group):
    rng = np.random.default_rng(sum(shape) + m)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((m, shape[1] // group) + kernel).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    ref = _onnx_conv(x, w, bias, kernel, strides, pads, dilations, group)
    res = rng.standard_normal(ref.shape).astype(np.float32)
    empty = np.empty((0, 0, 0, 0), np.float32)
    k = w[0].size
    for act, bounds, r in ((0, (0.0, 0.0), empty), (1, (0.0, 0.0), res), (2, (-0.5, 1.0), res),
                           (3, (float(np.float32(1 / 6)), 0.5), empty)):
        y = gemm_avx2.conv_avx2(x, w.reshape((m, -1)), m, kernel, strides, pads, dilations,
                                group, bias, act, r, bounds)
        assert y.shape == ref.shape and y.dtype == np.float32
        _close(y, _epilogue_ref(ref, act, r, bounds), k)


def test_conv_avx2_rejects_bad_geometry():
    x = np.ones((1, 6, 8, 8), np.float32)
    w = np.ones((4, 6 * 9), np.float32)
    b, empty = np.zeros(4, np.float32), np.empty((0, 0, 0, 0), np.float32)
    with pytest.raises(ValueError, match="weights do not match"):
        gemm_avx2.conv_avx2(x, w, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, b, 0, empty,
                            (0.0, 0.0))
    with pytest.raises(ValueError, match="divisible by group"):
        gemm_avx2.conv_avx2(x, w, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, b, 0, empty,
                            (0.0, 0.0))
    with pytest.raises(ValueError, match="bad kernel"):
        gemm_avx2.conv_avx2(x, w, 4, (3, 3), (0, 1), (1, 1, 1, 1), (1, 1), 1, b, 0, empty,
                            (0.0, 0.0))


# batches equal / broadcasting either way (a shared B folds the batch into M), row tails,
# ragged and single columns, K 0 and 1, and over CONV_STREAM_M rows (B packed)
@pytest.mark.parametrize("ba,bb,m,k,n", [
    (3, 3, 7, 20, 33), (1, 4, 5, 9, 16), (4, 1, 6, 31, 17), (2, 2, 40, 64, 50),
    (1, 1, 1, 1, 1), (2, 2, 3, 0, 5), (5, 5, 13, 64, 13), (1, 3, 2, 3, 0)])
def test_matmul3_avx2_matches_numpy(ba, bb, m, k, n):
    rng = np.random.default_rng(ba * 7 + bb * 5 + m + k + n)
    a = rng.standard_normal((ba, m, k)).astype(np.float32)
    b = rng.standard_normal((bb, k, n)).astype(np.float32)
    y = gemm_avx2.matmul3_avx2(a, b)
    assert y.shape == (max(ba, bb), m, n) and y.dtype == np.float32
    _close(y, np.matmul(a.astype(np.float64), b.astype(np.float64)), k)
    with pytest.raises(ValueError, match="operand shapes"):
        gemm_avx2.matmul3_avx2(a, np.ones((bb, k + 1, n), np.float32))


def test_two_threads_match_one():
    """Above PAR_MIN_MACS the GEMM splits panels or rows, the 1x1 conv its columns, the im2col
    conv its output rows, over threads:
    the same sums in the same order as on one thread."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((61, 200)).astype(np.float32)
    bp = gemm_avx2.pack_b16(rng.standard_normal((200, 70)).astype(np.float32))
    bias = rng.standard_normal(70).astype(np.float32)
    tall = rng.standard_normal((130, 300)).astype(np.float32)   # rows split: 1 panel
    bp1 = gemm_avx2.pack_b16(rng.standard_normal((300, 16)).astype(np.float32))
    x = rng.standard_normal((2, 48, 23, 23)).astype(np.float32)
    wt = rng.standard_normal((40, 48)).astype(np.float32)
    cb = rng.standard_normal(40).astype(np.float32)
    res = rng.standard_normal((2, 40, 23, 23)).astype(np.float32)
    qa = rng.standard_normal((4, 50, 64)).astype(np.float32)   # batches, then columns, split
    qb = rng.standard_normal((4, 64, 50)).astype(np.float32)
    xs = rng.standard_normal((2, 32, 30, 30)).astype(np.float32)   # im2col: rows split
    ws = rng.standard_normal((24, 32 * 9)).astype(np.float32)
    empty = np.empty((0, 0, 0, 0), np.float32)
    assert 2 * 24 * 288 * 15 * 15 >= gemm_avx2.PAR_MIN_MACS
    assert 61 * 200 * 80 >= gemm_avx2.PAR_MIN_MACS and 2 * 40 * 48 * 23 * 23 >= gemm_avx2.PAR_MIN_MACS

    def run():
        return (gemm_avx2.sgemm16(a, bp, 70, bias, 1), gemm_avx2.sgemm16(tall, bp1, 16, None, 0),
                _conv1x1(x, wt, 40, cb, 2, res, (0.0, 6.0)),
                gemm_avx2.conv_avx2(xs, ws, 24, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, cb[:24],
                                    1, empty, (0.0, 0.0)),
                gemm_avx2.matmul3_avx2(qa, qb), gemm_avx2.matmul3_avx2(qa[:1], qb))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run()
        numba.set_num_threads(2)
        two = run()
    finally:
        numba.set_num_threads(before)
    for p, q in zip(one, two):
        np.testing.assert_array_equal(p, q)
    _close(one[2], _conv_ref(x, wt, cb, 2, res, (0.0, 6.0)), 48)


def test_microkernels_keep_their_accumulators_in_registers():
    """The hottest loop of each micro-kernel (the block with the most FMAs) reloads no vector
    from the stack and uses no register wider than the target's: on AVX2, ymm only (the reason
    for 6 x 16 tiles: 12 accumulators + 2 B halves + 1 broadcast of 16 ymm)."""
    isa = host().isa
    if isa not in ("avx2", "avx512"):
        pytest.skip("x86 SIMD target")
    wide = {"avx2": "zmm", "avx512": None}[isa]
    f = np.zeros(256, np.float32)
    i = np.int64(1)
    args = (f, i, i, f, i, i, i, i, i, f, i, i, True, True, f, i, i, f, i, i, np.float32(0),
            np.float32(0), i)
    for name in ("k6x16", "k4x16", "k2x16", "k1x16"):
        kernel = getattr(microkernels_avx2, name)
        # compiled afresh: a function loaded from Numba's disk cache has no assembly to show
        fresh = numba.njit(error_model="numpy")(kernel.py_func)
        fresh(*args)
        asm = fresh.inspect_asm(fresh.signatures[0])
        hot = max(re.split(r"\n(?=\.LBB)", asm), key=lambda s: s.count("vfmadd"))
        assert hot.count("vfmadd") >= 2, name
        assert not re.search(r"\(%rsp\),\s*%[xyz]mm|%[xyz]mm\d+,\s*-?\d*\(%rsp\)", hot), (name, hot)
        if wide:
            assert wide not in asm, name


def _model(rows=5):
    """MatMul by constant weights + bias + Relu, Gemm (transB, bias) and a 1x1 Conv + Clip +
    residual Add: every lowering that takes gemm_avx2 on AVX2."""
    rng = np.random.default_rng(3)

    def init(name, a):
        return onnx.numpy_helper.from_array(np.asarray(a, np.float32), name)
    inits = [init("w1", rng.standard_normal((24, 40)) / 5), init("b1", rng.standard_normal(40)),
             init("w2", rng.standard_normal((19, 40)) / 6), init("b2", rng.standard_normal(19)),
             init("cw", rng.standard_normal((19, 19, 1, 1)) / 4), init("cb", rng.standard_normal(19)),
             onnx.numpy_helper.from_array(np.array([rows, 19, 1, 1], np.int64), "shape"),
             init("lo", 0.0), init("hi", 6.0)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m"]),
             helper.make_node("Add", ["m", "b1"], ["mb"]),
             helper.make_node("Relu", ["mb"], ["h"]),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["g"], transB=1),
             helper.make_node("Reshape", ["g", "shape"], ["g4"]),
             helper.make_node("Conv", ["g4", "cw", "cb"], ["c"]),
             helper.make_node("Add", ["c", "g4"], ["cr"]),
             helper.make_node("Clip", ["cr", "lo", "hi"], ["y"])]
    graph = helper.make_graph(nodes, "dense_1x1",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_lowering_picks_the_gemm_of_the_target():
    """MatMul / Gemm by constant weights and the 1x1 Conv: gemm_avx2 on AVX2, sgemm on AVX-512,
    BLAS on the generic target (target.f32_gemm, chosen at lowering)."""
    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    model = _model()

    def ops(t):
        program = specialize(model, [Value((5, 24), np.dtype(np.float32), name="x")], target=t)
        return " ".join(_source(s) for s in program.steps)
    avx2 = ops(Target("avx2", 256))
    assert avx2.count("gemm_avx2.sgemm16") == 2 and "conv_avx2" in avx2 and "sgemm." not in avx2
    avx512 = ops(Target("avx512", 512))
    assert "gemm_avx2" not in avx512 and avx512.count("sgemm") >= 3
    generic = ops(Target("generic", 128))
    assert "gemm_avx2" not in generic and "sgemm" not in generic


@pytest.mark.parametrize("rows", [1, 5])
def test_model_matches_the_reference(rows):
    """The dense layers and the 1x1 Conv (bias, Relu, Clip, residual folded in) on the host's
    kernels against onnx's reference."""
    model = _model(rows)
    x = np.random.default_rng(rows).standard_normal((rows, 24)).astype(np.float32)
    got = onnxjit.prepare(model).run([x])[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _runtime_matmul_model():
    """Q @ K^T of two run-time operands (an attention score product) then a MatMul by V."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("MatMul", ["s", "v"], ["y"])]
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "qkv",
                              [helper.make_tensor_value_info("q", f, [4, 20, 16]),
                               helper.make_tensor_value_info("k", f, [4, 20, 16]),
                               helper.make_tensor_value_info("v", f, [4, 20, 24])],
                              [helper.make_tensor_value_info("y", f, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_runtime_matmuls_follow_the_target():
    """MatMul of two run-time float32 operands: matmul3_avx2 on AVX2, bmm on AVX-512, BLAS
    (matmul.matmul3) on the generic target; on the host, the result matches onnx's reference."""
    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    model = _runtime_matmul_model()
    f32 = np.dtype(np.float32)
    values = [Value((4, 20, 16), f32, name="q"), Value((4, 20, 16), f32, name="k"),
              Value((4, 20, 24), f32, name="v")]

    def ops(t):
        return " ".join(_source(s) for s in specialize(model, values, target=t).steps)
    assert ops(Target("avx2", 256)).count("gemm_avx2.matmul3_avx2") == 2
    assert "matmul3_avx2" not in ops(Target("avx512", 512))
    generic = ops(Target("generic", 128))
    assert "matmul3_avx2" not in generic and "matmul.matmul3" in generic
    rng = np.random.default_rng(11)
    feeds = {n: rng.standard_normal(v.shape).astype(np.float32) for n, v in
             zip("qkv", values)}
    got = onnxjit.prepare(model).run([feeds[n] for n in "qkv"])[0]
    ref = ReferenceEvaluator(model).run(None, feeds)[0]
    _close(got, ref.astype(np.float64), 20)
