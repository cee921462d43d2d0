"""A call described by shapes alone, for translating it between conventions.

Every front end can say what one of its calls computes without the arrays: the canonical
``Geometry`` (always channels-first, ``data_format="NCX"``), and how its own arrays relate to the
canonical ones. ``convt.translate`` reads a source convention's ``Canonical`` and writes the same
computation in a destination's terms; nothing here knows any convention's rules.

Axis maps are transposition orders, as ``numpy.transpose`` takes them:
- ``x_axes``: ``x.transpose(x_axes)`` is the canonical input (N, C_in, *spatial). An unbatched
  input (PyTorch's (C_in, *spatial)) gets its batch axis first: ``x[None]``, then ``x_axes``.
- ``w_axes``: ``w.transpose(w_axes)`` is the canonical filter IOX (C_in, C_out / groups, *K).
  A filter that also needs a spatial flip (jax's ``transpose_kernel=False``) names the spatial
  axes of the canonical filter to reverse in ``w_flip`` (0 = the first spatial axis).
- ``y_axes``: ``y.transpose(y_axes)`` turns the canonical output (N, C_out, *spatial) into the
  convention's output; an unbatched call then drops the batch axis.
"""
from __future__ import annotations

from dataclasses import dataclass

from .geometry import Geometry

__all__ = ["Canonical"]


@dataclass(frozen=True)
class Canonical:
    """What one call of convention ``convention`` computes, by shapes alone."""

    convention: str
    geometry: Geometry
    x_axes: tuple
    w_axes: tuple
    y_axes: tuple
    has_bias: bool = False
    unbatched: bool = False
    w_flip: tuple = ()
