"""Moved to onnxjit/tools/conformance.py. `python -m onnxjit.conformance` runs it; importing
onnxjit.conformance gives that module itself (old imports keep working)."""
import sys

from onnxjit.tools import conformance as _tool

if __name__ == "__main__":
    sys.exit(_tool.main())
elif __name__ == "onnxjit.conformance":     # not as multiprocessing's __mp_main__
    sys.modules[__name__] = _tool
