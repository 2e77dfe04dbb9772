"""Signal kernels: a direct DFT (Numba has no np.fft), its real inverse, and STFT.

Complex tensors are ONNX-style: a last dim of 2 (real, imaginary) or 1 (real only). Sums run
in float64 over a twiddle table; the cost is O(n^2) per line, fine for window-sized transforms.
"""
import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def _twiddles(n):
    """cos and sin of 2*pi*j/n for j < n, exact (0 and +-1) at the quarter turns: cos(pi) is
    -1 but sin(pi) would be 1.2e-16, which turns an inf sample times a zero into a +-inf of
    arbitrary sign instead of NaN (seed 7 case 8020)."""
    j = np.arange(n).astype(np.float64)
    angle = (2.0 * np.pi / n) * j
    cs, sn = np.cos(angle), np.sin(angle)
    if n % 4 == 0:
        for q in range(4):
            cs[q * n // 4] = (1.0, 0.0, -1.0, 0.0)[q]
            sn[q * n // 4] = (0.0, 1.0, 0.0, -1.0)[q]
    elif n % 2 == 0:
        cs[n // 2], sn[n // 2] = -1.0, 0.0
    return cs, sn


@njit(**_JIT)
def _dft_line(re, im, m, n, cs, sn, sign, bins, out_re, out_im):
    """out[k] = sum_{t < m} (re + i im)[t] * exp(sign * 2 pi i k t / n) for k < bins."""
    for k in range(bins):
        sr = 0.0
        si = 0.0
        j = 0
        for t in range(m):
            c = cs[j]
            s = sign * sn[j]
            sr += re[t] * c - im[t] * s
            si += re[t] * s + im[t] * c
            j += k
            if j >= n:
                j %= n
        out_re[k] = sr
        out_im[k] = si


@njit(**_JIT)
def dft(x, n, inverse, bins):
    """x (P, L, Q, C) with C 1 (real) or 2 (complex) -> (P, bins, Q, 2): length-n DFT along L
    (input truncated or zero-padded to n), scaled by 1/n when inverse."""
    P, L, Q, C = x.shape
    cs, sn = _twiddles(n)
    m = min(L, n)
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / n if inverse else 1.0
    y = np.empty((P, bins, Q, 2), x.dtype)
    re, im = np.zeros(m), np.zeros(m)
    out_re, out_im = np.empty(bins), np.empty(bins)
    for p in range(P):
        for q in range(Q):
            for t in range(m):
                re[t] = x[p, t, q, 0]
                im[t] = x[p, t, q, 1] if C == 2 else 0.0
            _dft_line(re, im, m, n, cs, sn, sign, bins, out_re, out_im)
            for k in range(bins):
                y[p, k, q, 0] = out_re[k] * scale
                y[p, k, q, 1] = out_im[k] * scale
    return y


@njit(**_JIT)
def irfft(x, n):
    """x (P, M, Q, C) one-sided spectrum -> (P, n, Q, 1) real signal, as np.fft.irfft: only the
    real parts of the DC and (n even) Nyquist bins count, the other bins count twice."""
    P, M, Q, C = x.shape
    cs, sn = _twiddles(n)
    h = min(M, n // 2 + 1)
    y = np.empty((P, n, Q, 1), x.dtype)
    for p in range(P):
        for q in range(Q):
            for t in range(n):
                acc = np.float64(x[p, 0, q, 0])
                j = 0
                for k in range(1, h):
                    j += t
                    if j >= n:
                        j %= n
                    xr = np.float64(x[p, k, q, 0])
                    if 2 * k == n:
                        acc += xr * cs[j]
                        continue
                    xi = np.float64(x[p, k, q, 1]) if C == 2 else 0.0
                    acc += 2.0 * (xr * cs[j] - xi * sn[j])
                y[p, t, q, 0] = acc / n
    return y


@njit(**_JIT)
def stft(x, step, frames, window, n, bins):
    """x (B, L, C) -> (B, frames, bins, 2): the length-n DFT of each window-weighted frame
    x[b, f*step : f*step + len(window)] (zero past the end of the signal)."""
    B, L, C = x.shape
    w = window.shape[0]
    cs, sn = _twiddles(n)
    m = min(w, n)
    y = np.empty((B, frames, bins, 2), x.dtype)
    re, im = np.zeros(m), np.zeros(m)
    out_re, out_im = np.empty(bins), np.empty(bins)
    for b in range(B):
        for f in range(frames):
            for t in range(m):
                s = f * step + t
                inside = s < L
                re[t] = x[b, s, 0] * window[t] if inside else 0.0
                im[t] = x[b, s, 1] * window[t] if inside and C == 2 else 0.0
            _dft_line(re, im, m, n, cs, sn, -1.0, bins, out_re, out_im)
            for k in range(bins):
                y[b, f, k, 0] = out_re[k]
                y[b, f, k, 1] = out_im[k]
    return y
