"""Execute the notebooks in notebooks/ (committed without outputs) so they cannot rot."""
import importlib.util
import os
import pathlib

import pytest

import nbclient  # in the test extra
import nbformat

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT_S = 300


def execute(name, env=None):
    """Run every cell of notebooks/<name> in a fresh kernel; the executed notebook."""
    path = NOTEBOOKS / name
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=dict(os.environ, **(env or {})))
    return notebook


def outputs_text(notebook):
    """Every text and HTML output, concatenated."""
    parts = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", out
            parts.append(out.get("text", ""))
            data = out.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(parts)


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_committed_without_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{name}: clear the outputs"


def test_walkthrough():
    text = outputs_text(execute("walkthrough.ipynb"))
    assert "# ONNX nodes: scale (Mul), shift (Add), relu (Relu)" in text      # the source
    assert "fused_0_mul_add_relu" in text and "generated source" in text      # the HTML view
    assert "'signatures': 2" in text and "float32[32, 16]" in text            # the cache grew
    assert "us/call" in text and "signature: x: float32[8, 16]" in text      # profile, CLI


def test_benchmark_without_onnxruntime(tmp_path):
    """What CI runs (no onnxruntime there): onnxjit's timings only, and no failure."""
    (tmp_path / "onnxruntime.py").write_text("raise ImportError('onnxruntime hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    text = outputs_text(execute("benchmark.ipynb", env={"PYTHONPATH": path}))
    assert "showing onnxjit timings only" in text and "no ONNX Runtime" in text
    assert "jit ms" in text and "ort ms" not in text
    assert any(line.startswith("one_node") and " ok " in line for line in text.splitlines())


# Only the modes this machine can run: ONNX Runtime is an optional extra (CI has none).
WITH_ORT = ["with onnxruntime"] if importlib.util.find_spec("onnxruntime") else []


@pytest.mark.parametrize("mode", WITH_ORT)
def test_benchmark_with_onnxruntime(mode):
    text = outputs_text(execute("benchmark.ipynb"))
    assert "baseline: onnxruntime" in text and "jit/ort" in text
    assert any(line.startswith("one_node") and " ok " in line for line in text.splitlines())
