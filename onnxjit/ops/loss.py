"""SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (kernels in kernels/attention.py).

Inputs are viewed as (N, C, D) with the target as (N, D); the kernel checks every target
against [0, C) unless it is the ignore_index.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import NARROW_FLOATS
from .. import steps as E
from ..registry import register

# narrow floats (float16, bfloat16) are held in float32 arrays inside compiled code
FLOATS = (np.dtype(np.float32), np.dtype(np.float64), *NARROW_FLOATS)
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


def _loss(ctx, kernel, x, target, weight, ignore_index, reduction, log_prob):
    """Lower a loss: `kernel` returns the loss (and log_prob when `log_prob`)."""
    if x.dtype not in FLOATS or (weight is not None and weight.dtype != x.dtype):
        ctx.fail(f"input has dtype {x.dtype}; a float type (and a weight of that type) expected")
    if target.dtype.kind not in "iu" or x.rank < 2 or target.shape != x.shape[:1] + x.shape[2:]:
        ctx.fail(f"target {target.shape} {target.dtype} does not fit input {x.shape}")
    if weight is not None and weight.shape != (x.shape[1],):
        ctx.fail(f"weight of shape {weight.shape} expected ({x.shape[1]},)")
    if reduction not in REDUCTIONS:
        ctx.fail(f"unknown reduction {reduction!r}")
    n, c = x.shape[:2]
    d = int(math.prod(x.shape[2:]))
    x3 = ctx.call(E.reshape(x, (n, c, d)), shape=(n, c, d), dtype=x.dtype, view=True)
    t2 = ctx.call(E.reshape(target, (n, d)), shape=(n, d), dtype=target.dtype, view=True)
    red = REDUCTIONS[reduction]
    expr = E.lib("attention", kernel, x3, t2, weight, int(ignore_index or 0),
                 ignore_index is not None, red)
    loss_shape = (n, d) if red == 0 else (1, 1)
    outs = [(loss_shape, x.dtype)] + ([((n, c, d), x.dtype)] if log_prob else [])
    vals = ctx.call_multi(expr, x3, t2, weight, outs=outs) if log_prob else \
        [ctx.call(expr, x3, t2, weight, shape=loss_shape, dtype=x.dtype)]
    final = target.shape if red == 0 else ()
    res = [ctx.call(E.reshape(vals[0], final), shape=final, dtype=x.dtype, view=True)]
    if log_prob:
        res.append(ctx.call(E.reshape(vals[1], x.shape), shape=x.shape, dtype=x.dtype, view=True))
    return res


@register("NegativeLogLikelihoodLoss", since=12)
def NegativeLogLikelihoodLoss(ctx, x, target, weight=None, ignore_index=None,
                              reduction="mean"):
    return _loss(ctx, "nll_loss", x, target, weight, ignore_index, reduction, False)


@register("SoftmaxCrossEntropyLoss", since=12)
def SoftmaxCrossEntropyLoss(ctx, x, target, weight=None, ignore_index=None, reduction="mean"):
    log_prob = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    if log_prob:
        return _loss(ctx, "sce_loss", x, target, weight, ignore_index, reduction, True)
    return _loss(ctx, "sce_loss_only", x, target, weight, ignore_index, reduction, False)
