"""Spatial sampling kernels: GridSample, AffineGrid, RoiAlign (after onnx/reference/ops).

GridSample works on any number k of spatial dims: x arrives as (N, C, prod(S)) with ``dims``
the k spatial sizes, the grid as (N, P, k) (its last axis lists coordinates innermost-dim
first, as ONNX specifies).  Modes: 0 nearest, 1 linear, 2 cubic; padding: 0 zeros, 1 border,
2 reflection.
"""

import math

import numpy as np
from numba import njit

from .epilogue import copy_into

from . import JIT as _JIT


@njit(**_JIT)
def _reflect(x, lo, hi):
    """Reflect x by the borders [lo, hi] until it lies inside."""
    rng = hi - lo
    if rng <= 0:
        return lo
    if x < lo:
        dx = lo - x
        n = int(dx / rng)
        r = dx - n * rng
        return lo + r if n % 2 == 0 else hi - r
    if x > hi:
        dx = x - hi
        n = int(dx / rng)
        r = dx - n * rng
        return hi - r if n % 2 == 0 else lo + r
    return x


@njit(**_JIT)
def _tap(i, d, lo, hi, padding):
    """The source index of integer tap i along a dim of size d, or -1 for a zero."""
    if padding == 1:
        return min(max(i, 0), d - 1)
    if padding == 2:
        return min(max(int(_reflect(float(i), lo, hi)), 0), d - 1)
    return i if 0 <= i < d else -1


@njit(**_JIT)
def _cubic(t, w):
    """Keys cubic convolution weights (alpha -0.75) for fractional offset t."""
    a = -0.75
    w[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    w[1] = ((a + 2) * t - (a + 3)) * t * t + 1
    w[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1
    w[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a


@njit(**_JIT)
def _r32(v, single):
    """v rounded to float32 when `single` (float32 arithmetic: each +, -, *, / of float32
    values done in float64 and rounded once is float32's correctly rounded result)."""
    return float(np.float32(v)) if single else v


@njit(**_JIT)
def _axis_taps(g, d, mode, padding, align, idx, w, single):
    """Fill idx/w (length 1, 2 or 4) for normalized coordinate g along a dim of size d. With
    `single` (a float32 grid) the unnormalized coordinate is computed in float32, as the reference
    and ONNX Runtime do: nearest's rounding of a coordinate near .5 depends on it."""
    g1 = _r32(g + 1.0, single)
    if align:
        x = _r32(_r32(g1 / 2.0, single) * (d - 1), single)
    else:
        x = _r32(_r32(g1 * d, single) - 1.0, single) / 2.0
    lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
    if mode == 0:
        x = np.rint(x)
    if x < lo or x > hi:
        if padding == 1:
            x = min(max(x, 0.0), d - 1.0)
        elif padding == 2:
            x = _reflect(x, lo, hi)
    if not x >= lo - 4.0:   # far outside (or NaN): every tap is padding; keeps int() defined
        x = lo - 4.0
    elif x > hi + 4.0:
        x = hi + 4.0
    if mode == 0:
        idx[0] = _tap(int(x), d, lo, hi, padding)
        w[0] = 1.0
        return
    x0 = math.floor(x)
    t = x - x0
    if mode == 1:
        w[0], w[1] = 1.0 - t, t
        first = int(x0)
    else:
        _cubic(t, w)
        first = int(x0) - 1
    for j in range(2 if mode == 1 else 4):
        idx[j] = _tap(first + j, d, lo, hi, padding)


@njit(**_JIT)
def grid_sample(x, grid, dims, mode, padding, align, single=0):
    """GridSample of x (N, C, prod(dims)) at grid (N, P, k) -> (N, C, P) float64 sums;
    `single`: the grid is float32 (its coordinates are denormalized in float32)."""
    N, C, S = x.shape
    P, k = grid.shape[1], grid.shape[2]
    m = 1 if mode == 0 else (2 if mode == 1 else 4)
    strides = np.ones(k, np.int64)
    for i in range(k - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    idx = np.zeros((k, m), np.int64)
    w = np.zeros((k, m), np.float64)
    digits = np.zeros(k, np.int64)
    y = np.zeros((N, C, P), x.dtype)
    for n in range(N):
        for p in range(P):
            for i in range(k):
                _axis_taps(grid[n, p, k - 1 - i], dims[i], mode, padding, align, idx[i], w[i],
                           single)
            _accumulate(x, y, n, p, idx, w, strides, digits, m ** k)
    return y


@njit(**_JIT)
def _accumulate(x, y, n, p, idx, w, strides, digits, combos):
    """y[n, :, p] = sum over the tap combinations of weight product * x[n, :, offset]."""
    k, m = idx.shape
    C = x.shape[1]
    acc = np.zeros(C, np.float64)
    for c in range(combos):
        rest, off, wt, inside = c, 0, 1.0, True
        for i in range(k - 1, -1, -1):
            digits[i] = rest % m
            rest //= m
        for i in range(k):
            j = idx[i, digits[i]]
            if j < 0:   # a zero-padding tap contributes nothing
                inside = False
                break
            off += j * strides[i]
            wt *= w[i, digits[i]]
        if inside:
            for ch in range(C):
                acc[ch] += wt * x[n, ch, off]
    for ch in range(C):
        y[n, ch, p] = acc[ch]


@njit(**_JIT)
def affine_grid(theta, base):
    """grid[n, p, i] = sum_j theta[n, i, j] * base[p, j] (base: homogeneous coordinates)."""
    N, k, h = theta.shape
    P = base.shape[0]
    out = np.empty((N, P, k), theta.dtype)
    for n in range(N):
        for p in range(P):
            for i in range(k):
                acc = 0.0
                for j in range(h):
                    acc += np.float64(theta[n, i, j]) * base[p, j]
                out[n, p, i] = acc
    return out


@njit(**_JIT)
def _bilinear_taps(y, x, H, W, pos, w):
    """RoiAlign's bilinear sample at (y, x): 4 flat positions and weights (0 outside)."""
    if not (-1.0 <= y <= H and -1.0 <= x <= W):   # outside (or NaN): no contribution
        pos[:] = 0
        w[:] = 0.0
        return
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= H - 1:
        y0 = y1 = H - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= W - 1:
        x0 = x1 = W - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1.0 - ly, 1.0 - lx
    pos[0], pos[1], pos[2], pos[3] = y0 * W + x0, y0 * W + x1, y1 * W + x0, y1 * W + x1
    w[0], w[1], w[2], w[3] = hy * hx, hy * lx, ly * hx, ly * lx


@njit(**_JIT)
def _roi_bin(xf, base, pos, w, count, mode_max, out, first):
    """Average (sum here) or RoiAlign's max of weighted taps over `count` samples of one output
    bin, continuing `out` (the samples before) unless `first`."""
    for s in range(count):
        if mode_max:
            v = max(max(w[s, 0] * xf[base + pos[s, 0]], w[s, 1] * xf[base + pos[s, 1]]),
                    max(w[s, 2] * xf[base + pos[s, 2]], w[s, 3] * xf[base + pos[s, 3]]))
            out = v if first and s == 0 else max(out, v)
        else:
            for t in range(4):
                out += w[s, t] * xf[base + pos[s, t]]
    return out


_ROI_CHUNK = 1024   # samples whose taps are computed at once (scratch bounded whatever the grid)


@njit(**_JIT)
def roi_align(x, rois, batch, out_h, out_w, sampling_ratio, scale, half_pixel, mode_max, most):
    """ONNX RoiAlign: x (N, C, H, W), rois (R, 4) as (x1, y1, x2, y2) -> (R, C, out_h, out_w).
    An adaptive sampling grid (sampling_ratio 0: from the roi's size) whose samples for the roi
    would be over `most` (the element limit) is refused: a roi of 1e30 asked for ~1e58."""
    N, C, H, W = x.shape
    R = rois.shape[0]
    xf = np.ascontiguousarray(x).ravel()
    y = np.empty((R, C, out_h, out_w), x.dtype)
    off = 0.5 if half_pixel else 0.0
    for r in range(R):
        b = batch[r]
        if b < 0 or b >= N:
            raise IndexError("RoiAlign: batch index out of range")
        x1, y1 = rois[r, 0] * scale - off, rois[r, 1] * scale - off
        rw, rh = rois[r, 2] * scale - off - x1, rois[r, 3] * scale - off - y1
        if not half_pixel:   # malformed rois are forced to 1x1
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / out_h, rw / out_w
        if sampling_ratio <= 0:
            fh, fw = np.ceil(np.float64(rh) / out_h), np.ceil(np.float64(rw) / out_w)
            if fh > 0 and fw > 0 and fh * fw * out_h * out_w * max(C, 1) > most:
                raise IndexError("RoiAlign: a roi's adaptive sampling grid (sampling_ratio 0) "
                                 "is out of range: more samples than the element limit")
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / out_h))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / out_w))
        count = gh * gw if gh > 0 and gw > 0 else 0
        chunk = max(min(count, _ROI_CHUNK), 1)
        pos = np.zeros((chunk, 4), np.int64)
        w = np.zeros((chunk, 4), np.float64)
        acc = np.zeros(C, np.float64)
        for ph in range(out_h):
            for pw in range(out_w):
                acc[:] = 0.0
                for s0 in range(0, count, chunk):   # samples s0.. in row-major (iy, ix) order
                    m = min(chunk, count - s0)
                    for s in range(m):
                        iy, ix = (s0 + s) // gw, (s0 + s) % gw
                        yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        _bilinear_taps(yy, xx, H, W, pos[s], w[s])
                    for c in range(C):
                        acc[c] = _roi_bin(xf, (b * C + c) * H * W, pos, w, m, mode_max, acc[c],
                                          s0 == 0)
                for c in range(C):
                    y[r, c, ph, pw] = acc[c] if mode_max else acc[c] / max(count, 1)
    return y


@njit(**_JIT)
def _bilinear_zero(plane, y, x):
    """plane sampled at (y, x) bilinearly, reading zeros outside (DeformConv's sampler)."""
    H, W = plane.shape
    if not (-1.0 < y < H and -1.0 < x < W):   # every tap outside (or NaN)
        return 0.0
    y0, x0 = int(math.floor(y)), int(math.floor(x))
    ly, lx = y - y0, x - x0
    out = 0.0
    for dy in range(2):
        yy = y0 + dy
        if 0 <= yy < H:
            wy = ly if dy else 1.0 - ly
            row = 0.0
            if 0 <= x0 < W:
                row += (1.0 - lx) * plane[yy, x0]
            if 0 <= x0 + 1 < W:
                row += lx * plane[yy, x0 + 1]
            out += wy * row
    return out


@njit(**_JIT)
def _deform_columns(x, offset, mask, n, geo, og, col):
    """col[(c, kh, kw), (i, j)] = mask * x[n, c] sampled at the offset kernel tap."""
    C = x.shape[1]
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    oh, ow = offset.shape[2], offset.shape[3]
    cpg = C // og
    for c in range(C):
        g = c // cpg
        for a in range(kh):
            for b in range(kw):
                k = (g * kh + a) * kw + b
                r = (c * kh + a) * kw + b
                for i in range(oh):
                    for j in range(ow):
                        y = i * sh - ph + a * dh + offset[n, 2 * k, i, j]
                        xx = j * sw - pw + b * dw + offset[n, 2 * k + 1, i, j]
                        col[r, i * ow + j] = mask[n, k, i, j] * _bilinear_zero(x[n, c], y, xx)


@njit(**_JIT)
def deform_conv(x, w, offset, b, mask, geo, group, og):
    """ONNX DeformConv (2-D): x (N, C, H, W), w (M, C/group, kh, kw), offset (N, og*kh*kw*2,
    oh, ow), b (M,), mask (N, og*kh*kw, oh, ow); geo = (kh, kw, sh, sw, ph, pw, dh, dw)."""
    N, C = x.shape[0], x.shape[1]
    M = w.shape[0]
    oh, ow = offset.shape[2], offset.shape[3]
    rows = C * geo[0] * geo[1]
    rpg, mpg = rows // group, M // group
    w2 = np.ascontiguousarray(w).reshape((M, rpg))
    col = np.empty((rows, oh * ow), x.dtype)
    y = np.empty((N, M, oh * ow), x.dtype)
    for n in range(N):
        _deform_columns(x, offset, mask, n, geo, og, col)
        for g in range(group):
            copy_into(y[n, g * mpg:(g + 1) * mpg], np.dot(w2[g * mpg:(g + 1) * mpg],
                                                          col[g * rpg:(g + 1) * rpg]))
        for m in range(M):
            y[n, m] += b[m]
    return y.reshape((N, M, oh, ow))
