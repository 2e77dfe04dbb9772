"""Softmax-family and normalization kernels.

Softmax, LogSoftmax, Hardmax and LpNormalization work on an (outer, n, inner) view and act along
axis 1; when inner == 1 they run on contiguous rows (the common last-axis case). The other
normalizations work on 2-D (rows, cols) arrays whose rows are the groups whose statistics are
taken. Arithmetic stays in the input's float type, as onnx's reference does.

Speed: row loops are written so LLVM vectorizes them without fast-math: reductions keep eight
partial results (numpy's pairwise sum does the same within a block), and float32 exp is a
branch-free polynomial (this Numba has no SVML, so math.exp would be a scalar libm call).
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

_JIT = dict(cache=True, error_model="numpy")


@intrinsic
def _bits_to_f32(typingctx, bits):
    """Reinterpret an int32's bits as a float32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@njit(cache=True, inline="always")
def expf(x):
    """float32 exp (max relative error < 1e-7; 0 below -87.34, where results would be denormal)."""
    lo, hi = np.float32(-87.33654), np.float32(88.72283)
    t = hi if x > hi else x
    t = lo if t < lo else t
    # Cephes: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact n * ln2_hi)
    n = np.floor(t * np.float32(1.44269504088896341) + np.float32(0.5))
    r = t - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    k = np.int32(n)
    h = k >> np.int32(1)  # 2**k as 2**h * 2**(k - h): each factor stays a normal float
    y = (p * r * r + r + np.float32(1)) * _bits_to_f32((h + np.int32(127)) << np.int32(23))
    y = y * _bits_to_f32((k - h + np.int32(127)) << np.int32(23))
    y = np.float32(0) if x < lo else y
    return np.float32(np.inf) if x > hi else y


def _exp(x):
    """exp in x's float type: the vectorizable expf for float32, np.exp otherwise."""
    raise NotImplementedError


@overload(_exp, inline="always")
def _exp_ov(x):
    if x == types.float32:
        return lambda x: expf(x)
    return lambda x: np.exp(x)


@njit(cache=True, inline="always")
def _row_max(x, o, acc):
    """Largest element of row o of a 2-D array (NaNs ignored: they propagate through exp anyway).

    `acc` is a 16-element scratch array: lane-wise maxima vectorize, a scalar chain would not."""
    n = x.shape[1]
    acc[:] = -np.inf
    for j in range(0, n - 15, 16):
        for k in range(16):
            v = x[o, j + k]
            acc[k] = v if v > acc[k] else acc[k]
    m = acc[0]
    for k in range(1, 16):
        m = acc[k] if acc[k] > m else m
    for j in range(n - n % 16, n):
        m = x[o, j] if x[o, j] > m else m
    return m


@njit(cache=True, inline="always")
def _row_sum(x, o, c, acc):
    """Sum over row o of a 2-D array of (x - c) ** 2 when c is given, else of x, in 16 lanes."""
    n = x.shape[1]
    acc[:] = 0
    if c is None:
        for j in range(0, n - 15, 16):
            for k in range(16):
                acc[k] += x[o, j + k]
    else:
        for j in range(0, n - 15, 16):
            for k in range(16):
                d = x[o, j + k] - c
                acc[k] += d * d
    for j in range(n - n % 16, n):
        d = x[o, j] if c is None else (x[o, j] - c) * (x[o, j] - c)
        acc[0] += d
    s = x.dtype.type(0)
    for k in range(16):
        s += acc[k]
    return s


@njit(cache=True, inline="always")
def _softmax_row(x, y, o, acc):
    """Row o: y = exp(x - max(x)); returns (sum of y, max(x)) in x's dtype."""
    m = _row_max(x, o, acc)
    for j in range(x.shape[1]):
        y[o, j] = _exp(x[o, j] - m)
    return _row_sum(y, o, None, acc), m


@njit(**_JIT)
def softmax(x):
    """Softmax along axis 1 of (outer, n, inner)."""
    no, n, ni = x.shape
    if ni == 1:
        return _softmax_rows(x.reshape((no, n))).reshape((no, n, 1))
    return _unmove(_softmax_rows(_move(x)), no, n, ni)


@njit(**_JIT)
def _softmax_rows(x):
    """Softmax of each row of a 2-D C array."""
    out = np.empty_like(x)
    acc = np.empty(16, x.dtype)
    for o in range(x.shape[0]):
        s, _ = _softmax_row(x, out, o, acc)
        for j in range(x.shape[1]):
            out[o, j] /= s
    return out


@njit(**_JIT)
def log_softmax(x):
    """LogSoftmax along axis 1 of (outer, n, inner): x - max - log(sum(exp(x - max)))."""
    no, n, ni = x.shape
    if ni == 1:
        return _log_softmax_rows(x.reshape((no, n))).reshape((no, n, 1))
    return _unmove(_log_softmax_rows(_move(x)), no, n, ni)


@njit(**_JIT)
def _log_softmax_rows(x):
    """LogSoftmax of each row of a 2-D C array."""
    out = np.empty_like(x)
    acc = np.empty(16, x.dtype)
    for o in range(x.shape[0]):
        s, m = _softmax_row(x, out, o, acc)
        c = m + np.log(s)
        for j in range(x.shape[1]):
            out[o, j] = x[o, j] - c
    return out


@njit(**_JIT)
def _move(x):
    """(outer, n, inner) -> (outer * inner, n): a copy with axis 1 last, as contiguous rows."""
    no, n, ni = x.shape
    return np.ascontiguousarray(x.transpose((0, 2, 1))).reshape((no * ni, n))


@njit(**_JIT)
def _unmove(y, no, n, ni):
    """Inverse of _move."""
    return np.ascontiguousarray(y.reshape((no, ni, n)).transpose((0, 2, 1)))


@njit(**_JIT)
def hardmax(x):
    """One-hot of the first maximum along axis 1 of (outer, n, inner)."""
    no, n, ni = x.shape
    out = np.zeros_like(x)
    if n == 0:
        return out
    for o in range(no):
        for i in range(ni):
            best, k = x[o, 0, i], 0
            for r in range(1, n):
                v = x[o, r, i]
                if v > best or (v != v and best == best):
                    best, k = v, r
            out[o, k, i] = 1
    return out


@njit(**_JIT)
def lp_normalize(x, p):
    """x / ||x||_p along axis 1 of (outer, n, inner), p in (1, 2); 0 where the norm is 0."""
    no, n, ni = x.shape
    out = np.empty_like(x)
    norm = np.empty(ni, x.dtype)
    for o in range(no):
        norm[:] = 0
        for r in range(n):
            for i in range(ni):
                v = x[o, r, i]
                norm[i] += abs(v) if p == 1 else v * v
        if p == 2:
            norm[:] = np.sqrt(norm)
        for r in range(n):
            for i in range(ni):
                out[o, r, i] = 0 if norm[i] == 0 else x[o, r, i] / norm[i]
    return out


@njit(cache=True, inline="always")
def _mean_var(x, r, acc):
    """Mean and biased variance of row r: two passes in the row's dtype (as the reference)."""
    n = x.dtype.type(x.shape[1])
    mean = _row_sum(x, r, None, acc) / n
    return mean, _row_sum(x, r, mean, acc) / n


@njit(**_JIT)
def layer_norm(x, scale, bias, eps):
    """Rows of x (rows, cols) normalized, times scale (cols,), plus bias (cols,) or None.

    Returns (y, mean (rows,), inv_std_dev (rows,))."""
    rows, cols = x.shape
    y = np.empty_like(x)
    means, invs = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    acc = np.empty(16, x.dtype)
    for r in range(rows):
        mean, var = _mean_var(x, r, acc)
        inv = x.dtype.type(1) / np.sqrt(var + eps)
        means[r], invs[r] = mean, inv
        if bias is None:
            for j in range(cols):
                y[r, j] = (x[r, j] - mean) * inv * scale[j]
        else:
            for j in range(cols):
                y[r, j] = (x[r, j] - mean) * inv * scale[j] + bias[j]
    return y, means, invs


@njit(**_JIT)
def reshape3(t, y_shape, stat_shape):
    """layer_norm's (y, mean, inv_std_dev) reshaped to the op's output shapes."""
    return t[0].reshape(y_shape), t[1].reshape(stat_shape), t[2].reshape(stat_shape)


@njit(**_JIT)
def rms_norm(x, scale, eps):
    """Rows of x (rows, cols) divided by sqrt(mean(x^2) + eps), times scale (cols,)."""
    rows, cols = x.shape
    y = np.empty_like(x)
    for r in range(rows):
        q = x.dtype.type(0)
        for j in range(cols):
            q += x[r, j] * x[r, j]
        inv = x.dtype.type(1) / np.sqrt(q / x.dtype.type(cols) + eps)
        for j in range(cols):
            y[r, j] = x[r, j] * inv * scale[j]
    return y


@njit(**_JIT)
def group_norm(x, scale, bias, eps, groups):
    """x (N * G, C / G * S), one group per row; per-channel scale and bias (C,).

    y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c], c the element's channel."""
    rows, cols = x.shape
    per_group = scale.shape[0] // groups
    spatial = cols // per_group if per_group else 0
    y = np.empty_like(x)
    acc = np.empty(16, x.dtype)
    for r in range(rows):
        mean, var = _mean_var(x, r, acc)
        den = np.sqrt(var + eps)
        for k in range(per_group):
            c = (r % groups) * per_group + k
            for j in range(k * spatial, (k + 1) * spatial):
                y[r, j] = (x[r, j] - mean) / den * scale[c] + bias[c]
    return y


@njit(**_JIT)
def mvn(x):
    """Rows normalized as MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)."""
    rows, cols = x.shape
    y = np.empty_like(x)
    n, tiny = x.dtype.type(cols), x.dtype.type(1e-9)
    for r in range(rows):
        s, q = x.dtype.type(0), x.dtype.type(0)
        for j in range(cols):
            s += x[r, j]
            q += x[r, j] * x[r, j]
        mean = s / n
        std = np.sqrt(q / n - mean * mean)
        for j in range(cols):
            y[r, j] = (x[r, j] - mean) / (std + tiny)
    return y
