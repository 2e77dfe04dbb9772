#!/usr/bin/env bash
# Both CPU paths on one AVX-512 CPU, side by side (issue 16's AVX-512 table, and the AVX2 path on
# the same cores as a like-for-like yardstick): a lent GPU machine's host (16 cores, no network).
#   1. wheels carried under .whl/ (tbb, tcmlib: Numba's TBB threading layer, which onnxjit
#      depends on) are installed; the checkout runs from PYTHONPATH,
#   2. the built-in suite's library kernels are compiled for both paths at once (`onnxjit
#      warmup`, 8 cores each; the AVX2 path with NUMBA_CPU_NAME=haswell and the AVX2 features,
#      its own caches),
#   3. `onnxjit bench` at once in six processes, each pinned to two CPUs of its own (taskset):
#      the AVX-512 path at 1 and at 2 threads, the AVX2 path at 1 thread, each over the light
#      models in one process and the other models in another; plus MobileNet's per-node profile
#      (AVX-512, 1 thread) on two more CPUs. Ratios are against ORT in the same process.
# Everything lands in $OUT (summary.log and results.tgz) when that is set, else a temporary folder.
#   bash tools/cpu_paths_device.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d -t onnxjit-cpu-XXXX)}"
R="$(mktemp -d -t onnxjit-res-XXXX)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/summary.log"; }

if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -2
fi
log "machine"
{ lscpu | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\)|L2|L3|NUMA)"
  lscpu -e=CPU,CORE,SOCKET | head -20 | tr '\n' ';'; echo
  python - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "scipy", "numba", "llvmlite", "onnx", "onnxruntime", "tbb"):
    try:
        mod = importlib.import_module(name)
        print(f"{name:12s}", getattr(mod, "__version__", "?"))
    except Exception as exc:
        print(f"{name:12s} MISSING ({type(exc).__name__}: {exc})")
import onnxjit
from onnxjit.target import host
from onnxjit.threads import threading_layer
print("onnxjit target:", host(), "threading layer:", threading_layer())
PY
} 2>&1 | tee -a "$OUT/summary.log"

F512="$(mktemp -d)"; FHSW="$(mktemp -d)"
AVX2F="$(python -c 'from onnxjit.target import AVX2_FEATURES as f; print(f)')"
p512() { ONNXJIT_CACHE_DIR="$F512/o" NUMBA_CACHE_DIR="$F512/n" "$@"; }
phsw() { NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="$AVX2F" ONNXJIT_CACHE_DIR="$FHSW/o" \
         NUMBA_CACHE_DIR="$FHSW/n" "$@"; }
phsw python -c "from onnxjit.target import host; print('AVX2 run target:', host())" \
  | tee -a "$OUT/summary.log"

log "warmup, both paths at once"
p512 taskset -c 0-7 timeout "${WARMUP_TIMEOUT:-210}" python -m onnxjit warmup -j 8 \
  > "$R/warmup_avx512.txt" 2>&1 &
phsw taskset -c 8-15 timeout "${WARMUP_TIMEOUT:-210}" python -m onnxjit warmup -j 8 \
  > "$R/warmup_avx2.txt" 2>&1 &
wait
tail -n 2 "$R"/warmup_*.txt | tee -a "$OUT/summary.log"

log "benches at once (two CPUs each)"
B="${BENCH_TIMEOUT:-270}"
bench() {  # cpus path threads part regex
  local pre=p512; [ "$2" = avx2 ] && pre=phsw
  $pre taskset -c "$1" timeout "$B" python -m onnxjit bench --threads "$3" --quiet --only "$5" \
    --json "$R/bench_$2_$3t_$4.json" > "$R/bench_$2_$3t_$4.txt" 2>&1
  echo "exit status $? (124: timed out)" >> "$R/bench_$2_$3t_$4.txt"
}
bench 0,1 avx512 1 light '^light_' &
bench 2,3 avx512 1 rest '^(?!light_)' &
bench 4,5 avx2 1 light '^light_' &
bench 6,7 avx2 1 rest '^(?!light_)' &
bench 8,9 avx512 2 light '^light_' &
bench 10,11 avx512 2 rest '^(?!light_)' &
p512 taskset -c 12,13 timeout "$B" python tools/node_profile.py mobilenet --top 20 \
  > "$R/profile_mobilenet_avx512.txt" 2>&1 &
phsw taskset -c 14,15 timeout "$B" python tools/node_profile.py mobilenet --top 20 \
  > "$R/profile_mobilenet_avx2.txt" 2>&1 &
wait
for f in "$R"/bench_*.txt; do echo "--- $(basename "$f")"; cat "$f"; done | tee -a "$OUT/summary.log"
python - "$R" <<'PY' | tee -a "$OUT/summary.log"
import glob, json, math, os, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "bench_*.json")):
    _, path, threads, _part = os.path.basename(f)[:-5].split("_")
    for r in json.load(open(f))["results"]:
        rows.setdefault(r["model"], {})[(path, threads)] = r
cols = [("avx512", "1t"), ("avx2", "1t"), ("avx512", "2t")]
print("| model | " + " | ".join(f"{p} {t}: jit ms / ORT ms / ratio" for p, t in cols) + " |")
logs = {c: [] for c in cols}
for model, got in rows.items():
    cells = []
    for c in cols:
        r = got.get(c)
        if r and r.get("ratio"):
            logs[c].append(math.log(r["ratio"]))
            cells.append(f"{r['jit_median_ms']:.4g} / {r['ort_median_ms']:.4g} / {r['ratio']:.2f}")
        else:
            cells.append("-")
    print(f"| {model} | " + " | ".join(cells) + " |")
for c in cols:
    v = logs[c]
    print(c, "geomean", f"{math.exp(sum(v) / len(v)):.3f}" if v else "-", "over", len(v), "models")
PY
cp "$R"/profile_*.txt "$OUT/" 2>/dev/null
tar -czf "$OUT/results.tgz" -C "$R" .
log "done"
