"""numba.cuda kernels of the CUDA target: scalar helpers for fused bodies, then library kernels
(movement, reductions, normalization, pooling, GEMM, convolution). Every array argument is a flat
1-D C-contiguous device array: shapes travel as integers or small int64 device arrays, so one
compiled kernel serves every shape and rank (numba compiles once per dtype signature)."""
