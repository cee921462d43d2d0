"""The direct backend's registry of variants, each one module of this package.

``VARIANTS`` lists them in rule order: for a geometry, the first whose ``claim`` returns a
kind runs it (``select``); the pixel kernel, last, takes whatever the others leave. A variant
implements the protocol of ``convt._backends.direct.base``; adding one means a module here and
a line in ``VARIANTS``. The dispatcher (``convt._dispatch``) calls ``select``, ``seconds``,
``variant_layout``, ``prepare`` and ``workspace_bytes`` and never a variant's internals.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import base
from .base import DirectKind, Variant
from .phases import axes, gemm_counts
from ..base import parallel
from . import depthwise, gemm, micro, micro_amx, micro_bf16, pixel, upsample, winograd

__all__ = ["BACKEND", "VARIANTS", "BY_NAME", "DirectKind", "Variant", "Rule", "select",
           "seconds", "threads", "variant_layout", "prepare", "pin_of", "storage_kind"]

VARIANTS = (
    depthwise.VARIANT,   # fewer than 4 channels per group on a side
    upsample.VARIANT,    # K = s on the last axis, channels-first
    winograd.VARIANT,    # where micro runs, thick channels, 2 or 3 taps one input apart
    micro.VARIANT,       # register tiles (AVX2 + FMA)
    gemm.VARIANT,        # BLAS GEMMs per phase and input offset
    pixel.VARIANT,       # the gather kernel: every geometry, any weights
)
# Variants the storage dtype selects, outside the geometry rule, the first that takes a
# geometry: bfloat16 on AMX-BF16 (ISA level 3), then on AVX512-BF16 (``takes``: in place of
# the dense variants).
BY_STORAGE = (micro_amx.VARIANT, micro_bf16.VARIANT)
BY_NAME = {v.name: v for v in VARIANTS + BY_STORAGE}


class Rule:
    """What a variant's ``claim`` may ask about a geometry: its per-axis counts (``axes``,
    ``gemm`` and ``exact`` multiply-adds, ``grid_ok``), ``seconds(kind)`` (one float32 thread)
    and ``next()``, the kind the later variants choose."""

    def __init__(self, geom, constants, per_axis, counts, rest):
        self.geom, self.constants, self.axes = geom, constants, per_axis
        self.gemm, self.exact = counts
        ok = base.MAX_GEMM_WASTE if geom.data_format == "NCX" else base.GRID_WASTE_OK
        self.grid_ok = self.gemm <= ok * max(self.exact, 1)
        self._rest, self._next = rest, None

    def next(self):
        if self._next is None:
            self._next = self._rest()
        return self._next

    def seconds(self, kind):
        return seconds(self.geom, kind, False, 1, self.constants)


def select(geom, constants, start=0):
    """The ``DirectKind`` that runs ``geom``: the first variant of ``VARIANTS`` (from index
    ``start``) to claim it."""
    per_axis = axes(geom)
    counts = gemm_counts(geom, per_axis)

    def decide(i):
        rule = Rule(geom, constants, per_axis, counts, lambda: decide(i + 1))
        kind = VARIANTS[i].claim(geom, rule)
        return kind if kind is not None else rule.next()

    return decide(start)


def storage_kind(geom, kind, storage):
    """The kind that runs ``geom`` stored in dtype ``storage`` (None: the compute dtype) when
    the rule chose ``kind``: a variant of ``BY_STORAGE`` may take it."""
    for variant in BY_STORAGE:
        if variant.takes(geom, kind.variant, storage):
            return variant.kind(geom, kind)
    return kind


def seconds(geom, kind, f64, threads, c):
    """Estimated seconds of the direct backend running ``kind`` on ``geom`` with ``threads``
    threads, from the cost model's constants ``c``."""
    variant = BY_NAME[kind.variant]
    itemsize = 8 if f64 else 4
    moved = itemsize * (prod(geom.array_shape("input")) + prod(geom.array_shape("output"))
                        + variant.extra_moved(geom, kind))
    rate = variant.rate(geom, kind, c)
    if f64:
        rate /= variant.f64_slowdown(geom, kind, c)
    work = kind.macs / rate + moved / c["bytes_per_s"]
    work += variant.extra_seconds(geom, kind, c, rate, itemsize)
    tasks = variant.tasks(geom, kind, itemsize) if threads > 1 else None
    if tasks:   # the busiest thread runs ceil(tasks / threads) of them
        threads = min(threads, tasks / -(-tasks // threads))
    return c["call_s"] + work / parallel(threads, c)


def describe(kind):
    """What ``kind`` runs, in one line (``convt.explain``)."""
    return BY_NAME[kind.variant].describe(kind)


def pin_of(kind):
    """(name, second) of a kind, as ``variant_layout`` takes it: the GEMM variant's second
    item says batch-rows mode."""
    return kind.variant, kind.mode == "batch-rows"


def block_pin(geom, pin, out_starts):
    """The pin of a block of ``geom``'s output starting at ``out_starts``, for the whole
    array's ``pin`` (``Variant.block_pin``)."""
    return BY_NAME[pin[0]].block_pin(geom, pin[1], out_starts)


def variant_layout(geom, pin):
    """(name, layout) of the variant ``pin`` = (name, second) names on ``geom``: its
    geometry-only planning (``second`` is the GEMM variant's batch-rows flag, or the Winograd
    variant's block alignment for convt.dask). A variant that cannot compute ``geom`` gives
    way to its ``fallback``."""
    name, second = pin
    variant = BY_NAME[name]
    if not variant.runs(geom):
        variant = BY_NAME[variant.fallback]
    return variant.name, variant.layout(geom, second)


def prepare(geom, plan, name, layout):
    """``(name, runner, state)`` of variant ``name`` for ``plan``'s weights."""
    return BY_NAME[name].prepare(geom, plan, layout)


# Below both (a call too short for a team, compute- or memory-bound), the direct kernels
# run serially: a thread team's start-up costs more than such a call (docs/performance.md,
# "Figures moved out of code comments").
_PARALLEL_MIN_MACS = 1 << 22
_PARALLEL_MIN_OUTPUTS = 1 << 18


def threads(geom, workers):
    """Threads the direct kernels use: ``workers``, or one for work too small for a team."""
    small = (geom.macs < _PARALLEL_MIN_MACS
             and prod(geom.array_shape("output")) < _PARALLEL_MIN_OUTPUTS)
    return 1 if small else workers


class DirectBackend:
    """The compiled direct sum, by one of ``VARIANTS`` (``convt._backends.base``)."""

    name = "direct"
    label = "direct"

    def estimate(self, geom, compute_dtype, workers, c, kind=None):
        kind = select(geom, c) if kind is None else kind
        f64 = np.dtype(compute_dtype) == np.float64
        return seconds(geom, kind, f64, threads(geom, workers), c)

    def prepare(self, geom, plan):
        # the variant is the dispatcher's decision for this geometry (or a pinned one; a
        # pinned plan, convt.dask's blocks, keeps it: every block sums as the pin says)
        name, layout = plan.direct_variant(geom)
        if plan.pin is None:
            for variant in BY_STORAGE:
                if variant.takes(geom, name, plan.dtype):
                    return variant.prepare(geom, plan, None)
        return prepare(geom, plan, name, layout)

    def workspace_bytes(self, geom, compute_dtype, kind=None, dtype=None):
        """Bytes a call holds besides x and y: ``kind``'s variant's, or (None) the bound the
        dense variants share; ``kind`` matters only where ``may_differ``. ``dtype``: the
        storage dtype (default: the compute dtype)."""
        variant = BY_NAME[kind.variant] if kind is not None else pixel.VARIANT
        return variant.workspace_bytes(geom, np.dtype(compute_dtype).itemsize,
                                       None if dtype is None else np.dtype(dtype).itemsize)

    def may_differ(self, geom):
        """Whether a variant other than the dense ones may run ``geom`` (so the guard needs
        its kind: few channels on a side)."""
        return depthwise.VARIANT.may_claim(geom)


BACKEND = DirectBackend()
