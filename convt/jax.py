"""JAX ``jax.lax.conv_transpose`` front end, on NumPy arrays.

Rules from jax 0.10.2's ``jax/_src/lax/convolution.py`` and confirmed by running it
(docs/conventions.md). ``conv_transpose`` is ``conv_general_dilated`` with the input dilated by
the strides (``lhs_dilation``), unit window strides and padding ``(lo, hi)`` on that
stride-dilated input: a *correlation* with the kernel as given, so the canonical (IOX,
scatter-form) filter is the kernel flipped spatially. ``transpose_kernel=True`` flips it back and
swaps its I and O axes. Every padding mode reduces to ``(lo, hi)`` per axis, independent of the
input length; with the dilated kernel extent E the canonical pads are pb = E-1-lo,
pe = E-1-hi (negative: zeros past the data) and L = max(0, (I-1)*s + 1 + lo + hi - E + 1).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ._geometry.canonical import Canonical
from ._geometry.dtypes import ALL_FLOATS, as_array, common_dtype, dtype_name
from ._geometry.frontend import common_attrs, make_spec
from ._geometry.geometry import PadRule, resolve
from ._dispatch.plan import Plan
from ._geometry.validate import bad_type, fail

__all__ = ["conv_transpose"]

CONV = "jax"
TYPES = ALL_FLOATS   # float64 (with jax_enable_x64), float32, float16, bfloat16

# conv_transpose's defaults by rank ("Defaults to tensorflow convention"); rank 2 has no
# spatial axis (a matrix product, run as a 1-D call of length 1)
_DEFAULT_DN = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
               5: ("NHWDC", "HWDIO", "NHWDC")}


class _Call(NamedTuple):
    """One call's parsed arguments (spatial axes in the kernel spec's order)."""

    lhs_perm: tuple      # x.transpose(lhs_perm) is (N, C_in, *spatial)
    w_axes: tuple        # w.transpose(w_axes) is (C_in, C_out, *K) before the flip
    out_perm: tuple      # y.transpose(out_perm) is (N, C_out, *spatial)
    w_flip: tuple        # canonical spatial axes to reverse (all of them, or none)
    spec: object         # OpSpec, or None for an empty result
    out_shape: tuple     # the result's shape in the output spec's layout


def _spec_strings(dn, rank):
    # conv_dimension_numbers / conv_general_permutations: three strings of the operands'
    # rank, N and C (O and I for the kernel) once each, no repeats, one spatial set
    if len(dn) != 3:
        raise bad_type(CONV, "dimension_numbers", "must be a tuple of 3 strings (lhs, rhs, "
                       "out), e.g. ('NCHW', 'OIHW', 'NCHW')", dn)
    if not all(isinstance(s, str) for s in dn):
        raise bad_type(CONV, "dimension_numbers", "must hold strings", dn)
    for s, pair in zip(dn, (("N", "C"), ("O", "I"), ("N", "C"))):
        if len(s) != rank:
            raise bad_type(CONV, "dimension_numbers", f"must hold strings of the operands' "
                           f"rank {rank}", dn)
        if s.count(pair[0]) != 1 or s.count(pair[1]) != 1 or len(set(s)) != len(s):
            raise bad_type(CONV, "dimension_numbers", f"{s!r} must hold {pair[0]!r} and "
                           f"{pair[1]!r} exactly once and no character twice", dn)
    spatial = [set(s) - set(p) for s, p in zip(dn, (("N", "C"), ("O", "I"), ("N", "C")))]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise bad_type(CONV, "dimension_numbers", "must name the same spatial characters "
                       "in all three strings", dn)
    lhs, rhs, out = dn

    def perm(s, pair):
        # spatial axes in the order the kernel spec names them, for all three operands
        sp = sorted((i for i, c in enumerate(s) if c not in pair), key=lambda i: rhs.index(s[i]))
        return (s.index(pair[0]), s.index(pair[1]), *sp)

    return perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC")


def _permutations(dimension_numbers, rank):
    """(lhs_perm, rhs_perm, out_perm) as jax's ConvDimensionNumbers holds them."""
    dn = _DEFAULT_DN.get(rank) if dimension_numbers is None else dimension_numbers
    if dn is None:
        raise fail(CONV, "lhs", "must have rank 2 to 5 (0-3 spatial axes) for the default "
                   "dimension_numbers", rank)
    if hasattr(dn, "lhs_spec") and hasattr(dn, "rhs_spec") and hasattr(dn, "out_spec"):
        # a jax.lax.ConvDimensionNumbers: already permutations, used as they are
        perms = tuple(tuple(operator.index(a) for a in p)
                      for p in (dn.lhs_spec, dn.rhs_spec, dn.out_spec))
        if any(sorted(p) != list(range(rank)) for p in perms):
            raise fail(CONV, "dimension_numbers", f"must hold permutations of range({rank})",
                       perms)
        return perms
    if isinstance(dn, (list, tuple)):
        return _spec_strings(tuple(dn), rank)
    raise bad_type(CONV, "dimension_numbers", "must be None, a tuple / list of 3 strings or "
                   "a ConvDimensionNumbers", dn)


def _ints(name, value, nd, what):
    # a sequence of nd integers (jax takes its len(); an int has none, a bool is no stride)
    constraint = f"must be a sequence of {nd} {what} integers"
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise bad_type(CONV, name, constraint, value)
    out = []
    for v in value:
        if isinstance(v, (bool, np.bool_)):
            raise bad_type(CONV, name, constraint, value)
        try:
            out.append(operator.index(v))
        except TypeError:
            raise bad_type(CONV, name, constraint, value) from None
    if len(out) != nd or any(v < 1 for v in out):
        raise fail(CONV, name, f"must be {nd} {what} integers, one per spatial axis",
                   tuple(out))
    return tuple(out)


def _pair_pads(padding, nd):
    # conv_general_dilated: "a sequence of (low, high) pairs", each entry operator.index'ed
    try:
        pairs = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (ValueError, TypeError):
        raise fail(CONV, "padding", "must be 'SAME', 'VALID' or a sequence of (low, high) "
                   "integer pairs", padding) from None
    if len(pairs) != nd:
        raise fail(CONV, "padding", f"must hold one (low, high) pair per spatial axis ({nd})",
                   pairs)
    return pairs


def _transpose_padding(ext, s, p):
    """(lo, hi) of ``_conv_transpose_padding(k, s, padding)`` for the dilated kernel extent
    ``ext``: 'SAME' gives length I*s, 'VALID' (I-1)*s + max(E, s); a tuple is the forward
    conv's padding (use_consistent_padding), giving torch's geometry."""
    given = p
    p = p if isinstance(p, (str, tuple)) else None   # a list or an array row is no mode
    if p == "SAME":
        total = ext + s - 2
        lo = ext - 1 if s > ext - 1 else -(-total // 2)
    elif p == "VALID":
        total = ext + s - 2 + max(ext - s, 0)
        lo = ext - 1
    elif isinstance(p, tuple) and p:
        q = [ext - operator.index(v) - 1 for v in p]
        lo, total = q[0], sum(q)
    else:
        raise fail(CONV, "padding", "must be 'SAME', 'VALID' or a sequence of tuples with "
                   "use_consistent_padding=True", given)
    return lo, total - lo


def _pads(padding, strides, exts, consistent):
    """Per axis (lo, hi) padding of the stride-dilated input (jax's conv_transpose)."""
    nd = len(strides)
    # the exact spellings only: "same" is something else (below)
    if consistent or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        if not isinstance(padding, (str, Sequence, np.ndarray)):
            raise bad_type(CONV, "padding", "must be 'SAME', 'VALID' or a sequence of tuples "
                           "with use_consistent_padding=True", padding)
        reps = [padding] * nd if isinstance(padding, str) else list(padding)
        if len(reps) != nd:
            raise fail(CONV, "padding", f"must hold one entry per spatial axis ({nd})",
                       padding)
        try:
            return tuple(_transpose_padding(e, s, p) for e, s, p in zip(exts, strides, reps))
        except TypeError:
            raise bad_type(CONV, "padding", "must hold integers", padding) from None
    if isinstance(padding, str):
        # any other string goes to conv_general_dilated as a *forward* padding type of the
        # undilated input: refused at stride > 1 ("String padding is not implemented for
        # transposed convolution using this op"), else lax.padtype_to_pads with unit strides
        if any(s != 1 for s in strides):
            raise fail(CONV, "padding", "as a string other than 'SAME' / 'VALID' (jax reads it "
                       "as a forward-convolution padding) needs all strides 1", padding)
        kind = padding.upper()
        if kind == "VALID":
            return ((0, 0),) * nd
        if kind not in ("SAME", "SAME_LOWER"):
            raise fail(CONV, "padding", "must be 'SAME', 'VALID' or (low, high) pairs",
                       padding)
        # padtype_to_pads: total E - 1, the odd element last ('SAME') or first
        return tuple(((e - 1) // 2, e - 1 - (e - 1) // 2) if kind == "SAME"
                     else (e - 1 - (e - 1) // 2, (e - 1) // 2) for e in exts)
    return _pair_pads(padding, nd)


def _parse(x_shape, w_shape, strides, padding, rhs_dilation, dimension_numbers,
           transpose_kernel, use_consistent_padding):
    """Every check ``conv_transpose`` makes on shapes and attributes, and its ``_Call``."""
    rank = len(x_shape)
    if rank != len(w_shape):
        raise fail(CONV, "rhs", f"must have the rank of lhs ({rank})", tuple(w_shape))
    lhs_perm, rhs_perm, out_perm = _permutations(dimension_numbers, rank)
    nd = rank - 2
    if nd not in (1, 2, 3):
        raise fail(CONV, "lhs", "must have 1-3 spatial axes (convt's range; rank 2 runs as a "
                   "matrix product but has no Canonical)", tuple(x_shape))
    if not isinstance(transpose_kernel, (bool, np.bool_)):
        raise bad_type(CONV, "transpose_kernel", "must be a bool", transpose_kernel)
    s = _ints("strides", strides, nd, "positive")
    d = (1,) * nd if rhs_dilation is None else _ints("rhs_dilation", rhs_dilation, nd,
                                                     "positive")
    w_axes = ((rhs_perm[0], rhs_perm[1]) if transpose_kernel
              else (rhs_perm[1], rhs_perm[0])) + rhs_perm[2:]
    w_canon = tuple(w_shape[a] for a in w_axes)    # (C_in, C_out, *K) the call uses
    k = w_canon[2:]
    if any(v < 1 for v in k):
        raise fail(CONV, "rhs", "must have kernel lengths >= 1", tuple(w_shape))
    x_canon = tuple(x_shape[a] for a in lhs_perm)
    if x_canon[1] != w_canon[0]:
        raise fail(CONV, "lhs", f"must have the kernel's {w_canon[0]} input features "
                   f"({'O' if transpose_kernel else 'I'} of the rhs spec)", tuple(x_shape))
    exts = tuple((kk - 1) * dd + 1 for kk, dd in zip(k, d))
    pads = _pads(padding, s, exts, bool(use_consistent_padding))
    lengths = []
    for i, ss, e, (lo, hi) in zip(x_canon[2:], s, exts, pads):
        padded = max(0, 1 + ss * (i - 1)) + lo + hi   # the stride-dilated, padded input
        if padded < 0:   # conv_shape_tuple: "Negative padding is larger than the size"
            raise fail(CONV, "padding", f"crops more than the stride-dilated input of "
                       f"length {max(0, 1 + ss * (i - 1))} holds", pads)
        lengths.append(max(0, padded - e + 1))
    canon_out = (x_canon[0], w_canon[1], *lengths)
    out_shape = tuple(canon_out[a] for a in np.argsort(out_perm))
    spec = None
    if min(x_canon[2:]) > 0 and min(lengths) > 0:
        rule = PadRule(kind="explicit", output_padding=(0,) * nd,
                       pads_begin=tuple(e - 1 - lo for e, (lo, _) in zip(exts, pads)),
                       pads_end=tuple(e - 1 - hi for e, (_, hi) in zip(exts, pads)))
        attrs = common_attrs(CONV, np.broadcast_to(np.float32(0), w_canon), None,
                             strides=s, dilations=d, group=1, names=("rhs", "bias"))
        fmt = "NXC" if lhs_perm == out_perm == (0, nd + 1, *range(1, nd + 1)) else "NCX"
        spec = make_spec(CONV, attrs, rule, fmt, "lhs")
    flip = () if transpose_kernel else tuple(range(nd))
    return _Call(lhs_perm, w_axes, out_perm, flip, spec, out_shape)


def _canonical(x_shape, w_shape, bias_shape=None, strides=None, padding=None,
               rhs_dilation=None, dimension_numbers=None, transpose_kernel=False,
               precision=None, preferred_element_type=None, use_consistent_padding=False):
    """The ``Canonical`` of `conv_transpose` on arrays of these shapes (jax has no bias:
    ``bias_shape`` must be None)."""
    if bias_shape is not None:
        raise fail(CONV, "bias", "does not exist in jax.lax.conv_transpose", bias_shape)
    call = _parse(tuple(x_shape), tuple(w_shape), strides, padding, rhs_dilation,
                  dimension_numbers, transpose_kernel, use_consistent_padding)
    if call.spec is None:
        raise fail(CONV, "lhs", "gives an empty result, which a Canonical cannot describe",
                   tuple(x_shape))
    spec = replace(call.spec, data_format="NCX")
    x_ncx = tuple(x_shape[a] for a in call.lhs_perm)
    return Canonical(CONV, resolve(spec, x_ncx), call.lhs_perm, call.w_axes,
                     tuple(int(a) for a in np.argsort(call.out_perm)), w_flip=call.w_flip)


_WIDTH = {"bfloat16": 1, "float16": 1, "float32": 2, "float64": 3}


def _preferred(preferred, dt):
    """``preferred_element_type``: a floating dtype not narrower than the operands'
    (conv_general_dilated: "must not be narrower than the original type")."""
    try:
        want = np.dtype(preferred)
    except TypeError:
        raise bad_type(CONV, "preferred_element_type", f"must be one of {TYPES}",
                       preferred) from None
    name, have = dtype_name(want), dtype_name(dt)
    if name not in TYPES:
        raise bad_type(CONV, "preferred_element_type", f"must be one of {TYPES}", name)
    if name != have and _WIDTH[name] <= _WIDTH[have]:
        raise bad_type(CONV, "preferred_element_type", f"must not be narrower than the "
                       f"operands' {have}", name)
    return want


def _rank2(xa, wa, strides, padding, rhs_dilation, dimension_numbers, transpose_kernel,
           use_consistent_padding, method, workers):
    """A call without spatial axes (jax's ('NC', 'IO', 'NC')): validated as jax does, run as
    a 1-D call of length 1 with a kernel of 1."""
    lhs_perm, rhs_perm, out_perm = _permutations(dimension_numbers, 2)
    _ints("strides", strides, 0, "positive")
    if rhs_dilation is not None:
        _ints("rhs_dilation", rhs_dilation, 0, "positive")
    _pads(padding, (), (), bool(use_consistent_padding))
    y = conv_transpose(xa.transpose(lhs_perm)[..., None], wa.transpose(rhs_perm)[..., None],
                       (1,), "VALID", dimension_numbers=("NCH", "OIH", "NCH"),
                       transpose_kernel=transpose_kernel, method=method, workers=workers)
    return np.ascontiguousarray(y[..., 0].transpose(np.argsort(out_perm)))


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False, *, method="auto", workers=None):
    """jax.lax.conv_transpose on NumPy arrays.

    Parameters
    ----------
    lhs : ndarray of rank n + 2 (n = 0, 1, 2, 3; n = 0 is a matrix product)
        Input, in the layout ``dimension_numbers[0]`` names (default channels-last:
        "NHC", "NHWC", "NHWDC").
    rhs : ndarray of rank n + 2
        Kernel, in the layout ``dimension_numbers[1]`` names (default "HIO", "HWIO",
        "HWDIO"): I is the input's features, O the output's (swapped with
        ``transpose_kernel=True``). Applied as a correlation over the stride-dilated input,
        i.e. spatially flipped with respect to torch / ONNX weights.
    strides : sequence of n int
        Positive; the dilation of the input ("fractional stride").
    padding : "SAME", "VALID" or sequence of n (low, high) int pairs
        "SAME": output length I*s; "VALID": (I-1)*s + max(E, s) with E = (K-1)*d + 1. Pairs
        pad (negative: crop) the stride-dilated input, so L = (I-1)*s + 1 + low + high - E
        + 1. Any other string is read, as jax reads it, as a forward-convolution padding of
        the undilated input (all strides 1 only): "same" is not "SAME".
    rhs_dilation : sequence of n int, optional
        Positive kernel dilation.
    dimension_numbers : tuple of 3 str or ConvDimensionNumbers, optional
        E.g. ("NCHW", "OIHW", "NCHW"). Spatial axes pair up in the order the kernel spec
        names them; strides, padding and rhs_dilation follow that order.
    transpose_kernel : bool, default False
        Flip the kernel spatially and swap its I and O axes (gradient-of-conv / Keras
        ``Conv2DTranspose`` semantics).
    precision : optional
        Accepted and ignored: convt always computes at the full precision of float32
        (float64 for float64 operands).
    preferred_element_type : dtype, optional
        Result dtype, not narrower than the operands' (bfloat16 to float32, float32 to
        float64): the operands are widened and the call computes in it, as jax does.
    use_consistent_padding : bool, default False
        Pairs are the forward convolution's padding (per axis (pb, pe) cropped from the
        full output, as torch's ``padding``); strings as without it.
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.

    Returns
    -------
    ndarray in the layout ``dimension_numbers[2]`` names, the dtype of ``lhs`` (or
    ``preferred_element_type``; float64 as
    jax gives it under ``jax_enable_x64``; 16-bit types accumulate in float32). An empty
    output (a length of 0, zero batch or features) is zeros, as in jax.

    Raises
    ------
    ValueError, TypeError
        Where jax raises: operands of different ranks or dtypes, malformed
        dimension_numbers, feature mismatch, non-positive strides or dilations, pads that
        crop more than the dilated input holds, strings other than 'SAME' / 'VALID' at
        stride > 1; also more than 3 spatial axes (convt's range).

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.ones((1, 8, 8, 4), np.float32)      # NHWC
    >>> w = np.ones((3, 3, 4, 2), np.float32)      # HWIO
    >>> convt.jax.conv_transpose(x, w, (2, 2), "SAME").shape
    (1, 16, 16, 2)
    """
    xa = as_array(CONV, "lhs", lhs, TYPES)
    wa = as_array(CONV, "rhs", rhs, TYPES)
    dt = common_dtype(CONV, {"rhs": wa, "lhs": xa}, TYPES)
    if preferred_element_type is not None:
        dt = _preferred(preferred_element_type, dt)
        xa, wa = xa.astype(dt, copy=False), wa.astype(dt, copy=False)
    if xa.ndim == 2 == wa.ndim:
        return _rank2(xa, wa, strides, padding, rhs_dilation, dimension_numbers,
                      transpose_kernel, use_consistent_padding, method, workers)
    call = _parse(xa.shape, wa.shape, strides, padding, rhs_dilation, dimension_numbers,
                  transpose_kernel, use_consistent_padding)
    if call.spec is None or 0 in call.out_shape or xa.size == 0:
        return np.zeros(call.out_shape, dt)    # nothing reaches the output: jax gives zeros
    w = wa.transpose(call.w_axes)
    if call.w_flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * len(call.w_flip)]
    plan = Plan(call.spec, w, None, dt, allowed=TYPES, method=method, workers=workers,
                one_shot=True)
    if call.spec.data_format == "NXC":
        return plan(xa, None, {"lhs": lhs, "rhs": rhs})
    y = plan(xa.transpose(call.lhs_perm), None, {"lhs": lhs, "rhs": rhs})
    return np.ascontiguousarray(y.transpose(np.argsort(call.out_perm)))
