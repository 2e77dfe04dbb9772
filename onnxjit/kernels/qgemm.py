"""uint8 x int8 GEMM for MatMulInteger with a constant right operand: AVX512-VNNI or AVX2.

Which kernel runs is ``target.host().int8_dot`` (chosen at lowering, ops/quantize.py):

"vnni": ``pack_b_s8(b, zb)`` reorders the weights b (K, N) (int8, or uint8 shifted by -128) once,
at prepare time, into N/32 column panels (NP, K/4, 32 columns x 4 k) of signed bytes, so one zmm
load holds 16 columns x 4 consecutive k; it also returns the column sums and the zero point in
the shifted domain. ``qgemm_u8s8(a, za, bp, colsum, zb, n)`` computes
sum_k (a[m, k] - za) * (b[k, j] - zb) exactly in int32: each vpdpbusd multiplies the 4 bytes
of one A row (broadcast as one 32-bit lane value) with 16 columns x 4 bytes of B and adds the
four products into 16 int32 lanes (64 multiply-adds per instruction, 4x the fp32 FMA rate).
The zero points are applied afterwards: - zb * rowsum(a) - za * colsum(b) + K * za * zb.
Micro-kernel: 6 rows x 32 columns (12 accumulators); A is padded to a multiple of 4 columns
(copied only then). Accumulators are held in the F32x16 type of simd.py and bitcast to
<16 x i32> / <64 x i8> inside the intrinsic (the bits are never read as floats).
Exact for K * 255 * 255 < 2^31 (K < 33,000).

"madd" (AVX2, and AVX-512 without VNNI): the same sums from vpmaddubsw (32 uint8 x int8
products, adjacent pairs added into 16 saturating int16 lanes) and vpmaddwd by ones (pairs of
those into 8 int32 lanes), two ymm halves per F32x16: 32 multiply-adds per two multiplier
instructions, half VNNI's rate (about 115 GMAC/s on one core here, against 88 for the
sign-extended int16 vpmaddwd scheme, which needs an add per 16). Micro-kernel 4 rows x 16
columns, ``pack_b_madd(b, zb)`` packs N/16 panels (NP, K/4, 16 x 4). vpmaddubsw saturates a
pair b0 * a0 + b1 * a1 outside int16; with a <= 255 that cannot happen when the pair's positive
parts and its negative parts each add up to at most 128. The packing clips every other pair
(the second weight only) to that bound and returns the clipped-off parts as a sparse list
(k, column, value), added back exactly after the GEMM (``_fix_up``: a[:, k] * value into
column j): quantize_dynamic's bell-shaped weights leave a few hundred of 65k-260k pairs.
Where more than 1/32 of the pairs would need it (uniform weights), ``pack_b_madd`` returns None
and the lowering keeps the float64 BLAS path.
"""
import llvmlite.binding as _ll
import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils
from numba.extending import intrinsic

from . import PRANGE_ONLY
from .parallel import I0, QGEMM_PAR_MIN_MACS, num_threads, split_range
from .simd import f32x16, vbcast, vload, vstore, vzero

from .epilogue import copy_into

from . import JIT as _JIT
NR = 32
MR = 6
MAX_K = 33000
_V = ir.VectorType(ir.FloatType(), 16)
_I32 = ir.VectorType(ir.IntType(32), 16)
# LLVM 21 changed the VNNI intrinsics' byte operands from <16 x i32> to <64 x i8>
_BYTES = (ir.VectorType(ir.IntType(8), 64) if _ll.llvm_version_info[0] >= 21 else _I32)


def has_vnni():
    """True when Numba generates code for a CPU with AVX512-VNNI and AVX-512F
    (``target.host().int8_dot == "vnni"``)."""
    from ..target import host
    return host().int8_dot == "vnni"


@intrinsic
def _vdp(typingctx, acc, a, b):
    """acc (16 x int32) += per lane, the 4 products of a's unsigned bytes and b's signed bytes."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I32, [_I32, _BYTES, _BYTES]),
            "llvm.x86.avx512.vpdpbusd.512")
        r = builder.call(fn, [builder.bitcast(args[0], _I32), builder.bitcast(args[1], _BYTES),
                              builder.bitcast(args[2], _BYTES)])
        return builder.bitcast(r, _V)
    return f32x16(f32x16, f32x16, f32x16), codegen


def _signed_padded(b, zb, nr):
    """(b as int8 (K4*4, NP*nr), zeros around it; its zero point as int): uint8 weights are
    shifted to int8 by -128, and so is their zero point."""
    b = np.asarray(b)
    zb = int(zb)
    if b.dtype == np.uint8:
        b = (b.astype(np.int16) - 128).astype(np.int8)
        zb -= 128
    k, n = b.shape
    full = np.zeros((-(-k // 4) * 4, -(-n // nr) * nr), np.int8)
    full[:k, :n] = b
    return full, zb


def _panels(full, nr):
    """full (K4*4, NP*nr) int8 as (NP, K4, nr*4): [panel][k4][column][kk]."""
    k4, npan = full.shape[0] // 4, full.shape[1] // nr
    packed = full.reshape(k4, 4, npan, nr).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(packed).reshape(npan, k4, nr * 4)


def pack_b_s8(b, zb):
    """(packed (NP, K4, 128) int8, colsum (NP*32,) int32, zero point as int) for b (K, N)
    int8 or uint8 (shifted to int8 by -128, and so is its zero point)."""
    full, zb = _signed_padded(b, zb, NR)
    return _panels(full, NR), full.astype(np.int32).sum(axis=0), zb


@njit(**_JIT)
def _block(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, crow):
    """C[crow:crow+rows, :] = A[m0:m0+rows] @ B (raw u8 x s8 sums) + colf[j] + rowf[i]
    (int32 bits), rows <= MR."""
    for p in range(npan):
        boff = p * k4 * NR          # float32 words: NR columns x 4 bytes per k4
        c0, c1, c2, c3, c4, c5 = vzero(), vzero(), vzero(), vzero(), vzero(), vzero()
        d0, d1, d2, d3, d4, d5 = vzero(), vzero(), vzero(), vzero(), vzero(), vzero()
        a0 = m0 * k4
        if rows == MR:
            for kk in range(k4):
                b0 = vload(bpf, boff + kk * 32)
                b1 = vload(bpf, boff + kk * 32 + 16)
                x = vbcast(af, a0 + kk)
                c0 = _vdp(c0, x, b0)
                d0 = _vdp(d0, x, b1)
                x = vbcast(af, a0 + k4 + kk)
                c1 = _vdp(c1, x, b0)
                d1 = _vdp(d1, x, b1)
                x = vbcast(af, a0 + 2 * k4 + kk)
                c2 = _vdp(c2, x, b0)
                d2 = _vdp(d2, x, b1)
                x = vbcast(af, a0 + 3 * k4 + kk)
                c3 = _vdp(c3, x, b0)
                d3 = _vdp(d3, x, b1)
                x = vbcast(af, a0 + 4 * k4 + kk)
                c4 = _vdp(c4, x, b0)
                d4 = _vdp(d4, x, b1)
                x = vbcast(af, a0 + 5 * k4 + kk)
                c5 = _vdp(c5, x, b0)
                d5 = _vdp(d5, x, b1)
            o = crow * ldc + p * NR
            j = p * NR
            _store_zp(cf, o, c0, colf, j, rowf, m0)
            _store_zp(cf, o + 16, d0, colf, j + 16, rowf, m0)
            _store_zp(cf, o + ldc, c1, colf, j, rowf, m0 + 1)
            _store_zp(cf, o + ldc + 16, d1, colf, j + 16, rowf, m0 + 1)
            _store_zp(cf, o + 2 * ldc, c2, colf, j, rowf, m0 + 2)
            _store_zp(cf, o + 2 * ldc + 16, d2, colf, j + 16, rowf, m0 + 2)
            _store_zp(cf, o + 3 * ldc, c3, colf, j, rowf, m0 + 3)
            _store_zp(cf, o + 3 * ldc + 16, d3, colf, j + 16, rowf, m0 + 3)
            _store_zp(cf, o + 4 * ldc, c4, colf, j, rowf, m0 + 4)
            _store_zp(cf, o + 4 * ldc + 16, d4, colf, j + 16, rowf, m0 + 4)
            _store_zp(cf, o + 5 * ldc, c5, colf, j, rowf, m0 + 5)
            _store_zp(cf, o + 5 * ldc + 16, d5, colf, j + 16, rowf, m0 + 5)
        else:
            for r in range(rows):
                c0, d0 = vzero(), vzero()
                ar = a0 + r * k4
                for kk in range(k4):
                    x = vbcast(af, ar + kk)
                    c0 = _vdp(c0, x, vload(bpf, boff + kk * 32))
                    d0 = _vdp(d0, x, vload(bpf, boff + kk * 32 + 16))
                o = (crow + r) * ldc + p * NR
                _store_zp(cf, o, c0, colf, p * NR, rowf, m0 + r)
                _store_zp(cf, o + 16, d0, colf, p * NR + 16, rowf, m0 + r)


@njit(**_JIT)
def _operands(a, za, bp, colsum, zb, n, nr):
    """(A padded to whole quads, as float32 words; B as float32 words; ldc; column terms;
    row terms) for a (M, K) uint8 and packed B of nr-column panels."""
    m, k = a.shape
    npan, k4 = bp.shape[0], bp.shape[1]
    if k4 != -(-k // 4) or n > npan * nr or n <= (npan - 1) * nr:
        raise ValueError("qgemm: packed B does not match a / n")
    if k % 4 == 0:
        ap = np.ascontiguousarray(a)
    else:
        ap = np.zeros((m, k4 * 4), np.uint8)
        copy_into(ap[:, :k], a)
    ldc = npan * nr
    colf, rowf = _zero_point_terms(a, za, colsum, zb, ldc)
    return ap, bp.reshape(bp.size).view(np.float32), ldc, colf, rowf


@njit(**_JIT)
def _dequantize_rows(c, out, m0, rows, s, bias):
    """out[m0 + r, j] = float32(c[r, j]) * s (+ bias[j] when bias is not empty): Cast, Mul
    and Add as ONNX rounds them, one at a time (no fused multiply-add). s is the scale as a
    scalar: a 0-d array handed into a prange body arrives there as a scalar."""
    n = out.shape[1]
    if bias.size:
        for r in range(rows):
            for j in range(n):
                out[m0 + r, j] = np.float32(c[r, j]) * s + bias[j]
    else:
        for r in range(rows):
            for j in range(n):
                out[m0 + r, j] = np.float32(c[r, j]) * s


@njit(parallel=PRANGE_ONLY, **_JIT)
def qgemm_u8s8(a, za, bp, colsum, zb, n):
    """(a - za) @ (b - zb) in int32 for a (M, K) uint8 and za a uint8 array of one element;
    bp/colsum/zb from pack_b_s8(b)."""
    m = a.shape[0]
    ap, bpf, ldc, colf, rowf = _operands(a, za, bp, colsum, zb, n, NR)
    k4 = bp.shape[1]
    af = ap.reshape(ap.size).view(np.float32)
    c = np.empty((m, ldc), np.int32)
    cf = c.reshape(m * ldc).view(np.float32)
    nt = _threads(m, k4, ldc, MR)
    if nt > 1:
        for t in prange(nt):
            r0, r1 = split_range(m, nt, t, MR)
            _rows(af, k4, bpf, bp.shape[0], cf, ldc, colf, rowf, r0, r1)
    else:
        _rows(af, k4, bpf, bp.shape[0], cf, ldc, colf, rowf, I0, m)
    if ldc != n:
        return c[:, :n].copy()
    return c


@njit(parallel=PRANGE_ONLY, **_JIT)
def qgemm_u8s8_f32(a, za, bp, colsum, zb, n, scale, bias):
    """float32((a - za) @ (b - zb)) * scale[0] (+ bias): MatMulInteger with the Cast, Mul and
    Add of a dynamically quantized dense layer (ops/quantize.py's peepholes), each 6-row
    block dequantized while its int32 sums are in cache."""
    m = a.shape[0]
    ap, bpf, ldc, colf, rowf = _operands(a, za, bp, colsum, zb, n, NR)
    k4 = bp.shape[1]
    af = ap.reshape(ap.size).view(np.float32)
    out = np.empty((m, n), np.float32)
    s = scale.ravel()[0]
    nt = _threads(m, k4, ldc, MR)
    if nt > 1:
        for t in prange(nt):
            r0, r1 = split_range(m, nt, t, MR)
            _rows_f32(af, k4, bpf, bp.shape[0], ldc, colf, rowf, s, bias, out, r0, r1)
    else:
        _rows_f32(af, k4, bpf, bp.shape[0], ldc, colf, rowf, s, bias, out, I0, m)
    return out


@njit(**_JIT)
def _threads(m, k4, ldc, mr):
    """How many threads a product of m rows, 4 * k4 deep, ldc wide runs on: one below
    QGEMM_PAR_MIN_MACS, else up to Numba's count while each gets two row blocks."""
    nt = num_threads()
    if nt < 2 or m * k4 * 4 * ldc < QGEMM_PAR_MIN_MACS:
        return 1
    return max(1, min(nt, m // (2 * mr)))


@njit(**_JIT)
def _rows(af, k4, bpf, npan, cf, ldc, colf, rowf, r0, r1):
    """Rows [r0, r1) of the int32 product into C's own rows (VNNI)."""
    m0 = r0
    while m0 < r1:
        rows = min(MR, r1 - m0)
        _block(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, m0)
        m0 += rows


@njit(**_JIT)
def _rows_f32(af, k4, bpf, npan, ldc, colf, rowf, s, bias, out, r0, r1):
    """Rows [r0, r1) of the dequantized product (VNNI), through a 6-row int32 scratch."""
    c = np.empty((MR, ldc), np.int32)
    cf = c.reshape(MR * ldc).view(np.float32)
    m0 = r0
    while m0 < r1:
        rows = min(MR, r1 - m0)
        _block(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, 0)
        _dequantize_rows(c, out, m0, rows, s, bias)
        m0 += rows


@njit(**_JIT)
def _zero_point_terms(a, za, colsum, zb, ldc):
    """(column terms K * za * zb - za * colsum[j], row terms - zb * rowsum(a)[i]) as int32 bits
    in float32 arrays: the tiles' stores add them to the raw sums A B, giving (A - za)(B - zb)
    (int32 wraps: exact wherever the result fits)."""
    m, k = a.shape
    za32, zb32 = np.int32(za.ravel()[0]), np.int32(zb)
    col = np.empty(ldc, np.int32)
    kzz = np.int32(k) * za32 * zb32
    for j in range(ldc):
        col[j] = kzz - za32 * colsum[j]
    row = np.zeros(m, np.int32)
    if zb32 != 0:
        for i in range(m):
            rs = np.int32(0)
            for kk in range(k):
                rs += np.int32(a[i, kk])
            row[i] = -zb32 * rs
    return col.view(np.float32), row.view(np.float32)


@intrinsic
def _vaddi(typingctx, a, b):
    """a + b as 16 int32 lanes (the bits of two F32x16)."""
    def codegen(context, builder, sig, args):
        r = builder.add(builder.bitcast(args[0], _I32), builder.bitcast(args[1], _I32))
        return builder.bitcast(r, _V)
    return f32x16(f32x16, f32x16), codegen


@njit(inline="always", **_JIT)
def _store_zp(cf, o, acc, colf, j, rowf, r):
    """cf[o:o+16] = acc + the column terms colf[j:j+16] + the row term rowf[r] (int32 lanes)."""
    vstore(cf, o, _vaddi(_vaddi(acc, vload(colf, j)), vbcast(rowf, r)))


# ---- "madd": AVX2 vpmaddubsw + vpmaddwd ------------------------------------------------------
NR_MADD = 16
MR_MADD = 4
PAIR_LIMIT = 128        # |sum of a pair's same-signed weights| <= 128: 255 * 128 fits int16
FIX_FRACTION = 32       # at most 1 pair in 32 clipped, else no madd kernel
_I8x32 = ir.VectorType(ir.IntType(8), 32)
_I8x64 = ir.VectorType(ir.IntType(8), 64)
_I16x16 = ir.VectorType(ir.IntType(16), 16)
_I32x8 = ir.VectorType(ir.IntType(32), 8)
_LO32 = ir.Constant(ir.VectorType(ir.IntType(32), 32), list(range(32)))
_HI32 = ir.Constant(ir.VectorType(ir.IntType(32), 32), list(range(32, 64)))
_CAT16 = ir.Constant(ir.VectorType(ir.IntType(32), 16), list(range(16)))
_ONES16 = ir.Constant(_I16x16, [1] * 16)


@intrinsic
def _vmadd(typingctx, acc, a, b):
    """acc (16 x int32) += per lane, the 4 products of a's unsigned bytes and b's signed bytes,
    as two ymm halves: vpmaddubsw (pairs into int16, saturating: see PAIR_LIMIT) then
    vpmaddwd by ones (int16 pairs into int32)."""
    def codegen(context, builder, sig, args):
        ub = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I16x16, [_I8x32, _I8x32]),
            "llvm.x86.avx2.pmadd.ub.sw")
        wd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I32x8, [_I16x16, _I16x16]),
            "llvm.x86.avx2.pmadd.wd")
        x = builder.bitcast(args[1], _I8x64)
        y = builder.bitcast(args[2], _I8x64)
        halves = []
        for m in (_LO32, _HI32):
            p = builder.call(ub, [builder.shuffle_vector(x, x, m), builder.shuffle_vector(y, y, m)])
            halves.append(builder.call(wd, [p, _ONES16]))
        s = builder.shuffle_vector(halves[0], halves[1], _CAT16)
        return builder.bitcast(builder.add(builder.bitcast(args[0], _I32), s), _V)
    return f32x16(f32x16, f32x16, f32x16), codegen


def pack_b_madd(b, zb):
    """(packed (NP, K4, 64) int8, colsum (NP*16,) int32, zero point as int, fix (3, F) int32)
    for b (K, N) int8 or uint8, or None where more than 1/FIX_FRACTION of the weight pairs
    would be clipped. The packed weights have every pair (k even, k + 1) within PAIR_LIMIT
    (b[k + 1] clipped); b = packed + the sparse fix: its columns (k, j, value), in k order."""
    full, zb = _signed_padded(b, zb, NR_MADD)
    colsum = full.astype(np.int32).sum(axis=0)
    b0, b1 = full[0::2].astype(np.int32), full[1::2].astype(np.int32)
    pos = np.maximum(b0, 0) + np.maximum(b1, 0) - PAIR_LIMIT
    neg = np.maximum(-b0, 0) + np.maximum(-b1, 0) - PAIR_LIMIT
    # over the limit only where both are of one sign: clip b1 toward 0 by the excess
    excess = np.where(pos > 0, pos, 0) - np.where(neg > 0, neg, 0)
    pk, j = np.nonzero(excess)
    if pk.size * FIX_FRACTION > b0.size:
        return None
    clipped = full.copy()
    clipped[2 * pk + 1, j] = (b1[pk, j] - excess[pk, j]).astype(np.int8)
    fix = np.stack([2 * pk + 1, j, excess[pk, j]]).astype(np.int32)
    return _panels(clipped, NR_MADD), colsum, zb, fix


@njit(**_JIT)
def _block_madd(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, crow):
    """C[crow:crow+rows, :] = A[m0:m0+rows] @ B (raw u8 x s8 sums) + colf[j] + rowf[i]
    (int32 bits), rows <= MR_MADD."""
    for p in range(npan):
        boff = p * k4 * NR_MADD    # float32 words: NR_MADD columns x 4 bytes per k4
        a0 = m0 * k4
        if rows == MR_MADD:
            c0, c1, c2, c3 = vzero(), vzero(), vzero(), vzero()
            for kk in range(k4):
                b0 = vload(bpf, boff + kk * 16)
                c0 = _vmadd(c0, vbcast(af, a0 + kk), b0)
                c1 = _vmadd(c1, vbcast(af, a0 + k4 + kk), b0)
                c2 = _vmadd(c2, vbcast(af, a0 + 2 * k4 + kk), b0)
                c3 = _vmadd(c3, vbcast(af, a0 + 3 * k4 + kk), b0)
            o = crow * ldc + p * NR_MADD
            _store_zp(cf, o, c0, colf, p * NR_MADD, rowf, m0)
            _store_zp(cf, o + ldc, c1, colf, p * NR_MADD, rowf, m0 + 1)
            _store_zp(cf, o + 2 * ldc, c2, colf, p * NR_MADD, rowf, m0 + 2)
            _store_zp(cf, o + 3 * ldc, c3, colf, p * NR_MADD, rowf, m0 + 3)
        else:
            for r in range(rows):
                c0 = vzero()
                ar = a0 + r * k4
                for kk in range(k4):
                    c0 = _vmadd(c0, vbcast(af, ar + kk), vload(bpf, boff + kk * 16))
                _store_zp(cf, (crow + r) * ldc + p * NR_MADD, c0, colf, p * NR_MADD, rowf,
                          m0 + r)


@njit(**_JIT)
def _fix_up(c, ap, fix, m0, rows, crow):
    """c[crow + r, j] += ap[m0 + r, k] * v for each (k, j, v) column of fix (int32 (3, F)),
    r < rows: the weights clipped off at packing. Flat unsigned offsets (no negative-index
    wrap)."""
    lda = ap.shape[1]
    ldc = c.shape[1]
    cf = c.reshape(c.size)
    af = ap.reshape(ap.size)
    for r in range(rows):
        ci = np.uint64((crow + r) * ldc)
        ai = np.uint64((m0 + r) * lda)
        for t in range(fix.shape[1]):
            cf[ci + np.uint64(fix[1, t])] += np.int32(af[ai + np.uint64(fix[0, t])]) * fix[2, t]


@njit(parallel=PRANGE_ONLY, **_JIT)
def qgemm_u8s8_madd(a, za, bp, colsum, zb, n, fix):
    """(a - za) @ (b - zb) in int32 for a (M, K) uint8 and za a uint8 array of one element;
    bp/colsum/zb/fix from pack_b_madd(b). The zero points' terms are added as each tile is
    stored: K * za * zb - za * colsum[j] per column, - zb * rowsum(a)[i] per row."""
    m = a.shape[0]
    ap, bpf, ldc, colf, rowf = _operands(a, za, bp, colsum, zb, n, NR_MADD)
    k4 = bp.shape[1]
    af = ap.reshape(ap.size).view(np.float32)
    c = np.empty((m, ldc), np.int32)
    cf = c.reshape(m * ldc).view(np.float32)
    nt = _threads(m, k4, ldc, MR_MADD)
    if nt > 1:
        for t in prange(nt):
            r0, r1 = split_range(m, nt, t, MR_MADD)
            _rows_madd(af, k4, bpf, bp.shape[0], cf, ldc, colf, rowf, r0, r1)
    else:
        _rows_madd(af, k4, bpf, bp.shape[0], cf, ldc, colf, rowf, I0, m)
    _fix_up(c, ap, fix, 0, m, 0)
    if ldc != n:
        return c[:, :n].copy()
    return c


@njit(parallel=PRANGE_ONLY, **_JIT)
def qgemm_u8s8_madd_f32(a, za, bp, colsum, zb, n, fix, scale, bias):
    """qgemm_u8s8_f32 with the AVX2 kernel: each 4-row block's int32 sums fixed up and
    dequantized while they are in cache."""
    m = a.shape[0]
    ap, bpf, ldc, colf, rowf = _operands(a, za, bp, colsum, zb, n, NR_MADD)
    k4 = bp.shape[1]
    af = ap.reshape(ap.size).view(np.float32)
    out = np.empty((m, n), np.float32)
    s = scale.ravel()[0]
    nt = _threads(m, k4, ldc, MR_MADD)
    if nt > 1:
        for t in prange(nt):
            r0, r1 = split_range(m, nt, t, MR_MADD)
            _rows_madd_f32(af, ap, k4, bpf, bp.shape[0], ldc, colf, rowf, fix, s, bias, out, r0, r1)
    else:
        _rows_madd_f32(af, ap, k4, bpf, bp.shape[0], ldc, colf, rowf, fix, s, bias, out, I0,
                       m)
    return out


@njit(**_JIT)
def _rows_madd(af, k4, bpf, npan, cf, ldc, colf, rowf, r0, r1):
    """Rows [r0, r1) of the int32 product into C's own rows (AVX2 madd; fix-up apart)."""
    m0 = r0
    while m0 < r1:
        rows = min(MR_MADD, r1 - m0)
        _block_madd(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, m0)
        m0 += rows


@njit(**_JIT)
def _rows_madd_f32(af, ap, k4, bpf, npan, ldc, colf, rowf, fix, s, bias, out, r0, r1):
    """Rows [r0, r1) of the dequantized product (AVX2 madd), each 4-row block fixed up and
    dequantized while its sums are in cache."""
    c = np.empty((MR_MADD, ldc), np.int32)
    cf = c.reshape(MR_MADD * ldc).view(np.float32)
    m0 = r0
    while m0 < r1:
        rows = min(MR_MADD, r1 - m0)
        _block_madd(af, k4, bpf, npan, cf, ldc, m0, rows, colf, rowf, 0)
        _fix_up(c, ap, fix, m0, rows, 0)
        _dequantize_rows(c, out, m0, rows, s, bias)
        m0 += rows


