"""Conv and ConvTranspose kernels: im2col / col2im around BLAS ``np.dot``.

Spatial rank: 1-D, 2-D and 3-D are all supported directly.  ``x`` is (N, C, *S) with
len(S) = k in {1, 2, 3}; ``strides``/``dilations`` are k-tuples of ints and ``pads`` is a
2k-tuple (begin..., end...) as produced by ``shapes.conv_geometry``.  Internally every input
is viewed as (N, C, D, H, W) with leading size-1 spatial dims, which costs nothing.
All array arguments must be C-contiguous; the output has the input's dtype (float32/64).
"""

import numpy as np
from numba import njit, types
from numba.extending import overload

_JIT = dict(cache=True, error_model="numpy")


# ---------------------------------------------------------------- rank dispatch helpers
def as5d(x):
    """Reshape an (N, C, *S) array with 1..3 spatial dims to (N, C, D, H, W)."""
    raise NotImplementedError  # only callable from jitted code (see overload below)


def from5d(y, like):
    """Reshape a canonical 5-D array back to the rank of ``like``."""
    raise NotImplementedError


def tup3(t, fill):
    """Left-pad a spatial tuple of length 1..3 with ``fill`` to length 3 (int64)."""
    raise NotImplementedError


def pads6(p):
    """Left-pad (begin..., end...) pads of length 2, 4 or 6 with zeros to length 6."""
    raise NotImplementedError


@overload(as5d)
def _as5d(x):
    if x.ndim == 3:
        return lambda x: x.reshape((x.shape[0], x.shape[1], 1, 1, x.shape[2]))
    if x.ndim == 4:
        return lambda x: x.reshape((x.shape[0], x.shape[1], 1, x.shape[2], x.shape[3]))
    if x.ndim == 5:
        return lambda x: x
    return None


@overload(from5d)
def _from5d(y, like):
    if like.ndim == 3:
        return lambda y, like: y.reshape((y.shape[0], y.shape[1], y.shape[4]))
    if like.ndim == 4:
        return lambda y, like: y.reshape((y.shape[0], y.shape[1], y.shape[3], y.shape[4]))
    if like.ndim == 5:
        return lambda y, like: y
    return None


@overload(tup3)
def _tup3(t, fill):
    n = len(t) if isinstance(t, types.BaseTuple) else -1
    if n == 1:
        return lambda t, fill: (np.int64(fill), np.int64(fill), np.int64(t[0]))
    if n == 2:
        return lambda t, fill: (np.int64(fill), np.int64(t[0]), np.int64(t[1]))
    if n == 3:
        return lambda t, fill: (np.int64(t[0]), np.int64(t[1]), np.int64(t[2]))
    return None


@overload(pads6)
def _pads6(p):
    n = len(p) if isinstance(p, types.BaseTuple) else -1
    if n == 2:
        return lambda p: (np.int64(0), np.int64(0), np.int64(p[0]),
                          np.int64(0), np.int64(0), np.int64(p[1]))
    if n == 4:
        return lambda p: (np.int64(0), np.int64(p[0]), np.int64(p[1]),
                          np.int64(0), np.int64(p[2]), np.int64(p[3]))
    if n == 6:
        return lambda p: (np.int64(p[0]), np.int64(p[1]), np.int64(p[2]),
                          np.int64(p[3]), np.int64(p[4]), np.int64(p[5]))
    return None


@njit(inline="always", **_JIT)
def span(off, size, stride, n):
    """(start, stop) of i in [0, n) with 0 <= i*stride + off < size."""
    start = max(0, -(off // stride))
    stop = min(n, -((off - size) // stride))
    return start, max(start, stop)


# ---------------------------------------------------------------- Conv
# Column tiles are sized to stay in L2 so the GEMM reads what im2col just wrote.
_TILE_BYTES = 1 << 19
_MIN_TILE_COLS = 384  # narrower GEMMs lose more to BLAS overhead than they gain in cache


@njit(inline="always", **_JIT)
def _copy_run(dst, d0, src, s0, n, step):
    """dst[d0 + i] = src[s0 + i*step] for i < n; unsigned indices let LLVM vectorise."""
    d0, s0, step = np.uint64(d0), np.uint64(s0), np.uint64(step)
    if step == 1:
        for i in range(np.uint64(n)):
            dst[d0 + i] = src[s0 + i]
    elif step == 2:  # constant stride: vectorises with shuffles instead of scalar loads
        for i in range(np.uint64(n)):
            dst[d0 + i] = src[s0 + i * np.uint64(2)]
    else:
        for i in range(np.uint64(n)):
            dst[d0 + i] = src[s0 + i * step]


@njit(inline="always", **_JIT)
def _zero_run(dst, d0, n):
    d0 = np.uint64(d0)
    for i in range(np.uint64(n)):
        dst[d0 + i] = 0


@njit(**_JIT)
def _im2col_rows(xf, base, cg, in3, k3, s3, p6, d3, o3, q0, q1, colf):
    """Columns for output rows q in [q0, q1) of the (OD*OH, OW) grid into flat colf."""
    D, H, W = in3
    OH, OW = o3[1], o3[2]
    pt = (q1 - q0) * OW
    r = 0
    for c in range(cg):
        for kd in range(k3[0]):
            for kh in range(k3[1]):
                for kw in range(k3[2]):
                    woff = kw * d3[2] - p6[2]
                    ow0, ow1 = span(woff, W, s3[2], OW)
                    for q in range(q0, q1):
                        dst = r * pt + (q - q0) * OW
                        idd = (q // OH) * s3[0] - p6[0] + kd * d3[0]
                        ih = (q % OH) * s3[1] - p6[1] + kh * d3[1]
                        if idd < 0 or idd >= D or ih < 0 or ih >= H or ow0 == ow1:
                            _zero_run(colf, dst, OW)
                            continue
                        _zero_run(colf, dst, ow0)
                        src = base + ((c * D + idd) * H + ih) * W + woff + ow0 * s3[2]
                        _copy_run(colf, dst + ow0, xf, src, ow1 - ow0, s3[2])
                        _zero_run(colf, dst + ow1, OW - ow1)
                    r += 1


def opt5(r):
    """as5d for an optional array: None stays None (the kernels compile a branch-free variant)."""
    raise NotImplementedError


@overload(opt5)
def _opt5(r):
    if isinstance(r, (types.NoneType, types.Omitted)) or r is None:
        return lambda r: None
    return lambda r: as5d(r)


@njit(**_JIT)
def _add_bias(y3, b, act, r3=None):
    """y3 (N, M, P) = act(y3 + b[m] (+ r3)) in place; act 1 is Relu, r3 an optional residual."""
    zero = y3.dtype.type(0)
    for n in range(y3.shape[0]):
        for m in range(y3.shape[1]):
            bm = y3.dtype.type(b[m])
            for p in range(y3.shape[2]):
                v = y3[n, m, p] + bm
                if r3 is not None:
                    v += r3[n, m, p]
                if act == 1:
                    v = v if not v < zero else zero
                y3[n, m, p] = v


@njit(**_JIT)
def _store_tile(yg, p0, tile, b, m0, act, rg=None):
    """yg[:, p0:p0+pt] = act(tile + bias (+ rg[:, p0:p0+pt])): the epilogue fused into the copy-out."""
    zero = yg.dtype.type(0)
    for m in range(tile.shape[0]):
        bm = yg.dtype.type(b[m0 + m])
        for p in range(tile.shape[1]):
            v = tile[m, p] + bm
            if rg is not None:
                v += rg[m, p0 + p]
            if act == 1:
                v = v if not v < zero else zero
            yg[m, p0 + p] = v


@njit(**_JIT)
def _conv5(x, w, b, s3, p6, d3, group, act, res):
    """Conv on canonical 5-D arrays: per (image, group, row tile) im2col + one GEMM.

    The epilogue y = act(y + b (+ res)) is fused into the GEMM tiles' copy-out.
    """
    N, C, D, H, W = x.shape
    M, cg, KD, KH, KW = w.shape
    mg, kk = M // group, cg * KD * KH * KW
    o3 = ((D + p6[0] + p6[3] - (KD - 1) * d3[0] - 1) // s3[0] + 1,
          (H + p6[1] + p6[4] - (KH - 1) * d3[1] - 1) // s3[1] + 1,
          (W + p6[2] + p6[5] - (KW - 1) * d3[2] - 1) // s3[2] + 1)
    nq, OW = o3[0] * o3[1], o3[2]
    y = np.empty((N, group, mg, nq * OW), x.dtype)
    w3 = w.reshape((group, mg, kk))
    xg = x.reshape((N, group, cg * D * H * W))
    if kk == cg and s3 == (1, 1, 1) and p6 == (0, 0, 0, 0, 0, 0):
        # 1x1 / stride 1 / no pad: the input already is the column matrix
        for n in range(N):
            for g in range(group):
                np.dot(w3[g], xg[n, g].reshape((cg, nq * OW)), y[n, g])
        if res is not None:
            _add_bias(y.reshape((N, M, nq * OW)), b, act, res.reshape((N, M, nq * OW)))
        else:
            _add_bias(y.reshape((N, M, nq * OW)), b, act)
        return y.reshape((N, M, o3[0], o3[1], o3[2]))
    rows = max(_TILE_BYTES // (kk * OW * x.itemsize), (_MIN_TILE_COLS + OW - 1) // OW)
    rows = min(nq, max(1, rows))
    colbuf = np.empty(kk * rows * OW, x.dtype)
    tilebuf = np.empty(mg * rows * OW, x.dtype)
    xf = x.reshape(x.size)
    for n in range(N):
        for g in range(group):
            for q0 in range(0, nq, rows):
                q1 = min(nq, q0 + rows)
                pt = (q1 - q0) * OW
                col = colbuf[:kk * pt]
                _im2col_rows(xf, (n * C + g * cg) * D * H * W, cg, (D, H, W),
                             (KD, KH, KW), s3, p6, d3, o3, q0, q1, col)
                tile = tilebuf[:mg * pt].reshape((mg, pt))
                np.dot(w3[g], col.reshape((kk, pt)), tile)
                if res is not None:
                    _store_tile(y[n, g], q0 * OW, tile, b, g * mg, act,
                                res.reshape((N, group, mg, nq * OW))[n, g])
                else:
                    _store_tile(y[n, g], q0 * OW, tile, b, g * mg, act)
    return y.reshape((N, M, o3[0], o3[1], o3[2]))


@njit(**_JIT)
def conv(x, w, b, strides, pads, dilations, group, act=0, res=None):
    """ONNX Conv: x (N,C,*S), w (M,C/group,*K), b (M,) -> (N,M,*O); 1-3 spatial dims.

    Fused epilogue: y = act(conv + b + res); act 0 is none, 1 Relu; res (optional) has y's shape.
    """
    y = _conv5(as5d(x), as5d(w), b, tup3(strides, 1), pads6(pads), tup3(dilations, 1), group,
               act, opt5(res))
    return from5d(y, x)


# ---------------------------------------------------------------- ConvTranspose
@njit(**_JIT)
def _col2im_add(col, yg, mg, in3, k3, s3, p6, d3, o3):
    """Scatter-add col (mg*KD*KH*KW, D*H*W) into yg (mg, OD*OH*OW); out-of-range drops."""
    D, H, W = in3
    OD, OH, OW = o3
    sw = s3[2]
    usw = np.uint64(sw)
    yf = yg.reshape(yg.size)
    r = 0
    for m in range(mg):
        for kd in range(k3[0]):
            id0, id1 = span(kd * d3[0] - p6[0], OD, s3[0], D)
            for kh in range(k3[1]):
                ih0, ih1 = span(kh * d3[1] - p6[1], OH, s3[1], H)
                for kw in range(k3[2]):
                    woff = kw * d3[2] - p6[2]
                    iw0, iw1 = span(woff, OW, sw, W)
                    cf = col[r]
                    for idd in range(id0, id1):
                        od = idd * s3[0] - p6[0] + kd * d3[0]
                        for ih in range(ih0, ih1):
                            oh = ih * s3[1] - p6[1] + kh * d3[1]
                            dst = np.uint64(((m * OD + od) * OH + oh) * OW + woff + iw0 * sw)
                            src = np.uint64((idd * H + ih) * W + iw0)
                            for i in range(np.uint64(iw1 - iw0)):
                                yf[dst + i * usw] += cf[src + i]
                    r += 1


@njit(**_JIT)
def _conv_transpose5(x, w, b, s3, p6, d3, group, o3):
    """ConvTranspose on canonical 5-D arrays: per (image, group) GEMM + col2im."""
    N, C, D, H, W = x.shape
    mg, KD, KH, KW = w.shape[1:]
    cg = C // group
    kk, P, OP = mg * KD * KH * KW, D * H * W, o3[0] * o3[1] * o3[2]
    w3 = w.reshape((group, cg, kk))
    x4 = x.reshape((N, group, cg, P))
    y = np.zeros((N, group, mg, OP), x.dtype)
    col = np.empty((kk, P), x.dtype)
    for n in range(N):
        for g in range(group):
            np.dot(w3[g].T, x4[n, g], col)
            _col2im_add(col, y[n, g], mg, (D, H, W), (KD, KH, KW), s3, p6, d3, o3)
    _add_bias(y.reshape((N, group * mg, OP)), b, 0)
    return y.reshape((N, group * mg, o3[0], o3[1], o3[2]))


@njit(**_JIT)
def conv_transpose(x, w, b, strides, pads, dilations, group, out_shape):
    """ONNX ConvTranspose: x (N,C,*S), w (C,M/group,*K), b (M,) -> (N,M,*out_shape).

    Only the begin pads are used; out_shape (from shapes.conv_transpose_geometry) fixes the
    extent, which covers end pads, output_padding and explicit output_shape.
    """
    y = _conv_transpose5(as5d(x), as5d(w), b, tup3(strides, 1), pads6(pads),
                         tup3(dilations, 1), group, tup3(out_shape, 1))
    return from5d(y, x)
