"""The life of convt's OpenMP threads inside someone else's process: forks and idle time.

**Fork.** libgomp keeps one thread team per thread that started a parallel region. A child
forked from a process with a team inherits the team's bookkeeping but not its threads, and its
first parallel region waits for them forever (the hang of multiprocessing's "fork" pools and of
PyTorch's DataLoader workers). convt therefore:

- releases the forking thread's team just before ``os.fork`` (``os.register_at_fork``; OpenMP
  5.0's ``omp_pause_resource_all``), so the child starts with no team and builds a fresh one:
  a child forked from the thread that ran convt runs on every core;
- marks the child single-threaded when a team could not be released: one started by another
  thread (possibly inside a kernel at that very moment), or a runtime without the pause call.
  Every kernel of such a process, and of its own children, then runs on one thread, which is
  safe; ``show_config()`` says so and the first call warns once.

Only ``os.fork`` from Python runs these hooks (``multiprocessing``, ``concurrent.futures``,
Dask's process pools with the fork context); a C-level ``fork`` without ``exec`` does not.

A fork also copies every lock as it is: one that another thread held at that moment stays
held in the child, whose next convt call would wait for it forever. convt's locks are
registered with ``renew_after_fork``, so a child finds them released (whatever they guarded was
being built by a thread the child does not have; the child builds it again).

**Idle time.** See ``quiet`` below and docs/threads.md.
"""
from __future__ import annotations

import os
import threading
import warnings
import weakref

__all__ = ["workers", "state", "release", "renew_after_fork"]

_lock = threading.Lock()
_teams = set()         # idents of the threads that handed kernels more than one thread
_single = None         # why this process runs single-threaded, or None
_warned = False


_RENEW = weakref.WeakKeyDictionary()   # holder -> {attribute: factory}, renewed in a child


def renew_after_fork(holder, name="_lock", factory=threading.Lock):
    """``factory()`` now, and a fresh one as ``holder.<name>`` in every forked child.

    For convt's locks (a module or an object holding one): a child finds them released. A plain
    ``threading.Lock`` is used as it is, so ``with lock:`` stays atomic against exceptions from
    signal handlers (a Python-level wrapper's ``__enter__`` could be interrupted after the
    acquire and leave the lock held; tests/test_interrupts.py).
    """
    _RENEW.setdefault(holder, {})[name] = factory
    return factory()


def _release_threads():
    try:
        from .._kernels._openmp_helpers import release_threads
    except ImportError:  # an unbuilt tree: no kernels, no team
        return True
    return release_threads()


def release():
    """End the calling thread's team now (its idle threads exit); True if it is gone."""
    ident = threading.get_ident()
    if _release_threads():
        with _lock:
            _teams.discard(ident)
        return True
    return False


def _before_fork():
    # Runs in the forking thread, with the GIL: no convt call of this thread is in a kernel.
    if threading.get_ident() in _teams:
        release()
    # A thread that ended took its team with it (libgomp frees it at thread exit). Only here,
    # in the parent, can threading still say which threads are alive.
    alive = {t.ident for t in threading.enumerate()}
    with _lock:
        _teams.intersection_update(alive)


def _after_fork_in_child():
    global _single, _warned, _lock
    _lock = threading.Lock()   # a lock another thread held at the fork stays held forever
    for holder, names in list(_RENEW.items()):   # the child has one thread: nothing else runs
        for name, factory in names.items():
            setattr(holder, name, factory())
    if _teams and _single is None:
        _single = (f"forked (parent pid {os.getppid()}) while convt's OpenMP threads were "
                   "alive in the parent")
        _warned = False
    _teams.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def workers(n):
    """The thread count kernels may use where ``n`` was asked for (1 in a process that
    inherited a team it cannot use); records that the calling thread starts a team."""
    global _warned
    if _single is not None:
        if n > 1 and not _warned:
            _warned = True
            warnings.warn(f"convt: this process was {_single}, so its kernels run on one "
                          "thread (docs/threads.md); the 'spawn' or 'forkserver' start method, "
                          "or a fork from the thread that called convt, keeps them parallel",
                          RuntimeWarning, stacklevel=3)
        return 1
    if n > 1:
        ident = threading.get_ident()
        if ident not in _teams:
            threading.current_thread()   # registers a foreign thread with threading
            with _lock:
                _teams.add(ident)
    return n


def state():
    """``(single_threaded_reason or None, number of threads holding a team)`` for show_config."""
    return _single, len(_teams)
