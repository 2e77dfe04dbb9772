"""Calls the Python driver makes itself, so that no per-model njit segment has to hold them.

- library calls (`steps.LibraryCall` whose arguments are variables and numbers,
  `driver_callable`): the kernel's machine code comes from the kernels' own cache, compiled
  once per install.
- data movement (`steps.Movement`: Concat, Reshape, Flatten, Split, block shuffles in numpy or
  onnxjit's copy kernels) becomes a shared kernel generic over its numbers (the sizes and axes
  are arguments), compiled once per machine for every model (fused.shared_kernel).

From Python, numbers arrive as int64 / float64 (tuples as UniTuple), so one specialization of the
callee serves every call; compiled code would specialize it on each literal value.
"""
from __future__ import annotations

from .source import template


def movement_function(params, body):
    """A function source taking `params` and returning `body` (steps.Movement.kernel), named by
    its caller."""
    return lambda name: template("movement_kernel.py.tmpl").substitute(
        name=name, params=", ".join(params), expr=body)
