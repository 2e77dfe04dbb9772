"""Signal-processing ops: DFT, STFT, the window functions and MelWeightMatrix.

Complex tensors carry a last dim of 2 (real, imaginary) or 1 (real only). Windows and
MelWeightMatrix depend only on their (scalar) inputs: they are compile-time constants.
"""
from __future__ import annotations

import numpy as np

from .. import steps as E
from ..registry import register

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _scalar_input(ctx, v, what):
    """The one integer held by a compile-time scalar input."""
    a = np.asarray(ctx.require_const(v, what)).reshape(-1)
    if a.size != 1:
        ctx.fail(f"the {what} input must hold one value, not {a.size}")
    return int(a[0])


def _complex_input(ctx, x, least_rank):
    if x.dtype not in FLOATS:
        ctx.fail(f"dtype {x.dtype} is not supported (float32/float64 only)")
    if x.rank < least_rank or x.shape[-1] not in (1, 2):
        ctx.fail(f"input of shape {x.shape} must end in a dim of 1 (real) or 2 (complex)")


def _dft(ctx, x, dft_length, axis, inverse, onesided):
    _complex_input(ctx, x, 2)
    if not -x.rank <= axis < x.rank or axis % x.rank == x.rank - 1:
        ctx.fail(f"axis {axis} is not a signal axis of an input of rank {x.rank}")
    axis %= x.rank
    length = x.shape[axis]
    if dft_length is not None:
        n = _scalar_input(ctx, dft_length, "dft_length")
    else:
        n = 2 * (length - 1) if inverse and onesided else length
    if n < 1:
        ctx.fail(f"DFT length {n} must be positive")
    pre, post = x.shape[:axis], x.shape[axis + 1:-1]
    four = E.reshape(x, (int(np.prod(pre)), length, int(np.prod(post)), x.shape[-1]))
    if inverse and onesided:
        shape = pre + (n,) + post + (1,)
        expr = E.lib("signal", "irfft", four, n)
    else:
        bins = n // 2 + 1 if onesided else n
        shape = pre + (bins,) + post + (2,)
        expr = E.lib("signal", "dft", four, n, bool(inverse), bins)
    return ctx.call(expr.reshape(shape), shape=shape, dtype=x.dtype)


@register("DFT", 17)
def DFT_17(ctx, x, dft_length=None, axis=1, inverse=0, onesided=0):
    return _dft(ctx, x, dft_length, int(axis), inverse, onesided)


@register("DFT", 20)
def DFT_20(ctx, x, dft_length=None, axis=None, inverse=0, onesided=0):
    a = -2 if axis is None else _scalar_input(ctx, axis, "axis")
    return _dft(ctx, x, dft_length, a, inverse, onesided)


@register("STFT", 17)
def STFT(ctx, signal, frame_step, window=None, frame_length=None, onesided=1):
    _complex_input(ctx, signal, 3)
    if signal.rank != 3:
        ctx.fail(f"signal of shape {signal.shape} is not [batch, length, 1 or 2]")
    step = _scalar_input(ctx, frame_step, "frame_step")
    length = signal.shape[1]
    if frame_length is not None:
        n = _scalar_input(ctx, frame_length, "frame_length")
    else:
        n = window.shape[0] if window is not None else length
    # checked before anything is sized by them (a frame_length of -1 reached np.ones: UNCLEAN)
    if step < 1 or n < 1 or n > length:
        ctx.fail(f"frame_step {step} / frame_length {n} do not frame a signal of length {length}")
    if window is None:
        window = ctx.constant(np.ones(n, signal.dtype))
    elif window.rank != 1:
        ctx.fail(f"window of shape {window.shape} is not 1-D")
    frames = 1 + (length - n) // step
    bins = n // 2 + 1 if onesided else n
    return ctx.kernel(("signal", "stft"), signal, step, frames, window, n, bins,
                      shape=(signal.shape[0], frames, bins, 2), dtype=signal.dtype)


def _folded(ctx, *inputs):
    """An op whose output depends only on scalar inputs: require them at compile time, where
    the node is folded before its lowering runs; reaching here means folding failed."""
    for v in inputs:
        ctx.require_const(v, "scalar")
    from ..specialize import fold_node
    result = fold_node(ctx.node, list(inputs), ctx.model_opsets)
    if result is None:
        ctx.fail("could not be evaluated at compile time")
    return result


@register("HannWindow", 17)
def HannWindow(ctx, size, output_datatype=1, periodic=1):
    return _folded(ctx, size)


@register("HammingWindow", 17)
def HammingWindow(ctx, size, output_datatype=1, periodic=1):
    return _folded(ctx, size)


@register("BlackmanWindow", 17)
def BlackmanWindow(ctx, size, output_datatype=1, periodic=1):
    return _folded(ctx, size)


@register("MelWeightMatrix", 17)
def MelWeightMatrix(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                    upper_edge_hertz, output_datatype=1):
    return _folded(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                   upper_edge_hertz)
