"""The target description: what the generated code runs on, decided once and read everywhere.

``host()`` describes the CPU that Numba generates code for (``NUMBA_CPU_NAME`` /
``NUMBA_CPU_FEATURES`` respected: ``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=<AVX2_FEATURES>`` on an
AVX-512 machine gives the AVX2 target; the CPU name alone does not, Numba then passes the host's
features to LLVM), the CUDA back end uses ``Target("cuda", ...)``. Lowerings choose kernels and kernel
variants (pooling scheme, Winograd, explicit-vector kernels or BLAS) from it, so that each
library call compiles only the variant it runs: Numba relinks and re-optimizes every callee at
each njit level, and an entry that kept every variant behind a runtime branch paid for all of
them at first use.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    isa: str            # "avx512", "avx2", "generic" or "cuda"
    vector_bits: int    # widest float SIMD register the code may use (512, 256, 128; 0 for cuda)
    vnni: bool = False  # AVX512-VNNI (vpdpbusd: 64 uint8 x int8 multiply-adds per instruction)

    @property
    def f32_lanes(self):
        """float32 lanes of one vector register (16 on AVX-512, 8 on AVX2, 4 on generic)."""
        return max(self.vector_bits // 32, 1)

    @property
    def avx512(self):
        """True where onnxjit's explicit 16-lane kernels (sgemm micro-kernels, row pools,
        Softmax/LayerNorm vectors, Winograd's register-blocked GEMMs) are the fast path."""
        return self.isa == "avx512"

    @property
    def split16(self):
        """True where explicit 16-lane kernels with few live vectors (<= 8 zmm: row kernels,
        GEMVs, gate loops) are fast: AVX-512, and AVX2, where LLVM splits each <16 x float>
        into two ymm halves at the same FMA peak.  The register-blocked GEMM micro-kernels
        (24 accumulators) spill there: they need ``avx512`` (AVX2 has its own: ``f32_gemm``)."""
        return self.isa in ("avx512", "avx2")

    @property
    def f32_gemm(self):
        """onnxjit's register-blocked float32 GEMM for constant weights (MatMul / Gemm by packed
        weights, the 1x1 Conv): "avx512" (kernels/sgemm.py, 12 x 32 tiles in zmm), "avx2"
        (kernels/gemm_avx2.py, 6 x 16 tiles in ymm) or None (BLAS)."""
        return self.isa if self.isa in ("avx512", "avx2") else None

    @property
    def int8_dot(self):
        """The uint8 x int8 dot-product kernel of MatMulInteger by constant weights
        (kernels/qgemm.py): "vnni" (AVX512-VNNI vpdpbusd), "madd" (AVX2 vpmaddubsw + vpmaddwd,
        half VNNI's rate; AVX-512 CPUs without VNNI too) or None (no integer SIMD kernel)."""
        if self.isa == "avx512" and self.vnni:
            return "vnni"
        return "madd" if self.isa in ("avx512", "avx2") else None


def _cpu_features():
    """The feature set Numba compiles for. Numba passes NUMBA_CPU_FEATURES to LLVM when it is set
    (empty for NUMBA_CPU_NAME=generic), else the host's features, whatever NUMBA_CPU_NAME says:
    NUMBA_CPU_NAME=haswell alone on an AVX-512 host still lets LLVM use zmm registers. The AVX2
    path is ``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=`` + AVX2_FEATURES."""
    from numba.core import config
    if config.CPU_FEATURES is not None:
        return {f[1:] for f in config.CPU_FEATURES.split(",") if f.startswith("+")}
    import llvmlite.binding as ll
    return {k for k, v in ll.get_host_cpu_features().items() if v}


# Haswell's feature set (no AVX-512): with NUMBA_CPU_NAME=haswell, the code an AVX2 laptop runs.
AVX2_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fsgsbase,+lzcnt,+mmx,"
                 "+movbe,+popcnt,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")


@functools.lru_cache(maxsize=None)
def host():
    """The CPU target of this process (cached: Numba's CPU settings are read once at import)."""
    feats = _cpu_features()
    if "avx512f" in feats:
        return Target("avx512", 512, vnni="avx512vnni" in feats)
    if "avx2" in feats:
        return Target("avx2", 256)
    return Target("generic", 128)


CUDA = Target("cuda", 0)
