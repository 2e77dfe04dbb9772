"""Fuzz onnxjit against onnx's reference evaluator (ONNX Runtime breaking ties).

    python -m onnxjit.fuzz [--cases N] [--seed S] [--start I] [--jobs J] [--timeout T]
                           [--json FILE] [--save DIR] [--budget SECONDS]
    python -m onnxjit.fuzz --seed S --case I [--case I2 ...] -v    # rerun cases by (seed, index)
    python -m onnxjit.fuzz --seed S --case I --show                # print a case, run nothing

Cases are the backend suite's node models (onnx.backend.test.case.node), mutated: odd and
zero-size dimensions (the declared shapes made symbolic), NaN, +-Inf, huge and out-of-range
integer values, integer attributes nudged (also out of range), float/int dtype swaps; and random
small graphs. A case's model and inputs depend only on (seed, index). Each case runs in a worker
process (a pool: a worker that crashes or hangs is replaced), first under the reference, then
under onnxjit, then (when they disagree) under ONNX Runtime; a case the reference takes too long
on runs again under onnxjit alone. onnxjit's own errors are those of onnxjit.errors and the
IndexError("Op: ... out of range") a compiled kernel raises for an index out of range. Outcomes:

  agree          onnxjit and the reference (or ONNX Runtime, breaking a tie) give the same outputs
  both refuse    the reference and onnxjit both raise (onnxjit with one of its own errors)
  clear refusal  the reference answers, onnxjit raises one of its own errors
  ref refuses    the reference raises and onnxjit answers, and ONNX Runtime either cannot run the
                 model or answers otherwise: no verdict
  oracles differ onnxjit differs from the reference, and the oracles give no verdict: ONNX
                 Runtime answers otherwise than both (an ill-conditioned result: the sine of an
                 exp that rounds one ulp apart, seed 7 case 5445), or the reference's answer is
                 undefined (numpy warned that it cast a NaN or an infinity to an integer, seed 7
                 case 6487) and ONNX Runtime cannot run the model
  skip           the reference crashed or took too long (onnxjit, run alone, neither crashed,
                 hung nor raised an unclean error), or no mutation applied
  CRASH          the worker died while onnxjit prepared or ran the case (a segfault, an abort)
  HANG           onnxjit took longer than the timeout
  WRONG          onnxjit answers differently from the reference and ONNX Runtime, or answers a
                 model both refuse as invalid
  UNCLEAN        an exception that is not onnxjit's (a Numba/LLVM error, a Python traceback)

The last four are findings; the exit status is 1 when there is any. This module is a tool:
nothing in the library imports it.

A long campaign on a 16-core machine (one worker ran 300 cases in 200-320 s on warm caches on
the 2-core dev VM; a cold cache compiles the library kernels first):

    python -m onnxjit.fuzz --cases 300 --seed 1 --jobs 16            # warms the disk caches
    python -m onnxjit.fuzz --cases 20000 --seed 7 --jobs 16 --timeout 60 --budget 14400 \
        --json fuzz_seed7.json --save fuzz_seed7

Each worker runs Numba on `--threads` threads (default: the cores over the jobs, at least 2 so
that the kernels' splits between threads are exercised; NUMBA_NUM_THREADS in the environment
wins), so workers do not oversubscribe the machine and turn slow runs into HANGs. `--json` is
rewritten every minute while the campaign runs ("complete": false until it ends, and after
Ctrl-C, SIGTERM or --budget): the count of every outcome, then "findings" (for each: seed, index, kind,
base model, mutation, outcome, detail, onnxjit's traceback, the model as onnx.printer text, the
inputs' shapes and dtypes, and the command that reruns it), then every case's result. A case is
rebuilt from (seed, index) alone, so a finding reruns with `--seed S --case I -v` (workers print,
and the traceback is shown), or is printed with `--show`; `--save DIR` also writes each
finding's model (.onnx) and inputs (.npz).
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import wait as wait_any

import numpy as np

FINDINGS = ("CRASH", "HANG", "WRONG", "UNCLEAN")
OUTCOMES = ("agree", "both refuse", "clear refusal", "ref refuses", "oracles differ",
            "skip") + FINDINGS
KINDS = ("dims", "values", "attrs", "dtype", "graph")
KIND_WEIGHTS = (0.25, 0.25, 0.2, 0.1, 0.2)

# Base models left out: nondeterministic outputs, or training-mode randomness.
_SKIP_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
             "Bernoulli", "Multinomial", "Dropout"}

# -- building cases (in the parent; deterministic in (seed, index)) ------------------------------
_BASES = None


def bases():
    """[(name, ModelProto, [input arrays])] of the node suite's models, sorted: every one whose
    inputs are tensors and whose nodes are deterministic (not only those onnxjit passes, so that
    a seed's cases do not change as tests/conformance_exclusions.txt shrinks)."""
    global _BASES
    if _BASES is None:
        import warnings

        from onnx.backend.test.case import node
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = node.collect_testcases()
        found = []
        for case in cases:
            if case.model is None or not case.data_sets:
                continue
            inputs = case.data_sets[0][0]
            if not all(type(a) is np.ndarray for a in inputs):
                continue
            if len(inputs) != len(case.model.graph.input):
                continue
            if any(n.op_type in _SKIP_OPS or n.domain not in ("", "ai.onnx")
                   for n in case.model.graph.node):
                continue
            found.append((case.name, case.model, inputs))
        _BASES = sorted(found, key=lambda t: t[0])
    return _BASES


def make_case(seed, index):
    """The case (a dict: id, kind, base, model bytes, inputs, what was changed) for (seed, index)."""
    rng = np.random.default_rng([seed, index])
    kind = KINDS[rng.choice(len(KINDS), p=KIND_WEIGHTS)]
    case = {"index": index, "kind": kind, "model": None, "inputs": [], "note": ""}
    if kind == "graph":
        model, inputs, note = random_graph(rng)
        case.update(base="random", model=model.SerializeToString(), inputs=inputs, note=note)
        return case
    all_bases = bases()
    for _ in range(50):     # bases the mutation does not apply to are passed over
        name, base, inputs = all_bases[rng.integers(len(all_bases))]
        try:
            model, inputs, note = MUTATORS[kind](rng, _copy(base), [a.copy() for a in inputs])
        except _NoMutation as exc:
            case["note"] = str(exc)
            continue
        case.update(base=name, model=model.SerializeToString(), inputs=inputs, note=note)
        break
    return case


class _NoMutation(Exception):
    pass


def _copy(model):
    import onnx
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _clear_value_shapes(model):
    """Forget declared output and intermediate shapes (they are stale after a mutation)."""
    graph = model.graph
    del graph.value_info[:]
    for out in graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")


def _symbolic(value_info, tag):
    t = value_info.type.tensor_type
    for i, d in enumerate(t.shape.dim):
        d.Clear()
        d.dim_param = f"{tag}_{i}"


_ODD = (0, 1, 2, 3, 5, 7, 9, 13, 17, 31, 33)


def _mutate_dims(rng, model, inputs):
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    candidates = [i for i, vi in enumerate(graph.input)
                  if vi.name not in inits and inputs[i].ndim > 0]
    if not candidates:
        raise _NoMutation("no input with dimensions")
    i = int(rng.choice(candidates))
    a = inputs[i]
    shape = list(a.shape)
    axis = int(rng.integers(len(shape)))
    shape[axis] = int(rng.choice(_ODD))
    # Where another input has the same shape, change it alike (elementwise partners).
    changed = []
    for j, b in enumerate(inputs):
        if j == i or b.shape == a.shape:
            inputs[j] = _random_like(rng, b, shape)
            _symbolic(graph.input[j], f"d{j}")
            changed.append(graph.input[j].name)
    _clear_value_shapes(model)
    return model, inputs, f"inputs {changed}: shape {shape}"


def _random_like(rng, a, shape):
    dtype = a.dtype
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        lo, hi = (int(a.min()), int(a.max()) + 1) if a.size else (0, 4)
        return rng.integers(lo, max(hi, lo + 1), size=shape).astype(dtype)
    if np.issubdtype(dtype, np.floating) or dtype.kind == "V":
        return rng.standard_normal(shape).astype(dtype)
    raise _NoMutation(f"dtype {dtype}")


_INT_SPECIALS = (-1, 0, 1, 2, 7, 1000, -1000, 2 ** 31 - 1, -2 ** 31, 2 ** 63 - 1, -2 ** 63)


def _mutate_values(rng, model, inputs):
    candidates = [i for i, a in enumerate(inputs) if a.size and a.dtype != np.bool_]
    if not candidates:
        raise _NoMutation("no input with values")
    i = int(rng.choice(candidates))
    a = inputs[i].copy()
    flat = a.reshape(-1)
    count = int(rng.integers(1, min(flat.size, 3) + 1))
    where = rng.choice(flat.size, size=count, replace=False)
    if np.issubdtype(a.dtype, np.floating):
        specials = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40)
        picked = [specials[k] for k in rng.integers(len(specials), size=count)]
        with np.errstate(all="ignore"):
            flat[where] = np.array(picked).astype(a.dtype)
    elif np.issubdtype(a.dtype, np.integer):
        info = np.iinfo(a.dtype)
        picked = [int(np.clip(_INT_SPECIALS[k], info.min, info.max))
                  for k in rng.integers(len(_INT_SPECIALS), size=count)]
        flat[where] = np.array(picked, dtype=a.dtype)
    else:
        raise _NoMutation(f"dtype {a.dtype}")
    inputs[i] = a
    return model, inputs, f"input {model.graph.input[i].name!r}: {count} value(s) {flat[where].tolist()}"


_NUDGES = (-1, 1, 2, -2)
_ATTR_SPECIALS = (0, -1, 2, 3, 1048577, 2 ** 31 - 1, -2 ** 31, 2 ** 62)


def _mutate_attrs(rng, model, inputs):
    import onnx
    found = [(n, a) for n in model.graph.node for a in n.attribute
             if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)
             and (a.type == onnx.AttributeProto.INT or len(a.ints))]
    if not found:
        raise _NoMutation("no integer attribute")
    node, attr = found[int(rng.integers(len(found)))]
    special = rng.random() < 0.3
    if attr.type == onnx.AttributeProto.INT:
        old = attr.i
        attr.i = (int(rng.choice(_ATTR_SPECIALS)) if special
                  else old + int(rng.choice(_NUDGES)))
        new = attr.i
    else:
        k = int(rng.integers(len(attr.ints)))
        old = list(attr.ints)
        attr.ints[k] = (int(rng.choice(_ATTR_SPECIALS)) if special
                        else attr.ints[k] + int(rng.choice(_NUDGES)))
        new = list(attr.ints)
    _clear_value_shapes(model)
    return model, inputs, f"{node.op_type}.{attr.name}: {old} -> {new}"


_SWAPS = {np.dtype(np.float32): np.float64, np.dtype(np.float64): np.float32,
          np.dtype(np.int32): np.int64, np.dtype(np.int64): np.int32,
          np.dtype(np.uint8): np.int8, np.dtype(np.int8): np.uint8}


def _mutate_dtype(rng, model, inputs):
    from onnx import helper
    candidates = [i for i, a in enumerate(inputs) if a.dtype in _SWAPS]
    if not candidates:
        raise _NoMutation("no input to swap")
    i = int(rng.choice(candidates))
    # All inputs of the dtype, or just one (then the model usually breaks a type constraint).
    every = rng.random() < 0.5
    old = inputs[i].dtype
    new = np.dtype(_SWAPS[old])
    changed = []
    for j, a in enumerate(inputs):
        if j == i or (every and a.dtype == old):
            with np.errstate(all="ignore"):
                inputs[j] = a.astype(new)
            model.graph.input[j].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(new)
            changed.append(model.graph.input[j].name)
    _clear_value_shapes(model)
    for out in model.graph.output:      # outputs' types may follow the inputs'
        if out.type.HasField("tensor_type") and out.type.tensor_type.elem_type == \
                helper.np_dtype_to_tensor_dtype(old):
            out.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(new)
    return model, inputs, f"inputs {changed}: {old} -> {new}"


MUTATORS = {"dims": _mutate_dims, "values": _mutate_values, "attrs": _mutate_attrs,
            "dtype": _mutate_dtype}

_UNARY = {"float": ["Abs", "Neg", "Exp", "Sqrt", "Relu", "Sigmoid", "Tanh", "Floor", "Ceil", "Log",
                    "Reciprocal", "Sin", "Erf", "Softsign", "Elu", "LeakyRelu", "HardSigmoid"],
          "int": ["Abs", "Neg", "Sign"]}
_BINARY = {"float": ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"],
           "int": ["Add", "Sub", "Mul", "Max", "Min"]}
_REDUCE = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd"]


def random_graph(rng):
    """A random chain of 1-5 nodes over 1-2 inputs (elementwise, broadcasting, reductions,
    Transpose, Softmax, MatMul, Concat, Where, Cast)."""
    from onnx import TensorProto, helper
    dtype = np.dtype(rng.choice(["float32", "float32", "float64", "int32", "int64"]))
    family = "float" if dtype.kind == "f" else "int"
    rank = int(rng.integers(0, 5))
    shape = [int(rng.choice((0, 1, 2, 3, 4, 5, 7, 16, 17, 33), p=(
        0.04, 0.16, 0.15, 0.15, 0.12, 0.1, 0.1, 0.08, 0.06, 0.04))) for _ in range(rank)]
    elem = helper.np_dtype_to_tensor_dtype(dtype)

    def data(shape):
        if family == "float":
            a = rng.standard_normal(shape) * 3
            if rng.random() < 0.2 and a.size:
                a.reshape(-1)[rng.integers(a.size)] = rng.choice([np.nan, np.inf, -np.inf])
            return np.asarray(a, dtype=dtype)
        return np.asarray(rng.integers(-20, 20, size=shape), dtype=dtype)

    inputs = [data(shape)]
    ins = [helper.make_tensor_value_info("x0", elem, [f"n{i}" for i in range(rank)]
                                         if rng.random() < 0.5 else shape)]
    nodes, cur, cur_shape, n = [], "x0", list(shape), 0
    for k in range(int(rng.integers(1, 6))):
        out = f"t{k}"
        choice = rng.random()
        if choice < 0.3:
            op = str(rng.choice(_UNARY[family]))
            nodes.append(helper.make_node(op, [cur], [out]))
        elif choice < 0.55:
            op = str(rng.choice(_BINARY[family]))
            # A broadcasting partner: some dims kept, some 1, maybe a lower rank.
            other = [d if rng.random() < 0.6 else 1 for d in cur_shape]
            other = other[int(rng.integers(0, len(other) + 1)):] if other else other
            name = f"x{len(inputs)}"
            inputs.append(data(other))
            ins.append(helper.make_tensor_value_info(name, elem, other))
            pair = [cur, name] if rng.random() < 0.5 else [name, cur]
            nodes.append(helper.make_node(op, pair, [out]))
        elif choice < 0.7 and cur_shape:
            op = str(rng.choice(_REDUCE))
            axes = sorted({int(rng.integers(-len(cur_shape), len(cur_shape)))
                           for _ in range(int(rng.integers(1, 3)))})
            keep = int(rng.integers(0, 2))
            axes_name = f"axes{k}"
            nodes.append(helper.make_node("Constant", [], [axes_name],
                                          value=helper.make_tensor(axes_name, TensorProto.INT64,
                                                                   [len(axes)], axes)))
            nodes.append(helper.make_node(op, [cur, axes_name], [out], keepdims=keep))
            norm = {a % len(cur_shape) for a in axes}
            cur_shape = [1 if i in norm else d for i, d in enumerate(cur_shape)
                         if keep or i not in norm]
        elif choice < 0.78 and len(cur_shape) >= 2:
            perm = [int(p) for p in rng.permutation(len(cur_shape))]
            nodes.append(helper.make_node("Transpose", [cur], [out], perm=perm))
            cur_shape = [cur_shape[p] for p in perm]
        elif choice < 0.84 and cur_shape and family == "float":
            axis = int(rng.integers(-len(cur_shape), len(cur_shape)))
            op = str(rng.choice(["Softmax", "LogSoftmax", "Hardmax"]))
            nodes.append(helper.make_node(op, [cur], [out], axis=axis))
        elif choice < 0.9 and len(cur_shape) >= 1:
            inner = cur_shape[-1]
            cols = int(rng.choice((1, 3, 8, 17)))
            name = f"x{len(inputs)}"
            inputs.append(data([inner, cols]))
            ins.append(helper.make_tensor_value_info(name, elem, [inner, cols]))
            nodes.append(helper.make_node("MatMul", [cur, name], [out]))
            cur_shape = cur_shape[:-1] + [cols]
        elif choice < 0.95 and cur_shape:
            axis = int(rng.integers(len(cur_shape)))
            nodes.append(helper.make_node("Concat", [cur, cur], [out], axis=axis))
            cur_shape[axis] *= 2
        else:
            to = rng.choice([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32,
                             TensorProto.INT64])
            nodes.append(helper.make_node("Cast", [cur], [out], to=int(to)))
            mid = f"c{k}"
            nodes.append(helper.make_node("Cast", [out], [mid], to=elem))
            out = mid
        cur, n = out, n + 1
    graph = helper.make_graph(nodes, "fuzz", ins, [helper.make_tensor_value_info(cur, elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, inputs, " -> ".join(n.op_type for n in nodes if n.op_type != "Constant")


# -- the worker -----------------------------------------------------------------------------------
_KERNEL_INDEX = re.compile(r"^[A-Za-z][A-Za-z_]*: .*out of range")


def _describe_error(exc):
    from onnxjit.errors import OnnxJitError
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return {"type": f"{type(exc).__module__}.{type(exc).__name__}", "message": text,
            "onnxjit": isinstance(exc, OnnxJitError),
            # A compiled kernel refusing an index: IndexError("Op: ... out of range") (README).
            "kernel": type(exc) is IndexError and bool(_KERNEL_INDEX.match(text)),
            "traceback": "".join(traceback.format_exception(exc))[-3000:]}


def _run_reference(model, inputs):
    import warnings

    import onnx
    from onnx.reference import ReferenceEvaluator
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        ref = ReferenceEvaluator(onnx.ModelProto.FromString(model))
        outputs = [_output(o) for o in ref.run(None, dict(zip(ref.input_names, inputs)))]
    if any(_UNDEFINED_CAST in str(w.message) for w in caught):
        return _Undefined(outputs)
    return outputs


# numpy's warning when it casts a NaN or an infinity to an integer: the result is undefined
# (whatever the CPU's conversion instruction gives), so a reference answer that went through
# one is no oracle.
_UNDEFINED_CAST = "invalid value encountered in cast"


class _Undefined(list):
    """The reference's outputs when one of its casts was undefined (see _UNDEFINED_CAST)."""


def _output(value):
    """An output as an array, a sequence output as a list of arrays (its items may differ in
    shape: np.asarray of the list failed, seed 7 case 201)."""
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return np.asarray(value)


def _run_onnxjit(model, inputs, phase):
    import warnings

    import onnx

    import onnxjit.backend
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        rep = onnxjit.backend.prepare(onnx.ModelProto.FromString(model))
        phase("run")
        return [_output(o) for o in rep.run(list(inputs))]


def _run_ort(model, inputs):
    import onnx
    import onnxruntime as ort
    proto = onnx.ModelProto.FromString(model)
    proto.ir_version = min(proto.ir_version, 10)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return [_output(o) for o in session.run(None, dict(zip(names, inputs)))]


def _attempt(fn, *args):
    try:
        value = fn(*args)
        if isinstance(value, _Undefined):
            return {"ok": list(value), "undefined": True}
        return {"ok": value}
    except BaseException as exc:   # noqa: BLE001  (everything is a result here)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"error": _describe_error(exc)}


def _worker(conn, quiet):
    os.environ.setdefault("ONNXJIT_ENTRY", "driver")
    os.environ.setdefault("ONNXJIT_TIERED", "0")
    if quiet:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    import onnxjit.backend  # noqa: F401  (imported before the first case's clock starts)
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        conn.send(("start", None))
        model, inputs = case["model"], case["inputs"]
        if case.get("no_reference"):     # it ran past the timeout before: onnxjit alone
            conn.send(("reference", {"error": {"type": "timeout", "onnxjit": False,
                                               "message": "the reference took too long"}}))
        else:
            conn.send(("reference", _attempt(_run_reference, model, inputs)))
        conn.send(("prepare", None))
        result = _attempt(_run_onnxjit, model, inputs, lambda p: conn.send((p, None)))
        conn.send(("onnxjit", result))
        reply = conn.recv()      # the parent asks for ONNX Runtime only on a disagreement
        if reply == "ort":
            conn.send(("ort", _attempt(_run_ort, model, inputs)))


# -- comparing ----------------------------------------------------------------------------------
def _tolerance(dtype):
    if dtype == np.float16 or dtype.kind == "V" or str(dtype) == "bfloat16":
        return 2e-2, 1e-2
    if dtype == np.float32:
        return 2e-3, 1e-4
    return 1e-6, 1e-8


def compare(want, got, infinite_inputs=False, nan_propagates=False, narrow=None):
    """None when the outputs match, else a sentence saying where they differ. With
    `infinite_inputs` (an input holds +-inf), a NaN on either side matches anything: inf - inf
    and inf * 0 appear or not depending on the order of the arithmetic (an FFT against a sum).
    With `nan_propagates` (a NaN input reaches a max pool), a NaN of onnxjit's where the oracle
    has a number matches: ONNX leaves a NaN's effect on MaxPool unspecified; the reference and
    ONNX Runtime skip it inside a window (a comparison with NaN is false) while onnxjit's
    pools, like numpy's max, propagate it (seed 8 case 96). With `narrow` (a float dtype the
    model casts to, see _narrowest_cast), wider float outputs are compared at its tolerance:
    they carry its precision only (seed 7's LinearAttention *_expanded bodies cast float64
    inputs to float32: the reference and ONNX Runtime differ by 1e-7 of the largest value)."""
    if len(want) != len(got):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, list) or isinstance(g, list):   # sequence outputs: item by item
            if not (isinstance(w, list) and isinstance(g, list)):
                return f"output {k}: a sequence against a tensor"
            diff = compare(w, g, infinite_inputs, nan_propagates, narrow)
            if diff is not None:
                return f"output {k} (a sequence): {diff.replace('output', 'item')}"
            continue
        w, g = np.asarray(w), np.asarray(g)
        if w.dtype == object or g.dtype == object:
            if w.shape != g.shape or not all(a == b for a, b in zip(w.reshape(-1), g.reshape(-1))):
                return f"output {k}: object values differ"
            continue
        if w.shape != g.shape:
            return f"output {k}: shape {list(g.shape)}, expected {list(w.shape)}"
        if w.dtype != g.dtype:
            return f"output {k}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "biu":
            if not np.array_equal(w, g):
                bad = int(np.sum(w != g))
                return f"output {k}: {bad} of {w.size} values differ"
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        # Saturation: +-inf against the dtype's largest finite value of the same sign is one
        # answer (the reference clamps some results to the dtype's range).
        big = float(np.finfo(w.dtype).max) if w.dtype.kind == "f" else np.inf
        for a, b in ((wf, gf), (gf, wf)):
            saturated = np.isinf(a) & (np.abs(b) == big) & (np.sign(a) == np.sign(b))
            a[saturated] = b[saturated]
        if infinite_inputs:
            either = np.isnan(wf) | np.isnan(gf)
            wf[either] = gf[either] = 0.0
        if nan_propagates:
            propagated = np.isnan(gf) & ~np.isnan(wf)
            wf[propagated] = gf[propagated] = 0.0
        rtol, atol = _tolerance(w.dtype if narrow is None or w.dtype.kind != "f"
                                or w.dtype.itemsize <= np.dtype(narrow).itemsize else np.dtype(narrow))
        # Scale atol with the magnitudes (sums of many terms lose absolute precision).
        scale = float(np.nanmax(np.abs(wf[np.isfinite(wf)]), initial=1.0))
        with np.errstate(all="ignore"):
            close = np.isclose(gf, wf, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True)
        if not close.all():
            i = int(np.argmin(close.reshape(-1)))
            return (f"output {k}: {int((~close).sum())} of {w.size} values differ "
                    f"(first at flat {i}: {gf.reshape(-1)[i]!r}, expected {wf.reshape(-1)[i]!r})")
    return None


_compare = compare


def classify(ref, jit, ort=None, infinite_inputs=False, nan_propagates=False, narrow=None):
    """(outcome, detail) from the reference's, onnxjit's and (maybe) ORT's results."""
    def compare(want, got):
        return _compare(want, got, infinite_inputs, nan_propagates, narrow)

    jit_err = jit.get("error")
    if jit_err is not None and not (jit_err["onnxjit"] or jit_err.get("kernel")):
        return "UNCLEAN", f"{jit_err['type']}: {jit_err['message']}"
    if "error" in ref:
        if jit_err is not None:
            if ref["error"]["type"] == "timeout":
                return "clear refusal", jit_err["message"]
            return "both refuse", jit_err["message"]
        if ort is None:
            return None, "ask ort"
        if "ok" in ort:
            diff = compare(ort["ok"], jit["ok"])
            if diff is None:
                return "agree", "ONNX Runtime agrees (the reference refused or took too long)"
            if ref["error"]["type"] == "timeout":
                return "skip", f"the reference took too long; ONNX Runtime differs: {diff}"
            # One oracle refuses, the other answers otherwise: no verdict either way.
            return "ref refuses", f"{ref['error']['message'][:150]}; ONNX Runtime differs: {diff}"
        if ref["error"]["type"] == "timeout":
            return "skip", f"the reference took too long; ONNX Runtime: {ort['error']['message'][:150]}"
        if ("NOT_IMPLEMENTED" in ort["error"]["message"] or "NotImplemented" in ort["error"]["type"]
                or ort["error"]["type"] in ("hang", "crash")):
            return "ref refuses", ref["error"]["message"]
        return "WRONG", (f"answers a model the reference ({ref['error']['message']}) and ONNX "
                         f"Runtime ({ort['error']['message'][:150]}) refuse")
    if jit_err is not None:
        return "clear refusal", jit_err["message"]
    diff = compare(ref["ok"], jit["ok"])
    if diff is None:
        return "agree", ""
    if ort is None:
        return None, "ask ort"
    if "ok" in ort and compare(ort["ok"], jit["ok"]) is None:
        return "agree", f"ONNX Runtime agrees with onnxjit (the reference: {diff})"
    if "ok" in ort:
        oracles = compare(ref["ok"], ort["ok"])
        if oracles is not None:
            return "oracles differ", (f"the reference: {diff}; ONNX Runtime differs from both "
                                      f"(against the reference: {oracles})")
    elif ref.get("undefined"):
        return "oracles differ", (f"the reference: {diff}; but the reference cast a NaN or an "
                                  f"infinity to an integer (undefined) and ONNX Runtime cannot "
                                  f"run the model ({ort['error']['message'][:120]})")
    return "WRONG", diff


_MAX_POOLS = {"MaxPool", "MaxRoiPool"}


def _nan_into_max_pool(case):
    """Whether a float input holds a NaN and the model has a max pool (see compare)."""
    if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and np.isnan(a).any()
               for a in case["inputs"]):
        return False
    import onnx
    return any(n.op_type in _MAX_POOLS for n in onnx.ModelProto.FromString(case["model"]).graph.node)


_NARROW_CASTS = {1: np.float32, 10: np.float16, 16: np.float16}   # bfloat16: float16's tolerance


def _narrowest_cast(case):
    """The narrowest float type that a Cast in the model (subgraphs included) converts to, or
    None: an output computed through it has that type's precision, whatever its own dtype."""
    import onnx
    found = []

    def walk(graph):
        for n in graph.node:
            if n.op_type == "Cast":
                to = next((a.i for a in n.attribute if a.name == "to"), None)
                if to in _NARROW_CASTS:
                    found.append(np.dtype(_NARROW_CASTS[to]))
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(g)
    try:
        model = onnx.ModelProto.FromString(case["model"])
    except Exception:   # noqa: BLE001  (not a model: the pool's own tests send stand-ins)
        return None
    walk(model.graph)
    return min(found, key=lambda d: d.itemsize) if found else None


# -- the pool -----------------------------------------------------------------------------------
class _Worker:
    def __init__(self, ctx, quiet, target):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(child, quiet), daemon=True)
        self.proc.start()
        child.close()
        self.case = None

    def stop(self):
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()

    def kill(self):
        self.proc.kill()
        self.proc.join()
        self.conn.close()


class _Job:
    """One case's progress through a worker: reference -> prepare -> run -> onnxjit [-> ort]."""

    def __init__(self, case, timeout, prepare_timeout):
        self.case = case
        self.timeout, self.prepare_timeout = timeout, prepare_timeout
        # A fresh worker imports numpy, onnx and onnxjit before its first case: the reference's
        # clock starts when the worker takes the case (its "start", or the reference's result).
        self.stage = "starting"
        self.deadline = time.monotonic() + prepare_timeout
        self.ref = self.jit = None
        self.start = time.monotonic()
        self.nan_pool = _nan_into_max_pool(case)
        self.infinite = any(a.dtype.kind == "f" and np.isinf(a).any() for a in case["inputs"]
                            if isinstance(a, np.ndarray))
        self.narrow = _narrowest_cast(case) if case.get("model") is not None else None

    def advance(self, stage):
        self.stage = stage
        # onnxjit's prepare and its first run both compile (a driver's calls at the first run).
        limit = self.prepare_timeout if stage in ("prepare", "run") else self.timeout
        self.deadline = time.monotonic() + limit


def run_cases(cases, jobs=1, timeout=60.0, prepare_timeout=300.0, quiet=True, progress=None,
              target=None, budget=None):
    """Run the cases on a pool of `jobs` worker processes; [result dict] in case order.
    `target(conn, quiet)` is the workers' loop (default _worker; tests put in one that crashes).
    After `budget` seconds no case starts: the results are those of the cases that ran."""
    stop = None if budget is None else time.monotonic() + budget
    ctx = multiprocessing.get_context("spawn")
    pending = collections.deque(c for c in cases if c["model"] is not None)
    results = {c["index"]: _result(c, "skip", c["note"]) for c in cases if c["model"] is None}
    target = target or _worker
    workers = [_Worker(ctx, quiet, target) for _ in range(max(1, min(jobs, len(pending) or 1)))]
    active = {}   # worker -> _Job

    def finish(worker, outcome, detail, extra=None):
        job = active.pop(worker)
        results[job.case["index"]] = _result(job.case, outcome, detail, time.monotonic() - job.start,
                                             extra)
        if progress:
            progress(results[job.case["index"]], len(results), len(cases))

    def replace(worker):
        worker.kill()
        workers[workers.index(worker)] = fresh = _Worker(ctx, quiet, target)
        return fresh

    try:
        while pending or active:
            if stop is not None and time.monotonic() > stop:
                pending.clear()
                if not active:
                    break
            for worker in workers:
                if worker not in active and pending:
                    case = pending.popleft()
                    worker.conn.send({"model": case["model"], "inputs": case["inputs"],
                                      "no_reference": case.get("no_reference", False)})
                    active[worker] = _Job(case, timeout, prepare_timeout)
            now = time.monotonic()
            soonest = min(job.deadline for job in active.values())
            ready = wait_any([w.conn for w in active] + [w.proc.sentinel for w in active],
                             timeout=max(0.0, soonest - now))
            for worker in list(active):
                job = active[worker]
                while worker.conn in ready or worker.proc.sentinel in ready:
                    try:
                        if not worker.conn.poll():
                            if worker.proc.is_alive():
                                break
                            raise EOFError
                        stage, payload = worker.conn.recv()
                    except (EOFError, OSError):
                        code = worker.proc.exitcode
                        if job.stage in ("starting", "reference"):
                            finish(worker, "skip", f"the reference crashed the worker ({code})")
                        elif job.stage == "ort":
                            finish(worker, *classify(job.ref, job.jit, {"error": {
                                "type": "crash", "message": f"ONNX Runtime crashed ({code})",
                                "onnxjit": False}}, job.infinite, job.nan_pool, job.narrow))
                        else:
                            finish(worker, "CRASH", f"worker exit {code} during {job.stage}")
                        replace(worker)
                        break
                    if stage == "start":
                        job.advance("reference")
                    elif stage == "reference":
                        job.ref = payload
                        job.advance("prepare")
                    elif stage in ("prepare", "run"):
                        job.advance(stage)
                    elif stage == "onnxjit":
                        job.jit = payload
                        outcome, detail = classify(job.ref, job.jit, None, job.infinite,
                                                   job.nan_pool, job.narrow)
                        if outcome is None:
                            worker.conn.send("ort")
                            job.advance("ort")
                        else:
                            worker.conn.send("done")
                            finish(worker, outcome, detail, _extra(job))
                            break
                    elif stage == "ort":
                        outcome, detail = classify(job.ref, job.jit, payload, job.infinite,
                                                   job.nan_pool, job.narrow)
                        finish(worker, outcome, detail, _extra(job))
                        break
                    if not worker.conn.poll():
                        break
            now = time.monotonic()
            for worker in list(active):
                job = active[worker]
                if now >= job.deadline:
                    if job.stage == "starting":
                        finish(worker, "skip", "the worker did not start in time")
                    elif job.stage == "reference" and not job.case.get("no_reference"):
                        # Run the case again, onnxjit alone: a crash or hang still counts.
                        active.pop(worker)
                        pending.appendleft(dict(job.case, no_reference=True))
                    elif job.stage == "reference":
                        finish(worker, "skip", "the reference took too long")
                    elif job.stage == "ort":
                        finish(worker, *classify(job.ref, job.jit, {"error": {
                            "type": "hang", "message": "ONNX Runtime hung", "onnxjit": False}},
                            job.infinite, job.nan_pool, job.narrow))
                    else:
                        limit = job.prepare_timeout
                        finish(worker, "HANG", f"onnxjit's {job.stage} took over {limit:g} s")
                    replace(worker)
    finally:
        for worker in workers:
            worker.stop()
    return [results[c["index"]] for c in cases if c["index"] in results]


def _extra(job):
    err = (job.jit or {}).get("error")
    return {"traceback": err["traceback"]} if err and not err["onnxjit"] else None


def _result(case, outcome, detail, seconds=0.0, extra=None):
    result = {"index": case["index"], "kind": case["kind"], "base": case.get("base", ""),
              "mutation": case.get("note", ""), "outcome": outcome, "detail": detail,
              "seconds": round(seconds, 2)}
    if extra:
        result.update(extra)
    return result


def summarize(results):
    return collections.Counter(r["outcome"] for r in results)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m onnxjit.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="the campaign's seed (default 0)")
    parser.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    parser.add_argument("--case", type=int, action="append", metavar="I",
                        help="run only case I of the seed (repeatable): reruns a finding")
    parser.add_argument("--show", action="store_true",
                        help="print the cases (model text, inputs) and run nothing")
    parser.add_argument("--threads", type=int,
                        help="Numba threads per worker (default: cores // jobs, at least 2)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds for the reference and for ORT (default 60)")
    parser.add_argument("--prepare-timeout", type=float, default=300.0,
                        help="seconds for onnxjit's prepare, and again for its run (both may "
                             "compile), past which a case is a HANG (default 300)")
    parser.add_argument("--budget", type=float,
                        help="seconds after which no case starts (a bounded campaign)")
    parser.add_argument("--json", help="write every case's result to this file")
    parser.add_argument("--save", metavar="DIR", help="write each finding's model and inputs here")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print each case, and let workers print to the terminal")
    args = parser.parse_args(argv)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)     # `timeout` and `kill` end a campaign cleanly
    start = time.monotonic()
    indices = args.case or range(args.start, args.start + args.cases)
    try:
        cases = [make_case(args.seed, i) for i in indices]
    except KeyboardInterrupt:
        return 130
    by_index = {c["index"]: c for c in cases}
    if args.show:
        for case in cases:
            print(f"# seed {args.seed} case {case['index']}: {case['kind']} {case.get('base', '')}"
                  f" ({case['note']})")
            print(describe_case(case)["model"] if case["model"] is not None else "(no case)")
            print("inputs:", describe_case(case)["inputs"] if case["model"] is not None else [])
        return 0
    threads = args.threads or max(2, (os.cpu_count() or 1) // max(1, args.jobs))
    os.environ.setdefault("NUMBA_NUM_THREADS", str(threads))   # the spawned workers read it
    done_results = []
    last_write = [time.monotonic()]

    def write_json(complete):
        if args.json:
            _write_json(args.json, args, done_results, by_index, time.monotonic() - start,
                        complete)
            last_write[0] = time.monotonic()

    def progress(result, done, total):
        done_results.append(result)
        finding = result["outcome"] in FINDINGS
        if args.verbose or finding or done % 50 == 0:
            print(f"[{done}/{total}] #{result['index']} {result['kind']:6} {result['base']}: "
                  f"{result['outcome']} {result['detail'][:200]}  ({result['mutation'][:120]})",
                  flush=True)
            if finding:
                print(f"    rerun: {rerun_command(args.seed, result['index'])}", flush=True)
        if finding and args.verbose and result.get("traceback"):
            print(result["traceback"], flush=True)
        if finding and args.save:
            _save(args.save, by_index[result["index"]], result)
        if time.monotonic() - last_write[0] > 60:
            write_json(False)

    try:
        results = run_cases(cases, args.jobs, args.timeout, args.prepare_timeout,
                            quiet=not args.verbose, progress=progress, budget=args.budget)
    except KeyboardInterrupt:
        write_json(False)
        print(f"interrupted after {len(done_results)} cases"
              + (f"; what ran is in {args.json}" if args.json else ""))
        return 130
    done_results[:] = results
    counts = summarize(results)
    seconds = time.monotonic() - start
    print(f"onnxjit fuzz: seed {args.seed}, {len(results)} cases "
          f"{'(' + ', '.join(map(str, args.case)) + ')' if args.case else f'from {args.start}'}, "
          f"{args.jobs} worker(s) of {os.environ['NUMBA_NUM_THREADS']} thread(s), {seconds:.0f} s")
    for outcome in OUTCOMES:
        print(f"  {outcome:14} {counts.get(outcome, 0)}")
    write_json(len(results) == len(cases))
    return 1 if any(counts.get(k) for k in FINDINGS) else 0


def rerun_command(seed, index):
    """The command that runs case `index` of `seed` again, alone."""
    return f"python -m onnxjit.fuzz --seed {seed} --case {index} -v"


def describe_case(case):
    """The case's model as onnx.printer text and its inputs' shapes and dtypes."""
    import onnx
    model = onnx.ModelProto.FromString(case["model"])
    try:
        text = onnx.printer.to_text(model)
    except Exception as exc:       # noqa: BLE001  (a model the printer cannot print)
        text = f"(onnx.printer failed: {exc}) {model.graph.node}"
    return {"model": text[:8000],
            "inputs": [{"shape": list(a.shape), "dtype": str(a.dtype)} if isinstance(a, np.ndarray)
                       else {"type": type(a).__name__} for a in case["inputs"]]}


def summary(args, results, by_index, seconds, complete):
    """The --json document: the run's settings, counts of every outcome, findings, results."""
    counts = summarize(results)
    findings = []
    for r in results:
        if r["outcome"] in FINDINGS:
            case = by_index[r["index"]]
            findings.append(dict(r, seed=args.seed, rerun=rerun_command(args.seed, r["index"]),
                                 **describe_case(case)))
    return {"seed": args.seed, "start": args.start, "case_indices": args.case,
            "jobs": args.jobs, "timeout": args.timeout, "prepare_timeout": args.prepare_timeout,
            "cases": len(results), "complete": complete, "seconds": round(seconds, 1),
            "counts": {k: counts.get(k, 0) for k in OUTCOMES},
            "findings": findings, "results": results}


def _write_json(path, args, results, by_index, seconds, complete):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(summary(args, sorted(results, key=lambda r: r["index"]), by_index, seconds,
                          complete), f, indent=1)
    os.replace(tmp, path)


def _save(folder, case, result):
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"case{case['index']:06d}")
    with open(stem + ".onnx", "wb") as f:
        f.write(case["model"])
    np.savez(stem + ".npz", *case["inputs"])
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
