"""`onnxjit bench`: onnxjit against ONNX Runtime (ORT), model by model, in one process.

For each model: random inputs of the declared shapes; onnxjit cold prepare (a fresh, private
ONNXJIT_CACHE_DIR) and warm prepare (a second process on the same cache dir, so Numba's disk cache is
what is measured); ORT session creation; outputs compared with ORT's (where they differ,
onnx.reference decides: "ort-off" when it agrees with onnxjit, else "MISMATCH"); then `rep.run` and
`session.run` timed *alternately*, in short blocks of calls, after warm-up (medians, p90, median of
per-pair ratios).

Peak memory: for each engine, the growth of the resident set (RSS) while it prepares and runs once,
measured as VmHWM after resetting it through /proc/self/clear_refs (Linux), minus VmRSS before.
Where that reset is not available, the growth of getrusage's ru_maxrss (a lower bound: 0 when an
earlier step peaked higher). The warm-prepare child also reports its whole-process ru_maxrss.
tracemalloc is not used: it sees only Python allocations, not Numba's, BLAS's or ORT's.

"cold" prepare starts from an empty onnxjit cache dir; onnxjit's library kernels are cached once per
install (Numba's cache next to the package), so they count as cold only on the first run ever.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import gc
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from ..inputs import model_inputs, parse_dims  # noqa: F401  (bench.model_inputs, bench.parse_dims)

ATOL, RTOL = 1e-4, 1e-3          # mismatch: |jit - ort| > ATOL * scale + RTOL * |ort|, scale = max|ort|
WARMUP = 3
BUDGET_S = 2.0                   # time spent timing each model when --repeat is not given
MIN_PAIRS, MAX_PAIRS = 10, 2000
BLOCK_S, MAX_BLOCK = 0.2, 1000  # consecutive timed calls per engine before switching (see time_alternating)
SETTLE_S = 0.1                  # untimed calls after each switch, so the other engine's threads go idle
CHILD_TIMEOUT_S = 900
ORT_MISSING = ("onnxjit bench compares against ONNX Runtime, which is not installed: "
               "pip install 'onnxjit[bench]' (or: pip install onnxruntime)")


class MissingDependency(RuntimeError):
    """An optional extra (onnxruntime, matplotlib) is not installed."""


# -- threads ------------------------------------------------------------------------------------
def limit_threads(n):
    """Run onnxjit (Numba and BLAS) on `n` threads; returns what was set, for the report."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)   # for libraries loaded from now on, and for child processes
    import numba
    import scipy.linalg.cython_blas  # noqa: F401  (Numba's np.dot calls scipy's BLAS: load it now)
    done = {"numba": None, "blas": None}
    try:
        numba.set_num_threads(n)
        done["numba"] = n
    except ValueError as exc:      # more threads than NUMBA_NUM_THREADS allows
        done["numba"] = f"not set: {exc}"
    done["blas"] = _limit_blas(n)
    return done


def _limit_blas(n):
    """BLAS libraries already loaded by numpy/scipy ignore the environment: set them directly."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return _limit_openblas_ctypes(n)
    threadpool_limits(limits=n, user_api="blas")
    return "threadpoolctl"


_OPENBLAS_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads", "scipy_openblas_set_num_threads64_")


def _limit_openblas_ctypes(n):
    """Without threadpoolctl: call the OpenBLAS setter of every loaded OpenBLAS (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()}
    except OSError:
        return "environment only (no /proc/self/maps, no threadpoolctl)"
    count = 0
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in _OPENBLAS_SETTERS:
            if hasattr(lib, name):
                getattr(lib, name)(ctypes.c_int(n))
                count += 1
    return f"openblas via ctypes ({count} libraries)"


# -- statistics ---------------------------------------------------------------------------------
def percentile(samples, q):
    """The q-th percentile (0..100) of samples, linear interpolation."""
    return float(np.percentile(np.asarray(samples, dtype=float), q))


def summarize(samples):
    """{'median', 'p90', 'n'} of a list of seconds."""
    return {"median": percentile(samples, 50), "p90": percentile(samples, 90), "n": len(samples)}


def pair_ratios(a, b):
    """Per-pair a[i] / b[i]."""
    return [x / y for x, y in zip(a, b) if y > 0]


def geomean(values):
    """Geometric mean of the positive values (None if there are none)."""
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def auto_pairs(seconds_per_round, budget=BUDGET_S):
    """How many timing rounds fit in `budget` seconds, within [MIN_PAIRS, MAX_PAIRS]."""
    if seconds_per_round <= 0:
        return MAX_PAIRS
    return max(MIN_PAIRS, min(MAX_PAIRS, int(budget / seconds_per_round)))


def time_alternating(fns, repeat=None, warmup=WARMUP, clock=time.perf_counter, block=None,
                     settle=SETTLE_S):
    """{name: [seconds]}: the callables take turns in blocks of `block` timed calls each (by default
    as many as fit in BLOCK_S, within [1, MAX_BLOCK]), rotating who goes first each round.

    Each block starts with untimed calls for `settle` seconds (at least one). Thread pools spin
    after work and sleep when idle: ORT's intra-op workers keep spinning for tens of milliseconds
    after a call, OpenMP's (Numba's) and OpenBLAS's for less. With more than one thread, calls made
    while the other engine's workers still spin measure that contention (2-3x the call itself on a
    2-core VM, measured), which no single-engine deployment pays. Settled blocks time each engine
    in its steady state while still interleaving them, so drift in the machine's speed affects
    both alike.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    per_call = {n: _time_once(fns[n], clock) for n in names}
    if block is None:
        block = max(1, min(MAX_BLOCK, int(BLOCK_S / max(max(per_call.values()), 1e-9))))
    # Budget: each round runs block + 1 calls of every engine.
    rounds = repeat if repeat else auto_pairs(sum(per_call.values()) * (block + 1) / block)
    samples = {n: [] for n in names}
    for i in range(-(-rounds // block)):
        # Rotating the order keeps cache and frequency effects from favouring one engine.
        for name in names[i % len(names):] + names[:i % len(names)]:
            _settle(fns[name], settle, clock)            # the hand-over, untimed
            for _ in range(min(block, rounds - i * block)):
                samples[name].append(_time_once(fns[name], clock))
    return samples


def _settle(fn, seconds, clock):
    """Call fn until `seconds` have passed (at least once)."""
    start = clock()
    fn()
    while clock() - start < seconds:
        fn()


def _time_once(fn, clock):
    start = clock()
    fn()
    return clock() - start


# -- correctness --------------------------------------------------------------------------------
def compare(outputs, references):
    """Max abs/rel difference over all outputs, and whether they agree (see ATOL, RTOL)."""
    result = {"max_abs": 0.0, "max_rel": 0.0, "match": True, "problem": None}
    if len(outputs) != len(references):
        return dict(result, match=False, problem=f"{len(outputs)} outputs vs {len(references)}")
    for i, (out, ref) in enumerate(zip(outputs, references)):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            return dict(result, match=False,
                        problem=f"output {i}: shape {list(out.shape)} vs {list(ref.shape)}")
        max_abs, max_rel, ok = _difference(out, ref)
        result["max_abs"] = max(result["max_abs"], max_abs)
        result["max_rel"] = max(result["max_rel"], max_rel)
        if not ok and result["match"]:
            result.update(match=False, problem=f"output {i} differs beyond rtol {RTOL}/atol {ATOL}")
    return result


def _difference(out, ref):
    """(max abs diff, max abs diff / max|ref|, within tolerance?) of one output; ints: exact."""
    if ref.size == 0:
        return 0.0, 0.0, True
    out64, ref64 = out.astype(np.float64), ref.astype(np.float64)
    nan_out, nan_ref = np.isnan(out64), np.isnan(ref64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(out64 - ref64)
    diff[(out64 == ref64) | nan_out | nan_ref] = 0.0       # equal infinities match; NaNs: below
    magnitude = np.abs(np.where(np.isfinite(ref64), ref64, 0.0))   # NaN/inf: no tolerance
    scale = float(magnitude.max()) or 1.0
    if ref.dtype.kind in "fc":
        within = diff <= ATOL * scale + RTOL * magnitude
    else:
        within = diff == 0
    ok = bool((nan_out == nan_ref).all() and within.all())
    max_abs = float(diff.max())
    return max_abs, max_abs / scale, ok


# -- memory -------------------------------------------------------------------------------------
def _status_kb(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _maxrss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # kilobytes on Linux


class PeakMemory:
    """Context manager: `.mb` = RSS growth at its peak inside the block (see the module doc)."""

    def __enter__(self):
        gc.collect()
        self.exact = False
        with contextlib.suppress(OSError):
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")                              # resets VmHWM to the current RSS
            self.exact = _status_kb("VmRSS") is not None
        self.start_kb = _status_kb("VmRSS") if self.exact else _maxrss_kb()
        return self

    def __exit__(self, *exc):
        end_kb = _status_kb("VmHWM") if self.exact else _maxrss_kb()
        self.mb = max(0, end_kb - self.start_kb) / 1024.0
        return False


MEMORY_MEASURE = ("peak RSS growth while preparing and running once: VmHWM (reset via "
                  "/proc/self/clear_refs) minus VmRSS before; fallback: growth of ru_maxrss")


# -- baselines ----------------------------------------------------------------------------------
class OrtBaseline:
    """ONNX Runtime, CPU provider, `threads` intra-op threads and 1 inter-op thread."""

    name = "onnxruntime"

    def __init__(self, threads):
        try:
            import onnxruntime
        except ImportError as exc:
            raise MissingDependency(ORT_MISSING) from exc
        self.ort, self.threads, self.version = onnxruntime, threads, onnxruntime.__version__

    def create(self, model):
        """A callable feeds -> list of outputs."""
        model = _copy_for_ort(model)
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        session = self.ort.InferenceSession(model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        return lambda feeds: session.run(None, feeds)


def _copy_for_ort(model):
    """A copy ORT takes and optimizes as onnxjit does: IR version at most 10 (ORT's limit), and
    initializers that an old model (IR < 4) also lists as graph inputs dropped from the inputs.
    ORT treats such initializers as overridable inputs, for which it warns that it may skip
    graph optimizations; onnxjit compiles them as the constants they are (the light models are
    IR 3), so both engines get the same model.  (Measured on the shipped light ResNet-50 and
    Inception v2: no difference in ORT's latency either way.)"""
    import onnx
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if copy.ir_version < 4:
        inits = {t.name for t in copy.graph.initializer}
        inputs = [v for v in copy.graph.input if v.name not in inits]
        del copy.graph.input[:]
        copy.graph.input.extend(inputs)
        copy.ir_version = 4
    copy.ir_version = min(copy.ir_version, 10)
    return copy


class ReferenceBaseline:
    """onnx.reference.ReferenceEvaluator as a stand-in for ORT (tests; correctness without ORT)."""

    name = "onnx-reference"
    version = None

    def __init__(self, threads=1):
        import onnx
        self.version = onnx.__version__

    def create(self, model):
        from onnx.reference import ReferenceEvaluator
        evaluator = ReferenceEvaluator(model)
        return lambda feeds: evaluator.run(None, feeds)


def make_baseline(threads):
    """The engine onnxjit is compared against (raises MissingDependency without onnxruntime)."""
    return OrtBaseline(threads)


# -- progress -----------------------------------------------------------------------------------
class Progress:
    """Messages on stderr; `step()` blocks also tick every few seconds while they run."""

    def __init__(self, stream=None, quiet=False, tick_s=10.0):
        self.stream, self.quiet, self.tick_s, self.prefix = stream, quiet, tick_s, ""

    def say(self, message):
        if not self.quiet:
            print(f"{self.prefix}{message}", file=self.stream or sys.stderr, flush=True)

    @contextlib.contextmanager
    def step(self, what):
        self.say(f"{what} ...")
        done = threading.Event()
        start = time.perf_counter()

        def tick():
            while not done.wait(self.tick_s):
                self.say(f"  ... {what}: {time.perf_counter() - start:.0f} s")
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()


# -- one model ----------------------------------------------------------------------------------
def new_row(name):
    """A result row with every field present (None = not measured)."""
    keys = ("cold_prepare_s", "compile_s", "warm_prepare_s", "warm_process_s", "warm_child_maxrss_mb",
            "ort_create_s", "jit_median_ms", "jit_p90_ms", "ort_median_ms", "ort_p90_ms", "pairs",
            "ratio", "max_abs", "max_rel", "jit_peak_mb", "ort_peak_mb")
    return dict({"model": name, "status": "ok", "detail": None}, **dict.fromkeys(keys))


def _fail(row, status, exc):
    row["status"] = status
    row["detail"] = f"{type(exc).__name__}: {exc}".strip()


def bench_model(name, model, options, baseline, progress):
    """Measure one model (a ModelProto or a path); never raises for a model onnxjit cannot run."""
    import onnx
    row = new_row(name)
    try:
        path = model if isinstance(model, (str, os.PathLike)) else None
        model = onnx.load(path) if path else model
        feeds = model_inputs(model, options.dims)
    except Exception as exc:
        _fail(row, "load-error", exc)
        return row
    with tempfile.TemporaryDirectory(prefix="onnxjit-bench-") as work:
        rep, jit_out = _jit_cold(row, model, list(feeds.values()), work, progress)
        if rep is not None:
            _jit_warm(row, model, path, work, options, progress)
        run_ref, ref_out = _baseline_create(row, baseline, model, feeds, progress)
        if rep is not None and run_ref is not None:
            row.update(compare(jit_out, ref_out))
            if not row.pop("match"):
                _referee(row, model, feeds, jit_out, ref_out, baseline, progress)
            row.pop("problem")
        _latency(row, rep, list(feeds.values()), run_ref, feeds, options, progress)
    return row


def _referee(row, model, feeds, jit_out, ref_out, baseline, progress):
    """onnxjit and the baseline disagree: onnx's reference evaluator decides. Where onnxjit
    agrees with it and the baseline does not (on an AVX2 CPU without VNNI, ORT's output for
    int8_transformer is 0.15 off the reference), the row is "ort-off" with both differences
    in the note, and
    max_abs/max_rel are onnxjit's against the reference; otherwise "MISMATCH"."""
    problem = row["problem"]
    try:
        from onnx.reference import ReferenceEvaluator
        with progress.step("outputs differ: onnx.reference decides"):
            oracle = list(ReferenceEvaluator(model).run(None, feeds))
    except Exception as exc:
        row["status"], row["detail"] = "MISMATCH", (
            f"{problem} (onnx.reference could not decide: {type(exc).__name__}: {exc})")
        return
    jit, base = compare(jit_out, oracle), compare(ref_out, oracle)
    if jit["match"] and not base["match"]:
        short = "ort" if baseline.name == "onnxruntime" else baseline.name
        row.update(status=f"{short}-off", max_abs=jit["max_abs"], max_rel=jit["max_rel"],
                   detail=f"onnxjit and {baseline.name}: {problem}; onnx.reference agrees with "
                          f"onnxjit (max abs {jit['max_abs']:.1e}), not with {baseline.name} "
                          f"(max abs {base['max_abs']:.1e})")
    else:
        verdict = ("neither agrees with onnx.reference" if not jit["match"] else
                   "both agree with onnx.reference")
        row["status"], row["detail"] = "MISMATCH", (
            f"{problem}; {verdict} (onnxjit max abs {jit['max_abs']:.1e}, {baseline.name} "
            f"{base['max_abs']:.1e})")


def _jit_cold(row, model, inputs, work, progress):
    """onnxjit prepare + first run in a fresh cache dir; (rep, outputs) or (None, None)."""
    from .. import backend
    from ..errors import UnsupportedOpError
    saved = os.environ.get("ONNXJIT_CACHE_DIR")
    os.environ["ONNXJIT_CACHE_DIR"] = os.path.join(work, "cache")   # read when compiling
    try:
        with progress.step("onnxjit cold prepare (compiling)"), PeakMemory() as memory:
            start = time.perf_counter()
            rep = backend.prepare(model, "CPU", tiered=False)
            outputs = list(rep.run(inputs))       # compiles here if the inputs are symbolic
            row["cold_prepare_s"] = time.perf_counter() - start
        row["compile_s"], row["jit_peak_mb"] = rep.compile_seconds, memory.mb
        return rep, outputs
    except UnsupportedOpError as exc:
        _fail(row, "unsupported", exc)
    except Exception as exc:
        _fail(row, "jit-error", exc)
    finally:
        _restore_env("ONNXJIT_CACHE_DIR", saved)
    return None, None


def _restore_env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _jit_warm(row, model, path, work, options, progress):
    """Prepare again in a new process on the same cache dir: Numba's disk cache is measured."""
    import onnx
    if path is None:
        path = os.path.join(work, "model.onnx")
        onnx.save(model, path)
    spec = json.dumps({"path": os.fspath(path), "dims": options.dims, "threads": options.threads})
    env = dict(os.environ, ONNXJIT_CACHE_DIR=os.path.join(work, "cache"))
    code = "import sys, onnxjit.tools.bench as b; sys.exit(b.warm_child(sys.argv[1]))"
    with progress.step("onnxjit warm prepare (new process, disk cache)"):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, spec], env=env, capture_output=True,
                              text=True, timeout=CHILD_TIMEOUT_S)
        elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        row["detail"] = f"warm prepare failed in the child process: {tail}"
        return
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    row.update(warm_prepare_s=result["warm_prepare_s"], warm_process_s=elapsed,
               warm_child_maxrss_mb=result["maxrss_mb"])


def warm_child(spec_json):
    """Child process of `_jit_warm`: prepare + first run, print the timings as JSON."""
    import onnx

    from .. import backend
    spec = json.loads(spec_json)
    limit_threads(spec["threads"])
    model = onnx.load(spec["path"])
    inputs = list(model_inputs(model, spec["dims"]).values())
    start = time.perf_counter()
    rep = backend.prepare(model, "CPU", tiered=False)
    rep.run(inputs)
    elapsed = time.perf_counter() - start
    print(json.dumps({"warm_prepare_s": elapsed, "compile_s": rep.compile_seconds,
                      "maxrss_mb": _maxrss_kb() / 1024.0}))
    return 0


def _baseline_create(row, baseline, model, feeds, progress):
    """Create the baseline session and run it once; (run, outputs) or (None, None)."""
    try:
        with progress.step(f"{baseline.name} session"), PeakMemory() as memory:
            start = time.perf_counter()
            run = baseline.create(model)
            row["ort_create_s"] = time.perf_counter() - start
            outputs = list(run(feeds))
        row["ort_peak_mb"] = memory.mb
        return run, outputs
    except Exception as exc:
        if row["status"] == "ok":
            _fail(row, f"{baseline.name}-error", exc)
        return None, None


def _latency(row, rep, inputs, run_ref, feeds, options, progress):
    """Alternate rep.run and the baseline (whichever exist); medians, p90, per-pair ratio."""
    fns = {}
    if rep is not None:
        fns["jit"] = lambda: rep.run(inputs)
    if run_ref is not None:
        fns["ort"] = lambda: run_ref(feeds)
    if not fns:
        return
    what = "timing onnxjit and ORT alternately" if len(fns) == 2 else f"timing {next(iter(fns))} only"
    with progress.step(what):
        samples = time_alternating(fns, options.repeat)
    for key, times in samples.items():
        stats = summarize(times)
        row.update({f"{key}_median_ms": stats["median"] * 1e3, f"{key}_p90_ms": stats["p90"] * 1e3,
                    "pairs": stats["n"]})
    if len(samples) == 2:
        row["ratio"] = percentile(pair_ratios(samples["jit"], samples["ort"]), 50)


# -- output -------------------------------------------------------------------------------------
COLUMNS = [("model", "model", "{}"), ("status", "status", "{}"),
           ("cold s", "cold_prepare_s", "{:.2f}"), ("warm s", "warm_prepare_s", "{:.3f}"),
           ("ort init s", "ort_create_s", "{:.3f}"),
           ("jit ms", "jit_median_ms", "{:.4g}"), ("jit p90", "jit_p90_ms", "{:.4g}"),
           ("ort ms", "ort_median_ms", "{:.4g}"), ("ort p90", "ort_p90_ms", "{:.4g}"),
           ("jit/ort", "ratio", "{:.3f}"), ("max abs", "max_abs", "{:.1e}"),
           ("max rel", "max_rel", "{:.1e}"), ("jit MB", "jit_peak_mb", "{:.0f}"),
           ("ort MB", "ort_peak_mb", "{:.0f}")]


def _cell(row, key, fmt):
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def format_table(rows, columns=COLUMNS):
    """A plain-text table: text columns left-aligned, numbers right-aligned."""
    cells = [[_cell(r, key, fmt) for _, key, fmt in columns] for r in rows]
    headers = [h for h, _, _ in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    left = {i for i, (_, _, fmt) in enumerate(columns) if fmt == "{}"}

    def line(values):
        return "  ".join(v.ljust(w) if i in left else v.rjust(w)
                         for i, (v, w) in enumerate(zip(values, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(c) for c in cells])


def format_notes(rows, width=300):
    """One line per model that has something to say (unsupported ops, mismatches, errors)."""
    notes = []
    for r in rows:
        if r["detail"]:
            detail = r["detail"] if len(r["detail"]) <= width else r["detail"][:width] + " ..."
            notes.append(f"  {r['model']}: {r['status']}: {detail}")
    return "\n".join(["notes:"] + notes) if notes else ""


def summary_line(rows, baseline_name="ORT"):
    """The geometric mean of the ratios, saying how many models it covers."""
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    mean = geomean(ratios)
    if mean is None:
        return f"geometric mean onnxjit/{baseline_name}: n/a (no model ran on both)"
    return (f"geometric mean onnxjit/{baseline_name} latency ratio: {mean:.3f} "
            f"over {len(ratios)} of {len(rows)} models")


def machine_info():
    """What the numbers were measured on."""
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    return {"cpu": cpu, "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load_average": _load_average()}


def _load_average():
    with contextlib.suppress(OSError, AttributeError):
        return round(os.getloadavg()[0], 2)
    return None


def warn_if_busy(threads):
    """Timings on a machine already busy with other work are noise: say so up front."""
    load, cpus = _load_average(), os.cpu_count() or 1
    if load is not None and load + threads > cpus + 0.5:
        print(f"warning: load average {load:.1f} on {cpus} CPUs: other processes compete with "
              f"the benchmark; timings (especially with --threads > 1) will be noisy",
              file=sys.stderr)


def make_report(rows, argv, threads, thread_setup, baseline):
    """The JSON document: when, where, what versions, and the rows."""
    import numba
    import onnx

    from .. import __version__
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": "onnxjit bench " + " ".join(argv), "machine": machine_info(),
            "versions": {"onnxjit": __version__, "numba": numba.__version__,
                         "numpy": np.__version__, "onnx": onnx.__version__,
                         baseline.name: baseline.version},
            "baseline": baseline.name, "threads": threads, "thread_setup": thread_setup,
            "tolerance": {"rtol": RTOL, "atol_times_scale": ATOL}, "memory": MEMORY_MEASURE,
            "geomean_ratio": geomean([r["ratio"] for r in rows]), "results": rows}


def write_json(path, report):
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def _ratio_axis(ax, ratios, ticker):
    """Log-scale x axis with plain tick labels, a line at 1 and each bar's value."""
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    low, high = min(ratios + [1.0]) / 1.5, max(ratios + [1.0]) * 1.5
    ax.set_xlim(low, high)
    ax.set_xticks([t for t in (1 / 16, 1 / 8, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if low <= t <= high])
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    for y, x in enumerate(ratios):
        ax.annotate(f"{x:.2f}", (x, y), xytext=(3, 0), textcoords="offset points", va="center")


def write_png(path, rows, title):
    """Horizontal bars of the onnxjit/ORT ratio per model (raises MissingDependency)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependency("matplotlib is not installed (pip install 'onnxjit[bench]')") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    shown = [r for r in rows if r["ratio"] is not None]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * max(1, len(shown))))
    ratios = [r["ratio"] for r in shown]
    ax.barh([r["model"] for r in shown], ratios,
            color=["tab:green" if x <= 1 else "tab:red" for x in ratios])
    _ratio_axis(ax, ratios, matplotlib.ticker)
    ax.invert_yaxis()
    ax.set_xlabel("onnxjit / ORT median latency ratio (lower is better; log scale)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- command line -------------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(prog="onnxjit bench", description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", metavar="MODEL.onnx",
                   help="models to measure (default: the built-in suite, see onnxjit.tools.models)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a symbolic input dimension (default 1); repeatable")
    p.add_argument("--threads", type=int, default=1,
                   help="threads for onnxjit (Numba, BLAS) and ORT intra-op (default 1)")
    p.add_argument("--repeat", type=int, default=None,
                   help=f"timing rounds per model (default: about {BUDGET_S:g} s worth, "
                        f"{MIN_PAIRS}..{MAX_PAIRS})")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--png", metavar="FILE", help="write a bar chart of the ratios (matplotlib)")
    p.add_argument("--only", metavar="REGEX", help="only the models whose name matches")
    p.add_argument("--shipped-weights", action="store_true",
                   help="run the light models with the constant weights they ship with (their "
                        "outputs are then a uniform softmax; by default seeded random weights "
                        "make the comparison with ORT meaningful)")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    args = p.parse_args(argv)
    if args.threads < 1 or (args.repeat is not None and args.repeat < 1):
        p.error("--threads and --repeat must be at least 1")
    try:
        args.dims = parse_dims(args.dim)
    except ValueError as exc:
        p.error(str(exc))
    return args


def select_models(paths, only=None, weights="random"):
    """[(name, ModelProto or path)]: the given files, or the built-in suite (light models with
    `weights` "random" or "shipped"); filtered by --only."""
    if paths:
        models = [(os.path.splitext(os.path.basename(p))[0], p) for p in paths]
    else:
        from .models import builtin_suite
        models = builtin_suite(weights, only)    # builds only the models `only` keeps
    if only:
        pattern = re.compile(only)
        models = [(n, m) for n, m in models if pattern.search(n)]
    return models


def main(argv=None):
    """`onnxjit bench ...`; returns the exit status (1 if any output mismatched ORT's)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    device = next((a.split("=", 1)[1] if "=" in a else argv[i + 1] for i, a in enumerate(argv)
                   if a.split("=")[0] == "--device" and ("=" in a or i + 1 < len(argv))), "CPU")
    if device.upper().startswith("CUDA"):   # the GPU benchmark (onnxjit/tools/cuda_bench.py)
        from .cuda_bench import main as cuda_bench
        return cuda_bench(argv)
    argv = [a for i, a in enumerate(argv) if not (a.startswith("--device") or
                                                  (i and argv[i - 1] == "--device"))]
    args = parse_args(argv)
    try:
        baseline = make_baseline(args.threads)
    except MissingDependency as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    models = select_models(args.models, args.only, "shipped" if args.shipped_weights else "random")
    if not models:
        print(f"error: no model matches --only {args.only!r}", file=sys.stderr)
        return 2
    thread_setup = limit_threads(args.threads)
    progress, rows = Progress(quiet=args.quiet), []
    warn_if_busy(args.threads)
    for i, (name, model) in enumerate(models, 1):
        progress.prefix = f"[{i}/{len(models)}] {name}: "
        rows.append(bench_model(name, model, args, baseline, progress))
    return _finish(rows, argv, args, thread_setup, baseline)


def _finish(rows, argv, args, thread_setup, baseline):
    """Print the table and the summary, write the JSON and PNG; the exit status."""
    report = make_report(rows, argv, args.threads, thread_setup, baseline)
    print(f"onnxjit bench, {report['date']}, {report['machine']['cpu']}, "
          f"{args.threads} thread(s), baseline {baseline.name} {baseline.version}")
    print(format_table(rows))
    notes = format_notes(rows)
    if notes:
        print(notes)
    print(summary_line(rows, "ORT" if baseline.name == "onnxruntime" else baseline.name))
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")
    if args.png:
        try:
            write_png(args.png, rows, f"onnxjit / {baseline.name}, {args.threads} thread(s), "
                                      f"{report['date'][:10]}, {report['machine']['cpu']}")
            print(f"wrote {args.png}")
        except MissingDependency as exc:
            print(f"warning: {exc}; no PNG written", file=sys.stderr)
    return 1 if any(r["status"] == "MISMATCH" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
