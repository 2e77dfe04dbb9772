"""RNN, GRU and LSTM kernels (ONNX semantics, layout 0: X is (seq, batch, input)).

The lowering (ops/rnn.py) fills every optional input (zeros, full sequence lengths) and maps the
activation names to the integer codes below, so one compiled kernel serves every model.
Activation k of direction d is `codes[d * per_dir + k]` with parameters `alphas[...]`, `betas[...]`.
X @ W^T is one GEMM over all steps; each step adds H @ R^T (BLAS) and applies the gates.
"""
import math

import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")

# activation codes (ops/rnn.py maps the ONNX names onto these)
RELU, TANH, SIGMOID, AFFINE, LEAKY_RELU, THRESHOLDED_RELU = 0, 1, 2, 3, 4, 5
SCALED_TANH, HARD_SIGMOID, ELU, SOFTSIGN, SOFTPLUS = 6, 7, 8, 9, 10


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _clip(x, c):
    return min(max(x, -c), c)


@njit(**_JIT)
def _check_lens(lens, seq):
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


@njit(cache=True, inline="always")
def _time(s, n, reverse):
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
            t = _time(s, lens[b], reverse)
            for j in range(hs):
                v = _clip(float(xw[t, b, j]) + rec[b, j], clip)
                h[b, j] = act(code, v, alpha, beta)
                y[t, d, b, j] = h[b, j]


@njit(**_JIT)
def rnn(x, w, r, b, h0, lens, rev, codes, alphas, betas, clip):
    """ONNX RNN -> (Y (seq, dirs, batch, hidden), Y_h (dirs, batch, hidden))."""
    seq, nb = x.shape[0], x.shape[1]
    nd, hs = w.shape[0], r.shape[2]
    _check_lens(lens, seq)
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
            t = _time(s, lens[b], reverse) if s < lens[b] else 0
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
        t = _time(s, lens[b], reverse)
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
    _check_lens(lens, seq)
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
            t = _time(s, lens[b], reverse)
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
    _check_lens(lens, seq)
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
