"""Clip and HardSwish after a Conv fold into the Conv's epilogue (ops/nn.py clip_into_conv,
hardswish_into_conv; kernels/epilogue.py), on every Conv kernel, against
onnx.reference.ReferenceEvaluator: Clip's bounds as inputs (opset 11+) and as attributes
(opset 6), ReLU6 and other bounds (one-sided, lo > hi), NaN in the image, a residual Add
before the activation, and bounds the fold must leave alone (a graph input, NaN)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper as oh, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit
from onnxjit.target import host

F32 = TensorProto.FLOAT


def _conv_model(xs, ws, strides, pads, group, act, opset=21, residual=False,
                dtype=np.float32, seed=0, bound_input=False):
    """x -> Conv (constant W, B) [-> Add r] -> act -> y; act: ("clip", lo, hi) (None: that
    input / attribute absent), ("hswish",) or ("relu",)."""
    rng = np.random.default_rng(seed)
    tp = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["c"], strides=list(strides),
                          pads=list(pads), group=group)]
    inputs = [oh.make_tensor_value_info("x", tp, list(xs))]
    last = "c"
    if residual:
        nodes.append(oh.make_node("Add", ["c", "r"], ["a"]))
        last = "a"
    kind = act[0]
    if kind == "clip":
        lo, hi = act[1], act[2]
        if opset < 11:
            attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
            nodes.append(oh.make_node("Clip", [last], ["y"], **attrs))
        else:
            names = []
            for name, v in (("lo", lo), ("hi", hi)):
                if v is None:
                    names.append("")
                elif bound_input and name == "lo":
                    names.append(name)
                    inputs.append(oh.make_tensor_value_info(name, tp, []))
                else:
                    names.append(name)
                    inits.append(numpy_helper.from_array(np.array(v, dtype), name))
            while names and names[-1] == "":
                names.pop()
            nodes.append(oh.make_node("Clip", [last] + names, ["y"]))
    elif kind == "hswish":
        nodes.append(oh.make_node("HardSwish", [last], ["y"]))
    else:
        nodes.append(oh.make_node("Relu", [last], ["y"]))
    graph = oh.make_graph(nodes, "g", inputs, [oh.make_tensor_value_info("y", tp, None)], inits)
    if residual:
        graph.input.append(oh.make_tensor_value_info("r", tp, None))
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model, xs, residual_shape=None, dtype=np.float32, nan=False, lo_value=None, seed=1):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(xs) * 4).astype(dtype)
    if nan:     # a few NaN pixels: NaN where they are read, nowhere else
        x[0, 0, 2, 3] = x[-1, -1, -1, -1] = x[0, -1, 0, 0] = np.nan
    feeds = {"x": x}
    if lo_value is not None:
        feeds["lo"] = np.array(lo_value, dtype)
    if residual_shape is not None:
        feeds["r"] = (rng.standard_normal(residual_shape) * 3).astype(dtype)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    rep = onnxjit.prepare(model)
    got = rep.run([feeds[i.name] for i in model.graph.input])[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    return rep


def _kernels(rep):
    """(kernel, op types) of the kernels, views of a Conv's canonical 5-D operands aside."""
    plumbing = {k.name for k in rep.compiled().kernels if k.plumbing}
    return [(r["kernel"], r["op_types"]) for r in rep.explain() if r["kernel"] not in plumbing]


def _fused(rep, op):
    """The activation ran inside the Conv's kernel (one kernel, no separate pass)."""
    ks = _kernels(rep)
    return len(ks) == 1 and ks[0][1][0] == "Conv" and op in ks[0][1]


# (x shape, w shape, strides, pads, group): one Conv per kernel family
CONVS = {
    "1x1_cols": ((1, 16, 24, 24), (40, 16, 1, 1), (1, 1), (0, 0, 0, 0), 1),
    "1x1_small": ((2, 24, 7, 7), (36, 24, 1, 1), (1, 1), (0, 0, 0, 0), 1),
    "dw_s1": ((1, 24, 14, 14), (24, 1, 3, 3), (1, 1), (1, 1, 1, 1), 24),
    "dw_s2": ((1, 16, 20, 20), (16, 1, 3, 3), (2, 2), (1, 1, 1, 1), 16),
    "dw_s2_odd": ((1, 8, 15, 13), (8, 1, 3, 3), (2, 2), (1, 1, 1, 1), 8),
    "dw_5x5": ((1, 8, 12, 12), (8, 1, 5, 5), (1, 1), (2, 2, 2, 2), 8),
    "stem_s2": ((1, 3, 32, 32), (16, 3, 3, 3), (2, 2), (1, 1, 1, 1), 1),
    "winograd": ((1, 8, 24, 24), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), 1),
    "packed_5x5": ((1, 6, 16, 16), (12, 6, 5, 5), (1, 1), (2, 2, 2, 2), 1),
    "grouped": ((1, 8, 10, 10), (8, 4, 3, 3), (1, 1), (1, 1, 1, 1), 2),
}

ACTS = [("clip", 0.0, 6.0), ("clip", -1.5, 0.25), ("hswish",)]


@pytest.mark.parametrize("conv", sorted(CONVS))
@pytest.mark.parametrize("act", ACTS, ids=["relu6", "clip_narrow", "hswish"])
def test_activation_fuses_into_conv(conv, act):
    xs, ws, s, p, g = CONVS[conv]
    if conv.startswith("1x1") and not host().split16:
        pytest.skip("the 1x1 kernels with an epilogue: AVX-512 (packed) or AVX2 (conv_avx2)")
    # NaN stays where it is read (Winograd's transforms spread it over a tile, as any
    # Winograd conv does: not this test's business)
    rep = _run(_conv_model(xs, ws, s, p, g, act), xs, nan=conv != "winograd")
    assert _fused(rep, "Clip" if act[0] == "clip" else "HardSwish"), _kernels(rep)


@pytest.mark.parametrize("bounds", [(None, 6.0), (-2.0, None), (3.0, -1.0), (None, None)],
                         ids=["max_only", "min_only", "lo_above_hi", "neither"])
@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip_bounds_inputs_and_attributes(bounds, opset):
    xs, ws, s, p, g = CONVS["dw_s1"]
    rep = _run(_conv_model(xs, ws, s, p, g, ("clip",) + bounds, opset=opset), xs, nan=True)
    assert _fused(rep, "Clip"), _kernels(rep)


@pytest.mark.parametrize("conv", ["1x1_cols", "1x1_small", "winograd"])
def test_residual_then_clip(conv):
    """Conv + r -> Clip: act(conv + b + r), the residual added before the bounds."""
    xs, ws, s, p, g = CONVS[conv]
    out = (xs[0], ws[0]) + xs[2:]
    rep = _run(_conv_model(xs, ws, s, p, g, ("clip", 0.0, 6.0), residual=True), xs, out)
    assert _fused(rep, "Clip") and "Add" in _kernels(rep)[0][1]


def test_float64_conv_clip_and_hardswish():
    xs, ws, s, p, g = CONVS["dw_s2"]
    for act in (("clip", -0.5, 0.5), ("hswish",)):
        rep = _run(_conv_model(xs, ws, s, p, g, act, dtype=np.float64), xs, dtype=np.float64,
                   nan=True)
        assert _fused(rep, "Clip" if act[0] == "clip" else "HardSwish"), _kernels(rep)


def test_clip_bound_from_graph_input_is_not_folded():
    """A bound the graph computes (here: an input) is not a constant: Clip stays a kernel."""
    xs, ws, s, p, g = CONVS["dw_s1"]
    model = _conv_model(xs, ws, s, p, g, ("clip", 0.0, 6.0), bound_input=True)
    rep = _run(model, xs, lo_value=-0.5)
    assert not _fused(rep, "Clip") and len(_kernels(rep)) == 2


def test_nan_bound_is_not_folded():
    """np.clip with a NaN bound gives NaN everywhere: left to the elementwise Clip."""
    xs, ws, s, p, g = CONVS["dw_s1"]
    rep = _run(_conv_model(xs, ws, s, p, g, ("clip", float("nan"), 6.0)), xs)
    assert not _fused(rep, "Clip")


def test_conv_read_twice_keeps_its_clip_apart():
    """The Conv's output is also a graph output: the Clip must not overwrite it."""
    xs, ws, s, p, g = CONVS["1x1_cols"]
    model = _conv_model(xs, ws, s, p, g, ("clip", 0.0, 6.0))
    model.graph.output.append(oh.make_tensor_value_info("c", F32, None))
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(xs) * 4).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = onnxjit.prepare(model).run([x])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert float(got[1].max()) > 6.0    # the Conv's own output is unclipped


# -- the SIMD 3x3 depthwise kernel (kernels/depthwise.depthwise3x3_f32), straight ------------
DW3_CASES = [
    # x shape, strides, pads (top, left, bottom, right)
    ((1, 3, 9, 7), 1, (1, 1, 1, 1)),        # rows narrower than a vector
    ((2, 5, 6, 16), 1, (1, 1, 1, 1)),       # exactly one vector, batch > 1
    ((1, 2, 5, 33), 1, (0, 2, 1, 0)),       # asymmetric pads, a ragged second vector
    ((1, 2, 4, 49), 1, (0, 0, 0, 0)),       # no padding
    ((1, 4, 3, 100), 1, (1, 1, 1, 1)),      # wide rows (interior vectors)
    ((1, 3, 9, 7), 2, (1, 1, 1, 1)),
    ((1, 3, 20, 20), 2, (1, 1, 1, 1)),
    ((2, 3, 15, 13), 2, (1, 1, 1, 1)),      # odd sizes
    ((1, 2, 11, 70), 2, (0, 0, 1, 1)),      # TF-style "same" stride-2 pads, 3 vectors a row
    ((1, 2, 6, 40), 2, (2, 2, 2, 2)),       # padding wider than a tap
    ((1, 1, 1, 1), 1, (1, 1, 1, 1)),        # one pixel
    ((1, 37, 7, 7), 1, (1, 1, 1, 1)),       # channels-last (small planes): groups of 16 (8) + 5
    ((2, 20, 5, 8), 1, (0, 1, 1, 0)),       # ... batch 2, asymmetric pads
    ((1, 18, 14, 14), 2, (1, 1, 1, 1)),     # ... stride 2 down to 7x7
    ((1, 17, 6, 5), 2, (2, 2, 2, 2)),       # ... padding wider than a tap
    ((1, 2, 61, 70), 1, (1, 1, 1, 1)),      # large planes in bands of rows (DW3_BANDS): 61
    ((1, 2, 95, 91), 2, (1, 0, 0, 1)),      # rows, not a multiple of 4; stride 2, one by one
    ((1, 3, 33, 40), 2, (2, 0, 1, 3)),      # stride 2 split rows (AVX2), pads both sides
    ((1, 2, 23, 130), 2, (1, 0, 0, 1)),     # AVX2: wider than channels-last, one by one
    ((1, 3, 7, 120), 2, (1, 1, 1, 1)),      # AVX2: ... in bands (a small plane)
]


@pytest.mark.parametrize("xs,s,pads", DW3_CASES)
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_depthwise3x3_f32(xs, s, pads, act):
    from onnxjit.kernels.depthwise import depthwise3x3_f32
    from onnxjit.target import host
    if not host().split16:
        pytest.skip("AVX-512 / AVX2 kernel")
    rng = np.random.default_rng(sum(xs) + s + act)
    c = xs[1]
    x = (rng.standard_normal(xs) * 3).astype(np.float32)
    x.reshape(-1)[::23] = np.nan
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    bounds = {0: (0.0, 0.0), 1: (0.0, 0.0), 2: (-1.0, 2.5), 3: (float(np.float32(1 / 6)), 0.5)}
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["c"], group=c, strides=[s, s],
                          pads=[pads[0], pads[1], pads[2], pads[3]])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    if act == 1:
        nodes.append(oh.make_node("Relu", ["c"], ["y"]))
    elif act == 2:
        inits += [numpy_helper.from_array(np.float32(v), n) for n, v in (("lo", -1.0),
                                                                          ("hi", 2.5))]
        nodes.append(oh.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    elif act == 3:
        nodes.append(oh.make_node("HardSwish", ["c"], ["y"]))
    else:
        nodes.append(oh.make_node("Identity", ["c"], ["y"]))
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", F32, list(xs))],
                          [oh.make_tensor_value_info("y", F32, None)], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = depthwise3x3_f32(x, w, b, (s, s), pads, act, bounds[act])
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_dw3_cases_cover_every_band():
    """DW3_CASES hold a plane of each DW3_BANDS entry (and the whole-plane walk)."""
    from onnxjit.kernels.depthwise import DW3_BANDS
    for lim, stride, _ in DW3_BANDS:
        assert any(s == stride and xs[2] * xs[3] > lim for xs, s, _ in DW3_CASES)
    assert any(xs[2] * xs[3] <= min(lim for lim, _, _ in DW3_BANDS) for xs, _, _ in DW3_CASES)


def _dw3_out(xs, s, pads):
    """(OH, OW) of ``depthwise3x3_f32`` for a DW3_CASES row."""
    return ((xs[2] + pads[0] + pads[2] - 3) // s + 1, (xs[3] + pads[1] + pads[3] - 3) // s + 1)


def test_dw3_cases_cover_every_walk():
    """DW3_CASES reach each walk of ``depthwise3x3_f32`` on this target: channels-last at both
    strides (``dw3_channels_last``); on targets narrower than 16 lanes also ``_dw3_rows`` at
    stride 1 (an odd number of output rows: a pair and a single row) and ``_dw3_rows_s2`` at
    stride 2 above DW3_ROWS_S2_MIN, the bands (``_dw3_planes``) at stride 2 below it."""
    from onnxjit.kernels.depthwise import DW3_ROWS_S2_MIN, dw3_channels_last
    from onnxjit.kernels.simd import LANES
    cl = dw3_channels_last.py_func
    for stride in (1, 2):
        assert any(s == stride and cl(_dw3_out(xs, s, p)[1], s) for xs, s, p in DW3_CASES)
    if LANES < 16:
        rows = [(xs, s, p) for xs, s, p in DW3_CASES if not cl(_dw3_out(xs, s, p)[1], s)]
        assert any(s == 1 and _dw3_out(xs, s, p)[0] % 2 for xs, s, p in rows)
        assert any(s == 2 and xs[2] * xs[3] > DW3_ROWS_S2_MIN for xs, s, _ in rows)
        assert any(s == 2 and xs[2] * xs[3] <= DW3_ROWS_S2_MIN for xs, s, _ in rows)


def test_depthwise3x3_f32_edges_do_not_leak():
    """Masked loads never read a neighbouring row or plane: inf there must not show."""
    from onnxjit.kernels.depthwise import depthwise3x3_f32
    from onnxjit.target import host
    if not host().split16:
        pytest.skip("AVX-512 / AVX2 kernel")
    rng = np.random.default_rng(5)
    for width in (7, 20, 40):
        x = rng.standard_normal((1, 4, 9, width)).astype(np.float32)
        x[0, 1, :, 0] = np.inf       # first column: next to the previous row's last column
        x[0, 1, :, -1] = np.inf      # last column: next to the next row's first column
        x[0, 2, -1, :] = np.inf      # last row of plane 2: just before plane 3
        w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(4).astype(np.float32)
        for s in (1, 2):
            got = depthwise3x3_f32(x, w, b, (s, s), (1, 1, 1, 1), 0, (0.0, 0.0))
            assert np.isfinite(got[0, 0]).all() and np.isfinite(got[0, 3]).all()


def test_3x3_depthwise_takes_the_simd_kernel():
    xs = (1, 8, 6, 100)
    model = _conv_model(xs, (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), 8, ("clip", 0.0, 6.0))
    rep = _run(model, xs, nan=True)
    from onnxjit.target import host
    assert ("depthwise3x3_f32(" in rep.source()) == host().split16
    assert _fused(rep, "Clip")


def test_depthwise3x3_f32_two_threads_matches_one():
    """Planes shared out over threads (enough work): the same result as on one thread."""
    import numba
    from onnxjit.kernels.depthwise import depthwise3x3_f32
    from onnxjit.target import host
    if not host().split16 or numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("AVX-512 / AVX2 kernel, 2 Numba threads")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 21, 60, 60)).astype(np.float32)
    w = rng.standard_normal((21, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(21).astype(np.float32)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = depthwise3x3_f32(x, w, b, (1, 1), (1, 1, 1, 1), 2, (0.0, 6.0))
        numba.set_num_threads(2)
        two = depthwise3x3_f32(x, w, b, (1, 1), (1, 1, 1, 1), 2, (0.0, 6.0))
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    assert one.size * 9 >= 1 << 19     # big enough for the threaded path


def test_depthwise3x3_f32_channels_last_two_threads_matches_one():
    """Small planes (channels-last): groups of V.LANES channels shared out over threads."""
    import numba
    from onnxjit.kernels.depthwise import depthwise3x3_f32, dw3_channels_last
    from onnxjit.target import host
    if not host().split16 or numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("AVX-512 / AVX2 kernel, 2 Numba threads")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 600, 7, 7)).astype(np.float32)
    w = rng.standard_normal((600, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(600).astype(np.float32)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = depthwise3x3_f32(x, w, b, (1, 1), (1, 1, 1, 1), 3, (float(np.float32(1 / 6)), 0.5))
        numba.set_num_threads(2)
        two = depthwise3x3_f32(x, w, b, (1, 1), (1, 1, 1, 1), 3, (float(np.float32(1 / 6)), 0.5))
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    assert dw3_channels_last.py_func(one.shape[3], 1) and one.size * 9 >= 1 << 19
