"""Kernel A/B in one process, one call of each variant in turn: the way to compare kernels on
the shared dev VMs, whose speed moves by 1.3-2x between minutes.

    import sys; sys.path.insert(0, "tools")
    from ab_round_robin import module_at, rr
    old = module_at("HEAD~1", "onnxjit/kernels/conv_packed.py")   # the kernel module as it was
    old2 = module_at("HEAD~1", "onnxjit/kernels/conv_packed.py", "again")  # a second copy
    from onnxjit.kernels import conv_packed as new
    t = rr({"old": lambda: old.conv_packed(*args), "old2": lambda: old2.conv_packed(*args),
            "new": lambda: new.conv_packed(*args)})
    print(t["new"] / t["old"], t["old2"] / t["old"])

`rr` times one call of each variant per round, the order rotating, and returns each variant's
median: a slow phase of the host then falls on every variant alike. Blocks of 20 calls per
variant, even alternated, did not: two identical copies of a kernel came out 1.07-1.19x apart
in one such run, and a change measured 0.79x in one run and 1.14x in the next. A second copy
of the old module ("old2" above) is the check: its ratio to "old" should be 1.00 +- 0.02.

`module_at(rev, path)` imports a kernel module as it is at a git revision (rev None: the working
tree's file; its relative imports made absolute, so it links the current tree's other kernels)
under a name of its own inside the package, so that it is built as onnxjit builds its own
kernels, with its own Numba cache entries in a temporary folder.

A copy compiled here is not the installed module, though: a change to a kernel's code shape
moved a copy's speed against the installed build by up to 25% either way (tools/ab_processes.py
says how); confirm a kernel change with tools/ab_processes.py, fresh processes of the two trees
taking turns.
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

_DIR = tempfile.mkdtemp(prefix="onnxjit-ab-")


def rr(variants, rounds=100, warm=3):
    """{name: median seconds per call} of the callables in `variants`, one call of each per
    round in rotating order, after `warm` untimed calls each (compiles, caches)."""
    names = list(variants)
    for n in names:
        for _ in range(warm):
            variants[n]()
    times = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            t = time.perf_counter()
            variants[n]()
            times[n].append(time.perf_counter() - t)
    return {n: float(np.median(v)) for n, v in times.items()}


def module_at(rev, path, tag="old"):
    """The module at `path` (e.g. onnxjit/kernels/sgemm.py) as of git revision `rev`, imported
    as a module of its own: ``from .x import`` becomes ``from onnxjit.kernels.x import``."""
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=True).stdout.strip()
    if rev is None:         # the working tree's file
        with open(os.path.join(root, path)) as f:
            src = f.read()
        rev = "worktree"
    else:
        src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    package = os.path.dirname(path).replace("/", ".")
    src = re.sub(r"^from \. import", f"from {package} import", src, flags=re.M)
    src = re.sub(r"^from \.(\w+) import", rf"from {package}.\1 import", src, flags=re.M)
    # named inside the package, so that onnxjit compiles it as it does its own kernels (its
    # prange levels left unoptimized, its callees without machine code: kernels/parallel.py,
    # kernels/callees.py); under another name a copy of the same 1x1 conv ran 20% faster
    # than the package's copy at 2 threads
    name = (f"{package}.ab_{tag}_{re.sub(r'[^0-9A-Za-z]', '_', rev)}_"
            f"{os.path.basename(path)[:-3]}")
    file = os.path.join(_DIR, name + ".py")
    with open(file, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
