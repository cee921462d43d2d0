"""TryLock: a lock acquired without blocking by a ``with`` statement whose ``__exit__`` is sure
to run once the acquire succeeded, even under exceptions from signal handlers.

``with TryLock(lock) as got:`` runs the body with ``got`` True when it took ``lock`` (then
released on leaving the block, however it is left) and False when another holder had it.
The acquire happens in compiled ``__enter__``: CPython (3.10 on) runs pending signal handlers
after calls and on backward jumps but not between ``__enter__`` and the protected block, so
no handler's exception (Ctrl-C's KeyboardInterrupt, an alarm) can land between the acquire
and the block. In Python, ``got = lock.acquire(blocking=False)`` followed by ``try:`` has
such a window: the handler runs as the acquire's call returns, and the lock stays held for
good (tests/test_interrupts.py caught a workspace locked that way in about 1 run of 10).
"""


cdef class TryLock:
    cdef object _lock
    cdef bint _got

    def __cinit__(self, lock):
        self._lock = lock
        self._got = False

    def __enter__(self):
        self._got = self._lock.acquire(False)
        return self._got

    def __exit__(self, *exc):
        if self._got:
            self._got = False
            self._lock.release()
        return False
