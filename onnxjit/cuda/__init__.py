"""The CUDA target: `prepare(model, "CUDA")` compiles a graph to numba.cuda kernels.

front end   lower.py    specialize (shared with the CPU target) with CUDA lowerings (ops.py,
                        ops_nn.py) for ops the CPU target runs as library calls
plan        ..plan      fused elementwise groups (shared)
emit        fused.py    fused groups -> generated @cuda.jit kernels (codegen_templates/cuda_*)
            launch.py   planned kernels -> launch records (kernel, grid, block, arguments)
kernels     kernels/    hand-written numba.cuda kernels; cublas.py: cuBLAS GEMMs (libcublas)
run         runtime.py  buffers bound once per signature, launches replayed as a CUDA graph;
                        rep.py the BackendRep
target      target.py   the target description (device, simulator, launch shapes, GEMM route)
"""
from __future__ import annotations

import numpy as _np

from ..errors import ModelError, UnsupportedOpError
from .target import available, device_index

# numba-cuda 0.30 registers an overload of np.row_stack, which numpy 2.5 removed: its CUDA target
# then fails to load its registries at the first compile ("module 'numpy' has no attribute
# 'row_stack'", seen on an H200 with numpy 2.5.2). row_stack was an alias of vstack.
if not hasattr(_np, "row_stack"):
    _np.row_stack = _np.vstack


def _guard_cuda_cache():
    """numba-cuda keeps its own copy of Numba's cache classes (numba.cuda.core.caching): the
    CPU target's guard against damaged or unwritable cache files goes on them too."""
    try:
        from numba.cuda.core import caching
    except ImportError:      # an older numba-cuda: CUDA kernels use numba.core.caching
        return
    from ..compile import guard_numba_cache
    guard_numba_cache(caching)


_guard_cuda_cache()


def is_cuda_device(device):
    """True for "CUDA" and "CUDA:<n>"."""
    return device_index(device) is not None


def supports_cuda_device(device):
    """A CUDA device that numba.cuda can run kernels on here (the simulator counts)."""
    return is_cuda_device(device) and available()


def unsupported(model):
    """The (domain, op_type, opset) triples the CUDA target has no lowering for."""
    from .lower import unsupported_cuda_ops
    return unsupported_cuda_ops(model)


def prepare_cuda(model, device="CUDA", **kwargs):
    """A CudaRep of a loaded ModelProto for `device` (compiled now when input shapes are static)."""
    from .rep import CudaRep
    from .target import target_for
    target = target_for(device)
    if not model.HasField("graph"):
        raise ModelError("the model has no graph")
    # The CPU target's checks (validate.py: types, attributes, axes, limits), before any code is
    # generated and before the CUDA target's own op coverage: an invalid model onnxjit lowers on
    # the CPU is refused with the CPU's error (ops onnxjit knows nowhere are refused first, as
    # there).
    from ..staged import unsupported_ops
    from ..validate import check_model
    missing = unsupported(model)
    if not (missing and unsupported_ops(model)):
        check_model(model, kwargs.get("max_elements"), kwargs.get("max_nesting"))
    if missing:
        names = ", ".join(f"{d}::{op} (opset {v})" for d, op, v in missing)
        raise UnsupportedOpError(f"the CUDA target cannot lower: {names}", missing)
    return CudaRep(model, device, target, kwargs.get("max_signatures", 32),
                   graphs=kwargs.get("cuda_graphs"), lazy=bool(kwargs.get("lazy", False)),
                   max_elements=kwargs.get("max_elements"))
