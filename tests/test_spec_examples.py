"""The ONNX and OpenVINO specification examples, checked exactly.

The ONNX ConvTranspose-11 examples (spec 004) are data in ``_spec_data.py``. Their inputs and
outputs are small integers, so every front end and backend must reproduce them bit for bit in
float32 and float64, and in float16 while |y| <= 2048 (float16 has an 11-bit significand, and
float16 is widened to float32 to accumulate).
"""

import numpy as np
import pytest

import convt
import convt.onnx
import convt.openvino

from conftest import assert_close

try:
    from ._spec_data import CASES
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from _spec_data import CASES

DTYPES = [np.float32, np.float64, np.float16]
FLOAT16_EXACT_LIMIT = 2048


def _onnx(opset):
    def call(x, w, b, attrs):
        return convt.onnx.conv_transpose(x, w, b, opset=opset, **attrs)
    return call


def _core(method):
    def call(x, w, b, attrs):
        return convt.conv_transpose(x, w, b, method=method, **attrs)
    return call


FRONTS = {
    "onnx11": _onnx(11),
    "onnx22": _onnx(22),
    "core-auto": _core("auto"),
    "core-reference": _core("reference"),
    "core-direct": _core("direct"),
}


def _cast(case, dtype):
    x = case["x"].astype(dtype)
    w = case["W"].astype(dtype)
    b = None if case["B"] is None else case["B"].astype(dtype)
    y = case["y"].astype(dtype)
    # Casting must be lossless, or the example would not test what the spec says.
    assert np.array_equal(x.astype(np.float32), case["x"])
    assert np.array_equal(w.astype(np.float32), case["W"])
    return x, w, b, y


def _skip_inexact(case, dtype):
    if dtype == np.float16 and np.abs(case["y"]).max() > FLOAT16_EXACT_LIMIT:
        pytest.skip("|y| > 2048 is not exact in float16")


def _check(front, x, w, b, attrs, expected):
    x_before, w_before = x.copy(), w.copy()
    y = FRONTS[front](x, w, b, dict(attrs))
    assert isinstance(y, np.ndarray)
    assert y.dtype == x.dtype
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(w, w_before)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_onnx_spec_example(case, front, dtype):
    _skip_inexact(case, dtype)
    x, w, b, y = _cast(case, dtype)
    _check(front, x, w, b, case["attrs"], y)


# method="fft" is exact only to its tolerance (tests/conftest.py): the same examples, within it.
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_onnx_spec_example_fft(case, dtype):
    _skip_inexact(case, dtype)
    x, w, b, _ = _cast(case, dtype)
    y = convt.conv_transpose(x, w, b, method="fft", **case["attrs"])
    assert_close(y, case["y"].astype(np.float64), "fft", np.dtype(dtype).name)


# Not in the spec: the same examples with a bias, whose expected value is y + B on every output
# position -- including the trailing row and column of test_convtranspose_output_shape that no
# input reaches.
@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_onnx_spec_example_with_bias(case, front):
    x, w, _, y = _cast(case, np.float32)
    c_out = y.shape[1]
    b = np.arange(1, c_out + 1, dtype=np.float32) * np.float32(-100)
    expected = y + b.reshape((1, c_out) + (1,) * (y.ndim - 2))
    _check(front, x, w, b, case["attrs"], expected)


# ONNX ConvTranspose-1 splits an odd total padding the other way round from opset 11
# (spec 004, "ConvTranspose - 1" summary):
#   opset 1:  auto_pad != SAME_UPPER -> pads_begin = T/2 (floor); SAME_UPPER -> T - T/2
#   opset 11: SAME_UPPER -> pads_begin = T/2 (floor); otherwise -> T - T/2
# x = [1, 2, 3], W = [1, 1, 1], stride 1, dilation 1, output_shape [4]:
#   full length F = (3 - 1)*1 + (3 - 1)*1 + 1 = 5, total padding T = F - 4 = 1.
#   full output y[o] = sum over i + k = o of x[i]:
#     o=0: 1   o=1: 1+2 = 3   o=2: 1+2+3 = 6   o=3: 2+3 = 5   o=4: 3
#   pads_begin 0 (floor of 1/2) keeps [1, 3, 6, 5]; pads_begin 1 (1 - 0) keeps [3, 6, 5, 3].
_FULL = np.array([1.0, 3.0, 6.0, 5.0, 3.0])
_BEGIN_FLOOR = _FULL[0:4]  # [1, 3, 6, 5]
_BEGIN_CEIL = _FULL[1:5]  # [3, 6, 5, 3]
_OPSET_SPLIT = [
    (1, "NOTSET", _BEGIN_FLOOR),
    (1, "SAME_LOWER", _BEGIN_FLOOR),
    (1, "SAME_UPPER", _BEGIN_CEIL),
    (11, "NOTSET", _BEGIN_CEIL),
    (11, "SAME_LOWER", _BEGIN_CEIL),
    (11, "SAME_UPPER", _BEGIN_FLOOR),
    (22, "NOTSET", _BEGIN_CEIL),
    (22, "SAME_LOWER", _BEGIN_CEIL),
    (22, "SAME_UPPER", _BEGIN_FLOOR),
]


@pytest.mark.parametrize("dtype", DTYPES[:2], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "opset, auto_pad, expected", _OPSET_SPLIT, ids=[f"opset{o}-{a}" for o, a, _ in _OPSET_SPLIT]
)
def test_onnx_odd_total_padding_split(opset, auto_pad, expected, dtype):
    x = np.array([[[1.0, 2.0, 3.0]]], dtype=dtype)
    w = np.ones((1, 1, 3), dtype=dtype)
    y = convt.onnx.conv_transpose(
        x, w, opset=opset, auto_pad=auto_pad, strides=[1], dilations=[1], output_shape=[4]
    )
    assert y.dtype == dtype
    assert y.shape == (1, 1, 4)
    np.testing.assert_array_equal(y, expected.reshape(1, 1, 4).astype(dtype))


@pytest.mark.parametrize("method", ["reference", "direct"])
@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_LOWER", "SAME_UPPER"])
def test_core_odd_total_padding_split_is_opset11(auto_pad, method):
    x = np.array([[[1.0, 2.0, 3.0]]])
    w = np.ones((1, 1, 3))
    y = convt.conv_transpose(x, w, auto_pad=auto_pad, output_shape=[4], method=method)
    expected = _BEGIN_FLOOR if auto_pad == "SAME_UPPER" else _BEGIN_CEIL
    assert y.shape == (1, 1, 4)
    np.testing.assert_array_equal(y, expected.reshape(1, 1, 4))


def test_openvino_spec_example():
    # spec 003, "Example": data [1, 20, 224, 224], filter [20, 10, 3, 3], strides 2,
    # pads_begin = pads_end = 1, dilations 1 -> output [1, 10, 447, 447]
    # (447 = (224 - 1)*2 + 3 - 1 - 1).
    rng = np.random.default_rng(3)
    data = rng.standard_normal((1, 20, 224, 224)).astype(np.float32)
    filt = rng.standard_normal((20, 10, 3, 3)).astype(np.float32)
    y = convt.openvino.convolution_backprop_data(
        data, filt, strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1]
    )
    assert y.dtype == np.float32
    assert y.shape == (1, 10, 447, 447)
    expected = convt.conv_transpose(
        data, filt, strides=(2, 2), pads=(1, 1, 1, 1), method="reference"
    )
    assert expected.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
