#!/usr/bin/env bash
# Two commits of onnxjit on one CPU at the same minutes (issue 16's "at least as good on AVX-512",
# like for like): the checkout and an older tree, each benchmarked at 1 thread against ORT in the
# same process, on the models both built-in suites have. Made for a lent GPU machine's host (16
# cores; no network): eight `onnxjit bench` processes at once, each pinned to two CPUs of its own,
# caches empty (each tree compiles its own kernels; the old trees have no warmup command).
#   git archive OLD | tar -x -C .old && ln -s ../codegen_templates .old/onnxjit/codegen_templates
#   bash tools/cpu_ab_device.sh .old          (wheels under .whl/ are installed first: tbb)
# Results: $OUT/ab.log (else a temporary folder) and $OUT/ab.tgz.
set -u
cd "$(dirname "$0")/.."
OLD="$(cd "${1:?usage: cpu_ab_device.sh OLD_TREE}" && pwd)"
OUT="${OUT:-$(mktemp -d -t onnxjit-ab-XXXX)}"
R="$(mktemp -d -t onnxjit-ab-XXXX)"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -2
fi
{ lscpu | grep -E "^(Model name|Core|Thread|L2)"; date -u +%T
  echo "old: $(cat "$OLD/COMMIT" 2>/dev/null)"; git log -1 --format="new: %h %s" | cut -c1-100
} 2>&1 | tee "$OUT/ab.log"
NEW_CACHE="$(mktemp -d)"; OLD_CACHE="$(mktemp -d)"
B="${BENCH_TIMEOUT:-360}"
GEN='^(one_node|elementwise_chain|mlp|transformer_block|small_cnn)$'
bench() {  # cpus tree cache tag regex
  PYTHONPATH="$2" ONNXJIT_CACHE_DIR="$3/o" NUMBA_CACHE_DIR="$3/n" taskset -c "$1" timeout "$B" \
    python -m onnxjit bench --threads 1 --quiet --only "$5" --json "$R/$4.json" > "$R/$4.txt" 2>&1
  echo "exit status $? (124: timed out)" >> "$R/$4.txt"
}
bench 0,1 "$OLD" "$OLD_CACHE" old_gen "$GEN" &
bench 2,3 "$OLD" "$OLD_CACHE" old_big '^light_(bvlc_alexnet|zfnet512|vgg19)$' &
bench 4,5 "$OLD" "$OLD_CACHE" old_dense '^light_(densenet121|shufflenet)$' &
bench 6,7 "$OLD" "$OLD_CACHE" old_incep '^light_inception' &
bench 8,9 "$OLD" "$OLD_CACHE" old_res '^light_(resnet50|squeezenet)$' &
bench 10,11 "$PWD" "$NEW_CACHE" new_gen "$GEN" &
bench 12,13 "$PWD" "$NEW_CACHE" new_a '^light_(bvlc_alexnet|zfnet512|vgg19|densenet121|shufflenet)$' &
bench 14,15 "$PWD" "$NEW_CACHE" new_b '^light_(inception_v1|inception_v2|resnet50|squeezenet)$' &
wait
for f in "$R"/*.txt; do echo "--- $(basename "$f")"; cat "$f"; done >> "$OUT/ab.log"
python - "$R" <<'PY' | tee -a "$OUT/ab.log"
import glob, json, math, os, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    tree = os.path.basename(f).split("_")[0]
    for r in json.load(open(f))["results"]:
        if r.get("ratio"):
            rows.setdefault(r["model"], {})[tree] = r
print("| model | old: jit ms / ORT ms / ratio | new: jit ms / ORT ms / ratio |")
both = [m for m, got in rows.items() if len(got) == 2]
for m, got in rows.items():
    cells = [f"{got[t]['jit_median_ms']:.4g} / {got[t]['ort_median_ms']:.4g} / "
             f"{got[t]['ratio']:.2f}" if t in got else "-" for t in ("old", "new")]
    print(f"| {m} | {cells[0]} | {cells[1]} |")
for t in ("old", "new"):
    v = [math.log(rows[m][t]["ratio"]) for m in both]
    print(t, "geomean over the", len(v), "models both ran:", f"{math.exp(sum(v) / len(v)):.3f}" if v else "-")
PY
tar -czf "$OUT/ab.tgz" -C "$R" .
