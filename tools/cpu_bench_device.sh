#!/usr/bin/env bash
# The CPU benchmark (`onnxjit bench`, 1 and 2 threads, against ONNX Runtime in the same process)
# on another machine's CPU: a lent GPU machine's host, whose CPU has AVX-512 where the dev VM
# has none (issue 16's AVX-512 table). Cold caches: the built-in suite's kernels are first
# compiled in parallel (`onnxjit warmup -j $(nproc)`), then each bench prepares and times.
#   1. the checkout on PYTHONPATH (no install: pip may have no network); Numba's np.dot needs
#      scipy: where the machine has none, a scipy wheel put under build/wheels/ (carried with
#      the working tree) is unpacked beside it,
#   2. the CPU and the target onnxjit picks (onnxjit.target.host()),
#   3. warmup, bench --threads 1, bench --threads 2, each time-boxed.
# Logs and the JSON tables go under $OUT when that is set (else a temporary folder).
#   bash tools/cpu_bench_device.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d -t onnxjit-cpu-XXXX)}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! python -c "import scipy" 2>/dev/null; then
  for wheel in build/wheels/scipy-*.whl; do
    [ -f "$wheel" ] && python -m zipfile -e "$wheel" /tmp/onnxjit-scipy
  done
  export PYTHONPATH="$PYTHONPATH:/tmp/onnxjit-scipy"
fi
export ONNXJIT_CACHE_DIR="$(mktemp -d -t onnxjit-cache-XXXX)" NUMBA_CACHE_DIR="$(mktemp -d -t numba-cache-XXXX)"
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/cpu_bench.log"; }

log "machine"
{ lscpu | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\)|L2|L3)"
  grep -o -w -E "avx512f|avx512_vnni|avx512_bf16|amx_tile|avx2|fma" /proc/cpuinfo | sort | uniq -c
  python - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "scipy", "numba", "llvmlite", "onnx", "onnxruntime"):
    try:
        print(f"{name:12s}", importlib.import_module(name).__version__)
    except Exception as exc:
        print(f"{name:12s} MISSING ({type(exc).__name__}: {exc})")
from onnxjit.target import host
print("onnxjit target:", host())
PY
} 2>&1 | tee -a "$OUT/cpu_bench.log"

log "warmup"
timeout "${WARMUP_TIMEOUT:-200}" python -m onnxjit warmup -j "$(nproc)" > "$OUT/warmup.txt" 2>&1
echo "warmup exit status $? (124: timed out)" >> "$OUT/warmup.txt"
tail -4 "$OUT/warmup.txt" | tee -a "$OUT/cpu_bench.log"

for threads in ${THREADS:-1 2}; do
  log "bench --threads $threads"
  timeout "${BENCH_TIMEOUT:-150}" python -m onnxjit bench --threads "$threads" --quiet \
      --json "$OUT/bench_${threads}t.json" > "$OUT/bench_${threads}t.txt" 2>&1
  echo "bench exit status $? (124: timed out)" >> "$OUT/bench_${threads}t.txt"
  tee -a "$OUT/cpu_bench.log" < "$OUT/bench_${threads}t.txt"
done
log "done: results in $OUT"
