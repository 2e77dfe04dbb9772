"""Single-precision GEMM for AVX2 (16 ymm registers): constant-weight MatMul / Gemm and the
convolutions, on the 6 x 16 micro-kernels of kernels/microkernels_avx2.py.

The AVX-512 kernels (kernels/sgemm.py: 12 rows x 32 columns = 24 zmm accumulators) spill on
AVX2, where LLVM splits each <16 x float> into two ymm halves.  Here a micro-kernel tile is
6 rows x 16 columns: 6 accumulators = 12 ymm, + 2 for the B row + 1 broadcast = 15 of the 16
ymm registers (the 4 / 2 / 1-row kernels take the row tails).  Chosen at lowering where
``target.f32_gemm == "avx2"`` (ops/nn.py); on AVX-512 the sgemm kernels run.

``pack_b16(b)``: weights (K, N) -> (ceil(N/16), K, 16) panels, zero-padded past column N.
``sgemm16(a, bp, n, bias, act)``: act(a @ b + bias) (act 0 identity, 1 relu), like
``sgemm.sgemm_packed``.  Loop order: K blocks of <= KC, N blocks of packed B that stay in L2,
6-row blocks of A, then the 16-column panels inside the micro-kernel.

``conv_avx2(x, w, m, kernel, strides, pads, dilations, group, bias, act, res, bounds)``: every
2-D float32 Conv on AVX2 but the depthwise ones, act(W @ cols(X[n]) + bias (+ res[n])) per image
and group, W (m, C/group*KH*KW) as it is (the A operand: 6 of its rows broadcast).  1x1 stride-1
unpadded convs read X in place as the B operand; the others im2col a tile into a column
buffer that stays in L2: whole 16-column panels of output pixels (kernels/conv.py's
im2col_span, one contiguous copy per tap for stride-1 "same" convs; a 7x7 or 14x14 output no
longer computes a padded panel per row tile), or whole output rows through phase_split +
im2col_split for kernels >= 5 wide.  The B operand (``gemm_cols``), per block of pixels and K
block, is packed into 16-pixel panels (vector copies, the last one zero-padded) that all of
W's 6-row blocks reuse; with at most CONV_STREAM_M output channels its rows are read in place
instead (the packing cost more than it saved) and only a ragged last tile is packed.  A
ragged last tile of at most CONV_TAIL_DOTS columns is dot products; a wider one goes through
an (m, 16) scratch (holding the residual).  Every activation
(relu, clip, hardswish) is applied in the micro-kernel's epilogue on the last K block.
MobileNet's 1x1 convs run at 80-100 GFLOP/s on one core here (the 7x7 ones take their 49th
column as dot products), 0.6-1.1x the time of OpenBLAS's AVX-512 im2col path they replace
on AVX2.  No BLAS call: see conv_avx2.
"""
import numpy as np
from numba import njit, prange

from . import PRANGE_ONLY
from .conv import SPLIT_MIN_KW, im2col_span, im2col_split, phase_split, put3
from .epilogue import NO_BOUNDS, act1, load_bias, load_res
from .microkernels_avx2 import k1x16, k2x16, k4x16, k6x16
from .parallel import I0, NO, PAR_MIN_MACS, num_threads, split_range
from .sgemm import pack_panels, packed_operands
from .simd import prefetch, vfma, vhsum, vload, vloadm, vstore
from .simd import native as V

from . import JIT as _JIT

NR = 16      # columns per packed panel / micro-kernel tile
MR = 6       # rows of the tallest micro-kernel
KC = 256     # K block of the packed GEMM: a 6-row A block (6 KiB) stays in L1
CONV_KC = 1024    # K block of the 1x1 conv (MobileNet's 960-channel convs at 7x7: 4% faster
#                   than 256, fewer passes over the output)
CONV_NB = 256     # columns (pixels) of X packed at a time, at most ...
CONV_PACK_FLOATS = 131072  # ... and at most this many floats (512 KiB, in L2) a packed block
CONV_STREAM_M = 32  # 1x1 convs with at most this many output channels stream X unpacked
CONV_PF = 2 * NR    # ... prefetching each row of X two panels ahead (the line the same row
#                     needs two 16-column panels later: with 8 rows ahead, X rows that were
#                     not in cache came at latency, one line per row per panel; 128->16 at
#                     55x55, 1 thread, inputs rotating out of cache 864 -> 463 us, in cache
#                     343 -> 332; 256->32 at 27x27 718 -> 387, 300 -> 332)
CONV_TAIL_DOTS = 4  # a ragged last tile of at most this many columns: dot products
#                     (``_tail_dots``), not a 16-column micro-kernel tile
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
        # the next block's rows of A in flight while this one computes: a conv's weights come
        # from memory once per run, one line per row per few steps, at latency without this
        # (1x1 conv at 7x7, 1 thread, weights out of cache: 160->960 338 -> 295 us, 320->1280
        # 912 -> 722; in cache 206, 644: the rest is the memory bandwidth)
        for r in range(i + MR, min(rows, i + 2 * MR)):
            for q in range(0, kc, NR):
                prefetch(af, aoff + r * lda + q)
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
    """Rows [r0, r1) x panels [p0, p1) of ``sgemm16`` (zrow: M zeros, the row bias).  Fewer
    than 6 rows (a batch-1 classifier head, a GEMV) run K in one block: nothing of A is worth
    keeping in L1 across panels there, and each panel of B is then one sequential stream
    from memory, C written once (1 thread, B out of cache: 1280x1000 one row 597 -> 547 us,
    four rows 639 -> 538, 2048x1000 two rows 961 -> 891, 4096x4096 one row 8.36 -> 7.55 ms)."""
    if r1 > r0 and p1 > p0:
        kcmax = np.int64(k) if r1 - r0 < MR else KC64
        gemm_block(af, r0 * k, k, bpf, p0 * k * NR, NR64, k * NR, cf, r0 * ldc + p0 * NR, ldc,
                   r1 - r0, p1 - p0, k, biasf, p0 * NR, NR64, zrow, r0, act, np.float32(0.0),
                   np.float32(0.0), NO, kcmax, GEMM_PFD64)


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
    X packed into panels, zero-padded past ncols; each row's line for the tile after next
    prefetched (CONV_PF: 64 channels at 55x55 out of cache, 252 -> 164 us a pass)."""
    for t in range(t0, ncols, NR):
        n = min(NR, ncols - t)
        po = (t - t0) * kc
        src = xo + k0 * hw + q0 + t
        if n == NR:
            for k in range(kc):
                prefetch(xf, src + k * hw + CONV_PF)
                vstore(xp, po + k * NR, vload(xf, src + k * hw))
        else:
            for k in range(kc):
                vstore(xp, po + k * NR, vloadm(xf, src + k * hw, n))


@njit(**_JIT)
def gemm_cols(xf, xo, ldx, c, wf, wo, m, biasf, ib, zcol, act, lo, hi, yf, yo, ldy, has_res,
               col0, col1, pack, xp, yt, dots):
    """Y (m, cols) = act(W (m, c) @ X (c, cols) + bias (+ Y when has_res)) for the columns
    [col0, col1) (col0 a multiple of 16; a ragged end only at the operand's last column): X row
    k at xf[xo + k*ldx], W row i at wf[wo + i*c] (k contiguous), Y row i at yf[yo + i*ldy], the
    row bias biasf[ib + i].  Per block of columns (``_conv_nb``) and K block: with `pack`, X
    packed into 16-column panels (xp) reused by all of W's 6-row blocks; else X's rows streamed
    in place (for few rows of W packing cost more than it saved), only the ragged last tile
    packed.  That tile's output goes through yt (m, 16); with `dots`, a tile of at most
    CONV_TAIL_DOTS columns is dot products (``_tail_dots``), which sum in another order than
    the micro-kernels: only for callers whose ragged tile is the operand's last columns
    whatever the threads (the 1x1 conv), so results stay the same on any number of threads."""
    kcs = _conv_kc(c)
    nb = _conv_nb(kcs)
    for q0 in range(col0, col1, nb):
        ncols = min(nb, col1 - q0)
        full = ncols // NR
        rem = ncols - full * NR
        if rem > 0 and has_res:
            for r in range(m):
                for j in range(rem):
                    yt[r * NR + j] = yf[yo + r * ldy + q0 + full * NR + j]
        for k0 in range(0, c, kcs):
            kc = min(kcs, c - k0)
            first = k0 == 0 and not has_res
            last = k0 + kc == c
            if pack:
                _pack_cols(xf, xo, ldx, k0, kc, q0, I0, ncols, xp)
                if full > 0:
                    row_blocks(wf, wo + k0, c, xp, I0, NR64, kc * NR, full, kc, yf, yo + q0,
                               ldy, m, first, last, zcol, I0, I0, biasf, ib, act, lo, hi,
                               GEMM_PFD64)
                tail = full * kc * NR
            else:
                if rem > 0 and not (dots and rem <= CONV_TAIL_DOTS):
                    _pack_cols(xf, xo, ldx, k0, kc, q0, full * NR, ncols, xp)
                if full > 0:
                    row_blocks(wf, wo + k0, c, xf, xo + k0 * ldx + q0, ldx, NR64, full, kc, yf,
                               yo + q0, ldy, m, first, last, zcol, I0, I0, biasf, ib, act, lo,
                               hi, np.int64(CONV_PF))
                tail = I0
            if dots and 0 < rem <= CONV_TAIL_DOTS:
                _tail_dots(xf, xo + k0 * ldx + q0 + full * NR, ldx, rem, wf, wo + k0, c, m,
                           kc, xp, tail, yt, first, last, biasf, ib, act, lo, hi)
            elif rem > 0:
                row_blocks(wf, wo + k0, c, xp, tail, NR64, kc * NR, np.int64(1), kc, yt, I0,
                           NR64, m, first, last, zcol, I0, I0, biasf, ib, act, lo, hi,
                           GEMM_PFD64)
        if rem > 0:
            for r in range(m):
                for j in range(rem):
                    yf[yo + r * ldy + q0 + full * NR + j] = yt[r * NR + j]


@njit(**_JIT)
def _tail_dots(xf, xo, ldx, rem, wf, wo, c, m, kc, xt, to, yt, first, last, biasf, ib, act,
               lo, hi):
    """The ragged last tile of ``gemm_cols``' K block when it has rem <= CONV_TAIL_DOTS
    columns (a 7x7 image: 49 = 3 x 16 + 1): yt (m, 16)'s first rem columns (+)= W (m, kc) @
    X (kc, rem) as dot products over k, four rows of W at a time (four independent chains
    share each load of X's column), instead of a 16-column micro-kernel tile that computes
    16 columns for rem. X's columns (row k at xf[xo + k*ldx]) are copied contiguous into
    xt[to:]; W row i at wf[wo + i*c]; epilogue as the tile's: accumulate unless first, row
    bias and act when last."""
    L = V.LANES
    kv = kc // L * L
    for j in range(rem):
        for k in range(kc):
            xt[to + j * kc + k] = xf[xo + k * ldx + j]
    zero, one = np.float32(0.0), np.float32(1.0)
    for i0 in range(0, m, 4):
        nr = min(4, m - i0)
        r0 = wo + i0 * c
        r1 = r0 + c if nr > 1 else r0
        r2 = r0 + 2 * c if nr > 2 else r0
        r3 = r0 + 3 * c if nr > 3 else r0
        for j in range(rem):
            xj = to + j * kc
            a0, a1, a2, a3 = V.zero(), V.zero(), V.zero(), V.zero()
            for k in range(0, kv, L):
                xv = V.load(xt, xj + k)
                a0 = vfma(V.load(wf, r0 + k), xv, a0)
                a1 = vfma(V.load(wf, r1 + k), xv, a1)
                a2 = vfma(V.load(wf, r2 + k), xv, a2)
                a3 = vfma(V.load(wf, r3 + k), xv, a3)
            s0, s1, s2, s3 = vhsum(a0), vhsum(a1), vhsum(a2), vhsum(a3)
            for k in range(kv, kc):
                xs = xt[xj + k]
                s0 += wf[r0 + k] * xs
                s1 += wf[r1 + k] * xs
                s2 += wf[r2 + k] * xs
                s3 += wf[r3 + k] * xs
            sums = (s0, s1, s2, s3)
            for r in range(nr):
                o = (i0 + r) * NR + j
                v = sums[r] if first else yt[o] + sums[r]
                if last:
                    v = act1(v + biasf[ib + i0 + r], act, lo, hi, zero, one)
                yt[o] = v


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
def cols_scratch(c):
    """Floats of ``gemm_cols``' packed X block."""
    kcs = _conv_kc(c)
    return kcs * _conv_nb(kcs)


# tiles of the im2col path: column tiles of about IM2COL_TILE_BYTES (whole output rows, at least
# IM2COL_MIN_COLS columns), so the GEMM reads from L2 what im2col just wrote
IM2COL_TILE_BYTES = 1 << 18
IM2COL_MIN_COLS = 64
I1 = np.int64(1)


@njit(**_JIT)
def _im2col_part(xf, geo, wf, biasf, zcol, act, lo, hi, yf, has_res, n, g, r0, r1, col, xs, xp,
                 yt):
    """Part [r0, r1) of image n, group g of ``conv_avx2``'s im2col path, a tile at a time: the
    tile's column matrix, then its GEMM written straight into y with the epilogue.  Kernels at
    least SPLIT_MIN_KW wide: [r0, r1) are output rows, tiles of geo[17] rows, im2col through a
    stride-phase-split band of x (every column row one contiguous run).  Others: [r0, r1) are
    output pixels (r0 a multiple of 16), tiles of geo[17] columns (a multiple of 16), im2col
    straight from x (``im2col_span``): every tile but the image's last is whole 16-column
    panels, and a ragged end of at most CONV_TAIL_DOTS columns is dot products, which the
    thread split (at multiples of 16) does not move.
    geo: C, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, OH, OW, groups, M, tile."""
    C, H, W, KH, KW = geo[0], geo[1], geo[2], geo[3], geo[4]
    sh, sw, pt, pl, pb, pr = geo[5], geo[6], geo[7], geo[8], geo[9], geo[10]
    dh, dw, OH, OW, G, M, tile = geo[11], geo[12], geo[13], geo[14], geo[15], geo[16], geo[17]
    cg, mg = C // G, M // G
    kk = cg * KH * KW
    P = OH * OW
    in3, k3, s3 = (I1, H, W), (I1, KH, KW), (I1, sh, sw)
    p6, d3, o3 = (I0, pt, pl, I0, pb, pr), (I1, dh, dw), (I1, OH, OW)
    xoff = (n * C + g * cg) * H * W
    yoff = (n * M + g * mg) * P
    pack = mg > CONV_STREAM_M
    if KW < SPLIT_MIN_KW:
        for p0 in range(r0, r1, tile):
            ncols = min(r1, p0 + tile) - p0
            colf = col[:kk * ncols]
            im2col_span(xf, xoff, cg, in3, k3, s3, p6, d3, o3, p0, p0 + ncols, colf)
            gemm_cols(colf, I0, ncols, kk, wf, g * mg * kk, mg, biasf, g * mg, zcol, act, lo,
                      hi, yf, yoff + p0, P, has_res, I0, ncols, pack, xp, yt, True)
        return
    r3 = (I1, sh if KH > 1 else I1, sw if KW > 1 else I1)
    halo = (KH - 1) * dh // sh
    ew = OW + (KW - 1) * dw // sw
    for q0 in range(r0, r1, tile):
        q1 = min(r1, q0 + tile)
        ncols = (q1 - q0) * OW
        colf = col[:kk * ncols]
        eb = (I1, q1 - q0 + halo, ew)
        phase_split(xf, xoff, cg, in3, s3, p6, r3, eb, q0, xs)
        im2col_split(xs, I0, cg, k3, s3, d3, r3, eb, q0, o3, q0, q1, colf)
        gemm_cols(colf, I0, ncols, kk, wf, g * mg * kk, mg, biasf, g * mg, zcol, act, lo, hi,
                  yf, yoff + q0 * OW, P, has_res, I0, ncols, pack, xp, yt, False)


@njit(inline="always", **_JIT)
def _xs_size(geo):
    """Floats of ``_im2col_part``'s phase-split band (0 when the kernel is narrower)."""
    KH, KW, sh, sw, dh, dw = geo[3], geo[4], geo[5], geo[6], geo[11], geo[12]
    if KW < SPLIT_MIN_KW:
        return 0
    nphase = (sh if KH > 1 else 1) * (sw if KW > 1 else 1)
    return (geo[0] // geo[15]) * nphase * (geo[17] + (KH - 1) * dh // sh) * (
        geo[14] + (KW - 1) * dw // sw)


@njit(parallel=PRANGE_ONLY, **_JIT)
def conv_avx2(x, w, m, kernel, strides, pads, dilations, group, bias, act, res,
              bounds=NO_BOUNDS):
    """act(conv(x, W) + bias (+ res)) for a 2-D float32 Conv on the AVX2 GEMM, any kernel,
    strides, pads, dilations and groups (depthwise convs have kernels of their own).

    x: (N, C, H, W) float32; w: (m, C/group * KH * KW) float32, the Conv's weights reshaped
    (group g's rows m/group*g...); kernel (KH, KW), strides (sh, sw), pads (top, left, bottom,
    right), dilations (dh, dw); bias: (m,) float32 or None; act: 0 identity, 1 relu, 2 clip to
    bounds, 3 hardswish with bounds (alpha, beta) (kernels/epilogue.py); res: None, an empty
    array (none) or an (N, m, OH, OW) array added before act.  Returns a new (N, m, OH, OW)
    float32 array.

    1x1 stride-1 unpadded: W @ X[n] per image and group, X read in place.  Otherwise im2col
    per tile of output rows (``_im2col_part``) into a column buffer the GEMM reads as X.  With
    several threads, each (image, group)'s columns (1x1) or output rows (im2col) are cut into
    one run per thread, each with scratch of its own.  No BLAS: OpenBLAS's own threads spin
    for a while after each call and held the cores that Numba's threads needed (2-thread
    MobileNet no faster than 1 thread on a Zen 3 host, docs/design.md, "Threads").
    """
    nimg, c, h, wd = x.shape
    kh, kw = kernel
    sh, sw = strides
    pt, pl, pb, pr = pads
    dh, dw = dilations
    G = np.int64(group)
    if G < 1 or c % G != 0 or m % G != 0:
        raise ValueError("conv_avx2: channels not divisible by group")
    if kh < 1 or kw < 1 or sh < 1 or sw < 1 or dh < 1 or dw < 1 or min(pt, pl, pb, pr) < 0:
        raise ValueError("conv_avx2: bad kernel / strides / pads / dilations")
    cg, mg = c // G, m // G
    kk = cg * kh * kw
    if w.shape[0] != m or w.shape[1] != kk:
        raise ValueError("conv_avx2: weights do not match x / m / kernel")
    oh = max(0, (h + pt + pb - (kh - 1) * dh - 1) // sh + 1)
    ow = max(0, (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1)
    hw = oh * ow
    xf = np.ascontiguousarray(x).ravel()
    wf = np.ascontiguousarray(w).ravel()
    biasf = np.zeros(m, np.float32)
    if bias is not None:
        load_bias(biasf, bias, m)
    zcol = np.zeros(NR, np.float32)
    y = np.empty((nimg, m, oh, ow), np.float32)
    yf = y.ravel()
    has_res = False
    if res is not None:
        has_res = res.size != 0
        if has_res:
            load_res(y, res)
    lo, hi = np.float32(bounds[0]), np.float32(bounds[1])
    if kk == 0 or hw == 0:
        zero, one = np.float32(0.0), np.float32(1.0)
        for i in range(nimg * m):
            for j in range(hw):
                o = i * hw + j
                v = biasf[i % m] + (yf[o] if has_res else np.float32(0.0))
                yf[o] = act1(v, act, lo, hi, zero, one)
        return y
    nt = num_threads()
    par = nt > 1 and m * kk * hw * nimg >= PAR_MIN_MACS
    if kh == 1 and kw == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0 and pb == 0 and pr == 0:
        pack = mg > CONV_STREAM_M
        if par and hw >= 2 * NR:
            # each (image, group)'s columns cut into `nt` runs (multiples of 16, so only the
            # last run has a ragged tile)
            for u in prange(nimg * G * nt):
                img, g, t = u // (G * nt), u // nt % G, u % nt
                col0, col1 = split_range(hw, nt, t, NR)
                if col1 > col0:
                    xp = np.empty(cols_scratch(cg), np.float32)
                    yt = np.empty(mg * NR, np.float32)
                    gemm_cols(xf, (img * c + g * cg) * hw, hw, cg, wf, g * mg * cg, mg, biasf,
                              g * mg, zcol, act, lo, hi, yf, (img * m + g * mg) * hw, hw,
                              has_res, col0, col1, pack, xp, yt, True)
        else:
            xp = np.empty(cols_scratch(cg), np.float32)
            yt = np.empty(mg * NR, np.float32)
            for u in range(nimg * G):
                img, g = u // G, u % G
                gemm_cols(xf, (img * c + g * cg) * hw, hw, cg, wf, g * mg * cg, mg, biasf,
                          g * mg, zcol, act, lo, hi, yf, (img * m + g * mg) * hw, hw, has_res,
                          I0, hw, pack, xp, yt, True)
        return y
    split = kw >= SPLIT_MIN_KW
    if split:       # tiles of whole output rows
        tile = max(IM2COL_TILE_BYTES // (kk * ow * 4), (IM2COL_MIN_COLS + ow - 1) // ow)
        tile = min(oh, max(1, tile))
        units, align, tcols = oh, I1, tile * ow
    else:           # tiles of whole 16-column panels
        tile = max(IM2COL_MIN_COLS, IM2COL_TILE_BYTES // (kk * 4) // NR * NR)
        tile = min(tile, (hw + NR - 1) // NR * NR)
        units, align, tcols = hw, NR64, tile
    geo = np.empty(18, np.int64)
    put3(geo, 0, (c, h, wd))
    put3(geo, 3, (kh, kw, sh))
    put3(geo, 6, (sw, pt, pl))
    put3(geo, 9, (pb, pr, dh))
    put3(geo, 12, (dw, oh, ow))
    put3(geo, 15, (G, m, tile))
    if par and units >= 2 * align:
        for u in prange(nimg * G * nt):
            img, g, t = u // (G * nt), u // nt % G, u % nt
            r0, r1 = split_range(units, nt, t, align)
            if r1 > r0:
                col = np.empty(kk * tcols, np.float32)
                xs = np.empty(_xs_size(geo), np.float32)
                xp = np.empty(cols_scratch(kk), np.float32)
                yt = np.empty(mg * NR, np.float32)
                _im2col_part(xf, geo, wf, biasf, zcol, act, lo, hi, yf, has_res, img, g, r0, r1,
                             col, xs, xp, yt)
    else:
        col = np.empty(kk * tcols, np.float32)
        xs = np.empty(_xs_size(geo), np.float32)
        xp = np.empty(cols_scratch(kk), np.float32)
        yt = np.empty(mg * NR, np.float32)
        for u in range(nimg * G):
            _im2col_part(xf, geo, wf, biasf, zcol, act, lo, hi, yf, has_res, u // G, u % G, I0,
                         units, col, xs, xp, yt)
    return y


# ----------------------------------------------------------------------------------------
# MatMul of two run-time operands
# ----------------------------------------------------------------------------------------


@njit(**_JIT)
def _matmul_units(af, bf, cf, ba, bb, m, k, n, parts, u0, u1, zbias, zcol, xp, yt):
    """Units [u0, u1) of ``matmul3_avx2``: unit u is batch u // parts, its columns' run
    u % parts (multiples of 16)."""
    zero = np.float32(0.0)
    for u in range(u0, u1):
        i, t = u // parts, u % parts
        col0, col1 = split_range(n, parts, t, NR)
        if col1 > col0:
            gemm_cols(bf, (0 if bb == 1 else i) * k * n, n, k, af, (0 if ba == 1 else i) * m * k,
                      m, zbias, I0, zcol, I0, zero, zero, cf, i * m * n, n, NO, col0, col1,
                      m > CONV_STREAM_M, xp, yt, False)


@njit(parallel=PRANGE_ONLY, **_JIT)
def matmul3_avx2(a, b):
    """Batched a (Ba, M, K) @ b (Bb, K, N) -> (B, M, N) float32, a batch dim of 1
    broadcasting (``matmul.matmul3``'s contract) on the AVX2 GEMM: per batch, A's rows are
    the broadcast operand and B's rows are streamed (or packed, above CONV_STREAM_M rows of
    A).  A shared B (Bb == 1) folds the batch into M.  With several threads the batches, or
    when there are fewer batches than threads each batch's columns, are shared out.  No BLAS
    (conv_avx2 says why)."""
    ba, m, k = a.shape
    bb, n = b.shape[0], b.shape[2]
    if b.shape[1] != k or not (ba == bb or ba == 1 or bb == 1):
        raise ValueError("matmul3_avx2: operand shapes do not match")
    nb = max(ba, bb)
    out = np.empty((nb, m, n), np.float32)
    if out.size == 0:
        return out
    af = np.ascontiguousarray(a).ravel()
    bf = np.ascontiguousarray(b).ravel()
    cf = out.ravel()
    if k == 0:
        for i in range(cf.shape[0]):
            cf[i] = 0.0
        return out
    if bb == 1 and ba > 1:       # shared right operand: one GEMM of ba * m rows
        m, ba, nb = ba * m, 1, 1
    mp = max(m, 1)
    zbias = np.zeros(mp, np.float32)
    zcol = np.zeros(NR, np.float32)
    nt = num_threads()
    if nt > 1 and nb * m * k * n >= PAR_MIN_MACS:
        parts = 1 if nb >= 2 * nt else max(1, min(nt, (n + NR - 1) // NR))
        xps = np.empty((nt, cols_scratch(k)), np.float32)
        yts = np.empty((nt, mp * NR), np.float32)
        for t in prange(nt):
            u0, u1 = split_range(nb * parts, nt, t, 1)
            _matmul_units(af, bf, cf, ba, bb, m, k, n, parts, u0, u1, zbias, zcol, xps[t],
                          yts[t])
    else:
        xp = np.empty(cols_scratch(k), np.float32)
        yt = np.empty(mp * NR, np.float32)
        _matmul_units(af, bf, cf, ba, bb, m, k, n, I1, I0, nb, zbias, zcol, xp, yt)
    return out
