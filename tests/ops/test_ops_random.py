"""RandomUniform, RandomNormal, their *Like forms and Bernoulli: with a seed, against onnx's
ReferenceEvaluator (both draw numpy's RandomState(seed) sequence); without one, the shapes,
dtypes and the draws' statistics."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxjit.backend
from test_ops_training import _check, _model

F32, F64 = np.float32, np.float64


# (op, input array or None, attributes)
SEEDED = [
    ("RandomUniform", None, dict(shape=[3, 4], seed=3.0, low=-2.0, high=5.0)),
    ("RandomNormal", None, dict(shape=[2, 3, 5], seed=7.0, mean=1.0, scale=0.5,
                                dtype=TensorProto.DOUBLE)),
    ("RandomUniformLike", np.zeros((4, 5), F64), dict(seed=0.0)),
    ("RandomNormalLike", np.zeros((6,), F32), dict(seed=11.0, dtype=TensorProto.DOUBLE)),
    ("Bernoulli", np.random.default_rng(0).uniform(0, 1, (5, 8)).astype(F32), dict(seed=2.0)),
    ("Bernoulli", np.random.default_rng(1).uniform(0, 1, (40,)), dict(seed=0.0,
                                                                      dtype=TensorProto.INT64)),
]


@pytest.mark.parametrize("op,x,attrs", SEEDED)
def test_seeded_draws_match_the_reference(op, x, attrs):
    inputs = {} if x is None else {"x": x}
    model = _model(op, inputs, ["y"], opsets=(("", 22),), **attrs)
    y1 = _check(model, inputs, 1e-6)[0]
    rep = onnxjit.backend.prepare(model)
    np.testing.assert_array_equal(rep.run(inputs)[0], y1)   # every run draws the same


def test_unseeded_uniform_and_normal_statistics():
    x = np.zeros((200, 200), F32)
    model = _model("RandomUniformLike", {"x": x}, ["y"], opsets=(("", 22),), low=2.0, high=4.0)
    u = onnxjit.backend.prepare(model).run({"x": x})[0]
    assert u.shape == x.shape and u.dtype == F32
    assert u.min() >= 2.0 and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.02
    model = _model("RandomNormal", {}, ["y"], opsets=(("", 22),), shape=[300, 300], mean=-1.0,
                   scale=2.0)
    rep = onnxjit.backend.prepare(model)
    z1, z2 = rep.run({})[0], rep.run({})[0]
    assert z1.shape == (300, 300) and z1.dtype == F32
    assert abs(z1.mean() + 1.0) < 0.03 and abs(z1.std() - 2.0) < 0.03
    assert not np.array_equal(z1, z2)   # no seed: a fresh draw each run


def test_unseeded_bernoulli_statistics():
    p = np.tile(np.array([0.0, 0.25, 1.0], F64), (20000, 1))
    model = _model("Bernoulli", {"p": p}, ["y"], opsets=(("", 22),))
    y = onnxjit.backend.prepare(model).run({"p": p})[0]
    assert y.shape == p.shape and y.dtype == F64
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert not y[:, 0].any() and y[:, 2].all() and abs(y[:, 1].mean() - 0.25) < 0.015


def test_bernoulli_probability_out_of_range_is_an_error():
    p = np.array([0.5, 1.5], F32)
    model = _model("Bernoulli", {"p": p}, ["y"], opsets=(("", 22),), seed=0.0)
    with pytest.raises(ValueError, match="Bernoulli"):
        onnxjit.backend.prepare(model).run({"p": p})


def test_random_ops_are_not_folded():
    """A constant input does not make a draw a compile-time constant."""
    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
        "c", TensorProto.FLOAT, [1000], np.full(1000, 0.5, F32)))
    node = helper.make_node("Bernoulli", ["c"], ["y"])
    graph = helper.make_graph([const, node], "g", [], [helper.make_empty_tensor_value_info("y")])
    rep = onnxjit.backend.prepare(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 22)]))
    a, b = rep.run({})[0], rep.run({})[0]
    assert not np.array_equal(a, b) and 0.4 < a.mean() < 0.6


@pytest.mark.parametrize("seed", [-1.0, 2.0 ** 33, float("inf")])
def test_bad_seed_is_a_clear_error(seed):
    from onnxjit.errors import OnnxJitError
    model = _model("RandomUniform", {}, ["y"], opsets=(("", 22),), shape=[2], seed=seed)
    with pytest.raises(OnnxJitError, match="seed"):
        onnxjit.backend.prepare(model).run({})


def test_nan_seed_draws_unseeded():
    model = _model("RandomUniform", {}, ["y"], opsets=(("", 22),), shape=[1000],
                   seed=float("nan"))
    rep = onnxjit.backend.prepare(model)
    assert not np.array_equal(rep.run({})[0], rep.run({})[0])
