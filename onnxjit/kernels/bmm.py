"""Batched float32 MatMul of two run-time operands on the AVX-512 GEMM micro-kernels.

``bmm`` computes C[b] = act(A[b] @ B[b] + bias) * scale for b in range(batch), where every
operand is addressed through element offsets and strides into a flat C-contiguous source array:

    A[b][i, k] = a.flat[aoffs[b] + i * ars + k * acs]
    B[b][k, j] = b.flat[boffs[b] + k * brs + j * bcs]
    C[b][i, j] = out[coffs[b] + i * crs + j * ccs]

so a Transpose in front of the MatMul (attention's Q, K^T and V head views) is read in place,
batch broadcasting is a repeated offset, and a Transpose after it (heads merged back) is a choice
of output strides: no transposed copies are materialised.  The lowering (ops/nn.py) computes
offsets and strides at compile time from the shapes.

Per batch, B is packed at run time into the 32-column panels the micro-kernels stream (the
``sgemm.pack_b`` layout; skipped when consecutive batches share B), A is read in place when its
columns are contiguous (else copied), and C is written in place when its rows are contiguous
32-column multiples (else through a scratch tile).  Loop order and blocking as ``sgemm_packed``;
with several Numba threads, batches (or, for fewer batches than threads, row blocks) are split
across them.  On transformer_block's attention (4 heads, 128 x 64 x 128 and 128 x 128 x 64, one
thread) it takes 0.75x OpenBLAS's time (packing B included: ~1 us per head) and removes the
three transposed copies in front of the MatMuls and the one after.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from . import PRANGE_ONLY
from .epilogue import load_bias
from .microkernels import k1, k4, k8, k12
from .parallel import I0, PAR_MIN_MACS, num_threads, split_range
from .sgemm import KCMAX, L2_PANEL_BYTES, NR
from .simd import F32_1D, I32, VEC, elem_ptr, vload, vstore

from . import JIT as _JIT


@intrinsic
def _transpose16(typingctx, src, soff, sstride, dst, doff, dstride):
    """dst[doff + c * dstride + r] = src[soff + r * sstride + c] for r, c < 16: a 16 x 16 block
    transposed in registers (16 loads, 4 stages of 16 two-vector shuffles, 16 stores).

    Stage b (8, 4, 2, 1) swaps the off-diagonal b x b blocks of every 2b x 2b block.  No bounds
    checks: the caller keeps all 16 rows of both blocks in range."""
    if src != F32_1D or dst != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        sa, so, ss, da, do, ds = args
        rows = []
        for r in range(16):
            i = builder.add(so, builder.mul(ss, ir.Constant(ss.type, r)))
            p = elem_ptr(context, builder, sig.args[0], sa, i)
            rows.append(builder.load(builder.bitcast(p, VEC.as_pointer()), align=4))
        b = 8
        while b:
            lo = ir.Constant(ir.VectorType(I32, 16),
                             [c if not c & b else 16 + c - b for c in range(16)])
            hi = ir.Constant(ir.VectorType(I32, 16),
                             [c + b if not c & b else 16 + c for c in range(16)])
            for r in range(16):
                if not r & b:
                    x, y = rows[r], rows[r + b]
                    rows[r] = builder.shuffle_vector(x, y, lo)
                    rows[r + b] = builder.shuffle_vector(x, y, hi)
            b //= 2
        for c in range(16):
            i = builder.add(do, builder.mul(ds, ir.Constant(ds.type, c)))
            p = elem_ptr(context, builder, sig.args[3], da, i)
            builder.store(rows[c], builder.bitcast(p, VEC.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(src, types.intp, types.intp, dst, types.intp, types.intp), codegen


@njit(**_JIT)
def _pack_b(bf, boff, brs, bcs, k, n, bp):
    """B[k, j] = bf[boff + k * brs + j * bcs] into panels bp (npan * k * 32), pad columns left as
    they are (zero).  Rows of 32 contiguous floats are copied as two vectors; a B read along
    columns (bcs != 1, e.g. K^T in attention) goes through 16 x 16 register transposes when its
    columns are contiguous (brs == 1), else element by element."""
    npan = (n + NR - 1) // NR
    for p in range(npan):
        j0 = p * NR
        w = min(NR, n - j0)
        base = p * k * NR
        if bcs == 1 and w == NR:
            for kk in range(k):
                src = boff + kk * brs + j0
                vstore(bp, base + kk * NR, vload(bf, src))
                vstore(bp, base + kk * NR + 16, vload(bf, src + 16))
        elif bcs == 1:
            for kk in range(k):
                src = boff + kk * brs + j0
                dst = base + kk * NR
                for jj in range(w):
                    bp[dst + jj] = bf[src + jj]
        else:
            k16 = k // 16 * 16 if brs == 1 else 0
            for jh in range(0, w - 15, 16):
                for kk in range(0, k16, 16):
                    _transpose16(bf, boff + (j0 + jh) * bcs + kk, bcs, bp, base + kk * NR + jh, NR)
            for jj in range(w):
                src = boff + (j0 + jj) * bcs
                kfrom = k16 if jj < w // 16 * 16 else 0
                for kk in range(kfrom, k):
                    bp[base + kk * NR + jj] = bf[src + kk * brs]


@njit(**_JIT)
def _empty64(n):
    """np.empty(n, float32) starting on a 64-byte boundary (whole-zmm loads and stores then
    never straddle cache lines: ~6% on the micro-kernels)."""
    buf = np.empty(n + 16, np.float32)
    off = (-(buf.ctypes.data % 64) // 4) % 16
    return buf[off:off + n]


@njit(**_JIT)
def _gemm(af, aoff, lda, bp, m, k, npan, cf, coff, ldc, biasf, act):
    """C (m rows at cf[coff], row stride ldc, npan * 32 columns) = act(A @ Bpacked + bias)."""
    nkb = (k + KCMAX - 1) // KCMAX
    kcs = (k + nkb - 1) // nkb
    nblk = max(1, L2_PANEL_BYTES // (kcs * NR * 4))
    mmain = m // 12 * 12
    for k0 in range(0, k, kcs):
        kc = min(kcs, k - k0)
        first = k0 == 0
        last = k0 + kc == k
        for j0 in range(0, npan, nblk):
            nj = min(npan, j0 + nblk) - j0
            boff = (j0 * k + k0) * NR
            for i0 in range(0, mmain, 12):
                k12(af, aoff + i0 * lda + k0, lda, bp, boff, k * NR, nj, kc,
                     cf, coff + i0 * ldc + j0 * NR, ldc, first, last, biasf, j0 * NR, act)
            i0 = mmain
            if m - i0 >= 8:
                k8(af, aoff + i0 * lda + k0, lda, bp, boff, k * NR, nj, kc,
                    cf, coff + i0 * ldc + j0 * NR, ldc, first, last, biasf, j0 * NR, act)
                i0 += 8
            if m - i0 >= 4:
                k4(af, aoff + i0 * lda + k0, lda, bp, boff, k * NR, nj, kc,
                    cf, coff + i0 * ldc + j0 * NR, ldc, first, last, biasf, j0 * NR, act)
                i0 += 4
            for i in range(i0, m):
                k1(af, aoff + i * lda + k0, lda, bp, boff, k * NR, nj, kc,
                    cf, coff + i * ldc + j0 * NR, ldc, first, last, biasf, j0 * NR, act)


@njit(**_JIT)
def _bmm_part(af, bf, aoffs, boffs, coffs, dims, biasf, act, s, out, b0, b1, r0, r1):
    """Batches [b0, b1), rows [r0, r1) of each: the serial core of ``bmm`` (own scratch)."""
    m, k, n, ars, acs, brs, bcs, crs, ccs, csize = dims
    rows = r1 - r0
    npan = (n + NR - 1) // NR
    ldp = npan * NR
    bp = _empty64(npan * k * NR)
    bp[:] = 0
    direct = ccs == 1 and n % NR == 0
    cbuf = np.empty(0 if direct else rows * ldp, np.float32)
    abuf = np.empty(rows * k if acs != 1 else 0, np.float32)
    packed = -1   # offset of the B now in bp (offsets are >= 0)
    for bi in range(b0, b1):
        if boffs[bi] != packed:
            _pack_b(bf, boffs[bi], brs, bcs, k, n, bp)
            packed = boffs[bi]
        if acs == 1:
            src, aoff, lda = af, aoffs[bi] + r0 * ars, ars
        else:
            for i in range(rows):
                for kk in range(k):
                    abuf[i * k + kk] = af[aoffs[bi] + (r0 + i) * ars + kk * acs]
            src, aoff, lda = abuf, 0, k
        if direct:
            _gemm(src, aoff, lda, bp, rows, k, npan, out, coffs[bi] + r0 * crs, crs, biasf, act)
            if s != np.float32(1):
                for i in range(r0, r1):
                    o = coffs[bi] + i * crs
                    for j in range(n):
                        out[o + j] *= s
        else:
            _gemm(src, aoff, lda, bp, rows, k, npan, cbuf, 0, ldp, biasf, act)
            for i in range(rows):
                o = coffs[bi] + (r0 + i) * crs
                for j in range(n):
                    out[o + j * ccs] = cbuf[i * ldp + j] * s


@njit(parallel=PRANGE_ONLY, **_JIT)
def bmm(a, b, aoffs, boffs, coffs, dims, bias, act, scale):
    """Batched act(A[b] @ B[b] + bias) * scale -> new flat float32 array (see the module doc).

    a, b: float32 arrays of any shape (read as flat C-contiguous sources); aoffs, boffs, coffs:
    int64 (batch,) element offsets; dims = (m, k, n, ars, acs, brs, bcs, crs, ccs, csize) with
    m, k, n >= 1 and csize the output's element count; bias: (n,) float32 or None; act: 0 none,
    1 relu; scale: a float multiplying the result (1.0: none; the lowering never combines it
    with bias or act).  The caller reshapes the result.  Uses ``numba.get_num_threads()``
    threads for products of at least PAR_MIN_MACS multiply-adds.
    """
    m, k, n = dims[0], dims[1], dims[2]
    af = np.ascontiguousarray(a).reshape(-1)
    bf = np.ascontiguousarray(b).reshape(-1)
    out = _empty64(dims[9])
    biasf = np.zeros((n + NR - 1) // NR * NR, np.float32)
    if bias is not None:
        load_bias(biasf, bias, n)
    s = np.float32(scale)
    nb = aoffs.shape[0]
    nt = num_threads()
    if nt > 1 and nb * m * k * n >= PAR_MIN_MACS and (nb >= nt or m >= 12 * nt):
        # runs of batches when there are at least nt, else runs of rows (multiples of 12) of
        # every batch, each thread packing B itself (the loop is here, not in a wrapper: each
        # njit level links and optimizes _bmm_part again at first use)
        for t in prange(nt):
            if nb >= nt:
                b0, b1 = split_range(nb, nt, t, 1)
                _bmm_part(af, bf, aoffs, boffs, coffs, dims, biasf, act, s, out, b0, b1, I0, m)
            else:
                r0, r1 = split_range(m, nt, t, 12)
                if r1 > r0:
                    _bmm_part(af, bf, aoffs, boffs, coffs, dims, biasf, act, s, out, I0, nb, r0,
                              r1)
    else:
        _bmm_part(af, bf, aoffs, boffs, coffs, dims, biasf, act, s, out, I0, nb, I0, m)
    return out
