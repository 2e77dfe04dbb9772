"""`onnxjit bench`: helpers unit by unit, then end to end with whatever baselines are installed."""
import importlib.util
import json
import math
import sys

import numba
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxjit import bench, models

# The end-to-end tests run against every baseline present: the reference evaluator always,
# ONNX Runtime only where it is installed (it is an optional extra CI does not install).
BASELINES = [bench.ReferenceBaseline] + (
    [bench.OrtBaseline] if importlib.util.find_spec("onnxruntime") else [])
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    """main() sets thread counts for the whole process: undo that for the other tests."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    before = numba.get_num_threads()
    yield
    numba.set_num_threads(before)


def _custom_op_model():
    """A model with an op nobody implements: onnxjit must report it, not crash."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "custom", [x], [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("com.example", 1)])


# -- inputs, dims -------------------------------------------------------------------------------
def test_parse_dims():
    assert bench.parse_dims(["N=4", "seq = 128"]) == {"N": 4, "seq": 128}
    for bad in ("N", "N=x", "=3", "N=-1"):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            bench.parse_dims([bad])


def test_model_inputs_uses_dims_and_dtypes():
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
              helper.make_tensor_value_info("b", TensorProto.INT64, ["M"]),
              helper.make_tensor_value_info("c", TensorProto.BOOL, [2])]
    graph = helper.make_graph([], "g", inputs, [])
    feeds = bench.model_inputs(helper.make_model(graph), {"N": 5})
    assert list(feeds) == ["a", "b", "c"]
    assert feeds["a"].shape == (5, 3) and feeds["a"].dtype == np.float32
    assert feeds["b"].shape == (1,) and feeds["b"].dtype == np.int64
    assert feeds["c"].dtype == np.bool_
    again = bench.model_inputs(helper.make_model(graph), {"N": 5})
    np.testing.assert_array_equal(feeds["a"], again["a"])          # seeded: reproducible


# -- statistics ---------------------------------------------------------------------------------
def test_statistics():
    samples = [float(i) for i in range(1, 11)]
    assert bench.summarize(samples) == {"median": 5.5, "p90": pytest.approx(9.1), "n": 10}
    assert bench.pair_ratios([2.0, 3.0, 1.0], [1.0, 6.0, 0.0]) == [2.0, 0.5]
    assert bench.geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert bench.geomean([None]) is None
    assert bench.auto_pairs(1.0, budget=2.0) == bench.MIN_PAIRS
    assert bench.auto_pairs(1e-3, budget=2.0) == 2000
    assert bench.auto_pairs(0.01, budget=2.0) == 200


def test_time_alternating_rotates_and_counts():
    calls, ticks = [], iter(range(10_000))
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    samples = bench.time_alternating(fns, repeat=4, warmup=2, clock=lambda: next(ticks), block=1,
                                     settle=0)
    assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4}
    assert all(t == 1 for v in samples.values() for t in v)      # each call spans one clock tick
    # 2 warm-up rounds, 1 sizing round, then per round: an untimed settling call and the timed
    # block of each engine, the order rotating.
    assert calls == ["a", "b"] * 3 + ["a", "a", "b", "b", "b", "b", "a", "a"] * 2


def test_time_alternating_blocks():
    calls, ticks = [], iter(range(10_000))
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    samples = bench.time_alternating(fns, repeat=5, warmup=0, clock=lambda: next(ticks), block=3,
                                     settle=0)
    assert {k: len(v) for k, v in samples.items()} == {"a": 5, "b": 5}
    # Sizing round; then blocks of 1 settling + 3 timed calls, the last block cut to the 2 left.
    assert calls == ["a", "b"] + ["a"] * 4 + ["b"] * 4 + ["b"] * 3 + ["a"] * 3
    # Without `block`, a block lasts about BLOCK_S: up to MAX_BLOCK fast calls, one slow call.
    # Calls made: 1 sizing call, then per block 1 settling call and its timed calls.
    for tick, blocks in ((1e-6, 1), (1.0, 7)):
        counter, seen = iter(range(10_000)), []
        samples = bench.time_alternating({"x": lambda: seen.append(1)}, repeat=7, warmup=0,
                                         clock=lambda: next(counter) * tick, settle=0)
        assert len(samples["x"]) == 7
        assert len(seen) == 1 + blocks + 7


def test_time_alternating_settles_for_a_while():
    """After each switch, untimed calls run until `settle` seconds have passed: with a clock
    ticking 1 s per reading and settle=2.5, three settling calls precede each timed block."""
    calls, ticks = [], iter(range(10_000))
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    samples = bench.time_alternating(fns, repeat=2, warmup=0, clock=lambda: next(ticks), block=2,
                                     settle=2.5)
    assert {k: len(v) for k, v in samples.items()} == {"a": 2, "b": 2}
    assert calls == ["a", "b"] + ["a"] * 3 + ["a"] * 2 + ["b"] * 3 + ["b"] * 2


# -- correctness --------------------------------------------------------------------------------
@pytest.mark.parametrize("got, want, match", [
    ([1.0, 2.0], [1.0, 2.0], True),
    ([1.0, 2.0005], [1.0, 2.0], True),                 # within rtol 1e-3
    ([1.0, 2.01], [1.0, 2.0], False),
    ([1e-5, 100.0], [0.0, 100.0], True),               # atol scales with max|ref|
    ([0.02, 1.0], [0.0, 1.0], False),
    ([np.nan, 1.0], [np.nan, 1.0], True),
    ([np.nan, 1.0], [0.0, 1.0], False),
    ([np.inf, 1.0], [np.inf, 1.0], True),
    ([-np.inf, 1.0], [np.inf, 1.0], False),
])
def test_compare_floats(got, want, match):
    result = bench.compare([np.array(got, np.float32)], [np.array(want, np.float32)])
    assert result["match"] is match
    assert (result["problem"] is None) is match


def test_compare_reports_sizes_shapes_and_ints():
    r = bench.compare([np.array([1.0, 3.0])], [np.array([1.0, 2.0])])
    assert r["max_abs"] == pytest.approx(1.0) and r["max_rel"] == pytest.approx(0.5)
    assert "output 0" in r["problem"]
    assert bench.compare([np.array([1, 2])], [np.array([1, 3])])["match"] is False
    assert bench.compare([np.array([1, 2])], [np.array([1, 2])])["match"] is True
    assert "shape" in bench.compare([np.zeros(2)], [np.zeros(3)])["problem"]
    assert "outputs" in bench.compare([np.zeros(2)], [])["problem"]


def test_peak_memory_sees_native_allocations():
    with bench.PeakMemory() as memory:
        block = np.ones(64 * 2**20 // 8)                            # 64 MB, touched
        del block
    assert memory.mb >= (50 if memory.exact else 0)


# -- output -------------------------------------------------------------------------------------
def _rows():
    ok = dict(bench.new_row("one_node"), jit_median_ms=0.002, ort_median_ms=0.02, ratio=0.1)
    slow = dict(bench.new_row("slow"), jit_median_ms=30.0, ort_median_ms=10.0, ratio=3.0)
    bad = dict(bench.new_row("custom"), status="unsupported",
               detail="UnsupportedOpError: onnxjit cannot lower: com.example::Frobnicate")
    return [ok, slow, bad]


def test_format_table_and_notes():
    table = bench.format_table(_rows()).splitlines()
    assert table[0].split()[:3] == ["model", "status", "cold"]
    assert len(table) == 5 and set(table[1]) <= {"-", " "}
    assert table[2].startswith("one_node") and " 0.100" in table[2]
    assert table[4].split()[1] == "unsupported" and "-" in table[4].split()
    assert len({len(line) for line in table[:2]}) == 1                # columns line up
    notes = bench.format_notes(_rows())
    assert "custom: unsupported:" in notes and "Frobnicate" in notes
    assert bench.format_notes(_rows()[:2]) == ""


def test_summary_line_is_geomean():
    line = bench.summary_line(_rows())
    assert f"{math.sqrt(0.1 * 3.0):.3f}" in line and "2 of 3 models" in line
    assert "n/a" in bench.summary_line(_rows()[2:])


def test_write_json_round_trips(tmp_path):
    report = bench.make_report(_rows(), ["--repeat", "3"], 1, {"numba": 1},
                               bench.ReferenceBaseline())
    bench.write_json(tmp_path / "r.json", report)
    loaded = json.loads((tmp_path / "r.json").read_text())
    assert loaded["results"][2]["status"] == "unsupported"
    assert loaded["geomean_ratio"] == pytest.approx(math.sqrt(0.3))
    assert loaded["command"] == "onnxjit bench --repeat 3" and loaded["machine"]["cpus"] >= 1
    assert {"onnxjit", "numba", "numpy", "onnx"} <= set(loaded["versions"])


@pytest.mark.parametrize("available", sorted({False, HAVE_MATPLOTLIB}))
def test_write_png(tmp_path, monkeypatch, available):
    """Writes a PNG when matplotlib is there; a MissingDependency error when it is not."""
    if not available:
        monkeypatch.setitem(sys.modules, "matplotlib", None)          # import now fails
        with pytest.raises(bench.MissingDependency, match="matplotlib"):
            bench.write_png(tmp_path / "r.png", _rows(), "title")
        return
    bench.write_png(tmp_path / "r.png", _rows(), "title")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- threads, arguments -------------------------------------------------------------------------
def test_limit_threads_sets_numba_and_blas():
    done = bench.limit_threads(1)
    assert done["numba"] == 1 and numba.get_num_threads() == 1 and done["blas"]


def test_parse_args_and_select_models():
    args = bench.parse_args(["a.onnx", "--dim", "N=2", "--threads", "2", "--only", "x"])
    assert args.models == ["a.onnx"] and args.dims == {"N": 2} and args.threads == 2
    with pytest.raises(SystemExit):
        bench.parse_args(["--dim", "N"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--threads", "0"])
    assert bench.select_models(["/m/resnet.onnx"]) == [("resnet", "/m/resnet.onnx")]
    names = [n for n, _ in bench.select_models([], only="^light_(resnet|squeeze)")]
    assert names == ["light_resnet50", "light_squeezenet"]


def test_warns_when_the_machine_is_busy(monkeypatch, capsys):
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (64.0, 0.0, 0.0))
    bench.warn_if_busy(1)
    assert "load average 64.0" in capsys.readouterr().err
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    bench.warn_if_busy(1)
    assert capsys.readouterr().err == ""


def test_main_without_onnxruntime_exits_clearly(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)            # `import onnxruntime` fails
    assert bench.main(["--only", "one_node", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime" in err and "not installed" in err and "pip install" in err


def test_main_rejects_an_empty_selection(monkeypatch, capsys):
    monkeypatch.setattr(bench, "make_baseline", bench.ReferenceBaseline)
    assert bench.main(["--only", "no-such-model", "--quiet"]) == 2
    assert "no model matches" in capsys.readouterr().err


# -- end to end ---------------------------------------------------------------------------------
def _save(tmp_path, name, model):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("baseline", BASELINES, ids=lambda b: b.name)
def test_main_end_to_end(tmp_path, monkeypatch, capsys, baseline):
    """one_node, a tiny fused chain and an unsupported model, through main: table, JSON, notes."""
    monkeypatch.setattr(bench, "make_baseline", baseline)
    paths = [_save(tmp_path, "one_node", models.one_node()),
             _save(tmp_path, "chain", models.elementwise_chain(rows=4, cols=8)),
             _save(tmp_path, "custom", _custom_op_model())]
    argv = paths + ["--repeat", "5", "--quiet", "--json", str(tmp_path / "r.json")]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "one_node" in out and "geometric mean" in out and "2 of 3 models" in out
    rows = {r["model"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    for name in ("one_node", "chain"):
        r = rows[name]
        assert r["status"] == "ok" and r["max_abs"] <= 1e-5 and r["pairs"] == 5
        assert r["cold_prepare_s"] > 0 and r["warm_prepare_s"] > 0 and r["ratio"] > 0
        assert r["jit_median_ms"] <= r["jit_p90_ms"] and r["ort_create_s"] >= 0
    assert rows["custom"]["status"] == "unsupported" and "Frobnicate" in rows["custom"]["detail"]
    assert rows["custom"]["ratio"] is None


class _WrongBaseline(bench.ReferenceBaseline):
    """The reference evaluator, off by 1: a mismatch bench must flag."""

    def create(self, model):
        run = super().create(model)
        return lambda feeds: [o + 1 for o in run(feeds)]


def test_mismatch_is_flagged(tmp_path, monkeypatch, capsys):
    """onnxjit's outputs off by 1: onnx.reference sides with the baseline, the row is a MISMATCH
    and the exit status 1."""
    monkeypatch.setattr(bench, "make_baseline", bench.ReferenceBaseline)
    cold = bench._jit_cold

    def wrong_jit(*args):
        rep, outputs = cold(*args)
        return rep, [o + 1 for o in outputs]
    monkeypatch.setattr(bench, "_jit_cold", wrong_jit)
    assert bench.main([_save(tmp_path, "one_node", models.one_node()), "--repeat", "2",
                       "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "differs beyond rtol" in out
    assert "both agree with onnx.reference" not in out and "onnxjit max abs 1.0e+00" in out


def test_a_wrong_baseline_is_refereed(tmp_path, monkeypatch, capsys):
    """The baseline off by 1 (as ORT is, by 0.15, on int8_transformer on an AVX2 CPU):
    onnx.reference sides with onnxjit; the row says so, keeps onnxjit's own difference to the
    reference, and bench does not fail."""
    monkeypatch.setattr(bench, "make_baseline", _WrongBaseline)
    json_path = tmp_path / "r.json"
    assert bench.main([_save(tmp_path, "one_node", models.one_node()), "--repeat", "2",
                       "--quiet", "--json", str(json_path)]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH" not in out and "onnx.reference agrees with onnxjit" in out
    row = json.loads(json_path.read_text())["results"][0]
    assert row["status"] == "onnx-reference-off" and row["max_abs"] <= 1e-6
    assert row["ratio"] is not None
