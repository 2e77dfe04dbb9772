"""Resize/Upsample, GridSample, AffineGrid, RoiAlign, LpPool, DeformConv against onnx's
reference evaluator (one-node models)."""
import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from tests.helpers import NP_TO_ONNX, numba_threads

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws the same data however xdist orders the tests."""
    global RNG
    RNG = np.random.default_rng(0)
TOL = {np.dtype(np.float32): dict(rtol=1e-5, atol=1e-6), np.dtype(np.float64): dict(rtol=1e-12, atol=1e-12)}


def data(shape, dtype=np.float32):
    """Random test data of the given shape and dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if dtype.kind in "iu":
        return RNG.integers(0, 200 if dtype.kind == "u" else 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def C(array):
    """Marks an input given as an initializer (a compile-time constant)."""
    return ("const", np.asarray(array))


def model(op, inputs, opset=19, **attrs):
    """One-node model over `inputs` {name: array | C(array) | None (absent)}, in input order."""
    names = [n if a is not None else "" for n, a in inputs.items()]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], op.lower(),
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], a.shape)
         for n, a in inputs.items() if isinstance(a, np.ndarray)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(a[1], n) for n, a in inputs.items() if isinstance(a, tuple)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(op, inputs, opset=19, tol=None, **attrs):
    """Run through onnxjit and the reference evaluator and compare."""
    m = model(op, inputs, opset, **attrs)
    feeds = {n: a for n, a in inputs.items() if isinstance(a, np.ndarray)}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    got = onnxjit.backend.prepare(m).run(list(feeds.values()))[0]
    assert got.shape == want.shape
    x = next(iter(feeds.values()))
    if x.dtype.kind in "iub":
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, **(tol or TOL[x.dtype]))


# ---- Resize ------------------------------------------------------------------------------

UP, DOWN = np.array([1, 1, 1.7, 2.3], np.float32), np.array([1, 1, 0.6, 0.45], np.float32)
CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


def resize_inputs(x, roi=None, scales=None, sizes=None):
    """Resize's inputs in order; scales/sizes/roi become initializers unless given as arrays."""
    return {"x": x, "roi": roi, "scales": scales, "sizes": sizes}


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [UP, DOWN], ids=["up", "down"])
def test_resize_modes_and_transforms(mode, ctm, scales):
    check("Resize", resize_inputs(data((1, 2, 5, 7)), scales=C(scales)),
          mode=mode, coordinate_transformation_mode=ctm)


@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("shape,sizes", [((1, 16, 48, 48), (96, 96)),       # W first, threads
                                         ((2, 3, 50, 40), (17, 90)),        # W up, H down
                                         ((1, 20, 41, 60), (123, 31))],     # H first
                         ids=["up", "mixed", "h-first"])
def test_linear_resize_of_planes(shape, sizes, ctm):
    """float32 NCHW linear Resize over H and W runs kernels/resize.bilinear_planes_f32 (plane by
    plane, the planes split over threads from RESIZE_PAR_MIN outputs): against the reference,
    the generic table kernel it replaces (which sums the last axis's taps in float64), and the
    same on 1 and 2 threads."""

    import onnxjit.ops.resize as lowering
    x = data(shape)
    m = model("Resize", resize_inputs(x, sizes=C(np.array(shape[:2] + sizes, np.int64))),
              mode="linear", coordinate_transformation_mode=ctm)
    rep = onnxjit.backend.prepare(m)
    assert "bilinear_planes_f32" in rep.source()
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = rep.run([x])[0]
    np.testing.assert_allclose(got, want, **TOL[x.dtype])
    keep, lowering._bilinear_planes = lowering._bilinear_planes, lambda *a: None
    try:
        generic = onnxjit.backend.prepare(m)
    finally:
        lowering._bilinear_planes = keep
    assert "bilinear_planes_f32" not in generic.source()
    np.testing.assert_allclose(got, generic.run([x])[0], rtol=1e-6, atol=1e-6)
    with numba_threads(2):
        np.testing.assert_array_equal(rep.run([x])[0], got)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
@pytest.mark.parametrize("shape,sizes", [((1, 16, 48, 48), (96, 96)),     # 2x: each element twice
                                         ((2, 3, 7, 9), (21, 27)),         # 3x: gathered
                                         ((1, 5, 10, 13), (4, 30))],       # H down, W up
                         ids=["2x", "3x", "mixed"])
def test_nearest_resize_of_planes(shape, sizes, dtype):
    """Nearest Resize of an NCHW tensor over H and W runs kernels/resize.nearest_planes (rows
    gathered, or copied when the source row repeats; 2x columns written twice without a
    gather): equal to the reference, also on 2 threads."""
    x = data(shape, dtype)
    m = model("Resize", resize_inputs(x, sizes=C(np.array(shape[:2] + sizes, np.int64))),
              mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rep = onnxjit.backend.prepare(m)
    assert "nearest_planes" in rep.source()
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = rep.run([x])[0]
    np.testing.assert_array_equal(got, want)
    with numba_threads(2):
        np.testing.assert_array_equal(rep.run([x])[0], want)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("sizes", [(1, 1, 9, 3)])
def test_resize_nearest_modes_with_sizes(nearest_mode, sizes):
    # roi and scales as empty run-time tensors, sizes as a run-time input (specialized on)
    check("Resize", resize_inputs(data((1, 1, 6, 5)), np.zeros(0, np.float32),
                                  np.zeros(0, np.float32), np.array(sizes, np.int64)),
          mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode="asymmetric")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [DOWN, np.array([1, 1, 0.3, 0.8], np.float32), UP],
                         ids=["down", "down3", "up"])
def test_resize_antialias(mode, scales):
    check("Resize", resize_inputs(data((1, 2, 9, 8)), scales=C(scales)), mode=mode, antialias=1)


@pytest.mark.parametrize("a,exclude", [(-0.5, 1), (-0.75, 1), (-0.5, 0)])
def test_resize_cubic_coefficients(a, exclude):
    check("Resize", resize_inputs(data((1, 1, 4, 6)), scales=C(UP)),
          mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("roi,axes", [([0.4, 0.6, 0.6, 0.8], None), ([-0.2, 0.3, 1.3, 0.9], None),
                                      ([0.1, 0.7, 0.8, 1.2], [3, 2])])
def test_resize_tf_crop_and_resize(mode, roi, axes):
    if axes is None:
        roi, sizes = [0, 0] + roi[:2] + [1, 1] + roi[2:], [1, 2, 4, 7]
    else:
        sizes = [7, 4]
    attrs = dict(axes=axes) if axes else {}
    check("Resize", resize_inputs(data((1, 2, 6, 5)), np.array(roi, np.float32),
                                  sizes=C(np.array(sizes, np.int64))),
          mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
          extrapolation_value=-3.5, **attrs)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [3, 1]])
def test_resize_axes_and_aspect_policy(policy, axes):
    check("Resize", resize_inputs(data((2, 3, 6, 5)), sizes=C(np.array([9, 4], np.int64))),
          mode="linear", axes=axes, keep_aspect_ratio_policy=policy)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_dtypes(dtype, mode):
    check("Resize", resize_inputs(data((1, 2, 4, 5), dtype), scales=C(UP)), mode=mode)


@pytest.mark.parametrize("shape,scales", [((7,), [2.5]), ((3, 4, 5), [0.5, 1.5, 2.0]),
                                          ((1, 2, 3, 4, 5), [1, 1, 1.5, 0.8, 2.0])])
def test_resize_other_ranks(shape, scales):
    check("Resize", resize_inputs(data(shape), scales=C(np.array(scales, np.float32))),
          mode="linear")


@pytest.mark.parametrize("opset,mode", [(11, "nearest"), (11, "linear"), (11, "cubic"), (13, "linear")])
def test_resize_older_opsets(opset, mode):
    check("Resize", resize_inputs(data((1, 1, 4, 5)), C(np.zeros(0, np.float32)), C(UP)),
          opset=opset, mode=mode)


def test_resize_scales_as_graph_input_specializes_on_contents():
    x = data((1, 1, 3, 4))
    m = model("Resize", resize_inputs(x, scales=UP), mode="linear")
    rep = onnxjit.backend.prepare(m)
    for s in (UP, DOWN):
        want = ReferenceEvaluator(m).run(None, {"x": x, "scales": s})[0]
        np.testing.assert_allclose(rep.run([x, s])[0], want, rtol=1e-5, atol=1e-6)


def test_resize_bool_nearest_and_identity():
    # the reference cannot resize bool tensors: compare with the same data as uint8
    b = data((1, 1, 3, 4), np.bool_)
    outs = [onnxjit.backend.prepare(model("Resize", resize_inputs(a, scales=C(UP)))).run([a])[0]
            for a in (b, b.astype(np.uint8))]
    assert outs[0].dtype == np.bool_
    np.testing.assert_array_equal(outs[0], outs[1].astype(bool))
    x = data((1, 1, 3, 4))
    m = model("Resize", resize_inputs(x, scales=C(np.ones(4, np.float32))), mode="linear")
    np.testing.assert_array_equal(onnxjit.backend.prepare(m).run([x])[0], x)


@pytest.mark.parametrize("attrs", [dict(mode="area"),
                                   dict(coordinate_transformation_mode="tf_half_pixel_for_nn"),
                                   dict(nearest_mode="simple"), dict(keep_aspect_ratio_policy="fill")])
def test_resize_rejects_unknown_attribute_values(attrs):
    x = data((1, 1, 3, 4))
    m = model("Resize", resize_inputs(x, sizes=C(np.array([1, 1, 5, 5], np.int64))), **attrs)
    with pytest.raises(Exception, match=next(iter(attrs))):
        onnxjit.backend.prepare(m).run([x])


@pytest.mark.parametrize("opset,scales", [(9, [1, 1, 2, 3]), (9, [1, 2, 1, 2]), (7, [1, 1, 3, 2])])
def test_upsample_nearest(opset, scales):
    x = data((1, 2, 3, 2))
    if opset == 7:   # the reference has no Upsample-7: nearest is a repeat along each axis
        m = model("Upsample", {"x": x}, opset=7, mode="nearest", scales=[float(s) for s in scales])
        want = x
        for axis, k in enumerate(scales):
            want = np.repeat(want, k, axis=axis)
        np.testing.assert_array_equal(onnxjit.backend.prepare(m).run([x])[0], want)
    else:
        check("Upsample", {"x": x, "scales": C(np.array(scales, np.float32))}, opset=9, mode="nearest")


# ---- GridSample / AffineGrid -------------------------------------------------------------

@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    grid = RNG.uniform(-1.4, 1.4, (2, 3, 5, 2)).astype(np.float32)
    # the reference sums cubic taps in float32 (we use float64): cancellation costs ~1e-6
    tol = dict(rtol=1e-5, atol=1e-5 if mode == "cubic" else 1e-6)
    check("GridSample", {"x": data((2, 3, 4, 6)), "grid": grid}, opset=20, tol=tol,
          mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding,align", [("zeros", 0), ("border", 1), ("reflection", 0)])
def test_grid_sample_3d_float64(mode, padding, align):
    grid = RNG.uniform(-1.3, 1.3, (1, 2, 3, 4, 3))
    # the reference rounds the unnormalized coordinates to float32
    check("GridSample", {"x": data((1, 2, 3, 4, 5), np.float64), "grid": grid}, opset=22,
          tol=dict(rtol=1e-6, atol=1e-6), mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_grid_sample_opset16_names(mode):
    x, grid = data((1, 2, 4, 4)), RNG.uniform(-1.2, 1.2, (1, 3, 3, 2)).astype(np.float32)
    new = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    want = ReferenceEvaluator(model("GridSample", {"x": x, "grid": grid}, opset=20, mode=new)).run(
        None, {"x": x, "grid": grid})[0]
    m16 = model("GridSample", {"x": x, "grid": grid}, opset=16, mode=mode)
    got = onnxjit.backend.prepare(m16).run([x, grid])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grid_sample_far_and_nan_coordinates_read_zeros():
    x = data((1, 1, 3, 3))
    grid = np.array([[[[1e30, -1e30], [np.nan, 0.0], [-7.0, 9.0]]]], np.float32)
    for mode in ("nearest", "linear", "cubic"):
        m = model("GridSample", {"x": x, "grid": grid}, opset=20, mode=mode)
        got = onnxjit.backend.prepare(m).run([x, grid])[0]
        np.testing.assert_array_equal(got, np.zeros((1, 1, 1, 3), np.float32))


@pytest.mark.parametrize("size,align,dtype", [
    ((2, 3, 4, 5), 0, np.float32), ((2, 3, 4, 5), 1, np.float32), ((1, 2, 3, 4, 5), 0, np.float32),
    ((1, 2, 3, 4, 5), 1, np.float32), ((2, 3, 4, 5), 1, np.float64)])
def test_affine_grid(size, align, dtype):
    k = len(size) - 2
    theta = RNG.standard_normal((size[0], k, k + 1)).astype(dtype)
    # the reference rounds its result to float32 whatever theta's dtype
    check("AffineGrid", {"theta": theta, "size": np.array(size, np.int64)}, opset=20,
          tol=dict(rtol=1e-6, atol=1e-6), align_corners=align)


# ---- RoiAlign ----------------------------------------------------------------------------

ROIS = np.array([[0, 0, 9, 9], [0, 5, 4, 9], [5.5, 5.2, 9.1, 9.7], [-3, 2, 12, 20], [2, 2, 2.2, 2.1]],
                np.float32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio,scale,dtype", [(0, 1.0, np.float32), (2, 0.5, np.float64)])
def test_roi_align(mode, ctm, sampling_ratio, scale, dtype):
    check("RoiAlign", {"x": data((2, 3, 10, 10), dtype), "rois": ROIS.astype(dtype),
                       "batch": np.array([0, 1, 1, 0, 1], np.int64)}, opset=16,
          coordinate_transformation_mode=ctm, mode=mode, output_height=3, output_width=4,
          sampling_ratio=sampling_ratio, spatial_scale=scale)


def test_roi_align_opset10_and_bad_batch_index():
    x, rois = data((1, 2, 8, 8)), ROIS[:2] * 0.8
    # RoiAlign-10 has no half-pixel shift: the opset-16 output_half_pixel mode
    m10 = model("RoiAlign", {"x": x, "rois": rois, "batch": np.zeros(2, np.int64)}, opset=10,
                output_height=2, output_width=2)
    m16 = model("RoiAlign", {"x": x, "rois": rois, "batch": np.zeros(2, np.int64)}, opset=16,
                output_height=2, output_width=2, coordinate_transformation_mode="output_half_pixel")
    want = ReferenceEvaluator(m16).run(None, {"x": x, "rois": rois, "batch": np.zeros(2, np.int64)})[0]
    got = onnxjit.backend.prepare(m10).run([x, rois, np.zeros(2, np.int64)])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    rep = onnxjit.backend.prepare(m16)
    with pytest.raises(IndexError, match="batch index"):
        rep.run([x, rois, np.array([0, 1], np.int64)])


# ---- LpPool ------------------------------------------------------------------------------

def lp_pool_oracle(x, p, k, s, pads):
    """Sum of |x|^p over each window of the zero-padded input, to the power 1/p (2-D)."""
    xp = np.pad(np.abs(x.astype(np.float64)) ** p, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    out = np.empty(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]].sum(axis=(2, 3))
    return (out ** (1.0 / p)).astype(x.dtype)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs", [dict(kernel_shape=[2, 3]), dict(kernel_shape=[3, 3], strides=[2, 1]),
                                   dict(kernel_shape=[2, 2], dilations=[2, 1])])
def test_lp_pool(p, attrs):
    check("LpPool", {"x": data((1, 2, 7, 8))}, opset=18, p=p, **attrs)


def test_lp_pool_float64_3d():
    check("LpPool", {"x": data((1, 2, 4, 5, 3), np.float64)}, opset=18, p=2, kernel_shape=[2, 2, 2])


@pytest.mark.parametrize("p,pads", [(2, [1, 1, 1, 1]), (3, [0, 2, 1, 0])])
def test_lp_pool_pads_sum_zero_padding(p, pads):
    x = data((1, 2, 5, 6))
    m = model("LpPool", {"x": x}, opset=18, p=p, kernel_shape=[3, 2], strides=[2, 1], pads=pads)
    got = onnxjit.backend.prepare(m).run([x])[0]
    np.testing.assert_allclose(got, lp_pool_oracle(x, p, (3, 2), (2, 1), pads), rtol=1e-5, atol=1e-6)


# ---- DeformConv --------------------------------------------------------------------------

@pytest.mark.parametrize("attrs,c,m,og,bias,mask", [
    (dict(kernel_shape=[2, 2]), 1, 1, 1, False, False),
    (dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 2, 3, 1, True, True),
    (dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[1, 2], group=2), 4, 2, 2, True, False),
    (dict(kernel_shape=[2, 2], offset_group=2), 4, 3, 2, False, True),
])
@pytest.mark.parametrize("dtype", [np.float32])
def test_deform_conv(attrs, c, m, og, bias, mask, dtype):
    attrs = dict(attrs)
    og = attrs.setdefault("offset_group", og)
    kh, kw = attrs["kernel_shape"]
    s, d, p = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("pads", [0] * 4)
    h, w = 5, 6
    oh = (h + p[0] + p[2] - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (w + p[1] + p[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    inputs = {"x": data((2, c, h, w), dtype), "w": data((m, c // attrs.get("group", 1), kh, kw), dtype),
              "offset": (data((2, og * kh * kw * 2, oh, ow), dtype) * 1.5).astype(dtype)}
    inputs["b"] = data((m,), dtype) if bias else None
    inputs["mask"] = RNG.random((2, og * kh * kw, oh, ow)).astype(dtype) if mask else None
    check("DeformConv", inputs, opset=22, **attrs)


def test_deform_conv_float64():
    x, w = data((1, 2, 4, 4), np.float64), data((2, 2, 2, 2), np.float64)
    offset = data((1, 8, 3, 3), np.float64)
    # the reference samples through GridSample, which rounds coordinates to float32
    check("DeformConv", {"x": x, "w": w, "offset": offset}, opset=22,
          tol=dict(rtol=1e-6, atol=1e-6), kernel_shape=[2, 2])
