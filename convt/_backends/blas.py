"""The thread count of the BLAS behind ``scipy.linalg.cython_blas``.

The GEMM variant of the direct backend runs its threads inside BLAS, so ``workers`` must reach
the BLAS library. SciPy's wheels bundle OpenBLAS as libscipy_openblas (symbols prefixed
``scipy_openblas_``); a SciPy linked against a system OpenBLAS exports ``openblas_*``. Any other
BLAS: the count cannot be set here and BLAS keeps its own default (results are unaffected:
a GEMM never splits its summed dimension across threads). The FFT backend's per-bin GEMMs run
in ``np.matmul``, on NumPy's own OpenBLAS: ``blas_threads(n, "numpy")`` sets that one.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import re
import threading
from contextlib import contextmanager

__all__ = ["blas_threads", "blas_info"]

_LOCK = threading.Lock()
_STATE = {}
_ACTIVE = {}   # library -> [calls inside blas_threads, the count to restore after the last]


# (get, set) symbol names per library: SciPy's LP64 copy or a system OpenBLAS, and NumPy's
# ILP64 copy (libscipy_openblas64_, symbols suffixed "64_"), which ``np.matmul`` calls.
_SYMBOLS = {
    "scipy": [(p + "get_num_threads", p + "set_num_threads")
              for p in ("scipy_openblas_", "openblas_")],
    "numpy": [("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
              ("openblas_get_num_threads64_", "openblas_set_num_threads64_")],
}


def _after_fork_in_child():
    # The calls inside blas_threads belonged to threads the child does not have: their lock
    # may be held forever and their count never restored. The child starts over.
    global _LOCK
    _LOCK = threading.Lock()
    for library, active in _ACTIVE.items():
        if active[0]:
            active[0] = 0
            fns = _STATE.get(library)
            if fns and fns[0]() != active[1]:
                fns[1](active[1])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _functions(library="scipy"):
    if library in _STATE:
        return _STATE[library]
    importlib.import_module("scipy.linalg.cython_blas")  # loads the library we want to find

    fns = None
    try:  # the shared objects loaded in this process (Linux); elsewhere nothing is found
        with open("/proc/self/maps") as maps:
            text = maps.read()
    except OSError:
        text = ""
    paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", text)))
    # the library's own copy first (numpy and scipy each bundle one).
    paths.sort(key=lambda p: f"{library}.libs" not in p
               and library not in p.rsplit("/", 1)[-1])
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, put_name in _SYMBOLS[library]:
            get, put = getattr(lib, get_name, None), getattr(lib, put_name, None)
            if get is not None and put is not None:
                put.argtypes, get.restype = [ctypes.c_int], ctypes.c_int
                fns = (get, put, path)
                break
        if fns:
            break
    _STATE[library] = fns
    return fns


def blas_info():
    """(library path or None, current thread count or None)."""
    fns = _functions()
    return (fns[2], fns[0]()) if fns else (None, None)


@contextmanager
def blas_threads(n, library="scipy"):
    """Run the block with BLAS using ``n`` threads (no-op when the count cannot be set).

    ``library``: "scipy", the BLAS behind ``scipy.linalg.cython_blas``, or "numpy", the one
    ``np.matmul`` calls (NumPy's wheels bundle their own ILP64 OpenBLAS).
    """
    fns = _functions(library)
    if fns is None:
        yield
        return
    get, put, _ = fns
    # Concurrent calls (Python threads) share the one process-wide count: the first to enter
    # saves it, the last to leave restores it. Restoring on every exit would hand the calls
    # still running a multi-threaded BLAS inside their OpenMP threads.
    with _LOCK:
        active = _ACTIVE.setdefault(library, [0, None])
        if active[0] == 0:
            active[1] = get()
        active[0] += 1
        if get() != n:
            put(n)
    try:
        yield
    finally:
        with _LOCK:
            active[0] -= 1
            if active[0] == 0 and get() != active[1]:
                put(active[1])
