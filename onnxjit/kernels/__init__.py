"""Hand-written Numba kernels (Conv, pooling, MatMul/Gemm) and their shape helpers."""
