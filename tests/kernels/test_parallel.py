"""The parallel layer (onnxjit/kernels/parallel.py): work splitting, and the compile-time trim of
the prange levels (a kernel's gufunc and its wrappers skip LLVM's module pipelines; everything
else is optimized as before)."""
import numpy as np
import pytest
from numba import njit, prange

from onnxjit.kernels import PRANGE_ONLY, callees, parallel


def _kernel_like(module):
    """A prange entry whose body calls a helper, as onnxjit's kernels are written, defined as if
    in `module` (the trim looks at the module of the function compiling)."""
    @njit
    def part(y, t):
        for i in range(t * 64, (t + 1) * 64):
            y[i] = np.sqrt(np.float32(i))

    def entry(n):
        y = np.empty(n * 64, np.float32)
        for t in prange(n):
            part(y, t)
        return y
    entry.__module__ = module
    return njit(parallel=PRANGE_ONLY)(entry)


@pytest.mark.parametrize("module,trimmed", [("onnxjit.kernels.probe", True),
                                            ("tests.kernels.probe", False)])
def test_prange_levels_trimmed_only_for_the_kernels(module, trimmed):
    before = len(parallel.TRIMMED)
    y = _kernel_like(module)(4)
    np.testing.assert_array_equal(y, np.sqrt(np.arange(256, dtype=np.float32)))
    names = parallel.TRIMMED[before:]
    assert bool(names) == trimmed, names
    if trimmed:     # the gufunc and its two wrappers, never the entry
        assert any(n.startswith("__numba_parfor_gufunc") for n in names), names
        assert len(names) == 3, names


def test_a_prange_body_with_work_inline_is_optimized():
    """A gufunc whose own code is over THIN_INSTRUCTIONS keeps LLVM's pipelines (its loop is
    vectorized there), even in onnxjit.kernels."""
    def heavy(x):
        y = np.empty_like(x)
        for t in prange(x.shape[0]):
            for j in range(x.shape[1]):
                v = x[t, j]
                y[t, j] = (v * v + 1.0) / (v * v + 2.0) + np.sqrt(abs(v)) * 0.5 - v / 3.0
            for j in range(x.shape[1]):
                y[t, j] = y[t, j] * 2.0 + (y[t, j] - 1.0) / 7.0 if y[t, j] > 0 else -y[t, j]
        return y
    heavy.__module__ = "onnxjit.kernels.probe"
    old = parallel.THIN_INSTRUCTIONS
    parallel.THIN_INSTRUCTIONS = 50
    try:
        before = len(parallel.TRIMMED)
        x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
        got = njit(parallel=PRANGE_ONLY)(heavy)(x)
        assert not any(n.startswith("__numba_parfor_gufunc") for n in parallel.TRIMMED[before:])
    finally:
        parallel.THIN_INSTRUCTIONS = old
    np.testing.assert_allclose(got, heavy(x), rtol=1e-5)


@pytest.mark.parametrize("n,parts,align", [(10, 3, 1), (100, 4, 16), (5, 8, 1), (0, 2, 4)])
def test_split_range_covers_in_order(n, parts, align):
    runs = [parallel.split_range(n, parts, t, align) for t in range(parts)]
    assert runs[0][0] == 0 and runs[-1][1] == n
    for (a0, a1), (b0, _) in zip(runs, runs[1:]):
        assert a1 == b0 and a0 <= a1
    assert all(lo % align == 0 for lo, _ in runs if lo < n)


@pytest.mark.parametrize("module,skipped", [("onnxjit.kernels.probe", True),
                                            ("tests.kernels.probe", False)])
def test_prange_levels_emit_no_machine_code_only_for_onnxjit(module, skipped):
    """The gufunc and wrapper levels of onnxjit's prange loops give the JIT their global
    variables only (the entry's copy of their code is what runs); the entry still runs on
    every thread count. (A `raise` inside a prange body ends in a SystemError in Numba 0.68
    whether the levels are emitted or not, so it is no test of this.)"""
    import numba
    before = len(callees.SKIPPED)
    kernel = _kernel_like(module)
    saved = numba.get_num_threads()
    try:
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            y = kernel(8)
            np.testing.assert_array_equal(y, np.sqrt(np.arange(512, dtype=np.float32)))
    finally:
        numba.set_num_threads(saved)
    names = callees.SKIPPED[before:]
    assert bool(names) == skipped, names
    if skipped:     # the gufunc and its two wrappers, never the entry
        assert any(n.startswith("__numba_parfor_gufunc") for n in names), names
        assert len(names) == 3, names


def test_atomics_count_across_threads():
    """parallel.atomic_cas / atomic_add / atomic_load (the two-thread recurrences' claims and
    counts): a claim succeeds once, adds return the old value, and 2 threads x 20,000 adds
    from a prange loop sum exactly (a plain += there loses updates)."""
    import numba

    @njit
    def claims(a):
        return (parallel.atomic_cas(a, 0, 0, 1), parallel.atomic_cas(a, 0, 0, 1),
                parallel.atomic_add(a, 1, 5), parallel.atomic_load(a, 1))

    a = np.zeros(2, np.int64)
    assert claims(a) == (True, False, 0, 5) and list(a) == [1, 5]

    @njit(parallel=PRANGE_ONLY)
    def count(a, n):
        for _t in prange(2):
            for _ in range(n):
                parallel.atomic_add(a, 0, 1)
        return parallel.atomic_load(a, 0)

    old = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        assert count(np.zeros(1, np.int64), 20000) == 40000
    finally:
        numba.set_num_threads(old)
