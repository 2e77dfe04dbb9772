"""Scalar helpers of fused CUDA kernels: the `__k_scalar.*` names that shared elementwise
lowerings (ops/elementwise.py) write into their expressions, as CUDA device functions.

Where onnxjit's CPU helper (kernels/scalar.py) is self-contained, its Python function is compiled
for the device as is, so both targets share one definition; the rest are written here.
"""
import math

import numpy as np
from numba import cuda

from ...kernels import scalar as _cpu


def _device(fn):
    return cuda.jit(device=True)(fn)


def _shared(dispatcher):
    """The CPU helper's Python function as a device function."""
    return _device(dispatcher.py_func)


maximum = _shared(_cpu.maximum)
minimum = _shared(_cpu.minimum)
erf_f32 = _shared(_cpu.erf_f32)
int_div = _shared(_cpu.int_div)
uint_div = _shared(_cpu.uint_div)
int_mod = _shared(_cpu.int_mod)
f2i32 = _shared(_cpu.f2i32)
f2i64 = _shared(_cpu.f2i64)
f2u32 = _shared(_cpu.f2u32)
shift_left = _shared(_cpu.shift_left)
shift_right = _shared(_cpu.shift_right)
sshift_left = _shared(_cpu.sshift_left)
sshift_right = _shared(_cpu.sshift_right)


@_device
def int_fmod(a, b):
    """np.fmod for signed integers: C remainder (sign of the dividend); 0 when b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a - int_div(a, b) * b


@_device
def f2u64(x):
    """float -> uint64; negatives wrap, too large -> 0, NaN / very negative -> 2**63."""
    if x >= 18446744073709551616.0:
        return np.uint64(0)
    if x >= 9223372036854775808.0:
        return np.uint64(x)
    return np.uint64(f2i64(x))


@_device
def round_f16(x):
    """x rounded to float16 and held in float32 (the hardware's cvt.rn.f16.f32)."""
    return np.float32(np.float16(x))


@_device
def sigmoid_f32(x):
    """1 / (1 + exp(-x)) of a float32 (the CPU's polynomial exp is for its vector units; the GPU's
    expf is one instruction sequence): 0 where exp(-x) overflows, NaN for NaN."""
    return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))
