"""Kernels of the ops that draw random numbers: Dropout in training mode, RandomUniform(Like),
RandomNormal(Like), Bernoulli.

Numba's np.random is numpy's legacy Mersenne Twister: np.random.seed(s) followed by
np.random.uniform draws exactly what numpy.random.RandomState(s).uniform does.
"""
import numpy as np
from numba import njit

from . import JIT as _JIT


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



@njit(**_JIT)
def uniform(shape, seed, seeded):
    """float64 uniform [0, 1) draws (numpy's RandomState.rand when seeded)."""
    if seeded:
        np.random.seed(seed)
    return np.random.random(shape)


@njit(**_JIT)
def normal(shape, seed, seeded):
    """float64 standard normal draws (numpy's RandomState.randn when seeded)."""
    if seeded:
        np.random.seed(seed)
    return np.random.standard_normal(shape)


@njit(**_JIT)
def bernoulli(p, seed, seeded):
    """float64 0/1 draws, 1 with probability p, each drawn as numpy's binomial(1, p)."""
    if seeded:
        np.random.seed(seed)
    out = np.empty(p.shape, np.float64)
    pf, of = np.ascontiguousarray(p).reshape(-1), out.reshape(-1)
    for i in range(pf.size):
        q = float(pf[i])
        if not 0.0 <= q <= 1.0:
            raise ValueError("Bernoulli: a probability is outside [0, 1]")
        of[i] = np.random.binomial(1, q)
    return out
