"""The nodes the staged driver runs itself (staged.py), between compiled segments.

Two kinds:
- **kernels**: data-dependent output sizes, computed by compiled kernels that allocate their
  result (`kernels/dynamic.py`): NonZero, Compress, Unique (1-D), NonMaxSuppression;
- **Python segments**: sequences (Python lists of arrays) and optionals (None or the value), and
  control flow decided at run time (If, Loop, Scan, SequenceMap), whose bodies are staged reps
  of their own: a body of ordinary nodes is one compiled segment, called once per iteration.
"""
from __future__ import annotations

import numpy as np

from . import staged
from .errors import KernelError, LoweringError
from .ir import attributes
from .kernels import dynamic

HANDLERS = {}     # op_type -> (function, runs Python)


def host(op_type, python=True):
    def register(fn):
        HANDLERS[op_type] = (fn, python)
        return fn
    return register


def is_python(node):
    entry = HANDLERS.get(node.op_type)
    return entry is None or entry[1] or node.op_type == "Identity"


def run_host(owner, node, args, outer, attrs=None):
    entry = HANDLERS.get(node.op_type)
    if entry is None:
        if all(not isinstance(a, list) for a in args):
            raise LoweringError(f"{node.op_type} node {node.name!r}: no host implementation "
                                "(the staged driver runs sequence, optional and data-dependent "
                                "ops only)")
        raise LoweringError(f"{node.op_type} node {node.name!r}: reads a sequence, which only "
                            "the sequence ops and Identity accept")
    fn, python = entry
    if python:
        staged.python_segments[(node.op_type, _why(node))] += 1
    try:
        outs = fn(_Ctx(owner, node, outer), *args,
                  **(attributes(node) if attrs is None else attrs))
    except (IndexError, ValueError) as exc:
        if isinstance(exc, (KernelError, LoweringError)):
            raise
        raise KernelError(f"{node.op_type} node {node.name!r}: {exc}") from None
    return list(outs)


def _why(node):
    if node.op_type == "If":
        return "branch chosen at run time, branches compiled"
    if node.op_type in staged.SUBGRAPH_OPS:
        return "loop in Python, body compiled"
    if node.op_type in staged.STRING_OPS or node.op_type == "Equal":
        return "strings are Python str objects (ops/strings.py)"
    if node.op_type in staged.SEQUENCE_OPS:
        return "sequences and optionals are Python lists / None"
    return "reads or makes a sequence"


class _Seq(list):
    """A sequence value returned by a handler (one output, not several)."""


class _Ctx:
    def __init__(self, owner, node, outer):
        self.owner, self.node, self.outer = owner, node, outer

    def fail(self, message):
        raise KernelError(f"{self.node.op_type} node {self.node.name!r}: {message}")

    def body(self, graph):
        """The staged rep of a subgraph, cached per graph and types of the outer values."""
        types = {n: staged.tensor_type_of(n, v).type for n, v in self.outer.items()
                 if v is not None}
        key = (id(graph), tuple(sorted((n, staged._type_key(v)) for n, v in self.outer.items())))
        cache = self.owner.__dict__.setdefault("_bodies", {})
        rep = cache.get(key)
        if rep is None:
            rep = cache[key] = (graph, staged.subgraph_rep(self.owner, graph, types))
        return rep[1]

    def call(self, graph, inputs):
        rep = self.body(graph)
        env = dict(zip([i.name for i in graph.input], inputs))
        env.update({n: v for n, v in self.outer.items() if n in rep.input_names})
        return rep.evaluate(env)


def _seq(values):
    return _Seq(values)


def _position(ctx, pos, n, insert=False):
    p = int(np.asarray(pos).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        ctx.fail(f"position {p} is out of range for a sequence of {n}")
    return p + n if p < 0 else p


# -- sequences ---------------------------------------------------------------------------------
@host("SequenceEmpty")
def sequence_empty(ctx, dtype=None):
    return [_seq([])]


@host("SequenceConstruct")
def sequence_construct(ctx, *tensors):
    return [_seq(list(tensors))]


@host("SequenceInsert")
def sequence_insert(ctx, seq, tensor, position=None):
    out = list(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(ctx, position, len(seq), insert=True), tensor)
    return [_seq(out)]


@host("SequenceAt")
def sequence_at(ctx, seq, position):
    return [seq[_position(ctx, position, len(seq))]]


@host("SequenceErase")
def sequence_erase(ctx, seq, position=None):
    out = list(seq)
    if not out:
        ctx.fail("erasing from an empty sequence")
    del out[-1 if position is None else _position(ctx, position, len(seq))]
    return [_seq(out)]


@host("SequenceLength")
def sequence_length(ctx, seq):
    return [np.array(len(seq), np.int64)]


@host("SplitToSequence")
def split_to_sequence(ctx, x, split=None, axis=0, keepdims=1):
    axis = axis + x.ndim if axis < 0 else axis
    n = x.shape[axis]
    if split is None:
        parts = np.split(x, n, axis=axis) if n else []      # a dim of 0: an empty sequence
        if not keepdims:
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return [_seq([np.array(p, order="C") for p in parts])]
    split = np.asarray(split)
    if split.ndim == 0:
        size = int(split)
        if size <= 0:
            ctx.fail(f"split size {size} must be positive")
        bounds = list(range(size, n, size))
    else:
        sizes = [int(s) for s in split.reshape(-1)]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            ctx.fail(f"split sizes {sizes} do not add up to dimension {n}")
        bounds = list(np.cumsum(sizes)[:-1])
    return [_seq([np.array(p, order="C") for p in np.split(x, bounds, axis=axis)])]


@host("ConcatFromSequence")
def concat_from_sequence(ctx, seq, axis=None, new_axis=0):
    if not seq:
        ctx.fail("concatenating an empty sequence")
    if new_axis:
        rank = seq[0].ndim + 1
        return [np.stack(seq, axis=axis + rank if axis < 0 else axis)]
    return [np.concatenate(seq, axis=axis)]


@host("Optional")
def optional(ctx, value=None, type=None):
    return [value]


@host("OptionalHasElement")
def optional_has_element(ctx, value=None):
    return [np.array(value is not None)]


@host("OptionalGetElement")
def optional_get_element(ctx, value):
    if value is None:
        ctx.fail("the optional is empty")
    return [value]


@host("Identity")
def identity(ctx, value):
    return [value]


# -- control flow decided at run time --------------------------------------------------------
@host("If")
def if_(ctx, cond, then_branch=None, else_branch=None):
    taken = bool(np.asarray(cond).reshape(-1)[0])
    return ctx.call(then_branch if taken else else_branch, [])


@host("Loop")
def loop(ctx, trip_count, cond, *initial, body=None):
    count = None if trip_count is None else int(np.asarray(trip_count).reshape(-1)[0])
    keep = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    carried, scans, i = list(initial), [], 0
    n_scan = len(body.output) - 1 - len(initial)
    while keep and (count is None or i < count):
        outs = ctx.call(body, [np.array(i, np.int64), np.array(keep)] + carried)
        keep = bool(np.asarray(outs[0]).reshape(-1)[0])
        carried = outs[1:1 + len(carried)]
        scans.append(outs[1 + len(initial):])
        i += 1
    stacked = []
    for k in range(n_scan):
        if scans:
            stacked.append(np.stack([np.asarray(s[k]) for s in scans]))
        else:
            stacked.append(np.zeros((0,), np.float32))
    return carried + stacked


@host("Scan")
def scan(ctx, *args, body=None, num_scan_inputs=None, directions=None, scan_input_axes=None,
         scan_input_directions=None, scan_output_axes=None, scan_output_directions=None):
    m = int(num_scan_inputs)
    if ctx.owner.opsets.get("", 9) < 9:      # Scan-8: a batch axis first, sequence_lens
        seq_lens, rest = args[0], list(args[1:])
        n = len(rest) - m
        if seq_lens is not None:
            lens = np.asarray(seq_lens).reshape(-1)
            if np.any(lens != rest[n].shape[1]):
                ctx.fail("sequence_lens shorter than the scan inputs are not supported")
        batches = rest[0].shape[0] if n else rest[n].shape[0]
        results = [_scan(ctx, body, [a[b] for a in rest[:n]], [a[b] for a in rest[n:]],
                         [0] * m, directions or [0] * m, None, None) for b in range(batches)]
        return [np.stack([r[k] for r in results]) for k in range(len(results[0]))]
    n = len(args) - m
    return _scan(ctx, body, list(args[:n]), list(args[n:]), scan_input_axes or [0] * m,
                 scan_input_directions or [0] * m, scan_output_axes, scan_output_directions)


def _scan(ctx, body, states, xs, in_axes, in_dirs, out_axes, out_dirs):
    xs = [np.moveaxis(x, a, 0) for x, a in zip(xs, in_axes)]
    length = xs[0].shape[0] if xs else 0
    if any(x.shape[0] != length for x in xs):
        ctx.fail("scan inputs differ in sequence length")
    slices = []
    for t in range(length):
        step = [x[length - 1 - t if d else t] for x, d in zip(xs, in_dirs)]
        outs = ctx.call(body, states + [np.array(s, order="C") for s in step])
        states = outs[:len(states)]
        slices.append(outs[len(states):])
    k_out = len(body.output) - len(states)
    out_axes = out_axes or [0] * k_out
    out_dirs = out_dirs or [0] * k_out
    results = []
    for k in range(k_out):
        if not slices:
            ctx.fail("a Scan of length 0 has scan outputs of unknown shape")
        y = np.stack([np.asarray(s[k]) for s in slices])
        if out_dirs[k]:
            y = y[::-1]
        axis = out_axes[k] + y.ndim if out_axes[k] < 0 else out_axes[k]
        results.append(np.array(np.moveaxis(y, 0, axis), order="C"))
    return list(states) + results


@host("SequenceMap")
def sequence_map(ctx, seq, *extra, body=None):
    n = len(seq)
    for e in extra:
        if isinstance(e, list) and len(e) != n:
            ctx.fail(f"sequences of lengths {n} and {len(e)}")
    outs = [[] for _ in body.output]
    for i in range(n):
        ins = [seq[i]] + [e[i] if isinstance(e, list) else e for e in extra]
        for acc, o in zip(outs, ctx.call(body, ins)):
            acc.append(o)
    return [_seq(o) for o in outs]


# -- data-dependent sizes: compiled kernels ----------------------------------------------------
@host("NonZero", python=False)
def nonzero(ctx, x):
    return [dynamic.nonzero_indices(x)]


@host("Compress", python=False)
def compress(ctx, x, condition, axis=None):
    if axis is not None and not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    return [dynamic.compress(x, condition, axis)]


@host("Unique", python=False)
def unique(ctx, x, axis=None, sorted=1):
    if axis is not None and not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    outs = dynamic.unique(x, axis, sorted)
    return list(outs[:max(1, len([o for o in ctx.node.output]))])


@host("NonMaxSuppression", python=False)
def non_max_suppression(ctx, boxes, scores, max_output=None, iou=None, score=None,
                        center_point_box=0):
    # ONNX: each a scalar (ONNX Runtime: or a 1-D tensor of one element). A
    # max_output_boxes_per_class of shape [0] was taken as 0 (seed 7 case 4118); the reference
    # refuses it (ONNX Runtime reads past the empty tensor). Empty thresholds are left out, as
    # the reference takes them.
    for what, v in (("max_output_boxes_per_class", max_output), ("iou_threshold", iou),
                    ("score_threshold", score)):
        empty_ok = what != "max_output_boxes_per_class"
        if v is not None and (np.ndim(v) > 1 or np.size(v) > 1
                              or (np.size(v) == 0 and not empty_ok)):
            ctx.fail(f"{what} must be a scalar (or one element), got shape {list(np.shape(v))}")
    return [dynamic.non_max_suppression(boxes, scores, max_output, iou, score,
                                        center_point_box)]


from .ops import strings as _strings  # noqa: E402,F401  (registers the string host ops)
