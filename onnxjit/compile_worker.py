"""`python -m onnxjit.compile_worker JOB`: compile one model signature (a job file written by
tiers.write_job) into the disk caches, printing `progress DONE TOTAL NAME` lines as it goes."""
from __future__ import annotations

import sys


def main(argv):
    from onnxjit.pipeline import compile_model
    from onnxjit.tiers import read_job
    model, signature, values, label, profile = read_job(argv[0])
    compile_model(model, signature, label, profile, values, progress=_report)
    return 0


def _report(done, total, name):
    try:
        print(f"progress {done} {total} {name}", flush=True)
    except (BrokenPipeError, OSError):    # the caller has gone: compile on, for the cache
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
