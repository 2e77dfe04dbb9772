"""Softmax family and normalizations: library kernels (kernels/normalization.py) on reshaped views.

Softmax, LogSoftmax, Hardmax and LpNormalization act along one axis of an (outer, n, inner) view;
the normalizations take 2-D (groups, elements) views whose rows are normalized independently.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import NARROW_FLOATS
from .. import steps as E
from ..registry import register
from . import nn
from .elementwise import _cast

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _prod(dims):
    return int(math.prod(dims))


def _axis(ctx, axis, rank):
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _floats(ctx, *values):
    for v in values:
        if v is not None and v.dtype not in FLOATS:
            ctx.fail(f"input {v.name or '?'} has dtype {v.dtype}; float32 or float64 expected")


def _along_axis(ctx, kernel, x, axis, coerce, extra=()):
    """Apply an (outer, n, inner) kernel along `axis`; `coerce`: the pre-13 flatten-to-2-D rule."""
    _floats(ctx, x)
    axis = _axis(ctx, axis, x.rank)
    s = x.shape
    if coerce:
        dims = (_prod(s[:axis]), _prod(s[axis:]), 1)
    else:
        dims = (_prod(s[:axis]), s[axis], _prod(s[axis + 1:]))
    expr = E.lib("normalization", kernel, E.reshape(x, dims), *extra).reshape(s)
    return ctx.call(expr, shape=s, dtype=x.dtype)


def _softmax_rows_f32(ctx, x, axis, coerce):
    """float32 Softmax over contiguous rows on AVX-512 / AVX2 CPUs: the explicit-vector kernel
    (``softmax_f32``), which also takes a constant scale left pending on the MatMul before it
    (scores = Q @ K^T * scale; see ops/nn.py ``scale_into_matmul``).  None when not applicable."""
    _floats(ctx, x)
    axis = _axis(ctx, axis, x.rank)
    s = x.shape
    n = _prod(s[axis:]) if coerce else s[axis]
    if x.dtype != np.float32 or x.size == 0 or (not coerce and _prod(s[axis + 1:]) != 1):
        return None
    if not ctx.target.split16:       # AVX2 too: 3.2x the generic softmax on (4, 128, 128) rows
        return None
    scale = nn.take_matmul_scale(ctx, x)
    rows = E.contiguous(x).reshape((x.size // n, n))
    expr = E.lib("normalization", "softmax_f32", rows, scale).reshape(s)
    return ctx.call(expr, shape=s, dtype=x.dtype)


def _softmax_rows_f16(ctx, x, axis, coerce):
    """float16 Softmax over contiguous rows rounded step by step as numpy computes it in
    float16 (onnx's reference); None when the axis is not the last (numpy's order differs)."""
    axis = _axis(ctx, axis, x.rank)
    s = x.shape
    n = _prod(s[axis:]) if coerce else s[axis]
    if x.size == 0 or (not coerce and _prod(s[axis + 1:]) != 1):
        return None
    rows = E.contiguous(x).reshape((x.size // n, n))
    expr = E.lib("normalization", "softmax_f16_rows", rows).reshape(s)
    return ctx.call(expr, shape=s, dtype=x.dtype)


def _softmax_family(op_type, kernel):
    def lower(ctx, x, axis, coerce):
        if kernel == "softmax" and x.dtype == np.float16:
            y = _softmax_rows_f16(ctx, x, axis, coerce)
            if y is not None:
                return y
        if x.dtype in NARROW_FLOATS:   # held in float32: compute there, round the result once
            return _cast(ctx, lower(ctx, _cast(ctx, x, np.float32), axis, coerce), x.dtype)
        if kernel == "softmax":
            y = _softmax_rows_f32(ctx, x, axis, coerce)
            if y is not None:
                return y
        return _along_axis(ctx, kernel, x, axis, coerce)

    @register(op_type, 1)
    def coerced(ctx, x, axis=1):
        return lower(ctx, x, axis, True)

    @register(op_type, 13)
    def single_axis(ctx, x, axis=-1):
        return lower(ctx, x, axis, False)

    coerced.__name__ = single_axis.__name__ = op_type


_softmax_family("Softmax", "softmax")
_softmax_family("LogSoftmax", "log_softmax")
_softmax_family("Hardmax", "hardmax")


@register("LpNormalization", 1)
def LpNormalization(ctx, x, axis=-1, p=2):
    if p not in (1, 2):
        ctx.fail(f"p={p} is not supported (1 or 2)")
    return _along_axis(ctx, "lp_normalize", x, axis, coerce=False, extra=(int(p),))


def _row_param(ctx, v, dtype, norm_shape):
    """Parameter `v` flattened to the normalized shape's size (None when absent)."""
    if v is None:
        return None
    if v.dtype != dtype:
        ctx.fail(f"{v.name or 'a parameter'} has dtype {v.dtype}, the input has {dtype}")
    try:
        fits = np.broadcast_shapes(v.shape, norm_shape) == tuple(norm_shape)
    except ValueError:
        fits = False
    if not fits or v.rank > len(norm_shape):
        ctx.fail(f"{v.name or 'a parameter'} of shape {list(v.shape)} does not broadcast to the "
                 f"normalized shape {list(norm_shape)}")
    size = (_prod(norm_shape),)
    if _prod(v.shape) == size[0]:
        return E.reshape(v, size)
    return E.contiguous(E.numpy("broadcast_to", v, tuple(norm_shape))).reshape(size)


def _rows(ctx, x, axis):
    """(rows, cols, stat shape) of normalizing x over its axes from `axis` on."""
    axis = _axis(ctx, axis, x.rank)
    stat = x.shape[:axis] + (1,) * (x.rank - axis)
    return _prod(x.shape[:axis]), _prod(x.shape[axis:]), stat, x.shape[axis:]


@register("LayerNormalization", 17)
def LayerNormalization(ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    """Mean and InvStdDev are in X's dtype, as onnx's reference computes them."""
    _floats(ctx, x)
    rows, cols, stat, norm_shape = _rows(ctx, x, axis)
    call = E.lib("normalization", "layer_norm", E.reshape(x, (rows, cols)),
                 _row_param(ctx, scale, x.dtype, norm_shape),
                 _row_param(ctx, bias, x.dtype, norm_shape), E.scalar(epsilon, x.dtype))
    wanted = [name for name in ctx.node.output[1:] if name]
    if not wanted:
        return ctx.call(call[0].reshape(x.shape), x, scale, bias, shape=x.shape, dtype=x.dtype)
    expr = E.lib("normalization", "reshape3", call, x.shape, stat)
    return ctx.call_multi(expr, x, scale, bias,
                          outs=[(x.shape, x.dtype), (stat, x.dtype), (stat, x.dtype)])


@register("RMSNormalization", 23)
def RMSNormalization(ctx, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    _floats(ctx, x)
    rows, cols, _, norm_shape = _rows(ctx, x, axis)
    expr = E.lib("normalization", "rms_norm", E.reshape(x, (rows, cols)),
                 _row_param(ctx, scale, x.dtype, norm_shape), E.scalar(epsilon, x.dtype))
    return ctx.call(expr.reshape(x.shape), x, scale, shape=x.shape, dtype=x.dtype)


def _group_norm(ctx, x, scale, bias, groups, epsilon, per_group_params, spec_var=False):
    """x (N, C, ...) normalized over groups of C / groups channels; scale/bias per channel."""
    _floats(ctx, x, scale, bias)
    if x.rank < 2:
        ctx.fail("the input must have rank >= 2 (N, C, ...)")
    n, c = x.shape[0], x.shape[1]
    if groups <= 0 or c % groups:
        ctx.fail(f"{c} channels cannot be split into {groups} groups")
    want = groups if per_group_params else c
    params = []
    for v in (scale, bias):
        if v.size != want:
            ctx.fail(f"{v.name or 'a parameter'} has {v.size} elements, {want} expected")
        src = E.reshape(v, (want,))
        params.append(E.numpy("repeat", src, c // groups) if per_group_params else src)
    dims = (n * groups, _prod(x.shape) // max(n * groups, 1))
    # GroupNormalization's function body: var = E[x^2] - E[x]^2, overflowing as it does (see
    # kernels/normalization.group_norm); InstanceNormalization's variance is a two-pass one
    big = float(np.finfo(np.float32 if x.dtype.itemsize < 4 else x.dtype).max) if spec_var else 0.0
    expr = E.lib("normalization", "group_norm", E.reshape(x, dims), *params,
                 E.scalar(epsilon, x.dtype), groups, big)
    return ctx.call(expr.reshape(x.shape), x, scale, bias, shape=x.shape, dtype=x.dtype)


@register("InstanceNormalization", 1)
def InstanceNormalization(ctx, x, scale, bias, epsilon=1e-5, consumed_inputs=None):
    return _group_norm(ctx, x, scale, bias, x.shape[1] if x.rank >= 2 else 1, epsilon, False)


@register("GroupNormalization", 18)
def GroupNormalization_18(ctx, x, scale, bias, num_groups, epsilon=1e-5):
    """Opset 18: scale and bias hold one value per group."""
    return _group_norm(ctx, x, scale, bias, num_groups, epsilon, True, True)


@register("GroupNormalization", 21)
def GroupNormalization_21(ctx, x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    """Opset 21: scale and bias hold one value per channel."""
    return _group_norm(ctx, x, scale, bias, num_groups, epsilon, False, True)


@register("MeanVarianceNormalization", 9)
def MeanVarianceNormalization(ctx, x, axes=(0, 2, 3)):
    _floats(ctx, x)
    axes = sorted({_axis(ctx, int(a), x.rank) for a in axes})
    kept = [d for d in range(x.rank) if d not in axes]
    perm = tuple(kept + axes)
    dims = (_prod(x.shape[d] for d in kept), _prod(x.shape[d] for d in axes))
    if perm == tuple(range(x.rank)):
        expr = E.lib("normalization", "mvn", E.reshape(x, dims)).reshape(x.shape)
        return ctx.call(expr, shape=x.shape, dtype=x.dtype)
    moved = tuple(x.shape[d] for d in perm)
    inverse = tuple(int(i) for i in np.argsort(perm))
    rows = E.contiguous(E.node(x).transpose(perm)).reshape(dims)
    expr = E.contiguous(E.lib("normalization", "mvn", rows).reshape(moved).transpose(inverse))
    return ctx.call(expr, shape=x.shape, dtype=x.dtype)
