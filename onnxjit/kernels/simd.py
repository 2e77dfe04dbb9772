"""The SIMD layer: an explicit float32 vector type and the intrinsics that emit its LLVM IR.

LLVM's auto-vectoriser prefers 256-bit vectors on skylake-avx512-class CPUs, so loops never
use zmm registers.  Instead the Numba type ``F32x16`` has the LLVM vector ``<LANES x float>``
as its data model, and a handful of ``@intrinsic``s (load / broadcast / fma / add / select /
relu / masked load and store / prefetch / 16 x 16 transpose / lane sum and max) emit vector
IR directly; accumulators are plain local variables, so LLVM keeps them in registers
(explicit 512-bit vector IR is legal without any function attribute: the X86 backend only
narrows vectors it created itself).  The intrinsics do NO bounds checking - their callers
guarantee every access is in range (prefetches may point past the end; they never fault).
Every intrinsic is static (no dynamic globals), so the kernels built on them stay
disk-cacheable.

``LANES`` is the one place the vector width is written.  Today every explicit-vector kernel
is 16 lanes (one AVX-512 register) and is chosen only where ``has_avx512()`` - read from
``onnxjit.target.host()`` - is true; ``host().f32_lanes`` is the target's native width (8 on
AVX2, 4 on generic), for kernels that will pick a width from the target.

Layers: simd (this module) and parallel (threads) sit under the kernels; microkernels.py
(generated) and the GEMM / conv / pooling / normalization kernels import from them.
"""

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.extending import intrinsic, register_model

LANES = 16  # float32 lanes of the explicit vector type F32x16 (one zmm register)

from . import JIT as _JIT


class F32x16Type(types.Type):
    """Numba type of an LLVM <16 x float> value (one zmm register)."""

    def __init__(self):
        super().__init__(name="F32x16")


f32x16 = F32x16Type()
VEC = ir.VectorType(ir.FloatType(), LANES)
I32 = ir.IntType(32)
I8P = ir.IntType(8).as_pointer()
F32_1D = types.Array(types.float32, 1, "C")


@register_model(F32x16Type)
class _F32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, VEC)


def has_avx512():
    """True when Numba generates code for a CPU with AVX-512F (``target.host().avx512``).

    Without it the kernels still compute correctly, but LLVM splits every <16 x float> into
    narrower vectors and the 24 accumulators spill: callers should use BLAS instead.
    """
    from ..target import host
    return host().avx512


# ----------------------------------------------------------------------------------------
# codegen helpers (for intrinsics defined here and in sibling kernels)
# ----------------------------------------------------------------------------------------


def elem_ptr(context, builder, aryty, ary, idx):
    """float* to ary[idx] for a 1-D C float32 array (no bounds check)."""
    arr = context.make_array(aryty)(context, builder, ary)
    return builder.gep(arr.data, [idx])


def splat(builder, x):
    """The scalar x in all lanes."""
    v = builder.insert_element(ir.Constant(VEC, ir.Undefined), x, I32(0))
    return builder.shuffle_vector(v, ir.Constant(VEC, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))


def lane_mask(builder, cnt):
    """<16 x i1>: lane i set when i < cnt (cnt an intp)."""
    iota = ir.Constant(ir.VectorType(I32, LANES), list(range(LANES)))
    n = builder.trunc(cnt, I32)
    nv = builder.insert_element(ir.Constant(ir.VectorType(I32, LANES), ir.Undefined), n, I32(0))
    nv = builder.shuffle_vector(nv, ir.Constant(ir.VectorType(I32, LANES), ir.Undefined),
                                ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))
    return builder.icmp_signed("<", iota, nv)


def lane_op(name, method, doc):
    """An intrinsic computing builder.<method>(a, b) on two <16 x float> vectors."""
    def op(typingctx, a, b):
        def codegen(context, builder, sig, args):
            return getattr(builder, method)(args[0], args[1])
        return f32x16(f32x16, f32x16), codegen
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return intrinsic(op)


# ----------------------------------------------------------------------------------------
# intrinsics
# ----------------------------------------------------------------------------------------


@intrinsic
def vload(typingctx, a, i):
    """a[i:i+16] as a vector (unaligned load)."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.load(builder.bitcast(p, VEC.as_pointer()), align=4)
    return f32x16(a, types.intp), codegen


@intrinsic
def vstore(typingctx, a, i, v):
    """a[i:i+16] = v (unaligned store)."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(p, VEC.as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(a, types.intp, f32x16), codegen


@intrinsic
def vbcast(typingctx, a, i):
    """a[i] broadcast to all 16 lanes (vbroadcastss from memory)."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        x = builder.load(elem_ptr(context, builder, sig.args[0], args[0], args[1]), align=4)
        return splat(builder, x)
    return f32x16(a, types.intp), codegen


@intrinsic
def vzero(typingctx):
    """All-zero vector."""
    def codegen(context, builder, sig, args):
        return ir.Constant(VEC, [0.0] * LANES)
    return f32x16(), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """a * b + c, fused (llvm.fma -> vfmadd231ps)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(VEC, [VEC, VEC, VEC]), f"llvm.fma.v{LANES}f32")
        return builder.call(fn, args)
    return f32x16(f32x16, f32x16, f32x16), codegen


vadd = lane_op("vadd", "fadd", "a + b.")
vsub = lane_op("vsub", "fsub", "a - b.")
vmul = lane_op("vmul", "fmul", "a * b.")


@intrinsic
def vsel(typingctx, cond, a, b):
    """cond ? a : b for a scalar bool cond (no branch)."""
    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])
    return f32x16(types.boolean, f32x16, f32x16), codegen


@intrinsic
def vrelu_if(typingctx, a, cond):
    """(cond and a < 0) ? 0 : a, lane-wise (NaN stays NaN)."""
    def codegen(context, builder, sig, args):
        z = ir.Constant(VEC, [0.0] * LANES)
        neg = builder.fcmp_ordered("<", args[0], z)
        b1 = ir.VectorType(ir.IntType(1), LANES)
        c = builder.insert_element(ir.Constant(b1, ir.Undefined), args[1], I32(0))
        c = builder.shuffle_vector(c, ir.Constant(b1, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))
        m = builder.and_(neg, c)
        return builder.select(m, z, args[0])
    return f32x16(f32x16, types.boolean), codegen


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
def vloadm(typingctx, a, i, cnt):
    """a[i:i+cnt] in the first cnt lanes (cnt <= 16), zeros elsewhere; masked-off lanes are
    never read (llvm.masked.load), so a[i+cnt:i+16] may lie past the end."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        m = lane_mask(builder, args[2])
        fn = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(VEC, [VEC.as_pointer(), I32, m.type, VEC]),
            f"llvm.masked.load.v{LANES}f32.p0")
        return builder.call(fn, [builder.bitcast(p, VEC.as_pointer()), I32(4), m,
                                 ir.Constant(VEC, [0.0] * LANES)])
    return f32x16(a, types.intp, types.intp), codegen


@intrinsic
def vstorem(typingctx, a, i, v, cnt):
    """a[i:i+cnt] = first cnt lanes of v (llvm.masked.store; other lanes untouched)."""
    if a != F32_1D:
        return None

    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        m = lane_mask(builder, args[3])
        fn = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [VEC, VEC.as_pointer(), I32, m.type]),
            f"llvm.masked.store.v{LANES}f32.p0")
        builder.call(fn, [args[2], builder.bitcast(p, VEC.as_pointer()), I32(4), m])
        return context.get_dummy_value()
    return types.void(a, types.intp, f32x16, types.intp), codegen


# ----------------------------------------------------------------------------------------
# lane shuffles, max, splat and padded row loads (pooling, normalization, strided conv)
# ----------------------------------------------------------------------------------------


@intrinsic
def vsplat(typingctx, x):
    """A float32 scalar in all 16 lanes."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return splat(builder, args[0])
    return f32x16(types.float32), codegen


def reduce_ir(builder, v, combine):
    """Tree reduction of the LANES lanes of v with combine(builder, lo, hi) -> scalar."""
    width, undef = LANES, ir.Constant(v.type, ir.Undefined)
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
    def codegen(context, builder, sig, args):
        return reduce_ir(builder, args[0], lambda b, x, y: b.select(
            b.fcmp_ordered(">", x, y), x, y))
    return types.float32(f32x16), codegen


@intrinsic
def vhsum(typingctx, v):
    """Sum of the lanes (pairwise)."""
    def codegen(context, builder, sig, args):
        return reduce_ir(builder, args[0], lambda b, x, y: b.fadd(x, y))
    return types.float32(f32x16), codegen


@intrinsic
def vmax(typingctx, a, b):
    """a > b ? a : b per lane: a NaN in `a` leaves b (so a running maximum ignores NaNs)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[0], args[1]), args[0], args[1])
    return f32x16(f32x16, f32x16), codegen


_SHUF_EVEN = ir.Constant(ir.VectorType(I32, LANES), list(range(0, 2 * LANES, 2)))
_SHUF_ODD = ir.Constant(ir.VectorType(I32, LANES), list(range(1, 2 * LANES, 2)))
_SHUF_NEXT = ir.Constant(ir.VectorType(I32, LANES), list(range(1, LANES + 1)))


def shuffle_op(name, mask, doc):
    """An intrinsic: 16 lanes picked by shuffle `mask` from the 32 of two vectors a, b."""
    def op(typingctx, a, b):
        def codegen(context, builder, sig, args):
            return builder.shuffle_vector(args[0], args[1], mask)
        return f32x16(f32x16, f32x16), codegen
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return intrinsic(op)


@intrinsic
def vtranspose16(typingctx, rows):
    """The 16 x 16 transpose of a tuple of 16 vectors (lane j of vector i -> lane i of vector
    j): four rounds of two-vector shuffles, each swapping the off-diagonal blocks of size
    8, 4, 2, 1 (64 shuffles)."""
    if not (isinstance(rows, types.UniTuple) and rows.count == LANES and rows.dtype == f32x16):
        return None
    ret = types.UniTuple(f32x16, LANES)

    def codegen(context, builder, sig, args):
        v = [builder.extract_value(args[0], i) for i in range(LANES)]
        s = LANES // 2
        while s:
            lo = ir.Constant(ir.VectorType(I32, LANES),
                             [j if not j & s else LANES + j - s for j in range(LANES)])
            hi = ir.Constant(ir.VectorType(I32, LANES),
                             [j + s if not j & s else LANES + j for j in range(LANES)])
            for r in range(LANES):
                if not r & s:
                    a, b = v[r], v[r + s]
                    v[r] = builder.shuffle_vector(a, b, lo)
                    v[r + s] = builder.shuffle_vector(a, b, hi)
            s //= 2
        return context.make_tuple(builder, ret, v)
    return ret(rows), codegen


vevens = shuffle_op("vevens", _SHUF_EVEN, "a[0], a[2], ..., a[14], b[0], ..., b[14].")
vodds = shuffle_op("vodds", _SHUF_ODD, "a[1], a[3], ..., a[15], b[1], ..., b[15].")
vnext = shuffle_op("vnext", _SHUF_NEXT, "a[1], ..., a[15], b[0]: a shifted by one lane.")


@intrinsic
def vload_span(typingctx, a, i, lo, hi, fill):
    """a[i+k] in the lanes lo <= k < hi, `fill` in the others, which are never read
    (llvm.masked.load): they may lie outside a, before it as well as past its end."""
    if a != F32_1D or fill != types.float32:
        return None

    def codegen(context, builder, sig, args):
        m = builder.and_(builder.not_(lane_mask(builder, args[2])), lane_mask(builder, args[3]))
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1])
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(VEC, [VEC.as_pointer(), I32, m.type, VEC]),
            f"llvm.masked.load.v{LANES}f32.p0")
        return builder.call(fn, [builder.bitcast(p, VEC.as_pointer()), I32(4), m,
                                 splat(builder, args[4])])
    return f32x16(a, types.intp, types.intp, types.intp, types.float32), codegen


@njit(inline="always", **_JIT)
def row_vec(xf, row, W, c, pad):
    """Columns c .. c+15 of the input row starting at xf[row] (width W), `pad` outside it."""
    if c >= 0 and c + LANES <= W:
        return vload(xf, row + c)
    return vload_span(xf, row + c, max(0, -c), min(LANES, W - c), pad)
