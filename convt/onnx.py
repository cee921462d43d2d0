"""ONNX ``ConvTranspose`` front end: opset 1 (ConvTranspose-1) and opset 11+ (-11, -22).

Spec references are to ``shared/specs``: 004 is the RST rendering of ConvTranspose-11 (lines
1-130) and ConvTranspose-1 (lines 631-730); 001 is ConvTranspose-1 alone; 002 is the HTML page
of -11. This module only turns the attributes into a ``PadRule``; ``convt._geometry.geometry.resolve``
does the arithmetic shared by every convention.
"""
from __future__ import annotations

from ._geometry.canonical import dummy, from_spec
from ._geometry.frontend import check_pads_ignored, common_attrs, intake, make_spec
from ._geometry.geometry import (TOTAL_FROM_INPUT, TOTAL_FROM_INPUT_TIMES_STRIDE,
                        TOTAL_FROM_OUTPUT_SHAPE, PadRule)
from ._dispatch.plan import Plan
from ._geometry.validate import choice, fail, int_scalar, int_tuple

__all__ = ["conv_transpose"]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
# 004 lines 120-125 (opset 1 and 11): tensor(double), tensor(float), tensor(float16);
# ConvTranspose-22 adds tensor(bfloat16).
TYPES = {1: ("float64", "float32", "float16"), 11: ("float64", "float32", "float16"),
         22: ("float64", "float32", "float16", "bfloat16")}


def operator_version(conv, opset):
    """The ConvTranspose version a model opset imports: 1 (opsets 1-10), 11 (11-21) or 22."""
    opset = int_scalar(conv, "opset", opset, minimum=1)
    return 22 if opset >= 22 else 11 if opset >= 11 else 1


def onnx_rule(conv, version, nd, strides, dilations, *, auto_pad, pads, output_padding,
              output_shape):
    """The ``PadRule`` of ONNX ConvTranspose-``version`` (1 or 11/22)."""
    auto_pad = choice(conv, "auto_pad", auto_pad, AUTO_PADS)
    if output_padding is None:
        op = (0,) * nd
    elif version == 1:
        # ConvTranspose-1 (001 line 44) states no bound: "The zero-padding added to one side".
        op = int_tuple(conv, "output_padding", output_padding, nd, minimum=0)
    else:
        # 004 line 62: "Each padding value in output_padding must be less than the
        # corresponding stride/dilation dimension" -- read as op < max(stride, dilation).
        op = int_tuple(conv, "output_padding", output_padding, nd, minimum=0)
        bound = tuple(max(s, d) for s, d in zip(strides, dilations))
        if any(o >= b for o, b in zip(op, bound)):
            raise fail(conv, "output_padding", "must be less than max(stride, dilation) "
                       f"per axis {bound}", op)
    if output_shape is not None:
        # 004 lines 37-39 (opset 11): total = s*(I-1) + op + E - output_shape; SAME_UPPER puts
        # the floor half first, every other auto_pad the ceil half. Opset 1 (004 lines 654-655,
        # 001 line 48) is the reverse. "If output_shape is specified pads values are ignored"
        # (004 line 74), so pads are not checked here.
        os_ = int_tuple(conv, "output_shape", output_shape, nd, minimum=1,
                        what=f"integers, spatial dimensions only ({nd})")
        upper_floor = auto_pad == "SAME_UPPER"
        floor_first = upper_floor if version >= 11 else not upper_floor
        return PadRule(kind="total", output_padding=op, total=TOTAL_FROM_OUTPUT_SHAPE,
                       output_shape=os_, begin="floor" if floor_first else "ceil")
    # 004 lines 76-88: [x1_begin, x2_begin, ..., x1_end, x2_end, ...], each >= 0; the output
    # length is s*(I-1) + op + E - pads_begin - pads_end (004 line 33). Checked before the
    # auto_pad test below, which reads the values.
    p = None if pads is None else int_tuple(
        conv, "pads", pads, 2 * nd, minimum=0,
        what=f"integers [x1_begin, ..., x1_end, ...] ({2 * nd})")
    # 004 lines 84-86: pads "cannot be used simultaneously with auto_pad".
    check_pads_ignored(conv, auto_pad, p, "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # Opset 11, 004 lines 45-50: output_shape[i] = input_shape[i] * strides[i], "the extra
        # padding is added at the end for SAME_UPPER and at the beginning for SAME_LOWER".
        # Opset 1, 004 lines 661-664 / 001 lines 35-38: "the output spatial size match the
        # input", same odd-element rule. Both read literally (see docs/conventions.md).
        total = TOTAL_FROM_INPUT_TIMES_STRIDE if version >= 11 else TOTAL_FROM_INPUT
        return PadRule(kind="total", output_padding=op, total=total,
                       begin="floor" if auto_pad == "SAME_UPPER" else "ceil")
    if auto_pad == "VALID" or p is None:
        # VALID: "no padding"; NOTSET without pads: "defaults to 0" (004 line 88).
        return PadRule(kind="explicit", output_padding=op, pads_begin=(0,) * nd,
                       pads_end=(0,) * nd)
    return PadRule(kind="explicit", output_padding=op, pads_begin=p[:nd], pads_end=p[nd:])


def onnx_spec(conv, version, w_iox, b, *, auto_pad="NOTSET", dilations=None, group=1,
              kernel_shape=None, output_padding=None, output_shape=None, pads=None,
              strides=None, data_format="NCX", names=("X", "W", "B")):
    """OpSpec of an ONNX ConvTranspose node (also the canonical API's semantics)."""
    attrs = common_attrs(conv, w_iox, b, strides=strides, dilations=dilations, group=group,
                         kernel_shape=kernel_shape, names=names[1:])
    rule = onnx_rule(conv, version, w_iox.ndim - 2, attrs[0], attrs[1], auto_pad=auto_pad,
                     pads=pads, output_padding=output_padding, output_shape=output_shape)
    return make_spec(conv, attrs, rule, data_format, names[0])


def conv_transpose(X, W, B=None, *, opset=11, auto_pad="NOTSET", dilations=None, group=1,
                   kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                   strides=None, data_format="NCX", filter_format="IOX", method="auto",
                   workers=None, out=None):
    """ONNX ``ConvTranspose`` with the attribute semantics of the model's opset.

    Parameters
    ----------
    X : ndarray of shape (N, C_in, *spatial)
        Input (``data_format="NXC"``: shape (N, *spatial, C_in)).
    W : ndarray of shape (C_in, C_out / group, *kernel)
        Filter (``filter_format="XOI"``: shape (*kernel, C_out / group, C_in)).
    B : ndarray of shape (C_out,), optional
        Bias, added to every output position.
    opset : int, default 11
        The model's opset. Opsets 1-10 use ConvTranspose-1, 11-21 ConvTranspose-11, 22 and
        later ConvTranspose-22 (which adds bfloat16). With ``output_shape``, opset 1 splits an
        odd total padding the opposite way from opset 11.
    auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides
        The node's attributes, with the spec's defaults. ``output_shape`` holds the spatial
        dimensions only; when it is given, ``pads`` is ignored.
    data_format, filter_format : {"NCX", "NXC"}, {"IOX", "XOI"}
        Layouts (an extension: ONNX itself is NCX / IOX).
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft`` (None: OpenMP's default, honouring OMP_NUM_THREADS).
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with X, W or B: the
        result is written into it and it is returned.

    Returns
    -------
    Y : ndarray of shape (N, C_out, *out_spatial), the dtype of X.

    Raises
    ------
    ValueError
        An attribute out of the spec's range or inconsistent with the tensors.
    TypeError
        A non-floating dtype, mixed dtypes, or a type the opset does not list.

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> w = np.ones((1, 2, 3, 3), np.float32)
    >>> convt.onnx.conv_transpose(x, w, strides=[3, 2], output_shape=[10, 8]).shape
    (1, 2, 10, 8)
    >>> y1 = convt.onnx.conv_transpose(x, w, opset=1, strides=[2, 2], output_shape=[6, 6])
    >>> y11 = convt.onnx.conv_transpose(x, w, opset=11, strides=[2, 2], output_shape=[6, 6])
    >>> full = convt.onnx.conv_transpose(x, w, strides=[2, 2])   # 7 x 7: total padding 1
    >>> bool((y1 == full[..., :6, :6]).all()), bool((y11 == full[..., 1:, 1:]).all())
    (True, True)
    """
    xa, plan = _prepare(X, W, B, opset=opset, auto_pad=auto_pad, dilations=dilations,
                        group=group, kernel_shape=kernel_shape, output_padding=output_padding,
                        output_shape=output_shape, pads=pads, strides=strides,
                        data_format=data_format, filter_format=filter_format, method=method,
                        workers=workers, one_shot=True)
    return plan(xa, out, {"X": X, "W": W, "B": B})


def _prepare(X, W, B, *, opset, auto_pad, dilations, group, kernel_shape, output_padding,
             output_shape, pads, strides, data_format, filter_format, method, workers,
             one_shot=False):
    """(validated X, Plan) of `conv_transpose`'s arguments; convt.dask plans with it too.
    ``one_shot``: a plan for this call only (convt._api._OneShot)."""
    xa, w_iox, ba, dt, spec, _ = _spec(X, W, B, opset=opset, auto_pad=auto_pad,
                                       dilations=dilations, group=group,
                                       kernel_shape=kernel_shape, output_padding=output_padding,
                                       output_shape=output_shape, pads=pads, strides=strides,
                                       data_format=data_format, filter_format=filter_format)
    return xa, Plan(spec, w_iox, ba, dt, allowed=TYPES[operator_version("onnx", opset)],
                    method=method, workers=workers, one_shot=one_shot)


def _spec(X, W, B, *, opset, data_format, filter_format, **attrs):
    """(X, IOX W, B, dtype, OpSpec, filter_format) of `conv_transpose`'s arguments, validated."""
    conv = f"onnx (opset {opset})"
    version = operator_version("onnx", opset)
    xa, w_iox, ba, dt, data_format, filter_format = intake(
        conv, X, W, B, allowed=TYPES[version], data_format=data_format,
        filter_format=filter_format)
    spec = onnx_spec(conv, version, w_iox, ba, data_format=data_format, **attrs)
    return xa, w_iox, ba, dt, spec, filter_format


def _canonical(x_shape, w_shape, bias_shape=None, *, opset=11, auto_pad="NOTSET",
               dilations=None, group=1, kernel_shape=None, output_padding=None,
               output_shape=None, pads=None, strides=None, data_format="NCX",
               filter_format="IOX"):
    """The `Canonical` of ``conv_transpose(X, W, B, ...)`` for arrays of these shapes, validated
    as `conv_transpose` validates them (convt.translate's source side)."""
    conv = f"onnx (opset {opset})"
    xa, _, ba, _, spec, filter_format = _spec(
        dummy(conv, "X", x_shape), dummy(conv, "W", w_shape), dummy(conv, "B", bias_shape),
        opset=opset, auto_pad=auto_pad, dilations=dilations, group=group,
        kernel_shape=kernel_shape, output_padding=output_padding, output_shape=output_shape,
        pads=pads, strides=strides, data_format=data_format, filter_format=filter_format)
    return from_spec(spec, xa.shape, filter_format, ba is not None)


# Running ONNX models (needs the ``onnx`` package, ``pip install convt[onnx]``): loaded on
# first access (PEP 562), so ``import convt`` never imports onnx. docs/onnx.md.
_LAZY = {"ConvTransposeOp": ("_onnx.ops", "ConvTranspose"), "backend": ("_onnx.backend", None),
         "Backend": ("_onnx.backend", "Backend"), "BackendRep": ("_onnx.backend", "BackendRep")}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    try:
        mod = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as e:
        if e.name != "onnx" and not (e.name or "").startswith("onnx."):
            raise
        raise ImportError(f"convt.onnx.{name} needs the 'onnx' package: "
                          "pip install 'convt[onnx]'") from e
    return mod if attr is None else getattr(mod, attr)
