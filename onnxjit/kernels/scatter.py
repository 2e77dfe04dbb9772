"""Scatter kernels (ScatterElements, ScatterND, TensorScatter): every index is bounds-checked.

`reduction` is an int code: 0 none (replace), 1 add, 2 mul, 3 max, 4 min.
"""
import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def _combine(old, new, reduction):
    """One scatter update of `old` by `new` under the reduction code."""
    if reduction == 1:
        return old + new
    if reduction == 2:
        return old * new
    if reduction == 3:
        return new if new > old else old
    if reduction == 4:
        return new if new < old else old
    return new


@njit(**_JIT)
def scatter_elements(data, idx, upd, ishape, axis, reduction):
    """ONNX ScatterElements on C arrays: data is N-D, idx/upd flat with the indices' shape `ishape`."""
    out = data.copy()
    flat = out.reshape(-1)
    nd = len(ishape)
    n_axis = data.shape[axis]
    strides = np.empty(nd, np.int64)
    s = 1
    for d in range(nd - 1, -1, -1):
        strides[d] = s
        s *= data.shape[d]
    for j in range(idx.shape[0]):
        k = np.int64(idx[j])
        if k < -n_axis or k >= n_axis:
            raise IndexError("ScatterElements: index out of range")
        if k < 0:
            k += n_axis
        rem, off = j, 0
        for d in range(nd - 1, -1, -1):
            pos = rem % ishape[d]
            rem //= ishape[d]
            off += (k if d == axis else pos) * strides[d]
        flat[off] = _combine(flat[off], upd[j], reduction)
    return out


@njit(**_JIT)
def scatter_nd(data2, idx2, upd2, dims, reduction):
    """ONNX ScatterND: data2 = (prod(dims), inner), idx2 = (n, len(dims)), upd2 = (n, inner)."""
    out = data2.copy()
    n, m = idx2.shape
    inner = data2.shape[1]
    for j in range(n):
        off = 0
        for d in range(m):
            k = np.int64(idx2[j, d])
            if k < -dims[d] or k >= dims[d]:
                raise IndexError("ScatterND: index out of range")
            if k < 0:
                k += dims[d]
            off = off * dims[d] + k
        for i in range(inner):
            out[off, i] = _combine(out[off, i], upd2[j, i], reduction)
    return out


@njit(**_JIT)
def tensor_scatter(past4, upd4, write_idx, circular):
    """ONNX TensorScatter: past4 = (batch, rest, max_len, inner), upd4 = (batch, rest, len, inner)."""
    out = past4.copy()
    nb, nr, max_len, inner = past4.shape
    seq = upd4.shape[2]
    for b in range(nb):
        start = np.int64(write_idx[b])
        if start < 0 or (not circular and start + seq > max_len):
            raise IndexError("TensorScatter: write index out of range")
        for r in range(nr):
            for s in range(seq):
                t = (start + s) % max_len if circular else start + s
                for i in range(inner):
                    out[b, r, t, i] = upd4[b, r, s, i]
    return out
