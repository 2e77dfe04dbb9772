"""Callees without machine code (onnxjit/kernels/callees.py): onnxjit's functions compiled or
loaded to type a caller emit none; a later Python call, the disk cache and other modules' code
still get what they need."""
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from numba import njit

from onnxjit.kernels import callees, parallel  # noqa: F401  (parallel installs the patches)


def _pair(module):
    """A callee and its caller, defined as if in `module`."""
    def part(x, k):
        s = 0.0
        for i in range(x.shape[0]):
            s += np.sqrt(abs(x[i])) * k
        return s

    def entry(x):
        return part(x, 2.0) + 1.0
    for f in (part, entry):
        f.__module__ = module
    part = njit(part)
    return njit(entry), part


@pytest.mark.parametrize("module,deferred", [("onnxjit.kernels.probe", True),
                                             ("tests.kernels.probe", False)])
def test_a_callee_of_onnxjit_gets_machine_code_only_when_python_calls_it(module, deferred):
    entry, part = _pair(module)
    x = np.linspace(0, 4, 50)
    want = float(np.sqrt(x).sum() * 2)
    before, materialized = len(callees.DEFERRED), len(callees.MATERIALIZED)
    assert entry(x) == pytest.approx(want + 1, rel=1e-12)
    names = [n.rsplit(".", 1)[-1] for n in callees.DEFERRED[before:]]
    assert ("part" in names) == deferred, names
    assert "entry" not in names         # what Python calls keeps its machine code
    key = (numba.types.Array(numba.float64, 1, "C"), numba.float64)
    assert isinstance(part.overloads[key].entry_point, callees.Deferred) == deferred
    # a Python call of the callee compiles it at top level, once
    assert part(x, 2.0) == pytest.approx(want, rel=1e-12)
    assert part(x, 3.0) == pytest.approx(want * 1.5, rel=1e-12)
    names = [n.rsplit(".", 1)[-1] for n in callees.MATERIALIZED[materialized:]]
    assert ("part" in names) == deferred, names
    assert not isinstance(part.overloads[key].entry_point, callees.Deferred)
    assert entry(x) == pytest.approx(want + 1, rel=1e-12)


_MODULE = '''
import numpy as np
from numba import njit

@njit(cache=True)
def part(x, k):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sqrt(abs(x[i])) * k
    if s > 1e9:
        raise ValueError("too big", x.shape[0])
    return s

@njit(cache=True)
def entry(x):
    return part(x, 2.0) + 1.0

@njit(cache=True)
def entry2(x):
    return part(x, 2.0) * 2.0
'''

_STEP = '''
import sys
import numpy as np
from onnxjit.kernels import callees, parallel
import onnxjit_callee_probe as m
x = np.linspace(0, 4, 50)
ref = float(np.sqrt(x).sum() * 2)
step = sys.argv[1]
if step == "compile":           # part compiles as a callee: its IR goes to the cache
    assert abs(m.entry(x) - (ref + 1)) < 1e-9
if step == "call":              # Python calls part: loaded from the cache, emitted
    assert abs(m.part(x, 2.0) - ref) < 1e-9
    lib = next(iter(m.part.overloads.values())).library
    print("from IR" if hasattr(lib, "_onnxjit_resave") else "machine code")
if step == "link":              # a new caller loads part from the cache to link it
    assert abs(m.entry2(x) - 2 * ref) < 1e-9
    assert abs(m.part(x, 2.0) - ref) < 1e-9
    lib = next(iter(m.part.overloads.values())).library
    print("from IR" if hasattr(lib, "_onnxjit_resave") else "machine code")
if step == "raise":             # an exception with a run-time value, through the caller and direct
    for call in (lambda: m.entry(np.full(10, 1e18)), lambda: m.part(np.full(10, 1e18), 1.0)):
        try:
            call()
        except ValueError as e:
            assert e.args == ("too big", 10), e.args
        else:
            raise AssertionError("no exception")
print(step, sorted(set(callees.DEFERRED)), sorted(set(callees.MATERIALIZED)))
'''


def test_callees_through_the_disk_cache(tmp_path):
    """Each step a fresh process sharing one Numba cache: a callee's cache entry (its IR) serves
    a new caller and a Python call, which saves its machine code back; an exception raised
    inside it reaches Python through the caller and directly."""
    (tmp_path / "onnxjit_callee_probe.py").write_text(_MODULE)
    (tmp_path / "step.py").write_text(_STEP)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    seen = {}
    for step in ("compile", "link", "call", "raise"):
        run = subprocess.run([sys.executable, str(tmp_path / "step.py"), step], env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        seen.setdefault(step, []).append(run.stdout.strip().splitlines()[-2:])
    assert seen["compile"][0][-1] == "compile ['part'] []"         # compiled as a callee
    # loaded as one, then called from Python: loaded again from the IR, machine code saved back
    assert seen["link"][0] == ["from IR", "link ['part'] ['part']"], seen
    assert seen["call"][0] == ["machine code", "call [] []"], seen   # ... which the next loads


def test_a_callee_has_no_address_to_take():
    entry, part = _pair("onnxjit.kernels.probe2")
    entry(np.ones(3))
    lib = part.overloads[(numba.types.Array(numba.float64, 1, "C"), numba.float64)].library
    with pytest.raises(RuntimeError, match="callee"):
        lib.get_pointer_to_function("anything")
