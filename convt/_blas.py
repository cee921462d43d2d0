"""The thread count of the BLAS behind ``scipy.linalg.cython_blas``.

The GEMM variant of the direct backend runs its threads inside BLAS, so ``workers`` must reach
the BLAS library. SciPy's wheels bundle OpenBLAS as libscipy_openblas (symbols prefixed
``scipy_openblas_``); a SciPy linked against a system OpenBLAS exports ``openblas_*``. Any other
BLAS: the count cannot be set here and BLAS keeps its own default (results are unaffected:
a GEMM never splits its summed dimension across threads).
"""
from __future__ import annotations

import ctypes
import re
import threading
from contextlib import contextmanager

__all__ = ["blas_threads", "blas_info"]

_LOCK = threading.Lock()
_STATE = {}


def _functions():
    if "fns" in _STATE:
        return _STATE["fns"]
    import scipy.linalg.cython_blas  # noqa: F401  (loads the library we want to find)

    fns = None
    try:  # the shared objects loaded in this process (Linux); elsewhere nothing is found
        with open("/proc/self/maps") as maps:
            text = maps.read()
    except OSError:
        text = ""
    paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", text)))
    # scipy's own copy first: it is the one cython_blas links (numpy bundles a second one).
    paths.sort(key=lambda p: "scipy.libs" not in p and "scipy" not in p.rsplit("/", 1)[-1])
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            get = getattr(lib, prefix + "get_num_threads", None)
            put = getattr(lib, prefix + "set_num_threads", None)
            if get is not None and put is not None:
                put.argtypes, get.restype = [ctypes.c_int], ctypes.c_int
                fns = (get, put, path)
                break
        if fns:
            break
    _STATE["fns"] = fns
    return fns


def blas_info():
    """(library path or None, current thread count or None)."""
    fns = _functions()
    return (fns[2], fns[0]()) if fns else (None, None)


@contextmanager
def blas_threads(n):
    """Run the block with BLAS using ``n`` threads (no-op when the count cannot be set)."""
    fns = _functions()
    if fns is None:
        yield
        return
    get, put, _ = fns
    with _LOCK:
        old = get()
        if old != n:
            put(n)
    try:
        yield
    finally:
        if old != n:
            with _LOCK:
                put(old)
