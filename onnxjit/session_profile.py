"""A session's profiling (Chrome-trace JSON, as ORT's end_profiling writes) and optimized-model
output (the model onnxjit compiles and the generated source beside it)."""
from __future__ import annotations

import json
import os
import threading
import time

import onnx

# Profiled modules count into one PROFILE dict per generated module, which sessions of the same
# model share: profiled runs take turns so each run's counts are its own.
_PROFILE_LOCK = threading.Lock()


def compiled_graphs(rep):
    """The rep's CompiledGraphs, oldest first (none for a CUDA rep: its executables have no
    per-kernel profile or single module source)."""
    return [g for g in getattr(rep, "_cache", {}).values() if hasattr(g, "kernels")]


def _counts(rep):
    """{(module id, kernel): (seconds, calls)} over every profiled graph the rep holds."""
    counts = {}
    for graph in compiled_graphs(rep):
        for name, (seconds, calls) in (graph.profile or {}).items():
            counts[id(graph.module), name] = (seconds, calls, graph)
    return counts


class Profiler:
    """Collects ORT-style trace events: one per kernel call (from a profile=True rep's per-kernel
    totals, differenced around each run), one per run and one for the session's preparation."""

    def __init__(self, prefix, provider):
        self.prefix, self.provider = prefix, provider
        self.start_ns = time.time_ns()
        self._t0 = time.perf_counter()
        self.events = []

    def _us(self, t):
        return int(round((t - self._t0) * 1e6))

    def event(self, name, start, seconds, cat="Session", args=None):
        self.events.append({"cat": cat, "pid": os.getpid(), "tid": threading.get_native_id(),
                            "dur": int(round(seconds * 1e6)), "ts": self._us(start), "ph": "X",
                            "name": name, "args": args or {}})

    def run(self, call, rep):
        """call() (which runs `rep`), recording its kernels' events; returns what it returns."""
        with _PROFILE_LOCK:
            before = _counts(rep)
            start = time.perf_counter()
            outs = call()
            seconds = time.perf_counter() - start
            after = _counts(rep)
        t = start
        for key, (total, calls, graph) in after.items():
            old_total, old_calls, _ = before.get(key, (0.0, 0, None))
            for _ in range(calls - old_calls):      # one event per call of the kernel
                dur = (total - old_total) / (calls - old_calls)
                self.event(key[1], t, dur, "Node", self._kernel_args(graph, key[1]))
                t += dur
        self.event("model_run", start, seconds)
        return outs

    def _kernel_args(self, graph, name):
        kernel = next((k for k in graph.kernels if k.name == name), None)
        nodes = kernel.nodes if kernel is not None else []
        return {"op_name": "+".join(dict.fromkeys(op for _, op in nodes)),
                "node_names": [n for n, _ in nodes], "provider": self.provider}

    def write(self):
        """Write the events to '<prefix>_<date>_<time>.json' (ORT's naming); the path."""
        now = time.time()
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(now))
        path = f"{self.prefix}_{stamp}_{int(now * 1000) % 1000:03d}.json"
        with open(path, "w") as f:
            json.dump(self.events, f)
        return path


def write_optimized(path, model, rep):
    """Save the model onnxjit compiles at `path` and the generated source of every signature
    compiled so far beside it (`path` with the suffix '.py'); the number of signatures written."""
    onnx.save(model, path)
    graphs = compiled_graphs(rep)
    if graphs:
        parts = [f"# ---- signature {ascii([(n, list(s), str(d)) for n, s, d in g.signature])} "
                 f"({g.tier})\n{g.source}" for g in graphs]
        with open(os.path.splitext(path)[0] + ".py", "w") as f:
            f.write("\n\n".join(parts))
    return len(graphs)
