"""Batched GEMM, tiled through shared memory: C[z] = alpha * A[z] @ B[z] (+ beta * bias).

Operands are flat arrays read through strides (transposes cost nothing) at per-batch offsets
(aoff[z], boff[z] ...: broadcast batches, groups of a convolution). One thread per output
element, TILE x TILE threads per block, grid (n tiles, m tiles, batches). The portable default;
CuPy's cuBLAS runs float GEMMs where it is installed (cuda/launch.py).
"""
from numba import cuda

from ..target import simulator

# Tile edge (threads per block: TILE x TILE). 4 under the simulator, where every thread is a
# Python thread: tiny test matrices then span several tiles, as real ones do on hardware.
TILE = 4 if simulator() else 16


@cuda.jit(cache=True)
def gemm(a, b, c, bias, m, n, k, batch, aoff, boff, coff, biasoff, sam, sak, sbk, sbn, scm,
         sbias_m, sbias_n, alpha, beta, has_bias):
    sa = cuda.shared.array((TILE, TILE), dtype=a.dtype)
    sb = cuda.shared.array((TILE, TILE), dtype=b.dtype)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
        a0 = aoff[z]
        b0 = boff[z]
        acc = alpha - alpha
        for t in range(0, k, TILE):
            if row < m and t + tx < k:
                sa[ty, tx] = a[a0 + row * sam + (t + tx) * sak]
            else:
                sa[ty, tx] = 0
            if col < n and t + ty < k:
                sb[ty, tx] = b[b0 + (t + ty) * sbk + col * sbn]
            else:
                sb[ty, tx] = 0
            cuda.syncthreads()
            for q in range(TILE):
                acc += sa[ty, q] * sb[q, tx]
            cuda.syncthreads()
        if row < m and col < n:
            v = alpha * acc
            if has_bias:
                v += beta * bias[biasoff[z] + row * sbias_m + col * sbias_n]
            c[coff[z] + row * scm + col] = v


@cuda.jit(cache=True)
def epilogue(c, bias, total, m, n, batch_rows, biasoff, sbias_m, sbias_n, alpha, beta, has_bias):
    """After a cuBLAS product: c = alpha * c (+ beta * bias) over batches of (m, n) rows; the
    bias offset of batch z is biasoff[z]."""
    for i in range(cuda.grid(1), total, cuda.gridsize(1)):
        col = i % n
        r = i // n
        row = r % m
        z = r // m
        v = alpha * c[i]
        if has_bias:
            v += beta * bias[biasoff[z] + row * sbias_m + col * sbias_n]
        c[i] = v
