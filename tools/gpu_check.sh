#!/usr/bin/env bash
# One short GPU check of the CUDA target (under 6 minutes: every step is time-boxed), for a machine with an NVIDIA GPU,
# numba + numba-cuda, CuPy, PyTorch and onnxruntime installed, and no network:
#   1. pip install --no-deps . (falls back to the checkout if that cannot build offline),
#   2. the CUDA tests for real (no simulator; the CPU-rep oracle off: reference evaluator only),
#      then the backend-suite slice for what time is left,
#   3. onnxjit bench --device CUDA: the built-in suite vs PyTorch eager and torch.compile.
# Everything it prints also goes under $OUT when that is set (else a temporary folder).
#   bash tools/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d -t onnxjit-gpu-XXXX)}"
mkdir -p "$OUT"
export OUT
unset NUMBA_ENABLE_CUDASIM
export ONNXJIT_CACHE_DIR="$OUT/onnxjit-cache"
export ONNXJIT_TEST_CPU_ORACLE=0      # the CPU rep would compile its AVX kernels for minutes here
log() { echo "== $* ($(date +%T))" | tee -a "$OUT/gpu_check.log"; }

log "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  python - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "numba", "numba_cuda", "cupy", "torch", "onnx", "onnxruntime", "scipy",
             "ml_dtypes"):
    try:
        print(f"{name:12s}", getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:
        print(f"{name:12s} MISSING ({type(exc).__name__}: {exc})")
PY
} 2>&1 | tee -a "$OUT/gpu_check.log"

log "install"
if python -m pip install --no-deps --no-build-isolation . > "$OUT/pip.log" 2>&1; then
    echo "installed onnxjit" | tee -a "$OUT/gpu_check.log"
else
    echo "pip install failed (offline build?): testing the checkout; see pip.log" \
        | tee -a "$OUT/gpu_check.log"
fi

log "CUDA tests on the GPU"     # each kernel compiles once here (numba-cuda, NVVM)
timeout 140 python -m pytest tests/cuda/test_cuda_ops.py tests/cuda/test_cuda_models.py \
    tests/cuda/test_cuda_device.py -q -p no:cacheprovider -W ignore::RuntimeWarning \
    --durations=8 > "$OUT/pytest_cuda.txt" 2>&1
echo "pytest exit status $? (124: timed out)" >> "$OUT/pytest_cuda.txt"
tail -30 "$OUT/pytest_cuda.txt" | tee -a "$OUT/gpu_check.log"

log "backend-suite CUDA slice on the GPU (time-boxed)"
timeout 80 python -m pytest tests/cuda/test_cuda_backend_slice.py -q -p no:cacheprovider \
    -W ignore::RuntimeWarning > "$OUT/pytest_cuda_slice.txt" 2>&1
echo "pytest exit status $? (124: timed out)" >> "$OUT/pytest_cuda_slice.txt"
grep -E "passed|failed|FAILED|error|exit status" "$OUT/pytest_cuda_slice.txt" | tail -30 \
    | tee -a "$OUT/gpu_check.log"

log "benchmark"
timeout 100 python -m onnxjit bench --device CUDA --repeat 30 --json "$OUT/bench_cuda.json" \
    > "$OUT/bench_cuda.txt" 2>&1
echo "bench exit status $? (124: timed out)" >> "$OUT/bench_cuda.txt"
tee -a "$OUT/gpu_check.log" < "$OUT/bench_cuda.txt"
log "done: results in $OUT"
