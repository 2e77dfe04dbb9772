"""The SIMD layer: explicit float32 vector types, one per width, and the intrinsics that emit
their LLVM IR.

LLVM's auto-vectoriser prefers 256-bit vectors on skylake-avx512-class CPUs, so loops never
use zmm registers.  Instead the Numba types ``F32x16`` / ``F32x8`` / ``F32x4`` (``F32xN``) have
the LLVM vector ``<N x float>`` as their data model, and a handful of ``@intrinsic``s (load /
broadcast / fma / add / select / relu / masked load and store / prefetch / 16 x 16 transpose /
lane sum and max) emit vector IR directly; accumulators are plain local variables, so LLVM keeps
them in registers (explicit 512-bit vector IR is legal without any function attribute: the X86
backend only narrows vectors it created itself).  The intrinsics do NO bounds checking - their
callers guarantee every access is in range (prefetches may point past the end; they never
fault).  Every intrinsic is static (no dynamic globals), so the kernels built on them stay
disk-cacheable.

Widths.  ``LANES`` is the target's width, chosen once from ``onnxjit.target.host()``
(``f32_lanes``: 16 on AVX-512, 8 on AVX2, 4 on the generic target / NEON-class), and
``native`` is the set of vector constructors of that width: a kernel written against
``native`` (``V.load``, ``V.zero``, ``V.splat``, ``V.LANES`` ...) runs one register per vector
on every target (kernels/normalization.py's Softmax and LayerNorm rows).  ``w16``, ``w8`` and
``w4`` are the sets of a fixed width.  The element-wise intrinsics (``vfma``, ``vadd``,
``vmax``, ``vstore``, ``vhsum`` ...) take vectors of any width (all of one width).

The module-level constructors (``vload``, ``vbcast``, ``vzero``, ``vsplat``, ``vloadm``,
``vload_span``) and ``LANES16`` are the 16-lane set, for the kernels designed around 16 lanes:
the register-blocked GEMM micro-kernels (12 x 32 tiles in zmm; AVX2 has its own 6 x 16 ones in
ymm pairs), the in-register transposes (``vtranspose``: depthwise 3x3, transposes),
pooling rows, the Winograd and recurrent kernels.  They are chosen where ``has_avx512()`` (or
``target.split16``: few live vectors, which AVX2 runs as ymm halves at the same FMA peak).

Layers: simd (this module) and parallel (threads) sit under the kernels; microkernels.py
(generated) and the GEMM / conv / pooling / normalization kernels import from them.
"""

import types as _pytypes

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.extending import intrinsic, register_model

from . import JIT as _JIT
from ..target import host as _host

LANES16 = 16                     # the lanes of the module-level (16-lane) constructors
LANES = _host().f32_lanes        # the target's float32 lanes per register (16, 8 or 4)


class F32xNType(types.Type):
    """Numba type of an LLVM <N x float> value (one zmm register for N = 16, ymm for 8, xmm
    for 4)."""

    def __init__(self, lanes=16):
        self.lanes = lanes
        super().__init__(name=f"F32x{lanes}")


F32x16Type = F32xNType             # the name kernels imported before widths existed
f32x16, f32x8, f32x4 = F32xNType(16), F32xNType(8), F32xNType(4)
_F32 = {16: f32x16, 8: f32x8, 4: f32x4}
VEC = ir.VectorType(ir.FloatType(), 16)
I32 = ir.IntType(32)
I8P = ir.IntType(8).as_pointer()
F32_1D = types.Array(types.float32, 1, "C")


@register_model(F32xNType)
class _F32xNModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.FloatType(), fe_type.lanes))


def has_avx512():
    """True when Numba generates code for a CPU with AVX-512F (``target.host().avx512``).

    Without it the 16-lane kernels still compute correctly, but LLVM splits every <16 x float>
    into narrower vectors and the register-blocked GEMMs' 24 accumulators spill: callers use
    BLAS or the AVX2 kernels instead.
    """
    return _host().avx512


# ----------------------------------------------------------------------------------------
# codegen helpers (for intrinsics defined here and in sibling kernels)
# ----------------------------------------------------------------------------------------


def _is_vec(t):
    return isinstance(t, F32xNType)


def _same_vecs(*ts):
    """The common vector type of `ts`, or None when they are not vectors of one width."""
    return ts[0] if all(_is_vec(t) for t in ts) and len(set(ts)) == 1 else None


def elem_ptr(context, builder, aryty, ary, idx):
    """Pointer to ary[idx] for a 1-D C array (no bounds check): float32 here, int64 for
    kernels/parallel.py's atomics."""
    arr = context.make_array(aryty)(context, builder, ary)
    return builder.gep(arr.data, [idx])


def splat(builder, x, lanes=16):
    """The scalar x in all `lanes` lanes."""
    vec = ir.VectorType(x.type, lanes)
    v = builder.insert_element(ir.Constant(vec, ir.Undefined), x, I32(0))
    return builder.shuffle_vector(v, ir.Constant(vec, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def lane_mask(builder, cnt, lanes=16):
    """<lanes x i1>: lane i set when i < cnt (cnt an intp)."""
    iota = ir.Constant(ir.VectorType(I32, lanes), list(range(lanes)))
    n = builder.trunc(cnt, I32)
    nv = builder.insert_element(ir.Constant(ir.VectorType(I32, lanes), ir.Undefined), n, I32(0))
    nv = builder.shuffle_vector(nv, ir.Constant(ir.VectorType(I32, lanes), ir.Undefined),
                                ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
    return builder.icmp_signed("<", iota, nv)


def masked_fn(builder, kind, lanes):
    """The declaration of llvm.masked.load (kind "load": ptr, align, mask, passthru -> vec) or
    llvm.masked.store (kind "store": vec, ptr, align, mask) for <lanes x float>."""
    vec = ir.VectorType(ir.FloatType(), lanes)
    mask = ir.VectorType(ir.IntType(1), lanes)
    fnty = (ir.FunctionType(vec, [vec.as_pointer(), I32, mask, vec]) if kind == "load" else
            ir.FunctionType(ir.VoidType(), [vec, vec.as_pointer(), I32, mask]))
    return cgutils.get_or_insert_function(builder.module, fnty,
                                          f"llvm.masked.{kind}.v{lanes}f32.p0")


def lane_op(name, method, doc):
    """An intrinsic computing builder.<method>(a, b) on two vectors of one width."""
    def op(typingctx, a, b):
        t = _same_vecs(a, b)
        if t is None:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, method)(args[0], args[1])
        return t(t, t), codegen
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return intrinsic(op)


# ----------------------------------------------------------------------------------------
# width-generic intrinsics: the width comes from the vector arguments
# ----------------------------------------------------------------------------------------


@intrinsic
def vstore(typingctx, a, i, v):
    """a[i:i+N] = v (unaligned store)."""
    if a != F32_1D or not _is_vec(v):
        return None

    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(p, args[2].type.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(a, types.intp, v), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """a * b + c, fused (llvm.fma -> vfmadd231ps)."""
    t = _same_vecs(a, b, c)
    if t is None:
        return None

    def codegen(context, builder, sig, args):
        vec = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{t.lanes}f32")
        return builder.call(fn, args)
    return t(t, t, t), codegen


vadd = lane_op("vadd", "fadd", "a + b.")
vsub = lane_op("vsub", "fsub", "a - b.")
vmul = lane_op("vmul", "fmul", "a * b.")


@intrinsic
def vsel(typingctx, cond, a, b):
    """cond ? a : b for a scalar bool cond (no branch)."""
    t = _same_vecs(a, b)
    if t is None:
        return None

    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])
    return t(types.boolean, t, t), codegen


@intrinsic
def vrelu_if(typingctx, a, cond):
    """(cond and a < 0) ? 0 : a, lane-wise (NaN stays NaN)."""
    if not _is_vec(a):
        return None
    lanes = a.lanes

    def codegen(context, builder, sig, args):
        z = ir.Constant(args[0].type, [0.0] * lanes)
        neg = builder.fcmp_ordered("<", args[0], z)
        b1 = ir.VectorType(ir.IntType(1), lanes)
        c = builder.insert_element(ir.Constant(b1, ir.Undefined), args[1], I32(0))
        c = builder.shuffle_vector(c, ir.Constant(b1, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
        m = builder.and_(neg, c)
        return builder.select(m, z, args[0])
    return a(a, types.boolean), codegen


@intrinsic
def prefetch(typingctx, a, i):
    """prefetcht0 &a[i] (any index: a prefetch never faults)."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        p = builder.bitcast(elem_ptr(context, builder, sig.args[0], args[0], args[1]), I8P)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [I8P, I32, I32, I32]),
            "llvm.prefetch.p0i8")
        builder.call(fn, [p, I32(0), I32(3), I32(1)])
        return context.get_dummy_value()
    return types.void(a, types.intp), codegen


@intrinsic
def vstorem(typingctx, a, i, v, cnt):
    """a[i:i+cnt] = first cnt lanes of v (llvm.masked.store; other lanes untouched)."""
    if a != F32_1D or not _is_vec(v):
        return None
    lanes = v.lanes

    def codegen(context, builder, sig, args):
        vec = args[2].type
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        m = lane_mask(builder, args[3], lanes)
        builder.call(masked_fn(builder, "store", lanes),
                     [args[2], builder.bitcast(p, vec.as_pointer()), I32(4), m])
        return context.get_dummy_value()
    return types.void(a, types.intp, v, types.intp), codegen


def _rows_tuple(rows):
    """The N-lane vector type of a tuple of N vectors (``vtranspose``'s), else None."""
    if (isinstance(rows, types.UniTuple) and isinstance(rows.dtype, F32xNType)
            and rows.count == rows.dtype.lanes):
        return rows.dtype
    return None


@intrinsic
def vstore_rows(typingctx, a, i, stride, rows, nrows, cnt):
    """a[i + r*stride : + cnt] = the first cnt lanes of rows[r], for r < nrows (a tuple of N
    N-lane vectors, cnt <= N): unrolled, plain stores when cnt == N, masked ones otherwise
    (indexing a tuple at run time would spill it to the stack)."""
    t = _rows_tuple(rows)
    if a != F32_1D or t is None:
        return None
    n = t.lanes

    def codegen(context, builder, sig, args):
        i, stride, nrows, cnt = args[1], args[2], args[4], args[5]      # intp
        vec = ir.VectorType(ir.FloatType(), n)
        fn = masked_fn(builder, "store", n)
        full = builder.icmp_signed(">=", cnt, ir.Constant(cnt.type, n))
        mask = lane_mask(builder, cnt, n)
        for r in range(n):
            k = ir.Constant(i.type, r)
            with builder.if_then(builder.icmp_signed("<", k, nrows)):
                v = builder.extract_value(args[3], r)
                p = builder.bitcast(elem_ptr(context, builder, sig.args[0], args[0],
                                             builder.add(i, builder.mul(k, stride))),
                                    vec.as_pointer())
                with builder.if_else(full) as (then, otherwise):
                    with then:
                        builder.store(v, p, align=4)
                    with otherwise:
                        builder.call(fn, [v, p, I32(4), mask])
        return context.get_dummy_value()
    return types.void(a, types.intp, types.intp, rows, types.intp, types.intp), codegen


@intrinsic
def vscatter_rows(typingctx, a, idx, j, rows, cnt):
    """a[idx[j + r] : + N] = rows[r] for r < cnt (a tuple of N N-lane vectors; idx an int64
    array of offsets into a): unrolled plain stores."""
    t = _rows_tuple(rows)
    if a != F32_1D or t is None or idx != types.Array(types.int64, 1, "C"):
        return None
    n = t.lanes

    def codegen(context, builder, sig, args):
        j, cnt = args[2], args[4]      # intp
        vec = ir.VectorType(ir.FloatType(), n)
        idx = context.make_array(sig.args[1])(context, builder, args[1])
        for r in range(n):
            k = ir.Constant(j.type, r)
            with builder.if_then(builder.icmp_signed("<", k, cnt)):
                o = builder.load(builder.gep(idx.data, [builder.add(j, k)]))
                p = elem_ptr(context, builder, sig.args[0], args[0], o)
                builder.store(builder.extract_value(args[3], r),
                              builder.bitcast(p, vec.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(a, idx, types.intp, rows, types.intp), codegen


def reduce_ir(builder, v, combine):
    """Tree reduction of the lanes of v with combine(builder, lo, hi) -> scalar."""
    width, undef = v.type.count, ir.Constant(v.type, ir.Undefined)
    while width > 1:
        half = width // 2
        lo = builder.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, half),
                                                          list(range(half))))
        hi = builder.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, half),
                                                          list(range(half, width))))
        v, width, undef = combine(builder, lo, hi), half, ir.Constant(lo.type, ir.Undefined)
    return builder.extract_element(v, I32(0))


@intrinsic
def vhmax(typingctx, v):
    """Largest lane (a NaN lane is skipped unless it is compared last: callers keep NaNs out)."""
    if not _is_vec(v):
        return None

    def codegen(context, builder, sig, args):
        return reduce_ir(builder, args[0], lambda b, x, y: b.select(
            b.fcmp_ordered(">", x, y), x, y))
    return types.float32(v), codegen


@intrinsic
def vhsum(typingctx, v):
    """Sum of the lanes (pairwise)."""
    if not _is_vec(v):
        return None

    def codegen(context, builder, sig, args):
        return reduce_ir(builder, args[0], lambda b, x, y: b.fadd(x, y))
    return types.float32(v), codegen


@intrinsic
def vmax(typingctx, a, b):
    """a > b ? a : b per lane: a NaN in `a` leaves b (so a running maximum ignores NaNs)."""
    t = _same_vecs(a, b)
    if t is None:
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[0], args[1]), args[0], args[1])
    return t(t, t), codegen


def shuffle_op(name, masks, doc):
    """An intrinsic: N lanes picked by shuffle mask masks(N) from the 2N of two vectors a, b."""
    def op(typingctx, a, b):
        t = _same_vecs(a, b)
        if t is None:
            return None
        mask = ir.Constant(ir.VectorType(I32, t.lanes), masks(t.lanes))

        def codegen(context, builder, sig, args):
            return builder.shuffle_vector(args[0], args[1], mask)
        return t(t, t), codegen
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return intrinsic(op)


vevens = shuffle_op("vevens", lambda n: list(range(0, 2 * n, 2)),
                    "a[0], a[2], ..., a[N-2], b[0], ..., b[N-2].")
vodds = shuffle_op("vodds", lambda n: list(range(1, 2 * n, 2)),
                   "a[1], a[3], ..., a[N-1], b[1], ..., b[N-1].")
vnext = shuffle_op("vnext", lambda n: list(range(1, n + 1)),
                   "a[1], ..., a[N-1], b[0]: a shifted by one lane.")


@intrinsic
def vtranspose(typingctx, rows):
    """The N x N transpose of a tuple of N N-lane vectors (N = 16, 8 or 4; lane j of vector i
    -> lane i of vector j): log2(N) rounds of two-vector shuffles, each swapping the
    off-diagonal blocks of size N/2, ..., 2, 1 (N/2 log2(N) shuffle pairs: 64 for 16 lanes,
    24 for 8)."""
    if not (isinstance(rows, types.UniTuple) and isinstance(rows.dtype, F32xNType)
            and rows.count == rows.dtype.lanes):
        return None
    ret = rows

    def codegen(context, builder, sig, args):
        n = sig.args[0].count
        v = [builder.extract_value(args[0], i) for i in range(n)]
        s = n // 2
        while s:
            lo = ir.Constant(ir.VectorType(I32, n), [j if not j & s else n + j - s for j in range(n)])
            hi = ir.Constant(ir.VectorType(I32, n), [j + s if not j & s else n + j for j in range(n)])
            for r in range(n):
                if not r & s:
                    a, b = v[r], v[r + s]
                    v[r] = builder.shuffle_vector(a, b, lo)
                    v[r + s] = builder.shuffle_vector(a, b, hi)
            s //= 2
        return context.make_tuple(builder, ret, v)
    return ret(rows), codegen



# ----------------------------------------------------------------------------------------
# constructors: one set per width (w16, w8, w4; `native` is the target's)
# ----------------------------------------------------------------------------------------


def _constructors(lanes):
    """{name: intrinsic} of the vectors of `lanes` lanes made from memory or scalars."""
    t = _F32[lanes]
    vec = ir.VectorType(ir.FloatType(), lanes)

    def load(typingctx, a, i):
        """a[i:i+N] as a vector (unaligned load)."""
        if a != F32_1D:
            return None

        def codegen(context, builder, sig, args):
            p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
            return builder.load(builder.bitcast(p, vec.as_pointer()), align=4)
        return t(a, types.intp), codegen

    def bcast(typingctx, a, i):
        """a[i] broadcast to all lanes (vbroadcastss from memory)."""
        if a != F32_1D:
            return None

        def codegen(context, builder, sig, args):
            x = builder.load(elem_ptr(context, builder, sig.args[0], args[0], args[1]), align=4)
            return splat(builder, x, lanes)
        return t(a, types.intp), codegen

    def zero(typingctx):
        """All-zero vector."""
        def codegen(context, builder, sig, args):
            return ir.Constant(vec, [0.0] * lanes)
        return t(), codegen

    def splat_(typingctx, x):
        """A float32 scalar in all lanes."""
        if x != types.float32:
            return None

        def codegen(context, builder, sig, args):
            return splat(builder, args[0], lanes)
        return t(types.float32), codegen

    def loadm(typingctx, a, i, cnt):
        """a[i:i+cnt] in the first cnt lanes (cnt <= N), zeros elsewhere; masked-off lanes are
        never read (llvm.masked.load), so a[i+cnt:i+N] may lie past the end."""
        if a != F32_1D:
            return None

        def codegen(context, builder, sig, args):
            p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
            m = lane_mask(builder, args[2], lanes)
            return builder.call(masked_fn(builder, "load", lanes),
                                [builder.bitcast(p, vec.as_pointer()), I32(4), m,
                                 ir.Constant(vec, [0.0] * lanes)])
        return t(a, types.intp, types.intp), codegen

    def load_span(typingctx, a, i, lo, hi, fill):
        """a[i+k] in the lanes lo <= k < hi, `fill` in the others, which are never read
        (llvm.masked.load): they may lie outside a, before it as well as past its end."""
        if a != F32_1D or fill != types.float32:
            return None

        def codegen(context, builder, sig, args):
            m = builder.and_(builder.not_(lane_mask(builder, args[2], lanes)),
                             lane_mask(builder, args[3], lanes))
            p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
            return builder.call(masked_fn(builder, "load", lanes),
                                [builder.bitcast(p, vec.as_pointer()), I32(4), m,
                                 splat(builder, args[4], lanes)])
        return t(a, types.intp, types.intp, types.intp, types.float32), codegen

    def rows(typingctx, a, i, stride, cnt, nrows):
        """N vectors (a tuple, for ``vtranspose``): vector r is a[i + r*stride ..] in its first
        cnt lanes (cnt <= N) for r < nrows, all zeros for r >= nrows; lanes and rows outside
        those are never read (llvm.masked.load), so they may lie past the end of a."""
        if a != F32_1D:
            return None
        ret = types.UniTuple(t, lanes)

        def codegen(context, builder, sig, args):
            fn = masked_fn(builder, "load", lanes)
            i, stride, cnt, nrows = args[1:]      # intp
            zero, vz = ir.Constant(i.type, 0), ir.Constant(vec, [0.0] * lanes)
            full = builder.and_(builder.icmp_signed(">=", cnt, ir.Constant(i.type, lanes)),
                                builder.icmp_signed(">=", nrows, ir.Constant(i.type, lanes)))
            ptrs = [builder.bitcast(elem_ptr(context, builder, sig.args[0], args[0], builder.add(
                i, builder.mul(ir.Constant(i.type, r), stride))), vec.as_pointer())
                for r in range(lanes)]
            with builder.if_else(full) as (then, otherwise):
                with then:      # every row whole: plain loads
                    plain = context.make_tuple(builder, ret, [builder.load(p, align=4)
                                                              for p in ptrs])
                    b_plain = builder.block
                with otherwise:
                    out = []
                    for r, p in enumerate(ptrs):
                        k = ir.Constant(i.type, r)
                        n = builder.select(builder.icmp_signed("<", k, nrows), cnt, zero)
                        out.append(builder.call(fn, [p, I32(4), lane_mask(builder, n, lanes),
                                                     vz]))
                    masked = context.make_tuple(builder, ret, out)
                    b_masked = builder.block
            phi = builder.phi(plain.type)
            phi.add_incoming(plain, b_plain)
            phi.add_incoming(masked, b_masked)
            return phi
        return ret(a, types.intp, types.intp, types.intp, types.intp), codegen

    made = {"load": load, "bcast": bcast, "zero": zero, "splat": splat_, "loadm": loadm,
            "load_span": load_span, "rows": rows}
    out = {}
    for name, fn in made.items():
        fn.__name__ = fn.__qualname__ = f"v{name}{lanes}"
        out[name] = intrinsic(fn)
    return out


def _width_module(lanes):
    """A module object holding the constructors of one width and the generic intrinsics, so
    that compiled code reads `V.load(a, i)`, `V.fma(a, b, c)`, `V.LANES` (Numba resolves a
    module's attributes at compile time)."""
    m = _pytypes.ModuleType(f"{__name__}.w{lanes}",
                            f"float32 vectors of {lanes} lanes (onnxjit.kernels.simd)")
    m.__dict__.update(_constructors(lanes))
    m.__dict__.update(LANES=lanes, f32=_F32[lanes], store=vstore, storem=vstorem, fma=vfma,
                      add=vadd, sub=vsub, mul=vmul, max=vmax, sel=vsel, hsum=vhsum, hmax=vhmax,
                      relu_if=vrelu_if, transpose=vtranspose,
                      store_rows=vstore_rows, scatter_rows=vscatter_rows)
    return m


w16, w8, w4 = _width_module(16), _width_module(8), _width_module(4)
by_lanes = {16: w16, 8: w8, 4: w4}
native = by_lanes[LANES]     # the target's width

# The 16-lane constructors under the names the 16-lane kernels use
vload, vbcast, vzero, vsplat, vloadm, vload_span = (
    w16.load, w16.bcast, w16.zero, w16.splat, w16.loadm, w16.load_span)


@njit(inline="always", **_JIT)
def row_vec(xf, row, W, c, pad):
    """Columns c .. c+15 of the input row starting at xf[row] (width W), `pad` outside it."""
    if c >= 0 and c + LANES16 <= W:
        return vload(xf, row + c)
    return vload_span(xf, row + c, max(0, -c), min(LANES16, W - c), pad)
