"""The cost model behind ``method="auto"``: estimated seconds of each backend on a geometry.

A pure function of (canonical geometry, compute dtype, threads, ``constants.CONSTANTS``); the
layout is part of the geometry. It needs no layouts or spectra: each backend prices itself
(``convt._backends``), the direct backend through the variant its rule picks
(``direct_kind``: the code that will run; the one exception is an operator whose weights hold
NaN or Inf, which runs the pixel kernel instead, docs/reliability.md).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .constants import (CONSTANTS, DEFAULTS, calibration_path, current,  # noqa: F401
                        load_calibration, on_change, rate_sources, save_calibration,
                        set_constants)
from .._backends import BACKENDS
from .._backends.direct import registry as direct
from .._backends.direct.base import DirectKind
from .._kernels import _cpu

__all__ = ["CONSTANTS", "DEFAULTS", "Estimate", "DirectKind", "direct_kind", "direct_threads",
           "estimate", "seconds", "set_constants", "calibration_path", "load_calibration",
           "save_calibration"]


class Estimate(NamedTuple):
    """Estimated seconds per backend (None: not estimated) of the call asked for (prepared
    or one-shot) and what the direct one runs; ``split`` holds, per estimated backend,
    (seconds of a prepared call, seconds of a one-shot call, the part of the one-shot call
    that a prepared one has done already: the FFT's kernel spectra and set-up, the direct
    backend's weight packing and set-up)."""
    seconds: dict
    direct: DirectKind
    threads: int
    note: str
    split: dict = {}


# The FFT backend prices its tiling with the dispatcher's constants (one model, docs/fft.md).
BACKENDS["fft"].constants = CONSTANTS


def isa_cached(maxsize):
    """``functools.lru_cache`` keyed also on the ISA level (``convt._kernels._cpu.ISA``,
    which the variant rule reads and a test may lower): ``cache_clear`` and ``__wrapped__``
    as lru_cache's."""
    def decorate(func):
        cached = functools.lru_cache(maxsize=maxsize)(lambda isa, *args: func(*args))

        @functools.wraps(func)
        def call(*args):
            current()   # the peak-tied rates follow the machine from the first use on
            return cached(_cpu.ISA, *args)

        call.cache_clear = cached.cache_clear
        return call
    return decorate


# Geometries are frozen and the rule is pure (given CONSTANTS, whose changes clear the cache,
# and the ISA level): one-shot calls on a shape seen before skip the per-axis counts
# (docs/performance.md, "Figures moved out of code comments").
@isa_cached(maxsize=256)
def direct_kind(geom):
    """The direct backend's variant for ``geom`` (a ``DirectKind``): the registry's rule."""
    return direct.select(geom, CONSTANTS)


on_change(direct_kind.cache_clear)


def direct_threads(geom, workers):
    """Threads the direct kernels use: ``workers``, or one for work too small for a team."""
    return direct.threads(geom, workers)


def seconds(geom, compute_dtype, workers, method, constants=None):
    """Estimated seconds of ``method`` (a backend that estimates itself, or "depthwise": the
    depthwise kernel even where the direct backend would run another variant) on ``geom``,
    always computed (``estimate`` skips hopeless ones); for fitting the constants."""
    c = current() if constants is None else constants
    if method in ("direct", "depthwise"):
        kind = (direct.depthwise.depthwise_kind(geom) if method == "depthwise"
                else direct_kind(geom))
        return direct.BACKEND.estimate(geom, compute_dtype, workers, c, kind)
    return BACKENDS[method].estimate(geom, compute_dtype, workers, c)


def _packing_seconds(geom, compute_dtype, c, kind=None, workers=1):
    """What a one-shot direct call costs beyond a prepared one: its set-up (``oneshot_call_s``:
    planning the variant, the packing's buffers and calls) and its weights' packing as the
    variant of ``kind`` (default: the rule's) does it on ``workers`` threads (``pack_seconds``:
    by default the weights read and written once at ``pack_bytes_per_s``)."""
    kind = direct_kind(geom) if kind is None else kind
    return c["oneshot_call_s"] + direct.BY_NAME[kind.variant].pack_seconds(
        geom, kind, c, np.dtype(compute_dtype).itemsize, direct_threads(geom, workers))


def estimate(geom, compute_dtype, workers, constants=None, one_shot=False, storage=None):
    """Estimated seconds of each backend that estimates itself ("direct", "fft") on ``geom``.

    ``compute_dtype`` is float32 or float64 (16-bit types compute in float32); ``workers``
    is the plan's thread count; ``one_shot``: price a one-shot call (which computes the
    FFT's kernel spectra and packs the direct backend's weights) instead of a prepared one.
    Another backend than the direct one is not estimated (None) when the direct estimate is
    below its fixed cost alone or when no output position has an input. ``storage``: the
    storage dtype, when a direct variant of its own may run it (bfloat16's dot products).
    """
    c = current() if constants is None else constants
    kind = direct.storage_kind(geom, direct_kind(geom), storage)
    run = direct.BACKEND.estimate(geom, compute_dtype, workers, c, kind)
    pack = _packing_seconds(geom, compute_dtype, c, kind, workers)
    split = {"direct": (run, run + pack, pack)}
    times = {"direct": run + pack if one_shot else run}
    note = ""
    for name, backend in BACKENDS.items():
        if name == "direct" or not hasattr(backend, "fixed_seconds"):
            continue
        times[name] = None
        fixed = backend.fixed_seconds(geom, c)
        if times["direct"] < fixed:
            note = (f"direct estimate below the {backend.label}'s fixed cost "
                    f"({fixed * 1e6:.0f} us): {backend.label} not estimated")
        elif kind.useful == 0 or geom.batch == 0:
            note = f"no input reaches the output: {backend.label} not estimated"
        elif hasattr(backend, "estimate_parts"):
            prepared = backend.estimate(geom, compute_dtype, workers, c)
            own, setup = backend.estimate_parts(geom, compute_dtype, workers, c, True)
            # a one-shot call's set-up besides its spectra (the backend's own per axis in
            # ``setup``; the call's, oneshot_call_s, as the direct backend's)
            setup += c["oneshot_call_s"]
            split[name] = (prepared, own + setup, setup)
            times[name] = split[name][1 if one_shot else 0]
        else:
            times[name] = backend.estimate(geom, compute_dtype, workers, c)
    return Estimate(times, kind, direct_threads(geom, workers), note, split)
