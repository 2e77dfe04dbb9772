"""Reductions, softmax family and normalizations against onnx's ReferenceEvaluator."""
import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from helpers import check_reference, one_node

F32, F64 = np.float32, np.float64
INTS = (np.int32, np.int64, np.uint8, np.int8)


def _data(shape, dtype, seed=0, low=-3, high=4):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        low = max(low, 0) if np.dtype(dtype).kind == "u" else low
        return rng.integers(low, high, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
# (axes or None, keepdims, dtype): consecutive axes, non-consecutive (transposed) axes, all axes
REDUCE_FORMS = [([1], 1, F32), ([0, 2], 0, F64), (None, 1, F32)]


def _reduce_input(op, shape, dtype):
    x = _data(shape, dtype)
    if op == "ReduceLogSum" and np.dtype(dtype).kind == "f":
        x = np.abs(x) + 0.1  # a positive sum keeps log finite
    return x


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,keepdims,dtype", REDUCE_FORMS)
def test_reduce_floats(op, axes, keepdims, dtype):
    x = _reduce_input(op, (2, 3, 4), dtype)
    consts = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check_reference(one_node(op, {"x": x}, consts=consts, keepdims=keepdims), {"x": x})


@pytest.mark.parametrize("op, dtype", [
    (op, dtype) for op in ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceMean", "ReduceL1", "ReduceSumSquare", "ReduceL2"]
    for dtype in INTS
    # the schema does not allow 8-bit integers for these
    if not (op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceMean", "ReduceSum",
                   "ReduceProd") and dtype in (np.uint8, np.int8))])
def test_reduce_ints(op, dtype):
    x = _data((3, 5), dtype, high=40 if op != "ReduceProd" else 6)
    model = one_node(op, {"x": x}, consts={"axes": np.array([-1], np.int64)}, keepdims=0)
    # the reference's np.sum(np.square(x)) promotes int32 to int64; the schema keeps int32
    check_reference(model, {"x": x}, same_dtype=op != "ReduceSumSquare")


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMean"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_reduce_of_8_bit_ints_is_refused(op, dtype):
    """ReduceSum/Prod/Mean's T has no 8-bit integers: prepare refuses the model, naming the node
    (onnx's typed inference agrees), instead of computing some answer."""
    import onnx
    from onnxjit.errors import ModelError
    x = _data((3, 5), dtype, high=6)
    model = one_node(op, {"x": x}, consts={"axes": np.array([-1], np.int64)}, keepdims=0)
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    with pytest.raises(ModelError, match=op):
        onnxjit.backend.prepare(model)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                                "ReduceLogSumExp", "ReduceLogSum", "ReduceL2", "ReduceMean"])
def test_reduce_empty_axis(op):
    x = np.zeros((2, 0, 3), F32)
    check_reference(one_node(op, {"x": x}, consts={"axes": np.array([1], np.int64)}, keepdims=1), {"x": x})


@pytest.mark.parametrize("op,dtype", [("ReduceMax", np.int32), ("ReduceMin", np.int64),
                                      ("ReduceMax", np.bool_), ("ReduceMin", np.bool_)])
def test_reduce_empty_axis_non_float(op, dtype):
    x = np.zeros((0, 3), dtype)
    check_reference(one_node(op, {"x": x}, consts={"axes": np.array([0], np.int64)}, keepdims=0), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_bool(op):
    x = _data((3, 4), np.bool_)
    check_reference(one_node(op, {"x": x}, consts={"axes": np.array([1], np.int64)}, keepdims=1), {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceL2", "ReduceMax"])
def test_reduce_noop_with_empty_axes(op):
    x = _data((2, 3), F32)
    check_reference(one_node(op, {"x": x}, consts={"axes": np.zeros(0, np.int64)}, noop_with_empty_axes=1),
           {"x": x})


@pytest.mark.parametrize("op,opset", [("ReduceSum", 11), ("ReduceMean", 13), ("ReduceMax", 13),
                                      ("ReduceLogSumExp", 11), ("ReduceProd", 1)])
@pytest.mark.parametrize("axes", [[0, 2], None])
def test_reduce_axes_attribute(op, opset, axes):
    x = _data((2, 3, 4), F32)
    attrs = {} if axes is None else {"axes": axes}
    check_reference(one_node(op, {"x": x}, opset=opset, keepdims=0, **attrs), {"x": x})


def test_reduce_nan_propagates():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], F32)
    for op in ("ReduceMax", "ReduceMin"):
        check_reference(one_node(op, {"x": x}, consts={"axes": np.array([1], np.int64)}), {"x": x})


def test_reduce_axes_from_a_graph_input_specialize_on_its_value():
    x = _data((2, 3), F32)
    model = one_node("ReduceSum", {"x": x, "axes": np.array([1], np.int64)}, opset=13)
    rep = onnxjit.backend.prepare(model)
    for axes in ([1], [0], [1]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        np.testing.assert_allclose(rep.run(feeds)[0], x.sum(axis=axes[0], keepdims=True), rtol=1e-6)
    assert rep.cache_info()["misses"] == 2


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last,dtype", [
    (0, 1, 0, F32), (1, 0, 1, F32), (-1, 1, 1, np.int32), (2, 0, 0, np.int32), (-3, 0, 1, F64),
    (1, 1, 0, np.uint8)])
def test_arg_extreme(op, axis, keepdims, last, dtype):
    x = _data((3, 4, 5), dtype, low=-2, high=3).astype(dtype)  # many ties
    check_reference(one_node(op, {"x": x}, axis=axis, keepdims=keepdims, select_last_index=last), {"x": x})


@pytest.mark.parametrize("exclusive,reverse,axis,dtype", [
    (0, 0, 1, F32), (1, 0, -1, np.int32), (0, 1, 0, F64), (1, 1, 1, F32), (1, 1, 0, np.int64)])
def test_cumsum(exclusive, reverse, axis, dtype):
    x = _data((3, 4, 2), dtype)
    feeds = {"x": x}
    model = one_node("CumSum", {"x": x}, consts={"axis": np.array(axis, np.int64)},
                   exclusive=exclusive, reverse=reverse)
    check_reference(model, feeds)


def test_cumsum_runtime_axis():
    x, axis = _data((3, 4), F32), np.array(-2, np.int32)
    check_reference(one_node("CumSum", {"x": x, "axis": axis}, reverse=1), {"x": x, "axis": axis})


def test_cumsum_axis_out_of_range():
    x, axis = _data((3, 4), F32), np.array(2, np.int64)
    with pytest.raises(IndexError, match="CumSum: axis out of range"):
        onnxjit.backend.prepare(one_node("CumSum", {"x": x, "axis": axis})).run({"x": x, "axis": axis})


def _coerced_oracle(op, x, axis):
    """Opset < 13 semantics (the reference implements only the single-axis form): flatten to 2-D
    at `axis`, apply the op over the flattened tail."""
    x2 = x.reshape(int(np.prod(x.shape[:axis])), -1)
    y2 = ReferenceEvaluator(one_node(op, {"x": x2}, opset=13, axis=1)).run(None, {"x": x2})[0]
    return [y2.reshape(x.shape)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (0, 13), (1, 11), (0, 11), (2, 11)])
def test_softmax_family(op, axis, opset):
    x = _data((2, 3, 4), F32)
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    expected = _coerced_oracle(op, x, axis) if opset < 13 else None
    check_reference(one_node(op, {"x": x}, opset=opset, axis=axis), {"x": x}, expected=expected)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_float64_large(op):
    x = _data((3, 7), F64) * 1000
    expected = None
    if op == "LogSoftmax":  # the reference's log(softmax) underflows to -inf; the stable form
        m = x.max(axis=-1, keepdims=True)
        expected = [x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))]
    check_reference(one_node(op, {"x": x}), {"x": x}, expected=expected)


@pytest.mark.parametrize("axis,bias,n_out,dtype", [
    (-1, True, 1, F32), (1, False, 3, F32), (0, True, 3, F32), (-2, True, 1, F64), (2, False, 1, F64)])
def test_layer_normalization(axis, bias, n_out, dtype):
    x = _data((2, 3, 5), dtype)
    norm_shape = x.shape[axis:]
    inputs = {"x": x, "scale": _data(norm_shape, dtype, 1)}
    if bias:
        inputs["bias"] = _data(norm_shape, dtype, 2)
    check_reference(one_node("LayerNormalization", inputs, n_out=n_out, axis=axis, epsilon=1e-3), inputs)


def test_layer_normalization_broadcast_scale():
    x = _data((4, 6), F32)
    consts = {"scale": np.array([1.5], F32), "bias": np.array([0.25], F32)}
    check_reference(one_node("LayerNormalization", {"x": x}, consts=consts), {"x": x})


@pytest.mark.parametrize("axis,dtype", [(-1, F32), (1, F32), (0, F64)])
def test_rms_normalization(axis, dtype):
    x = _data((2, 3, 4), dtype)
    inputs = {"x": x, "scale": _data(x.shape[axis:], dtype, 1)}
    check_reference(one_node("RMSNormalization", inputs, opset=23, axis=axis), inputs)


@pytest.mark.parametrize("shape,dtype", [((2, 3, 4, 5), F32), ((3, 2, 6), F64)])
def test_instance_normalization(shape, dtype):
    inputs = {"x": _data(shape, dtype), "s": _data(shape[1], dtype, 1), "b": _data(shape[1], dtype, 2)}
    check_reference(one_node("InstanceNormalization", inputs, epsilon=1e-3), inputs)


# GroupNormalization-18 (per-group scale and bias) is deprecated: onnx's checker refuses it at
# prepare ("deprecated in domain_version of 18"); opset 21's per-channel form is checked
@pytest.mark.parametrize("opset,groups", [(21, 2), (21, 4), (21, 1)])
def test_group_normalization(opset, groups):
    x = _data((2, 4, 3, 2), F32)
    n = groups if opset == 18 else 4
    inputs = {"x": x, "s": _data(n, F32, 1), "b": _data(n, F32, 2)}
    check_reference(one_node("GroupNormalization", inputs, opset=opset, num_groups=groups), inputs)


@pytest.mark.parametrize("p,axis,dtype", [(2, -1, F32), (1, 0, F32), (2, 1, F64), (1, -1, F64)])
def test_lp_normalization(p, axis, dtype):
    # non-negative data: onnx's reference sums x ** p without abs (the spec and ORT use |x|)
    x = np.abs(_data((3, 4, 2), dtype))
    x[0] = 0  # a zero norm gives 0, not NaN
    check_reference(one_node("LpNormalization", {"x": x}, opset=22, p=p, axis=axis), {"x": x})


@pytest.mark.parametrize("axes", [None, [1], [0, 2, 3], [2, 3]])
def test_mean_variance_normalization(axes):
    x = _data((2, 3, 4, 2), F32)
    attrs = {} if axes is None else {"axes": axes}
    check_reference(one_node("MeanVarianceNormalization", {"x": x}, opset=13, **attrs), {"x": x})
