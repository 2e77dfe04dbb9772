"""Data-movement kernels: copies along one axis through an index map (Pad, Tile, Compress)."""
import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def take_axis(x3, src, fill):
    """y[o, j, i] = x3[o, src[j], i], or `fill` where src[j] < 0; x3 is (outer, axis, inner)."""
    outer, n_axis, inner = x3.shape
    n = src.shape[0]
    for j in range(n):
        if src[j] >= n_axis:
            raise IndexError("take_axis: index map out of range")
    y = np.empty((outer, n, inner), x3.dtype)
    for o in range(outer):
        for j in range(n):
            s = src[j]
            if s < 0:
                for i in range(inner):
                    y[o, j, i] = fill
            else:
                for i in range(inner):
                    y[o, j, i] = x3[o, s, i]
    return y


@njit(**_JIT)
def trilu(x3, k, upper):
    """ONNX Trilu on x3 = (batch, N, M): keep j - i >= k (upper) or j - i <= k (lower), else 0."""
    y = np.zeros_like(x3)
    for b in range(x3.shape[0]):
        for i in range(x3.shape[1]):
            for j in range(x3.shape[2]):
                if (j - i >= k) if upper else (j - i <= k):
                    y[b, i, j] = x3[b, i, j]
    return y


@njit(**_JIT)
def dropout_inference(x, training_mode, ratio):
    """A copy of x when not training or ratio is 0; training with dropping is refused at run time."""
    if training_mode and ratio != 0:
        raise ValueError("Dropout: training mode with a non-zero ratio is not supported")
    return x.copy()
