"""Kernels of the ops that draw random numbers (Dropout in training mode).

Numba's np.random is numpy's legacy Mersenne Twister: np.random.seed(s) followed by
np.random.uniform draws exactly what numpy.random.RandomState(s).uniform does.
"""
import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def dropout(x, training, ratio, seed, seeded):
    """Dropout: (x scaled by 1 / (1 - ratio) where a uniform draw >= ratio, else 0; the mask).
    Not training, or ratio 0: (a copy of x, all True)."""
    mask = np.ones(x.shape, np.bool_)
    if not training or ratio == 0:
        return x.copy(), mask
    if not 0 <= ratio < 1:
        raise ValueError("Dropout: ratio must be in [0, 1)")
    if seeded:
        np.random.seed(seed)
    u = np.random.uniform(0.0, 1.0, x.shape)
    scale = 1.0 / (1.0 - ratio)
    y = np.empty_like(x)
    xf, yf = np.ascontiguousarray(x).reshape(-1), y.reshape(-1)
    uf, mf = u.reshape(-1), mask.reshape(-1)
    for i in range(xf.size):
        keep = uf[i] >= ratio
        mf[i] = keep
        yf[i] = xf[i] * scale if keep else 0.0
    return y, mask
