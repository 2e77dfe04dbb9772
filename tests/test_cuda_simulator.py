"""A smoke run of the CUDA target's tests (tests/cuda) under Numba's CUDA simulator.

The simulator has to be switched on before numba is first imported, which this process did long
ago; so the CUDA tests run in a subprocess with NUMBA_ENABLE_CUDASIM=1 (tests/conftest.py keeps
the main run from collecting tests/cuda itself). The main run takes a slice that touches every
layer of the CUDA target (devices and device arrays, the built-in models end to end, one lowering
per op family); the whole folder (704 tests, ~6 min on the simulator) is its own CI step:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda -q
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SMOKE = ["tests/cuda/test_cuda_device.py",
         "tests/cuda/test_cuda_models.py::test_builtin_model",
         "tests/cuda/test_cuda_ops.py", "-k",
         "test_devices or device or pickled or hostile or builtin_model or "
         "lowering and (add_float16 or reduce_prod or hardswish or maxpool_uint8 or where or "
         "conv_pads_strides or slice_steps or cast_float_to_int32)"]


def test_cuda_smoke_passes_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run([sys.executable, "-m", "pytest", *SMOKE, "-q", "-p", "no:xdist",
                          "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = (run.stdout + run.stderr)[-4000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 20, tail      # the slice did not shrink to nothing
    assert " failed" not in tail and " error" not in tail, tail
