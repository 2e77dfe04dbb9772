"""Softmax-family and normalization kernels.

Softmax, LogSoftmax, Hardmax and LpNormalization work on an (outer, n, inner) view and act along
axis 1; when inner == 1 they run on contiguous rows (the common last-axis case). The other
normalizations work on 2-D (rows, cols) arrays whose rows are the groups whose statistics are
taken. Arithmetic stays in the input's float type, as onnx's reference does.

Speed: row loops are written so LLVM vectorizes them without fast-math: reductions keep eight
partial results (numpy's pairwise sum does the same within a block), and float32 exp is a
branch-free polynomial (this Numba has no SVML, so math.exp would be a scalar libm call).
float32 Softmax along contiguous rows on AVX-512 and AVX2 machines goes further
(``softmax_f32``): the same exp polynomial written as explicit vector IR of the target's width
(kernels/simd.py ``native``: <16 x float> on AVX-512, <8 x float> on AVX2; LLVM's
auto-vectoriser stays at 256 bits and spills around the polynomial), about 3.5x faster than the
auto-vectorised row loop.  float32 LayerNorm rows (``_layer_norm_f32``) use the same vectors.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .scalar import round_f16
from .simd import (F32xNType, I32 as _I32, lane_mask as _lane_mask, native as V,
                   splat as _splat, vadd as _vadd, vmul as _vmul, vstore as _vstore,
                   vstorem as _vstorem, vsub as _vsub, vmax as _vmax, vhmax as _vhmax,
                   vhsum as _vhsum)

from . import JIT as _JIT


@intrinsic
def _bits_to_f32(typingctx, bits):
    """Reinterpret an int32's bits as a float32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
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


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
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


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
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


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
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


# ----------------------------------------------------------------------------------------
# float32 softmax and layer norm on the target's vectors (kernels/simd.py `native`: 16 lanes on
# AVX-512, 8 on AVX2, 4 on the generic target)
# ----------------------------------------------------------------------------------------


def _vconst(value, lanes):
    """A <lanes x float> constant (value rounded to float32 first)."""
    return ir.Constant(ir.VectorType(ir.FloatType(), lanes), [float(np.float32(value))] * lanes)


def _vintrinsic(builder, name, *args):
    """Call the LLVM vector intrinsic `name` (all operands and the result of one vector type)."""
    vec = args[0].type
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vec, [vec] * len(args)), name)
    return builder.call(fn, list(args))


def _exp_nonpos_ir(builder, x):
    """IR of exp on each lane of x for x <= 0 or NaN (all softmax sees after subtracting the maximum).

    ``expf``'s Cephes reduction and polynomial with fused multiply-adds; n = round(x / ln2) comes
    from the 1.5 * 2**23 trick (z = x * log2(e) + 1.5 * 2**23 holds n in its low mantissa bits, so
    2**n is one integer add and shift of z's bits: no float->int conversion, whose NaN result
    LLVM leaves undefined).  exp(x < -87.34) = 0 as in ``expf``; a NaN propagates through the
    arithmetic (NaN times any 2**n is NaN).  Max relative error 7.5e-8 (measured on [-87, 0]).
    """
    lanes = x.type.count
    vi32 = ir.VectorType(_I32, lanes)

    def fma(a, b, c):
        return _vintrinsic(builder, f"llvm.fma.v{lanes}f32", a, b, c)

    def const(value):
        return _vconst(value, lanes)

    lo = const(-87.33654)
    under = builder.fcmp_ordered("<", x, lo)
    t = builder.select(under, lo, x)           # n >= -126: 2**n is a normal float
    magic = const(12582912.0)
    z = fma(t, const(1.44269504088896341), magic)
    n = builder.fsub(z, magic)
    r = fma(n, const(2.12194440e-4), fma(n, const(-0.693359375), t))
    p = const(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
              5.0000001201e-1):
        p = fma(p, r, const(c))
    y = fma(fma(p, r, const(1.0)), r, const(1.0))   # 1 + r + r**2 p(r)
    # bits(z) - bits(1.5 * 2**23) = n; (n + 127) << 23 are the bits of 2**n
    bits = builder.add(builder.bitcast(z, vi32), ir.Constant(vi32, [127 - 0x4B400000] * lanes))
    two_n = builder.bitcast(builder.shl(bits, ir.Constant(vi32, [23] * lanes)), x.type)
    return builder.select(under, const(0.0), builder.fmul(y, two_n))


@intrinsic
def _vexp_nonpos(typingctx, x):
    """exp of each lane, for lanes <= 0 or NaN (see _exp_nonpos_ir)."""
    if not isinstance(x, F32xNType):
        return None

    def codegen(context, builder, sig, args):
        return _exp_nonpos_ir(builder, args[0])
    return x(x), codegen


@intrinsic
def _vtail(typingctx, v, cnt, fill):
    """v with the lanes from cnt on set to `fill`."""
    if fill != types.float32 or not isinstance(v, F32xNType):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(_lane_mask(builder, args[1], v.lanes), args[0],
                              _splat(builder, args[2], v.lanes))
    return v(v, types.intp, types.float32), codegen


@njit(**_JIT)
def softmax_f32(x, scale):
    """Softmax of each row of a float32 (rows, n) array, of (x * scale) rather than x when a
    constant scale was folded in (rounded to float32 exactly as a separate Mul would).

    Explicit vectors of the target's width (simd.native: one zmm, ymm or xmm register each);
    chosen where ``target.split16`` (AVX-512 and AVX2); about 3.5x the speed of ``softmax`` on
    128-wide rows.  Semantics as ``softmax``: the maximum ignores NaNs (a
    NaN then makes its row NaN through exp), a row whose maximum is -inf or +inf gives NaNs (as
    inf - inf does in the reference); the sum of exps is taken once and its reciprocal
    multiplies (as ONNX Runtime does).
    """
    rows, n = x.shape
    xf = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(rows * n, np.float32)
    s = V.splat(np.float32(scale))
    ninf, zero = np.float32(-np.inf), np.float32(0)
    L = V.LANES
    tail = n % L
    full = n - tail
    full2 = full - full % (2 * L)      # the max and sum passes take two vectors a step
    for r in range(rows):
        base = r * n
        acc, acc1 = V.splat(ninf), V.splat(ninf)
        for j in range(base, base + full2, 2 * L):
            acc = _vmax(_vmul(V.load(xf, j), s), acc)
            acc1 = _vmax(_vmul(V.load(xf, j + L), s), acc1)
        if full2 < full:
            acc = _vmax(_vmul(V.load(xf, base + full2), s), acc)
        if tail:
            v = _vmul(V.load_span(xf, base + full, 0, tail, zero), s)
            acc1 = _vmax(_vtail(v, tail, ninf), acc1)   # fill after scaling: -inf * -s = +inf
        m = V.splat(_vhmax(_vmax(acc, acc1)))
        tot, tot1 = V.zero(), V.zero()
        for j in range(base, base + full2, 2 * L):
            # both loads before either store: `out` might alias `xf` for all LLVM knows, so a
            # load after a store would wait for it (one exp chain at a time, ~10% slower)
            x0, x1 = V.load(xf, j), V.load(xf, j + L)
            e = _vexp_nonpos(_vsub(_vmul(x0, s), m))
            e1 = _vexp_nonpos(_vsub(_vmul(x1, s), m))
            _vstore(out, j, e)
            _vstore(out, j + L, e1)
            tot = _vadd(tot, e)
            tot1 = _vadd(tot1, e1)
        if full2 < full:
            e = _vexp_nonpos(_vsub(_vmul(V.load(xf, base + full2), s), m))
            _vstore(out, base + full2, e)
            tot = _vadd(tot, e)
        if tail:
            e = _vexp_nonpos(_vsub(_vmul(V.load_span(xf, base + full, 0, tail, zero), s), m))
            _vstorem(out, base + full, e, tail)
            tot1 = _vadd(tot1, _vtail(e, tail, zero))
        inv = V.splat(np.float32(1) / _vhsum(_vadd(tot, tot1)))
        for j in range(base, base + full2, 2 * L):
            o0, o1 = V.load(out, j), V.load(out, j + L)
            _vstore(out, j, _vmul(o0, inv))
            _vstore(out, j + L, _vmul(o1, inv))
        if full2 < full:
            _vstore(out, base + full2, _vmul(V.load(out, base + full2), inv))
        if tail:
            _vstorem(out, base + full, _vmul(V.load_span(out, base + full, 0, tail, zero), inv), tail)
    return out.reshape((rows, n))


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
            for i in range(ni):
                norm[i] = np.sqrt(norm[i])
        for r in range(n):
            for i in range(ni):
                out[o, r, i] = 0 if norm[i] == 0 else x[o, r, i] / norm[i]
    return out


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def _mean_var(x, r, acc):
    """Mean and biased variance of row r: two passes in the row's dtype (as the reference)."""
    n = x.dtype.type(x.shape[1])
    mean = _row_sum(x, r, None, acc) / n
    return mean, _row_sum(x, r, mean, acc) / n


@njit(**_JIT)
def layer_norm(x, scale, bias, eps):
    """Rows of x (rows, cols) normalized, times scale (cols,), plus bias (cols,) or None.

    Returns (y, mean (rows,), inv_std_dev (rows,)).  float32 runs on explicit vectors of the
    target's width (``_layer_norm_f32``, ~4x faster), other types on the auto-vectorised
    loops."""
    return _layer_norm_impl(x, scale, bias, eps)


def _layer_norm_impl(x, scale, bias, eps):
    """Typing-time choice between _layer_norm_f32 and _layer_norm_any."""
    raise NotImplementedError


@overload(_layer_norm_impl)
def _layer_norm_impl_ov(x, scale, bias, eps):
    if (x.dtype == types.float32 and scale.dtype == types.float32
            and (bias is None or isinstance(bias, types.NoneType) or bias.dtype == types.float32)):
        return lambda x, scale, bias, eps: _layer_norm_f32(x, scale, bias, eps)
    return lambda x, scale, bias, eps: _layer_norm_any(x, scale, bias, eps)


@njit(**_JIT)
def _layer_norm_any(x, scale, bias, eps):
    """layer_norm for any float type: two passes for mean and variance, then the output pass."""
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
def _layer_norm_f32(x, scale, bias, eps):
    """float32 layer_norm on the target's vectors (simd.native): the same three passes per row
    (sum, sum of squared deviations, output) and the same operations in float32 (lane-wise
    partial sums then a pairwise reduction, as ``_row_sum``).  The sums run two vectors a step
    into two accumulators: one add chain a step is latency-bound (on AVX2, 8-lane vectors with one
    chain took 37 us for 128 rows of 768, against 22 for two)."""
    rows, cols = x.shape
    xf = np.ascontiguousarray(x).reshape(-1)
    sf = np.ascontiguousarray(scale).reshape(-1)
    bf = np.zeros(cols, np.float32) if bias is None else np.ascontiguousarray(bias).reshape(-1)
    y = np.empty(rows * cols, np.float32)
    means, invs = np.empty(rows, np.float32), np.empty(rows, np.float32)
    L = V.LANES
    tail = cols % L
    full = cols - tail
    full2 = full - full % (2 * L)      # the reductions take two vectors a step
    zero, n = np.float32(0), np.float32(cols)
    for r in range(rows):
        base = r * cols
        acc, acc1 = V.zero(), V.zero()
        for j in range(0, full2, 2 * L):
            acc = _vadd(acc, V.load(xf, base + j))
            acc1 = _vadd(acc1, V.load(xf, base + j + L))
        if full2 < full:
            acc = _vadd(acc, V.load(xf, base + full2))
        if tail:
            acc1 = _vadd(acc1, V.load_span(xf, base + full, 0, tail, zero))
        mean = _vhsum(_vadd(acc, acc1)) / n
        m = V.splat(mean)
        acc, acc1 = V.zero(), V.zero()
        for j in range(0, full2, 2 * L):
            d = _vsub(V.load(xf, base + j), m)
            acc = _vadd(acc, _vmul(d, d))
            d1 = _vsub(V.load(xf, base + j + L), m)
            acc1 = _vadd(acc1, _vmul(d1, d1))
        if full2 < full:
            d = _vsub(V.load(xf, base + full2), m)
            acc = _vadd(acc, _vmul(d, d))
        if tail:
            d = _vsub(V.load_span(xf, base + full, 0, tail, zero), m)
            acc1 = _vadd(acc1, _vtail(_vmul(d, d), tail, zero))
        var = _vhsum(_vadd(acc, acc1)) / n
        inv = np.float32(1) / np.sqrt(var + np.float32(eps))
        means[r], invs[r] = mean, inv
        iv = V.splat(inv)
        for j in range(0, full, L):
            d = _vmul(_vmul(_vsub(V.load(xf, base + j), m), iv), V.load(sf, j))
            _vstore(y, base + j, _vadd(d, V.load(bf, j)))
        if tail:
            d = _vmul(_vmul(_vsub(V.load_span(xf, base + full, 0, tail, zero), m), iv),
                      V.load_span(sf, full, 0, tail, zero))
            _vstorem(y, base + full, _vadd(d, V.load_span(bf, full, 0, tail, zero)), tail)
    return y.reshape((rows, cols)), means, invs


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
def group_norm(x, scale, bias, eps, groups, big=0.0):
    """x (N * G, C / G * S), one group per row; per-channel scale and bias (C,).

    y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c], c the element's channel. With `big`
    (GroupNormalization: the largest finite value of the type its function body computes in),
    var overflows as that body's E[x^2] - E[x]^2 does: inf where the sum of squares passes
    `big`, NaN where E[x]^2 does too (inf - inf), as the reference and ONNX Runtime (seed 7
    case 1910: a 1e30 in a float32 group); the two-pass variance stays finite there."""
    rows, cols = x.shape
    per_group = scale.shape[0] // groups
    spatial = cols // per_group if per_group else 0
    y = np.empty_like(x)
    acc = np.empty(16, x.dtype)
    for r in range(rows):
        mean, var = _mean_var(x, r, acc)
        if big > 0.0:
            m2 = float(mean) * float(mean)
            if m2 > big:
                var = x.dtype.type(np.nan)
            elif cols * (float(var) + m2) > big:
                var = x.dtype.type(np.inf)
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


@njit(**_JIT)
def _half_sum(row):
    """The float32 sum numpy's add.reduce forms of a contiguous float16 row (pairwise: 8
    accumulators up to 128 elements, halves beyond), before it is rounded to float16."""
    n = row.shape[0]
    if n < 8:
        res = np.float32(0.0)
        for i in range(n):
            res += row[i]
        return res
    if n <= 128:
        r = row[:8].copy()
        m = n - n % 8
        for i in range(8, m, 8):
            for k in range(8):
                r[k] += row[i + k]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(m, n):
            res += row[i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _half_sum(row[:n2]) + _half_sum(row[n2:])


@njit(**_JIT)
def softmax_f16_rows(x):
    """Softmax of each row of a 2-D array of float16 values held in float32, rounded as numpy
    computes it in float16 (onnx's reference): x - max, exp and the quotient each rounded to
    float16, the sum formed in float32 (numpy's pairwise order) and rounded."""
    out = np.empty_like(x)
    row = np.empty(x.shape[1], np.float32)
    for o in range(x.shape[0]):
        m = -np.inf
        for j in range(x.shape[1]):
            v = x[o, j]
            if v != v:
                m = v
                break
            m = max(m, v)
        for j in range(x.shape[1]):
            row[j] = round_f16(np.exp(round_f16(np.float32(x[o, j] - m))))
        s = round_f16(_half_sum(row))
        for j in range(x.shape[1]):
            out[o, j] = round_f16(row[j] / s)
    return out
