"""Moved to onnxjit/tools/bench.py (`onnxjit bench`). Importing onnxjit.bench gives that module
itself, so old imports and monkeypatches keep working; `python -m onnxjit.bench` runs it."""
import sys

from onnxjit.tools import bench as _tool

if __name__ == "__main__":
    sys.exit(_tool.main())
elif __name__ == "onnxjit.bench":     # not as multiprocessing's __mp_main__
    sys.modules[__name__] = _tool
