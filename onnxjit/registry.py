"""The op registry: (domain, op_type) -> lowerings by the first opset each applies to."""
from __future__ import annotations

import bisect

_RULES: dict[tuple[str, str], list[tuple[int, object]]] = {}

ONNX_DOMAINS = ("", "ai.onnx")


def _domain(domain):
    return "" if domain in ONNX_DOMAINS else domain


def register(op_type, since=1, domain=""):
    """Decorator: `fn(ctx, *inputs, **attributes)` lowers `op_type` from opset `since` on."""
    def wrap(fn):
        versions = _RULES.setdefault((_domain(domain), op_type), [])
        bisect.insort(versions, (since, fn), key=lambda v: v[0])
        return fn
    return wrap


_PEEPHOLES: dict[tuple[str, str], list] = {}


def peephole(op_type, domain=""):
    """Decorator: `fn(ctx, *inputs, **attributes)` may lower a node by rewriting its producer
    (e.g. Relu folded into the Conv before it); it returns None to decline."""
    def wrap(fn):
        _PEEPHOLES.setdefault((_domain(domain), op_type), []).append(fn)
        return fn
    return wrap


def peepholes(op_type, domain=""):
    """The peephole rewrites registered for an op type."""
    return _PEEPHOLES.get((_domain(domain), op_type), [])


_FINALIZERS: dict[str, list] = {}


def finalizer(kind):
    """Decorator: `fn(step)` runs on every step whose meta "kind" is `kind` after the whole graph
    is lowered, when every peephole has folded into it (e.g. Conv weights packed for the kernel
    chosen, after BatchNormalization folded into them)."""
    def wrap(fn):
        _FINALIZERS.setdefault(kind, []).append(fn)
        return fn
    return wrap


def finalizers(kind):
    """The finalizers registered for a step kind (none for None)."""
    return _FINALIZERS.get(kind, []) if kind is not None else []


def lookup(op_type, opset, domain=""):
    """The lowering for the largest `since` <= opset, or None."""
    versions = _RULES.get((_domain(domain), op_type), [])
    chosen = None
    for since, fn in versions:
        if opset is None or since <= opset:
            chosen = fn
    return chosen


def registered_ops():
    """Sorted (domain, op_type) pairs that have at least one lowering."""
    return sorted(_RULES)
