"""Elementwise ops against onnx's ReferenceEvaluator, table-driven.

To keep compiles few, one test builds one model holding one node per dtype (or per case), so a
row checks an op over every dtype it allows, with NaN / Inf / wrap-around inputs and broadcasting.
"""
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from helpers import assert_outputs_match
from onnxjit.errors import OnnxJitError

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
FLOATS = (F32, F64)
SINTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UINTS = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTS = SINTS + UINTS
NUMERIC = FLOATS + INTS
BOOL = np.dtype(np.bool_)

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0,
            1e-3, 0.3, -0.7, 0.9, 3.7, -3.7, 20.0, -20.0, 100.0, -100.0, 7.25, -1e-4]


def floats(dtype, shape=(2, 3, 4), seed=0):
    """Specials (NaN, +-Inf, +-0, halves, large) then random values."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    vals = np.array(SPECIALS + list(rng.uniform(-4, 4, max(0, n - len(SPECIALS)))))[:n]
    return rng.permutation(vals).astype(dtype).reshape(shape)


def ints(dtype, shape=(2, 3, 4), seed=0):
    """The type's extremes, 0, +-1, then random values of its range (small ones for pow etc.)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    n = int(np.prod(shape))
    edge = [info.min, info.max, 0, 1, max(info.min, -1), 7, max(info.min, -7)]
    vals = edge + list(rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True))
    return rng.permutation(np.array(vals[:n], dtype=np.int64 if info.min < 0 else np.uint64)
                           ).astype(dtype).reshape(shape)


def data(dtype, shape=(2, 3, 4), seed=0):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return np.random.default_rng(seed).integers(0, 2, shape).astype(bool)
    return floats(dtype, shape, seed) if dtype.kind == "f" else ints(dtype, shape, seed)


def model_of(nodes, feeds, outputs, opset=21, inits=None):
    """A model over `feeds` (graph inputs) and `inits` (initializers)."""
    inits = inits or {}
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [onnx.numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(nodes, feeds, outputs, opset=21, inits=None, rtol=None):
    """Run through onnxjit and the reference; compare every output (exact for ints/bools)."""
    model = model_of(nodes, feeds, outputs, opset, inits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ReferenceEvaluator(model).run(None, feeds)
    got = onnxjit.backend.prepare(model).run(feeds)
    # floats within the harness's per-dtype tolerances (tests/helpers.TOLERANCES) or `rtol`
    assert_outputs_match(got, want, rtol=rtol, atol=None if rtol is None else rtol / 10,
                         names=outputs)


def per_dtype(op, dtypes, n_inputs=1, shapes=((2, 3, 4), (3, 1)), make=data, **attrs):
    """One node per dtype: inputs x{i}_{dtype} -> y_{dtype}; returns (nodes, feeds, outputs)."""
    nodes, feeds, outputs = [], {}, []
    for dt in map(np.dtype, dtypes):
        names = [f"x{i}_{dt.name}" for i in range(n_inputs)]
        for i, n in enumerate(names):
            feeds[n] = make(dt, shapes[i % len(shapes)], seed=i)
        nodes.append(helper.make_node(op, names, [f"y_{dt.name}"], **attrs))
        outputs.append(f"y_{dt.name}")
    return nodes, feeds, outputs


# ---- unary ops ---------------------------------------------------------------------------------
UNARY = [  # (op, dtypes, attributes, opset, rtol or None)
    ("Neg", FLOATS + SINTS, {}, 21, None), ("Abs", NUMERIC, {}, 21, None),
    ("Sign", NUMERIC, {}, 21, None), ("Relu", FLOATS + SINTS, {}, 21, None),
    ("Sqrt", FLOATS, {}, 21, None), ("Exp", FLOATS, {}, 21, None), ("Log", FLOATS, {}, 21, None),
    ("Reciprocal", FLOATS, {}, 21, None), ("Floor", FLOATS, {}, 21, None),
    ("Ceil", FLOATS, {}, 21, None), ("Round", FLOATS, {}, 21, None),
    ("Erf", FLOATS, {}, 21, 1e-6),  # the reference computes Erf in float32
    ("Tanh", FLOATS, {}, 21, None), ("Sigmoid", FLOATS, {}, 21, None),
    ("Sin", FLOATS, {}, 21, None), ("Cos", FLOATS, {}, 21, None), ("Tan", FLOATS, {}, 21, None),
    ("Asin", FLOATS, {}, 21, None), ("Acos", FLOATS, {}, 21, None),
    ("Atan", FLOATS, {}, 21, None), ("Sinh", FLOATS, {}, 21, None),
    ("Cosh", FLOATS, {}, 21, None), ("Asinh", FLOATS, {}, 21, None),
    ("Acosh", FLOATS, {}, 21, None), ("Atanh", FLOATS, {}, 21, None),
    ("Softplus", FLOATS, {}, 21, None), ("Softsign", FLOATS, {}, 21, None),
    ("Mish", FLOATS, {}, 21, None), ("BitwiseNot", INTS, {}, 21, None),
    ("IsNaN", FLOATS, {}, 21, None), ("IsInf", FLOATS, {}, 21, None),
    ("IsInf", FLOATS, {"detect_negative": 0}, 21, None),
    ("IsInf", FLOATS, {"detect_positive": 0}, 21, None),
    ("LeakyRelu", FLOATS, {}, 21, None), ("LeakyRelu", FLOATS, {"alpha": 0.3}, 21, None),
    ("HardSigmoid", FLOATS, {}, 21, None),
    ("HardSigmoid", FLOATS, {"alpha": 0.3, "beta": 0.6}, 21, None),
    ("HardSwish", FLOATS, {}, 21, None), ("Elu", FLOATS, {}, 21, None),
    ("Elu", FLOATS, {"alpha": 0.5}, 21, None), ("Selu", FLOATS, {}, 21, None),
    ("Selu", FLOATS, {"alpha": 2.0, "gamma": 3.0}, 21, None),
    ("Celu", (F32,), {}, 21, None), ("Celu", (F32,), {"alpha": 2.0}, 21, None),
    ("ThresholdedRelu", FLOATS, {}, 21, None),
    ("ThresholdedRelu", FLOATS, {"alpha": 2.0}, 21, None),
    ("Gelu", FLOATS, {}, 21, 1e-5), ("Gelu", FLOATS, {"approximate": "tanh"}, 21, None),
    ("Swish", FLOATS, {}, 24, None), ("Swish", FLOATS, {"alpha": 0.5}, 24, None),
    ("Shrink", FLOATS + (np.int8, np.int32, np.uint8), {}, 21, None),
    ("Shrink", FLOATS + (np.int64,), {"lambd": 1.5, "bias": 1.5}, 21, None),
    ("Shrink", (np.int8, np.uint8), {"lambd": 1.5, "bias": -1.5}, 21, None),  # wraps
    ("Relu", FLOATS, {}, 6, None), ("Abs", FLOATS, {}, 1, None),
]


@pytest.mark.parametrize("op,dtypes,attrs,opset,rtol", UNARY,
                         ids=[f"{r[0]}-{r[3]}-{'-'.join(map(str, r[2].values())) or 'default'}"
                              for r in UNARY])
def test_unary(op, dtypes, attrs, opset, rtol):
    nodes, feeds, outputs = per_dtype(op, dtypes, 1, **attrs)
    check(nodes, feeds, outputs, opset, rtol=rtol)


def test_not():
    check(*per_dtype("Not", (BOOL,)))


# ---- binary ops --------------------------------------------------------------------------------
# Arithmetic runs over every type it allows (division and wrap-around differ per type); ops
# whose code does not depend on the integer width use a sample of types, to compile less.
SAMPLE = FLOATS + tuple(np.dtype(t) for t in (np.int8, np.int64, np.uint16, np.uint64))
BINARY = [  # (op, dtypes, attributes)
    ("Add", NUMERIC, {}), ("Sub", NUMERIC, {}), ("Mul", NUMERIC, {}), ("Div", NUMERIC, {}),
    ("Mod", INTS, {}), ("Mod", INTS, {"fmod": 1}), ("Mod", FLOATS, {"fmod": 1}),
    ("Mod", FLOATS, {}),
    ("Equal", SAMPLE + (BOOL,), {}), ("Less", SAMPLE, {}), ("LessOrEqual", SAMPLE, {}),
    ("Greater", SAMPLE, {}), ("GreaterOrEqual", SAMPLE, {}),
    ("And", (BOOL,), {}), ("Or", (BOOL,), {}), ("Xor", (BOOL,), {}),
    ("BitwiseAnd", SAMPLE[2:], {}), ("BitwiseOr", SAMPLE[2:], {}), ("BitwiseXor", SAMPLE[2:], {}),
    ("Max", SAMPLE, {}), ("Min", SAMPLE, {}), ("Sum", FLOATS, {}), ("Mean", FLOATS, {}),
    ("PRelu", FLOATS + (np.int32, np.int64, np.uint32, np.uint64), {}),
]


@pytest.mark.parametrize("op,dtypes,attrs", BINARY,
                         ids=[f"{r[0]}-{'-'.join(map(str, r[2].values())) or 'default'}-"
                              f"{np.dtype(r[1][0]).name}" for r in BINARY])
def test_binary(op, dtypes, attrs):
    check(*per_dtype(op, dtypes, 2, **attrs))


def small_ints(dtype, shape, seed=0):
    """Integers in [0, 10): Pow operands that cannot go negative-exponent."""
    return np.random.default_rng(seed).integers(0, 10, shape).astype(dtype)


@pytest.mark.parametrize("base,exponent", [
    (F32, F32), (F64, F64), (F32, np.int64), (F32, np.int32), (F32, np.int8), (F64, F32),
    (np.int64, np.int64), (np.int32, np.int32), (np.int32, np.int64), (np.int64, F32),
    (np.int32, F64), (F32, np.uint8)])
def test_pow_mixed_types(base, exponent):
    """Pow computes in numpy's promoted type of base and exponent, cast to the base's type."""
    base, exponent = np.dtype(base), np.dtype(exponent)
    x = floats(base, (3, 4)) if base.kind == "f" else ints(base, (3, 4))
    if exponent.kind == "f":
        y = np.array([0.5, 2.0, -1.0, 3.0, np.nan, 0.0], exponent)[np.arange(4) % 6]
    else:
        y = small_ints(exponent, (4,))
    check([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"])


def test_bitshift_of_signed_ints_is_refused():
    """BitShift's T is uint8..uint64: a signed input breaks the type constraint (the reference
    would compute it); refused at prepare, naming the node."""
    from onnxjit.errors import ModelError
    for dt in SINTS:
        x = ints(dt, (2, 7))
        with pytest.raises(ModelError, match="BitShift"):
            check([helper.make_node("BitShift", ["x", "x"], ["y"], direction="LEFT")],
                  {"x": x}, ["y"])


@pytest.mark.parametrize("dtypes", [UINTS], ids=["unsigned"])
def test_bitshift(dtypes):
    """Shifts by 0 .. bits + 5."""
    nodes, feeds, outputs = [], {}, []
    for dt in dtypes:
        bits = dt.itemsize * 8
        feeds[f"x_{dt.name}"] = ints(dt, (2, 7))
        last = -1 if dt.kind == "i" else 2
        feeds[f"s_{dt.name}"] = np.array([0, 1, 3, bits - 1, bits, bits + 5, last], dt)
        for d in ("LEFT", "RIGHT"):
            nodes.append(helper.make_node("BitShift", [f"x_{dt.name}", f"s_{dt.name}"],
                                          [f"{d}_{dt.name}"], direction=d))
            outputs.append(f"{d}_{dt.name}")
    check(nodes, feeds, outputs)


# ---- variadic ops and Where ----------------------------------------------------------------
@pytest.mark.parametrize("op,dtypes", [("Max", FLOATS + (np.int8, np.uint64)),
                                       ("Min", FLOATS + (np.int16, np.uint8)),
                                       ("Sum", FLOATS), ("Mean", FLOATS)])
@pytest.mark.parametrize("n", [1, 3])
def test_variadic(op, dtypes, n):
    # The reference's Mean adds in place into the first input: that one must be the largest.
    check(*per_dtype(op, dtypes, n, shapes=((2, 3, 4), (3, 1), (2, 1, 4))))


@pytest.mark.parametrize("opset", [6, 8, 12, 13])
def test_max_min_opsets(opset):
    dtypes = FLOATS if opset < 12 else FLOATS + (np.int32, np.uint16)
    shapes = ((3, 4),) if opset < 8 else ((2, 3, 4), (3, 1))
    nodes, feeds, outputs = per_dtype("Max", dtypes, 2, shapes=shapes)
    more = per_dtype("Min", dtypes, 2, shapes=shapes)
    for n in more[0]:
        n.output[0] = "min_" + n.output[0]
    check(nodes + more[0], feeds, outputs + ["min_" + o for o in more[2]], opset)


@pytest.mark.parametrize("dtype", [F32, F64, np.int64, np.uint8, BOOL])
def test_where_broadcasts_all_three(dtype):
    feeds = {"c": data(BOOL, (3, 1, 1)), "x": data(dtype, (1, 4, 1)), "y": data(dtype, (5,), 1)}
    check([helper.make_node("Where", ["c", "x", "y"], ["z"])], feeds, ["z"])


# ---- Clip ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, np.int8, np.uint16, np.int64])
def test_clip_inputs(dtype):
    """Clip-13: bounds as inputs, as initializers, lo only, hi only (empty name), none, lo > hi."""
    dtype = np.dtype(dtype)
    lo, hi = np.array(-2, dtype) if dtype.kind != "u" else np.array(3, dtype), np.array(5, dtype)
    feeds = {"x": data(dtype), "lo": lo, "hi": hi}
    inits = {"lo_c": lo, "hi_c": hi}
    cases = [["x", "lo", "hi"], ["x", "lo_c", "hi_c"], ["x", "lo"], ["x", "", "hi_c"], ["x"],
             ["x", "hi", "lo"]]
    nodes = [helper.make_node("Clip", c, [f"y{i}"]) for i, c in enumerate(cases)]
    check(nodes, feeds, [f"y{i}" for i in range(len(cases))], 13, inits)


@pytest.mark.parametrize("dtype", FLOATS)
def test_clip_6_attributes(dtype):
    nodes = [helper.make_node("Clip", ["x"], ["y0"], min=-1.0, max=2.0),
             helper.make_node("Clip", ["x"], ["y1"], min=0.5),
             helper.make_node("Clip", ["x"], ["y2"])]
    check(nodes, {"x": data(dtype)}, ["y0", "y1", "y2"], 6)


# ---- Cast ----------------------------------------------------------------------------------
ALL = NUMERIC + (BOOL,)
# NaN, Inf and out-of-range values: numpy's results (x86) are reproduced for these targets;
# uint32 / uint64 results of such values depend on the CPU's vector instructions.
WILD_TARGETS = FLOATS + SINTS + (np.dtype(np.uint8), np.dtype(np.uint16), BOOL)


@pytest.mark.parametrize("source", ALL, ids=str)
def test_cast(source):
    source = np.dtype(source)
    x = data(source)
    if source.kind == "f":
        x.flat[:6] = [np.nan, np.inf, -np.inf, 300.7, -3e9, 1e30]
    tame = np.abs(np.nan_to_num(x, posinf=7, neginf=8)) if source.kind == "f" else x
    feeds = {"x": x, "t": tame}
    nodes, outputs = [], []
    for to in ALL:
        src = "x" if to in WILD_TARGETS or source.kind != "f" else "t"
        nodes.append(helper.make_node("Cast", [src], [f"y_{to}"],
                                      to=helper.np_dtype_to_tensor_dtype(to)))
        outputs.append(f"y_{to}")
    check(nodes, feeds, outputs)


def test_cast_attributes_and_castlike():
    x = floats(F32)
    feeds = {"x": x, "like_i": np.zeros(1, np.int16), "like_b": np.zeros(1, bool)}
    nodes = [helper.make_node("Cast", ["x"], ["a"], to=TensorProto.DOUBLE, saturate=0),
             helper.make_node("Cast", ["x"], ["b"], to=TensorProto.FLOAT, round_mode="up"),
             helper.make_node("CastLike", ["x", "like_i"], ["c"]),
             helper.make_node("CastLike", ["x", "like_b"], ["d"], saturate=1)]
    check(nodes, feeds, ["a", "b", "c", "d"], 24)


def test_cast_1_names_the_type():
    """Cast-1's `to` is a string (no reference support): compare with numpy's astype."""
    x = floats(F32, (3, 4))
    x.flat[:3] = [np.nan, 1e10, -2.5]
    node = helper.make_node("Cast", ["x"], ["y"], to="INT32")
    got = onnxjit.backend.prepare(model_of([node], {"x": x}, ["y"], 1)).run([x])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(got, x.astype(np.int32))


@pytest.mark.parametrize("source", ALL, ids=str)
def test_bitcast(source):
    """BitCast to every other type of the same width (bool only from 0/1 bytes), on a 2x3x4
    tensor and a scalar; NaN payloads and signs survive as bits."""
    source = np.dtype(source)
    x = data(source)
    if source.kind == "f":
        x.flat[:4] = [np.nan, -np.nan, np.inf, -0.0]
    feeds = {"x": x, "s": x.reshape(-1)[5].reshape(())}
    nodes, outputs = [], []
    for to in ALL:
        if to.itemsize != source.itemsize or (to == BOOL and source != BOOL):
            continue
        for src in ("x", "s"):
            nodes.append(helper.make_node("BitCast", [src], [f"{src}_{to}"],
                                          to=helper.np_dtype_to_tensor_dtype(to)))
            outputs.append(f"{src}_{to}")
    check(nodes, feeds, outputs, 26)


def test_bitcast_refuses_other_widths():
    x = floats(F32)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)
    with pytest.raises(Exception, match="widths differ|bit-width"):
        onnxjit.backend.prepare(model_of([node], {"x": x}, ["y"], 26))


# ---- legacy broadcasting, PRelu slopes, BatchNormalization -------------------------------
def test_legacy_broadcast_axis():
    """Opset < 7 Add/Mul with broadcast=1: b aligns with a from `axis` (no reference support)."""
    a, b, c = floats(F32, (2, 3, 4)), floats(F32, (3,), 1), floats(F32, (4,), 2)
    nodes = [helper.make_node("Add", ["a", "b"], ["y0"], broadcast=1, axis=1),
             helper.make_node("Mul", ["a", "c"], ["y1"], broadcast=1)]
    got = onnxjit.backend.prepare(model_of(nodes, {"a": a, "b": b, "c": c}, ["y0", "y1"], 6)
                                  ).run({"a": a, "b": b, "c": c})
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[0], a + b.reshape(3, 1))
        np.testing.assert_array_equal(got[1], a * c)


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1), (5,)])
def test_prelu_slope_shapes(slope_shape):
    """(5,) matches only x's last axis; (3, 1, 1) is numpy broadcasting; (1,) is a scalar."""
    x, slope = floats(F32, (2, 3, 4, 5)), floats(F32, slope_shape, 1)
    check([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x, "s": slope}, ["y"])


def test_prelu_single_matching_axis():
    """A 1-D slope matching one non-trailing axis of x is reshaped onto it (as the reference)."""
    x, slope = floats(F32, (2, 3, 4)), np.array([0.1, 0.2, 0.3], np.float32)
    check([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], inits={"s": slope})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("const_params", [True, False])
def test_batch_normalization(dtype, const_params):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    params = {"s": rng.standard_normal(3), "b": rng.standard_normal(3),
              "m": rng.standard_normal(3), "v": rng.uniform(0.5, 2, 3)}
    params = {k: v.astype(dtype) for k, v in params.items()}
    feeds, inits = ({"x": x}, params) if const_params else ({"x": x, **params}, {})
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3)
    check([node], feeds, ["y"], 15, inits, rtol=1e-5 if dtype == F32 else 1e-11)


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("node,x", [
    (helper.make_node("Gelu", ["x"], ["y"], approximate="exact"), floats(F32)),
    (helper.make_node("BitShift", ["x", "x"], ["y"], direction="UP"), ints(np.uint8)),
    (helper.make_node("BitShift", ["x", "x"], ["y"], direction="LEFT"), floats(F32)),
    (helper.make_node("Cast", ["x"], ["y"], to=1000), floats(F32))])   # no such type
def test_bad_attribute_values_are_refused(node, x):
    with pytest.raises(OnnxJitError):
        onnxjit.backend.prepare(model_of([node], {"x": x}, ["y"]))


def test_fast_float32_erf_is_accurate_and_keeps_nan_inf():
    import math
    x = np.concatenate([np.linspace(-6, 6, 20001), [np.nan, np.inf, -np.inf, 0.0, 1e-30]]).astype(np.float32)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Erf", ["x"], ["y"])], "erf",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])]),
        opset_imports=[helper.make_opsetid("", 13)])
    got = onnxjit.backend.prepare(model).run([x])[0]
    exact = np.array([math.erf(v) if v == v else np.nan for v in x.astype(np.float64)])
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=5e-7)
    assert np.isnan(got[-5]) and got[-4] == 1 and got[-3] == -1


def test_sigmoid_float32_vectorized_form():
    """float32 Sigmoid (and SiLU, x * sigmoid(x)) uses kernels/scalar.sigmoid_f32, a
    polynomial exp that vectorizes: within a few ulp of float64's value over the whole range,
    exactly 0 / 1 / NaN at -inf / +inf / NaN, tiny values relative to their size."""
    x = np.concatenate([np.linspace(-90, 90, 4001), np.linspace(-1e-3, 1e-3, 101),
                        [-np.inf, np.inf, np.nan, -87.0, -80.0, 20.0, 1e-30]]).astype(np.float32)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [x.size])  # noqa: E731
    model = helper.make_model(helper.make_graph(nodes, "g", [vi("x")], [vi("s"), vi("y")]),
                              opset_imports=[helper.make_opsetid("", 21)])
    s, y = onnxjit.backend.prepare(model).run([x])
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = 1.0 / (1.0 + np.exp(-x64))
    normal = want > 1.2e-38
    np.testing.assert_allclose(s[normal], want[normal], rtol=5e-7)
    assert np.all(np.abs(s[~normal & ~np.isnan(x)] - want[~normal & ~np.isnan(x)]) < 1e-38)
    assert s[-7] == 0.0 and s[-6] == 1.0 and np.isnan(s[-5])
    finite = np.isfinite(x)
    np.testing.assert_allclose(y[finite], (x64 * want)[finite], rtol=5e-7, atol=1e-35)
    assert np.isnan(y[-7]) and y[-6] == np.inf and np.isnan(y[-5])   # -inf * 0, inf * 1, NaN
    ref_s, ref_y = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(s, ref_s, rtol=1e-6, atol=1e-37)
