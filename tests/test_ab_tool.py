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


def test_ab_processes_runs_each_tree_in_turn(tmp_path):
    """tools/ab_processes.py: each tree first on PYTHONPATH in its own process, the script's
    last line of numbers per run, medians and per-run ratios new / base."""
    from ab_processes import compare
    for name, value in (("base", 10.0), ("new", 25.0)):
        tree = tmp_path / name
        tree.mkdir()
        (tree / "abmark.py").write_text(f"VALUE = {value}\n")
    script = tmp_path / "show.py"
    script.write_text("import abmark\nprint('warming up')\nprint(abmark.VALUE, 2 * abmark.VALUE)\n")
    r = compare(str(tmp_path / "base"), str(tmp_path / "new"), [str(script)], runs=2)
    assert r["base"] == [10.0, 20.0] and r["new"] == [25.0, 50.0]
    assert r["ratio"] == [2.5, 2.5]
