"""Scalar helpers called from fused loop bodies (numpy semantics for NaN, division, casts).

Each is inlined into the fused loop. Their arithmetic uses no float literals (a bare literal
promotes float32 math to float64): lowerings put typed constants in the expression instead.
Integer helpers take 64-bit operands (the lowering widens), so each has one operand type.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_I32_MIN = np.int32(-2147483648)
_I64_MIN = np.int64(-9223372036854775808)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def maximum(a, b):
    """np.maximum: NaN wins."""
    return a if (a >= b or a != a) else b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def minimum(a, b):
    """np.minimum: NaN wins."""
    return a if (a <= b or a != a) else b


# Integer division and remainder. `a - a` is the zero of a's type (a literal 0 would mix int64
# with uint64, which Numba types as float64). b == -1 is handled apart: MIN // -1 overflows
# (numpy gives MIN for the quotient, 0 for the remainder).

@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def int_div(a, b):
    """Signed integer division truncating toward zero (C, as ONNX Div); 0 when b == 0."""
    if b == 0:
        return a - a
    if b == -1:
        return -a
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def uint_div(a, b):
    """Unsigned integer division; 0 when b == 0."""
    if b == 0:
        return a - a
    return a // b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def int_mod(a, b):
    """np.mod for integers: the remainder takes the divisor's sign; 0 when b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a % b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def int_fmod(a, b):
    """np.fmod for signed integers: C remainder (sign of the dividend); 0 when b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a - int_div(a, b) * b


# Float -> integer casts. LLVM's fptosi is undefined (poison) for NaN, Inf and out-of-range
# values; these make them deterministic, reproducing numpy's results on x86-64 (cvttsd2si
# yields INT_MIN; types narrower than 32 bits go through int32 and wrap).

@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def f2i32(x):
    """float -> int32; NaN / out of range -> INT32_MIN. Narrower targets wrap this."""
    if x >= -2147483648.0 and x < 2147483648.0:
        return np.int32(x)
    return _I32_MIN


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def f2i64(x):
    """float -> int64; NaN / out of range -> INT64_MIN."""
    if x >= -9223372036854775808.0 and x < 9223372036854775808.0:
        return np.int64(x)
    return _I64_MIN


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def f2u32(x):
    """float -> uint32; negatives wrap, too large -> 0, NaN / very negative -> 2**31."""
    if x > -2147483649.0 and x < 4294967296.0:
        return np.uint32(np.int64(x) & 0xFFFFFFFF)
    if x >= 4294967296.0:
        return np.uint32(0)
    return np.uint32(2147483648)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def f2u64(x):
    """float -> uint64; negatives wrap, too large -> 0, NaN / very negative -> 2**63."""
    if x >= 18446744073709551616.0:
        return np.uint64(0)
    if x >= 9223372036854775808.0:
        return np.uint64(x)
    return np.uint64(f2i64(x))


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def shift_left(a, b, bits):
    """Unsigned a << b in a `bits`-wide type; 0 when b >= bits (undefined in LLVM)."""
    if b >= bits:
        return a - a
    return a << b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def shift_right(a, b, bits):
    """Unsigned a >> b in a `bits`-wide type; 0 when b >= bits."""
    if b >= bits:
        return a - a
    return a >> b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def sshift_left(a, b, bits):
    """Signed a << b (int64 operands) wrapping in `bits` bits; 0 when b is out of [0, bits)."""
    if b < 0 or b >= bits:
        return a - a
    return a << b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def sshift_right(a, b, bits):
    """Arithmetic a >> b (int64 operands); out-of-range b gives the sign fill, -1 or 0."""
    if b < 0 or b >= bits:
        return (a - a) - (a < 0)
    return a >> b


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def sigmoid(x):
    """1 / (1 + exp(-x)) without overflow for large |x| (computes in float64)."""
    if x >= 0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def _round_to_precision(x, bits, min_exponent, largest):
    """x rounded to a float with `bits` of significand (ties to even), as float32."""
    a = abs(np.float64(x))
    if a == 0.0 or not a < np.inf:
        return np.float32(x)
    _, e = math.frexp(a)                    # a = m * 2**e with 0.5 <= m < 1
    q = 2.0 ** max(e - bits, min_exponent)  # the spacing of the narrow type near a
    r = np.rint(a / q) * q
    if r > largest:
        r = np.inf
    return np.float32(r if x > 0 else -r)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def round_f16(x):
    """x rounded to float16 (held in float32): 11-bit significand, subnormals down to 2**-24."""
    return _round_to_precision(x, 11, -24, 65504.0)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def round_bf16(x):
    """x rounded to bfloat16 (held in float32): 8-bit significand."""
    return _round_to_precision(x, 8, -133, 3.3895313892515355e38)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def erf_f32(a):
    """erf for float32 as a rational function on [-4, 4] (beyond, erf is +-1 in float32):
    no libm call, so fused loops vectorize. Max abs error ~4e-7; NaN propagates."""
    x = min(max(np.float32(a), np.float32(-4.0)), np.float32(4.0))
    x2 = x * x
    p = x2 * np.float32(-2.72614225801306e-10) + np.float32(2.77068142495902e-08)
    p = x2 * p + np.float32(-2.10102402082508e-06)
    p = x2 * p + np.float32(-5.69250639462346e-05)
    p = x2 * p + np.float32(-7.34990630326855e-04)
    p = x2 * p + np.float32(-2.95459980854025e-03)
    p = x2 * p + np.float32(-1.60960333262415e-02)
    q = x2 * np.float32(-1.45660718464996e-05) + np.float32(-2.13374055278905e-04)
    q = x2 * q + np.float32(-1.68282697438203e-03)
    q = x2 * q + np.float32(-7.37332916720468e-03)
    q = x2 * q + np.float32(-1.42647390514189e-02)
    r = x * p / q
    return r if a == a else np.float32(a)


# ---- float32 exp / sigmoid that vectorize (no libm call, no branch) --------------------------
@intrinsic
def _f32_from_bits(typingctx, i):
    """The float32 whose bit pattern is the int32 `i`."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


_EXP_LO, _EXP_HI = np.float32(-87.33654), np.float32(88.37626)
_LOG2E, _HALF, _ONE = np.float32(1.44269504088896341), np.float32(0.5), np.float32(1.0)
_LN2_HI, _LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)
_P0, _P1, _P2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3)
_P3, _P4, _P5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1)
_I127 = np.int32(127)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def exp_f32(x):
    """exp of a float32 (Cephes expf: 2^n * p(r), ~2 ulp; x clamped to [-87.3, 88.4], so
    the result stays finite and normal; NaN stays NaN). Branch-free: a fused loop vectorizes."""
    x = _EXP_LO if x < _EXP_LO else x
    x = _EXP_HI if x > _EXP_HI else x
    fx = np.floor(x * _LOG2E + _HALF)
    r = x - fx * _LN2_HI - fx * _LN2_LO
    p = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
    y = p * (r * r) + r + _ONE
    return y * _f32_from_bits((np.int32(fx) + _I127) << np.int32(23))


_INF32, _EXP_MAX = np.float32(np.inf), np.float32(88.72283)


@njit(cache=True, inline="always", no_cfunc_wrapper=True)
def sigmoid_f32(x):
    """1 / (1 + exp(-x)) of a float32, vectorizable (see exp_f32); within ~3 ulp; exactly 0
    where exp(-x) overflows (x < -88.7, -inf), 1 for large x, NaN for NaN."""
    t = -x
    e = exp_f32(t)
    e = _INF32 if t > _EXP_MAX else e
    return _ONE / (_ONE + e)
