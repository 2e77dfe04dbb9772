"""Activation epilogues of the Conv kernels beyond Relu: Clip (ReLU6 and any other constant
bounds) and HardSwish, folded into the Conv by ``ops/nn.py``'s peepholes.

``act`` codes: 0 none, 1 Relu, 2 Clip to ``bounds`` (lo, hi), 3 HardSwish with ``bounds`` its
(alpha, beta).  Clip is np.clip's order (maximum with lo, then minimum with hi: hi wins when
lo > hi; NaN stays NaN); HardSwish is x * min(max(alpha * x + beta, 0), 1) in x's type, NaN
propagating, as the fused elementwise kernel computes it.

The 1x1 (``sgemm.conv1x1_packed_*``), depthwise (``depthwise.depthwise_conv``) and stride-2
direct (``conv_s2.conv_s2``) kernels apply it while the output block is still in cache; the
other Conv kernels (Winograd, im2col, the generic one) run with act 0 and ``conv_*_act`` apply
it in place on their fresh output (one pass, no second output array):
kernels/conv_epilogue.py.
"""
import numpy as np
from numba import njit
from numba.extending import intrinsic

from .simd import F32xNType, vfma, vmul, vrelu_if, vsplat, vzero

from . import JIT as _JIT
RELU, CLIP, HARDSWISH = 1, 2, 3
NO_BOUNDS = (0.0, 0.0)  # the bounds argument of act 0 / 1 (unused)


@njit(inline="always", **_JIT)
def act1(v, act, lo, hi, zero, one):
    """One value through the epilogue (lo, hi, zero, one of v's type)."""
    if act == RELU:
        return zero if v < zero else v
    if act == CLIP:
        t = lo if v < lo else v
        return hi if t > hi else t
    if act == HARDSWISH:
        t = lo * v + hi
        t = one if t > one else t
        t = zero if t < zero else t
        return v * t
    return v


@njit(inline="always", **_JIT)
def act_run(yf, off, n, act, bounds):
    """yf[off:off+n] = act(yf[off:off+n]) in place; one loop per code so each vectorizes."""
    t = yf.dtype.type
    lo, hi, zero, one = t(bounds[0]), t(bounds[1]), t(0), t(1)
    o = np.uint64(off)
    if act == RELU:
        for i in range(np.uint64(n)):
            v = yf[o + i]
            yf[o + i] = zero if v < zero else v
    elif act == CLIP:
        for i in range(np.uint64(n)):
            v = yf[o + i]
            v = lo if v < lo else v
            yf[o + i] = hi if v > hi else v
    elif act == HARDSWISH:
        for i in range(np.uint64(n)):
            v = yf[o + i]
            s = lo * v + hi
            s = one if s > one else s
            s = zero if s < zero else s
            yf[o + i] = v * s


@njit(inline="always", **_JIT)
def act_rows(yf, off, rows, cols, ld, act, bounds):
    """act in place on a (rows, cols) block of flat yf with row stride ld."""
    for r in range(rows):
        act_run(yf, off + r * ld, cols, act, bounds)


@njit(**_JIT)
def act_inplace(y, act, bounds):
    """act on all of a C-contiguous array, in place; returns it."""
    if act != 0:
        act_run(y.reshape(y.size), 0, y.size, act, bounds)
    return y


# -- the same on float32 vectors (kernels/simd.py), for the SIMD kernels ------------------------
@intrinsic
def vclip(typingctx, a, lo, hi):
    """(a < lo ? lo : a), then (> hi ? hi : it), lane-wise: np.clip's order, NaN stays NaN.
    Vectors of any one width."""
    if not (isinstance(a, F32xNType) and lo == a and hi == a):
        return None

    def codegen(context, builder, sig, args):
        v, lo_, hi_ = args
        t = builder.select(builder.fcmp_ordered("<", v, lo_), lo_, v)
        return builder.select(builder.fcmp_ordered(">", t, hi_), hi_, t)
    return a(a, a, a), codegen


@njit(inline="always", **_JIT)
def vact(v, act, lo, hi):
    """act on a 16-lane vector; lo, hi: vectors of the bounds (HardSwish: alpha, beta)."""
    return vact_n(v, act, lo, hi, vzero(), vsplat(np.float32(1.0)))


@njit(inline="always", **_JIT)
def vact_n(v, act, lo, hi, zero, one):
    """vact on vectors of any one width (zero, one: vectors of 0 and 1 of that width)."""
    if act == RELU:
        return vrelu_if(v, True)
    if act == CLIP:
        return vclip(v, lo, hi)
    if act == HARDSWISH:
        return vmul(v, vclip(vfma(lo, v, hi), zero, one))
    return v


@njit(inline="always", **_JIT)
def flat_res(res, y):
    """The residual flattened, or an empty array for none.  Parallel regions get this, never
    an Optional: Numba 0.68 lowers an Optional array captured by a prange body wrongly (the
    residual was dropped on some calls)."""
    if res is None:
        return np.empty(0, y.dtype)
    return res.reshape(res.size)


# The epilogue's operands into place without Numba's slice assignment: `biasf[:m] = bias` or
# `y[:] = res` makes Numba compile its shape-mismatch error (a message formatting the shapes)
# the first time a process types such a store, ~3 s of CPU, and ~1-1.5 s more for each further
# rank it meets (Zen 3; a fresh compile worker or test process pays it again), where these
# loops type in a few tens of milliseconds.  Mismatched operands still raise a ValueError.
@njit(**_JIT)
def load_bias(biasf, bias, n):
    """biasf[:n] = bias (n values, or one broadcast to n): a kernel's bias padded into its
    zero-filled buffer."""
    if bias.shape[0] == n:
        for i in range(n):
            biasf[i] = bias[i]
    elif bias.shape[0] == 1:
        for i in range(n):
            biasf[i] = bias[0]
    else:
        raise ValueError("bias length does not match the kernel's output channels / columns")


@njit(**_JIT)
def res_flat(y, res):
    """res (of y's shape) as a flat C-contiguous array, for kernels that copy each part of it
    into y right before they accumulate onto that part (on the thread that computes it: one
    serial copy of the whole residual first was the part of ResNet-50's residual convs that
    two threads did not speed up)."""
    if res.shape != y.shape:
        raise ValueError("residual shape does not match the kernel's output")
    return np.ascontiguousarray(res).reshape(res.size)


@njit(**_JIT)
def load_res(y, res):
    """y[...] = res for a C-contiguous y of res's shape (the residual a kernel accumulates
    onto)."""
    rf = res_flat(y, res)
    yf = y.reshape(y.size)
    for i in range(yf.shape[0]):
        yf[i] = rf[i]


@njit(**_JIT)
def copy_block(dst, src, off, rows, cols, ld):
    """dst[off + r * ld + j] = src[same] for r < rows, j < cols (a block of two flat arrays
    laid out alike), on unsigned indices (no wraparound check per element)."""
    for r in range(rows):
        o = np.uint64(off + r * ld)
        for j in range(np.uint64(cols)):
            dst[o + j] = src[o + j]


@njit(**_JIT)
def copy_into(dst, src):
    """dst[...] = src for arrays of one shape, any layouts (load_res says why not a slice
    store)."""
    if dst.shape != src.shape:
        raise ValueError("copy_into: the shapes differ")
    for idx in np.ndindex(dst.shape):
        dst[idx] = src[idx]
