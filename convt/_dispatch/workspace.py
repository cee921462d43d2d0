"""Scratch buffers a prepared operator reuses from call to call.

A plan owns one ``Workspace``. A call borrows it for its duration; a call that finds it busy
(another Python thread is inside the same operator) gets fresh buffers instead, so concurrent
calls never share scratch and never wait for each other. What it holds is bounded by the
largest call seen: for the GEMM variant, the zero-haloed input copy plus one tile per thread
(see ``convt._backends.direct.gemm``).

One-shot calls (``convt.conv_transpose``) make a plan and pack their weights every time, so
each Python thread keeps one workspace for them (``one_shot_workspace``), emptied after any
call that leaves it holding more than ONE_SHOT_KEEP bytes. Fresh scratch costs page faults
and zeroing on every call: on hifigan_up3 (2 MB input, 2 MB output, Winograd variant) the
call itself took 3.5 ms one-shot against 2.0 ms prepared before the one-shot workspace.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from math import prod

import numpy as np

from .._kernels._trylock import TryLock
from .threads import renew_after_fork

__all__ = ["ONE_SHOT_KEEP", "Workspace", "one_shot_workspace"]

ONE_SHOT_KEEP = 64 << 20   # bytes a thread's one-shot workspace may keep between calls
_THREAD = threading.local()


class Workspace:
    def __init__(self, keep=None):
        """``keep``: empty the workspace after a call that leaves it holding more bytes than
        this (None: keep everything)."""
        self._lock = renew_after_fork(self)
        self._bufs = {}
        self._keep = keep

    @contextmanager
    def borrow(self):
        """An ``Arena`` over the kept buffers, or over fresh ones if they are in use."""
        # TryLock: released however the block is left, with no window after the acquire
        # where an exception from a signal handler would leave the workspace locked for good
        with TryLock(self._lock) as got:
            if not got:
                yield Arena({})
                return
            try:
                yield Arena(self._bufs)
            finally:
                if self._keep is not None and self.nbytes() > self._keep:
                    self._bufs.clear()

    def buffer(self, name, size, dtype):
        """Kept 1-D buffer ``name`` of ``size`` values, contents undefined, outside any call's
        arena: for what a one-shot plan makes before its call (the packed weights), on the
        thread that owns this workspace."""
        return Arena(self._bufs).get(name, (size,), dtype)

    def nbytes(self):
        """Bytes held between calls."""
        return sum(buf.nbytes for buf, _ in self._bufs.values())


def one_shot_workspace(name="workspace"):
    """The calling thread's workspace ``name`` for one-shot calls (created on first use):
    "workspace" for the backends' scratch, "stage" for a 16-bit call's float32 result."""
    ws = getattr(_THREAD, name, None)
    if ws is None:
        ws = Workspace(keep=ONE_SHOT_KEEP)
        setattr(_THREAD, name, ws)
    return ws


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
