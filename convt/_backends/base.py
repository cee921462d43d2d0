"""The protocol of a backend and its shared cost arithmetic.

A backend is an object in ``convt._backends.BACKENDS`` (name -> backend) with

``estimate(geom, compute_dtype, workers, constants)``
    estimated seconds of one call on ``geom`` (a ``convt._geometry.geometry.Geometry``), from
    the cost model's ``constants`` (``convt._dispatch.constants``), or None when it does not
    estimate itself (the reference);
``prepare(geom, plan)``
    ``(variant, runner, state)``: what it precomputes for one geometry from the plan's
    weights (packed layouts, spectra); ``runner(x, state, geom, plan, out=None)`` then does
    the per-call work only and returns y in ``geom``'s layout and the compute dtype (in
    ``out`` when given and the runner writes that layout);
``workspace_bytes(geom, itemsize)``
    bytes a call holds besides its input and result (the memory guard's lower bound).

``plan`` is the dispatcher's holder of the weights (``convt._dispatch.plan.Plan``); backends
read it and never import the dispatcher. The direct backend is itself a registry of variants
(``convt._backends.direct``).
"""
from __future__ import annotations

__all__ = ["parallel"]


def parallel(threads, c):
    """Speed-up of ``threads`` threads over one in the cost model: each thread after the first
    adds ``thread_efficiency`` of one."""
    return 1 + (threads - 1) * c["thread_efficiency"]
