"""Moved to onnxjit/tools/models.py (the built-in benchmark models). Importing onnxjit.models gives
that module itself, so old imports keep working."""
import sys

from onnxjit.tools import models as _tool

sys.modules[__name__] = _tool
