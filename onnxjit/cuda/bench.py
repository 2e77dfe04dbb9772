"""Moved to onnxjit/tools/cuda_bench.py (`onnxjit bench --device CUDA`). Importing
onnxjit.cuda.bench gives that module itself, so old imports keep working."""
import sys

from onnxjit.tools import cuda_bench as _tool

sys.modules[__name__] = _tool
