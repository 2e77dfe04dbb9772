"""The Conv kernels without a Clip / HardSwish epilogue of their own (Winograd, im2col, the
generic one): the kernel with act 0, then the activation in place on its fresh output
(kernels/epilogue.py's codes; same arguments as the kernel, plus bounds).  The stride-2 direct
kernel applies it in its own epilogue (``conv_s2_act`` only hands it the bounds).

The act 0 handed down is ``I0`` (an int64), not a literal 0: a literal is a type of its own, so
the kernel would compile once more than for the plain-int act that the driver passes (Winograd's
conv3x3 ~9 s)."""
import numpy as np
from numba import njit

from . import conv, conv_packed, conv_s2, winograd
from .epilogue import act_inplace
from .parallel import I0

from . import JIT as _JIT


@njit(**_JIT)
def winograd_act(x, u, b, pads, act, res, gemm, bounds):
    return act_inplace(winograd.conv3x3(x, u, b, pads, I0, res, gemm), act, bounds)


@njit(**_JIT)
def winograd_blas_act(x, u, b, pads, act, res, gemm, bounds):
    return act_inplace(winograd.conv3x3_blas(x, u, b, pads, I0, res, gemm), act, bounds)


@njit(**_JIT)
def winograd_avx2_act(x, u, b, pads, act, res, gemm, bounds):
    return act_inplace(winograd.conv3x3_avx2(x, u, b, pads, I0, res, gemm), act, bounds)


@njit(**_JIT)
def conv_s2_act(x, wq, m, kernel, bias, pads, act, res, bounds):
    return conv_s2.conv_s2(x, wq, m, kernel, bias, pads, act, res, bounds)   # in its epilogue


@njit(**_JIT)
def conv_packed_act(x, wp, m, kernel, bias, strides, pads, dilations, act, res, bounds):
    return act_inplace(conv_packed.conv_packed(x, wp, m, kernel, bias, strides, pads,
                                               dilations, I0, res), act, bounds)


@njit(**_JIT)
def conv_act(x, w, b, strides, pads, dilations, group, act, res, bounds):
    y = conv.conv(x, w, b, strides, pads, dilations, group, I0, res)
    return act_inplace(np.ascontiguousarray(y), act, bounds)
