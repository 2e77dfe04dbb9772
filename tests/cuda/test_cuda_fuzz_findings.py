"""What the fuzz harness found, on the CUDA target (tests/test_fuzz_findings.py has the CPU's)."""
import importlib.util
import os

import numpy as np
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend

_spec = importlib.util.spec_from_file_location(
    "onnxjit_test_fuzz_findings",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test_fuzz_findings.py"))
_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cpu)


def test_cuda_matmul_batch_of_one_against_an_empty_batch():
    """A batch dim of 1 against one of 0 broadcasts to 0 (seed 3 case 1009 on the CPU)."""
    model = _cpu._matmul_model(np.float32, _cpu.EMPTY_BATCHES)
    rng = np.random.default_rng(3)
    feeds = {}
    for i, (sa, sb) in enumerate(_cpu.EMPTY_BATCHES):
        feeds[f"a{i}"] = rng.standard_normal(sa).astype(np.float32)
        feeds[f"b{i}"] = rng.standard_normal(sb).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = backend.prepare(model, "CUDA").run(feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape)
