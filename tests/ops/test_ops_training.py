"""ai.onnx.preview.training (Adam, Adagrad, Momentum), BatchNormalization and Dropout in training
mode, against onnx's ReferenceEvaluator, table-driven."""
import numpy as np
import pytest
from onnx import helper
from onnx.helper import np_dtype_to_tensor_dtype
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from helpers import check_reference, one_node
from onnxjit.errors import LoweringError

F32, F64 = np.float32, np.float64
TRAINING = "ai.onnx.preview.training"


def _model(op, inputs, outputs, domain="", opsets=(("", 21),), **attrs):
    """A one-node model (tests/helpers.one_node); an input whose array is None is left out."""
    return one_node(op, inputs, outputs=outputs, domain=domain, opsets=opsets, **attrs)


def _check(model, inputs, tol=1e-5):
    """onnxjit against onnx's reference (tests/helpers.check_reference), within `tol`."""
    return check_reference(model, inputs, rtol=tol, atol=tol)


def _rand(shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _optimizer_inputs(n, per, t, dtype, shapes=((3, 4), (5,))):
    inputs = {"r": np.array(0.1, F32), "t": np.array(t, np.int64)}
    for j in range(per):
        for i in range(n):
            a = _rand(shapes[i % len(shapes)], dtype, 10 * j + i)
            inputs[f"in{j}_{i}"] = np.abs(a) if j == per - 1 else a   # last state: squares
    return inputs


# (op, n tensors, states per tensor, T, attributes, dtype)
OPTIMIZERS = [
    ("Adam", 1, 2, 0, {}, F32),
    ("Adam", 2, 2, 3, dict(alpha=0.95, beta=0.1, epsilon=1e-7, norm_coefficient=0.001,
                           norm_coefficient_post=0.01), F32),
    ("Adam", 1, 2, 2, dict(epsilon=1e-6), F64),
    ("Adagrad", 1, 1, 0, dict(epsilon=1e-5), F32),
    ("Adagrad", 2, 1, 4, dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01), F64),
    ("Momentum", 1, 1, 0, dict(alpha=0.9, beta=0.1, mode="standard", norm_coefficient=0.01), F32),
    ("Momentum", 2, 1, 5, dict(alpha=0.9, beta=0.1, mode="standard", norm_coefficient=0.0), F32),
    ("Momentum", 2, 1, 5, dict(alpha=0.8, beta=0.2, mode="nesterov", norm_coefficient=0.1), F64),
]


@pytest.mark.parametrize("op,n,states,t,attrs,dtype", OPTIMIZERS)
def test_optimizer(op, n, states, t, attrs, dtype):
    inputs = _optimizer_inputs(n, 2 + states, t, dtype)
    outputs = [f"out{i}" for i in range(n * (1 + states))]
    model = _model(op, inputs, outputs, domain=TRAINING,
                   opsets=(("", 21), (TRAINING, 1)), **attrs)
    _check(model, inputs, 1e-5)


def test_optimizer_mismatched_groups_are_refused():
    inputs = {"r": np.array(0.1, F32), "t": np.array(0, np.int64), "x": _rand((3,)),
              "g": _rand((3,)), "h": _rand((4,))}
    model = _model("Adagrad", inputs, ["x2", "h2"], domain=TRAINING,
                   opsets=(("", 21), (TRAINING, 1)))
    with pytest.raises(LoweringError, match="one shape"):
        onnxjit.backend.prepare(model).run(inputs)


# (x shape, momentum, epsilon, dtype)
BATCHNORM = [((2, 3, 4, 5), None, None, F32), ((4, 2), 0.8, 1e-3, F32), ((2, 3, 6), 0.5, 1e-2, F64)]


@pytest.mark.parametrize("shape,momentum,epsilon,dtype", BATCHNORM)
def test_batchnorm_training(shape, momentum, epsilon, dtype):
    c = shape[1]
    inputs = {"x": _rand(shape, dtype, 1), "s": _rand((c,), dtype, 2), "b": _rand((c,), dtype, 3),
              "m": _rand((c,), dtype, 4), "v": np.abs(_rand((c,), dtype, 5))}
    attrs = {k: v for k, v in (("momentum", momentum), ("epsilon", epsilon)) if v is not None}
    model = _model("BatchNormalization", inputs, ["y", "rm", "rv"], training_mode=1, **attrs)
    _check(model, inputs, 1e-5)


# (ratio, training (True / False / None: a run-time input), seed, mask output, dtype)
DROPOUT = [(0.5, True, 0, True, F32), (0.25, None, 3, True, F64), (0.7, True, 1, False, F32),
           (0.5, False, 0, True, F32), (0.0, True, 0, True, F32)]


@pytest.mark.parametrize("ratio,training,seed,mask,dtype", DROPOUT)
def test_dropout_seeded(ratio, training, seed, mask, dtype):
    """Seeded draws are numpy's RandomState sequence: equal to the reference's values."""
    inputs = {"x": _rand((3, 4, 5), dtype, 1), "r": np.array(ratio, F32),
              "t": np.array(bool(training) if training is not None else True)}
    model = _model("Dropout", inputs, ["y", "z"] if mask else ["y"], seed=seed)
    if training is not None:   # a constant training_mode: an initializer, not a graph input
        model.graph.input.pop()
        model.graph.initializer.append(helper.make_tensor("t", 9, [], [bool(training)]))
        del inputs["t"]
    _check(model, inputs, 1e-6)


def test_dropout_unseeded_keeps_the_ratio():
    """Without a seed the mask is random: about (1 - ratio) of it is kept, the kept elements
    scaled by 1 / (1 - ratio), the rest 0."""
    x = np.ones((200, 100), F32)
    inputs = {"x": x, "r": np.array(0.3, F32), "t": np.array(True)}
    y, z = onnxjit.backend.prepare(_model("Dropout", inputs, ["y", "z"])).run(inputs)
    assert z.dtype == np.bool_ and 0.67 < z.mean() < 0.73
    np.testing.assert_allclose(y[z], 1 / 0.7, rtol=1e-6)
    assert not y[~z].any()


# ---- Gradient ------------------------------------------------------------------------------
# Graphs over a, b (float64, one shape) as (op, inputs, output) triples; the last output is y.
GRAPHS = [
    [("Add", ["a", "b"], "c"), ("Mul", ["c", "a"], "y")],
    [("Sub", ["a", "b"], "c"), ("Mul", ["a", "b"], "d"), ("Div", ["c", "d"], "y")],
    [("Mul", ["a", "a"], "c"), ("Neg", ["c"], "n"), ("Identity", ["n"], "m"),
     ("Add", ["m", "b"], "y")],
    [("Mul", ["a", "a"], "y")],   # dy/db = 0: b does not reach y
]


def _gradient_model(triples, with_gradient=True):
    nodes = [helper.make_node(op, ins, [out]) for op, ins, out in triples]
    outs = ["y"]
    if with_gradient:
        nodes.append(helper.make_node("Gradient", ["a", "b"], ["da", "db"], domain=TRAINING,
                                      xs=["a", "b"], y="y"))
        outs += ["da", "db"]
    t = np_dtype_to_tensor_dtype(np.dtype(F64))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, [3, 4])
                                           for n in "ab"],
                              [helper.make_tensor_value_info(n, t, [3, 4]) for n in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid(TRAINING, 1)])


@pytest.mark.parametrize("triples", GRAPHS)
def test_gradient_against_finite_differences_of_the_reference(triples):
    """Each element of y depends on the same elements of a and b: the elementwise derivative is
    (f(x + h) - f(x - h)) / 2h of the reference's forward graph, all elements at once."""
    a, b = _rand((3, 4), F64, 1), _rand((3, 4), F64, 2) + 3.0
    y, da, db = onnxjit.backend.prepare(_gradient_model(triples)).run({"a": a, "b": b})
    forward = ReferenceEvaluator(_gradient_model(triples, with_gradient=False))
    h = 1e-6
    f = lambda a_, b_: forward.run(None, {"a": a_, "b": b_})[0]   # noqa: E731
    np.testing.assert_allclose(y, f(a, b), rtol=1e-12)
    np.testing.assert_allclose(da, (f(a + h, b) - f(a - h, b)) / (2 * h), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(db, (f(a, b + h) - f(a, b - h)) / (2 * h), rtol=1e-5, atol=1e-6)


def test_gradient_of_an_unsupported_op_is_refused():
    model = _gradient_model([("Exp", ["a"], "e"), ("Add", ["e", "b"], "y")])
    with pytest.raises(LoweringError, match="cannot differentiate Exp"):
        onnxjit.backend.prepare(model).run({"a": _rand((3, 4), F64), "b": _rand((3, 4), F64)})
