"""Hand-written Numba kernels (Conv, pooling, MatMul/Gemm) and their shape helpers."""
from ..threads import preload_tbb

preload_tbb()   # before any kernel launches Numba's threads (see onnxjit/threads.py)
