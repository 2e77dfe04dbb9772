"""The inspection views: explain() rows, the text table, the HTML view and `onnxjit show`."""
import builtins
import importlib.util
import html
import re
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxjit
from onnxjit.explain import explain, format_table, show_main, to_html
from onnxjit.plan import Call, Kernel, Schedule

HOSTILE = "<script>alert(1)</script>"


def demo_model(dims=("N", 8), node_prefix="", graph_name="demo"):
    """Mul+Relu (fused) -> ReduceSum (call) -> Sub (fused): both kernel kinds in one plan."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name=node_prefix + "square"),
             helper.make_node("Relu", ["sq"], ["r"], name=node_prefix + "relu"),
             helper.make_node("ReduceSum", ["r", "axes"], ["s"], name=node_prefix + "sum"),
             helper.make_node("Sub", ["r", "s"], ["y"], name=node_prefix + "center")]
    graph = helper.make_graph(nodes, graph_name, [x], [y], initializer=[axes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def visible_text(page):
    """What a browser shows: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def rep():
    with pytest.MonkeyPatch.context() as mp:     # the njit entry (see conftest.njit_entry)
        mp.setenv("ONNXJIT_ENTRY", "auto")
        rep = onnxjit.prepare(demo_model())
        rep.run([np.ones((2, 8), np.float32)])
        rep.run([np.ones((4, 8), np.float32)])      # the most recent signature: shown by default
    return rep


def test_explain_rows(rep):
    rows = explain(rep)
    assert [r["kernel"] for r in rows] == [k.name for k in rep.compiled().kernels]
    assert [r["kind"] for r in rows] == ["fused", "call", "fused"]
    assert rows[0]["nodes"] == ["square", "relu"] and rows[0]["op_types"] == ["Mul", "Relu"]
    assert rows[1]["op_types"] == ["ReduceSum"] and rows[1]["output_shapes"] == [(4, 1)]
    assert rows[2]["output_shapes"] == [(4, 8)] and rows[2]["output_dtypes"] == ["float32"]
    assert all(r["compiled"] for r in rows)
    assert all(r["us_per_call"] is None and r["calls"] is None for r in rows)


def test_explain_profiled_times():
    rep = onnxjit.prepare(demo_model(), profile=True)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    for _ in range(5):
        y = rep.run([x])[0]
    r = np.maximum(x * x, 0)
    np.testing.assert_allclose(y, r - r.sum(axis=1, keepdims=True), rtol=1e-6)
    rows = explain(rep)
    assert all(r["calls"] == 5 and r["us_per_call"] > 0 for r in rows)
    assert "us/call" in format_table(rows)


def test_explain_picks_signature(rep):
    assert explain(rep)[1]["output_shapes"] == [(4, 1)]
    assert explain(rep, [((2, 8), np.float32)])[1]["output_shapes"] == [(2, 1)]


def test_text_table(rep):
    text = format_table(explain(rep))
    lines = text.splitlines()
    assert lines[0].split() == ["kernel", "kind", "nodes", "outputs", "compiled", "us/call"]
    assert len(lines) == 2 + len(rep.compiled().kernels)
    assert "square (Mul), relu (Relu)" in text and "sum (ReduceSum)" in text
    assert str(explain(rep)) == text
    rich = explain(rep)._repr_html_()
    assert all(f"<td style=\"text-align:left;vertical-align:top\">{k.name}</td>" in rich
               for k in rep.compiled().kernels)


def test_text_table_escapes_control_characters():
    rows = [{"kernel": "k", "kind": "fused", "nodes": ["a\x1b[31mred"], "op_types": ["Relu"],
             "output_shapes": [(2,)], "output_dtypes": ["float32"], "compiled": True,
             "calls": None, "us_per_call": None}]
    text = format_table(rows)
    assert "\x1b" not in text and "a\\x1b[31mred (Relu)" in text


def test_html_has_summary_cache_plan_and_source(rep):
    page = to_html(rep)
    text = visible_text(page)
    for row in explain(rep):
        assert row["kernel"] in text
    assert "square (Mul), relu (Relu)" in text and "sum (ReduceSum)" in text
    assert "x: float32[4, 8]" in text and "x: float32[2, 8]" in text      # both cached signatures
    assert f"{rep.hits} hit(s), {rep.misses} miss(es)" in text
    assert "opsets: ai.onnx 21" in text and "nodes: 4" in text and "[N, 8]" in text
    for line in rep.source().splitlines():
        assert line in text
    if importlib.util.find_spec("pygments"):                # a dependency of ipykernel (notebook extra)
        assert 'style="color' in page


@pytest.fixture
def no_pygments(monkeypatch):
    """Make `import pygments...` fail, as on a machine without it."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("pygments"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_html_without_pygments(rep, no_pygments):
    page = to_html(rep)
    assert "<pre>" in page and 'style="color' not in page
    assert html.escape(rep.source()) in page


def test_html_before_anything_is_compiled():
    rep = onnxjit.prepare(demo_model())
    text = visible_text(to_html(rep))
    assert "nothing compiled yet" in text and "0 hit(s), 0 miss(es)" in text


@pytest.mark.parametrize("pygments", [True, False])
def test_html_escapes_hostile_names(request, pygments):
    if not pygments:
        request.getfixturevalue("no_pygments")
    model = demo_model(dims=(3, 8), node_prefix=HOSTILE, graph_name=HOSTILE)
    rep = onnxjit.prepare(model)
    assert HOSTILE in rep.source()          # the comment keeps it (as text): the view must escape it
    page = to_html(rep)
    assert "<script" not in page.lower()
    assert visible_text(page).count(HOSTILE) >= 3   # model name, plan row, source comment


def test_compiled_flag_false_for_python_driver_kernels():
    """A kernel called from the (uncompiled) Python driver is reported as not compiled."""
    source = ("@__njit(cache=True)\ndef fused_0_relu(a0):\n    return a0\n\n\n"
              "@__njit(cache=True)\ndef segment_0(in_x):\n    t1 = fused_0_relu(in_x)\n"
              "    return (t1,)\n\n\ndef run_graph(in_x):\n    (t1,) = segment_0(in_x)\n"
              "    # call_1_op: n (Op)\n    t2 = op(t1)\n    return (t2,)\n")
    kernels = [Kernel("fused", [], name="fused_0_relu"), Kernel("call", [], name="call_1_op")]
    # where the plan's schedule runs each kernel: explain reads it, not the source
    schedule = Schedule("driver", [Call("segment", kernels[:1], name="segment_0"),
                                   Call("python", kernels[1:])], kernels)
    compiled = SimpleNamespace(source=source, kernels=kernels, module=None, profile=None,
                               schedule=schedule)
    fake = SimpleNamespace(compiled=lambda signature=None: compiled)
    assert [r["compiled"] for r in explain(fake)] == [True, False]


def test_show_cli(tmp_path, capsys):
    path = tmp_path / "demo.onnx"
    onnx.save(demo_model(), str(path))
    assert show_main([str(path), "--dim", "N=3", "--profile", "--runs", "4"]) == 0
    out = capsys.readouterr().out
    assert "signature: x: float32[3, 8]" in out
    assert "sum (ReduceSum)" in out and "call_1_reducesum" in out
    assert "def run_graph(" in out and "# ONNX nodes: square (Mul), relu (Relu)" in out
    assert re.search(r"fused_0_mul_relu .* yes +\d+\.\d", out)


def test_show_cli_errors(tmp_path, capsys):
    assert show_main([str(tmp_path / "missing.onnx")]) == 1
    assert "no ONNX model file" in capsys.readouterr().err
    path = tmp_path / "demo.onnx"
    onnx.save(demo_model(), str(path))
    assert show_main([str(path), "--dim", "N"]) == 1
    assert "--dim expects NAME=" in capsys.readouterr().err
