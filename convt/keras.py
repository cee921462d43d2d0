"""Keras 3 ``keras.ops.conv_transpose`` front end, on NumPy arrays.

Rules from Keras 3.15's source, confirmed by running it (docs/conventions.md):
``keras/src/ops/nn.py`` (``conv_transpose``: ``standardize_data_format``, ``padding.lower()``),
``keras/src/backend/common/backend_utils.py`` (``_get_output_shape_given_tf_padding``, the
output length; ``_convert_conv_transpose_padding_args_from_keras_to_jax``, where the crop
falls; ``check_conv_transpose_input_channels``) and the default TensorFlow backend
(``keras/src/backend/tensorflow/nn.py``: ``tf.nn.conv_transpose`` at that length, whose shape
check decides which output_padding values are accepted).

Kernel ``(*K, out_channels, in_channels)``; ``data_format=None`` is taken as
"channels_last", the value of ``keras.config.image_data_format()`` unless a user changed it
(convt does not read Keras's configuration). No groups, no bias.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ._geometry.canonical import Canonical
from ._geometry.dtypes import ALL_FLOATS
from ._geometry.frontend import common_attrs, intake, make_spec
from ._geometry.geometry import PadRule, resolve
from ._dispatch.plan import Plan
from ._geometry.validate import as_int, bad_type, fail

__all__ = ["conv_transpose"]

CONV = "keras"
TYPES = ALL_FLOATS
DATA_FORMATS = ("channels_last", "channels_first")


def _index(name, v, what):
    # Python and NumPy integers, never bools or floats (torch's argument parser and Keras alike)
    return as_int(CONV, name, v, what)


def _per_axis(name, value, nd, minimum):
    """An int for every axis, or a tuple / list of ``nd`` ints (backend_utils reads
    ``value[i]`` for each spatial axis i)."""
    what = f"must be an int or a tuple of {nd} ints"
    if isinstance(value, (list, tuple)):
        out = tuple(_index(name, v, what) for v in value)
        if len(out) != nd:
            raise fail(CONV, name, f"must be an int or a tuple of {nd} ints, one per "
                       "spatial axis", out)
    else:
        out = (_index(name, value, what),) * nd
    if any(v < minimum for v in out):
        raise fail(CONV, name, "must be positive" if minimum else "must be non-negative", out)
    return out


def _layout(data_format):
    """True for channels_first (config.standardize_data_format: lower-cased, None -> the
    configured image_data_format, "channels_last" by default)."""
    if data_format is None:
        return False
    fmt = str(data_format).lower()
    if fmt not in DATA_FORMATS:
        raise fail(CONV, "data_format", f"must be one of {DATA_FORMATS}", data_format)
    return fmt == "channels_first"


def _axis_rule(ext, s, padding, op):
    """(pads_begin, pads_end) of one axis: the crop at the start and at the end of the full
    length F = (I-1)*s + ext, ext = (K-1)*d + 1 (negative: zeros appended).

    backend_utils._get_output_shape_given_tf_padding: valid L = (I-1)*s + max(ext, s), or F + op
    with output_padding; same L = I*s, or (I-1)*s + ext % 2 + op with output_padding. The crop
    at the start is TensorFlow's SAME padding max(0, F - L)//2 (valid: 0); the jax backend's
    left_pad = min(ceil(pad_len / 2), ext - 1) gives the same start, measured to agree on every
    case of the fixtures. T = F - L does not depend on I."""
    if padding == "valid":
        total = -(max(ext, s) - ext) if op is None else -op
        return 0, total
    total = ext - s if op is None else ext - ext % 2 - op
    begin = max(total, 0) // 2
    return begin, total - begin


def _check_output_padding(op, ext_all, strides, padding):
    """The default TensorFlow backend hands the length to tf.nn.conv_transpose, whose shape
    check accepts valid op < s and same 1 <= ext % 2 + op <= s (Keras's docstring: "lower
    than the stride"); the jax and torch backends compute more (docs/conventions.md)."""
    if op is None:
        return
    for a, (o, ext, s) in enumerate(zip(op, ext_all, strides)):
        if padding == "valid" and o >= s:
            raise fail(CONV, "output_padding", f"must be lower than the stride {s} on spatial "
                       f"axis {a} (padding 'valid')", op)
        if padding == "same" and not 1 <= ext % 2 + o <= s:
            raise fail(CONV, "output_padding", f"must be in [{1 - ext % 2}, {s - ext % 2}] "
                       f"on spatial axis {a} (padding 'same', stride {s}, dilated kernel "
                       f"{ext}: the output length (I-1)*s + {ext % 2} + output_padding must "
                       "be in ((I-1)*s, I*s])", op)


def _spec(x_shape, w_shape, strides, padding, output_padding, data_format, dilation_rate):
    """(OpSpec, channels-first) of one call, validated as Keras validates it; the public
    function and `_canonical` share it."""
    first = _layout(data_format)
    if not isinstance(padding, str):
        raise bad_type(CONV, "padding", "must be a string, 'valid' or 'same'", padding)
    padding = padding.lower()
    if padding not in ("valid", "same"):
        raise fail(CONV, "padding", "must be one of 'valid', 'same'", padding)
    if len(x_shape) not in (3, 4, 5):
        raise fail(CONV, "inputs", "must have rank 3, 4 or 5 (1-3 spatial axes)",
                   tuple(x_shape))
    nd = len(x_shape) - 2
    if len(w_shape) != nd + 2:
        raise fail(CONV, "kernel", f"must have the inputs' rank {nd + 2}: (*kernel, "
                   "out_channels, in_channels)", tuple(w_shape))
    c_in = x_shape[1] if first else x_shape[-1]
    if c_in != w_shape[-1]:
        raise fail(CONV, "inputs", f"must have the kernel's {w_shape[-1]} input channels "
                   f"(its last axis; data_format {DATA_FORMATS[first]!r})", tuple(x_shape))
    strides = _per_axis("strides", strides, nd, 1)
    dilations = _per_axis("dilation_rate", dilation_rate, nd, 1)
    op = None if output_padding is None else _per_axis("output_padding", output_padding, nd, 0)
    kernel = tuple(w_shape[:nd])
    if any(k < 1 for k in kernel):
        raise fail(CONV, "kernel", "must have kernel lengths >= 1", tuple(w_shape))
    ext = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))
    _check_output_padding(op, ext, strides, padding)
    in_shape = tuple(x_shape[2:] if first else x_shape[1:-1])
    if any(i < 1 for i in in_shape):
        raise fail(CONV, "inputs", "must have spatial lengths >= 1", tuple(x_shape))
    pads = [_axis_rule(e, s, padding, None if op is None else op[a])
            for a, (e, s) in enumerate(zip(ext, strides))]
    # every accepted length is >= 1: valid (I-1)*s + max(E, s) or F + op, same I*s or
    # (I-1)*s + E % 2 + op with E % 2 + op >= 1 (_check_output_padding)
    weight = np.broadcast_to(np.float32(0), tuple(w_shape))      # shapes only
    attrs = common_attrs(CONV, weight.transpose(nd + 1, nd, *range(nd)), None,
                         strides=strides, dilations=dilations, group=1,
                         names=("kernel", "bias"))
    rule = PadRule(kind="explicit", output_padding=(0,) * nd,
                   pads_begin=tuple(b for b, _ in pads), pads_end=tuple(t for _, t in pads))
    return make_spec(CONV, attrs, rule, "NCX" if first else "NXC", "inputs"), first


def _canonical(x_shape, w_shape, bias_shape=None, strides=1, padding="valid",
               output_padding=None, data_format=None, dilation_rate=1):
    """The ``Canonical`` of `conv_transpose` on arrays of these shapes, every check as the
    public function makes it."""
    if bias_shape is not None:
        raise fail(CONV, "bias", "does not exist: keras.ops.conv_transpose takes no bias",
                   tuple(bias_shape))
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    spec, first = _spec(x_shape, w_shape, strides, padding, output_padding, data_format,
                        dilation_rate)
    nd = spec.ndim
    ident = tuple(range(nd + 2))
    w_axes = (nd + 1, nd, *range(nd))
    if first:
        xs, ys = ident, ident
    else:
        xs, ys = (0, nd + 1, *range(1, nd + 1)), (0, *range(2, nd + 2), 1)
    ncx = tuple(int(x_shape[a]) for a in xs)
    return Canonical(CONV, resolve(replace(spec, data_format="NCX"), ncx), xs, w_axes, ys)


def conv_transpose(inputs, kernel, strides=1, padding="valid", output_padding=None,
                   data_format=None, dilation_rate=1, *, method="auto", workers=None,
                   out=None):
    """keras.ops.conv_transpose (Keras 3) on NumPy arrays.

    Parameters
    ----------
    inputs : ndarray of shape (N, *spatial, C_in) or (N, C_in, *spatial)
        1 to 3 spatial axes; float64, float32, float16 or bfloat16.
    kernel : ndarray of shape (*kernel_size, C_out, C_in)
        The inputs' dtype.
    strides : int or tuple of int, default 1
        Positive; an int applies to every spatial axis.
    padding : {"valid", "same"}, default "valid"
        Any case. With ``output_padding=None`` the output length is (I-1)*s + max(E, s)
        ("valid") or I*s ("same"), E = (K-1)*d + 1 the dilated kernel; with it, F + op
        ("valid", F = (I-1)*s + E) or (I-1)*s + E % 2 + op ("same"). The crop at the start is
        0 ("valid") or max(0, F - L)//2 ("same").
    output_padding : int or tuple of int, optional
        Non-negative. "valid": below the stride; "same": E % 2 + op in [1, s] (what the
        default TensorFlow backend accepts).
    data_format : {"channels_last", "channels_first"}, optional
        Any case. None means "channels_last" (Keras's default image_data_format; convt does
        not read Keras's configuration).
    dilation_rate : int or tuple of int, default 1
        Positive.
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with the inputs: the
        result is written into it and it is returned.

    Returns
    -------
    ndarray of shape (N, *out_spatial, C_out) or (N, C_out, *out_spatial), the inputs' dtype.

    Raises
    ------
    ValueError, TypeError
        Where Keras (with its default TensorFlow backend) raises: an unknown padding or
        data_format, a kernel whose input channels differ from the inputs', strides /
        dilation_rate / output_padding of the wrong length or range; non-floating or mixed
        dtypes (the message names ``keras`` and the parameter).

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.ones((1, 4, 4, 3))
    >>> w = np.ones((3, 3, 2, 3))
    >>> convt.keras.conv_transpose(x, w, strides=2, padding="same").shape
    (1, 8, 8, 2)
    >>> convt.keras.conv_transpose(x, w, strides=2, padding="same", output_padding=1).shape
    (1, 8, 8, 2)
    >>> convt.keras.conv_transpose(x, w, strides=2, padding="same", output_padding=0).shape
    (1, 7, 7, 2)
    """
    xa, w_iox, _, dt, _, _ = intake(CONV, inputs, kernel, None, allowed=TYPES,
                                    names=("inputs", "kernel", "bias"), filter_format="XOI")
    spec, _ = _spec(xa.shape, np.shape(kernel), strides, padding, output_padding, data_format,
                    dilation_rate)
    plan = Plan(spec, w_iox, None, dt, allowed=TYPES, method=method, workers=workers,
                one_shot=True)
    return plan(xa, out, {"inputs": inputs, "kernel": kernel})
