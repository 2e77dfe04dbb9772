"""ai.onnx.preview.training optimizers (Adam, Adagrad, Momentum), Gradient and BatchNormalization's
training mode.

Each is a few elementwise expressions per optimized tensor (R and T are scalars broadcast into
them); the outputs of one tensor fuse into one loop nest. Inputs are R, T, then the n tensors
X, then n G, then the n states (V, H); outputs are the n new X, then each new state group.
"""
from __future__ import annotations

import numpy as np

from .. import scalar_expr as S
from .. import steps as E
from ..registry import register
from . import elementwise
from .attention import _floats

TRAINING = "ai.onnx.preview.training"
P = S.paren
ONE, ZERO = S.lit(1.0), S.lit(0)


def _groups(ctx, tensors, per):
    if not tensors or len(tensors) % per:
        ctx.fail(f"expects R, T and {per} groups of the same number of tensors, "
                 f"got {len(tensors) + 2} inputs")
    n = len(tensors) // per
    groups = [tensors[i * n:(i + 1) * n] for i in range(per)]
    _floats(ctx, *tensors)
    for i in range(n):
        shapes = {groups[j][i].shape for j in range(per)}
        if len(shapes) != 1:
            ctx.fail(f"tensor {i}: X, G and its states must have one shape, got {sorted(shapes)}")
    return groups


def _scalars(ctx, r, t):
    if r.size != 1 or t.size != 1 or t.dtype.kind not in "iu":
        ctx.fail(f"R must be a float scalar and T an integer scalar, got R {r.shape} {r.dtype}, "
                 f"T {t.shape} {t.dtype}")


@register("Adam", since=1, domain=TRAINING)
def Adam(ctx, r, t, *tensors, alpha=0.9, beta=0.999, epsilon=0.0, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    _scalars(ctx, r, t)
    xs, gs, vs, hs = _groups(ctx, tensors, 4)
    a, b, eps = S.lit(float(alpha)), S.lit(float(beta)), S.lit(float(epsilon))
    nc, post = S.lit(float(norm_coefficient)), S.lit(1.0 - float(norm_coefficient_post))
    r_, t_, x_, g_, v_, h_ = S.operands(6)
    g = P(nc * x_ + g_)
    v_new = P(a * v_ + (ONE - a) * g)
    h_new = P(b * h_ + (ONE - b) * (g * g))
    radj = P(S.cond(S.gt(t_, ZERO), P(r_ * S.np("sqrt", ONE - b ** t_) / (ONE - a ** t_)), r_))
    x_new = P(post * (x_ - radj * (v_new / (S.np("sqrt", h_new) + eps))))
    out_x, out_v, out_h = [], [], []
    for x, gr, v, h in zip(xs, gs, vs, hs):
        args = (r, t, x, gr, v, h)
        out_x.append(ctx.elementwise(x_new, *args, dtype=x.dtype))
        out_v.append(ctx.elementwise(v_new, *args, dtype=v.dtype))
        out_h.append(ctx.elementwise(h_new, *args, dtype=h.dtype))
    return out_x + out_v + out_h


@register("Adagrad", since=1, domain=TRAINING)
def Adagrad(ctx, r, t, *tensors, decay_factor=0.0, epsilon=0.0, norm_coefficient=0.0):
    _scalars(ctx, r, t)
    xs, gs, hs = _groups(ctx, tensors, 3)
    df, eps, nc = (S.lit(float(a)) for a in (decay_factor, epsilon, norm_coefficient))
    r_, t_, x_, g_, h_ = S.operands(5)
    g = P(nc * x_ + g_)
    h_new = P(h_ + g * g)
    x_new = P(x_ - P(r_ / (ONE + t_ * df)) * g / (S.np("sqrt", h_new) + eps))
    out_x, out_h = [], []
    for x, gr, h in zip(xs, gs, hs):
        out_x.append(ctx.elementwise(x_new, r, t, x, gr, h, dtype=x.dtype))
        out_h.append(ctx.elementwise(h_new, r, t, x, gr, h, dtype=h.dtype))
    return out_x + out_h


@register("Momentum", since=1, domain=TRAINING)
def Momentum(ctx, r, t, *tensors, alpha=None, beta=None, mode=None, norm_coefficient=None):
    if None in (alpha, beta, mode, norm_coefficient):
        ctx.fail("alpha, beta, mode and norm_coefficient are required attributes")
    if mode not in ("standard", "nesterov"):
        ctx.fail(f"mode {mode!r} is not 'standard' or 'nesterov'")
    _scalars(ctx, r, t)
    xs, gs, vs = _groups(ctx, tensors, 3)
    a, b, nc = (S.lit(float(v)) for v in (alpha, beta, norm_coefficient))
    r_, t_, x_, g_, v_ = S.operands(5)
    g = P(nc * x_ + g_)
    v_new = P(a * v_ + S.cond(S.gt(t_, ZERO), b, ONE) * g)
    step = P(g + a * v_new) if mode == "nesterov" else v_new
    x_new = P(x_ - r_ * step)
    out_x, out_v = [], []
    for x, gr, v in zip(xs, gs, vs):
        out_x.append(ctx.elementwise(x_new, r, t, x, gr, v, dtype=x.dtype))
        out_v.append(ctx.elementwise(v_new, r, t, x, gr, v, dtype=v.dtype))
    return out_x + out_v


@register("BatchNormalization", since=14)
def BatchNormalization(ctx, x, scale, bias, mean, var, epsilon=np.float32(1e-5),
                       momentum=np.float32(0.9), training_mode=0):
    """training_mode=1: normalize with the batch's statistics and return the updated running
    mean and variance (kernels/training.py); inference is ops/elementwise.py's lowering."""
    if not training_mode:
        return elementwise.BatchNormalization(ctx, x, scale, bias, mean, var, epsilon=epsilon,
                                              momentum=momentum, training_mode=0)
    _floats(ctx, x, scale, bias, mean, var)
    if x.rank < 2:
        ctx.fail(f"input of shape {x.shape} has no channel axis")
    nc = x.shape[1]
    for name, v in (("scale", scale), ("B", bias), ("input_mean", mean), ("input_var", var)):
        if v.shape != (nc,):
            ctx.fail(f"{name} of shape {v.shape} must be ({nc},)")
    flat = (x.shape[0], nc, int(np.prod(x.shape[2:], dtype=np.int64)))
    expr = E.lib("training", "batchnorm_training", E.contiguous(x).reshape(flat), scale, bias,
                 mean, var, float(momentum), float(epsilon))
    y, m, v = ctx.call_multi(expr, x, scale, bias, mean, var,
                             outs=[(flat, x.dtype), ((nc,), mean.dtype), ((nc,), var.dtype)])
    y = ctx.call(E.reshape(y, x.shape), shape=x.shape, dtype=x.dtype, view=True)
    return [y, m, v]


def _gradient_rule(ctx, op, ins, g):
    """d(out)/d(input) * g for each input of an elementwise op (None: no gradient flows)."""
    def ew(build, *vals):     # build: a function of the values' operands
        return ctx.elementwise(build(*S.operands(len(vals))), *vals, dtype=g.dtype)
    if op == "Add":
        return [g, g]
    if op == "Sub":
        return [g, ew(lambda d: P(-d), g)]
    if op == "Mul":
        return [ew(lambda d, u: P(d * u), g, ins[1]), ew(lambda d, u: P(d * u), g, ins[0])]
    if op == "Div":
        return [ew(lambda d, u: P(d / u), g, ins[1]),
                ew(lambda d, u, w: P(-d * u / (w * w)), g, ins[0], ins[1])]
    if op == "Neg":
        return [ew(lambda d: P(-d), g)]
    return None


@register("Gradient", since=1, domain=TRAINING)
def Gradient(ctx, *inputs, xs=None, y=None, zs=None):
    """The gradient of `y` with respect to each of `xs`, by reverse-mode differentiation of the
    steps already lowered between them (elementwise Add, Sub, Mul, Div, Neg; Identity passes
    the Value through), operands of one shape (no broadcasting)."""
    if not xs or not y:
        ctx.fail("the xs and y attributes are required")
    missing = [n for n in [*xs, y] if n not in ctx.env]
    if missing:
        ctx.fail(f"{missing} are not values of the graph")
    yv, xvals = ctx.env[y], [ctx.env[n] for n in xs]
    _floats(ctx, yv, *xvals)
    depends = {id(v) for v in xvals}
    steps = []
    for step in ctx.program.steps:
        if any(v is not None and id(v) in depends for v in step.inputs):
            depends.update(id(o) for o in step.outs)
            steps.append(step)
    grads = {id(yv): ctx.constant(np.ones(yv.shape, yv.dtype))}
    for step in reversed(steps):
        g = grads.get(id(step.outs[0])) if len(step.outs) == 1 else None
        if g is None:
            continue
        name, op = step.nodes[0] if len(step.nodes) == 1 else ("", step.kind)
        ins = step.inputs
        rule = (_gradient_rule(ctx, op, ins, g)
                if step.kind == "ew" and all(v.shape == g.shape for v in ins) else None)
        if rule is None:
            ctx.fail(f"cannot differentiate {op} node {name!r} (Add, Sub, Mul, Div and Neg of "
                     "same-shape operands are supported)")
        for v, c in zip(ins, rule):
            if id(v) not in depends:
                continue
            old = grads.get(id(v))
            grads[id(v)] = c if old is None else ctx.elementwise(
                P(S.operand(0) + S.operand(1)), old, c, dtype=c.dtype)
    outs = []
    for x in xvals:
        g = grads.get(id(x))
        g = ctx.constant(np.zeros(x.shape, x.dtype)) if g is None else g
        outs.append(ctx.elementwise(S.operand(0), g, dtype=x.dtype))   # a Value of its own
    return outs
