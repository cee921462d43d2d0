"""TensorFlow ``tf.nn.conv_transpose`` / ``conv1d_transpose`` / ``conv2d_transpose`` /
``conv3d_transpose`` front end, on NumPy arrays.

Rules from TensorFlow 2.21's source, confirmed by running it on CPU (docs/conventions.md):
``tensorflow/python/ops/nn_ops.py`` (the Python wrappers: ``_get_sequence`` for strides and
dilations, ``convert_padding`` for explicit pads, the rank dispatch of ``conv_transpose``),
``tensorflow/core/kernels/conv_grad_shape_utils.cc`` (``ConvBackpropComputeDimensionsV2``:
batch, depth and per-axis length checks) and ``tensorflow/core/framework/kernel_shape_util.cc``
(``GetWindowedOutputSizeVerbose``: the forward convolution's output length and padding). A
transposed convolution here is the gradient of a forward convolution whose *input* has the
full ``output_shape``: every length L that the forward convolution maps to the input length I
is accepted, and the crop is where that forward convolution pads.

Filters are ``[*K, out_channels, in_channels]``; data channels-last unless ``data_format``
starts with "NC". No groups (TensorFlow's CPU kernels refuse them; the output depth must equal
the filters' out_channels). Where TensorFlow's CPU kernels refuse what the op defines
(dilations on float64 / float16, channels-first on its Eigen path), convt computes the op.
"""
from __future__ import annotations

from collections.abc import Sized
from dataclasses import replace

import numpy as np

from ._geometry.canonical import Canonical
from ._geometry.dtypes import ALL_FLOATS
from ._geometry.frontend import common_attrs, intake, make_spec
from ._geometry.geometry import TOTAL_FROM_OUTPUT_SHAPE, PadRule, resolve
from ._dispatch.plan import Plan
from ._geometry.validate import bad_type, fail, int_tuple

__all__ = ["conv_transpose", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose"]

CONV = "tensorflow"
TYPES = ALL_FLOATS   # the op's T: half, bfloat16, float, double (and int32, not here)
# data_format per spatial rank: (channels last, channels first); None means the first
FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _data_format(nd, data_format):
    """True for channels-first. conv1d_transpose raises its own ValueError; 2-D / 3-D pass the
    string to the op, whose attr check is case-sensitive (gen_nn_ops)."""
    if data_format is None:
        return False
    if not isinstance(data_format, str):
        raise bad_type(CONV, "data_format", f"must be one of {FORMATS[nd]}", data_format)
    if data_format not in FORMATS[nd]:
        raise fail(CONV, "data_format", f"must be one of {FORMATS[nd]} for {nd} spatial "
                   "axes", data_format)
    return data_format == FORMATS[nd][1]


def _sequence(name, value, nd, first):
    """Spatial values of strides / dilations, as nn_ops._get_sequence reads them: None is all
    ones; an int, or a list of 1, nd or nd + 2 values (batch and channel entries, in the data
    format's order, must be 1: the kernels refuse anything else)."""
    if value is None:
        return (1,) * nd
    seq = [value] if not isinstance(value, Sized) or isinstance(value, (str, bytes)) else value
    if isinstance(seq, np.ndarray):
        seq = seq.reshape(-1)
    n = len(seq)
    if n not in (1, nd, nd + 2):
        raise fail(CONV, name, f"must be an int or a list of length 1, {nd} or {nd + 2}",
                   value)
    full = int_tuple(CONV, name, list(seq), n, minimum=1,
                     what=f"integers, 1, {nd} or {nd + 2} of them")
    if n == nd + 2:
        outer = (full[0], full[1]) if first else (full[0], full[-1])
        if outer != (1, 1):
            raise fail(CONV, name, "must be 1 in the batch and channel dimensions", full)
        full = full[2:] if first else full[1:-1]
    return full * nd if n == 1 else full


def _padding(nd, padding, first):
    """("SAME" | "VALID" | "EXPLICIT", spatial pads_begin or None). Explicit [before, after]
    pairs, one per dimension of the data (batch and channel pairs zero), only for 2-D: conv1d /
    conv3d_transpose pass the list to an op whose padding is a string (nn_ops.convert_padding).
    """
    if isinstance(padding, str):
        if padding == "EXPLICIT":
            raise fail(CONV, "padding", "'EXPLICIT' is not a valid value: give explicit "
                       "padding as a list of [before, after] pairs", padding)
        if padding not in ("SAME", "VALID"):
            raise fail(CONV, "padding", "must be 'SAME' or 'VALID' (upper case) or a list of "
                       "[before, after] pairs", padding)
        return padding, None
    if not isinstance(padding, (list, tuple)):
        raise bad_type(CONV, "padding", "must be 'SAME', 'VALID' or a list of [before, "
                       "after] pairs", padding)
    if nd != 2:
        raise bad_type(CONV, "padding", f"must be 'SAME' or 'VALID' for {nd} spatial axes "
                       "(explicit pairs only for 2 spatial axes)", padding)
    for pair in padding:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise fail(CONV, "padding", "must be a list of [before, after] pairs", padding)
    if len(padding) != nd + 2:
        raise fail(CONV, "padding", f"must have {nd + 2} [before, after] pairs (batch, "
                   "channel and spatial dimensions)", padding)
    flat = int_tuple(CONV, "padding", [v for pair in padding for v in pair], 2 * nd + 4,
                     minimum=0, what=f"integer pairs, {nd + 2} of them")
    pairs = [flat[2 * i:2 * i + 2] for i in range(nd + 2)]
    outer, spatial = ((pairs[:2], pairs[2:]) if first else ([pairs[0], pairs[-1]], pairs[1:-1]))
    if any(v for pair in outer for v in pair):
        raise fail(CONV, "padding", "must be zero in the batch and channel dimensions", padding)
    return "EXPLICIT", tuple(p[0] for p in spatial), tuple(p[1] for p in spatial)


def _output_shape(nd, output_shape, x_shape, first, w_shape):
    """The full output shape (N, *spatial, C) / (N, C, *spatial). conv2d_transpose also takes
    the spatial shape alone (conv_grad_shape_utils.cc Conv2DBackpropComputeInputShape: batch
    from the input, depth from the filters)."""
    if not isinstance(output_shape, (Sized, np.ndarray)) or isinstance(output_shape, str):
        raise bad_type(CONV, "output_shape", "must be a 1-D sequence of integers",
                       output_shape)
    arr = np.asarray(output_shape)
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0 or arr.dtype == object):
        raise bad_type(CONV, "output_shape", "must be a 1-D sequence of integers",
                       output_shape)
    n = len(arr)
    if nd == 2 and n == 2:
        sp = int_tuple(CONV, "output_shape", list(arr), 2, minimum=0)
        return sp, (x_shape[0], int(w_shape[-2]), *sp) if first else (x_shape[0], *sp,
                                                                     int(w_shape[-2]))
    full = int_tuple(CONV, "output_shape", list(arr), nd + 2, minimum=0,
                     what=f"integers, the full output shape ({nd + 2})"
                     + (" or its 2 spatial lengths" if nd == 2 else ""))
    return (full[2:] if first else full[1:-1]), full


def _check_shapes(nd, x_shape, w_shape, full, first):
    """ConvBackpropComputeDimensionsV2: ranks, batch, depths (no groups)."""
    if len(w_shape) != nd + 2:
        raise fail(CONV, "filters", f"must have rank {nd + 2}, [*kernel, out_channels, "
                   "in_channels]", tuple(w_shape))
    if len(x_shape) != nd + 2:
        raise fail(CONV, "input", f"must have rank {nd + 2} to match the output_shape",
                   tuple(x_shape))
    cx = 1 if first else nd + 1
    if x_shape[cx] != w_shape[-1]:
        raise fail(CONV, "input", f"must have {w_shape[-1]} channels (the filters' "
                   "in_channels, the last axis)", tuple(x_shape))
    if full[0] != x_shape[0]:
        raise fail(CONV, "output_shape", f"must have the input's batch size {x_shape[0]}",
                   full)
    if full[cx] != w_shape[-2]:
        raise fail(CONV, "output_shape", f"must have {w_shape[-2]} channels (the filters' "
                   "out_channels; no groups)", full)


def _check_lengths(in_shape, lengths, kernel, strides, dilations, mode, pads):
    """GetWindowedOutputSizeVerbose applied to each output length L must give back the input
    length I: VALID F <= L <= F + s - 1; EXPLICIT the same for L + before + after; SAME
    (I-1)*s < L <= I*s; F = (I-1)*s + (K-1)*d + 1."""
    for a, (i, ln, k, s, d) in enumerate(zip(in_shape, lengths, kernel, strides, dilations)):
        ext = (k - 1) * d + 1
        if mode == "SAME":
            got = -(-ln // s)
        else:
            padded = ln + (pads[0][a] + pads[1][a] if mode == "EXPLICIT" else 0)
            # C's truncating division: a negative numerator gives 0 or a negative length
            got = int((padded - ext + s) / s)
        if got != i:
            lo, hi = ((i - 1) * s + 1, i * s) if mode == "SAME" else ((i - 1) * s + ext,
                                                                    i * s + ext - 1)
            where = " + the explicit padding" if mode == "EXPLICIT" else ""
            raise fail(CONV, "output_shape", f"does not fit the input length {i} on spatial "
                       f"axis {a}: with padding {mode!r} the output length{where} must be in "
                       f"[{lo}, {hi}] (stride {s}, dilated kernel {ext})", tuple(lengths))


def _spec(nd, x_shape, w_shape, output_shape, strides, padding, data_format, dilations):
    """(OpSpec, channels-first, full output shape) of one call, validated as TensorFlow
    validates it; the public functions and `_canonical` share it."""
    first = _data_format(nd, data_format)
    strides = _sequence("strides", strides, nd, first)
    dilations = _sequence("dilations", dilations, nd, first)
    mode, *pads = _padding(nd, padding, first)
    lengths, full = _output_shape(nd, output_shape, x_shape, first, w_shape)
    _check_shapes(nd, x_shape, w_shape, full, first)
    in_shape = tuple(x_shape[2:]) if first else tuple(x_shape[1:-1])
    if any(i < 1 for i in in_shape):
        raise fail(CONV, "input", "must have spatial lengths >= 1", tuple(x_shape))
    if any(k < 1 for k in w_shape[:nd]):
        raise fail(CONV, "filters", "must have kernel lengths >= 1", tuple(w_shape))
    _check_lengths(in_shape, lengths, w_shape[:nd], strides, dilations, mode, pads)
    weight = np.broadcast_to(np.float32(0), tuple(w_shape))      # shapes only
    attrs = common_attrs(CONV, weight.transpose(nd + 1, nd, *range(nd)), None,
                         strides=strides, dilations=dilations, group=1,
                         names=("filters", "bias"))
    # the forward convolution's padding before each axis is the crop at the output's start:
    # SAME max(0, F - L)//2, VALID 0, EXPLICIT as given; the rest of F - L goes at the end
    rule = PadRule(kind="total", output_padding=(0,) * nd, total=TOTAL_FROM_OUTPUT_SHAPE,
                   output_shape=lengths,
                   begin={"SAME": "floor_clamped", "VALID": "none"}.get(mode, "given"),
                   pads_begin=pads[0] if mode == "EXPLICIT" else ())
    spec = make_spec(CONV, attrs, rule, "NCX" if first else "NXC", "input")
    return spec, first, full


def _axes(nd, first):
    """(x_axes, w_axes, y_axes) of the Canonical (convt._geometry.canonical)."""
    ident = tuple(range(nd + 2))
    last = (0, nd + 1, *range(1, nd + 1))
    w_axes = (nd + 1, nd, *range(nd))
    return (ident, w_axes, ident) if first else (last, w_axes, (0, *range(2, nd + 2), 1))


def _rank(output_shape):
    """conv_transpose picks the function from len(output_shape) (3, 4 or 5)."""
    if not isinstance(output_shape, (Sized, np.ndarray)) or isinstance(output_shape, str):
        raise fail(CONV, "output_shape", "must be a sized collection (a tensor shape)",
                   output_shape)
    n = len(output_shape) - 2
    if not 1 <= n <= 3:
        raise fail(CONV, "output_shape", "must be of length 3, 4 or 5", output_shape)
    return n


def _canonical(x_shape, w_shape, bias_shape=None, output_shape=None, strides=None,
               padding="SAME", data_format=None, dilations=None, *, function="conv_transpose"):
    """The ``Canonical`` of ``function`` (default ``conv_transpose``, which takes its rank from
    ``len(output_shape)``; or "conv1d_transpose" / "conv2d_transpose" / "conv3d_transpose")
    on arrays of these shapes, every check as the public functions make it."""
    if bias_shape is not None:
        raise fail(CONV, "bias", "does not exist: tf.nn's transposed convolutions take no "
                   "bias", tuple(bias_shape))
    if output_shape is None:
        raise fail(CONV, "output_shape", "is required", output_shape)
    if function not in __all__:
        raise fail(CONV, "function", f"must be one of {tuple(__all__)}", function)
    nd = {"conv1d_transpose": 1, "conv2d_transpose": 2,
          "conv3d_transpose": 3}.get(function) or _rank(output_shape)
    if function == "conv1d_transpose" and data_format is None:
        data_format = "NWC"
    spec, first, _ = _spec(nd, tuple(x_shape), tuple(w_shape), output_shape, strides,
                           padding, data_format, dilations)
    xs, ws, ys = _axes(nd, first)
    # the Canonical's Geometry is channels-first whatever the call's layout
    ncx = tuple(int(x_shape[a]) for a in xs)
    return Canonical(CONV, resolve(replace(spec, data_format="NCX"), ncx), xs, ws, ys)


def _run(nd, input, filters, output_shape, strides, padding, data_format, dilations, method,
         workers, out):
    xa, w_iox, _, dt, _, _ = intake(CONV, input, filters, None, allowed=TYPES,
                                    names=("input", "filters", "bias"), filter_format="XOI")
    spec, _, _ = _spec(nd, xa.shape, np.shape(filters), output_shape, strides, padding,
                       data_format, dilations)
    plan = Plan(spec, w_iox, None, dt, allowed=TYPES, method=method, workers=workers,
                one_shot=True)
    return plan(xa, out, {"input": input, "filters": filters})


_DOC = """{title}

    Parameters
    ----------
    input : ndarray of shape {xshape}
        float64, float32, float16 or bfloat16.
    filters : ndarray of shape [{kshape}, out_channels, in_channels]
        The input's dtype; in_channels must match the input's channels.
    output_shape : sequence of int
        The full output shape{osdoc}: batch equal to the input's, channels equal to
        out_channels (no groups). Per spatial axis, any length L that the forward
        convolution maps back to the input length I is accepted ("SAME": (I-1)*s < L <= I*s;
        "VALID": F <= L <= F + s - 1 with F = (I-1)*s + (K-1)*d + 1; explicit: the same for L
        + before + after). A shorter L moves the crop window.
    strides : int or sequence of int
        1, {nd} or {nd2} values (batch and channel entries 1); None means 1.
    padding : {{"SAME", "VALID"}}{paddoc}, default "SAME"
        Upper case, as TensorFlow's op attribute. "SAME" crops max(0, F - L)//2 at the start
        and the rest at the end; "VALID" crops only at the end (pads it with zeros when
        L > F).
    data_format : {formats}, default {default}
        Channels last, or channels first ("NC...").
    dilations : int or sequence of int, optional
        As ``strides``; default 1. (TensorFlow's CPU kernels compute dilations > 1 only for
        float32 / bfloat16 and refuse them for float64 / float16; convt computes them all.)
    method : {{"auto", "direct", "fft", "reference", "tune"}}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with the inputs: the
        result is written into it and it is returned.

    Returns
    -------
    ndarray of shape ``output_shape``, the input's dtype.

    Raises
    ------
    ValueError, TypeError
        Where TensorFlow raises (the message names ``tensorflow`` and the parameter): an
        output length the forward convolution does not map to the input length, batch or
        channel mismatches (groups included), strides / dilations / padding of the wrong
        length, non-positive, or not 1 in the batch and channel dimensions, negative or
        non-spatial explicit padding, an unknown data_format; non-floating or mixed dtypes.

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.ones({xex})
    >>> w = np.ones({wex})
    >>> convt.tensorflow.{name}(x, w, {osex}, strides=2).shape
    {yex}
    """


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",
                     dilations=None, *, method="auto", workers=None, out=None):
    return _run(1, input, filters, output_shape, strides, padding,
                "NWC" if data_format is None else data_format, dilations, method, workers, out)


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME",
                     data_format="NHWC", dilations=None, *, method="auto", workers=None,
                     out=None):
    return _run(2, input, filters, output_shape, strides, padding, data_format, dilations,
                method, workers, out)


def conv3d_transpose(input, filters, output_shape, strides, padding="SAME",
                     data_format="NDHWC", dilations=None, *, method="auto", workers=None,
                     out=None):
    return _run(3, input, filters, output_shape, strides, padding, data_format, dilations,
                method, workers, out)


def conv_transpose(input, filters, output_shape, strides, padding="SAME", data_format=None,
                   dilations=None, *, method="auto", workers=None, out=None):
    return _run(_rank(output_shape), input, filters, output_shape, strides, padding,
                data_format, dilations, method, workers, out)


# explicit pairs: one per dimension of the data, in its order, batch and channel pairs [0, 0]
_EXPLICIT = " or list of [before, after] pairs"
conv1d_transpose.__doc__ = _DOC.format(
    title="tf.nn.conv1d_transpose on NumPy arrays.", xshape="(N, W, C_in) (NWC) or "
    "(N, C_in, W) (NCW)", kshape="K", osdoc=" (3 values, in the data format's order)",
    nd=1, nd2=3, paddoc="", formats='{"NWC", "NCW"}', default='"NWC" (None: "NWC")',
    xex="(1, 4, 3)", wex="(3, 2, 3)", name="conv1d_transpose", osex="[1, 8, 2]",
    yex="(1, 8, 2)")
conv2d_transpose.__doc__ = _DOC.format(
    title="tf.nn.conv2d_transpose on NumPy arrays.", xshape="(N, H, W, C_in) (NHWC) or "
    "(N, C_in, H, W) (NCHW)", kshape="KH, KW", osdoc=" (4 values, in the data format's "
    "order), or its 2 spatial lengths alone", nd=2, nd2=4,
    paddoc=_EXPLICIT,
    formats='{"NHWC", "NCHW"}', default='"NHWC" (None: "NHWC")', xex="(1, 4, 4, 3)",
    wex="(3, 3, 2, 3)", name="conv2d_transpose", osex="[1, 8, 8, 2]", yex="(1, 8, 8, 2)")
conv3d_transpose.__doc__ = _DOC.format(
    title="tf.nn.conv3d_transpose on NumPy arrays.", xshape="(N, D, H, W, C_in) (NDHWC) or "
    "(N, C_in, D, H, W) (NCDHW)", kshape="KD, KH, KW", osdoc=" (5 values, in the data "
    "format's order)", nd=3, nd2=5, paddoc="", formats='{"NDHWC", "NCDHW"}',
    default='"NDHWC" (None: "NDHWC")', xex="(1, 2, 2, 2, 3)", wex="(3, 3, 3, 2, 3)",
    name="conv3d_transpose", osex="[1, 4, 4, 4, 2]", yex="(1, 4, 4, 4, 2)")
conv_transpose.__doc__ = _DOC.format(
    title="tf.nn.conv_transpose on NumPy arrays: conv1d / 2d / 3d_transpose chosen by "
    "len(output_shape) (3, 4 or 5).", xshape="(N, *spatial, C_in), or (N, C_in, *spatial) "
    "with a data_format starting with \"NC\"", kshape="*K", osdoc=" (3, 4 or 5 values, in the "
    "data format's order)", nd="N", nd2="N + 2", paddoc=_EXPLICIT + " (2-D only)",
    formats="the rank's two formats", default="None (channels last)", xex="(1, 4, 4, 3)",
    wex="(3, 3, 2, 3)", name="conv_transpose", osex="[1, 8, 8, 2]", yex="(1, 8, 8, 2)")
