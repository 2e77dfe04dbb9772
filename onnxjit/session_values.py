"""ORT's OrtValue and IOBinding over numpy arrays (and Numba device arrays with the CUDA target)."""
from __future__ import annotations

import ctypes

import numpy as np
from onnx import helper

from .session_model import dtype_name
from .session_options import InvalidArgument, cuda_available, ort_error


def _dtype(element_type):
    """numpy dtype of a numpy type or an onnx TensorProto element type (int)."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(element_type)))
    return np.dtype(element_type)


def _on_device(array, device_type):
    """`array` where `device_type` says it lives: a numpy array ('cpu') or a CUDA device array."""
    kind = device_type.lower()
    if kind == "cpu":
        return array
    if kind in ("cuda", "gpu"):
        if not cuda_available():
            raise RuntimeError("Can't allocate memory on the device using this package of onnxjit: "
                               "no CUDA device (onnxjit's CUDA target) here.")
        from numba import cuda
        return cuda.to_device(array)
    raise RuntimeError(f"Unsupported device type: {device_type}")


def _is_device_array(value):
    """A CUDA device array (Numba, CuPy, PyTorch ...), or one of Numba's simulator."""
    return not isinstance(value, np.ndarray) and (
        hasattr(value, "__cuda_array_interface__") or type(value).__name__ == "FakeCUDAArray")


def _to_host(value):
    if hasattr(value, "copy_to_host"):
        return value.copy_to_host()
    from numba import cuda
    return cuda.as_cuda_array(value).copy_to_host()


def _placed(array, device):
    """A run's result moved where its output was bound ('cpu' or 'cuda'). A device result is
    copied on the device: a CUDA rep returns views of its output buffers, which its next run
    overwrites, while ORT gives each run's bound outputs OrtValues of their own."""
    if device == "cpu":
        return _to_host(array) if _is_device_array(array) else array
    return _device_copy(array) if _is_device_array(array) else _on_device(array, device)


def _device_copy(array):
    from numba import cuda
    src = array if hasattr(array, "copy_to_host") else cuda.as_cuda_array(array)
    out = cuda.device_array(src.shape, src.dtype)
    out.copy_to_device(src)
    return out


class OrtValue:
    """A tensor as ORT's OrtValue holds it. On the CPU it wraps the numpy array itself (no copy,
    as ORT shares the buffer of a C-contiguous array); on 'cuda' a Numba device array."""

    def __init__(self, value, device_type=None, device_id=0):
        self._value = value
        self._device = (device_type or ("cuda" if _is_device_array(value) else "cpu")).lower()
        self._device_id = device_id

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0, vendor_id=-1):
        array = np.ascontiguousarray(numpy_obj)
        return cls(_on_device(array, device_type), device_type, device_id)

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, /, onnx_element_type):
        return cls(np.ascontiguousarray(data).view(_dtype(onnx_element_type)))

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0,
                                     vendor_id=-1, memory_info=None):
        array = np.zeros([int(d) for d in shape], _dtype(element_type))
        return cls(_on_device(array, device_type), device_type, device_id)

    def _host(self):
        return self._value if self._device == "cpu" else _to_host(self._value)

    def numpy(self):
        """The values as a numpy array (the wrapped array itself on the CPU)."""
        return self._host()

    def __array__(self, dtype=None, copy=None):
        array = self._host()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __dlpack__(self, *, stream=None):
        return self._host().__dlpack__()

    def __dlpack_device__(self):
        return self._host().__dlpack_device__()

    @classmethod
    def from_dlpack(cls, data, /):
        return cls(np.from_dlpack(data))

    def shape(self):
        return [int(d) for d in self._value.shape]

    def data_type(self):
        return dtype_name(self._value.dtype)

    def element_type(self):
        return helper.np_dtype_to_tensor_dtype(np.dtype(self._value.dtype))

    def device_name(self):
        return self._device

    def data_ptr(self):
        if self._device == "cpu":
            return self._value.ctypes.data
        if hasattr(self._value, "__cuda_array_interface__"):
            return self._value.__cuda_array_interface__["data"][0]
        return self._value._ary.ctypes.data         # Numba's simulator: host memory

    def tensor_size_in_bytes(self):
        return int(self._value.nbytes)

    def has_value(self):
        return True

    def is_tensor(self):
        return True

    def is_sparse_tensor(self):
        return False

    def is_tensor_sequence(self):
        return False

    def as_sparse_tensor(self):
        raise NotImplementedError("onnxjit has no sparse tensors")

    def update_inplace(self, data):
        """Copy `data` (same shape and dtype) into this value's buffer."""
        if self._device == "cpu":
            np.copyto(self._value, np.asarray(data), casting="no")
        else:
            self._value.copy_to_device(np.ascontiguousarray(data))

    def _store(self, array):
        """Write a run's result into this (pre-allocated, bound) value."""
        if tuple(self._value.shape) != tuple(array.shape) or self._value.dtype != array.dtype:
            raise ort_error(InvalidArgument, f"the bound output has shape {self.shape()} "
                            f"{self.data_type()}, the result {list(array.shape)} "
                            f"{dtype_name(array.dtype)}")
        self.update_inplace(array)

    def __repr__(self):
        return f"<onnxjit.OrtValue {self.data_type()} {self.shape()} on {self._device}>"


def _from_pointer(element_type, shape, buffer_ptr):
    """A numpy view of memory the caller owns (ORT's bind_input/bind_output with a pointer)."""
    dtype = _dtype(element_type)
    shape = tuple(int(d) for d in shape)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype, count).reshape(shape)


class IOBinding:
    """ORT's IOBinding: inputs and outputs bound by name, then `run_with_iobinding`. Outputs
    bound to a pre-allocated OrtValue or buffer receive a copy of the result (onnxjit's compiled
    code allocates its own outputs)."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = {}          # name -> OrtValue to fill, or the device to allocate on
        self._results = []

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        if device_type.lower() != "cpu":
            raise RuntimeError(f"bind_input by pointer takes host memory only, not {device_type}")
        self._inputs[name] = _from_pointer(element_type, shape, buffer_ptr)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None,
                    buffer_ptr=None):
        if buffer_ptr is None:
            self._outputs[name] = device_type.lower()
            return
        if element_type is None or shape is None:
            raise ValueError("`element_type` and `shape` are to be provided if pre-allocated "
                             "memory is provided")
        self._outputs[name] = OrtValue(_from_pointer(element_type, shape, buffer_ptr))

    def bind_ortvalue_output(self, name, ortvalue):
        self._outputs[name] = ortvalue

    def synchronize_inputs(self):
        """Nothing to wait for: onnxjit's CPU calls are synchronous."""

    def synchronize_outputs(self):
        """Nothing to wait for: onnxjit's CPU calls are synchronous."""

    def get_outputs(self):
        """The OrtValues of the latest run, in the order the outputs were bound."""
        return list(self._results)

    def copy_outputs_to_cpu(self):
        """Copies of the latest run's outputs, on the host."""
        return [np.array(v.numpy()) for v in self._results]

    def clear_binding_inputs(self):
        self._inputs.clear()

    def clear_binding_outputs(self):
        self._outputs.clear()

    def _run(self, run_options):
        """Run the session on the bound inputs, filling the bound outputs (run_with_iobinding)."""
        if not self._outputs:
            raise RuntimeError("Error in execution: At least one output should be requested.")
        names = list(self._outputs)
        arrays = self._session._run_values(names, self._inputs, run_options)
        results = []
        for name, array in zip(names, arrays):
            bound = self._outputs[name]
            if isinstance(bound, str):
                results.append(OrtValue(_placed(array, bound)))
            else:
                bound._store(array)
                results.append(bound)
        self._results = results
