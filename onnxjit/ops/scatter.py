"""Scatter ops (Scatter, ScatterElements, ScatterND, TensorScatter): bounds always checked.

The kernels in `onnxjit.kernels.scatter` copy the data and apply the updates in index order
(so with duplicate indices and no reduction the last update wins, like the reference).
"""
from __future__ import annotations

import numpy as np

from .. import steps as E
from ..registry import register
from .indexing import check_const_indices
from .movement import norm_axis, prod

# The reduction attribute becomes an int code; the string itself never reaches source.
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def reduction_code(ctx, reduction):
    if reduction not in REDUCTIONS:
        ctx.fail(f"unsupported reduction {reduction!r} (expected one of {sorted(REDUCTIONS)})")
    return REDUCTIONS[reduction]


def flat(v, n):
    """v viewed as a flat C array of n elements."""
    return E.contiguous(v).reshape((n,))


def scatter_elements(ctx, data, indices, updates, axis, reduction):
    axis = norm_axis(ctx, axis, data.rank)
    if indices.shape != updates.shape or indices.rank != data.rank or any(
            i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        ctx.fail(f"indices {list(indices.shape)} / updates {list(updates.shape)} do not fit "
                 f"data {list(data.shape)} on axis {axis}")
    check_const_indices(ctx, indices, data.shape[axis])
    n = indices.size
    expr = E.lib("scatter", "scatter_elements", E.contiguous(data), flat(indices, n),
                 flat(updates, n), indices.shape, axis, reduction_code(ctx, reduction))
    return ctx.call(expr, data, indices, updates, shape=data.shape, dtype=data.dtype)


@register("Scatter", 9)
def Scatter(ctx, data, indices, updates, axis=0):
    return scatter_elements(ctx, data, indices, updates, axis, "none")


@register("ScatterElements", 11)
def ScatterElements(ctx, data, indices, updates, axis=0, reduction="none"):
    return scatter_elements(ctx, data, indices, updates, axis, reduction)


@register("ScatterND", 11)
def ScatterND(ctx, data, indices, updates, reduction="none"):
    m = indices.shape[-1] if indices.rank else 0
    if indices.rank < 1 or not 1 <= m <= data.rank or \
            updates.shape != indices.shape[:-1] + data.shape[m:]:
        ctx.fail(f"indices {list(indices.shape)} / updates {list(updates.shape)} do not fit "
                 f"data {list(data.shape)}")
    dims = data.shape[:m]
    inner = prod(data.shape[m:])
    n = prod(indices.shape[:-1])
    expr = E.lib("scatter", "scatter_nd", E.contiguous(data).reshape((prod(dims), inner)),
                 E.contiguous(indices).reshape((n, m)), E.contiguous(updates).reshape((n, inner)),
                 tuple(dims), reduction_code(ctx, reduction))
    return ctx.call(expr.reshape(data.shape), data, indices, updates, shape=data.shape,
                    dtype=data.dtype)


@register("TensorScatter", 24)
def TensorScatter(ctx, past_cache, update, write_indices=None, axis=-2, mode="linear"):
    if mode not in ("linear", "circular"):
        ctx.fail(f"unsupported mode {mode!r} (expected 'linear' or 'circular')")
    axis = norm_axis(ctx, axis, past_cache.rank)
    shape = past_cache.shape
    if axis == 0 or update.rank != past_cache.rank or update.shape[axis] > shape[axis] or any(
            u != p for a, (u, p) in enumerate(zip(update.shape, shape)) if a != axis):
        ctx.fail(f"update {list(update.shape)} does not fit the cache {list(shape)} on axis {axis}")
    nb = shape[0]
    if write_indices is not None and write_indices.shape != (nb,):
        ctx.fail(f"write_indices must have shape [{nb}]")
    rest, inner = prod(shape[1:axis]), prod(shape[axis + 1:])
    p4 = (nb, rest, shape[axis], inner)
    u4 = (nb, rest, update.shape[axis], inner)
    idx = (E.contiguous(write_indices) if write_indices is not None
           else E.numpy("zeros", nb, E.dtype(np.int64)))
    expr = E.lib("scatter", "tensor_scatter", E.contiguous(past_cache).reshape(p4),
                 E.contiguous(update).reshape(u4), idx, mode == "circular")
    return ctx.call(expr.reshape(shape), past_cache, update, write_indices, shape=shape,
                    dtype=past_cache.dtype)
