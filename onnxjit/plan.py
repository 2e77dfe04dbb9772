"""Plan: group elementwise steps into fused loop nests; other steps stay calls."""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import sanitize


@dataclass(eq=False)
class Kernel:
    """A unit of the generated entry: a fused loop nest ("fused") or an array call ("call")."""
    kind: str
    steps: list
    shape: tuple = ()
    inputs: list = field(default_factory=list)    # Values read from outside
    outputs: list = field(default_factory=list)   # Values written to arrays
    name: str = ""

    @property
    def nodes(self):
        return [n for s in self.steps for n in s.nodes]


def plan(program, fuse=True):
    """Kernels in execution order for a specialized Program (each elementwise step a kernel of
    its own unless `fuse`)."""
    kernels, open_group = [], None
    for step in program.steps:
        if step.kind == "ew":
            if open_group is None or open_group.shape != step.outs[0].shape or not fuse:
                _close(kernels, open_group)
                open_group = Kernel("fused", [], step.outs[0].shape)
            open_group.steps.append(step)
            continue
        if open_group is not None and _reads_any(step, open_group):
            _close(kernels, open_group)
            open_group = None
        kernels.append(Kernel("call", [step], inputs=list(step.inputs), outputs=list(step.outs)))
    _close(kernels, open_group)
    _settle_fused_io(kernels, program)
    # A fused group whose values nobody reads (e.g. a CastLike feeding only compile-time
    # folding) computes nothing that is used: drop it.
    kernels = [k for k in kernels if k.kind != "fused" or k.outputs]
    for i, k in enumerate(kernels):
        k.name = kernel_name(i, k)
    return kernels


def _close(kernels, group):
    if group is not None:
        kernels.append(group)


def _reads_any(step, group):
    produced = {id(o) for s in group.steps for o in s.outs}
    return any(v is not None and id(v) in produced for v in step.inputs)


def _settle_fused_io(kernels, program):
    """Decide which values a fused kernel reads from outside and which it must write out."""
    readers = {}
    for k in kernels:
        for s in k.steps:
            for v in s.inputs:
                if v is not None:
                    readers.setdefault(id(v), set()).add(id(k))
    program_outputs = {id(v) for v in program.outputs}
    for k in kernels:
        if k.kind != "fused":
            continue
        produced = {id(o) for s in k.steps for o in s.outs}
        seen = set()
        for s in k.steps:
            for v in s.inputs:
                if id(v) not in produced and id(v) not in seen and not _inlined(v):
                    seen.add(id(v))
                    k.inputs.append(v)
        k.outputs = [o for s in k.steps for o in s.outs
                     if id(o) in program_outputs or readers.get(id(o), set()) - {id(k)}]


def _inlined(value):
    """Size-1 constants are written into the loop body as literals."""
    return value.is_const and value.size == 1


def kernel_name(index, kernel):
    """A telling name: k<index>_<op types>."""
    ops = []
    for _, op_type in kernel.nodes:
        if op_type not in ops:
            ops.append(op_type)
    label = "_".join(sanitize(op) for op in ops[:3]) + ("_etc" if len(ops) > 3 else "")
    prefix = "fused" if kernel.kind == "fused" else "call"
    return f"{prefix}_{index}_{label}".lower()
