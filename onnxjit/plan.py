"""Plan: group elementwise steps into fused loop nests (other steps stay calls), then schedule
the kernels: one njit entry or a Python driver, its calls and njit segments, and liveness."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .ir import sanitize
from .steps import LibraryCall, Movement

# Above this many statements the entry is split into njit segments driven from Python:
# Numba's compile time grows with the length of one function (DESIGN.md, "Emit"). The driver then
# calls library kernels and shared data-movement kernels itself (see calls.py).
MAX_SEGMENT_STATEMENTS = 40
# Graphs whose kernels write this many elements may take a Python driver even when short (see
# prefers_driver): at a few microseconds per call, its overhead is noise for them.
DRIVER_MIN_ELEMENTS = 1 << 20


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

    @property
    def op(self):
        """A call kernel's structured op (steps.LibraryCall, Movement or ArrayExpr); None when fused."""
        return self.steps[0].op if self.kind == "call" else None

    @property
    def library_calls(self):
        """Library kernel calls its code makes (a fused kernel's scalar helpers are not counted)."""
        return self.op.library_calls if self.kind == "call" else 0

    @property
    def driver_library(self):
        """A library call the Python driver can make itself (steps.LibraryCall.driver_callable)."""
        return isinstance(self.op, LibraryCall) and self.op.driver_callable

    @property
    def movement(self):
        """Data movement the driver runs as a shared kernel (steps.Movement, calls.py)."""
        return isinstance(self.op, Movement)

    @property
    def reads(self):
        """The Values its code reads (a fused kernel's inlined constants aside)."""
        return [v for v in self.inputs if v is not None]

    @property
    def plumbing(self):
        """A view a lowering made for a kernel's canonical operands (a 5-D view of a pool's or
        Conv's input, its 5-D output viewed back: meta "drop_unread"). It writes nothing and
        compiles to nothing much, so the schedule's tallies (lines, elements) leave it out."""
        return self.kind == "call" and bool(self.steps[0].meta.get("drop_unread"))


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


# -- schedule: what the entry runs, in which function ----------------------------------------------
@dataclass(eq=False)
class Call:
    """One step of the entry, in order. `kind`:

    - "entry": the whole graph as one njit `run_graph` (the only step of an njit schedule);
    - "library": the Python driver calls one library kernel (its machine code comes from the
      kernel's own cache, compiled once per install);
    - "movement": the driver calls data movement as a shared kernel generic over its numbers;
    - "view": the driver reshapes with numpy (steps.Movement.reshape_only; nothing compiles);
    - "fused": the driver calls one fused kernel;
    - "python": the driver runs a call kernel's code as Python (a library call wrapped in
      reshapes, say, with entry "driver"): its kernel compiles at the first run;
    - "segment": an njit function `name` running `kernels`, called by the driver.

    `reads`: the Values it takes from the entry's parameters or earlier steps; `makes`: those it
    hands on (a segment returns only what later steps or the outputs read); `dead`: those the
    driver deletes after it, their last use (held to the end, every intermediate would take fresh
    memory). An "entry" step leaves all three empty: compiled code frees its own arrays."""
    kind: str
    kernels: list
    reads: list = field(default_factory=list)
    makes: list = field(default_factory=list)
    dead: list = field(default_factory=list)
    name: str = "run_graph"      # the module's function running its kernels

    @property
    def jitted(self):
        """Its kernels run inside an njit function (the entry or a segment), not in Python."""
        return self.kind in ("entry", "segment")

    @property
    def links(self):
        """Its compiled code is, or links in, a library kernel (slow to compile)."""
        return self.kind == "library" or self.jitted and library_calls(self.kernels) > 0


@dataclass(eq=False)
class Schedule:
    """How the entry runs the kernels: `entry` "njit" (one njit `run_graph`) or "driver" (a Python
    `run_graph` making `calls` in order); emit renders it as it is."""
    entry: str
    calls: list
    kernels: list
    profile: bool = False   # a driver timing each kernel (one kernel per call)

    @property
    def lazy_calls(self):
        """Calls the driver runs as Python (their library kernels compile at the first run)."""
        return sum(c.kind == "python" for c in self.calls)

    def hosts(self):
        """{kernel name: (the module's function running it, whether that function is njit)}."""
        return {k.name: (c.name, c.jitted) for c in self.calls for k in c.kernels}


def schedule(program, kernels, entry="auto", profile=False):
    """The Schedule of `kernels` (plan's, in order) for `program`: an njit entry when the graph is
    short and nothing argues for a driver (prefers_driver), else a Python driver. `entry`
    "driver" keeps library kernels out of compiled code; `profile` makes each kernel a call of
    its own."""
    groups = driver_groups(kernels, python_library=entry == "driver")
    if profile:      # each kernel a call of the driver, which times it
        groups = [k if k.driver_library or k.movement else [k] for k in kernels]
    elif (sum(statement_lines(k) for k in kernels if not k.plumbing) <= MAX_SEGMENT_STATEMENTS
          and not prefers_driver(kernels, groups, entry)):
        return Schedule("njit", [Call("entry", list(kernels))], kernels)
    return Schedule("driver", driver_calls(program, groups), kernels, profile)


def statement_lines(kernel):
    """Lines of the statement emit writes for a kernel: a fused kernel's call; a call kernel's
    comment naming its nodes, then its assignment. A function's length is counted in these."""
    return 1 if kernel.kind == "fused" else 2


def library_calls(kernels):
    """How many library kernel calls the kernels' code makes."""
    return sum(k.library_calls for k in kernels)


def driver_groups(kernels, python_library=False):
    """The calls of a Python driver over `kernels`: each library call and data movement (see
    calls.py) alone, the kernels between them in lists of at most MAX_SEGMENT_STATEMENTS lines (an
    njit segment each), except that a lone fused kernel is called directly, without a segment.
    With `python_library` (entry "driver": a first use that compiles least), any kernel calling
    a library kernel (a reshaped MatMul, say) is a call of its own that the driver runs as
    Python, so no njit segment links the kernel in, and each fused kernel is called directly:
    a segment around fused kernels would compile their code once more (~0.2 s; 350 of the
    onnx node tests' 381 segments held only fused kernels), for ~0.5 us a run per call saved."""
    groups, group = [], []
    for k in kernels:
        if k.driver_library or k.movement or (python_library and (k.library_calls
                                                                  or k.kind == "fused")):
            groups.extend([group, k] if group else [k])
            group = []
            continue
        if group and sum(map(statement_lines, group)) + statement_lines(k) > MAX_SEGMENT_STATEMENTS:
            groups.append(group)
            group = []
        group.append(k)
    groups += [group] if group else []
    return [g[0] if isinstance(g, list) and len(g) == 1 and g[0].kind == "fused" else g
            for g in groups]


def prefers_driver(kernels, groups, entry):
    """A short graph gets a Python driver when `entry` is "driver" and it calls library
    kernels or is calls of shared kernels alone (the kernels' machine code then comes from
    their own cache, compiled once per install, instead of being linked and optimized again
    into the entry: a first use in seconds, against tens of seconds for a Conv or pooling
    entry). It also gets one when it writes at least DRIVER_MIN_ELEMENTS elements (its run
    time dwarfs the driver's few microseconds per call) and the driver
    would leave fewer library calls in compiled code: in an njit entry each is linked and
    compiled again (AlexNet's entry took 15 s to compile, its driver 4.6 s)."""
    if entry == "driver" and (library_calls(kernels)
                              or not any(isinstance(g, list) for g in groups)):
        # Also a graph the driver runs as calls alone (fused kernels, data movement): an
        # njit entry around them would compile their code again (0.1-0.15 s a graph).
        return True
    if sum(math.prod(o.shape) for k in kernels if not k.plumbing
           for o in k.outputs) < DRIVER_MIN_ELEMENTS:
        return False
    in_segments = [k for g in groups if isinstance(g, list) for k in g]
    return library_calls(in_segments) < library_calls(kernels)


def driver_calls(program, groups):
    """The driver's Calls for `groups` (a Kernel alone or a list of them, a segment), with what
    each reads, makes and leaves dead."""
    inputs = {id(v) for v in program.inputs}
    outputs = {id(v) for v in program.outputs}

    def held(v):      # an entry parameter: a graph input or a weight, never deleted
        return v.is_const or id(v) in inputs

    later = [outputs]     # ids read by the calls after each one, or returned
    for group in reversed(groups[1:]):
        later.insert(0, later[0] | {id(v) for k in _listed(group) for v in k.reads})
    calls, defined = [], set()
    for group, after in zip(groups, later):
        reads = list({id(v): v for k in _listed(group) for v in k.reads}.values())
        if isinstance(group, list):
            made = [o for k in group for o in k.outputs if id(o) in after]
            name = f"segment_{sum(c.kind == 'segment' for c in calls)}"
            calls.append(Call("segment", group, [v for v in reads if held(v) or id(v) in defined],
                              made, name=name))
        else:
            calls.append(Call(_call_kind(group), [group], reads, list(group.outputs)))
        defined.update(id(v) for v in calls[-1].makes)
    last_use = {}
    for i, call in enumerate(calls):
        last_use.update((id(v), (i, v)) for v in [*call.makes, *call.reads] if not held(v))
    for i, call in enumerate(calls):
        call.dead = [v for j, v in last_use.values() if j == i and id(v) not in outputs]
    return calls


def _listed(group):
    return group if isinstance(group, list) else [group]


def _call_kind(kernel):
    if kernel.driver_library:
        return "library"
    if kernel.movement:
        return "view" if kernel.op.reshape_only else "movement"
    return "fused" if kernel.kind == "fused" else "python"
