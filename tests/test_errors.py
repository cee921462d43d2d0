"""Every spec violation is a ValueError / TypeError naming the convention, the parameter and
the value. Messages are pinned with match=."""
import re

import numpy as np
import pytest

import convt

X = np.zeros((1, 4, 5, 5), np.float32)
W = np.zeros((4, 3, 3, 3), np.float32)
B = np.zeros(6, np.float32)


def call(**kw):
    x = kw.pop("x", X)
    w = kw.pop("w", W)
    return convt.conv_transpose(x, w, kw.pop("b", None), **kw)


CANONICAL = [
    (dict(strides=(2, 0)), ValueError,
     "conv_transpose: 'strides' must be positive integers, one per spatial axis (2); got (2, 0)"),
    (dict(strides=(2,)), ValueError, "conv_transpose: 'strides' must be positive integers, one "
     "per spatial axis (2); got (2,)"),
    (dict(strides=(2.0, 2.0)), TypeError, "conv_transpose: 'strides' must be positive integers"),
    (dict(strides=(True, 1)), TypeError, "conv_transpose: 'strides' must be positive integers"),
    (dict(strides="22"), TypeError, "conv_transpose: 'strides' must be positive integers"),
    (dict(dilations=(1, -1)), ValueError, "conv_transpose: 'dilations' must be positive integers"
     ", one per spatial axis (2); got (1, -1)"),
    (dict(pads=(1, -1, 0, 0)), ValueError, "conv_transpose: 'pads' must be non-negative integers "
     "[x1_begin, ..., x1_end, ...] (4); got (1, -1, 0, 0)"),
    (dict(pads=(1, 1)), ValueError, "conv_transpose: 'pads' must be non-negative integers"),
    (dict(strides=(2, 2), output_padding=(2, 0)), ValueError, "conv_transpose: 'output_padding' "
     "must be less than max(stride, dilation) per axis (2, 2); got (2, 0)"),
    (dict(output_padding=(-1, 0)), ValueError, "conv_transpose: 'output_padding' must be "
     "non-negative"),
    (dict(kernel_shape=(3, 2)), ValueError, "conv_transpose: 'kernel_shape' must equal w's "
     "spatial shape (3, 3); got (3, 2)"),
    (dict(group=3), ValueError, "conv_transpose: 'group' must divide the input channels C_in = 4"
     "; got 3"),
    (dict(group=0), ValueError, "conv_transpose: 'group' must be an integer >= 1; got 0"),
    (dict(group=1.5), TypeError, "conv_transpose: 'group' must be an integer >= 1; got 1.5"),
    (dict(x=np.zeros((1, 3, 5, 5), np.float32)), ValueError, "conv_transpose: 'x' must have 4 "
     "channels (the filter's C_in, data_format NCX); got (1, 3, 5, 5)"),
    (dict(x=np.zeros((4, 5, 5), np.float32)), ValueError, "conv_transpose: 'x' must have rank 4 "
     "(N, C, 2 spatial)"),
    # a filter of another rank, with attributes sized for x: x named, not 'strides'
    (dict(w=np.zeros((4, 3, 3, 3, 3), np.float32), strides=(2, 2)), ValueError,
     "conv_transpose: 'x' must have rank 5 (N, C, 3 spatial) to match the filter's 3 spatial "
     "axes; got (1, 4, 5, 5)"),
    (dict(w=np.zeros((4, 3), np.float32)), ValueError, "conv_transpose: 'w' must have rank 3, 4 "
     "or 5 (1-3 spatial axes); got (4, 3)"),
    (dict(w=np.zeros((4, 3, 0, 3), np.float32)), ValueError, "conv_transpose: 'w' must have "
     "spatial (kernel) lengths >= 1"),
    (dict(x=np.zeros((1, 4, 0, 5), np.float32)), ValueError, "conv_transpose: 'x' must have "
     "spatial lengths >= 1"),
    (dict(output_shape=(7,)), ValueError, "conv_transpose: 'output_shape' must be positive "
     "integers, spatial dimensions only (2); got (7,)"),
    (dict(output_shape=(1, 6, 7, 7)), ValueError, "conv_transpose: 'output_shape' must be "
     "positive integers, spatial dimensions only (2)"),
    (dict(output_shape=(0, 7)), ValueError, "conv_transpose: 'output_shape' must be positive"),
    (dict(auto_pad="SAME"), ValueError, "conv_transpose: 'auto_pad' must be one of ('NOTSET', "
     "'SAME_UPPER', 'SAME_LOWER', 'VALID'); got 'SAME'"),
    (dict(auto_pad=None), TypeError, "conv_transpose: 'auto_pad' must be one of"),
    (dict(auto_pad="VALID", pads=(1, 1, 1, 1)), ValueError, "conv_transpose: 'pads' cannot be "
     "used together with auto_pad='VALID'; got (1, 1, 1, 1)"),
    (dict(pads=(4, 4, 4, 4)), ValueError, "conv_transpose: 'pads' leave no output"),
    (dict(data_format="NHWC"), ValueError, "conv_transpose: 'data_format' must be one of "
     "('NCX', 'NXC'); got 'NHWC'"),
    (dict(filter_format="OIX"), ValueError, "conv_transpose: 'filter_format' must be one of "
     "('IOX', 'XOI'); got 'OIX'"),
    (dict(x=X.astype(np.int32)), TypeError, "conv_transpose: 'x' must have a floating dtype in "
     "('float64', 'float32', 'float16', 'bfloat16'); got 'int32'"),
    (dict(w=W.astype(np.complex64)), TypeError, "conv_transpose: 'w' must have a floating dtype"),
    (dict(x=X.astype(np.float64)), TypeError, "conv_transpose: 'x' must have the weights' dtype "
     "float32 (pass dtype=... to cast); got 'float64'"),
    (dict(b=B.astype(np.float64)), TypeError, "conv_transpose: 'b' must have the dtype of 'w', "
     "float32 (pass dtype=... to cast); got 'float64'"),
    (dict(b=np.zeros(5, np.float32)), ValueError, "conv_transpose: 'b' must be a 1-D array of "
     "length C_out = 3; got (5,)"),
    (dict(method="fast"), ValueError, "conv_transpose: 'method' must be one of ('auto', "
     "'direct', 'fft', 'reference', 'tune'); got 'fast'"),
    (dict(workers=0), ValueError, "conv_transpose: 'workers' must be a non-zero integer; got 0"),
    (dict(workers=-1000), ValueError, "conv_transpose: 'workers' must not be below"),
    (dict(dtype="int8"), TypeError, "conv_transpose: 'dtype' must be one of"),
]


@pytest.mark.parametrize("kw, exc, msg", CANONICAL, ids=[m[:60] for _, _, m in CANONICAL])
def test_canonical_errors(kw, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        call(**kw)


def test_prepared_operator_checks_each_input():
    op = convt.ConvTranspose(W, B[:3], strides=(2, 2))
    with pytest.raises(TypeError, match=re.escape("conv_transpose: 'x' must have the weights' "
                                                  "dtype float32")):
        op(X.astype(np.float16))
    with pytest.raises(ValueError, match=re.escape("conv_transpose: 'x' must have 4 channels")):
        op(np.zeros((1, 5, 5, 5), np.float32))
    with pytest.raises(TypeError, match=re.escape("conv_transpose: 'x' must have a floating")):
        op([[["a"]]])


def test_cast_on_request():
    y = convt.conv_transpose(X.astype(np.float64), W, B[:3].astype(np.float16),
                             dtype=np.float32)
    assert y.dtype == np.float32


def test_either_byte_order():
    """The weights' dtype in the other byte order is that dtype: swapped once, the result in
    native order (as numpy's ufuncs give it); it was refused with "must have the weights'
    dtype float32 ... got 'float32'"."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(X.shape).astype(np.float32), W + np.float32(0.5)
    ref = convt.conv_transpose(x, w)
    for xs, ws in (("<f4", ">f4"), (">f4", "<f4"), (">f4", ">f4")):
        y = convt.ConvTranspose(w.astype(ws))(x.astype(xs))
        assert y.dtype == np.float32 and y.dtype.isnative
        np.testing.assert_array_equal(y, ref)
    out = np.full(ref.shape, np.nan, ">f4")
    assert convt.conv_transpose(x, w, out=out) is out
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(TypeError, match=re.escape("conv_transpose: 'out' must have the "
                                                  "result's dtype float32; got 'float64'")):
        convt.conv_transpose(x, w, out=np.empty(ref.shape, ">f8"))


@pytest.mark.parametrize("call_, msg", [
    (lambda: convt.onnx.conv_transpose(X, W.astype(np.float64)),
     "onnx (opset 11): 'X' must have the dtype of 'W', float64 (cast it before the call); "
     "got 'float32'"),
    (lambda: convt.onnx.conv_transpose(X, W, np.zeros(W.shape[1], np.float16)),
     "onnx (opset 11): 'B' must have the dtype of 'W', float32 (cast it before the call); "
     "got 'float16'"),
    (lambda: convt.onednn.conv_transpose(X, W.astype(np.float16), strides=(1, 1),
                                         dilations=(1, 1)),
     "onednn: 'src' must have the dtype of 'weights', float16 (cast it before the call); "
     "got 'float32'"),
    (lambda: convt.openvino.convolution_backprop_data(X, W.astype(np.float64), strides=(1, 1),
                                                      dilations=(1, 1)),
     "openvino: 'data' must have the dtype of 'filter', float64 (cast it before the call); "
     "got 'float32'"),
])
def test_front_ends_without_dtype_suggest_a_cast(call_, msg):
    # only the canonical API takes dtype=, so only its messages suggest it
    with pytest.raises(TypeError, match=re.escape(msg)):
        call_()


ONNX = [
    (dict(opset=0), ValueError, "onnx: 'opset' must be an integer >= 1; got 0"),
    (dict(opset=11, X=X.astype(np.float16), W=W.astype(np.float16), pads=[-1, 0, 0, 0]),
     ValueError, "onnx (opset 11): 'pads' must be non-negative integers"),
    (dict(opset=1, output_padding=[-1, 0]), ValueError,
     "onnx (opset 1): 'output_padding' must be non-negative"),
    (dict(kernel_shape=[3]), ValueError, "onnx (opset 11): 'kernel_shape' must be positive "
     "integers, one per spatial axis (2); got (3,)"),
    (dict(auto_pad="same"), ValueError, "onnx (opset 11): 'auto_pad' must be one of"),
]


@pytest.mark.parametrize("kw, exc, msg", ONNX, ids=[m[:50] for _, _, m in ONNX])
def test_onnx_errors(kw, exc, msg):
    kw = dict(kw)
    x, w = kw.pop("X", X), kw.pop("W", W)
    with pytest.raises(exc, match=re.escape(msg)):
        convt.onnx.conv_transpose(x, w, **kw)


def test_onnx_bfloat16_needs_opset_22():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb, wb = X.astype(ml_dtypes.bfloat16), W.astype(ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match=re.escape("onnx (opset 11): 'X' must have a floating "
                                                  "dtype in ('float64', 'float32', 'float16')")):
        convt.onnx.conv_transpose(xb, wb)
    assert convt.onnx.conv_transpose(xb, wb, opset=22).dtype == ml_dtypes.bfloat16


OV_KW = dict(strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1])
OPENVINO = [
    (dict(strides=None), ValueError, "openvino: 'strides' is required; got None"),
    (dict(dilations=None), ValueError, "openvino: 'dilations' is required; got None"),
    (dict(pads_begin=None), ValueError, "openvino: 'pads_begin' is required with "
     "auto_pad='explicit' and no output_shape; got None"),
    (dict(pads_end=[1, -1]), ValueError, "openvino: 'pads_end' must be non-negative integers, "
     "one per spatial axis (2); got (1, -1)"),
    (dict(auto_pad="notset"), ValueError, "openvino: 'auto_pad' must be one of ('explicit', "
     "'same_upper', 'same_lower', 'valid'); got 'notset'"),
    (dict(output_shape=np.array([6.0, 6.0])), TypeError, "openvino: 'output_shape' must be a "
     "1-D integer tensor"),
    (dict(output_shape=np.array([6, 6, 6])), ValueError, "openvino: 'output_shape' must be "
     "positive integers, spatial dimensions only (2); got (6, 6, 6)"),
    (dict(output_shape=[10**20, 6]), TypeError, "openvino: 'output_shape' must be a 1-D "
     "integer tensor whose values fit int64; got [100000000000000000000, 6]"),
    (dict(output_shape=[]), ValueError, "openvino: 'output_shape' must be positive integers, "
     "spatial dimensions only (2); got ()"),   # as np.array([], np.int64) (was a TypeError)
    (dict(output_padding=[-1, 0]), ValueError, "openvino: 'output_padding' must be "
     "non-negative"),
    (dict(filter=np.zeros((3, 3, 3, 3), np.float32)), ValueError, "openvino: 'data' must have "
     "3 channels (the filter's C_in, data_format NCX); got (1, 4, 5, 5)"),
    # a filter of another rank than the data: named before the attributes it sizes
    (dict(filter=np.zeros((4, 3, 3, 3, 3), np.float32)), ValueError, "openvino: 'filter' must "
     "have rank 4 for data of rank 4: one kernel axis per spatial axis of the data; got "
     "(4, 3, 3, 3, 3)"),
]


@pytest.mark.parametrize("kw, exc, msg", OPENVINO, ids=[m[:50] for _, _, m in OPENVINO])
def test_openvino_errors(kw, exc, msg):
    kw = {**OV_KW, **kw}
    filt = kw.pop("filter", W)
    os_ = kw.pop("output_shape", None)
    with pytest.raises(exc, match=re.escape(msg)):
        convt.openvino.convolution_backprop_data(X, filt, os_, **kw)


def test_openvino_grouped_errors():
    with pytest.raises(ValueError, match=re.escape("openvino (grouped): 'filter' must have "
                                                   "rank 4, 5 or 6: [G, C_in/G, C_out/G, K...]")):
        convt.openvino.group_convolution_backprop_data(X, W[0, 0], **OV_KW)
    with pytest.raises(ValueError, match=re.escape("openvino (grouped): 'data' must have 6 "
                                                   "channels")):
        convt.openvino.group_convolution_backprop_data(X, np.zeros((2, 3, 1, 3, 3), np.float32),
                                                       **OV_KW)
    # a grouped filter of 1-D data for 2-D data (it used to blame 'strides'), either layout
    for fmt, shape in (("IOX", (4, 1, 3, 3)), ("XOI", (2, 3, 3, 3, 1, 2))):
        with pytest.raises(ValueError, match=re.escape(
                "openvino (grouped): 'filter' must have rank 5 for data of rank 4: one kernel "
                f"axis per spatial axis of the data; got {shape}")):
            convt.openvino.group_convolution_backprop_data(
                X, np.zeros(shape, np.float32), filter_format=fmt, **OV_KW)


XN = np.zeros((1, 5, 5, 4), np.float32)     # NXC
WX = np.zeros((3, 3, 3, 4), np.float32)     # XOI
DN_KW = dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1])
ONEDNN = [
    (dict(src=XN.astype(np.float64), weights=WX.astype(np.float64)), TypeError,
     "onednn: 'src' must have a floating dtype in ('float32', 'float16', 'bfloat16'); got "
     "'float64'"),
    (dict(pads_begin=[-1, 0]), ValueError, "onednn: 'pads_begin' must be non-negative"),
    (dict(groups=3), ValueError, "onednn: 'groups' must divide the input channels C_in = 4; "
     "got 3"),
    (dict(auto_pad="same_upper", output_shape=[11, 11]), ValueError, "onednn: 'output_shape' "
     "conflicts with auto_pad, which fixes the output length to (10, 10); got (11, 11)"),
    (dict(auto_pad="valid", output_shape=[10, 10]), ValueError, "onednn: 'output_shape' "
     "conflicts with auto_pad, which fixes the output length to (11, 11); got (10, 10)"),
    (dict(auto_pad="NOTSET"), ValueError, "onednn: 'auto_pad' must be one of ('none', "
     "'same_upper', 'same_lower', 'valid'); got 'NOTSET'"),
    (dict(bias=np.zeros(4, np.float32)), ValueError, "onednn: 'bias' must be a 1-D array of "
     "length C_out = 3; got (4,)"),
    (dict(data_format="NCHW"), ValueError, "onednn: 'data_format' must be one of"),
    (dict(pads_end=None), ValueError, "onednn: 'pads_end' is required with auto_pad='none' and "
     "no output_shape; got None"),
    (dict(dilations=None), ValueError, "onednn: 'dilations' is required; got None"),
]


@pytest.mark.parametrize("kw, exc, msg", ONEDNN, ids=[m[:50] for _, _, m in ONEDNN])
def test_onednn_errors(kw, exc, msg):
    kw = {**DN_KW, **kw}
    src, wts, bias = kw.pop("src", XN), kw.pop("weights", WX), kw.pop("bias", None)
    with pytest.raises(exc, match=re.escape(msg)):
        convt.onednn.conv_transpose(src, wts, bias, **kw)


def test_nothing_is_written_to_inputs_on_error():
    x = X.copy()
    with pytest.raises(ValueError):
        convt.conv_transpose(x, W, strides=(0, 1))
    np.testing.assert_array_equal(x, X)
