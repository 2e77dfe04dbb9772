"""Quantization kernels: saturating round-to-integer, blocked scale expansion, dynamic quantize."""
import numpy as np
from numba import njit
from numba.extending import intrinsic

from .simd import f32x16, vload, vstore, vzero

from . import JIT as _JIT


@njit(inline="always", **_JIT)
def saturate(q, zp, lo, hi):
    """rint(q) + zp clamped to [lo, hi] in float64 (half to even, as ONNX); NaN gives lo."""
    v = np.rint(np.float64(q)) + np.float64(zp)
    if v >= hi:
        return hi
    if v >= lo:
        return v
    return lo


@njit(**_JIT)
def block_expand(v, n, block):
    """v (P, B, Q) -> (P, n, Q) with out[p, i, q] = v[p, i // block, q] (blocked quantization)."""
    p_, b_, q_ = v.shape
    out = np.empty((p_, n, q_), v.dtype)
    for p in range(p_):
        for i in range(n):
            j = i // block
            if j >= b_:
                raise IndexError("QuantizeLinear: block index out of range")
            for q in range(q_):
                out[p, i, q] = v[p, j, q]
    return out


def _select_op(name, pred):
    """An intrinsic: lane-wise (v pred acc) ? v : acc on <16 x float> (a NaN lane keeps acc)."""
    def op(typingctx, acc, v):
        def codegen(context, builder, sig, args):
            return builder.select(builder.fcmp_ordered(pred, args[1], args[0]), args[1], args[0])
        return f32x16(f32x16, f32x16), codegen
    op.__name__ = op.__qualname__ = name
    return intrinsic(op)


_vmax_q = _select_op("_vmax_q", ">")
_vmin_q = _select_op("_vmin_q", "<")


@njit(**_JIT)
def _range(x):
    """(max(0, max x), min(0, min x)) of flat float32 x, NaNs ignored; 16 lanes at a time."""
    n = x.size
    zero = np.float32(0)
    hi, lo = zero, zero
    i = 0
    if n >= 64:
        vh, vl = vzero(), vzero()
        while i + 16 <= n:
            v = vload(x, i)
            vh = _vmax_q(vh, v)
            vl = _vmin_q(vl, v)
            i += 16
        t = np.empty(32, np.float32)
        vstore(t, 0, vh)
        vstore(t, 16, vl)
        for j in range(16):
            if t[j] > hi:
                hi = t[j]
            if t[16 + j] < lo:
                lo = t[16 + j]
    for k in range(i, n):
        # max(0, max(x)) and min(0, min(x)): the range always contains 0
        if x[k] > hi:
            hi = x[k]
        if x[k] < lo:
            lo = x[k]
    return hi, lo


@njit(**_JIT)
def dynamic_quantize(x, shape):
    """DynamicQuantizeLinear on flat float32 x: (y uint8 of `shape`, scale, zero point), 0-d."""
    zero = np.float32(0)
    hi, lo = _range(x)
    q = np.float32(255)
    scale = np.float32(1) / q if hi == lo else np.float32(hi - lo) / q
    zpf = np.float32(zero - lo / scale)
    # max(0, min(255, zpf)) as the reference's and ONNX Runtime's std::max/std::min: a NaN
    # (an inf in x makes scale inf and -lo / scale NaN) gives 255 (seed 7 cases 1897, 3757)
    zpf = zpf if zpf < q else q
    zpf = zpf if zpf > zero else zero
    zp = np.rint(zpf)
    y = np.empty(x.size, np.uint8)
    for i in range(x.size):
        # rint(x / scale) + zp saturated to [0, 255], NaN to 0, branch-free (vectorizes);
        # in float32: the same values as in float64 (rint is exact, |v| < 2^24 or clamped)
        v = np.rint(x[i] / scale) + zp
        v = v if v >= zero else zero
        v = v if v <= q else q
        y[i] = np.uint8(np.int32(v))
    s = np.empty((), np.float32)
    s[()] = scale
    z = np.empty((), np.uint8)
    z[()] = np.uint8(zp)
    return y.reshape(shape), s, z
