"""16-bit storage at the direct variants' input: float16 and bfloat16 widened to float32 in
one parallel pass (convt._kernels._half: F16C / AVX2), or in the layout change itself
(``padded_nxc``: the transpose to channels-last widens as it reads), never as a NumPy cast
and then a second pass. NumPy's float16 -> float32 cast ran at about 1 GB/s, one thread
(docs/performance.md); the widening kernels give the same bits (tests/test_half.py).
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..._kernels import _half
from ..._kernels._layout import to_padded_nxc, to_padded_nxc16

__all__ = ["ALIGN", "STREAM16_BYTES", "aligned_empty", "half_kind", "as_compute",
           "new_output16", "padded_nxc", "streams16", "widen_into"]

# The cache line the kernels' streamed stores need an output to start on (a whole aligned
# vector per store): the C write-out tests the same 64 (_writeout.h's ``& 63``,
# _dwkernel.h's ``% 64``) and stores plainly into an output off it.
ALIGN = 64


def aligned_empty(shape, dtype, align=ALIGN):
    """A new C-contiguous array whose first value is ``align``-byte aligned (a view of a few
    bytes more; np.empty gives 16): streamed stores need whole aligned vectors."""
    n = prod(shape) * np.dtype(dtype).itemsize
    raw = np.empty(n + align, np.uint8)
    at = -raw.__array_interface__["data"][0] % align   # (ctypes.data: 2x the time)
    # one constructor, not a slice, a view and a reshape: each numpy call is cold code in a
    # call after a cache eviction
    return np.ndarray(shape, dtype, raw, at)


# A 16-bit y of at least this many bytes, on a cache line, has the whole lines the micro
# tiles' write-out fills (float32 tiles into float16 or bfloat16, and the bfloat16 tiles)
# streamed past the caches (no read for ownership); smaller outputs keep plain stores,
# staying in cache for their reader (docs/performance.md, "bfloat16 tiles: streamed
# write-out, pointer tables by lines").
STREAM16_BYTES = 1 << 20


def streams16(y):
    """Whether the write-out may stream ``y``'s whole lines: a 16-bit ``y`` of at least
    ``STREAM16_BYTES`` starting on a cache line (``aligned_empty``)."""
    return (y.itemsize == 2 and y.nbytes >= STREAM16_BYTES
            and y.__array_interface__["data"][0] % ALIGN == 0)


def new_output16(shape, dtype):
    """A new 16-bit result of ``shape``: on a cache line (``aligned_empty``) where it is
    large enough for the write-out to stream it (``streams16``), else ``np.empty`` (an
    array that owns its data)."""
    if prod(shape) * np.dtype(dtype).itemsize >= STREAM16_BYTES:
        return aligned_empty(shape, dtype)
    return np.empty(shape, dtype)


def half_kind(dt):
    """0 for float16, 1 for bfloat16 (the 16-bit storage types the kernels convert, in native
    byte order), else None (NumPy converts those)."""
    if dt.itemsize != 2 or not dt.isnative:
        return None
    return _half.KINDS.get(dt.name)


def widen_into(a, dst, workers):
    """``dst`` (float32, C-contiguous, ``a``'s size) holding ``a`` (16-bit) widened."""
    src = np.ascontiguousarray(a).reshape(-1).view(np.uint16)
    _half.widen(src, dst.reshape(-1), half_kind(a.dtype), max(1, workers))
    return dst


def as_compute(xa, ct, workers, arena=None, name="x_widened"):
    """``xa`` C-contiguous in the compute dtype ``ct``: itself when it already is; 16-bit
    data widened into float32 in one parallel pass (into the arena's buffer ``name`` when an
    arena is given, else a new array)."""
    if half_kind(xa.dtype) is None or ct != np.float32:
        return np.ascontiguousarray(xa, dtype=ct)
    dst = (np.empty(xa.shape, np.float32) if arena is None
           else arena.get(name, xa.shape, np.float32))
    return widen_into(xa, dst, workers)


def padded_nxc(x5, xp, halo, workers, isa=-1, spare_bits=-1):
    """``to_padded_nxc(x5, xp, ...)`` with ``x5`` (N, C, I0, I1, I2) in the storage dtype:
    16-bit data widened to ``xp``'s float32 by the transpose itself (one pass)."""
    kind = half_kind(x5.dtype) if xp.dtype == np.float32 else None
    halo = np.asarray(halo, np.int64)
    if kind is None:
        return to_padded_nxc(np.ascontiguousarray(x5, dtype=xp.dtype), xp, halo, workers, isa,
                             spare_bits)
    src = np.ascontiguousarray(x5).view(np.uint16)
    return to_padded_nxc16(src, xp, halo, workers, isa, spare_bits, kind)
