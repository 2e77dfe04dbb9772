"""Elementwise ops: each lowers to a scalar expression tree (onnxjit/scalar_expr.py) that the
planner fuses into loop nests.

Most are built by a function of the inputs' operands and `k`, the typed constants of `_ew`
(`k.zero`, `k.one`, `k.half` and the op's own): a bare Python float literal would promote
float32 math to float64 in Numba. Each step's result is cast to its dtype by the emitter, so
integer wrap-around matches numpy.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
from onnx import TensorProto

from ..ir import BIT_TYPES, COMPILABLE_DTYPES, NARROW_FLOATS, tensor_dtype
from .. import scalar_expr as S
from .. import steps as E
from ..registry import register

BOOL = np.dtype(np.bool_)


def f32(x):
    """x rounded to float32: ONNX float attributes (and their schema defaults) are float32."""
    return float(np.float32(x))


def _ew(ctx, build, *inputs, dtype, ctype=None, **consts):
    """ctx.elementwise of `build(operands..., k)`: the inputs' operands, then `k` holding the
    typed constants zero, one, half and `consts` as scalars of `ctype` (default: dtype)."""
    ctype = np.dtype(ctype or dtype)
    typed = {"zero": 0, "one": 1, "half": 0.5, **consts}
    k = SimpleNamespace(**{name: S.scalar(v, ctype) for name, v in typed.items()})
    return ctx.elementwise(build(*S.operands(len(inputs)), k), *inputs, dtype=dtype)


def _np(function):
    """The builder of `__np.<function>(x)`."""
    return lambda x, k: S.np(function, x)


P = S.paren
MAXIMUM, MINIMUM = (functools.partial(S.lib, "scalar", f) for f in ("maximum", "minimum"))


def _wide(dtype):
    """The 64-bit integer type that integer helpers compute in (one operand type per helper)."""
    return np.dtype(np.uint64 if np.dtype(dtype).kind == "u" else np.int64)


# ---- unary ops: op -> (builder of the expression, first opset) --------------------------------
UNARY = {
    "Neg": (lambda x, k: P(-x), 1), "Abs": (lambda x, k: S.builtin("abs", x), 1),
    "Relu": (lambda x, k: P(S.cond(S.not_(S.lt(x, k.zero)), x, k.zero)), 1),
    "Sqrt": (_np("sqrt"), 1), "Exp": (_np("exp"), 1), "Log": (_np("log"), 1),
    "Reciprocal": (lambda x, k: P(k.one / x), 1),
    "Floor": (_np("floor"), 1), "Ceil": (_np("ceil"), 1),
    "Round": (_np("rint"), 11),  # rint rounds halves to even, as ONNX Round
    "Tanh": (_np("tanh"), 1),
    "Sin": (_np("sin"), 7), "Cos": (_np("cos"), 7), "Tan": (_np("tan"), 7),
    "Asin": (_np("arcsin"), 7), "Acos": (_np("arccos"), 7),
    "Atan": (_np("arctan"), 7), "Sinh": (_np("sinh"), 9),
    "Cosh": (_np("cosh"), 9), "Asinh": (_np("arcsinh"), 9),
    "Acosh": (_np("arccosh"), 9), "Atanh": (_np("arctanh"), 9),
    # Stable forms: no overflow of exp for large |x|; NaN falls through to the else branch.
    "Sigmoid": (lambda x, k: P(S.cond(S.ge(x, k.zero), k.one / (k.one + S.np("exp", -x)),
                                      S.np("exp", x) / (k.one + S.np("exp", x)))), 1),
    "Softplus": (lambda x, k: P(S.cond(S.gt(x, k.zero), x + S.np("log1p", S.np("exp", -x)),
                                       S.np("log1p", S.np("exp", x)))), 1),
    "Softsign": (lambda x, k: P(x / (k.one + S.builtin("abs", x))), 1),
    "Mish": (lambda x, k: P(S.cond(S.gt(x, k.zero),
                                   x * S.np("tanh", x + S.np("log1p", S.np("exp", -x))),
                                   x * S.np("tanh", S.np("log1p", S.np("exp", x))))), 18),
    "BitwiseNot": (lambda x, k: P(~x), 18),
}
# Ops whose opset-1 form had the (ignored) `consumed_inputs` attribute.
LEGACY_CONSUMED = {"Neg", "Abs", "Relu", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil",
                   "Tanh", "Sigmoid"}


# float32 forms that vectorize inside fused loops (no libm call, no branch; kernels/scalar.py)
UNARY_F32 = {"Sigmoid": lambda x, k: S.lib("scalar", "sigmoid_f32", x)}


def _unary(op_type, expr, since):
    f32_expr = UNARY_F32.get(op_type, expr)
    if op_type in LEGACY_CONSUMED:
        def lower(ctx, x, consumed_inputs=None):
            return _ew(ctx, f32_expr if x.dtype == np.float32 else expr, x, dtype=x.dtype)
    else:
        def lower(ctx, x):
            return _ew(ctx, f32_expr if x.dtype == np.float32 else expr, x, dtype=x.dtype)
    lower.__name__ = op_type
    register(op_type, since)(lower)


for _op, (_expr, _since) in UNARY.items():
    _unary(_op, _expr, _since)


@register("Sign", 9)
def Sign(ctx, x):
    # Numba's np.sign mishandles unsigned integers (it returns 255 for uint8 255).
    expr = (lambda v, k: P(S.ne(v, k.zero))) if x.dtype.kind == "u" else _np("sign")
    return _ew(ctx, expr, x, dtype=x.dtype)


@register("Not", 1)
def Not(ctx, x):
    return ctx.elementwise(P(S.not_(S.operand(0))), x, dtype=BOOL)


@register("IsNaN", 9)
def IsNaN(ctx, x):
    v = S.operand(0)
    return ctx.elementwise(P(S.ne(v, v)), x, dtype=BOOL)


@register("IsInf", 10)
def IsInf(ctx, x, detect_negative=1, detect_positive=1):
    def build(v, k):
        tests = ([P(S.eq(v, k.inf))] if detect_positive else []) + \
                ([P(S.eq(v, -k.inf))] if detect_negative else [])
        return functools.reduce(S.or_, tests) if tests else S.lit(False)
    return _ew(ctx, build, x, dtype=BOOL, ctype=x.dtype, inf=np.inf)


# ---- activations with attributes -----------------------------------------------------------
@register("LeakyRelu", 1)
def LeakyRelu(ctx, x, alpha=f32(0.01), consumed_inputs=None):
    return _ew(ctx, lambda v, k: P(S.cond(S.ge(v, k.zero), v, k.a * v)), x, dtype=x.dtype,
               a=alpha)


@register("HardSigmoid", 1)
def HardSigmoid(ctx, x, alpha=f32(0.2), beta=0.5, consumed_inputs=None):
    return _ew(ctx, lambda v, k: MAXIMUM(MINIMUM(k.a * v + k.b, k.one), k.zero),
               x, dtype=x.dtype, a=alpha, b=beta)


@register("HardSwish", 14)
def HardSwish(ctx, x):
    return _ew(ctx, lambda v, k: P(v * MAXIMUM(MINIMUM(k.a * v + k.half, k.one), k.zero)),
               x, dtype=x.dtype, a=f32(1 / 6))


@register("Elu", 1)
def Elu(ctx, x, alpha=1.0, consumed_inputs=None):
    return _ew(ctx, lambda v, k: P(S.cond(S.gt(v, k.zero), v, k.a * S.np("expm1", v))), x,
               dtype=x.dtype, a=alpha)


@register("Selu", 1)
def Selu(ctx, x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875,
         consumed_inputs=None):
    return _ew(ctx, lambda v, k: P(S.cond(S.gt(v, k.zero), v, k.a * S.np("expm1", v)) * k.g),
               x, dtype=x.dtype, a=alpha, g=gamma)


@register("Celu", 12)
def Celu(ctx, x, alpha=1.0):
    return _ew(ctx, lambda v, k: P(MAXIMUM(k.zero, v)
                                   + MINIMUM(k.zero, k.a * S.np("expm1", v / k.a))),
               x, dtype=x.dtype, a=alpha)


@register("ThresholdedRelu", 10)
def ThresholdedRelu(ctx, x, alpha=1.0):
    return _ew(ctx, lambda v, k: P(S.cond(S.gt(v, k.a), v, k.zero)), x, dtype=x.dtype, a=alpha)


@register("Gelu", 20)
def Gelu(ctx, x, approximate="none"):
    if approximate == "tanh":
        def tanh_form(v, k):
            return P(k.half * v * (k.one + S.np("tanh", k.c * (v + k.k3 * v * v * v))))
        return _ew(ctx, tanh_form, x, dtype=x.dtype, c=np.sqrt(f32(2 / np.pi)),
                   k3=f32(0.044715))
    if approximate != "none":
        ctx.fail("approximate must be 'none' or 'tanh'")
    erf = _erf_function(x.dtype)
    return _ew(ctx, lambda v, k: P(k.half * v * (k.one + erf(v * k.r))), x, dtype=x.dtype,
               r=1 / np.sqrt(2))


def _erf_function(dtype):
    """float32 (and narrower) uses a vectorizable rational approximation (error < 5e-7, like
    ONNX Runtime's); float64 keeps libm's erf."""
    if np.dtype(dtype) == np.float64:
        return functools.partial(S.math, "erf")
    return functools.partial(S.lib, "scalar", "erf_f32")


@register("Erf", 9)
def Erf(ctx, x):
    erf = _erf_function(x.dtype)
    return _ew(ctx, lambda v, k: erf(v), x, dtype=x.dtype)


@register("Swish", 24)
def Swish(ctx, x, alpha=1.0):
    return _ew(ctx, lambda v, k: P(v / (k.one + S.np("exp", -k.a * v))), x, dtype=x.dtype,
               a=alpha)


@register("Shrink", 9)
def Shrink(ctx, x, bias=0.0, lambd=0.5):
    # numpy compares and adds integer x with Python floats in float64, then casts back.
    ctype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    y = _ew(ctx, lambda v, k: P(S.cond(S.lt(v, -k.l), v + k.b,
                                      P(S.cond(S.gt(v, k.l), v - k.b, k.zero)))),
            x, dtype=ctype, b=bias, l=lambd)
    return _cast(ctx, y, x.dtype)


@register("PRelu", 1)
def PRelu(ctx, x, slope, consumed_inputs=None):
    slope = _prelu_slope(ctx, x, slope)
    return _ew(ctx, lambda v, s, k: P(S.cond(S.gt(v, k.zero), v, v * s)), x, slope,
               dtype=x.dtype)


def _prelu_slope(ctx, x, slope):
    """The slope, reshaped when it only matches one axis of x (as the reference does)."""
    try:
        np.broadcast_shapes(x.shape, slope.shape)
        return slope
    except ValueError:
        pass
    axes = [i for i, d in enumerate(x.shape) if slope.rank == 1 and d == slope.shape[0]]
    if len(axes) != 1:
        ctx.fail(f"slope of shape {slope.shape} does not broadcast to {x.shape}")
    shape = tuple(d if i == axes[0] else 1 for i, d in enumerate(x.shape))
    if slope.const is not None:
        return ctx.constant(slope.const.reshape(shape))
    return ctx.call(E.reshape(slope, shape), shape=shape, dtype=slope.dtype)


# ---- binary ops ------------------------------------------------------------------------------
def _legacy_broadcast(ctx, a, b, broadcast, axis):
    """Opset < 7 broadcasting: b's dims align with a's from `axis` (default: trailing)."""
    if not broadcast or axis is None or b.rank == 0:
        return b
    if axis < 0:
        axis += a.rank
    shape = b.shape + (1,) * (a.rank - axis - b.rank)
    if b.const is not None:
        return ctx.constant(b.const.reshape(shape))
    return ctx.call(E.reshape(b, shape), shape=shape, dtype=b.dtype)


def _binary(op_type, expr, since, out_dtype=None, legacy=False):
    """Register `expr` (a builder: a, b, k) over two same-typed inputs; `legacy` adds opset-1
    broadcast attributes."""
    if legacy:
        def lower(ctx, a, b, broadcast=0, axis=None, consumed_inputs=None):
            b = _legacy_broadcast(ctx, a, b, broadcast, axis)
            return _ew(ctx, expr, a, b, dtype=out_dtype or a.dtype, ctype=a.dtype)
    else:
        def lower(ctx, a, b):
            return _ew(ctx, expr, a, b, dtype=out_dtype or a.dtype, ctype=a.dtype)
    lower.__name__ = op_type
    register(op_type, since)(lower)


BINARY = {  # op -> (builder, first opset, output dtype (None: the inputs'), legacy attributes)
    "Add": (lambda a, b, k: P(a + b), 1, None, True),
    "Sub": (lambda a, b, k: P(a - b), 1, None, True),
    "Mul": (lambda a, b, k: P(a * b), 1, None, True),
    "Equal": (lambda a, b, k: P(S.eq(a, b)), 1, BOOL, True),
    "Less": (lambda a, b, k: P(S.lt(a, b)), 1, BOOL, True),
    "Greater": (lambda a, b, k: P(S.gt(a, b)), 1, BOOL, True),
    "LessOrEqual": (lambda a, b, k: P(S.le(a, b)), 12, BOOL, False),
    "GreaterOrEqual": (lambda a, b, k: P(S.ge(a, b)), 12, BOOL, False),
    "And": (lambda a, b, k: P(S.and_(a, b)), 1, BOOL, True),
    "Or": (lambda a, b, k: P(S.or_(a, b)), 1, BOOL, True),
    "Xor": (lambda a, b, k: P(S.ne(a, b)), 1, BOOL, True),
    "BitwiseAnd": (lambda a, b, k: P(a & b), 18, None, False),
    "BitwiseOr": (lambda a, b, k: P(a | b), 18, None, False),
    "BitwiseXor": (lambda a, b, k: P(a ^ b), 18, None, False),
}
for _op, (_expr, _since, _out, _legacy) in BINARY.items():
    _binary(_op, _expr, _since, _out, _legacy)


@register("Div", 1)
def Div(ctx, a, b, broadcast=0, axis=None, consumed_inputs=None):
    b = _legacy_broadcast(ctx, a, b, broadcast, axis)
    if a.dtype.kind in "iu":
        helper = "int_div" if a.dtype.kind == "i" else "uint_div"
        return _wide_call(ctx, helper, a, b)
    u, v = S.operands(2)
    return ctx.elementwise(P(u / v), a, b, dtype=a.dtype)


def _wide_call(ctx, helper, a, b):
    """__k_scalar.<helper> of a and b, both converted to their 64-bit integer type."""
    w = _wide(a.dtype)
    u, v = S.operands(2)
    return ctx.elementwise(S.lib("scalar", helper, S.convert(w, u), S.convert(w, v)), a, b,
                           dtype=a.dtype)


@register("Mod", 10)
def Mod(ctx, a, b, fmod=0):
    if a.dtype.kind == "f":
        return ctx.elementwise(S.np("fmod" if fmod else "mod", *S.operands(2)), a, b,
                               dtype=a.dtype)
    helper = "int_fmod" if fmod and a.dtype.kind == "i" else "int_mod"
    return _wide_call(ctx, helper, a, b)


@register("BitShift", 11)
def BitShift(ctx, x, y, direction):
    """ONNX allows unsigned types; signed ones shift like the reference (arithmetic right)."""
    if direction not in ("LEFT", "RIGHT") or x.dtype.kind not in "iu":
        ctx.fail("needs direction LEFT or RIGHT and integer inputs")
    helper = ("shift_left" if direction == "LEFT" else "shift_right")
    if x.dtype.kind == "i":
        helper = "s" + helper
    w = _wide(x.dtype)
    return _ew(ctx, lambda u, v, k: S.lib("scalar", helper, S.convert(w, u), S.convert(w, v),
                                          k.bits),
               x, y, dtype=x.dtype, ctype=w, bits=x.dtype.itemsize * 8)


@register("Pow", 1)
def Pow(ctx, x, y, broadcast=0, axis=None):
    """numpy's power in the promoted type of base and exponent, cast to the base's type."""
    y = _legacy_broadcast(ctx, x, y, broadcast, axis)
    ctype = np.result_type(x.dtype, y.dtype)
    # Integer power wraps like numpy's; in int64 it agrees modulo 2**bits with narrower types.
    c = _wide(ctype) if ctype.kind in "iu" else ctype
    u, v = S.operands(2)
    power = ctx.elementwise(P(S.convert(c, u) ** S.convert(c, v)), x, y, dtype=ctype)
    return _cast(ctx, power, x.dtype)


# ---- variadic ops ------------------------------------------------------------------------------
def _variadic(op_type, expr, mean=False):
    """Register `expr` (a function of two operands) folded over the inputs."""
    @register(op_type, 1)
    def lower(ctx, *xs, consumed_inputs=None):
        acc = xs[0]
        for x in xs[1:]:
            acc = ctx.elementwise(expr(*S.operands(2)), acc, x, dtype=xs[0].dtype)
        if mean:
            return _ew(ctx, lambda v, k: P(v / k.n), acc, dtype=acc.dtype, n=len(xs))
        return acc if len(xs) > 1 else _copy(ctx, acc)
    lower.__name__ = op_type
    return lower


_variadic("Max", MAXIMUM)
_variadic("Min", MINIMUM)
_variadic("Sum", lambda a, b: P(a + b))
_variadic("Mean", lambda a, b: P(a + b), mean=True)


@register("Where", 9)
def Where(ctx, cond, x, y):
    c, a, b = S.operands(3)
    return ctx.elementwise(P(S.cond(c, a, b)), cond, x, y, dtype=x.dtype)


# ---- Clip ------------------------------------------------------------------------------------
@register("Clip", 1)
def Clip_1(ctx, x, min=None, max=None, consumed_inputs=None):  # noqa: A002
    lo = None if min is None else ctx.constant(np.array(min, x.dtype))
    hi = None if max is None else ctx.constant(np.array(max, x.dtype))
    return _clip(ctx, x, lo, hi)


@register("Clip", 6)
def Clip_6(ctx, x, min=-3.4028234663852886e38, max=3.4028234663852886e38):  # noqa: A002
    return Clip_1(ctx, x, min, max)


@register("Clip", 11)
def Clip_11(ctx, x, lo=None, hi=None):
    return _clip(ctx, x, lo, hi)


def _clip(ctx, x, lo, hi):
    """np.clip: maximum with lo, then minimum with hi (NaN propagates; hi wins when lo > hi)."""
    y = x
    if lo is not None:
        y = ctx.elementwise(MAXIMUM(*S.operands(2)), y, lo, dtype=x.dtype)
    if hi is not None:
        y = ctx.elementwise(MINIMUM(*S.operands(2)), y, hi, dtype=x.dtype)
    return y if y is not x else _copy(ctx, x)


# ---- Cast --------------------------------------------------------------------------------------
# float -> integer casts go through helpers: LLVM leaves NaN / out-of-range conversions undefined.
FLOAT_TO_INT = {"int8": "f2i32", "int16": "f2i32", "int32": "f2i32", "int64": "f2i64",
                "uint8": "f2i32", "uint16": "f2i32", "uint32": "f2u32", "uint64": "f2u64"}


def _cast(ctx, x, dtype, saturate=1, round_mode="up"):
    """x converted to `dtype` as numpy's astype does (ml_dtypes' and ONNX's rules for the types
    held as bit patterns, `saturate` and `round_mode` for float8 targets)."""
    dtype = np.dtype(dtype)
    if dtype == x.dtype:
        return x
    if dtype in BIT_TYPES:
        return bit_encode(ctx, x, dtype, saturate, round_mode)
    if x.dtype in BIT_TYPES:
        return _cast(ctx, bit_value(ctx, x), dtype)
    if dtype == BOOL:
        return _ew(ctx, lambda v, k: P(S.ne(v, k.zero)), x, dtype=BOOL, ctype=x.dtype)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        return ctx.elementwise(S.lib("scalar", FLOAT_TO_INT[dtype.name], S.operand(0)), x,
                               dtype=dtype)
    return ctx.elementwise(S.operand(0), x, dtype=dtype)


# Types held as bit patterns (ir.BIT_TYPES): the float ones decode to float32, the integer ones
# to int8 / uint8 (kernels/narrow.py); (value dtype, mask of their bits) for the integer ones.
BIT_FLOATS = {"float8_e4m3fn": "e4m3fn", "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2": "e5m2",
              "float8_e5m2fnuz": "e5m2fnuz", "float4_e2m1fn": "e2m1", "float8_e8m0fnu": "e8m0"}
BIT_INTS = {"int4": (np.dtype(np.int8), 0xF), "uint4": (np.dtype(np.uint8), 0xF),
            "int2": (np.dtype(np.int8), 0x3), "uint2": (np.dtype(np.uint8), 0x3)}
ROUND_MODES = {"up": 0, "nearest": 1, "down": 2}


def bit_value(ctx, x):
    """x, held as bit patterns, decoded to its value (float32 or int8 / uint8)."""
    name = BIT_TYPES[x.dtype]
    if name in BIT_FLOATS:
        return ctx.elementwise(S.lib("narrow", f"dec_{BIT_FLOATS[name]}", S.operand(0)), x,
                               dtype=np.float32)
    return ctx.elementwise(S.lib("narrow", f"dec_{name}", S.operand(0)), x,
                           dtype=BIT_INTS[name][0])


def bit_encode(ctx, x, dtype, saturate=1, round_mode="up"):
    """x converted to `dtype`, a type held as bit patterns (rounded to nearest even)."""
    name = BIT_TYPES[dtype]
    if x.dtype in BIT_TYPES:
        x = bit_value(ctx, x)
    if x.dtype == BOOL:
        x = _cast(ctx, x, np.uint8)
    v, sat = S.operand(0), S.lit(bool(saturate))
    if name == "float8_e8m0fnu":
        if round_mode not in ROUND_MODES:
            ctx.fail(f"round_mode {round_mode!r} is not one of {sorted(ROUND_MODES)}")
        expr = S.lib("narrow", "enc_e8m0", v, sat, S.lit(ROUND_MODES[round_mode]))
    elif name in BIT_FLOATS:
        expr = S.lib("narrow", f"enc_{BIT_FLOATS[name]}", v, sat)
    elif x.dtype.kind == "f":
        expr = S.lib("narrow", "f2low", v, S.lit(BIT_INTS[name][1]))
    else:
        expr = S.lib("narrow", "low_bits", S.convert(np.int64, v), S.lit(BIT_INTS[name][1]))
    return ctx.elementwise(expr, x, dtype=dtype)


def _copy(ctx, x):
    """x as a Value of its own (its step reads and writes the element as it is)."""
    return ctx.elementwise(S.operand(0), x, dtype=x.dtype)


@register("Cast", 1)
def Cast(ctx, x, to, saturate=1, round_mode="up"):
    """`saturate` concerns float8 targets, `round_mode` float8 E8M0 ones."""
    if isinstance(to, str):  # Cast-1 names the type: "FLOAT", "INT64", ...
        if to.upper() not in TensorProto.DataType.keys():
            ctx.fail(f"unknown element type name {to!r}")
        to = TensorProto.DataType.Value(to.upper())
    dtype = tensor_dtype(to)
    if dtype not in COMPILABLE_DTYPES:
        name = TensorProto.DataType.Name(to) if to in TensorProto.DataType.values() else to
        ctx.fail(f"cast to {name} cannot be compiled (onnxjit holds float16/32/64, bfloat16, "
                 "float8, float4 E2M1, int2-64, uint2-64 and bool)")
    y = _cast(ctx, x, dtype, saturate, round_mode)
    return y if y is not x else _copy(ctx, x)


@register("CastLike", 15)
def CastLike(ctx, x, like, saturate=1, round_mode="up"):
    y = _cast(ctx, x, like.dtype, saturate, round_mode)
    return y if y is not x else _copy(ctx, x)


@register("BitCast", 26)
def BitCast(ctx, x, to):
    """The bits of x read as `to` (same width): a view of the flat array, copied out by the
    emitter if it becomes a graph output."""
    dtype = tensor_dtype(to)
    narrow = [d.name for d in (x.dtype, dtype) if d in NARROW_FLOATS]
    if narrow:
        ctx.fail(f"BitCast of {narrow[0]} cannot be compiled: onnxjit holds {narrow[0]} "
                 "values in float32")
    if dtype not in COMPILABLE_DTYPES:
        name = TensorProto.DataType.Name(to) if to in TensorProto.DataType.values() else to
        ctx.fail(f"BitCast to {name} cannot be compiled (onnxjit holds float16/32/64, "
                 "bfloat16, int8-64, uint8-64 and bool)")
    if dtype.itemsize != x.dtype.itemsize:
        ctx.fail(f"BitCast from {x.dtype.name} to {dtype.name}: the widths differ "
                 f"({8 * x.dtype.itemsize} and {8 * dtype.itemsize} bits)")
    if dtype == x.dtype:
        return _copy(ctx, x)
    flat = E.contiguous(x).reshape((x.size,))
    return ctx.call(flat.view(E.dtype(dtype)).reshape(tuple(x.shape)), shape=x.shape,
                    dtype=dtype, view=True)


# ---- BatchNormalization (inference) ----------------------------------------------------------
@register("BatchNormalization", 1)
def BatchNormalization(ctx, x, scale, bias, mean, var, epsilon=f32(1e-5), momentum=f32(0.9),
                       spatial=1, is_test=1, consumed_inputs=None, training_mode=0):
    """Inference form: y = (x - mean) / sqrt(var + eps) * scale + bias, per channel."""
    if training_mode:
        ctx.fail("training_mode=1 is not supported")
    # Per-channel vectors align with axis 1; spatial=0 (opset < 9) stats already have x's C,H,W.
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2)
    if all(v.is_const for v in (scale, bias, mean, var)):
        # Fold to y = x * a + b with constant a, b.
        a = scale.const / np.sqrt(var.const + np.asarray(epsilon, var.dtype))
        b = bias.const - mean.const * a
        shape = per_channel if scale.rank <= 1 else scale.shape
        a = ctx.constant(a.astype(x.dtype).reshape(shape))
        b = ctx.constant(b.astype(x.dtype).reshape(shape))
        v, s, t = S.operands(3)
        return ctx.elementwise(P(v * s + t), x, a, b, dtype=x.dtype)
    shaped = [v if v.rank > 1 else ctx.call(E.reshape(v, per_channel), shape=per_channel,
                                            dtype=v.dtype)
              for v in (scale, bias, mean, var)]
    return _ew(ctx, lambda v, s, b, m, var, k: P((v - m) / S.np("sqrt", var + k.eps) * s + b),
               x, *shaped, dtype=x.dtype, eps=epsilon)
