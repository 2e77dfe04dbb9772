"""ONNX Runtime's InferenceSession over onnxjit: `import onnxjit as ort` runs an ORT script.

A session prepares one OnnxJitRep (onnxjit/backend.py) for the model as ORT reads it
(session_model.runnable_model), checks feeds as ORT does, with ORT's messages, and runs the rep
with the session's Numba thread count. It pickles as its model bytes and options and rebuilds
lazily: a copy unpickled in another process compiles (or loads from the disk cache) on its first
run, so Dask or Ray can ship it to workers.
"""
from __future__ import annotations

import threading
import time

import numba
import numpy as np

from . import backend
from .errors import InputError
from .ir import tensor_dtype
from .session_model import ModelMetadata, describe, dtype_name, load, runnable_model
from .session_options import (CUDA, LOG_LEVELS, Fail, InvalidArgument, copy_options,
                              normalize_providers, ort_error, set_default_logger_severity)
from .session_profile import Profiler, compiled_graphs, write_optimized
from .session_values import IOBinding, OrtValue

# ORT's graph_optimization_level -> onnxjit's optimize level (pipeline.OPTIMIZE): disabled, no
# rewrite at all (each node its own kernel); basic, elementwise fusion without the peepholes
# that fold nodes into others (BatchNormalization into Conv, Add and Relu into a GEMM's epilogue);
# extended and all, everything.
OPTIMIZATION = {0: "none", 1: "basic", 2: "all", 99: "all"}


class InferenceSession:
    """ORT's InferenceSession (onnxruntime_inference_collection.py), compiled by onnxjit."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        self._setup(load(path_or_bytes), copy_options(sess_options), providers, provider_options)
        start = time.perf_counter()
        self._get_rep()                     # ORT prepares at creation; so does onnxjit
        if self._profiler is not None:
            self._profiler.event("session_initialization", start, time.perf_counter() - start)
        self._write_optimized()

    def _setup(self, model, options, providers, provider_options):
        """Everything but the rep (built by _get_rep, at creation or at an unpickled copy's
        first run)."""
        self._model, self._sess_options = model, options
        self._providers, self._provider_options = normalize_providers(providers, provider_options)
        self._device = "CUDA" if self._providers[0] == CUDA else "CPU"
        described = runnable_model(model, options._free_dims)
        self._inputs_meta, self._outputs_meta, self._overridable_initializers = describe(described)
        self._model_meta = ModelMetadata(model)
        self._run_model = runnable_model(model, options._free_dims, options._initializers,
                                         scalars=True)
        inits = {t.name for t in described.graph.initializer}
        specs = [(vi.name, tensor_dtype(vi.type.tensor_type.elem_type), _dims(vi))
                 for vi in described.graph.input]
        self._specs = [s for s in specs if s[0] not in inits]
        self._overridable = {s[0]: s for s in specs if s[0] in inits}
        self._input_names = [name for name, _, _ in self._specs]
        self._output_index = {a.name: i for i, a in enumerate(self._outputs_meta)}
        self._all_outputs = list(range(len(self._outputs_meta)))
        self._rep = self._override_rep = None
        self._rep_lock = threading.Lock()
        self._threads = max(0, int(options.intra_op_num_threads or 0))
        self._signatures_written = 0
        self._profiler = None
        if options.enable_profiling:
            self._profiler = Profiler(options.profile_file_prefix, self._providers[0])
        if options.log_severity_level in LOG_LEVELS:
            set_default_logger_severity(options.log_severity_level)

    def _prepare(self, model):
        config = self._sess_options._config
        tiered = config.get("onnxjit.tiered")
        return backend.prepare(
            model, self._device, profile=self._profiler is not None,
            max_signatures=int(config.get("onnxjit.max_signatures", backend.DEFAULT_MAX_SIGNATURES)),
            tiered=None if tiered is None else tiered not in ("0", "false", "False"),
            optimize=OPTIMIZATION[int(self._sess_options.graph_optimization_level)])

    def _get_rep(self, override=False):
        """The rep (built on first use), or with `override` the one taking the overridable
        initializers as inputs."""
        rep = self._override_rep if override else self._rep
        if rep is not None:
            return rep
        with self._rep_lock:
            if self._rep is None:
                self._rep = self._prepare(self._run_model)
            if override and self._override_rep is None:
                self._override_rep = self._prepare(runnable_model(
                    self._model, self._sess_options._free_dims, self._sess_options._initializers,
                    set(self._overridable), scalars=True))
            return self._override_rep if override else self._rep

    # -- pickling: the model's bytes and the options, rebuilt lazily ------------------------------
    def __getstate__(self):
        return {"model": self._model.SerializeToString(), "options": self._sess_options,
                "providers": list(zip(self._providers, self._provider_options))}

    def __setstate__(self, state):
        self._setup(load(state["model"]), state["options"], state["providers"], None)

    # -- metadata -------------------------------------------------------------------------------
    def get_session_options(self):
        return self._sess_options

    def get_inputs(self):
        return self._inputs_meta

    def get_outputs(self):
        return self._outputs_meta

    def get_overridable_initializers(self):
        return self._overridable_initializers

    def get_modelmeta(self):
        return self._model_meta

    def get_providers(self):
        return self._providers

    def get_provider_options(self):
        return dict(zip(self._providers, self._provider_options))

    def set_providers(self, providers=None, provider_options=None):
        """Choose providers again; the session prepares anew (as ORT re-creates its session)."""
        self._setup(self._model, self._sess_options, providers, provider_options)
        self._get_rep()

    def disable_fallback(self):
        """Nothing to disable: onnxjit falls back to the CPU only when a provider is missing."""

    def enable_fallback(self):
        """See disable_fallback."""

    @property
    def rep(self):
        """The OnnxJitRep behind this session (onnxjit's own API: wait(), source(), tier ...)."""
        return self._get_rep()

    # -- running --------------------------------------------------------------------------------
    def run(self, output_names, input_feed, run_options=None):
        """A list of numpy arrays, one per name in `output_names` (None or []: every output)."""
        return self._run_values(output_names, input_feed, run_options)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        return [OrtValue(a) for a in self._run_values(output_names, input_dict_ort_values,
                                                       run_options)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Run on another thread, then `callback(results, user_data, err)`: err is '' on success,
        else the error's message (and results [])."""
        self._check_missing(input_feed)

        def work():
            try:
                results = self._run_values(output_names, input_feed, run_options)
            except Exception as exc:        # reported to the callback, as ORT does
                callback([], user_data, str(exc))
                return
            callback(results, user_data, "")
        threading.Thread(target=work, name="onnxjit-run-async", daemon=True).start()

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        iobinding._run(run_options)

    def _check_missing(self, feed):
        missing = [n for n in self._input_names if n not in feed]
        if missing:
            raise InputError(f"Required inputs ({missing}) are missing from input feed "
                             f"({list(feed)}).")

    def _run_values(self, output_names, feed, run_options):
        if run_options is not None and run_options.terminate:
            raise ort_error(Fail, "Exiting due to terminate flag being set to true.")
        self._check_missing(feed)
        arrays = [_checked(feed[name], name, dtype, dims) for name, dtype, dims in self._specs]
        overrides = None
        if len(feed) != len(arrays):
            overrides = self._overrides(feed)
        indices = self._indices(output_names)
        outs = self._call(arrays, overrides)
        return [outs[i] for i in indices]

    def _overrides(self, feed):
        """{name: array} of the overridable initializers `feed` gives; unknown names are errors."""
        overrides = {}
        for name, value in feed.items():
            if name in self._input_names:
                continue
            if name not in self._overridable:
                raise ort_error(InvalidArgument, f"Invalid input name: {name}")
            overrides[name] = _checked(value, *self._overridable[name])
        return overrides

    def _indices(self, output_names):
        if not output_names:
            return self._all_outputs
        try:
            return [self._output_index[n] for n in output_names]
        except (KeyError, TypeError):
            bad = next(n for n in output_names if n not in self._output_index)
            raise ort_error(InvalidArgument, f"Invalid output name:{bad}") from None

    def _call(self, arrays, overrides):
        if overrides:
            rep = self._get_rep(override=True)
            given = dict(zip(self._input_names, arrays))
            defaults = {t.name: t for t in self._model.graph.initializer}
            feeds = [given[n] if n in given else overrides[n] if n in overrides
                     else _initializer(defaults[n], self._sess_options._initializers)
                     for n in rep.input_names]
        else:
            rep, feeds = self._rep or self._get_rep(), arrays
        if self._profiler is not None:
            outs = self._profiler.run(lambda: self._with_threads(rep, feeds), rep)
        else:
            outs = self._with_threads(rep, feeds)
        if self._sess_options.optimized_model_filepath and rep is self._rep and \
                len(compiled_graphs(rep)) != self._signatures_written:
            self._write_optimized()
        return outs

    def _with_threads(self, rep, feeds):
        """rep.run(feeds) on this session's intra_op_num_threads Numba threads (Numba's thread
        count is per calling thread, so concurrent sessions do not disturb each other)."""
        wanted = self._threads
        if not wanted:
            return rep.run(feeds)
        wanted = min(wanted, numba.config.NUMBA_NUM_THREADS)
        previous = numba.get_num_threads()
        if previous == wanted:
            return rep.run(feeds)
        numba.set_num_threads(wanted)
        try:
            return rep.run(feeds)
        finally:
            numba.set_num_threads(previous)

    # -- profiling and optimized-model output ----------------------------------------------------
    def end_profiling(self):
        """Write the profile (Chrome-trace JSON) and stop profiling; its path ('' when off)."""
        if self._profiler is None:
            return ""
        path, self._profiler = self._profiler.write(), None
        return path

    def get_profiling_start_time_ns(self):
        return self._profiler.start_ns if self._profiler is not None else 0

    def _write_optimized(self):
        path = self._sess_options.optimized_model_filepath
        if path and self._rep is not None:
            self._signatures_written = write_optimized(path, self._run_model, self._rep)

    def __repr__(self):
        return (f"<onnxjit.InferenceSession {self._model.graph.name!r} on {self._providers}, "
                f"inputs {self._input_names}>")


def _dims(value_info):
    """Declared dims to check a feed against; None where ORT checks nothing (no shape, or a
    declared scalar: ORT takes any tensor for one)."""
    tp = value_info.type
    if not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
            for d in tp.tensor_type.shape.dim]
    return dims or None


def _initializer(tensor, replaced):
    if tensor.name in replaced:
        value = replaced[tensor.name]
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    from onnx import numpy_helper
    return numpy_helper.to_array(tensor)


def _checked(value, name, dtype, dims):
    """`value` as an array, checked against the declared dtype and dims with ORT's messages."""
    if type(value) is not np.ndarray:
        value = _as_feed(value, dtype)
    if dtype is not None and value.dtype != dtype:
        raise ort_error(InvalidArgument, f"Unexpected input data type. Actual: "
                        f"({dtype_name(value.dtype)}) , expected: ({dtype_name(dtype)})")
    if dims is None:
        return value
    shape = value.shape
    if len(shape) != len(dims):
        raise ort_error(InvalidArgument, f"Invalid rank for input: {name} Got: {len(shape)} "
                        f"Expected: {len(dims)} Please fix either the inputs/outputs or the model.")
    wrong = [(i, n, d) for i, (n, d) in enumerate(zip(shape, dims)) if d is not None and n != d]
    if wrong:
        lines = "".join(f"\n index: {i} Got: {n} Expected: {d}" for i, n, d in wrong)
        raise ort_error(InvalidArgument, f"Got invalid dimensions for input: {name} for the "
                        f"following indices{lines}\n Please fix either the inputs/outputs or the model.")
    return value


def _as_feed(value, dtype):
    """What ORT makes of a feed that is not an ndarray: an OrtValue's tensor, a list of numbers
    in the declared dtype; anything else (a Python or numpy scalar ...) is refused."""
    if isinstance(value, OrtValue):
        return value._value
    if isinstance(value, np.ndarray):       # a subclass
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        return np.asarray(value, dtype=dtype)
    raise RuntimeError(f"Unable to handle object of type {type(value)}")
