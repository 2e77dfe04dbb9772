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
