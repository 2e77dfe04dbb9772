"""onnxjit: an ONNX backend that compiles graphs to native code with Numba."""
from .threads import preload_tbb

preload_tbb()   # before Numba starts its threads: TBB, where installed (see onnxjit/threads.py)

from .backend import OnnxJitBackend, OnnxJitRep, list_unsupported, prepare, run_model, run_node
from .errors import (InputError, KernelError, LoweringError, ModelError, OnnxJitError,
                     UnsupportedOpError)

__version__ = "0.1.0"
__all__ = ["OnnxJitBackend", "OnnxJitRep", "prepare", "run_model", "run_node", "list_unsupported",
           "InputError", "KernelError", "LoweringError", "ModelError", "OnnxJitError",
           "UnsupportedOpError"]
