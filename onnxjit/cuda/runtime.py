"""Running launches: device buffers (weights uploaded once, intermediates in a pool sized from
liveness and reused across runs), one stream per rep, host or device inputs and outputs.

Synchronization: every launch and copy of a rep goes to its stream (`rep.stream`, a blocking
stream: work on the legacy default stream waits for it and it for that). Host (numpy) runs copy
the results back and synchronize before returning. Device runs return arrays bound to the rep's
stream without waiting: readers that honour `__cuda_array_interface__` v3 (CuPy, PyTorch,
Numba) synchronize on that stream, `rep.synchronize()` waits explicitly. Device inputs must be
ready when `run` is called (finish or synchronize the stream that wrote them).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..ir import NARROW_FLOATS, compute_dtype
from .launch import ERROR_FLAG, Buf, Const
from .kernels import movement as kmove


class Executable:
    """One signature's launches bound to device buffers."""

    def __init__(self, program, launches, aliases, target, stream, error_flag):
        from numba import cuda
        self.program, self.launches, self.target = program, launches, target
        self.stream, self.error_flag = stream, error_flag
        self.checks_bounds = any(ERROR_FLAG in ln.args for ln in launches)
        self._root = lambda v: self._follow(aliases, v)
        inputs = {id(v): i for i, v in enumerate(program.inputs)}
        self.outputs = self._claim_outputs(inputs)
        self.slots = {}                      # id(root Value) -> ("in", i) | ("out", j) | array
        for i, v in enumerate(program.inputs):
            self.slots[id(v)] = ("in", i)
        for j, root in self.outputs.items():
            self.slots[id(root)] = ("out", j)
        self._upload_constants(cuda)
        self.pool_bytes = self._allocate_pool(cuda)
        # Host runs: inputs are copied into these (held dtype), outputs read from these.
        self.host_in = [cuda.device_array(max(v.size, 1), compute_dtype(v.dtype))
                        for v in program.inputs]
        self.host_out = [cuda.device_array(max(v.size, 1), compute_dtype(v.dtype))
                         for v in program.outputs]
        self._calls = [self._bind(ln) for ln in self.launches]

    def _bind(self, ln):
        """(launch, configured kernel, arguments with fixed buffers in place, positions of the
        per-run ones), or None for a launch that writes only empty tensors."""
        if all(self._root(w).size == 0 for w in ln.writes):
            return None
        args, dynamic = [], []
        for pos, a in enumerate(ln.args):
            value = self._resolve(a)
            if type(value) is tuple:
                dynamic.append((pos, value))
            args.append(value)
        if ln.host:
            call = ln.kernel
        elif self.target.simulated:   # the simulator's kernel[...] configures the kernel itself
            call = None
        else:                         # configured once: no per-run launch-config object
            call = ln.kernel[ln.grid, ln.block, self.stream]
        return ln, call, args, dynamic

    @staticmethod
    def _follow(aliases, v):
        while id(v) in aliases:
            v = aliases[id(v)]
        return v

    def _claim_outputs(self, inputs):
        """{output index: root Value whose producer writes the output buffer directly}; other
        outputs (inputs, constants, repeats) get a copy launch at the end."""
        produced = {id(w) for ln in self.launches for w in ln.writes}
        claimed, taken = {}, set()
        for j, v in enumerate(self.program.outputs):
            root = self._root(v)
            if id(root) in produced and id(root) not in taken:
                claimed[j] = root
                taken.add(id(root))
            else:
                self.launches.append(self._copy_launch(root, j))
        return claimed

    def _copy_launch(self, root, j):
        from .launch import _grid_stride
        out = self.program.outputs[j]
        proxy = type(out)(out.shape, out.dtype, name=out.name)
        self.outputs_extra = getattr(self, "outputs_extra", {})
        self.outputs_extra[j] = proxy
        launch = _grid_stride(f"output_{j}_copy", kmove.copy_flat, self.target, out.size,
                              [Buf(root), Buf(proxy), out.size], [root], [proxy])
        return launch

    def _upload_constants(self, cuda):
        for ln in self.launches:
            for a in ln.args:
                if isinstance(a, Buf):
                    root = self._root(a.value)
                    if root.is_const and id(root) not in self.slots:
                        data = np.ascontiguousarray(root.const, compute_dtype(root.dtype))
                        self.slots[id(root)] = cuda.to_device(data.reshape(-1) if data.size
                                                              else np.zeros(1, data.dtype))
        for j, proxy in getattr(self, "outputs_extra", {}).items():
            self.slots[id(proxy)] = ("out", j)
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

    # -- running ---------------------------------------------------------------------------------
    def run(self, inputs, device_mode):
        """Enqueue one run: `inputs` are flat device arrays in held dtypes; returns the flat
        output buffers (fresh ones on device runs)."""
        from numba import cuda
        outs = (self.host_out if not device_mode else
                [cuda.device_array(max(v.size, 1), compute_dtype(v.dtype), stream=self.stream)
                 for v in self.program.outputs])
        per_run = {"in": inputs, "out": outs}
        for bound in self._calls:
            if bound is None:
                continue
            ln, call, args, dynamic = bound
            if dynamic:
                args = list(args)
                for pos, (kind, index) in dynamic:
                    args[pos] = per_run[kind][index]
            if ln.host:
                call(self.stream, *args)
            elif call is not None:
                call(*args)
            else:
                ln.kernel[ln.grid, ln.block, self.stream](*args)
        return outs

    def _resolve(self, a):
        """An argument's device array or number; ("in" | "out", index) for per-run buffers."""
        if isinstance(a, Buf):
            return self.slots[id(self._root(a.value))]
        if isinstance(a, Const):
            return self.consts[id(a)]
        if a is ERROR_FLAG:
            return self.error_flag
        return a


def host_inputs(exe, arrays):
    """Copy numpy inputs into the executable's input buffers (narrow floats widened)."""
    bufs = []
    for buf, a, v in zip(exe.host_in, arrays, exe.program.inputs):
        data = np.ascontiguousarray(a, compute_dtype(v.dtype)).reshape(-1)
        if data.size:
            buf[:data.size].copy_to_device(data, stream=exe.stream)
        bufs.append(buf)
    return bufs


def host_outputs(exe, outs):
    """The outputs as numpy arrays of the graph's dtypes (synchronizes the stream)."""
    results = []
    for buf, v in zip(outs, exe.program.outputs):
        host = buf.copy_to_host(stream=exe.stream)[:v.size].reshape(v.shape)
        results.append(host)
    exe.stream.synchronize()
    check_errors(exe)
    return [r.astype(v.dtype) if v.dtype in NARROW_FLOATS else r
            for r, v in zip(results, exe.program.outputs)]


def device_inputs(exe, arrays):
    """Flat device views of device inputs (narrow floats converted into a held copy)."""
    from numba import cuda
    flat = []
    for a, v in zip(arrays, exe.program.inputs):
        if not a.is_c_contiguous():
            raise InputError(f"input {v.name!r}: device arrays must be C-contiguous")
        a = a.reshape(-1) if a.size else cuda.device_array(1, compute_dtype(v.dtype))
        if v.dtype in NARROW_FLOATS:
            held = cuda.device_array(max(v.size, 1), np.float32, stream=exe.stream)
            grid, block = exe.target.grid(v.size)
            kmove.copy_flat[grid, block, exe.stream](a, held, v.size)
            a = held
        flat.append(a)
    return flat


def device_outputs(exe, outs):
    """Outputs as device arrays of the graph's shapes (narrow floats converted on the device)."""
    from numba import cuda
    results = []
    for buf, v in zip(outs, exe.program.outputs):
        if v.dtype in NARROW_FLOATS:
            narrow = cuda.device_array(max(v.size, 1), v.dtype, stream=exe.stream)
            grid, block = exe.target.grid(v.size)
            kmove.copy_flat[grid, block, exe.stream](buf, narrow, v.size)
            buf = narrow
        results.append(buf[:v.size].reshape(v.shape) if v.size else
                       cuda.device_array(v.shape, v.dtype, stream=exe.stream))
    return results


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
