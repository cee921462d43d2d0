"""OpenVINO ``ConvolutionBackpropData-1`` and ``GroupConvolutionBackpropData-1`` front end.

Spec references are to ``shared/specs/003_64c14f4b7c18a5ff.txt``. ``output_shape`` is the op's
third *input* (a 1-D integer tensor of spatial dimensions). Where the OpenVINO CPU plugin departs
from this text (CONVENTIONS.md: explicit / valid with output_shape), convt follows the text.
"""
from __future__ import annotations

import numpy as np

from ._geometry.canonical import dummy, from_spec
from ._geometry.dtypes import ALL_FLOATS, as_array
from ._geometry.frontend import FILTER_FORMATS, common_attrs, explicit_pads, intake, make_spec, require
from ._geometry.geometry import TOTAL_FROM_OUTPUT_SHAPE, PadRule
from ._dispatch.plan import Plan
from ._geometry.validate import bad_type, choice, fail, int_tuple

__all__ = ["convolution_backprop_data", "group_convolution_backprop_data"]

AUTO_PADS = ("explicit", "same_upper", "same_lower", "valid")


def _output_shape(conv, output_shape, nd):
    arr = np.asarray(output_shape)
    if arr.dtype.kind not in "iu" and arr.size:   # (an empty one is a length error below)
        # Python ints past int64 make an object array: say so rather than "integer"
        big = arr.dtype == object and all(isinstance(v, int) and not isinstance(v, bool)
                                          for v in arr.reshape(-1))
        raise bad_type(conv, "output_shape", "must be a 1-D integer tensor"
                       + (" whose values fit int64" if big else ""), output_shape)
    return int_tuple(conv, "output_shape", arr.reshape(-1) if arr.ndim == 0 else arr, nd,
                     minimum=1, what=f"integers, spatial dimensions only ({nd})")


def openvino_rule(conv, nd, *, auto_pad, pads_begin, pads_end, output_padding, output_shape):
    """The ``PadRule`` of ConvolutionBackpropData-1 (003)."""
    auto_pad = choice(conv, "auto_pad", auto_pad, AUTO_PADS)
    # 003 line 91: output_padding "non-negative integer values", default all zeros; no upper
    # bound (the CPU plugin accepts op >= stride too, CONVENTIONS.md).
    op = ((0,) * nd if output_padding is None
          else int_tuple(conv, "output_padding", output_padding, nd, minimum=0))
    if output_shape is not None:
        # 003 lines 53-65: total = s*(X-1) + E - output_shape + op; auto_pad != same_upper ->
        # pads_begin = total // 2, else pads_end = total // 2 and pads_begin the rest. "If
        # output_shape is specified, pads_begin and pads_end are ignored" (003 line 49).
        os_ = _output_shape(conv, output_shape, nd)
        return PadRule(kind="total", output_padding=op, total=TOTAL_FROM_OUTPUT_SHAPE,
                       output_shape=os_, begin="ceil" if auto_pad == "same_upper" else "floor")
    if auto_pad != "explicit":
        # 003 lines 29-35: "if auto_pads != None: pads_begin[i] = 0, pads_end[i] = 0".
        return PadRule(kind="explicit", output_padding=op, pads_begin=(0,) * nd,
                       pads_end=(0,) * nd)
    # 003 lines 71-73: pads_begin / pads_end, "non-negative integers", required here.
    return explicit_pads(conv, nd, op, pads_begin, pads_end,
                         "auto_pad='explicit' and no output_shape")


def _ungroup(conv, filt, filter_format):
    """Grouped filter -> (IOX filter, G). IOX: [G, C_in/G, C_out/G, K...] (the spec's layout);
    XOI: [G, K..., C_out/G, C_in/G]. Input channels are group-major, so IOX is a reshape."""
    f = as_array(conv, "filter", filt, ALL_FLOATS)
    fmt = choice(conv, "filter_format", filter_format, FILTER_FORMATS)
    if f.ndim not in (4, 5, 6):
        raise fail(conv, "filter", "must have rank 4, 5 or 6: [G, C_in/G, C_out/G, K...]",
                   f.shape)
    nd = f.ndim - 3
    if fmt == "XOI":
        f = f.transpose(0, nd + 2, nd + 1, *range(1, nd + 1))
    return f.reshape(f.shape[0] * f.shape[1], *f.shape[2:]), int(f.shape[0])


def _spec(data, filter, output_shape, *, grouped, strides, pads_begin, pads_end, dilations,
          auto_pad, output_padding, data_format, filter_format):
    """(data, IOX filter, dtype, OpSpec, filter_format) of either public function's arguments,
    validated (``grouped``: the GroupConvolutionBackpropData filter layout)."""
    given = filter   # (its shape for a rank error, once intake has read it as an array)
    if grouped:
        conv = "openvino (grouped)"
        filter, groups = _ungroup(conv, filter, filter_format)
        filter_format = choice(conv, "filter_format", filter_format, FILTER_FORMATS)
        iox = "IOX"
    else:
        conv, groups, iox = "openvino", 1, filter_format
    xa, w_iox, _, dt, data_format, fmt = intake(
        conv, data, filter, None, allowed=ALL_FLOATS, names=("data", "filter", "bias"),
        data_format=data_format, filter_format=iox)
    if xa is not None and xa.ndim != w_iox.ndim:   # before the attributes it sizes
        raise fail(conv, "filter", f"must have rank {xa.ndim + grouped} for data of rank "
                   f"{xa.ndim}: one kernel axis per spatial axis of the data", np.shape(given))
    require(conv, strides=strides, dilations=dilations)  # 003: "Required: yes"
    attrs = common_attrs(conv, w_iox, None, strides=strides, dilations=dilations,
                         group=groups, group_name="filter groups", names=("filter", "bias"))
    rule = openvino_rule(conv, w_iox.ndim - 2, auto_pad=auto_pad, pads_begin=pads_begin,
                         pads_end=pads_end, output_padding=output_padding,
                         output_shape=output_shape)
    spec = make_spec(conv, attrs, rule, data_format, "data")
    return xa, w_iox, dt, spec, filter_format if grouped else fmt


def _prepare(data, filter, output_shape, *, grouped, method, workers, one_shot=False,
             **attrs):
    """(validated data, Plan) of either public function's arguments (``grouped``: the
    GroupConvolutionBackpropData filter layout; ``one_shot``: a plan for this call only,
    convt._api._OneShot); convt.dask plans with it too."""
    xa, w_iox, dt, spec, _ = _spec(data, filter, output_shape, grouped=grouped, **attrs)
    return xa, Plan(spec, w_iox, None, dt, allowed=ALL_FLOATS, method=method, workers=workers,
                    one_shot=one_shot)


def _canonical(x_shape, w_shape, bias_shape=None, output_shape=None, *, grouped=False,
               strides=None, pads_begin=None, pads_end=None, dilations=None,
               auto_pad="explicit", output_padding=None, data_format="NCX",
               filter_format="IOX"):
    """The `Canonical` of ``convolution_backprop_data`` (``grouped=True``:
    ``group_convolution_backprop_data``) on arrays of these shapes, validated as those
    functions validate them (convt.translate's source side). The op has no bias input."""
    conv = "openvino (grouped)" if grouped else "openvino"
    if bias_shape is not None:
        raise fail(conv, "bias", "does not exist: ConvolutionBackpropData has no bias input",
                   bias_shape)
    xa, _, _, spec, fmt = _spec(
        dummy(conv, "data", x_shape), dummy(conv, "filter", w_shape), output_shape,
        grouped=grouped, strides=strides, pads_begin=pads_begin, pads_end=pads_end,
        dilations=dilations, auto_pad=auto_pad, output_padding=output_padding,
        data_format=data_format, filter_format=filter_format)
    return from_spec(spec, xa.shape, fmt, False, w_grouped=grouped)


_PARAMS_DOC = """
    output_shape : 1-D integer array_like, optional
        The op's third input: the spatial output shape. When given, pads_begin / pads_end are
        ignored and auto_pad decides how the odd element of the total padding is placed.
    strides, dilations : sequence of int
        Required, positive, one per spatial axis.
    pads_begin, pads_end : sequence of int, optional
        Non-negative; required with auto_pad="explicit" and no output_shape, else ignored.
    auto_pad : {"explicit", "same_upper", "same_lower", "valid"}, default "explicit"
        Without output_shape, every value but "explicit" means no padding at all (003).
    output_padding : sequence of int, optional
        Non-negative extra elements at the end of each axis (no upper bound in the spec).
    data_format : {"NCX", "NXC"}, default "NCX"
        Layout of data and output: (N, C, *spatial) or (N, *spatial, C) (an extension).
    filter_format : {"IOX", "XOI"}, default "IOX"
        Filter layout: the spec's (input channels first) or kernel-first (an extension).
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with the inputs: the
        result is written into it and it is returned.
"""


def convolution_backprop_data(data, filter, output_shape=None, *, strides=None,
                              pads_begin=None, pads_end=None, dilations=None,
                              auto_pad="explicit", output_padding=None, data_format="NCX",
                              filter_format="IOX", method="auto", workers=None, out=None):
    """OpenVINO ConvolutionBackpropData-1.

    Parameters
    ----------
    data : ndarray of shape (N, C_IN, *spatial)
    filter : ndarray of shape (C_IN, C_OUT, *kernel)
        ``filter_format="XOI"``: shape (*kernel, C_OUT, C_IN).
    {params}

    Returns
    -------
    ndarray of shape (N, C_OUT, *out_spatial), the dtype of ``data``.

    Raises
    ------
    ValueError, TypeError
        Attributes outside the spec's ranges, inconsistent tensors, non-floating dtypes.

    Examples
    --------
    The spec's example layer (003): 20 -> 10 channels, 224 -> 447.

    >>> import numpy as np, convt
    >>> data = np.zeros((1, 20, 224, 224), np.float32)
    >>> filt = np.zeros((20, 10, 3, 3), np.float32)
    >>> y = convt.openvino.convolution_backprop_data(
    ...     data, filt, strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1])
    >>> y.shape
    (1, 10, 447, 447)
    """
    xa, plan = _prepare(data, filter, output_shape, grouped=False, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad, output_padding=output_padding,
                        data_format=data_format, filter_format=filter_format, method=method,
                        workers=workers, one_shot=True)
    return plan(xa, out, {"data": data, "filter": filter, "output_shape": output_shape})


def group_convolution_backprop_data(data, filter, output_shape=None, *, strides=None,
                                    pads_begin=None, pads_end=None, dilations=None,
                                    auto_pad="explicit", output_padding=None,
                                    data_format="NCX", filter_format="IOX", method="auto",
                                    workers=None, out=None):
    """OpenVINO GroupConvolutionBackpropData-1: the grouped form of the same rules.

    Parameters
    ----------
    data : ndarray of shape (N, C_IN, *spatial)
    filter : ndarray of shape (G, C_IN / G, C_OUT / G, *kernel)
        ``filter_format="XOI"``: shape (G, *kernel, C_OUT / G, C_IN / G).
    {params}

    Returns
    -------
    ndarray of shape (N, C_OUT, *out_spatial), the dtype of ``data``.

    Raises
    ------
    ValueError, TypeError
        As for `convolution_backprop_data`; also a filter whose rank is not 4, 5 or 6, or
        whose G * (C_IN / G) input channels do not match ``data``.

    Examples
    --------
    Depthwise 2x upsampling of 4 channels:

    >>> import numpy as np, convt
    >>> data = np.ones((1, 4, 8, 8), np.float32)
    >>> filt = np.ones((4, 1, 1, 4, 4), np.float32)
    >>> convt.openvino.group_convolution_backprop_data(
    ...     data, filt, strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1],
    ...     dilations=[1, 1]).shape
    (1, 4, 16, 16)
    """
    xa, plan = _prepare(data, filter, output_shape, grouped=True, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad, output_padding=output_padding,
                        data_format=data_format, filter_format=filter_format, method=method,
                        workers=workers, one_shot=True)
    return plan(xa, out, {"data": data, "filter": filter, "output_shape": output_shape})


for _f in (convolution_backprop_data, group_convolution_backprop_data):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.format(params=_PARAMS_DOC.strip())
