"""Explicit-vector kernels at every tail and remainder size, with guard bytes around their buffers.

The AVX-512 kernels (kernels/sgemm.py and the kernels built on its intrinsics) load and store
16-lane vectors through llvmlite intrinsics, masked on ragged tails: NUMBA_BOUNDSCHECK cannot see
those accesses. Here each kernel works on views into larger buffers: the output's surroundings
(before, after, and between rows where rows are strided) hold a sentinel that must survive, and
the inputs' surroundings hold NaN, which poisons any result that reads them. Sizes cover n mod 16
and mod 32 (0, 1, 15, 16, 17, 31, 32, 33 ...), every row tail of the 12/8/4/1-row micro-kernels,
k mod 4 (the unrolled K loop) and the K and column block boundaries. Oracle: numpy in float64
(int64 for the integer GEMM).
"""
import numpy as np
import pytest

from onnxjit.kernels import conv_s2 as s2
from onnxjit.kernels import qgemm, sgemm
from onnxjit.kernels.normalization import _layer_norm_f32, softmax_f32
from tests.helpers import numba_threads

SENTINEL = np.float32(-7.25e7)
GUARD = 80          # floats of guard on each side (more than a vector's 16 lanes, and 32)


def _guarded(data, fill):
    """(buffer, view): a flat float32 view holding `data`, inside a buffer filled with `fill`."""
    data = np.asarray(data, np.float32).ravel()
    buf = np.full(data.size + 2 * GUARD, fill, np.float32)
    view = buf[GUARD:GUARD + data.size]
    view[:] = data
    return buf, view


def _assert_guards(buf, size, what):
    outside = np.concatenate([buf[:GUARD], buf[GUARD + size:]])
    bad = np.flatnonzero(outside != SENTINEL)
    assert bad.size == 0, f"{what}: {bad.size} guard floats overwritten (first at {bad[:5]})"


def _close(got, want, scale, what, tol=4e-6):
    assert np.all(np.isfinite(got)), f"{what}: NaN/inf in the result (a read outside its input?)"
    err = np.abs(got.astype(np.float64) - want) / (scale + 1.0)
    assert err.max(initial=0.0) < tol, f"{what}: max relative error {err.max()}"


# -- sgemm: 12/8/4/1-row micro-kernels over 32-column panels (unmasked vectors) ---------------
M_TAILS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 20, 23, 24, 25]
N_TAILS = [1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65]
K_TAILS = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33]


def _sgemm_case(rng, m, k, n, act, rows=None, panels=None):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    bp = sgemm.pack_b(b)
    npan = bp.shape[0]
    ldc = npan * sgemm.NR
    biasp = np.zeros(ldc, np.float32)
    biasp[:n] = bias
    _, af = _guarded(a, np.nan)
    _, bpf = _guarded(bp, np.nan)
    _, biasf = _guarded(biasp, np.nan)
    cbuf, cf = _guarded(np.full(m * ldc, SENTINEL), SENTINEL)
    r0, r1 = rows or (0, m)
    p0, p1 = panels or (0, npan)
    sgemm._sgemm_block(af, k, bpf, biasf, act, cf, ldc, r0, r1, p0, p1)
    want = a.astype(np.float64) @ b + bias
    if act:
        want = np.maximum(want, 0)
    scale = np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(bias)
    c = cf.reshape(m, ldc)
    block = (slice(r0, r1), slice(p0 * sgemm.NR, min(n, p1 * sgemm.NR)))
    what = f"sgemm m={m} k={k} n={n} act={act} rows={r0, r1} panels={p0, p1}"
    _close(c[block], want[block], scale[block], what)
    untouched = np.ones(c.shape, bool)
    untouched[r0:r1, p0 * sgemm.NR:p1 * sgemm.NR] = False
    assert np.all(c[untouched] == SENTINEL), f"{what}: wrote outside its rows and panels"
    _assert_guards(cbuf, cf.size, what)


@pytest.mark.parametrize("k", K_TAILS)
def test_sgemm_block_tails(k):
    rng = np.random.default_rng(k)
    for m in M_TAILS:
        for n in N_TAILS:
            _sgemm_case(rng, m, k, n, act=(m + n) % 2)


def test_sgemm_block_k_blocks_and_sub_blocks():
    """K past one block (KCMAX), and the row / panel sub-blocks the threaded split hands out."""
    rng = np.random.default_rng(1)
    for m, k, n in [(13, sgemm.KCMAX + 1, 33), (5, 2 * sgemm.KCMAX + 3, 17), (25, 600, 65)]:
        _sgemm_case(rng, m, k, n, act=1)
    for m, n, rows, panels in [(25, 97, (12, 25), (1, 3)), (25, 97, (0, 12), (3, 4)),
                               (30, 65, (24, 30), (0, 1)), (13, 33, (1, 2), (1, 2))]:
        _sgemm_case(rng, m, 9, n, act=0, rows=rows, panels=panels)


def test_sgemm_packed_tails():
    """The public entry (its scratch and trimming copy) at the same tails, against numpy."""
    rng = np.random.default_rng(2)
    for m in [0, 1, 4, 11, 13]:
        for k in [0, 1, 5, 17]:
            for n in N_TAILS:
                a = rng.standard_normal((m, k)).astype(np.float32)
                b = rng.standard_normal((k, n)).astype(np.float32)
                got = sgemm.sgemm_packed(a, sgemm.pack_b(b), n, None, 0)
                want = a.astype(np.float64) @ b
                _close(got, want, np.abs(a).astype(np.float64) @ np.abs(b), f"m={m} k={k} n={n}")


# -- conv1x1 GEMM: masked loads and stores on the ragged column tile ----------------------------
NCOLS = [0, 1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 97]
ROWS = [0, 1, 3, 4, 5, 8, 11, 12, 13, 20, 31, 32, 33, 45]


def _gemm_cols_case(rng, m, kk, ncols, act, has_res, pad=19):
    """Y (m, ncols) at row stride ncols + pad inside a sentinel buffer; B likewise inside NaN."""
    w = rng.standard_normal((m, kk)).astype(np.float32)
    bmat = rng.standard_normal((kk, ncols)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    res = rng.standard_normal((m, ncols)).astype(np.float32)
    wp = sgemm.pack_a(w)
    npan = wp.shape[0]
    ldb = ldy = ncols + pad
    bfull = np.full((kk, ldb), np.nan, np.float32)
    bfull[:, :ncols] = bmat
    _, bf = _guarded(bfull, np.nan)
    yfull = np.full((m, ldy), SENTINEL, np.float32)
    if has_res:
        yfull[:, :ncols] = res
    ybuf, yf = _guarded(yfull, SENTINEL)
    biasp = np.zeros(npan * sgemm.NR, np.float32)
    biasp[:m] = bias
    _, biasf = _guarded(biasp, np.nan)
    _, wpf = _guarded(wp, np.nan)
    sgemm.gemm_cols(wpf, 0, m, kk, bf, 0, ldb, ncols, yf, 0, ldy, biasf, act, has_res)
    want = w.astype(np.float64) @ bmat + bias[:, None] + (res if has_res else 0)
    if act:
        want = np.maximum(want, 0)
    scale = np.abs(w).astype(np.float64) @ np.abs(bmat) + np.abs(bias)[:, None] + np.abs(res)
    y = yf.reshape(m, ldy)
    what = f"gemm_cols m={m} k={kk} ncols={ncols} act={act} res={has_res}"
    _close(y[:, :ncols], want, scale, what)
    assert np.all(y[:, ncols:] == SENTINEL), f"{what}: wrote past a row's last column"
    _assert_guards(ybuf, yf.size, what)


@pytest.mark.parametrize("kk", [1, 2, 3, 4, 5, 9, 17])
def test_conv1x1_gemm_tails(kk):
    rng = np.random.default_rng(kk)
    for m in ROWS:
        for ncols in NCOLS:
            _gemm_cols_case(rng, m, kk, ncols, act=ncols % 2, has_res=(m + ncols) % 3 == 0)


def test_conv1x1_gemm_blocks():
    """K blocks of CONV_KC rows and the L2 column blocks (whose last block is ragged too)."""
    rng = np.random.default_rng(3)
    kc = sgemm.CONV_KC
    for m, kk, ncols in [(13, kc + 1, 33), (33, 2 * kc + 5, 17), (5, kc, 1030), (12, 300, 1)]:
        _gemm_cols_case(rng, m, kk, ncols, act=1, has_res=True)
        _gemm_cols_case(rng, m, kk, ncols, act=0, has_res=False, pad=1)


def test_conv1x1_packed_tails():
    """The public 1x1 Conv (streamed and small-H*W paths) at tail sizes, against numpy."""
    rng = np.random.default_rng(4)
    for c, m, h, w in [(3, 5, 1, 17), (4, 33, 3, 11), (2, 13, 9, 9), (5, 31, 1, 65),
                       (3, 12, 16, 17), (1, 1, 1, 1), (17, 8, 5, 13), (0, 5, 3, 17),
                       (3, 5, 0, 4)]:
        x = rng.standard_normal((2, c, h, w)).astype(np.float32)
        wt = rng.standard_normal((m, c)).astype(np.float32)
        got = sgemm.conv1x1_packed(x, sgemm.pack_a(wt), m, None, 0, None)
        want = np.einsum("mc,nchw->nmhw", wt.astype(np.float64), x)
        scale = np.einsum("mc,nchw->nmhw", np.abs(wt).astype(np.float64), np.abs(x))
        _close(got, want, scale, f"conv1x1 c={c} m={m} h={h} w={w}")


# -- stride-2 Conv: masked row reads at the image edges, masked stores of the last 16 --------
def _conv_s2_reference(x, w, bias, pads):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // 2 + 1
    ow = (wd + pads[1] + pads[3] - kw) // 2 + 1
    y = np.zeros((n, m, oh, ow))
    scale = np.zeros((n, m, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + 2 * oh - 1:2, kx:kx + 2 * ow - 1:2]
            y += np.einsum("mc,nchw->nmhw", w[:, :, ky, kx], patch)
            scale += np.einsum("mc,nchw->nmhw", np.abs(w[:, :, ky, kx]), np.abs(patch))
    return y + bias[None, :, None, None], scale + np.abs(bias)[None, :, None, None]


def _conv_s2_case(rng, n, c, h, wd, m, kernel, pads, act, has_res):
    kh, kw = kernel
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((m, c, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    want, scale = _conv_s2_reference(x, w, bias, pads)
    oh, ow = want.shape[2:]
    res = rng.standard_normal(want.shape).astype(np.float32)
    if has_res:
        want, scale = want + res, scale + np.abs(res)
    if act:
        want = np.maximum(want, 0)
    wq = s2.pack_s2(w)
    _, xf = _guarded(x, np.nan)
    _, wf = _guarded(wq, np.nan)
    _, bf = _guarded(np.pad(bias, (0, wq.shape[0] * sgemm.NR - m)), np.nan)
    _, rf = _guarded(res if has_res else np.zeros(1, np.float32), np.nan)
    ybuf, yf = _guarded(np.full(want.size, SENTINEL), SENTINEL)
    k = c * kh * kw
    scratch = (k + (m + s2.MB - 1) // s2.MB * s2.MB) * ((ow + 15) // 16 * 16)
    _, xin = _guarded(np.zeros(scratch, np.float32), np.nan)
    shape = np.array([n, c, h, wd], np.int64)
    s2._rows(xf, wf, bf, yf, rf, shape, m, oh, ow, kh, kw, pads[0], pads[1], act, (0.0, 0.0),
             has_res, xin, sgemm.I0, n * oh)
    what = f"conv_s2 x={x.shape} m={m} kernel={kernel} pads={pads} act={act} res={has_res}"
    _close(yf.reshape(want.shape), want, scale, what)
    _assert_guards(ybuf, yf.size, what)


@pytest.mark.parametrize("kernel,pads", [((3, 3), (1, 1, 1, 1)), ((3, 3), (0, 0, 0, 0)),
                                         ((7, 7), (3, 3, 3, 3)), ((2, 5), (0, 2, 1, 0)),
                                         ((1, 1), (0, 0, 0, 0))])
def test_conv_s2_tails(kernel, pads):
    rng = np.random.default_rng(kernel[0] * 10 + kernel[1])
    # input widths giving output rows of 1, 2, 15, 16, 17, 31, 32, 33 columns
    for ow in [1, 2, 15, 16, 17, 31, 32, 33]:
        wd = max(1, 2 * (ow - 1) + kernel[1] - pads[1] - pads[3])
        for m, c in [(1, 1), (7, 3), (8, 4), (9, 3), (33, 2)]:
            _conv_s2_case(rng, 1 + ow % 2, c, 5, wd, m, kernel, pads, act=ow % 2,
                          has_res=(m + ow) % 2 == 0)


# -- row kernels with masked tails: softmax and layer normalization ---------------------------
ROW_WIDTHS = [1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 65]


def test_softmax_f32_tails():
    rng = np.random.default_rng(5)
    for n in ROW_WIDTHS:
        x = rng.standard_normal((3, n)).astype(np.float32) * 4
        _, xf = _guarded(x, np.nan)            # a read past the rows would make NaNs
        got = softmax_f32(xf.reshape(3, n), 0.5)
        z = 0.5 * x.astype(np.float64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_layer_norm_f32_tails():
    rng = np.random.default_rng(6)
    for n in ROW_WIDTHS:
        x = rng.standard_normal((3, n)).astype(np.float32)
        scale = rng.standard_normal(n).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        _, xf = _guarded(x, np.nan)
        _, sf = _guarded(scale, np.nan)
        _, bf = _guarded(bias, np.nan)
        got, mean, inv = _layer_norm_f32(xf.reshape(3, n), sf, bf, 1e-5)
        x64 = x.astype(np.float64)
        mu = x64.mean(axis=1, keepdims=True)
        sd = np.sqrt(((x64 - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(got, (x64 - mu) / sd * scale + bias, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(mean, mu[:, 0], rtol=1e-5, atol=1e-6)


# -- qgemm "madd" (AVX2 vpmaddubsw): 4-row micro-kernel over 16-column panels, K in quads ------
def _bytes_guarded(data, fill):
    """A C-contiguous view holding the int8/uint8 `data`, inside a buffer of `fill` bytes: a read
    past it would add fill * weight to some sum."""
    data = np.ascontiguousarray(data)
    buf = np.full(data.size + 2 * 4 * GUARD, fill, data.dtype)
    view = buf[4 * GUARD:4 * GUARD + data.size].reshape(data.shape)
    view[...] = data
    return view


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7, 8, 9, 33, 130])
def test_qgemm_madd_tails(k):
    """Exact int32 sums at every row tail of the 4-row kernel and n mod 16, int8 and uint8
    weights with zero points, the weight pairs over vpmaddubsw's int16 limit included (a = 255:
    the largest products). The kernel runs on any AVX2 CPU (AVX-512 ones too); the VNNI kernel
    is checked on the same cases where the target has it."""
    from onnxjit.target import host
    vnni = host().int8_dot == "vnni"
    rng = np.random.default_rng(7 + k)
    fixed = 0
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 13):
        for n in (1, 15, 16, 17, 31, 32, 33):
            for btype, zb in ((np.int8, -3), (np.uint8, 128), (np.int8, 0)):
                info = np.iinfo(btype)
                mid = 128 if btype == np.uint8 else 0
                b = np.clip(np.round(rng.standard_normal((k, n)) * 45 + mid), info.min, info.max)
                b = b.astype(btype)
                packed = qgemm.pack_b_madd(b, zb)
                if packed is None:
                    continue
                bp, colsum, zbs, fix = packed
                fixed += fix.shape[1]
                za = np.array([rng.integers(0, 256)], np.uint8)
                for a in (rng.integers(0, 256, (m, k)).astype(np.uint8),
                          np.full((m, k), 255, np.uint8)):
                    got = qgemm.qgemm_u8s8_madd(_bytes_guarded(a, 255), za,
                                                _bytes_guarded(bp, 127), colsum, zbs, n, fix)
                    want = (a.astype(np.int64) - int(za[0])) @ (b.astype(np.int64) - zb)
                    assert got.dtype == np.int32 and got.shape == (m, n)
                    np.testing.assert_array_equal(got, want, err_msg=f"m={m} k={k} n={n} {btype}")
                    if vnni:                # the AVX512-VNNI kernel (6x32) on the same case
                        bq, cq, zq = qgemm.pack_b_s8(b, zb)
                        got = qgemm.qgemm_u8s8(_bytes_guarded(a, 255), za,
                                               _bytes_guarded(bq, 127), cq, zq, n)
                        np.testing.assert_array_equal(got, want, err_msg=f"vnni m={m} k={k} n={n}")
    if k >= 4:
        assert fixed > 0, "no weight pair over the int16 limit: the fix-up went untested"


def test_qgemm_madd_refuses_wide_weights():
    """Uniform int8 weights: a quarter of the pairs over the limit, so no madd packing (the
    lowering then keeps the float64 path)."""
    b = np.random.default_rng(3).integers(-128, 128, (64, 48)).astype(np.int8)
    assert qgemm.pack_b_madd(b, 0) is None


@pytest.mark.parametrize("m", [61, 96])
def test_qgemm_threads_split_rows(m):
    """Products over QGEMM_PAR_MIN_MACS run their row blocks on Numba's threads: the int32 sums
    and the dequantized float32 rows (both kernels: VNNI where the target has it, AVX2 madd)
    equal the exact product on 1 thread and on 2, a ragged last block included."""
    from onnxjit.kernels.parallel import QGEMM_PAR_MIN_MACS
    from onnxjit.target import host
    rng = np.random.default_rng(m)
    k, n = 260, 200
    assert m * k * n >= QGEMM_PAR_MIN_MACS
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = np.clip(np.round(rng.standard_normal((k, n)) * 40), -128, 127).astype(np.int8)
    za, zb = np.array([7], np.uint8), -2
    scale = np.array(0.0125, np.float32)   # 0-d, as DynamicQuantizeLinear's y_scale
    bias = rng.standard_normal(n).astype(np.float32)
    want = (a.astype(np.int64) - 7) @ (b.astype(np.int64) - zb)
    want_f = want.astype(np.float32) * scale[()] + bias
    kernels = []
    packed = qgemm.pack_b_madd(b, zb)
    assert packed is not None
    bp, colsum, zbs, fix = packed
    kernels.append((lambda: qgemm.qgemm_u8s8_madd(a, za, bp, colsum, zbs, n, fix),
                    lambda: qgemm.qgemm_u8s8_madd_f32(a, za, bp, colsum, zbs, n, fix, scale,
                                                      bias)))
    if host().int8_dot == "vnni":
        bq, cq, zq = qgemm.pack_b_s8(b, zb)
        kernels.append((lambda: qgemm.qgemm_u8s8(a, za, bq, cq, zq, n),
                        lambda: qgemm.qgemm_u8s8_f32(a, za, bq, cq, zq, n, scale, bias)))
    for sums, dequantized in kernels:
        for threads in (1, 2):
            with numba_threads(threads):
                np.testing.assert_array_equal(sums(), want, err_msg=f"{threads} threads")
                np.testing.assert_array_equal(dequantized(), want_f, err_msg=f"{threads} threads")


# -- movement.transpose: 2-D and batched 2-D in 16 x 16 tiles (float32: vector loads) -------------
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_transpose_tiles_at_every_edge(dtype):
    """Whole tiles, ragged rows and columns, a batch: the vector loads of a float32 tile never
    reach past x (x sits in a buffer of sentinels), and every element lands where numpy puts
    it; the general (odometer) path keeps the other permutations. Shapes and perms go in
    padded to the kernel's canonical rank, as the lowering passes them."""
    from onnxjit.kernels.movement import transpose
    from onnxjit.ops.movement import canonical_transpose
    rng = np.random.default_rng(5)
    for shape, perm in [((16, 16), (1, 0)), ((32, 48), (1, 0)), ((17, 33), (1, 0)),
                        ((15, 1), (1, 0)), ((1, 40), (1, 0)), ((3, 31, 16), (0, 2, 1)),
                        ((2, 16, 47), (0, 2, 1)), ((4, 5, 6), (2, 0, 1))]:
        n = int(np.prod(shape))
        buf = np.full(n + 2 * GUARD, SENTINEL).astype(dtype)
        x = buf[GUARD:GUARD + n].reshape(shape)
        x[...] = (rng.standard_normal(shape) * 1000).astype(dtype)
        out = tuple(shape[p] for p in perm)
        y = transpose(x, *canonical_transpose(shape, perm), out)
        np.testing.assert_array_equal(y, x.transpose(perm), err_msg=f"{shape} {perm}")
