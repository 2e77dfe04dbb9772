"""Control flow on tensors, resolved at compile time: the branch or trip count must be known
(a constant, or computed from small graph inputs, which the backend then specializes on)."""
from __future__ import annotations

import numpy as np

from .. import steps as E
from ..registry import register

MAX_UNROLLED_ITERATIONS = 64


@register("If", 1)
def If(ctx, cond, then_branch, else_branch):
    """The taken branch, lowered inline (the other one is never compiled)."""
    taken = bool(np.asarray(ctx.require_const(cond, "condition")).reshape(-1)[0])
    return ctx.inline_graph(then_branch if taken else else_branch)


@register("Loop", 1)
def Loop(ctx, trip_count, cond, *initial, body):
    """The body unrolled: trip count and loop condition must be known at compile time."""
    count = None if trip_count is None else int(np.asarray(ctx.require_const(trip_count, "M")))
    keep_going = True if cond is None else bool(np.asarray(ctx.require_const(cond, "cond")))
    carried, scans, i = list(initial), [], 0
    while keep_going and (count is None or i < count):
        if i >= MAX_UNROLLED_ITERATIONS:
            ctx.fail(f"more than {MAX_UNROLLED_ITERATIONS} iterations cannot be unrolled")
        outs = ctx.inline_graph(body, [ctx.constant(np.array(i, np.int64)),
                                       ctx.constant(np.array(keep_going))] + carried)
        keep_going = bool(np.asarray(ctx.require_const(outs[0], "loop condition output")))
        carried, i = outs[1:1 + len(carried)], i + 1
        scans.append(outs[1 + len(carried):])
    n_scan = len(body.output) - 1 - len(initial)
    return carried + [_stack(ctx, [s[k] for s in scans], body, k) for k in range(n_scan)]


def _stack(ctx, values, body, k):
    if not values:
        ctx.fail("a Loop with zero iterations has scan outputs of unknown shape")
    shape = (len(values),) + values[0].shape
    if any(v.shape != values[0].shape for v in values):
        ctx.fail("scan outputs change shape between iterations")
    rows = E.tuple_of(*(E.contiguous(v).reshape((1,) + v.shape) for v in values),
                      trailing_comma=True)
    return ctx.call(E.numpy("concatenate", rows, axis=0), *values, shape=shape,
                    dtype=values[0].dtype)
