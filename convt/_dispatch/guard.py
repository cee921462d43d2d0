"""Checks a plan makes before it allocates: index range, memory, the ``out=`` array.

Attributes are arbitrary-precision Python integers until a geometry reaches NumPy and the
kernels, which index in 64 bits (docs/reliability.md). ``check_range``
(convt._geometry.limits, which the translator runs too) refuses geometries whose uncropped
frame could not be indexed there; ``check_memory`` refuses calls whose arrays would not fit
in the machine, before any of them (or a backend's plan) is allocated.
Both run once per input shape (the plan caches accepted geometries; one-shot plans share
theirs, keyed with the memory limit in force, convt._dispatch.plan._DECISIONS).
"""
from __future__ import annotations

import functools
import math
import os
from math import prod

import numpy as np

from .cost import direct_kind
from .._backends import BACKENDS
from .._geometry.dtypes import compute_dtype, dtype_name
from .._geometry.limits import MAX_FRAME, check_range
from .._geometry.validate import bad_type, fail
from .._kernels import _half

__all__ = ["MEMORY_LIMIT", "MAX_FRAME", "memory_limit", "estimate_bytes", "check_range",
           "check_memory", "check_out", "deliver"]

# Bytes a call may need; None: the machine's physical memory (os.sysconf), overridden by the
# environment variable CONVT_MEMORY_LIMIT (bytes). Tests set this constant.
MEMORY_LIMIT = None
def memory_limit():
    """The byte limit ``check_memory`` applies (see ``MEMORY_LIMIT``)."""
    if MEMORY_LIMIT is not None:
        return int(MEMORY_LIMIT)
    env = os.environ.get("CONVT_MEMORY_LIMIT", "").strip()
    if env:
        return _env_limit(env)
    return _physical_memory()


@functools.lru_cache(maxsize=1)
def _physical_memory():
    """The machine's physical memory in bytes, read once (not two sysconf calls in every
    one-shot call)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): no limit known
        return 2**63


@functools.lru_cache(maxsize=4)
def _env_limit(text):
    """CONVT_MEMORY_LIMIT's bytes: a positive number ("8e9", "8589934592"; "inf": no limit),
    else a ValueError naming the variable (every call reads it: "abc" gave float()'s bare
    "could not convert string to float", "inf" an OverflowError)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise ValueError("convt: the environment variable CONVT_MEMORY_LIMIT must be a positive "
                         f"number of bytes (e.g. 8e9, or inf for no limit); got {text!r}")
    return 2**63 if value == math.inf else int(value)


def _gib(n):
    return f"{n / 2**30:.3g} GiB"


def estimate_bytes(geom, method, dtype):
    """Bytes of the arrays one call holds at once (a lower bound: small tables and the
    weights, which the caller already holds, are left out)."""
    store, ct = np.dtype(dtype).itemsize, compute_dtype(dtype).itemsize
    n_out = geom.batch * geom.c_out * prod(geom.out_shape)
    # the result in the storage dtype, the backend's output in the compute dtype
    total = n_out * store + (n_out * ct if ct != store else 0)
    backend = BACKENDS[method]
    if method != "direct":
        return total + backend.workspace_bytes(geom, compute_dtype(dtype))
    # Only a few-channel layer may run a variant with other needs (and there direct_kind stays
    # cheap: it never builds a Winograd layout, whose task list grows with the output).
    kind = direct_kind(geom) if backend.may_differ(geom) else None
    return total + backend.workspace_bytes(geom, compute_dtype(dtype), kind, dtype)


def check_memory(conv, geom, method, dtype, input_name):
    """MemoryError (also a ValueError) when the call would need more than ``memory_limit``."""
    need, limit = estimate_bytes(geom, method, dtype), memory_limit()
    if need > limit:
        raise fail(conv, input_name, f"needs about {_gib(need)} for an output of shape "
                   f"{geom.array_shape('output')} ({np.dtype(dtype).name}, method "
                   f"{method!r}), more than the {_gib(limit)} memory limit (physical memory, "
                   "or CONVT_MEMORY_LIMIT)", geom.array_shape("input"), exc=MemoryLimitError)


class MemoryLimitError(MemoryError, ValueError):
    """A call refused by ``check_memory``: a MemoryError, and a ValueError like every other
    refused argument."""


def check_out(conv, out, shape, dtype, inputs):
    """TypeError / ValueError unless ``out`` can receive a result of ``shape`` and ``dtype``:
    a writeable C-contiguous ndarray sharing no memory with any of ``inputs`` (name: array)."""
    if not isinstance(out, np.ndarray):
        raise bad_type(conv, "out", "must be a numpy.ndarray", type(out).__name__)
    if dtype_name(out.dtype) != dtype_name(dtype):   # either byte order (deliver swaps)
        raise bad_type(conv, "out", f"must have the result's dtype {np.dtype(dtype).name}",
                       out.dtype.name)
    if out.shape != tuple(shape):
        raise fail(conv, "out", f"must have the result's shape {tuple(shape)}", out.shape)
    if not out.flags.c_contiguous:
        raise fail(conv, "out", "must be C-contiguous", f"strides {out.strides}")
    if not out.flags.writeable:
        raise fail(conv, "out", "must be writeable", "a read-only array")
    for name, a in inputs.items():
        if a is not None and np.may_share_memory(out, a):
            raise fail(conv, "out", f"must not share memory with the input {name!r}",
                       "an overlapping array")


def deliver(y, dtype, out, workers=1):
    """The result ``y`` (in the compute dtype) in ``dtype``: C-contiguous, or copied into
    ``out`` (already checked, of ``dtype``) and ``out`` returned. The one conversion either
    way (float32 to float16 or bfloat16: ``astype``'s rounding, to nearest even), from
    float32 in parallel blocks on ``workers`` threads (convt._kernels._half.narrow: F16C /
    AVX2, the bits astype gives)."""
    kind = _half.KINDS.get(dtype_name(dtype))
    if y.dtype == np.float64 and dtype_name(dtype) == "bfloat16":
        y = _bfloat16_once(y)   # (the reference: ml_dtypes' cast rounds through float32)
    if kind is not None and y.dtype == np.float32:
        y = np.ascontiguousarray(y)   # (the pixel kernel's channels-first view)
        if out is None:
            out = np.empty(y.shape, dtype)
        if out.dtype.isnative:
            _half.narrow(y.reshape(-1), out.reshape(-1).view(np.uint16), kind, workers)
            return out
    if out is None:
        return np.ascontiguousarray(y, dtype=dtype)
    np.copyto(out, y, casting="equiv" if y.dtype == dtype else "unsafe")
    return out


def _bfloat16_once(y):
    """float64 ``y`` as float32 values whose rounding to bfloat16 (to nearest even) is the
    one rounding of ``y``. ml_dtypes casts float64 through float32, rounding twice (1 + 2^-8
    + 2^-30 becomes the tie 1 + 2^-8, then 1). Here the float32 step rounds to odd (toward
    zero, the last bit set when inexact), which keeps what the second rounding needs: float32
    has more than two bits past bfloat16's 8 (Boldo and Melquiond, "When double rounding is
    odd", 2005)."""
    with np.errstate(over="ignore"):   # (past float32's range: Inf, stepped back below)
        t = y.astype(np.float32)
    away = np.abs(t.astype(np.float64)) > np.abs(y)   # (NaN compares False)
    t[away] = np.nextafter(t[away], np.float32(0))
    t.view(np.uint32)[...] |= (t.astype(np.float64) != y).view(np.uint8).astype(np.uint32)
    return t
