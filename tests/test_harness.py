"""The shared test harness (tests/helpers.py) and the shared random-inputs helper
(onnxjit/inputs.py) catch what they are for."""
import types

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers import TOLERANCES, assert_outputs_match, one_node
from onnxjit.inputs import model_inputs, parse_dims, random_inputs
from onnxjit.ir import input_specs


@pytest.mark.parametrize("dtype", sorted(TOLERANCES, key=str))
def test_float_tolerance_is_per_dtype(dtype):
    rtol, atol = TOLERANCES[dtype]
    e = np.array([1.0, -2.0, 3.0], dtype)
    wide = e.astype(np.complex128 if dtype.kind == "c" else np.float64)
    inside = (wide * (1 + rtol / 2)).astype(dtype)        # rounded to the dtype: still inside
    assert not np.array_equal(inside, e)
    assert_outputs_match([inside], [e])
    with pytest.raises(AssertionError):
        assert_outputs_match([(wide * (1 + rtol * 20)).astype(dtype)], [e])   # outside it


def test_other_dtypes_compare_exactly_and_mismatches_fail():
    ints = np.array([1, 2, 3], np.int32)
    assert_outputs_match([ints.copy()], [ints])
    with pytest.raises(AssertionError):
        assert_outputs_match([ints + np.array([0, 0, 1], np.int32)], [ints])
    with pytest.raises(AssertionError):                                # dtype
        assert_outputs_match([ints.astype(np.int64)], [ints])
    assert_outputs_match([ints.astype(np.int64)], [ints], same_dtype=False)
    with pytest.raises(AssertionError):                                # shape
        assert_outputs_match([ints[:2]], [ints[:2].reshape(2, 1)])
    with pytest.raises(AssertionError):                                # number of outputs
        assert_outputs_match([ints], [ints, ints])
    with pytest.raises(AssertionError):                                # float32 is stricter than float16
        assert_outputs_match([np.float32([1.0005])], [np.float32([1.0])])
    assert_outputs_match([np.float16([1.0005])], [np.float16([1.0])])


def test_one_node_builds_inputs_initializers_and_absent_inputs():
    x, s = np.zeros((2, 3), np.float32), np.float32(0.5)
    model = one_node("QuantizeLinear", {"x": x}, consts={"s": np.asarray(s), "_skip_zp": np.uint8(0)},
                     axis=1)
    node = model.graph.node[0]
    assert list(node.input) == ["x", "s", ""] and node.op_type == "QuantizeLinear"
    assert [i.name for i in model.graph.input] == ["x"]
    assert [t.name for t in model.graph.initializer] == ["s", "_skip_zp"]
    assert model.opset_import[0].version == 21
    model = one_node("Dropout", {"x": x, "ratio": None, "training_mode": np.bool_(True)},
                     outputs=["y", "mask"], opsets=(("", 13),), seed=1)
    assert list(model.graph.node[0].input) == ["x", "", "training_mode"]
    assert [i.name for i in model.graph.input] == ["x", "training_mode"]
    assert list(model.graph.node[0].output) == ["y", "mask"]
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13)]


def _model():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("b", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph)


def test_random_inputs_one_helper_for_reps_and_models():
    model = _model()
    feeds = model_inputs(model, {"N": 4}, seed=3)
    assert [(k, v.shape, v.dtype) for k, v in feeds.items()] == [
        ("a", (4, 3), np.float32), ("b", (), np.int64), ("c", (2,), np.bool_)]
    assert isinstance(feeds["b"], np.ndarray)                          # 0-d array, not a scalar
    rep = types.SimpleNamespace(inputs=input_specs(model.graph, set()))
    arrays = random_inputs(rep, {"N": 4}, seed=3)                      # same draws, rep order
    assert len(arrays) == 3 and all(np.array_equal(a, b) for a, b in zip(arrays, feeds.values()))
    assert not np.array_equal(model_inputs(model, {"N": 4}, seed=4)["a"], feeds["a"])
    assert model_inputs(model)["a"].shape == (1, 3)                    # unnamed dims are 1


def test_parse_dims():
    assert parse_dims(["N=4", " seq =128"]) == {"N": 4, "seq": 128}
    for bad in ("N", "N=x", "=3"):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            parse_dims([bad])
