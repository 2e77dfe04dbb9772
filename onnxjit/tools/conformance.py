"""Run the official ONNX backend test suite through onnxjit and report, per kind.

    python -m onnxjit.conformance [-k PATTERN] [-j JOBS] [--json FILE] [--failures]
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import sys
import time
import traceback
import unittest

KINDS = {"Node": "node", "Real": "real", "Simple": "simple",
         "PyTorchConverted": "pytorch-converted", "PyTorchOperator": "pytorch-operator"}

_ITEMS = None


def _items():
    """{test name: (kind, TestItem)} of the CPU tests in onnx's BackendTest."""
    global _ITEMS
    if _ITEMS is None:
        import onnx.backend.test
        import onnxjit.backend
        suite = onnx.backend.test.BackendTest(onnxjit.backend, "onnxjit_conformance")
        _ITEMS = {name: (KINDS.get(kind, kind), item)
                  for kind, items in suite._test_items.items() for name, item in items.items()
                  if name.endswith("_cpu")}
    return _ITEMS


def _op_types(model):
    from onnx import ModelProto, NodeProto
    if isinstance(model, NodeProto):
        return [model.op_type]
    if isinstance(model, ModelProto):
        return sorted({n.op_type for n in model.graph.node})
    return []


def run_test(name):
    """(name, kind, status, message, op types, Python segments) of one test; status is pass,
    fail or skip; the Python segments are "op: why" for each node the staged driver ran as
    Python (sequences, control flow decided at run time: onnxjit/staged.py), empty when every
    node ran in compiled code."""
    import warnings
    from onnxjit import staged
    kind, item = _items()[name]
    status, message = "pass", ""
    staged.python_segments.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            item.func(None)
        except unittest.SkipTest as exc:
            status, message = "skip", str(exc)
        except Exception as exc:  # the suite raises AssertionError and our errors alike
            status = "fail"
            message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
            if os.environ.get("ONNXJIT_CONFORMANCE_TRACEBACK"):
                message += "\n" + traceback.format_exc()
    segments = sorted(f"{op}: {why}" for op, why in staged.python_segments)
    return (name, kind, status, message, _op_types(item.proto[0] if item.proto else None),
            segments)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m onnxjit.conformance", description=__doc__)
    parser.add_argument("-k", "--pattern", default="", help="regex on test names")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="write per-test results to this file")
    parser.add_argument("--failures", action="store_true", help="list each failing test")
    parser.add_argument("--write-exclusions", metavar="FILE",
                        help="write the failing tests, each with its error as the reason")
    args = parser.parse_args(argv)
    os.environ["ONNXJIT_TIERED"] = "0"    # onnxjit's compiled code answers, not the reference tier
    names = sorted(n for n in _items() if re.search(args.pattern, n))
    start = time.perf_counter()
    results = run_all(names, args.jobs)
    report(results, time.perf_counter() - start, args.failures)
    if args.write_exclusions:
        write_exclusions(results, args.write_exclusions)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(zip(("name", "kind", "status", "message", "ops", "python_segments"),
                                r)) for r in results],
                      f, indent=1)
    return 0


def run_all(names, jobs):
    """Results of every test, in worker processes. A crash in native code kills a worker and
    breaks the pool: the tests it took down are rerun one process each, and a test that
    crashes on its own counts as failed."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    results, broken = [], []
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        for name, future in [(n, pool.submit(run_test, n)) for n in names]:
            try:
                results.append(future.result())
            except BrokenProcessPool:
                broken.append(name)
            _progress(len(results), len(names))
    with ThreadPoolExecutor(jobs) as threads:
        results.extend(threads.map(_run_isolated, broken))
    return results


def _progress(done, total):
    if sys.stderr.isatty():
        print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True)


def _run_isolated(name, timeout=900):
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=lambda: send.send(run_test(name)))
    child.start()
    result = receive.recv() if receive.poll(timeout) else None
    child.join(5)
    if result is None:
        child.kill()
        return name, _items()[name][0], "fail", f"crashed (exit code {child.exitcode})", [], []
    return result


def write_exclusions(results, path):
    """The exclusion file the test suite reads: `test_name  # why it does not pass yet`."""
    lines = ["# Backend-suite tests onnxjit does not pass yet, each with the reason (its error).",
             "# Written by `python -m onnxjit.conformance --write-exclusions`; it only shrinks."]
    for name, _, status, message, *_ in sorted(results):
        if status != "pass":
            reason = " ".join(message.split())[:160] or status
            lines.append(f"{name}  # {reason}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def report(results, seconds, list_failures=False):
    """Print passed/failed per kind, the op types of failing node tests, and the wall time."""
    by_kind = collections.defaultdict(collections.Counter)
    why = collections.Counter()
    for _, kind, status, _, _, segments in results:
        by_kind[kind][status] += 1
        if status == "pass":
            by_kind[kind]["python" if segments else "compiled"] += 1
            why.update(set(segments))
    print(f"\n{'kind':<20}{'passed':>8}{'failed':>8}{'skipped':>8}{'compiled':>10}{'python':>8}")
    total = collections.Counter()
    for kind in sorted(by_kind):
        c = by_kind[kind]
        total.update(c)
        print(f"{kind:<20}{c['pass']:>8}{c['fail']:>8}{c['skip']:>8}{c['compiled']:>10}"
              f"{c['python']:>8}")
    print(f"{'total':<20}{total['pass']:>8}{total['fail']:>8}{total['skip']:>8}"
          f"{total['compiled']:>10}{total['python']:>8}")
    print("(compiled: passing tests whose every node ran in Numba-compiled code, data-dependent"
          " sizes included (compiled kernels between compiled segments); python: passing tests"
          " with a Python segment of the staged driver, onnxjit/staged.py)")
    if why:
        print("Python segments (passing tests):", "; ".join(
            f"{w} ({n})" for w, n in sorted(why.items())))
    failing_ops = collections.Counter(op for _, kind, status, _, ops, _ in results
                                      if status != "pass" and kind == "node" for op in ops)
    print("failing op types (node tests):", ", ".join(f"{op}({n})" for op, n in
                                                       sorted(failing_ops.items())))
    if list_failures:
        for name, _, status, message, *_ in sorted(results):
            if status != "pass":
                print(f"{name}: {status}: {message}")
    print(f"{len(results)} tests in {seconds:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
