"""CUDA lowerings of reductions: Reduce*, ArgMax/ArgMin and the global pools, as "reduce" and
"argreduce" steps over an (outer, reduced, inner) view (axes made contiguous by a transpose
first when they are not); the CPU target's epilogues (mean, sqrt, log) stay elementwise."""
from __future__ import annotations

import numpy as np

from ..ops.movement import prod
from ..ops.reduce import KINDS as REDUCE_EPILOGUES, _axes_input, _norm_axes, reduced_shape
from .kernels import reduce as kred
from .ops import cuda_op, floats, one, transpose


# -- reductions ------------------------------------------------------------------------------
REDUCE_OPS = {"ReduceSum": kred.SUM, "ReduceMean": kred.SUM, "ReduceSumSquare": kred.SUM_SQUARE,
              "ReduceL1": kred.SUM_ABS, "ReduceL2": kred.SUM_SQUARE, "ReduceLogSum": kred.SUM,
              "ReduceLogSumExp": kred.LOG_SUM_EXP, "ReduceProd": kred.PROD,
              "ReduceMax": kred.MAX, "ReduceMin": kred.MIN}


def view3(ctx, x, axes):
    """(x or its transpose with `axes` last, (outer, r, inner)) for reducing `axes`."""
    if not axes:
        return x, (x.size, 1, 1)
    red = prod([x.shape[a] for a in axes])
    if axes == list(range(axes[0], axes[-1] + 1)):
        return x, (prod(x.shape[:axes[0]]), red, prod(x.shape[axes[-1] + 1:]))
    kept = [d for d in range(x.rank) if d not in axes]
    return transpose(ctx, x, kept + axes), (prod([x.shape[d] for d in kept]), red, 1)


def identity_of(op, dtype):
    """[start value of a partial result, lowest value, 0] in `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        lo, hi = False, True
    elif dtype.kind in "iu":
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    else:
        lo, hi = -np.inf, np.inf
    start = {kred.MAX: lo, kred.MIN: hi, kred.PROD: 1}.get(op, 0)
    return np.array([start, lo, 0], dtype)


def reduce(ctx, op_type, x, axes, keepdims, noop_with_empty_axes=0):
    if x.dtype == np.bool_ and op_type not in ("ReduceMax", "ReduceMin"):
        ctx.fail("bool input is only supported by ReduceMax and ReduceMin")
    if op_type == "ReduceLogSumExp":
        floats(ctx, x)
    if not axes:
        axes = [] if noop_with_empty_axes else list(range(x.rank))
    axes = _norm_axes(ctx, axes, x.rank)
    op = REDUCE_OPS[op_type]
    src, dims = view3(ctx, x, axes)
    shape = reduced_shape(x.shape, axes, keepdims)
    out = one(ctx, "reduce", src, shape=shape, dtype=x.dtype, dims=dims, op=op,
              identity=identity_of(op, x.dtype))
    epilogue = REDUCE_EPILOGUES[op_type][2]
    if epilogue is not None:
        out = epilogue(ctx, out, prod([x.shape[a] for a in axes]))
    return out


def _register_reduce(op_type, input_since):
    def attr_form(ctx, data, axes=None, keepdims=1):
        return reduce(ctx, op_type, data, list(axes) if axes else None, keepdims)

    def input_form(ctx, data, axes=None, keepdims=1, noop_with_empty_axes=0):
        return reduce(ctx, op_type, data, _axes_input(ctx, axes), keepdims, noop_with_empty_axes)

    attr_form.__name__ = input_form.__name__ = op_type
    cuda_op(op_type, 1)(attr_form)
    cuda_op(op_type, input_since)(input_form)


for _op in REDUCE_OPS:
    _register_reduce(_op, 13 if _op == "ReduceSum" else 18)


def _arg_extreme(ctx, x, axis, keepdims, select_last_index, is_max):
    if x.dtype == np.bool_:
        ctx.fail("ArgMax/ArgMin of bool is not supported on CUDA")
    axis = _norm_axes(ctx, [axis], x.rank)[0]
    shape = reduced_shape(x.shape, [axis], keepdims)
    if x.shape[axis] == 0 and prod(shape) > 0:
        ctx.fail("cannot take the index of an extreme over an empty axis")
    src, dims = view3(ctx, x, [axis])
    return one(ctx, "argreduce", src, shape=shape, dtype=np.int64, dims=dims, is_max=is_max,
               last=bool(select_last_index))


@cuda_op("ArgMax", 1)
def ArgMax(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme(ctx, data, axis, keepdims, select_last_index, True)


@cuda_op("ArgMin", 1)
def ArgMin(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme(ctx, data, axis, keepdims, select_last_index, False)


def _global_pool(ctx, x, op_type):
    floats(ctx, x)
    shape = x.shape[:2] + (1,) * (x.rank - 2)
    src, dims = view3(ctx, x, list(range(2, x.rank)))
    op = kred.MAX if op_type == "GlobalMaxPool" else kred.SUM
    out = one(ctx, "reduce", src, shape=shape, dtype=x.dtype, dims=dims, op=op,
              identity=identity_of(op, x.dtype))
    if op_type == "GlobalAveragePool":
        out = REDUCE_EPILOGUES["ReduceMean"][2](ctx, out, dims[1])
    return out


@cuda_op("GlobalAveragePool", 1)
def GlobalAveragePool(ctx, x):
    return _global_pool(ctx, x, "GlobalAveragePool")


@cuda_op("GlobalMaxPool", 1)
def GlobalMaxPool(ctx, x):
    return _global_pool(ctx, x, "GlobalMaxPool")
