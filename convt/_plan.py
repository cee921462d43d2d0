"""Plan: a resolved operator (spec + packed weights + chosen method) that runs on inputs.

Flow: front end -> OpSpec -> Plan -> per input shape, ``resolve`` -> Geometry -> backend.
The plan never looks at the convention except to name it in error messages.
"""
from __future__ import annotations

import functools
import os
from math import prod
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from ._depthwise import depthwise_layout, run_depthwise
from ._direct import pack_weights, run_direct, tables
from ._fft import fft_cost, plan_fft
from ._phase_gemm import (_MAX_SET, _MIN_TILE_ROWS, _TILE_VALUES, batch_rows_layout, gemm_layout,
                          grid_shape, merged_weights, run_gemm)
from ._workspace import Workspace
from ._dtypes import as_array, compute_dtype
from ._geometry import Geometry, resolve
from ._guard import check_memory, check_out, check_range, deliver
from ._reference import conv_transpose_reference
from ._validate import choice, fail, int_scalar

__all__ = ["Plan", "Planned", "METHODS", "resolve_workers"]

METHODS = ("auto", "direct", "fft", "reference")
# An OpenMP team of millions of threads would exhaust the process; far above any core count.
MAX_WORKERS = 1024
_GEOMETRY_CACHE_SIZE = 16  # distinct input shapes a prepared operator remembers
# Below both (about 100 us of one thread's work, compute- or memory-bound), the direct kernels
# run serially; results do not depend on the thread count either way.
_PARALLEL_MIN_MACS = 1 << 22
_PARALLEL_MIN_OUTPUTS = 1 << 18
# Interim "auto" rule: "fft" when convt._fft.fft_cost (its fitted cost model) is below
# fft_share x the direct backend's time at direct_macs_per_s useful multiply-adds per second.
# The rate is the direct GEMM variant's best on the 2-core AMD EPYC development machine
# (float32, 2 workers, 2026-11-21); the share keeps the 12 ordinary bench workloads on
# "direct" (the closest, dilated_s1 and dcgan_g1, estimate FFT at 1.24x and 1.35x direct; the
# large-kernel ones at 0.05x and 0.23x).
# Measured crossovers: docs/fft.md.
_AUTO_FFT = {"direct_macs_per_s": 40e9, "fft_share": 0.5}
# Grid mode pays for its halo rows; above this ratio of GEMM multiply-adds to useful ones
# (small images, large negative pads) batch-rows mode (M = batch, no halo work) is used when the
# batch is large enough to make a GEMM, and the pixel kernel otherwise.
_GRID_WASTE_OK = 1.25
_MAX_GEMM_WASTE = 1.5
_MIN_BATCH_ROWS = 8
# Below this many input x output channels per group, a GEMM is too thin to beat the pixel
# kernel (depthwise, 1-4 channels per group: memory-bound, DESIGN.md).
_MIN_GEMM_CHANNELS = 4
# Grid pixels (halo included) per input + output pixel beyond which the GEMM variant is not
# used (_gemm_fits); the 14 bench workloads (shared/bench) have 0.0-0.85.
_MAX_GRID_GROWTH = 8


class Planned(NamedTuple):
    """What a plan knows about one input shape: the geometry and how it runs.

    ``runner(xa, state, geom, plan)`` returns y in ``geom``'s data layout and the compute
    dtype; ``state`` is what the backend precomputed for this geometry (tables, layouts,
    spectra); ``variant`` names the backend's code path (e.g. "gemm" or "pixel").
    """
    geom: Geometry
    method: str
    variant: str
    runner: Callable
    state: Any


# Layouts and phase tables depend on the geometry only (never on array contents), so they are
# shared by every plan, like scipy.fft's plan cache: a one-shot call on a shape seen before
# plans in microseconds (fcn32s_k64's 4096-tap layout takes ~13 ms to build).
@functools.lru_cache(maxsize=64)
def direct_variant(geom):
    """("depthwise", layout), ("gemm", layout) or ("pixel", phase tables): how the direct
    backend runs ``geom``."""
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    if min(cg, mg) < _MIN_GEMM_CHANNELS:
        # Measured (2-core EPYC, float32, 4x4 stride-2 layers): faster than the pixel kernel
        # for every few-channel layer tried, 3-15x in NCX; see convt/_depthwise.py.
        return "depthwise", depthwise_layout(geom)
    if not _gemm_fits(geom):
        return "pixel", tables(geom)
    layout = gemm_layout(geom)
    useful = max(layout.exact_macs, 1)
    # Channels-first grid mode reads x and writes y in place (no transposes), which
    # batch-rows mode cannot: there it pays up to _MAX_GEMM_WASTE (dcgan_g3, NCX, halo
    # waste 1.27: grid 8.8 ms vs batch rows 13.6 ms, 2 threads).
    ok = _MAX_GEMM_WASTE if geom.data_format == "NCX" else _GRID_WASTE_OK
    if layout.gemm_macs <= ok * useful:
        return "gemm", layout
    if geom.batch >= _MIN_BATCH_ROWS:
        return "gemm", batch_rows_layout(layout, geom.batch)
    if layout.gemm_macs <= _MAX_GEMM_WASTE * useful:
        return "gemm", layout
    return "pixel", tables(geom)


def _gemm_fits(geom):
    """The GEMM variant's zero-haloed input grid stays within _MAX_GRID_GROWTH times the data
    (a large dilation with heavy cropping can make the halo, not the data, the size of it: a
    4x4 input at dilation 3000 needed an 8.6 GiB grid in batch-rows mode), and every size and
    leading dimension it passes to BLAS fits BLAS's 32-bit int (the largest: one image of
    the grid, all channels, in batch-rows mode)."""
    img = prod(grid_shape(geom)[2])
    data = prod(geom.in_shape) + prod(geom.out_shape)
    # a tile has at most _TILE_VALUES values or _MIN_TILE_ROWS rows of a set's columns
    blas = max(img * geom.c_in, geom.batch, _MIN_TILE_ROWS * _MAX_SET * geom.c_out,
               _TILE_VALUES)
    return img <= _MAX_GRID_GROWTH * data and blas < 2**31


def resolve_workers(conv, workers):
    """Thread count, as scipy.fft reads ``workers``: None -> the OpenMP default (honours
    OMP_NUM_THREADS), n > 0 -> n, n < 0 -> os.cpu_count() + 1 + n (so -1 means every core)."""
    if workers is None:
        from ._kernels._openmp_helpers import max_threads

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
                 cast=False):
        conv = spec.convention
        self.spec = spec
        self.method = choice(conv, "method", method, METHODS)
        self.workers = resolve_workers(conv, workers)
        self.dtype = np.dtype(dtype)
        self.allowed = allowed
        self.cast = cast
        ct = compute_dtype(self.dtype)
        # Storage dtype first (an explicit cast request rounds there), then the compute dtype.
        self.w_iox = np.array(w_iox, dtype=self.dtype, copy=True)
        self.bias = None if b is None else np.array(b, dtype=self.dtype, copy=True)
        # The kernels always add a bias: zeros stand in for a missing one.
        self.bias_compute = (np.zeros(spec.c_out, ct) if b is None
                             else np.ascontiguousarray(self.bias, dtype=ct))
        self.w_packed = (pack_weights(self.w_iox, spec.groups, ct, self.workers)
                         if self.method != "reference" else None)
        self._geoms = {}
        self._packed = {}
        self.workspace = Workspace()
        self._lock = threading.Lock()

    def threads(self, geom):
        """Threads for the direct kernels on ``geom``: ``workers``, or one for small work,
        where starting a thread team costs more than it saves (a 4.6k-MAC call measured
        22 us on one thread, 127 us on two; with the other core busy, milliseconds)."""
        small = (geom.macs < _PARALLEL_MIN_MACS
                 and prod(geom.array_shape("output")) < _PARALLEL_MIN_OUTPUTS)
        return 1 if small else self.workers

    def packed(self, key, make):
        """Weights re-laid out for one backend (``make(plan)``), computed once per plan."""
        hit = self._packed.get(key)
        if hit is None:
            hit = make(self)
            with self._lock:
                self._packed[key] = hit
        return hit

    def geometry(self, x_shape):
        """The ``Planned`` entry for inputs of ``x_shape`` (cached for a few shapes)."""
        key = tuple(x_shape)
        hit = self._geoms.get(key)
        if hit is None:
            geom = resolve(self.spec, key)
            check_range(self.spec.convention, geom, self.spec.input_name)
            method = self.choose(geom)
            check_memory(self.spec.convention, geom, method, self.dtype, self.spec.input_name)
            hit = Planned(geom, method, *_BACKENDS[method](geom, self))
            with self._lock:
                if len(self._geoms) >= _GEOMETRY_CACHE_SIZE:
                    self._geoms.pop(next(iter(self._geoms)))
                self._geoms[key] = hit
        return hit

    def choose(self, geom):
        """The backend for ``geom``: the method asked for, or for "auto" the interim rule of
        ``_AUTO_FFT`` (a full cost model is a separate issue)."""
        if self.method != "auto":
            return self.method
        direct = geom.macs / _AUTO_FFT["direct_macs_per_s"]
        fft = fft_cost(geom, self.w_packed.dtype)
        return "fft" if fft < _AUTO_FFT["fft_share"] * direct else "direct"

    def __call__(self, x, out=None, inputs=None):
        """y for input ``x``; with ``out``, written there (checked against ``inputs``, name:
        array, default the input alone) and ``out`` returned."""
        conv = self.spec.convention
        xa = as_array(conv, self.spec.input_name, x, self.allowed)
        if xa.dtype != self.dtype:
            if not self.cast:
                raise fail(conv, self.spec.input_name, "must have the weights' dtype "
                           f"{self.dtype.name} (pass dtype=... to cast)", xa.dtype.name,
                           exc=TypeError)
            xa = xa.astype(self.dtype)
        p = self.geometry(xa.shape)
        if out is not None:
            check_out(conv, out, p.geom.array_shape("output"), self.dtype,
                      {self.spec.input_name: x} if inputs is None else inputs)
        y = p.runner(xa, p.state, p.geom, self)
        return deliver(np.ascontiguousarray(y, dtype=self.dtype), out)


def _run_reference(xa, state, geom, plan):
    nxc = geom.data_format == "NXC"
    x_ncx = np.moveaxis(xa, -1, 1) if nxc else xa
    y = conv_transpose_reference(x_ncx, plan.w_iox, plan.bias, geom)
    return np.moveaxis(y, 1, -1) if nxc else y


def _run_gemm(xa, state, geom, plan):
    layout, w_merged = state
    with plan.workspace.borrow() as arena:
        return run_gemm(xa, layout, geom, plan.w_packed, w_merged, plan.bias_compute,
                        plan.threads(geom), arena)


def _run_pixel(xa, taps, geom, plan):
    ct = plan.w_packed.dtype
    nxc = geom.data_format == "NXC"
    x_nxc = np.ascontiguousarray(xa if nxc else np.moveaxis(xa, 1, -1), dtype=ct)
    y = run_direct(x_nxc, plan.w_packed, plan.bias_compute, geom, taps, plan.threads(geom))
    return y if nxc else np.moveaxis(y, -1, 1)


_RUNNERS = {"gemm": _run_gemm, "pixel": _run_pixel, "depthwise": run_depthwise}


def _finite_weights(plan):
    return plan.packed("finite", lambda p: bool(np.isfinite(p.w_iox).all()))


def _direct_backend(geom, plan):
    variant, state = direct_variant(geom)
    if variant == "gemm" and not _finite_weights(plan):
        # The GEMMs also multiply each tap's weights by the zero halo (outputs whose input
        # for that tap lies outside the data): 0 * NaN or 0 * Inf would reach outputs the
        # tap does not touch. The pixel kernel only visits taps in range.
        variant, state = "pixel", tables(geom)
    if variant == "gemm":   # the layout's weights, merged per GEMM op, once per geometry
        state = (state, merged_weights(state, plan.w_packed) if not state.batch_rows
                 else plan.w_packed.reshape(-1))
    return variant, _RUNNERS[variant], state


def _fft_backend(geom, plan):
    variant, run, state = plan_fft(geom, plan)
    return variant, functools.partial(_run_fft_finite, run), state


def _run_fft_finite(run, xa, state, geom, plan):
    # One NaN or Inf in a transform's input spreads over its whole output; non-finite data
    # (input or weights) runs on the direct backend, so it propagates exactly as there: to the
    # outputs it touches (docs/reliability.md).
    if _finite_weights(plan) and np.isfinite(xa).all():
        return run(xa, state, geom, plan)
    _, runner, direct_state = _direct_backend(geom, plan)
    return runner(xa, direct_state, geom, plan)


# method -> (geom, plan) -> (variant, runner, state). A backend plans once per geometry here;
# the runner then does the per-call work only.
_BACKENDS = {
    "direct": _direct_backend,
    "fft": _fft_backend,
    "reference": lambda geom, plan: ("numpy", _run_reference, None),
}
