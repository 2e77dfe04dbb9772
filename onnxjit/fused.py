"""Fused elementwise kernels as source: one loop nest each, generic over sizes; shared kernels.

A kernel's text holds its structure (the op sequence, dtypes, which dims collapse, which inputs
broadcast along which dims, prange or not) but no sizes: loop bounds and reshapes are read from
the arguments' `.shape` (arrays, never numbers that a compiled caller would pass as literals).
Kernels that differ only in shape then have the same text. The text is named by its hash
(`f_<hash>`) and written to its own file in the cache, so Numba compiles it once per machine for
every model and signature that uses it (compile.load_kernel). The Python driver's data-movement
kernels (calls.movement_call) are shared the same way.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from . import scalar_expr
from .ir import NARROW_FLOATS
from .source import LineBuffer, dtype_src, fill, scalar_lit, template

# Fused loops this large run their outer loop with prange (Numba's threads; one thread when
# numba.set_num_threads(1)): below it, waking the thread pool costs more than it saves.
PARALLEL_MIN_ELEMENTS = 1 << 18
# LLVM fast-math flags for fused elementwise loops: 'contract' lets a*b+c become one FMA and 'arcp'
# lets x/y become x*(1/y) (hoisted for constants and broadcast operands). Together they make the GELU /
# normalization chain 1.7x faster. Deliberately without 'nnan'/'ninf'/'nsz'/'reassoc': NaN, Inf and
# signed zeros keep IEEE semantics, and the order of operations is the graph's. The cost is an ulp or
# two (1/y overflows only for subnormal y).
FUSED_FASTMATH = '{"arcp", "contract"}'


@dataclass
class SharedKernel:
    """A kernel shared through the cache: its function name (`f_<hash of its file's text>`), the
    text of its file and of the function alone."""
    name: str
    file_text: str
    function: str


def shared_kernel(function_of, kernels_digest, modules=(), parallel=False):
    """The SharedKernel whose function source is `function_of(name)`, calling the library
    `modules` (and compiled with prange when `parallel`). `kernels_digest` names the library
    kernels' version in the file when the function calls one (Numba's cache does not notice a
    callee change)."""
    mods = sorted(set(modules))

    def file_text(name):
        function = function_of(name)
        header = template("shared_file.py.tmpl").substitute(
            library=f"\n# Calls library kernels {kernels_digest}." if mods else "",
            imports="".join(f"\nfrom onnxjit.kernels import {m} as __k_{m}" for m in mods)
            + ("\nfrom onnxjit.kernels import PRANGE_ONLY as __PRANGE_ONLY" if parallel else ""))
        return header + "\n\n" + function, function

    name = "f_" + hashlib.sha256(file_text("f_")[0].encode()).hexdigest()[:20]
    return SharedKernel(name, *file_text(name))


def fused_kernel(kernel, kernels_digest):
    """The SharedKernel of a planned "fused" kernel."""
    # views: every operand is seen as the loop nest's shape (kernels/views.py)
    modules = set().union(*(s.modules for s in kernel.steps)) | {"views"}
    if any(s.outs[0].dtype in NARROW_FLOATS for s in kernel.steps):
        modules.add("scalar")      # the rounding to float16/bfloat16 (write_body)
    return shared_kernel(lambda name: function_text(kernel, name), kernels_digest, modules,
                         is_parallel(kernel))


def is_parallel(kernel):
    """The fused kernel's outer loop is a prange (PARALLEL_MIN_ELEMENTS)."""
    groups, _ = collapse(kernel.shape, [v.shape for v in kernel.inputs])
    return math.prod(math.prod(kernel.shape[d] for d in g) for g in groups) >= PARALLEL_MIN_ELEMENTS


def function_text(kernel, name):
    """The source of one fused kernel as a function called `name` (fused_kernel.py.tmpl)."""
    params = [f"a{i}" for i in range(len(kernel.inputs))]
    shapes = [v.shape for v in kernel.inputs]
    groups, views = collapse(kernel.shape, shapes)
    sizes = size_sources(kernel.shape, shapes)
    parallel = is_parallel(kernel)
    ops = list(dict.fromkeys(op for _, op in kernel.nodes))
    # Integer and bool results (quantization, casts, comparisons) turn an ulp into a different
    # value (x * (1/s) rounds 25.5 to 25): those kernels keep IEEE arithmetic.
    exact = any(np.dtype(s.outs[0].dtype).kind in "iub" for s in kernel.steps)
    bounds = [f"n{k}" for k in range(len(groups))]
    outs = {id(o): f"o{i}" for i, o in enumerate(kernel.outputs)}
    loops = LineBuffer()
    idx = [f"i{d}" for d in range(len(groups))]
    for d, n in enumerate(bounds):
        loops.line(f"for {idx[d]} in {'__prange' if parallel and d == 0 else 'range'}({n}):")
        loops.level += 1
    write_body(loops, kernel, params, views, idx, outs)
    same = len(groups) == len(kernel.shape) and all(len(g) == 1 for g in groups)
    rets = [outs[id(o)] if same else f"__k_views.c_view({outs[id(o)]}, {tuple_src(sizes)})"
            for o in kernel.outputs]
    return fill(
        "fused_kernel.py.tmpl", name=name, params=", ".join(params),
        ops=", ".join(comment_text(op) for op in ops),
        options=("" if exact else f", fastmath={FUSED_FASTMATH}")
        + (", parallel=__PRANGE_ONLY" if parallel else ""),
        sizes=[f"{n} = {' * '.join(sizes[d] for d in g) if g else '1'}"
               for n, g in zip(bounds, groups)],
        inputs=[f"{p}_ = __k_views.c_view("
                f"{p}, {tuple_src([n if full else '1' for n, full in zip(bounds, view)])})"
                for p, view in zip(params, views)],
        outputs=[f"{outs[id(o)]} = __np.empty({tuple_src(bounds)}, {dtype_src(o.dtype)})"
                 for o in kernel.outputs],
        loops=loops.lines, results=rets[0] if len(rets) == 1 else tuple_src(rets))


def write_body(buf, kernel, params, views, idx, outs):
    """The loop body: one scalar statement per step; stores of the values written out."""
    scalars = {}
    for p, v, view in zip(params, kernel.inputs, views):
        scalars[id(v)] = f"{p}_[{', '.join(i if full else '0' for i, full in zip(idx, view))}]"
    for n, step in enumerate(kernel.steps):
        out = step.outs[0]
        args = [scalars.get(id(v)) or scalar_lit(v.const.reshape(-1)[0], v.dtype)
                for v in step.inputs]
        name = f"v{n}"
        cast = (f"__k_scalar.{NARROW_FLOATS[out.dtype]}" if out.dtype in NARROW_FLOATS
                else dtype_src(out.dtype))
        buf.line(f"{name} = {cast}({scalar_expr.render(step.expr, args)})")
        scalars[id(out)] = name
        if id(out) in outs:
            buf.line(f"{outs[id(out)]}[{', '.join(idx)}] = {name}")


def collapse(shape, input_shapes):
    """How a loop nest over `shape` indexes its inputs after merging dims that index alike.

    A dim of an input is "full" (it spans the loop dim) or "broadcast" (size 1); adjacent dims of
    `shape` in which every input is alike merge into one loop dim, so a same-shape chain is one
    flat loop, and dims of size 1 drop out. Returns (the dims of `shape` each loop dim merges,
    per input a tuple telling for each loop dim whether the input is full along it).
    """
    rank = len(shape)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in input_shapes]
    groups, kinds = [], []
    for d in range(rank):
        if shape[d] == 1:
            continue
        kind = tuple(p[d] == shape[d] for p in padded)
        if groups and kinds[-1] == kind:
            groups[-1].append(d)
        else:
            groups.append([d])
            kinds.append(kind)
    if not groups:
        groups, kinds = [[]], [tuple(True for _ in padded)]
    views = [tuple(kind[i] for kind in kinds) for i in range(len(padded))]
    return groups, views


def size_sources(shape, input_shapes):
    """Source of each dim of `shape`: `a<i>.shape[<j>]` of the first input spanning it, "1" for
    dims of size 1 (part of the structure), the number itself when no input spans it."""
    rank = len(shape)
    sizes = []
    for d, n in enumerate(shape):
        spans = [(i, d - rank + len(s)) for i, s in enumerate(input_shapes)
                 if d >= rank - len(s) and s[d - rank + len(s)] == n]
        sizes.append("1" if n == 1 else f"a{spans[0][0]}.shape[{spans[0][1]}]" if spans
                     else repr(int(n)))
    return sizes


def tuple_src(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def comment_text(text, limit=60):
    """Model-supplied text made safe for a one-line comment."""
    return ascii(str(text))[1:-1][:limit]
