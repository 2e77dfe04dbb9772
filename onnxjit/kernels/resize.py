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
from numba import njit, prange

from . import PRANGE_ONLY
from .parallel import I0, RESIZE_PAR_MIN, num_threads, split_range

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


# ---------------------------------------------------------------- bilinear planes (float32)
@njit(inline="always", **_JIT)
def _last_axis_row(xf, src, idx, coef, out, dst, n_out):
    """One row along the last axis: 2 taps per output, summed in float64 as _interp_axis's
    last-axis pass does (so both kernels round alike)."""
    for j in range(n_out):
        acc = 0.0
        acc += coef[2 * j] * xf[src + idx[2 * j]]
        acc += coef[2 * j + 1] * xf[src + idx[2 * j + 1]]
        out[dst + j] = acc


@njit(inline="always", **_JIT)
def _blend_rows(a, ao, b, bo, w0, w1, out, oo, n):
    """out[oo:oo+n] = w0 * a[ao:] + w1 * b[bo:] in float32 (an inner axis of _interp_axis)."""
    for i in range(n):
        out[oo + i] = w0 * a[ao + i] + w1 * b[bo + i]


@njit(**_JIT)
def _planes(xf, yf, p0, p1, H, W, OH, OW, hi, hc, wi, wc, w_first, tmp):
    """Planes [p0, p1) of a 2-tap (linear) resize of the last two axes, plane by plane: the
    pass over the last axis and the one over rows in the order the lowering's plan has them
    (the last axis first when it is upsampled), the intermediate in `tmp` (one plane)."""
    for p in range(p0, p1):
        src, dst = p * H * W, p * OH * OW
        if w_first:     # rows of W -> OW, then rows blended H -> OH
            for r in range(H):
                _last_axis_row(xf, src + r * W, wi, wc, tmp, r * OW, OW)
            for oy in range(OH):
                _blend_rows(tmp, hi[2 * oy] * OW, tmp, hi[2 * oy + 1] * OW, hc[2 * oy],
                            hc[2 * oy + 1], yf, dst + oy * OW, OW)
        else:           # rows blended H -> OH, then each row W -> OW
            for oy in range(OH):
                _blend_rows(xf, src + hi[2 * oy] * W, xf, src + hi[2 * oy + 1] * W,
                            hc[2 * oy], hc[2 * oy + 1], tmp, oy * W, W)
            for oy in range(OH):
                _last_axis_row(tmp, oy * W, wi, wc, yf, dst + oy * OW, OW)


@njit(parallel=PRANGE_ONLY, **_JIT)
def _planes_par(xf, yf, P, H, W, OH, OW, hi, hc, wi, wc, w_first, nt):
    tmps = np.empty((nt, max(H * OW, OH * W)), np.float32)
    for t in prange(nt):
        p0, p1 = split_range(P, nt, t, 1)
        _planes(xf, yf, p0, p1, H, W, OH, OW, hi, hc, wi, wc, w_first, tmps[t])


@njit(**_JIT)
def bilinear_planes_f32(x, hi, hc, wi, wc, OH, OW, w_first):
    """Linear Resize of a float32 (N, C, H, W) over its last two axes by 2-tap tables
    (hi, hc: OH x 2 source rows and weights; wi, wc: OW x 2 columns), the same arithmetic as
    interpolate_f32 with the plan's axis order (`w_first`); the planes split over threads
    from RESIZE_PAR_MIN outputs. (N, C, OH, OW) float32."""
    N, C, H, W = x.shape
    if hi.size != 2 * OH or hc.size != 2 * OH or wi.size != 2 * OW or wc.size != 2 * OW:
        raise ValueError("bilinear_planes_f32: tables do not match the output size")
    for t in range(2 * OH):
        if hi[t] < 0 or hi[t] >= H:
            raise IndexError("Resize: interpolation table index out of range")
    for t in range(2 * OW):
        if wi[t] < 0 or wi[t] >= W:
            raise IndexError("Resize: interpolation table index out of range")
    P = N * C
    y = np.empty((N, C, OH, OW), np.float32)
    if y.size == 0 or x.size == 0:
        return y
    xf = np.ascontiguousarray(x).reshape(x.size)
    yf = y.reshape(y.size)
    nt = num_threads() if y.size >= RESIZE_PAR_MIN else 1
    nt = min(nt, P)
    if nt > 1:
        _planes_par(xf, yf, P, H, W, OH, OW, hi, hc, wi, wc, w_first, nt)
    else:
        tmp = np.empty(max(H * OW, OH * W), np.float32)
        _planes(xf, yf, I0, P, H, W, OH, OW, hi, hc, wi, wc, w_first, tmp)
    return y
