"""CUDA lowerings of the compute-heavy ops: MatMul, Gemm, Conv (im2col + GEMM), pooling,
Softmax / LogSoftmax and LayerNormalization. Steps record GEMM operands as flat buffers read
through strides at per-batch offsets (cuda/kernels/gemm.py), so transposes, broadcast batches
and convolution groups need no copies."""
from __future__ import annotations

import numpy as np

from ..kernels import shapes
from ..ops.elementwise import _cast
from ..ops.movement import norm_axis, prod
from ..ops.nn import pool_geometry
from .ops import broadcast_to, cuda_op, floats, one, step, view

GEMM_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint32,
                                     np.uint64)}


def gemm_step(ctx, a, b, bias, shape, m, n, k, offsets, strides, alpha=1, beta=1,
              bias_strides=(0, 0), extra_outs=(), **params):
    """One "gemm" step: out[z] (m, n) = alpha * A[z] @ B[z] + beta * bias for each batch z.
    `offsets` (aoff, boff, coff, biasoff) are per-batch element offsets, `strides` (sam, sak,
    sbk, sbn, scm) read A, B and write C."""
    aoff, boff, coff, biasoff = (np.asarray(o, np.int64) for o in offsets)
    dtype = np.dtype(a.dtype).type
    inputs = [a, b] + ([bias] if bias is not None else [])
    outs = step(ctx, "gemm", *inputs, outs=[(shape, a.dtype), *extra_outs], m=m, n=n, k=k,
                batch=len(aoff), aoff=aoff, boff=boff, coff=coff, biasoff=biasoff,
                strides=tuple(int(s) for s in strides), bias_strides=tuple(bias_strides),
                alpha=dtype(alpha), beta=dtype(beta), has_bias=bias is not None, **params)
    return outs


def _batch_offsets(dims, full, strides_of):
    """Per output batch (row-major over `full`), the offset of an operand with batch `dims`
    (size-1 dims broadcast) whose batches are `strides_of` elements apart."""
    offsets = []
    for index in np.ndindex(*full) if full else [()]:
        flat = 0
        for i, d in zip(index, dims):
            flat = flat * d + (i if d != 1 else 0)
        offsets.append(flat * strides_of)
    return offsets


@cuda_op("MatMul", 1)
def MatMul(ctx, a, b):
    if a.dtype not in GEMM_DTYPES or b.dtype != a.dtype:
        ctx.fail(f"dtypes {a.dtype} x {b.dtype} are not supported on CUDA")
    try:
        plan = shapes.matmul_plan(a.shape, b.shape)
    except ValueError as exc:
        ctx.fail(str(exc))
    A, B = plan.a_pre, plan.b_pre
    m, k, n = A[-2], A[-1], B[-1]
    full = tuple(y if x == 1 else x for x, y in zip(A[:-2], B[:-2]))   # 1 broadcasts to 0
    if prod(B[:-2]) == 1 and prod(A[:-2]) > 1:   # weights shared by every batch: one tall GEMM
        m, full = prod(A[:-1]), ()
    aoff = _batch_offsets(A[:-2], full, m * k) if full else [0]
    boff = _batch_offsets(B[:-2], full, k * n) if full else [0]
    coff = [z * m * n for z in range(len(aoff))]
    return gemm_step(ctx, a, b, None, plan.out, m, n, k, (aoff, boff, coff, [0] * len(aoff)),
                     (k, 1, n, 1, n))[0]


@cuda_op("Gemm", 1)
def Gemm(ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0, broadcast=0):
    floats(ctx, a, b, c)
    m, k = (a.shape[1], a.shape[0]) if transA else a.shape
    n = b.shape[0] if transB else b.shape[1]
    strides = ((1, m) if transA else (k, 1)) + ((1, k) if transB else (n, 1)) + (n,)
    bias_strides = (0, 0)
    if c is not None:
        cm, cn = (1,) * (2 - c.rank) + tuple(c.shape)
        if (cm not in (1, m)) or (cn not in (1, n)):
            ctx.fail(f"C of shape {list(c.shape)} does not broadcast to {[m, n]}")
        bias_strides = (cn if cm != 1 else 0, 1 if cn != 1 else 0)
    return gemm_step(ctx, a, b, c, (m, n), m, n, k, ([0], [0], [0], [0]), strides, alpha, beta,
                     bias_strides)[0]


def _spatial3(values, fill):
    """A per-spatial-dim tuple padded in front to three dims."""
    values = tuple(int(v) for v in values)
    return (fill,) * (3 - len(values)) + values


@cuda_op("Conv", 1)
def Conv(ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None):
    floats(ctx, x, w, b)
    if not 3 <= x.rank <= 5 or w.rank != x.rank:
        ctx.fail(f"Conv of rank {x.rank} is not supported on CUDA (1-D to 3-D)")
    kernel = tuple(kernel_shape) if kernel_shape else tuple(w.shape[2:])
    s, p, d, out = shapes.conv_geometry(auto_pad, x.shape[2:], kernel, strides, dilations, pads)
    g, (n_, c), m = int(group), x.shape[:2], w.shape[0]
    if c % g or m % g or w.shape[1] != c // g:
        ctx.fail(f"weights {list(w.shape)} do not fit {c} input channels in {g} groups")
    kk, p_count = prod(kernel), prod(out)
    ckk = c * kk
    shape = (n_, m) + tuple(out)
    direct = kk == 1 and all(v == 1 for v in s) and not any(p)
    geometry = dict(c=c, ins=_spatial3(x.shape[2:], 1), k=_spatial3(kernel, 1),
                    outs=_spatial3(out, 1), s=_spatial3(s, 1), p=_spatial3(p[:len(s)], 0),
                    d=_spatial3(d, 1))
    scratch = [] if direct else [((n_, ckk, p_count), x.dtype)]
    mg, cg = m // g, ckk // g
    zs = [(i, j) for i in range(n_) for j in range(g)]
    offsets = ([j * mg * cg for i, j in zs], [i * ckk * p_count + j * cg * p_count for i, j in zs],
               [i * m * p_count + j * mg * p_count for i, j in zs], [j * mg for i, j in zs])
    return gemm_step(ctx, w, x, b, shape, mg, p_count, cg, offsets, (cg, 1, p_count, 1, p_count),
                     bias_strides=(1, 0), extra_outs=scratch,
                     im2col=None if direct else geometry, operands="conv")[0]


def _pool(ctx, x, kernel_shape, auto_pad, strides, dilations, pads, ceil_mode, is_max,
          count_include_pad=0):
    floats(ctx, x)
    if not 3 <= x.rank <= 5:
        ctx.fail(f"pooling of rank {x.rank} is not supported on CUDA (1-D to 3-D)")
    kernel = tuple(kernel_shape)
    s, p, d, out = pool_geometry(ctx, x, kernel, auto_pad, strides, dilations, pads, ceil_mode)
    r = len(s)
    return one(ctx, "pool", x, shape=x.shape[:2] + tuple(out), dtype=x.dtype,
               in_sp=_spatial3(x.shape[2:], 1), k=_spatial3(kernel, 1), out_sp=_spatial3(out, 1),
               s=_spatial3(s, 1), p=_spatial3(p[:r], 0), d=_spatial3(d, 1),
               e=_spatial3(p[r:], 0), is_max=bool(is_max), count_pad=bool(count_include_pad))


@cuda_op("MaxPool", 1)
def MaxPool(ctx, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None,
            pads=None, storage_order=0, strides=None):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        ctx.fail("MaxPool's Indices output is not supported on CUDA")
    dtype = x.dtype
    if dtype in (np.dtype(np.int8), np.dtype(np.uint8)):   # exact in float32, as on the CPU
        x = _cast(ctx, x, np.float32)
    y = _pool(ctx, x, kernel_shape, auto_pad, strides, dilations, pads, ceil_mode, True)
    return _cast(ctx, y, dtype)


@cuda_op("AveragePool", 1)
def AveragePool(ctx, x, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                kernel_shape=None, pads=None, strides=None):
    return _pool(ctx, x, kernel_shape, auto_pad, strides, dilations, pads, ceil_mode, False,
                 count_include_pad)


def _softmax(ctx, x, axis, coerce, log):
    floats(ctx, x)
    axis = norm_axis(ctx, axis, max(x.rank, 1))
    if coerce:
        dims = (prod(x.shape[:axis]), prod(x.shape[axis:]), 1)
    else:
        dims = (prod(x.shape[:axis]), x.shape[axis], prod(x.shape[axis + 1:]))
    return one(ctx, "softmax", x, shape=x.shape, dtype=x.dtype, dims=dims, log=bool(log))


def _softmax_family(op_type, log):
    @cuda_op(op_type, 1)
    def coerced(ctx, x, axis=1):
        return _softmax(ctx, x, axis, True, log)

    @cuda_op(op_type, 13)
    def single_axis(ctx, x, axis=-1):
        return _softmax(ctx, x, axis, False, log)

    coerced.__name__ = single_axis.__name__ = op_type


_softmax_family("Softmax", False)
_softmax_family("LogSoftmax", True)


def _row_param(ctx, v, x, norm_shape):
    """A parameter as a flat vector over the normalized shape (broadcast on the device)."""
    if v.dtype != x.dtype:
        ctx.fail(f"{v.name or 'a parameter'} has dtype {v.dtype}, the input has {x.dtype}")
    try:
        fits = np.broadcast_shapes(v.shape, norm_shape) == tuple(norm_shape)
    except ValueError:
        fits = False
    if not fits:
        ctx.fail(f"{v.name or 'a parameter'} of shape {list(v.shape)} does not broadcast to "
                 f"{list(norm_shape)}")
    if v.size == prod(norm_shape):
        return v
    if v.is_const:
        return ctx.constant(np.ascontiguousarray(np.broadcast_to(v.const, norm_shape)))
    return broadcast_to(ctx, v, norm_shape)


@cuda_op("LayerNormalization", 17)
def LayerNormalization(ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    floats(ctx, x)
    axis = norm_axis(ctx, axis, x.rank)
    rows, cols = prod(x.shape[:axis]), prod(x.shape[axis:])
    stat = x.shape[:axis] + (1,) * (x.rank - axis)
    params = [_row_param(ctx, v, x, x.shape[axis:]) for v in (scale, bias) if v is not None]
    wanted = any(ctx.node.output[1:])
    outs = [(x.shape, x.dtype)] + ([(stat, x.dtype), (stat, x.dtype)] if wanted else [])
    values = step(ctx, "layernorm", x, *params, outs=outs, rows=rows, cols=cols,
                  eps=np.dtype(x.dtype).type(epsilon), has_bias=bias is not None, stats=wanted)
    return values if wanted else values[0]


@cuda_op("BatchNormalization", 1)
def BatchNormalization(ctx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9, spatial=1,
                       is_test=1, consumed_inputs=None, training_mode=0):
    """The shared (elementwise) lowering; statistics computed at run time are first viewed
    along the channel axis here (the CPU lowering reshapes them with a CPU call)."""
    from ..ops.elementwise import BatchNormalization as shared
    if not all(v.is_const or v.rank > 1 for v in (scale, bias, mean, var)):
        per_channel = (x.shape[1],) + (1,) * (x.rank - 2)
        scale, bias, mean, var = (v if v.rank > 1 else view(ctx, v, per_channel)
                                  for v in (scale, bias, mean, var))
    return shared(ctx, x, scale, bias, mean, var, epsilon=epsilon, training_mode=training_mode)


@cuda_op("Dropout", 1)
def Dropout(ctx, x, ratio=None, training_mode=None, is_test=0, consumed_inputs=None, seed=None):
    """Inference: the input itself, and a mask of ones when asked for (training mode only
    with a constant ratio of 0)."""
    if training_mode is not None:
        if not training_mode.is_const:
            ctx.fail("training_mode must be a constant on CUDA")
        if bool(training_mode.const) and (ratio is None or not ratio.is_const
                                          or float(ratio.const) != 0.0):
            ctx.fail("training mode with a non-zero ratio is random and not supported")
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return x
    mask_dtype = np.dtype(np.bool_ if ctx.opset >= 10 else x.dtype)
    mask = one(ctx, "fill", shape=x.shape, dtype=mask_dtype, value=np.ones(1, mask_dtype))
    return [x, mask]
