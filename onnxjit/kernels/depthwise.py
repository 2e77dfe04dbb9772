"""Depthwise convolution (group == C == M, one filter per channel) as direct convolution.

``depthwise_conv(x, w, b, strides, pads, dilations, act)`` takes x (N, C, *S) with 1..3
spatial dims, w (C, 1, *K), b (C,), ``strides``/``dilations`` k-tuples and ``pads`` a 2k-tuple
(begin..., end...) as from ``shapes.conv_geometry``; act 0 = none, 1 = Relu (fused; 2 Clip,
3 HardSwish: kernels/epilogue.py).  Arrays must be C-contiguous float32/float64; the output has
x's dtype.

Three schemes, all built on long flat loops (LLVM vectorises those; per-row loops over 7..28
columns mostly run scalar):

* stride 1 with an output the size of the input ("same" padding): per channel, each tap is
  one run over the whole flat plane, y[q] += w_t * x[q + e_t]; reads that wrap across a row
  or plane edge are masked out by per-tap validity masks (no padded copy).
* stride 2 in H and W on planes up to 32x32: x is split once into its even- and odd-index
  halves, which turns every tap into a unit-stride masked run (``_dw_s2``).
* anything else: the padded, phase-split planes of ``pool.fill_phases`` (stride s becomes s
  unit-stride phases), one run per tap over the phase buffer, then a copy-out per row.

Taps are fused three per loop (one accumulator load/store per three multiply-adds).
"""

import numpy as np
from numba import njit, prange

from .conv import as5d, from5d, pads6, tup3
from . import PRANGE_ONLY
from .epilogue import act_run, load_bias, vact_n
from .parallel import I0, PAR_MIN_MACS, num_threads, split_range
from .simd import (LANES16 as LANES, vadd, vevens, vfma, vmul, vnext,
                   vodds, vstore, vstorem)
from .simd import native as V
from .pool import fill_phases, phase_buffers

from . import JIT as _JIT
# The parity split wastes half its taps and deinterleaves all of x up front: it wins on
# small planes (no per-row fill), the phase buffers win once planes reach ~32x32.
_S2_MAX_PLANE = 1024


@njit(inline="always", **_JIT)
def _sel(m, v, z):
    return v if m else z


@njit(inline="always", **_JIT)
def _fma_taps(acc, a0, b, o0, o1, o2, w0, w1, w2, ntap, n, first, bias):
    """acc[a0+i] = (bias if first else acc[a0+i]) + sum_t w_t * b[o_t+i], first ntap taps."""
    a0 = np.uint64(a0)
    o0, o1, o2 = np.uint64(o0), np.uint64(o1), np.uint64(o2)
    if ntap == 3:
        for i in range(np.uint64(n)):
            v = w0 * b[o0 + i] + w1 * b[o1 + i] + w2 * b[o2 + i]
            acc[a0 + i] = (bias if first else acc[a0 + i]) + v
    elif ntap == 2:
        for i in range(np.uint64(n)):
            v = w0 * b[o0 + i] + w1 * b[o1 + i]
            acc[a0 + i] = (bias if first else acc[a0 + i]) + v
    else:
        for i in range(np.uint64(n)):
            acc[a0 + i] = (bias if first else acc[a0 + i]) + w0 * b[o0 + i]


@njit(inline="always", **_JIT)
def _masked_fma_taps(acc, a0, b, s0, o0, o1, o2, mf, m0, m1, m2, w0, w1, w2, ntap, q0, q1,
                     first, bias):
    """Like _fma_taps over q in [q0, q1), reading b[s0+o_t+q] only where mf[m_t+q] holds.

    mf is the flat mask array and m_t the start of tap t's mask (no array views here: in a
    per-plane loop their reference counting costs more than the arithmetic).
    """
    a0 = np.uint64(a0)
    s0, s1, s2 = np.uint64(s0 + o0), np.uint64(s0 + o1), np.uint64(s0 + o2)
    m0, m1, m2 = np.uint64(m0), np.uint64(m1), np.uint64(m2)
    z = acc.dtype.type(0)
    if ntap == 3:
        for q in range(np.uint64(q0), np.uint64(q1)):
            v = w0 * _sel(mf[m0 + q], b[s0 + q], z) + w1 * _sel(mf[m1 + q], b[s1 + q], z) \
                + w2 * _sel(mf[m2 + q], b[s2 + q], z)
            acc[a0 + q] = (bias if first else acc[a0 + q]) + v
    elif ntap == 2:
        for q in range(np.uint64(q0), np.uint64(q1)):
            v = w0 * _sel(mf[m0 + q], b[s0 + q], z) + w1 * _sel(mf[m1 + q], b[s1 + q], z)
            acc[a0 + q] = (bias if first else acc[a0 + q]) + v
    else:
        for q in range(np.uint64(q0), np.uint64(q1)):
            acc[a0 + q] = (bias if first else acc[a0 + q]) + w0 * _sel(mf[m0 + q], b[s0 + q], z)


# ---------------------------------------------------------------- stride 1, same size
@njit(**_JIT)
def _dw_same(x, w, b, p6, d3, act, bounds):
    """Stride-1 depthwise conv whose output has the input's spatial shape (masked taps)."""
    N, C, D, H, W = x.shape
    KD, KH, KW = w.shape[2], w.shape[3], w.shape[4]
    P, nt = D * H * W, KD * KH * KW
    y = np.empty(N * C * P, x.dtype)
    if N * C * P == 0:
        return y.reshape(x.shape)
    offs = np.empty(nt, np.int64)
    masks = np.empty((nt, P), np.bool_)
    t = 0
    for kd in range(KD):
        ed = kd * d3[0] - p6[0]
        for kh in range(KH):
            eh = kh * d3[1] - p6[1]
            for kw in range(KW):
                ew = kw * d3[2] - p6[2]
                offs[t] = (ed * H + eh) * W + ew
                q = 0
                for i in range(D):
                    for j in range(H):
                        for k in range(W):
                            masks[t, q] = (0 <= i + ed < D) and (0 <= j + eh < H) \
                                and (0 <= k + ew < W)
                            q += 1
                t += 1
    emin, emax = offs.min(), offs.max()
    mf = masks.reshape(masks.size)
    xf = x.reshape(x.size)
    wf = w.reshape((C, nt)).astype(x.dtype)
    bf = b.astype(x.dtype)
    for nc in range(N * C):
        c, s0 = nc % C, nc * P
        # reads past either end of x happen only in the first/last plane, always masked
        lo = min(P, max(0, -(s0 + emin)))
        hi = max(lo, min(P, xf.size - s0 - emax))
        bias = bf[c]
        n3 = nt - nt % 3
        for t in range(0, n3, 3):  # ntap is a literal 3 here: the loop body is specialised
            _masked_fma_taps(y, s0, xf, s0, offs[t], offs[t + 1], offs[t + 2], mf, t * P,
                             (t + 1) * P, (t + 2) * P, wf[c, t], wf[c, t + 1], wf[c, t + 2], 3,
                             lo, hi, t == 0, bias)
        if n3 < nt:
            u1 = min(n3 + 1, nt - 1)
            _masked_fma_taps(y, s0, xf, s0, offs[n3], offs[u1], offs[u1], mf, n3 * P, u1 * P,
                             u1 * P, wf[c, n3], wf[c, u1], wf[c, u1], nt - n3, lo, hi, n3 == 0,
                             bias)
        if lo > 0 or hi < P:
            for q in list(range(0, lo)) + list(range(hi, P)):
                acc = bias
                for t in range(nt):
                    i = s0 + q + offs[t]
                    if masks[t, q] and 0 <= i < xf.size:
                        acc += wf[c, t] * xf[i]
                y[s0 + q] = acc
        act_run(y, s0, P, act, bounds)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- stride 2 (2-D / 1-D)
@njit(**_JIT)
def deinterleave(xf, out):
    """out = concat(xf[0::2], xf[1::2]) for a flat array (one vectorised pass)."""
    n = xf.size
    h = n // 2
    ne = np.uint64(n - h)
    two = np.uint64(2)
    for k in range(np.uint64(h)):
        out[k] = xf[two * k]
        out[ne + k] = xf[two * k + np.uint64(1)]
    if n % 2:
        out[h] = xf[n - 1]


@njit(**_JIT)
def _dw_s2(x, w, b, p6, d3, o3, act, bounds):
    """Depthwise conv with stride 2 along H and W (or 1-D stride 2), via a parity split.

    With x flat, tap (kh, kw) of output (oh, ow) in plane c reads flat index
    f = c*H*W + 2*(oh*W + ow) + g_t with g_t = (kh*dh - ph)*W + kw*dw - pw, i.e. element
    Q + (c*H*W + g_t) // 2 of the even- or odd-index half of x (by the parity of
    c*H*W + g_t), Q = oh*W + ow.  So after one deinterleave pass every tap is a unit-stride
    masked run over Q in [0, (OH-1)*W + OW) (the columns ow >= OW are computed and dropped).
    """
    N, C, D, H, W = x.shape
    KH, KW = w.shape[3], w.shape[4]
    OH, OW = o3[1], o3[2]
    NC, P, nt = N * C, D * H * W, KH * KW
    y = np.empty(NC * OH * OW, x.dtype)
    if NC * OH * OW == 0:
        return y.reshape((N, C, 1, OH, OW))
    run = (OH - 1) * W + OW
    g = np.empty(nt, np.int64)
    masks = np.zeros((nt, run), np.bool_)
    for kh in range(KH):
        eh = kh * d3[1] - p6[1]
        for kw in range(KW):
            ew = kw * d3[2] - p6[2]
            t = kh * KW + kw
            g[t] = eh * W + ew
            for oh in range(OH):
                if 0 <= 2 * oh + eh < H:
                    for ow in range(OW):
                        masks[t, oh * W + ow] = 0 <= 2 * ow + ew < W
    mf = masks.reshape(masks.size)
    xf = x.reshape(x.size)
    n = xf.size
    ne = n - n // 2
    eo = np.empty(n, x.dtype)
    deinterleave(xf, eo)
    wf = w.reshape((C, nt)).astype(x.dtype)
    bf = b.astype(x.dtype)
    acc = np.empty(run, x.dtype)
    offs = np.empty(nt, np.int64)
    n3 = nt - nt % 3
    for nc in range(NC):
        c = nc % C
        lo, hi = 0, run
        for t in range(nt):
            a = nc * P + g[t]
            offs[t] = a // 2 + (ne if a % 2 else 0)
            lo = max(lo, -offs[t])
            hi = min(hi, n - offs[t])
        lo = min(lo, run)
        hi = max(lo, hi)
        bias = bf[c]
        for t in range(0, n3, 3):
            _masked_fma_taps(acc, 0, eo, 0, offs[t], offs[t + 1], offs[t + 2], mf, t * run,
                             (t + 1) * run, (t + 2) * run, wf[c, t], wf[c, t + 1],
                             wf[c, t + 2], 3, lo, hi, t == 0, bias)
        if n3 < nt:
            u1 = min(n3 + 1, nt - 1)
            _masked_fma_taps(acc, 0, eo, 0, offs[n3], offs[u1], offs[u1], mf, n3 * run,
                             u1 * run, u1 * run, wf[c, n3], wf[c, u1], wf[c, u1], nt - n3,
                             lo, hi, n3 == 0, bias)
        if lo > 0 or hi < run:
            for q in list(range(0, lo)) + list(range(hi, run)):
                v = bias
                for t in range(nt):
                    i = offs[t] + q
                    if masks[t, q] and 0 <= i < n:
                        v += wf[c, t] * eo[i]
                acc[q] = v
        for oh in range(OH):
            src = np.uint64(oh * W)
            dst = np.uint64((nc * OH + oh) * OW)
            for ow in range(np.uint64(OW)):
                y[dst + ow] = acc[src + ow]
            act_run(y, dst, OW, act, bounds)
    return y.reshape((N, C, 1, OH, OW))


# ---------------------------------------------------------------- general: phase buffers
@njit(**_JIT)
def _dw_phase(x, w, b, s3, p6, d3, o3, act, bounds):
    """Depthwise conv on padded phase-split planes (any stride, dilation, padding)."""
    N, C, D, H, W = x.shape
    k3 = (w.shape[2], w.shape[3], w.shape[4])
    OD, OH, OW = o3
    NC, OP, nt = N * C, OD * OH * OW, k3[0] * k3[1] * k3[2]
    y = np.empty(NC * OP, x.dtype)
    if NC == 0 or OP == 0:
        return y.reshape((N, C, OD, OH, OW))
    q3, run, pq, nb, buf, rowbuf, offs = phase_buffers(NC, k3, s3, d3, o3, x.dtype)
    acc = np.empty(pq, x.dtype)
    xf = x.reshape(x.size)
    wf = w.reshape((C, nt)).astype(x.dtype)
    bf = b.astype(x.dtype)
    for nc0 in range(0, NC, nb):
        m = min(nb, NC - nc0)
        fill_phases(xf, nc0, m, nb, (D, H, W), s3, p6, q3, buf, rowbuf, 0.0)
        for p in range(m):
            c = (nc0 + p) % C
            base = p * pq
            n3 = nt - nt % 3
            for t in range(0, n3, 3):  # literal ntap 3: specialised loop body
                _fma_taps(acc, 0, buf, base + offs[t], base + offs[t + 1], base + offs[t + 2],
                          wf[c, t], wf[c, t + 1], wf[c, t + 2], 3, run, t == 0, bf[c])
            if n3 < nt:
                u1 = min(n3 + 1, nt - 1)
                _fma_taps(acc, 0, buf, base + offs[n3], base + offs[u1], base + offs[u1],
                          wf[c, n3], wf[c, u1], wf[c, u1], nt - n3, run, n3 == 0, bf[c])
            for od in range(OD):
                for oh in range(OH):
                    src = np.uint64((od * q3[1] + oh) * q3[2])
                    dst = np.uint64((((nc0 + p) * OD + od) * OH + oh) * OW)
                    for ow in range(np.uint64(OW)):
                        y[dst + ow] = acc[src + ow]
                    act_run(y, dst, OW, act, bounds)
    return y.reshape((N, C, OD, OH, OW))


@njit(**_JIT)
def _dw5(x, w, b, s3, p6, d3, act, bounds):
    """Depthwise conv on canonical 5-D arrays: x (N, C, D, H, W), w (C, 1, KD, KH, KW)."""
    in3 = (x.shape[2], x.shape[3], x.shape[4])
    k3 = (w.shape[2], w.shape[3], w.shape[4])
    o3 = ((in3[0] + p6[0] + p6[3] - (k3[0] - 1) * d3[0] - 1) // s3[0] + 1,
          (in3[1] + p6[1] + p6[4] - (k3[1] - 1) * d3[1] - 1) // s3[1] + 1,
          (in3[2] + p6[2] + p6[5] - (k3[2] - 1) * d3[2] - 1) // s3[2] + 1)
    same = True
    for ax in range(3):
        same = same and s3[ax] == 1 and o3[ax] == in3[ax]
    if same:
        return _dw_same(x, w, b, p6, d3, act, bounds)
    if in3[0] == 1 and k3[0] == 1 and s3[2] == 2 and (s3[1] == 2 or (in3[1] == 1 and k3[1] == 1)) \
            and in3[1] * in3[2] <= _S2_MAX_PLANE:
        return _dw_s2(x, w, b, p6, d3, o3, act, bounds)
    return _dw_phase(x, w, b, s3, p6, d3, o3, act, bounds)


@njit(**_JIT)
def depthwise_conv(x, w, b, strides, pads, dilations, act=0, bounds=(0.0, 0.0)):
    """ONNX Conv with group == C == M: x (N,C,*S), w (C,1,*K), b (C,) -> (N,C,*O).

    act selects a fused activation epilogue (kernels/epilogue.py): 0 none, 1 Relu, 2 Clip to
    bounds (lo, hi), 3 HardSwish with bounds (alpha, beta).
    """
    y = _dw5(as5d(x), as5d(w), b, tup3(strides, 1), pads6(pads), tup3(dilations, 1), act,
             bounds)
    return from5d(y, x)


# ---------------------------------------------------------------- float32 3x3, SIMD
@njit(parallel=PRANGE_ONLY, **_JIT)
def depthwise3x3_f32(x, w, b, strides, pads, act, bounds):
    """Depthwise 3x3 Conv of float32 x (N, C, H, W), w (C, 1, 3, 3), stride 1 or 2 (both
    ways), dilation 1, any pads, straight from x in 16-lane vectors (kernels/simd.py): per
    output row, 16 outputs at a time; per input row of the window two (stride 2: three)
    loads, masked where they leave the row (the zero padding), and lane shuffles give the
    three taps; rows outside the input are skipped; bias, activation (kernels/epilogue.py)
    and a store, masked at the row's end.  No padded copy, no scalar loops.  Everything in
    the loop is an intrinsic: an njit helper taking an array there costs a reference count
    per call.  The loop over 16-column blocks is outside the loop over a band's rows
    (1.3-1.8x faster: each block's masks and edge branch are computed once per band;
    DW3_BANDS).  On targets narrower than 16 lanes (AVX2) the stride-1 planes and the large
    stride-2 ones go row by row instead, two output rows at a time at stride 1 (``_dw3_rows``,
    2-3x faster there).  With several Numba threads (and PAR_MIN_MACS of work) the planes are
    shared out.  Small planes run channels-last instead (``dw3_channels_last``,
    ``_dw3_cl_groups``)."""
    N, C, H, W = x.shape
    s = strides[0]
    pt, pl, pb, pr = pads
    OH = (H + pt + pb - 3) // s + 1
    OW = (W + pl + pr - 3) // s + 1
    y = np.empty((N, C, OH, OW), np.float32)
    if y.size == 0:
        return y
    yf = y.reshape(y.size)
    xf = np.ascontiguousarray(x).reshape(x.size)
    wf = np.ascontiguousarray(w).reshape(C * 9).astype(np.float32)
    bf = b.astype(np.float32)
    nt = num_threads()
    # the thread loops are here, not in wrappers: each njit level above the plane loops
    # links and optimizes them again at first use
    if dw3_channels_last(OW, s):
        # channels-last (small planes): weights and bias regrouped by N channels, then
        # ``_dw3_cl_groups``, its groups shared out over threads as the planes are
        wt, bt = _dw3_cl_weights(wf, bf, C)
        NG = N * ((C + V.LANES - 1) // V.LANES)
        if nt > 1 and NG >= 2 * nt and y.size * 9 >= PAR_MIN_MACS:
            for t in prange(nt):
                g0, g1 = split_range(NG, nt, t, 1)
                if g1 > g0:
                    _dw3_cl_groups(xf, wt, bt, yf, g0, g1, C, H, W, OH, OW, s, pt, pl, act,
                                   bounds, _dw3_cl_scratch(OH, OW, s),
                                   np.empty(OH * OW * V.LANES, np.float32))
        else:
            _dw3_cl_groups(xf, wt, bt, yf, I0, NG, C, H, W, OH, OW, s, pt, pl, act, bounds,
                           _dw3_cl_scratch(OH, OW, s), np.empty(OH * OW * V.LANES, np.float32))
    elif nt > 1 and N * C >= 2 * nt and y.size * 9 >= PAR_MIN_MACS:
        NC = N * C
        rows = _dw3_by_rows(s, H, W)
        for t in prange(nt):
            p0, p1 = split_range(NC, nt, t, 1)
            if p1 > p0:
                if rows:
                    _dw3_rows(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, s, pt, pl, act, bounds)
                else:
                    _dw3_planes(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, s, pt, pl, act,
                                bounds)
    elif _dw3_by_rows(s, H, W):
        _dw3_rows(xf, wf, bf, yf, I0, N * C, C, H, W, OH, OW, s, pt, pl, act, bounds)
    else:
        _dw3_planes(xf, wf, bf, yf, I0, N * C, C, H, W, OH, OW, s, pt, pl, act, bounds)
    return y


# Bands of output rows: a plane is walked a 16-column block at a time down a band of rows
# (each block's masks and edge branch hoisted out of the band's row loop: 1.3-1.8x faster on
# small planes in cache than row by row), band after band. Down a whole large plane the block
# loop reads a few lines of every row, a strided walk the hardware prefetchers do not follow,
# and the plane no longer stays in L1 between blocks. Entries: (input plane floats above which,
# stride, output rows per band); other planes are one band. Measured on the 2-core Zen 3 VM,
# 1 thread, the walks interleaved in one process (tools/depthwise_bands.py), warm / inputs
# rotating out of cache, us: 32x112x112 s1 whole plane 480 / 1622, bands of 4 352 / 508;
# 96x112x112 s2 2965 / 2898 against rows one by one 1286 / 1237; 144x56x56 s1 543 / 1324
# against bands of 4 526 / 561; 144x56x56 s2 and planes of 28x28 and less: the whole plane
# was fastest.
DW3_BANDS = ((3000, 1, 4), (8000, 2, 1))


@njit(inline="always", **_JIT)
def _row_spans2(xf, row, c, W, zero):
    """x[c .. c+N) and x[c+N .. c+2N) of the row at xf[row] (N = V.LANES), zeros outside the
    row (the padding): masked loads, for the blocks at a row's edges."""
    return (V.load_span(xf, row + c, max(0, -c), min(V.LANES, W - c), zero),
            V.load_span(xf, row + c + V.LANES, max(0, -c - V.LANES),
                        min(V.LANES, W - c - V.LANES), zero))


@njit(inline="always", **_JIT)
def _row_spans3(xf, row, c, W, zero):
    """``_row_spans2`` and x[c+2N .. c+3N) (stride 2 reads three vectors a block)."""
    u0, u1 = _row_spans2(xf, row, c, W, zero)
    c2 = c + 2 * V.LANES
    return u0, u1, V.load_span(xf, row + c2, max(0, -c2), min(V.LANES, W - c2), zero)


@njit(**_JIT)
def _dw3_planes(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, s, pt, pl, act, bounds):
    """Planes [p0, p1) of ``depthwise3x3_f32``, in bands of output rows (DW3_BANDS), in
    vectors of the target's width (simd.native: 16 lanes on AVX-512, 8 on AVX2, where the
    stride-2 lane shuffles of 16-lane vectors split into ymm halves cost 2-3x)."""
    lo, hi = V.splat(np.float32(bounds[0])), V.splat(np.float32(bounds[1]))
    vz, one = V.zero(), V.splat(np.float32(1.0))
    zero = np.float32(0.0)
    band = OH                       # output rows per band (DW3_BANDS)
    for lim, s_, rows in DW3_BANDS:
        if s == s_ and H * W > lim:
            band = rows
    for nc in range(p0, p1):
        xo = nc * H * W
        wo = (nc % C) * 9
        bias = V.splat(bf[nc % C])
        for oh0 in range(0, OH, band):
            for ow0 in range(0, OW, V.LANES):  # columns outside: the masks are the same all the
                c = ow0 * s - pl              # way down the band, LLVM hoists them out of its rows
                for oh in range(oh0, min(OH, oh0 + band)):
                    yo = (nc * OH + oh) * OW
                    a0 = bias
                    a1 = V.zero()
                    a2 = V.zero()
                    for k in range(3):
                        r = oh * s - pt + k
                        if r < 0 or r >= H:
                            continue
                        row = xo + r * W
                        wa = V.bcast(wf, wo + 3 * k)
                        wb = V.bcast(wf, wo + 3 * k + 1)
                        wc = V.bcast(wf, wo + 3 * k + 2)
                        if s == 1:     # x[c..c+N), x[c+N..c+2N): the taps at c, c+1, c+2
                            if c >= 0 and c + 2 * V.LANES <= W:
                                u0 = V.load(xf, row + c)
                                u1 = V.load(xf, row + c + V.LANES)
                            else:
                                u0, u1 = _row_spans2(xf, row, c, W, zero)
                            t1 = vnext(u0, u1)
                            a0 = vfma(wa, u0, a0)
                            a1 = vfma(wb, t1, a1)
                            a2 = vfma(wc, vnext(t1, vnext(u1, u1)), a2)
                        else:          # x[c..c+3N): evens, odds, evens from c+2
                            if c >= 0 and c + 3 * V.LANES <= W:
                                u0 = V.load(xf, row + c)
                                u1 = V.load(xf, row + c + V.LANES)
                                u2 = V.load(xf, row + c + 2 * V.LANES)
                            else:
                                u0, u1, u2 = _row_spans3(xf, row, c, W, zero)
                            e = vevens(u0, u1)
                            a0 = vfma(wa, e, a0)
                            a1 = vfma(wb, vodds(u0, u1), a1)
                            a2 = vfma(wc, vnext(e, vevens(u2, u2)), a2)
                    v = vact_n(vadd(vadd(a0, a1), a2), act, lo, hi, vz, one)
                    if OW - ow0 >= V.LANES:
                        vstore(yf, yo + ow0, v)
                    else:
                        vstorem(yf, yo + ow0, v, OW - ow0)


# Row by row, weights in registers (``_dw3_rows``): on targets narrower than 16 lanes (AVX2: 8),
# every stride-1 plane and the stride-2 planes above DW3_ROWS_S2_MIN input floats. Measured on
# the 2-core Zen 3 VM (AVX2), 1 thread, one process, walks interleaved, inputs rotating out of
# cache / warm, us, against ``_dw3_planes``: 32x112x112 s1 308 / 263 against 942 / 753,
# 144x56x56 s1 386 / 337 against 962 / 858, 192x28x28 s1 206 / 198 against 419 / 343, 384x14x14
# s1 198 / 146 against 225 / 176. Stride 2 (``_dw3_rows_s2``, rotating): 144x56x56 257 against
# 364, 64x40x40 61 / 71, 96x20x20 27 / 26, 192x28x28 111 / 98 (stays on the bands). As a
# model's Conv + Clip against ORT's (tools: one-node models, same process, 1 thread):
# 96x112x112 s2 0.89 -> 0.54, 144x56x56 s2 1.07 -> 0.79, 32x112x112 s1 1.03 -> 0.46. On
# AVX-512 (16 lanes) ``_dw3_planes`` throughout: not measured there.
DW3_ROWS_S2_MIN = 1000


@njit(inline="always", **_JIT)
def _dw3_by_rows(s, H, W):
    """Whether ``depthwise3x3_f32`` walks its planes with ``_dw3_rows``."""
    return V.LANES < LANES and (s == 1 or H * W > DW3_ROWS_S2_MIN)


@njit(inline="always", **_JIT)
def _dw3_row_taps(xf, row, c, W, s, wa, wb, wc, acc, zero):
    """acc + one input row's three taps (weights wa, wb, wc) for the V.LANES outputs whose
    window starts at input column c of the row at xf[row] (stride s): unaligned loads inside
    the row, masked loads and lane shuffles at its edges (the zero padding)."""
    if s == 1:
        if c >= 0 and c + 2 + V.LANES <= W:
            acc = vfma(wa, V.load(xf, row + c), acc)
            acc = vfma(wb, V.load(xf, row + c + 1), acc)
            return vfma(wc, V.load(xf, row + c + 2), acc)
        u0, u1 = _row_spans2(xf, row, c, W, zero)
        t1 = vnext(u0, u1)
        acc = vfma(wa, u0, acc)
        acc = vfma(wb, t1, acc)
        return vfma(wc, vnext(t1, vnext(u1, u1)), acc)
    if c >= 0 and c + 2 + 2 * V.LANES <= W:
        u0 = V.load(xf, row + c)
        u1 = V.load(xf, row + c + V.LANES)
        acc = vfma(wa, vevens(u0, u1), acc)
        acc = vfma(wb, vodds(u0, u1), acc)
        return vfma(wc, vevens(V.load(xf, row + c + 2), V.load(xf, row + c + 2 + V.LANES)),
                    acc)
    u0, u1, u2 = _row_spans3(xf, row, c, W, zero)
    e = vevens(u0, u1)
    acc = vfma(wa, e, acc)
    acc = vfma(wb, vodds(u0, u1), acc)
    return vfma(wc, vnext(e, vevens(u2, u2)), acc)


@njit(**_JIT)
def _dw3_rows(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, s, pt, pl, act, bounds):
    """Planes [p0, p1) of ``depthwise3x3_f32`` output row by row (DW3_ROWS_S2_MIN), the nine
    weights in registers; at stride 1 two output rows at a time from their four input rows
    (each middle row's loads serve both, and the two rows' four accumulator chains overlap:
    with one row the chain of dependent multiply-adds set the pace)."""
    lo, hi = V.splat(np.float32(bounds[0])), V.splat(np.float32(bounds[1]))
    vz, one = V.zero(), V.splat(np.float32(1.0))
    zero = np.float32(0.0)
    if s == 2:
        _dw3_rows_s2(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, pt, pl, act, lo, hi)
        return
    for nc in range(p0, p1):
        xo = nc * H * W
        wo = (nc % C) * 9
        bias = V.splat(bf[nc % C])
        w0, w1, w2 = V.bcast(wf, wo), V.bcast(wf, wo + 1), V.bcast(wf, wo + 2)
        w3, w4, w5 = V.bcast(wf, wo + 3), V.bcast(wf, wo + 4), V.bcast(wf, wo + 5)
        w6, w7, w8 = V.bcast(wf, wo + 6), V.bcast(wf, wo + 7), V.bcast(wf, wo + 8)
        oh = 0
        while oh < OH:
            r = oh * s - pt
            yo = (nc * OH + oh) * OW
            if s == 1 and oh + 1 < OH and r >= 0 and r + 3 < H:
                x0 = xo + r * W
                x1, x2, x3 = x0 + W, x0 + 2 * W, x0 + 3 * W
                for ow0 in range(0, OW, V.LANES):
                    c = ow0 - pl
                    if c >= 0 and c + 2 + V.LANES <= W:
                        u = V.load(xf, x1 + c)
                        a0 = vfma(w0, V.load(xf, x0 + c), bias)
                        b0 = vfma(w0, u, bias)
                        a1 = vmul(w3, u)
                        u = V.load(xf, x1 + c + 1)
                        a0 = vfma(w1, V.load(xf, x0 + c + 1), a0)
                        b0 = vfma(w1, u, b0)
                        a1 = vfma(w4, u, a1)
                        u = V.load(xf, x1 + c + 2)
                        a0 = vfma(w2, V.load(xf, x0 + c + 2), a0)
                        b0 = vfma(w2, u, b0)
                        a1 = vfma(w5, u, a1)
                        u = V.load(xf, x2 + c)
                        a0 = vfma(w6, u, a0)
                        b1 = vmul(w3, u)
                        u = V.load(xf, x2 + c + 1)
                        a0 = vfma(w7, u, a0)
                        b1 = vfma(w4, u, b1)
                        u = V.load(xf, x2 + c + 2)
                        a0 = vfma(w8, u, a0)
                        b1 = vfma(w5, u, b1)
                        b0 = vfma(w6, V.load(xf, x3 + c), b0)
                        b0 = vfma(w7, V.load(xf, x3 + c + 1), b0)
                        b0 = vfma(w8, V.load(xf, x3 + c + 2), b0)
                    else:
                        a0 = _dw3_row_taps(xf, x0, c, W, s, w0, w1, w2, bias, zero)
                        a1 = _dw3_row_taps(xf, x1, c, W, s, w3, w4, w5, vz, zero)
                        a0 = _dw3_row_taps(xf, x2, c, W, s, w6, w7, w8, a0, zero)
                        b0 = _dw3_row_taps(xf, x1, c, W, s, w0, w1, w2, bias, zero)
                        b1 = _dw3_row_taps(xf, x2, c, W, s, w3, w4, w5, vz, zero)
                        b0 = _dw3_row_taps(xf, x3, c, W, s, w6, w7, w8, b0, zero)
                    v = vact_n(vadd(a0, a1), act, lo, hi, vz, one)
                    u = vact_n(vadd(b0, b1), act, lo, hi, vz, one)
                    if OW - ow0 >= V.LANES:
                        vstore(yf, yo + ow0, v)
                        vstore(yf, yo + OW + ow0, u)
                    else:
                        vstorem(yf, yo + ow0, v, OW - ow0)
                        vstorem(yf, yo + OW + ow0, u, OW - ow0)
                oh += 2
                continue
            for ow0 in range(0, OW, V.LANES):   # one row: the plane's edges, stride 2
                c = ow0 * s - pl
                a0 = bias
                a1 = vz
                a2 = vz
                if r >= 0 and r < H:
                    a0 = _dw3_row_taps(xf, xo + r * W, c, W, s, w0, w1, w2, a0, zero)
                if r + 1 >= 0 and r + 1 < H:
                    a1 = _dw3_row_taps(xf, xo + (r + 1) * W, c, W, s, w3, w4, w5, a1, zero)
                if r + 2 >= 0 and r + 2 < H:
                    a2 = _dw3_row_taps(xf, xo + (r + 2) * W, c, W, s, w6, w7, w8, a2, zero)
                v = vact_n(vadd(vadd(a0, a1), a2), act, lo, hi, vz, one)
                if OW - ow0 >= V.LANES:
                    vstore(yf, yo + ow0, v)
                else:
                    vstorem(yf, yo + ow0, v, OW - ow0)
            oh += 1


@njit(**_JIT)
def _dw3_rows_s2(xf, wf, bf, yf, p0, p1, C, H, W, OH, OW, pt, pl, act, lo, hi):
    """Stride 2 of ``_dw3_rows``: each input row of a plane is split once into the even and
    odd columns of the row padded by pl zeros on the left and zeros past its end (ev, od: RW
    floats each, in a per-call scratch of the plane's rows); then tap kw of output column ow
    is ev[ow], od[ow], ev[ow + 1]: unaligned loads, no lane shuffles, no edge cases but the
    rows above and below the plane and the store at a row's end."""
    vz, one = V.zero(), V.splat(np.float32(1.0))
    zero = np.float32(0.0)
    rw = (OW + V.LANES) // V.LANES * V.LANES      # OW + 1 floats, whole vectors
    sc = np.empty(H * 2 * rw, np.float32)
    for nc in range(p0, p1):
        xo = nc * H * W
        for r in range(H):                         # the split, row by row
            row = xo + r * W
            eo = r * 2 * rw
            for i0 in range(0, rw, V.LANES):
                j = 2 * i0 - pl                    # x column of ev[i0]
                if j >= 0 and j + 2 * V.LANES <= W:
                    u0 = V.load(xf, row + j)
                    u1 = V.load(xf, row + j + V.LANES)
                else:
                    u0 = V.load_span(xf, row + j, max(0, -j), min(V.LANES, W - j), zero)
                    u1 = V.load_span(xf, row + j + V.LANES, max(0, -j - V.LANES),
                                     min(V.LANES, W - j - V.LANES), zero)
                vstore(sc, eo + i0, vevens(u0, u1))
                vstore(sc, eo + rw + i0, vodds(u0, u1))
        wo = (nc % C) * 9
        bias = V.splat(bf[nc % C])
        w0, w1, w2 = V.bcast(wf, wo), V.bcast(wf, wo + 1), V.bcast(wf, wo + 2)
        w3, w4, w5 = V.bcast(wf, wo + 3), V.bcast(wf, wo + 4), V.bcast(wf, wo + 5)
        w6, w7, w8 = V.bcast(wf, wo + 6), V.bcast(wf, wo + 7), V.bcast(wf, wo + 8)
        for oh in range(OH):
            r = 2 * oh - pt
            yo = (nc * OH + oh) * OW
            e0, e1, e2 = r * 2 * rw, (r + 1) * 2 * rw, (r + 2) * 2 * rw
            v0, v1, v2 = r >= 0, r + 1 >= 0 and r + 1 < H, r + 2 < H
            for ow0 in range(0, OW, V.LANES):
                a0 = bias
                a1 = vz
                a2 = vz
                if v0:
                    a0 = vfma(w0, V.load(sc, e0 + ow0), a0)
                    a0 = vfma(w1, V.load(sc, e0 + rw + ow0), a0)
                    a0 = vfma(w2, V.load(sc, e0 + ow0 + 1), a0)
                if v1:
                    a1 = vfma(w3, V.load(sc, e1 + ow0), a1)
                    a1 = vfma(w4, V.load(sc, e1 + rw + ow0), a1)
                    a1 = vfma(w5, V.load(sc, e1 + ow0 + 1), a1)
                if v2:
                    a2 = vfma(w6, V.load(sc, e2 + ow0), a2)
                    a2 = vfma(w7, V.load(sc, e2 + rw + ow0), a2)
                    a2 = vfma(w8, V.load(sc, e2 + ow0 + 1), a2)
                v = vact_n(vadd(vadd(a0, a1), a2), act, lo, hi, vz, one)
                if OW - ow0 >= V.LANES:
                    vstore(yf, yo + ow0, v)
                else:
                    vstorem(yf, yo + ow0, v, OW - ow0)


# ---------------------------------------------------------------- small planes, channels last
# Output rows of at most this many columns run channels-last. AVX-512 (16 lanes; a 7x7 plane:
# 7 of a vector's 16 lanes, and every row an edge): MobileNet's 960x7x7 s1 0.045 -> 0.030 ms,
# 576x14x14 s2 0.035 -> 0.029 ms (1 thread); at 14 columns and more the row kernel won there
# (384x14x14 s1 0.036 against 0.038 ms channels-last, 192x28x28 s2 0.024 / 0.031). AVX2 (8
# lanes: groups of 8 channels, 8 x 8 transposes), per stride: against ``_dw3_rows`` / the bands,
# 2026-11-27 on the Zen 3 VM, 1 thread, one process, the two alternating, inputs rotating, Clip
# fused (the module before and after, alternating calls): 384x14x14 s1 0.55, 576x14x14 s1 0.56,
# 144x28x28 s1 0.80, 192x28x28 s1 0.85, 64x28x28 s1 0.81, 576x14x14 s2 0.62, 192x28x28 s2 0.67,
# 144x56x56 s2 0.71-0.95, 96x112x112 s2 0.86, 960x7x7 s1 0.66 (against the 16-lane channels-last
# walk); worse at 56 columns s1 (144x56x56 1.13, 24x56x56 1.22) and 112 s1 (32x112x112 1.46).
DW3_CL_MAX_OW16 = 8
DW3_CL_MAX_OW8 = (28, 56)       # stride 1, stride 2


@njit(inline="always", **_JIT)
def dw3_channels_last(OW, s):
    """Whether ``depthwise3x3_f32`` runs an output of OW columns at stride s channels-last."""
    if V.LANES == 16:
        return OW <= DW3_CL_MAX_OW16
    return OW <= DW3_CL_MAX_OW8[s - 1]


@njit(**_JIT)
def _dw3_cl_groups(xf, wt, bt, yf, g0, g1, C, H, W, OH, OW, s, pt, pl, act, bounds, xt, yt):
    """Groups [g0, g1) of N channels of one image each (N = V.LANES: 16 on AVX-512, 8 on
    AVX2), channels-last: the group's planes transposed in registers (simd.vtranspose, N rows
    of N pixels at a time) into the zero-padded scratch xt[row][col][N] (its border, zeroed by
    the caller, is never written; pixels no output reads go to a spare slot past its end), per
    output pixel the 9 taps as vector FMAs over the N channels (wt: per group and tap the
    channels' weights), bias and act into yt[pixel][N], transposed back into y's planes.  The
    sums of ``_dw3_planes`` in the same order (it skips the rows in the padding, where this
    adds products with zero: the same unless a weight is inf)."""
    N = V.LANES
    lo, hi = V.splat(np.float32(bounds[0])), V.splat(np.float32(bounds[1]))
    vz, one = V.zero(), V.splat(np.float32(1.0))
    P, OP = H * W, OH * OW
    nr = (OH - 1) * s + 3                # the padded rows and columns the output reads
    WP = (OW - 1) * s + 3
    dst = np.empty(P, np.int64)         # pixel -> its place in xt (unread ones: past the end)
    for j in range(P):
        r, c = j // W + pt, j % W + pl
        dst[j] = (r * WP + c) * N if r < nr and c < WP else nr * WP * N
    G = (C + N - 1) // N
    for g in range(g0, g1):
        n, c0 = g // G, (g % G) * N
        nch = min(N, C - c0)
        o = (n * C + c0) * P
        for j0 in range(0, P, N):
            m = min(N, P - j0)
            V.scatter_rows(xt, dst, j0, V.transpose(V.rows(xf, o + j0, P, m, nch)), m)
        wo = (g % G) * 9 * N
        w0, w1, w2 = V.load(wt, wo), V.load(wt, wo + N), V.load(wt, wo + 2 * N)
        w3, w4, w5 = V.load(wt, wo + 3 * N), V.load(wt, wo + 4 * N), V.load(wt, wo + 5 * N)
        w6, w7, w8 = V.load(wt, wo + 6 * N), V.load(wt, wo + 7 * N), V.load(wt, wo + 8 * N)
        b = V.load(bt, c0)
        for oh in range(OH):
            for ow in range(OW):
                p = (oh * s * WP + ow * s) * N
                q = p + WP * N
                u = q + WP * N
                a0 = V.fma(w6, V.load(xt, u), V.fma(w3, V.load(xt, q),
                                                    V.fma(w0, V.load(xt, p), b)))
                a1 = V.fma(w7, V.load(xt, u + N),
                           V.fma(w4, V.load(xt, q + N), V.fma(w1, V.load(xt, p + N), vz)))
                a2 = V.fma(w8, V.load(xt, u + 2 * N),
                           V.fma(w5, V.load(xt, q + 2 * N), V.fma(w2, V.load(xt, p + 2 * N), vz)))
                V.store(yt, (oh * OW + ow) * N,
                        vact_n(V.add(V.add(a0, a1), a2), act, lo, hi, vz, one))
        o = (n * C + c0) * OP
        for j0 in range(0, OP, N):
            m = min(N, OP - j0)
            V.store_rows(yf, o + j0, OP, V.transpose(V.rows(yt, j0 * N, N, N, m)), nch, m)


@njit(inline="always", **_JIT)
def _dw3_cl_scratch(OH, OW, s):
    """The zero-padded channels-last input scratch (the rows and columns the output reads)."""
    return np.zeros((((OH - 1) * s + 3) * ((OW - 1) * s + 3) + 1) * V.LANES, np.float32)


@njit(inline="always", **_JIT)
def _dw3_cl_weights(wf, bf, C):
    """Weights (9 taps x N channels per group, N = V.LANES) and bias regrouped by N channels,
    zero past C, for ``_dw3_cl_groups``."""
    N = V.LANES
    G = (C + N - 1) // N
    wt = np.zeros(G * 9 * N, np.float32)
    for c in range(C):
        for t in range(9):
            wt[((c // N) * 9 + t) * N + c % N] = wf[c * 9 + t]
    bt = np.zeros(G * N, np.float32)
    load_bias(bt, bf, C)
    return wt, bt


def use_depthwise3x3(x_shape, dtype, kernel, strides, dilations, has_residual, target):
    """Whether a depthwise Conv runs on ``depthwise3x3_f32``: float32, 2-D, 3x3, dilation 1,
    stride 1 or 2 both ways, an AVX-512 `target` (one thread, same process: 1.3-1.6x faster than
    depthwise_conv on MobileNet's stride-1 layers, 7x7 to 112x112, 2-3x on its stride-2
    ones); on AVX2 too (``target.split16``: its few live vectors run as ymm halves)."""
    return (np.dtype(dtype) == np.float32 and len(x_shape) == 4 and tuple(kernel) == (3, 3)
            and tuple(dilations) == (1, 1) and not has_residual and target.split16
            and tuple(strides) in ((1, 1), (2, 2)))
