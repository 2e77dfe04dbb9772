"""Command line: `onnxjit demo [MODEL.onnx]`, `onnxjit bench [MODEL.onnx ...]`,
`onnxjit show MODEL.onnx`, `onnxjit warmup`, `onnxjit conformance ...` (also as
`python -m onnxjit ...`, through the shim onnxjit/__main__.py)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from ..inputs import random_inputs


def default_model():
    """(label, ModelProto): the light ResNet-50 that ships inside the onnx package, with seeded
    random weights (the shipped ones are all 0.02, which makes every output 0.001)."""
    from .models import light_model
    return "light ResNet-50 (onnx package; seeded random weights)", light_model("light_resnet50")


def time_calls(fn, repeat=30, warmup=3):
    """Median seconds per call."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def demo(args):
    import onnx

    import onnxjit.backend as backend
    label, model = (args.model, onnx.load(args.model)) if args.model else default_model()
    print(f"model: {label}")
    bar = ProgressBar("compiling")
    start = time.perf_counter()
    rep = backend.prepare(model, "CPU", progress=bar)
    inputs = random_inputs(rep)
    first = rep.run(inputs)
    first_s = time.perf_counter() - start
    print(f"first result: {first_s:.2f} s after prepare started, on the {rep.tier} tier "
          f"({TIER_NOTES[rep.tier]})", flush=True)
    _print_outputs(rep.output_names, first)
    if rep.tier != "compiled":
        rep.wait()
        bar.close()
        print(f"optimized code in place: {time.perf_counter() - start:.2f} s after prepare "
              "started (now in the disk cache: the next process loads it in about a second)")
        outputs = rep.run(inputs)
        worst = max(float(np.max(np.abs(a.astype(np.float64) - b), initial=0)
                          / max(float(np.max(np.abs(b), initial=0)), 1e-30))
                    for a, b in zip(outputs, first))
        print(f"compiled outputs against the first result: max |difference| / max |value| "
              f"{worst:.2g}")
    compiled = rep.compiled()
    latency = time_calls(lambda: rep.run(inputs), repeat=args.repeat)
    print(f"rep.run median latency: {latency * 1e3:.3f} ms over {args.repeat} runs")
    print(f"kernels: {len(compiled.kernels)}; cache: {rep.cache_info()}; "
          f"generated code in {os.path.dirname(compiled.path)}")
    lines = compiled.source.splitlines()
    print(f"--- generated code ({len(lines)} lines; rep.source() has it all) ---")
    print("\n".join(lines[:args.lines]))
    return 0


TIER_NOTES = {
    "reference": "onnx's ReferenceEvaluator, while Numba compiles the optimized code in a worker "
                 "process",
    "driver": "compiled code calling the cached library kernels from Python, while the graph's "
              "njit entry compiles in a worker process",
    "compiled": "the optimized code, from the disk cache"}


def _print_outputs(names, outputs):
    for name, out in zip(names, outputs):
        print(f"  output {name!r}: {out.dtype}{list(out.shape)} mean={out.mean():.6g} "
              f"argmax={int(np.argmax(out))}")


class ProgressBar:
    """A progress callback (done, total, name) for prepare: a bar on a terminal, one line per
    compiled call elsewhere (CI logs)."""

    def __init__(self, what, stream=None, width=30):
        self.what, self.stream, self.width = what, stream or sys.stderr, width
        self.tty = self.stream.isatty()
        self.shown = False
        self.start = time.perf_counter()

    def __call__(self, done, total, name):
        from ..tiers import kernel_label
        elapsed = time.perf_counter() - self.start
        if not name:
            text = f"{self.what}: {total} of {total} done"
        else:
            text = f"{self.what} {done + 1} of {total}: {kernel_label(name)}"
        if self.tty:
            filled = self.width * done // max(total, 1)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[{bar}] {text} ({elapsed:.0f} s)\033[K")
        else:
            self.stream.write(f"  {text} ({elapsed:.0f} s)\n")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def warmup(args):
    """Compile the library kernels that the given models (default: the built-in benchmark suite)
    use into the disk caches, one worker process per model, `--jobs` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    import onnx

    from ..inputs import model_inputs
    from ..pipeline import value_inputs
    from ..tiers import remove_job, run_worker, write_job
    if args.models:
        models = [(path, onnx.load(path)) for path in args.models]
    else:
        from .models import builtin_suite
        models = builtin_suite()
    start = time.perf_counter()

    def compile_one(item):
        name, model = item
        began = time.perf_counter()
        # the shapes a run with symbolic dims at 1 has; inputs the plan reads as values (an If's
        # condition, a shape) from the same seeded random inputs the demo and bench use
        feeds = model_inputs(model)
        signature = tuple((k, v.shape, v.dtype) for k, v in feeds.items())
        try:
            values = value_inputs(model, signature, feeds)
        except Exception as exc:    # the model's own error, named; the other models go on
            print(f"  {name}: FAILED ({type(exc).__name__}: {exc})", flush=True)
            return False
        job = write_job(model, signature, values, name, {})
        ok = run_worker(job, lambda done, total, kernel: None, parts=1)
        if ok:
            remove_job(job)
        status = "ok" if ok else "FAILED (see the log beside the job file)"
        print(f"  {name}: {time.perf_counter() - began:.1f} s {status}", flush=True)
        return ok

    print(f"warming the kernel cache with {len(models)} model(s), {args.jobs} at a time")
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(compile_one, models))
    print(f"done in {time.perf_counter() - start:.1f} s: {sum(results)} of {len(results)} ok")
    return 0 if all(results) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="onnxjit", description="ONNX -> Numba JIT backend")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="prepare and run a model (default: light ResNet-50 from onnx)")
    p.add_argument("model", nargs="?", help="an .onnx file")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--lines", type=int, default=40, help="lines of generated code to show")
    p.set_defaults(func=demo)
    c = sub.add_parser("conformance", help="run the ONNX backend test suite", add_help=False)
    c.set_defaults(func=None)
    w = sub.add_parser("warmup", help="precompile the library kernels of the built-in models "
                       "(or MODEL.onnx files) into the disk cache, in parallel processes")
    w.add_argument("models", nargs="*", help=".onnx files (default: the built-in suite)")
    w.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    w.set_defaults(func=warmup)
    b = sub.add_parser("bench", help="benchmark onnxjit against ONNX Runtime", add_help=False)
    b.set_defaults(func=None)
    s = sub.add_parser("show", help="print a model's fusion plan and generated source",
                       add_help=False)
    s.set_defaults(func=None)
    args, rest = parser.parse_known_args(argv)
    if args.command == "conformance":
        from .conformance import main as conformance_main
        return conformance_main(rest)
    if args.command == "bench":
        from .bench import main as bench_main
        return bench_main(rest)
    if args.command == "show":
        from .show import show_main
        return show_main(rest)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
