"""prepare(model, "CUDA") runs the CPU target's checks (onnxjit/validate.py): invalid models are
refused with the error class the CPU target gives, naming the node, before any CUDA code is
generated; the element limit holds at prepare and for shapes only a run's inputs fix."""
import importlib.util
import os

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from onnxjit.errors import LimitError, ModelError

# The invalid models of tests/test_validate.py (each with the node its error must name), so the
# two targets are held to the same list.
_spec = importlib.util.spec_from_file_location(
    "onnxjit_test_validate_cases",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test_validate.py"))
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
INVALID = _cases.INVALID


def _refusal(model, device):
    with pytest.raises(ModelError) as info:
        backend.prepare(model, device)
    return info.value


@pytest.fixture
def no_cuda_codegen(monkeypatch):
    """Fails the test if the CUDA rep starts specializing (lowering, then generating kernels)."""
    import onnxjit.cuda.rep as rep
    monkeypatch.setattr(rep, "specialize_cuda",
                        lambda *a, **k: pytest.fail("the CUDA target started generating code"))


@pytest.mark.parametrize("case", sorted(INVALID))
def test_cuda_validate_invalid_model_refused_like_cpu(case, no_cuda_codegen):
    model, arrays, node_name = INVALID[case]()
    cpu = _refusal(model, "CPU")
    cuda = _refusal(model, "CUDA")
    assert type(cuda) is type(cpu), (cuda, cpu)
    assert repr(node_name) in str(cuda)
    assert str(cuda) == str(cpu)


def test_cuda_validate_f64_conv_weight_and_bad_attribute(no_cuda_codegen):
    """The issue's two examples, on a model the CUDA target lowers when it is valid."""
    w64 = helper.make_tensor("W", T.DOUBLE, [1, 1, 3, 3], np.ones(9).tolist())
    x = helper.make_tensor_value_info("X", T.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("Y", T.FLOAT, None)
    conv = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["X", "W"], ["Y"], name="conv0")], "g", [x], [y], [w64]),
        opset_imports=[helper.make_opsetid("", 21)])
    error = _refusal(conv, "CUDA")
    assert "'conv0'" in str(error) and type(error) is type(_refusal(conv, "CPU"))
    a = helper.make_tensor_value_info("a", T.FLOAT, [4])
    mod = helper.make_model(helper.make_graph(
        [helper.make_node("Mod", ["a", "a"], ["y"], name="mod", fmod=2)], "g", [a],
        [helper.make_tensor_value_info("y", T.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 21)])
    error = _refusal(mod, "CUDA")
    assert "'mod'" in str(error) and "fmod" in str(error)
    assert type(error) is type(_refusal(mod, "CPU"))


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile", "Range", "Resize"])
def test_cuda_validate_huge_tensor_refused(op, no_cuda_codegen):
    model = _cases._huge(op)
    with pytest.raises(LimitError) as info:
        backend.prepare(model, "CUDA")
    assert "'big'" in str(info.value) and "ONNXJIT_MAX_ELEMENTS" in str(info.value)


def test_cuda_validate_nesting_limit():
    with pytest.raises(LimitError, match="nest deeper than 2 levels"):
        backend.prepare(_cases._nested_ifs(3), "CUDA", max_nesting=2)


def test_cuda_validate_element_limit_at_run():
    """A shape read from a graph input: the rep's max_elements applies when the signature is
    specialized, as on the CPU target."""
    model = _cases._model([helper.make_node("Expand", ["x", "s"], ["y"], name="fill")],
                          [helper.make_tensor_value_info("x", T.FLOAT, [1]),
                           helper.make_tensor_value_info("s", T.INT64, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    rep = backend.prepare(model, "CUDA", max_elements=1000)
    x, small = np.array([2.5], np.float32), np.array([10, 20], np.int64)
    np.testing.assert_array_equal(rep.run([x, small])[0],
                                  ReferenceEvaluator(model).run(None, {"x": x, "s": small})[0])
    with pytest.raises(LimitError, match="'fill'.*over the limit of 1,000"):
        rep.run([x, np.array([100, 20], np.int64)])
