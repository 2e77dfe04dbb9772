"""Float GEMMs on cuBLAS (through CuPy's bindings) on the rep's own buffers, on the rep's stream.
Chosen by the target (CudaTarget.cublas: CuPy importable, ONNXJIT_CUDA_CUBLAS not 0) for the
batched GEMMs whose batches lie a constant stride apart and whose output is contiguous; alpha,
beta and the bias then follow in kernels/gemm.epilogue. Never used under the simulator.

The row-major product C (m, n) = A (m, k) @ B (k, n) is cuBLAS's column-major C^T = B^T A^T: one
`cublas{S,D}gemmStridedBatched` by pointer, no temporaries. CuPy refuses any cuBLAS call while a
stream is being captured into a CUDA graph, so the call goes to libcublas (the library CuPy
loaded) through ctypes, on a handle of the rep's own (one per stream, with its own workspace, as
PyTorch does for graph capture); where that library cannot be found, through CuPy's binding
(then the executable is not captured). Operands whose strides cuBLAS cannot express (neither
dimension unit-stride) go through `cupy.matmul` on strided views, which may allocate: not
captured either.
"""
from __future__ import annotations

import ctypes
import re
import threading
import weakref

import numpy as np

OP_N, OP_T = 0, 1
_SCALARS = {np.dtype(t): (np.ones(1, t), np.zeros(1, t)) for t in (np.float32, np.float64)}


def _uniform(offsets):
    """The constant stride between consecutive batch offsets, or None."""
    offsets = np.asarray(offsets)
    if len(offsets) == 1:
        return 0
    steps = np.diff(offsets)
    return int(steps[0]) if (steps == steps[0]).all() else None


def operand(p, q, sr, sc):
    """(op, ld) for cuBLAS of a p x q matrix P whose P[r, c] lies at r*sr + c*sc, or None."""
    if sr == 1 or p == 1:
        ld = sc if q > 1 else max(p, 1)
        if ld >= max(p, 1):
            return OP_N, ld
    if sc == 1 or q == 1:
        ld = sr if p > 1 else max(q, 1)
        if ld >= max(q, 1):
            return OP_T, ld
    return None


def launch(step, a, b, bias, out, target):
    """The cuBLAS launches of a "gemm" step, or None when it stays on the tiled kernel."""
    from .launch import Buf, Const, Launch, _grid_stride
    from .kernels import gemm as kgemm
    m = step.meta
    if np.dtype(a.dtype) not in _SCALARS or m["k"] == 0:
        return None
    strides = [_uniform(m[key]) for key in ("aoff", "boff", "coff")]
    sam, sak, sbk, sbn, scm = m["strides"]
    if None in strides or scm != m["n"] or m["coff"][0] != 0 or (
            m["batch"] > 1 and strides[2] != m["m"] * m["n"]):
        return None
    offsets = (int(m["aoff"][0]), int(m["boff"][0]))
    x = operand(m["n"], m["k"], sbn, sbk)      # B^T (n x k)
    y = operand(m["k"], m["m"], sak, sam)      # A^T (k x m)
    if x is not None and y is not None:
        args = [Buf(b), Buf(a), Buf(out), *x, *y, m["n"], m["m"], m["k"], m["batch"],
                offsets[1], offsets[0], *strides[1::-1], target.index]
        fn = gemm if _library() is not None else gemm_cupy
    else:
        args = [Buf(a), Buf(b), Buf(out), m["m"], m["n"], m["k"], m["batch"], *offsets,
                *strides[:2], sam, sak, sbk, sbn]
        fn = matmul
    launches = [Launch("cublas", fn, (), (), args, [a, b], [out], host=True)]
    if m["has_bias"] or m["alpha"] != 1:
        total = m["batch"] * m["m"] * m["n"]
        args = [Buf(out), Buf(bias), total, m["m"], m["n"], m["batch"], Const(m["biasoff"]),
                *m["bias_strides"], m["alpha"], m["beta"], m["has_bias"]]
        launches.append(_grid_stride("epilogue", kgemm.epilogue, target, total, args,
                                     [out, bias], [out]))
    return launches


def _ptr(x):
    return x.device_ctypes_pointer.value


# -- libcublas through ctypes (capturable) ---------------------------------------------------------
_LIB, _LIB_LOCK, _HANDLES = [], threading.Lock(), {}
WORKSPACE_BYTES = 8 << 20


def _library():
    """libcublas as loaded by CuPy (ctypes.CDLL), or None."""
    with _LIB_LOCK:
        if not _LIB:
            _LIB.append(_load())
        return _LIB[0]


def _load():
    try:
        import cupy
        cupy.cuda.device.get_cublas_handle()      # CuPy loads libcublas
    except Exception:
        return None
    paths = []
    try:
        with open("/proc/self/maps") as f:
            paths = [line.split()[-1] for line in f if re.search(r"/libcublas\.so[.0-9]*$",
                                                                line.strip())]
    except OSError:
        pass
    for name in dict.fromkeys(paths + ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        p, i, ll, h = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
        for fn in (lib.cublasSgemmStridedBatched, lib.cublasDgemmStridedBatched):
            fn.argtypes = [h, i, i, i, i, i, p, p, i, ll, p, i, ll, p, p, i, ll, i]
            fn.restype = i
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cublasSetStream_v2.argtypes = [h, p]
        lib.cublasSetWorkspace_v2.argtypes = [h, p, ctypes.c_size_t]
        lib.cublasSetPointerMode_v2.argtypes = [h, i]
        lib.cublasDestroy_v2.argtypes = [h]
        return lib
    return None


def _handle(lib, stream):
    """A cuBLAS handle bound to `stream` (created in the current context), with a workspace;
    destroyed with the stream."""
    key = int(stream.handle)
    entry = _HANDLES.get(key)
    if entry is None:
        from numba import cuda
        handle = ctypes.c_void_p()
        _status(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        _status(lib.cublasSetStream_v2(handle, key), "cublasSetStream")
        workspace = cuda.device_array(WORKSPACE_BYTES, np.uint8)
        _status(lib.cublasSetWorkspace_v2(handle, workspace.device_ctypes_pointer.value,
                                          WORKSPACE_BYTES), "cublasSetWorkspace")
        _status(lib.cublasSetPointerMode_v2(handle, 0), "cublasSetPointerMode")   # host
        entry = _HANDLES[key] = (handle, workspace)
        weakref.finalize(stream, _destroy, lib, key)
    return entry[0]


def _destroy(lib, key):
    entry = _HANDLES.pop(key, None)
    if entry is not None:
        try:
            lib.cublasDestroy_v2(entry[0])
        except Exception:   # interpreter shutdown
            pass


def _status(code, what):
    if code != 0:
        raise RuntimeError(f"{what} failed: cuBLAS status {code}")


def gemm(stream, x, y, c, opx, ldx, opy, ldy, n, m, k, batch, x0, y0, sx, sy, device):
    """C^T (n x m per batch, ld n) = op(X) (n x k) @ op(Y) (k x m): X, Y flat device arrays at
    element offsets x0, y0 and batch strides sx, sy; on `stream` (capturable)."""
    lib = _library()
    item = c.dtype.itemsize
    one, zero = _SCALARS[np.dtype(c.dtype)]
    fn = lib.cublasSgemmStridedBatched if item == 4 else lib.cublasDgemmStridedBatched
    _status(fn(_handle(lib, stream), opx, opy, n, m, k, one.ctypes.data,
               _ptr(x) + x0 * item, ldx, sx, _ptr(y) + y0 * item, ldy, sy, zero.ctypes.data,
               _ptr(c), n, n * m, batch), "gemmStridedBatched")


gemm.capturable = True


def gemm_cupy(stream, x, y, c, opx, ldx, opy, ldy, n, m, k, batch, x0, y0, sx, sy, device):
    """gemm through CuPy's cuBLAS binding (CuPy refuses it during a graph capture)."""
    import cupy as cp
    from cupy_backends.cuda.libs import cublas
    item = c.dtype.itemsize
    one, zero = _SCALARS[np.dtype(c.dtype)]
    fn = cublas.sgemmStridedBatched if c.dtype == np.float32 else cublas.dgemmStridedBatched
    with cp.cuda.Device(device), cp.cuda.ExternalStream(int(stream.handle)):
        handle = cp.cuda.device.get_cublas_handle()
        cublas.setPointerMode(handle, 0)   # CUBLAS_POINTER_MODE_HOST
        cublas.setStream(handle, int(stream.handle))
        fn(handle, opx, opy, n, m, k, one.ctypes.data, _ptr(x) + x0 * item, ldx, sx,
           _ptr(y) + y0 * item, ldy, sy, zero.ctypes.data, _ptr(c), n, n * m, batch)


gemm_cupy.capturable = False


def matmul(stream, a, b, c, m, n, k, batch, a0, b0, sa, sb, sam, sak, sbk, sbn):
    """c (batch, m, n) = a (batch, m, k) @ b (batch, k, n), views at the given element offsets
    and strides, on `stream` (cupy.matmul: may copy operands, so never captured)."""
    import cupy as cp
    from cupy.lib.stride_tricks import as_strided
    with cp.cuda.ExternalStream(int(stream.handle)):
        # Views unbound from any stream: CuPy would synchronize on a bound array's stream
        # (__cuda_array_interface__ v3), and this already runs in stream order.
        A, B, C = (cp.asarray(x.bind(0) if hasattr(x, "bind") else x) for x in (a, b, c))
        item = A.itemsize
        A3 = as_strided(A[a0:], (batch, m, k), (sa * item, sam * item, sak * item))
        B3 = as_strided(B[b0:], (batch, k, n), (sb * item, sbk * item, sbn * item))
        C3 = C[:batch * m * n].reshape(batch, m, n)
        cp.matmul(A3, B3, out=C3)


matmul.capturable = False
