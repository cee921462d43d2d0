"""Argument normalisation shared by the front ends.

Only the API layer validates user input (see STYLE.md): everything here raises a
``ValueError`` / ``TypeError`` whose message names the convention, the parameter, the
constraint and the value, e.g.
``onnx: 'strides' must be positive integers, one per spatial axis (2); got (2, 0)``.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

__all__ = ["fail", "int_tuple", "int_scalar", "shape_tuple", "choice", "bad_type", "as_int"]


def fail(conv, param, constraint, value, exc=ValueError):
    """Build the house-style exception (the caller raises it)."""
    return exc(f"{conv}: {param!r} {constraint}; got {_show(value)}")


def bad_type(conv, param, constraint, value):
    return fail(conv, param, constraint, value, exc=TypeError)


def _show(value):
    if isinstance(value, np.ndarray):
        return f"array(shape={value.shape}, dtype={value.dtype})" if value.size > 16 else repr(value.tolist())
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return repr(value)
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def as_int(conv, param, v, constraint):
    """``v`` as a Python int (Python and NumPy integers); a TypeError naming ``param`` else."""
    # operator.index accepts Python and NumPy integers and rejects floats; bools are ints to
    # Python but never a meaningful stride or pad, so they are refused too.
    if isinstance(v, (bool, np.bool_)):
        raise bad_type(conv, param, constraint, v)
    try:
        return operator.index(v)
    except TypeError:
        raise bad_type(conv, param, constraint, v) from None


def _int_seq(conv, param, value, constraint):
    # A sequence or 1-D integer array as a tuple of Python ints (TypeError otherwise).
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or not (value.dtype.kind in "iu" or value.size == 0):
            raise bad_type(conv, param, constraint, value)
        return tuple(int(v) for v in value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        # a dict or set has a length too, but no order (a dict would give its keys)
        raise bad_type(conv, param, constraint, value)
    return tuple(as_int(conv, param, v, constraint) for v in value)


def int_tuple(conv, param, value, length, *, minimum=None, what=None):
    """Return ``value`` as a tuple of ``length`` Python ints, each ``>= minimum``.

    ``value`` may be any sequence or 1-D integer array. ``what`` is the constraint text
    used in messages (defaults to "integers, one per spatial axis (N)").
    """
    what = what or f"integers, one per spatial axis ({length})"
    if minimum == 1:
        constraint = f"must be positive {what}"
    elif minimum == 0:
        constraint = f"must be non-negative {what}"
    else:
        constraint = f"must be {what}"
    out = _int_seq(conv, param, value, constraint)
    if len(out) != length or (minimum is not None and any(v < minimum for v in out)):
        raise fail(conv, param, constraint, out)
    return out


def shape_tuple(conv, param, value):
    """Return the array shape ``value`` as a tuple of Python ints.

    ``value`` may be any sequence of integers or a 1-D integer array; its rank and lengths are
    checked against the operator later (convt._geometry.geometry.resolve). Floats, bools and strings are
    refused here: a float length would give a geometry of floats, and a shape-keyed cache maps
    ``(1, 4, 5.0, 5)`` and ``(1, 4, 5, 5)`` to one entry.
    """
    constraint = "must be an array shape, a sequence of non-negative integers (x.shape, not x)"
    out = _int_seq(conv, param, value, constraint)
    if any(v < 0 for v in out):
        raise fail(conv, param, constraint, out)
    return out


def int_scalar(conv, param, value, *, minimum=None):
    constraint = "must be an integer" + (f" >= {minimum}" if minimum is not None else "")
    v = as_int(conv, param, value, constraint)
    if minimum is not None and v < minimum:
        raise fail(conv, param, constraint, v)
    return v


def choice(conv, param, value, options):
    """Case-insensitive choice among ``options``; returns the canonical spelling."""
    if not isinstance(value, str):
        raise bad_type(conv, param, f"must be one of {options}", value)
    for opt in options:
        if value.upper() == opt.upper():
            return opt
    raise fail(conv, param, f"must be one of {options}", value)
