"""Built-in benchmark models: valid ONNX, run in the reference evaluator, onnxjit agrees or refuses."""
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit
from onnxjit import models
from onnxjit.bench import model_inputs

# Small sizes keep the reference evaluator and onnxjit's compile fast; defaults are the benchmark's.
SMALL = {
    "one_node": {},
    "elementwise_chain": {"rows": 8, "cols": 16},
    "mlp": {"batch": 4, "sizes": (12, 8, 8, 3)},
    "transformer_block": {"seq": 8, "d_model": 16, "heads": 4},
    "small_cnn": {"size": 16, "channels": (4, 8, 8), "classes": 3},
    "forest_classifier": {"rows": 5, "trees": 4, "depth": (3, 5), "features": 6},
    "gbm_regressor": {"rows": 5, "trees": 6, "depth": 3, "features": 6},
    "logistic_regression": {"rows": 5, "features": 7, "classes": 3},
    "lstm": {"seq": 5, "inputs": 6, "hidden": 8},
    "gru": {"seq": 5, "inputs": 6, "hidden": 8},
    "tiny_stateful": {"frame": 8, "hidden": 4, "blocks": 2},
    "mobilenet": {"size": 32, "width": 0.25, "stages": ((1, 16, 1, 1), (6, 24, 2, 2)),
                  "classes": 5, "last": 16},
    "yolo_csp": {"size": 64, "widths": (4, 8, 8, 16, 16), "depths": (1, 1, 1, 1), "classes": 4},
    "seg_decoder": {"size": 64, "widths": (4, 8, 8, 16), "fpn": 8},
    "int8_transformer": {"seq": 8, "d_model": 16, "heads": 4},
}
OUTPUT_SHAPES = {"one_node": (4,), "elementwise_chain": (8, 16), "mlp": (4, 3),
                 "transformer_block": (1, 8, 16), "small_cnn": (1, 3),
                 "forest_classifier": (5, 3), "gbm_regressor": (5, 1),
                 "logistic_regression": (5, 3),
                 "lstm": (5, 1, 8), "gru": (5, 1, 8), "tiny_stateful": (1, 1),
                 "mobilenet": (1, 5), "yolo_csp": (1, 68, 84), "seg_decoder": (1, 1, 64, 64),
                 "int8_transformer": (1, 8, 16)}
OPS = {"elementwise_chain": {"Erf", "Div", "Sqrt", "Sub"},
       "mlp": {"MatMul", "Add", "Relu"},
       "transformer_block": {"MatMul", "Reshape", "Transpose", "Softmax", "LayerNormalization", "Erf"},
       "small_cnn": {"Conv", "BatchNormalization", "Relu", "MaxPool", "GlobalAveragePool", "Flatten",
                     "Gemm"},
       "forest_classifier": {"TreeEnsembleClassifier"},
       "gbm_regressor": {"TreeEnsembleRegressor"},
       "logistic_regression": {"LinearClassifier", "Normalizer"},
       "lstm": {"LSTM", "Squeeze"}, "gru": {"GRU", "Squeeze"},
       "tiny_stateful": {"LSTM", "If", "ReduceMean", "MatMul"},
       "mobilenet": {"Conv", "Clip", "HardSwish", "GlobalAveragePool", "Gemm"},
       "yolo_csp": {"Conv", "Sigmoid", "Mul", "Split", "Concat", "Resize", "MaxPool"},
       "seg_decoder": {"Conv", "HardSwish", "Resize", "ConvTranspose", "Sigmoid"},
       "int8_transformer": {"DynamicQuantizeLinear", "MatMulInteger", "Cast", "Softmax"}}


@pytest.mark.parametrize("name", list(SMALL))
def test_builder_is_valid_and_runs_in_reference(name):
    model = models.BUILDERS[name](**SMALL[name])
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 21
    assert OPS.get(name, {"Add"}) <= {n.op_type for n in model.graph.node}
    outs = ReferenceEvaluator(model).run(None, model_inputs(model))
    out = outs[0]
    assert out.shape == OUTPUT_SHAPES[name] and out.dtype == np.float32
    flat = np.concatenate([o.ravel() for o in outs])     # tiny_stateful: y is one value
    assert np.isfinite(flat).all() and flat.std() > 0


@pytest.mark.parametrize("name", list(SMALL))
def test_builder_is_deterministic(name):
    build = models.BUILDERS[name]
    assert build(**SMALL[name]).SerializeToString() == build(**SMALL[name]).SerializeToString()


# The issue-20 families run with drivers only: linked into one njit entry ("auto" at these
# small sizes) MobileNet alone compiled for 9 minutes on the 2-core CI machine.
HEAVY_ENTRY = {"lstm", "gru", "tiny_stateful", "mobilenet", "yolo_csp", "seg_decoder",
               "int8_transformer"}


@pytest.mark.parametrize("name,entry", [(n, e) for n in SMALL for e in ("auto", "driver")
                                        if e == "driver" or n not in HEAVY_ENTRY])
def test_onnxjit_agrees_or_reports_unsupported(name, entry, monkeypatch):
    """Ops still missing in onnxjit make prepare refuse clearly; present ones must match the
    oracle, with library kernels linked into an njit entry (as users get these short graphs)
    and called from a Python driver (as the other tests run)."""
    monkeypatch.setenv("ONNXJIT_ENTRY", entry)
    model = models.BUILDERS[name](**SMALL[name])
    feeds = model_inputs(model)
    missing = onnxjit.list_unsupported(model)
    if missing:
        with pytest.raises(onnxjit.UnsupportedOpError, match=missing[0][1]):
            onnxjit.prepare(model)
        return
    got = onnxjit.prepare(model).run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_default_sizes():
    """The benchmark sizes asked for: ~1M floats, batch 64, seq 128 x 256, 1x3x64x64, 100 rows
    of 30 features for the forest (100 trees, depth 8-10) and the boosted trees (200)."""
    suite = models.builtin_suite(only="^(" + "|".join(models.BUILDERS) + ")$")
    assert [name for name, _ in suite] == list(models.BUILDERS)
    shapes = {name: [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
              for name, m in suite}
    assert shapes == {"one_node": [4], "elementwise_chain": [1024, 1024], "mlp": [64, 784],
                      "transformer_block": [1, 128, 256], "small_cnn": [1, 3, 64, 64],
                      "forest_classifier": [100, 30], "gbm_regressor": [100, 30],
                      "logistic_regression": [1000, 100],
                      "lstm": [100, 1, 64], "gru": [100, 1, 64], "tiny_stateful": [1, 128],
                      "mobilenet": [1, 3, 224, 224], "yolo_csp": [1, 3, 320, 320],
                      "seg_decoder": [1, 3, 320, 320], "int8_transformer": [1, 128, 256]}
    trees = {name: len({t for a in m.graph.node[0].attribute if a.name == "nodes_treeids"
                        for t in a.ints}) for name, m in suite
             if name in ("forest_classifier", "gbm_regressor")}
    assert trees == {"forest_classifier": 100, "gbm_regressor": 200}


def test_transformer_rejects_bad_heads():
    with pytest.raises(ValueError, match="divisible"):
        models.transformer_block(seq=4, d_model=10, heads=4)


def test_light_models_and_suite_order():
    light = models.light_models()
    assert len(light) == 9 and all(os.path.isfile(p) for p in light.values())
    assert {"light_resnet50", "light_squeezenet", "light_densenet121"} <= set(light)
    # the order comes from the names alone: the shipped suite (paths, no weights to make) shows
    # it, and a selection with random weights keeps it
    names = [name for name, _ in models.builtin_suite("shipped")]
    n = len(models.BUILDERS)
    only = models.builtin_suite(only="^(mlp|light_(resnet|squeeze))")
    assert [name for name, _ in only] == ["mlp", "light_resnet50", "light_squeezenet"]
    assert all(isinstance(m, onnx.ModelProto) for _, m in only)
    assert names[:n] == list(models.BUILDERS) and names[n:] == sorted(light)


def test_light_models_get_random_weights_of_the_same_shapes():
    """Every constant weight (a ConstantOfShape of 0.02 in the shipped file) becomes a seeded
    random initializer of the same shape; the computation is otherwise the same graph, and ONNX
    Runtime's outputs now depend on the weights (the shipped model's are a uniform softmax)."""
    import onnx
    import onnxruntime as ort

    from onnxjit.bench import _copy_for_ort, model_inputs
    shipped = onnx.load(models.light_models()["light_squeezenet"])
    random = models.light_model("light_squeezenet")
    onnx.checker.check_model(random)
    made = {n.output[0] for n in shipped.graph.node if n.op_type == "ConstantOfShape"}
    inits = {t.name: numpy_helper.to_array(t) for t in random.graph.initializer}
    assert made <= set(inits) and not any(n.op_type == "ConstantOfShape" for n in random.graph.node)
    shapes = {n.output[0]: tuple(numpy_helper.to_array(
        next(t for t in shipped.graph.initializer if t.name == n.input[0])))
        for n in shipped.graph.node if n.op_type == "ConstantOfShape"}
    assert all(inits[name].shape == shapes[name] and inits[name].std() > 0 for name in made)
    assert [n.op_type for n in random.graph.node] == [
        n.op_type for n in shipped.graph.node if n.op_type != "ConstantOfShape"]
    # the logits feeding the final Softmax are an output too
    assert random.graph.output[1].name == random.graph.node[-1].input[0]
    assert np.array_equal(numpy_helper.to_array(models.light_model("light_squeezenet")
                                                .graph.initializer[-1]),
                          numpy_helper.to_array(random.graph.initializer[-1]))   # seeded

    def probs(model):
        feeds = model_inputs(model)
        sess = ort.InferenceSession(_copy_for_ort(model).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0].ravel()
    assert np.ptp(probs(shipped)) == 0 and np.ptp(probs(random)) > 1e-3
    assert [n for n, m in models.builtin_suite("shipped")][len(models.BUILDERS):] == sorted(
        models.light_models())
