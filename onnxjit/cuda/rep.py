"""The CUDA BackendRep: executables keyed by input signature, host or device inputs."""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np
from onnx.backend.base import BackendRep, namedtupledict

from ..errors import InputError, NeedsInputValue
from ..ir import Value, input_specs
from ..plan import plan
from ..validate import _current_limit as element_limit
from . import launch as _launch
from .lower import specialize_cuda
from .runtime import Executable, check_errors, describe
from .target import is_device_array


class CudaRep(BackendRep):
    """A model prepared for a CUDA device.

    `run(inputs)`: numpy inputs are copied in and the outputs come back as fresh numpy arrays;
    when any input is a device array (`__cuda_array_interface__`: Numba, CuPy, PyTorch), the
    outputs are device arrays on `self.stream`, views of the signature's output buffers that
    the next run overwrites (see cuda/runtime.py for the synchronization rules).
    """

    def __init__(self, model, device, target, max_signatures=32, graphs=None, lazy=False,
                 max_elements=None):
        from numba import cuda
        self.model, self.device, self.target = model, device, target
        self.max_signatures = max_signatures
        self.max_elements = max_elements   # validate.py's element limit (None: the environment's)
        self.graphs = (os.environ.get("ONNXJIT_CUDA_GRAPHS", "1") != "0" if graphs is None
                       else bool(graphs))
        with cuda.gpus[target.index]:
            self.stream = cuda.stream()
            self._error_flag = cuda.to_device(np.zeros(1, np.int32))
            self._ctx, self._get_ctx = _context_probe(target)
        inits = {t.name for t in model.graph.initializer}
        self.inputs = input_specs(model.graph, inits)
        self.input_names = [s.name for s in self.inputs]
        self.output_names = [o.name for o in model.graph.output]
        self._outputs = namedtupledict("Outputs", self.output_names)
        self._cache = OrderedDict()
        self._lock = threading.RLock()
        self._pending_check = None
        self._value_inputs = []   # inputs whose contents are part of the signature (shapes ...)
        self.hits = self.misses = 0
        self.compile_seconds = 0.0
        if not lazy and all(s.is_static() and s.dtype is not None for s in self.inputs):
            with cuda.gpus[target.index]:
                self._compile(tuple((tuple(s.dims), np.dtype(s.dtype)) for s in self.inputs))

    # -- running -----------------------------------------------------------------------------------
    def run(self, inputs, **kwargs):
        arrays = self._arrays(inputs)
        key, device_mode = self._key(arrays)
        with self._lock:
            exe = self._cache.get(key)
            if exe is not None and self._ctx is not None and int(self._get_ctx()[1]) == self._ctx:
                return self._run(exe, key, arrays, device_mode)
            from numba import cuda
            with cuda.gpus[self.target.index]:
                return self._run(exe, key, arrays, device_mode)

    def _run(self, exe, key, arrays, device_mode):
        if exe is None:
            self._check(key)
            exe = self._compile(key, arrays)
        else:
            self.hits += 1
            self._cache.move_to_end(key)
        if device_mode:
            exe.run_device(arrays)
            self._pending_check = exe if exe.checks_bounds else None
            return exe.results
        exe.fill_host(arrays)
        exe.launch()
        return self._outputs(*exe.read_host())

    def _key(self, arrays):
        """((shape, dtype) per input, then the contents of inputs used as shapes or axes),
        and whether any input is a device array."""
        key, device_mode = [], False
        for a in arrays:
            if type(a) is np.ndarray:
                key.append((a.shape, a.dtype))
            else:
                key.append(describe(a))
                device_mode = True
        key = tuple(key)
        if self._value_inputs:
            key += tuple(_host(arrays[i]).tobytes() for i in self._value_inputs)
        return key, device_mode

    def synchronize(self):
        """Wait for every launch of this rep; raise if a Gather met an index out of range."""
        self.stream.synchronize()
        exe, self._pending_check = self._pending_check, None
        if exe is not None:
            check_errors(exe)

    def _arrays(self, inputs):
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - set(self.input_names))
            missing = [n for n in self.input_names if n not in inputs]
            if unknown or missing:
                raise InputError(f"inputs by name: unknown {unknown}, missing {missing}; "
                                 f"the model's inputs are {self.input_names}")
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray) or is_device_array(inputs) or np.isscalar(inputs):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise InputError(f"the model takes {len(self.inputs)} input(s) {self.input_names}, "
                             f"got {len(inputs)}")
        from ..backend import _as_array
        return [a if type(a) is np.ndarray or is_device_array(a) else _as_array(a, s.name)
                for a, s in zip(inputs, self.inputs)]

    def _check(self, key):
        from types import SimpleNamespace
        from ..backend import _check_input
        for (shape, dtype), spec in zip(key, self.inputs):
            _check_input(SimpleNamespace(shape=shape, dtype=dtype, ndim=len(shape)), spec)

    def _compile(self, key, arrays=None):
        """Compile for `key`; with `arrays` (None at prepare), inputs used as shapes or axes are
        read and become part of the key. None when compiling must wait for their values."""
        start = time.perf_counter()
        while True:
            consts = {i: _host(arrays[i]) for i in self._value_inputs} if arrays else {}
            values = [Value(tuple(shape), dtype, const=consts.get(i), name=s.name)
                      for i, (s, (shape, dtype)) in enumerate(zip(self.inputs, key))]
            limit = element_limit.set(self.max_elements)
            try:
                program = specialize_cuda(self.model, values)
                break
            except NeedsInputValue as need:
                index = self.input_names.index(need.name)
                if index in self._value_inputs:
                    raise
                self._value_inputs.append(index)
                if arrays is None:
                    return None
                key = self._key(arrays)[0]
            finally:
                element_limit.reset(limit)
        kernels = plan(program)
        launches, aliases = _launch.build(kernels, self.target)
        exe = Executable(program, launches, aliases, self.target, self.stream, self._error_flag,
                         self.graphs)
        exe.results = self._outputs(*exe.out_views)
        exe.kernels = kernels
        exe.signature = tuple((s.name, shape, dtype) for s, (shape, dtype) in zip(self.inputs, key))
        exe.compile_seconds = time.perf_counter() - start
        self.misses += 1
        self.compile_seconds += exe.compile_seconds
        self._cache[key] = exe
        while len(self._cache) > self.max_signatures:
            self._cache.popitem(last=False)
        return exe

    # -- inspection --------------------------------------------------------------------------------
    def compiled(self, signature=None):
        """The Executable of a signature [(shape, dtype) per input] (default: the most recent)."""
        if not self._cache:
            raise LookupError("nothing compiled yet: run the model once, or give static input "
                              "shapes")
        if signature is None:
            return next(reversed(self._cache.values()))
        wanted = [(tuple(s), np.dtype(d)) for s, d in signature]
        for exe in self._cache.values():
            if [(tuple(s), np.dtype(d)) for _, s, d in exe.signature] == wanted:
                return exe
        raise LookupError(f"no compiled entry for signature {signature}")

    def signatures(self):
        return [exe.signature for exe in self._cache.values()]

    def source(self, signature=None):
        """The launch schedule (kernels, grids, blocks, arguments) then the generated kernels."""
        from .listing import listing
        return listing(self.compiled(signature))

    def explain(self, signature=None):
        """One row per launch: name, kernel, grid, block, ONNX nodes."""
        from .listing import explain
        return explain(self.compiled(signature))

    def cache_info(self):
        return {"signatures": len(self._cache), "max_signatures": self.max_signatures,
                "hits": self.hits, "misses": self.misses,
                "compile_seconds": round(self.compile_seconds, 3), "tier": "compiled",
                "device": self.device, "simulator": self.target.simulated,
                "cuda_graphs": [exe.graph is not None for exe in self._cache.values()]}

    @property
    def tier(self):
        return "compiled" if self._cache else None

    def wait(self, timeout=None):
        """Compilation is synchronous on CUDA: nothing to wait for."""
        return True

    def _repr_html_(self):
        import html
        if not self._cache:
            return html.escape(repr(self))
        return f"<pre>{html.escape(self.source())}</pre>"

    def __repr__(self):
        return (f"<CudaRep {self.model.graph.name or 'model'!r} on {self.device}"
                f"{' (simulator)' if self.target.simulated else ''}: {len(self._cache)} "
                f"signature(s), {self.hits} hits, {self.misses} misses>")


    # -- pickling: a prepared model is data (model bytes + options) --------------------------------
    def __getstate__(self):
        """What a copy is rebuilt from: device buffers, kernels and graphs stay behind."""
        return {"model": self.model.SerializeToString(), "device": self.device,
                "max_signatures": self.max_signatures, "graphs": self.graphs,
                "max_elements": self.max_elements}

    def __reduce__(self):
        # The copy compiles on its first run (kernels load from Numba's disk cache).
        return _unpickle_cuda_rep, (self.__getstate__(),)


def _unpickle_cuda_rep(state):
    import onnx
    from . import prepare_cuda
    return prepare_cuda(onnx.ModelProto.FromString(state["model"]), state["device"],
                        max_signatures=state["max_signatures"], cuda_graphs=state["graphs"],
                        lazy=True, max_elements=state.get("max_elements"))


def _context_probe(target):
    """(handle of the current CUDA context, a function returning the current one) on a GPU,
    so runs skip entering the device when its context is current already; (None, None)
    under the simulator."""
    if target.simulated:
        return None, None
    try:
        from cuda.bindings.driver import cuCtxGetCurrent
        from numba import cuda
        return int(cuda.current_context().handle), cuCtxGetCurrent
    except Exception:
        return None, None


def _host(array):
    """A numpy copy of a (small) host or device array: inputs used as shapes or axes."""
    if type(array) is np.ndarray or not is_device_array(array):
        return np.asarray(array)
    if not hasattr(array, "copy_to_host"):
        from numba import cuda
        array = cuda.as_cuda_array(array)
    return array.copy_to_host()
