"""The target description: what the generated code runs on, decided once and read everywhere.

``host()`` describes the CPU that Numba generates code for (``NUMBA_CPU_NAME`` /
``NUMBA_CPU_FEATURES`` respected, so ``NUMBA_CPU_NAME=haswell`` on an AVX-512 machine gives the
AVX2 target), the CUDA back end uses ``Target("cuda", ...)``. Lowerings choose kernels and kernel
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

    @property
    def f32_lanes(self):
        """float32 lanes of one vector register (16 on AVX-512, 8 on AVX2, 4 on generic)."""
        return max(self.vector_bits // 32, 1)

    @property
    def avx512(self):
        """True where onnxjit's explicit 16-lane kernels (sgemm micro-kernels, row pools,
        Softmax/LayerNorm vectors, Winograd's register-blocked GEMMs) are the fast path."""
        return self.isa == "avx512"


def _cpu_features():
    """The feature set Numba compiles for: explicit NUMBA_CPU_FEATURES, else none for an
    explicit (portable) NUMBA_CPU_NAME, else the host's."""
    from numba.core import config
    if config.CPU_FEATURES is not None:
        return {f[1:] for f in config.CPU_FEATURES.split(",") if f.startswith("+")}
    if config.CPU_NAME not in (None, "host"):
        return _named_cpu_features(config.CPU_NAME)
    import llvmlite.binding as ll
    return {k for k, v in ll.get_host_cpu_features().items() if v}


def _named_cpu_features(name):
    """Features an explicit CPU name implies (the ones kernel choice looks at)."""
    name = name.lower()
    avx512 = ("skylake-avx512", "cascadelake", "cooperlake", "icelake-client", "icelake-server",
              "tigerlake", "sapphirerapids", "znver4", "znver5", "x86-64-v4", "graniterapids")
    avx2 = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "znver1", "znver2",
            "znver3", "x86-64-v3")
    if name in avx512:
        return {"avx512f", "avx2", "fma"}
    if name in avx2:
        return {"avx2", "fma"}
    return set()


@functools.lru_cache(maxsize=None)
def host():
    """The CPU target of this process (cached: Numba's CPU settings are read once at import)."""
    feats = _cpu_features()
    if "avx512f" in feats:
        return Target("avx512", 512)
    if "avx2" in feats:
        return Target("avx2", 256)
    return Target("generic", 128)


CUDA = Target("cuda", 0)
