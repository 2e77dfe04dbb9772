"""Moved to onnxjit/tools/conformance.py. `python -m onnxjit.conformance` runs it; importing
onnxjit.conformance gives that module itself (old imports keep working)."""
import sys

from onnxjit.tools import conformance as _tool

if __name__ == "__main__":
    sys.exit(_tool.main())
else:
    sys.modules[__name__] = _tool
