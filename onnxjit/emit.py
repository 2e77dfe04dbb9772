"""Emit: render the planned kernels as a Python module of Numba functions."""
from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass, field

import numpy as np

from .calls import movement_function
from .fused import comment_text, fused_kernel, shared_kernel
from .ir import NameTable, compute_dtype, held
from .source import LineBuffer, fill
from .steps import LibraryCall


@dataclass
class Segment:
    """One compiled call of the entry, in order: the whole entry, an njit segment, or a library
    or shared kernel the Python driver calls. compile.compile_segments compiles each for the types it
    will see, following result types from the calls that make them to the calls that read them."""
    name: str        # source of the callee: "run_graph", "segment_0", "__k_pool.maxpool"
    args: list       # entry parameters or earlier targets (str), or numbers (steps.Param)
    targets: list = field(default_factory=list)   # the variables it assigns
    unpack: bool = True                           # targets unpack a returned tuple
    links: bool = False   # it is, or its compiled code links in, a library kernel (slow to compile)


@dataclass
class Statement:
    """One kernel's statement as compiled code holds it: the variables it assigns, its source
    lines, and what a call of it from the Python driver needs: for a fused kernel or a library
    call the driver can make (steps.LibraryCall.driver_callable) its (callee, arguments:
    variables or steps.Param); the variables of its step's inputs (a movement kernel's)."""
    targets: list
    lines: list
    call: tuple = None
    names: list = field(default_factory=list)
    modules: set = field(default_factory=set)   # library modules its source names
    lhs: str = ""             # its assignment's target and expression, as written
    expr: str = ""


@dataclass
class Module:
    """Generated source plus what the runtime needs to call it."""
    source: str
    entry: str
    weights: list                      # constant arrays, passed after the inputs
    segments: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    params: dict = field(default_factory=dict)    # entry parameter name -> Value
    shared: dict = field(default_factory=dict)    # "f_<hash>" -> fused.SharedKernel it imports
    values: dict = field(default_factory=dict)    # every identifier -> its Value
    schedule: object = None   # the plan.Schedule it renders (where each kernel runs: explain)

    @property
    def lazy_calls(self):
        """Driver statements calling library kernels as Python (not Segments)."""
        return self.schedule.lazy_calls

    @property
    def entry_links(self):
        """The entry is one njit function linking library kernels in (slow to compile)."""
        return self.schedule.entry == "njit" and self.segments[0].links

    @property
    def kernel_files(self):
        """{name: file text} of the shared kernels, written beside the module (compile.load_source)."""
        return {name: k.file_text for name, k in self.shared.items()}

    @property
    def listing(self):
        """The module followed by the shared kernels it imports: everything a reader needs."""
        if not self.shared:
            return self.source
        kernels = "\n\n".join(k.function for k in self.shared.values())
        return (self.source.rstrip("\n") + "\n\n\n# " + "-" * 94 + "\n# The shared kernels bound"
                " above: each is the file <cache>/f_<hash>.py, for every model using it.\n\n\n"
                + kernels)


@functools.lru_cache(maxsize=None)
def kernels_digest():
    """Hash of the library kernels' source. Numba's cache does not notice when a callee changes,
    so the generated module (whose name is the hash of its text) names the kernels it was built
    against: new kernels mean a new module and fresh machine code."""
    digest = hashlib.sha256()
    folder = os.path.join(os.path.dirname(__file__), "kernels")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + f.read())
    return digest.hexdigest()[:16]


def node_list(kernel):
    return ", ".join(f"{comment_text(name) or '?'} ({comment_text(op)})" for name, op in kernel.nodes)


class Emitter:
    """Assigns identifiers to Values and writes the module the plan's Schedule describes."""

    def __init__(self, program, schedule, model_label="model"):
        self.program, self.schedule, self.model_label = program, schedule, model_label
        self.kernels = schedule.kernels
        self.names = NameTable()
        self.vars = {}          # id(Value) -> identifier
        self.values = {}        # identifier -> Value
        self.weights = []       # const Values passed as arguments
        self.shared = {}        # "f_<hash>" -> SharedKernel
        self.bindings = []      # module-level lines binding each fused kernel's name
        for v in program.inputs:
            self.vars[id(v)] = self.names.fresh("in_" + v.name)
            # graph inputs too: compile workers predict the types of a library call that takes
            # one directly (ResNet-50's first Conv) instead of leaving it to the exact pass
            self.values[self.vars[id(v)]] = v

    def var(self, value):
        """The identifier holding `value`, registering constants as weights."""
        if value is None:
            return "None"
        key = id(value)
        if key not in self.vars:
            if value.is_const:
                self.vars[key] = self.names.fresh(f"w{len(self.weights)}")
                self.weights.append(value)
            else:
                self.vars[key] = self.names.fresh(f"t{len(self.vars)}")
            self.values[self.vars[key]] = value
        return self.vars[key]

    def emit(self):
        buf = LineBuffer()
        statements = {k.name: self.statement(k) for k in self.kernels}
        final = self.return_statement()
        params = [self.var(v) for v in self.program.inputs] + [self.var(w) for w in self.weights]
        values = {p: v for p, v in zip(params, list(self.program.inputs) + self.weights)}
        if self.schedule.entry == "njit":
            segments = self.write_entry(buf, statements, final, params)
            entry_kind = "njit"
        else:
            segments = self.write_driver(buf, statements, final, params, values)
            entry_kind = f"Python driver over {len(segments)} compiled calls"
        source = fill(
            "module.py.tmpl", model_label=comment_text(self.model_label),
            signature=self.signature_text(), n_kernels=len(self.kernels),
            kernels_digest=kernels_digest(), entry_kind=entry_kind,
            imports=self.imports(set().union(*(s.modules for s in statements.values())),
                                 self.bindings),
            bindings=self.binding_block(), functions=buf.lines)
        # writeable C arrays: the types the module is compiled for (Numba types read-only arrays apart)
        weights = [np.require(held(w.const, w.dtype), compute_dtype(w.dtype), ['C', 'W'])
                   for w in self.weights]
        return Module(source, "run_graph", weights, segments, self.kernels, values, self.shared,
                      self.values, self.schedule)

    def binding_block(self):
        """Module-level lines importing the shared kernels (compile.load_kernel) under the plan's
        names, then two blank lines; none when there are none."""
        if not self.bindings:
            return []
        return ["# Shared kernels (fused elementwise loops; data movement the driver calls): "
                "generic over", "# sizes, each in its own file in the cache (source at the end of "
                "rep.source())."] + self.bindings + ["", ""]

    def signature_text(self):
        return ", ".join(f"{comment_text(v.name)}: {v.dtype}{list(v.shape)}" for v in self.program.inputs)

    @staticmethod
    def imports(modules, bindings):
        """Import lines for the library `modules` the statements call and, when the module binds
        shared kernels, their loader."""
        lines = [f"from onnxjit.kernels import {m} as __k_{m}" for m in sorted(modules)]
        if bindings:
            lines.insert(0, "from onnxjit.compile import load_kernel as __load_kernel")
        return "\n".join(lines)

    # -- statements ---------------------------------------------------------------------------
    def statement(self, kernel):
        """The Statement running one kernel."""
        names, op = [], kernel.op
        if kernel.kind == "fused":
            self.bind_fused(kernel)
            args = [self.var(v) for v in kernel.inputs]
            expr = f"{kernel.name}({', '.join(args)})"
            lines, call = [], (kernel.name, args)
        else:
            names = [self.var(v) for v in kernel.steps[0].inputs]
            expr = op.render(names)
            lines, call = [f"# {kernel.name}: {node_list(kernel)}"], None
            if isinstance(op, LibraryCall) and op.driver_callable:
                call = (f"__k_{op.kernel[0]}.{op.kernel[1]}",
                        [names[a] if isinstance(a, int) else a for a in op.args])
        targets = [self.var(o) for o in kernel.outputs]
        lhs = targets[0] if len(targets) == 1 else ", ".join(targets)
        return Statement(targets, lines + [f"{lhs} = {expr}"], call, names,
                         modules=set(op.modules) if op else set(), lhs=lhs, expr=expr)

    def bind_fused(self, kernel):
        """Import the fused kernel's shared function under the kernel's telling name."""
        self.bind(kernel.name, fused_kernel(kernel, kernels_digest()),
                  f"# ONNX nodes: {node_list(kernel)}")

    def bind_movement(self, kernel, statement):
        """Bind the shared kernel running a movement kernel for the driver; (its name, arguments:
        variables and steps.Param numbers)."""
        params, body, args = kernel.op.kernel(statement.names)
        shared = shared_kernel(movement_function(params, body), kernels_digest(), kernel.op.modules)
        self.bind(kernel.name, shared, f"# ONNX nodes: {node_list(kernel)}")
        return kernel.name, args

    def bind(self, name, shared, comment):
        """Import a shared kernel (compile.load_kernel) as the module global `name`."""
        self.shared.setdefault(shared.name, shared)
        self.bindings += [comment, f"{name} = __load_kernel(__file__, {shared.name!r})"]

    def return_statement(self):
        outs, seen = [], set()
        for v in self.program.outputs:
            name = self.var(v)
            # Never hand out an input, a weight or the same array twice: copy those.
            needs_copy = name in seen or self.may_alias_caller(v)
            outs.append(f"{name}.copy()" if needs_copy else name)
            seen.add(name)
        return Statement([], [f"return {lit_tuple(outs)}"])

    def may_alias_caller(self, value):
        """True when `value` may share memory with an input or a weight (through views)."""
        if value.is_const or any(value is i for i in self.program.inputs):
            return True
        step = value.producer
        if step is None or step.kind != "call" or not step.meta.get("view"):
            return False
        return any(v is not None and self.may_alias_caller(v) for v in step.inputs)

    # -- entry ----------------------------------------------------------------------------------
    def write_entry(self, buf, statements, final, params):
        """The entry as one njit `run_graph`; its Segment."""
        (call,) = self.schedule.calls
        self.write_function(buf, "segment.py.tmpl", "run_graph", params,
                            [self.shape_guard()] + [statements[k.name] for k in call.kernels]
                            + [final])
        return [Segment("run_graph", params, unpack=False, links=call.links)]

    def shape_guard(self):
        """A statement returning None unless every input has the shape compiled for.

        Numba's dispatcher already matches dtype, rank and layout in C; with this guard, a call of
        the dispatcher is a complete check of the signature (rep.run's fast path relies on it).
        """
        checks = [f"{self.var(v)}.shape != {lit_tuple([str(d) for d in v.shape])}"
                  for v in self.program.inputs]
        if not checks:
            return Statement([], [])
        return Statement([], ["# guard: only the input shapes this module was compiled for",
                              f"if {' or '.join(checks)}:", "    return None"])

    def write_driver(self, buf, statements, final, params, types):
        """A Python `run_graph` making the schedule's calls in order and deleting each array after
        its last use (plan.Call.dead); the Segments it calls. `types` {variable: Value} gains the
        variables made by statements the driver runs as Python."""
        profile = self.schedule.profile
        segments, driver = [], ["__t = __perf_counter()"] if profile else []
        for call in self.schedule.calls:
            lines = self.driver_call(buf, call, statements, segments, types)
            if profile:     # one kernel a call
                lines.append(f"__t = __record({call.kernels[0].name!r}, __t)")
            dead = [self.var(v) for v in call.dead]
            driver += lines + ([f"del {', '.join(dead)}"] if dead else [])
        if profile:
            buf.splice(fill("profile.py.tmpl"))
        buf.splice(fill("driver.py.tmpl", name="run_graph", params=", ".join(params),
                        body=driver + final.lines))
        buf.line()
        return segments

    def driver_call(self, buf, call, statements, segments, types):
        """The driver's lines for one plan.Call, writing a segment's function to `buf` and adding
        the compiled calls it makes to `segments`."""
        if call.kind == "segment":
            reads, made = [self.var(v) for v in call.reads], [self.var(v) for v in call.makes]
            ret = Statement([], [f"return {lit_tuple([self.contiguous(r) for r in made])}"])
            self.write_function(buf, "segment.py.tmpl", call.name, reads,
                                [statements[k.name] for k in call.kernels] + [ret])
            segments.append(Segment(call.name, reads, made, links=call.links))
            return [f"{lit_tuple(made) if made else '_'} = {call.name}({', '.join(reads)})"]
        (kernel,) = call.kernels
        statement = statements[kernel.name]
        lines = list(statement.lines)
        if call.kind in ("python", "view", "library"):
            # Python source: its library calls pass Python ints (steps.kernel_arg's int64 is
            # for compiled code)
            lines[-1] = f"{statement.lhs} = {kernel.op.render(statement.names, compiled=False)}"
        if call.kind in ("python", "view"):
            # Run as Python: a numpy reshape, or a library kernel wrapped in reshapes whose
            # dispatcher compiles (or loads from its cache) at the first run, for the types it
            # meets. Later calls are compiled for what it makes as C arrays (another layout
            # compiles again when met).
            types.update((t, self.values[t]) for t in statement.targets)
            return lines
        if call.kind == "movement":
            function, args = self.bind_movement(kernel, statement)
            lines[-1] = (f"{statement.lhs} = {function}({', '.join(map(str, args))})"
                         f"  # {statement.expr}")
        else:     # a library kernel's or a fused kernel's own machine code
            function, args = statement.call
        targets = statement.targets
        segments.append(Segment(function, args, targets, unpack=len(targets) > 1, links=call.links))
        return lines

    def contiguous(self, name):
        """Source for variable `name` as a C array (numpy's ascontiguousarray would make a 0-d
        array 1-d)."""
        value = self.values.get(name)
        return name if value is not None and value.shape == () else f"__np.ascontiguousarray({name})"

    @staticmethod
    def write_function(buf, tmpl, name, params, statements):
        buf.splice(fill(tmpl, name=name, params=", ".join(params),
                        body=[line for s in statements for line in s.lines]))
        buf.line()
        buf.line()


def lit_tuple(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
