"""Scalar helpers called from fused loop bodies (numpy semantics for NaN, division, rounding)."""
import math

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def maximum(a, b):
    """np.maximum: NaN wins."""
    return a if (a >= b or a != a) else b


@njit(cache=True, inline="always")
def minimum(a, b):
    """np.minimum: NaN wins."""
    return a if (a <= b or a != a) else b


@njit(cache=True, inline="always")
def sigmoid(x):
    """1 / (1 + exp(-x)) without overflow warnings for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def int_div(a, b):
    """Integer division truncating toward zero (C semantics, as ONNX Div); 0 when b == 0."""
    if b == 0:
        return 0 * a
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


@njit(cache=True, inline="always")
def round_half_even(x):
    """np.round: halves to the even neighbour."""
    return np.round(x)
