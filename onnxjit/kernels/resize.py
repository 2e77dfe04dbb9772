"""Separable resampling kernels for Resize/Upsample.

The lowering computes, at compile time, one table per resized axis: for each output position
the `n` source indices along that axis and their weights, and whether the position lies
outside a tf_crop_and_resize roi (it then takes the extrapolation value).  The kernels only
apply those tables axis by axis, so they compile once per machine whatever the mode.

``plan`` rows (one per resized axis, in application order) are
``(outer, in_w, out_w, inner, n, table_offset, mask_offset)``: the current tensor is viewed as
(outer, in_w, inner) and becomes (outer, out_w, inner).  ``idx``/``coef`` hold the tables
flattened (``out_w * n`` entries from ``table_offset``), ``mask`` one byte per output position.
"""

import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _check_tables(plan, idx):
    """Every table index must address its axis: the kernels then read in bounds."""
    for r in range(plan.shape[0]):
        in_w, out_w, n, off = plan[r, 1], plan[r, 2], plan[r, 4], plan[r, 5]
        for t in range(off, off + out_w * n):
            if idx[t] < 0 or idx[t] >= in_w:
                raise IndexError("Resize: interpolation table index out of range")


@njit(**_JIT)
def _interp_axis(cur, row, idx, coef, mask, extrapolation):
    """One axis of linear/cubic interpolation in cur's dtype (float64, or float32)."""
    outer, in_w, out_w, inner, n, off, moff = row
    nxt = np.zeros(outer * out_w * inner, cur.dtype)
    for o in range(outer):
        for j in range(out_w):
            dst = (o * out_w + j) * inner
            if mask[moff + j]:
                for i in range(inner):
                    nxt[dst + i] = extrapolation
            elif inner == 1:   # the last axis: a dot product per output element
                acc = 0.0
                for t in range(n):
                    acc += coef[off + j * n + t] * cur[o * in_w + idx[off + j * n + t]]
                nxt[dst] = acc
            else:
                for t in range(n):
                    w = coef[off + j * n + t]
                    src = (o * in_w + idx[off + j * n + t]) * inner
                    for i in range(inner):
                        nxt[dst + i] += w * cur[src + i]
    return nxt


@njit(**_JIT)
def interpolate(x, plan, idx, coef, mask, extrapolation):
    """Resize x by the tables, computing in float64; returns the flat float64 result."""
    _check_tables(plan, idx)
    cur = np.ascontiguousarray(x).ravel().astype(np.float64)
    for r in range(plan.shape[0]):
        cur = _interp_axis(cur, plan[r], idx, coef, mask, extrapolation)
    return cur


@njit(**_JIT)
def interpolate_f32(x, plan, idx, coef, mask, extrapolation):
    """interpolate for float32 x with float32 weights, in float32 (as ONNX Runtime computes;
    half the memory traffic): the flat float32 result."""
    _check_tables(plan, idx)
    cur = np.ascontiguousarray(x).ravel()
    for r in range(plan.shape[0]):
        cur = _interp_axis(cur, plan[r], idx, coef, mask, extrapolation)
    return cur


@njit(**_JIT)
def _gather_axis(cur, row, idx, mask, extrapolation):
    """One axis of nearest-neighbour resampling (n == 1), in the input dtype."""
    outer, in_w, out_w, inner, n, off, moff = row
    nxt = np.empty(outer * out_w * inner, cur.dtype)
    for o in range(outer):
        for j in range(out_w):
            dst = (o * out_w + j) * inner
            src = (o * in_w + idx[off + j]) * inner
            if mask[moff + j]:
                for i in range(inner):
                    nxt[dst + i] = extrapolation
            else:
                for i in range(inner):
                    nxt[dst + i] = cur[src + i]
    return nxt


@njit(**_JIT)
def nearest(x, plan, idx, mask, extrapolation, out_shape):
    """Nearest-neighbour resize of x by the tables (one index per output position)."""
    _check_tables(plan, idx)
    cur = np.ascontiguousarray(x).ravel()
    for r in range(plan.shape[0]):
        cur = _gather_axis(cur, plan[r], idx, mask, extrapolation)
    return cur.reshape(out_shape)
