"""Attention (opset 23-25), RotaryEmbedding and SwiGLU.

Attention works on (batch, heads, seq, head_size): 3-D inputs are split into heads around the
kernel call (kernels/attention.py), a boolean mask becomes an additive 0/-inf float mask, and
masks of rank < 4 are viewed as rank 4 (right-aligned broadcasting, like numpy).
"""
from __future__ import annotations

import numpy as np

from ..ir import NARROW_FLOATS
from .. import scalar_expr as S
from .. import steps as E
from ..registry import register

# narrow floats (float16, bfloat16) are held in float32 arrays inside compiled code
FLOATS = (np.dtype(np.float32), np.dtype(np.float64), *NARROW_FLOATS)


def _floats(ctx, *values):
    for v in values:
        if v is not None and v.dtype not in FLOATS:
            ctx.fail(f"{v.name or 'an input'} has dtype {v.dtype}; float32 or float64 expected")


def _heads(ctx, x, heads, what):
    """x as (batch, heads, seq, d): 4-D inputs pass through, 3-D ones are split into heads."""
    if x.rank == 4:
        return x
    if x.rank != 3 or not heads or x.shape[2] % heads:
        ctx.fail(f"{what} of shape {x.shape} cannot be split into {heads} heads")
    nb, s, hd = x.shape
    return ctx.kernel(("attention", "to_heads"), x, int(heads),
                      shape=(nb, heads, s, hd // heads), dtype=x.dtype)


def _mask4(ctx, mask, dtype):
    """The mask as an additive float tensor of rank 4 (or None)."""
    if mask is None:
        return None
    if mask.rank > 4 or mask.rank < 1:
        ctx.fail(f"attn_mask of rank {mask.rank} is not supported")
    if mask.dtype == np.bool_:
        zero, ninf = ctx.scalar(0.0, dtype), ctx.scalar(-np.inf, dtype)
        mask = ctx.elementwise(S.paren(S.cond(S.operand(0), zero, ninf)), mask, dtype=dtype)
    else:
        _floats(ctx, mask)
    shape = (1,) * (4 - mask.rank) + tuple(mask.shape)
    return ctx.call(E.reshape(mask, shape), shape=shape, dtype=mask.dtype, view=True)


def _kv(ctx, past, cur, what):
    """The present key/value: the past cache followed by the new entries."""
    if past is None:
        return cur
    if past.rank != 4 or past.shape[:2] != cur.shape[:2] or past.shape[3] != cur.shape[3]:
        ctx.fail(f"{what} of shape {past.shape} does not extend {cur.shape}")
    _floats(ctx, past)
    shape = (*cur.shape[:2], past.shape[2] + cur.shape[2], cur.shape[3])
    return ctx.kernel(("attention", "concat_seq"), past, cur, shape=shape, dtype=cur.dtype)


def _scale_sqrt(ctx, scale, head_size, dtype):
    """sqrt(scale) in the input dtype: ONNX multiplies both Q and K by it."""
    scale = 1 / np.sqrt(head_size) if scale is None else scale
    return E.scalar(np.sqrt(scale), dtype)


def _check_attention(ctx, q, k, v, past_key, past_value, nonpad, mode):
    _floats(ctx, q, k, v)
    if not q.rank == k.rank == v.rank or q.dtype != k.dtype or q.dtype != v.dtype:
        ctx.fail("Q, K and V must have one rank and one dtype")
    if (past_key is None) != (past_value is None) or (past_key is not None and nonpad is not None):
        ctx.fail("past_key and past_value go together, and exclude nonpad_kv_seqlen")
    if mode not in (0, 1, 2, 3):
        ctx.fail(f"qk_matmul_output_mode={mode} is not supported")


@register("Attention", since=23)
def Attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None, is_causal=0, kv_num_heads=None, q_num_heads=None,
              qk_matmul_output_mode=0, scale=None, softcap=0.0, softmax_precision=None,
              left_window_size=-1, right_window_size=-1):
    _check_attention(ctx, q, k, v, past_key, past_value, nonpad_kv_seqlen, qk_matmul_output_mode)
    q4 = _heads(ctx, q, q_num_heads, "Q")
    k4 = _kv(ctx, past_key, _heads(ctx, k, kv_num_heads, "K"), "past_key")
    v4 = _kv(ctx, past_value, _heads(ctx, v, kv_num_heads, "V"), "past_value")
    nb, hq, sq, d = q4.shape
    hkv, skv = k4.shape[1], k4.shape[2]
    if (k4.shape[0] != nb or v4.shape[:3] != k4.shape[:3] or k4.shape[3] != d or not hkv
            or hq % hkv):
        ctx.fail(f"incompatible Q {q4.shape}, K {k4.shape}, V {v4.shape}")
    if nonpad_kv_seqlen is not None and (nonpad_kv_seqlen.dtype != np.int64
                                         or nonpad_kv_seqlen.shape != (nb,)):
        ctx.fail("nonpad_kv_seqlen must be int64 of shape (batch,)")
    if attn_mask is not None and attn_mask.rank <= 4:
        m4 = (1,) * (4 - attn_mask.rank) + tuple(attn_mask.shape)
        if any(m not in (1, t) for m, t in zip(m4[:3], (nb, hq, sq))):
            ctx.fail(f"attn_mask {list(attn_mask.shape)} does not broadcast to batch {nb}, "
                     f"{hq} heads and {sq} query positions")
        if m4[3] > skv:     # a shorter last dim is padded with -inf (the spec); a longer one no
            ctx.fail(f"attn_mask {list(attn_mask.shape)} is longer than the {skv} keys "
                     "(past and present) it masks")
    want_qk = len(ctx.node.output) > 3 and bool(ctx.node.output[3])
    past = past_key.shape[2] if past_key is not None else 0
    inputs = (q4, k4, v4, _mask4(ctx, attn_mask, q.dtype), nonpad_kv_seqlen)
    expr = E.lib("attention", "attention", *inputs, past, _scale_sqrt(ctx, scale, d, q.dtype),
                 bool(is_causal), float(softcap), int(left_window_size), int(right_window_size),
                 int(qk_matmul_output_mode), want_qk)
    y, qk = ctx.call_multi(expr, *inputs,     # absent ones (None) keep their slots
                           outs=[((nb, hq, sq, v4.shape[3]), q.dtype),
                                 ((nb, hq, sq, skv) if want_qk else (0, 0, 0, 0), q.dtype)])
    if q.rank == 3:
        y = ctx.kernel(("attention", "from_heads"), y, shape=(nb, sq, hq * v4.shape[3]),
                       dtype=q.dtype)
    return [y, k4, v4, qk]


@register("RotaryEmbedding", since=23)
def RotaryEmbedding(ctx, x, cos_cache, sin_cache, position_ids=None, interleaved=0,
                    num_heads=0, rotary_embedding_dim=0):
    _floats(ctx, x, cos_cache, sin_cache)
    if x.rank == 4:
        nb, nh, ns, hd = x.shape
        xv = x
    elif x.rank == 3 and num_heads and x.shape[2] % num_heads == 0:
        nb, ns, nh, hd = x.shape[0], x.shape[1], num_heads, x.shape[2] // num_heads
        xv = ctx.call(E.reshape(x, (nb, ns, nh, hd)), shape=(nb, ns, nh, hd), dtype=x.dtype,
                      view=True)
    else:
        ctx.fail(f"input of shape {x.shape} with num_heads={num_heads} is not supported")
    rdim = rotary_embedding_dim or hd
    if rdim % 2 or rdim > hd:
        ctx.fail(f"rotary_embedding_dim {rdim} must be even and at most the head size {hd}")
    cos, sin, pos = _rotary_tables(ctx, cos_cache, sin_cache, position_ids, nb, ns, rdim // 2)
    out = ctx.kernel(("attention", "rotary"), xv, cos, sin, pos, x.rank == 4, bool(interleaved),
                     int(rdim), shape=xv.shape, dtype=x.dtype)
    if x.rank == 3:
        out = ctx.call(E.reshape(out, x.shape), shape=x.shape, dtype=x.dtype, view=True)
    return out


def _rotary_tables(ctx, cos, sin, pos, nb, ns, half):
    """(cos, sin) as (positions, half) tables and the (batch, seq) positions to read them at."""
    if cos.shape != sin.shape or cos.shape[-1] != half:
        ctx.fail(f"cos/sin caches {cos.shape}/{sin.shape} do not end in rotary_dim/2 = {half}")
    if pos is not None:
        if pos.shape != (nb, ns) or pos.dtype.kind not in "iu" or cos.rank != 2:
            ctx.fail(f"position_ids {pos.shape} / caches {cos.shape} do not fit the input")
        return cos, sin, pos
    if cos.shape != (nb, ns, half):
        ctx.fail(f"without position_ids the caches must be {(nb, ns, half)}, got {cos.shape}")
    flat = (nb * ns, half)
    cos, sin = (ctx.call(E.reshape(c, flat), shape=flat, dtype=c.dtype, view=True)
                for c in (cos, sin))
    return cos, sin, ctx.constant(np.arange(nb * ns, dtype=np.int64).reshape(nb, ns))


@register("SwiGLU", since=28)
def SwiGLU(ctx, a, b, alpha=1.0):
    _floats(ctx, a, b)
    if a.shape != b.shape or a.dtype != b.dtype:
        ctx.fail(f"A {a.shape} {a.dtype} and B {b.shape} {b.dtype} must match")
    one, al = ctx.scalar(1.0, a.dtype), ctx.scalar(alpha, a.dtype)
    x, y = S.operands(2)
    expr = S.paren(x * (one / (one + S.np("exp", -al * x))) * y)
    return ctx.elementwise(expr, a, b, dtype=a.dtype)
