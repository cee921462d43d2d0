"""dtype policy: which types each convention accepts and which type the kernels compute in.

float64 computes in float64; float32, float16 and bfloat16 compute (accumulate) in float32 and
16-bit results are rounded once at the end. bfloat16 is ``ml_dtypes.bfloat16`` (optional): it is
recognised by name so that ml_dtypes is imported only by users who already have such arrays.
"""
from __future__ import annotations

import numpy as np

from .validate import bad_type, fail

__all__ = ["ALL_FLOATS", "as_array", "common_dtype", "compute_dtype", "dtype_name"]

ALL_FLOATS = ("float64", "float32", "float16", "bfloat16")


# dtype -> name: numpy computes ``dtype.name`` in Python, each time (docs/performance.md,
# "Figures moved out of code comments"); a one-shot call asks for it several times (seven on
# a 2-D call).
_NAMES = {}


def dtype_name(dt):
    dt = dt if isinstance(dt, np.dtype) else np.dtype(dt)
    name = _NAMES.get(dt)
    if name is None:
        name = _NAMES[dt] = dt.name
    return name


def compute_dtype(dt):
    """Accumulation type of the kernels for storage type ``dt``."""
    return np.dtype(np.float64) if dtype_name(dt) == "float64" else np.dtype(np.float32)


def cast_hint(castable, what="them"):
    """How a caller gets one dtype: ``dtype=`` where the API takes it, else a cast."""
    return "(pass dtype=... to cast)" if castable else f"(cast {what} before the call)"


def _requested_dtype(conv, dtype, allowed):
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype == "bfloat16":
        import ml_dtypes  # optional dependency; only when asked for by name

        dtype = ml_dtypes.bfloat16
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise bad_type(conv, "dtype", f"must be one of {allowed}", dtype) from None
    if dt.name not in allowed:
        raise bad_type(conv, "dtype", f"must be one of {allowed}", dt.name)
    return dt


def as_array(conv, param, a, allowed):
    """``np.asarray(a)`` with a TypeError unless its dtype is one of ``allowed`` (names)."""
    if a is None:
        raise bad_type(conv, param, "must be an array, not None", a)
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError):   # e.g. a ragged nested list
        raise fail(conv, param, "must be an array (or a nested sequence of one shape)",
                   a) from None
    if dtype_name(arr.dtype) not in allowed:
        raise bad_type(conv, param, f"must have a floating dtype in {allowed}", arr.dtype.name)
    return arr


def common_dtype(conv, arrays, allowed, dtype=None, castable=False):
    """The one storage dtype of the call's tensors.

    ``arrays`` maps parameter names to arrays (None entries are skipped), the weights first.
    Mixed dtypes are a TypeError unless ``dtype`` is given, in which case everything is cast
    to it (nothing is ever narrowed silently: the cast is the user's explicit request); the
    message names the first parameter whose dtype differs from the first one's, and both
    dtypes. ``castable``: the caller takes ``dtype`` (the canonical API), which the message
    then suggests.
    """
    want = _requested_dtype(conv, dtype, allowed)
    present = {k: v for k, v in arrays.items() if v is not None}
    if want is not None:
        return want
    names = {k: dtype_name(v.dtype) for k, v in present.items()}
    first, want = next(iter(names.items()))
    for name, got in names.items():
        if got != want:
            raise fail(conv, name, f"must have the dtype of {first!r}, {want} "
                       + cast_hint(castable, "it"), got, exc=TypeError)
    return next(iter(present.values())).dtype
