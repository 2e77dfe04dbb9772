"""The CUDA target description: which device, simulator or hardware, launch shapes, GEMM route.

Chosen once at prepare and passed down to the lowerings, the launch builder and the runtime, so
kernel choice happens in one place. Also the small device helpers every layer needs (is a value
a device array, make it one), which differ between Numba's CUDA simulator and real hardware.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from onnx.backend.base import Device, DeviceType

from ..errors import DeviceError

# Threads per block of the elementwise and movement kernels (grid-stride loops).
THREADS = 256
# The simulator runs every GPU thread as a Python thread: keep its grids tiny (grid-stride loops
# cover any size with few threads, so every code path is still exercised).
SIM_THREADS, SIM_BLOCKS = 32, 4


def simulator():
    """True when Numba's CUDA simulator stands in for a GPU (NUMBA_ENABLE_CUDASIM=1)."""
    try:
        from numba.cuda.core import config      # numba-cuda
    except ImportError:
        from numba.core import config           # Numba's own CUDA target (older Numba)
    return bool(config.ENABLE_CUDASIM)


def available():
    """True when numba.cuda can run kernels here: a GPU and driver, or the simulator."""
    try:
        from numba import cuda
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def device_index(device):
    """The ordinal n of "CUDA" (0) or "CUDA:<n>"; None for a device that is not CUDA."""
    try:
        parsed = Device(device)
    except Exception:
        return None
    return parsed.device_id if parsed.type == DeviceType.CUDA else None


def check_available(device):
    """Raise a clear error (DeviceError, a ValueError) naming `device` when it cannot be used
    here; returns its ordinal."""
    index = device_index(device)
    if index is None:
        raise ValueError(f"device {device!r} is not a CUDA device")
    try:
        import numba.cuda  # noqa: F401
    except ImportError:
        raise DeviceError(f"device {device!r}: numba.cuda is missing; install the CUDA extra "
                           "(pip install 'onnxjit[cuda]')") from None
    if not available():
        raise DeviceError(f"device {device!r}: no CUDA GPU or driver is available here "
                           "(NUMBA_ENABLE_CUDASIM=1 runs the CUDA target on Numba's simulator)")
    from numba import cuda
    count = 1 if simulator() else len(cuda.gpus)
    if index >= count:
        raise DeviceError(f"device {device!r}: only {count} CUDA device(s) here")
    return index


@dataclass(frozen=True)
class CudaTarget:
    """What kernel choice and launch shapes depend on."""
    index: int = 0
    simulated: bool = False
    threads: int = THREADS        # per block, grid-stride kernels
    max_blocks: int = 65535       # cap on grid-stride grids (a few waves of the device)
    cublas: bool = False          # MatMul/Gemm/Conv GEMMs through CuPy (cuBLAS)

    def grid(self, n):
        """(blocks, threads) of a grid-stride launch over n items."""
        threads = self.threads
        return max(1, min(self.max_blocks, -(-int(n) // threads))), threads


def target_for(device):
    """The CudaTarget of `device` on this machine (the GPU must be available)."""
    index = check_available(device)
    if simulator():
        return CudaTarget(index, True, SIM_THREADS, SIM_BLOCKS, False)
    from numba import cuda
    with cuda.gpus[index]:
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    return CudaTarget(index, False, THREADS, sms * 8, cupy_usable())


def cupy_usable():
    """CuPy importable and not switched off (ONNXJIT_CUDA_CUBLAS=0)."""
    if os.environ.get("ONNXJIT_CUDA_CUBLAS", "1") == "0":
        return False
    try:
        import cupy  # noqa: F401
    except Exception:
        return False
    return True


# -- device arrays ---------------------------------------------------------------------------------
_DEVICE_TYPES = set()     # array types always on the device (Numba's, CuPy's): no probing


def is_device_array(x):
    """Anything exposing `__cuda_array_interface__` (Numba, CuPy, PyTorch CUDA tensors), or a
    simulator device array."""
    t = type(x)
    if t in _DEVICE_TYPES:
        return True
    if t is np.ndarray:
        return False
    if hasattr(x, "__cuda_array_interface__") or (simulator() and t.__name__ == "FakeCUDAArray"):
        if t.__module__.split(".")[0] in ("numba", "cupy"):
            _DEVICE_TYPES.add(t)
        return True
    return False


def as_device_array(x):
    """A numba device array sharing `x`'s memory (no copy)."""
    from numba import cuda
    if simulator():
        return x
    return cuda.as_cuda_array(x)
