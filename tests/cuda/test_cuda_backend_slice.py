"""A CUDA slice of the official ONNX backend test suite, run with device "CUDA".

The slice: the node tests (not the `_expanded` function bodies) whose every op the CUDA target
lowers, with tensor inputs and outputs of at most SLICE_MAX_ELEMENTS elements in all (under the
simulator every GPU thread runs in Python). Tests of the slice that do not pass are listed,
each with its reason, in backend_exclusions.txt beside this file: left out of the run, not
skipped. `python tests/cuda/test_cuda_backend_slice.py` prints the slice's size.
"""
import functools
import os
import re
import warnings

import numpy as np
import onnx.backend.test
from onnx.backend.test.loader import load_model_tests

import onnxjit.backend
from onnxjit.cuda.lower import unsupported_cuda_ops

SLICE_MAX_ELEMENTS = 256
EXCLUSIONS = os.path.join(os.path.dirname(__file__), "backend_exclusions.txt")


def load_exclusions(path=EXCLUSIONS):
    """{test name: reason} from lines `test_name  # reason`."""
    out = {}
    with open(path) as f:
        for line in f:
            name, _, reason = line.partition("#")
            if name.strip():
                out[name.strip()] = reason.strip()
    return out


@functools.lru_cache(maxsize=None)
def slice_names():
    """The `<node test>_cuda` names of the slice (exclusions included)."""
    names = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    for case in cases:
        if "_expanded" in case.name or unsupported_cuda_ops(case.model):
            continue
        arrays = [a for inputs, outputs in case.data_sets[:1] for a in list(inputs) + list(outputs)]
        if all(isinstance(a, np.ndarray) for a in arrays) and \
                sum(a.size for a in arrays) <= SLICE_MAX_ELEMENTS:
            names.add(f"{case.name}_cuda")
    return frozenset(names)


def _slice_cases():
    suite = onnx.backend.test.BackendTest(onnxjit.backend, __name__)
    suite.include(r"_cuda$")
    keep = slice_names() - set(load_exclusions())
    cases = suite.test_cases
    for cls in cases.values():
        for attr in list(vars(cls)):
            if attr.startswith("test_") and attr not in keep:
                delattr(cls, attr)
    return cases


globals().update(_slice_cases())


def test_exclusions_have_reasons_and_belong_to_the_slice():
    for name, reason in load_exclusions().items():
        assert name in slice_names(), f"{name} is not a test of the CUDA slice"
        assert re.search(r"\w", reason), f"{name} has no reason"


if __name__ == "__main__":
    excluded = load_exclusions()
    print(f"CUDA slice: {len(slice_names())} node tests, {len(excluded)} excluded, "
          f"{len(slice_names()) - len(excluded)} run")
