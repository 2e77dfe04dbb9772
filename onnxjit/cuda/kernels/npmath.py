"""The `__np.*` names of shared elementwise expressions, for CUDA kernels.

numba.cuda compiles only some numpy ufuncs inside kernels (not np.exp, np.sqrt, np.floor ...),
so generated CUDA modules bind `__np` to this module: dtype constructors are numpy's, the math
is `math.*` (libdevice, type-preserving: float32 in, float32 out) or small device functions.
Under the simulator every thread runs in Python, where `math.exp(1e4)` raises instead of giving
inf: there the names are numpy's own ufuncs, which follow IEEE like the GPU.
"""
import math

import numpy as np
from numba import cuda

from ..target import simulator

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
bool_ = np.bool_
inf, nan = math.inf, math.nan


def _device(fn):
    return cuda.jit(device=True)(fn)


@_device
def _rint(x):
    """Round half to even (ONNX Round); integers, inf and NaN pass through."""
    f = math.floor(x)
    if f == x or x != x:
        return x
    r = math.floor(x + 0.5)
    if r - x == 0.5 and math.fmod(r, 2.0) != 0.0:
        r -= 1.0
    return r


@_device
def _sign(x):
    if x != x:
        return x
    return (x > 0) - (x < 0)


@_device
def _mod(a, b):
    """np.mod for floats: the remainder takes the divisor's sign."""
    r = math.fmod(a, b)
    if r != 0 and (r < 0) != (b < 0):
        r += b
    return r


if simulator():
    exp, log, sqrt, tanh = np.exp, np.log, np.sqrt, np.tanh
    sin, cos, tan, arcsin, arccos, arctan = np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan
    sinh, cosh, arcsinh, arccosh, arctanh = np.sinh, np.cosh, np.arcsinh, np.arccosh, np.arctanh
    floor, ceil, rint, sign, log1p, expm1 = np.floor, np.ceil, np.rint, np.sign, np.log1p, np.expm1
    fmod, mod = np.fmod, np.mod
else:
    exp, log, sqrt, tanh = math.exp, math.log, math.sqrt, math.tanh
    sin, cos, tan = math.sin, math.cos, math.tan
    arcsin, arccos, arctan = math.asin, math.acos, math.atan
    sinh, cosh, arcsinh, arccosh, arctanh = math.sinh, math.cosh, math.asinh, math.acosh, math.atanh
    floor, ceil, rint, sign = math.floor, math.ceil, _rint, _sign
    log1p, expm1 = math.log1p, math.expm1
    fmod, mod = math.fmod, _mod
