"""tools/ab_round_robin.py, the kernel A/B harness of the dev notes: an old revision's kernel
module imports beside the current one, and the round-robin timer ranks what it times."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from ab_round_robin import module_at, rr  # noqa: E402


def test_module_at_imports_a_revision_beside_the_current_module():
    from onnxjit.kernels import parallel
    old = module_at("HEAD", "onnxjit/kernels/parallel.py")
    assert old is not parallel and old.__name__ != parallel.__name__
    for n, parts, align in [(10, 3, 1), (100, 2, 32), (7, 4, 12)]:
        for t in range(parts):
            assert old.split_range(n, parts, t, align) == parallel.split_range(n, parts, t, align)


def test_rr_ranks_the_slower_variant():
    t = rr({"sleep": lambda: time.sleep(0.002), "none": lambda: None}, rounds=20, warm=1)
    assert set(t) == {"sleep", "none"}
    assert t["sleep"] >= 0.002 > t["none"]
    assert np.isfinite(list(t.values())).all()
