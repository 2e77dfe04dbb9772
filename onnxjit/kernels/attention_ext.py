"""Kernels of the newer sequence ops: LinearAttention, CausalConvWithState, FlexAttention.

float16/bfloat16 tensors arrive as float32 arrays (ir.NARROW_FLOATS); results come back in the
array dtype of the first input, except where a caller names another.
"""
import math

import numpy as np
from numba import njit

from .epilogue import copy_into

from . import JIT as _JIT


@njit(**_JIT)
def linear_attention(q, k, v, past, decay, beta, hq, hkv, scale):
    """LinearAttention on packed (B, T, H*D) q/k/v -> (output (B, T, hq*dv), present state
    (B, hkv, dk, dv)). The recurrence runs token by token, one (dk, dv) state per kv head,
    shared by hq // hkv query heads. decay: (B, T, hkv) or (B, T, hkv*dk), log-space;
    beta: (B, T, hkv) or (B, T, 1)."""
    nb, nt = q.shape[0], q.shape[1]
    dk = q.shape[2] // hq
    dv = v.shape[2] // hkv
    group = hq // hkv
    out = np.empty((nb, nt, hq * dv), q.dtype)
    state = np.zeros((nb, hkv, dk, dv), q.dtype)
    if past is not None:
        copy_into(state, past)
    u = np.empty(dv, q.dtype)
    for b in range(nb):
        for h in range(hkv):
            s = state[b, h]
            for t in range(nt):
                if decay is not None:
                    if decay.shape[2] == hkv:
                        e = math.exp(decay[b, t, h])
                        for d in range(dk):
                            for m in range(dv):
                                s[d, m] *= e
                    else:
                        for d in range(dk):
                            e = math.exp(decay[b, t, h * dk + d])
                            for m in range(dv):
                                s[d, m] *= e
                for m in range(dv):
                    u[m] = v[b, t, h * dv + m]
                if beta is not None:
                    bt = beta[b, t, h if beta.shape[2] > 1 else 0]
                    for m in range(dv):
                        r = 0.0
                        for d in range(dk):
                            r += s[d, m] * k[b, t, h * dk + d]
                        u[m] = bt * (u[m] - r)
                for d in range(dk):
                    kd = k[b, t, h * dk + d]
                    for m in range(dv):
                        s[d, m] += kd * u[m]
                for j in range(group):
                    qh = h * group + j
                    for m in range(dv):
                        acc = 0.0
                        for d in range(dk):
                            acc += q[b, t, qh * dk + d] * s[d, m]
                        out[b, t, qh * dv + m] = scale * acc
    return out, state


@njit(**_JIT)
def causal_conv_with_state(x, w, bias, past, silu):
    """CausalConvWithState: depthwise causal conv of x (B, C, L) by w (C, 1, K) after the carried
    (B, C, K-1) state (zeros when None), plus bias, optionally SiLU -> (output, present state)."""
    nb, nc, nl = x.shape
    kk = w.shape[2]
    out = np.empty((nb, nc, nl), x.dtype)
    present = np.empty((nb, nc, kk - 1), x.dtype)
    padded = np.zeros(nl + kk - 1, x.dtype)
    for b in range(nb):
        for c in range(nc):
            if past is not None:
                for j in range(kk - 1):
                    padded[j] = past[b, c, j]
            else:
                padded[:kk - 1] = 0
            for j in range(nl):
                padded[kk - 1 + j] = x[b, c, j]
            for i in range(nl):
                acc = 0.0
                if bias is not None:
                    acc = float(bias[c])
                for j in range(kk):
                    acc += w[c, 0, j] * padded[i + j]
                if silu:
                    acc = acc / (1.0 + math.exp(-acc))
                out[b, c, i] = acc
            for j in range(kk - 1):
                present[b, c, j] = padded[nl + j]
    return out, present


@njit(**_JIT)
def flex_scores(q, k, sscale, dtype_like):
    """(Q * sqrt(scale)) @ (K * sqrt(scale))^T per head -> (B, Hq, L, S) in dtype_like's dtype;
    query head h reads kv head h // (Hq // Hkv)."""
    nb, hq, nl, e = q.shape
    hkv, ns = k.shape[1], k.shape[2]
    rep = hq // hkv
    out = np.empty((nb, hq, nl, ns), dtype_like.dtype)
    qs, ks = np.empty((nl, e), q.dtype), np.empty((ns, e), q.dtype)
    for b in range(nb):
        for h in range(hq):
            copy_into(qs, q[b, h])
            qs *= sscale
            copy_into(ks, k[b, h // rep])
            ks *= sscale
            out[b, h] = np.dot(qs, ks.T)
    return out


@njit(**_JIT)
def softmax_last(x):
    """Softmax over the last axis of a 4-D array (numpy's max: a NaN row stays NaN)."""
    out = np.empty_like(x)
    n0, n1, n2, n3 = x.shape
    for a in range(n0):
        for b in range(n1):
            for i in range(n2):
                m = -np.inf
                for j in range(n3):
                    m = max(m, x[a, b, i, j])
                s = 0.0
                for j in range(n3):
                    ex = math.exp(x[a, b, i, j] - m)
                    out[a, b, i, j] = ex
                    s += ex
                for j in range(n3):
                    out[a, b, i, j] /= s
    return out


@njit(**_JIT)
def flex_output(p, v, dtype_like):
    """probs (B, Hq, L, S) @ V (B, Hkv, S, Ev) per head -> (B, Hq, L, Ev) in dtype_like's dtype."""
    nb, hq, nl, ns = p.shape
    hkv, ev = v.shape[1], v.shape[3]
    rep = hq // hkv
    out = np.empty((nb, hq, nl, ev), dtype_like.dtype)
    vs = np.empty((ns, ev), p.dtype)
    pc = np.empty((nl, ns), p.dtype)
    for b in range(nb):
        for h in range(hq):
            copy_into(vs, v[b, h // rep])
            copy_into(pc, p[b, h])
            out[b, h] = np.dot(pc, vs)
    return out
