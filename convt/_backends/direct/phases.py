"""Output phases and their taps, per axis: the arithmetic every direct variant plans from.

Output ``o = q * s + c`` (residue ``c`` of stride ``s``) receives tap ``k`` from input
``i = q + e`` exactly when ``(c + pad_begin - k * d) % s == 0``, with ``e = (c + pad_begin -
k * d) // s`` (DESIGN.md, "Phase decomposition"). The counts below give the work of a
geometry per axis, in O(sum of strides x kernel) time, without building any variant's layout:
the cost model and the variants' rules use them.
"""
from __future__ import annotations

import itertools

__all__ = ["axes3", "axis_phases", "phase_combos", "axis_sums", "axes", "gemm_counts",
           "pad3"]


def pad3(values, fill):
    """``values`` (1-3 per-axis values) padded in front with ``fill`` to 3 axes."""
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values


def axes3(geom):
    """Strides, dilations, kernel, input shape, begin pads and output shape, 3 axes each."""
    return (pad3(geom.strides, 1), pad3(geom.dilations, 1), pad3(geom.kernel, 1),
            pad3(geom.in_shape, 1), pad3(geom.pads_begin, 0), pad3(geom.out_shape, 1))


def axis_phases(s, d, k_len, pb, o_len):
    """Per residue c: (Q, [(k, e), ...]) with input i = q + e for output o = q*s + c."""
    out = []
    for c in range(s):
        q = max(0, -(-(o_len - c) // s))
        taps = [(k, (c + pb - k * d) // s) for k in range(k_len) if (c + pb - k * d) % s == 0]
        out.append((q, taps))
    return out


def phase_combos(per_axis, kernel):
    """Every phase of the per-axis phase lists ``per_axis`` (3 axes, ``axis_phases``), in C
    order of the residues: (residues c, output counts Q, taps), each tap as (flat index in
    ``kernel`` (3 axes), input offset e per axis)."""
    for combo in itertools.product(*(list(enumerate(p)) for p in per_axis)):
        taps = [(((k0 * kernel[1] + k1) * kernel[2] + k2), (e0, e1, e2))
                for (k0, e0), (k1, e1), (k2, e2)
                in itertools.product(*(t for _, (_, t) in combo))]
        yield tuple(c for c, _ in combo), tuple(q for _, (q, _) in combo), taps


def axis_sums(s, d, k_len, i_len, pb, o_len):
    """Per axis: grid length P, taps T and sum of q*taps over phases with outputs, the taps'
    in-data positions (mirrors the GEMM variant's layout, without its tap lists) and the
    most taps of any phase."""
    phases = axis_phases(s, d, k_len, pb, o_len)
    es = [(e, q) for q, taps in phases if q for _, e in taps]
    h = max(0, -min((e for e, _ in es), default=0))
    grid = max(h + i_len, max((q + e + h for e, q in es), default=0))
    taps = sum(len(t) for q, t in phases if q)
    qtaps = sum(q * len(t) for q, t in phases if q)
    inside = sum(max(0, min(q, i_len - e) - max(0, -e)) for q, t in phases for _, e in t)
    most = max(len(t) for _, t in phases)
    return grid, taps, qtaps, inside, most


def axes(geom):
    """``axis_sums`` of each axis of ``geom``, padded in front to 3 axes."""
    nd = geom.ndim
    pad = (1,) * (3 - nd)
    return [axis_sums(*a) for a in zip(pad + geom.strides, pad + geom.dilations,
                                       pad + geom.kernel, pad + geom.in_shape,
                                       (0,) * (3 - nd) + geom.pads_begin,
                                       pad + geom.out_shape)]


def gemm_counts(geom, per_axis=None):
    """(grid-mode GEMM multiply-adds, multiply-adds of taps inside the data): the
    ``gemm_macs`` and ``exact_macs`` of the GEMM variant's layout, computed per axis
    (``per_axis``: ``axes(geom)`` when the caller has it)."""
    per_axis = axes(geom) if per_axis is None else per_axis
    n, g = geom.batch, geom.groups
    per_group = (geom.c_in // g) * (geom.c_out // g) * g
    (p0, t0, s0, i0, _), (p1, t1, s1, i1, _), (p2, t2, s2, i2, _) = per_axis
    # sum over phase combos of rows(q) * taps, rows(q) = (n-1)P + (q0-1)P1P2 + (q1-1)P2 + q2
    rows_taps = ((n - 1) * p0 * p1 * p2 * t0 * t1 * t2 + (s0 - t0) * p1 * p2 * t1 * t2
                 + t0 * (s1 - t1) * p2 * t2 + t0 * t1 * s2)
    gemm = max(0, rows_taps) * per_group if n else 0
    return gemm, n * i0 * i1 * i2 * per_group
