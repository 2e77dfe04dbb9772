"""RNN, GRU and LSTM kernels (ONNX semantics, layout 0: X is (seq, batch, input)).

The lowering (ops/rnn.py) fills every optional input (zeros, full sequence lengths) and maps the
activation names to the integer codes below, so one compiled kernel serves every model.
Activation k of direction d is `codes[d * per_dir + k]` with parameters `alphas[...]`, `betas[...]`.
X @ W^T is one GEMM over all steps; each step adds H @ R^T (BLAS) and applies the gates.
Float32 LSTM/GRU with constant weights and a small batch take lstm_fast / gru_fast (below);
at batch 1 (GRU: with linear_before_reset) kernels/rnn_seq.py's lstm_seq / gru_seq.
"""
import math

import numpy as np
from numba import njit

from . import JIT as _JIT

# activation codes (ops/rnn.py maps the ONNX names onto these)
RELU, TANH, SIGMOID, AFFINE, LEAKY_RELU, THRESHOLDED_RELU = 0, 1, 2, 3, 4, 5
SCALED_TANH, HARD_SIGMOID, ELU, SOFTSIGN, SOFTPLUS = 6, 7, 8, 9, 10


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def act(code, x, alpha, beta):
    """Activation `code` of the float64 `x`."""
    if code == RELU:
        return max(x, 0.0)
    if code == TANH:
        return math.tanh(x)
    if code == SIGMOID:
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
    if code == AFFINE:
        return alpha * x + beta
    if code == LEAKY_RELU:
        return x if x >= 0 else alpha * x
    if code == THRESHOLDED_RELU:
        return x if x > alpha else 0.0
    if code == SCALED_TANH:
        return alpha * math.tanh(beta * x)
    if code == HARD_SIGMOID:
        return max(0.0, min(1.0, alpha * x + beta))
    if code == ELU:
        return x if x >= 0 else alpha * (math.exp(x) - 1.0)
    if code == SOFTSIGN:
        return x / (1.0 + abs(x))
    return math.log1p(math.exp(x)) if x <= 0 else x + math.log1p(math.exp(-x))


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def _clip(x, c):
    return min(max(x, -c), c)


@njit(**_JIT)
def check_lens(lens, seq):
    for b in range(lens.shape[0]):
        if lens[b] < 0 or lens[b] > seq:
            raise IndexError("RNN: sequence_lens value out of range [0, seq_length]")


@njit(**_JIT)
def _xw(x, w, bias):
    """(seq, batch, G) = X @ W^T + bias, one GEMM over every step."""
    seq, nb, ni = x.shape
    out = np.dot(x.reshape((seq * nb, ni)), np.ascontiguousarray(w.T))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] += bias[j]
    return out.reshape((seq, nb, w.shape[0]))


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def step_index(s, n, reverse):
    """Time index of step `s` of a sequence of length `n`."""
    return n - 1 - s if reverse else s


@njit(**_JIT)
def _rnn_dir(xw, rt, h, lens, reverse, code, alpha, beta, clip, y, d):
    """One direction of RNN: h (batch, hidden) is updated in place, y[t, d] filled."""
    seq, nb, hs = xw.shape
    for s in range(seq):
        rec = np.dot(h, rt)
        for b in range(nb):
            if s >= lens[b]:
                continue
            t = step_index(s, lens[b], reverse)
            for j in range(hs):
                v = _clip(float(xw[t, b, j]) + rec[b, j], clip)
                h[b, j] = act(code, v, alpha, beta)
                y[t, d, b, j] = h[b, j]


@njit(**_JIT)
def rnn(x, w, r, b, h0, lens, rev, codes, alphas, betas, clip):
    """ONNX RNN -> (Y (seq, dirs, batch, hidden), Y_h (dirs, batch, hidden))."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = w.shape[0], r.shape[2]
    check_lens(lens, seq)
    y = np.zeros((seq, nd, nb, hs), x.dtype)
    yh = np.empty((nd, nb, hs), x.dtype)
    for d in range(nd):
        bias = b[d, :hs] + b[d, hs:]
        h = h0[d].copy()
        _rnn_dir(_xw(x, w[d], bias), np.ascontiguousarray(r[d].T), h, lens, rev or d == 1,
                 codes[d][0], alphas[d][0], betas[d][0], clip, y, d)
        yh[d] = h
    return y, yh


@njit(**_JIT)
def _gru_dir(xw, r, rb, h, lens, reverse, cf, cg, a, bt, clip, lbr, y, d):
    """One direction of GRU (gates z, r, h); a/bt hold (alpha, beta) of f and g."""
    seq, nb, hs = xw.shape[0], h.shape[0], h.shape[1]
    rt = np.ascontiguousarray(r.T)
    rht = np.ascontiguousarray(r[2 * hs:].T)
    rh = np.empty((nb, hs), h.dtype)
    for s in range(seq):
        rec = np.dot(h, rt)
        zr = np.empty((nb, 2 * hs))
        for b in range(nb):
            t = step_index(s, lens[b], reverse) if s < lens[b] else 0
            for j in range(2 * hs):
                v = _clip(float(xw[t, b, j]) + rec[b, j] + rb[j], clip)
                zr[b, j] = act(cf, v, a[0], bt[0])
            for j in range(hs):
                rh[b, j] = zr[b, hs + j] * h[b, j]
        hr = np.ascontiguousarray(rec[:, 2 * hs:]) if lbr else np.dot(rh, rht)
        _gru_update(xw, hr, zr, rb, h, lens, s, reverse, cg, a[1], bt[1], clip, lbr, y, d)


@njit(**_JIT)
def _gru_update(xw, hr, zr, rb, h, lens, s, reverse, cg, alpha, beta, clip, lbr, y, d):
    """h = (1 - z) * g(...) + z * h for the rows still inside their sequence."""
    nb, hs = h.shape
    for b in range(nb):
        if s >= lens[b]:
            continue
        t = step_index(s, lens[b], reverse)
        for j in range(hs):
            if lbr:
                v = xw[t, b, 2 * hs + j] + zr[b, hs + j] * (hr[b, j] + rb[2 * hs + j])
            else:
                v = xw[t, b, 2 * hs + j] + (hr[b, j] + rb[2 * hs + j])
            ht = act(cg, _clip(float(v), clip), alpha, beta)
            z = zr[b, j]
            h[b, j] = (1.0 - z) * ht + z * h[b, j]
            y[t, d, b, j] = h[b, j]


@njit(**_JIT)
def gru(x, w, r, b, h0, lens, rev, codes, alphas, betas, clip, lbr):
    """ONNX GRU -> (Y, Y_h); codes/alphas/betas are (dirs, 2) (f, g) per direction."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = w.shape[0], r.shape[2]
    check_lens(lens, seq)
    y = np.zeros((seq, nd, nb, hs), x.dtype)
    yh = np.empty((nd, nb, hs), x.dtype)
    for d in range(nd):
        # the input bias joins X @ W^T; the recurrent one is added per step (it may sit in r*(.))
        wb, rb = b[d, :3 * hs], b[d, 3 * hs:]
        h = h0[d].copy()
        _gru_dir(_xw(x, w[d], wb), r[d], rb, h, lens, rev or d == 1, codes[d][0], codes[d][1],
                 alphas[d], betas[d], clip, lbr, y, d)
        yh[d] = h
    return y, yh


@njit(**_JIT)
def _lstm_gates(g, c, p, cf, cg, a, bt, clip, input_forget, hs):
    """Activate one row of gates (i, o, f, c) in place; returns nothing, g holds i, o, f, c~."""
    for j in range(hs):
        gi = act(cf, _clip(g[j] + p[j] * c[j], clip), a[0], bt[0])
        if input_forget:
            gf = 1.0 - gi
        else:
            gf = act(cf, _clip(g[2 * hs + j] + p[2 * hs + j] * c[j], clip), a[0], bt[0])
        g[j] = gi
        g[2 * hs + j] = gf
        g[3 * hs + j] = act(cg, _clip(g[3 * hs + j], clip), a[1], bt[1])


@njit(**_JIT)
def _lstm_dir(xw, rt, p, h, c, lens, reverse, cd, a, bt, clip, input_forget, y, d):
    """One direction of LSTM: h and c (batch, hidden) are updated in place."""
    seq, nb, hs = xw.shape[0], h.shape[0], h.shape[1]
    g = np.empty(4 * hs)
    for s in range(seq):
        rec = np.dot(h, rt)
        for b in range(nb):
            if s >= lens[b]:
                continue
            t = step_index(s, lens[b], reverse)
            for j in range(4 * hs):
                g[j] = float(xw[t, b, j]) + rec[b, j]
            _lstm_gates(g, c[b], p, cd[0], cd[1], a, bt, clip, input_forget, hs)
            for j in range(hs):
                cn = g[2 * hs + j] * c[b, j] + g[j] * g[3 * hs + j]
                c[b, j] = cn
                o = act(cd[0], _clip(g[hs + j] + p[hs + j] * c[b, j], clip), a[0], bt[0])
                h[b, j] = o * act(cd[2], float(c[b, j]), a[2], bt[2])
                y[t, d, b, j] = h[b, j]


@njit(**_JIT)
def lstm(x, w, r, b, h0, c0, p, lens, rev, codes, alphas, betas, clip, input_forget):
    """ONNX LSTM -> (Y, Y_h, Y_c); codes/alphas/betas are (dirs, 3) (f, g, h) per direction."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = w.shape[0], r.shape[2]
    check_lens(lens, seq)
    y = np.zeros((seq, nd, nb, hs), x.dtype)
    yh = np.empty((nd, nb, hs), x.dtype)
    yc = np.empty((nd, nb, hs), x.dtype)
    for d in range(nd):
        bias = b[d, :4 * hs] + b[d, 4 * hs:]
        h, c = h0[d].copy(), c0[d].copy()
        _lstm_dir(_xw(x, w[d], bias), np.ascontiguousarray(r[d].T), p[d], h, c, lens,
                  rev or d == 1, codes[d], alphas[d], betas[d], clip, input_forget, y, d)
        yh[d] = h
        yc[d] = c
    return y, yh, yc


@njit(**_JIT)
def swap01(x):
    """A C-contiguous copy of x with its first two axes swapped (layout 1 <-> layout 0)."""
    if x.ndim == 3:
        return np.ascontiguousarray(x.transpose((1, 0, 2)))
    return np.ascontiguousarray(x.transpose((1, 0, 2, 3)))


@njit(**_JIT)
def y_batch_major(y):
    """Y (seq, dirs, batch, hidden) -> (batch, seq, dirs, hidden) for layout 1."""
    return np.ascontiguousarray(y.transpose((2, 0, 1, 3)))


# ----------------------------------------------------------------------------------------
# float32 fast path (constant W and R, batch <= FAST_MAX_BATCH, default activations, no clip,
# AVX-512): lstm_fast and gru_fast
# ----------------------------------------------------------------------------------------
# At batch 1 a step is a GEMV h (hs) @ R^T (hs, G) plus the gates: the recurrent weights are
# read once per step (256 KiB for hidden 128: an L2 stream), so the GEMV is written for that:
# R^T is packed once (at prepare time when it is a constant) into column chunks of 128
# (8 zmm accumulators, [k][128] contiguous) and a tail of 16-column chunks; every gate is
# zero-padded to HP = hidden rounded up to 16, so a gate's vectors line up. The accumulators
# start from the step's row of X @ W^T + biases (one sgemm_packed over all steps, W^T packed
# at prepare time with the same gate padding); the gates are computed on the vectors
# (a Cephes-style float32 exp: ~2 ulp, sigmoid and tanh from it) in the same kernel, with
# h and c kept in padded float32 rows. One compiled loop runs every step of a direction.
from llvmlite import ir as _ir
from numba.core import cgutils as _cg
from numba.extending import intrinsic as _intrinsic

from .parallel import I0
from .sgemm import pack_b, sgemm_packed
from .simd import (f32x16, vadd as _vadd, vbcast as _vbcast, vfma as _vfma,
                   vload as _vload, vmul as _vmul, vstore as _vstore, vsub as _vsub,
                   vzero as _vzero)

FAST_MAX_BATCH = 4
CW = 128          # columns per full GEMV chunk (8 vectors of 16)
_V16 = _ir.VectorType(_ir.FloatType(), 16)
_I16 = _ir.VectorType(_ir.IntType(32), 16)


def _splat16(c):
    return _ir.Constant(_V16, [c] * 16)


def _vexp_ir(builder, x):
    """exp(x) lane-wise: x clamped to [-87.3, 88.3] (NaN kept), 2^n * p(r), Cephes expf."""
    lo, hi = _splat16(-87.33654), _splat16(88.37626)
    x = builder.select(builder.fcmp_ordered("<", x, lo), lo, x)
    x = builder.select(builder.fcmp_ordered(">", x, hi), hi, x)
    floor = _cg.get_or_insert_function(builder.module, _ir.FunctionType(_V16, [_V16]),
                                       "llvm.floor.v16f32")
    fx = builder.call(floor, [builder.fadd(builder.fmul(x, _splat16(1.44269504088896341)),
                                           _splat16(0.5))])
    r = builder.fsub(x, builder.fmul(fx, _splat16(0.693359375)))
    r = builder.fsub(r, builder.fmul(fx, _splat16(-2.12194440e-4)))
    p = _splat16(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
              5.0000001201e-1):
        p = builder.fadd(builder.fmul(p, r), _splat16(c))
    y = builder.fadd(builder.fadd(builder.fmul(p, builder.fmul(r, r)), r), _splat16(1.0))
    n = builder.fptosi(fx, _I16)
    n = builder.shl(builder.add(n, _ir.Constant(_I16, [127] * 16)), _ir.Constant(_I16, [23] * 16))
    return builder.fmul(y, builder.bitcast(n, _V16))


def _vsigmoid_ir(builder, x):
    e = _vexp_ir(builder, builder.fsub(_splat16(0.0), x))
    return builder.fdiv(_splat16(1.0), builder.fadd(_splat16(1.0), e))


@_intrinsic
def _vsigmoid(typingctx, x):
    """1 / (1 + exp(-x)) lane-wise."""
    def codegen(context, builder, sig, args):
        return _vsigmoid_ir(builder, args[0])
    return f32x16(f32x16), codegen


@_intrinsic
def _vtanh(typingctx, x):
    """tanh(x) = 2 sigmoid(2x) - 1 lane-wise (absolute error ~1e-7)."""
    def codegen(context, builder, sig, args):
        s = _vsigmoid_ir(builder, builder.fmul(args[0], _splat16(2.0)))
        return builder.fsub(builder.fmul(s, _splat16(2.0)), _splat16(1.0))
    return f32x16(f32x16), codegen


@njit(**_JIT)
def _gemv(hf, ho, hs, rp, ro, ncol, init, io, out, oo):
    """out[oo + j] = init[io + j] + sum_k hf[ho + k] * R^T[k, j] for j < ncol (a multiple of
    16), R^T packed at rp[ro:] in chunks of CW columns ([k][CW]) then chunks of 16."""
    nfull = ncol // CW
    for jb in range(nfull):
        base = ro + jb * hs * CW
        c = io + jb * CW
        a0, a1, a2, a3 = _vload(init, c), _vload(init, c + 16), _vload(init, c + 32), \
            _vload(init, c + 48)
        a4, a5, a6, a7 = _vload(init, c + 64), _vload(init, c + 80), _vload(init, c + 96), \
            _vload(init, c + 112)
        for k in range(hs):
            hb = _vbcast(hf, ho + k)
            p = base + k * CW
            a0 = _vfma(hb, _vload(rp, p), a0)
            a1 = _vfma(hb, _vload(rp, p + 16), a1)
            a2 = _vfma(hb, _vload(rp, p + 32), a2)
            a3 = _vfma(hb, _vload(rp, p + 48), a3)
            a4 = _vfma(hb, _vload(rp, p + 64), a4)
            a5 = _vfma(hb, _vload(rp, p + 80), a5)
            a6 = _vfma(hb, _vload(rp, p + 96), a6)
            a7 = _vfma(hb, _vload(rp, p + 112), a7)
        o = oo + jb * CW
        _vstore(out, o, a0)
        _vstore(out, o + 16, a1)
        _vstore(out, o + 32, a2)
        _vstore(out, o + 48, a3)
        _vstore(out, o + 64, a4)
        _vstore(out, o + 80, a5)
        _vstore(out, o + 96, a6)
        _vstore(out, o + 112, a7)
    base0 = ro + nfull * hs * CW
    for v in range((ncol - nfull * CW) // 16):
        base = base0 + v * hs * 16
        c = io + nfull * CW + v * 16
        a0 = _vload(init, c)
        a1 = _vzero()
        k = 0
        while k + 1 < hs:
            a0 = _vfma(_vbcast(hf, ho + k), _vload(rp, base + k * 16), a0)
            a1 = _vfma(_vbcast(hf, ho + k + 1), _vload(rp, base + k * 16 + 16), a1)
            k += 2
        if k < hs:
            a0 = _vfma(_vbcast(hf, ho + k), _vload(rp, base + k * 16), a0)
        _vstore(out, oo + nfull * CW + v * 16, _vadd(a0, a1))


def padded_hidden(hs):
    return -(-hs // 16) * 16


def aligned(a):
    """A float32 C-contiguous copy of `a` whose data starts on a 64-byte boundary (numpy's
    arrays start 16 bytes apart; 64-byte vector streams off a line run slower)."""
    buf = np.empty(a.size + 16, np.float32)
    o = (-(buf.ctypes.data // 4)) % 16
    out = buf[o:o + a.size].reshape(a.shape)
    out[...] = a
    return out


def pack_w_np(w, gates):
    """W (dirs, gates*hs, input) -> (dirs, panels, input, 32): W^T with every gate padded to
    HP columns, packed for sgemm_packed (so X @ W^T comes out in the padded gate layout)."""
    w = np.asarray(w, np.float32)
    nd, ni = w.shape[0], w.shape[2]
    hs = w.shape[1] // gates
    hp = padded_hidden(hs)
    out = []
    for d in range(nd):
        wt = np.zeros((ni, gates * hp), np.float32)
        for g in range(gates):
            wt[:, g * hp:g * hp + hs] = w[d, g * hs:(g + 1) * hs, :].T
        out.append(pack_b(wt))
    return aligned(np.stack(out))


def pack_r_np(r, gates, seg):
    """R (dirs, gates*hs, hs) -> float32 (dirs, hs * gates * HP): R^T with every gate padded
    to HP columns, the first `seg` gates and the others packed as two separate column ranges
    (each one chunks of CW columns then of 16, as _gemv reads them; the second starts at
    seg * HP * hs). Prepare time, numpy."""
    r = np.asarray(r, np.float32)
    nd, hs = r.shape[0], r.shape[2]
    hp = padded_hidden(hs)
    out = []
    for d in range(nd):
        rt = np.zeros((hs, gates * hp), np.float32)
        for g in range(gates):
            rt[:, g * hp:g * hp + hs] = r[d, g * hs:(g + 1) * hs, :].T
        parts = []
        for lo, hi in ((0, seg * hp), (seg * hp, gates * hp)):
            cols = rt[:, lo:hi]
            nfull = (hi - lo) // CW
            full = cols[:, :nfull * CW].reshape(hs, nfull, CW).transpose(1, 0, 2)
            tail = cols[:, nfull * CW:].reshape(hs, -1, 16).transpose(1, 0, 2)
            parts += [full.ravel(), tail.ravel()]
        out.append(np.concatenate(parts))
    return aligned(np.stack(out))


@njit(**_JIT)
def _xw_padded(x, wp, bias, gates, hs):
    """(seq * batch, gates * HP) = X @ W^T + bias with every gate padded to HP columns;
    wp = pack_w_np(W)[d]."""
    seq, nb, ni = x.shape
    hp = -(-hs // 16) * 16
    bp = np.zeros(gates * hp, np.float32)
    for g in range(gates):
        for j in range(hs):
            bp[g * hp + j] = bias[g * hs + j]
    x2 = np.ascontiguousarray(x.reshape((seq * nb, ni))).astype(np.float32)
    return sgemm_packed(x2, wp, gates * hp, bp, I0)   # int64: a literal 0 compiles apart


@njit(**_JIT)
def lstm_fast(x, wp, rp, b, h0, c0, p, lens, rev):
    """ONNX LSTM with the default activations (sigmoid, tanh, tanh), no clip, no
    input_forget, float32; wp = pack_w_np(W, 4), rp = pack_r_np(R, 4, 4). -> (Y, Y_h, Y_c)."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = wp.shape[0], h0.shape[2]
    hp = -(-hs // 16) * 16
    ncol = 4 * hp
    check_lens(lens, seq)
    y = np.zeros((seq, nd, nb, hs), np.float32)
    yh = np.empty((nd, nb, hs), np.float32)
    yc = np.empty((nd, nb, hs), np.float32)
    g = np.empty(ncol, np.float32)
    pp = np.zeros(3 * hp, np.float32)
    h = np.zeros((nb, hp), np.float32)
    c = np.zeros((nb, hp), np.float32)
    hf, cf = h.ravel(), c.ravel()
    for d in range(nd):
        xw = _xw_padded(x, wp[d], b[d, :4 * hs] + b[d, 4 * hs:], 4, hs).ravel()
        for q in range(3):
            for j in range(hs):
                pp[q * hp + j] = p[d, q * hs + j]
        for bb in range(nb):
            for j in range(hs):
                h[bb, j] = h0[d, bb, j]
                c[bb, j] = c0[d, bb, j]
        rpd = rp[d]
        reverse = rev or d == 1
        for s in range(seq):
            for bb in range(nb):
                if s >= lens[bb]:
                    continue
                t = step_index(s, lens[bb], reverse)
                _gemv(hf, bb * hp, hs, rpd, 0, ncol, xw, (t * nb + bb) * ncol, g, 0)
                ho = bb * hp
                for v in range(hp // 16):
                    o = v * 16
                    cv = _vload(cf, ho + o)
                    gi = _vsigmoid(_vfma(_vload(pp, o), cv, _vload(g, o)))
                    gf = _vsigmoid(_vfma(_vload(pp, 2 * hp + o), cv, _vload(g, 2 * hp + o)))
                    gc = _vtanh(_vload(g, 3 * hp + o))
                    cv = _vfma(gf, cv, _vmul(gi, gc))
                    go = _vsigmoid(_vfma(_vload(pp, hp + o), cv, _vload(g, hp + o)))
                    _vstore(cf, ho + o, cv)
                    _vstore(hf, ho + o, _vmul(go, _vtanh(cv)))
                for j in range(hs):
                    y[t, d, bb, j] = h[bb, j]
        for bb in range(nb):
            for j in range(hs):
                yh[d, bb, j] = h[bb, j]
                yc[d, bb, j] = c[bb, j]
    return y, yh, yc


@njit(**_JIT)
def gru_fast(x, wp, rp, b, h0, lens, rev, lbr):
    """ONNX GRU with the default activations (sigmoid, tanh), no clip, float32;
    wp = pack_w_np(W, 3), rp = pack_r_np(R, 3, 3 if lbr else 2) (gates z, r, h). -> (Y, Y_h)."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = wp.shape[0], h0.shape[2]
    hp = -(-hs // 16) * 16
    ncol = 3 * hp
    check_lens(lens, seq)
    y = np.zeros((seq, nd, nb, hs), np.float32)
    yh = np.empty((nd, nb, hs), np.float32)
    g = np.empty(ncol, np.float32)
    rh = np.empty(hp, np.float32)
    init = np.zeros(ncol, np.float32)
    h = np.zeros((nb, hp), np.float32)
    hf = h.ravel()
    for d in range(nd):
        # z and r: X W^T + Wb + Rb; h: X W^T + Wb, and Rb_h inside r * (.) when lbr
        bias = b[d, :3 * hs].copy()
        bias[:2 * hs] += b[d, 3 * hs:5 * hs]
        if not lbr:
            bias[2 * hs:] += b[d, 5 * hs:]
        xw = _xw_padded(x, wp[d], bias, 3, hs).ravel()
        rbh = np.zeros(hp, np.float32)
        for j in range(hs):
            rbh[j] = b[d, 5 * hs + j] if lbr else 0.0
        for bb in range(nb):
            for j in range(hs):
                h[bb, j] = h0[d, bb, j]
        rpd = rp[d]
        reverse = rev or d == 1
        for s in range(seq):
            for bb in range(nb):
                if s >= lens[bb]:
                    continue
                t = step_index(s, lens[bb], reverse)
                row = (t * nb + bb) * ncol
                ho = bb * hp
                if lbr:
                    # one GEMV over all three gates: z, r from xw, h's from Rb_h alone
                    for j in range(2 * hp):
                        init[j] = xw[row + j]
                    for j in range(hp):
                        init[2 * hp + j] = rbh[j]
                    _gemv(hf, ho, hs, rpd, 0, ncol, init, 0, g, 0)
                    for v in range(hp // 16):
                        o = v * 16
                        z = _vsigmoid(_vload(g, o))
                        r = _vsigmoid(_vload(g, hp + o))
                        n = _vtanh(_vfma(r, _vload(g, 2 * hp + o), _vload(xw, row + 2 * hp + o)))
                        hv = _vload(hf, ho + o)
                        _vstore(hf, ho + o, _vfma(z, _vsub(hv, n), n))
                else:
                    _gemv(hf, ho, hs, rpd, 0, 2 * hp, xw, row, g, 0)
                    for v in range(hp // 16):
                        o = v * 16
                        z = _vsigmoid(_vload(g, o))
                        r = _vsigmoid(_vload(g, hp + o))
                        _vstore(g, o, z)
                        _vstore(rh, o, _vmul(r, _vload(hf, ho + o)))
                    _gemv(rh, 0, hs, rpd, 2 * hp * hs, hp, xw, row + 2 * hp, g, 2 * hp)
                    for v in range(hp // 16):
                        o = v * 16
                        z = _vload(g, o)
                        n = _vtanh(_vload(g, 2 * hp + o))
                        hv = _vload(hf, ho + o)
                        _vstore(hf, ho + o, _vfma(z, _vsub(hv, n), n))
                for j in range(hs):
                    y[t, d, bb, j] = h[bb, j]
        for bb in range(nb):
            for j in range(hs):
                yh[d, bb, j] = h[bb, j]
    return y, yh
