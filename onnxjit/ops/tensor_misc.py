"""Assorted tensor ops: TopK, ReverseSequence, CenterCropPad, Col2Im, MaxUnpool, Einsum, Det, CumProd.

Shape-like inputs (TopK's k, CenterCropPad's shape, Col2Im's image/block shapes, MaxUnpool's
output_shape) are read with `ctx.require_const`: graph inputs become part of the signature.
Einsum's equation is parsed here, in Python; the generated code only sees transposes, reshapes,
diagonal slices and `__k_matmul.matmul3` calls with literal shapes.
"""
from __future__ import annotations

import numpy as np

from .. import steps as E
from .. import validate
from ..registry import register
from .movement import const_ints, norm_axis, prod, reshape, transpose


# -- TopK ----------------------------------------------------------------------------------------
def top_k(ctx, x, k, axis, largest):
    axis = norm_axis(ctx, axis, x.rank)
    n = x.shape[axis]
    if not 0 <= k <= n:
        ctx.fail(f"k={k} is out of range for an axis of {n} elements")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    x3 = (prod(x.shape[:axis]), n, prod(x.shape[axis + 1:]))
    expr = E.lib("tensor_misc", "top_k", E.contiguous(x).reshape(x3), k, bool(largest), shape)
    return ctx.call_multi(expr, outs=[(shape, x.dtype), (shape, np.int64)])


@register("TopK", 1)
def TopK_1(ctx, x, k, axis=-1):
    return top_k(ctx, x, int(k), axis, True)


def _k(ctx, k):
    """TopK's k: a tensor of one element (ONNX: a 1-D tensor holding a single value)."""
    values = const_ints(ctx, k, "k")
    if len(values) != 1:
        ctx.fail(f"k must hold one value, got {len(values)} (shape {list(k.shape)})")
    return values[0]


@register("TopK", 10)
def TopK_10(ctx, x, k, axis=-1):
    return top_k(ctx, x, _k(ctx, k), axis, True)


@register("TopK", 11)
def TopK(ctx, x, k, axis=-1, largest=1, sorted=1):  # noqa: A002 (ONNX's name)
    """sorted=0 leaves the order unspecified: sorted output conforms."""
    return top_k(ctx, x, _k(ctx, k), axis, largest)


# -- ReverseSequence -----------------------------------------------------------------------------
@register("ReverseSequence", 10)
def ReverseSequence(ctx, x, sequence_lens, batch_axis=1, time_axis=0):
    if x.rank < 2 or {batch_axis, time_axis} != {0, 1}:
        ctx.fail("batch_axis and time_axis must be 0 and 1 (in some order) of an input of rank >= 2")
    if sequence_lens.shape != (x.shape[batch_axis],):
        ctx.fail(f"sequence_lens must have shape [{x.shape[batch_axis]}]")
    x3 = x.shape[:2] + (prod(x.shape[2:]),)
    expr = E.lib("tensor_misc", "reverse_sequence", E.contiguous(x).reshape(x3),
                 E.contiguous(sequence_lens), time_axis == 0)
    return ctx.call(expr.reshape(x.shape), x, sequence_lens, shape=x.shape, dtype=x.dtype)


# -- CenterCropPad, MaxUnpool: a box copied into zeros ------------------------------------------
def copy_box(src, out_shape, src_off, dst_off, box):
    """Zeros of out_shape with the box of `src` (an expression) at src_off copied to dst_off."""
    return E.lib("tensor_misc", "copy_box", src,
                 *(tuple(int(v) for v in t) for t in (out_shape, src_off, dst_off, box)))


@register("CenterCropPad", 18)
def CenterCropPad(ctx, x, shape, axes=None):
    target = const_ints(ctx, shape, "shape")
    axes = list(range(x.rank)) if axes is None else [norm_axis(ctx, a, x.rank) for a in axes]
    if len(target) != len(axes) or min(target, default=0) < 0:
        ctx.fail(f"shape {target} does not match axes {axes}")
    out, src, dst, box = list(x.shape), [0] * x.rank, [0] * x.rank, list(x.shape)
    for a, t in zip(axes, target):
        out[a], box[a] = t, min(t, x.shape[a])
        # The reference centres with the extra element (odd difference) at the end.
        if t < x.shape[a]:
            src[a] = (x.shape[a] - t) // 2
        else:
            dst[a] = (t - x.shape[a]) // 2
    if tuple(out) == x.shape:
        return x
    return ctx.call(copy_box(x, out, src, dst, box), shape=tuple(out), dtype=x.dtype)


@register("MaxUnpool", 9)
def MaxUnpool(ctx, x, indices, output_shape=None, kernel_shape=None, pads=None, strides=None):
    k = list(kernel_shape or [])
    nd = x.rank - 2
    if len(k) != nd or indices.shape != x.shape:
        ctx.fail("kernel_shape must cover every spatial axis and indices must match X's shape")
    s = list(strides or [1] * nd)
    p = list(pads or [0] * (2 * nd))
    inferred = x.shape[:2] + tuple((x.shape[d + 2] - 1) * s[d] - (p[d] + p[nd + d]) + k[d]
                                   for d in range(nd))
    out = inferred if output_shape is None else tuple(const_ints(ctx, output_shape, "output_shape"))
    if len(out) != x.rank or any(o < i for o, i in zip(out, inferred)) or min(inferred) < 0:
        ctx.fail(f"output_shape {list(out)} is smaller than the unpooled shape {list(inferred)}")
    expr = E.lib("tensor_misc", "max_unpool", x, indices, prod(inferred)).reshape(inferred)
    if out != inferred:
        zeros = [0] * x.rank
        expr = copy_box(expr, out, zeros, zeros, inferred)
    return ctx.call(expr, x, indices, shape=out, dtype=x.dtype)


# -- Col2Im --------------------------------------------------------------------------------------
@register("Col2Im", 18)
def Col2Im(ctx, x, image_shape, block_shape, dilations=None, pads=None, strides=None):
    image = const_ints(ctx, image_shape, "image_shape")
    block = const_ints(ctx, block_shape, "block_shape")
    nd = len(image)
    dil, st = list(dilations or [1] * nd), list(strides or [1] * nd)
    pd = list(pads or [0] * (2 * nd))
    if x.rank != 3 or len(block) != nd or len(dil) != nd or len(st) != nd or len(pd) != 2 * nd:
        ctx.fail("input must be (N, C*prod(block_shape), L) and every attribute must cover the image axes")
    if min(image + block + dil + st, default=1) < 1:
        ctx.fail(f"image_shape {image}, block_shape {block}, dilations {dil} and strides {st} "
                 "must be positive")
    n_col = [(image[d] + pd[d] + pd[nd + d] - dil[d] * (block[d] - 1) - 1) // st[d] + 1
             for d in range(nd)]
    if min(n_col) < 1:
        ctx.fail(f"image {image} and block {block} leave no block positions")
    for what, dims in (("image_shape", image), ("block_shape", block), ("block positions", n_col)):
        validate.check_shape(ctx.node, what, dims)
    bsize = prod(block)
    if bsize == 0 or x.shape[1] % bsize or prod(n_col) != x.shape[2]:
        ctx.fail(f"input shape {list(x.shape)} does not match image {image} and block {block}")
    nc = x.shape[1] // bsize
    shape = (x.shape[0], nc) + tuple(image)
    args = (tuple(v) for v in (image, block, dil, pd[:nd], st, n_col))
    expr = E.lib("tensor_misc", "col2im", E.contiguous(x), *args).reshape(shape)
    return ctx.call(expr, shape=shape, dtype=x.dtype)


# -- Det, CumProd --------------------------------------------------------------------------------
@register("Det", 11)
def Det(ctx, x):
    if x.rank < 2 or x.shape[-1] != x.shape[-2] or x.dtype.kind != "f":
        ctx.fail("Det needs float square matrices in the last two axes")
    shape = x.shape[:-2]
    x3 = (prod(shape),) + x.shape[-2:]
    expr = E.lib("tensor_misc", "det", E.contiguous(x).reshape(x3)).reshape(shape)
    return ctx.call(expr, shape=shape, dtype=x.dtype)


@register("CumProd", 26)
def CumProd(ctx, x, axis, exclusive=0, reverse=0):
    """The axis may be a runtime value: the output shape does not depend on it."""
    expr = E.lib("reduce", "cumulative", x, axis, bool(exclusive), bool(reverse), True)
    return ctx.call(expr, x, axis, shape=x.shape, dtype=x.dtype)


# -- Einsum --------------------------------------------------------------------------------------
# Labels are letters; the dims an ellipsis covers become the labels 0, 1, ... counted so that
# they align on the right across operands (numpy's broadcasting of "...").
def _einsum_terms(ctx, equation, ranks):
    """([labels of each operand], output labels) for the equation and operand ranks."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks) or not all(c.isalpha() or c in ",.->" for c in eq):
        ctx.fail(f"the equation does not describe {len(ranks)} operand(s)")
    n_ell = max([r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t],
                default=0)
    labels = [_einsum_labels(ctx, t, r, n_ell) for t, r in zip(terms, ranks)]
    if arrow:
        out = _einsum_labels(ctx, rhs, len(rhs.replace("...", "")) + n_ell, n_ell)
    else:
        flat = [lab for ls in labels for lab in ls if isinstance(lab, str)]
        out = list(range(n_ell)) + sorted(c for c in set(flat) if flat.count(c) == 1)
    if len(set(out)) != len(out) or not set(out) <= {lab for ls in labels for lab in ls}:
        ctx.fail("the output labels must be distinct labels of the operands")
    return labels, out


def _einsum_labels(ctx, term, rank, n_ell):
    """The labels of one term for an operand of `rank` dims."""
    head, ell, tail = term.partition("...")
    if "." in head + tail or not (head + tail).isalpha() and head + tail:
        ctx.fail("malformed equation term")
    n = rank - len(head) - len(tail)
    if (not ell and n != 0) or n < 0 or n > n_ell:
        ctx.fail(f"a term of the equation does not match an operand of rank {rank}")
    return list(head) + list(range(n_ell - n, n_ell)) + list(tail)


def _einsum_prepare(ctx, x, labels, sizes, keep):
    """x with broadcast size-1 dims dropped, repeated labels reduced to their diagonal and
    labels outside `keep` summed; returns (Value, labels)."""
    mask = [not (x.shape[a] == 1 and sizes[lab] > 1) for a, lab in enumerate(labels)]
    if not all(mask):   # a size-1 dim broadcast against a larger one: it just disappears
        labels = [lab for lab, m in zip(labels, mask) if m]
        x = reshape(ctx, x, [d for d, m in zip(x.shape, mask) if m])
    while len(set(labels)) != len(labels):
        x, labels = _einsum_diagonal(ctx, x, labels)
    summed = [a for a, lab in enumerate(labels) if lab not in keep]
    if summed:
        kept = [a for a in range(len(labels)) if a not in summed]
        x = transpose(ctx, x, kept + summed)
        shape = tuple(x.shape[:len(kept)])
        x2 = (prod(shape), prod(x.shape[len(kept):]))
        expr = E.lib("tensor_misc", "sum_rows", E.contiguous(x).reshape(x2)).reshape(shape)
        x = ctx.call(expr, shape=shape, dtype=x.dtype)
        labels = [labels[a] for a in kept]
    return x, labels


def _einsum_diagonal(ctx, x, labels):
    """The diagonal over the first repeated label: its two axes moved last, flattened to n*n
    and sliced with step n+1. Returns (Value, labels)."""
    lab = next(lab for lab in labels if labels.count(lab) > 1)
    p = labels.index(lab)
    q = labels.index(lab, p + 1)
    rest = [a for a in range(len(labels)) if a not in (p, q)]
    x = transpose(ctx, x, rest + [p, q])
    n = x.shape[-1]
    shape = tuple(x.shape[:-2]) + (n,)
    flat = E.contiguous(x).reshape((prod(shape[:-1]), n * n))
    expr = E.contiguous(flat[:, ::n + 1]).reshape(shape)
    return ctx.call(expr, shape=shape, dtype=x.dtype), [labels[a] for a in rest] + [lab]


def _einsum_pair(ctx, a, la, b, lb, later):
    """a (labels la) contracted with b (labels lb) by one batched matmul; `later` are the labels
    still needed afterwards. Returns (Value, labels)."""
    batch = [lab for lab in la if lab in lb and lab in later]
    inner = [lab for lab in la if lab in lb and lab not in later]
    free_a = [lab for lab in la if lab not in lb]
    free_b = [lab for lab in lb if lab not in la]
    a = transpose(ctx, a, [la.index(lab) for lab in batch + free_a + inner])
    b = transpose(ctx, b, [lb.index(lab) for lab in batch + inner + free_b])
    nb, k = prod(a.shape[:len(batch)]), prod(b.shape[len(batch):len(batch) + len(inner)])
    m, n = prod(a.shape[len(batch):len(batch) + len(free_a)]), prod(b.shape[len(batch) + len(inner):])
    shape = tuple(a.shape[:len(batch) + len(free_a)]) + tuple(b.shape[len(batch) + len(inner):])
    expr = E.lib("matmul", "matmul3", E.contiguous(a).reshape((nb, m, k)),
                 E.contiguous(b).reshape((nb, k, n))).reshape(shape)
    return ctx.call(expr, a, b, shape=shape, dtype=a.dtype), batch + free_a + free_b


@register("Einsum", 12)
def Einsum(ctx, *inputs, equation):
    if not inputs or any(v.dtype != inputs[0].dtype for v in inputs):
        ctx.fail("Einsum needs at least one operand, all of one dtype")
    labels, out = _einsum_terms(ctx, equation, [v.rank for v in inputs])
    sizes = {}
    for v, ls in zip(inputs, labels):
        for d, lab in zip(v.shape, ls):
            if sizes.get(lab, 1) not in (1, d) and d != 1:
                ctx.fail(f"label dimension {d} conflicts with {sizes[lab]}")
            sizes[lab] = max(sizes.get(lab, 1), d)
    def needed(skip):
        return set(out).union(*[set(ls) for i, ls in enumerate(labels) if i not in skip])
    cur, lc = _einsum_prepare(ctx, inputs[0], labels[0], sizes, needed({0}))
    for i in range(1, len(inputs)):
        later = needed(set(range(i + 1)))
        b, lb = _einsum_prepare(ctx, inputs[i], labels[i], sizes, later | set(lc))
        cur, lc = _einsum_prepare(ctx, cur, lc, sizes, later | set(lb))
        cur, lc = _einsum_pair(ctx, cur, lc, b, lb, later)
    cur, lc = _einsum_prepare(ctx, cur, lc, sizes, set(out))
    missing = [lab for lab in out if lab not in lc]   # a broadcast size-1 output label
    if missing:
        cur = reshape(ctx, cur, tuple(cur.shape) + (1,) * len(missing))
        lc = lc + missing
    return transpose(ctx, cur, [lc.index(lab) for lab in out])
