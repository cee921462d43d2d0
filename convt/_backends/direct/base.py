"""The protocol of a direct variant: one code path of the direct backend.

A variant is an object with a ``name`` in ``convt._backends.direct.VARIANTS`` (the registry,
in rule order). The registry asks each, in turn:

``claim(geom, rule)``
    the ``DirectKind`` that runs ``geom`` (usually its own; it may return the kind the later
    variants chose, ``rule.next()``), or None to leave ``geom`` to the later variants. The
    last variant (pixel) claims every geometry;
``rate(geom, kind, c)``, ``f64_slowdown(geom, kind, c)``, ``extra_moved(geom, kind)``,
``extra_seconds(geom, kind, c, rate, isz)``
    its cost: multiply-adds per second of one float32 thread (float64's: that over
    ``f64_slowdown``, by default the constant ``direct_f64``), values moved besides reading x
    and writing y once, seconds of per-row set-up and slow multiply-adds (``rate``: the
    rate for the compute dtype, ``isz`` its bytes a value; ``convt._backends.direct.seconds``
    adds the call cost and the threads);
``tasks(geom, kind, itemsize)``
    how many tasks its kernel shares among the threads in a compute dtype of ``itemsize``
    bytes a value (None: enough for any count);
``layout(geom, mode)``
    what it plans from the geometry alone (cached per geometry by the registry), or None;
``prepare(geom, plan, layout)``
    ``(name, runner, state)`` for the plan's weights (``convt._backends.base``); a variant
    that cannot take the weights (a NaN or Inf where its sums would spread it) returns
    another variant's preparation;
``workspace_bytes(geom, itemsize, storage_itemsize=None)``
    bytes a call holds besides x and y (``storage_itemsize``: the bytes of a value of x and
    y, where they differ from the compute dtype's ``itemsize``);
``describe(kind)``
    one line for ``convt.explain``;
``writes_16bit(geom)``
    whether its runner takes a float16 / bfloat16 ``out`` for ``geom`` and rounds each value
    into it as it stores it (else a 16-bit call's float32 result is rounded in a pass of its
    own);
``new_16bit(shape, dtype)``
    a new such ``out`` (by default ``np.empty``; one its write-out can stream, where it can).
"""
from __future__ import annotations

from math import prod
from typing import NamedTuple

import numpy as np

__all__ = ["DirectKind", "Variant", "GRID_WASTE_OK", "MAX_GEMM_WASTE", "TABLE_BYTES"]

# Grid-mode GEMM multiply-adds per useful one that the GEMM variant accepts (channels-last;
# channels-first grid mode avoids transposes, so it may pay up to MAX_GEMM_WASTE), also the
# bound on work spent on taps off the data for the register-tile variants.
GRID_WASTE_OK = 1.25
MAX_GEMM_WASTE = 1.5
# Peak bytes per output position of one axis while its phase table is built (tracemalloc,
# convt._backends.direct.pixel.axis_taps at 10**5 and 10**6 positions: 80.0).
TABLE_BYTES = 80


class DirectKind(NamedTuple):
    """How the direct backend runs a geometry: ``variant`` (a registry name); ``mode``
    "grid" or "batch-rows" (gemm), "channels-first" (winograd's channels-first kernel), else
    ""; multiply-adds it performs and useful ones; ``rows``: the depthwise kernel's row
    terms, ``border``: of its multiply-adds, those taken one vector at a time (0 for the
    others)."""
    variant: str
    mode: str
    macs: int
    useful: int
    rows: int = 0
    border: int = 0


class Variant:
    """Defaults of the protocol; see the module docstring."""

    name = ""
    # the variant that computes a pinned geometry this one cannot (convt.dask's blocks)
    fallback = None

    def writes_16bit(self, geom):
        return False

    def claim(self, geom, rule):
        return None

    def new_16bit(self, shape, dtype):
        return np.empty(shape, dtype)

    def runs(self, geom):
        """Whether this variant can compute ``geom`` at all (when pinned)."""
        return True

    def rate(self, geom, kind, c):
        raise NotImplementedError

    def f64_slowdown(self, geom, kind, c):
        return c["direct_f64"]

    def extra_moved(self, geom, kind):
        return 0

    def extra_seconds(self, geom, kind, c, rate, itemsize):
        return 0.0

    def tasks(self, geom, kind, itemsize=4):
        return None

    def pack_seconds(self, geom, kind, c, itemsize, threads):
        """Seconds a one-shot call spends on the weights that a prepared plan has packed
        already: by default the weights read and written once at ``pack_bytes_per_s``."""
        return 2 * geom.weights * itemsize / c["pack_bytes_per_s"]

    def layout(self, geom, mode):
        return None

    def prepare(self, geom, plan, layout):
        raise NotImplementedError

    def block_pin(self, geom, second, out_starts):
        """The pin of a block of ``geom``'s output starting at ``out_starts`` when the whole
        array runs (name, second) (convt.dask: every block sums as the whole array does)."""
        return self.name, second

    def describe(self, kind):
        """One line on ``kind`` for ``convt.explain``."""
        return kind.variant + (f", {kind.mode} mode" if kind.mode else "")

    def table_axes(self, geom):
        """Output lengths of the axes whose phase tables a call builds (pixel.tables)."""
        return geom.out_shape

    def workspace_bytes(self, geom, itemsize, storage_itemsize=None):
        # the compute-dtype (padded) copy of the input, and the per-axis phase tables
        # (pixel.tables): negligible in 2-D and 3-D, 20x a long 1-D output's float32 size
        n_in = geom.batch * geom.c_in * prod(geom.in_shape)
        return n_in * itemsize + TABLE_BYTES * sum(self.table_axes(geom))
