"""RNN, GRU and LSTM: one library-kernel call each (kernels/rnn.py).

The lowering fills every optional input (zero bias/state/peepholes, full sequence lengths), maps
activation names to kernel codes (names never reach source: only the integer codes do) and
swaps batch-major (layout=1) tensors to sequence-major around the call.
"""
from __future__ import annotations

import numpy as np

from ..kernels import rnn as K
from ..kernels import rnn_seq as KS
from ..ir import NARROW_FLOATS
from ..registry import register

# narrow floats (float16, bfloat16) are held in float32 arrays inside compiled code
FLOATS = (np.dtype(np.float32), np.dtype(np.float64), *NARROW_FLOATS)

CODES = {"relu": K.RELU, "tanh": K.TANH, "sigmoid": K.SIGMOID, "affine": K.AFFINE,
         "leakyrelu": K.LEAKY_RELU, "thresholdedrelu": K.THRESHOLDED_RELU,
         "scaledtanh": K.SCALED_TANH, "hardsigmoid": K.HARD_SIGMOID, "elu": K.ELU,
         "softsign": K.SOFTSIGN, "softplus": K.SOFTPLUS}
# (alpha, beta) defaults (ONNX Runtime's); None: the activation takes no such parameter
DEFAULTS = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
            "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}


def _activations(ctx, names, default, nd, alpha, beta):
    """(codes, alphas, betas), each a per-direction tuple of per-activation tuples."""
    names = list(names) if names else list(default) * nd
    if len(names) == len(default) and nd == 2:
        names = names * 2
    if len(names) != len(default) * nd:
        ctx.fail(f"expected {len(default) * nd} activations, got {len(names)}")
    alpha, beta = list(alpha or []), list(beta or [])
    codes, alphas, betas = [], [], []
    for name in names:
        key = str(name).lower()
        if key not in CODES:
            ctx.fail(f"unsupported activation {name!r}")
        da, db = DEFAULTS.get(key, (None, None))
        # parameters are consumed in order by the activations that take them
        alphas.append(float(alpha.pop(0)) if da is not None and alpha else float(da or 0.0))
        betas.append(float(beta.pop(0)) if db is not None and beta else float(db or 0.0))
        codes.append(CODES[key])
    k = len(default)
    split = lambda v: tuple(tuple(v[d * k:(d + 1) * k]) for d in range(nd))  # noqa: E731
    return split(codes), split(alphas), split(betas)


def _check(ctx, x, w, r, gates, direction, hidden_size, layout):
    """(num_directions, hidden, seq, batch) after checking shapes and dtypes."""
    for v in (x, w, r):
        if v.dtype not in FLOATS or v.dtype != x.dtype:
            ctx.fail(f"{v.name or 'an input'} has dtype {v.dtype}; float32/float64 like X expected")
    nd = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(direction)
    if nd is None:
        ctx.fail(f"unknown direction {direction!r}")
    if x.rank != 3 or w.rank != 3 or r.rank != 3 or w.shape[0] != nd or r.shape[0] != nd:
        ctx.fail(f"bad shapes X {x.shape}, W {w.shape}, R {r.shape} for direction {direction!r}")
    hs = r.shape[2]
    if w.shape[1] != gates * hs or r.shape[1] != gates * hs or w.shape[2] != x.shape[2]:
        ctx.fail(f"W {w.shape} / R {r.shape} do not match {gates} gates of hidden size {hs}")
    if hidden_size is not None and hidden_size != hs:
        ctx.fail(f"hidden_size={hidden_size} but R has hidden size {hs}")
    if layout not in (0, 1):
        ctx.fail(f"layout must be 0 or 1, got {layout}")
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    return nd, hs, seq, batch


def _operand(ctx, v, shape, dtype, what, swap=False, fill=0):
    """`v` checked against `shape` (after a layout swap), or a constant when absent."""
    if v is None:
        return ctx.constant(np.full(shape, fill, dtype))
    if swap:
        v = ctx.kernel(("rnn", "swap01"), v, shape=(v.shape[1], v.shape[0], *v.shape[2:]),
                       dtype=v.dtype)
    if tuple(v.shape) != tuple(shape) or v.dtype != np.dtype(dtype):
        ctx.fail(f"{what} has shape {v.shape} and dtype {v.dtype}; {shape} {np.dtype(dtype)} "
                 "expected")
    return v


def _lens(ctx, lens, batch, seq):
    if lens is not None and lens.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        ctx.fail(f"sequence_lens has dtype {lens.dtype}; int32 expected")
    return _operand(ctx, lens, (batch,), lens.dtype if lens is not None else np.int32,
                    "sequence_lens", fill=seq)


def _outputs(ctx, kernel, args, y_shape, n_states, dtype, layout):
    """Y and the final states from the call of `kernel` (module, function) with `args`, moved
    to batch-major for layout 1."""
    seq, nd, batch, hs = y_shape
    state = (nd, batch, hs)
    outs = ctx.kernel(kernel, *args, outs=[(y_shape, dtype)] + [(state, dtype)] * n_states)
    if not layout:
        return outs
    y = ctx.kernel(("rnn", "y_batch_major"), outs[0], shape=(batch, seq, nd, hs), dtype=dtype)
    return [y] + [ctx.kernel(("rnn", "swap01"), s, shape=(batch, nd, hs), dtype=dtype)
                  for s in outs[1:]]


def _prologue(ctx, x, w, r, b, lens, h0, gates, direction, hidden_size, layout):
    nd, hs, seq, batch = _check(ctx, x, w, r, gates, direction, hidden_size, layout)
    xs = _operand(ctx, x, (seq, batch, x.shape[2]), x.dtype, "X", swap=bool(layout))
    b = _operand(ctx, b, (nd, 2 * gates * hs), x.dtype, "B")
    h0 = _operand(ctx, h0, (nd, batch, hs), x.dtype, "initial_h", swap=bool(layout))
    return nd, hs, seq, batch, xs, b, h0, _lens(ctx, lens, batch, seq)


def _clip(clip):
    return float("inf") if clip is None or clip <= 0 else float(clip)


def _fast(target, x, w, r, batch, codes, default, clip):
    """Whether the float32 fast kernels (kernels/rnn.py: W and R packed at prepare time,
    fused gates) apply: constant weights, small batch, default activations, no clip."""
    return (x.dtype == np.float32 and w.is_const and r.is_const
            and batch <= K.FAST_MAX_BATCH and _clip(clip) == float("inf")
            and all(tuple(c) == default for c in codes) and target.split16)


@register("RNN", since=7)
def RNN(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0):
    nd, hs, seq, batch, xs, b, h0, lens = _prologue(
        ctx, x, w, r, b, sequence_lens, initial_h, 1, direction, hidden_size, layout)
    codes, alphas, betas = _activations(ctx, activations, ["Tanh"], nd, activation_alpha,
                                        activation_beta)
    args = [xs, w, r, b, h0, lens, direction == "reverse", codes, alphas, betas, _clip(clip)]
    return _outputs(ctx, ("rnn", "rnn"), args, (seq, nd, batch, hs), 1, x.dtype, layout)


@register("GRU", since=7)
def GRU(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0, linear_before_reset=0):
    nd, hs, seq, batch, xs, b, h0, lens = _prologue(
        ctx, x, w, r, b, sequence_lens, initial_h, 3, direction, hidden_size, layout)
    codes, alphas, betas = _activations(ctx, activations, ["Sigmoid", "Tanh"], nd,
                                        activation_alpha, activation_beta)
    if _fast(ctx.target, x, w, r, batch, codes, (K.SIGMOID, K.TANH), clip):
        lbr = bool(linear_before_reset)
        if batch == 1 and lbr:
            # batch 1: gates fused into the GEMV, input projection under it (kernels/rnn_seq.py)
            wp, rp = ctx.constant(KS.pack_w(w.const, 3)), ctx.constant(KS.pack_r(r.const, 3))
            args = [xs, wp, rp, b, h0, lens, direction == "reverse"]
            return _outputs(ctx, ("rnn_seq", "gru_seq"), args, (seq, nd, batch, hs), 1,
                            x.dtype, layout)
        wp = ctx.constant(K.pack_w_np(w.const, 3))
        rp = ctx.constant(K.pack_r_np(r.const, 3, 3 if lbr else 2))
        args = [xs, wp, rp, b, h0, lens, direction == "reverse", lbr]
        return _outputs(ctx, ("rnn", "gru_fast"), args, (seq, nd, batch, hs), 1, x.dtype,
                        layout)
    args = [xs, w, r, b, h0, lens, direction == "reverse", codes, alphas, betas, _clip(clip),
            bool(linear_before_reset)]
    return _outputs(ctx, ("rnn", "gru"), args, (seq, nd, batch, hs), 1, x.dtype, layout)


@register("LSTM", since=7)
def LSTM(ctx, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None,
         activation_alpha=None, activation_beta=None, activations=None, clip=None,
         direction="forward", hidden_size=None, input_forget=0, layout=0):
    nd, hs, seq, batch, xs, b, h0, lens = _prologue(
        ctx, x, w, r, b, sequence_lens, initial_h, 4, direction, hidden_size, layout)
    c0 = _operand(ctx, initial_c, (nd, batch, hs), x.dtype, "initial_c", swap=bool(layout))
    p = _operand(ctx, p, (nd, 3 * hs), x.dtype, "P")
    codes, alphas, betas = _activations(ctx, activations, ["Sigmoid", "Tanh", "Tanh"], nd,
                                        activation_alpha, activation_beta)
    if not input_forget and _fast(ctx.target, x, w, r, batch, codes, (K.SIGMOID, K.TANH, K.TANH), clip):
        if batch == 1:
            wp, rp = ctx.constant(KS.pack_w(w.const, 4)), ctx.constant(KS.pack_r(r.const, 4))
            args = [xs, wp, rp, b, h0, c0, p, lens, direction == "reverse"]
            return _outputs(ctx, ("rnn_seq", "lstm_seq"), args, (seq, nd, batch, hs), 2,
                            x.dtype, layout)
        wp = ctx.constant(K.pack_w_np(w.const, 4))
        rp = ctx.constant(K.pack_r_np(r.const, 4, 4))
        args = [xs, wp, rp, b, h0, c0, p, lens, direction == "reverse"]
        return _outputs(ctx, ("rnn", "lstm_fast"), args, (seq, nd, batch, hs), 2, x.dtype,
                        layout)
    args = [xs, w, r, b, h0, c0, p, lens, direction == "reverse", codes, alphas, betas,
            _clip(clip), bool(input_forget)]
    return _outputs(ctx, ("rnn", "lstm"), args, (seq, nd, batch, hs), 2, x.dtype, layout)
