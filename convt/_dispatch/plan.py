"""Plan: a resolved operator (spec + packed weights + chosen method) that runs on inputs.

Flow: front end -> OpSpec -> Plan -> per input shape, ``resolve`` -> Geometry -> backend.
The plan never looks at the convention except to name it in error messages.
"""
from __future__ import annotations

import copy
import functools
import os
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from .._backends.direct.depthwise import depthwise_layout, run_depthwise
from .._backends.direct.pixel import pack_weights, run_direct, tables
from . import tune as _tune
from .cost import direct_kind, direct_threads, estimate
from .._backends.fft import fft_growth, plan_fft
from .._backends.direct.micro import micro_layout, micro_nr, packed_weights, run_micro
from .._backends.direct.upsample import packed_up, run_up, up_eligible, up_layout
from .._backends import fft as _fft
from .._backends.direct import micro as _micro
from .._backends.direct.winograd import late_sums, run_wino, wino_layout, wino_taps, wino_weights
from .._backends.direct.cfwino import cf_layout, cf_weights, run_cf
from .._backends.direct.gemm import batch_rows_layout, gemm_layout, merged_weights, run_gemm
from .workspace import Workspace, one_shot_workspace
from .._geometry.dtypes import as_array, cast_hint, compute_dtype, dtype_name
from .._geometry.geometry import Geometry, resolve
from .guard import check_memory, check_out, check_range, deliver, memory_limit
from .._backends.reference import conv_transpose_reference
from .._geometry.validate import choice, fail, int_scalar

__all__ = ["Plan", "Planned", "METHODS", "pick", "resolve_workers", "tune_candidates"]

METHODS = ("auto", "direct", "fft", "reference", "tune")
# An OpenMP team of millions of threads would exhaust the process; far above any core count.
MAX_WORKERS = 1024
_GEOMETRY_CACHE_SIZE = 16  # distinct input shapes a prepared operator remembers


# What a one-shot plan (convt._api._OneShot and the front ends' functions: a plan per call)
# decides before it binds the weights: the geometry, its range and memory checks, and the
# method, by the spec, the input shape, the dtype, the method asked for, the workers, the
# memory limit and the FFT's memory budget (which sizes its buffers: convt._dispatch.guard's
# estimate_bytes), not for "tune" (whose store may change). Kept for the last _DECISIONS_SIZE
# of them, like scipy.fft's plan cache, and forgotten with the cost model's constants
# (convt._dispatch.cost.set_constants, which also moves the generation in the key, so that a decision
# made with the old constants while they changed is never found): dilated_s1's one-shot call
# skipped about 50 us of Python (100 for dcgan_g1, run cold, right after a kernel call).
_DECISIONS = {}
_DECISIONS_SIZE = 64
_DECISIONS_LOCK = threading.Lock()
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


def variant_choice(geom):
    """(name, batch_rows): the direct variant ``geom`` runs, "depthwise", "gemm" (in
    batch-rows mode or not) or "pixel" (the rule is ``convt._dispatch.cost.direct_kind``)."""
    kind = direct_kind(geom)
    return kind.variant, kind.mode == "batch-rows"


# Layouts and phase tables depend on the geometry only (never on array contents), so they are
# shared by every plan, like scipy.fft's plan cache: a one-shot call on a shape seen before
# plans in microseconds (fcn32s_k64's 4096-tap layout takes ~13 ms to build).
@functools.lru_cache(maxsize=64)
def direct_variant(geom, pin=None):
    """("depthwise", layout), ("gemm", layout), ("pixel", phase tables), ("micro", None),
    ("winograd", None) or ("upsample", None): how the direct backend runs ``geom``; ``pin`` =
    (name, batch_rows) imposes a variant (every variant computes every geometry, the upsample
    variant through the micro variant's same sums; convt.dask pins the whole array's on each
    of its blocks, so each output's terms are summed in the same order; for "winograd" the
    second item is the block's ``convt._backends.direct.winograd.wino_alignment``)."""
    name, batch_rows = variant_choice(geom) if pin is None else pin
    if name == "depthwise":
        return name, depthwise_layout(geom)
    if name == "pixel":
        return name, tables(geom)
    if name == "upsample" and not up_eligible(geom):
        # a pinned block it cannot compute (convt.dask): the micro variant gives the same bits
        name = "micro"
    if name in ("micro", "winograd", "upsample"):   # layouts depend on the compute dtype too
        return name, None
    layout = gemm_layout(geom)
    return name, batch_rows_layout(layout, geom.batch) if batch_rows else layout


def resolve_workers(conv, workers):
    """Thread count, as scipy.fft reads ``workers``: None -> the OpenMP default (honours
    OMP_NUM_THREADS), n > 0 -> n, n < 0 -> os.cpu_count() + 1 + n (so -1 means every core)."""
    if workers is None:
        from .._kernels._openmp_helpers import max_threads

        return max(1, max_threads())
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
        self.workers = resolve_workers(conv, workers)
        self.dtype = np.dtype(dtype).newbyteorder("=")   # results in native byte order
        self.allowed = allowed
        self.cast = cast
        self.castable = castable   # its API takes dtype= (the canonical one: error messages)
        ct = compute_dtype(self.dtype)
        # Storage dtype first (an explicit cast request rounds there), then the compute dtype.
        # one_shot (the plan lives for one call, convt._api._OneShot): views where the dtype
        # allows, and the calling thread's one-shot workspace instead of one of its own
        copy = None if one_shot else True
        self.w_iox = np.array(w_iox, dtype=self.dtype, copy=copy)
        self.bias = None if b is None else np.array(b, dtype=self.dtype, copy=copy)
        # The kernels always add a bias: zeros stand in for a missing one.
        self.bias_compute = (np.zeros(spec.c_out, ct) if b is None
                             else np.ascontiguousarray(self.bias, dtype=ct))
        self.compute_dtype = ct
        self._geoms = {}
        self._packed = {}
        self.pin = None  # the direct variant to run, (name, batch_rows); None: choose
        self.workspace = one_shot_workspace() if one_shot else Workspace()
        self.one_shot = one_shot
        self._lock = threading.Lock()

    def pack_buffer(self, name):
        """Where the micro, Winograd and GEMM packs put their weights: for a one-shot plan, the
        thread's one-shot workspace buffer ``name`` (reused by the next one-shot call, once
        this plan is gone); None (a new array) otherwise. 18.9 MB of fresh pages cost
        dcgan_g1's one-shot call about 1 ms of page faults."""
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
        other.workspace, other._lock = Workspace(), threading.Lock()
        other.one_shot = False
        return other

    @functools.cached_property
    def w_packed(self):
        """Weights (G, K0, K1, K2, Cg, Mg) in the compute dtype, for the direct kernels that
        read them so; packed on first use (the GEMM grid mode and FFT never need them)."""
        return pack_weights(self.w_iox, self.spec.groups, self.compute_dtype, self.workers)

    @functools.cached_property
    def w_iox_compute(self):
        """The IOX weights, C-contiguous in the compute dtype (a view when they already are)."""
        return np.ascontiguousarray(self.w_iox, dtype=self.compute_dtype)

    def threads(self, geom):
        """Threads for the direct kernels on ``geom``: ``workers``, or one for small work,
        where starting a thread team costs more than it saves (``convt._dispatch.cost``)."""
        return direct_threads(geom, self.workers)

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
                return Planned(geom, method, *_BACKENDS[method](geom, self))
            decided = geom, method
            if shared is not None:
                _remember(_DECISIONS, shared, decided, _DECISIONS_SIZE)
        geom, method = decided
        hit = Planned(geom, method, *_BACKENDS[method](geom, self))
        _remember(self._geoms, key, hit, _GEOMETRY_CACHE_SIZE)
        return hit

    def estimate(self, geom):
        """``convt._dispatch.cost.estimate`` for this plan's compute dtype and workers."""
        return estimate(geom, self.compute_dtype, self.workers)

    def choose(self, geom, x=None):
        """The backend for ``geom``: the method asked for; for "auto" the cost model's
        fastest; for "tune" the measured fastest of the candidates (``tune_candidates``)."""
        if self.method not in ("auto", "tune"):
            return self.method
        est = self.estimate(geom)
        if self.method == "auto":
            return pick(est)
        key = _tune.signature(geom, self.compute_dtype, self.workers)
        cands = self._within_memory(geom, tune_candidates(est))
        if len(cands) == 1:
            return cands[0]
        return _tune.tune(key, lambda: self._measure(geom, cands, x))["method"]

    def _tuned(self, geom):
        """The recorded tuning entry of ``geom``'s signature, or None."""
        return _tune.lookup(_tune.signature(geom, self.compute_dtype, self.workers))

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
            _, runner, state = _BACKENDS[m](geom, self)
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
        y = p.runner(xa, p.state, p.geom, self, dest)
        return out if y is out else deliver(y, self.dtype, out)


# "tune" times every backend whose estimate is within this factor of the best one; a backend
# estimated far slower is not worth seconds of timing. On the dispatch sweep
# (docs/dispatch.md) the model's largest misjudgement of the two backends' ratio was about
# 6x, on a geometry where their estimates were within 1.3x of each other.
_TUNE_WITHIN = 8.0


def pick(est):
    """The backend "auto" runs for a ``convt._dispatch.cost.Estimate``: the lower estimate."""
    fft, direct = est.seconds["fft"], est.seconds["direct"]
    return "fft" if fft is not None and fft < direct else "direct"


def tune_candidates(est):
    """Backends "tune" times, estimated fastest first."""
    known = sorted((t, m) for m, t in est.seconds.items() if t is not None)
    return [m for t, m in known if t <= _TUNE_WITHIN * known[0][0]]


def _run_reference(xa, state, geom, plan, out=None):   # (its own array, whatever out)
    nxc = geom.data_format == "NXC"
    x_ncx = np.moveaxis(xa, -1, 1) if nxc else xa
    y = conv_transpose_reference(x_ncx, plan.w_iox, plan.bias, geom)
    return np.moveaxis(y, 1, -1) if nxc else y


def _run_gemm(xa, state, geom, plan, out=None):
    layout, w_merged = state
    with plan.workspace.borrow() as arena:
        return run_gemm(xa, layout, geom, w_merged, plan.bias_compute,
                        plan.threads(geom), arena, out)


def _run_pixel(xa, taps, geom, plan, out=None):
    ct = plan.w_packed.dtype
    nxc = geom.data_format == "NXC"
    x_nxc = np.ascontiguousarray(xa if nxc else np.moveaxis(xa, 1, -1), dtype=ct)
    # the kernel writes channels-last: into out only when that is the data layout
    y = run_direct(x_nxc, plan.w_packed, plan.bias_compute, geom, taps, plan.threads(geom),
                   out if nxc else None)
    return y if nxc else np.moveaxis(y, -1, 1)


def _run_micro(xa, state, geom, plan, out=None):
    layout, wp = state
    with plan.workspace.borrow() as arena:
        return run_micro(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena,
                         out)


def _run_wino(xa, state, geom, plan, out=None):
    layout, wp, fallback, late = state
    with plan.workspace.borrow() as arena:
        y = run_wino(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena,
                     _micro.ISA, late, out)
    if y is not None:
        return y
    return _wino_fallback(xa, fallback, geom, plan, out)


def _run_cf(xa, state, geom, plan, out=None):
    layout, wp, fallback = state
    with plan.workspace.borrow() as arena:
        y = run_cf(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena, out)
    if y is not None:
        return y
    return _wino_fallback(xa, fallback, geom, plan, out)


def _wino_fallback(xa, fallback, geom, plan, out):
    # A NaN, Inf or huge input value: the products would not propagate it as the taps do
    # (docs/reliability.md); the micro variant (or the pixel kernel) runs this call.
    if not fallback:
        fallback.append(_micro_backend(geom, plan))
    _, runner, micro_state = fallback[0]
    return runner(xa, micro_state, geom, plan, out)


def _run_up(xa, state, geom, plan, out=None):
    layout, packed = state
    with plan.workspace.borrow() as arena:
        return run_up(xa, layout, geom, packed, plan.threads(geom), arena, out)


_RUNNERS = {"gemm": _run_gemm, "pixel": _run_pixel, "depthwise": run_depthwise,
            "micro": _run_micro, "winograd": _run_wino, "upsample": _run_up}


def _finite_weights(plan):
    return plan.packed("finite", lambda p: bool(np.isfinite(p.w_iox).all()))


def _direct_backend(geom, plan):
    variant, state = direct_variant(geom) if plan.pin is None else direct_variant(geom, plan.pin)
    if variant == "winograd":
        # the products' weights are sums of taps: a non-finite weight, or a sum that
        # overflows, runs the micro variant (which then checks its own)
        align = plan.pin[1] if plan.pin is not None and plan.pin[1] else None
        layout = wino_layout(geom, micro_nr(plan.compute_dtype), align)
        # 1-D channels-first layers of stride S and 2S taps: the same products and sums on x
        # as it is, without the transposes (convt._backends.direct.cfwino; a dask block runs the NXC kernel)
        cf = (cf_layout(geom, plan.compute_dtype.itemsize)
              if layout is not None and align is None else None)
        if cf is not None:
            wp, finite = cf_weights(cf, geom, plan.w_iox_compute)
            if finite:
                return variant, _run_cf, (cf, wp, [])
            return _micro_backend(geom, plan)
        if layout is not None:
            # one-shot calls with large products sum them in the kernel (convt._backends.direct.winograd's
            # late_sums); same bits either way
            late = late_sums(layout, plan.one_shot, plan.compute_dtype.itemsize)
            args = (layout, plan.w_iox_compute, geom.groups, plan.workers, _micro.ISA,
                    plan.pack_buffer("packed_wino"))
            wp, finite = wino_taps(*args) if late else wino_weights(*args, plan.one_shot)
            if finite:
                return variant, _RUNNERS[variant], (layout, wp, [], late)
        return _micro_backend(geom, plan)
    return _variant_backend(variant, state, geom, plan)


def _micro_backend(geom, plan):
    return _variant_backend("micro", None, geom, plan)


def _variant_backend(variant, state, geom, plan):
    # The GEMMs and register tiles also multiply each tap's weights by zeros (the halo, rows
    # outside the data): 0 * NaN or 0 * Inf would reach outputs the tap does not touch. The
    # pixel kernel only visits taps in range, so it runs when a weight is not finite.
    if variant == "micro":  # the weights packed per phase for the register tiles
        layout = micro_layout(geom, micro_nr(plan.compute_dtype))
        weights, finite = packed_weights(layout, plan.w_iox_compute, geom.groups,
                                         plan.workers, plan.pack_buffer("packed_micro"))
        plan.packed("finite", lambda p: finite)   # checked in the packing pass (one read)
        state = (layout, weights)
    elif variant == "upsample":
        # every output has its one tap and no halo: a weight that is not finite reaches
        # exactly the outputs its tap touches, as in the reference
        layout = up_layout(geom, plan.compute_dtype.itemsize)
        state = (layout, packed_up(layout, geom, plan.w_iox_compute, plan.bias_compute))
        finite = True
    elif variant == "gemm" and not state.batch_rows:
        # the layout's weights, merged per GEMM op, once per geometry; finiteness checked in
        # the merging pass (one read)
        merged, finite = merged_weights(state, plan.w_iox_compute, plan.workers,
                                        plan.pack_buffer("merged_gemm"))
        plan.packed("finite", lambda p: finite)
        state = (state, merged)
    elif variant == "gemm":   # batch rows: the direct kernels' packed weights
        finite = _finite_weights(plan)
        state = (state, plan.w_packed.reshape(-1)) if finite else None
    else:
        finite = True
    if not finite:
        variant, state = "pixel", tables(geom)
    return variant, _RUNNERS[variant], state


def _fft_backend(geom, plan):
    variant, run, state = plan_fft(geom, plan)
    return variant, functools.partial(_run_fft_finite, run), state


def _fft_in_range(xa, lay, geom, plan):
    """True when every value the FFT backend makes from ``xa`` stays below a quarter of the
    compute dtype's largest (``convt._backends.fft.fft_growth``): False for NaN or Inf anywhere in x
    or w (the comparison with NaN is False), and for finite values near the float range."""
    wmax = plan.packed("max_abs_w", lambda p: float(np.max(np.abs(p.w_iox), initial=0.0)))
    xmax = max(-float(xa.min()), float(xa.max())) if xa.size else 0.0
    return xmax * wmax * fft_growth(geom, lay) <= float(np.finfo(plan.compute_dtype).max) / 4


def _run_fft_finite(run, xa, state, geom, plan, out=None):
    # One NaN or Inf in a transform's input spreads over its whole output; non-finite data
    # (input or weights) runs on the direct backend, so it propagates exactly as there: to the
    # outputs it touches (docs/reliability.md). So do finite values large enough that a
    # transform's sums could overflow where the taps' do not (x = 1e35 with a 15 x 15 kernel
    # over 16 channels in float32 gave Inf and NaN; the direct sums were finite).
    if _fft_in_range(xa, state[0], geom, plan):
        return run(xa, state, geom, plan, out)
    _, runner, direct_state = _direct_backend(geom, plan)
    return runner(xa, direct_state, geom, plan, out)


# method -> (geom, plan) -> (variant, runner, state). A backend plans once per geometry here;
# the runner then does the per-call work only.
_BACKENDS = {
    "direct": _direct_backend,
    "fft": _fft_backend,
    "reference": lambda geom, plan: ("numpy", _run_reference, None),
}
