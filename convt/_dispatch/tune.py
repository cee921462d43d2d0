"""Auto-tuning (``method="tune"``): measured winners per shape signature, kept as plain data.

The first call of a signature times the candidate backends (warm-up, interleaved rounds,
best-of) and records the winner; later calls with the same signature reuse it with no timing.
A signature is the storage dtype, layout, channels, groups, kernel, strides, dilations, pads,
threads, the ISA level, the CPU model and the convt version, with the batch and the spatial
lengths rounded up to a bucket (1, 2, 3, 4, 6, 8, 12, ...: at most 1.5x apart), so a new
audio length or image size in the same bucket does not tune again. The storage dtype and the
ISA level (``CONVT_ISA`` caps it on one CPU) decide the kernels that run: float16 and
bfloat16 compute in float32, but bfloat16 runs its own tiles (micro_bf16, micro_amx) and
16-bit data is converted in the kernels, so a float32 winner says nothing about them.

Winners live in memory (a lock-protected dict). The on-disk store is opt-in:
``use_tuning_store()`` or the environment variable ``CONVT_TUNING_DIR`` turns it on;
every new winner is then merged into ``tuning.json`` there (read-merge-write under a file
lock, written to a temporary file and renamed, so readers never see half a file and two
writing processes keep both entries), and the file is read when the store is turned on.
A corrupt file, or one from another convt version or CPU, is ignored with a warning; so is
one of format 1 (before the storage dtype and the ISA level were part of the signature:
its float32 entries may have been measured on float16 or bfloat16 data).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

from .._kernels import _cpu
from .threads import renew_after_fork

__all__ = ["signature", "bucket", "lookup", "tune", "time_candidates", "export_tuning",
           "import_tuning", "forget_tuning", "use_tuning_store", "cache_dir", "stamp",
           "atomic_write_json"]

_FORMAT = 2   # 2: signatures name the storage dtype and the ISA level
_FILE = "tuning.json"
_BACKENDS = ("direct", "fft")   # what a tuning entry may name (winner and timed backends)
_lock = renew_after_fork(sys.modules[__name__])
_entries = {}       # signature -> {"method": str, "seconds": {method: float}}
_tuning = renew_after_fork(sys.modules[__name__], "_tuning", dict)  # signature -> Lock held while it is being tuned (one tuning per signature)
_store = {"dir": None, "env_checked": False}

# Timing of candidates: a warm-up call each, then up to _ROUNDS interleaved rounds (one timed
# call of each candidate per round, so load from other processes hits all alike, each right
# after an untimed call of itself: timed straight after another backend's call, a small call
# runs up to several times its repeated time; docs/dispatch.md, "The GEMM variant as BLAS runs
# it"), best-of; rounds stop early once _BUDGET_S has passed and _MIN_ROUNDS are done.
_ROUNDS = 15
_MIN_ROUNDS = 3
_BUDGET_S = 1.0
# A close call (the two best within _CLOSE of each other) gets more passes of as many rounds,
# up to _CLOSE_PASSES in all and _CLOSE_BUDGET_S of extra time, while the two stay within
# _CLOSE of each other and further apart than _TIE: one measurement of each may rank such a
# pair the other way from the next, and tune's misses on the random sweeps are mostly such
# pairs (docs/dispatch.md, "The random sweep" and "FFT and depthwise estimates, tune's close
# calls"); within _TIE either pick is as good.
_CLOSE = 1.25
_CLOSE_PASSES = 4
_CLOSE_BUDGET_S = 2.0
_TIE = 1.02
clock = time.perf_counter


@functools.lru_cache(maxsize=1)
def cpu_model():
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def stamp():
    """What a stored tuning or calibration is valid for: this convt version and CPU."""
    from .._version import __version__

    return {"convt": __version__, "cpu": cpu_model()}


def bucket(n):
    """``n`` rounded up to 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5x them)."""
    if n <= 2:
        return n
    p = 1 << (n - 1).bit_length()
    return p * 3 // 4 if p * 3 // 4 >= n else p


def signature(geom, dtype, workers):
    """The tuning key of one call on data of ``dtype`` (the storage dtype, str): see the
    module notes for what it holds."""
    s = stamp()
    spatial = "x".join(str(bucket(i)) for i in geom.in_shape)
    isa = f"isa{_cpu.ISA}" + ("+bf16" if _cpu.bf16() else "")
    return "|".join([
        np.dtype(dtype).name, geom.data_format, f"n{bucket(geom.batch)}",
        f"c{geom.c_in}>{geom.c_out}g{geom.groups}", f"i{spatial}",
        "k" + "x".join(map(str, geom.kernel)), "s" + "x".join(map(str, geom.strides)),
        "d" + "x".join(map(str, geom.dilations)), "pb" + "x".join(map(str, geom.pads_begin)),
        "pe" + "x".join(map(str, geom.pads_end)), f"t{workers}", isa, s["cpu"], s["convt"]])


def time_candidates(runs, clock_fn=None):
    """Best-of seconds of each callable in ``runs`` ({name: run}), interleaved rounds after
    one warm-up call each, each timed call right after an untimed one of the same callable
    (see ``_ROUNDS``), more passes of rounds while the two best are close (``_CLOSE``)."""
    clock_fn = clock_fn or clock
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, float("inf"))
    _timed_pass(runs, best, clock_fn)
    extra = clock_fn()
    for _ in range(_CLOSE_PASSES - 1):
        if not _close(best) or clock_fn() - extra > _CLOSE_BUDGET_S:
            break
        _timed_pass(runs, best, clock_fn)
    return best


def _timed_pass(runs, best, clock_fn):
    """Up to ``_ROUNDS`` interleaved rounds (``_MIN_ROUNDS`` at least, then until
    ``_BUDGET_S`` has passed), each candidate's best time kept in ``best``."""
    start = clock_fn()
    for r in range(_ROUNDS):
        for name, run in runs.items():
            run()   # timed after a run of itself, not straight after another's
            t = clock_fn()
            run()
            best[name] = min(best[name], clock_fn() - t)
        if r + 1 >= _MIN_ROUNDS and clock_fn() - start > _BUDGET_S:
            break


def _close(best):
    """True when the two best times are within ``_CLOSE`` of each other but not a tie
    (``_TIE``): another pass may change the ranking, and the ranking matters."""
    ranked = sorted(best.values())
    return len(ranked) >= 2 and _TIE * ranked[0] < ranked[1] <= _CLOSE * ranked[0]


def lookup(key):
    """The recorded entry of ``key`` ({"method", "seconds"}) or None."""
    _check_env()
    return _entries.get(key)


def tune(key, measure):
    """The entry of ``key``; if there is none, ``measure()`` -> {name: seconds} decides it.

    Concurrent callers with one key wait for the first one's measurement (one tuning)."""
    hit = lookup(key)
    if hit is not None:
        return hit
    with _lock:
        gate = _tuning.setdefault(key, threading.Lock())
    with gate:
        hit = _entries.get(key)
        if hit is not None:
            return hit
        seconds = measure()
        entry = {"method": min(seconds, key=seconds.get),
                 "seconds": {m: float(t) for m, t in seconds.items()}}
        with _lock:
            _entries[key] = entry
        if _store["dir"] is not None:
            _merge_to_disk({key: entry})
    return entry


# ---------------------------------------------------------------- plain data, files

def export_tuning(path=None):
    """The recorded tuning as plain data (and written to ``path`` when given).

    The data are stamped with this convt version and CPU model: `import_tuning` accepts them
    only where both match.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Also write the data there as JSON (to a temporary file renamed into place, so a
        reader never sees half a file); missing directories are created.

    Returns
    -------
    dict
        ``{"format": 2, "convt": version, "cpu": model, "entries": {signature: {"method":
        name, "seconds": {method: best time}}}}``: JSON-serialisable.

    Raises
    ------
    OSError
        ``path`` cannot be written.

    Examples
    --------
    >>> import convt, json, os, tempfile
    >>> data = convt.export_tuning()
    >>> sorted(data)
    ['convt', 'cpu', 'entries', 'format']
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = os.path.join(d, "tuning.json")
    ...     data = convt.export_tuning(path)
    ...     with open(path, encoding="utf-8") as f:
    ...         print(json.load(f) == data)
    True
    """
    with _lock:
        data = {"format": _FORMAT, **stamp(), "entries": dict(_entries)}
    if path is not None:
        atomic_write_json(os.fspath(path), data)
    return data


def import_tuning(source):
    """Add recorded winners from ``source`` (what `export_tuning` returned, or its file).

    Signatures already recorded keep their winner. Data from another convt version or CPU,
    and malformed data, are ignored with a ``RuntimeWarning`` (tuned winners do not carry
    over); a file that does not exist adds nothing, silently.

    Parameters
    ----------
    source : dict, str or os.PathLike
        The data `export_tuning` returned, or the path of a file it wrote.

    Returns
    -------
    int
        The number of entries added.

    Warns
    -----
    RuntimeWarning
        Data made by another convt version or on another CPU, malformed data, or an
        unreadable file; nothing is added.

    Examples
    --------
    >>> import convt, os, tempfile, warnings
    >>> convt.forget_tuning()
    >>> data = convt.export_tuning()      # stamped with this convt and CPU, no entries
    >>> data["entries"]["example"] = {"method": "fft", "seconds": {"direct": 2e-3, "fft": 1e-3}}
    >>> convt.import_tuning(data)
    1
    >>> convt.import_tuning(data)         # already recorded
    0
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = os.path.join(d, "tuning.json")
    ...     _ = convt.export_tuning(path)
    ...     convt.forget_tuning()
    ...     print(convt.import_tuning(path))
    1
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     print(convt.import_tuning(dict(data, cpu="another CPU")))
    0
    >>> caught[0].category.__name__
    'RuntimeWarning'
    >>> convt.forget_tuning()
    """
    if isinstance(source, (str, os.PathLike)):
        data = _read(os.fspath(source))
    else:
        data = _valid(source, "import_tuning")
    if not data:
        return 0
    with _lock:
        new = {k: v for k, v in data.items() if k not in _entries}
        _entries.update(new)
    return len(new)


def forget_tuning(disk=False):
    """Forget every recorded winner (and delete the on-disk store's file when ``disk``).

    Later calls with ``method="tune"`` measure again.

    Parameters
    ----------
    disk : bool, default False
        Also delete the file of the on-disk store, when the store is on (see
        `use_tuning_store`); otherwise turning the store on again re-reads its winners.

    Examples
    --------
    >>> import convt, os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = convt.use_tuning_store(d)
    ...     _ = convt.export_tuning(path)     # a store file, as tuning writes it
    ...     convt.forget_tuning(disk=True)
    ...     print(os.path.exists(path), convt.export_tuning()["entries"])
    ...     convt.use_tuning_store(enable=False)
    False {}
    """
    with _lock:
        _entries.clear()
    if disk and _store["dir"] is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(_store["dir"], _FILE))


def cache_dir():
    """convt's cache directory: ``$CONVT_TUNING_DIR``, else ``$XDG_CACHE_HOME/convt`` (or
    ``~/.cache/convt``; ``%LOCALAPPDATA%\\convt`` on Windows)."""
    env = os.environ.get("CONVT_TUNING_DIR")
    if env:
        return env
    base = (os.environ.get("LOCALAPPDATA") if os.name == "nt" else None) or \
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "convt")


def use_tuning_store(directory=None, enable=True):
    """Turn the on-disk tuning store on (in ``directory``, default `cache_dir`) or off.

    When on, the store's file is read now (its winners are added to memory) and every new
    winner is merged into it. Setting ``CONVT_TUNING_DIR`` turns it on for a whole process.

    Parameters
    ----------
    directory : str or os.PathLike, optional
        Where the store's file lives; default: the user cache directory (``cache_dir``).
    enable : bool, default True
        False turns the store off (winners are then kept in memory only).

    Returns
    -------
    str or None
        The store's file path, or None when turned off.

    Examples
    --------
    >>> import convt, tempfile
    >>> path = convt.use_tuning_store(tempfile.mkdtemp())
    >>> path.endswith("tuning.json")
    True
    >>> convt.use_tuning_store(enable=False)
    """
    _store["env_checked"] = True
    if not enable:
        _store["dir"] = None
        return None
    d = os.fspath(directory) if directory is not None else cache_dir()
    _store["dir"] = d
    path = os.path.join(d, _FILE)
    if os.path.exists(path):
        import_tuning(path)
    return path


def _check_env():
    if not _store["env_checked"]:
        _store["env_checked"] = True
        if os.environ.get("CONVT_TUNING_DIR"):
            use_tuning_store()


def _entry(key, value):
    """One tuning entry as stored, or None unless it is a string key with a winner among the
    backends and each backend's seconds a finite non-negative number (a string or None there
    once reached explain's arithmetic)."""
    if not isinstance(key, str) or not isinstance(value, dict):
        return None
    method, seconds = value.get("method"), value.get("seconds")
    if method not in _BACKENDS or not isinstance(seconds, dict):
        return None
    for m, t in seconds.items():
        if (m not in _BACKENDS or isinstance(t, bool) or not isinstance(t, (int, float))
                or not 0 <= t < math.inf):
            return None
    return {"method": method, "seconds": {m: float(t) for m, t in seconds.items()}}


def _valid(data, where):
    """The entries of ``data`` if it is this version's and CPU's tuning, else None (warned)."""
    if isinstance(data, dict) and data.get("format") == 1:
        warnings.warn(f"convt: ignoring tuning data from {where}: format 1, whose signatures "
                      "name neither the storage dtype nor the ISA level (float16 and bfloat16 "
                      "data run other kernels than float32); those shapes are tuned again, "
                      f"and stored in format {_FORMAT}", RuntimeWarning, stacklevel=3)
        return None
    try:
        if data.get("format") != _FORMAT:
            raise ValueError(f"unknown format {data.get('format')!r}")
        entries = data["entries"]
        ok = {k: e for k, e in ((k, _entry(k, v)) for k, v in entries.items()) if e}
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        warnings.warn(f"convt: ignoring tuning data from {where}: malformed ({e})",
                      RuntimeWarning, stacklevel=3)
        return None
    if len(ok) < len(entries):
        bad = next(k for k in entries if k not in ok)
        warnings.warn(f"convt: ignoring {len(entries) - len(ok)} malformed tuning entries from "
                      f"{where} (the first: {bad!r}: {entries[bad]!r})"[:400], RuntimeWarning,
                      stacklevel=3)
    here = stamp()
    if (data.get("convt"), data.get("cpu")) != (here["convt"], here["cpu"]):
        warnings.warn(f"convt: ignoring stale tuning data from {where}: made by convt "
                      f"{data.get('convt')} on {data.get('cpu')!r}, this is convt "
                      f"{here['convt']} on {here['cpu']!r}", RuntimeWarning, stacklevel=3)
        return None
    return ok


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        warnings.warn(f"convt: ignoring the tuning file {path!r}: unreadable ({e})",
                      RuntimeWarning, stacklevel=3)
        return None
    return _valid(data, repr(path))


@contextlib.contextmanager
def _file_lock(path):
    """An exclusive lock on ``path + '.lock'`` (POSIX flock; no lock elsewhere, where the
    rename still keeps the file whole and a lost race costs one re-tuning)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path + ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _merge_to_disk(new):
    path = os.path.join(_store["dir"], _FILE)
    try:
        os.makedirs(_store["dir"], exist_ok=True)
        with _file_lock(path):
            entries = _read(path) or {}
            entries.update(new)
            atomic_write_json(path, {"format": _FORMAT, **stamp(), "entries": entries})
    except OSError as e:
        warnings.warn(f"convt: could not write the tuning store {path!r}: {e}",
                      RuntimeWarning, stacklevel=3)


def atomic_write_json(path, data):
    """Write ``data`` as JSON to ``path`` via a temporary file and ``os.replace``."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
