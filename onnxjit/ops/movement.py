"""Movement and shape ops: reshapes, transposes, slices, concatenation, padding, tiling.

Shapes are concrete when these lower, so each becomes one numpy expression with literal tuples;
shape-like inputs (Reshape's shape, Slice's starts, Pad's pads ...) must be compile-time constants.
"""
from __future__ import annotations

import numpy as np

from .. import scalar_expr as S
from .. import steps as E
from ..ir import compute_dtype, tensor_dtype
from ..kernels.movement import TRANSPOSE_RANK
from ..registry import register


# -- helpers -------------------------------------------------------------------------------------
def const_ints(ctx, v, what):
    """The int values of a constant input as a list, or a clear failure when it is computed at run time."""
    return [int(i) for i in np.asarray(ctx.require_const(v, what)).reshape(-1)]


def norm_axis(ctx, axis, rank):
    """axis in [-rank, rank) made non-negative, or a clear failure."""
    axis = int(axis)
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def prod(dims):
    return int(np.prod(dims, dtype=np.int64))


def reshape(ctx, x, shape):
    """x reshaped to `shape` (aliasing x when the shape does not change)."""
    shape = tuple(int(d) for d in shape)
    if prod(shape) != x.size:
        ctx.fail(f"cannot reshape {list(x.shape)} into {list(shape)}")
    if shape == x.shape:
        return x
    return ctx.call(E.contiguous(x).reshape(shape), shape=shape, dtype=x.dtype, view=True)


def as3d(x, axis):
    """x viewed as (outer, x.shape[axis], inner)."""
    shape3 = (prod(x.shape[:axis]), x.shape[axis], prod(x.shape[axis + 1:]))
    return E.contiguous(x).reshape(shape3)


def take_axis(ctx, x, axis, src, fill=None):
    """x with axis `axis` replaced by x[..., src[j], ...], via the kernel.

    Where src[j] < 0 the output holds `fill`: a Value (a run-time scalar) or a scalar
    (steps.scalar).
    """
    src = np.asarray(src, np.int64)
    shape = x.shape[:axis] + (len(src),) + x.shape[axis + 1:]
    if fill is None:
        fill = E.scalar(0, x.dtype)
    elif not isinstance(fill, E.Expr):
        fill = E.item(fill)
    expr = E.lib("movement", "take_axis", as3d(x, axis), ctx.constant(src), fill).reshape(shape)
    return ctx.call(expr, shape=shape, dtype=x.dtype)


# -- constants and shape queries -----------------------------------------------------------------
@register("Constant", 1)
def Constant(ctx, value=None, value_float=None, value_floats=None, value_int=None,
             value_ints=None, sparse_value=None, value_string=None, value_strings=None):
    """A folded Value (normally folded before lowering; this accepts the node)."""
    for array, dtype in ((value, None), (value_float, np.float32), (value_floats, np.float32),
                         (value_int, np.int64), (value_ints, np.int64)):
        if array is not None:
            return ctx.constant(np.asarray(array, dtype))
    ctx.fail("only numeric dense constants (value, value_float(s), value_int(s)) are supported")


@register("ConstantOfShape", 9)
def ConstantOfShape(ctx, shape, value=None):
    dims = tuple(const_ints(ctx, shape, "shape"))
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return ctx.call(E.numpy("full", dims, E.scalar(fill[0], fill.dtype)),
                    shape=dims, dtype=fill.dtype)


@register("Shape", 1)
def Shape(ctx, x, start=0, end=None):
    return ctx.constant(np.array(x.shape[start:end], np.int64))


@register("Size", 1)
def Size(ctx, x):
    return ctx.constant(np.array(x.size, np.int64))


@register("EyeLike", 9)
def EyeLike(ctx, x, dtype=None, k=0):
    out = x.dtype if dtype is None else tensor_dtype(dtype)
    if out is None or x.rank != 2:
        ctx.fail("EyeLike needs a 2-D input and a numeric dtype")
    return ctx.constant(np.eye(x.shape[0], x.shape[1], int(k), dtype=out))


# -- identity-like -------------------------------------------------------------------------------
@register("Identity", 1)
def Identity(ctx, x):
    return x


# Optionals of tensors are resolved at compile time: a present input is its tensor, an omitted
# one is empty.  An optional-typed graph input is compiled as present: None for it at run time
# is refused with an InputError, like any missing input.
@register("OptionalHasElement", 15)
def OptionalHasElement(ctx, x=None):
    return ctx.constant(np.array(x is not None))


@register("OptionalGetElement", 15)
def OptionalGetElement(ctx, x=None):
    if x is None:
        ctx.fail("OptionalGetElement of an empty optional")
    return x


@register("Dropout", 1)
def Dropout(ctx, x, ratio=None, training_mode=None, is_test=0, consumed_inputs=None, seed=None):
    """Inference: output = input, mask all True. Training mode (a constant or run-time flag)
    drops elements with a uniform draw, seeded by `seed` when given (numpy's RandomState
    sequence, as onnx's reference draws it)."""
    want_mask = len(ctx.node.output) >= 2 and bool(ctx.node.output[1])
    mask_dtype = np.bool_ if ctx.opset >= 10 else x.dtype
    training = training_mode is not None and (training_mode.const is None
                                              or bool(training_mode.const))
    if training and ratio is not None and ratio.const is not None and float(ratio.const) == 0:
        training = False
    if training:
        if compute_dtype(x.dtype).kind != "f":
            ctx.fail(f"training mode needs a float input, got {x.dtype}")
        flag = True if training_mode.const is not None else E.item(training_mode)
        r = 0.5 if ratio is None else E.item(ratio)
        if seed is not None and not 0 <= int(seed) < 2 ** 32:
            ctx.fail(f"seed {seed} is outside [0, 2**32)")
        expr = E.lib("random", "dropout", x, flag, r, int(seed or 0), seed is not None)
        y, mask = ctx.call_multi(expr, x, training_mode, ratio,
                                 outs=[(x.shape, x.dtype), (x.shape, np.bool_)])
        return [y, mask] if want_mask else y
    if not want_mask:
        return x
    mask = ctx.call(E.numpy("ones", x.shape, E.dtype(mask_dtype)), shape=x.shape, dtype=mask_dtype)
    return [x, mask]


# -- reshapes ------------------------------------------------------------------------------------
def reshape_target(ctx, x, dims, allowzero):
    """ONNX Reshape's output shape: 0 copies the input dim (unless allowzero), -1 is inferred."""
    if not allowzero and any(d == 0 and i >= x.rank for i, d in enumerate(dims)):
        ctx.fail(f"target shape {dims} copies (0) a dimension the rank-{x.rank} input lacks")
    out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        ctx.fail(f"invalid target shape {dims}")
    if -1 in out:
        known = prod([d for d in out if d != -1])
        if known == 0 or x.size % known:
            ctx.fail(f"cannot infer -1 in {dims} for input shape {list(x.shape)}")
        out[out.index(-1)] = x.size // known
    return out


@register("Reshape", 1)
def Reshape_1(ctx, x, shape=(), consumed_inputs=None):
    return reshape(ctx, x, reshape_target(ctx, x, [int(d) for d in shape], 0))


@register("Reshape", 5)
def Reshape(ctx, x, shape, allowzero=0):
    return reshape(ctx, x, reshape_target(ctx, x, const_ints(ctx, shape, "shape"), allowzero))


@register("Flatten", 1)
def Flatten(ctx, x, axis=1):
    axis = axis + x.rank if axis < 0 else axis
    if not 0 <= axis <= x.rank:
        ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    return reshape(ctx, x, (prod(x.shape[:axis]), prod(x.shape[axis:])))


def squeeze(ctx, x, axes):
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = {norm_axis(ctx, a, x.rank) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        ctx.fail(f"cannot squeeze axes {sorted(axes)} of shape {list(x.shape)}")
    return reshape(ctx, x, [d for i, d in enumerate(x.shape) if i not in axes])


@register("Squeeze", 1)
def Squeeze_1(ctx, x, axes=None):
    return squeeze(ctx, x, axes)


@register("Squeeze", 13)
def Squeeze(ctx, x, axes=None):
    return squeeze(ctx, x, None if axes is None else const_ints(ctx, axes, "axes"))


def unsqueeze(ctx, x, axes):
    rank = x.rank + len(axes)
    axes = [norm_axis(ctx, a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        ctx.fail(f"repeated axes {axes}")
    dims = iter(x.shape)
    return reshape(ctx, x, [1 if i in axes else next(dims) for i in range(rank)])


@register("Unsqueeze", 1)
def Unsqueeze_1(ctx, x, axes=()):
    return unsqueeze(ctx, x, list(axes))


@register("Unsqueeze", 13)
def Unsqueeze(ctx, x, axes):
    return unsqueeze(ctx, x, const_ints(ctx, axes, "axes"))


# -- transposes ----------------------------------------------------------------------------------
def transpose(ctx, x, perm):
    """x with its axes permuted: a reshape when the permutation only moves size-1 axes, else
    one call of kernels/movement.transpose on the merged axes, padded to its canonical rank
    (`canonical_transpose`).  The step's meta records the permutation (ops/nn.py lets a MatMul
    read a transposed operand in place)."""
    shape = tuple(x.shape[p] for p in perm)
    if list(perm) == list(range(x.rank)):
        return x
    meta = {"kind": "transpose", "perm": tuple(perm)}
    merged, mperm = merged_transpose(x.shape, perm)
    if mperm == tuple(range(len(mperm))):
        return ctx.call(E.contiguous(x).reshape(shape), shape=shape, dtype=x.dtype, view=True,
                        meta=meta)
    merged, mperm = canonical_transpose(merged, mperm)
    return ctx.kernel(("movement", "transpose"), x, merged, mperm, shape, shape=shape,
                      dtype=x.dtype, meta=meta)


def canonical_transpose(shape, perm, rank=TRANSPOSE_RANK):
    """(shape, perm) padded with leading size-1 axes to `rank` (or left as they are when
    longer): kernels/movement.transpose then compiles once per dtype and input rank, not once
    more per merged rank: (4, 28, 3136) by (1, 0, 2) is (1, 4, 28, 3136) by (0, 2, 1, 3)."""
    pad = max(0, rank - len(shape))
    return (1,) * pad + tuple(shape), tuple(range(pad)) + tuple(p + pad for p in perm)


def merged_transpose(shape, perm):
    """(shape, perm) of the same transpose with size-1 axes dropped and axes that stay
    adjacent merged: (1, 4, 28, 56, 56) by (0, 2, 1, 3, 4) is (4, 28, 3136) by (1, 0, 2)."""
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    if not kept:
        return (1,), (0,)
    position = {a: i for i, a in enumerate(kept)}
    order = [position[p] for p in perm if shape[p] != 1]   # output order, in kept positions
    groups = [[order[0]]]
    for axis in order[1:]:
        if axis == groups[-1][-1] + 1:
            groups[-1].append(axis)
        else:
            groups.append([axis])
    by_input = sorted(range(len(groups)), key=lambda g: groups[g][0])
    merged = tuple(int(np.prod([shape[kept[a]] for a in groups[g]])) for g in by_input)
    rank_of = {g: i for i, g in enumerate(by_input)}
    return merged, tuple(rank_of[g] for g in range(len(groups)))


@register("Transpose", 1)
def Transpose(ctx, x, perm=None):
    perm = list(range(x.rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.rank)):
        ctx.fail(f"perm {perm} is not a permutation of {x.rank} axes")
    return transpose(ctx, x, perm)


def block_shuffle(ctx, x, shape6, perm, out):
    """reshape(shape6) -> transpose(perm) -> reshape(out), one expression."""
    shuffled = E.numpy("transpose", E.contiguous(x).reshape(shape6), perm)
    return ctx.call(E.contiguous(shuffled).reshape(out), shape=out, dtype=x.dtype)


@register("DepthToSpace", 1)
def DepthToSpace(ctx, x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = int(blocksize)
    if x.rank != 4 or b <= 0 or c % (b * b):
        ctx.fail(f"input shape {list(x.shape)} does not fit blocksize {b}")
    out = (n, c // (b * b), h * b, w * b)
    if mode == "DCR":
        return block_shuffle(ctx, x, (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2), out)
    if mode == "CRD":
        return block_shuffle(ctx, x, (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3), out)
    ctx.fail("mode must be DCR or CRD")


@register("SpaceToDepth", 1)
def SpaceToDepth(ctx, x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = int(blocksize)
    if x.rank != 4 or b <= 0 or h % b or w % b:
        ctx.fail(f"input shape {list(x.shape)} does not fit blocksize {b}")
    perms = {"DCR": (0, 3, 5, 1, 2, 4), "CRD": (0, 1, 3, 5, 2, 4)}
    if mode not in perms:
        ctx.fail("mode must be DCR or CRD")
    return block_shuffle(ctx, x, (n, c, h // b, b, w // b, b), perms[mode],
                         (n, c * b * b, h // b, w // b))


# -- concatenation and splitting -----------------------------------------------------------------
@register("Concat", 1)
def Concat(ctx, *xs, axis=1):
    xs = [x for x in xs if x is not None]
    axis = norm_axis(ctx, axis, xs[0].rank)
    rest = [x.shape[:axis] + x.shape[axis + 1:] for x in xs]
    if any(r != rest[0] for r in rest) or any(x.dtype != xs[0].dtype for x in xs):
        ctx.fail(f"inputs {[list(x.shape) for x in xs]} do not concatenate on axis {axis}")
    if len(xs) == 1:
        return xs[0]
    shape = xs[0].shape[:axis] + (sum(x.shape[axis] for x in xs),) + xs[0].shape[axis + 1:]
    if np.dtype(xs[0].dtype).kind in "biufc":
        # onnxjit's copy (threads share large outputs) of each input as its C-contiguous
        # (outer, width) view, a free reshape: the kernel's types do not depend on the rank
        outer = prod(shape[:axis])
        parts = E.tuple_of(*(E.contiguous(x).reshape((outer, prod(x.shape[axis:]))) for x in xs),
                           trailing_comma=True)
        return ctx.call(E.lib("movement", "concat", parts).reshape(shape), *xs,
                        shape=shape, dtype=xs[0].dtype)
    return ctx.call(E.numpy("concatenate", tuple(xs), axis=axis), *xs,
                    shape=shape, dtype=xs[0].dtype)


def axis_slice(axis, start, stop):
    """The index `[:, ..., start:stop]` selecting a range on one axis."""
    return (slice(None),) * axis + (slice(start, stop),)


def split_sizes(ctx, x, axis, sizes):
    """x cut along `axis` into pieces of the given sizes (one call, a tuple of copies)."""
    sizes = [int(s) for s in sizes]
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        ctx.fail(f"split sizes {sizes} do not add up to dimension {x.shape[axis]}")
    parts, outs, at = [], [], 0
    for s in sizes:
        parts.append(E.contiguous(E.node(x)[axis_slice(axis, at, at + s)]))
        outs.append((x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype))
        at += s
    return ctx.call_multi(E.tuple_of(*parts, trailing_comma=True), outs=outs, view=True)


def even_split(ctx, dim, n, exact):
    """ONNX's sizes for n outputs: ceil(dim / n) each, the last one smaller unless `exact`."""
    if n <= 0:
        ctx.fail("the number of outputs must be positive")
    if exact and dim % n:
        ctx.fail(f"dimension {dim} does not split into {n} equal parts")
    size = -(-dim // n)
    sizes = [min(size, max(dim - i * size, 0)) for i in range(n)]
    if sum(sizes) != dim or sizes[-1] == 0 and dim:
        ctx.fail(f"cannot split dimension {dim} into {n} outputs")
    return sizes


@register("Split", 1)
def Split_1(ctx, x, split_input=None, axis=0, split=None):
    if split_input is not None:
        split = const_ints(ctx, split_input, "split")
    return Split_2(ctx, x, axis=axis, split=split)


@register("Split", 2)
def Split_2(ctx, x, axis=0, split=None):
    axis = norm_axis(ctx, axis, x.rank)
    if split is None:
        split = even_split(ctx, x.shape[axis], len(ctx.node.output), True)
    return split_sizes(ctx, x, axis, split)


@register("Split", 13)
def Split_13(ctx, x, split=None, axis=0, num_outputs=None):
    axis = norm_axis(ctx, axis, x.rank)
    if split is not None:
        return split_sizes(ctx, x, axis, const_ints(ctx, split, "split"))
    n = len(ctx.node.output) if num_outputs is None else int(num_outputs)
    return split_sizes(ctx, x, axis, even_split(ctx, x.shape[axis], n, num_outputs is None))


# -- slicing -------------------------------------------------------------------------------------
def slice_values(ctx, x, starts, ends, axes, steps):
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail("starts, ends, axes and steps differ in length")
    index, shape, identity = [slice(None)] * x.rank, list(x.shape), True
    axes = [norm_axis(ctx, a, x.rank) for a in axes]
    if len(set(axes)) != len(axes):
        ctx.fail(f"repeated axes {axes}")
    for a, b, e, s in zip(axes, starts, ends, steps):
        if s == 0:
            ctx.fail("slice step cannot be 0")
        start, stop, step = slice(b, e, s).indices(x.shape[a])
        shape[a] = len(range(start, stop, step))
        identity &= (start, stop, step) == (0, x.shape[a], 1)
        # slice.indices gives -1 for "before index 0" (a stop, or a start clamped for a negative
        # step, whose range is then empty); in a slice -1 means the last element.
        if shape[a] == 0:
            index[a] = slice(0, 0)
        else:
            index[a] = slice(start, stop if stop >= 0 else E.NONE, step)
    if identity:
        return x
    return ctx.call(E.contiguous(E.node(x)[tuple(index)]), shape=tuple(shape), dtype=x.dtype,
                    view=True)


@register("Slice", 1)
def Slice_1(ctx, x, starts, ends, axes=None):
    return slice_values(ctx, x, list(starts), list(ends), axes, None)


@register("Slice", 10)
def Slice(ctx, x, starts, ends, axes=None, steps=None):
    return slice_values(ctx, x, const_ints(ctx, starts, "starts"), const_ints(ctx, ends, "ends"),
                        None if axes is None else const_ints(ctx, axes, "axes"),
                        None if steps is None else const_ints(ctx, steps, "steps"))


# -- broadcasting, tiling, padding ---------------------------------------------------------------
@register("Expand", 8)
def Expand(ctx, x, shape):
    dims = const_ints(ctx, shape, "shape")
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(x.shape, tuple(dims)))
    except ValueError:
        ctx.fail(f"shape {list(x.shape)} cannot expand to {dims}")
    if out == x.shape:
        return x
    return ctx.call(E.contiguous(E.numpy("broadcast_to", x, out)), shape=out, dtype=x.dtype,
                    view=True)


def tile(ctx, x, repeats):
    if len(repeats) != x.rank or any(r < 0 for r in repeats):
        ctx.fail(f"repeats {repeats} do not fit rank {x.rank}")
    y = x
    for axis, r in enumerate(repeats):
        if r != 1:
            y = take_axis(ctx, y, axis, np.tile(np.arange(x.shape[axis]), r))
    return y


@register("Tile", 6)
def Tile(ctx, x, repeats):
    return tile(ctx, x, const_ints(ctx, repeats, "repeats"))


@register("Tile", 1)
def Tile_1(ctx, x, tiles, axis):
    reps = [1] * x.rank
    reps[norm_axis(ctx, const_ints(ctx, axis, "axis")[0], x.rank)] = const_ints(ctx, tiles, "tiles")[0]
    return tile(ctx, x, reps)


def pad_map(ctx, n, begin, end, mode):
    """Source index of each output position along one axis (-1: the constant value)."""
    src = np.arange(-begin, n + end, dtype=np.int64)
    inside = (src >= 0) & (src < n)
    if mode == "constant":
        return np.where(inside, src, -1)
    if n == 0:
        ctx.fail(f"mode {mode!r} cannot pad an empty axis")
    if mode == "edge":
        return np.clip(src, 0, n - 1)
    if mode == "wrap":
        return np.mod(src, n)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(src)
        period = 2 * (n - 1)
        r = np.mod(src, period)
        return np.where(r < n, r, period - r)
    ctx.fail("mode must be constant, reflect, edge or wrap")


def pad(ctx, x, pads, mode, fill, axes=None):
    axes = list(range(x.rank)) if axes is None else [norm_axis(ctx, a, x.rank) for a in axes]
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} do not fit {len(axes)} axes")
    y = x
    for i, axis in enumerate(axes):
        begin, end = pads[i], pads[i + len(axes)]
        if x.shape[axis] + begin + end < 0:
            ctx.fail(f"pads {pads} remove more than the whole axis {axis}")
        if begin or end:
            y = take_axis(ctx, y, axis, pad_map(ctx, x.shape[axis], begin, end, mode), fill)
    return y


@register("Pad", 1)
def Pad_1(ctx, x, paddings, mode="constant", value=0.0):
    return pad(ctx, x, [int(p) for p in paddings], mode, E.scalar(value, x.dtype))


@register("Pad", 2)
def Pad_2(ctx, x, pads, mode="constant", value=0.0):
    return pad(ctx, x, [int(p) for p in pads], mode, E.scalar(value, x.dtype))


@register("Pad", 11)
def Pad(ctx, x, pads, constant_value=None, axes=None, mode="constant"):
    if constant_value is None or constant_value.size == 0:
        fill = E.scalar(0, x.dtype)
    elif constant_value.const is not None:
        fill = E.scalar(np.asarray(constant_value.const).reshape(-1)[0], x.dtype)
    else:
        fill = constant_value   # a run-time scalar, read by the kernel call
    return pad(ctx, x, const_ints(ctx, pads, "pads"), mode, fill,
               None if axes is None else const_ints(ctx, axes, "axes"))


@register("Trilu", 14)
def Trilu(ctx, x, k=None, upper=1):
    if x.rank < 2:
        ctx.fail("Trilu needs rank >= 2")
    if k is not None and k.const is None:
        x3 = (prod(x.shape[:-2]),) + x.shape[-2:]
        expr = E.lib("movement", "trilu", E.contiguous(x).reshape(x3), E.item(k), bool(upper))
        return ctx.call(expr.reshape(x.shape), shape=x.shape, dtype=x.dtype)
    kk = 0 if k is None else const_ints(ctx, k, "k")[0]
    ones = np.ones(x.shape[-2:], np.bool_)
    mask = np.triu(ones, kk) if upper else np.tril(ones, kk)
    zero = ctx.scalar(0, x.dtype)
    v, keep = S.operands(2)
    return ctx.elementwise(S.paren(S.cond(keep, v, zero)), x, ctx.constant(mask), dtype=x.dtype)


@register("Compress", 9)
def Compress(ctx, x, condition, axis=None):
    keep = np.flatnonzero(np.asarray(const_ints(ctx, condition, "condition")))
    if axis is None:
        x, axis = reshape(ctx, x, (x.size,)), 0
    axis = norm_axis(ctx, axis, x.rank)
    if len(keep) and keep[-1] >= x.shape[axis]:
        ctx.fail(f"condition selects index {int(keep[-1])} beyond dimension {x.shape[axis]}")
    return take_axis(ctx, x, axis, keep)


@register("Range", 11)
def Range(ctx, start, limit, delta):
    """Specialized on the values of start/limit/delta (graph inputs become part of the key)."""
    bounds = [ctx.require_const(v, what) for v, what in
              ((start, "start"), (limit, "limit"), (delta, "delta"))]
    for v, what in zip(bounds, ("start", "limit", "delta")):
        if np.asarray(v).size != 1:     # scalars (ONNX Runtime also takes one-element vectors)
            ctx.fail(f"{what} must be a scalar, got shape {list(np.shape(v))}")
    dtype = start.dtype
    a, b, d = (np.asarray(v).astype(dtype).item() for v in bounds)
    n = max(int(np.ceil((b - a) / d)), 0) if d != 0 else 0
    values = (np.asarray(a, dtype) + np.arange(n, dtype=dtype) * np.asarray(d, dtype)).astype(dtype)
    return ctx.constant(values)


@register("NonZero", 9)
def NonZero(ctx, x):
    ctx.data_dependent("NonZero on a run-time input has a data-dependent output shape; "
             "only constant inputs are supported")
