"""Quantization ops: (De)QuantizeLinear, DynamicQuantizeLinear and the integer/QLinear
MatMul and Conv.

Integer products are computed exactly in float64 (zero points subtracted first) with the float
MatMul/Conv kernels, then rounded half to even and saturated like the reference.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from .. import scalar_expr as S
from .. import steps as E
from ..ir import BIT_TYPES, NUMBA_DTYPES, Value
from ..kernels import shapes
from ..registry import peephole, register
from .elementwise import BIT_FLOATS, BIT_INTS, bit_value
from .nn import as5, matmul_operand, view

F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
NARROW = {np.dtype(np.float16): "round_f16"}    # the kernels/scalar.py rounding to the type


def _reshape(ctx, v, shape):
    """`v` reshaped (no copy; folded when constant)."""
    shape = tuple(int(d) for d in shape)
    if v.shape == shape:
        return v
    if v.is_const:
        return ctx.constant(v.const.reshape(shape))
    return ctx.call(E.reshape(v, shape), shape=shape, dtype=v.dtype, view=True)


def _axis(ctx, axis, rank):
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _param(ctx, v, x_shape, axis, block_size, what):
    """A scale / zero point reshaped or expanded to broadcast against x (reference semantics)."""
    if v is None or v.rank == 0:
        return v
    if v.size == 1:
        return _reshape(ctx, v, ())
    axis = _axis(ctx, axis, len(x_shape))
    if not block_size:
        if v.rank != 1 or v.size != x_shape[axis]:
            ctx.fail(f"{what} of shape {v.shape} does not match axis {axis} of {x_shape}")
        return _reshape(ctx, v, tuple(v.size if i == axis else 1 for i in range(len(x_shape))))
    n, blocks = x_shape[axis], v.shape[axis] if v.rank == len(x_shape) else -1
    same = v.shape[:axis] + v.shape[axis + 1:] == tuple(x_shape[:axis] + x_shape[axis + 1:])
    if block_size < 0 or not same or blocks != -(-n // block_size):
        ctx.fail(f"{what} of shape {v.shape} does not block {x_shape} by {block_size} "
                 f"on axis {axis}")
    three = (int(np.prod(x_shape[:axis])), blocks, int(np.prod(x_shape[axis + 1:])))
    expr = E.lib("quantize", "block_expand", E.reshape(v, three), n, int(block_size))
    return ctx.call(expr.reshape(tuple(x_shape)), shape=x_shape, dtype=v.dtype)


def _quant_dtype(ctx, zp, output_dtype):
    dtype = zp.dtype if zp is not None else (
        helper.tensor_dtype_to_np_dtype(output_dtype) if output_dtype else np.dtype(np.uint8))
    dtype = np.dtype(dtype)
    if dtype in BIT_TYPES and BIT_TYPES[dtype] != "float8_e8m0fnu":
        return dtype
    if dtype not in NUMBA_DTYPES or dtype.kind not in "iu":
        ctx.fail(f"quantized type {dtype} is not supported")
    return dtype


def _quantize_bits(ctx, q, inputs, zp, dtype, saturate):
    """QuantizeLinear into a type held as bit patterns, q a scalar expression over the operands
    of inputs (reference semantics: integers saturate to their range and add the zero point;
    float8 rounds with Cast's saturation, no zero point; float4 adds its zero point and
    saturates)."""
    name = BIT_TYPES[dtype]
    if name in BIT_INTS:
        value, mask = BIT_INTS[name]
        bits = int(np.log2(mask + 1))
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if value.kind == "i" else (0, mask)
        zp_operand = S.operand(len(inputs)) if zp is not None else S.lit(0)
        inputs = list(inputs) + ([bit_value(ctx, zp)] if zp is not None else [])
        saturated = S.lib("quantize", "saturate", q, zp_operand, S.lit(float(lo)), S.lit(float(hi)))
        expr = S.lib("narrow", "low_bits", S.convert(np.int64, saturated), S.lit(mask))
        return ctx.elementwise(expr, *inputs, dtype=dtype)
    kind = BIT_FLOATS[name]
    if kind == "e2m1" and zp is not None:
        q = S.paren(q + S.operand(len(inputs)))
        inputs = list(inputs) + [bit_value(ctx, zp)]
    expr = S.lib("narrow", f"enc_{kind}", q, S.lit(bool(saturate)))
    return ctx.elementwise(expr, *inputs, dtype=dtype)


def _requantize(ctx, q_expr, inputs, zp, dtype):
    """elementwise saturate(q_expr + zp) to the integer dtype; q_expr a scalar expression over
    the operands of inputs."""
    info = np.iinfo(dtype)
    zp_operand = S.operand(len(inputs)) if zp is not None else S.lit(0)
    inputs = list(inputs) + ([zp] if zp is not None else [])
    expr = S.lib("quantize", "saturate", q_expr, zp_operand, S.lit(float(info.min)),
                 S.lit(float(info.max)))
    return ctx.elementwise(expr, *inputs, dtype=dtype)


@register("QuantizeLinear", 10)
def QuantizeLinear(ctx, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0,
                   output_dtype=0, precision=0):
    dtype = _quant_dtype(ctx, y_zero_point, output_dtype)
    scale = _param(ctx, y_scale, x.shape, axis, block_size, "y_scale")
    zp = _param(ctx, y_zero_point, x.shape, axis, block_size, "y_zero_point")
    v, s = S.operands(2)
    q = v / s
    if precision:
        p = helper.tensor_dtype_to_np_dtype(precision)
        q = S.convert(p, v) / S.convert(p, s)
    elif x.dtype in NARROW:
        q = S.lib("scalar", NARROW[x.dtype], q)   # the quotient of narrow floats is rounded
    if dtype in BIT_TYPES:
        return _quantize_bits(ctx, q, [x, scale], zp, dtype, saturate)
    return _requantize(ctx, q, [x, scale], zp, dtype)


@register("DequantizeLinear", 10)
def DequantizeLinear(ctx, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
    bits = BIT_TYPES.get(x.dtype)
    if (bits is None and x.dtype.kind not in "iu") or bits == "float8_e8m0fnu":
        ctx.fail(f"quantized type {x.dtype} is not supported")
    out = helper.tensor_dtype_to_np_dtype(output_dtype) if output_dtype else x_scale.dtype
    scale = _param(ctx, x_scale, x.shape, axis, block_size, "x_scale")
    zp = _param(ctx, x_zero_point, x.shape, axis, block_size, "x_zero_point")
    if bits is not None:
        # held as bit patterns: computed from the values; float8 and float4 have no zero point
        # (the reference ignores theirs: float8's must be 0)
        x = bit_value(ctx, x)
        zp = bit_value(ctx, zp) if zp is not None and bits in BIT_INTS else None
    v, s, z = S.operands(3)
    if zp is None:
        return ctx.elementwise(S.convert(np.float32, v) * s, x, scale, dtype=out)
    # float32(x) - zp computes in numpy's promotion of float32 with the zero point's type
    t = np.result_type(np.float32, zp.dtype)
    return ctx.elementwise((S.convert(t, S.convert(np.float32, v)) - S.convert(t, z)) * s,
                           x, scale, zp, dtype=out)


@register("DynamicQuantizeLinear", 11)
def DynamicQuantizeLinear(ctx, x):
    if x.dtype != np.float32:
        ctx.fail(f"dtype {x.dtype} is not supported (float32 only)")
    expr = E.lib("quantize", "dynamic_quantize", E.reshape(x, (x.size,)), x.shape)
    return ctx.call_multi(expr, outs=[(x.shape, np.uint8), ((), np.float32), ((), np.uint8)])


# ---- integer MatMul / Conv: exact float64 products of zero-point-centred operands -------------
def _centred(ctx, v, zp):
    """float64(v - zp), zp broadcast into v's shape."""
    a, b = S.operands(2)
    if zp is None:
        return ctx.elementwise(S.convert(F64, a), v, dtype=F64)
    out = ctx.elementwise(S.convert(F64, a) - S.convert(F64, b), v, zp, dtype=F64)
    if out.shape != v.shape:
        ctx.fail(f"zero point of shape {zp.shape} does not fit an input of shape {v.shape}")
    return out


def _squeeze(ctx, v):
    """A one-element parameter as 0-d (it then broadcasts against any rank)."""
    return _reshape(ctx, v, ()) if v is not None and v.size == 1 else v


def _per_row(ctx, v, rows):
    """A scalar-like parameter squeezed to 0-d, a 1-D per-row one reshaped to (rows, 1)."""
    if v is None or v.rank == 0 or v.size == 1:
        return _squeeze(ctx, v)
    if v.rank == 1:
        if v.size != rows:
            ctx.fail(f"per-row parameter of shape {v.shape} does not match {rows} rows")
        return _reshape(ctx, v, (rows, 1))
    return v


def _matmul_f64(ctx, a, b):
    try:
        plan = shapes.matmul_plan(a.shape, b.shape)
    except ValueError as exc:
        ctx.fail(str(exc))
    lhs = matmul_operand(a, plan.a_pre, plan.a_full, plan.a3)
    rhs = matmul_operand(b, plan.b_pre, plan.b_full, plan.b3)
    expr = E.lib("matmul", "matmul3", lhs, rhs).reshape(plan.out)
    return ctx.call(expr, a, b, shape=plan.out, dtype=F64)


def _scale_expr(dtype):
    """a_scale * b_scale / y_scale over operands 1, 2, 3, in the scales' own precision."""
    _, a, b, y = S.operands(4)
    r = NARROW.get(np.dtype(dtype))
    return S.lib("scalar", r, S.lib("scalar", r, a * b) / y) if r else a * b / y


def _int_types(ctx, *values):
    for v in values:
        if v is not None and v.dtype.kind not in "iu":
            ctx.fail(f"dtype {v.dtype} of {v.name or 'an input'} is not an integer type")


def _int8_matmul(ctx, a, b, a_zero_point, b_zero_point):
    """MatMulInteger of uint8 activations by constant int8/uint8 weights (K, N) with scalar
    zero points: one exact int32 GEMM (kernels/qgemm.py, weights packed here), AVX512-VNNI or
    AVX2 as the target's ``int8_dot`` says; None when that does not apply."""
    from ..kernels import qgemm
    kind = ctx.target.int8_dot
    scalar = lambda v: v is None or v.size == 1   # noqa: E731
    if (kind is None or a.dtype != np.uint8 or a.rank < 2 or not b.is_const or b.rank != 2
            or b.dtype not in (np.dtype(np.int8), np.dtype(np.uint8))
            or a.shape[-1] != b.shape[0] or b.shape[0] >= qgemm.MAX_K
            or not scalar(a_zero_point) or not scalar(b_zero_point)
            or (b_zero_point is not None and not b_zero_point.is_const)
            or (a_zero_point is not None and a_zero_point.dtype != np.uint8)):
        return None
    k, n = b.shape
    zb = 0 if b_zero_point is None else int(b_zero_point.const.reshape(-1)[0])
    rows = int(np.prod(a.shape[:-1]))
    za = a_zero_point if a_zero_point is not None else ctx.constant(np.zeros((), np.uint8))
    if kind == "vnni":
        bp, colsum, zb = qgemm.pack_b_s8(b.const, zb)
        consts = [bp, colsum]
    else:
        packed = qgemm.pack_b_madd(b.const, zb)
        if packed is None:          # weights too wide for vpmaddubsw's int16 pairs
            return None
        bp, colsum, zb, fix = packed
        consts = [bp, colsum, fix]
    meta = {"kind": "qgemm", "kernel": "qgemm_u8s8" if kind == "vnni" else "qgemm_u8s8_madd",
            "rows_k": (rows, k), "zb": int(zb), "n": int(n), "out": tuple(a.shape[:-1]) + (n,),
            "slots": 2 + len(consts), "f32": False, "scaled": False, "bias": False}
    return ctx.record(_qgemm_op(meta), a, za, *(ctx.constant(c) for c in consts),
                      shape=meta["out"], dtype=I32, meta=meta)


def _qgemm_op(meta):
    """The call of a qgemm step, from its meta: int32 sums, or (``f32``: a Cast to float32, a
    Mul by a one-element scale and an Add of a bias vector folded in by the peepholes below)
    the float32 layer output, scale and bias in the two slots after the kernel's own."""
    args = [E.contiguous(E.slot(0)).reshape(meta["rows_k"])]
    args += [E.slot(i) for i in range(1, 4)] + [meta["zb"], meta["n"]]
    args += [E.slot(i) for i in range(4, meta["slots"])]
    kernel = meta["kernel"]
    if meta["f32"]:
        kernel += "_f32"
        args += [E.slot(meta["slots"]), E.slot(meta["slots"] + 1)]
    return E.ArrayExpr(E.lib("qgemm", kernel, *args).reshape(meta["out"]))


def _qgemm_step(ctx, x, f32):
    """The qgemm step making `x` (its int32 sums, or with f32 its float32 output) when nothing
    else reads `x`, else None."""
    step = getattr(x, "producer", None)
    if (step is None or step.meta.get("kind") != "qgemm" or step.meta["f32"] != f32
            or len(step.outs) != 1 or ctx.uses(x) != 1):
        return None
    return step


@peephole("Cast")
def cast_into_qgemm(ctx, x, to, saturate=1, round_mode="up"):
    """MatMulInteger -> Cast to float32, as quantize_dynamic writes a dense layer: the GEMM
    writes float32, and may take the scale (Mul) and bias (Add) after it. The step moves to
    the end of the program: steps recorded since (the scale's own Mul of the two scales, in
    quantize_dynamic's node order) do not read its sums, which only this Cast reads."""
    step = _qgemm_step(ctx, x, False)
    steps = ctx.program.steps
    at = next((i for i, s in enumerate(steps) if s is step), None)
    if at is None or to != TensorProto.FLOAT:
        return None
    steps.append(steps.pop(at))
    step.meta["f32"] = True
    step.inputs += [ctx.constant(np.ones(1, np.float32)), ctx.constant(np.zeros(0, np.float32))]
    step.op = _qgemm_op(step.meta)
    step.nodes.append(ctx.label)
    out = Value(x.shape, np.dtype(np.float32), name=ctx.node.output[0])
    out.producer = step
    step.outs[0] = out
    return out


def _qgemm_f32_step(ctx, x):
    step = _qgemm_step(ctx, x, True)
    return step if step is not None and step is ctx.program.steps[-1] else None


@peephole("Mul")
def scale_into_qgemm(ctx, a, b, **legacy):
    """qgemm (float32) * one-element float32 scale (a run-time Value: the activations' scale
    times the weights'): the product is scaled as it is converted."""
    if legacy:
        return None
    for x, c in ((a, b), (b, a)):
        step = _qgemm_f32_step(ctx, x)
        if (step is None or step.meta["scaled"] or step.meta["bias"] or c is None
                or c.dtype != np.float32 or c.size != 1 or c.rank > x.rank):
            continue
        step.inputs[step.meta["slots"]] = c
        step.meta["scaled"] = True
        step.nodes.append(ctx.label)
        return x
    return None


@peephole("Add")
def bias_into_qgemm(ctx, a, b, **legacy):
    """qgemm (float32, scaled or not) + constant float32 vector along the last axis."""
    if legacy:
        return None
    for x, c in ((a, b), (b, a)):
        step = _qgemm_f32_step(ctx, x)
        if step is None:
            continue
        n = x.shape[-1]
        if (step.meta["bias"] or c is None or not c.is_const
                or c.dtype != np.float32 or c.rank > x.rank
                or any(d != 1 for d in c.shape[:-1]) or (c.shape and c.shape[-1] not in (1, n))):
            continue
        bias = np.broadcast_to(c.const.reshape(-1), (n,)).astype(np.float32)
        step.inputs[step.meta["slots"] + 1] = ctx.constant(bias)
        step.meta["bias"] = True
        step.nodes.append(ctx.label)
        return x
    return None


@register("MatMulInteger", 10)
def MatMulInteger(ctx, a, b, a_zero_point=None, b_zero_point=None):
    _int_types(ctx, a, b, a_zero_point, b_zero_point)
    fast = _int8_matmul(ctx, a, b, a_zero_point, b_zero_point)
    if fast is not None:
        return fast
    rows = a.shape[-2] if a.rank >= 2 else 1
    ac = _centred(ctx, a, _per_row(ctx, a_zero_point, rows))
    bc = _centred(ctx, b, _squeeze(ctx, b_zero_point))
    return ctx.elementwise(S.operand(0), _matmul_f64(ctx, ac, bc), dtype=I32)


@register("QLinearMatMul", 10)
def QLinearMatMul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                  y_zero_point=None):
    _int_types(ctx, a, b, a_zero_point, b_zero_point, y_zero_point)
    rows = a.shape[-2] if a.rank >= 2 else 1
    c = _matmul_f64(ctx, _centred(ctx, a, _per_row(ctx, a_zero_point, rows)),
                    _centred(ctx, b, _squeeze(ctx, b_zero_point)))
    params = [_per_row(ctx, a_scale, rows), _squeeze(ctx, b_scale), _squeeze(ctx, y_scale)]
    q = S.operand(0) * S.convert(F64, _scale_expr(a_scale.dtype))
    dtype = y_zero_point.dtype if y_zero_point is not None else a.dtype
    return _requantize(ctx, q, [c] + params, _squeeze(ctx, y_zero_point), dtype)


def _conv_f64(ctx, x, w, b, auto_pad, dilations, group, kernel_shape, pads, strides):
    """Float64 Conv of centred operands; b is a float64 bias Value or None."""
    if x.rank < 3 or w.rank != x.rank:
        ctx.fail(f"input ranks {x.rank} and {w.rank} are not a batch of images and a kernel")
    kernel = tuple(kernel_shape) if kernel_shape is not None else tuple(w.shape[2:])
    s, p, d, out = shapes.conv_geometry(auto_pad, x.shape[2:], kernel, strides, dilations, pads)
    if b is None:
        b = ctx.constant(np.zeros(w.shape[0], F64))
    # the canonical form Conv's lowering passes (one compiled signature per dtype): 5-D
    # operands and output, 3-entry geometry, act and an empty residual given
    shape = (x.shape[0], w.shape[0]) + tuple(out)
    y = ctx.kernel(("conv", "conv"), as5(ctx, x), as5(ctx, w), b, shapes.spatial3(s),
                   shapes.pads6(p), shapes.spatial3(d), int(group), 0,
                   ctx.constant(np.empty((0,) * 5, F64)), shape=shapes.shape5(shape), dtype=F64)
    return view(ctx, y, shape)


def _per_channel(ctx, v, w, lead):
    """A scalar-like parameter as 0-d; a 1-D per-output-channel one shaped to broadcast against
    the kernel (lead=0) or the output (lead=1)."""
    if v is None or v.rank == 0 or v.size == 1:
        return _squeeze(ctx, v)
    if v.rank != 1 or v.size != w.shape[0]:
        ctx.fail(f"per-channel parameter of shape {v.shape} does not match {w.shape[0]} channels")
    return _reshape(ctx, v, (v.size,) + (1,) * (w.rank - 1 - lead))


@register("ConvInteger", 10)
def ConvInteger(ctx, x, w, x_zero_point=None, w_zero_point=None, auto_pad="NOTSET",
                dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    _int_types(ctx, x, w, x_zero_point, w_zero_point)
    xc = _centred(ctx, x, _squeeze(ctx, x_zero_point))
    wc = _centred(ctx, w, _per_channel(ctx, w_zero_point, w, 0))
    y = _conv_f64(ctx, xc, wc, None, auto_pad, dilations, group, kernel_shape, pads, strides)
    return ctx.elementwise(S.operand(0), y, dtype=I32)


@register("QLinearConv", 10)
def QLinearConv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                y_zero_point=None, B=None, auto_pad="NOTSET", dilations=None, group=1,
                kernel_shape=None, pads=None, strides=None):
    _int_types(ctx, x, w, x_zero_point, w_zero_point, y_zero_point, B)
    xc = _centred(ctx, x, _squeeze(ctx, x_zero_point))
    wc = _centred(ctx, w, _per_channel(ctx, w_zero_point, w, 0))
    bias = ctx.elementwise(S.convert(F64, S.operand(0)), B, dtype=F64) if B is not None else None
    y = _conv_f64(ctx, xc, wc, bias, auto_pad, dilations, group, kernel_shape, pads, strides)
    params = [_squeeze(ctx, x_scale), _per_channel(ctx, w_scale, w, 1), _squeeze(ctx, y_scale)]
    q = S.operand(0) * S.convert(F64, _scale_expr(x_scale.dtype))
    dtype = y_zero_point.dtype if y_zero_point is not None else x.dtype
    return _requantize(ctx, q, [y] + params, _squeeze(ctx, y_zero_point), dtype)
