"""Quantization kernels: saturating round-to-integer, blocked scale expansion, dynamic quantize."""
import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")


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
            out[p, i, :] = v[p, j, :]
    return out


@njit(**_JIT)
def dynamic_quantize(x, shape):
    """DynamicQuantizeLinear on flat float32 x: (y uint8 of `shape`, scale, zero point), 0-d."""
    zero = np.float32(0)
    hi, lo = zero, zero
    for i in range(x.size):
        # max(0, max(x)) and min(0, min(x)): the range always contains 0
        if x[i] > hi:
            hi = x[i]
        if x[i] < lo:
            lo = x[i]
    q = np.float32(255)
    scale = np.float32(1) / q if hi == lo else np.float32(hi - lo) / q
    zpf = np.float32(zero - lo / scale)
    zpf = min(max(zpf, zero), q)
    zp = np.rint(zpf)
    y = np.empty(x.size, np.uint8)
    for i in range(x.size):
        y[i] = np.uint8(saturate(x[i] / scale, zp, 0.0, 255.0))
    s = np.empty((), np.float32)
    s[()] = scale
    z = np.empty((), np.uint8)
    z[()] = np.uint8(zp)
    return y.reshape(shape), s, z
