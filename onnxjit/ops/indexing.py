"""Index-taking ops (Gather, GatherElements, GatherND, OneHot): bounds are always checked.

Constant indices are checked when lowering; run-time indices by the kernels in
`onnxjit.kernels.indexing`, which raise IndexError instead of reading out of range.
"""
from __future__ import annotations

import numpy as np

from .. import steps as E
from ..registry import register
from .movement import as3d, const_ints, norm_axis, prod


def flat(indices, shape):
    """The index array `indices` viewed with the given shape."""
    return E.contiguous(indices).reshape(tuple(shape))


def check_const_indices(ctx, indices, n):
    """Fail at compile time when constant indices leave [-n, n)."""
    if indices.const is not None:
        idx = np.asarray(indices.const)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            ctx.fail(f"index out of range: indices must lie in [{-n}, {n})")


@register("Gather", 1)
def Gather(ctx, data, indices, axis=0):
    axis = norm_axis(ctx, axis, data.rank)
    n = data.shape[axis]
    check_const_indices(ctx, indices, n)
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    if indices.const is not None and indices.rank == 0:
        # One constant index: a basic slice, no kernel.
        k = int(indices.const) % n
        index = (slice(None),) * axis + (k,)
        return ctx.call(E.contiguous(E.node(data)[index]), shape=shape, dtype=data.dtype,
                        view=True)
    expr = E.lib("indexing", "gather", as3d(data, axis), flat(indices, (indices.size,)))
    return ctx.call(expr.reshape(shape), data, indices, shape=shape, dtype=data.dtype)


@register("GatherElements", 11)
def GatherElements(ctx, data, indices, axis=0):
    axis = norm_axis(ctx, axis, data.rank)
    if indices.rank != data.rank or any(
            i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        ctx.fail(f"indices shape {list(indices.shape)} does not fit data {list(data.shape)}")
    check_const_indices(ctx, indices, data.shape[axis])
    src = data
    if any(i != d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        # Indices smaller than data on other axes: read the matching corner of data.
        index = tuple(slice(None) if a == axis else slice(0, i)
                      for a, i in enumerate(indices.shape))
        corner = tuple(data.shape[a] if a == axis else i for a, i in enumerate(indices.shape))
        src = ctx.call(E.contiguous(E.node(data)[index]), shape=corner, dtype=data.dtype,
                       view=True)
    i3 = (prod(indices.shape[:axis]), indices.shape[axis], prod(indices.shape[axis + 1:]))
    expr = E.lib("indexing", "gather_elements", as3d(src, axis), flat(indices, i3))
    return ctx.call(expr.reshape(indices.shape), src, indices, shape=indices.shape,
                    dtype=data.dtype)


@register("GatherND", 11)
def GatherND(ctx, data, indices, batch_dims=0):
    b, m = int(batch_dims), indices.shape[-1] if indices.rank else 0
    if indices.rank < 1 or not 1 <= m <= data.rank - b or data.shape[:b] != indices.shape[:b]:
        ctx.fail(f"indices shape {list(indices.shape)} does not fit data {list(data.shape)} "
                 f"with batch_dims={b}")
    dims = data.shape[b:b + m]
    shape = indices.shape[:-1] + data.shape[b + m:]
    batch = prod(data.shape[:b])
    x3 = (batch, prod(dims), prod(data.shape[b + m:]))
    i3 = (batch, prod(indices.shape[b:-1]), m)
    expr = E.lib("indexing", "gather_nd", E.contiguous(data).reshape(x3), flat(indices, i3),
                 tuple(dims))
    return ctx.call(expr.reshape(shape), data, indices, shape=shape, dtype=data.dtype)


@register("OneHot", 9)
def OneHot(ctx, indices, depth, values, axis=-1):
    depth_values = const_ints(ctx, depth, "depth")   # non-integer depth is cast to int64
    n = depth_values[0] if len(depth_values) == 1 else 0
    if n <= 0 or values.size != 2:
        ctx.fail("depth must be positive and values must hold [off, on]")
    axis = norm_axis(ctx, axis, indices.rank + 1)
    shape = indices.shape[:axis] + (n,) + indices.shape[axis:]
    i2 = (prod(indices.shape[:axis]), prod(indices.shape[axis:]))
    expr = E.lib("indexing", "one_hot", E.contiguous(indices).reshape(i2), n,
                 E.contiguous(values).reshape((2,)))
    return ctx.call(expr.reshape(shape), indices, values, shape=shape, dtype=values.dtype)
