"""Concurrency and the caches under faults: threads racing one rep while its signatures churn, two
processes filling one empty cache at once, damaged cache files, a read-only cache.

Everything that touches a disk cache runs in child processes on private, empty ONNXJIT_CACHE_DIR
and NUMBA_CACHE_DIR folders (Numba reads NUMBA_CACHE_DIR when it starts); answers are checked
against onnx's ReferenceEvaluator."""
import errno
import gc
import json
import os
import pickle
import random
import shutil
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnxjit.backend import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A child process: prepares y = Relu(x * w + 1) (an elementwise fused kernel and an njit entry),
# runs it, checks it against the reference and reports what it saw as one JSON line.
HOOK = r"""
import json, os, sys, warnings
READ_ONLY = os.environ.get("FAULTS_READ_ONLY")
if READ_ONLY:       # no other way to make a folder read-only here: refuse writes (audit hook)
    import errno
    folders = tuple(os.path.realpath(d) + os.sep for d in READ_ONLY.split(os.pathsep))
    def under(path):
        try:
            return (os.path.realpath(os.fsdecode(path)) + os.sep).startswith(folders)
        except (TypeError, ValueError):
            return False
    def hook(event, args):
        writes = event in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink")
        if event == "open" and len(args) == 3:
            mode, flags = args[1] or "", args[2] or 0
            writes = any(c in str(mode) for c in "wax+") or bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writes and args and under(args[0]):
            raise OSError(errno.EROFS, "Read-only file system (test)", os.fsdecode(args[0]))
    sys.addaudithook(hook)

"""

# y = Relu(x * w + 1) and its input: the model both this file's and the CUDA cache-fault
# children prepare (tests/cuda/test_cuda_cache_faults.py).
MODEL = r"""
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import onnxjit.backend as backend
from onnxjit.compile import CacheWarning

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])
w = helper.make_tensor("w", TensorProto.FLOAT, [5], [0.5, -1.0, 2.0, 3.0, -0.25])
one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "one"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])]
model = helper.make_model(helper.make_graph(nodes, "faults", [x], [y], [w, one]),
                          opset_imports=[helper.make_opsetid("", 17)])
feed = np.linspace(-3, 3, 15, dtype=np.float32).reshape(3, 5)
"""

CHILD = HOOK + MODEL + r"""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    rep = backend.prepare(model)
    out = rep.run([feed])[0]
expected = ReferenceEvaluator(model).run(None, {"x": feed})[0]
c = rep.compiled()
stats = c.module.run_graph.stats
print(json.dumps({"ok": bool(np.allclose(out, expected, rtol=1e-6, atol=0)), "path": c.path,
                  "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "warnings": [str(w.message) for w in caught if w.category is CacheWarning]}))
"""


def _env(cache, numba_cache, **extra):
    env = dict(os.environ, ONNXJIT_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(numba_cache),
               ONNXJIT_TIERED="0", ONNXJIT_ENTRY="auto",   # an njit run_graph (CHILD reads its stats)
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.update(extra)
    return env


def _parse(proc_out, proc_err=""):
    lines = [ln for ln in proc_out.strip().splitlines() if ln.startswith("{")]
    assert lines, f"the child printed no report; stderr:\n{proc_err[-3000:]}"
    return json.loads(lines[-1])


def _child(env, prefix=()):
    proc = subprocess.run([*prefix, sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _parse(proc.stdout, proc.stderr)


@pytest.fixture
def caches(tmp_path):
    cache, numba_cache = tmp_path / "onnxjit", tmp_path / "numba"
    return cache, numba_cache


def _index_files(numba_cache):
    return [os.path.join(d, f) for d, _, fs in os.walk(numba_cache) for f in fs if f.endswith(".nbi")]


def _check_index(path):
    """A Numba index file as Numba reads it: a version, then a pickled (stamp, overloads)."""
    with open(path, "rb") as f:
        pickle.load(f)
        stamp, overloads = pickle.loads(f.read())
    assert overloads, path
    for name in overloads.values():
        assert os.path.getsize(os.path.join(os.path.dirname(path), name)) > 0, name


# -- two processes on one empty cache -------------------------------------------------------------
def test_two_processes_prepare_one_model_at_once(caches):
    env = _env(*caches)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        reports.append(_parse(out, err))
    for report in reports:
        assert report["ok"] and not report["warnings"], report
    assert reports[0]["path"] == reports[1]["path"]
    indexes = _index_files(caches[1])
    assert indexes
    for path in indexes:
        _check_index(path)
    third = _child(env)        # the cache they left is whole: a third process only loads
    assert third["ok"] and not third["warnings"], third
    assert third["hits"] >= 1 and third["misses"] == 0, third


# -- damaged cache files ------------------------------------------------------------------------
def _truncate(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def _garble(path):
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(bytes(random.Random(size).randrange(256) for _ in range(max(size, 64))))


def _bytecode_body(path):
    """Keep a .pyc's header (so Python takes it as current) and garble its code."""
    with open(path, "rb") as f:
        header = f.read(16)
    with open(path, "wb") as f:
        f.write(header + b"\xff\x00garbage")


def _files(root, suffix, prefix=""):
    found = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
             if f.endswith(suffix) and f.startswith(prefix)]
    assert found, f"no {prefix}*{suffix} under {root}"
    return found


DAMAGE = {
    "numba-index-truncated": lambda c, n: [_truncate(p) for p in _files(n, ".nbi")],
    "numba-index-garbled": lambda c, n: [_garble(p) for p in _files(n, ".nbi")],
    "numba-data-truncated": lambda c, n: [_truncate(p) for p in _files(n, ".nbc")],
    "numba-data-garbled": lambda c, n: [_garble(p) for p in _files(n, ".nbc")],
    "module-truncated": lambda c, n: [_truncate(p) for p in _files(c, ".py", "m_")],
    "kernel-garbled": lambda c, n: [_garble(p) for p in _files(c, ".py", "f_")],
    "bytecode-garbled": lambda c, n: [_bytecode_body(p) for p in _files(c, ".pyc")],
}


@pytest.fixture(scope="module")
def filled_caches(tmp_path_factory):
    """Caches a first child filled (bytecode too), and a pristine copy of them: each damage
    test gets them back as they were, at the same paths (Numba's index names its source files
    by path), without paying for that first compile again."""
    root = tmp_path_factory.mktemp("filled")
    caches = (root / "onnxjit", root / "numba")
    env = _env(*caches)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    first = _child(env)
    assert first["ok"] and first["misses"] >= 1, first
    pristine = root / "pristine"
    for c in caches:
        shutil.copytree(c, pristine / c.name, symlinks=True)
    return caches, pristine


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cache_file_is_compiled_again(filled_caches, damage):
    caches, pristine = filled_caches
    for c in caches:
        shutil.rmtree(c)
        shutil.copytree(pristine / c.name, c, symlinks=True)
    env = _env(*caches)
    if damage.startswith("bytecode"):
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    DAMAGE[damage](*caches)
    damaged = _child(env)
    assert damaged["ok"], damaged
    if damage.startswith("numba") or damage.startswith("bytecode"):
        assert damaged["warnings"], damaged          # said what it recompiled
    repaired = _child(env)                            # and the cache is whole again
    assert repaired["ok"] and not repaired["warnings"], repaired
    assert repaired["hits"] >= 1 and repaired["misses"] == 0, repaired
    for path in _index_files(caches[1]):
        _check_index(path)


def test_damaged_job_file_is_written_again(caches, tmp_path):
    """A background compile's job file (<cache>/jobs) left truncated is rewritten, not reused."""
    code = r"""
import json, numpy as np
from onnx import TensorProto, helper
from onnxjit import tiers
import onnxjit.backend as backend
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
model = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "job", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
signature = (("x", (4,), np.dtype(np.float32)),)
options = {"profile": False, "optimize": "all"}
job = tiers.write_job(model, signature, {}, "job", options)
with open(job, "r+b") as f:
    f.truncate(40)
again = tiers.write_job(model, signature, {}, "job", options)
print(json.dumps({"same": again == job, "readable": str(tiers.read_job(again)[0].graph.name)}))
"""
    proc = subprocess.run([sys.executable, "-c", code], env=_env(*caches), capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _parse(proc.stdout) == {"same": True, "readable": "job"}


# -- a read-only cache ----------------------------------------------------------------------------
def _read_only(folders):
    """(command prefix, extra environment) under which `folders` cannot be written: their mode
    bits; for root, a read-only bind mount in a private mount namespace; else an audit hook in
    the child that refuses writes there (CHILD's FAULTS_READ_ONLY)."""
    for folder in folders:
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    probe = os.path.join(folders[0], "probe")
    try:
        open(probe, "w").close()
    except OSError:
        return (), {}
    os.remove(probe)
    mounts = "; ".join(f"mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}'" for d in folders)
    prefix = ("unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh")
    if shutil.which("unshare"):
        check = subprocess.run([*prefix, "sh", "-c", f"! touch '{probe}' 2>/dev/null"],
                               capture_output=True)
        if check.returncode == 0:
            return prefix, {}
    return (), {"FAULTS_READ_ONLY": os.pathsep.join(map(str, folders))}


@pytest.mark.parametrize("filled", [False, True], ids=["empty", "filled"])
def test_read_only_cache_dir_still_works(caches, filled):
    cache, numba_cache = caches
    env = _env(cache, numba_cache)
    if filled:
        assert _child(env)["ok"]
    cache.mkdir(exist_ok=True)
    numba_cache.mkdir(exist_ok=True)
    before = sorted(os.listdir(cache))
    prefix, extra = _read_only([cache, numba_cache])
    try:
        report = _child(dict(env, **extra), prefix)
    finally:
        for folder in caches:
            os.chmod(folder, stat.S_IRWXU)
    assert report["ok"], report
    assert sorted(os.listdir(cache)) == before
    if not filled:      # it had to write somewhere else, and said so
        assert any("cannot write its cache dir" in w for w in report["warnings"]), report
        assert not report["path"].startswith(str(cache)), report


# -- threads ------------------------------------------------------------------------------------
def _dynamic_model():
    """y = Relu(x * w + b), x of shape (n, 4): every n is its own signature."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.5, -1.0, 2.0, 3.0])
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [1.0, 0.25, -0.5, 0.0])
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "threads", [x], [y], [w, b]),
                             opset_imports=[helper.make_opsetid("", 17)])



def _is_compiled_graph(o):
    """isinstance(o, CompiledGraph) for any object gc holds: a weak proxy whose referent is
    gone raises ReferenceError on the type check (this test failed so, now and then)."""
    from onnxjit.pipeline import CompiledGraph
    try:
        return isinstance(o, CompiledGraph)
    except ReferenceError:
        return False


def test_threads_while_shapes_change_faster_than_max_signatures():
    model = _dynamic_model()
    reference = ReferenceEvaluator(model)
    rng = np.random.default_rng(0)
    sizes = [1, 2, 3, 5, 7, 16]
    feeds = {(n, k): rng.standard_normal((n, 4)).astype(np.float32) for n in sizes for k in range(3)}
    expected = {key: reference.run(None, {"x": x})[0] for key, x in feeds.items()}
    max_signatures = 2
    rep = prepare(model, max_signatures=max_signatures)
    for key, x in feeds.items():        # compile each shape once, one thread at a time
        np.testing.assert_allclose(rep.run([x])[0], expected[key], rtol=1e-6)
    errors, wrong, sizes_seen = [], [], []
    start = threading.Barrier(8)

    def worker(seed):
        r = random.Random(seed)
        start.wait()
        try:
            for i in range(150):
                key = r.choice(list(feeds))
                x = feeds[key]
                out = rep.run({"x": x} if i % 3 == 0 else [x])[0]
                if out.shape != expected[key].shape or not np.allclose(out, expected[key], rtol=1e-6):
                    wrong.append(key)
                sizes_seen.append((len(rep._cache), len(rep._fast)))
        except Exception as exc:         # noqa: BLE001 (recorded, asserted below)
            errors.append(repr(exc))
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)       # switch threads as often as possible: races show
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:3]
    assert not wrong, wrong[:5]
    assert rep.misses > len(sizes), "the shapes did not churn the signature cache"
    assert max(c for c, _ in sizes_seen) <= max_signatures
    assert max(f for _, f in sizes_seen) <= 4 * max_signatures + 8
    gc.collect()       # memory stays bounded: no compiled graphs pile up however long it runs
    live = [o for o in gc.get_objects() if _is_compiled_graph(o)
            and o.signature and o.signature[0][0] == "x" and len(o.signature[0][1]) == 2
            and o.signature[0][1][1] == 4]
    assert len(live) <= 5 * max_signatures + 8, len(live)


def test_read_only_probe_refuses_writes(tmp_path):
    """The audit-hook fallback of _read_only refuses writes (it stands in for a read-only
    mount where neither mode bits nor mount namespaces bind the test's user)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    code = CHILD.split("import numpy as np")[0] + (
        "try:\n    open(os.path.join(READ_ONLY, 'x'), 'w')\nexcept OSError as e:\n"
        "    print(e.errno)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, FAULTS_READ_ONLY=str(folder)),
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == str(errno.EROFS), proc.stderr


def test_claims_scopes(tmp_path):
    """A worker's file claim and a process's function claims exclude each other; two functions
    of one file are claimed side by side; a dead holder's claim is taken."""
    from onnxjit.compile import Claims
    from onnxjit.kernels import pool

    a, b = Claims(str(tmp_path)), Claims(str(tmp_path))
    f1, f2 = pool.maxpool_flat, pool.avgpool_flat
    assert a.take(f1)
    assert not b.take(f1)                       # the same function: wait
    assert b.take(f2)                           # another function of the file: side by side
    assert not a.take(f1, whole_file=True)      # a worker skips a file somebody works in
    a.release(f1)
    b.release(f2)
    assert a.take(f1, whole_file=True)
    assert not b.take(f2)                       # a worker holds the file
    a.release(f1, whole_file=True)
    assert b.take(f2)
    b.release(f2)
    # a claim whose holder is gone is taken
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(a.path(f1), "w") as fh:
        fh.write(dead)
    assert b.take(f1)
