"""ONNX Runtime's option objects, enums, providers and error classes, as onnxjit reads them.

Names, defaults and messages follow onnxruntime 1.32's Python API, so a script written for
ONNX Runtime sets and reads them unchanged (see "ONNX Runtime users" in the README).
"""
from __future__ import annotations

import enum
import logging
import warnings

from .errors import InputError, ModelError, OnnxJitError

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"
# ORT's severities (0 verbose, 1 info, 2 warning, 3 error, 4 fatal) as logging levels
LOG_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR,
              4: logging.CRITICAL}


# -- errors: ORT's class names (onnxruntime.capi.onnxruntime_pybind11_state) and message format --
class Fail(OnnxJitError, RuntimeError):
    """ORT status FAIL (e.g. a run stopped by RunOptions.terminate)."""


class InvalidArgument(InputError):
    """ORT status INVALID_ARGUMENT: an unknown input or output name, a wrong dtype, rank or dim."""


class NoSuchFile(ModelError):
    """ORT status NO_SUCHFILE: no model file at the path."""


class InvalidProtobuf(ModelError):
    """ORT status INVALID_PROTOBUF: the bytes are not an ONNX model."""


class RuntimeException(OnnxJitError, RuntimeError):
    """ORT status RUNTIME_EXCEPTION."""


class EPFail(OnnxJitError, RuntimeError):
    """ORT status EP_FAIL: an execution provider failed."""


_STATUS = {Fail: (1, "FAIL"), InvalidArgument: (2, "INVALID_ARGUMENT"), NoSuchFile: (3, "NO_SUCHFILE"),
           RuntimeException: (6, "RUNTIME_EXCEPTION"), InvalidProtobuf: (7, "INVALID_PROTOBUF"),
           EPFail: (11, "EP_FAIL")}


def ort_error(cls, message):
    """`cls(message)` with ORT's '[ONNXRuntimeError] : code : NAME : ' prefix."""
    code, name = _STATUS[cls]
    return cls(f"[ONNXRuntimeError] : {code} : {name} : {message}")


# -- enums ----------------------------------------------------------------------------------------
class _OrtEnum(enum.IntEnum):
    """An IntEnum printing as 'GraphOptimizationLevel.ORT_ENABLE_ALL', as ORT's pybind enums do."""

    def __str__(self):
        return f"{type(self).__name__}.{self.name}"

    __format__ = object.__format__


class GraphOptimizationLevel(_OrtEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_OrtEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(_OrtEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


# -- options --------------------------------------------------------------------------------------
class _ConfigEntries:
    """add_*_config_entry / get_*_config_entry, with ORT's error for a missing key."""
    _owner = ""

    def _config_add(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_{self._owner[:-7].lower()}_config_entry(): keys and values are "
                            f"strings, got {type(key).__name__} and {type(value).__name__}")
        self._config[key] = value

    def _config_get(self, key):
        if key not in self._config:
            raise RuntimeError(f"{self._owner} does not have configuration with key: {key}")
        return self._config[key]


class SessionOptions(_ConfigEntries):
    """ORT's SessionOptions. onnxjit honours intra_op_num_threads (Numba threads for this session's
    calls), enable_profiling/profile_file_prefix, optimized_model_filepath and free-dimension
    overrides; the other fields are kept and reported (see the README for what each maps to).
    Config entries "onnxjit.tiered" ("0"/"1") and "onnxjit.max_signatures" reach `prepare`."""
    _owner = "SessionOptions"

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config = {}
        self._free_dims = {}
        self._initializers = {}

    def add_session_config_entry(self, key, value):
        self._config_add(key, value)

    def get_session_config_entry(self, key):
        return self._config_get(key)

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        """Compile and check inputs as if the symbolic dim `dim_name` were `dim_value`."""
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_initializer(self, name, ortvalue):
        """Replace the initializer `name` with this value (an OrtValue or a numpy array)."""
        self._initializers[str(name)] = ortvalue

    def register_custom_ops_library(self, library_path):
        raise NotImplementedError("onnxjit cannot load ORT custom-op libraries")

    def __repr__(self):
        return f"<onnxjit SessionOptions {vars(self)!r}>"


def copy_options(options):
    """A SessionOptions holding the fields of `options` (ours, ORT's, or None: the defaults)."""
    copy = SessionOptions()
    if options is None:
        return copy
    for name in list(vars(copy)):
        if not name.startswith("_") and hasattr(options, name):
            setattr(copy, name, getattr(options, name))
    for name in ("_config", "_free_dims", "_initializers"):
        setattr(copy, name, dict(getattr(options, name, {})))
    copy.graph_optimization_level = GraphOptimizationLevel(int(copy.graph_optimization_level))
    copy.execution_mode = ExecutionMode(int(copy.execution_mode))
    return copy


class RunOptions(_ConfigEntries):
    """ORT's RunOptions. `terminate` set before a run makes it fail as ORT's does (a compiled
    call is not interrupted once started); `run_tag` is an alias of `logid` (ORT's C API name)."""
    _owner = "RunOptions"

    def __init__(self):
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    run_tag = property(lambda self: self.logid, lambda self, tag: setattr(self, "logid", tag))

    def add_run_config_entry(self, key, value):
        self._config_add(key, value)

    def get_run_config_entry(self, key):
        return self._config_get(key)

    def add_active_adapter(self, adapter):
        raise NotImplementedError("onnxjit has no LoRA adapters")


def set_default_logger_severity(level):
    """ORT's logging severity (0 verbose ... 4 fatal) as the level of the 'onnxjit' logger."""
    logging.getLogger("onnxjit").setLevel(LOG_LEVELS[int(level)])


# -- providers ------------------------------------------------------------------------------------
def cuda_available():
    """Whether onnxjit's CUDA target can run here."""
    from .backend import supports_device
    return bool(supports_device("CUDA"))


def get_available_providers():
    """The providers onnxjit can run: CUDAExecutionProvider (where the CUDA target runs), CPU."""
    return [CUDA, CPU] if cuda_available() else [CPU]


def get_all_providers():
    """Every provider name onnxjit maps to one of its targets."""
    return [CUDA, CPU]


def get_device():
    """'GPU' where the CUDA target runs, else 'CPU' (ORT's build device)."""
    return "GPU" if cuda_available() else "CPU"


def normalize_providers(providers, provider_options):
    """(names, options dicts) as ORT normalizes them (check_and_normalize_provider_args), keeping
    only the providers onnxjit can run here; a missing one gets ORT's warning. CPU is the last
    resort, as in ORT."""
    if providers is None:
        providers = [CPU]
    if isinstance(providers, str) or not hasattr(providers, "__len__"):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both "
                             "are given.")
        pairs = list(zip(providers, provider_options))
    else:
        pairs = [p if isinstance(p, tuple) else (p, {}) for p in providers]
    if not all(isinstance(n, str) and isinstance(o, dict) for n, o in pairs):
        raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    available, chosen = get_available_providers(), {}
    for name, options in pairs:
        if name not in available:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available)}'", stacklevel=3)
        elif name not in chosen:
            chosen[name] = {str(k): str(v) for k, v in options.items()}
    chosen.setdefault(CPU, {})
    return list(chosen), list(chosen.values())
