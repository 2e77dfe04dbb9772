"""The CUDA tests: their own pytest invocation, on a GPU or on Numba's CUDA simulator.

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda -q     # no GPU needed
    python -m pytest tests/cuda -q                            # on a machine with a GPU

The simulator must be switched on before numba is first imported, so it comes from the
environment, never from here. The main run (`pytest` from the repository root) does not collect
this folder; tests/test_cuda_simulator.py runs it under the simulator in a subprocess.
"""
import os

import pytest


def pytest_configure(config):
    from numba import cuda
    if not cuda.is_available():
        raise pytest.UsageError("tests/cuda need a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 in the "
                                "environment (before numba is imported)")


@pytest.fixture(scope="session")
def simulated():
    from onnxjit.cuda.target import simulator
    return simulator()


@pytest.fixture
def own_gemm(monkeypatch):
    """The tiled GEMM kernels even where CuPy (cuBLAS) is installed."""
    monkeypatch.setenv("ONNXJIT_CUDA_CUBLAS", "0")
    assert os.environ["ONNXJIT_CUDA_CUBLAS"] == "0"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """No silent skips here: a skipped CUDA test (e.g. 'Not compatible with backend') fails."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped CUDA test (fix it or list it in backend_exclusions.txt): " \
                          f"{report.longrepr}"
