"""Devices, device arrays in and out, synchronization, errors, safety."""
import numpy as np
import onnx
import pytest
from numba import cuda
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from onnxjit.errors import InputError, UnsupportedOpError

from cuda_harness import node_model, rand


def add_model():
    return node_model("Add", {"a": rand((2, 3)), "b": rand((3,), seed=1)})


def test_devices():
    assert backend.supports_device("CUDA") and backend.supports_device("CUDA:0")
    assert backend.supports_device("CPU")
    assert backend.is_compatible(add_model(), "CUDA")
    with pytest.raises(ValueError, match="CUDA:7"):
        backend.prepare(add_model(), "CUDA:7")
    assert backend.prepare(add_model(), "CUDA:0").device == "CUDA:0"


def test_run_model_and_run_node_on_cuda():
    a, b = rand((2, 3)), rand((3,), seed=1)
    np.testing.assert_allclose(backend.run_model(add_model(), [a, b], "CUDA")[0], a + b)
    node = helper.make_node("Relu", ["x"], ["y"])
    np.testing.assert_array_equal(backend.run_node(node, [a], "CUDA")[0], np.maximum(a, 0))


def test_unsupported_ops_are_named():
    model = node_model("NonZero", {"x": rand((4,))})
    assert not backend.is_compatible(model, "CUDA")
    assert backend.is_compatible(model, "CPU")
    with pytest.raises(UnsupportedOpError, match="NonZero"):
        backend.prepare(model, "CUDA")


def test_device_arrays_in_device_arrays_out():
    a, b = rand((2, 3)), rand((3,), seed=1)
    rep = backend.prepare(add_model(), "CUDA")
    y = rep.run([cuda.to_device(a), cuda.to_device(b)])[0]
    assert not isinstance(y, np.ndarray) and hasattr(y, "copy_to_host")
    assert y.shape == (2, 3) and y.dtype == np.float32
    rep.synchronize()
    np.testing.assert_allclose(y.copy_to_host(), a + b)
    kept = y.copy_to_host()
    # chained: a device output is the next run's device input, no host round trip (inputs are
    # copied into the rep's staging buffers before the launches)
    z = rep.run({"a": y, "b": cuda.to_device(b)})[0]
    np.testing.assert_allclose(z.copy_to_host(), a + 2 * b, rtol=1e-6)
    # device outputs are views of the signature's output buffer, overwritten by the next run
    # (README: copy to keep); nothing is allocated per run
    assert z is y
    np.testing.assert_allclose(y.copy_to_host(), a + 2 * b, rtol=1e-6)
    np.testing.assert_allclose(kept, a + b)


def test_device_inputs_reused_in_place(simulated):
    """The same device input arrays run after run with new contents (on a GPU, graphs that
    read them in place), and an output fed back as the next input (then it is copied: the
    output buffer is rewritten by the run)."""
    model = node_model("Transpose", {"x": rand((3, 3))}, perm=[1, 0])
    rep = backend.prepare(model, "CUDA")
    d = cuda.to_device(rand((3, 3)))
    for seed in range(5):
        x = rand((3, 3), seed=seed)
        d.copy_to_device(x)
        np.testing.assert_array_equal(rep.run([d])[0].copy_to_host(), x.T)
    y = rep.run([cuda.to_device(rand((3, 3), seed=9))])[0]
    for _ in range(4):
        want = y.copy_to_host().T
        y = rep.run([y])[0]
        np.testing.assert_array_equal(y.copy_to_host(), want)
    exe = rep.compiled()
    if not simulated:
        assert exe.graph is not None and len(exe.direct_graphs) == 1, exe.direct_error


def test_mixed_host_and_device_inputs():
    a, b = rand((2, 3)), rand((3,), seed=1)
    rep = backend.prepare(add_model(), "CUDA")
    y = rep.run([a, cuda.to_device(b)])[0]           # any device input: a device run
    assert not isinstance(y, np.ndarray)
    np.testing.assert_allclose(y.copy_to_host(), a + b)
    np.testing.assert_allclose(rep.run([a, b])[0], a + b)   # numpy run, fresh numpy outputs
    first = rep.run([a, b])[0]
    second = rep.run([a * 2, b])[0]
    np.testing.assert_allclose(first, a + b)
    np.testing.assert_allclose(second, 2 * a + b)


def test_pickled_rep_rebuilds_and_runs():
    import pickle
    model = node_model("Softmax", {"x": rand((2, 5))}, axis=1)
    rep = backend.prepare(model, "CUDA")
    copy = pickle.loads(pickle.dumps(rep))
    assert copy is not rep and copy.device == rep.device and copy.cache_info()["signatures"] == 0
    x = rand((2, 5), seed=3)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(copy.run([x])[0], want, rtol=1e-5, atol=1e-6)
    assert copy.cache_info()["signatures"] == 1      # compiled lazily, at its first run
    np.testing.assert_allclose(pickle.loads(pickle.dumps(copy)).run([x])[0], want, rtol=1e-5,
                               atol=1e-6)


def test_device_float16_edges():
    model = node_model("Mul", {"a": rand((4,), np.float16), "b": rand((4,), np.float16, seed=1)})
    a, b = rand((4,), np.float16), rand((4,), np.float16, seed=1)
    y = backend.prepare(model, "CUDA").run([cuda.to_device(a), cuda.to_device(b)])[0]
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y.copy_to_host(), a * b)


def test_gather_out_of_range_raises():
    model = node_model("Gather", {"x": rand((3, 2)), "i": np.array([0, 1], np.int64)})
    rep = backend.prepare(model, "CUDA")
    with pytest.raises(IndexError, match="out of range"):
        rep.run([rand((3, 2)), np.array([0, 3], np.int64)])
    np.testing.assert_array_equal(rep.run([rand((3, 2)), np.array([2, -3], np.int64)])[0],
                                  rand((3, 2))[[2, 0]])
    rep.run([cuda.to_device(rand((3, 2))), cuda.to_device(np.array([5, 0], np.int64))])
    with pytest.raises(IndexError):
        rep.synchronize()


def test_wrong_inputs_are_named():
    rep = backend.prepare(add_model(), "CUDA")
    with pytest.raises(InputError, match="'a'"):
        rep.run([rand((2, 4)), rand((3,))])
    with pytest.raises(InputError, match="2 input"):
        rep.run([rand((2, 3))])


def test_hostile_names_stay_out_of_code():
    hostile = "x'); import os; os.system('echo pwned') #\n"
    node = helper.make_node("Softmax", [hostile], ["y\nimport sys"], name="n\n__import__('os')")
    graph = helper.make_graph([node], "g\nimport os",
                              [helper.make_tensor_value_info(hostile, TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y\nimport sys", TensorProto.FLOAT,
                                                             [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    rep = backend.prepare(model, "CUDA")
    x = rand((2, 3))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(rep.run([x])[0], e / e.sum(1, keepdims=True), rtol=1e-5)
    # Model names reach the listing only inside one-line comments, ascii-escaped.
    for line in rep.source().splitlines():
        if any(bad in line for bad in ("import os", "os.system", "__import__", "import sys")):
            assert line.startswith("# ") and "\\n" in line, line


def test_iobinding_device_outputs_survive_the_next_run():
    """ORT's IOBinding gives each run's outputs OrtValues of their own; the CUDA rep's device
    outputs are views of buffers its next run overwrites, so the session copies them."""
    import onnxjit
    a, b = rand((2, 3)), rand((3,), seed=1)
    sess = onnxjit.InferenceSession(add_model().SerializeToString(),
                                    providers=["CUDAExecutionProvider"])
    on_device = onnxjit.OrtValue.ortvalue_from_numpy
    binding = sess.io_binding()
    binding.bind_ortvalue_input("a", on_device(a, "cuda"))   # device in: device out
    binding.bind_ortvalue_input("b", on_device(b, "cuda"))
    binding.bind_output("y0", "cuda")
    sess.run_with_iobinding(binding)
    first = binding.get_outputs()[0]
    binding.bind_ortvalue_input("a", on_device(a * 3, "cuda"))
    sess.run_with_iobinding(binding)
    second = binding.get_outputs()[0]
    np.testing.assert_allclose(first.numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(second.numpy(), a * 3 + b, rtol=1e-6)
