"""Scratch buffers a prepared operator reuses from call to call.

A plan owns one ``Workspace``. A call borrows it for its duration; a call that finds it busy
(another Python thread is inside the same operator) gets fresh buffers instead, so concurrent
calls never share scratch and never wait for each other. What it holds is bounded by the
largest call seen: for the GEMM variant, the zero-haloed input copy plus one tile per thread
(see ``convt._phase_gemm``).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from math import prod

import numpy as np

__all__ = ["Workspace"]


class Workspace:
    def __init__(self):
        self._lock = threading.Lock()
        self._bufs = {}

    @contextmanager
    def borrow(self):
        """An ``Arena`` over the kept buffers, or over fresh ones if they are in use."""
        if self._lock.acquire(blocking=False):
            try:
                yield Arena(self._bufs)
            finally:
                self._lock.release()
        else:
            yield Arena({})

    def nbytes(self):
        """Bytes held between calls."""
        return sum(buf.nbytes for buf, _ in self._bufs.values())


class Arena:
    def __init__(self, bufs):
        self._bufs = bufs

    def get(self, name, shape, dtype, zero_key=None):
        """A C-contiguous array of ``shape`` and ``dtype``, contents undefined, except: with a
        ``zero_key`` it is zeroed when the buffer last served a different key or shape (a
        caller that only ever rewrites the same region of the same shape keeps the rest zero
        from call to call). The shape is part of the test: a smaller view zeroes only its own
        elements, so a later larger view under the same key would find the earlier call's
        data beyond them (a prepared operator called on a large, a small, then a larger batch
        of the small input returned wrong values before the shape was checked)."""
        dtype = np.dtype(dtype)
        size = prod(shape)
        buf, key = self._bufs.get(name, (None, None))
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf, key = np.empty(max(size, 1), dtype), None
        view = buf[:size].reshape(shape)
        key_now = None if zero_key is None else (zero_key, tuple(shape))
        if key_now is not None and key != key_now:
            view.fill(0)
        self._bufs[name] = (buf, key_now)
        return view
