"""Hand-written Numba kernels (Conv, pooling, MatMul/Gemm) and their shape helpers."""

from numba.core.cpu_options import ParallelOptions

# The njit options of the library kernels: machine code cached on disk; numpy's error model (a
# division by zero gives inf/nan, no exception checks in loops); no cfunc wrapper, which Numba
# otherwise compiles for every function and signature as a C-callable twin (nothing here takes a
# kernel's address as a C function pointer), a few percent of every compile.
JIT = dict(cache=True, error_model="numpy", no_cfunc_wrapper=True)

# What the kernels' parallel=... turns on: only their explicit prange loops.  Numba's
# parallel=True also makes a parallel region of every array expression (np.zeros, np.full,
# a + b, ...), each a fork/join of its own: the scratch zeroing of a small Winograd Conv
# forked three times before its one prange, making it slower on two threads than on one.
# An instance, not a dict: Numba pops the keys of a dict it is given, so a shared dict would
# turn everything back on for the second signature compiled.
PRANGE_ONLY = ParallelOptions(dict(comprehension=False, reduction=False, inplace_binop=False,
                                   setitem=False, numpy=False, stencil=False, fusion=False,
                                   prange=True))
