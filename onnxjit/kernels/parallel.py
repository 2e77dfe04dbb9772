"""The parallel layer: thread count, work splitting and the thresholds below which a kernel
stays on the calling thread.

A fork/join of Numba's OpenMP/TBB pool costs a few microseconds when its workers spin and
~1 ms when they sleep, so each parallel kernel runs serially below a work threshold.  The
thresholds live here, in one table, in the unit each kernel counts.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.ufunc.parallel import _launch_threads

_launch_threads()  # registers the threading layer's symbols (num_threads, prange) with LLVM

from . import JIT as _JIT

# An int64 zero, and False, for call sites between kernels (the serial call of a part function
# that the threaded path calls with split_range bounds): a literal 0 argument makes Numba
# compile a separate specialization of the callee (and of everything it calls) beside the
# int64 one a parallel caller needs, which cost ~20% of a first ResNet-50 prepare.
I0 = np.int64(0)
NO = np.bool_(False)

# Work thresholds: below these a kernel runs on one thread.
PAR_MIN_MACS = 1 << 19        # GEMM-like kernels (sgemm, bmm, packed / strided conv): multiply-adds
QGEMM_PAR_MIN_MACS = 1 << 21     # int8 GEMM (qgemm): u8 x s8 multiply-adds, 2-4x the fp32 rate
WINOGRAD_PAR_MIN_MACS = 1 << 20   # Winograd conv: output pixels x M x C (winograd.py says why)
CONCAT_PAR_MIN = 1 << 17      # Concat: output elements
POOL_PAR_MIN = 1 << 17        # pooling: window taps in all (outputs x kernel size)
RESIZE_PAR_MIN = 1 << 17      # bilinear Resize of planes: output elements
CONVT_PAR_MIN = 1 << 17       # ConvTranspose kernel == stride (output tiles): output elements
LRN_PAR_MIN = 1 << 18         # LRN: multiply-adds (elements x window size)


@intrinsic
def num_threads(typingctx):
    """numba.get_num_threads() for jitted code that must stay disk-cacheable.

    Numba's own overload calls the threading layer through a ctypes pointer, which makes
    a function uncacheable ("dynamic globals"); this calls the symbol Numba registers with
    LLVM when it launches its threads (done at import of this module).
    """
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), []), "get_num_threads")
        return builder.call(fn, [])
    return types.intp(), codegen


@njit(inline="always", **_JIT)
def split_range(n, parts, t, align):
    """[start, stop) of part t when [0, n) is cut into `parts` near-equal runs whose
    boundaries are multiples of `align`."""
    units = (n + align - 1) // align
    return min(n, units * t // parts * align), min(n, units * (t + 1) // parts * align)
