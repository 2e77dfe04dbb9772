"""float16 and bfloat16: held in float32 inside compiled code, rounded like numpy/ml_dtypes."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend

NARROW = {"float16": (np.float16, TensorProto.FLOAT16),
          "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16)}


def _model(nodes, inputs, outputs):
    graph = helper.make_graph(nodes, "narrow", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("name", sorted(NARROW))
def test_cast_from_float_rounds_like_the_reference(name):
    dtype, onnx_type = NARROW[name]
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-9, 6, 200),
                        [0.0, -0.0, 65504.0, 65519.0, 65520.0, 1e6, np.inf, -np.inf, np.nan,
                         2.0 ** -25, 3 * 2.0 ** -26, 1.0 + 2.0 ** -11]]).astype(np.float32)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=onnx_type)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                   [helper.make_tensor_value_info("y", onnx_type, [x.size])])
    got = backend.prepare(model).run([x])[0]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float32), x.astype(dtype).astype(np.float32))


@pytest.mark.parametrize("name", sorted(NARROW))
def test_narrow_chain_matches_the_reference(name):
    dtype, onnx_type = NARROW[name]
    x = (np.random.default_rng(1).standard_normal((3, 5)) * 4).astype(dtype)
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"]), helper.make_node("Sub", ["a", "x"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", onnx_type, [3, 5])],
                   [helper.make_tensor_value_info("y", onnx_type, [3, 5])])
    got = backend.prepare(model).run([x])[0]
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))


@pytest.mark.parametrize("name", sorted(NARROW))
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_rounds_a_float32_result(name, op):
    """Computed in float32 and rounded once: equal to the reference on the float32 values,
    rounded to the narrow type."""
    dtype, onnx_type = NARROW[name]
    x = (np.random.default_rng(2).standard_normal((4, 3, 7)) * 3).astype(dtype)
    model = _model([helper.make_node(op, ["x"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", onnx_type, list(x.shape))],
                   [helper.make_tensor_value_info("y", onnx_type, None)])
    got = backend.prepare(model).run([x])[0]
    wide = _model([helper.make_node(op, ["x"], ["y"], axis=1)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    want = ReferenceEvaluator(wide).run(None, {"x": x.astype(np.float32)})[0].astype(dtype)
    assert got.dtype == np.dtype(dtype)
    eps = float(ml_dtypes.finfo(dtype).eps)   # at most one step apart (a float32 tie flips)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=eps,
                               atol=float(ml_dtypes.finfo(dtype).smallest_normal))
