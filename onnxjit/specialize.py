"""Specialize a graph on one input signature: every shape and dtype concrete, constants folded."""
from __future__ import annotations

import contextvars
import inspect
from dataclasses import dataclass, field

import numpy as np
import onnx

from . import registry, scalar_expr, steps, validate
from .errors import DataDependent, LoweringError, ModelError, NeedsInputValue, UnsupportedOpError
from .ir import BIT_OPS, BIT_TYPES, COMPILABLE_DTYPES, Value, attributes, const_value, initializers
from .target import host

# The graph inputs a lowering may specialize on the contents of (None: any small one); the
# staged driver's segments allow only their first node's inputs (staged.py).
VALUE_KEYED = contextvars.ContextVar("onnxjit_value_keyed", default=None)

# Ops whose output is not a function of their inputs: never folded at compile time.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                    "RandomUniformLike", "Bernoulli", "Multinomial"}


@dataclass(eq=False)
class Step:
    """One unit of generated code: an elementwise expression or a call producing arrays.

    kind "ew": `expr` is a scalar expression tree (onnxjit.scalar_expr) over operands 0, 1...
    (the inputs' elements); `modules` the library modules it calls (`__k_scalar.erf_f32`).
    kind "call": `op` says what it runs (steps.LibraryCall, Movement or ArrayExpr) over the
    input slots 0, 1... (`inputs`), yielding `outs`; `expr` is None.
    """
    kind: str
    expr: object
    inputs: list
    outs: list
    nodes: list = field(default_factory=list)   # [(node name, op_type)]
    meta: dict = field(default_factory=dict)     # what a lowering records for later peepholes
    op: object = None
    modules: set = field(default_factory=set)

    def value(self, name):
        """The input Value passed as the op's argument `name` (steps.LibraryCall.names)."""
        return self.inputs[self.op.args[self.op.names.index(name)]]

    def set_value(self, name, value):
        """Pass `value` as the op's argument `name` instead."""
        self.inputs[self.op.args[self.op.names.index(name)]] = value


@dataclass
class Program:
    """A graph specialized on a signature: inputs, steps in order, outputs."""
    inputs: list
    steps: list
    outputs: list
    output_names: list
    use_counts: dict = field(default_factory=dict)   # ONNX name -> readers (+1 if graph output)
    names_of: dict = field(default_factory=dict)     # id(Value) -> ONNX names bound to it
    peepholes: bool = True   # rewrites across nodes (BatchNormalization into Conv, ...) apply
    # id(Value) -> (Value, Python function of its computed array giving what the caller gets:
    # ZipMap's list of dicts, string labels): see LoweringContext.python_output.
    edges: dict = field(default_factory=dict)
    # Graph inputs Numba cannot hold (string tensors) are not arguments of the compiled code:
    # each reader turns one into a numeric array in Python first (LoweringContext.python_input).
    # graph_inputs: every graph input's Value, in order; input_edges: (index in graph_inputs,
    # convert, the compiled input Value it makes), appended to `inputs` after the kept ones.
    graph_inputs: list = field(default_factory=list)
    input_edges: list = field(default_factory=list)
    input_types: dict = field(default_factory=dict)   # graph input name -> its declared TypeProto
    # What the code runs on (target.Target): chosen once at prepare, read by every lowering
    # that picks a kernel (ctx.target), never re-detected below it.
    target: object = None

    def with_python_outputs(self, fn):
        """`fn` (the compiled graph) taking the graph's inputs (each Python input conversion
        applied first) and with the edges' conversions applied to its outputs."""
        convert = [self.edges.get(id(v), (None, None))[1] for v in self.outputs]
        if self.input_edges:
            fn = self._with_python_inputs(fn)
        if not any(convert):
            return fn

        def run_with_python_outputs(*args):
            return tuple(o if c is None else c(o) for o, c in zip(fn(*args), convert))
        return run_with_python_outputs

    def _with_python_inputs(self, fn):
        n = len(self.graph_inputs)
        kept = [i for i, v in enumerate(self.graph_inputs) if v.dtype != object]
        edges = [(i, convert) for i, convert, _ in self.input_edges]

        def run_with_python_inputs(*args):
            graph_args = args[:n]
            return fn(*[graph_args[i] for i in kept],
                      *[convert(graph_args[i]) for i, convert in edges], *args[n:])
        return run_with_python_inputs


def broadcast_shapes(*shapes):
    """numpy's broadcast of the shapes, with an error naming them when they clash."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise LoweringError(f"shapes {list(shapes)} do not broadcast") from None


class LoweringContext:
    """What a lowering sees: the node, the opset, and ways to produce Values."""

    lit = staticmethod(scalar_expr.lit)
    scalar = staticmethod(scalar_expr.scalar)

    def __init__(self, program, node, opset, model_opsets, env=None):
        self.program = program
        self.node = node
        self.opset = opset
        self.model_opsets = model_opsets
        self.env = env if env is not None else {}

    @property
    def target(self):
        """The program's target description (target.Target): kernels are chosen from it."""
        return self.program.target

    def inline_graph(self, graph, inputs=()):
        """Lower a subgraph (an If branch, a Loop body) in place: its inputs bound to `inputs`,
        the enclosing scope's names visible. Returns the subgraph's output Values."""
        import collections
        env = collections.ChainMap({}, self.env)
        env.update({name: const_value(a, name) for name, a in initializers(graph).items()})
        env.update({vi.name: v for vi, v in zip(graph.input, inputs)})
        walk(self.program, graph.node, env, self.model_opsets)
        missing = [o.name for o in graph.output if o.name not in env]
        if missing:
            self.fail(f"subgraph outputs {missing} are produced by no node")
        return [env[o.name] for o in graph.output]

    @property
    def label(self):
        return (self.node.name, self.node.op_type)

    def fail(self, message):
        """Raise a LoweringError naming this node."""
        raise LoweringError(f"{self.node.op_type} node {self.node.name!r}: {message}")

    def constant(self, array):
        """A folded Value."""
        return const_value(np.asarray(array))

    def elementwise(self, expr, *inputs, dtype):
        """An elementwise Value: the scalar expression `expr` (an onnxjit.scalar_expr tree,
        e.g. `S.lib("scalar", "maximum", *S.operands(2))`) over the inputs' elements, operand
        i reading `inputs[i]`, broadcast like numpy."""
        if not isinstance(expr, scalar_expr.Scalar):
            raise TypeError(f"ctx.elementwise takes a scalar_expr tree, not "
                            f"{type(expr).__name__}: lowerings hand over structured steps, "
                            "never source text")
        if scalar_expr.operand_count(expr) > len(inputs):
            raise ValueError(f"the expression reads operand {scalar_expr.operand_count(expr) - 1}"
                             f" of {len(inputs)} inputs")
        shape = broadcast_shapes(*(v.shape for v in inputs))
        out = Value(shape, np.dtype(dtype), name=self._out_name(0))
        self._check_dtype(out.dtype, *inputs)
        out.producer = Step("ew", expr, list(inputs), [out], [self.label],
                            modules=scalar_expr.modules(expr))
        self.program.steps.append(out.producer)
        return out

    def call(self, expr, *inputs, shape, dtype, meta=None, view=False):
        """A Value computed by the array expression `expr` (a steps.Expr, e.g.
        `E.lib("tensor_misc", "det", E.contiguous(x).reshape(x3))`) over the Values it reads.

        `inputs`: the step's inputs in order (default: the Values `expr` reads, in the order
        it reads them); each Value of `expr` must be among them. view=True: the result may
        share memory with an input (reshape, slicing ...), so the emitter copies it before
        handing it out as a graph output.
        """
        return self.call_multi(expr, *inputs, outs=[(shape, dtype)], meta=meta, view=view)[0]

    def call_multi(self, expr, *inputs, outs, meta=None, view=False):
        """Several Values ([(shape, dtype)...] `outs`) from one expression returning a tuple."""
        if not isinstance(expr, steps.Expr):
            raise TypeError(f"ctx.call takes a steps.Expr, not {type(expr).__name__}: "
                            "lowerings hand over structured steps, never source text")
        inputs = list(inputs) if inputs else steps.inputs_of(expr)
        op = steps.op_of(steps.replace_inputs(expr, lambda value: _slot(inputs, value)))
        return self._record(op, inputs, outs, meta, view)

    def kernel(self, kernel, *args, shape=None, dtype=None, outs=None, meta=None, names=(),
               view=False):
        """The Value (or Values, given `outs` [(shape, dtype)...]) a library kernel computes:
        `kernel` is (module of onnxjit.kernels, function); each argument a Value (an input
        slot), a steps.Param / steps.Src, or a plain number, None, bool or tuple (a Param).
        `names` may name the arguments (read by peepholes and readers, not rendered)."""
        inputs, call_args = [], []
        for a in args:
            if isinstance(a, Value):
                call_args.append(len(inputs))
                inputs.append(a)
            else:
                call_args.append(steps.param(a))
        op = steps.LibraryCall(tuple(kernel), call_args, tuple(names))
        values = self._record(op, inputs, outs or [(shape, dtype)], meta, view)
        return values if outs is not None else values[0]

    def record(self, op, *inputs, shape=None, dtype=None, outs=None, meta=None, view=False):
        """The Value (or Values, given `outs`) of a call step running `op` (steps.LibraryCall,
        Movement or ArrayExpr over slots, e.g. `steps.ArrayExpr(expr)` with `steps.slot(i)`;
        steps.OPAQUE for another back end's step) over `inputs` (its slots 0, 1 ...)."""
        values = self._record(op, inputs, outs or [(shape, dtype)], meta, view)
        return values if outs is not None else values[0]

    def _record(self, op, inputs, outs, meta, view):
        values = [Value(tuple(int(d) for d in s), np.dtype(t), name=self._out_name(i))
                  for i, (s, t) in enumerate(outs)]
        self._check_dtype(None, *inputs, *values)
        step = Step("call", None, list(inputs), values, [self.label], dict(meta or {}), op)
        step.meta["view"] = view
        for v in values:
            v.producer = step
        self.program.steps.append(step)
        return values

    def require_const(self, value, what):
        """The value of `value` at compile time. When it is (or is computed only from) small
        graph inputs, the backend specializes on those inputs' contents (they become part of
        the signature); anything else computed at run time is refused with a clear error."""
        if value.is_const:
            return value.const
        source = self._small_input_source(value, allowed=VALUE_KEYED.get())
        if source is not None:
            raise NeedsInputValue(source.name)
        self.data_dependent(f"the {what} input must be known at compile time (a constant, an "
                            "initializer or computed from small graph inputs), but it is "
                            "computed at run time")

    def data_dependent(self, message):
        """Raise DataDependent naming this node: the graph is cut before it (staged.py)."""
        raise DataDependent(f"{self.node.op_type} node {self.node.name!r}: {message}", self.node)

    def _small_input_source(self, value, limit=64, allowed=None):
        """A non-constant graph input that `value` is computed from, if every leaf of its
        computation is a constant or a graph input of at most `limit` elements (and named in
        `allowed`, unless None); else None."""
        found, stack, seen = None, [value], set()
        while stack:
            v = stack.pop()
            if v is None or v.is_const or id(v) in seen:
                continue
            seen.add(id(v))
            if any(v is i for i in self.program.inputs):
                if v.size > limit or (allowed is not None and v.name not in allowed):
                    return None
                found = found or v
            elif v.producer is None:
                return None
            else:
                stack.extend(v.producer.inputs)
        return found

    def python_output(self, value, convert, i=0):
        """`value` (the node's output i, computed as an array) reaches the caller as
        `convert(array)`, a Python step after the compiled graph (strings, maps, sequences
        Numba cannot hold). Only a graph output (Identity passes it on) may hold it: a node
        computing from it is refused. `value` must be a fresh Value of this node."""
        self.program.edges[id(value)] = (value, convert)
        _note_python_edge(self.node.op_type, "its output is converted in Python after the "
                          "compiled graph (strings, maps or images Numba cannot hold)")
        return value

    def python_input(self, value, convert, shape, dtype, tag="codes"):
        """A compiled input Value computed in Python, before the compiled graph, as
        `convert(array)` of the graph input `value` (a string tensor, or a map held in a 0-d
        object array, which Numba cannot hold): e.g. the index of each string in a node's
        key table."""
        _note_python_edge(self.node.op_type, "its input is converted in Python before the "
                          "compiled graph (strings or maps Numba cannot hold)")
        if not any(value is v for v in self.program.graph_inputs):
            self.fail(f"the string tensor {value.name!r} is computed inside the graph; onnxjit "
                      "reads string tensors only where they are graph inputs")
        index = next(i for i, v in enumerate(self.program.graph_inputs) if v is value)
        out = Value(tuple(int(d) for d in shape), np.dtype(dtype),
                    name=f"{value.name}_{tag}_{len(self.program.input_edges)}")
        self.program.input_edges.append((index, convert, out))
        return out

    def uses(self, value):
        """How many node inputs (and graph outputs) read `value`, under any of its names."""
        names = self.program.names_of.get(id(value), [value.name])
        return sum(self.program.use_counts.get(n, 0) for n in names)

    def sole_producer(self, value, kind):
        """The call Step that made `value` if it has meta kind `kind` and no other reader."""
        step = getattr(value, "producer", None)
        if step is None or step.meta.get("kind") != kind or self.uses(value) != 1:
            return None
        if len(step.outs) != 1 or step is not self.program.steps[-1]:
            return None
        return step

    def _out_name(self, i):
        return self.node.output[i] if i < len(self.node.output) else ""

    def _check_dtype(self, dtype, *values):
        for v in values:
            if v is not None and v.dtype not in COMPILABLE_DTYPES:
                self.fail(f"dtype {v.dtype} of {v.name or 'a value'} cannot be compiled")
        if self.node.op_type not in BIT_OPS:   # held as bit patterns: only moved or converted
            held = [v.dtype for v in values if v is not None and v.dtype in BIT_TYPES]
            if held or dtype in BIT_TYPES:
                self.fail(f"onnxjit holds {(held or [dtype])[0]} as bit patterns and computes "
                          "on it only through Cast, CastLike, (De)QuantizeLinear and data "
                          "movement ops")


def _slot(inputs, value):
    """The first input slot holding `value`."""
    for i, v in enumerate(inputs):
        if v is value:
            return i
    raise ValueError(f"{value.name or 'a Value'} read by the expression is not one of the inputs")


def lower_node(program, node, inputs, opset, model_opsets, env=None):
    """The node's output Values: folded when its inputs are constant, else lowered."""
    attrs = attributes(node)
    validate.check_fold(node, inputs, model_opsets)   # before folding or lowering allocates
    if all(v is None or v.is_const for v in inputs) and node.op_type not in NONDETERMINISTIC:
        folded = fold_node(node, inputs, model_opsets)
        if folded is not None:
            return folded
    rule = registry.lookup(node.op_type, opset, node.domain)
    if rule is None:
        raise UnsupportedOpError(f"no lowering for {node.domain or 'ai.onnx'}::{node.op_type} "
                                 f"at opset {opset}", [(node.domain or "ai.onnx", node.op_type, opset)])
    ctx = LoweringContext(program, node, opset, model_opsets, env)
    _check_attributes(ctx, rule, attrs)
    result = None
    for rewrite in registry.peepholes(node.op_type, node.domain) if program.peepholes else ():
        result = rewrite(ctx, *inputs, **attrs)
        if result is not None:
            # The node's read of the input it folded into that input's producer is gone.
            absorbed = next((name for name, v in zip(node.input, inputs) if v is result),
                            node.input[0])
            program.use_counts[absorbed] -= 1
            break
    if result is None:
        result = rule(ctx, *inputs, **attrs)
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _check_attributes(ctx, rule, attrs):
    params = inspect.signature(rule).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(attrs) - set(params))
    if unknown:
        raise UnsupportedOpError(f"{ctx.node.op_type} node {ctx.node.name!r}: unsupported "
                                 f"attribute(s) {unknown}", [])


def fold_node(node, inputs, model_opsets):
    """Evaluate a node on constant inputs with onnx's reference evaluator; None if it cannot."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    try:
        names = [n for n, v in zip(node.input, inputs) if n and v is not None]
        graph = helper.make_graph(
            [node], "fold", [helper.make_empty_tensor_value_info(n) for n in dict.fromkeys(names)],
            [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        # A model, not the bare node: only a model carries the opset the node is written for.
        model = helper.make_model(graph, opset_imports=[
            helper.make_opsetid(domain, version) for domain, version in model_opsets.items()])
        feeds = {name: v.const for name, v in zip(node.input, inputs) if name and v is not None}
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception:
        return None
    if not all(isinstance(r, np.ndarray) or np.isscalar(r) for r in results):
        return None
    outputs = [n for n in node.output if n]
    if len(outputs) != len(node.output):
        return None
    return [const_value(r, name) for r, name in zip(results, outputs)]


def specialize(model: onnx.ModelProto, input_values, peepholes=True, target=None) -> Program:
    """Walk the graph in order with the given input Values, building a Program (with the
    peephole rewrites of registry.peephole unless `peepholes` is False) for `target` (the
    host CPU's description by default, target.host())."""
    graph = model.graph
    model_opsets = {(e.domain or ""): e.version for e in model.opset_import}
    for v in input_values:
        if v.dtype not in COMPILABLE_DTYPES and v.dtype != object:
            raise LoweringError(f"input {v.name!r} has dtype {v.dtype}, which onnxjit cannot "
                                "compile (it holds float16/32/64, bfloat16, float8, float4, "
                                "int2-64, uint2-64 and bool; strings through the ai.onnx.ml "
                                "ops that read them)")
    program = Program([v for v in input_values if v.dtype != object], [], [], [],
                      _use_counts(graph), peepholes=peepholes, graph_inputs=list(input_values),
                      input_types={vi.name: vi.type for vi in graph.input},
                      target=target or host())
    env = {name: const_value(a, name) for name, a in initializers(graph).items()}
    env.update({v.name: v for v in input_values})
    walk(program, graph.node, env, model_opsets)
    for step in program.steps:
        # Rewrites that must see a step's final inputs, after every peephole folded into it
        # (e.g. the Winograd weight transform, after BatchNormalization folded into the Conv).
        for finalize in registry.finalizers(step.meta.get("kind")):
            finalize(step)
        finalize = step.meta.pop("finalize", None)   # a lowering's own closure (older API)
        if finalize is not None:
            finalize(step)
    for out in graph.output:
        if out.name not in env:
            raise ModelError(f"graph output {out.name!r} is produced by no node")
        program.outputs.append(env[out.name])
        program.output_names.append(out.name)
    _drop_unread(program)
    program.inputs += [value for _, _, value in program.input_edges]
    for step in program.steps:
        for v in step.inputs:
            if v is not None and id(v) in program.edges:
                raise LoweringError(f"{v.name!r} (strings or a map, made after the compiled "
                                    "graph) is read by a node: only graph outputs may hold it")
    for v, name in zip(program.outputs, program.output_names):
        if v.dtype == object and not v.is_const:
            raise LoweringError(f"graph output {name!r} is a string input passed through: "
                                "onnxjit does not return its graph's string inputs")
    return program


def _drop_unread(program):
    """Drop the steps marked "drop_unread" (views a lowering made for its kernel, e.g. a 5-D
    output viewed back, ops/nn.py) that no step and no output reads: the next kernel read the
    array they view instead."""
    read = {id(v) for v in program.outputs}
    kept = []
    for step in reversed(program.steps):
        if step.meta.get("drop_unread") and not any(id(v) in read for v in step.outs):
            continue
        read.update(id(v) for v in step.inputs if v is not None)
        kept.append(step)
    program.steps[:] = kept[::-1]


def walk(program, nodes, env, model_opsets):
    """Lower `nodes` in order, binding their outputs in `env` (name -> Value)."""
    for node in nodes:
        opset = model_opsets.get(node.domain or "", model_opsets.get("ai.onnx"))
        inputs = [_resolve(env, name, node) for name in node.input]
        outs = lower_node(program, node, inputs, opset, model_opsets, env)
        validate.check_outputs(node, outs)
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
                program.names_of.setdefault(id(value), []).append(name)


def _use_counts(graph):
    counts = {}
    for node in graph.node:
        for name in node.input:
            counts[name] = counts.get(name, 0) + 1
        for attr in node.attribute:   # subgraphs may read outer values: never fuse those away
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                for inner in sub.node:
                    for name in inner.input:
                        counts[name] = counts.get(name, 0) + 2
    for out in graph.output:
        counts[out.name] = counts.get(out.name, 0) + 1
    return counts


def _resolve(env, name, node):
    if not name:
        return None
    if name not in env:
        raise ModelError(f"node {node.name!r} ({node.op_type}) reads {name!r}, "
                         "which no earlier node, input or initializer defines")
    return env[name]


def _note_python_edge(op_type, why):
    """Count a conversion at the compiled graph's edges where the conformance report counts the
    staged driver's Python segments (staged.python_segments)."""
    from . import staged
    staged.python_segments[(op_type, why)] += 1
