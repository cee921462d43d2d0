"""Per spatial axis: which part of the full (uncropped) output a destination produces, and the
crop or zero pad that turns it into the source's output.

Notation of CONVENTIONS.md: stride s, dilation d, kernel K, input length I, E = (K-1)*d + 1,
F = (I-1)*s + E. The source's output is full[pb : F - pe] (canonical pads, either may be
negative: positions outside [0, F) hold only the bias). A destination produces
full[pb_d : F - pe_d]; it can stand in for the source when its window holds every position of
the source's window at which the full output can be nonzero:

    pb_d <= max(pb, 0)   and   pe_d <= max(pe, 0),

and the rest is a crop (positions it has too many) or a zero pad (positions outside [0, F) it
cannot produce). Each destination module lists the (pb_d, pe_d) its convention can express;
`pick` chooses the one closest to (pb, pe), exact when one is.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Axis", "axes_of", "covers", "cost", "pick", "clamp", "Window", "window"]


@dataclass(frozen=True)
class Axis:
    """One canonical spatial axis of the source's call."""

    i: int      # input length I
    s: int      # stride
    d: int      # dilation
    k: int      # kernel length K
    pb: int     # canonical pads (may be negative)
    pe: int

    @property
    def e(self):
        """Dilated kernel extent E = (K-1)*d + 1."""
        return (self.k - 1) * self.d + 1

    @property
    def full(self):
        """F = (I-1)*s + E."""
        return (self.i - 1) * self.s + self.e

    @property
    def length(self):
        return self.full - self.pb - self.pe


def axes_of(geom):
    return tuple(Axis(i, s, d, k, pb, pe) for i, s, d, k, pb, pe in zip(
        geom.in_shape, geom.strides, geom.dilations, geom.kernel, geom.pads_begin,
        geom.pads_end))


def clamp(v, lo, hi):
    return max(lo, min(v, hi))


def covers(ax, pb_d, pe_d):
    """True when full[pb_d : F - pe_d] (non-empty) holds every position of the source's window
    where the full output may be nonzero."""
    return pb_d <= max(ax.pb, 0) and pe_d <= max(ax.pe, 0) and ax.full - pb_d - pe_d >= 1


def cost(ax, pb_d, pe_d):
    """Elements cropped or zero-padded to turn full[pb_d : F - pe_d] into the source's output
    (0: the destination computes it exactly)."""
    return abs(pb_d - ax.pb) + abs(pe_d - ax.pe)


def pick(ax, candidates):
    """The candidate ``(pb_d, pe_d, *params)`` closest to the source's window among those that
    cover it (earlier candidates win ties); None when none covers."""
    best = None
    for c in candidates:
        if covers(ax, c[0], c[1]) and (best is None or cost(ax, *c[:2]) < cost(ax, *best[:2])):
            best = c
    return best


@dataclass(frozen=True)
class Window:
    """The source's output from the destination's: keep [lo, hi), then ``before`` zeros
    in front and ``after`` zeros behind."""

    lo: int
    hi: int
    before: int
    after: int
    length: int  # the destination's output length

    @property
    def crops(self):
        return self.lo > 0 or self.hi < self.length

    @property
    def pads(self):
        return self.before > 0 or self.after > 0


def window(ax, pb_d, pe_d):
    """The `Window` of the source's output inside the destination's full[pb_d : F - pe_d]."""
    n = ax.full - pb_d - pe_d
    start = ax.pb - pb_d
    stop = start + ax.length
    lo = clamp(start, 0, n)
    hi = clamp(stop, lo, n)
    before = min(max(lo - start, 0), ax.length)
    return Window(lo, hi, before, ax.length - before - (hi - lo), n)
