"""The ONNX backend API: prepare, run, run_model, run_node, devices, compatibility, caching."""
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit
import onnxjit.backend as backend
from helpers import chain_model, node_model


def test_prepare_accepts_model_bytes_and_path(tmp_path):
    model = chain_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for source in (model, model.SerializeToString(), str(path), path):
        np.testing.assert_array_equal(backend.prepare(source, "CPU").run([x])[0], np.maximum(2 * x, 0))


def test_run_takes_list_dict_and_returns_outputs_by_name():
    rep = backend.prepare(chain_model(), "CPU")
    x = np.ones((2, 3), np.float32)
    by_list, by_dict = rep.run([x]), rep.run({"x": x})
    np.testing.assert_array_equal(by_list["y"], by_dict.y)
    np.testing.assert_array_equal(by_list[0], 2 * x)


def test_numpy_scalar_input():
    model = node_model("Add", [np.float32(1), np.float32(2)])
    out = backend.prepare(model).run([np.float32(1.5), np.float32(2.0)])[0]
    assert out.shape == () and out == np.float32(3.5)


def test_run_model_and_run_node():
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(backend.run_model(chain_model(dims=(2,)), [x])[0], [2, 0])
    node = helper.make_node("Sub", ["a", "b"], ["c"])
    (out,) = backend.run_node(node, [np.array([3, 4], np.int64), np.array([1, 1], np.int64)])
    np.testing.assert_array_equal(out, [2, 3])


def test_devices():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    assert not backend.supports_device("CUDA:1")
    with pytest.raises(ValueError, match="CUDA:1"):
        backend.prepare(chain_model(), "CUDA:1")


def _unsupported_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("NoSuchOp", ["a"], ["b"]),
             helper.make_node("Frobnicate", ["b"], ["y"], domain="com.example")]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("com.example", 1)])


def test_unsupported_ops_are_all_named():
    model = _unsupported_model()
    assert not backend.is_compatible(model)
    assert backend.is_compatible(chain_model())
    assert onnxjit.list_unsupported(model) == [("ai.onnx", "NoSuchOp", 21), ("com.example", "Frobnicate", 1)]
    with pytest.raises(onnxjit.UnsupportedOpError) as info:
        backend.prepare(model)
    assert "NoSuchOp" in str(info.value) and "Frobnicate" in str(info.value)


def test_malformed_bytes_are_refused_clearly():
    with pytest.raises(onnxjit.ModelError, match="could not parse"):
        backend.prepare(b"\x08\x07garbage\xff\xff not a model")
    with pytest.raises(onnxjit.ModelError, match="no ONNX model file"):
        backend.prepare("/nonexistent/model.onnx")


@pytest.mark.parametrize("inputs, message", [
    ([], "takes 1 input"),
    ([np.ones((2, 3), np.float32)] * 2, "takes 1 input"),
    ({"z": np.ones((2, 3), np.float32)}, "unknown \\['z'\\], missing \\['x'\\]"),
    ([np.ones((2, 4), np.float32)], "input 'x': expected shape \\[2, 3\\], got \\[2, 4\\]"),
    ([np.ones((2, 3, 1), np.float32)], "input 'x': expected shape"),
    ([np.ones((2, 3), np.float64)], "input 'x': expected dtype float32, got float64"),
    ([[1.0, 2.0]], "input 'x': expected a tensor"),
])
def test_wrong_inputs_are_named(inputs, message):
    rep = backend.prepare(chain_model())
    with pytest.raises(onnxjit.InputError, match=message):
        rep.run(inputs)


def test_symbolic_dims_compile_per_shape_and_then_hit():
    rep = backend.prepare(chain_model(dims=("batch", 3)))
    assert rep.cache_info()["signatures"] == 0
    for n in (1, 4, 1, 4, 4):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(rep.run([x])[0], np.maximum(2 * x, 0))
    info = rep.cache_info()
    assert (info["signatures"], info["misses"], info["hits"]) == (2, 2, 3)
    assert "float32[4, 3]" in rep.source([((4, 3), np.float32)])


@pytest.mark.parametrize("variant", ["strided", "fortran", "readonly", "subclass"])
def test_fast_paths_fall_back_for_unusual_arrays(variant):
    """rep.run's fast paths (dispatcher + shape guard, then the stride key) must not take arrays
    whose layout or type differs from what was compiled: the result always equals the oracle."""
    rep = backend.prepare(chain_model(dims=("n", "m")))
    base = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    rep.run([base])                                   # compiled for (4, 6) float32, C order
    rep.run([base])
    x = {"strided": base[::1, ::2].copy().repeat(2, axis=1)[:, ::2],
         "fortran": np.asfortranarray(base), "readonly": base.copy(),
         "subclass": np.asmatrix(base)}[variant]
    if variant == "readonly":
        x.flags.writeable = False
    for _ in range(2):                                # miss (or hit), then a fast-path hit
        got = rep.run([x])[0]
        np.testing.assert_array_equal(got, np.maximum(2 * np.asarray(x), 0))


def test_other_shapes_and_dtypes_miss_the_latest_entry():
    rep = backend.prepare(chain_model(dims=("n",)))
    for x in (np.ones(3, np.float32), np.arange(5, dtype=np.float32), np.ones(3, np.float32)):
        np.testing.assert_array_equal(rep.run([x])[0], np.maximum(2 * x, 0))
    with pytest.raises(onnxjit.InputError, match="dtype"):
        rep.run([np.ones(3, np.float64)])
    with pytest.raises(onnxjit.InputError, match="input"):
        rep.run([np.ones(3, np.float32), np.ones(3, np.float32)])


def test_signature_cache_is_capped():
    rep = backend.prepare(chain_model(dims=("n",)), max_signatures=2)
    for n in (1, 2, 3):
        rep.run([np.ones(n, np.float32)])
    assert rep.cache_info()["signatures"] == 2
    assert [s[0][1] for s in rep.signatures()] == [(2,), (3,)]


@pytest.mark.parametrize("dims", [(64, 64), (512, 640)])   # the second is a prange loop
def test_run_from_many_threads(dims):
    rep = backend.prepare(chain_model(dims=dims))
    if dims == (512, 640):
        assert "__prange(" in rep.source()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(dims).astype(np.float32) for _ in range(8)]
    errors = []

    def work(x):
        for _ in range(20):
            if not np.array_equal(rep.run([x])[0], np.maximum(2 * x, 0)):
                errors.append("mismatch")

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_nan_and_inf_propagate_like_numpy():
    x = np.array([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.0], np.float32)
    for op in ("Relu", "Sqrt", "Exp", "Log", "Neg", "Abs", "Sigmoid", "Tanh"):
        model = node_model(op, [x])
        expected = ReferenceEvaluator(model).run(None, {"x0": x})[0]
        got = backend.prepare(model).run([x])[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=op)
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=op)


def test_outputs_never_alias_inputs_or_weights():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["w"], ["b"])]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_empty_tensor_value_info("a"),
                                               helper.make_empty_tensor_value_info("b")], [w])
    rep = backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    xin = np.array([5, 6], np.float32)
    a, b = rep.run([xin])
    a[0] = b[0] = 100
    assert xin[0] == 5 and rep.run([xin])[1][0] == 1.0


def test_profile_times_each_kernel_without_changing_results():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    plain, profiled = backend.prepare(chain_model()), backend.prepare(chain_model(), profile=True)
    for _ in range(3):
        np.testing.assert_array_equal(plain.run([x])[0], profiled.run([x])[0])
    assert plain.compiled().profile is None
    profile = profiled.compiled().profile
    assert [k.name for k in profiled.compiled().kernels] == list(profile)
    assert all(calls == 3 and seconds > 0 for seconds, calls in profile.values())


@pytest.mark.parametrize("op, attrs, extra", [
    ("Reshape", {}, [np.array([3, 2], np.int64)]),
    ("Flatten", {"axis": 1}, []),
    ("Squeeze", {}, [np.array([0], np.int64)]),
    ("Slice", {}, [np.array([0], np.int64), np.array([1], np.int64)]),
])
def test_outputs_that_view_an_input_are_copies(op, attrs, extra):
    x = np.arange(6, dtype=np.float32).reshape(1, 6) if op == "Squeeze" else \
        np.arange(6, dtype=np.float32).reshape(2, 3)
    model = node_model(op, [x] + extra, opset=13, **attrs)
    rep = backend.prepare(model)
    out = rep.run([x] + extra)[0]
    out.reshape(-1)[0] = 100
    assert x.reshape(-1)[0] == 0


def test_models_with_weights_take_the_dispatcher_path(njit_entry):
    """The latest module's dispatcher must match on every call for a plain input list: a miss
    would cost Numba's slow mismatch error each time (weights must have the compiled types)."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [onnx.numpy_helper.from_array(w, "w")])
    rep = backend.prepare(helper.make_model(graph))
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        np.testing.assert_allclose(rep.run([x])[0], x @ w)
    assert rep._hot is not None and rep._hot_misses == 0


def test_unknown_prepare_options_are_named_in_a_warning():
    """A misspelt option (tiers= for tiered=) is named, not silently ignored; known ones pass
    without a word."""
    import warnings
    with pytest.warns(UserWarning, match=r"unknown option\(s\) tiers ignored"):
        backend.prepare(chain_model(), tiers=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend.prepare(chain_model(), tiered=False, max_signatures=4, profile=False)
