"""Elementwise ops: each lowers to a scalar expression that the planner fuses into loop nests."""
from __future__ import annotations

import numpy as np

from ..registry import register

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _unary(op_type, expr, since=1):
    @register(op_type, since)
    def lower(ctx, x):
        return ctx.elementwise(expr, x, dtype=x.dtype)
    lower.__name__ = op_type
    return lower


def _float_unary(op_type, expr, since=1):
    """A unary op computed in the input's float type."""
    return _unary(op_type, expr, since)


def _binary(op_type, expr, since=1, out_dtype=None):
    @register(op_type, since)
    def lower(ctx, a, b):
        return ctx.elementwise(expr, a, b, dtype=out_dtype or a.dtype)
    lower.__name__ = op_type
    return lower


for _op, _expr in {
    "Neg": "-{0}", "Abs": "abs({0})", "Sqrt": "__np.sqrt({0})", "Exp": "__np.exp({0})",
    "Log": "__np.log({0})", "Erf": "__math.erf({0})", "Tanh": "__np.tanh({0})",
    "Sigmoid": "__k_scalar.sigmoid({0})",
    "Relu": "({0} if not {0} < 0 else 0)", "Floor": "__np.floor({0})",
    "Ceil": "__np.ceil({0})", "Sin": "__np.sin({0})", "Cos": "__np.cos({0})",
    "Softsign": "({0} / (1 + abs({0})))",
}.items():
    _unary(_op, _expr)

for _op, _expr in {"Add": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})"}.items():
    _binary(_op, _expr)

for _op, _expr in {"Equal": "({0} == {1})", "Less": "({0} < {1})", "Greater": "({0} > {1})",
                   "LessOrEqual": "({0} <= {1})", "GreaterOrEqual": "({0} >= {1})"}.items():
    _binary(_op, _expr, out_dtype=np.bool_)

for _op, _expr in {"And": "({0} and {1})", "Or": "({0} or {1})", "Xor": "({0} != {1})"}.items():
    _binary(_op, _expr, out_dtype=np.bool_)


@register("Not")
def Not(ctx, x):
    return ctx.elementwise("(not {0})", x, dtype=np.bool_)


@register("IsNaN", 9)
def IsNaN(ctx, x):
    return ctx.elementwise("({0} != {0})", x, dtype=np.bool_)


@register("Div")
def Div(ctx, a, b):
    if a.dtype.kind in "iu":
        return ctx.elementwise("__k_scalar.int_div({0}, {1})", a, b, dtype=a.dtype)
    return ctx.elementwise("({0} / {1})", a, b, dtype=a.dtype)


@register("Pow")
def Pow(ctx, x, y):
    return ctx.elementwise("({0} ** {1})", x, y, dtype=x.dtype)


@register("Reciprocal")
def Reciprocal(ctx, x):
    return ctx.elementwise("(1 / {0})", x, dtype=x.dtype)


@register("Mod", 10)
def Mod(ctx, a, b, fmod=0):
    if fmod:
        return ctx.elementwise("__np.fmod({0}, {1})", a, b, dtype=a.dtype)
    return ctx.elementwise("__np.mod({0}, {1})", a, b, dtype=a.dtype)


@register("LeakyRelu")
def LeakyRelu(ctx, x, alpha=0.01):
    a = ctx.scalar(alpha, x.dtype)
    return ctx.elementwise(f"({{0}} if {{0}} >= 0 else {a} * {{0}})", x, dtype=x.dtype)


@register("HardSigmoid")
def HardSigmoid(ctx, x, alpha=0.2, beta=0.5):
    a, b = ctx.scalar(alpha, x.dtype), ctx.scalar(beta, x.dtype)
    return ctx.elementwise(f"max(min({a} * {{0}} + {b}, 1), 0)", x, dtype=x.dtype)


@register("Clip", 6)
def Clip_6(ctx, x, min=-3.4028234663852886e38, max=3.4028234663852886e38):  # noqa: A002
    lo, hi = ctx.constant(np.array(min, x.dtype)), ctx.constant(np.array(max, x.dtype))
    return _clip(ctx, x, lo, hi)


@register("Clip", 11)
def Clip_11(ctx, x, lo=None, hi=None):
    return _clip(ctx, x, lo, hi)


def _clip(ctx, x, lo, hi):
    y = x
    if lo is not None:
        y = ctx.elementwise("__k_scalar.maximum({0}, {1})", y, lo, dtype=x.dtype)
    if hi is not None:
        y = ctx.elementwise("__k_scalar.minimum({0}, {1})", y, hi, dtype=x.dtype)
    return y if y is not x else ctx.elementwise("{0}", x, dtype=x.dtype)


def _variadic(op_type, expr, since=1, finish=None):
    @register(op_type, since)
    def lower(ctx, *xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = ctx.elementwise(expr, acc, x, dtype=xs[0].dtype)
        if finish:
            return finish(ctx, acc, len(xs))
        return acc if len(xs) > 1 else ctx.elementwise("{0}", acc, dtype=acc.dtype)
    lower.__name__ = op_type
    return lower


def _mean_finish(ctx, acc, n):
    return ctx.elementwise(f"({{0}} / {ctx.scalar(n, acc.dtype)})", acc, dtype=acc.dtype)


_variadic("Max", "__k_scalar.maximum({0}, {1})")
_variadic("Min", "__k_scalar.minimum({0}, {1})")
_variadic("Sum", "({0} + {1})")
_variadic("Mean", "({0} + {1})", finish=_mean_finish)


@register("Where", 9)
def Where(ctx, cond, x, y):
    return ctx.elementwise("({1} if {0} else {2})", cond, x, y, dtype=x.dtype)


@register("Cast", 1)
def Cast(ctx, x, to, saturate=1, round_mode="up"):
    from ..ir import tensor_dtype
    dtype = tensor_dtype(to)
    if dtype is None:
        ctx.fail(f"cast to element type {to} is not supported")
    if dtype == np.bool_:
        return ctx.elementwise("({0} != 0)", x, dtype=dtype)
    return ctx.elementwise("{0}", x, dtype=dtype)


@register("CastLike", 15)
def CastLike(ctx, x, like, saturate=1, round_mode="up"):
    if like.dtype == np.bool_:
        return ctx.elementwise("({0} != 0)", x, dtype=like.dtype)
    return ctx.elementwise("{0}", x, dtype=like.dtype)


@register("BatchNormalization", 1)
def BatchNormalization(ctx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9,
                       spatial=1, is_test=1, consumed_inputs=None, training_mode=0):
    """Inference form: y = (x - mean) / sqrt(var + eps) * scale + bias, per channel."""
    if training_mode:
        ctx.fail("training_mode=1 is not supported")
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2)
    if all(v.is_const for v in (scale, bias, mean, var)):
        # Fold to y = x * a + b with constant per-channel a, b.
        a = scale.const / np.sqrt(var.const + np.asarray(epsilon, var.dtype))
        b = bias.const - mean.const * a
        a = ctx.constant(a.astype(x.dtype).reshape(per_channel))
        b = ctx.constant(b.astype(x.dtype).reshape(per_channel))
        return ctx.elementwise("({0} * {1} + {2})", x, a, b, dtype=x.dtype)
    eps = ctx.scalar(epsilon, x.dtype)
    shaped = [ctx.call(f"{{0}}.reshape({ctx.lit(per_channel)})", v, shape=per_channel, dtype=v.dtype)
              for v in (scale, bias, mean, var)]
    return ctx.elementwise(f"(({{0}} - {{3}}) / __np.sqrt({{4}} + {eps}) * {{1}} + {{2}})",
                           x, *shaped, dtype=x.dtype)
