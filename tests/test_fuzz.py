"""The fuzz harness (onnxjit/fuzz.py): a fixed-seed sample has no findings; the pool records a
worker that crashes or hangs instead of dying with it; cases depend only on (seed, index)."""
import os
import signal
import time

import numpy as np

from onnxjit import fuzz

SEED = 21
SAMPLE = 40


def test_cases_are_reproducible():
    for index in range(12):
        a, b = fuzz.make_case(SEED, index), fuzz.make_case(SEED, index)
        assert a["model"] == b["model"] and a["note"] == b["note"]
        assert len(a["inputs"]) == len(b["inputs"])
        for x, y in zip(a["inputs"], b["inputs"]):
            np.testing.assert_array_equal(x, y)


def test_fixed_seed_sample_has_no_findings():
    cases = [fuzz.make_case(SEED, i) for i in range(SAMPLE)]
    assert {c["kind"] for c in cases} == set(fuzz.KINDS)
    results = fuzz.run_cases(cases, jobs=1, timeout=60, prepare_timeout=600)
    counts = fuzz.summarize(results)
    findings = [(r["index"], r["base"], r["mutation"], r["outcome"], r["detail"])
                for r in results if r["outcome"] in fuzz.FINDINGS]
    assert findings == [], findings
    # The harness compared outputs, not only errors: most cases ran on both sides.
    assert counts["agree"] >= SAMPLE // 3, counts


def _scripted_worker(conn, quiet):
    """A worker that agrees with the reference, crashes or hangs as the case's model says."""
    while True:
        case = conn.recv()
        if case is None:
            return
        answer = {"ok": [np.arange(3.0)]}
        conn.send(("reference", answer))
        conn.send(("prepare", None))
        if case["model"] == b"crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if case["model"] == b"hang":
            time.sleep(3600)
        if case["model"] == b"unclean":
            conn.send(("onnxjit", {"error": {"type": "numba.core.errors.TypingError",
                                             "message": "Failed in nopython mode pipeline",
                                             "onnxjit": False, "kernel": False,
                                             "traceback": ""}}))
        else:
            conn.send(("onnxjit", answer))
        conn.recv()


def test_pool_records_crash_and_hang_and_goes_on():
    cases = [{"index": i, "kind": "graph", "base": "scripted", "model": m, "inputs": [],
              "note": ""} for i, m in enumerate([b"crash", b"ok", b"hang", b"unclean", b"ok"])]
    start = time.monotonic()
    # `timeout` covers a fresh worker's imports (slow on a loaded host); the hang is caught by
    # the prepare/run limit.
    results = fuzz.run_cases(cases, jobs=1, timeout=60, prepare_timeout=5,
                             target=_scripted_worker)
    assert [r["outcome"] for r in results] == ["CRASH", "agree", "HANG", "UNCLEAN", "agree"]
    assert "-11" in results[0]["detail"]
    assert time.monotonic() - start < 300


def test_compare_tells_nan_and_tolerance_apart():
    a = np.array([1.0, np.nan, np.inf], np.float32)
    assert fuzz.compare([a], [a.copy()]) is None
    assert fuzz.compare([a], [np.array([1.0, 0.0, np.inf], np.float32)]) is not None
    assert fuzz.compare([a], [a.astype(np.float64)]) is not None          # dtype
    assert fuzz.compare([np.arange(3)], [np.arange(3)[::-1].copy()]) is not None


def test_json_summary_names_each_finding_and_how_to_rerun_it(tmp_path, capsys):
    """--json's document: every outcome counted, and each finding with its (seed, index), its
    model and inputs, and a command that rebuilds exactly that case."""
    import argparse
    import json
    import shlex
    seed, index = 2, 195
    case = fuzz.make_case(seed, index)
    args = argparse.Namespace(seed=seed, start=0, case=[index], jobs=16, timeout=60.0,
                              prepare_timeout=300.0)
    found = fuzz._result(case, "UNCLEAN", "ValueError: duplicate value in 'axis'", 1.0,
                         {"traceback": "Traceback ..."})
    fine = fuzz._result(dict(case, index=7), "agree", "")
    path = tmp_path / "fuzz.json"
    fuzz._write_json(str(path), args, [found, fine], {index: case, 7: case}, 3.0, True)
    doc = json.loads(path.read_text())
    assert set(doc["counts"]) == set(fuzz.OUTCOMES)
    assert doc["counts"]["UNCLEAN"] == 1 and doc["counts"]["agree"] == 1 and doc["complete"]
    (finding,) = doc["findings"]
    assert (finding["seed"], finding["index"], finding["outcome"]) == (seed, index, "UNCLEAN")
    assert "ReduceMin" in finding["model"] and finding["traceback"] == "Traceback ..."
    assert finding["inputs"] == [{"shape": list(a.shape), "dtype": str(a.dtype)}
                                 for a in case["inputs"]]
    # The rerun command rebuilds the same case (--show prints it without running anything).
    argv = shlex.split(finding["rerun"])
    assert argv[:3] == ["python", "-m", "onnxjit.fuzz"]
    capsys.readouterr()
    assert fuzz.main(argv[3:] + ["--show"]) == 0
    shown = capsys.readouterr().out
    assert f"seed {seed} case {index}:" in shown and finding["model"].strip() in shown


def test_cli_runs_one_case_by_seed_and_index(tmp_path):
    """`--seed S --case I --json F` runs exactly that case in a worker and writes the summary."""
    import json
    index = next(i for i in range(40) if fuzz.make_case(SEED, i)["kind"] == "graph")
    path = tmp_path / "one.json"
    code = fuzz.main(["--seed", str(SEED), "--case", str(index), "--json", str(path),
                      "--prepare-timeout", "600"])
    doc = json.loads(path.read_text())
    assert code == 0 and doc["complete"] and doc["case_indices"] == [index]
    assert [r["index"] for r in doc["results"]] == [index]
    assert sum(doc["counts"].values()) == 1 and doc["findings"] == []


def test_nan_propagated_by_a_max_pool_is_not_a_finding():
    """seed 8 case 96: a NaN input of a dilated 3-D MaxPool; the reference and ONNX Runtime skip
    it inside a window, onnxjit propagates it. Only onnxjit's NaN against a number matches, and
    only for a case whose NaN input reaches a max pool."""
    case = fuzz.make_case(8, 96)
    assert fuzz._nan_into_max_pool(case)
    clean = [np.nan_to_num(a) for a in case["inputs"]]
    assert not fuzz._nan_into_max_pool(dict(case, inputs=clean))
    oracle = np.array([1.0, 2.0, np.nan, 4.0], np.float32)
    propagated = np.array([1.0, np.nan, np.nan, 4.0], np.float32)
    assert fuzz.compare([oracle], [propagated]) is not None
    assert fuzz.compare([oracle], [propagated], nan_propagates=True) is None
    # a number where the oracle has NaN, or a wrong number, still differs
    assert fuzz.compare([oracle], [np.array([1.0, 2.0, 3.0, 4.0], np.float32)],
                        nan_propagates=True) is not None
    assert fuzz.compare([oracle], [np.array([1.0, np.nan, np.nan, 5.0], np.float32)],
                        nan_propagates=True) is not None
    ref = {"ok": [oracle]}
    assert fuzz.classify(ref, {"ok": [propagated]}, None, False, True)[0] == "agree"


def test_a_model_casting_to_float32_is_compared_at_float32_tolerance():
    """seed 7 case 1363: LinearAttention's expanded body casts its float64 inputs to float32, so
    its float64 outputs hold float32 values; the reference and ONNX Runtime themselves differ
    past float64's tolerance there (one of them is not wrong: the model is float32 inside)."""
    case = fuzz.make_case(7, 1363)
    assert case["inputs"][0].dtype == np.float64
    assert fuzz._narrowest_cast(case) == np.float32       # a Cast inside the Scan body
    ref = fuzz._run_reference(case["model"], case["inputs"])
    ort = fuzz._run_ort(case["model"], case["inputs"])
    assert all(np.array_equal(np.asarray(o).astype(np.float32), o) for o in ref + ort)
    assert fuzz.compare(ref, ort) is not None
    assert fuzz.compare(ref, ort, narrow=np.float32) is None
    worse = [np.asarray(o) * (1 + 1e-2) for o in ort]           # still a real difference
    assert fuzz.compare(ref, worse, narrow=np.float32) is not None


def test_no_verdict_when_the_oracles_themselves_differ():
    """seed 7 case 5445: Sin of an Exp near float32's overflow; one ulp of the exp turns into a
    different sine, and the reference and ONNX Runtime differ from each other there. A third
    answer is no finding, but one ONNX Runtime confirms against onnxjit still is."""
    ref = {"ok": [np.array([1.0, np.nan], np.float32)]}
    ort = {"ok": [np.array([1.0, -0.76], np.float32)]}
    jit = {"ok": [np.array([1.0, 0.47], np.float32)]}
    assert fuzz.classify(ref, jit, ort)[0] == "oracles differ"
    assert fuzz.classify(ref, jit, {"ok": ref["ok"]})[0] == "WRONG"
    assert fuzz.classify(ref, jit, {"ok": jit["ok"]})[0] == "agree"


def test_a_reference_answer_through_an_undefined_cast_is_no_oracle():
    """seed 7 case 6487: QuantizeLinear of an infinity; the reference's numpy cast of inf to an
    integer is undefined (numpy warns), and ONNX Runtime has no QuantizeLinear-28. The
    reference's answer is flagged, so a difference there is no finding; a reference that casts
    only finite values is an oracle as before."""
    from onnx import TensorProto, helper
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2])])
    model = helper.make_model(graph).SerializeToString()
    undefined = fuzz._attempt(fuzz._run_reference, model, [np.array([np.inf, 1.0], np.float32)])
    defined = fuzz._attempt(fuzz._run_reference, model, [np.array([2.0, 1.0], np.float32)])
    assert undefined.get("undefined") and not defined.get("undefined")
    jit = {"ok": [np.array([2**31 - 1, 1], np.int32)]}
    no_ort = {"error": {"type": "NotImplemented", "message": "NOT_IMPLEMENTED", "onnxjit": False}}
    if np.array_equal(undefined["ok"][0], jit["ok"][0]):      # the CPU's cast may saturate
        undefined["ok"] = [np.array([-2**31, 1], np.int32)]
    assert fuzz.classify(undefined, jit, no_ort)[0] == "oracles differ"
    assert fuzz.classify(dict(defined, ok=[np.array([7, 1], np.int32)]), jit, no_ort)[0] == "WRONG"
