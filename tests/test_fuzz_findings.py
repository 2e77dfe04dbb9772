"""Regression tests for what the fuzz harness (onnxjit/fuzz.py) found, each checked against onnx's
ReferenceEvaluator. The case that found it: `python -m onnxjit.fuzz --seed S --case I --show`."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend

# MatMul operand shapes whose batch dims broadcast a 1 against a 0: the batch is empty.
EMPTY_BATCHES = [((0, 5, 4), (4, 1)), ((0, 5, 4), (1, 4, 1)), ((1, 5, 4), (0, 4, 3)),
                 ((2, 1, 5, 4), (1, 0, 4, 1)), ((0, 1, 3, 2), (1, 6, 2, 4))]


def _matmul_model(dtype, pairs):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs, nodes, outputs = [], [], []
    for i, (sa, sb) in enumerate(pairs):
        inputs += [helper.make_tensor_value_info(f"a{i}", elem, list(sa)),
                   helper.make_tensor_value_info(f"b{i}", elem, list(sb))]
        nodes.append(helper.make_node("MatMul", [f"a{i}", f"b{i}"], [f"y{i}"]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", elem, None))
    model = helper.make_model(helper.make_graph(nodes, "empty_batch", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matmul_batch_of_one_against_an_empty_batch(dtype):
    """seed 3 case 1009: MatMul of int32[0,5,4] by int32[4,1] broadcast the left operand to a
    batch of max(0, 1) = 1 (numpy's broadcast_to raised ValueError); a 1 broadcasts to 0."""
    model = _matmul_model(dtype, EMPTY_BATCHES)
    rng = np.random.default_rng(3)
    feeds = {}
    for i, (sa, sb) in enumerate(EMPTY_BATCHES):
        feeds[f"a{i}"] = (rng.standard_normal(sa) * 4).astype(dtype)
        feeds[f"b{i}"] = (rng.standard_normal(sb) * 4).astype(dtype)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = backend.prepare(model).run(feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("sa, sb", [((5,), (2, 4, 1)), ((3, 5), (4,)), ((2, 3, 5), (2, 4, 6)),
                                    ((0, 3, 5), (4, 2))])
def test_matmul_inner_dims_that_differ_are_refused(sa, sb):
    """seed 5 case 35: MatMul of float[5] (declared symbolic) by float[2,4,1] reached the kernel,
    whose np.dot raised ValueError('incompatible array sizes'); the reference and ONNX Runtime
    refuse it too. It is refused while the signature is specialized, naming the node."""
    from onnxjit.errors import OnnxJitError
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "inner",
        [helper.make_tensor_value_info("a", elem, ["d"] * len(sa)),
         helper.make_tensor_value_info("b", elem, list(sb))],
        [helper.make_tensor_value_info("y", elem, None)]),
        opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    feeds = {"a": np.ones(sa, np.float32), "b": np.ones(sb, np.float32)}
    with pytest.raises((TypeError, ValueError)):      # the reference refuses it
        ReferenceEvaluator(model).run(None, feeds)
    rep = backend.prepare(model)
    with pytest.raises(OnnxJitError, match="'mm'.*inner dims"):
        rep.run(feeds)


def _attention_model(mask_shape, q_seq=2, kv_seq=2, past=0):
    f, b = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)), helper.np_dtype_to_tensor_dtype(
        np.dtype(np.bool_))
    inputs = [helper.make_tensor_value_info("Q", f, [1, 2, q_seq, 8]),
              helper.make_tensor_value_info("K", f, [1, 2, kv_seq, 8]),
              helper.make_tensor_value_info("V", f, [1, 2, kv_seq, 8]),
              helper.make_tensor_value_info("M", b, ["m0", "m1"])]
    names = ["Q", "K", "V", "M"]
    if past:
        inputs += [helper.make_tensor_value_info("PK", f, [1, 2, past, 8]),
                   helper.make_tensor_value_info("PV", f, [1, 2, past, 8])]
        names += ["PK", "PV"]
    outputs = [helper.make_tensor_value_info("Y", f, None)] + (
        [helper.make_tensor_value_info(n, f, None) for n in ("PKo", "PVo")] if past else [])
    node = helper.make_node("Attention", names, ["Y"] + (["PKo", "PVo"] if past else []),
                            name="attn", is_causal=1)
    model = helper.make_model(helper.make_graph([node], "attn", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 11
    rng = np.random.default_rng(6)
    feeds = {"Q": rng.standard_normal((1, 2, q_seq, 8)).astype(np.float32),
             "K": rng.standard_normal((1, 2, kv_seq, 8)).astype(np.float32),
             "V": rng.standard_normal((1, 2, kv_seq, 8)).astype(np.float32),
             "M": rng.random(mask_shape) < 0.7}
    if past:
        feeds["PK"] = rng.standard_normal((1, 2, past, 8)).astype(np.float32)
        feeds["PV"] = rng.standard_normal((1, 2, past, 8)).astype(np.float32)
    return model, feeds


@pytest.mark.parametrize("mask_shape, past", [((2, 7), 0), ((2, 3), 0), ((2, 6), 3)])
def test_attention_mask_longer_than_the_keys_is_refused(mask_shape, past):
    """seed 6 cases 174 and 280: an attn_mask whose last dim is longer than the keys (past and
    present) was read only as far as the keys go; the reference and ONNX Runtime refuse it."""
    from onnxjit.errors import OnnxJitError
    model, feeds = _attention_model(mask_shape, past=past)
    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, feeds)
    rep = backend.prepare(model)
    with pytest.raises(OnnxJitError, match="'attn'.*longer than the"):
        rep.run(feeds)


@pytest.mark.parametrize("mask_shape, past", [((2, 2), 0), ((2, 1), 0), ((2, 5), 3), ((2, 4), 3)])
def test_attention_mask_up_to_the_keys_still_runs(mask_shape, past):
    """Masks as long as the keys, or shorter (padded with -inf, as the spec says), still run."""
    model, feeds = _attention_model(mask_shape, past=past)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = backend.prepare(model).run(feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_range_of_a_vector_is_refused():
    """seed 6 case 254: Range's start fed a 3-element vector (a mutated Shape's start) met
    numpy's 'can only convert an array of size 1' in the lowering; the reference refuses it."""
    from onnxjit.errors import OnnxJitError
    i64 = helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], end=-1),
         helper.make_node("Range", ["s", "limit", "delta"], ["y"], name="range")], "range",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)),
                                       [2, 3, 6])],
        [helper.make_tensor_value_info("y", i64, None)],
        [helper.make_tensor("limit", i64, [], [9]), helper.make_tensor("delta", i64, [], [1])]),
        opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    feeds = {"x": np.zeros((2, 3, 6), np.float32)}
    with pytest.raises(Exception):      # noqa: B017  (the reference refuses it, in its own way)
        ReferenceEvaluator(model).run(None, feeds)
    with pytest.raises(OnnxJitError, match="'range'.*start must be a scalar"):
        backend.prepare(model).run(feeds)


def _conv_transpose_model(out, declared=True):
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="deconv", output_shape=out,
                          strides=[3, 2])], "deconv",
        [helper.make_tensor_value_info("X", f, [1, 1, 3, 3] if declared else ["n", 1, "h", "w"]),
         helper.make_tensor_value_info("W", f, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("Y", f, None)]), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    rng = np.random.default_rng(8)
    return model, {"X": rng.standard_normal((1, 1, 3, 3)).astype(np.float32),
                   "W": rng.standard_normal((1, 2, 3, 3)).astype(np.float32)}


@pytest.mark.parametrize("declared", [True, False], ids=["static", "symbolic"])
@pytest.mark.parametrize("out", [[12, 8], [10, 9], [9, 12]])
def test_conv_transpose_output_shape_past_a_stride_is_refused(out, declared):
    """seed 8 case 52: output_shape [12, 8] from a 3x3 input with strides [3, 2] (the full output
    is 9x7; no input of 3 rows gives 12) was answered, padding the end; the reference and ONNX
    Runtime refuse it. Refused while the signature is specialized, naming the node."""
    from onnxjit.errors import OnnxJitError
    model, feeds = _conv_transpose_model(out, declared)
    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, feeds)
    with pytest.raises(OnnxJitError, match="'deconv'.*output_shape"):
        backend.prepare(model).run(feeds)


@pytest.mark.parametrize("out", [[10, 8], [9, 7], [11, 8], [7, 5]])
def test_conv_transpose_output_shape_within_a_stride_still_runs(out):
    """Up to stride - 1 past the full output, or inside it: ONNX Runtime answers (the reference
    refuses [11, 8] and [7, 5], its col2im check being stricter)."""
    import onnxruntime
    model, feeds = _conv_transpose_model(out)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    want = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(backend.prepare(model).run(feeds)[0], want, rtol=1e-5, atol=1e-5)


def test_split_to_sequence_of_an_empty_axis():
    """seed 8 case 271: SplitToSequence (no split) along a dim of 0 met numpy's 'integer modulo
    by zero'; the reference gives an empty sequence."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1, keepdims=0)], "split",
        [helper.make_tensor_value_info("x", f, ["a", "b"])],
        [helper.make_tensor_sequence_value_info("seq", f, None)]),
        opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    for shape in [(3, 0), (3, 2)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
        (got,) = backend.prepare(model).run([x])
        assert len(got) == len(want), shape
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def _reduce_model(op, axes_const=None, opset=18, shape=(3, 4, 5)):
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    i64 = helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    inputs = [helper.make_tensor_value_info("x", f, list(shape))]
    inits = []
    if axes_const is None:
        inputs.append(helper.make_tensor_value_info("axes", i64, ["n"]))
    else:
        inits.append(helper.make_tensor("axes", i64, [len(axes_const)], axes_const))
    model = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0, name="red")], "reduce", inputs,
        [helper.make_tensor_value_info("y", f, None)], inits),
        opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("op, axes", [("ReduceLogSum", [1, 1]), ("ReduceLogSumExp", [-1, 2]),
                                      ("ReduceMax", [0, 2, -3])])
def test_reduce_repeated_axes_are_refused(op, axes):
    """seed 7 cases 488, 773, 3233, ..., 8199: a Reduce* whose axes input names an axis twice
    after normalization was answered (reduced once); the reference refuses it (numpy's
    'duplicate value in axis'; ONNX's reductions are numpy's). Axes given at run time are
    refused while the signature is specialized, static axes at prepare; both name the node."""
    from onnxjit.errors import LoweringError, ModelError
    x = np.random.default_rng(7).standard_normal((3, 4, 5)).astype(np.float32)
    feeds = {"x": x, "axes": np.array(axes, np.int64)}
    model = _reduce_model(op)
    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, feeds)
    rep = backend.prepare(model)
    with pytest.raises(LoweringError, match="'red'.*more than once"):
        rep.run(feeds)
    with pytest.raises(ModelError, match="'red'.*more than once"):
        backend.prepare(_reduce_model(op, axes))
    distinct = sorted({a % 3 for a in axes})
    feeds["axes"] = np.array(distinct, np.int64)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(rep.run(feeds)[0], want, rtol=1e-5, atol=1e-6)


def test_grid_sample_nearest_rounds_a_float32_coordinate_as_the_oracles():
    """seed 7 case 77: GridSample nearest (align_corners 0) at y = -0.2 over 5 rows: the
    coordinate ((y + 1) * 5 - 1) / 2 is 1.5 in float32 (rounded to 2, as the reference and ONNX
    Runtime) but 1.4999999925 in float64 (rounded to 1); the grid's float32 arithmetic decides."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="nearest", align_corners=0)],
        "gs", [helper.make_tensor_value_info("x", f, [1, 1, 5, 2]),
               helper.make_tensor_value_info("grid", f, [1, 2, 4, 2])],
        [helper.make_tensor_value_info("y", f, None)]),
        opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    x = np.arange(10, dtype=np.float32).reshape(1, 1, 5, 2)
    grid = np.array([[[[-1.0, -0.8], [-0.6, -0.5], [-0.1, -0.2], [0.7, 0.0]],
                      [[0.0, 0.4], [0.2, -0.2], [-0.3, 0.5], [-1.0, 1.0]]]], np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})
    (got,) = backend.prepare(model).run([x, grid])
    np.testing.assert_array_equal(got, want)


def _model(node, inputs, outputs, opset):
    model = helper.make_model(helper.make_graph([node], "finding", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("split, axis", [([2, 4], 1), (np.array([1, 2], np.int32), 0),
                                         (np.array(4, np.int64), 1)])
def test_fuzz_compares_sequences_of_unequal_pieces(split, axis):
    """seed 7 cases 201, 2028, 3117, 4203, 5176, 5653, 5947, 7072: SplitToSequence into pieces
    of different shapes: the harness's np.asarray of the sequence (a list) raised numpy's
    'inhomogeneous shape' ValueError, counted as UNCLEAN. Sequence outputs are lists of arrays,
    compared item by item; onnxjit's equal the reference's."""
    from onnxjit import fuzz
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    split = np.asarray(split)
    model = _model(helper.make_node("SplitToSequence", ["x", "split"], ["seq"], axis=axis),
                   [helper.make_tensor_value_info("x", f, ["a", "b"]),
                    helper.make_tensor_value_info(
                        "split", helper.np_dtype_to_tensor_dtype(split.dtype), list(split.shape))],
                   [helper.make_tensor_sequence_value_info("seq", f, None)], 18)
    x = np.arange(18, dtype=np.float32).reshape(3, 6)
    data = model.SerializeToString()
    want = fuzz._run_reference(data, [x, split])
    got = fuzz._run_onnxjit(data, [x, split], lambda name: None)
    assert isinstance(got[0], list) and len(got[0]) == len(want[0]) >= 2
    assert len({p.shape for p in want[0]}) == 2    # pieces of two shapes
    assert fuzz.compare(want, got) is None
    assert fuzz.compare(want, [got[0][:-1]]) is not None      # the comparison can fail
    for g, w in zip(got[0], want[0]):
        np.testing.assert_array_equal(g, w)


def test_det_of_matrices_with_nan_and_inf():
    """seed 7 case 2098: Det of a matrix holding NaN raised Numba's LinAlgError('Array must not
    contain infs or NaNs'); the reference (numpy) gives NaN, and a number for most matrices
    with an infinity."""
    rng = np.random.default_rng(2098)
    x = rng.standard_normal((12, 3, 3))
    x[0, 1, 1] = np.nan
    x[1, 0, 2] = np.inf
    x[2, 2, 0] = -np.inf
    x[3, 1, :] = np.nan
    x[4, 0, 0], x[4, 2, 2] = np.inf, -np.inf
    for dtype in (np.float32, np.float64):
        f = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        model = _model(helper.make_node("Det", ["x"], ["y"]),
                       [helper.make_tensor_value_info("x", f, ["n", 3, 3])],
                       [helper.make_tensor_value_info("y", f, None)], 18)
        xd = x.astype(dtype)
        (want,) = ReferenceEvaluator(model).run(None, {"x": xd})
        (got,) = backend.prepare(model).run([xd])
        assert np.isnan(want[0]) and np.isnan(want[3])
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("op, attrs", [("LpPool", {"p": 3}), ("MaxPool", {}),
                                       ("AveragePool", {})])
def test_pool_with_a_huge_stride_over_one_window(op, attrs):
    """seed 7 case 2166: LpPool with strides [2147483647] over a 32-wide input (one output
    window) allocated phase buffers a stride long (gigabytes: the worker was killed). A dim
    with one window reads it at offset 0 whatever its stride."""
    import resource
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = _model(helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 3],
                                    strides=[2147483647, 2], **attrs),
                   [helper.make_tensor_value_info("x", f, [1, 3, 4, 32])],
                   [helper.make_tensor_value_info("y", f, None)], 22)
    x = np.random.default_rng(2166).standard_normal((1, 3, 4, 32)).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    rep = backend.prepare(model)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (got,) = rep.run([x])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000   # KiB
    assert got.shape == want.shape == (1, 3, 1, 15)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _roi_model(sampling_ratio, mode="avg", ctm="half_pixel"):
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    i = helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    return _model(helper.make_node("RoiAlign", ["X", "rois", "b"], ["Y"], name="roi",
                                   output_height=5, output_width=5, sampling_ratio=sampling_ratio,
                                   spatial_scale=1.0, mode=mode,
                                   coordinate_transformation_mode=ctm),
                  [helper.make_tensor_value_info("X", f, [1, 1, 10, 10]),
                   helper.make_tensor_value_info("rois", f, [3, 4]),
                   helper.make_tensor_value_info("b", i, [3])],
                  [helper.make_tensor_value_info("Y", f, None)], 16)


_ROIS = np.array([[0, 0, 9, 9], [0, 5, 4, 9], [5, 5, 9, 9]], np.float32)


@pytest.mark.parametrize("sampling_ratio, mode", [(1048577, "max"), (2147483647, "avg")])
def test_roi_align_huge_sampling_ratio_is_refused(sampling_ratio, mode):
    """seed 7 cases 3424 and 2989: RoiAlign with sampling_ratio 1048577 / 2147483647 allocated
    sampling_ratio**2 samples' taps (the worker was killed, or numpy's 'array is too big');
    sampling_ratio**2 samples per output element over the element limit are refused."""
    from onnxjit.errors import LimitError
    x = np.random.default_rng(3424).standard_normal((1, 1, 10, 10)).astype(np.float32)
    with pytest.raises(LimitError, match=r"RoiAlign node 'roi'.*sampling_ratio"):
        backend.prepare(_roi_model(sampling_ratio, mode)).run([x, _ROIS, np.zeros(3, np.int64)])


@pytest.mark.parametrize("sampling_ratio, mode, ctm", [
    (0, "avg", "half_pixel"), (2, "max", "output_half_pixel"), (40, "avg", "half_pixel"),
    (40, "max", "output_half_pixel"), (-3, "avg", "half_pixel")])
def test_roi_align_sampling_grid_in_chunks(sampling_ratio, mode, ctm):
    """RoiAlign's samples' taps are computed a chunk at a time (40**2 = 1600 samples per bin
    spans two chunks): the same answer as the reference, sane sampling ratios still run."""
    x = np.random.default_rng(2989).standard_normal((1, 1, 10, 10)).astype(np.float32)
    model = _roi_model(sampling_ratio, mode, ctm)
    feeds = {"X": x, "rois": _ROIS, "b": np.zeros(3, np.int64)}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = backend.prepare(model).run(list(feeds.values()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _shape_input_model(op, x_shape, shape_inputs, attrs, opset, x_dtype=np.float32, dims=None):
    """A one-node model whose shape-like inputs are int64 graph inputs (read at specialization),
    of length `dims[name]` where given, else symbolic."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(x_dtype))
    i64 = helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    inputs = [helper.make_tensor_value_info("x", f, list(x_shape))]
    names = ["x"]
    for name in shape_inputs:
        if name:
            dim = (dims or {}).get(name, "d_" + name)
            inputs.append(helper.make_tensor_value_info(name, i64, [dim]))
        names.append(name)
    outs = ["y", "yi"] if op == "TopK" else ["y"]
    model = helper.make_model(helper.make_graph(
        [helper.make_node(op, names, outs, name="n", **attrs)], op.lower(), inputs,
        [helper.make_tensor_value_info(o, 0, None) for o in outs]),
        opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


# (op, x shape, shape-like input names, attributes, opset, bad values, good values, error class)
SHAPE_INPUT_CASES = [
    # seed 7 case 2094: TopK's k of shape [0] (IndexError from const_ints(...)[0])
    ("TopK", (3, 4), ["k"], {"axis": 1, "largest": 0}, 11,
     {"k": np.zeros(0, np.int64)}, {"k": np.array([2], np.int64)}, "LoweringError"),
    # seed 7 case 279: Reshape of an empty tensor to [2**63-1, 1, 0] (numpy's 'array is too big')
    ("Reshape", (0, 3, 4), ["shape"], {"allowzero": 1}, 19,
     {"shape": np.array([2 ** 63 - 1, 1, 0], np.int64)}, {"shape": np.array([3, 4, 0], np.int64)},
     "LimitError"),
    # seed 7 case 1421: Col2Im with image_shape -2**63 (OverflowError in np.prod)
    ("Col2Im", (1, 4, 5), ["image_shape", "block_shape"], {"dilations": [1, 5]}, 18,
     {"image_shape": np.array([-2 ** 63, 1000], np.int64), "block_shape": np.array([2, 2], np.int64)},
     {"image_shape": np.array([6, 6], np.int64), "block_shape": np.array([2, 2], np.int64)},
     "LoweringError"),
    # seed 7 case 6847: Resize with sizes 2**63-1 (numpy's 'Maximum allowed dimension exceeded')
    ("Resize", (1, 1, 2, 2), ["", "", "sizes"],
     {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller", "mode": "nearest"}, 19,
     {"sizes": np.array([2 ** 63 - 1, 8], np.int64)}, {"sizes": np.array([8, 8], np.int64)},
     "LimitError"),
]


@pytest.mark.parametrize("op, x_shape, names, attrs, opset, bad, good, error", SHAPE_INPUT_CASES,
                         ids=[c[0] for c in SHAPE_INPUT_CASES])
def test_bad_shape_like_inputs_get_onnxjit_errors(op, x_shape, names, attrs, opset, bad, good,
                                                 error):
    """Shape-like inputs (k, a target shape, an image shape, sizes) with no value, a negative or
    a 2**63-1 dimension met numpy's IndexError / ValueError / OverflowError; they are refused
    (onnxjit's LoweringError, or LimitError over the element limit) naming the node. The same
    model with sound values still agrees with the reference."""
    import onnxjit.errors as errors
    dims = {k: len(v) for k, v in good.items() if len(v) == len(bad[k])}
    model = _shape_input_model(op, x_shape, names, attrs, opset, dims=dims)
    x = np.random.default_rng(7).standard_normal(x_shape).astype(np.float32)
    with pytest.raises(Exception):       # the reference refuses it too  # noqa: B017
        ReferenceEvaluator(model).run(None, {"x": x, **bad})
    rep = backend.prepare(model)
    with pytest.raises(getattr(errors, error), match=f"{op} node 'n'"):
        rep.run({"x": x, **bad})
    want = ReferenceEvaluator(model).run(None, {"x": x, **good})
    got = rep.run({"x": x, **good})
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_stft_of_an_inf_sample_times_an_exact_zero_twiddle_is_nan():
    """seed 7 case 8020: an inf sample meets the twiddle sin(2 pi 24 / 16) = sin(3 pi), exactly 0:
    inf * 0 has no value (NaN), but the twiddle table held sin(pi) = 1.2e-16 and made it -inf,
    where the reference has a finite number (its FFT never multiplies inf by that 0) and ONNX
    Runtime +inf. NaN (either side) matches anything here, as in the fuzz harness."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("STFT", ["signal", "step", "window"], ["y"])], "stft",
        [helper.make_tensor_value_info("signal", f, [1, 128, 1]),
         helper.make_tensor_value_info("step", helper.np_dtype_to_tensor_dtype(np.dtype(np.int64)), []),
         helper.make_tensor_value_info("window", f, [16])],
        [helper.make_tensor_value_info("y", f, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    rng = np.random.default_rng(8020)
    signal = rng.standard_normal((1, 128, 1)).astype(np.float32)
    signal[0, 124, 0] = np.inf
    step = np.array(8, np.int64)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32)
    feeds = {"signal": signal, "step": step, "window": window}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = backend.prepare(model).run([signal, step, window])
    either = np.isnan(want) | np.isnan(got)
    assert np.isnan(got[0, 14, 2, 1])            # inf * sin(3 pi)
    np.testing.assert_allclose(got[~either], want[~either], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("big", [1e30, 2e20, 5e19, 1e19])
def test_group_normalization_overflows_as_its_function_body(big):
    """seed 7 case 1910: a 1e30 in a float32 group. GroupNormalization's function body computes
    var = E[x^2] - E[x]^2 in float32: inf - inf = NaN for the group (the reference and ONNX
    Runtime); the two-pass variance gave inf and y = bias. 2e20: E[x]^2 overflows too (NaN);
    5e19: only the sum of squares does (var inf, y = bias); 1e19: neither."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2)],
        "gn", [helper.make_tensor_value_info("x", f, [3, 4, 2, 2]),
               helper.make_tensor_value_info("scale", f, [4]),
               helper.make_tensor_value_info("bias", f, [4])],
        [helper.make_tensor_value_info("y", f, None)]),
        opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    rng = np.random.default_rng(1910)
    x = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)
    x[1, 3, 0, 1] = big
    x[2, 0, 1, 0] = np.nan
    scale, bias = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "scale": scale, "bias": bias})
    (got,) = backend.prepare(model).run([x, scale, bias])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("values", [[-np.inf, 2.0, np.inf, -2.5, 1e-40, 0.5],
                                    [1.0, -np.inf, 1.3, 2.5, 1e-40, 4.0],
                                    [1.0, np.inf, -1.3, 2.5, 1e-40, 4.0]])
def test_dynamic_quantize_linear_of_an_inf(values):
    """seed 7 cases 1897, 3757: an inf makes the scale inf and the zero point 0 - min / scale
    NaN (or -0); the reference's and ONNX Runtime's max(0, min(255, NaN)) is 255, onnxjit's
    clamp gave 0, so every finite x quantized to 0 instead of 255."""
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    u8 = helper.np_dtype_to_tensor_dtype(np.dtype(np.uint8))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])], "dql",
        [helper.make_tensor_value_info("x", f, [6])],
        [helper.make_tensor_value_info("y", u8, None), helper.make_tensor_value_info("scale", f, None),
         helper.make_tensor_value_info("zp", u8, None)]),
        opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 10
    x = np.array(values, np.float32)
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, {"x": x})
    got = backend.prepare(model).run([x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_quantize_linear_int16_saturates_inf_as_onnx_runtime():
    """seed 7 case 6487 (no change: a guard): QuantizeLinear to int16 of +-inf and +-1e30
    saturates to [-32768, 32767] as the operator's definition and ONNX Runtime (opset 21) say;
    the reference casts rint(inf) to int32 first (undefined: INT_MIN, then -32768 for +inf)."""
    import onnxruntime
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    i16 = helper.np_dtype_to_tensor_dtype(np.dtype(np.int16))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)], "q",
        [helper.make_tensor_value_info("x", f, [2, 4]), helper.make_tensor_value_info("s", f, [2, 2])],
        [helper.make_tensor_value_info("y", i16, None)], [helper.make_tensor("z", i16, [2, 2], [0] * 4)]),
        opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    x = np.array([[np.inf, -np.inf, 1e30, -1e30], [1, 2, 3, 70000]], np.float32)
    s = np.array([[1.5, 2.5], [3.0, 4.9]], np.float32)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    want = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]).run(None, {"x": x, "s": s})[0]
    np.testing.assert_array_equal(backend.prepare(model).run([x, s])[0], want)


def _ct_padding_model(strides, output_padding, output_shape):
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    attrs = {"kernel_shape": [3, 3], "strides": strides, "output_padding": output_padding}
    if output_shape is not None:
        attrs["output_shape"] = output_shape
    model = helper.make_model(helper.make_graph(
        [helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="ct", **attrs)], "ct",
        [helper.make_tensor_value_info("X", f, ["n", "c", "h", "w"]),
         helper.make_tensor_value_info("W", f, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("Y", f, None)]),
        opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("strides, output_padding, output_shape, where, match", [
    ([3, 2], [1, 1], [12, 8], "run", "output_shape"),       # seed 7 case 5369
    ([2, 2], [1, 1], [10, 8], "run", "output_shape"),       # seed 7 case 5666
    ([3, 2], [3, 1], [10, 8], "prepare", "output_padding"),  # seed 7 case 6632
    ([2, 2], [1, 2], None, "prepare", "output_padding"),
])
def test_conv_transpose_inconsistent_output_shape_or_padding_is_refused(
        strides, output_padding, output_shape, where, match):
    """seed 7 cases 5369, 5666: an output_shape a stride or more past the full output was still
    answered when output_padding was non-zero (the check skipped those); ONNX Runtime refuses
    it whatever the output_padding, the reference too. Case 6632: an output_padding not below
    max(stride, dilation) was answered; ONNX Runtime always refuses it (the reference where no
    output_shape is given): refused at prepare, naming the node."""
    import onnxruntime

    from onnxjit.errors import ModelError
    model = _ct_padding_model(strides, output_padding, output_shape)
    rng = np.random.default_rng(7)
    feeds = {"X": rng.standard_normal((1, 1, 3, 3)).astype(np.float32),
             "W": rng.standard_normal((1, 2, 3, 3)).astype(np.float32)}
    with pytest.raises(Exception):      # ONNX Runtime refuses it  # noqa: B017
        onnxruntime.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, feeds)
    with pytest.raises(ModelError, match=f"'ct'.*{match}"):
        backend.prepare(model).run(feeds)
    assert where in ("run", "prepare")
    if where == "prepare":
        with pytest.raises(ModelError, match=f"'ct'.*{match}"):
            backend.prepare(model)


@pytest.mark.parametrize("strides, output_padding, output_shape", [
    ([3, 2], [1, 1], [10, 8]), ([2, 2], [1, 1], [8, 8]), ([3, 2], [2, 1], None),
    ([3, 2], [2, 1], [11, 8])])
def test_conv_transpose_consistent_output_shape_with_padding_still_runs(
        strides, output_padding, output_shape):
    """The neighbours of the cases above: an output_shape up to stride - 1 past the full
    output, output_padding below the stride: both oracles answer, and onnxjit agrees."""
    import onnxruntime
    model = _ct_padding_model(strides, output_padding, output_shape)
    rng = np.random.default_rng(7)
    feeds = {"X": rng.standard_normal((1, 1, 3, 3)).astype(np.float32),
             "W": rng.standard_normal((1, 2, 3, 3)).astype(np.float32)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    ort = onnxruntime.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = backend.prepare(model).run(feeds)[0]
    assert got.shape == want.shape
    if np.allclose(want, ort, rtol=1e-5, atol=1e-5):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:     # the oracles differ (where the extra rows go): onnxjit must match one of them
        assert (np.allclose(got, want, rtol=1e-5, atol=1e-5)
                or np.allclose(got, ort, rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_padded_pool_over_an_empty_spatial_dim_is_refused(op, auto_pad):
    """seed 7 case 8089: MaxPool SAME_UPPER over float[1,3,32,0] (declared symbolic) answered an
    empty tensor; ONNX Runtime refuses any pool over an empty spatial dim, the reference refuses
    MaxPool's. Refused while the signature is specialized, naming the node; the same model over
    a non-empty input still agrees with the reference."""
    import onnxruntime

    from onnxjit.errors import ModelError
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="pool", auto_pad=auto_pad, kernel_shape=[2, 2])],
        "pool", [helper.make_tensor_value_info("x", f, ["n", "c", "h", "w"])],
        [helper.make_tensor_value_info("y", f, None)]), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    empty = np.zeros((1, 3, 32, 0), np.float32)
    with pytest.raises(Exception):      # ONNX Runtime refuses it  # noqa: B017
        onnxruntime.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, {"x": empty})
    rep = backend.prepare(model)
    with pytest.raises(ModelError, match="'pool'.*spatial dim of 0"):
        rep.run({"x": empty})
    x = np.random.default_rng(7).standard_normal((1, 3, 5, 4)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(rep.run({"x": x})[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("far", [1e30, np.inf])
def test_roi_align_adaptive_grid_of_a_huge_roi_is_refused(far):
    """sampling_ratio 0 samples ceil(roi size / output size) per bin side: a roi 1e30 wide asked
    for ~1e30 samples (a hang; the reference never finishes either). The kernel refuses a roi
    whose samples are over the element limit, naming RoiAlign; sane rois run (the test above)."""
    x = np.random.default_rng(0).standard_normal((1, 1, 10, 10)).astype(np.float32)
    rois = np.array([[0, 0, 9, 9], [0, 0, far, 9]], np.float32)
    model = _roi_model(0)
    with pytest.raises(IndexError, match=r"^RoiAlign: .*out of range"):
        backend.prepare(model).run([x, np.concatenate([rois, rois[:1]]), np.zeros(3, np.int64)])


def test_non_max_suppression_empty_scalar_inputs_are_refused():
    """seed 7 case 4118: NonMaxSuppression with max_output_boxes_per_class of shape [0] took it
    as 0; the reference refuses it (a scalar; ONNX Runtime reads past the empty tensor, so it
    is no oracle here). Refused naming the node; empty thresholds are left out, as the
    reference takes them, and one-element inputs still agree."""
    from onnxjit.errors import OnnxJitError
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    i64 = helper.np_dtype_to_tensor_dtype(np.dtype(np.int64))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"], name="nms")],
        "nms", [helper.make_tensor_value_info("b", f, [1, 6, 4]),
                helper.make_tensor_value_info("s", f, [1, 2, 6]),
                helper.make_tensor_value_info("m", i64, ["dm"]),
                helper.make_tensor_value_info("i", f, ["di"]),
                helper.make_tensor_value_info("t", f, ["dt"])],
        [helper.make_tensor_value_info("y", i64, None)]),
        opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 6
    rng = np.random.default_rng(7)
    corners = rng.random((1, 6, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + rng.random((1, 6, 2)).astype(np.float32)], 2)
    scores = rng.random((1, 2, 6)).astype(np.float32)
    good = {"b": boxes, "s": scores, "m": np.array([3], np.int64),
            "i": np.array([0.3], np.float32), "t": np.array([0.2], np.float32)}
    rep = backend.prepare(model)
    for bad in (dict(good, m=good["m"][:0]), dict(good, m=good["m"][:0], i=good["i"][:0],
                                                  t=good["t"][:0])):
        with pytest.raises(Exception):      # the reference refuses it  # noqa: B017
            ReferenceEvaluator(model).run(None, bad)
        with pytest.raises(OnnxJitError, match="'nms'.*max_output_boxes_per_class must be"):
            rep.run(bad)
    for feeds in (good, dict(good, i=good["i"][:0]), dict(good, t=good["t"][:0])):
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        np.testing.assert_array_equal(rep.run(feeds)[0], want)


@pytest.mark.parametrize("q_shape, kv_shape, attrs", [
    ((2, 0, 24), (2, 6, 24), {"q_num_heads": 3, "kv_num_heads": 3}),
    ((2, 3, 0, 8), (2, 3, 6, 8), {})])
def test_attention_empty_q_sequence_is_refused(q_shape, kv_shape, attrs):
    """seed 7 case 1400: Attention with Q float[2, 0, 24] (declared symbolic) answered an empty
    output; ONNX Runtime refuses a Q sequence length of 0 (3-D and 4-D), the reference the 3-D
    one. Refused while the signature is specialized, naming the node; a Q of one or more
    positions still agrees with the reference."""
    import onnxruntime

    from onnxjit.errors import ModelError
    f = helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Attention", ["Q", "K", "V"], ["Y"], name="attn", **attrs)], "attn",
        [helper.make_tensor_value_info("Q", f, ["q"] * len(q_shape)),
         helper.make_tensor_value_info("K", f, list(kv_shape)),
         helper.make_tensor_value_info("V", f, list(kv_shape))],
        [helper.make_tensor_value_info("Y", f, None)]), opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    rng = np.random.default_rng(7)
    feeds = {"Q": np.zeros(q_shape, np.float32),
             "K": rng.standard_normal(kv_shape).astype(np.float32),
             "V": rng.standard_normal(kv_shape).astype(np.float32)}
    with pytest.raises(Exception):      # ONNX Runtime refuses it  # noqa: B017
        onnxruntime.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, feeds)
    rep = backend.prepare(model)
    with pytest.raises(ModelError, match="'attn'.*sequence length of 0"):
        rep.run(feeds)
    q_shape = list(q_shape)
    q_shape[-2] = 2
    feeds["Q"] = rng.standard_normal(q_shape).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(rep.run(feeds)[0], want, rtol=1e-5, atol=1e-6)


def _slice_model(shape):
    ints = [helper.make_tensor_value_info(n, 7, [len(shape)]) for n in ("starts", "ends", "axes",
                                                                         "steps")]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    graph = helper.make_graph([node], "slice", [helper.make_tensor_value_info("x", 1, list(shape))]
                              + ints, [helper.make_tensor_value_info("y", 1, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("start", [-2**31, -6, -100])
def test_slice_negative_step_from_before_the_start_is_empty(start):
    """seed 12 case 505: Slice with a negative step and a start before index 0 clamps it to
    "before the first element" (slice.indices gives -1): the result is empty, but the emitted
    numpy slice read -1 as the last element and returned two rows."""
    model = _slice_model((20, 10, 5))
    feeds = {"x": np.arange(1000, dtype=np.float32).reshape(20, 10, 5),
             "starts": np.array([20, 10, start]), "ends": np.array([0, 0, 1]),
             "axes": np.array([0, 1, 2]), "steps": np.array([-1, -3, -2])}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = backend.prepare(model).run(feeds)[0]
    assert want.shape == (19, 3, 0) and got.shape == want.shape


def _pool_model(op, shape, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", 1, list(shape))],
                              [helper.make_tensor_value_info("y", 1, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("strides,kernel", [([2**62, 2], [3, 3]), ([2, 2], [1, 1])])
def test_pool_with_negative_same_padding_is_refused(op, strides, kernel):
    """seed 12 case 1813: SAME_UPPER with a stride past the window on a short input asks for
    negative padding; ONNX Runtime refuses ("padding values must be non-negative"), the
    reference crops the input, onnxjit clamped at 0 and answered otherwise. Now refused at
    prepare with the node and the axis; a SAME pool whose padding is >= 0 still runs."""
    from onnxjit.errors import OnnxJitError
    model = _pool_model(op, (1, 1, 4, 5), auto_pad="SAME_UPPER", kernel_shape=kernel,
                        strides=strides)
    with pytest.raises(OnnxJitError, match="padding of spatial axis 0 would be negative"):
        backend.prepare(model)
    ok = _pool_model(op, (1, 1, 5, 5), auto_pad="SAME_UPPER", kernel_shape=[3, 3], strides=[2, 2])
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    np.testing.assert_allclose(backend.prepare(ok).run([x])[0],
                               ReferenceEvaluator(ok).run(None, {"x": x})[0], rtol=1e-6)


def test_pool_padded_past_the_element_limit_is_refused():
    """seed 12 case 403: MaxPool's kernel_shape [2**31 - 1, 2] under SAME_LOWER pads the input
    by as much, and the kernel's padded buffer raised MemoryError; now a LimitError at prepare
    naming the node and kernel_shape."""
    from onnxjit.errors import LimitError
    model = _pool_model("MaxPool", (1, 3, 32, 32), auto_pad="SAME_LOWER",
                        kernel_shape=[2**31 - 1, 2])
    with pytest.raises(LimitError, match=r"kernel_shape \[2147483647, 2\] pads the input"):
        backend.prepare(model)


@pytest.mark.parametrize("frame_length", [-1, 0, 100])
def test_stft_frame_length_out_of_range_is_refused(frame_length):
    """seed 12 case 2946: STFT with frame_length -1 and no window sized a window of ones by it
    first (numpy's ValueError: UNCLEAN); the frame check now comes first. The reference refuses
    these too."""
    from onnx import TensorProto

    from onnxjit.errors import OnnxJitError
    node = helper.make_node("STFT", ["signal", "step", "", "length"], ["y"])
    graph = helper.make_graph(
        [node], "stft", [helper.make_tensor_value_info("signal", 1, [1, 64, 1])],
        [helper.make_tensor_value_info("y", 1, None)],
        [helper.make_tensor("step", TensorProto.INT64, [], [8]),
         helper.make_tensor("length", TensorProto.INT64, [], [frame_length])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((1, 64, 1)).astype(np.float32)
    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, {"signal": x})
    with pytest.raises(OnnxJitError, match="do not frame a signal of length 64"):
        backend.prepare(model)
