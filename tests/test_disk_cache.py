"""A second process preparing the same model loads machine code from the disk cache."""
import json
import os
import subprocess
import sys

from helpers import chain_model

CHILD = r"""
import json, sys, onnx
import onnxjit.backend as backend
rep = backend.prepare(onnx.load(sys.argv[1]))
c = rep.compiled()
stats = c.module.run_graph.stats
print(json.dumps({"path": c.path, "hits": stats.cache_hits and sum(stats.cache_hits.values()),
                  "misses": stats.cache_misses and sum(stats.cache_misses.values())}))
"""


def _prepare_in_child(model_path, cache):
    env = dict(os.environ, ONNXJIT_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_from_disk(tmp_path):
    import onnx
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(dims=(3, 5)), path)
    first = _prepare_in_child(path, tmp_path / "cache")
    second = _prepare_in_child(path, tmp_path / "cache")
    assert first["path"] == second["path"] and first["path"].startswith(str(tmp_path / "cache"))
    assert first["misses"] >= 1 and not first["hits"]
    assert second["hits"] >= 1 and not second["misses"]
