"""Pieces every front end shares: tensor intake, filter layouts, common attributes.

A front end's own module reads its convention's keywords and states its padding rule; these
helpers do the rest the same way for all of them, so each convention's messages read alike.
"""
from __future__ import annotations

import numpy as np

from .dtypes import as_array, common_dtype
from .geometry import OpSpec, PadRule
from .validate import choice, fail, int_scalar, int_tuple

__all__ = ["intake", "filter_to_iox", "common_attrs", "check_pads_ignored", "require",
           "explicit_pads", "make_spec"]

DATA_FORMATS = ("NCX", "NXC")
FILTER_FORMATS = ("IOX", "XOI")


def filter_to_iox(conv, w, filter_format, param="W"):
    """View of filter ``w`` as IOX (C_in, C_out/G, *K) from IOX or XOI (*K, C_out/G, C_in)."""
    if w.ndim not in (3, 4, 5):
        raise fail(conv, param, "must have rank 3, 4 or 5 (1-3 spatial axes)", w.shape)
    if filter_format == "IOX":
        return w
    nd = w.ndim - 2
    return w.transpose(nd + 1, nd, *range(nd))


def intake(conv, x, w, b, *, allowed, dtype=None, names=("X", "W", "B"),
           data_format="NCX", filter_format="IOX", castable=False):
    """Arrays of one dtype, the filter as IOX, the layouts canonicalised.

    Returns (x or None, w_iox, b or None, storage dtype, data_format, filter_format).
    """
    data_format = choice(conv, "data_format", data_format, DATA_FORMATS)
    filter_format = choice(conv, "filter_format", filter_format, FILTER_FORMATS)
    xa = None if x is None else as_array(conv, names[0], x, allowed)
    wa = as_array(conv, names[1], w, allowed)
    ba = None if b is None else as_array(conv, names[2], b, allowed)
    dt = common_dtype(conv, {names[1]: wa, names[0]: xa, names[2]: ba}, allowed, dtype,
                      castable)
    w_iox = filter_to_iox(conv, wa, filter_format, names[1])
    return xa, w_iox, ba, dt, data_format, filter_format


def common_attrs(conv, w_iox, b, *, strides, dilations, group, kernel_shape=None,
                 group_name="group", names=("W", "B")):
    """Validated (strides, dilations, kernel, groups, c_in, c_out) for IOX filter ``w_iox``."""
    nd = w_iox.ndim - 2
    kernel = tuple(int(k) for k in w_iox.shape[2:])
    strides = (1,) * nd if strides is None else int_tuple(conv, "strides", strides, nd, minimum=1)
    dilations = ((1,) * nd if dilations is None
                 else int_tuple(conv, "dilations", dilations, nd, minimum=1))
    if any(k < 1 for k in kernel):
        raise fail(conv, names[0], "must have spatial (kernel) lengths >= 1", w_iox.shape)
    if kernel_shape is not None:
        ks = int_tuple(conv, "kernel_shape", kernel_shape, nd, minimum=1)
        if ks != kernel:
            raise fail(conv, "kernel_shape", f"must equal {names[0]}'s spatial shape {kernel}", ks)
    groups = int_scalar(conv, group_name, group, minimum=1)
    c_in, c_out = int(w_iox.shape[0]), int(w_iox.shape[1]) * groups
    if c_in % groups:
        raise fail(conv, group_name, f"must divide the input channels C_in = {c_in}", groups)
    if b is not None and (b.ndim != 1 or b.shape[0] != c_out):
        raise fail(conv, names[1], f"must be a 1-D array of length C_out = {c_out}", b.shape)
    return strides, dilations, kernel, groups, c_in, c_out


def check_pads_ignored(conv, auto_pad, pads, neutral, param="pads"):
    """The ONNX text forbids explicit pads together with auto_pad; all-zero pads are harmless."""
    if pads is not None and any(int(p) != 0 for p in np.ravel(pads)) and auto_pad != neutral:
        raise fail(conv, param, f"cannot be used together with auto_pad={auto_pad!r}", tuple(pads))


def require(conv, **values):
    """Attributes a spec marks "Required: yes" must not be None."""
    for name, value in values.items():
        if value is None:
            raise fail(conv, name, "is required", value)


def explicit_pads(conv, nd, op, pads_begin, pads_end, when):
    """``PadRule`` from separate pads_begin / pads_end (OpenVINO, oneDNN), each >= 0 and
    required ``when`` they are used."""
    pads = []
    for name, value in (("pads_begin", pads_begin), ("pads_end", pads_end)):
        if value is None:
            raise fail(conv, name, f"is required with {when}", value)
        pads.append(int_tuple(conv, name, value, nd, minimum=0))
    return PadRule(kind="explicit", output_padding=op, pads_begin=pads[0], pads_end=pads[1])


def make_spec(conv, attrs, rule, data_format, input_name="X"):
    strides, dilations, kernel, groups, c_in, c_out = attrs
    return OpSpec(convention=conv, strides=strides, dilations=dilations, kernel=kernel,
                  groups=groups, c_in=c_in, c_out=c_out, rule=rule, data_format=data_format,
                  input_name=input_name)
