"""The geometries convt can index and plan: ``check_range`` refuses a frame past 64-bit
indexing, dilations past it, and more output phases than every backend plans. The plans run it
(convt._dispatch.guard) and so does the translator (convt._translate), whose destinations'
output-length search is linear in the stride.
"""
from __future__ import annotations

from math import prod

from .validate import fail

__all__ = ["MAX_FRAME", "MAX_PHASES", "check_range"]

# Elements of the largest frame a geometry may span (batch x channels x per axis the full
# length plus |pads|): every kernel offset is a sum of a few such terms in int64, and
# scipy.fft plans transforms of up to 2**60 samples, so 2**58 leaves room for both.
MAX_FRAME = 2**58
# Every backend plans per output phase (residue of the output index modulo the stride, per
# axis) in Python, at tens of microseconds and a few hundred bytes a phase, so 2**18 phases
# already plan for tens of seconds (docs/performance.md, "Figures moved out of code
# comments"). fcn32s's 32 x 32 is 1024; 3-D stride 64 is 2**18.
MAX_PHASES = 2**18


def check_range(conv, geom, input_name):
    """ValueError unless ``geom``'s frame has fewer than ``MAX_FRAME`` elements, its
    dilations are below it and its output phases (product of the strides) number at most
    ``MAX_PHASES``."""
    if prod(geom.strides) > MAX_PHASES:
        raise fail(conv, "strides", f"must have a product of at most 2**18 = {MAX_PHASES} "
                   "(the output phases every backend plans)", geom.strides)
    if max(geom.dilations, default=1) >= MAX_FRAME:   # (a length-1 kernel axis spans 1)
        raise fail(conv, "dilations", "must be below 2**58 (the positions convt indexes)",
                   geom.dilations)
    frame = max(geom.batch, 1) * max(geom.c_in, geom.c_out, 1) * prod(
        f + abs(pb) + abs(pe) for f, pb, pe in zip(geom.full_shape, geom.pads_begin,
                                                    geom.pads_end))
    if frame >= MAX_FRAME:
        raise fail(conv, input_name, "with these attributes spans a frame of "
                   f"{frame:.3g} elements (full lengths {geom.full_shape}, pads "
                   f"{geom.pads_begin} / {geom.pads_end}, output {geom.out_shape}), beyond "
                   "the 2**58 that convt indexes", geom.array_shape("input"))
