"""Exceptions raised by onnxjit; each message names what was wrong."""


class OnnxJitError(Exception):
    """Base class of every error onnxjit raises on purpose."""


class ModelError(OnnxJitError, ValueError):
    """The model cannot be read or is structurally invalid."""


class UnsupportedOpError(OnnxJitError, NotImplementedError):
    """The model uses operators (or attribute values) onnxjit cannot lower."""

    def __init__(self, message, unsupported=()):
        super().__init__(message)
        self.unsupported = list(unsupported)


class InputError(OnnxJitError, ValueError):
    """The inputs given to `run` do not match the model's inputs."""


class LoweringError(OnnxJitError, ValueError):
    """A node cannot be specialized for the given input shapes and types."""


class DataDependent(LoweringError):
    """A node needs, at compile time, a value computed at run time (NonZero's output shape,
    TopK's k computed from data, ...): the staged driver (staged.py) cuts the graph there."""

    def __init__(self, message, node=None):
        super().__init__(message)
        self.node = node


class KernelError(OnnxJitError, IndexError):
    """A compiled kernel refused its data (an index out of range, for instance)."""


class NeedsInputValue(OnnxJitError):
    """Internal: a lowering needs the contents of graph input `name` (a shape, axes, pads ...)."""

    def __init__(self, name):
        super().__init__(f"input {name!r} is used as a shape-like value")
        self.name = name


class DeviceError(OnnxJitError, ValueError):
    """A device that cannot be used here (a CUDA device without numba.cuda, GPU or ordinal)."""


class LimitError(ModelError):
    """A tensor or subgraph nesting over a resource limit (validate.py: max_elements, max_nesting)."""
