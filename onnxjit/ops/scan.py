"""Scan unrolled at compile time: its length is a dimension of its scan inputs, so the body is
lowered in place once per step (like Loop with a known trip count) and the whole Scan compiles
with the rest of the graph. Longer scans, Scan-8 (batch axis, sequence_lens) and bodies that
cannot be compiled raise DataDependent: the staged driver runs those as a Python loop over the
compiled body (staged.py, host_ops.scan)."""
from __future__ import annotations

from ..registry import register
from .control import MAX_UNROLLED_ITERATIONS, _stack
from .movement import norm_axis, reshape, split_sizes, transpose


@register("Scan", 8)
def Scan_8(ctx, *args, body, num_scan_inputs, directions=None):
    ctx.data_dependent("Scan-8 (a batch axis, sequence_lens) runs in the staged driver")


@register("Scan", 9)
def Scan(ctx, *args, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):
    m = int(num_scan_inputs)
    n = len(args) - m
    if m <= 0 or n < 0 or any(a is None for a in args):
        ctx.fail(f"num_scan_inputs={m} does not fit {len(args)} inputs")
    states, xs = list(args[:n]), list(args[n:])
    in_axes = [norm_axis(ctx, a, x.rank) for a, x in zip(scan_input_axes or [0] * m, xs)]
    in_dirs = list(scan_input_directions or [0] * m)
    length = xs[0].shape[in_axes[0]]
    if any(x.shape[a] != length for x, a in zip(xs, in_axes)):
        ctx.fail("scan inputs differ in sequence length")
    if length == 0 or length > MAX_UNROLLED_ITERATIONS:
        ctx.data_dependent(f"a Scan of {length} steps is not unrolled")
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
    out_dirs = list(scan_output_directions or [0] * k_out)
    out_axes = list(scan_output_axes or [0] * k_out)
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
