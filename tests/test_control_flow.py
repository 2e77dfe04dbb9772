"""If and Loop resolved at compile time (condition / trip count known or specialized on)."""
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend


def _branch(name, op):
    out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [3])
    return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_out"])], name, [], [out])


def test_if_on_a_graph_input_compiles_each_branch_once():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=_branch("then", "Neg"),
                            else_branch=_branch("else", "Abs"))
    graph = helper.make_graph([node], "if", [x, c], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rep, ref = backend.prepare(model), ReferenceEvaluator(model)
    xv = np.array([-1.0, 2.0, -3.0], np.float32)
    for cond in (True, False, True):
        feeds = {"x": xv, "c": np.array(cond)}
        np.testing.assert_array_equal(rep.run(feeds)[0], ref.run(None, feeds)[0])
    assert rep.cache_info()["misses"] == 2


def test_loop_unrolls_with_scan_outputs():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [2])])
    inputs = [helper.make_tensor_value_info("n", TensorProto.INT64, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    init = [helper.make_tensor("c", TensorProto.BOOL, [], [True]),
            helper.make_tensor("acc", TensorProto.FLOAT, [2], [0.0, 0.0])]
    node = helper.make_node("Loop", ["n", "c", "acc"], ["total", "steps"], body=body)
    graph = helper.make_graph([node], "loop", inputs, [helper.make_empty_tensor_value_info("total"),
                                                       helper.make_empty_tensor_value_info("steps")], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {"n": np.array(4, np.int64), "x": np.array([1.0, -0.5], np.float32)}
    for got, want in zip(backend.prepare(model).run(feeds), ReferenceEvaluator(model).run(None, feeds)):
        np.testing.assert_allclose(got, want)
