"""External data: read from inside the model's folder, refused when its location escapes it."""
import os
import re
from importlib import metadata

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit
from onnxjit.backend import is_compatible, prepare
from onnxjit.errors import ModelError

X = np.linspace(-2, 2, 8, dtype=np.float32)


def _model(location=None, constant_location=None):
    """y = (x + w) * c: w an initializer, c a Constant node's tensor; either may be external."""
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32) - 3, "w")
    c = numpy_helper.from_array(np.full(8, 1.5, np.float32), "c_value")
    for tensor, where in ((w, location), (c, constant_location)):
        if where is not None:
            _make_external(tensor, where)
    nodes = [helper.make_node("Constant", [], ["c"], value=c),
             helper.make_node("Add", ["x", "w"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["y"])]
    graph = helper.make_graph(
        nodes, "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _make_external(tensor, where):
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", where), ("offset", "0"), ("length", "32")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


@pytest.fixture
def folders(tmp_path):
    """(model folder, outside folder); each holds an 8-float file: the outside one is 'secret'."""
    inside, outside = tmp_path / "model", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (np.arange(8, dtype=np.float32) - 3).tofile(inside / "w.bin")
    np.full(8, 1.5, np.float32).tofile(inside / "c.bin")
    np.full(8, 1e6, np.float32).tofile(outside / "secret.bin")
    return inside, outside


def _save(model, folder):
    path = folder / "model.onnx"
    with open(path, "wb") as f:        # as is: onnx.save would rewrite external tensors
        f.write(model.SerializeToString())
    return str(path)


def _expected():
    return ReferenceEvaluator(_model()).run(None, {"x": X})[0]


def test_external_data_from_the_models_folder(folders, tmp_path, monkeypatch):
    inside, _ = folders
    path = _save(_model("w.bin", "c.bin"), inside)
    monkeypatch.chdir(tmp_path)        # read relative to the model, not the working directory
    np.testing.assert_allclose(prepare(path).run([X])[0], _expected(), rtol=1e-6)


def test_external_data_written_by_onnx(tmp_path):
    """A model onnx.save wrote with its tensors in one external file."""
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    stored = onnx.load(str(path), load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in stored.graph.initializer)
    expected = ReferenceEvaluator(onnx.load(str(path))).run(None, {"x": X})[0]
    np.testing.assert_allclose(prepare(str(path)).run([X])[0], expected, rtol=1e-6)


def _escapes(inside, outside):
    """(location, what the error says) for each way out of the model's folder."""
    (inside / "link.bin").symlink_to(outside / "secret.bin")
    (inside / "linked_dir").symlink_to(outside, target_is_directory=True)
    return [("../outside/secret.bin", "outside the model's folder"),
            ("sub/../../outside/secret.bin", "outside the model's folder"),
            (str(outside / "secret.bin"), "absolute path"),
            ("link.bin", "outside the model's folder"),
            ("linked_dir/secret.bin", "outside the model's folder")]


@pytest.mark.parametrize("which", ["initializer", "constant"])
def test_escaping_locations_are_refused(folders, which):
    inside, outside = folders
    for where, reason in _escapes(inside, outside):
        model = _model(where, "c.bin") if which == "initializer" else _model("w.bin", where)
        path = _save(model, inside)
        with pytest.raises(ModelError, match=re.escape(reason)) as info:
            prepare(path)
        assert repr(where) in str(info.value)
        assert not is_compatible(path)


def test_missing_and_unnamed_files_are_refused(folders):
    inside, _ = folders
    with pytest.raises(ModelError, match="no file 'nothing.bin'"):
        prepare(_save(_model("nothing.bin"), inside))
    with pytest.raises(ModelError, match="no location"):
        prepare(_save(_model(""), inside))


def test_length_past_the_end_is_refused(folders):
    inside, _ = folders
    model = _model("w.bin")
    next(e for e in model.graph.initializer[0].external_data if e.key == "length").value = "4096"
    with pytest.raises(ModelError, match="'w'"):
        prepare(_save(model, inside))


@pytest.mark.parametrize("as_bytes", [True, False])
def test_bytes_and_protos_never_read_external_files(folders, monkeypatch, as_bytes):
    """Without a path there is no folder: not even a file beside the working directory is read."""
    inside, _ = folders
    monkeypatch.chdir(inside)          # where w.bin and c.bin are
    model = _model("w.bin")
    with pytest.raises(ModelError, match=r"external file \('w.bin'\).*pass the model's path"):
        prepare(model.SerializeToString() if as_bytes else model)


def test_session_refuses_escaping_locations(folders):
    inside, outside = folders
    path = _save(_model("../outside/secret.bin"), inside)
    with pytest.raises(Exception, match="secret.bin") as info:
        onnxjit.InferenceSession(path)
    assert isinstance(info.value, onnxjit.errors.OnnxJitError)


def test_onnx_pinned_to_a_release_with_the_external_data_fixes():
    """onnx 1.21.0 fixed reading external data through symlinks and hardlinks (CVE-2026-27489,
    CVE-2026-34446) and ExternalDataInfo's attribute injection (CVE-2026-34445)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml")) as f:
        text = f.read()
    pins = re.findall(r'"onnx>=([0-9.]+)', text)
    assert pins, "pyproject.toml names no lower bound for onnx"
    assert tuple(int(p) for p in pins[0].split(".")[:2]) >= (1, 21)
    installed = tuple(int(p) for p in re.findall(r"\d+", metadata.version("onnx"))[:2])
    assert installed >= (1, 21)
