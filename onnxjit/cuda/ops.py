"""CUDA lowerings of the ops whose CPU lowering calls a library kernel: each returns structured
steps (`meta["cuda"]` names the kernel family, the other meta entries are its plain-number or
numpy parameters) that cuda/launch.py turns into kernel launches. Elementwise ops are not here:
their shared lowerings (ops/elementwise.py) fuse into generated CUDA kernels.

Registered like onnxjit's own lowerings: the op type, the first opset, ONNX's attribute names
and defaults as keyword arguments.
"""
from __future__ import annotations

import numpy as np

from ..ops.movement import const_ints, even_split, norm_axis, pad_map, prod, reshape_target
from .. import scalar_expr as S
from ..steps import OPAQUE

_RULES: dict[str, list] = {}


def cuda_op(op_type, since=1):
    """Decorator: register a CUDA lowering of `op_type` from opset `since` on."""
    def wrap(fn):
        _RULES.setdefault(op_type, []).append((since, fn))
        _RULES[op_type].sort(key=lambda v: v[0])
        return fn
    return wrap


def lookup(op_type, opset):
    """The CUDA lowering for the largest `since` <= opset, or None."""
    chosen = None
    for since, fn in _RULES.get(op_type, []):
        if opset is None or since <= opset:
            chosen = fn
    return chosen


def lowered_ops():
    return set(_RULES)


def step(ctx, kind, *inputs, outs, view=False, **params):
    """Values made by one CUDA step of family `kind` (see cuda/launch.py)."""
    return ctx.record(OPAQUE, *inputs, outs=outs, meta={"cuda": kind, **params}, view=view)


def one(ctx, kind, *inputs, shape, dtype, **params):
    return step(ctx, kind, *inputs, outs=[(shape, dtype)], **params)[0]


def floats(ctx, *values):
    for v in values:
        if v is not None and v.dtype not in (np.float32, np.float64):
            ctx.fail(f"the CUDA target computes this op in float32/float64, not {v.dtype}")


def row_major(dims):
    """Element strides of a C-contiguous array of shape `dims`."""
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


# -- views and index-mapping copies ----------------------------------------------------------------
def view(ctx, x, shape):
    """x under another shape: the same flat device buffer, no launch."""
    shape = tuple(int(d) for d in shape)
    if prod(shape) != x.size:
        ctx.fail(f"cannot reshape {list(x.shape)} into {list(shape)}")
    if shape == x.shape:
        return x
    return step(ctx, "view", x, outs=[(shape, x.dtype)], view=True)[0]


def strided(ctx, x, shape, dims, sstride, soff=0):
    """A contiguous `shape` whose elements, in the row-major order of the iteration shape
    `dims`, are x's flat elements at soff + sum(q_k * sstride[k])."""
    if prod(dims) != prod(shape) or len(dims) != len(sstride):
        raise AssertionError("strided copy: iteration and output shapes disagree")
    return one(ctx, "strided", x, shape=tuple(shape), dtype=x.dtype,
               dims=np.array(dims or [1], np.int64), sstride=np.array(sstride or [0], np.int64),
               soff=int(soff))


@cuda_op("Reshape", 1)
def Reshape_1(ctx, x, shape=(), consumed_inputs=None):
    return view(ctx, x, reshape_target(ctx, x, [int(d) for d in shape], 0))


@cuda_op("Reshape", 5)
def Reshape(ctx, x, shape, allowzero=0):
    return view(ctx, x, reshape_target(ctx, x, const_ints(ctx, shape, "shape"), allowzero))


@cuda_op("Flatten", 1)
def Flatten(ctx, x, axis=1):
    axis = axis + x.rank if axis < 0 else axis
    if not 0 <= axis <= x.rank:
        ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    return view(ctx, x, (prod(x.shape[:axis]), prod(x.shape[axis:])))


def _squeeze(ctx, x, axes):
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = {norm_axis(ctx, a, x.rank) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        ctx.fail(f"cannot squeeze axes {sorted(axes)} of shape {list(x.shape)}")
    return view(ctx, x, [d for i, d in enumerate(x.shape) if i not in axes])


@cuda_op("Squeeze", 1)
def Squeeze_1(ctx, x, axes=None):
    return _squeeze(ctx, x, axes)


@cuda_op("Squeeze", 13)
def Squeeze(ctx, x, axes=None):
    return _squeeze(ctx, x, None if axes is None else const_ints(ctx, axes, "axes"))


def _unsqueeze(ctx, x, axes):
    rank = x.rank + len(axes)
    axes = [norm_axis(ctx, a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        ctx.fail(f"repeated axes {axes}")
    dims = iter(x.shape)
    return view(ctx, x, [1 if i in axes else next(dims) for i in range(rank)])


@cuda_op("Unsqueeze", 1)
def Unsqueeze_1(ctx, x, axes=()):
    return _unsqueeze(ctx, x, list(axes))


@cuda_op("Unsqueeze", 13)
def Unsqueeze(ctx, x, axes):
    return _unsqueeze(ctx, x, const_ints(ctx, axes, "axes"))


def transpose(ctx, x, perm):
    shape = tuple(x.shape[p] for p in perm)
    if [p for p in perm if x.shape[p] != 1] == [a for a in range(x.rank) if x.shape[a] != 1]:
        return view(ctx, x, shape)
    strides = row_major(x.shape)
    return strided(ctx, x, shape, shape, [strides[p] for p in perm])


@cuda_op("Transpose", 1)
def Transpose(ctx, x, perm=None):
    perm = list(range(x.rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.rank)):
        ctx.fail(f"perm {perm} is not a permutation of {x.rank} axes")
    return transpose(ctx, x, perm)


def _slice(ctx, x, starts, ends, axes, steps):
    axes = list(range(len(starts))) if axes is None else [norm_axis(ctx, a, x.rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        ctx.fail("starts, ends, axes and steps differ in length or repeat an axis")
    shape, strides = list(x.shape), row_major(x.shape)
    sstride, soff = list(strides), 0
    for a, b, e, s in zip(axes, starts, ends, steps):
        if s == 0:
            ctx.fail("slice step cannot be 0")
        start, stop, step_ = slice(b, e, s).indices(x.shape[a])
        shape[a] = len(range(start, stop, step_))
        soff += start * strides[a] if shape[a] else 0
        sstride[a] = strides[a] * step_
    if tuple(shape) == x.shape and soff == 0 and sstride == strides:
        return x
    return strided(ctx, x, shape, shape, sstride, soff)


@cuda_op("Slice", 1)
def Slice_1(ctx, x, starts, ends, axes=None):
    return _slice(ctx, x, list(starts), list(ends), axes, None)


@cuda_op("Slice", 10)
def Slice(ctx, x, starts, ends, axes=None, steps=None):
    return _slice(ctx, x, const_ints(ctx, starts, "starts"), const_ints(ctx, ends, "ends"),
                  None if axes is None else const_ints(ctx, axes, "axes"),
                  None if steps is None else const_ints(ctx, steps, "steps"))


def broadcast_to(ctx, x, shape):
    """x broadcast to `shape` (numpy rules), copied contiguous."""
    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return x
    padded = (1,) * (len(shape) - x.rank) + x.shape
    strides = row_major(padded)
    return strided(ctx, x, shape, shape, [0 if d == 1 and n != 1 else s
                                          for d, n, s in zip(padded, shape, strides)])


@cuda_op("Expand", 8)
def Expand(ctx, x, shape):
    dims = const_ints(ctx, shape, "shape")
    try:
        out = np.broadcast_shapes(x.shape, tuple(dims))
    except ValueError:
        ctx.fail(f"shape {list(x.shape)} cannot expand to {dims}")
    return broadcast_to(ctx, x, out)


@cuda_op("Tile", 6)
def Tile(ctx, x, repeats):
    reps = const_ints(ctx, repeats, "repeats")
    if len(reps) != x.rank or any(r < 0 for r in reps):
        ctx.fail(f"repeats {reps} do not fit rank {x.rank}")
    if all(r == 1 for r in reps):
        return x
    strides = row_major(x.shape)
    dims = [v for r, d in zip(reps, x.shape) for v in (r, d)]
    sstride = [v for s in strides for v in (0, s)]
    return strided(ctx, x, [r * d for r, d in zip(reps, x.shape)], dims, sstride)


@cuda_op("Concat", 1)
def Concat(ctx, *xs, axis=1):
    xs = [x for x in xs if x is not None]
    axis = norm_axis(ctx, axis, xs[0].rank)
    rest = [x.shape[:axis] + x.shape[axis + 1:] for x in xs]
    if any(r != rest[0] for r in rest) or any(x.dtype != xs[0].dtype for x in xs):
        ctx.fail(f"inputs {[list(x.shape) for x in xs]} do not concatenate on axis {axis}")
    if len(xs) == 1:
        return xs[0]
    shape = xs[0].shape[:axis] + (sum(x.shape[axis] for x in xs),) + xs[0].shape[axis + 1:]
    return one(ctx, "concat", *xs, shape=shape, dtype=xs[0].dtype, outer=prod(shape[:axis]),
               inner=prod(shape[axis + 1:]), sizes=[x.shape[axis] for x in xs])


def _split(ctx, x, axis, sizes):
    sizes = [int(s) for s in sizes]
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        ctx.fail(f"split sizes {sizes} do not add up to dimension {x.shape[axis]}")
    outs, at = [], 0
    for s in sizes:
        outs.append(_slice(ctx, x, [at], [at + s], [axis], None))
        at += s
    return outs


@cuda_op("Split", 2)
def Split_2(ctx, x, axis=0, split=None):
    axis = norm_axis(ctx, axis, x.rank)
    if split is None:
        split = even_split(ctx, x.shape[axis], len(ctx.node.output), True)
    return _split(ctx, x, axis, split)


@cuda_op("Split", 13)
def Split_13(ctx, x, split=None, axis=0, num_outputs=None):
    axis = norm_axis(ctx, axis, x.rank)
    if split is not None:
        return _split(ctx, x, axis, const_ints(ctx, split, "split"))
    n = len(ctx.node.output) if num_outputs is None else int(num_outputs)
    return _split(ctx, x, axis, even_split(ctx, x.shape[axis], n, num_outputs is None))


@cuda_op("Gather", 1)
def Gather(ctx, data, indices, axis=0):
    axis = norm_axis(ctx, axis, data.rank)
    n = data.shape[axis]
    if indices.dtype.kind not in "iu":
        ctx.fail(f"indices must be integers, not {indices.dtype}")
    if indices.const is not None:
        idx = np.asarray(indices.const)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            ctx.fail(f"index out of range: indices must lie in [{-n}, {n})")
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    if indices.dtype != np.int64:
        indices = ctx.elementwise(S.operand(0), indices, dtype=np.int64)
    return one(ctx, "gather", data, indices, shape=shape, dtype=data.dtype, axis_len=n,
               inner=prod(data.shape[axis + 1:]))


def _pad(ctx, x, pads, mode, value, axes=None):
    """Every output index mapped, per axis, to a source index or -1 (the constant)."""
    axes = list(range(x.rank)) if axes is None else [norm_axis(ctx, a, x.rank) for a in axes]
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} do not fit {len(axes)} axes")
    begin, end = [0] * x.rank, [0] * x.rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + len(axes)]
    maps = [pad_map(ctx, n, b, e, mode) for n, b, e in zip(x.shape, begin, end)]
    shape = tuple(len(m) for m in maps)
    if shape == x.shape and not any(begin):
        return x
    return one(ctx, "pad", x, shape=shape, dtype=x.dtype, value=np.array([value], x.dtype),
               maps=np.concatenate(maps + [np.zeros(1, np.int64)]).astype(np.int64),
               map_start=np.cumsum([0] + [len(m) for m in maps])[:-1].astype(np.int64),
               sstride=np.array(row_major(x.shape) or [0], np.int64))


@cuda_op("Pad", 2)
def Pad_2(ctx, x, pads, mode="constant", value=0.0):
    return _pad(ctx, x, [int(p) for p in pads], mode, value)


@cuda_op("Pad", 11)
def Pad(ctx, x, pads, constant_value=None, axes=None, mode="constant"):
    value = 0 if constant_value is None else np.asarray(
        ctx.require_const(constant_value, "constant_value")).reshape(-1)[0]
    return _pad(ctx, x, const_ints(ctx, pads, "pads"), mode, value,
                None if axes is None else const_ints(ctx, axes, "axes"))
