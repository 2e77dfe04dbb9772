"""Pooling kernels: MaxPool (+Indices), AveragePool, GlobalAverage/MaxPool, LRN.

Windowed pools take x (N, C, *S) with 1..3 spatial dims, ``kernel``/``strides``/
``dilations``/``out_shape`` k-tuples and ``pads`` a 2k-tuple (begin..., end...), all from
``shapes.pool_geometry`` (which also resolves auto_pad and ceil_mode).  Taps outside the
input are skipped, which equals -inf padding for MaxPool.  Arrays must be C-contiguous.
"""

import numpy as np
from numba import njit

from .conv import as5d, from5d, pads6, span, tup3

_JIT = dict(cache=True, error_model="numpy")


@njit(inline="always", **_JIT)
def _max_run(y, dst, xf, src, n, step):
    """y[dst+i] = max(y[dst+i], xf[src+i*step]); constant-stride copies vectorise."""
    dst, src, n = np.uint64(dst), np.uint64(src), np.uint64(n)
    if step == 1:
        for i in range(n):
            y[dst + i] = max(y[dst + i], xf[src + i])
    elif step == 2:
        for i in range(n):
            y[dst + i] = max(y[dst + i], xf[src + i * np.uint64(2)])
    else:
        for i in range(n):
            y[dst + i] = max(y[dst + i], xf[src + i * np.uint64(step)])


@njit(**_JIT)
def _maxpool5(x, k3, s3, p6, d3, o3):
    """Max pool with taps in the outer loops and a vectorisable run over output columns."""
    N, C, D, H, W = x.shape
    OD, OH, OW = o3
    xf = x.reshape(x.size)
    y = np.empty(N * C * OD * OH * OW, x.dtype)
    y[:] = -np.inf
    sw = s3[2]
    for nc in range(N * C):
        for od in range(OD):
            a0, a1 = span(od * s3[0] - p6[0], D, d3[0], k3[0])
            for oh in range(OH):
                b0, b1 = span(oh * s3[1] - p6[1], H, d3[1], k3[1])
                yo = np.uint64(((nc * OD + od) * OH + oh) * OW)
                for kd in range(a0, a1):
                    for kh in range(b0, b1):
                        row = ((nc * D + od * s3[0] - p6[0] + kd * d3[0]) * H
                               + oh * s3[1] - p6[1] + kh * d3[1]) * W
                        for kw in range(k3[2]):
                            off = kw * d3[2] - p6[2]
                            c0, c1 = span(off, W, s3[2], OW)
                            src = np.uint64(row + off + c0 * s3[2])
                            dst = yo + np.uint64(c0)
                            _max_run(y, dst, xf, src, c1 - c0, sw)
    return y.reshape((N, C, OD, OH, OW))


@njit(**_JIT)
def _maxpool_idx5(x, k3, s3, p6, d3, o3, storage_order):
    """Max plus flat argmax over (N, C, *S); spatially column-major if storage_order."""
    N, C, D, H, W = x.shape
    y = np.empty((N, C) + o3, x.dtype)
    idx = np.empty((N, C) + o3, np.int64)
    for nc in range(N * C):
        n, c = nc // C, nc % C
        for od in range(o3[0]):
            a0, a1 = span(od * s3[0] - p6[0], D, d3[0], k3[0])
            for oh in range(o3[1]):
                b0, b1 = span(oh * s3[1] - p6[1], H, d3[1], k3[1])
                for ow in range(o3[2]):
                    c0, c1 = span(ow * s3[2] - p6[2], W, d3[2], k3[2])
                    best, at = x.dtype.type(-np.inf), -1
                    for kd in range(a0, a1):
                        i = od * s3[0] - p6[0] + kd * d3[0]
                        for kh in range(b0, b1):
                            j = oh * s3[1] - p6[1] + kh * d3[1]
                            for kw in range(c0, c1):
                                k = ow * s3[2] - p6[2] + kw * d3[2]
                                v = x[n, c, i, j, k]
                                if v > best or at < 0:
                                    best = v
                                    at = (i * H + j) * W + k if storage_order == 0 else i + (j + k * H) * D
                    y[n, c, od, oh, ow] = best
                    idx[n, c, od, oh, ow] = nc * D * H * W + at
    return y, idx


@njit(**_JIT)
def maxpool(x, kernel, strides, pads, dilations, out_shape):
    """ONNX MaxPool output Y: x (N,C,*S) -> (N,C,*out_shape)."""
    y = _maxpool5(as5d(x), tup3(kernel, 1), tup3(strides, 1), pads6(pads),
                  tup3(dilations, 1), tup3(out_shape, 1))
    return from5d(y, x)


@njit(**_JIT)
def maxpool_with_indices(x, kernel, strides, pads, dilations, out_shape, storage_order):
    """ONNX MaxPool (Y, Indices); Indices flat over (N,C,*S), spatial column-major if storage_order."""
    y, idx = _maxpool_idx5(as5d(x), tup3(kernel, 1), tup3(strides, 1), pads6(pads),
                           tup3(dilations, 1), tup3(out_shape, 1), storage_order)
    return from5d(y, x), from5d(idx, x)


@njit(**_JIT)
def _avgpool5(x, k3, s3, p6, d3, o3, count_include_pad):
    """Mean over valid taps; count_include_pad counts taps inside [-pad_begin, S+pad_end)."""
    N, C, D, H, W = x.shape
    y = np.empty((N, C) + o3, x.dtype)
    ext = (D + p6[0] + p6[3], H + p6[1] + p6[4], W + p6[2] + p6[5])
    for n in range(N):
        for c in range(C):
            for od in range(o3[0]):
                a0, a1 = span(od * s3[0] - p6[0], D, d3[0], k3[0])
                e0, e1 = span(od * s3[0], ext[0], d3[0], k3[0])
                for oh in range(o3[1]):
                    b0, b1 = span(oh * s3[1] - p6[1], H, d3[1], k3[1])
                    f0, f1 = span(oh * s3[1], ext[1], d3[1], k3[1])
                    for ow in range(o3[2]):
                        c0, c1 = span(ow * s3[2] - p6[2], W, d3[2], k3[2])
                        g0, g1 = span(ow * s3[2], ext[2], d3[2], k3[2])
                        acc = 0.0
                        for kd in range(a0, a1):
                            i = od * s3[0] - p6[0] + kd * d3[0]
                            for kh in range(b0, b1):
                                j = oh * s3[1] - p6[1] + kh * d3[1]
                                for kw in range(c0, c1):
                                    acc += x[n, c, i, j, ow * s3[2] - p6[2] + kw * d3[2]]
                        if count_include_pad:
                            cnt = (e1 - e0) * (f1 - f0) * (g1 - g0)
                        else:
                            cnt = (a1 - a0) * (b1 - b0) * (c1 - c0)
                        y[n, c, od, oh, ow] = acc / cnt if cnt > 0 else np.nan
    return y


@njit(**_JIT)
def avgpool(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    """ONNX AveragePool: x (N,C,*S) -> (N,C,*out_shape); count_include_pad is 0/1."""
    y = _avgpool5(as5d(x), tup3(kernel, 1), tup3(strides, 1), pads6(pads),
                  tup3(dilations, 1), tup3(out_shape, 1), count_include_pad)
    return from5d(y, x)


@njit(**_JIT)
def global_avgpool(x):
    """ONNX GlobalAveragePool: x (N,C,*S) -> (N,C,1,...,1), float64 accumulation."""
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    x3 = x5.reshape((N, C, x5.shape[2] * x5.shape[3] * x5.shape[4]))
    y = np.empty((N, C, 1, 1, 1), x.dtype)
    for n in range(N):
        for c in range(C):
            acc = 0.0
            for p in range(x3.shape[2]):
                acc += x3[n, c, p]
            y[n, c, 0, 0, 0] = acc / x3.shape[2]
    return from5d(y, x)


@njit(**_JIT)
def global_maxpool(x):
    """ONNX GlobalMaxPool: x (N,C,*S) -> (N,C,1,...,1)."""
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    x3 = x5.reshape((N, C, x5.shape[2] * x5.shape[3] * x5.shape[4]))
    y = np.empty((N, C, 1, 1, 1), x.dtype)
    for n in range(N):
        for c in range(C):
            y[n, c, 0, 0, 0] = x3[n, c].max()
    return from5d(y, x)


@njit(**_JIT)
def lrn(x, size, alpha, beta, bias):
    """ONNX LRN: y = x / (bias + alpha/size * sum_{window over C} x^2) ** beta, any rank >= 3."""
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    P = x5.shape[2] * x5.shape[3] * x5.shape[4]
    x3 = x5.reshape((N, C, P))
    y = np.empty((N, C, P), x.dtype)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2  # floor / ceil of (size-1)/2
    acc = np.empty(P, x.dtype)
    for n in range(N):
        for c in range(C):
            acc[:] = 0
            for cc in range(max(0, c - lo), min(C, c + hi + 1)):
                for p in range(P):
                    acc[p] += x3[n, cc, p] * x3[n, cc, p]
            for p in range(P):
                y[n, c, p] = x3[n, c, p] / (bias + alpha / size * acc[p]) ** beta
    return from5d(y.reshape(x5.shape), x)
