"""Softmax / LogSoftmax over one axis and LayerNormalization over trailing axes: one block per
row (grid-stride over rows), block-wide max / sum through shared memory (reduce._block_reduce)."""
import math

from numba import cuda

from .reduce import BLOCK, MAX, SUM, _block_reduce


@cuda.jit(cache=True)
def softmax(x, y, outer, r, inner, log):
    """Softmax (LogSoftmax when `log`) of x viewed as (outer, r, inner) along r."""
    sm = cuda.shared.array(BLOCK, dtype=x.dtype)
    t = cuda.threadIdx.x
    for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        base = (row // inner) * r * inner + row % inner
        m = x[base]
        for j in range(t, r, BLOCK):
            v = x[base + j * inner]
            m = v if (v > m or v != v) else m
        m = _block_reduce(sm, MAX, m)
        s = m - m
        for j in range(t, r, BLOCK):
            s += math.exp(x[base + j * inner] - m)
        s = _block_reduce(sm, SUM, s)
        if log:
            ls = math.log(s)
            for j in range(t, r, BLOCK):
                y[base + j * inner] = x[base + j * inner] - m - ls
        else:
            inv = 1 / s
            for j in range(t, r, BLOCK):
                y[base + j * inner] = math.exp(x[base + j * inner] - m) * inv


@cuda.jit(cache=True)
def layer_norm(x, scale, bias, y, mean_out, rstd_out, rows, cols, eps, has_bias, stats):
    """y = (x - mean) / sqrt(var + eps) * scale + bias over each row of x (rows, cols); with
    `stats`, mean_out / rstd_out get each row's mean and 1 / sqrt(var + eps)."""
    sm = cuda.shared.array(BLOCK, dtype=x.dtype)
    t = cuda.threadIdx.x
    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        base = row * cols
        s = eps - eps
        for j in range(t, cols, BLOCK):
            s += x[base + j]
        mean = _block_reduce(sm, SUM, s) / cols
        q = eps - eps
        for j in range(t, cols, BLOCK):
            d = x[base + j] - mean
            q += d * d
        rstd = 1 / math.sqrt(_block_reduce(sm, SUM, q) / cols + eps)
        for j in range(t, cols, BLOCK):
            v = (x[base + j] - mean) * rstd * scale[j]
            y[base + j] = v + bias[j] if has_bias else v
        if stats and t == 0:
            mean_out[row] = mean
            rstd_out[row] = rstd
