"""Per kernel, onnxjit's time against ORT's time for the same ONNX nodes, 1 thread by default.

    python tools/node_profile.py MODEL [--runs 20] [--threads 1] [--top 25]

MODEL: a built-in model (`onnxjit.tools.models`, e.g. mobilenet, yolo_csp), a light model of the
onnx package (light_squeezenet) or a path to an .onnx file. onnxjit runs a profile=True build
(`rep.explain()`: microseconds per kernel call); ORT runs with its profiler, whose node events are
named after the node, or after the output for its NCHWc convolutions (``r1_nchwc``), so each
onnxjit kernel is matched to ORT's events by its nodes' names and outputs. Prints the totals and
the kernels that lose the most time to ORT's nodes (a row's ORT time is 0 where ORT fused the
node into a neighbour's kernel under another name). Needs onnxruntime (the bench extra).

Times are means over the runs. At 2 threads they move with the shared host's phases far more
than at 1 (MobileNet's kernels summed to 8.0 ms in one such profile, against a median of 5.3 ms
for whole runs back to back minutes later): rank 2-thread losses with it, measure them in
whole runs or with tools/ab_round_robin.py.
"""
import argparse
import collections
import json
import os
import re
import tempfile

import onnxjit  # noqa: F401  (first: it loads TBB before Numba picks its threading layer)
import numba
import onnx


def load(name):
    """A path, or a model of `onnxjit bench`'s built-in suite by name."""
    if os.path.exists(name):
        return onnx.load(name)
    from onnxjit.tools.models import builtin_suite
    found = builtin_suite(only=f"^{re.escape(name)}$")
    if not found:
        raise SystemExit(f"{name}: neither a file nor a model of the built-in suite")
    return found[0][1]


def onnxjit_times(model, inputs, runs):
    """[(kernel row, us per call)] of a profile build, after warm-up."""
    from onnxjit import backend
    rep = backend.prepare(model, profile=True, tiered=False)
    for _ in range(5):
        rep.run(inputs)
    rep.reset_profile()
    for _ in range(runs):
        rep.run(inputs)
    return [r for r in rep.explain() if r["us_per_call"]]


def ort_times(model, feeds, runs, threads):
    """{node or output name: us per run} from ORT's profiler."""
    import onnxruntime as ort
    from onnxjit.tools.bench import _copy_for_ort
    copy = _copy_for_ort(model)     # the model as `onnxjit bench` hands it to ORT
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="onnxjit-prof-"), "ort")
    session = ort.InferenceSession(copy.SerializeToString(), so,
                                   providers=["CPUExecutionProvider"])
    for _ in range(5):
        session.run(None, feeds)
    for _ in range(runs):
        session.run(None, feeds)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    per = collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")].replace("_nchwc", "")
            per[name] += e["dur"] / (runs + 5)
    return per


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    from onnxjit.inputs import model_inputs
    numba.set_num_threads(args.threads)
    model = load(args.model)
    feeds = model_inputs(model)
    rows = onnxjit_times(model, list(feeds.values()), args.runs)
    ort = ort_times(model, feeds, args.runs, args.threads)
    outputs = {n.name: list(n.output) for n in model.graph.node}
    table = []
    for r in rows:
        keys = set(r["nodes"]) | {o for n in r["nodes"] for o in outputs.get(n, [])}
        theirs = sum(ort.get(k, 0.0) for k in keys)
        table.append((r["us_per_call"] - theirs, r["us_per_call"], theirs, r))
    print(f"{args.model}, {args.threads} thread(s), {args.runs} runs: onnxjit "
          f"{sum(t[1] for t in table):.0f} us in kernels, ORT {sum(ort.values()):.0f} us in nodes")
    print(f"{'jit - ort':>10} {'jit us':>8} {'ort us':>8}  kernel (ONNX ops) output shapes")
    for delta, ours, theirs, r in sorted(table, key=lambda t: -t[0])[:args.top]:
        print(f"{delta:10.0f} {ours:8.0f} {theirs:8.0f}  {r['kernel']} "
              f"({'+'.join(r['op_types'])}) {r['output_shapes']}")


if __name__ == "__main__":
    main()
