#!/usr/bin/env bash
# One short GPU check of the CUDA target (about 6 minutes, every step time-boxed), for a machine
# with an NVIDIA GPU, numba + numba-cuda, CuPy and PyTorch installed, and no network:
#   1. the checkout on PYTHONPATH (no install: pip may have no network),
#   2. onnxjit bench --device CUDA: the built-in suite vs PyTorch eager and torch.compile
#      (graph replay, plain launches, host-io runs, run() call overhead),
#   3. the CUDA tests for real (no simulator; the CPU-rep oracle off: reference evaluator only),
#   4. the backend-suite CUDA slice for what time is left,
#   5. where a run's host time goes (tools/gpu_profile_run.py).
# Logs and bench_cuda.json go under $OUT when that is set (else a temporary folder); the
# kernel caches go to a temporary folder.
#   bash tools/gpu_check.sh            (STEPS="bench tests" to run only some steps)
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d -t onnxjit-gpu-XXXX)}"
mkdir -p "$OUT"
export OUT
STEPS="${STEPS:-bench tests slice profile}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ONNXJIT_CACHE_DIR="${ONNXJIT_CACHE_DIR:-$(mktemp -d -t onnxjit-cache-XXXX)}"
export ONNXJIT_TEST_CPU_ORACLE=0      # the CPU rep would compile its AVX kernels for minutes here
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/gpu_check.log"; }
want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }

log "machine (simulator: ${NUMBA_ENABLE_CUDASIM:-0})"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  python - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "numba", "numba_cuda", "cuda.core", "cuda.bindings", "cupy", "torch",
             "onnx", "onnxruntime"):
    try:
        print(f"{name:14s}", getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:
        print(f"{name:14s} MISSING ({type(exc).__name__}: {exc})")
PY
} 2>&1 | tee -a "$OUT/gpu_check.log"

if want bench; then
  log "benchmark"
  timeout "${BENCH_TIMEOUT:-170}" python -m onnxjit bench --device CUDA --repeat 50 \
      --json "$OUT/bench_cuda.json" > "$OUT/bench_cuda.txt" 2>&1
  echo "bench exit status $? (124: timed out)" >> "$OUT/bench_cuda.txt"
  tee -a "$OUT/gpu_check.log" < "$OUT/bench_cuda.txt"
fi

if want tests; then
  log "CUDA tests"     # each kernel compiles once here (numba-cuda, NVVM)
  timeout "${TESTS_TIMEOUT:-130}" python -m pytest tests/cuda/test_cuda_ops.py \
      tests/cuda/test_cuda_models.py tests/cuda/test_cuda_device.py \
      tests/cuda/test_cuda_cublas_layout.py -q -p no:cacheprovider \
      -W ignore::RuntimeWarning --durations=5 > "$OUT/pytest_cuda.txt" 2>&1
  echo "pytest exit status $? (124: timed out)" >> "$OUT/pytest_cuda.txt"
  grep -E "passed|failed|FAILED|Error|exit status" "$OUT/pytest_cuda.txt" | tail -25 \
      | tee -a "$OUT/gpu_check.log"
fi

if want slice; then
  log "backend-suite CUDA slice (time-boxed)"
  timeout "${SLICE_TIMEOUT:-80}" python -m pytest tests/cuda/test_cuda_backend_slice.py -q \
      -p no:cacheprovider -W ignore::RuntimeWarning > "$OUT/pytest_cuda_slice.txt" 2>&1
  echo "pytest exit status $? (124: timed out)" >> "$OUT/pytest_cuda_slice.txt"
  grep -E "passed|failed|FAILED|exit status" "$OUT/pytest_cuda_slice.txt" | tail -25 \
      | tee -a "$OUT/gpu_check.log"
fi

if want profile; then
  log "where a run's host time goes"
  timeout "${PROFILE_TIMEOUT:-40}" python tools/gpu_profile_run.py > "$OUT/profile.txt" 2>&1
  echo "profile exit status $?" >> "$OUT/profile.txt"
  grep -E "us/run|exit status" "$OUT/profile.txt" | tee -a "$OUT/gpu_check.log"
fi
log "done: results in $OUT"
