"""Plan: a resolved operator (spec + packed weights + chosen method) that runs on inputs.

Flow: front end -> OpSpec -> Plan -> per input shape, ``resolve`` -> Geometry -> backend.
The plan never looks at the convention except to name it in error messages.
"""
from __future__ import annotations

import copy
import functools
import os
import sys
import threading
from math import prod
from typing import Any, Callable, NamedTuple

import numpy as np

from . import threads as _threads
from . import tune as _tune
from .constants import on_change
from .cost import direct_kind, direct_threads, estimate, isa_cached
from .guard import check_memory, check_out, check_range, deliver, memory_limit
from .workspace import ONE_SHOT_KEEP, Workspace, one_shot_workspace
from .._backends import BACKENDS
from .._backends.direct import registry as direct
from .._backends import fft as _fft
from .._backends.direct.pixel import pack_weights
from .._geometry.dtypes import as_array, cast_hint, compute_dtype, dtype_name
from .._geometry.geometry import Geometry, resolve
from .._geometry.validate import choice, fail, int_scalar
from .._kernels import _half

__all__ = ["Plan", "Planned", "METHODS", "fft_in_range", "pick", "resolve_workers",
           "tune_candidates"]

METHODS = ("auto", "direct", "fft", "reference", "tune")
# An OpenMP team of millions of threads would exhaust the process; far above any core count.
MAX_WORKERS = 1024
_GEOMETRY_CACHE_SIZE = 16  # distinct input shapes a prepared operator remembers


# What a one-shot plan (a plan per call) decides before it binds the weights (geometry, range
# and memory checks, method), keyed by everything that decision reads: spec, input shape,
# dtype, method, workers, memory limit, the FFT's memory budget and the constants'
# generation (so a decision made while they changed is never found). Not for "tune", whose
# store may change. Like scipy.fft's plan cache: a call skips the Python that makes the
# decision (docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)").
_DECISIONS = {}
_DECISIONS_SIZE = 64
_DECISIONS_LOCK = _threads.renew_after_fork(sys.modules[__name__], "_DECISIONS_LOCK")
_DECISIONS_GENERATION = [0]


def _remember(cache, key, value, size):
    """cache[key] = value, the oldest entry dropped when ``cache`` holds ``size`` (under one
    lock for every such cache: entries are made once per shape, never on a call's hot path)."""
    with _DECISIONS_LOCK:
        if key not in cache and len(cache) >= size:
            cache.pop(next(iter(cache)), None)
        cache[key] = value


def forget_decisions():
    """Empty the one-shot plans' decisions (convt._dispatch.cost.set_constants calls it)."""
    with _DECISIONS_LOCK:
        _DECISIONS_GENERATION[0] += 1
        _DECISIONS.clear()


on_change(forget_decisions)


class Planned(NamedTuple):
    """What a plan knows about one input shape: the geometry and how it runs.

    ``runner(xa, state, geom, plan, out=None)`` returns y in ``geom``'s data layout and the
    compute dtype, written into ``out`` when it is given and the runner writes that layout
    (``convt._backends.direct.pixel.new_output``); ``state`` is what the backend precomputed for this
    geometry (tables, layouts, spectra); ``variant`` names the backend's code path (e.g.
    "gemm" or "pixel").
    """
    geom: Geometry
    method: str
    variant: str
    runner: Callable
    state: Any


def variant_choice(geom, storage=None):
    """(name, second): the direct variant ``geom`` runs (the cost model's rule,
    ``convt._dispatch.cost.direct_kind``), as ``direct_variant`` takes it pinned; with the
    storage dtype ``storage``, the variant that runs it in that dtype (micro_bf16 and
    micro_amx take bfloat16 from the dense variants: ``direct.storage_kind``)."""
    kind = direct_kind(geom)
    return direct.pin_of(kind if storage is None else direct.storage_kind(geom, kind, storage))


def block_pin(geom, pin, out_starts):
    """The direct variant's pin for a block of ``geom``'s output starting at ``out_starts``
    when the whole array runs ``pin`` (convt.dask)."""
    return direct.block_pin(geom, pin, out_starts)


# Layouts and phase tables depend on the geometry only (never on array contents), so they are
# shared by every plan, like scipy.fft's plan cache: a one-shot call on a shape seen before
# does not build them again (a layout of thousands of taps takes milliseconds to build).
@isa_cached(maxsize=64)
def direct_variant(geom, pin=None):
    """(name, layout): the direct variant that runs ``geom`` and its geometry-only planning
    (``convt._backends.direct.variant_layout``); ``pin`` = (name, second) imposes a variant
    (every variant computes every geometry; convt.dask pins the whole array's on each of its
    blocks, so each output's terms are summed in the same order)."""
    return direct.variant_layout(geom, variant_choice(geom) if pin is None else pin)


on_change(direct_variant.cache_clear)


@functools.lru_cache(maxsize=1)
def _max_threads():
    """OpenMP's omp_get_max_threads, imported on first use (not by an import statement in
    every resolve_workers call: docs/performance.md, "One-shot calls: the plan skeleton")."""
    from .._kernels._openmp_helpers import max_threads

    return max_threads


def resolve_workers(conv, workers):
    """Thread count, as scipy.fft reads ``workers``: None -> the OpenMP default (honours
    OMP_NUM_THREADS), n > 0 -> n, n < 0 -> os.cpu_count() + 1 + n (so -1 means every core)."""
    if workers is None:
        return max(1, _max_threads()())
    n = int_scalar(conv, "workers", workers)
    if n < 0:
        n += (os.cpu_count() or 1) + 1
        if n < 1:
            raise fail(conv, "workers", "must not be below -os.cpu_count()", workers)
    if n == 0:
        raise fail(conv, "workers", "must be a non-zero integer", workers)
    if n > MAX_WORKERS:
        raise fail(conv, "workers", f"must be at most {MAX_WORKERS}", workers)
    return n


class Plan:
    """Weights packed once for ``spec``; callable on any input the spec accepts."""

    def __init__(self, spec, w_iox, b, dtype, *, allowed, method="auto", workers=None,
                 cast=False, one_shot=False, castable=False):
        conv = spec.convention
        self.spec = spec
        self.method = choice(conv, "method", method, METHODS)
        self._workers = resolve_workers(conv, workers)
        self.dtype = np.dtype(dtype).newbyteorder("=")   # results in native byte order
        self.allowed = allowed
        self.cast = cast
        self.castable = castable   # its API takes dtype= (the canonical one: error messages)
        self.compute_dtype = compute_dtype(self.dtype)
        self.pin = None  # the direct variant to run, (name, batch_rows); None: choose
        self.one_shot = one_shot
        self._bind(w_iox, b)

    def _bind(self, w_iox, b):
        """The weights and everything made per plan: caches, workspace, lock."""
        ct, one_shot = self.compute_dtype, self.one_shot
        # Storage dtype first (an explicit cast request rounds there), then the compute dtype.
        # one_shot (the plan lives for one call, convt._api._OneShot): views where the dtype
        # allows, and the calling thread's one-shot workspace instead of one of its own
        copy = None if one_shot else True
        self.w_iox = np.array(w_iox, dtype=self.dtype, copy=copy)
        self.bias = None if b is None else np.array(b, dtype=self.dtype, copy=copy)
        # The kernels always add a bias: zeros stand in for a missing one.
        self.bias_compute = (np.zeros(self.spec.c_out, ct) if b is None
                             else np.ascontiguousarray(self.bias, dtype=ct))
        self._geoms = {}
        self._packed = {}
        self.workspace = one_shot_workspace() if one_shot else Workspace()
        # a 16-bit call's float32 result, kept from call to call (a new array of several MB
        # costs its page faults every call), then rounded into the 16-bit result by ``deliver``;
        # results over ONE_SHOT_KEEP bytes in float32 get a new array each call instead
        self.stage = one_shot_workspace("stage") if one_shot else Workspace()
        # A one-shot plan serves one call of one thread and is never reused: a child forked
        # meanwhile never takes its lock, so it is not renewed after a fork (registering
        # each plan for that is a weak reference and a dict a call)
        self._lock = threading.Lock() if one_shot else _threads.renew_after_fork(self)

    # What a skeleton keeps: the attributes __init__ resolves from the arguments, never one
    # made from the weights (those are ``_bind``'s, or cached on first use). A list of what
    # to keep, not of what to drop, so that a new per-weights attribute cannot leak into
    # every rebound plan: a rebound plan lacking a new argument attribute fails loudly
    # (tests/test_one_shot_skeleton.py compares the attribute names with a fresh plan's).
    _SKELETON = ("spec", "method", "_workers", "dtype", "allowed", "cast", "castable",
                 "compute_dtype", "pin", "one_shot")

    def skeleton(self):
        """This one-shot plan without its weights: what ``rebind`` makes the next one-shot
        plans of the same spec, storage dtype, method and ``workers`` argument from (kept by
        convt._api for calls with the same arguments; it holds no array of the caller's)."""
        other = object.__new__(Plan)
        other.__dict__.update((name, self.__dict__[name]) for name in self._SKELETON)
        return other

    def rebind(self, w_iox, b, workers):
        """A one-shot plan of this ``skeleton`` for the weights ``w_iox`` (IOX) and bias
        ``b``, which the caller checked as the skeleton's first call did (same shapes, dtypes
        and arguments): ``Plan(spec, w_iox, b, ...)`` without resolving the arguments
        again (Python a call would otherwise run cold, right after a kernel's call).
        ``workers`` is resolved again: None follows OpenMP's default in force."""
        plan = object.__new__(Plan)
        plan.__dict__.update(self.__dict__)
        plan._workers = resolve_workers(self.spec.convention, workers)
        plan._bind(w_iox, b)
        return plan

    def pack_buffer(self, name):
        """Where the micro, Winograd and GEMM packs put their weights: for a one-shot plan, the
        thread's one-shot workspace buffer ``name`` (reused by the next one-shot call, once
        this plan is gone); None (a new array) otherwise: fresh pages for a pack of several
        MB cost a one-shot call their page faults."""
        if not self.one_shot:
            return None
        return functools.partial(self.workspace.buffer, name)

    def with_spec(self, spec, pin=None):
        """This plan for ``spec``, another padding rule of the same weights, channels, groups
        and layout, sharing the packed weights (convt.dask: one per block's local pads);
        ``pin``: the direct variant to run, as for `direct_variant`."""
        if pin is not None and (pin[0] in ("pixel", "depthwise") or pin == ("gemm", True)):
            self.w_packed  # noqa: B018 -- packed here once, then shared by every copy
        other = copy.copy(self)
        other.spec, other._geoms, other.pin = spec, {}, pin
        other.workspace, other._lock = Workspace(), _threads.renew_after_fork(other)
        other.stage = Workspace()
        other.one_shot = False
        other.__dict__.pop("w_iox_compute", None)   # a one-shot plan's is in its workspace
        return other

    @functools.cached_property
    def w_packed(self):
        """Weights (G, K0, K1, K2, Cg, Mg) in the compute dtype, for the direct kernels that
        read them so; packed on first use (the GEMM grid mode and FFT never need them)."""
        return pack_weights(self.w_iox, self.spec.groups, self.compute_dtype, self.workers)

    @functools.cached_property
    def w_iox_compute(self):
        """The IOX weights, C-contiguous in the compute dtype (a view when they already are);
        16-bit weights widened in one parallel pass (convt._kernels._half), a one-shot
        plan's into its workspace (the packs read them once, in this call)."""
        kind = _half.KINDS.get(dtype_name(self.dtype))
        if kind is None or self.compute_dtype != np.float32:
            return np.ascontiguousarray(self.w_iox, dtype=self.compute_dtype)
        size = self.w_iox.size
        dst = (self.workspace.buffer("w_widened", size, np.float32) if self.one_shot
               else np.empty(size, np.float32))
        src = np.ascontiguousarray(self.w_iox).reshape(-1).view(np.uint16)
        _half.widen(src, dst, kind, self.workers)
        return dst.reshape(self.w_iox.shape)

    @property
    def workers(self):
        """Threads for this plan's calls: the resolved ``workers``, or 1 in a forked child that
        cannot use OpenMP threads (convt._dispatch.threads)."""
        return _threads.workers(self._workers)

    def threads(self, geom):
        """Threads for the direct kernels on ``geom``: ``workers``, or one for small work,
        where starting a thread team costs more than it saves (``convt._dispatch.cost``)."""
        return direct_threads(geom, self.workers)

    def direct_variant(self, geom):
        """(name, layout) of the direct variant this plan runs on ``geom`` (its pin, or the
        cost model's rule)."""
        return direct_variant(geom) if self.pin is None else direct_variant(geom, self.pin)

    def packed(self, key, make):
        """Weights re-laid out for one backend (``make(plan)``), computed once per plan."""
        hit = self._packed.get(key)
        if hit is None:
            hit = make(self)
            with self._lock:
                self._packed[key] = hit
        return hit

    def geometry(self, x_shape, x=None):
        """The ``Planned`` entry for inputs of ``x_shape`` (cached for a few shapes); ``x``
        (optional) is the input that "tune" times the candidates on."""
        key = tuple(x_shape)
        hit = self._geoms.get(key)
        if hit is not None:
            return hit
        # a one-shot plan serves one call: its decision is kept across calls (_DECISIONS)
        shared = None
        if self.one_shot and self.method != "tune":
            shared = (self.spec, key, self.dtype, self.method, self.workers, memory_limit(),
                      _fft.FFT_MEMORY_BUDGET, _DECISIONS_GENERATION[0])
        decided = _DECISIONS.get(shared) if shared is not None else None
        if decided is None:
            geom = resolve(self.spec, key)
            check_range(self.spec.convention, geom, self.spec.input_name)
            # A shape query (method_for, geometry) of an untuned shape under "tune": the cost
            # model's pick, not cached, so the first real call tunes on its own input.
            query = self.method == "tune" and x is None and self._tuned(geom) is None
            method = pick(self.estimate(geom)) if query else self.choose(geom, x)
            check_memory(self.spec.convention, geom, method, self.dtype, self.spec.input_name)
            if query:
                return Planned(geom, method, *_prepare(method, geom, self))
            decided = geom, method
            if shared is not None:
                _remember(_DECISIONS, shared, decided, _DECISIONS_SIZE)
        geom, method = decided
        hit = Planned(geom, method, *_prepare(method, geom, self))
        _remember(self._geoms, key, hit, _GEOMETRY_CACHE_SIZE)
        return hit

    def estimate(self, geom):
        """``convt._dispatch.cost.estimate`` for this plan's compute dtype, storage dtype
        (unless pinned) and workers, of a one-shot call for a one-shot plan."""
        return estimate(geom, self.compute_dtype, self.workers, one_shot=self.one_shot,
                        storage=self.dtype if self.pin is None else None)

    def choose(self, geom, x=None):
        """The backend for ``geom``: the method asked for; for "auto" the cost model's
        fastest; for "tune" the measured fastest of the candidates (``tune_candidates``)."""
        if self.method not in ("auto", "tune"):
            return self.method
        est = self.estimate(geom)
        if self.method == "auto":
            return pick(est)
        key = _tune.signature(geom, self.dtype, self.workers)
        cands = self._within_memory(geom, tune_candidates(est))
        if len(cands) == 1:
            return cands[0]
        return _tune.tune(key, lambda: self._measure(geom, cands, x))["method"]

    def _tuned(self, geom):
        """The recorded tuning entry of ``geom``'s signature, or None."""
        return _tune.lookup(_tune.signature(geom, self.dtype, self.workers))

    def _within_memory(self, geom, cands):
        """The candidates whose call fits in memory (convt._dispatch.guard), checked before any is
        timed; the first refusal is raised when none does."""
        ok, refusal = [], None
        for m in cands:
            try:
                check_memory(self.spec.convention, geom, m, self.dtype, self.spec.input_name)
            except MemoryError as e:
                refusal = refusal or e
                continue
            ok.append(m)
        if not ok:
            raise refusal
        return ok

    def _measure(self, geom, cands, x):
        """Best-of seconds of each candidate backend on ``geom`` (on ``x``, or seeded data)."""
        if x is None:
            rng = np.random.default_rng(0)
            x = rng.standard_normal(geom.array_shape("input")).astype(self.dtype)
        runs = {}
        for m in cands:
            _, runner, state = _prepare(m, geom, self)
            runs[m] = functools.partial(runner, x, state, geom, self)
        return _tune.time_candidates(runs)

    def __call__(self, x, out=None, inputs=None):
        """y for input ``x``; with ``out``, written there (checked against ``inputs``, name:
        array, default the input alone) and ``out`` returned."""
        conv = self.spec.convention
        xa = as_array(conv, self.spec.input_name, x, self.allowed)
        if xa.dtype != self.dtype:
            # the other byte order of the weights' dtype is swapped once (as numpy's ufuncs
            # take it); another dtype only on request
            if not self.cast and dtype_name(xa.dtype) != dtype_name(self.dtype):
                raise fail(conv, self.spec.input_name, "must have the weights' dtype "
                           f"{self.dtype.name} {cast_hint(self.castable, 'it')}", xa.dtype.name,
                           exc=TypeError)
            xa = xa.astype(self.dtype)
        p = self.geometry(xa.shape, xa)
        dest = None
        if out is not None:
            check_out(conv, out, p.geom.array_shape("output"), self.dtype,
                      {self.spec.input_name: x} if inputs is None else inputs)
            # the kernels write a result in the compute dtype straight into out (no copy)
            dest = out if out.dtype == self.compute_dtype else None
        if (dest is None and self.dtype != self.compute_dtype and p.method == "direct"
                and direct.BY_NAME[p.variant].writes_16bit(p.geom)
                and (out is None or (out.dtype.isnative and out.flags.aligned))):
            # the kernel rounds each value into the 16-bit result as it stores it (a new one
            # from the variant: aligned where its write-out may stream it)
            variant = direct.BY_NAME[p.variant]
            y16 = (variant.new_16bit(p.geom.array_shape("output"), self.dtype) if out is None
                   else out)
            y = p.runner(xa, p.state, p.geom, self, y16)
            return y if y is y16 else deliver(y, self.dtype, out, self.workers)
        if (dest is None and self.dtype != self.compute_dtype
                and prod(p.geom.array_shape("output")) * 4 <= ONE_SHOT_KEEP):
            with self.stage.borrow() as arena:   # 16-bit: the float32 result staged
                dest = arena.get("y", p.geom.array_shape("output"), self.compute_dtype)
                y = p.runner(xa, p.state, p.geom, self, dest)
                return deliver(y, self.dtype, out, self.workers)
        y = p.runner(xa, p.state, p.geom, self, dest)
        return out if y is out else deliver(y, self.dtype, out, self.workers)


# "tune" times every backend whose estimate is within this factor of the best one; a backend
# estimated far slower is not worth seconds of timing. On the dispatch sweep
# (docs/dispatch.md) the model's largest misjudgement of the two backends' ratio was about
# 6x, on a geometry where their estimates were within 1.3x of each other.
_TUNE_WITHIN = 8.0


def pick(est):
    """The backend "auto" runs for a ``convt._dispatch.cost.Estimate``: the lower estimate."""
    # the lowest estimate; on a tie the direct backend (exact sums, no transforms)
    known = [(t, name != "direct", name) for name, t in est.seconds.items() if t is not None]
    return min(known)[2]


def tune_candidates(est):
    """Backends "tune" times, estimated fastest first."""
    known = sorted((t, m) for m, t in est.seconds.items() if t is not None)
    return [m for t, m in known if t <= _TUNE_WITHIN * known[0][0]]


def _fft_in_range(xa, lay, geom, plan):
    """True when every value the FFT backend makes from ``xa`` stays below a quarter of the
    compute dtype's largest (``convt._backends.fft.fft_growth``): False for NaN or Inf
    anywhere in x or w (the comparison with NaN is False), and for finite values near the
    float range."""
    wmax = plan.packed("max_abs_w", lambda p: float(np.max(np.abs(p.w_iox), initial=0.0)))
    xmax = max(-float(xa.min()), float(xa.max())) if xa.size else 0.0
    return xmax * wmax * _fft.fft_growth(geom, lay) <= float(np.finfo(plan.compute_dtype).max) / 4


def fft_in_range(xa, geom, plan):
    """Whether an FFT call of ``plan`` on ``geom`` runs on the FFT backend for the input
    values ``xa`` (an empty array: weights only), or on the direct one (``_run_fft_finite``):
    what `convt.explain` reports."""
    return _fft_in_range(xa, _fft.fft_layout(geom, plan.compute_dtype, one_shot=plan.one_shot),
                         geom, plan)


def _run_fft_finite(run, xa, state, geom, plan, out=None):
    # One NaN or Inf in a transform's input spreads over its whole output; non-finite data
    # (input or weights) runs on the direct backend, so it propagates exactly as there: to the
    # outputs it touches (docs/reliability.md). So do finite values large enough that a
    # transform's sums could overflow where the taps' do not.
    if _fft_in_range(xa, state[0], geom, plan):
        return run(xa, state, geom, plan, out)
    _, runner, direct_state = BACKENDS["direct"].prepare(geom, plan)
    return runner(xa, direct_state, geom, plan, out)


def _prepare(method, geom, plan):
    """(variant, runner, state) of backend ``method`` for ``plan`` on ``geom``: a backend
    plans once per geometry here; the runner then does the per-call work only."""
    variant, runner, state = BACKENDS[method].prepare(geom, plan)
    if method == "fft":
        runner = functools.partial(_run_fft_finite, runner)
    return variant, runner, state
