"""Running launches: every buffer bound once per signature, then replayed.

Per signature (an Executable) everything a run touches is allocated and bound at compile time:
weights uploaded once; staging buffers for the inputs and the outputs (in the graph's dtypes);
intermediates in a pool sized from liveness; every launch's arguments resolved to those fixed
buffers. On a GPU each kernel is bound to its compiled numba-cuda kernel with its arguments
flattened once (launched through cuda.core's `launch`, no per-run argument preparation), and
after the first run the whole launch sequence is captured as a CUDA graph and replayed with one
`cuGraphLaunch` per run (`Executable.graph`; ONNXJIT_CUDA_GRAPHS=0 or prepare(...,
cuda_graphs=False) keeps the plain launches, and a capture that fails falls back to them, see
`graph_error`). Under Numba's simulator the plain launches run through the dispatcher.

A run copies its inputs into the staging buffers (host -> device for numpy inputs, device ->
device for device arrays, on the rep's stream), replays the sequence, then either copies the
outputs back to fresh numpy arrays (numpy runs; synchronized) or returns device arrays that are
views of the output staging buffers (device runs; not synchronized).

Synchronization: every copy and launch of a rep goes to its stream (`rep.stream`, a blocking
stream: work on the legacy default stream waits for it and it for that). Device runs return
arrays bound to the rep's stream without waiting: readers that honour `__cuda_array_interface__`
v3 (CuPy, PyTorch, Numba) synchronize on that stream, `rep.synchronize()` waits explicitly.
Device inputs must be ready when `run` is called (finish or synchronize the stream that wrote
them). The device arrays a run returns are overwritten by the next run of the same signature:
copy them (e.g. `cupy.array(y)`, `y.copy_to_host()`) to keep them.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..errors import InputError
from ..ir import NARROW_FLOATS, Value, compute_dtype
from .kernels import movement as kmove
from .launch import ERROR_FLAG, Buf, Const, _grid_stride

DIRECT_GRAPHS = 4


class Executable:
    """One signature's launches bound to device buffers, replayed per run."""

    def __init__(self, program, launches, aliases, target, stream, error_flag, graphs=True):
        from numba import cuda
        self.program, self.target = program, target
        self.stream, self.error_flag = stream, error_flag
        self._aliases = aliases
        self.launches = list(launches)
        self.slots = {}                      # id(root Value) -> flat device array
        # Staging buffers, in the graph's dtypes: runs copy inputs in and outputs out of these.
        self.in_bufs = [cuda.device_array(max(v.size, 1), np.dtype(v.dtype), stream=stream)
                        for v in program.inputs]
        self.out_bufs = [cuda.device_array(max(v.size, 1), np.dtype(v.dtype), stream=stream)
                         for v in program.outputs]
        prelude = self._bind_inputs(cuda)
        self._claim_outputs(cuda)
        self.launches = prelude + self.launches + self._postlude
        self.checks_bounds = any(ERROR_FLAG in ln.args for ln in self.launches)
        self._upload_constants(cuda)
        self.pool_bytes = self._allocate_pool(cuda)
        self.out_views = [b[:v.size].reshape(v.shape) if v.size else
                          cuda.device_array(v.shape, v.dtype, stream=stream)
                          for b, v in zip(self.out_bufs, program.outputs)]
        self.io = _io(target, stream)
        ptr = (lambda b: None) if target.simulated else _pointer
        self._staged_in = [(b, ptr(b), v.size * b.dtype.itemsize)
                           for b, v in zip(self.in_bufs, program.inputs)]
        self._staged_out = [(b, ptr(b), tuple(v.shape), np.dtype(v.dtype))
                            for b, v in zip(self.out_bufs, program.outputs)]
        self.bind_errors = []                # kernels left on the dispatcher's path, and why
        self._calls = [c for c in (self._bind(ln) for ln in self.launches) if c is not None]
        self.graph = None                    # the instantiated CUDA graph, once captured
        uncapturable = [ln.name for ln in self.launches
                        if ln.host and not getattr(ln.kernel, "capturable", True)]
        self.graphs = bool(graphs) and not target.simulated and not uncapturable
        self.graph_error = (None if self.graphs else "simulator" if target.simulated else
                            f"not capturable: {uncapturable}" if graphs else "off")
        # Graphs that read the caller's device inputs in place, by input addresses: a run whose
        # inputs sit where the previous run's did is captured once more without the staging
        # copies (at most DIRECT_GRAPHS address sets; never when an input overlaps an output).
        self.direct_graphs, self.direct_error = {}, None
        self._last_ptrs = None
        self._out_ranges = [(p, p + b.nbytes) for b, p, _, _ in self._staged_out if p]
        self.runs = 0

    # -- binding -----------------------------------------------------------------------------------
    def _root(self, v):
        while id(v) in self._aliases:
            v = self._aliases[id(v)]
        return v

    def _bind_inputs(self, cuda):
        """Inputs live in their staging buffers; float16 ones are widened into a held float32
        buffer by a first launch (the kernels compute in float32)."""
        prelude, self._in_values = [], []
        for i, v in enumerate(self.program.inputs):
            if v.dtype in NARROW_FLOATS:
                stage = Value(v.shape, v.dtype, name=v.name)
                self._in_values.append(stage)
                self.slots[id(stage)] = self.in_bufs[i]
                self.slots[id(v)] = cuda.device_array(max(v.size, 1), compute_dtype(v.dtype))
                prelude.append(_grid_stride(f"input_{i}_widen", kmove.copy_flat, self.target,
                                            v.size, [Buf(stage), Buf(v), v.size], [stage], [v]))
            else:
                self._in_values.append(v)
                self.slots[id(v)] = self.in_bufs[i]
        return prelude

    def _claim_outputs(self, cuda):
        """Outputs whose producer can write the output staging buffer directly do so (through a
        held float32 buffer and a narrowing copy for float16); other outputs (inputs, constants,
        repeats) get a copy launch at the end."""
        produced = {id(w) for ln in self.launches for w in ln.writes}
        taken, self._postlude = set(), []
        for j, v in enumerate(self.program.outputs):
            root = self._root(v)
            proxy = Value(v.shape, v.dtype, name=v.name)
            self.slots[id(proxy)] = self.out_bufs[j]
            if id(root) in produced and id(root) not in taken:
                taken.add(id(root))
                if v.dtype not in NARROW_FLOATS:
                    self.slots[id(root)] = self.out_bufs[j]
                    continue
                self.slots[id(root)] = cuda.device_array(max(v.size, 1), compute_dtype(v.dtype))
            self._postlude.append(_grid_stride(f"output_{j}_copy", kmove.copy_flat, self.target,
                                               v.size, [Buf(root), Buf(proxy), v.size], [root],
                                               [proxy]))

    def _upload_constants(self, cuda):
        for ln in self.launches:
            for a in ln.args:
                if isinstance(a, Buf):
                    root = self._root(a.value)
                    if root.is_const and id(root) not in self.slots:
                        data = np.ascontiguousarray(root.const, compute_dtype(root.dtype))
                        self.slots[id(root)] = cuda.to_device(data.reshape(-1) if data.size
                                                              else np.zeros(1, data.dtype))
        self.consts = {}
        for ln in self.launches:
            for a in ln.args:
                if isinstance(a, Const) and id(a) not in self.consts:
                    self.consts[id(a)] = cuda.to_device(np.ascontiguousarray(a.array).reshape(-1))

    def _allocate_pool(self, cuda):
        """Intermediate Values share pooled buffers: a buffer is free again after the last
        launch that reads any alias of the Value it holds (greedy, per dtype)."""
        last = {}
        for i, ln in enumerate(self.launches):
            for v in ln.reads + ln.writes:
                last[id(self._root(v))] = i
        free, buffers, assigned = [], [], {}
        for i, ln in enumerate(self.launches):
            for v in ln.writes:
                root = self._root(v)
                if id(root) in self.slots or id(root) in assigned:
                    continue
                dtype, size = compute_dtype(root.dtype), max(root.size, 1)
                fits = [b for b in free if buffers[b][0] == dtype]
                slot = max(fits, key=lambda b: buffers[b][1]) if fits else None
                if slot is None:
                    buffers.append([dtype, size])
                    slot = len(buffers) - 1
                else:
                    free.remove(slot)
                    buffers[slot][1] = max(buffers[slot][1], size)
                assigned[id(root)] = (slot, root.size)
            for v in ln.reads + ln.writes:
                root = self._root(v)
                if id(root) in assigned and last.get(id(root)) == i:
                    slot = assigned[id(root)][0]
                    if slot not in free:
                        free.append(slot)
        arrays = [cuda.device_array(size, dtype) for dtype, size in buffers]
        self.pool_buffers = len(arrays)
        for key, (slot, size) in assigned.items():
            self.slots[key] = arrays[slot][:max(size, 1)]
        return sum(int(a.nbytes) for a in arrays)

    def _resolve(self, a):
        if isinstance(a, Buf):
            return self.slots[id(self._root(a.value))]
        if isinstance(a, Const):
            return self.consts[id(a)]
        if a is ERROR_FLAG:
            return self.error_flag
        return a

    def _bind(self, ln):
        """(function, arguments) of one launch, every argument fixed; None for a launch that
        writes only empty tensors."""
        if all(self._root(w).size == 0 for w in ln.writes):
            return None
        args = [self._resolve(a) for a in ln.args]
        if ln.host:
            return ln.kernel, (self.stream, *args)
        if self.target.simulated:     # the simulator configures a kernel per launch
            return _simulated(ln.kernel, ln.grid, ln.block, self.stream), tuple(args)
        try:
            return _direct(ln.kernel, ln.grid, ln.block, args, self.stream)
        except Exception as exc:      # another numba-cuda: its dispatcher's launch path
            self.bind_errors.append(f"{ln.name}: {type(exc).__name__}: {exc}")
            return ln.kernel[ln.grid, ln.block, self.stream], tuple(args)

    # -- running ---------------------------------------------------------------------------------
    def launch(self):
        """Enqueue the launch sequence on the stream: the graph when captured, else the bound
        launches (the first run on a GPU launches them, then captures the graph)."""
        graph = self.graph
        if graph is not None:
            graph.launch()
            return
        for fn, args in self._calls:
            fn(*args)
        self.runs += 1
        if self.graphs and self.graph_error is None:
            try:
                self.graph = _Graph.capture(self.stream, self._calls)
            except Exception as exc:  # plain launches from now on
                self.graph_error = f"{type(exc).__name__}: {exc}"

    def run_device(self, arrays):
        """Enqueue a run whose inputs are device arrays (or some numpy ones)."""
        if self.graph is not None and len(self._staged_in) == len(arrays):
            ptrs = tuple(None if type(a) is np.ndarray else device_pointer(a) for a in arrays)
            graph = self.direct_graphs.get(ptrs)
            if graph is not None:
                graph.launch()
                return
            if ptrs == self._last_ptrs and self._direct_capture(ptrs, arrays):
                return
            self._last_ptrs = ptrs
        self.fill_device(arrays)
        self.launch()

    def _direct_capture(self, ptrs, arrays):
        """Capture (and launch) a graph reading `arrays` in place; False when not eligible."""
        if None in ptrs or len(self.direct_graphs) >= DIRECT_GRAPHS or self.direct_error:
            return False
        sizes = [nbytes for _, _, nbytes in self._staged_in]
        if not all(sizes) or any(p < hi and lo < p + n for p, n in zip(ptrs, sizes)
                                 for lo, hi in self._out_ranges):
            return False
        from numba import cuda
        saved = [self.slots[id(v)] for v in self._in_values]
        try:
            for v, a in zip(self._in_values, arrays):
                a = a if hasattr(a, "is_c_contiguous") else cuda.as_cuda_array(a)
                self.slots[id(v)] = a.reshape(-1)
            calls = [c for c in (self._bind(ln) for ln in self.launches) if c is not None]
            graph = _Graph.capture(self.stream, calls)
        except Exception as exc:
            self.direct_error = f"{type(exc).__name__}: {exc}"
            return False
        finally:
            for v, a in zip(self._in_values, saved):
                self.slots[id(v)] = a
        self.direct_graphs[ptrs] = graph
        graph.launch()
        return True

    def fill_host(self, arrays):
        """Copy numpy inputs into the input staging buffers."""
        copy = self.io.host_to_device
        for (buf, ptr, nbytes), a in zip(self._staged_in, arrays):
            if nbytes:
                copy(buf, ptr, np.ascontiguousarray(a))

    def fill_device(self, arrays):
        """Copy device inputs (or numpy ones) into the input staging buffers."""
        io = self.io
        for (buf, ptr, nbytes), a in zip(self._staged_in, arrays):
            if not nbytes:
                continue
            if type(a) is np.ndarray:
                io.host_to_device(buf, ptr, np.ascontiguousarray(a))
            else:
                io.device_to_device(buf, ptr, a, nbytes)

    def read_host(self):
        """The outputs as fresh numpy arrays (synchronizes the stream)."""
        copy = self.io.device_to_host
        results = []
        for buf, ptr, shape, dtype in self._staged_out:
            r = np.empty(shape, dtype)
            if r.size:
                copy(r, buf, ptr)
            results.append(r)
        self.io.synchronize()
        if self.checks_bounds:
            check_errors(self)
        return results


def _simulated(kernel, grid, block, stream):
    def call(*args):
        kernel[grid, block, stream](*args)
    return call


def _direct(dispatcher, grid, block, args, stream):
    """(cuda.core launch, its arguments) for a compiled numba-cuda kernel: what
    `kernel[grid, block, stream](*args)` does per call (typing, argument preparation, launch
    configuration), done once here (numba-cuda 0.30's _Kernel.launch)."""
    from cuda.core import LaunchConfig, launch
    from numba.cuda._compat import CUDA_CORE_GE_1_0
    from numba.cuda.cudadrv import driver
    kernel = dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))
    if kernel.debug or kernel.cooperative or getattr(kernel, "extensions", None):
        raise RuntimeError("a debug, cooperative or extended kernel")
    flat, retr = [], []
    for t, v in zip(kernel.argument_types, args):
        kernel._prepare_args(t, v, stream, retr, flat)
    if retr:
        raise RuntimeError("an argument needs a copy back")
    grid, block = _dims(grid), _dims(block)
    coop = {"is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch": False}
    config = LaunchConfig(grid=grid, block=block, shmem_size=0, **coop)
    cufunc = kernel._codelibrary.get_cufunc()
    return launch, (driver._to_core_stream(stream), config, cufunc.kernel, *flat)


def _dims(d):
    d = tuple(int(x) for x in (d if isinstance(d, tuple) else (d,)))
    return d + (1,) * (3 - len(d))


class _Graph:
    """A CUDA graph of a launch sequence, captured on the rep's stream (cuda.bindings: the
    driver API numba-cuda itself runs on), replayed with one cuGraphLaunch."""

    def __init__(self, cu, graph, graph_exec, stream):
        self._launch, self._exec, self._stream = cu.cuGraphLaunch, graph_exec, stream
        self._ok = cu.CUresult.CUDA_SUCCESS
        weakref.finalize(self, _destroy, cu, graph, graph_exec)

    @classmethod
    def capture(cls, stream, calls):
        from cuda.bindings import driver as cu
        handle = int(stream.handle)
        _check(cu, cu.cuStreamBeginCapture(
            handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        try:
            for fn, args in calls:
                fn(*args)
        finally:
            result = cu.cuStreamEndCapture(handle)
        graph = _check(cu, result)[1]
        try:
            graph_exec = _check(cu, cu.cuGraphInstantiate(graph, 0))[1]
        except Exception:
            cu.cuGraphDestroy(graph)
            raise
        return cls(cu, graph, graph_exec, handle)

    def launch(self):
        err = self._launch(self._exec, self._stream)[0]
        if err != self._ok:
            raise RuntimeError(f"cuGraphLaunch failed: {err!r}")


def _check(cu, result):
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error {err!r}")
    return result


def _destroy(cu, graph, graph_exec):
    try:
        cu.cuGraphExecDestroy(graph_exec)
        cu.cuGraphDestroy(graph)
    except Exception:   # interpreter shutdown: the context may be gone
        pass


# -- copies ----------------------------------------------------------------------------------------
def _io(target, stream):
    return _SimulatedIO(stream) if target.simulated else _DriverIO(stream)


class _DriverIO:
    """Stream-ordered copies through the driver API, by pointer (no wrapper objects)."""

    def __init__(self, stream):
        from cuda.bindings import driver as cu
        self._h = int(stream.handle)
        self._htod, self._dtoh, self._dtod = (cu.cuMemcpyHtoDAsync, cu.cuMemcpyDtoHAsync,
                                              cu.cuMemcpyDtoDAsync)
        self._sync, self._ok = cu.cuStreamSynchronize, cu.CUresult.CUDA_SUCCESS

    def host_to_device(self, buf, ptr, a):
        self._done(self._htod(ptr, a.ctypes.data, a.nbytes, self._h))

    def device_to_host(self, r, buf, ptr):
        self._done(self._dtoh(r.ctypes.data, ptr, r.nbytes, self._h))

    def device_to_device(self, buf, ptr, a, nbytes):
        self._done(self._dtod(ptr, device_pointer(a), nbytes, self._h))

    def synchronize(self):
        self._done(self._sync(self._h))

    def _done(self, result):
        if result[0] != self._ok:
            raise RuntimeError(f"CUDA driver error {result[0]!r}")


class _SimulatedIO:
    def __init__(self, stream):
        self._stream = stream

    def host_to_device(self, buf, ptr, a):
        buf[:a.size].copy_to_device(a.reshape(-1), stream=self._stream)

    def device_to_host(self, r, buf, ptr):
        r.reshape(-1)[...] = buf[:r.size].copy_to_host(stream=self._stream)

    def device_to_device(self, buf, ptr, a, nbytes):
        n = nbytes // buf.dtype.itemsize
        buf[:n].copy_to_device(a.reshape(-1), stream=self._stream)

    def synchronize(self):
        self._stream.synchronize()


def _pointer(buf):
    return buf.device_ctypes_pointer.value


def device_pointer(a):
    """The device address of a C-contiguous device array (Numba's or any
    `__cuda_array_interface__` exporter)."""
    ptr = getattr(a, "device_ctypes_pointer", None)
    if ptr is not None:
        return ptr.value
    return a.__cuda_array_interface__["data"][0]


def describe(a):
    """(shape, dtype) of a device input; raises InputError when it is not C-contiguous."""
    if hasattr(a, "is_c_contiguous"):          # Numba's device arrays (and the simulator's)
        if not a.is_c_contiguous():
            raise InputError("device arrays must be C-contiguous")
        return tuple(a.shape), a.dtype
    cai = a.__cuda_array_interface__
    shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        acc = dtype.itemsize
        for d, st in zip(reversed(shape), reversed(strides)):
            if d > 1 and st != acc:
                raise InputError("device arrays must be C-contiguous")
            acc *= d
    return shape, dtype


def check_errors(exe):
    """Raise when a bounds-checking kernel met an index out of range (and reset the flag)."""
    if not exe.checks_bounds:
        return
    flag = exe.error_flag.copy_to_host(stream=exe.stream)
    exe.stream.synchronize()
    if flag[0]:
        exe.error_flag.copy_to_device(np.zeros(1, np.int32), stream=exe.stream)
        exe.stream.synchronize()
        raise IndexError("index out of range in a Gather on the CUDA device "
                         "(indices must lie in [-n, n))")
