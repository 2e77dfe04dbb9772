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

from . import JIT as _JIT


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
                ud, ui = np.uint64(dst), np.uint64(inner)
                for t in range(n):
                    w = coef[off + j * n + t]
                    src = np.uint64((o * in_w + idx[off + j * n + t]) * inner)
                    for i in range(ui):    # unsigned offsets: a vector loop
                        nxt[ud + i] += w * cur[src + i]
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
    u, ui = np.uint64, np.uint64(inner)
    for o in range(outer):
        for j in range(out_w):
            # unsigned offsets (the tables are checked): signed ones keep the copy scalar
            dst = u((o * out_w + j) * inner)
            src = u((o * in_w + idx[off + j]) * inner)
            if mask[moff + j]:
                for i in range(ui):
                    nxt[dst + i] = extrapolation
            else:
                for i in range(ui):
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


# ---------------------------------------------------------------- planes (NCHW over H and W)
@njit(inline="always", **_JIT)
def _plane_setup(x, hi, wi, taps, OH, OW, dtype):
    """The plane kernels' checks and buffers: the row and column tables (`taps` entries per
    output row / column) must address x's H and W (the kernels then read in bounds with
    unsigned offsets); (planes, flat x, y (N, C, OH, OW) of `dtype`, flat y)."""
    N, C, H, W = x.shape
    if hi.size != taps * OH or wi.size != taps * OW:
        raise ValueError("Resize: plane tables do not match the output size")
    for t in range(hi.size):
        if hi[t] < 0 or hi[t] >= H:
            raise IndexError("Resize: interpolation table index out of range")
    for t in range(wi.size):
        if wi[t] < 0 or wi[t] >= W:
            raise IndexError("Resize: interpolation table index out of range")
    y = np.empty((N, C, OH, OW), dtype)
    return N * C, np.ascontiguousarray(x).reshape(x.size), y, y.reshape(y.size)


# ---------------------------------------------------------------- bilinear planes (float32)
@njit(**_JIT)
def _planes(xf, yf, p0, p1, H, W, OH, OW, hi, hc, wi, wc, w_first, tmp):
    """Planes [p0, p1) of a 2-tap (linear) resize of the last two axes, plane by plane: the
    pass over the last axis (2 taps per output) and the one blending rows, in the order the
    lowering's plan has them (the last axis first when it is upsampled), the intermediate in
    `tmp` (one plane). Unsigned offsets: Numba's negative-index wraparound on signed ones kept
    the loops from vectorizing (the tables were checked by the caller)."""
    u = np.uint64
    for p in range(p0, p1):
        src, dst = u(p * H * W), u(p * OH * OW)
        if w_first:     # rows of W -> OW, then rows blended H -> OH
            for r in range(H):
                s, t = src + u(r * W), u(r * OW)
                for j in range(u(OW)):
                    tmp[t + j] = (wc[2 * j] * xf[s + u(wi[2 * j])]
                                  + wc[2 * j + 1] * xf[s + u(wi[2 * j + 1])])
            for oy in range(OH):
                a, b = u(hi[2 * oy] * OW), u(hi[2 * oy + 1] * OW)
                w0, w1 = hc[2 * oy], hc[2 * oy + 1]
                o = dst + u(oy * OW)
                for i in range(u(OW)):
                    yf[o + i] = w0 * tmp[a + i] + w1 * tmp[b + i]
        else:           # rows blended H -> OH, then each row W -> OW
            for oy in range(OH):
                a, b = src + u(hi[2 * oy] * W), src + u(hi[2 * oy + 1] * W)
                w0, w1 = hc[2 * oy], hc[2 * oy + 1]
                t = u(oy * W)
                for i in range(u(W)):
                    tmp[t + i] = w0 * xf[a + i] + w1 * xf[b + i]
            for oy in range(OH):
                t, o = u(oy * W), dst + u(oy * OW)
                for j in range(u(OW)):
                    yf[o + j] = (wc[2 * j] * tmp[t + u(wi[2 * j])]
                                 + wc[2 * j + 1] * tmp[t + u(wi[2 * j + 1])])


@njit(parallel=PRANGE_ONLY, **_JIT)
def bilinear_planes_f32(x, hi, hc, wi, wc, OH, OW, w_first):
    """Linear Resize of a float32 (N, C, H, W) over its last two axes by 2-tap tables
    (hi, hc: OH x 2 source rows and weights; wi, wc: OW x 2 columns) in float32 (as ONNX
    Runtime), with the plan's axis order (`w_first`); the planes split over threads
    from RESIZE_PAR_MIN outputs. (N, C, OH, OW) float32."""
    N, C, H, W = x.shape
    if hc.size != 2 * OH or wc.size != 2 * OW:
        raise ValueError("bilinear_planes_f32: tables do not match the output size")
    P, xf, y, yf = _plane_setup(x, hi, wi, 2, OH, OW, np.float32)
    if y.size == 0 or x.size == 0:
        return y
    nt = num_threads() if y.size >= RESIZE_PAR_MIN else 1
    nt = min(nt, P)
    if nt > 1:
        tmps = np.empty((nt, max(H * OW, OH * W)), np.float32)
        for t in prange(nt):
            p0, p1 = split_range(P, nt, t, 1)
            _planes(xf, yf, p0, p1, H, W, OH, OW, hi, hc, wi, wc, w_first, tmps[t])
    else:
        tmp = np.empty(max(H * OW, OH * W), np.float32)
        _planes(xf, yf, I0, P, H, W, OH, OW, hi, hc, wi, wc, w_first, tmp)
    return y


# ---------------------------------------------------------------- nearest planes
@njit(**_JIT)
def _nearest_planes(xf, yf, p0, p1, H, W, OH, OW, hi, wi, rep):
    """Planes [p0, p1) of a nearest resize of the last two axes: each output row gathers its
    source row by the W table (rep == 2: the table is j // 2, each element written twice),
    or copies the previous output row when it has the same source row (an upsampled H);
    unsigned offsets, so the loops vectorize."""
    u = np.uint64
    uw = u(OW)
    for p in range(p0, p1):
        src, dst = u(p * H * W), u(p * OH * OW)
        for oy in range(OH):
            o = dst + u(oy * OW)
            if oy > 0 and hi[oy] == hi[oy - 1]:
                q = o - uw
                for j in range(uw):
                    yf[o + j] = yf[q + j]
            elif rep == 2:      # wi[j] == j // 2: each source element twice, no gather
                s = src + u(hi[oy] * W)
                for k in range(u(W)):
                    v = xf[s + k]
                    yf[o + u(2) * k] = v
                    yf[o + u(2) * k + u(1)] = v
            else:
                s = src + u(hi[oy] * W)
                for j in range(uw):
                    yf[o + j] = xf[s + u(wi[j])]


@njit(parallel=PRANGE_ONLY, **_JIT)
def nearest_planes(x, hi, wi, OH, OW):
    """Nearest Resize of an (N, C, H, W) array over its last two axes by one-index tables (hi:
    OH source rows, wi: OW source columns), any dtype; the planes split over threads from
    RESIZE_PAR_MIN outputs. (N, C, OH, OW)."""
    N, C, H, W = x.shape
    P, xf, y, yf = _plane_setup(x, hi, wi, 1, OH, OW, x.dtype)
    if y.size == 0 or x.size == 0:
        return y
    rep = 2 if OW == 2 * W else 0
    for j in range(OW):
        if rep == 2 and wi[j] != j // 2:
            rep = 0
    nt = min(num_threads() if y.size >= RESIZE_PAR_MIN else 1, P)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(P, nt, t, 1)
            _nearest_planes(xf, yf, p0, p1, H, W, OH, OW, hi, wi, rep)
    else:
        _nearest_planes(xf, yf, I0, P, H, W, OH, OW, hi, wi, rep)
    return y
