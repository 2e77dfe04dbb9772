"""The pipeline, stage by stage: specialize -> plan -> emit -> compile."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from . import registry
from .compile import compile_segments, library_calls_cached, load_source
from .emit import Emitter
import numpy as np

from .errors import NeedsInputValue
from .ir import BIT_TYPES, NARROW_FLOATS, Value
from .plan import plan, schedule
from .specialize import specialize
from .tiers import COMPILED, DRIVER, reference_runner
from .validate import current_limit


@dataclass
class CompiledGraph:
    """One signature's compiled entry plus what it was made from."""
    signature: tuple
    fn: object
    weights: tuple
    source: str              # the generated module followed by the fused kernels it imports
    kernels: list
    program: object
    compile_seconds: float
    path: str
    module: object = None
    guarded: object = None   # the njit dispatcher, type- and shape-checking (see rep.run)
    tier: str = "compiled"   # or "reference" / "driver" while the optimized code compiles (tiers.py)
    lazy_calls: int = 0      # library calls its driver makes as Python, compiled at the first run
    schedule: object = None  # plan.Schedule: njit entry or driver, which function runs each kernel

    @property
    def profile(self):
        """{kernel name: [total seconds, calls]} when compiled with profile=True, else None."""
        return getattr(self.module, "PROFILE", None)


# Optimization levels (ONNX Runtime's graph_optimization_level maps onto them, session.py):
# (peephole rewrites, elementwise fusion).
OPTIMIZE = {"none": (False, False), "basic": (False, True), "all": (True, True)}


def value_inputs(model, signature, feeds, optimize="all"):
    """{name: array} of the graph inputs whose values the plan for `signature` reads (an If's
    condition, a Reshape's shape: NeedsInputValue), taken from `feeds`; {} for most models.
    What a caller compiling ahead of a run (`onnxjit warmup`) passes as `values`."""
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    values = {}
    while True:
        inputs = [Value(tuple(shape), dtype, const=values.get(name), name=name)
                  for name, shape, dtype in signature]
        try:
            specialize(model, inputs, OPTIMIZE[optimize][0])
            return values
        except NeedsInputValue as need:
            if need.name in values or need.name not in feeds:
                raise
            values[need.name] = np.asarray(feeds[need.name])


def generate(model, signature, label="model", profile=False, values=None, entry=None,
             optimize="all"):
    """Specialize, plan (kernels, then their schedule) and emit `model` for `signature`, and import
    the generated module; (program, kernels, emit.Module, module). Nothing is compiled yet.
    `entry` "driver" keeps library kernels out of compiled code (plan.schedule); default
    ONNXJIT_ENTRY, else "auto".
    `optimize` is a key of OPTIMIZE."""
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    values = values or {}
    inputs = [Value(tuple(shape), dtype, const=values.get(name), name=name)
              for name, shape, dtype in signature]
    peepholes, fuse = OPTIMIZE[optimize]
    program = specialize(model, inputs, peepholes)
    kernels = plan(program, fuse)
    entry = entry or os.environ.get("ONNXJIT_ENTRY", "auto")
    generated = Emitter(program, schedule(program, kernels, entry, profile), label).emit()
    return program, kernels, generated, load_source(generated.source, generated.kernel_files)


def compile_model(model, signature, label="model", profile=False, values=None,
                  cached_only=False, progress=None, entry=None, claims=None, optimize="all"):
    """Compile `model` for `signature` = ((name, shape, dtype), ...) of its inputs.

    `values` {input name: array} gives the contents of inputs used as shapes, axes, pads ...:
    the compiled code is specialized on them. With `cached_only`, a graph whose machine code is
    not all in the caches yet comes back on a lower tier (see tiers.py) instead of compiling;
    `progress(done, total, name)` hears of each call that compiles. `entry` "driver" calls library
    kernels from a Python driver only, never linking them into an njit entry (plan.schedule);
    default ONNXJIT_ENTRY, else "auto". `claims` (compile.Claims) shares the work with other
    compile workers. `optimize`: a key of OPTIMIZE.
    """
    start = time.perf_counter()
    program, kernels, generated, module = generate(model, signature, label, profile, values, entry,
                                                   optimize)
    if cached_only and not library_calls_cached(module, generated.segments, generated.values):
        entries = None
    else:
        entries = compile_segments(module, generated.segments, generated.params, cached_only,
                                   progress, claims)
    if entries is None and generated.entry_links:
        # An njit entry linking library kernels compiles for tens of seconds; a driver over the
        # same steps needs only the kernels' own machine code, which may be cached already.
        # Its calls run as Python compile at the first run, where their machine code is not
        # cached: only a driver whose every library call is a Segment (checked) answers.
        fallback = compile_model(model, signature, label, profile, values, True, progress,
                                 "driver", optimize=optimize)
        if fallback.tier == COMPILED and fallback.lazy_calls == 0:
            fallback.tier = DRIVER
            return fallback
        entries = None
    if entries is None:
        return CompiledGraph(signature, reference_runner(model, current_limit()), (), generated.listing, kernels,
                             program, time.perf_counter() - start, module.__file__, module,
                             tier="reference", schedule=generated.schedule)
    # An njit entry is called through its compiled entry point, skipping the dispatcher's type
    # matching (~0.4 us): rep.run only calls it with arrays whose shape, dtype and layout match.
    single = bool(entries) and generated.schedule.entry == "njit"
    fn = entries[0] if single else getattr(module, generated.entry)
    fn = program.with_python_outputs(_narrow_edges(fn, program))   # ZipMap, string labels
    guarded = None
    if single and fn is entries[0] and program.inputs:
        # The dispatcher checks dtype, rank and layout, the module's guard the shapes: a call
        # is safe for any arguments, and returns None (or raises TypeError) on a mismatch.
        guarded = getattr(module, generated.entry)
        guarded.disable_compile()
    return CompiledGraph(signature, fn, tuple(generated.weights),
                         generated.listing, kernels, program, time.perf_counter() - start,
                         module.__file__, module, guarded, lazy_calls=generated.lazy_calls,
                         schedule=generated.schedule)


def _narrow_edges(fn, program):
    """`fn` converting float16/bfloat16 inputs to float32 and outputs back (they are held in
    float32 inside compiled code), and viewing float8/float4/int4/int2 ones as their uint8 bit
    patterns and back; `fn` itself when the graph has none at its edges."""
    widen = [i for i, v in enumerate(program.inputs) if v.dtype in NARROW_FLOATS]
    bits = [i for i, v in enumerate(program.inputs) if v.dtype in BIT_TYPES]
    narrow = [v.dtype if v.dtype in NARROW_FLOATS else None for v in program.outputs]
    viewed = [v.dtype if v.dtype in BIT_TYPES else None for v in program.outputs]
    if not widen and not bits and not any(narrow) and not any(viewed):
        return fn

    def run_narrow(*args):
        args = list(args)
        for i in widen:
            args[i] = args[i].astype(np.float32)
        for i in bits:
            args[i] = args[i].view(np.uint8)
        outs = fn(*args)
        return tuple(o.astype(d) if d is not None else o if b is None else o.view(b)
                     for o, d, b in zip(outs, narrow, viewed))
    return run_narrow


def unsupported_ops(model, lowers=None):
    """Sorted (domain, op_type, opset) triples of nodes with no lowering, subgraphs included;
    `lowers(op_type, opset, domain)` says which have one (default: the CPU registry)."""
    import onnxjit.ops  # noqa: F401
    lowers = lowers or (lambda op, opset, domain: registry.lookup(op, opset, domain) is not None)
    opsets = {(e.domain or ""): e.version for e in model.opset_import}
    missing = set()
    for node in _all_nodes(model.graph):
        domain = node.domain or ""
        opset = opsets.get(domain, opsets.get("ai.onnx"))
        if not lowers(node.op_type, opset, domain):
            missing.add((domain or "ai.onnx", node.op_type, opset))
    return sorted(missing, key=lambda t: (t[0], t[1], t[2] or 0))


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _all_nodes(sub)
