"""Tooling around the library: the command line (cli), the benchmark against ONNX Runtime (bench,
cuda_bench), the backend-suite conformance report (conformance), `onnxjit show` (show) and the
built-in benchmark models (models).

The library (backend, pipeline, specialize, plan, emit, compile, ops, kernels, session*, cuda,
explain) never imports this package; tests/test_layout.py checks it. The old paths
(onnxjit.__main__, onnxjit.bench, onnxjit.conformance, onnxjit.models) are shims onto these modules.
"""
