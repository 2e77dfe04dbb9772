"""Numba's threading layer: TBB when the tbb package is installed (onnxjit/threads.py)."""
import subprocess
import sys
from importlib import metadata

import pytest

CHILD = r"""
import numpy as np, numba
import onnxjit
from onnxjit.threads import threading_layer
from onnxjit.kernels import sgemm
numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
a = np.ones((64, 600), np.float32)
b = np.ones((600, 300), np.float32)
y = sgemm.sgemm_packed(a, sgemm.pack_b(b), 300, None, 0)   # large enough for the parallel path
assert float(y[0, 0]) == 600.0
print(threading_layer())
"""


def _installed(name):
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not _installed("tbb"), reason="the tbb wheel is a dependency on x86-64 only")
def test_parallel_kernels_run_on_tbb():
    """In a fresh process, importing onnxjit loads pip's libtbb before Numba starts its threads,
    so parallel kernels run on TBB (tasks a busy worker leaves are run by the caller)."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "tbb"
