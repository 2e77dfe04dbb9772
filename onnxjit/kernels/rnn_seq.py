"""Batch-1 float32 LSTM and GRU (linear_before_reset=1): one compiled loop per direction, the
input projection computed inside the recurrence, the gates on 16-lane vectors.

At batch 1 a step is h (hs) @ R^T (hs, G) plus the gates.  R^T (256 KiB for hidden 128) does not
fit L1, so every step streams it from L2: on these cores that stream (~31 B/cycle, ~115 GB/s) is
the floor of the GEMV (2.3 us a step at hidden 128), while the FMA units sit about half idle.
- gate-interleaved columns: vector v = block * gates + gate holds units 16*block..+16 of one
  gate (GEMV in chunks of 8 vectors, R^T packed [k][128] per chunk), so a hidden block's gates
  are one contiguous run of vectors and the gate math reads them in place after the GEMV (h is
  double-buffered).  Running each block's gates right after the chunk that completes it, or
  spread through the next chunk's k-loop, was measured slower (hidden 128, input 128: ~340 ->
  ~380 / ~470 us a layer): the gate math stalls the R stream rather than hiding under it;
- the input projection X @ W^T + bias is not one GEMM up front: rows are computed in blocks of 8
  (processing order) one block ahead, each step doing 1/8 of the next block's columns, one
  8-row x 16-column "side" tile interleaved into each GEMV chunk's k-loop (W^T panels
  [v][k][16]), into a ring of two blocks.  Only block 0 is computed before the first step.  It
  hides partly: input 128 adds ~0.6 us a step (the GEMM row costs 1.2), input 64 ~0.5 (0.6);
- R and W are packed at prepare time (pack_w / pack_r, numpy) on 64-byte boundaries (16 or 48
  bytes off, a layer ran ~9% slower), and copied by the kernel when handed unaligned;
- sigmoid and tanh are one rational approximation (13 FP operations and a division, absolute
  error <= 3e-7) instead of the exp-based forms of kernels/rnn.py (~35 operations); the gates
  cost ~0.26 us a step.
A sequence of length 0 gives zero states (as ORT).

Two threads (LSTM with hidden sizes a multiple of 64, GRU a multiple of 128; at least
PAR_MIN_STEPS steps): one parallel
region per direction in which two threads walk the steps together, each step cut into two
parts (the first and second half of the GEMV's chunks, with their hidden blocks' gates and
their half of h), so each thread streams its half of R from its own core's L2.  A thread
claims its own part of a step first, then the other one if still free (an atomic
compare-and-swap), and waits for both parts to be counted done before the next step: a spin
of a few hundred nanoseconds where a fork/join per step would cost microseconds, and no
deadlock when the pool runs both of the region's chunks on one thread (the first then does
every part).  The outputs equal the one-thread path's bit for bit.  GRU's 3 gates put a chunk
across the middle at hidden 128 (24 vectors, 3 chunks): each half computes its side of that
chunk as 4 vectors (_chunk4), and its input-projection tile goes to one half by step parity.
"""
import numpy as np
from llvmlite import ir as _ir
from numba import njit, prange
from numba.core import cgutils as _cg
from numba.extending import intrinsic as _intrinsic

from . import PRANGE_ONLY
from .parallel import atomic_add, atomic_cas, atomic_load, num_threads
from .rnn import check_lens, aligned, step_index
from .simd import f32x16, has_avx512, vadd, vbcast, vfma, vload, vmul, vstore, vsub, vzero

from . import JIT as _JIT
CV = 8    # vectors per GEMV chunk (8 zmm accumulators)
SB = 8    # rows per input-projection block
PAR_MIN_STEPS = 16   # a sequence at least this long runs on two threads (when there are two)
SYNC = 8             # int64s a step of the two-thread walk: its 2 claims and count, one cache line
# The input-projection tile inside the GEMV chunk's k-loop (16 accumulators) only where
# 16-lane vectors are single registers. On AVX2 each is two ymm: the interleaved chunk and tile
# (32 ymm accumulators) and the chunk alone (16) spilled in their k-loops, so there a chunk is
# two passes of 4 vectors and the tile comes after it, as two of 4 rows (Zen 3, 1 thread, the
# built-in lstm: 2.0 -> 1.46 -> 1.25 -> 1.08 ms, gru 1.47 -> 0.76)
SIDE_IN_CHUNK = has_avx512()


# ---- tanh and sigmoid: a rational approximation (Eigen's float tanh: odd degree-13 numerator,
# even degree-6 denominator, |x| clamped to 7.9053111, one division; error a few ulp), 13 FP
# operations where the exp-based forms of kernels/rnn.py take ~35 (no FMA contraction there)
_V16 = _ir.VectorType(_ir.FloatType(), 16)
_NUM = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
        5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
        4.89352455891786e-03)
_DEN = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
        4.89352518554385e-03)


def _c16(c):
    return _ir.Constant(_V16, [c] * 16)


def _tanh_ir(builder, x):
    fma = _cg.get_or_insert_function(builder.module, _ir.FunctionType(_V16, [_V16] * 3),
                                      "llvm.fma.v16f32")
    lo, hi = _c16(-7.90531110763549805), _c16(7.90531110763549805)
    x = builder.select(builder.fcmp_ordered("<", x, lo), lo, x)
    x = builder.select(builder.fcmp_ordered(">", x, hi), hi, x)
    x2 = builder.fmul(x, x)
    p = _c16(_NUM[0])
    for c in _NUM[1:]:
        p = builder.call(fma, [p, x2, _c16(c)])
    q = _c16(_DEN[0])
    for c in _DEN[1:]:
        q = builder.call(fma, [q, x2, _c16(c)])
    return builder.fdiv(builder.fmul(p, x), q)


@_intrinsic
def _vtanh(typingctx, x):
    """tanh(x) lane-wise (rational, NaN kept)."""
    def codegen(context, builder, sig, args):
        return _tanh_ir(builder, args[0])
    return f32x16(f32x16), codegen


@_intrinsic
def _vsigmoid(typingctx, x):
    """1 / (1 + exp(-x)) = 0.5 + 0.5 tanh(x / 2) lane-wise."""
    def codegen(context, builder, sig, args):
        t = _tanh_ir(builder, builder.fmul(args[0], _c16(0.5)))
        fma = _cg.get_or_insert_function(builder.module, _ir.FunctionType(_V16, [_V16] * 3),
                                          "llvm.fma.v16f32")
        return builder.call(fma, [t, _c16(0.5), _c16(0.5)])
    return f32x16(f32x16), codegen


def _hp(hs):
    return -(-hs // 16) * 16


def _unit_cols(hs, gates):
    """(gate, unit) of every interleaved column (unit >= hs: zero padding)."""
    nblk = _hp(hs) // 16
    v = np.arange(nblk * gates * 16)
    blk, gate, lane = v // (gates * 16), (v // 16) % gates, v % 16
    return gate, blk * 16 + lane


def _interleave(m, hs, gates):
    """(gates*hs, K) rows in ONNX gate order -> (K, nv*16) columns in interleaved order."""
    gate, unit = _unit_cols(hs, gates)
    out = np.zeros((m.shape[1], gate.size), np.float32)
    ok = unit < hs
    out[:, ok] = m[gate[ok] * hs + unit[ok], :].T
    return out


@njit(**_JIT)
def _aligned_view(a):
    """`a`, or a 64-byte aligned copy (NRT's allocations are) when its data is not on a 32-byte
    boundary: the R / W streams read 64-byte vectors, and at 16 or 48 bytes off a line a layer
    ran ~9% slower (at 0 or 32 as fast; a copy costs ~3%). pack_w / pack_r align their arrays."""
    if a.ctypes.data % 32 == 0:
        return a
    return a.copy()


def pack_w(w, gates):
    """W (dirs, gates*hs, input) -> (dirs, nv*input*16): per vector v, W^T[:, v] as [k][16]."""
    w = np.asarray(w, np.float32)
    hs = w.shape[1] // gates
    out = []
    for d in range(w.shape[0]):
        wt = _interleave(w[d], hs, gates)                      # (ni, nv*16)
        out.append(wt.reshape(wt.shape[0], -1, 16).transpose(1, 0, 2).ravel())
    return aligned(np.stack(out))


def pack_r(r, gates):
    """R (dirs, gates*hs, hs) -> (dirs, hs*nv*16): R^T in interleaved columns, chunks of CV
    vectors as [k][CV*16], then the remaining vectors one by one as [k][16]."""
    r = np.asarray(r, np.float32)
    hs = r.shape[2]
    out = []
    for d in range(r.shape[0]):
        rt = _interleave(r[d], hs, gates)                      # (hs, nv*16)
        nv = rt.shape[1] // 16
        nfull = nv // CV
        full = rt[:, :nfull * CV * 16].reshape(hs, nfull, CV * 16).transpose(1, 0, 2)
        tail = rt[:, nfull * CV * 16:].reshape(hs, -1, 16).transpose(1, 0, 2)
        out.append(np.concatenate([full.ravel(), tail.ravel()]))
    return aligned(np.stack(out))


# ---- GEMV pieces ------------------------------------------------------------------------------
@njit(**_JIT)
def _chunk(hf, hs, rp, ro, init, io):
    """init[io + 16i : +16] + h @ R^T for the chunk's 8 vectors i (R^T at rp[ro:], [k][128];
    where 16-lane vectors are ymm pairs, in two passes of 4: 16 accumulators spilled)."""
    if not SIDE_IN_CHUNK:
        a0, a1, a2, a3 = _chunk4(hf, hs, rp, ro, init, io)
        a4, a5, a6, a7 = _chunk4(hf, hs, rp, ro + 64, init, io + 64)
        return a0, a1, a2, a3, a4, a5, a6, a7
    a0, a1, a2, a3 = vload(init, io), vload(init, io + 16), vload(init, io + 32), \
        vload(init, io + 48)
    a4, a5, a6, a7 = vload(init, io + 64), vload(init, io + 80), vload(init, io + 96), \
        vload(init, io + 112)
    for k in range(hs):
        hb = vbcast(hf, k)
        p = ro + k * 128
        a0 = vfma(hb, vload(rp, p), a0)
        a1 = vfma(hb, vload(rp, p + 16), a1)
        a2 = vfma(hb, vload(rp, p + 32), a2)
        a3 = vfma(hb, vload(rp, p + 48), a3)
        a4 = vfma(hb, vload(rp, p + 64), a4)
        a5 = vfma(hb, vload(rp, p + 80), a5)
        a6 = vfma(hb, vload(rp, p + 96), a6)
        a7 = vfma(hb, vload(rp, p + 112), a7)
    return a0, a1, a2, a3, a4, a5, a6, a7


@njit(**_JIT)
def _chunk4(hf, hs, rp, ro, init, io):
    """Half of a chunk: its 4 vectors at rp[ro + k*128 : +64]."""
    a0, a1, a2, a3 = vload(init, io), vload(init, io + 16), vload(init, io + 32), \
        vload(init, io + 48)
    for k in range(hs):
        hb = vbcast(hf, k)
        p = ro + k * 128
        a0 = vfma(hb, vload(rp, p), a0)
        a1 = vfma(hb, vload(rp, p + 16), a1)
        a2 = vfma(hb, vload(rp, p + 32), a2)
        a3 = vfma(hb, vload(rp, p + 48), a3)
    return a0, a1, a2, a3


@njit(**_JIT)
def _chunk_side(hf, hs, rp, ro, init, io, xf, xo, ni, wp, wo, bv, bo):
    """_chunk's 8 GEMV vectors and, interleaved in the same k-loop, one input-projection tile:
    s_i = bv[bo:bo+16] + sum_k x[xo[i] + k] * Wp[wo + 16k] for the 8 rows i."""
    a0, a1, a2, a3 = vload(init, io), vload(init, io + 16), vload(init, io + 32), \
        vload(init, io + 48)
    a4, a5, a6, a7 = vload(init, io + 64), vload(init, io + 80), vload(init, io + 96), \
        vload(init, io + 112)
    s0 = vload(bv, bo)
    s1, s2, s3, s4, s5, s6, s7 = s0, s0, s0, s0, s0, s0, s0
    o0, o1, o2, o3, o4, o5, o6, o7 = xo[0], xo[1], xo[2], xo[3], xo[4], xo[5], xo[6], xo[7]
    kk = min(hs, ni)
    for k in range(kk):
        hb = vbcast(hf, k)
        p = ro + k * 128
        a0 = vfma(hb, vload(rp, p), a0)
        w = vload(wp, wo + k * 16)
        a1 = vfma(hb, vload(rp, p + 16), a1)
        s0 = vfma(vbcast(xf, o0 + k), w, s0)
        a2 = vfma(hb, vload(rp, p + 32), a2)
        s1 = vfma(vbcast(xf, o1 + k), w, s1)
        a3 = vfma(hb, vload(rp, p + 48), a3)
        s2 = vfma(vbcast(xf, o2 + k), w, s2)
        a4 = vfma(hb, vload(rp, p + 64), a4)
        s3 = vfma(vbcast(xf, o3 + k), w, s3)
        a5 = vfma(hb, vload(rp, p + 80), a5)
        s4 = vfma(vbcast(xf, o4 + k), w, s4)
        a6 = vfma(hb, vload(rp, p + 96), a6)
        s5 = vfma(vbcast(xf, o5 + k), w, s5)
        a7 = vfma(hb, vload(rp, p + 112), a7)
        s6 = vfma(vbcast(xf, o6 + k), w, s6)
        s7 = vfma(vbcast(xf, o7 + k), w, s7)
    for k in range(kk, hs):
        hb = vbcast(hf, k)
        p = ro + k * 128
        a0 = vfma(hb, vload(rp, p), a0)
        a1 = vfma(hb, vload(rp, p + 16), a1)
        a2 = vfma(hb, vload(rp, p + 32), a2)
        a3 = vfma(hb, vload(rp, p + 48), a3)
        a4 = vfma(hb, vload(rp, p + 64), a4)
        a5 = vfma(hb, vload(rp, p + 80), a5)
        a6 = vfma(hb, vload(rp, p + 96), a6)
        a7 = vfma(hb, vload(rp, p + 112), a7)
    for k in range(kk, ni):
        w = vload(wp, wo + k * 16)
        s0 = vfma(vbcast(xf, o0 + k), w, s0)
        s1 = vfma(vbcast(xf, o1 + k), w, s1)
        s2 = vfma(vbcast(xf, o2 + k), w, s2)
        s3 = vfma(vbcast(xf, o3 + k), w, s3)
        s4 = vfma(vbcast(xf, o4 + k), w, s4)
        s5 = vfma(vbcast(xf, o5 + k), w, s5)
        s6 = vfma(vbcast(xf, o6 + k), w, s6)
        s7 = vfma(vbcast(xf, o7 + k), w, s7)
    return (a0, a1, a2, a3, a4, a5, a6, a7), (s0, s1, s2, s3, s4, s5, s6, s7)


@njit(**_JIT)
def _store8(out, o, stride, a):
    a0, a1, a2, a3, a4, a5, a6, a7 = a
    vstore(out, o, a0)
    vstore(out, o + stride, a1)
    vstore(out, o + 2 * stride, a2)
    vstore(out, o + 3 * stride, a3)
    vstore(out, o + 4 * stride, a4)
    vstore(out, o + 5 * stride, a5)
    vstore(out, o + 6 * stride, a6)
    vstore(out, o + 7 * stride, a7)


@njit(**_JIT)
def _vec1(hf, hs, rp, ro, init, io, g, go):
    """g[go:go+16] = init[io:io+16] + h @ R^T for one vector (R^T panel [k][16] at rp[ro:])."""
    a0 = vload(init, io)
    a1 = vzero()
    k = 0
    while k + 1 < hs:
        a0 = vfma(vbcast(hf, k), vload(rp, ro + k * 16), a0)
        a1 = vfma(vbcast(hf, k + 1), vload(rp, ro + k * 16 + 16), a1)
        k += 2
    if k < hs:
        a0 = vfma(vbcast(hf, k), vload(rp, ro + k * 16), a0)
    vstore(g, go, vadd(a0, a1))


@njit(**_JIT)
def _side1(xf, xo, ni, wp, wo, bv, bo, xw, xwo, stride):
    """One input-projection tile (8 rows x 16 columns) on its own (where 16-lane vectors are
    ymm pairs, as two tiles of 4 rows: 8 accumulators each, no spills)."""
    if not SIDE_IN_CHUNK:
        _side4(xf, xo[0], xo[1], xo[2], xo[3], ni, wp, wo, bv, bo, xw, xwo, stride)
        _side4(xf, xo[4], xo[5], xo[6], xo[7], ni, wp, wo, bv, bo, xw, xwo + 4 * stride,
               stride)
        return
    s0 = vload(bv, bo)
    s1, s2, s3, s4, s5, s6, s7 = s0, s0, s0, s0, s0, s0, s0
    o0, o1, o2, o3, o4, o5, o6, o7 = xo[0], xo[1], xo[2], xo[3], xo[4], xo[5], xo[6], xo[7]
    for k in range(ni):
        w = vload(wp, wo + k * 16)
        s0 = vfma(vbcast(xf, o0 + k), w, s0)
        s1 = vfma(vbcast(xf, o1 + k), w, s1)
        s2 = vfma(vbcast(xf, o2 + k), w, s2)
        s3 = vfma(vbcast(xf, o3 + k), w, s3)
        s4 = vfma(vbcast(xf, o4 + k), w, s4)
        s5 = vfma(vbcast(xf, o5 + k), w, s5)
        s6 = vfma(vbcast(xf, o6 + k), w, s6)
        s7 = vfma(vbcast(xf, o7 + k), w, s7)
    _store8(xw, xwo, stride, (s0, s1, s2, s3, s4, s5, s6, s7))


@njit(**_JIT)
def _side4(xf, o0, o1, o2, o3, ni, wp, wo, bv, bo, xw, xwo, stride):
    """4 rows x 16 columns of the input projection (x rows at o0..o3)."""
    s0 = vload(bv, bo)
    s1, s2, s3 = s0, s0, s0
    for k in range(ni):
        w = vload(wp, wo + k * 16)
        s0 = vfma(vbcast(xf, o0 + k), w, s0)
        s1 = vfma(vbcast(xf, o1 + k), w, s1)
        s2 = vfma(vbcast(xf, o2 + k), w, s2)
        s3 = vfma(vbcast(xf, o3 + k), w, s3)
    vstore(xw, xwo, s0)
    vstore(xw, xwo + stride, s1)
    vstore(xw, xwo + 2 * stride, s2)
    vstore(xw, xwo + 3 * stride, s3)


@njit(**_JIT)
def _block_rows(xo, blk, n, ni, reverse):
    """x offsets of the 8 processing-order rows of block `blk` (rows past n repeat row n-1)."""
    for i in range(SB):
        p = min(blk * SB + i, n - 1)
        xo[i] = step_index(p, n, reverse) * ni


@njit(**_JIT)
def _gemv_step(hf, hs, rp, init, io, g, xf, xo, ni, wp, bv, xw, side, j, nv):
    """g = init[io:io+G] + h @ R^T; with side >= 0, also the input-projection tiles of
    block `side` whose column vector is j*nch + q (one per chunk q)."""
    nfull = nv // CV
    nch = -(-nv // CV)
    G = nv * 16
    for q in range(nfull):
        v = j * nch + q
        ro = q * hs * CV * 16
        if side >= 0 and v < nv and SIDE_IN_CHUNK:
            a, s = _chunk_side(hf, hs, rp, ro, init, io + q * CV * 16, xf, xo, ni,
                               wp, v * ni * 16, bv, v * 16)
            _store8(xw, (side % 2) * SB * G + v * 16, G, s)
        else:
            a = _chunk(hf, hs, rp, ro, init, io + q * CV * 16)
            if side >= 0 and v < nv:
                _side1(xf, xo, ni, wp, v * ni * 16, bv, v * 16, xw,
                       (side % 2) * SB * G + v * 16, G)
        _store8(g, q * CV * 16, 16, a)
    base = nfull * hs * CV * 16
    for v in range(nfull * CV, nv):
        _vec1(hf, hs, rp, base + (v - nfull * CV) * hs * 16, init, io + v * 16, g, v * 16)
    if side >= 0:
        for q in range(nfull, nch):
            v = j * nch + q
            if v < nv:
                _side1(xf, xo, ni, wp, v * ni * 16, bv, v * 16, xw, (side % 2) * SB * G + v * 16, G)


@njit(**_JIT)
def _gemv_chunks(hf, hs, rp, init, io, g, xf, xo, ni, wp, bv, xw, side, j, nv, q0, q1):
    """_gemv_step for the whole chunks q0 <= q < q1 only, of a GEMV with no vectors past its
    last whole chunk (nv % CV == 0): one thread's part of a step (_lstm_steps_2t)."""
    nch = nv // CV
    G = nv * 16
    for q in range(q0, q1):
        v = j * nch + q
        ro = q * hs * CV * 16
        if side >= 0 and SIDE_IN_CHUNK:
            a, s = _chunk_side(hf, hs, rp, ro, init, io + q * CV * 16, xf, xo, ni,
                               wp, v * ni * 16, bv, v * 16)
            _store8(xw, (side % 2) * SB * G + v * 16, G, s)
        else:
            a = _chunk(hf, hs, rp, ro, init, io + q * CV * 16)
            if side >= 0:
                _side1(xf, xo, ni, wp, v * ni * 16, bv, v * 16, xw,
                       (side % 2) * SB * G + v * 16, G)
        _store8(g, q * CV * 16, 16, a)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def _row(s, G):
    """Offset of processing-order row s in the two-block ring of X @ W^T rows."""
    return ((s // SB) % 2) * SB * G + (s % SB) * G


@njit(**_JIT)
def _first_block(xf, xo, n, ni, reverse, wp, bv, xw, nv):
    """Rows 0..7 (processing order) of X @ W^T + bias, before the first step."""
    _block_rows(xo, 0, n, ni, reverse)
    if n >= SB:
        for v in range(nv):
            _side1(xf, xo, ni, wp, v * ni * 16, bv, v * 16, xw, v * 16, nv * 16)
        return
    for i in range(n):      # a short sequence (a streaming cell: one step a call): its rows only
        for v in range(nv):
            a0 = vload(bv, v * 16)
            a1 = vzero()
            wo = v * ni * 16
            k = 0
            while k + 1 < ni:
                a0 = vfma(vbcast(xf, xo[i] + k), vload(wp, wo + k * 16), a0)
                a1 = vfma(vbcast(xf, xo[i] + k + 1), vload(wp, wo + k * 16 + 16), a1)
                k += 2
            if k < ni:
                a0 = vfma(vbcast(xf, xo[i] + k), vload(wp, wo + k * 16), a0)
            vstore(xw, i * nv * 16 + v * 16, vadd(a0, a1))


@njit(**_JIT)
def _interleaved_bias(b, d, hs, hp, gates, both):
    """Bias in interleaved columns: W's bias plus, for the gates < `both`, R's."""
    bv = np.zeros(gates * hp, np.float32)
    for blk in range(hp // 16):
        for gt in range(gates):
            for lane in range(16):
                u = blk * 16 + lane
                if u < hs:
                    v = b[d, gt * hs + u]
                    if gt < both:
                        v += b[d, (gates + gt) * hs + u]
                    bv[(blk * gates + gt) * 16 + lane] = v
    return bv


@njit(**_JIT)
def _y_row(yf, t, d, nd, hn, hs):
    """Y[t, d, 0, :] = h (yf: Y flattened)."""
    o = (t * nd + d) * hs
    j = 0
    while j + 16 <= hs:
        vstore(yf, o + j, vload(hn, j))
        j += 16
    for jj in range(j, hs):
        yf[o + jj] = hn[jj]


# ---- LSTM -------------------------------------------------------------------------------------
@njit(**_JIT)
def _lstm_block(g, blk, pp, hp, cf, hn):
    """Gates (i, o, f, c) of hidden block `blk` from g (interleaved) -> c, new h."""
    o = blk * 16
    q = blk * 64
    cv = vload(cf, o)
    gi = _vsigmoid(vfma(vload(pp, o), cv, vload(g, q)))
    gf = _vsigmoid(vfma(vload(pp, 2 * hp + o), cv, vload(g, q + 32)))
    gc = _vtanh(vload(g, q + 48))
    cv = vfma(gf, cv, vmul(gi, gc))
    go = _vsigmoid(vfma(vload(pp, hp + o), cv, vload(g, q + 16)))
    vstore(cf, o, cv)
    vstore(hn, o, vmul(go, _vtanh(cv)))


@njit(inline="always", **_JIT)
def _step_side(s, n, xo, ni, reverse):
    """(j, side) of step s: its row in the 8-row block, and the block whose input-projection
    tiles it computes (-1: none left), xo moved to that block's rows at its first step."""
    j = s % SB
    side = s // SB + 1
    if side * SB >= n:
        side = -1
    elif j == 0:
        _block_rows(xo, side, n, ni, reverse)
    return j, side


@njit(inline="always", **_JIT)
def _h_pair(hbuf, s):
    """(h before step s, h after it): the halves of hbuf by step parity."""
    hp = hbuf.size // 2
    cur = (s % 2) * hp
    return hbuf[cur:cur + hp], hbuf[hp - cur:2 * hp - cur]


@njit(inline="always", **_JIT)
def _claim(sync, s, part, own):
    """Whether this thread takes `part` of step s of a two-thread walk.  The other thread's
    part is read first and tried only when free: a claimed part is then not written (its line,
    shared by both threads, would go back and forth once more a step)."""
    c = SYNC * s + part
    return (own or atomic_load(sync, c) == 0) and atomic_cas(sync, c, 0, 1)


@njit(inline="always", **_JIT)
def _part_done(sync, s, yf, o, hb, u0, u1):
    """A part of step s finished: its units [u0, u1) of h into the Y row at yf[o:], counted."""
    for u in range(u0, u1, 16):
        vstore(yf, o + u, vload(hb, u))
    atomic_add(sync, SYNC * s + 2, 1)


@njit(inline="always", **_JIT)
def _wait_step(sync, s):
    """Until both parts of step s are done (h of step s complete)."""
    while atomic_load(sync, SYNC * s + 2) < 2:
        pass


@njit(**_JIT)
def _lstm_steps_2t(me, n, hs, nv, rpd, xw, g, xf, ni, wpd, bv, pp, cf, hbuf, yf, d, nd,
                   reverse, sync):
    """One thread's walk over the n steps of lstm_seq's two-thread path.  Each step is two
    parts, the first and the second half of the GEMV's chunks with the gates of their hidden
    blocks (a chunk is 2 whole blocks: 8 vectors, 4 gates each) and their half of h and of the
    Y row.  A thread takes its own part of a step first, then the other part if no thread has
    (atomic_cas on sync[SYNC*s + part]), and counts each part it finishes in sync[SYNC*s + 2];
    it goes on to step s + 1 when that count is 2 (h of step s complete).  A step's claims and
    count share one cache line, apart from the other steps'.  So a thread that never comes (the
    pool ran both of the region's chunks one after the other on one thread) leaves every part
    to the other, which runs the whole sequence: no step waits on a thread that has not
    started.  h is double-buffered in hbuf by step parity; the input-projection tiles of
    block b + 1, computed by both during block b, are read after a step's barrier."""
    hp = hbuf.size // 2
    G = nv * 16
    half = nv // CV // 2
    xo = np.zeros(SB, np.int64)
    for s in range(n):
        j, side = _step_side(s, n, xo, ni, reverse)
        ha, hb = _h_pair(hbuf, s)
        for k in range(2):
            part = me ^ k
            if _claim(sync, s, part, k == 0):
                q0, q1 = part * half, (part + 1) * half
                _gemv_chunks(ha, hs, rpd, xw, _row(s, G), g, xf, xo, ni, wpd, bv, xw, side, j,
                             nv, q0, q1)
                for blk in range(2 * q0, 2 * q1):
                    _lstm_block(g, blk, pp, hp, cf, hb)
                _part_done(sync, s, yf, (step_index(s, n, reverse) * nd + d) * hs, hb, 32 * q0,
                           32 * q1)
        _wait_step(sync, s)


@njit(parallel=PRANGE_ONLY, **_JIT)
def _lstm_region(n, hs, nv, rpd, xw, g, xf, ni, wpd, bv, pp, cf, hbuf, yf, d, nd, reverse):
    """The two threads of one direction (_lstm_steps_2t), with their claims and counters.
    The path costs compile time: lstm_seq's first compile took 7.8-8.3 s of CPU against
    4.5-4.8 s without it (the same with this loop inside lstm_seq)."""
    sync = np.zeros(SYNC * n, np.int64)
    for t in prange(2):
        _lstm_steps_2t(t, n, hs, nv, rpd, xw, g, xf, ni, wpd, bv, pp, cf, hbuf, yf, d, nd,
                       reverse, sync)


@njit(**_JIT)
def lstm_seq(x, wp, rp, b, h0, c0, p, lens, rev):
    """ONNX LSTM, batch 1, default activations, no clip, float32; wp = pack_w(W, 4),
    rp = pack_r(R, 4). -> (Y, Y_h, Y_c).

    With two or more Numba threads, hidden sizes that are multiples of 64 and at least
    PAR_MIN_STEPS steps, each step's GEMV and gates are split between two threads
    (_lstm_steps_2t): each reads its half of R from its own core's L2."""
    seq, ni = x.shape[0], x.shape[2]
    nd, hs = wp.shape[0], h0.shape[2]
    hp = -(-hs // 16) * 16
    nv = 4 * hp // 16
    G = nv * 16
    check_lens(lens, seq)
    n = lens[0]
    xf = np.ascontiguousarray(x).ravel()
    y = np.empty((seq, nd, 1, hs), np.float32)
    y[n:] = 0.0
    yf = y.ravel()
    yh = np.empty((nd, 1, hs), np.float32)
    yc = np.empty((nd, 1, hs), np.float32)
    xw = np.empty(2 * SB * G, np.float32)   # ring: the block in use, the next one
    g = np.empty(G, np.float32)
    xo = np.zeros(SB, np.int64)
    pp = np.zeros(3 * hp, np.float32)
    ha = np.zeros(hp, np.float32)
    hb = np.zeros(hp, np.float32)
    cf = np.zeros(hp, np.float32)
    two = num_threads() > 1 and n >= PAR_MIN_STEPS and hs % 64 == 0
    hbuf = np.zeros(2 * hp if two else 0, np.float32)
    for d in range(nd):
        reverse = rev or d == 1
        wpd, rpd = _aligned_view(wp[d]), _aligned_view(rp[d])
        bv = _interleaved_bias(b, d, hs, hp, 4, 4)
        for q in range(3):
            for j in range(hs):
                pp[q * hp + j] = p[d, q * hs + j]
        for j in range(hs):
            ha[j] = h0[d, 0, j]
            cf[j] = c0[d, 0, j]
        if n > 0:
            _first_block(xf, xo, n, ni, reverse, wpd, bv, xw, nv)
        if two:
            hbuf[:hp] = ha
            _lstm_region(n, hs, nv, rpd, xw, g, xf, ni, wpd, bv, pp, cf, hbuf, yf, d, nd,
                         reverse)
            last = (n % 2) * hp
            for j in range(hs):
                yh[d, 0, j] = hbuf[last + j]
                yc[d, 0, j] = cf[j]
            continue
        for s in range(n):
            j, side = _step_side(s, n, xo, ni, reverse)
            _gemv_step(ha, hs, rpd, xw, _row(s, G), g, xf, xo, ni, wpd, bv, xw, side, j, nv)
            for blk in range(hp // 16):
                _lstm_block(g, blk, pp, hp, cf, hb)
            _y_row(yf, step_index(s, n, reverse), d, nd, hb, hs)
            ha, hb = hb, ha
        for j in range(hs):     # an empty sequence (length 0) gives zero states, as ORT's
            yh[d, 0, j] = ha[j] if n > 0 else 0.0
            yc[d, 0, j] = cf[j] if n > 0 else 0.0
    return y, yh, yc


# ---- GRU (linear_before_reset=1) ------------------------------------------------------------
@njit(**_JIT)
def _gru_block(g, blk, xw, io, hf, hn):
    """Gates (z, r, h) of hidden block `blk`: h' = n + z (h - n), n = tanh(xn + r * hr)."""
    o = blk * 16
    q = blk * 48
    z = _vsigmoid(vload(g, q))
    r = _vsigmoid(vload(g, q + 16))
    nn = _vtanh(vfma(r, vload(g, q + 32), vload(xw, io + q + 32)))
    vstore(hn, o, vfma(z, vsub(vload(hf, o), nn), nn))


@njit(**_JIT)
def _gru_part(p, hs, rpd, ini, io, g, xf, xo, ni, wpd, bv, xw, side, j, nv, ha, hb):
    """Part p (0 or 1) of a GRU step on two threads: the GEMV's vectors [p*nv/2, (p+1)*nv/2)
    (whole hidden blocks: nv/2 = 12 * hs/128) as whole chunks and, where a chunk straddles the
    halves, its half (_chunk4: R^T's [k][128] rows hold the chunk's two halves side by side),
    their gates, and the input-projection tiles of the chunks the part begins (the straddled
    chunk's by step parity)."""
    G = nv * 16
    nch = nv // CV
    u0, u1 = p * nch, (p + 1) * nch          # half-chunk units (2 a chunk) of this part
    for blk in range(p * (nv // 6), (p + 1) * (nv // 6)):
        vstore(ini, blk * 48, vload(xw, io + blk * 48))
        vstore(ini, blk * 48 + 16, vload(xw, io + blk * 48 + 16))
    u = u0
    while u < u1:
        q = u // 2
        ro = q * hs * CV * 16
        full = u % 2 == 0 and u + 1 < u1
        mine = u % 2 == 0 and (u + 1 < u1 or j % 2 == p)   # this part computes q's tile
        v = j * nch + q
        if full and side >= 0 and SIDE_IN_CHUNK:
            a, t = _chunk_side(ha, hs, rpd, ro, ini, q * CV * 16, xf, xo, ni, wpd,
                               v * ni * 16, bv, v * 16)
            _store8(xw, (side % 2) * SB * G + v * 16, G, t)
            _store8(g, q * CV * 16, 16, a)
        elif full:
            _store8(g, q * CV * 16, 16, _chunk(ha, hs, rpd, ro, ini, q * CV * 16))
        else:
            h = u % 2
            a0, a1, a2, a3 = _chunk4(ha, hs, rpd, ro + 64 * h, ini, q * CV * 16 + 64 * h)
            o = q * CV * 16 + 64 * h
            vstore(g, o, a0)
            vstore(g, o + 16, a1)
            vstore(g, o + 32, a2)
            vstore(g, o + 48, a3)
        if side >= 0 and not (full and SIDE_IN_CHUNK) and (mine or (u % 2 == 1 and j % 2 == p)):
            _side1(xf, xo, ni, wpd, v * ni * 16, bv, v * 16, xw, (side % 2) * SB * G + v * 16, G)
        u += 2 if full else 1
    for blk in range(p * (nv // 6), (p + 1) * (nv // 6)):
        _gru_block(g, blk, xw, io, ha, hb)


@njit(**_JIT)
def _gru_steps_2t(me, n, hs, nv, rpd, ini, g, xw, xf, ni, wpd, bv, hbuf, yf, d, nd, reverse,
                  sync):
    """One thread's walk over the steps of gru_seq's two-thread path: _lstm_steps_2t's claims
    and counts, each part a _gru_part."""
    G = nv * 16
    xo = np.zeros(SB, np.int64)
    for s in range(n):
        j, side = _step_side(s, n, xo, ni, reverse)
        ha, hb = _h_pair(hbuf, s)
        for k in range(2):
            part = me ^ k
            if _claim(sync, s, part, k == 0):
                _gru_part(part, hs, rpd, ini, _row(s, G), g, xf, xo, ni, wpd, bv, xw, side, j,
                          nv, ha, hb)
                _part_done(sync, s, yf, (step_index(s, n, reverse) * nd + d) * hs, hb,
                           part * hs // 2, (part + 1) * hs // 2)
        _wait_step(sync, s)


@njit(parallel=PRANGE_ONLY, **_JIT)
def _gru_region(n, hs, nv, rpd, ini, g, xw, xf, ni, wpd, bv, hbuf, yf, d, nd, reverse):
    """The two threads of one GRU direction (_gru_steps_2t)."""
    sync = np.zeros(SYNC * n, np.int64)
    for t in prange(2):
        _gru_steps_2t(t, n, hs, nv, rpd, ini, g, xw, xf, ni, wpd, bv, hbuf, yf, d, nd, reverse,
                      sync)


@njit(**_JIT)
def gru_seq(x, wp, rp, b, h0, lens, rev):
    """ONNX GRU with linear_before_reset=1, batch 1, default activations, no clip, float32;
    wp = pack_w(W, 3), rp = pack_r(R, 3). -> (Y, Y_h).

    With two or more Numba threads, hidden sizes that are multiples of 128 and at least
    PAR_MIN_STEPS steps, each step is split between two threads as lstm_seq's is."""
    seq, ni = x.shape[0], x.shape[2]
    nd, hs = wp.shape[0], h0.shape[2]
    hp = -(-hs // 16) * 16
    nv = 3 * hp // 16
    G = nv * 16
    check_lens(lens, seq)
    n = lens[0]
    xf = np.ascontiguousarray(x).ravel()
    y = np.empty((seq, nd, 1, hs), np.float32)
    y[n:] = 0.0
    yf = y.ravel()
    yh = np.empty((nd, 1, hs), np.float32)
    xw = np.empty(2 * SB * G, np.float32)   # ring: the block in use, the next one
    g = np.empty(G, np.float32)
    ini = np.zeros(G, np.float32)
    xo = np.zeros(SB, np.int64)
    ha = np.zeros(hp, np.float32)
    hb = np.zeros(hp, np.float32)
    two = num_threads() > 1 and n >= PAR_MIN_STEPS and hs % 128 == 0
    hbuf = np.zeros(2 * hp if two else 0, np.float32)
    for d in range(nd):
        reverse = rev or d == 1
        wpd, rpd = _aligned_view(wp[d]), _aligned_view(rp[d])
        # z, r: X W^T + Wb + Rb; h: X W^T + Wb (Rb_h goes inside r * (.): the GEMV's init)
        bv = _interleaved_bias(b, d, hs, hp, 3, 2)
        for blk in range(hp // 16):
            for lane in range(16):
                u = blk * 16 + lane
                ini[blk * 48 + 32 + lane] = b[d, 5 * hs + u] if u < hs else 0.0
        for j in range(hs):
            ha[j] = h0[d, 0, j]
        if n > 0:
            _first_block(xf, xo, n, ni, reverse, wpd, bv, xw, nv)
        if two:
            hbuf[:hp] = ha
            _gru_region(n, hs, nv, rpd, ini, g, xw, xf, ni, wpd, bv, hbuf, yf, d, nd, reverse)
            last = (n % 2) * hp
            for j in range(hs):
                yh[d, 0, j] = hbuf[last + j]
            continue
        for s in range(n):
            j, side = _step_side(s, n, xo, ni, reverse)
            io = _row(s, G)
            for blk in range(hp // 16):
                vstore(ini, blk * 48, vload(xw, io + blk * 48))
                vstore(ini, blk * 48 + 16, vload(xw, io + blk * 48 + 16))
            _gemv_step(ha, hs, rpd, ini, 0, g, xf, xo, ni, wpd, bv, xw, side, j, nv)
            for blk in range(hp // 16):
                _gru_block(g, blk, xw, io, ha, hb)
            _y_row(yf, step_index(s, n, reverse), d, nd, hb, hs)
            ha, hb = hb, ha
        for j in range(hs):
            yh[d, 0, j] = ha[j] if n > 0 else 0.0
    return y, yh
