"""Neural-network ops lowered to library kernels: Conv, ConvTranspose, pools, LRN, MatMul, Gemm."""
from __future__ import annotations

import math

import numpy as np

from ..ir import Value, const_value
from ..kernels import conv_packed, conv_s2, depthwise, gemm_avx2, pool, sgemm, shapes, winograd
from ..kernels.epilogue import NO_BOUNDS
from .. import steps as E
from ..registry import finalizer, peephole, register
from ..steps import ArrayExpr, LibraryCall, Param
from .elementwise import _cast

from ..ir import NARROW_FLOATS

# float16/bfloat16 are held in float32 arrays, so the float32 kernels serve them too.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64)) + tuple(NARROW_FLOATS)
MATMUL_DTYPES = FLOATS + tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))


def _float_only(ctx, *values):
    for v in values:
        if v is not None and v.dtype not in FLOATS:
            ctx.fail(f"dtype {v.dtype} is not supported (float32/float64 only)")


def _kernel_shape(ctx, x, w, kernel_shape):
    if kernel_shape is not None:
        if w is not None and tuple(kernel_shape) != tuple(w.shape[2:]):
            ctx.fail(f"kernel_shape {list(kernel_shape)} does not match W's {list(w.shape[2:])}")
        return tuple(kernel_shape)
    if w is None:
        ctx.fail("kernel_shape is required")
    return tuple(w.shape[2:])


def _check_groups(ctx, x, w, b, group, transpose):
    """X [N, C, ...], W [M, C/group, k...] (ConvTranspose: [C, M/group, k...]), B [M]."""
    group = int(group)
    if x.rank < 3 or w.rank != x.rank:
        ctx.fail(f"X has rank {x.rank} and W rank {w.rank}: both must be the same, 3 or more")
    c = x.shape[1]
    if group < 1 or c % group:
        ctx.fail(f"group={group} does not divide the {c} input channels")
    if transpose:
        if w.shape[0] != c:
            ctx.fail(f"W has {w.shape[0]} input channels, X has {c}")
        m = w.shape[1] * group
    else:
        m = w.shape[0]
        if w.shape[1] * group != c or m % group:
            ctx.fail(f"W {list(w.shape)} with group={group} does not fit X's {c} channels "
                     f"(W's dim 1 must be {c // group}, dim 0 a multiple of {group})")
    if b is not None and (b.rank != 1 or b.shape[0] != m):
        ctx.fail(f"B has shape {list(b.shape)}, expected [{m}]")


def _bias(ctx, b, channels, dtype):
    return b if b is not None else ctx.constant(np.zeros(channels, dtype))


def view(ctx, v, shape, kind=None):
    """`v` reshaped to `shape` for a kernel's canonical form: v itself when it has that shape, a
    constant reshaped now, the array v is a view of when that has the shape (a 5-D output viewed
    back, read by the next kernel), else a view step (from the Python driver a shared movement
    kernel; inlined in compiled code) of meta kind `kind`, which specialize drops when nothing
    reads it ("drop_unread")."""
    shape = tuple(int(d) for d in shape)
    if v.shape == shape:
        return v
    if v.is_const:
        return ctx.constant(v.const.reshape(shape))
    step = v.producer
    if step is not None and step.meta.get("drop_unread") and step.inputs[0].shape == shape:
        return step.inputs[0]
    return ctx.call(E.contiguous(v).reshape(shape), v, shape=shape, dtype=v.dtype, view=True,
                    meta={"kind": kind, "drop_unread": True})


def as5(ctx, v):
    """An (N, C, *S) Value in the canonical 5-D form the pool and Conv kernels take
    (shapes.shape5: one compiled signature per dtype whatever the spatial rank)."""
    if not 3 <= v.rank <= 5:
        ctx.fail(f"{v.name or 'an input'} has rank {v.rank}: the kernels take 1 to 3 spatial "
                 "dims (rank 3 to 5)")
    return view(ctx, v, shapes.shape5(v.shape))


def _before(ctx, step, make, *args):
    """make(*args), the steps it records moved before `step` (which reads what they make)."""
    steps = ctx.program.steps
    n = len(steps)
    value = make(*args)
    made = steps[n:]
    del steps[n:]
    at = next(i for i, s in enumerate(steps) if s is step)
    steps[at:at] = made
    return value


@register("Conv", 1)
def Conv(ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None):
    _float_only(ctx, x, w, b)
    _check_groups(ctx, x, w, b, group, transpose=False)
    kernel = _kernel_shape(ctx, x, w, kernel_shape)
    s, p, d, out = shapes.conv_geometry(auto_pad, x.shape[2:], kernel, strides, dilations, pads)
    shape = (x.shape[0], w.shape[0]) + tuple(out)
    meta = {"kind": "conv", "geometry": (s, p, d, int(group)), "act": 0, "res": False,
            "bounds": NO_BOUNDS,   # Clip's (lo, hi) / HardSwish's (alpha, beta) for act 2 / 3
            # one input channel per group and output: a direct per-channel kernel (MobileNet,
            # ShuffleNet) instead of im2col and a 1-row GEMM per channel
            "depthwise": group == x.shape[1] == w.shape[0] and w.shape[1] == 1 and group > 1,
            "layout": None,   # how the weights were transformed at the end (_transform_weights)
            "plan": None}     # ... and how they will be
    meta["plan"] = _conv_plan(ctx.target, x, w, kernel, s, d, p, int(group), out,
                              meta["depthwise"])
    meta["wgemm"] = winograd.point_gemm(ctx.target, x.dtype)   # Winograd's point GEMMs
    # the SIMD 3x3 depthwise kernel, where it measured faster (kernels/depthwise.py)
    meta["dw3"] = meta["depthwise"] and depthwise.use_depthwise3x3(x.shape, x.dtype, kernel, s,
                                                                   d, False, ctx.target)
    meta["canonical"] = False     # operands as given; _to_canonical makes them 5-D
    y = ctx.record(_conv_op(meta), x, w, _bias(ctx, b, w.shape[0], x.dtype),
                   shape=shape, dtype=x.dtype, meta=meta)
    return _to_canonical(ctx, y.producer) if _canonical(meta) else y


def _conv_plan(target, x, w, kernel, s, d, p, group, out, depthwise):
    """The fast kernel a Conv with constant weights runs on `target`, as (layout, argument)
    for _transform_weights, or None for the im2col + BLAS kernel (kernels/conv.py)."""
    if not w.is_const or x.dtype not in (np.float32, np.float64) or depthwise:
        return None
    if kernel == (3, 3) and s == (1, 1) and d == (1, 1) and group == 1:
        m = winograd.use_winograd(x.shape[1], w.shape[0], out[0], out[1], x.shape[0])
        if m:
            return ("winograd", m)
    if x.dtype != np.float32 or target.f32_gemm is None or x.shape[1] == 0 or w.size == 0:
        return None
    if target.f32_gemm == "avx2":
        # every 2-D float32 Conv on the AVX2 GEMM (1-D / 3-D ones on conv.conv)
        return ("avx2", (w.shape[0], kernel)) if len(kernel) == 2 else None
    pointwise = (kernel == (1, 1) and s == (1, 1) and d == (1, 1) and p == (0, 0, 0, 0)
                 and group == 1)
    if conv_s2.use_s2(x.shape[1], kernel, s, d, group, x.dtype, target):
        return ("s2", (w.shape[0], kernel))
    if pointwise:
        small = sgemm.conv1x1_small(out[0] * out[1], w.shape[0], x.shape[1])
        return ("packed_1x1", (w.shape[0], "small" if small else "cols"))
    return ("packed", (w.shape[0], kernel))


# A Conv step's inputs: the image, the weights, the bias and (once residual_into_conv folded an
# Add into it) the residual; its LibraryCall names them.
X, W, BIAS, RES = 0, 1, 2, 3

# The Conv kernels that take any spatial rank, called with the canonical 5-D operands and 3-entry
# geometry (one compiled signature per dtype); the others (Winograd, conv_s2, the 1x1 GEMMs, the
# 3x3 depthwise kernel) are for 2-D images only and take (N, C, H, W) as it is.
CANONICAL_CONVS = {("conv", "conv"), ("conv_epilogue", "conv_act"),
                   ("depthwise", "depthwise_conv"), ("conv_packed", "conv_packed"),
                   ("conv_epilogue", "conv_packed_act")}


def _canonical(meta):
    """Whether the Conv's final kernel (its weights transformed as meta["plan"] says, at the
    end) takes the canonical 5-D form."""
    final = dict(meta, layout=meta["plan"], canonical=False)
    return _conv_op(final).kernel in CANONICAL_CONVS


def _to_canonical(ctx, step):
    """Give the Conv step (the program's last) its canonical form: x, W and the residual as
    (N, C, D, H, W) views recorded before it (a constant W reshaped), 3-entry geometry, a 5-D
    output. Returns that output viewed in the node's shape (a step of meta kind "conv_view",
    through which _conv_step finds the Conv)."""
    step.meta["canonical"] = True
    step.op = _conv_op(step.meta)
    y = step.outs[0]
    if y.rank == 5:
        return y
    for i, v in enumerate(step.inputs):
        if v.rank == y.rank:        # x, W and the residual (the bias is a vector)
            step.inputs[i] = _before(ctx, step, as5, ctx, v)
    y5 = Value(shapes.shape5(y.shape), y.dtype, name=y.name)
    y5.producer, step.outs[0] = step, y5
    return view(ctx, y5, y.shape, kind="conv_view")


def _conv_step(ctx, x):
    """The Conv step making `x` (directly, or through the view of its canonical 5-D output)
    when nothing else reads `x` and it is the last step (ctx.sole_producer), else None."""
    step = ctx.sole_producer(x, "conv")
    if step is not None:
        return step
    out = ctx.sole_producer(x, "conv_view")
    steps = ctx.program.steps
    if out is None or len(steps) < 2 or steps[-2] is not out.inputs[0].producer:
        return None
    return steps[-2]


def _conv_op(meta):
    """The library call of a Conv step, from its meta (kernel chosen, epilogue folded in).

    act (kernels/epilogue.py): 0 none, 1 Relu, 2 Clip, 3 HardSwish.  The depthwise and 1x1
    kernels apply all four on the output block they just wrote; the others apply Relu and
    leave Clip / HardSwish to their ``conv_epilogue`` wrappers (in place, one pass)."""
    s, p, d, group = meta["geometry"]
    canonical = meta["canonical"]
    if canonical:
        s, p, d = shapes.spatial3(s), shapes.pads6(p), shapes.spatial3(d)
    act = (Param(meta["act"]), "act")
    bounds = (Param(tuple(float(v) for v in meta["bounds"])), "bounds")
    wrap = meta["act"] >= 2
    res = (RES if meta["res"] else Param(None), "residual")
    kind, arg = meta["layout"] or (None, None)
    x, w, b = (X, "x"), (W, "w"), (BIAS, "bias")
    pads = (Param(p), "pads")

    def call(module, function, *args):
        return LibraryCall((module, function), [a for a, _ in args], tuple(n for _, n in args))

    if meta["depthwise"] and not meta["res"] and meta["dw3"]:
        return call("depthwise", "depthwise3x3_f32", x, w, b, (Param(s), "strides"), pads, act,
                    bounds)
    if meta["depthwise"] and not meta["res"]:
        return call("depthwise", "depthwise_conv", x, w, b, (Param(s), "strides"), pads,
                    (Param(d), "dilations"), act, bounds)
    if kind == "packed_1x1":
        m, product = arg
        return call("sgemm", f"conv1x1_packed_{product}", x, w, (Param(m), "m"), b, act, res,
                    bounds)
    if kind == "avx2":
        m, kernel = arg
        return call("gemm_avx2", "conv_avx2", x, w, (Param(m), "m"), (Param(kernel), "kernel"),
                    (Param(s), "strides"), pads, (Param(d), "dilations"), (Param(group), "group"),
                    b, act, res, bounds)
    if kind == "winograd":
        gemm = (Param(meta["wgemm"]), "gemm")
        # the entry named by the point GEMM: conv3x3_blas / conv3x3_avx2 compile without the
        # AVX-512 kernels
        suffix = {winograd.GEMM_BLAS: "_blas", winograd.GEMM_AVX2: "_avx2"}.get(meta["wgemm"], "")
        if wrap:
            return call("conv_epilogue", f"winograd{suffix}_act", x, w, b, pads, act, res, gemm,
                        bounds)
        return call("winograd", f"conv3x3{suffix}", x, w, b, pads, act, res, gemm)
    if kind == "s2":
        m, kernel = arg
        args = (x, w, (Param(m), "m"), (Param(kernel), "kernel"), b, pads, act, res, bounds)
        if wrap:
            return call("conv_epilogue", "conv_s2_act", *args)
        # the bounds always passed: an omitted default is a type of its own (one more compile)
        return call("conv_s2", "conv_s2", *args)
    if kind == "packed":
        m, kernel = arg
        kernel = shapes.spatial3(kernel) if canonical else kernel
        args = (x, w, (Param(m), "m"), (Param(kernel), "kernel"), b, (Param(s), "strides"),
                pads, (Param(d), "dilations"), act, res)
        if wrap:
            return call("conv_epilogue", "conv_packed_act", *args, bounds)
        return call("conv_packed", "conv_packed", *args)
    # the residual always passed (None until _finalize_conv gives an empty array for none)
    args = (x, w, b, (Param(s), "strides"), pads, (Param(d), "dilations"),
            (Param(group), "group"), act, res)
    if wrap:
        return call("conv_epilogue", "conv_act", *args, bounds)
    return call("conv", "conv", *args)


@finalizer("conv")
def _finalize_conv(step):
    if step.meta["plan"] is not None:
        _transform_weights(step, step.meta["plan"])
    elif not step.meta["res"] and "residual" in step.op.names:
        _empty_residual(step)


def _empty_residual(step):
    """No residual: an empty one, so that the convs with and without one share a compiled kernel
    (None is a type of its own: ResNet-50 compiled conv1x1_packed and conv_packed twice each,
    ~22 s at first use)."""
    x = step.value("x")
    step.inputs.append(const_value(np.empty((0,) * x.rank, x.dtype)))   # slot RES
    step.meta["res"] = "empty"
    step.op = _conv_op(step.meta)


def _transform_weights(step, plan):
    """Give the Conv its final (folded) weights in the layout its fast kernel reads.

    ("winograd", m): 3x3 stride-1 convs where Winograd F(m x m, 3 x 3) measured faster get
    U = G g G^T.  ("packed_1x1", M): 1x1 stride-1 float32 convs run on onnxjit's AVX-512 GEMM
    (kernels/sgemm.py) with W packed in 32-channel panels: 0.8-1.1x ORT's time, against 1.0-1.5x
    through OpenBLAS.  ("s2", (M, kernel)): stride-2 float32 convs with few taps (the stems
    of SqueezeNet, ShuffleNet, ResNet), direct (kernels/conv_s2.py).  ("packed", (M, kernel)):
    the other float32 convs, im2col on the same GEMM (kernels/conv_packed.py), each group's
    weights packed alike.  ("avx2", (M, kernel)): the 2-D float32 convs on AVX2
    (kernels/gemm_avx2.py, ``conv_avx2``): W (M, C/group * KH * KW) as it is.
    """
    w = step.value("w")
    if not w.is_const:
        return
    kind, arg = plan
    if kind == "winograd":
        packed = winograd.winograd_weights(w.const, arg)
        if step.meta["wgemm"] == winograd.GEMM_AVX2:
            packed = winograd.avx2_weights(packed)
    elif kind == "s2":
        packed = conv_s2.pack_s2(w.const)
    elif kind == "packed":
        packed = conv_packed.pack_conv(w.const, step.meta["geometry"][3])
    elif kind == "avx2":
        packed = np.ascontiguousarray(w.const.reshape((arg[0], -1)), np.float32)
    else:
        packed = sgemm.pack_a(w.const.reshape((arg[0], -1)))
    step.set_value("w", const_value(packed))
    step.meta["layout"] = plan
    if not step.meta["res"]:
        _empty_residual(step)
    step.op = _conv_op(step.meta)


@peephole("Relu")
def relu_into_conv(ctx, x):
    """Conv -> Relu becomes one Conv with a Relu epilogue when nothing else reads the Conv."""
    step = _conv_step(ctx, x)
    if step is None or step.meta["act"]:
        return None
    step.meta["act"] = 1
    step.op = _conv_op(step.meta)
    step.nodes.append(ctx.label)
    return x


def _const_bound(ctx, v, default):
    """A Clip bound as a float: `default` when absent, None when not a constant scalar (or
    NaN, which np.clip propagates to every element)."""
    if v is None:
        return default
    if not getattr(v, "is_const", False) or np.size(v.const) != 1:
        return None
    b = float(np.asarray(v.const).reshape(()))
    return None if np.isnan(b) else b


def _activation_into_conv(ctx, x, act, bounds):
    """Conv -> act (kernels/epilogue.py's codes 2, 3) as the Conv's epilogue when nothing else
    reads the Conv.  float32 / float64 only (narrow floats round between the two)."""
    step = _conv_step(ctx, x)
    if step is None or step.meta["act"] or x.dtype not in (np.float32, np.float64):
        return None
    step.meta["act"], step.meta["bounds"] = act, bounds
    step.op = _conv_op(step.meta)
    step.nodes.append(ctx.label)
    return x


@peephole("Clip")
def clip_into_conv(ctx, x, lo=None, hi=None, min=None, max=None,  # noqa: A002
                   consumed_inputs=None):
    """Conv -> Clip with constant bounds (ReLU6) becomes the Conv's epilogue: Clip-11's inputs
    or Clip-1/6's attributes (Clip-6's defaults: the float32 range)."""
    if np.dtype(x.dtype).kind != "f":       # an integer Clip (a Conv's output is float)
        return None
    if _conv_step(ctx, x) is None:    # before reading bounds of any other Clip
        return None
    if ctx.opset < 11:
        big = 3.4028234663852886e38 if ctx.opset >= 6 else np.inf
        lo_b = -big if min is None else float(min)
        hi_b = big if max is None else float(max)
        if np.isnan(lo_b) or np.isnan(hi_b):
            return None
    else:
        lo_b, hi_b = _const_bound(ctx, lo, -np.inf), _const_bound(ctx, hi, np.inf)
        if lo_b is None or hi_b is None:
            return None
    # the bounds are x's type (Clip's min/max are): exact in float64
    lo_b, hi_b = (float(np.array(b, x.dtype)) for b in (lo_b, hi_b))
    return _activation_into_conv(ctx, x, 2, (lo_b, hi_b))


@peephole("HardSwish")
def hardswish_into_conv(ctx, x):
    """Conv -> HardSwish becomes the Conv's epilogue (alpha float32(1/6), as the elementwise
    HardSwish and onnx's reference take it, beta 0.5)."""
    return _activation_into_conv(ctx, x, 3, (float(np.float32(1 / 6)), 0.5))


@peephole("Add")
@peephole("Sum")
def residual_into_conv(ctx, *inputs, **legacy):
    """Conv + r (Add, or a 2-input Sum; r has the same shape and dtype) adds r in the epilogue.

    Only the last step can take the Add, so r is always computed before the Conv runs.  A Relu
    after the Add still fuses (relu_into_conv): y = relu(conv + bias + r).  Narrow floats keep
    their separate rounding, so they are left alone.
    """
    if len(inputs) != 2 or legacy:    # opset < 7 broadcast/axis attributes: left alone
        return None
    a, b = inputs
    for x, r in ((a, b), (b, a)):
        step = _conv_step(ctx, x)
        if (step is None or step.meta["act"] or step.meta["res"] or r is x
                or r.shape != x.shape or r.dtype != x.dtype or x.dtype in NARROW_FLOATS):
            continue
        step.meta["res"] = True
        if step.meta["canonical"]:
            r = _before(ctx, step, as5, ctx, r)
        step.inputs.append(r)             # slot RES
        step.nodes.append(ctx.label)
        if not step.meta["canonical"] and _canonical(step.meta):
            # the 3x3 depthwise kernel takes no residual: the generic one, canonical, does
            return _to_canonical(ctx, step)
        step.op = _conv_op(step.meta)
        return x
    return None


def _channel_vector(x, c):
    """c as a length-C vector when it broadcasts over x (N, C, *S) per channel, else None."""
    if not c.is_const or c.rank > x.rank or x.rank < 2:
        return None
    shape = (1,) * (x.rank - c.rank) + tuple(c.shape)
    if shape[0] != 1 or shape[1] not in (1, x.shape[1]) or any(d != 1 for d in shape[2:]):
        return None
    return np.broadcast_to(c.const.reshape(shape[1]), (x.shape[1],))


def _foldable_conv(ctx, x, c):
    """The Conv step making `x` and c as a per-channel vector, when an affine op can fold."""
    step = _conv_step(ctx, x)
    if (step is None or step.meta["act"] or step.meta["res"] or x.dtype in NARROW_FLOATS
            or c.dtype != x.dtype):
        return None, None
    vec = _channel_vector(x, c)
    w, b = step.value("w"), step.value("bias")
    if vec is None or not (w.is_const and b.is_const):
        return None, None
    return step, vec


@peephole("Mul")
def scale_into_conv(ctx, a, b, **legacy):
    """Conv * (constant per-channel scale) folds into the Conv's weights and bias."""
    if legacy:   # opset < 7 broadcast/axis attributes
        return None
    for x, c in ((a, b), (b, a)):
        step, vec = _foldable_conv(ctx, x, c)
        if step is not None:
            w, bias = step.value("w"), step.value("bias")
            scaled = w.const * vec.reshape((-1,) + (1,) * (w.rank - 1))
            step.set_value("w", ctx.constant(scaled.astype(w.dtype, copy=False)))
            step.set_value("bias", ctx.constant((bias.const * vec).astype(bias.dtype, copy=False)))
            step.nodes.append(ctx.label)
            return x
    return None


@peephole("Add")
def shift_into_conv(ctx, a, b, **legacy):
    """Conv + (constant per-channel shift) folds into the Conv's bias."""
    if legacy:
        return None
    for x, c in ((a, b), (b, a)):
        step, vec = _foldable_conv(ctx, x, c)
        if step is not None:
            bias = step.value("bias")
            step.set_value("bias", ctx.constant((bias.const + vec).astype(bias.dtype, copy=False)))
            step.nodes.append(ctx.label)
            return x
    return None


@peephole("BatchNormalization")
def batchnorm_into_conv(ctx, x, scale, bias, mean, var, epsilon=1e-5, training_mode=0, **_):
    """Conv -> BatchNormalization (inference, constant statistics) folds into the Conv's weights."""
    step = _conv_step(ctx, x)
    stats = (scale, bias, mean, var)
    if (step is None or step.meta["act"] or step.meta["res"] or training_mode
            or not all(v.is_const for v in stats)):
        return None
    w, b = step.value("w"), step.value("bias")
    if not (w.is_const and b.is_const):
        return None
    a = scale.const / np.sqrt(var.const + np.asarray(epsilon, var.dtype))
    w_new = w.const * a.reshape((-1,) + (1,) * (w.rank - 1))
    b_new = (b.const - mean.const) * a + bias.const
    step.set_value("w", ctx.constant(w_new.astype(w.dtype, copy=False)))
    step.set_value("bias", ctx.constant(b_new.astype(b.dtype, copy=False)))
    step.nodes.append(ctx.label)
    return x


@register("ConvTranspose", 1)
def ConvTranspose(ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                  kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                  strides=None):
    _float_only(ctx, x, w, b)
    _check_groups(ctx, x, w, b, group, transpose=True)
    kernel = _kernel_shape(ctx, x, w, kernel_shape)
    s, p, d, out = shapes.conv_transpose_geometry(auto_pad, x.shape[2:], kernel, strides,
                                                  dilations, pads, output_padding, output_shape)
    channels = w.shape[1] * group
    tiles = _conv_transpose_by_tiles(ctx, x, w, b, kernel, s, p, d, int(group), out, channels)
    if tiles is not None:
        return tiles
    shape = (x.shape[0], channels) + tuple(out)
    y = ctx.kernel(("conv", "conv_transpose"), as5(ctx, x), as5(ctx, w),
                   _bias(ctx, b, channels, x.dtype), shapes.spatial3(s), shapes.pads6(p),
                   shapes.spatial3(d), int(group), shapes.spatial3(out),
                   shape=shapes.shape5(shape), dtype=x.dtype,
                   names=("x", "w", "bias", "strides", "pads", "dilations", "group",
                          "output_shape"))
    return view(ctx, y, shape)


def _conv_transpose_by_tiles(ctx, x, w, b, kernel, s, p, d, group, out, channels):
    """A float32 2-D ConvTranspose whose kernel equals its stride (a decoder's 2x2 / stride 2
    upsampling: no overlap), constant weights, one group, no pads or dilation, on AVX-512 or
    AVX2: the 1x1 conv by W^T (C -> M*KH*KW channels) on onnxjit's GEMM kernels (sgemm's packed
    ones, gemm_avx2.conv_avx2), then each pixel's tile put in place with the bias
    (conv.tiles_to_image): no BLAS call (whose thread pool fought Numba's: kernels/conv's col2im
    path), threads in both. None where it does not apply."""
    if (x.dtype != np.float32 or x.rank != 4 or not w.is_const or group != 1
            or not ctx.target.f32_gemm or tuple(s) != tuple(kernel) or any(p)
            or any(v != 1 for v in d)
            or tuple(out) != (x.shape[2] * kernel[0], x.shape[3] * kernel[1]) or x.size == 0
            or w.size == 0):
        return None
    C, kk = x.shape[1], channels * kernel[0] * kernel[1]
    wt = np.ascontiguousarray(w.const.reshape(C, kk).T)     # (M*KH*KW, C): a 1x1 conv's W
    shape = (x.shape[0], kk) + tuple(x.shape[2:])
    if ctx.target.f32_gemm == "avx2":     # conv_avx2 as a 1x1 Conv calls it (one signature)
        cols = ctx.kernel(("gemm_avx2", "conv_avx2"), x, ctx.constant(wt), kk, (1, 1), (1, 1),
                          (0, 0, 0, 0), (1, 1), 1, ctx.constant(np.zeros(kk, np.float32)), 0,
                          ctx.constant(np.empty((0, 0, 0, 0), np.float32)), (0.0, 0.0),
                          shape=shape, dtype=np.float32,
                          names=("x", "w", "m", "kernel", "strides", "pads", "dilations", "group",
                                 "bias", "act", "residual", "bounds"))
        return _tiles_to_image(ctx, cols, b, channels, kernel, out, x)
    product = "small" if sgemm.conv1x1_small(x.shape[2] * x.shape[3], kk, C) else "cols"
    cols = ctx.kernel(("sgemm", f"conv1x1_packed_{product}"), x, ctx.constant(sgemm.pack_a(wt)),
                      kk, ctx.constant(np.zeros(kk, np.float32)), 0, None,
                      shape=shape, dtype=np.float32,
                      names=("x", "w", "m", "bias", "act", "residual"))
    return _tiles_to_image(ctx, cols, b, channels, kernel, out, x)


def _tiles_to_image(ctx, cols, b, channels, kernel, out, x):
    return ctx.kernel(("conv", "tiles_to_image"), cols, _bias(ctx, b, channels, x.dtype),
                      channels, int(kernel[0]), int(kernel[1]),
                      shape=(x.shape[0], channels) + tuple(out), dtype=np.float32,
                      names=("cols", "bias", "m", "kh", "kw"))


def pool_geometry(ctx, x, kernel_shape, auto_pad, strides, dilations, pads, ceil_mode):
    """shapes.pool_geometry for a pool node, refusing what its kernels and the oracles cannot
    agree on: a negative SAME padding (shapes.negative_same_pool_pad) and a padded input over
    the element limit (a kernel_shape of 2**31 under SAME_LOWER padded by as much)."""
    from ..errors import LimitError
    from ..validate import current_limit
    kernel = tuple(int(k) for k in kernel_shape)
    axis = shapes.negative_same_pool_pad(auto_pad, x.shape[2:], kernel, strides, dilations)
    if axis is not None:
        ctx.fail(f"{auto_pad} padding of spatial axis {axis} would be negative (strides "
                 f"{list(strides or [])} past the window {list(kernel)} on {list(x.shape[2:])}): "
                 "ONNX Runtime refuses it and the reference crops the input")
    s, p, d, out = shapes.pool_geometry(auto_pad, x.shape[2:], kernel, strides, dilations, pads,
                                        ceil_mode)
    k = len(kernel)
    padded = int(np.prod([n + p[i] + p[k + i] for i, n in enumerate(x.shape[2:])], dtype=object))
    padded *= int(x.shape[0]) * int(x.shape[1])
    if padded > current_limit():
        raise LimitError(f"{ctx.node.op_type} node {ctx.node.name!r}: kernel_shape {list(kernel)} "
                         f"pads the input to {padded:,} elements, over the element limit of "
                         f"{current_limit():,} (prepare(max_elements=...) or ONNXJIT_MAX_ELEMENTS)")
    return s, p, d, out


@register("MaxPool", 1)
def MaxPool(ctx, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None,
            pads=None, storage_order=0, strides=None):
    dtype = x.dtype
    if dtype in (np.dtype(np.int8), np.dtype(np.uint8)):  # opset 12+: exact in float32
        x = _cast(ctx, x, np.float32)
    _float_only(ctx, x)
    s, p, d, out = pool_geometry(ctx, x, kernel_shape, auto_pad, strides, dilations, pads,
                                 ceil_mode)
    shape = x.shape[:2] + tuple(out)
    # canonical form: 5-D x and output, 3-entry geometry (one compiled signature per dtype)
    x5, shape5 = as5(ctx, x), shapes.shape5(shape)
    geometry = shapes.window3(kernel_shape, s, p, d, out)
    names = ("x", "kernel", "strides", "pads", "dilations", "output_shape")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        y, idx = ctx.kernel(("pool", "maxpool_with_indices"), x5, *geometry, int(storage_order),
                            outs=[(shape5, x.dtype), (shape5, np.int64)],
                            names=names + ("storage_order",))
        # _cast returns y itself when dtype is y's
        return [_cast(ctx, view(ctx, y, shape), dtype), view(ctx, idx, shape)]
    kind = pool.scheme(x.shape, x.dtype, kernel_shape, s, p, d, out, ctx.target)
    y = ctx.kernel(("pool", f"maxpool_{kind}"), x5, *geometry, shape=shape5, dtype=x.dtype,
                   names=names)
    return _cast(ctx, view(ctx, y, shape), dtype)


@register("AveragePool", 1)
def AveragePool(ctx, x, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                kernel_shape=None, pads=None, strides=None):
    _float_only(ctx, x)
    s, p, d, out = pool_geometry(ctx, x, kernel_shape, auto_pad, strides, dilations, pads,
                                 ceil_mode)
    kind = pool.scheme(x.shape, x.dtype, kernel_shape, s, p, d, out, ctx.target)
    shape = x.shape[:2] + tuple(out)
    y = ctx.kernel(("pool", f"avgpool_{kind}"), as5(ctx, x),
                   *shapes.window3(kernel_shape, s, p, d, out), int(count_include_pad),
                   shape=shapes.shape5(shape), dtype=x.dtype,
                   names=("x", "kernel", "strides", "pads", "dilations", "output_shape",
                          "count_include_pad"))
    return view(ctx, y, shape)


def _global_pool(ctx, x, function):
    """GlobalAveragePool / GlobalMaxPool of (N, C, *S) with 1..3 spatial dims, canonical 5-D."""
    shape = x.shape[:2] + (1,) * (x.rank - 2)
    return view(ctx, ctx.kernel(("pool", function), as5(ctx, x), shape=shapes.shape5(shape),
                                dtype=x.dtype), shape)


@register("GlobalAveragePool", 1)
def GlobalAveragePool(ctx, x):
    _float_only(ctx, x)
    return _global_pool(ctx, x, "global_avgpool")


@register("GlobalMaxPool", 1)
def GlobalMaxPool(ctx, x):
    _float_only(ctx, x)
    return _global_pool(ctx, x, "global_maxpool")


@register("LRN", 1)
def LRN(ctx, x, size, alpha=0.0001, beta=0.75, bias=1.0):
    _float_only(ctx, x)
    y = ctx.kernel(("pool", "lrn"), as5(ctx, x), int(size), float(alpha), float(beta),
                   float(bias), shape=shapes.shape5(x.shape), dtype=x.dtype,
                   names=("x", "size", "alpha", "beta", "bias"))
    return view(ctx, y, x.shape)


def matmul_operand(x, pre, full, three):
    """A MatMul operand x (a Value or a slot) as the 3-D array matmul3 reads: reshaped to
    `pre`, broadcast to `full` (unless None), reshaped to `three`."""
    operand = E.reshape(x, pre)
    if full is not None:
        operand = E.contiguous(E.numpy("broadcast_to", operand, full))
    return E.contiguous(operand.reshape(three))


@register("MatMul", 1)
def MatMul(ctx, a, b):
    if a.dtype not in MATMUL_DTYPES or b.dtype != a.dtype:
        ctx.fail(f"dtypes {a.dtype} x {b.dtype} are not supported")
    try:
        plan = shapes.matmul_plan(a.shape, b.shape)
    except ValueError as exc:
        ctx.fail(str(exc))
    lhs = matmul_operand(E.slot(0), plan.a_pre, plan.a_full, plan.a3)
    rhs = matmul_operand(E.slot(1), plan.b_pre, plan.b_full, plan.b3)
    meta = {"kind": "matmul", "operands": (lhs, rhs), "out": plan.out, "bias": False, "act": 0,
            "packed": None, "bmm": None, "scale": 1.0}
    rows = int(np.prod(a.shape[:-1])) if a.rank >= 2 else 1
    if (a.dtype == np.float32 and b.is_const and b.rank == 2 and rows >= PACKED_MIN_ROWS
            and ctx.target.f32_gemm):
        # Constant weights: packed once here into 32-column panels for onnxjit's AVX-512 GEMM
        # (level with ORT's MLAS, 1.2-1.5x OpenBLAS on inference shapes), 16-column ones for
        # the AVX2 GEMM (kernels/gemm_avx2.py).
        meta["packed"] = (rows, b.shape[0], b.shape[1])
        b = ctx.constant(_pack_weights(ctx.target, b.const, meta))
    elif _use_bmm(ctx.target, a, b):
        return _lower_bmm(ctx, a, b, meta)
    elif a.dtype == np.float32 and ctx.target.f32_gemm == "avx2":
        meta["gemm"] = "gemm_avx2"      # run-time operands on the AVX2 GEMM (matmul3_avx2)
    return ctx.record(_matmul_op(meta), a, b, shape=plan.out, dtype=a.dtype, meta=meta)


def _pack_weights(target, b, meta):
    """Constant weights b (K, N) packed for the target's GEMM (``target.f32_gemm``): 16-column
    panels for kernels/gemm_avx2.py on AVX2 (meta["gemm"] names it), else 32-column ones for
    kernels/sgemm.py."""
    if target.f32_gemm == "avx2":
        meta["gemm"] = "gemm_avx2"
        return gemm_avx2.pack_b16(b)
    return sgemm.pack_b(b)


# The packed GEMM serves every row count: at 1 row (GEMV) it streams the weights as fast as
# OpenBLAS does (both at memory bandwidth) and keeps BLAS's thread pool out of the process.
PACKED_MIN_ROWS = 1
# Run-time operands go through kernels/bmm.py (B packed per call) from this many rows and
# columns on; below, packing B costs about as much as the product and BLAS is as fast.
BMM_MIN_ROWS, BMM_MIN_COLS = 8, 16


def _use_bmm(target, a, b):
    """float32 MatMul of run-time operands on AVX-512: onnxjit's batched GEMM (``bmm``)."""
    m = a.shape[-2] if a.rank >= 2 else 1
    n = b.shape[-1] if b.rank >= 2 else 1
    return (a.dtype == np.float32 and m >= BMM_MIN_ROWS and n >= BMM_MIN_COLS
            and a.shape[-1] > 0 and a.size > 0 and b.size > 0 and target.avx512)


def _c_strides(shape):
    """Element strides of a C-contiguous array of `shape`."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def _transposed_source(ctx, v):
    """(step, source, perm) when `v` is a Transpose's copy that only this MatMul reads: the
    MatMul can read `source` through permuted strides and the copy is dropped; else None."""
    step = v.producer
    if (step is None or step.kind != "call" or len(step.outs) != 1 or ctx.uses(v) != 1
            or step.meta.get("kind") != "transpose"):
        return None
    return step, step.inputs[0], step.meta["perm"]


def _batch_layout(shape, strides, batch):
    """Element offsets (one per batch index, C order over `batch`) of an operand whose batch dims
    `shape` (right-aligned to `batch`, size-1 dims broadcast) have element `strides`."""
    offs = np.zeros(tuple(batch), np.int64)
    pad = len(batch) - len(shape)
    for d, (size, stride) in enumerate(zip(shape, strides)):
        if size != 1:
            view = [1] * len(batch)
            view[pad + d] = size
            offs = offs + np.arange(size, dtype=np.int64).reshape(view) * stride
    return offs.reshape(-1)


def _operand_strides(ctx, v):
    """(Value to read, its logical element strides, transpose step to drop or None) for a
    MatMul operand: through a sole-reader Transpose's source when there is one."""
    found = _transposed_source(ctx, v)
    if found is None:
        return v, _c_strides(v.shape), None
    step, src, perm = found
    src_strides = _c_strides(src.shape)
    return src, [src_strides[p] for p in perm], step


def _lower_bmm(ctx, a, b, meta):
    """MatMul through ``__k_bmm.bmm``: both operands read in place by offsets and strides
    (a Transpose feeding only this MatMul is read through its source, and its copy dropped),
    numpy-matmul promotion and batch broadcasting included."""
    a_src, a_st, a_step = _operand_strides(ctx, a)
    b_src, b_st, b_step = _operand_strides(ctx, b)
    a_shape, b_shape = list(a.shape), list(b.shape)
    if a.rank == 1:      # (k,) -> (1, k)
        a_shape, a_st = [1] + a_shape, [0] + a_st
    if b.rank == 1:      # (k,) -> (k, 1)
        b_shape, b_st = b_shape + [1], b_st + [0]
    batch = [int(d) for d in np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))]
    m, k = a_shape[-2:]
    n = b_shape[-1]
    aoffs = _batch_layout(a_shape[:-2], a_st[:-2], batch)
    boffs = _batch_layout(b_shape[:-2], b_st[:-2], batch)
    count = aoffs.size
    meta["bmm"] = {"m": m, "k": k, "n": n, "a": (a_st[-2], a_st[-1]), "b": (b_st[-2], b_st[-1]),
                   "c": None, "size": count * m * n, "a_vec": a.rank == 1, "b_vec": b.rank == 1}
    for step in (a_step, b_step):
        if step is not None:
            ctx.program.steps.remove(step)
    coffs = np.arange(count, dtype=np.int64) * (m * n)
    # the kernel reads both operands as flat sources (offsets and strides above): handed as 1-D
    # views, so that one compiled bmm serves every operand rank (it compiled once per pair of
    # ranks: 2-D, 3-D and 4-D attention products, 3.5 s each)
    a_src = view(ctx, a_src, (math.prod(a_src.shape),), kind="bmm_view")
    b_src = view(ctx, b_src, (math.prod(b_src.shape),), kind="bmm_view")
    return ctx.record(_matmul_op(meta), a_src, b_src, ctx.constant(aoffs), ctx.constant(boffs),
                      ctx.constant(coffs), shape=meta["out"], dtype=a.dtype, meta=meta)


# A MatMul step's inputs: the operands, then for bmm the offsets of A, B and C per batch, then
# the bias once bias_into_matmul folded one in (appended: the last input).
BMM_C_OFFSETS = 4


def _matmul_op(meta):
    """The call of a MatMul step, from its meta: the product's kernel (`__k_bmm`, `__k_sgemm`
    or `__k_matmul`) wrapped in reshapes of its operands and result."""
    return ArrayExpr(_matmul_product(meta).reshape(meta["out"]))


def _matmul_product(meta):
    """The kernel call of a MatMul step (before the reshape to its output shape)."""
    if meta["bmm"]:
        g = meta["bmm"]
        c = g["c"] or (g["n"], 1)   # None: C-contiguous output; else its (row, column) strides
        dims = (g["m"], g["k"], g["n"]) + g["a"] + g["b"] + c + (g["size"],)
        bias = E.slot(5) if meta["bias"] else None
        return E.lib("bmm", "bmm", *map(E.slot, range(5)), dims, bias, meta["act"], meta["scale"])
    if meta["packed"]:
        rows, k, n = meta["packed"]
        bias = E.slot(2) if meta["bias"] else None
        module, function = (("gemm_avx2", "sgemm16") if meta.get("gemm") == "gemm_avx2"
                            else ("sgemm", "sgemm_packed"))
        return E.lib(module, function, E.contiguous(E.slot(0)).reshape((rows, k)), E.slot(1), n,
                     bias, meta["act"])
    lhs, rhs = meta["operands"]
    if not (meta["bias"] or meta["act"]):
        if meta.get("gemm") == "gemm_avx2":     # float32 on AVX2: no BLAS (conv_avx2 says why)
            return E.lib("gemm_avx2", "matmul3_avx2", lhs, rhs)
        return E.lib("matmul", "matmul3", lhs, rhs)
    bias = E.slot(2) if meta["bias"] else None
    return E.lib("matmul", "matmul3_epilogue", lhs, rhs, bias, meta["act"])


def _epilogue_matmul(ctx, x):
    """The float MatMul step making `x`, if an epilogue may fold into it."""
    step = ctx.sole_producer(x, "matmul")
    if (step is None or x.dtype not in (np.float32, np.float64) or step.meta["act"]
            or step.meta["scale"] != 1.0):
        return None
    if step.meta["bmm"] and step.meta["bmm"]["c"] is not None:
        return None   # written transposed: its last axis may not be the bias's
    return step


def _bmm_step(ctx, x):
    """The ``bmm`` MatMul step making `x` when nothing else reads `x`, else None."""
    step = ctx.sole_producer(x, "matmul")
    return step if step is not None and step.meta["bmm"] else None


@peephole("Mul")
def scale_into_matmul(ctx, a, b, **legacy):
    """bmm MatMul * (constant scalar), e.g. attention's Q @ K^T / sqrt(d): the scale multiplies
    the product as it is written (rounded as the separate Mul would), or is taken over by a
    Softmax reading the product (``take_matmul_scale``), which scales its input rows itself."""
    if legacy:
        return None
    for x, c in ((a, b), (b, a)):
        step = _bmm_step(ctx, x)
        if (step is None or step.meta["bias"] or step.meta["act"] or step.meta["scale"] != 1.0
                or not c.is_const or c.dtype != x.dtype or c.size != 1 or c.rank > x.rank):
            continue
        step.meta["scale"] = float(c.const.reshape(-1)[0])
        step.op = _matmul_op(step.meta)
        step.nodes.append(ctx.label)
        return step.outs[0]
    return None


def take_matmul_scale(ctx, x):
    """For a reader that can scale its input itself (Softmax): when `x` is a bmm product read only
    by this node with a constant scale pending (``scale_into_matmul``), the scale is removed from
    the MatMul and returned; else 1.0."""
    step = _bmm_step(ctx, x)
    if step is None or step.meta["scale"] == 1.0:
        return 1.0
    scale, step.meta["scale"] = step.meta["scale"], 1.0
    step.op = _matmul_op(step.meta)
    return scale


@peephole("Transpose")
def transpose_into_matmul(ctx, x, perm=None):
    """bmm MatMul -> Transpose (attention's heads merged back): the MatMul writes its product
    straight into the transposed layout (output offsets and strides), so no copy is made."""
    step = _bmm_step(ctx, x)
    perm = list(range(x.rank))[::-1] if perm is None else [int(p) for p in perm]
    if step is None or sorted(perm) != list(range(x.rank)) or step.meta["bmm"]["c"] is not None:
        return None
    g = step.meta["bmm"]
    shape = tuple(x.shape[p] for p in perm)
    final = _c_strides(shape)
    strides = [0] * x.rank          # element strides of x's dims in the transposed layout
    for pos, d in enumerate(perm):
        strides[d] = final[pos]
    nb = x.rank - (0 if g["a_vec"] else 1) - (0 if g["b_vec"] else 1)
    crs = 0 if g["a_vec"] else strides[nb]
    ccs = 0 if g["b_vec"] else strides[-1]
    g["c"] = (crs, ccs)
    step.inputs[BMM_C_OFFSETS] = ctx.constant(_batch_layout(x.shape[:nb], strides[:nb],
                                                             x.shape[:nb]))
    step.meta["out"] = shape
    step.op = _matmul_op(step.meta)
    step.nodes.append(ctx.label)
    out = Value(shape, x.dtype, name=ctx.node.output[0])
    out.producer = step
    step.outs[0] = out
    return out


@peephole("Add")
def bias_into_matmul(ctx, a, b, **legacy):
    """MatMul + (constant vector along the last axis) adds the bias in the MatMul's epilogue."""
    if legacy:
        return None
    for x, c in ((a, b), (b, a)):
        step = _epilogue_matmul(ctx, x)
        n = x.shape[-1] if x.rank else 0
        if (step is None or x.rank == 0 or step.meta["bias"] or not c.is_const
                or c.dtype != x.dtype
                or c.rank > x.rank or any(d != 1 for d in c.shape[:-1])
                or (c.shape and c.shape[-1] not in (1, n))):
            continue
        step.inputs.append(ctx.constant(np.broadcast_to(c.const.reshape(-1), (n,)).copy()))
        step.meta["bias"] = True
        step.op = _matmul_op(step.meta)
        step.nodes.append(ctx.label)
        return step.outs[0]
    return None


@peephole("Relu")
def relu_into_matmul(ctx, x):
    """MatMul (+ bias) -> Relu: the Relu runs in the MatMul's epilogue."""
    step = _epilogue_matmul(ctx, x)
    if step is None:
        return None
    step.meta["act"] = 1
    step.op = _matmul_op(step.meta)
    step.nodes.append(ctx.label)
    return step.outs[0]


@register("Gemm", 1)
def Gemm(ctx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0, broadcast=0):
    _float_only(ctx, a, b, c)
    if a.rank != 2 or b.rank != 2:
        ctx.fail(f"A and B must be matrices, got shapes {list(a.shape)} and {list(b.shape)}")
    m = a.shape[1] if transA else a.shape[0]
    n = b.shape[0] if transB else b.shape[1]
    ka, kb = a.shape[0 if transA else 1], b.shape[1 if transB else 0]
    if ka != kb:
        ctx.fail(f"A {list(a.shape)} (transA={transA}) and B {list(b.shape)} (transB={transB}) "
                 "do not multiply")
    if c is not None and (c.rank > 2 or any(d not in (1, t) for d, t in
                                             zip(c.shape[::-1], (n, m)))):
        ctx.fail(f"C {list(c.shape)} does not broadcast to the output [{m}, {n}]")
    packed = _packed_gemm(ctx, a, b, c, alpha, beta, transA, transB, m, n)
    if packed is not None:
        return packed
    if c is None:
        c = ctx.constant(np.zeros((1, 1), a.dtype))
    c2 = (1,) * (2 - c.rank) + tuple(c.shape)
    round32 = float if a.dtype == np.float64 else (lambda v: float(np.float32(v)))
    expr = E.lib("matmul", "gemm", a, b, E.reshape(c, c2), round32(alpha), round32(beta),
                 int(transA), int(transB))
    return ctx.call(expr, a, b, c, shape=(m, n), dtype=a.dtype)


def _packed_gemm(ctx, a, b, c, alpha, beta, transA, transB, m, n):
    """float32 Gemm with constant weights (the fully connected layers of CNNs) as a packed
    MatMul step: B (transposed if transB) packed once, beta * C a bias vector along the rows
    (rounded to float32 as the separate product would be), so a following Relu fuses too.
    None when alpha != 1, A is transposed or C is not such a constant."""
    if (a.dtype != np.float32 or not b.is_const or transA or float(alpha) != 1.0
            or not ctx.target.f32_gemm or a.shape[1] == 0 or m == 0 or n == 0):
        return None
    bias = None
    if c is not None:
        if not c.is_const or c.rank > 2 or c.size not in (1, n) or (c.rank == 2 and c.shape[0] != 1):
            return None
        bias = np.broadcast_to((np.float32(beta) * c.const.astype(np.float32)).reshape(-1), (n,))
    weights = b.const.T if transB else b.const
    meta = {"kind": "matmul", "operands": None, "out": (m, n), "bias": bias is not None,
            "act": 0, "packed": (m, a.shape[1], n), "bmm": None, "scale": 1.0}
    inputs = [a, ctx.constant(_pack_weights(ctx.target, weights, meta))]
    if bias is not None:
        inputs.append(ctx.constant(np.ascontiguousarray(bias, np.float32)))
    return ctx.record(_matmul_op(meta), *inputs, shape=(m, n), dtype=a.dtype, meta=meta)
