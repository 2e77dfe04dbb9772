"""Compile: write generated source to the cache directory, import it, compile it eagerly."""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading
import time
import warnings

import numba
from numba.core.compiler_lock import global_compiler_lock

from .kernels import callees as callee_code
from .kernels import parallel as _parallel  # noqa: F401  (installs Numba's compile-time patches)

# Re-entrant: importing a module imports the fused kernels it names (load_kernel).
_IMPORT_LOCK = threading.RLock()


class CacheWarning(RuntimeWarning):
    """A cache file could not be read or written: onnxjit compiles again or keeps code in memory."""


def cache_warning(message):
    warnings.warn(message, CacheWarning, stacklevel=3)


def cache_dir():
    """Where generated modules and Numba's machine code live (ONNXJIT_CACHE_DIR overrides); a
    private temporary folder (fallback_cache_dir) when it cannot be created."""
    path = os.environ.get("ONNXJIT_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxjit")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        return fallback_cache_dir(path, exc)
    return path


_FALLBACK = {}


def fallback_cache_dir(path, error):
    """This process's own temporary folder, used where the cache dir `path` cannot be written (a
    read-only cache, a full disk): what is written there is not reused by the next process. A
    fresh folder (mkdtemp), never a guessable shared one: modules are imported from it."""
    with _IMPORT_LOCK:
        if "dir" not in _FALLBACK:
            _FALLBACK["dir"] = tempfile.mkdtemp(prefix="onnxjit-cache-")
            cache_warning(f"onnxjit cannot write its cache dir {path!r} ({error}); generated code "
                          f"goes to {_FALLBACK['dir']!r} for this process, and compiles again "
                          f"in the next one")
        return _FALLBACK["dir"]


def load_source(source, kernel_files=None):
    """Import `source` from `<cache>/m_<sha256>.py`, writing the file only if it is new.

    `kernel_files` {name: text} are the fused kernels it imports (load_kernel): each is written to
    `<cache>/<name>.py` first, where every module of every model that uses it finds it. A cache
    dir that cannot be written (read-only, full) leaves them in fallback_cache_dir instead.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:40]
    name = f"onnxjit_generated_{digest}"
    with _IMPORT_LOCK:
        if name in sys.modules:
            return sys.modules[name]
        folder = cache_dir()
        files = {**{f"{k}.py": text for k, text in (kernel_files or {}).items()},
                 f"m_{digest}.py": source}
        try:
            for file, text in files.items():
                _write_once(os.path.join(folder, file), text)
        except OSError as exc:
            folder = fallback_cache_dir(folder, exc)
            for file, text in files.items():
                _write_once(os.path.join(folder, file), text)
        return _import(name, os.path.join(folder, f"m_{digest}.py"))


def load_kernel(module_file, name):
    """The dispatcher of fused kernel `name` ("f_<hash>"), imported from `<name>.py` beside the
    generated module `module_file`. Its own file with `cache=True`: Numba's disk cache keeps its
    machine code for every model that uses it."""
    path = os.path.join(os.path.dirname(os.path.abspath(module_file)), f"{name}.py")
    module = f"onnxjit_fused_{name}_{hashlib.sha256(path.encode()).hexdigest()[:8]}"
    with _IMPORT_LOCK:
        if module not in sys.modules:
            if not os.path.exists(path):
                raise ImportError(f"fused kernel {path} is missing: prepare the model again")
            _import(module, path)
        return getattr(sys.modules[module], name)


def _write_once(path, text):
    """Write `text` to `path` unless it holds it already; atomically, so concurrent processes
    never read half a file."""
    if not _same_text(path, text):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)


def _import(name, path):
    for attempt in range(2):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            return module
        except BaseException as exc:
            del sys.modules[name]
            # a truncated or corrupted bytecode file beside the source: drop it, import again
            if attempt or not isinstance(exc, Exception) or not _drop_bytecode(path):
                raise


def _drop_bytecode(path):
    try:
        os.remove(importlib.util.cache_from_source(path))
    except (OSError, NotImplementedError, ValueError):
        return False
    cache_warning(f"dropped an unreadable bytecode file of {path}")
    return True


def _same_text(path, source):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == source
    except (OSError, ValueError):       # missing, unreadable, or not text (corrupted)
        return False


def numba_type(value):
    """The Numba array type of a Value (C-contiguous)."""
    from .ir import compute_dtype
    return numba.types.Array(numba.from_dtype(compute_dtype(value.dtype)), len(value.shape), "C")


def compile_segments(module, segments, params, cached_only=False, progress=None, claims=None):
    """Compile every call the entry makes (see emit.Segment) for the types it will see, or load
    it from Numba's caches; the compiled entry points, in order.

    `params` maps the entry's parameters to Values (C-contiguous arrays); the types of the other
    variables are the return types of the calls that assign them, so a call reading a library
    kernel's result from the Python driver is compiled for exactly what that kernel returns.
    With `cached_only`, None as soon as a call that is or links a library kernel (Segment.links)
    has no machine code in the caches: only the cheap generated code compiles.
    `progress(done, total, name)` hears of each call before it compiles. With `claims`, a call
    whose function another worker process compiles is loaded from the cache once it lands there.
    """
    known = {name: numba_type(v) for name, v in params.items()}
    entries, compiled = [], 0
    for i, seg in enumerate(segments):
        dispatcher = _callee(module, seg.name)
        signature = _signature(dispatcher, seg, known)
        if signature not in dispatcher.overloads and not load_cached(dispatcher, signature):
            if cached_only and seg.links:
                return None
            if progress is not None:
                progress(i, len(segments), seg.name)
            compiled += _compile_claimed(dispatcher, signature, claims)
        overload = dispatcher.overloads[signature]
        if seg.targets:
            result = overload.signature.return_type
            known.update(zip(seg.targets, result.types if seg.unpack else [result]))
        # a library kernel the driver calls may have been compiled as a callee (no machine code)
        entries.append(callee_code.entry_point(dispatcher, signature))
    if progress is not None and compiled:
        progress(len(segments), len(segments), "")
    return entries


def _compile_claimed(dispatcher, signature, claims):
    """Compile `dispatcher` for `signature`, unless another process holding its file's claim
    puts it in the cache first; 1 if this process compiled it, else 0."""
    claims = claims or Claims()
    while not claims.take(dispatcher):
        if load_cached(dispatcher, signature):
            return 0
        time.sleep(0.2)
    try:
        if load_cached(dispatcher, signature):
            return 0
        # The same text can serve other argument types (e.g. weights of another dtype);
        # rep.run's fast path disables compiling on entries, so allow it for this call.
        dispatcher.disable_compile(False)
        dispatcher.compile(signature)
        return 1
    finally:
        claims.release(dispatcher)


def _signature(dispatcher, seg, known):
    """The argument types of `seg`: variables' from `known` {name: Numba type}, numbers'
    (steps.Param) from their values, as Python passes them."""
    return tuple(known[a] if isinstance(a, str) else numba.typeof(a.value)
                 for a in seg.args) + _omitted(dispatcher, len(seg.args))


def _predicted_signature(dispatcher, seg, predicted):
    """The argument types of `seg` as the plan predicts them (see compile_ahead)."""
    return _signature(dispatcher, seg, predicted)


def library_calls_cached(module, segments, values):
    """Whether every call that is or links a library kernel (Segment.links) finds its machine
    code in the caches for the types the plan predicts: a look before compiling anything, so a
    graph that will answer on the reference tier compiles nothing in the caller's process."""
    predicted = {name: numba_type(v) for name, v in values.items()}
    for seg in segments:
        if seg.links:
            dispatcher = _callee(module, seg.name)
            try:
                signature = _predicted_signature(dispatcher, seg, predicted)
            except KeyError:
                return False
            if not load_cached(dispatcher, signature):
                return False
    return True


def compile_ahead(module, segments, values, progress=None, claims=None):
    """A compile worker's share of compile_segments: in order, every call that links a library
    kernel, then every other compiled call, whose source file no process has claimed (Claims), for the
    types the plan predicts
    (`values` {identifier: Value}, C arrays), so that several workers share one graph's calls
    like a work queue. A wrong guess costs only time: the exact pass (compile_segments) then
    compiles what the call really needs."""
    predicted = {name: numba_type(v) for name, v in values.items()}
    # the calls that link library kernels first (the heavy ones), then the graph's own
    # segments and fused kernels, which the exact pass would otherwise compile alone at the end
    order = [i for i, s in enumerate(segments) if s.links] + \
            [i for i, s in enumerate(segments) if not s.links]
    for i in order:
        seg = segments[i]
        dispatcher = _callee(module, seg.name)
        try:
            signature = _predicted_signature(dispatcher, seg, predicted)
        except KeyError:
            continue
        if load_cached(dispatcher, signature) or (claims and not claims.take(dispatcher, True)):
            continue
        try:
            if progress is not None:
                progress(i, len(segments), seg.name)
            dispatcher.compile(signature)
        except Exception:       # a guess Numba cannot type: the first worker compiles it
            pass
        finally:
            if claims is not None:
                claims.release(dispatcher, True)


class Claims:
    """Lock files (in the temporary folder) that keep the processes of one machine (compile workers,
    pytest-xdist workers, two users' scripts) from compiling the same code at once: they would
    do the work twice, and Numba's cache index of a function, rewritten whole by each, could
    lose one of their signatures. A process waits for a claim only before taking one, never
    while holding one, so none waits on another in a circle.

    Two scopes. A compile worker's work queue (`compile_ahead`) claims a whole source file and
    skips a file someone works in: a kernel module's entry points share their heavy callees
    (max and average pooling one chain), which each would compile again, and the worker has
    other calls to take meanwhile. A process that needs one function now (`_compile_claimed`:
    a prepare, an xdist worker) claims only that function (file and qualified name), and waits
    while a worker holds the file or another process the function: it does not wait on other
    functions of the file. (With file claims everywhere, an xdist worker slept while the other
    compiled an unrelated entry of movement.py or pool.py.)"""

    def __init__(self, folder=None):
        # one folder for the machine: the library kernels' machine code lives beside their
        # source, whatever ONNXJIT_CACHE_DIR each process uses
        self.folder = folder or os.path.join(tempfile.gettempdir(), f"onnxjit-claims-{os.getuid()}")
        os.makedirs(self.folder, exist_ok=True)

    def path(self, dispatcher, whole_file=False):
        func = dispatcher.py_func
        where = _digest(os.path.abspath(inspect.getsourcefile(func)))
        return os.path.join(self.folder, where if whole_file else f"{where}.{_digest(func.__qualname__)}")

    def take(self, dispatcher, whole_file=False):
        """True when this process now holds the function's (or its whole file's) claim; a dead
        holder's is taken."""
        path = self.path(dispatcher, whole_file)
        if not whole_file and _held(self.path(dispatcher, whole_file=True)):
            return False
        if not _create(path):
            return False
        if whole_file and any(_held(os.path.join(self.folder, f))
                              for f in os.listdir(self.folder)
                              if f.startswith(os.path.basename(path) + ".")):
            _remove(path)     # a process is compiling one of the file's functions
            return False
        return True

    def release(self, dispatcher, whole_file=False):
        _remove(self.path(dispatcher, whole_file))


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _create(path):
    """Create the claim file `path` holding this pid; False when a live process holds it."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _holder_alive(path):
                return False
            _remove(path)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _held(path):
    return os.path.exists(path) and _holder_alive(path)


def machine_slot():
    """Block until one of the machine's compile slots (one per core, lock files beside the
    claims) is free; the open file holding it, released when the process exits. Each process
    that prepares a model on a cold cache starts compile workers: without slots, a few of them
    in a row left a dozen workers compiling at once on two cores."""
    try:
        import fcntl
    except ImportError:          # no flock (Windows): no limit
        return None
    folder = Claims().folder
    while True:
        for i in range(os.cpu_count() or 1):
            f = open(os.path.join(folder, f"slot-{i}"), "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return f
            except OSError:
                f.close()
        time.sleep(0.25)


# A claim older than this is stale whoever holds it (its pid may have been reused).
CLAIM_SECONDS = 900


def _holder_alive(path):
    try:
        with open(path) as f:
            pid = int(f.read() or 0)
        if time.time() - os.path.getmtime(path) > CLAIM_SECONDS:
            return False
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True           # being written: its holder is there
    if pid == 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def load_cached(dispatcher, signature):
    """Give `dispatcher` its overload for `signature` from Numba's disk cache, as its `compile`
    does first; False (and nothing compiled) when the cache has none."""
    with global_compiler_lock:
        if signature in dispatcher.overloads:
            return True
        cres = dispatcher._cache.load_overload(signature, dispatcher.targetctx)
        if cres is None:
            return False
        dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
        dispatcher._cache_hits[signature] += 1     # as Dispatcher.compile counts it (stats)
        return True


def guard_numba_cache(caching=None):
    """Make Numba's disk cache survive damaged files. Numba raises from deep inside its cache, on
    every later run, when an index (.nbi) or data file (.nbc) is truncated or corrupted (a full
    disk, a crash while a cache was copied): an unreadable index counts as empty and an
    unreadable entry as missing, so the function compiles again and its next save replaces the
    file; a save that cannot write (a read-only cache) leaves the machine code in memory only.
    Installed once per process on Numba's cache classes (every cached function benefits);
    `caching` is the module holding them (numba.core.caching, or numba-cuda's own copy,
    numba.cuda.core.caching, which cuda/__init__ guards)."""
    if caching is None:
        from numba.core import caching
    if caching.Cache.__dict__.get("_onnxjit_guarded", False):
        return
    load_index = caching.IndexDataCacheFile._load_index
    load_overload = caching.Cache.load_overload
    save_overload = caching.Cache.save_overload

    def _load_index(self):
        try:
            return load_index(self)
        except Exception as exc:
            cache_warning(f"Numba's cache index {self._index_path} is unreadable "
                          f"({type(exc).__name__}: {exc}); compiling its functions again")
            return {}

    def guarded_load_overload(self, sig, target_context):
        try:
            return load_overload(self, sig, target_context)
        except Exception as exc:
            cache_warning(f"the machine code of {self._name} in Numba's cache {self._cache_path} "
                          f"is unreadable ({type(exc).__name__}: {exc}); compiling it again")
            return None

    def guarded_save_overload(self, sig, data):
        try:
            save_overload(self, sig, data)
        except OSError as exc:
            cache_warning(f"could not save the machine code of {self._name} to Numba's cache "
                          f"{self._cache_path} ({exc}); it is kept in memory only")

    caching.IndexDataCacheFile._load_index = _load_index
    caching.Cache.load_overload = guarded_load_overload
    caching.Cache.save_overload = guarded_save_overload
    caching.Cache._onnxjit_guarded = True


guard_numba_cache()


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
