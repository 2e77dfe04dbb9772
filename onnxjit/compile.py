"""Compile: write generated source to the cache directory, import it, compile it eagerly."""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading

import numba
import numpy as np

_IMPORT_LOCK = threading.Lock()


def cache_dir():
    """Where generated modules and Numba's machine code live (ONNXJIT_CACHE_DIR overrides)."""
    path = os.environ.get("ONNXJIT_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxjit")
    os.makedirs(path, exist_ok=True)
    return path


def load_source(source):
    """Import `source` from `<cache>/m_<sha256>.py`, writing the file only if it is new."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:40]
    name = f"onnxjit_generated_{digest}"
    with _IMPORT_LOCK:
        if name in sys.modules:
            return sys.modules[name]
        path = os.path.join(cache_dir(), f"m_{digest}.py")
        if not _same_text(path, source):
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)     # atomic, so concurrent processes never read half a file
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module


def _same_text(path, source):
    try:
        with open(path) as f:
            return f.read() == source
    except OSError:
        return False


def numba_type(value):
    """The Numba array type of a Value (C-contiguous)."""
    from .ir import compute_dtype
    return numba.types.Array(numba.from_dtype(compute_dtype(value.dtype)), len(value.shape), "C")


def compile_segments(module, segments, params):
    """Compile every call the entry makes (see emit.Segment) for the types it will see, or load
    it from Numba's caches; the compiled entry points, in order.

    `params` maps the entry's parameters to Values (C-contiguous arrays); the types of the other
    variables are the return types of the calls that assign them, so a call reading a library
    kernel's result from the Python driver is compiled for exactly what that kernel returns.
    """
    known = {name: numba_type(v) for name, v in params.items()}
    entries = []
    for seg in segments:
        dispatcher = _callee(module, seg.name)
        signature = tuple(known[a] if a in known else numba.typeof(ast.literal_eval(a))
                          for a in seg.args) + _omitted(dispatcher, len(seg.args))
        if signature not in dispatcher.overloads:   # a module imported before is compiled
            # The same text can serve other argument types (e.g. weights of another dtype);
            # rep.run's fast path disables compiling on entries, so allow it for this call.
            dispatcher.disable_compile(False)
            dispatcher.compile(signature)
        overload = dispatcher.overloads[signature]
        if seg.targets:
            result = overload.signature.return_type
            known.update(zip(seg.targets, result.types if seg.unpack else [result]))
        entries.append(overload.entry_point)
    return entries


def _omitted(dispatcher, given):
    """The types of the parameters a call with `given` arguments leaves to their defaults, as
    Numba's dispatcher types them when Python makes the call."""
    params = list(inspect.signature(dispatcher.py_func).parameters.values())[given:]
    return tuple(numba.types.Omitted(p.default) for p in params)


def _callee(module, source):
    """The dispatcher `source` ("segment_0", "__k_pool.maxpool") names in `module`."""
    target = module
    for part in source.split("."):
        target = getattr(target, part)
    return target
