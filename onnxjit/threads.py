"""Numba's threading layer: TBB where its library can be loaded, else Numba's default (OpenMP).

Library kernels split their work into one chunk per thread (``prange(nt)``).  Under OpenMP each
chunk belongs to one thread and the caller spins at the join until every thread is done, so
when another process holds a core the whole call waits for the descheduled thread: measured
here with one other busy process on the 2-core VM, a 2-thread ResNet-50 took 190-1170 ms
instead of 45.  TBB schedules the chunks as tasks: the caller runs a chunk the sleeping worker
has not taken, so a busy machine costs at most the one-thread time (84 ms).

pip's ``tbb`` wheel puts libtbb in ``<prefix>/lib``, which Numba's TBB extension does not
search; loading it first (globally) lets Numba pick TBB, which it prefers when available.
"""
from __future__ import annotations

import ctypes
import os
from importlib import metadata

_TBB_NAMES = ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll")


def preload_tbb():
    """Load the pip-installed libtbb so Numba can use its TBB threading layer; returns its path,
    or None when the tbb package is not installed (Numba then uses OpenMP)."""
    try:
        files = metadata.files("tbb") or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name in _TBB_NAMES:
            path = str(f.locate())
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=getattr(os, "RTLD_GLOBAL", 0))
                except OSError:
                    return None
                return path
    return None


def threading_layer():
    """The layer Numba runs parallel kernels on ("tbb", "omp" or "workqueue")."""
    import numba
    try:
        return numba.threading_layer()
    except ValueError:          # no parallel kernel has run yet
        from numba.np.ufunc.parallel import _launch_threads
        _launch_threads()       # onnxjit/__init__ has loaded libtbb already
        return numba.threading_layer()
