"""The CUDA target's disk cache under faults, as tests/test_faults.py holds the CPU one: a
read-only cache dir (empty or filled), a damaged generated kernel file or its bytecode, and damaged
or unwritable files of numba-cuda's own cache (numba.cuda.core.caching, guarded like Numba's):
still the right answer, at most a CacheWarning, never a crash.

Each disk case runs in a child process (the simulator when this run uses it) on private, empty
ONNXJIT_CACHE_DIR and NUMBA_CACHE_DIR folders; answers are checked against onnx's
ReferenceEvaluator. The simulator ignores `cache=True`, so numba-cuda's cache files are damaged
in-process below, through its own classes."""
import importlib.util
import os
import pickle
import stat
import subprocess
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("onnxjit_test_faults_helpers",
                                               os.path.join(ROOT, "tests", "test_faults.py"))
_faults = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_faults)

# The read-only audit hook of test_faults.CHILD (FAULTS_READ_ONLY), then y = Relu(x * w + 1) on
# CUDA (one fused kernel), checked against the reference; one JSON line.
CHILD = _faults.HOOK + _faults.MODEL + r"""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    rep = backend.prepare(model, "CUDA")
    out = rep.run([feed])[0]
expected = ReferenceEvaluator(model).run(None, {"x": feed})[0]
kernels = sorted(m.__file__ for n, m in list(sys.modules.items()) if n.startswith("onnxjit_cuda_"))
print(json.dumps({"ok": bool(np.allclose(out, expected, rtol=1e-6, atol=0)), "kernels": kernels,
                  "warnings": [str(w.message) for w in caught if w.category is CacheWarning]}))
"""


def _env(cache, numba_cache, **extra):
    env = _faults._env(cache, numba_cache, **extra)
    env["NUMBA_ENABLE_CUDASIM"] = os.environ.get("NUMBA_ENABLE_CUDASIM", "0")
    return env


def _child(env, prefix=()):
    proc = subprocess.run([*prefix, sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _faults._parse(proc.stdout, proc.stderr)


@pytest.fixture
def caches(tmp_path):
    return tmp_path / "onnxjit", tmp_path / "numba"


def _kernel_files(cache):
    return _faults._files(os.path.join(cache, "cuda"), ".py", "cuda_f_")


# -- damaged generated files ----------------------------------------------------------------------
DAMAGE = {
    "kernel-truncated": lambda c, n: [_faults._truncate(p) for p in _kernel_files(c)],
    "kernel-garbled": lambda c, n: [_faults._garble(p) for p in _kernel_files(c)],
    "kernel-emptied": lambda c, n: [open(p, "w").close() for p in _kernel_files(c)],
    "bytecode-garbled": lambda c, n: [_faults._bytecode_body(p)
                                      for p in _faults._files(os.path.join(c, "cuda"), ".pyc")],
}
if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    # On a GPU numba-cuda writes the kernel's machine code to NUMBA_CACHE_DIR: damage that too.
    DAMAGE.update({
        "numba-cuda-index-truncated": lambda c, n: [_faults._truncate(p) for p in _faults._files(n, ".nbi")],
        "numba-cuda-index-garbled": lambda c, n: [_faults._garble(p) for p in _faults._files(n, ".nbi")],
        "numba-cuda-data-truncated": lambda c, n: [_faults._truncate(p) for p in _faults._files(n, ".nbc")],
        "numba-cuda-data-garbled": lambda c, n: [_faults._garble(p) for p in _faults._files(n, ".nbc")],
    })


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_cuda_cache_damaged_kernel_file(caches, damage):
    env = _env(*caches)
    if damage.startswith("bytecode"):
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    first = _child(env)
    assert first["ok"] and first["kernels"] and not first["warnings"], first
    assert all(k.startswith(str(caches[0])) for k in first["kernels"]), first
    DAMAGE[damage](*caches)
    damaged = _child(env)
    assert damaged["ok"], damaged
    assert damaged["kernels"] == first["kernels"], damaged      # rewritten in place
    if damage.startswith("bytecode") or damage.startswith("numba"):
        assert damaged["warnings"], damaged                     # said what it recompiled
    repaired = _child(env)
    assert repaired["ok"] and not repaired["warnings"], repaired


# -- a read-only cache ----------------------------------------------------------------------------
@pytest.mark.parametrize("filled", [False, True], ids=["empty", "filled"])
def test_cuda_cache_read_only_dir(caches, filled):
    cache, numba_cache = caches
    env = _env(cache, numba_cache)
    if filled:
        assert _child(env)["ok"]
    cache.mkdir(exist_ok=True)
    numba_cache.mkdir(exist_ok=True)
    before = sorted(os.walk(cache))
    prefix, extra = _faults._read_only([cache, numba_cache])
    try:
        report = _child(dict(env, **extra), prefix)
    finally:
        for folder in caches:
            os.chmod(folder, stat.S_IRWXU)
    assert report["ok"], report
    assert sorted(os.walk(cache)) == before
    if not filled:      # the kernel went to this process's own folder, and it said so
        assert any("cannot write its cache dir" in w for w in report["warnings"]), report
        assert report["kernels"] and not any(k.startswith(str(cache)) for k in report["kernels"])


def test_cuda_cache_unwritable_cuda_subfolder(caches):
    """The cache dir is writable but its cuda/ folder is not (a file stands in its place)."""
    cache, numba_cache = caches
    cache.mkdir()
    (cache / "cuda").write_text("not a folder")
    report = _child(_env(cache, numba_cache))
    assert report["ok"], report
    assert any("cannot write its cache dir" in w for w in report["warnings"]), report
    assert (cache / "cuda").read_text() == "not a folder"


# -- numba-cuda's own cache files (its classes, in this process) ----------------------------------
class _Codegen:
    def magic_tuple(self):
        return ("test-target", "sm_test", "")


class _Context:
    def refresh(self):
        """Nothing to refresh in this stand-in."""

    def codegen(self):
        return _Codegen()


def _kernel():
    return 1


class _Overload:
    """What numba-cuda saves for a compiled kernel: its machine code and its codegen."""
    codegen = _Codegen()

    def __init__(self, code):
        self.code = code


def _numba_cuda_cache(folder):
    """A numba.cuda.core.caching.Cache over `folder`, built without a compiled kernel (the
    simulator has none): its index and data files are the real ones."""
    import onnxjit.cuda  # noqa: F401  (installs the guard)
    from numba.cuda.core import caching

    class Impl:
        def rebuild(self, target_context, data):
            return data

        def reduce(self, data):
            return {"machine": data.code}

        def check_cachable(self, data):
            return True

        class locator:
            @staticmethod
            def ensure_cache_path():
                os.makedirs(folder, exist_ok=True)

    cache = caching.Cache.__new__(caching.Cache)
    cache._name, cache._py_func, cache._impl = "kernel", _kernel, Impl()
    cache._cache_path = str(folder)
    cache._cache_file = caching.IndexDataCacheFile(str(folder), "kernel-1.py311", ("stamp", 1))
    cache.enable()
    return cache


def test_cuda_cache_numba_cuda_cache_is_guarded(tmp_path):
    cache, ctx = _numba_cuda_cache(tmp_path), _Context()
    from numba.cuda.core import caching

    from onnxjit.compile import CacheWarning
    assert caching.Cache.__dict__.get("_onnxjit_guarded")
    cache.save_overload("sig", _Overload("code"))
    assert cache.load_overload("sig", ctx) == {"machine": "code"}     # a whole cache loads
    index, = _faults._files(tmp_path, ".nbi")
    data, = _faults._files(tmp_path, ".nbc")
    for damage, path in [("truncated", data), ("garbled", data), ("truncated", index),
                         ("garbled", index)]:
        getattr(_faults, "_" + {"truncated": "truncate", "garbled": "garble"}[damage])(path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert cache.load_overload("sig", ctx) is None, (damage, path)   # compile again
        assert any(w.category is CacheWarning for w in caught), (damage, path)
        cache.save_overload("sig", _Overload("code"))        # the next save repairs it
        assert cache.load_overload("sig", ctx) == {"machine": "code"}, (damage, path)
        with open(index, "rb") as f:
            pickle.load(f)
            pickle.loads(f.read())


def test_cuda_cache_numba_cuda_save_to_unwritable_cache(tmp_path):
    from onnxjit.compile import CacheWarning
    cache, ctx = _numba_cuda_cache(tmp_path / "a-file"), _Context()
    (tmp_path / "a-file").write_text("not a folder")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.save_overload("sig", _Overload("code"))       # kept in memory only
        assert cache.load_overload("sig", ctx) is None
    assert any(w.category is CacheWarning and "kept in memory" in str(w.message) for w in caught)
