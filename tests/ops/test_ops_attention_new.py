"""LinearAttention, CausalConvWithState (opset 27: float, float16, bfloat16) and FlexAttention
(ai.onnx.preview) against onnx's ReferenceEvaluator, table-driven."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.helper import np_dtype_to_tensor_dtype
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from helpers import check_reference, one_node
from onnxjit.errors import LoweringError, OnnxJitError

F16, F32, F64 = np.float16, np.float32, np.float64


def _model(op, inputs, outputs, domain="", opsets=(("", 27),), **attrs):
    """A one-node model (tests/helpers.one_node); an input whose array is None is left out."""
    return one_node(op, inputs, outputs=outputs, domain=domain, opsets=opsets, **attrs)


def _check(model, inputs, tol):
    """onnxjit against onnx's reference (tests/helpers.check_reference), within `tol`."""
    check_reference(model, inputs, rtol=tol, atol=tol)


def _rand(shape, dtype=F32, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# ---- LinearAttention ---------------------------------------------------------------------
# (update_rule, B, T, hq, hkv, dk, dv, past, decay last dim ("h" per head / "d" per key dim),
#  beta last dim ("h" / "1"), scale, dtype)
LINEAR = [
    ("linear", 2, 5, 2, 2, 4, 3, False, None, None, 0.0, F32),
    ("linear", 1, 1, 2, 2, 4, 4, True, None, None, 0.0, F32),
    ("gated", 2, 4, 4, 2, 3, 5, True, "h", None, 0.0, F32),
    ("gated", 1, 3, 2, 2, 4, 4, False, "d", None, 0.5, F32),
    ("delta", 2, 4, 2, 1, 4, 3, False, None, "h", 0.0, F32),
    ("gated_delta", 2, 6, 4, 2, 4, 4, True, "d", "h", 0.0, F32),
    ("gated_delta", 1, 3, 3, 1, 2, 5, False, "h", "1", 0.25, F32),
    ("gated_delta", 1, 4, 2, 2, 4, 4, True, "h", "h", 0.0, F16),
]


@pytest.mark.parametrize("rule,nb,nt,hq,hkv,dk,dv,past,decay,beta,scale,dtype", LINEAR)
def test_linear_attention(rule, nb, nt, hq, hkv, dk, dv, past, decay, beta, scale, dtype):
    inputs = {"q": _rand((nb, nt, hq * dk), dtype, 1, 0.5),
              "k": _rand((nb, nt, hkv * dk), dtype, 2, 0.5),
              "v": _rand((nb, nt, hkv * dv), dtype, 3),
              "past": _rand((nb, hkv, dk, dv), dtype, 4) if past else None,
              "decay": (-np.abs(_rand((nb, nt, hkv if decay == "h" else hkv * dk), dtype, 5))
                        if decay else None),
              "beta": (np.abs(_rand((nb, nt, hkv if beta == "h" else 1), dtype, 6, 0.5))
                       if beta else None)}
    attrs = dict(q_num_heads=hq, kv_num_heads=hkv, update_rule=rule)
    if scale:
        attrs["scale"] = scale
    model = _model("LinearAttention", inputs, ["y", "state"], **attrs)
    _check(model, inputs, 1e-2 if dtype == F16 else 1e-4)


def test_linear_attention_wrong_decay_is_refused():
    inputs = {"q": _rand((1, 2, 8)), "k": _rand((1, 2, 8)), "v": _rand((1, 2, 8)),
              "past": None, "decay": None, "beta": None}
    model = _model("LinearAttention", inputs, ["y", "state"], q_num_heads=2, kv_num_heads=2,
                   update_rule="gated")
    with pytest.raises(OnnxJitError, match="LinearAttention.*decay"):
        onnxjit.backend.prepare(model).run({k: v for k, v in inputs.items() if v is not None})


# ---- CausalConvWithState -----------------------------------------------------------------
# (B, C, L, k, bias, past, activation, dtype)
CAUSAL = [
    (2, 3, 7, 4, False, False, "none", F32),
    (1, 4, 1, 3, True, True, "silu", F32),
    (2, 2, 5, 1, True, False, "none", F32),
    (1, 3, 2, 4, False, True, "swish", F32),
    (2, 3, 6, 3, True, True, "silu", F16),
]


@pytest.mark.parametrize("nb,nc,nl,kk,bias,past,act,dtype", CAUSAL)
def test_causal_conv_with_state(nb, nc, nl, kk, bias, past, act, dtype):
    inputs = {"x": _rand((nb, nc, nl), dtype, 1), "w": _rand((nc, 1, kk), dtype, 2),
              "b": _rand((nc,), dtype, 3) if bias else None,
              "past": _rand((nb, nc, kk - 1), dtype, 4) if past else None}
    model = _model("CausalConvWithState", inputs, ["y", "state"], activation=act)
    _check(model, inputs, 1e-2 if dtype == F16 else 1e-5)


def test_causal_conv_with_state_bad_weight_is_refused():
    inputs = {"x": _rand((1, 3, 4)), "w": _rand((2, 1, 3))}
    model = _model("CausalConvWithState", inputs, ["y", "state"])
    with pytest.raises(OnnxJitError, match="CausalConvWithState node"):
        onnxjit.backend.prepare(model).run(inputs)


# ---- FlexAttention -----------------------------------------------------------------------
def _mod_graph(kind, dtype):
    """A score_mod / prob_mod subgraph over a rank-4 tensor of `dtype`."""
    t = np_dtype_to_tensor_dtype(np.dtype(dtype))
    inp = helper.make_tensor_value_info("s", t, None)
    out = helper.make_tensor_value_info("s_out", t, None)
    c = lambda name, v: numpy_helper.from_array(np.array(v, dtype), name)  # noqa: E731
    if kind == "softcap":
        nodes = [helper.make_node("Div", ["s", "cap"], ["a"]),
                 helper.make_node("Tanh", ["a"], ["b"]),
                 helper.make_node("Mul", ["b", "cap"], ["s_out"])]
        inits = [c("cap", 2.0)]
    elif kind == "causal":
        nodes = [helper.make_node("Shape", ["s"], ["shp"]),
                 helper.make_node("Gather", ["shp", "i2"], ["L"], axis=0),
                 helper.make_node("Gather", ["shp", "i3"], ["S"], axis=0),
                 helper.make_node("Range", ["zero", "L", "one"], ["qr"]),
                 helper.make_node("Reshape", ["qr", "qshape"], ["qi"]),
                 helper.make_node("Range", ["zero", "S", "one"], ["kr"]),
                 helper.make_node("GreaterOrEqual", ["qi", "kr"], ["m"]),
                 helper.make_node("Where", ["m", "s", "ninf"], ["s_out"])]
        i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
        inits = [i64("i2", 2), i64("i3", 3), i64("zero", 0), i64("one", 1),
                 i64("qshape", [-1, 1]), c("ninf", -np.inf)]
    else:   # "scale": prob_mod multiplying the probabilities
        nodes = [helper.make_node("Mul", ["s", "f"], ["s_out"])]
        inits = [c("f", 0.5)]
    return helper.make_graph(nodes, kind, [inp], [out], inits)


# (B, hq, hkv, L, S, E, Ev, dtype, scale, score_mod, prob_mod, softmax_precision)
FLEX = [
    (2, 2, 2, 3, 4, 8, 8, F32, None, None, None, None),
    (1, 4, 2, 5, 5, 4, 6, F32, 0.3, "causal", None, None),
    (1, 2, 1, 3, 6, 4, 4, F64, None, "softcap", "scale", None),
    (1, 2, 2, 4, 4, 8, 8, F16, None, None, None, None),
    (1, 2, 2, 3, 4, 4, 4, F32, None, "softcap", None, TensorProto.DOUBLE),
]


@pytest.mark.parametrize("nb,hq,hkv,nl,ns,e,ev,dtype,scale,smod,pmod,prec", FLEX)
def test_flex_attention(nb, hq, hkv, nl, ns, e, ev, dtype, scale, smod, pmod, prec):
    inputs = {"q": _rand((nb, hq, nl, e), dtype, 1), "k": _rand((nb, hkv, ns, e), dtype, 2),
              "v": _rand((nb, hkv, ns, ev), dtype, 3)}
    sdt = {None: F64 if dtype == F64 else F32, TensorProto.DOUBLE: F64}[prec]
    attrs = {}
    if scale is not None:
        attrs["scale"] = scale
    if smod:
        attrs["score_mod"] = _mod_graph(smod, sdt)
    if pmod:
        attrs["prob_mod"] = _mod_graph(pmod, sdt)
    if prec is not None:
        attrs["softmax_precision"] = prec
    model = _model("FlexAttention", inputs, ["y"], domain="ai.onnx.preview",
                   opsets=(("", 23), ("ai.onnx.preview", 1)), **attrs)
    _check(model, inputs, 1e-2 if dtype == F16 else 1e-5)


def test_flex_attention_mod_changing_shape_is_refused():
    inputs = {"q": _rand((1, 1, 2, 4)), "k": _rand((1, 1, 3, 4)), "v": _rand((1, 1, 3, 4))}
    t = TensorProto.FLOAT
    bad = helper.make_graph([helper.make_node("ReduceSum", ["s"], ["s_out"], keepdims=0)], "bad",
                            [helper.make_tensor_value_info("s", t, None)],
                            [helper.make_tensor_value_info("s_out", t, None)])
    model = _model("FlexAttention", inputs, ["y"], domain="ai.onnx.preview",
                   opsets=(("", 23), ("ai.onnx.preview", 1)), score_mod=bad)
    with pytest.raises(LoweringError, match="score_mod"):
        onnxjit.backend.prepare(model).run(inputs)


# ---- float16 Softmax (the expanded float16 Attention's): rounded as the reference rounds -----
@pytest.mark.parametrize("shape,axis,opset", [((4, 6), -1, 13), ((4, 13), 1, 13),
                                              ((4, 100), -1, 13), ((4, 300), 1, 11),
                                              ((4, 5, 3), 1, 13)])
def test_softmax_float16_equals_the_reference(shape, axis, opset):
    x = (np.random.default_rng(shape[1]).standard_normal(shape) * 3).astype(F16)
    inputs = {"x": x}
    model = _model("Softmax", inputs, ["y"], opsets=(("", opset),), axis=axis)
    feeds = {"x": x}
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    got = onnxjit.backend.prepare(model).run(feeds)[0]
    assert got.dtype == F16 and got.shape == expected.shape
    if x.ndim == 2:   # rows over the last axis: bit for bit (3-D axis 1: rounded once)
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got.astype(F32), expected.astype(F32), rtol=2e-3, atol=1e-3)
