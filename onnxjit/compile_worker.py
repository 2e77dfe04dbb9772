"""`python -m onnxjit.compile_worker JOB [PART PARTS]`: compile one model signature (a job file
written by tiers.write_job) into the disk caches, printing `progress DONE TOTAL NAME` lines.

Every part walks the graph's library calls in order and compiles each one whose source file no
other process is compiling (compile.Claims) for the types the plan predicts, so the calls of one
graph compile on several cores; then part 0 makes the exact pass prepare would make, loading
what the parts compiled and compiling what a wrong prediction missed."""
from __future__ import annotations

import os
import sys

# The workers' niceness: they compile in the background while the caller's process answers
# on the reference tier; on a 2-core machine two workers at the caller's priority share the
# cores with that first answer. The same work gets done in the same time when nothing else
# runs; the caller's answer comes first when something does (the demo on a Zen 3 host, one
# run each: first result 4.28 -> 3.69 s, optimized code 52.6 -> 48.4 s; VGG-19's first result
# 12.6 / 13.6 s either way: its time is the job file and the reference run).
WORKER_NICE = 10


def lower_priority():
    """Raise this process's niceness by WORKER_NICE (where the OS has niceness)."""
    if hasattr(os, "nice"):
        try:
            os.nice(WORKER_NICE)
        except OSError:
            pass


def main(argv):
    lower_priority()
    from onnxjit.compile import Claims, compile_ahead, machine_slot
    from onnxjit.pipeline import compile_model, generate
    from onnxjit.tiers import read_job
    slot = machine_slot()      # noqa: F841  (held until this process exits)
    model, signature, values, label, options = read_job(argv[0])
    part = int(argv[1]) if len(argv) > 1 else 0
    _, _, generated, module = generate(model, signature, label, values=values, **options)
    compile_ahead(module, generated.segments, generated.values, _report, Claims())
    if part == 0:
        compile_model(model, signature, label, values=values, progress=_report, claims=Claims(),
                      **options)
        # the end, whichever pass compiled the last call (the exact pass reports it only when it
        # compiled one itself)
        _report(len(generated.segments), len(generated.segments), "")
    return 0


def _report(done, total, name):
    try:
        print(f"progress {done} {total} {name}", flush=True)
    except (BrokenPipeError, OSError):    # the caller has gone: compile on, for the cache
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
