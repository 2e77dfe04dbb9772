"""Single-precision GEMM for AVX2 (16 ymm registers): constant-weight MatMul / Gemm and the
1x1 convolution, on the 6 x 16 micro-kernels of kernels/microkernels_avx2.py.

The AVX-512 kernels (kernels/sgemm.py: 12 rows x 32 columns = 24 zmm accumulators) spill on
AVX2, where LLVM splits each <16 x float> into two ymm halves.  Here a micro-kernel tile is
6 rows x 16 columns: 6 accumulators = 12 ymm, + 2 for the B row + 1 broadcast = 15 of the 16
ymm registers (the 4 / 2 / 1-row kernels take the row tails).  Chosen at lowering where
``target.f32_gemm == "avx2"`` (ops/nn.py); on AVX-512 the sgemm kernels run.

``pack_b16(b)``: weights (K, N) -> (ceil(N/16), K, 16) panels, zero-padded past column N.
``sgemm16(a, bp, n, bias, act)``: act(a @ b + bias) (act 0 identity, 1 relu), like
``sgemm.sgemm_packed``.  Loop order: K blocks of <= KC, N blocks of packed B that stay in L2,
6-row blocks of A, then the 16-column panels inside the micro-kernel.

``conv1x1_avx2(x, w, m, bias, act, res, bounds)``: the 1x1 stride-1 unpadded Conv
act(W @ X[n] + bias (+ res[n])) per image, W (m, C) as it is (the A operand: 6 of its rows
broadcast), X the B operand: per block of pixels and K block, packed into 16-pixel panels
(vector copies, the last one zero-padded) that all of W's 6-row blocks reuse; with at most
CONV_STREAM_M output channels X's rows are read in place instead (the packing cost more than it
saved) and only a ragged last tile is packed.  The ragged tile's output goes through an (m, 16)
scratch (holding the residual).  Every activation (relu, clip, hardswish) is applied in the
micro-kernel's epilogue on the last K block.  MobileNet's 1x1 convs run at 80-100 GFLOP/s on
one core here (the 7x7 ones lose 15 of 64 columns to the padded tile), 0.6-1.1x the time of
OpenBLAS's AVX-512 im2col path they replace on AVX2.
"""
import numpy as np
from numba import njit, prange

from . import PRANGE_ONLY
from .epilogue import NO_BOUNDS, act1, load_bias, load_res
from .microkernels_avx2 import k1x16, k2x16, k4x16, k6x16
from .parallel import I0, NO, PAR_MIN_MACS, num_threads, split_range
from .sgemm import pack_panels, packed_operands
from .simd import vload, vloadm, vstore

from . import JIT as _JIT

NR = 16      # columns per packed panel / micro-kernel tile
MR = 6       # rows of the tallest micro-kernel
KC = 256     # K block of the packed GEMM: a 6-row A block (6 KiB) stays in L1
CONV_KC = 1024    # K block of the 1x1 conv (MobileNet's 960-channel convs at 7x7: 4% faster
#                   than 256, fewer passes over the output)
CONV_NB = 256     # columns (pixels) of X packed at a time, at most ...
CONV_PACK_FLOATS = 131072  # ... and at most this many floats (512 KiB, in L2) a packed block
CONV_STREAM_M = 32  # 1x1 convs with at most this many output channels stream X unpacked
CONV_PF_ROWS = 8    # ... prefetching X 8 rows ahead
L2_BYTES = 262144  # B bytes (kc rows x the panels of an N block) kept in L2 across row blocks
GEMM_PFD = 64 * NR  # packed-B prefetch distance (floats): 64 k steps ahead
# int64 forms for call sites (parallel.I0 says why: a literal argument compiles a callee twice)
NR64, KC64, GEMM_PFD64 = np.int64(NR), np.int64(KC), np.int64(GEMM_PFD)


def pack_b16(b):
    """Weights b (K, N) -> float32 panels (ceil(N/16), K, 16), zero-padded past column N."""
    return pack_panels(b, NR, "pack_b16")


@njit(**_JIT)
def row_blocks(af, aoff, lda, bf, boff, ldb, bstep, npan, kc, cf, coff, ldc, rows, first, last,
               cbias, jb, jstep, rbias, ib, act, lo, hi, pfd):
    """One K block of C (rows, npan*16) (+)= A (rows, kc) @ B: the 6-row micro-kernel down the
    rows, the 4 / 2 / 1-row ones for the rest (operands as ``gemm_block``'s)."""
    mmain = rows // MR * MR
    for i in range(0, mmain, MR):
        k6x16(af, aoff + i * lda, lda, bf, boff, ldb, bstep, npan, kc, cf, coff + i * ldc, ldc,
              first, last, cbias, jb, jstep, rbias, ib + i, act, lo, hi, pfd)
    i = mmain
    if rows - i >= 4:
        k4x16(af, aoff + i * lda, lda, bf, boff, ldb, bstep, npan, kc, cf, coff + i * ldc, ldc,
              first, last, cbias, jb, jstep, rbias, ib + i, act, lo, hi, pfd)
        i += 4
    if rows - i >= 2:
        k2x16(af, aoff + i * lda, lda, bf, boff, ldb, bstep, npan, kc, cf, coff + i * ldc, ldc,
              first, last, cbias, jb, jstep, rbias, ib + i, act, lo, hi, pfd)
        i += 2
    if rows - i >= 1:
        k1x16(af, aoff + i * lda, lda, bf, boff, ldb, bstep, npan, kc, cf, coff + i * ldc, ldc,
              first, last, cbias, jb, jstep, rbias, ib + i, act, lo, hi, pfd)


@njit(**_JIT)
def gemm_block(af, aoff, lda, bf, boff, ldb, bstep, cf, coff, ldc, rows, npan, k, cbias, jb,
               jstep, rbias, ib, act, lo, hi, accumulate, kcmax, pfd):
    """C (rows, npan*16) = act(A (rows, k) @ B + bias (+ C when accumulate)) on flat operands.

    A row i at af[aoff + i*lda] (k contiguous); B panel p, row k at bf[boff + p*bstep +
    k*ldb] (16 floats); C row i, panel p at cf[coff + i*ldc + p*16]; column bias
    cbias[jb + p*jstep + j] (jstep 16, or 0: one vector for all panels), row bias
    rbias[ib + i] (zeros where unused); act/lo/hi: kernels/epilogue.py's codes and bounds.
    K blocks of <= kcmax, N blocks of B that stay in L2, then ``row_blocks``.  k > 0."""
    nkb = (k + kcmax - 1) // kcmax
    kcs = (k + nkb - 1) // nkb
    nblk = max(1, L2_BYTES // (kcs * NR * 4))
    for k0 in range(0, k, kcs):
        kc = min(kcs, k - k0)
        first = k0 == 0 and not accumulate
        last = k0 + kc == k
        for j0 in range(0, npan, nblk):
            nj = min(npan, j0 + nblk) - j0
            row_blocks(af, aoff + k0, lda, bf, boff + j0 * bstep + k0 * ldb, ldb, bstep, nj, kc,
                       cf, coff + j0 * NR, ldc, rows, first, last, cbias, jb + j0 * jstep, jstep,
                       rbias, ib, act, lo, hi, pfd)


# ----------------------------------------------------------------------------------------
# MatMul / Gemm by constant (packed) weights
# ----------------------------------------------------------------------------------------


@njit(**_JIT)
def _gemm_part(af, k, bpf, biasf, zrow, act, cf, ldc, r0, r1, p0, p1):
    """Rows [r0, r1) x panels [p0, p1) of ``sgemm16`` (zrow: M zeros, the row bias)."""
    if r1 > r0 and p1 > p0:
        gemm_block(af, r0 * k, k, bpf, p0 * k * NR, NR64, k * NR, cf, r0 * ldc + p0 * NR, ldc,
                   r1 - r0, p1 - p0, k, biasf, p0 * NR, NR64, zrow, r0, act, np.float32(0.0),
                   np.float32(0.0), NO, KC64, GEMM_PFD64)


@njit(parallel=PRANGE_ONLY, **_JIT)
def sgemm16(a, bp, n, bias, act):
    """act(a @ b + bias) -> new (M, n) float32 array, with bp = pack_b16(b).

    a: (M, K) float32 (copied if not C-contiguous); bias: (n,) float32 or None; act: 0
    identity, 1 relu.  Uses ``numba.get_num_threads()`` threads when the product has at least
    PAR_MIN_MACS multiply-adds and can be split (panels, or rows of 6).
    """
    m, k = a.shape
    npan = bp.shape[0]
    n, act = np.int64(n), np.int64(act)    # literals from compiled callers: one compile
    af, bpf, biasf, ldc = packed_operands(a, bp, n, bias, NR)
    zrow = np.zeros(m, np.float32)
    c = np.empty((m, ldc), np.float32)
    cf = c.ravel()
    if k == 0:
        for i in range(m):
            for j in range(ldc):
                v = biasf[j]
                c[i, j] = 0.0 if (act == 1 and v < 0.0) else v
    else:
        nt = num_threads()
        if (nt > 1 and m * k * ldc >= PAR_MIN_MACS
                and (npan >= 2 * nt or m >= 2 * MR * nt)):
            # runs of panels when there are at least 2 per thread (A shared, each thread
            # streams its own part of B), else runs of rows (multiples of 6); the loop is
            # here, not in a wrapper: each njit level links and optimizes the GEMM again
            by_panels = npan >= 2 * nt
            for t in prange(nt):
                if by_panels:
                    p0, p1 = split_range(npan, nt, t, 1)
                    _gemm_part(af, k, bpf, biasf, zrow, act, cf, ldc, I0, m, p0, p1)
                else:
                    r0, r1 = split_range(m, nt, t, MR)
                    _gemm_part(af, k, bpf, biasf, zrow, act, cf, ldc, r0, r1, I0, npan)
        else:
            _gemm_part(af, k, bpf, biasf, zrow, act, cf, ldc, I0, m, I0, npan)
    if ldc != n:
        return c[:, :n].copy()
    return c


# ----------------------------------------------------------------------------------------
# 1x1 convolution: Y[n] (m, HW) = W (m, C) @ X[n] (C, HW)
# ----------------------------------------------------------------------------------------


@njit(**_JIT)
def _pack_cols(xf, xo, hw, k0, kc, q0, t0, ncols, xp):
    """xp[(t - t0) * kc * 16:] (kc, 16) for the 16-column tiles t of columns t0..ncols (t0 a
    multiple of 16) of X rows k0..k0+kc, from column q0 of the image at xo (row stride hw):
    X packed into panels, zero-padded past ncols."""
    for t in range(t0, ncols, NR):
        n = min(NR, ncols - t)
        po = (t - t0) * kc
        src = xo + k0 * hw + q0 + t
        if n == NR:
            for k in range(kc):
                vstore(xp, po + k * NR, vload(xf, src + k * hw))
        else:
            for k in range(kc):
                vstore(xp, po + k * NR, vloadm(xf, src + k * hw, n))


@njit(**_JIT)
def _conv_cols(xf, c, hw, wf, m, biasf, zcol, act, lo, hi, yf, has_res, img, col0, col1,
               xp, yt):
    """Columns [col0, col1) of image img (col0 a multiple of 16; a ragged end only when col1
    is hw), per block of columns (``_conv_nb``) and K block.  More than CONV_STREAM_M rows: X packed
    into 16-column panels (xp), reused by all of W's 6-row blocks; else X's rows streamed in
    place (packing cost more than it saved), only the ragged last tile packed.  That tile's
    output goes through yt (m, 16)."""
    xo = img * c * hw
    yo = img * m * hw
    kcs = _conv_kc(c)
    nb = _conv_nb(kcs)
    pack = m > CONV_STREAM_M
    for q0 in range(col0, col1, nb):
        ncols = min(nb, col1 - q0)
        full = ncols // NR
        rem = ncols - full * NR
        if rem > 0 and has_res:
            for r in range(m):
                for j in range(rem):
                    yt[r * NR + j] = yf[yo + r * hw + q0 + full * NR + j]
        for k0 in range(0, c, kcs):
            kc = min(kcs, c - k0)
            first = k0 == 0 and not has_res
            last = k0 + kc == c
            if pack:
                _pack_cols(xf, xo, hw, k0, kc, q0, I0, ncols, xp)
                if full > 0:
                    row_blocks(wf, k0, c, xp, I0, NR64, kc * NR, full, kc, yf, yo + q0, hw, m,
                               first, last, zcol, I0, I0, biasf, I0, act, lo, hi, GEMM_PFD64)
                tail = full * kc * NR
            else:
                if rem > 0:
                    _pack_cols(xf, xo, hw, k0, kc, q0, full * NR, ncols, xp)
                if full > 0:
                    row_blocks(wf, k0, c, xf, xo + k0 * hw + q0, hw, NR64, full, kc, yf,
                               yo + q0, hw, m, first, last, zcol, I0, I0, biasf, I0, act, lo,
                               hi, CONV_PF_ROWS * hw)
                tail = I0
            if rem > 0:
                row_blocks(wf, k0, c, xp, tail, NR64, kc * NR, np.int64(1), kc, yt, I0, NR64,
                           m, first, last, zcol, I0, I0, biasf, I0, act, lo, hi, GEMM_PFD64)
        if rem > 0:
            for r in range(m):
                for j in range(rem):
                    yf[yo + r * hw + q0 + full * NR + j] = yt[r * NR + j]


@njit(inline="always", **_JIT)
def _conv_kc(c):
    """The 1x1 conv's K block: c cut into near-equal blocks of at most CONV_KC."""
    nkb = (c + CONV_KC - 1) // CONV_KC
    return (c + nkb - 1) // nkb


@njit(inline="always", **_JIT)
def _conv_nb(kcs):
    """Columns of X packed at a time (a multiple of 16) for K blocks of kcs rows."""
    return max(NR, min(CONV_NB, CONV_PACK_FLOATS // kcs // NR * NR))


@njit(inline="always", **_JIT)
def _xp_size(c):
    """Floats of ``_conv_cols``' packed X block."""
    kcs = _conv_kc(c)
    return kcs * _conv_nb(kcs)


@njit(parallel=PRANGE_ONLY, **_JIT)
def conv1x1_avx2(x, w, m, bias, act, res, bounds=NO_BOUNDS):
    """act(W @ X[n] + bias[:, None] (+ res[n])) per image for the 1x1 stride-1 unpadded Conv.

    x: (N, C, H, W) float32; w: (m, C) float32 (C-contiguous; the Conv's weights reshaped);
    bias: (m,) float32 or None; act: 0 identity, 1 relu, 2 clip to bounds, 3 hardswish with
    bounds (alpha, beta) (kernels/epilogue.py); res: None, an empty array (none) or an
    (N, m, H, W) array added before act.  Returns a new (N, m, H, W) float32 array.
    """
    nimg, c, h, wd = x.shape
    hw = h * wd
    if w.shape[0] != m or w.shape[1] != c:
        raise ValueError("conv1x1_avx2: weights do not match x / m")
    xf = np.ascontiguousarray(x).ravel()
    wf = np.ascontiguousarray(w).ravel()
    biasf = np.zeros(m, np.float32)
    if bias is not None:
        load_bias(biasf, bias, m)
    zcol = np.zeros(NR, np.float32)
    y = np.empty((nimg, m, h, wd), np.float32)
    yf = y.ravel()
    has_res = False
    if res is not None:
        has_res = res.size != 0
        if has_res:
            load_res(y, res)
    lo, hi = np.float32(bounds[0]), np.float32(bounds[1])
    if c == 0 or hw == 0:
        zero, one = np.float32(0.0), np.float32(1.0)
        for i in range(nimg * m):
            for j in range(hw):
                o = i * hw + j
                v = biasf[i % m] + (yf[o] if has_res else np.float32(0.0))
                yf[o] = act1(v, act, lo, hi, zero, one)
        return y
    nt = num_threads()
    if nt > 1 and hw >= 2 * NR and m * c * hw * nimg >= PAR_MIN_MACS:
        # each image's columns cut into `nt` runs (multiples of 16, so only the last run has
        # a ragged tile), each with scratch of its own
        for u in prange(nimg * nt):
            img, t = u // nt, u % nt
            col0, col1 = split_range(hw, nt, t, NR)
            if col1 > col0:
                xp = np.empty(_xp_size(c), np.float32)
                yt = np.empty(m * NR, np.float32)
                _conv_cols(xf, c, hw, wf, m, biasf, zcol, act, lo, hi, yf, has_res, img, col0,
                           col1, xp, yt)
    else:
        xp = np.empty(_xp_size(c), np.float32)
        yt = np.empty(m * NR, np.float32)
        for img in range(nimg):
            _conv_cols(xf, c, hw, wf, m, biasf, zcol, act, lo, hi, yf, has_res, img, I0, hw,
                       xp, yt)
    return y
