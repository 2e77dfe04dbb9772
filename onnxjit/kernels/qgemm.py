"""uint8 x int8 GEMM with AVX512-VNNI (vpdpbusd), for MatMulInteger with a constant right operand.

``pack_b_s8(b, zb)`` reorders the weights b (K, N) (int8, or uint8 shifted by -128) once, at
prepare time, into N/32 column panels (NP, K/4, 32 columns x 4 k) of signed bytes, so one zmm
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
"""
import llvmlite.binding as _ll
import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils
from numba.extending import intrinsic

from .simd import f32x16, vbcast, vload, vstore, vzero

_JIT = dict(cache=True, error_model="numpy")
NR = 32
MR = 6
MAX_K = 33000
_V = ir.VectorType(ir.FloatType(), 16)
_I32 = ir.VectorType(ir.IntType(32), 16)
# LLVM 21 changed the VNNI intrinsics' byte operands from <16 x i32> to <64 x i8>
_BYTES = (ir.VectorType(ir.IntType(8), 64) if _ll.llvm_version_info[0] >= 21 else _I32)


def has_vnni():
    """True when Numba generates code for a CPU with AVX512-VNNI (and AVX-512F)."""
    from numba.core import config
    if config.CPU_FEATURES is not None:
        feats = config.CPU_FEATURES.split(",")
        return "+avx512vnni" in feats and "+avx512f" in feats
    if config.CPU_NAME not in (None, "host"):
        return False
    f = _ll.get_host_cpu_features()
    return bool(f.get("avx512vnni", False) and f.get("avx512f", False))


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


def pack_b_s8(b, zb):
    """(packed (NP, K4, 128) int8, colsum (NP*32,) int32, zero point as int) for b (K, N)
    int8 or uint8 (shifted to int8 by -128, and so is its zero point)."""
    b = np.asarray(b)
    zb = int(zb)
    if b.dtype == np.uint8:
        b = (b.astype(np.int16) - 128).astype(np.int8)
        zb -= 128
    k, n = b.shape
    k4, npan = -(-k // 4), -(-n // NR)
    full = np.zeros((k4 * 4, npan * NR), np.int8)
    full[:k, :n] = b
    # [panel][k4][column][kk]
    packed = full.reshape(k4, 4, npan, NR).transpose(2, 0, 3, 1)
    colsum = full.astype(np.int32).sum(axis=0)
    return np.ascontiguousarray(packed).reshape(npan, k4, NR * 4), colsum, zb


@njit(**_JIT)
def _block(af, k4, bpf, npan, cf, ldc, m0, rows):
    """C[m0:m0+rows, :] = A rows @ B (raw u8 x s8 sums), rows <= MR."""
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
            o = m0 * ldc + p * NR
            vstore(cf, o, c0)
            vstore(cf, o + 16, d0)
            vstore(cf, o + ldc, c1)
            vstore(cf, o + ldc + 16, d1)
            vstore(cf, o + 2 * ldc, c2)
            vstore(cf, o + 2 * ldc + 16, d2)
            vstore(cf, o + 3 * ldc, c3)
            vstore(cf, o + 3 * ldc + 16, d3)
            vstore(cf, o + 4 * ldc, c4)
            vstore(cf, o + 4 * ldc + 16, d4)
            vstore(cf, o + 5 * ldc, c5)
            vstore(cf, o + 5 * ldc + 16, d5)
        else:
            for r in range(rows):
                c0, d0 = vzero(), vzero()
                ar = a0 + r * k4
                for kk in range(k4):
                    x = vbcast(af, ar + kk)
                    c0 = _vdp(c0, x, vload(bpf, boff + kk * 32))
                    d0 = _vdp(d0, x, vload(bpf, boff + kk * 32 + 16))
                o = (m0 + r) * ldc + p * NR
                vstore(cf, o, c0)
                vstore(cf, o + 16, d0)


@njit(**_JIT)
def qgemm_u8s8(a, za, bp, colsum, zb, n):
    """(a - za) @ (b - zb) in int32 for a (M, K) uint8 and za a uint8 array of one element;
    bp/colsum/zb from pack_b_s8(b)."""
    m, k = a.shape
    npan, k4 = bp.shape[0], bp.shape[1]
    if k4 != -(-k // 4) or n > npan * NR or n <= (npan - 1) * NR:
        raise ValueError("qgemm_u8s8: packed B does not match a / n")
    if k % 4 == 0:
        ap = np.ascontiguousarray(a)
    else:
        ap = np.zeros((m, k4 * 4), np.uint8)
        ap[:, :k] = a
    af = ap.reshape(m * k4 * 4).view(np.float32)
    bpf = bp.reshape(bp.size).view(np.float32)
    ldc = npan * NR
    c = np.empty((m, ldc), np.int32)
    cf = c.reshape(m * ldc).view(np.float32)
    m0 = 0
    while m0 < m:
        rows = min(MR, m - m0)
        _block(af, k4, bpf, npan, cf, ldc, m0, rows)
        m0 += rows
    za32, zb32 = np.int32(za.ravel()[0]), np.int32(zb)
    if za32 != 0 or zb32 != 0:
        kzz = np.int32(k) * za32 * zb32
        for i in range(m):
            rs = np.int32(0)
            if zb32 != 0:
                for kk in range(k):
                    rs += np.int32(a[i, kk])
            for j in range(ldc):
                c[i, j] += kzz - za32 * colsum[j] - zb32 * rs
    if ldc != n:
        return c[:, :n].copy()
    return c
