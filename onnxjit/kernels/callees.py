"""Machine code only where it runs: prange levels and onnxjit's callees emit none.

Numba compiles a function called from another jitted function as an overload of its own: it
types and lowers it, optimizes its module, and emits machine code for that whole module (its
own callees linked in) before the caller links the callee's IR and emits everything once more.
The callee's own machine code never runs there: the caller calls its own inlined or linked
copy. Two kinds of library are made that way and get **no machine code** here when Numba
finalizes them: the JIT receives a module of their global variables only (the environment
pointers Numba sets right after), while their full optimized module stays what callers link
(`install`'s patch of `CPUCodeLibrary._finalize_final_module`).

**prange levels.** A `prange` loop is lowered into a gufunc and two wrappers, three libraries
each emitted before the next level links its IR; only the entry's copy ever runs. Those levels,
made while a function of onnxjit's compiles (its kernels, fused kernels and generated modules),
are emitted as globals only: 24 s of the light ResNet-50's ~130 s first compile (2026-11-27,
Zen 3). A level whose globals name a function is emitted as before. (parallel.py also skips
LLVM's module pipelines at the thin levels of onnxjit.kernels: `prange_level` serves both.)

**Callees.** For onnxjit's code almost every function is a callee: the entry of a generated
module, or a library kernel a Python driver calls, is what Python calls. Emitting the callees
was ~12 of the ~62 s of the light ResNet-50's first compile (2026-11-27, Zen 3:
`_finalize_final_module` timed per library; the entries' own emission ~3 s). So a function of
onnxjit's modules whose compile runs inside another one's, and one loaded from the disk cache
to type a caller, is emitted as globals only too. Three things would otherwise need its code,
and each is taken care of:
- **Python calls it later** (a kernel test, a Python driver calling a library kernel): the
  overload's entry point is a `Deferred` stand-in, which Numba's dispatcher calls like any
  Python callable (it is not registered in the dispatcher's C table); its first call drops the
  overload and compiles it again at top level (a load of the cached IR and one emission, or a
  full compile without a cache), then calls the real function. `entry_point(dispatcher, sig)`
  does that ahead of time for code that keeps entry points (onnxjit.compile).
- **The disk cache** stores Numba's object code: such a library saves its optimized IR instead
  (Numba's "bitcode" kind, which Numba loads by emitting it), so the cache holds what the next
  caller links; a later load for a Python call emits it once and saves the machine code back
  over that entry (`note_top_level`), so the process after that loads machine code.
- **Taking its address** (a first-class function, a cfunc): `get_pointer_to_function` on such a
  library raises instead of returning null; nothing in onnxjit does it.
Functions of other modules (a user's own njit code, Numba's overloads) and their prange levels
are emitted as before.
"""
from __future__ import annotations

import threading

SKIPPED = []            # the names of the prange levels given no machine code (diagnostics)
DEFERRED = []           # the names of the callees given no machine code (diagnostics)
MATERIALIZED = []       # the names of the functions compiled again for a Python call
_MODULES = ("onnxjit.", "onnxjit_")
_GUFUNC_LEVELS = ("__numba_parfor_gufunc", "<numba.np.ufunc.wrappers._GufuncWrapper",
                  "parallelgufuncwrapper")

_state = threading.local()      # .stack: (module, qualname) of the functions compiling;
                                # .loading: the function being loaded from the cache;
                                # .top: >0 while a Deferred compiles its function at top level


def compiling():
    """(module, qualname) of the functions compiling on this thread, innermost last (a
    `numba:compile` listener keeps it once `install` ran)."""
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


def _ours(func):
    return (getattr(func, "__module__", "") or "").startswith(_MODULES)


def prange_level(lib, modules):
    """Whether code library `lib` is a prange level (a parfor gufunc or one of its wrappers)
    made while a function of one of `modules` (name prefixes) compiles."""
    stack = compiling()
    return bool(stack and stack[-1][0].startswith(modules)
                and lib.name.startswith(_GUFUNC_LEVELS))


def is_callee_library(lib):
    """Whether code library `lib` is the library of a function of onnxjit's, finalized while
    another function compiles (a callee): compiled inside a caller's compile, or loaded from the
    cache to type one."""
    if getattr(_state, "top", 0):
        return False
    stack = compiling()
    loading = getattr(_state, "loading", None)
    if loading is not None:     # a load from the cache: a callee if someone is compiling
        return bool(stack) and _ours(loading) and lib.name == loading.__qualname__
    if len(stack) < 2:
        return False
    module, qualname = stack[-1]
    return module.startswith(_MODULES) and lib.name == qualname


def note_top_level(lib):
    """Called for a library Numba finalizes with machine code: one loaded at top level from a
    callee's cache entry (IR) gets its object code kept, so that the load saves it back over
    that entry (the next process loads machine code, as for any function Python calls)."""
    loading = getattr(_state, "loading", None)
    if (loading is not None and _ours(loading) and lib.name == loading.__qualname__
            and not getattr(lib, "_object_caching_enabled", True)):
        lib.enable_object_caching()
        lib._onnxjit_resave = True


class Deferred:
    """The entry point of an overload compiled without machine code: called from Python (as
    Numba's dispatcher calls a Python object it got from `compile`), it has the function compiled
    at top level and calls that."""

    __slots__ = ("name", "dispatcher", "key", "real")

    def __init__(self, name):
        self.name, self.dispatcher, self.key, self.real = name, None, None, None

    def __repr__(self):
        return f"<onnxjit callee {self.name} without machine code>"

    def materialize(self):
        if self.real is None:
            from numba.core.compiler_lock import global_compiler_lock
            disp, key = self.dispatcher, self.key
            if disp is None:
                raise RuntimeError(f"{self!r} belongs to no dispatcher")
            with global_compiler_lock:
                if self.real is None:
                    cres = disp.overloads.get(key)
                    if cres is not None and cres.entry_point is self:
                        del disp.overloads[key]
                    _state.top = getattr(_state, "top", 0) + 1
                    try:
                        self.real = disp.compile(key)
                    finally:
                        _state.top -= 1
                    MATERIALIZED.append(self.name)
        return self.real

    def __call__(self, *args, **kws):
        return self.materialize()(*args, **kws)


def entry_point(dispatcher, signature):
    """The callable entry point of `dispatcher`'s overload for `signature` (compiled or loaded
    already), with machine code: a Deferred one is compiled at top level first."""
    entry = dispatcher.overloads[signature].entry_point
    return entry.materialize() if isinstance(entry, Deferred) else entry


def _globals_only(module):
    """A module of `module`'s global variables (no functions), or None when one of them refers
    to anything else (then the library is emitted as before)."""
    import re

    import llvmlite.binding as llvm

    names = {g.name for g in module.global_variables}
    lines = []
    for g in module.global_variables:
        text = str(g).strip()
        for ref in re.findall(r'@("[^"]*"|[-\w.$]+)', text.split("=", 1)[-1]):
            if ref.strip('"') not in names:     # names a function: emit as before
                return None
        lines.append(text)
    if not names:
        return None
    text = (f'target triple = "{module.triple}"\n'
            f'target datalayout = "{module.data_layout}"\n' + "\n".join(lines) + "\n")
    try:
        lean = llvm.parse_assembly(text)
        lean.verify()
    except Exception:       # a global llvmlite cannot print back: emit as before
        return None
    lean.name = module.name
    return lean


def install():
    """Patch Numba (once per process): see the module's docstring."""
    from numba.core import caching, codegen, cpu, dispatcher, event

    lib_class = codegen.CPUCodeLibrary
    if getattr(lib_class, "_onnxjit_callees", False):
        return

    final = lib_class._finalize_final_module

    def lean_finalize_final_module(self):
        level = getattr(self, "_onnxjit_level", False)
        callee = not level and is_callee_library(self)
        lean = _globals_only(self._final_module) if level or callee else None
        if lean is None:
            if not level:
                note_top_level(self)
            return final(self)
        full = self._final_module
        self._final_module = lean
        try:
            final(self)
        finally:
            self._final_module = full
        if callee:      # a stand-in entry point, its IR for the cache
            self._onnxjit_deferred = True
            DEFERRED.append(self.name)
        else:
            SKIPPED.append(self.name)

    finalize = lib_class.finalize

    def marked_finalize(self):
        self._onnxjit_level = prange_level(self, _MODULES)
        return finalize(self)

    class Compiling(event.Listener):
        def on_start(self, ev):
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            compiling().append((getattr(func, "__module__", "") or "",
                             getattr(func, "__qualname__", "") or ""))

        def on_end(self, ev):
            stack = compiling()
            if stack:
                stack.pop()

    event.register("numba:compile", Compiling())

    load_overload = caching.Cache.load_overload

    def tracked_load_overload(self, sig, target_context):
        outer = getattr(_state, "loading", None)
        _state.loading = getattr(self, "_py_func", None)
        try:
            cres = load_overload(self, sig, target_context)
        finally:
            _state.loading = outer
        if cres is not None and getattr(cres.library, "_onnxjit_resave", False):
            cres.library._onnxjit_resave = False
            self.save_overload(sig, cres)       # its machine code replaces the IR entry
        return cres

    get_executable = cpu.CPUContext.get_executable

    def lazy_get_executable(self, library, fndesc, env):
        library._ensure_finalized()         # where the library is found to be a callee's
        if not getattr(library, "_onnxjit_deferred", False):
            return get_executable(self, library, fndesc, env)
        library.codegen.set_env(self.get_env_name(fndesc), env)
        return Deferred(fndesc.qualname)

    add_overload = dispatcher.Dispatcher.add_overload

    def lazy_add_overload(self, cres):
        entry = cres.entry_point
        if not isinstance(entry, Deferred):
            return add_overload(self, cres)
        # kept for typing and linking callers; a Python call reaches it through `compile`
        entry.dispatcher, entry.key = self, tuple(cres.signature.args)
        self.overloads[entry.key] = cres

    serialize = lib_class.serialize_using_object_code

    def serialize_using_object_code(self):
        if getattr(self, "_onnxjit_deferred", False):
            self._ensure_finalized()
            return (self.name, "bitcode", self._final_module.as_bitcode())
        return serialize(self)

    jit_class = codegen.JITCodeLibrary
    get_pointer = jit_class.get_pointer_to_function

    def get_pointer_to_function(self, name):
        self._ensure_finalized()
        if getattr(self, "_onnxjit_deferred", False):
            raise RuntimeError(f"{self.name}: onnxjit compiled this function as a callee, "
                               f"without machine code of its own (onnxjit.kernels.callees)")
        return get_pointer(self, name)

    lib_class.finalize = marked_finalize
    lib_class._finalize_final_module = lean_finalize_final_module
    caching.Cache.load_overload = tracked_load_overload
    cpu.CPUContext.get_executable = lazy_get_executable
    dispatcher.Dispatcher.add_overload = lazy_add_overload
    lib_class.serialize_using_object_code = serialize_using_object_code
    jit_class.get_pointer_to_function = get_pointer_to_function
    lib_class._onnxjit_callees = True
