"""Scan unrolled at compile time: its length is a dimension of its scan inputs, so the body is
lowered in place once per step (like Loop with a known trip count) and the whole Scan compiles
with the rest of the graph (Scan-8: per batch entry). Longer scans, short sequence_lens and
bodies that cannot be compiled raise DataDependent: the staged driver runs those as a Python
loop over the compiled body (staged.py, host_ops.scan)."""
from __future__ import annotations

import numpy as np

from ..registry import register
from .control import MAX_UNROLLED_ITERATIONS, _stack
from .movement import norm_axis, reshape, split_sizes, transpose


@register("Scan", 8)
def Scan_8(ctx, sequence_lens, *args, body, num_scan_inputs, directions=None):
    """Scan-8: a batch axis first on every state and scan input (the scan axis is 1), each
    batch entry scanned on its own; sequence_lens must be the full length."""
    m = int(num_scan_inputs)
    n = len(args) - m
    if m <= 0 or n < 0 or any(a is None for a in args):
        ctx.fail(f"num_scan_inputs={m} does not fit {len(args)} inputs")
    xs = list(args[n:])
    if any(x.rank < 2 for x in xs):
        ctx.fail("Scan-8 scan inputs need a batch and a sequence axis")
    length = xs[0].shape[1]
    if sequence_lens is not None:
        lens = np.asarray(ctx.require_const(sequence_lens, "sequence_lens")).reshape(-1)
        if np.any(lens != length):
            ctx.data_dependent("sequence_lens shorter than the scan inputs")
    batch = args[0].shape[0]
    if batch * length > MAX_UNROLLED_ITERATIONS or batch == 0:
        ctx.data_dependent(f"a Scan of {batch} x {length} steps is not unrolled")
    per_batch = [_batch_items(ctx, v, batch) for v in args]
    results = [_unrolled(ctx, body, [p[b] for p in per_batch[:n]],
                         [p[b] for p in per_batch[n:]], [0] * m,
                         list(directions or [0] * m), None, None) for b in range(batch)]
    return [_stack(ctx, [r[k] for r in results], body, k) for k in range(len(results[0]))]


def _batch_items(ctx, v, batch):
    parts = split_sizes(ctx, v, 0, [1] * batch) if batch > 1 else [v]
    return [reshape(ctx, p, v.shape[1:]) for p in parts]


@register("Scan", 9)
def Scan(ctx, *args, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):
    m = int(num_scan_inputs)
    n = len(args) - m
    if m <= 0 or n < 0 or any(a is None for a in args):
        ctx.fail(f"num_scan_inputs={m} does not fit {len(args)} inputs")
    xs = list(args[n:])
    in_axes = [norm_axis(ctx, a, x.rank) for a, x in zip(scan_input_axes or [0] * m, xs)]
    length = xs[0].shape[in_axes[0]]
    if length == 0 or length > MAX_UNROLLED_ITERATIONS:
        ctx.data_dependent(f"a Scan of {length} steps is not unrolled")
    return _unrolled(ctx, body, list(args[:n]), xs, in_axes,
                     list(scan_input_directions or [0] * m), scan_output_axes,
                     scan_output_directions)


def _unrolled(ctx, body, states, xs, in_axes, in_dirs, out_axes, out_dirs):
    """The body lowered once per step: final states, then the scan outputs."""
    n = len(states)
    length = xs[0].shape[in_axes[0]]
    if any(x.shape[a] != length for x, a in zip(xs, in_axes)):
        ctx.fail("scan inputs differ in sequence length")
    slices = []
    for x, a in zip(xs, in_axes):
        parts = split_sizes(ctx, x, a, [1] * length) if length > 1 else [x]
        slices.append([reshape(ctx, p, x.shape[:a] + x.shape[a + 1:]) for p in parts])
    k_out = len(body.output) - n
    per_step = []
    for t in range(length):
        step = [s[length - 1 - t if d else t] for s, d in zip(slices, in_dirs)]
        outs = ctx.inline_graph(body, states + step)
        states = outs[:n]
        per_step.append(outs[n:])
    out_dirs = list(out_dirs or [0] * k_out)
    out_axes = list(out_axes or [0] * k_out)
    results = []
    for k in range(k_out):
        values = [s[k] for s in per_step]
        if out_dirs[k]:
            values = values[::-1]
        y = _stack(ctx, values, body, k)
        axis = norm_axis(ctx, out_axes[k], y.rank)
        perm = [p + 1 for p in range(axis)] + [0] + list(range(axis + 1, y.rank))
        results.append(transpose(ctx, y, perm))
    return list(states) + results
