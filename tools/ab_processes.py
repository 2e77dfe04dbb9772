"""A/B of two source trees in fresh processes, taking turns: the check of a kernel change as users
get it (the package's own build of its kernels, loaded from its disk cache).

    git worktree add /tmp/base HEAD --detach
    python tools/ab_processes.py --base /tmp/base --new . --runs 4 -- tools/x.py 2

runs ``python tools/x.py 2`` with PYTHONPATH set to each tree in turn (base, new, base, ...),
`--runs` times each; the script prints one line of numbers (times of the cases it measures).
Prints each column's median for both trees and the median of the per-run ratios new / base.

Why not only `ab_round_robin.py` (one process, both variants side by side): there the variants
are copies of a module compiled in that process, and a change to a kernel's code shape (a loop's
bounds, an argument made a constant) moved a copy's speed against the installed module's by
up to 25% either way (LLVM's inlining and the shapes onnxjit's build gives the prange levels
and callees, kernels/callees.py): the in-process A/B put a 1x1 conv change at 1.12-1.25x the
old time at 1 thread on shapes it did not touch, where alternating processes of the installed
builds measured 0.94-1.01x; and a kernel's speed moved 2x with code shape alone (its GEMM
called with the residual flag as a variable: 3.6 ms; a literal in each branch: 1.8). Fresh
processes are slower to run (each pays its imports and warm-up) and see the host's phases, so
they alternate and the ratio of each pair is what is summarized.
"""
import argparse
import os
import statistics
import subprocess
import sys


def run(tree, script_args, env=None):
    """The numbers one run of the script prints with `tree` first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.path.abspath(tree) + (os.pathsep + env["PYTHONPATH"]
                                                 if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable] + script_args, env=env, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{script_args} under {tree} failed:\n{out.stderr[-2000:]}")
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"{script_args} under {tree} printed nothing")
    return [float(v) for v in lines[-1].split()]


def compare(base, new, script_args, runs):
    """{"base": per-column medians, "new": ..., "ratio": medians of the per-run new / base}."""
    b, n = [], []
    for _ in range(runs):
        b.append(run(base, script_args))
        n.append(run(new, script_args))
    cols = range(len(b[0]))
    med = (lambda rows, j: statistics.median(r[j] for r in rows))
    return {"base": [med(b, j) for j in cols], "new": [med(n, j) for j in cols],
            "ratio": [statistics.median(n[i][j] / b[i][j] for i in range(runs)) for j in cols]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the old tree (a git worktree)")
    p.add_argument("--new", default=".", help="the new tree (default: this one)")
    p.add_argument("--runs", type=int, default=4, help="runs of each tree (default 4)")
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py [args]")
    a = p.parse_args(argv)
    script = [s for s in a.script if s != "--"]
    if not script:
        p.error("no script to run")
    r = compare(a.base, a.new, script, a.runs)
    fmt = (lambda v: " ".join(f"{x:9.4g}" for x in v))
    print(f"base   {fmt(r['base'])}\nnew    {fmt(r['new'])}\nratio  {fmt(r['ratio'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
