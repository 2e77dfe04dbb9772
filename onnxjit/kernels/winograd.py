"""3x3 stride-1 Conv by Winograd minimal filtering, F(m x m, 3 x 3) with m in {2, 4}.

The output is cut into m x m tiles; each needs an alpha x alpha input patch (alpha = m + 2).
With the standard transform matrices B, G, A (Lavin & Gray 2015):

    y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A

summed over input channels.  The element-wise product summed over channels becomes, for each
of the alpha^2 transform points p, one GEMM  Y[p] (M, T) = U[p] (M, C) @ V[p] (C, T)  where
T counts tiles.  F(2x2) does 16/9 = 1.78 multiplies per output instead of 9, F(4x4) 36/16 = 2.25.

Pieces:
  * ``winograd_weights(w, m)`` (plain numpy, prepare time): U = G g G^T, stored transposed
    per point as (alpha^2, C, M).
  * ``conv3x3(x, u, b, pads, act, res, gemm)`` (njit): per chunk of tile rows, input transform into
    V (alpha^2, C, Tc), alpha^2 GEMMs into Y (alpha^2, M, Tc) (onnxjit's AVX-512 kernels for
    float32 where available, else BLAS), output transform with bias, residual and activation
    fused into the store.  With several Numba threads each phase is split between them
    (input channels / points / output channels), each thread with its own scratch.  Chunks
    hold whole tile rows (across images when images are small) and are sized so V and Y stay
    in L2.
  * ``use_winograd(C, M, H, W, N=1)`` (plain Python): measured crossover -> 0 (keep im2col)
    or the m to use.

Both transforms are separable and written as flat, unsigned-index loops that LLVM vectorises
(checked with inspect_asm): the input transform runs a vertical pass along image rows and a
horizontal pass across all tiles of a chunk (after de-interleaving the m-strided columns);
the output transform does each tile's whole A^T Y A in registers, again across the tiles.
Measured (1 thread, vs ORT's MLAS Conv+Relu): 0.5-0.7x ORT's time at 28x28 and larger,
~1x at 14x14; see use_winograd for where im2col is kept.
"""

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from . import PRANGE_ONLY
from .epilogue import flat_res
from .microkernels import ck1, ck4, ck8, ck12
from .parallel import I0, NO, WINOGRAD_PAR_MIN_MACS, num_threads, split_range
from .gemm_avx2 import CONV_STREAM_M, gemm_cols, cols_scratch
from .sgemm import NR64

from . import JIT as _JIT

# Filter transforms G (alpha x 3) for interpolation points {0, 1, -1, (2, -2,) inf}.
_G = {
    2: np.array([[1, 0, 0],
                 [1 / 2, 1 / 2, 1 / 2],
                 [1 / 2, -1 / 2, 1 / 2],
                 [0, 0, 1]], np.float64),
    4: np.array([[1 / 4, 0, 0],
                 [-1 / 6, -1 / 6, -1 / 6],
                 [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6],
                 [0, 0, 1]], np.float64),
}
# The matching B^T and A^T are hard-coded in _bt2/_bt4 and _at2/_at4 below:
#   m=2  B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]     A^T = [[1,1,1,0],[0,1,-1,-1]]
#   m=4  B^T = [[4,0,-5,0,1,0],[0,-4,-4,1,1,0],[0,4,-4,-1,1,0],
#               [0,-2,-1,2,1,0],[0,2,-1,-2,1,0],[0,4,0,-5,0,1]]
#        A^T = [[1,1,1,1,1,0],[0,1,-1,2,-2,0],[0,1,1,4,4,0],[0,1,-1,8,-8,1]]


def winograd_weights(w: np.ndarray, m: int) -> np.ndarray:
    """Transformed filters, transposed per point: U^T[p = l*alpha + k, C, M] =
    (G g[M, C] G^T)[k, l], contiguous (the point GEMMs broadcast 12 output channels of one
    input channel from a contiguous run).

    k indexes the vertical (row) and l the horizontal (column) transform coefficient.  The
    column-major point order keeps the destination rows written by one horizontal pass
    (fixed k, all l) in disjoint address ranges, which lets LLVM's hoisted alias checks pass.

    w is an (M, C, 3, 3) Conv weight (float32 or float64); the result has w's dtype.  The
    transform is computed in float64 and rounded once.
    """
    if m not in _G:
        raise ValueError(f"winograd_weights: m must be 2 or 4, got {m}")
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"winograd_weights: expected (M, C, 3, 3) weights, got {w.shape}")
    g, a = _G[m], m + 2
    # one GEMM: U^T[l*a + k, (c, m)] = sum over (i, j) of g[k, i] g[l, j] w[m, c, i, j]; 4-10x
    # faster than the same einsum, which matters to a warm prepare (ResNet-50: 11 convs)
    kron = np.einsum("ki,lj->lkij", g, g).reshape(a * a, 9)
    w_cm = w.transpose(1, 0, 2, 3).reshape(-1, 9).astype(np.float64)
    return (kron @ w_cm.T).astype(w.dtype).reshape(a * a, w.shape[1], w.shape[0])


def use_winograd(C: int, M: int, H: int, W: int, N: int = 1) -> int:
    """Tile size m (2 or 4) for a 3x3 stride-1 group-1 Conv, or 0 to keep im2col.

    C, M are the input/output channels and H, W the *output* spatial size (the input size
    for the usual pads of 1); N the batch if known.  Encodes single-thread measurements
    against the im2col + OpenBLAS kernel (float32, this machine):

    * F(4x4) beats F(2x2) once the image is about 20 pixels or more on its short side
      (28x28 and up: 0.3-0.7x of im2col); below that F(2x2) wastes less on partial tiles,
      except on sides that are multiples of 4 (no partial tiles) from 16 up with at most
      128x128 channels: at 16x16, 32->64 channels 47 us against 66, 128->128 233 against
      388 (256->256: 1.7 ms against 1.5, U of F(4x4) no longer fits in L2).
    * With few tiles the per-point GEMMs stream the transformed filters U (16/9 or 4x the
      weights) and become memory bound: N=1 512x512x7x7 (16.8 MB of U for 16 tiles) runs
      ~1.2x im2col, 512x512x4x4 ~1.9x, while 256x256 and smaller stay ahead down to 3x3.
    """
    if min(C, M, H, W, N) < 1:
        return 0
    whole4 = H % 4 == 0 and W % 4 == 0 and min(H, W) >= 16 and C * M <= 128 * 128
    m = 4 if min(H, W) >= 20 or whole4 else 2
    tw = -(-W // m)
    if tw > _TCMAX or M * tw > _LDY:  # scratch-buffer limits of conv3x3
        return 0
    tiles2 = N * (-(-H // 2)) * (-(-W // 2))
    if M * C > 196608 and tiles2 < 32:  # U (>12 MB for m=2) dwarfs the work
        return 0
    return m


# ---------------------------------------------------------------- 1-D transform kernels
@njit(inline="always", **_JIT)
def _bt2(d0, d1, d2, d3):
    """B^T d for F(2, 3): 4 inputs -> 4 transform coefficients."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@njit(inline="always", **_JIT)
def _bt4(d0, d1, d2, d3, d4, d5, one):
    """B^T d for F(4, 3): 6 inputs -> 6 transform coefficients (one: 1 in the dtype)."""
    two = one + one
    four = two + two
    a = d4 - four * d2
    b = d3 - four * d1
    c = d4 - d2
    e = two * (d3 - d1)
    return (four * d0 - (four + one) * d2 + d4, a + b, a - b, c + e, c - e,
            four * d1 - (four + one) * d3 + d5)


@njit(inline="always", **_JIT)
def _at2(y0, y1, y2, y3):
    """A^T y for F(2, 3): 4 coefficients -> 2 outputs."""
    return y0 + y1 + y2, y1 - y2 - y3


@njit(inline="always", **_JIT)
def _at4(y0, y1, y2, y3, y4, y5, one):
    """A^T y for F(4, 3): 6 coefficients -> 4 outputs (one: 1 in the dtype)."""
    two = one + one
    four = two + two
    s12 = y1 + y2
    d12 = y1 - y2
    s34 = y3 + y4
    d34 = y3 - y4
    return (y0 + s12 + s34, d12 + two * d34, s12 + four * s34,
            d12 + (four + four) * d34 + y5)


# ---------------------------------------------------------------- input transform
# Per input channel and chunk of tile rows, V = B^T d B is computed in separable passes whose
# inner loops are unit-stride and, where possible, run over the whole chunk rather than over
# the few tiles of one row (short loops do not vectorise):
#   1. pad:        xp[h, pl:pl+W] = x[n, c, row h of the chunk], zero elsewhere;
#   2. vertical:   T[k, g*tw*m + w] = sum_r B^T[k, r] xp[g*m + r, w] for w < tw*m (per tile
#                  row g; linear in the tile index t = g*tw + j), and the two right-halo
#                  columns w = tw*m, tw*m + 1 of every tile row go to `halo`;
#   3. de-interleave: P[k, s, t] = T[k, m*t + s] for s < alpha, one row per s, where the
#                  last tile of each tile row takes its last two inputs from `halo`;
#   4. horizontal: V[l*alpha + k, c, t] = sum_s P[k, s, t] B[s, l] for all t of the chunk.
# Scratch row pitches are compile-time constants: LLVM then sees the rows a loop stores to as
# one pointer group at fixed offsets, so its runtime alias checks stay few enough for the
# loop to be vectorised (with run-time pitches it gives up).  A chunk has <= _TCMAX tiles.
_TCMAX = 512
_LDT = 4 * _TCMAX + 8  # T rows: m*Tc + m values
_LDP = _TCMAX + 8  # P rows: Tc + 1 values
_LDO = 4 * _TCMAX  # ob rows: m*Tc values
# All hot loops index flat arrays with unsigned offsets: no views are created per tile row
# (each costs reference-count traffic) and numba emits no negative-index wraparound.


@njit(inline="always", **_JIT)
def _pad_rows(xf, xoff, H, W, h0, nh, pl, xp, wp):
    """xp[h, pl:pl+W] = x-plane row h0 + h (zeros outside [0, H)) for h < nh.

    xp is a flat (>= nh, wp) buffer whose columns outside [pl, pl+W) stay zero from its
    allocation.
    """
    uw = np.uint64(W)
    for h in range(nh):
        ih = h0 + h
        dst = np.uint64(h * wp + pl)
        if 0 <= ih < H:
            src = np.uint64(xoff + ih * W)
            for i in range(uw):
                xp[dst + i] = xf[src + i]
        else:
            for i in range(uw):
                xp[dst + i] = 0


@njit(inline="always", **_JIT)
def _vertical4(xp, wp, rows, tw, T, halo, ldh):
    """F(4,3) step 2 for `rows` tile rows: T[k, g*4tw + w], halo[k, 2g + h]."""
    one = T.dtype.type(1)
    n = np.uint64(4 * tw)
    uwp, uldt, uldh = np.uint64(wp), np.uint64(_LDT), np.uint64(ldh)
    u2, u3, u4, u5 = np.uint64(2), np.uint64(3), np.uint64(4), np.uint64(5)
    for g in range(np.uint64(rows)):
        r0 = u4 * g * uwp  # first of the 6 input rows of tile row g
        r1, r2, r3, r4, r5 = r0 + uwp, r0 + u2 * uwp, r0 + u3 * uwp, r0 + u4 * uwp, r0 + u5 * uwp
        t0 = g * n
        t1, t2, t3, t4, t5 = t0 + uldt, t0 + u2 * uldt, t0 + u3 * uldt, t0 + u4 * uldt, \
            t0 + u5 * uldt
        for w in range(n):
            v0, v1, v2, v3, v4, v5 = _bt4(xp[r0 + w], xp[r1 + w], xp[r2 + w], xp[r3 + w],
                                          xp[r4 + w], xp[r5 + w], one)
            T[t0 + w] = v0
            T[t1 + w] = v1
            T[t2 + w] = v2
            T[t3 + w] = v3
            T[t4 + w] = v4
            T[t5 + w] = v5
        for h in range(u2):
            w = n + h
            v0, v1, v2, v3, v4, v5 = _bt4(xp[r0 + w], xp[r1 + w], xp[r2 + w], xp[r3 + w],
                                          xp[r4 + w], xp[r5 + w], one)
            e = u2 * g + h
            halo[e] = v0
            halo[e + uldh] = v1
            halo[e + u2 * uldh] = v2
            halo[e + u3 * uldh] = v3
            halo[e + u4 * uldh] = v4
            halo[e + u5 * uldh] = v5


@njit(inline="always", **_JIT)
def _vertical2(xp, wp, rows, tw, T, halo, ldh):
    """F(2,3) version of _vertical4."""
    n = np.uint64(2 * tw)
    uwp, uldt, uldh = np.uint64(wp), np.uint64(_LDT), np.uint64(ldh)
    u2, u3 = np.uint64(2), np.uint64(3)
    for g in range(np.uint64(rows)):
        r0 = u2 * g * uwp
        r1, r2, r3 = r0 + uwp, r0 + u2 * uwp, r0 + u3 * uwp
        t0 = g * n
        t1, t2, t3 = t0 + uldt, t0 + u2 * uldt, t0 + u3 * uldt
        for w in range(n):
            v0, v1, v2, v3 = _bt2(xp[r0 + w], xp[r1 + w], xp[r2 + w], xp[r3 + w])
            T[t0 + w] = v0
            T[t1 + w] = v1
            T[t2 + w] = v2
            T[t3 + w] = v3
        for h in range(u2):
            w = n + h
            v0, v1, v2, v3 = _bt2(xp[r0 + w], xp[r1 + w], xp[r2 + w], xp[r3 + w])
            e = u2 * g + h
            halo[e] = v0
            halo[e + uldh] = v1
            halo[e + u2 * uldh] = v2
            halo[e + u3 * uldh] = v3


@njit(inline="always", **_JIT)
def _deinterleave(T, halo, ldh, alpha, m, rows, tw, P):
    """Step 3: the alpha-long patch rows of all tiles, one unit-stride array per position.

    P[k, s, t] = T[k, m*t + s] for s < alpha: s < m from tile t itself, s >= m from the next
    tile (P[k, s - m, t + 1]) or, for the last tile of a row, from `halo`.  Flat buffers.
    """
    tc = rows * tw
    um, uldt, uldp, uldh = np.uint64(m), np.uint64(_LDT), np.uint64(_LDP), np.uint64(ldh)
    u1, u2, u3 = np.uint64(1), np.uint64(2), np.uint64(3)
    utc = np.uint64(tc)
    for k in range(np.uint64(alpha)):
        src = k * uldt
        dst = k * np.uint64(alpha) * uldp
        if m == 4:
            for t in range(utc + u1):
                s = src + np.uint64(4) * t
                P[dst + t] = T[s]
                P[dst + uldp + t] = T[s + u1]
                P[dst + u2 * uldp + t] = T[s + u2]
                P[dst + u3 * uldp + t] = T[s + u3]
        else:
            for t in range(utc + u1):
                s = src + u2 * t
                P[dst + t] = T[s]
                P[dst + uldp + t] = T[s + u1]
        nxt = dst + um * uldp
        for t in range(utc):  # the two inputs shared with the next tile
            P[nxt + t] = P[dst + u1 + t]
            P[nxt + uldp + t] = P[dst + uldp + u1 + t]
        for g in range(np.uint64(rows)):  # the last tile of each row takes the halo instead
            t = (g + u1) * np.uint64(tw) - u1
            P[nxt + t] = halo[k * uldh + u2 * g]
            P[nxt + uldp + t] = halo[k * uldh + u2 * g + u1]


@njit(inline="always", **_JIT)
def _horizontal4(P, tc, V, c):
    """F(4,3) step 4: V[l*6 + k, c, t] = (P[k, :, t] B)[l] for t < tc (V is (36, C, tc))."""
    one = P.dtype.type(1)
    ldp = _LDP
    for k in range(6):
        a = P[6 * k * ldp:(6 * k + 6) * ldp]
        a0, a1, a2 = a[:ldp], a[ldp:2 * ldp], a[2 * ldp:3 * ldp]
        a3, a4, a5 = a[3 * ldp:4 * ldp], a[4 * ldp:5 * ldp], a[5 * ldp:]
        d0, d1, d2, d3, d4, d5 = V[k, c], V[6 + k, c], V[12 + k, c], V[18 + k, c], \
            V[24 + k, c], V[30 + k, c]
        for t in range(np.uint64(tc)):
            v0, v1, v2, v3, v4, v5 = _bt4(a0[t], a1[t], a2[t], a3[t], a4[t], a5[t], one)
            d0[t] = v0
            d1[t] = v1
            d2[t] = v2
            d3[t] = v3
            d4[t] = v4
            d5[t] = v5


@njit(inline="always", **_JIT)
def _horizontal2(P, tc, V, c):
    """F(2,3) step 4: V[l*4 + k, c, t] = (P[k, :, t] B)[l] for t < tc (V is (16, C, tc))."""
    ldp = _LDP
    for k in range(4):
        a = P[4 * k * ldp:(4 * k + 4) * ldp]
        a0, a1, a2, a3 = a[:ldp], a[ldp:2 * ldp], a[2 * ldp:3 * ldp], a[3 * ldp:]
        d0, d1, d2, d3 = V[k, c], V[4 + k, c], V[8 + k, c], V[12 + k, c]
        for t in range(np.uint64(tc)):
            v0, v1, v2, v3 = _bt2(a0[t], a1[t], a2[t], a3[t])
            d0[t] = v0
            d1[t] = v1
            d2[t] = v2
            d3[t] = v3


@njit(**_JIT)
def _input_transform(x, m, pt, pl, th, tw, g0, g1, V, xp, T, P, halo, c0, c1):
    """V[:, c0:c1, :Tc] for global tile rows [g0, g1) (tile row g: image g//th, row g%th).

    Flat scratch: xp (m*th + 2) x (tw*m + 2) zero-bordered, T alpha x _LDT (zeroed),
    P alpha*alpha x _LDP, halo alpha x 2*rows.
    """
    N, C, H, W = x.shape
    alpha = m + 2
    rows, tc = g1 - g0, (g1 - g0) * tw
    wp = tw * m + 2
    ldh = 2 * rows
    xf = x.reshape(x.size)
    for c in range(c0, c1):
        g = g0
        while g < g1:  # runs of tile rows within one image share the padded plane xp
            n = g // th
            ge = min(g1, (n + 1) * th)
            i0 = g - n * th
            _pad_rows(xf, (n * C + c) * H * W, H, W, i0 * m - pt, (ge - g) * m + 2, pl, xp, wp)
            off = (g - g0) * tw * m
            if m == 4:
                _vertical4(xp, wp, ge - g, tw, T[off:], halo[2 * (g - g0):], ldh)
            else:
                _vertical2(xp, wp, ge - g, tw, T[off:], halo[2 * (g - g0):], ldh)
            g = ge
        _deinterleave(T, halo, ldh, alpha, m, rows, tw, P)
        if m == 4:
            _horizontal4(P, tc, V, c)
        else:
            _horizontal2(P, tc, V, c)


# ---------------------------------------------------------------- output transform
# The GEMM outputs Y[p] (M, Tc) sit in one flat buffer at a compile-time pitch _LDY, so the
# 36 (or 16) loads of a tile form one pointer group for LLVM and the whole A^T Y A of a tile
# runs in registers, vectorised across the Tc tiles of the chunk:
#   ob[o, m*t + q] = (A^T Y[:, mm, t] A)[o, q]   with Y[:, mm, t] read as (alpha x alpha)
# Output row o of tile row g is then the contiguous run ob[o, g*tw*m : g*tw*m + OW], stored
# with bias, residual and activation applied.
_LDY = (1 << 16) + 64  # >= M*Tc; the +64 keeps the 36 rows off one cache set


@njit(inline="always", **_JIT)
def _at4_col(yb, s, L, one):
    """A^T of the 6 values yb[s + k*L], k < 6 (one column l of a tile)."""
    return _at4(yb[s], yb[s + L], yb[s + np.uint64(2) * L], yb[s + np.uint64(3) * L],
                yb[s + np.uint64(4) * L], yb[s + np.uint64(5) * L], one)


@njit(inline="always", **_JIT)
def _output_tiles4(yb, mm, tc, ob):
    """F(4,3): ob[o, 4t + q] = (A^T Y A)[o, q] for the tiles t < tc of output channel mm.

    yb holds Y[p, mm, t] at p*_LDY + mm*tc + t (p = l*6 + k); ob is flat (4, _LDO).
    """
    one = yb.dtype.type(1)
    u1, u2, u3, u4 = np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4)
    L, L6, lo = np.uint64(_LDY), np.uint64(6 * _LDY), np.uint64(_LDO)
    base = np.uint64(mm * tc)
    for t in range(np.uint64(tc)):
        s = base + t  # column l of the tile starts at s + l*6*L
        a0, a1, a2, a3 = _at4_col(yb, s, L, one)
        b0, b1, b2, b3 = _at4_col(yb, s + L6, L, one)
        c0, c1, c2, c3 = _at4_col(yb, s + u2 * L6, L, one)
        d0, d1, d2, d3 = _at4_col(yb, s + u3 * L6, L, one)
        e0, e1, e2, e3 = _at4_col(yb, s + u4 * L6, L, one)
        f0, f1, f2, f3 = _at4_col(yb, s + np.uint64(5) * L6, L, one)
        e = u4 * t
        q0, q1, q2, q3 = _at4(a0, b0, c0, d0, e0, f0, one)
        ob[e] = q0
        ob[e + u1] = q1
        ob[e + u2] = q2
        ob[e + u3] = q3
        e += lo
        q0, q1, q2, q3 = _at4(a1, b1, c1, d1, e1, f1, one)
        ob[e] = q0
        ob[e + u1] = q1
        ob[e + u2] = q2
        ob[e + u3] = q3
        e += lo
        q0, q1, q2, q3 = _at4(a2, b2, c2, d2, e2, f2, one)
        ob[e] = q0
        ob[e + u1] = q1
        ob[e + u2] = q2
        ob[e + u3] = q3
        e += lo
        q0, q1, q2, q3 = _at4(a3, b3, c3, d3, e3, f3, one)
        ob[e] = q0
        ob[e + u1] = q1
        ob[e + u2] = q2
        ob[e + u3] = q3


@njit(inline="always", **_JIT)
def _output_tiles2(yb, mm, tc, ob):
    """F(2,3) version of _output_tiles4 (p = l*4 + k); ob is flat (2, _LDO)."""
    u1, u2, u3 = np.uint64(1), np.uint64(2), np.uint64(3)
    L, L4, lo = np.uint64(_LDY), np.uint64(4 * _LDY), np.uint64(_LDO)
    base = np.uint64(mm * tc)
    for t in range(np.uint64(tc)):
        s = base + t
        a0, a1 = _at2(yb[s], yb[s + L], yb[s + u2 * L], yb[s + u3 * L])
        s += L4
        b0, b1 = _at2(yb[s], yb[s + L], yb[s + u2 * L], yb[s + u3 * L])
        s += L4
        c0, c1 = _at2(yb[s], yb[s + L], yb[s + u2 * L], yb[s + u3 * L])
        s += L4
        d0, d1 = _at2(yb[s], yb[s + L], yb[s + u2 * L], yb[s + u3 * L])
        e = u2 * t
        q0, q1 = _at2(a0, b0, c0, d0)
        ob[e] = q0
        ob[e + u1] = q1
        q0, q1 = _at2(a1, b1, c1, d1)
        ob[e + lo] = q0
        ob[e + lo + u1] = q1


@njit(inline="always", **_JIT)
def _store_run(ob, src, yf, dst, n, bias, rf, act):
    """yf[dst + i] = act(ob[src + i] + bias (+ rf[dst + i] if rf is not empty)) for i < n."""
    zero = yf.dtype.type(0)
    us, ud = np.uint64(src), np.uint64(dst)
    if rf.size != 0:
        if act == 1:
            for i in range(np.uint64(n)):
                v = ob[us + i] + bias + rf[ud + i]
                yf[ud + i] = v if not v < zero else zero
        else:
            for i in range(np.uint64(n)):
                yf[ud + i] = ob[us + i] + bias + rf[ud + i]
    elif act == 1:
        for i in range(np.uint64(n)):
            v = ob[us + i] + bias
            yf[ud + i] = v if not v < zero else zero
    else:
        for i in range(np.uint64(n)):
            yf[ud + i] = ob[us + i] + bias


@njit(**_JIT)
def _output_transform(yb, m, th, tw, g0, g1, y, b, rf, act, ob, mm0, mm1):
    """y[n, mm, rows of tile rows g0..g1) = act(A^T Y A + b + res), cropped to (OH, OW), for
    output channels mm0 <= mm < mm1.

    yb: the GEMM outputs at pitch _LDY (see _output_tiles4); rf: the residual (empty: none)
    flattened; flat scratch ob m x _LDO.
    """
    M, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    tc = (g1 - g0) * tw
    ldo = _LDO
    yf = y.reshape(y.size)
    for mm in range(mm0, mm1):
        if m == 4:
            _output_tiles4(yb, mm, tc, ob)
        else:
            _output_tiles2(yb, mm, tc, ob)
        bias = y.dtype.type(b[mm])
        for g in range(g0, g1):
            n = g // th
            i = g - n * th
            for o in range(min(m, OH - i * m)):
                src = o * ldo + (g - g0) * tw * m
                dst = ((n * M + mm) * OH + i * m + o) * OW
                _store_run(ob, src, yf, dst, OW, bias, rf, act)


# ---------------------------------------------------------------- point GEMMs
# Y[p] (M, Tc) = U[p] (M, C) @ V[p] (C, Tc) for the points p0 <= p < p1.  The weights are
# stored transposed, U^T[p] (C, M).  Which kernel multiplies is the `gemm` argument of
# conv3x3, chosen at lowering from the target (point_gemm):
# GEMM_CK: float32 on AVX-512 runs onnxjit's register-blocked kernels (microkernels.ck*: 12
#   output channels broadcast from a U^T row, 32 tiles of V streamed in place, masked ragged
#   tail), so each thread of a parallel region does its points without BLAS;
# GEMM_BLAS: one BLAS call per point, always from the calling thread: a multi-threaded BLAS
#   called from several threads at once serialises or oversubscribes (docs/design.md measured
#   4-5x), so with BLAS only the transforms are split over threads, and BLAS threads itself.
# GEMM_AVX2: float32 on AVX2 runs the AVX2 GEMM (gemm_avx2.gemm_cols: 6 output channels
#   broadcast from a U row, V's rows streamed or packed in 16-tile panels) per point, each
#   thread its points, as GEMM_CK; its weights are stored U[p] (M, C) (``avx2_weights``), the
#   A operand's layout.  No BLAS: OpenBLAS's threads spin after each call and held the cores
#   Numba's threads needed (docs/design.md, "Threads").
_GEMM_KC = 256  # K (input channel) block
GEMM_BLAS, GEMM_CK, GEMM_AVX2 = 0, 1, 2


def point_gemm(target, dtype):
    """The point-GEMM kernel conv3x3 runs on `target` for images of `dtype`."""
    if np.dtype(dtype) != np.float32:
        return GEMM_BLAS
    if target.avx512:
        return GEMM_CK
    return GEMM_AVX2 if target.f32_gemm == "avx2" else GEMM_BLAS


def avx2_weights(u: np.ndarray) -> np.ndarray:
    """winograd_weights' U^T (alpha^2, C, M) as GEMM_AVX2 reads it: U (alpha^2, M, C)."""
    return np.ascontiguousarray(np.asarray(u, np.float32).transpose(0, 2, 1))


def _point_gemms(u, V, yb, C, M, tc, p0, p1, zb, serial, gemm):
    """Y[p] for p in [p0, p1) into the flat yb at pitch _LDY (only callable when jitted).

    serial: the caller runs on one thread; then BLAS is used below 256 input channels
    (measured 5-10% faster than the AVX-512 kernels at 56x56 / 64 and 28x28 / 128 channels,
    where a chunk's Tc = 70 or 49 tiles leaves the kernels' last 32-column tile half empty;
    at 14x14 / 256 channels the kernels are ~10% faster)."""
    raise NotImplementedError


@njit(**_JIT)
def _blas_points(u, V, yb, M, tc, p0, p1):
    for p in range(p0, p1):
        np.dot(u[p].T, V[p], yb[p * _LDY:p * _LDY + M * tc].reshape((M, tc)))


@njit(**_JIT)
def _ck_points(u, V, yb, C, M, tc, p0, p1, zb, serial):
    """_point_gemms on onnxjit's AVX-512 kernels (float32). A module-level function, so each
    caller (the serial path and two parallel regions) links one compiled copy: the closure an
    @overload returns compiles again at every call site (3 x 2 s at first use)."""
    if serial and C < 256:
        _blas_points(u, V, yb, M, tc, p0, p1)
        return
    uf = u.reshape(u.size)
    vf = V.reshape(V.size)
    for p in range(p0, p1):
        if C == 0:
            yb[p * _LDY:p * _LDY + M * tc] = 0
        for k0 in range(0, C, _GEMM_KC):
            kc = min(_GEMM_KC, C - k0)
            first = k0 == 0
            ao = (p * C + k0) * M
            bo = (p * C + k0) * tc
            co = p * _LDY
            r = 0
            while M - r >= 12:
                ck12(uf, ao + r, M, vf, bo, tc, NR64, tc, kc, yb, co + r * tc, tc,
                            first, NO, zb, I0, I0)
                r += 12
            if M - r >= 8:
                ck8(uf, ao + r, M, vf, bo, tc, NR64, tc, kc, yb, co + r * tc, tc,
                           first, NO, zb, I0, I0)
                r += 8
            if M - r >= 4:
                ck4(uf, ao + r, M, vf, bo, tc, NR64, tc, kc, yb, co + r * tc, tc,
                           first, NO, zb, I0, I0)
                r += 4
            while r < M:
                ck1(uf, ao + r, M, vf, bo, tc, NR64, tc, kc, yb, co + r * tc, tc,
                           first, NO, zb, I0, I0)
                r += 1


@njit(**_JIT)
def _avx2_points(u, V, yb, C, M, tc, p0, p1, zb, zbias, xp, yt):
    """_point_gemms on the AVX2 GEMM (float32): u is U (alpha^2, M, C); zb 16 zeros, zbias M
    zeros (the GEMM's column and row biases), xp / yt the GEMM's scratch (``avx2_scratch``)."""
    uf = u.reshape(u.size)
    vf = V.reshape(V.size)
    zero = np.float32(0.0)
    pack = M > CONV_STREAM_M
    for p in range(p0, p1):
        if C == 0:
            for i in range(M * tc):
                yb[p * _LDY + i] = zero
            continue
        gemm_cols(vf, p * C * tc, tc, C, uf, p * M * C, M, zbias, I0, zb, I0, zero, zero, yb,
                  p * _LDY, tc, NO, I0, tc, pack, xp, yt, False)


@njit(inline="always", **_JIT)
def avx2_scratch(nt, C, M):
    """Per-thread scratch of _avx2_points: the packed V block and the ragged tile's output."""
    return np.empty((nt, max(1, cols_scratch(C))), np.float32), np.empty((nt, M * 16), np.float32)


@njit(**_JIT)
def _f32_points(u, V, yb, C, M, tc, p0, p1, zb, serial, gemm):
    """_point_gemms for float32: the kernel `gemm` names."""
    if gemm == GEMM_CK:
        _ck_points(u, V, yb, C, M, tc, p0, p1, zb, serial)
    else:
        _blas_points(u, V, yb, M, tc, p0, p1)


@overload(_point_gemms)
def _point_gemms_impl(u, V, yb, C, M, tc, p0, p1, zb, serial, gemm):
    # one-line closures: the closure an @overload returns compiles again at every call site
    if u.dtype == types.float32:
        return lambda u, V, yb, C, M, tc, p0, p1, zb, serial, gemm: _f32_points(
            u, V, yb, C, M, tc, p0, p1, zb, serial, gemm)
    return lambda u, V, yb, C, M, tc, p0, p1, zb, serial, gemm: _blas_points(
        u, V, yb, M, tc, p0, p1)


# ---------------------------------------------------------------- driver
# V and Y of one chunk together should stay in L2 (2 MiB here) so the GEMMs read what the
# input transform wrote and the output transform reads what the GEMMs wrote.
_CHUNK_BYTES = 1 << 20
_MIN_CHUNK_COLS = 64  # narrower GEMMs lose more to BLAS overhead than they gain in cache


# Below WINOGRAD_PAR_MIN_MACS (parallel.py: output pixels x M x C; ~100 us of work) one thread
# does it all.  Whole chunks on
# threads (conv3x3's chunks) won 20-25% on the small CNN's 3->16 at 64x64 and 16->32 at 32x32
# when the second core was free, but in this shared host's slow windows the same two convs took
# 71 us on 2 threads against 43 on 1 (the small CNN 1.8-2.0x ORT's time instead of 1.25).
_CHUNKS_MIN_MACS = 1 << 20  # whole chunks go to threads (chunks=True) from this size
_CHUNKS_MAX_U = 1 << 20  # done while U (alpha^2 x C x M) is at most this many bytes
_CHUNK_MIN_TILES = 32  # ... and each thread gets this many tiles (the GEMM kernels' width;
# at 16x16 by F(4x4), 8 tiles per thread ran 1.5-2x the one-thread time)


@njit(inline="always", **_JIT)
def _thread_scratch(x, nt, rows, th, tw, m):
    """Per-thread scratch of the transforms for chunks of up to `rows` tile rows: the padded
    planes xp and T (zero-bordered), P, halo and the output buffer ob (see _input_transform,
    _output_transform), each (nt, size)."""
    alpha = m + 2
    nxp = (min(rows, th) * m + 2) * (tw * m + 2)
    return (np.zeros((nt, nxp), x.dtype), np.zeros((nt, alpha * _LDT), x.dtype),
            np.empty((nt, alpha * alpha * _LDP), x.dtype),
            np.empty((nt, alpha * 2 * rows), x.dtype), np.empty((nt, m * _LDO), x.dtype))


def _conv3x3_entry(points):
    """The conv3x3 entry whose point GEMMs are `points`: GEMM_CK (``conv3x3``: onnxjit's
    AVX-512 kernels, or BLAS, as `gemm` says), GEMM_BLAS (``conv3x3_blas``: BLAS only) or
    GEMM_AVX2 (``conv3x3_avx2``: the AVX2 GEMM, U stored (alpha^2, M, C)); `gemm` must then be
    the same.  ck / avx2 are constants of the closure, so Numba prunes the branches not taken:
    the BLAS-only entry, which generic targets run, compiles without the AVX-512 micro-kernels
    (41 -> 26 s of CPU at first use on a Zen 3 host).  Numba's disk cache keys a closure by the
    values of its cells, so the entries have cache entries of their own."""
    ck, avx2 = points == GEMM_CK, points == GEMM_AVX2

    @njit(parallel=PRANGE_ONLY, **_JIT)
    def conv3x3(x, u, b, pads, act, res, gemm):
        """y = act(conv3x3(x) + b (+ res)) for stride 1, dilation 1, group 1, by Winograd.

        x (N, C, H, W) C-contiguous float32/float64; u = winograd_weights(w, m) in x's dtype,
        (alpha^2, C, M) with m = 2 or 4 read off its first dim; b (M,); pads (top, left, bottom,
        right) >= 0; act 0 none / 1 Relu; res a C-contiguous (N, M, OH, OW) array, or an empty
        one for none (as the lowering passes it; None works too, as a specialization of its
        own); gemm the point-GEMM kernel (``point_gemm(target, dtype)``; GEMM_CK only for float32).
        Returns a new (N, M, OH, OW) array of x's dtype.  Output widths above ~1000 (m=2) or
        M*ceil(OW/m) > 65600 exceed the scratch buffers and raise (use_winograd returns 0).

        The chunk loop runs on `nt` threads, each with its own scratch, one of two ways (one
        function, its thread loops included: each level of njit functions above the transforms
        and point GEMMs links and optimizes them again at first use, ~2.5 s of CPU a level):

        chunks: whole chunks split over the threads, each with its own V and Y: one fork/join
        per Conv instead of three per chunk, for convs whose transformed weights U are small
        enough (see conv3x3) that every thread streaming all of U costs less than the two extra
        joins per chunk;

        else each chunk's phases split over them: the input transform by input channels, the
        point GEMMs by points (BLAS: from this thread), the output transform by output
        channels.  nt = 1 runs it all on the calling thread.
        """
        N, C, H, W = x.shape
        a2 = u.shape[0]
        M = u.shape[1] if avx2 else u.shape[2]
        if u.shape[2 if avx2 else 1] != C:
            raise ValueError("conv3x3: weights do not match the input channels")
        m = 4 if a2 == 36 else 2
        pt, pl, pb, pr = pads
        OH, OW = H + pt + pb - 2, W + pl + pr - 2
        y = np.empty((N, M, max(OH, 0), max(OW, 0)), x.dtype)
        if OH <= 0 or OW <= 0 or N == 0 or M == 0:
            return y
        th, tw = (OH + m - 1) // m, (OW + m - 1) // m
        nrows = N * th  # tile rows over all images; a chunk is a run of them
        if tw > _TCMAX or M * tw > _LDY:
            raise ValueError("conv3x3: image too wide for the Winograd scratch buffers")
        per_row = a2 * (C + M) * tw * x.itemsize
        rows = max(_CHUNK_BYTES // per_row, (_MIN_CHUNK_COLS + tw - 1) // tw)
        rows = min(nrows, _TCMAX // tw, _LDY // (M * tw), max(1, rows))
        nchunks = (nrows + rows - 1) // rows
        rows = (nrows + nchunks - 1) // nchunks  # equal chunks: the last one is no sliver
        tcmax = rows * tw
        macs = N * OH * OW * M * C
        nt = num_threads()
        # a computed bool, never a literal: each literal would compile its own specialization
        chunks = (nt > 1 and gemm != GEMM_BLAS and macs >= _CHUNKS_MIN_MACS
                  and a2 * C * M * x.itemsize <= _CHUNKS_MAX_U
                  and nrows >= nt and (nrows // nt) * tw >= _CHUNK_MIN_TILES)
        if chunks:
            rows = min(rows, (nrows + nt - 1) // nt)
            nchunks = (nrows + rows - 1) // rows
            nchunks = (nchunks + nt - 1) // nt * nt  # a whole number of chunks per thread
            rows = (nrows + nchunks - 1) // nchunks
            tcmax = rows * tw
        elif macs < WINOGRAD_PAR_MIN_MACS:
            nt = 1
        xps, Ts, Ps, halos, obs = _thread_scratch(x, nt, rows, th, tw, m)
        if avx2:
            zbias = np.zeros(M, np.float32)
            gxp, gyt = avx2_scratch(nt, C, M)
        zb = np.zeros(16, x.dtype)
        rf = flat_res(res, y)
        nchunks = (nrows + rows - 1) // rows
        if nt == 1:
            vbuf = np.empty(a2 * C * tcmax, x.dtype)
            ybuf = np.empty(a2 * _LDY, x.dtype)
            for g0 in range(0, nrows, rows):
                g1 = min(nrows, g0 + rows)
                tc = (g1 - g0) * tw
                V = vbuf[:a2 * C * tc].reshape((a2, C, tc))
                _input_transform(x, m, pt, pl, th, tw, g0, g1, V, xps[0], Ts[0], Ps[0], halos[0],
                                 I0, C)
                if avx2:
                    _avx2_points(u, V, ybuf, C, M, tc, I0, a2, zb, zbias, gxp[0], gyt[0])
                elif ck:
                    _point_gemms(u, V, ybuf, C, M, tc, I0, a2, zb, True, gemm)
                else:
                    _blas_points(u, V, ybuf, M, tc, I0, a2)
                _output_transform(ybuf, m, th, tw, g0, g1, y, b, rf, act, obs[0], I0, M)
            return y
        # One parallel loop serves both schemes (each prange loop is a gufunc that links and
        # optimizes the transforms and point GEMMs it calls again: four loops cost ~6 s more at
        # first use).  chunks: one step, thread t runs its run of whole chunks with its own V
        # and Y; else three steps per chunk: input transform, point GEMMs, output transform.
        nv = nt if chunks else 1
        vbufs = np.empty((nv, a2 * C * tcmax), x.dtype)
        ybufs = np.empty((nv, a2 * _LDY), x.dtype)
        nsteps = 1 if chunks else 3 * nchunks
        for step in range(nsteps):
            phase = 3 if chunks else step % 3
            g0 = (step // 3) * rows
            g1 = min(nrows, g0 + rows)
            tc = (g1 - g0) * tw
            if phase == 1 and gemm == GEMM_BLAS:    # BLAS threads itself: called from this thread
                V = vbufs[0, :a2 * C * tc].reshape((a2, C, tc))
                if ck:
                    _point_gemms(u, V, ybufs[0], C, M, tc, I0, a2, zb, True, gemm)
                elif not avx2:
                    _blas_points(u, V, ybufs[0], M, tc, I0, a2)
                continue
            for t in prange(nt):
                if phase == 3:
                    k0, k1 = split_range(nchunks, nt, t, 1)
                    for k in range(k0, k1):
                        h0 = k * rows
                        h1 = min(nrows, h0 + rows)
                        hc = (h1 - h0) * tw
                        Vt = vbufs[t, :a2 * C * hc].reshape((a2, C, hc))
                        _input_transform(x, m, pt, pl, th, tw, h0, h1, Vt, xps[t], Ts[t], Ps[t],
                                         halos[t], I0, C)
                        if avx2:
                            _avx2_points(u, Vt, ybufs[t], C, M, hc, I0, a2, zb, zbias, gxp[t],
                                         gyt[t])
                        elif ck:
                            _point_gemms(u, Vt, ybufs[t], C, M, hc, I0, a2, zb, False, gemm)
                        else:
                            _blas_points(u, Vt, ybufs[t], M, hc, I0, a2)
                        _output_transform(ybufs[t], m, th, tw, h0, h1, y, b, rf, act, obs[t], I0,
                                          M)
                elif phase == 0:
                    c0, c1 = split_range(C, nt, t, 1)
                    V0 = vbufs[0, :a2 * C * tc].reshape((a2, C, tc))
                    _input_transform(x, m, pt, pl, th, tw, g0, g1, V0, xps[t], Ts[t], Ps[t],
                                     halos[t], c0, c1)
                elif phase == 1:
                    q0, q1 = split_range(a2, nt, t, 1)
                    V1 = vbufs[0, :a2 * C * tc].reshape((a2, C, tc))
                    if avx2:
                        _avx2_points(u, V1, ybufs[0], C, M, tc, q0, q1, zb, zbias, gxp[t],
                                     gyt[t])
                    elif ck:
                        _point_gemms(u, V1, ybufs[0], C, M, tc, q0, q1, zb, False, gemm)
                    else:
                        _blas_points(u, V1, ybufs[0], M, tc, q0, q1)
                else:
                    m0, m1 = split_range(M, nt, t, 1)
                    _output_transform(ybufs[0], m, th, tw, g0, g1, y, b, rf, act, obs[t], m0, m1)
        return y
    return conv3x3


conv3x3 = _conv3x3_entry(GEMM_CK)
conv3x3_blas = _conv3x3_entry(GEMM_BLAS)
conv3x3_blas.__doc__ = ("conv3x3 with BLAS point GEMMs only (gemm must be GEMM_BLAS): the "
                        "entry for float64 and generic targets (winograd.point_gemm).")
conv3x3_avx2 = _conv3x3_entry(GEMM_AVX2)
conv3x3_avx2.__doc__ = ("conv3x3 on the AVX2 GEMM (gemm must be GEMM_AVX2; float32, u as "
                        "avx2_weights gives it): the entry for AVX2 targets.")
