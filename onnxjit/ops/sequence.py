"""Sequences known at compile time: a graph whose sequences are made and read inside it (tensor
inputs and outputs, constant positions and split sizes) holds each sequence as a Python list
of Values while it is specialized, so SequenceAt is the Value itself, ConcatFromSequence a
Concat, SplitToSequence a Split: the whole graph compiles. Anything else (a sequence graph
input or output, a position computed at run time, sequences through If/Loop bodies) is run by
the staged driver, where sequences are Python lists of arrays (staged.py, host_ops.py)."""
from __future__ import annotations

import numpy as np

from ..registry import register
from .movement import Concat, norm_axis, reshape, split_sizes, unsqueeze


class SeqValue:
    """A sequence while the graph is specialized: its items are Values."""
    is_const = False     # never folded by the reference evaluator
    producer = None
    shape = None         # not a tensor (validate.check_outputs skips it)

    def __init__(self, items):
        self.items = list(items)


def _seq(ctx, s):
    if not isinstance(s, SeqValue):
        ctx.data_dependent("the sequence is not known at compile time")
    return s.items


def _position(ctx, pos, n, insert=False):
    p = int(np.asarray(ctx.require_const(pos, "position")).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        ctx.fail(f"position {p} is out of range for a sequence of {n}")
    return p + n if p < 0 else p


@register("SequenceEmpty", 11)
def SequenceEmpty(ctx, dtype=None):
    return SeqValue([])


@register("SequenceConstruct", 11)
def SequenceConstruct(ctx, *xs):
    return SeqValue(xs)


@register("SequenceInsert", 11)
def SequenceInsert(ctx, seq, x, position=None):
    items = list(_seq(ctx, seq))
    if position is None:
        items.append(x)
    else:
        items.insert(_position(ctx, position, len(items), insert=True), x)
    return SeqValue(items)


@register("SequenceAt", 11)
def SequenceAt(ctx, seq, position):
    items = _seq(ctx, seq)
    return items[_position(ctx, position, len(items))]


@register("SequenceErase", 11)
def SequenceErase(ctx, seq, position=None):
    items = list(_seq(ctx, seq))
    if not items:
        ctx.fail("erasing from an empty sequence")
    del items[-1 if position is None else _position(ctx, position, len(items))]
    return SeqValue(items)


@register("SequenceLength", 11)
def SequenceLength(ctx, seq):
    return ctx.constant(np.array(len(_seq(ctx, seq)), np.int64))


@register("SplitToSequence", 11)
def SplitToSequence(ctx, x, split=None, axis=0, keepdims=1):
    axis = norm_axis(ctx, axis, x.rank)
    n = x.shape[axis]
    if split is None:
        sizes = [1] * n
    else:
        value = np.asarray(ctx.require_const(split, "split"))
        if value.ndim == 0:
            size = int(value)
            if size <= 0:
                ctx.fail(f"split size {size} must be positive")
            sizes = [size] * (n // size) + ([n % size] if n % size else [])
        else:
            sizes = [int(s) for s in value.reshape(-1)]
    parts = split_sizes(ctx, x, axis, sizes) if len(sizes) > 1 else [x]
    if split is None and not keepdims:
        parts = [reshape(ctx, p, x.shape[:axis] + x.shape[axis + 1:]) for p in parts]
    return SeqValue(parts)


@register("ConcatFromSequence", 11)
def ConcatFromSequence(ctx, seq, axis=None, new_axis=0):
    items = _seq(ctx, seq)
    if not items:
        ctx.fail("concatenating an empty sequence")
    if new_axis:
        items = [unsqueeze(ctx, v, [axis]) for v in items]
    return Concat(ctx, *items, axis=axis)
