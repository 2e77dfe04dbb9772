"""The SIMD layer (onnxjit/kernels/simd.py): one vector type per width, the target's width as
`native`, and the intrinsics on each width checked against numpy.

CI runs the kernel tests on this AVX-512 VM and again with NUMBA_CPU_NAME=haswell (AVX2), so
`native` is 16 lanes in one run and 8 in the other; the fixed widths run in both.
"""
import numpy as np
import pytest
from numba import njit

from onnxjit import target
from onnxjit.kernels import normalization, simd


def test_native_width_is_the_targets():
    t = target.host()
    assert simd.LANES == t.f32_lanes == simd.native.LANES
    assert simd.native is simd.by_lanes[t.f32_lanes]
    assert [simd.by_lanes[n].LANES for n in (16, 8, 4)] == [16, 8, 4]
    assert simd.LANES16 == 16 and simd.w16.f32 is simd.f32x16


def _kernel(V):
    """One compiled function exercising the constructors of V and the generic intrinsics."""
    @njit
    def run(a, b, out, cnt):
        L = V.LANES
        x = V.load(a, 0)
        y = V.load(b, 0)
        V.store(out, 0, V.fma(x, y, V.bcast(a, 1)))                  # a*b + a[1]
        V.store(out, L, V.add(V.mul(x, V.splat(np.float32(2))), V.sub(y, V.zero())))
        V.store(out, 2 * L, V.max(x, y))
        V.store(out, 3 * L, V.loadm(a, 0, cnt))                       # first cnt lanes, 0 after
        V.store(out, 4 * L, V.load_span(a, 0, 1, cnt, np.float32(-1)))  # lanes 1..cnt-1
        V.store(out, 5 * L, V.relu_if(V.sub(x, y), True))
        V.storem(out, 6 * L, y, cnt)                                  # the rest untouched
        return V.hsum(x), V.hmax(y)
    return run


def _rows_kernel(V):
    """V.rows -> V.transpose -> V.store_rows, and V.transpose -> V.scatter_rows."""
    @njit
    def run(a, i, stride, cnt, nrows, out, o, ostride, ocnt, onrows, sc, idx, scnt):
        t = V.transpose(V.rows(a, i, stride, cnt, nrows))
        V.store_rows(out, o, ostride, t, onrows, ocnt)
        V.scatter_rows(sc, idx, 1, t, scnt)
    return run


@pytest.mark.parametrize("width", [16, 8, 4])
@pytest.mark.parametrize("cnt,nrows,ocnt,onrows", [("n", "n", "n", "n"), (3, "n", 2, "n"),
                                                    ("n", 2, "n", 3), (1, 1, 1, 1)])
def test_transposed_rows_of_each_width_match_numpy(width, cnt, nrows, ocnt, onrows):
    """Rows of a matrix read with V.rows (strided; lanes past cnt and rows past nrows zero and
    never read: NaN lies right after them), transposed, stored back as rows (only onrows rows,
    ocnt lanes each: the rest untouched) and scattered to given offsets."""
    n = width
    cnt, nrows, ocnt, onrows = (n if v == "n" else v for v in (cnt, nrows, ocnt, onrows))
    stride, i = n + 5, 3
    a = np.full(i + stride * n + n, np.nan, np.float32)
    m = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    for r in range(nrows):
        a[i + r * stride:i + r * stride + cnt] = m[r, :cnt]
    want = np.zeros((n, n), np.float32)
    want[:nrows, :cnt] = m[:nrows, :cnt]
    want = want.T
    out = np.full(2 + (n + 1) * n, 7.0, np.float32)
    sc = np.full((n + 2) * n, 9.0, np.float32)
    idx = np.array([-1] + [((r * 2) % (n + 1)) * n for r in range(n)], np.int64)
    _rows_kernel(simd.by_lanes[n])(a, i, stride, cnt, nrows, out, 2, n + 1, ocnt, onrows,
                                   sc, idx, n - 1)
    got = np.full_like(out, 7.0)
    for r in range(onrows):
        got[2 + r * (n + 1):2 + r * (n + 1) + ocnt] = want[r, :ocnt]
    np.testing.assert_array_equal(out, got)
    scat = np.full_like(sc, 9.0)
    for r in range(n - 1):
        scat[idx[1 + r]:idx[1 + r] + n] = want[r]
    np.testing.assert_array_equal(sc, scat)


@pytest.mark.parametrize("width", [16, 8, 4])
def test_intrinsics_of_each_width_match_numpy(width):
    V = simd.by_lanes[width]
    rng = np.random.default_rng(width)
    a = rng.standard_normal(width).astype(np.float32)
    b = rng.standard_normal(width).astype(np.float32)
    cnt = width - 3
    out = np.full(7 * width, 7.0, np.float32)
    s, m = _kernel(V)(a, b, out, cnt)
    part = out.reshape(7, width)
    np.testing.assert_allclose(part[0], a * b + a[1], rtol=1e-6)
    np.testing.assert_allclose(part[1], a * 2 + b, rtol=1e-6)
    np.testing.assert_array_equal(part[2], np.maximum(a, b))
    np.testing.assert_array_equal(part[3], np.where(np.arange(width) < cnt, a, 0))
    lanes = np.arange(width)
    np.testing.assert_array_equal(part[4], np.where((lanes >= 1) & (lanes < cnt), a, -1))
    np.testing.assert_array_equal(part[5], np.maximum(a - b, 0))
    np.testing.assert_array_equal(part[6], np.where(lanes < cnt, b, 7))
    np.testing.assert_allclose(s, a.sum(), rtol=1e-5)
    assert m == b.max()


@pytest.mark.parametrize("cols", [1, 3, 8, 13, 16, 37, 128])
def test_native_softmax_and_layer_norm_rows(cols):
    """The row kernels written on `native` (all widths' tails: cols below, at and past a
    vector) against numpy in float64."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((3, cols)) * 4).astype(np.float32)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(normalization.softmax_f32(x, 1.0), e / e.sum(1, keepdims=True),
                               rtol=2e-6, atol=1e-7)
    scale = rng.standard_normal(cols).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    y, mean, inv = normalization.layer_norm(x, scale, bias, 1e-5)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want * scale + bias, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(mean, x64.mean(1), rtol=1e-5, atol=1e-6)
