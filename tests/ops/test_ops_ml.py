"""ai.onnx.ml ops over numeric tensors (Binarizer, ArrayFeatureExtractor) against the reference."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxjit.backend
from helpers import NP_TO_ONNX, check_reference


def _ml_model(node, feeds, out_type):
    graph = helper.make_graph(
        [node], "ml", [helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], v.shape)
                       for k, v in feeds.items()],
        [helper.make_tensor_value_info("z", out_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("ai.onnx.ml", 3)])


@pytest.mark.parametrize("dtype,threshold", [(np.float32, 0.3), (np.float64, -1.25),
                                             (np.int64, -0.5), (np.int32, 1.5)])
def test_binarizer(dtype, threshold):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5)) * 3).astype(dtype)
    if x.dtype.kind == "f":
        x[0, :3] = [np.nan, threshold, np.inf]
    node = helper.make_node("Binarizer", ["x"], ["z"], domain="ai.onnx.ml", threshold=threshold)
    check_reference(_ml_model(node, {"x": x}, NP_TO_ONNX[x.dtype]), [x])


@pytest.mark.parametrize("x_shape,y", [
    ((3, 5), np.array([4, 0, 2], np.int64)),
    ((2, 3, 4), np.array([[1, 3]], np.int64)),
    ((6,), np.array([5, -1, 0], np.int64)),
])
def test_array_feature_extractor(x_shape, y):
    x = np.arange(np.prod(x_shape), dtype=np.float32).reshape(x_shape)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml")
    check_reference(_ml_model(node, {"x": x, "y": y}, TensorProto.FLOAT), [x, y])


def test_array_feature_extractor_checks_bounds():
    x = np.zeros((2, 4), np.float32)
    y = np.array([1, 4], np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml")
    rep = onnxjit.backend.prepare(_ml_model(node, {"x": x, "y": y}, TensorProto.FLOAT))
    with pytest.raises(Exception, match="out of"):
        rep.run([x, y])
