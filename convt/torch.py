"""PyTorch ``torch.nn.functional.conv_transpose1d / 2d / 3d`` front end, on NumPy arrays.

Rules from PyTorch 2.13's source and confirmed by running it (docs/conventions.md):
``aten/src/ATen/native/Convolution.cpp`` (``_convolution``: ``ConvParams::is_padding_neg``,
``is_output_padding_neg``, ``is_stride_nonpos``; ``check_shape_forward``: groups, weight /
input channels, bias length; ``conv_transpose{1,2,3}d``: unbatched inputs), the output length
in ``aten/src/ATen/native/ConvUtils.h`` (``conv_input_size``: (I-1)*s - 2*p + d*(K-1) + op + 1)
and the output_padding bound in ``slow_conv_transpose2d_shape_check``
(``NaiveConvolutionTranspose2d.cpp``): per axis op < s *or* op < d. Weight (C_in, C_out/groups,
*K); input (N, C_in, *spatial), or unbatched (C_in, *spatial).
"""
from __future__ import annotations


import numpy as np

from ._geometry.canonical import Canonical
from ._geometry.dtypes import ALL_FLOATS, as_array, common_dtype, dtype_name
from ._geometry.frontend import common_attrs, make_spec
from ._geometry.geometry import PadRule, resolve
from ._dispatch.plan import Plan
from ._geometry.validate import as_int, bad_type, fail

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

CONV = "torch"
TYPES = ALL_FLOATS   # torch's CPU floating types: float64, float32, bfloat16, float16


def _index(name, v, what):
    # Python and NumPy integers, never bools or floats (torch's argument parser and Keras alike)
    return as_int(CONV, name, v, what)


def _int_arg(name, value, nd, minimum):
    """An int or a list / tuple of 1 or ``nd`` ints, as torch's ``IntArrayRef[nd]`` takes it
    (torch/csrc/utils/python_arg_parser.cpp: a single int or a one-element list is repeated;
    NumPy arrays and tensors are refused)."""
    what = f"must be an int or a tuple of {nd} ints"
    if isinstance(value, (list, tuple)):
        out = tuple(_index(name, v, what) for v in value)
        if len(out) == 1:
            out = out * nd
        if len(out) != nd:
            raise fail(CONV, name, f"must be a single integer value or a list of {nd} values "
                       "to match the convolution dimensions", out)
    else:
        out = (_index(name, value, what),) * nd
    if any(v < minimum for v in out):
        raise fail(CONV, name, "must be positive" if minimum else "must be non-negative", out)
    return out


def _onednn_path(dtype, x_shape, w_shape, strides, op, groups):
    """Whether torch 2.13 on CPU runs this call through oneDNN (Convolution.cpp,
    ``ConvParams::use_mkldnn``), assuming more than one thread and a CPU with AVX512-BF16 (as
    the fixtures' machine). Only two things depend on it: that path returns an empty tensor
    for an output length of 0 where the others refuse it, and it refuses a bias of another
    dtype where the others cast it. Measured: agrees with torch on 1,487 random calls."""
    if any(o >= s for o, s in zip(op, strides)):       # is_output_padding_big
        return False
    if dtype in ("bfloat16", "float32"):
        if dtype == "bfloat16":                         # mkldnn_bf16_device_check
            return True
        # 1-D runs viewed as 2-D (N, C, 1, L); the thread clause holds with > 1 thread
        x4 = (*x_shape[:2], 1, x_shape[2]) if len(x_shape) == 3 else x_shape
        w4 = (*w_shape[:2], 1, w_shape[2]) if len(w_shape) == 3 else w_shape
        return (groups > 1 or (w4[-1] > 3 and w4[-2] > 3) or x4[0] > 1
                or x4[0] * x4[1] * x4[2] * x4[3] > 20480)
    return False   # float64; float16 (no AVX512-FP16: mkldnn_fp16_device_check fails)


def _spec(nd, x_shape, w_shape, b_shape, stride, padding, output_padding, groups, dilation,
          dtype="float64"):
    """(OpSpec or None, unbatched, batched input shape, output shape) of one call, validated
    as torch validates it for inputs of ``dtype`` (its name); every check the public
    functions make on shapes and attributes happens here. None: an empty output (below)."""
    if len(w_shape) != nd + 2:
        raise fail(CONV, "weight", f"must have rank {nd + 2}, (C_in, C_out / groups, "
                   f"{nd} kernel lengths), for conv_transpose{nd}d", tuple(w_shape))
    if len(x_shape) not in (nd + 1, nd + 2):
        raise fail(CONV, "input", f"must have rank {nd + 1} (unbatched) or {nd + 2} (batched) "
                   f"for conv_transpose{nd}d", tuple(x_shape))
    strides = _int_arg("stride", stride, nd, 1)
    pads = _int_arg("padding", padding, nd, 0)
    op = _int_arg("output_padding", output_padding, nd, 0)
    dilations = _int_arg("dilation", dilation, nd, 1)
    g = _index("groups", groups, "must be an int")
    if g < 1:
        raise fail(CONV, "groups", "must be positive", g)
    if w_shape[0] < g or w_shape[1] < 1:
        raise fail(CONV, "weight", f"must be non-empty with at least groups = {g} input "
                   "channels", tuple(w_shape))
    for a in range(nd):
        # slow_conv_transpose{2,3}d_shape_check: "output padding must be smaller than either
        # stride or dilation" -- either one, so op = s is fine when d > op
        if op[a] >= strides[a] and op[a] >= dilations[a]:
            raise fail(CONV, "output_padding", "must be smaller than either stride or "
                       f"dilation (stride {strides}, dilation {dilations})", op)
    unbatched = len(x_shape) == nd + 1
    x_shape = (1, *x_shape) if unbatched else tuple(x_shape)
    weight = np.broadcast_to(np.float32(0), w_shape)       # shapes only: no memory
    bias = None if b_shape is None else np.broadcast_to(np.float32(0), b_shape)
    attrs = common_attrs(CONV, weight, bias, strides=strides, dilations=dilations, group=g,
                         group_name="groups", names=("weight", "bias"))
    if x_shape[1] != w_shape[0]:
        raise fail(CONV, "input", f"must have {w_shape[0]} channels (the weight's C_in)",
                   tuple(x_shape))
    spatial = x_shape[2:]
    if any(i < 1 for i in spatial):
        raise fail(CONV, "input", "must have spatial lengths >= 1 (torch: only zero batch "
                   "or zero channel inputs are supported)", tuple(x_shape))
    # ConvUtils.h conv_input_size: (I-1)*s - 2*p + d*(K-1) + op + 1; torch refuses < 1
    # ("Output size is too small"), except that its oneDNN path returns an empty tensor at 0
    lengths = tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1 for i, s, p, d, k, o
                    in zip(spatial, strides, pads, dilations, w_shape[2:], op))
    empty_ok = (min(lengths) == 0 and
                _onednn_path(dtype, x_shape, w_shape, strides, op, g))
    out_shape = (x_shape[0], attrs[5], *lengths)
    if empty_ok:   # torch's oneDNN path returns (N, C_out, ..., 0, ...)
        return None, unbatched, x_shape, out_shape
    if any(n < 1 for n in lengths):
        raise fail(CONV, "padding", f"leaves no output for input {tuple(x_shape)}: output "
                   "size (I-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1 is "
                   f"{lengths}", pads)
    # padding p on both ends, output_padding lowers the end (geometry.py: pe = p - op)
    rule = PadRule(kind="explicit", output_padding=op, pads_begin=pads, pads_end=pads)
    return make_spec(CONV, attrs, rule, "NCX", "input"), unbatched, x_shape, out_shape


def _canonical(x_shape, w_shape, bias_shape=None, stride=1, padding=0, output_padding=0,
               groups=1, dilation=1):
    """The ``Canonical`` of ``conv_transpose{n}d`` on arrays of these shapes; n is the
    weight's rank - 2 (1 to 3), every other check as the public functions make it (for
    float64: torch's empty float32 / bfloat16 outputs have no Canonical)."""
    nd = len(w_shape) - 2
    if nd not in (1, 2, 3):
        raise fail(CONV, "weight", "must have rank 3, 4 or 5 (1-3 spatial axes)",
                   tuple(w_shape))
    spec, unbatched, xs, _ = _spec(nd, tuple(x_shape), tuple(w_shape),
                                   None if bias_shape is None else tuple(bias_shape), stride,
                                   padding, output_padding, groups, dilation)
    ident = tuple(range(nd + 2))
    return Canonical(CONV, resolve(spec, xs), ident, ident, ident,
                     has_bias=bias_shape is not None, unbatched=unbatched)


def _run(nd, input, weight, bias, stride, padding, output_padding, groups, dilation, method,
         workers, out):
    xa = as_array(CONV, "input", input, TYPES)
    wa = as_array(CONV, "weight", weight, TYPES)
    dt = common_dtype(CONV, {"weight": wa, "input": xa}, TYPES)
    spec, unbatched, xs, ys = _spec(nd, xa.shape, wa.shape,
                                    None if bias is None else np.shape(bias), stride, padding,
                                    output_padding, groups, dilation, dtype_name(dt))
    ba = None
    if bias is not None:
        ba = as_array(CONV, "bias", bias, TYPES)
        # torch casts a bias of another floating type to the input's, except on its oneDNN
        # path ("Input type ... and bias type ... should be the same")
        if dtype_name(ba.dtype) != dtype_name(dt):
            attrs = _int_arg("stride", stride, nd, 1), _int_arg("output_padding",
                                                                 output_padding, nd, 0)
            if _onednn_path(dtype_name(dt), xs, wa.shape, *attrs, groups):
                raise bad_type(CONV, "bias", f"must have the input's dtype {dt.name} (torch's "
                               "oneDNN path runs this call)", ba.dtype.name)
            ba = ba.astype(dt)
    if spec is None:   # nothing to compute; torch's oneDNN path returns it empty
        y = np.zeros(ys, dt)
        return out if out is not None else (y[0] if unbatched else y)
    plan = Plan(spec, wa, ba, dt, allowed=TYPES, method=method, workers=workers,
                one_shot=True)
    dest = out
    if out is not None and unbatched and isinstance(out, np.ndarray):
        dest = out[None]
    y = plan(xa.reshape(xs), dest, {"input": input, "weight": weight, "bias": bias})
    if out is not None:
        return out
    return y[0] if unbatched else y


_DOC = """torch.nn.functional.conv_transpose{n}d on NumPy arrays.

    Parameters
    ----------
    input : ndarray of shape (N, C_in, {sp}) or, unbatched, (C_in, {sp})
    weight : ndarray of shape (C_in, C_out / groups, {ks})
    bias : ndarray of shape (C_out,), optional
        Of any floating dtype: cast to the input's, as torch does, except where torch's
        oneDNN path would run the call (see Returns), which refuses another dtype.
    stride : int or tuple of {n} ints, default 1
        Positive. A single int (or a 1-tuple) applies to every axis.
    padding : int or tuple of {n} ints, default 0
        Non-negative; ``dilation * (kernel_size - 1) - padding`` zeros pad both ends of the
        input, i.e. ``padding`` elements are cropped from both ends of the full output.
    output_padding : int or tuple of {n} ints, default 0
        Elements added at the end of each axis; per axis smaller than the stride *or* the
        dilation.
    groups : int, default 1
        Divides C_in; input channels are split into groups group-major.
    dilation : int or tuple of {n} ints, default 1
        Positive.
    method : {{"auto", "direct", "fft", "reference", "tune"}}, default "auto"
        Backend, as for `convt.ConvTranspose`.
    workers : int, optional
        Threads, as in ``scipy.fft``.
    out : ndarray, optional
        C-contiguous, of the result's shape and dtype, sharing no memory with the inputs: the
        result is written into it and it is returned.

    Returns
    -------
    ndarray of shape (N, C_out, {osp}) (unbatched: (C_out, {osp})), the input's dtype;
    per axis L = (I-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1. L = 0 is
    refused, except where torch's oneDNN path would run the call (bfloat16; float32 with
    groups > 1, a batch > 1 or a kernel over 3x3), which returns an empty array: convt does
    the same.

    Raises
    ------
    ValueError, TypeError
        Where torch raises: negative padding or output_padding, non-positive stride,
        dilation or groups, output_padding not below stride or dilation, groups not dividing
        C_in, channel or bias mismatches, an output length below 1; non-floating or mixed
        input / weight dtypes (the message names ``torch`` and the parameter).

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.ones({xshape})
    >>> w = np.ones({wshape})
    >>> convt.torch.conv_transpose{n}d(x, w, stride=2, padding=1, output_padding=1).shape
    {yshape}
    """


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, *, method="auto", workers=None, out=None):
    return _run(1, input, weight, bias, stride, padding, output_padding, groups, dilation,
                method, workers, out)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, *, method="auto", workers=None, out=None):
    return _run(2, input, weight, bias, stride, padding, output_padding, groups, dilation,
                method, workers, out)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, *, method="auto", workers=None, out=None):
    return _run(3, input, weight, bias, stride, padding, output_padding, groups, dilation,
                method, workers, out)


for _n, _f in ((1, conv_transpose1d), (2, conv_transpose2d), (3, conv_transpose3d)):
    _sp, _ks, _osp = (", ".join(f"{c}_{i}" for i in range(_n)) for c in ("I", "K", "L"))
    _f.__doc__ = _DOC.format(n=_n, sp=_sp, ks=_ks, osp=_osp, xshape=(1, 4) + (8,) * _n,
                             wshape=(4, 2) + (3,) * _n, yshape=(1, 2) + (16,) * _n)
