"""Float GEMMs through CuPy (cuBLAS) on the rep's own buffers: zero-copy views of the flat
device arrays (`__cuda_array_interface__`), run on the rep's stream. Chosen by the target
(CudaTarget.cublas: CuPy importable, ONNXJIT_CUDA_CUBLAS not 0) for the batched GEMMs whose
batches lie a constant stride apart and whose output is contiguous; alpha, beta and the bias
then follow in kernels/gemm.epilogue. Never used under the simulator (no CuPy device there)."""
from __future__ import annotations

import numpy as np


def _uniform(offsets):
    """The constant stride between consecutive batch offsets, or None."""
    offsets = np.asarray(offsets)
    if len(offsets) == 1:
        return 0
    steps = np.diff(offsets)
    return int(steps[0]) if (steps == steps[0]).all() else None


def launch(step, a, b, bias, out, target):
    """The cuBLAS launches of a "gemm" step, or None when it stays on the tiled kernel."""
    from .launch import Buf, Const, Launch, _grid_stride
    from .kernels import gemm as kgemm
    m = step.meta
    if np.dtype(a.dtype) not in (np.float32, np.float64) or m["k"] == 0:
        return None
    strides = [_uniform(m[key]) for key in ("aoff", "boff", "coff")]
    sam, sak, sbk, sbn, scm = m["strides"]
    if None in strides or scm != m["n"] or m["coff"][0] != 0 or (
            m["batch"] > 1 and strides[2] != m["m"] * m["n"]):
        return None
    offsets = (int(m["aoff"][0]), int(m["boff"][0]))
    args = [Buf(a), Buf(b), Buf(out), m["m"], m["n"], m["k"], m["batch"], *offsets, *strides[:2],
            sam, sak, sbk, sbn]
    launches = [Launch("cublas", matmul, (), (), args, [a, b], [out], host=True)]
    if m["has_bias"] or m["alpha"] != 1:
        total = m["batch"] * m["m"] * m["n"]
        args = [Buf(out), Buf(bias), total, m["m"], m["n"], m["batch"], Const(m["biasoff"]),
                *m["bias_strides"], m["alpha"], m["beta"], m["has_bias"]]
        launches.append(_grid_stride("epilogue", kgemm.epilogue, target, total, args,
                                     [out, bias], [out]))
    return launches


def matmul(stream, a, b, c, m, n, k, batch, a0, b0, sa, sb, sam, sak, sbk, sbn):
    """c (batch, m, n) = a (batch, m, k) @ b (batch, k, n), views at the given element offsets
    and strides, on `stream`."""
    import cupy as cp
    from cupy.lib.stride_tricks import as_strided
    with cp.cuda.ExternalStream(int(stream)):
        # Views unbound from any stream: CuPy would synchronize on a bound array's stream
        # (__cuda_array_interface__ v3), and this already runs in stream order.
        A, B, C = (cp.asarray(x.bind(0) if hasattr(x, "bind") else x) for x in (a, b, c))
        item = A.itemsize
        A3 = as_strided(A[a0:], (batch, m, k), (sa * item, sam * item, sak * item))
        B3 = as_strided(B[b0:], (batch, k, n), (sb * item, sbk * item, sbn * item))
        C3 = C[:batch * m * n].reshape(batch, m, n)
        cp.matmul(A3, B3, out=C3)
