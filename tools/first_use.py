"""First use of each light model that ships in the onnx package (#15's yardstick).

    python tools/first_use.py [--cache DIR] [--wait]

Each model runs in a fresh process (as a new user's script would), all sharing one onnxjit and
Numba cache (empty unless --cache names a used one): `prepare` with the default tiers, then the
first `rep.run` on random inputs. Prints per model the seconds from `prepare` to the first result
and the tier that answered; with --wait also the seconds until the optimized code is in place.
The compile workers a process leaves behind go on filling the shared cache, as they would for a
user.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
start = time.perf_counter()
import onnxjit
from onnxjit.inputs import random_inputs
from onnxjit.tools.models import light_model
model = light_model(sys.argv[1])
t0 = time.perf_counter()
rep = onnxjit.prepare(model)
rep.run(random_inputs(rep))
first = time.perf_counter() - t0
report = {"model": sys.argv[1], "import_s": t0 - start, "first_s": first, "tier": rep.tier}
if sys.argv[2] == "wait":
    rep.wait()
    report["optimized_s"] = time.perf_counter() - t0
print(json.dumps(report))
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="the shared cache folder (default: a new empty one)")
    parser.add_argument("--wait", action="store_true", help="also wait for the optimized code")
    args = parser.parse_args(argv)
    from onnxjit.tools.models import light_models
    cache = args.cache or tempfile.mkdtemp(prefix="onnxjit-first-use-")
    env = dict(os.environ, ONNXJIT_CACHE_DIR=os.path.join(cache, "onnxjit"),
               NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
    env.pop("ONNXJIT_TIERED", None)
    rows = []
    for name in light_models():
        proc = subprocess.run([sys.executable, "-c", CHILD, name, "wait" if args.wait else "no"],
                              env=env, capture_output=True, text=True, timeout=1800)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            print(f"{name:28s} FAILED\n{proc.stderr[-2000:]}")
            continue
        row = json.loads(lines[-1])
        rows.append(row)
        extra = f"  optimized {row['optimized_s']:6.1f} s" if "optimized_s" in row else ""
        print(f"{name:28s} first result {row['first_s']:5.2f} s ({row['tier']} tier; import "
              f"{row['import_s']:.1f} s){extra}", flush=True)
    if rows:
        print(f"slowest first result: {max(r['first_s'] for r in rows):.2f} s "
              f"({len(rows)} models, cache {cache})")
    return 0 if len(rows) == len(light_models()) else 1


if __name__ == "__main__":
    sys.exit(main())
