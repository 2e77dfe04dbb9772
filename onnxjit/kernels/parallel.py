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
from . import callees
from .simd import elem_ptr

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


# -- atomics on int64 arrays: the claims and counters of kernels whose threads hand work to each
#    other inside one parallel region (kernels/rnn_seq.py's two-thread recurrence) -----------
def _is_i64_array(a):
    return isinstance(a, types.Array) and a.dtype == types.int64 and a.ndim == 1


@intrinsic
def atomic_cas(typingctx, a, i, expected, new):
    """a[i] = new if a[i] == expected, atomically (sequentially consistent); True if it did."""
    if not _is_i64_array(a):
        return None

    def codegen(context, builder, sig, args):
        ptr = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        res = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(res, 1)
    return types.boolean(a, types.intp, types.int64, types.int64), codegen


@intrinsic
def atomic_add(typingctx, a, i, v):
    """a[i] += v atomically, releasing this thread's earlier writes to whoever reads a[i]
    with atomic_load; returns the old value."""
    if not _is_i64_array(a):
        return None

    def codegen(context, builder, sig, args):
        ptr = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.atomic_rmw("add", ptr, args[2], "acq_rel")
    return types.int64(a, types.intp, types.int64), codegen


@intrinsic
def atomic_load(typingctx, a, i):
    """a[i], read atomically with acquire ordering (the writes released before it are seen)."""
    if not _is_i64_array(a):
        return None

    def codegen(context, builder, sig, args):
        ptr = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(a, types.intp), codegen


@njit(inline="always", **_JIT)
def split_range(n, parts, t, align):
    """[start, stop) of part t when [0, n) is cut into `parts` near-equal runs whose
    boundaries are multiples of `align`."""
    units = (n + align - 1) // align
    return min(n, units * t // parts * align), min(n, units * (t + 1) // parts * align)


# -- compile time of the prange levels ----------------------------------------------------------
# A kernel's `prange` loop is lowered by Numba into a gufunc (the loop body) and two wrappers,
# three libraries of their own, and every library links in its callees' code and runs LLVM's
# module pipelines over all of it again: for a pooling entry that is ~5 s of its compile on top
# of the serial body (2026-11-26, `numba:compile` events). In onnxjit's kernels the body of a
# prange loop is thin by design (split_range, then a call of a helper that was optimized in its
# own library), so re-optimizing at the gufunc and wrapper levels finds nothing to do: skipping
# those two module pipelines there cuts a pooling entry's compile 6.0 -> 4.1 s with the same
# machine code speed (139 -> 105 us at 1 thread, 81 -> 82 at 2: noise). Only libraries that
# are a parfor gufunc or its wrappers, made while a function of onnxjit.kernels compiles, whose
# own code (before linking) is under THIN_INSTRUCTIONS: anything with real work inline, a fused
# kernel's prange (not in onnxjit.kernels) and every other library are optimized as before.
THIN_INSTRUCTIONS = 1000    # the gufunc bodies of onnxjit's kernels: 100-710 (many arguments)
TRIMMED = []          # the names of the libraries whose module pipelines were skipped (diagnostics)


def _trim_prange_levels():
    from numba.core import codegen

    callees.install()       # machine code of the levels and callees; the compiling stack
    lib_class = getattr(codegen, "CPUCodeLibrary", None)
    finalize = getattr(lib_class, "finalize", None)      # callees' patch of it, wrapped again
    optimize = getattr(lib_class, "_optimize_final_module", None)
    if finalize is None or optimize is None or getattr(lib_class, "_onnxjit_trim", False):
        return

    def thin_gufunc_level(lib):
        if not callees.prange_level(lib, ("onnxjit.kernels",)):
            return False
        size = 0
        for fn in lib._final_module.functions:
            if not fn.is_declaration:
                for block in fn.blocks:
                    size += sum(1 for _ in block.instructions)
                    if size >= THIN_INSTRUCTIONS:
                        return False
        return True

    def trimmed_finalize(self):
        self._onnxjit_thin = thin_gufunc_level(self)     # measured before the callees link in
        return finalize(self)

    def trimmed_optimize(self):
        if getattr(self, "_onnxjit_thin", False):
            TRIMMED.append(self.name)
            return
        return optimize(self)

    lib_class.finalize = trimmed_finalize
    lib_class._optimize_final_module = trimmed_optimize
    lib_class._onnxjit_trim = True


_trim_prange_levels()
