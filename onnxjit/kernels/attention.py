"""Attention, RotaryEmbedding and loss kernels.

`attention` takes (batch, heads, seq, head_size) tensors and an optional additive float mask
already broadcast-ready as rank 4 (a dim of 1 broadcasts; a last dim shorter than the key
length is padded with -inf). Scores are computed per head with BLAS; the bias row (mask, causal,
sliding window, key padding) and the softmax run in float64.
"""
import math

import numpy as np
from numba import njit

from .epilogue import copy_into

from . import JIT as _JIT


@njit(**_JIT)
def to_heads(x, heads):
    """(batch, seq, heads * d) -> C-contiguous (batch, heads, seq, d)."""
    nb, s, hd = x.shape
    return np.ascontiguousarray(x.reshape((nb, s, heads, hd // heads)).transpose((0, 2, 1, 3)))


@njit(**_JIT)
def from_heads(y):
    """(batch, heads, seq, d) -> C-contiguous (batch, seq, heads * d)."""
    nb, h, s, d = y.shape
    return np.ascontiguousarray(y.transpose((0, 2, 1, 3))).reshape((nb, s, h * d))


@njit(**_JIT)
def concat_seq(past, cur):
    """Concatenate two (batch, heads, seq, d) tensors along seq (the kv cache)."""
    return np.concatenate((past, cur), axis=2)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def _bcast(i, n):
    return i if n > 1 else 0


@njit(**_JIT)
def _bias_row(row, mask, nonpad, b, h, i, sq, past, causal, left, right):
    """The additive bias of query i against every key; returns True if every key is masked."""
    skv = row.shape[0]
    off = past
    if nonpad is not None:
        off = nonpad[b] - sq
    allmasked = True
    for j in range(skv):
        v = 0.0
        if mask is not None:
            ms = mask.shape
            if j < ms[3]:
                v = float(mask[_bcast(b, ms[0]), _bcast(h, ms[1]), _bcast(i, ms[2]), j])
            else:
                v = -np.inf
        ok = not (causal and j > i + off)
        if left >= 0 and i + off - j > left:
            ok = False
        if right >= 0 and j - (i + off) > right:
            ok = False
        if nonpad is not None and j >= nonpad[b]:
            ok = False
        row[j] = v if ok else v - np.inf
        allmasked = allmasked and row[j] == -np.inf
    return allmasked


@njit(**_JIT)
def _softmax_into(x, out):
    """out = softmax(x) (a row of -inf gives zeros; a NaN gives NaNs, like numpy's max)."""
    m = -np.inf
    for j in range(x.shape[0]):
        if x[j] != x[j]:
            m = x[j]
            break
        m = max(m, x[j])
    if m == -np.inf:
        out[:] = 0
        return
    s = 0.0
    for j in range(x.shape[0]):
        x[j] = math.exp(x[j] - m)
        s += x[j]
    for j in range(x.shape[0]):
        out[j] = x[j] / s


@njit(**_JIT)
def _score_row(sc, qk, x, bias, b, h, i, softcap, mode, want_qk):
    """x = (softcapped) scores of query i plus its bias; records qk_matmul_output modes 0-2."""
    for j in range(x.shape[0]):
        s = float(sc[i, j])
        if softcap > 0:
            s = softcap * math.tanh(s / softcap)
        x[j] = s + bias[j]
        if want_qk and mode <= 1:
            qk[b, h, i, j] = s
        elif want_qk and mode == 2:
            qk[b, h, i, j] = x[j]


@njit(**_JIT)
def attention(q, k, v, mask, nonpad, past, sscale, causal, softcap, left, right, mode, want_qk):
    """ONNX Attention on (batch, heads, seq, d) tensors -> (Y, qk_matmul_output or empty).

    `sscale` is sqrt(scale) in q's dtype: ONNX scales Q and K by it before their product.
    """
    nb, hq, sq, d = q.shape
    hkv, skv, dv = k.shape[1], k.shape[2], v.shape[3]
    rep = hq // hkv
    y = np.empty((nb, hq, sq, dv), q.dtype)
    qk = np.empty((nb, hq, sq, skv) if want_qk else (0, 0, 0, 0), q.dtype)
    qs, ks = np.empty((sq, d), q.dtype), np.empty((skv, d), q.dtype)
    bias, x, prow = np.empty(skv), np.empty(skv), np.empty(skv)
    p = np.empty((sq, skv), q.dtype)
    for b in range(nb):
        for h in range(hq):
            g = h // rep   # grouped-query attention: each kv head serves `rep` query heads
            copy_into(qs, q[b, h])
            qs *= sscale
            copy_into(ks, k[b, g])
            ks *= sscale
            sc = np.dot(qs, ks.T)
            for i in range(sq):
                allmasked = _bias_row(bias, mask, nonpad, b, h, i, sq, past, causal, left, right)
                _score_row(sc, qk, x, bias, b, h, i, softcap, mode, want_qk)
                _softmax_into(x, prow)
                if allmasked:   # no attendable key: the row is zero, whatever the scores
                    prow[:] = 0
                p[i] = prow
                if want_qk and mode == 3:
                    qk[b, h, i] = prow
            y[b, h] = np.dot(p, np.ascontiguousarray(v[b, g]))
    return y, qk


@njit(**_JIT)
def rotary(x, cos, sin, pos, bhsd, interleaved, rdim):
    """RotaryEmbedding of x (batch, heads, seq, d) if bhsd else (batch, seq, heads, d).

    cos/sin are (positions, rdim / 2) tables read at pos[b, s].
    """
    out = x.copy()
    nb = x.shape[0]
    nh, ns = (x.shape[1], x.shape[2]) if bhsd else (x.shape[2], x.shape[1])
    half = rdim // 2
    for b in range(nb):
        for s in range(ns):
            t = pos[b, s]
            if t < 0 or t >= cos.shape[0]:
                raise IndexError("RotaryEmbedding: position id out of range")
            for h in range(nh):
                row = x[b, h, s] if bhsd else x[b, s, h]
                orow = out[b, h, s] if bhsd else out[b, s, h]
                for j in range(half):
                    i1, i2 = (2 * j, 2 * j + 1) if interleaved else (j, j + half)
                    c, sn = cos[t, j], sin[t, j]
                    orow[i1] = c * row[i1] - sn * row[i2]
                    orow[i2] = sn * row[i1] + c * row[i2]
    return out


@njit(**_JIT)
def _log_softmax_axis1(x):
    """log(softmax(x)) along axis 1 of (n, c, d), as onnx's reference writes it."""
    out = np.empty_like(x)
    n, c, dd = x.shape
    for i in range(n):
        for d in range(dd):
            m = -np.inf
            for j in range(c):
                m = max(m, x[i, j, d])
            s = 0.0
            for j in range(c):
                s += math.exp(x[i, j, d] - m)
            for j in range(c):
                out[i, j, d] = math.log(math.exp(x[i, j, d] - m) / s)
    return out


@njit(**_JIT)
def nll_loss(x, target, weight, ignore_index, has_ignore, reduction):
    """NegativeLogLikelihoodLoss of x (n, c, d), target (n, d) -> per-element loss (n, d) when
    reduction is 0 (none), else a (1, 1) array (1 sum, 2 mean)."""
    n, c, dd = x.shape
    loss = np.zeros((n, dd), x.dtype)
    wsum, lsum = 0.0, 0.0
    for i in range(n):
        for d in range(dd):
            t = target[i, d]
            if has_ignore and t == ignore_index:
                continue
            if t < 0 or t >= c:
                raise IndexError("NegativeLogLikelihoodLoss: target index out of range")
            w = 1.0 if weight is None else float(weight[t])
            loss[i, d] = -x[i, t, d] * w
            wsum += w
            lsum += loss[i, d]
    if reduction == 0:
        return loss
    out = np.empty((1, 1), x.dtype)
    out[0, 0] = lsum if reduction == 1 else lsum / wsum
    return out


@njit(**_JIT)
def sce_loss(x, target, weight, ignore_index, has_ignore, reduction):
    """SoftmaxCrossEntropyLoss: (loss as nll_loss returns it, log_prob (n, c, d))."""
    lp = _log_softmax_axis1(x)
    return nll_loss(lp, target, weight, ignore_index, has_ignore, reduction), lp


@njit(**_JIT)
def sce_loss_only(x, target, weight, ignore_index, has_ignore, reduction):
    """SoftmaxCrossEntropyLoss without the log_prob output."""
    return nll_loss(_log_softmax_axis1(x), target, weight, ignore_index, has_ignore, reduction)
