"""Movement, shape and indexing ops against onnx's reference evaluator (one-node models)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from onnxjit.errors import LoweringError

from helpers import check_reference, model_of

RNG = np.random.default_rng(0)


def arr(shape, dtype=np.float32):
    """Random test data of the given shape and dtype."""
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def i64(*v):
    return np.array(v, np.int64)


def check(model, feeds):
    check_reference(model, feeds)


X = arr((2, 3, 4))
X4 = arr((1, 8, 2, 3))
IDX = np.array([[0, 2], [-1, 1]], np.int64)

# (id, op, run-time inputs, const inputs {position: array}, attributes, opset, outputs)
CASES = [
    ("reshape_neg", "Reshape", [X], {1: i64(4, -1)}, {}, 21, 1),
    ("reshape_zero", "Reshape", [X], {1: i64(0, 0, -1)}, {}, 14, 1),
    ("reshape_allowzero", "Reshape", [arr((0, 3))], {1: i64(3, 0)}, {"allowzero": 1}, 14, 1),
    ("reshape_opset5", "Reshape", [X], {1: i64(-1)}, {}, 5, 1),
    ("reshape_scalar", "Reshape", [arr((1, 1))], {1: np.zeros(0, np.int64)}, {}, 19, 1),
    ("flatten_0", "Flatten", [X], {}, {"axis": 0}, 21, 1),
    ("flatten_2", "Flatten", [X], {}, {"axis": 2}, 21, 1),
    ("flatten_neg", "Flatten", [X], {}, {"axis": -1}, 11, 1),
    ("transpose_default", "Transpose", [X], {}, {}, 21, 1),
    ("transpose_perm", "Transpose", [X], {}, {"perm": [1, 2, 0]}, 21, 1),
    ("squeeze_attr", "Squeeze", [arr((1, 3, 1))], {}, {"axes": [-1]}, 11, 1),
    ("squeeze_input", "Squeeze", [arr((1, 3, 1))], {1: i64(0, 2)}, {}, 13, 1),
    ("squeeze_all", "Squeeze", [arr((1, 3, 1))], {}, {}, 21, 1),
    ("unsqueeze_attr", "Unsqueeze", [X], {}, {"axes": [0, 4]}, 11, 1),
    ("unsqueeze_input", "Unsqueeze", [X], {1: i64(-1, 1)}, {}, 13, 1),
    ("concat_axis1", "Concat", [X, arr((2, 1, 4)), arr((2, 2, 4))], {}, {"axis": 1}, 13, 1),
    ("concat_neg_const", "Concat", [X], {1: arr((2, 3, 2))}, {"axis": -1}, 13, 1),
    ("split_attr", "Split", [X], {}, {"axis": 2, "split": [1, 3]}, 11, 2),
    ("split_equal", "Split", [X], {}, {"axis": 2}, 13, 2),
    ("split_input", "Split", [X], {1: i64(2, 0, 1)}, {"axis": 1}, 13, 3),
    ("split_num_outputs", "Split", [arr((7, 2))], {}, {"num_outputs": 3}, 18, 3),
    ("slice_attrs", "Slice", [X], {}, {"starts": [1, -3], "ends": [2, 100], "axes": [0, 2]}, 1, 1),
    ("slice_steps", "Slice", [X], {1: i64(0, -1), 2: i64(3, -100), 3: i64(1, 2), 4: i64(2, -2)}, {}, 13, 1),
    ("slice_neg_step_to_start", "Slice", [arr((6,))], {1: i64(4), 2: i64(-7), 4: i64(-1)}, {}, 10, 1),
    ("slice_empty", "Slice", [X], {1: i64(5), 2: i64(10), 3: i64(2)}, {}, 13, 1),
    ("slice_neg_axes", "Slice", [X], {1: i64(1), 2: i64(3), 3: i64(-2)}, {}, 13, 1),
    ("gather_axis0", "Gather", [arr((3, 4)), IDX], {}, {}, 13, 1),
    ("gather_axis1_i32", "Gather", [X, np.array([2, -3, 0], np.int32)], {}, {"axis": 1}, 13, 1),
    ("gather_axis_neg", "Gather", [X, np.array(3, np.int64)], {}, {"axis": -1}, 11, 1),
    ("gather_const_scalar", "Gather", [X], {1: np.array(-1, np.int64)}, {"axis": 1}, 13, 1),
    ("gather_const_vector", "Gather", [X], {1: i64(3, 0, 0)}, {"axis": 2}, 13, 1),
    ("gather_elements_0", "GatherElements", [X, RNG.integers(-2, 2, (1, 3, 4))], {}, {}, 13, 1),
    ("gather_elements_2", "GatherElements", [X, RNG.integers(-4, 4, (2, 3, 5))], {}, {"axis": 2}, 13, 1),
    ("gathernd_full", "GatherND", [X, np.array([[0, 1, 2], [1, -1, -4]], np.int64)], {}, {}, 13, 1),
    ("gathernd_partial", "GatherND", [X, np.array([[[1]], [[0]]], np.int64)], {}, {}, 11, 1),
    ("gathernd_batch", "GatherND", [X, np.array([[1, 3], [-1, 0]], np.int64)], {}, {"batch_dims": 1}, 13, 1),
    ("expand_rank", "Expand", [arr((3, 1))], {1: i64(2, 1, 4)}, {}, 13, 1),
    ("expand_smaller_shape", "Expand", [X], {1: i64(3, 1)}, {}, 8, 1),
    ("pad_constant", "Pad", [X], {1: i64(0, 1, 2, 1, 0, 3)}, {}, 21, 1),
    ("pad_constant_value", "Pad", [X], {1: i64(1, 0, 0, 0, 0, 1), 2: np.array(2.5, np.float32)}, {}, 13, 1),
    ("pad_runtime_value", "Pad", [X, np.array(-1.5, np.float32)], {1: i64(0, 2, 0, 0, 1, 1)}, {}, 13, 1),
    ("pad_reflect", "Pad", [X], {1: i64(0, 2, 3, 0, 1, 3)}, {"mode": "reflect"}, 21, 1),
    ("pad_edge", "Pad", [X], {1: i64(1, 1, 1, 1, 1, 1)}, {"mode": "edge"}, 13, 1),
    ("pad_wrap", "Pad", [X], {1: i64(0, 1, 5, 0, 2, 2)}, {"mode": "wrap"}, 19, 1),
    ("pad_axes", "Pad", [X, None], {1: i64(1, 2, 3, 0), 3: i64(-1, 0)}, {"mode": "edge"}, 18, 1),
    ("pad_attr", "Pad", [X], {}, {"pads": [0, 0, 1, 0, 0, 1], "value": 3.0}, 2, 1),
    ("tile", "Tile", [X], {1: i64(2, 1, 3)}, {}, 13, 1),
    ("tile_zero", "Tile", [X], {1: i64(1, 0, 1)}, {}, 13, 1),
    ("triu", "Trilu", [X], {}, {}, 14, 1),
    ("tril_k", "Trilu", [X], {1: np.array(1, np.int64)}, {"upper": 0}, 14, 1),
    ("triu_runtime_k", "Trilu", [X, np.array(-1, np.int64)], {}, {}, 14, 1),
    ("depth_to_space_dcr", "DepthToSpace", [X4], {}, {"blocksize": 2}, 13, 1),
    ("depth_to_space_crd", "DepthToSpace", [X4], {}, {"blocksize": 2, "mode": "CRD"}, 13, 1),
    ("space_to_depth", "SpaceToDepth", [arr((1, 2, 4, 6))], {}, {"blocksize": 2}, 13, 1),
    ("eyelike", "EyeLike", [arr((3, 4))], {}, {"k": 1, "dtype": TensorProto.INT32}, 9, 1),
    ("onehot", "OneHot", [np.array([[0, 3], [-1, 7]], np.int64)], {1: np.array(4, np.int64),
                                                                   2: np.array([0, 5], np.int32)}, {}, 11, 1),
    ("onehot_axis0_float", "OneHot", [np.array([1.0, -2.0, 2.0], np.float32)],
     {1: np.array(3.0, np.float32), 2: np.array([-1.0, 1.0])}, {"axis": 0}, 11, 1),
    ("compress_axis", "Compress", [X], {1: np.array([True, False, True])}, {"axis": 1}, 11, 1),
    ("compress_flat", "Compress", [X], {1: np.array([False, True, True, False, True])}, {}, 11, 1),
    ("dropout_mask", "Dropout", [X], {}, {}, 13, 2),
    ("dropout_ratio_input", "Dropout", [X, np.array(0.2, np.float32)], {}, {}, 13, 1),
    ("dropout_training_zero", "Dropout", [X], {1: np.array(0.0, np.float32), 2: np.array(True)}, {}, 13, 2),
    ("identity", "Identity", [X], {}, {}, 21, 1),
    ("shape", "Shape", [X], {}, {}, 13, 1),
    ("shape_start_end", "Shape", [X], {}, {"start": -2, "end": 10}, 21, 1),
    ("size", "Size", [X], {}, {}, 13, 1),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op(case):
    _, op, inputs, consts, attrs, opset, n_out = case
    check(*model_of(op, inputs, consts, attrs, opset, n_out))


DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]
DTYPE_CASES = [
    ("transpose", "Transpose", {}, {"perm": [2, 0, 1]}),
    ("slice", "Slice", {1: i64(2, 1), 2: i64(0, 4), 3: i64(2, 1), 4: i64(-1, 2)}, {}),
    ("gather", "Gather", {1: i64(1, -1)}, {"axis": 1}),
    ("concat", "Concat", {1: arr((2, 3, 4))}, {"axis": 0}),
    ("pad", "Pad", {1: i64(1, 0, 0, 0, 2, 1)}, {"mode": "reflect"}),
    ("tile", "Tile", {1: i64(1, 2, 2)}, {}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).name for d in DTYPES])
@pytest.mark.parametrize("case", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_dtypes(case, dtype):
    _, op, consts, attrs = case
    consts = {p: (c.astype(dtype) if c.dtype == np.float32 else c) for p, c in consts.items()}
    check(*model_of(op, [arr((2, 3, 4), dtype)], consts, attrs, 21))


def test_gather_elements_indices_smaller_than_data():
    """Indices smaller than data on the other axes read the matching corner (as ORT does)."""
    idx = np.array([[[0], [2]]], np.int32)
    model, feeds = model_of("GatherElements", [X, idx], {}, {"axis": 1}, 13)
    got = onnxjit.backend.prepare(model).run(feeds)[0]
    np.testing.assert_array_equal(got, np.take_along_axis(X[:1, :, :1], idx, axis=1))


def test_pad_negative_crops():
    """Negative pads remove elements (the reference evaluator refuses them)."""
    model, feeds = model_of("Pad", [X], {1: i64(0, -1, 2, 0, 0, -2)}, {"mode": "edge"}, 13)
    got = onnxjit.backend.prepare(model).run(feeds)[0]
    np.testing.assert_array_equal(got, np.pad(X[:, 1:, :2], ((0, 0), (0, 0), (2, 0)), mode="edge"))


def test_dropout_old_mask_has_input_type():
    """Before opset 10 the mask has the input's type (the reference evaluator gives bool)."""
    model, feeds = model_of("Dropout", [X], {}, {"ratio": 0.3}, 7, n_out=2)
    y, mask = onnxjit.backend.prepare(model).run(feeds)
    np.testing.assert_array_equal(y, X)
    assert mask.dtype == X.dtype and (mask == 1).all()


def test_shape_chain_folds():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to one reshape with literal dims."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(i64(0), "zero1"), numpy_helper.from_array(i64(-1), "minus1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X.shape)],
                              [helper.make_empty_tensor_value_info("y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 8
    check(model, [X])
    assert "reshape((2, 12))" in onnxjit.backend.prepare(model).source()


def test_constant_node():
    node = helper.make_node("Constant", [], ["y"], value_ints=[1, 2, 3])
    graph = helper.make_graph([node], "g", [], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    np.testing.assert_array_equal(onnxjit.backend.prepare(model).run([])[0], i64(1, 2, 3))


RUNTIME_OOB = [
    ("gather", "Gather", [X, i64(0, 2)], {"axis": 0}),
    ("gather_neg", "Gather", [X, i64(-5)], {"axis": 2}),
    ("gather_elements", "GatherElements", [X, np.full((2, 3, 4), 3, np.int64)], {"axis": 1}),
    ("gathernd", "GatherND", [X, i64(1, 3)], {}),
]


@pytest.mark.parametrize("case", RUNTIME_OOB, ids=[c[0] for c in RUNTIME_OOB])
def test_runtime_index_out_of_range(case):
    _, op, inputs, attrs = case
    model, feeds = model_of(op, inputs, {}, attrs, 13)
    with pytest.raises(IndexError, match=f"{op}: index out of range"):
        onnxjit.backend.prepare(model).run(feeds)


def test_const_index_out_of_range():
    model, _ = model_of("Gather", [X], {1: i64(0, 7)}, {"axis": 1}, 13)
    with pytest.raises(LoweringError, match="out of range"):
        onnxjit.backend.prepare(model)


@pytest.mark.parametrize("op, inputs, other", [
    ("Reshape", [X, i64(4, 6)], i64(6, 4)),
    ("Slice", [X, i64(0), i64(1)], i64(2)),
    ("Tile", [X, i64(1, 1, 2)], i64(2, 1, 1))])
def test_shape_like_graph_inputs_specialize_on_their_values(op, inputs, other):
    model, feeds = model_of(op, inputs, {}, {}, 13)
    rep = onnxjit.backend.prepare(model)
    for value in (inputs[1], other, inputs[1]):
        feeds[1] = value
        expected = ReferenceEvaluator(model).run(None, dict(zip([i.name for i in model.graph.input], feeds)))
        np.testing.assert_array_equal(rep.run(feeds)[0], expected[0])
    assert (rep.cache_info()["misses"], rep.cache_info()["signatures"]) == (2, 2)


def test_shape_computed_from_small_inputs_specializes():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    nodes = [helper.make_node("Abs", ["s"], ["a"]), helper.make_node("Reshape", ["x", "a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x, s], [helper.make_empty_tensor_value_info("y")])
    rep = onnxjit.backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(rep.run([data, i64(-6, 4)])[0], data.reshape(6, 4))
    np.testing.assert_array_equal(rep.run([data, i64(3, -8)])[0], data.reshape(3, 8))


def test_shape_computed_from_a_data_tensor_is_staged():
    """A shape computed from a large data tensor cuts the graph (staged.py): the Reshape starts
    a segment specialized on the computed shape's value."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    big = helper.make_tensor_value_info("big", TensorProto.INT64, [100])
    starts = helper.make_tensor("starts", TensorProto.INT64, [1], [0])
    ends = helper.make_tensor("ends", TensorProto.INT64, [1], [2])
    nodes = [helper.make_node("Slice", ["big", "starts", "ends"], ["a"]),
             helper.make_node("Reshape", ["x", "a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x, big], [helper.make_empty_tensor_value_info("y")],
                              [starts, ends])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = onnxjit.backend.prepare(model)
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    for shape in ((3, 8), (12, 2)):
        big_value = np.zeros(100, np.int64)
        big_value[:2] = shape
        feeds = {"x": data, "big": big_value}
        (want,) = ReferenceEvaluator(model).run(None, feeds)
        np.testing.assert_array_equal(rep.run(feeds)[0], want)


def test_training_dropout_decided_at_run_time():
    """A run-time training_mode: True drops (the kept elements scaled by 1 / (1 - ratio); the
    seeded draws are checked against the reference in test_ops_training.py), False copies."""
    model, feeds = model_of("Dropout", [X, np.array(0.5, np.float32), np.array(True)], {}, {}, 13)
    rep = onnxjit.backend.prepare(model)
    y = rep.run(feeds)[0]
    kept = y != 0
    assert kept.any() and not kept.all()   # 24 elements: all or none kept has p < 1e-6
    np.testing.assert_allclose(y[kept], X[kept] * 2, rtol=1e-6)
    feeds[2] = np.array(False)
    np.testing.assert_array_equal(rep.run(feeds)[0], X)


@pytest.mark.parametrize("shape,perm", [
    ((1, 4, 28, 5, 6), (0, 2, 1, 3, 4)),      # ShuffleNet's channel shuffle: runs of 30
    ((2, 3, 4, 5), (0, 2, 1, 3)),              # attention head split
    ((2, 3, 4, 5), (0, 2, 3, 1)),              # K^T: the last axis moves (strided gather)
    ((3, 1, 5, 1), (3, 2, 1, 0)),              # only size-1 axes around: a 2-D transpose
    ((1, 6, 1, 7), (2, 0, 1, 3)),              # only size-1 axes move: a reshape (a view)
    ((2, 0, 3), (2, 0, 1)),                    # empty
    ((7,), (0,)),
    ((2, 3, 2, 3, 2, 2), (5, 3, 1, 4, 0, 2)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_transpose_kernel(shape, perm, dtype):
    """Transpose through the merged-axes kernel (or a reshape) against ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator

    from onnxjit.kernels.movement import TRANSPOSE_RANK
    from onnxjit.ops.movement import canonical_transpose, merged_transpose
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) > 0 if dtype == np.bool_
         else (rng.standard_normal(shape) * 10).astype(dtype))
    model, feeds = model_of("Transpose", [x], attrs={"perm": list(perm)})
    got = onnxjit.prepare(model).run(feeds)[0]
    want = ReferenceEvaluator(model).run(None, {"x0": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    merged, mperm = merged_transpose(shape, perm)
    assert int(np.prod(merged)) == x.size and sorted(mperm) == list(range(len(merged)))
    np.testing.assert_array_equal(np.transpose(x.reshape(merged), mperm).reshape(want.shape), want)
    padded, pperm = canonical_transpose(merged, mperm)      # what the kernel is handed
    assert len(padded) == len(pperm) == max(TRANSPOSE_RANK, len(merged))
    np.testing.assert_array_equal(np.transpose(x.reshape(padded), pperm).reshape(want.shape), want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shapes,axis,dtype", [
    ([(1, 64, 55, 55), (1, 64, 55, 55)], 1, np.float32),  # one row: threads split each run
    ([(1, 13, 37, 41), (1, 1, 37, 41), (1, 50, 37, 41)], 1, np.float32),  # odd, unequal runs
    ([(300, 7, 65), (300, 5, 65)], 1, np.int64),  # many rows: threads take whole rows
    ([(3, 3000, 11), (3, 2000, 11)], 1, np.float64),  # few rows: runs split again
    ([(2, 70000), (2, 3)], -1, np.bool_),
])
def test_concat_large_outputs_share_the_copy(threads, shapes, axis, dtype):
    """Past CONCAT_PAR_MIN elements each Numba thread copies a part of every input's run, or
    whole rows when there are at least four per thread."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        names = [f"x{i}" for i in range(len(shapes))]
        tp = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        graph = helper.make_graph(
            [helper.make_node("Concat", names, ["y"], axis=axis)], "g",
            [helper.make_tensor_value_info(n, tp, s) for n, s in zip(names, shapes)],
            [helper.make_tensor_value_info("y", tp, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        feeds = [arr(s, dtype) for s in shapes]
        got = onnxjit.backend.prepare(model).run(feeds)[0]
        np.testing.assert_array_equal(got, np.concatenate(feeds, axis=axis))
        ref = ReferenceEvaluator(model).run(None, dict(zip(names, feeds)))[0]
        np.testing.assert_array_equal(got, ref)
    finally:
        numba.set_num_threads(old)


def test_optional_tensor_ops():
    """OptionalHasElement of a tensor and of an omitted input, OptionalGetElement of a tensor
    (resolved at compile time), against the reference."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("OptionalHasElement", ["x"], ["has"]),
             helper.make_node("OptionalHasElement", [], ["none"]),
             helper.make_node("OptionalGetElement", ["x"], ["got"]),
             helper.make_node("Relu", ["got"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, t, None)
         for n, t in (("has", TensorProto.BOOL), ("none", TensorProto.BOOL),
                      ("y", TensorProto.FLOAT))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    check_reference(model, [x])


def test_optional_get_element_of_nothing_is_refused():
    node = helper.make_node("OptionalGetElement", [""], ["y"])
    graph = helper.make_graph([node], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    # malformed (a required input left empty): refused at prepare, naming the node
    from onnxjit.errors import OnnxJitError
    with pytest.raises(OnnxJitError, match="OptionalGetElement"):
        onnxjit.backend.prepare(model)
