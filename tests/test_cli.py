"""The command line as README and .ci/run use it (onnxjit/tools/cli.py, reached through
`python -m onnxjit`, the shim onnxjit/__main__.py and the console script)."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, save
from onnx.reference import ReferenceEvaluator

from onnxjit.inputs import model_inputs

REPO = Path(__file__).resolve().parent.parent


def _cli(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_console_script_names_the_cli():
    """pyproject's `onnxjit` script resolves to the CLI's main."""
    import importlib

    from onnxjit.tools import cli
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["onnxjit"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is cli.main
    assert "onnxjit.tools" in tomllib.loads((REPO / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["packages"]


def test_demo_on_a_model_file(tmp_path):
    """`python -m onnxjit demo MODEL.onnx` runs it on the helper's random inputs: the printed
    output summary matches onnx's reference on the same inputs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Mul", ["x", "x"], ["s"]), helper.make_node("Sigmoid", ["s"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "demo", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "m.onnx"
    save(model, str(path))
    out = _cli("onnxjit", "demo", str(path), "--repeat", "2", "--lines", "3")
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    expected = ReferenceEvaluator(model).run(None, model_inputs(model))[0]
    found = re.search(r"output 'y': float32\[4, 5\] mean=(\S+) argmax=(\d+)", out.stdout)
    assert found, out.stdout
    np.testing.assert_allclose(float(found.group(1)), expected.mean(), rtol=1e-5)
    assert int(found.group(2)) == int(np.argmax(expected))
    assert "rep.run median latency" in out.stdout and "generated code" in out.stdout


def test_conformance_entry_points():
    """`python -m onnxjit conformance` runs the backend suite (here one test, which passes);
    `python -m onnxjit.conformance` is the same tool (its --help: each run loads onnx's whole
    node suite first, ~5 s)."""
    out = _cli("onnxjit", "conformance", "-k", "^test_relu_cpu$", "-j", "1")
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    total = re.search(r"^total\s+(\d+)\s+(\d+)\s+(\d+)", out.stdout, re.M)
    assert total and total.groups() == ("1", "0", "0"), out.stdout
    out = _cli("onnxjit.conformance", "--help", timeout=300)
    assert out.returncode == 0 and "usage:" in out.stdout and "-k" in out.stdout, out.stdout


def test_subcommands_reach_their_tools():
    for args, prog in ((["onnxjit", "bench", "--help"], "usage: onnxjit bench"),
                       (["onnxjit", "show", "--help"], "usage: onnxjit show"),
                       (["onnxjit.bench", "--help"], "usage: onnxjit bench"),
                       (["onnxjit", "--help"], "usage: onnxjit ")):
        out = _cli(*args, timeout=300)
        assert out.returncode == 0 and out.stdout.startswith(prog), (args, out.stdout, out.stderr)
    out = _cli("onnxjit", "nonsense", timeout=300)
    assert out.returncode == 2 and "invalid choice" in out.stderr
