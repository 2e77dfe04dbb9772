"""Shared test set-up: a private onnxjit cache per test session, and no silent skips."""
import os
import tempfile

import pytest

os.environ.setdefault("ONNXJIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "onnxjit-test-cache"))
# Tests check compiled code: no reference tier (tests/test_tiers.py turns it on where it is tested).
os.environ["ONNXJIT_TIERED"] = "0"
# Library kernels are called from a Python driver, never linked into a graph's njit entry: each
# kernel then compiles once per test run, not once per test model (a one-node MaxPool entry took
# ~11 s to compile, its driver ~0.1 s). Tests of njit entries ask for them (fixture njit_entry).
os.environ["ONNXJIT_ENTRY"] = "driver"


def pytest_ignore_collect(collection_path, config):
    """tests/cuda is its own pytest run (NUMBA_ENABLE_CUDASIM=1 must be set before numba is
    imported; test_cuda_simulator.py runs it): collected only when named on the command line."""
    cuda_tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda")
    if os.path.abspath(str(collection_path)) != cuda_tests:
        return None
    named = [os.path.abspath(str(a).split("::")[0]) for a in config.args]
    return not any(n == cuda_tests or n.startswith(cuda_tests + os.sep) for n in named)


@pytest.fixture
def njit_entry(monkeypatch):
    """Graphs short enough get an njit entry, library kernels linked in (the default outside tests)."""
    monkeypatch.setenv("ONNXJIT_ENTRY", "auto")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A conformance test that skips (e.g. 'Not compatible with backend') counts as failed."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and "test_conformance" in item.nodeid:
        report.outcome = "failed"
        report.longrepr = f"skipped conformance test (list it in the exclusions instead): {report.longrepr}"


def kernel_group(nodeid):
    """The xdist group of a test: tests that compile the same library kernels share one, so
    that `-n 2` compiles each kernel in one worker (the other then loads it from Numba's disk
    cache) instead of both compiling it at once. A conformance test's group is its op family
    (`test_conv_with_strides_cpu` -> "conformance:conv"), any other test's its file."""
    path, _, rest = nodeid.partition("::")
    if path.endswith("test_conformance.py"):
        name = rest.rpartition("::")[2]
        family = name[len("test_"):].split("_")[0] if name.startswith("test_") else name
        return f"conformance:{family}"
    return path


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (xdist's default "load" distribution) hands each worker whole kernel_groups, the
    largest first. (xdist's own loadgroup marks do not work with pytest 9: it renames
    `item._nodeid`, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class KernelGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return kernel_group(nodeid)

    return KernelGroupScheduling(config, log)
