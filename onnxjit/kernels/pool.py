"""Pooling kernels: MaxPool (+Indices), AveragePool, GlobalAverage/MaxPool, LRN.

Windowed pools take x (N, C, *S) with 1..3 spatial dims, ``kernel``/``strides``/
``dilations``/``out_shape`` k-tuples and ``pads`` a 2k-tuple (begin..., end...), all from
``shapes.pool_geometry`` (which also resolves auto_pad and ceil_mode); the lowerings pass the
canonical form, k = 3 (5-D x, ``shapes.window3``), so each entry compiles once per dtype.
Taps outside the input are skipped, which equals -inf padding for MaxPool; AveragePool divides
by the number of taps inside the input (count_include_pad=0) or inside [-pad_begin,
S+pad_end) (=1), and a window with no counted tap gives NaN.  MaxPool propagates NaN
(np.maximum semantics).  Arrays must be C-contiguous.

MaxPool and AveragePool have one of four schemes, picked at lowering (``scheme``; one entry
per pool and scheme, ``maxpool_rows`` ...), all built from long flat
loops or explicit 16-lane vectors, because LLVM vectorises those and runs per-row loops over
7..28 columns mostly scalar:

* whole plane (one window covers each plane, e.g. 7x7 on 7x7): a reduction per plane;
* stride 1 with output size == input size: separable masked passes, no padded copy;
* float32 2-D windows 2 or 3 wide at column stride 2 (2x2/2, 3x3/2: most CNN pools), on
  AVX-512: per output row, a vertical pass and a deinterleaving horizontal one (``_pool_rows``);
  on AVX2 in 8 lanes: per output row its window's rows combined column by column into one
  padded row, then the evens and odds of that row (``_rows_planes_n``);
* anything else: padded phase-split copies of a block of planes, one run per tap group.
"""

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

from . import PRANGE_ONLY
from .conv import copy_run, as5d, from5d, pads6, put_window, span, tup3
from .parallel import I0, LRN_PAR_MIN, POOL_PAR_MIN, num_threads, split_range
from .shapes import shape5, window3
from .simd import (LANES16, f32x16, lane_op, row_vec, vadd, vbcast, vevens, vhsum, vload, vmax,
                   vmul, vnext, vodds, vsplat, vstore, vstorem)
from .simd import native as V

from . import JIT as _JIT


@njit(inline="always", **_JIT)
def _fill_run(dst, d0, n, v):
    d0 = np.uint64(d0)
    for i in range(np.uint64(n)):
        dst[d0 + i] = v


@njit(inline="always", **_JIT)
def _mx(a, b):
    """max(a, b) that propagates a NaN in either argument (np.maximum semantics)."""
    return b if b > a or b != b else a


# ---------------------------------------------------------------- polyphase padded planes
# A windowed op with stride s reads padded coordinate u = o*s + k*d for output o and tap k.
# Splitting each padded plane into s phases per dim (u = idx*s + phase) makes every tap a
# unit-stride read at a fixed offset: tap k reads phase (k*d) % s at idx o + (k*d) // s.
# With the phase planes of a block of channels flattened and stacked, a tap is then ONE long
# contiguous run over the whole block (acc[q] op= buf[q + off]); the few columns past the
# output width in each row are computed and dropped.  LLVM only vectorises long loops well, so
# this beats per-row loops by a wide margin on the 7x7..28x28 planes of CNN tails.
# Buffer layout: phase ((aw*sd + ad)*sh + ah), then plane c < nb, then (Dq, Hq, Wq).
_BLOCK_ELEMS = 4096  # accumulator elements per block of planes: acc stays in L1


@njit(inline="always", **_JIT)
def _qext(o, k, s, d):
    """Extent of one phase plane: ceil(padded span / s), padded span (o-1)*s + (k-1)*d + 1."""
    return ((o - 1) * s + (k - 1) * d + s) // s


@njit(**_JIT)
def phase_geometry(k3, s3, d3, o3):
    """((Dq, Hq, Wq), phase count, flat run length covering one plane's outputs)."""
    q3 = (_qext(o3[0], k3[0], s3[0], d3[0]), _qext(o3[1], k3[1], s3[1], d3[1]),
          _qext(o3[2], k3[2], s3[2], d3[2]))
    run = ((o3[0] - 1) * q3[1] + o3[1] - 1) * q3[2] + o3[2]
    return q3, s3[0] * s3[1] * s3[2], run


@njit(**_JIT)
def block_planes(nplanes, q3, o3):
    """Planes per block: about _BLOCK_ELEMS accumulator elements, at least one plane."""
    if nplanes <= 0 or o3[0] * o3[1] * o3[2] == 0:
        return 1
    return min(nplanes, max(1, _BLOCK_ELEMS // (q3[0] * q3[1] * q3[2])))


@njit(**_JIT)
def tap_offsets(k3, s3, d3, q3, nb):
    """Start offset of every tap (C order over kd, kh, kw) in a phase buffer of nb planes."""
    offs = np.empty(k3[0] * k3[1] * k3[2], np.int64)
    pq = q3[0] * q3[1] * q3[2]
    t = 0
    for kd in range(k3[0]):
        for kh in range(k3[1]):
            for kw in range(k3[2]):
                ud, uh, uw = kd * d3[0], kh * d3[1], kw * d3[2]
                ph = ((uw % s3[2]) * s3[0] + ud % s3[0]) * s3[1] + uh % s3[1]
                offs[t] = ph * nb * pq + ((ud // s3[0]) * q3[1] + uh // s3[1]) * q3[2] \
                    + uw // s3[2]
                t += 1
    return offs




@njit(**_JIT)
def phase_buffers(nplanes, k3, s3, d3, o3, dtype):
    """Geometry and scratch for phase-split windows over blocks of planes (pools, depthwise):
    (q3, run, pq, nb, buf, rowbuf, offs) for fill_phases and the tap loops."""
    q3, nph, run = phase_geometry(k3, s3, d3, o3)
    pq = q3[0] * q3[1] * q3[2]
    nb = block_planes(nplanes, q3, o3)
    buf = np.empty(nph * nb * pq, dtype)
    rowbuf = np.empty(nph * nb * pq if s3[2] > 1 else 0, dtype)
    return q3, run, pq, nb, buf, rowbuf, tap_offsets(k3, s3, d3, q3, nb)
@njit(**_JIT)
def fill_phases(xf, nc0, m, nb, in3, s3, p6, q3, buf, rowbuf, padval):
    """Planes nc0..nc0+m of flat x (canonical (D, H, W) planes) into phase buffer buf.

    Padded rows are copied contiguously (into rowbuf when the W stride is > 1, then split
    into column phases by one flat deinterleave); coordinates outside the input get padval.
    buf/rowbuf hold nb planes per phase; planes m..nb-1 are left as garbage.
    """
    D, H, W = in3
    Dq, Hq, Wq = q3
    sd, sh, sw = s3
    Wp = sw * Wq
    pad = buf.dtype.type(padval)
    rb = rowbuf if sw > 1 else buf
    c0 = min(p6[2], Wp)  # padded columns [c0, c1) come from input columns [0, c1 - c0)
    c1 = max(c0, min(p6[2] + W, Wp))
    for ad in range(sd):
        for ah in range(sh):
            for c in range(m):
                for i in range(Dq):
                    di = i * sd + ad - p6[0]
                    for j in range(Hq):
                        hj = j * sh + ah - p6[1]
                        dst = ((((ad * sh + ah) * nb + c) * Dq + i) * Hq + j) * Wp
                        if di < 0 or di >= D or hj < 0 or hj >= H:
                            _fill_run(rb, dst, Wp, pad)
                        else:
                            _fill_run(rb, dst, c0, pad)
                            copy_run(rb, dst + c0, xf, (((nc0 + c) * D + di) * H + hj) * W,
                                      c1 - c0, 1)
                            _fill_run(rb, dst + c1, Wp - c1, pad)
    if sw > 1:
        nrw = np.uint64(sd * sh * nb * Dq * Hq * Wq)  # elements per column phase
        if sw == 2:
            for k in range(nrw):
                buf[k] = rb[np.uint64(2) * k]
                buf[nrw + k] = rb[np.uint64(2) * k + np.uint64(1)]
        else:
            usw = np.uint64(sw)
            for k in range(nrw):
                for aw in range(usw):
                    buf[aw * nrw + k] = rb[k * usw + aw]


@njit(inline="always", **_JIT)
def _max_taps(acc, b, o0, o1, o2, n, first):
    """acc[i] = max(acc[i] (unless first), b[o0+i], b[o1+i], b[o2+i]) for i < n."""
    o0, o1, o2 = np.uint64(o0), np.uint64(o1), np.uint64(o2)
    if first:
        for i in range(np.uint64(n)):
            acc[i] = _mx(_mx(b[o0 + i], b[o1 + i]), b[o2 + i])
    else:
        for i in range(np.uint64(n)):
            acc[i] = _mx(_mx(_mx(acc[i], b[o0 + i]), b[o1 + i]), b[o2 + i])


@njit(inline="always", **_JIT)
def _sum_taps(acc, b, o0, o1, o2, ntap, n, first):
    """acc[i] (+)= b[o0+i] (+ b[o1+i] (+ b[o2+i])) for the first ntap (1..3) offsets."""
    o0, o1, o2 = np.uint64(o0), np.uint64(o1), np.uint64(o2)
    if ntap == 3:
        if first:
            for i in range(np.uint64(n)):
                acc[i] = b[o0 + i] + b[o1 + i] + b[o2 + i]
        else:
            for i in range(np.uint64(n)):
                acc[i] += b[o0 + i] + b[o1 + i] + b[o2 + i]
    elif ntap == 2:
        if first:
            for i in range(np.uint64(n)):
                acc[i] = b[o0 + i] + b[o1 + i]
        else:
            for i in range(np.uint64(n)):
                acc[i] += b[o0 + i] + b[o1 + i]
    elif first:
        for i in range(np.uint64(n)):
            acc[i] = b[o0 + i]
    else:
        for i in range(np.uint64(n)):
            acc[i] += b[o0 + i]


@njit(**_JIT)
def _pool_flat(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
    """Max or average pool of planes [p0, p1) of flat x into flat y over blocks of channel
    planes via phase buffers (see above)."""
    D, H, W = in3
    OD, OH, OW = o3
    OP = OD * OH * OW
    if p1 <= p0 or OP == 0:
        return
    q3, run, pq, nb, buf, rowbuf, offs = phase_buffers(p1 - p0, k3, s3, d3, o3, xf.dtype)
    acc = np.empty(nb * pq, xf.dtype)
    nt = offs.size
    # separable window sizes for the average: count_d[od] * count_h[oh] * count_w[ow]
    cnt = np.zeros((3, max(OD, OH, OW)), xf.dtype)
    if not is_max:
        for ax in range(3):
            for o in range(o3[ax]):
                if count_include_pad:
                    a0, a1 = span(o * s3[ax], in3[ax] + p6[ax] + p6[ax + 3], d3[ax], k3[ax])
                else:
                    a0, a1 = span(o * s3[ax] - p6[ax], in3[ax], d3[ax], k3[ax])
                cnt[ax, o] = a1 - a0
    cw = cnt[2]
    for nc0 in range(p0, p1, nb):
        m = min(nb, p1 - nc0)
        fill_phases(xf, nc0, m, nb, (D, H, W), s3, p6, q3, buf, rowbuf,
                    -np.inf if is_max else 0.0)
        L = (m - 1) * pq + run
        n3 = nt - nt % 3
        for t in range(0, n3, 3):  # ntap is a literal 3 here: the loop body is specialised
            if is_max:
                _max_taps(acc, buf, offs[t], offs[t + 1], offs[t + 2], L, t == 0)
            else:
                _sum_taps(acc, buf, offs[t], offs[t + 1], offs[t + 2], 3, L, t == 0)
        if n3 < nt:  # one or two taps left; max may repeat a tap
            u1 = min(n3 + 1, nt - 1)
            if is_max:
                _max_taps(acc, buf, offs[n3], offs[u1], offs[u1], L, n3 == 0)
            else:
                _sum_taps(acc, buf, offs[n3], offs[u1], offs[u1], nt - n3, L, n3 == 0)
        for c in range(m):
            for od in range(OD):
                for oh in range(OH):
                    src = np.uint64(c * pq + (od * q3[1] + oh) * q3[2])
                    dst = np.uint64(((nc0 + c) * OD + od) * OH + oh) * np.uint64(OW)
                    if is_max:
                        copy_run(y, dst, acc, src, OW, 1)
                    else:
                        cdh = cnt[0, od] * cnt[1, oh]
                        for ow in range(np.uint64(OW)):
                            y[dst + ow] = acc[src + ow] / (cdh * cw[ow])


# ---------------------------------------------------------------- stride-1 'same' pools
# With stride 1 and an output as large as the input, max/mean are separable and every axis
# pass is a flat run over a whole block of planes: out[q] = op_k in[q + e_k] where e_k is the
# tap's flat offset along that axis.  Reads that cross a row/plane edge land in the padding
# and are masked out with per-tap validity masks (periodic over planes, so built once).  No
# padded copy and no per-row work: two or three streaming passes per block.


@njit(inline="always", **_JIT)
def _sel(m, v, pad):
    return v if m else pad


@njit(inline="always", **_JIT)
def _masked_max(dst, d0, src, s0, o0, o1, o2, m0, m1, m2, q0, q1, pad, first):
    """dst[d0+q] = max(dst (unless first), masked src[s0+q+o_t]) for q in [q0, q1)."""
    d0 = np.uint64(d0)
    a0, a1, a2 = np.uint64(s0 + o0), np.uint64(s0 + o1), np.uint64(s0 + o2)
    for q in range(np.uint64(q0), np.uint64(q1)):
        v = _mx(_mx(_sel(m0[q], src[a0 + q], pad), _sel(m1[q], src[a1 + q], pad)),
                _sel(m2[q], src[a2 + q], pad))
        dst[d0 + q] = v if first else _mx(dst[d0 + q], v)


@njit(inline="always", **_JIT)
def _masked_sum(dst, d0, src, s0, o0, o1, o2, m0, m1, m2, ntap, q0, q1, first):
    """dst[d0+q] (+)= sum of the first ntap masked src[s0+q+o_t] for q in [q0, q1)."""
    d0 = np.uint64(d0)
    a0, a1, a2 = np.uint64(s0 + o0), np.uint64(s0 + o1), np.uint64(s0 + o2)
    z = src.dtype.type(0)
    if ntap == 3:
        for q in range(np.uint64(q0), np.uint64(q1)):
            v = _sel(m0[q], src[a0 + q], z) + _sel(m1[q], src[a1 + q], z) \
                + _sel(m2[q], src[a2 + q], z)
            dst[d0 + q] = v if first else dst[d0 + q] + v
    elif ntap == 2:
        for q in range(np.uint64(q0), np.uint64(q1)):
            v = _sel(m0[q], src[a0 + q], z) + _sel(m1[q], src[a1 + q], z)
            dst[d0 + q] = v if first else dst[d0 + q] + v
    else:
        for q in range(np.uint64(q0), np.uint64(q1)):
            v = _sel(m0[q], src[a0 + q], z)
            dst[d0 + q] = v if first else dst[d0 + q] + v


@njit(**_JIT)
def _masked_pass(dst, d0, src, s0, n, offs, masks, t0, t1, is_max):
    """dst[d0+q] = op over taps t0 <= t < t1 of (src[s0+q+offs[t]] if masks[t, q]), q < n.

    Taps go in fused groups of three; reads outside src (only near its two ends, and always
    masked there) are skipped by an element-wise edge loop.
    """
    pad = src.dtype.type(-np.inf if is_max else 0.0)
    emin, emax = offs[t0], offs[t0]
    for t in range(t0, t1):
        emin, emax = min(emin, offs[t]), max(emax, offs[t])
    lo = min(n, max(0, -(s0 + emin)))
    hi = max(lo, min(n, src.size - s0 - emax))
    n3 = t1 - (t1 - t0) % 3
    for t in range(t0, n3, 3):  # literal 3 taps: specialised loop body
        if is_max:
            _masked_max(dst, d0, src, s0, offs[t], offs[t + 1], offs[t + 2], masks[t],
                        masks[t + 1], masks[t + 2], lo, hi, pad, t == t0)
        else:
            _masked_sum(dst, d0, src, s0, offs[t], offs[t + 1], offs[t + 2], masks[t],
                        masks[t + 1], masks[t + 2], 3, lo, hi, t == t0)
    if n3 < t1:  # one or two taps left; max may repeat a tap
        u1 = min(n3 + 1, t1 - 1)
        if is_max:
            _masked_max(dst, d0, src, s0, offs[n3], offs[u1], offs[u1], masks[n3], masks[u1],
                        masks[u1], lo, hi, pad, n3 == t0)
        else:
            _masked_sum(dst, d0, src, s0, offs[n3], offs[u1], offs[u1], masks[n3], masks[u1],
                        masks[u1], t1 - n3, lo, hi, n3 == t0)
    for e in range(2):
        for q in range(0, lo) if e == 0 else range(hi, n):
            acc = pad
            for t in range(t0, t1):
                i = s0 + q + offs[t]
                if masks[t, q] and 0 <= i < src.size:
                    acc = _mx(acc, src[i]) if is_max else acc + src[i]
            dst[d0 + q] = acc


@njit(inline="always", **_JIT)
def _div_run(y, d0, c, n):
    """y[d0+q] /= c[q] for q < n."""
    d0 = np.uint64(d0)
    for q in range(np.uint64(n)):
        y[d0 + q] = y[d0 + q] / c[q]


@njit(**_JIT)
def _mul_axis(dst, vals, in3, ax):
    """dst[(d, h, w)] *= vals[coordinate along ax] over one (D, H, W) plane."""
    i = 0
    for d in range(in3[0]):
        for h in range(in3[1]):
            for w in range(in3[2]):
                dst[i] *= vals[d if ax == 0 else h if ax == 1 else w]
                i += 1


@njit(**_JIT)
def _mask_axis(dst, vals, in3, ax):
    """dst[(d, h, w)] = vals[coordinate along ax] != 0 over one (D, H, W) plane."""
    i = 0
    for d in range(in3[0]):
        for h in range(in3[1]):
            for w in range(in3[2]):
                dst[i] = vals[d if ax == 0 else h if ax == 1 else w] != 0
                i += 1


@njit(**_JIT)
def _pool_same(xf, y, in3, k3, p6, d3, is_max, count_include_pad, p0, p1):
    """Stride-1 pool whose output has the input's spatial shape, as masked axis passes, of
    planes [p0, p1) of flat x into flat y."""
    D, H, W = in3
    NC, P = p1 - p0, D * H * W
    if NC <= 0 or P == 0:
        return
    dt = xf.dtype
    nb = min(NC, max(1, _BLOCK_ELEMS // P))
    bl = nb * P
    st3 = (H * W, W, 1)
    nt = 0
    for ax in range(3):
        nt += k3[ax] if k3[ax] > 1 else 0
    offs = np.empty(nt, np.int64)
    masks = np.empty((nt, bl), np.bool_)
    axes = np.empty(4, np.int64)  # taps of the j-th active axis: axes[j] <= t < axes[j+1]
    cnt = np.ones(bl, dt)  # window sizes (the first plane, then replicated)
    t, na, margin = 0, 0, 0
    axes[0] = 0
    for ax in (2, 1, 0):  # W first: the first pass streams x row by row
        S, k, d, pb = in3[ax], k3[ax], d3[ax], p6[ax]
        # window size per coordinate along this axis, multiplied into the first plane's counts
        cax = np.empty(S, dt)
        for c in range(S):
            if count_include_pad:
                a0, a1 = span(c, S + pb + p6[ax + 3], d, k)
            else:
                a0, a1 = span(c - pb, S, d, k)
            cax[c] = a1 - a0
        _mul_axis(cnt, cax, in3, ax)
        if k == 1:
            continue
        for kk in range(k):
            e = kk * d - pb
            offs[t] = e * st3[ax]
            margin = max(margin, abs(e * st3[ax]))
            for c in range(S):
                cax[c] = 1 if 0 <= c + e < S else 0
            _mask_axis(masks[t], cax, in3, ax)
            t += 1
        na += 1
        axes[na] = t
    for b in range(1, nb):  # the pattern repeats for every plane of the block
        for q in range(P):
            cnt[b * P + q] = cnt[q]
        for t in range(nt):
            for q in range(P):
                masks[t, b * P + q] = masks[t, q]
    tmp = np.empty((2, bl + 2 * margin), dt)
    for nc0 in range(p0, p1, nb):
        n = min(nb, p1 - nc0) * P
        src, s0 = xf, nc0 * P
        for j in range(na):
            if j == na - 1:
                dst, d0 = y, nc0 * P
            else:
                dst, d0 = tmp[j % 2], margin
            _masked_pass(dst, d0, src, s0, n, offs, masks, axes[j], axes[j + 1], is_max)
            src, s0 = dst, d0
        if not is_max:
            _div_run(y, nc0 * P, cnt, n)


# ---------------------------------------------------------------- 2-D windows by rows
# Windows over (H, W) with column stride 2, 2 or 3 columns wide (2x2/2, 3x3/2 and the like),
# float32 on AVX-512, 16 outputs of a row at a time and all in registers: for each input row
# of the window, two vector loads cover the 32 columns from 2*ow - pl (a third the 33rd, for
# 3 wide) and are combined (max or sum) across the rows; a shuffle of the two then gives the
# even and the odd columns, one more lane shift the next even ones.  Columns outside the
# input (pads, ceil_mode) are masked loads of the padding value.  LLVM's own vectoriser
# leaves these stride-2 reads scalar (3-4x slower); the phase-split scheme reads and writes
# the input twice more, and combining the rows into a buffer first cost a store and a
# reload of every column (0.8 us per 64x64 plane of a 2x2/2 max pool against 0.57).
_vdiv = lane_op("_vdiv", "fdiv", "a / b.")


@intrinsic
def _vhasnan(typingctx, a):
    """Whether any lane of a is NaN (the running max vmax skips NaNs)."""
    def codegen(context, builder, sig, args):
        m = builder.fcmp_unordered("uno", args[0], args[0])
        return builder.icmp_unsigned("!=", builder.bitcast(m, ir.IntType(16)),
                                     ir.IntType(16)(0))
    return types.boolean(f32x16), codegen


@njit(**_JIT)
def _rows_max_scalar(xf, y, dst, plane, H, W, h0, r0, r1, dh, kw, pl, i, n):
    """Outputs i .. i+n-1 of one output row of _pool_rows' max, one window at a time with the
    NaN-propagating _mx: the vector pass's fallback when a NaN reached its block."""
    for j in range(i, i + n):
        m = np.float32(-np.inf)
        for r in range(r0, r1):
            row = (plane * H + h0 + r * dh) * W
            for kx in range(kw):
                c = 2 * j - pl + kx
                if 0 <= c < W:
                    m = _mx(m, xf[row + c])
        y[dst + j] = m


@njit(inline="always", **_JIT)
def _row_col_counts(in3, k3, s3, p6, d3, o3, is_max, count_include_pad, lanes):
    """The rows scheme's average divisors: window rows counted per output row, then window
    columns per output column (padded to whole vectors of `lanes`); zeros for max."""
    OH, OW = o3[1], o3[2]
    cnt = np.zeros(OH + (OW + lanes - 1) // lanes * lanes, np.float32)
    if not is_max:
        for ax in range(2):
            S, k, s, d, pb = in3[ax + 1], k3[ax + 1], s3[ax + 1], d3[ax + 1], p6[ax + 1]
            for o in range(o3[ax + 1]):
                if count_include_pad:
                    a0, a1 = span(o * s, S + pb + p6[ax + 4], d, k)
                else:
                    a0, a1 = span(o * s - pb, S, d, k)
                cnt[ax * OH + o] = a1 - a0
    return cnt


@njit(inline="always", **_JIT)
def _rows_pass(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
    """_pool_rows for float32 (is_max a constant at each call: both passes fold their branches)."""
    D, H, W = in3
    OH, OW = o3[1], o3[2]
    kh, kw, sh, dh = k3[1], k3[2], s3[1], d3[1]
    pt, pl = p6[1], p6[2]
    if p1 <= p0 or OH * OW == 0:
        return
    pad = np.float32(-np.inf if is_max else 0.0)
    cnt = _row_col_counts(in3, k3, s3, p6, d3, o3, is_max, count_include_pad, 16)
    padv, zero = vsplat(pad), vsplat(np.float32(0.0))
    for plane in range(p0 * D, p1 * D):
        for oh in range(OH):
            h0 = oh * sh - pt
            r0, r1 = span(h0, H, dh, kh)
            dst = (plane * OH + oh) * OW
            if not is_max:
                ch = vbcast(cnt, oh)
            for i in range(0, OW, 16):     # 16 outputs: input columns c .. c+32
                c = 2 * i - pl
                lo, hi, nx = padv, padv, padv  # stay padding when no row is inside
                chk = zero   # max: the sum of the loads, NaN if one of them is
                for r in range(r0, r1):
                    row = (plane * H + h0 + r * dh) * W
                    a, b = row_vec(xf, row, W, c, pad), row_vec(xf, row, W, c + 16, pad)
                    if is_max:
                        lo, hi = vmax(lo, a), vmax(hi, b)
                        chk = vadd(chk, vadd(a, b))
                    else:
                        lo, hi = vadd(lo, a), vadd(hi, b)
                    if kw == 3:
                        e = row_vec(xf, row, W, c + 32, pad)
                        if is_max:
                            nx = vmax(nx, e)
                            chk = vadd(chk, e)
                        else:
                            nx = vadd(nx, e)
                ev, od = vevens(lo, hi), vodds(lo, hi)
                n = min(16, OW - i)
                if is_max and _vhasnan(chk):  # (or +inf met the -inf padding): exact path
                    _rows_max_scalar(xf, y, dst, plane, H, W, h0, r0, r1, dh, kw, pl, i, n)
                    continue
                if is_max:
                    v = vmax(ev, od)
                    if kw == 3:
                        v = vmax(v, vnext(ev, nx))
                else:
                    v = vadd(ev, od)
                    if kw == 3:
                        v = vadd(v, vnext(ev, nx))
                    v = _vdiv(v, vmul(ch, vload(cnt, OH + i)))
                if n == 16:
                    vstore(y, dst + i, v)
                else:
                    vstorem(y, dst + i, v, n)


def _pool_rows(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
    """Max or average pool of planes [p0, p1) of flat float32 x into flat y for windows that
    scheme() calls "rows" (each depth slice a plane of its own)."""
    raise NotImplementedError


@overload(_pool_rows)
def _pool_rows_impl(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
    if xf.dtype != types.float32:
        def unused(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
            raise ValueError("_pool_rows: float32 only")
        return unused

    def impl(xf, y, in3, k3, s3, p6, d3, o3, is_max, count_include_pad, p0, p1):
        if is_max:
            _rows_pass(xf, y, in3, k3, s3, p6, d3, o3, True, count_include_pad, p0, p1)
        else:
            _rows_pass(xf, y, in3, k3, s3, p6, d3, o3, False, count_include_pad, p0, p1)
    return impl


# ---------------------------------------------------------------- one window per plane
@njit(fastmath={"reassoc", "contract"}, **_JIT)
def _plane_sum(xf, s0, n):
    """Sum of xf[s0:s0+n] in float64 (reassociated, so it vectorises)."""
    acc = 0.0
    s0 = np.uint64(s0)
    for i in range(np.uint64(n)):
        acc += np.float64(xf[s0 + i])
    return acc


@njit(**_JIT)
def _plane_max(xf, s0, n):
    """NaN-propagating max of xf[s0:s0+n], eight independent lanes (n >= 1)."""
    ninf = xf.dtype.type(-np.inf)
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = ninf
    i, end = np.uint64(s0), np.uint64(s0 + n - n % 8)
    while i < end:
        m0, m1 = _mx(m0, xf[i]), _mx(m1, xf[i + np.uint64(1)])
        m2, m3 = _mx(m2, xf[i + np.uint64(2)]), _mx(m3, xf[i + np.uint64(3)])
        m4, m5 = _mx(m4, xf[i + np.uint64(4)]), _mx(m5, xf[i + np.uint64(5)])
        m6, m7 = _mx(m6, xf[i + np.uint64(6)]), _mx(m7, xf[i + np.uint64(7)])
        i += np.uint64(8)
    r = _mx(_mx(_mx(m0, m1), _mx(m2, m3)), _mx(_mx(m4, m5), _mx(m6, m7)))
    while i < np.uint64(s0 + n):
        r = _mx(r, xf[i])
        i += np.uint64(1)
    return r


@njit(**_JIT)
def _pool_whole(xf, y, in3, k3, s3, p6, d3, is_max, count_include_pad, p0, p1):
    """Pools whose single window per plane covers the whole plane (e.g. 7x7 on 7x7), of
    planes [p0, p1) of flat x into flat y."""
    P = in3[0] * in3[1] * in3[2]
    cnt = 1
    for ax in range(3):
        if count_include_pad:
            a0, a1 = span(0, in3[ax] + p6[ax] + p6[ax + 3], d3[ax], k3[ax])
        else:
            a0, a1 = span(-p6[ax], in3[ax], d3[ax], k3[ax])
        cnt *= a1 - a0
    for nc in range(p0, p1):
        if is_max:
            y[nc] = _plane_max(xf, nc * P, P)
        else:
            y[nc] = _plane_sum(xf, nc * P, P) / cnt


# ---------------------------------------------------------------- entries, one per scheme
# Numba links every callee's code into each caller and optimizes the whole again at every njit
# level (and a prange region adds two), so an entry holding all four schemes behind a runtime
# branch cost ~43 s of compile at first use, most of it re-optimizing schemes it never ran.
# The lowering picks the scheme from the shapes and the target (``scheme`` below) and calls
# that scheme's entry, ``maxpool_<scheme>`` or ``avgpool_<scheme>``: ~6 s for one.  Each has
# a planes function (``_pool_<scheme>``, a run of planes, max or average a literal flag) and
# the entry, which sets up the geometry and runs the planes on one thread or several (its
# own prange loop: a wrapper between them would be one more level optimizing them again).

SCHEMES = ("whole", "same", "rows", "flat")

def _pad3(t, fill):
    t = tuple(int(v) for v in t)
    return (fill,) * (3 - len(t)) + t


def scheme(shape, dtype, kernel, strides, pads, dilations, out_shape, target=None):
    """The scheme ("whole", "same", "rows" or "flat") for a pool of an (N, C, *S) array of
    `dtype` with this geometry (as shapes.pool_geometry gives it) on `target` (the host's
    by default): see the module docstring."""
    from ..target import host
    target = target or host()
    k = len(kernel)
    in3, k3, s3 = _pad3(shape[2:], 1), _pad3(kernel, 1), _pad3(strides, 1)
    d3, o3 = _pad3(dilations, 1), _pad3(out_shape, 1)
    p6 = _pad3(pads[:k], 0) + _pad3(pads[k:], 0)
    whole = all(o3[a] == 1 and (d3[a] == 1 or k3[a] == 1) and k3[a] - p6[a] >= in3[a]
                for a in range(3))
    same = all(s3[a] == 1 and o3[a] == in3[a] for a in range(3))
    if whole:
        return "whole"
    if same and k3[0] * k3[1] * k3[2] > 1:
        return "same"
    if (np.dtype(dtype) == np.float32 and target.split16 and k3[0] == 1 and s3[0] == 1
            and p6[0] == 0 and p6[3] == 0 and o3[0] == in3[0] and s3[2] == 2 and d3[2] == 1
            and k3[2] in (2, 3)):
        return "rows"
    return "flat"


@njit(**_JIT)
def _geo(g):
    """in3, k3, s3, p6, d3, o3 from the flat geometry array (Numba's parallel regions take
    arrays, not tuples; not inlined: its tuples trip the array analysis of the parallel
    entries)."""
    return ((g[0], g[1], g[2]), (g[3], g[4], g[5]), (g[6], g[7], g[8]),
            (g[9], g[10], g[11], g[12], g[13], g[14]), (g[15], g[16], g[17]),
            (g[18], g[19], g[20]))


@njit(**_JIT)
def _setup(x, kernel, strides, pads, dilations, out_shape):
    """The flat input, the flat output, the geometry array, planes and threads of a pool (its
    own function: inlined into the parallel entries, its tuple-into-slice stores trip Numba's
    array analysis)."""
    x5 = as5d(x)
    k3, s3, p6 = tup3(kernel, 1), tup3(strides, 1), pads6(pads)
    d3, o3 = tup3(dilations, 1), tup3(out_shape, 1)
    N, C = x5.shape[0], x5.shape[1]
    y = np.empty(N * C * o3[0] * o3[1] * o3[2], x.dtype)
    xf = np.ascontiguousarray(x5).reshape(x5.size)
    geo = np.empty(21, np.int64)
    geo[0], geo[1], geo[2] = x5.shape[2], x5.shape[3], x5.shape[4]
    put_window(geo, 3, k3, s3, p6, d3, o3)
    nt = num_threads() if y.size * k3[0] * k3[1] * k3[2] >= POOL_PAR_MIN else 1
    return xf, y, geo, N * C, nt if N * C > 1 else 1, (N, C) + o3


@njit(**_JIT)
def _rows_planes16(xf, y, geo, is_max, cip, p0, p1):
    """Planes [p0, p1) of the rows scheme in 16-lane vectors (AVX-512): _pool_rows (an
    @overload) called from this one place, since its closure compiles again at every call
    site (5.3 s against 2.7 at first use, called from both the thread loop and the one-thread
    branch of the entry)."""
    in3, k3, s3, p6, d3, o3 = _geo(geo)
    if is_max:
        _pool_rows(xf, y, in3, k3, s3, p6, d3, o3, True, cip, p0, p1)
    else:
        _pool_rows(xf, y, in3, k3, s3, p6, d3, o3, False, cip, p0, p1)


@njit(**_JIT)
def _rows_planes_n(xf, y, geo, is_max, cip, p0, p1):
    """Planes [p0, p1) of the rows scheme in vectors of the target's width (AVX2: 8 lanes,
    where the 16-lane shuffles of ``_rows_planes16`` split into ymm halves), the window's
    rows first: per output row, the op over its input rows column by column (whole vectors,
    the row's ragged end a masked load, no shuffles) into one padded row `pr` (pl pad values,
    the W combined columns, pad values past them); then window column kx of output column ow
    is pr[2 ow + kx]: the evens and odds of two loads, and the evens of two more for kx = 2.
    All it touches but x and y stays in L1.  It replaced splitting every input row of a plane
    into even and odd columns first (2 H row-widths of scratch a plane, read back per output
    row): 0.70-0.86x that walk's time on SqueezeNet's, ResNet's and a 2x2 pool's planes, max
    and average, 1 thread, old and new alternating in one process (2026-11-27, Zen 3).
    Max: a plane whose windows read a NaN is redone exactly, row by row
    (``_rows_max_scalar``)."""
    in3, k3, s3, p6, d3, o3 = _geo(geo)
    D, H, W = in3
    OH, OW = o3[1], o3[2]
    kh, kw, sh, dh = k3[1], k3[2], s3[1], d3[1]
    pt, pl = p6[1], p6[2]
    if p1 <= p0 or OH * OW == 0:
        return
    L = V.LANES
    pad = np.float32(-np.inf) if is_max else np.float32(0.0)
    cnt = _row_col_counts(in3, k3, s3, p6, d3, o3, is_max, cip, L)
    rw = (OW + L - 1) // L * L
    pr = np.full(max(2 * rw + 2 * L, pl + W + L), pad)
    padv, zero = V.splat(pad), V.zero()
    wv = W // L * L
    for plane in range(p0 * D, p1 * D):
        xo = plane * H * W
        chk = zero                  # max: the sum of what the windows read, NaN if one is
        for oh in range(OH):
            h0 = oh * sh - pt
            r0, r1 = span(h0, H, dh, kh)
            dst = (plane * OH + oh) * OW
            for j in range(0, W, L):
                v = padv
                for r in range(r0, r1):
                    row = xo + (h0 + r * dh) * W
                    if j < wv:
                        u = V.load(xf, row + j)
                    else:           # the row's ragged end; pad past it (pr's own pad)
                        u = V.load_span(xf, row + j, I0, W - j, pad)
                    if is_max:
                        v = vmax(v, u)
                        chk = vadd(chk, u)
                    else:
                        v = vadd(v, u)
                V.store(pr, pl + j, v)
            if not is_max:
                ch = V.bcast(cnt, oh)
            for i in range(0, OW, L):
                u0, u1 = V.load(pr, 2 * i), V.load(pr, 2 * i + L)
                ev, od = vevens(u0, u1), vodds(u0, u1)
                if is_max:
                    v = vmax(ev, od)
                    if kw == 3:
                        v = vmax(v, vevens(V.load(pr, 2 * i + 2), V.load(pr, 2 * i + 2 + L)))
                else:
                    v = vadd(ev, od)
                    if kw == 3:
                        v = vadd(v, vevens(V.load(pr, 2 * i + 2), V.load(pr, 2 * i + 2 + L)))
                    v = _vdiv(v, vmul(ch, V.load(cnt, OH + i)))
                if OW - i >= L:
                    vstore(y, dst + i, v)
                else:
                    vstorem(y, dst + i, v, OW - i)
        if is_max:
            t = vhsum(chk)
            if t != t:              # a NaN was read: the plane again, exactly
                for oh in range(OH):
                    h0 = oh * sh - pt
                    r0, r1 = span(h0, H, dh, kh)
                    _rows_max_scalar(xf, y, (plane * OH + oh) * OW, plane, H, W, h0, r0, r1,
                                     dh, kw, pl, I0, OW)


# the rows scheme's walk, by the target's vector width (kernels/simd.native)
_rows_planes = _rows_planes_n if V.LANES < LANES16 else _rows_planes16


# The entries: ONNX MaxPool output Y / AveragePool (count_include_pad 0/1) of x (N, C, *S)
# -> (N, C, *out_shape), geometry as shapes.pool_geometry gives it.
@njit(parallel=PRANGE_ONLY, **_JIT)
def maxpool_whole(x, kernel, strides, pads, dilations, out_shape):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_whole(xf, y, in3, k3, s3, p6, d3, True, I0, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_whole(xf, y, in3, k3, s3, p6, d3, True, I0, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def maxpool_same(x, kernel, strides, pads, dilations, out_shape):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_same(xf, y, in3, k3, p6, d3, True, I0, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_same(xf, y, in3, k3, p6, d3, True, I0, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def maxpool_rows(x, kernel, strides, pads, dilations, out_shape):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            _rows_planes(xf, y, geo, True, I0, p0, p1)
    else:
        _rows_planes(xf, y, geo, True, I0, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def maxpool_flat(x, kernel, strides, pads, dilations, out_shape):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_flat(xf, y, in3, k3, s3, p6, d3, o3, True, I0, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_flat(xf, y, in3, k3, s3, p6, d3, o3, True, I0, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def avgpool_whole(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    cip = np.int64(count_include_pad)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_whole(xf, y, in3, k3, s3, p6, d3, False, cip, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_whole(xf, y, in3, k3, s3, p6, d3, False, cip, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def avgpool_same(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    cip = np.int64(count_include_pad)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_same(xf, y, in3, k3, p6, d3, False, cip, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_same(xf, y, in3, k3, p6, d3, False, cip, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def avgpool_rows(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    cip = np.int64(count_include_pad)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            _rows_planes(xf, y, geo, False, cip, p0, p1)
    else:
        _rows_planes(xf, y, geo, False, cip, I0, planes)
    return from5d(y.reshape(shape), x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def avgpool_flat(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    xf, y, geo, planes, nt, shape = _setup(x, kernel, strides, pads, dilations, out_shape)
    cip = np.int64(count_include_pad)
    if nt > 1:
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            in3, k3, s3, p6, d3, o3 = _geo(geo)
            _pool_flat(xf, y, in3, k3, s3, p6, d3, o3, False, cip, p0, p1)
    else:
        in3, k3, s3, p6, d3, o3 = _geo(geo)
        _pool_flat(xf, y, in3, k3, s3, p6, d3, o3, False, cip, I0, planes)
    return from5d(y.reshape(shape), x)


MAXPOOL = {"whole": maxpool_whole, "same": maxpool_same, "rows": maxpool_rows,
           "flat": maxpool_flat}
AVGPOOL = {"whole": avgpool_whole, "same": avgpool_same, "rows": avgpool_rows,
           "flat": avgpool_flat}


def maxpool(x, kernel, strides, pads, dilations, out_shape):
    """ONNX MaxPool output Y, from Python (tests, tools), called as the lowering calls it: the
    scheme's entry on the canonical form (5-D x, 3-entry geometry: shapes.shape5, window3),
    its result in x's rank."""
    name = scheme(x.shape, x.dtype, kernel, strides, pads, dilations, out_shape)
    y = MAXPOOL[name](x.reshape(shape5(x.shape)),
                      *window3(kernel, strides, pads, dilations, out_shape))
    return y.reshape(x.shape[:2] + tuple(out_shape))


def avgpool(x, kernel, strides, pads, dilations, out_shape, count_include_pad):
    """ONNX AveragePool from Python (tests, tools), called as the lowering calls it (see
    maxpool)."""
    name = scheme(x.shape, x.dtype, kernel, strides, pads, dilations, out_shape)
    y = AVGPOOL[name](x.reshape(shape5(x.shape)),
                      *window3(kernel, strides, pads, dilations, out_shape),
                      int(count_include_pad))
    return y.reshape(x.shape[:2] + tuple(out_shape))


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
def maxpool_with_indices(x, kernel, strides, pads, dilations, out_shape, storage_order):
    """ONNX MaxPool (Y, Indices); Indices flat over (N,C,*S), spatial column-major if storage_order."""
    y, idx = _maxpool_idx5(as5d(x), tup3(kernel, 1), tup3(strides, 1), pads6(pads),
                           tup3(dilations, 1), tup3(out_shape, 1), storage_order)
    return from5d(y, x), from5d(idx, x)


@njit(**_JIT)
def global_avgpool(x):
    """ONNX GlobalAveragePool: x (N,C,*S) -> (N,C,1,...,1), float64 accumulation."""
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    P = x5.shape[2] * x5.shape[3] * x5.shape[4]
    xf = x5.reshape(x5.size)
    y = np.empty((N, C, 1, 1, 1), x.dtype)
    yf = y.reshape(N * C)
    for nc in range(N * C):
        yf[nc] = _plane_sum(xf, nc * P, P) / P
    return from5d(y, x)


@njit(**_JIT)
def global_maxpool(x):
    """ONNX GlobalMaxPool: x (N,C,*S) -> (N,C,1,...,1); NaN if the plane has one."""
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    P = x5.shape[2] * x5.shape[3] * x5.shape[4]
    xf = x5.reshape(x5.size)
    y = np.empty((N, C, 1, 1, 1), x.dtype)
    yf = y.reshape(N * C)
    for nc in range(N * C):
        yf[nc] = _plane_max(xf, nc * P, P) if P > 0 else -np.inf
    return from5d(y, x)


@njit(parallel=PRANGE_ONLY, **_JIT)
def lrn(x, size, alpha, beta, bias):
    """ONNX LRN: y = x / (bias + alpha/size * sum_{window over C} x^2) ** beta, any rank >= 3.

    beta 0.75 (AlexNet, GoogLeNet, ZFNet), 0.5 and 1 take the power by square roots and a
    division, which vectorise (a general ** is a scalar libm call per element: 9 ms of
    GoogLeNet's 42).  With several Numba threads, channels are shared out between them.
    """
    x5 = as5d(x)
    N, C = x5.shape[0], x5.shape[1]
    P = x5.shape[2] * x5.shape[3] * x5.shape[4]
    xf = np.ascontiguousarray(x5).reshape(x5.size)
    y = np.empty(x5.size, x.dtype)
    nt = num_threads() if x5.size * size >= LRN_PAR_MIN else 1
    if nt > 1:
        # _lrn_planes over `nt` threads, each a run of the planes.
        planes = N * C
        for t in prange(nt):
            p0, p1 = split_range(planes, nt, t, 1)
            _lrn_planes(xf, y, C, P, size, alpha, beta, bias, p0, p1)
    else:
        _lrn_planes(xf, y, C, P, size, alpha, beta, bias, I0, N * C)   # I0: no Literal[int]
    return from5d(y.reshape(x5.shape), x)


@njit(**_JIT)
def _lrn_planes(xf, y, C, P, size, alpha, beta, bias, p0, p1):
    """LRN of the planes p0 <= n * C + c < p1 of flat x into flat y."""
    dt = xf.dtype.type
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2  # floor / ceil of (size-1)/2
    acc = np.empty(P, xf.dtype)
    k, a = dt(bias), dt(alpha / size)
    up = np.uint64(P)
    for plane in range(p0, p1):
        n, c = plane // C, plane % C
        acc[:] = 0
        for cc in range(max(0, c - lo), min(C, c + hi + 1)):
            src = np.uint64((n * C + cc) * P)
            for q in range(up):
                v = xf[src + q]
                acc[q] += v * v
        o = np.uint64(plane * P)
        if beta == 0.75:
            for q in range(up):
                d = k + a * acc[q]
                r = np.sqrt(d)
                y[o + q] = xf[o + q] / (r * np.sqrt(r))
        elif beta == 0.5:
            for q in range(up):
                y[o + q] = xf[o + q] / np.sqrt(k + a * acc[q])
        elif beta == 1.0:
            for q in range(up):
                y[o + q] = xf[o + q] / (k + a * acc[q])
        else:
            for q in range(up):
                y[o + q] = xf[o + q] / (k + a * acc[q]) ** beta


