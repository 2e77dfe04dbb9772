"""The CUDA target's tests (tests/cuda) under Numba's CUDA simulator, as their own pytest run.

The simulator has to be switched on before numba is first imported, which this process did long
ago; so the CUDA tests run in a subprocess with NUMBA_ENABLE_CUDASIM=1 (tests/conftest.py keeps
the main run from collecting tests/cuda itself).
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cuda_tests_pass_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/cuda", "-q", "-p", "no:xdist",
                          "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = (run.stdout + run.stderr)[-4000:]
    assert run.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail and " error" not in tail, tail
