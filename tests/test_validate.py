"""Checks at prepare (onnxjit/validate.py): invalid models are refused naming the node, before any
code is generated; resource limits on tensor sizes and subgraph nesting."""
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, shape_inference
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from onnxjit import validate
from onnxjit.errors import LimitError, ModelError

vi = helper.make_tensor_value_info


def _model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _feeds(model, arrays):
    return dict(zip([i.name for i in model.graph.input], arrays))


def _attempt(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:   # noqa: BLE001
        return exc


def _oracles(model, arrays):
    """(the reference's result or error, ONNX Runtime's result or error)."""
    ref = _attempt(lambda: ReferenceEvaluator(model).run(None, _feeds(model, arrays)))
    options = ort.SessionOptions()
    options.log_severity_level = 4
    rt = _attempt(lambda: ort.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"]).run(
        None, _feeds(model, arrays)))
    return ref, rt


def _oracles_disown(model, arrays):
    """True when the oracles do not stand behind one answer: either refuses, or they differ."""
    ref, rt = _oracles(model, arrays)
    if isinstance(ref, Exception) or isinstance(rt, Exception):
        return True
    return any(r.shape != o.shape or not np.allclose(r, o, equal_nan=True)
               for r, o in zip(ref, rt))


def test_every_backend_suite_model_passes_validation():
    """The checks refuse no model of onnx's backend suite (node and model cases, data dir)."""
    import glob
    import os

    from onnx.backend.test.case import model as model_cases
    from onnx.backend.test.case import node as node_cases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [(c.name, c.model) for c in node_cases.collect_testcases()
                 + model_cases.collect_testcases() if c.model is not None]
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    cases += [(p, onnx.load(p)) for p in sorted(glob.glob(os.path.join(data, "*", "*", "model.onnx")))]
    assert len(cases) > 1500
    refused = []
    for name, model in cases:
        try:
            validate.check_model(model)
        except ModelError as exc:
            refused.append((name, str(exc)))
    assert refused == []


# Invalid models: (id, model, inputs, the node name the error must name).
def _conv_f64_weight():
    w = helper.make_tensor("W", T.DOUBLE, [1, 1, 3, 3], np.ones(9).tolist())
    return _model([helper.make_node("Conv", ["X", "W"], ["Y"], name="conv0")],
                  [vi("X", T.FLOAT, [1, 1, 4, 4])], [vi("Y", T.FLOAT, None)], [w]), \
        [np.ones((1, 1, 4, 4), np.float32)], "conv0"


def _conv_transpose_f64_weight():
    w = helper.make_tensor("W", T.DOUBLE, [1, 1, 3, 3], np.ones(9).tolist())
    return _model([helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="deconv")],
                  [vi("X", T.FLOAT, [1, 1, 4, 4])], [vi("Y", T.FLOAT, None)], [w]), \
        [np.ones((1, 1, 4, 4), np.float32)], "deconv"


def _gemm_f64_weight():
    w = helper.make_tensor("W", T.DOUBLE, [3, 2], np.ones(6).tolist())
    return _model([helper.make_node("Gemm", ["X", "W"], ["Y"], name="fc")],
                  [vi("X", T.FLOAT, [2, 3])], [vi("Y", T.FLOAT, None)], [w]), \
        [np.ones((2, 3), np.float32)], "fc"


def _mixed_add():
    return _model([helper.make_node("Add", ["a", "b"], ["y"], name="add_mixed")],
                  [vi("a", T.FLOAT, ["n"]), vi("b", T.DOUBLE, ["n"])], [vi("y", T.FLOAT, None)]), \
        [np.ones(3, np.float32), np.ones(3, np.float64)], "add_mixed"


def _relu_three_inputs():
    return _model([helper.make_node("Relu", ["a", "a", "a"], ["y"], name="relu3")],
                  [vi("a", T.FLOAT, [2])], [vi("y", T.FLOAT, None)]), \
        [np.ones(2, np.float32)], "relu3"


def _mod_fmod_2():
    return _model([helper.make_node("Mod", ["a", "b"], ["y"], name="mod", fmod=2)],
                  [vi("a", T.INT32, [2]), vi("b", T.INT32, [2])], [vi("y", T.INT32, None)]), \
        [np.array([5, 7], np.int32), np.array([3, 2], np.int32)], "mod"


def _affine_grid_align_corners():
    size = helper.make_tensor("s", T.INT64, [4], [1, 1, 2, 2])
    return _model([helper.make_node("AffineGrid", ["t", "s"], ["y"], name="grid",
                                    align_corners=1048577)],
                  [vi("t", T.FLOAT, [1, 2, 3])], [vi("y", T.FLOAT, None)], [size]), \
        [np.arange(6, dtype=np.float32).reshape(1, 2, 3)], "grid"


def _axes_out_of_range_after_reshape():
    shape = helper.make_tensor("shape", T.INT64, [1], [-1])
    axes = helper.make_tensor("axes", T.INT64, [1], [2])
    return _model([helper.make_node("Reshape", ["x", "shape"], ["flat"], name="flatten"),
                   helper.make_node("ReduceSum", ["flat", "axes"], ["y"], name="sum_axis2")],
                  [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, None)], [shape, axes]), \
        [np.ones((2, 3, 4), np.float32)], "sum_axis2"


def _attention_mismatched():
    return _model([helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn")],
                  [vi("q", T.FLOAT, [1, 2, 4, 8]), vi("k", T.FLOAT, [1, 2, 5, 7]),
                   vi("v", T.FLOAT, [1, 2, 5, 8])], [vi("y", T.FLOAT, None)], opset=23), \
        [np.ones((1, 2, 4, 8), np.float32), np.ones((1, 2, 5, 7), np.float32),
         np.ones((1, 2, 5, 8), np.float32)], "attn"


def _softmax_float_axis():
    node = helper.make_node("Softmax", ["a"], ["y"], name="sm")
    node.attribute.append(helper.make_attribute("axis", 1.5))
    return _model([node], [vi("a", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, None)]), \
        [np.ones((2, 3), np.float32)], "sm"


INVALID = {f.__name__.lstrip("_"): f for f in (
    _conv_f64_weight, _conv_transpose_f64_weight, _gemm_f64_weight, _mixed_add,
    _relu_three_inputs, _mod_fmod_2, _affine_grid_align_corners,
    _axes_out_of_range_after_reshape, _attention_mismatched, _softmax_float_axis)}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_model_is_refused_at_prepare_naming_the_node(case, monkeypatch):
    model, arrays, node_name = INVALID[case]()
    # The oracles do not stand behind an answer for it (one refuses, or they disagree).
    assert _oracles_disown(model, arrays)
    generated = []
    import onnxjit.pipeline
    monkeypatch.setattr(onnxjit.pipeline, "generate",
                        lambda *a, **k: generated.append(a) or pytest.fail("code generated"))
    with pytest.raises(ModelError) as info:
        backend.prepare(model)
    assert repr(node_name) in str(info.value)
    assert generated == []


# -- resource limits ------------------------------------------------------------------------------
def _huge(op):
    """A few-byte model whose output has about 1e12 elements."""
    i64 = lambda name, vals: helper.make_tensor(name, T.INT64, [len(vals)], vals)  # noqa: E731
    if op == "ConstantOfShape":
        return _model([helper.make_node(op, ["s"], ["y"], name="big")], [],
                      [vi("y", T.FLOAT, None)], [i64("s", [10 ** 6, 10 ** 6])])
    if op == "Expand":
        return _model([helper.make_node(op, ["x", "s"], ["y"], name="big")],
                      [vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, None)], [i64("s", [10 ** 6, 10 ** 6])])
    if op == "Tile":
        return _model([helper.make_node(op, ["x", "r"], ["y"], name="big")],
                      [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, None)], [i64("r", [10 ** 12])])
    if op == "Range":
        scalar = lambda name, v: helper.make_tensor(name, T.FLOAT, [], [v])  # noqa: E731
        return _model([helper.make_node(op, ["a", "b", "c"], ["y"], name="big")], [],
                      [vi("y", T.FLOAT, None)],
                      [scalar("a", 0.0), scalar("b", 1e12), scalar("c", 1.0)])
    if op == "Resize":
        scales = helper.make_tensor("sc", T.FLOAT, [4], [1, 1, 1e6, 1e6])
        return _model([helper.make_node(op, ["x", "", "sc"], ["y"], name="big")],
                      [vi("x", T.FLOAT, [1, 1, 2, 2])], [vi("y", T.FLOAT, None)], [scales])
    raise AssertionError(op)


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile", "Range", "Resize"])
def test_huge_tensor_refused_at_prepare(op):
    model = _huge(op)
    assert model.ByteSize() < 300
    # onnx's own shape inference says how many elements it asks for: well over the limit.
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    dims = inferred.graph.output[0].type.tensor_type.shape.dim
    elements = int(np.prod([d.dim_value for d in dims], dtype=np.float64))
    assert elements > validate.DEFAULT_MAX_ELEMENTS
    start = time.perf_counter()
    with pytest.raises(LimitError) as info:
        backend.prepare(model)
    assert time.perf_counter() - start < 10
    message = str(info.value)
    assert "'big'" in message and f"{elements:,}" in message and "ONNXJIT_MAX_ELEMENTS" in message


def _small_tile():
    repeats = helper.make_tensor("r", T.INT64, [1], [3])
    return _model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")],
                  [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, None)], [repeats])


def test_element_limit_is_configurable(monkeypatch):
    model = _small_tile()     # 12 elements out
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(LimitError, match="12 elements"):
        backend.prepare(model, max_elements=11)
    monkeypatch.setenv("ONNXJIT_MAX_ELEMENTS", "11")
    with pytest.raises(LimitError, match="over the limit of 11"):
        backend.prepare(model)
    # The prepare option wins over the environment.
    out = backend.prepare(model, max_elements=12).run([x])[0]
    np.testing.assert_array_equal(out, ReferenceEvaluator(model).run(None, {"x": x})[0])
    with pytest.raises(ValueError, match="max_elements"):
        backend.prepare(model, max_elements=0)
    monkeypatch.setenv("ONNXJIT_MAX_ELEMENTS", "lots")
    with pytest.raises(ValueError, match="ONNXJIT_MAX_ELEMENTS"):
        backend.prepare(model)


def test_element_limit_holds_for_shapes_known_only_at_run():
    """A shape read from a graph input: the limit applies when the signature is specialized."""
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
                   [vi("s", T.INT64, [2])], [vi("y", T.FLOAT, None)])
    rep = backend.prepare(model, max_elements=1000)
    small = np.array([10, 20], np.int64)
    np.testing.assert_array_equal(rep.run([small])[0],
                                  ReferenceEvaluator(model).run(None, {"s": small})[0])
    start = time.perf_counter()
    with pytest.raises(LimitError, match="'fill'.*over the limit of 1,000"):
        rep.run([np.array([10 ** 6, 10 ** 6], np.int64)])
    assert time.perf_counter() - start < 10


def _nested_ifs(depth):
    """`depth` If nodes, each inside the previous one's then-branch, returning x + 1."""
    inner = helper.make_graph([helper.make_node("Add", ["x", "one"], ["r0"])], "leaf", [],
                              [vi("r0", T.FLOAT, [2])])
    for level in range(1, depth + 1):
        out = f"r{level}"
        node = helper.make_node("If", ["c"], [out], name=f"if{level}", then_branch=inner,
                                else_branch=helper.make_graph(
                                    [helper.make_node("Identity", ["x"], [f"e{level}"])],
                                    f"else{level}", [], [vi(f"e{level}", T.FLOAT, [2])]))
        inner = helper.make_graph([node], f"g{level}", [], [vi(out, T.FLOAT, [2])])
    one = helper.make_tensor("one", T.FLOAT, [], [1.0])
    return _model(list(inner.node), [vi("c", T.BOOL, []), vi("x", T.FLOAT, [2])],
                  [vi(f"r{depth}", T.FLOAT, [2])], [one])


def test_subgraph_nesting_is_bounded(monkeypatch):
    deep = _nested_ifs(validate.DEFAULT_MAX_NESTING + 1)
    with pytest.raises(LimitError, match="nest deeper than"):
        backend.prepare(deep)
    shallow = _nested_ifs(3)
    with pytest.raises(LimitError, match="nest deeper than 2 levels"):
        backend.prepare(shallow, max_nesting=2)
    monkeypatch.setenv("ONNXJIT_MAX_NESTING", "2")
    with pytest.raises(LimitError, match="nest deeper than 2 levels"):
        backend.prepare(shallow)
    monkeypatch.delenv("ONNXJIT_MAX_NESTING")
    validate.check_model(shallow)     # within the default limit


def test_large_weights_are_checked_without_their_bytes():
    """Inference runs on a copy whose large initializers are typed inputs (a CNN's weights cost
    0.4 s of serializing per prepare): their types and shapes are still checked."""
    def conv(wdtype):
        w = np.ones((64, 32, 3, 3), wdtype)              # 18,432 elements: a "large" one
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
            [helper.make_tensor_value_info("x", T.FLOAT, [1, 32, 8, 8])],
            [helper.make_tensor_value_info("y", T.FLOAT, None)],
            [onnx.numpy_helper.from_array(w, "w")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    light = validate._without_large_weights(conv(np.float32))
    assert not light.graph.initializer and "w" in {i.name for i in light.graph.input}
    validate.check_model(conv(np.float32))
    with pytest.raises(ModelError, match="Conv node"):
        validate.check_model(conv(np.float64))    # float64 W on a float32 X
