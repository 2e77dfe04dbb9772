"""Command line: `onnxjit demo [MODEL.onnx]`, `onnxjit bench [MODEL.onnx ...]`,
`onnxjit show MODEL.onnx`, `onnxjit conformance ...` (also as `python -m onnxjit ...`)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


def default_model():
    """(label, ModelProto): the light ResNet-50 that ships inside the onnx package, with seeded
    random weights (the shipped ones are all 0.02, which makes every output 0.001)."""
    from .models import light_model
    return "light ResNet-50 (onnx package; seeded random weights)", light_model("light_resnet50")


def random_inputs(rep, dims=None, seed=0):
    """Random arrays of the model's declared input shapes (symbolic dims from `dims`, else 1)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in rep.inputs:
        shape = [d if isinstance(d, int) else (dims or {}).get(d, 1) for d in (spec.dims or ())]
        dtype = spec.dtype or np.dtype(np.float32)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(0, 10, shape).astype(dtype))
    return arrays


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
    _say_if_kernels_compile()
    start = time.perf_counter()
    rep = backend.prepare(model, "CPU")
    inputs = random_inputs(rep)
    outputs = rep.run(inputs)
    prepare_s = time.perf_counter() - start
    for name, out in zip(rep.output_names, outputs):
        print(f"output {name!r}: {out.dtype}{list(out.shape)} mean={out.mean():.6g} "
              f"argmax={int(np.argmax(out))}")
    compiled = rep.compiled()
    print(f"prepare + first run: {prepare_s:.2f} s (compile {compiled.compile_seconds:.2f} s; "
          f"a second process loads the machine code from {os.path.dirname(compiled.path)})")
    latency = time_calls(lambda: rep.run(inputs), repeat=args.repeat)
    print(f"rep.run median latency: {latency * 1e3:.3f} ms over {args.repeat} runs")
    print(f"kernels: {len(compiled.kernels)}; cache: {rep.cache_info()}")
    lines = compiled.source.splitlines()
    print(f"--- generated code ({len(lines)} lines; rep.source() has it all) ---")
    print("\n".join(lines[:args.lines]))
    return 0


def _say_if_kernels_compile():
    """On the first run after installing, Numba compiles the library kernels (about two minutes
    for ResNet-50's on a 2-core VM; cached afterwards): say so rather than look hung."""
    import glob

    from .kernels import sgemm
    folder = sgemm.sgemm_packed._cache.cache_path     # where Numba keeps the kernels' code
    if not glob.glob(os.path.join(folder, "sgemm.*.nbi")):
        print("first run here: Numba compiles onnxjit's library kernels once (a minute or two); "
              "later runs load them from its cache", flush=True)


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
        from .explain import show_main
        return show_main(rest)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
