"""`python -m onnxjit.compile_worker JOB [PART PARTS]`: compile one model signature (a job file
written by tiers.write_job) into the disk caches, printing `progress DONE TOTAL NAME` lines.

Part 0 compiles every call in order, as prepare would; parts 1.. are helpers that compile the
library calls from the last one back, for the types the plan predicts, so that the calls of one
graph compile on several cores. Claims (compile.Claims) keep them off each other's functions."""
from __future__ import annotations

import sys


def main(argv):
    from onnxjit.compile import Claims, compile_ahead, machine_slot
    from onnxjit.pipeline import compile_model, generate
    from onnxjit.tiers import read_job
    slot = machine_slot()      # noqa: F841  (held until this process exits)
    model, signature, values, label, options = read_job(argv[0])
    part = int(argv[1]) if len(argv) > 1 else 0
    if part == 0:
        compile_model(model, signature, label, values=values, progress=_report, claims=Claims(),
                      **options)
    else:
        _, _, generated, module = generate(model, signature, label, values=values, **options)
        compile_ahead(module, generated.segments, generated.values, _report, Claims())
    return 0


def _report(done, total, name):
    try:
        print(f"progress {done} {total} {name}", flush=True)
    except (BrokenPipeError, OSError):    # the caller has gone: compile on, for the cache
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
