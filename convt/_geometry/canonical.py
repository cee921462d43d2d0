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
  axes of the canonical filter to reverse in ``w_flip`` (0 = the first spatial axis). A filter
  with a leading group axis (OpenVINO's GroupConvolutionBackpropData) sets ``w_grouped``:
  ``w.transpose(w_axes)`` is then (G, C_in / G, C_out / G, *K), and merging its first two axes
  (a reshape, input channels being group-major) gives the canonical filter.
- ``y_axes``: ``y.transpose(y_axes)`` turns the canonical output (N, C_out, *spatial) into the
  convention's output; an unbatched call then drops the batch axis.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .geometry import Geometry, resolve
from .validate import shape_tuple

__all__ = ["Canonical", "dummy", "from_spec", "layout_axes"]


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
    w_grouped: bool = False


def dummy(conv, param, shape, dtype="float32"):
    """A zero-cost array of ``shape`` (one element, broadcast) for reusing checks that read
    arrays; ``shape`` is validated as an array shape first. None stays None."""
    if shape is None:
        return None
    return np.broadcast_to(np.zeros((), dtype), shape_tuple(conv, param, shape))


def layout_axes(nd, data_format="NCX", filter_format="IOX"):
    """(x_axes, w_axes, y_axes) of NCX / NXC data and IOX / XOI filters with ``nd`` spatial
    axes."""
    ident = tuple(range(nd + 2))
    if data_format == "NCX":
        x_axes = y_axes = ident
    else:
        x_axes, y_axes = (0, nd + 1, *range(1, nd + 1)), (0, *range(2, nd + 2), 1)
    w_axes = ident if filter_format == "IOX" else (nd + 1, nd, *range(nd))
    return x_axes, w_axes, y_axes


def from_spec(spec, x_shape, filter_format, has_bias, w_grouped=False):
    """The ``Canonical`` of a front end's ``OpSpec`` applied to inputs of ``x_shape`` (in the
    spec's data_format), for conventions whose layouts are NCX / NXC and IOX / XOI."""
    geom = resolve(spec, tuple(x_shape))
    x_axes, w_axes, y_axes = layout_axes(spec.ndim, spec.data_format, filter_format)
    if w_grouped:   # (G, C_in/G, C_out/G, *K) or (G, *K, C_out/G, C_in/G)
        w_axes = (0, *(a + 1 for a in w_axes))
    return Canonical(convention=spec.convention, geometry=replace(geom, data_format="NCX"),
                     x_axes=x_axes, w_axes=w_axes, y_axes=y_axes, has_bias=has_bias,
                     w_grouped=w_grouped)
