"""float32 Conv by im2col on onnxjit's AVX-512 GEMM, with weights packed at prepare time.

The same column matrix as ``conv.conv`` (im2col per tile of output rows, from x or from a
padded, stride-phase-split copy of it), multiplied by ``sgemm.gemm_cols``: the packed weights
(``pack_conv``: per group, ``sgemm.pack_a`` panels of 32 output channels) against the columns
streamed in place, bias / residual / Relu applied as the tile is written.  Small outputs (7x7,
14x14) take the whole image as one column matrix and run ``sgemm``'s transposed product on it,
as ``conv1x1_packed`` does.

Threads: with several Numba threads (and enough work) the tiles of all images and groups are
shared out between them, each with its own scratch, so im2col runs in parallel too; the small
path makes its column matrix by runs of input channels, one per thread, then splits its
panels.  Everything runs on Numba's thread pool: no BLAS call, so no second pool of spinning
threads competing for the cores (OpenBLAS's and OpenMP's threads busy-wait after a call;
alternating between the two pools on two cores made a 2-thread ResNet-50 2.2x slower than
one thread).
"""
import numpy as np
from numba import njit, prange

from . import PRANGE_ONLY
from .conv import (PW_MIN_TILE_COLS, PW_TILE_BYTES, SPLIT_MIN_KW, im2col_rows,
                   im2col_split, phase_split, as5d, from5d, pads6, put3, put_window,
                   tup3)
from .parallel import I0, PAR_MIN_MACS, num_threads, split_range
from .epilogue import NO_BOUNDS, load_bias, load_res
from .sgemm import CONV_MID_HW, NR, conv1x1_transposed, gemm_cols, pack_a

from . import JIT as _JIT
_TILE_BYTES = 1 << 19   # a tile's column matrix stays in L2 while the GEMM reads it
_MIN_TILE_COLS = 384


def pack_conv(w, group):
    """Conv weights (M, C/group, *K) -> float32 (group, ceil(M/group/32), C/group*prod(K), 32):
    per group, the (M/group, C/group*prod(K)) matrix packed by ``sgemm.pack_a``."""
    w = np.asarray(w, dtype=np.float32)
    mg = w.shape[0] // group
    return np.ascontiguousarray(np.stack([pack_a(w[g * mg:(g + 1) * mg].reshape(mg, -1))
                                          for g in range(group)]))


@njit(parallel=PRANGE_ONLY, **_JIT)
def conv_packed(x, wp, m, kernel, bias, strides, pads, dilations, act, res):
    """ONNX Conv of float32 x (N, C, *S), 1-3 spatial dims, with wp = pack_conv(w, group):
    act(conv + bias (+ res)) -> (N, m, *O).  kernel: the spatial kernel shape; bias (m,).

    Works on x as a canonical 5-D array (see conv._conv5 for the im2col layouts).  One
    function, its thread loop included: Numba links and optimizes a callee's whole subtree
    again at every level above it, so each wrapper level cost ~2.5 s of CPU at first use."""
    x5 = as5d(x)
    k3, s3, d3, p6 = tup3(kernel, 1), tup3(strides, 1), tup3(dilations, 1), pads6(pads)
    M = m
    N, C, D, H, W = x5.shape
    group, npan, kk = wp.shape[0], wp.shape[1], wp.shape[2]
    cg, mg = C // group, M // group
    if kk != cg * k3[0] * k3[1] * k3[2] or npan * NR < mg or C != cg * group:
        raise ValueError("conv_packed: packed weights do not match x / kernel / m")
    o3 = ((D + p6[0] + p6[3] - (k3[0] - 1) * d3[0] - 1) // s3[0] + 1,
          (H + p6[1] + p6[4] - (k3[1] - 1) * d3[1] - 1) // s3[1] + 1,
          (W + p6[2] + p6[5] - (k3[2] - 1) * d3[2] - 1) // s3[2] + 1)
    P = o3[0] * o3[1] * o3[2]
    y = np.empty((N, M, P), np.float32)
    has_res = False
    if res is not None:     # an empty res is no residual (the lowering passes one for none)
        has_res = res.size != 0
        if has_res:
            load_res(y, res.reshape((N, M, P)))
    y5 = y.reshape((N, M, o3[0], o3[1], o3[2]))
    biasf = np.zeros(M + NR, np.float32)
    load_bias(biasf, bias, M)
    if y.size == 0:
        return from5d(y5, x)
    xf = x5.reshape(x5.size)
    yf = y.reshape(y.size)
    macs = N * M * P * kk
    nt = num_threads() if macs >= PAR_MIN_MACS else 1
    # small outputs: the transposed product (vectors along M) where it fills its vectors
    # better than the streamed one (vectors along P) does, for one group (per-group calls of
    # the transposed product cost more than they save: ShuffleNet's grouped 1x1 convs 2x)
    m_fill = mg / (npan * NR)
    p_fill = P / ((P + NR - 1) // NR * NR)
    if group == 1 and P <= CONV_MID_HW and m_fill > p_fill:
        col = np.empty(kk * P, np.float32)
        plane, taps = D * H * W, k3[0] * k3[1] * k3[2]
        # the column matrix by runs of input channels, one per thread (made on one thread, it
        # was the serial part of the conv; 2 threads, old and new in one process: 256->256
        # 3x3/2 at 28x28 2136 -> 1496 us, 512->512 3x3/2 at 14x14 1819 -> 1451, 1 thread same)
        ncut = nt if cg >= 2 * nt else 1
        for n in range(N):
            for t in prange(ncut):
                c0, c1 = split_range(cg, ncut, t, 1)
                im2col_rows(xf, n * C * plane + c0 * plane, c1 - c0, (D, H, W), k3, s3, p6, d3,
                            o3, I0, o3[0] * o3[1], col[c0 * taps * P:])
            yn = yf[n * M * P:(n + 1) * M * P]      # holding the residual (load_res above)
            conv1x1_transposed(col, kk, P, wp[0], mg, biasf, act, yn, yn, has_res, NO_BOUNDS)
        return from5d(y5, x)
    geo = _geometry(x5.shape, kk, k3, s3, p6, d3, o3, group)
    units = N * group * geo[34]
    if nt == 1:
        _tiles(xf, wp, biasf, yf, M, geo, act, has_res, I0, units, I0, npan)
        return from5d(y5, x)
    # each thread takes a run of the units or, when the units share out worse than the
    # panels of output channels (a single tile, say), every unit for a run of the panels
    # (each thread then makes the tile's columns itself: im2col costs about one GEMM row of
    # the M it saves)
    by_units = (units + nt - 1) // nt * npan <= (npan + nt - 1) // nt * units
    for t in prange(nt):
        if by_units:
            u0, u1 = split_range(units, nt, t, 1)
            if u1 > u0:
                _tiles(xf, wp, biasf, yf, M, geo, act, has_res, u0, u1, I0, npan)
        else:
            p0, p1 = split_range(npan, nt, t, 1)
            if p1 > p0:
                _tiles(xf, wp, biasf, yf, M, geo, act, has_res, I0, units, p0, p1)
    return from5d(y5, x)


@njit(**_JIT)
def _geometry(shape, kk, k3, s3, p6, d3, o3, group):
    """The tiling of the streamed path as an int64 array (Numba's parallel regions take arrays
    and scalars, not nested tuples; ``_unpack`` reads it back): C, D, H, W, cg, k3, s3, p6, d3,
    o3, r3 (phases), e3 (split extents), direct, split, banded, halo, pt, ntiles, laid out as
    conv._conv5 does.  A tile is `pt` output columns (whole output rows; column blocks of x
    itself for unpadded stride-1 1x1 kernels); an unbanded (3-D) split keeps all of an image's
    columns in one tile."""
    N, C, D, H, W = shape
    cg = C // group
    P, OW = o3[0] * o3[1] * o3[2], o3[2]
    nq = o3[0] * o3[1]
    r3 = (s3[0] if k3[0] > 1 else 1, s3[1] if k3[1] > 1 else 1, s3[2] if k3[2] > 1 else 1)
    e3 = (o3[0] + (k3[0] - 1) * d3[0] // s3[0], o3[1] + (k3[1] - 1) * d3[1] // s3[1],
          o3[2] + (k3[2] - 1) * d3[2] // s3[2])
    direct = s3 == (1, 1, 1) and p6 == (0, 0, 0, 0, 0, 0)
    pointwise = kk == cg
    split = not direct and (pointwise or k3[2] >= SPLIT_MIN_KW)
    banded = split and e3[0] == 1
    if pointwise and direct:
        pt = min(P, max(PW_TILE_BYTES // (cg * 4), PW_MIN_TILE_COLS))
    else:
        rows = max(_TILE_BYTES // (kk * OW * 4), (_MIN_TILE_COLS + OW - 1) // OW)
        pt = min(nq, max(1, rows)) * OW
    if split and not banded:
        pt = P
    geo = np.empty(36, np.int64)
    geo[0], geo[1], geo[2], geo[3], geo[4] = C, D, H, W, cg   # (not a tuple into a slice: put3)
    put_window(geo, 5, k3, s3, p6, d3, o3)
    put3(geo, 23, r3)
    put3(geo, 26, e3)
    geo[29], geo[30], geo[31] = int(direct), int(split), int(banded)
    geo[32], geo[33], geo[34], geo[35] = e3[1] - o3[1], pt, (P + pt - 1) // pt, kk
    return geo


@njit(inline="always", **_JIT)
def _unpack(geo):
    """_geometry's array as (C, in3, cg, k3, s3, p6, d3, o3, r3, e3, direct, split, banded,
    halo, pt, ntiles)."""
    g = geo
    return (g[0], (g[1], g[2], g[3]), g[4], (g[5], g[6], g[7]), (g[8], g[9], g[10]),
            (g[11], g[12], g[13], g[14], g[15], g[16]), (g[17], g[18], g[19]),
            (g[20], g[21], g[22]), (g[23], g[24], g[25]), (g[26], g[27], g[28]),
            g[29] != 0, g[30] != 0, g[31] != 0, g[32], g[33], g[34])


@njit(**_JIT)
def _scratch(geo):
    """(phase-split buffer, column buffer) for one thread."""
    C, in3, cg, k3, s3, p6, d3, o3, r3, e3, direct, split, banded, halo, pt, ntiles = _unpack(geo)
    kk = cg * k3[0] * k3[1] * k3[2]
    nphase = r3[0] * r3[1] * r3[2]
    if not split:
        xs = np.empty(0, np.float32)
    elif banded:
        xs = np.empty(cg * nphase * (pt // o3[2] + halo) * e3[2], np.float32)
    else:
        xs = np.empty(cg * nphase * e3[0] * e3[1] * e3[2], np.float32)
    col = np.empty(0 if kk == cg else kk * pt, np.float32)
    return xs, col


@njit(**_JIT)
def _tiles(xf, wp, biasf, yf, M, geo, act, has_res, u0, u1, pan0, pan1):
    """Tiles u0 <= u < u1 (u = (image * group + g) * ntiles + tile), output channels of the
    panels [pan0, pan1) of each group, with scratch of their own."""
    C, in3, cg, k3, s3, p6, d3, o3, r3, e3, direct, split, banded, halo, pt, ntiles = _unpack(geo)
    group, kk = wp.shape[0], wp.shape[2]
    r0 = pan0 * NR
    mg = min(M // group, pan1 * NR) - r0      # the rows of each group this call computes
    P, OW = o3[0] * o3[1] * o3[2], o3[2]
    plane = in3[0] * in3[1] * in3[2]
    xs, col = _scratch(geo)
    for u in range(u0, u1):
        n, g, t = u // (group * ntiles), (u // ntiles) % group, u % ntiles
        xoff = (n * C + g * cg) * plane
        wpf = wp[g].ravel()[pan0 * kk * NR:]
        bias = biasf[g * (M // group) + r0:]
        if split and not banded:
            phase_split(xf, xoff, cg, in3, s3, p6, r3, e3, I0, xs)
        for p0 in range(t * pt, min(P, (t + 1) * pt) if ntiles > 1 else P, pt):
            p1 = min(P, p0 + pt)
            q0, q1 = p0 // OW, p1 // OW
            yoff = (n * M + g * (M // group) + r0) * P + p0
            if kk == cg and direct:      # 1x1: x itself is the column matrix
                gemm_cols(wpf, I0, mg, kk, xf, xoff + p0, P, p1 - p0, yf, yoff, P, bias,
                          act, has_res)
                continue
            eb, j0 = e3, 0
            if banded:
                eb, j0 = (np.int64(1), q1 - q0 + halo, e3[2]), q0
                phase_split(xf, xoff, cg, in3, s3, p6, r3, eb, j0, xs)
            if kk == cg:                 # 1x1 with stride / pads: the split copy is
                base = 0 if banded else p0
                gemm_cols(wpf, I0, mg, kk, xs, base, (p1 - p0) if banded else P, p1 - p0,
                          yf, yoff, P, bias, act, has_res)
                continue
            if direct or split:
                im2col_split(xf if direct else xs, xoff if direct else 0, cg, k3, s3, d3, r3,
                              eb, j0, o3, q0, q1, col)
            else:
                im2col_rows(xf, xoff, cg, in3, k3, s3, p6, d3, o3, q0, q1, col)
            gemm_cols(wpf, I0, mg, kk, col, I0, p1 - p0, p1 - p0, yf, yoff, P, bias, act,
                      has_res)
