"""LinearAttention and CausalConvWithState (opset 27), FlexAttention (ai.onnx.preview 1).

Each is one library kernel (kernels/attention_ext.py); FlexAttention's score_mod / prob_mod
subgraphs are lowered in place between its kernels, so they fuse and compile like any graph.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import steps as E
from ..ir import compute_dtype
from ..registry import register
from .attention import _floats

_UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _empty_of(dtype):
    """A 0-size array whose dtype is the one compiled code holds `dtype` in."""
    return E.numpy("empty", 0, E.dtype(dtype))


@register("LinearAttention", since=27)
def LinearAttention(ctx, query, key, value, past_state=None, decay=None, beta=None,
                    chunk_size=64, kv_num_heads=None, q_num_heads=None, scale=0.0,
                    update_rule="gated_delta"):
    rule = _text(update_rule)
    if rule not in _UPDATE_RULES:
        ctx.fail(f"update_rule {rule!r} is not one of {list(_UPDATE_RULES)}")
    _floats(ctx, query, key, value, past_state, decay, beta)
    hq, hkv = q_num_heads, kv_num_heads
    if not hq or not hkv or hq <= 0 or hkv <= 0 or hq % hkv:
        ctx.fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    for name, v in (("query", query), ("key", key), ("value", value)):
        if v.rank != 3:
            ctx.fail(f"{name} must be rank 3 (B, T, H*D), got shape {v.shape}")
    if len({compute_dtype(v.dtype) for v in (query, key, value, past_state, decay, beta)
            if v is not None}) != 1:
        ctx.fail("query, key, value, past_state, decay and beta must share one float type")
    nb, nt, qd = query.shape
    if qd % hq or value.shape[2] % hkv:
        ctx.fail(f"query {query.shape} / value {value.shape} do not split into {hq} / {hkv} heads")
    dk, dv = qd // hq, value.shape[2] // hkv
    if key.shape != (nb, nt, hkv * dk) or value.shape[:2] != (nb, nt):
        ctx.fail(f"key {key.shape} / value {value.shape} do not fit query {query.shape}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        ctx.fail(f"update_rule {rule!r} takes {'a' if gating else 'no'} decay and "
                 f"{'a' if delta else 'no'} beta input")
    if decay is not None and (decay.rank != 3 or decay.shape[:2] != (nb, nt)
                              or decay.shape[2] not in (hkv, hkv * dk)):
        ctx.fail(f"decay of shape {decay.shape} must be (B, T, {hkv}) or (B, T, {hkv * dk})")
    if beta is not None and (beta.rank != 3 or beta.shape[:2] != (nb, nt)
                             or beta.shape[2] not in (hkv, 1)):
        ctx.fail(f"beta of shape {beta.shape} must be (B, T, {hkv}) or (B, T, 1)")
    state_shape = (nb, hkv, dk, dv)
    if past_state is not None and past_state.shape != state_shape:
        ctx.fail(f"past_state of shape {past_state.shape} must be {state_shape}")
    scale_val = 1.0 / np.sqrt(dk) if not scale else float(scale)
    inputs = (query, key, value, past_state, decay, beta)
    expr = E.lib("attention_ext", "linear_attention", *inputs, int(hq), int(hkv),
                 E.scalar(scale_val, compute_dtype(query.dtype)))
    state_dtype = past_state.dtype if past_state is not None else query.dtype
    return ctx.call_multi(expr, *inputs,     # absent ones (None) keep their slots
                          outs=[((nb, nt, hq * dv), query.dtype), (state_shape, state_dtype)])


@register("CausalConvWithState", since=27)
def CausalConvWithState(ctx, x, weight, bias=None, past_state=None, activation="none"):
    act = _text(activation)
    if act not in ("none", "silu", "swish"):
        ctx.fail(f"activation {act!r} is not one of 'none', 'silu', 'swish'")
    _floats(ctx, x, weight, bias, past_state)
    if len({v.dtype for v in (x, weight, bias, past_state) if v is not None}) != 1:
        ctx.fail("input, weight, bias and past_state must share one float type")
    if x.rank != 3:
        ctx.fail(f"input must be rank 3 (batch, channels, length), got shape {x.shape}")
    nb, nc, nl = x.shape
    if weight.rank != 3 or weight.shape[0] != nc or weight.shape[1] != 1 or weight.shape[2] < 1:
        ctx.fail(f"weight of shape {weight.shape} must be ({nc}, 1, k)")
    kk = weight.shape[2]
    if bias is not None and bias.shape != (nc,):
        ctx.fail(f"bias of shape {bias.shape} must be ({nc},)")
    if past_state is not None and past_state.shape != (nb, nc, kk - 1):
        ctx.fail(f"past_state of shape {past_state.shape} must be {(nb, nc, kk - 1)}")
    inputs = (x, weight, bias, past_state)
    expr = E.lib("attention_ext", "causal_conv_with_state", *inputs, act != "none")
    return ctx.call_multi(expr, *inputs,     # absent ones (None) keep their slots
                          outs=[(x.shape, x.dtype), ((nb, nc, kk - 1), x.dtype)])


_PRECISIONS = {TensorProto.FLOAT: np.dtype(np.float32), TensorProto.DOUBLE: np.dtype(np.float64),
               TensorProto.FLOAT16: np.dtype(np.float16)}


def _precision_dtype(ctx, q, softmax_precision):
    if softmax_precision is not None:
        if softmax_precision == TensorProto.BFLOAT16:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        if softmax_precision not in _PRECISIONS:
            ctx.fail(f"softmax_precision={softmax_precision} is not a float type")
        return _PRECISIONS[softmax_precision]
    return q.dtype if q.dtype == np.float64 else np.dtype(np.float32)


def _modifier(ctx, graph, x, what):
    """x through a score_mod / prob_mod subgraph, lowered in place."""
    if graph is None:
        return x
    if len(graph.input) != 1 or len(graph.output) != 1:
        ctx.fail(f"{what} must take one input and produce one output")
    (y,) = ctx.inline_graph(graph, [x])
    if y.shape != x.shape:
        ctx.fail(f"{what} must keep the shape {x.shape}, it gives {y.shape}")
    if y.dtype != x.dtype:
        ctx.fail(f"{what} must keep the element type {x.dtype}, it gives {y.dtype}")
    return y


@register("FlexAttention", since=1, domain="ai.onnx.preview")
def FlexAttention(ctx, q, k, v, prob_mod=None, score_mod=None, softmax_precision=None,
                  scale=None):
    _floats(ctx, q, k, v)
    if not q.rank == k.rank == v.rank == 4:
        ctx.fail(f"Q, K and V must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        ctx.fail("Q, K and V must share one float type")
    nb, hq, nl, e = q.shape
    hkv, ns = k.shape[1], k.shape[2]
    if ((k.shape[0], k.shape[3]) != (nb, e) or v.shape[:3] != (nb, hkv, ns) or hkv < 1
            or hq % hkv):
        ctx.fail(f"incompatible Q {q.shape}, K {k.shape}, V {v.shape}")
    sdt = _precision_dtype(ctx, q, softmax_precision)
    scale = 1.0 / np.sqrt(e) if scale is None else scale
    sscale = E.scalar(np.sqrt(np.float32(scale)), q.dtype)
    scores = ctx.call(E.lib("attention_ext", "flex_scores", q, k, sscale, _empty_of(sdt)), q, k,
                      shape=(nb, hq, nl, ns), dtype=sdt)
    scores = _modifier(ctx, score_mod, scores, "score_mod")
    probs = ctx.kernel(("attention_ext", "softmax_last"), scores, shape=scores.shape, dtype=sdt)
    probs = _modifier(ctx, prob_mod, probs, "prob_mod")
    return ctx.call(E.lib("attention_ext", "flex_output", probs, v, _empty_of(v.dtype)), probs, v,
                    shape=(nb, hq, nl, v.shape[3]), dtype=v.dtype)
