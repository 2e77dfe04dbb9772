"""Reductions (Reduce*, ArgMax/ArgMin, CumSum): a library kernel over a 3-D view of the input.

The reduced axes become the middle block of an (outer, reduced, inner) view: a free reshape when
they are consecutive, else a transpose moving them to the end (inner = 1). The kernels live in
kernels/reduce.py; what follows a plain sum (mean's division, L2's sqrt, LogSum's log) is an
elementwise epilogue the planner may fuse.
"""
from __future__ import annotations

import math

import numpy as np

from .. import scalar_expr as S
from .. import steps as E
from ..registry import register


def _prod(dims):
    return int(math.prod(dims))


def _norm_axes(ctx, axes, rank):
    """Sorted, non-negative axes; an error naming the bad one. An axis given twice (also as
    -1 and r-1) is refused, as numpy and onnx's reference evaluator do (ONNX says the
    reductions behave like numpy's)."""
    out = set()
    for a in axes:
        a = int(a)
        if not -rank <= a < max(rank, 1):
            ctx.fail(f"axis {a} is out of range for rank {rank}")
        n = a + rank if a < 0 else a
        if n in out:
            shown = [int(v) for v in axes[:8]]
            ctx.fail(f"axes {str(shown)[:-1] + (', ...]' if len(axes) > 8 else ']')} name axis "
                     f"{n} more than once (a "
                     "reduction's axes must be distinct, as numpy's)")
        out.add(n)
    return sorted(out)


def view3(x, axes):
    """An (outer, reduced, inner) view of x."""
    shape, rank = x.shape, x.rank
    if not axes:  # nothing reduced: every element is its own group of one
        return E.reshape(x, (_prod(shape), 1, 1))
    red = _prod(shape[a] for a in axes)
    if axes == list(range(axes[0], axes[-1] + 1)):
        dims = (_prod(shape[:axes[0]]), red, _prod(shape[axes[-1] + 1:]))
        return E.reshape(x, dims)
    kept = [d for d in range(rank) if d not in axes]
    perm, dims = tuple(kept + axes), (_prod(shape[d] for d in kept), red, 1)
    return E.contiguous(E.node(x).transpose(perm)).reshape(dims)


def reduced_shape(shape, axes, keepdims):
    """The output shape of reducing `axes` of `shape`."""
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def _extreme(dtype, lowest):
    """The identity of max (lowest=True) or min over `dtype`: +-inf, the int limits, or a bool."""
    if dtype == np.bool_:
        return not lowest
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min if lowest else info.max)
    return -math.inf if lowest else math.inf


def _mean(ctx, acc, n):
    v = S.operand(0)
    if acc.dtype.kind in "iu":
        return ctx.elementwise(S.lib("scalar", "int_div", v, ctx.scalar(n, acc.dtype)), acc,
                               dtype=acc.dtype)
    return ctx.elementwise(S.paren(v / ctx.scalar(n, acc.dtype)), acc, dtype=acc.dtype)


def _sqrt(ctx, acc, n):
    v = S.operand(0)
    return ctx.elementwise(S.math("sqrt", v) if acc.dtype.kind in "iu" else S.np("sqrt", v),
                           acc, dtype=acc.dtype)


def _log(ctx, acc, n):
    return ctx.elementwise(S.np("log", S.operand(0)), acc, dtype=acc.dtype)


# op type -> (kernel in kernels/reduce.py, extra kernel argument or None, epilogue or None)
KINDS = {
    "ReduceSum": ("reduce_sum", None, None),
    "ReduceMean": ("reduce_sum", None, _mean),
    "ReduceSumSquare": ("reduce_sum_square", None, None),
    "ReduceL1": ("reduce_sum_abs", None, None),
    "ReduceL2": ("reduce_sum_square", None, _sqrt),
    "ReduceLogSum": ("reduce_sum", None, _log),
    "ReduceLogSumExp": ("reduce_log_sum_exp", None, None),
    "ReduceProd": ("reduce_prod", None, None),
    "ReduceMax": ("reduce_max", True, None),
    "ReduceMin": ("reduce_min", False, None),
}


def reduce(ctx, op_type, x, axes, keepdims, noop_with_empty_axes=0):
    """Lower a Reduce* node; `axes` is a list of ints or None (all axes unless noop)."""
    if x.dtype == np.bool_ and op_type not in ("ReduceMax", "ReduceMin"):
        ctx.fail("bool input is only supported by ReduceMax and ReduceMin")
    if not axes:
        axes = [] if noop_with_empty_axes else list(range(x.rank))
    axes = _norm_axes(ctx, axes, x.rank)
    kernel, lowest, epilogue = KINDS[op_type]
    args = [view3(x, axes)]
    if lowest is not None:
        args.append(E.scalar(_extreme(x.dtype, lowest), x.dtype))
    shape = reduced_shape(x.shape, axes, keepdims)
    out = ctx.call(E.lib("reduce", kernel, *args).reshape(shape), shape=shape, dtype=x.dtype)
    if epilogue is not None:
        out = epilogue(ctx, out, _prod(x.shape[a] for a in axes))
    return out


def _axes_input(ctx, axes):
    """The axes input's values (None when absent); it must be known at compile time."""
    if axes is None or axes.size == 0:  # an empty axes tensor has no value to wait for
        return None
    return [int(a) for a in np.asarray(ctx.require_const(axes, "axes")).ravel()]


def _register_reduce(op_type, input_since):
    """Register `op_type` with axes as an attribute (opset 1) and as an input (`input_since`)."""
    def attr_form(ctx, data, axes=None, keepdims=1):
        return reduce(ctx, op_type, data, list(axes) if axes else None, keepdims)

    def input_form(ctx, data, axes=None, keepdims=1, noop_with_empty_axes=0):
        return reduce(ctx, op_type, data, _axes_input(ctx, axes), keepdims, noop_with_empty_axes)

    attr_form.__name__ = input_form.__name__ = op_type
    register(op_type, 1)(attr_form)
    register(op_type, input_since)(input_form)


for _op in KINDS:
    _register_reduce(_op, 13 if _op == "ReduceSum" else 18)


def _arg_extreme(kernel, ctx, x, axis, keepdims, select_last_index):
    axis = _norm_axes(ctx, [axis], x.rank)[0]
    shape = reduced_shape(x.shape, [axis], keepdims)
    if x.shape[axis] == 0 and _prod(shape) > 0:
        ctx.fail("cannot take the index of an extreme over an empty axis")
    expr = E.lib("reduce", kernel, view3(x, [axis]), bool(select_last_index)).reshape(shape)
    return ctx.call(expr, shape=shape, dtype=np.int64)


@register("ArgMax", 1)
def ArgMax(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme("argmax", ctx, data, axis, keepdims, select_last_index)


@register("ArgMin", 1)
def ArgMin(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme("argmin", ctx, data, axis, keepdims, select_last_index)


@register("CumSum", 11)
def CumSum(ctx, x, axis, exclusive=0, reverse=0):
    """The axis may be a runtime value: the output shape does not depend on it."""
    expr = E.lib("reduce", "cumulative", x, axis, bool(exclusive), bool(reverse), False)
    return ctx.call(expr, x, axis, shape=x.shape, dtype=x.dtype)
