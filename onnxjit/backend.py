"""The ONNX backend API: `prepare`, `run_model`, `run_node`, `supports_device`, `is_compatible`."""
from __future__ import annotations

import operator
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from . import staged
from .errors import DataDependent, InputError, ModelError, NeedsInputValue, UnsupportedOpError
from .ir import input_specs, load_model
from .pipeline import OPTIMIZE, compile_model
from .staged import unsupported_ops
from .tiers import COMPILED, REFERENCE, BackgroundCompile, tiered_default
from .validate import _current_limit as element_limit, check_model

DEFAULT_MAX_SIGNATURES = 32
# The keyword options of prepare (and run_model, run_node): CPU and CUDA ones (cuda_graphs,
# lazy); run_node's opset_version builds its model.
PREPARE_OPTIONS = frozenset({"max_signatures", "profile", "tiered", "progress", "optimize",
                             "max_elements", "max_nesting", "cuda_graphs", "lazy",
                             "opset_version"})


class OnnxJitRep(BackendRep):
    """A prepared model: compiled entries keyed by input signature (shapes and dtypes)."""

    staging = True   # a data-dependent shape met at run time hands the model to staged.py

    def __init__(self, model, device="CPU", max_signatures=DEFAULT_MAX_SIGNATURES, profile=False,
                 tiered=None, progress=None, lazy=False, optimize="all", max_elements=None):
        self.model = model
        self.max_elements = max_elements   # validate.py's element limit (None: the environment's)
        self.profiling = profile
        if optimize not in OPTIMIZE:
            raise ValueError(f"optimize={optimize!r}: expected one of {sorted(OPTIMIZE)}")
        self.optimize = optimize
        self.tiered = tiered_default() if tiered is None else bool(tiered)
        self.progress = progress
        self._jobs = []               # BackgroundCompile of signatures on the reference tier
        self.device = device
        self.max_signatures = max_signatures
        inits = {t.name for t in model.graph.initializer}
        self.inputs = input_specs(model.graph, inits)
        self.input_names = [s.name for s in self.inputs]
        self.output_names = [o.name for o in model.graph.output]
        self._outputs = namedtupledict("Outputs", self.output_names)
        self._n_inputs = len(self.inputs)
        self._value_inputs = []   # inputs whose contents are part of the signature (shapes ...)
        self._cache = OrderedDict()   # (shape, dtype) per input [+ value bytes] -> CompiledGraph
        self._fast = {}               # _array_key per input [+ value bytes] -> CompiledGraph
        self._hot = None              # (guarded, weights) of the latest CompiledGraph, if usable:
        # one tuple, swapped whole, so a thread never pairs one graph's code with another's weights
        self._hot_misses = 0
        self._lock = threading.Lock()
        self._staged = None           # staged.StagedRep, once a data-dependent shape was met
        self.hits = self.misses = 0
        self.compile_seconds = 0.0
        if not lazy and all(s.is_static() and s.dtype is not None for s in self.inputs):
            self._compile(tuple((s.name, s.dims, s.dtype) for s in self.inputs), None)

    # -- the hot path: a dictionary lookup and one compiled call --------------------------------
    def run(self, inputs, **kwargs):
        hot = self._hot
        if hot is not None and type(inputs) is list:
            # Hottest path: the latest compiled module's dispatcher checks dtypes, ranks and
            # layouts in C, and its first statement the shapes (None when they differ).
            fn, weights = hot
            try:
                outs = fn(*inputs, *weights)
            except (TypeError, ValueError):    # no matching types: take the checked path
                outs = None
                self._hot_misses += 1          # Numba's mismatch error is slow (~0.1 ms):
                if self._hot_misses > 8:       # callers that keep missing lose this path
                    self._hot = None
            if outs is not None:
                self.hits += 1
                return _new_tuple(self._outputs, outs)
        if type(inputs) is list:
            # Hot path: a list of arrays whose (class, shape, dtype, strides) were seen before.
            # Equal strides mean equal contiguity, so a hit needs no further checks.
            try:
                key = tuple(map(_array_key, inputs))
                if self._value_inputs:
                    key += tuple([inputs[i].tobytes() for i in self._value_inputs])
            except (AttributeError, IndexError):
                key = None
            compiled = self._fast.get(key)
            if compiled is not None:
                self.hits += 1
                return _new_tuple(self._outputs, compiled.fn(*inputs, *compiled.weights))
        return self._run_checked(inputs)

    def _run_checked(self, inputs):
        """Convert and check the inputs, then run (compiling on a miss); remembers the fast key."""
        if self._staged is not None:
            return self._staged.run(inputs)
        arrays = self._arrays(inputs)
        key = tuple([(a.shape, a.dtype) for a in arrays])
        if self._value_inputs:
            key += tuple([arrays[i].tobytes() for i in self._value_inputs])
        compiled = self._cache.get(key)
        if compiled is None:
            try:
                compiled = self._miss(key, arrays)
            except DataDependent:    # a data-dependent shape met at run time: staged.py
                if not self.staging:
                    raise
                if self._staged is None:
                    self._staged = staged.prepare_staged(self.model, self._options())
                return self._staged.run(arrays)
        else:
            self.hits += 1
        fast = tuple(map(_array_key, arrays)) + key[self._n_inputs:]
        if self._fast.get(fast) is not compiled:   # copy on write: other threads iterate it
            table = {} if len(self._fast) >= 4 * self.max_signatures else dict(self._fast)
            table[fast] = compiled
            self._fast = table
        return _new_tuple(self._outputs, compiled.fn(*arrays, *compiled.weights))

    def _options(self):
        return dict(max_signatures=self.max_signatures, profile=self.profiling,
                    tiered=self.tiered, progress=self.progress, optimize=self.optimize,
                    max_elements=self.max_elements)

    def _arrays(self, inputs):
        if isinstance(inputs, dict):
            inputs = self._from_dict(inputs)
        elif isinstance(inputs, np.ndarray) or np.isscalar(inputs):
            inputs = [inputs]
        if len(inputs) != len(self.inputs):
            raise InputError(f"the model takes {len(self.inputs)} input(s) {self.input_names}, "
                             f"got {len(inputs)}")
        # Compiled code is typed for writeable C arrays: others are copied (Numba types read-only
        # arrays apart, so a driver's segments would otherwise compile again for them).
        return [a if type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
                and a.dtype.kind not in "US" else _as_array(a, s.name)
                for a, s in zip(inputs, self.inputs)]

    def _from_dict(self, feeds):
        unknown = sorted(set(feeds) - set(self.input_names))
        missing = [n for n in self.input_names if n not in feeds]
        if unknown or missing:
            raise InputError(f"inputs by name: unknown {unknown}, missing {missing}; "
                             f"the model's inputs are {self.input_names}")
        return [feeds[n] for n in self.input_names]

    # -- misses ---------------------------------------------------------------------------------
    def _miss(self, key, arrays):
        for a, spec in zip(arrays, self.inputs):
            _check_input(a, spec)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                self.misses += 1
                signature = tuple((s.name, a.shape, a.dtype) for s, a in zip(self.inputs, arrays))
                compiled = self._compile(signature, arrays)
            return compiled

    def _compile(self, signature, arrays):
        """Compile for a signature; with `arrays` (None at prepare) inputs used as shapes are
        read and become part of the key. None when compiling must wait for input values."""
        label = self.model.graph.name or "model"
        while True:
            values = {self.input_names[i]: arrays[i] for i in self._value_inputs} if arrays else {}
            limit = element_limit.set(self.max_elements)
            try:
                compiled = compile_model(self.model, signature, label, self.profiling, values,
                                         cached_only=self.tiered, progress=self.progress,
                                         optimize=self.optimize)
                break
            except NeedsInputValue as need:
                index = self.input_names.index(need.name)
                if index in self._value_inputs:
                    raise
                self._value_inputs.append(index)
                if arrays is None:
                    return None
            finally:
                element_limit.reset(limit)
        key = tuple((tuple(shape), np.dtype(dtype)) for _, shape, dtype in signature)
        if arrays is not None:
            key += tuple(arrays[i].tobytes() for i in self._value_inputs)
        # Evict before inserting: threads reading the cache never see more than max_signatures.
        while self._cache and len(self._cache) >= self.max_signatures and key not in self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._fast = {k: c for k, c in self._fast.items() if c is not evicted}
        self._cache[key] = compiled
        self.compile_seconds += compiled.compile_seconds
        self._set_hot(compiled)
        if compiled.tier != COMPILED:
            job = BackgroundCompile(
                self.model, signature, values, label,
                {"profile": self.profiling, "optimize": self.optimize},
                lambda done: self._promote(key, compiled, done), self.progress)
            self._jobs.append(job)
            if compiled.tier == REFERENCE:
                compiled.fn = _reference_or_compiled(compiled.fn, job)
        return compiled

    def _set_hot(self, compiled):
        usable = compiled.guarded is not None and not self._value_inputs
        self._hot = (compiled.guarded, compiled.weights) if usable else None
        self._hot_misses = 0

    def _promote(self, key, reference, compiled):
        """Put the compiled graph where the reference tier answered for `key` (tiers.py)."""
        with self._lock:
            if self._cache.get(key) is not reference:     # evicted meanwhile
                return
            self._cache[key] = compiled
            self._fast = {k: compiled if c is reference else c for k, c in self._fast.items()}
            self.compile_seconds += compiled.compile_seconds
            if next(reversed(self._cache)) == key:
                self._set_hot(compiled)

    # -- tiers ----------------------------------------------------------------------------------
    @property
    def tier(self):
        """'compiled', or 'reference' while onnx's evaluator answers for the latest signature
        and its optimized code compiles in the background (see tiers.py); None before any."""
        return next(reversed(self._cache.values())).tier if self._cache else None

    def wait(self, timeout=None):
        """Block until every signature's optimized code is in place (True), or `timeout` seconds
        pass (False); raises what stopped a background compile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in list(self._jobs):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not job.wait(left):
                return False
        return True

    # -- inspection -----------------------------------------------------------------------------
    def signatures(self):
        """The input signatures compiled so far, oldest first."""
        return [c.signature for c in self._cache.values()]

    def compiled(self, signature=None):
        """The CompiledGraph for a signature [(shape, dtype) per input] (default: the most recent)."""
        if not self._cache:
            raise LookupError("nothing compiled yet: run the model once, or give static input shapes")
        if signature is None:
            return next(reversed(self._cache.values()))
        wanted = [(tuple(s), np.dtype(d)) for s, d in signature]
        for c in self._cache.values():
            if [(tuple(s), np.dtype(d)) for _, s, d in c.signature] == wanted:
                return c
        raise LookupError(f"no compiled entry for signature {signature}")

    def source(self, signature=None):
        """The generated Python module for a signature (default: the most recent)."""
        return self.compiled(signature).source

    def cache_info(self):
        """Signatures kept, hits, misses and total compile seconds."""
        return {"signatures": len(self._cache), "max_signatures": self.max_signatures,
                "hits": self.hits, "misses": self.misses,
                "compile_seconds": round(self.compile_seconds, 3), "tier": self.tier}

    def explain(self, signature=None):
        """The fusion plan of a signature (default: the most recent): rows that print as a table."""
        from .explain import explain
        return explain(self, signature)

    def reset_profile(self):
        """Forget the per-kernel times gathered so far (profile=True builds)."""
        for compiled in self._cache.values():
            if compiled.profile is not None:
                compiled.profile.clear()

    def _repr_html_(self):
        """Jupyter's rich view: model summary, cached signatures, fusion plan, generated source."""
        from .explain import to_html
        return to_html(self)

    def __repr__(self):
        return (f"<OnnxJitRep {self.model.graph.name or 'model'!r} on {self.device}: "
                f"{len(self._cache)} signature(s), {self.hits} hits, {self.misses} misses>")

    # -- pickling: a prepared model is data (model bytes + options) --------------------------------
    def __getstate__(self):
        """What a copy is rebuilt from; compiled code and caches stay behind (the progress
        callback too: it belongs to this process)."""
        return {"model": self.model.SerializeToString(), "device": self.device,
                "max_signatures": self.max_signatures, "profile": self.profiling,
                "tiered": self.tiered, "optimize": self.optimize,
                "max_elements": self.max_elements}

    def __reduce__(self):
        # The copy compiles on its first run, loading machine code from the disk cache.
        return _unpickle_rep, (self.__getstate__(),)


def _unpickle_rep(state):
    return OnnxJitRep(onnx.ModelProto.FromString(state["model"]), state["device"],
                      state["max_signatures"], state["profile"], state["tiered"], lazy=True,
                      optimize=state.get("optimize", "all"),
                      max_elements=state.get("max_elements"))


# What the hot path keys on: exact class (ndarray, not a subclass or numpy scalar), shape, dtype,
# strides (which fix contiguity) and writeability.  Entries are made only from converted, C-contiguous arrays.
_array_key = operator.attrgetter("__class__", "shape", "dtype", "strides", "flags.writeable")
_new_tuple = tuple.__new__   # builds the namedtupledict without its Python-level __new__


def _reference_or_compiled(reference, job):
    """The reference tier's runner (tiers.py); where onnx's evaluator raises on a model the
    compiled code runs (its ReduceMin refuses repeated axes, which ONNX Runtime and onnxjit
    take as one), the run waits for the background compile and answers with the compiled
    graph: the answer, or the clear error, a rep without tiers gives."""
    def run(*arrays):
        try:
            return reference(*arrays)
        except Exception:       # noqa: BLE001  (the compiled graph decides)
            job.wait()          # raises what stopped the compile
            done = job.result
            return done.fn(*arrays, *done.weights)
    return run


def _as_array(value, name):
    if isinstance(value, (list, tuple)) or value is None:
        raise InputError(f"input {name!r}: expected a tensor (numpy array), got "
                         f"{type(value).__name__}")
    array = np.asarray(value)
    if array.dtype.kind in "US":    # a string tensor, held as ONNX Runtime holds it
        array = array.astype(str).astype(object)
    elif isinstance(value, dict):   # a map (DictVectorizer), held in a 0-d object array
        array = np.empty((), object)
        array[()] = value
    elif array.dtype == object and not all(isinstance(s, str) for s in array.flat):
        raise InputError(f"input {name!r}: cannot use a {type(value).__name__} as a tensor "
                         "(an object array must hold strings)")
    return np.require(array, requirements=["C", "W"]) if array.ndim else array.copy()


def _check_input(array, spec):
    if spec.dtype is not None and array.dtype != spec.dtype:
        raise InputError(f"input {spec.name!r}: expected dtype {spec.dtype}, got {array.dtype}")
    if spec.dims is None:
        return
    if len(spec.dims) != array.ndim or any(
            isinstance(d, int) and d != n for d, n in zip(spec.dims, array.shape)):
        declared = [d if isinstance(d, int) else (d or "?") for d in spec.dims]
        raise InputError(f"input {spec.name!r}: expected shape {declared}, got {list(array.shape)}")


class OnnxJitBackend(Backend):
    """onnxjit as an `onnx.backend.base.Backend`."""

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        model = load_model(model)
        _check_device(device)
        unknown = sorted(set(kwargs) - PREPARE_OPTIONS)
        if unknown:     # a misspelt option would otherwise be ignored without a word
            warnings.warn(f"onnxjit prepare: unknown option(s) {', '.join(unknown)} ignored; "
                          f"the options are {', '.join(sorted(PREPARE_OPTIONS))}", stacklevel=2)
        if _is_cuda(device):    # the CUDA target (onnxjit/cuda)
            from .cuda import prepare_cuda
            return prepare_cuda(model, device, **kwargs)
        if not model.HasField("graph"):
            raise ModelError("the model has no graph")
        missing = unsupported_ops(model)
        if missing:
            names = ", ".join(f"{d}::{op} (opset {v})" for d, op, v in missing)
            raise UnsupportedOpError(f"onnxjit cannot lower: {names}", missing)
        check_model(model, kwargs.get("max_elements"), kwargs.get("max_nesting"))   # validate.py
        options = dict(max_signatures=kwargs.get("max_signatures", DEFAULT_MAX_SIGNATURES),
                       profile=bool(kwargs.get("profile", False)), tiered=kwargs.get("tiered"),
                       progress=kwargs.get("progress"), optimize=kwargs.get("optimize", "all"),
                       max_elements=kwargs.get("max_elements"))
        if staged.needs_staging(model.graph):    # sequences, data-dependent shapes: staged.py
            return staged.prepare_staged(model, options)
        try:
            return OnnxJitRep(model, device, **options)
        except DataDependent:
            return staged.prepare_staged(model, options)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        model = _single_node_model(node, inputs, kwargs.get("opset_version"))
        return cls.prepare(model, device, **kwargs).run(
            [np.asarray(a) for a in inputs if a is not None])

    @classmethod
    def supports_device(cls, device):
        try:
            if Device(device).type == DeviceType.CUDA:
                from .cuda import supports_cuda_device
                return supports_cuda_device(device)
            return Device(device).type == DeviceType.CPU
        except Exception:
            return False

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        try:
            model = load_model(model)
        except ModelError:
            return False
        if _is_cuda(device):
            from .cuda import unsupported as unsupported_on_cuda
            return cls.supports_device(device) and not unsupported_on_cuda(model)
        return cls.supports_device(device) and not unsupported_ops(model)

    @classmethod
    def is_opset_supported(cls, model):
        """(True, "") when onnxjit knows every domain and opset version `model` imports, else
        (False, a reason naming each one it does not know) — mlprodict's backend API."""
        problems = _opset_problems(load_model(model))
        return not problems, "; ".join(problems)


def _opset_problems(model):
    """Each opset import of `model` whose domain onnxjit has no lowerings in, or whose version
    is newer than the onnx package onnxjit builds on defines."""
    from . import ops, registry  # noqa: F401  (registers the lowerings)
    known = {d for d, _ in registry.registered_ops()} | {""}
    try:
        newest = {d: hi for d, (_, hi) in onnx.defs.C.schema_version_map().items()}
    except AttributeError:
        newest = {"": onnx.defs.onnx_opset_version()}
    problems = []
    for entry in model.opset_import:
        domain = "" if entry.domain in ("", "ai.onnx") else entry.domain
        label = entry.domain or "ai.onnx"
        if domain not in known:
            problems.append(f"domain {label!r} (opset {entry.version}) is not known to onnxjit")
        elif domain in newest and entry.version > newest[domain]:
            problems.append(f"{label} opset {entry.version} is newer than the {newest[domain]} "
                            f"onnxjit knows (onnx {onnx.__version__})")
    return problems


def _check_device(device):
    try:
        parsed = Device(device)
    except Exception:
        raise ValueError(f"cannot parse device {device!r} (expected 'CPU' or 'CUDA:<n>')") from None
    if parsed.type == DeviceType.CUDA:
        from .cuda.target import check_available
        check_available(device)     # a clear error naming the device when it cannot run here
    elif parsed.type != DeviceType.CPU:
        raise ValueError(f"device {device!r} is not supported: onnxjit compiles for CPU and CUDA")


def _is_cuda(device):
    try:
        return Device(device).type == DeviceType.CUDA
    except Exception:
        return False


def _single_node_model(node, inputs, opset=None):
    """A one-node model whose inputs have the given arrays' dtypes and shapes."""
    arrays = [None if a is None else np.asarray(a) for a in inputs]
    names = [n for n, a in zip(node.input, arrays) if n and a is not None]
    feeds = [a for n, a in zip(node.input, arrays) if n and a is not None]
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in zip(names, feeds)]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
    version = opset or onnx.defs.onnx_opset_version()
    imports = [helper.make_opsetid(node.domain or "", version)]
    return helper.make_model(graph, opset_imports=imports)


prepare = OnnxJitBackend.prepare
run_model = OnnxJitBackend.run_model
run_node = OnnxJitBackend.run_node
supports_device = OnnxJitBackend.supports_device
is_compatible = OnnxJitBackend.is_compatible
is_opset_supported = OnnxJitBackend.is_opset_supported


def list_unsupported(model):
    """Public helper: the (domain, op_type, opset) triples in `model` that have no lowering."""
    return unsupported_ops(load_model(model))
