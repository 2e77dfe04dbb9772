"""Index-taking kernels (Gather, GatherElements, GatherND, OneHot): every index is bounds-checked."""
import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def gather(x3, idx):
    """ONNX Gather on x3 = (outer, axis, inner) with flat indices -> (outer, len(idx), inner)."""
    outer, n_axis, inner = x3.shape
    m = idx.shape[0]
    for j in range(m):
        if idx[j] < -n_axis or idx[j] >= n_axis:
            raise IndexError("Gather: index out of range")
    y = np.empty((outer, m, inner), x3.dtype)
    for o in range(outer):
        for j in range(m):
            k = idx[j]
            if k < 0:
                k += n_axis
            for i in range(inner):
                y[o, j, i] = x3[o, k, i]
    return y


@njit(**_JIT)
def gather_elements(x3, idx3):
    """ONNX GatherElements on (outer, axis, inner) views: y[o, j, i] = x3[o, idx3[o, j, i], i]."""
    outer, n_axis, inner = x3.shape
    m = idx3.shape[1]
    y = np.empty((outer, m, inner), x3.dtype)
    for o in range(outer):
        for j in range(m):
            for i in range(inner):
                k = idx3[o, j, i]
                if k < -n_axis or k >= n_axis:
                    raise IndexError("GatherElements: index out of range")
                if k < 0:
                    k += n_axis
                y[o, j, i] = x3[o, k, i]
    return y


@njit(**_JIT)
def gather_nd(x3, idx3, dims):
    """ONNX GatherND: x3 = (batch, prod(dims), inner), idx3 = (batch, n, len(dims))."""
    batch, n, m = idx3.shape
    inner = x3.shape[2]
    y = np.empty((batch, n, inner), x3.dtype)
    for b in range(batch):
        for j in range(n):
            off = 0
            for d in range(m):
                k = idx3[b, j, d]
                if k < -dims[d] or k >= dims[d]:
                    raise IndexError("GatherND: index out of range")
                if k < 0:
                    k += dims[d]
                off = off * dims[d] + k
            for i in range(inner):
                y[b, j, i] = x3[b, off, i]
    return y


@njit(**_JIT)
def one_hot(idx2, depth, values):
    """ONNX OneHot: idx2 = (outer, inner) -> (outer, depth, inner); out-of-range rows stay off."""
    outer, inner = idx2.shape
    y = np.empty((outer, depth, inner), values.dtype)
    y[:] = values[0]
    for o in range(outer):
        for i in range(inner):
            k = np.int64(idx2[o, i])
            if k < 0:
                k += depth
            if 0 <= k < depth:
                y[o, k, i] = values[1]
    return y
