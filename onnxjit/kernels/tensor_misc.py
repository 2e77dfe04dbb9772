"""Kernels for assorted tensor ops: TopK, ReverseSequence, CenterCropPad, Col2Im, MaxUnpool,
Det and CumProd. Index-taking kernels check every index and raise IndexError."""
import numpy as np
from numba import njit

from . import JIT as _JIT


@njit(**_JIT)
def top_k(x3, k, largest, out_shape):
    """ONNX TopK along axis 1 of (outer, n, inner): sorted values and int64 indices of out_shape,
    equal values ordered by lower index (like the reference)."""
    outer, n, inner = x3.shape
    vals = np.empty((outer, k, inner), x3.dtype)
    idx = np.empty((outer, k, inner), np.int64)
    col = np.empty(n, x3.dtype)
    for o in range(outer):
        for i in range(inner):
            if largest:
                # Sort the reversed column stably and read it backwards: descending values,
                # equal values in ascending original index (NaN first, like the reference).
                for j in range(n):
                    col[j] = x3[o, n - 1 - j, i]
                order = np.argsort(col, kind="mergesort")
                for j in range(k):
                    idx[o, j, i] = n - 1 - order[n - 1 - j]
            else:
                for j in range(n):
                    col[j] = x3[o, j, i]
                order = np.argsort(col, kind="mergesort")
                for j in range(k):
                    idx[o, j, i] = order[j]
            for j in range(k):
                vals[o, j, i] = x3[o, idx[o, j, i], i]
    return vals.reshape(out_shape), idx.reshape(out_shape)


@njit(**_JIT)
def reverse_sequence(x3, lens, time_first):
    """ONNX ReverseSequence on (time, batch, inner) if time_first else (batch, time, inner)."""
    out = x3.copy()
    n_time = x3.shape[0] if time_first else x3.shape[1]
    for b in range(lens.shape[0]):
        n = np.int64(lens[b])
        if n < 0 or n > n_time:
            raise IndexError("ReverseSequence: sequence length out of range")
        for t in range(n):
            for i in range(x3.shape[2]):
                if time_first:
                    out[t, b, i] = x3[n - 1 - t, b, i]
                else:
                    out[b, t, i] = x3[b, n - 1 - t, i]
    return out


@njit(**_JIT)
def copy_box(x, out_shape, src_off, dst_off, box):
    """Zeros of out_shape with x[src_off:src_off+box] copied to [dst_off:dst_off+box] (N-D)."""
    nd = len(out_shape)
    total = 1
    for d in range(nd):
        total *= out_shape[d]
    out = np.zeros(total, x.dtype)
    xf = np.ascontiguousarray(x).reshape(-1)
    n = 1
    for d in range(nd):
        n *= box[d]
    for j in range(n):
        rem, so, do, ss, ds = j, 0, 0, 1, 1
        for d in range(nd - 1, -1, -1):
            pos = rem % box[d]
            rem //= box[d]
            so += (src_off[d] + pos) * ss
            do += (dst_off[d] + pos) * ds
            ss *= x.shape[d]
            ds *= out_shape[d]
        out[do] = xf[so]
    return out.reshape(out_shape)


@njit(**_JIT)
def col2im(x3, image, block, dil, pad_begin, strides, n_col):
    """ONNX Col2Im: x3 = (N, C * prod(block), prod(n_col)) -> (N, C, prod(image)), summed."""
    nb, cb, ncols = x3.shape
    nd = len(image)
    bsize, isize = 1, 1
    for d in range(nd):
        bsize *= block[d]
        isize *= image[d]
    nc = cb // bsize
    out = np.zeros((nb, nc, isize), x3.dtype)
    for kpos in range(bsize):
        for col in range(ncols):
            krem, crem, off, stride, inside = kpos, col, 0, 1, True
            for d in range(nd - 1, -1, -1):
                kd = krem % block[d]
                krem //= block[d]
                cd = crem % n_col[d]
                crem //= n_col[d]
                p = cd * strides[d] - pad_begin[d] + kd * dil[d]
                if p < 0 or p >= image[d]:
                    inside = False
                off += p * stride
                stride *= image[d]
            if inside:
                for b in range(nb):
                    for c in range(nc):
                        out[b, c, off] += x3[b, c * bsize + kpos, col]
    return out


@njit(**_JIT)
def max_unpool(x, idx, size):
    """ONNX MaxUnpool: a flat zero array of `size` with x's values at the flat indices idx."""
    out = np.zeros(size, x.dtype)
    xf = np.ascontiguousarray(x).reshape(-1)
    idf = np.ascontiguousarray(idx).reshape(-1)
    for j in range(xf.shape[0]):
        k = np.int64(idf[j])
        if k < 0 or k >= size:
            raise IndexError("MaxUnpool: index out of range")
        out[k] = xf[j]
    return out


@njit(**_JIT)
def det(x3):
    """Determinants of the (batch, n, n) matrices (LAPACK's; a matrix with NaN or Inf, which
    Numba's np.linalg.det refuses, by _det_nonfinite)."""
    out = np.empty(x3.shape[0], x3.dtype)
    for b in range(x3.shape[0]):
        m = np.ascontiguousarray(x3[b])
        out[b] = np.linalg.det(m) if np.all(np.isfinite(m)) else _det_nonfinite(m)
    return out


@njit(**_JIT)
def _det_nonfinite(m):
    """det of a matrix holding NaN or Inf as numpy's (OpenBLAS getrf) gives it: LU with partial
    pivoting (first largest |a|), the column scaled by 1/pivot, a scale of 0 (an infinite
    pivot) writing zeros; the product of the pivots. NaN in, NaN out in nearly every case."""
    n = m.shape[0]
    a = m.astype(np.float64)
    d = 1.0
    for k in range(n):
        p, best = k, abs(a[k, k])
        for i in range(k + 1, n):
            if abs(a[i, k]) > best:
                p, best = i, abs(a[i, k])
        if p != k:
            for j in range(n):
                a[k, j], a[p, j] = a[p, j], a[k, j]
            d = -d
        piv = a[k, k]
        d *= piv
        if piv != 0.0:
            r = 1.0 / piv
            for i in range(k + 1, n):
                f = a[i, k] * r if r != 0.0 else 0.0
                for j in range(k + 1, n):
                    a[i, j] -= f * a[k, j]
    return d


@njit(**_JIT)
def sum_rows(x2):
    """Row sums of a (rows, n) array, accumulated in its own dtype (Einsum's summed labels)."""
    out = np.zeros(x2.shape[0], x2.dtype)
    for r in range(x2.shape[0]):
        acc = out[r]
        for j in range(x2.shape[1]):
            acc += x2[r, j]
        out[r] = acc
    return out
