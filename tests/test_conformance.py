"""The official ONNX backend test suite (CPU, every kind) through onnxjit.

Tests that do not pass yet are listed, each with a reason, in conformance_exclusions.txt beside
this file; they are left out of the run (not skipped), and that list only shrinks.
"""
import os
import re

import onnx.backend.test

import onnxjit.backend

EXCLUSIONS = os.path.join(os.path.dirname(__file__), "conformance_exclusions.txt")


def load_exclusions(path=EXCLUSIONS):
    """{test name: reason} from lines `test_name  # reason`."""
    out = {}
    with open(path) as f:
        for line in f:
            name, _, reason = line.partition("#")
            name = name.strip()
            if name:
                out[name] = reason.strip()
    return out


def _conformance_cases():
    suite = onnx.backend.test.BackendTest(onnxjit.backend, __name__)
    suite.include(r"_cpu$")
    excluded = load_exclusions()
    cases = suite.test_cases
    for cls in cases.values():
        for attr in list(vars(cls)):
            if attr.startswith("test_") and (attr in excluded or not attr.endswith("_cpu")):
                delattr(cls, attr)
    return cases


globals().update(_conformance_cases())


def test_exclusions_have_reasons_and_name_real_tests():
    suite = onnx.backend.test.BackendTest(onnxjit.backend, __name__)
    names = {n for items in suite._test_items.values() for n in items}
    for name, reason in load_exclusions().items():
        assert name in names, f"{name} is not a test of the suite"
        assert re.search(r"\w", reason), f"{name} has no reason"
