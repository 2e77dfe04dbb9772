"""`onnxjit bench --device CUDA`: the built-in suite's generated models on the GPU, onnxjit
against PyTorch eager and torch.compile running the same graphs with the same weights.

Each engine's latency is the median of repeated runs, each run followed by a device
synchronization (inputs already on the device). onnxjit is also timed with numpy inputs and
outputs (copies included). PyTorch runs float32 without TF32, as onnxjit and cuBLAS do. A
torch.compile failure is reported in its cell, never stops the run. Prints "no GPU" and exits 0
where there is none (the simulator does not count).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

import numpy as np

COMPILE_BUDGET_S = 45   # torch.compile is skipped for the remaining models past this


def parse_args(argv):
    p = argparse.ArgumentParser(prog="onnxjit bench --device CUDA",
                                description=__doc__.splitlines()[0])
    p.add_argument("--device", default="CUDA")
    p.add_argument("--only", metavar="REGEX", help="only the models whose name matches")
    p.add_argument("--repeat", type=int, default=50, help="timed runs per engine (default 50)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    return p.parse_args(argv)


def gpu_missing(device):
    """None when `device` is a real GPU here, else why not."""
    from ..cuda.target import available, simulator
    try:
        import numba.cuda  # noqa: F401
    except ImportError:
        return "numba-cuda is not installed (pip install 'onnxjit[cuda]')"
    if simulator():
        return "NUMBA_ENABLE_CUDASIM is set (the simulator is not a GPU)"
    if not available():
        return f"no CUDA GPU or driver for {device}"
    return None


def main(argv=None):
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    why = gpu_missing(args.device)
    if why:
        print(f"onnxjit bench --device {args.device}: no GPU ({why}); nothing to measure")
        return 0
    from . import models
    suite = [(name, build()) for name, build in models.BUILDERS.items()]
    if args.only:
        suite = [(n, m) for n, m in suite if re.search(args.only, n)]
    torch = _torch()
    rows, start = [], time.monotonic()
    from ..cuda import unsupported
    for name, model in suite:
        missing = unsupported(model)
        if missing:     # e.g. the tree ensembles: no CUDA lowering yet
            print(f"{name:18s} skipped: the CUDA target has no lowering for "
                  f"{', '.join(op for _, op, _ in missing)}", flush=True)
            continue
        compile_ok = not args.no_compile and time.monotonic() - start < COMPILE_BUDGET_S
        rows.append(bench_model(name, model, args, torch, compile_ok))
        print(format_row(rows[-1]), flush=True)
    report = {"device": _device_name(), "torch": getattr(torch, "__version__", None),
              "rows": rows, "date": time.strftime("%Y-%m-%dT%H:%M:%S")}
    print()
    print(format_table(rows, report))
    path = args.json or (os.path.join(os.environ["OUT"], "bench_cuda.json")
                         if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)
        print(f"wrote {path}")
    return 0


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def _device_name():
    from numba import cuda
    return cuda.get_current_device().name.decode() if isinstance(
        cuda.get_current_device().name, bytes) else str(cuda.get_current_device().name)


def median_ms(fn, sync, repeat, warmup=5):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def bench_model(name, model, args, torch, compile_ok):
    from numba import cuda
    import onnxjit.backend as backend
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype(np.float32) for i in model.graph.input]
    row = {"model": name}
    t = time.perf_counter()
    rep = backend.prepare(model, args.device)
    dev = [cuda.to_device(a) for a in feeds]
    out = rep.run(dev)[0]
    rep.synchronize()
    row["prepare_s"] = round(time.perf_counter() - t, 2)
    ours = out.copy_to_host()
    row["onnxjit_ms"] = median_ms(lambda: rep.run(dev), rep.synchronize, args.repeat)
    row["onnxjit_host_ms"] = median_ms(lambda: rep.run(feeds), lambda: None, args.repeat)
    exe = rep.compiled()
    row["launches"] = len(exe.launches)
    row["cuda_graph"] = exe.graph is not None
    if exe.graph_error or exe.bind_errors:
        row["graph_error"] = f"{exe.graph_error} {exe.bind_errors[:2]}"
    # the same launches without the graph (bound kernels launched one by one)
    plain = backend.prepare(model, args.device, cuda_graphs=False)
    plain.run(dev)
    plain.synchronize()
    row["onnxjit_nograph_ms"] = median_ms(lambda: plain.run(dev), plain.synchronize, args.repeat)
    # launch overhead: the host time of one run call (no synchronization), graph replayed
    rep.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        rep.run(dev)
    row["onnxjit_call_us"] = (time.perf_counter() - t) / 200 * 1e6
    rep.synchronize()
    if torch is None:
        row["torch"] = "PyTorch is not installed"
        return row
    try:
        net = torch_module(model, torch).cuda().eval()
    except KeyError as exc:
        row["torch"] = str(exc)
        return row
    xs = [torch.from_numpy(a).cuda() for a in feeds]
    with torch.no_grad():
        ref = net(*xs)[0].float().cpu().numpy()
        row["max_abs_diff"] = float(np.abs(ref - ours).max())
        row["eager_ms"] = median_ms(lambda: net(*xs), torch.cuda.synchronize, args.repeat)
        if compile_ok:
            try:
                compiled = torch.compile(net)
                compiled(*xs)
                row["compile_ms"] = median_ms(lambda: compiled(*xs), torch.cuda.synchronize,
                                              args.repeat)
            except Exception as exc:     # reported, never fatal
                row["compile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            try:    # PyTorch's own CUDA graphs: the like-for-like comparison with graph replay
                graphed = torch.compile(net, mode="reduce-overhead")
                for _ in range(3):
                    graphed(*xs)
                row["compile_graphs_ms"] = median_ms(lambda: graphed(*xs),
                                                     torch.cuda.synchronize, args.repeat)
            except Exception as exc:
                row["compile_graphs_error"] = (f"{type(exc).__name__}: "
                                               f"{str(exc).splitlines()[0][:120]}")
        else:
            row["compile_error"] = "skipped (--no-compile or time budget)"
    for key in ("eager_ms", "compile_ms", "compile_graphs_ms"):
        if key in row:
            row[key.replace("_ms", "_ratio")] = row["onnxjit_ms"] / row[key]
    return row


def _fmt(v, digits=3):
    return "-" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def format_row(r):
    return (f"{r['model']:<18} onnxjit {_fmt(r.get('onnxjit_ms'))} ms "
            f"(host {_fmt(r.get('onnxjit_host_ms'))}, no graph {_fmt(r.get('onnxjit_nograph_ms'))},"
            f" call {_fmt(r.get('onnxjit_call_us'), 1)} us, graph {r.get('cuda_graph')})"
            f"  eager {_fmt(r.get('eager_ms'))}  compile {_fmt(r.get('compile_ms'))}"
            f"  compile+graphs {_fmt(r.get('compile_graphs_ms'))}"
            f"  {r.get('compile_error', '')}")


def format_table(rows, report):
    head = (f"onnxjit bench --device CUDA on {report['device']}, torch {report['torch']}; "
            "median ms of synchronized runs, device-resident inputs; "
            "ratio = onnxjit / torch (below 1: onnxjit faster)")
    lines = [head, "| model | onnxjit ms | no graph ms | run() call us | onnxjit host-io ms "
                   "| torch eager ms | torch.compile ms | compile reduce-overhead ms | vs eager "
                   "| vs compile | vs reduce-overhead | max abs diff | launches |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join([
            r["model"], _fmt(r.get("onnxjit_ms")), _fmt(r.get("onnxjit_nograph_ms")),
            _fmt(r.get("onnxjit_call_us"), 1), _fmt(r.get("onnxjit_host_ms")),
            _fmt(r.get("eager_ms")), _fmt(r.get("compile_ms")) if "compile_ms" in r else "n/a",
            _fmt(r.get("compile_graphs_ms")),
            _fmt(r.get("eager_ratio"), 2), _fmt(r.get("compile_ratio"), 2),
            _fmt(r.get("compile_graphs_ratio"), 2),
            _fmt(r.get("max_abs_diff"), 6), str(r.get("launches", "-"))]) + " |")
    errors = [f"torch.compile {r['model']}: {r['compile_error']}" for r in rows
              if "compile_error" in r]
    errors += [f"CUDA graph {r['model']}: {r['graph_error']}" for r in rows if "graph_error" in r]
    errors += [f"{r['model']}: {r['torch']}" for r in rows if "torch" in r]
    return "\n".join(lines + errors)


# -- the same graphs in PyTorch -------------------------------------------------------------------
def torch_module(model, torch):
    """A torch.nn.Module running `model`'s nodes in order with its weights (the ops of the
    built-in suite: the generated models only)."""
    from onnx import numpy_helper
    from ..ir import attributes
    F = torch.nn.functional
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    ops = {
        "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
        "Sqrt": torch.sqrt, "Erf": torch.erf, "Relu": torch.relu, "MatMul": torch.matmul,
        "Reshape": lambda x, s: x.reshape(s),
        "Transpose": lambda x, perm: x.permute(*perm),
        "Softmax": lambda x, axis=-1: torch.softmax(x, axis),
        "LayerNormalization": lambda x, s, b, axis=-1, epsilon=1e-5: F.layer_norm(
            x, x.shape[axis:], s, b, epsilon),
        "Conv": lambda x, w, b=None, pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1),
        group=1, kernel_shape=None: F.conv2d(x, w, b, tuple(strides), tuple(pads[:2]),
                                             tuple(dilations), group),
        "BatchNormalization": lambda x, s, b, m, v, epsilon=1e-5: F.batch_norm(
            x, m, v, s, b, False, 0.0, epsilon),
        "MaxPool": lambda x, kernel_shape, strides=None: F.max_pool2d(x, kernel_shape, strides),
        "GlobalAveragePool": lambda x: x.mean((2, 3), keepdim=True),
        "Flatten": lambda x, axis=1: torch.flatten(x, axis),
        "Gemm": lambda a, b, c, transB=0: F.linear(a, b, c) if transB else a @ b + c,
        "HardSwish": F.hardswish,
        "Clip": lambda x, lo=None, hi=None: torch.clamp(x, lo, hi),
        "Sigmoid": torch.sigmoid, "Tanh": torch.tanh,
    }
    missing = sorted({n.op_type for n in model.graph.node} - set(ops))
    if missing:
        raise KeyError(f"no PyTorch mapping for {', '.join(missing)}")
    steps = [(ops[n.op_type], list(n.input), n.output[0], attributes(n)) for n in model.graph.node]
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.names = {}
            for i, (name, array) in enumerate(consts.items()):
                if array.dtype == np.int64:        # shapes: Python tuples, not tensors
                    self.names[name] = tuple(int(d) for d in array.reshape(-1))
                else:
                    self.register_buffer(f"c{i}", torch.from_numpy(array.copy()))
                    self.names[name] = f"c{i}"

        def forward(self, *xs):
            env = dict(zip(inputs, xs))
            for name, ref in self.names.items():
                env[name] = getattr(self, ref) if isinstance(ref, str) else ref
            for fn, ins, out, attrs in steps:
                env[out] = fn(*[env[i] for i in ins], **attrs)
            return tuple(env[o] for o in outputs)

    return Graph()
