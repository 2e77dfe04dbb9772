"""onnxjit: an ONNX backend that compiles graphs to native code with Numba."""
from .threads import preload_tbb

preload_tbb()   # before Numba starts its threads: TBB, where installed (see onnxjit/threads.py)

from .backend import OnnxJitBackend, OnnxJitRep, list_unsupported, prepare, run_model, run_node
from .errors import (InputError, KernelError, LoweringError, ModelError, OnnxJitError,
                     UnsupportedOpError)
# ONNX Runtime's Python API (`import onnxjit as ort`): see onnxjit/session.py
from .session import InferenceSession
from .session_model import ModelMetadata, NodeArg
from .session_options import (ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions,
                              SessionOptions, get_all_providers, get_available_providers,
                              get_device, set_default_logger_severity)
from .session_values import IOBinding, OrtValue

__version__ = "0.1.0"
__all__ = ["OnnxJitBackend", "OnnxJitRep", "prepare", "run_model", "run_node", "list_unsupported",
           "InputError", "KernelError", "LoweringError", "ModelError", "OnnxJitError",
           "UnsupportedOpError", "InferenceSession", "SessionOptions", "RunOptions",
           "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "NodeArg", "ModelMetadata",
           "OrtValue", "IOBinding", "get_available_providers", "get_all_providers", "get_device",
           "set_default_logger_severity"]
