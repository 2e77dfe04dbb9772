"""`onnxjit show MODEL.onnx [--dim N=V] [--profile]`: a model's fusion plan and generated source
on the terminal (the tables come from the library's onnxjit/explain.py)."""
from __future__ import annotations

import argparse
import sys

from ..explain import count_nodes, explain, format_table, plain, signature_text
from ..inputs import parse_dims, random_inputs


def show_main(argv=None):
    """`onnxjit show MODEL.onnx [--dim N=V] [--profile]`: print the fusion plan and generated source."""
    args = _show_parser().parse_args(argv)
    from ..backend import prepare
    from ..errors import OnnxJitError
    try:
        dims = parse_dims(args.dim)
        rep = prepare(args.model, profile=args.profile, tiered=False)
        _run_for_show(rep, dims, args.runs)
        compiled = rep.compiled()
    except (OnnxJitError, ValueError, LookupError) as exc:
        print(f"onnxjit show: {plain(exc)}", file=sys.stderr)
        return 1
    print(summary_text(rep, compiled))
    print()
    print(format_table(explain(rep), width=args.width))
    if not args.no_source:
        print()
        print(compiled.source)
    return 0


def _show_parser():
    p = argparse.ArgumentParser(prog="onnxjit show", description="print the fusion plan and "
                                "generated source of an ONNX model")
    p.add_argument("model", help="an .onnx file")
    p.add_argument("--dim", action="append", default=[], metavar="N=V",
                   help="value of a symbolic input dimension (repeatable; unnamed dims are 1)")
    p.add_argument("--profile", action="store_true", help="time each kernel over --runs calls")
    p.add_argument("--runs", type=int, default=20, help="calls to time with --profile")
    p.add_argument("--width", type=int, default=60, help="widest cell of the plan table")
    p.add_argument("--no-source", action="store_true", help="print the plan only")
    return p


def _run_for_show(rep, dims, runs):
    """Compile for random inputs, then time `runs` calls when profiling (the first call, which pays
    one-time costs, is left out). Random data may make a run fail once compiled: then warn."""
    if rep.signatures() and not rep.profiling and not dims:
        return
    inputs = random_inputs(rep, dims)
    try:
        rep.run(inputs)
        if rep.profiling:
            rep.compiled().profile.clear()
            for _ in range(runs):
                rep.run(inputs)
    except Exception as exc:
        if not rep.signatures():
            raise
        print(f"warning: running on random inputs failed ({plain(exc)}); "
              f"showing the compiled plan anyway", file=sys.stderr)


def summary_text(rep, compiled):
    """A few lines: model, opsets, node count, signature, compile time, cache."""
    model, graph = rep.model, rep.model.graph
    opsets = ", ".join(f"{e.domain or 'ai.onnx'} {e.version}" for e in model.opset_import)
    return "\n".join([
        f"model: {plain(graph.name or '(unnamed)')}  opsets: {plain(opsets)}  "
        f"nodes: {count_nodes(graph)}",
        f"signature: {plain(signature_text(compiled.signature))}",
        f"kernels: {len(compiled.kernels)}  compile: {compiled.compile_seconds:.3f} s  "
        f"module: {compiled.path}"])


if __name__ == "__main__":
    sys.exit(show_main())
