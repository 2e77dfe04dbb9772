"""Random inputs for a model: the one helper the CLI (`onnxjit demo`, `onnxjit show`), the
benchmark, explain's profiling run and the tests share.

Shapes are the declared ones, a symbolic dimension takes its value from `dims` (else 1); floats
are standard normal, booleans fair coins, integers uniform in [0, 10). One seeded generator draws
the inputs in declaration order, so a seed gives the same arrays everywhere.
"""
from __future__ import annotations

import numpy as np


def random_feeds(specs, dims=None, seed=0):
    """{name: random array} for input specs (onnxjit.ir.InputSpec: name, dims, dtype)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in specs:
        shape = [d if isinstance(d, int) else (dims or {}).get(d, 1) for d in (spec.dims or ())]
        dtype = spec.dtype or np.dtype(np.float32)
        if dtype.kind == "f":
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            value = rng.random(shape) < 0.5
        else:
            value = rng.integers(0, 10, shape).astype(dtype)
        feeds[spec.name] = np.asarray(value)     # a 0-d array, not a numpy scalar, for shape []
    return feeds


def model_inputs(model, dims=None, seed=0):
    """{name: random array} for a ModelProto's graph inputs (those without an initializer)."""
    from .ir import input_specs
    return random_feeds(input_specs(model.graph, {t.name for t in model.graph.initializer}), dims, seed)


def random_inputs(rep, dims=None, seed=0):
    """[random array] in the order of a prepared rep's inputs (rep.inputs), ready for rep.run."""
    return list(random_feeds(rep.inputs, dims, seed).values())


def parse_dims(items):
    """['N=4', 'seq=128'] -> {'N': 4, 'seq': 128} (the CLI's repeatable --dim NAME=VALUE)."""
    dims = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit():
            raise ValueError(f"--dim expects NAME=VALUE with an integer value, got {item!r}")
        dims[name.strip()] = int(value)
    return dims
