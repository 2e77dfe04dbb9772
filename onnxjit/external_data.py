"""Tensors whose data lives in external files: read from inside the model's folder, or refused.

A model loaded from a path may keep large tensors in files beside it (ONNX "external data"). The
location each tensor names comes from the model, so it is checked before anything is opened: a
relative path that stays inside the model's folder once every `..` and symbolic link is resolved.
Absolute paths, `../` escapes and symbolic links that point outside are refused with a ModelError;
onnx's own reader (onnx>=1.21, which fixed the path-traversal, symlink and hardlink CVEs of
earlier releases) then opens the file with its checks. A model given as bytes or a ModelProto has
no folder: its external tensors are refused, never read relative to the working directory.
"""
from __future__ import annotations

import os

from onnx import TensorProto

from .errors import ModelError


def uses_external_data(tensor):
    return tensor.HasField("data_location") and tensor.data_location == TensorProto.EXTERNAL


def external_tensors(model):
    """Every tensor of `model` that keeps its data in an external file: initializers (sparse
    ones too) and tensor attributes, subgraphs included."""
    def graph_tensors(graph):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("sparse_tensor"):
                    yield attr.sparse_tensor.values
                    yield attr.sparse_tensor.indices
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    yield from graph_tensors(sub)
    if model.HasField("graph"):
        yield from (t for t in graph_tensors(model.graph) if uses_external_data(t))
    for function in model.functions:
        for node in function.node:
            for attr in node.attribute:
                if attr.HasField("t") and uses_external_data(attr.t):
                    yield attr.t


def location(tensor):
    """The file name a tensor's external data names ('' when it names none)."""
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def checked_path(tensor, base_dir):
    """The real path of `tensor`'s external data file, inside `base_dir`; ModelError otherwise."""
    where = location(tensor)
    what = f"external data of tensor {tensor.name!r}"
    if not where:
        raise ModelError(f"{what}: no location given")
    if "\0" in where:
        raise ModelError(f"{what}: location {where!r} contains a NUL character")
    if os.path.isabs(where) or os.path.splitdrive(where)[0] or where.startswith(("/", "\\")):
        raise ModelError(f"{what}: location {where!r} is an absolute path; external data must "
                         f"be named relative to the model's folder")
    base = os.path.realpath(base_dir)
    target = os.path.realpath(os.path.join(base, where))
    if os.path.commonpath([base, target]) != base:
        raise ModelError(f"{what}: location {where!r} leads outside the model's folder "
                         f"{base_dir!r} (to {target!r}); refusing to read it")
    if not os.path.isfile(target):
        raise ModelError(f"{what}: no file {where!r} in the model's folder {base_dir!r}")
    return target


def load_external_data(model, base_dir):
    """Read every external tensor of `model` (in place) from files inside `base_dir`."""
    from onnx.external_data_helper import load_external_data_for_tensor
    for tensor in list(external_tensors(model)):
        checked_path(tensor, base_dir)
        where = location(tensor)
        try:
            load_external_data_for_tensor(tensor, base_dir)
        except Exception as exc:    # onnx's own checks (symlinks, hardlinks, offset, length)
            raise ModelError(f"external data of tensor {tensor.name!r} ({where!r}) cannot be "
                             f"read: {exc}") from None


def refuse_external_data(model):
    """ModelError when a model given without a folder (bytes, a ModelProto) has external tensors."""
    tensor = next(external_tensors(model), None)
    if tensor is not None:
        raise ModelError(
            f"tensor {tensor.name!r} keeps its data in an external file ({location(tensor)!r}), "
            f"but the model was given as bytes or a ModelProto, which have no folder to read it "
            f"from: pass the model's path (its external data is read from the model's folder), "
            f"or load it with onnx.load(path)")

