"""Tiered execution: a first answer in seconds, the optimized code when it is ready.

When a signature's machine code is not in the caches yet (the first use after installing, or a
new kind of model), `prepare` does not wait for Numba: the rep answers on the *reference tier*,
onnx's own `ReferenceEvaluator` (numpy, BLAS for Conv and MatMul), while worker processes compile
the optimized code into the disk caches. The compiled graph is then loaded from those caches and
swapped in; `rep.wait()` blocks until it is, `rep.tier` says which tier answers.

Workers are separate processes, not threads: Numba compiles under one global lock, and a worker
keeps the caller's interpreter free. A worker outlives a caller that exits before it finishes, so
the next process finds the cache filled.
"""
from __future__ import annotations

import glob
import hashlib
import json
import locale as pylocale
import logging
import os
import subprocess
import sys
import threading

import numpy as np

log = logging.getLogger("onnxjit")

# The tiers a signature answers on, from first to best: onnx's evaluator; compiled code whose
# library kernels are called from a Python driver (their machine code was cached, the graph's
# njit entry, which links them in, is compiling); the optimized code.
REFERENCE, DRIVER, COMPILED = "reference", "driver", "compiled"


def tiered_default():
    """Whether `prepare` answers on the reference tier while compiling (ONNXJIT_TIERED=0: no)."""
    return os.environ.get("ONNXJIT_TIERED", "1") != "0"


def reference_runner(model, most=None):
    """A callable with the compiled entry's calling convention (inputs in graph order, a tuple of
    outputs in graph order) that runs `model` on onnx's ReferenceEvaluator. `most` is the
    element limit (validate.py) that the compiled kernels apply to work they only know at run
    time; the reference tier applies it too, before the evaluator starts such work."""
    from onnx.reference import ReferenceEvaluator
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 21)
    from .ops.ml import reference_ops
    evaluator = ReferenceEvaluator(model, new_ops=[_inference_batch_norm(), _lrn(),
                                                   *_coerced_softmaxes(opset), *_pools(),
                                                   _conv(),
                                                   *_roi_aligns(most), *reference_ops(model)])
    names = [i.name for i in model.graph.input
             if i.name not in {t.name for t in model.graph.initializer}]
    lock = threading.Lock()    # the evaluator keeps per-run state

    def run_reference(*arrays):
        with lock:
            # onnx's StringNormalizer sets the process locale to its `locale` attribute and
            # leaves it so; the caller's (and file reads' default encoding) must not change
            saved = pylocale.setlocale(pylocale.LC_ALL)
            try:
                outs = evaluator.run(None, dict(zip(names, arrays)))
            finally:
                if pylocale.setlocale(pylocale.LC_ALL) != saved:
                    pylocale.setlocale(pylocale.LC_ALL, saved)
        return tuple(_as_output(o) for o in outs)
    return run_reference


def _as_output(o):
    """An evaluator's output as the compiled code gives it: ZipMap's list of dicts as it is,
    strings in an object array (as ORT returns them)."""
    if isinstance(o, list):
        return o
    o = np.asarray(o)
    return o.astype(object) if o.dtype.kind in "US" else o


def _inference_batch_norm():
    """BatchNormalization as onnxjit and ONNX Runtime compute it: with the running statistics
    unless training_mode is 1 (opset 14+). onnx 1.23's evaluator mixes in the batch's own
    statistics whenever `momentum` is set, which its schema default always does for opsets 9-13:
    the light ResNet-50's logits then came out 1e4 times off."""
    from onnx.reference.op_run import OpRun

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None,
                 training_mode=None, is_test=None, spatial=None):
            if training_mode:
                from onnx.reference.ops.op_batch_normalization import BatchNormalization_14
                return BatchNormalization_14._run(self, x, scale, bias, mean, var, epsilon,
                                                  momentum, training_mode)
            shape = (-1,) + (1,) * (x.ndim - 2)
            eps = 1e-5 if epsilon is None else epsilon
            y = (scale.reshape(shape) * (x - mean.reshape(shape))
                 / np.sqrt(var.reshape(shape) + eps) + bias.reshape(shape))
            return (y.astype(x.dtype),)
    return BatchNormalization


def _roi_aligns(most):
    """RoiAlign that first refuses what onnxjit's kernel refuses (kernels/spatial.roi_align): an
    adaptive sampling grid (sampling_ratio 0, from each roi's size) of more samples than the
    element limit. The evaluator loops over the samples in Python: a roi 1e30 wide hung it."""
    from onnx.reference.ops.op_roi_align import RoiAlign as ReferenceRoiAlign

    from .validate import DEFAULT_MAX_ELEMENTS
    limit = DEFAULT_MAX_ELEMENTS if most is None else most

    class RoiAlign(ReferenceRoiAlign):
        op_domain = ""

        def _run(self, x, rois, batch_indices, coordinate_transformation_mode=None, mode=None,
                 output_height=None, output_width=None, sampling_ratio=None,
                 spatial_scale=None):
            oh = output_height or getattr(self, "output_height", 1)
            ow = output_width or getattr(self, "output_width", 1)
            ratio = sampling_ratio or getattr(self, "sampling_ratio", 0)
            ctm = (coordinate_transformation_mode
                   or getattr(self, "coordinate_transformation_mode", None) or "output_half_pixel")
            if not ratio or ratio <= 0:
                _check_roi_grid(x, rois, oh, ow, spatial_scale or getattr(self, "spatial_scale", 1.0),
                                ctm.lower() == "half_pixel", limit)
            return super()._run(x, rois, batch_indices, coordinate_transformation_mode, mode,
                                output_height, output_width, sampling_ratio, spatial_scale)
    return [RoiAlign]


def _check_roi_grid(x, rois, oh, ow, scale, half_pixel, most):
    """kernels/spatial.roi_align's check, over all rois at once (float64, as the kernel)."""
    from .errors import LimitError
    r = np.asarray(rois, np.float64).reshape(-1, 4) * (1.0 if scale is None else scale)
    rw, rh = r[:, 2] - r[:, 0], r[:, 3] - r[:, 1]
    if not half_pixel:
        rw, rh = np.maximum(rw, 1.0), np.maximum(rh, 1.0)
    with np.errstate(all="ignore"):
        fh, fw = np.ceil(rh / oh), np.ceil(rw / ow)
        work = fh * fw * oh * ow * max(np.shape(x)[1] if np.ndim(x) > 1 else 1, 1)
    bad = (fh > 0) & (fw > 0) & ~(work <= most)
    if bad.any():
        raise LimitError(f"RoiAlign: roi {int(np.argmax(bad))}'s adaptive sampling grid "
                         f"(sampling_ratio 0) asks for more samples than the element limit of "
                         f"{most:,} (prepare(max_elements=...) or ONNXJIT_MAX_ELEMENTS)")


def _lrn():
    """LRN over a window of channels; onnx 1.23's evaluator loops over the batch dimension
    instead, so that only the first N channels see their neighbours (AlexNet's output 4e-3 off)."""
    from onnx.reference.op_run import OpRun

    class LRN(OpRun):
        op_domain = ""

        def _run(self, x, alpha=None, beta=None, bias=None, size=None):
            C = x.shape[1]
            lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
            squares = np.square(x.astype(np.float64))
            total = np.zeros_like(squares)
            for c in range(C):
                total[:, c] = squares[:, max(0, c - lo):min(C, c + hi + 1)].sum(axis=1)
            return ((x / (bias + (alpha / size) * total) ** beta).astype(x.dtype),)
    return LRN


def _pools():
    """MaxPool (its Y output) and AveragePool over numpy's sliding windows. onnx 1.23's evaluator
    loops over every output in Python: Inception-v2's pools took 27 of its 29 s a run."""
    from onnx.reference.ops.op_average_pool import AveragePool_19
    from onnx.reference.ops.op_max_pool import MaxPool as ReferenceMaxPool

    class MaxPool(ReferenceMaxPool):
        op_domain = ""

        def _run(self, x, auto_pad=None, ceil_mode=None, dilations=None, kernel_shape=None,
                 pads=None, storage_order=None, strides=None):
            if len(self.onnx_node.output) > 1 and self.onnx_node.output[1]:   # Indices
                return super()._run(
                    x, auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations,
                    kernel_shape=kernel_shape, pads=pads, storage_order=storage_order,
                    strides=strides)
            return (_pool(x, True, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides,
                          0),)

    class AveragePool(AveragePool_19):
        op_domain = ""

        def _run(self, x, auto_pad=None, ceil_mode=None, count_include_pad=None, dilations=None,
                 kernel_shape=None, pads=None, strides=None):
            if x.ndim < 3:
                return super()._run(
                    x, auto_pad=auto_pad, ceil_mode=ceil_mode,
                    count_include_pad=count_include_pad, dilations=dilations,
                    kernel_shape=kernel_shape, pads=pads, strides=strides)
            return (_pool(x, False, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides,
                          count_include_pad),)
    return [MaxPool, AveragePool]


def _window_pads(spatial, kernel_shape, auto_pad, dilations, pads, strides):
    """(auto_pad as a str, strides, dilations, window spans, begin pads, end pads) of a sliding
    window over `spatial` (pools, Conv), SAME_UPPER / SAME_LOWER / VALID resolved to pads."""
    n = len(spatial)
    k = list(kernel_shape)
    s = list(strides or [1] * n)
    d = list(dilations or [1] * n)
    begin, end = list((pads or [0] * 2 * n)[:n]), list((pads or [0] * 2 * n)[n:])
    span = [(k[i] - 1) * d[i] + 1 for i in range(n)]
    auto = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
    for i in range(n):
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-spatial[i] // s[i])
            total = max((o - 1) * s[i] + span[i] - spatial[i], 0)
            small, large = total // 2, total - total // 2
            begin[i], end[i] = (small, large) if auto == "SAME_UPPER" else (large, small)
        elif auto == "VALID":
            begin[i] = end[i] = 0
    return auto, s, d, span, begin, end


def _pool(x, is_max, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides,
          count_include_pad):
    """ONNX pooling of x (N, C, *S) by numpy's sliding windows (see _pools)."""
    from numpy.lib.stride_tricks import sliding_window_view
    spatial = x.shape[2:]
    n = len(spatial)
    auto, s, d, span, begin, end = _window_pads(spatial, kernel_shape, auto_pad, dilations,
                                                pads, strides)
    out = []
    for i in range(n):
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-spatial[i] // s[i])
        elif auto == "VALID":
            o = -(-(spatial[i] - span[i] + 1) // s[i])
        else:
            room = spatial[i] + begin[i] + end[i] - span[i]
            o = (-(-room // s[i]) if ceil_mode else room // s[i]) + 1
            if ceil_mode and (o - 1) * s[i] >= spatial[i] + begin[i]:
                o -= 1      # the last window would start in the end padding
        out.append(max(o, 0))
    # windows may reach past the declared end padding (ceil_mode): pad that far, count nothing
    reach = [max((out[i] - 1) * s[i] + span[i] - spatial[i] - begin[i], end[i]) for i in range(n)]
    widths = [(0, 0), (0, 0)] + [(begin[i], reach[i]) for i in range(n)]
    axes = tuple(range(2, 2 + n))

    def windows(a):
        view = sliding_window_view(a, span, axis=axes)
        view = view[(slice(None), slice(None)) + tuple(slice(0, out[i] * s[i], s[i]) for i in range(n))]
        return view[(Ellipsis,) + tuple(slice(None, None, d[i]) for i in range(n))]
    reduce_axes = tuple(range(2 + n, 2 + 2 * n))
    if is_max:
        xp = np.pad(x, widths, constant_values=-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min)
        return windows(xp).max(axis=reduce_axes).astype(x.dtype)
    xp = np.pad(x.astype(np.float64), widths)
    counted = np.zeros((1, 1) + tuple(spatial[i] + begin[i] + reach[i] for i in range(n)))
    region = tuple(slice(0, begin[i] + spatial[i] + end[i]) if count_include_pad
                   else slice(begin[i], begin[i] + spatial[i]) for i in range(n))
    counted[(0, 0) + region] = 1
    total = windows(xp).sum(axis=reduce_axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total / windows(counted).sum(axis=reduce_axes)).astype(x.dtype)


def _conv():
    """Conv as one BLAS matmul per image and group over numpy's sliding windows. onnx 1.23's
    evaluator gathers its im2col with fancy indexing: VGG-19's first run on the reference tier
    took 5.5 s, 3.5 of it in that gather (2026-11-27, Zen 3)."""
    from onnx.reference.ops.op_conv import Conv as ReferenceConv

    class Conv(ReferenceConv):
        op_domain = ""

        def _run(self, x, w, b=None, auto_pad=None, dilations=None, group=None,
                 kernel_shape=None, pads=None, strides=None):
            if (x.ndim < 3 or x.ndim != w.ndim or x.dtype != w.dtype or x.dtype.kind != "f"
                    or (kernel_shape and tuple(kernel_shape) != w.shape[2:])):
                return super()._run(x, w, b, auto_pad=auto_pad, dilations=dilations,
                                    group=group, kernel_shape=kernel_shape, pads=pads,
                                    strides=strides)
            return (_conv_windows(x, w, b, auto_pad, dilations, group or 1, pads, strides),)
    return Conv


def _conv_windows(x, w, b, auto_pad, dilations, group, pads, strides):
    """ONNX Conv of x (N, C, *S) by w (M, C/group, *K) over sliding windows (see _conv)."""
    from numpy.lib.stride_tricks import sliding_window_view
    n_img, channels = x.shape[:2]
    spatial, k = x.shape[2:], w.shape[2:]
    nd = len(spatial)
    _, s, d, span, begin, end = _window_pads(spatial, k, auto_pad, dilations, pads, strides)
    out = [max((spatial[i] + begin[i] + end[i] - span[i]) // s[i] + 1, 0) for i in range(nd)]
    m = w.shape[0]
    cg, mg = channels // group, m // group
    y = np.zeros((n_img, m) + tuple(out), x.dtype)
    if y.size and x.size and all(span[i] <= spatial[i] + begin[i] + end[i] for i in range(nd)):
        xp = np.pad(x, [(0, 0), (0, 0)] + [(begin[i], end[i]) for i in range(nd)])
        view = sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
        view = view[(slice(None), slice(None))
                    + tuple(slice(0, out[i] * s[i], s[i]) for i in range(nd))]
        view = view[(Ellipsis,) + tuple(slice(None, None, d[i]) for i in range(nd))]
        # (N, C, *out, *K) -> (N, C, *K, *out): the taps beside their channel, outputs last
        view = view.transpose((0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd)))
        taps = int(np.prod(k, dtype=np.int64))
        points = int(np.prod(out, dtype=np.int64))
        flat_y = y.reshape(n_img, m, points)
        if cg == 1:     # depthwise (and its channel multipliers): one einsum, no group loop
            cols = view.reshape(n_img, group, taps, points)
            flat_y[...] = np.einsum("ngtp,gmt->ngmp", cols, w.reshape(group, mg, taps),
                                    optimize=False).reshape(n_img, m, points)
            group = 0
        for g in range(group):
            weights = w[g * mg:(g + 1) * mg].reshape(mg, cg * taps)
            for img in range(n_img):
                cols = view[img, g * cg:(g + 1) * cg].reshape(cg * taps, points)
                np.matmul(weights, cols, out=flat_y[img, g * mg:(g + 1) * mg])
    if b is not None:
        y += b.reshape((1, m) + (1,) * nd).astype(x.dtype)
    return y


def _coerced_softmaxes(opset):
    """Softmax, LogSoftmax and Hardmax before opset 13 (default axis 1, the input taken as 2-D:
    the dims before `axis` as rows, those from it as columns); onnx 1.23's evaluator applies
    opset 13's single-axis rule to every opset (SqueezeNet's (1, 1000, 1, 1) softmax came out
    all ones). Opset 13 and later keep the evaluator's own."""
    if opset >= 13:
        return []
    from onnx.reference.op_run import OpRun

    def make(name, fn):
        def _run(self, x, axis=None):
            # the evaluator fills in opset 13's default (-1): the node's own attribute, else 1
            axis = next((a.i for a in self.onnx_node.attribute if a.name == "axis"), 1)
            axis = axis % max(x.ndim, 1)
            rows = int(np.prod(x.shape[:axis], dtype=np.int64))
            y = fn(x.reshape(rows, -1)) if x.size else x
            return (np.asarray(y, x.dtype).reshape(x.shape),)
        return type(name, (OpRun,), {"op_domain": "", "_run": _run})

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def log_softmax(x):
        shifted = x - x.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    def hardmax(x):
        return np.eye(x.shape[1], dtype=x.dtype)[np.argmax(x, axis=1)]
    return [make("Softmax", softmax), make("LogSoftmax", log_softmax), make("Hardmax", hardmax)]


# -- progress ---------------------------------------------------------------------------------
def log_progress(done, total, name):
    """The default progress report: one `logging` line per compiled call."""
    if name:
        log.info("compiling %d/%d: %s", done + 1, total, kernel_label(name))
    else:
        log.info("compiled %d calls", total)


def kernel_label(name):
    """'pool.maxpool' for the segment name '__k_pool.maxpool'."""
    return name.replace("__k_", "", 1)


# -- background compilation -------------------------------------------------------------------
# One background compile job at a time per process: a job already runs compile_workers() worker
# processes (one per core, at most 4), so a second one only oversubscribes the cores. Without
# this, a process preparing models in a loop started two workers per model, all at once (47
# compiling processes on two cores were seen, each holding 100-270 MB). Later jobs wait their
# turn; their reps answer on the reference tier meanwhile.
_JOB_SLOT = threading.Lock()


class BackgroundCompile:
    """Compiles one signature of a model in a worker process, then loads the result here.

    `options` are compile_model's keyword options (profile, optimize); `on_ready(compiled)`
    receives the CompiledGraph (called from this job's thread); `progress` hears (done, total,
    kernel name) as the worker reaches each call it compiles.
    """

    def __init__(self, model, signature, values, label, options, on_ready, progress=None):
        self.model, self.signature, self.values = model, signature, values or {}
        self.label, self.options = label, options
        self.on_ready, self.progress = on_ready, progress or log_progress
        self.error = self.result = None     # result: the compiled graph, once in place
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="onnxjit-compile", daemon=True)
        self._thread.start()

    def wait(self, timeout=None):
        """True once the compiled graph is in place; raises what stopped it."""
        if not self._done.wait(timeout):
            return False
        if self.error is not None:
            raise self.error
        return True

    def _run(self):
        from .pipeline import compile_model
        try:
            job = write_job(self.model, self.signature, self.values, self.label, self.options)
            if not _JOB_SLOT.acquire(blocking=False):
                log.info("onnxjit: %s waits for another background compile", self.label)
                _JOB_SLOT.acquire()
            try:
                ok = run_worker(job, self.progress)
            finally:
                _JOB_SLOT.release()
            if not ok:
                log.warning("the compile worker failed; compiling in this process")
            compiled = compile_model(self.model, self.signature, self.label, values=self.values,
                                     progress=self.progress, **self.options)
            self.result = compiled
            self.on_ready(compiled)
            if ok:
                remove_job(job)
        except BaseException as exc:      # recorded for wait(); the reference tier goes on
            log.error("compiling the optimized code failed: %s", exc)
            self.error = exc
        finally:
            self._done.set()


# Initializers whose raw bytes are at least this large travel in the job file as byte arrays,
# not inside the serialized model: serializing a model holds the GIL for the whole copy (VGG-19's
# 548 MB: 2.0 s, during which prepare's caller could not run), where reading each raw_data is
# one memcpy and np.savez writes in chunks, letting the caller's thread in between.
JOB_RAW_BYTES = 1 << 16


def write_job(model, signature, values, label, options):
    """Save what a worker needs to compile one signature; the job file's path (in the cache)."""
    from .compile import cache_dir, fallback_cache_dir
    skeleton, raws = _split_raw_initializers(model)
    blob = skeleton.SerializeToString()
    spec = json.dumps({"signature": [[n, list(map(int, s)), np.dtype(d).str]
                                     for n, s, d in signature],
                       "label": label, "options": options, "values": sorted(values),
                       "raw": [name for name, _ in raws]})
    digest = hashlib.sha256(blob + spec.encode())
    for _, raw in raws:
        digest.update(raw)
    for name in sorted(values):
        digest.update(np.ascontiguousarray(values[name]).tobytes())
    key = digest.hexdigest()[:32]
    folder = cache_dir()
    try:
        return _save_job(os.path.join(folder, "jobs"), key, blob, spec, values, raws)
    except OSError as exc:      # a read-only or full cache: the job goes to a temporary folder
        return _save_job(os.path.join(fallback_cache_dir(folder, exc), "jobs"), key, blob, spec,
                         values, raws)


def _split_raw_initializers(model):
    """(the model without the raw bytes of its large initializers, [(name, bytes)]): every
    other field of the model, its graph and those initializers copied as they are."""
    import onnx
    big = [t for t in model.graph.initializer
           if t.HasField("raw_data") and len(t.raw_data) >= JOB_RAW_BYTES]
    if not big:
        return model, []
    skeleton = onnx.ModelProto()
    _copy_fields(model, skeleton, skip=("graph",))
    _copy_fields(model.graph, skeleton.graph, skip=("initializer",))
    raws = []
    for t in model.graph.initializer:
        copy = skeleton.graph.initializer.add()
        raw = t.raw_data if t.HasField("raw_data") else b""
        if len(raw) >= JOB_RAW_BYTES:
            _copy_fields(t, copy, skip=("raw_data",))
            raws.append((t.name, raw))
        else:
            copy.CopyFrom(t)
    return skeleton, raws


def _copy_fields(src, dst, skip):
    """Copy every field of protobuf message `src` into `dst` but those named in `skip`, without
    reading the skipped ones (a large bytes field is copied whenever it is read)."""
    for field in src.DESCRIPTOR.fields:
        if field.name in skip:
            continue
        value = getattr(src, field.name)
        if _repeated(field):
            getattr(dst, field.name).extend(value)
        elif field.type == field.TYPE_MESSAGE:
            if src.HasField(field.name):
                getattr(dst, field.name).CopyFrom(value)
        elif src.HasField(field.name):
            setattr(dst, field.name, value)


def _repeated(field):
    """Whether a protobuf field is repeated (protobuf 7 has `is_repeated`, older ones `label`)."""
    flag = getattr(field, "is_repeated", None)
    return flag if flag is not None else field.label == field.LABEL_REPEATED


def _save_job(folder, key, blob, spec, values, raws=()):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{key}.npz")
    if not _job_readable(path):     # new, or left truncated or corrupted: written again
        tmp = f"{path}.{os.getpid()}.tmp.npz"
        np.savez(tmp, model=np.frombuffer(blob, np.uint8), spec=np.array(spec),
                 **{f"value_{i}": np.asarray(values[n]) for i, n in enumerate(sorted(values))},
                 **{f"raw_{i}": np.frombuffer(raw, np.uint8) for i, (_, raw) in enumerate(raws)})
        os.replace(tmp, path)
    return path


def _job_readable(path):
    if not os.path.exists(path):
        return False
    try:
        read_job(path)
        return True
    except Exception:
        return False


def remove_job(job):
    """Delete a finished job's file and its workers' logs."""
    for path in glob.glob(job[:-len(".npz")] + ".*log") + [job]:
        try:
            os.remove(path)
        except OSError:
            pass


def read_job(path):
    """(model, signature, values, label, options) from a job file."""
    import onnx
    with np.load(path, allow_pickle=False) as data:
        spec = json.loads(str(data["spec"]))
        model = onnx.load_from_string(data["model"].tobytes())
        values = {n: data[f"value_{i}"] for i, n in enumerate(spec["values"])}
        raws = {n: data[f"raw_{i}"] for i, n in enumerate(spec.get("raw", []))}
    for t in model.graph.initializer:
        if t.name in raws:
            t.raw_data = raws.pop(t.name).tobytes()
    if raws:
        raise ValueError(f"job {path}: no initializer for the raw data of {sorted(raws)}")
    signature = tuple((n, tuple(s), np.dtype(d)) for n, s, d in spec["signature"])
    return model, signature, values, spec["label"], spec["options"]


def compile_workers():
    """How many worker processes compile one signature (ONNXJIT_COMPILE_WORKERS, else the
    number of cores, at most 4)."""
    value = os.environ.get("ONNXJIT_COMPILE_WORKERS")
    return max(1, int(value)) if value else max(1, min(4, os.cpu_count() or 1))


def run_worker(job, progress, parts=None):
    """Compile `job` in `parts` worker processes at once (see compile_worker), relaying their
    progress; True when the first, which compiles every call, succeeded."""
    parts = parts or compile_workers()
    # the workers import the onnxjit this process runs (a checkout's, say), not another one
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    procs, logs = [], []
    for part in range(parts):
        # stderr to a file, not a pipe: a worker whose caller has exited goes on writing warnings
        logs.append(open(f"{job[:-len('.npz')]}.{part}.log", "w"))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "onnxjit.compile_worker", job, str(part)],
            stdout=subprocess.PIPE, stderr=logs[-1], text=True, start_new_session=True, env=env))
    lock = threading.Lock()

    def report(done, total, name):      # one relay thread per worker
        with lock:
            progress(done, total, name)
    relays = [threading.Thread(target=_relay, args=(p, report), daemon=True) for p in procs]
    for relay in relays:
        relay.start()
    for proc, relay, log_file in zip(procs, relays, logs):
        relay.join()
        proc.wait()
        log_file.close()
    first = procs[0]
    if first.returncode != 0:
        with open(logs[0].name) as f:
            log.warning("compile worker exited with %s: %s", first.returncode, f.read()[-2000:])
    return first.returncode == 0


def _relay(proc, progress):
    for line in proc.stdout:
        parts = line.rstrip("\n").split(" ", 3)
        if parts[0] == "progress" and len(parts) == 4:
            progress(int(parts[1]), int(parts[2]), parts[3])
