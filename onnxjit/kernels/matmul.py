"""MatMul and Gemm kernels.

``matmul3`` is the batched core: a (Ba, M, K) x b (Bb, K, N) -> (max(Ba, Bb), M, N) with
Ba == Bb or Ba == 1 or Bb == 1.  Full numpy-matmul semantics (1-D promotion, N-D batch
broadcasting) are reduced to it by ``shapes.matmul_plan`` (see ``matmul_nd`` below for
the exact wiring).  Floats go through BLAS; int32/int64/uint32/uint64 use a plain loop
(wrapping arithmetic, like numpy).  Inputs must be C-contiguous.
"""

import numpy as np
from numba import njit, types
from numba.extending import overload

from .shapes import matmul_plan

from . import JIT as _JIT


@njit(**_JIT)
def _int_mm(a, b, out):
    """out = a @ b for 2-D integer arrays (i-k-j order keeps the inner loop contiguous)."""
    out[:] = 0
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            aik = a[i, k]
            for j in range(b.shape[1]):
                out[i, j] += aik * b[k, j]


def _mm_into(a, b, out):
    """out[:] = a @ b for 2-D C arrays: BLAS for floats, loop for ints (typing-time choice)."""
    raise NotImplementedError


@overload(_mm_into)
def _mm_into_ov(a, b, out):
    if isinstance(a.dtype, types.Float):
        return lambda a, b, out: np.dot(a, b, out)
    return lambda a, b, out: _int_mm(a, b, out)


@njit(**_JIT)
def matmul3(a, b):
    """Batched a (Ba,M,K) @ b (Bb,K,N) -> (B,M,N); a batch dim of 1 broadcasts."""
    ba, m, k = a.shape
    bb, n = b.shape[0], b.shape[2]
    nb = max(ba, bb)
    out = np.empty((nb, m, n), a.dtype)
    if bb == 1:
        # shared right operand: fold the batch into M for a single large GEMM
        _mm_into(a.reshape((ba * m, k)), b[0], out.reshape((nb * m, n)))
        return out
    for i in range(nb):
        _mm_into(a[0 if ba == 1 else i], b[i], out[i])
    return out


@njit(**_JIT)
def matmul3_epilogue(a, b, bias, act):
    """act(matmul3(a, b) + bias): bias (N,) or None along the last axis, act 0 none / 1 Relu,
    applied in one pass over each output row while it is still in cache."""
    out = matmul3(a, b)
    y = out.reshape((out.size // out.shape[2], out.shape[2]))
    zero = y.dtype.type(0)
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            v = y[i, j]
            if bias is not None:
                v += bias[j]
            if act == 1:
                v = v if not v < zero else zero
            y[i, j] = v
    return out


@njit(**_JIT)
def gemm(a, b, c, alpha, beta, trans_a, trans_b):
    """ONNX Gemm: alpha * op(a) @ op(b) + beta * c; a, b 2-D float, c 2-D (M|1, N|1).

    The caller reshapes a scalar/1-D C to 2-D ((N,) -> (1, N)) and passes zeros((1, 1))
    when C is absent.
    """
    # four explicit calls keep every operand a C/F array that BLAS takes without a copy
    if trans_a and trans_b:
        y = np.dot(a.T, b.T)
    elif trans_a:
        y = np.dot(a.T, b)
    elif trans_b:
        y = np.dot(a, b.T)
    else:
        y = np.dot(a, b)
    cm, cn = c.shape[0] > 1, c.shape[1] > 1
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            y[i, j] = alpha * y[i, j] + beta * c[i if cm else 0, j if cn else 0]
    return y


def matmul_nd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Reference wiring (plain Python) of numpy-matmul semantics onto ``matmul3``."""
    p = matmul_plan(a.shape, b.shape)
    a, b = a.reshape(p.a_pre), b.reshape(p.b_pre)
    if p.a_full is not None:
        a = np.ascontiguousarray(np.broadcast_to(a, p.a_full))
    if p.b_full is not None:
        b = np.ascontiguousarray(np.broadcast_to(b, p.b_full))
    return matmul3(np.ascontiguousarray(a.reshape(p.a3)),
                   np.ascontiguousarray(b.reshape(p.b3))).reshape(p.out)
