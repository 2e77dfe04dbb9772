"""Conversions of the types held as bit patterns (float8, float4, int4, int2; see ir.BIT_TYPES).

Compiled code holds each element of these types as its bit pattern in a uint8 (4- and 2-bit
types in the low bits, as ml_dtypes stores them). These scalar helpers are inlined into fused
elementwise loops: decoders give the value (float32 for the float types, exact; an integer for
the integer ones), encoders round a float32 to nearest even (a float64 source is rounded to
float32 first, as ml_dtypes and ONNX Runtime convert it; float16 and int16 sources are exact).
They are integer code without calls or loops, which LLVM vectorizes in the fused loops (a
float32 -> E4M3FN -> float32 round trip of 1M elements: ~1.5 ms, ORT 1.31 ~21-28 ms at 1
thread; int4 ~0.16 ms).

Special values follow ml_dtypes (the backend suite's oracle) and ONNX Cast's `saturate`:
  E4M3FN    no inf; NaN S.1111.111 (sign kept); overflow -> NaN, saturating -> +-448
  E4M3FNUZ  no inf, no -0; NaN 0x80; overflow -> NaN, saturating -> +-240
  E5M2      IEEE-like: inf 0x7C, NaN 0x7E (sign kept); overflow -> inf, saturating -> +-57344
  E5M2FNUZ  no inf, no -0; NaN 0x80; overflow -> NaN, saturating -> +-57344
  E2M1      (float4) no inf or NaN: always saturates to +-6; NaN -> 0 with the sign flipped
  E8M0      an exponent only, 2**(e - 127); 0xFF NaN; encoded as onnx.numpy_helper's
            to_float8e8m0 (from float32 bits, sign ignored, round_mode up / nearest / down)
  int4, uint4, int2, uint2: from a float truncated to int32 (NaN, out of range -> 0), then
            wrapped to the low bits; from an integer wrapped.
"""
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

_JIT = dict(cache=True, inline="always", no_cfunc_wrapper=True)


@intrinsic
def _f64_bits(typingctx, x):
    """The bits of float64 x as an int64."""
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _f32_bits(typingctx, x):
    """The bits of float32 x as an int32."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))
    return types.int32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, u):
    """The float32 whose bits are int32 u."""
    if u != types.int32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


_MAG64 = np.int64(0x7FFFFFFFFFFFFFFF)
_FRAC64 = np.int64((1 << 52) - 1)


@njit(**_JIT)
def _code(a, m, bias):
    """The magnitude bits a (int64, float64 layout, finite) rounded to nearest even in a format
    with m mantissa bits and exponent bias `bias`: (biased exponent << m) + mantissa, unbounded
    above (a carry into the exponent is the next binade; the caller saturates)."""
    e = a >> 52
    sig = (a & _FRAC64) | (np.int64(1 << 52) if e != 0 else np.int64(0))
    biased = e - 1023 + bias
    eff = max(biased, np.int64(1))      # subnormals of the format: exponent field 0
    shift = min(52 - m + (eff - biased), np.int64(62))
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    return ((eff - 1) << m) + q


@njit(**_JIT)
def _split(x):
    """(magnitude bits, sign, is NaN, is inf) of x rounded to float32, in float64 layout."""
    b = _f64_bits(np.float64(np.float32(x)))
    a = b & _MAG64
    special = (a >> 52) == 2047
    return a, b < 0, special and (a & _FRAC64) != 0, special and (a & _FRAC64) == 0


@njit(**_JIT)
def enc_e4m3fn(x, sat):
    a, neg, nan, inf = _split(x)
    s = np.int64(0x80) if neg else np.int64(0)
    if nan:
        return np.uint8(0x7F | s)
    c = np.int64(0x7F) if inf else _code(a, 3, 7)
    if c > 0x7E:
        c = np.int64(0x7E) if sat else np.int64(0x7F)
    return np.uint8(c | s)


@njit(**_JIT)
def enc_e4m3fnuz(x, sat):
    a, neg, nan, inf = _split(x)
    c = np.int64(0x80) if inf else _code(a, 3, 8)
    if nan or (c > 0x7F and not sat):
        return np.uint8(0x80)
    c = min(c, np.int64(0x7F))
    return np.uint8(c | (0x80 if neg and c != 0 else 0))


@njit(**_JIT)
def enc_e5m2(x, sat):
    a, neg, nan, inf = _split(x)
    s = np.int64(0x80) if neg else np.int64(0)
    if nan:
        return np.uint8(0x7E | s)
    c = np.int64(0x7C) if inf else _code(a, 2, 15)
    if c > 0x7B:
        c = np.int64(0x7B) if sat else np.int64(0x7C)
    return np.uint8(c | s)


@njit(**_JIT)
def enc_e5m2fnuz(x, sat):
    a, neg, nan, inf = _split(x)
    c = np.int64(0x80) if inf else _code(a, 2, 16)
    if nan or (c > 0x7F and not sat):
        return np.uint8(0x80)
    c = min(c, np.int64(0x7F))
    return np.uint8(c | (0x80 if neg and c != 0 else 0))


@njit(**_JIT)
def enc_e2m1(x, sat):
    """float4 E2M1 (no inf or NaN): saturates whatever `sat` says, as ml_dtypes."""
    a, neg, nan, inf = _split(x)
    if nan:
        return np.uint8(0 if neg else 8)
    c = np.int64(7) if inf else min(_code(a, 1, 1), np.int64(7))
    return np.uint8(c | (8 if neg else 0))


@njit(**_JIT)
def enc_e8m0(x, sat, mode):
    """float8 E8M0 as ONNX's reference (numpy_helper.to_float8e8m0) from x as float32:
    mode 0 rounds up, 1 to nearest, 2 down; NaN and inf -> 0xFF."""
    b = np.int64(_f32_bits(np.float32(x)))
    e = (b >> 23) & 0xFF
    if e == 0xFF:
        return np.uint8(0xFF)
    up = False
    if mode == 0:
        up = (b & 0x7FFFFF) != 0
    elif mode == 1:
        up = ((b & 0x400000) != 0) and ((b & 0x200000) != 0 or (b & 0x1FFFFF) != 0 or e > 0)
    if up and not (sat and e == 0xFE):
        e += 1
    return np.uint8(e)


@njit(**_JIT)
def _pow2(k):
    """2.0**k as float32 for -149 <= k <= 127, exactly (built from its bits)."""
    if k >= -126:
        return _bits_f32(np.int32((k + 127) << 23))
    return _bits_f32(np.int32(1 << (k + 149)))


@njit(**_JIT)
def _decode(b, m, bias):
    """The value of a sign-magnitude binary code b (sign at bit 1 + e + m) with m mantissa bits,
    no specials."""
    e = (b >> m) & ((0x80 >> m) - 1)
    frac = b & ((1 << m) - 1)
    sig = frac + ((1 << m) if e != 0 else 0)
    return np.float32(sig) * _pow2(max(e, 1) - bias - m)


_NAN = np.int32(0x7FC00000)


@njit(**_JIT)
def dec_e4m3fn(b):
    b = np.int32(b)
    mag = _bits_f32(_NAN) if (b & 0x7F) == 0x7F else _decode(b & 0x7F, 3, 7)
    return -mag if b & 0x80 else mag


@njit(**_JIT)
def dec_e4m3fnuz(b):
    b = np.int32(b)
    if b == 0x80:
        return _bits_f32(_NAN)
    mag = _decode(b & 0x7F, 3, 8)
    return -mag if b & 0x80 else mag


@njit(**_JIT)
def dec_e5m2(b):
    b = np.int32(b)
    a = b & 0x7F
    if a > 0x7C:
        mag = _bits_f32(_NAN)
    elif a == 0x7C:
        mag = np.float32(np.inf)
    else:
        mag = _decode(a, 2, 15)
    return -mag if b & 0x80 else mag


@njit(**_JIT)
def dec_e5m2fnuz(b):
    b = np.int32(b)
    if b == 0x80:
        return _bits_f32(_NAN)
    mag = _decode(b & 0x7F, 2, 16)
    return -mag if b & 0x80 else mag


@njit(**_JIT)
def dec_e2m1(b):
    b = np.int32(b)
    mag = _decode(b & 0x7, 1, 1)
    return -mag if b & 0x8 else mag


@njit(**_JIT)
def dec_e8m0(b):
    b = np.int32(b)
    if b == 0xFF:
        return _bits_f32(_NAN)
    return _pow2(b - 127)


@njit(**_JIT)
def dec_int4(b):
    return np.int8(((np.int32(b) & 0xF) ^ 8) - 8)


@njit(**_JIT)
def dec_uint4(b):
    return np.uint8(np.int32(b) & 0xF)


@njit(**_JIT)
def dec_int2(b):
    return np.int8(((np.int32(b) & 0x3) ^ 2) - 2)


@njit(**_JIT)
def dec_uint2(b):
    return np.uint8(np.int32(b) & 0x3)


@njit(**_JIT)
def low_bits(v, mask):
    """Integer v (int64) wrapped to the bits in `mask`, as a uint8 bit pattern."""
    return np.uint8(v & mask)


@njit(**_JIT)
def f2low(x, mask):
    """Float x truncated to int32 (NaN, out of range -> 0), wrapped to the bits in `mask`."""
    if x >= -2147483648.0 and x < 2147483648.0:
        return np.uint8(np.int64(x) & mask)
    return np.uint8(0)
