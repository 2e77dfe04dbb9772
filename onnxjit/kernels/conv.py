"""Conv and ConvTranspose kernels: im2col / col2im around BLAS GEMM.

Conv (``_conv5``) works per (image, group) and tile of output rows: the input is copied once
into a zero-padded, stride-phase-split layout (``phase_split``; skipped for stride 1 without
padding), from which im2col (``im2col_split``) is plain contiguous runs; ``gemm_into`` then
writes the tile's GEMM straight into its block of y (BLAS with a leading dimension, no tile
buffer or copy-out), and the epilogue act(y + b (+ res)) runs in place while the block is in
cache.  1x1 kernels skip im2col (the possibly subsampled input is the column matrix).

Spatial rank: 1-D, 2-D and 3-D are all supported directly.  ``x`` is (N, C, *S) with
len(S) = k in {1, 2, 3}; ``strides``/``dilations`` are k-tuples of ints and ``pads`` is a
2k-tuple (begin..., end...) as produced by ``shapes.conv_geometry``.  Internally every input
is viewed as (N, C, D, H, W) with leading size-1 spatial dims, which costs nothing.
All array arguments must be C-contiguous; the output has the input's dtype (float32/64).
"""

import numpy as np
from numba import njit, prange, types
from numba.core import errors
from numba.extending import overload
from numba.np.linalg import ensure_blas

from . import PRANGE_ONLY
from .parallel import CONVT_PAR_MIN, I0, num_threads, split_range

from . import JIT as _JIT


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
def put3(geo, at, t):
    """geo[at:at + 3] = the 3-tuple t, one element at a time: a tuple stored into a slice
    costs Numba ~4.5 s of typing per compiled entry (Zen 3; ~2 s on Zen 4), three element
    stores ~0.05 s."""
    geo[at] = t[0]
    geo[at + 1] = t[1]
    geo[at + 2] = t[2]


@njit(inline="always", **_JIT)
def put_window(geo, at, k3, s3, p6, d3, o3):
    """geo[at:at + 18] = kernel (3), strides (3), pads (6), dilations (3), output sizes (3): the
    window geometry the packed conv and the pools hand their parallel loops as one int64 array
    (Numba's parfors reject nested tuples)."""
    put3(geo, at, k3)
    put3(geo, at + 3, s3)
    put3(geo, at + 6, (p6[0], p6[1], p6[2]))
    put3(geo, at + 9, (p6[3], p6[4], p6[5]))
    put3(geo, at + 12, d3)
    put3(geo, at + 15, o3)


@njit(inline="always", **_JIT)
def span(off, size, stride, n):
    """(start, stop) of i in [0, n) with 0 <= i*stride + off < size."""
    start = max(0, -(off // stride))
    stop = min(n, -((off - size) // stride))
    return start, max(start, stop)


# ---------------------------------------------------------------- BLAS
# numba_xxgemm is Numba's own BLAS entry (scipy's ?gemm, column-major), also used by
# np.linalg.pinv.  Calling it directly lets a GEMM write a strided block of a larger array
# (np.dot's `out` must be contiguous), so conv tiles land in y without a copy-out.
ensure_blas()
_xxgemm = types.ExternalFunction("numba_xxgemm", types.intc(
    types.char, types.char, types.char, types.intp, types.intp, types.intp,
    types.voidptr, types.voidptr, types.intp, types.voidptr, types.intp,
    types.voidptr, types.voidptr, types.intp))


def _same_dtype(a, b, c):
    """Compile-time check that a, b, c share one float32/float64 dtype (BLAS reads raw memory)."""
    raise NotImplementedError


@overload(_same_dtype)
def _same_dtype_impl(a, b, c):
    if not (a.dtype == b.dtype == c.dtype and a.dtype in (types.float32, types.float64)):
        raise errors.TypingError("gemm_into needs one float32/float64 dtype, got %s, %s, %s"
                                 % (a.dtype, b.dtype, c.dtype))
    return lambda a, b, c: None


@njit(**_JIT)
def gemm_into(a, b, c):
    """c[...] = a @ b for float32/64 2-D views with unit-stride rows (any row stride).

    Row-major C = A @ B is column-major C^T = B^T @ A^T, so BLAS gets (B, A) untransposed
    with the row strides as leading dimensions.
    """
    _same_dtype(a, b, c)
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape[0] != m or c.shape[1] != n:
        raise ValueError("gemm_into: shape mismatch")
    if m == 0 or n == 0:
        return
    isz = c.itemsize
    if ((k > 1 and a.strides[1] != isz) or (n > 1 and b.strides[1] != isz)
            or (n > 1 and c.strides[1] != isz)):
        raise ValueError("gemm_into: rows must be unit-stride")
    ab = np.zeros(2, c.dtype)  # alpha = 1, beta = 0
    ab[0] = 1
    kind = np.int8(115) if isz == 4 else np.int8(100)  # 's' / 'd'
    nt = np.int8(78)  # 'N'
    _xxgemm(kind, nt, nt, n, m, k, ab[:1].ctypes, b.ctypes, max(1, n, b.strides[0] // isz),
            a.ctypes, max(1, k, a.strides[0] // isz), ab[1:].ctypes, c.ctypes,
            max(1, n, c.strides[0] // isz))
    ab[0] = 0  # keeps alpha/beta alive across the call


# ---------------------------------------------------------------- Conv
# Column tiles are sized to stay in L2 so the GEMM reads what im2col just wrote.
_TILE_BYTES = 1 << 19
_MIN_TILE_COLS = 384  # narrower GEMMs lose more to BLAS overhead than they gain in cache
# 1x1 stride-1 convs need no im2col; column blocks only keep the epilogue's block in L2.
PW_TILE_BYTES = 1 << 21
PW_MIN_TILE_COLS = 1024
# Kernels at least this wide read a phase-split copy of the input (many short, partly padded
# runs otherwise); narrower ones (3x3, 7x1) im2col straight from x, which measured 2-5% faster.
SPLIT_MIN_KW = 5


@njit(inline="always", **_JIT)
def copy_run(dst, d0, src, s0, n, step):
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
def phase_split(xf, base, cg, in3, s3, p6, r3, e3, j0, xs):
    """Padded, stride-phase-split copy of one (image, group) input (or a band of rows) for im2col.

    xs[c, rd, rh, rw, i, j, l] = xpad[c, i*sd + rd, (j0 + j)*sh + rh, l*sw + rw] for phases
    r < R and i, j, l < E (r3, e3), where xpad is xf[base:] as (cg, D, H, W) with begin pads
    p6[:3] and zeros outside.  Kernel tap k (dilation d) of output o then reads phase (k*d) % s
    at o + (k*d) // s: consecutive outputs read consecutive elements.

    Each input row is copied once into a zero-bordered line buffer, which is then split into
    its Rw phases without bounds checks (stride 2 by one interleaved loop).
    """
    D, H, W = in3
    Rd, Rh, Rw = r3
    Ed, Eh, Ew = e3
    sw, pw = s3[2], p6[2]
    plane = Ed * Eh * Ew
    # line[t] = xpad row at column t - pw, t < Ew * sw (covers every l*sw + rw)
    line = np.zeros(max(Ew * sw, pw + W), xs.dtype)
    uew = np.uint64(Ew)
    for c in range(cg):
        for rd in range(Rd):
            for rh in range(Rh):
                dst = (((c * Rd + rd) * Rh + rh) * Rw) * plane
                for i in range(Ed):
                    z = i * s3[0] + rd - p6[0]
                    for j in range(Eh):
                        v = (j0 + j) * s3[1] + rh - p6[1]
                        o = dst + (i * Eh + j) * Ew
                        if z < 0 or z >= D or v < 0 or v >= H:
                            for rw in range(Rw):
                                _zero_run(xs, o + rw * plane, Ew)
                            continue
                        copy_run(line, pw, xf, base + ((c * D + z) * H + v) * W, W, 1)
                        if Rw == 1:
                            copy_run(xs, o, line, 0, Ew, sw)
                        elif Rw == 2 and sw == 2:
                            o0, o1 = np.uint64(o), np.uint64(o + plane)
                            for t in range(uew):
                                a = line[t * np.uint64(2)]
                                b = line[t * np.uint64(2) + np.uint64(1)]
                                xs[o0 + t] = a
                                xs[o1 + t] = b
                        else:
                            for rw in range(Rw):
                                copy_run(xs, o + rw * plane, line, rw, Ew, sw)


@njit(**_JIT)
def im2col_split(xs, base, cg, k3, s3, d3, r3, e3, j0, o3, q0, q1, colf):
    """Column rows (c, kd, kh, kw) for output rows q in [q0, q1) of the (OD*OH, OW) grid.

    Reads the phase-split input xs[base:] (see phase_split; its rows start at j0): each
    (row, q) is one run of OW contiguous elements, with no bounds checks or zero fill.
    """
    OH, OW = o3[1], o3[2]
    Rd, Rh, Rw = r3
    Ed, Eh, Ew = e3
    plane = Ed * Eh * Ew
    uow = np.uint64(OW)
    dst = np.uint64(0)
    for c in range(cg):
        for kd in range(k3[0]):
            rd, ed = (kd * d3[0]) % s3[0], (kd * d3[0]) // s3[0]
            for kh in range(k3[1]):
                rh, eh = (kh * d3[1]) % s3[1], (kh * d3[1]) // s3[1]
                for kw in range(k3[2]):
                    rw, ew = (kw * d3[2]) % s3[2], (kw * d3[2]) // s3[2]
                    p0 = base + (((c * Rd + rd) * Rh + rh) * Rw + rw) * plane + ew
                    od, oh = q0 // OH, q0 % OH
                    for _ in range(q0, q1):
                        src = np.uint64(p0 + ((od + ed) * Eh + oh - j0 + eh) * Ew)
                        for i in range(uow):
                            colf[dst + i] = xs[src + i]
                        dst += uow
                        oh += 1
                        if oh == OH:
                            oh = 0
                            od += 1


@njit(**_JIT)
def im2col_rows(xf, base, cg, in3, k3, s3, p6, d3, o3, q0, q1, colf):
    """Columns for output rows q in [q0, q1) of the (OD*OH, OW) grid into flat colf.

    Reads x directly (strided runs, bounds and zero fill per run): for small kernels this is
    cheaper than a phase-split copy of the input first.  The pixels of whole rows of
    ``im2col_span``.
    """
    im2col_span(xf, base, cg, in3, k3, s3, p6, d3, o3, q0 * o3[2], q1 * o3[2], colf)


@njit(**_JIT)
def im2col_span(xf, base, cg, in3, k3, s3, p6, d3, o3, p0, p1, colf):
    """Columns for the output pixels p in [p0, p1) of the flattened (OD*OH*OW) grid into flat
    colf (one row per tap, p1 - p0 columns): ``im2col_rows`` for a run of pixels that may
    start and end inside an output row, so that a caller can cut tiles of whole 16-column
    panels whatever the output width.

    Per tap and output row one run: zeros, a strided copy of the input row, zeros.  The row's
    (depth, height) position is stepped, not divided out of q: at 3x3 a run is a few dozen
    floats, and two integer divisions per run had cost more than the copy (128->128 at 28x28,
    one tile of 784 columns: 969 us for 3.6 MB of columns).  Two 2-D cases have their own
    loops: stride 1 as wide as the input (``_im2col_span_s1``: a tap is one contiguous copy)
    and stride 2 across (``_im2col_span_s2``: rows split into even and odd columns once)."""
    D, H, W = in3
    OH, OW = o3[1], o3[2]
    pt = p1 - p0
    if pt <= 0:
        return
    qa, qb = p0 // OW, (p1 - 1) // OW + 1
    # the 2-D loops below: one depth slice in, one tap and one slice out
    flat = D == 1 and k3[0] == 1 and o3[0] == 1
    if flat and s3[1] == 1 and s3[2] == 1 and d3[2] == 1 and W == OW:
        _im2col_span_s1(xf, base, cg, H, W, OH, k3, p6, d3, p0, p1, colf)
        return
    if flat and s3[2] == 2 and d3[2] == 1 and W >= 2:
        _im2col_span_s2(xf, base, cg, H, W, OH, OW, k3, s3, p6, d3, p0, p1, colf)
        return
    da0, ha0 = qa // OH, qa % OH
    r = 0
    for c in range(cg):
        cbase = base + c * D * H * W
        for kd in range(k3[0]):
            for kh in range(k3[1]):
                for kw in range(k3[2]):
                    woff = kw * d3[2] - p6[2]
                    ow0, ow1 = span(woff, W, s3[2], OW)
                    dd, hh = da0, ha0
                    for q in range(qa, qb):
                        a = max(0, p0 - q * OW)
                        b = min(OW, p1 - q * OW)
                        dst = r * pt + q * OW - p0      # colf column of output (q, 0)
                        idd = dd * s3[0] - p6[0] + kd * d3[0]
                        ih = hh * s3[1] - p6[1] + kh * d3[1]
                        hh += 1
                        if hh == OH:
                            hh = 0
                            dd += 1
                        lo, hi = max(a, ow0), min(b, ow1)
                        if idd < 0 or idd >= D or ih < 0 or ih >= H or lo >= hi:
                            _zero_run(colf, dst + a, b - a)
                            continue
                        _zero_run(colf, dst + a, lo - a)
                        src = cbase + (idd * H + ih) * W + woff + lo * s3[2]
                        copy_run(colf, dst + lo, xf, src, hi - lo, s3[2])
                        _zero_run(colf, dst + hi, b - hi)
                    r += 1


@njit(**_JIT)
def _im2col_span_s2(xf, base, cg, H, W, OH, OW, k3, s3, p6, d3, p0, p1, colf):
    """``im2col_span`` for 2-D convs of stride 2 across, no dilation across: each input row a
    tap reads is split once into its even and odd columns (a line buffer), and every tap of
    that row is then a contiguous copy from one of the two halves, where ``copy_run`` with step
    2 per tap and output row had cost ~130 cycles for 28 floats (64->128 at 56x56 /2: 0.7 ms of
    im2col beside 1.8 ms of GEMM)."""
    pt = p1 - p0
    KH, KW = k3[1], k3[2]
    half = (W + 1) // 2
    ph = np.empty(2 * half, xf.dtype)          # even columns, then odd columns
    tap = np.empty(4 * KW, np.int64)           # per kw: first, stop output column; phase; shift
    for kw in range(KW):
        woff = kw - p6[2]                      # ix = 2 * ox + woff
        ow0, ow1 = span(woff, W, np.int64(2), OW)
        par = woff & 1
        tap[4 * kw], tap[4 * kw + 1] = ow0, ow1
        tap[4 * kw + 2], tap[4 * kw + 3] = par * half, (woff - par) // 2
    qa, qb = p0 // OW, (p1 - 1) // OW + 1
    u2 = np.uint64(2)
    for c in range(cg):
        cbase = base + c * H * W
        for kh in range(KH):
            r0 = (c * KH + kh) * KW
            for q in range(qa, qb):
                a = max(0, p0 - q * OW)
                b = min(OW, p1 - q * OW)
                ih = q * s3[1] - p6[1] + kh * d3[1]
                if ih < 0 or ih >= H:
                    for kw in range(KW):
                        _zero_run(colf, (r0 + kw) * pt + q * OW - p0 + a, b - a)
                    continue
                src = np.uint64(cbase + ih * W)
                uh = np.uint64(half)
                for i in range(np.uint64(W // 2)):
                    ph[i] = xf[src + u2 * i]
                    ph[uh + i] = xf[src + u2 * i + np.uint64(1)]
                if W % 2 == 1:
                    ph[W // 2] = xf[cbase + ih * W + W - 1]
                for kw in range(KW):
                    dst = (r0 + kw) * pt + q * OW - p0
                    lo, hi = max(a, tap[4 * kw]), min(b, tap[4 * kw + 1])
                    if lo >= hi:
                        _zero_run(colf, dst + a, b - a)
                        continue
                    _zero_run(colf, dst + a, lo - a)
                    copy_run(colf, dst + lo, ph, tap[4 * kw + 2] + lo + tap[4 * kw + 3], hi - lo,
                             1)
                    _zero_run(colf, dst + hi, b - hi)


@njit(**_JIT)
def _im2col_span_s1(xf, base, cg, H, W, OH, k3, p6, d3, p0, p1, colf):
    """``im2col_span`` for 2-D, stride 1 across and down, no dilation across, output as wide as
    the input ("same" padding): output pixel p of tap (c, kh, kw)
    reads input element p + shift of channel c, so a tap's columns over the rows where the
    input row exists are one contiguous copy (a run per output row at 3x3 had cost more than
    the copy itself); the columns that fell outside the input row, which that copy filled from
    the neighbouring row, are then zeroed, one or two per row. The copy starts and ends inside
    the first and last row's valid columns, so it never reads outside channel c."""
    OW = W
    pt = p1 - p0
    pl = p6[2]
    x0, y1 = p0 % OW, (p1 - 1) % OW      # columns of the first and last pixel
    r = 0
    for c in range(cg):
        cbase = base + c * H * W
        for kh in range(k3[1]):
            dy = kh * d3[1] - p6[1]                       # ih = oy + dy
            oy_lo, oy_hi = max(0, -dy), min(OH, H - dy)   # output rows whose input row exists
            for kw in range(k3[2]):
                woff = kw - pl                            # ix = ox + woff
                ow0, ow1 = max(0, -woff), min(OW, W - woff)
                d0 = r * pt - p0                          # colf index of pixel p: d0 + p
                lo, hi = max(p0, oy_lo * OW), min(p1, oy_hi * OW)
                if lo >= hi or ow0 >= ow1:
                    _zero_run(colf, d0 + p0, pt)
                    r += 1
                    continue
                # the copy: from the first to the last pixel whose input column exists
                x = x0 if lo == p0 else 0
                a = lo + (ow0 - x if x < ow0 else (OW - x + ow0 if x >= ow1 else 0))
                xa = x if ow0 <= x < ow1 else ow0         # a's column
                y = y1 if hi == p1 else OW - 1
                b = hi - (y - ow1 + 1 if y >= ow1 else (y + OW - ow1 + 1 if y < ow0 else 0))
                if a >= b:
                    _zero_run(colf, d0 + p0, pt)
                    r += 1
                    continue
                _zero_run(colf, d0 + p0, a - p0)
                copy_run(colf, d0 + a, xf, cbase + a + dy * W + woff, b - a, 1)
                _zero_run(colf, d0 + b, p1 - b)
                # the columns outside the input row that the copy took from the next row
                if ow0 > 0 or ow1 < OW:
                    for rb in range(a - xa, b, OW):
                        for ox in range(ow0):
                            if rb + ox >= a:
                                colf[d0 + rb + ox] = 0
                        for ox in range(ow1, OW):
                            if rb + ox < b:
                                colf[d0 + rb + ox] = 0
                r += 1


def flat_opt(r):
    """r.reshape(r.size) for an optional array; None stays None."""
    raise NotImplementedError


@overload(flat_opt)
def _flat_opt(r):
    if isinstance(r, (types.NoneType, types.Omitted)) or r is None:
        return lambda r: None
    return lambda r: r.reshape(r.size)


@njit(**_JIT)
def _epilogue(yf, off, ld, rows, cols, b, m0, act, rf=None):
    """In place on a block of flat y: y[off + m*ld + p] = act(y + b[m0 + m] (+ rf[same])).

    m < rows, p < cols; act 0 is none, 1 Relu; rf (optional residual) is indexed like yf, and
    an empty one is none.
    """
    zero = yf.dtype.type(0)
    uc = np.uint64(cols)
    for m in range(rows):
        bm = yf.dtype.type(b[m0 + m])
        o = np.uint64(off + m * ld)
        if rf is not None and rf.size != 0:
            if act == 1:
                for p in range(uc):
                    v = yf[o + p] + bm + rf[o + p]
                    yf[o + p] = v if not v < zero else zero
            else:
                for p in range(uc):
                    yf[o + p] = yf[o + p] + bm + rf[o + p]
        elif act == 1:
            for p in range(uc):
                v = yf[o + p] + bm
                yf[o + p] = v if not v < zero else zero
        else:
            for p in range(uc):
                yf[o + p] = yf[o + p] + bm


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
def _conv5(x, w, b, s3, p6, d3, group, act, res):
    """Conv on canonical 5-D arrays: per (image, group) and tile of output rows, im2col and one
    GEMM written straight into y, then the epilogue y = act(y + b (+ res)) on the (hot) block.

    im2col source: x itself for stride 1 without padding; for 1x1 kernels with stride / pads
    and kernels >= SPLIT_MIN_KW wide, a padded, stride-phase-split copy (phase_split) from
    which im2col is plain contiguous runs (for 1-D and 2-D convs made per tile, the band of
    input rows the tile reads, so it stays in cache); otherwise x with bounds per run
    (im2col_rows).  1x1 kernels skip im2col: the (split) input is the column matrix.
    """
    N, C, D, H, W = x.shape
    M, cg, KD, KH, KW = w.shape
    mg, kk = M // group, cg * KD * KH * KW
    k3 = (KD, KH, KW)
    o3 = ((D + p6[0] + p6[3] - (KD - 1) * d3[0] - 1) // s3[0] + 1,
          (H + p6[1] + p6[4] - (KH - 1) * d3[1] - 1) // s3[1] + 1,
          (W + p6[2] + p6[5] - (KW - 1) * d3[2] - 1) // s3[2] + 1)
    nq, OW = o3[0] * o3[1], o3[2]
    P = nq * OW
    y = np.empty((N, M, P), x.dtype)
    if y.size == 0:
        return y.reshape((N, M, o3[0], o3[1], o3[2]))
    # split layout: per dim, R phases (the stride where the kernel spans > 1, else 1) of E
    r3 = (s3[0] if KD > 1 else 1, s3[1] if KH > 1 else 1, s3[2] if KW > 1 else 1)
    e3 = (o3[0] + (KD - 1) * d3[0] // s3[0], o3[1] + (KH - 1) * d3[1] // s3[1],
          o3[2] + (KW - 1) * d3[2] // s3[2])
    direct = s3 == (1, 1, 1) and p6 == (0, 0, 0, 0, 0, 0)  # x already is that layout
    pointwise = kk == cg
    split = not direct and (pointwise or KW >= SPLIT_MIN_KW)
    banded = split and e3[0] == 1  # 1-D/2-D: split per tile (q is the output row)
    halo = e3[1] - o3[1]
    isz = x.itemsize
    if pointwise and direct:  # tiles are column blocks of x itself
        pt = min(P, max(PW_TILE_BYTES // (cg * isz), PW_MIN_TILE_COLS))
        rows = 0
    else:
        rows = max(_TILE_BYTES // (kk * OW * isz), (_MIN_TILE_COLS + OW - 1) // OW)
        rows = min(nq, max(1, rows))
        pt = rows * OW
    nphase = r3[0] * r3[1] * r3[2]
    xf = x.reshape(x.size)
    if direct or not split:
        xs = xf
    elif banded:
        xs = np.empty(cg * nphase * (rows + halo) * e3[2], x.dtype)
    else:
        xs = np.empty(cg * nphase * e3[0] * e3[1] * e3[2], x.dtype)
    colbuf = xs[:0] if pointwise else np.empty(kk * pt, x.dtype)
    w3 = w.reshape((group, mg, kk))
    yf = y.reshape(y.size)
    rf = flat_opt(res)
    for n in range(N):
        for g in range(group):
            xoff = (n * C + g * cg) * D * H * W
            base = xoff if direct else 0
            if split and not banded:
                phase_split(xf, xoff, cg, (D, H, W), s3, p6, r3, e3, np.int64(0), xs)
            for p0 in range(0, P, pt):
                p1 = min(P, p0 + pt)
                q0, q1 = p0 // OW, p1 // OW
                eb, j0 = e3, 0
                if banded:
                    eb, j0 = (np.int64(1), q1 - q0 + halo, e3[2]), q0
                    phase_split(xf, xoff, cg, (D, H, W), s3, p6, r3, eb, j0, xs)
                if pointwise:
                    if banded:
                        bmat = xs[:cg * (p1 - p0)].reshape((cg, p1 - p0))
                    else:
                        bmat = xs[base:base + cg * P].reshape((cg, P))[:, p0:p1]
                else:
                    col = colbuf[:kk * (p1 - p0)]
                    if direct or split:
                        im2col_split(xs, base, cg, k3, s3, d3, r3, eb, j0, o3, q0, q1, col)
                    else:
                        im2col_rows(xf, xoff, cg, (D, H, W), k3, s3, p6, d3, o3, q0, q1, col)
                    bmat = col.reshape((kk, p1 - p0))
                gemm_into(w3[g], bmat, y[n, g * mg:(g + 1) * mg, p0:p1])
                _epilogue(yf, (n * M + g * mg) * P + p0, P, mg, p1 - p0, b, g * mg, act, rf)
    return y.reshape((N, M, o3[0], o3[1], o3[2]))


@njit(**_JIT)
def conv(x, w, b, strides, pads, dilations, group, act=0, res=None):
    """ONNX Conv: x (N,C,*S), w (M,C/group,*K), b (M,) -> (N,M,*O); 1-3 spatial dims.

    Fused epilogue: y = act(conv + b + res); act 0 is none, 1 Relu; res (optional) has y's shape,
    and an empty one is none.  The lowerings call it in the canonical form (kernels/shapes.py:
    5-D x, w and res, 3-entry geometry, act and res given), one compiled signature per dtype.
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
def _tile_rows(cf, yf, y0, M, KH, KW, H, W, b, u0, u1):
    """Output rows of ``_conv_transpose_tiles`` for units [u0, u1) of (channel m, input row h):
    each writes its KH output rows whole, interleaving the KW phases of col in order, so the
    stores run along the row (no strided passes over it per phase)."""
    HW, OW = H * W, W * KW
    w64, kw64, hw64 = np.uint64(W), np.uint64(KW), np.uint64(HW)
    for u in range(u0, u1):
        m, h = u // H, u % H
        bm = b[m]
        for kh in range(KH):
            # unsigned offsets: signed ones carry Numba's negative-index wraparound, which kept
            # the loop from vectorizing
            out = np.uint64(y0 + ((m * H + h) * KH + kh) * OW)
            base = np.uint64((m * KH + kh) * KW * HW + h * W)
            for j in range(w64):
                for kw in range(kw64):
                    yf[out + j * kw64 + kw] = cf[base + kw * hw64 + j] + bm


@njit(parallel=PRANGE_ONLY, **_JIT)
def _put_tiles(cf, yf, y0, M, KH, KW, H, W, b):
    """One image's tiles (cf: its GEMM output, M*KH*KW rows of H*W) into y at y0, plus the
    bias; (channel, input row) units split over threads from CONVT_PAR_MIN outputs."""
    nt = min(num_threads(), M * H) if M * H * KH * W * KW >= CONVT_PAR_MIN else 1
    if nt > 1:
        for t in prange(nt):
            u0, u1 = split_range(M * H, nt, t, 1)
            _tile_rows(cf, yf, y0, M, KH, KW, H, W, b, u0, u1)
    else:
        _tile_rows(cf, yf, y0, M, KH, KW, H, W, b, I0, M * H)


@njit(**_JIT)
def _conv_transpose_tiles(x, w, b):
    """ConvTranspose with kernel == stride (a decoder's 2x2 / stride 2 upsampling), no pads,
    no dilation, one group, 2-D: every input pixel writes its own KH x KW output tile, so
    Y = scatter(W^T @ X + b) with one GEMM per image and no overlap to accumulate; the scatter
    splits its (channel, input row) units over threads from CONVT_PAR_MIN outputs."""
    N, C, D, H, W = x.shape
    M, KH, KW = w.shape[1], w.shape[3], w.shape[4]
    kk = M * KH * KW
    wt = np.ascontiguousarray(w.reshape((C, kk)).T)
    y = np.empty((N, M, 1, H * KH, W * KW), x.dtype)
    yf = y.reshape(y.size)
    bt = b.astype(x.dtype)
    per_image = M * H * KH * W * KW
    for n in range(N):
        cf = np.dot(wt, np.ascontiguousarray(x[n].reshape((C, H * W)))).reshape(kk * H * W)
        _put_tiles(cf, yf, n * per_image, M, KH, KW, H, W, bt)
    return y


@njit(**_JIT)
def tiles_to_image(cols, b, M, KH, KW):
    """A ConvTranspose whose kernel equals its stride, after its GEMM: cols (N, M*KH*KW, H, W)
    (the 1x1 conv by W^T, sgemm.conv1x1_packed_*) -> (N, M, H*KH, W*KW) + b, each input pixel's
    KH x KW tile put in place; (channel, input row) units split over threads from
    CONVT_PAR_MIN outputs."""
    N, kk, H, W = cols.shape
    if kk != M * KH * KW or b.size != M:
        raise ValueError("tiles_to_image: cols do not match M x KH x KW / the bias")
    y = np.empty((N, M, H * KH, W * KW), cols.dtype)
    if y.size == 0:
        return y
    yf = y.reshape(y.size)
    cf_all = np.ascontiguousarray(cols).reshape(cols.size)
    bt = b.astype(cols.dtype)
    per_image = M * H * KH * W * KW
    for n in range(N):
        _put_tiles(cf_all[n * kk * H * W:(n + 1) * kk * H * W], yf, n * per_image, M, KH, KW,
                   H, W, bt)
    return y


@njit(**_JIT)
def _conv_transpose5(x, w, b, s3, p6, d3, group, o3):
    """ConvTranspose on canonical 5-D arrays: per (image, group) GEMM + col2im."""
    N, C, D, H, W = x.shape
    mg, KD, KH, KW = w.shape[1:]
    if (group == 1 and D == 1 and KD == 1 and s3[0] == 1 and s3[1] == KH and s3[2] == KW
            and d3[0] == 1 and d3[1] == 1 and d3[2] == 1
            and p6[0] == 0 and p6[1] == 0 and p6[2] == 0
            and o3[0] == 1 and o3[1] == H * KH and o3[2] == W * KW):
        return _conv_transpose_tiles(x, w, b)
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
