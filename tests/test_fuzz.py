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
