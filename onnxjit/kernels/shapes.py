"""Pure-Python output-shape / explicit-pad helpers for the CNN kernels (ONNX spec semantics).

Conventions: every spatial argument is a tuple in ONNX order (one entry per spatial dim);
``pads`` is ``(begin_0, ..., begin_k-1, end_0, ..., end_k-1)``.  ``None`` means "attribute
absent" and gets the ONNX default.  All helpers return plain tuples of Python ints, ready to
be passed to the kernels as UniTuples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _norm(auto_pad) -> str:
    """Accept bytes/str/None auto_pad values and validate them."""
    if auto_pad is None:
        return "NOTSET"
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad not in _AUTO_PADS:
        raise ValueError(f"unsupported auto_pad {auto_pad!r}")
    return auto_pad


def _ones(v, k: int) -> tuple[int, ...]:
    return tuple(int(i) for i in v) if v is not None else (1,) * k


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _split_same(total: int, auto_pad: str) -> tuple[int, int]:
    """SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning."""
    small = total // 2
    return (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)


def _same_pads(in_sp, kernel, strides, dilations, auto_pad) -> tuple[int, ...]:
    """Pads making out = ceil(in / stride) for a dilated window (clamped at 0 like ORT)."""
    begins, ends = [], []
    for i, n in enumerate(in_sp):
        eff = (kernel[i] - 1) * dilations[i] + 1
        total = max(0, (_ceil_div(n, strides[i]) - 1) * strides[i] + eff - n)
        b, e = _split_same(total, auto_pad)
        begins.append(b)
        ends.append(e)
    return tuple(begins + ends)


def conv_pads(auto_pad, in_spatial: Sequence[int], kernel: Sequence[int],
              strides=None, dilations=None, pads=None) -> tuple[int, ...]:
    """Explicit (begin..., end...) pads for Conv / pools from auto_pad + pads attributes."""
    auto_pad, k = _norm(auto_pad), len(in_spatial)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return _same_pads(in_spatial, kernel, strides, dilations, auto_pad)
    if auto_pad == "VALID" or pads is None:
        return (0,) * (2 * k)
    return tuple(int(p) for p in pads)


def conv_output_shape(in_spatial, kernel, strides=None, dilations=None,
                      pads=None) -> tuple[int, ...]:
    """Conv output spatial shape from explicit pads (floor division)."""
    k = len(in_spatial)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    pads = tuple(pads) if pads is not None else (0,) * (2 * k)
    return tuple((in_spatial[i] + pads[i] + pads[k + i] - (kernel[i] - 1) * dilations[i] - 1)
                 // strides[i] + 1 for i in range(k))


def conv_geometry(auto_pad, in_spatial, kernel, strides=None, dilations=None, pads=None):
    """(strides, pads, dilations, out_spatial) for a Conv node, all explicit tuples."""
    k = len(in_spatial)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    p = conv_pads(auto_pad, in_spatial, kernel, strides, dilations, pads)
    return strides, p, dilations, conv_output_shape(in_spatial, kernel, strides, dilations, p)


def pool_output_shape(in_spatial, kernel, strides=None, dilations=None, pads=None,
                      ceil_mode: int = 0) -> tuple[int, ...]:
    """Pool output spatial shape from explicit pads; ceil_mode drops windows starting in the end pad."""
    k = len(in_spatial)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    pads = tuple(pads) if pads is not None else (0,) * (2 * k)
    out = []
    for i in range(k):
        span = in_spatial[i] + pads[i] + pads[k + i] - (kernel[i] - 1) * dilations[i] - 1
        o = (_ceil_div(span, strides[i]) if ceil_mode else span // strides[i]) + 1
        # the last window must start inside the input or the begin pad (ONNX/PyTorch rule)
        if ceil_mode and (o - 1) * strides[i] >= in_spatial[i] + pads[i]:
            o -= 1
        out.append(o)
    return tuple(out)


def pool_geometry(auto_pad, in_spatial, kernel, strides=None, dilations=None, pads=None,
                  ceil_mode: int = 0):
    """(strides, pads, dilations, out_spatial) for MaxPool/AveragePool nodes."""
    k = len(in_spatial)
    auto_pad = _norm(auto_pad)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    p = conv_pads(auto_pad, in_spatial, kernel, strides, dilations, pads)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # SAME fixes the output size to ceil(in / stride) regardless of ceil_mode
        out = tuple(_ceil_div(n, s) for n, s in zip(in_spatial, strides))
    else:
        out = pool_output_shape(in_spatial, kernel, strides, dilations, p, ceil_mode)
    # A dim with one output window reads it at offset 0 whatever its stride: stride 1 there, so
    # the kernels' phase buffers (a stride's worth of padded input per phase) stay small; a
    # stride of 2**31 - 1 asked for gigabytes of scratch.
    strides = tuple(1 if o == 1 else s for s, o in zip(strides, out))
    return strides, p, dilations, out


def negative_same_pool_pad(auto_pad, in_spatial, kernel, strides=None, dilations=None):
    """The first spatial axis where a pool's SAME_UPPER/SAME_LOWER padding, by the spec's
    formula (out - 1) * stride + window - in, is negative (a stride past the window on a short
    input), or None. ONNX Runtime refuses such pools ("padding values must be non-negative") and
    onnx's reference crops the input by it, while a clamp at 0 (Conv's and TensorFlow's SAME)
    answers otherwise: onnxjit refuses them too."""
    if _norm(auto_pad) not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    k = len(in_spatial)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    for i, n in enumerate(in_spatial):
        eff = (kernel[i] - 1) * dilations[i] + 1
        if (_ceil_div(n, strides[i]) - 1) * strides[i] + eff - n < 0:
            return i
    return None


def conv_transpose_geometry(auto_pad, in_spatial, kernel, strides=None, dilations=None,
                            pads=None, output_padding=None, output_shape=None):
    """(strides, pads, dilations, out_spatial) for ConvTranspose, per the ONNX spec text.

    If output_shape is given (or auto_pad is SAME_*), pads are derived from
    total_padding = stride*(in-1) + output_padding + (k-1)*dilation + 1 - out and split
    SAME_UPPER -> (total//2, total-total//2), otherwise -> (total-total//2, total//2);
    floor division; a negative total from an explicit output_shape (output larger than the full
    result) is all at the end.
    Otherwise out = stride*(in-1) + output_padding + (k-1)*dilation + 1 - pad_begin - pad_end.
    """
    k = len(in_spatial)
    auto_pad = _norm(auto_pad)
    strides, dilations = _ones(strides, k), _ones(dilations, k)
    op = tuple(int(v) for v in output_padding)[:k] if output_padding is not None else (0,) * k
    full = [strides[i] * (in_spatial[i] - 1) + op[i] + (kernel[i] - 1) * dilations[i] + 1
            for i in range(k)]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [n * s for n, s in zip(in_spatial, strides)]
    if output_shape is not None:
        explicit = auto_pad not in ("SAME_UPPER", "SAME_LOWER")
        out = tuple(int(v) for v in output_shape)[-k:]
        # An explicit output_shape past the full output (by less than a stride: validate.py)
        # extends the end only, as ONNX Runtime does; a split would shift the output by a row
        # once the excess is 2 or more.
        split = [(0, full[i] - out[i]) if explicit and full[i] < out[i] else
                 _split_same(full[i] - out[i], "SAME_UPPER" if auto_pad == "SAME_UPPER" else "")
                 for i in range(k)]
        return strides, tuple(s[0] for s in split) + tuple(s[1] for s in split), dilations, out
    p = (0,) * (2 * k) if auto_pad == "VALID" or pads is None else tuple(int(v) for v in pads)
    return strides, p, dilations, tuple(full[i] - p[i] - p[k + i] for i in range(k))


# ---------------------------------------------------------------- canonical 5-D form
# The pool and Conv kernels compile once per argument types, and an array's rank and a tuple's
# length are part of them: the lowerings hand every 1-D, 2-D and 3-D case over as (N, C, D, H, W)
# with leading spatial dims of 1 and 3-entry geometry (kernel 1, stride 1, dilation 1, pads 0
# on the added dims), so each kernel compiles one signature per dtype (docs/design.md).
def shape5(shape) -> tuple[int, ...]:
    """(N, C, *S) with 1..3 spatial dims as the canonical (N, C, D, H, W)."""
    shape = tuple(int(d) for d in shape)
    if not 3 <= len(shape) <= 5:
        raise ValueError(f"expected (N, C) and 1 to 3 spatial dims, got {list(shape)}")
    return shape[:2] + (1,) * (5 - len(shape)) + shape[2:]


def spatial3(v, fill: int = 1) -> tuple[int, ...]:
    """A spatial tuple of 1..3 entries left-padded with `fill` to 3 (kernel, strides,
    dilations, output sizes)."""
    v = tuple(int(i) for i in v)
    return (int(fill),) * (3 - len(v)) + v


def pads6(pads) -> tuple[int, ...]:
    """(begin..., end...) pads of 1..3 spatial dims as the 6 of (D, H, W), zeros added."""
    pads = tuple(int(i) for i in pads)
    k = len(pads) // 2
    return spatial3(pads[:k], 0) + spatial3(pads[k:], 0)


def window3(kernel, strides, pads, dilations, out):
    """A pool's geometry (as pool_geometry gives it, with its kernel) in the canonical form:
    (kernel, strides, pads, dilations, out) as 3-, 3-, 6-, 3- and 3-tuples."""
    return (spatial3(kernel), spatial3(strides), pads6(pads), spatial3(dilations),
            spatial3(out))


class MatmulPlan(NamedTuple):
    """Reshape/broadcast recipe for ``matmul3``; ``*_full`` is None when no copy is needed."""

    a_pre: tuple
    a_full: tuple | None
    a3: tuple
    b_pre: tuple
    b_full: tuple | None
    b3: tuple
    out: tuple


def matmul_plan(a_shape: Sequence[int], b_shape: Sequence[int]) -> MatmulPlan:
    """numpy-matmul semantics (1-D promotion, batch broadcasting) mapped onto ``matmul3``.

    Caller: ``a = a.reshape(a_pre)``; if ``a_full``: ``a = np.ascontiguousarray(
    np.broadcast_to(a, a_full))``; ``a = a.reshape(a3)``; same for b; then
    ``matmul3(a, b).reshape(out)``.  A side whose batch is all ones stays un-copied (B=1).
    """
    a, b = [int(d) for d in a_shape], [int(d) for d in b_shape]
    a_vec, b_vec = len(a) == 1, len(b) == 1
    a = [1] + a if a_vec else a
    b = b + [1] if b_vec else b
    r = max(len(a), len(b))
    a, b = [1] * (r - len(a)) + a, [1] * (r - len(b)) + b
    if a[-1] != b[-2]:
        raise ValueError(f"matmul: {list(a_shape)} x {list(b_shape)}: the inner dims "
                         f"({a[-1]} and {b[-2]}) differ")
    batch = []
    for x, y in zip(a[:-2], b[:-2]):
        if x != y and 1 not in (x, y):
            raise ValueError(f"matmul: incompatible batch dims {a_shape} x {b_shape}")
        batch.append(y if x == 1 else x)      # a 1 broadcasts to 0 too (not max)
    total = _prod(batch)
    sides = []
    for s in (a, b):
        n = _prod(s[:-2])
        if total == 0:      # an empty batch: both sides take it (matmul3 broadcasts only a 1)
            full = None if s[:-2] == batch else tuple(batch + s[-2:])
            sides.append((tuple(s), full, (0, s[-2], s[-1])))
            continue
        full = None if s[:-2] == batch or n == 1 else tuple(batch + s[-2:])
        sides.append((tuple(s), full, (total if n > 1 else 1, s[-2], s[-1])))
    out = batch + ([] if a_vec else [a[-2]]) + ([] if b_vec else [b[-1]])
    return MatmulPlan(*sides[0], *sides[1], tuple(out))


def _prod(v) -> int:
    n = 1
    for d in v:
        n *= int(d)
    return n
