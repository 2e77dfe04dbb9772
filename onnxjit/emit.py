"""Emit: render the planned kernels as a Python module of Numba functions."""
from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .calls import movement_function
from .fused import comment_text, fused_kernel, shared_kernel
from .ir import NameTable, compute_dtype, held
from .source import LineBuffer, fill
from .steps import LibraryCall, Movement

# Above this many statements the entry is split into njit segments driven from Python:
# Numba's compile time grows with the length of one function (DESIGN.md, "Emit"). The driver then
# calls library kernels and shared data-movement kernels itself (see calls.py).
MAX_SEGMENT_STATEMENTS = 40
# Graphs whose kernels write this many elements may take a Python driver even when short (see
# Emitter.prefers_driver): at a few microseconds per call, its overhead is noise for them.
DRIVER_MIN_ELEMENTS = 1 << 20


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
    """One statement of the entry: the variables it defines and uses, its source lines, and
    for a call of a fused kernel or a library call the driver can make
    (steps.LibraryCall.driver_callable) its (callee, arguments: variables or steps.Param)."""
    targets: list
    used: list
    lines: list
    call: tuple = None
    library: bool = False     # `call` is a library kernel's
    movement: tuple = None    # (name, SharedKernel, arguments, ONNX nodes) the driver calls
    kernel: str = None        # the planned kernel it runs
    modules: set = field(default_factory=set)   # library modules its source names
    library_calls: int = 0    # library kernel calls its source makes
    lhs: str = ""             # a call's assignment target and expression, as written
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
    lazy_calls: int = 0    # driver statements calling library kernels as Python (not Segments)
    # kernel name -> (the function of the module running it, whether that function is njit)
    hosts: dict = field(default_factory=dict)

    @property
    def entry_links(self):
        """The entry is one njit function linking library kernels in (slow to compile)."""
        return bool(self.segments) and self.segments[0].name == self.entry and self.segments[0].links

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
    """Assigns identifiers to Values and writes the module."""

    def __init__(self, program, kernels, model_label="model", profile=False, entry="auto"):
        self.program, self.kernels, self.model_label = program, kernels, model_label
        self.profile = profile
        self.entry_kind = entry   # "auto", or "driver": library kernels only from a Python driver
        self.lazy_calls = 0
        self.names = NameTable()
        self.vars = {}          # id(Value) -> identifier
        self.values = {}        # identifier -> Value
        self.weights = []       # const Values passed as arguments
        self.shared = {}        # "f_<hash>" -> SharedKernel
        self.bindings = []      # module-level lines binding each fused kernel's name
        self.hosts = {}         # kernel name -> (host function, jitted)
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
        statements = [self.statement(k) for k in self.kernels]
        statements.append(self.return_statement())
        entry, segments, params = self.entry(statements, buf)
        entry_kind = ("njit" if segments and segments[0].name == entry
                      else f"Python driver over {len(segments)} compiled calls")
        source = fill(
            "module.py.tmpl", model_label=comment_text(self.model_label),
            signature=self.signature_text(), n_kernels=len(self.kernels),
            kernels_digest=kernels_digest(), entry_kind=entry_kind,
            imports=self.imports(set().union(*(s.modules for s in statements)), self.bindings),
            bindings=self.binding_block(), functions=buf.lines)
        # writeable C arrays: the types the module is compiled for (Numba types read-only arrays apart)
        weights = [np.require(held(w.const, w.dtype), compute_dtype(w.dtype), ['C', 'W'])
                   for w in self.weights]
        return Module(source, entry, weights, segments, self.kernels, params, self.shared,
                      self.values, self.lazy_calls, self.hosts)

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
        op = None
        if kernel.kind == "fused":
            self.bind_fused(kernel)
            args = [self.var(v) for v in kernel.inputs]
            expr = f"{kernel.name}({', '.join(args)})"
            outs = kernel.outputs
            lines, call = [], (kernel.name, args)
        else:
            step = kernel.steps[0]
            op = step.op
            names = [self.var(v) for v in step.inputs]
            expr = op.render(names)
            outs = step.outs
            lines, call = [f"# {kernel.name}: {node_list(kernel)}"], None
            if isinstance(op, LibraryCall) and op.driver_callable:
                call = (f"__k_{op.kernel[0]}.{op.kernel[1]}",
                        [names[a] if isinstance(a, int) else a for a in op.args])
        targets = [self.var(o) for o in outs]
        used = [self.var(v) for v in kernel.inputs if v is not None]
        lhs = targets[0] if len(targets) == 1 else ", ".join(targets)
        movement = None
        if isinstance(op, Movement):
            params, body, args = op.kernel(names)
            shared = shared_kernel(movement_function(params, body), kernels_digest(), op.modules)
            movement = kernel.name, shared, args, node_list(kernel)
        return Statement(targets, used, lines + [f"{lhs} = {expr}"], call,
                         library=kernel.kind != "fused" and call is not None, movement=movement,
                         kernel=kernel.name, modules=set(op.modules) if op else set(),
                         library_calls=op.library_calls if op else 0, lhs=lhs, expr=expr)

    def bind_fused(self, kernel):
        """Import the fused kernel's shared function under the kernel's telling name."""
        self.bind(kernel.name, fused_kernel(kernel, kernels_digest()),
                  f"# ONNX nodes: {node_list(kernel)}")

    def bind_movement(self, statement):
        """Bind a movement statement's shared kernel; (its name, argument sources)."""
        name, shared, args, nodes = statement.movement
        self.bind(name, shared, f"# ONNX nodes: {nodes}")
        return name, args

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
        used = [self.var(v) for v in self.program.outputs]
        return Statement([], used, [f"return {lit_tuple(outs)}"])

    def may_alias_caller(self, value):
        """True when `value` may share memory with an input or a weight (through views)."""
        if value.is_const or any(value is i for i in self.program.inputs):
            return True
        step = value.producer
        if step is None or step.kind != "call" or not step.meta.get("view"):
            return False
        return any(v is not None and self.may_alias_caller(v) for v in step.inputs)

    # -- entry ----------------------------------------------------------------------------------
    def entry(self, statements, buf):
        """Write the entry; (its name, the Segments it calls, {parameter: Value})."""
        params = [self.var(v) for v in self.program.inputs] + [self.var(w) for w in self.weights]
        values = {p: v for p, v in zip(params, list(self.program.inputs) + self.weights)}
        body = statements[:-1]
        steps = driver_steps(body, python_library=self.entry_kind == "driver")
        if self.profile:      # each kernel a step of the driver, which times it
            steps = [s if s.library or s.movement else [s] for s in body]
        elif (sum(len(s.lines) for s in body) <= MAX_SEGMENT_STATEMENTS
              and not self.prefers_driver(body, steps)):
            self.write_function(buf, "segment.py.tmpl", "run_graph", params,
                                [self.shape_guard()] + statements)
            self.host(body, "run_graph", True)
            links = library_calls(body) > 0
            return "run_graph", [Segment("run_graph", params, unpack=False, links=links)], values
        return "run_graph", self.write_driver(buf, steps, statements[-1], params, values), values

    def prefers_driver(self, body, steps):
        """A short graph gets a Python driver when `entry` is "driver" and it calls library
        kernels or is calls of shared kernels alone (the kernels' machine code then comes from
        their own cache, compiled once per install, instead of being linked and optimized again
        into the entry: a first use in seconds, against tens of seconds for a Conv or pooling
        entry). It also gets one when it writes at least DRIVER_MIN_ELEMENTS elements (its run
        time dwarfs the driver's few microseconds per call) and the driver
        would leave fewer library calls in compiled code: in an njit entry each is linked and
        compiled again (AlexNet's entry took 15 s to compile, its driver 4.6 s)."""
        if self.entry_kind == "driver" and (library_calls(body)
                                            or not any(isinstance(s, list) for s in steps)):
            # Also a graph the driver runs as calls alone (fused kernels, data movement): an
            # njit entry around them would compile their code again (0.1-0.15 s a graph).
            return True
        if sum(math.prod(o.shape) for k in self.kernels for o in k.outputs) < DRIVER_MIN_ELEMENTS:
            return False
        in_segments = [s for step in steps if isinstance(step, list) for s in step]
        return library_calls(in_segments) < library_calls(body)

    def shape_guard(self):
        """A statement returning None unless every input has the shape compiled for.

        Numba's dispatcher already matches dtype, rank and layout in C; with this guard, a call of
        the dispatcher is a complete check of the signature (rep.run's fast path relies on it).
        """
        checks = [f"{self.var(v)}.shape != {lit_tuple([str(d) for d in v.shape])}"
                  for v in self.program.inputs]
        if not checks:
            return Statement([], [], [])
        return Statement([], [], ["# guard: only the input shapes this module was compiled for",
                                  f"if {' or '.join(checks)}:", "    return None"])

    def write_driver(self, buf, steps, final, params, types):
        """A Python `run_graph` running `steps` in order; the Segments it calls.

        `types` {variable: Value} gains the variables made by statements the driver runs as
        Python. A step is a Statement the driver runs itself, a call of a library kernel (its machine
        code comes from the kernel's own Numba cache, compiled once per install; inside an njit
        function it would be linked and compiled again into each caller) or of one fused kernel,
        or a list of Statements written as an njit segment returning what later steps read. The driver
        deletes each array after its last use, as compiled code does: held to the end, every
        intermediate would take fresh memory (page faults, cold caches).
        """
        later_uses = [set(final.used)]
        for step in reversed(steps[1:]):
            chunk = step if isinstance(step, list) else [step]
            later_uses.insert(0, later_uses[0] | {u for s in chunk for u in s.used})
        segments, calls, defined = [], [], set(params)
        kernel_names = iter(k.name for k in self.kernels)
        for step, later in zip(steps, later_uses):
            if isinstance(step, Statement) and not (step.call or step.movement):
                # Python source calling a library kernel: its dispatcher compiles (or loads from
                # its cache) at the first run, for the types it meets. Later calls are compiled
                # for what it makes as C arrays (another layout compiles again when met).
                lines, reads, made = list(step.lines), step.used, step.targets
                types.update((t, self.values[t]) for t in made)
                self.lazy_calls += 1
                self.host([step], "run_graph", False)
            elif isinstance(step, Statement):
                function, args = step.call or self.bind_movement(step)
                lines, reads, made = list(step.lines), step.used, step.targets
                if step.movement:
                    lines[-1] = (f"{step.lhs} = {function}({', '.join(map(str, args))})"
                                 f"  # {step.expr}")
                segments.append(Segment(function, args, made, unpack=len(made) > 1,
                                        links=step.library))
                self.host([step], "run_graph", False)
            else:
                reads = [p for p in dict.fromkeys(u for s in step for u in s.used) if p in defined]
                made = [t for s in step for t in s.targets if t in later]
                name = f"segment_{sum(s.name.startswith('segment_') for s in segments)}"
                self.write_function(buf, "segment.py.tmpl", name, reads, step + [Statement(
                    [], made, [f"return {lit_tuple([self.contiguous(r) for r in made])}"])])
                lines = [f"{lit_tuple(made) if made else '_'} = {name}({', '.join(reads)})"]
                segments.append(Segment(name, reads, made, links=library_calls(step) > 0))
                self.host(step, name, True)
            if self.profile:
                lines.append(f"__t = __record({next(kernel_names)!r}, __t)")
            calls.append((lines, reads, made))
            defined.update(made)
        last_use = {}
        for i, (_, reads, made) in enumerate(calls):
            last_use.update((v, i) for v in [*made, *reads] if v not in params)
        driver = ["__t = __perf_counter()"] if self.profile else []
        for i, (lines, _, _) in enumerate(calls):
            dead = [v for v, j in last_use.items() if j == i and v not in final.used]
            driver += lines + ([f"del {', '.join(dead)}"] if dead else [])
        if self.profile:
            buf.splice(fill("profile.py.tmpl"))
        buf.splice(fill("driver.py.tmpl", name="run_graph", params=", ".join(params),
                        body=driver + final.lines))
        buf.line()
        return segments

    def host(self, statements, function, jitted):
        """Record that `function` of the module (njit or the Python driver) runs the statements'
        kernels (read by explain)."""
        for s in statements:
            if s.kernel is not None:
                self.hosts[s.kernel] = (function, jitted)

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


def library_calls(statements):
    """How many library kernel calls the statements' code makes."""
    return sum(s.library_calls for s in statements)


def driver_steps(statements, python_library=False):
    """The steps of a Python driver over `statements`: each library call and data movement (see
    calls.py) alone, the statements between them in lists of at most MAX_SEGMENT_STATEMENTS lines (an
    njit segment each), except that a lone fused kernel is called directly, without a segment.
    With `python_library`, any statement calling a library kernel (a reshaped MatMul, say) is a
    step of its own that the driver runs as Python: no njit segment links the kernel in."""
    chunks, chunk = [], []
    for s in statements:
        if s.library or s.movement or (python_library and library_calls([s])):
            chunks.extend([chunk, s] if chunk else [s])
            chunk = []
            continue
        if chunk and sum(len(c.lines) for c in chunk) + len(s.lines) > MAX_SEGMENT_STATEMENTS:
            chunks.append(chunk)
            chunk = []
        chunk.append(s)
    chunks += [chunk] if chunk else []
    return [c[0] if isinstance(c, list) and len(c) == 1 and c[0].call is not None else c
            for c in chunks]


def lit_tuple(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
