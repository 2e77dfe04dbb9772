"""Attention-path kernels: run-time batched MatMul (kernels/bmm.py) with Transposes read by strides,
the scale folded into Softmax, the AVX-512 float32 Softmax and LayerNorm (kernels/normalization.py).

Oracles: ONNX Runtime (graphs) and onnx's ReferenceEvaluator; numpy only rebuilds packed layouts.
"""
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from onnxjit.kernels import bmm, normalization
from onnxjit.kernels.sgemm import has_avx512
from onnxjit.target import host

needs_avx512 = pytest.mark.skipif(not has_avx512(), reason="AVX-512 kernels not used on this CPU")
needs_split16 = pytest.mark.skipif(not host().split16, reason="16-lane kernels not used on this CPU")


def _model(nodes, inputs, inits=(), opset=21):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _check(model, feeds, rtol=1e-4, atol=1e-5):
    rep = backend.prepare(model)
    got = rep.run(list(feeds.values()))[0]
    want = _ort(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return rep


# -- kernels -------------------------------------------------------------------------------------
def _reference_panels(b):
    k, n = b.shape
    npan = (n + 31) // 32
    bp = np.zeros((npan, k, 32), np.float32)
    for j in range(npan):
        w = min(32, n - 32 * j)
        bp[j, :, :w] = b[:, 32 * j:32 * j + w]
    return bp.reshape(-1)


@pytest.mark.parametrize("layout", ["rows", "columns", "strided"])
def test_pack_b_any_strides(layout):
    """Run-time B packing: contiguous rows (vector copies), contiguous columns (16x16 register
    transposes plus scalar edges) and neither (element loop), against the pack_b layout."""
    rng = np.random.default_rng(0)
    for k, n in itertools.product([1, 15, 16, 17, 64], [1, 16, 17, 32, 33, 100]):
        if layout == "rows":
            brs, bcs = n + 3, 1
        elif layout == "columns":
            brs, bcs = 1, k + 3
        else:
            brs, bcs = 2, 2 * (k + 1)
        boff = 5
        src = rng.standard_normal(boff + (k + 1) * brs + (n + 1) * bcs).astype(np.float32)
        b = np.array([[src[boff + i * brs + j * bcs] for j in range(n)] for i in range(k)],
                     np.float32).reshape(k, n)
        bp = np.zeros(((n + 31) // 32) * k * 32, np.float32)
        bmm._pack_b(src, boff, brs, bcs, k, n, bp)
        np.testing.assert_array_equal(bp, _reference_panels(b), err_msg=f"k={k} n={n}")


@needs_split16
@pytest.mark.parametrize("n", [1, 5, 16, 17, 128, 1000])
def test_softmax_f32_rows_and_scale(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((7, n)) * 10).astype(np.float32)
    for scale in (1.0, 0.125, -0.3):
        xs = x * np.float32(scale)
        m = xs.max(axis=1, keepdims=True)
        e = np.exp((xs - m).astype(np.float64))
        want = e / e.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(normalization.softmax_f32(x, scale), want, rtol=2e-6, atol=1e-9)


@needs_split16
def test_softmax_f32_special_values_match_reference():
    x = np.array([[0, 1, np.nan, 2], [-np.inf] * 4, [np.inf, 1, 2, 3], [1, -np.inf, 2, 3],
                  [-100, 0, 0, -200], [np.inf, np.inf, 0, 0], [3e38, -3e38, 0, 1]], np.float32)
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", x.shape)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = backend.prepare(model).run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("cols", [1, 7, 16, 33, 256])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm_float32(cols, with_bias):
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((9, cols)) * 3 + 1).astype(np.float32)
    x[2, 0] = np.nan
    x[3, -1] = np.inf
    inits = [("g", rng.standard_normal(cols).astype(np.float32))]
    if with_bias:
        inits.append(("b", rng.standard_normal(cols).astype(np.float32)))
    node = helper.make_node("LayerNormalization", ["x"] + [n for n, _ in inits], ["y"], axis=-1,
                            epsilon=1e-5)
    model = _model([node], [("x", x.shape)], inits)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = backend.prepare(model).run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


# -- MatMul of run-time operands -------------------------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape", [
    ((64, 32), (32, 48)), ((3, 40, 17), (3, 17, 33)), ((2, 1, 24, 8), (1, 3, 8, 64)),
    ((24, 8), (5, 8, 40)), ((5, 24, 8), (8, 40)), ((24, 70), (70,)), ((2, 16, 600), (600, 32)),
    ((9, 16, 3), (9, 3, 20)), ((100, 256), (256, 64)), ((3, 50, 256), (3, 256, 40))])
def test_runtime_matmul_shapes(a_shape, b_shape):
    """The last two are big enough for threads (where there are several): split by rows of one
    batch, and by batches."""
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [("a", a_shape), ("b", b_shape)])
    rep = _check(model, {"a": a, "b": b})
    m, n = (a_shape[-2] if len(a_shape) > 1 else 1), (b_shape[-1] if len(b_shape) > 1 else 1)
    uses = has_avx512() and m >= 8 and n >= 16
    assert ("__k_bmm.bmm(" in rep.source()) == uses


def _attention_like(perm_q, perm_k, perm_out, scale=None, softmax=True, bias=False):
    """y = Transpose(perm_out)(Softmax(Transpose(q, perm_q) @ Transpose(k, perm_k) * scale)
    @ Transpose(q, perm_q)) on q, k of shape (1, 24, 2, 16)."""
    nodes = [helper.make_node("Transpose", ["q"], ["qt"], perm=perm_q),
             helper.make_node("Transpose", ["k"], ["kt"], perm=perm_k),
             helper.make_node("MatMul", ["qt", "kt"], ["s"])]
    inits, last = [], "s"
    if scale is not None:
        inits.append(("scale", np.array(scale, np.float32)))
        nodes.append(helper.make_node("Mul", [last, "scale"], ["ss"]))
        last = "ss"
    if bias:
        inits.append(("bias", np.linspace(-1, 1, 24).astype(np.float32)))
        nodes.append(helper.make_node("Add", [last, "bias"], ["sb"]))
        last = "sb"
    if softmax:
        nodes.append(helper.make_node("Softmax", [last], ["p"], axis=-1))
        last = "p"
    nodes.append(helper.make_node("Transpose", ["v"], ["vt"], perm=perm_q))
    nodes.append(helper.make_node("MatMul", [last, "vt"], ["c"]))
    nodes.append(helper.make_node("Transpose", ["c"], ["y"], perm=perm_out))
    return _model(nodes, [("q", (1, 24, 2, 16)), ("k", (1, 24, 2, 16)), ("v", (1, 24, 2, 16))],
                  inits)


@pytest.mark.parametrize("perm_out", [(0, 2, 1, 3), (0, 1, 3, 2), (3, 1, 0, 2), (0, 1, 2, 3)])
@pytest.mark.parametrize("scale,softmax,bias", [(0.25, True, False), (0.3, True, False),
                                                (0.25, False, False), (None, True, True),
                                                (0.5, True, True)])
def test_attention_transposes_scale_and_softmax(perm_out, scale, softmax, bias):
    rng = np.random.default_rng(7)
    feeds = {n: rng.standard_normal((1, 24, 2, 16)).astype(np.float32) for n in "qkv"}
    model = _attention_like((0, 2, 1, 3), (0, 2, 3, 1), perm_out, scale, softmax, bias)
    rep = _check(model, feeds)
    src = rep.source()
    assert ("softmax_f32(" in src) == (softmax and host().split16)
    if has_avx512():
        # the input Transposes are read by strides; only a non-folded one remains
        assert src.count("__np.transpose(") == 0
        assert src.count("__k_bmm.bmm(") == 2
        folded = softmax and scale is not None and not bias
        if folded:
            assert f"), {float(np.float32(scale))}).reshape" in src


def test_transpose_with_other_reader_is_kept():
    """A Transpose read by the MatMul and by the graph output stays a copy (the MatMul may still
    use bmm on its result)."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["at", "b"], ["m"]),
             helper.make_node("Add", ["m", "m"], ["y0"]),
             helper.make_node("ReduceSum", ["at"], ["r"], keepdims=0),
             helper.make_node("Add", ["y0", "r"], ["y"])]
    model = _model(nodes, [("a", (2, 16, 32)), ("b", (2, 16, 40))])
    feeds = {"a": rng.standard_normal((2, 16, 32)).astype(np.float32),
             "b": rng.standard_normal((2, 16, 40)).astype(np.float32)}
    rep = _check(model, feeds)
    assert "__k_movement.transpose(" in rep.source()


@pytest.mark.parametrize("perm", [(0, 2, 1), (0, 1, 2), (1, 2, 0)])
def test_bias_and_relu_after_transposed_product(perm):
    """MatMul -> Transpose -> Add(bias) -> Relu: the bias follows the transposed last axis."""
    rng = np.random.default_rng(11)
    a_shape, b_shape = (3, 16, 24), (3, 24, 32)
    out = tuple((3, 16, 32)[p] for p in perm)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=list(perm)),
             helper.make_node("Add", ["t", "bias"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [("a", a_shape), ("b", b_shape)],
                   [("bias", rng.standard_normal(out[-1]).astype(np.float32))])
    _check(model, {"a": rng.standard_normal(a_shape).astype(np.float32),
                   "b": rng.standard_normal(b_shape).astype(np.float32)})
