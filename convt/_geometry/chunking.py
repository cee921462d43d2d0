"""Cutting one transposed convolution into independent output blocks (for convt.dask).

Per spatial axis, in the canonical geometry (convt/_geometry/geometry.py: stride s, dilation d, kernel
K, extent E = (K-1)*d + 1, input length I, pads pb / pe, output length L),

    y[o] = bias + sum of x[i] * w[k] over all i*s + k*d - pb == o.

An output block [o0, o1) therefore needs exactly the inputs i with
ceil((o0 + pb - (E-1)) / s) <= i <= floor((o1 - 1 + pb) / s), and it *is* a transposed
convolution of that input slice [i0, i1) with local canonical pads

    pb' = pb + o0 - i0*s,   pe' = F' - pb' - (o1 - o0),   F' = (i1 - i0 - 1)*s + E,

either of which may be negative. No output is split between blocks, so blocks never need to be
summed (no overlap-add), and each block is computed by the same kernels as the whole call.

Block boundaries: an input block boundary at a becomes the output boundary a*s - pb (the
first output that input a's taps reach, a multiple of s in uncropped coordinates). Then an
interior block needs floor((E-1)/s) input elements before its own input block and none after,
and every interior block has the same pb' (fewer distinct local geometries to plan).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate

__all__ = ["AxisBlock", "axis_blocks"]


@dataclass(frozen=True)
class AxisBlock:
    """One output block along one axis and what it needs from the input.

    ``out_start, out_stop``: the output range; ``in_start, in_stop``: the input range it
    reads (never empty); ``pads_begin, pads_end``: the local canonical pads; ``first_chunk``
    and ``cuts``: the input chunks covering [in_start, in_stop) (indices first_chunk, ...)
    and the (start, stop) to take from each, in that chunk's own coordinates.
    """

    out_start: int
    out_stop: int
    in_start: int
    in_stop: int
    pads_begin: int
    pads_end: int
    first_chunk: int
    cuts: tuple


def _output_bounds(in_chunks, s, pb, out_len):
    starts = list(accumulate(in_chunks, initial=0))
    inner = (min(max(a * s - pb, 0), out_len) for a in starts[1:-1])
    return sorted({0, out_len, *inner})


def axis_blocks(in_chunks, *, stride, dilation, kernel, pads_begin, out_len):
    """The output blocks of one axis for input chunk lengths ``in_chunks`` (a list of
    ``AxisBlock``; fewer blocks than input chunks where pads crop whole chunks away)."""
    s, pb = stride, pads_begin
    ext = (kernel - 1) * dilation + 1
    n_in = sum(in_chunks)
    starts = list(accumulate(in_chunks, initial=0))
    bounds = _output_bounds(in_chunks, s, pb, out_len)
    blocks = []
    for o0, o1 in zip(bounds[:-1], bounds[1:]):
        lo = -((ext - 1 - o0 - pb) // s)          # ceil((o0 + pb - (E-1)) / s)
        hi = (o1 - 1 + pb) // s
        i0 = min(max(lo, 0), n_in - 1)
        # No input reaches a block that lies wholly in the bias-only margin (or in a gap
        # between taps when s > E): one input element whose taps all land outside it keeps
        # the local call well-formed; the kernels then write the bias only.
        i1 = max(min(hi, n_in - 1), i0) + 1
        local_pb = pb + o0 - i0 * s
        local_pe = (i1 - i0 - 1) * s + ext - local_pb - (o1 - o0)
        first = bisect.bisect_right(starts, i0) - 1
        last = bisect.bisect_right(starts, i1 - 1) - 1
        cuts = tuple((max(i0, starts[c]) - starts[c], min(i1, starts[c + 1]) - starts[c])
                     for c in range(first, last + 1))
        blocks.append(AxisBlock(o0, o1, i0, i1, local_pb, local_pe, first, cuts))
    return blocks
