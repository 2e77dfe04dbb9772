"""Staged specialization: graphs with data-dependent shapes, sequences and optionals.

The graph's nodes, in order, are cut into *stages*:

- **compiled segments**: maximal runs of ordinary nodes, each an `OnnxJitRep` over a model of
  just those nodes whose inputs are the values live into it (typed by dtype and rank, every dim
  symbolic), so each segment is specialized, compiled and cached per shape of what flows in,
  exactly as a model with symbolic input dims;
- **host nodes** run by the driver between segments (`onnxjit/host_ops.py`): the data-dependent
  ops as compiled kernels that allocate their output (NonZero, Compress on computed data,
  Unique, NonMaxSuppression: `kernels/dynamic.py`), and the *Python segments*: sequence and
  optional ops (sequences are Python lists of arrays), If / Loop / Scan / SequenceMap whose
  condition, trip count or carried values are known only at run time (their bodies are staged
  reps of their own, so a body of ordinary nodes is one compiled segment called per iteration).

A node whose lowering needs a value computed at run time (`errors.DataDependent`: TopK's k,
Range's bounds, a computed Reshape shape) starts a new segment, where that value is a small
segment input the segment is specialized on (`NeedsInputValue`, like a shape-like graph input).
The cuts are learnt: the first run of a segment that raises DataDependent cuts it there and
runs again. Constants (initializers, Constant nodes) are given to every segment that reads
them, so they still fold.
"""
from __future__ import annotations

import collections
import threading

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .errors import DataDependent, InputError, LoweringError, ModelError
from .specialize import VALUE_KEYED

# Ops always run by the driver (no lowering can hold their values or their output's size).
SEQUENCE_OPS = {"SequenceConstruct", "SequenceAt", "SequenceEmpty", "SequenceInsert",
                "SequenceErase", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
                "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement"}
# OptionalHasElement / OptionalGetElement of tensors compile (ops/movement.py): host nodes only
# where they read an optional of a sequence or an optional graph input.
# String ops: Python host nodes (ops/strings.py); Equal too where it reads a string tensor.
STRING_OPS = {"StringNormalizer", "StringSplit", "StringConcat", "RegexFullMatch"}
HOST_OPS = (SEQUENCE_OPS - {"OptionalHasElement", "OptionalGetElement"}) | {
    "NonMaxSuppression", "Unique"} | STRING_OPS
# Ops made host nodes when their lowering raises DataDependent (instead of a new segment).
HOST_WHEN_DYNAMIC = {"NonZero", "Compress", "If", "Loop", "Scan", "Unique", "NonMaxSuppression"}
SUBGRAPH_OPS = {"If", "Loop", "Scan", "SequenceMap"}
_SEQUENCE_MAKERS = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
                    "SplitToSequence", "SequenceMap", "Optional"}

# (op_type, why) of each Python segment run in this process, for the conformance report.
python_segments = collections.Counter()


def _subgraphs(node):
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def _is_tensor_type(tp):
    """Whether compiled code (with its Python edges) holds values of this type: tensors, maps
    (DictVectorizer's input) and sequences of maps (ZipMap's output) are; sequences of
    tensors and optionals are the staged driver's."""
    kind = None if tp is None else tp.WhichOneof("value")
    if kind == "sequence_type":
        return tp.sequence_type.elem_type.WhichOneof("value") == "map_type"
    return kind in (None, "tensor_type", "map_type", "sparse_tensor_type")


def free_names(graph):
    """Names a subgraph reads from its enclosing scopes."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    free = []
    for node in graph.node:
        for name in node.input:
            if name and name not in defined:
                free.append(name)
        for sub in _subgraphs(node):
            free.extend(n for n in free_names(sub) if n not in defined)
        defined.update(n for n in node.output if n)
    return list(dict.fromkeys(n for n in free if n not in defined))


# Sequence ops a graph with tensor inputs and outputs compiles, holding its sequences as lists
# of Values while it is specialized (ops/sequence.py).
COMPILE_TIME_SEQUENCE_OPS = {"SequenceConstruct", "SequenceAt", "SequenceEmpty",
                             "SequenceInsert", "SequenceErase", "SequenceLength",
                             "SplitToSequence", "ConcatFromSequence"}


def needs_staging(graph, declared=None):
    """Whether `graph` has a node the staged driver must run (sequences, optionals, ops with
    data-dependent output sizes), or non-tensor inputs / outputs. A whole model (no `declared`)
    whose only such nodes are sequence ops inside it compiles (ops/sequence.py); should one
    of them need a value computed at run time, DataDependent stages it after all."""
    if any(not _is_tensor_type(v.type) for v in list(graph.input) + list(graph.output)):
        return True
    host = _host_nodes(graph, declared)
    if declared is None and host and all(
            graph.node[k].op_type in COMPILE_TIME_SEQUENCE_OPS for k in host):
        return False
    return bool(host)


def _host_nodes(graph, declared=None):
    """Indices of the nodes the driver runs, from their op types and the types flowing in."""
    types = dict(declared or {})
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        if v.HasField("type"):
            types[v.name] = v.type
    nontensor = {n for n, t in types.items() if not _is_tensor_type(t)}
    strings = {n for n, t in types.items() if t.WhichOneof("value") == "tensor_type"
               and t.tensor_type.elem_type == onnx.TensorProto.STRING}
    host = set()
    for k, node in enumerate(graph.node):
        sub_host = False
        sub_out_nontensor = []
        for sub in _subgraphs(node):
            if needs_staging(sub, {n: types[n] for n in free_names(sub) if n in types}) or any(
                    n in nontensor for n in free_names(sub)):
                sub_host = True
            sub_out_nontensor += [not _is_tensor_type(o.type) for o in sub.output]
        reads = any(n in nontensor for n in node.input if n)
        if node.op_type in STRING_OPS and node.output:
            strings.update(node.output[:1] if node.op_type != "RegexFullMatch" else ())
        if node.op_type == "Equal" and any(n in strings for n in node.input):
            host.add(k)
        if node.op_type in HOST_OPS or reads or sub_host \
                or any(n in nontensor for n in node.output):
            host.add(k)
        outs = [n for n in node.output]
        if node.op_type in _SEQUENCE_MAKERS or (node.op_type == "Identity" and reads):
            nontensor.update(n for n in outs if n)
        elif node.op_type in ("If", "Loop"):
            skip = 1 if node.op_type == "Loop" else 0
            flags = sub_out_nontensor[skip:] if node.op_type == "Loop" else sub_out_nontensor
            for n, f in zip(outs, flags):
                if f and n:
                    nontensor.add(n)
                    host.add(k)
        elif node.op_type == "OptionalGetElement":
            src = types.get(node.input[0]) if node.input else None
            if src is not None and src.WhichOneof("value") == "optional_type" and \
                    not _is_tensor_type(src.optional_type.elem_type):
                nontensor.update(n for n in outs if n)
    return host


def constant_of(node):
    """A Constant node's value (numpy)."""
    from onnx.reference import ReferenceEvaluator
    graph = helper.make_graph([node], "c", [], [helper.make_empty_tensor_value_info(node.output[0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return ReferenceEvaluator(model).run(None, {})[0]


def tensor_type_of(name, value):
    """A ValueInfo for a run-time value: a tensor of its dtype and rank (dims symbolic), or the
    sequence / optional type holding it."""
    if isinstance(value, list):
        elem = value[0] if value else np.zeros(0, np.float32)
        inner = tensor_type_of(name, elem).type
        return helper.make_value_info(name, helper.make_sequence_type_proto(inner))
    a = np.asarray(value)
    dtype = onnx.TensorProto.STRING if a.dtype == object or a.dtype.kind in "US" else \
        helper.np_dtype_to_tensor_dtype(a.dtype)
    return helper.make_tensor_value_info(name, dtype, [None] * a.ndim)


def _type_key(value):
    if type(value) is np.ndarray:
        return (value.dtype, value.ndim)
    if isinstance(value, list):
        return ("seq", _type_key(value[0]) if value else None)
    if value is None:
        return None
    a = np.asarray(value)
    return (a.dtype, a.ndim)


class Segment:
    """Nodes compiled together: a rep per type key (dtype, rank of each input), each caching
    its compiled code per shape."""

    def __init__(self, owner, start, end, inputs, outputs):
        self.owner, self.start, self.end = owner, start, end
        self.nodes = owner.nodes[start:end]
        self.inputs, self.outputs = inputs, outputs
        self.reps = {}
        self.keyed = frozenset(n for n in self.nodes[0].input if n)

    def run(self, args, env=None):
        try:
            key = tuple([(a.dtype, a.ndim) for a in args])
        except AttributeError:       # numpy scalars, sequences
            args = [a if isinstance(a, list) else np.asarray(a) for a in args]
            key = tuple([_type_key(a) for a in args])
        rep = self.reps.get(key)
        if rep is None:
            rep = self.reps[key] = self._make_rep(args)
        # Only the first node's inputs may be specialized on (a cut starts a segment there);
        # any other value needed at compile time cuts the segment again (StagedRep._learn).
        token = VALUE_KEYED.set(self.keyed)
        try:
            return rep.run(args if type(args) is list else list(args))
        finally:
            VALUE_KEYED.reset(token)

    def _make_rep(self, args):
        from .backend import OnnxJitRep
        o = self.owner
        used = {n for node in self.nodes for n in node.input} | {
            n for node in self.nodes for sub in _subgraphs(node) for n in free_names(sub)}
        inits = [numpy_helper.from_array(np.asarray(o.consts[n]), n) for n in sorted(used)
                 if n in o.consts and n not in self.inputs]
        graph = helper.make_graph(
            list(self.nodes), f"{o.name}_stage{self.start}",
            [tensor_type_of(n, a) for n, a in zip(self.inputs, args)],
            [helper.make_empty_tensor_value_info(n) for n in self.outputs], inits)
        model = helper.make_model(graph, opset_imports=o.opset_import, ir_version=o.ir_version)
        model.functions.extend(o.functions)
        # not tiered: a background compile would not see VALUE_KEYED
        rep = OnnxJitRep(model, **dict(o.rep_options, tiered=False), lazy=True)
        rep.staging = False      # DataDependent reaches the StagedRep, which cuts there
        return rep


class HostStage:
    """One node the driver runs (host_ops.py), with what it reads prepared once."""

    def __init__(self, owner, k):
        from .ir import attributes
        self.owner, self.index, self.node = owner, k, owner.nodes[k]
        self.start = k
        node = self.node
        self.arg_names = list(node.input)
        self.outer = list(dict.fromkeys(n for s in _subgraphs(node) for n in free_names(s)))
        self.inputs = [n for n in self.arg_names if n] + self.outer
        self.outputs = [n for n in node.output]
        self.attrs = attributes(node)
        from .host_ops import run_host
        self.run_host = run_host

    def run(self, args, env):
        if not self.outer and len(self.inputs) == len(self.arg_names):
            outs = self.run_host(self.owner, self.node, args, {}, self.attrs)
        else:
            values = dict(zip(self.inputs, args))
            outs = self.run_host(self.owner, self.node,
                                 [values[n] if n else None for n in self.arg_names],
                                 {n: values[n] for n in self.outer}, self.attrs)
        if len(outs) < len(self.outputs):
            outs = list(outs) + [None] * (len(self.outputs) - len(outs))
        return outs


class StagedRep:
    """A graph run as compiled segments and host nodes (see the module docstring). Takes and
    returns tensors as numpy arrays, sequences as lists of arrays, an empty optional as None."""

    def __init__(self, graph, opset_import, ir_version=None, functions=(), consts=None,
                 input_names=None, rep_options=None, declared=None, name=None):
        self.graph = graph
        self.name = name or graph.name or "model"
        self.nodes = list(graph.node)
        self.opset_import = list(opset_import)
        self.opsets = {(e.domain or ""): e.version for e in opset_import}
        self.ir_version = ir_version or onnx.IR_VERSION
        self.functions = list(functions)
        self.rep_options = dict(rep_options or {})
        self.consts = dict(consts or {})
        inits = {t.name for t in graph.initializer}
        for t in graph.initializer:
            self.consts[t.name] = numpy_helper.to_array(t)
        for node in self.nodes:     # Constant nodes fold into every segment reading them
            if node.op_type == "Constant" and not node.input:
                try:
                    self.consts[node.output[0]] = constant_of(node)
                except Exception:
                    pass
        self.input_names = input_names if input_names is not None else \
            [i.name for i in graph.input if i.name not in inits]
        self.output_names = [o.name for o in graph.output]
        from onnx.backend.base import namedtupledict
        self._outputs = namedtupledict("Outputs", self.output_names)
        self.host = _host_nodes(graph, declared)
        self._kinds = {i.name: i.type.WhichOneof("value") for i in graph.input
                       if i.HasField("type")}
        self.model = None           # the ModelProto of a top-level rep (pickling)
        self._plain = [self._kinds.get(n) in ("tensor_type", None) for n in self.input_names]
        self.cuts = set()           # nodes starting a segment (learnt from DataDependent)
        self._segments = {}         # (start, end) -> Segment
        self._lock = threading.RLock()
        self._plan = None

    # -- the plan --------------------------------------------------------------------------
    def plan(self):
        if self._plan is not None:
            return self._plan
        stages, start = [], None
        for k, node in enumerate(self.nodes):
            if node.op_type == "Constant" and not node.input and node.output[0] in self.consts:
                continue
            if k in self.host:
                if start is not None:
                    stages.append(self._segment(start, k))
                    start = None
                stages.append(HostStage(self, k))
            else:
                if start is not None and k in self.cuts:
                    stages.append(self._segment(start, k))
                    start = None
                if start is None:
                    start = k
        if start is not None:
            stages.append(self._segment(start, len(self.nodes)))
        self._plan = [s for s in stages if s is not None]
        return self._plan

    def _segment(self, start, end):
        seg = self._segments.get((start, end))
        if seg is not None:
            return seg
        nodes = [n for n in self.nodes[start:end]]
        defined, inputs = set(), []
        for node in nodes:
            reads = list(node.input) + [n for s in _subgraphs(node) for n in free_names(s)]
            for n in reads:
                if n and n not in defined and n not in self.consts and n not in inputs:
                    inputs.append(n)
            defined.update(n for n in node.output if n)
        later = set(self.output_names)
        for node in self.nodes[end:]:
            later.update(node.input)
            for s in _subgraphs(node):
                later.update(free_names(s))
        outputs = [n for node in nodes for n in node.output if n and n in later]
        if not outputs:
            return None
        seg = self._segments[(start, end)] = Segment(self, start, end, inputs, outputs)
        return seg

    # -- running -----------------------------------------------------------------------------
    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise InputError(f"inputs by name: missing {missing}; the model's inputs are "
                                 f"{self.input_names}")
            inputs = [inputs[n] for n in self.input_names]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise InputError(f"the model takes {len(self.input_names)} input(s) "
                             f"{self.input_names}, got {len(inputs)}")
        values = [a if plain and type(a) is np.ndarray and a.dtype.kind not in "US"
                  else self._check(n, _value(a))
                  for n, a, plain in zip(self.input_names, inputs, self._plain)]
        return self._outputs(*self.evaluate(dict(zip(self.input_names, values))))

    def _check(self, name, value):
        """A sequence where the model declares one, None only for an optional."""
        kind = self._kinds.get(name)
        if isinstance(value, list) and kind not in ("sequence_type", "optional_type", None):
            raise InputError(f"input {name!r}: expected a tensor, got a sequence (list)")
        if value is None and kind != "optional_type":
            raise InputError(f"input {name!r}: got None, but it is not an optional input")
        if isinstance(value, np.ndarray) and kind == "sequence_type":
            raise InputError(f"input {name!r}: expected a sequence (a list of arrays), got an "
                             "array")
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            value = value.astype(str).astype(object)
        return value

    def evaluate(self, env):
        """The graph's outputs for `env` {name: value} (graph inputs, outer-scope values)."""
        for _ in range(len(self.nodes) + 1):
            try:
                return self._evaluate(dict(env))
            except DataDependent as exc:
                self._learn(exc)
        raise LoweringError(f"graph {self.name!r}: could not be staged")

    def _evaluate(self, env):
        consts = self.consts
        for stage in self._plan or self.plan():
            try:
                args = [env[n] if n in env else consts[n] for n in stage.inputs]
            except KeyError:
                args = [self._lookup(env, n) for n in stage.inputs]
            env.update(zip(stage.outputs, stage.run(args, env)))
        return [env[n] if n in env else self._lookup(env, n) for n in self.output_names]

    def _lookup(self, env, name):
        if name in env:
            return env[name]
        if name in self.consts:
            return self.consts[name]
        raise ModelError(f"graph {self.name!r}: {name!r} is read before any node defines it")

    def _learn(self, exc):
        """Cut before the node that raised DataDependent (or run it on the host)."""
        k = self._top_level_index(exc.node)
        if k is None:
            raise exc
        with self._lock:
            node = self.nodes[k]
            if node.op_type in COMPILE_TIME_SEQUENCE_OPS:
                raise exc   # sequence ops are host nodes in a StagedRep: not reached
            if node.op_type in HOST_WHEN_DYNAMIC:
                if k in self.host:
                    raise exc
                self.host.add(k)
            else:
                starts = {s.start for s in self.plan() if isinstance(s, Segment)}
                if k in starts:
                    raise exc       # its inputs are already segment inputs: too large to key on
                self.cuts.add(k)
            self._plan = None

    def _top_level_index(self, node):
        if node is None:
            return None
        for k, n in enumerate(self.nodes):
            if n == node:
                return k
        for k, n in enumerate(self.nodes):
            if any(_contains(s, node) for s in _subgraphs(n)):
                return k
        return None

    # -- inspection --------------------------------------------------------------------------
    def stages(self):
        """[(kind, op types)] of the current plan: kind 'compiled', 'kernel' or 'python'."""
        from .host_ops import is_python
        rows = []
        for stage in self.plan():
            if isinstance(stage, Segment):
                rows.append(("compiled", [n.op_type for n in stage.nodes]))
            else:
                rows.append(("python" if is_python(stage.node) else "kernel",
                             [stage.node.op_type]))
        return rows

    def source(self):
        """The generated module of each compiled segment's latest signature, in plan order,
        each after a comment naming its stage; host nodes as comments."""
        parts = []
        for stage in self.plan():
            if isinstance(stage, Segment):
                for rep in stage.reps.values():
                    if rep.signatures():
                        parts.append(f"# -- compiled segment from node {stage.start}\n"
                                     + rep.source())
            else:
                parts.append(f"# -- host node {stage.index}: {stage.node.op_type}\n")
        return "\n".join(parts)

    def cache_info(self):
        """Per compiled segment: its nodes' op types and its reps' cache_info()."""
        return [{"ops": [n.op_type for n in s.nodes],
                 "reps": [r.cache_info() for r in s.reps.values()]}
                for s in self.plan() if isinstance(s, Segment)]

    def __repr__(self):
        return f"<StagedRep {self.name!r}: {len(self.plan())} stage(s)>"

    def __reduce__(self):
        if self.model is None:
            raise TypeError("only a whole model's StagedRep can be pickled")
        options = {k: v for k, v in self.rep_options.items() if k != "progress"}
        return _unpickle_staged, (self.model.SerializeToString(), options)


def _contains(graph, node):
    for n in graph.node:
        if n == node or any(_contains(s, node) for s in _subgraphs(n)):
            return True
    return False


def _value(a):
    if a is None or isinstance(a, list):
        return None if a is None else [np.asarray(x) for x in a]
    if isinstance(a, tuple):
        return [np.asarray(x) for x in a]
    return np.asarray(a)


def unsupported_ops(model):
    """pipeline.unsupported_ops, counting the ops the staged driver runs (host_ops) as known."""
    from . import registry
    from .host_ops import HANDLERS
    from .pipeline import unsupported_ops as unsupported
    return unsupported(model, lambda op, opset, domain: registry.lookup(op, opset, domain)
                       is not None or (domain in ("", "ai.onnx") and op in HANDLERS))


def prepare_staged(model, rep_options=None):
    """A StagedRep of a whole model."""
    rep = StagedRep(model.graph, model.opset_import, model.ir_version, model.functions,
                    rep_options=rep_options)
    rep.model = model
    return rep


def _unpickle_staged(data, options):
    return prepare_staged(onnx.ModelProto.FromString(data), options)


def subgraph_rep(parent, graph, outer_types=None):
    """A StagedRep of a subgraph (If branch, Loop / Scan / SequenceMap body): its inputs, then
    the enclosing scope's values it reads; the parent's constants fold into it."""
    free = [n for n in free_names(graph)]
    consts = {n: parent.consts[n] for n in free if n in parent.consts}
    inputs = [i.name for i in graph.input] + [n for n in free if n not in consts]
    return StagedRep(graph, parent.opset_import, parent.ir_version, parent.functions, consts,
                     inputs, parent.rep_options, declared=outer_types,
                     name=f"{parent.name}/{graph.name or 'body'}")
