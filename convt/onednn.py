"""oneDNN Graph ``ConvTranspose-1`` front end.

Spec references are to ``shared/specs/000_086c74e8bb3b7038.txt``. Defaults are the spec's:
data NXC (channels last), filter XOI (*kernel, C_out/G, C_in), auto_pad "none".
"""
from __future__ import annotations

from ._geometry.canonical import dummy, from_spec
from ._geometry.frontend import common_attrs, explicit_pads, intake, make_spec, require
from ._geometry.geometry import TOTAL_FROM_OUTPUT_SHAPE, TOTAL_KERNEL_MINUS_STRIDE, PadRule
from ._dispatch.plan import Plan
from ._geometry.validate import choice, int_tuple

__all__ = ["conv_transpose"]

AUTO_PADS = ("none", "same_upper", "same_lower", "valid")
TYPES = ("float32", "float16", "bfloat16")  # 000 "Types": f32, f16, bf16


def onednn_rule(conv, nd, *, auto_pad, pads_begin, pads_end, output_padding, output_shape):
    """The ``PadRule`` of oneDNN Graph ConvTranspose-1 (000)."""
    auto_pad = choice(conv, "auto_pad", auto_pad, AUTO_PADS)
    # 000 line 109: output_padding "non-negative s64 values", default all zeros.
    op = ((0,) * nd if output_padding is None
          else int_tuple(conv, "output_padding", output_padding, nd, minimum=0))
    os_ = (None if output_shape is None else
           int_tuple(conv, "output_shape", output_shape, nd, minimum=1,
                     what=f"integers, spatial dimensions only ({nd})"))
    if auto_pad in ("same_upper", "same_lower"):
        # 000 lines 36-44: "if (auto_pad == SAME) total_padding = (K-1)*d + 1 - s"; SAME_UPPER
        # pads_begin = total/2 (floor half first), otherwise pads_end = total/2. The spec fixes
        # the length to s*I + op whether or not output_shape is given, so a given
        # output_shape must agree with it (checked by resolve).
        return PadRule(kind="total", output_padding=op, total=TOTAL_KERNEL_MINUS_STRIDE,
                       begin="floor" if auto_pad == "same_upper" else "ceil",
                       expect_output=os_)
    if auto_pad == "valid":
        # 000 lines 45-46: "if (auto_pad == VALID) pads_begin[i] = pads_end[i] = 0".
        return PadRule(kind="explicit", output_padding=op, pads_begin=(0,) * nd,
                       pads_end=(0,) * nd, expect_output=os_)
    if os_ is not None:
        # 000 lines 30-44: with output_shape, pads are ignored; total = s*(I-1) + op + E -
        # output_shape, and (auto_pad none is not SAME_UPPER) pads_end = total/2 first.
        return PadRule(kind="total", output_padding=op, total=TOTAL_FROM_OUTPUT_SHAPE,
                       output_shape=os_, begin="ceil")
    # 000 lines 58-75: pads_begin / pads_end, required, "non-negative s64 values".
    return explicit_pads(conv, nd, op, pads_begin, pads_end, "auto_pad='none' and no output_shape")


def conv_transpose(src, weights, bias=None, *, strides=None, pads_begin=None, pads_end=None,
                   dilations=None, auto_pad="none", output_padding=None, groups=1,
                   data_format="NXC", filter_format="XOI", output_shape=None, method="auto",
                   workers=None, out=None):
    """oneDNN Graph ConvTranspose-1.

    Parameters
    ----------
    src : ndarray of shape (N, *spatial, C_in) (NXC) or (N, C_in, *spatial) (NCX)
    weights : ndarray of shape (*kernel, C_out / groups, C_in) (XOI) or
        (C_in, C_out / groups, *kernel) (IOX)
    bias : ndarray of shape (C_out,), optional
    strides, dilations : sequence of int
        Required, positive, one per spatial axis.
    pads_begin, pads_end : sequence of int
        Non-negative; ignored when auto_pad is not "none" or output_shape is given.
    auto_pad : {"none", "same_upper", "same_lower", "valid"}, default "none"
        "same_*": total padding (K-1)*d + 1 - s, so the output length is s*I + output_padding.
    output_padding : sequence of int, optional
        Non-negative extra elements at the end of each axis.
    groups : int, default 1
    data_format : {"NXC", "NCX"}, default "NXC"
    filter_format : {"XOI", "IOX"}, default "XOI"
    output_shape : sequence of int, optional
        Spatial output shape; pads are then generated (000).
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with the inputs: the
        result is written into it and it is returned.

    Returns
    -------
    ndarray in ``data_format``, the dtype of ``src`` (f32, f16 or bf16; f16 / bf16 accumulate
    in f32 and are rounded once).

    Raises
    ------
    ValueError, TypeError
        Attributes outside the spec's ranges, inconsistent tensors, a dtype the spec does not
        list (float64 included).

    Examples
    --------
    >>> import numpy as np, convt
    >>> src = np.ones((1, 4, 4, 8), np.float32)            # NXC
    >>> w = np.ones((3, 3, 2, 8), np.float32)              # XOI: K, K, C_out, C_in
    >>> convt.onednn.conv_transpose(src, w, strides=[2, 2], pads_begin=[1, 1],
    ...                             pads_end=[1, 1], dilations=[1, 1]).shape
    (1, 7, 7, 2)
    """
    xa, plan = _prepare(src, weights, bias, strides=strides, pads_begin=pads_begin,
                        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
                        output_padding=output_padding, groups=groups, data_format=data_format,
                        filter_format=filter_format, output_shape=output_shape, method=method,
                        workers=workers, one_shot=True)
    return plan(xa, out, {"src": src, "weights": weights, "bias": bias})


def _prepare(src, weights, bias, *, strides, pads_begin, pads_end, dilations, auto_pad,
             output_padding, groups, data_format, filter_format, output_shape, method, workers,
             one_shot=False):
    """(validated src, Plan) of `conv_transpose`'s arguments; convt.dask plans with it too.
    ``one_shot``: a plan for this call only (convt._api._OneShot)."""
    xa, w_iox, ba, dt, spec, _ = _spec(
        src, weights, bias, strides=strides, pads_begin=pads_begin, pads_end=pads_end,
        dilations=dilations, auto_pad=auto_pad, output_padding=output_padding, groups=groups,
        data_format=data_format, filter_format=filter_format, output_shape=output_shape)
    return xa, Plan(spec, w_iox, ba, dt, allowed=TYPES, method=method, workers=workers,
                    one_shot=one_shot)


def _spec(src, weights, bias, *, strides, pads_begin, pads_end, dilations, auto_pad,
          output_padding, groups, data_format, filter_format, output_shape):
    """(src, IOX weights, bias, dtype, OpSpec, filter_format) of `conv_transpose`'s arguments,
    validated."""
    conv = "onednn"
    xa, w_iox, ba, dt, data_format, filter_format = intake(
        conv, src, weights, bias, allowed=TYPES, names=("src", "weights", "bias"),
        data_format=data_format, filter_format=filter_format)
    require(conv, strides=strides, dilations=dilations)  # 000: "Required: yes"
    attrs = common_attrs(conv, w_iox, ba, strides=strides, dilations=dilations, group=groups,
                         group_name="groups", names=("weights", "bias"))
    rule = onednn_rule(conv, w_iox.ndim - 2, auto_pad=auto_pad, pads_begin=pads_begin,
                       pads_end=pads_end, output_padding=output_padding,
                       output_shape=output_shape)
    return xa, w_iox, ba, dt, make_spec(conv, attrs, rule, data_format, "src"), filter_format


def _canonical(x_shape, w_shape, bias_shape=None, *, strides=None, pads_begin=None,
               pads_end=None, dilations=None, auto_pad="none", output_padding=None, groups=1,
               data_format="NXC", filter_format="XOI", output_shape=None):
    """The `Canonical` of ``conv_transpose(src, weights, bias, ...)`` on arrays of these
    shapes, validated as `conv_transpose` validates them (convt.translate's source side)."""
    xa, _, ba, _, spec, fmt = _spec(
        dummy("onednn", "src", x_shape), dummy("onednn", "weights", w_shape),
        dummy("onednn", "bias", bias_shape), strides=strides, pads_begin=pads_begin,
        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
        output_padding=output_padding, groups=groups, data_format=data_format,
        filter_format=filter_format, output_shape=output_shape)
    return from_spec(spec, xa.shape, fmt, ba is not None)
