"""Direct stride-2 Conv for few input channels: the stems of SqueezeNet, ShuffleNet and the like.

``conv_s2`` computes y = act(conv(x, w) + b (+ res)) for float32 x (N, C, H, W), any kh x kw
kernel with stride 2, dilation 1 and one group, on AVX-512, from weights packed by
``pack_s2``.  With few taps K = C*kh*kw (27 for 3 channels 3x3) im2col + GEMM spends more time
writing and re-reading the column matrix than multiplying: SqueezeNet's 3->64 3x3/2 conv at
224x224 took 0.89 ms there against ORT's 0.49 ms (1 thread).

Per 16 outputs of an output row: for each input channel and kernel row, two vector loads of
the input row from column 2*ow0 - pl + 2t, split into their even and odd columns (the
shuffles of the pooling kernels), are the inputs of taps kx = 2t and 2t + 1; out-of-range
rows and columns are zeros (masked loads).  The K tap vectors of a whole output row go to a
scratch that stays in L1/L2, then 8 output channels at a time accumulate K broadcast-weight
FMAs each in registers, block after block of the row, into a row buffer; the bias, residual
and activation (Relu, Clip, HardSwish: kernels/epilogue.py's vact) are applied on the way
from there to y, one contiguous output row per channel (MobileNet's stem with HardSwish:
0.42 -> 0.39 ms in the model, against a separate pass over its 1.6 MB output).
Rows of the output are split over Numba's threads.

That last pass is written out in the loop: as an inline helper taking the arrays it ran 2x
slower than everything else together (1.0 of 1.4 ms for SqueezeNet's stem).
"""
import numpy as np
from numba import njit, prange

from . import PRANGE_ONLY
from .epilogue import NO_BOUNDS, flat_res, vact
from .parallel import I0, PAR_MIN_MACS, num_threads, split_range
from .sgemm import NR, pack_a
from .simd import (row_vec, vadd, vbcast, vevens, vfma, vload, vloadm, vodds, vsplat,
                   vstore, vstorem, vzero)

from . import JIT as _JIT
MB = 8          # output channels per register block (NR = 32 divides into 4 of them)
MAX_C = 4        # input channels (images: gray, RGB, RGBA)
MAX_TAPS = 160  # C*kh*kw up to this: 7x7 over 3 channels (ResNet-50's stem 2.48 -> 2.29 ms)


def use_s2(C, kernel, strides, dilations, group, dtype, target):
    """Whether a Conv runs on ``conv_s2`` (2-D, float32, AVX-512, few input channels and taps).
    Measured against im2col + GEMM at 1 thread: 3->64 3x3 at 224x224 0.50 against 0.60 ms,
    3->24 3x3 pad 1 0.21 against 0.32 ms, 3->64 7x7 2.29 against 2.48 ms."""
    return (len(kernel) == 2 and tuple(strides) == (2, 2) and tuple(dilations) == (1, 1)
            and group == 1 and np.dtype(dtype) == np.float32 and target.avx512
            and 0 < C <= MAX_C and C * kernel[0] * kernel[1] <= MAX_TAPS)


def pack_s2(w):
    """Conv weights (M, C, kh, kw) -> ``sgemm.pack_a`` panels (ceil(M/32), C*kh*kw, 32): per
    tap, 32 output channels' weights side by side (zeros past M); the FMAs broadcast 8 of
    them at a time."""
    w = np.asarray(w, np.float32)
    return pack_a(w.reshape(w.shape[0], -1))


@njit(**_JIT)
def _rows(xf, wf, bias, yf, rf, shape, M, OH, OW, kh, kw, pt, pl, act, bounds, has_res, xin, r0,
          r1):
    """Output rows [r0, r1) of all N*OH (all output channels), with the tap scratch xin
    (K vectors per 16 outputs of a row)."""
    C, H, W = shape[1], shape[2], shape[3]
    K = C * kh * kw
    zero = vzero()
    pad0 = np.float32(0.0)
    alo, ahi = vsplat(np.float32(bounds[0])), vsplat(np.float32(bounds[1]))
    OWP = (OW + 15) // 16 * 16
    ybuf = xin[K * OWP:]     # the row's products, M rows of OWP
    for row in range(r0, r1):
        n, oh = row // OH, row % OH
        h0 = 2 * oh - pt
        # the taps of the whole row first, then the products block by block
        for ow0 in range(0, OW, 16):
            col0 = 2 * ow0 - pl
            k = (ow0 // 16) * K
            for c in range(C):
                for ky in range(kh):
                    r = h0 + ky
                    if r < 0 or r >= H:
                        for kx in range(kw):
                            vstore(xin, (k + kx) * 16, zero)
                    else:
                        base = ((n * C + c) * H + r) * W
                        for kx in range(0, kw, 2):
                            lo = row_vec(xf, base, W, col0 + kx, pad0)
                            hi = row_vec(xf, base, W, col0 + kx + 16, pad0)
                            vstore(xin, (k + kx) * 16, vevens(lo, hi))
                            if kx + 1 < kw:
                                vstore(xin, (k + kx + 1) * 16, vodds(lo, hi))
                    k += kw
        for mb in range((M + MB - 1) // MB):
            m = mb * MB
            wo = m // NR * K * NR + m % NR   # channel m's weight at tap 0 in its panel
            for ow0 in range(0, OW, 16):
                xo = (ow0 // 16) * K * 16
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
                for t in range(K):
                    xv = vload(xin, xo + t * 16)
                    w = wo + t * NR
                    a0 = vfma(xv, vbcast(wf, w), a0)
                    a1 = vfma(xv, vbcast(wf, w + 1), a1)
                    a2 = vfma(xv, vbcast(wf, w + 2), a2)
                    a3 = vfma(xv, vbcast(wf, w + 3), a3)
                    a4 = vfma(xv, vbcast(wf, w + 4), a4)
                    a5 = vfma(xv, vbcast(wf, w + 5), a5)
                    a6 = vfma(xv, vbcast(wf, w + 6), a6)
                    a7 = vfma(xv, vbcast(wf, w + 7), a7)
                o = m * OWP + ow0
                vstore(ybuf, o, a0)
                vstore(ybuf, o + OWP, a1)
                vstore(ybuf, o + 2 * OWP, a2)
                vstore(ybuf, o + 3 * OWP, a3)
                vstore(ybuf, o + 4 * OWP, a4)
                vstore(ybuf, o + 5 * OWP, a5)
                vstore(ybuf, o + 6 * OWP, a6)
                vstore(ybuf, o + 7 * OWP, a7)
        for m in range(M):   # bias, residual, Relu, on the way to y's rows
            o = ((n * M + m) * OH + oh) * OW
            bm = vbcast(bias, m)
            for ow0 in range(0, OW, 16):
                cnt = min(16, OW - ow0)
                v = vadd(vload(ybuf, m * OWP + ow0), bm)
                if has_res:
                    v = vadd(v, vloadm(rf, o + ow0, cnt))
                v = vact(v, act, alo, ahi)
                if cnt == 16:
                    vstore(yf, o + ow0, v)
                else:
                    vstorem(yf, o + ow0, v, cnt)


@njit(parallel=PRANGE_ONLY, **_JIT)
def conv_s2(x, wq, m, kernel, bias, pads, act, res, bounds=NO_BOUNDS):
    """ONNX Conv, stride 2, of float32 x (N, C, H, W) with wq = pack_s2(w) for w
    (m, C, kh, kw): act(conv + bias (+ res)) -> (N, m, OH, OW).  pads (top, left, bottom,
    right); act and bounds: kernels/epilogue.py's codes (0 identity, 1 Relu, 2 Clip, 3
    HardSwish); res None or an (N, m, OH, OW) array."""
    N, C, H, W = x.shape
    kh, kw = kernel
    K = C * kh * kw
    if wq.shape[1] != K or wq.shape[2] != NR or wq.shape[0] * NR < m or bias.shape[0] < m:
        raise ValueError("conv_s2: packed weights do not match x / kernel / m")
    OH = (H + pads[0] + pads[2] - kh) // 2 + 1
    OW = (W + pads[1] + pads[3] - kw) // 2 + 1
    y = np.empty((N, m, max(OH, 0), max(OW, 0)), np.float32)
    if y.size == 0:
        return y
    xf = np.ascontiguousarray(x).reshape(x.size)
    yf = y.reshape(y.size)
    rf = flat_res(res, y)
    has_res = rf.size != 0
    bf = np.ascontiguousarray(bias)
    shape = np.array([N, C, H, W], np.int64)
    nt = num_threads() if y.size * K >= PAR_MIN_MACS else 1
    nt = min(nt, N * OH)
    # per thread: K tap vectors, then the row buffer of every (padded) output channel
    scratch = (K + (m + MB - 1) // MB * MB) * ((OW + 15) // 16 * 16)
    wf = wq.reshape(wq.size)
    if nt > 1:
        # each thread a run of the output rows and a scratch of its own (the loop is here,
        # not in a wrapper: each njit level links and optimizes _rows again at first use)
        xins = np.empty((nt, scratch), np.float32)
        rows = N * OH
        for t in prange(nt):
            r0, r1 = split_range(rows, nt, t, 1)
            _rows(xf, wf, bf, yf, rf, shape, m, OH, OW, kh, kw, pads[0], pads[1], act, bounds,
                  has_res, xins[t], r0, r1)
    else:
        _rows(xf, wf, bf, yf, rf, shape, m, OH, OW, kh, kw, pads[0], pads[1], act, bounds,
              has_res, np.empty(scratch, np.float32), I0, N * OH)
    return y
