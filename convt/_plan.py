"""Plan: a resolved operator (spec + packed weights + chosen method) that runs on inputs.

Flow: front end -> OpSpec -> Plan -> per input shape, ``resolve`` -> Geometry -> backend.
The plan never looks at the convention except to name it in error messages.
"""
from __future__ import annotations

import dataclasses
import os
import threading

import numpy as np

from ._direct import pack_weights, run_direct, tables
from ._phase_gemm import gemm_layout, run_gemm
from ._dtypes import as_array, compute_dtype
from ._geometry import resolve
from ._reference import conv_transpose_reference
from ._validate import choice, fail, int_scalar

__all__ = ["Plan", "METHODS", "resolve_workers"]

METHODS = ("auto", "direct", "reference")
_GEOMETRY_CACHE_SIZE = 16  # distinct input shapes a prepared operator remembers
# Grid mode pays for its halo rows; above this ratio of GEMM multiply-adds to useful ones
# (small images, large negative pads) batch-rows mode (M = batch, no halo work) is used when the
# batch is large enough to make a GEMM, and the pixel kernel otherwise.
_GRID_WASTE_OK = 1.25
_MAX_GEMM_WASTE = 1.5
_MIN_BATCH_ROWS = 8
# Below this many input x output channels per group, a GEMM is too thin to beat the pixel
# kernel (depthwise, 1-4 channels per group: memory-bound, DESIGN.md).
_MIN_GEMM_CHANNELS = 4


def direct_variant(geom):
    """("gemm", layout) or ("pixel", phase tables): how the direct backend runs ``geom``."""
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    if min(cg, mg) >= _MIN_GEMM_CHANNELS:
        layout = gemm_layout(geom)
        useful = max(layout.exact_macs, 1)
        if layout.gemm_macs <= _GRID_WASTE_OK * useful:
            return "gemm", layout
        if geom.batch >= _MIN_BATCH_ROWS:
            return "gemm", dataclasses.replace(layout, batch_rows=True)
        if layout.gemm_macs <= _MAX_GEMM_WASTE * useful:
            return "gemm", layout
    return "pixel", tables(geom)


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
        self.bias_compute = None if b is None else self.bias.astype(ct)
        self.w_packed = (pack_weights(self.w_iox, spec.groups, ct)
                         if self.method != "reference" else None)
        self._geoms = {}
        self._lock = threading.Lock()

    def geometry(self, x_shape):
        """Canonical geometry and direct-kernel phase tables for inputs of ``x_shape``."""
        key = tuple(x_shape)
        hit = self._geoms.get(key)
        if hit is None:
            geom = resolve(self.spec, key)
            hit = (geom, ("reference", None) if self.method == "reference"
                   else direct_variant(geom))
            with self._lock:
                if len(self._geoms) >= _GEOMETRY_CACHE_SIZE:
                    self._geoms.pop(next(iter(self._geoms)))
                self._geoms[key] = hit
        return hit

    def choose(self, geom):
        """The backend for ``geom``. For now the direct kernel is the only fast path."""
        return "direct" if self.method == "auto" else self.method

    def __call__(self, x):
        conv = self.spec.convention
        xa = as_array(conv, self.spec.input_name, x, self.allowed)
        if xa.dtype != self.dtype:
            if not self.cast:
                raise fail(conv, self.spec.input_name, "must have the weights' dtype "
                           f"{self.dtype.name} (pass dtype=... to cast)", xa.dtype.name,
                           exc=TypeError)
            xa = xa.astype(self.dtype)
        geom, (variant, state) = self.geometry(xa.shape)
        nxc = geom.data_format == "NXC"
        if variant == "reference":
            x_ncx = xa if not nxc else np.moveaxis(xa, -1, 1)
            y = conv_transpose_reference(x_ncx, self.w_iox, self.bias, geom)
            y = np.moveaxis(y, 1, -1) if nxc else y
        elif variant == "gemm":
            y = run_gemm(xa, state, geom, self.w_packed, self.bias_compute, self.workers)
        else:
            ct = self.w_packed.dtype
            x_nxc = np.ascontiguousarray(xa if nxc else np.moveaxis(xa, 1, -1), dtype=ct)
            y = run_direct(x_nxc, self.w_packed, self.bias_compute, geom, state, self.workers)
            y = y if nxc else np.moveaxis(y, -1, 1)
        return np.ascontiguousarray(y, dtype=self.dtype)
