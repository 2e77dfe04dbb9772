"""Training-mode kernels: BatchNormalization with batch statistics."""
import math

import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def batchnorm_training(x, scale, bias, mean, var, momentum, eps):
    """x (N, C, M): y normalized with the batch's per-channel mean and (population) variance;
    the running statistics updated as mean * momentum + batch * (1 - momentum).
    -> (y, running mean, running var); statistics in float64."""
    n, c, m = x.shape
    y = np.empty_like(x)
    out_mean = np.empty(c, mean.dtype)
    out_var = np.empty(c, var.dtype)
    count = n * m
    for ch in range(c):
        s = 0.0
        for i in range(n):
            for j in range(m):
                s += x[i, ch, j]
        mu = s / count
        s2 = 0.0
        for i in range(n):
            for j in range(m):
                d = x[i, ch, j] - mu
                s2 += d * d
        v = s2 / count
        a = scale[ch] / math.sqrt(v + eps)
        for i in range(n):
            for j in range(m):
                y[i, ch, j] = (x[i, ch, j] - mu) * a + bias[ch]
        out_mean[ch] = mean[ch] * momentum + mu * (1.0 - momentum)
        out_var[ch] = var[ch] * momentum + v * (1.0 - momentum)
    return y, out_mean, out_var
