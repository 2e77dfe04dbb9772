"""RandomUniform, RandomNormal, their *Like forms, and Bernoulli.

A kernel draws float64 values (kernels/random.py: Numba's np.random is numpy's legacy Mersenne
Twister, so a `seed` gives exactly the draws of numpy.random.RandomState(seed), as onnx's
reference makes them, and every run with a seed draws the same values); the scaling and the cast
to the output dtype are a fused elementwise step. These ops are never folded at compile time
(specialize.NONDETERMINISTIC). Without a seed, draws come from Numba's generator.
"""
from __future__ import annotations

import numpy as np
from onnx.helper import tensor_dtype_to_np_dtype

from .. import scalar_expr as S
from ..ir import COMPILABLE_DTYPES, compute_dtype
from ..registry import register


def _seed(ctx, seed):
    """(seed, seeded) for the kernel: numpy seeds are integers in [0, 2**32)."""
    if seed is None or seed != seed:   # absent or NaN: unseeded, as the reference
        return 0, False
    if abs(seed) == float("inf"):
        ctx.fail(f"seed {seed} is not finite")
    s = int(seed)   # truncated, as the reference seeds RandomState(int(seed))
    if not 0 <= s < 2 ** 32:
        ctx.fail(f"seed {seed} is outside [0, 2**32)")
    return s, True


def _dtype(ctx, dtype, default, floats_only=True):
    dt = np.dtype(default) if not dtype else np.dtype(tensor_dtype_to_np_dtype(dtype))
    if dt not in COMPILABLE_DTYPES or (floats_only and compute_dtype(dt).kind != "f"):
        ctx.fail(f"output dtype {dt} is not supported")
    return dt


def _shape(ctx, shape):
    if shape is None or any(int(d) < 0 for d in shape):
        ctx.fail(f"shape {shape} must be given, with dims >= 0")
    return tuple(int(d) for d in shape)


def _draw(ctx, kind, shape, seed, a, b, dtype):
    """`a + b * draw` (normal: mean, scale) or `a + (b - a) * draw` (uniform: low, high),
    the draw cast to `dtype` first, as the reference computes it."""
    s, seeded = _seed(ctx, seed)
    raw = ctx.kernel(("random", kind), shape, s, seeded, shape=shape, dtype=np.float64)
    factor = b if kind == "normal" else b - a
    expr = S.paren(S.convert(dtype, S.operand(0)) * ctx.scalar(factor, dtype)
                   + ctx.scalar(a, dtype))
    return ctx.elementwise(expr, raw, dtype=dtype)


@register("RandomUniform", 1)
def RandomUniform(ctx, dtype=1, high=1.0, low=0.0, seed=None, shape=None):
    return _draw(ctx, "uniform", _shape(ctx, shape), seed, float(low), float(high),
                 _dtype(ctx, dtype, np.float32))


@register("RandomNormal", 1)
def RandomNormal(ctx, dtype=1, mean=0.0, scale=1.0, seed=None, shape=None):
    return _draw(ctx, "normal", _shape(ctx, shape), seed, float(mean), float(scale),
                 _dtype(ctx, dtype, np.float32))


@register("RandomUniformLike", 1)
def RandomUniformLike(ctx, x, dtype=None, high=1.0, low=0.0, seed=None):
    return _draw(ctx, "uniform", x.shape, seed, float(low), float(high),
                 _dtype(ctx, dtype, x.dtype))


@register("RandomNormalLike", 1)
def RandomNormalLike(ctx, x, dtype=None, mean=0.0, scale=1.0, seed=None):
    return _draw(ctx, "normal", x.shape, seed, float(mean), float(scale),
                 _dtype(ctx, dtype, x.dtype))


@register("Bernoulli", 15)
def Bernoulli(ctx, x, dtype=None, seed=None):
    if compute_dtype(x.dtype).kind != "f":
        ctx.fail(f"input dtype {x.dtype} is not a float type")
    out = _dtype(ctx, dtype, x.dtype, floats_only=False)
    s, seeded = _seed(ctx, seed)
    raw = ctx.kernel(("random", "bernoulli"), x, s, seeded, shape=x.shape, dtype=np.float64)
    return ctx.elementwise(S.operand(0), raw, dtype=out)
