"""Reduction kernels over the middle axis of a 3-D view (outer, reduced, inner) -> (outer, inner).

The lowering (ops/reduce.py) reshapes the input so the reduced axes form the middle block
(transposing them to the end first when they are not consecutive); the inner loop then runs
over contiguous memory. Results are in the input's dtype (integers wrap like numpy).
"""
import math

import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def reduce_sum(x):
    """Sum over axis 1."""
    no, nr, ni = x.shape
    out = np.zeros((no, ni), x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                out[o, i] += x[o, r, i]
    return out


@njit(**_JIT)
def reduce_sum_abs(x):
    """Sum of |x| over axis 1."""
    no, nr, ni = x.shape
    out = np.zeros((no, ni), x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                out[o, i] += abs(x[o, r, i])
    return out


@njit(**_JIT)
def reduce_sum_square(x):
    """Sum of x * x over axis 1."""
    no, nr, ni = x.shape
    out = np.zeros((no, ni), x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                v = x[o, r, i]
                out[o, i] += v * v
    return out


@njit(**_JIT)
def reduce_prod(x):
    """Product over axis 1."""
    no, nr, ni = x.shape
    out = np.ones((no, ni), x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                out[o, i] *= x[o, r, i]
    return out


@njit(**_JIT)
def reduce_max(x, init):
    """Maximum over axis 1 (NaN wins, like np.maximum.reduce); `init` for empty axes."""
    no, nr, ni = x.shape
    out = np.full((no, ni), init, x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                v = x[o, r, i]
                if v > out[o, i] or v != v:
                    out[o, i] = v
    return out


@njit(**_JIT)
def reduce_min(x, init):
    """Minimum over axis 1 (NaN wins, like np.minimum.reduce); `init` for empty axes."""
    no, nr, ni = x.shape
    out = np.full((no, ni), init, x.dtype)
    for o in range(no):
        for r in range(nr):
            for i in range(ni):
                v = x[o, r, i]
                if v < out[o, i] or v != v:
                    out[o, i] = v
    return out


@njit(**_JIT)
def reduce_log_sum_exp(x):
    """log(sum(exp(x - m))) + m over axis 1, m the max of the finite entries (as onnx's reference)."""
    no, nr, ni = x.shape
    out = np.empty((no, ni), x.dtype)
    m = np.empty(ni, x.dtype)
    s = np.empty(ni, x.dtype)
    for o in range(no):
        m[:] = -np.inf
        s[:] = 0
        for r in range(nr):
            for i in range(ni):
                v = x[o, r, i]
                if v > m[i] and not math.isinf(v):
                    m[i] = v
        for r in range(nr):
            for i in range(ni):
                s[i] += math.exp(x[o, r, i] - m[i])
        for i in range(ni):
            out[o, i] = math.log(s[i]) + m[i]
    return out


@njit(**_JIT)
def argmax(x, last):
    """Index along axis 1 of the first (or `last`) maximum; NaN counts as the maximum."""
    no, nr, ni = x.shape
    out = np.zeros((no, ni), np.int64)
    for o in range(no):
        for i in range(ni):
            best = x[o, 0, i]
            for r in range(1, nr):
                v = x[o, r, i]
                if last:
                    better = v >= best or v != v
                else:
                    better = v > best or (v != v and best == best)
                if better:
                    best = v
                    out[o, i] = r
    return out


@njit(**_JIT)
def argmin(x, last):
    """Index along axis 1 of the first (or `last`) minimum; NaN counts as the minimum."""
    no, nr, ni = x.shape
    out = np.zeros((no, ni), np.int64)
    for o in range(no):
        for i in range(ni):
            best = x[o, 0, i]
            for r in range(1, nr):
                v = x[o, r, i]
                if last:
                    better = v <= best or v != v
                else:
                    better = v < best or (v != v and best == best)
                if better:
                    best = v
                    out[o, i] = r
    return out


@njit(**_JIT)
def cumulative(x, axis_arr, exclusive, reverse, product):
    """ONNX CumSum (product False) or CumProd (True) along the axis held by the 1-element
    array `axis_arr` (a run-time value)."""
    nd = x.ndim
    axis = int(axis_arr.ravel()[0])
    if axis < -nd or axis >= nd:
        if product:
            raise IndexError("CumProd: axis out of range")
        raise IndexError("CumSum: axis out of range")
    if axis < 0:
        axis += nd
    no, nr, ni = 1, x.shape[axis], 1
    for d in range(nd):
        if d < axis:
            no *= x.shape[d]
        elif d > axis:
            ni *= x.shape[d]
    x3 = np.ascontiguousarray(x).reshape((no, nr, ni))
    return _cumulative3(x3, exclusive, reverse, product).reshape(x.shape)


@njit(**_JIT)
def _cumulative3(x, exclusive, reverse, product):
    """Running sums or products along axis 1 of (outer, n, inner)."""
    no, nr, ni = x.shape
    out = np.empty_like(x)
    acc = np.empty(ni, x.dtype)
    for o in range(no):
        acc[:] = 1 if product else 0
        for k in range(nr):
            r = nr - 1 - k if reverse else k
            for i in range(ni):
                v = x[o, r, i]
                if exclusive:
                    out[o, r, i] = acc[i]
                acc[i] = acc[i] * v if product else acc[i] + v
                if not exclusive:
                    out[o, r, i] = acc[i]
    return out
